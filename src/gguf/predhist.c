/*
 * predhist.c — the predictors' logit histograms (predhist.h).
 */
#include "predhist.h"

#include "gguf/names.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* n f32 values of key kv (an array) into out as doubles, each a count */
static pi_status counts_of(const pi_gguf_kv *kv, const char *path, const char *key, double *out) {
    for (uint64_t i = 0; i < kv->arr_n; i++) {
        float v;
        memcpy(&v, (const uint8_t *)kv->arr_data + i * 4, 4);
        if (!(v >= 0.0f) || isinf(v))
            return pi_error(PI_ERR_FORMAT, "%s: '%s' value %llu is %g, not a count", path, key, (unsigned long long)i,
                            (double)v);
        out[i] = v;
    }
    return PI_OK;
}

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
    if ((s = counts_of(kv, path, PI_KEY_STATS_PRED_HIST, h))) {
        free(h);
        return s;
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

/* ---- by groups of neurons in hotness order ---- */

int64_t pi_pred_ghist_edge(int64_t n_ff, int64_t groups, int64_t g) {
    if (g >= groups) return n_ff;
    const double x = (double)g / (double)groups;
    return (int64_t)((double)n_ff * x * x + 0.5);
}

pi_status pi_pred_ghist_read(const pi_gguf *g, const char *path, int64_t n_layer, pi_pred_ghist *out) {
    memset(out, 0, sizeof *out);
    const pi_gguf_kv *kv, *lk;
    pi_status s = pi_gguf_get_arr(g, PI_KEY_STATS_PRED_GHIST, PI_GGUF_FLOAT32, &kv);
    if (s == PI_ERR_NOT_FOUND) return PI_OK;
    if (s) return pi_error(PI_ERR_FORMAT, "%s: '%s' is not an f32 array", path, PI_KEY_STATS_PRED_GHIST);
    uint32_t groups = 0;
    float w = 0.0f;
    if (pi_gguf_get_u32(g, PI_KEY_STATS_PRED_GROUPS, &groups) || groups < 1 || groups > PI_PRED_GHIST_MAX_GROUPS)
        return pi_error(PI_ERR_FORMAT, "%s: '%s' without '%s' as a u32 in 1..%d", path, PI_KEY_STATS_PRED_GHIST,
                        PI_KEY_STATS_PRED_GROUPS, PI_PRED_GHIST_MAX_GROUPS);
    if (pi_gguf_get_f32(g, PI_KEY_STATS_PRED_GWIDTH, &w) || !isfinite(w) || !(w > 0.0f))
        return pi_error(PI_ERR_FORMAT, "%s: '%s' without '%s' as a finite width > 0", path, PI_KEY_STATS_PRED_GHIST,
                        PI_KEY_STATS_PRED_GWIDTH);
    if (pi_gguf_get_arr(g, PI_KEY_STATS_PRED_GLO, PI_GGUF_FLOAT32, &lk) || lk->arr_n != (uint64_t)n_layer)
        return pi_error(PI_ERR_FORMAT, "%s: '%s' without '%s' as %lld f32", path, PI_KEY_STATS_PRED_GHIST,
                        PI_KEY_STATS_PRED_GLO, (long long)n_layer);
    const uint64_t per = 2 * (uint64_t)n_layer * groups;
    if (!per || kv->arr_n % per || kv->arr_n / per < 2 || kv->arr_n / per > PI_PRED_GHIST_MAX_BINS)
        return pi_error(PI_ERR_FORMAT, "%s: '%s' has %llu values, not 2 x %lld layers x %u groups x 2..%d bins", path,
                        PI_KEY_STATS_PRED_GHIST, (unsigned long long)kv->arr_n, (long long)n_layer, groups,
                        PI_PRED_GHIST_MAX_BINS);
    float *lo = malloc((size_t)n_layer * sizeof *lo);
    double *h = malloc((size_t)kv->arr_n * sizeof *h);
    if (!lo || !h) {
        free(lo), free(h);
        return pi_error(PI_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(lo, lk->arr_data, (size_t)n_layer * sizeof *lo);
    for (int64_t l = 0; l < n_layer && !s; l++)
        if (!isfinite(lo[l]))
            s = pi_error(PI_ERR_FORMAT, "%s: '%s' value %lld is not finite", path, PI_KEY_STATS_PRED_GLO, (long long)l);
    if (!s) s = counts_of(kv, path, PI_KEY_STATS_PRED_GHIST, h);
    if (s) {
        free(lo), free(h);
        return s;
    }
    *out = (pi_pred_ghist){n_layer, groups, (int64_t)(kv->arr_n / per), w, lo, h};
    return PI_OK;
}

pi_status pi_pred_ghist_write(const pi_pred_ghist *gh, pi_gguf_writer *w) {
    const int64_t n = gh->n_layer * gh->groups * 2 * gh->bins;
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) return pi_error(PI_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) v[i] = (float)gh->h[i];
    pi_status s = pi_gguf_set_arr(w, PI_KEY_STATS_PRED_GHIST, PI_GGUF_FLOAT32, v, (uint64_t)n);
    if (!s) s = pi_gguf_set_arr(w, PI_KEY_STATS_PRED_GLO, PI_GGUF_FLOAT32, gh->lo, (uint64_t)gh->n_layer);
    if (!s) s = pi_gguf_set_u32(w, PI_KEY_STATS_PRED_GROUPS, (uint32_t)gh->groups);
    if (!s) s = pi_gguf_set_f32(w, PI_KEY_STATS_PRED_GWIDTH, gh->w);
    free(v);
    return s;
}

void pi_pred_ghist_free(pi_pred_ghist *gh) {
    free(gh->lo);
    free(gh->h);
    memset(gh, 0, sizeof *gh);
}

void pi_pred_ghist_pair(const pi_pred_ghist *gh, int64_t layer, int64_t n_ff, int64_t hot, double min_recall,
                        double c_hot, double c_cold, pi_pred_pair *out) {
    const int64_t B = gh->bins, G = gh->groups;
    /* per part, counts at or above each bin: [0] inactive hot, [1] active hot, [2], [3] the cold part's */
    double sum[4][PI_PRED_GHIST_MAX_BINS + 1];
    memset(sum, 0, sizeof sum);
    for (int64_t g = 0; g < G; g++) {
        const int64_t e0 = pi_pred_ghist_edge(n_ff, G, g), e1 = pi_pred_ghist_edge(n_ff, G, g + 1);
        if (e1 <= e0) continue;
        const double fh = hot >= e1 ? 1.0 : hot <= e0 ? 0.0 : (double)(hot - e0) / (double)(e1 - e0);
        const double *h = gh->h + (layer * G + g) * 2 * B;
        for (int64_t b = 0; b < B; b++)
            for (int a = 0; a < 2; a++) {
                sum[a][b] += fh * h[a * B + b];
                sum[2 + a][b] += (1.0 - fh) * h[a * B + b];
            }
    }
    for (int k = 0; k < 4; k++)
        for (int64_t b = B - 1; b >= 0; b--) sum[k][b] += sum[k][b + 1];
    const double on = sum[1][0] + sum[3][0], all = on + sum[0][0] + sum[2][0];
    const double tokens = all > 0.0 ? all / (double)n_ff : 1.0;
    const double need = min_recall * on * (1.0 - 1e-12);
    /* for each hot threshold the highest cold one that still reaches the
       recall: it falls as the hot one rises (one pass) */
    int64_t best_h = 0, best_c = 0, jc = B - 1;
    double best = INFINITY;
    for (int64_t jh = 0; jh < B; jh++) {
        while (jc > 0 && sum[1][jh] + sum[3][jc] < need) jc--;
        if (sum[1][jh] + sum[3][jc] < need) break; /* not even with every cold neuron */
        const double cost = c_hot * (sum[0][jh] + sum[1][jh]) + c_cold * (sum[2][jc] + sum[3][jc]);
        if (cost < best * (1.0 - 1e-12)) best = cost, best_h = jh, best_c = jc;
    }
    const float lo = gh->lo[layer];
    out->thr_hot = best_h == 0 ? -FLT_MAX : lo + (float)best_h * gh->w;
    out->thr_cold = best_c == 0 ? -FLT_MAX : lo + (float)best_c * gh->w;
    out->recall = on > 0.0 ? (sum[1][best_h] + sum[3][best_c]) / on : 1.0;
    out->sel_hot = (sum[0][best_h] + sum[1][best_h]) / tokens;
    out->sel_cold = (sum[2][best_c] + sum[3][best_c]) / tokens;
    out->act = on / tokens;
}
