/*
 * ref_k.h — ref.c's scalar K-quant kernels (Q4_K, Q5_K, Q6_K weights with
 * Q8_K activations) and its Q8_K activation quantizer, with external linkage.
 *
 * pi_kernels_ref holds them like its other kernels. The SIMD tables have
 * their own; the x86 quantizers hand ref's a block with NaNs. Semantics are
 * described in ref.c and kernels.h.
 */
#ifndef PI_KERNELS_REF_K_H
#define PI_KERNELS_REF_K_H

#include "kernels.h"

void pi_quantize_q8_K_ref(const float *x, pi_block_q8_K *y, int64_t n);

float pi_vec_dot_q4_K_q8_K_ref(int64_t n, const void *w, const void *x);
float pi_vec_dot_q5_K_q8_K_ref(int64_t n, const void *w, const void *x);
float pi_vec_dot_q6_K_q8_K_ref(int64_t n, const void *w, const void *x);

void pi_vec_dot_rows_q4_K_q8_K_ref(int64_t n, const void *const *rows, int64_t count, const void *x, float *out);
void pi_vec_dot_rows_q5_K_q8_K_ref(int64_t n, const void *const *rows, int64_t count, const void *x, float *out);
void pi_vec_dot_rows_q6_K_q8_K_ref(int64_t n, const void *const *rows, int64_t count, const void *x, float *out);

void pi_axpy_q4_K_ref(int64_t n, float a, const void *w, float *y);
void pi_axpy_q5_K_ref(int64_t n, float a, const void *w, float *y);
void pi_axpy_q6_K_ref(int64_t n, float a, const void *w, float *y);

void pi_matvec_q4_K_q8_K_ref(int64_t n, const void *W, size_t row_stride, int64_t r0, int64_t r1, const void *x,
                             float *y);
void pi_matvec_q5_K_q8_K_ref(int64_t n, const void *W, size_t row_stride, int64_t r0, int64_t r1, const void *x,
                             float *y);
void pi_matvec_q6_K_q8_K_ref(int64_t n, const void *W, size_t row_stride, int64_t r0, int64_t r1, const void *x,
                             float *y);

void pi_matmul_q4_K_q8_K_ref(int64_t n, const void *W, size_t row_stride, int64_t r0, int64_t r1, const void *X,
                             size_t x_stride, int64_t nb, float *Y, int64_t y_stride);
void pi_matmul_q5_K_q8_K_ref(int64_t n, const void *W, size_t row_stride, int64_t r0, int64_t r1, const void *X,
                             size_t x_stride, int64_t nb, float *Y, int64_t y_stride);
void pi_matmul_q6_K_q8_K_ref(int64_t n, const void *W, size_t row_stride, int64_t r0, int64_t r1, const void *X,
                             size_t x_stride, int64_t nb, float *Y, int64_t y_stride);

#endif
