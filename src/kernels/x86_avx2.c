/*
 * x86_avx2.c — the kernel table for AVX2 + FMA + F16C (x86-64 since ~2013).
 *
 * Compiled with those ISA flags only here; pi_kernels_get() hands this table out
 * only on CPUs that have all three. Semantics are ref.c's; quantize_q8_0 gives
 * ref's exact bytes.
 *
 * The integer dots use vpmaddubsw (unsigned x signed bytes -> pairs summed to
 * int16) and vpmaddwd against ones (-> int32), then one float FMA per block:
 *   - Q4_0: the nibbles are used unsigned (0..15), so no product can saturate
 *     (15 * 127 * 2 < 32767); the offset of 8 is taken out in int16 with a
 *     per-call prepared -8 * (pair sums of the activation). The 16 packed bytes
 *     are broadcast to both 128-bit halves and shifted by 0 / 4 bits per half,
 *     giving [weights 0..15 | weights 16..31] without a lane-crossing shuffle.
 *   - Q8_0: both operands are signed; vpmaddubsw takes |w| and x with w's sign,
 *     which cannot saturate either (128 * 127 * 2 < 32767).
 * Matvecs process four rows at a time so each activation load serves four
 * rows, keep vector accumulators per row and reduce once per row. Quant rows
 * are only 2-byte aligned; all loads are unaligned and stay inside the row.
 */
#include "simd_common.h"

#include <immintrin.h>

#define INLINE static inline __attribute__((always_inline))

/* ---------------------------------------------------------------- helpers */

INLINE float f16_scalar(pi_f16 h) { return _cvtsh_ss(h); }

INLINE float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
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
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float d = _mm_cvtss_f32(m4) / 127.0f;
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

INLINE void float_rows(pi_type t, const int R, int64_t n, const uint8_t *w, size_t stride, const float *x,
                       float *sums) {
    __m256 acc0[4], acc1[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) acc0[k] = acc1[k] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
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
    for (; r + 4 <= r1; r += 4) float_rows(t, 4, n, (const uint8_t *)W + (size_t)r * stride, stride, x, y + r);
    for (; r < r1; r++) float_rows(t, 1, n, (const uint8_t *)W + (size_t)r * stride, stride, x, y + r);
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
    float_rows(PI_TYPE_F32, 1, n, w, 0, x, &s);
    return s;
}
static float pi_vec_dot_f16_avx2(int64_t n, const void *w, const void *x) {
    float s;
    float_rows(PI_TYPE_F16, 1, n, w, 0, x, &s);
    return s;
}
static float pi_vec_dot_bf16_avx2(int64_t n, const void *w, const void *x) {
    float s;
    float_rows(PI_TYPE_BF16, 1, n, w, 0, x, &s);
    return s;
}
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

/* ------------------------------------------------------------ Q4_0 x Q8_0 */

/* One activation block, prepared for unsigned nibbles in natural order. */
typedef struct {
    __m256i xq;    /* the block's 32 activation bytes */
    __m256i ncorr; /* int16 lane l: -8 * (x[2l] + x[2l+1]) */
} q4_0_xblock;

static void prep_q4_0(const pi_block_q8_0 *x, int64_t nb, q4_0_xblock *g, float *dx) {
    const __m256i ones = _mm256_set1_epi8(1);
    for (int64_t b = 0; b < nb; b++) {
        const __m256i xq = _mm256_loadu_si256((const __m256i *)x[b].qs);
        g[b].xq = xq;
        g[b].ncorr = _mm256_slli_epi16(_mm256_sub_epi16(_mm256_setzero_si256(), _mm256_maddubs_epi16(ones, xq)), 3);
        dx[b] = f16_scalar(x[b].d);
    }
}

/* The 32 weights of a block as unsigned bytes in natural order: the 16 packed
   bytes go to both halves, the upper half shifted right by 4 (per dword: the
   next byte's bits land in the masked-off high nibble). */
INLINE __m256i q4_0_unpack(const uint8_t *qs) {
    const __m256i shift = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
    const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_srlv_epi32(q, shift), _mm256_set1_epi8(0x0f));
}

INLINE __m256 f16_bcast(const void *p) {
    pi_f16 h;
    __builtin_memcpy(&h, p, sizeof h);
    return _mm256_cvtph_ps(_mm_set1_epi16((short)h));
}

INLINE void q4_0_rows(const int R, const uint8_t *w, size_t stride, const q4_0_xblock *g, const float *dx,
                      int64_t nb, float *sums) {
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 acc[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) acc[k] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const __m256 vdx = _mm256_broadcast_ss(dx + b);
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const uint8_t *p = w + k * stride + b * sizeof(pi_block_q4_0);
            const __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(q4_0_unpack(p + 2), g[b].xq), g[b].ncorr);
            const __m256 f = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones16));
            acc[k] = _mm256_fmadd_ps(f, _mm256_mul_ps(f16_bcast(p), vdx), acc[k]);
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) sums[k] = hsum256(acc[k]);
}

