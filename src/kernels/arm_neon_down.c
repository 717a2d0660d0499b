/*
 * arm_neon_down.c — the gathered axpy (axpy_rows, see kernels.h and
 * axpy_rows.h) of the "neon" table, compiled with the NEON table's flags.
 *
 * Q4_0, Q4_1, Q5_0, Q5_1 and the K-quants are added in integers (axpy_rows.h; their
 * sections below): each row's quants widened to 16 bits and added by
 * widening multiply-adds (vmlal) with its 16-bit coefficient. For the other
 * types a pass adds R rows (8, 4, 2 or 1) to y: y is walked in segments of
 * 16 or 32 floats held in registers, and each row's weights for the segment
 * are unpacked and added with one FMA (vfmaq) per vector, row after row, so
 * y is loaded and stored once per group of rows. Unpacking: F16 by vcvt,
 * BF16 by a widening shift; Q8_0 weights as signed bytes, widened twice and
 * converted. F32/F16/BF16 rows of any length: the last n % 4 elements
 * with scalar fmaf. NEON loads have no alignment requirement and stay
 * inside the row. No software prefetch, like the rest
 * of the NEON table (not measured on ARM hardware).
 */
#include "axpy_rows.h"
#include "simd_common.h"

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

INLINE float f16_at(const uint8_t *p) {
    __fp16 h;
    memcpy(&h, p, sizeof h);
    return (float)h;
}

/* The f16 values at p, p + bsz, .. of the next n blocks, at most 4,
   converted (absent ones 0): put together in a general register and moved
   to a vector whole (four scalar stores read back as one vector would miss
   store forwarding). */
INLINE uint64_t u16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return h;
}

INLINE float32x4_t f16x4_at(const uint8_t *p, size_t bsz, int n) {
    uint64_t v = 0;
    if (n >= 4) /* the common case without a loop */
        v = u16_at(p) | u16_at(p + bsz) << 16 | u16_at(p + 2 * bsz) << 32 | u16_at(p + 3 * bsz) << 48;
    else
        for (int t = 0; t < n; t++) v |= u16_at(p + (size_t)t * bsz) << (16 * t);
    return vcvt_f32_f16(vreinterpret_f16_u64(vcreate_u64(v)));
}

INLINE uint32_t u32_at(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* 16 signed / unsigned bytes as 4 float vectors, in order. */
INLINE void s8_to_f32(int8x16_t q, float32x4_t *f) {
    const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_high_s8(q);
    f[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
    f[1] = vcvtq_f32_s32(vmovl_high_s16(lo));
    f[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
    f[3] = vcvtq_f32_s32(vmovl_high_s16(hi));
}

INLINE void u8_to_f32(uint8x16_t q, float32x4_t *f) {
    const uint16x8_t lo = vmovl_u8(vget_low_u8(q)), hi = vmovl_high_u8(q);
    f[0] = vcvtq_f32_u32(vmovl_u16(vget_low_u16(lo)));
    f[1] = vcvtq_f32_u32(vmovl_high_u16(lo));
    f[2] = vcvtq_f32_u32(vmovl_u16(vget_low_u16(hi)));
    f[3] = vcvtq_f32_u32(vmovl_high_u16(hi));
}

/* ------------------------------------------------------- F32, F16, BF16 */

/* 4 weights from element i, widened to f32. */
INLINE float32x4_t fl_load4(pi_type t, const uint8_t *w, int64_t i) {
    switch (t) {
    case PI_TYPE_F16: return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)(w + 2 * i))));
    case PI_TYPE_BF16:
        return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)(const void *)(w + 2 * i)), 16));
    default: return vld1q_f32((const float *)(const void *)(w + 4 * i));
    }
}

INLINE float fl_scalar(pi_type t, const uint8_t *w, int64_t i) {
    switch (t) {
    case PI_TYPE_F16: return f16_at(w + 2 * i);
    case PI_TYPE_BF16: {
        uint16_t h;
        memcpy(&h, w + 2 * i, 2);
        return pi_bf16_to_f32(h);
    }
    default: {
        float f;
        memcpy(&f, w + 4 * i, 4);
        return f;
    }
    }
}

