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
 * to -8..7 and no activation preparation is needed; Q4_1, Q5_0 and Q5_1
 * (llama.cpp's fallbacks for rows that are not multiples of 256) share the
 * Q8_0 / Q4_0 row, tile and axpy code. Matvecs and vec_dot_rows
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
 *
 * The K-quants (Q4_K, Q5_K, Q6_K weights, Q8_K activations) use the same
 * row and tile patterns on half super-blocks: 128 weights unpacked to 8
 * vectors of bytes (Q6_K's already minus 32) and dotted with SDOT; the
 * sub-block dots are gathered into one vector by pairwise adds and scaled
 * in int32, and the Q4_K / Q5_K mins meet the activation's bsums, so a
 * block costs a row two float multiply-adds (Q6_K one). Their axpy builds
 * ref's exact dequantized weights, and quantize_q8_K gives ref's bytes.
 */
#include "axpy_rows.h"
#include "simd_common.h"
#include "ref_k.h"

#include <arm_neon.h>
#include <string.h>

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

/* ------------------------------------------- blocks of 32 x Q8_0 */

/*
 * A block's 32 levels become two vectors of signed bytes for SDOT: Q8_0's
 * quants, Q4_0's nibble - 8, Q5_0's q - 16, Q4_1 / Q5_1's q itself (0..31);
 * Q5's fifth bits come from qh by a bit test of each byte's own bit (the byte
 * of qh holding it duplicated across 8 lanes). Q4_1 / Q5_1 (llama.cpp's
 * fallbacks for rows that are not multiples of 256) add their offset
 * m * d_x times the activation block's sum, 4 lanes of SDOT against ones,
 * made once per block for all rows.
 */

INLINE size_t q32_bytes(pi_type ty) {
    switch (ty) {
    case PI_TYPE_Q4_0: return sizeof(pi_block_q4_0);
    case PI_TYPE_Q4_1: return sizeof(pi_block_q4_1);
    case PI_TYPE_Q5_0: return sizeof(pi_block_q5_0);
    case PI_TYPE_Q5_1: return sizeof(pi_block_q5_1);
    default: return sizeof(pi_block_q8_0);
    }
}

/* 16 bytes of 16 where bits lo (weights 0..7 of the 16) and hi (8..15) are set. */
INLINE uint8x16_t q5_high(uint8_t lo, uint8_t hi) {
    static const uint8_t bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t h = vcombine_u8(vdup_n_u8(lo), vdup_n_u8(hi));
    return vandq_u8(vtstq_u8(h, vld1q_u8(bits)), vdupq_n_u8(16));
}

/* The 32 levels of a block of type ty at p as signed bytes, weights 0..15 in
   w0 and 16..31 in w1: Q8_0 its quants, Q4_0 nibble - 8, Q5_0 q - 16, Q4_1
   and Q5_1 q. */
INLINE void q32_levels(pi_type ty, const uint8_t *p, int8x16_t *w0, int8x16_t *w1) {
    if (ty == PI_TYPE_Q8_0) {
        *w0 = vld1q_s8((const int8_t *)p + 2);
        *w1 = vld1q_s8((const int8_t *)p + 18);
        return;
    }
    const size_t qs = ty == PI_TYPE_Q4_0 ? 2 : ty == PI_TYPE_Q4_1 ? 4 : ty == PI_TYPE_Q5_0 ? 6 : 8;
    const uint8x16_t q = vld1q_u8(p + qs);
    uint8x16_t lo = vandq_u8(q, vdupq_n_u8(0x0f)), hi = vshrq_n_u8(q, 4);
    if (ty == PI_TYPE_Q5_0 || ty == PI_TYPE_Q5_1) {
        const uint8_t *qh = p + qs - 4;
        lo = vorrq_u8(lo, q5_high(qh[0], qh[1]));
        hi = vorrq_u8(hi, q5_high(qh[2], qh[3]));
    }
    const int8x16_t off = vdupq_n_s8(ty == PI_TYPE_Q4_0 ? 8 : ty == PI_TYPE_Q5_0 ? 16 : 0);
    *w0 = vsubq_s8(vreinterpretq_s8_u8(lo), off);
    *w1 = vsubq_s8(vreinterpretq_s8_u8(hi), off);
}

/* 4 lanes that add up to the sum of an activation block's 32 quants. */
INLINE float32x4_t q8_0_sum4(int8x16_t x0, int8x16_t x1) {
    const int8x16_t one = vdupq_n_s8(1);
    return vcvtq_f32_s32(vdotq_s32(vdotq_s32(vdupq_n_s32(0), one, x0), one, x1));
}

/* sums[k] = dot over nb blocks of row w[k] (type ty), for R rows anywhere in
   memory, each activation block loaded once for the R rows. */
INLINE void lq_rows(pi_type ty, const int R, const uint8_t *const *w, const pi_block_q8_0 *x, int64_t nb,
                    float *sums) {
    const size_t bsz = q32_bytes(ty);
    const bool has_m = ty == PI_TYPE_Q4_1 || ty == PI_TYPE_Q5_1;
    float32x4_t acc[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) acc[k] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const int8x16_t x0 = vld1q_s8(x[b].qs), x1 = vld1q_s8(x[b].qs + 16);
        const float dx = f16_scalar(&x[b].d);
        const float32x4_t xsum = has_m ? q8_0_sum4(x0, x1) : vdupq_n_f32(0.0f);
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const uint8_t *p = w[k] + b * bsz;
            int8x16_t w0, w1;
            q32_levels(ty, p, &w0, &w1);
            const int32x4_t i32 = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, x0), w1, x1);
            acc[k] = vfmaq_n_f32(acc[k], vcvtq_f32_s32(i32), f16_scalar(p) * dx);
            if (has_m) acc[k] = vfmaq_n_f32(acc[k], xsum, f16_scalar(p + 2) * dx);
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) sums[k] = vaddvq_f32(acc[k]);
}

