/*
 * api.h — what lies behind the public handles of include/pinfer.h (internal
 * to src/api; offline tools that need the engine's internals, such as the
 * profiler's FFN observer, reach them through the two accessors at the end).
 *
 * A pi_model joins the language model (pi_lm), its tokenizer and, under a
 * memory budget, the flash state (pi_offload) with the defaults its
 * sessions take. A pi_session wraps one run state (pi_state) with its FFN
 * installed, and the counters the public statistics report.
 *
 * A model and its sessions share a small reference-counted record of
 * whether the model is still open, so that a session whose model was
 * closed fails cleanly instead of touching freed memory.
 */
#ifndef PI_API_API_H
#define PI_API_API_H

#include "pinfer.h"

#include "model/session.h"
#include "plan/plan.h"
#include "sparse/offload.h"
#include "tokenizer/tokenizer.h"

#include <pthread.h>
#include <stdatomic.h>

#define PI_MAX_SESSIONS 64 /* sessions sharing a model under a memory budget */

typedef struct pi_model_life {
    atomic_int refs;       /* the model (while open) and each of its sessions */
    atomic_bool alive;     /* false once the model is closed */
} pi_model_life;

struct pi_model {
    pi_lm *lm;
    pi_tokenizer *tok;
    pi_offload *off;       /* under a memory budget, else NULL */
    pi_model_life *life;
    atomic_int off_users;  /* sessions using off: at most n_seq_max */
    pthread_mutex_t off_lock; /* held while a session evaluates through off: they take turns */
    int n_seq_max;         /* sessions that may share off (1 without a budget too) */
    uint64_t extra_kv, extra_scratch; /* under a budget: the KV caches and scratch of sessions 2..n_seq_max */
    pi_ffn_mode ffn;       /* sessions' default (never AUTO) */
    int64_t hot;
    int64_t n_ctx;
    int n_threads;
    bool planned;
    pi_plan plan;          /* when planned */
    char *arch, *name;     /* owned copies of general.architecture / general.name */
    uint64_t file_size;
    char *path, *hw_path;  /* owned copies: the model file, params.hw_path (may be NULL) */
    int queue_depth;       /* under a budget: reads in flight at most */
    float recall;          /* the predictor thresholds' recall target, 0: not known */
};

struct pi_session {
    pi_model *m;           /* only while life->alive */
    pi_model_life *life;
    pi_state *st;
    pi_ffn_mode ffn;       /* DENSE, SPARSE or ORACLE */
    bool uses_off;         /* holds m's flash state */
    bool have_logits;      /* st->logits belong to the last token evaluated */
    int32_t last_token;    /* -1: none */
    uint64_t prompt_tokens, decode_tokens;
    uint64_t prompt_ns, decode_ns;
};

/* The engine objects behind the handles, for offline tools (profile,
   train-predictor): borrowed, NULL for NULL or a closed model. */
pi_lm *pi_model_lm(pi_model *m);
pi_state *pi_session_state(pi_session *s);

#endif
