/*
 * quant_k.c — quantizers for Q4_K, Q5_K and Q6_K, and for their fallbacks
 * Q4_1, Q5_0 and Q5_1, that write the same bytes as ggml's reference
 * quantizers (what llama-quantize writes when it has no importance matrix).
 *
 * Byte identity rests on computing every float the same way: each sum is
 * accumulated in float, in index order, with the operands grouped as written
 * below (w * l * l is (w * l) * l, s * L + m - x is ((s * L) + m) - x); every
 * integer operand is converted to float first; rounding to an integer is
 * round-half-to-even through the 1.5 * 2^23 bias (round_even), as ggml does;
 * scales go through f16 with pi_f32_to_f16 (round-to-nearest-even, ggml's
 * conversion). ggml's quantizers are compiled for x86-64 without FMA, so no
 * multiply-add is ever fused there; this file must not fuse either, which the
 * pragmas below enforce whatever the -std or -ffp-contract setting (gcc fuses
 * by default in GNU modes on targets with FMA, e.g. aarch64). The file is
 * built without ISA flags. x87 arithmetic (FLT_EVAL_METHOD != 0) would not
 * give identical bytes; every supported target uses SSE/NEON floats.
 *
 * Non-finite inputs give unspecified blocks but are memory-safe: every
 * quantized level is clamped to its range before it is stored or used, and
 * round_even never traps.
 */
#include "quant_k.h"

#include <float.h>
#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

/* Round to the nearest integer, ties to even, for |v| <= 2^22: adding
   1.5 * 2^23 leaves the integer plus 2^22 in the low 23 bits of the sum.
   Outside that range (or for NaN) the result is some int in
   [-2^22, 2^22), the same one ggml computes. */
static inline int round_even(float v) {
    const float biased = v + 12582912.0f;
    uint32_t bits;
    memcpy(&bits, &biased, sizeof bits);
    return (int)(bits & 0x007fffffu) - 0x00400000;
}

static inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Below this magnitude a group counts as all zero. */
#define GROUP_EPS 1e-15f

/*
 * Asymmetric fit of n values to levels 0..nmax with weights w: x ~ scale * L +
 * offset, offset <= 0. Starts from the levels that span [min(x, 0), max(x)],
 * then tries nstep+1 other level counts, (rmin + rdelta * is + nmax) over the
 * span from the best offset so far to max(x), each followed by the weighted
 * least-squares scale and offset for its levels; keeps whichever has the
 * smallest weighted squared error. Levels go to L, -offset to *neg_min;
 * returns the scale. laux is scratch of n bytes.
 */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min,
                           uint8_t *laux, float rmin, float rdelta, int nstep) {
    float lo = x[0], hi = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0) lo = 0;
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *neg_min = -lo;
        return 0.0f;
    }
    float inv = (float)nmax / (hi - lo);
    float scale = 1 / inv;
    float best_err = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clamp_int(round_even(inv * (x[i] - lo)), 0, nmax);
        float diff = scale * (float)L[i] + lo - x[i];
        diff = diff * diff;
        best_err += w[i] * diff;
    }
    /* lo is replaced by each better offset found: later trials span and round
       from the current best offset, not from min(x, 0) */
    for (int is = 0; is <= nstep; is++) {
        inv = (rmin + rdelta * (float)is + (float)nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(round_even(inv * (x[i] - lo)), 0, nmax);
            laux[i] = (uint8_t)l;
            const float fl = (float)l;
            sum_l += w[i] * fl;
            sum_l2 += w[i] * fl * fl;
            sum_xl += w[i] * fl * x[i];
        }
        const float det = sum_w * sum_l2 - sum_l * sum_l;
        if (!(det > 0)) continue;
        float s = (sum_w * sum_xl - sum_x * sum_l) / det;
        float m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
        if (m > 0) { /* the offset may only lower the values: refit the scale alone */
            m = 0;
            s = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float diff = s * (float)laux[i] + m - x[i];
            diff = diff * diff;
            err += w[i] * diff;
        }
        if (err < best_err) {
            memcpy(L, laux, (size_t)n);
            best_err = err;
            scale = s;
            lo = m;
        }
    }
    *neg_min = -lo;
    return scale;
}

