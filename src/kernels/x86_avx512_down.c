/*
 * x86_avx512_down.c — the gathered axpy (axpy_rows, see kernels.h and
 * axpy_rows.h) of the "avx512" and "amx" tables, compiled with the AVX-512
 * flags (F, BW, VL, DQ, VNNI); the Q4_0 and K-quant kernels also use VBMI
 * where the CPU has it (a function attribute) and the AVX2 table's
 * otherwise.
 *
 * Q4_0, Q4_K, Q5_K and Q6_K are added in integers, two rows per 16-bit
 * multiply-add (axpy_rows.h; their sections below), as are Q4_1, Q5_0 and
 * Q5_1. For the other types a
 * pass adds R rows (8, 4, 2 or 1) to y: y is walked in segments of 64
 * floats (128 for Q8_0's groups of 4 blocks) held in registers, and each
 * row's weights for the segment are unpacked and added with one FMA per
 * vector, row after row. Unpacking:
 *   - F16 by vcvtph2ps, BF16 by a 16-bit shift, F32 as is; the last n % 16
 *     elements with masked loads and stores;
 *   - Q8_0 scales: a row's 4 f16 scales of a group gathered in a
 *     general register, converted and multiplied by its coefficient at once
 *     (a lone last block: one at a time);
 *   - Q8_0: sign-extended bytes converted to float, times a * d.
 * Rows are only 2-byte aligned (any address works): every load is
 * unaligned and stays inside the row.
 */
#include "axpy_rows.h"
#include "x86_q4i.h"
#include "simd_common.h"
#include "base/cpu.h"

#include <immintrin.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

INLINE float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
}

INLINE uint32_t u32_at(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

INLINE __m128i load128(const uint8_t *p) { return _mm_loadu_si128((const __m128i *)p); }



/* ------------------------------------------------------- F32, F16, BF16 */

INLINE __m512 fl_load(pi_type t, const uint8_t *w, int64_t i) {
    switch (t) {
    case PI_TYPE_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + 2 * i)));
    case PI_TYPE_BF16:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(w + 2 * i))), 16));
    default: return _mm512_loadu_ps((const float *)(w + 4 * i));
    }
}

/* The same for the lanes of m only (the others zero, not read). */
INLINE __m512 fl_load_mask(pi_type t, const uint8_t *w, int64_t i, __mmask16 m) {
    switch (t) {
    case PI_TYPE_F16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w + 2 * i));
    case PI_TYPE_BF16:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, w + 2 * i)), 16));
    default: return _mm512_maskz_loadu_ps(m, w + 4 * i);
    }
}

INLINE void fl_pass(pi_type t, const int R, const uint8_t *const *w, const float *c, const uint8_t *const *pf,
                    int64_t n, float *y) {
    const size_t es = t == PI_TYPE_F32 ? 4 : 2;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 acc[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) acc[j] = _mm512_loadu_ps(y + i + 16 * j);
#pragma GCC unroll 8
        for (int k = 0; k < R; k++) {
            const __m512 a = _mm512_set1_ps(c[k]);
            prefetch_span(pf[k] + i * es, 64 * es);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) acc[j] = _mm512_fmadd_ps(a, fl_load(t, w[k], i + 16 * j), acc[j]);
        }
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) _mm512_storeu_ps(y + i + 16 * j, acc[j]);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 acc = _mm512_maskz_loadu_ps(m, y + i);
#pragma GCC unroll 8
        for (int k = 0; k < R; k++) acc = _mm512_fmadd_ps(_mm512_set1_ps(c[k]), fl_load_mask(t, w[k], i, m), acc);
        _mm512_mask_storeu_ps(y + i, m, acc);
    }
}

#define FL_PASS(R, w, c, pf, t, n, y) fl_pass(t, R, w, c, pf, n, y)

/* ------------------------------------------------------------------ Q8_0 */

INLINE uint64_t u16_at(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Blocks [b, b + m) (m = 4 or 1) of R rows of Q8_0, into y[0 .. 32 m).
   With 4 blocks, a row's 4 scales are gathered in a general register and
   converted and multiplied by its coefficient at once. */
INLINE void q8_seg(const int R, const int m, const uint8_t *const *w, const float *c, const uint8_t *const *pf,
                   size_t off, float *y) {
    const size_t bsz = sizeof(pi_block_q8_0);
    __m512 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < 2 * m; j++) acc[j] = _mm512_loadu_ps(y + 16 * j);
#pragma GCC unroll 8
    for (int k = 0; k < R; k++) {
        const uint8_t *p = w[k] + off;
        prefetch_span(pf[k] + off, (size_t)m * bsz);
        float cd[4];
        if (m == 4) {
            const uint64_t d = u16_at(p) | u16_at(p + bsz) << 16 | u16_at(p + 2 * bsz) << 32 | u16_at(p + 3 * bsz) << 48;
            _mm_storeu_ps(cd, _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi64_si128((long long)d)), _mm_set1_ps(c[k])));
        } else {
            cd[0] = c[k] * f16_at(p);
        }
#pragma GCC unroll 4
        for (int e = 0; e < m; e++) {
            const uint8_t *b = p + e * bsz;
            const __m512 s = _mm512_set1_ps(cd[e]);
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++)
                acc[2 * e + h] = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load128(b + 2 + 16 * h))),
                                                 acc[2 * e + h]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < 2 * m; j++) _mm512_storeu_ps(y + 16 * j, acc[j]);
}

INLINE void q8_pass(const int R, const uint8_t *const *w, const float *c, const uint8_t *const *pf, int64_t nb,
                    float *y) {
    const size_t bsz = sizeof(pi_block_q8_0);
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) q8_seg(R, 4, w, c, pf, (size_t)b * bsz, y + 32 * b);
    for (; b < nb; b++) q8_seg(R, 1, w, c, pf, (size_t)b * bsz, y + 32 * b);
}

