/*
 * hwfile.c — the hwprobe cache file (save, load, a strict parser) and the
 * interpolation helpers the cost model reads it through.
 *
 * Format, version 6 (versions 1 to 5, read too, are the same without
 * io_huge_pages; 1 to 4 also without read_issue_us; 1 to 3 also without
 * read_busy_k; 1 and 2 also without read_cpu_us; version 1 without
 * kernels_build): text lines of printable
 * ASCII, fields separated by spaces or tabs; blank lines and lines
 * starting with '#' are ignored.
 *
 *   pinfer-hwprobe 6                       header, the first record
 *   cpu avx512-2c                          kernel set and core count (cache key)
 *   kernels_build <id>                     optional: pi_kernels_build_id() of the build that
 *                                          measured the kernel rates (one printable word)
 *   n_threads 2                            figures exist for 1..n_threads
 *   quick 0|1
 *   other_cpu <cores>                      other processes' load meanwhile (>= 0)
 *   mem_bw <threads> <GB/s> [est]          one per thread count, all required
 *   matvec|rowdot|axpy <type> <threads> <GB/s> [est]   any subset; absent = 0
 *   io_backend io_uring|pread
 *   io_buffered 0|1                        1: O_DIRECT was refused (page cache figures)
 *   io_huge_pages 0|1                      optional: 1: the reads went into memory with huge
 *                                          pages advised, as the engine's; absent: 0
 *   io_file_bytes <bytes>                  the file the random reads were spread over
 *   fs_dev <st_dev>                        decimal
 *   seq_read_gbs <GB/s>
 *   read_cpu_us <us>                       optional: the machine's CPU time per random read
 *                                          (submission and completion)
 *   read_issue_us <us>                     optional: the submitting thread's time inside a
 *                                          read's submission
 *   read_busy_k <factor>                   optional, in (0, 1]: 8 KiB reads at the deepest queue
 *                                          with the cores streaming memory over the same idle
 *   block <6 increasing sizes in bytes>
 *   qd <5 increasing queue depths>
 *   read <block> <qd> <reads/s> <mean latency us> [est]   one per (block, qd), all required
 *   run_reads <bytes> <qd> <reads/s> <unix time>   optional, at most one: the engine's own
 *                                          reads in a run after the probe (pi_hw.run_*)
 *   run_seq <GB/s> <unix time>             optional, at most one: the output head's reads
 *   run_compute <factor> <unix time>       optional, at most one: a run's compute over the
 *                                          probe's figures (pi_hw.run_compute_*)
 *   end                                    the last record: a file without it is truncated
 *
 * "est" marks a figure filled in by interpolation rather than measured.
 * Records other than the header and "end" may come in any order, except that
 * mem_bw and kernel lines need n_threads before them and read lines need
 * block and qd. Unknown keys, repeated records (also two lines for the same
 * mem_bw / kernel / read point), extra or missing fields, numbers that do not
 * parse whole, are not finite, or are out of range (every figure is > 0) are
 * errors naming the line. Unknown keys are errors rather than skipped: the
 * version number is what changes when the format does.
 *
 * Doubles are written with the shortest of %.15g/%.16g/%.17g that reads back
 * to the same bits, so a save/load round trip is exact. Numbers are read with
 * strtod/strtoull in the C locale (pinfer never calls setlocale).
 */
#include "hwprobe.h"

#include "base/outfile.h"
#include "kernels/types.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define HW_HEADER "pinfer-hwprobe"
#define HW_LINE_MAX 1024      /* longest line accepted */
#define HW_MAX_TOK 16         /* fields per line */
#define HW_FILE_MAX (1u << 20) /* a real file is a few KiB */
#define HW_BLOCK_MIN 512
#define HW_BLOCK_MAX (64 << 20)
#define HW_QD_MAX 65536

static const char *const k_kernel_names[PI_HW_N_KERNELS] = {"matvec", "rowdot", "axpy"};

static double (*kernel_table(pi_hw *hw, int what))[PI_HW_MAX_THREADS + 1] {
    return what == PI_HW_MATVEC ? hw->matvec : what == PI_HW_ROWDOT ? hw->rowdot : hw->axpy;
}

static const double (*kernel_table_c(const pi_hw *hw, int what))[PI_HW_MAX_THREADS + 1] {
    return what == PI_HW_MATVEC ? hw->matvec : what == PI_HW_ROWDOT ? hw->rowdot : hw->axpy;
}

/* ---- validation (shared by save and load) ---- */

static bool token_ok(const char *s, size_t cap) {
    size_t n = strnlen(s, cap);
    if (n == 0 || n >= cap) return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] <= ' ' || s[i] > '~') return false;
    return true;
}

static bool figure_ok(double v) { return isfinite(v) && v > 0.0; }

