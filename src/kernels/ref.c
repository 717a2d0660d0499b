/*
 * ref.c — the scalar specification of every kernel, always built.
 *
 * What the SIMD tables must reproduce:
 *   - pi_quantize_row / pi_dequantize_row for F32, F16, BF16, Q8_0, Q4_0 (ggml's
 *     reference semantics, see quantize_block_q8_0 / quantize_block_q4_0 below);
 *     dequantize for Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K (layouts in types.h;
 *     their quantizers are in quant_k.c) and both directions for Q8_K;
 *   - quantize_q8_0 for activations: every table produces these exact bytes, so
 *     it uses only operations that SIMD units perform identically (max of |x|,
 *     one IEEE division, one reciprocal, one product, round-half-to-even);
 *   - quantize_q8_K for the K-quants' activations: ggml's bytes (see
 *     quantize_block_q8_K), which every table reproduces exactly;
 *   - vec_dot / vec_dot_rows / matvec / matmul: Q types sum d_w * d_x * (integer dot of the block) over
 *     blocks, Q4_1 / Q5_1 plus m * d_x * (the sum of the Q8_0 block's quants)
 *     for their offset m; K-quants sum, per super-block of 256, d_w * d_x * (sum over its
 *     sub-blocks of scale * integer dot) and, for Q4_K / Q5_K, subtract
 *     dmin * d_x * (sum over sub-blocks of min * the activation's bsums);
 *     F16/BF16 weights are widened to f32 and multiplied with the f32
 *     activation. This file accumulates in double so that it is as close to the
 *     exact value as is cheap; SIMD versions accumulate in float, which the tests
 *     bound relative to sum |w_i x_i|;
 *   - axpy: y[i] += a * w[i], with w[i] = d * q for Q types, computed as
 *     (a * d) * q in float (SIMD versions may fuse the multiply-add); for
 *     Q4_1, Q5_1 and the K-quants w[i] is the weight exactly as
 *     pi_dequantize_row gives it (d * q is exact in float, so a fused
 *     multiply-add computes the same w[i]), then y[i] += a * w[i];
 *   - axpy_rows: that axpy on each listed row whose coefficient is nonzero,
 *     in list order (the SIMD tables fuse each row's multiply-add, see
 *     axpy_rows.h).
 *
 * Non-finite inputs give unspecified (but memory-safe) results. Blocks are read
 * through their 2-byte-aligned structs, so rows may start at any even address
 * (as tensors in a GGUF file do); f32 data and Q8_K blocks (an f32 scale) must
 * be 4-byte aligned.
 */
#include "kernels.h"
#include "axpy_rows.h"
#include "ref_k.h"
#include "quant_k.h"

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

/* Q8_K, one block of 256 (ggml's activation quantizer for the K-quants):
   max is the element of largest magnitude (the first one on ties, sign kept),
   iscale = -127 / max, q = min(127, round-half-even(iscale * x)), d = 1 / iscale
   (so max itself maps to -127), bsums[k] = the sum of q[16k .. 16k+16). An
   all-zero block gives d = 0 and zeros. When |max| is so small (below about
   3.7e-37) that -127 / max overflows to infinity, every q is 0 and d = 1 / iscale
   a signed zero: what ggml's float-to-int rounding yields for infinite or NaN
   products there. */
static void quantize_block_q8_K(const float *x, pi_block_q8_K *y) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < PI_QK_K; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    if (amax == 0.0f) {
        memset(y, 0, sizeof *y);
        return;
    }
    const float iscale = -127.0f / max;
    if (isinf(iscale)) {
        memset(y, 0, sizeof *y);
        y->d = 1.0f / iscale;
        return;
    }
    for (int j = 0; j < PI_QK_K; j++) {
        /* |iscale * x| exceeds 127 by at most a rounding, so clamping before
           rounding (to [-128, 127], which also keeps the conversion defined for
           NaN inputs) gives what rounding then taking min(127, .) gives. */
        const float v = fminf(fmaxf(iscale * x[j], -128.0f), 127.0f);
        y->qs[j] = (int8_t)nearbyintf(v);
    }
    for (int k = 0; k < PI_QK_K / 16; k++) {
        int sum = 0;
        for (int j = 0; j < 16; j++) sum += y->qs[16 * k + j];
        y->bsums[k] = (int16_t)sum;
    }
    y->d = 1.0f / iscale;
}

