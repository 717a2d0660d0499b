/*
 * stats.c — counting active FFN neurons, saving and loading the counts, and
 * the queries the reorder step and the planner ask of them.
 *
 * Invariants: counts is one block of n_layer * n_ff int64 (layer-major);
 * tokens only grows while observing; a loaded pi_stats satisfies
 * 0 <= count <= tokens <= PI_STATS_MAX_TOKENS for every neuron. The queries
 * allocate nothing, so they cannot fail and need no status: the top-k sum is
 * found by searching for the k-th largest count instead of sorting a copy.
 */
#include "stats.h"

#include "gguf/names.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LAYERS 65536 /* far above any model; bounds what a file may ask us to allocate */

/*
 * Why 0.01 for SiLU. A SiLU FFN has no exact zeros, so "active" has to mean
 * "large enough to matter": a threshold below which leaving a neuron out
 * changes the FFN output by little. Measured on stories260K (the SiLU model
 * among the fixtures; 2048 validation tokens), leaving out |act| <= t gives
 *     t       0.001  0.003  0.01   0.03   0.1
 *   active    .985   .963   .901   .771   .486
 *   output err .0002 .0011  .0057  .026   .119   (relative L2 of W_down act)
 * so 0.01 is the largest round value that keeps the error under 1%: it
 * counts the near-zero tail as inactive without calling real activations
 * noise. Scales differ between models, so this is a profiling default, not
 * an accuracy promise (the predictor and the planner decide what sparse
 * inference may skip); --threshold sets another.
 */
float pi_stats_default_threshold(pi_ffn_act act) { return act == PI_ACT_SILU ? PI_STATS_SILU_THRESHOLD : 0.0f; }

pi_status pi_stats_create(int64_t n_layer, int64_t n_ff, float threshold, const char *model, pi_stats **out) {
    *out = NULL;
    if (n_layer < 1 || n_layer > MAX_LAYERS)
        return pi_error(PI_ERR_INVALID, "stats: n_layer %lld is not in 1..%d", (long long)n_layer, MAX_LAYERS);
    if (n_ff < 1 || n_ff > INT32_MAX)
        return pi_error(PI_ERR_INVALID, "stats: n_ff %lld is not in 1..%d", (long long)n_ff, INT32_MAX);
    if (!(threshold >= 0.0f) || isinf(threshold))
        return pi_error(PI_ERR_INVALID, "stats: threshold %g is not a finite number >= 0", (double)threshold);
    if ((uint64_t)n_ff > SIZE_MAX / sizeof(int64_t) / (uint64_t)n_layer)
        return pi_error(PI_ERR_NOMEM, "stats: %lld x %lld counts do not fit in memory", (long long)n_layer,
                        (long long)n_ff);
    pi_stats *st = calloc(1, sizeof *st);
    if (!st) return pi_error(PI_ERR_NOMEM, "stats: out of memory");
    st->n_layer = n_layer;
    st->n_ff = n_ff;
    st->threshold = threshold;
    st->model = strdup(model ? model : "");
    st->counts = calloc((size_t)(n_layer * n_ff), sizeof *st->counts);
    st->last = malloc((size_t)(n_layer * n_ff) * sizeof *st->last);
    st->reuse = calloc((size_t)(n_layer * PI_STATS_REUSE_K), sizeof *st->reuse);
    st->reuse_base = calloc((size_t)n_layer, sizeof *st->reuse_base);
    st->seen = calloc((size_t)n_layer, sizeof *st->seen);
    st->seq0 = calloc((size_t)n_layer, sizeof *st->seq0);
    st->last_pos = malloc((size_t)n_layer * sizeof *st->last_pos);
    if (!st->model || !st->counts || !st->last || !st->reuse || !st->reuse_base || !st->seen || !st->seq0 ||
        !st->last_pos) {
        pi_stats_free(st);
        return pi_error(PI_ERR_NOMEM, "stats: cannot allocate counts for %lld layers of %lld neurons",
                        (long long)n_layer, (long long)n_ff);
    }
    for (int64_t i = 0; i < n_layer * n_ff; i++) st->last[i] = INT64_MIN;
    for (int64_t l = 0; l < n_layer; l++) st->last_pos[l] = INT64_MAX;
    *out = st;
    return PI_OK;
}

pi_status pi_stats_for_model(const pi_lm *m, float threshold, pi_stats **out) {
    pi_status s = pi_stats_create(pi_ffn_units(&m->hp), m->hp.n_ff, threshold, m->path, out);
    if (!s && m->hp.n_expert) {
        (*out)->n_expert = m->hp.n_expert;
        (*out)->n_expert_used = m->hp.n_expert_used < PI_MOE_MAX_USED ? m->hp.n_expert_used : PI_MOE_MAX_USED;
    }
    return s;
}

void pi_stats_free(pi_stats *st) {
    if (!st) return;
    free(st->model);
    free(st->counts);
    free(st->last);
    free(st->reuse);
    free(st->reuse_base);
    free(st->seen);
    free(st->seq0);
    free(st->last_pos);
    free(st->hist);
    free(st->sel);
    free(st->nhist);
    free(st->nhist_lo);
    pi_pred_ghist_free(&st->ghist);
    free(st->masks);
    free(st);
}

pi_status pi_stats_enable_hist(pi_stats *st) {
    if (st->hist && st->sel) return PI_OK;
    if (!st->hist && !(st->hist = calloc((size_t)(st->n_layer * 2 * PI_STATS_HIST_BINS), sizeof *st->hist)))
        return pi_error(PI_ERR_NOMEM, "stats: out of memory for the predictor histograms");
    if (!st->sel && !(st->sel = calloc((size_t)(st->n_layer * st->n_ff), sizeof *st->sel)))
        return pi_error(PI_ERR_NOMEM, "stats: out of memory for the selection counts");
    st->hist_bins = PI_STATS_HIST_BINS;
    st->hist_lo = PI_STATS_HIST_LO;
    st->hist_w = PI_STATS_HIST_W;
    /* per neuron, for the group histograms: optional (512 bytes a neuron) */
    const size_t nn = (size_t)(st->n_layer * st->n_ff) * 2 * PI_PRED_GHIST_BINS;
    if (!st->n_expert && !st->nhist && (st->nhist = calloc(nn, sizeof *st->nhist)) &&
        (st->nhist_lo = malloc((size_t)st->n_layer * sizeof *st->nhist_lo))) {
        for (int64_t l = 0; l < st->n_layer; l++) st->nhist_lo[l] = NAN;
    } else if (!st->nhist_lo) {
        free(st->nhist);
        st->nhist = NULL;
    }
    return PI_OK;
}