/* axpy: Q8_0, Q4_0, Q5_0 one FMA of a * d (rounded) with the level; Q4_1 /
   Q5_1 the weight fma(d, q, m) (pi_dequantize_row's value: d * q is exact),
   then one FMA of a with it: the operands of the x86 tables, so the same
   bits. */
INLINE void lq_axpy(pi_type ty, int64_t n, float a, const void *vw, float *y) {
    const size_t bsz = q32_bytes(ty);
    for (int64_t b = 0; b < n / 32; b++, y += 32) {
        const uint8_t *p = (const uint8_t *)vw + b * bsz;
        int8x16_t half[2];
        q32_levels(ty, p, &half[0], &half[1]);
        const bool has_m = ty == PI_TYPE_Q4_1 || ty == PI_TYPE_Q5_1;
        const float d = f16_scalar(p), ad = a * d, m = has_m ? f16_scalar(p + 2) : 0.0f;
        for (int h = 0; h < 2; h++) {
            const int16x8_t s0 = vmovl_s8(vget_low_s8(half[h])), s1 = vmovl_high_s8(half[h]);
            const int32x4_t v[4] = {vmovl_s16(vget_low_s16(s0)), vmovl_high_s16(s0), vmovl_s16(vget_low_s16(s1)),
                                    vmovl_high_s16(s1)};
            float *yh = y + 16 * h;
            for (int k = 0; k < 4; k++) {
                const float32x4_t q = vcvtq_f32_s32(v[k]), yv = vld1q_f32(yh + 4 * k);
                if (!has_m) vst1q_f32(yh + 4 * k, vfmaq_n_f32(yv, q, ad));
                else vst1q_f32(yh + 4 * k, vfmaq_n_f32(yv, vfmaq_n_f32(vdupq_n_f32(m), q, d), a));
            }
        }
    }
}

/* ------------------------------------------------------------ Q4_0 x Q8_0 */

INLINE void q4_0_rows(const int R, const uint8_t *const *w, const pi_block_q8_0 *x, int64_t nb, float *sums) {
    lq_rows(PI_TYPE_Q4_0, R, w, x, nb, sums);
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

static void pi_axpy_q4_0_neon(int64_t n, float a, const void *w, float *y) { lq_axpy(PI_TYPE_Q4_0, n, a, w, y); }

/* ------------------------------------------------------------ Q8_0 x Q8_0 */

INLINE void q8_0_rows(const int R, const uint8_t *const *w, const pi_block_q8_0 *x, int64_t nb, float *sums) {
    lq_rows(PI_TYPE_Q8_0, R, w, x, nb, sums);
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

static void pi_axpy_q8_0_neon(int64_t n, float a, const void *w, float *y) { lq_axpy(PI_TYPE_Q8_0, n, a, w, y); }

/* ------------------------------------------------------- quant matmuls */

/* s[k * T + t] = the dot over nb blocks of row k (R rows stride bytes apart,
   of type ty: Q4_0, Q8_0, Q4_1, Q5_0 or Q5_1) with input t (xs bytes
   apart): each row's block is loaded (and unpacked) once for all T inputs,
   each input's block once for all R rows. */
INLINE void quant_tile(pi_type ty, const int R, const int T, const uint8_t *w, size_t stride,
                       const pi_block_q8_0 *x, size_t xs, int64_t nb, float *s) {
    const size_t bsz = q32_bytes(ty);
    const bool has_m = ty == PI_TYPE_Q4_1 || ty == PI_TYPE_Q5_1;
    float32x4_t acc[4][2];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) acc[k][t] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        int8x16_t x0[2], x1[2];
        float dx[2];
        float32x4_t xsum[2];
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) {
            const pi_block_q8_0 *xb = (const pi_block_q8_0 *)((const uint8_t *)x + t * xs) + b;
            x0[t] = vld1q_s8(xb->qs);
            x1[t] = vld1q_s8(xb->qs + 16);
            dx[t] = f16_scalar(&xb->d);
            if (has_m) xsum[t] = q8_0_sum4(x0[t], x1[t]);
        }
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const uint8_t *p = w + k * stride + b * bsz;
            int8x16_t w0, w1;
            q32_levels(ty, p, &w0, &w1);
            const float dw = f16_scalar(p), mw = has_m ? f16_scalar(p + 2) : 0.0f;
#pragma GCC unroll 2
            for (int t = 0; t < T; t++) {
                const int32x4_t i32 = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, x0[t]), w1, x1[t]);
                acc[k][t] = vfmaq_n_f32(acc[k][t], vcvtq_f32_s32(i32), dw * dx[t]);
                if (has_m) acc[k][t] = vfmaq_n_f32(acc[k][t], xsum[t], mw * dx[t]);
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
    const size_t bsz = q32_bytes(ty);
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

/* The kernels of Q4_1, Q5_0, Q5_1 (tname) on lq_rows, quant_matmul, lq_axpy
   (their axpy_rows: arm_neon_down.c). */
