/*
 * axpy_rows.h — private to the kernel files: the SIMD gathered axpys
 * (pi_axpy_rows_fn, contract in kernels.h) of x86_avx2_down.c,
 * x86_avx512_down.c and arm_neon_down.c, the initializers the tables use
 * for their axpy_rows slot, and the row grouping those files share.
 *
 * Every SIMD version computes, for each row k with a[k] != 0 in list order
 * and each element i, one fused multiply-add y[i] = fma(c, v, y[i]) with:
 *   F32, F16, BF16: c = a[k], v = the weight widened to float;
 *   Q8_0:           c = a[k] * d (d the block's f16 scale, the product
 *                   rounded to float), v = the integer quant.
 * So every SIMD table gives the same bits for the same call, and a list
 * split into consecutive calls gives the bits of one call over it.
 * Q4_0, Q4_1, Q5_0, Q5_1 and the K-quants are added in integers instead
 * ("Q4_0 in integers" below):
 * the same bits in every SIMD table for the same calls, but a group's
 * coefficients share a scale, so only splits between groups keep the bits.
 *
 * How they run: the rows with a nonzero coefficient are taken in groups of
 * up to PI_AXPY_ROWS_GROUP; a group walks y once, segment by segment, a
 * segment of y (32 to 128 floats) staying in registers while each of the
 * group's rows, in order, has its matching weights unpacked and added, so y
 * is loaded and stored once per group instead of once per row. While a group
 * is computed, the same offsets of the next group's rows are prefetched (the
 * rows are scattered); a group with none after it prefetches its own rows
 * PI_VEC_DOT_PF bytes ahead.
 */
#ifndef PI_KERNELS_AXPY_ROWS_H
#define PI_KERNELS_AXPY_ROWS_H

#include "kernels.h"
#include "simd_common.h"

#include <math.h>

#define PI_AXPY_ROWS_GROUP 8

#define PI_AXPY_ROWS_DECL(isa)                                                                                 \
    void pi_axpy_rows_f32_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y);  \
    void pi_axpy_rows_f16_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y);  \
    void pi_axpy_rows_bf16_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y); \
    void pi_axpy_rows_q8_0_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y); \
    void pi_axpy_rows_q4_0_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y); \
    void pi_axpy_rows_q4_K_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y); \
    void pi_axpy_rows_q5_K_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y); \
    void pi_axpy_rows_q6_K_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y); \
    void pi_axpy_rows_q4_1_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y); \
    void pi_axpy_rows_q5_0_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y); \
    void pi_axpy_rows_q5_1_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y);

/* The initializer of a table's axpy_rows slot: `.axpy_rows = PI_AXPY_ROWS_TABLE(avx2),` */
#define PI_AXPY_ROWS_TABLE(isa)                                                                                  \
    {                                                                                                            \
        [PI_TYPE_F32] = pi_axpy_rows_f32_##isa, [PI_TYPE_F16] = pi_axpy_rows_f16_##isa,                         \
        [PI_TYPE_BF16] = pi_axpy_rows_bf16_##isa, [PI_TYPE_Q8_0] = pi_axpy_rows_q8_0_##isa,                     \
        [PI_TYPE_Q4_0] = pi_axpy_rows_q4_0_##isa, [PI_TYPE_Q4_K] = pi_axpy_rows_q4_K_##isa,                     \
        [PI_TYPE_Q5_K] = pi_axpy_rows_q5_K_##isa, [PI_TYPE_Q6_K] = pi_axpy_rows_q6_K_##isa,                     \
        [PI_TYPE_Q4_1] = pi_axpy_rows_q4_1_##isa, [PI_TYPE_Q5_0] = pi_axpy_rows_q5_0_##isa,                     \
        [PI_TYPE_Q5_1] = pi_axpy_rows_q5_1_##isa,                                                                \
    }

#if defined(__x86_64__)
PI_AXPY_ROWS_DECL(avx2)
PI_AXPY_ROWS_DECL(avx512)
#endif
#if defined(__aarch64__)
PI_AXPY_ROWS_DECL(neon)
#endif

