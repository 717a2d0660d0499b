/*
 * arm_neon.c — the kernel table for AArch64 NEON with the ARMv8.2 dot-product
 * (SDOT) and half-precision extensions (every phone SoC of recent years).
 *
 * Compiled with -march=armv8.2-a+dotprod+fp16 only here; pi_kernels_get() hands
 * this table out only when the CPU reports asimd, asimddp and asimdhp, and
 * older CPUs run ref. Semantics are ref.c's; quantize_q8_0 gives ref's exact
 * bytes (vcvtnq rounds half to even like nearbyintf).
 *
 * SDOT multiplies signed by signed bytes, so Q4_0 nibbles are simply shifted
 * to -8..7 and no activation preparation is needed. Matvecs and vec_dot_rows
 * process four rows at a time so each activation load serves four rows, keep
 * vector accumulators per row and reduce once per row; the quant row kernels
 * take a pointer per row, and vec_dot is the same kernel on one row, so
 * vec_dot_rows gives vec_dot's bits. Quant rows are only 2-byte
 * aligned; NEON loads have no alignment requirement and stay inside the row.
 * No software prefetch: it has not been measured on ARM hardware.
 *
 * The matmuls (batches of inputs) use tiles of 4 rows x 2 inputs: a row's
 * block is loaded and unpacked once for both inputs, an input's once for 4
 * rows. They walk the rows chunk by chunk (PI_MM_CHUNK) like the x86 ones.
 * Only their correctness has been checked (under qemu), not their speed.
 */
#include "simd_common.h"
#include "ref_k.h"

#include <arm_neon.h>

#define INLINE static inline __attribute__((always_inline))

/* ---------------------------------------------------------------- helpers */

INLINE float f16_scalar(const void *p) {
    __fp16 h;
    __builtin_memcpy(&h, p, sizeof h);
    return (float)h;
}

/* 8 weights of a float-like type as two f32 vectors. */
INLINE float32x4x2_t load8(pi_type t, const void *w, int64_t i) {
    float32x4x2_t r;
    switch (t) {
    case PI_TYPE_F16: {
        const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16((const uint16_t *)w + i));
        r.val[0] = vcvt_f32_f16(vget_low_f16(h));
        r.val[1] = vcvt_high_f32_f16(h);
        break;
    }
    case PI_TYPE_BF16: {
        const uint16x8_t h = vld1q_u16((const uint16_t *)w + i);
        r.val[0] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
        r.val[1] = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
        break;
    }
    default:
        r.val[0] = vld1q_f32((const float *)w + i);
        r.val[1] = vld1q_f32((const float *)w + i + 4);
        break;
    }
    return r;
}

INLINE float tail_dot(pi_type t, int64_t i, int64_t n, const void *w, const float *x) {
    switch (t) {
    case PI_TYPE_F16: return pi_tail_dot_f16(i, n, w, x);
    case PI_TYPE_BF16: return pi_tail_dot_bf16(i, n, w, x);
    default: return pi_tail_dot_f32(i, n, w, x);
    }
}

/* ------------------------------------------------------------- quantize */

static void pi_quantize_q8_0_neon(const float *x, pi_block_q8_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / PI_QK8_0; b++) {
        const float *xb = x + b * PI_QK8_0;
        float32x4_t v[8];
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int k = 0; k < 8; k++) {
            v[k] = vld1q_f32(xb + 4 * k);
            m = vmaxq_f32(m, vabsq_f32(v[k]));
        }
        /* Same operations as ref: max|x| (order-free), one division, one
           reciprocal, one product, round half to even. */
        const float d = vmaxvq_f32(m) / 127.0f;
        const float id = pi_simd_recip_scale(d);
        y[b].d = pi_f32_to_f16(d);
        for (int k = 0; k < 8; k += 2) {
            const int32x4_t i0 = vcvtnq_s32_f32(vmulq_n_f32(v[k], id));
            const int32x4_t i1 = vcvtnq_s32_f32(vmulq_n_f32(v[k + 1], id));
            const int16x8_t i16 = vcombine_s16(vqmovn_s32(i0), vqmovn_s32(i1));
            vst1_s8(y[b].qs + 4 * k, vqmovn_s16(i16));
        }
    }
}

