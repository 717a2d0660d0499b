/*
 * hwprobe.c — memory bandwidth measurement.
 *
 * The buffer is huge-page backed like the engine's weights, so the figure
 * is not lowered by TLB misses the engine does not pay. The read loop is plain C with independent accumulators; compilers vectorise
 * it with the baseline ISA, which reads far faster than DRAM delivers, so the
 * figure is the memory system's, not the loop's.
 */
#include "hwprobe.h"

#include "base/mapfile.h"
#include "base/timer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const uint64_t *buf;
    uint64_t sink[1024]; /* per-thread results, spaced to avoid false sharing */
} bw_ctx;

static void read_range(void *vctx, int64_t i0, int64_t i1, int tid) {
    bw_ctx *c = vctx;
    const uint64_t *p = c->buf;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8) {
        a0 ^= p[i + 0]; a1 ^= p[i + 1]; a2 ^= p[i + 2]; a3 ^= p[i + 3];
        a4 ^= p[i + 4]; a5 ^= p[i + 5]; a6 ^= p[i + 6]; a7 ^= p[i + 7];
    }
    for (; i < i1; i++) a0 ^= p[i];
    c->sink[(tid * 16) % 1024] ^= a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7;
}

double pi_median(double *v, int n) {
    if (n <= 0) return 0.0;
    for (int i = 1; i < n; i++) { /* insertion sort: n is small */
        double x = v[i];
        int j = i - 1;
        for (; j >= 0 && v[j] > x; j--) v[j + 1] = v[j];
        v[j + 1] = x;
    }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

pi_status pi_probe_read_bw(pi_pool *pool, size_t bytes, int reps, double *out) {
    *out = 0.0;
    if (reps < 1 || reps > 1000) return pi_error(PI_ERR_INVALID, "read bandwidth: reps %d out of range", reps);
    size_t n = bytes / sizeof(uint64_t);
    if (n < 4096) return pi_error(PI_ERR_INVALID, "read bandwidth: buffer of %zu bytes is too small", bytes);
    uint64_t *buf = pi_huge_alloc(n * sizeof(uint64_t));
    if (!buf) return pi_error(PI_ERR_NOMEM, "read bandwidth: cannot allocate %zu bytes", bytes);
    for (size_t i = 0; i < n; i++) buf[i] = i * 0x9e3779b97f4a7c15ull; /* fault in every page */
    bw_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        pi_huge_free(buf, n * sizeof *buf);
        return pi_error(PI_ERR_NOMEM, "read bandwidth: out of memory");
    }
    c->buf = buf;
    double gbs[1000];
    int T = pi_pool_size(pool);
    int64_t grain = (int64_t)(n / (size_t)T / 64 + 1);
    pi_pool_for(pool, (int64_t)n, grain, read_range, c); /* warm-up pass */
    for (int r = 0; r < reps; r++) {
        double t0 = pi_time_s();
        pi_pool_for(pool, (int64_t)n, grain, read_range, c);
        double dt = pi_time_s() - t0;
        gbs[r] = (double)(n * sizeof *buf) / dt * 1e-9;
    }
    *out = pi_median(gbs, reps);
    free(c);
    pi_huge_free(buf, n * sizeof *buf);
    return PI_OK;
}
