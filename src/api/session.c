/*
 * session.c — pi_session: a run state with the FFN its model asks for
 * installed (in-memory sparse, or read through the model's flash state),
 * evaluation with the checks the public API promises, KV cache edits and
 * statistics (include/pinfer.h).
 */
#include "api.h"

#include "base/timer.h"
#include "sparse/ffn_offload.h"

#include <stdlib.h>
#include <string.h>

pi_session_params pi_session_default_params(void) {
    pi_session_params p;
    memset(&p, 0, sizeof p);
    return p;
}

/* A session that can be used: not NULL, its model still open. */
static bool usable(const pi_session *s, const char *fn) {
    if (!s) {
        pi_error(PI_ERR_INVALID, "%s: the session is NULL", fn);
        return false;
    }
    if (!atomic_load(&s->life->alive)) {
        pi_error(PI_ERR_INVALID, "%s: the session's model was closed", fn);
        return false;
    }
    return true;
}

pi_state *pi_session_state(pi_session *s) { return s && atomic_load(&s->life->alive) ? s->st : NULL; }

void pi_session_free(pi_session *s) {
    if (!s) return;
    if (s->uses_off && atomic_load(&s->life->alive)) atomic_fetch_sub(&s->m->off_users, 1);
    pi_state_free(s->st);
    if (atomic_fetch_sub(&s->life->refs, 1) == 1) free(s->life);
    free(s);
}

/* Install the session's FFN in its state. */
static pi_status install_ffn(pi_session *s) {
    pi_model *m = s->m;
    if (s->uses_off) return pi_offload_ffn_install(s->st, m->off, s->ffn, m->hot);
    if (s->ffn != PI_FFN_DENSE) return pi_sparse_ffn_install(s->st, s->ffn, m->hot);
    return PI_OK;
}

pi_status pi_session_create(pi_model *m, const pi_session_params *params, pi_session **out) {
    if (out) *out = NULL;
    if (!m || !out) return pi_error(PI_ERR_INVALID, "pi_session_create: %s is NULL", !m ? "the model" : "out");
    pi_session_params p = params ? *params : pi_session_default_params();
    if (p.n_ctx < 0 || p.n_ctx > ((int64_t)1 << 24) || p.n_threads < 0 || p.n_threads > 1024 ||
        (int)p.ffn < PI_FFN_AUTO || (int)p.ffn > PI_FFN_ORACLE)
        return pi_error(PI_ERR_INVALID, "pi_session_create: n_ctx %lld, n_threads %d or ffn %d out of range",
                        (long long)p.n_ctx, p.n_threads, (int)p.ffn);
    const int64_t n_ctx = p.n_ctx ? p.n_ctx : m->n_ctx;
    const pi_ffn_mode ffn = p.ffn == PI_FFN_AUTO ? m->ffn : p.ffn;
    if (m->off && n_ctx > m->n_ctx)
        return pi_error(PI_ERR_INVALID, "pi_session_create: the memory budget holds a KV cache of %lld positions, "
                        "not %lld (open the model with a larger n_ctx)", (long long)m->n_ctx, (long long)n_ctx);
    if (ffn != PI_FFN_DENSE && ffn != m->ffn && m->ffn == PI_FFN_DENSE)
        return pi_error(PI_ERR_INVALID, "pi_session_create: the model was opened for dense sessions: open it with "
                        "ffn PI_FFN_SPARSE or PI_FFN_ORACLE for a %s session", ffn == PI_FFN_ORACLE ? "oracle" : "sparse");
    if (m->off && ffn == PI_FFN_ORACLE)
        return pi_error(PI_ERR_INVALID, "pi_session_create: the oracle FFN needs the FFN in memory, not under a "
                        "memory budget");
    pi_session *s = calloc(1, sizeof *s);
    if (!s) return pi_error(PI_ERR_NOMEM, "pi_session_create: out of memory");
    s->m = m;
    s->life = m->life;
    s->ffn = ffn;
    s->last_token = -1;
    atomic_fetch_add(&s->life->refs, 1);
    if (m->off) {
        int users = atomic_load(&m->off_users);
        do {
            if (users >= m->n_seq_max) {
                pi_session_free(s);
                return pi_error(PI_ERR_INVALID, "pi_session_create: a model under a memory budget serves %d "
                                "session%s at a time (the budget holds their KV caches; open the model with a larger "
                                "n_seq_max); free another first", m->n_seq_max, m->n_seq_max == 1 ? "" : "s");
            }
        } while (!atomic_compare_exchange_weak(&m->off_users, &users, users + 1));
        s->uses_off = true;
    }
    int64_t n_batch = PI_DEFAULT_BATCH, hb_cols = m->lm->hp.n_ff;
    if (m->off) pi_offload_session_shape(m->off, &n_batch, &hb_cols); /* the shape the budget charged */
    pi_status st = pi_state_create_ex(m->lm, n_ctx, p.n_threads ? p.n_threads : m->n_threads, n_batch, hb_cols, &s->st);
    if (!st) st = install_ffn(s);
    if (st) {
        pi_error_saved e;
        pi_error_save(&e);
        pi_session_free(s);
        pi_error_restore(&e);
        return st;
    }
    *out = s;
    return PI_OK;
}

