/*
 * x86_avx2_down.c — the gathered axpy (axpy_rows, see kernels.h and
 * axpy_rows.h) of the "avx2" table, compiled with AVX2 + FMA + F16C.
 *
 * Q4_0, Q4_1, Q5_0, Q5_1 and the K-quants are added in integers, two rows per 16-bit
 * multiply-add (axpy_rows.h; their sections below). For the other types a
 * pass adds R rows (8, 4, 2 or 1) to y: y is walked in segments of 32
 * floats (4 registers) and each row's weights for the segment are unpacked
 * and added with one FMA per vector, row after row. Unpacking: F16 by
 * vcvtph2ps, BF16 by a 16-bit shift; Q8_0 bytes sign-extended and converted
 * (the scales of a row converted and multiplied by its coefficient 4 blocks
 * at a time, each block's then one broadcast from memory). F32/F16/BF16
 * rows of any length: the last n % 8 elements with scalar fmaf, which
 * rounds as the vector FMA does. Rows may start at any address: all loads
 * are unaligned and stay inside the row.
 *
 * What the integer passes avoid (each measured on a Zen 3 core with 8-row
 * groups of 4096-element rows): reading back 16-bit stores as one vector
 * (the blocks of 32's scales: a quarter of Q4_0's time), reordering each
 * group's sums into element order (y is put in the sums' order once per
 * call instead), three shifts per pair of nibble vectors (two nibbles are
 * used in place, their factors folded into the scale) and the scales'
 * dependency chains in front of the sums (the next span's coefficients are
 * computed first). Q4_0's gathered axpy went from 38-46% to 47-60% of a
 * matvec's rate (bench-kernels, 1 and 2 threads).
 */
#include "axpy_rows.h"
#include "x86_q4i.h"
#include "simd_common.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

INLINE float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
}

INLINE uint16_t u16_at(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

INLINE uint32_t u32_at(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The f16 values at p, p + bsz, .. of the next n blocks, at most 4, in one
   64-bit word (the first in the low bits, absent ones 0): put together in
   a general register and moved to a vector whole, since 16-bit stores read
   back as one vector would stall store forwarding (a quarter of Q4_0's
   time). */
INLINE uint64_t f16x4_at(const uint8_t *p, size_t bsz, int64_t n) {
    if (n >= 4) /* the common case without a loop */
        return (uint64_t)u16_at(p) | (uint64_t)u16_at(p + bsz) << 16 | (uint64_t)u16_at(p + 2 * bsz) << 32 |
               (uint64_t)u16_at(p + 3 * bsz) << 48;
    uint64_t v = 0;
    for (int t = 0; t < n; t++) v |= (uint64_t)u16_at(p + (size_t)t * bsz) << (16 * t);
    return v;
}

/* 8 bytes at p, sign-extended to 32-bit lanes. */
INLINE __m256i s8x8(const uint8_t *p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)); }

/* ------------------------------------------------------- F32, F16, BF16 */

INLINE __m256 fl_load(pi_type t, const uint8_t *w, int64_t i) {
    switch (t) {
    case PI_TYPE_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i)));
    case PI_TYPE_BF16:
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(w + 2 * i))), 16));
    default: return _mm256_loadu_ps((const float *)(w + 4 * i));
    }
}

INLINE float fl_scalar(pi_type t, const uint8_t *w, int64_t i) {
    uint16_t h;
    switch (t) {
    case PI_TYPE_F16: memcpy(&h, w + 2 * i, 2); return _cvtsh_ss(h);
    case PI_TYPE_BF16: memcpy(&h, w + 2 * i, 2); return pi_bf16_to_f32(h);
    default: {
        float f;
        memcpy(&f, w + 4 * i, 4);
        return f;
    }
    }
}

INLINE void fl_pass(pi_type t, const int R, const uint8_t *const *w, const float *c, const uint8_t *const *pf,
                    int64_t n, float *y) {
    const size_t es = t == PI_TYPE_F32 ? 4 : 2;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 acc[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) acc[j] = _mm256_loadu_ps(y + i + 8 * j);
#pragma GCC unroll 8
        for (int k = 0; k < R; k++) {
            const __m256 a = _mm256_set1_ps(c[k]);
            prefetch_span(pf[k] + i * es, 32 * es);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) acc[j] = _mm256_fmadd_ps(a, fl_load(t, w[k], i + 8 * j), acc[j]);
        }
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) _mm256_storeu_ps(y + i + 8 * j, acc[j]);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 acc = _mm256_loadu_ps(y + i);
#pragma GCC unroll 8
        for (int k = 0; k < R; k++) acc = _mm256_fmadd_ps(_mm256_set1_ps(c[k]), fl_load(t, w[k], i), acc);
        _mm256_storeu_ps(y + i, acc);
    }
    for (; i < n; i++) {
        float s = y[i];
#pragma GCC unroll 8
        for (int k = 0; k < R; k++) s = fmaf(c[k], fl_scalar(t, w[k], i), s);
        y[i] = s;
    }
}

