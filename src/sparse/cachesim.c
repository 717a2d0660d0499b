/*
 * cachesim.c — activation traces and their replay through the neuron cache.
 */
#include "cachesim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

pi_status pi_trace_create(int64_t n_layer, int64_t n_ff, int64_t cap, float threshold, pi_trace **out) {
    *out = NULL;
    if (n_layer <= 0 || n_ff <= 0 || cap <= 0)
        return pi_error(PI_ERR_INVALID, "trace: bad shape (%lld layers, %lld neurons, %lld tokens)", (long long)n_layer,
                        (long long)n_ff, (long long)cap);
    pi_trace *t = calloc(1, sizeof *t);
    if (!t) return pi_error(PI_ERR_NOMEM, "trace: out of memory");
    t->n_layer = n_layer, t->n_ff = n_ff, t->cap = cap, t->threshold = threshold;
    t->row_bytes = (size_t)(n_ff + 7) / 8;
    const size_t bytes = (size_t)cap * (size_t)n_layer * t->row_bytes;
    t->bits = calloc(bytes, 1);
    t->seen = calloc((size_t)n_layer, sizeof *t->seen);
    if (!t->bits || !t->seen) {
        pi_trace_free(t);
        return pi_error(PI_ERR_NOMEM, "trace: cannot allocate %.1f MiB for %lld tokens", (double)bytes / (1 << 20),
                        (long long)cap);
    }
    *out = t;
    return PI_OK;
}

void pi_trace_free(pi_trace *t) {
    if (!t) return;
    free(t->bits);
    free(t->seen);
    free(t);
}

void pi_trace_observe(void *ctx, int64_t layer, int64_t pos, const float *ffn_in, const float *act) {
    (void)pos, (void)ffn_in;
    pi_trace *t = ctx;
    PI_ASSERT(layer >= 0 && layer < t->n_layer);
    const int64_t tok = t->seen[layer]++;
    if (tok >= t->cap) return;
    uint8_t *row = t->bits + ((size_t)tok * (size_t)t->n_layer + (size_t)layer) * t->row_bytes;
    for (int64_t i = 0; i < t->n_ff; i++)
        if (fabsf(act[i]) > t->threshold) row[i >> 3] |= (uint8_t)(1u << (i & 7));
    if (layer == t->n_layer - 1) t->n_tok = tok + 1;
}

pi_status pi_cachesim_run(const pi_trace *t, const pi_stats *st, double hot_frac, int64_t slots, pi_ncache_policy p,
                          double warmup, pi_cachesim_result *out) {
    memset(out, 0, sizeof *out);
    if (st->n_layer != t->n_layer || st->n_ff != t->n_ff)
        return pi_error(PI_ERR_INVALID, "cache replay: the statistics and the trace differ in shape");
    const int64_t L = t->n_layer, F = t->n_ff;
    const int64_t hot = (int64_t)(hot_frac * (double)F);
    uint8_t *is_hot = calloc((size_t)(L * F), 1);
    int32_t *perm = malloc((size_t)F * sizeof *perm);
    pi_ncache *c = NULL;
    pi_status s = PI_OK;
    if (!is_hot || !perm) s = pi_error(PI_ERR_NOMEM, "cache replay: out of memory");
    if (!s) s = pi_ncache_create(L, F, 64, slots, 64, &c);
    if (s) goto done;
    pi_ncache_set_policy(c, p);
    for (int64_t l = 0; l < L; l++) {
        pi_stats_order(st, l, perm);
        for (int64_t k = 0; k < hot && k < F; k++) is_hot[l * F + perm[k]] = 1;
    }
    const int64_t first = (int64_t)(warmup * (double)t->n_tok);
    uint64_t hits = 0, lookups = 0, refused = 0, misses = 0;
    for (int64_t tok = 0; tok < t->n_tok; tok++) {
        const bool counted = tok >= first;
        for (int64_t l = 0; l < L; l++) {
            const uint8_t *row = t->bits + ((size_t)tok * (size_t)L + (size_t)l) * t->row_bytes;
            for (int64_t i = 0; i < F; i++) {
                if (!(row[i >> 3] >> (i & 7) & 1) || is_hot[l * F + i]) continue;
                const bool hit = pi_ncache_get(c, l, i) >= 0;
                const bool stored = hit || pi_ncache_alloc(c, l, i) >= 0;
                if (!counted) continue;
                lookups++;
                hits += hit;
                misses += !hit;
                refused += !stored;
            }
        }
        pi_ncache_next_epoch(c);
    }
    const int64_t n = t->n_tok - first;
    out->hit_rate = lookups ? (double)hits / (double)lookups : 0.0;
    out->cold_per_tok = n > 0 ? (double)lookups / (double)n : 0.0;
    out->refused = misses ? (double)refused / (double)misses : 0.0;
done:
    pi_ncache_free(c);
    free(is_hot);
    free(perm);
    return s;
}
