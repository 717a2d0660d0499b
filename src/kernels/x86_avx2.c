/*
 * x86_avx2.c — the kernel table for AVX2 + FMA + F16C (x86-64 since ~2013).
 *
 * Compiled with those ISA flags only here; pi_kernels_get() hands this table out
 * only on CPUs that have all three. Semantics are ref.c's; quantize_q8_0 and
 * quantize_q8_K give ref's exact bytes. The K-quant kernels (Q4_K, Q5_K, Q6_K
 * weights) have their own section, with its own comment.
 *
 * The integer dots use vpmaddubsw (unsigned x signed bytes -> pairs summed to
 * int16) and vpmaddwd against ones (-> int32), then one float FMA per vector:
 *   - Q4_0: weights are loaded two blocks per 256-bit vector, as they lie in
 *     the file (no repacking), and the Q8_0 activation is prepared once per
 *     call to match: [A x0..15 | B x0..15] against the low nibbles, the same
 *     for x16..31 against the high nibbles, so one shift serves two blocks and
 *     the two products, the correction and one vpmaddwd give 4 int32 lanes per
 *     block. Nibbles are used unsigned (0..15), so no product saturates
 *     (15 * 127 * 2 < 32767); the offset of 8 comes out in int16 with the
 *     prepared -8 * (pair sums of the activation). The four f16 scales of a
 *     group of 4 blocks are gathered in a general register and converted at
 *     once. This halves the vector work per block compared with one block per
 *     vector, which on a 2-thread Sapphire Rapids was compute-bound at ~75%
 *     of DRAM bandwidth.
 *   - Q8_0: both operands are signed; vpmaddubsw takes |w| and x with w's sign,
 *     which cannot saturate either (128 * 127 * 2 < 32767).
 * Matvecs process four rows at a time so each activation load serves four
 * rows, keep vector accumulators per row, reduce once per row, and prefetch
 * one row group ahead (see simd_common.h). The quant row kernels take a
 * pointer per row: vec_dot_rows runs them on 4 rows of its list at a time
 * (prefetching the next 4), vec_dot on one, so both give the same bits for a
 * row. Quant rows are only 2-byte aligned; all loads are unaligned and stay
 * inside the row.
 *
 * The matmuls (batches of inputs) use tiles of 4 rows x 2 inputs, 8 vector
 * accumulators, which with the operands fill the 16 registers: a row's
 * nibbles are unpacked once for both inputs. They walk the rows chunk by
 * chunk (PI_MM_CHUNK) like the AVX-512 ones.
 */
#include "axpy_rows.h"
#include "simd_common.h"
#include "ref_k.h"
#include "x86_q4_1_q5.h"

#include <immintrin.h>

#define INLINE static inline __attribute__((always_inline))

/* ---------------------------------------------------------------- helpers */

INLINE float f16_scalar(pi_f16 h) { return _cvtsh_ss(h); }

/* f16_bcast and hsum256 are in x86_q4_1_q5.h */

/* The largest of v's 8 lanes. */
INLINE float hmax256(__m256 v) {
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    return _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
}

/* 8 weights of a float-like type, widened to f32. */
INLINE __m256 load8(pi_type t, const void *w, int64_t i) {
    switch (t) {
    case PI_TYPE_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const pi_f16 *)w + i)));
    case PI_TYPE_BF16: {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const pi_bf16 *)w + i)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    }
    default: return _mm256_loadu_ps((const float *)w + i);
    }
}

INLINE float tail_dot(pi_type t, int64_t i, int64_t n, const void *w, const float *x) {
    switch (t) {
    case PI_TYPE_F16: return pi_tail_dot_f16(i, n, w, x);
    case PI_TYPE_BF16: return pi_tail_dot_bf16(i, n, w, x);
    default: return pi_tail_dot_f32(i, n, w, x);
    }
}

/* ------------------------------------------------------------- quantize */

static void pi_quantize_q8_0_avx2(const float *x, pi_block_q8_0 *y, int64_t n) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < n / PI_QK8_0; b++) {
        const float *xb = x + b * PI_QK8_0;
        __m256 v[4];
        for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(xb + 8 * k);
        /* Same operations as ref: max|x| (order-free), one division, one
           reciprocal, one product, conversion in the MXCSR mode (round half to
           even, like nearbyintf). */
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], absmask), _mm256_and_ps(v[1], absmask)),
                                 _mm256_max_ps(_mm256_and_ps(v[2], absmask), _mm256_and_ps(v[3], absmask)));
        const float d = hmax256(m) / 127.0f;
        const __m256 id = _mm256_set1_ps(pi_simd_recip_scale(d));
        y[b].d = pi_f32_to_f16(d);
        __m256i i[4];
        for (int k = 0; k < 4; k++) i[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], id));
        /* the packs work per 128-bit half; the permute puts dwords back in order */
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
        _mm256_storeu_si256((__m256i *)y[b].qs, _mm256_permutevar8x32_epi32(p, order));
    }
}

/* ------------------------------------------------------- F32, F16, BF16 */

/* sums[k] = dot(row k, x) for R rows stride bytes apart; pf: how far ahead
   of the bytes being read to prefetch. */
INLINE void float_rows(pi_type t, const int R, int64_t n, const uint8_t *w, size_t stride, const float *x,
                       size_t pf, float *sums) {
    const size_t esize = t == PI_TYPE_F32 ? 4 : 2;
    __m256 acc0[4], acc1[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) acc0[k] = acc1[k] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            prefetch_span(w + k * stride + pf + i * esize, 16 * esize);
            acc0[k] = _mm256_fmadd_ps(load8(t, w + k * stride, i), x0, acc0[k]);
            acc1[k] = _mm256_fmadd_ps(load8(t, w + k * stride, i + 8), x1, acc1[k]);
        }
    }
    if (i + 8 <= n) {
        const __m256 x0 = _mm256_loadu_ps(x + i);
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) acc0[k] = _mm256_fmadd_ps(load8(t, w + k * stride, i), x0, acc0[k]);
        i += 8;
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
        sums[k] = hsum256(_mm256_add_ps(acc0[k], acc1[k])) + tail_dot(t, i, n, w + k * stride, x);
}

INLINE void float_matvec(pi_type t, int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,
                         const float *x, float *y) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4)
        float_rows(t, 4, n, (const uint8_t *)W + (size_t)r * stride, stride, x, pi_matvec_pf(stride, 4), y + r);
    for (; r < r1; r++)
        float_rows(t, 1, n, (const uint8_t *)W + (size_t)r * stride, stride, x, pi_matvec_pf(stride, 1), y + r);
}

INLINE void float_axpy(pi_type t, int64_t n, float a, const void *w, float *y) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, load8(t, w, i), _mm256_loadu_ps(y + i)));
    switch (t) {
    case PI_TYPE_F16: pi_tail_axpy_f16(i, n, a, w, y); break;
    case PI_TYPE_BF16: pi_tail_axpy_bf16(i, n, a, w, y); break;
    default: pi_tail_axpy_f32(i, n, a, w, y); break;
    }
}

static float pi_vec_dot_f32_avx2(int64_t n, const void *w, const void *x) {
    float s;
    prefetch_row_start(w, (size_t)n * 4);
    float_rows(PI_TYPE_F32, 1, n, w, 0, x, PI_VEC_DOT_PF, &s);
    return s;
}
static float pi_vec_dot_f16_avx2(int64_t n, const void *w, const void *x) {
    float s;
    prefetch_row_start(w, (size_t)n * 2);
    float_rows(PI_TYPE_F16, 1, n, w, 0, x, PI_VEC_DOT_PF, &s);
    return s;
}
static float pi_vec_dot_bf16_avx2(int64_t n, const void *w, const void *x) {
    float s;
    prefetch_row_start(w, (size_t)n * 2);
    float_rows(PI_TYPE_BF16, 1, n, w, 0, x, PI_VEC_DOT_PF, &s);
    return s;
}
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_f32_avx2, pi_vec_dot_f32_avx2)
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_f16_avx2, pi_vec_dot_f16_avx2)
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_bf16_avx2, pi_vec_dot_bf16_avx2)
static void pi_matvec_f32_avx2(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *x,
                               float *y) {
    float_matvec(PI_TYPE_F32, n, W, stride, r0, r1, x, y);
}
static void pi_matvec_f16_avx2(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *x,
                               float *y) {
    float_matvec(PI_TYPE_F16, n, W, stride, r0, r1, x, y);
}
static void pi_matvec_bf16_avx2(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *x,
                                float *y) {
    float_matvec(PI_TYPE_BF16, n, W, stride, r0, r1, x, y);
}
static void pi_axpy_f32_avx2(int64_t n, float a, const void *w, float *y) { float_axpy(PI_TYPE_F32, n, a, w, y); }
static void pi_axpy_f16_avx2(int64_t n, float a, const void *w, float *y) { float_axpy(PI_TYPE_F16, n, a, w, y); }
static void pi_axpy_bf16_avx2(int64_t n, float a, const void *w, float *y) { float_axpy(PI_TYPE_BF16, n, a, w, y); }

