/*
 * x86_avx512.c — the kernel table for AVX-512 (F, BW, VL, DQ) + VNNI + FMA + F16C.
 *
 * Compiled with those ISA flags only here; pi_kernels_get() hands this table out
 * only on CPUs that have all of them. Semantics are ref.c's; quantize_q8_0 gives
 * ref's exact bytes.
 *
 * The quant matvecs are built to be memory-bound: a decode step streams every
 * weight byte once, so a Q4_0 row must cost well under the ~4 cycles per 18-byte
 * block that DRAM bandwidth leaves per core. Hence:
 *   - the Q8_0 activation is prepared once per call into a layout that lines up
 *     with the weights as they lie in the file (no repacking of the weights):
 *     groups of 4 blocks (Q4_0) or 2 blocks (Q8_0) per 512-bit vector, with the
 *     per-lane correction for unsigned weights (see below) and the activation
 *     scales broadcast to the lanes of their block;
 *   - VNNI vpdpbusd multiplies unsigned by signed bytes, so weights are made
 *     unsigned (Q4_0 nibbles as they are, Q8_0 plus 128) and the offset is
 *     removed exactly by starting each accumulation at -8 (or -128) times the
 *     sum of the activation bytes feeding that lane: the integer dot per block
 *     is exact, and no instruction is spent on the correction;
 *   - scales are taken from a 64-byte load of the group with one word permute
 *     and one F16C conversion, giving each lane its block's d_w;
 *   - four rows are processed together so activation loads are shared, each row
 *     keeps a vector accumulator and is reduced horizontally once;
 *   - the rows one row group ahead are prefetched (see simd_common.h): without
 *     it the Q4_0 matvec streams at ~45% of the DRAM bandwidth, with it at ~93%;
 *   - the row kernels take a pointer per row, so vec_dot_rows (a list of
 *     scattered rows: the sparse FFN's gate and up rows) runs them on 4 rows
 *     of the list at a time with the activation prepared once per call,
 *     prefetching the list's next 4 rows, and vec_dot is the same kernel on
 *     one row: both give the same bits for a row.
 * Quant rows are only 2-byte aligned (18- and 34-byte blocks); every load is
 * unaligned and no plain load reaches past the last block of a row (partial
 * groups use masked loads, which do not fault).
 *
 * The matmuls (a batch of inputs, for prompts) are compute-bound instead: each
 * weight row is read once per call for all inputs, and what counts is the
 * work per product. They use register tiles of 4 rows x 4 inputs (16 vector
 * accumulators): a row's nibbles are unpacked and its scales converted once
 * for 4 inputs, an input's prepared activation is loaded once for 4 rows.
 * They walk the rows chunk by chunk (simd_common.h, PI_MM_CHUNK), preparing
 * 4 inputs' activation per chunk on the stack. ~95 int8 GMAC/s per core for
 * Q4_0, 2x the matvec per input. Float weights: the same tiles with FMAs.
 *
 * This file also defines the "amx" table: the same kernels, but Q4_0 and Q8_0
 * batches of PI_AMX_MIN_NB inputs or more go to the AMX tiles (x86_amx.c).
 */
#include "simd_common.h"
#include "ref_k.h"
#include "x86_amx.h"

#include <immintrin.h>

#define INLINE static inline __attribute__((always_inline))

/* ---------------------------------------------------------------- helpers */

INLINE float f16_scalar(pi_f16 h) { return _cvtsh_ss(h); }

/* 16 weights of a float-like type, widened to f32. */
INLINE __m512 load16(pi_type t, const void *w, int64_t i) {
    switch (t) {
    case PI_TYPE_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const pi_f16 *)w + i)));
    case PI_TYPE_BF16: {
        __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const pi_bf16 *)w + i)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    }
    default: return _mm512_loadu_ps((const float *)w + i);
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

static void pi_quantize_q8_0_avx512(const float *x, pi_block_q8_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / PI_QK8_0; b++) {
        const __m512 v0 = _mm512_loadu_ps(x + b * PI_QK8_0);
        const __m512 v1 = _mm512_loadu_ps(x + b * PI_QK8_0 + 16);
        /* Same operations as ref: max|x| (order-free), one division, one
           reciprocal, one product, conversion in the MXCSR mode (round half to
           even, like nearbyintf). */
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const float d = amax / 127.0f;
        const __m512 id = _mm512_set1_ps(pi_simd_recip_scale(d));
        y[b].d = pi_f32_to_f16(d);
        _mm_storeu_si128((__m128i *)y[b].qs, _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, id))));
        _mm_storeu_si128((__m128i *)(y[b].qs + 16),
                         _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, id))));
    }
}

/* ------------------------------------------------------- F32, F16, BF16 */

/* sums[k] = dot(row k, x) for R rows stride bytes apart. Two accumulators per
   row hide the FMA latency when R is small. */
/* sums[k] = dot(row k, x) for R rows stride bytes apart; pf: how far ahead
   of the bytes being read to prefetch. */
INLINE void float_rows(pi_type t, const int R, int64_t n, const uint8_t *w, size_t stride, const float *x,
                       size_t pf, float *sums) {
    const size_t esize = t == PI_TYPE_F32 ? 4 : 2;
    __m512 acc0[4], acc1[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) acc0[k] = acc1[k] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            prefetch_span(w + k * stride + pf + i * esize, 32 * esize);
            acc0[k] = _mm512_fmadd_ps(load16(t, w + k * stride, i), x0, acc0[k]);
            acc1[k] = _mm512_fmadd_ps(load16(t, w + k * stride, i + 16), x1, acc1[k]);
        }
    }
    if (i + 16 <= n) {
        const __m512 x0 = _mm512_loadu_ps(x + i);
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) acc0[k] = _mm512_fmadd_ps(load16(t, w + k * stride, i), x0, acc0[k]);
        i += 16;
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
        sums[k] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[k], acc1[k])) + tail_dot(t, i, n, w + k * stride, x);
}

INLINE void float_matvec(pi_type t, int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,
                         const float *x, float *y) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4)
        float_rows(t, 4, n, (const uint8_t *)W + (size_t)r * stride, stride, x, 4 * stride, y + r);
    for (; r < r1; r++) float_rows(t, 1, n, (const uint8_t *)W + (size_t)r * stride, stride, x, stride, y + r);
}

INLINE void float_axpy(pi_type t, int64_t n, float a, const void *w, float *y) {
    const __m512 va = _mm512_set1_ps(a);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, load16(t, w, i), _mm512_loadu_ps(y + i)));
    switch (t) {
    case PI_TYPE_F16: pi_tail_axpy_f16(i, n, a, w, y); break;
    case PI_TYPE_BF16: pi_tail_axpy_bf16(i, n, a, w, y); break;
    default: pi_tail_axpy_f32(i, n, a, w, y); break;
    }
}