#define FL_PASS(R, w, c, pf, t, n, y) fl_pass(t, R, w, c, pf, n, y)

/* ------------------------------------------------------------ Q8_0, Q4_0 */

/* cd[k][e] = c[k] * the f16 scale of block e from byte offset off on of
   row k (blocks bsz bytes, the scale first), for the next 4 blocks (fewer
   when nleft < 4): 4 scales gathered in a general register, converted and
   multiplied at once, so that a block's coefficient is one broadcast from
   memory (no shuffle). */
INLINE void block_scales(const int R, const uint8_t *const *w, const float *c, size_t off, size_t bsz,
                         int64_t nleft, float cd[][4]) {
#pragma GCC unroll 8
    for (int k = 0; k < R; k++) {
        const uint64_t d = f16x4_at(w[k] + off, bsz, nleft);
        _mm_storeu_ps(cd[k], _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi64_si128((long long)d)), _mm_set1_ps(c[k])));
    }
}

INLINE void q8_0_pass(const int R, const uint8_t *const *w, const float *c, const uint8_t *const *pf, int64_t nb,
                      float *y) {
    float cds[PI_AXPY_ROWS_GROUP][4];
    for (int64_t b = 0; b < nb; b++, y += PI_QK8_0) {
        const size_t off = (size_t)b * sizeof(pi_block_q8_0);
        if (b % 4 == 0) block_scales(R, w, c, off, sizeof(pi_block_q8_0), nb - b, cds);
        __m256 acc[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) acc[j] = _mm256_loadu_ps(y + 8 * j);
#pragma GCC unroll 8
        for (int k = 0; k < R; k++) {
            const uint8_t *p = w[k] + off;
            if (b % 2 == 0) prefetch_span(pf[k] + off, 2 * sizeof(pi_block_q8_0));
            const __m256 cd = _mm256_broadcast_ss(&cds[k][b % 4]);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) acc[j] = _mm256_fmadd_ps(cd, _mm256_cvtepi32_ps(s8x8(p + 2 + 8 * j)), acc[j]);
        }
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) _mm256_storeu_ps(y + 8 * j, acc[j]);
    }
}

/* ------------------------------------- the integer passes' pieces */

/* (axpy_rows.h) Per pair of rows and 16 bytes of packed nibbles: the two
   rows' bytes interleaved in 16-bit units (bytes 2 j, 2 j + 1 of row A,
   then of row B, in each 32-bit lane), so a
   lane's low and high 16 bits hold the pair's nibbles of one element after
   an AND (and for the last, a 12-bit shift): 4 vectors, elements 2 j,
   2 j + 1 (low nibbles) and the same of the high nibbles, each added by
   one pmaddwd with the pair's coefficients (the low and high nibbles' may
   differ: Q4_K's belong to two sub-blocks). The sums stay in that order:
   y is kept in it during the call (y_deal below).
   The accumulators hold their sums times Q4I_MUL[e]: the second and third
   vectors' nibbles are taken where they lie in their 16-bit units (bits
   8-11, 4-7) instead of shifted down. The factors are powers of two and
   the sums stay below 2^31 (8 rows x 32767 x 15 x 256 < 2^30, with Q4_0's
   start below 2^30 too), so they convert to float exactly and a scale
   divided by the same factor (exact, down to 2^-134) gives the same bits. */
static const int Q4I_MUL[4] = {1, 256, 16, 1};

INLINE void q4i_add16(__m256i *acc, const uint8_t *qa, const uint8_t *qb, __m256i kv_lo, __m256i kv_hi) {
    const __m128i a = _mm_loadu_si128((const __m128i *)qa), b = _mm_loadu_si128((const __m128i *)qb);
    const __m256i d = _mm256_set_m128i(_mm_unpackhi_epi16(a, b), _mm_unpacklo_epi16(a, b));
    /* the nibbles in place where they fit (Q4I_MUL): one shift, not three */
    const __m256i q0 = _mm256_and_si256(d, _mm256_set1_epi32(0x000f000f));
    const __m256i q1 = _mm256_and_si256(d, _mm256_set1_epi32(0x0f000f00));
    const __m256i q2 = _mm256_and_si256(d, _mm256_set1_epi32(0x00f000f0));
    const __m256i q3 = _mm256_and_si256(_mm256_srli_epi32(d, 12), _mm256_set1_epi32(0x000f000f));
    acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(q0, kv_lo));
    acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(q1, kv_lo));
    acc[2] = _mm256_add_epi32(acc[2], _mm256_madd_epi16(q2, kv_hi));
    acc[3] = _mm256_add_epi32(acc[3], _mm256_madd_epi16(q3, kv_hi));
}