#define Q8_0_PASS(R, w, c, pf, nb, y) q8_pass(R, w, c, pf, nb, y)

/* ------------------------------------------- Q4_0, Q4_1, Q5_0, Q5_1 */

/* The blocks of 32 in integers (axpy_rows.h; their layout pi_q32_*): a
   pass adds P pairs of rows (a group). Spans of up to 16 blocks (512
   floats). Per span and group, the coefficients first, 16 blocks at a
   time and one span ahead (their dependency chains then overlap the
   previous span's sums: a fifth more speed): each row's 16 scales d (and Q4_1 / Q5_1's mins m, lanes 16-31)
   picked from two or three 128-byte windows of the row by vpermt2w (a
   vpgatherdd at 18-byte steps took a third of Q4_0's time), converted and
   multiplied by its coefficient; the blocks' exponents from the largest
   magnitudes; the 16-bit coefficients, packed two rows to a 32-bit lane,
   the blocks' scales and -o times the coefficients' sums stored for the
   walk; the mins' sums one FMA per row. Then the span in segments of 4
   blocks held in 8 int32 accumulators: per pair of rows and pair of
   blocks, one masked 64-byte load per row (the two blocks' quants and what
   lies between), one two-source byte permutation per block (vpermt2b,
   AVX-512 VBMI) that puts row A's byte i and row B's byte i in 16-bit lanes
   2 i and 2 i + 1 (high bytes zero), so a 32-bit lane holds the pair's low
   nibbles of element i after an AND and their high nibbles (element
   i + 16) after a 16-bit shift, each added by one vpdpwssd with the pair's
   coefficients (a broadcast from memory). Q5's fifth bits: the two rows'
   qh interleaved bit by bit (pdep, BMI2: bit 2 i is row A's element i,
   2 i + 1 row B's) mask a 16-bit add of 16 to the low and to the high
   nibbles. */

/* Every CPU with VBMI has BMI2 (Ice Lake, Zen 4 and later). */
#define Q4I_ATTR __attribute__((target("avx512vbmi,bmi2")))
#define Q4I_SPAN 16

/* A pair of rows' bytes i side by side: byte 4 i of a permutation is row
   A's byte i, byte 4 i + 2 row B's (64 + ...); the others are zeroed by
   the mask. */
#define Q4I_PAIR(i) (i), 0, 64 + (i), 0

/* A span's coefficients: kp[p][t] the packed pair p of block t, corr[t]
   the accumulators' start, sc[t] the scale (the rules in axpy_rows.h). */
typedef struct {
    int32_t kp[PI_AXPY_ROWS_GROUP / 2][Q4I_SPAN];
    int32_t corr[Q4I_SPAN];
    float sc[Q4I_SPAN];
} q4i_coefs;

/* From the float coefficients cd[0 .. 2P) of 2P rows for 16 blocks (a
   lane each): q's packed 16-bit pairs, scales (NaN where a coefficient is
   not finite) and accumulator starts, -o times the coefficients' sums (the
   quants' offset o: Q4_0 8, Q6_K 32). */
INLINE __m512i q4i_nan512(__m512i E, __m512i s) {
    return _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(E, _mm512_set1_epi32(255)), s, _mm512_set1_epi32(0x7fc00000));
}
PI_Q4I_DEFINE_COEFS(Q4I_ATTR, q4i_coefs16_w, 512, __m512i, __m512, q4i_nan512) /* pi_q4i_coefs8 on 16 lanes */

Q4I_ATTR INLINE void q4i_coefs16(const int P, const __m512 *cd, q4i_coefs *q, int o) {
    const __m512i ksum = q4i_coefs16_w(P, cd, q->kp[0], Q4I_SPAN, q->sc);
    _mm512_storeu_si512(q->corr, _mm512_mullo_epi32(ksum, _mm512_set1_epi32(-o)));
}

/* The types' index in the tables below. */
INLINE int q32_ti(pi_type T) {
    return T == PI_TYPE_Q4_0 ? 0 : T == PI_TYPE_Q4_1 ? 1 : T == PI_TYPE_Q5_0 ? 2 : 3;
}

/* The coefficient stage's windows, for blocks of 2 S bytes with a min
   (M = 1) or not: window k starts at block k B (B = the blocks whose d and
   m lie in its 64 words: 8 for Q4_0, 7, 6, 6), and lane l (block l % 16's
   d for l < 16, its m for l >= 16) takes word S (l % 16 - k B) + l / 16 of
   it where block l % 16 is one of window k's. */
#define Q32_B(S, M) ((63 - (M)) / (S) + 1)
#define Q32_IN(S, M, k, l) (((l) & 15) / Q32_B(S, M) == (k) && ((l) < 16 || (M)))
#define Q32_I(S, M, k, l) (uint16_t)(Q32_IN(S, M, k, l) ? (S) * (((l) & 15) - (k) * Q32_B(S, M)) + ((l) >> 4) : 0)
#define Q32_I4(S, M, k, l) Q32_I(S, M, k, l), Q32_I(S, M, k, (l) + 1), Q32_I(S, M, k, (l) + 2), Q32_I(S, M, k, (l) + 3)
#define Q32_I16(S, M, k, l) Q32_I4(S, M, k, l), Q32_I4(S, M, k, (l) + 4), Q32_I4(S, M, k, (l) + 8), Q32_I4(S, M, k, (l) + 12)
#define Q32_IDX(S, M) {{Q32_I16(S, M, 0, 0), Q32_I16(S, M, 0, 16)}, {Q32_I16(S, M, 1, 0), Q32_I16(S, M, 1, 16)}, \
                       {Q32_I16(S, M, 2, 0), Q32_I16(S, M, 2, 16)}}
