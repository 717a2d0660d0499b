/*
 * ffn_sparse.c — the sparse FFN over the weights in memory, and the pieces
 * of it the FFN read from flash reuses (see ffn_sparse.h).
 */
#include "ffn_sparse.h"

#include "ffn_offload.h"

#include <stdlib.h>
#include <string.h>

#define ROWS_BATCH 64        /* rows per gathered dot-product call (fewer than ~8 gain nothing) */
#define LIST_PARALLEL_MIN 48 /* fewer entries run on the calling thread: a pool wake-up costs more */
#define DOWN_BATCH 256       /* down rows per gathered axpy call */

/* Layer il's predictor: fc1 and fc2, or for MoE the experts' stacked ones. */
static const pi_weight *predictor_fc(const pi_lm *m, int64_t il, int which) {
    const pi_layer *l = &m->layers[il];
    return m->hp.n_expert ? (which ? &l->fc2_exps : &l->fc1_exps) : (which ? &l->fc2 : &l->fc1);
}

int64_t pi_sparse_predictor_rank(const pi_lm *m) {
    int64_t rank = 0;
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        const pi_weight *fc1 = predictor_fc(m, il, 0);
        if (fc1->data && fc1->ne[1] > rank) rank = fc1->ne[1];
    }
    return rank;
}

/* The buffer sizes, in the order they are allocated. */
/* A row of n activations in the widest quantized activation type. */
static size_t xq_row_bytes(int64_t n) {
    const int64_t nk = (n + PI_QK_K - 1) / PI_QK_K * PI_QK_K;
    const size_t a = pi_row_size(PI_TYPE_Q8_0, nk), b = pi_row_size(PI_TYPE_Q8_K, nk);
    return a > b ? a : b;
}

static void buffer_sizes(const pi_lm *m, size_t sz[6]) {
    const int64_t F = m->hp.n_ff, R = pi_sparse_predictor_rank(m);
    sz[0] = (size_t)F * sizeof(int32_t);
    sz[1] = (size_t)(F > R ? F : R) * sizeof(float);
    sz[2] = (size_t)F * sizeof(float);
    sz[3] = (size_t)m->hp.n_layer * sizeof(pi_sparse_stats);
    sz[4] = 2 * xq_row_bytes(m->hp.n_embd);
    sz[5] = 3 * (size_t)F * sizeof(const uint8_t *);
}

uint64_t pi_sparse_ffn_bytes(const pi_lm *m) {
    size_t sz[6];
    buffer_sizes(m, sz);
    uint64_t total = 0;
    for (int i = 0; i < 6; i++) total += sz[i];
    return total;
}

void pi_sparse_ffn_free(pi_sparse_ffn *f) {
    if (!f) return;
    free(f->idx);
    free(f->val);
    free(f->pred);
    free(f->stats);
    free(f->xq);
    free(f->row);
    free(f);
}

static void *zalloc(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 1)) return NULL;
    memset(p, 0, n ? n : 1);
    return p;
}

pi_status pi_sparse_ffn_check(const pi_lm *m, pi_ffn_mode mode, bool need_down_t) {
    if (mode != PI_FFN_SPARSE && mode != PI_FFN_ORACLE)
        return pi_error(PI_ERR_INVALID, "a sparse FFN computes in SPARSE or ORACLE mode, not mode %d", (int)mode);
    if (m->hp.act == PI_ACT_SILU)
        return pi_error(PI_ERR_INVALID, "%s: the sparse FFN needs a ReLU or dReLU model (this one is %s%s)", m->path,
                        m->hp.n_expert ? "mixture-of-experts, " : "", pi_ffn_act_name(m->hp.act));
    if (mode == PI_FFN_SPARSE && m->hp.n_expert && !m->has_predictor)
        return pi_error(PI_ERR_INVALID, "%s: no per-expert activation predictors (blk.N.fc1_exps/fc2_exps): the "
                        "sparse FFN of this mixture of experts runs with the exact mask (--predictor oracle) or "
                        "the model runs densely", m->path);
    if (mode == PI_FFN_SPARSE && !m->has_predictor)
        return pi_error(PI_ERR_INVALID, "%s: no activation predictors (blk.N.fc1/fc2): train them with "
                        "pinfer train-predictor, or use the dense path", m->path);
    for (int64_t il = 0; need_down_t && il < m->hp.n_layer; il++)
        if (!m->layers[il].ffn_down_t.data)
            return pi_error(PI_ERR_INVALID, "layer %lld has no ffn_down_t (pi_lm_make_down_t)", (long long)il);
    return PI_OK;
}

