/*
 * ffn_sparse.h — the sparse FFN of one token (DESIGN.md §1), an FFN
 * implementation (model/ffn.h) over the weights in memory, and the building
 * blocks the FFN read from flash (ffn_offload.h) shares with it.
 *
 * One token's FFN runs over a list of neurons: entries [0, n) of idx, in
 * neuron order, the hot prefix [0, hot) first, then the cold neurons the
 * predictor selects (fc2(relu(fc1 x)) >= the layer's threshold), or in
 * ORACLE mode exactly the active neurons. Entry k has its gate, up and
 * down_t rows at row[3k .. 3k+2] (in the weights, or in the hot region and
 * the neuron cache when the FFN is read from flash) and its activation in
 * val[k] once computed. The down projection sums val * down row over the
 * list in PI_DOWN_T_CHUNKS fixed chunks of the list, so the result depends
 * only on the list, not on where the rows live or on the thread count: the
 * FFN read from flash equals this one bit for bit.
 *
 * Buffers are sized once from the hyperparameters; a step allocates nothing.
 * One instance belongs to one pi_state.
 */
#ifndef PI_SPARSE_FFN_SPARSE_H
#define PI_SPARSE_FFN_SPARSE_H

#include "model/session.h"

#include <stdbool.h>

typedef struct pi_sparse_ffn {
    const pi_lm *m;
    pi_ffn_mode mode;         /* PI_FFN_SPARSE or PI_FFN_ORACLE */
    int64_t hot;              /* neurons of each layer's hot prefix, computed as one dense cluster */
    bool check;               /* SPARSE: also compute the exact active set, for recall in stats */
    int32_t *idx;             /* (n_ff) the list: neurons to compute */
    float *val;               /* (max(n_ff, rank)) activations of the list entries; the predictor's hidden
                                 layer before them */
    float *pred;              /* (n_ff) predictor logits */
    const uint8_t **row;      /* (3 * n_ff) gate, up and down_t rows of each list entry */
    pi_ffn_types types;       /* of the layer being computed */
    pi_sparse_stats *stats;   /* (n_layer) */
    uint8_t *xq;              /* (2, xq_row) the FFN input in the gate's and the up's activation types */
    size_t xq_row;
} pi_sparse_ffn;

extern const pi_ffn_ops pi_sparse_ffn_ops;

/* Whether m can run a sparse FFN in mode (the checks of
   pi_sparse_ffn_create, the ffn_down_t one only when need_down_t). */
pi_status pi_sparse_ffn_check(const pi_lm *m, pi_ffn_mode mode, bool need_down_t);

/* A sparse FFN for m. PI_ERR_INVALID (message says why) unless m is a dense
   ReLU or dReLU model whose layers all have ffn_down_t
   (pi_lm_make_down_t), with predictors for SPARSE; mode must be SPARSE or
   ORACLE. hot is clamped to [0, n_ff]. */
pi_status pi_sparse_ffn_create(const pi_lm *m, pi_ffn_mode mode, int64_t hot, pi_sparse_ffn **out);
void pi_sparse_ffn_free(pi_sparse_ffn *f); /* accepts NULL */

/* Bytes of the buffers a sparse FFN for m allocates. */
uint64_t pi_sparse_ffn_bytes(const pi_lm *m);

/* Create one and install it in s (which owns it from then on). */
pi_status pi_sparse_ffn_install(pi_state *s, pi_ffn_mode mode, int64_t hot);

/* The sparse FFN s computes with (in memory, or under the FFN read from
   flash), or NULL when s is dense. */
pi_sparse_ffn *pi_sparse_ffn_of(const pi_state *s);

/* Per-layer counters of s's sparse FFN (n_layer entries), or NULL. */
pi_sparse_stats *pi_sparse_ffn_stats(const pi_state *s);

/* ---- building blocks (ffn_offload.c) ---- */

/* What the gate/up work of a list needs: the FFN input (row 0 of s->xb) in
   the kernels' form. */