/* v shifted left by s bits (right by -s when s < 0), 32-bit lanes. */
INLINE __m256i shift_by(__m256i v, int s) {
    return s >= 0 ? _mm256_sll_epi32(v, _mm_cvtsi32_si128(s)) : _mm256_srl_epi32(v, _mm_cvtsi32_si128(-s));
}

/* The two rows' qh bytes for 16 elements interleaved in 16-bit units as
   q4i_add16 does their quants (once per super-block and pair). */
INLINE __m256i q5_qh_pair(const uint8_t *ha, const uint8_t *hb) {
    const __m128i x = _mm_loadu_si128((const __m128i *)ha), z = _mm_loadu_si128((const __m128i *)hb);
    return _mm256_set_m128i(_mm_unpackhi_epi16(x, z), _mm_unpacklo_epi16(x, z));
}

/* q4i_add16 for Q5_K, with the same factors Q4I_MUL: h the pair's qh for
   the same 16 elements (q5_qh_pair), whose bit jlo (jlo + 1) is the fifth
   bit of the low (high) nibbles' quants, moved next to the nibble where it
   lies (the sums stay below 2^31: 8 rows x 32767 x 31 x 256). */
INLINE void q5i_add16(__m256i *acc, const uint8_t *qa, const uint8_t *qb, __m256i h, int jlo, __m256i kv_lo,
                      __m256i kv_hi) {
    const __m128i a = _mm_loadu_si128((const __m128i *)qa), b = _mm_loadu_si128((const __m128i *)qb);
    const __m256i d = _mm256_set_m128i(_mm_unpackhi_epi16(a, b), _mm_unpacklo_epi16(a, b));
    const __m256i h01 = shift_by(h, 4 - jlo); /* bit jlo of byte 0 to bit 4, of byte 1 to bit 12 */
    const __m256i q[4] = {
        _mm256_or_si256(_mm256_and_si256(d, _mm256_set1_epi32(0x000f000f)),
                        _mm256_and_si256(h01, _mm256_set1_epi32(0x00100010))),
        _mm256_or_si256(_mm256_and_si256(d, _mm256_set1_epi32(0x0f000f00)),
                        _mm256_and_si256(h01, _mm256_set1_epi32(0x10001000))),
        _mm256_or_si256(_mm256_and_si256(d, _mm256_set1_epi32(0x00f000f0)),
                        _mm256_and_si256(shift_by(h, 7 - jlo), _mm256_set1_epi32(0x01000100))),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(d, 12), _mm256_set1_epi32(0x000f000f)),
                        _mm256_and_si256(shift_by(h, -5 - jlo), _mm256_set1_epi32(0x00100010))),
    };
#pragma GCC unroll 4
    for (int e = 0; e < 4; e++) acc[e] = _mm256_add_epi32(acc[e], _mm256_madd_epi16(q[e], e < 2 ? kv_lo : kv_hi));
}

/* The integer passes leave a pair's sums with the even elements of each 16
   in one vector and the odd ones in the next (q4i_add16's acc[0], acc[1]).
   Rather than put every group's sums back in element order (4 shuffles per
   16 elements and group), a call keeps y in that order while it runs: y_deal
   moves each 16 floats' even elements before the odd ones, y_undeal moves
   them back (n a multiple of 16; values moved, not changed). */
INLINE void y_deal(float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __m256 a = _mm256_loadu_ps(y + i), b = _mm256_loadu_ps(y + i + 8);
        const __m256 ev = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)); /* 0 2 8 10 | 4 6 12 14 */
        const __m256 od = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
        _mm256_storeu_ps(y + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xd8)));
        _mm256_storeu_ps(y + i + 8, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), 0xd8)));
    }
}

