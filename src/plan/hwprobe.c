/*
 * hwprobe.c — measuring this machine: memory bandwidth, kernel throughput on
 * the dense and sparse access patterns, and flash random reads by size and
 * queue depth. The cache file and the interpolation helpers are in hwfile.c.
 *
 * Memory: the buffer is huge-page backed like the engine's weights, so the
 * figure is not lowered by TLB misses the engine does not pay. The read loop
 * is plain C with independent accumulators; compilers vectorise it with the
 * baseline ISA, which reads far faster than DRAM delivers, so the figure is
 * the memory system's, not the loop's.
 *
 * Kernels: every working set is far larger than the last-level cache (which
 * is large and, on shared machines, fast well past 64 MiB), so the figures are
 * what DRAM delivers through each kernel. Random-row patterns visit every row
 * once per pass in a shuffled order, so nothing is reused from cache either.
 *
 * Flash: O_DIRECT reads through the I/O engine itself, a closed loop keeping
 * qd reads in flight. A temp file is written with real random data (not
 * fallocate, whose extents read back as zeros without touching the device),
 * through O_DIRECT or else fsync + POSIX_FADV_DONTNEED, and unlinked as soon
 * as it is reopened through /proc/self/fd, so even a killed probe leaves
 * nothing behind.
 *
 * The random reads slow down while the cores compute: on a 2-core virtual
 * machine, 8 KiB reads at queue depth 128 went from 58-66K/s to 36-41K/s
 * with two threads streaming memory beside the reading one, about what the
 * engine achieves while it decodes (0.65x the idle probe). So the probe also
 * measures that point with every core streaming memory, alternated with the
 * idle one, and keeps the ratio (read_busy_k), at which plans price reads.
 *
 * Before reading, the filesystem is synced and the probe waits until the
 * kernel has no writeback left for it (bounded): a file just written by
 * convert or gen-model is still being written back for seconds, and reads
 * measured meanwhile come out at half the disk's rate or less.
 *
 * Quick mode measures fewer thread counts, block sizes and queue depths and
 * fills the rest in by interpolation, flagged as estimated.
 */
#include "hwprobe.h"

#include "base/cpu.h"
#include "base/mapfile.h"
#include "base/timer.h"
#include "kernels/types.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
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

/* ---- memory bandwidth ---- */

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

/* A buffer of n words, every page touched. NULL when out of memory. */
static uint64_t *bw_buffer(size_t n) {
    uint64_t *buf = pi_huge_alloc(n * sizeof(uint64_t));
    if (buf)
        for (size_t i = 0; i < n; i++) buf[i] = i * 0x9e3779b97f4a7c15ull;
    return buf;
}

/* The median GB/s of reps passes over buf[0..n) after a warm-up pass. */
static pi_status bw_passes(pi_pool *pool, const uint64_t *buf, size_t n, int reps, double *out) {
    bw_ctx *c = calloc(1, sizeof *c);
    if (!c) return pi_error(PI_ERR_NOMEM, "read bandwidth: out of memory");
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
    return PI_OK;
}

pi_status pi_probe_read_bw(pi_pool *pool, size_t bytes, int reps, double *out) {
    *out = 0.0;
    if (reps < 1 || reps > 1000) return pi_error(PI_ERR_INVALID, "read bandwidth: reps %d out of range", reps);
    size_t n = bytes / sizeof(uint64_t);
    if (n < 4096) return pi_error(PI_ERR_INVALID, "read bandwidth: buffer of %zu bytes is too small", bytes);
    uint64_t *buf = bw_buffer(n);
    if (!buf) return pi_error(PI_ERR_NOMEM, "read bandwidth: cannot allocate %zu bytes", bytes);
    pi_status st = bw_passes(pool, buf, n, reps, out);
    pi_huge_free(buf, n * sizeof *buf);
    return st;
}

/* ---- kernels ---- */

void pi_probe_mats_free(pi_probe_mats *m) {
    if (!m) return;
    if (m->data) pi_huge_free(m->data, m->alloc_bytes);
    free(m->xf);
    free(m->xq);
    free(m->order);
    memset(m, 0, sizeof *m);
}

pi_status pi_probe_mats_create(pi_type t, int64_t rows, int64_t cols, size_t min_bytes, pi_probe_mats *m) {
    memset(m, 0, sizeof *m);
    const pi_type_info *ti = pi_type_get((uint32_t)t);
    if (!ti || !ti->compute || pi_vec_dot_type(t) < 0)
        return pi_error(PI_ERR_INVALID, "probe: no kernels for type %s", pi_type_name((uint32_t)t));
    if (rows < 1 || cols < 32 || cols % 32 || cols % ti->blck || cols > PI_MAX_ROW)
        return pi_error(PI_ERR_INVALID, "probe: bad matrix shape %lld x %lld for %s", (long long)rows, (long long)cols,
                        ti->name);
    const int act = pi_vec_dot_type(t);
    m->type = t;
    m->rows = rows;
    m->cols = cols;
    m->row_bytes = pi_row_size(t, cols);
    m->mat_bytes = m->row_bytes * (size_t)rows;
    m->n_mat = min_bytes / m->mat_bytes + 1;
    if (m->n_mat < 2) m->n_mat = 2;
    m->alloc_bytes = m->mat_bytes * m->n_mat;
    int64_t total = rows * (int64_t)m->n_mat;
    m->data = pi_huge_alloc(m->alloc_bytes);
    m->xf = malloc((size_t)cols * sizeof *m->xf);
    m->xq = act != PI_TYPE_F32 ? malloc(pi_row_size((pi_type)act, cols)) : NULL;
    m->order = malloc((size_t)total * sizeof *m->order);
    if (!m->data || !m->xf || (act != PI_TYPE_F32 && !m->xq) || !m->order) {
        size_t mib = m->alloc_bytes >> 20;
        pi_probe_mats_free(m);
        return pi_error(PI_ERR_NOMEM, "probe: cannot allocate %zu MiB of %s weights", mib, pi_type_name((uint32_t)t));
    }
    /* A random tile of up to 256 rows (xf is its scratch row), repeated over the whole buffer. */
    uint64_t s = 0x1234u + (uint64_t)t;
    int64_t tile = total < 256 ? total : 256;
    for (int64_t r = 0; r < tile; r++) {
        for (int64_t c = 0; c < cols; c++) m->xf[c] = ((float)(splitmix(&s) >> 40) * 0x1.0p-24f - 0.5f) * 0.1f;
        pi_quantize_row(t, m->xf, m->data + (size_t)r * m->row_bytes, cols);
    }
    size_t tile_bytes = (size_t)tile * m->row_bytes;
    for (size_t at = tile_bytes; at < m->alloc_bytes; at += tile_bytes) {
        size_t len = m->alloc_bytes - at < tile_bytes ? m->alloc_bytes - at : tile_bytes;
        memcpy(m->data + at, m->data, len);
    }
    for (int64_t c = 0; c < cols; c++) m->xf[c] = (float)((c * 7919) % 2001 - 1000) * 1e-3f;
    if (m->xq) pi_quantize_row((pi_type)act, m->xf, m->xq, cols);
    m->x = m->xq ? (const void *)m->xq : (const void *)m->xf;
    for (int64_t i = 0; i < total; i++) m->order[i] = i;
    for (int64_t i = total - 1; i > 0; i--) { /* Fisher-Yates */
        int64_t j = (int64_t)(splitmix(&s) % (uint64_t)(i + 1)), x = m->order[i];
        m->order[i] = m->order[j];
        m->order[j] = x;
    }
    return PI_OK;
}