pi_status pi_sparse_ffn_create(const pi_lm *m, pi_ffn_mode mode, int64_t hot, pi_sparse_ffn **out) {
    *out = NULL;
    pi_status st0 = pi_sparse_ffn_check(m, mode, true);
    if (st0) return st0;
    pi_sparse_ffn *f = calloc(1, sizeof *f);
    if (!f) return pi_error(PI_ERR_NOMEM, "sparse FFN: out of memory");
    size_t sz[6];
    buffer_sizes(m, sz);
    f->m = m;
    f->mode = mode;
    f->hot = hot < 0 ? 0 : hot > m->hp.n_ff ? m->hp.n_ff : hot;
    f->idx = zalloc(sz[0]);
    f->val = zalloc(sz[1]);
    f->pred = zalloc(sz[2]);
    f->stats = zalloc(sz[3]);
    f->xq = zalloc(sz[4]);
    f->xq_row = sz[4] / 2;
    f->row = zalloc(sz[5]);
    if (!f->idx || !f->val || !f->pred || !f->stats || !f->xq || !f->row) {
        pi_sparse_ffn_free(f);
        return pi_error(PI_ERR_NOMEM, "sparse FFN: cannot allocate %.1f MiB of lists",
                        (double)pi_sparse_ffn_bytes(m) / (1 << 20));
    }
    *out = f;
    return PI_OK;
}

/* ---- building blocks ---- */

/* val[k] = act(gate . x, up . x) for the n list entries ks[0..n): the gate
   rows in gathered batches, then the up rows of the entries whose gate
   fired (the up row is skipped when the gate is silent). */
static void compute_entries(const pi_sparse_job *j, const int64_t *ks, int64_t n) {
    const pi_state *s = j->s;
    pi_sparse_ffn *f = j->f;
    const pi_ffn_types *t = &f->types;
    const int64_t E = s->m->hp.n_embd;
    const void *rows[ROWS_BATCH];
    float g[ROWS_BATCH], u[ROWS_BATCH];
    int idx[ROWS_BATCH];
    for (int64_t b0 = 0; b0 < n; b0 += ROWS_BATCH) {
        const int nb = (int)(n - b0 < ROWS_BATCH ? n - b0 : ROWS_BATCH);
        if (j->gate) {
            for (int r = 0; r < nb; r++) g[r] = j->gate[f->idx[ks[b0 + r]]];
        } else {
            for (int r = 0; r < nb; r++) rows[r] = f->row[3 * ks[b0 + r]];
            s->k->vec_dot_rows[t->gate](E, rows, nb, j->xg, g);
        }
        int m = 0;
        for (int r = 0; r < nb; r++) {
            f->val[ks[b0 + r]] = 0.0f;
            if (g[r] > 0.0f) idx[m++] = r;
        }
        if (j->up) {
            for (int q = 0; q < m; q++) u[q] = j->up[f->idx[ks[b0 + idx[q]]]];
        } else {
            for (int q = 0; q < m; q++) rows[q] = f->row[3 * ks[b0 + idx[q]] + 1];
            s->k->vec_dot_rows[t->up](E, rows, m, j->xu, u);
        }
        for (int q = 0; q < m; q++) f->val[ks[b0 + idx[q]]] = pi_ffn_act1(s->m->hp.act, g[idx[q]], u[q]);
    }
}

