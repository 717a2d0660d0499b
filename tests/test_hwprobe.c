/*
 * test_hwprobe.c — the hardware probe and its cache file: a save/load round
 * trip that keeps every double bit for bit (awkward values included),
 * rejection of malformed files with messages naming the line (no header,
 * wrong version, bad numbers, repeated and unknown keys, every truncation,
 * stray bytes, records out of order), the interpolation helpers (exact at
 * grid points, monotonic between them, clamped outside, fallbacks to the
 * nearest thread count and type), the default cache path, and a tiny real
 * probe (a few MiB, ~1 s) whose figures must be positive and finite and whose
 * temp file must be gone afterwards; a probe of memory and kernels only
 * (hwprobe --compute) keeps an earlier probe's flash figures bit for bit.
 */
#include "kernels/kernels.h"
#include "plan/hwprobe.h"
#include "base/pool.h"
#include "test_util.h"

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <signal.h>
#include <sys/stat.h>

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "test_hwprobe: timed out\n";
    if (write(2, msg, sizeof msg - 1) < 0) {}
    _exit(1);
}

static bool same_bits(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

/* Field by field (padding aside); doubles compared as bits. */
static bool hw_equal(const pi_hw *a, const pi_hw *b) {
    return a->n_threads == b->n_threads && same_bits(a->mem_bw, b->mem_bw, sizeof a->mem_bw) &&
           same_bits(a->matvec, b->matvec, sizeof a->matvec) && same_bits(a->rowdot, b->rowdot, sizeof a->rowdot) &&
           same_bits(a->axpy, b->axpy, sizeof a->axpy) && !strcmp(a->io_backend, b->io_backend) &&
           same_bits(a->block, b->block, sizeof a->block) && same_bits(a->qd, b->qd, sizeof a->qd) &&
           same_bits(a->read_iops, b->read_iops, sizeof a->read_iops) &&
           same_bits(a->read_lat_us, b->read_lat_us, sizeof a->read_lat_us) &&
           same_bits(&a->seq_read_gbs, &b->seq_read_gbs, sizeof a->seq_read_gbs) && a->fs_dev == b->fs_dev &&
           same_bits(&a->read_cpu_us, &b->read_cpu_us, sizeof a->read_cpu_us) &&
           same_bits(&a->read_busy_k, &b->read_busy_k, sizeof a->read_busy_k) &&
           same_bits(&a->read_issue_us, &b->read_issue_us, sizeof a->read_issue_us) &&
           !strcmp(a->cpu, b->cpu) && !strcmp(a->kernels_build, b->kernels_build) && same_bits(a->mem_bw_est, b->mem_bw_est, sizeof a->mem_bw_est) &&
           same_bits(a->kernel_est, b->kernel_est, sizeof a->kernel_est) &&
           same_bits(a->read_est, b->read_est, sizeof a->read_est) && a->quick == b->quick &&
           a->io_buffered == b->io_buffered && a->io_huge_pages == b->io_huge_pages &&
           a->io_file_bytes == b->io_file_bytes &&
           same_bits(&a->other_cpu, &b->other_cpu, sizeof a->other_cpu) &&
           same_bits(&a->run_read_rate, &b->run_read_rate, sizeof a->run_read_rate) &&
           same_bits(&a->run_read_bytes, &b->run_read_bytes, sizeof a->run_read_bytes) &&
           same_bits(&a->run_time, &b->run_time, sizeof a->run_time) && a->run_qd == b->run_qd;
}

/* A random positive finite double, some of them awkward. */
static double rand_figure(t_rng *r) {
    static const double odd[] = {0.1, 1.0 / 3.0, 5e-324, DBL_MIN, DBL_MAX, 1e-300, 123456789.123456789, 2.0};
    uint64_t x = t_next(r);
    if (x % 4 == 0) return odd[(x >> 8) % (sizeof odd / sizeof odd[0])];
    return (double)(t_next(r) >> 11) * 0x1.0p-53 * 40.0 + 1e-3;
}

/* A valid, fully filled result: monotone flash table (fewer reads/s for bigger
   blocks, more for deeper queues), kernels for a few types incl. one with an
   upper-case name. */
static void fill_hw(pi_hw *hw, t_rng *r, bool awkward) {
    memset(hw, 0, sizeof *hw);
    hw->n_threads = 5;
    snprintf(hw->cpu, sizeof hw->cpu, "avx512-16c");
    /* the build id: absent (a version 1 file) in a third of the awkward ones */
    snprintf(hw->kernels_build, sizeof hw->kernels_build, "%s",
             !awkward ? "0123456789abcdef" : t_next(r) % 3 == 0 ? "" : "x~{|}-longest-23-chars!");
    snprintf(hw->io_backend, sizeof hw->io_backend, "io_uring");
    for (int t = 1; t <= hw->n_threads; t++) {
        hw->mem_bw[t] = awkward ? rand_figure(r) : 10.0 * t;
        hw->mem_bw_est[t] = t == 3;
    }
    static const pi_type types[] = {PI_TYPE_F32, PI_TYPE_F16, PI_TYPE_Q8_0, PI_TYPE_Q4_0, PI_TYPE_Q2_K};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        for (int t = 1; t <= hw->n_threads; t++) {
            if (types[i] == PI_TYPE_Q4_0 && t == 2) continue; /* a hole: the fallback's business */
            hw->matvec[types[i]][t] = awkward ? rand_figure(r) : 8.0 * t + (double)i;
            hw->rowdot[types[i]][t] = awkward ? rand_figure(r) : 4.0 * t + (double)i;
            hw->axpy[types[i]][t] = awkward ? rand_figure(r) : 3.0 * t + (double)i;
            hw->kernel_est[PI_HW_ROWDOT][types[i]][t] = t == 4;
        }
    static const int blocks[PI_HW_N_BLOCKS] = {4096, 8192, 16384, 32768, 65536, 131072};
    static const int qds[PI_HW_N_QD] = {1, 8, 32, 64, 128};
    memcpy(hw->block, blocks, sizeof blocks);
    memcpy(hw->qd, qds, sizeof qds);
    for (int b = 0; b < PI_HW_N_BLOCKS; b++)
        for (int q = 0; q < PI_HW_N_QD; q++) {
            hw->read_iops[b][q] = awkward ? rand_figure(r) : 90000.0 / (1 + b) * (1 + 0.5 * q);
            hw->read_lat_us[b][q] = awkward ? rand_figure(r) : 50.0 * (1 + b) * (1 + q);
            hw->read_est[b][q] = (b + q) % 3 == 0;
        }
    hw->seq_read_gbs = awkward ? rand_figure(r) : 2.5;
    hw->read_cpu_us = !awkward ? 2.75 : t_next(r) % 3 == 0 ? 0.0 : rand_figure(r); /* absent in a third */
    hw->read_issue_us = !awkward ? 1.25 : t_next(r) % 3 == 0 ? 0.0 : rand_figure(r); /* absent in a third */
    /* a factor in (0, 1], absent in a third */
    hw->read_busy_k = !awkward ? 0.625 : t_next(r) % 3 == 0 ? 0.0 : 1.0 / (1.0 + rand_figure(r));
    hw->fs_dev = awkward ? UINT64_MAX : 2049;
    hw->io_file_bytes = (uint64_t)1 << 30;
    hw->quick = true;
    hw->io_buffered = awkward;
    hw->io_huge_pages = !awkward || t_next(r) % 2; /* absent in half of the awkward ones */
    hw->other_cpu = awkward ? rand_figure(r) : 0.0;
    if (awkward && t_next(r) % 2) { /* the reads a run achieved, in half of them */
        hw->run_read_rate = rand_figure(r);
        hw->run_read_bytes = 512.0 + (double)(t_next(r) % (63u << 20)) + 1.0 / 3.0;
        hw->run_qd = 1 + (int)(t_next(r) % 65536);
        hw->run_time = rand_figure(r);
    }
}

static void test_round_trip(void) {
    t_rng r = {42};
    char path[256];
    t_tmp_path(path, sizeof path, "hw.txt");
    for (int it = 0; it < 40; it++) {
        pi_hw a, b;
        fill_hw(&a, &r, it > 0);
        CHECKF(pi_hw_save(&a, path) == PI_OK, "%s", pi_last_error());
        CHECKF(pi_hw_load(path, &b) == PI_OK, "%s", pi_last_error());
        CHECKF(hw_equal(&a, &b), "iteration %d: loaded result differs", it);
        /* The in-memory formatter: length query, exact fit, truncation keeps a terminator. */
        long n = pi_hw_format(&a, NULL, 0);
        CHECK(n > 100);
        char *buf = malloc((size_t)n + 1);
        CHECK(pi_hw_format(&a, buf, (size_t)n + 1) == n && strlen(buf) == (size_t)n);
        pi_hw c;
        CHECKF(pi_hw_parse(buf, (size_t)n, &c) == PI_OK && hw_equal(&a, &c), "%s", pi_last_error());
        char small[32];
        CHECK(pi_hw_format(&a, small, sizeof small) == n && strlen(small) == sizeof small - 1);
        free(buf);
    }
    unlink(path);

    /* Saving creates missing parent directories. */
    char dir[256], deep[300];
    t_tmp_path(dir, sizeof dir, "hwdir");
    snprintf(deep, sizeof deep, "%s/a/b/hw.txt", dir);
    pi_hw a, b;
    fill_hw(&a, &r, false);
    CHECKF(pi_hw_save(&a, deep) == PI_OK, "%s", pi_last_error());
    CHECK(pi_hw_load(deep, &b) == PI_OK && hw_equal(&a, &b));
    unlink(deep);
    snprintf(deep, sizeof deep, "%s/a/b", dir);
    rmdir(deep);
    snprintf(deep, sizeof deep, "%s/a", dir);
    rmdir(deep);
    rmdir(dir);

    /* What would not load is not saved. */
    pi_hw bad = a;
    bad.n_threads = 0;
    CHECK(pi_hw_save(&bad, path) == PI_ERR_INVALID);
    bad = a;
    bad.mem_bw[2] = NAN;
    CHECK(pi_hw_save(&bad, path) == PI_ERR_INVALID);
    bad = a;
    bad.matvec[PI_TYPE_F32][a.n_threads + 1] = 1.0; /* beyond n_threads */
    CHECK(pi_hw_format(&bad, NULL, 0) == -1);
    bad = a;
    bad.kernel_est[PI_HW_AXPY][PI_TYPE_BF16][1] = true; /* estimated but absent */
    CHECK(pi_hw_validate(&bad) == PI_ERR_INVALID);
    bad = a;
    snprintf(bad.cpu, sizeof bad.cpu, "two words");
    CHECK(pi_hw_validate(&bad) == PI_ERR_INVALID);
    bad = a;
    bad.block[3] = bad.block[2];
    CHECK(pi_hw_validate(&bad) == PI_ERR_INVALID);
    CHECK(access(path, F_OK) != 0);
}

/* The valid text of fill_hw(.., false). */
static char *good_text(size_t *n) {
    pi_hw a;
    t_rng r = {1};
    fill_hw(&a, &r, false);
    long len = pi_hw_format(&a, NULL, 0);
    char *s = malloc((size_t)len + 1);
    pi_hw_format(&a, s, (size_t)len + 1);
    *n = (size_t)len;
    return s;
}

/* text with the line starting with `key ` (the first one) replaced by repl
   (NULL: removed); repl may hold several lines. Caller frees. */
static char *edit_line(const char *text, const char *key, const char *repl) {
    size_t kl = strlen(key);
    const char *p = text;
    while (*p && !(strncmp(p, key, kl) == 0 && (key[kl - 1] == ' ' || p[kl] == ' ' || p[kl] == '\n'))) {
        p = strchr(p, '\n');
        if (!p) break;
        p++;
    }
    char *out = malloc(strlen(text) + (repl ? strlen(repl) : 0) + 2);
    if (!p || !*p) {
        CHECKF(0, "no line starts with '%s'", key);
        strcpy(out, text);
        return out;
    }
    const char *e = strchr(p, '\n');
    e = e ? e + 1 : p + strlen(p);
    size_t pre = (size_t)(p - text);
    memcpy(out, text, pre);
    out[pre] = '\0';
    if (repl) {
        strcat(out, repl);
        strcat(out, "\n");
    }
    strcat(out, e);
    return out;
}

/* text as an older format version writes it: that header, without the
   record `dropped`; whether it parses into *h. */
static bool parse_older(const char *text, int version, const char *dropped, pi_hw *h) {
    char header[32];
    snprintf(header, sizeof header, "pinfer-hwprobe %d", version);
    char *t1 = edit_line(text, "pinfer-hwprobe", header), *t = edit_line(t1, dropped, NULL);
    const bool ok = pi_hw_parse(t, strlen(t), h) == PI_OK;
    free(t1);
    free(t);
    return ok;
}

/* The line number of the first line of text starting with key. */
static int line_of(const char *text, const char *key) {
    int line = 1;
    size_t kl = strlen(key);
    for (const char *p = text; *p; line++) {
        if (!strncmp(p, key, kl)) return line;
        p = strchr(p, '\n');
        if (!p) break;
        p++;
    }
    return -1;
}

/* Parsing must fail with PI_ERR_FORMAT and a message containing want (and, if line > 0, "line N:"). */
static void expect_reject(const char *text, size_t n, const char *want, int line, const char *what) {
    pi_hw hw;
    memset(&hw, 0xAB, sizeof hw);
    pi_status st = pi_hw_parse(text, n, &hw);
    const char *msg = pi_last_error();
    CHECKF(st == PI_ERR_FORMAT, "%s: status %d", what, st);
    CHECKF(!want || strstr(msg, want), "%s: message '%s' lacks '%s'", what, msg, want);
    if (line > 0) {
        char ln[32];
        snprintf(ln, sizeof ln, "line %d:", line);
        CHECKF(strstr(msg, ln) != NULL, "%s: message '%s' does not name %s", what, msg, ln);
    }
    pi_hw zero;
    memset(&zero, 0, sizeof zero);
    CHECKF(!memcmp(&hw, &zero, sizeof hw), "%s: result not zeroed on error", what);
}

static void reject_edit(const char *text, const char *key, const char *repl, const char *want, int line,
                        const char *what) {
    char *t = edit_line(text, key, repl);
    expect_reject(t, strlen(t), want, line, what);
    free(t);
}

static void test_malformed(void) {
    size_t n;
    char *good = good_text(&n);
    pi_hw hw;
    CHECKF(pi_hw_parse(good, n, &hw) == PI_OK, "%s", pi_last_error());
    int l_mem = line_of(good, "mem_bw 1 "), l_cpu = line_of(good, "cpu "), l_end = line_of(good, "end");

    /* Header. */
    expect_reject("", 0, "empty", 0, "empty file");
    expect_reject("\n# just a comment\n\n", 19, "empty", 0, "comments only");
    /* Without the header the first record is on line 2, after the comment. */
    reject_edit(good, "pinfer-hwprobe", NULL, "not a hwprobe file", 2, "missing header");
    reject_edit(good, "pinfer-hwprobe", "pinfer-hwprobe 7", "format version 7", 1, "wrong version");
    reject_edit(good, "pinfer-hwprobe", "pinfer-hwprobe 0", "format version 0", 1, "version 0");
    pi_hw older;
    /* version 1: the same records without kernels_build */
    CHECKF(strstr(good, "kernels_build 0123456789abcdef\n") && parse_older(good, 1, "kernels_build", &older) &&
               older.kernels_build[0] == '\0',
           "version 1: %s", pi_last_error());
    /* version 2: the same records without read_cpu_us, which the planner then takes as PI_HW_READ_CPU_S */
    CHECKF(strstr(good, "read_cpu_us 2.75\n") && parse_older(good, 2, "read_cpu_us", &older) && older.read_cpu_us == 0.0 &&
               pi_hw_read_cpu_s(&older) == PI_HW_READ_CPU_S,
           "version 2: %s", pi_last_error());
    CHECK(pi_hw_parse(good, n, &older) == PI_OK && fabs(pi_hw_read_cpu_s(&older) - 2.75e-6) < 1e-18);
    /* version 3: the same records without read_busy_k, which leaves the reads as probed */
    CHECKF(strstr(good, "read_busy_k 0.625\n") && parse_older(good, 3, "read_busy_k", &older) &&
               older.read_busy_k == 0.0,
           "version 3: %s", pi_last_error());
    CHECK(pi_hw_parse(good, n, &older) == PI_OK && older.read_busy_k == 0.625);
    /* version 4: the same records without read_issue_us; the plan's path then prices a read's issue at the
       machine's CPU for it, as version 4 files were priced */
    CHECKF(strstr(good, "read_issue_us 1.25\n") && parse_older(good, 4, "read_issue_us", &older) &&
               older.read_issue_us == 0.0 && pi_hw_read_issue_s(&older) == pi_hw_read_cpu_s(&older),
           "version 4: %s", pi_last_error());
    CHECK(pi_hw_parse(good, n, &older) == PI_OK && fabs(pi_hw_read_issue_s(&older) - 1.25e-6) < 1e-18);
    /* version 5: the same records without io_huge_pages: reads into 4 KiB pages */
    CHECKF(strstr(good, "io_huge_pages 1\n") && parse_older(good, 5, "io_huge_pages", &older) &&
               !older.io_huge_pages,
           "version 5: %s", pi_last_error());
    CHECK(pi_hw_parse(good, n, &older) == PI_OK && older.io_huge_pages);
    reject_edit(good, "io_huge_pages", "io_huge_pages 2", "expected 0 or 1", line_of(good, "io_huge_pages"),
                "io_huge_pages 2");
    static const char *const bad_issue[] = {"read_issue_us 0", "read_issue_us -1", "read_issue_us inf"};
    for (size_t i = 0; i < sizeof bad_issue / sizeof bad_issue[0]; i++)
        reject_edit(good, "read_issue_us", bad_issue[i], "read_issue_us", line_of(good, "read_issue_us"), bad_issue[i]);
    reject_edit(good, "read_busy_k", "read_busy_k 0", "read_busy_k", line_of(good, "read_busy_k"), "read_busy_k 0");
    reject_edit(good, "read_busy_k", "read_busy_k 1.5", "(0, 1]", line_of(good, "read_busy_k"), "read_busy_k 1.5");
    reject_edit(good, "read_busy_k", "read_busy_k nan", "read_busy_k", line_of(good, "read_busy_k"), "read_busy_k nan");
    reject_edit(good, "read_busy_k", "read_busy_k 0.5 0.5", "takes 1 value", line_of(good, "read_busy_k"),
                "read_busy_k two values");
    reject_edit(good, "read_cpu_us", "read_cpu_us 0", "read_cpu_us", line_of(good, "read_cpu_us"), "read_cpu_us 0");
    reject_edit(good, "read_cpu_us", "read_cpu_us nan", "read_cpu_us", line_of(good, "read_cpu_us"), "read_cpu_us nan");
    reject_edit(good, "read_cpu_us", "read_cpu_us 1 2", "takes 1 value", line_of(good, "read_cpu_us"),
                "read_cpu_us two values");
    reject_edit(good, "kernels_build", "kernels_build 0123456789abcdef01234567", "longer",
                line_of(good, "kernels_build"), "kernels_build too long");
    reject_edit(good, "kernels_build", "kernels_build a b", "takes 1 value", line_of(good, "kernels_build"),
                "kernels_build two words");
    reject_edit(good, "kernels_build", "kernels_build", "takes 1 value", line_of(good, "kernels_build"),
                "kernels_build empty");
    reject_edit(good, "pinfer-hwprobe", "pinfer-hwprobe", "header", 1, "header without version");
    reject_edit(good, "pinfer-hwprobe", "pinfer-hwprobe one", "header", 1, "header with a bad version");
    reject_edit(good, "cpu", "pinfer-hwprobe 1", "second header", l_cpu, "second header");

    /* Numbers. */
    static const char *const bad_figures[] = {"abc", "nan", "inf", "-inf", "-1", "0", "0.0", "1e999", "12x", "0x",
                                              "", "1,5", "--1"};
    for (size_t i = 0; i < sizeof bad_figures / sizeof bad_figures[0]; i++) {
        char repl[64];
        snprintf(repl, sizeof repl, "mem_bw 1 %s", bad_figures[i]);
        reject_edit(good, "mem_bw 1", repl, "mem_bw", l_mem, repl);
    }
    reject_edit(good, "n_threads", "n_threads 17", "n_threads", line_of(good, "n_threads"), "too many threads");
    reject_edit(good, "n_threads", "n_threads -1", "n_threads", line_of(good, "n_threads"), "negative threads");
    reject_edit(good, "n_threads", "n_threads 2.5", "n_threads", line_of(good, "n_threads"), "fractional threads");
    reject_edit(good, "fs_dev", "fs_dev -1", "fs_dev", line_of(good, "fs_dev"), "negative fs_dev");
    reject_edit(good, "fs_dev", "fs_dev 18446744073709551616", "fs_dev", line_of(good, "fs_dev"), "fs_dev overflow");
    reject_edit(good, "quick", "quick 2", "quick", line_of(good, "quick"), "bool 2");
    reject_edit(good, "block", "block 4096 8192 16384 32768 65536", "6 values", line_of(good, "block"),
                "block short");
    reject_edit(good, "block", "block 4096 8192 8192 32768 65536 131072", "increase", line_of(good, "block"),
                "block not increasing");
    reject_edit(good, "other_cpu", "other_cpu -1", "other_cpu", line_of(good, "other_cpu"), "negative load");
    reject_edit(good, "other_cpu", "other_cpu -0", "other_cpu", line_of(good, "other_cpu"), "negative zero load");
    reject_edit(good, "other_cpu", "other_cpu nan", "other_cpu", line_of(good, "other_cpu"), "nan load");
    reject_edit(good, "qd", "qd 1 8 32 64 0", "qd", line_of(good, "qd"), "qd zero");
    reject_edit(good, "read 4096 1 ", "read 4096 1 100 nan", "latency", line_of(good, "read 4096 1 "), "nan latency");
    reject_edit(good, "read 4096 1 ", "read 4096 1 100 5 estimated", "est", line_of(good, "read 4096 1 "),
                "bad est flag");
    reject_edit(good, "read 4096 1 ", "read 5000 1 100 5", "block '5000'", line_of(good, "read 4096 1 "),
                "block not in grid");
    reject_edit(good, "read 4096 1 ", "read 4096 2 100 5", "queue depth '2'", line_of(good, "read 4096 1 "),
                "qd not in grid");
    reject_edit(good, "matvec f32 1", "matvec q9_9 1 5", "unknown type", line_of(good, "matvec f32 1"), "bad type");
    reject_edit(good, "matvec f32 1", "matvec f32 6 5", "thread count", line_of(good, "matvec f32 1"),
                "threads beyond n_threads");
    reject_edit(good, "cpu", "cpu 0123456789012345678901234567890123456789012345678901234567890123456789", "longer",
                l_cpu, "cpu too long");
    reject_edit(good, "cpu", "cpu a b", "takes 1 value", l_cpu, "cpu two words");

    /* Repeated and unknown keys. */
    reject_edit(good, "cpu", "cpu x\ncpu y", "repeated (first on line", l_cpu + 1, "repeated cpu");
    reject_edit(good, "mem_bw 1", "mem_bw 1 5\nmem_bw 1 6", "repeated", l_mem + 1, "repeated mem_bw");
    reject_edit(good, "matvec f32 1", "matvec f32 1 5\nmatvec F32 1 5", "repeated", line_of(good, "matvec f32 1") + 1,
                "repeated kernel (case-insensitive type)");
    reject_edit(good, "read 4096 8 ", "read 4096 8 1 1\nread 4096 8 1 1", "repeated", line_of(good, "read 4096 8 ") + 1,
                "repeated read");
    reject_edit(good, "cpu", "cpux avx2", "unknown key 'cpux'", l_cpu, "unknown key");

    /* Order and completeness. */
    {
        char *t = edit_line(good, "n_threads", NULL);
        char *u = edit_line(t, "cpu", "cpu x\nn_threads 5"); /* fine: n_threads moved before mem_bw */
        CHECKF(pi_hw_parse(u, strlen(u), &hw) == PI_OK, "moved n_threads: %s", pi_last_error());
        free(u);
        u = edit_line(t, "end", "n_threads 5\nend"); /* too late */
        expect_reject(u, strlen(u), "before 'n_threads'", l_mem - 1, "mem_bw before n_threads");
        free(u);
        free(t);
    }
    reject_edit(good, "seq_read_gbs", NULL, "no 'seq_read_gbs' record", l_end - 1, "missing seq_read_gbs");
    reject_edit(good, "read 8192 32 ", NULL, "no 'read 8192 32' record", l_end - 1, "missing read point");
    reject_edit(good, "mem_bw 4", NULL, "no 'mem_bw 4' record", l_end - 1, "missing mem_bw");
    reject_edit(good, "end", "end\nmem_bw 1 5", "after 'end'", l_end + 1, "record after end");
    reject_edit(good, "end", "end now", "no values", l_end, "end with a value");

    /* The reads a run achieved: optional, once, every field checked. */
    {
        static const struct { const char *line, *want, *what; } runs[] = {
            {"run_reads 8192 128 60000", "run_reads", "a field short"},
            {"run_reads 8192 128 60000 1700000000 5", "run_reads", "a field more"},
            {"run_reads 100 128 60000 1700000000", "read size", "a read below 512 bytes"},
            {"run_reads 8192 0 60000 1700000000", "queue depth", "queue depth 0"},
            {"run_reads 8192 70000 60000 1700000000", "queue depth", "queue depth above the limit"},
            {"run_reads 8192 128 -5 1700000000", "reads/s", "a negative rate"},
            {"run_reads 8192 128 nan 1700000000", "reads/s", "a rate not a number"},
            {"run_reads 8192 128 60000 0", "time", "time 0"},
            {"run_reads 8192 128 60000 1700000000\nrun_reads 8192 128 60000 1700000000", "repeated",
             "run_reads twice"},
        };
        for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
            char repl[160];
            snprintf(repl, sizeof repl, "%s\nend", runs[i].line);
            const int at = l_end + (strstr(runs[i].what, "twice") ? 1 : 0);
            reject_edit(good, "end", repl, runs[i].want, at, runs[i].what);
        }
        char *t = edit_line(good, "end", "run_reads 8957.5 128 62400.5 1795734079\nend");
        pi_hw h;
        CHECKF(pi_hw_parse(t, strlen(t), &h) == PI_OK && h.run_read_rate == 62400.5 && h.run_read_bytes == 8957.5 &&
                   h.run_qd == 128 && h.run_time == 1795734079.0,
               "%s", pi_last_error());
        free(t);
    }

    /* Every truncation of the file is rejected; only the text missing its last newline still loads. */
    int bad = 0;
    for (size_t len = 0; len + 1 < n; len++) {
        if (pi_hw_parse(good, len, &hw) != PI_ERR_FORMAT || !strstr(pi_last_error(), "line") ) {
            if (len > 0) bad++;
        }
    }
    CHECKF(bad == 0, "%d truncations accepted or without a line number", bad);
    CHECK(pi_hw_parse(good, n - 1, &hw) == PI_OK);
    expect_reject(good, (size_t)(strstr(good, "\nend") - good) + 1, "truncated", 0, "all records but 'end'");

    /* Stray bytes, long lines, CRLF, comments and blank lines. */
    {
        char *t = malloc(n + 1);
        memcpy(t, good, n + 1);
        char *p = strstr(t, "io_backend");
        p[2] = '\0';
        expect_reject(t, n, "byte 0x00", line_of(good, "io_backend"), "NUL byte");
        p[2] = (char)0xC3;
        expect_reject(t, n, "byte 0xc3", line_of(good, "io_backend"), "non-ASCII byte");
        free(t);
        char *longline = malloc(3000);
        memset(longline, 'x', 2999);
        longline[0] = '#';
        longline[2999] = '\0';
        reject_edit(good, "cpu", longline, "longer than", l_cpu, "long line");
        free(longline);
        size_t m = 0;
        char *crlf = malloc(2 * n + 64);
        for (size_t i = 0; i < n; i++) {
            if (good[i] == '\n') crlf[m++] = '\r';
            crlf[m++] = good[i];
        }
        CHECKF(pi_hw_parse(crlf, m, &hw) == PI_OK, "CRLF: %s", pi_last_error());
        char *spaced = edit_line(good, "cpu", "\n\t# a comment\n   cpu\tavx512-16c   ");
        CHECKF(pi_hw_parse(spaced, strlen(spaced), &hw) == PI_OK, "spaced: %s", pi_last_error());
        free(spaced);
        free(crlf);
    }

    /* pi_hw_load names the path; a missing file is NOT_FOUND. */
    char path[256];
    t_tmp_path(path, sizeof path, "bad-hw.txt");
    char *t = edit_line(good, "mem_bw 2", "mem_bw 2 fast");
    FILE *f = fopen(path, "w");
    fputs(t, f);
    fclose(f);
    free(t);
    CHECK(pi_hw_load(path, &hw) == PI_ERR_FORMAT);
    CHECKF(strstr(pi_last_error(), path) && strstr(pi_last_error(), "line "), "%s", pi_last_error());
    unlink(path);
    CHECK(pi_hw_load(path, &hw) == PI_ERR_NOT_FOUND);
    free(good);
}