void pi_stats_observe_logits(pi_stats *st, int64_t layer, const float *z, const float *act, float thr) {
    PI_ASSERT(st->hist && st->sel && layer >= 0 && layer < st->n_layer);
    const int64_t B = st->hist_bins;
    double *h = st->hist + layer * 2 * B;
    int64_t *sel = st->sel + layer * st->n_ff;
    const float inv = 1.0f / st->hist_w;
    for (int64_t i = 0; i < st->n_ff; i++) {
        const float v = (z[i] - st->hist_lo) * inv;
        const int64_t b = !(v >= 0.0f) ? 0 : v >= (float)(B - 1) ? B - 1 : (int64_t)v; /* NaN: the first bin */
        h[(fabsf(act[i]) > st->threshold) * B + b] += 1.0;
        sel[i] += z[i] >= thr;
    }
    if (!st->nhist) return;
    /* the window around the layer's threshold (one per layer while profiling) */
    if (isnan(st->nhist_lo[layer])) st->nhist_lo[layer] = (isfinite(thr) && fabsf(thr) < 1e6f ? thr : 0.0f) - PI_PRED_GHIST_BELOW;
    const float lo = st->nhist_lo[layer], ginv = 1.0f / PI_PRED_GHIST_W;
    const int64_t GB = PI_PRED_GHIST_BINS;
    uint32_t *nh = st->nhist + (size_t)layer * (size_t)st->n_ff * 2 * GB;
    for (int64_t i = 0; i < st->n_ff; i++) {
        const float v = (z[i] - lo) * ginv;
        const int64_t b = !(v >= 0.0f) ? 0 : v >= (float)(GB - 1) ? GB - 1 : (int64_t)v;
        nh[(i * 2 + (fabsf(act[i]) > st->threshold)) * GB + b]++;
    }
}

pi_status pi_stats_group_hist(const pi_stats *st, pi_pred_ghist *out) {
    memset(out, 0, sizeof *out);
    const int64_t L = st->n_layer, F = st->n_ff, G = PI_PRED_GHIST_GROUPS, GB = PI_PRED_GHIST_BINS;
    if (!st->nhist) return pi_error(PI_ERR_NOT_FOUND, "the statistics counted no logits by neuron");
    *out = (pi_pred_ghist){L, G, GB, PI_PRED_GHIST_W, malloc((size_t)L * sizeof(float)),
                           calloc((size_t)(L * G * 2 * GB), sizeof(double))};
    int32_t *perm = malloc((size_t)F * sizeof *perm);
    if (!out->lo || !out->h || !perm) {
        free(perm);
        pi_pred_ghist_free(out);
        return pi_error(PI_ERR_NOMEM, "stats: out of memory");
    }
    for (int64_t l = 0; l < L; l++) {
        out->lo[l] = isnan(st->nhist_lo[l]) ? -PI_PRED_GHIST_BELOW : st->nhist_lo[l];
        pi_stats_order(st, l, perm);
        for (int64_t g = 0; g < G; g++) {
            double *gh = out->h + (l * G + g) * 2 * GB;
            const int64_t e1 = pi_pred_ghist_edge(F, G, g + 1);
            for (int64_t r = pi_pred_ghist_edge(F, G, g); r < e1; r++) {
                const uint32_t *nh = st->nhist + ((size_t)(l * F) + (size_t)perm[r]) * 2 * GB;
                for (int64_t k = 0; k < 2 * GB; k++) gh[k] += nh[k];
            }
        }
    }
    free(perm);
    return PI_OK;
}

pi_status pi_stats_thresholds(const pi_stats *st, double min_recall, float *thr, double *recall, double *precision,
                              double *sel) {
    if (!st->hist) return pi_error(PI_ERR_NOT_FOUND, "the statistics have no predictor logit histograms (profile a "
                                   "model with predictors)");
    const pi_pred_hist ph = {st->n_layer, st->hist_bins, st->hist_lo, st->hist_w, st->hist};
    return pi_pred_hist_thresholds(&ph, min_recall, thr, recall, precision, sel);
}

pi_status pi_stats_set_hist(const pi_stats *st, pi_gguf_writer *w) {
    if (!st->hist) return PI_OK;
    const int64_t n = st->n_layer * 2 * st->hist_bins;
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) return pi_error(PI_ERR_NOMEM, "stats: out of memory");
    for (int64_t i = 0; i < n; i++) v[i] = (float)st->hist[i];
    const float range[2] = {st->hist_lo, st->hist_w};
    pi_status s = pi_gguf_set_arr(w, PI_KEY_STATS_PRED_HIST, PI_GGUF_FLOAT32, v, (uint64_t)n);
    if (!s) s = pi_gguf_set_arr(w, PI_KEY_STATS_PRED_RANGE, PI_GGUF_FLOAT32, range, 2);
    free(v);
    if (s) return s;
    if (!st->nhist) return st->ghist.h ? pi_pred_ghist_write(&st->ghist, w) : PI_OK; /* loaded: as they are */
    pi_pred_ghist gh;
    if (!(s = pi_stats_group_hist(st, &gh))) s = pi_pred_ghist_write(&gh, w);
    pi_pred_ghist_free(&gh);
    return s;
}

pi_status pi_stats_get_hist(pi_stats *st, const pi_gguf *g, const char *path) {
    pi_pred_hist ph;
    pi_status s = pi_pred_hist_read(g, path, st->n_layer, &ph);
    if (s || !ph.h) return s;
    free(st->hist);
    st->hist = ph.h;
    st->hist_bins = ph.bins;
    st->hist_lo = ph.lo;
    st->hist_w = ph.w;
    pi_pred_ghist_free(&st->ghist);
    return pi_pred_ghist_read(g, path, st->n_layer, &st->ghist);
}

int64_t pi_stats_unit_mask_tokens(const pi_stats *st, int64_t unit) {
    PI_ASSERT(unit >= 0 && unit < st->n_layer);
    if (!st->masks) return 0;
    if (!st->n_expert) return st->mask_tokens;
    return st->seen[unit] < st->mask_tokens ? st->seen[unit] : st->mask_tokens;
}