/* A group of rows: w[0..m) with coefficients c[0..m). */
typedef struct {
    const uint8_t *w[PI_AXPY_ROWS_GROUP];
    float c[PI_AXPY_ROWS_GROUP];
    int m;
} pi_axpy_group;

/* The next up to PI_AXPY_ROWS_GROUP rows of the list from *pos on whose
   coefficient is nonzero, in order; *pos moves past the entries taken or
   skipped. */
static inline void pi_axpy_take(const float *a, const void *const *rows, int64_t count, int64_t *pos,
                                pi_axpy_group *g) {
    int m = 0;
    int64_t k = *pos;
    for (; k < count && m < PI_AXPY_ROWS_GROUP; k++)
        if (a[k] != 0.0f) {
            g->w[m] = rows[k];
            g->c[m] = a[k];
            m++;
        }
    g->m = m;
    *pos = k;
}

/* What group g prefetches while it is computed: row k's bytes at the same
   offsets of row k of the next group, or its own PI_VEC_DOT_PF bytes further
   on when the next group has no row k. */
static inline void pi_axpy_pf_targets(const pi_axpy_group *g, const pi_axpy_group *next, size_t ahead,
                                      const uint8_t **pf) {
    for (int k = 0; k < g->m; k++) pf[k] = k < next->m ? next->w[k] : g->w[k] + ahead;
}

/* A walk over a list's groups (the two drivers below): each step takes
   the next group and sets pf, what the current one prefetches. */
typedef struct {
    pi_axpy_group g[2];
    const uint8_t *pf[PI_AXPY_ROWS_GROUP];
    const float *a;
    const void *const *rows;
    int64_t count, pos;
    int cur;
} pi_axpy_walk;

/* start_bytes: how many opening bytes of the first group's rows to
   prefetch (0: none). */
static inline void pi_axpy_walk_start(pi_axpy_walk *w, const float *a, const void *const *rows, int64_t count,
                                      size_t start_bytes) {
    w->a = a, w->rows = rows, w->count = count, w->pos = 0, w->cur = 0;
    pi_axpy_take(a, rows, count, &w->pos, &w->g[0]);
    if (start_bytes > 0)
        for (int k = 0; k < w->g[0].m; k++) prefetch_row_start(w->g[0].w[k], start_bytes);
}

/* The next group to compute (NULL at the end), with w->pf set for it. */
static inline pi_axpy_group *pi_axpy_walk_next(pi_axpy_walk *w) {
    pi_axpy_group *gc = &w->g[w->cur], *nx = &w->g[w->cur ^ 1];
    if (gc->m == 0) return NULL;
    pi_axpy_take(w->a, w->rows, w->count, &w->pos, nx);
    pi_axpy_pf_targets(gc, nx, PI_VEC_DOT_PF, w->pf);
    w->cur ^= 1;
    return gc;
}

/* The body of a gathered axpy over a pass function pass(R, w, c, pf, ...)
   that adds R rows (R = 8, 4, 2 or 1, a constant) to y in one walk: groups
   of 8 rows, a last partial group as 4 + 2 + 1 rows (the rows stay in list
   order). start_bytes: as for pi_axpy_walk_start. */
#define PI_AXPY_ROWS_DRIVE(pass, a, rows, count, start_bytes, ...)                                      \
    do {                                                                                                \
        pi_axpy_walk w_;                                                                                \
        pi_axpy_walk_start(&w_, (a), (rows), (count), (start_bytes));                                   \
        for (pi_axpy_group *gc_; (gc_ = pi_axpy_walk_next(&w_)) != NULL;) {                             \
            const uint8_t **pf_ = w_.pf; /* unused where passes take no prefetch */                     \
            (void)pf_;                                                                                  \
            if (gc_->m == 8) {                                                                          \
                pass(8, gc_->w, gc_->c, pf_, __VA_ARGS__);                                              \
            } else {                                                                                    \
                int i_ = 0;                                                                             \
                if (gc_->m - i_ >= 4)                                                                   \
                    pass(4, gc_->w + i_, gc_->c + i_, pf_ + i_, __VA_ARGS__), i_ += 4;                  \
                if (gc_->m - i_ >= 2)                                                                   \
                    pass(2, gc_->w + i_, gc_->c + i_, pf_ + i_, __VA_ARGS__), i_ += 2;                  \
                if (gc_->m - i_ >= 1)                                                                   \
                    pass(1, gc_->w + i_, gc_->c + i_, pf_ + i_, __VA_ARGS__), i_ += 1;                  \
            }                                                                                           \
        }                                                                                               \
    } while (0)