/* ---- K-quant weights: unpacking (layouts in types.h) ---- */

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block. */
static inline void k_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* The 256 weights of a Q4_K block as integers 0..15, in order: the 64
   weights of sub-blocks 2i and 2i+1 are the low and then the high nibbles
   of qs[32i .. 32i+32). */
static void unpack_q4_K(const pi_block_q4_K *restrict b, uint8_t *restrict q) {
    for (int i = 0; i < 4; i++)
        for (int l = 0; l < 32; l++) {
            q[64 * i + l] = b->qs[32 * i + l] & 15;
            q[64 * i + 32 + l] = b->qs[32 * i + l] >> 4;
        }
}

/* The same for Q5_K, 0..31: weight l of sub-block j takes bit j of qh[l]
   as its fifth bit. */
static void unpack_q5_K(const pi_block_q5_K *restrict b, uint8_t *restrict q) {
    for (int i = 0; i < 4; i++)
        for (int l = 0; l < 32; l++) {
            q[64 * i + l] = (uint8_t)((b->qs[32 * i + l] & 15) | ((b->qh[l] >> (2 * i)) & 1) << 4);
            q[64 * i + 32 + l] = (uint8_t)((b->qs[32 * i + l] >> 4) | ((b->qh[l] >> (2 * i + 1)) & 1) << 4);
        }
}

/* The 256 weights of a Q6_K block as q - 32 (-32..31), in order, so that
   weights 16k .. 16k+16 have scale scales[k]. Each half of 128 weights: its
   ql bytes 0..31 give weights l (low nibble) and l+64 (high), bytes 32..63
   weights l+32 and l+96; bits 2c, 2c+1 of its qh byte l are the top bits of
   weight l + 32c. */
