/*
 * cmd_bench_kernels.c — `pinfer bench-kernels`: how fast each matvec variant
 * streams weights, next to the memory read bandwidth measured in the same run.
 *
 * Decode is memory-bound: a matvec's useful speed is weight bytes per second.
 * Each (type, variant, threads) point rotates over enough distinct matrices
 * that the working set exceeds the last-level cache many times over (default
 * 768 MiB), so the figure is what DRAM delivers to the kernel. Threads split
 * each matrix into contiguous row ranges, as the engine does. The measuring
 * code (pi_probe_mats, pi_probe_kernel) is `pinfer hwprobe`'s.
 *
 * Next to each matvec figure: the sparse FFN's down projection over the same
 * weights, read as down_t matrices (one neuron per row). Every matrix's rows
 * are dealt at random into tokens of --active of them each (10%: scattered
 * rows, in neuron order), and each token's list goes through the engine's
 * own chunk function (pi_sparse_down_chunk, axpy_rows on the down rows) in
 * the chunks a decode step uses (pi_down_chunk_rows) reduced by the pool; a pass
 * reads every row once. "share" is that figure over matvec's. "rows" is the
 * kernel alone on the same lists: axpy_rows over each token's whole list in
 * one call, the threads taking whole tokens (no chunks, no reduction), so
 * the gap between "rows" and "down" is what the chunked reduction costs.
 * "axpy" is the down path with the per-row axpy kernel, as before axpy_rows.
 * "read" is the same lists read by a plain loop with no arithmetic (threads
 * taking whole tokens, as for "rows"; the faster of two ways, read_tokens):
 * about what the memory system delivers for rows scattered this way, so
 * the gap between "rows" and "read" is what the kernel's arithmetic costs
 * and the gap between "read" and matvec what the scattering costs; "read
 * share" is "read" over matvec's figure. (A kernel can beat the plain
 * loop where its own access pattern suits the hardware better.)
 */
#include "args.h"
#include "cmds.h"

#include "base/cpu.h"
#include "base/pool.h"
#include "base/timer.h"
#include "kernels/kernels.h"
#include "plan/hwprobe.h"
#include "sparse/ffn_sparse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ITEMS 16
#define MAX_REPS 100
#define MAX_THREADS 256

static void usage(FILE *f) {
    fprintf(f,
            "usage: pinfer bench-kernels [options]\n"
            "  --types LIST      weight types (default f32,f16,bf16,q8_0,q4_0,q4_1,q5_0,q5_1,q4_K,q5_K,q6_K)\n"
            "  --variants LIST   kernel sets (default: every one this CPU runs)\n"
            "  -t, --threads LIST  thread counts (default 1,<cores>)\n"
            "  --rows N --cols N matrix shape (default 14336 x 4096)\n"
            "  --ws-mib N        working set rotated over, MiB (default 768; keep it > 512)\n"
            "  --reps N          timed passes per point, median reported (default 5)\n"
            "  --bw-mib N        buffer for the read-bandwidth measurement (default 1024)\n"
            "  --active F        share of each matrix's rows per token in the down projection (default 0.1)\n"
            "  --no-down         matvec only\n");
}

/* The down projection's tokens over all of m's rows: token t's list is
   entries [start[t], start[t + 1]) of rows3 (pointers at 3k + 2, the
   layout of pi_sparse_ffn's row) and val. */
typedef struct {
    int64_t n_tok;
    int64_t *start;
    const uint8_t **rows3;
    const void **rows; /* the same pointers, contiguous: rows[k] = rows3[3k + 2] */
    float *val;
    float *out, *scratch; /* (cols), (PI_DOWN_T_CHUNKS * cols) */
    float *ys;            /* (MAX_THREADS, cols): each thread's y for the kernel alone */
} down_set;

static void down_set_free(down_set *d) {
    free(d->start);
    free(d->rows3);
    free(d->rows);
    free(d->val);
    free(d->out);
    free(d->scratch);
    free(d->ys);
    memset(d, 0, sizeof *d);
}

static int cmp_i64(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static uint64_t mix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Each matrix's rows in random order, cut into round(1 / active) tokens,
   each token's rows sorted (the sparse FFN's lists are in neuron order). */
