/*
 * test_kernels.c — the kernels against their specification.
 *
 *   1. Scalar half-precision conversions: every f16/bf16 pattern round-trips,
 *      and f32 -> f16/bf16 rounds to nearest-even as a float64 model does.
 *   2. The reference (ref.c): quantize -> dequantize error bounds; the
 *      K-quant dequantizers on hand-built blocks against values worked out
 *      from the layouts in types.h; the Q8_K quantizer's rounding, signs,
 *      bsums and zero blocks; its dot products against a float64 dot of the
 *      dequantized values.
 *   3. Every table this host runs against ref, on random data: quantize_q8_0
 *      and quantize_q8_K byte for byte; vec_dot, matvec and axpy within named
 *      tolerances, for every weight type, short/odd/long rows, several seeds,
 *      inputs at odd (but legal) alignments, matvec row ranges with padded
 *      rows and sentinel outputs, axpy with a sentinel past y[n]; every table
 *      has every slot ref has.
 *   4. matmul (the batched product) of every table against ref's vec_dot:
 *      every weight type, batches of 1..70 inputs (none a multiple of a tile
 *      size but 8 and 64), odd row ranges that leave partial row tiles, padded
 *      rows, inputs spaced wider than they are, an output stride wider than
 *      the rows with sentinels in every gap, misaligned (but legal) pointers.
 *   5. vec_dot_rows (dots of a list of scattered rows) of every table: the
 *      same bits as that table's vec_dot for each row, and ref's values within
 *      the vec_dot tolerances; lists of 0..64 rows drawn with repeats, row
 *      lengths past the SIMD activation chunk, rows at odd addresses (quant
 *      types, SIMD tables), sentinels around the outputs.
 *   6. axpy_rows (the gathered axpy) of every table: ref is ref's axpy row
 *      by row, the SIMD tables give the bits of a scalar model with one
 *      fused multiply-add per element and row (Q4_0, Q4_1, Q5_0, Q5_1 and the K-quants: the
 *      integer models of axpy_rows.h, 16-bit coefficients per group of 8
 *      rows, also at extreme and non-finite coefficients) and agree with ref
 *      within a tolerance (those: plus the coefficients' rounding); zero
 *      coefficients skip their (possibly NULL) rows; a list split into two
 *      calls gives the bits of one (those: split between groups); lists of
 *      0..64 rows with repeats, rows at odd addresses, sentinels around y.
 *   7. softmax of every table against ref: lengths 1..4099 (partial
 *      vectors), spreads of the inputs from 0.01 to 100 (exponents down to
 *      where exp underflows), each output within 2e-6 of ref's relative to
 *      it plus 1e-30, the outputs summing to 1, nothing written past n; a
 *      NaN input makes every output NaN.
 *   8. Dispatch: names, by_name, PI_KERNELS forcing and fallback.
 *
 * Tolerances are relative to S = sum |w_i x_i| over the dequantized values: a
 * float sum of k terms is off by at most about k * 2^-24 * S however the terms
 * cancel, so S (not the result) is the scale that bounds correct kernels.
 *
 * K-quant weight rows (Q4_K, Q5_K, Q6_K) are random block bytes with sane f16
 * scales, not quantized floats: every bit pattern of their scales, mins and
 * quants is a valid block, so this exercises the kernels as well, and keeps
 * these tests independent of the K-quant quantizers (quant_k.c).
 */
#include "kernels/kernels.h"
#include "test_util.h"

#include <float.h>
#include <sys/wait.h>

/* Worst-case float summation error, as a fraction of S, for a kernel that adds
   k terms in sequence per lane: k roundings of at most 2^-24 each, plus 64 for
   the horizontal reductions, scalar tails and chunk sums. A SIMD row of n
   elements has at most n / 8 terms per lane (8 lanes is the narrowest table);
   ref accumulates in double and rounds once, which the slack covers. */
#define TOL_FLOAT_REL(n) ((double)((n) / 8 + 64) * 0x1p-24)

/* Quant dots: each block's integer dot is exact in every table; the block's
   term d_w * d_x * idot costs up to 3 roundings (scale product, conversion,
   FMA) and then adds to a lane that holds at most nb terms. */
#define TOL_Q_REL(nb) ((double)(3 * (nb) + 64) * 0x1p-24)

/* ref's double accumulation vs an exact float64 model: one final rounding to
   float (2^-24 of the result, hence of S) plus double-precision noise. The
   model's dequantized K-quant operands are themselves rounded to float (Q8_K's
   d * q, and Q4_K / Q5_K's d * sc * q - dmin * m) while ref works from the
   integers: up to 2^-24 of each |w_i x_i| per operand more, 3 * 2^-24 of S
   in all. */
#define TOL_REF_REL 0x1p-22

/* axpy: ref rounds a*w then the sum (2 roundings), SIMD may fuse them (1):
   they differ by at most 2 ulps of |y| + |a w|. */
#define TOL_AXPY_REL 0x1p-22

#define SENTINEL (-1234.5678f)

static const pi_type k_types[] = {PI_TYPE_F32,  PI_TYPE_F16,  PI_TYPE_BF16, PI_TYPE_Q8_0, PI_TYPE_Q4_0, PI_TYPE_Q4_1,
                                  PI_TYPE_Q5_0, PI_TYPE_Q5_1, PI_TYPE_Q4_K, PI_TYPE_Q5_K, PI_TYPE_Q6_K};

static bool is_k(pi_type t) { return t == PI_TYPE_Q4_K || t == PI_TYPE_Q5_K || t == PI_TYPE_Q6_K; }

/* The blocks of 32 with an offset or a fifth bit (llama.cpp's fallbacks). */
static bool is_q32x(pi_type t) { return t == PI_TYPE_Q4_1 || t == PI_TYPE_Q5_0 || t == PI_TYPE_Q5_1; }

static bool is_quant(pi_type t) { return t == PI_TYPE_Q8_0 || t == PI_TYPE_Q4_0 || is_q32x(t) || is_k(t); }

/* ------------------------------------------------------------ data */

/* Random values whose magnitude changes every 32 elements over 4 decades,
   so quant blocks see very different scales; every 11th block (for some
   seeds) is all zero, which gives a zero scale. */
static void fill_random(t_rng *r, float *x, int64_t n, bool zero_blocks) {
    for (int64_t b = 0; b * 32 < n; b++) {
        const float scale = powf(10.0f, 4.0f * (t_uniform(r) + 1.0f) * 0.5f - 3.0f);
        const bool zero = zero_blocks && b % 11 == 5;
        for (int64_t i = b * 32; i < n && i < (b + 1) * 32; i++) x[i] = zero ? 0.0f : t_normal(r) * scale;
    }
}

/* A buffer of `size` bytes at `offset` bytes past a malloc'd base, so ASan
   flags any read past its end and the data start is misaligned on purpose. */
typedef struct {
    uint8_t *base;
    uint8_t *p;
} tbuf;

static tbuf tbuf_new(size_t size, size_t offset) {
    tbuf b;
    b.base = malloc(size + offset);
    if (!b.base) abort();
    b.p = b.base + offset;
    return b;
}

static void tbuf_free(tbuf *b) { free(b->base); }

/* The legal misalignment for data of type t: quant blocks and halves are
   2-byte aligned in files, floats 4, and so are Q8_K activations (an f32
   scale per block). */
static size_t odd_offset(pi_type t, uint64_t seed) {
    if (t == PI_TYPE_F32 || t == PI_TYPE_Q8_K) return 4 + 8 * (seed & 1);
    return 2 + 4 * (seed & 1);
}

/* Alignment unit of data of type t (spacing of padded rows and inputs). */
static size_t align_of(pi_type t) { return t == PI_TYPE_F32 || t == PI_TYPE_Q8_K ? 4 : 2; }

/* Random bytes. */
static void fill_bytes(t_rng *r, uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(t_next(r) >> 56);
}

/* A random K-quant row of n elements at dst: random quants, scales and mins,
   and per block f16 scales d (and dmin) over 4 decades (Q6_K's d of either
   sign); with zero_blocks, every 11th block has d = dmin = 0 (all its weights
   zero). */
static void fill_k_row(t_rng *r, pi_type t, void *dst, int64_t n, bool zero_blocks) {
    for (int64_t b = 0; b < n / PI_QK_K; b++) {
        const bool zero = zero_blocks && b % 11 == 5;
        const float d = zero ? 0.0f : powf(10.0f, 2.0f * t_uniform(r) - 3.0f);
        const float dmin = zero ? 0.0f : d * 4.0f * (t_uniform(r) + 1.0f);
        if (t == PI_TYPE_Q4_K) {
            pi_block_q4_K *y = (pi_block_q4_K *)dst + b;
            fill_bytes(r, (uint8_t *)y, sizeof *y);
            y->d = pi_f32_to_f16(d), y->dmin = pi_f32_to_f16(dmin);
        } else if (t == PI_TYPE_Q5_K) {
            pi_block_q5_K *y = (pi_block_q5_K *)dst + b;
            fill_bytes(r, (uint8_t *)y, sizeof *y);
            y->d = pi_f32_to_f16(d), y->dmin = pi_f32_to_f16(dmin);
        } else {
            pi_block_q6_K *y = (pi_block_q6_K *)dst + b;
            fill_bytes(r, (uint8_t *)y, sizeof *y);
            y->d = pi_f32_to_f16(t_next(r) & 1 ? -d : d);
        }
    }
}

/* One random weight row of type t at dst (tmp: n floats of scratch): K-quants
   as random blocks, other types quantized from fill_random's values. */
static void make_row(t_rng *r, pi_type t, float *tmp, void *dst, int64_t n, bool zero_blocks) {
    if (is_k(t)) {
        fill_k_row(r, t, dst, n, zero_blocks);
        return;
    }
    fill_random(r, tmp, n, zero_blocks);
    pi_quantize_row(t, tmp, dst, n);
}

/* ------------------------------------------------------------ 1. conversions */

/* Correctly rounded (RNE) f16 value of a finite float, in double. */
static double f16_model(double v) {
    const double a = fabs(v);
    if (a >= 65520.0) return copysign(INFINITY, v); /* the tie at 65520 goes up (to even) */
    double q = 0x1p-24;                             /* subnormal spacing */
    if (a >= 0x1p-14) {
        int e;
        frexp(a, &e); /* a in [2^(e-1), 2^e) */
        q = ldexp(1.0, e - 1 - 10);
    }
    return copysign(nearbyint(a / q) * q, v);
}

/* Correctly rounded (RNE) bf16 value of a finite float, in double. */
static double bf16_model(double v) {
    const double a = fabs(v);
    double q = 0x1p-133; /* subnormal spacing: 7 mantissa bits below 2^-126 */
    if (a >= 0x1p-126) {
        int e;
        frexp(a, &e);
        q = ldexp(1.0, e - 1 - 7);
    }
    const double r = nearbyint(a / q) * q;
    return copysign(r >= 0x1p128 ? INFINITY : r, v);
}

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static bool same_value(double got, double want) {
    return got == want && signbit(got) == signbit(want); /* +0 and -0 differ */
}

