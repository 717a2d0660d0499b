/*
 * stats.h — per-neuron activation statistics of a model's FFN layers: how
 * many of the profiled tokens activated each neuron (DESIGN.md §5, `profile`).
 *
 * A pi_stats is filled by running text through a dense session with
 * pi_stats_observe installed as the FFN observer, saved as a small GGUF, and
 * read back by the tools that come later: the reorder step takes
 * pi_stats_order() as the neuron permutation, the planner takes the hit-rate
 * curve pi_stats_coverage() to size the hot set.
 *
 * "Active" means |act| > threshold, where act = act(gate)*up is the FFN hidden
 * value. For ReLU and dReLU models the threshold is 0, so active means exactly
 * non-zero; SiLU never gives exact zeros, so those models need a small positive
 * threshold (pi_stats_default_threshold).
 *
 * File format (GGUF v3, general.architecture = "pinfer-stats"):
 *   pinfer.stats.tokens     u64  tokens profiled (every token reaches every layer)
 *   pinfer.stats.n_layer    u32
 *   pinfer.stats.n_ff       u32
 *   pinfer.stats.threshold  f32
 *   pinfer.stats.model      str  the model profiled (its path as given)
 *   pinfer.stats.n_expert   u32, optional: a mixture of experts; then the
 *                           "layers" are its units, layer l / n_expert's
 *                           expert l % n_expert, and a count is the tokens
 *                           routed to the expert in which the neuron fired
 *                           (popularity times frequency; tokens counts all)
 *   pinfer.stats.n_expert_used u32, with it
 *   pinfer.stats.unit_tokens f32[n_layer], with it: tokens routed to each
 *                           unit (the expert's popularity)
 *   blk.N.act_count         I32 [n_ff], N = 0..n_layer-1: tokens in which
 *                           neuron i of layer N was active
 *   pinfer.stats.reuse      f32[n_layer * 8], optional: element l*8 + k-1 is
 *                           the share of layer l's active neurons that were
 *                           also active in one of the k tokens before (k = 1..8)
 *   pinfer.stats.reuse_tokens u64, with it: the tokens those shares come from
 *
 *   pinfer.stats.mask_tokens u32, optional: T, the number of profiled
 *                           tokens whose activation masks are kept (the
 *                           first T; a mixture's unit keeps its first T
 *                           visits, and unit_tokens says how many it had),
 *   blk.N.act_mask          I8 [ceil(n_ff / 8), T]: row t is token t's
 *                           active neurons of layer N, neuron i at bit
 *                           i % 8 of byte i / 8; the bits past n_ff are 0,
 *                           as are a unit's rows past its visits
 *
 *   pinfer.stats.pred_hist  f32[n_layer * 2 * B], optional (models with
 *                           predictors): element (l*2 + a)*B + b counts the
 *                           neurons of layer l, inactive (a = 0) or active
 *                           (a = 1), whose predictor logit fell in bin b
 *   pinfer.stats.pred_range f32[2], with it: lo and width w; bin b holds
 *                           [lo + b w, lo + (b+1) w), the first and last
 *                           bins also everything below and above
 *   pinfer.stats.pred_ghist f32[n_layer * G * 2 * B'], optional, with them:
 *                           the same by groups of neurons in frequency order
 *                           (predhist.h), with pred_glo f32[n_layer],
 *                           pred_groups u32 (G) and pred_gwidth f32
 *   blk.N.sel_count         I32 [n_ff], optional, with the histograms (every
 *                           layer or none): tokens in which the predictor
 *                           selected neuron i of layer N (its logit reached
 *                           the unit's threshold in the model profiled)
 *
 * The logit histograms give each layer's recall and false-positive rate at
 * every threshold (pi_stats_thresholds), so the thresholds can be chosen for
 * a recall target without the training data; the selection counts say which
 * neurons the false positives fall on (the planner's reads).
 *
 * The masks say which neurons fire together: pi_stats_order_coact places
 * such neurons side by side, so that their bundles on flash are read in one
 * request (Ripple's co-activation placement, within PowerInfer-2's order by
 * frequency).
 *
 * Temporal reuse is what a neuron cache lives on (LLM in a Flash's sliding
 * window): over a token that has at least 8 predecessors in its sequence, the
 * active neurons that were active in the previous token (k = 1), or in any of
 * the last k. Independent activations give about the mean active fraction at
 * k = 1; real ReLU models give much more. A sequence starts where the
 * observed position does not grow (a new window, a cleared cache).
 * Counts are I32 rather than F32 because F32 stops counting exactly at 2^24
 * (16.8M tokens: a few hours of profiling a small model), whereas I32 is exact
 * to 2^31-1 tokens, more than dense profiling of any model will see. In memory
 * the counts are 64-bit, so accumulating cannot overflow; saving refuses
 * statistics of more than INT32_MAX tokens instead of writing wrong numbers.
 *
 * Invariants: 0 <= counts[l][i] <= tokens. A pi_stats is owned by one thread
 * while it accumulates; the query functions only read it.
 */
