/*
 * offload.h — running a bundle file under a memory budget (DESIGN.md §2–4):
 * the state a budget holds, prepared at load. The FFN that reads through it
 * at each step is ffn_offload.h.
 *
 * The fixed region (attention, norms, predictors, output head) is read into
 * memory; each layer's FFN stays on flash as neuron bundles. The first
 * hot[l] bundles of layer l (the most frequently active neurons, after
 * reordering) are resident: one sequential read at load. The others pass
 * through a neuron cache (store/cache.h) filled by asynchronous O_DIRECT
 * reads (store/io.h). The token embedding is read row by row from flash.
 * One accountant (store/budget.h) charges every resident byte; a budget that
 * cannot hold the fixed region, the KV cache, the scratch and the smallest
 * workable cache is refused with the minimum in the message.
 *
 * A mixture of experts is held per FFN unit (model.h: one expert of one
 * layer): every table below indexed by layer (hot prefixes, cache tags,
 * file offsets, n_layer itself) is indexed by unit, so each expert has its
 * own resident prefix and shares the one neuron cache (by default a file
 * with per-expert activation counts gives each expert the prefix its
 * counts earn: routing popularity times neuron frequency, the model's most
 * frequent neurons resident; without counts every expert gets the same
 * length). Decoding routes a
 * token and runs each chosen expert's neurons as a dense layer's; prompts
 * stream each expert that some token of the batch chose. The next layer's
 * lookahead is for dense layers only.
 *
 * Which neurons a token computes does not depend on the budget (that is the
 * session's selection: predictor plus its hot prefix); the budget only moves
 * rows between memory and flash, so the output is the same at every budget.
 */
#ifndef PI_SPARSE_OFFLOAD_H
#define PI_SPARSE_OFFLOAD_H

#include "base/pool.h"
#include "gguf/bundle.h"
#include "model/model.h"
#include "store/budget.h"
#include "store/cache.h"
#include "store/io.h"

typedef struct pi_offload_opts {
    uint64_t mem_budget;     /* bytes, > 0 */
    int64_t n_ctx;           /* KV cache positions the session will use (charged) */
    int n_threads;           /* for the scratch estimate */
    pi_io_opts io;           /* backend, queue depth, fault injection */
    const int64_t *hot;      /* (n_layer) resident bundles per layer, or NULL: the default split */
    int64_t cold_slots;      /* neuron cache slots, or 0: the default split */
    uint64_t cold_cache_bytes; /* or the neuron cache's bytes (when cold_slots is 0); 0: default */
    int max_merge;           /* bundles per read at most (0: 16) */
    pi_ncache_policy policy; /* the neuron cache's replacement policy */
    bool lookahead;          /* while a layer computes, read the next layer's likely misses */
    size_t head_piece;       /* with the output head on flash: bytes per read at most (0: a streaming
                                buffer's) */
    int64_t head_rows;       /* with the output head on flash: its first head_rows rows stay resident
                                (charged to the fixed region, a plan's choice), the rest is read
                                every token; 0: none */
} pi_offload_opts;

/* Counters, summed over decoded tokens (all layers). */
typedef struct pi_offload_stats {
    uint64_t tokens;
    uint64_t resident;       /* selected neurons found in the hot region */
    uint64_t hits, misses;   /* selected neurons found / not found in the neuron cache */
    uint64_t reads;          /* reads issued */
    uint64_t merged;         /* of them, reads covering more than one bundle */
    uint64_t bytes;          /* bytes read from flash (FFN bundles and embedding rows) */
    uint64_t waves;          /* layer steps that had to be split because the cache was too small */
    uint64_t head_uses, head_reads, head_bytes, head_ns; /* the output head on flash: its products, reads,
                                                 bytes and time (prompts' included; not in reads or bytes;
                                                 the time less its resident rows' product) */
    uint64_t io_wait_ns;     /* the decoding thread blocked on reads */
    uint64_t io_busy_ns;     /* from issuing a layer's reads to computing the last of them: the
                                part of it not spent waiting (busy - wait) is I/O hidden by compute */
    uint64_t ffn_ns;         /* wall time in the FFN of decoded tokens */
    uint64_t prefill_bytes;  /* bytes streamed for prompt batches (dense FFN) */
    uint64_t checked;        /* bundles read whose scales were checked: each one's first read only */
    /* lookahead: neurons read for the next layer while this one computed */
    uint64_t ahead_neurons;  /* read ahead */
    uint64_t ahead_start;    /* of them, the first layer's, read when a token starts */
    uint64_t ahead_start_used; /* of those, selected by the first layer */
    uint64_t ahead_used;     /* of them, selected by the next layer (also counted in misses) */
    uint64_t ahead_reads;    /* reads issued ahead (also counted in reads) */
    /* a mixture: the next layer's expert guessed from this layer's residual */
    uint64_t router_guesses; /* guesses made */
    uint64_t router_hits;    /* of them, the guessed expert was among those the router chose */
} pi_offload_stats;