/* ------------------------------------------------------- F32, F16, BF16 */

INLINE void float_rows(pi_type t, const int R, int64_t n, const uint8_t *w, size_t stride, const float *x,
                       float *sums) {
    float32x4_t acc0[4], acc1[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) acc0[k] = acc1[k] = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t x0 = vld1q_f32(x + i), x1 = vld1q_f32(x + i + 4);
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const float32x4x2_t wv = load8(t, w + k * stride, i);
            acc0[k] = vfmaq_f32(acc0[k], wv.val[0], x0);
            acc1[k] = vfmaq_f32(acc1[k], wv.val[1], x1);
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
        sums[k] = vaddvq_f32(vaddq_f32(acc0[k], acc1[k])) + tail_dot(t, i, n, w + k * stride, x);
}

INLINE void float_matvec(pi_type t, int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,
                         const float *x, float *y) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) float_rows(t, 4, n, (const uint8_t *)W + (size_t)r * stride, stride, x, y + r);
    for (; r < r1; r++) float_rows(t, 1, n, (const uint8_t *)W + (size_t)r * stride, stride, x, y + r);
}

INLINE void float_axpy(pi_type t, int64_t n, float a, const void *w, float *y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4x2_t wv = load8(t, w, i);
        vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), wv.val[0], a));
        vst1q_f32(y + i + 4, vfmaq_n_f32(vld1q_f32(y + i + 4), wv.val[1], a));
    }
    switch (t) {
    case PI_TYPE_F16: pi_tail_axpy_f16(i, n, a, w, y); break;
    case PI_TYPE_BF16: pi_tail_axpy_bf16(i, n, a, w, y); break;
    default: pi_tail_axpy_f32(i, n, a, w, y); break;
    }
}

static float pi_vec_dot_f32_neon(int64_t n, const void *w, const void *x) {
    float s;
    float_rows(PI_TYPE_F32, 1, n, w, 0, x, &s);
    return s;
}
static float pi_vec_dot_f16_neon(int64_t n, const void *w, const void *x) {
    float s;
    float_rows(PI_TYPE_F16, 1, n, w, 0, x, &s);
    return s;
}
static float pi_vec_dot_bf16_neon(int64_t n, const void *w, const void *x) {
    float s;
    float_rows(PI_TYPE_BF16, 1, n, w, 0, x, &s);
    return s;
}
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_f32_neon, pi_vec_dot_f32_neon)
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_f16_neon, pi_vec_dot_f16_neon)
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_bf16_neon, pi_vec_dot_bf16_neon)
static void pi_matvec_f32_neon(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *x,
                               float *y) {
    float_matvec(PI_TYPE_F32, n, W, stride, r0, r1, x, y);
}
static void pi_matvec_f16_neon(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *x,
                               float *y) {
    float_matvec(PI_TYPE_F16, n, W, stride, r0, r1, x, y);
}
static void pi_matvec_bf16_neon(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *x,
                                float *y) {
    float_matvec(PI_TYPE_BF16, n, W, stride, r0, r1, x, y);
}
static void pi_axpy_f32_neon(int64_t n, float a, const void *w, float *y) { float_axpy(PI_TYPE_F32, n, a, w, y); }
static void pi_axpy_f16_neon(int64_t n, float a, const void *w, float *y) { float_axpy(PI_TYPE_F16, n, a, w, y); }
static void pi_axpy_bf16_neon(int64_t n, float a, const void *w, float *y) { float_axpy(PI_TYPE_BF16, n, a, w, y); }

/* s[k * T + t] = dot(row k, input t) over n elements for R rows stride bytes
   apart and T f32 inputs xs bytes apart: each weight vector loaded serves T
   inputs, each input vector R rows. */