typedef struct kjob {
    const pi_probe_mats *m;
    pi_vec_dot_fn dot;
    pi_vec_dot_rows_fn dots;
    pi_axpy_rows_fn axpy_rows;
    pi_matvec_fn mv;
    const uint8_t *W; /* matvec: the current matrix */
    float *y;         /* matvec: (rows); rowdot: (n_mat * rows) */
    float *acc;       /* axpy: (threads, acc_stride) */
    size_t acc_stride;
} kjob;

static void job_matvec(void *ctx, int64_t r0, int64_t r1, int tid) {
    (void)tid;
    kjob *j = ctx;
    j->mv(j->m->cols, j->W, j->m->row_bytes, r0, r1, j->m->x, j->y);
}

/* The sparse FFN's pattern: scattered rows, gathered 64 to a call. */
static void job_rowdot(void *ctx, int64_t i0, int64_t i1, int tid) {
    (void)tid;
    kjob *j = ctx;
    const pi_probe_mats *m = j->m;
    const void *rows[64];
    for (int64_t b = i0; b < i1; b += 64) {
        int64_t n = i1 - b < 64 ? i1 - b : 64;
        for (int64_t r = 0; r < n; r++) rows[r] = m->data + (size_t)m->order[b + r] * m->row_bytes;
        j->dots(m->cols, rows, n, m->x, j->y + b);
    }
}

/* The sparse FFN's down projection: scattered rows added into one
   accumulator by the gathered axpy, 64 rows to a call. */
static void job_axpy(void *ctx, int64_t i0, int64_t i1, int tid) {
    kjob *j = ctx;
    const pi_probe_mats *m = j->m;
    float *acc = j->acc + (size_t)tid * j->acc_stride;
    const void *rows[64];
    float a[64];
    for (int64_t b = i0; b < i1; b += 64) {
        int64_t n = i1 - b < 64 ? i1 - b : 64;
        for (int64_t r = 0; r < n; r++) {
            rows[r] = m->data + (size_t)m->order[b + r] * m->row_bytes;
            a[r] = ((b + r) & 1) ? 1e-3f : -1e-3f;
        }
        j->axpy_rows(m->cols, a, rows, n, acc);
    }
}

/* One pass over all of m's weights. */
static void kernel_pass(pi_pool *pool, kjob *j, int what) {
    const pi_probe_mats *m = j->m;
    int T = pi_pool_size(pool);
    if (what == PI_HW_MATVEC) {
        int64_t grain = m->rows / T / 8 + 1;
        for (size_t k = 0; k < m->n_mat; k++) {
            j->W = m->data + k * m->mat_bytes;
            pi_pool_for(pool, m->rows, grain, job_matvec, j);
        }
    } else {
        int64_t total = m->rows * (int64_t)m->n_mat;
        pi_pool_for(pool, total, total / T / 8 + 1, what == PI_HW_ROWDOT ? job_rowdot : job_axpy, j);
    }
}

pi_status pi_probe_kernel(pi_pool *pool, const pi_kernels *k, const pi_probe_mats *m, int what, int reps,
                          double *out) {
    *out = 0.0;
    enum { MAX_REPS = 100 };
    if (reps < 1 || reps > MAX_REPS)
        return pi_error(PI_ERR_INVALID, "kernel probe: reps %d not in 1..%d", reps, MAX_REPS);
    if (what < 0 || what >= PI_HW_N_KERNELS) return pi_error(PI_ERR_INVALID, "kernel probe: no pattern %d", what);
    kjob j = {.m = m, .dot = k->vec_dot[m->type], .dots = k->vec_dot_rows[m->type], .axpy_rows = k->axpy_rows[m->type],
              .mv = k->matvec[m->type]};
    if ((what == PI_HW_MATVEC && !j.mv) || (what == PI_HW_ROWDOT && !j.dots) || (what == PI_HW_AXPY && !j.axpy_rows))
        return pi_error(PI_ERR_UNSUPPORTED, "kernel set %s has no such kernel for %s", k->name,
                        pi_type_name((uint32_t)m->type));
    int T = pi_pool_size(pool);
    int64_t total = m->rows * (int64_t)m->n_mat;
    j.acc_stride = ((size_t)m->cols + 15) / 16 * 16; /* whole cache lines per thread */
    size_t y_len = what == PI_HW_MATVEC ? (size_t)m->rows : what == PI_HW_ROWDOT ? (size_t)total : 0;
    j.y = y_len ? calloc(y_len, sizeof *j.y) : NULL;
    j.acc = what == PI_HW_AXPY ? aligned_alloc(64, (size_t)T * j.acc_stride * sizeof *j.acc) : NULL;
    if ((y_len && !j.y) || (what == PI_HW_AXPY && !j.acc)) {
        free(j.y);
        free(j.acc);
        return pi_error(PI_ERR_NOMEM, "kernel probe: out of memory");
    }
    if (j.acc) memset(j.acc, 0, (size_t)T * j.acc_stride * sizeof *j.acc);
    double gbs[MAX_REPS];
    kernel_pass(pool, &j, what); /* warm-up */
    for (int r = 0; r < reps; r++) {
        double t0 = pi_time_s();
        kernel_pass(pool, &j, what);
        gbs[r] = (double)m->alloc_bytes / (pi_time_s() - t0) * 1e-9;
    }
    *out = pi_median(gbs, reps);
    free(j.y);
    free(j.acc);
    return PI_OK;
}