INLINE void fl_pass(pi_type t, const int R, const uint8_t *const *w, const float *c, int64_t n, float *y) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        float32x4_t acc[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) acc[j] = vld1q_f32(y + i + 4 * j);
#pragma GCC unroll 8
        for (int k = 0; k < R; k++)
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) acc[j] = vfmaq_n_f32(acc[j], fl_load4(t, w[k], i + 4 * j), c[k]);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) vst1q_f32(y + i + 4 * j, acc[j]);
    }
    for (; i + 4 <= n; i += 4) {
        float32x4_t acc = vld1q_f32(y + i);
#pragma GCC unroll 8
        for (int k = 0; k < R; k++) acc = vfmaq_n_f32(acc, fl_load4(t, w[k], i), c[k]);
        vst1q_f32(y + i, acc);
    }
    for (; i < n; i++) {
        float s = y[i];
#pragma GCC unroll 8
        for (int k = 0; k < R; k++) s = fmaf(c[k], fl_scalar(t, w[k], i), s);
        y[i] = s;
    }
}

#define FL_PASS(R, w, c, pf, t, n, y) fl_pass(t, R, w, c, n, y)

/* ------------------------------------------------------------------ Q8_0 */

/* Q8_0: nb blocks of R rows, a segment being a block of 32. */
INLINE void q8_pass(const int R, const uint8_t *const *w, const float *c, int64_t nb, float *y) {
    const size_t bsz = sizeof(pi_block_q8_0);
    for (int64_t b = 0; b < nb; b++, y += 32) {
        const size_t off = (size_t)b * bsz;
        float32x4_t acc[8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) acc[j] = vld1q_f32(y + 4 * j);
#pragma GCC unroll 8
        for (int k = 0; k < R; k++) {
            const uint8_t *p = w[k] + off;
            const float cd = c[k] * f16_at(p);
            const int8x16_t q[2] = {vld1q_s8((const int8_t *)(p + 2)), vld1q_s8((const int8_t *)(p + 18))};
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                float32x4_t f[4];
                s8_to_f32(q[h], f);
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) acc[4 * h + j] = vfmaq_n_f32(acc[4 * h + j], f[j], cd);
            }
        }
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) vst1q_f32(y + 4 * j, acc[j]);
    }
}

#define Q8_0_PASS(R, w, c, pf, nb, y) q8_pass(R, w, c, nb, y)

/* ------------------------------------- the integer passes' pieces */

/* acc[0..4) += k times the 16 unsigned bytes of q widened to 16 bits (the
   integer passes, axpy_rows.h). */
INLINE void mlal16(int32x4_t *acc, uint8x16_t q, int16_t k) {
    const int16x8_t lo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(q)));
    const int16x8_t hi = vreinterpretq_s16_u16(vmovl_high_u8(q));
    acc[0] = vmlal_n_s16(acc[0], vget_low_s16(lo), k);
    acc[1] = vmlal_high_n_s16(acc[1], lo, k);
    acc[2] = vmlal_n_s16(acc[2], vget_low_s16(hi), k);
    acc[3] = vmlal_high_n_s16(acc[3], hi, k);
}


/* pi_q4i_quant for 4 blocks at once, a lane each: from the m rows'
   coefficients cd[r], their 16-bit coefficients k[r] (0 where a lane's
   coefficient is not finite) and sum ksum, and the returned scales (NaN
   there). The same steps in vector form, the same bits: vcvtnq rounds half
   to even as rintf does. */
