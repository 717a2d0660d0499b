/*
 * x86_q4_1_q5.h — private to x86_avx2.c and x86_avx512.c: the kernels of the
 * Q4_1, Q5_0 and Q5_1 weights (llama.cpp's fallbacks for rows that are not
 * multiples of 256) against Q8_0 activations, in 256-bit vectors, and the
 * 256-bit helpers they share with x86_avx2.c. Each file includes this after
 * simd_common.h, so it is compiled with that file's flags (where
 * AVX512-VNNI with VL replaces the byte multiply and its pair sums by
 * vpdpbusd), and makes its kernels with LQ_KERNELS(isa, ...) and its table
 * slots with PI_LQ_TABLE_SLOTS(isa) (simd_common.h). Semantics are ref.c's.
 *
 * A block of 32 weights is one vector of 32 levels in weight order: the 16
 * nibble bytes shifted once give the low and the high nibbles; for Q5_0 and
 * Q5_1 one byte shuffle spreads the 32-bit qh so that byte j holds the byte
 * with bit j, and a mask test turns bit j into 16. Q4_1 / Q5_1 levels are
 * unsigned (0..31) and multiply the activation bytes directly; Q5_0's are
 * q - 16, signed, and go through the sign trick (|w| times x with w's sign).
 * No int16 pair sum can saturate (2 * 31 * 128 < 2^15). Per block the int32
 * lanes, converted, take d_w * d_x in one FMA; Q4_1 / Q5_1 add their offset
 * m * d_x times the lanes of the activation block's sum, made once per block
 * for all the rows of a call (ref: m * d_x * sum of the Q8_0 quants).
 *
 * Row kernels take a pointer per row and up to 4 rows, prefetching as the
 * Q8_0 ones do; vec_dot is the 1-row case, vec_dot_rows runs 4 rows of its
 * list at a time, so both give the same bits per row. The matmul takes tiles
 * of 4 rows x 2 inputs chunk by chunk (PI_MM_CHUNK), levels unpacked once
 * per row and block for both inputs.
 *
 * axpy: Q5_0 one FMA of a * d (rounded) with q - 16; Q4_1 / Q5_1 the weight
 * as fma(d, q, m) (d * q is exact, so it is pi_dequantize_row's value), then
 * one FMA of a with it. Their axpy_rows add in integers (axpy_rows.h,
 * x86_q4i.h).
 */
#ifndef PI_KERNELS_X86_Q4_1_Q5_H
#define PI_KERNELS_X86_Q4_1_Q5_H

#include <immintrin.h>
#include <string.h>

#define LQ_INLINE static inline __attribute__((always_inline))

/* An f16 scale at p (2-byte aligned) as 8 floats. */
LQ_INLINE __m256 f16_bcast(const void *p) {
    pi_f16 h;
    memcpy(&h, p, sizeof h);
    return _mm256_cvtph_ps(_mm_set1_epi16((short)h));
}

LQ_INLINE float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

LQ_INLINE size_t lq_bytes(pi_type t) {
    return t == PI_TYPE_Q4_1 ? sizeof(pi_block_q4_1) : t == PI_TYPE_Q5_0 ? sizeof(pi_block_q5_0) : sizeof(pi_block_q5_1);
}

/* Offset of qs in a block (qh lies in the 4 bytes before it, d at 0, m at 2). */
LQ_INLINE size_t lq_qs_off(pi_type t) { return t == PI_TYPE_Q4_1 ? 4 : t == PI_TYPE_Q5_0 ? 6 : 8; }

/* The int32 lanes of the products of unsigned bytes u and signed bytes s,
   summed in fours. */
LQ_INLINE __m256i lq_dot_us(__m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* The 32 levels of the block at p in weight order: Q4_1 0..15, Q5_1 0..31,
   Q5_0 q - 16 (-16..15). */
LQ_INLINE __m256i lq_levels(pi_type t, const uint8_t *p) {
    const __m128i qs = _mm_loadu_si128((const __m128i *)(p + lq_qs_off(t)));
    __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(qs, 4), qs), _mm256_set1_epi8(15));
    if (t != PI_TYPE_Q4_1) {
        uint32_t qh;
        memcpy(&qh, p + lq_qs_off(t) - 4, sizeof qh);
        /* byte j gets qh's byte j / 8, then bit j % 8 of it is tested */
        const __m256i spread = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL);
        const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
        const __m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), spread);
        const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit);
        q = _mm256_or_si256(q, _mm256_and_si256(set, _mm256_set1_epi8(16)));
        if (t == PI_TYPE_Q5_0) q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
    }
    return q;
}