static const uint16_t q32_idx[4][3][32] __attribute__((aligned(64))) = {Q32_IDX(9, 0), Q32_IDX(10, 1), Q32_IDX(11, 0),
                                                                        Q32_IDX(12, 1)};
#define Q32_K(S, M, k, l) ((uint32_t)Q32_IN(S, M, k, l) << (l))
#define Q32_K4(S, M, k, l) (Q32_K(S, M, k, l) | Q32_K(S, M, k, (l) + 1) | Q32_K(S, M, k, (l) + 2) | Q32_K(S, M, k, (l) + 3))
#define Q32_K16(S, M, k, l) (Q32_K4(S, M, k, l) | Q32_K4(S, M, k, (l) + 4) | Q32_K4(S, M, k, (l) + 8) | Q32_K4(S, M, k, (l) + 12))
#define Q32_KM(S, M) {Q32_K16(S, M, 0, 0) | Q32_K16(S, M, 0, 16), Q32_K16(S, M, 1, 0) | Q32_K16(S, M, 1, 16), \
                      Q32_K16(S, M, 2, 0) | Q32_K16(S, M, 2, 16)}
static const uint32_t q32_km[4][3] = {Q32_KM(9, 0), Q32_KM(10, 1), Q32_KM(11, 0), Q32_KM(12, 1)};

/* The quants' permutations: block h (0, 1) of a load at bsz h. */
#define Q32_P4(B, h, i) Q4I_PAIR((B) * (h) + (i)), Q4I_PAIR((B) * (h) + (i) + 1), Q4I_PAIR((B) * (h) + (i) + 2), \
                        Q4I_PAIR((B) * (h) + (i) + 3)
#define Q32_PERM(B, h) {Q32_P4(B, h, 0), Q32_P4(B, h, 4), Q32_P4(B, h, 8), Q32_P4(B, h, 12)}
static const uint8_t q32_perm[4][2][64] __attribute__((aligned(64))) = {
    {Q32_PERM(18, 0), Q32_PERM(18, 1)}, {Q32_PERM(20, 0), Q32_PERM(20, 1)},
    {Q32_PERM(22, 0), Q32_PERM(22, 1)}, {Q32_PERM(24, 0), Q32_PERM(24, 1)}};

/* The mask of the first n bytes of 64 (n may be out of 0..64). */
INLINE __mmask64 bytes_mask(int64_t n) { return n >= 64 ? ~0ull : n <= 0 ? 0 : (1ull << n) - 1; }

Q4I_ATTR INLINE void q32_span_coefs(pi_type T, const int P, const uint8_t *const *w, const float *c, size_t off,
                                    int nbk, q4i_coefs *q, float *nb) {
    const int64_t bsz = (int64_t)pi_q32_bsz(T), bytes = (int64_t)nbk * bsz;
    const int mins = pi_q32_has_min(T), ti = q32_ti(T), B = Q32_B((int)bsz / 2, mins);
    const int nwin = (Q4I_SPAN + B - 1) / B; /* past the span's end, masked loads read nothing */
    __m512 cd[PI_AXPY_ROWS_GROUP], nbv = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < 2 * P; r++) {
        __m512i g = _mm512_setzero_si512();
#pragma GCC unroll 3
        for (int k = 0; k < nwin; k++) {
            const int64_t at = (int64_t)k * B * bsz;
            const uint8_t *pr = w[r] + off + at;
            const __m512i lo = _mm512_maskz_loadu_epi8(bytes_mask(bytes - at), pr);
            const __m512i hi = _mm512_maskz_loadu_epi8(bytes_mask(bytes - at - 64), pr + 64);
            g = _mm512_or_si512(
                g, _mm512_maskz_permutex2var_epi16(q32_km[ti][k], lo, _mm512_load_si512(q32_idx[ti][k]), hi));
        }
        const __m512 a = _mm512_set1_ps(c[r]);
        cd[r] = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(g)), a);
        if (mins) nbv = _mm512_fmadd_ps(a, _mm512_cvtph_ps(_mm512_extracti64x4_epi64(g, 1)), nbv);
    }
    q4i_coefs16(P, cd, q, pi_q32_offset(T));
    _mm512_storeu_ps(nb, nbv);
}