/* ---- flash: the measuring loop ---- */

/* The calling thread's CPU time (user + system), seconds. */
static double thread_cpu_s(void) {
    struct timespec ts;
    return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0 ? (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 : 0.0;
}

/* CPU seconds the whole machine has used (/proc/stat: all but idle and
   iowait; steal too where with_steal, as the hypervisor's other guests
   compete for the cores), or -1. */
static double machine_cpu_s(bool with_steal) {
    FILE *f = fopen("/proc/stat", "re");
    if (!f) return -1;
    unsigned long long v[8] = {0};
    int k = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                   &v[7]);
    fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    if (k < 8 || hz <= 0) return -1;
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + (with_steal ? v[7] : 0)) / (double)hz;
}

pi_status pi_probe_io(const char *path, pi_io_backend b, int qd, size_t max_len, double seconds,
                      pi_probe_next_fn next, void *ctx, pi_probe_io_point *out) {
    memset(out, 0, sizeof *out);
    if (qd < 1 || qd > PI_IO_MAX_QUEUE_DEPTH || max_len < 1 || !(seconds > 0))
        return pi_error(PI_ERR_INVALID, "io probe: bad queue depth %d, length %zu or duration", qd, max_len);
    pi_io_opts o = {.backend = b, .queue_depth = qd, .n_workers = qd};
    pi_io *io;
    pi_status st = pi_io_open(path, &o, &io);
    if (st) return st;
    size_t align = pi_io_align(io) < 4096 ? 4096 : pi_io_align(io);
    size_t slot_bytes = (max_len + align - 1) / align * align;
    size_t buf_len = slot_bytes * (size_t)qd;
    /* the memory the engine reads into: huge pages where the kernel gives
       them, as the neuron cache's arena (store/cache.c says what 4 KiB pages
       cost a read) */
    uint8_t *buf = pi_huge_alloc(buf_len);
    struct iovec *iov = calloc((size_t)qd, sizeof *iov);
    uint64_t *t_start = calloc((size_t)qd, sizeof *t_start), *tags = calloc((size_t)qd, sizeof *tags);
    pi_io_req *reqs = calloc((size_t)qd, sizeof *reqs);
    if (!buf || !iov || !t_start || !tags || !reqs) {
        st = pi_error(PI_ERR_NOMEM, "io probe: out of memory");
        goto out;
    }
    memset(buf, 0, buf_len);
    if ((st = pi_io_register(io, buf, buf_len))) goto out;
    const double cpu0 = thread_cpu_s(), mcpu0 = machine_cpu_s(false);
    uint64_t t0 = pi_time_ns(), t_end = t0 + (uint64_t)(seconds * 1e9), t_last = t0;
    int n = 0; /* free slots, listed in tags[0..n) */
    for (int s = 0; s < qd; s++) tags[n++] = (uint64_t)s;
    bool submitting = true, counting = true;
    for (;;) {
        if (submitting) {
            uint64_t now = pi_time_ns();
            int m = 0;
            for (int k = 0; k < n; k++) {
                int s = (int)tags[k];
                int64_t off;
                size_t len;
                if (!next(ctx, &off, &len)) {
                    submitting = false; /* the workload is done: count what is in flight */
                    break;
                }
                if (len < 1 || len > max_len) {
                    st = pi_error(PI_ERR_INVALID, "io probe: read of %zu bytes, at most %zu", len, max_len);
                    goto out;
                }
                iov[s] = (struct iovec){buf + (size_t)s * slot_bytes, len};
                reqs[m++] = (pi_io_req){.off = off, .iov = &iov[s], .iovcnt = 1, .tag = (uint64_t)s};
                t_start[s] = now;
            }
            if (m > 0) {
                const uint64_t s0 = pi_time_ns();
                if ((st = pi_io_submit(io, reqs, m))) goto out;
                if (counting) out->submit_s += (double)(pi_time_ns() - s0) * 1e-9;
            }
        }
        if (pi_io_in_flight(io) == 0) break;
        n = pi_io_reap(io, tags, qd, true);
        if (n < 0) {
            st = PI_ERR_IO;
            goto out;
        }
        uint64_t now = pi_time_ns();
        if (!counting) continue; /* draining after the time ran out */
        for (int k = 0; k < n; k++) {
            out->reads++;
            out->bytes += iov[tags[k]].iov_len;
            out->lat_sum_us += (double)(now - t_start[tags[k]]) * 1e-3;
        }
        t_last = now;
        if (now >= t_end) counting = submitting = false;
    }
    out->seconds = (double)(t_last - t0) * 1e-9;
    out->cpu_s = thread_cpu_s() - cpu0;
    const double mcpu1 = machine_cpu_s(false);
    out->machine_cpu_s = mcpu0 >= 0 && mcpu1 >= mcpu0 ? mcpu1 - mcpu0 : 0.0;
out:
    if (st) {
        pi_error_saved e;
        pi_error_save(&e);
        pi_io_close(io);
        pi_error_restore(&e);
    } else {
        pi_io_close(io);
    }
    pi_huge_free(buf, buf_len);
    free(iov);
    free(t_start);
    free(tags);
    free(reqs);
    return st;
}

/* ---- the probe ---- */

typedef struct rand_wl {
    uint64_t rng;
    int64_t n_slots; /* offsets: 0, align, 2 * align, ... (n_slots of them) */
    int64_t align;
    size_t len;
} rand_wl;

static bool next_random(void *ctx, int64_t *off, size_t *len) {
    rand_wl *w = ctx;
    *off = (int64_t)(splitmix(&w->rng) % (uint64_t)w->n_slots) * w->align;
    *len = w->len;
    return true;
}

typedef struct seq_wl {
    int64_t at, end;
    size_t len;
} seq_wl;