#define NEON_LQ_KERNELS(TYPE, tname)                                                                            \
    INLINE void tname##_lq_rows(const int R, const uint8_t *const *w, const pi_block_q8_0 *x, int64_t nb,      \
                                float *sums) {                                                                  \
        lq_rows(TYPE, R, w, x, nb, sums);                                                                       \
    }                                                                                                           \
    static float pi_vec_dot_##tname##_q8_0_neon(int64_t n, const void *w, const void *x) {                     \
        const uint8_t *wr[1] = {w};                                                                             \
        float s;                                                                                                \
        lq_rows(TYPE, 1, wr, x, n / 32, &s);                                                                    \
        return s;                                                                                               \
    }                                                                                                           \
    static void pi_vec_dot_rows_##tname##_q8_0_neon(int64_t n, const void *const *rows, int64_t count,         \
                                                    const void *x, float *out) {                                \
        NEON_ROWS(tname##_lq_rows, n, rows, count, x, out, 32);                                                 \
    }                                                                                                           \
    static void pi_matvec_##tname##_q8_0_neon(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, \
                                              const void *x, float *y) {                                        \
        NEON_MATVEC(tname##_lq_rows, n, W, stride, r0, r1, x, y, 32);                                           \
    }                                                                                                           \
    static void pi_matmul_##tname##_q8_0_neon(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, \
                                              const void *X, size_t xs, int64_t nb, float *Y, int64_t ys) {     \
        quant_matmul(TYPE, n, W, stride, r0, r1, X, xs, nb, Y, ys);                                             \
    }                                                                                                           \
    static void pi_axpy_##tname##_neon(int64_t n, float a, const void *w, float *y) {                          \
        lq_axpy(TYPE, n, a, w, y);                                                                              \
    }

NEON_LQ_KERNELS(PI_TYPE_Q4_1, q4_1)
NEON_LQ_KERNELS(PI_TYPE_Q5_0, q5_0)
NEON_LQ_KERNELS(PI_TYPE_Q5_1, q5_1)

/* ------------------------------------------------ K-quants x Q8_K */

/* GCC's scheduler before register allocation hoists the loads of all rows'
   blocks to the top of these kernels' long unrolled bodies and then spills
   the unpacked weights to the stack (hundreds of q-register spills per
   K-quant matvec and matmul with GCC 12); without it they mostly stay in
   registers. Only this section is compiled so. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-schedule-insns")
#endif

/* Q8_K activations, ref's bytes: the same operations in the same order per
   element (max |x| is order-free; the first element of that magnitude keeps
   its sign; one division; product, clamp with maxnm/minnm, which ignore a
   NaN product like fmaxf/fminf; round half to even; one reciprocal). */
static void pi_quantize_q8_K_neon(const float *x, pi_block_q8_K *y, int64_t n) {
    const float32x4_t lo = vdupq_n_f32(-128.0f), hi = vdupq_n_f32(127.0f);
    for (int64_t b = 0; b < n / PI_QK_K; b++) {
        const float *xb = x + b * PI_QK_K;
        pi_block_q8_K *yb = y + b;
        /* m takes |x| where |x| > m, so NaNs (signaling ones too) are
           skipped as in ref's comparison */
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int j = 0; j < PI_QK_K; j += 4) {
            const float32x4_t a = vabsq_f32(vld1q_f32(xb + j));
            m = vbslq_f32(vcgtq_f32(a, m), a, m);
        }
        const float amax = vmaxvq_f32(m);
        if (amax == 0.0f) {
            __builtin_memset(yb, 0, sizeof *yb);
            continue;
        }
        /* amax is |x[j]| for some j: find the first such j, 4 at a time
           (bounded all the same) */
        const float32x4_t va = vdupq_n_f32(amax);
        int j = 0;
        while (j + 4 < PI_QK_K && !vmaxvq_u32(vceqq_f32(vabsq_f32(vld1q_f32(xb + j)), va))) j += 4;
        while (j + 1 < PI_QK_K && fabsf(xb[j]) != amax) j++;
        const float iscale = -127.0f / xb[j];
        if (isinf(iscale)) {
            __builtin_memset(yb, 0, sizeof *yb);
            yb->d = 1.0f / iscale;
            continue;
        }
        for (int k = 0; k < PI_QK_K; k += 16) {
            int32x4_t q[4];
            for (int i = 0; i < 4; i++) {
                const float32x4_t v = vmulq_n_f32(vld1q_f32(xb + k + 4 * i), iscale);
                q[i] = vcvtnq_s32_f32(vminnmq_f32(vmaxnmq_f32(v, lo), hi));
            }
            const int16x8_t s0 = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1]));
            const int16x8_t s1 = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
            const int8x16_t q8 = vcombine_s8(vmovn_s16(s0), vmovn_s16(s1));
            vst1q_s8(yb->qs + k, q8);
            yb->bsums[k / 16] = vaddlvq_s8(q8);
        }
        yb->d = 1.0f / iscale;
    }
}

/* Byte offsets inside the weight blocks (rows may be only 2-byte aligned,
   and the tests also run the row kernels on odd addresses, so blocks are
   read as bytes, never through their structs). */
#define Q4K_SCALES offsetof(pi_block_q4_K, scales)
#define Q4K_QS offsetof(pi_block_q4_K, qs)
#define Q5K_SCALES offsetof(pi_block_q5_K, scales)
#define Q5K_QH offsetof(pi_block_q5_K, qh)
#define Q5K_QS offsetof(pi_block_q5_K, qs)
#define Q6K_QL offsetof(pi_block_q6_K, ql)
#define Q6K_QH offsetof(pi_block_q6_K, qh)
#define Q6K_SCALES offsetof(pi_block_q6_K, scales)
#define Q6K_D offsetof(pi_block_q6_K, d)

/* The 6-bit scales and mins of sub-blocks 0..7 of a Q4_K / Q5_K block from
   its 12 scale bytes s (types.h), one byte each. With a, b, c the
   little-endian words of bytes 0-3, 4-7, 8-11: scales 0-3 are the low 6
   bits of a's bytes, mins 0-3 those of b's; scales 4-7 are c's low nibbles
   with the top 2 bits of a's bytes above them (bits 4-5), mins 4-7 c's high
   nibbles with the top 2 bits of b's bytes. */