/* Blocks [t0, t0 + NBK) of the span (NBK <= 4) at byte offset off of the rows. */
Q4I_ATTR INLINE void q32_seg(pi_type T, const int P, const int NBK, const uint8_t *const *w, const q4i_coefs *q,
                             const float *nb, int t0, const uint8_t *const *pf, size_t off, float *y) {
    const size_t bsz = pi_q32_bsz(T), qs = pi_q32_qs(T), qh = pi_q32_qh(T);
    const int mins = pi_q32_has_min(T);
    const __m512i idx[2] = {_mm512_load_si512(q32_perm[q32_ti(T)][0]), _mm512_load_si512(q32_perm[q32_ti(T)][1])};
    const __mmask64 even = 0x5555555555555555ull;
    const __m512i m4 = _mm512_set1_epi32(0x000f000f), b4 = _mm512_set1_epi16(16);
    __m512i acc[8];
#pragma GCC unroll 4
    for (int t = 0; t < NBK; t++) acc[2 * t] = acc[2 * t + 1] = _mm512_set1_epi32(q->corr[t0 + t]);
#pragma GCC unroll 4
    for (int p = 0; p < P; p++) {
        const uint8_t *A = w[2 * p] + off, *B = w[2 * p + 1] + off;
        prefetch_span(pf[2 * p] + off, (size_t)NBK * bsz);
        prefetch_span(pf[2 * p + 1] + off, (size_t)NBK * bsz);
#pragma GCC unroll 2
        for (int h = 0; 2 * h < NBK; h++) {
            const __mmask64 lm = bytes_mask(NBK - 2 * h >= 2 ? (int64_t)bsz + 16 : 16);
            const __m512i la = _mm512_maskz_loadu_epi8(lm, A + qs + 2 * h * bsz);
            const __m512i lb = _mm512_maskz_loadu_epi8(lm, B + qs + 2 * h * bsz);
#pragma GCC unroll 2
            for (int s = 0; s < 2; s++) {
                const int t = 2 * h + s;
                if (t >= NBK) break;
                const __m512i x = _mm512_maskz_permutex2var_epi8(even, la, idx[s], lb);
                __m512i lo = _mm512_and_si512(x, m4), hi = _mm512_srli_epi16(x, 4);
                if (pi_q32_five(T)) {
                    const uint32_t ha = u32_at(A + t * bsz + qh), hb = u32_at(B + t * bsz + qh);
                    const __mmask32 kl = _pdep_u32(ha, 0x55555555u) | _pdep_u32(hb, 0xaaaaaaaau);
                    const __mmask32 kh = _pdep_u32(ha >> 16, 0x55555555u) | _pdep_u32(hb >> 16, 0xaaaaaaaau);
                    lo = _mm512_mask_add_epi16(lo, kl, lo, b4);
                    hi = _mm512_mask_add_epi16(hi, kh, hi, b4);
                }
                const __m512i kv = _mm512_set1_epi32(q->kp[p][t0 + t]);
                acc[2 * t] = _mm512_dpwssd_epi32(acc[2 * t], lo, kv);
                acc[2 * t + 1] = _mm512_dpwssd_epi32(acc[2 * t + 1], hi, kv);
            }
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NBK; t++) {
        const __m512 s = _mm512_set1_ps(q->sc[t0 + t]), b = _mm512_set1_ps(nb[t0 + t]);
#pragma GCC unroll 2
        for (int j = 0; j < 2; j++) {
            float *yp = y + 32 * t + 16 * j;
            const __m512 f = _mm512_cvtepi32_ps(acc[2 * t + j]), yv = _mm512_loadu_ps(yp);
            _mm512_storeu_ps(yp, mins ? _mm512_add_ps(yv, _mm512_fmadd_ps(f, s, b)) : _mm512_fmadd_ps(f, s, yv));
        }
    }
}

Q4I_ATTR INLINE void q32_pass(pi_type T, const int P, const uint8_t *const *w, const float *c,
                              const uint8_t *const *pf, int64_t nb, float *y) {
    const size_t bsz = pi_q32_bsz(T);
    /* the next span's coefficients are formed before this span's sums, so
       that their dependency chains overlap those sums */
    q4i_coefs qb[2];
    float nbb[2][Q4I_SPAN];
#define Q32_SPAN_LEN(b) (nb - (b) < Q4I_SPAN ? (int)(nb - (b)) : Q4I_SPAN)
    q32_span_coefs(T, P, w, c, 0, Q32_SPAN_LEN(0), &qb[0], nbb[0]);
    for (int64_t b0 = 0, i = 0; b0 < nb; b0 += Q4I_SPAN, i ^= 1) {
        const int nbk = Q32_SPAN_LEN(b0);
        const int64_t b1 = b0 + Q4I_SPAN;
        if (b1 < nb) q32_span_coefs(T, P, w, c, (size_t)b1 * bsz, Q32_SPAN_LEN(b1), &qb[i ^ 1], nbb[i ^ 1]);
        const q4i_coefs *q = &qb[i];
        const float *nbs = nbb[i];
        int t = 0;
        for (; t + 4 <= nbk; t += 4)
            q32_seg(T, P, 4, w, q, nbs, t, pf, (size_t)(b0 + t) * bsz, y + 32 * (b0 + t));
        const size_t off = (size_t)(b0 + t) * bsz;
        float *yt = y + 32 * (b0 + t);
        switch (nbk - t) {
        case 3: q32_seg(T, P, 3, w, q, nbs, t, pf, off, yt); break;
        case 2: q32_seg(T, P, 2, w, q, nbs, t, pf, off, yt); break;
        case 1: q32_seg(T, P, 1, w, q, nbs, t, pf, off, yt); break;
        default: break;
        }
    }
}
#undef Q32_SPAN_LEN

#define Q4_0_PASS(P, w, c, pf, nb, y) q32_pass(PI_TYPE_Q4_0, P, w, c, pf, nb, y)
#define Q4_1_PASS(P, w, c, pf, nb, y) q32_pass(PI_TYPE_Q4_1, P, w, c, pf, nb, y)
#define Q5_0_PASS(P, w, c, pf, nb, y) q32_pass(PI_TYPE_Q5_0, P, w, c, pf, nb, y)
#define Q5_1_PASS(P, w, c, pf, nb, y) q32_pass(PI_TYPE_Q5_1, P, w, c, pf, nb, y)

/* ------------------------------------------------------------ K-quants */

/* The group's scale stage at once (Q4_K / Q5_K share the 12-byte scale
   format): the 16-byte headers (d, dmin, scales) of up to 8 rows in two
   vectors, lane 8 r + j of a byte vector row r's sub-block j. Its sc_j and
   m_j unpacked by four vpermt2b and a few masks for all rows, widened to
   floats 16 lanes (two rows) at a time and multiplied by d and the
   coefficient, -dmin * m alike: cdp[k] holds c_r * (d_r * sc_r,j) of rows
   r = 2k (lanes 0-7) and 2k + 1 (8-15), and the mins' sum is nb_j = sum
   over rows in order of fma(c_r, -(dmin_r * m_r,j), nb_j), the same
   products as the AVX2 table's per-row scale stage, so the same bits. Rows
   from 2P on repeat row 0 (their lanes are not used). Quantizing the pairs
   as they are (k4_coefs_quant), not as 8-lane halves, made Q4_K's down rows
   3-7% faster (in L1 and from memory, one thread). */
#define K4_B(r, src) (uint8_t)(16 * (r) + 4 + (src))
#define K4_ROW(r, A0, A1, A2, A3, A4, A5, A6, A7) \
    K4_B(r, A0), K4_B(r, A1), K4_B(r, A2), K4_B(r, A3), K4_B(r, A4), K4_B(r, A5), K4_B(r, A6), K4_B(r, A7)
#define K4_IDX(A0, A1, A2, A3, A4, A5, A6, A7)                                                                  \
    {K4_ROW(0, A0, A1, A2, A3, A4, A5, A6, A7), K4_ROW(1, A0, A1, A2, A3, A4, A5, A6, A7),                       \
     K4_ROW(2, A0, A1, A2, A3, A4, A5, A6, A7), K4_ROW(3, A0, A1, A2, A3, A4, A5, A6, A7),                       \
     K4_ROW(4, A0, A1, A2, A3, A4, A5, A6, A7), K4_ROW(5, A0, A1, A2, A3, A4, A5, A6, A7),                       \
     K4_ROW(6, A0, A1, A2, A3, A4, A5, A6, A7), K4_ROW(7, A0, A1, A2, A3, A4, A5, A6, A7)}
/* q[j] for j < 4, q[j + 4] after (sc's low bits); q[j - 4] (sc's high bits,
   j >= 4); q[j + 4] (m's low bits); q[j] (m's high bits, j >= 4) */
static const uint8_t k4_idx[4][64] __attribute__((aligned(64))) = {
    K4_IDX(0, 1, 2, 3, 8, 9, 10, 11), K4_IDX(0, 0, 0, 0, 0, 1, 2, 3), K4_IDX(4, 5, 6, 7, 8, 9, 10, 11),
    K4_IDX(0, 0, 0, 0, 4, 5, 6, 7)};
/* Words of rows 2k and 2k + 1: d (word 8 r) in lanes 0-15, dmin (8 r + 1) in 16-31. */
#define K4_W8(r, o) (uint16_t)(8 * (r) + (o)), (uint16_t)(8 * (r) + (o)), (uint16_t)(8 * (r) + (o)), \
    (uint16_t)(8 * (r) + (o)), (uint16_t)(8 * (r) + (o)), (uint16_t)(8 * (r) + (o)), (uint16_t)(8 * (r) + (o)), \
    (uint16_t)(8 * (r) + (o))
#define K4_DW(k) {K4_W8(2 * (k), 0), K4_W8(2 * (k) + 1, 0), K4_W8(2 * (k), 1), K4_W8(2 * (k) + 1, 1)}
static const uint16_t k4_dw[4][32] __attribute__((aligned(64))) = {K4_DW(0), K4_DW(1), K4_DW(2), K4_DW(3)};

Q4I_ATTR INLINE void k4_coefs_group(const int P, const uint8_t *const *w, const float *c, size_t off, __m512 *cdp,
                                    float *nb) {
#define K4_HDR(r) load128(w[(r) < 2 * P ? (r) : 0] + off)
    const __m512i hdr0 = _mm512_inserti32x4(
        _mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(K4_HDR(0)), K4_HDR(1), 1), K4_HDR(2), 2),
        K4_HDR(3), 3);
    const __m512i hdr1 = P > 2 ? _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(
                                     _mm512_castsi128_si512(K4_HDR(4)), K4_HDR(5), 1), K4_HDR(6), 2), K4_HDR(7), 3)
                               : hdr0;
