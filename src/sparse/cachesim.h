/*
 * cachesim.h — replaying a model's activations through the neuron cache, to
 * choose its replacement policy by measurement (`profile --cache-sim`).
 *
 * A trace holds, per token and layer, the set of active neurons (a bitset),
 * recorded by an FFN observer as `profile` runs its tokens. The replay sends
 * every token's active neurons outside each layer's hot set (the most
 * frequent neurons, resident as the engine keeps them) through a pi_ncache
 * of the given size and policy, one epoch per token as the engine pins them,
 * and counts hits after a warm-up.
 */
#ifndef PI_SPARSE_CACHESIM_H
#define PI_SPARSE_CACHESIM_H

#include "sparse/stats.h"
#include "store/cache.h"

typedef struct pi_trace {
    int64_t n_layer, n_ff, cap;   /* tokens it can hold */
    int64_t n_tok;                /* tokens complete (recorded by every layer) */
    size_t row_bytes;             /* (n_ff + 7) / 8 */
    float threshold;              /* active: |act| > threshold */
    uint8_t *bits;                /* (cap, n_layer, row_bytes) */
    int64_t *seen;                /* (n_layer) tokens recorded per layer */
} pi_trace;

/* A trace of at most cap tokens. PI_ERR_NOMEM names the size. */
pi_status pi_trace_create(int64_t n_layer, int64_t n_ff, int64_t cap, float threshold, pi_trace **out);
void pi_trace_free(pi_trace *t); /* accepts NULL */

/* A pi_ffn_observer (ctx: the trace): records act's active neurons; tokens
   beyond cap are ignored. */
void pi_trace_observe(void *ctx, int64_t layer, int64_t pos, const float *ffn_in, const float *act);

typedef struct pi_cachesim_result {
    double hit_rate;     /* hits / lookups of cold neurons, after the warm-up */
    double cold_per_tok; /* cold neurons looked up per token (all layers) */
    double refused;      /* share of misses that found every slot pinned (the cache is too small for one token) */
} pi_cachesim_result;

/* Replay t through a cache of `slots` slots under policy p, the hot set of
   each layer being its hot_frac most frequent neurons by st's counts (st
   shaped as t); the first warmup share of the tokens fills the cache
   uncounted. */
pi_status pi_cachesim_run(const pi_trace *t, const pi_stats *st, double hot_frac, int64_t slots, pi_ncache_policy p,
                          double warmup, pi_cachesim_result *out);

#endif
