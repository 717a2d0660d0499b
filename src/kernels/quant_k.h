/*
 * quant_k.h — quantizers for the K-quant weight types and for Q4_1, Q5_0 and
 * Q5_1 (what llama-quantize falls back to for rows that are not multiples of
 * 256): ggml's reference algorithms (quantize_row_q4_K_ref, _q5_K_ref,
 * _q6_K_ref, _q4_1_ref, _q5_0_ref, _q5_1_ref), so that a row gets byte for
 * byte the blocks llama-quantize writes without an importance matrix. n is a
 * multiple of the type's block (PI_QK_K, or 32). pi_quantize_row dispatches
 * to them.
 */
#ifndef PI_KERNELS_QUANT_K_H
#define PI_KERNELS_QUANT_K_H

#include "types.h"

void pi_quantize_row_q4_K(const float *x, pi_block_q4_K *y, int64_t n);
void pi_quantize_row_q5_K(const float *x, pi_block_q5_K *y, int64_t n);
void pi_quantize_row_q6_K(const float *x, pi_block_q6_K *y, int64_t n);
void pi_quantize_row_q4_1(const float *x, pi_block_q4_1 *y, int64_t n);
void pi_quantize_row_q5_0(const float *x, pi_block_q5_0 *y, int64_t n);
void pi_quantize_row_q5_1(const float *x, pi_block_q5_1 *y, int64_t n);

#endif
