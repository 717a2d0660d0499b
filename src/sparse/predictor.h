/*
 * predictor.h — activation predictors: per FFN layer a small bias-free MLP
 * that guesses, from the layer's FFN input, which neurons the token will
 * activate (DESIGN.md §1 and §5, `train-predictor`).
 *
 * Predictors are kept per FFN unit (model/model.h): a dense layer, or for a
 * mixture of experts one expert of a layer, trained on the tokens the
 * router sent to it. The predictor of a unit is PowerInfer's
 *     z = fc2 relu(fc1 x)          x: (n_embd), z: (n_ff) logits
 * with fc1 (rank, n_embd) and fc2 (n_ff, rank), stored as the GGUF tensors
 * blk.N.fc1.weight (ggml shape {n_embd, rank}) and blk.N.fc2.weight
 * ({rank, n_ff}), F32. Neuron i is predicted active when z_i >= the layer's
 * threshold. The rank may differ between layers. A mixture's layer stores
 * its experts' predictors stacked, as its expert matrices are:
 * blk.N.fc1_exps ({n_embd, rank, n_expert}) and blk.N.fc2_exps ({rank,
 * n_ff, n_expert}), at the largest of its experts' ranks (the others padded
 * with zero rows of fc1 and zero columns of fc2: the same logits).
 *
 * The pieces, in the order a tool uses them:
 *   1. pi_pred_data records (FFN input, activation mask) pairs: install
 *      pi_pred_data_observe as a dense session's FFN observer and run text.
 *   2. pi_pred_train fits one predictor per layer (Adam, class-weighted
 *      binary cross-entropy), on the first part of the recorded tokens, and
 *      picks per layer on the rest (the validation split) the rank (when
 *      asked to) and the threshold that reaches the recall target.
 *   3. pi_pred_eval_observe measures recall and precision on held-out text;
 *      pi_pred_count does the same for recorded arrays.
 *   4. pi_pred_save writes a copy of the model with the predictors added.
 *
 * Metadata written next to the tensors:
 *   powerinfer.sparse_threshold     f32   the smallest layer threshold: one global
 *                                         value (PowerInfer's key) that keeps every
 *                                         layer's recall at or above its target
 *   pinfer.predictor.thresholds     f32[units]  each unit's own threshold (units: n_layer,
 *                                         or n_layer * n_expert, layer-major)
 *   pinfer.predictor.rank           u32[units]  each unit's trained rank (information)
 *   pinfer.predictor.recall_target  f32   the recall the thresholds were chosen for
 *
 * "Active" means |act| > act_threshold where act = act(gate)*up, as in
 * stats.h: 0 for ReLU and dReLU models (exact zeros).
 *
 * Determinism: training runs one task per (layer, candidate rank) on the
 * pool, each task single-threaded with its own seeded random stream, so the
 * predictors are bit-identical for every thread count (on one machine: the
 * F32 kernels of another ISA round differently).
 */
#ifndef PI_SPARSE_PREDICTOR_H
#define PI_SPARSE_PREDICTOR_H

#include "base/pool.h"
#include "gguf/names.h"
#include "model/model.h"

#include <stdint.h>

/* The keys are in gguf/names.h (PI_KEY_SPARSE_THRESHOLD, PI_KEY_PREDICTOR_*). */

#define PI_PRED_MAX_CANDIDATES 8 /* ranks tried per layer when choosing automatically */
#define PI_PRED_MIN_UNIT_TOKENS 16 /* an expert routed fewer training tokens is left untrained:
                                      every neuron predicted active */

/* ---- 1. recorded training pairs ---- */

typedef struct pi_pred_data {
    int64_t n_layer, n_embd, n_ff; /* n_layer: FFN units (model.h), layers x experts for a mixture */
    int64_t n_expert;      /* 0: dense; else unit il * n_expert + x is layer il's expert x */
    int64_t mask_bytes;    /* (n_ff + 7) / 8 */
    int64_t cap;           /* tokens each layer can hold */
    int64_t *n;            /* (n_layer) tokens recorded per layer */
    float act_threshold;   /* active: |act| > act_threshold */
    float *x;              /* (n_layer, cap, n_embd) FFN inputs */
    uint8_t *mask;         /* (n_layer, cap, mask_bytes) activation masks: neuron i is
                              bit i%8 of byte i/8 (LSB first, the golden files' layout) */
} pi_pred_data;