static float pi_vec_dot_f32_avx512(int64_t n, const void *w, const void *x) {
    float s;
    prefetch_row_start(w, (size_t)n * 4);
    float_rows(PI_TYPE_F32, 1, n, w, 0, x, PI_VEC_DOT_PF, &s);
    return s;
}
static float pi_vec_dot_f16_avx512(int64_t n, const void *w, const void *x) {
    float s;
    prefetch_row_start(w, (size_t)n * 2);
    float_rows(PI_TYPE_F16, 1, n, w, 0, x, PI_VEC_DOT_PF, &s);
    return s;
}
static float pi_vec_dot_bf16_avx512(int64_t n, const void *w, const void *x) {
    float s;
    prefetch_row_start(w, (size_t)n * 2);
    float_rows(PI_TYPE_BF16, 1, n, w, 0, x, PI_VEC_DOT_PF, &s);
    return s;
}
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_f32_avx512, pi_vec_dot_f32_avx512)
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_f16_avx512, pi_vec_dot_f16_avx512)
PI_VEC_DOT_ROWS_LOOP(pi_vec_dot_rows_bf16_avx512, pi_vec_dot_bf16_avx512)
static void pi_matvec_f32_avx512(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *x,
                                 float *y) {
    float_matvec(PI_TYPE_F32, n, W, stride, r0, r1, x, y);
}
static void pi_matvec_f16_avx512(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *x,
                                 float *y) {
    float_matvec(PI_TYPE_F16, n, W, stride, r0, r1, x, y);
}
static void pi_matvec_bf16_avx512(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *x,
                                  float *y) {
    float_matvec(PI_TYPE_BF16, n, W, stride, r0, r1, x, y);
}
static void pi_axpy_f32_avx512(int64_t n, float a, const void *w, float *y) { float_axpy(PI_TYPE_F32, n, a, w, y); }
static void pi_axpy_f16_avx512(int64_t n, float a, const void *w, float *y) { float_axpy(PI_TYPE_F16, n, a, w, y); }
static void pi_axpy_bf16_avx512(int64_t n, float a, const void *w, float *y) {
    float_axpy(PI_TYPE_BF16, n, a, w, y);
}

/* 16 weights of a float-like type at element i, the lanes outside m zero. */
INLINE __m512 load16_mask(pi_type t, const void *w, int64_t i, __mmask16 m) {
    switch (t) {
    case PI_TYPE_F16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const pi_f16 *)w + i));
    case PI_TYPE_BF16: {
        __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const pi_bf16 *)w + i));
        return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    }
    default: return _mm512_maskz_loadu_ps(m, (const float *)w + i);
    }
}

/* One 16-element step of float_tile: lanes outside m read as zero. */
INLINE void float_tile_step(pi_type ty, const int R, const int T, int64_t i, __mmask16 m, const uint8_t *w,
                            size_t stride, const uint8_t *x, size_t xs, size_t pf, __m512 acc[4][4]) {
    const size_t esize = ty == PI_TYPE_F32 ? 4 : 2;
    __m512 xv[4];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) xv[t] = _mm512_maskz_loadu_ps(m, (const float *)(x + t * xs) + i);
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        prefetch_span(w + k * stride + pf + i * esize, 16 * esize);
        const __m512 wv = load16_mask(ty, w + k * stride, i, m);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) acc[k][t] = _mm512_fmadd_ps(wv, xv[t], acc[k][t]);
    }
}

/* s[k * T + t] = dot(row k, input t) over n elements for R rows stride bytes
   apart and T f32 inputs xs bytes apart: each weight vector loaded serves T
   inputs and each input vector R rows (4 x 4 is 16 FMAs per 8 loads). The
   last n % 16 elements go through masked loads, whose zero lanes add
   nothing. pf: prefetch distance (the next row tile). */
INLINE void float_tile(pi_type ty, const int R, const int T, int64_t n, const uint8_t *w, size_t stride,
                       const uint8_t *x, size_t xs, size_t pf, float *s) {
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) acc[k][t] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) float_tile_step(ty, R, T, i, 0xffff, w, stride, x, xs, pf, acc);
    if (i < n) float_tile_step(ty, R, T, i, (__mmask16)((1u << (n - i)) - 1), w, stride, x, xs, pf, acc);
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) s[k * T + t] = _mm512_reduce_add_ps(acc[k][t]);
}

/* Tiles of 4 rows x 4 inputs over each chunk (single rows / inputs for the
   remainders), chunk by chunk (see PI_MM_CHUNK_FLOAT). */
INLINE void float_matmul(pi_type ty, int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                         size_t xs, int64_t nb, float *Y, int64_t ys) {
    const size_t esize = ty == PI_TYPE_F32 ? 4 : 2;
    /* n == 0 still takes one (empty) chunk, so Y gets its zeros */
    for (int64_t k0 = 0; k0 == 0 || k0 < n; k0 += PI_MM_CHUNK_FLOAT) {
        const int64_t kn = n - k0 < PI_MM_CHUNK_FLOAT ? n - k0 : PI_MM_CHUNK_FLOAT;
        const uint8_t *wc = (const uint8_t *)W + k0 * esize;
        for (int64_t b = 0; b < nb;) {
            const int T = nb - b >= 4 ? 4 : 1;
            const uint8_t *xc = (const uint8_t *)X + (size_t)b * xs + k0 * 4;
            for (int64_t r = r0; r < r1;) {
                const int R = r1 - r >= 4 ? 4 : 1;
                const uint8_t *wr = wc + (size_t)r * stride;
                float s[16];
                if (R == 4 && T == 4) float_tile(ty, 4, 4, kn, wr, stride, xc, xs, 4 * stride, s);
                else if (R == 4) float_tile(ty, 4, 1, kn, wr, stride, xc, xs, 4 * stride, s);
                else if (T == 4) float_tile(ty, 1, 4, kn, wr, stride, xc, xs, stride, s);
                else float_tile(ty, 1, 1, kn, wr, stride, xc, xs, stride, s);
                for (int k = 0; k < R; k++)
                    for (int t = 0; t < T; t++) pi_mm_put(Y + (b + t) * ys + r + k, s[k * T + t], k0 == 0);
                r += R;
            }
            b += T;
        }
    }
}