pi_status pi_hw_validate(const pi_hw *hw) {
    if (!hw) return pi_error(PI_ERR_INVALID, "hwprobe: no result");
    int n = hw->n_threads;
    if (n < 1 || n > PI_HW_MAX_THREADS)
        return pi_error(PI_ERR_INVALID, "n_threads %d is not in 1..%d", n, PI_HW_MAX_THREADS);
    if (!token_ok(hw->cpu, sizeof hw->cpu))
        return pi_error(PI_ERR_INVALID, "cpu: empty, too long, or not one printable word");
    if (hw->kernels_build[0] && !token_ok(hw->kernels_build, sizeof hw->kernels_build))
        return pi_error(PI_ERR_INVALID, "kernels_build: too long, or not one printable word");
    if (!token_ok(hw->io_backend, sizeof hw->io_backend))
        return pi_error(PI_ERR_INVALID, "io_backend: empty, too long, or not one printable word");
    for (int t = 0; t <= PI_HW_MAX_THREADS; t++) {
        bool in = t >= 1 && t <= n;
        if (in ? !figure_ok(hw->mem_bw[t]) : hw->mem_bw[t] != 0.0)
            return pi_error(PI_ERR_INVALID, "mem_bw for %d threads is %g", t, hw->mem_bw[t]);
        if (hw->mem_bw_est[t] && !in) return pi_error(PI_ERR_INVALID, "mem_bw_est set for %d threads", t);
    }
    for (int w = 0; w < PI_HW_N_KERNELS; w++) {
        const double(*tab)[PI_HW_MAX_THREADS + 1] = kernel_table_c(hw, w);
        for (int ty = 0; ty < PI_TYPE_COUNT; ty++)
            for (int t = 0; t <= PI_HW_MAX_THREADS; t++) {
                double v = tab[ty][t];
                bool may = t >= 1 && t <= n && pi_type_get((uint32_t)ty);
                if (v != 0.0 && (!may || !figure_ok(v)))
                    return pi_error(PI_ERR_INVALID, "%s of type %d at %d threads is %g", k_kernel_names[w], ty, t,
                                    v);
                if (hw->kernel_est[w][ty][t] && v == 0.0)
                    return pi_error(PI_ERR_INVALID, "%s of type %d at %d threads: marked estimated but absent",
                                    k_kernel_names[w], ty, t);
            }
    }
    for (int b = 0; b < PI_HW_N_BLOCKS; b++)
        if (hw->block[b] < HW_BLOCK_MIN || hw->block[b] > HW_BLOCK_MAX || (b && hw->block[b] <= hw->block[b - 1]))
            return pi_error(PI_ERR_INVALID, "block sizes must increase within %d..%d bytes", HW_BLOCK_MIN,
                            HW_BLOCK_MAX);
    for (int q = 0; q < PI_HW_N_QD; q++)
        if (hw->qd[q] < 1 || hw->qd[q] > HW_QD_MAX || (q && hw->qd[q] <= hw->qd[q - 1]))
            return pi_error(PI_ERR_INVALID, "queue depths must increase within 1..%d", HW_QD_MAX);
    for (int b = 0; b < PI_HW_N_BLOCKS; b++)
        for (int q = 0; q < PI_HW_N_QD; q++)
            if (!figure_ok(hw->read_iops[b][q]) || !figure_ok(hw->read_lat_us[b][q]))
                return pi_error(PI_ERR_INVALID, "read %d bytes at qd %d: %g reads/s, %g us", hw->block[b], hw->qd[q],
                                hw->read_iops[b][q], hw->read_lat_us[b][q]);
    if (!figure_ok(hw->seq_read_gbs)) return pi_error(PI_ERR_INVALID, "seq_read_gbs is %g", hw->seq_read_gbs);
    if (hw->read_cpu_us != 0.0 && !figure_ok(hw->read_cpu_us))
        return pi_error(PI_ERR_INVALID, "read_cpu_us is %g", hw->read_cpu_us);
    if (hw->read_issue_us != 0.0 && !figure_ok(hw->read_issue_us))
        return pi_error(PI_ERR_INVALID, "read_issue_us is %g", hw->read_issue_us);
    if (hw->read_busy_k != 0.0 && !(figure_ok(hw->read_busy_k) && hw->read_busy_k <= 1.0))
        return pi_error(PI_ERR_INVALID, "read_busy_k is %g (expected a factor in (0, 1])", hw->read_busy_k);
    if (!isfinite(hw->other_cpu) || hw->other_cpu < 0 || signbit(hw->other_cpu))
        return pi_error(PI_ERR_INVALID, "other_cpu is %g", hw->other_cpu);
    const bool run = hw->run_read_rate != 0.0 || hw->run_read_bytes != 0.0 || hw->run_time != 0.0 || hw->run_qd != 0;
    if (run && (!figure_ok(hw->run_read_rate) || !figure_ok(hw->run_time) ||
                !(hw->run_read_bytes >= HW_BLOCK_MIN && hw->run_read_bytes <= HW_BLOCK_MAX) || hw->run_qd < 1 ||
                hw->run_qd > HW_QD_MAX))
        return pi_error(PI_ERR_INVALID, "run_reads: %g bytes at qd %d, %g reads/s, time %g", hw->run_read_bytes,
                        hw->run_qd, hw->run_read_rate, hw->run_time);
    if ((hw->run_seq_gbs != 0.0 || hw->run_seq_time != 0.0) && (!figure_ok(hw->run_seq_gbs) || !figure_ok(hw->run_seq_time)))
        return pi_error(PI_ERR_INVALID, "run_seq: %g GB/s, time %g", hw->run_seq_gbs, hw->run_seq_time);
    if ((hw->run_compute_k != 0.0 || hw->run_compute_time != 0.0) &&
        (!figure_ok(hw->run_compute_k) || !figure_ok(hw->run_compute_time)))
        return pi_error(PI_ERR_INVALID, "run_compute: factor %g, time %g", hw->run_compute_k, hw->run_compute_time);
    return PI_OK;
}

/* ---- writing ---- */

typedef struct wbuf {
    char *buf;
    size_t cap, len;
} wbuf;

static void PI_PRINTF(2, 3) wr(wbuf *w, const char *fmt, ...) {
    size_t room = w->len < w->cap ? w->cap - w->len : 0;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(room ? w->buf + w->len : NULL, room, fmt, ap);
    va_end(ap);
    if (k > 0) w->len += (size_t)k;
}

/* The shortest %.Ng (N = 15..17) that reads back to v exactly. */
static const char *fmt_double(char *s, size_t n, double v) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(s, n, "%.*g", prec, v);
        if (strtod(s, NULL) == v) break;
    }
    return s;
}