/* A run's achieved reads rescale the probe's table by their ratio to it at
   the run's size and depth, once; the factor is clamped; validation wants
   all of the run's fields or none. */
static void test_run_reads(void) {
    t_rng r = {7};
    pi_hw hw, base;
    fill_hw(&base, &r, false);
    CHECK(pi_hw_run_factor(&base) == 1.0 && pi_hw_run_factor(NULL) == 1.0);
    hw = base;
    hw.run_read_bytes = 8192.0;
    hw.run_qd = 128;
    hw.run_time = 1.8e9;
    hw.run_read_rate = 1.5 * pi_hw_iops(&base, 8192, 128);
    CHECKF(pi_hw_validate(&hw) == PI_OK, "%s", pi_last_error());
    CHECKF(fabs(pi_hw_run_factor(&hw) - 1.5) < 1e-12, "factor %.17g", pi_hw_run_factor(&hw));
    CHECK(fabs(pi_hw_apply_run(&hw, NULL) - 1.5) < 1e-12);
    bool scaled = true;
    for (int b = 0; b < PI_HW_N_BLOCKS; b++)
        for (int q = 0; q < PI_HW_N_QD; q++)
            scaled = scaled && fabs(hw.read_iops[b][q] / base.read_iops[b][q] - 1.5) < 1e-12 &&
                     fabs(base.read_lat_us[b][q] / hw.read_lat_us[b][q] - 1.5) < 1e-12;
    CHECK(scaled);
    CHECK(hw.run_read_rate == 0.0 && hw.run_qd == 0 && pi_hw_validate(&hw) == PI_OK);
    CHECK(pi_hw_apply_run(&hw, NULL) == 1.0 && fabs(pi_hw_iops(&hw, 8192, 128) / pi_hw_iops(&base, 8192, 128) - 1.5) < 1e-12);
    /* the probe's share with the cores computing (read_busy_k) stays for the
       planner where no run figure applies, and leaves the table as probed; a
       run's figure, which holds that share already, is flagged (run_reads,
       run_seq) so that the share prices neither the reads it replaced nor,
       applied again, anything twice; the probe's share itself stays */
    hw = base;
    hw.read_busy_k = 0.625;
    CHECK(pi_hw_apply_run(&hw, NULL) == 1.0 && hw.read_busy_k == 0.625 && !hw.run_reads && !hw.run_seq &&
          pi_hw_iops(&hw, 8192, 128) == pi_hw_iops(&base, 8192, 128));
    hw = base;
    hw.read_busy_k = 0.625;
    hw.run_read_bytes = 8192.0;
    hw.run_qd = 128;
    hw.run_time = 1.8e9;
    hw.run_read_rate = 0.75 * pi_hw_iops(&base, 8192, 128);
    CHECK(fabs(pi_hw_apply_run(&hw, NULL) - 0.75) < 1e-12 && hw.read_busy_k == 0.625 && hw.run_reads &&
          !hw.run_seq && fabs(pi_hw_iops(&hw, 8192, 128) / pi_hw_iops(&base, 8192, 128) - 0.75) < 1e-12);
    CHECK(pi_hw_apply_run(&hw, NULL) == 1.0 && hw.run_reads && hw.read_busy_k == 0.625); /* once, and still flagged */
    hw = base;
    hw.read_busy_k = 1.25;
    CHECK(pi_hw_validate(&hw) == PI_ERR_INVALID && strstr(pi_last_error(), "read_busy_k"));
    /* between grid points: the interpolated probe figure is the reference */
    hw = base;
    hw.run_read_bytes = 10000.0;
    hw.run_qd = 100;
    hw.run_time = 1.8e9;
    hw.run_read_rate = 0.5 * pi_hw_iops(&base, 10000, 100);
    CHECK(fabs(pi_hw_run_factor(&hw) - 0.5) < 1e-12);
    hw.run_read_rate = 1000.0 * pi_hw_iops(&base, 10000, 100);
    CHECK(pi_hw_run_factor(&hw) == 8.0);
    hw.run_read_rate = 1e-6;
    CHECK(pi_hw_run_factor(&hw) == 0.125);
    /* a second run averages into the first: the geometric mean of their
       factors, at the second run's size and depth; a first run is kept as it is */
    hw = base;
    pi_hw_note_run(&hw, 8192.0, 128, 2.0 * pi_hw_iops(&base, 8192, 128), 1.8e9);
    CHECKF(fabs(pi_hw_run_factor(&hw) - 2.0) < 1e-12 && hw.run_time == 1.8e9, "first run: factor %.17g",
           pi_hw_run_factor(&hw));
    pi_hw_note_run(&hw, 10000.0, 100, 0.5 * pi_hw_iops(&base, 10000, 100), 1.9e9);
    CHECKF(fabs(pi_hw_run_factor(&hw) - 1.0) < 1e-12 && hw.run_read_bytes == 10000.0 && hw.run_qd == 100 &&
               hw.run_time == 1.9e9 && pi_hw_validate(&hw) == PI_OK,
           "second run: factor %.17g", pi_hw_run_factor(&hw));
    pi_hw_note_run(&hw, 10000.0, 100, 4.0 * pi_hw_iops(&base, 10000, 100), 2.0e9);
    CHECKF(fabs(pi_hw_run_factor(&hw) - 2.0) < 1e-12, "third run: factor %.17g", pi_hw_run_factor(&hw));
    /* half a run record is refused */
    hw = base;
    hw.run_read_rate = 5000.0;
    CHECK(pi_hw_validate(&hw) == PI_ERR_INVALID && strstr(pi_last_error(), "run_reads"));
    CHECK(pi_hw_format(&hw, NULL, 0) < 0);

    /* the output head's sequential reads: noted, averaged, written and read
       back, applied once to the sequential rate alone, clamped */
    hw = base;
    CHECK(pi_hw_seq_factor(&hw) == 1.0);
    pi_hw_note_seq(&hw, 0.5 * base.seq_read_gbs, 1.8e9);
    CHECKF(fabs(pi_hw_seq_factor(&hw) - 0.5) < 1e-12 && hw.run_seq_time == 1.8e9, "first: %.17g", pi_hw_seq_factor(&hw));
    pi_hw_note_seq(&hw, 2.0 * base.seq_read_gbs, 1.9e9);
    CHECKF(fabs(pi_hw_seq_factor(&hw) - 1.0) < 1e-12 && hw.run_seq_time == 1.9e9, "second: %.17g", pi_hw_seq_factor(&hw));
    pi_hw_note_seq(&hw, 0.25 * base.seq_read_gbs, 2.0e9);
    CHECKF(fabs(pi_hw_seq_factor(&hw) - 0.5) < 1e-12, "third: %.17g", pi_hw_seq_factor(&hw));
    pi_hw_note_run(&hw, 8192.0, 128, 3.0 * pi_hw_iops(&base, 8192, 128), 2.0e9);
    char text[16384];
    const long len = pi_hw_format(&hw, text, sizeof text);
    pi_hw back;
    CHECKF(len > 0 && (size_t)len < sizeof text && strstr(text, "\nrun_seq ") && pi_hw_parse(text, (size_t)len, &back) == PI_OK &&
               back.run_seq_gbs == hw.run_seq_gbs && back.run_seq_time == hw.run_seq_time,
           "round trip: %s", pi_last_error());
    double ks = 0.0;
    CHECK(fabs(pi_hw_apply_run(&back, &ks) - 3.0) < 1e-12 && fabs(ks - 0.5) < 1e-12);
    CHECK(fabs(back.seq_read_gbs / base.seq_read_gbs - 0.5) < 1e-12 && back.run_seq_gbs == 0.0 &&
          back.run_seq_time == 0.0 && back.read_iops[0][0] == 3.0 * base.read_iops[0][0]);
    CHECK(pi_hw_apply_run(&back, &ks) == 1.0 && ks == 1.0 && fabs(back.seq_read_gbs / base.seq_read_gbs - 0.5) < 1e-12);
    hw = base;
    hw.run_seq_gbs = 1000.0 * base.seq_read_gbs;
    hw.run_seq_time = 1.8e9;
    CHECK(pi_hw_seq_factor(&hw) == 8.0);
    /* half a record, a repeated line, a bad figure: refused */
    hw = base;
    hw.run_seq_gbs = 1.0;
    CHECK(pi_hw_validate(&hw) == PI_ERR_INVALID && strstr(pi_last_error(), "run_seq"));
    const long blen = pi_hw_format(&base, text, sizeof text);
    CHECK(blen > 0);
    char *end = blen > 0 ? strstr(text, "\nend\n") : NULL;
    if (end) {
        static const char *bad[] = {"run_seq 1.5 1.8e9\nrun_seq 1.5 1.8e9", "run_seq 0 1.8e9", "run_seq 1.5",
                                    "run_seq nan 1.8e9", "run_seq 1.5 1.8e9 7"};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            char doc[16384];
            snprintf(doc, sizeof doc, "%.*s\n%s\nend\n", (int)(end - text), text, bad[i]);
            CHECKF(pi_hw_parse(doc, strlen(doc), &hw) == PI_ERR_FORMAT && strstr(pi_last_error(), "run_seq"),
                   "'%s': %s", bad[i], pi_last_error());
        }
        char doc[16384];
        snprintf(doc, sizeof doc, "%.*s\nrun_seq 1.5 1.8e9\nend\n", (int)(end - text), text);
        CHECKF(pi_hw_parse(doc, strlen(doc), &hw) == PI_OK && hw.run_seq_gbs == 1.5, "%s", pi_last_error());
    }

    /* compute: a run's factor noted, averaged, written and read back,
       applied once to memory and every kernel rate, clamped; flash untouched */
    hw = base;
    CHECK(pi_hw_compute_factor(&hw) == 1.0 && pi_hw_apply_compute(&hw) == 1.0 && hw.mem_bw[1] == base.mem_bw[1]);
    pi_hw_note_compute(&hw, 2.0, 1.8e9);
    CHECKF(fabs(pi_hw_compute_factor(&hw) - 2.0) < 1e-12 && hw.run_compute_time == 1.8e9, "first: %.17g",
           pi_hw_compute_factor(&hw));
    pi_hw_note_compute(&hw, 0.5, 1.9e9);
    CHECKF(fabs(pi_hw_compute_factor(&hw) - 1.0) < 1e-12 && hw.run_compute_time == 1.9e9, "second: %.17g",
           pi_hw_compute_factor(&hw));
    pi_hw_note_compute(&hw, 4.0, 2.0e9);
    CHECKF(fabs(pi_hw_compute_factor(&hw) - 2.0) < 1e-12, "third: %.17g", pi_hw_compute_factor(&hw));
    {
        char ctext[16384]; /* text keeps base's, which the refusals below extend */
        const long clen = pi_hw_format(&hw, ctext, sizeof ctext);
        pi_hw cb;
        CHECKF(clen > 0 && (size_t)clen < sizeof ctext && strstr(ctext, "\nrun_compute ") &&
                   pi_hw_parse(ctext, (size_t)clen, &cb) == PI_OK && cb.run_compute_k == hw.run_compute_k &&
                   cb.run_compute_time == hw.run_compute_time,
               "compute round trip: %s", pi_last_error());
        const double mv = pi_hw_kernel_gbs(&base, PI_HW_MATVEC, PI_TYPE_Q4_0, 1);
        CHECK(fabs(pi_hw_apply_compute(&cb) - 2.0) < 1e-12 && cb.run_compute_k == 0.0 && cb.run_compute_time == 0.0);
        CHECKF(fabs(cb.mem_bw[1] / base.mem_bw[1] - 2.0) < 1e-12 && mv > 0.0 &&
                   fabs(pi_hw_kernel_gbs(&cb, PI_HW_MATVEC, PI_TYPE_Q4_0, 1) / mv - 2.0) < 1e-12 &&
                   cb.read_iops[0][0] == base.read_iops[0][0] && cb.seq_read_gbs == base.seq_read_gbs,
               "compute applied: mem %.17g", cb.mem_bw[1] / base.mem_bw[1]);
        CHECK(pi_hw_apply_compute(&cb) == 1.0 && fabs(cb.mem_bw[1] / base.mem_bw[1] - 2.0) < 1e-12);
    }
    hw = base;
    pi_hw_note_compute(&hw, 100.0, 1.8e9);
    CHECK(pi_hw_compute_factor(&hw) == 8.0);
    hw = base;
    hw.run_compute_k = 1.5; /* half a record */
    CHECK(pi_hw_validate(&hw) == PI_ERR_INVALID && strstr(pi_last_error(), "run_compute"));
    if (end) {
        static const char *bad[] = {"run_compute 1.5 1.8e9\nrun_compute 1.5 1.8e9", "run_compute 0 1.8e9",
                                    "run_compute 1.5", "run_compute inf 1.8e9", "run_compute 1.5 1.8e9 7",
                                    "run_compute -2 1.8e9"};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            char doc[16384];
            snprintf(doc, sizeof doc, "%.*s\n%s\nend\n", (int)(end - text), text, bad[i]);
            CHECKF(pi_hw_parse(doc, strlen(doc), &hw) == PI_ERR_FORMAT && strstr(pi_last_error(), "run_compute"),
                   "'%s': %s", bad[i], pi_last_error());
        }
    }
}

