/*
 * quant_k.h — quantizers for the K-quant weight types: ggml's reference
 * algorithms (quantize_row_q4_K_ref, _q5_K_ref, _q6_K_ref), so that a row
 * gets byte for byte the blocks llama-quantize writes without an importance
 * matrix. n is a multiple of PI_QK_K. pi_quantize_row dispatches to them.
 */
#ifndef PI_KERNELS_QUANT_K_H
#define PI_KERNELS_QUANT_K_H

#include "types.h"

void pi_quantize_row_q4_K(const float *x, pi_block_q4_K *y, int64_t n);
void pi_quantize_row_q5_K(const float *x, pi_block_q5_K *y, int64_t n);
void pi_quantize_row_q6_K(const float *x, pi_block_q6_K *y, int64_t n);

#endif