INLINE float32x4_t q4i_quant4(const float32x4_t *cd, int m, int32x4_t *k, int32x4_t *ksum) {
    uint32x4_t mb = vdupq_n_u32(0);
    for (int r = 0; r < m; r++) mb = vmaxq_u32(mb, vandq_u32(vreinterpretq_u32_f32(cd[r]), vdupq_n_u32(0x7fffffffu)));
    const int32x4_t E = vreinterpretq_s32_u32(vshrq_n_u32(mb, 23));
    const int32x4_t e = vminq_s32(vmaxq_s32(vsubq_s32(E, vdupq_n_s32(141)), vdupq_n_s32(-126)), vdupq_n_s32(113));
    const float32x4_t inv = vreinterpretq_f32_s32(vshlq_n_s32(vsubq_s32(vdupq_n_s32(127), e), 23));
    const uint32x4_t bad = vceqq_s32(E, vdupq_n_s32(255));
    const uint32x4_t s = vreinterpretq_u32_s32(vshlq_n_s32(vaddq_s32(vdupq_n_s32(127), e), 23));
    int32x4_t sum = vdupq_n_s32(0);
    for (int r = 0; r < m; r++) {
        int32x4_t v = vcvtnq_s32_f32(vmulq_f32(cd[r], inv));
        v = vminq_s32(vmaxq_s32(v, vdupq_n_s32(-PI_Q4I_KMAX)), vdupq_n_s32(PI_Q4I_KMAX));
        k[r] = vbslq_s32(bad, vdupq_n_s32(0), v);
        sum = vaddq_s32(sum, k[r]);
    }
    *ksum = sum;
    return vreinterpretq_f32_u32(vbslq_u32(bad, vdupq_n_u32(0x7fc00000u), s));
}

/* A group's coefficients for 4 blocks or sub-blocks (q4i_quant4), stored
   for the integer loops: k[r][t], sc[t], corr[t] = -o times the sum. */
typedef struct {
    int32_t k[PI_AXPY_ROWS_GROUP][4];
    float sc[4];
    int32_t corr[4];
} q4i_coefs4;

INLINE void q4i_coefs4_make(const float32x4_t *cd, int m, int o, q4i_coefs4 *q) {
    int32x4_t k[PI_AXPY_ROWS_GROUP], ksum;
    vst1q_f32(q->sc, q4i_quant4(cd, m, k, &ksum));
    for (int r = 0; r < m; r++) vst1q_s32(q->k[r], k[r]);
    vst1q_s32(q->corr, vmulq_n_s32(ksum, -o));
}

/* ------------------------------------------------------------ K-quants */

/* sm[0..8) = d * sc_j, sm[8..16) = -dmin * m_j for the 8 sub-blocks of a
   Q4_K / Q5_K block at p (exact products). */
INLINE void k4_scales(const uint8_t *p, float *sm) {
    const uint32_t u0 = u32_at(p + 4), u1 = u32_at(p + 8), u2 = u32_at(p + 12);
    const uint32_t s[4] = {u0 & 0x3f3f3f3f, (u2 & 0x0f0f0f0f) | ((u0 >> 6) & 0x03030303) << 4, u1 & 0x3f3f3f3f,
                           ((u2 >> 4) & 0x0f0f0f0f) | ((u1 >> 6) & 0x03030303) << 4};
    float32x4_t f[4];
    u8_to_f32(vreinterpretq_u8_u32(vld1q_u32(s)), f);
    const float d = f16_at(p), nm = -f16_at(p + 2);
    vst1q_f32(sm, vmulq_n_f32(f[0], d));
    vst1q_f32(sm + 4, vmulq_n_f32(f[1], d));
    vst1q_f32(sm + 8, vmulq_n_f32(f[2], nm));
    vst1q_f32(sm + 12, vmulq_n_f32(f[3], nm));
}



/* Q4_K (Q5 = 0) and Q5_K (Q5 = 1) in integers (axpy_rows.h): per super-block the rows' scales
   (k4_scales), the group's coefficients and mins' sums four sub-blocks at
   a time (q4i_quant4), then per sub-block each row's 32 nibbles widened to
   16 bits and added by vmlal into 8 int32 vectors. */