INLINE void k4_scales(const uint8_t *s, uint8x8_t *sc, uint8x8_t *mn) {
    uint32_t a, b, c;
    __builtin_memcpy(&a, s, 4);
    __builtin_memcpy(&b, s + 4, 4);
    __builtin_memcpy(&c, s + 8, 4);
    const uint32_t sc_hi = (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u);
    const uint32_t mn_hi = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u);
    *sc = vcreate_u8((uint64_t)(a & 0x3f3f3f3fu) | (uint64_t)sc_hi << 32);
    *mn = vcreate_u8((uint64_t)(b & 0x3f3f3f3fu) | (uint64_t)mn_hi << 32);
}

/* The kernels work on half super-blocks (128 weights, 8 vectors), so that
   a row's unpacked half, the activation's matching half and the
   accumulators of 4 rows fit in the 32 vector registers. */

/* Half h (0 or 1) of the weights of the Q4_K (q5 false, 0..15) or Q5_K
   (0..31) block at p, 16 per vector in order: sub-block 4h + j is w[2j],
   w[2j+1]. Sub-blocks 2i and 2i+1 are the low and the high nibbles of
   qs[32i .. 32i+32); for Q5_K, bit j of qh[l] is the fifth bit (16) of
   weight l of sub-block j, so with qh shifted right by 2i the pair's bits
   are bits 0 and 1. */
INLINE void k4_unpack_half(const bool q5, const uint8_t *p, const int h, int8x16_t *w) {
    const uint8_t *qs = p + (q5 ? Q5K_QS : Q4K_QS) + 64 * h;
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m16 = vdupq_n_u8(0x10);
    uint8x16_t h0 = vdupq_n_u8(0), h1 = h0;
    if (q5) {
        h0 = vld1q_u8(p + Q5K_QH);
        h1 = vld1q_u8(p + Q5K_QH + 16);
        if (h) {
            h0 = vshrq_n_u8(h0, 4);
            h1 = vshrq_n_u8(h1, 4);
        }
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) {
        const uint8x16_t a = vld1q_u8(qs + 32 * i), b = vld1q_u8(qs + 32 * i + 16);
        uint8x16_t u0 = vandq_u8(a, m4), u1 = vandq_u8(b, m4), u2 = vshrq_n_u8(a, 4), u3 = vshrq_n_u8(b, 4);
        if (q5) {
            u0 = vorrq_u8(u0, vandq_u8(vshlq_n_u8(h0, 4), m16));
            u1 = vorrq_u8(u1, vandq_u8(vshlq_n_u8(h1, 4), m16));
            u2 = vorrq_u8(u2, vandq_u8(vshlq_n_u8(h0, 3), m16));
            u3 = vorrq_u8(u3, vandq_u8(vshlq_n_u8(h1, 3), m16));
            h0 = vshrq_n_u8(h0, 2);
            h1 = vshrq_n_u8(h1, 2);
        }
        w[4 * i] = vreinterpretq_s8_u8(u0);
        w[4 * i + 1] = vreinterpretq_s8_u8(u1);
        w[4 * i + 2] = vreinterpretq_s8_u8(u2);
        w[4 * i + 3] = vreinterpretq_s8_u8(u3);
    }
}

/* Half h of the weights of the Q6_K block at p as q - 32 (-32..31), 16 per
   vector in order (w[j] is sub-block 8h + j, scale scales[8h + j]). With
   ql0..ql3 the half's 64 ql bytes and qh0, qh1 its 32 qh bytes in vectors
   of 16: weights 0-31 are the low nibbles of ql0, ql1 with qh bits 0-1
   above them, 32-63 those of ql2, ql3 with bits 2-3, 64-95 the high nibbles
   of ql0, ql1 with bits 4-5, 96-127 those of ql2, ql3 with bits 6-7 (each
   pair of qh bits moved to bits 4-5). */
INLINE void k6_unpack_half(const uint8_t *p, const int h, int8x16_t *w) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m30 = vdupq_n_u8(0x30);
    const int8x16_t m32 = vdupq_n_s8(32);
    const uint8_t *ql = p + Q6K_QL + 64 * h, *qh = p + Q6K_QH + 32 * h;
    const uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16), l2 = vld1q_u8(ql + 32), l3 = vld1q_u8(ql + 48);
    const uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
    uint8x16_t u[8];
    u[0] = vorrq_u8(vandq_u8(l0, m4), vandq_u8(vshlq_n_u8(h0, 4), m30));
    u[1] = vorrq_u8(vandq_u8(l1, m4), vandq_u8(vshlq_n_u8(h1, 4), m30));
    u[2] = vorrq_u8(vandq_u8(l2, m4), vandq_u8(vshlq_n_u8(h0, 2), m30));
    u[3] = vorrq_u8(vandq_u8(l3, m4), vandq_u8(vshlq_n_u8(h1, 2), m30));
    u[4] = vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(h0, m30));
    u[5] = vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(h1, m30));
    u[6] = vorrq_u8(vshrq_n_u8(l2, 4), vandq_u8(vshrq_n_u8(h0, 2), m30));
    u[7] = vorrq_u8(vshrq_n_u8(l3, 4), vandq_u8(vshrq_n_u8(h1, 2), m30));
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) w[k] = vsubq_s8(vreinterpretq_s8_u8(u[k]), m32);
}

/* The scales (or mins) of sub-blocks 4h .. 4h+3 of a Q4_K / Q5_K block
   (k4_scales' bytes), as int32 lanes. */
INLINE int32x4_t k4_sc32(uint8x8_t sc, const int h) {
    const uint16x8_t s16 = vmovl_u8(sc);
    return vreinterpretq_s32_u32(h ? vmovl_high_u16(s16) : vmovl_u16(vget_low_u16(s16)));
}

/* Half of a Q4_K / Q5_K block's integer dot with a Q8_K block: w the
   half's weights (k4_unpack_half), xq the matching 128 activation quants,
   sc its 4 sub-blocks' scales; lane j is sub-block j's dot times its
   scale (the per-sub-block dots are gathered into one vector by pairwise
   adds, so scaling takes one multiply). */
