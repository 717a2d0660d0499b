/*
 * x86_avx512.c — the kernel table for AVX-512 (F, BW, VL, DQ) + VNNI + FMA + F16C.
 *
 * Compiled with those ISA flags only here; pi_kernels_get() hands this table out
 * only on CPUs that have all of them. Semantics are ref.c's; quantize_q8_0 and
 * quantize_q8_K give ref's exact bytes. The K-quant kernels (Q4_K, Q5_K, Q6_K
 * weights) have their own section, with its own comment.
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
#include "axpy_rows.h"
#include "simd_common.h"
#include "ref_k.h"
#include "x86_amx.h"
#include "x86_q4_1_q5.h"

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
        float_rows(t, 4, n, (const uint8_t *)W + (size_t)r * stride, stride, x, pi_matvec_pf(stride, 4), y + r);
    for (; r < r1; r++)
        float_rows(t, 1, n, (const uint8_t *)W + (size_t)r * stride, stride, x, pi_matvec_pf(stride, 1), y + r);
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
                pf_[k_] = w_[k_] + pi_matvec_pf((stride), 4);                                           \
            }                                                                                           \
            rows_fn(4, w_, pf_, (g), (ng), NULL, (cb), s_);                                             \
            for (int k_ = 0; k_ < 4; k_++) (y)[r_ + k_] = (first) ? s_[k_] : (y)[r_ + k_] + s_[k_];     \
        }                                                                                               \
        for (; r_ < (r1); r_++) {                                                                       \
            w_[0] = (base) + (size_t)r_ * (stride);                                                     \
            pf_[0] = w_[0] + pi_matvec_pf((stride), 1);                                                 \
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

/* ------------------------------------------------------------- K-quants */

/*
 * Q4_K, Q5_K and Q6_K rows against Q8_K activations, super-block (256
 * weights) by super-block. The integer sum of a super-block is exact:
 *   - vpdpbusd multiplies the weights, unsigned as they are stored (Q4_K
 *     0..15, Q5_K 0..31, Q6_K 0..63), by the signed activation bytes, four
 *     products to an int32 lane. Q4_K / Q5_K lanes take two such steps (8
 *     weights of one sub-block: at most 8 * 31 * 128 < 2^15), Q6_K lanes
 *     one (4 * 63 * 128 < 2^15), so every lane fits in 16 bits;
 *   - vpackssdw packs two such vectors to words (exactly), and vpmaddwd
 *     multiplies each word by its sub-block's scale and adds pairs: one
 *     multiply for two vectors (two Q6_K pairs meet in a vpdpwssd);
 *   - the 16 int32 lanes are folded to 8 (each within 2^24 for Q4_K / Q5_K,
 *     so converted exactly) and meet d_w * d_x in one float FMA of 8 lanes
 *     per super-block. Q4_K / Q5_K's mins take one more: dmin * m_j (made per
 *     row, mf) against -d_x * (the two bsums of sub-block j) (made per
 *     activation, fm). Q6_K's offset of 32 is taken out in integers,
 *     32 * the sum of scales[k] * bsums[k] (one vpmaddwd of 8 lanes).
 * Fewer multiplies per super-block is what made these kernels faster on
 * Zen 4 (which splits 512-bit operations in two), hence the packing and the
 * 256-bit float steps.
 * Q4_K / Q5_K weight vectors are the 16-byte quarters of the qs groups
 * (kq_unpack): lane group c (128 bits) of w[0] holds weights 0..15 of
 * sub-block 2c, w[1] weights 16..31 of it, w[2] / w[3] the same of sub-block
 * 2c + 1, so that the two steps per lane stay within one sub-block. The
 * activation is prepared once per call to match (kq_act; for Q6_K, whose
 * nibble vectors are already in weight order, it is only copied): the
 * matvec and vec_dot_rows prepare KQ_PREP super-blocks on the stack, and
 * make the rest (a longer row, or a lone row's vec_dot) as they go, with the
 * same values, so vec_dot_rows gives vec_dot's bits.
 *
 * The matmuls take the inputs 8 at a time against one row: the row's
 * super-block is unpacked once (kq_row) for 8 inputs, and their 8
 * accumulators leave room in the registers for it.
 */

#define KQ_PREP (PI_SIMD_CHUNK_BLOCKS * PI_QK8_0 / PI_QK_K) /* 64 super-blocks: 20 KiB of kq_act */
/* Matmuls: inputs per pass over the rows, and super-blocks per chunk (the
   prepared activation of a pass, 8 x 8 x 320 bytes, stays in L1; 4 or 12
   super-blocks per chunk measured slower, as did 4 inputs per pass) */
#define KQ_MM_T 8
#define KQ_MM_CB 8