INLINE void y_undeal(float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __m256 ev = _mm256_loadu_ps(y + i), od = _mm256_loadu_ps(y + i + 8);
        const __m256 lo = _mm256_unpacklo_ps(ev, od), hi = _mm256_unpackhi_ps(ev, od); /* 0-3 | 8-11, 4-7 | 12-15 */
        _mm256_storeu_ps(y + i, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_storeu_ps(y + i + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
}

/* Q6_K's passes (bytes_madd32) leave each 32 elements' sums as
   0 2 4 6 16 18 20 22 | 1 3 5 7 17 .. | 8 10 12 14 24 .. | 9 11 13 15 25 ..
   (4 vectors): y_deal32 puts each 32 floats of y in that order for the
   call, y_undeal32 back. */
INLINE void y_deal32(float *y, int64_t n) {
    const __m256i ev_od = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    for (int64_t i = 0; i < n; i += 32) {
        __m256 e[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) e[j] = _mm256_permutevar8x32_ps(_mm256_loadu_ps(y + i + 8 * j), ev_od);
        _mm256_storeu_ps(y + i, _mm256_permute2f128_ps(e[0], e[2], 0x20));
        _mm256_storeu_ps(y + i + 8, _mm256_permute2f128_ps(e[0], e[2], 0x31));
        _mm256_storeu_ps(y + i + 16, _mm256_permute2f128_ps(e[1], e[3], 0x20));
        _mm256_storeu_ps(y + i + 24, _mm256_permute2f128_ps(e[1], e[3], 0x31));
    }
}

INLINE void y_undeal32(float *y, int64_t n) {
    const __m256i back = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t i = 0; i < n; i += 32) {
        const __m256 v0 = _mm256_loadu_ps(y + i), v1 = _mm256_loadu_ps(y + i + 8);
        const __m256 v2 = _mm256_loadu_ps(y + i + 16), v3 = _mm256_loadu_ps(y + i + 24);
        _mm256_storeu_ps(y + i, _mm256_permutevar8x32_ps(_mm256_permute2f128_ps(v0, v1, 0x20), back));
        _mm256_storeu_ps(y + i + 8, _mm256_permutevar8x32_ps(_mm256_permute2f128_ps(v2, v3, 0x20), back));
        _mm256_storeu_ps(y + i + 16, _mm256_permutevar8x32_ps(_mm256_permute2f128_ps(v0, v1, 0x31), back));
        _mm256_storeu_ps(y + i + 24, _mm256_permutevar8x32_ps(_mm256_permute2f128_ps(v2, v3, 0x31), back));
    }
}

/* Two rows' quants as bytes (32 each, one weight a byte) added by pmaddwd
   with the pair's coefficients kv: the rows' bytes interleaved in 16-bit
   units, each lane's two bytes taken by a shift and an AND. acc[0] gets
   the pair's products of bytes 0, 2, 4, 6 | 16, 18, 20, 22 (a 128-bit lane
   each), acc[1] of the odd bytes, acc[2], acc[3] the same from 8 and 24. */
INLINE void bytes_madd32(__m256i *acc, __m256i qa, __m256i qb, __m256i kv) {
    const __m256i mb = _mm256_set1_epi32(0x00ff00ff);
    const __m256i dl = _mm256_unpacklo_epi16(qa, qb), dh = _mm256_unpackhi_epi16(qa, qb);
    acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(_mm256_and_si256(dl, mb), kv));
    acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(_mm256_and_si256(_mm256_srli_epi32(dl, 8), mb), kv));
    acc[2] = _mm256_add_epi32(acc[2], _mm256_madd_epi16(_mm256_and_si256(dh, mb), kv));
    acc[3] = _mm256_add_epi32(acc[3], _mm256_madd_epi16(_mm256_and_si256(_mm256_srli_epi32(dh, 8), mb), kv));
}

/* ------------------------------------------------------------ K-quants */

/* sm[0..8) = d * sc_j, sm[8..16) = -dmin * m_j for the 8 sub-blocks of a
   Q4_K / Q5_K block at p (exact products). */
INLINE void k4_scales(const uint8_t *p, float *sm) {
    const uint32_t u0 = u32_at(p + 4), u1 = u32_at(p + 8), u2 = u32_at(p + 12);
    const uint32_t sc03 = u0 & 0x3f3f3f3f, m03 = u1 & 0x3f3f3f3f;
    const uint32_t sc47 = (u2 & 0x0f0f0f0f) | ((u0 >> 6) & 0x03030303) << 4;
    const uint32_t m47 = ((u2 >> 4) & 0x0f0f0f0f) | ((u1 >> 6) & 0x03030303) << 4;
    const __m128i sc = _mm_setr_epi32((int)sc03, (int)sc47, 0, 0), mn = _mm_setr_epi32((int)m03, (int)m47, 0, 0);
    _mm256_storeu_ps(sm, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc)), _mm256_set1_ps(f16_at(p))));
    _mm256_storeu_ps(sm + 8,
                     _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mn)), _mm256_set1_ps(-f16_at(p + 2))));
}


/* One Q4_K / Q5_K super-block's coefficients for a group: kp[p][j] the
   packed pair p of sub-block j, sc[j] its scale, nbs[j] its mins' sum. */
typedef struct {
    int32_t kp[PI_AXPY_ROWS_GROUP / 2][8];
    float sc[8], nbs[8];
} q4k_coefs;

