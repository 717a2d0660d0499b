/*
 * engine.c — the planner's inputs from a bundle file and this machine, and
 * the plan for a budget (engine.h).
 */
#include "engine.h"

#include "base/log.h"
#include "base/timer.h"
#include "kernels/kernels.h"
#include "sparse/offload.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* A cached probe older than this is flagged: disks fill, firmware and
   neighbours change, and flash slows with wear. */
#define PI_HW_MAX_AGE_DAYS 30

pi_status pi_engine_profile(const char *path, int64_t n_ctx, pi_mprofile **out) {
    *out = NULL;
    pi_lm *m;
    pi_status st = pi_lm_load_ex(path, PI_MAP_FILE, PI_LOAD_FFN_ON_FLASH | PI_LOAD_UNCHECKED, &m);
    if (st) return st;
    if (!m->bundled) {
        pi_lm_free(m);
        return pi_error(PI_ERR_INVALID, "%s has no neuron bundles: --mem-budget reads the FFN from a bundle file; "
                        "make one with: pinfer convert -m %s --bundle -o OUT.gguf", path, path);
    }
    if (n_ctx <= 0) n_ctx = m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096;
    pi_budget_needs z;
    st = pi_offload_measure(m, n_ctx, 0, 4096, &z);
    if (!st) st = pi_mprofile_make(m->gguf, path, &z, out);
    pi_lm_free(m);
    return st;
}

/* Figures that may not describe the disk the model is on: say so, with the
   command that measures it again (the plan is still made). */
static void check_hw_fits(const pi_hw *hw, const char *hw_path, const char *model_path, uint64_t model_dev) {
    struct stat hs;
    if (hw->fs_dev && model_dev && hw->fs_dev != model_dev)
        PI_LOGW("%s was measured on another filesystem (device %llu) than %s (device %llu): its flash figures may "
                "not hold; measure this one with: pinfer hwprobe -m %s -o %s",
                hw_path, (unsigned long long)hw->fs_dev, model_path, (unsigned long long)model_dev, model_path, hw_path);
    if (stat(hw_path, &hs) == 0) {
        const double days = difftime(time(NULL), hs.st_mtime) / 86400.0;
        if (days > PI_HW_MAX_AGE_DAYS)
            PI_LOGW("%s is %.0f days old: re-measure with: pinfer hwprobe -m %s -o %s", hw_path, days, model_path,
                    hw_path);
    }
    const char *kb = pi_kernels_build_id();
    if (!hw->kernels_build[0])
        PI_LOGW("%s does not say which build measured its kernel rates (a file from before format version 2): the "
                "plan may price compute at another build's rates; re-measure with: pinfer hwprobe -m %s -o %s",
                hw_path, model_path, hw_path);
    else if (strcmp(hw->kernels_build, kb))
        PI_LOGW("%s: its kernel rates were measured by another build of pinfer's kernels (%s; this build: %s), and "
                "the plan prices compute at them; re-measure them (the flash figures stay) with: pinfer hwprobe "
                "--compute -o %s",
                hw_path, hw->kernels_build, kb, hw_path);
    if (hw->io_buffered)
        PI_LOGW("%s: the flash figures are the page cache's (the filesystem refused O_DIRECT): predictions of "
                "offloaded speed are optimistic", hw_path);
    if (!(hw->read_cpu_us > 0.0))
        PI_LOGW("%s does not hold the CPU time a read costs (a file from before format version 3): the plan takes "
                "%.1f us a read; measure it with: pinfer hwprobe -m %s -o %s",
                hw_path, PI_HW_READ_CPU_S * 1e6, model_path, hw_path);
    if (!hw->io_huge_pages && !hw->io_buffered)
        PI_LOGW("%s: its reads went into 4 KiB pages (a file from before format version 6), the engine's go into "
                "huge pages: where the disk splits a read by page (a virtio disk: a 1 MiB read is 256 pieces, more "
                "than its queue's 254) its rates, the sequential one most, are below what the engine reads at, and "
                "an output head on flash is priced 2-4x slow; measure again with: pinfer hwprobe -m %s -o %s",
                hw_path, model_path, hw_path);
    if (!(hw->read_busy_k > 0.0) && !(hw->run_read_rate > 0.0))
        PI_LOGW("%s does not hold the disk's reads with the cores computing (a file from before format version 4): "
                "the plan prices the reads it hides behind compute at the idle rate, which a busy machine may not "
                "reach; measure it with: pinfer hwprobe -m %s -o %s",
                hw_path, model_path, hw_path);
}