#undef K4_HDR
    const __mmask64 hi = 0xf0f0f0f0f0f0f0f0ull; /* sub-blocks 4-7 */
    const __m512i m3f = _mm512_set1_epi8(0x3f), m0f = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    const __m512i A = _mm512_permutex2var_epi8(hdr0, _mm512_load_si512(k4_idx[0]), hdr1);
    const __m512i B = _mm512_maskz_permutex2var_epi8(hi, hdr0, _mm512_load_si512(k4_idx[1]), hdr1);
    const __m512i C = _mm512_permutex2var_epi8(hdr0, _mm512_load_si512(k4_idx[2]), hdr1);
    const __m512i D = _mm512_maskz_permutex2var_epi8(hi, hdr0, _mm512_load_si512(k4_idx[3]), hdr1);
    const __m512i Bh = _mm512_and_si512(_mm512_srli_epi16(B, 2), m30), Dh = _mm512_and_si512(_mm512_srli_epi16(D, 2), m30);
    const __m512i sc = _mm512_mask_blend_epi8(hi, _mm512_and_si512(A, m3f), _mm512_or_si512(_mm512_and_si512(A, m0f), Bh));
    const __m512i mn = _mm512_mask_blend_epi8(hi, _mm512_and_si512(C, m3f),
                                              _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(C, 4), m0f), Dh));
    const __m512 c8 = _mm512_castps256_ps512(_mm256_loadu_ps(c));
    __m256 b = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int k = 0; k < P; k++) { /* rows 2k, 2k + 1 */
        const __m512i dw = _mm512_permutex2var_epi16(hdr0, _mm512_load_si512(k4_dw[k]), hdr1);
        const __m512 d = _mm512_cvtph_ps(_mm512_castsi512_si256(dw)), dm = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(dw, 1));
        const __m512 fs = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(sc, k)));
        const __m512 fm = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(mn, k)));
        const __m512 ck = _mm512_permutexvar_ps(_mm512_setr_epi32(2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k,
                                                                  2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1,
                                                                  2 * k + 1, 2 * k + 1, 2 * k + 1), c8);
        cdp[k] = _mm512_mul_ps(ck, _mm512_mul_ps(d, fs));
        /* c * -(dmin * m) + b: dmin * m is exact, and a negated product
           rounds as the product of the negation */
        const __m512 mm = _mm512_mul_ps(dm, fm);
        b = _mm256_fnmadd_ps(_mm256_set1_ps(c[2 * k]), _mm512_castps512_ps256(mm), b);
        b = _mm256_fnmadd_ps(_mm256_set1_ps(c[2 * k + 1]), _mm512_extractf32x8_ps(mm, 1), b);
    }
    _mm256_storeu_ps(nb, b);
}