static void pi_matmul_f32_avx512(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                                 size_t xs, int64_t nb, float *Y, int64_t ys) {
    float_matmul(PI_TYPE_F32, n, W, stride, r0, r1, X, xs, nb, Y, ys);
}
static void pi_matmul_f16_avx512(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                                 size_t xs, int64_t nb, float *Y, int64_t ys) {
    float_matmul(PI_TYPE_F16, n, W, stride, r0, r1, X, xs, nb, Y, ys);
}
static void pi_matmul_bf16_avx512(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                                  size_t xs, int64_t nb, float *Y, int64_t ys) {
    float_matmul(PI_TYPE_BF16, n, W, stride, r0, r1, X, xs, nb, Y, ys);
}

/* ------------------------------------------------------------ Q4_0 x Q8_0 */

/* The activation for 4 consecutive blocks, matching a 512-bit vector holding
   the 4 weight blocks' 16 bytes of packed nibbles in order: byte 16k+j is
   block k's byte j, whose low nibble is weight j and high nibble weight j+16. */
typedef struct {
    __m512i xlo;   /* bytes 16k..16k+15: block k's x[0..15] */
    __m512i xhi;   /* bytes 16k..16k+15: block k's x[16..31] */
    __m512i ncorr; /* lane l: -8 * the sum of the xlo and xhi bytes 4l..4l+3 */
    __m512 dx;     /* lane l: d_x of block l/4 */
} q4_0_group;

/* Blocks past nb are zero (scale 0, no correction), so a partial last group
   adds nothing for them whatever the weight lanes hold. */
INLINE __m256i x_qs_or_zero(const pi_block_q8_0 *x, int64_t b, int64_t nb) {
    return b < nb ? _mm256_loadu_si256((const __m256i *)x[b].qs) : _mm256_setzero_si256();
}
INLINE pi_f16 x_d_or_zero(const pi_block_q8_0 *x, int64_t b, int64_t nb) { return b < nb ? x[b].d : 0; }

/* The prepared activation of blocks b..b+3 (those past nb read as zero). */
INLINE q4_0_group q4_0_make_group(const pi_block_q8_0 *x, int64_t b, int64_t nb) {
    const __m512i ones = _mm512_set1_epi8(1);
    const __m512i bcast4 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m256i q0 = x_qs_or_zero(x, b, nb), q1 = x_qs_or_zero(x, b + 1, nb);
    const __m256i q2 = x_qs_or_zero(x, b + 2, nb), q3 = x_qs_or_zero(x, b + 3, nb);
    q4_0_group g;
    g.xlo = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_permute2x128_si256(q0, q1, 0x20)),
                               _mm256_permute2x128_si256(q2, q3, 0x20), 1);
    g.xhi = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_permute2x128_si256(q0, q1, 0x31)),
                               _mm256_permute2x128_si256(q2, q3, 0x31), 1);
    const __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, g.xlo), ones, g.xhi);
    g.ncorr = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(s, 3));
    const uint64_t d = (uint64_t)x_d_or_zero(x, b, nb) | (uint64_t)x_d_or_zero(x, b + 1, nb) << 16 |
                       (uint64_t)x_d_or_zero(x, b + 2, nb) << 32 | (uint64_t)x_d_or_zero(x, b + 3, nb) << 48;
    g.dx = _mm512_permutexvar_ps(bcast4, _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi64_si128((long long)d))));
    return g;
}

static void prep_q4_0(const pi_block_q8_0 *x, int64_t nb, q4_0_group *g) {
    for (int64_t b = 0; b < nb; b += 4) *g++ = q4_0_make_group(x, b, nb);
}

/* The sum over 4 blocks of d_w * d_x * idot, per lane (4 lanes per block), for
   packed nibbles q (byte 16k+j = block k's qs[j]) and 16 scales in the low
   half of dw16 (4 copies of each block's d_w). */
INLINE __m512 q4_0_group_dot(__m512 acc, const q4_0_group *G, __m512i q, __m256i dw16) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i lo = _mm512_and_si512(q, m4);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
    __m512i i32 = _mm512_dpbusd_epi32(G->ncorr, lo, G->xlo);
    i32 = _mm512_dpbusd_epi32(i32, hi, G->xhi);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(i32), _mm512_mul_ps(_mm512_cvtph_ps(dw16), G->dx), acc);
}

/* acc[k] += one full group (4 blocks, at byte offset off) of row k of R rows
   (see pi_rows_targets for w and pf). */
INLINE void q4_0_rows_group(const int R, const uint8_t *const *w, const uint8_t *const *pf, size_t off,
                            const q4_0_group *G, __m512 *acc) {
    /* words 0, 9, 18, 27 of a group are the 4 scales; each goes to 4 lanes */
    const __m512i sidx = _mm512_setr_epi32(0, 0, 0x00090009, 0x00090009, 0x00120012, 0x00120012, 0x001b001b,
                                           0x001b001b, 0, 0, 0, 0, 0, 0, 0, 0);
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        const uint8_t *p = w[k] + off;
        prefetch_span(pf[k] + off, 4 * sizeof(pi_block_q4_0));
        __m512i q = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(p + 2)));
        q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(p + 20)), 1);
        q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(p + 38)), 2);
        q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(p + 56)), 3);
        const __m256i dw = _mm512_castsi512_si256(_mm512_permutexvar_epi16(sidx, _mm512_loadu_si512(p)));
        acc[k] = q4_0_group_dot(acc[k], G, q, dw);
    }
}

/* sums[k] = dot over nb blocks of row w[k] for R rows, prefetching pf[k] (see
   pi_rows_targets). The activation of the first ng groups is prepared in g;
   the rest is prepared on the fly from x, group by group (a lone row, or a
   row longer than the prepared chunk). Each row's sum is the same float
   operations in the same order whatever R and ng are. */
