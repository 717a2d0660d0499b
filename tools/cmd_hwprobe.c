/*
 * cmd_hwprobe.c — `pinfer hwprobe`: measure what the planner's cost model
 * needs (memory bandwidth, kernel throughput on the dense and sparse access
 * patterns, flash random reads by size and queue depth) and cache it in a
 * small text file, by default $XDG_CACHE_HOME/pinfer/hwprobe-<dev>.txt where
 * `pinfer plan` looks for it. The measuring is src/plan/hwprobe.c's.
 */
#include "args.h"
#include "cmds.h"

#include "base/outfile.h"
#include "base/timer.h"
#include "plan/hwprobe.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: pinfer hwprobe [-m MODEL | --dir DIR] [-o FILE] [--quick] [--compute] [-t N]\n"
            "Measure memory bandwidth, kernel throughput and flash random reads for the planner.\n"
            "  -m MODEL    measure the flash by reading MODEL (read only, O_DIRECT; a file under 256 MiB:\n"
            "              a temp file in its directory instead)\n"
            "  --dir DIR   measure the filesystem of DIR with a temp file of random data (1 GiB, 256 MiB\n"
            "              with --quick), removed afterwards (default: the current directory)\n"
            "  -o FILE     write the figures here (default: $XDG_CACHE_HOME or ~/.cache,\n"
            "              /pinfer/hwprobe-<device>.txt)\n"
            "  --quick     fewer points and repetitions (~20 s instead of 1-2 min); the figures not\n"
            "              measured are interpolated and marked \"est\"\n"
            "  --compute   measure memory and kernels only, keeping the flash figures of the file\n"
            "              written before (-o, or the one for MODEL's or DIR's filesystem): after an\n"
            "              update of pinfer, whose kernels' rates plans then warn about (~15-40 s)\n"
            "  -t N        measure 1..N threads (default: every core, at most %d)\n",
            PI_HW_MAX_THREADS);
}

/* Whether pi_hw_save can write path: the nearest directory of it that
   exists (pi_hw_save creates the missing ones) is writable. */
static bool out_writable(const char *path) {
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return true; /* let the save report it */
    for (;;) {
        char *slash = strrchr(dir, '/');
        if (!slash) return access(".", W_OK) == 0;
        if (slash == dir) return access("/", W_OK) == 0;
        *slash = '\0';
        if (access(dir, F_OK) == 0) return access(dir, W_OK) == 0;
    }
}

static const char *kernel_name(int w) { return w == PI_HW_MATVEC ? "matvec" : w == PI_HW_ROWDOT ? "rowdot" : "axpy"; }

static double kernel_val(const pi_hw *hw, int w, int ty, int t) {
    return (w == PI_HW_MATVEC ? hw->matvec : w == PI_HW_ROWDOT ? hw->rowdot : hw->axpy)[ty][t];
}

static void print_table(const pi_hw *hw) {
    int n = hw->n_threads;
    printf("hwprobe: %s, %d thread%s measured%s (* = interpolated, not measured)\n", hw->cpu, n, n > 1 ? "s" : "",
           hw->quick ? ", quick" : "");

    printf("\nmemory read bandwidth\n%7s %8s\n", "threads", "GB/s");
    for (int t = 1; t <= n; t++) printf("%7d %8.1f%s\n", t, hw->mem_bw[t], hw->mem_bw_est[t] ? "*" : "");

    printf("\nkernels, weight GB/s (matvec: dense rows in order; rowdot: vec_dot of random rows; axpy: random rows)\n");
    printf("%-6s", "type");
    int cols[2] = {1, n}, ncols = n > 1 ? 2 : 1;
    for (int c = 0; c < ncols; c++)
        for (int w = 0; w < PI_HW_N_KERNELS; w++) {
            char h[32];
            snprintf(h, sizeof h, "%s@%d", kernel_name(w), cols[c]);
            printf(" %10s", h);
        }
    printf("\n");
    for (int ty = 0; ty < PI_TYPE_COUNT; ty++) {
        bool any = false;
        for (int w = 0; w < PI_HW_N_KERNELS; w++)
            for (int c = 0; c < ncols; c++) any |= kernel_val(hw, w, ty, cols[c]) > 0;
        if (!any) continue;
        printf("%-6s", pi_type_name((uint32_t)ty));
        for (int c = 0; c < ncols; c++)
            for (int w = 0; w < PI_HW_N_KERNELS; w++) {
                printf(" %9.1f%s", kernel_val(hw, w, ty, cols[c]), hw->kernel_est[w][ty][cols[c]] ? "*" : " ");
            }
        printf("\n");
    }

    printf("\nflash: %s%s, random reads over %.2f GB\n", hw->io_backend,
           hw->io_buffered ? " BUFFERED (the filesystem refuses O_DIRECT: page-cache figures)" : ", O_DIRECT",
           (double)hw->io_file_bytes * 1e-9);
    printf("%6s %5s %10s %9s %9s\n", "block", "qd", "reads/s", "MB/s", "lat us");
    for (int b = 0; b < PI_HW_N_BLOCKS; b++)
        for (int q = 0; q < PI_HW_N_QD; q++) {
            double iops = hw->read_iops[b][q];
            printf("%5dK %5d %10.0f %9.1f %9.1f%s\n", hw->block[b] / 1024, hw->qd[q], iops,
                   iops * hw->block[b] * 1e-6, hw->read_lat_us[b][q], hw->read_est[b][q] ? "*" : "");
        }
    printf("sequential 1 MiB reads, QD 8: %.2f GB/s\n", hw->seq_read_gbs);
    if (hw->read_cpu_us > 0) {
        printf("CPU time per random read (submission and completion, every core): %.2f us", hw->read_cpu_us);
        if (hw->read_issue_us > 0) printf("; submitting a read holds the thread %.2f us", hw->read_issue_us);
        printf("\n");
    }
    if (hw->read_busy_k > 0)
        printf("with every core streaming memory, as decoding keeps them: %.2fx the random reads above (8K, qd %d); "
               "plans price the reads they hide behind compute at that share\n", hw->read_busy_k, hw->qd[PI_HW_N_QD - 1]);
}