INLINE void float_tile(pi_type ty, const int R, const int T, int64_t n, const uint8_t *w, size_t stride,
                       const uint8_t *x, size_t xs, float *s) {
    float32x4_t acc[4][2][2];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) acc[k][t][0] = acc[k][t][1] = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float32x4_t x0[2], x1[2];
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) {
            x0[t] = vld1q_f32((const float *)(x + t * xs) + i);
            x1[t] = vld1q_f32((const float *)(x + t * xs) + i + 4);
        }
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const float32x4x2_t wv = load8(ty, w + k * stride, i);
#pragma GCC unroll 2
            for (int t = 0; t < T; t++) {
                acc[k][t][0] = vfmaq_f32(acc[k][t][0], wv.val[0], x0[t]);
                acc[k][t][1] = vfmaq_f32(acc[k][t][1], wv.val[1], x1[t]);
            }
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 2
        for (int t = 0; t < T; t++)
            s[k * T + t] = vaddvq_f32(vaddq_f32(acc[k][t][0], acc[k][t][1])) +
                           tail_dot(ty, i, n, w + k * stride, (const float *)(x + t * xs));
}

/* Tiles of 4 rows x 2 inputs over each chunk (single rows / inputs for the
   remainders), chunk by chunk (see PI_MM_CHUNK_FLOAT). */
INLINE void float_matmul(pi_type ty, int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                         size_t xs, int64_t nb, float *Y, int64_t ys) {
    const size_t esize = ty == PI_TYPE_F32 ? 4 : 2;
    /* n == 0 still takes one (empty) chunk, so Y gets its zeros */
    for (int64_t k0 = 0; k0 == 0 || k0 < n; k0 += PI_MM_CHUNK_FLOAT) {
        const int64_t kn = n - k0 < PI_MM_CHUNK_FLOAT ? n - k0 : PI_MM_CHUNK_FLOAT;
        const uint8_t *wc = (const uint8_t *)W + k0 * esize;
        for (int64_t b = 0; b < nb;) {
            const int T = nb - b >= 2 ? 2 : 1;
            const uint8_t *xc = (const uint8_t *)X + (size_t)b * xs + k0 * 4;
            for (int64_t r = r0; r < r1;) {
                const int R = r1 - r >= 4 ? 4 : 1;
                const uint8_t *wr = wc + (size_t)r * stride;
                float s[8];
                if (R == 4 && T == 2) float_tile(ty, 4, 2, kn, wr, stride, xc, xs, s);
                else if (R == 4) float_tile(ty, 4, 1, kn, wr, stride, xc, xs, s);
                else if (T == 2) float_tile(ty, 1, 2, kn, wr, stride, xc, xs, s);
                else float_tile(ty, 1, 1, kn, wr, stride, xc, xs, s);
                for (int k = 0; k < R; k++)
                    for (int t = 0; t < T; t++) pi_mm_put(Y + (b + t) * ys + r + k, s[k * T + t], k0 == 0);
                r += R;
            }
            b += T;
        }
    }
}

static void pi_matmul_f32_neon(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                               size_t xs, int64_t nb, float *Y, int64_t ys) {
    float_matmul(PI_TYPE_F32, n, W, stride, r0, r1, X, xs, nb, Y, ys);
}
static void pi_matmul_f16_neon(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                               size_t xs, int64_t nb, float *Y, int64_t ys) {
    float_matmul(PI_TYPE_F16, n, W, stride, r0, r1, X, xs, nb, Y, ys);
}
static void pi_matmul_bf16_neon(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                                size_t xs, int64_t nb, float *Y, int64_t ys) {
    float_matmul(PI_TYPE_BF16, n, W, stride, r0, r1, X, xs, nb, Y, ys);
}

/* ------------------------------------------------------------ Q4_0 x Q8_0 */

