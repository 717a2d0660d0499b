/*
 * x86_q4i.h — private to x86_avx2_down.c and x86_avx512_down.c: the
 * integer coefficients of the Q4_0 / Q4_K / Q6_K gathered axpy
 * (axpy_rows.h, "Q4_0 in integers") for 8 blocks or sub-blocks at once, and
 * Q6_K's quants in bytes, in 256-bit vectors, compiled with each file's
 * flags.
 */
#ifndef PI_KERNELS_X86_Q4I_H
#define PI_KERNELS_X86_Q4I_H

#include "axpy_rows.h"

#include <immintrin.h>

/* From the float coefficients cd[0 .. 2P) of 2P rows for 8 blocks (a
   lane each): kp[p * kstride + t], rows 2p and 2p + 1's 16-bit coefficients of
   block t packed in one 32-bit lane (the first in the low half); sc[t], the
   block's scale 2^e (NaN where a coefficient is not finite). Returns the
   blocks' sums of the coefficients. PI_Q4I_DEFINE_COEFS defines it for a
   vector width W (256 here; the AVX-512 file's 16-lane one with 512):
   VI / VF its types, SEL(E, s) the scales s with NaN where E is 255. It
   also defines its two steps for lanes laid out otherwise: NAME##_scale,
   from the lanes' largest magnitudes mb (bit patterns), the scales and
   *inv = 2^-e; NAME##_k, one row's clamped integer coefficients. */
#define PI_Q4I_DEFINE_COEFS(ATTR, NAME, W, VI, VF, SEL)                                                            \
    ATTR static inline VF NAME##_scale(VI mb, VF *inv) {                                                           \
        const VI E = _mm##W##_srli_epi32(mb, 23);                                                                 \
        const VI e = _mm##W##_min_epi32(_mm##W##_max_epi32(_mm##W##_sub_epi32(E, _mm##W##_set1_epi32(141)),        \
                                                           _mm##W##_set1_epi32(-126)),                             \
                                        _mm##W##_set1_epi32(113));                                                 \
        *inv = _mm##W##_castsi##W##_ps(_mm##W##_slli_epi32(_mm##W##_sub_epi32(_mm##W##_set1_epi32(127), e), 23));  \
        const VI s = _mm##W##_slli_epi32(_mm##W##_add_epi32(_mm##W##_set1_epi32(127), e), 23);                    \
        return _mm##W##_castsi##W##_ps(SEL(E, s));                                                                 \
    }                                                                                                              \
    ATTR static inline VI NAME##_k(VF cd, VF inv) {                                                                \
        return _mm##W##_min_epi32(_mm##W##_max_epi32(_mm##W##_cvtps_epi32(_mm##W##_mul_ps(cd, inv)),               \
                                                     _mm##W##_set1_epi32(-PI_Q4I_KMAX)),                           \
                                  _mm##W##_set1_epi32(PI_Q4I_KMAX));                                               \
    }                                                                                                              \
    ATTR static inline VI NAME(const int P, const VF *cd, int32_t *kp, size_t kstride, float *sc) {               \
        VI mb = _mm##W##_setzero_si##W();                                                                         \
        _Pragma("GCC unroll 8") for (int r = 0; r < 2 * P; r++) mb =                                               \
            _mm##W##_max_epi32(mb, _mm##W##_and_si##W(_mm##W##_castps_si##W(cd[r]), _mm##W##_set1_epi32(0x7fffffff))); \
        VF inv;                                                                                                    \
        _mm##W##_storeu_ps(sc, NAME##_scale(mb, &inv));                                                            \
        VI ksum = _mm##W##_setzero_si##W();                                                                       \
        _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) {                                                      \
            const VI k0 = NAME##_k(cd[2 * p], inv), k1 = NAME##_k(cd[2 * p + 1], inv);                             \
            ksum = _mm##W##_add_epi32(ksum, _mm##W##_add_epi32(k0, k1));                                           \
            _mm##W##_storeu_si##W((VI *)(kp + p * kstride),                                                        \
                                  _mm##W##_or_si##W(_mm##W##_and_si##W(k0, _mm##W##_set1_epi32(0xffff)),            \
                                                    _mm##W##_slli_epi32(k1, 16)));                                 \
        }                                                                                                          \
        return ksum;                                                                                               \
    }

static inline __m256i pi_q4i_nan256(__m256i E, __m256i s) {
    return _mm256_blendv_epi8(s, _mm256_set1_epi32(0x7fc00000), _mm256_cmpeq_epi32(E, _mm256_set1_epi32(255)));
}
PI_Q4I_DEFINE_COEFS(, pi_q4i_coefs8, 256, __m256i, __m256, pi_q4i_nan256)

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

#endif
