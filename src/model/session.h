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
#include "ffn.h"
#include "model.h"

/* Called once per token and FFN unit (model.h: a dense layer, or one
   expert of a layer that the router chose for the token) with the FFN input
   (after ffn_norm, n_embd floats) and the unit's hidden activation
   act(gate)*up (n_ff floats), in token order, on the thread driving the
   state; `layer` is the unit's index. Used by the profiler and predictor
   training. */
typedef void (*pi_ffn_observer)(void *ctx, int64_t layer, int64_t pos, const float *ffn_in, const float *act);

#define PI_MAX_BATCH 128    /* tokens evaluated together at most; longer prompts go in chunks */
#define PI_DEFAULT_BATCH 64 /* a state's batch unless made otherwise (pi_state_create_ex) */

typedef struct pi_state {
    const pi_lm *m;
    const pi_kernels *k;
    pi_pool *pool;         /* owned */
    int64_t n_ctx;         /* positions the KV cache holds */
    int64_t n_past;        /* positions already in the cache */
    int64_t n_batch;       /* tokens evaluated together (B below, <= PI_MAX_BATCH) */
    int64_t hb_cols;       /* row stride of hb / hb2: n_ff, or an installed FFN's piece (ffn.h) */
    /* KV cache, F32: keys (n_layer, n_ctx, n_head_kv * head_dim), values
       transposed (n_layer, n_head_kv * head_dim, n_ctx) */
    float *k_cache, *v_cache;
    /* activations of the tokens of one batch, row b for token b */
    float *x;              /* (B, n_embd) residual stream */
    float *xb;             /* (B, xb_dim) normed input / attention output */
    float *xb2;            /* (B, n_embd) */
    float *q;              /* (B, n_head * head_dim) */
    float *att;            /* (n_head_kv, ATT_TOKENS * group, n_ctx) attention scores */
    float *att_q, *att_o;  /* (n_head_kv, ATT_TOKENS * group, head_dim) queries, outputs */
    float *vtmp;           /* (B, n_head_kv * head_dim) values before they enter the cache */
    float *hb, *hb2;       /* (B, hb_cols) FFN gate / up, and at least n_ff floats */
    float *logits;         /* (n_vocab) of the last token */
    float *rope_inv_freq;  /* (n_rot / 2) */
    int64_t xb_dim;        /* max(n_embd, n_head * head_dim) */
    uint8_t *xq;           /* (B, xq_row): the current matmul inputs in their activation type */
    size_t xq_row;         /* bytes per row of xq: the widest input in the widest activation type */
    const float *xq_src;   /* which float rows xq holds, so each input is quantized once */
    int64_t xq_nb;
    int xq_type;           /* and in which activation type (Q8_0 or Q8_K) */
    pi_ffn_observer observer;
    void *observer_ctx;
    int64_t cur_layer, cur_pos0; /* where the forward pass is, for the observer */
    /* the FFN implementation installed (ffn.h), or NULL: dense, in memory */
    const struct pi_ffn_ops *ffn_ops;
    void *ffn_impl;        /* owned */
    /* MoE scratch */
    float *router;         /* (n_expert) */
    float *moe_out;        /* (2, n_embd): the mix, and one expert's output */
    float *reduce_scratch; /* (PI_DOWN_T_CHUNKS, n_embd): partial sums of the down reductions */
} pi_state;

/* A state with a KV cache of n_ctx positions (n_ctx <= 0: the model's
   training context) and n_threads threads (<= 0: one per CPU). */
pi_status pi_state_create(const pi_lm *m, int64_t n_ctx, int n_threads, pi_state **out);

/* The same with a batch of n_batch tokens (1..PI_MAX_BATCH) and hb / hb2
   rows of hb_cols floats (n_ff for the dense FFN in memory; an installed
   FFN that works in pieces may ask for fewer, e.g. the FFN streamed from
   flash for prompts, sparse/ffn_offload.h). pi_state_create is
   PI_DEFAULT_BATCH and n_ff. */
pi_status pi_state_create_ex(const pi_lm *m, int64_t n_ctx, int n_threads, int64_t n_batch, int64_t hb_cols,
                             pi_state **out);
void pi_state_free(pi_state *s); /* accepts NULL */

/* Install (or with fn NULL, remove) the FFN observer. */
void pi_state_set_observer(pi_state *s, pi_ffn_observer fn, void *ctx);

/* Bytes of every buffer a state allocates (KV cache included), and of
   its KV cache alone: what a memory budget must hold for it. */
uint64_t pi_state_bytes(const pi_lm *m, int64_t n_ctx);
uint64_t pi_state_bytes_ex(const pi_lm *m, int64_t n_ctx, int64_t n_batch, int64_t hb_cols);
uint64_t pi_state_kv_bytes(const pi_lm *m, int64_t n_ctx);

/* Install an FFN implementation (ffn.h), taking ownership of impl; ops
   NULL goes back to the dense FFN. The one held before is freed. */
void pi_state_set_ffn(pi_state *s, const struct pi_ffn_ops *ops, void *impl);

/* The implementation installed (NULL: dense), and its impl. */
const struct pi_ffn_ops *pi_state_ffn(const pi_state *s, void **impl);

/* Forget the conversation (positions restart at 0). */
void pi_state_reset(pi_state *s);

/* Keep the first n positions of the KV cache and forget the rest
   (0 <= n <= n_past; PI_ERR_INVALID otherwise). */
pi_status pi_state_truncate(pi_state *s, int64_t n);

/* Remove positions [p0, p0 + n) from the KV cache: later positions move
   down by n and their keys are rotated back by n positions (RoPE is a
   rotation, so this equals computing them at their new positions up to
   rounding), as llama.cpp's context shift does. PI_ERR_INVALID unless
   0 <= p0, 0 <= n and p0 + n <= n_past. */
pi_status pi_state_discard(pi_state *s, int64_t p0, int64_t n);

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

/* For FFN implementations (ffn.h): Y[b][0..rows) = W[row0 .. row0+rows) X[b]
   for nb rows of X (x_stride floats apart) into rows of Y (y_stride apart),
   split across the state's pool by rows; quantized weights take the Q8_0
   form of X, made once per distinct input. */
void pi_state_matmul(pi_state *s, const pi_weight *w, int64_t row0, int64_t rows, const float *X, int64_t x_stride,
                     int64_t nb, float *Y, int64_t y_stride);

/* Mixtral routing of one FFN input xin (a row of s->xb) through layer l's
   router: the n_expert_used experts with the highest logits, highest first,
   into chosen, and their weights (softmax over the chosen logits) into w.
   Returns how many (both arrays hold PI_MOE_MAX_USED). */
int64_t pi_moe_route(pi_state *s, const pi_layer *l, const float *xin, int64_t *chosen, float *w);

/* out (E) = sum over k < K of w[k] times row k of outs (K, E), added in
   routing order from zero: the arithmetic of the dense mixture, so that a
   path that computes the experts in another order mixes them the same. */
void pi_moe_mix(const float *w, int64_t K, const float *outs, int64_t E, float *out);

/* out = x / rms(x) * w over n elements (the model's RMS norm). */
void pi_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps);

/* Float rows that pi_state_matmul read were rewritten in place: their Q8_0
   copies are stale. */
void pi_state_input_changed(pi_state *s);

#endif