long pi_hw_format(const pi_hw *hw, char *buf, size_t n) {
    if (pi_hw_validate(hw) != PI_OK) return -1;
    wbuf w = {buf, n, 0};
    if (n) buf[0] = '\0';
    char d0[40], d1[40];
    wr(&w, "%s %d\n", HW_HEADER, PI_HW_FILE_VERSION);
    wr(&w, "# pinfer hwprobe: GB/s are 1e9 bytes/s; \"est\": interpolated, not measured\n");
    wr(&w, "cpu %s\n", hw->cpu);
    if (hw->kernels_build[0]) wr(&w, "kernels_build %s\n", hw->kernels_build);
    wr(&w, "n_threads %d\n", hw->n_threads);
    wr(&w, "quick %d\n", hw->quick ? 1 : 0);
    wr(&w, "# other_cpu: cores other processes kept busy meanwhile (figures are low when > 0.25)\n");
    wr(&w, "other_cpu %s\n", fmt_double(d0, sizeof d0, hw->other_cpu));
    wr(&w, "# mem_bw <threads> <GB/s>\n");
    for (int t = 1; t <= hw->n_threads; t++)
        wr(&w, "mem_bw %d %s%s\n", t, fmt_double(d0, sizeof d0, hw->mem_bw[t]), hw->mem_bw_est[t] ? " est" : "");
    wr(&w, "# <kernel> <type> <threads> <weight GB/s>\n");
    for (int k = 0; k < PI_HW_N_KERNELS; k++) {
        const double(*tab)[PI_HW_MAX_THREADS + 1] = kernel_table_c(hw, k);
        for (int ty = 0; ty < PI_TYPE_COUNT; ty++)
            for (int t = 1; t <= hw->n_threads; t++)
                if (tab[ty][t] != 0.0)
                    wr(&w, "%s %s %d %s%s\n", k_kernel_names[k], pi_type_name((uint32_t)ty), t,
                       fmt_double(d0, sizeof d0, tab[ty][t]), hw->kernel_est[k][ty][t] ? " est" : "");
    }
    wr(&w, "io_backend %s\n", hw->io_backend);
    wr(&w, "io_buffered %d\n", hw->io_buffered ? 1 : 0);
    if (hw->io_huge_pages) wr(&w, "io_huge_pages 1\n");
    wr(&w, "io_file_bytes %llu\n", (unsigned long long)hw->io_file_bytes);
    wr(&w, "fs_dev %llu\n", (unsigned long long)hw->fs_dev);
    wr(&w, "seq_read_gbs %s\n", fmt_double(d0, sizeof d0, hw->seq_read_gbs));
    if (hw->read_cpu_us > 0.0) wr(&w, "read_cpu_us %s\n", fmt_double(d0, sizeof d0, hw->read_cpu_us));
    if (hw->read_issue_us > 0.0) wr(&w, "read_issue_us %s\n", fmt_double(d0, sizeof d0, hw->read_issue_us));
    if (hw->read_busy_k > 0.0) {
        wr(&w, "# read_busy_k: random reads with the cores computing, over idle\n");
        wr(&w, "read_busy_k %s\n", fmt_double(d0, sizeof d0, hw->read_busy_k));
    }
    wr(&w, "block");
    for (int b = 0; b < PI_HW_N_BLOCKS; b++) wr(&w, " %d", hw->block[b]);
    wr(&w, "\nqd");
    for (int q = 0; q < PI_HW_N_QD; q++) wr(&w, " %d", hw->qd[q]);
    wr(&w, "\n# read <block bytes> <queue depth> <reads/s> <mean latency us>\n");
    for (int b = 0; b < PI_HW_N_BLOCKS; b++)
        for (int q = 0; q < PI_HW_N_QD; q++)
            wr(&w, "read %d %d %s %s%s\n", hw->block[b], hw->qd[q], fmt_double(d0, sizeof d0, hw->read_iops[b][q]),
               fmt_double(d1, sizeof d1, hw->read_lat_us[b][q]), hw->read_est[b][q] ? " est" : "");
    if (hw->run_read_rate > 0.0) {
        char d2[40];
        wr(&w, "# run_reads <mean read bytes> <queue depth> <reads/s> <unix time>: achieved by the engine\n");
        wr(&w, "run_reads %s %d %s %s\n", fmt_double(d0, sizeof d0, hw->run_read_bytes), hw->run_qd,
           fmt_double(d1, sizeof d1, hw->run_read_rate), fmt_double(d2, sizeof d2, hw->run_time));
    }
    if (hw->run_seq_gbs > 0.0) {
        wr(&w, "# run_seq <GB/s> <unix time>: the output head's sequential reads achieved by the engine\n");
        wr(&w, "run_seq %s %s\n", fmt_double(d0, sizeof d0, hw->run_seq_gbs),
           fmt_double(d1, sizeof d1, hw->run_seq_time));
    }
    if (hw->run_compute_k > 0.0) {
        wr(&w, "# run_compute <factor> <unix time>: compute achieved by the engine over the figures above\n");
        wr(&w, "run_compute %s %s\n", fmt_double(d0, sizeof d0, hw->run_compute_k),
           fmt_double(d1, sizeof d1, hw->run_compute_time));
    }
    wr(&w, "end\n");
    return (long)w.len;
}