#ifndef PI_SPARSE_STATS_H
#define PI_SPARSE_STATS_H

#include "gguf/gguf.h"
#include "gguf/names.h"
#include "gguf/predhist.h"
#include "model/model.h"

#include <stdint.h>

#define PI_STATS_ARCH "pinfer-stats"
#define PI_STATS_MAX_TOKENS INT32_MAX /* the most tokens a stats file can count (I32 counts) */


typedef struct pi_stats {
    int64_t n_layer;  /* FFN units (model.h): layers, or a mixture's layers x experts */
    int64_t n_ff;
    int64_t n_expert, n_expert_used; /* a mixture: unit l is layer l / n_expert's expert l % n_expert; 0: dense */
    int64_t calls0;   /* a mixture: observer calls for layer 0's experts (n_expert_used per token) */
    int64_t tokens;   /* tokens observed */
    float threshold;  /* active: |act| > threshold */
    char *model;      /* owned, NUL-terminated: the model profiled ("" when unknown) */
    int64_t *counts;  /* (n_layer, n_ff): tokens in which each neuron was active */
    /* temporal reuse (see above): sums over the tokens counted */
    int64_t reuse_tokens;  /* tokens counted (layer 0's) */
    double *reuse;         /* (n_layer, PI_STATS_REUSE_K): active neurons also active within the last k tokens;
                              loaded files hold the shares directly, with reuse_base 1 */
    double *reuse_base;    /* (n_layer): active neurons of the counted tokens */
    /* observer state */
    int64_t *last;         /* (n_layer, n_ff): the layer's token index of the neuron's last activation */
    int64_t *seen, *seq0, *last_pos; /* (n_layer): tokens seen, where the sequence began, the last position */
    /* predictor logit histograms (see above), NULL unless enabled or loaded */
    int64_t hist_bins;
    float hist_lo, hist_w;
    double *hist;          /* (n_layer, 2, hist_bins) */
    int64_t *sel;          /* (n_layer, n_ff) tokens in which the predictor selected each neuron;
                              NULL unless counted with the histograms or loaded */
    /* the logits by group of neurons in hotness order (predhist.h), for
       thresholds of a resident prefix's own: while profiling, each neuron's
       counts in a window around its layer's threshold (nhist, NULL for a
       mixture or when memory is short), grouped when saved; loaded as ghist */
    uint32_t *nhist;       /* (n_layer, n_ff, 2, PI_PRED_GHIST_BINS) */
    float *nhist_lo;       /* (n_layer) the window's first edge; NAN before the layer's first logits */
    pi_pred_ghist ghist;   /* from a file (ghist.h NULL otherwise) */
    /* activation masks of the first tokens (see above), NULL unless enabled or loaded */
    int64_t mask_cap;      /* tokens the buffer holds */
    int64_t mask_tokens;   /* tokens recorded (<= mask_cap) */
    uint8_t *masks;        /* (n_layer, mask_cap, pi_stats_mask_row(n_ff)) */
} pi_stats;

#define PI_STATS_MASK_TOKENS 1024       /* masks `profile` keeps by default */
#define PI_STATS_MAX_MASK_TOKENS 65536  /* the most a stats file may hold */
#define PI_STATS_COACT_WINDOW 16        /* pi_stats_order_coact's widest automatic window (see there) */
#define PI_STATS_COACT_AUTO (-1)        /* pi_stats_order_coact: the window for the layer's size */

/* Bytes of one token's mask of n_ff neurons. */
static inline int64_t pi_stats_mask_row(int64_t n_ff) { return (n_ff + 7) / 8; }