static void unpack_q6_K(const pi_block_q6_K *restrict b, int8_t *restrict q) {
    for (int h = 0; h < 2; h++) {
        const uint8_t *restrict ql = b->ql + 64 * h, *restrict qh = b->qh + 32 * h;
        int8_t *restrict o = q + 128 * h;
        for (int l = 0; l < 32; l++) {
            o[l] = (int8_t)(((ql[l] & 15) | (qh[l] & 3) << 4) - 32);
            o[l + 32] = (int8_t)(((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32);
            o[l + 64] = (int8_t)(((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32);
            o[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (qh[l] >> 6) << 4) - 32);
        }
    }
}

/* Dequantized weights of one Q4_K / Q5_K block (q from unpack_q4_K/_q5_K):
   per sub-block d1 = d * sc and m1 = dmin * m, both exact in float (an f16
   times a 6-bit integer), and w = d1 * q - m1, where d1 * q is exact too
   (at most 22 significant bits): one rounding, the same with or without a
   fused multiply-add. */
static void dequant_k4(pi_f16 d16, pi_f16 dmin16, const uint8_t *scales, const uint8_t q[PI_QK_K], float *y) {
    const float d = pi_f16_to_f32(d16), dmin = pi_f16_to_f32(dmin16);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        k_scale_min(scales, j, &sc, &m);
        const float d1 = d * (float)sc, m1 = dmin * (float)m;
        for (int l = 0; l < 32; l++) y[32 * j + l] = d1 * (float)q[32 * j + l] - m1;
    }
}

/* Dequantized weights of one Q6_K block: w = (d * scales[k]) * (q - 32), all
   exact in float (an f16 times an int8 has at most 18 significant bits, times
   q - 32 at most 23). */
static void dequant_q6_K(const pi_block_q6_K *b, float *y) {
    int8_t q[PI_QK_K];
    unpack_q6_K(b, q);
    const float d = pi_f16_to_f32(b->d);
    for (int k = 0; k < PI_QK_K / 16; k++) {
        const float ds = d * (float)b->scales[k];
        for (int l = 0; l < 16; l++) y[16 * k + l] = ds * (float)q[16 * k + l];
    }
}

/* ---- Q4_1, Q5_0, Q5_1: unpacking (layouts in types.h) ---- */

/* The 32 nibbles of a block in weight order: low nibbles, then high. */
static inline void unpack_nibbles(const uint8_t qs[16], uint8_t q[32]) {
    for (int j = 0; j < 16; j++) {
        q[j] = qs[j] & 15;
        q[j + 16] = qs[j] >> 4;
    }
}

/* The 32 five-bit levels (0..31) of a Q5_0 / Q5_1 block: the nibble of
   weight j and bit j of the little-endian qh. */
static inline void unpack_q5(const uint8_t qs[16], const uint8_t qh[4], uint8_t q[32]) {
    unpack_nibbles(qs, q);
    for (int j = 0; j < 32; j++) q[j] |= (uint8_t)(((qh[j / 8] >> (j % 8)) & 1) << 4);
}

/* Block b of a Q4_1 or Q5_1 row: its levels, d and m. */
static void block_min_at(pi_type t, const void *row, int64_t b, uint8_t q[32], pi_f16 *d, pi_f16 *m) {
    if (t == PI_TYPE_Q4_1) {
        const pi_block_q4_1 *w = (const pi_block_q4_1 *)row + b;
        unpack_nibbles(w->qs, q);
        *d = w->d, *m = w->m;
    } else {
        const pi_block_q5_1 *w = (const pi_block_q5_1 *)row + b;
        unpack_q5(w->qs, w->qh, q);
        *d = w->d, *m = w->m;
    }
}

/* Dequantized weights of a block with levels q: d * q + offset (Q4_1 /
   Q5_1: offset m; Q5_0: q - 16 times d). d * q is exact in float (an f16
   times an integer below 32), so this is one rounding. */
static inline void dequant_dq_m(float d, float m, const uint8_t q[32], float *y) {
    for (int j = 0; j < 32; j++) y[j] = d * (float)q[j] + m;
}

static inline void dequant_q5_0(float d, const uint8_t q[32], float *y) {
    for (int j = 0; j < 32; j++) y[j] = d * (float)(q[j] - 16);
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
    case PI_TYPE_Q8_K: {
        pi_block_q8_K *y = vy;
        for (int64_t b = 0; b < n / PI_QK_K; b++) quantize_block_q8_K(x + b * PI_QK_K, &y[b]);
        break;
    }
    case PI_TYPE_Q4_1: pi_quantize_row_q4_1(x, vy, n); break;
    case PI_TYPE_Q5_0: pi_quantize_row_q5_0(x, vy, n); break;
    case PI_TYPE_Q5_1: pi_quantize_row_q5_1(x, vy, n); break;
    case PI_TYPE_Q4_K: pi_quantize_row_q4_K(x, vy, n); break;
    case PI_TYPE_Q5_K: pi_quantize_row_q5_K(x, vy, n); break;
    case PI_TYPE_Q6_K: pi_quantize_row_q6_K(x, vy, n); break;
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
    case PI_TYPE_Q4_1:
    case PI_TYPE_Q5_1: {
        uint8_t q[32];
        pi_f16 d, m;
        for (int64_t b = 0; b < n / 32; b++) {
            block_min_at(t, vx, b, q, &d, &m);
            dequant_dq_m(pi_f16_to_f32(d), pi_f16_to_f32(m), q, y + b * 32);
        }
        break;
    }
    case PI_TYPE_Q5_0: {
        const pi_block_q5_0 *x = vx;
        uint8_t q[32];
        for (int64_t b = 0; b < n / 32; b++) {
            unpack_q5(x[b].qs, x[b].qh, q);
            dequant_q5_0(pi_f16_to_f32(x[b].d), q, y + b * 32);
        }
        break;
    }
    case PI_TYPE_Q4_K: {
        const pi_block_q4_K *x = vx;
        uint8_t q[PI_QK_K];
        for (int64_t b = 0; b < n / PI_QK_K; b++) {
            unpack_q4_K(&x[b], q);
            dequant_k4(x[b].d, x[b].dmin, x[b].scales, q, y + b * PI_QK_K);
        }
        break;
    }
    case PI_TYPE_Q5_K: {
        const pi_block_q5_K *x = vx;
        uint8_t q[PI_QK_K];
        for (int64_t b = 0; b < n / PI_QK_K; b++) {
            unpack_q5_K(&x[b], q);
            dequant_k4(x[b].d, x[b].dmin, x[b].scales, q, y + b * PI_QK_K);
        }
        break;
    }
    case PI_TYPE_Q6_K: {
        const pi_block_q6_K *x = vx;
        for (int64_t b = 0; b < n / PI_QK_K; b++) dequant_q6_K(&x[b], y + b * PI_QK_K);
        break;
    }
    case PI_TYPE_Q8_K: {
        const pi_block_q8_K *x = vx;
        for (int64_t b = 0; b < n / PI_QK_K; b++)
            for (int j = 0; j < PI_QK_K; j++) y[b * PI_QK_K + j] = x[b].d * (float)x[b].qs[j];
        break;
    }
    default: break;
    }
}

static void pi_quantize_q8_0_ref(const float *x, pi_block_q8_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / PI_QK8_0; b++) quantize_block_q8_0(x + b * PI_QK8_0, &y[b]);
}