INLINE void q4k_int_pass(const int Q5, const int P, const uint8_t *const *w, const float *c, int64_t nsb, float *y) {
    const size_t bsz = Q5 ? sizeof(pi_block_q5_K) : sizeof(pi_block_q4_K), qs_off = Q5 ? 48 : 16;
    float sm[PI_AXPY_ROWS_GROUP][16];
    for (int64_t sb = 0; sb < nsb; sb++, y += PI_QK_K) {
        const size_t off = (size_t)sb * bsz;
        for (int r = 0; r < 2 * P; r++) k4_scales(w[r] + off, sm[r]);
        q4i_coefs4 qc;
        float nbs[4];
        for (int j = 0; j < 8; j++) {
            if (j % 4 == 0) { /* sub-blocks j .. j + 3 at once */
                float32x4_t cd[PI_AXPY_ROWS_GROUP], nbv = vdupq_n_f32(0.0f);
                for (int r = 0; r < 2 * P; r++) {
                    cd[r] = vmulq_n_f32(vld1q_f32(sm[r] + j), c[r]);
                    nbv = vfmaq_n_f32(nbv, vld1q_f32(sm[r] + 8 + j), c[r]);
                }
                q4i_coefs4_make(cd, 2 * P, 0, &qc);
                vst1q_f32(nbs, nbv);
            }
            const int8x16_t hsh = vdupq_n_s8((int8_t)(4 - j));
            const float nb = nbs[j % 4], sc = qc.sc[j % 4];
            int32x4_t acc[8];
            for (int e = 0; e < 8; e++) acc[e] = vdupq_n_s32(0);
#pragma GCC unroll 8
            for (int r = 0; r < 2 * P; r++) {
                const uint8_t *qs = w[r] + off + qs_off + 32 * (j / 2);
                const int16_t kr = (int16_t)qc.k[r][j % 4];
#pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    const uint8x16_t v = vld1q_u8(qs + 16 * h);
                    uint8x16_t q = j % 2 ? vshrq_n_u8(v, 4) : vandq_u8(v, vdupq_n_u8(0x0f));
                    if (Q5) /* bit j of qh[l] is bit 4 of weight l */
                        q = vorrq_u8(q, vandq_u8(vshlq_u8(vld1q_u8(w[r] + off + 16 + 16 * h), hsh), vdupq_n_u8(16)));
                    mlal16(acc + 4 * h, q, kr);
                }
            }
            float *ys = y + 32 * j;
#pragma GCC unroll 8
            for (int e = 0; e < 8; e++)
                vst1q_f32(ys + 4 * e,
                          vaddq_f32(vld1q_f32(ys + 4 * e), vfmaq_n_f32(vdupq_n_f32(nb), vcvtq_f32_s32(acc[e]), sc)));
        }
    }
}

#define Q4K_INT_PASS(P, w, c, pf, nsb, y) q4k_int_pass(0, P, w, c, nsb, y)
#define Q5K_INT_PASS(P, w, c, pf, nsb, y) q4k_int_pass(1, P, w, c, nsb, y)

/* Q6_K in integers (axpy_rows.h): per super-block the rows' d * scales[j];
   the group's coefficients four sub-blocks of 16 at a time (q4i_quant4);
   per sub-block each row's 16 quants assembled in bytes (unsigned),
   widened and added by vmlal into 4 int32 vectors, which start at -32
   times the coefficients' sum. Segment s: weights 32 s .. 32 s + 32 (half h = s / 4, quarter
   j = s % 4): ql bytes 64 h + 32 (j & 1), low nibbles for j < 2, high for
   j >= 2; qh bits 2 j, 2 j + 1 to bits 4, 5. */