/* Bytes pi_pred_data_create allocates for cap tokens of this shape. */
uint64_t pi_pred_data_bytes(int64_t n_layer, int64_t n_embd, int64_t n_ff, int64_t cap);

/* Room for cap tokens per layer. PI_ERR_INVALID for a shape or cap out of
   range or a threshold that is negative or not finite; PI_ERR_NOMEM. */
pi_status pi_pred_data_create(int64_t n_layer, int64_t n_embd, int64_t n_ff, int64_t cap, float act_threshold,
                              pi_pred_data **out);

/* Shaped for a model: one unit per layer, or per layer and expert. */
pi_status pi_pred_data_for_model(const pi_lm *m, int64_t cap, float act_threshold, pi_pred_data **out);

void pi_pred_data_free(pi_pred_data *d); /* accepts NULL */

/* A pi_ffn_observer (model/session.h); ctx is the pi_pred_data. Appends
   the pair to the layer's records; tokens beyond cap are dropped. Runs on
   the session's driving thread and takes no lock. */
void pi_pred_data_observe(void *ctx, int64_t layer, int64_t pos, const float *ffn_in, const float *act);

/* Tokens recorded in every unit (a mixture's experts: in the least used). */
int64_t pi_pred_data_tokens(const pi_pred_data *d);

/* ---- 2. training ---- */

/* Pairs counted over some tokens of one layer. */
typedef struct pi_pred_counts {
    int64_t tokens;    /* tokens evaluated */
    int64_t active;    /* (token, neuron) pairs truly active */
    int64_t predicted; /* pairs predicted active */
    int64_t hit;       /* pairs both */
} pi_pred_counts;

double pi_pred_recall(const pi_pred_counts *c);    /* hit / active (1 when nothing was active) */
double pi_pred_precision(const pi_pred_counts *c); /* hit / predicted (1 when nothing was predicted) */

/* Progress: done of total work units (proportional to training time). May
   be called from any pool thread, never by two at once. */
typedef void (*pi_pred_progress_fn)(void *ctx, int64_t done, int64_t total);

typedef struct pi_pred_params {
    int64_t rank;      /* > 0: this rank for every layer; 0: choose per layer (see pi_pred_candidates) */
    int epochs;        /* passes over the training split */
    int64_t batch;     /* tokens per Adam step */
    float lr;          /* Adam step size at the start (cosine decay to lr/10) */
    float recall;      /* recall target the thresholds are chosen for, on the validation split */
    float val_frac;    /* fraction of the recorded tokens held out for validation (the last ones) */
    float pos_weight;  /* loss weight of active neurons; 0: sqrt(inactive / active) per layer */
    float neuron_cost; /* rank rule: cost of a predicted neuron's multiply-add relative to the
                          predictor's (see choose_rank in predictor.c) */
    uint64_t seed;     /* initial weights and shuffling */
    pi_pred_progress_fn progress; /* may be NULL */
    void *progress_ctx;
} pi_pred_params;

/* The defaults (documented in predictor.c next to the values). */
pi_pred_params pi_pred_default_params(void);

/* The ranks tried per layer when params.rank is 0, ascending; returns how
   many (at most PI_PRED_MAX_CANDIDATES). */
int pi_pred_candidates(int64_t n_embd, int64_t n_ff, int64_t *ranks);

/* Largest rank accepted: a bottleneck wider than the input buys nothing a
   smaller one cannot. */
int64_t pi_pred_max_rank(int64_t n_embd, int64_t n_ff);