/* The coefficients of the super-block at byte offset off of the rows. */
INLINE void q4k_sb_coefs(const int P, const uint8_t *const *w, const float *c, size_t off, q4k_coefs *q) {
    float sm[PI_AXPY_ROWS_GROUP][16];
#pragma GCC unroll 8
    for (int r = 0; r < 2 * P; r++) k4_scales(w[r] + off, sm[r]);
    pi_q4k_coefs8(P, (const float (*)[16])sm, c, q->kp, q->sc, q->nbs);
}

/* Q4_K (Q5 = 0) and Q5_K (Q5 = 1) in integers (axpy_rows.h): per super-block, the rows' scales
   (k4_scales) give the 8 sub-blocks' coefficients and the mins' sums, a
   super-block ahead; then per pair of sub-blocks (32 quant bytes a row: low nibbles the first, high
   the second) two q4i_add16 per pair of rows. */
INLINE void q4k_int_pass(const int Q5, const int P, const uint8_t *const *w, const float *c, const uint8_t *const *pf,
                         int64_t nsb, float *y) {
    const size_t bsz = Q5 ? sizeof(pi_block_q5_K) : sizeof(pi_block_q4_K), qs_off = Q5 ? 48 : 16;
    q4k_coefs qc[2];
    q4k_sb_coefs(P, w, c, 0, &qc[0]);
    for (int64_t sb = 0; sb < nsb; sb++, y += PI_QK_K) {
        const size_t off = (size_t)sb * bsz;
#pragma GCC unroll 8
        for (int r = 0; r < 2 * P; r++) prefetch_span(pf[r] + off, bsz);
        /* the next super-block's coefficients first: their dependency
           chains then overlap this one's sums */
        if (sb + 1 < nsb) q4k_sb_coefs(P, w, c, off + bsz, &qc[(sb + 1) & 1]);
        const int32_t (*kp)[8] = qc[sb & 1].kp;
        const float *sc = qc[sb & 1].sc, *nbs = qc[sb & 1].nbs;
        __m256i hq[PI_AXPY_ROWS_GROUP / 2][2]; /* Q5_K: the pairs' qh, for every i */
        if (Q5)
#pragma GCC unroll 4
            for (int p = 0; p < P; p++)
                for (int h = 0; h < 2; h++) hq[p][h] = q5_qh_pair(w[2 * p] + off + 16 + 16 * h, w[2 * p + 1] + off + 16 + 16 * h);
        for (int i = 0; i < 4; i++) {
            /* acc[4 h + ..]: bytes 16 h .. 16 h + 15 of the pair of sub-blocks */
            __m256i acc[8];
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) acc[j] = _mm256_setzero_si256();
#pragma GCC unroll 4
            for (int p = 0; p < P; p++) {
                const __m256i klo = _mm256_set1_epi32(kp[p][2 * i]), khi = _mm256_set1_epi32(kp[p][2 * i + 1]);
                const size_t q = off + qs_off + 32 * (size_t)i;
#pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    const uint8_t *A = w[2 * p], *B = w[2 * p + 1];
                    if (Q5)
                        q5i_add16(acc + 4 * h, A + q + 16 * h, B + q + 16 * h, hq[p][h], 2 * i, klo, khi);
                    else
                        q4i_add16(acc + 4 * h, A + q + 16 * h, B + q + 16 * h, klo, khi);
                }
            }
#pragma GCC unroll 2
            for (int s = 0; s < 2; s++) { /* s = 0: sub-block 2 i (low nibbles), 1: 2 i + 1 */
                const __m256 b = _mm256_set1_ps(nbs[2 * i + s]);
                float *ys = y + 64 * i + 32 * s;
#pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
#pragma GCC unroll 2
                    for (int j = 0; j < 2; j++) { /* y dealt: the even elements' sums, then the odd ones' */
                        const int e = 2 * s + j;
                        const __m256 scv = _mm256_set1_ps(sc[2 * i + s] / (float)Q4I_MUL[e]);
                        const __m256 f = _mm256_cvtepi32_ps(acc[4 * h + e]);
                        float *yp = ys + 16 * h + 8 * j;
                        _mm256_storeu_ps(yp, _mm256_add_ps(_mm256_loadu_ps(yp), _mm256_fmadd_ps(f, scv, b)));
                    }
                }
            }
        }
    }
}

#define Q4K_INT_PASS(P, w, c, pf, nsb, y) q4k_int_pass(0, P, w, c, pf, nsb, y)
#define Q5K_INT_PASS(P, w, c, pf, nsb, y) q4k_int_pass(1, P, w, c, pf, nsb, y)