typedef struct pi_sparse_job {
    pi_state *s;
    pi_sparse_ffn *f;
    const void *xg, *xu;  /* FFN input in the gate's and the up's kernel form */
    const float *gate;    /* ORACLE: precomputed gate (and up) values, else NULL */
    const float *up;
    int64_t first;        /* list position of the first entry to compute */
} pi_sparse_job;

/* The largest predictor rank of any layer (per-expert predictors for MoE); 0 without. */
int64_t pi_sparse_predictor_rank(const pi_lm *m);

/* The predictor threshold of layer il's expert x (0 for a dense layer): its
   own, else the model's one. A plan may give the unit's resident prefix a
   threshold of its own (a false positive there costs a gate row, one
   among the cold neurons a read): neurons below *split reach *thr_hot
   (*split 0 when there is none). */
float pi_sparse_threshold(const pi_lm *m, int64_t il, int64_t x, int64_t *split, float *thr_hot);

/* Predictor logits z (n_ff) of layer il's expert x (0 for a dense layer)
   for the input row in (n_embd): z = fc2 relu(fc1 in), the hidden layer in
   u (the rank's floats). Returns the predictor bytes read. */
uint64_t pi_sparse_logits(pi_state *s, int64_t il, int64_t x, const float *in, float *u, float *z);

/* The same for neurons i0 .. n_ff only: z[i0 ..) (each logit the bits
   pi_sparse_logits gives it), the rows of fc2 below i0 not read. */
uint64_t pi_sparse_logits_from(pi_state *s, int64_t il, int64_t x, const float *in, int64_t i0, float *u, float *z);

/* The predictor's selection for row 0 of s->xb into f->idx: the hot prefix
   [0, f->hot), then the cold neurons whose fc2 logit reaches the layer's
   threshold (pi_sparse_threshold); x: the expert whose predictor selects (0 for a dense layer).
   Returns n. */
int64_t pi_sparse_select(pi_sparse_ffn *f, pi_state *s, int64_t il, int64_t x);

/* The hot prefix as one dense cluster: val of the first f->hot list
   entries, from rows [row0, row0 + hot) of gate and up. */
void pi_sparse_hot_cluster(pi_sparse_ffn *f, pi_state *s, const pi_weight *gate, const pi_weight *up, int64_t row0);

/* The job for the list entries from `first` on, the input quantized for
   f->types. */
pi_sparse_job pi_sparse_input(pi_sparse_ffn *f, pi_state *s, int64_t first);

/* val of the n list entries list[0..n) (in parallel when it pays). */
void pi_sparse_compute_list(const pi_sparse_job *j, const int64_t *list, int64_t n);

/* The down reduction's chunk function for pi_pool_reduce_f32*: acc += sum
   over list entries [k0, k1) of val[k] * down row of entry k, by the
   gathered axpy (the entries with val 0 skipped, the others added in list
   order). ctx is a pi_sparse_down. */
typedef struct pi_sparse_down {
    const pi_sparse_ffn *f;
    int64_t n_embd;
    pi_axpy_rows_fn axpy_rows; /* the kernels' axpy_rows for the down rows' type */
} pi_sparse_down;
void pi_sparse_down_chunk(void *ctx, int64_t k0, int64_t k1, float *acc, int tid);

/* Count a token's list of n entries in layer il's statistics; returns how
   many were active. */
int64_t pi_sparse_count_list(pi_sparse_ffn *f, int64_t il, int64_t n);

/* A mixture's routing of row 0 of xb at layer il (pi_moe_route), the
   router's bytes charged to the layer's statistics. */
int64_t pi_sparse_route(pi_sparse_ffn *f, pi_state *s, int64_t il, int64_t *chosen, float *w);

static inline void pi_sparse_set_rows(pi_sparse_ffn *f, int64_t k, const uint8_t *g, const uint8_t *u,
                                      const uint8_t *d) {
    f->row[3 * k] = g;
    f->row[3 * k + 1] = u;
    f->row[3 * k + 2] = d;
}

#endif