/* A group's coefficients of the Q4_K / Q5_K super-block at off: the 8
   sub-blocks' packed 16-bit pairs, scales and mins' sums. */
typedef struct {
    int32_t kp[PI_AXPY_ROWS_GROUP / 2][8];
    float sc[8], nb[8];
} k4_coefs;

/* pi_q4i_coefs8 (without the sums) on the pairs' vectors as k4_coefs_group
   leaves them, lanes 0-7 row 2p's sub-blocks and 8-15 row 2p + 1's: the
   largest magnitude of each sub-block over the rows from the pairs' lanes
   and then the two halves', each pair's two rows scaled, rounded and
   clamped in one vector (the 16-lane form's steps), row 2p + 1's halves
   shifted up onto row 2p's. The same operations lane for lane as the
   8-lane form, in half the vectors. */
Q4I_ATTR INLINE void k4_coefs_quant(const int P, const __m512 *cdp, int32_t (*kp)[8], float *sc) {
    __m512i mb = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int p = 0; p < P; p++)
        mb = _mm512_max_epi32(mb, _mm512_and_si512(_mm512_castps_si512(cdp[p]), _mm512_set1_epi32(0x7fffffff)));
    mb = _mm512_max_epi32(mb, _mm512_shuffle_i64x2(mb, mb, _MM_SHUFFLE(1, 0, 3, 2))); /* both halves: every row */
    __m512 inv;
    _mm256_storeu_ps(sc, _mm512_castps512_ps256(q4i_coefs16_w_scale(mb, &inv)));
#pragma GCC unroll 4
    for (int p = 0; p < P; p++) {
        const __m512i k = q4i_coefs16_w_k(cdp[p], inv);
        const __m256i lo = _mm256_and_si256(_mm512_castsi512_si256(k), _mm256_set1_epi32(0xffff));
        const __m256i hi = _mm512_extracti64x4_epi64(_mm512_slli_epi32(k, 16), 1);
        _mm256_storeu_si256((__m256i *)kp[p], _mm256_or_si256(lo, hi));
    }
}

Q4I_ATTR INLINE void k4_coefs_make(const int P, const uint8_t *const *w, const float *c, size_t off, k4_coefs *k) {
    __m512 cdp[PI_AXPY_ROWS_GROUP / 2];
    k4_coefs_group(P, w, c, off, cdp, k->nb);
    k4_coefs_quant(P, cdp, k->kp, k->sc);
}

/* Q4_K and Q5_K in integers (axpy_rows.h): a pass adds P pairs of rows (a group).
   Per super-block, the group's scales (k4_coefs_group) give the 8
   sub-blocks' float coefficients, their scales and 16-bit coefficients (8
   lanes at once) and the mins' sums, formed one super-block ahead; then
   two segments of 4 sub-blocks (128
   floats, 8 int32 accumulators): per pair of rows one 64-byte load per
   row (the segment's 64 quant bytes) and four vpermt2b that put row A's
   and row B's byte i side by side in a 32-bit lane (high bytes zero), the
   low nibbles (sub-block 2 i') after an AND, the high ones (2 i' + 1)
   after a 16-bit shift, each added by one vpdpwssd. */
#define Q4K_P4(u, i) Q4I_PAIR(16 * (u) + (i)), Q4I_PAIR(16 * (u) + (i) + 1), Q4I_PAIR(16 * (u) + (i) + 2), \
                     Q4I_PAIR(16 * (u) + (i) + 3)
#define Q4K_PERM(u) {Q4K_P4(u, 0), Q4K_P4(u, 4), Q4K_P4(u, 8), Q4K_P4(u, 12)}
static const uint8_t q4k_perm[4][64] __attribute__((aligned(64))) = {Q4K_PERM(0), Q4K_PERM(1), Q4K_PERM(2),
                                                                     Q4K_PERM(3)};

/* Bit b of each 16-bit lane of v moved to bit 4 (the other bits anywhere). */
INLINE __m512i bit_to_4w(__m512i v, int b) {
    return b <= 4 ? _mm512_sll_epi16(v, _mm_cvtsi32_si128(4 - b)) : _mm512_srl_epi16(v, _mm_cvtsi32_si128(b - 4));
}

/* Q4_K (Q5 = 0) or Q5_K (Q5 = 1). Q5_K's fifth bits: per pair of rows the
   two rows' 32 qh bytes interleaved as the quants are (two vpermt2b, for
   all 8 sub-blocks), bit j of a lane's byte moved to bit 4 and merged into
   sub-block j's nibble. */