static bool next_seq(void *ctx, int64_t *off, size_t *len) {
    seq_wl *w = ctx;
    if (w->at + (int64_t)w->len > w->end) return false;
    *off = w->at;
    *len = w->len;
    w->at += (int64_t)w->len;
    return true;
}

/* Sizes and durations of one probe mode. */
typedef struct probe_cfg {
    size_t bw_bytes, kern_bytes;
    int bw_reps, kern_reps;
    int64_t kern_rows;
    uint64_t tmp_bytes, min_file;
    double point_s, seq_s;
    bool all_threads, all_points;
} probe_cfg;

static const int k_blocks[PI_HW_N_BLOCKS] = {4096, 8192, 16384, 32768, 65536, 131072};
static const int k_qds[PI_HW_N_QD] = {1, 8, 32, 64, 128};
/* Measured in quick mode; the rest is interpolated (16K, 64K; QD 64). */
static const bool k_quick_block[PI_HW_N_BLOCKS] = {true, true, false, true, false, true};
static const bool k_quick_qd[PI_HW_N_QD] = {true, true, true, false, true};
static const pi_type k_types[] = {PI_TYPE_F32,  PI_TYPE_F16,  PI_TYPE_BF16, PI_TYPE_Q8_0,
                                  PI_TYPE_Q4_0, PI_TYPE_Q4_K, PI_TYPE_Q5_K, PI_TYPE_Q6_K};

#define KERN_COLS 4096

/* Fill the unmeasured entries of v[i * stride], i < n, from the measured
   ones: log(v) linear in log(x) between measured neighbours, the nearest
   measured value beyond them. At least one must be measured. */
static void fill_log_axis(double *v, size_t stride, const int *x, const bool *meas, int n) {
    for (int i = 0; i < n; i++) {
        if (meas[i]) continue;
        int lo = i - 1, hi = i + 1;
        while (lo >= 0 && !meas[lo]) lo--;
        while (hi < n && !meas[hi]) hi++;
        double *d = &v[(size_t)i * stride];
        if (lo < 0) *d = v[(size_t)hi * stride];
        else if (hi >= n) *d = v[(size_t)lo * stride];
        else {
            double f = (log(x[i]) - log(x[lo])) / (log(x[hi]) - log(x[lo]));
            *d = exp((1 - f) * log(v[(size_t)lo * stride]) + f * log(v[(size_t)hi * stride]));
        }
    }
}

/* Fill unmeasured thread counts 1..n of v: linear between measured ones. */
static void fill_threads(double *v, bool *est, const bool *meas, int n) {
    for (int t = 1; t <= n; t++) {
        if (meas[t]) continue;
        int lo = t - 1, hi = t + 1;
        while (lo >= 1 && !meas[lo]) lo--;
        while (hi <= n && !meas[hi]) hi++;
        if (lo < 1) v[t] = v[hi];
        else if (hi > n) v[t] = v[lo];
        else v[t] = v[lo] + (v[hi] - v[lo]) * (double)(t - lo) / (double)(hi - lo);
        est[t] = true;
    }
}

static void fmt_k(char *s, size_t n, double v) {
    if (v >= 1e4) snprintf(s, n, "%.1fK", v * 1e-3);
    else snprintf(s, n, "%.0f", v);
}

/* Write a temp file of `bytes` random bytes in dir, its page cache dropped.
   Returns the fd (the file stays open) and its path, or -1 with pi_error. */
static int write_temp_file(const char *dir, uint64_t bytes, char *path, size_t path_n) {
    if (snprintf(path, path_n, "%s/.pinfer-hwprobe-XXXXXX", dir) >= (int)path_n) {
        pi_error(PI_ERR_INVALID, "%s: path too long", dir);
        return -1;
    }
    int fd = mkstemp(path);
    if (fd < 0) {
        pi_error(PI_ERR_IO, "%s: cannot create a temp file: %s", dir, strerror(errno));
        return -1;
    }
    const size_t chunk = 4 * MIB;
    int wfd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
    bool direct = wfd >= 0;
    if (!direct) wfd = fd; /* the filesystem refuses O_DIRECT: buffered, then fsync + DONTNEED */
    uint64_t *buf = aligned_alloc(4096, chunk);
    if (!buf) {
        pi_error(PI_ERR_NOMEM, "hwprobe: out of memory");
        goto fail;
    }
    uint64_t rng = 0xf1a5c0de0000ull ^ (uint64_t)pi_time_ns();
    for (uint64_t at = 0; at < bytes;) {
        size_t len = bytes - at < chunk ? (size_t)(bytes - at) : chunk;
        for (size_t i = 0; i < len / 8; i++) buf[i] = splitmix(&rng);
        ssize_t k = pwrite(wfd, buf, len, (off_t)at);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int e = k < 0 ? errno : ENOSPC;
            pi_error(PI_ERR_IO, "%s: writing a %llu MiB test file: %s", dir, (unsigned long long)(bytes >> 20),
                     strerror(e));
            goto fail;
        }
        at += (uint64_t)k;
    }
    if (fsync(wfd) != 0) {
        pi_error(PI_ERR_IO, "%s: fsync of the test file: %s", dir, strerror(errno));
        goto fail;
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    free(buf);
    if (direct) close(wfd);
    return fd;
fail:
    free(buf);
    if (direct) close(wfd);
    close(fd);
    unlink(path);
    return -1;
}

/* The flash half of the probe: fills io_backend, io_buffered, io_file_bytes,
   read_*, seq_read_gbs. */
/* Bytes the kernel still has to write back, from /proc/meminfo (Dirty +
   Writeback); -1 when unknown. */
static double dirty_bytes(void) {
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f) return -1.0;
    char line[256];
    double kb = 0.0;
    int seen = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long v;
        if (sscanf(line, "Dirty: %llu kB", &v) == 1 || sscanf(line, "Writeback: %llu kB", &v) == 1) {
            kb += (double)v;
            seen++;
        }
    }
    fclose(f);
    return seen == 2 ? kb * 1024.0 : -1.0;
}

/* The sysfs file `leaf` of the block device of st_dev, opened; NULL
   without (p gets its path). */