static bool down_set_create(const pi_probe_mats *m, double active, down_set *d) {
    memset(d, 0, sizeof *d);
    const int64_t per = active >= 1.0 ? 1 : (int64_t)(1.0 / active + 0.5), total = m->rows * (int64_t)m->n_mat;
    d->n_tok = per * (int64_t)m->n_mat;
    d->start = malloc((size_t)(d->n_tok + 1) * sizeof *d->start);
    d->rows3 = calloc((size_t)total * 3, sizeof *d->rows3);
    d->rows = malloc((size_t)total * sizeof *d->rows);
    d->ys = calloc((size_t)MAX_THREADS * (size_t)m->cols, sizeof *d->ys);
    d->val = malloc((size_t)total * sizeof *d->val);
    d->out = malloc((size_t)m->cols * sizeof *d->out);
    d->scratch = malloc((size_t)PI_DOWN_T_CHUNKS * (size_t)m->cols * sizeof *d->scratch);
    int64_t *perm = malloc((size_t)m->rows * sizeof *perm);
    if (!d->start || !d->rows3 || !d->rows || !d->ys || !d->val || !d->out || !d->scratch || !perm) {
        free(perm);
        down_set_free(d);
        return false;
    }
    uint64_t seed = 0x5eed;
    int64_t k = 0, t = 0;
    for (size_t mi = 0; mi < m->n_mat; mi++) {
        for (int64_t r = 0; r < m->rows; r++) perm[r] = r;
        for (int64_t r = m->rows - 1; r > 0; r--) {
            const int64_t j = (int64_t)(mix64(&seed) % (uint64_t)(r + 1)), x = perm[r];
            perm[r] = perm[j];
            perm[j] = x;
        }
        for (int64_t p = 0; p < per; p++, t++) {
            const int64_t a = m->rows * p / per, b = m->rows * (p + 1) / per;
            qsort(perm + a, (size_t)(b - a), sizeof *perm, cmp_i64);
            d->start[t] = k;
            for (int64_t r = a; r < b; r++, k++) {
                d->rows3[3 * k + 2] = m->data + mi * m->mat_bytes + (size_t)perm[r] * m->row_bytes;
                d->rows[k] = d->rows3[3 * k + 2];
                d->val[k] = (float)(mix64(&seed) >> 40) * 0x1p-24f * 0.01f + 1e-4f; /* nonzero, as active rows are */
            }
        }
    }
    d->start[t] = k;
    free(perm);
    return true;
}

/* The down path before axpy_rows: the per-row axpy over a chunk. */
typedef struct {
    const pi_sparse_ffn *f;
    int64_t n_embd;
    pi_axpy_fn axpy;
} axpy_chunk_job;

static void axpy_chunk(void *ctx, int64_t k0, int64_t k1, float *acc, int tid) {
    (void)tid;
    const axpy_chunk_job *j = ctx;
    for (int64_t k = k0; k < k1; k++)
        if (j->f->val[k] != 0.0f) j->axpy(j->n_embd, j->f->val[k], j->f->row[3 * k + 2], acc);
}

/* The kernel alone: tokens [t0, t1) of d, each list in one axpy_rows call,
   into thread tid's own y. */
typedef struct {
    const down_set *d;
    int64_t cols;
    pi_axpy_rows_fn axpy_rows;
} rows_job;

static void rows_tokens(void *ctx, int64_t t0, int64_t t1, int tid) {
    const rows_job *j = ctx;
    float *y = j->d->ys + (size_t)tid * (size_t)j->cols;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t k = j->d->start[t];
        j->axpy_rows(j->cols, j->d->val + k, j->d->rows + k, j->d->start[t + 1] - k, y);
    }
}

/* Weight GB/s of axpy_rows alone over every token of d (one pass). */
static double rows_gbs(pi_pool *pool, const pi_kernels *k, const pi_probe_mats *m, down_set *d) {
    rows_job j = {d, m->cols, k->axpy_rows[m->type]};
    const double t0 = pi_time_s();
    pi_pool_for_dynamic(pool, d->n_tok, 1, rows_tokens, &j);
    return (double)m->alloc_bytes / (pi_time_s() - t0) * 1e-9;
}

/* Eight bytes at p, which need not be aligned (rows of 18-byte blocks). */
static inline uint64_t ld64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The xor of the 64 bytes at p. */
static inline uint64_t xor64(const uint8_t *p) {
    return ld64(p) ^ ld64(p + 8) ^ ld64(p + 16) ^ ld64(p + 24) ^ ld64(p + 32) ^ ld64(p + 40) ^ ld64(p + 48) ^
           ld64(p + 56);
}