static void test_conversions(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        const float f = pi_f16_to_f32((pi_f16)h);
        const pi_f16 back = pi_f32_to_f16(f);
        const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (nan ? !(isnan(f) && (back & 0x7c00) == 0x7c00 && (back & 0x3ff)) : back != h) bad++;
    }
    CHECKF(bad == 0, "%d f16 patterns do not round-trip", bad);

    bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        const float f = pi_bf16_to_f32((pi_bf16)h);
        const pi_bf16 back = pi_f32_to_bf16(f);
        const bool nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        if (nan ? !(isnan(f) && isnan(pi_bf16_to_f32(back))) : back != h) bad++;
    }
    CHECKF(bad == 0, "%d bf16 patterns do not round-trip", bad);

    /* Random floats: exponents from deep in the f16 subnormal range to past
       its overflow (and over the whole f32 range for bf16), plus exact ties
       halfway between neighbouring f16 / bf16 values. */
    t_rng r = {0x5eed};
    int bad16 = 0, bad_bf = 0, bad_tie16 = 0, bad_tiebf = 0;
    for (int i = 0; i < 200000; i++) {
        const uint64_t u = t_next(&r);
        const uint32_t sign = (uint32_t)(u >> 63) << 31;
        const uint32_t exp16 = 127 - 30 + (uint32_t)((u >> 32) % 48); /* 2^-30 .. 2^17 */
        const float f = f32_from_bits(sign | exp16 << 23 | ((uint32_t)u & 0x7fffff));
        if (!same_value(pi_f16_to_f32(pi_f32_to_f16(f)), f16_model(f))) bad16++;

        const uint32_t exp32 = (uint32_t)((u >> 40) % 255); /* every finite exponent */
        const float g = f32_from_bits(sign | exp32 << 23 | ((uint32_t)u & 0x7fffff));
        if (!same_value(pi_bf16_to_f32(pi_f32_to_bf16(g)), bf16_model(g))) bad_bf++;

        const pi_f16 h = (pi_f16)(u >> 16 & 0x7bfe); /* finite, with a finite successor */
        const float tie16 = (float)(((double)pi_f16_to_f32(h) + pi_f16_to_f32((pi_f16)(h + 1))) / 2);
        if (!same_value(pi_f16_to_f32(pi_f32_to_f16(tie16)), f16_model(tie16))) bad_tie16++;

        const pi_bf16 hb = (pi_bf16)(u >> 16 & 0x7f7e);
        const float tiebf = (float)(((double)pi_bf16_to_f32(hb) + pi_bf16_to_f32((pi_bf16)(hb + 1))) / 2);
        if (!same_value(pi_bf16_to_f32(pi_f32_to_bf16(tiebf)), bf16_model(tiebf))) bad_tiebf++;
    }
    CHECKF(bad16 == 0, "%d random floats round to f16 differently from the model", bad16);
    CHECKF(bad_bf == 0, "%d random floats round to bf16 differently from the model", bad_bf);
    CHECKF(bad_tie16 == 0, "%d f16 ties not rounded to even", bad_tie16);
    CHECKF(bad_tiebf == 0, "%d bf16 ties not rounded to even", bad_tiebf);
    CHECK(pi_f32_to_f16(65519.0f) == 0x7bff && pi_f32_to_f16(65520.0f) == 0x7c00);
    CHECK(pi_f32_to_f16(-INFINITY) == 0xfc00 && isnan(pi_f16_to_f32(pi_f32_to_f16(NAN))));
}

/* ------------------------------------------------------------ 2. reference */

static void test_quantize_bounds(void) {
    t_rng r = {42};
    const int64_t n = 32 * 257;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    void *q = malloc(pi_row_size(PI_TYPE_Q8_0, n));
    fill_random(&r, x, n, true);

    /* Q8_0: q = round(x / d) with d = amax / 127, so |x - q d| <= d / 2; the
       stored scale is d rounded to f16, which moves q d by |q| |d - d16|. */
    pi_quantize_row(PI_TYPE_Q8_0, x, q, n);
    pi_dequantize_row(PI_TYPE_Q8_0, q, y, n);
    int bad = 0;
    for (int64_t b = 0; b < n / 32; b++) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
        const double d = amax / 127.0f, d16 = pi_f16_to_f32(((pi_block_q8_0 *)q)[b].d);
        const double bound = d / 2 * (1 + 1e-6) + 127 * fabs(d - d16);
        for (int j = 0; j < 32; j++) bad += fabs((double)x[b * 32 + j] - y[b * 32 + j]) > bound;
    }
    CHECKF(bad == 0, "Q8_0: %d elements off by more than d/2", bad);

    /* Q4_0: |x - (q - 8) d| <= |d| / 2 with d = m / -8, except for elements
       near -m (x / d >= 7.5) that clamp to 15: off by up to |d|. */
    pi_quantize_row(PI_TYPE_Q4_0, x, q, n);
    pi_dequantize_row(PI_TYPE_Q4_0, q, y, n);
    bad = 0;
    int clamped = 0;
    for (int64_t b = 0; b < n / 32; b++) {
        float amax = 0.0f, m = 0.0f;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(x[b * 32 + j])) amax = fabsf(x[b * 32 + j]), m = x[b * 32 + j];
        const double d = m / -8.0f, d16 = pi_f16_to_f32(((pi_block_q4_0 *)q)[b].d);
        for (int j = 0; j < 32; j++) {
            const double xv = x[b * 32 + j];
            const bool top = d != 0 && xv / d >= 7.5;
            clamped += top;
            const double bound = fabs(d) * (top ? 1.0 : 0.5) * (1 + 1e-6) + 8 * fabs(d - d16);
            bad += fabs(xv - y[b * 32 + j]) > bound;
        }
    }
    CHECKF(bad == 0, "Q4_0: %d elements off by more than d/2 (or d when clamped)", bad);
    CHECK(clamped > 0); /* the data does exercise the clamp */

    /* Q4_1 / Q5_1: q = trunc((x - min) / d + 0.5) with d = (max - min) / L
       (L = 15, 31), so |x - (q d + min)| <= d / 2 (the last level is capped
       at L, which x = max reaches within a rounding); the stored d and m are
       rounded to f16, which moves q d + m by |q| |d - d16| + |m - m16|.
       Q5_0: as Q4_0 with 16 levels each side. */
    {
        void *q32 = malloc(pi_row_size(PI_TYPE_Q5_1, n));
        const pi_type ts[3] = {PI_TYPE_Q4_1, PI_TYPE_Q5_0, PI_TYPE_Q5_1};
        for (int ti = 0; ti < 3; ti++) {
            const pi_type t = ts[ti];
            pi_quantize_row(t, x, q32, n);
            pi_dequantize_row(t, q32, y, n);
            const size_t bs = pi_row_size(t, 32);
            bad = 0;
            for (int64_t b = 0; b < n / 32; b++) {
                const float *xb = x + b * 32;
                pi_f16 d16h, m16h = 0;
                memcpy(&d16h, (const uint8_t *)q32 + b * bs, 2);
                if (t != PI_TYPE_Q5_0) memcpy(&m16h, (const uint8_t *)q32 + b * bs + 2, 2);
                const double d16 = pi_f16_to_f32(d16h), m16 = pi_f16_to_f32(m16h);
                double d, m = 0, top = 0;
                if (t == PI_TYPE_Q5_0) {
                    float amax = 0.0f, mm = 0.0f;
                    for (int j = 0; j < 32; j++)
                        if (amax < fabsf(xb[j])) amax = fabsf(xb[j]), mm = xb[j];
                    d = mm / -16.0f;
                    top = 16;
                } else {
                    float lo = xb[0], hi = xb[0];
                    for (int j = 1; j < 32; j++) lo = fminf(lo, xb[j]), hi = fmaxf(hi, xb[j]);
                    d = (hi - lo) / (t == PI_TYPE_Q4_1 ? 15.0 : 31.0);
                    m = lo;
                    top = t == PI_TYPE_Q4_1 ? 15 : 31;
                }
                for (int j = 0; j < 32; j++) {
                    const double xv = xb[j];
                    const bool clamp = t == PI_TYPE_Q5_0 && d != 0 && xv / d >= 15.5;
                    const double bound = fabs(d) * (clamp ? 1.0 : 0.5) * (1 + 1e-5) + top * fabs(d - d16) +
                                         fabs(m - m16) + fabs(xv) * 1e-6;
                    bad += fabs(xv - y[b * 32 + j]) > bound;
                }
            }
            CHECKF(bad == 0, "%s: %d elements off by more than d/2", pi_type_name(t), bad);
        }
        free(q32);

        /* hand-worked blocks: x_j = j - 16 in Q5_0 gives d = 1 (-16 maps to
           level 0) and level j; x_j = j in Q5_1 gives d = 1, m = 0 and level
           j; so nibble bytes j | j << 4 and the fifth bits of weights 16..31 */
        float v[32];
        pi_block_q5_0 b50;
        pi_block_q5_1 b51;
        pi_block_q4_1 b41;
        for (int j = 0; j < 32; j++) v[j] = (float)j - 16.0f;
        pi_quantize_row(PI_TYPE_Q5_0, v, &b50, 32);
        CHECK(b50.d == 0x3c00 && b50.qs[0] == 0x00 && b50.qs[3] == 0x33 && b50.qs[15] == 0xff);
        CHECK(b50.qh[0] == 0 && b50.qh[1] == 0 && b50.qh[2] == 0xff && b50.qh[3] == 0xff);
        for (int j = 0; j < 32; j++) v[j] = (float)j;
        pi_quantize_row(PI_TYPE_Q5_1, v, &b51, 32);
        CHECK(b51.d == 0x3c00 && b51.m == 0 && b51.qs[5] == 0x55 && b51.qh[1] == 0 && b51.qh[3] == 0xff);
        /* x_j = j % 16 + 2 in Q4_1: d = 1, m = 2 (0x4000), level j % 16 */
        for (int j = 0; j < 32; j++) v[j] = (float)(j % 16) + 2.0f;
        pi_quantize_row(PI_TYPE_Q4_1, v, &b41, 32);
        CHECK(b41.d == 0x3c00 && b41.m == 0x4000 && b41.qs[0] == 0x00 && b41.qs[7] == 0x77 && b41.qs[15] == 0xff);
        /* dequantizing reads the layout of types.h: weight j + 16 is the high
           nibble of qs[j], its fifth bit bit j + 16 of qh */
        memset(&b51, 0, sizeof b51);
        b51.d = 0x4000; /* 2 */
        b51.m = 0xbc00; /* -1 */
        b51.qs[2] = 0x31;  /* weight 2: 1, weight 18: 3 */
        b51.qh[2] = 0x04;  /* bit 18: weight 18 + 16 */
        pi_dequantize_row(PI_TYPE_Q5_1, &b51, v, 32);
        CHECK(v[2] == 1.0f && v[18] == 37.0f && v[0] == -1.0f && v[17] == -1.0f);
        memset(&b50, 0, sizeof b50);
        b50.d = 0x3800; /* 0.5 */
        b50.qs[1] = 0xf0;  /* weight 1: 0, weight 17: 15 */
        b50.qh[0] = 0x02;  /* bit 1: weight 1 + 16 */
        pi_dequantize_row(PI_TYPE_Q5_0, &b50, v, 32);
        CHECK(v[1] == 0.0f && v[17] == -0.5f && v[0] == -8.0f);
    }

    /* F16 / BF16: relative rounding error 2^-11 / 2^-8; below 2^-14 f16 is
       subnormal with spacing 2^-24, so its error is at most 2^-25 there. */
    int bad16 = 0, badbf = 0;
    pi_f16 *h = malloc(n * sizeof *h);
    pi_quantize_row(PI_TYPE_F16, x, h, n);
    pi_dequantize_row(PI_TYPE_F16, h, y, n);
    for (int64_t i = 0; i < n; i++) bad16 += fabs((double)x[i] - y[i]) > fmax(fabs(x[i]) * 0x1p-11, 0x1p-25);
    pi_quantize_row(PI_TYPE_BF16, x, h, n);
    pi_dequantize_row(PI_TYPE_BF16, h, y, n);
    for (int64_t i = 0; i < n; i++) badbf += fabs((double)x[i] - y[i]) > fabs(x[i]) * 0x1p-8;
    CHECKF(bad16 == 0 && badbf == 0, "f16: %d, bf16: %d elements beyond half an ulp", bad16, badbf);

    /* RNE ties in Q8_0: amax 127 gives d = 1 exactly, so x.5 values are ties. */
    float t[32] = {127.0f, 2.5f, 3.5f, -2.5f, -3.5f, 0.5f, -0.5f, 1.5f, 126.5f};
    pi_block_q8_0 tb;
    pi_quantize_row(PI_TYPE_Q8_0, t, &tb, 32);
    CHECK(tb.qs[0] == 127 && tb.qs[1] == 2 && tb.qs[2] == 4 && tb.qs[3] == -2 && tb.qs[4] == -4);
    CHECK(tb.qs[5] == 0 && tb.qs[6] == 0 && tb.qs[7] == 2 && tb.qs[8] == 126 && tb.d == 0x3c00);

    /* Q4_0 packing: weight j in the low nibble of qs[j], j + 16 in the high. */
    float p[32];
    for (int j = 0; j < 32; j++) p[j] = (float)(j % 16) - 8.0f;
    p[0] = -8.0f; /* m = -8 -> d = 1 */
    pi_block_q4_0 pb;
    pi_quantize_row(PI_TYPE_Q4_0, p, &pb, 32);
    CHECK(pb.d == 0x3c00 && pb.qs[0] == 0x00 && pb.qs[3] == 0x33 && pb.qs[15] == 0xff);
    free(h);
    free(x);
    free(y);
    free(q);
}