static FILE *block_sysfs(uint64_t dev, const char *leaf, char *p, size_t n) {
    snprintf(p, n, "/sys/dev/block/%u:%u/%s", major((dev_t)dev), minor((dev_t)dev), leaf);
    return dev ? fopen(p, "re") : NULL;
}

/* Writes in flight on the block device of st_dev, from sysfs; -1 when unknown. */
static long device_writes_inflight(uint64_t dev) {
    char p[96];
    FILE *f = block_sysfs(dev, "inflight", p, sizeof p);
    if (!f) return -1;
    long r = 0, w = -1;
    if (fscanf(f, "%ld %ld", &r, &w) != 2) w = -1;
    fclose(f);
    return w;
}

pi_status pi_hw_disk_counts(uint64_t dev, pi_disk_counts *out) {
    memset(out, 0, sizeof *out);
    char p[96], text[512];
    FILE *f = block_sysfs(dev, "stat", p, sizeof p);
    if (!f) return pi_error(PI_ERR_NOT_FOUND, "no block device counters for device %u:%u (%s)", major((dev_t)dev),
                            minor((dev_t)dev), dev ? strerror(errno) : "no device");
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    if (!pi_hw_parse_disk_stat(text, n, out))
        return pi_error(PI_ERR_FORMAT, "%s: not a block device's counters", p);
    return PI_OK;
}

/* Sync the filesystem holding path and wait (at most max_s) until its
   writeback has drained: no more than 8 MiB dirty machine-wide and no write
   in flight on the device, three polls in a row. */
static void settle_writeback(const char *path, uint64_t dev, double max_s, bool verbose) {
    const double t0 = pi_time_s();
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (syncfs(fd) != 0) (void)fsync(fd);
        close(fd);
    }
    if (verbose && pi_time_s() - t0 > 0.5)
        fprintf(stderr, "hwprobe: waited %.1f s for the filesystem's pending writes\n", pi_time_s() - t0);
    int quiet = 0;
    bool said = false;
    while (quiet < 3 && pi_time_s() - t0 < max_s) {
        const double d = dirty_bytes();
        const long w = device_writes_inflight(dev);
        if ((d < 0 || d <= 8.0 * MIB) && w <= 0) {
            quiet++;
        } else {
            quiet = 0;
            if (verbose && !said) {
                fprintf(stderr, "hwprobe: waiting for writeback to finish (%.0f MiB dirty, %ld writes in flight)\n",
                        d > 0 ? d / MIB : 0.0, w > 0 ? w : 0);
                said = true;
            }
        }
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (verbose && said)
        fprintf(stderr, "hwprobe: writeback %s after %.1f s\n", quiet >= 3 ? "done" : "still running",
                pi_time_s() - t0);
}

/* ---- flash: reads while the cores compute ---- */

/* Threads streaming memory until told to stop, as decoding's do. */
typedef struct busy_load {
    bw_ctx bw; /* the buffer, read as the bandwidth passes read it */
    size_t n;  /* words */
    int threads;
    atomic_bool stop;
    pthread_t tid[PI_HW_MAX_THREADS];
    int started;
} busy_load;

typedef struct {
    busy_load *b;
    int k;
} busy_arg;

static void *busy_main(void *v) {
    busy_arg *a = v;
    busy_load *b = a->b;
    const int64_t share = (int64_t)(b->n / (size_t)b->threads), i0 = share * a->k;
    while (!atomic_load_explicit(&b->stop, memory_order_relaxed))
        for (int64_t i = i0; i < i0 + share && !atomic_load_explicit(&b->stop, memory_order_relaxed); i += 4096)
            read_range(&b->bw, i, i + 4096 < i0 + share ? i + 4096 : i0 + share, a->k);
    return NULL;
}

static void busy_stop(busy_load *b) {
    atomic_store(&b->stop, true);
    for (int k = 0; k < b->started; k++) pthread_join(b->tid[k], NULL);
    b->started = 0;
}

static pi_status busy_start(busy_load *b, busy_arg *args) {
    atomic_store(&b->stop, false);
    for (int k = 0; k < b->threads; k++) {
        args[k] = (busy_arg){b, k};
        if (pthread_create(&b->tid[k], NULL, busy_main, &args[k]) != 0) {
            busy_stop(b);
            return pi_error(PI_ERR_NOMEM, "hwprobe: cannot start a thread to load the cores");
        }
        b->started = k + 1;
    }
    return PI_OK;
}

/* hw->read_busy_k: 8 KiB random reads at the deepest queue with `threads`
   threads streaming a buffer of `bytes` (far larger than the caches) over
   the reads at the same point with the cores idle, two of each alternated
   (the disk's rate moves from minute to minute), kept within [1/8, 1]. */
static pi_status probe_busy(const char *path, pi_io_backend be, int64_t usable, int64_t align, const probe_cfg *c,
                            int threads, bool verbose, pi_hw *hw) {
    const int qd = k_qds[PI_HW_N_QD - 1], blk = 8192;
    busy_load *b = calloc(1, sizeof *b);
    busy_arg args[PI_HW_MAX_THREADS];
    if (!b) return pi_error(PI_ERR_NOMEM, "hwprobe: out of memory");
    b->n = c->bw_bytes / sizeof(uint64_t);
    b->threads = threads < 1 ? 1 : threads > PI_HW_MAX_THREADS ? PI_HW_MAX_THREADS : threads;
    uint64_t *buf = bw_buffer(b->n);
    if (!buf) {
        free(b);
        return pi_error(PI_ERR_NOMEM, "hwprobe: cannot allocate %zu bytes to load the cores", c->bw_bytes);
    }
    b->bw.buf = buf;
    double rate[2] = {0.0, 0.0}; /* reads/s summed: idle, busy */
    pi_status st = PI_OK;
    for (int r = 0; r < 4 && !st; r++) {
        const int busy = r & 1;
        rand_wl w = {.rng = 0xb5500000ull + (uint64_t)r, .n_slots = (usable - blk) / align + 1, .align = align,
                     .len = (size_t)blk};
        if (busy && (st = busy_start(b, args))) break;
        pi_probe_io_point pt;
        st = pi_probe_io(path, be, qd, (size_t)blk, c->point_s, next_random, &w, &pt);
        if (busy) busy_stop(b);
        if (!st && (pt.reads == 0 || !(pt.seconds > 0)))
            st = pi_error(PI_ERR_IO, "%s: no read completed in %.2f s", path, c->point_s);
        if (!st) rate[busy] += (double)pt.reads / pt.seconds;
    }
    const int nt = b->threads;
    pi_huge_free(buf, b->n * sizeof *buf);
    free(b);
    if (st) return st;
    double k = rate[1] / rate[0];
    hw->read_busy_k = k < 0.125 ? 0.125 : k > 1.0 ? 1.0 : k;
    if (verbose)
        fprintf(stderr, "hwprobe: flash %dK qd %d with %d thread%s streaming memory: %.1fK reads/s against %.1fK idle "
                "(%.2fx)\n", blk / 1024, qd, nt, nt == 1 ? "" : "s", rate[1] / 2 * 1e-3,
                rate[0] / 2 * 1e-3, hw->read_busy_k);
    return PI_OK;
}