/* s[k * T + t] = dot(row k, input t) over n elements for R rows stride bytes
   apart and T f32 inputs xs bytes apart: each weight vector loaded serves T
   inputs, each input vector R rows (4 x 2: 8 accumulators, which with the
   operands fill the 16 registers). pf: prefetch distance (the next row tile). */
INLINE void float_tile(pi_type ty, const int R, const int T, int64_t n, const uint8_t *w, size_t stride,
                       const uint8_t *x, size_t xs, size_t pf, float *s) {
    const size_t esize = ty == PI_TYPE_F32 ? 4 : 2;
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) acc[k][t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 xv[2];
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) xv[t] = _mm256_loadu_ps((const float *)(x + t * xs) + i);
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            if (i % 32 == 0) prefetch_span(w + k * stride + pf + i * esize, 32 * esize);
            const __m256 wv = load8(ty, w + k * stride, i);
#pragma GCC unroll 2
            for (int t = 0; t < T; t++) acc[k][t] = _mm256_fmadd_ps(wv, xv[t], acc[k][t]);
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 2
        for (int t = 0; t < T; t++)
            s[k * T + t] = hsum256(acc[k][t]) + tail_dot(ty, i, n, w + k * stride, (const float *)(x + t * xs));
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
                if (R == 4 && T == 2) float_tile(ty, 4, 2, kn, wr, stride, xc, xs, 4 * stride, s);
                else if (R == 4) float_tile(ty, 4, 1, kn, wr, stride, xc, xs, 4 * stride, s);
                else if (T == 2) float_tile(ty, 1, 2, kn, wr, stride, xc, xs, stride, s);
                else float_tile(ty, 1, 1, kn, wr, stride, xc, xs, stride, s);
                for (int k = 0; k < R; k++)
                    for (int t = 0; t < T; t++) pi_mm_put(Y + (b + t) * ys + r + k, s[k * T + t], k0 == 0);
                r += R;
            }
            b += T;
        }
    }
}

static void pi_matmul_f32_avx2(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                               size_t xs, int64_t nb, float *Y, int64_t ys) {
    float_matmul(PI_TYPE_F32, n, W, stride, r0, r1, X, xs, nb, Y, ys);
}
static void pi_matmul_f16_avx2(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                               size_t xs, int64_t nb, float *Y, int64_t ys) {
    float_matmul(PI_TYPE_F16, n, W, stride, r0, r1, X, xs, nb, Y, ys);
}
static void pi_matmul_bf16_avx2(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                                size_t xs, int64_t nb, float *Y, int64_t ys) {
    float_matmul(PI_TYPE_BF16, n, W, stride, r0, r1, X, xs, nb, Y, ys);
}

/* ------------------------------------------------------------ Q4_0 x Q8_0 */

/* The activation for 4 consecutive blocks, laid out for weights loaded two
   blocks per 256-bit vector: pair j holds blocks A = 2j and B = 2j + 1 as
   [A's 16 packed bytes | B's 16 packed bytes], whose low nibbles are weights
   0..15 and high nibbles weights 16..31 of each block. */
typedef struct {
    __m256i xlo[2];   /* [A x[0..15] | B x[0..15]] */
    __m256i xhi[2];   /* [A x[16..31] | B x[16..31]] */
    __m256i ncorr[2]; /* int16 lane l: -8 * (xlo + xhi bytes 2l and 2l + 1) */
    __m128 dx;        /* d_x of the 4 blocks */
} q4_0_group;

/* Blocks past nb are zero (scale 0, no correction). */
INLINE __m256i x_qs_or_zero(const pi_block_q8_0 *x, int64_t b, int64_t nb) {
    return b < nb ? _mm256_loadu_si256((const __m256i *)x[b].qs) : _mm256_setzero_si256();
}

/* The prepared activation of blocks b..b+3 (those past nb read as zero). */
INLINE q4_0_group q4_0_make_group(const pi_block_q8_0 *x, int64_t b, int64_t nb) {
    const __m256i ones = _mm256_set1_epi8(1);
    q4_0_group g;
#pragma GCC unroll 2
    for (int j = 0; j < 2; j++) {
        const __m256i qa = x_qs_or_zero(x, b + 2 * j, nb), qb = x_qs_or_zero(x, b + 2 * j + 1, nb);
        g.xlo[j] = _mm256_permute2x128_si256(qa, qb, 0x20);
        g.xhi[j] = _mm256_permute2x128_si256(qa, qb, 0x31);
        const __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(ones, g.xlo[j]), _mm256_maddubs_epi16(ones, g.xhi[j]));
        g.ncorr[j] = _mm256_slli_epi16(_mm256_sub_epi16(_mm256_setzero_si256(), s), 3);
    }
    uint64_t d = 0;
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) d |= b + k < nb ? (uint64_t)x[b + k].d << (16 * k) : 0;
    g.dx = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)d));
    return g;
}

static void prep_q4_0(const pi_block_q8_0 *x, int64_t nb, q4_0_group *g) {
    for (int64_t b = 0; b < nb; b += 4) *g++ = q4_0_make_group(x, b, nb);
}

INLINE uint64_t load_u16(const uint8_t *p) {
    uint16_t v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}

/* acc += the 4 blocks of one group: q01 / q23 hold the packed bytes of
   blocks 0,1 and 2,3; d4 their 4 f16 scales in its low 64 bits. */
INLINE __m256 q4_0_group_dot(__m256 acc, const q4_0_group *G, __m256i q01, __m256i q23, __m128i d4) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones16 = _mm256_set1_epi16(1);
    const __m128 s4 = _mm_mul_ps(_mm_cvtph_ps(d4), G->dx);
    const __m256 s = _mm256_castps128_ps256(s4);
    const __m256i q[2] = {q01, q23};
    const __m256 sc[2] = {_mm256_permutevar8x32_ps(s, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1)),
                          _mm256_permutevar8x32_ps(s, _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3))};
#pragma GCC unroll 2
    for (int j = 0; j < 2; j++) {
        const __m256i lo = _mm256_and_si256(q[j], m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q[j], 4), m4);
        /* int16 partial sums stay within 2 * 3810 + 4064 */
        const __m256i p16 = _mm256_add_epi16(
            _mm256_add_epi16(_mm256_maddubs_epi16(lo, G->xlo[j]), _mm256_maddubs_epi16(hi, G->xhi[j])),
            G->ncorr[j]);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones16)), sc[j], acc);
    }
    return acc;
}

INLINE __m256i load_pair(const uint8_t *a, const uint8_t *b) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                                   _mm_loadu_si128((const __m128i *)b), 1);
}

/* acc[k] += one full group (4 blocks, at byte offset off) of row k of R rows
   (see pi_rows_targets for w and pf). */
INLINE void q4_0_rows_group(const int R, const uint8_t *const *w, const uint8_t *const *pf, size_t off,
                            const q4_0_group *G, __m256 *acc) {
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        const uint8_t *p = w[k] + off;
        prefetch_span(pf[k] + off, 4 * sizeof(pi_block_q4_0));
        /* the 4 scales gathered in a general register: cheaper than
           inserting words into a vector one by one */
        const uint64_t d = load_u16(p) | load_u16(p + 18) << 16 | load_u16(p + 36) << 32 | load_u16(p + 54) << 48;
        acc[k] = q4_0_group_dot(acc[k], G, load_pair(p + 2, p + 20), load_pair(p + 38, p + 56),
                                _mm_cvtsi64_si128((long long)d));
    }
}