/* s[k * T + t] = the dot over nb blocks of row w[k] (R rows) with input x[t]
   (T inputs); pf[k]: where row k's prefetches go, at the offsets read. */
LQ_INLINE void lq_tile(pi_type ty, const int R, const int T, const uint8_t *const *w, const uint8_t *const *pf,
                       const pi_block_q8_0 *const *x, int64_t nb, float *s) {
    const size_t bs = lq_bytes(ty);
    const bool has_m = ty != PI_TYPE_Q5_0;
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) acc[k][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i xq[2];
        __m256 dx[2], xsum[2];
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) {
            xq[t] = _mm256_loadu_si256((const __m256i *)x[t][b].qs);
            dx[t] = _mm256_set1_ps(_cvtsh_ss(x[t][b].d));
            if (has_m) xsum[t] = _mm256_cvtepi32_ps(lq_dot_us(_mm256_set1_epi8(1), xq[t]));
        }
        const size_t off = (size_t)b * bs;
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const uint8_t *p = w[k] + off;
            if (b % 2 == 0) prefetch_span(pf[k] + off, 2 * bs);
            const __m256i q = lq_levels(ty, p);
            const __m256i aq = ty == PI_TYPE_Q5_0 ? _mm256_abs_epi8(q) : q;
            const __m256 dw = f16_bcast(p);
            __m256 mw = _mm256_setzero_ps();
            if (has_m) mw = f16_bcast(p + 2);
#pragma GCC unroll 2
            for (int t = 0; t < T; t++) {
                const __m256i xs = ty == PI_TYPE_Q5_0 ? _mm256_sign_epi8(xq[t], q) : xq[t];
                const __m256 f = _mm256_cvtepi32_ps(lq_dot_us(aq, xs));
                acc[k][t] = _mm256_fmadd_ps(f, _mm256_mul_ps(dw, dx[t]), acc[k][t]);
                if (has_m) acc[k][t] = _mm256_fmadd_ps(xsum[t], _mm256_mul_ps(mw, dx[t]), acc[k][t]);
            }
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) s[k * T + t] = hsum256(acc[k][t]);
}

LQ_INLINE void lq_matvec(pi_type ty, int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *x,
                         float *y) {
    const pi_block_q8_0 *xs[1] = {x};
    const uint8_t *w[4], *pf[4];
    int64_t r = r0;
    for (; r < r1;) {
        const int R = r1 - r >= 4 ? 4 : 1;
        for (int k = 0; k < R; k++) {
            w[k] = (const uint8_t *)W + (size_t)(r + k) * stride;
            pf[k] = w[k] + (size_t)R * stride;
        }
        if (R == 4) lq_tile(ty, 4, 1, w, pf, xs, n / 32, y + r);
        else lq_tile(ty, 1, 1, w, pf, xs, n / 32, y + r);
        r += R;
    }
}

/* Chunk by chunk (PI_MM_CHUNK), tiles of 4 rows x 2 inputs. */
LQ_INLINE void lq_matmul(pi_type ty, int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                         size_t xstride, int64_t nb, float *Y, int64_t ys) {
    enum { CB = PI_MM_CHUNK / 32 };
    const size_t bs = lq_bytes(ty);
    const int64_t nblk = n / 32;
    for (int64_t c0 = 0; c0 == 0 || c0 < nblk; c0 += CB) {
        const int64_t cb = nblk - c0 < CB ? nblk - c0 : CB;
        for (int64_t b = 0; b < nb;) {
            const int T = nb - b >= 2 ? 2 : 1;
            const pi_block_q8_0 *xc[2];
            for (int t = 0; t < T; t++) xc[t] = (const pi_block_q8_0 *)((const uint8_t *)X + (size_t)(b + t) * xstride) + c0;
            for (int64_t r = r0; r < r1;) {
                const int R = r1 - r >= 4 ? 4 : 1;
                const uint8_t *w[4], *pf[4];
                for (int k = 0; k < R; k++) {
                    w[k] = (const uint8_t *)W + (size_t)(r + k) * stride + (size_t)c0 * bs;
                    pf[k] = w[k] + (size_t)R * stride;
                }
                float s[8];
                if (R == 4 && T == 2) lq_tile(ty, 4, 2, w, pf, xc, cb, s);
                else if (R == 4) lq_tile(ty, 4, 1, w, pf, xc, cb, s);
                else if (T == 2) lq_tile(ty, 1, 2, w, pf, xc, cb, s);
                else lq_tile(ty, 1, 1, w, pf, xc, cb, s);
                for (int k = 0; k < R; k++)
                    for (int t = 0; t < T; t++) pi_mm_put(Y + (b + t) * ys + r + k, s[k * T + t], c0 == 0);
                r += R;
            }
            b += T;
        }
    }
}