pi_status pi_stats_enable_masks(pi_stats *st, int64_t cap) {
    if (cap < 1 || cap > PI_STATS_MAX_MASK_TOKENS)
        return pi_error(PI_ERR_INVALID, "stats: %lld mask tokens is not in 1..%d", (long long)cap,
                        PI_STATS_MAX_MASK_TOKENS);
    const size_t n = (size_t)st->n_layer * (size_t)cap * (size_t)pi_stats_mask_row(st->n_ff);
    uint8_t *m = calloc(n ? n : 1, 1);
    if (!m) return pi_error(PI_ERR_NOMEM, "stats: cannot allocate %.1f MiB of activation masks", (double)n / (1 << 20));
    free(st->masks);
    st->masks = m;
    st->mask_cap = cap;
    st->mask_tokens = 0;
    return PI_OK;
}

void pi_stats_observe(void *ctx, int64_t layer, int64_t pos, const float *ffn_in, const float *act) {
    (void)ffn_in;
    pi_stats *st = ctx;
    PI_ASSERT(layer >= 0 && layer < st->n_layer);
    const int64_t F = st->n_ff;
    int64_t *c = st->counts + layer * F;
    const float thr = st->threshold;
    /* branch-free so the compiler vectorises it; NaN compares false: inactive */
    for (int64_t i = 0; i < F; i++) c[i] += fabsf(act[i]) > thr;
    if (!st->n_expert && layer == 0) st->tokens++;
    if (st->n_expert && layer < st->n_expert) /* every token visits n_expert_used of layer 0's experts */
        st->tokens = ++st->calls0 / st->n_expert_used;

    /* temporal reuse: how far back each active neuron was last active */
    const int64_t t = st->seen[layer]++;
    if (pos <= st->last_pos[layer]) st->seq0[layer] = t; /* a new sequence */
    st->last_pos[layer] = pos;
    if (st->masks && t < st->mask_cap) {
        uint8_t *row = st->masks + ((size_t)layer * (size_t)st->mask_cap + (size_t)t) * (size_t)pi_stats_mask_row(F);
        for (int64_t i = 0; i < F; i++)
            if (fabsf(act[i]) > thr) row[i >> 3] |= (uint8_t)(1u << (i & 7));
        if (t + 1 > st->mask_tokens) st->mask_tokens = t + 1; /* a mixture's units: the most visited one */
    }
    const bool counted = t - st->seq0[layer] >= PI_STATS_REUSE_K;
    const int64_t seq0 = st->seq0[layer];
    int64_t *last = st->last + layer * F, near[PI_STATS_REUSE_K + 1] = {0}, active = 0;
    for (int64_t i = 0; i < F; i++) {
        if (!(fabsf(act[i]) > thr)) continue;
        active++;
        const int64_t d = last[i] >= seq0 ? t - last[i] : INT64_MAX;
        if (d <= PI_STATS_REUSE_K) near[d]++;
        last[i] = t;
    }
    if (!counted) return;
    double *r = st->reuse + layer * PI_STATS_REUSE_K;
    for (int k = 1, sum = 0; k <= PI_STATS_REUSE_K; k++) {
        sum += (int)near[k];
        r[k - 1] += sum;
    }
    st->reuse_base[layer] += (double)active;
    if (layer == 0) st->reuse_tokens++;
}

/* ---- saving and loading ---- */

pi_status pi_stats_set_units(const pi_stats *st, pi_gguf_writer *w) {
    if (!st->n_expert) return PI_OK;
    float *v = malloc((size_t)st->n_layer * sizeof *v);
    if (!v) return pi_error(PI_ERR_NOMEM, "stats: out of memory");
    for (int64_t l = 0; l < st->n_layer; l++) v[l] = (float)st->seen[l];
    pi_status s = pi_gguf_set_arr(w, PI_KEY_STATS_UNIT_TOKENS, PI_GGUF_FLOAT32, v, (uint64_t)st->n_layer);
    free(v);
    return s;
}

pi_status pi_stats_set_reuse(const pi_stats *st, pi_gguf_writer *w) {
    if (!st->reuse_tokens) return PI_OK;
    const int64_t n = st->n_layer * PI_STATS_REUSE_K;
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) return pi_error(PI_ERR_NOMEM, "stats: out of memory");
    for (int64_t l = 0; l < st->n_layer; l++)
        for (int k = 1; k <= PI_STATS_REUSE_K; k++) {
            double r = pi_stats_reuse(st, l, k);
            v[l * PI_STATS_REUSE_K + k - 1] = r < 0.0 ? 0.0f : (float)r;
        }
    pi_status s = pi_gguf_set_arr(w, PI_KEY_STATS_REUSE, PI_GGUF_FLOAT32, v, (uint64_t)n);
    free(v);
    if (!s) s = pi_gguf_set_u64(w, PI_KEY_STATS_REUSE_TOKENS, (uint64_t)st->reuse_tokens);
    return s;
}

pi_status pi_stats_get_reuse(pi_stats *st, const pi_gguf *g, const char *path) {
    const pi_gguf_kv *kv;
    int64_t tokens;
    pi_status s = pi_gguf_get_arr(g, PI_KEY_STATS_REUSE, PI_GGUF_FLOAT32, &kv);
    if (s == PI_ERR_NOT_FOUND) return PI_OK; /* written before temporal statistics */
    if (s) return pi_error_prefix(s, "%s", path);
    if (kv->arr_n != (uint64_t)(st->n_layer * PI_STATS_REUSE_K))
        return pi_error(PI_ERR_FORMAT, "%s: %s has %llu values, expected %lld (%lld layers x %d)", path,
                        PI_KEY_STATS_REUSE, (unsigned long long)kv->arr_n, (long long)(st->n_layer * PI_STATS_REUSE_K),
                        (long long)st->n_layer, PI_STATS_REUSE_K);
    if ((s = pi_gguf_get_i64_range(g, PI_KEY_STATS_REUSE_TOKENS, 1, INT64_MAX, &tokens)))
        return pi_error_prefix(s, "%s", path);
    for (int64_t l = 0; l < st->n_layer; l++) {
        float prev = 0.0f;
        for (int k = 0; k < PI_STATS_REUSE_K; k++) {
            float v;
            memcpy(&v, (const uint8_t *)kv->arr_data + (size_t)(l * PI_STATS_REUSE_K + k) * 4, 4);
            if (!(v >= prev && v <= 1.0f))
                return pi_error(PI_ERR_FORMAT, "%s: %s: layer %lld, k = %d: %g is not in [%g, 1] (the shares grow "
                                "with k)", path, PI_KEY_STATS_REUSE, (long long)l, k + 1, (double)v, (double)prev);
            st->reuse[l * PI_STATS_REUSE_K + k] = v;
            prev = v;
        }
        st->reuse_base[l] = 1.0;
    }
    st->reuse_tokens = tokens;
    return PI_OK;
}