INLINE void q4_0_rows(const int R, const uint8_t *const *w, const uint8_t *const *pf, const q4_0_group *g,
                      int64_t ng, const pi_block_q8_0 *x, int64_t nb, float *sums) {
    /* as in q4_0_rows_group */
    const __m512i sidx = _mm512_setr_epi32(0, 0, 0x00090009, 0x00090009, 0x00120012, 0x00120012, 0x001b001b,
                                           0x001b001b, 0, 0, 0, 0, 0, 0, 0, 0);
    const size_t gsz = 4 * sizeof(pi_block_q4_0);
    __m512 acc[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) acc[k] = _mm512_setzero_ps();
    const int64_t nfull = nb / 4, nprep = ng < nfull ? ng : nfull;
    for (int64_t gi = 0; gi < nprep; gi++) q4_0_rows_group(R, w, pf, (size_t)gi * gsz, g + gi, acc);
    for (int64_t gi = nprep; gi < nfull; gi++) {
        const q4_0_group xg = q4_0_make_group(x, 4 * gi, nb);
        q4_0_rows_group(R, w, pf, (size_t)gi * gsz, &xg, acc);
    }
    if (nb > nfull * 4) {
        /* 1-3 blocks (at most 54 bytes): one masked load holds them all; the
           nibbles of block k are words 9k+1..9k+8. Lanes of absent blocks meet
           zero activations and zero scales. */
        const __m512i qidx = _mm512_setr_epi32(0x00020001, 0x00040003, 0x00060005, 0x00080007, 0x000b000a,
                                               0x000d000c, 0x000f000e, 0x00110010, 0x00140013, 0x00160015,
                                               0x00180017, 0x001a0019, 0, 0, 0, 0);
        const __mmask64 mask = (1ull << ((nb - nfull * 4) * sizeof(pi_block_q4_0))) - 1;
        q4_0_group xg;
        if (nfull >= ng) xg = q4_0_make_group(x, 4 * nfull, nb);
        const q4_0_group *G = nfull < ng ? g + nfull : &xg;
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const __m512i a = _mm512_maskz_loadu_epi8(mask, w[k] + (size_t)nfull * gsz);
            const __m256i dw = _mm512_castsi512_si256(_mm512_permutexvar_epi16(sidx, a));
            acc[k] = q4_0_group_dot(acc[k], G, _mm512_permutexvar_epi16(qidx, a), dw);
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) sums[k] = _mm512_reduce_add_ps(acc[k]);
}

/* Runs a rows kernel over [r0, r1) four rows at a time, then one by one, for
   one chunk (cb blocks, prepared as ng groups in g) of the activation; the
   first chunk assigns y, later ones add to it. Each row group prefetches the
   next. */
#define QUANT_MATVEC_ROWS(rows_fn, base, stride, r0, r1, g, ng, cb, y, first)                           \
    do {                                                                                                \
        float s_[4];                                                                                    \
        const uint8_t *w_[4], *pf_[4];                                                                  \
        int64_t r_ = (r0);                                                                              \
        for (; r_ + 4 <= (r1); r_ += 4) {                                                               \
            for (int k_ = 0; k_ < 4; k_++) {                                                            \
                w_[k_] = (base) + (size_t)(r_ + k_) * (stride);                                         \
                pf_[k_] = w_[k_] + 4 * (stride);                                                        \
            }                                                                                           \
            rows_fn(4, w_, pf_, (g), (ng), NULL, (cb), s_);                                             \
            for (int k_ = 0; k_ < 4; k_++) (y)[r_ + k_] = (first) ? s_[k_] : (y)[r_ + k_] + s_[k_];     \
        }                                                                                               \
        for (; r_ < (r1); r_++) {                                                                       \
            w_[0] = (base) + (size_t)r_ * (stride);                                                     \
            pf_[0] = w_[0] + (stride);                                                                  \
            rows_fn(1, w_, pf_, (g), (ng), NULL, (cb), s_);                                             \
            (y)[r_] = (first) ? s_[0] : (y)[r_] + s_[0];                                                \
        }                                                                                               \
    } while (0)

static void pi_matvec_q4_0_q8_0_avx512(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,
                                       const void *vx, float *y) {
    const pi_block_q8_0 *x = vx;
    const int64_t nb = n / PI_QK4_0;
    q4_0_group g[PI_SIMD_CHUNK_BLOCKS / 4];
    if (nb == 0)
        for (int64_t r = r0; r < r1; r++) y[r] = 0.0f;
    for (int64_t c0 = 0; c0 < nb; c0 += PI_SIMD_CHUNK_BLOCKS) {
        const int64_t cb = nb - c0 < PI_SIMD_CHUNK_BLOCKS ? nb - c0 : PI_SIMD_CHUNK_BLOCKS;
        prep_q4_0(x + c0, cb, g);
        const uint8_t *base = (const uint8_t *)W + c0 * sizeof(pi_block_q4_0);
        QUANT_MATVEC_ROWS(q4_0_rows, base, stride, r0, r1, g, (cb + 3) / 4, cb, y, c0 == 0);
    }
}

static float pi_vec_dot_q4_0_q8_0_avx512(int64_t n, const void *w, const void *x) {
    /* One row: the activation groups are built as they are needed (preparing
       them ahead would cost a second pass), and the prefetch runs a fixed
       distance ahead in the row, starting with the row's first bytes: a lone
       row is too short for the hardware prefetchers to get going. */
    const size_t bytes = (size_t)(n / PI_QK4_0) * sizeof(pi_block_q4_0);
    const uint8_t *wr[1] = {w}, *pf[1] = {wr[0] + PI_VEC_DOT_PF};
    prefetch_row_start(w, bytes);
    float s;
    q4_0_rows(1, wr, pf, NULL, 0, x, n / PI_QK4_0, &s);
    return s;
}

/* The activation is prepared once per call, then the rows go 4 at a time
   with the next 4 prefetched (PI_VEC_DOT_ROWS_GATHER). Only the first
   PI_SIMD_CHUNK_BLOCKS blocks are prepared (the stack scratch); a longer row
   makes the rest of its groups on the fly, as vec_dot does, rather than being
   summed chunk by chunk like the matvec: that would add its sums in another
   order than vec_dot, whose bits this must give. */
static void pi_vec_dot_rows_q4_0_q8_0_avx512(int64_t n, const void *const *rows, int64_t count, const void *vx,
                                             float *out) {
    const pi_block_q8_0 *x = vx;
    const int64_t nb = n / PI_QK4_0, cb = nb < PI_SIMD_CHUNK_BLOCKS ? nb : PI_SIMD_CHUNK_BLOCKS;
    if (count <= 0) return;
    pi_rows_prefetch_start(rows, count, (size_t)nb * sizeof(pi_block_q4_0));
    q4_0_group g[PI_SIMD_CHUNK_BLOCKS / 4];
    prep_q4_0(x, cb, g);
    PI_VEC_DOT_ROWS_GATHER(q4_0_rows, rows, count, out, g, (cb + 3) / 4, x, nb);
}

