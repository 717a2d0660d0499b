/*
 * ref.c — the scalar specification of every kernel, always built.
 *
 * What the SIMD tables must reproduce:
 *   - pi_quantize_row / pi_dequantize_row for F32, F16, BF16, Q8_0, Q4_0 (ggml's
 *     reference semantics, see quantize_block_q8_0 / quantize_block_q4_0 below);
 *   - quantize_q8_0 for activations: every table produces these exact bytes, so
 *     it uses only operations that SIMD units perform identically (max of |x|,
 *     one IEEE division, one reciprocal, one product, round-half-to-even);
 *   - vec_dot / vec_dot_rows / matvec / matmul: Q types sum d_w * d_x * (integer dot of the block) over
 *     blocks, F16/BF16 weights are widened to f32 and multiplied with the f32
 *     activation. This file accumulates in double so that it is as close to the
 *     exact value as is cheap; SIMD versions accumulate in float, which the tests
 *     bound relative to sum |w_i x_i|;
 *   - axpy: y[i] += a * w[i], with w[i] = d * q for Q types, computed as
 *     (a * d) * q in float (SIMD versions may fuse the multiply-add).
 *
 * Non-finite inputs give unspecified (but memory-safe) results. Blocks are read
 * through their 2-byte-aligned structs, so rows may start at any even address
 * (as tensors in a GGUF file do); f32 data must be 4-byte aligned.
 */
#include "kernels.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* The reciprocal of a block scale. A scale below FLT_MIN (a block whose largest
   magnitude is ~1e-36 or less) counts as zero: its reciprocal could overflow to
   inf and x * inf would make the integer conversion undefined; such a scale
   rounds to 0 in f16 anyway, so the dequantized block is zero either way. The
   SIMD quantizers apply the same rule. */
static inline float recip_scale(float d) { return fabsf(d) >= FLT_MIN ? 1.0f / d : 0.0f; }