static void test_interp(void) {
    pi_hw hw;
    t_rng r = {7};
    fill_hw(&hw, &r, false);
    /* Exact at the grid. */
    for (int b = 0; b < PI_HW_N_BLOCKS; b++)
        for (int q = 0; q < PI_HW_N_QD; q++) {
            double v = pi_hw_iops(&hw, hw.block[b], hw.qd[q]);
            CHECKF(fabs(v / hw.read_iops[b][q] - 1) < 1e-12, "grid %d %d: %g vs %g", b, q, v, hw.read_iops[b][q]);
        }
    /* Log-linear between: the geometric mean at the geometric midpoint. */
    double mid = pi_hw_iops(&hw, 5793, 1); /* ~sqrt(4096 * 8192) */
    CHECK(fabs(mid / sqrt(hw.read_iops[0][0] * hw.read_iops[1][0]) - 1) < 1e-3);
    /* Monotonic: fewer reads/s for bigger blocks, more for deeper queues, as the table. */
    int bad = 0;
    for (int q = 1; q <= 256; q = q * 3 / 2 + 1) {
        double prev = INFINITY;
        for (int b = 1024; b <= (1 << 20); b += b / 16 + 1) {
            double v = pi_hw_iops(&hw, b, q);
            if (!(v <= prev * (1 + 1e-12)) || !(v > 0)) bad++;
            prev = v;
        }
    }
    for (int b = 1024; b <= (1 << 20); b *= 3) {
        double prev = 0;
        for (int q = 0; q <= 300; q++) {
            double v = pi_hw_iops(&hw, b, q);
            if (!(v >= prev * (1 - 1e-12))) bad++;
            prev = v;
        }
    }
    CHECKF(bad == 0, "%d non-monotonic steps", bad);
    /* Clamped to the measured range. */
    CHECK(pi_hw_iops(&hw, 1, 1) == pi_hw_iops(&hw, 4096, 1));
    CHECK(pi_hw_iops(&hw, -5, -5) == pi_hw_iops(&hw, 4096, 1));
    CHECK(pi_hw_iops(&hw, 1 << 30, 100000) == pi_hw_iops(&hw, 131072, 128));
    CHECK(pi_hw_iops(&hw, 131072, 1 << 30) == pi_hw_iops(&hw, 131072, 128));
    CHECK(pi_hw_iops(NULL, 4096, 1) == 0.0);

    /* Kernels: measured, clamped threads, holes, other types. */
    CHECK(pi_hw_kernel_gbs(&hw, PI_HW_MATVEC, PI_TYPE_F32, 3) == hw.matvec[PI_TYPE_F32][3]);
    CHECK(pi_hw_kernel_gbs(&hw, PI_HW_AXPY, PI_TYPE_F16, 0) == hw.axpy[PI_TYPE_F16][1]);
    CHECK(pi_hw_kernel_gbs(&hw, PI_HW_ROWDOT, PI_TYPE_F16, 99) == hw.rowdot[PI_TYPE_F16][5]);
    CHECK(pi_hw_kernel_gbs(&hw, PI_HW_MATVEC, PI_TYPE_Q4_0, 2) == hw.matvec[PI_TYPE_Q4_0][1]); /* hole: lower first */
    CHECK(pi_hw_kernel_gbs(&hw, PI_HW_MATVEC, PI_TYPE_Q4_K, 4) == hw.matvec[PI_TYPE_Q4_0][4]); /* 4.5 bits */
    CHECK(pi_hw_kernel_gbs(&hw, PI_HW_MATVEC, PI_TYPE_Q6_K, 4) == hw.matvec[PI_TYPE_Q8_0][4]); /* 6.6 -> 8.5 */
    CHECK(pi_hw_kernel_gbs(&hw, PI_HW_MATVEC, PI_TYPE_F64, 1) == hw.matvec[PI_TYPE_F32][1]);
    CHECK(pi_hw_kernel_gbs(&hw, PI_HW_MATVEC, PI_TYPE_BF16, 1) == hw.matvec[PI_TYPE_F16][1]); /* 16 bits */
    CHECK(pi_hw_kernel_gbs(&hw, PI_HW_MATVEC, (pi_type)-3, 1) > 0);
    CHECK(pi_hw_kernel_gbs(&hw, 3, PI_TYPE_F32, 1) == 0.0);
    CHECK(pi_hw_kernel_gbs(NULL, 0, PI_TYPE_F32, 1) == 0.0);
    int nonmono = 0;
    for (int t = 1; t < 8; t++)
        nonmono += pi_hw_kernel_gbs(&hw, PI_HW_ROWDOT, PI_TYPE_F32, t + 1) <
                   pi_hw_kernel_gbs(&hw, PI_HW_ROWDOT, PI_TYPE_F32, t);
    CHECK(nonmono == 0);
    memset(hw.matvec, 0, sizeof hw.matvec);
    CHECK(pi_hw_kernel_gbs(&hw, PI_HW_MATVEC, PI_TYPE_F32, 1) == 0.0);
}