/* quantize_q8_K: ref's operations (the first element of largest magnitude,
   one division for the scale, one product per element, clamping, rounding in
   the MXCSR mode, one division for d), so the same bytes. */
static void pi_quantize_q8_K_avx512(const float *x, pi_block_q8_K *y, int64_t n) {
    /* packs interleave 4 vectors' dwords per 128-bit lane; this puts them back */
    const __m512i ord = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512 lo = _mm512_set1_ps(-128.0f), hi = _mm512_set1_ps(127.0f);
    for (int64_t b = 0; b < n / PI_QK_K; b++) {
        const float *xb = x + b * PI_QK_K;
        __m512 m = _mm512_setzero_ps();
        for (int k = 0; k < 16; k++) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(xb + 16 * k)));
        const float amax = _mm512_reduce_max_ps(m);
        if (amax == 0.0f) {
            __builtin_memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        int at = -1;
        for (int k = 0; k < 16 && at < 0; k++) {
            const __mmask16 e =
                _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(xb + 16 * k)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (e) at = 16 * k + __builtin_ctz(e);
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
        const __m512 is = _mm512_set1_ps(iscale);
        __m512i q[4];
        for (int c = 0; c < 4; c++) {
            __m512i i32[4];
            for (int k = 0; k < 4; k++) {
                const __m512 v = _mm512_mul_ps(is, _mm512_loadu_ps(xb + 64 * c + 16 * k));
                i32[k] = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(v, lo), hi));
            }
            const __m512i p = _mm512_packs_epi16(_mm512_packs_epi32(i32[0], i32[1]), _mm512_packs_epi32(i32[2], i32[3]));
            q[c] = _mm512_permutexvar_epi32(ord, p);
            _mm512_storeu_si512(y[b].qs + 64 * c, q[c]);
        }
        /* bsums: sums of 4 bytes (vpdpbusd by ones), then pairs of those
           twice (packs + vpmaddwd): dword 4l + c is the sum of bytes
           16l..16l+15 of q[c], i.e. bsums[4c + l] */
        const __m512i ones8 = _mm512_set1_epi8(1), ones16 = _mm512_set1_epi16(1);
        __m512i s[4];
        for (int c = 0; c < 4; c++) s[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones8, q[c]);
        const __m512i h01 = _mm512_madd_epi16(_mm512_packs_epi32(s[0], s[1]), ones16);
        const __m512i h23 = _mm512_madd_epi16(_mm512_packs_epi32(s[2], s[3]), ones16);
        const __m512i g = _mm512_madd_epi16(_mm512_packs_epi32(h01, h23), ones16);
        _mm256_storeu_si256((__m256i *)y[b].bsums, _mm512_cvtepi32_epi16(_mm512_permutexvar_epi32(ord, g)));
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

INLINE pi_f16 kq_load_f16(const uint8_t *p) {
    pi_f16 v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}

/* One Q8_K super-block prepared for the row kernels. */
typedef struct {
    __m512i x[4]; /* its quants, lined up with kq_row.w */
    __m256 fm;    /* Q4_K / Q5_K: lane j -d_x * (bsums[2j] + bsums[2j+1]); Q6_K: bsums (16 words) */
    __m256 dx;    /* d_x in every lane */
} kq_act;