/* The exact dot of the dequantized operands and S = sum |w_i x_i|. */
static void exact_dot(pi_type t, int64_t n, const void *w, const void *xa, double *dot, double *S) {
    float *wd = malloc(n * sizeof *wd), *xd = malloc(n * sizeof *xd);
    pi_dequantize_row(t, w, wd, n);
    pi_dequantize_row((pi_type)pi_vec_dot_type(t), xa, xd, n);
    *dot = *S = 0.0;
    for (int64_t i = 0; i < n; i++) {
        *dot += (double)wd[i] * xd[i];
        *S += fabs((double)wd[i] * xd[i]);
    }
    free(wd);
    free(xd);
}

/* The scales and mins of the hand-built Q4_K / Q5_K block, and its 12 scale
   bytes packed by hand from them per types.h: bytes 0-3 hold sc[0..3] in
   their low 6 bits and the top 2 bits of sc[4..7] in their top 2; bytes 4-7
   the same for the mins; bytes 8-11 the low 4 bits of sc[4..7] (low nibble)
   and of m[4..7] (high nibble). E.g. sc[4] = 17 = 0b01'0001: 1 in the top
   bits of byte 0 (0x41 with sc[0] = 1), 1 in the low nibble of byte 8. */
static const int k_sc[8] = {1, 2, 3, 63, 17, 33, 48, 63}, k_m[8] = {0, 5, 62, 7, 20, 40, 63, 1};
static const uint8_t k_scale_bytes[12] = {0x41, 0x82, 0xc3, 0xff, 0x40, 0x85, 0xfe, 0x07, 0x41, 0x81, 0xf0, 0x1f};

/* Nibbles of the hand-built Q4_K block: byte l of group i (qs[32i + l]). */
static int k_lo(int i, int l) { return (l + 5 * i) & 15; }
static int k_hi(int i, int l) { return (l * 3 + i) & 15; }

/* The K-quant dequantizers on hand-built blocks: every weight against the
   value worked out from types.h's layout (d, dmin and the scales are chosen
   so that every value is exact in float), plus a few worked by hand. */
static void test_k_dequant(void) {
    float y[PI_QK_K];
    int bad;

    /* Q4_K: d = 0.5, dmin = 0.25; weight p is in sub-block j = p / 32, group
       i = p / 64 of qs, the low nibble in the group's first 32 weights, the
       high nibble in its last 32. */
    pi_block_q4_K b4;
    b4.d = 0x3800, b4.dmin = 0x3400;
    memcpy(b4.scales, k_scale_bytes, 12);
    for (int i = 0; i < 4; i++)
        for (int l = 0; l < 32; l++) b4.qs[32 * i + l] = (uint8_t)(k_lo(i, l) | k_hi(i, l) << 4);
    pi_dequantize_row(PI_TYPE_Q4_K, &b4, y, PI_QK_K);
    bad = 0;
    for (int p = 0; p < PI_QK_K; p++) {
        const int i = p / 64, r = p % 64, j = p / 32;
        const int q = r < 32 ? k_lo(i, r) : k_hi(i, r - 32);
        bad += y[p] != 0.5f * (float)(k_sc[j] * q) - 0.25f * (float)k_m[j];
    }
    CHECKF(bad == 0, "Q4_K: %d of 256 hand-built weights dequantize wrong", bad);
    /* weight 130: sub-block 4 (sc 17, m 20: packed high bits), low nibble of
       qs[66] = 12: 0.5*17*12 - 0.25*20; weight 165: sub-block 5 (33, 40),
       high nibble of qs[69] = 1; 255: sub-block 7 (63, 1), high nibble 0 */
    CHECK(y[3] == 1.5f && y[130] == 97.0f && y[165] == 6.5f && y[255] == -0.25f);

    /* Q5_K: the same plus qh[l] = 37 l + 11; bit j of qh[l] adds 16 to
       weight l of sub-block j */
    pi_block_q5_K b5;
    b5.d = b4.d, b5.dmin = b4.dmin;
    memcpy(b5.scales, k_scale_bytes, 12);
    memcpy(b5.qs, b4.qs, sizeof b5.qs);
    for (int l = 0; l < 32; l++) b5.qh[l] = (uint8_t)(37 * l + 11);
    pi_dequantize_row(PI_TYPE_Q5_K, &b5, y, PI_QK_K);
    bad = 0;
    for (int p = 0; p < PI_QK_K; p++) {
        const int i = p / 64, r = p % 64, j = p / 32, l = p % 32;
        const int q = (r < 32 ? k_lo(i, r) : k_hi(i, r - 32)) + 16 * ((b5.qh[l] >> j) & 1);
        bad += y[p] != 0.5f * (float)(k_sc[j] * q) - 0.25f * (float)k_m[j];
    }
    CHECKF(bad == 0, "Q5_K: %d of 256 hand-built weights dequantize wrong", bad);
    /* weight 130: qh[2] = 85 has bit 4, q = 28; 165: qh[5] = 196 lacks bit 5;
       255: qh[31] = 134 has bit 7, q = 16 */
    CHECK(y[3] == 1.5f && y[130] == 233.0f && y[165] == 6.5f && y[255] == 503.75f);

    /* Q6_K: d = 0.5, signed scales (both extremes), ql[i] = 11 i + 7,
       qh[i] = 29 i + 3. Weight p: half h = p / 128, in it c = (p % 128) / 32
       and l = p % 32; its low 4 bits are a nibble of ql[64h + l + 32 (c & 1)]
       (the high one for c >= 2), its top 2 bits 2c, 2c+1 of qh[32h + l]; its
       scale is scales[p / 16]. */
    static const int8_t sc6[16] = {1, -1, 2, -3, 127, -128, 5, -7, 64, -64, 0, 9, -10, 11, -12, 13};
    pi_block_q6_K b6;
    b6.d = 0x3800;
    memcpy(b6.scales, sc6, 16);
    for (int i = 0; i < 128; i++) b6.ql[i] = (uint8_t)(11 * i + 7);
    for (int i = 0; i < 64; i++) b6.qh[i] = (uint8_t)(29 * i + 3);
    pi_dequantize_row(PI_TYPE_Q6_K, &b6, y, PI_QK_K);
    bad = 0;
    for (int p = 0; p < PI_QK_K; p++) {
        const int h = p / 128, c = (p % 128) / 32, l = p % 32;
        const uint8_t lb = b6.ql[64 * h + l + 32 * (c & 1)];
        const int q = (c >= 2 ? lb >> 4 : lb & 15) | ((b6.qh[32 * h + l] >> (2 * c)) & 3) << 4;
        bad += y[p] != 0.5f * (float)(sc6[p / 16] * (q - 32));
    }
    CHECKF(bad == 0, "Q6_K: %d of 256 hand-built weights dequantize wrong", bad);
    /* weight 0: ql[0] = 7, qh[0] bits 0-1 = 3: q = 55, 0.5*1*23; 80: high
       nibble of ql[16] = 0xb7, bits 4-5 of qh[16] = 211: q = 27, scale -128;
       127: high nibble of ql[63] = 0xbc, bits 6-7 of qh[31] = 134: q = 43,
       scale -7; 200: high nibble of ql[72] = 0x1f, bits 4-5 of qh[40] = 139:
       q = 1, scale -10 */
    CHECK(y[0] == 11.5f && y[80] == 320.0f && y[127] == -38.5f && y[200] == 155.0f);

    /* Q8_K: x = d * q */
    pi_block_q8_K b8;
    memset(&b8, 0, sizeof b8);
    b8.d = -0.5f;
    for (int j = 0; j < PI_QK_K; j++) b8.qs[j] = (int8_t)(j - 128);
    pi_dequantize_row(PI_TYPE_Q8_K, &b8, y, PI_QK_K);
    bad = 0;
    for (int j = 0; j < PI_QK_K; j++) bad += y[j] != -0.5f * (float)(j - 128);
    CHECKF(bad == 0 && y[0] == 64.0f, "Q8_K: %d of 256 weights dequantize wrong", bad);

    /* a row of two blocks: the second block's values follow the first's */
    pi_block_q4_K two[2] = {b4, b4};
    two[1].d = 0x3c00; /* 1.0 */
    float y2[2 * PI_QK_K];
    pi_dequantize_row(PI_TYPE_Q4_K, two, y2, 2 * PI_QK_K);
    CHECK(y2[130] == 97.0f && y2[PI_QK_K + 130] == 17.0f * 12.0f - 5.0f);
}

/* The Q8_K quantizer (ggml's quantize_row_q8_K): max is the element of
   largest magnitude (first on ties), iscale = -127 / max, q = round half to
   even, clamped to 127, d = 1 / iscale, bsums sums of 16. */
static void test_q8_K_quantize(void) {
    pi_block_q8_K y;
    float x[PI_QK_K];
    int bsum_bad = 0;

    /* max = -127 (the first of the two largest magnitudes): iscale = 1, so
       d = 1, x.5 values are ties and +127 stays 127 */
    memset(x, 0, sizeof x);
    const float t1[] = {-127.0f, 2.5f, 3.5f, -2.5f, 127.0f, 0.5f, -126.5f, 1.5f, -0.5f, 125.5f};
    memcpy(x, t1, sizeof t1);
    x[200] = 7.25f;
    pi_quantize_row(PI_TYPE_Q8_K, x, &y, PI_QK_K);
    CHECK(y.d == 1.0f);
    CHECK(y.qs[0] == -127 && y.qs[1] == 2 && y.qs[2] == 4 && y.qs[3] == -2 && y.qs[4] == 127);
    CHECK(y.qs[5] == 0 && y.qs[6] == -126 && y.qs[7] == 2 && y.qs[8] == 0 && y.qs[9] == 126);
    CHECK(y.qs[200] == 7 && y.qs[10] == 0 && y.qs[255] == 0);
    CHECK(y.bsums[0] == -127 + 2 + 4 - 2 + 127 + 0 - 126 + 2 + 0 + 126 && y.bsums[12] == 7 && y.bsums[1] == 0);

    /* a positive max gives a negative scale: max 2 -> iscale -63.5, and
       1.0 * -63.5 is a tie that goes to the even -64 */
    for (int j = 0; j < PI_QK_K; j++) x[j] = 1.0f;
    x[17] = 2.0f;
    pi_quantize_row(PI_TYPE_Q8_K, x, &y, PI_QK_K);
    CHECK(y.d == 1.0f / (-127.0f / 2.0f) && y.d < 0);
    CHECK(y.qs[17] == -127 && y.qs[0] == -64 && y.qs[255] == -64);
    CHECK(y.bsums[0] == -64 * 16 && y.bsums[1] == -64 * 15 - 127);

    /* a zero block: every byte zero */
    memset(x, 0, sizeof x);
    memset(&y, 0x5a, sizeof y);
    pi_quantize_row(PI_TYPE_Q8_K, x, &y, PI_QK_K);
    pi_block_q8_K zero;
    memset(&zero, 0, sizeof zero);
    CHECK(!memcmp(&y, &zero, sizeof y));

    /* a block so small that -127 / max overflows: q all 0, d a signed zero */
    for (int j = 0; j < PI_QK_K; j++) x[j] = (float)(j % 7 - 3) * 1e-39f;
    x[3] = 3e-38f;
    memset(&y, 0x5a, sizeof y);
    pi_quantize_row(PI_TYPE_Q8_K, x, &y, PI_QK_K);
    bool all0 = true;
    for (int j = 0; j < PI_QK_K; j++) all0 &= y.qs[j] == 0;
    for (int k = 0; k < PI_QK_K / 16; k++) all0 &= y.bsums[k] == 0;
    CHECK(all0 && y.d == 0.0f && signbit(y.d));

    /* random rows: |x - d q| <= |d| / 2, the largest magnitude maps to -127,
       bsums are the sums of qs */
    t_rng r = {4242};
    const int64_t n = PI_QK_K * 40;
    float *xr = malloc(n * sizeof *xr), *yr = malloc(n * sizeof *yr);
    pi_block_q8_K *q = malloc((size_t)(n / PI_QK_K) * sizeof *q);
    fill_random(&r, xr, n, true);
    for (int j = 0; j < PI_QK_K; j++) xr[PI_QK_K * 3 + j] = 0.0f; /* a zero block */
    pi_quantize_row(PI_TYPE_Q8_K, xr, q, n);
    pi_dequantize_row(PI_TYPE_Q8_K, q, yr, n);
    int bad = 0, bad_max = 0;
    for (int64_t b = 0; b < n / PI_QK_K; b++) {
        float amax = 0.0f;
        int at = 0;
        for (int j = 0; j < PI_QK_K; j++)
            if (fabsf(xr[b * PI_QK_K + j]) > amax) amax = fabsf(xr[b * PI_QK_K + j]), at = j;
        const double d = fabs((double)q[b].d);
        for (int j = 0; j < PI_QK_K; j++)
            bad += fabs((double)xr[b * PI_QK_K + j] - yr[b * PI_QK_K + j]) > d * 0.5 * (1 + 1e-5) + amax * 1e-6;
        bad_max += amax > 0 && q[b].qs[at] != -127;
        for (int k = 0; k < PI_QK_K / 16; k++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += q[b].qs[16 * k + j];
            bsum_bad += q[b].bsums[k] != sum;
        }
    }
    CHECK(q[3].d == 0.0f);
    CHECKF(bad == 0, "Q8_K: %d elements off by more than d/2", bad);
    CHECKF(bad_max == 0, "Q8_K: %d blocks whose largest magnitude is not -127", bad_max);
    CHECKF(bsum_bad == 0, "Q8_K: %d bsums differ from the sums of qs", bsum_bad);
    free(xr);
    free(yr);
    free(q);
}