/* sums[k] = dot over nb blocks of row w[k], for R rows anywhere in memory. */
INLINE void q4_0_rows(const int R, const uint8_t *const *w, const pi_block_q8_0 *x, int64_t nb, float *sums) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const int8x16_t eight = vdupq_n_s8(8);
    float32x4_t acc[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) acc[k] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const int8x16_t x0 = vld1q_s8(x[b].qs), x1 = vld1q_s8(x[b].qs + 16);
        const float dx = f16_scalar(&x[b].d);
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const uint8_t *p = w[k] + b * sizeof(pi_block_q4_0);
            const uint8x16_t q = vld1q_u8(p + 2);
            const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), eight);
            const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
            const int32x4_t i32 = vdotq_s32(vdotq_s32(vdupq_n_s32(0), lo, x0), hi, x1);
            acc[k] = vfmaq_n_f32(acc[k], vcvtq_f32_s32(i32), f16_scalar(p) * dx);
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) sums[k] = vaddvq_f32(acc[k]);
}

/* The matvec and vec_dot_rows of a row kernel rows_fn(R, w, x, nb, sums):
   4 rows at a time (activation loads shared), then one by one. Per-row
   results do not depend on R, so vec_dot_rows gives vec_dot's bits. */
#define NEON_MATVEC(rows_fn, n, W, stride, r0, r1, x, y, qk)                                             \
    do {                                                                                                 \
        const uint8_t *w_[4];                                                                            \
        int64_t r_ = (r0);                                                                               \
        for (; r_ + 4 <= (r1); r_ += 4) {                                                                \
            for (int k_ = 0; k_ < 4; k_++) w_[k_] = (const uint8_t *)(W) + (size_t)(r_ + k_) * (stride); \
            rows_fn(4, w_, (x), (n) / (qk), (y) + r_);                                                   \
        }                                                                                                \
        for (; r_ < (r1); r_++) {                                                                        \
            w_[0] = (const uint8_t *)(W) + (size_t)r_ * (stride);                                        \
            rows_fn(1, w_, (x), (n) / (qk), (y) + r_);                                                   \
        }                                                                                                \
    } while (0)
#define NEON_ROWS(rows_fn, n, rows, count, x, out, qk)               \
    do {                                                             \
        const uint8_t *w_[4];                                        \
        int64_t i_ = 0;                                              \
        for (; i_ + 4 <= (count); i_ += 4) {                         \
            for (int k_ = 0; k_ < 4; k_++) w_[k_] = (rows)[i_ + k_]; \
            rows_fn(4, w_, (x), (n) / (qk), (out) + i_);             \
        }                                                            \
        for (; i_ < (count); i_++) {                                 \
            w_[0] = (rows)[i_];                                      \
            rows_fn(1, w_, (x), (n) / (qk), (out) + i_);             \
        }                                                            \
    } while (0)

static void pi_matvec_q4_0_q8_0_neon(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,
                                     const void *x, float *y) {
    NEON_MATVEC(q4_0_rows, n, W, stride, r0, r1, x, y, PI_QK4_0);
}

static float pi_vec_dot_q4_0_q8_0_neon(int64_t n, const void *w, const void *x) {
    const uint8_t *wr[1] = {w};
    float s;
    q4_0_rows(1, wr, x, n / PI_QK4_0, &s);
    return s;
}

static void pi_vec_dot_rows_q4_0_q8_0_neon(int64_t n, const void *const *rows, int64_t count, const void *x,
                                           float *out) {
    NEON_ROWS(q4_0_rows, n, rows, count, x, out, PI_QK4_0);
}