static pi_status probe_flash(const char *path, const char *label, const probe_cfg *c, bool verbose, pi_hw *hw) {
    pi_io *io;
    pi_io_opts po = {.backend = PI_IO_AUTO, .queue_depth = 1};
    pi_status st = pi_io_open(path, &po, &io);
    if (st) return st;
    pi_io_backend be = strcmp(pi_io_backend_name(io), "io_uring") ? PI_IO_PREAD : PI_IO_URING;
    snprintf(hw->io_backend, sizeof hw->io_backend, "%s", pi_io_backend_name(io));
    int64_t size = pi_io_file_size(io);
    size_t align = pi_io_align(io) < 4096 ? 4096 : pi_io_align(io);
    hw->io_buffered = pi_io_buffered(io);
    hw->io_huge_pages = true; /* pi_probe_io's buffers */
    pi_io_close(io);
    hw->io_file_bytes = (uint64_t)size;
    int64_t usable = size / (int64_t)align * (int64_t)align;
    if (usable < (int64_t)MIB + k_blocks[PI_HW_N_BLOCKS - 1])
        return pi_error(PI_ERR_INVALID, "%s: %lld bytes is too small to probe", path, (long long)size);
    if (verbose)
        fprintf(stderr, "hwprobe: flash: %s, %.2f GB, %s%s\n", label, (double)size * 1e-9, hw->io_backend,
                hw->io_buffered ? " (BUFFERED: the filesystem refuses O_DIRECT)" : ", O_DIRECT");
    memcpy(hw->block, k_blocks, sizeof k_blocks);
    memcpy(hw->qd, k_qds, sizeof k_qds);
    bool meas_b[PI_HW_N_BLOCKS], meas_q[PI_HW_N_QD];
    for (int b = 0; b < PI_HW_N_BLOCKS; b++) meas_b[b] = c->all_points || k_quick_block[b];
    for (int q = 0; q < PI_HW_N_QD; q++) meas_q[q] = c->all_points || k_quick_qd[q];
    /* the machine's CPU at queue depths of 8 and more; the submissions' time at the deepest queue, where
       reads go out in batches as the engine's lookahead sends them (a submission's fixed cost shared:
       on a 2-core virtual machine 5.3-6.9 us a read at qd 8, 1.0-1.6 us at qd 128) */
    double cpu_s = 0.0, cpu_reads = 0.0, issue_s = 0.0, issue_reads = 0.0;
    for (int b = 0; b < PI_HW_N_BLOCKS; b++) {
        for (int q = 0; q < PI_HW_N_QD; q++) {
            if (!meas_b[b] || !meas_q[q]) continue;
            rand_wl w = {.rng = 0x5eed0000ull + (uint64_t)k_qds[q] * 131 + (uint64_t)k_blocks[b],
                         .n_slots = (usable - k_blocks[b]) / (int64_t)align + 1, .align = (int64_t)align,
                         .len = (size_t)k_blocks[b]};
            pi_probe_io_point pt;
            if ((st = pi_probe_io(path, be, k_qds[q], (size_t)k_blocks[b], c->point_s, next_random, &w, &pt)))
                return st;
            if (pt.reads == 0 || !(pt.seconds > 0))
                return pi_error(PI_ERR_IO, "%s: no read completed in %.2f s", path, c->point_s);
            hw->read_iops[b][q] = (double)pt.reads / pt.seconds;
            hw->read_lat_us[b][q] = pt.lat_sum_us / (double)pt.reads;
            if (!(hw->read_lat_us[b][q] > 0)) hw->read_lat_us[b][q] = 1e-3; /* a clock too coarse */
            /* the machine's, where it is known and no less: the completions' interrupts and
               softirqs run on any core, and take as much from the compute as the submissions */
            if (k_qds[q] >= 8) {
                cpu_s += pt.machine_cpu_s > pt.cpu_s ? pt.machine_cpu_s : pt.cpu_s;
                if (q == PI_HW_N_QD - 1) issue_s += pt.submit_s, issue_reads += (double)pt.reads;
                cpu_reads += (double)pt.reads;
            }
            if (verbose) {
                char r[32];
                fmt_k(r, sizeof r, hw->read_iops[b][q]);
                fprintf(stderr, "hwprobe: flash %3dK qd %3d: %7s reads/s %8.1f MB/s %8.1f us\n", k_blocks[b] / 1024,
                        k_qds[q], r, hw->read_iops[b][q] * k_blocks[b] * 1e-6, hw->read_lat_us[b][q]);
            }
        }
    }
    hw->read_cpu_us = cpu_reads > 0 && cpu_s > 0 ? cpu_s / cpu_reads * 1e6 : 0.0;
    hw->read_issue_us = issue_reads > 0 && issue_s > 0 ? issue_s / issue_reads * 1e6 : 0.0;
    if ((st = probe_busy(path, be, usable, (int64_t)align, c, hw->n_threads, verbose, hw))) return st;
    if (verbose && hw->read_cpu_us > 0)
        fprintf(stderr, "hwprobe: flash: %.2f us of CPU per read; submitting one holds the thread %.2f us\n",
                hw->read_cpu_us, hw->read_issue_us);
    /* Interpolate what was not measured: along blocks in measured rows, then along qd. */
    for (int q = 0; q < PI_HW_N_QD; q++)
        if (meas_q[q]) fill_log_axis(&hw->read_iops[0][q], PI_HW_N_QD, k_blocks, meas_b, PI_HW_N_BLOCKS);
    for (int b = 0; b < PI_HW_N_BLOCKS; b++) fill_log_axis(hw->read_iops[b], 1, k_qds, meas_q, PI_HW_N_QD);
    for (int b = 0; b < PI_HW_N_BLOCKS; b++)
        for (int q = 0; q < PI_HW_N_QD; q++)
            if (!meas_b[b] || !meas_q[q]) {
                hw->read_est[b][q] = true;
                hw->read_lat_us[b][q] = (double)k_qds[q] / hw->read_iops[b][q] * 1e6; /* Little's law */
            }
    /* Sequential: 1 MiB reads at QD 8, one pass from the start at most. */
    seq_wl sw = {.at = 0, .end = usable, .len = MIB};
    pi_probe_io_point pt;
    if ((st = pi_probe_io(path, be, 8, MIB, c->seq_s, next_seq, &sw, &pt))) return st;
    if (pt.reads == 0 || !(pt.seconds > 0)) return pi_error(PI_ERR_IO, "%s: no sequential read completed", path);
    hw->seq_read_gbs = (double)pt.bytes / pt.seconds * 1e-9;
    if (verbose) fprintf(stderr, "hwprobe: flash sequential 1M qd 8: %.2f GB/s\n", hw->seq_read_gbs);
    return PI_OK;
}