/*
 * Symmetric fit of n values to levels -nmax..nmax-1 (stored as 0..2nmax-1),
 * weighted by x^2: the value of largest magnitude maps to -nmax, then 18 other
 * level counts nmax + 0.1 * is (is = -9..9, not 0) are tried, each with its
 * least-squares scale; keeps the one with the largest sumlx^2 / suml2 (the
 * smallest weighted error). Returns the scale (0 for an all-zero group).
 */
static float fit_scale_sym(int n, int nmax, const float *x, int8_t *L) {
    float amax = 0, vmax = 0;
    for (int i = 0; i < n; i++) {
        const float a = fabsf(x[i]);
        if (a > amax) {
            amax = a;
            vmax = x[i];
        }
    }
    if (amax < GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float inv = (float)-nmax / vmax;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clamp_int(round_even(inv * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i], fl = (float)l;
        sumlx += w * x[i] * fl;
        suml2 += w * fl * fl;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        inv = -((float)nmax + 0.1f * (float)is) / vmax;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(round_even(inv * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i], fl = (float)l;
            sumlx += w * x[i] * fl;
            suml2 += w * fl * fl;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) L[i] = (int8_t)(clamp_int(round_even(inv * x[i]), -nmax, nmax - 1) + nmax);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/*
 * The common part of Q4_K and Q5_K for one super-block of 256: each of the 8
 * sub-blocks of 32 is fitted (weights sqrt(mean x^2) + |x|), the sub-block
 * scales and mins are quantized to 6 bits against the largest of each, packed
 * into scales[12] as types.h describes, and the levels are recomputed against
 * the 6-bit scales as they dequantize. Levels (0..nmax) go to L.
 */
static void quantize_super_asym(const float *x, int nmax, float rmin, float rdelta, int nstep, pi_f16 *d_out,
                                pi_f16 *dmin_out, uint8_t scales_out[PI_K_SCALE_SIZE], uint8_t L[PI_QK_K]) {
    float sub_scale[PI_QK_K / 32], sub_min[PI_QK_K / 32];
    float w[32];
    uint8_t laux[32];
    float max_scale = 0, max_min = 0; /* both are >= 0: the min is subtracted */
    for (int j = 0; j < PI_QK_K / 32; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        const float rms = sqrtf(sum_x2 / 32.0f);
        for (int l = 0; l < 32; l++) w[l] = rms + fabsf(xs[l]);
        sub_scale[j] = fit_scale_min(32, nmax, xs, w, L + 32 * j, &sub_min[j], laux, rmin, rdelta, nstep);
        if (sub_scale[j] > max_scale) max_scale = sub_scale[j];
        if (sub_min[j] > max_min) max_min = sub_min[j];
    }

    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    uint8_t sc6[PI_QK_K / 32], m6[PI_QK_K / 32];
    for (int j = 0; j < PI_QK_K / 32; j++) {
        /* the level is taken modulo 256 before the cap, as a uint8_t store does */
        const uint8_t ls = (uint8_t)round_even(inv_scale * sub_scale[j]);
        const uint8_t lm = (uint8_t)round_even(inv_min * sub_min[j]);
        sc6[j] = ls < 63 ? ls : 63;
        m6[j] = lm < 63 ? lm : 63;
    }
    for (int j = 0; j < 4; j++) {
        scales_out[j] = (uint8_t)(sc6[j] | (sc6[j + 4] >> 4) << 6);
        scales_out[j + 4] = (uint8_t)(m6[j] | (m6[j + 4] >> 4) << 6);
        scales_out[j + 8] = (uint8_t)((sc6[j + 4] & 15) | (m6[j + 4] & 15) << 4);
    }
    *d_out = pi_f32_to_f16(max_scale / 63.0f);
    *dmin_out = pi_f32_to_f16(max_min / 63.0f);

    const float d_all = pi_f16_to_f32(*d_out), dmin_all = pi_f16_to_f32(*dmin_out);
    for (int j = 0; j < PI_QK_K / 32; j++) {
        const float d = d_all * (float)sc6[j];
        if (d == 0) continue; /* keep the fitted levels */
        const float dm = dmin_all * (float)m6[j];
        for (int l = 0; l < 32; l++) L[32 * j + l] = (uint8_t)clamp_int(round_even((x[32 * j + l] + dm) / d), 0, nmax);
    }
}

void pi_quantize_row_q4_K(const float *x, pi_block_q4_K *y, int64_t n) {
    uint8_t L[PI_QK_K];
    for (int64_t b = 0; b < n / PI_QK_K; b++, x += PI_QK_K) {
        pi_block_q4_K *blk = &y[b];
        quantize_super_asym(x, 15, -1.0f, 0.1f, 20, &blk->d, &blk->dmin, blk->scales, L);
        /* sub-blocks 2i and 2i+1 share bytes 32i..32i+31: low and high nibble */
        for (int i = 0; i < PI_QK_K / 64; i++)
            for (int l = 0; l < 32; l++) blk->qs[32 * i + l] = (uint8_t)(L[64 * i + l] | L[64 * i + 32 + l] << 4);
    }
}

void pi_quantize_row_q5_K(const float *x, pi_block_q5_K *y, int64_t n) {
    uint8_t L[PI_QK_K];
    for (int64_t b = 0; b < n / PI_QK_K; b++, x += PI_QK_K) {
        pi_block_q5_K *blk = &y[b];
        quantize_super_asym(x, 31, -0.5f, 0.1f, 15, &blk->d, &blk->dmin, blk->scales, L);
        /* low four bits as in Q4_K; bit 4 of sub-block s goes to bit s of qh[l] */
        memset(blk->qh, 0, sizeof blk->qh);
        for (int i = 0; i < PI_QK_K / 64; i++) {
            for (int l = 0; l < 32; l++) {
                const uint8_t lo = L[64 * i + l], hi = L[64 * i + 32 + l];
                blk->qs[32 * i + l] = (uint8_t)((lo & 15) | (hi & 15) << 4);
                blk->qh[l] |= (uint8_t)(((lo >> 4) & 1) << (2 * i) | ((hi >> 4) & 1) << (2 * i + 1));
            }
        }
    }
}

void pi_quantize_row_q6_K(const float *x, pi_block_q6_K *y, int64_t n) {
    int8_t L[PI_QK_K];
    float sub_scale[PI_QK_K / 16];
    for (int64_t b = 0; b < n / PI_QK_K; b++, x += PI_QK_K) {
        pi_block_q6_K *blk = &y[b];
        float max_scale = 0, max_abs = 0; /* the scale of largest magnitude, sign kept */
        for (int j = 0; j < PI_QK_K / 16; j++) {
            sub_scale[j] = fit_scale_sym(16, 32, x + 16 * j, L + 16 * j);
            const float a = fabsf(sub_scale[j]);
            if (a > max_abs) {
                max_abs = a;
                max_scale = sub_scale[j];
            }
        }
        if (max_abs < GROUP_EPS) {
            memset(blk, 0, sizeof *blk); /* d = +0 */
            continue;
        }
        /* 8-bit sub-block scales: the largest maps to -128 */
        const float inv = -128.0f / max_scale;
        blk->d = pi_f32_to_f16(1 / inv);
        for (int j = 0; j < PI_QK_K / 16; j++) {
            int v = round_even(inv * sub_scale[j]);
            v = v < 127 ? v : 127;
            v &= 0xff; /* two's complement wrap into int8, as the int8_t store does on every target */
            blk->scales[j] = (int8_t)(v >= 128 ? v - 256 : v);
        }
        const float d_all = pi_f16_to_f32(blk->d);
        for (int j = 0; j < PI_QK_K / 16; j++) {
            const float d = d_all * (float)blk->scales[j];
            if (d == 0) continue; /* keep the fitted levels */
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (int8_t)(clamp_int(round_even(x[16 * j + l] / d), -32, 31) + 32);
        }
        /* each half of 128: ql low nibbles hold weights 0-63, high nibbles
           64-127; qh[l] holds bits 4-5 of weights l, l+32, l+64, l+96 */
        for (int h = 0; h < 2; h++) {
            const int8_t *Lh = L + 128 * h;
            uint8_t *ql = blk->ql + 64 * h, *qh = blk->qh + 32 * h;
            for (int l = 0; l < 32; l++) {
                const uint8_t q0 = (uint8_t)Lh[l], q1 = (uint8_t)Lh[l + 32], q2 = (uint8_t)Lh[l + 64],
                              q3 = (uint8_t)Lh[l + 96];
                ql[l] = (uint8_t)((q0 & 15) | (q2 & 15) << 4);
                ql[l + 32] = (uint8_t)((q1 & 15) | (q3 & 15) << 4);
                qh[l] = (uint8_t)((q0 >> 4) | (q1 >> 4) << 2 | (q2 >> 4) << 4 | (q3 >> 4) << 6);
            }
        }
    }
}

/* ---- Q4_1, Q5_0, Q5_1: one block of 32 at a time ---- */

/* ggml turns each scaled value into a level with a plain (int8_t) or
   (uint8_t) cast. x86-64, where its files are made, converts through a
   32-bit truncation (INT_MIN for NaN and values out of int range) and keeps
   the low byte; this reproduces that as an int8 value for every input, so a
   finite block gives truncation toward zero and a degenerate one (a scale so
   small its reciprocal overflows) still gets ggml's bytes and stays
   memory-safe. */
static inline int trunc_i8(float v) {
    const int32_t t = v > -2147483648.0f && v < 2147483648.0f ? (int32_t)v : INT32_MIN;
    return (int8_t)(uint8_t)((uint32_t)t & 0xffu);
}

static inline int min_int(int a, int b) { return a < b ? a : b; }

/* The smallest and largest of a block of 32, as ggml scans them. */
static void block_min_max(const float *x, float *lo, float *hi) {
    float mn = FLT_MAX, mx = -FLT_MAX;
    for (int j = 0; j < 32; j++) {
        if (x[j] < mn) mn = x[j];
        if (x[j] > mx) mx = x[j];
    }
    *lo = mn;
    *hi = mx;
}

/* The element of largest magnitude, sign kept (the first one on ties). */
static float block_abs_max(const float *x) {
    float amax = 0.0f, m = 0.0f;
    for (int j = 0; j < 32; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            m = x[j];
        }
    return m;
}

/* Five-bit levels q[0..32) into nibbles (weight j low, j+16 high) and the
   little-endian 32-bit field of their fifth bits. */
static void pack_q5(const uint8_t q[32], uint8_t qs[16], uint8_t qh[4]) {
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
        h |= (uint32_t)((q[j] >> 4) & 1) << j | (uint32_t)((q[j + 16] >> 4) & 1) << (j + 16);
    }
    for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(h >> (8 * k));
}

/* Q4_1 / Q5_1, one block: d = (max - min) / nmax, m = min, level =
   trunc((x - min) / d + 0.5), capped at 15 for Q4_1 (Q5_1 has no cap: its
   levels cannot exceed 31 for finite blocks). */
static void quantize_block_min(const float *x, int nmax, pi_f16 *d16, pi_f16 *m16, uint8_t q[32]) {
    float lo, hi;
    block_min_max(x, &lo, &hi);
    const float d = (hi - lo) / (float)nmax;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    *d16 = pi_f32_to_f16(d);
    *m16 = pi_f32_to_f16(lo);
    for (int j = 0; j < 32; j++) {
        const int l = trunc_i8((x[j] - lo) * id + 0.5f);
        q[j] = (uint8_t)(nmax == 15 ? min_int(15, l) : l);
    }
}

void pi_quantize_row_q4_1(const float *x, pi_block_q4_1 *y, int64_t n) {
    uint8_t q[32];
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        quantize_block_min(x, 15, &y[b].d, &y[b].m, q);
        /* as ggml: the levels are combined unmasked */
        for (int j = 0; j < 16; j++) y[b].qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
    }
}

/* Q5_0: the element of largest magnitude m maps to -16, d = m / -16,
   level = min(31, trunc(x / d + 16.5)). */
void pi_quantize_row_q5_0(const float *x, pi_block_q5_0 *y, int64_t n) {
    uint8_t q[32];
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        const float d = block_abs_max(x) / -16.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = pi_f32_to_f16(d);
        for (int j = 0; j < 32; j++) q[j] = (uint8_t)min_int(31, trunc_i8(x[j] * id + 16.5f));
        pack_q5(q, y[b].qs, y[b].qh);
    }
}

void pi_quantize_row_q5_1(const float *x, pi_block_q5_1 *y, int64_t n) {
    uint8_t q[32];
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        quantize_block_min(x, 31, &y[b].d, &y[b].m, q);
        pack_q5(q, y[b].qs, y[b].qh);
    }
}
