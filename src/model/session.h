/*
 * session.h — pi_state, the run state of one sequence (llama2.c's RunState):
 * KV cache, scratch buffers, the position reached. The dense forward pass
 * (DESIGN.md §1) lives here. The public pi_session (include/pinfer.h) wraps
 * one.
 *
 * A state is used by one thread at a time (it drives its own thread pool);
 * several states may share one pi_lm. Every buffer is sized at creation
 * from the hyperparameters and n_ctx: decoding allocates nothing.
 */
#ifndef PI_MODEL_SESSION_H
#define PI_MODEL_SESSION_H

#include "base/pool.h"
#include "model.h"

/* Called once per token and dense FFN layer with the FFN input (after
   ffn_norm, n_embd floats) and the FFN hidden activation act(gate)*up
   (n_ff floats), in token order, on the thread driving the session. Used by
   the profiler and predictor training; MoE layers are not reported. */
typedef void (*pi_ffn_observer)(void *ctx, int64_t layer, int64_t pos, const float *ffn_in, const float *act);

/* How decode computes the FFN (prefill always takes the dense path). */
typedef enum pi_ffn_mode {
    PI_FFN_DENSE = 0,  /* every neuron */
    PI_FFN_SPARSE = 1, /* the hot prefix plus the neurons the predictor selects */
    PI_FFN_ORACLE = 2, /* exactly the active neurons (gates computed densely): for tests */
} pi_ffn_mode;

/* Per-layer counters of the sparse FFN, summed over decoded tokens. */
typedef struct pi_sparse_stats {
    uint64_t tokens;     /* tokens decoded by the sparse path (per layer) */
    uint64_t predicted;  /* neurons selected (hot prefix + predicted cold) */
    uint64_t computed;   /* neurons whose gate row was read */
    uint64_t active;     /* neurons with a non-zero activation */
    uint64_t bytes;      /* weight bytes read by the FFN and the predictor */
    /* with pi_state_set_sparse_check on: the exact active set, for recall */
    uint64_t oracle_active; /* neurons truly active */
    uint64_t missed;        /* truly active but not selected (recall = 1 - missed / oracle_active) */
} pi_sparse_stats;

/* Weight types of the three parts of an FFN neuron. */
typedef struct pi_ffn_types {
    pi_type gate, up, down;
} pi_ffn_types;

#define PI_MAX_BATCH 64 /* tokens evaluated together; longer prompts go in chunks */

typedef struct pi_state {
    const pi_lm *m;
    const pi_kernels *k;
    pi_pool *pool;         /* owned */
    int64_t n_ctx;         /* positions the KV cache holds */
    int64_t n_past;        /* positions already in the cache */
    /* KV cache, F32: (n_layer, n_ctx, n_head_kv * head_dim) each */
    float *k_cache, *v_cache;
    /* activations of the tokens of one batch, row b for token b */
    float *x;              /* (PI_MAX_BATCH, n_embd) residual stream */
    float *xb;             /* (PI_MAX_BATCH, xb_dim) normed input / attention output */
    float *xb2;            /* (PI_MAX_BATCH, n_embd) */
    float *q;              /* (PI_MAX_BATCH, n_head * head_dim) */
    float *att;            /* (n_head, n_ctx) attention scores */
    float *hb, *hb2;       /* (PI_MAX_BATCH, n_ff) FFN gate / up */
    float *logits;         /* (n_vocab) of the last token */
    float *rope_inv_freq;  /* (n_rot / 2) */
    int64_t xb_dim;        /* max(n_embd, n_head * head_dim) */
    pi_block_q8_0 *xq;     /* (PI_MAX_BATCH, xq_blocks): Q8_0 copies of the current matmul inputs */
    int64_t xq_blocks;     /* blocks per row of xq */
    const float *xq_src;   /* which float rows xq holds, so each input is quantized once */
    int64_t xq_nb;
    /* sparse FFN */
    pi_ffn_mode ffn_mode;
    int64_t hot;           /* neurons in each layer's hot prefix (computed densely) */
    int32_t *sp_idx;       /* (n_ff) neurons to compute / with non-zero activation */
    float *sp_val;         /* (max(n_ff, rank)) their activations; the predictor's hidden layer before */
    float *sp_pred;        /* (n_ff) predictor logits */
    const uint8_t **sp_row; /* (3 * n_ff) gate, up and down_t rows of each list entry */
    pi_ffn_types sp_types; /* of the current layer */
    bool sp_check;         /* also compute the exact active set, for recall in sp_stats */
    pi_sparse_stats *sp_stats; /* (n_layer) */
    pi_block_q8_0 *sp_xq;  /* (n_embd / 32) Q8_0 form of the sparse FFN's input */
    pi_ffn_observer observer;
    void *observer_ctx;
    int64_t cur_layer, cur_pos0; /* where the forward pass is, for the observer */
    /* MoE scratch */
    float *router;         /* (n_expert) */
    float *moe_out;        /* (2, n_embd): the mix, and one expert's output */
    float *reduce_scratch; /* (64, n_embd): partial sums of the down_t reduction */
    float *stream_acc;     /* (2, PI_MAX_BATCH, n_embd): prompt FFN streamed from flash: chunk partials, sums */
    struct pi_offload *off; /* FFN read from flash under a memory budget, or NULL */
} pi_state;