void pi_quantize_q8_K_ref(const float *x, pi_block_q8_K *y, int64_t n) {
    for (int64_t b = 0; b < n / PI_QK_K; b++) quantize_block_q8_K(x + b * PI_QK_K, &y[b]);
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

/* Q4_1, Q5_0, Q5_1 against Q8_0, per block: d_w * d_x * (integer dot of
   the levels); Q5_0's levels are q - 16; Q4_1 / Q5_1 add m * d_x * (the sum
   of the activation block's quants), their offset m times the block's sum. */

static inline int32_t idot32(const uint8_t q[32], int off, const int8_t *x) {
    int32_t s = 0;
    for (int j = 0; j < 32; j++) s += (q[j] - off) * x[j];
    return s;
}

static inline int32_t isum32(const int8_t *x) {
    int32_t s = 0;
    for (int j = 0; j < 32; j++) s += x[j];
    return s;
}

/* A Q4_1 / Q5_1 row against Q8_0: per block d_w * d_x * (integer dot of the
   levels) + m * d_x * (the sum of the activation block's quants). */
static float dot_min(pi_type t, int64_t n, const void *vw, const void *vx) {
    const pi_block_q8_0 *x = vx;
    uint8_t q[32];
    pi_f16 d, m;
    double s = 0.0;
    for (int64_t b = 0; b < n / 32; b++) {
        block_min_at(t, vw, b, q, &d, &m);
        const double dx = pi_f16_to_f32(x[b].d);
        s += (double)pi_f16_to_f32(d) * dx * idot32(q, 0, x[b].qs) + (double)pi_f16_to_f32(m) * dx * isum32(x[b].qs);
    }
    return (float)s;
}

static float pi_vec_dot_q4_1_q8_0_ref(int64_t n, const void *w, const void *x) {
    return dot_min(PI_TYPE_Q4_1, n, w, x);
}

static float pi_vec_dot_q5_1_q8_0_ref(int64_t n, const void *w, const void *x) {
    return dot_min(PI_TYPE_Q5_1, n, w, x);
}

static float pi_vec_dot_q5_0_q8_0_ref(int64_t n, const void *vw, const void *vx) {
    const pi_block_q5_0 *w = vw;
    const pi_block_q8_0 *x = vx;
    uint8_t q[32];
    double s = 0.0;
    for (int64_t b = 0; b < n / 32; b++) {
        unpack_q5(w[b].qs, w[b].qh, q);
        s += (double)pi_f16_to_f32(w[b].d) * pi_f16_to_f32(x[b].d) * idot32(q, 16, x[b].qs);
    }
    return (float)s;
}

/* K-quants, per super-block: the integer sum over sub-blocks of scale *
   (integer dot), times d_w * d_x; Q4_K / Q5_K subtract dmin * d_x times the
   integer sum over sub-blocks of min * (the activation's two bsums that
   cover it). The integer sums fit in int32 (at most 8 * 63 * 32 * 31 * 127
   for Q5_K, 16 * 128 * 16 * 32 * 127 for Q6_K). */

/* Shared by Q4_K and Q5_K once their weights are unpacked to q[256]. */
static double dot_k4_block(pi_f16 d16, pi_f16 dmin16, const uint8_t *scales, const uint8_t q[PI_QK_K],
                           const pi_block_q8_K *x) {
    int32_t isum = 0, imin = 0;
    for (int j = 0; j < 8; j++) {
        int sc, m;
        k_scale_min(scales, j, &sc, &m);
        int32_t idot = 0;
        for (int l = 0; l < 32; l++) idot += (int32_t)q[32 * j + l] * x->qs[32 * j + l];
        isum += sc * idot;
        imin += m * (x->bsums[2 * j] + x->bsums[2 * j + 1]);
    }
    const double dx = x->d;
    return (double)pi_f16_to_f32(d16) * dx * isum - (double)pi_f16_to_f32(dmin16) * dx * imin;
}

float pi_vec_dot_q4_K_q8_K_ref(int64_t n, const void *vw, const void *vx) {
    const pi_block_q4_K *w = vw;
    const pi_block_q8_K *x = vx;
    uint8_t q[PI_QK_K];
    double s = 0.0;
    for (int64_t b = 0; b < n / PI_QK_K; b++) {
        unpack_q4_K(&w[b], q);
        s += dot_k4_block(w[b].d, w[b].dmin, w[b].scales, q, &x[b]);
    }
    return (float)s;
}

float pi_vec_dot_q5_K_q8_K_ref(int64_t n, const void *vw, const void *vx) {
    const pi_block_q5_K *w = vw;
    const pi_block_q8_K *x = vx;
    uint8_t q[PI_QK_K];
    double s = 0.0;
    for (int64_t b = 0; b < n / PI_QK_K; b++) {
        unpack_q5_K(&w[b], q);
        s += dot_k4_block(w[b].d, w[b].dmin, w[b].scales, q, &x[b]);
    }
    return (float)s;
}

float pi_vec_dot_q6_K_q8_K_ref(int64_t n, const void *vw, const void *vx) {
    const pi_block_q6_K *w = vw;
    const pi_block_q8_K *x = vx;
    int8_t q[PI_QK_K];
    double s = 0.0;
    for (int64_t b = 0; b < n / PI_QK_K; b++) {
        unpack_q6_K(&w[b], q);
        int32_t isum = 0;
        for (int k = 0; k < PI_QK_K / 16; k++) {
            int32_t idot = 0;
            for (int l = 0; l < 16; l++) idot += (int32_t)q[16 * k + l] * x[b].qs[16 * k + l];
            isum += w[b].scales[k] * idot;
        }
        s += (double)pi_f16_to_f32(w[b].d) * x[b].d * isum;
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

/* Q5_0: as Q4_0, (a * d) * (q - 16). Q4_1 / Q5_1: y += a * w with w the
   dequantized weight, as the K-quants. */

static void pi_axpy_q5_0_ref(int64_t n, float a, const void *vw, float *y) {
    const pi_block_q5_0 *w = vw;
    uint8_t q[32];
    for (int64_t b = 0; b < n / 32; b++) {
        unpack_q5(w[b].qs, w[b].qh, q);
        const float ad = a * pi_f16_to_f32(w[b].d);
        for (int j = 0; j < 32; j++) y[b * 32 + j] += ad * (float)(q[j] - 16);
    }
}

/* A Q4_1 / Q5_1 row: y += a * w, w = d * q + m as dequantized. */
static void axpy_min(pi_type t, int64_t n, float a, const void *vw, float *y) {
    uint8_t q[32];
    float wd[32];
    pi_f16 d, m;
    for (int64_t b = 0; b < n / 32; b++) {
        block_min_at(t, vw, b, q, &d, &m);
        dequant_dq_m(pi_f16_to_f32(d), pi_f16_to_f32(m), q, wd);
        for (int j = 0; j < 32; j++) y[b * 32 + j] += a * wd[j];
    }
}

static void pi_axpy_q4_1_ref(int64_t n, float a, const void *w, float *y) { axpy_min(PI_TYPE_Q4_1, n, a, w, y); }
static void pi_axpy_q5_1_ref(int64_t n, float a, const void *w, float *y) { axpy_min(PI_TYPE_Q5_1, n, a, w, y); }

/* K-quants: y += a * w with w exactly the dequantized weight. */

void pi_axpy_q4_K_ref(int64_t n, float a, const void *vw, float *y) {
    const pi_block_q4_K *w = vw;
    uint8_t q[PI_QK_K];
    float wd[PI_QK_K];
    for (int64_t b = 0; b < n / PI_QK_K; b++) {
        unpack_q4_K(&w[b], q);
        dequant_k4(w[b].d, w[b].dmin, w[b].scales, q, wd);
        float *yb = y + b * PI_QK_K;
        for (int j = 0; j < PI_QK_K; j++) yb[j] += a * wd[j];
    }
}

void pi_axpy_q5_K_ref(int64_t n, float a, const void *vw, float *y) {
    const pi_block_q5_K *w = vw;
    uint8_t q[PI_QK_K];
    float wd[PI_QK_K];
    for (int64_t b = 0; b < n / PI_QK_K; b++) {
        unpack_q5_K(&w[b], q);
        dequant_k4(w[b].d, w[b].dmin, w[b].scales, q, wd);
        float *yb = y + b * PI_QK_K;
        for (int j = 0; j < PI_QK_K; j++) yb[j] += a * wd[j];
    }
}

void pi_axpy_q6_K_ref(int64_t n, float a, const void *vw, float *y) {
    const pi_block_q6_K *w = vw;
    float wd[PI_QK_K];
    for (int64_t b = 0; b < n / PI_QK_K; b++) {
        dequant_q6_K(&w[b], wd);
        float *yb = y + b * PI_QK_K;
        for (int j = 0; j < PI_QK_K; j++) yb[j] += a * wd[j];
    }
}

/* ---- matvec: one vec_dot per row (the macros define the function; its
   uses say whether it is static) ---- */

#define REF_MATVEC(name, dot)                                                                      \
    void name(int64_t n, const void *W, size_t row_stride, int64_t r0, int64_t r1,                 \
              const void *x, float *y) {                                                           \
        for (int64_t r = r0; r < r1; r++) y[r] = dot(n, (const uint8_t *)W + (size_t)r * row_stride, x); \
    }

static REF_MATVEC(pi_matvec_f32_ref, pi_vec_dot_f32_ref)
static REF_MATVEC(pi_matvec_f16_ref, pi_vec_dot_f16_ref)
static REF_MATVEC(pi_matvec_bf16_ref, pi_vec_dot_bf16_ref)
static REF_MATVEC(pi_matvec_q8_0_q8_0_ref, pi_vec_dot_q8_0_q8_0_ref)
static REF_MATVEC(pi_matvec_q4_0_q8_0_ref, pi_vec_dot_q4_0_q8_0_ref)
static REF_MATVEC(pi_matvec_q4_1_q8_0_ref, pi_vec_dot_q4_1_q8_0_ref)
static REF_MATVEC(pi_matvec_q5_0_q8_0_ref, pi_vec_dot_q5_0_q8_0_ref)
static REF_MATVEC(pi_matvec_q5_1_q8_0_ref, pi_vec_dot_q5_1_q8_0_ref)
REF_MATVEC(pi_matvec_q4_K_q8_K_ref, pi_vec_dot_q4_K_q8_K_ref)
REF_MATVEC(pi_matvec_q5_K_q8_K_ref, pi_vec_dot_q5_K_q8_K_ref)
REF_MATVEC(pi_matvec_q6_K_q8_K_ref, pi_vec_dot_q6_K_q8_K_ref)

/* ---- vec_dot_rows: one vec_dot per listed row ---- */

PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_f32_ref, pi_vec_dot_f32_ref)
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_f16_ref, pi_vec_dot_f16_ref)
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_bf16_ref, pi_vec_dot_bf16_ref)
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_q8_0_q8_0_ref, pi_vec_dot_q8_0_q8_0_ref)
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_q4_0_q8_0_ref, pi_vec_dot_q4_0_q8_0_ref)
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_q4_1_q8_0_ref, pi_vec_dot_q4_1_q8_0_ref)
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_q5_0_q8_0_ref, pi_vec_dot_q5_0_q8_0_ref)
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_q5_1_q8_0_ref, pi_vec_dot_q5_1_q8_0_ref)

