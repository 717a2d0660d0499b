/*
 * session.c — the dense forward pass, one token at a time.
 *
 * Reads top-down like the maths (llama2.c's forward): embedding, then per
 * layer RMSNorm -> Q/K/V -> RoPE -> grouped-query attention over the KV cache
 * -> output projection -> residual, RMSNorm -> FFN -> residual; finally
 * RMSNorm and the output head. Matrix-vector products are split across the
 * pool by rows (each row computed by exactly one thread, so results do not
 * depend on the thread count); attention is split by heads.
 */
#include "session.h"

#include "base/timer.h"
#include "offload.h"

#include "base/log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DOWN_T_CHUNKS 64 /* fixed, so the reduction order does not depend on the thread count */
#define MATVEC_GRAIN 16 /* rows per chunk: contiguous row shares per thread */

/* Rows per matmul call for a batch. The matmul kernels walk the rows' length
   in chunks (a few KiB of each row), so this many rows' chunk stays in L2
   while all the inputs pass over it, whatever the row length; the outputs
   (256 x 64 floats) stay there too. Blocks are handed out dynamically: a batch
   is compute-bound, and a thread slowed by a noisy neighbour then takes fewer
   blocks. Each row is still computed whole by one call, so results do not
   depend on the thread count. A multiple of 16, the widest row tile. */
#define MATMUL_BLOCK_ROWS 256

/* Allocations of a session: counted, and made unless only counting. */
typedef struct {
    pi_status st;
    bool dry;      /* count only */
    size_t total, kv;
} allocator;

static void *xalloc(size_t n, allocator *a) {
    void *p = NULL;
    if (n == 0) n = 1;
    a->total += n;
    if (a->st || a->dry) return NULL;
    if (posix_memalign(&p, 64, n)) {
        a->st = PI_ERR_NOMEM;
        return NULL;
    }
    memset(p, 0, n);
    return p;
}

/* Every buffer of a session (or with a->dry, only their sizes). */
static void session_buffers(pi_state *s, const pi_lm *m, int64_t n_ctx, allocator *st) {
    const pi_hparams *hp = &m->hp;
    const size_t B = PI_MAX_BATCH, f = sizeof(float);
    const int64_t E = hp->n_embd, KV = hp->n_head_kv * hp->head_dim, QD = hp->n_head * hp->head_dim;
    int64_t widest = E > hp->n_ff ? E : hp->n_ff;
    if (QD > widest) widest = QD;
    s->xb_dim = E > QD ? E : QD;
    s->xq_blocks = widest / 32 + 1;
    size_t kv_bytes = (size_t)hp->n_layer * (size_t)n_ctx * (size_t)KV * f;
    st->kv = 2 * kv_bytes;
    s->k_cache = xalloc(kv_bytes, st);
    s->v_cache = xalloc(kv_bytes, st);
    s->x = xalloc(B * (size_t)E * f, st);
    s->xb = xalloc(B * (size_t)s->xb_dim * f, st);
    s->xb2 = xalloc(B * (size_t)E * f, st);
    s->q = xalloc(B * (size_t)QD * f, st);
    s->att = xalloc((size_t)hp->n_head * (size_t)n_ctx * f, st);
    s->hb = xalloc(B * (size_t)hp->n_ff * f, st);
    s->hb2 = xalloc(B * (size_t)hp->n_ff * f, st);
    s->logits = xalloc((size_t)hp->n_vocab * f, st);
    s->rope_inv_freq = xalloc((size_t)(hp->n_rot / 2) * f, st);
    s->xq = xalloc(B * (size_t)s->xq_blocks * sizeof(pi_block_q8_0), st);
    s->router = xalloc((size_t)(hp->n_expert + 1) * f, st);
    s->moe_out = xalloc(2 * (size_t)E * f, st);
    s->reduce_scratch = xalloc((size_t)DOWN_T_CHUNKS * (size_t)E * f, st);
    s->stream_acc = xalloc(B * 2 * (size_t)E * f, st);
    int64_t rank = 0;
    for (int64_t il = 0; il < hp->n_layer; il++)
        if (m->layers[il].fc1.data && m->layers[il].fc1.ne[1] > rank) rank = m->layers[il].fc1.ne[1];
    s->sp_idx = xalloc((size_t)hp->n_ff * sizeof(int32_t), st);
    s->sp_val = xalloc((size_t)(hp->n_ff > rank ? hp->n_ff : rank) * f, st);
    s->sp_pred = xalloc((size_t)hp->n_ff * f, st);
    s->sp_stats = xalloc((size_t)hp->n_layer * sizeof(pi_sparse_stats), st);
    s->sp_xq = xalloc((size_t)(E / 32 + 1) * sizeof(pi_block_q8_0), st);
    s->sp_row = xalloc(3 * (size_t)hp->n_ff * sizeof(const uint8_t *), st);
}

uint64_t pi_state_bytes(const pi_lm *m, int64_t n_ctx) {
    pi_state s = {0};
    allocator a = {PI_OK, true, 0, 0};
    session_buffers(&s, m, n_ctx <= 0 ? m->hp.n_ctx_train : n_ctx, &a);
    return a.total;
}

uint64_t pi_state_kv_bytes(const pi_lm *m, int64_t n_ctx) {
    pi_state s = {0};
    allocator a = {PI_OK, true, 0, 0};
    session_buffers(&s, m, n_ctx <= 0 ? m->hp.n_ctx_train : n_ctx, &a);
    return a.kv;
}

pi_status pi_state_create(const pi_lm *m, int64_t n_ctx, int n_threads, pi_state **out) {
    *out = NULL;
    const pi_hparams *hp = &m->hp;
    if (n_ctx <= 0) n_ctx = hp->n_ctx_train;
    if (n_ctx > ((int64_t)1 << 24)) return pi_error(PI_ERR_INVALID, "context size %lld is too large", (long long)n_ctx);
    pi_state *s = calloc(1, sizeof *s);
    if (!s) return pi_error(PI_ERR_NOMEM, "session: out of memory");
    s->m = m;
    s->k = pi_kernels_get();
    s->n_ctx = n_ctx;
    pi_status st = pi_pool_create(n_threads, &s->pool);
    if (st) {
        free(s);
        return st;
    }
    allocator al = {PI_OK, false, 0, 0};
    session_buffers(s, m, n_ctx, &al);
    st = al.st;
    if (st) {
        pi_state_free(s);
        return pi_error(PI_ERR_NOMEM, "session: cannot allocate %.1f MiB of KV cache and scratch for context %lld",
                        (double)al.total / (1 << 20), (long long)n_ctx);
    }
    for (int64_t i = 0; i < hp->n_rot / 2; i++)
        s->rope_inv_freq[i] = (float)pow((double)hp->rope_freq_base, -2.0 * (double)i / (double)hp->n_rot);
    *out = s;
    return PI_OK;
}