/* The hardware file for model_path: hw_path when given, else the cache file
   of the model's filesystem (NULL when there is none to name); *dev is that
   filesystem's st_dev (0: unknown). */
static const char *hw_file(const char *model_path, const char *hw_path, char *buf, size_t n, uint64_t *dev) {
    struct stat sb;
    *dev = stat(model_path, &sb) == 0 ? (uint64_t)sb.st_dev : 0;
    return hw_path ? hw_path : pi_hw_default_path(buf, n, *dev);
}

static void utc_date(double when, char *date, size_t n) {
    snprintf(date, n, "?");
    const time_t t = (time_t)when;
    struct tm tm;
    if (gmtime_r(&t, &tm)) strftime(date, n, "%Y-%m-%d %H:%M UTC", &tm);
}

/* The reads a run achieved, where the file has them, replace the probe's
   figures: said once per process, with the figures. */
static void apply_run(pi_hw *hw, const char *path) {
    static atomic_bool said;
    const double rate = hw->run_read_rate, bytes = hw->run_read_bytes, when = hw->run_time;
    const double seq = hw->run_seq_gbs, seq_when = hw->run_seq_time;
    const int qd = hw->run_qd;
    const double comp_when = hw->run_compute_time, comp_k = hw->run_compute_k;
    double ks;
    const double k = pi_hw_apply_run(hw, &ks), kc = pi_hw_apply_compute(hw);
    if (!(rate > 0.0 || seq > 0.0 || comp_k > 0.0) || atomic_exchange(&said, true)) return;
    char date[32];
    if (rate > 0.0) {
        utc_date(when, date, sizeof date);
        PI_LOGW("flash reads priced at what pinfer bench achieved on this disk (%s): %.1fK reads/s of %.1f KiB at "
                "queue depth %d, %.2fx the probe's figures in %s (pinfer hwprobe measures again and drops it)",
                date, rate * 1e-3, bytes / 1024.0, qd, k, path);
    }
    if (seq > 0.0) {
        utc_date(seq_when, date, sizeof date);
        PI_LOGW("the output head's reads from flash priced at what pinfer bench achieved (%s): %.2f GB/s, %.2fx the "
                "probe's sequential rate in %s", date, seq, ks, path);
    }
    if (comp_k > 0.0) {
        utc_date(comp_when, date, sizeof date);
        PI_LOGW("compute priced at what pinfer bench achieved with every row in memory (%s): %.2fx the probe's memory "
                "and kernel rates in %s", date, kc, path);
    }
}

pi_status pi_engine_hw_cached(const char *model_path, const char *hw_path, pi_hw *out) {
    char buf[1024];
    uint64_t dev;
    const char *path = hw_file(model_path, hw_path, buf, sizeof buf, &dev);
    pi_status st = path ? pi_hw_load(path, out) : PI_ERR_NOT_FOUND;
    if (!hw_path && (st == PI_ERR_NOT_FOUND || st == PI_ERR_IO))
        return pi_error(PI_ERR_NOT_FOUND, "no hardware figures for %s's disk (%s): measure it with pinfer hwprobe -m %s",
                        model_path, path ? path : "no cache file", model_path);
    return st;
}