/* A session with a KV cache of n_ctx positions (n_ctx <= 0: the model's
   training context) and n_threads threads (<= 0: one per CPU). */
pi_status pi_state_create(const pi_lm *m, int64_t n_ctx, int n_threads, pi_state **out);
void pi_state_free(pi_state *s); /* accepts NULL */

/* Install (or with fn NULL, remove) the FFN observer. */
void pi_state_set_observer(pi_state *s, pi_ffn_observer fn, void *ctx);

/* Bytes of every buffer a session allocates (KV cache included), and of
   its KV cache alone: what a memory budget must hold for it. */
uint64_t pi_state_bytes(const pi_lm *m, int64_t n_ctx);
uint64_t pi_state_kv_bytes(const pi_lm *m, int64_t n_ctx);

/* Read the FFN from flash through off (model/offload.h), which must come
   from loading this session's model; the session does not own it. Decode
   steps then fail with PI_ERR_IO (and stop) when a read fails. */
pi_status pi_state_set_offload(pi_state *s, struct pi_offload *off);

/* Choose how decode computes the FFN. SPARSE needs a model with predictors;
   SPARSE and ORACLE need a dense ReLU or dReLU model whose layers all have an
   ffn_down_t (call pi_lm_make_down_t first); PI_ERR_INVALID otherwise.
   hot: neurons [0, hot) of every layer are always computed as one dense
   cluster (after reordering by activation frequency they are the hottest). */
pi_status pi_state_set_ffn_mode(pi_state *s, pi_ffn_mode mode, int64_t hot);

/* Sparse mode: also compute every gate to measure the predictor's recall
   (sp_stats oracle_active, missed). Costs a dense gate pass per layer; the
   output does not change. */
void pi_state_set_sparse_check(pi_state *s, bool on);

/* Forget the conversation (positions restart at 0). */
void pi_state_reset(pi_state *s);

/* Run n tokens through the model at positions n_past.. and advance n_past.
   Afterwards pi_state_logits() holds the logits of the last token.
   PI_ERR_INVALID when the tokens would not fit in the context or an id is
   outside the vocabulary (nothing is run then). */
pi_status pi_state_decode(pi_state *s, const int32_t *tokens, int64_t n);

/* Like pi_state_decode, and also writes the logits of every token to
   logits (n rows of n_vocab), e.g. for perplexity. */
pi_status pi_state_decode_all(pi_state *s, const int32_t *tokens, int64_t n, float *logits);

/* Logits (n_vocab) of the last token decoded; borrowed until the next call. */
const float *pi_state_logits(const pi_state *s);

#endif