/* The cache file for the filesystem dev, or NULL after saying there is none. */
static const char *cache_file(const char *cmd, char *buf, size_t n, uint64_t dev) {
    const char *p = pi_hw_default_path(buf, n, dev);
    if (!p) fprintf(stderr, "pinfer: %s: no cache directory (neither XDG_CACHE_HOME nor HOME is set): use -o FILE\n", cmd);
    return p;
}

int cmd_hwprobe(int argc, char **argv) {
    static const char *const valued[] = {"-m", "--model", "--dir", "-o", "-t", "--threads"};
    const char *cmd = "hwprobe";
    const char *model = NULL, *dir = NULL, *out = NULL;
    long threads = 0;
    bool quick = false, compute = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--quick")) {
            quick = true;
            continue;
        }
        if (!strcmp(a, "--compute")) {
            compute = true;
            continue;
        }
        bool known = false;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) known |= !strcmp(a, valued[k]);
        if (!known) return arg_unknown(cmd, a);
        if (!(v = arg_value(cmd, argc, argv, &i))) return 2;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--dir")) dir = v;
        else if (!strcmp(a, "-o")) out = v;
        else if (!arg_int(cmd, a, v, 1, PI_HW_MAX_THREADS, &threads)) return 2; /* -t */
    }
    if (model && dir) {
        fprintf(stderr, "pinfer: %s: -m and --dir both name what to measure: give one\n", cmd);
        return 2;
    }
    if (!model && !dir) {
        dir = ".";
        if (!compute) fprintf(stderr, "hwprobe: no -m or --dir: measuring the filesystem of the current directory\n");
    }
    /* refused before the measuring (1-2 min): an -o that would replace the
       model read, or that cannot be written */
    if (out && pi_outfile_check_distinct(out, model, "the model measured (-m)")) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 2;
    }
    if (out && !out_writable(out)) {
        fprintf(stderr, "pinfer: %s: cannot write %s: its directory is not writable\n", cmd, out);
        return 1;
    }
    pi_hwprobe_opts o = {.dir = dir, .file = model, .max_threads = (int)threads, .quick = quick, .verbose = true};
    pi_hw hw, before;
    char path[4096];
    if (compute) { /* the file whose flash figures stay */
        struct stat sb;
        const char *what = model ? model : dir;
        if (!out && stat(what, &sb) != 0) {
            fprintf(stderr, "pinfer: %s: %s: %s\n", cmd, what, strerror(errno));
            return 1;
        }
        if (!out && !(out = cache_file(cmd, path, sizeof path, (uint64_t)sb.st_dev))) return 1;
        if (pi_hw_load(out, &before) != PI_OK) {
            fprintf(stderr, "pinfer: %s: --compute keeps the flash figures of an earlier probe, and %s has none: %s; "
                    "measure everything with: pinfer hwprobe %s %s -o %s\n", cmd, out, pi_last_error(),
                    model ? "-m" : "--dir", what, out);
            return 1;
        }
        o.flash_from = &before;
        fprintf(stderr, "hwprobe: memory and kernels only; the flash figures stay those of %s\n", out);
    }
    double t0 = pi_time_s();
    if (pi_hwprobe_run(&o, &hw) != PI_OK) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 1;
    }
    double dt = pi_time_s() - t0;
    if (!out && !(out = cache_file(cmd, path, sizeof path, hw.fs_dev))) return 1;
    print_table(&hw);
    if (pi_hw_save(&hw, out) != PI_OK) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 1;
    }
    printf("\nmeasured in %.1f s; written: %s\n", dt, out);
    if (hw.other_cpu > 0.25) /* other processes competing for the cores lower every figure */
        printf("warning: other processes kept %.1f cores busy on average while this ran: the figures are likely low; "
               "measure again on a quiet machine\n", hw.other_cpu);
    return 0;
}