pi_status pi_stats_save(const pi_stats *st, const char *path) {
    if (st->tokens > PI_STATS_MAX_TOKENS)
        return pi_error(PI_ERR_UNSUPPORTED, "%s: %lld tokens profiled; a stats file counts at most %d (I32 counts)",
                        path, (long long)st->tokens, PI_STATS_MAX_TOKENS);
    for (int k = 0; k < 2; k++) {
        const int64_t *c = k ? st->sel : st->counts;
        for (int64_t i = 0; c && i < st->n_layer * st->n_ff; i++)
            if (c[i] < 0 || c[i] > PI_STATS_MAX_TOKENS)
                return pi_error(PI_ERR_UNSUPPORTED, "%s: layer %lld neuron %lld has %s count %lld, outside 0..%d", path,
                                (long long)(i / st->n_ff), (long long)(i % st->n_ff), k ? "selection" : "activation",
                                (long long)c[i], PI_STATS_MAX_TOKENS);
    }
    int32_t *row = malloc((size_t)st->n_ff * sizeof *row);
    if (!row) return pi_error(PI_ERR_NOMEM, "%s: out of memory", path);
    pi_gguf_writer *w = NULL;
    pi_status s = pi_gguf_writer_create(path, false, &w);
    if (!s) s = pi_gguf_set_str(w, PI_KEY_GENERAL_ARCHITECTURE, PI_STATS_ARCH);
    if (!s) s = pi_gguf_set_u64(w, PI_KEY_STATS_TOKENS, (uint64_t)st->tokens);
    if (!s) s = pi_gguf_set_u32(w, PI_KEY_STATS_N_LAYER, (uint32_t)st->n_layer);
    if (!s) s = pi_gguf_set_u32(w, PI_KEY_STATS_N_FF, (uint32_t)st->n_ff);
    if (!s && st->n_expert) s = pi_gguf_set_u32(w, PI_KEY_STATS_N_EXPERT, (uint32_t)st->n_expert);
    if (!s && st->n_expert) s = pi_gguf_set_u32(w, PI_KEY_STATS_N_EXPERT_USED, (uint32_t)st->n_expert_used);
    if (!s) s = pi_stats_set_units(st, w);
    if (!s) s = pi_gguf_set_f32(w, PI_KEY_STATS_THRESHOLD, st->threshold);
    if (!s) s = pi_gguf_set_str(w, PI_KEY_STATS_MODEL, st->model);
    if (!s) s = pi_stats_set_reuse(st, w);
    if (!s) s = pi_stats_set_hist(st, w);
    const int64_t T = st->masks ? st->mask_tokens : 0, mrow = pi_stats_mask_row(st->n_ff);
    if (!s && T) s = pi_gguf_set_u32(w, PI_KEY_STATS_MASK_TOKENS, (uint32_t)T);
    char name[PI_NAME_MAX];
    const int kinds = st->sel ? 2 : 1; /* activations, then selections */
    for (int k = 0; k < kinds; k++)
        for (int64_t l = 0; !s && l < st->n_layer; l++) {
            snprintf(name, sizeof name, k ? PI_TN_SEL_COUNT : PI_TN_ACT_COUNT, (int)l);
            s = pi_gguf_add_tensor(w, name, PI_TYPE_I32, 1, &st->n_ff);
        }
    for (int64_t l = 0; !s && T && l < st->n_layer; l++) {
        const int64_t ne[2] = {mrow, T};
        snprintf(name, sizeof name, PI_TN_ACT_MASK, (int)l);
        s = pi_gguf_add_tensor(w, name, PI_TYPE_I8, 2, ne);
    }
    if (!s) s = pi_gguf_writer_begin_data(w);
    /* GGUF is little-endian, as are the hosts we build for: int32 as is */
    for (int k = 0; k < kinds; k++)
        for (int64_t l = 0; !s && l < st->n_layer; l++) {
            const int64_t *c = (k ? st->sel : st->counts) + l * st->n_ff;
            for (int64_t i = 0; i < st->n_ff; i++) row[i] = (int32_t)c[i];
            s = pi_gguf_write_data(w, row, (size_t)st->n_ff * sizeof *row);
        }
    for (int64_t l = 0; !s && T && l < st->n_layer; l++) /* a layer's first T rows, contiguous */
        s = pi_gguf_write_data(w, st->masks + (size_t)l * (size_t)st->mask_cap * (size_t)mrow, (size_t)(T * mrow));
    free(row);
    return pi_gguf_writer_finish(w, s);
}

/* An integer key in [lo, hi]; a missing one hints at the wrong kind of file. */
static pi_status get_int(const pi_gguf *g, const char *path, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    pi_status s = pi_gguf_get_i64_range(g, key, lo, hi, out);
    if (s == PI_ERR_NOT_FOUND) return pi_error(s, "%s: missing key '%s' (is this a pinfer stats file?)", path, key);
    return s;
}

/* No per-layer tensor of format fmt for a layer beyond n_layer: such a file
   disagrees with itself. */
static pi_status check_beyond(const pi_gguf *g, const char *path, const char *fmt, int64_t n_layer) {
    for (int64_t i = 0; i < pi_gguf_n_tensors(g); i++) {
        const pi_gguf_tensor *t = pi_gguf_tensor_at(g, i);
        if (pi_tensor_layer(t->name, fmt) >= n_layer)
            return pi_error(PI_ERR_FORMAT, "%s: tensor '%.*s' is beyond %s = %lld", path,
                            (int)(t->name.len < 63 ? t->name.len : 63), t->name.data, PI_KEY_STATS_N_LAYER,
                            (long long)n_layer);
    }
    return PI_OK;
}

/* Every layer's count tensor (selections when sel, else activations: I32
   [n_ff]) is there, and none beyond n_layer. */
