/*
 * fuzz_hwfile.c — libFuzzer target for the hwprobe cache file parser
 * (pi_hw_parse, which pi_hw_load uses).
 *
 * Any input must be rejected cleanly or give a result that (1) passes
 * pi_hw_validate, (2) formats and parses back to the same result bit for bit,
 * and (3) gives the cost model's helpers positive finite figures (reads/s at
 * any block size and queue depth; kernel GB/s >= 0 for every kernel, type and
 * thread count), and (4) a run's achieved reads rescale the read figures,
 * and its compute factor the memory and kernel figures, once, within
 * [1/8, 8], leaving a valid result. A violated invariant aborts. The same
 * bytes also go to the block device stat-line parser (pi_hw_parse_disk_stat),
 * which takes whole counters or none.
 *
 * Build with clang from the repository root (`make fuzz`): fuzz/fuzz_hwfile.c,
 * src/plan/hwfile.c, every .c of src/base and src/kernels/types.c, with
 * -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -fsanitize=fuzzer,address,undefined.
 * Without clang the same function runs as a test through fuzz/replay_main.c
 * (build/<mode>/tests/test_fuzz_hwfile) over fuzz/corpus/, whose hwfile/
 * holds the seeds.
 */
#include "plan/hwprobe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_REQUIRE(x)                                                                     \
    do {                                                                                    \
        if (!(x)) {                                                                         \
            fprintf(stderr, "fuzz_hwfile: invariant failed: %s (line %d)\n", #x, __LINE__); \
            abort();                                                                        \
        }                                                                                   \
    } while (0)

static bool same(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

static bool hw_equal(const pi_hw *a, const pi_hw *b) {
    return a->n_threads == b->n_threads && same(a->mem_bw, b->mem_bw, sizeof a->mem_bw) &&
           same(a->matvec, b->matvec, sizeof a->matvec) && same(a->rowdot, b->rowdot, sizeof a->rowdot) &&
           same(a->axpy, b->axpy, sizeof a->axpy) && !strcmp(a->io_backend, b->io_backend) &&
           same(a->block, b->block, sizeof a->block) && same(a->qd, b->qd, sizeof a->qd) &&
           same(a->read_iops, b->read_iops, sizeof a->read_iops) &&
           same(a->read_lat_us, b->read_lat_us, sizeof a->read_lat_us) &&
           same(&a->seq_read_gbs, &b->seq_read_gbs, sizeof a->seq_read_gbs) && a->fs_dev == b->fs_dev &&
           !strcmp(a->cpu, b->cpu) && same(a->mem_bw_est, b->mem_bw_est, sizeof a->mem_bw_est) &&
           same(a->kernel_est, b->kernel_est, sizeof a->kernel_est) &&
           same(a->read_est, b->read_est, sizeof a->read_est) && a->quick == b->quick &&
           a->io_buffered == b->io_buffered && a->io_file_bytes == b->io_file_bytes &&
           same(&a->other_cpu, &b->other_cpu, sizeof a->other_cpu) &&
           same(&a->run_read_rate, &b->run_read_rate, sizeof a->run_read_rate) &&
           same(&a->run_read_bytes, &b->run_read_bytes, sizeof a->run_read_bytes) &&
           same(&a->run_time, &b->run_time, sizeof a->run_time) && a->run_qd == b->run_qd &&
           same(&a->run_seq_gbs, &b->run_seq_gbs, sizeof a->run_seq_gbs) &&
           same(&a->run_seq_time, &b->run_seq_time, sizeof a->run_seq_time) &&
           same(&a->run_compute_k, &b->run_compute_k, sizeof a->run_compute_k) &&
           same(&a->run_compute_time, &b->run_compute_time, sizeof a->run_compute_time);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* the same bytes as a block device's stat line: whole counters or none */
    pi_disk_counts d;
    if (pi_hw_parse_disk_stat((const char *)data, size, &d))
        FUZZ_REQUIRE(d.bytes % 512 == 0 && d.read_s >= 0.0 && isfinite(d.read_s) && d.busy_s >= 0.0 &&
                     isfinite(d.busy_s));
    else
        FUZZ_REQUIRE(d.reads == 0 && d.bytes == 0 && d.read_s == 0.0 && d.busy_s == 0.0);
    pi_hw hw;
    if (pi_hw_parse((const char *)data, size, &hw) != PI_OK) return 0;
    FUZZ_REQUIRE(pi_hw_validate(&hw) == PI_OK);

    long n = pi_hw_format(&hw, NULL, 0);
    FUZZ_REQUIRE(n > 0);
    char *text = malloc((size_t)n + 1);
    FUZZ_REQUIRE(text != NULL);
    FUZZ_REQUIRE(pi_hw_format(&hw, text, (size_t)n + 1) == n);
    pi_hw back;
    FUZZ_REQUIRE(pi_hw_parse(text, (size_t)n, &back) == PI_OK);
    FUZZ_REQUIRE(hw_equal(&hw, &back));
    free(text);

    static const int blocks[] = {-1, 0, 1, 4096, 5000, 8192, 12288, 1 << 20, 1 << 30};
    static const int qds[] = {-1, 0, 1, 3, 8, 50, 128, 1000000};
    for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++)
        for (size_t q = 0; q < sizeof qds / sizeof qds[0]; q++) {
            double v = pi_hw_iops(&hw, blocks[b], qds[q]);
            FUZZ_REQUIRE(v > 0 && isfinite(v));
        }
    for (int w = -1; w <= PI_HW_N_KERNELS; w++)
        for (int t = -1; t <= PI_TYPE_COUNT; t++)
            for (int th = -1; th <= PI_HW_MAX_THREADS + 1; th += 3) {
                double v = pi_hw_kernel_gbs(&hw, w, (pi_type)t, th);
                FUZZ_REQUIRE(v >= 0 && isfinite(v));
            }
    /* a run's achieved reads (random and the head's sequential ones) rescale
       the figures within [1/8, 8] and apply once */
    const double k = pi_hw_run_factor(&hw), ks = pi_hw_seq_factor(&hw);
    FUZZ_REQUIRE(k >= 0.125 && k <= 8.0 && ks >= 0.125 && ks <= 8.0);
    double ks2 = 0.0;
    const double k2 = pi_hw_apply_run(&hw, &ks2);
    FUZZ_REQUIRE((k2 == k || k2 == 1.0) && (ks2 == ks || ks2 == 1.0) && hw.run_read_rate == 0.0 &&
                 hw.run_seq_gbs == 0.0 && pi_hw_validate(&hw) == PI_OK);
    FUZZ_REQUIRE(pi_hw_apply_run(&hw, &ks2) == 1.0 && ks2 == 1.0);
    for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
        double v = pi_hw_iops(&hw, blocks[b], 128);
        FUZZ_REQUIRE(v > 0 && isfinite(v));
    }
    /* a run's compute factor rescales memory and kernels the same way */
    const double kc = pi_hw_compute_factor(&hw);
    FUZZ_REQUIRE(kc >= 0.125 && kc <= 8.0);
    const double kc2 = pi_hw_apply_compute(&hw);
    FUZZ_REQUIRE((kc2 == kc || kc2 == 1.0) && hw.run_compute_k == 0.0 && pi_hw_validate(&hw) == PI_OK);
    FUZZ_REQUIRE(pi_hw_apply_compute(&hw) == 1.0);
    return 0;
}