INLINE void q6k_int_pass(const int P, const uint8_t *const *w, const float *c, int64_t nsb, float *y) {
    float ds[PI_AXPY_ROWS_GROUP][16];
    for (int64_t sb = 0; sb < nsb; sb++, y += PI_QK_K) {
        const size_t off = (size_t)sb * sizeof(pi_block_q6_K);
        for (int r = 0; r < 2 * P; r++) {
            const uint8_t *p = w[r] + off;
            float32x4_t f[4];
            s8_to_f32(vld1q_s8((const int8_t *)(p + 192)), f);
            const float d = f16_at(p + 208);
#pragma GCC unroll 4
            for (int e = 0; e < 4; e++) vst1q_f32(ds[r] + 4 * e, vmulq_n_f32(f[e], d));
        }
        q4i_coefs4 qc;
        for (int s = 0; s < 8; s++) {
            const int h = s / 4, j = s % 4;
            const int8x16_t lsh = vdupq_n_s8((int8_t)(-4 * (j >> 1))), hsh = vdupq_n_s8((int8_t)(4 - 2 * j));
            if (s % 2 == 0) { /* sub-blocks 2 s .. 2 s + 3 at once */
                float32x4_t cd[PI_AXPY_ROWS_GROUP];
                for (int r = 0; r < 2 * P; r++) cd[r] = vmulq_n_f32(vld1q_f32(ds[r] + 2 * s), c[r]);
                q4i_coefs4_make(cd, 2 * P, 32, &qc);
            }
#pragma GCC unroll 2
            for (int g = 0; g < 2; g++) {
                const int t = 2 * (s % 2) + g; /* the sub-block's lane */
                int32x4_t acc[4];
                for (int e = 0; e < 4; e++) acc[e] = vdupq_n_s32(qc.corr[t]);
                const float sc = qc.sc[t];
#pragma GCC unroll 8
                for (int r = 0; r < 2 * P; r++) {
                    const uint8_t *p = w[r] + off;
                    const uint8x16_t l = vld1q_u8(p + 64 * h + 32 * (j & 1) + 16 * g);
                    const uint8x16_t qh = vld1q_u8(p + 128 + 32 * h + 16 * g);
                    const uint8x16_t qv = vorrq_u8(vandq_u8(vshlq_u8(l, lsh), vdupq_n_u8(0x0f)),
                                                   vandq_u8(vshlq_u8(qh, hsh), vdupq_n_u8(0x30)));
                    mlal16(acc, qv, (int16_t)qc.k[r][t]);
                }
                float *ys = y + 32 * s + 16 * g;
#pragma GCC unroll 4
                for (int e = 0; e < 4; e++)
                    vst1q_f32(ys + 4 * e, vfmaq_n_f32(vld1q_f32(ys + 4 * e), vcvtq_f32_s32(acc[e]), sc));
            }
        }
    }
}

#define Q6_K_PASS(P, w, c, pf, nsb, y) q6k_int_pass(P, w, c, nsb, y)

/* ------------------------------------------- Q4_0, Q4_1, Q5_0, Q5_1 */

/* The blocks of 32 in integers (axpy_rows.h, pi_q32_*): the group's
   coefficients and mins' sums four blocks at a time (q4i_quant4), then per
   block each row's low and high nibbles (with Q5_0 / Q5_1 the fifth bit:
   qh's bytes spread over the lanes, tested against each lane's bit, ORed
   in as 16) widened and added by vmlal into 8 int32 vectors, which start at
   -o times the coefficients' sum (o the quants' offset). */
INLINE void q32_pass(pi_type T, const int P, const uint8_t *const *w, const float *c, int64_t nb, float *y) {
    static const uint8_t sel[2][16] = {{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
                                       {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3}};
    static const uint8_t bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const size_t bsz = pi_q32_bsz(T), qs = pi_q32_qs(T), qh = pi_q32_qh(T);
    const int mins = pi_q32_has_min(T);
    const uint8x16_t bv = vld1q_u8(bits), s0 = vld1q_u8(sel[0]), s1 = vld1q_u8(sel[1]);
    q4i_coefs4 qc;
    float nbb[4];
    for (int64_t b = 0; b < nb; b++, y += 32) {
        const size_t off = (size_t)b * bsz;
        if (b % 4 == 0) { /* blocks b .. b + 3 at once (absent ones: d = 0, lanes unused) */
            float32x4_t cd[PI_AXPY_ROWS_GROUP], nbv = vdupq_n_f32(0.0f);
            const int nbk = nb - b < 4 ? (int)(nb - b) : 4;
#pragma GCC unroll 8
            for (int r = 0; r < 2 * P; r++) {
                cd[r] = vmulq_n_f32(f16x4_at(w[r] + off, bsz, nbk), c[r]);
                if (mins) nbv = vfmaq_n_f32(nbv, f16x4_at(w[r] + off + 2, bsz, nbk), c[r]);
            }
            q4i_coefs4_make(cd, 2 * P, pi_q32_offset(T), &qc);
            vst1q_f32(nbb, nbv);
        }
        const int t = (int)(b % 4);
        const float sc = qc.sc[t], nbs = nbb[t];
        int32x4_t acc[8];
        for (int e = 0; e < 8; e++) acc[e] = vdupq_n_s32(qc.corr[t]);
#pragma GCC unroll 8
        for (int r = 0; r < 2 * P; r++) {
            const uint8_t *p = w[r] + off;
            const uint8x16_t v = vld1q_u8(p + qs);
            uint8x16_t q[2] = {vandq_u8(v, vdupq_n_u8(0x0f)), vshrq_n_u8(v, 4)};
            if (pi_q32_five(T)) {
                const uint8x16_t h = vreinterpretq_u8_u32(vdupq_n_u32(u32_at(p + qh)));
                q[0] = vorrq_u8(q[0], vandq_u8(vtstq_u8(vqtbl1q_u8(h, s0), bv), vdupq_n_u8(16)));
                q[1] = vorrq_u8(q[1], vandq_u8(vtstq_u8(vqtbl1q_u8(h, s1), bv), vdupq_n_u8(16)));
            }
            mlal16(acc, q[0], (int16_t)qc.k[r][t]);
            mlal16(acc + 4, q[1], (int16_t)qc.k[r][t]);
        }
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const float32x4_t f = vcvtq_f32_s32(acc[j]), yv = vld1q_f32(y + 4 * j);
            vst1q_f32(y + 4 * j, mins ? vaddq_f32(yv, vfmaq_n_f32(vdupq_n_f32(nbs), f, sc)) : vfmaq_n_f32(yv, f, sc));
        }
    }
}