/* compute_entries for the list entries first + [k0, k1). */
static void cold_rows(void *ctx, int64_t k0, int64_t k1, int tid) {
    (void)tid;
    const pi_sparse_job *j = ctx;
    int64_t ks[ROWS_BATCH];
    for (int64_t b0 = j->first + k0; b0 < j->first + k1; b0 += ROWS_BATCH) {
        int64_t nb = j->first + k1 - b0 < ROWS_BATCH ? j->first + k1 - b0 : ROWS_BATCH;
        for (int64_t r = 0; r < nb; r++) ks[r] = b0 + r;
        compute_entries(j, ks, nb);
    }
}

typedef struct {
    pi_sparse_job c;
    const int64_t *list; /* list entries to compute */
} list_job;

static void list_rows(void *ctx, int64_t i0, int64_t i1, int tid) {
    (void)tid;
    list_job *j = ctx;
    compute_entries(&j->c, j->list + i0, i1 - i0);
}

void pi_sparse_compute_list(const pi_sparse_job *cj, const int64_t *list, int64_t n) {
    if (n <= 0) return;
    list_job j = {*cj, list};
    j.c.first = 0;
    if (n < LIST_PARALLEL_MIN) list_rows(&j, 0, n, 0);
    else pi_pool_for_dynamic(cj->s->pool, n, ROWS_BATCH, list_rows, &j);
}

/* The entries' down rows are gathered DOWN_BATCH at a time for the kernel,
   which skips the silent ones (val 0) and adds the rest in list order. The
   batches are fixed by the chunk, so the offloaded FFN, which computes the
   same chunks, gets the same bits (Q4_0 groups its rows within a call). */
void pi_sparse_down_chunk(void *ctx, int64_t k0, int64_t k1, float *acc, int tid) {
    (void)tid;
    pi_sparse_down *j = ctx;
    const void *rows[DOWN_BATCH];
    for (int64_t b0 = k0; b0 < k1; b0 += DOWN_BATCH) {
        const int64_t nb = k1 - b0 < DOWN_BATCH ? k1 - b0 : DOWN_BATCH;
        for (int64_t r = 0; r < nb; r++) rows[r] = j->f->row[3 * (b0 + r) + 2];
        j->axpy_rows(j->n_embd, j->f->val + b0, rows, nb, acc);
    }
}

float pi_sparse_threshold(const pi_lm *m, int64_t il, int64_t x, int64_t *split, float *thr_hot) {
    const int64_t u = pi_ffn_unit(&m->hp, il, x);
    *split = m->layer_split ? m->layer_split[u] : 0;
    *thr_hot = m->layer_threshold_hot ? m->layer_threshold_hot[u] : 0.0f;
    return m->layer_threshold ? m->layer_threshold[u] : m->sparse_threshold;
}

uint64_t pi_sparse_logits_from(pi_state *s, int64_t il, int64_t x, const float *in, int64_t i0, float *u, float *z) {
    const pi_weight *fc1 = predictor_fc(s->m, il, 0), *fc2 = predictor_fc(s->m, il, 1);
    const int64_t R = fc1->ne[1], F = s->m->hp.n_ff;
    i0 = i0 < 0 ? 0 : i0 > F ? F : i0;
    pi_state_matmul(s, fc1, x * R, R, in, s->m->hp.n_embd, 1, u, R);
    for (int64_t r = 0; r < R; r++) u[r] = u[r] > 0.0f ? u[r] : 0.0f;
    if (i0 < F) pi_state_matmul(s, fc2, x * F + i0, F - i0, u, R, 1, z + i0, F - i0);
    return fc1->row_bytes * (uint64_t)R + fc2->row_bytes * (uint64_t)(F - i0);
}

uint64_t pi_sparse_logits(pi_state *s, int64_t il, int64_t x, const float *in, float *u, float *z) {
    return pi_sparse_logits_from(s, il, x, in, 0, u, z);
}