/* Q6_K in integers (axpy_rows.h): per super-block, the rows' 16
   d * scales[j] times their coefficients give the sub-blocks' 16-bit
   coefficients (pi_q4i_coefs8 twice); then per 32 weights (two sub-blocks
   of 16, one per 128-bit lane) and pair of rows, the rows' quants in bytes
   (pi_q6_bytes) interleaved in 16-bit units, each lane's two bytes taken
   by a shift and an AND, and added by pmaddwd with the lane's sub-block's
   coefficients. The accumulators start at -32 times the coefficients'
   sums. */
INLINE void q6k_int_pass(const int P, const uint8_t *const *w, const float *c, const uint8_t *const *pf,
                         int64_t nsb, float *y) {
    int32_t kp[PI_AXPY_ROWS_GROUP / 2][16], corr[16];
    float sc[16];
    for (int64_t sb = 0; sb < nsb; sb++, y += PI_QK_K) {
        const size_t off = (size_t)sb * sizeof(pi_block_q6_K);
#pragma GCC unroll 2
        for (int half = 0; half < 2; half++) {
            __m256 cd[PI_AXPY_ROWS_GROUP];
#pragma GCC unroll 8
            for (int r = 0; r < 2 * P; r++) {
                const uint8_t *p = w[r] + off;
                if (half == 0) prefetch_span(pf[r] + off, sizeof(pi_block_q6_K));
                const __m256 ds = _mm256_mul_ps(_mm256_cvtepi32_ps(s8x8(p + 192 + 8 * half)), _mm256_set1_ps(f16_at(p + 208)));
                cd[r] = _mm256_mul_ps(_mm256_set1_ps(c[r]), ds);
            }
            const __m256i ksum = pi_q4i_coefs8(P, cd, kp[0] + 8 * half, 16, sc + 8 * half);
            _mm256_storeu_si256((__m256i *)(corr + 8 * half), _mm256_mullo_epi32(ksum, _mm256_set1_epi32(-32)));
        }
        for (int s = 0; s < 8; s++) { /* weights 32 s ..: sub-blocks 2 s, 2 s + 1 */
            const int h = s / 4, j = s % 4;
            __m256i acc[4];
#pragma GCC unroll 4
            for (int e = 0; e < 4; e++) acc[e] = _mm256_set_m128i(_mm_set1_epi32(corr[2 * s + 1]), _mm_set1_epi32(corr[2 * s]));
#pragma GCC unroll 4
            for (int p = 0; p < P; p++) {
                const __m256i qa = pi_q6_bytes(w[2 * p] + off, h, j), qb = pi_q6_bytes(w[2 * p + 1] + off, h, j);
                const __m256i kv = _mm256_set_m128i(_mm_set1_epi32(kp[p][2 * s + 1]), _mm_set1_epi32(kp[p][2 * s]));
                bytes_madd32(acc, qa, qb, kv);
            }
            /* lane 0 of the accumulators: sub-block 2 s, lane 1: 2 s + 1; y
               dealt (y_deal32) in their order */
            const __m256 sv = _mm256_set_m128(_mm_set1_ps(sc[2 * s + 1]), _mm_set1_ps(sc[2 * s]));
#pragma GCC unroll 4
            for (int e = 0; e < 4; e++) {
                float *yp = y + 32 * s + 8 * e;
                _mm256_storeu_ps(yp, _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[e]), sv, _mm256_loadu_ps(yp)));
            }
        }
    }
}

/* ------------------------------------------- Q4_0, Q4_1, Q5_0, Q5_1 */

/* The 32 quants of the Q5_0 / Q5_1 block at p as bytes in element order
   (0..31: the nibbles and the fifth bits of qh). */
INLINE __m256i q5_bytes(pi_type T, const uint8_t *p) {
    const __m128i v = _mm_loadu_si128((const __m128i *)(p + pi_q32_qs(T))), m4 = _mm_set1_epi8(0x0f);
    const __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
    /* bit i of qh to byte i: bytes 0-7 of the lane from byte 0 of qh, .. */
    const __m256i sel = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                         3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i x = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)u32_at(p + pi_q32_qh(T))), sel), bit);
    return _mm256_or_si256(q, _mm256_and_si256(_mm256_cmpeq_epi8(x, bit), _mm256_set1_epi8(0x10)));
}

/* The f16 values at p, p + bsz, .. of the next n <= 8 blocks, converted
   (the others 0): f[0] from p, and with two f[1] from p + 2. */
INLINE void f16_blocks8(const uint8_t *p, size_t bsz, int n, const int two, __m256 *f) {
    for (int i = 0; i < 1 + two; i++) {
        const uint8_t *q = p + 2 * i;
        f[i] = _mm256_cvtph_ps(
            _mm_set_epi64x((long long)f16x4_at(q + 4 * bsz, bsz, n - 4), (long long)f16x4_at(q, bsz, n)));
    }
}