/* sums[k] = dot over nb blocks of row w[k] for R rows, prefetching pf[k] (see
   pi_rows_targets). The activation of the first ng groups is prepared in g;
   the rest is prepared on the fly from x (a lone row, or a row longer than the
   prepared chunk). Each row's sum is the same float operations in the same
   order whatever R and ng are. */
INLINE void q4_0_rows(const int R, const uint8_t *const *w, const uint8_t *const *pf, const q4_0_group *g,
                      int64_t ng, const pi_block_q8_0 *x, int64_t nb, float *sums) {
    const size_t gsz = 4 * sizeof(pi_block_q4_0);
    __m256 acc[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) acc[k] = _mm256_setzero_ps();
    const int64_t nfull = nb / 4, nprep = ng < nfull ? ng : nfull;
    for (int64_t gi = 0; gi < nprep; gi++) q4_0_rows_group(R, w, pf, (size_t)gi * gsz, g + gi, acc);
    for (int64_t gi = nprep; gi < nfull; gi++) {
        const q4_0_group xg = q4_0_make_group(x, 4 * gi, nb);
        q4_0_rows_group(R, w, pf, (size_t)gi * gsz, &xg, acc);
    }
    if (nb > nfull * 4) {
        /* 1-3 blocks: absent ones read as zero bytes (their activation and
           scale are zero too) */
        const int64_t m = nb - nfull * 4;
        q4_0_group xg;
        if (nfull >= ng) xg = q4_0_make_group(x, 4 * nfull, nb);
        const q4_0_group *G = nfull < ng ? g + nfull : &xg;
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const uint8_t *p = w[k] + (size_t)nfull * gsz;
            __m128i qb[4];
            uint64_t d = 0;
            for (int64_t j = 0; j < 4; j++) {
                qb[j] = j < m ? _mm_loadu_si128((const __m128i *)(p + 18 * j + 2)) : _mm_setzero_si128();
                d |= j < m ? load_u16(p + 18 * j) << (16 * j) : 0;
            }
            acc[k] = q4_0_group_dot(acc[k], G, _mm256_set_m128i(qb[1], qb[0]), _mm256_set_m128i(qb[3], qb[2]),
                                    _mm_cvtsi64_si128((long long)d));
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) sums[k] = hsum256(acc[k]);
}

/* The row pointers of rows [r, r + R) of a matrix and, as prefetch targets,
   the rows R further on (at least PI_MATVEC_PF_MIN bytes on). */
INLINE void matrix_targets(const uint8_t *base, size_t stride, int64_t r, const int R, const uint8_t **w,
                           const uint8_t **pf) {
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        w[k] = base + (size_t)(r + k) * stride;
        pf[k] = w[k] + pi_matvec_pf(stride, R);
    }
}

static void pi_matvec_q4_0_q8_0_avx2(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,
                                     const void *vx, float *y) {
    const pi_block_q8_0 *x = vx;
    const int64_t nb = n / PI_QK4_0;
    q4_0_group g[PI_SIMD_CHUNK_BLOCKS / 4];
    if (nb == 0)
        for (int64_t r = r0; r < r1; r++) y[r] = 0.0f;
    for (int64_t c0 = 0; c0 < nb; c0 += PI_SIMD_CHUNK_BLOCKS) {
        const int64_t cb = nb - c0 < PI_SIMD_CHUNK_BLOCKS ? nb - c0 : PI_SIMD_CHUNK_BLOCKS, ng = (cb + 3) / 4;
        prep_q4_0(x + c0, cb, g);
        const uint8_t *base = (const uint8_t *)W + c0 * sizeof(pi_block_q4_0);
        const uint8_t *w[4], *pf[4];
        float s[4];
        int64_t r = r0;
        for (; r + 4 <= r1; r += 4) {
            matrix_targets(base, stride, r, 4, w, pf);
            q4_0_rows(4, w, pf, g, ng, NULL, cb, s);
            for (int k = 0; k < 4; k++) y[r + k] = c0 ? y[r + k] + s[k] : s[k];
        }
        for (; r < r1; r++) {
            matrix_targets(base, stride, r, 1, w, pf);
            q4_0_rows(1, w, pf, g, ng, NULL, cb, s);
            y[r] = c0 ? y[r] + s[0] : s[0];
        }
    }
}

static float pi_vec_dot_q4_0_q8_0_avx2(int64_t n, const void *w, const void *x) {
    /* One row: the activation groups are built as they are needed (preparing
       them ahead would cost a second pass). */
    const uint8_t *wr[1] = {w}, *pf[1] = {wr[0] + PI_VEC_DOT_PF};
    float s;
    prefetch_row_start(w, (size_t)(n / PI_QK4_0) * sizeof(pi_block_q4_0));
    q4_0_rows(1, wr, pf, NULL, 0, x, n / PI_QK4_0, &s);
    return s;
}

/* As pi_vec_dot_rows_q4_0_q8_0_avx512: the same bits as vec_dot per row. */
static void pi_vec_dot_rows_q4_0_q8_0_avx2(int64_t n, const void *const *rows, int64_t count, const void *vx,
                                           float *out) {
    const pi_block_q8_0 *x = vx;
    const int64_t nb = n / PI_QK4_0, cb = nb < PI_SIMD_CHUNK_BLOCKS ? nb : PI_SIMD_CHUNK_BLOCKS;
    if (count <= 0) return;
    pi_rows_prefetch_start(rows, count, (size_t)nb * sizeof(pi_block_q4_0));
    q4_0_group g[PI_SIMD_CHUNK_BLOCKS / 4];
    prep_q4_0(x, cb, g);
    PI_VEC_DOT_ROWS_GATHER(q4_0_rows, rows, count, out, g, (cb + 3) / 4, x, nb);
}

static void pi_axpy_q4_0_avx2(int64_t n, float a, const void *vw, float *y) {
    const pi_block_q4_0 *w = vw;
    const __m128i m4 = _mm_set1_epi8(0x0f), eights = _mm_set1_epi8(8);
    for (int64_t b = 0; b < n / PI_QK4_0; b++, y += PI_QK4_0) {
        const __m256 ad = _mm256_set1_ps(a * f16_scalar(w[b].d));
        const __m128i q = _mm_loadu_si128((const __m128i *)w[b].qs);
        const __m128i lo = _mm_sub_epi8(_mm_and_si128(q, m4), eights);
        const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), m4), eights);
        const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
        for (int k = 0; k < 4; k++) {
            const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[k]));
            _mm256_storeu_ps(y + 8 * k, _mm256_fmadd_ps(ad, f, _mm256_loadu_ps(y + 8 * k)));
        }
    }
}

/* One group (m = 4 blocks, or the 1-3 of a row's partial last group) of R
   rows against T inputs' prepared groups gs[t]: each row's nibbles are
   unpacked and its scales converted once for all T inputs. */
INLINE void q4_0_tile_group(const int R, const int T, const uint8_t *w, size_t stride, int64_t m, size_t pf,
                            const q4_0_group *const *gs, int64_t gi, __m256 acc[4][2]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones16 = _mm256_set1_epi16(1);
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        const uint8_t *p = w + k * stride;
        __m256i q[2];
        uint64_t d = 0;
        if (m == 4) {
            prefetch_span(p + pf, 4 * sizeof(pi_block_q4_0));
            d = load_u16(p) | load_u16(p + 18) << 16 | load_u16(p + 36) << 32 | load_u16(p + 54) << 48;
            q[0] = load_pair(p + 2, p + 20);
            q[1] = load_pair(p + 38, p + 56);
        } else {
            /* absent blocks read as zero bytes (their activation and scale
               are zero too) */
            __m128i qb[4];
            for (int64_t j = 0; j < 4; j++) {
                qb[j] = j < m ? _mm_loadu_si128((const __m128i *)(p + 18 * j + 2)) : _mm_setzero_si128();
                d |= j < m ? load_u16(p + 18 * j) << (16 * j) : 0;
            }
            q[0] = _mm256_set_m128i(qb[1], qb[0]);
            q[1] = _mm256_set_m128i(qb[3], qb[2]);
        }
        const __m256i lo[2] = {_mm256_and_si256(q[0], m4), _mm256_and_si256(q[1], m4)};
        const __m256i hi[2] = {_mm256_and_si256(_mm256_srli_epi16(q[0], 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(q[1], 4), m4)};
        const __m128 dw = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)d));
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) {
            const q4_0_group *G = gs[t] + gi;
            const __m256 s4 = _mm256_castps128_ps256(_mm_mul_ps(dw, G->dx));
            const __m256 sc[2] = {_mm256_permutevar8x32_ps(s4, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1)),
                                  _mm256_permutevar8x32_ps(s4, _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3))};