/* mkdir -p of the directory part of path (0755; existing ones are fine). */
static pi_status make_parents(const char *path) {
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return pi_error(PI_ERR_INVALID, "%s: path too long", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return PI_OK;
    *slash = '\0';
    struct stat sb;
    if (stat(dir, &sb) == 0) return PI_OK;
    for (char *p = dir + 1;; p++) {
        if (*p && *p != '/') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            return pi_error(PI_ERR_IO, "%s: cannot create directory %s: %s", path, dir, strerror(errno));
        *p = c;
        if (!c) return PI_OK;
    }
}

pi_status pi_hw_save(const pi_hw *hw, const char *path) {
    if (!path) return pi_error(PI_ERR_INVALID, "hwprobe: no path to save to");
    long len = pi_hw_format(hw, NULL, 0);
    if (len < 0) return pi_error_prefix(PI_ERR_INVALID, "%s: not saved", path);
    pi_status st = make_parents(path);
    if (st) return st;
    char *text = malloc((size_t)len + 1);
    if (!text) return pi_error(PI_ERR_NOMEM, "%s: out of memory", path);
    pi_hw_format(hw, text, (size_t)len + 1);
    /* beside the path and renamed over it: readers never see half a file */
    pi_outfile *of;
    if (!(st = pi_outfile_open(path, &of))) {
        (void)fwrite(text, 1, (size_t)len, pi_outfile_stream(of)); /* a failure sets the error commit reports */
        st = pi_outfile_commit(of);
    }
    free(text);
    return st;
}

/* ---- reading ---- */

enum { K_CPU, K_NTHREADS, K_QUICK, K_IO_BACKEND, K_IO_BUFFERED, K_IO_FILE_BYTES, K_FS_DEV, K_SEQ, K_BLOCK, K_QD,
       K_OTHER_CPU, K_KERNELS_BUILD, K_READ_CPU, K_READ_BUSY, K_READ_ISSUE, K_IO_HUGE, K_SCALARS };
static const char *const k_scalar_names[K_SCALARS] = {"cpu",           "n_threads", "quick",        "io_backend",
                                                      "io_buffered",   "io_file_bytes", "fs_dev", "seq_read_gbs",
                                                      "block",         "qd",     "other_cpu",
                                                      "kernels_build", "read_cpu_us", "read_busy_k",
                                                      "read_issue_us", "io_huge_pages"};
/* The records a file may lack: those later versions added. */
static const bool k_scalar_optional[K_SCALARS] = {[K_KERNELS_BUILD] = true, [K_READ_CPU] = true, [K_READ_BUSY] = true,
                                                  [K_READ_ISSUE] = true, [K_IO_HUGE] = true};

typedef struct pstate {
    int line;                                                     /* current line, 1-based */
    int scalar_line[K_SCALARS];                                   /* where each was given; 0: not yet */
    int mem_bw_line[PI_HW_MAX_THREADS + 1];
    int kernel_line[PI_HW_N_KERNELS][PI_TYPE_COUNT][PI_HW_MAX_THREADS + 1];
    int read_line[PI_HW_N_BLOCKS][PI_HW_N_QD];
    int run_line, seq_line, compute_line;
} pstate;

static pi_status PI_PRINTF(3, 4) perr(const pstate *ps, pi_status st, const char *fmt, ...) {
    char msg[PI_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pi_error(st, "line %d: %s", ps->line, msg);
}

/* A whole non-negative decimal in [lo, hi]. */
static bool parse_int(const char *s, long long lo, long long hi, long long *out) {
    if (*s < '0' || *s > '9') return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static bool parse_u64(const char *s, uint64_t *out) {
    if (*s < '0' || *s > '9') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return false;
    *out = (uint64_t)v;
    return true;
}

/* A finite figure > 0 (decimal or hex float). Underflow to a subnormal is accepted. */
static bool parse_figure(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || !figure_ok(v)) return false;
    *out = v;
    return true;
}

static pi_status want_fields(const pstate *ps, const char *key, int ntok, int lo, int hi) {
    if (ntok - 1 < lo || ntok - 1 > hi) {
        if (lo == hi) return perr(ps, PI_ERR_FORMAT, "'%s' takes %d value%s, got %d", key, lo, lo == 1 ? "" : "s",
                                  ntok - 1);
        return perr(ps, PI_ERR_FORMAT, "'%s' takes %d to %d values, got %d", key, lo, hi, ntok - 1);
    }
    return PI_OK;
}

/* The optional trailing "est" of tok[i] (i < ntok); sets *est. */
static pi_status parse_est(const pstate *ps, char **tok, int ntok, int i, bool *est) {
    *est = false;
    if (i >= ntok) return PI_OK;
    if (strcmp(tok[i], "est")) return perr(ps, PI_ERR_FORMAT, "expected 'est' or nothing after the figure, got '%s'",
                                           tok[i]);
    *est = true;
    return PI_OK;
}

static pi_status need_threads(const pstate *ps, const pi_hw *hw, const char *key, const char *s, int *t) {
    if (!ps->scalar_line[K_NTHREADS]) return perr(ps, PI_ERR_FORMAT, "'%s' before 'n_threads'", key);
    long long v;
    if (!parse_int(s, 1, hw->n_threads, &v))
        return perr(ps, PI_ERR_FORMAT, "%s: thread count '%s' is not in 1..%d (n_threads)", key, s, hw->n_threads);
    *t = (int)v;
    return PI_OK;
}

static pi_status parse_scalar(pstate *ps, pi_hw *hw, int k, char **tok, int ntok) {
    const char *key = k_scalar_names[k];
    if (ps->scalar_line[k]) return perr(ps, PI_ERR_FORMAT, "'%s' repeated (first on line %d)", key, ps->scalar_line[k]);
    int nvals = k == K_BLOCK ? PI_HW_N_BLOCKS : k == K_QD ? PI_HW_N_QD : 1;
    pi_status st = want_fields(ps, key, ntok, nvals, nvals);
    if (st) return st;
    long long v;
    switch (k) {
    case K_CPU:
    case K_KERNELS_BUILD:
    case K_IO_BACKEND: {
        char *dst = k == K_CPU ? hw->cpu : k == K_KERNELS_BUILD ? hw->kernels_build : hw->io_backend;
        size_t cap = k == K_CPU ? sizeof hw->cpu : k == K_KERNELS_BUILD ? sizeof hw->kernels_build : sizeof hw->io_backend;
        if (strlen(tok[1]) >= cap) return perr(ps, PI_ERR_FORMAT, "%s: '%s' longer than %zu characters", key, tok[1],
                                               cap - 1);
        memcpy(dst, tok[1], strlen(tok[1]) + 1);
        break;
    }
    case K_NTHREADS:
        if (!parse_int(tok[1], 1, PI_HW_MAX_THREADS, &v))
            return perr(ps, PI_ERR_FORMAT, "n_threads: '%s' is not in 1..%d", tok[1], PI_HW_MAX_THREADS);
        hw->n_threads = (int)v;
        break;
    case K_QUICK:
    case K_IO_BUFFERED:
    case K_IO_HUGE:
        if (!parse_int(tok[1], 0, 1, &v)) return perr(ps, PI_ERR_FORMAT, "%s: expected 0 or 1, got '%s'", key, tok[1]);
        *(k == K_QUICK ? &hw->quick : k == K_IO_BUFFERED ? &hw->io_buffered : &hw->io_huge_pages) = v != 0;
        break;
    case K_IO_FILE_BYTES:
    case K_FS_DEV:
        if (!parse_u64(tok[1], k == K_FS_DEV ? &hw->fs_dev : &hw->io_file_bytes))
            return perr(ps, PI_ERR_FORMAT, "%s: '%s' is not a 64-bit unsigned decimal", key, tok[1]);
        break;
    case K_SEQ:
    case K_READ_CPU:
    case K_READ_ISSUE:
        if (!parse_figure(tok[1], k == K_SEQ ? &hw->seq_read_gbs : k == K_READ_CPU ? &hw->read_cpu_us
                                                                                 : &hw->read_issue_us))
            return perr(ps, PI_ERR_FORMAT, "%s: '%s' is not a finite number > 0", key, tok[1]);
        break;
    case K_READ_BUSY:
        if (!parse_figure(tok[1], &hw->read_busy_k) || hw->read_busy_k > 1.0)
            return perr(ps, PI_ERR_FORMAT, "read_busy_k: '%s' is not a factor in (0, 1]", tok[1]);
        break;
    case K_OTHER_CPU: {
        char *end;
        double d = strtod(tok[1], &end);
        if (end == tok[1] || *end || !isfinite(d) || d < 0 || signbit(d))
            return perr(ps, PI_ERR_FORMAT, "other_cpu: '%s' is not a finite number >= 0", tok[1]);
        hw->other_cpu = d;
        break;
    }
    case K_BLOCK:
        for (int b = 0; b < PI_HW_N_BLOCKS; b++) {
            if (!parse_int(tok[1 + b], HW_BLOCK_MIN, HW_BLOCK_MAX, &v))
                return perr(ps, PI_ERR_FORMAT, "block: '%s' is not a size in %d..%d bytes", tok[1 + b], HW_BLOCK_MIN,
                            HW_BLOCK_MAX);
            if (b && v <= hw->block[b - 1]) return perr(ps, PI_ERR_FORMAT, "block: sizes must increase");
            hw->block[b] = (int)v;
        }
        break;
    case K_QD:
        for (int q = 0; q < PI_HW_N_QD; q++) {
            if (!parse_int(tok[1 + q], 1, HW_QD_MAX, &v))
                return perr(ps, PI_ERR_FORMAT, "qd: '%s' is not a queue depth in 1..%d", tok[1 + q], HW_QD_MAX);
            if (q && v <= hw->qd[q - 1]) return perr(ps, PI_ERR_FORMAT, "qd: queue depths must increase");
            hw->qd[q] = (int)v;
        }
        break;
    }
    ps->scalar_line[k] = ps->line;
    return PI_OK;
}

static pi_status parse_mem_bw(pstate *ps, pi_hw *hw, char **tok, int ntok) {
    pi_status st = want_fields(ps, "mem_bw", ntok, 2, 3);
    int t;
    if (st || (st = need_threads(ps, hw, "mem_bw", tok[1], &t))) return st;
    if (ps->mem_bw_line[t])
        return perr(ps, PI_ERR_FORMAT, "mem_bw for %d threads repeated (first on line %d)", t, ps->mem_bw_line[t]);
    if (!parse_figure(tok[2], &hw->mem_bw[t]))
        return perr(ps, PI_ERR_FORMAT, "mem_bw: '%s' is not a finite number > 0", tok[2]);
    if ((st = parse_est(ps, tok, ntok, 3, &hw->mem_bw_est[t]))) return st;
    ps->mem_bw_line[t] = ps->line;
    return PI_OK;
}

static pi_status parse_kernel(pstate *ps, pi_hw *hw, int k, char **tok, int ntok) {
    const char *key = k_kernel_names[k];
    pi_status st = want_fields(ps, key, ntok, 3, 4);
    if (st) return st;
    int ty = pi_type_from_name(tok[1]);
    if (ty < 0 || ty >= PI_TYPE_COUNT) return perr(ps, PI_ERR_FORMAT, "%s: unknown type '%s'", key, tok[1]);
    int t;
    if ((st = need_threads(ps, hw, key, tok[2], &t))) return st;
    if (ps->kernel_line[k][ty][t])
        return perr(ps, PI_ERR_FORMAT, "%s %s at %d threads repeated (first on line %d)", key,
                    pi_type_name((uint32_t)ty), t, ps->kernel_line[k][ty][t]);
    if (!parse_figure(tok[3], &kernel_table(hw, k)[ty][t]))
        return perr(ps, PI_ERR_FORMAT, "%s: '%s' is not a finite number > 0", key, tok[3]);
    if ((st = parse_est(ps, tok, ntok, 4, &hw->kernel_est[k][ty][t]))) return st;
    ps->kernel_line[k][ty][t] = ps->line;
    return PI_OK;
}

static pi_status parse_read(pstate *ps, pi_hw *hw, char **tok, int ntok) {
    pi_status st = want_fields(ps, "read", ntok, 4, 5);
    if (st) return st;
    if (!ps->scalar_line[K_BLOCK] || !ps->scalar_line[K_QD])
        return perr(ps, PI_ERR_FORMAT, "'read' before 'block' and 'qd'");
    long long bv, qv;
    int b = -1, q = -1;
    if (parse_int(tok[1], 0, HW_BLOCK_MAX, &bv))
        for (int i = 0; i < PI_HW_N_BLOCKS; i++)
            if (hw->block[i] == bv) b = i;
    if (b < 0) return perr(ps, PI_ERR_FORMAT, "read: block '%s' is not one of the 'block' record", tok[1]);
    if (parse_int(tok[2], 0, HW_QD_MAX, &qv))
        for (int i = 0; i < PI_HW_N_QD; i++)
            if (hw->qd[i] == qv) q = i;
    if (q < 0) return perr(ps, PI_ERR_FORMAT, "read: queue depth '%s' is not one of the 'qd' record", tok[2]);
    if (ps->read_line[b][q])
        return perr(ps, PI_ERR_FORMAT, "read %s %s repeated (first on line %d)", tok[1], tok[2], ps->read_line[b][q]);
    if (!parse_figure(tok[3], &hw->read_iops[b][q]))
        return perr(ps, PI_ERR_FORMAT, "read: reads/s '%s' is not a finite number > 0", tok[3]);
    if (!parse_figure(tok[4], &hw->read_lat_us[b][q]))
        return perr(ps, PI_ERR_FORMAT, "read: latency '%s' is not a finite number > 0", tok[4]);
    if ((st = parse_est(ps, tok, ntok, 5, &hw->read_est[b][q]))) return st;
    ps->read_line[b][q] = ps->line;
    return PI_OK;
}

static pi_status parse_run_reads(pstate *ps, pi_hw *hw, char **tok, int ntok) {
    pi_status st = want_fields(ps, "run_reads", ntok, 4, 4);
    if (st) return st;
    if (ps->run_line) return perr(ps, PI_ERR_FORMAT, "'run_reads' repeated (first on line %d)", ps->run_line);
    long long q;
    if (!parse_figure(tok[1], &hw->run_read_bytes) || hw->run_read_bytes < HW_BLOCK_MIN ||
        hw->run_read_bytes > HW_BLOCK_MAX)
        return perr(ps, PI_ERR_FORMAT, "run_reads: read size '%s' is not in %d..%d bytes", tok[1], HW_BLOCK_MIN,
                    HW_BLOCK_MAX);
    if (!parse_int(tok[2], 1, HW_QD_MAX, &q))
        return perr(ps, PI_ERR_FORMAT, "run_reads: queue depth '%s' is not in 1..%d", tok[2], HW_QD_MAX);
    hw->run_qd = (int)q;
    if (!parse_figure(tok[3], &hw->run_read_rate))
        return perr(ps, PI_ERR_FORMAT, "run_reads: reads/s '%s' is not a finite number > 0", tok[3]);
    if (!parse_figure(tok[4], &hw->run_time))
        return perr(ps, PI_ERR_FORMAT, "run_reads: time '%s' is not a finite number > 0", tok[4]);
    ps->run_line = ps->line;
    return PI_OK;
}

/* A record "key <figure> <unix time>" seen at most once (run_seq,
   run_compute): what the figure is, for the messages, and its line. */
static pi_status parse_run_pair(pstate *ps, const char *key, const char *what, int *line, double *fig,
                                double *when, char **tok, int ntok) {
    pi_status st = want_fields(ps, key, ntok, 2, 2);
    if (st) return st;
    if (*line) return perr(ps, PI_ERR_FORMAT, "'%s' repeated (first on line %d)", key, *line);
    if (!parse_figure(tok[1], fig))
        return perr(ps, PI_ERR_FORMAT, "%s: %s '%s' is not a finite number > 0", key, what, tok[1]);
    if (!parse_figure(tok[2], when))
        return perr(ps, PI_ERR_FORMAT, "%s: time '%s' is not a finite number > 0", key, tok[2]);
    *line = ps->line;
    return PI_OK;
}

/* After "end": everything required is there. */
static pi_status check_complete(const pstate *ps, const pi_hw *hw) {
    for (int k = 0; k < K_SCALARS; k++)
        if (!ps->scalar_line[k] && !k_scalar_optional[k])
            return perr(ps, PI_ERR_FORMAT, "no '%s' record before 'end'", k_scalar_names[k]);
    for (int t = 1; t <= hw->n_threads; t++)
        if (!ps->mem_bw_line[t]) return perr(ps, PI_ERR_FORMAT, "no 'mem_bw %d' record before 'end'", t);
    for (int b = 0; b < PI_HW_N_BLOCKS; b++)
        for (int q = 0; q < PI_HW_N_QD; q++)
            if (!ps->read_line[b][q])
                return perr(ps, PI_ERR_FORMAT, "no 'read %d %d' record before 'end'", hw->block[b], hw->qd[q]);
    pi_status st = pi_hw_validate(hw);
    if (st) return pi_error_prefix(st, "line %d", ps->line);
    return PI_OK;
}

static pi_status parse_record(pstate *ps, pi_hw *hw, char **tok, int ntok) {
    for (int k = 0; k < K_SCALARS; k++)
        if (!strcmp(tok[0], k_scalar_names[k])) return parse_scalar(ps, hw, k, tok, ntok);
    for (int k = 0; k < PI_HW_N_KERNELS; k++)
        if (!strcmp(tok[0], k_kernel_names[k])) return parse_kernel(ps, hw, k, tok, ntok);
    if (!strcmp(tok[0], "mem_bw")) return parse_mem_bw(ps, hw, tok, ntok);
    if (!strcmp(tok[0], "read")) return parse_read(ps, hw, tok, ntok);
    if (!strcmp(tok[0], "run_reads")) return parse_run_reads(ps, hw, tok, ntok);
    if (!strcmp(tok[0], "run_seq"))
        return parse_run_pair(ps, "run_seq", "GB/s", &ps->seq_line, &hw->run_seq_gbs, &hw->run_seq_time, tok, ntok);
    if (!strcmp(tok[0], "run_compute"))
        return parse_run_pair(ps, "run_compute", "factor", &ps->compute_line, &hw->run_compute_k,
                              &hw->run_compute_time, tok, ntok);
    if (!strcmp(tok[0], HW_HEADER)) return perr(ps, PI_ERR_FORMAT, "a second header");
    return perr(ps, PI_ERR_FORMAT, "unknown key '%.40s'", tok[0]);
}

static pi_status parse_all(pstate *ps, const char *text, size_t n, pi_hw *hw) {
    char line[HW_LINE_MAX + 1];
    char *tok[HW_MAX_TOK];
    bool header = false, ended = false;
    size_t at = 0;
    ps->line = 0;
    while (at < n) {
        ps->line++;
        const char *nl = memchr(text + at, '\n', n - at);
        size_t len = nl ? (size_t)(nl - (text + at)) : n - at;
        const char *src = text + at;
        at += len + (nl ? 1 : 0);
        if (len && src[len - 1] == '\r') len--; /* CRLF */
        if (len > HW_LINE_MAX) return perr(ps, PI_ERR_FORMAT, "longer than %d characters", HW_LINE_MAX);
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)src[i];
            if ((c < ' ' && c != '\t') || c > '~')
                return perr(ps, PI_ERR_FORMAT, "unexpected byte 0x%02x at column %zu", c, i + 1);
        }
        memcpy(line, src, len);
        line[len] = '\0';
        int ntok = 0;
        for (char *p = line;;) {
            while (*p == ' ' || *p == '\t') p++;
            if (!*p) break;
            if (ntok == HW_MAX_TOK) return perr(ps, PI_ERR_FORMAT, "more than %d fields", HW_MAX_TOK);
            tok[ntok++] = p;
            while (*p && *p != ' ' && *p != '\t') p++;
            if (*p) *p++ = '\0';
        }
        if (ntok == 0 || tok[0][0] == '#') continue;
        if (ended) return perr(ps, PI_ERR_FORMAT, "'%.40s' after 'end'", tok[0]);
        if (!header) {
            if (strcmp(tok[0], HW_HEADER))
                return perr(ps, PI_ERR_FORMAT, "not a hwprobe file: expected the header '%s %d', got '%.40s'",
                            HW_HEADER, PI_HW_FILE_VERSION, tok[0]);
            long long v;
            if (ntok != 2 || !parse_int(tok[1], 0, 1000000, &v))
                return perr(ps, PI_ERR_FORMAT, "header: expected '%s <version>'", HW_HEADER);
            if (v < 1 || v > PI_HW_FILE_VERSION)
                return perr(ps, PI_ERR_FORMAT,
                            "format version %lld; this build reads versions 1 to %d (run hwprobe again)", v,
                            PI_HW_FILE_VERSION);
            header = true;
            continue;
        }
        if (!strcmp(tok[0], "end")) {
            if (ntok != 1) return perr(ps, PI_ERR_FORMAT, "'end' takes no values");
            pi_status st = check_complete(ps, hw);
            if (st) return st;
            ended = true;
            continue;
        }
        pi_status st = parse_record(ps, hw, tok, ntok);
        if (st) return st;
    }
    if (!header) return pi_error(PI_ERR_FORMAT, "empty (%d line%s without a record): no '%s %d' header", ps->line,
                                 ps->line == 1 ? "" : "s", HW_HEADER, PI_HW_FILE_VERSION);
    if (!ended) return perr(ps, PI_ERR_FORMAT, "truncated: the file ends without its 'end' record");
    return PI_OK;
}