static pi_status check_count_tensors(const pi_gguf *g, const char *path, bool sel, int64_t n_layer, int64_t n_ff) {
    const char *fmt = sel ? PI_TN_SEL_COUNT : PI_TN_ACT_COUNT;
    char name[PI_NAME_MAX];
    for (int64_t l = 0; l < n_layer; l++) {
        snprintf(name, sizeof name, sel ? PI_TN_SEL_COUNT : PI_TN_ACT_COUNT, (int)l);
        const pi_gguf_tensor *t = pi_gguf_find_tensor(g, name);
        if (!t)
            return pi_error(PI_ERR_NOT_FOUND, "%s: missing tensor '%s' (%s = %lld)", path, name, PI_KEY_STATS_N_LAYER,
                            (long long)n_layer);
        if (t->type != PI_TYPE_I32)
            return pi_error(PI_ERR_FORMAT, "%s: tensor '%s' has type %s, expected i32", path, name,
                            pi_type_get(t->type) ? pi_type_get(t->type)->name : "unknown");
        if (t->n_dims != 1 || t->ne[0] != n_ff)
            return pi_error(PI_ERR_FORMAT, "%s: tensor '%s' has shape [%lld, %lld], expected [%lld] (%s)", path,
                            name, (long long)t->ne[0], (long long)t->ne[1], (long long)n_ff, PI_KEY_STATS_N_FF);
    }
    return check_beyond(g, path, fmt, n_layer);
}

/* The masks when the file has them: every layer's (unit's) I8 [row, T]
   tensor and none beyond, no bit past n_ff, no neuron set in more tokens
   than its count, and a mixture's unit no row past its visits. */
static pi_status read_masks(pi_stats *st, const pi_gguf *g, const char *path) {
    int64_t T;
    pi_status s = pi_gguf_get_i64_range(g, PI_KEY_STATS_MASK_TOKENS, 1, PI_STATS_MAX_MASK_TOKENS, &T);
    bool any = false;
    for (int64_t i = 0; i < pi_gguf_n_tensors(g); i++) any |= pi_tensor_layer(pi_gguf_tensor_at(g, i)->name, PI_TN_ACT_MASK) >= 0;
    if (s == PI_ERR_NOT_FOUND && !any) return PI_OK;
    if (s == PI_ERR_NOT_FOUND)
        return pi_error(PI_ERR_FORMAT, "%s: activation masks without the key '%s'", path, PI_KEY_STATS_MASK_TOKENS);
    if (s) return pi_error_prefix(s, "%s", path);
    const pi_gguf_kv *ukv;
    if (st->n_expert && pi_gguf_get_arr(g, PI_KEY_STATS_UNIT_TOKENS, PI_GGUF_FLOAT32, &ukv))
        return pi_error(PI_ERR_FORMAT, "%s: a mixture's activation masks without '%s' (each unit's visits)", path,
                        PI_KEY_STATS_UNIT_TOKENS);
    if (T > st->tokens)
        return pi_error(PI_ERR_FORMAT, "%s: %s = %lld exceeds the %lld tokens profiled (%s)", path,
                        PI_KEY_STATS_MASK_TOKENS, (long long)T, (long long)st->tokens, PI_KEY_STATS_TOKENS);
    const int64_t F = st->n_ff, mrow = pi_stats_mask_row(F);
    char name[PI_NAME_MAX];
    for (int64_t l = 0; l < st->n_layer; l++) {
        snprintf(name, sizeof name, PI_TN_ACT_MASK, (int)l);
        const pi_gguf_tensor *t = pi_gguf_find_tensor(g, name);
        if (!t) return pi_error(PI_ERR_NOT_FOUND, "%s: missing tensor '%s' (%s is set)", path, name, PI_KEY_STATS_MASK_TOKENS);
        if (t->type != PI_TYPE_I8 || t->n_dims != 2 || t->ne[0] != mrow || t->ne[1] != T)
            return pi_error(PI_ERR_FORMAT, "%s: tensor '%s' is %s [%lld, %lld], expected i8 [%lld, %lld] (%s, %s)", path,
                            name, pi_type_get(t->type) ? pi_type_get(t->type)->name : "unknown", (long long)t->ne[0],
                            (long long)t->ne[1], (long long)mrow, (long long)T, PI_KEY_STATS_N_FF, PI_KEY_STATS_MASK_TOKENS);
    }
    if ((s = check_beyond(g, path, PI_TN_ACT_MASK, st->n_layer))) return s;
    if ((s = pi_stats_enable_masks(st, T))) return pi_error_prefix(s, "%s", path);
    st->mask_tokens = T;
    int64_t *fired = calloc((size_t)F, sizeof *fired);
    if (!fired) return pi_error(PI_ERR_NOMEM, "%s: out of memory", path);
    for (int64_t l = 0; l < st->n_layer && !s; l++) {
        snprintf(name, sizeof name, PI_TN_ACT_MASK, (int)l);
        uint8_t *dst = st->masks + (size_t)(l * T * mrow);
        memcpy(dst, pi_gguf_find_tensor(g, name)->data, (size_t)(T * mrow));
        memset(fired, 0, (size_t)F * sizeof *fired);
        const int64_t Tu = pi_stats_unit_mask_tokens(st, l); /* a mixture's unit: its visits, the rest zero */
        for (int64_t t = 0; t < T && !s; t++) {
            const uint8_t *row = dst + t * mrow;
            if (F % 8 && row[mrow - 1] >> (F % 8))
                s = pi_error(PI_ERR_FORMAT, "%s: tensor '%s': token %lld sets bits past %s = %lld", path, name,
                             (long long)t, PI_KEY_STATS_N_FF, (long long)F);
            for (int64_t b = 0; t >= Tu && b < mrow && !s; b++)
                if (row[b])
                    s = pi_error(PI_ERR_FORMAT, "%s: tensor '%s': row %lld is past the unit's %lld visits (%s)", path,
                                 name, (long long)t, (long long)Tu, PI_KEY_STATS_UNIT_TOKENS);
            for (int64_t i = 0; i < F; i++) fired[i] += row[i >> 3] >> (i & 7) & 1;
        }
        for (int64_t i = 0; i < F && !s; i++)
            if (fired[i] > st->counts[l * F + i])
                s = pi_error(PI_ERR_FORMAT, "%s: tensor '%s': neuron %lld is active in %lld masked tokens, more than "
                             "its count %lld", path, name, (long long)i, (long long)fired[i],
                             (long long)st->counts[l * F + i]);
    }
    free(fired);
    return s;
}