#define Q4_0_PASS(P, w, c, pf, nb, y) q32_pass(PI_TYPE_Q4_0, P, w, c, nb, y)
#define Q4_1_PASS(P, w, c, pf, nb, y) q32_pass(PI_TYPE_Q4_1, P, w, c, nb, y)
#define Q5_0_PASS(P, w, c, pf, nb, y) q32_pass(PI_TYPE_Q5_0, P, w, c, nb, y)
#define Q5_1_PASS(P, w, c, pf, nb, y) q32_pass(PI_TYPE_Q5_1, P, w, c, nb, y)

/* ------------------------------------------------------------ entry points */

#define FLOAT_ROWS(tname, TYPE)                                                                               \
    void pi_axpy_rows_##tname##_neon(int64_t n, const float *a, const void *const *rows, int64_t count,      \
                                     float *y) {                                                              \
        PI_AXPY_ROWS_DRIVE(FL_PASS, a, rows, count, 0, TYPE, n, y);                                           \
    }

FLOAT_ROWS(f32, PI_TYPE_F32)
FLOAT_ROWS(f16, PI_TYPE_F16)
FLOAT_ROWS(bf16, PI_TYPE_BF16)

#define QUANT_ROWS(tname, PASS, blck)                                                                         \
    void pi_axpy_rows_##tname##_neon(int64_t n, const float *a, const void *const *rows, int64_t count,      \
                                     float *y) {                                                              \
        PI_AXPY_ROWS_DRIVE(PASS, a, rows, count, 0, n / (blck), y);                                           \
    }

QUANT_ROWS(q8_0, Q8_0_PASS, PI_QK8_0)

void pi_axpy_rows_q4_0_neon(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) {
    PI_AXPY_ROWS_DRIVE_PAIRS(Q4_0_PASS, a, rows, count, 0, n / PI_QK4_0, y);
}

void pi_axpy_rows_q4_K_neon(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) {
    PI_AXPY_ROWS_DRIVE_PAIRS(Q4K_INT_PASS, a, rows, count, 0, n / PI_QK_K, y);
}

void pi_axpy_rows_q5_K_neon(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) {
    PI_AXPY_ROWS_DRIVE_PAIRS(Q5K_INT_PASS, a, rows, count, 0, n / PI_QK_K, y);
}

void pi_axpy_rows_q6_K_neon(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) {
    PI_AXPY_ROWS_DRIVE_PAIRS(Q6_K_PASS, a, rows, count, 0, n / PI_QK_K, y);
}


void pi_axpy_rows_q4_1_neon(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) {
    PI_AXPY_ROWS_DRIVE_PAIRS(Q4_1_PASS, a, rows, count, 0, n / 32, y);
}

void pi_axpy_rows_q5_0_neon(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) {
    PI_AXPY_ROWS_DRIVE_PAIRS(Q5_0_PASS, a, rows, count, 0, n / 32, y);
}

void pi_axpy_rows_q5_1_neon(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) {
    PI_AXPY_ROWS_DRIVE_PAIRS(Q5_1_PASS, a, rows, count, 0, n / 32, y);
}