static void pi_axpy_q4_0_neon(int64_t n, float a, const void *vw, float *y) {
    const pi_block_q4_0 *w = vw;
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const int8x16_t eight = vdupq_n_s8(8);
    for (int64_t b = 0; b < n / PI_QK4_0; b++, y += PI_QK4_0) {
        const float ad = a * f16_scalar(&w[b].d);
        const uint8x16_t q = vld1q_u8(w[b].qs);
        const int8x16_t half[2] = {vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), eight),
                                   vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight)};
        for (int h = 0; h < 2; h++) {
            const int16x8_t s0 = vmovl_s8(vget_low_s8(half[h])), s1 = vmovl_high_s8(half[h]);
            const int32x4_t v[4] = {vmovl_s16(vget_low_s16(s0)), vmovl_high_s16(s0), vmovl_s16(vget_low_s16(s1)),
                                    vmovl_high_s16(s1)};
            float *yh = y + 16 * h;
            for (int k = 0; k < 4; k++)
                vst1q_f32(yh + 4 * k, vfmaq_n_f32(vld1q_f32(yh + 4 * k), vcvtq_f32_s32(v[k]), ad));
        }
    }
}

/* ------------------------------------------------------------ Q8_0 x Q8_0 */

/* As q4_0_rows, for Q8_0 rows. */
INLINE void q8_0_rows(const int R, const uint8_t *const *w, const pi_block_q8_0 *x, int64_t nb, float *sums) {
    float32x4_t acc[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) acc[k] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const int8x16_t x0 = vld1q_s8(x[b].qs), x1 = vld1q_s8(x[b].qs + 16);
        const float dx = f16_scalar(&x[b].d);
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const uint8_t *p = w[k] + b * sizeof(pi_block_q8_0);
            const int8x16_t w0 = vld1q_s8((const int8_t *)p + 2), w1 = vld1q_s8((const int8_t *)p + 18);
            const int32x4_t i32 = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, x0), w1, x1);
            acc[k] = vfmaq_n_f32(acc[k], vcvtq_f32_s32(i32), f16_scalar(p) * dx);
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) sums[k] = vaddvq_f32(acc[k]);
}

static void pi_matvec_q8_0_q8_0_neon(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,
                                     const void *x, float *y) {
    NEON_MATVEC(q8_0_rows, n, W, stride, r0, r1, x, y, PI_QK8_0);
}

static float pi_vec_dot_q8_0_q8_0_neon(int64_t n, const void *w, const void *x) {
    const uint8_t *wr[1] = {w};
    float s;
    q8_0_rows(1, wr, x, n / PI_QK8_0, &s);
    return s;
}

static void pi_vec_dot_rows_q8_0_q8_0_neon(int64_t n, const void *const *rows, int64_t count, const void *x,
                                           float *out) {
    NEON_ROWS(q8_0_rows, n, rows, count, x, out, PI_QK8_0);
}

static void pi_axpy_q8_0_neon(int64_t n, float a, const void *vw, float *y) {
    const pi_block_q8_0 *w = vw;
    for (int64_t b = 0; b < n / PI_QK8_0; b++, y += PI_QK8_0) {
        const float ad = a * f16_scalar(&w[b].d);
        for (int h = 0; h < 2; h++) {
            const int8x16_t q = vld1q_s8(w[b].qs + 16 * h);
            const int16x8_t s0 = vmovl_s8(vget_low_s8(q)), s1 = vmovl_high_s8(q);
            const int32x4_t v[4] = {vmovl_s16(vget_low_s16(s0)), vmovl_high_s16(s0), vmovl_s16(vget_low_s16(s1)),
                                    vmovl_high_s16(s1)};
            float *yh = y + 16 * h;
            for (int k = 0; k < 4; k++)
                vst1q_f32(yh + 4 * k, vfmaq_n_f32(vld1q_f32(yh + 4 * k), vcvtq_f32_s32(v[k]), ad));
        }
    }
}

/* ------------------------------------------------------- quant matmuls */

/* s[k * T + t] = the dot over nb blocks of row k (R rows stride bytes apart,
   of type ty: Q4_0 or Q8_0) with input t (xs bytes apart): each row's block
   is loaded (and Q4_0 unpacked) once for all T inputs, each input's block
   once for all R rows. */