/* Memory bandwidth and kernels for the thread counts in meas[1..n]; the rest interpolated. */
static pi_status probe_compute(const probe_cfg *c, const bool *meas, bool verbose, pi_hw *hw) {
    int n = hw->n_threads;
    pi_pool *pools[PI_HW_MAX_THREADS + 1] = {0};
    pi_status st = PI_OK;
    for (int t = 1; t <= n && !st; t++)
        if (meas[t]) st = pi_pool_create(t, &pools[t]);
    if (st) goto out;

    size_t nw = c->bw_bytes / sizeof(uint64_t);
    uint64_t *buf = bw_buffer(nw);
    if (!buf) {
        st = pi_error(PI_ERR_NOMEM, "hwprobe: cannot allocate %zu MiB for the bandwidth probe", c->bw_bytes >> 20);
        goto out;
    }
    for (int t = 1; t <= n && !st; t++) {
        if (!meas[t]) continue;
        st = bw_passes(pools[t], buf, nw, c->bw_reps, &hw->mem_bw[t]);
        if (!st && verbose) fprintf(stderr, "hwprobe: memory read, %2d threads: %6.1f GB/s\n", t, hw->mem_bw[t]);
    }
    pi_huge_free(buf, nw * sizeof *buf);
    if (st) goto out;
    fill_threads(hw->mem_bw, hw->mem_bw_est, meas, n);

    const pi_kernels *k = pi_kernels_get();
    for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0] && !st; ti++) {
        pi_type ty = k_types[ti];
        if (!k->matvec[ty] || !k->vec_dot[ty] || !k->axpy_rows[ty]) continue;
        pi_probe_mats m;
        if ((st = pi_probe_mats_create(ty, c->kern_rows, KERN_COLS, c->kern_bytes, &m))) break;
        for (int w = 0; w < PI_HW_N_KERNELS && !st; w++) {
            double *v = (w == PI_HW_MATVEC ? hw->matvec : w == PI_HW_ROWDOT ? hw->rowdot : hw->axpy)[ty];
            for (int t = 1; t <= n && !st; t++) {
                if (!meas[t]) continue;
                st = pi_probe_kernel(pools[t], k, &m, w, c->kern_reps, &v[t]);
                if (!st && !(v[t] > 0 && isfinite(v[t])))
                    st = pi_error(PI_ERR_IO, "hwprobe: %s kernel gave %g GB/s", pi_type_name((uint32_t)ty), v[t]);
                if (!st && verbose)
                    fprintf(stderr, "hwprobe: %-6s %-4s %2d threads: %6.1f GB/s\n",
                            w == PI_HW_MATVEC ? "matvec" : w == PI_HW_ROWDOT ? "rowdot" : "axpy",
                            pi_type_name((uint32_t)ty), t, v[t]);
            }
            if (!st) fill_threads(v, hw->kernel_est[w][ty], meas, n);
        }
        pi_probe_mats_free(&m);
    }
out:
    for (int t = 1; t <= n; t++) pi_pool_free(pools[t]);
    return st;
}