pi_status pi_hw_parse(const char *text, size_t n, pi_hw *hw) {
    memset(hw, 0, sizeof *hw);
    pstate *ps = calloc(1, sizeof *ps);
    if (!ps) return pi_error(PI_ERR_NOMEM, "hwprobe file: out of memory");
    pi_status st = parse_all(ps, text ? text : "", text ? n : 0, hw);
    free(ps);
    if (st) memset(hw, 0, sizeof *hw);
    return st;
}

pi_status pi_hw_load(const char *path, pi_hw *hw) {
    memset(hw, 0, sizeof *hw);
    FILE *f = fopen(path, "rb");
    if (!f) return pi_error(errno == ENOENT ? PI_ERR_NOT_FOUND : PI_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > (off_t)HW_FILE_MAX) {
        fclose(f);
        return pi_error(PI_ERR_FORMAT, "%s: not a regular file of at most %u bytes", path, HW_FILE_MAX);
    }
    size_t n = (size_t)sb.st_size;
    char *text = malloc(n ? n : 1);
    if (!text) {
        fclose(f);
        return pi_error(PI_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t got = fread(text, 1, n, f);
    bool err = ferror(f);
    fclose(f);
    pi_status st;
    if (err || got != n) st = pi_error(PI_ERR_IO, "%s: read failed", path);
    else if ((st = pi_hw_parse(text, n, hw))) pi_error_prefix(st, "%s", path);
    free(text);
    return st;
}

const char *pi_hw_default_path(char *buf, size_t n, uint64_t fs_dev) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int k;
    unsigned long long dev = (unsigned long long)fs_dev;
    if (xdg && xdg[0] == '/') k = snprintf(buf, n, "%s/pinfer/hwprobe-%llu.txt", xdg, dev);
    else if (home && home[0]) k = snprintf(buf, n, "%s/.cache/pinfer/hwprobe-%llu.txt", home, dev);
    else return NULL;
    return k > 0 && (size_t)k < n ? buf : NULL;
}

/* ---- interpolation ---- */

/* Where v falls on the increasing grid x[0..n): segment i and the fraction f
   along it in log space, v clamped to [x[0], x[n-1]]. */
static void log_locate(const int *x, int n, double v, int *i, double *f) {
    *i = 0;
    *f = 0.0;
    if (n < 2 || !(v > x[0])) return;
    if (v >= x[n - 1]) {
        *i = n - 2;
        *f = 1.0;
        return;
    }
    int s = 0;
    while (s + 2 < n && v >= x[s + 1]) s++;
    *i = s;
    *f = (log(v) - log(x[s])) / (log(x[s + 1]) - log(x[s]));
}

double pi_hw_iops(const pi_hw *hw, int block_bytes, int qd) {
    if (!hw) return 0.0;
    int bi, qi;
    double fb, fq;
    log_locate(hw->block, PI_HW_N_BLOCKS, block_bytes, &bi, &fb);
    log_locate(hw->qd, PI_HW_N_QD, qd, &qi, &fq);
    double c[2][2], lo = INFINITY, hi = 0.0;
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            double v = hw->read_iops[bi + a][qi + b];
            if (!(v > 0.0) || !isfinite(v)) return 0.0; /* not a validated table */
            c[a][b] = log(v);
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
    double l = (1 - fb) * ((1 - fq) * c[0][0] + fq * c[0][1]) + fb * ((1 - fq) * c[1][0] + fq * c[1][1]);
    double v = exp(l); /* kept within its corners, which rounding at the ends of the double range can leave */
    return v < lo ? lo : v > hi ? hi : v;
}

/* A run's factor over the probe, kept within [1/8, 8]. */
static double clamp_factor(double k) { return k < 0.125 ? 0.125 : k > 8.0 ? 8.0 : k; }

double pi_hw_run_factor(const pi_hw *hw) {
    if (!hw || !(hw->run_read_rate > 0.0) || !isfinite(hw->run_read_rate)) return 1.0;
    const double b = hw->run_read_bytes < (double)INT_MAX ? hw->run_read_bytes : (double)INT_MAX;
    const double probe = pi_hw_iops(hw, (int)b, hw->run_qd);
    if (!(probe > 0.0)) return 1.0;
    return clamp_factor(hw->run_read_rate / probe);
}

void pi_hw_note_run(pi_hw *hw, double read_bytes, int queue_depth, double reads_per_s, double when) {
    const double k_old = hw->run_read_rate > 0.0 ? pi_hw_run_factor(hw) : 0.0;
    hw->run_read_rate = reads_per_s;
    hw->run_read_bytes = read_bytes;
    hw->run_qd = queue_depth;
    hw->run_time = when;
    const double b = read_bytes < (double)INT_MAX ? read_bytes : (double)INT_MAX;
    const double probe = pi_hw_iops(hw, (int)b, queue_depth), r = probe * sqrt(k_old * pi_hw_run_factor(hw));
    if (k_old > 0.0 && figure_ok(r)) hw->run_read_rate = r;
}

double pi_hw_seq_factor(const pi_hw *hw) {
    if (!hw || !(hw->run_seq_gbs > 0.0) || !isfinite(hw->run_seq_gbs) || !(hw->seq_read_gbs > 0.0)) return 1.0;
    return clamp_factor(hw->run_seq_gbs / hw->seq_read_gbs);
}

void pi_hw_note_seq(pi_hw *hw, double gbs, double when) {
    const double k_old = hw->run_seq_gbs > 0.0 ? pi_hw_seq_factor(hw) : 0.0;
    hw->run_seq_gbs = gbs;
    hw->run_seq_time = when;
    const double r = hw->seq_read_gbs * sqrt(k_old * pi_hw_seq_factor(hw));
    if (k_old > 0.0 && figure_ok(r)) hw->run_seq_gbs = r;
}

double pi_hw_apply_run(pi_hw *hw, double *seq_k) {
    double ks = pi_hw_seq_factor(hw);
    if (hw && !figure_ok(hw->seq_read_gbs * ks)) ks = 1.0;
    if (seq_k) *seq_k = ks;
    if (hw) {
        if (hw->run_seq_gbs > 0.0) hw->run_seq = true;
        hw->seq_read_gbs *= ks;
        hw->run_seq_gbs = hw->run_seq_time = 0.0;
    }
    double k = pi_hw_run_factor(hw);
    if (!hw) return k;
    /* a run's rate is what its reads achieved, hidden or waited for: it
       stands for the probe's share with the cores computing too */
    if (hw->run_read_rate > 0.0) hw->run_reads = true;
    for (int b = 0; b < PI_HW_N_BLOCKS; b++) /* figures at the ends of the double range stay as they are */
        for (int q = 0; q < PI_HW_N_QD; q++)
            if (!figure_ok(hw->read_iops[b][q] * k) || !figure_ok(hw->read_lat_us[b][q] / k)) k = 1.0;
    for (int b = 0; b < PI_HW_N_BLOCKS; b++)
        for (int q = 0; q < PI_HW_N_QD; q++) {
            hw->read_iops[b][q] *= k;
            hw->read_lat_us[b][q] /= k;
        }
    hw->run_read_rate = hw->run_read_bytes = hw->run_time = 0.0;
    hw->run_qd = 0;
    return k;
}

double pi_hw_compute_factor(const pi_hw *hw) {
    if (!hw || !(hw->run_compute_k > 0.0) || !isfinite(hw->run_compute_k)) return 1.0;
    return clamp_factor(hw->run_compute_k);
}

void pi_hw_note_compute(pi_hw *hw, double k, double when) {
    const double k_old = hw->run_compute_k > 0.0 ? pi_hw_compute_factor(hw) : 0.0;
    hw->run_compute_k = k;
    hw->run_compute_time = when;
    const double r = sqrt(k_old * pi_hw_compute_factor(hw));
    if (k_old > 0.0 && figure_ok(r)) hw->run_compute_k = r;
}

double pi_hw_apply_compute(pi_hw *hw) {
    double k = pi_hw_compute_factor(hw);
    if (!hw) return k;
    for (int t = 0; t <= PI_HW_MAX_THREADS; t++) /* figures at the ends of the double range stay as they are */
        if (hw->mem_bw[t] > 0.0 && !figure_ok(hw->mem_bw[t] * k)) k = 1.0;
    for (int w = 0; w < PI_HW_N_KERNELS; w++) {
        const double(*tab)[PI_HW_MAX_THREADS + 1] = kernel_table_c(hw, w);
        for (int ty = 0; ty < PI_TYPE_COUNT; ty++)
            for (int t = 0; t <= PI_HW_MAX_THREADS; t++)
                if (tab[ty][t] > 0.0 && !figure_ok(tab[ty][t] * k)) k = 1.0;
    }
    for (int t = 0; t <= PI_HW_MAX_THREADS; t++) hw->mem_bw[t] *= k;
    for (int w = 0; w < PI_HW_N_KERNELS; w++) {
        double(*tab)[PI_HW_MAX_THREADS + 1] = kernel_table(hw, w);
        for (int ty = 0; ty < PI_TYPE_COUNT; ty++)
            for (int t = 0; t <= PI_HW_MAX_THREADS; t++) tab[ty][t] *= k;
    }
    hw->run_compute_k = hw->run_compute_time = 0.0;
    return k;
}

static bool type_measured(const double (*tab)[PI_HW_MAX_THREADS + 1], int ty) {
    for (int t = 1; t <= PI_HW_MAX_THREADS; t++)
        if (tab[ty][t] > 0.0) return true;
    return false;
}

static double bits_per_weight(int ty) {
    const pi_type_info *ti = pi_type_get((uint32_t)ty);
    return ti ? 8.0 * (double)ti->size / (double)ti->blck : 32.0;
}

double pi_hw_kernel_gbs(const pi_hw *hw, int what, pi_type t, int threads) {
    if (!hw || what < 0 || what >= PI_HW_N_KERNELS) return 0.0;
    const double(*tab)[PI_HW_MAX_THREADS + 1] = kernel_table_c(hw, what);
    int ty = (int)t;
    if (ty < 0 || ty >= PI_TYPE_COUNT || !type_measured(tab, ty)) {
        double want = bits_per_weight(ty), best = INFINITY;
        int pick = -1;
        for (int c = 0; c < PI_TYPE_COUNT; c++) {
            if (!type_measured(tab, c)) continue;
            double d = fabs(bits_per_weight(c) - want);
            if (d < best) {
                best = d;
                pick = c;
            }
        }
        if (pick < 0) return 0.0;
        ty = pick;
    }
    int n = hw->n_threads < 1 ? 1 : hw->n_threads > PI_HW_MAX_THREADS ? PI_HW_MAX_THREADS : hw->n_threads;
    int th = threads < 1 ? 1 : threads > n ? n : threads;
    for (int d = 0; d <= PI_HW_MAX_THREADS; d++) { /* nearest measured thread count, the lower first */
        if (th - d >= 1 && tab[ty][th - d] > 0.0) return tab[ty][th - d];
        if (th + d <= PI_HW_MAX_THREADS && tab[ty][th + d] > 0.0) return tab[ty][th + d];
    }
    return 0.0;
}

double pi_hw_read_cpu_s(const pi_hw *hw) {
    return hw && hw->read_cpu_us > 0.0 ? hw->read_cpu_us * 1e-6 : PI_HW_READ_CPU_S;
}

double pi_hw_read_issue_s(const pi_hw *hw) {
    return hw && hw->read_issue_us > 0.0 ? hw->read_issue_us * 1e-6 : pi_hw_read_cpu_s(hw);
}

/* Fields 1, 3, 4 and 10 of the 11 or more: reads completed, sectors read
   (512 bytes each, whatever the device's block size), ms reads spent with
   the device, ms with any request in flight. Digits and blanks only; each
   field below 2^63. */
bool pi_hw_parse_disk_stat(const char *text, size_t n, pi_disk_counts *out) {
    memset(out, 0, sizeof *out);
    uint64_t f[11];
    int k = 0;
    size_t i = 0;
    for (;;) {
        while (i < n && (text[i] == ' ' || text[i] == '\t')) i++;
        if (i == n || text[i] == '\n') break;
        if (text[i] < '0' || text[i] > '9') return false;
        uint64_t v = 0;
        for (; i < n && text[i] >= '0' && text[i] <= '9'; i++) {
            if (v > (UINT64_C(1) << 59)) return false; /* v * 10 + 9 stays below 2^63 */
            v = v * 10 + (uint64_t)(text[i] - '0');
        }
        if (i < n && text[i] != ' ' && text[i] != '\t' && text[i] != '\n') return false;
        if (k < 11) f[k] = v;
        k++;
    }
    for (; i < n; i++)
        if (text[i] != '\n') return false; /* one line */
    if (k < 11 || f[2] > UINT64_MAX / 512) return false;
    *out = (pi_disk_counts){
        .reads = f[0], .bytes = f[2] * 512, .read_s = (double)f[3] * 1e-3, .busy_s = (double)f[9] * 1e-3};
    return true;
}