INLINE kq_act kq_make(pi_type t, const pi_block_q8_K *x) {
    kq_act g;
    __m512i X[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) X[c] = _mm512_loadu_si512(x->qs + 64 * c);
    const float dx = x->d;
    const __m256i bs = _mm256_loadu_si256((const __m256i *)x->bsums);
    if (t == PI_TYPE_Q6_K) {
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) g.x[c] = X[c];
        g.fm = _mm256_castsi256_ps(bs);
    } else {
        /* x[j] lane group c = 16-byte quarter j of X[c] (a 4 x 4 transpose
           of quarters): sub-block 2c's weights 0..15 and 16..31, then
           sub-block 2c + 1's */
        const __m512i a01 = _mm512_shuffle_i64x2(X[0], X[1], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i a23 = _mm512_shuffle_i64x2(X[2], X[3], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i b01 = _mm512_shuffle_i64x2(X[0], X[1], _MM_SHUFFLE(3, 2, 3, 2));
        const __m512i b23 = _mm512_shuffle_i64x2(X[2], X[3], _MM_SHUFFLE(3, 2, 3, 2));
        g.x[0] = _mm512_shuffle_i64x2(a01, a23, _MM_SHUFFLE(2, 0, 2, 0));
        g.x[1] = _mm512_shuffle_i64x2(a01, a23, _MM_SHUFFLE(3, 1, 3, 1));
        g.x[2] = _mm512_shuffle_i64x2(b01, b23, _MM_SHUFFLE(2, 0, 2, 0));
        g.x[3] = _mm512_shuffle_i64x2(b01, b23, _MM_SHUFFLE(3, 1, 3, 1));
        const __m256i b8 = _mm256_madd_epi16(bs, _mm256_set1_epi16(1));
        g.fm = _mm256_mul_ps(_mm256_cvtepi32_ps(b8), _mm256_set1_ps(-dx));
    }
    g.dx = _mm256_set1_ps(dx);
    return g;
}

static void kq_prep(pi_type t, const pi_block_q8_K *x, int64_t nsb, kq_act *g) {
    for (int64_t sb = 0; sb < nsb; sb++) g[sb] = kq_make(t, x + sb);
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

/* One row's super-block, unpacked for kq_dot. */
typedef struct {
    __m512i w[4];  /* the weights (unsigned bytes), lined up with kq_act.x */
    __m512i sc[2]; /* the scales as words, lined up with the words packed from w's dot products */
    __m256i s16;   /* Q6_K: its 16 scales as words */
    __m256 mf;     /* Q4_K / Q5_K: lane j dmin * m_j */
    __m256 dw;     /* d in every lane */
} kq_row;

INLINE void kq_unpack(pi_type t, const uint8_t *p, kq_row *u) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    if (t == PI_TYPE_Q6_K) {
        /* per half h: the low nibbles of ql[64h..64h+64) are its weights
           0..63 in order, the high nibbles 64..127; their top bits come from
           qh[32h..32h+32) (bits 0-1, 2-3 for weights 0..31, 32..63; 4-5,
           6-7 for 64..95, 96..127), moved to bits 4-5 by word shifts */
        const __m512i m2 = _mm512_set1_epi8(0x30);
        /* word shift counts: bytes 0..31 by 4 (0), bytes 32..63 by 2 (2) */
        const __m512i cnt_lo = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
        const __m512i cnt_hi = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i z = _mm512_loadu_si512(p + 64 * h);
            const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h)));
            u->w[2 * h] = _mm512_or_si512(_mm512_and_si512(z, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, cnt_lo), m2));
            u->w[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(z, 4), m4),
                                              _mm512_and_si512(_mm512_srlv_epi16(qh, cnt_hi), m2));
        }
        /* w[2h] lane group c is sub-block 8h + c, w[2h + 1]'s 8h + 4 + c: the
           words packed from their dot products (4 of each per lane group)
           take scales 8h + c, then 8h + 4 + c */
        const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 192)));
        const __m512i pick = _mm512_setr_epi32(0x01000100, 0x01000100, 0x09080908, 0x09080908, 0x03020302, 0x03020302,
                                               0x0b0a0b0a, 0x0b0a0b0a, 0x05040504, 0x05040504, 0x0d0c0d0c, 0x0d0c0d0c,
                                               0x07060706, 0x07060706, 0x0f0e0f0e, 0x0f0e0f0e);
        u->sc[0] = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm256_castsi256_si128(s16)), pick);
        u->sc[1] = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm256_extracti128_si256(s16, 1)), pick);
        u->s16 = s16;
        u->dw = _mm256_set1_ps(f16_scalar(kq_load_f16(p + 208)));
        return;
    }
    const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)kq_load_u32(p))); /* d, dmin */
    u->dw = _mm256_broadcastss_ps(dm);
    const __m128i s8 = k4_scales(p + 4);
    /* words of lane group c: scale 2c (4 times, for w[0] / w[1]'s dots),
       then scale 2c + 1 (for w[2] / w[3]'s) */
    const __m512i pick = _mm512_setr_epi32(0x80008000, 0x80008000, 0x80018001, 0x80018001, 0x80028002, 0x80028002,
                                           0x80038003, 0x80038003, 0x80048004, 0x80048004, 0x80058005, 0x80058005,
                                           0x80068006, 0x80068006, 0x80078007, 0x80078007);
    u->sc[0] = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(s8), pick);
    const __m256 mins = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(s8, 8)));
    u->mf = _mm256_mul_ps(mins, _mm256_broadcastss_ps(_mm_movehdup_ps(dm)));
    /* quarters 0 and 2 of each 32-byte qs group (weights 0..15 of its two
       sub-blocks), then quarters 1 and 3 */
    const uint8_t *qs = p + (t == PI_TYPE_Q4_K ? 16 : 48);
    const __m512i z0 = _mm512_loadu_si512(qs), z1 = _mm512_loadu_si512(qs + 64);
    const __m512i a = _mm512_shuffle_i64x2(z0, z1, _MM_SHUFFLE(2, 0, 2, 0));
    const __m512i b = _mm512_shuffle_i64x2(z0, z1, _MM_SHUFFLE(3, 1, 3, 1));
    u->w[0] = _mm512_and_si512(a, m4);
    u->w[1] = _mm512_and_si512(b, m4);
    u->w[2] = _mm512_and_si512(_mm512_srli_epi16(a, 4), m4);
    u->w[3] = _mm512_and_si512(_mm512_srli_epi16(b, 4), m4);
    if (t == PI_TYPE_Q5_K) {
        /* the fifth bit of weight l of sub-block j is bit j of qh[l]: qh[0..16)
           for w[0], w[2], qh[16..32) for w[1], w[3], each lane group testing
           its sub-block's bit */
        const __m512i qa = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(p + 16)));
        const __m512i qb = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(p + 32)));
        const __m512i bit_e = _mm512_setr_epi32(0x01010101, 0x01010101, 0x01010101, 0x01010101, 0x04040404, 0x04040404,
                                                0x04040404, 0x04040404, 0x10101010, 0x10101010, 0x10101010, 0x10101010,
                                                0x40404040, 0x40404040, 0x40404040, 0x40404040);
        const __m512i bit_o = _mm512_add_epi8(bit_e, bit_e);
        const __m512i sixteen = _mm512_set1_epi8(16);
        u->w[0] = _mm512_mask_add_epi8(u->w[0], _mm512_test_epi8_mask(qa, bit_e), u->w[0], sixteen);
        u->w[1] = _mm512_mask_add_epi8(u->w[1], _mm512_test_epi8_mask(qb, bit_e), u->w[1], sixteen);
        u->w[2] = _mm512_mask_add_epi8(u->w[2], _mm512_test_epi8_mask(qa, bit_o), u->w[2], sixteen);
        u->w[3] = _mm512_mask_add_epi8(u->w[3], _mm512_test_epi8_mask(qb, bit_o), u->w[3], sixteen);
    }
}