#pragma GCC unroll 2
            for (int j = 0; j < 2; j++) {
                /* as in q4_0_group_dot: the int16 sums cannot saturate */
                const __m256i p16 = _mm256_add_epi16(
                    _mm256_add_epi16(_mm256_maddubs_epi16(lo[j], G->xlo[j]), _mm256_maddubs_epi16(hi[j], G->xhi[j])),
                    G->ncorr[j]);
                acc[k][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones16)), sc[j], acc[k][t]);
            }
        }
    }
}

/* s[k * T + t] = the dot over nb blocks of row k (R rows stride bytes apart)
   with input t, prepared in gs[t]. pf: prefetch distance (the next row tile). */
INLINE void q4_0_tile(const int R, const int T, const uint8_t *w, size_t stride, const q4_0_group *const *gs,
                      int64_t nb, size_t pf, float *s) {
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) acc[k][t] = _mm256_setzero_ps();
    const int64_t nfull = nb / 4;
    for (int64_t gi = 0; gi < nfull; gi++)
        q4_0_tile_group(R, T, w + gi * (4 * sizeof(pi_block_q4_0)), stride, 4, pf, gs, gi, acc);
    if (nb > nfull * 4)
        q4_0_tile_group(R, T, w + nfull * (4 * sizeof(pi_block_q4_0)), stride, nb - nfull * 4, pf, gs, nfull, acc);
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) s[k * T + t] = hsum256(acc[k][t]);
}

/* Chunk by chunk (PI_MM_CHUNK): 2 inputs at a time are prepared as for the
   matvec, then every row tile of [r0, r1) is multiplied with them, 4 rows x
   2 inputs per tile. */
static void pi_matmul_q4_0_q8_0_avx2(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,
                                     const void *X, size_t xs, int64_t nb, float *Y, int64_t ys) {
    enum { CB = PI_MM_CHUNK / PI_QK4_0 };
    const int64_t nblk = n / PI_QK4_0;
    q4_0_group g[2][CB / 4];
    const q4_0_group *const gs[2] = {g[0], g[1]};
    for (int64_t c0 = 0; c0 == 0 || c0 < nblk; c0 += CB) {
        const int64_t cb = nblk - c0 < CB ? nblk - c0 : CB;
        const uint8_t *wc = (const uint8_t *)W + c0 * sizeof(pi_block_q4_0);
        for (int64_t b = 0; b < nb;) {
            const int T = nb - b >= 2 ? 2 : 1;
            for (int t = 0; t < T; t++)
                prep_q4_0((const pi_block_q8_0 *)((const uint8_t *)X + (size_t)(b + t) * xs) + c0, cb, g[t]);
            for (int64_t r = r0; r < r1;) {
                const int R = r1 - r >= 4 ? 4 : 1;
                const uint8_t *wr = wc + (size_t)r * stride;
                float s[8];
                if (R == 4 && T == 2) q4_0_tile(4, 2, wr, stride, gs, cb, 4 * stride, s);
                else if (R == 4) q4_0_tile(4, 1, wr, stride, gs, cb, 4 * stride, s);
                else if (T == 2) q4_0_tile(1, 2, wr, stride, gs, cb, stride, s);
                else q4_0_tile(1, 1, wr, stride, gs, cb, stride, s);
                for (int k = 0; k < R; k++)
                    for (int t = 0; t < T; t++) pi_mm_put(Y + (b + t) * ys + r + k, s[k * T + t], c0 == 0);
                r += R;
            }
            b += T;
        }
    }
}

/* ------------------------------------------------------------ Q8_0 x Q8_0 */

/* Integer dot of one block pair as 8 int32 lanes. */
INLINE __m256i q8_0_block_dot(__m256i wq, __m256i xq) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_abs_epi8(wq), _mm256_sign_epi8(xq, wq));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* sums[k] = dot over nb blocks of row w[k] for R rows, prefetching pf[k] (see
   pi_rows_targets). */
INLINE void q8_0_rows(const int R, const uint8_t *const *w, const uint8_t *const *pf, const pi_block_q8_0 *x,
                      int64_t nb, float *sums) {
    __m256 acc[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) acc[k] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const __m256i xq = _mm256_loadu_si256((const __m256i *)x[b].qs);
        const __m256 vdx = _mm256_set1_ps(f16_scalar(x[b].d));
        const size_t off = (size_t)b * sizeof(pi_block_q8_0);
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const uint8_t *p = w[k] + off;
            if (b % 2 == 0) prefetch_span(pf[k] + off, 2 * sizeof(pi_block_q8_0));
            const __m256 f = _mm256_cvtepi32_ps(q8_0_block_dot(_mm256_loadu_si256((const __m256i *)(p + 2)), xq));
            acc[k] = _mm256_fmadd_ps(f, _mm256_mul_ps(f16_bcast(p), vdx), acc[k]);
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) sums[k] = hsum256(acc[k]);
}

static void pi_matvec_q8_0_q8_0_avx2(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,
                                     const void *x, float *y) {
    const int64_t nb = n / PI_QK8_0;
    const uint8_t *w[4], *pf[4];
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
        matrix_targets(W, stride, r, 4, w, pf);
        q8_0_rows(4, w, pf, x, nb, y + r);
    }
    for (; r < r1; r++) {
        matrix_targets(W, stride, r, 1, w, pf);
        q8_0_rows(1, w, pf, x, nb, y + r);
    }
}

static float pi_vec_dot_q8_0_q8_0_avx2(int64_t n, const void *w, const void *x) {
    const uint8_t *wr[1] = {w}, *pf[1] = {wr[0] + PI_VEC_DOT_PF};
    float s;
    prefetch_row_start(w, (size_t)(n / PI_QK8_0) * sizeof(pi_block_q8_0));
    q8_0_rows(1, wr, pf, x, n / PI_QK8_0, &s);
    return s;
}

/* 4 rows at a time, each activation block loaded once for 4 rows: the same
   bits as vec_dot per row. */
static void pi_vec_dot_rows_q8_0_q8_0_avx2(int64_t n, const void *const *rows, int64_t count, const void *x,
                                           float *out) {
    if (count <= 0) return;
    pi_rows_prefetch_start(rows, count, (size_t)(n / PI_QK8_0) * sizeof(pi_block_q8_0));
    PI_VEC_DOT_ROWS_GATHER(q8_0_rows, rows, count, out, x, n / PI_QK8_0);
}

static void pi_axpy_q8_0_avx2(int64_t n, float a, const void *vw, float *y) {
    const pi_block_q8_0 *w = vw;
    for (int64_t b = 0; b < n / PI_QK8_0; b++, y += PI_QK8_0) {
        const __m256 ad = _mm256_set1_ps(a * f16_scalar(w[b].d));
        for (int k = 0; k < 4; k++) {
            const __m128i q = _mm_loadl_epi64((const __m128i *)(w[b].qs + 8 * k));
            const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
            _mm256_storeu_ps(y + 8 * k, _mm256_fmadd_ps(ad, f, _mm256_loadu_ps(y + 8 * k)));
        }
    }
}

/* s[k * T + t] = the dot over nb blocks of row k (R rows stride bytes apart)
   with input t (xs bytes apart): |w| is taken once per row and block for all
   T inputs. pf: prefetch distance (the next row tile). */
INLINE void q8_0_tile(const int R, const int T, const uint8_t *w, size_t stride, const pi_block_q8_0 *x, size_t xs,
                      int64_t nb, size_t pf, float *s) {
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) acc[k][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i xq[2];
        __m256 dx[2];
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) {
            const pi_block_q8_0 *xb = (const pi_block_q8_0 *)((const uint8_t *)x + t * xs) + b;
            xq[t] = _mm256_loadu_si256((const __m256i *)xb->qs);
            dx[t] = _mm256_set1_ps(f16_scalar(xb->d));
        }
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const uint8_t *p = w + k * stride + b * sizeof(pi_block_q8_0);
            if (b % 2 == 0) prefetch_span(p + pf, 2 * sizeof(pi_block_q8_0));
            const __m256i wq = _mm256_loadu_si256((const __m256i *)(p + 2));
            const __m256i aw = _mm256_abs_epi8(wq);
            const __m256 dw = f16_bcast(p);