int64_t pi_sparse_select(pi_sparse_ffn *f, pi_state *s, int64_t il, int64_t x) {
    const int64_t F = f->m->hp.n_ff;
    float *z = f->pred;
    f->stats[il].bytes += pi_sparse_logits(s, il, x, s->xb, f->val, z); /* val is free until the activations */
    int64_t split;
    float thr_hot;
    const float thr = pi_sparse_threshold(f->m, il, x, &split, &thr_hot);
    int64_t n = 0, i = 0;
    for (; i < f->hot; i++) f->idx[n++] = (int32_t)i;
    /* without a branch: each index is written and kept only where it is
       selected (n <= i < F, so the write stays inside idx). A branch on a
       predictor's scores mispredicts on every few neurons: on 7b-l8 (14336
       neurons, 16% selected) the selection's work besides the predictor's
       matvecs took 30-36 us a layer with one, 8-11 us without. */
    for (; i < split && i < F; i++) {
        f->idx[n] = (int32_t)i;
        n += z[i] >= thr_hot;
    }
    for (; i < F; i++) {
        f->idx[n] = (int32_t)i;
        n += z[i] >= thr;
    }
    return n;
}

/* With the check on: the exact active set of row 0 of xb (every gate, and
   for dReLU every up, computed into hb/hb2), counted against the selection. */
static void sparse_check(pi_sparse_ffn *f, pi_state *s, int64_t il, const pi_weight *gate, const pi_weight *up,
                         int64_t row0, int64_t n) {
    const int64_t F = f->m->hp.n_ff;
    const bool drelu = f->m->hp.act == PI_ACT_DRELU;
    pi_state_matmul(s, gate, row0, F, s->xb, s->xb_dim, 1, s->hb, F);
    if (drelu) pi_state_matmul(s, up, row0, F, s->xb, s->xb_dim, 1, s->hb2, F);
    uint64_t truth = 0, missed = 0;
    for (int64_t i = 0, k = 0; i < F; i++) {
        while (k < n && f->idx[k] < i) k++;
        bool on = s->hb[i] > 0.0f && (!drelu || s->hb2[i] > 0.0f);
        truth += on;
        missed += on && !(k < n && f->idx[k] == i);
    }
    f->stats[il].oracle_active += truth;
    f->stats[il].missed += missed;
}

int64_t pi_sparse_count_list(pi_sparse_ffn *f, int64_t il, int64_t n) {
    pi_sparse_stats *st = &f->stats[il];
    int64_t a = 0;
    for (int64_t k = 0; k < n; k++) a += f->val[k] != 0.0f;
    st->tokens++;
    st->predicted += (uint64_t)n;
    st->computed += (uint64_t)n;
    st->active += (uint64_t)a;
    return a;
}

void pi_sparse_hot_cluster(pi_sparse_ffn *f, pi_state *s, const pi_weight *gate, const pi_weight *up, int64_t row0) {
    if (f->hot <= 0) return;
    pi_state_matmul(s, gate, row0, f->hot, s->xb, s->xb_dim, 1, s->hb, f->hot);
    pi_state_matmul(s, up, row0, f->hot, s->xb, s->xb_dim, 1, s->hb2, f->hot);
    for (int64_t i = 0; i < f->hot; i++) f->val[i] = pi_ffn_act1(f->m->hp.act, s->hb[i], s->hb2[i]);
}

pi_sparse_job pi_sparse_input(pi_sparse_ffn *f, pi_state *s, int64_t first) {
    const int64_t E = f->m->hp.n_embd;
    const int ag = pi_vec_dot_type(f->types.gate), au = pi_vec_dot_type(f->types.up);
    const void *xg = s->xb, *xu = s->xb;
    if (ag != PI_TYPE_F32) {
        pi_quantize_act(s->k, f->types.gate, s->xb, f->xq, E);
        xg = f->xq;
    }
    if (au != PI_TYPE_F32 && au == ag) xu = xg;
    else if (au != PI_TYPE_F32) {
        pi_quantize_act(s->k, f->types.up, s->xb, f->xq + f->xq_row, E);
        xu = f->xq + f->xq_row;
    }
    return (pi_sparse_job){s, f, xg, xu, NULL, NULL, first};
}

/* ---- the in-memory implementation ---- */

/* One chunk of the list, whole: the values of its entries past the hot
   prefix (compute_entries), then its down rows added into the chunk's
   partial sum (pi_sparse_down_chunk). */