/* ---- Q4_0 in integers ----
 *
 * Every SIMD table adds Q4_0 rows in integer arithmetic instead: for each
 * group of up to PI_AXPY_ROWS_GROUP rows with a nonzero coefficient (as
 * pi_axpy_take forms them, in list order, within one call) and each block b
 * of 32 elements:
 *   cd_k = a[k] * d_k,b                  (float product, rounded)
 *   E    = the exponent field of max_k |cd_k| (taken on the bit patterns,
 *          so a NaN or infinity counts as largest)
 *   e    = E - 141 held in [-126, 113], so max |cd_k| * 2^-e < 2^15
 *   k_k  = rint(cd_k * 2^-e) held in [-32767, 32767] (round half to even)
 *   acc_i = sum_k k_k * (q_k,i - 8)      (exact in 32 bits: |acc| < 2^22)
 *   y_i  = y_i + acc_i * 2^e             (one rounding: acc_i * 2^e is exact)
 * and where E = 255 (a coefficient that is not finite) the block's y becomes
 * NaN.
 *
 * Q4_K and Q5_K the same way per sub-block j of 32 (8 per super-block):
 * cd_k = a[k] * (d_k * sc_k,j) (d * sc exact), q the unsigned quant (Q4_K
 * 0..15, Q5_K 0..31), and the mins apart in float: nb_j = sum over the
 * group's rows in order of fma(a[k], -(dmin_k * m_k,j), nb_j) from 0
 * (dmin * m exact), so
 *   y_i  = y_i + fma(acc_i, 2^e, nb_j)   (two roundings).
 *
 * Q6_K per sub-block j of 16 (16 per super-block): cd_k = a[k] *
 * (d_k * scales_k,j) (exact product), q the six-bit quant, acc_i = sum_k
 * k_k * (q_k,i - 32) (|acc| < 2^24), y_i = y_i + acc_i * 2^e as for Q4_0.
 *
 * Q5_0 per block of 32 as Q4_0, q the five-bit quant (0..31, the fifth
 * bit from qh) and offset 16: acc_i = sum_k k_k * (q_k,i - 16). Q4_1 and
 * Q5_1 per block of 32 with cd_k = a[k] * d_k, q unsigned (0..15, 0..31)
 * and the mins apart as for Q4_K: nb = sum over the group's rows in order
 * of fma(a[k], m_k, nb) from 0, y_i = y_i + fma(acc_i, 2^e, nb).
 *
 * Each coefficient is kept to 15 bits of the group's largest in the
 * block (relative error <= 2^-15 of it); integer sums do not depend on the
 * order the rows are added in, so every table gives the same bits for the
 * same calls, while splitting a list into other calls (other groups) may
 * change the last bits. Two rows at a time go through one 16-bit
 * multiply-add into 32-bit lanes (vpdpwssd, pmaddwd; NEON widens row by
 * row), which is why a Q4_0 down row costs about half of the float
 * path's instructions. (A group's sums stay below 8 x 32767 x 32 < 2^24
 * in magnitude, so they convert to float exactly.) */

#define PI_Q4I_KMAX 32767

/* The layout of the integer types with blocks of 32 weights (Q4_0, Q4_1,
   Q5_0, Q5_1): f16 d first, then Q4_1 / Q5_1's f16 m, then Q5's 32 qh bits
   (bit i: the fifth bit of weight i), then 16 quant bytes (weight i the low
   nibble of byte i, weight 16 + i the high one). */