/* The plain read of a down set's rows: its rows of row_bytes, each
   thread's sink in ys at tid * cols. */
typedef struct {
    const down_set *d;
    int64_t cols;
    size_t row_bytes;
    bool prefetch; /* two rows at a time with software prefetch, else one on the hardware's */
} read_job;

/* Tokens [t0, t1) of d read whole with no arithmetic, 64 bytes a step,
   in one of two ways (j->prefetch): two rows at a time with the next two
   rows' same bytes prefetched, which suits short rows (Q4_0's 2304 bytes on
   two threads of the AVX-512 EPYC host, in a harness: 32.5 GB/s, against
   25-31 one, four or eight at a time), or one row at a time on the
   hardware prefetchers alone, which suits long ones (F32's 16 KiB rows). */
static void read_tokens(void *ctx, int64_t t0, int64_t t1, int tid) {
    const read_job *j = ctx;
    const size_t bytes = j->row_bytes;
    const int step = j->prefetch ? 2 : 1;
    uint64_t a = 0, b = 0;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t k0 = j->d->start[t], k1 = j->d->start[t + 1];
        for (int64_t k = k0; k < k1; k += step) {
            const uint8_t *p = j->d->rows[k], *q = step == 2 && k + 1 < k1 ? j->d->rows[k + 1] : NULL;
            const uint8_t *np = k + 2 < k1 ? j->d->rows[k + 2] : p, *nq = k + 3 < k1 ? j->d->rows[k + 3] : np;
            size_t i = 0;
            for (; i + 64 <= bytes; i += 64) {
                if (j->prefetch) {
                    __builtin_prefetch(np + i, 0, 2);
                    __builtin_prefetch(nq + i, 0, 2);
                }
                a ^= xor64(p + i);
                if (q) b ^= xor64(q + i);
            }
            for (; i < bytes; i++) a ^= p[i] ^ (q ? q[i] : 0);
        }
    }
    j->d->ys[(size_t)tid * (size_t)j->cols] += (float)((a ^ b) & 1); /* keeps the reads */
}

/* Weight GB/s of reading every token of d's rows, the faster of the two
   ways (one pass each). */
static double read_gbs(pi_pool *pool, const pi_probe_mats *m, down_set *d) {
    double best = 0.0;
    for (int pf = 0; pf < 2; pf++) {
        read_job j = {d, m->cols, m->row_bytes, pf == 1};
        const double t0 = pi_time_s();
        pi_pool_for_dynamic(pool, d->n_tok, 1, read_tokens, &j);
        const double gbs = (double)m->alloc_bytes / (pi_time_s() - t0) * 1e-9;
        best = gbs > best ? gbs : best;
    }
    return best;
}

/* Weight GB/s of the down projection over every token of d (median of reps
   passes after a warm-up one): axpy_rows through pi_sparse_down_chunk, or
   with per_row the per-row axpy. */
static double down_gbs(pi_pool *pool, const pi_kernels *k, const pi_probe_mats *m, down_set *d, bool per_row,
                       int reps) {
    pi_sparse_ffn f;
    memset(&f, 0, sizeof f); /* the chunk functions read only val and row */
    pi_sparse_down dj = {&f, m->cols, k->axpy_rows[m->type]};
    axpy_chunk_job aj = {&f, m->cols, k->axpy[m->type]};
    double gbs[MAX_REPS];
    for (int r = -1; r < reps; r++) {
        const double t0 = pi_time_s();
        for (int64_t t = 0; t < d->n_tok; t++) {
            const int64_t n = d->start[t + 1] - d->start[t], chunk = pi_down_chunk_rows(n, m->rows);
            f.val = d->val + d->start[t];
            f.row = d->rows3 + 3 * d->start[t];
            if (per_row) pi_pool_reduce_f32(pool, n, chunk, axpy_chunk, &aj, d->out, m->cols, d->scratch);
            else pi_pool_reduce_f32(pool, n, chunk, pi_sparse_down_chunk, &dj, d->out, m->cols, d->scratch);
        }
        if (r >= 0) gbs[r] = (double)m->alloc_bytes / (pi_time_s() - t0) * 1e-9;
    }
    return pi_median(gbs, reps);
}