#pragma GCC unroll 2
            for (int t = 0; t < T; t++) {
                /* as in q8_0_block_dot */
                const __m256i p16 = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(xq[t], wq));
                const __m256 f = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
                acc[k][t] = _mm256_fmadd_ps(f, _mm256_mul_ps(dw, dx[t]), acc[k][t]);
            }
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 2
        for (int t = 0; t < T; t++) s[k * T + t] = hsum256(acc[k][t]);
}

/* Chunk by chunk (PI_MM_CHUNK), tiles of 4 rows x 2 inputs. */
static void pi_matmul_q8_0_q8_0_avx2(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,
                                     const void *X, size_t xs, int64_t nb, float *Y, int64_t ys) {
    enum { CB = PI_MM_CHUNK / PI_QK8_0 };
    const int64_t nblk = n / PI_QK8_0;
    for (int64_t c0 = 0; c0 == 0 || c0 < nblk; c0 += CB) {
        const int64_t cb = nblk - c0 < CB ? nblk - c0 : CB;
        const uint8_t *wc = (const uint8_t *)W + c0 * sizeof(pi_block_q8_0);
        for (int64_t b = 0; b < nb;) {
            const int T = nb - b >= 2 ? 2 : 1;
            const pi_block_q8_0 *xc = (const pi_block_q8_0 *)((const uint8_t *)X + (size_t)b * xs) + c0;
            for (int64_t r = r0; r < r1;) {
                const int R = r1 - r >= 4 ? 4 : 1;
                const uint8_t *wr = wc + (size_t)r * stride;
                float s[8];
                if (R == 4 && T == 2) q8_0_tile(4, 2, wr, stride, xc, xs, cb, 4 * stride, s);
                else if (R == 4) q8_0_tile(4, 1, wr, stride, xc, xs, cb, 4 * stride, s);
                else if (T == 2) q8_0_tile(1, 2, wr, stride, xc, xs, cb, stride, s);
                else q8_0_tile(1, 1, wr, stride, xc, xs, cb, stride, s);
                for (int k = 0; k < R; k++)
                    for (int t = 0; t < T; t++) pi_mm_put(Y + (b + t) * ys + r + k, s[k * T + t], c0 == 0);
                r += R;
            }
            b += T;
        }
    }
}

/* ------------------------------------------------------------- K-quants */

/*
 * Q4_K, Q5_K and Q6_K rows against Q8_K activations, super-block (256
 * weights) by super-block, with exact integer sums: vpmaddubsw multiplies
 * the unsigned weights (Q4_K 0..15, Q5_K 0..31, Q6_K 0..63) by the signed
 * activation bytes, pairs to int16 (at most 2 * 63 * 128 < 2^15, so no
 * saturation), and vpmaddwd multiplies those by the sub-block's scale
 * (a vector of it, one vpshufd of the unpacked scales) into int32.
 * A 32-byte load of Q4_K / Q5_K qs holds two whole sub-blocks (low and high
 * nibbles), a 32-byte Q6_K vector two sub-blocks of 16 (one per 128-bit
 * lane), each against 32 consecutive activation bytes, so the activation
 * needs no rearranging: its per-super-block values (d_x, and the bsums
 * terms below) are made as each super-block comes, once for all the rows of
 * a call's row group. Then, per super-block, the int32 sum times d_w * d_x
 * in one float FMA; Q4_K / Q5_K's mins are one more FMA of dmin * m_j
 * against -d_x * (the two bsums of sub-block j), 8 lanes; Q6_K's offset of
 * 32 is taken out in integers, 32 * sum of scales[k] * bsums[k].
 *
 * The matmuls use tiles of 4 rows x 2 inputs as the Q4_0 one: a row's
 * scales are unpacked once per super-block and its nibbles once per 32
 * bytes for both inputs.
 */

/* quantize_q8_K: ref's operations (the first element of largest magnitude,
   one division for the scale, one product per element, clamping, rounding in
   the MXCSR mode, one division for d), so the same bytes. */
static void pi_quantize_q8_K_avx2(const float *x, pi_block_q8_K *y, int64_t n) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256 lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < n / PI_QK_K; b++) {
        const float *xb = x + b * PI_QK_K;
        __m256 m = _mm256_setzero_ps();
        for (int k = 0; k < 32; k++) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(xb + 8 * k), absmask));
        const float amax = hmax256(m);
        if (amax == 0.0f) {
            __builtin_memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        int at = -1;
        for (int k = 0; k < 32 && at < 0; k++) {
            const __m256 a = _mm256_and_ps(_mm256_loadu_ps(xb + 8 * k), absmask);
            const int e = _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (e) at = 8 * k + __builtin_ctz((unsigned)e);
        }
        if (at < 0) { /* NaNs: no element equals the max; ref decides */
            pi_quantize_q8_K_ref(xb, &y[b], PI_QK_K);
            continue;
        }
        const float iscale = -127.0f / xb[at];
        if (isinf(iscale)) {
            __builtin_memset(&y[b], 0, sizeof y[b]);
            y[b].d = 1.0f / iscale;
            continue;
        }
        const __m256 is = _mm256_set1_ps(iscale);
        __m256i s4[8]; /* per 32 quants: the sums of each 4 */
        for (int c = 0; c < 8; c++) {
            __m256i i32[4];
            for (int k = 0; k < 4; k++) {
                const __m256 v = _mm256_mul_ps(is, _mm256_loadu_ps(xb + 32 * c + 8 * k));
                i32[k] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, lo), hi));
            }
            /* the packs work per 128-bit half; the permute puts dwords back in order */
            const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i32[0], i32[1]), _mm256_packs_epi32(i32[2], i32[3]));
            const __m256i q = _mm256_permutevar8x32_epi32(p, order);
            _mm256_storeu_si256((__m256i *)(y[b].qs + 32 * c), q);
            s4[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
        }
        /* bsums: two rounds of horizontal adds give, per 128-bit lane, the
           sums of 16 of four chunks (chunk c holds bsums 2c and 2c + 1, its
           first 16 bytes in the low lane): lanes [0 2 4 6 | 1 3 5 7] and
           [8 10 12 14 | 9 11 13 15]; packed to words and interleaved */
        const __m256i s0 = _mm256_hadd_epi32(_mm256_hadd_epi32(s4[0], s4[1]), _mm256_hadd_epi32(s4[2], s4[3]));
        const __m256i s1 = _mm256_hadd_epi32(_mm256_hadd_epi32(s4[4], s4[5]), _mm256_hadd_epi32(s4[6], s4[7]));
        const __m256i w = _mm256_packs_epi32(s0, s1);
        const __m128i we = _mm256_castsi256_si128(w), wo = _mm256_extracti128_si256(w, 1);
        _mm_storeu_si128((__m128i *)y[b].bsums, _mm_unpacklo_epi16(we, wo));
        _mm_storeu_si128((__m128i *)(y[b].bsums + 8), _mm_unpackhi_epi16(we, wo));
        y[b].d = 1.0f / iscale;
    }
}

INLINE size_t kq_bytes(pi_type t) {
    return t == PI_TYPE_Q4_K ? sizeof(pi_block_q4_K) : t == PI_TYPE_Q5_K ? sizeof(pi_block_q5_K) : sizeof(pi_block_q6_K);
}

INLINE uint32_t kq_load_u32(const uint8_t *p) {
    uint32_t v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}

/* The per-super-block values of an activation block. */
typedef struct {
    __m256 fm; /* Q4_K / Q5_K: lane j -d_x * (bsums[2j] + bsums[2j+1]) */
    __m256 dx; /* d_x in every lane */
} kq_act;