/* The counts (checked by check_count_tensors) into out, each in 0..tokens. */
static pi_status read_count_tensors(const pi_gguf *g, const char *path, bool sel, int64_t n_layer, int64_t n_ff,
                                    int64_t tokens, int64_t *out) {
    char name[PI_NAME_MAX];
    for (int64_t l = 0; l < n_layer; l++) {
        snprintf(name, sizeof name, sel ? PI_TN_SEL_COUNT : PI_TN_ACT_COUNT, (int)l);
        const uint8_t *p = pi_gguf_find_tensor(g, name)->data;
        int64_t *c = out + l * n_ff;
        for (int64_t i = 0; i < n_ff; i++) {
            int32_t v;
            memcpy(&v, p + i * 4, 4); /* the mapping gives no alignment promise we rely on */
            if (v < 0 || v > tokens)
                return pi_error(PI_ERR_FORMAT, "%s: tensor '%s': neuron %lld has count %d, outside 0..%lld (%s)",
                                path, name, (long long)i, v, (long long)tokens, PI_KEY_STATS_TOKENS);
            c[i] = v;
        }
    }
    return PI_OK;
}

pi_status pi_stats_from_gguf(const pi_gguf *g, const char *path, pi_stats **out) {
    pi_gguf_str arch, model;
    pi_status s = pi_gguf_get_str(g, PI_KEY_GENERAL_ARCHITECTURE, &arch);
    if (s == PI_ERR_NOT_FOUND)
        return pi_error(PI_ERR_FORMAT, "%s: no '%s' key: not a pinfer stats file", path, PI_KEY_GENERAL_ARCHITECTURE);
    if (s) return pi_error_prefix(s, "%s", path);
    if (!pi_gguf_str_eq(arch, PI_STATS_ARCH))
        return pi_error(PI_ERR_FORMAT, "%s: %s is '%.*s', not '%s' (is this a model file?)", path,
                        PI_KEY_GENERAL_ARCHITECTURE, (int)(arch.len > 64 ? 64 : arch.len), arch.data, PI_STATS_ARCH);
    int64_t n_layer, n_ff, tokens;
    float thr;
    if ((s = get_int(g, path, PI_KEY_STATS_N_LAYER, 1, MAX_LAYERS, &n_layer)) ||
        (s = get_int(g, path, PI_KEY_STATS_N_FF, 1, INT32_MAX, &n_ff)) ||
        (s = get_int(g, path, PI_KEY_STATS_TOKENS, 0, PI_STATS_MAX_TOKENS, &tokens)))
        return s;
    int64_t n_expert = 0, n_used = 0;
    if ((s = pi_gguf_get_i64_range(g, PI_KEY_STATS_N_EXPERT, 2, 4096, &n_expert)) && s != PI_ERR_NOT_FOUND)
        return pi_error_prefix(s, "%s", path);
    if (n_expert && (s = get_int(g, path, PI_KEY_STATS_N_EXPERT_USED, 1, n_expert < PI_MOE_MAX_USED ? n_expert : PI_MOE_MAX_USED, &n_used)))
        return s;
    if (n_expert && n_layer % n_expert)
        return pi_error(PI_ERR_FORMAT, "%s: %s = %lld is not a multiple of %s = %lld", path, PI_KEY_STATS_N_LAYER,
                        (long long)n_layer, PI_KEY_STATS_N_EXPERT, (long long)n_expert);
    s = pi_gguf_get_f32(g, PI_KEY_STATS_THRESHOLD, &thr);
    if (s == PI_ERR_NOT_FOUND) return pi_error(s, "%s: missing key '%s'", path, PI_KEY_STATS_THRESHOLD);
    if (s) return pi_error_prefix(s, "%s", path);
    if (!(thr >= 0.0f) || isinf(thr))
        return pi_error(PI_ERR_FORMAT, "%s: %s = %g is not a finite number >= 0", path, PI_KEY_STATS_THRESHOLD,
                        (double)thr);
    s = pi_gguf_get_str(g, PI_KEY_STATS_MODEL, &model);
    if (s == PI_ERR_NOT_FOUND) return pi_error(s, "%s: missing key '%s'", path, PI_KEY_STATS_MODEL);
    if (s) return pi_error_prefix(s, "%s", path);
    if (memchr(model.data, '\0', model.len))
        return pi_error(PI_ERR_FORMAT, "%s: %s contains a NUL byte", path, PI_KEY_STATS_MODEL);

    /* every layer's tensors before allocating anything: the file must justify n_layer * n_ff */
    bool has_sel = false;
    for (int64_t i = 0; i < pi_gguf_n_tensors(g); i++) has_sel |= pi_tensor_layer(pi_gguf_tensor_at(g, i)->name, PI_TN_SEL_COUNT) >= 0;
    if ((s = check_count_tensors(g, path, false, n_layer, n_ff)) ||
        (has_sel && (s = check_count_tensors(g, path, true, n_layer, n_ff))))
        return s;

    char *mname = malloc(model.len + 1);
    if (!mname) return pi_error(PI_ERR_NOMEM, "%s: out of memory", path);
    memcpy(mname, model.data, model.len);
    mname[model.len] = '\0';
    pi_stats *st;
    s = pi_stats_create(n_layer, n_ff, thr, mname, &st);
    free(mname);
    if (s) return pi_error_prefix(s, "%s", path);
    st->tokens = tokens;
    st->n_expert = n_expert;
    st->n_expert_used = n_used;
    const pi_gguf_kv *ukv;
    if (n_expert && !pi_gguf_get_arr(g, PI_KEY_STATS_UNIT_TOKENS, PI_GGUF_FLOAT32, &ukv) && ukv->arr_n == (uint64_t)n_layer)
        for (int64_t l = 0; l < n_layer; l++) {
            float v;
            memcpy(&v, (const uint8_t *)ukv->arr_data + 4 * (size_t)l, 4);
            st->seen[l] = v >= 0.0f && v <= (float)tokens ? (int64_t)v : 0;
        }
    if (has_sel && !(st->sel = malloc((size_t)(n_layer * n_ff) * sizeof *st->sel))) {
        pi_stats_free(st);
        return pi_error(PI_ERR_NOMEM, "%s: out of memory", path);
    }
    if ((s = read_count_tensors(g, path, false, n_layer, n_ff, tokens, st->counts)) ||
        (has_sel && (s = read_count_tensors(g, path, true, n_layer, n_ff, tokens, st->sel))) ||
        (s = pi_stats_get_reuse(st, g, path)) || (s = pi_stats_get_hist(st, g, path)) || (s = read_masks(st, g, path))) {
        pi_stats_free(st);
        return s;
    }
    *out = st;
    return PI_OK;
}