INLINE void quant_tile(pi_type ty, const int R, const int T, const uint8_t *w, size_t stride,
                       const pi_block_q8_0 *x, size_t xs, int64_t nb, float *s) {
    const size_t bsz = ty == PI_TYPE_Q4_0 ? sizeof(pi_block_q4_0) : sizeof(pi_block_q8_0);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const int8x16_t eight = vdupq_n_s8(8);
    float32x4_t acc[4][2];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) acc[k][t] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        int8x16_t x0[2], x1[2];
        float dx[2];
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) {
            const pi_block_q8_0 *xb = (const pi_block_q8_0 *)((const uint8_t *)x + t * xs) + b;
            x0[t] = vld1q_s8(xb->qs);
            x1[t] = vld1q_s8(xb->qs + 16);
            dx[t] = f16_scalar(&xb->d);
        }
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const uint8_t *p = w + k * stride + b * bsz;
            int8x16_t w0, w1;
            if (ty == PI_TYPE_Q4_0) {
                const uint8x16_t q = vld1q_u8(p + 2);
                w0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), eight);
                w1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
            } else {
                w0 = vld1q_s8((const int8_t *)p + 2);
                w1 = vld1q_s8((const int8_t *)p + 18);
            }
            const float dw = f16_scalar(p);
#pragma GCC unroll 2
            for (int t = 0; t < T; t++) {
                const int32x4_t i32 = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, x0[t]), w1, x1[t]);
                acc[k][t] = vfmaq_n_f32(acc[k][t], vcvtq_f32_s32(i32), dw * dx[t]);
            }
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) s[k * T + t] = vaddvq_f32(acc[k][t]);
}

/* Chunk by chunk (PI_MM_CHUNK), tiles of 4 rows x 2 inputs. */
INLINE void quant_matmul(pi_type ty, int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                         size_t xs, int64_t nb, float *Y, int64_t ys) {
    enum { CB = PI_MM_CHUNK / PI_QK8_0 };
    const size_t bsz = ty == PI_TYPE_Q4_0 ? sizeof(pi_block_q4_0) : sizeof(pi_block_q8_0);
    const int64_t nblk = n / PI_QK8_0;
    for (int64_t c0 = 0; c0 == 0 || c0 < nblk; c0 += CB) {
        const int64_t cb = nblk - c0 < CB ? nblk - c0 : CB;
        const uint8_t *wc = (const uint8_t *)W + c0 * bsz;
        for (int64_t b = 0; b < nb;) {
            const int T = nb - b >= 2 ? 2 : 1;
            const pi_block_q8_0 *xc = (const pi_block_q8_0 *)((const uint8_t *)X + (size_t)b * xs) + c0;
            for (int64_t r = r0; r < r1;) {
                const int R = r1 - r >= 4 ? 4 : 1;
                const uint8_t *wr = wc + (size_t)r * stride;
                float s[8];
                if (R == 4 && T == 2) quant_tile(ty, 4, 2, wr, stride, xc, xs, cb, s);
                else if (R == 4) quant_tile(ty, 4, 1, wr, stride, xc, xs, cb, s);
                else if (T == 2) quant_tile(ty, 1, 2, wr, stride, xc, xs, cb, s);
                else quant_tile(ty, 1, 1, wr, stride, xc, xs, cb, s);
                for (int k = 0; k < R; k++)
                    for (int t = 0; t < T; t++) pi_mm_put(Y + (b + t) * ys + r + k, s[k * T + t], c0 == 0);
                r += R;
            }
            b += T;
        }
    }
}

static void pi_matmul_q4_0_q8_0_neon(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,
                                     const void *X, size_t xs, int64_t nb, float *Y, int64_t ys) {
    quant_matmul(PI_TYPE_Q4_0, n, W, stride, r0, r1, X, xs, nb, Y, ys);
}
static void pi_matmul_q8_0_q8_0_neon(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,
                                     const void *X, size_t xs, int64_t nb, float *Y, int64_t ys) {
    quant_matmul(PI_TYPE_Q8_0, n, W, stride, r0, r1, X, xs, nb, Y, ys);
}