/* One span of up to 8 blocks' coefficients (axpy_rows.h): kp[p][t] the
   packed pair p of block t, corr[t] the accumulators' start, sc[t] the
   scale, nbs[t] the mins' sum. */
typedef struct {
    int32_t kp[PI_AXPY_ROWS_GROUP / 2][8];
    int32_t corr[8];
    float sc[8], nbs[8];
} q32_coefs;

/* The coefficients of the nbk <= 8 blocks from block b0 on: each row's
   scales d (and mins m), 8 in one conversion, times its coefficient. */
INLINE void q32_span_coefs(pi_type T, const int P, const uint8_t *const *w, const float *c, int64_t b0, int nbk,
                           q32_coefs *q) {
    const size_t bsz = pi_q32_bsz(T);
    const int mins = pi_q32_has_min(T);
    __m256 cd[PI_AXPY_ROWS_GROUP], nbv = _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < 2 * P; r++) {
        const __m256 a = _mm256_set1_ps(c[r]);
        __m256 dm[2];
        f16_blocks8(w[r] + (size_t)b0 * bsz, bsz, nbk, mins, dm);
        cd[r] = _mm256_mul_ps(dm[0], a);
        if (mins) nbv = _mm256_fmadd_ps(a, dm[1], nbv);
    }
    const __m256i ksum = pi_q4i_coefs8(P, cd, q->kp[0], 8, q->sc);
    _mm256_storeu_si256((__m256i *)q->corr, _mm256_mullo_epi32(ksum, _mm256_set1_epi32(-pi_q32_offset(T))));
    _mm256_storeu_ps(q->nbs, nbv);
}

/* The blocks of 32 in integers (axpy_rows.h; their layout pi_q32_*): a
   pass adds P pairs of rows (a group). Per span of 8 blocks, the rows'
   scales d (and mins m), 8 a row in one conversion, give the blocks'
   coefficients (pi_q4i_coefs8) and the mins' sums, a span ahead. Then
   per block and pair of rows: Q4_0 / Q4_1 by q4i_add16 on the packed
   nibbles; Q5_0 / Q5_1 with the rows' quants as bytes (q5_bytes,
   bytes_madd32). */
INLINE void q32_pass(pi_type T, const int P, const uint8_t *const *w, const float *c, const uint8_t *const *pf,
                     int64_t nb, float *y) {
    const size_t bsz = pi_q32_bsz(T);
    const int mins = pi_q32_has_min(T);
    static const int ones[4] = {1, 1, 1, 1};
    const int *mul = pi_q32_five(T) ? ones : Q4I_MUL; /* the sums' factors (bytes_madd32: none) */
    q32_coefs qc[2];
    q32_span_coefs(T, P, w, c, 0, nb < 8 ? (int)nb : 8, &qc[0]);
    for (int64_t b0 = 0, cur = 0; b0 < nb; b0 += 8, cur ^= 1) {
        const int nbk = nb - b0 < 8 ? (int)(nb - b0) : 8;
#pragma GCC unroll 8
        for (int r = 0; r < 2 * P; r++) prefetch_span(pf[r] + (size_t)b0 * bsz, (size_t)nbk * bsz);
        /* the next span's coefficients first: their dependency chains then
           overlap this span's sums */
        if (b0 + 8 < nb) q32_span_coefs(T, P, w, c, b0 + 8, nb - b0 - 8 < 8 ? (int)(nb - b0 - 8) : 8, &qc[cur ^ 1]);
        const q32_coefs *q = &qc[cur];
        for (int t = 0; t < nbk; t++) {
            const size_t off = (size_t)(b0 + t) * bsz;
            __m256i acc[4];
#pragma GCC unroll 4
            for (int e = 0; e < 4; e++) acc[e] = _mm256_set1_epi32(q->corr[t] * mul[e]);
#pragma GCC unroll 4
            for (int p = 0; p < P; p++) {
                const uint8_t *A = w[2 * p] + off, *B = w[2 * p + 1] + off;
                const __m256i kv = _mm256_set1_epi32(q->kp[p][t]);
                if (pi_q32_five(T)) bytes_madd32(acc, q5_bytes(T, A), q5_bytes(T, B), kv);
                else q4i_add16(acc, A + pi_q32_qs(T), B + pi_q32_qs(T), kv, kv);
            }
            /* y dealt (y_deal, or y_deal32 for Q5_0 / Q5_1): the sums' order */
            __m256 f[4];
#pragma GCC unroll 4
            for (int e = 0; e < 4; e++) f[e] = _mm256_cvtepi32_ps(acc[e]);
            const __m256 bv = _mm256_set1_ps(q->nbs[t]);
            float *yb = y + 32 * (b0 + t);
#pragma GCC unroll 4
            for (int e = 0; e < 4; e++) {
                const __m256 s = _mm256_set1_ps(q->sc[t] / (float)mul[e]);
                const __m256 yv = _mm256_loadu_ps(yb + 8 * e);
                _mm256_storeu_ps(yb + 8 * e, mins ? _mm256_add_ps(yv, _mm256_fmadd_ps(f[e], s, bv))
                                                  : _mm256_fmadd_ps(f[e], s, yv));
            }
        }
    }
}

