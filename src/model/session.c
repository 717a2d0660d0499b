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

#include "base/log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MATVEC_GRAIN 16 /* rows per chunk: contiguous row shares per thread */

static void *xalloc(size_t n, pi_status *st) {
    void *p = NULL;
    if (*st) return NULL;
    if (n == 0) n = 1;
    if (posix_memalign(&p, 64, n)) {
        *st = PI_ERR_NOMEM;
        return NULL;
    }
    memset(p, 0, n);
    return p;
}

pi_status pi_session_create(const pi_model *m, int64_t n_ctx, int n_threads, pi_session **out) {
    *out = NULL;
    const pi_hparams *hp = &m->hp;
    if (n_ctx <= 0) n_ctx = hp->n_ctx_train;
    if (n_ctx > ((int64_t)1 << 24)) return pi_error(PI_ERR_INVALID, "context size %lld is too large", (long long)n_ctx);
    pi_session *s = calloc(1, sizeof *s);
    if (!s) return pi_error(PI_ERR_NOMEM, "session: out of memory");
    s->m = m;
    s->k = pi_kernels_get();
    s->n_ctx = n_ctx;
    pi_status st = pi_pool_create(n_threads, &s->pool);
    if (st) {
        free(s);
        return st;
    }
    const int64_t E = hp->n_embd, KV = hp->n_head_kv * hp->head_dim, QD = hp->n_head * hp->head_dim;
    int64_t widest = E > hp->n_ff ? E : hp->n_ff;
    if (QD > widest) widest = QD;
    size_t kv_bytes = (size_t)hp->n_layer * (size_t)n_ctx * (size_t)KV * sizeof(float);
    s->k_cache = xalloc(kv_bytes, &st);
    s->v_cache = xalloc(kv_bytes, &st);
    s->x = xalloc((size_t)E * sizeof(float), &st);
    s->xb = xalloc((size_t)(E > QD ? E : QD) * sizeof(float), &st);
    s->xb2 = xalloc((size_t)E * sizeof(float), &st);
    s->q = xalloc((size_t)QD * sizeof(float), &st);
    s->att = xalloc((size_t)hp->n_head * (size_t)n_ctx * sizeof(float), &st);
    s->hb = xalloc((size_t)hp->n_ff * sizeof(float), &st);
    s->hb2 = xalloc((size_t)hp->n_ff * sizeof(float), &st);
    s->logits = xalloc((size_t)hp->n_vocab * sizeof(float), &st);
    s->rope_inv_freq = xalloc((size_t)(hp->n_rot / 2) * sizeof(float), &st);
    s->xq = xalloc((size_t)(widest / 32 + 1) * sizeof(pi_block_q8_0), &st);
    s->router = xalloc((size_t)(hp->n_expert + 1) * sizeof(float), &st);
    s->moe_out = xalloc((size_t)E * sizeof(float), &st);
    if (st) {
        pi_session_free(s);
        return pi_error(PI_ERR_NOMEM, "session: cannot allocate %.1f MiB of KV cache and scratch for context %lld",
                        (double)(2 * kv_bytes) / (1 << 20), (long long)n_ctx);
    }
    for (int64_t i = 0; i < hp->n_rot / 2; i++)
        s->rope_inv_freq[i] = (float)pow((double)hp->rope_freq_base, -2.0 * (double)i / (double)hp->n_rot);
    *out = s;
    return PI_OK;
}

void pi_session_free(pi_session *s) {
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
    free(s);
}

void pi_session_reset(pi_session *s) { s->n_past = 0; }

const float *pi_session_logits(const pi_session *s) { return s->logits; }

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
static void rope(const pi_session *s, float *v, int64_t n_heads, int64_t pos) {
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
    const void *x;
    float *y;
} matvec_job;

static void matvec_rows(void *ctx, int64_t r0, int64_t r1, int tid) {
    (void)tid;
    matvec_job *j = ctx;
    j->k->matvec[j->w->type](j->w->ne[0], j->base, j->w->row_bytes, r0, r1, j->x, j->y);
}

/* The input in the form W's kernel takes: the float vector itself, or its
   Q8_0 quantization (made once per distinct input vector). */
static const void *prepare_input(pi_session *s, pi_type wtype, const float *x, int64_t n) {
    if (pi_vec_dot_type(wtype) != PI_TYPE_Q8_0) return x;
    if (s->xq_src != x) {
        s->k->quantize_q8_0(x, s->xq, n);
        s->xq_src = x;
    }
    return s->xq;
}

/* y[0..rows) = W x for `rows` rows starting at row0 of W (row0 > 0 selects an expert). */
static void matvec(pi_session *s, const pi_weight *w, int64_t row0, int64_t rows, const float *x, float *y) {
    matvec_job j = {s->k, w, (const uint8_t *)w->data + (size_t)row0 * w->row_bytes,
                    prepare_input(s, w->type, x, w->ne[0]), y};
    pi_pool_for(s->pool, rows, MATVEC_GRAIN, matvec_rows, &j);
}

/* A float vector was rewritten in place: its Q8_0 copy is stale. */
static void invalidate_input(pi_session *s) { s->xq_src = NULL; }

typedef struct {
    pi_session *s;
    int64_t layer, pos;
} attn_job;