static void pi_axpy_q4_0_avx512(int64_t n, float a, const void *vw, float *y) {
    const pi_block_q4_0 *w = vw;
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m512i eight = _mm512_set1_epi32(8);
    for (int64_t b = 0; b < n / PI_QK4_0; b++, y += PI_QK4_0) {
        const __m512 ad = _mm512_set1_ps(a * f16_scalar(w[b].d));
        const __m128i q = _mm_loadu_si128((const __m128i *)w[b].qs);
        const __m512i lo = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(q, m4)), eight);
        const __m512i hi = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(q, 4), m4)), eight);
        _mm512_storeu_ps(y, _mm512_fmadd_ps(ad, _mm512_cvtepi32_ps(lo), _mm512_loadu_ps(y)));
        _mm512_storeu_ps(y + 16, _mm512_fmadd_ps(ad, _mm512_cvtepi32_ps(hi), _mm512_loadu_ps(y + 16)));
    }
}

/* The unpacked weights of one row's group: 4 blocks at p (m = 4), or the 1-3
   blocks of a row's partial last group (m < 4; a masked load, absent lanes
   zero). lo/hi: the low/high nibbles (byte 16k+j from block k's qs[j]); dw:
   each block's d_w in its 4 lanes. */
INLINE void q4_0_unpack(const uint8_t *p, int64_t m, __m512i *lo, __m512i *hi, __m512 *dw) {
    /* words 0, 9, 18, 27 of a group are the 4 scales; each goes to 4 lanes */
    const __m512i sidx = _mm512_setr_epi32(0, 0, 0x00090009, 0x00090009, 0x00120012, 0x00120012, 0x001b001b,
                                           0x001b001b, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i q;
    __m256i d16;
    if (m == 4) {
        q = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(p + 2)));
        q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(p + 20)), 1);
        q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(p + 38)), 2);
        q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(p + 56)), 3);
        d16 = _mm512_castsi512_si256(_mm512_permutexvar_epi16(sidx, _mm512_loadu_si512(p)));
    } else {
        /* as in q4_0_rows: the nibbles of block k are words 9k+1..9k+8 */
        const __m512i qidx = _mm512_setr_epi32(0x00020001, 0x00040003, 0x00060005, 0x00080007, 0x000b000a,
                                               0x000d000c, 0x000f000e, 0x00110010, 0x00140013, 0x00160015,
                                               0x00180017, 0x001a0019, 0, 0, 0, 0);
        const __m512i a = _mm512_maskz_loadu_epi8((1ull << (m * sizeof(pi_block_q4_0))) - 1, p);
        q = _mm512_permutexvar_epi16(qidx, a);
        d16 = _mm512_castsi512_si256(_mm512_permutexvar_epi16(sidx, a));
    }
    *lo = _mm512_and_si512(q, m4);
    *hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
    *dw = _mm512_cvtph_ps(d16);
}

/* One group (m blocks) of R rows against T inputs' prepared groups gs[t]:
   each row is unpacked once for all T inputs. */
INLINE void q4_0_tile_group(const int R, const int T, const uint8_t *w, size_t stride, int64_t m, size_t pf,
                            const q4_0_group *const *gs, int64_t gi, __m512 acc[4][4]) {
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        const uint8_t *p = w + k * stride;
        prefetch_span(p + pf, 4 * sizeof(pi_block_q4_0));
        __m512i lo, hi;
        __m512 dw;
        q4_0_unpack(p, m, &lo, &hi, &dw);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const q4_0_group *G = gs[t] + gi;
            __m512i i32 = _mm512_dpbusd_epi32(G->ncorr, lo, G->xlo);
            i32 = _mm512_dpbusd_epi32(i32, hi, G->xhi);
            acc[k][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i32), _mm512_mul_ps(dw, G->dx), acc[k][t]);
        }
    }
}

/* s[k * T + t] = the dot over nb blocks of row k (R rows stride bytes apart)
   with input t, prepared in gs[t]. pf: prefetch distance (the next row tile). */
INLINE void q4_0_tile(const int R, const int T, const uint8_t *w, size_t stride, const q4_0_group *const *gs,
                      int64_t nb, size_t pf, float *s) {
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) acc[k][t] = _mm512_setzero_ps();
    const int64_t nfull = nb / 4;
    for (int64_t gi = 0; gi < nfull; gi++)
        q4_0_tile_group(R, T, w + gi * (4 * sizeof(pi_block_q4_0)), stride, 4, pf, gs, gi, acc);
    if (nb > nfull * 4)
        q4_0_tile_group(R, T, w + nfull * (4 * sizeof(pi_block_q4_0)), stride, nb - nfull * 4, pf, gs, nfull, acc);
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) s[k * T + t] = _mm512_reduce_add_ps(acc[k][t]);
}

/* Chunk by chunk (PI_MM_CHUNK): 4 inputs at a time are prepared as for the
   matvec (q4_0_group), then every row tile of [r0, r1) is multiplied with
   them, 4 rows x 4 inputs per tile (16 accumulators): the nibble unpacking is
   shared by 4 inputs and the activation loads by 4 rows. */
static void pi_matmul_q4_0_q8_0_avx512(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,
                                       const void *X, size_t xs, int64_t nb, float *Y, int64_t ys) {
    enum { CB = PI_MM_CHUNK / PI_QK4_0 };
    const int64_t nblk = n / PI_QK4_0;
    q4_0_group g[4][CB / 4];
    const q4_0_group *const gs[4] = {g[0], g[1], g[2], g[3]};
    for (int64_t c0 = 0; c0 == 0 || c0 < nblk; c0 += CB) {
        const int64_t cb = nblk - c0 < CB ? nblk - c0 : CB;
        const uint8_t *wc = (const uint8_t *)W + c0 * sizeof(pi_block_q4_0);
        for (int64_t b = 0; b < nb;) {
            const int T = nb - b >= 4 ? 4 : 1;
            for (int t = 0; t < T; t++)
                prep_q4_0((const pi_block_q8_0 *)((const uint8_t *)X + (size_t)(b + t) * xs) + c0, cb, g[t]);
            for (int64_t r = r0; r < r1;) {
                const int R = r1 - r >= 4 ? 4 : 1;
                const uint8_t *wr = wc + (size_t)r * stride;
                float s[16];
                if (R == 4 && T == 4) q4_0_tile(4, 4, wr, stride, gs, cb, 4 * stride, s);
                else if (R == 4) q4_0_tile(4, 1, wr, stride, gs, cb, 4 * stride, s);
                else if (T == 4) q4_0_tile(1, 4, wr, stride, gs, cb, stride, s);
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

/* The activation for 2 consecutive blocks, matching a 512-bit vector with the
   two weight blocks' 32 bytes each. */
typedef struct {
    __m512i xq;    /* bytes 32k..32k+31: block k's x */
    __m512i ncorr; /* lane l: -128 * the sum of xq bytes 4l..4l+3 */
    __m512 dx;     /* lane l: d_x of block l/8 */
} q8_0_pair;

/* The prepared activation of blocks b, b+1 (one past nb reads as zero). */
INLINE q8_0_pair q8_0_make_pair(const pi_block_q8_0 *x, int64_t b, int64_t nb) {
    const __m512i ones = _mm512_set1_epi8(1);
    const __m512i bcast8 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    q8_0_pair g;
    g.xq = _mm512_inserti64x4(_mm512_castsi256_si512(x_qs_or_zero(x, b, nb)), x_qs_or_zero(x, b + 1, nb), 1);
    const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, g.xq);
    g.ncorr = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(s, 7));
    const uint32_t d = (uint32_t)x_d_or_zero(x, b, nb) | (uint32_t)x_d_or_zero(x, b + 1, nb) << 16;
    g.dx = _mm512_permutexvar_ps(bcast8, _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi32_si128((int)d))));
    return g;
}

