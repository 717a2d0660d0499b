/*
 * x86_q4i.h — private to x86_avx2_down.c and x86_avx512_down.c: the
 * integer coefficients of the Q4_0 / Q4_K / Q6_K gathered axpy
 * (axpy_rows.h, "Q4_0 in integers") for 8 blocks or sub-blocks at once,
 * Q6_K's quants in bytes, and the whole pass of Q4_1 / Q5_0 / Q5_1, in
 * 256-bit vectors, compiled with each file's flags.
 */
#ifndef PI_KERNELS_X86_Q4I_H
#define PI_KERNELS_X86_Q4I_H

#include "axpy_rows.h"

#include <immintrin.h>
#include <string.h>

/* From the float coefficients cd[0 .. 2P) of 2P rows for 8 blocks (a lane
   each): kp[p * kstride + t], rows 2p and 2p + 1's 16-bit coefficients of
   block t packed in one 32-bit lane (the first in the low half); sc[t], the
   block's scale 2^e (NaN where a coefficient is not finite). Returns the
   blocks' sums of the coefficients. */
static inline __m256i pi_q4i_coefs8(const int P, const __m256 *cd, int32_t *kp, size_t kstride, float *sc) {
    __m256i mb = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int r = 0; r < 2 * P; r++)
        mb = _mm256_max_epi32(mb, _mm256_and_si256(_mm256_castps_si256(cd[r]), _mm256_set1_epi32(0x7fffffff)));
    const __m256i E = _mm256_srli_epi32(mb, 23);
    const __m256i e = _mm256_min_epi32(
        _mm256_max_epi32(_mm256_sub_epi32(E, _mm256_set1_epi32(141)), _mm256_set1_epi32(-126)), _mm256_set1_epi32(113));
    const __m256 inv = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(127), e), 23));
    const __m256 s = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_set1_epi32(127), e), 23));
    const __m256 bad = _mm256_castsi256_ps(_mm256_cmpeq_epi32(E, _mm256_set1_epi32(255)));
    _mm256_storeu_ps(sc, _mm256_blendv_ps(s, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)), bad));
    const __m256i kmax = _mm256_set1_epi32(PI_Q4I_KMAX), kmin = _mm256_set1_epi32(-PI_Q4I_KMAX);
    __m256i ksum = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int p = 0; p < P; p++) {
        const __m256i k0 =
            _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(cd[2 * p], inv)), kmin), kmax);
        const __m256i k1 =
            _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(cd[2 * p + 1], inv)), kmin), kmax);
        ksum = _mm256_add_epi32(ksum, _mm256_add_epi32(k0, k1));
        _mm256_storeu_si256((__m256i *)(kp + p * kstride),
                            _mm256_or_si256(_mm256_and_si256(k0, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(k1, 16)));
    }
    return ksum;
}

/* Q4_K's per super-block: from the rows' k4_scales sm[r] (d * sc_j, then
   -dmin * m_j) and coefficients c[r], the 8 sub-blocks' kp and sc as above
   and nb[j], the mins' sum in row order. */
static inline void pi_q4k_coefs8(const int P, const float (*sm)[16], const float *c, int32_t (*kp)[8], float *sc,
                                 float *nb) {
    __m256 cd[PI_AXPY_ROWS_GROUP], b = _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < 2 * P; r++) {
        const __m256 a = _mm256_set1_ps(c[r]);
        cd[r] = _mm256_mul_ps(a, _mm256_loadu_ps(sm[r]));
        b = _mm256_fmadd_ps(a, _mm256_loadu_ps(sm[r] + 8), b);
    }
    pi_q4i_coefs8(P, cd, kp[0], 8, sc);
    _mm256_storeu_ps(nb, b);
}

/* Weights 32 j .. 32 j + 31 of half h of the Q6_K block at p as bytes,
   their unsigned six-bit quants (0..63). */