static void test_ref_dot(void) {
    const int64_t lens[] = {32, 96, 1024, 4096, 14336}, klens[] = {256, 512, 1024, 4096, 14336};
    for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++) {
        const pi_type t = k_types[ti];
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const int64_t n = is_k(t) ? klens[li] : lens[li];
            t_rng r = {1000 + li};
            float *w = malloc(n * sizeof *w), *x = malloc(n * sizeof *x);
            void *wq = malloc(pi_row_size(t, n)), *xa = malloc(n * sizeof(float));
            make_row(&r, t, w, wq, n, false);
            fill_random(&r, x, n, false);
            pi_quantize_row((pi_type)pi_vec_dot_type(t), x, xa, n);
            double dot, S;
            exact_dot(t, n, wq, xa, &dot, &S);
            const double got = pi_kernels_ref.vec_dot[t](n, wq, xa);
            CHECKF(fabs(got - dot) <= TOL_REF_REL * S, "ref %s n=%lld: %.9g vs exact %.9g (S %.3g)", pi_type_name(t),
                   (long long)n, got, dot, S);
            free(w);
            free(x);
            free(wq);
            free(xa);
        }
    }
}

/* ------------------------------------------------------------ 3. variants vs ref */

static void test_quantize_bytes(const pi_kernels *k) {
    /* random blocks, tiny blocks (f16-subnormal scales, and scales below
       FLT_MIN that quantize to zero), zero blocks, exact ties */
    const int64_t n = 32 * 40;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        t_rng r = {seed * 77};
        tbuf xb = tbuf_new(n * sizeof(float), odd_offset(PI_TYPE_F32, seed));
        float *x = (float *)xb.p;
        fill_random(&r, x, n, true);
        for (int j = 0; j < 32; j++) {
            x[32 * 1 + j] *= 1e-6f;  /* d around 1e-8: f16 subnormal */
            x[32 * 2 + j] *= 1e-38f; /* d below FLT_MIN: all zero */
            x[32 * 3 + j] = (float)(j - 16) + 0.5f;
        }
        x[32 * 3] = 127.0f; /* d = 1: every other value is a tie */
        const size_t qsz = pi_row_size(PI_TYPE_Q8_0, n);
        tbuf want = tbuf_new(qsz, 0), got = tbuf_new(qsz + 2, 2);
        memset(want.p, 0xaa, qsz);
        memset(got.p, 0x55, qsz);
        pi_kernels_ref.quantize_q8_0(x, (pi_block_q8_0 *)want.p, n);
        k->quantize_q8_0(x, (pi_block_q8_0 *)got.p, n);
        CHECKF(!memcmp(want.p, got.p, qsz), "%s quantize_q8_0 bytes differ from ref (seed %llu)", k->name,
               (unsigned long long)seed);
        tbuf_free(&xb);
        tbuf_free(&want);
        tbuf_free(&got);
    }
    /* quantize_q8_K against pi_quantize_row(Q8_K): random blocks, a tiny one
       (f32 scale, no f16 limit), one whose -127 / max overflows, one of ties
       (max -127: d = 1), a zero one */
    const int64_t nk = PI_QK_K * 6;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        t_rng r = {seed * 91};
        tbuf xb = tbuf_new(nk * sizeof(float), odd_offset(PI_TYPE_F32, seed));
        float *x = (float *)xb.p;
        fill_random(&r, x, nk, true);
        for (int j = 0; j < PI_QK_K; j++) {
            x[PI_QK_K * 1 + j] *= 1e-30f;
            x[PI_QK_K * 2 + j] *= 1e-39f;
            x[PI_QK_K * 3 + j] = (float)(j % 200 - 100) + 0.5f;
            x[PI_QK_K * 4 + j] = 0.0f;
        }
        x[PI_QK_K * 3] = -127.0f;
        const size_t qsz = pi_row_size(PI_TYPE_Q8_K, nk);
        tbuf want = tbuf_new(qsz, 0), got = tbuf_new(qsz + 4, odd_offset(PI_TYPE_Q8_K, seed));
        memset(want.p, 0xaa, qsz);
        memset(got.p, 0x55, qsz);
        pi_quantize_row(PI_TYPE_Q8_K, x, want.p, nk);
        k->quantize_q8_K(x, (pi_block_q8_K *)got.p, nk);
        CHECKF(!memcmp(want.p, got.p, qsz), "%s quantize_q8_K bytes differ from ref (seed %llu)", k->name,
               (unsigned long long)seed);
        tbuf_free(&xb);
        tbuf_free(&want);
        tbuf_free(&got);
    }
}

/* One weight type, one row length, one seed: vec_dot, matvec and axpy of
   table k against ref. */
static void test_one(const pi_kernels *k, pi_type t, int64_t n, uint64_t seed) {
    const bool q = is_quant(t);
    const pi_type at = (pi_type)pi_vec_dot_type(t);
    const size_t rb = pi_row_size(t, n);
    const size_t pad = q || t != PI_TYPE_F32 ? 2 * (1 + seed % 3) : 4 * (1 + seed % 3);
    const size_t stride = rb + pad;
    /* rows [r0, r1) of `rows`: 5..8 of them, so every remainder of a 4-row
       kernel occurs, with unwritten rows on both sides */
    const int64_t r0 = 1 + (int64_t)(seed % 2), r1 = r0 + 5 + (int64_t)(seed * 3 % 4), rows = r1 + 2;
    t_rng r = {seed * 0x9e37 + (uint64_t)n * 31 + t};

    /* weights: `rows` rows, stride bytes apart, at an odd legal offset */
    tbuf W = tbuf_new(stride * rows, odd_offset(t, seed));
    float *tmp = malloc((size_t)n * sizeof *tmp);
    memset(W.p, 0x7f, stride * rows); /* padding bytes: junk the kernels must not read as weights */
    for (int64_t row = 0; row < rows; row++) make_row(&r, t, tmp, W.p + row * stride, n, seed % 2);
    /* activation of the vec_dot type, also misaligned */
    fill_random(&r, tmp, n, seed % 2);
    const size_t asz = at == PI_TYPE_F32 ? (size_t)n * sizeof(float) : pi_row_size(at, n);
    tbuf X = tbuf_new(asz, odd_offset(at, seed + 1));
    pi_quantize_row(at, tmp, X.p, n);

    const double tol = q ? TOL_Q_REL(n / 32) : TOL_FLOAT_REL(n);

    /* vec_dot on every row */
    int bad = 0;
    double worst = 0;
    for (int64_t row = 0; row < rows; row++) {
        double dot, S;
        exact_dot(t, n, W.p + row * stride, X.p, &dot, &S);
        const float want = pi_kernels_ref.vec_dot[t](n, W.p + row * stride, X.p);
        const float got = k->vec_dot[t](n, W.p + row * stride, X.p);
        const double err = S > 0 ? fabs((double)got - want) / S : fabs((double)got - want);
        if (err > tol) bad++;
        if (err > worst) worst = err;
    }
    CHECKF(bad == 0, "%s vec_dot %s n=%lld seed %llu: %d rows beyond tolerance (worst %.3g, tol %.3g)", k->name,
           pi_type_name(t), (long long)n, (unsigned long long)seed, bad, worst, tol);

    /* matvec on rows [r0, r1) with sentinels around the written range */
    float *y = malloc((size_t)(rows + 1) * sizeof *y);
    for (int64_t i = 0; i <= rows; i++) y[i] = SENTINEL;
    k->matvec[t](n, W.p, stride, r0, r1, X.p, y);
    bad = 0;
    for (int64_t row = r0; row < r1; row++) {
        double dot, S;
        exact_dot(t, n, W.p + row * stride, X.p, &dot, &S);
        const float want = pi_kernels_ref.vec_dot[t](n, W.p + row * stride, X.p);
        if (fabs((double)y[row] - want) > tol * S) bad++;
    }
    int touched = 0;
    for (int64_t i = 0; i <= rows; i++) touched += (i < r0 || i >= r1) && y[i] != SENTINEL;
    CHECKF(bad == 0, "%s matvec %s n=%lld seed %llu: %d rows beyond tolerance", k->name, pi_type_name(t),
           (long long)n, (unsigned long long)seed, bad);
    CHECKF(touched == 0, "%s matvec %s n=%lld: %d outputs outside [r0, r1) written", k->name, pi_type_name(t),
           (long long)n, touched);

    /* axpy of one row into y (n elements + a sentinel after them) */
    float *ya = malloc((size_t)(n + 1) * sizeof *ya), *yr = malloc((size_t)(n + 1) * sizeof *yr);
    float *y0 = malloc((size_t)n * sizeof *y0), *wd = malloc((size_t)n * sizeof *wd);
    fill_random(&r, y0, n, false);
    memcpy(ya, y0, (size_t)n * sizeof *ya);
    memcpy(yr, y0, (size_t)n * sizeof *yr);
    ya[n] = yr[n] = SENTINEL;
    const float a = t_normal(&r) * 3.0f;
    const uint8_t *wrow = W.p + (rows - 1) * stride;
    pi_dequantize_row(t, wrow, wd, n);
    pi_kernels_ref.axpy[t](n, a, wrow, yr);
    k->axpy[t](n, a, wrow, ya);
    bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabs((double)ya[i] - yr[i]) > TOL_AXPY_REL * (fabs((double)y0[i]) + fabs((double)a * wd[i]))) bad++;
    CHECKF(bad == 0, "%s axpy %s n=%lld seed %llu: %d elements beyond tolerance", k->name, pi_type_name(t),
           (long long)n, (unsigned long long)seed, bad);
    CHECKF(ya[n] == SENTINEL, "%s axpy %s n=%lld wrote past y[n]", k->name, pi_type_name(t), (long long)n);

    free(tmp);
    free(y);
    free(ya);
    free(yr);
    free(y0);
    free(wd);
    tbuf_free(&W);
    tbuf_free(&X);
}