static void prep_q8_0(const pi_block_q8_0 *x, int64_t nb, q8_0_pair *g) {
    for (int64_t b = 0; b < nb; b += 2) *g++ = q8_0_make_pair(x, b, nb);
}

INLINE __m512 q8_0_pair_dot(__m512 acc, const q8_0_pair *G, __m512i q, __m256i dw16) {
    /* w + 128 as unsigned bytes; ncorr takes the 128 * sum(x) back out */
    const __m512i qu = _mm512_xor_si512(q, _mm512_set1_epi8((char)0x80));
    const __m512i i32 = _mm512_dpbusd_epi32(G->ncorr, qu, G->xq);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(i32), _mm512_mul_ps(_mm512_cvtph_ps(dw16), G->dx), acc);
}

/* As q4_0_rows_group, for one full pair of Q8_0 blocks. */
INLINE void q8_0_rows_pair(const int R, const uint8_t *const *w, const uint8_t *const *pf, size_t off,
                           const q8_0_pair *G, __m512 *acc) {
    /* words 0 and 17 of a pair are its 2 scales; each goes to 8 lanes */
    const __m512i sidx = _mm512_setr_epi32(0, 0, 0, 0, 0x00110011, 0x00110011, 0x00110011, 0x00110011, 0, 0, 0, 0,
                                           0, 0, 0, 0);
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        const uint8_t *p = w[k] + off;
        prefetch_span(pf[k] + off, 2 * sizeof(pi_block_q8_0));
        const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(p + 2))),
                                             _mm256_loadu_si256((const __m256i *)(p + 36)), 1);
        const __m256i dw = _mm512_castsi512_si256(_mm512_permutexvar_epi16(sidx, _mm512_loadu_si512(p)));
        acc[k] = q8_0_pair_dot(acc[k], G, q, dw);
    }
}

/* As q4_0_rows, for pairs of Q8_0 blocks: the first ng pairs prepared in g,
   the rest made from x on the fly. */
INLINE void q8_0_rows(const int R, const uint8_t *const *w, const uint8_t *const *pf, const q8_0_pair *g,
                      int64_t ng, const pi_block_q8_0 *x, int64_t nb, float *sums) {
    /* as in q8_0_rows_pair */
    const __m512i sidx = _mm512_setr_epi32(0, 0, 0, 0, 0x00110011, 0x00110011, 0x00110011, 0x00110011, 0, 0, 0, 0,
                                           0, 0, 0, 0);
    const size_t psz = 2 * sizeof(pi_block_q8_0);
    __m512 acc[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) acc[k] = _mm512_setzero_ps();
    const int64_t nfull = nb / 2, nprep = ng < nfull ? ng : nfull;
    for (int64_t pr = 0; pr < nprep; pr++) q8_0_rows_pair(R, w, pf, (size_t)pr * psz, g + pr, acc);
    for (int64_t pr = nprep; pr < nfull; pr++) {
        const q8_0_pair xg = q8_0_make_pair(x, 2 * pr, nb);
        q8_0_rows_pair(R, w, pf, (size_t)pr * psz, &xg, acc);
    }
    if (nb & 1) {
        /* the last block alone (34 bytes) by a masked load: its qs are words
           1..16; the absent second block meets zero activations and scale */
        const __m512i qidx = _mm512_setr_epi32(0x00020001, 0x00040003, 0x00060005, 0x00080007, 0x000a0009,
                                               0x000c000b, 0x000e000d, 0x0010000f, 0, 0, 0, 0, 0, 0, 0, 0);
        const __mmask64 mask = (1ull << sizeof(pi_block_q8_0)) - 1;
        q8_0_pair xg;
        if (nfull >= ng) xg = q8_0_make_pair(x, 2 * nfull, nb);
        const q8_0_pair *G = nfull < ng ? g + nfull : &xg;
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const __m512i a = _mm512_maskz_loadu_epi8(mask, w[k] + (size_t)nfull * psz);
            const __m256i dw = _mm512_castsi512_si256(_mm512_permutexvar_epi16(sidx, a));
            acc[k] = q8_0_pair_dot(acc[k], G, _mm512_permutexvar_epi16(qidx, a), dw);
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) sums[k] = _mm512_reduce_add_ps(acc[k]);
}

static void pi_matvec_q8_0_q8_0_avx512(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,
                                       const void *vx, float *y) {
    const pi_block_q8_0 *x = vx;
    const int64_t nb = n / PI_QK8_0;
    q8_0_pair g[PI_SIMD_CHUNK_BLOCKS / 2];
    if (nb == 0)
        for (int64_t r = r0; r < r1; r++) y[r] = 0.0f;
    for (int64_t c0 = 0; c0 < nb; c0 += PI_SIMD_CHUNK_BLOCKS) {
        const int64_t cb = nb - c0 < PI_SIMD_CHUNK_BLOCKS ? nb - c0 : PI_SIMD_CHUNK_BLOCKS;
        prep_q8_0(x + c0, cb, g);
        const uint8_t *base = (const uint8_t *)W + c0 * sizeof(pi_block_q8_0);
        QUANT_MATVEC_ROWS(q8_0_rows, base, stride, r0, r1, g, (cb + 1) / 2, cb, y, c0 == 0);
    }
}

static float pi_vec_dot_q8_0_q8_0_avx512(int64_t n, const void *w, const void *x) {
    /* as pi_vec_dot_q4_0_q8_0_avx512 */
    const uint8_t *wr[1] = {w}, *pf[1] = {wr[0] + PI_VEC_DOT_PF};
    prefetch_row_start(w, (size_t)(n / PI_QK8_0) * sizeof(pi_block_q8_0));
    float s;
    q8_0_rows(1, wr, pf, NULL, 0, x, n / PI_QK8_0, &s);
    return s;
}