LQ_INLINE void lq_axpy(pi_type ty, int64_t n, float a, const void *vw, float *y) {
    const size_t bs = lq_bytes(ty);
    const __m256 va = _mm256_set1_ps(a);
    for (int64_t b = 0; b < n / 32; b++, y += 32) {
        const uint8_t *p = (const uint8_t *)vw + (size_t)b * bs;
        const __m256i q = lq_levels(ty, p);
        __m256 c = va, dw = va, mw = va;
        if (ty == PI_TYPE_Q5_0) {
            pi_f16 d; /* the row may be at any address (axpy_rows takes rows at odd ones) */
            memcpy(&d, p, sizeof d);
            c = _mm256_set1_ps(a * _cvtsh_ss(d));
        } else {
            dw = f16_bcast(p);
            mw = f16_bcast(p + 2);
        }
        for (int k = 0; k < 4; k++) {
            const __m128i part = k < 2 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
            const __m128i q8 = k & 1 ? _mm_srli_si128(part, 8) : part;
            const __m256 yv = _mm256_loadu_ps(y + 8 * k);
            if (ty == PI_TYPE_Q5_0) {
                _mm256_storeu_ps(y + 8 * k, _mm256_fmadd_ps(c, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)), yv));
            } else {
                const __m256 wv = _mm256_fmadd_ps(dw, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q8)), mw);
                _mm256_storeu_ps(y + 8 * k, _mm256_fmadd_ps(va, wv, yv));
            }
        }
    }
}

/* The kernels of one type (tname: q4_1, q5_0, q5_1) for table isa. */
#define LQ_KERNELS(isa, TYPE, tname)                                                                                 \
    static float pi_vec_dot_##tname##_q8_0_##isa(int64_t n, const void *w, const void *x) {                          \
        const uint8_t *wr[1] = {w}, *pf[1] = {wr[0] + PI_VEC_DOT_PF};                                                \
        const pi_block_q8_0 *xs[1] = {x};                                                                            \
        float s;                                                                                                     \
        prefetch_row_start(w, (size_t)(n / 32) * lq_bytes(TYPE));                                                    \
        lq_tile(TYPE, 1, 1, wr, pf, xs, n / 32, &s);                                                                 \
        return s;                                                                                                    \
    }                                                                                                                \
    LQ_INLINE void tname##_lq_rows_##isa(const int R, const uint8_t *const *w, const uint8_t *const *pf,             \
                                   const pi_block_q8_0 *const *xs, int64_t nb, float *sums) {                        \
        if (R == 4) lq_tile(TYPE, 4, 1, w, pf, xs, nb, sums);                                                        \
        else lq_tile(TYPE, 1, 1, w, pf, xs, nb, sums);                                                               \
    }                                                                                                                \
    /* 4 rows at a time with the next 4 prefetched: the same bits as vec_dot per row */                              \
    static void pi_vec_dot_rows_##tname##_q8_0_##isa(int64_t n, const void *const *rows, int64_t count,              \
                                                      const void *x, float *out) {                                   \
        if (count <= 0) return;                                                                                      \
        const pi_block_q8_0 *xs[1] = {x};                                                                            \
        pi_rows_prefetch_start(rows, count, (size_t)(n / 32) * lq_bytes(TYPE));                                      \
        PI_VEC_DOT_ROWS_GATHER(tname##_lq_rows_##isa, rows, count, out, xs, n / 32);                                 \
    }                                                                                                                \
    static void pi_matvec_##tname##_q8_0_##isa(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,      \
                                                const void *x, float *y) {                                           \
        lq_matvec(TYPE, n, W, stride, r0, r1, x, y);                                                                 \
    }                                                                                                                \
    static void pi_matmul_##tname##_q8_0_##isa(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,      \
                                                const void *X, size_t xs, int64_t nb, float *Y, int64_t ys) {        \
        lq_matmul(TYPE, n, W, stride, r0, r1, X, xs, nb, Y, ys);                                                     \
    }                                                                                                                \
    static void pi_axpy_##tname##_##isa(int64_t n, float a, const void *w, float *y) {                               \
        lq_axpy(TYPE, n, a, w, y);                                                                                   \
    }

#endif