INLINE int32x4_t k4_half_idot(const int8x16_t *w, const int8_t *xq, int32x4_t sc) {
    int32x4_t p[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
        p[j] = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w[2 * j], vld1q_s8(xq + 32 * j)), w[2 * j + 1],
                         vld1q_s8(xq + 32 * j + 16));
    return vmulq_s32(vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3])), sc);
}

/* Half of a Q6_K block's integer dot with a Q8_K block: w the half's
   weights (k6_unpack_half), xq the matching 128 activation quants, sc the
   half's 8 scales; lane l holds sub-blocks l and l + 4 of the half, each
   dot times its scale. */
INLINE int32x4_t k6_half_idot(const int8x16_t *w, const int8_t *xq, int8x8_t sc) {
    int32x4_t p[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) p[k] = vdotq_s32(vdupq_n_s32(0), w[k], vld1q_s8(xq + 16 * k));
    const int32x4_t d0 = vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3]));
    const int32x4_t d1 = vpaddq_s32(vpaddq_s32(p[4], p[5]), vpaddq_s32(p[6], p[7]));
    const int16x8_t s = vmovl_s8(sc);
    return vmlaq_s32(vmulq_s32(d0, vmovl_s16(vget_low_s16(s))), d1, vmovl_high_s16(s));
}

/* The integer min term of a Q4_K / Q5_K block: min m[j] times the sum of
   the activation quants of sub-block j (bs: the Q8_K bsums added in pairs),
   lane l holding sub-blocks l and l + 4. */
INLINE int32x4_t k4_imin(uint8x8_t mn, int16x8_t bs) {
    const int16x8_t m16 = vreinterpretq_s16_u16(vmovl_u8(mn));
    return vmlal_high_s16(vmull_s16(vget_low_s16(m16), vget_low_s16(bs)), m16, bs);
}

/* The Q8_K bsums of one block added in pairs: lane j sums the quants of
   sub-block j (32 activations; at most 32 * 128 in magnitude). */
INLINE int16x8_t q8K_bsums32(const pi_block_q8_K *x) {
    return vpaddq_s16(vld1q_s16(x->bsums), vld1q_s16(x->bsums + 8));
}

/* One weight super-block's contribution to a row's accumulator: ref's
   d_w * d_x * isum - dmin * d_x * imin, per lane of the integer vectors. */
INLINE float32x4_t k4_acc(float32x4_t acc, int32x4_t idot, int32x4_t imin, float d, float dmin, float dx) {
    acc = vfmaq_n_f32(acc, vcvtq_f32_s32(idot), d * dx);
    return vfmaq_n_f32(acc, vcvtq_f32_s32(imin), -(dmin * dx));
}

/* sums[k] = dot over nb super-blocks of row w[k] (Q5_K if q5, else Q4_K)
   with x, for R rows anywhere in memory: per block, the first halves of
   the R rows, then the second halves. */
INLINE void k4_rows(const bool q5, const int R, const uint8_t *const *w, const pi_block_q8_K *x, int64_t nb,
                    float *sums) {
    const size_t bsz = q5 ? sizeof(pi_block_q5_K) : sizeof(pi_block_q4_K);
    float32x4_t acc[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) acc[k] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        uint8x8_t sc[4], mn[4];
        int32x4_t isum[4];
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) k4_scales(w[k] + b * bsz + (q5 ? Q5K_SCALES : Q4K_SCALES), &sc[k], &mn[k]);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
            for (int k = 0; k < R; k++) {
                int8x16_t q[8];
                k4_unpack_half(q5, w[k] + b * bsz, h, q);
                const int32x4_t t = k4_half_idot(q, x[b].qs + 128 * h, k4_sc32(sc[k], h));
                isum[k] = h ? vaddq_s32(isum[k], t) : t;
            }
        const int16x8_t bs = q8K_bsums32(&x[b]);
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const uint8_t *p = w[k] + b * bsz;
            acc[k] = k4_acc(acc[k], isum[k], k4_imin(mn[k], bs), f16_scalar(p), f16_scalar(p + 2), x[b].d);
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) sums[k] = vaddvq_f32(acc[k]);
}

/* As k4_rows, for Q6_K rows. */
INLINE void q6_K_rows(const int R, const uint8_t *const *w, const pi_block_q8_K *x, int64_t nb, float *sums) {
    float32x4_t acc[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) acc[k] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        int32x4_t isum[4];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
            for (int k = 0; k < R; k++) {
                const uint8_t *p = w[k] + b * sizeof(pi_block_q6_K);
                int8x16_t q[8];
                k6_unpack_half(p, h, q);
                const int8x8_t sc = vld1_s8((const int8_t *)p + Q6K_SCALES + 8 * h);
                const int32x4_t t = k6_half_idot(q, x[b].qs + 128 * h, sc);
                isum[k] = h ? vaddq_s32(isum[k], t) : t;
            }
#pragma GCC unroll 4
        for (int k = 0; k < R; k++)
            acc[k] = vfmaq_n_f32(acc[k], vcvtq_f32_s32(isum[k]),
                                 f16_scalar(w[k] + b * sizeof(pi_block_q6_K) + Q6K_D) * x[b].d);
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) sums[k] = vaddvq_f32(acc[k]);
}

INLINE void q4_K_rows(const int R, const uint8_t *const *w, const pi_block_q8_K *x, int64_t nb, float *sums) {
    k4_rows(false, R, w, x, nb, sums);
}
INLINE void q5_K_rows(const int R, const uint8_t *const *w, const pi_block_q8_K *x, int64_t nb, float *sums) {
    k4_rows(true, R, w, x, nb, sums);
}

/* vec_dot, vec_dot_rows and matvec of a K-quant row kernel (R = 1 for a
   lone row, so vec_dot_rows gives vec_dot's bits). */