#define PI_STATS_HIST_BINS 1024  /* logits in [-16, 16) by 1/32 */
#define PI_STATS_HIST_LO (-16.0f)
#define PI_STATS_HIST_W (1.0f / 32.0f)

/* The threshold `profile` uses unless told otherwise: 0 for ReLU and dReLU
   (exact zeros), PI_STATS_SILU_THRESHOLD for SiLU (see stats.c for why). */
#define PI_STATS_SILU_THRESHOLD 0.01f
float pi_stats_default_threshold(pi_ffn_act act);

/* Empty statistics (all counts 0) for n_layer layers of n_ff neurons.
   model (may be NULL) is copied. PI_ERR_INVALID for a shape out of range or
   a threshold that is negative or not finite; PI_ERR_NOMEM. */
pi_status pi_stats_create(int64_t n_layer, int64_t n_ff, float threshold, const char *model, pi_stats **out);

/* Empty statistics shaped for a model, naming it by its path: one unit per
   layer, or per layer and expert. */
pi_status pi_stats_for_model(const pi_lm *m, float threshold, pi_stats **out);

void pi_stats_free(pi_stats *st); /* accepts NULL */

/* A pi_ffn_observer (model/session.h); ctx is the pi_stats. Counts the
   neurons of act (n_ff floats) that are active; a call for layer 0 counts one
   token. Runs on the session's driving thread, so it takes no lock; the
   layer must be below n_layer (a shape mismatch is a programming error). */
void pi_stats_observe(void *ctx, int64_t layer, int64_t pos, const float *ffn_in, const float *act);

/* Start counting predictor logits (PI_STATS_HIST_BINS bins) and
   selections. PI_ERR_NOMEM. */
pi_status pi_stats_enable_hist(pi_stats *st);

/* Keep the activation masks of the first cap tokens observed (1 <=
   cap <= PI_STATS_MAX_MASK_TOKENS); a mixture's unit keeps those of the
   first cap tokens routed to it. PI_ERR_INVALID for cap out of range;
   PI_ERR_NOMEM. */
pi_status pi_stats_enable_masks(pi_stats *st, int64_t cap);

/* The masked tokens of a unit: mask_tokens, or for a mixture's unit the
   visits it had up to mask_tokens; 0 without masks. */
int64_t pi_stats_unit_mask_tokens(const pi_stats *st, int64_t unit);

/* Count layer's n_ff logits z by whether act marks the neuron active (the
   stats' threshold), and as selected those that reach thr (the predictor's
   threshold for the unit). Needs pi_stats_enable_hist. */
void pi_stats_observe_logits(pi_stats *st, int64_t layer, const float *z, const float *act, float thr);

/* The group histograms (predhist.h) of the logits counted so far, groups
   by pi_stats_order's ranks (a loaded file's are st->ghist).
   PI_ERR_NOT_FOUND when no logits were counted by neuron (a mixture, or
   pi_stats_enable_hist not called); PI_ERR_NOMEM. out is the caller's. */
pi_status pi_stats_group_hist(const pi_stats *st, pi_pred_ghist *out);

/* Per layer, the largest threshold (a bin edge) whose recall is at least
   min_recall on the histograms: thr[l], and what it gives, recall[l],
   precision[l] and the share of neurons selected per token sel[l] (any of
   the outputs may be NULL). PI_ERR_NOT_FOUND without histograms,
   PI_ERR_INVALID for min_recall outside (0, 1]. */
pi_status pi_stats_thresholds(const pi_stats *st, double min_recall, float *thr, double *recall, double *precision,
                              double *sel);

/* A mixture's tokens routed to each unit (PI_KEY_STATS_UNIT_TOKENS, from
   seen[]); nothing for a dense model. */
pi_status pi_stats_set_units(const pi_stats *st, pi_gguf_writer *w);

/* The histograms as metadata (PI_KEY_STATS_PRED_HIST and _RANGE, and the
   group histograms' keys where there are any); nothing when there are none. */
pi_status pi_stats_set_hist(const pi_stats *st, pi_gguf_writer *w);

/* Write the statistics as a GGUF file (format above). PI_ERR_UNSUPPORTED
   when more than PI_STATS_MAX_TOKENS tokens were counted; PI_ERR_IO (or
   PI_ERR_NOT_FOUND for a missing directory). The file reaches path only when
   complete: on failure a previous file there is untouched. */