static void test_variant(const pi_kernels *k) {
    test_quantize_bytes(k);
    /* float rows: any length (SIMD tails of every size); quant rows: one
       block, every remainder of the 2- and 4-block groups, long rows, and a
       row longer than the SIMD activation chunk (512 blocks) */
    const int64_t flens[] = {1, 5, 7, 8, 15, 16, 17, 31, 33, 63, 1000, 4096, 14336};
    const int64_t qlens[] = {32, 64, 96, 160, 192, 224, 1056, 4096, 14336, 32 * 600};
    /* K-quants: one super-block, 2, 3 and 5 (remainders of 2- and 4-block
       groups), long rows, and one past 512 blocks of 32 */
    const int64_t klens[] = {256, 512, 768, 1280, 4096, 14336, 256 * 70};
    for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++) {
        const pi_type t = k_types[ti];
        CHECKF(k->vec_dot[t] && k->matvec[t] && k->axpy[t] && k->axpy_rows[t], "%s lacks kernels for %s", k->name,
               pi_type_name(t));
        if (!k->vec_dot[t] || !k->matvec[t] || !k->axpy[t]) continue;
        const int64_t *lens = is_k(t) ? klens : is_quant(t) ? qlens : flens;
        const size_t nlen = is_k(t)       ? sizeof klens / sizeof klens[0]
                            : is_quant(t) ? sizeof qlens / sizeof qlens[0]
                                          : sizeof flens / sizeof flens[0];
        for (size_t li = 0; li < nlen; li++)
            for (uint64_t seed = 1; seed <= 4; seed++) test_one(k, t, lens[li], seed);
    }
    /* the longest row a kernel accepts, once per quant type */
    test_one(k, PI_TYPE_Q4_0, PI_MAX_ROW, 7);
    test_one(k, PI_TYPE_Q8_0, PI_MAX_ROW, 8);
    test_one(k, PI_TYPE_Q4_K, PI_MAX_ROW, 9);
    test_one(k, PI_TYPE_Q5_K, PI_MAX_ROW, 10);
    test_one(k, PI_TYPE_Q6_K, PI_MAX_ROW, 11);
    test_one(k, PI_TYPE_Q4_1, PI_MAX_ROW, 12);
    test_one(k, PI_TYPE_Q5_0, PI_MAX_ROW, 13);
    test_one(k, PI_TYPE_Q5_1, PI_MAX_ROW, 14);
}

/* ------------------------------------------------------------ 4. matmul */

/* One weight type, row length and batch size: the data is made once and the
   expected values (ref's vec_dot) and their scale S computed once, then every
   table's matmul is checked against them. */
static void test_matmul_case(const pi_kernels *const *ks, int nk, pi_type t, int64_t n, int64_t nb, uint64_t seed) {
    const bool q = is_quant(t);
    const pi_type at = (pi_type)pi_vec_dot_type(t);
    const size_t rb = pi_row_size(t, n);
    const size_t stride = rb + align_of(t) * (1 + seed % 3);
    /* 7, 21 or 38 rows from an odd first row: partial tiles of 4 and of 16 */
    static const int64_t counts[] = {7, 21, 38};
    const int64_t r0 = 1 + 2 * (int64_t)(seed % 2), r1 = r0 + counts[seed % 3], rows = r1 + 2;
    t_rng r = {seed * 0x51ed + (uint64_t)n * 7 + (uint64_t)nb * 131 + t};

    tbuf W = tbuf_new(stride * rows, odd_offset(t, seed));
    memset(W.p, 0x7f, stride * rows);
    float *tmp = malloc((size_t)n * sizeof *tmp);
    float *wd = malloc((size_t)rows * n * sizeof *wd), *xd = malloc((size_t)nb * n * sizeof *xd);
    for (int64_t row = 0; row < rows; row++) {
        make_row(&r, t, tmp, W.p + row * stride, n, seed % 2);
        pi_dequantize_row(t, W.p + row * stride, wd + row * n, n);
    }
    /* inputs spaced wider than they are; the gaps hold junk */
    const size_t asz = at == PI_TYPE_F32 ? (size_t)n * sizeof(float) : pi_row_size(at, n);
    const size_t xs = asz + align_of(at) * (1 + (seed + 1) % 3);
    tbuf X = tbuf_new(xs * nb, odd_offset(at, seed + 1));
    memset(X.p, 0x7f, xs * nb);
    for (int64_t b = 0; b < nb; b++) {
        fill_random(&r, tmp, n, seed % 2);
        pi_quantize_row(at, tmp, X.p + b * xs, n);
        pi_dequantize_row(at, X.p + b * xs, xd + b * n, n);
    }

    const int64_t nr = r1 - r0;
    float *want = malloc((size_t)(nb * nr) * sizeof *want);
    double *S = malloc((size_t)(nb * nr) * sizeof *S);
    for (int64_t b = 0; b < nb; b++)
        for (int64_t row = r0; row < r1; row++) {
            want[b * nr + row - r0] = pi_kernels_ref.vec_dot[t](n, W.p + row * stride, X.p + b * xs);
            double sum = 0.0;
            for (int64_t i = 0; i < n; i++) sum += fabs((double)wd[row * n + i] * xd[b * n + i]);
            S[b * nr + row - r0] = sum;
        }

    /* outputs y_stride floats apart, wider than the rows, with sentinels in
       every gap and on both sides of the whole */
    const int64_t ys = rows + 3 + (int64_t)(seed % 4), pre = 5;
    const size_t ylen = (size_t)(pre + nb * ys + 5);
    float *yb = malloc(ylen * sizeof *yb);
    const double tol = q ? TOL_Q_REL(n / 32) : TOL_FLOAT_REL(n);
    for (int ki = 0; ki < nk; ki++) {
        const pi_kernels *k = ks[ki];
        CHECKF(k->matmul[t] != NULL, "%s lacks matmul for %s", k->name, pi_type_name(t));
        if (!k->matmul[t]) continue;
        for (size_t i = 0; i < ylen; i++) yb[i] = SENTINEL;
        float *Y = yb + pre;
        k->matmul[t](n, W.p, stride, r0, r1, X.p, xs, nb, Y, ys);
        int bad = 0, touched = 0;
        double worst = 0;
        for (int64_t b = 0; b < nb; b++)
            for (int64_t row = r0; row < r1; row++) {
                const double d = fabs((double)Y[b * ys + row] - want[b * nr + row - r0]), sc = S[b * nr + row - r0];
                const double err = sc > 0 ? d / sc : d;
                if (!(err <= tol)) bad++; /* NaN counts as bad */
                if (err > worst) worst = err;
            }
        for (size_t i = 0; i < ylen; i++) {
            const int64_t o = (int64_t)i - pre, b = o >= 0 ? o / ys : -1, row = o >= 0 ? o % ys : -1;
            const bool written = o >= 0 && b < nb && row >= r0 && row < r1;
            touched += !written && yb[i] != SENTINEL;
        }
        CHECKF(bad == 0,
               "%s matmul %s n=%lld nb=%lld rows [%lld, %lld): %d outputs beyond tolerance (worst %.3g, tol %.3g)",
               k->name, pi_type_name(t), (long long)n, (long long)nb, (long long)r0, (long long)r1, bad, worst, tol);
        CHECKF(touched == 0, "%s matmul %s n=%lld nb=%lld: %d outputs outside the written ranges changed", k->name,
               pi_type_name(t), (long long)n, (long long)nb, touched);
    }
    free(tmp);
    free(wd);
    free(xd);
    free(want);
    free(S);
    free(yb);
    tbuf_free(&W);
    tbuf_free(&X);
}

static void test_matmul(const pi_kernels *const *ks, int nk) {
    static const int64_t nbs[] = {1, 2, 3, 5, 8, 17, 64, 70};
    static const int64_t qlens[] = {32, 4096, 14336}, flens[] = {5, 100, 32, 4096, 14336};
    static const int64_t klens[] = {256, 512, 4096};
    uint64_t seed = 1;
    for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++) {
        const pi_type t = k_types[ti];
        const int64_t *lens = is_k(t) ? klens : is_quant(t) ? qlens : flens;
        const size_t nlen = is_k(t)       ? sizeof klens / sizeof klens[0]
                            : is_quant(t) ? sizeof qlens / sizeof qlens[0]
                                          : sizeof flens / sizeof flens[0];
        for (size_t li = 0; li < nlen; li++)
            for (size_t bi = 0; bi < sizeof nbs / sizeof nbs[0]; bi++) {
                /* more than 64 inputs (several passes of a tiled kernel) once per length */
                if (nbs[bi] > 64 && lens[li] > 4096) continue;
                test_matmul_case(ks, nk, t, lens[li], nbs[bi], seed++);
            }
    }
}

/* ------------------------------------------------------------ 5. vec_dot_rows */

static bool same_bits(float a, float b) {
    uint32_t ua, ub;
    memcpy(&ua, &a, 4);
    memcpy(&ub, &b, 4);
    return ua == ub;
}

/* The types whose SIMD axpy_rows adds in integers (axpy_rows.h). */
static bool is_int_down(pi_type t) {
    return t == PI_TYPE_Q4_0 || t == PI_TYPE_Q4_1 || t == PI_TYPE_Q5_0 || t == PI_TYPE_Q5_1 || t == PI_TYPE_Q4_K ||
           t == PI_TYPE_Q5_K || t == PI_TYPE_Q6_K;
}

/* The split at or below `split` after which the list's nonzero
   coefficients before it are a multiple of 8 (whole Q4_0 groups). */
static int64_t group_split(const float *a, int64_t split) {
    int64_t nz = 0;
    for (int64_t k = 0; k < split; k++) nz += a[k] != 0.0f;
    int64_t keep = nz / 8 * 8, s = 0;
    for (int64_t k = 0; k < split && keep > 0; k++) {
        keep -= a[k] != 0.0f;
        s = k + 1;
    }
    return s;
}

/* One weight type and row length: a matrix of NROWS rows (at an odd legal
   offset, rows padded so their starts vary in alignment), ref's vec_dot and
   S per row computed once; then for every table, lists of every length in
   `counts` drawn at random (with repeats) from the matrix: vec_dot_rows must
   give that table's vec_dot bits for each row, agree with ref within the
   vec_dot tolerance, and write out[0..count) only. Quant rows are also
   copied to an odd address (a byte buffer at offset 1): the SIMD tables load
   quant rows bytewise, so they must give the same bits there too (ref reads
   the f16 scales through the block structs, which needs 2-byte alignment, so
   a SIMD table's slot that is ref's own function is not tried there). */