/* One layer's trained predictor. */
typedef struct pi_pred_layer {
    int64_t rank;
    float threshold;       /* neuron predicted active when its logit >= threshold */
    float *fc1;            /* (rank, n_embd), owned */
    float *fc2;            /* (n_ff, rank), owned */
    pi_pred_counts val;    /* on the validation split at threshold */
    float pos_weight;      /* class weight of active neurons in the loss */
    bool untrained;        /* an expert with too few tokens: zero weights, every neuron predicted */
    int n_tried;           /* candidates trained (1 for a fixed rank) */
    int64_t tried_rank[PI_PRED_MAX_CANDIDATES];
    pi_pred_counts tried_val[PI_PRED_MAX_CANDIDATES]; /* their validation counts at their thresholds */
} pi_pred_layer;

typedef struct pi_predictor {
    int64_t n_layer, n_embd, n_ff; /* n_layer: FFN units, as in pi_pred_data */
    int64_t n_expert;              /* 0: dense */
    float recall_target;
    pi_pred_layer *layers; /* (n_layer) */
} pi_predictor;

/* Train every unit's predictor from recorded pairs, on the pool (NULL: the
   calling thread only). A mixture's experts train and validate each on its
   own tokens; one with fewer than PI_PRED_MIN_UNIT_TOKENS for training is
   left untrained (every neuron predicted). PI_ERR_INVALID for parameters out
   of range (rank above pi_pred_max_rank, recall outside (0, 1], too few
   tokens to split); PI_ERR_NOMEM. Results do not depend on the pool's size. */
pi_status pi_pred_train(const pi_pred_data *d, const pi_pred_params *p, pi_pool *pool, pi_predictor **out);

void pi_predictor_free(pi_predictor *P); /* accepts NULL */

/* The predictors a model file carries (fc1/fc2 of any type, converted to
   F32), with pinfer.predictor.thresholds when present, else the model's
   sparse_threshold for every layer. PI_ERR_NOT_FOUND when the model has no
   predictors. */
pi_status pi_predictor_from_model(const pi_lm *m, pi_predictor **out);

/* ---- 3. evaluation ---- */

/* Logits z (n_ff) for the FFN input x (n_embd) of a layer; h holds rank
   floats of scratch. Thread-safe; allocates nothing. */
void pi_pred_logits(const pi_predictor *P, int64_t layer, const float *x, float *h, float *z);

/* Add to c the counts of n tokens: inputs x (n, n_embd) and masks (n,
   (n_ff + 7) / 8) in the layout of pi_pred_data. PI_ERR_NOMEM. */
pi_status pi_pred_count(const pi_predictor *P, int64_t layer, const float *x, const uint8_t *mask, int64_t n,
                        pi_pred_counts *c);

/* Held-out evaluation as an FFN observer. */
typedef struct pi_pred_eval {
    const pi_predictor *P;
    float act_threshold;
    pi_pred_counts *counts; /* (n_layer) */
    float *h;               /* (max rank) scratch */
    float *z;               /* (n_ff) scratch */
} pi_pred_eval;

pi_status pi_pred_eval_create(const pi_predictor *P, float act_threshold, pi_pred_eval **out);
void pi_pred_eval_free(pi_pred_eval *e); /* accepts NULL */

/* A pi_ffn_observer; ctx is the pi_pred_eval. Counts the token's predicted
   and true active neurons of the layer. */
void pi_pred_eval_observe(void *ctx, int64_t layer, int64_t pos, const float *ffn_in, const float *act);

/* ---- 4. saving ---- */

/* Write a copy of m's file to path: every key-value and tensor byte for
   byte, the same magic (GGUF or PWRI), with fc1/fc2 of every layer replaced
   or added and the keys above set (replacing earlier values). The shapes of
   P must be m's. PI_ERR_INVALID when path is m's own file, by any name (the
   copy would replace its source); PI_ERR_IO (or PI_ERR_NOT_FOUND for a
   missing directory). The file reaches path only when complete: on failure a
   previous file there is untouched. */
pi_status pi_pred_save(const pi_predictor *P, const pi_lm *m, const char *path);

#endif