/* Q8_0, one block: d = amax / 127, q = round-half-even(x / d). */
static void quantize_block_q8_0(const float *x, pi_block_q8_0 *y) {
    float amax = 0.0f;
    for (int j = 0; j < PI_QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.0f;
    const float id = recip_scale(d);
    y->d = pi_f32_to_f16(d);
    /* nearbyintf rounds half to even in the default mode, exactly what the
       SIMD float->int conversions do; |x * id| <= 127 so the cast is exact. */
    for (int j = 0; j < PI_QK8_0; j++) y->qs[j] = (int8_t)nearbyintf(x[j] * id);
}

/* Q4_0, one block: the element of largest magnitude m (sign kept) maps to -8,
   d = m / -8, q = min(15, trunc(x / d + 8.5)). */
static void quantize_block_q4_0(const float *x, pi_block_q4_0 *y) {
    float amax = 0.0f, m = 0.0f;
    for (int j = 0; j < PI_QK4_0; j++) {
        if (amax < fabsf(x[j])) { /* first occurrence wins, as in ggml */
            amax = fabsf(x[j]);
            m = x[j];
        }
    }
    const float d = m / -8.0f;
    const float id = recip_scale(d);
    y->d = pi_f32_to_f16(d);
    for (int j = 0; j < PI_QK4_0 / 2; j++) {
        /* x * id lies in [-8, 8], so the sum is in [0.5, 16.5] and the cast is
           defined; only +8 (the negated extreme) would reach 16. */
        int lo = (int)(x[j] * id + 8.5f);
        int hi = (int)(x[j + PI_QK4_0 / 2] * id + 8.5f);
        lo = lo < 15 ? lo : 15;
        hi = hi < 15 ? hi : 15;
        y->qs[j] = (uint8_t)(lo | (hi << 4));
    }
}

void pi_quantize_row(pi_type t, const float *x, void *vy, int64_t n) {
    switch (t) {
    case PI_TYPE_F32: memcpy(vy, x, (size_t)n * sizeof(float)); break;
    case PI_TYPE_F16: {
        pi_f16 *y = vy;
        for (int64_t i = 0; i < n; i++) y[i] = pi_f32_to_f16(x[i]);
        break;
    }
    case PI_TYPE_BF16: {
        pi_bf16 *y = vy;
        for (int64_t i = 0; i < n; i++) y[i] = pi_f32_to_bf16(x[i]);
        break;
    }
    case PI_TYPE_Q8_0: {
        pi_block_q8_0 *y = vy;
        for (int64_t b = 0; b < n / PI_QK8_0; b++) quantize_block_q8_0(x + b * PI_QK8_0, &y[b]);
        break;
    }
    case PI_TYPE_Q4_0: {
        pi_block_q4_0 *y = vy;
        for (int64_t b = 0; b < n / PI_QK4_0; b++) quantize_block_q4_0(x + b * PI_QK4_0, &y[b]);
        break;
    }
    default: break;
    }
}

void pi_dequantize_row(pi_type t, const void *vx, float *y, int64_t n) {
    switch (t) {
    case PI_TYPE_F32: memcpy(y, vx, (size_t)n * sizeof(float)); break;
    case PI_TYPE_F16: {
        const pi_f16 *x = vx;
        for (int64_t i = 0; i < n; i++) y[i] = pi_f16_to_f32(x[i]);
        break;
    }
    case PI_TYPE_BF16: {
        const pi_bf16 *x = vx;
        for (int64_t i = 0; i < n; i++) y[i] = pi_bf16_to_f32(x[i]);
        break;
    }
    case PI_TYPE_Q8_0: {
        const pi_block_q8_0 *x = vx;
        for (int64_t b = 0; b < n / PI_QK8_0; b++) {
            const float d = pi_f16_to_f32(x[b].d);
            for (int j = 0; j < PI_QK8_0; j++) y[b * PI_QK8_0 + j] = d * (float)x[b].qs[j];
        }
        break;
    }
    case PI_TYPE_Q4_0: {
        const pi_block_q4_0 *x = vx;
        for (int64_t b = 0; b < n / PI_QK4_0; b++) {
            const float d = pi_f16_to_f32(x[b].d);
            float *yb = y + b * PI_QK4_0;
            for (int j = 0; j < PI_QK4_0 / 2; j++) {
                yb[j] = d * (float)((x[b].qs[j] & 0x0f) - 8);
                yb[j + PI_QK4_0 / 2] = d * (float)((x[b].qs[j] >> 4) - 8);
            }
        }
        break;
    }
    default: break;
    }
}

static void pi_quantize_q8_0_ref(const float *x, pi_block_q8_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / PI_QK8_0; b++) quantize_block_q8_0(x + b * PI_QK8_0, &y[b]);
}

/* ---- dot products (double accumulation: products of two floats are exact) ---- */

static float pi_vec_dot_f32_ref(int64_t n, const void *vw, const void *vx) {
    const float *w = vw, *x = vx;
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)w[i] * x[i];
    return (float)s;
}

static float pi_vec_dot_f16_ref(int64_t n, const void *vw, const void *vx) {
    const pi_f16 *w = vw;
    const float *x = vx;
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)pi_f16_to_f32(w[i]) * x[i];
    return (float)s;
}

static float pi_vec_dot_bf16_ref(int64_t n, const void *vw, const void *vx) {
    const pi_bf16 *w = vw;
    const float *x = vx;
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)pi_bf16_to_f32(w[i]) * x[i];
    return (float)s;
}

static float pi_vec_dot_q8_0_q8_0_ref(int64_t n, const void *vw, const void *vx) {
    const pi_block_q8_0 *w = vw, *x = vx;
    double s = 0.0;
    for (int64_t b = 0; b < n / PI_QK8_0; b++) {
        int32_t isum = 0;
        for (int j = 0; j < PI_QK8_0; j++) isum += (int32_t)w[b].qs[j] * x[b].qs[j];
        s += (double)pi_f16_to_f32(w[b].d) * pi_f16_to_f32(x[b].d) * isum;
    }
    return (float)s;
}