static void test_rows_case(const pi_kernels *const *ks, int nk, pi_type t, int64_t n, uint64_t seed) {
    enum { NROWS = 23 };
    static const int64_t counts[] = {0, 1, 3, 4, 5, 17, 64};
    const bool q = is_quant(t);
    const pi_type at = (pi_type)pi_vec_dot_type(t);
    const size_t rb = pi_row_size(t, n);
    const size_t stride = rb + align_of(t) * (1 + seed % 3);
    t_rng r = {seed * 0x7f4a + (uint64_t)n * 13 + t};

    tbuf W = tbuf_new(stride * NROWS, odd_offset(t, seed));
    memset(W.p, 0x7f, stride * NROWS);
    float *tmp = malloc((size_t)n * sizeof *tmp);
    for (int64_t row = 0; row < NROWS; row++) make_row(&r, t, tmp, W.p + row * stride, n, seed % 2);
    /* the same rows at odd addresses (quant types only) */
    tbuf Wodd = tbuf_new(stride * NROWS, 1);
    memcpy(Wodd.p, W.p, stride * NROWS);
    fill_random(&r, tmp, n, seed % 2);
    const size_t asz = at == PI_TYPE_F32 ? (size_t)n * sizeof(float) : pi_row_size(at, n);
    tbuf X = tbuf_new(asz, odd_offset(at, seed + 1));
    pi_quantize_row(at, tmp, X.p, n);

    float want[NROWS];
    double S[NROWS];
    for (int64_t row = 0; row < NROWS; row++) {
        double dot;
        exact_dot(t, n, W.p + row * stride, X.p, &dot, &S[row]);
        want[row] = pi_kernels_ref.vec_dot[t](n, W.p + row * stride, X.p);
    }
    const double tol = q ? TOL_Q_REL(n / 32) : TOL_FLOAT_REL(n);

    const void *ptrs[64];
    int idx[64];
    float out[64 + 2];
    for (int ki = 0; ki < nk; ki++) {
        const pi_kernels *k = ks[ki];
        if (!k->vec_dot_rows[t] || !k->vec_dot[t]) continue; /* reported by test_variant */
        const bool odd_ok = q && k->vec_dot_rows[t] != pi_kernels_ref.vec_dot_rows[t] &&
                            k->vec_dot[t] != pi_kernels_ref.vec_dot[t];
        for (int pass = 0; pass < (odd_ok ? 2 : 1); pass++) {
            const uint8_t *base = pass ? Wodd.p : W.p;
            for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
                const int64_t count = counts[ci];
                for (int64_t i = 0; i < count; i++) {
                    idx[i] = (int)(t_next(&r) % NROWS);
                    ptrs[i] = base + (size_t)idx[i] * stride;
                }
                for (int64_t i = 0; i < count + 2; i++) out[i] = SENTINEL;
                k->vec_dot_rows[t](n, ptrs, count, X.p, out + 1);
                int diff = 0, bad = 0;
                double worst = 0;
                for (int64_t i = 0; i < count; i++) {
                    const float got = out[1 + i];
                    diff += !same_bits(got, k->vec_dot[t](n, ptrs[i], X.p));
                    const double d = fabs((double)got - want[idx[i]]), sc = S[idx[i]];
                    const double err = sc > 0 ? d / sc : d;
                    if (!(err <= tol)) bad++;
                    if (err > worst) worst = err;
                }
                CHECKF(diff == 0, "%s vec_dot_rows %s n=%lld count=%lld%s: %d rows differ from its vec_dot", k->name,
                       pi_type_name(t), (long long)n, (long long)count, pass ? " (odd addresses)" : "", diff);
                CHECKF(bad == 0,
                       "%s vec_dot_rows %s n=%lld count=%lld%s: %d rows beyond tolerance of ref (worst %.3g, tol %.3g)",
                       k->name, pi_type_name(t), (long long)n, (long long)count, pass ? " (odd addresses)" : "", bad,
                       worst, tol);
                CHECKF(out[0] == SENTINEL && out[count + 1] == SENTINEL,
                       "%s vec_dot_rows %s n=%lld count=%lld wrote outside out[0..count)", k->name, pi_type_name(t),
                       (long long)n, (long long)count);
            }
        }
    }
    free(tmp);
    tbuf_free(&W);
    tbuf_free(&Wodd);
    tbuf_free(&X);
}

static void test_vec_dot_rows(const pi_kernels *const *ks, int nk) {
    /* every table has vec_dot_rows wherever it has vec_dot */
    for (int ki = 0; ki < nk; ki++)
        for (int t = 0; t < PI_TYPE_COUNT; t++)
            CHECKF(!ks[ki]->vec_dot[t] == !ks[ki]->vec_dot_rows[t], "%s: vec_dot and vec_dot_rows differ for %s",
                   ks[ki]->name, pi_type_name((uint32_t)t));
    /* quant rows: one block, a partial 4-block group, long rows, and rows
       longer than the activation the SIMD tables prepare per call (512
       blocks), with a partial group past it; float rows: short tails too */
    static const int64_t qlens[] = {32, 96, 4096, 14336, 32 * 514};
    static const int64_t flens[] = {17, 32, 96, 4096, 14336};
    static const int64_t klens[] = {256, 512, 4096, 14336, 256 * 66};
    uint64_t seed = 1;
    for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++) {
        const pi_type t = k_types[ti];
        const int64_t *lens = is_k(t) ? klens : is_quant(t) ? qlens : flens;
        const size_t nlen = is_k(t)       ? sizeof klens / sizeof klens[0]
                            : is_quant(t) ? sizeof qlens / sizeof qlens[0]
                                          : sizeof flens / sizeof flens[0];
        for (size_t li = 0; li < nlen; li++) test_rows_case(ks, nk, t, lens[li], seed++);
    }
}

/* ------------------------------------------------------------ 6. axpy_rows */

/* The SIMD tables' axpy_rows of the float types and Q8_0, element by
   element (axpy_rows.h): for each listed row with a nonzero coefficient, in
   order, y[i] = fma(c, v, y[i]), c = a (Q8_0: a * d, rounded), v the weight
   (Q8_0: the integer quant). */
static void axpy_rows_model(pi_type t, int64_t n, const float *a, const void *const *rows, int64_t count, float *y,
                            float *wd) {
    for (int64_t k = 0; k < count; k++) {
        if (a[k] == 0.0f) continue;
        const uint8_t *p = rows[k];
        if (t == PI_TYPE_Q8_0) {
            for (int64_t b = 0; b < n / 32; b++) {
                pi_block_q8_0 blk;
                memcpy(&blk, p + b * sizeof blk, sizeof blk);
                const float c = a[k] * pi_f16_to_f32(blk.d);
                for (int j = 0; j < 32; j++) y[b * 32 + j] = fmaf(c, (float)blk.qs[j], y[b * 32 + j]);
            }
        } else {
            pi_dequantize_row(t, p, wd, n); /* exact: widened floats */
            for (int64_t i = 0; i < n; i++) y[i] = fmaf(a[k], wd[i], y[i]);
        }
    }
}

/* The integer models (axpy_rows.h, "Q4_0 in integers"), written from its
   rules: the next group of up to 8 rows with nonzero coefficients from *k0
   on, and its size. */
static int model_group(const float *a, const void *const *rows, int64_t count, int64_t *k0, const uint8_t **g,
                       float *ga) {
    int m = 0;
    for (; *k0 < count && m < 8; (*k0)++)
        if (a[*k0] != 0.0f) g[m] = rows[*k0], ga[m++] = a[*k0];
    return m;
}

/* A block's 16-bit coefficients k[0..m) of the float ones cd[0..m) and its
   exponent e; false where a coefficient is not finite (the block is NaN). */
static bool model_coefs(const float *cd, int m, int64_t *k, int *e) {
    uint32_t big = 0;
    for (int r = 0; r < m; r++) {
        uint32_t u;
        memcpy(&u, &cd[r], 4);
        u &= 0x7fffffffu;
        if (u > big) big = u;
    }
    const int E = (int)(big >> 23);
    if (E == 255) return false;
    *e = E - 141 < -126 ? -126 : E - 141 > 113 ? 113 : E - 141;
    for (int r = 0; r < m; r++) {
        const double v = nearbyint(ldexp((double)cd[r], -*e)); /* exact scaling; rounds half to even */
        k[r] = v > 32767 ? 32767 : v < -32767 ? -32767 : (int64_t)v;
    }
    return true;
}

/* One block of a group (L elements): the rows' float coefficients cd[0..m),
   their unsigned quants q[r][0..L) less the offset o, the 16-bit
   coefficients, an exact integer sum, and one rounding into y; where mn is
   not NULL, the mins apart (nb = sum in row order of fma(ga[r], mn[r], nb)
   from 0) and y + fma(acc, 2^e, nb). qerr[l] (when not NULL) gets the
   bound of what the coefficients' rounding moved y[l] by, sum over rows of
   |q - o| * 2^e / 2, and with mins the float roundings (the integer part
   and the mins may cancel). */
static void model_block(int m, const float *ga, const float *cd, const float *mn, const uint8_t *const *q, int L,
                        int o, float *y, double *qerr) {
    int64_t k[8];
    int e;
    if (!model_coefs(cd, m, k, &e)) {
        for (int l = 0; l < L; l++) y[l] = NAN;
        return;
    }
    float nb = 0.0f;
    double absb = 0.0;
    if (mn)
        for (int r = 0; r < m; r++) {
            nb = fmaf(ga[r], mn[r], nb);
            absb += fabs((double)ga[r] * mn[r]);
        }
    for (int l = 0; l < L; l++) {
        int64_t acc = 0;
        double eq = 0.0;
        for (int r = 0; r < m; r++) {
            const int qv = q[r][l] - o;
            acc += k[r] * qv;
            eq += fabs((double)qv) * (ldexp(1.0, e - 1) + (mn ? 0x1p-22 * fabs((double)cd[r]) : 0.0));
        }
        y[l] = mn ? y[l] + fmaf((float)acc, ldexpf(1.0f, e), nb) : fmaf((float)acc, ldexpf(1.0f, e), y[l]);
        if (qerr) qerr[l] += eq + (mn ? 0x1p-22 * absb : 0.0);
    }
}

/* Q4_0, Q4_1, Q5_0, Q5_1: blocks of 32 with d (and m) first; the quant the
   low nibble of qs[l] (l < 16) or the high one of qs[l - 16], the fifth bit
   bit l of qh. */
static void axpy_rows_model_q32(pi_type t, int64_t n, const float *a, const void *const *rows, int64_t count,
                                float *y, double *qerr) {
    const bool mins = t == PI_TYPE_Q4_1 || t == PI_TYPE_Q5_1, five = t == PI_TYPE_Q5_0 || t == PI_TYPE_Q5_1;
    const size_t bsz = pi_row_size(t, 32), qs_off = bsz - 16, qh_off = mins ? 4 : 2;
    const int o = t == PI_TYPE_Q4_0 ? 8 : t == PI_TYPE_Q5_0 ? 16 : 0;
    const uint8_t *g[8];
    float ga[8];
    int m;
    for (int64_t k0 = 0; (m = model_group(a, rows, count, &k0, g, ga)) > 0;)
        for (int64_t b = 0; b < n / 32; b++) {
            float cd[8], mn[8];
            uint8_t qb[8][32];
            const uint8_t *q[8];
            for (int r = 0; r < m; r++) {
                const uint8_t *p = g[r] + b * bsz;
                pi_f16 d, mm;
                uint8_t qh[4] = {0};
                memcpy(&d, p, 2);
                memcpy(&mm, p + 2, 2);
                if (five) memcpy(qh, p + qh_off, 4);
                cd[r] = ga[r] * pi_f16_to_f32(d);
                mn[r] = pi_f16_to_f32(mm);
                for (int l = 0; l < 32; l++)
                    qb[r][l] = (uint8_t)((l < 16 ? p[qs_off + l] & 15 : p[qs_off + l - 16] >> 4) |
                                         (qh[l / 8] >> (l % 8) & 1) << 4);
                q[r] = qb[r];
            }
            model_block(m, ga, cd, mins ? mn : NULL, q, 32, o, y + b * 32, qerr ? qerr + b * 32 : NULL);
        }
}

/* Q4_K / Q5_K: per sub-block of 32, d * sc in the coefficient, the unsigned
   quant, and the mins -dmin * m apart. */
static void axpy_rows_model_q4k(pi_type t, int64_t n, const float *a, const void *const *rows, int64_t count,
                                float *y, double *qerr) {
    const bool q5 = t == PI_TYPE_Q5_K;
    const size_t bsz = q5 ? sizeof(pi_block_q5_K) : sizeof(pi_block_q4_K);
    const uint8_t *g[8];
    float ga[8];
    int m;
    for (int64_t k0 = 0; (m = model_group(a, rows, count, &k0, g, ga)) > 0;)
        for (int64_t sb = 0; sb < n / 256; sb++)
            for (int j = 0; j < 8; j++) {
                float cd[8], mn[8];
                uint8_t qb[8][32];
                const uint8_t *q[8];
                for (int r = 0; r < m; r++) {
                    /* Q4_K: d, dmin, scales, qs; Q5_K: the same with qh before qs */
                    pi_block_q5_K blk;
                    memset(blk.qh, 0, sizeof blk.qh);
                    memcpy(&blk, g[r] + sb * bsz, 16);
                    memcpy(blk.qs, g[r] + sb * bsz + bsz - sizeof blk.qs, sizeof blk.qs);
                    if (q5) memcpy(blk.qh, g[r] + sb * bsz + 16, sizeof blk.qh);
                    const uint8_t *sc6 = blk.scales;
                    const int sc = j < 4 ? sc6[j] & 63 : (sc6[j + 4] & 15) | (sc6[j - 4] >> 6) << 4;
                    const int mi = j < 4 ? sc6[j + 4] & 63 : (sc6[j + 4] >> 4) | (sc6[j] >> 6) << 4;
                    cd[r] = ga[r] * (pi_f16_to_f32(blk.d) * (float)sc);
                    mn[r] = -(pi_f16_to_f32(blk.dmin) * (float)mi);
                    for (int l = 0; l < 32; l++)
                        qb[r][l] = (uint8_t)((j % 2 ? blk.qs[32 * (j / 2) + l] >> 4 : blk.qs[32 * (j / 2) + l] & 15) |
                                             (blk.qh[l] >> j & 1) << 4);
                    q[r] = qb[r];
                }
                const int64_t at = sb * 256 + 32 * j;
                model_block(m, ga, cd, mn, q, 32, 0, y + at, qerr ? qerr + at : NULL);
            }
}