typedef struct {
    pi_sparse_job c;
    pi_sparse_down d;
} chunk_job;

static void chunk_rows(void *ctx, int64_t k0, int64_t k1, float *acc, int tid) {
    chunk_job *j = ctx;
    const int64_t first = j->c.first, a = k0 > first ? k0 : first;
    if (a < k1) cold_rows(&j->c, a - first, k1 - first, tid);
    pi_sparse_down_chunk(&j->d, k0, k1, acc, tid);
}

/* The values of the list's entries past the hot prefix, the down
   projection out = sum of val * down row in the fixed chunks of the list,
   and the bookkeeping. Where the list makes at least FUSE_CHUNKS chunks per
   thread, each chunk is computed whole (chunk_rows): one pass over the
   pool instead of two, and one thread's down rows are read while the other
   reads gate and up rows (measured on 7b-l8, 10% active, 2 threads: the
   layer's gate, up and down 4-5% faster). Fewer chunks would share the
   values unevenly, so they are computed first, in even shares. The chunks
   and their sums are the same either way, and so are the bits. */
#define FUSE_CHUNKS 4
static void sparse_finish(pi_sparse_ffn *f, pi_state *s, const pi_sparse_job *cj, int64_t il, int64_t n,
                          float *out) {
    const pi_layer *l = &f->m->layers[il];
    chunk_job j = {*cj, {f, f->m->hp.n_embd, s->k->axpy_rows[f->types.down]}};
    const int64_t chunk = pi_down_chunk_rows(n, f->m->hp.n_ff);
    const bool whole = (n + chunk - 1) / chunk >= FUSE_CHUNKS * (int64_t)pi_pool_size(s->pool);
    if (!whole && n > cj->first) pi_pool_for(s->pool, n - cj->first, 16, cold_rows, &j.c);
    pi_pool_reduce_f32(s->pool, n, chunk, whole ? chunk_rows : pi_sparse_down_chunk, whole ? (void *)&j : &j.d, out,
                       f->m->hp.n_embd, s->reduce_scratch);
    const int64_t a = pi_sparse_count_list(f, il, n);
    f->stats[il].bytes += l->ffn_down_t.row_bytes * (uint64_t)a;
}

/* The FFN of row 0 of xb through one expert x (x = 0 for a dense layer) on
   the sparse path: out = sum over active neurons i of act_i * down_t[i],
   computing only the neurons that are (predicted) active. */
static void sparse_expert(pi_sparse_ffn *f, pi_state *s, int64_t il, int64_t x, float *out) {
    const pi_hparams *hp = &f->m->hp;
    const pi_layer *l = &f->m->layers[il];
    const pi_weight *gate = hp->n_expert ? &l->ffn_gate_exps : &l->ffn_gate;
    const pi_weight *up = hp->n_expert ? &l->ffn_up_exps : &l->ffn_up;
    const int64_t F = hp->n_ff, row0 = x * F;
    pi_sparse_stats *st = &f->stats[il];
    int64_t n = 0, first = 0;
    pi_sparse_job cj;
    f->types = (pi_ffn_types){gate->type, up->type, l->ffn_down_t.type};

    if (f->mode == PI_FFN_ORACLE) {
        /* the exact mask: every gate (and for dReLU every up) computed */
        pi_state_matmul(s, gate, row0, F, s->xb, s->xb_dim, 1, s->hb, F);
        if (hp->act == PI_ACT_DRELU) pi_state_matmul(s, up, row0, F, s->xb, s->xb_dim, 1, s->hb2, F);
        for (int64_t i = 0; i < F; i++)
            if (s->hb[i] > 0.0f && (hp->act != PI_ACT_DRELU || s->hb2[i] > 0.0f)) f->idx[n++] = (int32_t)i;
        st->bytes += gate->row_bytes * (uint64_t)F + (hp->act == PI_ACT_DRELU ? up->row_bytes * (uint64_t)F : 0);
        cj = pi_sparse_input(f, s, 0);
        cj.gate = s->hb;
        cj.up = hp->act == PI_ACT_DRELU ? s->hb2 : NULL;
    } else {
        n = pi_sparse_select(f, s, il, x);
        if (f->check) sparse_check(f, s, il, gate, up, row0, n);
        first = f->hot;
        pi_sparse_hot_cluster(f, s, gate, up, row0);
        st->bytes += (gate->row_bytes + up->row_bytes) * (uint64_t)f->hot;
        cj = pi_sparse_input(f, s, first);
    }
    for (int64_t k = 0; k < n; k++) {
        size_t i = (size_t)(row0 + f->idx[k]);
        pi_sparse_set_rows(f, k, (const uint8_t *)gate->data + i * gate->row_bytes,
                           (const uint8_t *)up->data + i * up->row_bytes,
                           (const uint8_t *)l->ffn_down_t.data + i * l->ffn_down_t.row_bytes);
    }
    sparse_finish(f, s, &cj, il, n, out);
    if (f->mode != PI_FFN_ORACLE) {
        uint64_t computed_up = 0;
        for (int64_t k = first; k < n; k++) computed_up += f->val[k] != 0.0f;
        st->bytes += gate->row_bytes * (uint64_t)(n - first) + up->row_bytes * computed_up;
    }
}