Q4I_ATTR INLINE void q4k_int_pass(const int Q5, const int P, const uint8_t *const *w, const float *c,
                                  const uint8_t *const *pf, int64_t nsb, float *y) {
    const size_t bsz = Q5 ? sizeof(pi_block_q5_K) : sizeof(pi_block_q4_K), qs_off = Q5 ? 48 : 16;
    const __mmask64 even = 0x5555555555555555ull;
    const __m512i m4 = _mm512_set1_epi32(0x000f000f), b4 = _mm512_set1_epi32(0x00100010);
    /* the coefficients of super-block sb + 1 are formed before sb's sums,
       so that their dependency chains overlap those sums */
    k4_coefs kb[2];
    k4_coefs_make(P, w, c, 0, &kb[0]);
    for (int64_t sb = 0; sb < nsb; sb++, y += PI_QK_K) {
        const size_t off = (size_t)sb * bsz;
#pragma GCC unroll 8
        for (int r = 0; r < 2 * P; r++) prefetch_span(pf[r] + off, bsz);
        if (sb + 1 < nsb) k4_coefs_make(P, w, c, off + bsz, &kb[(sb + 1) & 1]);
        int32_t (*kp)[8] = kb[sb & 1].kp;
        const float *scs = kb[sb & 1].sc, *nbs = kb[sb & 1].nb;
#pragma GCC unroll 2
        for (int seg = 0; seg < 2; seg++) {
            __m512i acc[8];
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) acc[j] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int p = 0; p < P; p++) {
                const uint8_t *A = w[2 * p] + off, *B = w[2 * p + 1] + off;
                const __m512i la = _mm512_loadu_si512(A + qs_off + 64 * seg);
                const __m512i lb = _mm512_loadu_si512(B + qs_off + 64 * seg);
                __m512i xh[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
                if (Q5) {
                    const __m512i ha = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(A + 16)));
                    const __m512i hb = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(B + 16)));
#pragma GCC unroll 2
                    for (int h = 0; h < 2; h++)
                        xh[h] = _mm512_maskz_permutex2var_epi8(even, ha, _mm512_load_si512(q4k_perm[h]), hb);
                }
#pragma GCC unroll 4
                for (int u = 0; u < 4; u++) {
                    const int j = 2 * (u / 2), h = u % 2; /* sub-block of the low nibbles in the segment */
                    const int jl = 4 * seg + j;        /* ... in the super-block */
                    const __m512i x = _mm512_maskz_permutex2var_epi8(even, la, _mm512_load_si512(q4k_perm[u]), lb);
                    __m512i lo = _mm512_and_si512(x, m4), hi = _mm512_srli_epi16(x, 4);
                    if (Q5) {
                        lo = _mm512_ternarylogic_epi32(bit_to_4w(xh[h], jl), b4, lo, 0xea); /* (A & B) | C */
                        hi = _mm512_ternarylogic_epi32(bit_to_4w(xh[h], jl + 1), b4, hi, 0xea);
                    }
                    acc[2 * j + h] = _mm512_dpwssd_epi32(acc[2 * j + h], lo, _mm512_set1_epi32(kp[p][jl]));
                    acc[2 * j + 2 + h] = _mm512_dpwssd_epi32(acc[2 * j + 2 + h], hi, _mm512_set1_epi32(kp[p][jl + 1]));
                }
            }
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                const __m512 sc = _mm512_set1_ps(scs[4 * seg + j]), b = _mm512_set1_ps(nbs[4 * seg + j]);
#pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    float *yp = y + 128 * seg + 32 * j + 16 * h;
                    _mm512_storeu_ps(yp, _mm512_add_ps(_mm512_loadu_ps(yp),
                                                       _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[2 * j + h]), sc, b)));
                }
            }
        }
    }
}

#define Q4K_INT_PASS(P, w, c, pf, nsb, y) q4k_int_pass(0, P, w, c, pf, nsb, y)
#define Q5K_INT_PASS(P, w, c, pf, nsb, y) q4k_int_pass(1, P, w, c, pf, nsb, y)

/* Q6_K in integers (axpy_rows.h): a pass adds P pairs of rows (a group).
   Per super-block, the rows' 16 d * scales[j] times their coefficients
   give the 16 sub-blocks' 16-bit coefficients (q6k_coefs, offset 32),
   formed one super-block ahead; then per half (128 floats, 8 int32 accumulators, a sub-block each) and
   pair of rows, the two rows' 4 x 32 six-bit quants assembled in bytes
   (unsigned) in one vector per 32, and per 16 of them one vpermb putting
   the two rows' bytes side by side in 32-bit lanes, added by one
   vpdpwssd. */
#define Q6K_P(i) (i), 0, 32 + (i), 0
#define Q6K_P4(i) Q6K_P(i), Q6K_P((i) + 1), Q6K_P((i) + 2), Q6K_P((i) + 3)
#define Q6K_PERM(s) {Q6K_P4(16 * (s)), Q6K_P4(16 * (s) + 4), Q6K_P4(16 * (s) + 8), Q6K_P4(16 * (s) + 12)}
static const uint8_t q6k_perm[2][64] __attribute__((aligned(64))) = {Q6K_PERM(0), Q6K_PERM(1)};

/* pi_q6_bytes of two rows at once: bytes 0-31 row A's weights 32 j ..
   32 j + 31 of half h, bytes 32-63 row B's. */
INLINE __m512i q6_bytes2(const uint8_t *A, const uint8_t *B, int h, int j) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    const size_t lo_at = 64 * (size_t)h + 32 * (size_t)(j & 1), hi_at = 128 + 32 * (size_t)h;
    const __m512i l = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(A + lo_at))),
                                         _mm256_loadu_si256((const __m256i *)(B + lo_at)), 1);
    const __m512i qh = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(A + hi_at))),
                                          _mm256_loadu_si256((const __m256i *)(B + hi_at)), 1);
    const __m512i lo = j < 2 ? _mm512_and_si512(l, m4) : _mm512_and_si512(_mm512_srli_epi16(l, 4), m4);
    const __m512i hi = j == 0 ? _mm512_slli_epi16(qh, 4) : j == 1 ? _mm512_slli_epi16(qh, 2)
                     : j == 2 ? qh : _mm512_srli_epi16(qh, 2);
    return _mm512_ternarylogic_epi32(hi, m30, lo, 0xea); /* (hi & m30) | lo */
}