/* Q6_K: per sub-block of 16, d * scales[j] in the coefficient and q - 32. */
static void axpy_rows_model_q6k(int64_t n, const float *a, const void *const *rows, int64_t count, float *y,
                                double *qerr) {
    const uint8_t *g[8];
    float ga[8];
    int m;
    for (int64_t k0 = 0; (m = model_group(a, rows, count, &k0, g, ga)) > 0;)
        for (int64_t sb = 0; sb < n / 256; sb++) {
            pi_block_q6_K blk[8];
            uint8_t qb[8][256];
            for (int r = 0; r < m; r++) {
                memcpy(&blk[r], g[r] + sb * sizeof blk[r], sizeof blk[r]);
                for (int h = 0; h < 2; h++)
                    for (int l = 0; l < 32; l++) {
                        const uint8_t *ql = blk[r].ql + 64 * h, *qh = blk[r].qh + 32 * h;
                        qb[r][128 * h + l] = (uint8_t)((ql[l] & 15) | (qh[l] & 3) << 4);
                        qb[r][128 * h + l + 32] = (uint8_t)((ql[l + 32] & 15) | (qh[l] >> 2 & 3) << 4);
                        qb[r][128 * h + l + 64] = (uint8_t)((ql[l] >> 4) | (qh[l] >> 4 & 3) << 4);
                        qb[r][128 * h + l + 96] = (uint8_t)((ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4);
                    }
            }
            for (int j = 0; j < 16; j++) {
                float cd[8];
                const uint8_t *q[8];
                for (int r = 0; r < m; r++) {
                    cd[r] = ga[r] * (pi_f16_to_f32(blk[r].d) * (float)blk[r].scales[j]);
                    q[r] = qb[r] + 16 * j;
                }
                const int64_t at = sb * 256 + 16 * j;
                model_block(m, ga, cd, NULL, q, 16, 32, y + at, qerr ? qerr + at : NULL);
            }
        }
}

/* The integer types' model (is_int_down). */
static void axpy_rows_model_int(pi_type t, int64_t n, const float *a, const void *const *rows, int64_t count,
                                float *y, double *qerr) {
    if (t == PI_TYPE_Q4_K || t == PI_TYPE_Q5_K) axpy_rows_model_q4k(t, n, a, rows, count, y, qerr);
    else if (t == PI_TYPE_Q6_K) axpy_rows_model_q6k(n, a, rows, count, y, qerr);
    else axpy_rows_model_q32(t, n, a, rows, count, y, qerr);
}

/* axpy: per element, each row's step differs between ref (2 roundings) and
   a fused kernel (1) by at most 2 ulps of |y| + |a w|, and the steps'
   differences add up: bounded relative to |y0| + sum |a_k w_k|. */
#define TOL_AXPY_ROWS_REL(count) ((double)((count) + 1) * 0x1p-22)

/* One weight type and row length: a matrix of NROWS rows (at an odd legal
   offset, rows padded so their starts vary in alignment) and their
   dequantized values; then for every table, lists of each length in
   `counts` drawn at random with repeats, with random coefficients of which
   about a quarter are zero (+0 or -0, their row pointer NULL half the time:
   such rows must not be read). Checked: ref equals ref's axpy row by row
   bit for bit; a SIMD table equals the fused model bit for bit and ref
   within tolerance; the same list in two calls split at a random point
   gives the one call's bits; nothing outside y[0..n) is written. Quant rows
   are also tried at odd addresses on the SIMD tables. */
static void test_axpy_rows_case(const pi_kernels *const *ks, int nk, pi_type t, int64_t n, uint64_t seed) {
    enum { NROWS = 23 };
    static const int64_t counts[] = {0, 1, 3, 4, 5, 8, 17, 64};
    const bool q = is_quant(t);
    const size_t rb = pi_row_size(t, n);
    const size_t stride = rb + align_of(t) * (1 + seed % 3);
    t_rng r = {seed * 0x3c6e + (uint64_t)n * 17 + t};

    tbuf W = tbuf_new(stride * NROWS, odd_offset(t, seed));
    memset(W.p, 0x7f, stride * NROWS);
    float *tmp = malloc((size_t)n * sizeof *tmp);
    float *wd = malloc((size_t)NROWS * n * sizeof *wd);
    for (int64_t row = 0; row < NROWS; row++) {
        make_row(&r, t, tmp, W.p + row * stride, n, seed % 2);
        pi_dequantize_row(t, W.p + row * stride, wd + row * n, n);
    }
    tbuf Wodd = tbuf_new(stride * NROWS, 1);
    memcpy(Wodd.p, W.p, stride * NROWS);

    float *y0 = malloc((size_t)n * sizeof *y0), *yr = malloc((size_t)n * sizeof *yr);
    float *ym = malloc((size_t)n * sizeof *ym), *yb = malloc((size_t)(n + 2) * sizeof *yb);
    float *ys = malloc((size_t)(n + 2) * sizeof *ys);
    double *S = malloc((size_t)n * sizeof *S), *qerr = malloc((size_t)n * sizeof *qerr);
    const void *ptrs[64];
    float a[64];
    int idx[64];
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        const int64_t count = counts[ci];
        for (int64_t k = 0; k < count; k++) {
            idx[k] = (int)(t_next(&r) % NROWS);
            const uint64_t u = t_next(&r);
            a[k] = u % 4 == 0 ? (u & 16 ? -0.0f : 0.0f) : t_normal(&r) * 3.0f;
        }
        fill_random(&r, y0, n, false);
        /* ref, and ref's axpy row by row */
        memcpy(yr, y0, (size_t)n * sizeof *yr);
        for (int64_t k = 0; k < count; k++) ptrs[k] = W.p + (size_t)idx[k] * stride;
        pi_kernels_ref.axpy_rows[t](n, a, ptrs, count, yr);
        memcpy(ym, y0, (size_t)n * sizeof *ym);
        for (int64_t k = 0; k < count; k++)
            if (a[k] != 0.0f) pi_kernels_ref.axpy[t](n, a[k], ptrs[k], ym);
        int diff = 0;
        for (int64_t i = 0; i < n; i++) diff += !same_bits(yr[i], ym[i]);
        CHECKF(diff == 0, "ref axpy_rows %s n=%lld count=%lld: %d elements differ from ref's axpy per row",
               pi_type_name(t), (long long)n, (long long)count, diff);
        /* the fused model and the tolerance scale */
        memcpy(ym, y0, (size_t)n * sizeof *ym);
        for (int64_t i = 0; i < n; i++) qerr[i] = 0;
        if (is_int_down(t)) axpy_rows_model_int(t, n, a, ptrs, count, ym, qerr);
        else axpy_rows_model(t, n, a, ptrs, count, ym, tmp);
        for (int64_t i = 0; i < n; i++) {
            S[i] = fabs((double)y0[i]);
            for (int64_t k = 0; k < count; k++) S[i] += fabs((double)a[k] * wd[(size_t)idx[k] * n + i]);
        }
        for (int ki = 0; ki < nk; ki++) {
            const pi_kernels *k = ks[ki];
            if (!k->axpy_rows[t]) continue; /* reported by test_variant */
            const bool is_ref = k->axpy_rows[t] == pi_kernels_ref.axpy_rows[t];
            for (int pass = 0; pass < (q && !is_ref ? 2 : 1); pass++) {
                const uint8_t *base = pass ? Wodd.p : W.p;
                for (int64_t j = 0; j < count; j++)
                    ptrs[j] = a[j] == 0.0f && (t_next(&r) & 1) ? NULL : base + (size_t)idx[j] * stride;
                yb[0] = yb[n + 1] = SENTINEL;
                memcpy(yb + 1, y0, (size_t)n * sizeof *yb);
                k->axpy_rows[t](n, a, ptrs, count, yb + 1);
                /* the same list in two calls */
                int64_t split = count ? (int64_t)(t_next(&r) % (uint64_t)(count + 1)) : 0;
                if (is_int_down(t)) split = group_split(a, split); /* whole groups */
                ys[0] = ys[n + 1] = SENTINEL;
                memcpy(ys + 1, y0, (size_t)n * sizeof *ys);
                k->axpy_rows[t](n, a, ptrs, split, ys + 1);
                k->axpy_rows[t](n, a + split, ptrs + split, count - split, ys + 1);
                int bad = 0, model = 0, split_diff = 0;
                double worst = 0;
                for (int64_t i = 0; i < n; i++) {
                    const double err = fabs((double)yb[1 + i] - yr[i]) / (S[i] > 0 ? S[i] : 1.0);
                    const double qtol = is_ref ? 0 : qerr[i] / (S[i] > 0 ? S[i] : 1.0);
                    if (!(err <= TOL_AXPY_ROWS_REL(count) + qtol)) bad++;
                    if (err > worst) worst = err;
                    model += !is_ref && !same_bits(yb[1 + i], ym[i]);
                    split_diff += !same_bits(yb[1 + i], ys[1 + i]);
                }
                const char *where = pass ? " (odd addresses)" : "";
                CHECKF(bad == 0, "%s axpy_rows %s n=%lld count=%lld%s: %d elements beyond tolerance (worst %.3g)",
                       k->name, pi_type_name(t), (long long)n, (long long)count, where, bad, worst);
                CHECKF(model == 0, "%s axpy_rows %s n=%lld count=%lld%s: %d elements differ from the fused model",
                       k->name, pi_type_name(t), (long long)n, (long long)count, where, model);
                CHECKF(split_diff == 0, "%s axpy_rows %s n=%lld count=%lld%s: split at %lld changes %d elements",
                       k->name, pi_type_name(t), (long long)n, (long long)count, where, (long long)split,
                       split_diff);
                CHECKF(yb[0] == SENTINEL && yb[n + 1] == SENTINEL && ys[0] == SENTINEL && ys[n + 1] == SENTINEL,
                       "%s axpy_rows %s n=%lld count=%lld wrote outside y[0..n)", k->name, pi_type_name(t),
                       (long long)n, (long long)count);
            }
        }
    }
    free(tmp);
    free(wd);
    free(y0);
    free(yr);
    free(ym);
    free(yb);
    free(ys);
    free(S);
    free(qerr);
    tbuf_free(&W);
    tbuf_free(&Wodd);
}

/* The integer types on the SIMD tables: coefficients far from 1 (the
   exponent's clamps) give the model's bits; a coefficient that is not
   finite makes its group's blocks NaN. */
