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

#endif