static inline __m256i pi_q6_bytes(const uint8_t *p, int h, int j) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    const __m256i l = _mm256_loadu_si256((const __m256i *)(p + 64 * h + 32 * (j & 1)));
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h));
    /* low bits: ql's low nibbles for j < 2, high ones after; high bits:
       bits 2 j, 2 j + 1 of qh moved to bits 4, 5 */
    const __m256i lo = j < 2 ? _mm256_and_si256(l, m4) : _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
    const __m256i hi = j == 0 ? _mm256_slli_epi16(qh, 4) : j == 1 ? _mm256_slli_epi16(qh, 2)
                     : j == 2 ? qh : _mm256_srli_epi16(qh, 2);
    return _mm256_or_si256(lo, _mm256_and_si256(hi, m30));
}

/* ---- Q4_1, Q5_0, Q5_1 ---- */

/* The 32 quants of the Q4_1 / Q5_0 / Q5_1 block at p as bytes in element
   order (0..15, or 0..31 with the fifth bit of qh). */
static inline __m256i pi_q32_bytes(pi_type T, const uint8_t *p) {
    const size_t qs = T == PI_TYPE_Q4_1 ? 4 : T == PI_TYPE_Q5_0 ? 6 : 8;
    const __m128i v = _mm_loadu_si128((const __m128i *)(p + qs)), m4 = _mm_set1_epi8(0x0f);
    __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
    if (T != PI_TYPE_Q4_1) {
        uint32_t h;
        memcpy(&h, p + (T == PI_TYPE_Q5_0 ? 2 : 4), sizeof h);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
        q = _mm256_mask_add_epi8(q, (__mmask32)h, q, _mm256_set1_epi8(0x10)); /* bit 4 is clear */
#else
        /* bit i of h to byte i: bytes 0-7 of the lane from byte 0 of h, .. */
        const __m256i sel = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2,
                                             3, 3, 3, 3, 3, 3, 3, 3);
        const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
        const __m256i x = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)h), sel), bit);
        q = _mm256_or_si256(q, _mm256_and_si256(_mm256_cmpeq_epi8(x, bit), _mm256_set1_epi8(0x10)));
#endif
    }
    return q;
}

/* Q4_1 / Q5_0 / Q5_1 in integers (axpy_rows.h): a pass adds P pairs of rows
   (a group). Per 8 blocks, the rows' scales d (and mins m) gathered and
   converted at once give the blocks' coefficients (pi_q4i_coefs8) and the
   mins' sums; then per block and pair of rows, the rows' quants in bytes
   (pi_q32_bytes) interleaved in 16-bit units, each lane's two bytes taken
   by a shift and an AND, and added by one 16-bit multiply-add each. */