/* the K-quant ones have external linkage (ref_k.h), so not the static
   PI_VEC_DOT_ROWS_LOOP */
#define REF_ROWS(name, dot)                                                                 \
    void name(int64_t n, const void *const *rows, int64_t count, const void *x, float *out) { \
        for (int64_t r = 0; r < count; r++) out[r] = dot(n, rows[r], x);                      \
    }

REF_ROWS(pi_vec_dot_rows_q4_K_q8_K_ref, pi_vec_dot_q4_K_q8_K_ref)
REF_ROWS(pi_vec_dot_rows_q5_K_q8_K_ref, pi_vec_dot_q5_K_q8_K_ref)
REF_ROWS(pi_vec_dot_rows_q6_K_q8_K_ref, pi_vec_dot_q6_K_q8_K_ref)

/* ---- matmul: one vec_dot per (input, row) ---- */

#define REF_MATMUL(name, dot)                                                                             \
    void name(int64_t n, const void *W, size_t row_stride, int64_t r0, int64_t r1, const void *X,         \
              size_t x_stride, int64_t nb, float *Y, int64_t y_stride) {                                  \
        for (int64_t b = 0; b < nb; b++)                                                                  \
            for (int64_t r = r0; r < r1; r++)                                                             \
                Y[b * y_stride + r] = dot(n, (const uint8_t *)W + (size_t)r * row_stride,                 \
                                          (const uint8_t *)X + (size_t)b * x_stride);                     \
    }