static pi_status eval(pi_session *s, const int32_t *tokens, size_t n, float *logits, const char *fn) {
    if (!usable(s, fn)) return PI_ERR_INVALID;
    if (n && !tokens) return pi_error(PI_ERR_INVALID, "%s: tokens is NULL", fn);
    if (n > (size_t)1 << 40) return pi_error(PI_ERR_INVALID, "%s: %zu tokens", fn, n);
    if (n == 0) return PI_OK;
    /* sessions under one budget share its neuron cache and I/O queue: one evaluates at a time */
    if (s->uses_off) pthread_mutex_lock(&s->m->off_lock);
    const uint64_t t0 = pi_time_ns();
    pi_status st = logits ? pi_state_decode_all(s->st, tokens, (int64_t)n, logits)
                          : pi_state_decode(s->st, tokens, (int64_t)n);
    const uint64_t dt = pi_time_ns() - t0;
    if (s->uses_off) pthread_mutex_unlock(&s->m->off_lock);
    if (st) {
        if (st != PI_ERR_INVALID) s->have_logits = false; /* a failure mid-way: the logits are stale */
        return pi_error_prefix(st, "%s", fn);
    }
    if (n == 1) s->decode_tokens++, s->decode_ns += dt;
    else s->prompt_tokens += n, s->prompt_ns += dt;
    s->last_token = tokens[n - 1];
    s->have_logits = true;
    return PI_OK;
}

pi_status pi_session_eval(pi_session *s, const int32_t *tokens, size_t n) {
    return eval(s, tokens, n, NULL, "pi_session_eval");
}

pi_status pi_session_eval_logits(pi_session *s, const int32_t *tokens, size_t n, float *logits) {
    if (n && !logits) return pi_error(PI_ERR_INVALID, "pi_session_eval_logits: logits is NULL");
    return eval(s, tokens, n, logits, "pi_session_eval_logits");
}

pi_status pi_session_decode(pi_session *s, int32_t token) { return eval(s, &token, 1, NULL, "pi_session_decode"); }

const float *pi_session_logits(const pi_session *s) {
    if (!usable(s, "pi_session_logits")) return NULL;
    return s->have_logits ? pi_state_logits(s->st) : NULL;
}

int64_t pi_session_n_past(const pi_session *s) { return usable(s, "pi_session_n_past") ? s->st->n_past : -1; }

int64_t pi_session_n_ctx(const pi_session *s) { return usable(s, "pi_session_n_ctx") ? s->st->n_ctx : -1; }

int pi_session_n_threads(const pi_session *s) {
    return usable(s, "pi_session_n_threads") ? pi_pool_size(s->st->pool) : -1;
}

pi_ffn_mode pi_session_ffn(const pi_session *s) { return usable(s, "pi_session_ffn") ? s->ffn : PI_FFN_AUTO; }

pi_status pi_session_kv_clear(pi_session *s) {
    if (!usable(s, "pi_session_kv_clear")) return PI_ERR_INVALID;
    pi_state_reset(s->st);
    s->have_logits = false;
    s->last_token = -1;
    return PI_OK;
}

pi_status pi_session_kv_truncate(pi_session *s, int64_t n) {
    if (!usable(s, "pi_session_kv_truncate")) return PI_ERR_INVALID;
    pi_status st = pi_state_truncate(s->st, n);
    if (st) return pi_error_prefix(st, "pi_session_kv_truncate");
    s->have_logits = false;
    return PI_OK;
}

pi_status pi_session_kv_discard(pi_session *s, int64_t p0, int64_t n) {
    if (!usable(s, "pi_session_kv_discard")) return PI_ERR_INVALID;
    pi_status st = pi_state_discard(s->st, p0, n);
    if (st) return pi_error_prefix(st, "pi_session_kv_discard");
    if (n) s->have_logits = false;
    return PI_OK;
}