INLINE kq_act kq_make(pi_type t, const pi_block_q8_K *x) {
    kq_act g;
    g.dx = _mm256_set1_ps(x->d);
    if (t == PI_TYPE_Q6_K) g.fm = _mm256_setzero_ps(); /* unused */
    else {
        const __m256i b8 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsums), _mm256_set1_epi16(1));
        g.fm = _mm256_mul_ps(_mm256_cvtepi32_ps(b8), _mm256_set1_ps(-x->d));
    }
    return g;
}

/* The 6-bit scales (bytes 0..7) and mins (bytes 8..15) of a Q4_K / Q5_K
   block from its 12 scale bytes at s (the 16-byte load ends inside the
   block). With the bytes as dwords a, b, c: scales 0..3 are a & 63, 4..7
   (c & 15) | (a >> 6) << 4 per byte; mins 0..3 b & 63, 4..7
   (c >> 4) | (b >> 6) << 4. */
INLINE __m128i k4_scales(const uint8_t *s) {
    const __m128i v = _mm_loadu_si128((const __m128i *)s);
    const __m128i t1 = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)); /* a c b c */
    const __m128i t2 = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)); /* a a b b */
    const __m128i l = _mm_and_si128(_mm_srlv_epi32(t1, _mm_setr_epi32(0, 0, 0, 4)),
                                    _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    const __m128i h = _mm_and_si128(_mm_srli_epi32(t2, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm_or_si128(l, h);
}

/* Bit b (0..7) of each byte of v moved to bit 4 (other bits unspecified):
   16-bit shifts by at most 4 keep a byte's bit 4 within the byte. */
INLINE __m256i kq_bit_to_4(__m256i v, int b) { return b <= 4 ? _mm256_slli_epi16(v, 4 - b) : _mm256_srli_epi16(v, b - 4); }

/* Dword k (0..3) of each 128-bit lane of v in all four of its dwords. */
INLINE __m256i kq_dword(__m256i v, int k) {
    switch (k & 3) {
    case 0: return _mm256_shuffle_epi32(v, 0x00);
    case 1: return _mm256_shuffle_epi32(v, 0x55);
    case 2: return _mm256_shuffle_epi32(v, 0xaa);
    default: return _mm256_shuffle_epi32(v, 0xff);
    }
}

/* acc[t] += the super-block at p of one row against T inputs' blocks xb[t]
   (with G[t] made from them by kq_make). */
INLINE void kq_row_block(pi_type t, const int T, const uint8_t *p, const pi_block_q8_K *const *xb, const kq_act *G,
                         __m256 *acc) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i isum[2];
    __m256 dw, mf = _mm256_setzero_ps();
    if (t == PI_TYPE_Q6_K) {
        const __m256i m2 = _mm256_set1_epi8(0x30);
        dw = _mm256_set1_ps(f16_scalar((pi_f16)load_u16(p + 208)));
        const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 192)));
        /* the offset: -32 * sum of scales[k] * bsums[k] */
#pragma GCC unroll 2
        for (int tt = 0; tt < T; tt++) {
            const __m256i c = _mm256_madd_epi16(sc, _mm256_loadu_si256((const __m256i *)xb[tt]->bsums));
            isum[tt] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(c, 5));
        }
        /* per 128-bit lane of the scale words of a half, as dwords holding a
           scale in both words: scales 0, 2, 4, 6 of the half in the low
           lane, 1, 3, 5, 7 in the high one */
        const __m256i pair = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 2, 3, 2, 3, 6, 7, 6, 7,
                                              10, 11, 10, 11, 14, 15, 14, 15);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i sh = _mm256_shuffle_epi8(
                h ? _mm256_permute2x128_si256(sc, sc, 0x11) : _mm256_permute2x128_si256(sc, sc, 0x00), pair);
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(p + 64 * h));
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(p + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h));
            /* weights 32j..32j+31 of the half: sub-blocks 8h + 2j (low lane)
               and 8h + 2j + 1 (high lane) */
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m2));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2));
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                /* words: scale 2j of the half in the low lane, 2j + 1 in the high */
                const __m256i s = kq_dword(sh, j);
#pragma GCC unroll 2
                for (int tt = 0; tt < T; tt++) {
                    const __m256i xq = _mm256_loadu_si256((const __m256i *)(xb[tt]->qs + 128 * h + 32 * j));
                    isum[tt] = _mm256_add_epi32(isum[tt], _mm256_madd_epi16(_mm256_maddubs_epi16(q[j], xq), s));
                }
            }
        }
    } else {
        const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)kq_load_u32(p))); /* d, dmin */
        dw = _mm256_broadcastss_ps(dm);
        const __m128i s8 = k4_scales(p + 4);
        mf = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(s8, 8))),
                           _mm256_broadcastss_ps(_mm_movehdup_ps(dm)));
        /* the 8 scales as dwords holding a scale in both words: 0..3 in sa,
           4..7 in sb, in both 128-bit lanes */
        const __m128i sw = _mm_cvtepu8_epi16(s8);
        const __m256i sa = _mm256_broadcastsi128_si256(_mm_unpacklo_epi16(sw, sw));
        const __m256i sb = _mm256_broadcastsi128_si256(_mm_unpackhi_epi16(sw, sw));
        const uint8_t *qs = p + (t == PI_TYPE_Q4_K ? 16 : 48);
        const __m256i qh = t == PI_TYPE_Q5_K ? _mm256_loadu_si256((const __m256i *)(p + 16)) : _mm256_setzero_si256();
        const __m256i m16 = _mm256_set1_epi8(16);
#pragma GCC unroll 2
        for (int tt = 0; tt < T; tt++) isum[tt] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            /* sub-blocks 2i (low nibbles) and 2i + 1 (high) */
            const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * i));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (t == PI_TYPE_Q5_K) {
                lo = _mm256_or_si256(lo, _mm256_and_si256(kq_bit_to_4(qh, 2 * i), m16));
                hi = _mm256_or_si256(hi, _mm256_and_si256(kq_bit_to_4(qh, 2 * i + 1), m16));
            }
            const __m256i slo = kq_dword(i < 2 ? sa : sb, 2 * i), shi = kq_dword(i < 2 ? sa : sb, 2 * i + 1);
#pragma GCC unroll 2
            for (int tt = 0; tt < T; tt++) {
                const __m256i x0 = _mm256_loadu_si256((const __m256i *)(xb[tt]->qs + 64 * i));
                const __m256i x1 = _mm256_loadu_si256((const __m256i *)(xb[tt]->qs + 64 * i + 32));
                const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, x0), slo),
                                                   _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x1), shi));
                isum[tt] = _mm256_add_epi32(isum[tt], s);
            }
        }
    }
#pragma GCC unroll 2
    for (int tt = 0; tt < T; tt++) {
        acc[tt] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[tt]), _mm256_mul_ps(dw, G[tt].dx), acc[tt]);
        if (t != PI_TYPE_Q6_K) acc[tt] = _mm256_fmadd_ps(mf, G[tt].fm, acc[tt]);
    }
}

/* sums[k] = dot over nsb super-blocks of row w[k] for R rows, prefetching
   pf[k] (see pi_rows_targets). The activation's per-super-block values are
   made once per super-block for the R rows; each row's sum is the same
   operations in the same order whatever R is. */
INLINE void kq_rows(pi_type t, const int R, const uint8_t *const *w, const uint8_t *const *pf,
                    const pi_block_q8_K *x, int64_t nsb, float *sums) {
    __m256 acc[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) acc[k] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const size_t off = (size_t)sb * kq_bytes(t);
        const pi_block_q8_K *xb[1] = {x + sb};
        const kq_act G = kq_make(t, x + sb);
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            prefetch_span(pf[k] + off, kq_bytes(t));
            kq_row_block(t, 1, w[k] + off, xb, &G, &acc[k]);
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) sums[k] = hsum256(acc[k]);
}

/* s[k * T + tt] = the dot over nsb super-blocks of row k (R rows stride bytes
   apart) with input tt (xs bytes apart). pf: prefetch distance (the next row
   tile). */
