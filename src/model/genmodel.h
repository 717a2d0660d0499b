/*
 * genmodel.h — synthetic llama models with random weights, of any shape and
 * weight type, for tests and benchmarks (large files are generated, never
 * committed). The tokenizer is copied from a vocabulary GGUF when one is
 * given, so the model tokenizes real text; otherwise a byte-level
 * SentencePiece vocabulary is made up.
 *
 * Planted activation sparsity. With a ReLU or dReLU activation and
 * active > 0 the weights are not plain noise: each token activates about a
 * fraction `active` of every layer's neurons, neuron i of a layer fires with
 * a planted frequency p_i that follows a power law of exponent `skew` over a
 * random ranking of the neurons, and whether a neuron fires is a function of
 * a few (k) directions of the FFN input plus a little noise, so a low-rank
 * predictor reaches high recall. genmodel.c explains the construction; in
 * short, residual coordinate 0 carries a constant (a bias without biases),
 * coordinates [0, d) are reserved for the FFN inputs' decisive part and no
 * layer writes to them, so every layer sees the statistics planted in the
 * embedding whatever the layers before it did.
 *
 * Temporal persistence (persist > 0): consecutive generated tokens activate
 * overlapping neurons, as real ReLU models do, while every neuron keeps its
 * planted frequency (and so the skew). The output head makes generation walk
 * the vocabulary (token v is followed by v + 1), and along that walk the
 * decisive part of the embeddings is a moving average of noise whose
 * neighbours correlate by `persist`, so each neuron's gate follows a
 * stationary Gaussian process with that lag-1 correlation. The walk skips
 * the special tokens below PI_GENMODEL_WALK_FIRST (unk, BOS, EOS) and wraps
 * from the last token to it.
 *
 * Such a model also gets ffn_down_t (the down matrix one neuron per row, what
 * the sparse FFN reads) next to ffn_down (what the dense path reads), both
 * the same matrix, and with `predictor` a PowerInfer predictor per layer
 * (blk.N.fc1/fc2.weight, powerinfer.sparse_threshold) of realistic size.
 *
 * Mixture of experts (n_expert > 0, Mixtral's layout and llama.cpp's names):
 * each layer has a router (blk.N.ffn_gate_inp, F32 as llama.cpp keeps it)
 * and n_expert experts of n_ff neurons each, stacked (blk.N.ffn_*_exps); a
 * token uses the n_expert_used experts with the highest router logits. With
 * planted sparsity, every expert is planted as a dense layer would be (its
 * own ranking, directions and predictor: blk.N.fc1_exps/fc2_exps), and the
 * router is planted too: the share of tokens routed to expert x follows a
 * power law of exponent `expert_skew` over a random ranking of the experts,
 * and consecutive tokens on the walk reuse experts more than independent
 * tokens would, the more the higher `expert_persist` (the lag-1 correlation
 * of the router logits along the walk). The router reads a block of the
 * reserved coordinates of its own, disjoint from what the experts' gates
 * read, so which experts a token is routed to says nothing about which of
 * their neurons fire: each routed expert activates about `active` of its
 * neurons. No ffn_down_t is written (the loader builds the experts' one in
 * memory, pi_lm_make_down_t).
 */
#ifndef PI_MODEL_GENMODEL_H
#define PI_MODEL_GENMODEL_H

#include "model.h"

#define PI_GENMODEL_WALK_FIRST 3
#define PI_GENMODEL_MAX_EXPERTS 256

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
    /* planted sparsity (act relu or drelu only); active == 0: plain random weights */
    double active;       /* mean fraction of each layer's neurons active per token, (0, 0.9] */
    double skew;         /* exponent S of the power law p(rank r) ~ (r+1)^-S, [0, 4] */
    double persist;      /* temporal persistence, [0, 0.99]: the correlation of consecutive tokens' FFN inputs
                            along the walk the output head makes (genmodel.c); 0: independent tokens */
    bool predictor;      /* also write predictors and powerinfer.sparse_threshold */
    bool plain;          /* pi_genmodel_write: only what llama.cpp reads (no ffn_down_t, no predictors),
                            the other tensors unchanged */
    int64_t pred_rank;   /* predictor rank; 0: n_embd / 4 (see genmodel.c) */
    pi_type pred_type;   /* predictor matrices (presets: Q8_0) */
    /* mixture of experts; n_expert == 0: a dense FFN */
    int64_t n_expert;      /* experts per layer, [2, PI_GENMODEL_MAX_EXPERTS] */
    int64_t n_expert_used; /* experts per token, [1, min(n_expert, PI_MOE_MAX_USED)] */
    double expert_skew;    /* planted: exponent of the power law of the experts' shares of tokens, [0, 4]; 0: even */
    double expert_persist; /* planted: lag-1 correlation of the router logits along the walk, [0, 0.99];
                              0: consecutive tokens are routed independently */
    pi_gguf_progress_fn progress; /* bytes of tensor data written; NULL (presets): none */
    void *progress_ctx;
} pi_genmodel_params;