/* A group's 16-bit coefficients of the Q6_K super-block at off: c_r *
   (d_r * scales_r,j), offset 32. */
Q4I_ATTR INLINE void q6k_coefs(const int P, const uint8_t *const *w, const float *c, size_t off, q4i_coefs *q) {
    __m512 cd[PI_AXPY_ROWS_GROUP];
#pragma GCC unroll 8
    for (int r = 0; r < 2 * P; r++) {
        const uint8_t *p = w[r] + off;
        const __m512 ds = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load128(p + 192))),
                                        _mm512_set1_ps(f16_at(p + 208)));
        cd[r] = _mm512_mul_ps(_mm512_set1_ps(c[r]), ds);
    }
    q4i_coefs16(P, cd, q, 32);
}

Q4I_ATTR INLINE void q6k_int_pass(const int P, const uint8_t *const *w, const float *c, const uint8_t *const *pf,
                                  int64_t nsb, float *y) {
    const __mmask64 even = 0x5555555555555555ull;
    q4i_coefs qb[2]; /* super-block sb + 1's formed before sb's sums, as for Q4_K */
    q6k_coefs(P, w, c, 0, &qb[0]);
    for (int64_t sb = 0; sb < nsb; sb++, y += PI_QK_K) {
        const size_t off = (size_t)sb * sizeof(pi_block_q6_K);
#pragma GCC unroll 8
        for (int r = 0; r < 2 * P; r++) prefetch_span(pf[r] + off, sizeof(pi_block_q6_K));
        if (sb + 1 < nsb) q6k_coefs(P, w, c, off + sizeof(pi_block_q6_K), &qb[(sb + 1) & 1]);
        const q4i_coefs *q = &qb[sb & 1];
        for (int h = 0; h < 2; h++) {
            __m512i acc[8];
#pragma GCC unroll 8
            for (int m = 0; m < 8; m++) acc[m] = _mm512_set1_epi32(q->corr[8 * h + m]);
#pragma GCC unroll 4
            for (int p = 0; p < P; p++) {
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) {
                    const __m512i z = q6_bytes2(w[2 * p] + off, w[2 * p + 1] + off, h, j);
#pragma GCC unroll 2
                    for (int t = 0; t < 2; t++) {
                        const __m512i x = _mm512_maskz_permutexvar_epi8(even, _mm512_load_si512(q6k_perm[t]), z);
                        acc[2 * j + t] = _mm512_dpwssd_epi32(acc[2 * j + t], x, _mm512_set1_epi32(q->kp[p][8 * h + 2 * j + t]));
                    }
                }
            }
#pragma GCC unroll 8
            for (int m = 0; m < 8; m++) {
                float *yp = y + 128 * h + 16 * m;
                _mm512_storeu_ps(yp, _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[m]), _mm512_set1_ps(q->sc[8 * h + m]),
                                                     _mm512_loadu_ps(yp)));
            }
        }
    }
}

/* ------------------------------------------------------------ entry points */

#define FLOAT_ROWS(tname, TYPE, esize)                                                                          \
    void pi_axpy_rows_##tname##_avx512(int64_t n, const float *a, const void *const *rows, int64_t count,      \
                                       float *y) {                                                              \
        PI_AXPY_ROWS_DRIVE(FL_PASS, a, rows, count, (size_t)n * (esize), TYPE, n, y);                           \
    }

FLOAT_ROWS(f32, PI_TYPE_F32, 4)
FLOAT_ROWS(f16, PI_TYPE_F16, 2)
FLOAT_ROWS(bf16, PI_TYPE_BF16, 2)

void pi_axpy_rows_q8_0_avx512(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) {
    const int64_t nb = n / PI_QK8_0;
    PI_AXPY_ROWS_DRIVE(Q8_0_PASS, a, rows, count, (size_t)nb * sizeof(pi_block_q8_0), nb, y);
}

/* The integer kernels' entry points: the VBMI version where the CPU has
   it, else the AVX2 table's (Cascade Lake, Cooper Lake), which gives the
   same bits. */
#define INT_ROWS(tname, PASS, block, per_block)                                                            \
    Q4I_ATTR static void tname##_rows_vbmi(int64_t n, const float *a, const void *const *rows, int64_t count,  \
                                           float *y) {                                                     \
        const int64_t nb = n / (per_block);                                                                 \
        PI_AXPY_ROWS_DRIVE_PAIRS(PASS, a, rows, count, (size_t)nb * sizeof(block), nb, y);                  \
    }                                                                                                       \
    void pi_axpy_rows_##tname##_avx512(int64_t n, const float *a, const void *const *rows, int64_t count,   \
                                       float *y) {                                                          \
        if (pi_cpu_get()->avx512vbmi && pi_cpu_get()->bmi2) tname##_rows_vbmi(n, a, rows, count, y);        \
        else pi_axpy_rows_##tname##_avx2(n, a, rows, count, y);                                             \
    }

INT_ROWS(q4_0, Q4_0_PASS, pi_block_q4_0, PI_QK4_0)
INT_ROWS(q4_1, Q4_1_PASS, pi_block_q4_1, 32)
INT_ROWS(q5_0, Q5_0_PASS, pi_block_q5_0, 32)
INT_ROWS(q5_1, Q5_1_PASS, pi_block_q5_1, 32)
INT_ROWS(q4_K, Q4K_INT_PASS, pi_block_q4_K, PI_QK_K)
INT_ROWS(q5_K, Q5K_INT_PASS, pi_block_q5_K, PI_QK_K)
INT_ROWS(q6_K, q6k_int_pass, pi_block_q6_K, PI_QK_K)