INLINE void kq_tile(pi_type t, const int R, const int T, const uint8_t *w, size_t stride, const pi_block_q8_K *x,
                    size_t xs, int64_t nsb, size_t pf, float *s) {
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 2
        for (int tt = 0; tt < T; tt++) acc[k][tt] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const pi_block_q8_K *xb[2];
        kq_act G[2];
#pragma GCC unroll 2
        for (int tt = 0; tt < T; tt++) {
            xb[tt] = (const pi_block_q8_K *)((const uint8_t *)x + tt * xs) + sb;
            G[tt] = kq_make(t, xb[tt]);
        }
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const uint8_t *p = w + k * stride + (size_t)sb * kq_bytes(t);
            prefetch_span(p + pf, kq_bytes(t));
            kq_row_block(t, T, p, xb, G, acc[k]);
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 2
        for (int tt = 0; tt < T; tt++) s[k * T + tt] = hsum256(acc[k][tt]);
}

/* Chunk by chunk (PI_MM_CHUNK), tiles of 4 rows x 2 inputs. */
INLINE void kq_matmul(pi_type t, int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                      size_t xs, int64_t nb, float *Y, int64_t ys) {
    enum { CB = PI_MM_CHUNK / PI_QK_K };
    const int64_t nsb = n / PI_QK_K;
    for (int64_t c0 = 0; c0 == 0 || c0 < nsb; c0 += CB) {
        const int64_t cb = nsb - c0 < CB ? nsb - c0 : CB;
        const uint8_t *wc = (const uint8_t *)W + (size_t)c0 * kq_bytes(t);
        for (int64_t b = 0; b < nb;) {
            const int T = nb - b >= 2 ? 2 : 1;
            const pi_block_q8_K *xc = (const pi_block_q8_K *)((const uint8_t *)X + (size_t)b * xs) + c0;
            for (int64_t r = r0; r < r1;) {
                const int R = r1 - r >= 4 ? 4 : 1;
                const uint8_t *wr = wc + (size_t)r * stride;
                float s[8];
                if (R == 4 && T == 2) kq_tile(t, 4, 2, wr, stride, xc, xs, cb, 4 * stride, s);
                else if (R == 4) kq_tile(t, 4, 1, wr, stride, xc, xs, cb, 4 * stride, s);
                else if (T == 2) kq_tile(t, 1, 2, wr, stride, xc, xs, cb, stride, s);
                else kq_tile(t, 1, 1, wr, stride, xc, xs, cb, stride, s);
                for (int k = 0; k < R; k++)
                    for (int tt = 0; tt < T; tt++) pi_mm_put(Y + (b + tt) * ys + r + k, s[k * T + tt], c0 == 0);
                r += R;
            }
            b += T;
        }
    }
}

/* y += a * w in one FMA per element, w the weight exactly as
   pi_dequantize_row gives it: Q4_K / Q5_K d * sc * q - dmin * m (one FMA of
   exact operands, one rounding), Q6_K d * scales[k] * (q - 32) (exact). The
   same bits as axpy_rows on one row. */
INLINE void kq_axpy(pi_type t, int64_t n, float a, const void *vw, float *y) {
    const uint8_t *w = vw;
    const __m256 va = _mm256_set1_ps(a);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t sb = 0; sb < n / PI_QK_K; sb++, y += PI_QK_K) {
        const uint8_t *p = w + (size_t)sb * kq_bytes(t);
        if (t == PI_TYPE_Q6_K) {
            /* lane k of ds[h]: d * scales[8h + k] */
            const __m256 d = _mm256_set1_ps(f16_scalar((pi_f16)load_u16(p + 208)));
            const __m128i s8 = _mm_loadu_si128((const __m128i *)(p + 192));
            const __m256 ds[2] = {_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s8)), d),
                                  _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(s8, 8))), d)};
            const __m256i m2 = _mm256_set1_epi8(0x30), off = _mm256_set1_epi8(32);
            for (int h = 0; h < 2; h++) {
                const __m256i l0 = _mm256_loadu_si256((const __m256i *)(p + 64 * h));
                const __m256i l1 = _mm256_loadu_si256((const __m256i *)(p + 64 * h + 32));
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h));
                __m256i q[4];
                q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2));
                q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2));
                q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m2));
                q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                       _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2));
                for (int j = 0; j < 4; j++) {
                    const __m256i qs = _mm256_sub_epi8(q[j], off); /* q - 32 */
                    float *yj = y + 128 * h + 32 * j;
                    for (int e = 0; e < 2; e++) {
                        const __m256 c = _mm256_permutevar8x32_ps(ds[h], _mm256_set1_epi32(2 * j + e));
                        const __m128i part = e ? _mm256_extracti128_si256(qs, 1) : _mm256_castsi256_si128(qs);
                        for (int hh = 0; hh < 2; hh++) {
                            const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hh ? _mm_srli_si128(part, 8) : part));
                            float *yy = yj + 16 * e + 8 * hh;
                            _mm256_storeu_ps(yy, _mm256_fmadd_ps(va, _mm256_mul_ps(c, f), _mm256_loadu_ps(yy)));
                        }
                    }
                }
            }
            continue;
        }
        /* lane j: d * sc_j and -dmin * m_j, both exact */
        const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)kq_load_u32(p)));
        const __m128i s8 = k4_scales(p + 4);
        const __m256 d1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(s8)), _mm256_broadcastss_ps(dm));
        const __m256 nm1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(s8, 8))),
                                         _mm256_broadcastss_ps(_mm_sub_ps(_mm_setzero_ps(), _mm_movehdup_ps(dm))));
        const uint8_t *qs = p + (t == PI_TYPE_Q4_K ? 16 : 48);
        const __m256i qh = t == PI_TYPE_Q5_K ? _mm256_loadu_si256((const __m256i *)(p + 16)) : _mm256_setzero_si256();
        const __m256i m16 = _mm256_set1_epi8(16);
        for (int i = 0; i < 4; i++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * i));
            __m256i v[2] = {_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4)};
            if (t == PI_TYPE_Q5_K) {
                v[0] = _mm256_or_si256(v[0], _mm256_and_si256(kq_bit_to_4(qh, 2 * i), m16));
                v[1] = _mm256_or_si256(v[1], _mm256_and_si256(kq_bit_to_4(qh, 2 * i + 1), m16));
            }
            for (int e = 0; e < 2; e++) {
                const __m256i j = _mm256_set1_epi32(2 * i + e);
                const __m256 dj = _mm256_permutevar8x32_ps(d1, j), mj = _mm256_permutevar8x32_ps(nm1, j);
                float *yj = y + 32 * (2 * i + e);
                for (int k = 0; k < 4; k++) {
                    const __m128i part = k < 2 ? _mm256_castsi256_si128(v[e]) : _mm256_extracti128_si256(v[e], 1);
                    const __m128i q8 = k & 1 ? _mm_srli_si128(part, 8) : part;
                    const __m256 wv = _mm256_fmadd_ps(dj, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q8)), mj);
                    _mm256_storeu_ps(yj + 8 * k, _mm256_fmadd_ps(va, wv, _mm256_loadu_ps(yj + 8 * k)));
                }
            }
        }
    }
}

/* The kernels of one K-quant type (tname: q4_K, q5_K, q6_K). */
#define KQ_KERNELS(TYPE, tname)                                                                                   \
    INLINE void tname##_rows(const int R, const uint8_t *const *w, const uint8_t *const *pf,                      \
                             const pi_block_q8_K *x, int64_t nsb, float *sums) {                                  \
        kq_rows(TYPE, R, w, pf, x, nsb, sums);                                                                    \
    }                                                                                                             \
    static float pi_vec_dot_##tname##_q8_K_avx2(int64_t n, const void *w, const void *x) {                        \
        const uint8_t *wr[1] = {w}, *pf[1] = {wr[0] + PI_VEC_DOT_PF};                                             \
        float s;                                                                                                  \
        prefetch_row_start(w, (size_t)(n / PI_QK_K) * kq_bytes(TYPE));                                            \
        tname##_rows(1, wr, pf, x, n / PI_QK_K, &s);                                                              \
        return s;                                                                                                 \
    }                                                                                                             \
    /* 4 rows at a time with the next 4 prefetched: the same bits as vec_dot per row */                          \
    static void pi_vec_dot_rows_##tname##_q8_K_avx2(int64_t n, const void *const *rows, int64_t count,            \
                                                    const void *x, float *out) {                                  \
        if (count <= 0) return;                                                                                   \
        pi_rows_prefetch_start(rows, count, (size_t)(n / PI_QK_K) * kq_bytes(TYPE));                              \
        PI_VEC_DOT_ROWS_GATHER(tname##_rows, rows, count, out, x, n / PI_QK_K);                                   \
    }                                                                                                             \
    static void pi_matvec_##tname##_q8_K_avx2(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,    \
                                              const void *x, float *y) {                                          \
        const uint8_t *w[4], *pf[4];                                                                              \
        int64_t r = r0;                                                                                           \
        for (; r + 4 <= r1; r += 4) {                                                                             \
            matrix_targets(W, stride, r, 4, w, pf);                                                               \
            tname##_rows(4, w, pf, x, n / PI_QK_K, y + r);                                                        \
        }                                                                                                         \
        for (; r < r1; r++) {                                                                                     \
            matrix_targets(W, stride, r, 1, w, pf);                                                               \
            tname##_rows(1, w, pf, x, n / PI_QK_K, y + r);                                                        \
        }                                                                                                         \
    }                                                                                                             \
    static void pi_matmul_##tname##_q8_K_avx2(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,    \
                                              const void *X, size_t xs, int64_t nb, float *Y, int64_t ys) {       \
        kq_matmul(TYPE, n, W, stride, r0, r1, X, xs, nb, Y, ys);                                                  \
    }                                                                                                             \
    static void pi_axpy_##tname##_avx2(int64_t n, float a, const void *w, float *y) { kq_axpy(TYPE, n, a, w, y); }