static void attention_heads(void *ctx, int64_t h0, int64_t h1, int tid) {
    (void)tid;
    attn_job *j = ctx;
    pi_session *s = j->s;
    const pi_hparams *hp = &s->m->hp;
    const int64_t D = hp->head_dim, KV = hp->n_head_kv * D, group = hp->n_head / hp->n_head_kv;
    const float *kc = s->k_cache + (size_t)j->layer * (size_t)s->n_ctx * (size_t)KV;
    const float *vc = s->v_cache + (size_t)j->layer * (size_t)s->n_ctx * (size_t)KV;
    const float scale = 1.0f / sqrtf((float)D);
    for (int64_t h = h0; h < h1; h++) {
        const float *q = s->q + h * D;
        float *att = s->att + h * s->n_ctx;
        const int64_t kvh = h / group;
        for (int64_t t = 0; t <= j->pos; t++) {
            const float *kt = kc + t * KV + kvh * D;
            float dot = 0.0f;
            for (int64_t i = 0; i < D; i++) dot += q[i] * kt[i];
            att[t] = dot * scale;
        }
        softmax(att, j->pos + 1);
        float *out = s->xb + h * D;
        memset(out, 0, (size_t)D * sizeof *out);
        for (int64_t t = 0; t <= j->pos; t++) {
            const float *vt = vc + t * KV + kvh * D;
            const float a = att[t];
            for (int64_t i = 0; i < D; i++) out[i] += a * vt[i];
        }
    }
}

static void attention(pi_session *s, int64_t il, int64_t pos) {
    const pi_hparams *hp = &s->m->hp;
    const pi_layer *l = &s->m->layers[il];
    const int64_t KV = hp->n_head_kv * hp->head_dim;
    float *kdst = s->k_cache + ((size_t)il * (size_t)s->n_ctx + (size_t)pos) * (size_t)KV;
    float *vdst = s->v_cache + ((size_t)il * (size_t)s->n_ctx + (size_t)pos) * (size_t)KV;

    rmsnorm(s->xb, s->x, l->attn_norm.data, hp->n_embd, hp->rms_eps);
    invalidate_input(s);
    matvec(s, &l->wq, 0, hp->n_head * hp->head_dim, s->xb, s->q);
    matvec(s, &l->wk, 0, KV, s->xb, kdst);
    matvec(s, &l->wv, 0, KV, s->xb, vdst);
    rope(s, s->q, hp->n_head, pos);
    rope(s, kdst, hp->n_head_kv, pos);

    attn_job j = {s, il, pos};
    pi_pool_for(s->pool, hp->n_head, 1, attention_heads, &j);
    invalidate_input(s);
    matvec(s, &l->wo, 0, hp->n_embd, s->xb, s->xb2);
    for (int64_t i = 0; i < hp->n_embd; i++) s->x[i] += s->xb2[i];
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

/* out = W_down act(W_gate xb, W_up xb) for one expert (row offset e * n_ff / e * n_embd). */
static void ffn_expert(pi_session *s, const pi_weight *gate, const pi_weight *up, const pi_weight *down, int64_t e,
                       float *out) {
    const pi_hparams *hp = &s->m->hp;
    const int64_t F = hp->n_ff;
    matvec(s, gate, e * F, F, s->xb, s->hb);
    matvec(s, up, e * F, F, s->xb, s->hb2);
    ffn_activate(hp->act, s->hb, s->hb2, F);
    invalidate_input(s);
    matvec(s, down, e * hp->n_embd, hp->n_embd, s->hb, out);
}

static void ffn(pi_session *s, int64_t il) {
    const pi_hparams *hp = &s->m->hp;
    const pi_layer *l = &s->m->layers[il];
    rmsnorm(s->xb, s->x, l->ffn_norm.data, hp->n_embd, hp->rms_eps);
    invalidate_input(s);
    if (!hp->n_expert) {
        ffn_expert(s, &l->ffn_gate, &l->ffn_up, &l->ffn_down, 0, s->xb2);
        for (int64_t i = 0; i < hp->n_embd; i++) s->x[i] += s->xb2[i];
        return;
    }
    /* Mixtral routing: top-k router logits, softmax over the chosen ones. */
    matvec(s, &l->ffn_gate_inp, 0, hp->n_expert, s->xb, s->router);
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
    memset(s->moe_out, 0, (size_t)hp->n_embd * sizeof(float));
    for (int64_t k = 0; k < K; k++) {
        ffn_expert(s, &l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps, chosen[k], s->xb2);
        for (int64_t i = 0; i < hp->n_embd; i++) s->moe_out[i] += wsel[k] * s->xb2[i];
        /* the next expert reads xb again: restore its quantization */
        invalidate_input(s);
    }
    for (int64_t i = 0; i < hp->n_embd; i++) s->x[i] += s->moe_out[i];
}

static void forward(pi_session *s, int32_t token, int64_t pos) {
    const pi_model *m = s->m;
    const pi_hparams *hp = &m->hp;
    pi_weight_row_f32(&m->tok_embd, token, s->x);
    for (int64_t il = 0; il < hp->n_layer; il++) {
        attention(s, il, pos);
        ffn(s, il);
    }
    rmsnorm(s->xb, s->x, m->output_norm.data, hp->n_embd, hp->rms_eps);
    invalidate_input(s);
    matvec(s, &m->output, 0, hp->n_vocab, s->xb, s->logits);
}

pi_status pi_session_decode(pi_session *s, const int32_t *tokens, int64_t n) {
    const pi_hparams *hp = &s->m->hp;
    if (n < 0 || s->n_past + n > s->n_ctx)
        return pi_error(PI_ERR_INVALID, "%lld tokens at position %lld exceed the context of %lld", (long long)n,
                        (long long)s->n_past, (long long)s->n_ctx);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return pi_error(PI_ERR_INVALID, "token id %d at index %lld is outside the vocabulary of %lld", tokens[i],
                            (long long)i, (long long)hp->n_vocab);
    for (int64_t i = 0; i < n; i++) forward(s, tokens[i], s->n_past++);
    return PI_OK;
}