/* As pi_vec_dot_rows_q4_0_q8_0_avx512. */
static void pi_vec_dot_rows_q8_0_q8_0_avx512(int64_t n, const void *const *rows, int64_t count, const void *vx,
                                             float *out) {
    const pi_block_q8_0 *x = vx;
    const int64_t nb = n / PI_QK8_0, cb = nb < PI_SIMD_CHUNK_BLOCKS ? nb : PI_SIMD_CHUNK_BLOCKS;
    if (count <= 0) return;
    pi_rows_prefetch_start(rows, count, (size_t)nb * sizeof(pi_block_q8_0));
    q8_0_pair g[PI_SIMD_CHUNK_BLOCKS / 2];
    prep_q8_0(x, cb, g);
    PI_VEC_DOT_ROWS_GATHER(q8_0_rows, rows, count, out, g, (cb + 1) / 2, x, nb);
}

static void pi_axpy_q8_0_avx512(int64_t n, float a, const void *vw, float *y) {
    const pi_block_q8_0 *w = vw;
    for (int64_t b = 0; b < n / PI_QK8_0; b++, y += PI_QK8_0) {
        const __m512 ad = _mm512_set1_ps(a * f16_scalar(w[b].d));
        const __m512 q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)w[b].qs)));
        const __m512 q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(w[b].qs + 16))));
        _mm512_storeu_ps(y, _mm512_fmadd_ps(ad, q0, _mm512_loadu_ps(y)));
        _mm512_storeu_ps(y + 16, _mm512_fmadd_ps(ad, q1, _mm512_loadu_ps(y + 16)));
    }
}

/* One pair (m = 2 blocks at p, or m = 1: a row's last odd block, masked) of
   R rows against T inputs' prepared pairs gs[t]. */
INLINE void q8_0_tile_pair(const int R, const int T, const uint8_t *w, size_t stride, int64_t m, size_t pf,
                           const q8_0_pair *const *gs, int64_t pr, __m512 acc[4][4]) {
    /* words 0 and 17 of a pair are its 2 scales; each goes to 8 lanes */
    const __m512i sidx = _mm512_setr_epi32(0, 0, 0, 0, 0x00110011, 0x00110011, 0x00110011, 0x00110011, 0, 0, 0, 0,
                                           0, 0, 0, 0);
    const __m512i qidx = _mm512_setr_epi32(0x00020001, 0x00040003, 0x00060005, 0x00080007, 0x000a0009, 0x000c000b,
                                           0x000e000d, 0x0010000f, 0, 0, 0, 0, 0, 0, 0, 0);
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        const uint8_t *p = w + k * stride;
        prefetch_span(p + pf, 2 * sizeof(pi_block_q8_0));
        __m512i q;
        __m256i d16;
        if (m == 2) {
            q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(p + 2))),
                                   _mm256_loadu_si256((const __m256i *)(p + 36)), 1);
            d16 = _mm512_castsi512_si256(_mm512_permutexvar_epi16(sidx, _mm512_loadu_si512(p)));
        } else {
            const __m512i a = _mm512_maskz_loadu_epi8((1ull << sizeof(pi_block_q8_0)) - 1, p);
            q = _mm512_permutexvar_epi16(qidx, a);
            d16 = _mm512_castsi512_si256(_mm512_permutexvar_epi16(sidx, a));
        }
        /* w + 128 as unsigned bytes; ncorr takes the 128 * sum(x) back out */
        const __m512i qu = _mm512_xor_si512(q, _mm512_set1_epi8((char)0x80));
        const __m512 dw = _mm512_cvtph_ps(d16);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const q8_0_pair *G = gs[t] + pr;
            const __m512i i32 = _mm512_dpbusd_epi32(G->ncorr, qu, G->xq);
            acc[k][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i32), _mm512_mul_ps(dw, G->dx), acc[k][t]);
        }
    }
}

/* As q4_0_tile, for Q8_0 rows. */
INLINE void q8_0_tile(const int R, const int T, const uint8_t *w, size_t stride, const q8_0_pair *const *gs,
                      int64_t nb, size_t pf, float *s) {
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) acc[k][t] = _mm512_setzero_ps();
    const int64_t nfull = nb / 2;
    for (int64_t pr = 0; pr < nfull; pr++)
        q8_0_tile_pair(R, T, w + pr * (2 * sizeof(pi_block_q8_0)), stride, 2, pf, gs, pr, acc);
    if (nb & 1) q8_0_tile_pair(R, T, w + nfull * (2 * sizeof(pi_block_q8_0)), stride, 1, pf, gs, nfull, acc);
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) s[k * T + t] = _mm512_reduce_add_ps(acc[k][t]);
}

/* As pi_matmul_q4_0_q8_0_avx512. */
static void pi_matmul_q8_0_q8_0_avx512(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,
                                       const void *X, size_t xs, int64_t nb, float *Y, int64_t ys) {
    enum { CB = PI_MM_CHUNK / PI_QK8_0 };
    const int64_t nblk = n / PI_QK8_0;
    q8_0_pair g[4][CB / 2];
    const q8_0_pair *const gs[4] = {g[0], g[1], g[2], g[3]};
    for (int64_t c0 = 0; c0 == 0 || c0 < nblk; c0 += CB) {
        const int64_t cb = nblk - c0 < CB ? nblk - c0 : CB;
        const uint8_t *wc = (const uint8_t *)W + c0 * sizeof(pi_block_q8_0);
        for (int64_t b = 0; b < nb;) {
            const int T = nb - b >= 4 ? 4 : 1;
            for (int t = 0; t < T; t++)
                prep_q8_0((const pi_block_q8_0 *)((const uint8_t *)X + (size_t)(b + t) * xs) + c0, cb, g[t]);
            for (int64_t r = r0; r < r1;) {
                const int R = r1 - r >= 4 ? 4 : 1;
                const uint8_t *wr = wc + (size_t)r * stride;
                float s[16];
                if (R == 4 && T == 4) q8_0_tile(4, 4, wr, stride, gs, cb, 4 * stride, s);
                else if (R == 4) q8_0_tile(4, 1, wr, stride, gs, cb, 4 * stride, s);
                else if (T == 4) q8_0_tile(1, 4, wr, stride, gs, cb, stride, s);
                else q8_0_tile(1, 1, wr, stride, gs, cb, stride, s);
                for (int k = 0; k < R; k++)
                    for (int t = 0; t < T; t++) pi_mm_put(Y + (b + t) * ys + r + k, s[k * T + t], c0 == 0);
                r += R;
            }
            b += T;
        }
    }
}

