/*
 * genmodel.h — synthetic llama models with random weights, of any shape and
 * weight type, for tests and benchmarks (large files are generated, never
 * committed). The tokenizer is copied from a vocabulary GGUF when one is
 * given, so the model tokenizes real text; otherwise a byte-level
 * SentencePiece vocabulary is made up.
 */
#ifndef PI_MODEL_GENMODEL_H
#define PI_MODEL_GENMODEL_H

#include "model.h"

typedef struct pi_genmodel_params {
    int64_t n_embd, n_head, n_head_kv, n_ff, n_layer, n_vocab, n_ctx;
    pi_type type;        /* attention and FFN matrices */
    pi_type embd_type;   /* token embedding */
    pi_type output_type; /* output head */
    pi_ffn_act act;
    uint64_t seed;
    const char *vocab_path; /* GGUF whose tokenizer.* keys are copied; NULL: synthetic */
    const char *name;
    int n_threads;
} pi_genmodel_params;

/* Fill p with a named shape ("7b-l8", "7b", "tiny", "small"); other fields
   get defaults (q4_0 matrices, f16 embedding and output... see genmodel.c).
   PI_ERR_NOT_FOUND for an unknown name. */
pi_status pi_genmodel_preset(const char *name, pi_genmodel_params *p);

/* Names of the presets, NULL-terminated. */
const char *const *pi_genmodel_preset_names(void);

/* Write the model. Deterministic for a given seed (independent of threads). */
pi_status pi_genmodel_write(const pi_genmodel_params *p, const char *path);

#endif