static REF_MATMUL(pi_matmul_f32_ref, pi_vec_dot_f32_ref)
static REF_MATMUL(pi_matmul_f16_ref, pi_vec_dot_f16_ref)
static REF_MATMUL(pi_matmul_bf16_ref, pi_vec_dot_bf16_ref)
static REF_MATMUL(pi_matmul_q8_0_q8_0_ref, pi_vec_dot_q8_0_q8_0_ref)
static REF_MATMUL(pi_matmul_q4_0_q8_0_ref, pi_vec_dot_q4_0_q8_0_ref)
static REF_MATMUL(pi_matmul_q4_1_q8_0_ref, pi_vec_dot_q4_1_q8_0_ref)
static REF_MATMUL(pi_matmul_q5_0_q8_0_ref, pi_vec_dot_q5_0_q8_0_ref)
static REF_MATMUL(pi_matmul_q5_1_q8_0_ref, pi_vec_dot_q5_1_q8_0_ref)
REF_MATMUL(pi_matmul_q4_K_q8_K_ref, pi_vec_dot_q4_K_q8_K_ref)
REF_MATMUL(pi_matmul_q5_K_q8_K_ref, pi_vec_dot_q5_K_q8_K_ref)
REF_MATMUL(pi_matmul_q6_K_q8_K_ref, pi_vec_dot_q6_K_q8_K_ref)