/* Bundles read into cache slots in one go, neighbours merged into one read
   of at most max_merge bundles (a step's misses, or a lookahead). */
typedef struct pi_read_batch {
    int64_t layer;           /* whose neurons; a lookahead set: -1 when not in use */
    int64_t n, runs, done;   /* bundles, reads, reads completed */
    int64_t *slot;           /* (n_ff) cache slot of each bundle */
    int32_t *neuron;         /* (n_ff) its neuron; neighbours merge only when ascending by one */
    int32_t *run_of;         /* (n_ff) the read that brings bundle k */
    uint8_t *run_done;       /* (n_ff) */
    int64_t *run_first;      /* (n_ff) first bundle of each read */
    int32_t *run_len;        /* (n_ff) bundles in each read */
    pi_io_req *reqs;         /* (n_ff) */
    struct iovec *iov;       /* (n_ff) */
} pi_read_batch;

typedef struct pi_offload {
    char *path;
    pi_io *io;
    pi_ncache *cache;
    pi_budget budget;
    int64_t n_layer, n_ff, n_embd;
    int64_t *hot;            /* (n_layer) resident bundles */
    pi_weight *hot_w;        /* (n_layer * 3) resident rows: gate, up, down_t views */
    uint8_t *hot_arena;
    size_t hot_bytes;
    uint8_t *fixed_arena;
    size_t fixed_bytes;
    int64_t *bundle_off;     /* (n_layer) file offset of bundle 0 */
    char refusal[512];       /* a malformed bundle was read: what was wrong ("" while none) */
    uint64_t *checked;       /* (n_layer * n_ff bits) bundles whose scales passed the check: the file's
                                bytes do not change, so a bundle read again is not checked again */
    size_t stride;           /* bytes per bundle on flash and per cache slot */
    pi_bundle_parts *parts;  /* (n_layer) gate, up, down_t inside a unit's bundles (its layer's types) */
    int max_merge;
    /* the token embedding, read from flash */
    bool embd_on_flash;
    int64_t embd_off;
    /* the output head on flash (pi_budget_head_on_flash): read every token
       through the two streaming buffers by its own I/O handle (its reads
       are not the FFN's: the I/O floor and the achieved read rate stay the
       bundles'); m->output.data is NULL then */
    bool head_on_flash;
    int64_t head_off;
    pi_io *head_io;
    size_t head_piece;       /* pi_offload_opts.head_piece */
    uint8_t *head_res;       /* the head's first head_res_rows rows, resident (pi_offload_opts.head_rows) */
    int64_t head_res_rows;
    size_t head_res_bytes;
    uint8_t *embd_buf;       /* aligned bounce buffer for one row */
    size_t embd_buf_bytes;
    /* what streams while the neuron cache is idle reads through two
       buffers it lends (pi_offload_lend), so the budget holds them once: a
       prompt batch's FFN, a layer at a time, summed in stream_acc (lent
       too), and a head on flash (the buffers only). NULL while not lent. */
    uint8_t *stream_buf[2];
    int64_t stream_rows;     /* bundles per buffer at most (the session's FFN rows, hb_cols) */
    int64_t piece_rows;      /* bundles per buffer as lent: stream_rows, or fewer where the cache is small */
    float *stream_acc;       /* (2, PI_MAX_BATCH, n_embd): the streamed down projection's chunk partials
                                and sums */
    int64_t acc_slots;       /* cache slots stream_acc takes when lent */
    float *moe_out;          /* a mixture: (n_expert_used, PI_MAX_BATCH, n_embd), each token's routed
                                experts' outputs (charged as the session's scratch) */
    /* per-step scratch */
    int64_t *miss;           /* (n_ff) list entries waiting for a read */
    int64_t *ready;          /* (n_ff) list entries ready to compute */
    pi_read_batch rd;        /* the step's own reads: bundle m is list entry miss[m] */
    uint64_t *tags;          /* (n_ff) */
    /* lookahead (DESIGN.md §4): the next layer's predictor evaluated on this
       layer's residual normed with the next layer's FFN norm (consecutive
       layers' inputs are close: Deja Vu), its likely misses read into cache
       slots while this layer computes. The slots stay pinned until the next
       layer has used them; a neuron it selects whose read is still in
       flight is computed when that read completes. Two sets, by layer
       parity: one for the layer computing, one for the next. */
    bool lookahead;
    float *la_x, *la_u, *la_z;   /* (n_embd), (largest predictor rank), (n_ff) */
    pi_read_batch la[2];
    int64_t *pend;               /* (n_ff) list entries waiting for a lookahead read */
    int32_t *pend_run;           /* (n_ff) which */
    uint64_t la_gap_from;        /* a lookahead was in flight when the last layer's own reads ended */
    int la_turn;                 /* the set the current step may find its reads in; the other is the
                                    next step's */
    int64_t la_guess;            /* a mixture: the expert the next layer's router was guessed to rank
                                    first (its set is in flight), or -1 */
    /* the first layer's lookahead, from the token's embedding (offload_token_start): kept while
       at least half the neurons it reads are then selected (pi_offload_start_wanted) */
    bool la_start;               /* the current set is the token start's (until the first step ends) */
    uint64_t la_start_read, la_start_used; /* the window's neurons read and of them selected */
    uint64_t la_start_paused;    /* tokens left without it */
    pi_offload_stats st;
    pi_pool *pool;               /* the pool of the session whose step runs (set as each step starts):
                                    parked before every wait for reads (pi_pool_park) */
} pi_offload;