#define NEON_K_KERNELS(tn, rows_fn)                                                                       \
    static float pi_vec_dot_##tn##_q8_K_neon(int64_t n, const void *w, const void *x) {                   \
        const uint8_t *wr[1] = {w};                                                                       \
        float s;                                                                                          \
        rows_fn(1, wr, x, n / PI_QK_K, &s);                                                               \
        return s;                                                                                         \
    }                                                                                                     \
    static void pi_vec_dot_rows_##tn##_q8_K_neon(int64_t n, const void *const *rows, int64_t count,       \
                                                 const void *x, float *out) {                             \
        NEON_ROWS(rows_fn, n, rows, count, x, out, PI_QK_K);                                              \
    }                                                                                                     \
    static void pi_matvec_##tn##_q8_K_neon(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, \
                                           const void *x, float *y) {                                     \
        NEON_MATVEC(rows_fn, n, W, stride, r0, r1, x, y, PI_QK_K);                                        \
    }

NEON_K_KERNELS(q4_K, q4_K_rows)
NEON_K_KERNELS(q5_K, q5_K_rows)
NEON_K_KERNELS(q6_K, q6_K_rows)

/* s[k * T + t] = the dot over nb super-blocks of row k (R rows stride bytes
   apart, of type ty: Q4_K, Q5_K or Q6_K) with input t (Q8_K, xs bytes
   apart): each half of a row's block is unpacked once for all T inputs,
   each input's block read by all R rows. */
INLINE void k_tile(pi_type ty, const int R, const int T, const uint8_t *w, size_t stride, const pi_block_q8_K *x,
                   size_t xs, int64_t nb, float *s) {
    const bool q6 = ty == PI_TYPE_Q6_K, q5 = ty == PI_TYPE_Q5_K;
    const size_t bsz = q6 ? sizeof(pi_block_q6_K) : q5 ? sizeof(pi_block_q5_K) : sizeof(pi_block_q4_K);
    float32x4_t acc[4][2];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) acc[k][t] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const pi_block_q8_K *xb[2];
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) xb[t] = (const pi_block_q8_K *)((const uint8_t *)x + t * xs) + b;
        uint8x8_t sc[4], mn[4];
        if (!q6)
#pragma GCC unroll 4
            for (int k = 0; k < R; k++) k4_scales(w + k * stride + b * bsz + (q5 ? Q5K_SCALES : Q4K_SCALES), &sc[k], &mn[k]);
        int32x4_t isum[4][2];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
            for (int k = 0; k < R; k++) {
                const uint8_t *p = w + k * stride + b * bsz;
                int8x16_t q[8];
                int32x4_t tt[2];
                if (q6) {
                    k6_unpack_half(p, h, q);
                    const int8x8_t sc6 = vld1_s8((const int8_t *)p + Q6K_SCALES + 8 * h);
#pragma GCC unroll 2
                    for (int t = 0; t < T; t++) tt[t] = k6_half_idot(q, xb[t]->qs + 128 * h, sc6);
                } else {
                    k4_unpack_half(q5, p, h, q);
                    const int32x4_t sc32 = k4_sc32(sc[k], h);
#pragma GCC unroll 2
                    for (int t = 0; t < T; t++) tt[t] = k4_half_idot(q, xb[t]->qs + 128 * h, sc32);
                }
#pragma GCC unroll 2
                for (int t = 0; t < T; t++) isum[k][t] = h ? vaddq_s32(isum[k][t], tt[t]) : tt[t];
            }
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const uint8_t *p = w + k * stride + b * bsz;
#pragma GCC unroll 2
            for (int t = 0; t < T; t++) {
                if (q6)
                    acc[k][t] = vfmaq_n_f32(acc[k][t], vcvtq_f32_s32(isum[k][t]), f16_scalar(p + Q6K_D) * xb[t]->d);
                else
                    acc[k][t] = k4_acc(acc[k][t], isum[k][t], k4_imin(mn[k], q8K_bsums32(xb[t])), f16_scalar(p),
                                       f16_scalar(p + 2), xb[t]->d);
            }
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) s[k * T + t] = vaddvq_f32(acc[k][t]);
}

/* Chunk by chunk (PI_MM_CHUNK elements: 8 super-blocks), tiles of 4 rows x
   2 inputs, as quant_matmul. */
INLINE void k_matmul(pi_type ty, int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                     size_t xs, int64_t nb, float *Y, int64_t ys) {
    enum { CB = PI_MM_CHUNK / PI_QK_K };
    const size_t bsz = ty == PI_TYPE_Q4_K   ? sizeof(pi_block_q4_K)
                       : ty == PI_TYPE_Q5_K ? sizeof(pi_block_q5_K)
                                            : sizeof(pi_block_q6_K);
    const int64_t nblk = n / PI_QK_K;
    for (int64_t c0 = 0; c0 == 0 || c0 < nblk; c0 += CB) {
        const int64_t cb = nblk - c0 < CB ? nblk - c0 : CB;
        const uint8_t *wc = (const uint8_t *)W + c0 * bsz;
        for (int64_t b = 0; b < nb;) {
            const int T = nb - b >= 2 ? 2 : 1;
            const pi_block_q8_K *xc = (const pi_block_q8_K *)((const uint8_t *)X + (size_t)b * xs) + c0;
            for (int64_t r = r0; r < r1;) {
                const int R = r1 - r >= 4 ? 4 : 1;
                const uint8_t *wr = wc + (size_t)r * stride;
                float s[8];
                if (R == 4 && T == 2) k_tile(ty, 4, 2, wr, stride, xc, xs, cb, s);
                else if (R == 4) k_tile(ty, 4, 1, wr, stride, xc, xs, cb, s);
                else if (T == 2) k_tile(ty, 1, 2, wr, stride, xc, xs, cb, s);
                else k_tile(ty, 1, 1, wr, stride, xc, xs, cb, s);
                for (int k = 0; k < R; k++)
                    for (int t = 0; t < T; t++) pi_mm_put(Y + (b + t) * ys + r + k, s[k * T + t], c0 == 0);
                r += R;
            }
            b += T;
        }
    }
}

