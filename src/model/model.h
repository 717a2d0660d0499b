/*
 * model.h — pi_lm, a llama-family language model loaded from GGUF:
 * hyperparameters and views of the weights inside the mapped file (llama2.c's
 * "config + weights"). The public pi_model (include/pinfer.h) wraps one with
 * its tokenizer and, under a memory budget, its flash state.
 *
 * A pi_lm is immutable after loading and may be shared by threads and
 * sessions. Weight views point into the file mapping (zero-copy); only small
 * vectors stored in a non-F32 type (norms) are converted into owned F32 copies.
 *
 * A bundle file (gguf/bundle.h) stores each dense layer's FFN as one
 * bundle per neuron; loading it de-interleaves the bundles into owned
 * contiguous gate, up and down_t matrices, so every forward path reads the
 * same pi_weights as for any other file, and records where the bundles are
 * (pi_layer.bundle) for readers that stream them from flash.
 *
 * Tensor names and metadata keys are llama.cpp's (one table in model.c).
 * Shapes follow GGUF: ne[0] is the row length, so a matrix that maps n_in
 * inputs to n_out outputs has ne = {n_in, n_out} and n_out rows.
 */
#ifndef PI_MODEL_MODEL_H
#define PI_MODEL_MODEL_H

#include "gguf/bundle.h"
#include "gguf/gguf.h"
#include "kernels/kernels.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum pi_ffn_act {
    PI_ACT_SILU = 0,  /* silu(gate) * up: plain Llama/Mistral, dense only */
    PI_ACT_RELU = 1,  /* relu(gate) * up: ReluLLaMA, ProSparse */
    PI_ACT_DRELU = 2, /* relu(gate) * relu(up): TurboSparse, Bamboo */
} pi_ffn_act;

const char *pi_ffn_act_name(pi_ffn_act a);

typedef struct pi_hparams {
    int64_t n_vocab;
    int64_t n_embd;
    int64_t n_layer;
    int64_t n_head;
    int64_t n_head_kv;     /* < n_head: grouped-query attention */
    int64_t head_dim;      /* n_embd / n_head */
    int64_t n_ff;          /* FFN hidden size (per expert for MoE) */
    int64_t n_ctx_train;   /* context length the model was trained with */
    int64_t n_rot;         /* dimensions of each head that RoPE rotates */
    int64_t n_expert;      /* 0: dense FFN */
    int64_t n_expert_used; /* at most PI_MOE_MAX_USED */
    float rms_eps;
    float rope_freq_base;
    pi_ffn_act act;
} pi_hparams;

/* A weight matrix (or vector) inside the mapping. */
#define PI_MOE_MAX_USED 64 /* experts a token may use per layer */

/* FFN units: what predictors, thresholds and activation statistics are kept
   per. A dense model has one per layer (unit il); a mixture of experts one
   per layer and expert (unit il * n_expert + x). */
static inline int64_t pi_ffn_units(const pi_hparams *hp) {
    return hp->n_layer * (hp->n_expert > 0 ? hp->n_expert : 1);
}
static inline int64_t pi_ffn_unit(const pi_hparams *hp, int64_t il, int64_t x) {
    return il * (hp->n_expert > 0 ? hp->n_expert : 1) + x;
}

typedef struct pi_weight {
    const void *data;
    pi_type type;
    int64_t ne[4];      /* ne[0]: row length (inputs); ne[1]: rows (outputs) */
    size_t row_bytes;   /* bytes between rows */
    pi_gguf_str name;   /* the tensor's name, for messages */
} pi_weight;

/* Where a layer's bundles are (bundle files only; see gguf/bundle.h). */
typedef struct pi_layer_bundle {
    const void *data;     /* bundle 0 inside the mapping; bundle i at data + i * stride */
    int64_t file_off;     /* absolute file offset of bundle 0 (a multiple of 4096) */
    size_t stride;        /* bytes from one bundle to the next */
    pi_bundle_parts parts; /* types, row sizes and offsets of gate, up and down inside a bundle
                              (those of the ffn_gate, ffn_up and ffn_down_t bound to them) */
    bool present;
} pi_layer_bundle;

typedef struct pi_layer {
    pi_weight attn_norm;             /* (n_embd) F32 */
    pi_weight wq, wk, wv, wo;        /* (n_embd -> n_head*head_dim), (-> n_head_kv*head_dim) x2, (-> n_embd) */
    pi_weight ffn_norm;              /* (n_embd) F32 */
    pi_weight ffn_gate, ffn_up;      /* (n_embd -> n_ff) */
    pi_weight ffn_down;              /* (n_ff -> n_embd); absent when ffn_down_t is given */
    pi_weight ffn_down_t;            /* (n_ff rows of n_embd): row i is neuron i's down column, so
                                        the down projection is an axpy over active neurons; for
                                        MoE n_expert such blocks, expert x's neuron i at row
                                        x n_ff + i (pi_lm_make_down_t) */
    pi_weight fc1, fc2;              /* activation predictor fc2(relu(fc1 x)): (n_embd -> rank),
                                        (rank -> n_ff); PowerInfer's names and shapes */
    /* Mixture of experts (n_expert > 0): router and stacked expert matrices */
    pi_weight ffn_gate_inp;          /* (n_embd -> n_expert) */
    pi_weight ffn_gate_exps, ffn_up_exps; /* (n_embd -> n_ff) x n_expert */
    pi_weight ffn_down_exps;         /* (n_ff -> n_embd) x n_expert */
    pi_weight fc1_exps, fc2_exps;    /* per-expert predictors: (n_embd -> rank), (rank -> n_ff) x n_expert */
    pi_layer_bundle bundle;          /* bundle files: the FFN as stored (ffn_gate, ffn_up and
                                        ffn_down_t are owned copies de-interleaved from it, or
                                        views into it with PI_LOAD_FFN_ON_FLASH) */
} pi_layer;