static void test_axpy_rows_q4i_edges(const pi_kernels *const *ks, int nk, pi_type t) {
    enum { N = 512, ROWS = 9 };
    const size_t rb = pi_row_size(t, N);
    uint8_t *W = malloc(rb * ROWS);
    float x[N], y0[N], ym[N], yb[N], a[ROWS];
    const void *ptrs[ROWS];
    t_rng r = {77 + t};
    for (int k = 0; k < ROWS; k++) {
        fill_random(&r, x, N, false);
        pi_quantize_row(t, x, W + rb * k, N);
        ptrs[k] = W + rb * k;
    }
    static const float scales[] = {1e-38f, 1e-30f, 1e30f, 3e33f};
    for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++) {
        for (int k = 0; k < ROWS; k++) a[k] = t_normal(&r) * scales[si];
        fill_random(&r, y0, N, false);
        memcpy(ym, y0, sizeof ym);
        axpy_rows_model_int(t, N, a, ptrs, ROWS, ym, NULL);
        for (int ki = 0; ki < nk; ki++) {
            const pi_kernels *k = ks[ki];
            if (!k->axpy_rows[t] || k->axpy_rows[t] == pi_kernels_ref.axpy_rows[t]) continue;
            memcpy(yb, y0, sizeof yb);
            k->axpy_rows[t](N, a, ptrs, ROWS, yb);
            int diff = 0;
            for (int i = 0; i < N; i++) diff += !same_bits(yb[i], ym[i]);
            CHECKF(diff == 0, "%s axpy_rows %s coefficients ~%g: %d elements differ from the model", k->name,
                   pi_type_name(t), (double)scales[si], diff);
        }
    }
    for (int bad = 0; bad < 2; bad++) {
        for (int k = 0; k < ROWS; k++) a[k] = t_normal(&r);
        a[3] = bad ? NAN : INFINITY;
        for (int ki = 0; ki < nk; ki++) {
            const pi_kernels *k = ks[ki];
            if (!k->axpy_rows[t] || k->axpy_rows[t] == pi_kernels_ref.axpy_rows[t]) continue;
            fill_random(&r, yb, N, false);
            k->axpy_rows[t](N, a, ptrs, ROWS, yb);
            int nan = 0;
            for (int i = 0; i < N; i++) nan += isnan(yb[i]);
            CHECKF(nan == N, "%s axpy_rows %s with a%s coefficient: %d of %d elements NaN", k->name,
                   pi_type_name(t), bad ? " NaN" : "n infinite", nan, N);
        }
    }
    free(W);
}

static void test_axpy_rows(const pi_kernels *const *ks, int nk) {
    /* quant rows: 1 to 5 blocks (odd counts of the 2-block segments), long
       rows; float rows: every tail of the 4-, 8-, 16-, 32- and 64-float
       segments; K-quants: 1, 2, 3 and 16 super-blocks */
    static const int64_t qlens[] = {32, 64, 96, 160, 4096};
    static const int64_t flens[] = {1, 7, 32, 33, 100, 1000, 4096};
    static const int64_t klens[] = {256, 512, 768, 4096};
    uint64_t seed = 1;
    for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++) {
        const pi_type t = k_types[ti];
        const int64_t *lens = is_k(t) ? klens : is_quant(t) ? qlens : flens;
        const size_t nlen = is_k(t)       ? sizeof klens / sizeof klens[0]
                            : is_quant(t) ? sizeof qlens / sizeof qlens[0]
                                          : sizeof flens / sizeof flens[0];
        for (size_t li = 0; li < nlen; li++) test_axpy_rows_case(ks, nk, t, lens[li], seed++);
    }
    for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++)
        if (is_int_down(k_types[ti])) test_axpy_rows_q4i_edges(ks, nk, k_types[ti]);
}

/* ------------------------------------------------------------ 7. dispatch */

/* Runs pi_kernels_get() in a child with PI_KERNELS set to env (or unset) and
   returns whether it picked the table named want. */
static bool child_picks(const char *env, const char *want) {
    fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0) {
        if (env) setenv("PI_KERNELS", env, 1);
        else unsetenv("PI_KERNELS");
        if (env && strcmp(env, want)) freopen("/dev/null", "w", stderr); /* the expected warning */
        const pi_kernels *k = pi_kernels_get();
        _exit(k && k == pi_kernels_get() && !strcmp(k->name, want) ? 0 : 1);
    }
    int st = 0;
    return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void test_softmax(const pi_kernels *const *ks, int nk) {
    static const int64_t lens[] = {1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 100, 257, 1000, 4099};
    static const float spreads[] = {0.01f, 1.0f, 10.0f, 100.0f};
    t_rng r = {0x50f7};
    float *x = malloc(4100 * sizeof(float)), *want = malloc(4100 * sizeof(float)), *got = malloc(4101 * sizeof(float));
    for (int k = 0; k < nk; k++) {
        double worst = 0.0;
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
            for (size_t si = 0; si < sizeof spreads / sizeof spreads[0]; si++) {
                const int64_t n = lens[li];
                for (int64_t i = 0; i < n; i++) x[i] = spreads[si] * t_uniform(&r) + 3.0f;
                memcpy(want, x, (size_t)n * sizeof(float));
                memcpy(got, x, (size_t)n * sizeof(float));
                got[n] = 12345.0f;
                pi_kernels_ref.softmax(want, n);
                ks[k]->softmax(got, n);
                double sum = 0.0, err = 0.0;
                for (int64_t i = 0; i < n; i++) {
                    sum += got[i];
                    const double e = fabs((double)got[i] - want[i]) / ((double)want[i] + 1e-30 / 2e-6);
                    err = e > err ? e : err;
                }
                worst = err > worst ? err : worst;
                CHECKF(err <= 2e-6, "%s softmax of %lld values (spread %g) off ref by %.3g relative", ks[k]->name,
                       (long long)n, spreads[si], err);
                CHECKF(fabs(sum - 1.0) <= 1e-5, "%s softmax of %lld values sums to %.9g", ks[k]->name, (long long)n,
                       sum);
                CHECKF(got[n] == 12345.0f, "%s softmax of %lld values wrote past them", ks[k]->name, (long long)n);
            }
        for (int64_t n = 1; n <= 40; n += 13) { /* a NaN anywhere poisons every output */
            for (int64_t i = 0; i < n; i++) x[i] = t_uniform(&r);
            x[n / 2] = NAN;
            ks[k]->softmax(x, n);
            bool all_nan = true;
            for (int64_t i = 0; i < n; i++) all_nan &= isnan(x[i]);
            CHECKF(all_nan, "%s softmax of %lld values with a NaN: not all NaN", ks[k]->name, (long long)n);
        }
        fprintf(stderr, "%s softmax: worst relative difference from ref %.3g\n", ks[k]->name, worst);
    }
    free(x);
    free(want);
    free(got);
}

static void test_dispatch(void) {
    const char *const *names = pi_kernels_names();
    const char *best = NULL;
    bool has_ref = false;
    for (const char *const *nm = names; *nm; nm++) {
        has_ref |= !strcmp(*nm, "ref");
        const pi_kernels *k = pi_kernels_by_name(*nm);
        if (k) CHECK(!strcmp(k->name, *nm));
        if (k && !best) best = *nm; /* names are listed best first */
    }
    CHECK(has_ref);
    CHECK(pi_kernels_by_name("ref") == &pi_kernels_ref);
    CHECK(pi_kernels_by_name("nonesuch") == NULL && pi_kernels_by_name(NULL) == NULL);
    CHECK(best != NULL);
    CHECKF(child_picks(NULL, best ? best : "?"), "default table is not %s", best ? best : "?");
    CHECK(child_picks("ref", "ref"));
    CHECK(child_picks("nonesuch", "ref"));
#if defined(__x86_64__)
    if (!pi_kernels_by_name("avx512")) CHECK(child_picks("avx512", "ref"));
    if (!pi_kernels_by_name("amx")) CHECK(child_picks("amx", "ref"));
    else CHECK(child_picks("amx", "amx")); /* the tile-state request works in a fresh process */
#endif
    CHECK(pi_vec_dot_type(PI_TYPE_F32) == PI_TYPE_F32 && pi_vec_dot_type(PI_TYPE_F16) == PI_TYPE_F32);
    CHECK(pi_vec_dot_type(PI_TYPE_BF16) == PI_TYPE_F32 && pi_vec_dot_type(PI_TYPE_Q8_0) == PI_TYPE_Q8_0);
    CHECK(pi_vec_dot_type(PI_TYPE_Q4_0) == PI_TYPE_Q8_0 && pi_vec_dot_type(PI_TYPE_Q4_K) == PI_TYPE_Q8_K);
    CHECK(pi_vec_dot_type(PI_TYPE_Q5_K) == PI_TYPE_Q8_K && pi_vec_dot_type(PI_TYPE_Q6_K) == PI_TYPE_Q8_K);
    CHECK(pi_vec_dot_type(PI_TYPE_Q4_1) == PI_TYPE_Q8_0 && pi_vec_dot_type(PI_TYPE_Q5_0) == PI_TYPE_Q8_0 &&
          pi_vec_dot_type(PI_TYPE_Q5_1) == PI_TYPE_Q8_0);
    CHECK(pi_vec_dot_type(PI_TYPE_Q2_K) == -1 && pi_vec_dot_type(PI_TYPE_Q8_K) == -1);
    CHECK(pi_vec_dot_bytes(PI_TYPE_Q4_K, 512) == 2 * sizeof(pi_block_q8_K) && pi_vec_dot_bytes(PI_TYPE_Q6_K, 32) == 0);
    for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++) {
        CHECK(pi_kernels_ref.vec_dot[k_types[ti]] && pi_kernels_ref.matvec[k_types[ti]] &&
              pi_kernels_ref.matmul[k_types[ti]] && pi_kernels_ref.axpy_rows[k_types[ti]]);
        CHECKF(pi_type_get(k_types[ti])->compute, "%s is not marked compute", pi_type_name(k_types[ti]));
    }
    CHECK(!pi_type_get(PI_TYPE_Q8_K)->compute && pi_type_get(PI_TYPE_Q8_K)->blck == PI_QK_K);
    CHECK(pi_kernels_ref.vec_dot[PI_TYPE_Q2_K] == NULL && pi_kernels_ref.vec_dot[PI_TYPE_Q8_K] == NULL);
    /* every table this build has holds every slot ref holds (the SIMD ones may
       point at ref's functions), and both activation quantizers */
    for (const char *const *nm = pi_kernels_names(); *nm; nm++) {
        const pi_kernels *k = pi_kernels_by_name(*nm);
        if (!k) continue;
        CHECKF(k->quantize_q8_0 && k->quantize_q8_K && k->softmax, "%s lacks an activation quantizer or softmax",
               k->name);
        int missing = 0;
        for (int t = 0; t < PI_TYPE_COUNT; t++)
            missing += (!pi_kernels_ref.vec_dot[t] != !k->vec_dot[t]) + (!pi_kernels_ref.vec_dot_rows[t] != !k->vec_dot_rows[t]) +
                       (!pi_kernels_ref.axpy[t] != !k->axpy[t]) + (!pi_kernels_ref.axpy_rows[t] != !k->axpy_rows[t]) +
                       (!pi_kernels_ref.matvec[t] != !k->matvec[t]) +
                       (!pi_kernels_ref.matmul[t] != !k->matmul[t]);
        CHECKF(missing == 0, "%s: %d kernel slots differ from ref's in presence", k->name, missing);
    }
}

int main(void) {
    test_conversions();
    test_quantize_bounds();
    test_k_dequant();
    test_q8_K_quantize();
    test_ref_dot();
    test_dispatch();
    const pi_kernels *ks[16];
    int nk = 0;
    for (const char *const *nm = pi_kernels_names(); *nm; nm++) {
        const pi_kernels *k = pi_kernels_by_name(*nm);
        if (!k) {
            fprintf(stderr, "note: kernel set %s cannot run here, not tested\n", *nm);
            continue;
        }
        fprintf(stderr, "testing kernel set %s\n", *nm);
        test_variant(k);
        if (nk < 16) ks[nk++] = k;
    }
    fprintf(stderr, "testing matmul of %d kernel sets\n", nk);
    test_matmul(ks, nk);
    fprintf(stderr, "testing vec_dot_rows of %d kernel sets\n", nk);
    test_vec_dot_rows(ks, nk);
    fprintf(stderr, "testing axpy_rows of %d kernel sets\n", nk);
    test_axpy_rows(ks, nk);
    fprintf(stderr, "testing softmax of %d kernel sets\n", nk);
    test_softmax(ks, nk);
    return t_done("test_kernels");
}