/* acc + the super-block u against G (see the section comment). */
INLINE __m256 kq_dot(pi_type t, const kq_row *u, const kq_act *G, __m256 acc) {
    const __m512i z = _mm512_setzero_si512();
    __m256i i8;
    if (t == PI_TYPE_Q6_K) {
        __m512i v[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) v[j] = _mm512_dpbusd_epi32(z, u->w[j], G->x[j]);
        const __m512i i = _mm512_dpwssd_epi32(_mm512_madd_epi16(_mm512_packs_epi32(v[0], v[1]), u->sc[0]),
                                              _mm512_packs_epi32(v[2], v[3]), u->sc[1]);
        i8 = _mm256_add_epi32(_mm512_castsi512_si256(i), _mm512_extracti64x4_epi64(i, 1));
        const __m256i off = _mm256_madd_epi16(u->s16, _mm256_castps_si256(G->fm));
        i8 = _mm256_sub_epi32(i8, _mm256_slli_epi32(off, 5));
    } else {
        const __m512i e = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, u->w[0], G->x[0]), u->w[1], G->x[1]);
        const __m512i o = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, u->w[2], G->x[2]), u->w[3], G->x[3]);
        const __m512i i = _mm512_madd_epi16(_mm512_packs_epi32(e, o), u->sc[0]);
        i8 = _mm256_add_epi32(_mm512_castsi512_si256(i), _mm512_extracti64x4_epi64(i, 1));
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i8), _mm256_mul_ps(u->dw, G->dx), acc);
    if (t != PI_TYPE_Q6_K) acc = _mm256_fmadd_ps(u->mf, G->fm, acc);
    return acc;
}

INLINE float kq_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* acc[k] += super-block (at byte offset off) of row k of R rows against G;
   see pi_rows_targets for w and pf. */
INLINE void kq_rows_block(pi_type t, const int R, const uint8_t *const *w, const uint8_t *const *pf, size_t off,
                          const kq_act *G, __m256 *acc) {
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        prefetch_span(pf[k] + off, kq_bytes(t));
        kq_row u;
        kq_unpack(t, w[k] + off, &u);
        acc[k] = kq_dot(t, &u, G, acc[k]);
    }
}

/* sums[k] = dot over nsb super-blocks of row w[k] for R rows, prefetching
   pf[k]. The first ng super-blocks of the activation are prepared in g, the
   rest made from x as they come; each row's sum is the same operations in
   the same order whatever R and ng are. */
INLINE void kq_rows(pi_type t, const int R, const uint8_t *const *w, const uint8_t *const *pf, const kq_act *g,
                    int64_t ng, const pi_block_q8_K *x, int64_t nsb, float *sums) {
    __m256 acc[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) acc[k] = _mm256_setzero_ps();
    const int64_t nprep = ng < nsb ? ng : nsb;
    for (int64_t sb = 0; sb < nprep; sb++) kq_rows_block(t, R, w, pf, (size_t)sb * kq_bytes(t), g + sb, acc);
    for (int64_t sb = nprep; sb < nsb; sb++) {
        const kq_act xg = kq_make(t, x + sb);
        kq_rows_block(t, R, w, pf, (size_t)sb * kq_bytes(t), &xg, acc);
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) sums[k] = kq_hsum(acc[k]);
}

