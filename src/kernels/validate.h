/*
 * validate.h — checks of quantized weight data: every block's scales must be
 * finite. A NaN or infinite f16 scale (a damaged or hostile file) would turn
 * whole rows, and then every logit, into NaN; the loader refuses such a
 * tensor instead, naming it and the block.
 *
 * Scales checked per type (GGML layouts, see types.h): Q8_0, Q4_0, Q5_0 d;
 * Q4_1, Q5_1 d and m; Q4_K, Q5_K d and dmin; Q6_K d. Other types (F32, F16,
 * BF16 values, integer types) have no scales and always pass.
 */
#ifndef PI_KERNELS_VALIDATE_H
#define PI_KERNELS_VALIDATE_H

#include "kernels/types.h"

#include <stddef.h>
#include <stdint.h>

/* Look at n_rows rows of n elements of type t, row r at data + r * stride.
   Returns -1 when every scale is finite, else the index of the first bad
   block counted over the rows (row = index / blocks per row); *value gets
   the offending scale (NaN or +-Inf). n must be a multiple of t's block. */
int64_t pi_rows_bad_scale(pi_type t, const void *data, int64_t n, int64_t n_rows, size_t stride, float *value);

#endif
