/*
 * quantize.h — `pinfer quantize`: a model's weights in another type, by
 * llama-quantize's recipes (which tensors of a Q4_K_M file get Q6_K, ...), so
 * that from the same F32/F16/BF16 input the tensors come out byte for byte as
 * llama-quantize writes them without an importance matrix.
 *
 * What is quantized: 2-D and larger weights named "*weight" except norms and
 * a mixture's router (ffn_gate_inp), as llama.cpp does; pinfer's additions
 * are kept: activation predictors (fc1/fc2) in their type, ffn_down_t in the
 * type its layer's ffn_down gets, permutations and counts copied. Rows whose
 * length a K-quant's block of 256 does not divide fall back as llama.cpp's
 * do: Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, and F16 where those blocks
 * of 32 do not fit either.
 */
#ifndef PI_SPARSE_QUANTIZE_H
#define PI_SPARSE_QUANTIZE_H

#include "base/status.h"
#include "gguf/gguf.h"
#include "kernels/types.h"

typedef enum pi_quant_recipe {
    PI_QR_F32, PI_QR_F16, PI_QR_BF16, PI_QR_Q8_0, PI_QR_Q4_0,
    PI_QR_Q4_K_S, PI_QR_Q4_K_M, PI_QR_Q5_K_S, PI_QR_Q5_K_M, PI_QR_Q6_K,
    PI_QR_COUNT
} pi_quant_recipe;

/* "q4_k_m", ... (case-insensitive; "q4_k" is q4_k_m, "q5_k" q5_k_m as in
   llama-quantize); -1 when unknown. */
int pi_quant_recipe_from_name(const char *name);
const char *pi_quant_recipe_name(pi_quant_recipe r);

typedef struct pi_quant_params {
    pi_quant_recipe recipe;
    int output_type;   /* >= 0: output.weight in this type, as llama-quantize --output-tensor-type */
    int embd_type;     /* >= 0: token_embd.weight likewise (--token-embedding-type) */
    bool pure;         /* every quantized tensor in the recipe's base type (--pure) */
    int n_threads;     /* 0: 1 */
    pi_gguf_progress_fn progress;
    void *progress_ctx;
} pi_quant_params;

/* What the recipe did: tensors per type written, and fallbacks. */
typedef struct pi_quant_report {
    int64_t n_tensors[PI_TYPE_COUNT];
    int64_t n_fallback;
} pi_quant_report;

/* Write in_path's model quantized by p to out_path (through the GGUF
   writer: out_path appears only when complete). Refused: a bundle file, a
   quantized input for a quantizing recipe other than its own types
   (requantizing loses precision: llama-quantize needs --allow-requantize;
   so does this with PI_ERR_INVALID), unknown recipes. */
pi_status pi_quantize_model(const char *in_path, const char *out_path, const pi_quant_params *p,
                            pi_quant_report *report);

#endif