INLINE void kq_matvec(pi_type t, int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *vx,
                      float *y) {
    const pi_block_q8_K *x = vx;
    const int64_t nsb = n / PI_QK_K, ng = nsb < KQ_PREP ? nsb : KQ_PREP;
    kq_act g[KQ_PREP];
    kq_prep(t, x, ng, g);
    const uint8_t *w[4], *pf[4];
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
        for (int k = 0; k < 4; k++) {
            w[k] = (const uint8_t *)W + (size_t)(r + k) * stride;
            pf[k] = w[k] + pi_matvec_pf(stride, 4);
        }
        kq_rows(t, 4, w, pf, g, ng, x, nsb, y + r);
    }
    for (; r < r1; r++) {
        w[0] = (const uint8_t *)W + (size_t)r * stride;
        pf[0] = w[0] + pi_matvec_pf(stride, 1);
        kq_rows(t, 1, w, pf, g, ng, x, nsb, y + r);
    }
}

INLINE float kq_vec_dot(pi_type t, int64_t n, const void *w, const void *x) {
    /* a lone row: the activation is made as it is needed */
    const uint8_t *wr[1] = {w}, *pf[1] = {wr[0] + PI_VEC_DOT_PF};
    prefetch_row_start(w, (size_t)(n / PI_QK_K) * kq_bytes(t));
    float s;
    kq_rows(t, 1, wr, pf, NULL, 0, x, n / PI_QK_K, &s);
    return s;
}

/* s[k * T + tt] = the dot over nsb super-blocks of row k (R rows stride bytes
   apart) with input tt, prepared in gs[tt]. pf: prefetch distance (the next
   row tile). */
INLINE void kq_tile(pi_type t, const int R, const int T, const uint8_t *w, size_t stride, const kq_act *const *gs,
                    int64_t nsb, size_t pf, float *s) {
    __m256 acc[4][KQ_MM_T];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 8
        for (int tt = 0; tt < T; tt++) acc[k][tt] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const uint8_t *p = w + k * stride + (size_t)sb * kq_bytes(t);
            prefetch_span(p + pf, kq_bytes(t));
            kq_row u;
            kq_unpack(t, p, &u);
#pragma GCC unroll 8
            for (int tt = 0; tt < T; tt++) acc[k][tt] = kq_dot(t, &u, gs[tt] + sb, acc[k][tt]);
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 8
        for (int tt = 0; tt < T; tt++) s[k * T + tt] = kq_hsum(acc[k][tt]);
}

/* As pi_matmul_q4_0_q8_0_avx512: chunk by chunk (KQ_MM_CB super-blocks), the
   inputs prepared KQ_MM_T at a time, then every row of [r0, r1) against
   them: a row's super-block is unpacked once for KQ_MM_T inputs (1 row x 8
   inputs: 8 accumulators, and room for the unpacked row). Fewer inputs go
   4 at a time (tiles of 4 rows x 4 inputs), then one at a time. */
INLINE void kq_matmul(pi_type t, int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                      size_t xs, int64_t nb, float *Y, int64_t ys) {
    enum { CB = KQ_MM_CB };
    const int64_t nsb = n / PI_QK_K;
    kq_act g[KQ_MM_T][CB];
    const kq_act *gs[KQ_MM_T];
    for (int tt = 0; tt < KQ_MM_T; tt++) gs[tt] = g[tt];
    for (int64_t c0 = 0; c0 == 0 || c0 < nsb; c0 += CB) {
        const int64_t cb = nsb - c0 < CB ? nsb - c0 : CB;
        const uint8_t *wc = (const uint8_t *)W + (size_t)c0 * kq_bytes(t);
        for (int64_t b = 0; b < nb;) {
            const int T = nb - b >= KQ_MM_T ? KQ_MM_T : nb - b >= 4 ? 4 : 1;
            for (int tt = 0; tt < T; tt++)
                kq_prep(t, (const pi_block_q8_K *)((const uint8_t *)X + (size_t)(b + tt) * xs) + c0, cb, g[tt]);
            for (int64_t r = r0; r < r1;) {
                const int R = T == KQ_MM_T || r1 - r < 4 ? 1 : 4;
                const uint8_t *wr = wc + (size_t)r * stride;
                float s[4 * KQ_MM_T];
                if (T == KQ_MM_T) kq_tile(t, 1, KQ_MM_T, wr, stride, gs, cb, stride, s);
                else if (R == 4 && T == 4) kq_tile(t, 4, 4, wr, stride, gs, cb, 4 * stride, s);
                else if (R == 4) kq_tile(t, 4, 1, wr, stride, gs, cb, 4 * stride, s);
                else if (T == 4) kq_tile(t, 1, 4, wr, stride, gs, cb, stride, s);
                else kq_tile(t, 1, 1, wr, stride, gs, cb, stride, s);
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
    const __m512 va = _mm512_set1_ps(a);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t sb = 0; sb < n / PI_QK_K; sb++, y += PI_QK_K) {
        const uint8_t *p = w + (size_t)sb * kq_bytes(t);
        if (t == PI_TYPE_Q6_K) {
            /* lane k: d * scales[k] */
            const __m512 ds = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 192)))),
                                            _mm512_set1_ps(f16_scalar(kq_load_f16(p + 208))));
            const __m256i m2 = _mm256_set1_epi8(0x30), off = _mm256_set1_epi8(32);