static void pi_matmul_q4_K_q8_K_neon(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,
                                     const void *X, size_t xs, int64_t nb, float *Y, int64_t ys) {
    k_matmul(PI_TYPE_Q4_K, n, W, stride, r0, r1, X, xs, nb, Y, ys);
}
static void pi_matmul_q5_K_q8_K_neon(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,
                                     const void *X, size_t xs, int64_t nb, float *Y, int64_t ys) {
    k_matmul(PI_TYPE_Q5_K, n, W, stride, r0, r1, X, xs, nb, Y, ys);
}
static void pi_matmul_q6_K_q8_K_neon(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,
                                     const void *X, size_t xs, int64_t nb, float *Y, int64_t ys) {
    k_matmul(PI_TYPE_Q6_K, n, W, stride, r0, r1, X, xs, nb, Y, ys);
}

/* y[0..16) += a * (d1 * u - m1) for 16 unsigned weights u: d1 * u is exact,
   so the fused d1 * u - m1 is ref's dequantized weight, which then goes into
   y with one fused multiply-add. */
INLINE void k_axpy16_u(uint8x16_t u, float d1, float m1, float a, float *y) {
    const uint16x8_t h0 = vmovl_u8(vget_low_u8(u)), h1 = vmovl_high_u8(u);
    const uint32x4_t v[4] = {vmovl_u16(vget_low_u16(h0)), vmovl_high_u16(h0), vmovl_u16(vget_low_u16(h1)),
                             vmovl_high_u16(h1)};
    const float32x4_t nm = vdupq_n_f32(-m1);
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        const float32x4_t wv = vfmaq_n_f32(nm, vcvtq_f32_u32(v[i]), d1);
        vst1q_f32(y + 4 * i, vfmaq_n_f32(vld1q_f32(y + 4 * i), wv, a));
    }
}

/* y += a * w for a Q4_K (q5 false) or Q5_K row: per sub-block d1 = d * sc
   and m1 = dmin * m, exact in float as in ref. */
INLINE void k4_axpy(const bool q5, int64_t n, float a, const uint8_t *w, float *y) {
    const size_t bsz = q5 ? sizeof(pi_block_q5_K) : sizeof(pi_block_q4_K);
    for (int64_t b = 0; b < n / PI_QK_K; b++, y += PI_QK_K) {
        const uint8_t *p = w + b * bsz;
        const float d = f16_scalar(p), dmin = f16_scalar(p + 2);
        uint8x8_t sc8, mn8;
        k4_scales(p + (q5 ? Q5K_SCALES : Q4K_SCALES), &sc8, &mn8);
        uint8_t sc[8], mn[8];
        vst1_u8(sc, sc8);
        vst1_u8(mn, mn8);
        for (int h = 0; h < 2; h++) {
            int8x16_t q[8];
            k4_unpack_half(q5, p, h, q);
            for (int j = 0; j < 4; j++) {
                const float d1 = d * (float)sc[4 * h + j], m1 = dmin * (float)mn[4 * h + j];
                k_axpy16_u(vreinterpretq_u8_s8(q[2 * j]), d1, m1, a, y + 128 * h + 32 * j);
                k_axpy16_u(vreinterpretq_u8_s8(q[2 * j + 1]), d1, m1, a, y + 128 * h + 32 * j + 16);
            }
        }
    }
}

static void pi_axpy_q4_K_neon(int64_t n, float a, const void *w, float *y) { k4_axpy(false, n, a, w, y); }
static void pi_axpy_q5_K_neon(int64_t n, float a, const void *w, float *y) { k4_axpy(true, n, a, w, y); }

/* y += a * w for a Q6_K row: w = (d * scales[k]) * (q - 32), every product
   exact, as in ref. */
static void pi_axpy_q6_K_neon(int64_t n, float a, const void *vw, float *y) {
    const uint8_t *w = vw;
    for (int64_t b = 0; b < n / PI_QK_K; b++, y += PI_QK_K) {
        const uint8_t *p = w + b * sizeof(pi_block_q6_K);
        const float d = f16_scalar(p + Q6K_D);
        for (int h = 0; h < 2; h++) {
            int8x16_t q[8];
            k6_unpack_half(p, h, q);
            for (int k = 0; k < 8; k++) {
                const float ds = d * (float)(int8_t)p[Q6K_SCALES + 8 * h + k];
                const int16x8_t h0 = vmovl_s8(vget_low_s8(q[k])), h1 = vmovl_high_s8(q[k]);
                const int32x4_t v[4] = {vmovl_s16(vget_low_s16(h0)), vmovl_high_s16(h0), vmovl_s16(vget_low_s16(h1)),
                                        vmovl_high_s16(h1)};
                float *yk = y + 128 * h + 16 * k;
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++) {
                    const float32x4_t wv = vmulq_n_f32(vcvtq_f32_s32(v[i]), ds);
                    vst1q_f32(yk + 4 * i, vfmaq_n_f32(vld1q_f32(yk + 4 * i), wv, a));
                }
            }
        }
    }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* ------------------------------------------------------------- softmax */

/* exp(x): x = n ln 2 + r, |r| <= ln 2 / 2, exp(r) by Cephes' polynomial,
   2^n built in the exponent field; x below -87.3 gives 0 (x held there so
   that n stays a normal exponent), x up to 88.7 is exact to a few ulp. A
   NaN stays NaN (vmaxq passes it). */