KQ_KERNELS(PI_TYPE_Q4_K, q4_K)
KQ_KERNELS(PI_TYPE_Q5_K, q5_K)
KQ_KERNELS(PI_TYPE_Q6_K, q6_K)

/* Q4_1, Q5_0, Q5_1 (x86_q4_1_q5.h) */
LQ_KERNELS(avx2, PI_TYPE_Q4_1, q4_1)
LQ_KERNELS(avx2, PI_TYPE_Q5_0, q5_0)
LQ_KERNELS(avx2, PI_TYPE_Q5_1, q5_1)

/* ------------------------------------------------------------- softmax */

PI_DEFINE_EXP_R(exp_r256, __m256, _mm256)

/* exp(x): exp(r) times 2^n built in the exponent field; x below -87.3
   gives 0 (x held there so that n stays a normal exponent). A NaN stays
   NaN. */
static inline __m256 exp256(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.3365448f);
    const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(lo, x); /* the second operand passes a NaN through */
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(exp_r256(x, n), _mm256_castsi256_ps(e)));
}

/* The lanes of the last n % 8 elements (n - i of them). */
static inline __m256i tail_mask8(int64_t left) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline __m256d add_pd8(__m256d s, __m256 e) {
    return _mm256_add_pd(_mm256_add_pd(s, _mm256_cvtps_pd(_mm256_castps256_ps128(e))),
                         _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
}

static void pi_softmax_avx2(float *x, int64_t n) {
    __m256 mv = _mm256_set1_ps(x[0]);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
    const __m256i tm = tail_mask8(n - i);
    if (i < n) mv = _mm256_max_ps(mv, _mm256_blendv_ps(mv, _mm256_maskload_ps(x + i, tm), _mm256_castsi256_ps(tm)));
    const __m256 m = _mm256_set1_ps(hmax256(mv));
    __m256d sum = _mm256_setzero_pd();
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
        _mm256_storeu_ps(x + i, e);
        sum = add_pd8(sum, e);
    }
    if (i < n) {
        const __m256 e = _mm256_and_ps(exp256(_mm256_sub_ps(_mm256_maskload_ps(x + i, tm), m)), _mm256_castsi256_ps(tm));
        _mm256_maskstore_ps(x + i, tm, e);
        sum = add_pd8(sum, e);
    }
    __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(sum), _mm256_extractf128_pd(sum, 1));
    s2 = _mm_add_sd(s2, _mm_unpackhi_pd(s2, s2));
    const __m256 inv = _mm256_set1_ps((float)(1.0 / _mm_cvtsd_f64(s2)));
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    if (i < n) _mm256_maskstore_ps(x + i, tm, _mm256_mul_ps(_mm256_maskload_ps(x + i, tm), inv));
}

const pi_kernels pi_kernels_avx2 = {
    .name = "avx2",
    .quantize_q8_0 = pi_quantize_q8_0_avx2,
    .quantize_q8_K = pi_quantize_q8_K_avx2,
    .softmax = pi_softmax_avx2,
    .vec_dot =
        {
            [PI_TYPE_F32] = pi_vec_dot_f32_avx2,
            [PI_TYPE_F16] = pi_vec_dot_f16_avx2,
            [PI_TYPE_BF16] = pi_vec_dot_bf16_avx2,
            [PI_TYPE_Q8_0] = pi_vec_dot_q8_0_q8_0_avx2,
            [PI_TYPE_Q4_0] = pi_vec_dot_q4_0_q8_0_avx2,
            [PI_TYPE_Q4_K] = pi_vec_dot_q4_K_q8_K_avx2,
            [PI_TYPE_Q5_K] = pi_vec_dot_q5_K_q8_K_avx2,
            [PI_TYPE_Q6_K] = pi_vec_dot_q6_K_q8_K_avx2,
        },
    .vec_dot_rows =
        {
            [PI_TYPE_F32] = pi_vec_dot_rows_f32_avx2,
            [PI_TYPE_F16] = pi_vec_dot_rows_f16_avx2,
            [PI_TYPE_BF16] = pi_vec_dot_rows_bf16_avx2,
            [PI_TYPE_Q8_0] = pi_vec_dot_rows_q8_0_q8_0_avx2,
            [PI_TYPE_Q4_0] = pi_vec_dot_rows_q4_0_q8_0_avx2,
            [PI_TYPE_Q4_K] = pi_vec_dot_rows_q4_K_q8_K_avx2,
            [PI_TYPE_Q5_K] = pi_vec_dot_rows_q5_K_q8_K_avx2,
            [PI_TYPE_Q6_K] = pi_vec_dot_rows_q6_K_q8_K_avx2,
        },
    .axpy =
        {
            [PI_TYPE_F32] = pi_axpy_f32_avx2,
            [PI_TYPE_F16] = pi_axpy_f16_avx2,
            [PI_TYPE_BF16] = pi_axpy_bf16_avx2,
            [PI_TYPE_Q8_0] = pi_axpy_q8_0_avx2,
            [PI_TYPE_Q4_0] = pi_axpy_q4_0_avx2,
            [PI_TYPE_Q4_K] = pi_axpy_q4_K_avx2,
            [PI_TYPE_Q5_K] = pi_axpy_q5_K_avx2,
            [PI_TYPE_Q6_K] = pi_axpy_q6_K_avx2,
        },
    .axpy_rows = PI_AXPY_ROWS_TABLE(avx2),
    .matvec =
        {
            [PI_TYPE_F32] = pi_matvec_f32_avx2,
            [PI_TYPE_F16] = pi_matvec_f16_avx2,
            [PI_TYPE_BF16] = pi_matvec_bf16_avx2,
            [PI_TYPE_Q8_0] = pi_matvec_q8_0_q8_0_avx2,
            [PI_TYPE_Q4_0] = pi_matvec_q4_0_q8_0_avx2,
            [PI_TYPE_Q4_K] = pi_matvec_q4_K_q8_K_avx2,
            [PI_TYPE_Q5_K] = pi_matvec_q5_K_q8_K_avx2,
            [PI_TYPE_Q6_K] = pi_matvec_q6_K_q8_K_avx2,
        },
    .matmul =
        {
            [PI_TYPE_F32] = pi_matmul_f32_avx2,
            [PI_TYPE_F16] = pi_matmul_f16_avx2,
            [PI_TYPE_BF16] = pi_matmul_bf16_avx2,
            [PI_TYPE_Q8_0] = pi_matmul_q8_0_q8_0_avx2,
            [PI_TYPE_Q4_0] = pi_matmul_q4_0_q8_0_avx2,
            [PI_TYPE_Q4_K] = pi_matmul_q4_K_q8_K_avx2,
            [PI_TYPE_Q5_K] = pi_matmul_q5_K_q8_K_avx2,
            [PI_TYPE_Q6_K] = pi_matmul_q6_K_q8_K_avx2,
        },
    PI_LQ_TABLE_SLOTS(avx2),
};
