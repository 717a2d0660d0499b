/*
 * ffn_offload.h — the FFN read from flash under a memory budget (DESIGN.md
 * §3–4), an FFN implementation (model/ffn.h) over the state that
 * pi_offload_load (offload.h) prepared.
 *
 * Decode with the sparse FFN: the list the predictor selects (ffn_sparse.h)
 * finds each neuron's rows in the hot region, in the neuron cache, or reads
 * them from flash; the reads are issued before any gate/up work, neighbours
 * merged into one read, and each read's neurons are computed as it
 * completes. The result equals the in-memory sparse FFN bit for bit.
 * Prompt batches (and every step of a dense state) stream each layer's
 * bundles through two buffers the neuron cache lends while it is idle, and
 * give exactly the in-memory dense result.
 * The token embedding is read row by row when it is not resident.
 *
 * The pi_offload is shared, not owned: one state at a time may use it
 * (its neuron cache and I/O queue serve one step at a time).
 */
#ifndef PI_SPARSE_FFN_OFFLOAD_H
#define PI_SPARSE_FFN_OFFLOAD_H

#include "ffn_sparse.h"
#include "offload.h"

extern const pi_ffn_ops pi_offload_ffn_ops;

/* Install the FFN read through off in s: mode PI_FFN_SPARSE (hot: the
   sparse FFN's always-computed prefix, as in ffn_sparse.h) or PI_FFN_DENSE
   (every step streams the whole FFN). off must come from loading s's model.
   PI_ERR_INVALID otherwise, or for a model the sparse FFN cannot serve. */
pi_status pi_offload_ffn_install(pi_state *s, pi_offload *off, pi_ffn_mode mode, int64_t hot);

/* The state off's FFN works best with (pi_state_create_ex): prompts of up
   to n_batch tokens per pass over the FFN on flash, hb / hb2 rows of one
   streaming piece; the budget charges that shape (pi_offload_measure). A
   state of pi_state_create's shape works too (smaller batches, wider rows). */
void pi_offload_session_shape(const pi_offload *off, int64_t *n_batch, int64_t *hb_cols);

/* The sparse FFN inside an offload implementation (NULL when dense). */
pi_sparse_ffn *pi_offload_ffn_sparse(void *impl);

/* Whether this token's start reads the first layer ahead (called once per
   token): yes unless paused. After each PI_LA_START_WINDOW neurons read at
   token starts, fewer than half of them then selected pauses it for the
   next PI_LA_START_PAUSE tokens. */
#define PI_LA_START_WINDOW 512
#define PI_LA_START_PAUSE 64
bool pi_offload_start_wanted(pi_offload *o);

#endif