#define Q4_0_PASS(P, w, c, pf, nb, y) q32_pass(PI_TYPE_Q4_0, P, w, c, pf, nb, y)
#define Q4_1_PASS(P, w, c, pf, nb, y) q32_pass(PI_TYPE_Q4_1, P, w, c, pf, nb, y)
#define Q5_0_PASS(P, w, c, pf, nb, y) q32_pass(PI_TYPE_Q5_0, P, w, c, pf, nb, y)
#define Q5_1_PASS(P, w, c, pf, nb, y) q32_pass(PI_TYPE_Q5_1, P, w, c, pf, nb, y)

/* ------------------------------------------------------------ entry points */

#define FLOAT_ROWS(tname, TYPE, esize)                                                                        \
    void pi_axpy_rows_##tname##_avx2(int64_t n, const float *a, const void *const *rows, int64_t count,      \
                                     float *y) {                                                              \
        PI_AXPY_ROWS_DRIVE(FL_PASS, a, rows, count, (size_t)n * (esize), TYPE, n, y);                         \
    }

FLOAT_ROWS(f32, PI_TYPE_F32, 4)
FLOAT_ROWS(f16, PI_TYPE_F16, 2)
FLOAT_ROWS(bf16, PI_TYPE_BF16, 2)

void pi_axpy_rows_q8_0_avx2(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) {
    const int64_t nb = n / PI_QK8_0;
    PI_AXPY_ROWS_DRIVE(q8_0_pass, a, rows, count, (size_t)nb * sizeof(pi_block_q8_0), nb, y);
}

void pi_axpy_rows_q4_0_avx2(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) {
    const int64_t nb = n / PI_QK4_0;
    y_deal(y, n);
    PI_AXPY_ROWS_DRIVE_PAIRS(Q4_0_PASS, a, rows, count, (size_t)nb * sizeof(pi_block_q4_0), nb, y);
    y_undeal(y, n);
}

void pi_axpy_rows_q4_K_avx2(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) {
    const int64_t nsb = n / PI_QK_K;
    y_deal(y, n);
    PI_AXPY_ROWS_DRIVE_PAIRS(Q4K_INT_PASS, a, rows, count, (size_t)nsb * sizeof(pi_block_q4_K), nsb, y);
    y_undeal(y, n);
}

void pi_axpy_rows_q5_K_avx2(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) {
    const int64_t nsb = n / PI_QK_K;
    y_deal(y, n);
    PI_AXPY_ROWS_DRIVE_PAIRS(Q5K_INT_PASS, a, rows, count, (size_t)nsb * sizeof(pi_block_q5_K), nsb, y);
    y_undeal(y, n);
}

void pi_axpy_rows_q6_K_avx2(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) {
    const int64_t nsb = n / PI_QK_K;
    y_deal32(y, n);
    PI_AXPY_ROWS_DRIVE_PAIRS(q6k_int_pass, a, rows, count, (size_t)nsb * sizeof(pi_block_q6_K), nsb, y);
    y_undeal32(y, n);
}

void pi_axpy_rows_q4_1_avx2(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) {
    y_deal(y, n);
    PI_AXPY_ROWS_DRIVE_PAIRS(Q4_1_PASS, a, rows, count, (size_t)(n / 32) * sizeof(pi_block_q4_1), n / 32, y);
    y_undeal(y, n);
}

void pi_axpy_rows_q5_0_avx2(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) {
    y_deal32(y, n);
    PI_AXPY_ROWS_DRIVE_PAIRS(Q5_0_PASS, a, rows, count, (size_t)(n / 32) * sizeof(pi_block_q5_0), n / 32, y);
    y_undeal32(y, n);
}

void pi_axpy_rows_q5_1_avx2(int64_t n, const float *a, const void *const *rows, int64_t count, float *y) {
    y_deal32(y, n);
    PI_AXPY_ROWS_DRIVE_PAIRS(Q5_1_PASS, a, rows, count, (size_t)(n / 32) * sizeof(pi_block_q5_1), n / 32, y);
    y_undeal32(y, n);
}