/* The AMX table's quant matmuls: tiles (x86_amx.c) for batches large enough
   to pay for repacking the weights, the VNNI tiles above otherwise. */
static void pi_matmul_q4_0_q8_0_amx(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                                    size_t xs, int64_t nb, float *Y, int64_t ys) {
    if (nb >= PI_AMX_MIN_NB && stride <= PI_AMX_MAX_STRIDE)
        pi_amx_matmul_q4_0_q8_0(n, W, stride, r0, r1, X, xs, nb, Y, ys);
    else
        pi_matmul_q4_0_q8_0_avx512(n, W, stride, r0, r1, X, xs, nb, Y, ys);
}
static void pi_matmul_q8_0_q8_0_amx(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                                    size_t xs, int64_t nb, float *Y, int64_t ys) {
    if (nb >= PI_AMX_MIN_NB && stride <= PI_AMX_MAX_STRIDE)
        pi_amx_matmul_q8_0_q8_0(n, W, stride, r0, r1, X, xs, nb, Y, ys);
    else
        pi_matmul_q8_0_q8_0_avx512(n, W, stride, r0, r1, X, xs, nb, Y, ys);
}

/* The two tables differ only in their quant matmuls. */
#define AVX512_TABLE(NAME, MATMUL_Q8_0, MATMUL_Q4_0)                                                          \
    {                                                                                                          \
        .name = NAME,                                                                                          \
        .quantize_q8_0 = pi_quantize_q8_0_avx512,                                                             \
        .quantize_q8_K = pi_quantize_q8_K_ref, /* ref's until this table has its own K-quant kernels */       \
        .vec_dot =                                                                                             \
            {                                                                                                  \
                [PI_TYPE_F32] = pi_vec_dot_f32_avx512,                                                         \
                [PI_TYPE_F16] = pi_vec_dot_f16_avx512,                                                         \
                [PI_TYPE_BF16] = pi_vec_dot_bf16_avx512,                                                       \
                [PI_TYPE_Q8_0] = pi_vec_dot_q8_0_q8_0_avx512,                                                  \
                [PI_TYPE_Q4_0] = pi_vec_dot_q4_0_q8_0_avx512,                                                  \
                [PI_TYPE_Q4_K] = pi_vec_dot_q4_K_q8_K_ref,                                                     \
                [PI_TYPE_Q5_K] = pi_vec_dot_q5_K_q8_K_ref,                                                     \
                [PI_TYPE_Q6_K] = pi_vec_dot_q6_K_q8_K_ref,                                                     \
            },                                                                                                 \
        .vec_dot_rows =                                                                                        \
            {                                                                                                  \
                [PI_TYPE_F32] = pi_vec_dot_rows_f32_avx512,                                                    \
                [PI_TYPE_F16] = pi_vec_dot_rows_f16_avx512,                                                    \
                [PI_TYPE_BF16] = pi_vec_dot_rows_bf16_avx512,                                                  \
                [PI_TYPE_Q8_0] = pi_vec_dot_rows_q8_0_q8_0_avx512,                                             \
                [PI_TYPE_Q4_0] = pi_vec_dot_rows_q4_0_q8_0_avx512,                                             \
                [PI_TYPE_Q4_K] = pi_vec_dot_rows_q4_K_q8_K_ref,                                                \
                [PI_TYPE_Q5_K] = pi_vec_dot_rows_q5_K_q8_K_ref,                                                \
                [PI_TYPE_Q6_K] = pi_vec_dot_rows_q6_K_q8_K_ref,                                                \
            },                                                                                                 \
        .axpy =                                                                                                \
            {                                                                                                  \
                [PI_TYPE_F32] = pi_axpy_f32_avx512,                                                            \
                [PI_TYPE_F16] = pi_axpy_f16_avx512,                                                            \
                [PI_TYPE_BF16] = pi_axpy_bf16_avx512,                                                          \
                [PI_TYPE_Q8_0] = pi_axpy_q8_0_avx512,                                                          \
                [PI_TYPE_Q4_0] = pi_axpy_q4_0_avx512,                                                          \
                [PI_TYPE_Q4_K] = pi_axpy_q4_K_ref,                                                             \
                [PI_TYPE_Q5_K] = pi_axpy_q5_K_ref,                                                             \
                [PI_TYPE_Q6_K] = pi_axpy_q6_K_ref,                                                             \
            },                                                                                                 \
        .matvec =                                                                                              \
            {                                                                                                  \
                [PI_TYPE_F32] = pi_matvec_f32_avx512,                                                          \
                [PI_TYPE_F16] = pi_matvec_f16_avx512,                                                          \
                [PI_TYPE_BF16] = pi_matvec_bf16_avx512,                                                        \
                [PI_TYPE_Q8_0] = pi_matvec_q8_0_q8_0_avx512,                                                   \
                [PI_TYPE_Q4_0] = pi_matvec_q4_0_q8_0_avx512,                                                   \
                [PI_TYPE_Q4_K] = pi_matvec_q4_K_q8_K_ref,                                                      \
                [PI_TYPE_Q5_K] = pi_matvec_q5_K_q8_K_ref,                                                      \
                [PI_TYPE_Q6_K] = pi_matvec_q6_K_q8_K_ref,                                                      \
            },                                                                                                 \
        .matmul =                                                                                              \
            {                                                                                                  \
                [PI_TYPE_F32] = pi_matmul_f32_avx512,                                                          \
                [PI_TYPE_F16] = pi_matmul_f16_avx512,                                                          \
                [PI_TYPE_BF16] = pi_matmul_bf16_avx512,                                                        \
                [PI_TYPE_Q8_0] = MATMUL_Q8_0,                                                                  \
                [PI_TYPE_Q4_0] = MATMUL_Q4_0,                                                                  \
                [PI_TYPE_Q4_K] = pi_matmul_q4_K_q8_K_ref,                                                      \
                [PI_TYPE_Q5_K] = pi_matmul_q5_K_q8_K_ref,                                                      \
                [PI_TYPE_Q6_K] = pi_matmul_q6_K_q8_K_ref,                                                      \
            },                                                                                                 \
    }

const pi_kernels pi_kernels_avx512 = AVX512_TABLE("avx512", pi_matmul_q8_0_q8_0_avx512, pi_matmul_q4_0_q8_0_avx512);

/* Handed out only where AMX-INT8 runs and the OS lets this process use tiles
   (dispatch.c). */
const pi_kernels pi_kernels_amx = AVX512_TABLE("amx", pi_matmul_q8_0_q8_0_amx, pi_matmul_q4_0_q8_0_amx);
