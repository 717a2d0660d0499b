/*
 * predhist.c — the predictors' logit histograms (predhist.h).
 */
#include "predhist.h"

#include "gguf/names.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

pi_status pi_pred_hist_read(const pi_gguf *g, const char *path, int64_t n_layer, pi_pred_hist *out) {
    memset(out, 0, sizeof *out);
    const pi_gguf_kv *kv, *rk;
    pi_status s = pi_gguf_get_arr(g, PI_KEY_STATS_PRED_HIST, PI_GGUF_FLOAT32, &kv);
    if (s == PI_ERR_NOT_FOUND) return PI_OK;
    if (s) return pi_error(PI_ERR_FORMAT, "%s: '%s' is not an f32 array", path, PI_KEY_STATS_PRED_HIST);
    if ((s = pi_gguf_get_arr(g, PI_KEY_STATS_PRED_RANGE, PI_GGUF_FLOAT32, &rk)) || rk->arr_n != 2)
        return pi_error(PI_ERR_FORMAT, "%s: '%s' without '%s' as two f32", path, PI_KEY_STATS_PRED_HIST,
                        PI_KEY_STATS_PRED_RANGE);
    const uint64_t per = 2 * (uint64_t)n_layer;
    if (!per || kv->arr_n % per || kv->arr_n / per < 2 || kv->arr_n / per > PI_PRED_HIST_MAX_BINS)
        return pi_error(PI_ERR_FORMAT, "%s: '%s' has %llu values, not 2 x %lld layers x 2..%d bins", path,
                        PI_KEY_STATS_PRED_HIST, (unsigned long long)kv->arr_n, (long long)n_layer,
                        PI_PRED_HIST_MAX_BINS);
    float range[2];
    memcpy(range, rk->arr_data, sizeof range);
    if (!isfinite(range[0]) || !isfinite(range[1]) || !(range[1] > 0.0f))
        return pi_error(PI_ERR_FORMAT, "%s: '%s' = (%g, %g) is not a finite start and a width > 0", path,
                        PI_KEY_STATS_PRED_RANGE, (double)range[0], (double)range[1]);
    double *h = malloc((size_t)kv->arr_n * sizeof *h);
    if (!h) return pi_error(PI_ERR_NOMEM, "%s: out of memory", path);
    for (uint64_t i = 0; i < kv->arr_n; i++) {
        float v;
        memcpy(&v, (const uint8_t *)kv->arr_data + i * 4, 4);
        if (!(v >= 0.0f) || isinf(v)) {
            free(h);
            return pi_error(PI_ERR_FORMAT, "%s: '%s' value %llu is %g, not a count", path, PI_KEY_STATS_PRED_HIST,
                            (unsigned long long)i, (double)v);
        }
        h[i] = v;
    }
    *out = (pi_pred_hist){n_layer, (int64_t)(kv->arr_n / per), range[0], range[1], h};
    return PI_OK;
}

pi_status pi_pred_hist_thresholds(const pi_pred_hist *ph, double min_recall, float *thr, double *recall,
                                  double *precision, double *sel) {
    if (!(min_recall > 0.0 && min_recall <= 1.0))
        return pi_error(PI_ERR_INVALID, "recall target %g is not in (0, 1]", min_recall);
    const int64_t B = ph->bins;
    for (int64_t l = 0; l < ph->n_layer; l++) {
        const double *off = ph->h + l * 2 * B, *on = off + B;
        double tot_on = 0.0, tot = 0.0;
        for (int64_t b = 0; b < B; b++) tot_on += on[b], tot += on[b] + off[b];
        /* from the top: the first edge whose bins above hold min_recall of the active ones */
        double cum_on = 0.0, cum = 0.0;
        int64_t j = B - 1;
        for (; j > 0; j--) {
            cum_on += on[j];
            cum += on[j] + off[j];
            if (cum_on >= min_recall * tot_on && tot_on > 0.0) break;
        }
        if (j == 0) cum_on += on[0], cum += on[0] + off[0];
        if (thr) thr[l] = j == 0 ? -FLT_MAX : ph->lo + (float)j * ph->w;
        if (recall) recall[l] = tot_on > 0.0 ? cum_on / tot_on : 1.0;
        if (precision) precision[l] = cum > 0.0 ? cum_on / cum : 1.0;
        if (sel) sel[l] = tot > 0.0 ? cum / tot : 0.0;
    }
    return PI_OK;
}