#pragma GCC unroll 2
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
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) {
                    const __m256i qs = _mm256_sub_epi8(q[j], off); /* q - 32 */
                    float *yj = y + 128 * h + 32 * j;
#pragma GCC unroll 2
                    for (int e = 0; e < 2; e++) {
                        const __m512 c = _mm512_permutexvar_ps(_mm512_set1_epi32(8 * h + 2 * j + e), ds);
                        const __m128i part = e ? _mm256_extracti128_si256(qs, 1) : _mm256_castsi256_si128(qs);
                        const __m512 wv = _mm512_mul_ps(c, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(part)));
                        _mm512_storeu_ps(yj + 16 * e, _mm512_fmadd_ps(va, wv, _mm512_loadu_ps(yj + 16 * e)));
                    }
                }
            }
            continue;
        }
        /* lane j: d * sc_j and -dmin * m_j, both exact */
        const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)kq_load_u32(p)));
        const __m128i s8 = k4_scales(p + 4);
        const __m512 d1 = _mm512_castps256_ps512(
            _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(s8)), _mm256_broadcastss_ps(dm)));
        const __m512 nm1 = _mm512_castps256_ps512(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(s8, 8))),
                                                                _mm256_broadcastss_ps(_mm_sub_ps(_mm_setzero_ps(), _mm_movehdup_ps(dm)))));
        const uint8_t *qs = p + (t == PI_TYPE_Q4_K ? 16 : 48);
        const __m256i qh = t == PI_TYPE_Q5_K ? _mm256_loadu_si256((const __m256i *)(p + 16)) : _mm256_setzero_si256();
        const __m256i m16 = _mm256_set1_epi8(16);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * i));
            __m256i v[2] = {_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4)};
            if (t == PI_TYPE_Q5_K) {
                /* bit 2i (2i + 1) of qh[l] to bit 4 of weight l of sub-block 2i (2i + 1) */
                const __m256i b0 = i < 2 ? _mm256_slli_epi16(qh, 4 - 2 * i) : _mm256_srli_epi16(qh, 2 * i - 4);
                const __m256i b1 = i < 2 ? _mm256_slli_epi16(qh, 3 - 2 * i) : _mm256_srli_epi16(qh, 2 * i - 3);
                v[0] = _mm256_or_si256(v[0], _mm256_and_si256(b0, m16));
                v[1] = _mm256_or_si256(v[1], _mm256_and_si256(b1, m16));
            }
#pragma GCC unroll 2
            for (int e = 0; e < 2; e++) {
                const __m512i j = _mm512_set1_epi32(2 * i + e);
                const __m512 dj = _mm512_permutexvar_ps(j, d1), mj = _mm512_permutexvar_ps(j, nm1);
                float *yj = y + 32 * (2 * i + e);
#pragma GCC unroll 2
                for (int hh = 0; hh < 2; hh++) {
                    const __m128i part = hh ? _mm256_extracti128_si256(v[e], 1) : _mm256_castsi256_si128(v[e]);
                    const __m512 wv = _mm512_fmadd_ps(dj, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(part)), mj);
                    _mm512_storeu_ps(yj + 16 * hh, _mm512_fmadd_ps(va, wv, _mm512_loadu_ps(yj + 16 * hh)));
                }
            }
        }
    }
}