void pi_state_free(pi_state *s) {
    if (!s) return;
    pi_pool_free(s->pool);
    free(s->k_cache);
    free(s->v_cache);
    free(s->x);
    free(s->xb);
    free(s->xb2);
    free(s->q);
    free(s->att);
    free(s->hb);
    free(s->hb2);
    free(s->logits);
    free(s->rope_inv_freq);
    free(s->xq);
    free(s->router);
    free(s->moe_out);
    free(s->reduce_scratch);
    free(s->sp_idx);
    free(s->sp_val);
    free(s->sp_pred);
    free(s->sp_stats);
    free(s->sp_xq);
    free(s->sp_row);
    free(s->stream_acc);
    free(s);
}

void pi_state_reset(pi_state *s) { s->n_past = 0; }

pi_status pi_state_set_ffn_mode(pi_state *s, pi_ffn_mode mode, int64_t hot) {
    const pi_lm *m = s->m;
    if (mode == PI_FFN_DENSE) {
        s->ffn_mode = mode;
        return PI_OK;
    }
    if (m->hp.n_expert || m->hp.act == PI_ACT_SILU)
        return pi_error(PI_ERR_INVALID, "%s: the sparse FFN needs a dense ReLU or dReLU model (this one is %s%s)",
                        m->path, m->hp.n_expert ? "mixture-of-experts, " : "", pi_ffn_act_name(m->hp.act));
    if (mode == PI_FFN_SPARSE && !m->has_predictor)
        return pi_error(PI_ERR_INVALID, "%s: no activation predictors (blk.N.fc1/fc2): train them with "
                        "pinfer train-predictor, or use the dense path", m->path);
    for (int64_t il = 0; il < m->hp.n_layer; il++)
        if (!m->layers[il].ffn_down_t.data)
            return pi_error(PI_ERR_INVALID, "layer %lld has no ffn_down_t (pi_lm_make_down_t)", (long long)il);
    s->ffn_mode = mode;
    s->hot = hot < 0 ? 0 : hot > m->hp.n_ff ? m->hp.n_ff : hot;
    return PI_OK;
}

void pi_state_set_observer(pi_state *s, pi_ffn_observer fn, void *ctx) {
    s->observer = fn;
    s->observer_ctx = ctx;
}

const float *pi_state_logits(const pi_state *s) { return s->logits; }

/* ---- building blocks ---- */

static void rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = 1.0f / sqrtf((float)(ss / (double)n) + eps);
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * scale * w[i];
}