INLINE float32x4_t exp_f32x4(float32x4_t x) {
    const float32x4_t lo = vdupq_n_f32(-87.3365448f);
    const uint32x4_t under = vcltq_f32(x, lo);
    x = vmaxq_f32(x, lo);
    const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    const float32x4_t y = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(vmulq_f32(y, vreinterpretq_f32_s32(e))), under));
}

static void pi_softmax_neon(float *x, int64_t n) {
    float32x4_t mv = vdupq_n_f32(x[0]);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) mv = vmaxq_f32(mv, vld1q_f32(x + i));
    float m = vmaxvq_f32(mv);
    for (; i < n; i++) m = x[i] > m || x[i] != x[i] ? x[i] : m;
    const float32x4_t mm = vdupq_n_f32(m);
    float64x2_t s0 = vdupq_n_f64(0.0), s1 = vdupq_n_f64(0.0);
    for (i = 0; i + 4 <= n; i += 4) {
        const float32x4_t e = exp_f32x4(vsubq_f32(vld1q_f32(x + i), mm));
        vst1q_f32(x + i, e);
        s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(e)));
        s1 = vaddq_f64(s1, vcvt_high_f64_f32(e));
    }
    if (i < n) { /* the last n % 4 through a vector padded with -inf, whose exp is 0 */
        float t[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        memcpy(t, x + i, (size_t)(n - i) * sizeof(float));
        const float32x4_t e = exp_f32x4(vsubq_f32(vld1q_f32(t), mm));
        vst1q_f32(t, e);
        memcpy(x + i, t, (size_t)(n - i) * sizeof(float));
        s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(e)));
        s1 = vaddq_f64(s1, vcvt_high_f64_f32(e));
    }
    const float inv = (float)(1.0 / vaddvq_f64(vaddq_f64(s0, s1)));
    for (i = 0; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), inv));
    for (; i < n; i++) x[i] *= inv;
}

const pi_kernels pi_kernels_neon = {
    .name = "neon",
    .quantize_q8_0 = pi_quantize_q8_0_neon,
    .quantize_q8_K = pi_quantize_q8_K_neon,
    .softmax = pi_softmax_neon,
    .vec_dot =
        {
            [PI_TYPE_F32] = pi_vec_dot_f32_neon,
            [PI_TYPE_F16] = pi_vec_dot_f16_neon,
            [PI_TYPE_BF16] = pi_vec_dot_bf16_neon,
            [PI_TYPE_Q8_0] = pi_vec_dot_q8_0_q8_0_neon,
            [PI_TYPE_Q4_0] = pi_vec_dot_q4_0_q8_0_neon,
            [PI_TYPE_Q4_K] = pi_vec_dot_q4_K_q8_K_neon,
            [PI_TYPE_Q5_K] = pi_vec_dot_q5_K_q8_K_neon,
            [PI_TYPE_Q6_K] = pi_vec_dot_q6_K_q8_K_neon,
        },
    .vec_dot_rows =
        {
            [PI_TYPE_F32] = pi_vec_dot_rows_f32_neon,
            [PI_TYPE_F16] = pi_vec_dot_rows_f16_neon,
            [PI_TYPE_BF16] = pi_vec_dot_rows_bf16_neon,
            [PI_TYPE_Q8_0] = pi_vec_dot_rows_q8_0_q8_0_neon,
            [PI_TYPE_Q4_0] = pi_vec_dot_rows_q4_0_q8_0_neon,
            [PI_TYPE_Q4_K] = pi_vec_dot_rows_q4_K_q8_K_neon,
            [PI_TYPE_Q5_K] = pi_vec_dot_rows_q5_K_q8_K_neon,
            [PI_TYPE_Q6_K] = pi_vec_dot_rows_q6_K_q8_K_neon,
        },
    .axpy =
        {
            [PI_TYPE_F32] = pi_axpy_f32_neon,
            [PI_TYPE_F16] = pi_axpy_f16_neon,
            [PI_TYPE_BF16] = pi_axpy_bf16_neon,
            [PI_TYPE_Q8_0] = pi_axpy_q8_0_neon,
            [PI_TYPE_Q4_0] = pi_axpy_q4_0_neon,
            [PI_TYPE_Q4_K] = pi_axpy_q4_K_neon,
            [PI_TYPE_Q5_K] = pi_axpy_q5_K_neon,
            [PI_TYPE_Q6_K] = pi_axpy_q6_K_neon,
        },
    .axpy_rows = PI_AXPY_ROWS_TABLE(neon),
    .matvec =
        {
            [PI_TYPE_F32] = pi_matvec_f32_neon,
            [PI_TYPE_F16] = pi_matvec_f16_neon,
            [PI_TYPE_BF16] = pi_matvec_bf16_neon,
            [PI_TYPE_Q8_0] = pi_matvec_q8_0_q8_0_neon,
            [PI_TYPE_Q4_0] = pi_matvec_q4_0_q8_0_neon,
            [PI_TYPE_Q4_K] = pi_matvec_q4_K_q8_K_neon,
            [PI_TYPE_Q5_K] = pi_matvec_q5_K_q8_K_neon,
            [PI_TYPE_Q6_K] = pi_matvec_q6_K_q8_K_neon,
        },
    .matmul =
        {
            [PI_TYPE_F32] = pi_matmul_f32_neon,
            [PI_TYPE_F16] = pi_matmul_f16_neon,
            [PI_TYPE_BF16] = pi_matmul_bf16_neon,
            [PI_TYPE_Q8_0] = pi_matmul_q8_0_q8_0_neon,
            [PI_TYPE_Q4_0] = pi_matmul_q4_0_q8_0_neon,
            [PI_TYPE_Q4_K] = pi_matmul_q4_K_q8_K_neon,
            [PI_TYPE_Q5_K] = pi_matmul_q5_K_q8_K_neon,
            [PI_TYPE_Q6_K] = pi_matmul_q6_K_q8_K_neon,
        },
    PI_LQ_TABLE_SLOTS(neon),
};