static void test_default_path(void) {
    char buf[512];
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    CHECK(pi_hw_default_path(buf, sizeof buf, 2049) && !strcmp(buf, "/xdg/pinfer/hwprobe-2049.txt"));
    CHECK(pi_hw_default_path(buf, 10, 2049) == NULL);
    setenv("XDG_CACHE_HOME", "relative", 1); /* not absolute: ignored, as the spec says */
    setenv("HOME", "/home/u", 1);
    CHECK(pi_hw_default_path(buf, sizeof buf, 7) && !strcmp(buf, "/home/u/.cache/pinfer/hwprobe-7.txt"));
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    CHECK(pi_hw_default_path(buf, sizeof buf, 7) == NULL);
}

/* Names of dir's entries starting with ".pinfer-hwprobe-". */
static int count_temp_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, ".pinfer-hwprobe-", 16)) n++;
    closedir(d);
    return n;
}

static bool all_positive(const pi_hw *hw) {
    static const pi_type types[] = {PI_TYPE_F32, PI_TYPE_F16, PI_TYPE_BF16, PI_TYPE_Q8_0, PI_TYPE_Q4_0};
    for (int t = 1; t <= hw->n_threads; t++) {
        if (!(hw->mem_bw[t] > 0 && isfinite(hw->mem_bw[t]))) return false;
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
            double v[3] = {hw->matvec[types[i]][t], hw->rowdot[types[i]][t], hw->axpy[types[i]][t]};
            for (int k = 0; k < 3; k++)
                if (!(v[k] > 0 && isfinite(v[k]))) return false;
        }
    }
    for (int b = 0; b < PI_HW_N_BLOCKS; b++)
        for (int q = 0; q < PI_HW_N_QD; q++)
            if (!(hw->read_iops[b][q] > 0 && isfinite(hw->read_iops[b][q]) && hw->read_lat_us[b][q] > 0 &&
                  isfinite(hw->read_lat_us[b][q])))
                return false;
    return hw->seq_read_gbs > 0 && isfinite(hw->seq_read_gbs);
}