/* ---- axpy_rows: ref's axpy on each listed row with a nonzero coefficient,
   in list order ---- */

#define REF_AXPY_ROWS(name, axpy)                                                                    \
    static void name(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) { \
        for (int64_t k = 0; k < count; k++)                                                          \
            if (a[k] != 0.0f) axpy(n, a[k], rows[k], y);                                             \
    }

REF_AXPY_ROWS(pi_axpy_rows_f32_ref, pi_axpy_f32_ref)
REF_AXPY_ROWS(pi_axpy_rows_f16_ref, pi_axpy_f16_ref)
REF_AXPY_ROWS(pi_axpy_rows_bf16_ref, pi_axpy_bf16_ref)
REF_AXPY_ROWS(pi_axpy_rows_q8_0_ref, pi_axpy_q8_0_ref)
REF_AXPY_ROWS(pi_axpy_rows_q4_0_ref, pi_axpy_q4_0_ref)
REF_AXPY_ROWS(pi_axpy_rows_q4_K_ref, pi_axpy_q4_K_ref)
REF_AXPY_ROWS(pi_axpy_rows_q5_K_ref, pi_axpy_q5_K_ref)
REF_AXPY_ROWS(pi_axpy_rows_q6_K_ref, pi_axpy_q6_K_ref)
REF_AXPY_ROWS(pi_axpy_rows_q4_1_ref, pi_axpy_q4_1_ref)
REF_AXPY_ROWS(pi_axpy_rows_q5_0_ref, pi_axpy_q5_0_ref)
REF_AXPY_ROWS(pi_axpy_rows_q5_1_ref, pi_axpy_q5_1_ref)

