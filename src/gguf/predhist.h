/*
 * predhist.h — the predictors' logit histograms as stored in a GGUF file
 * (pinfer.stats.pred_hist / pred_range, written by `pinfer profile` of a
 * model with predictors and carried on by convert), and the per-layer
 * thresholds they give for a recall target. Kept below sparse/ and plan/
 * so that the statistics and the planner read and use them the same way.
 *
 * Layout: per layer, B counts of inactive neurons by logit bin, then B
 * counts of active ones; bin b holds logits in [lo + b w, lo + (b + 1) w),
 * the first and last bins also everything below and above.
 */
#ifndef PI_GGUF_PREDHIST_H
#define PI_GGUF_PREDHIST_H

#include "base/status.h"
#include "gguf/gguf.h"

#include <stdint.h>

#define PI_PRED_HIST_MAX_BINS 65536

typedef struct pi_pred_hist {
    int64_t n_layer, bins;
    float lo, w;   /* the first bin's lower edge, the bins' width */
    double *h;     /* (n_layer * 2 * bins) */
} pi_pred_hist;

/* Read g's histograms for n_layer layers into out (out->h owned, NULL and
   PI_OK when g has none): a count of n_layer * 2 * B with B in [2,
   PI_PRED_HIST_MAX_BINS], finite counts >= 0, a finite range with a width
   > 0; else PI_ERR_FORMAT naming the key (path names the file). */
pi_status pi_pred_hist_read(const pi_gguf *g, const char *path, int64_t n_layer, pi_pred_hist *out);

/* Per layer, the largest threshold (a bin edge) whose recall is at least
   min_recall on the histograms: thr[l], and what it gives, recall[l],
   precision[l] and the share of neurons selected per token sel[l] (any of
   the outputs may be NULL). PI_ERR_INVALID for min_recall outside (0, 1]. */
pi_status pi_pred_hist_thresholds(const pi_pred_hist *ph, double min_recall, float *thr, double *recall,
                                  double *precision, double *sel);

/*
 * The same histograms for groups of neurons in hotness order
 * (pinfer.stats.pred_ghist, _glo, _groups, _gwidth): a plan keeps a prefix
 * of each layer's neurons resident, and a false positive among them costs a
 * gate row where one among the cold neurons costs a read, so the planner
 * gives the two parts thresholds of their own; it needs each part's logits.
 * Group g of a layer of F neurons holds ranks [edge(g), edge(g + 1)) of the
 * frequency order (pi_pred_ghist_edge: narrow groups first, where small
 * budgets put their prefixes); per layer l and group g, B counts of inactive
 * neurons by logit bin, then B of active ones, bin b holding [lo[l] + b w,
 * lo[l] + (b + 1) w), the first and last bins also everything below and
 * above. The bins span a window around the threshold the profile ran with:
 * thresholds off the window select everything or nothing of a part.
 */
#define PI_PRED_GHIST_GROUPS 32
#define PI_PRED_GHIST_BINS 64       /* bins per group by default: the window below at 1/16 */
#define PI_PRED_GHIST_BELOW 3.0f    /* the window: from this much below the profiled threshold */
#define PI_PRED_GHIST_W (1.0f / 16.0f)
#define PI_PRED_GHIST_MAX_GROUPS 4096
#define PI_PRED_GHIST_MAX_BINS 1024

typedef struct pi_pred_ghist {
    int64_t n_layer, groups, bins;
    float w;
    float *lo;    /* (n_layer) */
    double *h;    /* (n_layer, groups, 2, bins) */
} pi_pred_ghist;

/* The first rank of group g (0 <= g <= groups; edge(groups) = n_ff):
   n_ff (g / groups)^2, rounded. */
int64_t pi_pred_ghist_edge(int64_t n_ff, int64_t groups, int64_t g);

/* Read g's group histograms for n_layer layers (out->h NULL and PI_OK when
   it has none); PI_ERR_FORMAT naming the key for malformed ones. */
pi_status pi_pred_ghist_read(const pi_gguf *g, const char *path, int64_t n_layer, pi_pred_ghist *out);

/* Write them as metadata. */
pi_status pi_pred_ghist_write(const pi_pred_ghist *gh, pi_gguf_writer *w);
void pi_pred_ghist_free(pi_pred_ghist *gh);

/* Thresholds for a layer whose first `hot` neurons (of n_ff) are resident
   and the rest cold: the pair whose recall over the layer reaches
   min_recall at the least c_hot (per resident neuron selected) plus c_cold
   (per cold one) per token; thresholds are bin edges, -FLT_MAX where a part
   is selected whole. sel_hot, sel_cold: neurons selected per token in each
   part; act: active neurons per token. A group that the prefix cuts is
   taken as split in proportion. */
typedef struct pi_pred_pair {
    float thr_hot, thr_cold;
    double recall, sel_hot, sel_cold, act;
} pi_pred_pair;
void pi_pred_ghist_pair(const pi_pred_ghist *gh, int64_t layer, int64_t n_ff, int64_t hot, double min_recall,
                        double c_hot, double c_cold, pi_pred_pair *out);

#endif
