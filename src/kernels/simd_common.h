/*
 * simd_common.h — private to the per-ISA kernel files: the scalar tails they
 * share with each other and the sizes of their per-call activation scratch.
 *
 * The tails handle the last n % width elements of F32/F16/BF16 rows (those
 * rows may have any length); they follow ref.c's formulas but accumulate in
 * float, like the vector bodies they finish. Quant rows never need a tail
 * element-wise (n is a multiple of 32); their partial vector groups are
 * handled inside each ISA file.
 *
 * It also holds the software-prefetch helpers the x86 row kernels use, and
 * the driver of their gathered-row dots (vec_dot_rows).
 *
 * Plain C only: this header is compiled with each ISA's flags, and since the
 * build uses -std=c11 (so -ffp-contract=off) the compiler does not fuse these
 * multiply-adds differently per file.
 */
#ifndef PI_KERNELS_SIMD_COMMON_H
#define PI_KERNELS_SIMD_COMMON_H

#include "kernels.h"

#include <float.h>
#include <math.h>

/* Quant matvecs prepare the Q8_0 activation once per call into a layout the
   weights can be multiplied with directly. The scratch lives on the stack, so
   it is bounded: activations longer than this many blocks are prepared and
   consumed in chunks (each row is then summed chunk by chunk). 512 blocks =
   16384 elements covers every common row in one chunk and keeps the scratch at
   most 48 KiB (Q8_0 on AVX-512, 96 bytes per block). */
#define PI_SIMD_CHUNK_BLOCKS 512

/* Batched matmuls (pi_matmul_fn) walk the rows in chunks of this many
   elements: one chunk of every row in [r0, r1) meets every input before the
   next chunk, so those weights are read from memory once and then stay in L2
   while the inputs pass over them, however long the rows (the caller keeps
   r1 - r0 at a few hundred), and the partial sums collect in Y. A chunk of a
   row is 1152 bytes for Q4_0, 2176 for Q8_0, 2 KiB for F32. For quant
   weights it also bounds the stack: the prepared form of a chunk of 4 inputs
   is at most 24 KiB (Q8_0 on AVX-512). */
#define PI_MM_CHUNK 2048
#define PI_MM_CHUNK_FLOAT 512

/* Stores one matmul result: the first chunk of a row assigns, later ones add. */
static inline void pi_mm_put(float *y, float v, bool first) { *y = first ? v : *y + v; }

/* Software prefetch, into L2. Measured on the project's Sapphire Rapids VMs:
   a Q4_0 matvec over four interleaved rows streamed at ~45% of a plain read
   loop's bandwidth on hardware prefetch alone, ~93% with these prefetches; a
   lone-row Q4_0 vec_dot went from ~20% to ~70%. (Short rows, several at a
   time, and a few cycles of arithmetic per cache line are what the hardware
   prefetchers do badly with.) So the row kernels prefetch each span they read
   a fixed distance ahead: the same span of the rows one row group (R rows)
   ahead in a matvec, or PI_VEC_DOT_PF bytes ahead in a lone row (a vec_dot,
   which first prefetches the row's opening PI_VEC_DOT_PF bytes). Prefetches
   never fault, so running past the end of a row or matrix is harmless. */
#define PI_VEC_DOT_PF 2048

/* How far ahead a matvec over groups of R rows, stride bytes apart,
   prefetches: the same bytes of the rows one group ahead, but at least
   PI_MATVEC_PF_MIN bytes. One group ahead of short rows is too close to hide
   the memory's latency: a Q8_0 matvec over 256-column rows (a predictor's
   second layer, 272-byte rows, 1088 bytes ahead) streamed 9-10 GB/s on one
   thread where 4096-column rows streamed 17; 4 to 16 KiB ahead, 13-14. */
#define PI_MATVEC_PF_MIN 4096
static inline size_t pi_matvec_pf(size_t stride, int R) {
    const size_t d = (size_t)R * stride;
    return d < PI_MATVEC_PF_MIN ? PI_MATVEC_PF_MIN : d;
}

/* Prefetch a span [p, p + len) of a sequence of contiguous spans (the row
   kernels walk rows span by span): one prefetch per 64 bytes from p covers
   every line of the span except possibly the one holding its last bytes,
   which is the first line of the next span and prefetched with it. (First
   and last byte instead would skip the middle line of a span that straddles
   three lines, about one line in ten for 72-byte spans.) */
