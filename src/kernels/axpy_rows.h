/*
 * axpy_rows.h — private to the kernel files: the SIMD gathered axpys
 * (pi_axpy_rows_fn, contract in kernels.h) of x86_avx2_down.c,
 * x86_avx512_down.c and arm_neon_down.c, the initializers the tables use
 * for their axpy_rows slot, and the row grouping those files share.
 *
 * Every SIMD version computes, for each row k with a[k] != 0 in list order
 * and each element i, one fused multiply-add y[i] = fma(c, v, y[i]) with:
 *   F32, F16, BF16: c = a[k], v = the weight widened to float;
 *   Q8_0, Q4_0:     c = a[k] * d (d the block's f16 scale, the product
 *                   rounded to float), v = the integer quant (Q4_0: nibble - 8);
 *   Q4_K, Q5_K, Q6_K: c = a[k], v = the weight exactly as pi_dequantize_row
 *                   gives it (those are exact in float, see ref.c).
 * So every SIMD table gives the same bits for the same call, and a list
 * split into consecutive calls gives the bits of one call over it.
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

#define PI_AXPY_ROWS_GROUP 8

#define PI_AXPY_ROWS_DECL(isa)                                                                                 \
    void pi_axpy_rows_f32_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y);  \
    void pi_axpy_rows_f16_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y);  \
    void pi_axpy_rows_bf16_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y); \
    void pi_axpy_rows_q8_0_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y); \
    void pi_axpy_rows_q4_0_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y); \
    void pi_axpy_rows_q4_K_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y); \
    void pi_axpy_rows_q5_K_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y); \
    void pi_axpy_rows_q6_K_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y);

/* The initializer of a table's axpy_rows slot: `.axpy_rows = PI_AXPY_ROWS_TABLE(avx2),` */
#define PI_AXPY_ROWS_TABLE(isa)                                                                                  \
    {                                                                                                            \
        [PI_TYPE_F32] = pi_axpy_rows_f32_##isa, [PI_TYPE_F16] = pi_axpy_rows_f16_##isa,                         \
        [PI_TYPE_BF16] = pi_axpy_rows_bf16_##isa, [PI_TYPE_Q8_0] = pi_axpy_rows_q8_0_##isa,                     \
        [PI_TYPE_Q4_0] = pi_axpy_rows_q4_0_##isa, [PI_TYPE_Q4_K] = pi_axpy_rows_q4_K_##isa,                     \
        [PI_TYPE_Q5_K] = pi_axpy_rows_q5_K_##isa, [PI_TYPE_Q6_K] = pi_axpy_rows_q6_K_##isa,                     \
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

/* The body of a gathered axpy over a pass function pass(R, w, c, pf, ...)
   that adds R rows (R = 8, 4, 2 or 1, a constant) to y in one walk: groups
   of 8 rows, a last partial group as 4 + 2 + 1 rows (the rows stay in list
   order). start_bytes: how many opening bytes of the first group's rows to
   prefetch (0: none). */
#define PI_AXPY_ROWS_DRIVE(pass, a, rows, count, start_bytes, ...)                                      \
    do {                                                                                                \
        pi_axpy_group g_[2];                                                                            \
        int64_t pos_ = 0;                                                                               \
        int cur_ = 0;                                                                                   \
        pi_axpy_take((a), (rows), (count), &pos_, &g_[0]);                                              \
        if ((start_bytes) > 0)                                                                          \
            for (int k_ = 0; k_ < g_[0].m; k_++) prefetch_row_start(g_[0].w[k_], (start_bytes));        \
        while (g_[cur_].m > 0) {                                                                        \
            pi_axpy_group *gc_ = &g_[cur_], *nx_ = &g_[cur_ ^ 1];                                       \
            pi_axpy_take((a), (rows), (count), &pos_, nx_);                                             \
            const uint8_t *pf_[PI_AXPY_ROWS_GROUP];                                                     \
            pi_axpy_pf_targets(gc_, nx_, PI_VEC_DOT_PF, pf_);                                           \
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
            cur_ ^= 1;                                                                                  \
        }                                                                                               \
    } while (0)

#endif