/* Point stream_buf (and with sums, stream_acc) into the neuron cache's
   last slots, whatever they held forgotten: pieces of stream_rows bundles,
   or fewer where the cache is small (piece_rows); and give them back. No
   read may be in flight into the cache. */
void pi_offload_lend(pi_offload *o, bool sums);
void pi_offload_take_back(pi_offload *o);

/* Refuse a bundle of unit u (neuron `neuron`) read from flash whose parts
   hold a NaN or infinite scale: PI_ERR_FORMAT naming the bundle, part and
   type (kernels/validate.h), kept in o->refusal: the decoding steps after
   it give the same refusal. Every bundle read is checked. */
pi_status pi_offload_check_bundle(pi_offload *o, int64_t u, int64_t neuron, const uint8_t *bundle);

/* What a lookahead reads for: layer il's expert x (0: a dense layer),
   predicted from the normed input in (n_embd floats). */
typedef struct pi_la_target {
    int64_t il, x;
    const float *in;
} pi_la_target;

/* What a budget must hold for m (a bundle file loaded with
   PI_LOAD_FFN_ON_FLASH) at n_ctx: the figures pi_offload_load charges.
   PI_ERR_INVALID when m is not a bundle file. */
pi_status pi_offload_measure(pi_lm *m, int64_t n_ctx, int max_merge, size_t align, pi_budget_needs *out);

/* Load a bundle file (pinfer convert --bundle) under o->mem_budget: *model
   is the model (FFN views point into the file mapping and are not read),
   *out the offload state to attach to a session (pi_state_set_offload).
   PI_ERR_NOMEM when the budget is too small (the message says the minimum),
   PI_ERR_INVALID for a file without bundles or with packed ones. */
pi_status pi_offload_load(const char *path, const pi_offload_opts *o, pi_lm **model, pi_offload **out);
void pi_offload_free(pi_offload *off); /* accepts NULL; frees the state, not the model */

#endif