static inline void prefetch_span(const uint8_t *p, size_t len) {
    for (size_t o = 0; o < len; o += 64) __builtin_prefetch(p + o, 0, 2);
}

/* The opening bytes of a row that a vec_dot is about to read. */
static inline void prefetch_row_start(const void *w, size_t bytes) {
    for (size_t o = 0; o < PI_VEC_DOT_PF && o < bytes; o += 64) __builtin_prefetch((const uint8_t *)w + o, 0, 2);
}

/* Where the row kernels find their rows and what they prefetch: w[k] is row
   k of a group of R rows, pf[k] the row whose bytes at the same offsets are
   prefetched while row k is read (the row one group ahead in a matvec or a
   gathered list, or w[k] + PI_VEC_DOT_PF for a lone row). For the rows
   [i, i + R) of a gathered list: the rows R places further on, or (past the
   end of the list) each row's own bytes further on. */
static inline void pi_rows_targets(const void *const *rows, int64_t count, int64_t i, int R, const uint8_t **w,
                                   const uint8_t **pf) {
    for (int k = 0; k < R; k++) {
        w[k] = rows[i + k];
        pf[k] = i + R + k < count ? (const uint8_t *)rows[i + R + k] : w[k] + PI_VEC_DOT_PF;
    }
}

/* The opening bytes of the first 4 rows of a gathered list (rows row_bytes
   long), which no row group prefetches (each prefetches the next). Issued
   before the activation is prepared, which then hides some of the latency. */
static inline void pi_rows_prefetch_start(const void *const *rows, int64_t count, size_t row_bytes) {
    for (int64_t k = 0; k < 4 && k < count; k++) prefetch_row_start(rows[k], row_bytes);
}

/* The body of a vec_dot_rows over a row kernel rows_fn(R, w, pf, ..., sums)
   that sums R rows (R = 4 or 1) at once: the rows go 4 at a time, each group
   prefetching the next group of the list at the offsets it reads (the rows
   are scattered, and the hardware prefetchers only get going a while into
   each row), then the last 1-3 one at a time. The per-row results do not
   depend on R, so they are vec_dot's bits when vec_dot is rows_fn with
   R = 1. */
#define PI_VEC_DOT_ROWS_GATHER(rows_fn, rows, count, out, ...)                                      \
    do {                                                                                            \
        const uint8_t *w_[4], *pf_[4];                                                              \
        int64_t i_ = 0;                                                                             \
        for (; i_ + 4 <= (count); i_ += 4) {                                                        \
            pi_rows_targets((rows), (count), i_, 4, w_, pf_);                                       \
            rows_fn(4, w_, pf_, __VA_ARGS__, (out) + i_);                                           \
        }                                                                                           \
        for (; i_ < (count); i_++) {                                                                \
            pi_rows_targets((rows), (count), i_, 1, w_, pf_);                                       \
            rows_fn(1, w_, pf_, __VA_ARGS__, (out) + i_);                                           \
        }                                                                                           \
    } while (0)

/* The reciprocal of a block scale as ref.c defines it (scales below FLT_MIN
   count as zero), so every quantize_q8_0 produces the same bytes. */
static inline float pi_simd_recip_scale(float d) { return fabsf(d) >= FLT_MIN ? 1.0f / d : 0.0f; }

static inline float pi_tail_dot_f32(int64_t i, int64_t n, const float *w, const float *x) {
    float s = 0.0f;
    for (; i < n; i++) s += w[i] * x[i];
    return s;
}

static inline float pi_tail_dot_f16(int64_t i, int64_t n, const pi_f16 *w, const float *x) {
    float s = 0.0f;
    for (; i < n; i++) s += pi_f16_to_f32(w[i]) * x[i];
    return s;
}

static inline float pi_tail_dot_bf16(int64_t i, int64_t n, const pi_bf16 *w, const float *x) {
    float s = 0.0f;
    for (; i < n; i++) s += pi_bf16_to_f32(w[i]) * x[i];
    return s;
}

