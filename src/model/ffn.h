/*
 * ffn.h — the FFN interface a pi_state dispatches through (DESIGN.md §1, §6).
 *
 * The dense pass (session.c) computes each layer's FFN over every neuron of
 * the weights in memory. An implementation installed with pi_state_set_ffn
 * takes over: one-token steps (decode) call ops->token, batches (prompts)
 * call ops->batch when it is set and take the dense path otherwise, and
 * ops->embed supplies token embedding rows that are not resident. The
 * implementations live in src/sparse/: the in-memory sparse FFN
 * (ffn_sparse.c) and the FFN read from flash (ffn_offload.c).
 *
 * Contract of ops->token and ops->batch for layer il: the FFN input (after
 * ffn_norm) is in rows 0..nb-1 of s->xb (s->xb_dim floats apart), the result
 * goes to rows 0..nb-1 of s->xb2 (n_embd apart); the state adds it to the
 * residual stream. They may use the state's scratch (hb, hb2,
 * reduce_scratch, xq through pi_state_matmul) and must leave nothing that a
 * later layer relies on. A failure (PI_ERR_IO: a read from flash failed)
 * stops the step; the state's position does not advance.
 *
 * The state owns the implementation it holds: ops->free runs when another
 * one is installed or the state is freed.
 */
#ifndef PI_MODEL_FFN_H
#define PI_MODEL_FFN_H

#include "model.h"

struct pi_state;

/* Weight types of the three parts of an FFN neuron. */
typedef struct pi_ffn_types {
    pi_type gate, up, down;
} pi_ffn_types;

/* Per-layer counters of a sparse FFN, summed over decoded tokens. */
typedef struct pi_sparse_stats {
    uint64_t tokens;     /* tokens decoded by the sparse path (per layer) */
    uint64_t predicted;  /* neurons selected (hot prefix + predicted cold) */
    uint64_t computed;   /* neurons whose gate row was read */
    uint64_t active;     /* neurons with a non-zero activation */
    uint64_t bytes;      /* weight bytes read by the FFN and the predictor */
    /* with the recall check on: the exact active set */
    uint64_t oracle_active; /* neurons truly active */
    uint64_t missed;        /* truly active but not selected (recall = 1 - missed / oracle_active) */
} pi_sparse_stats;

typedef struct pi_ffn_ops {
    const char *name;
    /* One token's FFN at layer il (nb = 1). */
    pi_status (*token)(void *impl, struct pi_state *s, int64_t il);
    /* nb tokens at once; NULL: the dense FFN over the weights in memory. */
    pi_status (*batch)(void *impl, struct pi_state *s, int64_t il, int64_t nb);
    /* Row tok of the token embedding into out (n_embd floats); NULL: from
       the weights in memory. */
    pi_status (*embed)(void *impl, struct pi_state *s, int32_t tok, float *out);
    /* A one-token step went through every layer; may be NULL. */
    void (*token_done)(void *impl);
    void (*free)(void *impl); /* may be NULL */
    /* The output head: Y[b] = output . X[b] for nb rows of X (x_stride
       floats apart) into rows of Y (y_stride apart); NULL: from the weights
       in memory. */
    pi_status (*head)(void *impl, struct pi_state *s, const float *X, int64_t x_stride, int64_t nb, float *Y,
                      int64_t y_stride);
    /* A one-token step is about to go through the layers, its embedding in
       s->x; may be NULL. */
    pi_status (*token_start)(void *impl, struct pi_state *s);
} pi_ffn_ops;

#define PI_DOWN_T_CHUNKS 64 /* the down projection sums its rows in this many fixed chunks, so the
                               result does not depend on the thread count */
#define PI_DOWN_T_MIN_ROWS 128 /* ... of at least this many rows where the layer has 64 x that many */

/* Rows per chunk of the down projection of a list of n of a layer's F
   neurons: n / PI_DOWN_T_CHUNKS, but at least PI_DOWN_T_MIN_ROWS (or F /
   PI_DOWN_T_CHUNKS when that is smaller). A sparse token's few hundred
   neurons then make a few long chunks, not 64 short ones: each chunk has
   its own partial sum of n_embd floats to clear and add, which for 22-row
   chunks cost a quarter of the down projection's time. The whole layer's
   chunks (n = F) are unchanged, and so is any list of a small layer. */
static inline int64_t pi_down_chunk_rows(int64_t n, int64_t F) {
    const int64_t q = (n + PI_DOWN_T_CHUNKS - 1) / PI_DOWN_T_CHUNKS, fq = (F + PI_DOWN_T_CHUNKS - 1) / PI_DOWN_T_CHUNKS;
    const int64_t lo = fq < PI_DOWN_T_MIN_ROWS ? fq : PI_DOWN_T_MIN_ROWS;
    return q > lo ? q : lo > 0 ? lo : 1;
}

/* hb = act(gate) * up, elementwise over n values. */
void pi_ffn_activate(pi_ffn_act act, float *hb, const float *hb2, int64_t n);

/* act(g, u) for one neuron, 0 when silent. */
static inline float pi_ffn_act1(pi_ffn_act act, float g, float u) {
    if (g <= 0.0f) return 0.0f;
    if (act == PI_ACT_DRELU && u <= 0.0f) return 0.0f;
    return g * u;
}

#endif