int64_t pi_sparse_route(pi_sparse_ffn *f, pi_state *s, int64_t il, int64_t *chosen, float *w) {
    const pi_layer *l = &f->m->layers[il];
    f->stats[il].bytes += l->ffn_gate_inp.row_bytes * (uint64_t)f->m->hp.n_expert;
    return pi_moe_route(s, l, s->xb, chosen, w);
}

/* The FFN of one token (row 0 of xb) into row 0 of xb2: the layer's neurons,
   or for a mixture of experts the routed experts' outputs, each computed
   sparsely, mixed by their router weights. */
static pi_status ffn_sparse_token(void *impl, pi_state *s, int64_t il) {
    pi_sparse_ffn *f = impl;
    const pi_hparams *hp = &f->m->hp;
    if (!hp->n_expert) {
        sparse_expert(f, s, il, 0, s->xb2);
        return PI_OK;
    }
    const int64_t E = hp->n_embd;
    pi_sparse_stats *st = &f->stats[il];
    int64_t chosen[PI_MOE_MAX_USED];
    float w[PI_MOE_MAX_USED];
    const int64_t K = pi_sparse_route(f, s, il, chosen, w);
    const uint64_t tokens = st->tokens;
    memset(s->moe_out, 0, (size_t)E * sizeof(float));
    for (int64_t k = 0; k < K; k++) {
        sparse_expert(f, s, il, chosen[k], s->moe_out + E);
        for (int64_t i = 0; i < E; i++) s->moe_out[i] += w[k] * s->moe_out[E + i];
    }
    st->tokens = tokens + 1; /* the experts' lists are one token's */
    memcpy(s->xb2, s->moe_out, (size_t)E * sizeof(float));
    return PI_OK;
}

static void ffn_sparse_free(void *impl) { pi_sparse_ffn_free(impl); }

const pi_ffn_ops pi_sparse_ffn_ops = {"sparse", ffn_sparse_token, NULL, NULL, NULL, ffn_sparse_free, NULL, NULL};

pi_status pi_sparse_ffn_install(pi_state *s, pi_ffn_mode mode, int64_t hot) {
    pi_sparse_ffn *f;
    pi_status st = pi_sparse_ffn_create(s->m, mode, hot, &f);
    if (st) return st;
    pi_state_set_ffn(s, &pi_sparse_ffn_ops, f);
    return PI_OK;
}

pi_sparse_ffn *pi_sparse_ffn_of(const pi_state *s) {
    void *impl;
    const pi_ffn_ops *ops = pi_state_ffn(s, &impl);
    if (ops == &pi_sparse_ffn_ops) return impl;
    if (ops == &pi_offload_ffn_ops) return pi_offload_ffn_sparse(impl);
    return NULL;
}

pi_sparse_stats *pi_sparse_ffn_stats(const pi_state *s) {
    pi_sparse_ffn *f = pi_sparse_ffn_of(s);
    return f ? f->stats : NULL;
}