/* CPU seconds this process has used (all threads), or -1. */
static double self_cpu_s(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return -1;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* The flash figures: random and sequential reads of o's file, or of a temp
   file in its directory. */
static pi_status measure_flash(const pi_hwprobe_opts *o, const probe_cfg *cp, pi_hw *out) {
    const probe_cfg c = *cp;
    /* What to read: the file when it is large enough, else a temp file in a directory. */
    char dir_buf[4096], tmp_path[4200] = "", fd_path[64];
    const char *dir = o->dir, *path = NULL;
    struct stat sb;
    if (o->file) {
        if (stat(o->file, &sb) != 0) return pi_error(PI_ERR_IO, "%s: %s", o->file, strerror(errno));
        if (!S_ISREG(sb.st_mode)) return pi_error(PI_ERR_INVALID, "%s: not a regular file", o->file);
        if ((uint64_t)sb.st_size >= c.min_file) {
            path = o->file;
            out->fs_dev = (uint64_t)sb.st_dev;
        } else if (!dir) {
            snprintf(dir_buf, sizeof dir_buf, "%s", o->file);
            char *slash = strrchr(dir_buf, '/');
            if (!slash) snprintf(dir_buf, sizeof dir_buf, ".");
            else if (slash == dir_buf) slash[1] = '\0';
            else *slash = '\0';
            dir = dir_buf;
            if (o->verbose)
                fprintf(stderr, "hwprobe: %s is under %llu MiB: using a temp file in %s\n", o->file,
                        (unsigned long long)(c.min_file >> 20), dir);
        }
    }
    int fd = -1;
    if (!path) {
        if (stat(dir, &sb) != 0) return pi_error(PI_ERR_IO, "%s: %s", dir, strerror(errno));
        if (!S_ISDIR(sb.st_mode)) return pi_error(PI_ERR_INVALID, "%s: not a directory", dir);
        out->fs_dev = (uint64_t)sb.st_dev;
        if (o->verbose)
            fprintf(stderr, "hwprobe: writing a %llu MiB test file in %s\n", (unsigned long long)(c.tmp_bytes >> 20),
                    dir);
        if ((fd = write_temp_file(dir, c.tmp_bytes, tmp_path, sizeof tmp_path)) < 0) return PI_ERR_IO;
        /* Read it through /proc/self/fd and unlink it now where that works, so nothing is left behind. */
        struct stat a, b;
        snprintf(fd_path, sizeof fd_path, "/proc/self/fd/%d", fd);
        if (stat(fd_path, &a) == 0 && fstat(fd, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev &&
            unlink(tmp_path) == 0) {
            path = fd_path;
            tmp_path[0] = '\0';
        } else {
            path = tmp_path;
        }
    }
    char label[4200];
    if (path == o->file) snprintf(label, sizeof label, "%s", path);
    else snprintf(label, sizeof label, "a temp file in %s", dir);
    settle_writeback(path, out->fs_dev, o->tiny ? 2.0 : o->quick ? 20.0 : 60.0, o->verbose);
    pi_status st = probe_flash(path, label, &c, o->verbose, out);
    if (fd >= 0) close(fd);
    if (fd >= 0 && tmp_path[0]) unlink(tmp_path);
    return st;
}

/* The flash figures of an earlier probe (and the reads runs achieved). */
static void copy_flash(const pi_hw *from, pi_hw *out) {
    memcpy(out->io_backend, from->io_backend, sizeof out->io_backend);
    memcpy(out->block, from->block, sizeof out->block);
    memcpy(out->qd, from->qd, sizeof out->qd);
    memcpy(out->read_iops, from->read_iops, sizeof out->read_iops);
    memcpy(out->read_lat_us, from->read_lat_us, sizeof out->read_lat_us);
    memcpy(out->read_est, from->read_est, sizeof out->read_est);
    out->seq_read_gbs = from->seq_read_gbs;
    out->read_cpu_us = from->read_cpu_us;
    out->read_issue_us = from->read_issue_us;
    out->read_busy_k = from->read_busy_k;
    out->fs_dev = from->fs_dev;
    out->io_buffered = from->io_buffered;
    out->io_huge_pages = from->io_huge_pages;
    out->io_file_bytes = from->io_file_bytes;
    out->run_read_rate = from->run_read_rate, out->run_read_bytes = from->run_read_bytes;
    out->run_time = from->run_time, out->run_qd = from->run_qd;
    out->run_seq_gbs = from->run_seq_gbs, out->run_seq_time = from->run_seq_time;
}

pi_status pi_hwprobe_run(const pi_hwprobe_opts *o, pi_hw *out) {
    memset(out, 0, sizeof *out);
    if (!o || (!o->dir && !o->file && !o->flash_from))
        return pi_error(PI_ERR_INVALID, "hwprobe: give a file or a directory to measure");
    if (o->max_threads < 0) return pi_error(PI_ERR_INVALID, "hwprobe: %d threads", o->max_threads);
    probe_cfg c;
    if (o->tiny)
        c = (probe_cfg){.bw_bytes = 4 * MIB, .kern_bytes = 2 * MIB, .bw_reps = 1, .kern_reps = 1, .kern_rows = 64,
                        .tmp_bytes = 8 * MIB, .min_file = 8 * MIB, .point_s = 0.01, .seq_s = 0.05};
    else if (o->quick)
        c = (probe_cfg){.bw_bytes = 512 * MIB, .kern_bytes = 320 * MIB, .bw_reps = 3, .kern_reps = 3,
                        .kern_rows = 14336, .tmp_bytes = 256 * MIB, .min_file = 256 * MIB, .point_s = 0.4,
                        .seq_s = 0.5};
    else
        c = (probe_cfg){.bw_bytes = 1024 * MIB, .kern_bytes = 768 * MIB, .bw_reps = 5, .kern_reps = 7,
                        .kern_rows = 14336, .tmp_bytes = 1024 * MIB, .min_file = 256 * MIB, .point_s = 1.5,
                        .seq_s = 1.5, .all_threads = true, .all_points = true};
    double t0 = pi_time_s(), busy0 = machine_cpu_s(true), self0 = self_cpu_s();
    int n = o->max_threads ? o->max_threads : pi_cpu_count();
    out->n_threads = n < 1 ? 1 : n > PI_HW_MAX_THREADS ? PI_HW_MAX_THREADS : n;
    out->quick = o->quick || o->tiny;
    snprintf(out->cpu, sizeof out->cpu, "%s-%dc", pi_kernels_get()->name, pi_cpu_count());
    snprintf(out->kernels_build, sizeof out->kernels_build, "%s", pi_kernels_build_id());

    pi_status st;
    if (o->flash_from) {
        copy_flash(o->flash_from, out);
        out->quick = out->quick || o->flash_from->quick; /* either half measured with --quick */
    } else if ((st = measure_flash(o, &c, out))) {
        pi_error_prefix(st, "hwprobe: flash");
        memset(out, 0, sizeof *out);
        return st;
    }

    bool meas[PI_HW_MAX_THREADS + 1] = {false};
    for (int t = 1; t <= out->n_threads; t++)
        meas[t] = c.all_threads ? (t & (t - 1)) == 0 || t == out->n_threads : t == 1 || t == out->n_threads;
    if ((st = probe_compute(&c, meas, o->verbose, out))) {
        memset(out, 0, sizeof *out);
        return st;
    }
    double dt = pi_time_s() - t0, busy1 = machine_cpu_s(true), self1 = self_cpu_s();
    if (busy0 >= 0 && busy1 >= 0 && self0 >= 0 && self1 >= 0 && dt > 0) {
        double others = ((busy1 - busy0) - (self1 - self0)) / dt;
        out->other_cpu = others > 0 && isfinite(others) ? others : 0.0;
    }
    if ((st = pi_hw_validate(out))) { /* a figure came out 0 or not finite: a bug, or a clock gone wrong */
        pi_error_prefix(st, "hwprobe: result");
        memset(out, 0, sizeof *out);
    }
    return st;
}