pi_status pi_stats_load(const char *path, pi_stats **out) {
    *out = NULL;
    pi_gguf *g;
    pi_status s = pi_gguf_open(path, &g);
    if (s) return s;
    s = pi_stats_from_gguf(g, path, out);
    pi_gguf_close(g);
    return s;
}

/* ---- queries ---- */

double pi_stats_reuse_independent(const pi_stats *st, int64_t layer, int k) {
    PI_ASSERT(layer >= 0 && layer < st->n_layer && k >= 1);
    if (st->tokens <= 0) return -1.0;
    const int64_t *c = st->counts + layer * st->n_ff;
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < st->n_ff; i++) {
        const double p = (double)c[i] / (double)st->tokens;
        num += p * (1.0 - pow(1.0 - p, k));
        den += p;
    }
    return den > 0.0 ? num / den : 0.0;
}

double pi_stats_reuse(const pi_stats *st, int64_t layer, int k) {
    PI_ASSERT(layer >= 0 && layer < st->n_layer && k >= 1 && k <= PI_STATS_REUSE_K);
    const double base = st->reuse_base[layer];
    if (!st->reuse_tokens) return -1.0;
    return base > 0.0 ? st->reuse[layer * PI_STATS_REUSE_K + k - 1] / base : 0.0;
}

static const int64_t *layer_counts(const pi_stats *st, int64_t layer) {
    PI_ASSERT(layer >= 0 && layer < st->n_layer);
    return st->counts + layer * st->n_ff;
}

double pi_stats_coverage(const pi_stats *st, int64_t layer, int64_t k) {
    const int64_t *c = layer_counts(st, layer), n = st->n_ff;
    int64_t total = 0, mx = 0;
    for (int64_t i = 0; i < n; i++) {
        total += c[i];
        mx = c[i] > mx ? c[i] : mx;
    }
    if (total == 0 || k >= n) return 1.0;
    if (k <= 0) return 0.0;
    /* v = the k-th largest count: the largest v with at least k counts >= v */
    int64_t lo = 0, hi = mx;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2, ge = 0;
        for (int64_t i = 0; i < n; i++) ge += c[i] >= mid;
        if (ge >= k) lo = mid;
        else hi = mid - 1;
    }
    /* the counts above v all belong to the top k; the rest of the k are ties at v */
    int64_t sum = 0, above = 0;
    for (int64_t i = 0; i < n; i++)
        if (c[i] > lo) sum += c[i], above++;
    sum += (k - above) * lo;
    return (double)sum / (double)total;
}