pi_status pi_stats_save(const pi_stats *st, const char *path);

/* Read the histograms into st (shaped already: n_layer) when g has them: a
   count of n_layer * 2 * B with B in [2, PI_PRED_HIST_MAX_BINS], finite
   counts >= 0, a finite range with a width > 0. PI_OK and nothing read when
   g has none; PI_ERR_FORMAT naming the key otherwise. */
pi_status pi_stats_get_hist(pi_stats *st, const pi_gguf *g, const char *path);

/* The temporal shares as metadata (PI_KEY_STATS_REUSE and _TOKENS), for the
   stats file and the files that carry the statistics on (convert --reorder);
   nothing when none were measured. */
pi_status pi_stats_set_reuse(const pi_stats *st, pi_gguf_writer *w);

/* Read them back into st (shaped already) when g has them; PI_ERR_FORMAT for
   a wrong count or shares outside [0, 1] or falling with k. */
pi_status pi_stats_get_reuse(pi_stats *st, const pi_gguf *g, const char *path);

/* Read statistics saved by pi_stats_save, checking every key, tensor type
   and shape and that no count exceeds the token count. PI_ERR_FORMAT (or
   PI_ERR_NOT_FOUND for a missing key, tensor or file) with a message naming
   the path and the field at fault. */
pi_status pi_stats_load(const char *path, pi_stats **out);

/* The same from an open GGUF (path names it in messages). */
pi_status pi_stats_from_gguf(const pi_gguf *g, const char *path, pi_stats **out);

/* Fraction of all activations of the layer that its k most active neurons
   account for: the hit rate of a hot set of k neurons. Non-decreasing in k,
   0 for k <= 0, 1 for k >= n_ff (and 1 for every k when the layer never
   activated anything). Allocates nothing. */
double pi_stats_coverage(const pi_stats *st, int64_t layer, int64_t k);

/* The smallest k with pi_stats_coverage(st, layer, k) >= frac. */
int64_t pi_stats_neurons_for(const pi_stats *st, int64_t layer, double frac);

/* Mean fraction of the layer's neurons active per token (0 when no tokens). */
double pi_stats_mean_active(const pi_stats *st, int64_t layer);

/* Neurons of the layer that never activated. */
int64_t pi_stats_never_active(const pi_stats *st, int64_t layer);

/* The share of the layer's active neurons that were also active in one of
   the k previous tokens (1 <= k <= PI_STATS_REUSE_K); -1 when no token was
   counted (or the file predates temporal statistics). */
double pi_stats_reuse(const pi_stats *st, int64_t layer, int k);

/* What pi_stats_reuse would be if tokens activated neurons independently
   with the measured frequencies p_i: sum p_i (1 - (1 - p_i)^k) / sum p_i
   (the skew alone makes it exceed the mean active fraction). -1 without
   tokens. */
double pi_stats_reuse_independent(const pi_stats *st, int64_t layer, int k);

/* perm[0..n_ff) = the layer's neuron indices by count, most active first;
   equal counts in index order, so the permutation is deterministic. */
void pi_stats_order(const pi_stats *st, int64_t layer, int32_t *perm);

/* pi_stats_order with neurons that fire together placed side by side: each
   neuron is linked to those among its `window` neighbours on either side in
   frequency order with which it shares the most of the masked tokens
   (Jaccard: tokens where both fired over tokens where either did; only
   pairs that fire together more often than independent neurons would),
   the links taken greedily from the strongest into chains (no neuron has
   more than two), and the chains laid out by their mean count, most active
   first, each from its more active end. Neurons move among neighbours of
   like frequency, so a prefix stays (almost) the hottest neurons.
   PI_STATS_COACT_AUTO: n_ff / 32 neighbours, at most PI_STATS_COACT_WINDOW
   (wider windows save more reads but move neurons across a hot prefix's
   boundary: on the 256-neuron experts of moe-relu-stories window 16 read
   12% more cold neurons at 12M than window 8). Without masks (or window 0)
   it is pi_stats_order. Deterministic; PI_ERR_NOMEM. */
pi_status pi_stats_order_coact(const pi_stats *st, int64_t layer, int64_t window, int32_t *perm);

#endif