int cmd_bench_kernels(int argc, char **argv) {
    const char *cmd = "bench-kernels";
    char *types[MAX_ITEMS], *variants[MAX_ITEMS], *threads_s[MAX_ITEMS];
    char types_buf[256] = "f32,f16,bf16,q8_0,q4_0,q4_1,q5_0,q5_1,q4_K,q5_K,q6_K", variants_buf[256] = "", threads_buf[64] = "";
    int n_types, n_variants = 0, n_threads_list;
    long rows = 14336, cols = 4096, ws_mib = 768, reps = 5, bw_mib = 1024;
    double active = 0.1;
    bool down = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        if (!strcmp(a, "--no-down")) { down = false; continue; }
        if (!(v = arg_value(cmd, argc, argv, &i))) return 2;
        if (!strcmp(a, "--types")) snprintf(types_buf, sizeof types_buf, "%s", v);
        else if (!strcmp(a, "--variants")) snprintf(variants_buf, sizeof variants_buf, "%s", v);
        else if (!strcmp(a, "-t")) snprintf(threads_buf, sizeof threads_buf, "%s", v);
        else if (!strcmp(a, "--rows")) { if (!arg_int(cmd, a, v, 1, 1 << 20, &rows)) return 2; }
        else if (!strcmp(a, "--cols")) { if (!arg_int(cmd, a, v, 32, PI_MAX_ROW, &cols)) return 2; }
        else if (!strcmp(a, "--ws-mib")) { if (!arg_int(cmd, a, v, 1, 1 << 16, &ws_mib)) return 2; }
        else if (!strcmp(a, "--reps")) { if (!arg_int(cmd, a, v, 1, MAX_REPS, &reps)) return 2; }
        else if (!strcmp(a, "--bw-mib")) { if (!arg_int(cmd, a, v, 64, 1 << 16, &bw_mib)) return 2; }
        else if (!strcmp(a, "--active")) { if (!arg_share(cmd, a, v, &active)) return 2; }
        else {
            return arg_unknown(cmd, a);
        }
    }
    if (cols % 32) {
        fprintf(stderr, "pinfer: %s: --cols must be a multiple of 32 (the quant block size)\n", cmd);
        return 2;
    }
    if ((n_types = arg_list(cmd, "--types", types_buf, types, MAX_ITEMS)) < 0) return 2;
    pi_type type_ids[MAX_ITEMS];
    for (int i = 0; i < n_types; i++) {
        int t = pi_type_from_name(types[i]);
        if (t < 0 || !pi_type_get((uint32_t)t)->compute) {
            fprintf(stderr, "pinfer: %s: no kernels for type '%s' (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K)\n", cmd,
                    types[i]);
            return 2;
        }
        if (cols % pi_type_get((uint32_t)t)->blck) {
            fprintf(stderr, "pinfer: %s: --cols %ld is not a multiple of %s's block of %lld\n", cmd, cols,
                    pi_type_get((uint32_t)t)->name, (long long)pi_type_get((uint32_t)t)->blck);
            return 2;
        }
        type_ids[i] = (pi_type)t;
    }
    const pi_kernels *kset[MAX_ITEMS];
    if (variants_buf[0]) {
        if ((n_variants = arg_list(cmd, "--variants", variants_buf, variants, MAX_ITEMS)) < 0) return 2;
        for (int i = 0; i < n_variants; i++) {
            if (!(kset[i] = pi_kernels_by_name(variants[i]))) {
                fprintf(stderr, "pinfer: %s: kernel set '%s' is not in this build or this CPU cannot run it\n", cmd,
                        variants[i]);
                return 2;
            }
        }
    } else {
        for (const char *const *nm = pi_kernels_names(); *nm && n_variants < MAX_ITEMS; nm++)
            if ((kset[n_variants] = pi_kernels_by_name(*nm))) n_variants++;
    }
    int ncpu = pi_cpu_count();
    long thread_counts[MAX_ITEMS];
    if (threads_buf[0]) {
        if ((n_threads_list = arg_list(cmd, "-t", threads_buf, threads_s, MAX_ITEMS)) < 0) return 2;
        for (int i = 0; i < n_threads_list; i++)
            if (!arg_int(cmd, "-t", threads_s[i], 1, MAX_THREADS, &thread_counts[i])) return 2;
    } else {
        n_threads_list = 0;
        thread_counts[n_threads_list++] = 1;
        if (ncpu > 1) thread_counts[n_threads_list++] = ncpu < MAX_THREADS ? ncpu : MAX_THREADS;
    }

    printf("bench-kernels: matvec %ld x %ld, working set >= %ld MiB per point, median of %ld passes\n", rows, cols,
           ws_mib, reps);
    double bw[MAX_ITEMS];
    for (int ti = 0; ti < n_threads_list; ti++) {
        pi_pool *pool;
        if (pi_pool_create((int)thread_counts[ti], &pool) != PI_OK ||
            pi_probe_read_bw(pool, (size_t)bw_mib << 20, (int)reps, &bw[ti]) != PI_OK) {
            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
            pi_pool_free(pool);
            return 1;
        }
        pi_pool_free(pool);
        printf("memory read bandwidth, %ld thread%s: %.1f GB/s\n", thread_counts[ti], thread_counts[ti] > 1 ? "s" : "",
               bw[ti]);
    }
    if (down)
        printf("down: down_t of the same matrices, %.0f%% of the rows per token, in chunks of at least %d rows; share: "
               "median of down / matvec over rounds of both; rows: axpy_rows alone, a token's list per call; "
               "read: the same rows read by a plain loop, no arithmetic; read share: read / matvec\n",
               100.0 * active, PI_DOWN_T_MIN_ROWS);
    printf("\n%-6s %-8s %7s %10s %9s %11s", "type", "kernels", "threads", "GB/s", "% of bw", "ms/matrix");
    if (down)
        printf(" %10s %7s %10s %10s %10s %10s", "down GB/s", "share", "rows GB/s", "axpy GB/s", "read GB/s",
               "read share");
    printf("\n");

    int status = 0;
    for (int ti = 0; ti < n_types && !status; ti++) {
        pi_type t = type_ids[ti];
        pi_probe_mats m;
        if (pi_probe_mats_create(t, rows, cols, (size_t)ws_mib << 20, &m) != PI_OK) {
            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
            return 1;
        }
        down_set ds = {0};
        if (down && !down_set_create(&m, active, &ds)) {
            fprintf(stderr, "pinfer: %s: out of memory for the down projection's lists\n", cmd);
            pi_probe_mats_free(&m);
            return 1;
        }
        for (int vi = 0; vi < n_variants && !status; vi++) {
            const pi_kernels *k = kset[vi];
            if (!k->matvec[t]) continue;
            for (int hi = 0; hi < n_threads_list; hi++) {
                pi_pool *pool;
                double med;
                if (pi_pool_create((int)thread_counts[hi], &pool) != PI_OK ||
                    pi_probe_kernel(pool, k, &m, PI_HW_MATVEC, (int)reps, &med) != PI_OK) {
                    fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
                    pi_pool_free(pool);
                    status = 1;
                    break;
                }
                printf("%-6s %-8s %7ld %10.2f %8.0f%% %11.2f", pi_type_name(t), k->name, thread_counts[hi], med,
                       100.0 * med / bw[hi], (double)m.mat_bytes / (med * 1e9) * 1e3);
                if (down && k->axpy_rows[t] && k->axpy[t]) {
                    /* rounds of matvec, down and axpy back to back: the share is
                       the median of the rounds' down / matvec, which holds up
                       better than a ratio of medians when other work on the
                       machine comes and goes */
                    fflush(stdout);
                    double dg[MAX_REPS], rg[MAX_REPS], ag[MAX_REPS], share[MAX_REPS], rd[MAX_REPS], rshare[MAX_REPS];
                    for (int r = 0; r < reps && !status; r++) {
                        double mv;
                        if (pi_probe_kernel(pool, k, &m, PI_HW_MATVEC, 1, &mv) != PI_OK) {
                            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
                            status = 1;
                            break;
                        }
                        dg[r] = down_gbs(pool, k, &m, &ds, false, 1);
                        rg[r] = rows_gbs(pool, k, &m, &ds);
                        ag[r] = down_gbs(pool, k, &m, &ds, true, 1);
                        rd[r] = read_gbs(pool, &m, &ds);
                        share[r] = dg[r] / mv;
                        rshare[r] = rd[r] / mv;
                    }
                    if (!status)
                        printf(" %10.2f %6.0f%% %10.2f %10.2f %10.2f %9.0f%%", pi_median(dg, (int)reps),
                               100.0 * pi_median(share, (int)reps), pi_median(rg, (int)reps), pi_median(ag, (int)reps),
                               pi_median(rd, (int)reps), 100.0 * pi_median(rshare, (int)reps));
                }
                printf("\n");
                fflush(stdout);
                pi_pool_free(pool);
            }
        }
        down_set_free(&ds);
        pi_probe_mats_free(&m);
    }
    return status;
}