typedef struct pi_lm {
    pi_gguf *gguf;          /* owned: the mapping every view points into */
    char *path;
    pi_hparams hp;
    pi_weight tok_embd;     /* (n_vocab rows of n_embd) */
    pi_weight output_norm;  /* (n_embd) F32 */
    pi_weight output;       /* (n_embd -> n_vocab); tok_embd when tied */
    bool tied_output;
    bool pwri;              /* PowerInfer "PWRI" file */
    bool has_predictor;     /* every layer has fc1/fc2 */
    bool bundled;           /* a bundle file: every layer's FFN came from blk.N.ffn_bundle */
    uint32_t bundle_align;  /* its pinfer.bundle.align (0: packed) */
    float sparse_threshold; /* a neuron is predicted active when its fc2 logit >= this */
    float *layer_threshold; /* (pi_ffn_units) per-unit thresholds (pinfer.predictor.thresholds), or NULL */
    int64_t *layer_split;   /* (pi_ffn_units) with layer_threshold_hot, a plan's resident prefixes: neurons
                               below layer_split[u] reach layer_threshold_hot[u] instead; NULL: none */
    float *layer_threshold_hot;
    pi_layer *layers;       /* n_layer */
    float *owned_f32;       /* norm vectors converted to F32 */
    void **owned_down_t;    /* (n_layer) transposed down matrices made by pi_lm_make_down_t */
    size_t *owned_down_t_bytes;
    void **owned_ffn;       /* (n_layer, 3) bundle files: gate, up, down_t de-interleaved (entries
                               NULL with PI_LOAD_FFN_ON_FLASH) */
    size_t *owned_ffn_bytes;
    uint64_t weight_bytes;  /* bytes of all tensors bound */
    uint64_t n_params;      /* their elements */
} pi_lm;

/* Load a model from a GGUF file, mapped (PI_MAP_FILE) or read into
   huge-page-backed memory (PI_MAP_LOAD: faster decode, see base/mapfile.h).
   Errors name the missing tensor or key, the unsupported architecture or
   type, or the shape that does not agree. */
pi_status pi_lm_load(const char *path, pi_map_mode mode, pi_lm **out);

/* PI_ERR_FORMAT naming path, the tensor, its type and the block when one
   of `rows` quantized rows at data (n elements each, stride bytes apart;
   the first is the tensor's row row0) has a NaN or infinite scale. */
pi_status pi_check_scales(const char *path, pi_gguf_str name, pi_type t, const void *data, int64_t n, int64_t row0,
                          int64_t rows, size_t stride);

/* pi_lm_load with flags. PI_LOAD_FFN_ON_FLASH (bundle files, with
   PI_MAP_FILE): ffn_gate/ffn_up/ffn_down_t are strided views of the bundles
   in the mapping instead of de-interleaved copies, so loading reads none of
   the FFN; sparse/offload.h reads it from flash instead. */
#define PI_LOAD_FFN_ON_FLASH 1u
/* PI_LOAD_UNCHECKED: bind tensors without reading them (no scan of the
   quantization scales through the mapping): for a caller that reads the
   weights it uses by other means and checks them there (sparse/offload.h),
   or needs only the shapes. A scan would bring every weight of the file into
   the page cache and the process's resident set: 370 MB of a 7b-l8 bundle
   file beside a 357 MiB budget. */
#define PI_LOAD_UNCHECKED 2u
pi_status pi_lm_load_ex(const char *path, pi_map_mode mode, unsigned flags, pi_lm **out);

/* Bind a model to an already-open GGUF (taking ownership of g on success). */
pi_status pi_lm_from_gguf(pi_gguf *g, const char *path, pi_lm **out);

void pi_lm_free(pi_lm *m); /* accepts NULL */

/* Bytes of weights a dense decode step reads (every matrix once, plus one
   embedding row). */
uint64_t pi_lm_bytes_per_token(const pi_lm *m);

/* Give every dense layer that lacks one an ffn_down_t: the down matrix
   stored one neuron per row, which the sparse FFN needs (an axpy over the
   active neurons). Exact for F32/F16/BF16; Q8_0/Q4_0 rows are requantized
   after transposing (blocks run along the other axis), which adds that
   type's rounding once. Costs the down matrices' size in memory again.
   Not thread-safe; call before sessions use the model. */
pi_status pi_lm_make_down_t(pi_lm *m);

/* The type of a transposed down matrix (ffn_down_t) made from `down`:
   down's own type when rows of down->ne[1] elements are whole blocks of it,
   else F32. */
pi_type pi_weight_down_t_type(const pi_weight *down);

/* Transpose a down matrix (ne = {n_ff, n_embd}) into dst: n_ff rows of
   n_embd in type t (pi_weight_down_t_type), row i = column i of down,
   dequantized and quantized again for block types. The rows are exactly
   those pi_lm_make_down_t makes. Works through down in strips of columns,
   so it needs only n_embd * 256 floats besides dst. PI_ERR_NOMEM;
   PI_ERR_INVALID when a row of n_ff is not whole blocks. Thread-safe. */
pi_status pi_weight_transpose(const pi_weight *down, pi_type t, void *dst);

/* Bytes of a weight's elements (rows of ne[0] in its type; a strided view
   counts its rows, not its strides). */
size_t pi_weight_nbytes(const pi_weight *w);

/* Dequantize row `row` of a weight matrix into out[0..ne[0]). */
void pi_weight_row_f32(const pi_weight *w, int64_t row, float *out);

#endif