/* What a planted model looks like, computed from the parameters alone. */
typedef struct pi_genmodel_plant {
    int64_t k;            /* input directions that decide each layer's activity */
    int64_t d;            /* residual coordinates [0, d) reserved (no layer writes them) */
    int64_t rank;         /* predictor rank (0 without a predictor) */
    int64_t n_clipped;    /* neurons whose power-law frequency was clipped to the maximum */
    double p_max;         /* the largest planted frequency */
    double cover80;       /* fraction of neurons that account for 80% of activations (planted) */
    float threshold;      /* powerinfer.sparse_threshold written */
    double recall;        /* expected predictor recall vs the exact mask at that threshold */
    double precision;     /* expected predictor precision */
    /* mixture of experts (zero for a dense model) */
    int64_t router_dims;  /* reserved coordinates the router reads (the experts' gates read the rest) */
    double load_max, load_min; /* the largest and smallest planted share of tokens routed to an expert */
    int64_t n_load_clipped;    /* experts whose power-law share was clipped to the maximum */
    double router_corr;   /* lag-1 correlation of the router logits along the walk (0: independent) */
    double expert_reuse;  /* expected share of a token's experts that the previous token on the
                             walk also used (a fixed-seed simulation of the planted router) */
    double expert_reuse_independent; /* the same for independent tokens: sum of load^2 / n_expert_used */
} pi_genmodel_plant;

/* Fill p with a named shape ("7b-l8", "7b", "small", "tiny", and the
   mixtures of experts "mixtral" (Mixtral 8x7B), "mixtral-l4" (its first 4
   layers) and "moe-tiny"); other fields get defaults (q4_0 matrices and
   embedding, q8_0 output, SiLU without planting, skews 1, persistence 0.2,
   expert persistence PLANT_EXPERT_PERSIST: see genmodel.c). PI_ERR_NOT_FOUND
   for an unknown name. */
pi_status pi_genmodel_preset(const char *name, pi_genmodel_params *p);

/* Names of the presets, NULL-terminated. */
const char *const *pi_genmodel_preset_names(void);

/* Write the model. Deterministic for a given seed (independent of threads).
   PI_ERR_INVALID (naming the field) for a shape, type or planting parameter
   out of range. The file reaches path only when complete (gguf.h's writer):
   on failure (disk full, a file size limit) a previous file there is
   untouched. Before any tensor data, the free space of path's file system
   is compared with the file's size: PI_ERR_IO naming both in bytes when it
   does not fit. Rows are generated on n_threads threads while another
   thread writes the previous slab, so a large model streams at about the
   slower of the two; memory use is a few MiB whatever the model's size. */
pi_status pi_genmodel_write(const pi_genmodel_params *p, const char *path);

/* The same model as a bundle file (gguf/bundle.h), written directly: what
   pinfer convert --reorder --bundle would make of it, with the planted
   statistics in place of measured ones. Each layer's (each expert's)
   neurons are stored in planted hotness order with the predictors' fc2
   rows, blk.N.ffn_perm and blk.N.ffn_act_count (the expected counts over
   1,000,000 tokens: a mixture's expert share times the neuron's
   frequency; pinfer.stats.unit_tokens the experts' shares) and, with a
   predictor, blk.N.ffn_sel_count (the expected selections at the
   predictor's threshold over the same tokens: the share times
   P(logit >= threshold), the logit N(-t_i, c1^2)). The down part
   is what convert makes from the plain file: a dense model's ffn_down_t, a
   mixture's ffn_down_exps transposed. Needs planted sparsity
   (PI_ERR_INVALID otherwise); the free space is checked first. */
pi_status pi_genmodel_write_bundle(const pi_genmodel_params *p, const char *path);

/* The planted design of p (p->active > 0): sizes, the analytic skew, the
   predictor threshold and its expected recall and precision. PI_ERR_INVALID
   when p plants nothing or is out of range. Thread-safe. */
pi_status pi_genmodel_plant_info(const pi_genmodel_params *p, pi_genmodel_plant *out);

/* freq[0..n_ff) = the activation frequency planted in each neuron of FFN
   unit `layer` (model.h: a layer, or for a mixture of experts unit
   il * n_expert + x, expert x of layer il; the file's neuron order). For an
   expert the frequency is over the tokens routed to it. Same errors as
   pi_genmodel_plant_info. */
pi_status pi_genmodel_planted_freq(const pi_genmodel_params *p, int64_t layer, double *freq);

/* load[0..n_expert) = the planted share of tokens that layer il routes to
   each expert (each in (0, 1], summing to n_expert_used). PI_ERR_INVALID as
   pi_genmodel_plant_info, or for a dense model. */
pi_status pi_genmodel_planted_load(const pi_genmodel_params *p, int64_t il, double *load);

#endif