static void test_probe(void) {
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    int before = count_temp_files(tmp);
    pi_hwprobe_opts o = {.dir = tmp, .max_threads = 2, .tiny = true};
    pi_hw hw;
    pi_status st = pi_hwprobe_run(&o, &hw);
    CHECKF(st == PI_OK, "%s", pi_last_error());
    if (st == PI_OK) {
        CHECK(hw.n_threads == 2);
        CHECKF(all_positive(&hw), "a figure is 0 or not finite");
        CHECK(pi_hw_validate(&hw) == PI_OK);
        CHECK(hw.io_backend[0] && hw.cpu[0] && hw.io_file_bytes > 0);
        CHECK(!strcmp(hw.kernels_build, pi_kernels_build_id()) && strlen(hw.kernels_build) == 16);
        CHECK(hw.other_cpu >= 0 && isfinite(hw.other_cpu));
        CHECKF(hw.read_busy_k > 0.0 && hw.read_busy_k <= 1.0, "read_busy_k %g", hw.read_busy_k);
        CHECK(hw.io_huge_pages); /* read into memory as the engine's */
        struct stat sb;
        CHECK(stat(tmp, &sb) == 0 && hw.fs_dev == (uint64_t)sb.st_dev);
        char path[256];
        t_tmp_path(path, sizeof path, "probe-hw.txt");
        pi_hw back;
        CHECK(pi_hw_save(&hw, path) == PI_OK && pi_hw_load(path, &back) == PI_OK && hw_equal(&hw, &back));
        unlink(path);

        /* memory and kernels only (hwprobe --compute): the flash figures and the
           reads runs achieved come from the earlier probe, bit for bit, and
           nothing is read from flash (no file or directory given) */
        pi_hw old = hw, again;
        snprintf(old.kernels_build, sizeof old.kernels_build, "0123456789abcdef");
        old.matvec[PI_TYPE_Q4_0][1] = 1e-3;
        old.read_iops[0][0] *= 3.0;
        old.read_cpu_us = 4.25;
        old.run_read_rate = 1234.5, old.run_read_bytes = 8192.0, old.run_time = 1.7e9, old.run_qd = 64;
        old.run_seq_gbs = 0.75, old.run_seq_time = 1.7e9;
        old.io_huge_pages = false; /* the flash figures' kind of memory goes with them */
        pi_hwprobe_opts oc = {.max_threads = 2, .tiny = true, .flash_from = &old};
        st = pi_hwprobe_run(&oc, &again);
        CHECKF(st == PI_OK, "%s", pi_last_error());
        CHECK(!memcmp(again.read_iops, old.read_iops, sizeof old.read_iops) &&
              !memcmp(again.read_lat_us, old.read_lat_us, sizeof old.read_lat_us) &&
              !memcmp(again.block, old.block, sizeof old.block) && !memcmp(again.qd, old.qd, sizeof old.qd) &&
              again.seq_read_gbs == old.seq_read_gbs && again.fs_dev == old.fs_dev && again.read_cpu_us == 4.25 &&
              again.io_file_bytes == old.io_file_bytes && !strcmp(again.io_backend, old.io_backend));
        CHECK(again.run_read_rate == 1234.5 && again.run_qd == 64 && again.run_seq_gbs == 0.75 &&
              !again.io_huge_pages);
        CHECK(!strcmp(again.kernels_build, pi_kernels_build_id()) && again.matvec[PI_TYPE_Q4_0][1] > 1e-3);
        CHECK(pi_hw_validate(&again) == PI_OK && all_positive(&again));
    }
    CHECKF(count_temp_files(tmp) == before, "the probe left its temp file in %s", tmp);

    /* A file too small to read randomly: a temp file in its directory instead. */
    char small[256];
    t_tmp_path(small, sizeof small, "small.bin");
    FILE *f = fopen(small, "w");
    fputs("tiny", f);
    fclose(f);
    pi_hwprobe_opts o2 = {.file = small, .max_threads = 1, .tiny = true};
    st = pi_hwprobe_run(&o2, &hw);
    CHECKF(st == PI_OK && hw.n_threads == 1 && all_positive(&hw), "%s", pi_last_error());
    unlink(small);
    CHECKF(count_temp_files(tmp) == before, "the probe left its temp file in %s", tmp);

    pi_hwprobe_opts o3 = {.file = "/nonexistent/model.gguf", .tiny = true};
    CHECK(pi_hwprobe_run(&o3, &hw) != PI_OK && strstr(pi_last_error(), "/nonexistent/model.gguf"));
    pi_hwprobe_opts o4 = {.dir = "/nonexistent-dir", .tiny = true};
    CHECK(pi_hwprobe_run(&o4, &hw) != PI_OK);
    pi_hwprobe_opts o5 = {.tiny = true};
    CHECK(pi_hwprobe_run(&o5, &hw) == PI_ERR_INVALID);

    /* The bandwidth probe others use keeps working. */
    pi_pool *pool;
    double bw = 0;
    CHECK(pi_pool_create(1, &pool) == PI_OK);
    CHECK(pi_probe_read_bw(pool, 1 << 20, 3, &bw) == PI_OK && bw > 0 && isfinite(bw));
    CHECK(pi_probe_read_bw(pool, 1 << 10, 3, &bw) == PI_ERR_INVALID);
    pi_pool_free(pool);
}