pi_status pi_engine_hw_note_run(const char *model_path, double read_bytes, int queue_depth, double reads_per_s,
                                double seq_gbs, double compute_k, char *path_out, size_t path_n) {
    if (path_out && path_n) path_out[0] = '\0';
    char buf[1024];
    uint64_t dev;
    const char *path = hw_file(model_path, NULL, buf, sizeof buf, &dev);
    if (!dev) return pi_error(PI_ERR_IO, "%s: cannot tell its filesystem (the file is gone?)", model_path);
    pi_hw hw;
    struct stat sb;
    pi_status st = path ? pi_hw_load(path, &hw) : PI_ERR_NOT_FOUND;
    if (st) return st;
    if (stat(path, &sb) != 0) return pi_error(PI_ERR_IO, "%s: %s", path, strerror(errno));
    /* figures out of range reach pi_hw_save, which refuses them */
    if (read_bytes != 0.0 || queue_depth != 0 || reads_per_s != 0.0)
        pi_hw_note_run(&hw, read_bytes, queue_depth, reads_per_s, (double)time(NULL));
    if (seq_gbs != 0.0) pi_hw_note_seq(&hw, seq_gbs, (double)time(NULL));
    /* compute_k is over the figures the plan was priced at: the probe's times the factor kept */
    if (compute_k != 0.0) pi_hw_note_compute(&hw, compute_k * pi_hw_compute_factor(&hw), (double)time(NULL));
    if ((st = pi_hw_save(&hw, path))) return st;
    /* the file's time stays the probe's: its age is what says when to measure again */
    const struct timespec ts[2] = {sb.st_atim, sb.st_mtim};
    (void)utimensat(AT_FDCWD, path, ts, 0);
    if (path_out && path_n) snprintf(path_out, path_n, "%s", path);
    return PI_OK;
}

pi_status pi_engine_hw(const char *model_path, const char *hw_path, pi_hw *out) {
    char buf[1024];
    uint64_t dev;
    const char *path = hw_file(model_path, hw_path, buf, sizeof buf, &dev);
    pi_status st = path ? pi_hw_load(path, out) : PI_ERR_NOT_FOUND;
    if (!st) check_hw_fits(out, path, model_path, dev);
    if (!st) apply_run(out, path);
    if (!st || hw_path) return st;
    PI_LOGW("no hardware figures for this disk yet: measuring memory, kernels and flash once now "
            "(pinfer hwprobe --quick, 10-20 s; kept in %s)", path ? path : "no cache file");
    const double t0 = pi_time_s();
    pi_hwprobe_opts po = {.file = model_path, .quick = true};
    if ((st = pi_hwprobe_run(&po, out))) return st;
    PI_LOGW("hardware measured in %.1f s", pi_time_s() - t0);
    if (path && pi_hw_save(out, path)) PI_LOGW("%s", pi_last_error());
    return PI_OK;
}

/* pi_plan_solve, with the plan's file fields filled. */
static pi_status solve(const pi_mprofile *mp, const pi_hw *hw, const char *model_path, const pi_plan_limits *lim,
                       pi_plan *out) {
    pi_status st = pi_plan_solve(mp, hw, lim, out);
    if (st && st != PI_ERR_INVALID) return st;
    out->have_stats = mp->have_stats;
    snprintf(out->model, sizeof out->model, "%s", model_path);
    struct stat sb;
    out->model_size = stat(model_path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
    return st;
}

pi_status pi_engine_plan(const char *model_path, const char *hw_path, int64_t n_ctx, const pi_plan_limits *lim,
                         pi_plan *out, bool *hw_failed) {
    if (hw_failed) *hw_failed = false;
    pi_mprofile *mp = NULL;
    pi_status st = pi_engine_profile(model_path, n_ctx, &mp);
    if (st) return st;
    /* the file's own verdict first, before the machine is measured */
    if (!(st = pi_mprofile_check_budget(mp, lim->mem_budget))) {
        pi_hw hw;
        if ((st = pi_engine_hw(model_path, hw_path, &hw))) {
            if (hw_failed) *hw_failed = true;
        } else {
            st = solve(mp, &hw, model_path, lim, out);
            if ((!st || st == PI_ERR_INVALID) && !mp->have_stats)
                PI_LOGW("%s has no activation counts: the plan assumes uniform activity and spreads the hot neurons "
                        "evenly over the layers; for a plan from measured counts: pinfer profile -m PLAIN.gguf "
                        "-o stats.gguf, then pinfer convert -m PLAIN.gguf --reorder stats.gguf --bundle -o %s",
                        model_path, model_path);
        }
    }
    pi_mprofile_free(mp);
    return st;
}