static inline void pi_q32_pass(pi_type T, const int P, const uint8_t *const *w, const float *c,
                               const uint8_t *const *pf, int64_t nb, float *y) {
    const size_t bsz = T == PI_TYPE_Q4_1 ? 20 : T == PI_TYPE_Q5_0 ? 22 : 24;
    const int mins = T != PI_TYPE_Q5_0;
    const __m256i mb = _mm256_set1_epi32(0x00ff00ff);
    int32_t kp[PI_AXPY_ROWS_GROUP / 2][8], corr[8];
    float sc[8], nbs[8];
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
        const int nbk = nb - b0 < 8 ? (int)(nb - b0) : 8;
        __m256 cd[PI_AXPY_ROWS_GROUP], nbv = _mm256_setzero_ps();
#pragma GCC unroll 8
        for (int r = 0; r < 2 * P; r++) {
            const uint8_t *p = w[r] + (size_t)b0 * bsz;
            prefetch_span(pf[r] + (size_t)b0 * bsz, (size_t)nbk * bsz);
            uint16_t d[8] = {0}, m[8] = {0};
            for (int t = 0; t < nbk; t++) {
                memcpy(&d[t], p + t * bsz, 2);
                if (mins) memcpy(&m[t], p + t * bsz + 2, 2);
            }
            const __m256 a = _mm256_set1_ps(c[r]);
            cd[r] = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)d)), a);
            if (mins) nbv = _mm256_fmadd_ps(a, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)m)), nbv);
        }
        const __m256i ksum = pi_q4i_coefs8(P, cd, kp[0], 8, sc);
        _mm256_storeu_si256((__m256i *)corr, _mm256_mullo_epi32(ksum, _mm256_set1_epi32(mins ? 0 : -16)));
        _mm256_storeu_ps(nbs, nbv);
        for (int t = 0; t < nbk; t++) {
            const size_t off = (size_t)(b0 + t) * bsz;
            __m256i acc[4];
#pragma GCC unroll 4
            for (int e = 0; e < 4; e++) acc[e] = _mm256_set1_epi32(corr[t]);
#pragma GCC unroll 4
            for (int p = 0; p < P; p++) {
                const __m256i qa = pi_q32_bytes(T, w[2 * p] + off), qb = pi_q32_bytes(T, w[2 * p + 1] + off);
                const __m256i kv = _mm256_set1_epi32(kp[p][t]);
                const __m256i dl = _mm256_unpacklo_epi16(qa, qb), dh = _mm256_unpackhi_epi16(qa, qb);
                acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(_mm256_and_si256(dl, mb), kv));
                acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(_mm256_and_si256(_mm256_srli_epi32(dl, 8), mb), kv));
                acc[2] = _mm256_add_epi32(acc[2], _mm256_madd_epi16(_mm256_and_si256(dh, mb), kv));
                acc[3] = _mm256_add_epi32(acc[3], _mm256_madd_epi16(_mm256_and_si256(_mm256_srli_epi32(dh, 8), mb), kv));
            }
            /* acc[0]: elements 0, 2, 4, 6 | 16, 18, 20, 22; acc[1] the odd ones;
               acc[2], acc[3] the same from 8 and 24 */
            const __m256i u0 = _mm256_unpacklo_epi32(acc[0], acc[1]), u1 = _mm256_unpackhi_epi32(acc[0], acc[1]);
            const __m256i u2 = _mm256_unpacklo_epi32(acc[2], acc[3]), u3 = _mm256_unpackhi_epi32(acc[2], acc[3]);
            const __m256i v[4] = {_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u2, u3, 0x20),
                                  _mm256_permute2x128_si256(u0, u1, 0x31), _mm256_permute2x128_si256(u2, u3, 0x31)};
            const __m256 s = _mm256_set1_ps(sc[t]), bv = _mm256_set1_ps(nbs[t]);
            float *yb = y + 32 * (b0 + t);
#pragma GCC unroll 4
            for (int e = 0; e < 4; e++) {
                const __m256 f = _mm256_cvtepi32_ps(v[e]), yv = _mm256_loadu_ps(yb + 8 * e);
                _mm256_storeu_ps(yb + 8 * e, mins ? _mm256_add_ps(yv, _mm256_fmadd_ps(f, s, bv)) : _mm256_fmadd_ps(f, s, yv));
            }
        }
    }
}

#define PI_Q4_1_PASS(P, w, c, pf, nb, y) pi_q32_pass(PI_TYPE_Q4_1, P, w, c, pf, nb, y)
#define PI_Q5_0_PASS(P, w, c, pf, nb, y) pi_q32_pass(PI_TYPE_Q5_0, P, w, c, pf, nb, y)
#define PI_Q5_1_PASS(P, w, c, pf, nb, y) pi_q32_pass(PI_TYPE_Q5_1, P, w, c, pf, nb, y)

/* The entry points of Q4_1, Q5_0, Q5_1 for table isa. */
#define PI_Q32_ROWS(isa)                                                                                        \
    void pi_axpy_rows_q4_1_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) { \
        PI_AXPY_ROWS_DRIVE_PAIRS(PI_Q4_1_PASS, a, rows, count, (size_t)(n / 32) * 20, n / 32, y);               \
    }                                                                                                           \
    void pi_axpy_rows_q5_0_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) { \
        PI_AXPY_ROWS_DRIVE_PAIRS(PI_Q5_0_PASS, a, rows, count, (size_t)(n / 32) * 22, n / 32, y);               \
    }                                                                                                           \
    void pi_axpy_rows_q5_1_##isa(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) { \
        PI_AXPY_ROWS_DRIVE_PAIRS(PI_Q5_1_PASS, a, rows, count, (size_t)(n / 32) * 24, n / 32, y);               \
    }

#endif
