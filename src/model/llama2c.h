/*
 * llama2c.h — import of llama2.c checkpoints (legacy float32 format) and
 * their tokenizer files into a llama GGUF that pinfer and llama.cpp load.
 */
#ifndef PI_MODEL_LLAMA2C_H
#define PI_MODEL_LLAMA2C_H

#include "base/status.h"
#include "gguf/gguf.h"

#include <stddef.h>
#include <stdint.h>

typedef struct pi_llama2c_config {
    int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
    int shared_classifier; /* vocab_size was positive: output = token embedding */
} pi_llama2c_config;

/* Parse and validate the 28-byte header of a checkpoint of `size` bytes:
   dimensions positive and consistent, and the file exactly as long as the
   weights they imply (with or without the classifier). */
pi_status pi_llama2c_parse_config(const void *data, size_t size, pi_llama2c_config *out);

/* Parse a llama2.c tokenizer file (int32 max_token_length, then per token a
   float score, an int32 length and the bytes) with n_vocab entries. On success
   *strs, *lens and *scores are malloc'd arrays (strs[i] point into one block
   owned by strs[0]'s allocation; free with pi_llama2c_vocab_free). */
pi_status pi_llama2c_parse_vocab(const void *data, size_t size, int32_t n_vocab, char ***strs, uint64_t **lens,
                                 float **scores);
void pi_llama2c_vocab_free(char **strs, uint64_t *lens, float *scores);

/* Convert checkpoint + tokenizer into a GGUF at out_path (F32 tensors, llama
   names and keys, SentencePiece tokenizer metadata). The file reaches
   out_path only when complete (gguf.h's writer): on failure a previous file
   there is untouched. */
pi_status pi_llama2c_convert(const char *ckpt_path, const char *tok_path, const char *out_path, const char *name);

/* The same, telling progress (may be NULL) of the tensor bytes written. */
pi_status pi_llama2c_convert_progress(const char *ckpt_path, const char *tok_path, const char *out_path,
                                      const char *name, pi_gguf_progress_fn progress, void *progress_ctx);

#endif