pi_status pi_session_stats(const pi_session *s, pi_token_stats *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!usable(s, "pi_session_stats")) return PI_ERR_INVALID;
    if (!out) return pi_error(PI_ERR_INVALID, "pi_session_stats: out is NULL");
    out->prompt_tokens = s->prompt_tokens;
    out->decode_tokens = s->decode_tokens;
    out->prompt_s = (double)s->prompt_ns * 1e-9;
    out->decode_s = (double)s->decode_ns * 1e-9;
    const pi_sparse_stats *sp = pi_sparse_ffn_stats(s->st);
    for (int64_t il = 0; sp && il < s->st->m->hp.n_layer; il++) {
        out->neurons_computed += sp[il].computed;
        out->neurons_active += sp[il].active;
        out->ffn_weight_bytes += sp[il].bytes;
    }
    if (s->uses_off) {
        const pi_offload_stats *o = &s->m->off->st;
        out->neurons_resident = o->resident;
        out->neurons_cached = o->hits;
        out->neurons_read = o->misses;
        out->reads = o->reads;
        out->reads_merged = o->merged;
        out->bytes_read = o->bytes;
        out->split_steps = o->waves;
        out->prompt_bytes_read = o->prefill_bytes;
        out->io_wait_s = (double)o->io_wait_ns * 1e-9;
        out->io_busy_s = (double)o->io_busy_ns * 1e-9;
        pi_io_stats ios;
        pi_io_get_stats(s->m->off->io, &ios);
        out->io_queue_s = (double)ios.busy_ns * 1e-9;
        out->io_depth_s = ios.depth_ns * 1e-9;
        out->reads_queued = ios.queued;
        out->ffn_s = (double)o->ffn_ns * 1e-9;
        out->neurons_ahead = o->ahead_neurons;
        out->neurons_ahead_start = o->ahead_start;
        out->ahead_start_used = o->ahead_start_used;
        out->ahead_used = o->ahead_used;
        out->reads_ahead = o->ahead_reads;
        out->router_guesses = o->router_guesses;
        out->router_hits = o->router_hits;
        out->head_uses = o->head_uses;
        out->head_bytes_read = o->head_bytes;
        out->head_read_s = (double)o->head_ns * 1e-9;
        if (s->m->off->head_on_flash) {
            out->head_rows_resident = s->m->off->head_res_rows;
            out->head_rows = s->st->m->output.ne[1];
        }
    }
    return PI_OK;
}

pi_status pi_session_reset_stats(pi_session *s) {
    if (!usable(s, "pi_session_reset_stats")) return PI_ERR_INVALID;
    s->prompt_tokens = s->decode_tokens = s->prompt_ns = s->decode_ns = 0;
    pi_sparse_stats *sp = pi_sparse_ffn_stats(s->st);
    if (sp) memset(sp, 0, (size_t)s->st->m->hp.n_layer * sizeof *sp);
    if (s->uses_off) {
        pi_offload *o = s->m->off;
        memset(&o->st, 0, sizeof o->st);
        pi_io_reset_stats(o->io);
        pi_ncache_reset_stats(o->cache);
    }
    return PI_OK;
}

pi_status pi_session_layer_stats(const pi_session *s, int64_t layer, pi_layer_stats *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!usable(s, "pi_session_layer_stats")) return PI_ERR_INVALID;
    if (!out) return pi_error(PI_ERR_INVALID, "pi_session_layer_stats: out is NULL");
    const pi_sparse_stats *sp = pi_sparse_ffn_stats(s->st);
    if (!sp) return pi_error(PI_ERR_INVALID, "pi_session_layer_stats: the session computes its FFN densely");
    if (layer < 0 || layer >= s->st->m->hp.n_layer)
        return pi_error(PI_ERR_INVALID, "pi_session_layer_stats: layer %lld is outside [0, %lld)", (long long)layer,
                        (long long)s->st->m->hp.n_layer);
    const pi_sparse_stats *l = &sp[layer];
    *out = (pi_layer_stats){l->tokens, l->computed, l->active, l->bytes, l->oracle_active, l->missed};
    return PI_OK;
}

pi_status pi_session_set_recall_check(pi_session *s, bool on) {
    if (!usable(s, "pi_session_set_recall_check")) return PI_ERR_INVALID;
    pi_sparse_ffn *f = pi_sparse_ffn_of(s->st);
    if (!f || f->mode != PI_FFN_SPARSE || s->uses_off)
        return pi_error(PI_ERR_INVALID, "pi_session_set_recall_check: %s",
                        s->uses_off ? "the check computes every gate and needs the FFN in memory"
                                    : "the session does not use the predictor");
    f->check = on;
    return PI_OK;
}
