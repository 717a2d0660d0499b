/*
 * kernels.h — the compute kernels and their per-ISA dispatch.
 *
 * For each weight type the activation ("vec_dot type") is:
 *   F32, F16, BF16 weights  -> F32 activations
 *   Q8_0, Q4_0 weights      -> Q8_0 activations (quantize once per vector)
 *   Q4_1, Q5_0, Q5_1        -> Q8_0 activations too (ggml pairs Q4_1 / Q5_1
 *                              with Q8_1, whose stored block sum their offset
 *                              needs; here it is summed from the Q8_0 block)
 *   Q4_K, Q5_K, Q6_K        -> Q8_K activations (likewise; rows are multiples of 256)
 *
 * A pi_kernels table holds one implementation of every kernel for one ISA
 * ("ref", "avx2", "avx512", "amx", "neon"). `ref` is the scalar specification
 * and is always present; the SIMD tables share its semantics and agree with it
 * within the tolerances in tests/test_kernels.c. pi_kernels_get() picks the
 * best table the CPU runs, once; PI_KERNELS=<name> in the environment forces
 * one. "amx" is "avx512" with the quant matmuls on Intel AMX tiles. Every
 * table has every kernel, the K-quants' (Q4_K, Q5_K, Q6_K weights with Q8_K
 * activations) included.
 *
 * All kernels are thread-safe, allocate nothing, and never write outside the
 * ranges described. Row lengths n are multiples of the weight type's block
 * size (256 for the K-quants) and at most PI_MAX_ROW. Weight rows and Q8_0
 * activations may start at any even address, F32 and Q8_K activations (an f32
 * scale per block) at multiples of 4.
 */
#ifndef PI_KERNELS_KERNELS_H
#define PI_KERNELS_KERNELS_H

#include "types.h"

#define PI_MAX_ROW (1 << 17) /* longest row a kernel accepts (elements) */

/* dot(w[0..n), x[0..n)) with w of the table's weight type and x of its
   vec_dot type. */
typedef float (*pi_vec_dot_fn)(int64_t n, const void *w, const void *x);

/* out[r] = vec_dot(n, rows[r], x) for r in [0, count): rows anywhere in
   memory (a neuron list's gate or up rows, in any order, repeats allowed), x
   of the vec_dot type. Gives exactly the bits the same table's vec_dot gives
   for each row. Where a table specialises it (quant types on the SIMD
   tables) the activation is prepared once per call and the rows are taken 4
   at a time with the next 4 prefetched: over 64 rows of 4096 a call streams
   weights about twice as fast as vec_dot per row (75-85% of a matvec's rate),
   while a call over 4 rows gains nothing, so pass whole lists, not a few rows
   at a time. Elsewhere it is a loop over vec_dot. Only out[0..count) is
   written; count may be 0. */
typedef void (*pi_vec_dot_rows_fn)(int64_t n, const void *const *rows, int64_t count, const void *x, float *out);

/* y[0..n) += a * w[0..n), w one row of the weight type (axpy_rows below
   adds a list of rows, as the sparse FFN's down projection does). */
typedef void (*pi_axpy_fn)(int64_t n, float a, const void *w, float *y);

/* The gathered axpy (the sparse FFN's down projection): y[0..n) += sum over
   k in [0, count) of a[k] * rows[k][0..n), rows[k] a row of the weight type
   anywhere in memory (repeats allowed). Rows with a[k] == 0 (either sign)
   are skipped: not read (they may be NULL) and not added. The others are
   added in list order, one row at a time: for each element i,
   y[i] <- y[i] + a[k] * w_k[i] for k = 0, 1, ..., each with the type's axpy
   rounding (ref: exactly ref's axpy on each row in turn; the SIMD tables:
   one fused multiply-add per element and row, the same bits in all of them,
   see axpy_rows.h; they agree with ref within the axpy tolerance). Nothing
   is reassociated across rows, so the result is deterministic and a list
   split into consecutive calls (any split) gives the bits of one call over
   it. The 4- to 6-bit types (Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) on
   the SIMD tables are the exception: each group of 8 nonzero rows is added
   in integers with 16-bit coefficients sharing a scale per block
   (axpy_rows.h), within 2^-15 of the group's largest coefficient;
   deterministic and the same in every SIMD table for the same calls, but
   only a split between groups keeps the bits. The SIMD versions take the
   nonzero rows 8 at a time, walking y once per 8 rows (on x86 with the next
   8 prefetched), so pass whole lists, not a few rows at a time; count may
   be 0. Only y[0..n) is written. */
typedef void (*pi_axpy_rows_fn)(int64_t n, const float *a, const void *const *rows, int64_t count, float *y);

/* For r in [r0, r1): y[r] = dot(row r of W, x). W's rows are n elements long
   and row_stride bytes apart; x is of the vec_dot type. Only y[r0..r1) is
   written, so threads may split one matrix by row ranges. */
typedef void (*pi_matvec_fn)(int64_t n, const void *W, size_t row_stride, int64_t r0, int64_t r1,
                             const void *x, float *y);