static inline size_t pi_q32_bsz(pi_type t) {
    return t == PI_TYPE_Q4_0   ? sizeof(pi_block_q4_0)
           : t == PI_TYPE_Q4_1 ? sizeof(pi_block_q4_1)
           : t == PI_TYPE_Q5_0 ? sizeof(pi_block_q5_0)
                               : sizeof(pi_block_q5_1);
}
static inline size_t pi_q32_qs(pi_type t) { return pi_q32_bsz(t) - 16; } /* where the quant bytes start */
static inline size_t pi_q32_qh(pi_type t) { return t == PI_TYPE_Q5_0 ? 2 : 4; } /* Q5_0 / Q5_1's qh */
static inline int pi_q32_has_min(pi_type t) { return t == PI_TYPE_Q4_1 || t == PI_TYPE_Q5_1; }
static inline int pi_q32_five(pi_type t) { return t == PI_TYPE_Q5_0 || t == PI_TYPE_Q5_1; }
/* The quants' offset, the accumulators' start in units of -(sum of k) */
static inline int pi_q32_offset(pi_type t) { return t == PI_TYPE_Q4_0 ? 8 : t == PI_TYPE_Q5_0 ? 16 : 0; }

/* One block's integer coefficients k[0..m) of the float coefficients
   cd[0..m) (the rules above); returns the block's scale 2^e, or NaN. The
   scalar form of what the SIMD versions compute for several blocks at once. */
static inline float pi_q4i_quant(const float *cd, int m, int32_t *k) {
    uint32_t mb = 0;
    for (int r = 0; r < m; r++) {
        const uint32_t u = pi_f32_bits(cd[r]) & 0x7fffffffu;
        mb = u > mb ? u : mb;
    }
    const int E = (int)(mb >> 23);
    if (E == 255) {
        for (int r = 0; r < m; r++) k[r] = 0;
        return pi_f32_from_bits(0x7fc00000u);
    }
    int e = E - 141;
    e = e < -126 ? -126 : e > 113 ? 113 : e;
    const float inv = pi_f32_from_bits((uint32_t)(127 - e) << 23);
    for (int r = 0; r < m; r++) {
        const float v = rintf(cd[r] * inv);
        k[r] = v > PI_Q4I_KMAX ? PI_Q4I_KMAX : v < -PI_Q4I_KMAX ? -PI_Q4I_KMAX : (int32_t)v;
    }
    return pi_f32_from_bits((uint32_t)(127 + e) << 23);
}

/* The body of an integer gathered axpy over a pass function
   pass(P, w, c, pf, ...) that adds P pairs of rows (P = 1..4, a constant)
   as one group: the groups of PI_AXPY_ROWS_DRIVE, whole; a group with an
   odd number of rows gets its first row again with coefficient 0 (so no
   row pointer is NULL and the sums are unchanged). */
#define PI_AXPY_ROWS_DRIVE_PAIRS(pass, a, rows, count, start_bytes, ...)                               \
    do {                                                                                                \
        pi_axpy_walk w_;                                                                                \
        pi_axpy_walk_start(&w_, (a), (rows), (count), (start_bytes));                                   \
        for (pi_axpy_group *gc_; (gc_ = pi_axpy_walk_next(&w_)) != NULL;) {                             \
            const uint8_t **pf_ = w_.pf;                                                                \
            if (gc_->m % 2) {                                                                           \
                gc_->w[gc_->m] = gc_->w[0];                                                             \
                gc_->c[gc_->m] = 0.0f;                                                                  \
                pf_[gc_->m] = pf_[0];                                                                   \
            }                                                                                           \
            switch ((gc_->m + 1) / 2) {                                                                 \
            case 1: pass(1, gc_->w, gc_->c, pf_, __VA_ARGS__); break;                                   \
            case 2: pass(2, gc_->w, gc_->c, pf_, __VA_ARGS__); break;                                   \
            case 3: pass(3, gc_->w, gc_->c, pf_, __VA_ARGS__); break;                                   \
            default: pass(4, gc_->w, gc_->c, pf_, __VA_ARGS__); break;                                  \
            }                                                                                           \
        }                                                                                               \
    } while (0)

#endif