/* The kernels of one K-quant type (tname: q4_K, q5_K, q6_K). */
#define KQ_KERNELS(TYPE, tname)                                                                                   \
    INLINE void tname##_rows(const int R, const uint8_t *const *w, const uint8_t *const *pf, const kq_act *g,     \
                             int64_t ng, const pi_block_q8_K *x, int64_t nsb, float *sums) {                      \
        kq_rows(TYPE, R, w, pf, g, ng, x, nsb, sums);                                                             \
    }                                                                                                             \
    static float pi_vec_dot_##tname##_q8_K_avx512(int64_t n, const void *w, const void *x) {                      \
        return kq_vec_dot(TYPE, n, w, x);                                                                         \
    }                                                                                                             \
    /* the activation prepared once (its first KQ_PREP super-blocks), then 4 rows at a time with the next 4       \
       prefetched: the same bits as vec_dot per row */                                                            \
    static void pi_vec_dot_rows_##tname##_q8_K_avx512(int64_t n, const void *const *rows, int64_t count,          \
                                                      const void *vx, float *out) {                               \
        const pi_block_q8_K *x = vx;                                                                              \
        const int64_t nsb = n / PI_QK_K, ng = nsb < KQ_PREP ? nsb : KQ_PREP;                                      \
        if (count <= 0) return;                                                                                   \
        pi_rows_prefetch_start(rows, count, (size_t)nsb * kq_bytes(TYPE));                                        \
        kq_act g[KQ_PREP];                                                                                        \
        kq_prep(TYPE, x, ng, g);                                                                                  \
        PI_VEC_DOT_ROWS_GATHER(tname##_rows, rows, count, out, g, ng, x, nsb);                                    \
    }                                                                                                             \
    static void pi_matvec_##tname##_q8_K_avx512(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,  \
                                                const void *x, float *y) {                                        \
        kq_matvec(TYPE, n, W, stride, r0, r1, x, y);                                                              \
    }                                                                                                             \
    static void pi_matmul_##tname##_q8_K_avx512(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,  \
                                                const void *X, size_t xs, int64_t nb, float *Y, int64_t ys) {     \
        kq_matmul(TYPE, n, W, stride, r0, r1, X, xs, nb, Y, ys);                                                  \
    }                                                                                                             \
    static void pi_axpy_##tname##_avx512(int64_t n, float a, const void *w, float *y) {                           \
        kq_axpy(TYPE, n, a, w, y);                                                                                \
    }

KQ_KERNELS(PI_TYPE_Q4_K, q4_K)
KQ_KERNELS(PI_TYPE_Q5_K, q5_K)
KQ_KERNELS(PI_TYPE_Q6_K, q6_K)

/* Q4_1, Q5_0, Q5_1 (x86_q4_1_q5.h): 256-bit vectors with VNNI */
LQ_KERNELS(avx512, PI_TYPE_Q4_1, q4_1)
LQ_KERNELS(avx512, PI_TYPE_Q5_0, q5_0)
LQ_KERNELS(avx512, PI_TYPE_Q5_1, q5_1)

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

/* ------------------------------------------------------------- softmax */

PI_DEFINE_EXP_R(exp_r512, __m512, _mm512)

/* exp(x) for x <= 88.7: exp(r) times 2^n by vscalefps (0 or a denormal far
   below; x held at -104 or above so that r stays finite). A NaN stays NaN. */
static inline __m512 exp512(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x); /* the second operand passes a NaN through */
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_scalef_ps(exp_r512(x, n), n);
}

static void pi_softmax_avx512(float *x, int64_t n) {
    __m512 mv = _mm512_set1_ps(x[0]);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) mv = _mm512_max_ps(mv, _mm512_loadu_ps(x + i));
    const __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
    if (tail) mv = _mm512_mask_max_ps(mv, tail, mv, _mm512_maskz_loadu_ps(tail, x + i));
    const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mv));
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (i = 0; i + 16 <= n; i += 16) {
        const __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
        _mm512_storeu_ps(x + i, e);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
    }
    if (tail) {
        const __m512 e = _mm512_maskz_mov_ps(tail, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + i), m)));
        _mm512_mask_storeu_ps(x + i, tail, e);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
    }
    const __m512 inv = _mm512_set1_ps((float)(1.0 / _mm512_reduce_add_pd(_mm512_add_pd(s0, s1))));
    for (i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), inv));
    if (tail) _mm512_mask_storeu_ps(x + i, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + i), inv));
}