static void pi_softmax_ref(float *x, int64_t n) {
    float mx = x[0];
    for (int64_t i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

const pi_kernels pi_kernels_ref = {
    .name = "ref",
    .quantize_q8_0 = pi_quantize_q8_0_ref,
    .quantize_q8_K = pi_quantize_q8_K_ref,
    .softmax = pi_softmax_ref,
    .vec_dot =
        {
            [PI_TYPE_F32] = pi_vec_dot_f32_ref,
            [PI_TYPE_F16] = pi_vec_dot_f16_ref,
            [PI_TYPE_BF16] = pi_vec_dot_bf16_ref,
            [PI_TYPE_Q8_0] = pi_vec_dot_q8_0_q8_0_ref,
            [PI_TYPE_Q4_0] = pi_vec_dot_q4_0_q8_0_ref,
            [PI_TYPE_Q4_K] = pi_vec_dot_q4_K_q8_K_ref,
            [PI_TYPE_Q5_K] = pi_vec_dot_q5_K_q8_K_ref,
            [PI_TYPE_Q6_K] = pi_vec_dot_q6_K_q8_K_ref,
            [PI_TYPE_Q4_1] = pi_vec_dot_q4_1_q8_0_ref,
            [PI_TYPE_Q5_0] = pi_vec_dot_q5_0_q8_0_ref,
            [PI_TYPE_Q5_1] = pi_vec_dot_q5_1_q8_0_ref,
        },
    .vec_dot_rows =
        {
            [PI_TYPE_F32] = pi_vec_dot_rows_f32_ref,
            [PI_TYPE_F16] = pi_vec_dot_rows_f16_ref,
            [PI_TYPE_BF16] = pi_vec_dot_rows_bf16_ref,
            [PI_TYPE_Q8_0] = pi_vec_dot_rows_q8_0_q8_0_ref,
            [PI_TYPE_Q4_0] = pi_vec_dot_rows_q4_0_q8_0_ref,
            [PI_TYPE_Q4_K] = pi_vec_dot_rows_q4_K_q8_K_ref,
            [PI_TYPE_Q5_K] = pi_vec_dot_rows_q5_K_q8_K_ref,
            [PI_TYPE_Q6_K] = pi_vec_dot_rows_q6_K_q8_K_ref,
            [PI_TYPE_Q4_1] = pi_vec_dot_rows_q4_1_q8_0_ref,
            [PI_TYPE_Q5_0] = pi_vec_dot_rows_q5_0_q8_0_ref,
            [PI_TYPE_Q5_1] = pi_vec_dot_rows_q5_1_q8_0_ref,
        },
    .axpy =
        {
            [PI_TYPE_F32] = pi_axpy_f32_ref,
            [PI_TYPE_F16] = pi_axpy_f16_ref,
            [PI_TYPE_BF16] = pi_axpy_bf16_ref,
            [PI_TYPE_Q8_0] = pi_axpy_q8_0_ref,
            [PI_TYPE_Q4_0] = pi_axpy_q4_0_ref,
            [PI_TYPE_Q4_K] = pi_axpy_q4_K_ref,
            [PI_TYPE_Q5_K] = pi_axpy_q5_K_ref,
            [PI_TYPE_Q6_K] = pi_axpy_q6_K_ref,
            [PI_TYPE_Q4_1] = pi_axpy_q4_1_ref,
            [PI_TYPE_Q5_0] = pi_axpy_q5_0_ref,
            [PI_TYPE_Q5_1] = pi_axpy_q5_1_ref,
        },
    .axpy_rows = PI_AXPY_ROWS_TABLE(ref),
    .matvec =
        {
            [PI_TYPE_F32] = pi_matvec_f32_ref,
            [PI_TYPE_F16] = pi_matvec_f16_ref,
            [PI_TYPE_BF16] = pi_matvec_bf16_ref,
            [PI_TYPE_Q8_0] = pi_matvec_q8_0_q8_0_ref,
            [PI_TYPE_Q4_0] = pi_matvec_q4_0_q8_0_ref,
            [PI_TYPE_Q4_K] = pi_matvec_q4_K_q8_K_ref,
            [PI_TYPE_Q5_K] = pi_matvec_q5_K_q8_K_ref,
            [PI_TYPE_Q6_K] = pi_matvec_q6_K_q8_K_ref,
            [PI_TYPE_Q4_1] = pi_matvec_q4_1_q8_0_ref,
            [PI_TYPE_Q5_0] = pi_matvec_q5_0_q8_0_ref,
            [PI_TYPE_Q5_1] = pi_matvec_q5_1_q8_0_ref,
        },
    .matmul =
        {
            [PI_TYPE_F32] = pi_matmul_f32_ref,
            [PI_TYPE_F16] = pi_matmul_f16_ref,
            [PI_TYPE_BF16] = pi_matmul_bf16_ref,
            [PI_TYPE_Q8_0] = pi_matmul_q8_0_q8_0_ref,
            [PI_TYPE_Q4_0] = pi_matmul_q4_0_q8_0_ref,
            [PI_TYPE_Q4_K] = pi_matmul_q4_K_q8_K_ref,
            [PI_TYPE_Q5_K] = pi_matmul_q5_K_q8_K_ref,
            [PI_TYPE_Q6_K] = pi_matmul_q6_K_q8_K_ref,
            [PI_TYPE_Q4_1] = pi_matmul_q4_1_q8_0_ref,
            [PI_TYPE_Q5_0] = pi_matmul_q5_0_q8_0_ref,
            [PI_TYPE_Q5_1] = pi_matmul_q5_1_q8_0_ref,
        },
};