static void pi_matvec_q4_0_q8_0_avx2(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1,
                                     const void *vx, float *y) {
    const pi_block_q8_0 *x = vx;
    const int64_t nb = n / PI_QK4_0;
    q4_0_xblock g[PI_SIMD_CHUNK_BLOCKS];
    float dx[PI_SIMD_CHUNK_BLOCKS];
    if (nb == 0)
        for (int64_t r = r0; r < r1; r++) y[r] = 0.0f;
    for (int64_t c0 = 0; c0 < nb; c0 += PI_SIMD_CHUNK_BLOCKS) {
        const int64_t cb = nb - c0 < PI_SIMD_CHUNK_BLOCKS ? nb - c0 : PI_SIMD_CHUNK_BLOCKS;
        prep_q4_0(x + c0, cb, g, dx);
        const uint8_t *base = (const uint8_t *)W + c0 * sizeof(pi_block_q4_0);
        float s[4];
        int64_t r = r0;
        for (; r + 4 <= r1; r += 4) {
            q4_0_rows(4, base + (size_t)r * stride, stride, g, dx, cb, s);
            for (int k = 0; k < 4; k++) y[r + k] = c0 ? y[r + k] + s[k] : s[k];
        }
        for (; r < r1; r++) {
            q4_0_rows(1, base + (size_t)r * stride, stride, g, dx, cb, s);
            y[r] = c0 ? y[r] + s[0] : s[0];
        }
    }
}

static float pi_vec_dot_q4_0_q8_0_avx2(int64_t n, const void *vw, const void *vx) {
    /* One row: no preparation; the offset of 8 comes out via a second
       vpmaddubsw of bytes 8 against x (each at most 8 * 127 * 2). */
    const pi_block_q4_0 *w = vw;
    const pi_block_q8_0 *x = vx;
    const __m256i ones16 = _mm256_set1_epi16(1), eights = _mm256_set1_epi8(8);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    const int64_t nb = n / PI_QK4_0;
    for (int64_t b = 0; b < nb; b++) {
        const __m256i xq = _mm256_loadu_si256((const __m256i *)x[b].qs);
        const __m256i p16 =
            _mm256_sub_epi16(_mm256_maddubs_epi16(q4_0_unpack(w[b].qs), xq), _mm256_maddubs_epi16(eights, xq));
        const __m256 f = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones16));
        const __m256 s = _mm256_set1_ps(f16_scalar(w[b].d) * f16_scalar(x[b].d));
        if (b & 1) acc1 = _mm256_fmadd_ps(f, s, acc1);
        else acc0 = _mm256_fmadd_ps(f, s, acc0);
    }
    return hsum256(_mm256_add_ps(acc0, acc1));
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

/* ------------------------------------------------------------ Q8_0 x Q8_0 */

/* Integer dot of one block pair as 8 int32 lanes. */
INLINE __m256i q8_0_block_dot(__m256i wq, __m256i xq) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_abs_epi8(wq), _mm256_sign_epi8(xq, wq));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

INLINE void q8_0_rows(const int R, const uint8_t *w, size_t stride, const pi_block_q8_0 *x, int64_t nb,
                      float *sums) {
    __m256 acc[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) acc[k] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const __m256i xq = _mm256_loadu_si256((const __m256i *)x[b].qs);
        const __m256 vdx = _mm256_set1_ps(f16_scalar(x[b].d));
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const uint8_t *p = w + k * stride + b * sizeof(pi_block_q8_0);
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
    float s[4];
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
        q8_0_rows(4, (const uint8_t *)W + (size_t)r * stride, stride, x, nb, s);
        for (int k = 0; k < 4; k++) y[r + k] = s[k];
    }
    for (; r < r1; r++) q8_0_rows(1, (const uint8_t *)W + (size_t)r * stride, stride, x, nb, y + r);
}

static float pi_vec_dot_q8_0_q8_0_avx2(int64_t n, const void *w, const void *x) {
    float s;
    q8_0_rows(1, w, 0, x, n / PI_QK8_0, &s);
    return s;
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

const pi_kernels pi_kernels_avx2 = {
    .name = "avx2",
    .quantize_q8_0 = pi_quantize_q8_0_avx2,
    .vec_dot =
        {
            [PI_TYPE_F32] = pi_vec_dot_f32_avx2,
            [PI_TYPE_F16] = pi_vec_dot_f16_avx2,
            [PI_TYPE_BF16] = pi_vec_dot_bf16_avx2,
            [PI_TYPE_Q8_0] = pi_vec_dot_q8_0_q8_0_avx2,
            [PI_TYPE_Q4_0] = pi_vec_dot_q4_0_q8_0_avx2,
        },
    .axpy =
        {
            [PI_TYPE_F32] = pi_axpy_f32_avx2,
            [PI_TYPE_F16] = pi_axpy_f16_avx2,
            [PI_TYPE_BF16] = pi_axpy_bf16_avx2,
            [PI_TYPE_Q8_0] = pi_axpy_q8_0_avx2,
            [PI_TYPE_Q4_0] = pi_axpy_q4_0_avx2,
        },
    .matvec =
        {
            [PI_TYPE_F32] = pi_matvec_f32_avx2,
            [PI_TYPE_F16] = pi_matvec_f16_avx2,
            [PI_TYPE_BF16] = pi_matvec_bf16_avx2,
            [PI_TYPE_Q8_0] = pi_matvec_q8_0_q8_0_avx2,
            [PI_TYPE_Q4_0] = pi_matvec_q4_0_q8_0_avx2,
        },
};