static void softmax(float *x, int64_t n) {
    float mx = x[0];
    for (int64_t i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

/* Rotate adjacent pairs (2i, 2i+1) of the first n_rot dims of each head
   (llama.cpp's "normal" RoPE mode, as GGUF llama files expect). */
static void rope(const pi_state *s, float *v, int64_t n_heads, int64_t pos) {
    const pi_hparams *hp = &s->m->hp;
    for (int64_t i = 0; i < hp->n_rot / 2; i++) {
        double theta = (double)pos * (double)s->rope_inv_freq[i];
        float c = (float)cos(theta), sn = (float)sin(theta);
        for (int64_t h = 0; h < n_heads; h++) {
            float *p = v + h * hp->head_dim + 2 * i;
            float a = p[0], b = p[1];
            p[0] = a * c - b * sn;
            p[1] = a * sn + b * c;
        }
    }
}

typedef struct {
    const pi_kernels *k;
    const pi_weight *w;
    const uint8_t *base; /* first row of the matrix (an expert's slice for MoE) */
    const uint8_t *x;    /* nb inputs, x_stride bytes apart */
    size_t x_stride;
    float *y;            /* nb outputs, y_stride floats apart */
    int64_t y_stride, nb;
} matmul_job;

/* Rows [r0, r1) for every token of the batch: one matvec per row share for a
   single token (decode streams the weights at memory speed), else one matmul
   call, which reads each weight row once for all nb tokens. */
static void matmul_rows(void *ctx, int64_t r0, int64_t r1, int tid) {
    (void)tid;
    matmul_job *j = ctx;
    if (j->nb == 1) {
        j->k->matvec[j->w->type](j->w->ne[0], j->base, j->w->row_bytes, r0, r1, j->x, j->y);
        return;
    }
    j->k->matmul[j->w->type](j->w->ne[0], j->base, j->w->row_bytes, r0, r1, j->x, j->x_stride, j->nb, j->y,
                             j->y_stride);
}

/* Y[b][0..rows) = W[row0 .. row0+rows) X[b] for the nb rows of X (x_stride
   floats apart). Quantized weights take the Q8_0 form of X, made once per
   distinct input. */
static void matmul(pi_state *s, const pi_weight *w, int64_t row0, int64_t rows, const float *X, int64_t x_stride,
                   int64_t nb, float *Y, int64_t y_stride) {
    const uint8_t *xin = (const uint8_t *)X;
    size_t xin_stride = (size_t)x_stride * sizeof(float);
    if (pi_vec_dot_type(w->type) == PI_TYPE_Q8_0) {
        if (s->xq_src != X || s->xq_nb != nb) {
            for (int64_t b = 0; b < nb; b++)
                s->k->quantize_q8_0(X + b * x_stride, s->xq + b * s->xq_blocks, w->ne[0]);
            s->xq_src = X;
            s->xq_nb = nb;
        }
        xin = (const uint8_t *)s->xq;
        xin_stride = (size_t)s->xq_blocks * sizeof(pi_block_q8_0);
    }
    matmul_job j = {s->k, w, (const uint8_t *)w->data + (size_t)row0 * w->row_bytes, xin, xin_stride, Y, y_stride, nb};
    if (nb == 1) pi_pool_for(s->pool, rows, MATVEC_GRAIN, matmul_rows, &j);
    else pi_pool_for_dynamic(s->pool, rows, MATMUL_BLOCK_ROWS, matmul_rows, &j);
}

/* Float rows were rewritten in place: their Q8_0 copies are stale. */
static void invalidate_input(pi_state *s) { s->xq_src = NULL; }

typedef struct {
    pi_state *s;
    int64_t layer, pos0, nb;
} attn_job;

/* Heads [h0, h1) for every token of the batch; token b sits at pos0 + b and
   attends to positions 0..pos0+b (causal). */
static void attention_heads(void *ctx, int64_t h0, int64_t h1, int tid) {
    (void)tid;
    attn_job *j = ctx;
    pi_state *s = j->s;
    const pi_hparams *hp = &s->m->hp;
    const int64_t D = hp->head_dim, KV = hp->n_head_kv * D, QD = hp->n_head * D, group = hp->n_head / hp->n_head_kv;
    const float *kc = s->k_cache + (size_t)j->layer * (size_t)s->n_ctx * (size_t)KV;
    const float *vc = s->v_cache + (size_t)j->layer * (size_t)s->n_ctx * (size_t)KV;
    const float scale = 1.0f / sqrtf((float)D);
    /* the F32 kernels: a plain float reduction does not vectorise, and
       attention over a long prompt costs as much as the matmuls */
    const pi_vec_dot_fn dot = s->k->vec_dot[PI_TYPE_F32];
    const pi_axpy_fn axpy = s->k->axpy[PI_TYPE_F32];
    for (int64_t h = h0; h < h1; h++) {
        float *att = s->att + h * s->n_ctx;
        const int64_t kvh = h / group;
        for (int64_t b = 0; b < j->nb; b++) {
            const int64_t pos = j->pos0 + b;
            const float *q = s->q + b * QD + h * D;
            for (int64_t t = 0; t <= pos; t++) att[t] = dot(D, kc + t * KV + kvh * D, q) * scale;
            softmax(att, pos + 1);
            float *out = s->xb + b * s->xb_dim + h * D;
            memset(out, 0, (size_t)D * sizeof *out);
            for (int64_t t = 0; t <= pos; t++) axpy(D, att[t], vc + t * KV + kvh * D, out);
        }
    }
}

static void attention(pi_state *s, int64_t il, int64_t pos0, int64_t nb) {
    const pi_hparams *hp = &s->m->hp;
    const pi_layer *l = &s->m->layers[il];
    const int64_t E = hp->n_embd, KV = hp->n_head_kv * hp->head_dim, QD = hp->n_head * hp->head_dim;
    float *kdst = s->k_cache + ((size_t)il * (size_t)s->n_ctx + (size_t)pos0) * (size_t)KV;
    float *vdst = s->v_cache + ((size_t)il * (size_t)s->n_ctx + (size_t)pos0) * (size_t)KV;

    for (int64_t b = 0; b < nb; b++)
        rmsnorm(s->xb + b * s->xb_dim, s->x + b * E, l->attn_norm.data, E, hp->rms_eps);
    invalidate_input(s);
    matmul(s, &l->wq, 0, QD, s->xb, s->xb_dim, nb, s->q, QD);
    matmul(s, &l->wk, 0, KV, s->xb, s->xb_dim, nb, kdst, KV);
    matmul(s, &l->wv, 0, KV, s->xb, s->xb_dim, nb, vdst, KV);
    for (int64_t b = 0; b < nb; b++) {
        rope(s, s->q + b * QD, hp->n_head, pos0 + b);
        rope(s, kdst + b * KV, hp->n_head_kv, pos0 + b);
    }
    attn_job j = {s, il, pos0, nb};
    pi_pool_for(s->pool, hp->n_head, 1, attention_heads, &j);
    invalidate_input(s);
    matmul(s, &l->wo, 0, E, s->xb, s->xb_dim, nb, s->xb2, E);
    for (int64_t i = 0; i < nb * E; i++) s->x[i] += s->xb2[i];
}

typedef struct {
    const pi_kernels *k;
    const pi_weight *w;
    const float *h;
} down_t_job;

/* acc += sum over neurons [i0, i1) of h[i] * row i of down_t; silent
   neurons (h == 0, most of them for ReLU models) cost nothing. */
static void down_t_chunk(void *ctx, int64_t i0, int64_t i1, float *acc, int tid) {
    (void)tid;
    down_t_job *j = ctx;
    pi_axpy_fn axpy = j->k->axpy[j->w->type];
    const uint8_t *base = j->w->data;
    for (int64_t i = i0; i < i1; i++)
        if (j->h[i] != 0.0f) axpy(j->w->ne[0], j->h[i], base + (size_t)i * j->w->row_bytes, acc);
}

/* Y[b] = sum_i H[b][i] * down_t[i] for nb rows of H (the down projection
   with the matrix stored one neuron per row). */
static void matmul_down_t(pi_state *s, const pi_weight *w, const float *H, int64_t h_stride, int64_t nb, float *Y,
                          int64_t y_stride) {
    const int64_t n = w->ne[1], chunk = (n + DOWN_T_CHUNKS - 1) / DOWN_T_CHUNKS;
    for (int64_t b = 0; b < nb; b++) {
        down_t_job j = {s->k, w, H + b * h_stride};
        pi_pool_reduce_f32(s->pool, n, chunk, down_t_chunk, &j, Y + b * y_stride, w->ne[0], s->reduce_scratch);
    }
}

/* hb = act(gate) * up, elementwise over n values. */
static void ffn_activate(pi_ffn_act act, float *hb, const float *hb2, int64_t n) {
    switch (act) {
    case PI_ACT_SILU:
        for (int64_t i = 0; i < n; i++) hb[i] = hb[i] / (1.0f + expf(-hb[i])) * hb2[i];
        break;
    case PI_ACT_RELU:
        for (int64_t i = 0; i < n; i++) hb[i] = hb[i] > 0.0f ? hb[i] * hb2[i] : 0.0f;
        break;
    case PI_ACT_DRELU:
        for (int64_t i = 0; i < n; i++) hb[i] = hb[i] > 0.0f && hb2[i] > 0.0f ? hb[i] * hb2[i] : 0.0f;
        break;
    }
}

/* out[b] = W_down act(W_gate xb[b], W_up xb[b]) for nb normed inputs in xb,
   with expert e's slice of stacked matrices (e = 0 for a dense FFN). */
static void ffn_expert(pi_state *s, const pi_weight *gate, const pi_weight *up, const pi_weight *down, int64_t e,
                       const float *xin, int64_t nb, float *out) {
    const pi_hparams *hp = &s->m->hp;
    const int64_t F = hp->n_ff, E = hp->n_embd;
    matmul(s, gate, e * F, F, xin, s->xb_dim, nb, s->hb, F);
    matmul(s, up, e * F, F, xin, s->xb_dim, nb, s->hb2, F);
    ffn_activate(hp->act, s->hb, s->hb2, nb * F);
    if (s->observer && !hp->n_expert)
        for (int64_t b = 0; b < nb; b++)
            s->observer(s->observer_ctx, s->cur_layer, s->cur_pos0 + b, xin + b * s->xb_dim, s->hb + b * F);
    invalidate_input(s);
    if (down->data) matmul(s, down, e * E, E, s->hb, F, nb, out, E);
    else matmul_down_t(s, &s->m->layers[s->cur_layer].ffn_down_t, s->hb, F, nb, out, E);
}

/* Mixtral routing for one token (xb row b): top-k router logits, softmax
   over the chosen ones, weighted sum of those experts' outputs. */
static void moe_token(pi_state *s, const pi_layer *l, int64_t b) {
    const pi_hparams *hp = &s->m->hp;
    const int64_t E = hp->n_embd;
    const float *xin = s->xb + b * s->xb_dim;
    matmul(s, &l->ffn_gate_inp, 0, hp->n_expert, xin, s->xb_dim, 1, s->router, hp->n_expert);
    int64_t chosen[64];
    float wsel[64];
    const int64_t K = hp->n_expert_used < 64 ? hp->n_expert_used : 64;
    for (int64_t k = 0; k < K; k++) {
        int64_t best = -1;
        for (int64_t e = 0; e < hp->n_expert; e++) {
            bool used = false;
            for (int64_t q = 0; q < k; q++) used |= chosen[q] == e;
            if (!used && (best < 0 || s->router[e] > s->router[best])) best = e;
        }
        chosen[k] = best;
        wsel[k] = s->router[best];
    }
    softmax(wsel, K);
    memset(s->moe_out, 0, (size_t)E * sizeof(float));
    for (int64_t k = 0; k < K; k++) {
        ffn_expert(s, &l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps, chosen[k], xin, 1, s->moe_out + E);
        for (int64_t i = 0; i < E; i++) s->moe_out[i] += wsel[k] * s->moe_out[E + i];
    }
    memcpy(s->xb2 + b * E, s->moe_out, (size_t)E * sizeof(float));
}

/* ---- sparse FFN (decode) ----
   One token's FFN over a list of neurons: entries [0, n) of sp_idx, in
   neuron order, the hot prefix first. Entry k has its gate, up and down_t
   rows at sp_row[3k..3k+2] (in the weights here; in cache slots when the FFN
   is read from flash), and its activation in sp_val[k] once computed. The
   down projection sums val * down row over the list in fixed chunks of the
   list, so the result depends only on the list, not on where the rows live
   or on the thread count. */

typedef struct {
    pi_state *s;
    const void *xg, *xu; /* FFN input in the gate's and the up's kernel form */
    const float *gate;   /* ORACLE: precomputed gate (and up) values, else NULL */
    const float *up;
    int64_t first;       /* list position of the first entry to compute */
} cold_job;

/* act(g, u) for one neuron, 0 when silent. */
static inline float activation(pi_ffn_act act, float g, float u) {
    if (g <= 0.0f) return 0.0f;
    if (act == PI_ACT_DRELU && u <= 0.0f) return 0.0f;
    return g * u;
}

#define ROWS_BATCH 64 /* rows per gathered dot-product call (fewer than ~8 gain nothing) */

/* sp_val[k] = act(gate . x, up . x) for the n list entries ks[0..n): the
   gate rows in gathered batches, then the up rows of the entries whose gate
   fired (the up row is skipped when the gate is silent). */
static void compute_entries(const cold_job *j, const int64_t *ks, int64_t n) {
    pi_state *s = j->s;
    const pi_ffn_types *t = &s->sp_types;
    const int64_t E = s->m->hp.n_embd;
    const void *rows[ROWS_BATCH];
    float g[ROWS_BATCH], u[ROWS_BATCH];
    int idx[ROWS_BATCH];
    for (int64_t b0 = 0; b0 < n; b0 += ROWS_BATCH) {
        const int nb = (int)(n - b0 < ROWS_BATCH ? n - b0 : ROWS_BATCH);
        if (j->gate) {
            for (int r = 0; r < nb; r++) g[r] = j->gate[s->sp_idx[ks[b0 + r]]];
        } else {
            for (int r = 0; r < nb; r++) rows[r] = s->sp_row[3 * ks[b0 + r]];
            s->k->vec_dot_rows[t->gate](E, rows, nb, j->xg, g);
        }
        int m = 0;
        for (int r = 0; r < nb; r++) {
            s->sp_val[ks[b0 + r]] = 0.0f;
            if (g[r] > 0.0f) idx[m++] = r;
        }
        if (j->up) {
            for (int q = 0; q < m; q++) u[q] = j->up[s->sp_idx[ks[b0 + idx[q]]]];
        } else {
            for (int q = 0; q < m; q++) rows[q] = s->sp_row[3 * ks[b0 + idx[q]] + 1];
            s->k->vec_dot_rows[t->up](E, rows, m, j->xu, u);
        }
        for (int q = 0; q < m; q++) s->sp_val[ks[b0 + idx[q]]] = activation(s->m->hp.act, g[idx[q]], u[q]);
    }
}

/* compute_entries for the list entries first + [k0, k1). */
static void cold_rows(void *ctx, int64_t k0, int64_t k1, int tid) {
    (void)tid;
    const cold_job *j = ctx;
    int64_t ks[ROWS_BATCH];
    for (int64_t b0 = j->first + k0; b0 < j->first + k1; b0 += ROWS_BATCH) {
        int64_t nb = j->first + k1 - b0 < ROWS_BATCH ? j->first + k1 - b0 : ROWS_BATCH;
        for (int64_t r = 0; r < nb; r++) ks[r] = b0 + r;
        compute_entries(j, ks, nb);
    }
}

typedef struct {
    const pi_state *s;
    int64_t E;
    pi_axpy_fn axpy;
} sparse_down_job;

/* acc += sum over list entries [k0, k1) of val[k] * down row of entry k. */
static void sparse_down_chunk(void *ctx, int64_t k0, int64_t k1, float *acc, int tid) {
    (void)tid;
    sparse_down_job *j = ctx;
    for (int64_t k = k0; k < k1; k++)
        if (j->s->sp_val[k] != 0.0f) j->axpy(j->E, j->s->sp_val[k], j->s->sp_row[3 * k + 2], acc);
}

/* The predictor's selection for row 0 of xb: sp_idx[0, n) = the hot prefix
   [0, hot), then the cold neurons whose fc2 logit reaches the layer's
   threshold. Returns n. */
static int64_t sparse_select(pi_state *s, int64_t il, int64_t hot) {
    const pi_layer *l = &s->m->layers[il];
    const int64_t R = l->fc1.ne[1], F = s->m->hp.n_ff;
    float *u = s->sp_val, *z = s->sp_pred; /* sp_val is free until the activations */
    matmul(s, &l->fc1, 0, R, s->xb, s->xb_dim, 1, u, R);
    for (int64_t r = 0; r < R; r++) u[r] = u[r] > 0.0f ? u[r] : 0.0f;
    matmul(s, &l->fc2, 0, F, u, R, 1, z, F);
    s->sp_stats[il].bytes += l->fc1.row_bytes * (uint64_t)R + l->fc2.row_bytes * (uint64_t)F;
    const float thr = s->m->layer_threshold ? s->m->layer_threshold[il] : s->m->sparse_threshold;
    int64_t n = 0;
    for (int64_t i = 0; i < hot; i++) s->sp_idx[n++] = (int32_t)i;
    for (int64_t i = hot; i < F; i++)
        if (z[i] >= thr) s->sp_idx[n++] = (int32_t)i;
    return n;
}

/* With sp_check on: the exact active set of row 0 of xb (every gate, and for
   dReLU every up, computed into hb/hb2), counted against the selection. */
static void sparse_check(pi_state *s, int64_t il, int64_t n) {
    const pi_layer *l = &s->m->layers[il];
    const int64_t F = s->m->hp.n_ff;
    matmul(s, &l->ffn_gate, 0, F, s->xb, s->xb_dim, 1, s->hb, F);
    if (s->m->hp.act == PI_ACT_DRELU) matmul(s, &l->ffn_up, 0, F, s->xb, s->xb_dim, 1, s->hb2, F);
    uint64_t truth = 0, missed = 0;
    for (int64_t i = 0, k = 0; i < F; i++) {
        while (k < n && s->sp_idx[k] < i) k++;
        bool on = s->hb[i] > 0.0f && (s->m->hp.act != PI_ACT_DRELU || s->hb2[i] > 0.0f);
        truth += on;
        missed += on && !(k < n && s->sp_idx[k] == i);
    }
    s->sp_stats[il].oracle_active += truth;
    s->sp_stats[il].missed += missed;
}

/* Counts a token's list of n entries in the layer's statistics; returns
   how many were active. */
static int64_t count_list(pi_state *s, int64_t il, int64_t n) {
    pi_sparse_stats *st = &s->sp_stats[il];
    int64_t a = 0;
    for (int64_t k = 0; k < n; k++) a += s->sp_val[k] != 0.0f;
    st->tokens++;
    st->predicted += (uint64_t)n;
    st->computed += (uint64_t)n;
    st->active += (uint64_t)a;
    return a;
}

/* Down projection and bookkeeping once sp_val[0, n) is known: xb2 row 0 =
   sum of val * down row, in fixed chunks of the list. */
static void sparse_finish(pi_state *s, int64_t il, int64_t n) {
    const pi_layer *l = &s->m->layers[il];
    const int64_t a = count_list(s, il, n);
    s->sp_stats[il].bytes += l->ffn_down_t.row_bytes * (uint64_t)a;
    sparse_down_job dj = {s, s->m->hp.n_embd, s->k->axpy[s->sp_types.down]};
    int64_t chunk = (n + DOWN_T_CHUNKS - 1) / DOWN_T_CHUNKS;
    pi_pool_reduce_f32(s->pool, n, chunk ? chunk : 1, sparse_down_chunk, &dj, s->xb2, s->m->hp.n_embd,
                       s->reduce_scratch);
}

/* The session's hot prefix [0, hot) as one dense cluster: sp_val of the
   first hot list entries, from rows [0, hot) of gate and up. */
static void hot_cluster(pi_state *s, const pi_weight *gate, const pi_weight *up) {
    if (s->hot <= 0) return;
    matmul(s, gate, 0, s->hot, s->xb, s->xb_dim, 1, s->hb, s->hot);
    matmul(s, up, 0, s->hot, s->xb, s->xb_dim, 1, s->hb2, s->hot);
    for (int64_t i = 0; i < s->hot; i++) s->sp_val[i] = activation(s->m->hp.act, s->hb[i], s->hb2[i]);
}

/* The FFN input of row 0 of xb in the form the gate and up kernels take. */
static cold_job cold_input(pi_state *s, int64_t first) {
    const void *xq = s->xb;
    bool qg = pi_vec_dot_type(s->sp_types.gate) == PI_TYPE_Q8_0, qu = pi_vec_dot_type(s->sp_types.up) == PI_TYPE_Q8_0;
    if (qg || qu) {
        s->k->quantize_q8_0(s->xb, s->sp_xq, s->m->hp.n_embd);
        xq = s->sp_xq;
    }
    return (cold_job){s, qg ? xq : s->xb, qu ? xq : s->xb, NULL, NULL, first};
}

/* The FFN of one token on the sparse path: out = sum over active neurons i
   of act_i * down_t[i], computing only the neurons that are (predicted)
   active. The input is row 0 of xb; the result goes to row 0 of xb2. */
static void ffn_sparse(pi_state *s, int64_t il) {
    const pi_lm *m = s->m;
    const pi_hparams *hp = &m->hp;
    const pi_layer *l = &m->layers[il];
    const int64_t F = hp->n_ff;
    pi_sparse_stats *st = &s->sp_stats[il];
    int64_t n = 0, first = 0;
    cold_job cj;
    s->sp_types = (pi_ffn_types){l->ffn_gate.type, l->ffn_up.type, l->ffn_down_t.type};

    if (s->ffn_mode == PI_FFN_ORACLE) {
        /* the exact mask: every gate (and for dReLU every up) computed */
        matmul(s, &l->ffn_gate, 0, F, s->xb, s->xb_dim, 1, s->hb, F);
        if (hp->act == PI_ACT_DRELU) matmul(s, &l->ffn_up, 0, F, s->xb, s->xb_dim, 1, s->hb2, F);
        for (int64_t i = 0; i < F; i++)
            if (s->hb[i] > 0.0f && (hp->act != PI_ACT_DRELU || s->hb2[i] > 0.0f)) s->sp_idx[n++] = (int32_t)i;
        st->bytes += l->ffn_gate.row_bytes * (uint64_t)F + (hp->act == PI_ACT_DRELU ? l->ffn_up.row_bytes * (uint64_t)F : 0);
        cj = cold_input(s, 0);
        cj.gate = s->hb;
        cj.up = hp->act == PI_ACT_DRELU ? s->hb2 : NULL;
    } else {
        n = sparse_select(s, il, s->hot);
        if (s->sp_check) sparse_check(s, il, n);
        first = s->hot;
        hot_cluster(s, &l->ffn_gate, &l->ffn_up);
        st->bytes += (l->ffn_gate.row_bytes + l->ffn_up.row_bytes) * (uint64_t)s->hot;
        cj = cold_input(s, first);
    }
    for (int64_t k = 0; k < n; k++) {
        size_t i = (size_t)s->sp_idx[k];
        s->sp_row[3 * k] = (const uint8_t *)l->ffn_gate.data + i * l->ffn_gate.row_bytes;
        s->sp_row[3 * k + 1] = (const uint8_t *)l->ffn_up.data + i * l->ffn_up.row_bytes;
        s->sp_row[3 * k + 2] = (const uint8_t *)l->ffn_down_t.data + i * l->ffn_down_t.row_bytes;
    }
    if (n > first) pi_pool_for(s->pool, n - first, 16, cold_rows, &cj);
    if (s->ffn_mode != PI_FFN_ORACLE) {
        uint64_t computed_up = 0;
        for (int64_t k = first; k < n; k++) computed_up += s->sp_val[k] != 0.0f;
        st->bytes += l->ffn_gate.row_bytes * (uint64_t)(n - first) + l->ffn_up.row_bytes * computed_up;
    }
    sparse_finish(s, il, n);
}

/* ---- FFN from flash (model/offload.h) ---- */

typedef struct {
    cold_job c;
    const int64_t *list; /* list entries to compute */
} list_job;

static void list_rows(void *ctx, int64_t i0, int64_t i1, int tid) {
    (void)tid;
    list_job *j = ctx;
    compute_entries(&j->c, j->list + i0, i1 - i0);
}

#define REAP_BATCH 16        /* reads to wait for at once: one wake-up per batch, not per read */
#define LIST_PARALLEL_MIN 48 /* fewer entries run on the calling thread: a pool wake-up costs more */

static void compute_list(pi_state *s, const cold_job *cj, const int64_t *list, int64_t n) {
    if (n <= 0) return;
    list_job j = {*cj, list};
    j.c.first = 0;
    if (n < LIST_PARALLEL_MIN) list_rows(&j, 0, n, 0);
    else pi_pool_for_dynamic(s->pool, n, ROWS_BATCH, list_rows, &j);
}

static void set_rows(pi_state *s, int64_t k, const uint8_t *g, const uint8_t *u, const uint8_t *d) {
    s->sp_row[3 * k] = g;
    s->sp_row[3 * k + 1] = u;
    s->sp_row[3 * k + 2] = d;
}

/* The cache slot list entry k's rows were placed in. */
static int64_t miss_slot(const pi_state *s, int64_t k) {
    const pi_offload *o = s->off;
    return (int64_t)((size_t)(s->sp_row[3 * k] - o->part_off[0] - pi_ncache_slot(o->cache, 0)) / o->stride);
}

/* Issue the reads of the wave's misses o->miss[0, n_miss): neighbouring
   neurons go in one read (up to max_merge bundles), each bundle into its
   own slot. Returns the number of reads. */
static pi_status issue_reads(pi_state *s, int64_t il, int64_t n_miss, int64_t *n_runs) {
    pi_offload *o = s->off;
    int64_t r = 0;
    for (int64_t m = 0; m < n_miss; m++) {
        int64_t k = o->miss[m];
        if (m > 0 && s->sp_idx[k] == s->sp_idx[o->miss[m - 1]] + 1 && o->run_len[r - 1] < o->max_merge) {
            o->run_len[r - 1]++;
        } else {
            o->run_first[r] = m;
            o->run_len[r++] = 1;
        }
        o->iov[m] = (struct iovec){(void *)(s->sp_row[3 * k] - o->part_off[0]), o->stride};
    }
    for (int64_t i = 0; i < r; i++) {
        int64_t k = o->miss[o->run_first[i]];
        o->reqs[i] = (pi_io_req){o->bundle_off[il] + (int64_t)s->sp_idx[k] * (int64_t)o->stride,
                                 &o->iov[o->run_first[i]], o->run_len[i], (uint64_t)i};
        o->st.merged += o->run_len[i] > 1;
    }
    o->st.reads += (uint64_t)r;
    o->st.bytes += (uint64_t)n_miss * o->stride;
    *n_runs = r;
    return r ? pi_io_submit(o->io, o->reqs, (int)r) : PI_OK;
}

/* The sparse FFN of one token with the rows in the hot region, the neuron
   cache, or on flash. The list is processed in waves of whole down chunks
   (one wave unless the cache cannot hold a layer's misses at once): pin what
   is cached, read the misses, compute the resident and cached neurons while
   the reads run, then each read's neurons as it completes, then the wave's
   chunk partials. The result equals ffn_sparse's bit for bit. */
static pi_status ffn_offload(pi_state *s, int64_t il) {
    pi_offload *o = s->off;
    const pi_hparams *hp = &s->m->hp;
    const int64_t E = hp->n_embd, Hres = o->hot[il];
    const pi_weight *hw = &o->hot_w[3 * il];
    uint64_t t0 = pi_time_ns();
    s->sp_types = (pi_ffn_types){o->part_type[0], o->part_type[1], o->part_type[2]};
    const int64_t n = sparse_select(s, il, s->hot);
    hot_cluster(s, &hw[0], &hw[1]);
    for (int64_t k = 0; k < s->hot; k++)
        set_rows(s, k, NULL, NULL, (const uint8_t *)hw[2].data + (size_t)k * hw[2].row_bytes);
    cold_job cj = cold_input(s, 0);
    const int64_t q = n > 0 ? (n + DOWN_T_CHUNKS - 1) / DOWN_T_CHUNKS : 1, n_chunks = (n + q - 1) / q;
    sparse_down_job dj = {s, E, s->k->axpy[s->sp_types.down]};
    for (int64_t c0 = 0; c0 < n_chunks;) {
        int64_t n_ready = 0, n_miss = 0, c1 = c0;
        for (; c1 < n_chunks; c1++) {
            const int64_t mark_m = n_miss, mark_r = n_ready;
            uint64_t resident = 0, hits = 0;
            int64_t k = c1 * q > s->hot ? c1 * q : s->hot, k_end = (c1 + 1) * q < n ? (c1 + 1) * q : n;
            bool fits = true;
            for (; k < k_end; k++) {
                const int64_t i = s->sp_idx[k];
                if (i < Hres) {
                    set_rows(s, k, (const uint8_t *)hw[0].data + (size_t)i * hw[0].row_bytes,
                             (const uint8_t *)hw[1].data + (size_t)i * hw[1].row_bytes,
                             (const uint8_t *)hw[2].data + (size_t)i * hw[2].row_bytes);
                    o->ready[n_ready++] = k;
                    resident++;
                    continue;
                }
                int64_t slot = pi_ncache_get(o->cache, il, i);
                const bool hit = slot >= 0;
                if (!hit && (slot = pi_ncache_alloc(o->cache, il, i)) < 0) {
                    fits = false;
                    break;
                }
                const uint8_t *b = pi_ncache_slot(o->cache, slot);
                set_rows(s, k, b + o->part_off[0], b + o->part_off[1], b + o->part_off[2]);
                if (hit) o->ready[n_ready++] = k; /* computed while the misses are read */
                else o->miss[n_miss++] = k;
                hits += hit;
            }
            if (!fits) { /* this chunk does not fit beside the wave: undo its misses */
                for (int64_t m = mark_m; m < n_miss; m++) pi_ncache_drop(o->cache, miss_slot(s, o->miss[m]));
                n_miss = mark_m;
                n_ready = mark_r;
                break;
            }
            o->st.resident += resident;
            o->st.hits += hits;
            o->st.misses += (uint64_t)(n_miss - mark_m);
        }
        if (c1 == c0)
            return pi_error(PI_ERR_NOMEM, "%s: the neuron cache (%lld slots) cannot hold one chunk of layer %lld's "
                            "neurons", o->path, (long long)pi_ncache_slots(o->cache), (long long)il);
        int64_t n_runs = 0;
        pi_status err = issue_reads(s, il, n_miss, &n_runs);
        const uint64_t t_issue = pi_time_ns();
        compute_list(s, &cj, o->ready, n_ready);
        for (int64_t done = 0; !err && done < n_runs;) {
            const uint64_t t_wait = pi_time_ns();
            int got = pi_io_reap_min(o->io, o->tags, (int)(n_runs - done), REAP_BATCH);
            o->st.io_wait_ns += pi_time_ns() - t_wait;
            if (got < 0) {
                err = PI_ERR_IO;
                break;
            }
            int64_t nr = 0;
            for (int g = 0; g < got; g++)
                for (int32_t b = 0; b < o->run_len[o->tags[g]]; b++) o->ready[nr++] = o->miss[o->run_first[o->tags[g]] + b];
            compute_list(s, &cj, o->ready, nr);
            done += got;
        }
        if (n_runs > 0) o->st.io_busy_ns += pi_time_ns() - t_issue; /* until the last read's neurons are computed */
        if (err) { /* the slots of this wave's reads hold nothing usable */
            for (int64_t m = 0; m < n_miss; m++) pi_ncache_drop(o->cache, miss_slot(s, o->miss[m]));
            pi_ncache_next_epoch(o->cache);
            return err;
        }
        pi_pool_reduce_f32_chunks(s->pool, n, q, c0, c1, sparse_down_chunk, &dj, E, s->reduce_scratch);
        pi_ncache_next_epoch(o->cache);
        if (c0 > 0 || c1 < n_chunks) o->st.waves++;
        c0 = c1;
    }
    pi_pool_reduce_f32_sum(s->pool, n, q, s->xb2, E, s->reduce_scratch);
    count_list(s, il, n);
    o->st.ffn_ns += pi_time_ns() - t0;
    return PI_OK;
}

typedef struct {
    pi_state *s;
    const uint8_t *down; /* the piece's first bundle's down row */
    size_t stride;
    int64_t i0, rows, q, F, E;
} stream_down_job;

/* For tokens [b0, b1): add the piece's neurons to the running chunk
   partial, closing a chunk (sum += partial) at each chunk boundary: the
   order of matmul_down_t's reduction, neuron by neuron. */
static void stream_down(void *ctx, int64_t b0, int64_t b1, int tid) {
    (void)tid;
    stream_down_job *j = ctx;
    pi_state *s = j->s;
    pi_axpy_fn axpy = s->k->axpy[s->sp_types.down];
    for (int64_t b = b0; b < b1; b++) {
        float *part = s->stream_acc + b * j->E, *sum = s->stream_acc + (PI_MAX_BATCH + b) * j->E;
        const float *h = s->hb + b * j->F;
        for (int64_t r = 0; r < j->rows; r++) {
            int64_t i = j->i0 + r;
            if (i % j->q == 0 && i > 0) {
                for (int64_t d = 0; d < j->E; d++) sum[d] += part[d];
                memset(part, 0, (size_t)j->E * sizeof *part);
            }
            if (h[i] != 0.0f) axpy(j->E, h[i], j->down + (size_t)r * j->stride, part);
        }
    }
}

/* The dense FFN of a prompt batch with the FFN on flash: each layer's
   bundles stream through two buffers (the next piece is read while this
   one is computed), giving exactly the in-memory dense result. */
static pi_status ffn_stream(pi_state *s, int64_t il, int64_t nb) {
    pi_offload *o = s->off;
    const pi_hparams *hp = &s->m->hp;
    const int64_t F = hp->n_ff, E = hp->n_embd, R = o->stream_rows;
    const int64_t q = (F + DOWN_T_CHUNKS - 1) / DOWN_T_CHUNKS;
    s->sp_types = (pi_ffn_types){o->part_type[0], o->part_type[1], o->part_type[2]};
    memset(s->stream_acc, 0, 2 * PI_MAX_BATCH * (size_t)E * sizeof(float));
    struct iovec iov[2];
    pi_status err = PI_OK;
    for (int64_t i0 = 0, p = 0; i0 < F; i0 += R, p ^= 1) {
        const int64_t rows = F - i0 < R ? F - i0 : R;
        if (i0 == 0) { /* the first piece; later ones were issued one piece ahead */
            iov[0] = (struct iovec){o->stream_buf[0], (size_t)rows * o->stride};
            pi_io_req rq = {o->bundle_off[il], &iov[0], 1, 0};
            if ((err = pi_io_submit(o->io, &rq, 1))) return err;
        }
        uint64_t tag;
        if (pi_io_reap(o->io, &tag, 1, true) != 1) return PI_ERR_IO;
        if (i0 + R < F) {
            const int64_t next = F - i0 - R < R ? F - i0 - R : R;
            iov[p ^ 1] = (struct iovec){o->stream_buf[p ^ 1], (size_t)next * o->stride};
            pi_io_req rq = {o->bundle_off[il] + (i0 + R) * (int64_t)o->stride, &iov[p ^ 1], 1, 0};
            if ((err = pi_io_submit(o->io, &rq, 1))) return err;
        }
        o->st.prefill_bytes += (uint64_t)rows * o->stride;
        const uint8_t *buf = o->stream_buf[p];
        pi_weight g = {buf + o->part_off[0], o->part_type[0], {E, rows, 1, 1}, o->stride, {0, NULL}};
        pi_weight u = {buf + o->part_off[1], o->part_type[1], {E, rows, 1, 1}, o->stride, {0, NULL}};
        matmul(s, &g, 0, rows, s->xb, s->xb_dim, nb, s->hb + i0, F);
        matmul(s, &u, 0, rows, s->xb, s->xb_dim, nb, s->hb2 + i0, F);
        for (int64_t b = 0; b < nb; b++) ffn_activate(hp->act, s->hb + b * F + i0, s->hb2 + b * F + i0, rows);
        stream_down_job dj = {s, buf + o->part_off[2], o->stride, i0, rows, q, F, E};
        pi_pool_for(s->pool, nb, 1, stream_down, &dj);
    }
    for (int64_t b = 0; b < nb; b++) {
        float *part = s->stream_acc + b * E, *sum = s->stream_acc + (PI_MAX_BATCH + b) * E;
        for (int64_t d = 0; d < E; d++) s->xb2[b * E + d] = sum[d] + part[d];
    }
    invalidate_input(s);
    return PI_OK;
}

/* Row `tok` of the token embedding, from flash when it is not resident. */
static pi_status embedding_row(pi_state *s, int32_t tok, float *out) {
    const pi_weight *w = &s->m->tok_embd;
    if (!s->off || !s->off->embd_on_flash) {
        pi_weight_row_f32(w, tok, out);
        return PI_OK;
    }
    pi_offload *o = s->off;
    /* the row's covering aligned range straight into the aligned buffer
       (pi_io_read would otherwise bounce through a buffer of its own) */
    const int64_t a = (int64_t)pi_io_align(o->io), off = o->embd_off + (int64_t)tok * (int64_t)w->row_bytes;
    const int64_t at = off / a * a, skip = off - at;
    int64_t want = (skip + (int64_t)w->row_bytes + a - 1) / a * a;
    if (at + want > pi_io_file_size(o->io)) want = pi_io_file_size(o->io) - at; /* a row at the end of the file */
    pi_status st = pi_io_read(o->io, at, o->embd_buf, (size_t)want);
    if (st) return st;
    o->st.bytes += (uint64_t)want;
    pi_weight row = *w;
    row.data = o->embd_buf + skip;
    pi_weight_row_f32(&row, 0, out);
    return PI_OK;
}

pi_status pi_state_set_offload(pi_state *s, pi_offload *off) {
    if (off && (off->n_layer != s->m->hp.n_layer || off->n_ff != s->m->hp.n_ff))
        return pi_error(PI_ERR_INVALID, "the offload state belongs to another model");
    s->off = off;
    return PI_OK;
}

static pi_status ffn(pi_state *s, int64_t il, int64_t nb) {
    const pi_hparams *hp = &s->m->hp;
    const pi_layer *l = &s->m->layers[il];
    const int64_t E = hp->n_embd;
    pi_status st = PI_OK;
    for (int64_t b = 0; b < nb; b++)
        rmsnorm(s->xb + b * s->xb_dim, s->x + b * E, l->ffn_norm.data, E, hp->rms_eps);
    invalidate_input(s);
    if (s->ffn_mode != PI_FFN_DENSE && nb == 1) {
        if (s->off) st = ffn_offload(s, il);
        else ffn_sparse(s, il);
    } else if (s->off) {
        st = ffn_stream(s, il, nb);
    } else if (!hp->n_expert) {
        ffn_expert(s, &l->ffn_gate, &l->ffn_up, &l->ffn_down, 0, s->xb, nb, s->xb2);
    } else {
        /* routing differs per token: tokens go one at a time */
        for (int64_t b = 0; b < nb; b++) moe_token(s, l, b);
    }
    if (st) return st;
    for (int64_t i = 0; i < nb * E; i++) s->x[i] += s->xb2[i];
    return PI_OK;
}

/* nb tokens at positions pos0..; logits of the last token into s->logits,
   and of every token into all_logits when it is not NULL. Fails only when
   the FFN is read from flash and a read fails. */
static pi_status forward(pi_state *s, const int32_t *tokens, int64_t nb, int64_t pos0, float *all_logits) {
    const pi_lm *m = s->m;
    const pi_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd;
    pi_status st;
    for (int64_t b = 0; b < nb; b++)
        if ((st = embedding_row(s, tokens[b], s->x + b * E))) return st;
    s->cur_pos0 = pos0;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        s->cur_layer = il;
        attention(s, il, pos0, nb);
        if ((st = ffn(s, il, nb))) return st;
    }
    int64_t first = all_logits ? 0 : nb - 1;
    for (int64_t b = first; b < nb; b++)
        rmsnorm(s->xb + b * s->xb_dim, s->x + b * E, m->output_norm.data, E, hp->rms_eps);
    invalidate_input(s);
    if (all_logits) {
        matmul(s, &m->output, 0, hp->n_vocab, s->xb, s->xb_dim, nb, all_logits, hp->n_vocab);
        memcpy(s->logits, all_logits + (nb - 1) * hp->n_vocab, (size_t)hp->n_vocab * sizeof(float));
    } else {
        matmul(s, &m->output, 0, hp->n_vocab, s->xb + first * s->xb_dim, s->xb_dim, 1, s->logits, hp->n_vocab);
    }
    if (s->off && nb == 1) s->off->st.tokens++;
    return PI_OK;
}

static pi_status decode(pi_state *s, const int32_t *tokens, int64_t n, float *all_logits) {
    const pi_hparams *hp = &s->m->hp;
    if (n < 0 || s->n_past + n > s->n_ctx)
        return pi_error(PI_ERR_INVALID, "%lld tokens at position %lld exceed the context of %lld", (long long)n,
                        (long long)s->n_past, (long long)s->n_ctx);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return pi_error(PI_ERR_INVALID, "token id %d at index %lld is outside the vocabulary of %lld", tokens[i],
                            (long long)i, (long long)hp->n_vocab);
    for (int64_t i = 0; i < n; i += PI_MAX_BATCH) {
        int64_t nb = n - i < PI_MAX_BATCH ? n - i : PI_MAX_BATCH;
        pi_status st = forward(s, tokens + i, nb, s->n_past, all_logits ? all_logits + i * hp->n_vocab : NULL);
        if (st) return st;
        s->n_past += nb;
    }
    return PI_OK;
}

pi_status pi_state_decode(pi_state *s, const int32_t *tokens, int64_t n) { return decode(s, tokens, n, NULL); }

pi_status pi_state_decode_all(pi_state *s, const int32_t *tokens, int64_t n, float *logits) {
    return decode(s, tokens, n, logits);
}

void pi_state_set_sparse_check(pi_state *s, bool on) { s->sp_check = on; }