static float pi_vec_dot_q4_0_q8_0_ref(int64_t n, const void *vw, const void *vx) {
    const pi_block_q4_0 *w = vw;
    const pi_block_q8_0 *x = vx;
    double s = 0.0;
    for (int64_t b = 0; b < n / PI_QK4_0; b++) {
        int32_t isum = 0;
        for (int j = 0; j < PI_QK4_0 / 2; j++) {
            isum += ((w[b].qs[j] & 0x0f) - 8) * x[b].qs[j];
            isum += ((w[b].qs[j] >> 4) - 8) * x[b].qs[j + PI_QK4_0 / 2];
        }
        s += (double)pi_f16_to_f32(w[b].d) * pi_f16_to_f32(x[b].d) * isum;
    }
    return (float)s;
}

/* ---- axpy ---- */

static void pi_axpy_f32_ref(int64_t n, float a, const void *vw, float *y) {
    const float *w = vw;
    for (int64_t i = 0; i < n; i++) y[i] += a * w[i];
}

static void pi_axpy_f16_ref(int64_t n, float a, const void *vw, float *y) {
    const pi_f16 *w = vw;
    for (int64_t i = 0; i < n; i++) y[i] += a * pi_f16_to_f32(w[i]);
}

static void pi_axpy_bf16_ref(int64_t n, float a, const void *vw, float *y) {
    const pi_bf16 *w = vw;
    for (int64_t i = 0; i < n; i++) y[i] += a * pi_bf16_to_f32(w[i]);
}

static void pi_axpy_q8_0_ref(int64_t n, float a, const void *vw, float *y) {
    const pi_block_q8_0 *w = vw;
    for (int64_t b = 0; b < n / PI_QK8_0; b++) {
        const float ad = a * pi_f16_to_f32(w[b].d);
        float *yb = y + b * PI_QK8_0;
        for (int j = 0; j < PI_QK8_0; j++) yb[j] += ad * (float)w[b].qs[j];
    }
}

static void pi_axpy_q4_0_ref(int64_t n, float a, const void *vw, float *y) {
    const pi_block_q4_0 *w = vw;
    for (int64_t b = 0; b < n / PI_QK4_0; b++) {
        const float ad = a * pi_f16_to_f32(w[b].d);
        float *yb = y + b * PI_QK4_0;
        for (int j = 0; j < PI_QK4_0 / 2; j++) {
            yb[j] += ad * (float)((w[b].qs[j] & 0x0f) - 8);
            yb[j + PI_QK4_0 / 2] += ad * (float)((w[b].qs[j] >> 4) - 8);
        }
    }
}

/* ---- matvec: one vec_dot per row ---- */

#define REF_MATVEC(name, dot)                                                                      \
    static void name(int64_t n, const void *W, size_t row_stride, int64_t r0, int64_t r1,          \
                     const void *x, float *y) {                                                    \
        for (int64_t r = r0; r < r1; r++) y[r] = dot(n, (const uint8_t *)W + (size_t)r * row_stride, x); \
    }

REF_MATVEC(pi_matvec_f32_ref, pi_vec_dot_f32_ref)
REF_MATVEC(pi_matvec_f16_ref, pi_vec_dot_f16_ref)
REF_MATVEC(pi_matvec_bf16_ref, pi_vec_dot_bf16_ref)
REF_MATVEC(pi_matvec_q8_0_q8_0_ref, pi_vec_dot_q8_0_q8_0_ref)
REF_MATVEC(pi_matvec_q4_0_q8_0_ref, pi_vec_dot_q4_0_q8_0_ref)

/* ---- vec_dot_rows: one vec_dot per listed row ---- */

PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_f32_ref, pi_vec_dot_f32_ref)
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_f16_ref, pi_vec_dot_f16_ref)
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_bf16_ref, pi_vec_dot_bf16_ref)
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_q8_0_q8_0_ref, pi_vec_dot_q8_0_q8_0_ref)
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_q4_0_q8_0_ref, pi_vec_dot_q4_0_q8_0_ref)

/* ---- matmul: one vec_dot per (input, row) ---- */

#define REF_MATMUL(name, dot)                                                                             \
    static void name(int64_t n, const void *W, size_t row_stride, int64_t r0, int64_t r1, const void *X,  \
                     size_t x_stride, int64_t nb, float *Y, int64_t y_stride) {                           \
        for (int64_t b = 0; b < nb; b++)                                                                  \
            for (int64_t r = r0; r < r1; r++)                                                             \
                Y[b * y_stride + r] = dot(n, (const uint8_t *)W + (size_t)r * row_stride,                 \
                                          (const uint8_t *)X + (size_t)b * x_stride);                     \
    }

REF_MATMUL(pi_matmul_f32_ref, pi_vec_dot_f32_ref)
REF_MATMUL(pi_matmul_f16_ref, pi_vec_dot_f16_ref)
REF_MATMUL(pi_matmul_bf16_ref, pi_vec_dot_bf16_ref)
REF_MATMUL(pi_matmul_q8_0_q8_0_ref, pi_vec_dot_q8_0_q8_0_ref)
REF_MATMUL(pi_matmul_q4_0_q8_0_ref, pi_vec_dot_q4_0_q8_0_ref)

const pi_kernels pi_kernels_ref = {
    .name = "ref",
    .quantize_q8_0 = pi_quantize_q8_0_ref,
    .vec_dot =
        {
            [PI_TYPE_F32] = pi_vec_dot_f32_ref,
            [PI_TYPE_F16] = pi_vec_dot_f16_ref,
            [PI_TYPE_BF16] = pi_vec_dot_bf16_ref,
            [PI_TYPE_Q8_0] = pi_vec_dot_q8_0_q8_0_ref,
            [PI_TYPE_Q4_0] = pi_vec_dot_q4_0_q8_0_ref,
        },
    .vec_dot_rows =
        {
            [PI_TYPE_F32] = pi_vec_dot_rows_f32_ref,
            [PI_TYPE_F16] = pi_vec_dot_rows_f16_ref,
            [PI_TYPE_BF16] = pi_vec_dot_rows_bf16_ref,
            [PI_TYPE_Q8_0] = pi_vec_dot_rows_q8_0_q8_0_ref,
            [PI_TYPE_Q4_0] = pi_vec_dot_rows_q4_0_q8_0_ref,
        },
    .axpy =
        {
            [PI_TYPE_F32] = pi_axpy_f32_ref,
            [PI_TYPE_F16] = pi_axpy_f16_ref,
            [PI_TYPE_BF16] = pi_axpy_bf16_ref,
            [PI_TYPE_Q8_0] = pi_axpy_q8_0_ref,
            [PI_TYPE_Q4_0] = pi_axpy_q4_0_ref,
        },
    .matvec =
        {
            [PI_TYPE_F32] = pi_matvec_f32_ref,
            [PI_TYPE_F16] = pi_matvec_f16_ref,
            [PI_TYPE_BF16] = pi_matvec_bf16_ref,
            [PI_TYPE_Q8_0] = pi_matvec_q8_0_q8_0_ref,
            [PI_TYPE_Q4_0] = pi_matvec_q4_0_q8_0_ref,
        },
    .matmul =
        {
            [PI_TYPE_F32] = pi_matmul_f32_ref,
            [PI_TYPE_F16] = pi_matmul_f16_ref,
            [PI_TYPE_BF16] = pi_matmul_bf16_ref,
            [PI_TYPE_Q8_0] = pi_matmul_q8_0_q8_0_ref,
            [PI_TYPE_Q4_0] = pi_matmul_q4_0_q8_0_ref,
        },
};