static inline void pi_tail_axpy_f32(int64_t i, int64_t n, float a, const float *w, float *y) {
    for (; i < n; i++) y[i] += a * w[i];
}

static inline void pi_tail_axpy_f16(int64_t i, int64_t n, float a, const pi_f16 *w, float *y) {
    for (; i < n; i++) y[i] += a * pi_f16_to_f32(w[i]);
}

static inline void pi_tail_axpy_bf16(int64_t i, int64_t n, float a, const pi_bf16 *w, float *y) {
    for (; i < n; i++) y[i] += a * pi_bf16_to_f32(w[i]);
}

/* The slots of Q4_1, Q5_0 and Q5_1 (llama.cpp's fallbacks for rows that are
   not multiples of 256) in a SIMD table, appended to its initializer (their
   axpy_rows are in PI_AXPY_ROWS_TABLE); each ISA file defines the functions
   they name. */
#define PI_LQ_TABLE_SLOTS(isa)                                                                                       \
    .vec_dot[PI_TYPE_Q4_1] = pi_vec_dot_q4_1_q8_0_##isa, .vec_dot[PI_TYPE_Q5_0] = pi_vec_dot_q5_0_q8_0_##isa,        \
    .vec_dot[PI_TYPE_Q5_1] = pi_vec_dot_q5_1_q8_0_##isa,                                                             \
    .vec_dot_rows[PI_TYPE_Q4_1] = pi_vec_dot_rows_q4_1_q8_0_##isa,                                                   \
    .vec_dot_rows[PI_TYPE_Q5_0] = pi_vec_dot_rows_q5_0_q8_0_##isa,                                                   \
    .vec_dot_rows[PI_TYPE_Q5_1] = pi_vec_dot_rows_q5_1_q8_0_##isa, .axpy[PI_TYPE_Q4_1] = pi_axpy_q4_1_##isa,         \
    .axpy[PI_TYPE_Q5_0] = pi_axpy_q5_0_##isa, .axpy[PI_TYPE_Q5_1] = pi_axpy_q5_1_##isa,                              \
    .matvec[PI_TYPE_Q4_1] = pi_matvec_q4_1_q8_0_##isa,                                                               \
    .matvec[PI_TYPE_Q5_0] = pi_matvec_q5_0_q8_0_##isa, .matvec[PI_TYPE_Q5_1] = pi_matvec_q5_1_q8_0_##isa,            \
    .matmul[PI_TYPE_Q4_1] = pi_matmul_q4_1_q8_0_##isa, .matmul[PI_TYPE_Q5_0] = pi_matmul_q5_0_q8_0_##isa,            \
    .matmul[PI_TYPE_Q5_1] = pi_matmul_q5_1_q8_0_##isa

/* The x86 softmax kernels' exp(x) = 2^n exp(r), x = n ln 2 + r: defines
   `static inline T name(T x, T n)` giving exp(r) (|r| <= ln 2 / 2, by
   Cephes' polynomial) for the vector type T of intrinsic prefix pfx
   (_mm256, _mm512), n = x / ln 2 rounded; the caller scales by 2^n. */
#define PI_DEFINE_EXP_R(name, T, pfx)                                                                  \
    static inline T name(T x, T n) {                                                                   \
        T r = pfx##_fnmadd_ps(n, pfx##_set1_ps(0.693359375f), x);                                      \
        r = pfx##_fnmadd_ps(n, pfx##_set1_ps(-2.12194440e-4f), r);                                     \
        T p = pfx##_set1_ps(1.9875691500e-4f);                                                         \
        p = pfx##_fmadd_ps(p, r, pfx##_set1_ps(1.3981999507e-3f));                                     \
        p = pfx##_fmadd_ps(p, r, pfx##_set1_ps(8.3334519073e-3f));                                     \
        p = pfx##_fmadd_ps(p, r, pfx##_set1_ps(4.1665795894e-2f));                                     \
        p = pfx##_fmadd_ps(p, r, pfx##_set1_ps(1.6666665459e-1f));                                     \
        p = pfx##_fmadd_ps(p, r, pfx##_set1_ps(5.0000001201e-1f));                                     \
        return pfx##_fmadd_ps(p, pfx##_mul_ps(r, r), pfx##_add_ps(r, pfx##_set1_ps(1.0f)));            \
    }

#endif