/* The batched product (prompt processing): for r in [r0, r1) and b in [0, nb),
   Y[b * y_stride + r] = dot(row r of W, X_b) with X_b = (const char *)X +
   b * x_stride, an activation vector of the vec_dot type. W is as for matvec.
   Only those Y entries are written, so calls on disjoint row ranges may run
   in parallel. Any nb >= 0 is accepted. The weights are read from
   memory about once per call and unpacked once per tile of inputs, so a batch
   costs far less than nb matvecs; r1 - r0 of a few hundred rows keeps a
   call's working set in L2. Results agree with vec_dot within the same
   tolerances but may differ from it in the last bits. */
typedef void (*pi_matmul_fn)(int64_t n, const void *W, size_t row_stride, int64_t r0, int64_t r1, const void *X,
                             size_t x_stride, int64_t nb, float *Y, int64_t y_stride);

/* Quantize n floats (n a multiple of 32) to Q8_0 activation blocks. Every
   table's version produces the same bytes as the reference. */
typedef void (*pi_quantize_q8_0_fn)(const float *x, pi_block_q8_0 *y, int64_t n);

/* Quantize n floats (n a multiple of 256) to Q8_K activation blocks
   (ggml's quantize_row_q8_K: the same bytes in every table). */
typedef void (*pi_quantize_q8_K_fn)(const float *x, pi_block_q8_K *y, int64_t n);

/* In place, x[0..n) (n >= 1) becomes its softmax: exp(x[i] - m) / the sum
   of them, m the largest x. ref: expf, the sum in double, one multiply by
   the sum's float reciprocal. The SIMD versions: a polynomial exp (within a
   few ulp of expf; arguments below -87.3 give 0 or a denormal where expf
   gives a denormal), lanes summed in double; they agree with ref within
   the softmax tolerance of tests/test_kernels.c. A NaN anywhere makes every
   output NaN. */
typedef void (*pi_softmax_fn)(float *x, int64_t n);

typedef struct pi_kernels {
    const char *name;
    pi_quantize_q8_0_fn quantize_q8_0;
    pi_quantize_q8_K_fn quantize_q8_K;
    pi_softmax_fn softmax;
    pi_vec_dot_fn vec_dot[PI_TYPE_COUNT]; /* indexed by weight type; NULL if unsupported */
    pi_vec_dot_rows_fn vec_dot_rows[PI_TYPE_COUNT]; /* non-NULL wherever vec_dot is */
    pi_axpy_fn axpy[PI_TYPE_COUNT];
    pi_axpy_rows_fn axpy_rows[PI_TYPE_COUNT]; /* non-NULL wherever axpy is */
    pi_matvec_fn matvec[PI_TYPE_COUNT];
    pi_matmul_fn matmul[PI_TYPE_COUNT];
} pi_kernels;

/* Defines `static void name(...)`, a pi_vec_dot_rows_fn that calls the
   pi_vec_dot_fn `dot` once per row: every table's vec_dot_rows for the types
   it does not specialise (the tables are constant, so each kernel file makes
   its own from its own vec_dot). */
#define PI_VEC_DOT_ROWS_LOOP(name, dot)                                                                \
    static void name(int64_t n, const void *const *rows, int64_t count, const void *x, float *out) { \
        for (int64_t r_ = 0; r_ < count; r_++) out[r_] = dot(n, rows[r_], x);                          \
    }

/* The best table for this CPU, or the one PI_KERNELS names (falling back to
   ref with a warning when it cannot run here). Chosen once; thread-safe. */
const pi_kernels *pi_kernels_get(void);

/* This build's kernels: a hash of their sources and compile flags (16 hex
   digits; "unknown" where the build did not set it). Kernel rates measured
   by one build price another's only where the two match. */
const char *pi_kernels_build_id(void);

/* The table with this name if this build has it and this CPU runs it, else NULL. */
const pi_kernels *pi_kernels_by_name(const char *name);

/* Names of every table this build contains, NULL-terminated. */
const char *const *pi_kernels_names(void);

/* The activation type a weight type's kernels take (F32, Q8_0 or Q8_K); -1 if none. */
int pi_vec_dot_type(pi_type wtype);

/* Bytes the activation of a row of n elements of weight type wtype takes
   (0 when it has none or n does not fit its blocks). */
size_t pi_vec_dot_bytes(pi_type wtype, int64_t n);

/* x[0..n) in the activation form wtype's kernels take, written to y
   (pi_vec_dot_bytes(wtype, n) bytes; a copy for F32 activations). */
void pi_quantize_act(const pi_kernels *k, pi_type wtype, const float *x, void *y, int64_t n);

/* The per-ISA tables (defined in ref.c, x86_avx2.c, x86_avx512.c, arm_neon.c;
   "amx" also in x86_avx512.c, its tile kernels in x86_amx.c); the SIMD ones
   exist only in builds for their architecture. */
extern const pi_kernels pi_kernels_ref;
#if defined(__x86_64__)
extern const pi_kernels pi_kernels_avx2;
extern const pi_kernels pi_kernels_avx512;
extern const pi_kernels pi_kernels_amx;
#endif
#if defined(__aarch64__)
extern const pi_kernels pi_kernels_neon;
#endif

#endif