int64_t pi_stats_neurons_for(const pi_stats *st, int64_t layer, double frac) {
    int64_t lo = 0, hi = st->n_ff; /* coverage(hi) = 1 >= any frac <= 1 */
    if (frac > 1.0) return hi;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (pi_stats_coverage(st, layer, mid) >= frac) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

double pi_stats_mean_active(const pi_stats *st, int64_t layer) {
    const int64_t *c = layer_counts(st, layer);
    if (st->tokens == 0) return 0.0;
    int64_t total = 0;
    for (int64_t i = 0; i < st->n_ff; i++) total += c[i];
    return (double)total / ((double)st->tokens * (double)st->n_ff);
}

int64_t pi_stats_never_active(const pi_stats *st, int64_t layer) {
    const int64_t *c = layer_counts(st, layer);
    int64_t n = 0;
    for (int64_t i = 0; i < st->n_ff; i++) n += c[i] == 0;
    return n;
}

/* Neuron a goes after neuron b: fewer activations, or as many and a higher index. */
static int after(const int64_t *c, int32_t a, int32_t b) { return c[a] < c[b] || (c[a] == c[b] && a > b); }

static void sift_down(const int64_t *c, int32_t *h, int64_t root, int64_t n) {
    for (int64_t child; (child = 2 * root + 1) < n; root = child) {
        if (child + 1 < n && after(c, h[child + 1], h[child])) child++;
        if (!after(c, h[child], h[root])) return;
        int32_t t = h[root];
        h[root] = h[child];
        h[child] = t;
    }
}

/* Heap sort: in place, O(n log n) worst case, and the order is total (index
   breaks ties), so an unstable sort still gives one answer. */
void pi_stats_order(const pi_stats *st, int64_t layer, int32_t *perm) {
    const int64_t *c = layer_counts(st, layer), n = st->n_ff;
    for (int64_t i = 0; i < n; i++) perm[i] = (int32_t)i;
    for (int64_t i = n / 2 - 1; i >= 0; i--) sift_down(c, perm, i, n);
    for (int64_t end = n - 1; end > 0; end--) {
        int32_t t = perm[0];
        perm[0] = perm[end];
        perm[end] = t;
        sift_down(c, perm, 0, end);
    }
}

/* ---- co-activation order ---- */

#define COACT_LINKS 8 /* strongest neighbours each neuron proposes a link to */

typedef struct {
    int64_t both, either; /* masked tokens where both fired, where either did: Jaccard both / either */
    int32_t a, b;         /* frequency ranks, a < b */
} coact_link;

/* Stronger link first (exact: cross-multiplied), then by ranks. */
static int link_cmp(const void *pa, const void *pb) {
    const coact_link *x = pa, *y = pb;
    const int64_t l = x->both * y->either, r = y->both * x->either;
    if (l != r) return l > r ? -1 : 1;
    if (x->a != y->a) return x->a < y->a ? -1 : 1;
    return (x->b > y->b) - (x->b < y->b);
}

static int32_t root_of(int32_t *up, int32_t x) {
    while (up[x] != x) x = up[x] = up[up[x]];
    return x;
}

/* The neighbour of cur in its chain other than prev (-1 at an end). */
static int32_t chain_next(const int32_t *adj, int32_t cur, int32_t prev) {
    return adj[2 * cur] != prev ? adj[2 * cur] : adj[2 * cur + 1];
}

typedef struct {
    int64_t sum, len; /* the chain's counts and length: mean sum / len */
    int32_t first;    /* its first rank in the layout, the tie-break */
    int32_t start;    /* the end it is laid out from */
} coact_chain;

static int chain_cmp(const void *pa, const void *pb) {
    const coact_chain *x = pa, *y = pb;
    const int64_t l = x->sum * y->len, r = y->sum * x->len;
    if (l != r) return l > r ? -1 : 1;
    return (x->first > y->first) - (x->first < y->first);
}

/* Two neurons fired together in more of the T masked tokens than
   independent ones would, beyond chance: `both` exceeds its expectation
   a b / T by more than COACT_Z standard deviations (binomial). A link
   between independent neurons merges nothing and moves them off their
   frequency rank. */
#define COACT_Z 3.0
static bool coupled(int64_t both, int64_t a, int64_t b, int64_t T) {
    const double pa = (double)a / (double)T, pb = (double)b / (double)T, e = pa * pb * (double)T;
    const double var = e * (1.0 - pa * pb);
    return (double)both - e > COACT_Z * sqrt(var > 0.0 ? var : 0.0);
}

pi_status pi_stats_order_coact(const pi_stats *st, int64_t layer, int64_t window, int32_t *perm) {
    pi_stats_order(st, layer, perm);
    const int64_t F = st->n_ff, T = pi_stats_unit_mask_tokens(st, layer), W = (T + 63) / 64;
    if (window < 0) window = F / 32 < 1 ? 1 : F / 32 > PI_STATS_COACT_WINDOW ? PI_STATS_COACT_WINDOW : F / 32;
    if (T < 2 || window <= 0 || F < 2) return PI_OK;
    const int64_t *c = layer_counts(st, layer);
    /* by frequency rank r (neuron perm[r]): its tokens as a bit set, their count */
    uint64_t *bits = calloc((size_t)(F * W), sizeof *bits);
    int64_t *pc = calloc((size_t)F, sizeof *pc);
    int32_t *rank = malloc((size_t)F * sizeof *rank), *up = malloc((size_t)F * sizeof *up);
    int32_t *adj = malloc((size_t)(2 * F) * sizeof *adj), *out = malloc((size_t)F * sizeof *out);
    coact_link *links = malloc((size_t)(F * COACT_LINKS) * sizeof *links);
    coact_chain *chains = malloc((size_t)F * sizeof *chains);
    if (!bits || !pc || !rank || !up || !adj || !out || !links || !chains) {
        free(bits), free(pc), free(rank), free(up), free(adj), free(out), free(links), free(chains);
        return pi_error(PI_ERR_NOMEM, "stats: out of memory ordering layer %lld by co-activation", (long long)layer);
    }
    for (int64_t r = 0; r < F; r++) rank[perm[r]] = (int32_t)r;
    const int64_t mrow = pi_stats_mask_row(F);
    for (int64_t t = 0; t < T; t++) {
        const uint8_t *row = st->masks + (size_t)((layer * st->mask_cap + t) * mrow);
        for (int64_t i = 0; i < F; i++)
            if (row[i >> 3] >> (i & 7) & 1) bits[rank[i] * W + t / 64] |= 1ull << (t % 64);
    }
    for (int64_t r = 0; r < F; r++)
        for (int64_t w = 0; w < W; w++) pc[r] += __builtin_popcountll(bits[r * W + w]);

    /* each rank's strongest links among its window (insertion into a short sorted list) */
    int64_t n = 0;
    for (int64_t r = 0; r < F; r++) {
        if (!pc[r]) continue;
        coact_link best[COACT_LINKS];
        int nb = 0;
        const int64_t lo = r - window < 0 ? 0 : r - window, hi = r + window >= F ? F - 1 : r + window;
        for (int64_t q = lo; q <= hi; q++) {
            if (q == r || !pc[q]) continue;
            int64_t both = 0;
            for (int64_t w = 0; w < W; w++) both += __builtin_popcountll(bits[r * W + w] & bits[q * W + w]);
            if (!both || !coupled(both, pc[r], pc[q], T)) continue;
            coact_link x = {both, pc[r] + pc[q] - both, (int32_t)(r < q ? r : q), (int32_t)(r < q ? q : r)};
            int at = nb < COACT_LINKS ? nb++ : COACT_LINKS;
            while (at > 0 && link_cmp(&x, &best[at - 1]) < 0) {
                if (at < COACT_LINKS) best[at] = best[at - 1];
                at--;
            }
            if (at < COACT_LINKS) best[at] = x;
        }
        for (int k = 0; k < nb; k++) links[n++] = best[k];
    }
    qsort(links, (size_t)n, sizeof *links, link_cmp);

    /* greedy chains: a link joins two chain ends of different chains */
    for (int64_t r = 0; r < F; r++) up[r] = (int32_t)r, adj[2 * r] = adj[2 * r + 1] = -1;
    for (int64_t k = 0; k < n; k++) {
        const int32_t a = links[k].a, b = links[k].b;
        if (adj[2 * a + 1] >= 0 || adj[2 * b + 1] >= 0) continue; /* a middle of its chain */
        const int32_t ra = root_of(up, a), rb = root_of(up, b);
        if (ra == rb) continue; /* a duplicate, or a cycle */
        up[ra] = rb;
        adj[2 * a + (adj[2 * a] >= 0)] = b;
        adj[2 * b + (adj[2 * b] >= 0)] = a;
    }
    /* each chain once, from its lower-ranked end; its mean count */
    int64_t nc = 0;
    for (int64_t r = 0; r < F; r++) {
        if (adj[2 * r + 1] >= 0) continue; /* inside a chain */
        /* r is an end (or a single neuron): walk to the other end */
        int32_t prev = -1, cur = (int32_t)r, end = (int32_t)r;
        int64_t sum = 0, len = 0;
        while (cur >= 0) {
            sum += c[perm[cur]], len++, end = cur;
            const int32_t next = chain_next(adj, cur, prev);
            prev = cur, cur = next;
        }
        if (end < r) continue; /* seen from its other end */
        /* laid out from its more active end (the lower rank when tied) */
        const int32_t start = c[perm[end]] > c[perm[r]] ? end : (int32_t)r;
        chains[nc++] = (coact_chain){sum, len, (int32_t)r, start};
    }
    qsort(chains, (size_t)nc, sizeof *chains, chain_cmp);
    int64_t k = 0;
    for (int64_t i = 0; i < nc; i++)
        for (int32_t prev = -1, cur = chains[i].start; cur >= 0;) {
            out[k++] = perm[cur];
            const int32_t next = chain_next(adj, cur, prev);
            prev = cur, cur = next;
        }
    PI_ASSERT(k == F);
    memcpy(perm, out, (size_t)F * sizeof *perm);
    free(bits), free(pc), free(rank), free(up), free(adj), free(out), free(links), free(chains);
    return PI_OK;
}