/* A block device's stat line: Linux 6.x writes 17 fields, 4.x 11; fields
   1, 3, 4 and 10 are taken. Anything else is refused. */
static void test_disk_stat(void) {
    pi_disk_counts d;
    const char *l17 = "170658705  4031083 5660090666 155919155   304778    81758 321467888  1563520        0  5438664 "
                      "157855431   105925       88 301695328   146894    46125   225861\n";
    CHECK(pi_hw_parse_disk_stat(l17, strlen(l17), &d));
    CHECKF(d.reads == 170658705u && d.bytes == 5660090666ull * 512 && fabs(d.read_s - 155919.155) < 1e-6 &&
               fabs(d.busy_s - 5438.664) < 1e-6,
           "17 fields: %llu reads, %llu bytes, %.3f s, %.3f s busy", (unsigned long long)d.reads,
           (unsigned long long)d.bytes, d.read_s, d.busy_s);
    const char *l11 = "    7 0 56 3 0 0 0 0 0 9 3";
    CHECK(pi_hw_parse_disk_stat(l11, strlen(l11), &d) && d.reads == 7 && d.bytes == 56 * 512 &&
          fabs(d.busy_s - 0.009) < 1e-12);
    static const char *bad[] = {
        "",                                       /* empty */
        "1 2 3 4 5 6 7 8 9 10\n",                 /* 10 fields */
        "1 2 3 4 5 6 7 8 9 10 x\n",               /* not a number */
        "1 2 3 4 5 6 7 8 9 10 -1\n",              /* negative */
        "1 2 3 4 5 6 7 8 9 10 11z\n",             /* trailing letters */
        "1 2 3 4 5 6 7 8 9 10 11\n1\n",           /* two lines */
        "99999999999999999999 2 3 4 5 6 7 8 9 10 11\n", /* past 2^63 */
        "1 2 36028797018963968 4 5 6 7 8 9 10 11\n",    /* sectors whose bytes pass 2^64 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        d.reads = 1;
        CHECKF(!pi_hw_parse_disk_stat(bad[i], strlen(bad[i]), &d) && d.reads == 0, "bad stat line %zu accepted", i);
    }
    /* a device that is not there */
    CHECK(pi_hw_disk_counts(0, &d) == PI_ERR_NOT_FOUND && d.reads == 0);
}

/* Reads of 4 KiB at offsets 0, 4096, ... wrapping in 1 MiB, n of them. */
typedef struct {
    int64_t i, n;
} seq_wl;

static bool next_seq(void *ctx, int64_t *off, size_t *len) {
    seq_wl *w = ctx;
    if (w->i >= w->n) return false;
    *off = (w->i++ % 256) * 4096;
    *len = 4096;
    return true;
}

/* One probe point: the reads counted, and the CPU they took, the calling
   thread's and the machine's (/proc/stat ticks: within a tick or two of at
   least the thread's). */
static void test_probe_point(void) {
    char path[256];
    t_tmp_path(path, sizeof path, "probe-point.bin");
    FILE *f = fopen(path, "wb");
    static uint8_t block[4096];
    for (int i = 0; i < 256 && f; i++) fwrite(block, 1, sizeof block, f);
    if (f) fclose(f);
    seq_wl w = {0, 20000};
    pi_probe_io_point pt;
    pi_status st = pi_probe_io(path, PI_IO_AUTO, 8, 4096, 5.0, next_seq, &w, &pt);
    CHECKF(st == PI_OK, "probe point: %s", pi_last_error());
    if (st == PI_OK) {
        CHECKF(pt.reads > 0 && pt.reads <= 20000 && pt.bytes == pt.reads * 4096 && pt.seconds > 0 && pt.cpu_s >= 0,
               "probe point: %llu reads in %.3f s", (unsigned long long)pt.reads, pt.seconds);
        const bool proc_stat = access("/proc/stat", R_OK) == 0;
        CHECKF(pt.machine_cpu_s >= 0.0 && isfinite(pt.machine_cpu_s) &&
                   (!proc_stat || pt.machine_cpu_s >= pt.cpu_s - 0.05),
               "probe point: the machine's CPU %.3f s, the thread's %.3f s", pt.machine_cpu_s, pt.cpu_s);
    }
    unlink(path);
}

int main(void) {
    signal(SIGALRM, on_alarm);
    alarm(120);
    test_round_trip();
    test_malformed();
    test_interp();
    test_run_reads();
    test_disk_stat();
    test_probe_point();
    test_default_path();
    test_probe();
    return t_done("test_hwprobe");
}