const pi_kernels pi_kernels_neon = {
    .name = "neon",
    .quantize_q8_0 = pi_quantize_q8_0_neon,
    .quantize_q8_K = pi_quantize_q8_K_ref, /* ref's until this table has its own K-quant kernels */
    .vec_dot =
        {
            [PI_TYPE_F32] = pi_vec_dot_f32_neon,
            [PI_TYPE_F16] = pi_vec_dot_f16_neon,
            [PI_TYPE_BF16] = pi_vec_dot_bf16_neon,
            [PI_TYPE_Q8_0] = pi_vec_dot_q8_0_q8_0_neon,
            [PI_TYPE_Q4_0] = pi_vec_dot_q4_0_q8_0_neon,
            [PI_TYPE_Q4_K] = pi_vec_dot_q4_K_q8_K_ref,
            [PI_TYPE_Q5_K] = pi_vec_dot_q5_K_q8_K_ref,
            [PI_TYPE_Q6_K] = pi_vec_dot_q6_K_q8_K_ref,
        },
    .vec_dot_rows =
        {
            [PI_TYPE_F32] = pi_vec_dot_rows_f32_neon,
            [PI_TYPE_F16] = pi_vec_dot_rows_f16_neon,
            [PI_TYPE_BF16] = pi_vec_dot_rows_bf16_neon,
            [PI_TYPE_Q8_0] = pi_vec_dot_rows_q8_0_q8_0_neon,
            [PI_TYPE_Q4_0] = pi_vec_dot_rows_q4_0_q8_0_neon,
            [PI_TYPE_Q4_K] = pi_vec_dot_rows_q4_K_q8_K_ref,
            [PI_TYPE_Q5_K] = pi_vec_dot_rows_q5_K_q8_K_ref,
            [PI_TYPE_Q6_K] = pi_vec_dot_rows_q6_K_q8_K_ref,
        },
    .axpy =
        {
            [PI_TYPE_F32] = pi_axpy_f32_neon,
            [PI_TYPE_F16] = pi_axpy_f16_neon,
            [PI_TYPE_BF16] = pi_axpy_bf16_neon,
            [PI_TYPE_Q8_0] = pi_axpy_q8_0_neon,
            [PI_TYPE_Q4_0] = pi_axpy_q4_0_neon,
            [PI_TYPE_Q4_K] = pi_axpy_q4_K_ref,
            [PI_TYPE_Q5_K] = pi_axpy_q5_K_ref,
            [PI_TYPE_Q6_K] = pi_axpy_q6_K_ref,
        },
    .matvec =
        {
            [PI_TYPE_F32] = pi_matvec_f32_neon,
            [PI_TYPE_F16] = pi_matvec_f16_neon,
            [PI_TYPE_BF16] = pi_matvec_bf16_neon,
            [PI_TYPE_Q8_0] = pi_matvec_q8_0_q8_0_neon,
            [PI_TYPE_Q4_0] = pi_matvec_q4_0_q8_0_neon,
            [PI_TYPE_Q4_K] = pi_matvec_q4_K_q8_K_ref,
            [PI_TYPE_Q5_K] = pi_matvec_q5_K_q8_K_ref,
            [PI_TYPE_Q6_K] = pi_matvec_q6_K_q8_K_ref,
        },
    .matmul =
        {
            [PI_TYPE_F32] = pi_matmul_f32_neon,
            [PI_TYPE_F16] = pi_matmul_f16_neon,
            [PI_TYPE_BF16] = pi_matmul_bf16_neon,
            [PI_TYPE_Q8_0] = pi_matmul_q8_0_q8_0_neon,
            [PI_TYPE_Q4_0] = pi_matmul_q4_0_q8_0_neon,
            [PI_TYPE_Q4_K] = pi_matmul_q4_K_q8_K_ref,
            [PI_TYPE_Q5_K] = pi_matmul_q5_K_q8_K_ref,
            [PI_TYPE_Q6_K] = pi_matmul_q6_K_q8_K_ref,
        },
};
