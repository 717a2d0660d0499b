/*
 * x86_amx.h — private to the x86 kernel files: the AMX tile matmuls
 * (x86_amx.c) that the "amx" table (x86_avx512.c) uses for batches.
 *
 * They follow pi_matmul_fn exactly, but may only run on a thread of a process
 * that has been granted AMX tile state (dispatch.c asks before it hands out
 * the "amx" table) and only for row strides up to PI_AMX_MAX_STRIDE (rows are
 * addressed with 32-bit gather offsets). Each call configures the tiles itself
 * and releases them before it returns, so nothing is left in tile state
 * between calls.
 */
#ifndef PI_KERNELS_X86_AMX_H
#define PI_KERNELS_X86_AMX_H

#include "kernels.h"

#include <stdint.h>

/* Fewer inputs than this go to the AVX-512 VNNI matmul: the tiles' cost per
   16 rows barely depends on the batch below 16 inputs (the repacking, and the
   scaling of 16 input rows however few are real), and the VNNI matmul's is
   proportional to it. Measured crossover on Sapphire Rapids: 6 inputs. */
#define PI_AMX_MIN_NB 6

/* 16 rows of a tile must lie within 2^31 bytes of the first. */
#define PI_AMX_MAX_STRIDE ((size_t)INT32_MAX / 16)

void pi_amx_matmul_q4_0_q8_0(int64_t n, const void *W, size_t row_stride, int64_t r0, int64_t r1, const void *X,
                             size_t x_stride, int64_t nb, float *Y, int64_t y_stride);
void pi_amx_matmul_q8_0_q8_0(int64_t n, const void *W, size_t row_stride, int64_t r0, int64_t r1, const void *X,
                             size_t x_stride, int64_t nb, float *Y, int64_t y_stride);

#endif