/* The two tables differ only in their quant matmuls. */
#define AVX512_TABLE(NAME, MATMUL_Q8_0, MATMUL_Q4_0)                                                          \
    {                                                                                                          \
        .name = NAME,                                                                                          \
        .quantize_q8_0 = pi_quantize_q8_0_avx512,                                                             \
        .quantize_q8_K = pi_quantize_q8_K_avx512,                                                             \
        .softmax = pi_softmax_avx512,                                                                          \
        .vec_dot =                                                                                             \
            {                                                                                                  \
                [PI_TYPE_F32] = pi_vec_dot_f32_avx512,                                                         \
                [PI_TYPE_F16] = pi_vec_dot_f16_avx512,                                                         \
                [PI_TYPE_BF16] = pi_vec_dot_bf16_avx512,                                                       \
                [PI_TYPE_Q8_0] = pi_vec_dot_q8_0_q8_0_avx512,                                                  \
                [PI_TYPE_Q4_0] = pi_vec_dot_q4_0_q8_0_avx512,                                                  \
                [PI_TYPE_Q4_K] = pi_vec_dot_q4_K_q8_K_avx512,                                                  \
                [PI_TYPE_Q5_K] = pi_vec_dot_q5_K_q8_K_avx512,                                                  \
                [PI_TYPE_Q6_K] = pi_vec_dot_q6_K_q8_K_avx512,                                                  \
            },                                                                                                 \
        .vec_dot_rows =                                                                                        \
            {                                                                                                  \
                [PI_TYPE_F32] = pi_vec_dot_rows_f32_avx512,                                                    \
                [PI_TYPE_F16] = pi_vec_dot_rows_f16_avx512,                                                    \
                [PI_TYPE_BF16] = pi_vec_dot_rows_bf16_avx512,                                                  \
                [PI_TYPE_Q8_0] = pi_vec_dot_rows_q8_0_q8_0_avx512,                                             \
                [PI_TYPE_Q4_0] = pi_vec_dot_rows_q4_0_q8_0_avx512,                                             \
                [PI_TYPE_Q4_K] = pi_vec_dot_rows_q4_K_q8_K_avx512,                                             \
                [PI_TYPE_Q5_K] = pi_vec_dot_rows_q5_K_q8_K_avx512,                                             \
                [PI_TYPE_Q6_K] = pi_vec_dot_rows_q6_K_q8_K_avx512,                                             \
            },                                                                                                 \
        .axpy =                                                                                                \
            {                                                                                                  \
                [PI_TYPE_F32] = pi_axpy_f32_avx512,                                                            \
                [PI_TYPE_F16] = pi_axpy_f16_avx512,                                                            \
                [PI_TYPE_BF16] = pi_axpy_bf16_avx512,                                                          \
                [PI_TYPE_Q8_0] = pi_axpy_q8_0_avx512,                                                          \
                [PI_TYPE_Q4_0] = pi_axpy_q4_0_avx512,                                                          \
                [PI_TYPE_Q4_K] = pi_axpy_q4_K_avx512,                                                          \
                [PI_TYPE_Q5_K] = pi_axpy_q5_K_avx512,                                                          \
                [PI_TYPE_Q6_K] = pi_axpy_q6_K_avx512,                                                          \
            },                                                                                                 \
        .axpy_rows = PI_AXPY_ROWS_TABLE(avx512),                                                               \
        .matvec =                                                                                              \
            {                                                                                                  \
                [PI_TYPE_F32] = pi_matvec_f32_avx512,                                                          \
                [PI_TYPE_F16] = pi_matvec_f16_avx512,                                                          \
                [PI_TYPE_BF16] = pi_matvec_bf16_avx512,                                                        \
                [PI_TYPE_Q8_0] = pi_matvec_q8_0_q8_0_avx512,                                                   \
                [PI_TYPE_Q4_0] = pi_matvec_q4_0_q8_0_avx512,                                                   \
                [PI_TYPE_Q4_K] = pi_matvec_q4_K_q8_K_avx512,                                                   \
                [PI_TYPE_Q5_K] = pi_matvec_q5_K_q8_K_avx512,                                                   \
                [PI_TYPE_Q6_K] = pi_matvec_q6_K_q8_K_avx512,                                                   \
            },                                                                                                 \
        .matmul =                                                                                              \
            {                                                                                                  \
                [PI_TYPE_F32] = pi_matmul_f32_avx512,                                                          \
                [PI_TYPE_F16] = pi_matmul_f16_avx512,                                                          \
                [PI_TYPE_BF16] = pi_matmul_bf16_avx512,                                                        \
                [PI_TYPE_Q8_0] = MATMUL_Q8_0,                                                                  \
                [PI_TYPE_Q4_0] = MATMUL_Q4_0,                                                                  \
                [PI_TYPE_Q4_K] = pi_matmul_q4_K_q8_K_avx512,                                                   \
                [PI_TYPE_Q5_K] = pi_matmul_q5_K_q8_K_avx512,                                                   \
                [PI_TYPE_Q6_K] = pi_matmul_q6_K_q8_K_avx512,                                                   \
            },                                                                                                 \
        PI_LQ_TABLE_SLOTS(avx512),                                                                                \
    }

const pi_kernels pi_kernels_avx512 = AVX512_TABLE("avx512", pi_matmul_q8_0_q8_0_avx512, pi_matmul_q4_0_q8_0_avx512);

/* Handed out only where AMX-INT8 runs and the OS lets this process use tiles
   (dispatch.c). */
const pi_kernels pi_kernels_amx = AVX512_TABLE("amx", pi_matmul_q8_0_q8_0_amx, pi_matmul_q4_0_q8_0_amx);
