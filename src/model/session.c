/*
 * session.c — the dense forward pass and the FFN dispatch.
 *
 * Reads top-down like the maths (llama2.c's forward): embedding, then per
 * layer RMSNorm -> Q/K/V -> RoPE -> grouped-query attention over the KV cache
 * -> output projection -> residual, RMSNorm -> FFN -> residual; finally
 * RMSNorm and the output head. Matrix-vector products are split across the
 * pool by rows (each row computed by exactly one thread, so results do not
 * depend on the thread count); attention is split by heads. An FFN
 * implementation installed through ffn.h (the sparse FFN, the FFN read
 * from flash) replaces the dense FFN where it says so.
 */
#include "session.h"

#include "base/log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MATVEC_GRAIN 16 /* rows per chunk, at least, and a multiple of them */
/* A one-token matvec is handed out in about this many chunks per thread,
   dynamically: threads sharing memory bandwidth get unequal shares of it,
   and with one fixed share each the first to finish waited for the other
   (2 to 7% of a 2-thread sparse decode's samples in the driving thread's
   wait, against about 1% handed out dynamically). Each row is still one
   kernel call's, so results do not depend on the split. */
#define MATVEC_SHARES 8

/* Rows per matmul call for a batch. The matmul kernels walk the rows' length
   in chunks (a few KiB of each row), so this many rows' chunk stays in L2
   while all the inputs pass over it, whatever the row length; the outputs
   (256 x 64 floats) stay there too. Blocks are handed out dynamically: a batch
   is compute-bound, and a thread slowed by a noisy neighbour then takes fewer
   blocks. Each row is still computed whole by one call, so results do not
   depend on the thread count. A multiple of 16, the widest row tile. */
#define MATMUL_BLOCK_ROWS 256
/* Query tokens taken together per KV head in attention: their queries share
   each read of the head's keys and values. */
#define ATT_TOKENS 4

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
    const size_t B = (size_t)s->n_batch, f = sizeof(float);
    size_t hb_floats = B * (size_t)s->hb_cols;
    if (hb_floats < (size_t)hp->n_ff) hb_floats = (size_t)hp->n_ff; /* one token's full width (hot cluster, checks) */
    const int64_t E = hp->n_embd, KV = hp->n_head_kv * hp->head_dim, QD = hp->n_head * hp->head_dim;
    int64_t widest = E > hp->n_ff ? E : hp->n_ff;
    if (QD > widest) widest = QD;
    s->xb_dim = E > QD ? E : QD;
    /* rounded up to whole blocks of either quantized activation type */
    const int64_t wide_k = (widest + PI_QK_K - 1) / PI_QK_K * PI_QK_K;
    const size_t q8_0 = pi_row_size(PI_TYPE_Q8_0, wide_k), q8_k = pi_row_size(PI_TYPE_Q8_K, wide_k);
    s->xq_row = q8_0 > q8_k ? q8_0 : q8_k;
    size_t kv_bytes = (size_t)hp->n_layer * (size_t)n_ctx * (size_t)KV * f;
    st->kv = 2 * kv_bytes;
    s->k_cache = xalloc(kv_bytes, st);
    s->v_cache = xalloc(kv_bytes, st);
    s->x = xalloc(B * (size_t)E * f, st);
    s->xb = xalloc(B * (size_t)s->xb_dim * f, st);
    s->xb2 = xalloc(B * (size_t)E * f, st);
    s->q = xalloc(B * (size_t)QD * f, st);
    s->att = xalloc((size_t)ATT_TOKENS * (size_t)hp->n_head * (size_t)n_ctx * f, st);
    s->att_q = xalloc((size_t)ATT_TOKENS * (size_t)QD * f, st);
    s->att_o = xalloc((size_t)ATT_TOKENS * (size_t)QD * f, st);
    s->vtmp = xalloc(B * (size_t)KV * f, st);
    s->hb = xalloc(hb_floats * f, st);
    s->hb2 = xalloc(hb_floats * f, st);
    s->logits = xalloc((size_t)hp->n_vocab * f, st);
    s->rope_inv_freq = xalloc((size_t)(hp->n_rot / 2) * f, st);
    s->xq = xalloc(B * s->xq_row, st);
    s->router = xalloc((size_t)(hp->n_expert + 1) * f, st);
    s->moe_out = xalloc(2 * (size_t)E * f, st);
    s->reduce_scratch = xalloc((size_t)PI_DOWN_T_CHUNKS * (size_t)E * f, st);
}

uint64_t pi_state_bytes_ex(const pi_lm *m, int64_t n_ctx, int64_t n_batch, int64_t hb_cols) {
    pi_state s = {0};
    s.n_batch = n_batch;
    s.hb_cols = hb_cols;
    allocator a = {PI_OK, true, 0, 0};
    session_buffers(&s, m, n_ctx <= 0 ? m->hp.n_ctx_train : n_ctx, &a);
    return a.total;
}

uint64_t pi_state_bytes(const pi_lm *m, int64_t n_ctx) {
    return pi_state_bytes_ex(m, n_ctx, PI_DEFAULT_BATCH, m->hp.n_ff);
}

uint64_t pi_state_kv_bytes(const pi_lm *m, int64_t n_ctx) {
    pi_state s = {.n_batch = PI_DEFAULT_BATCH, .hb_cols = m->hp.n_ff};
    allocator a = {PI_OK, true, 0, 0};
    session_buffers(&s, m, n_ctx <= 0 ? m->hp.n_ctx_train : n_ctx, &a);
    return a.kv;
}

pi_status pi_state_create(const pi_lm *m, int64_t n_ctx, int n_threads, pi_state **out) {
    return pi_state_create_ex(m, n_ctx, n_threads, PI_DEFAULT_BATCH, m->hp.n_ff, out);
}

pi_status pi_state_create_ex(const pi_lm *m, int64_t n_ctx, int n_threads, int64_t n_batch, int64_t hb_cols,
                             pi_state **out) {
    *out = NULL;
    const pi_hparams *hp = &m->hp;
    if (n_ctx <= 0) n_ctx = hp->n_ctx_train;
    if (n_ctx > ((int64_t)1 << 24)) return pi_error(PI_ERR_INVALID, "context size %lld is too large", (long long)n_ctx);
    if (n_batch < 1 || n_batch > PI_MAX_BATCH || hb_cols < 1 || hb_cols > hp->n_ff)
        return pi_error(PI_ERR_INVALID, "session: a batch of %lld tokens (1..%d) with FFN rows of %lld (1..%lld)",
                        (long long)n_batch, PI_MAX_BATCH, (long long)hb_cols, (long long)hp->n_ff);
    pi_state *s = calloc(1, sizeof *s);
    if (!s) return pi_error(PI_ERR_NOMEM, "session: out of memory");
    s->m = m;
    s->n_batch = n_batch;
    s->hb_cols = hb_cols;
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
    free(s->att_q);
    free(s->att_o);
    free(s->vtmp);
    free(s->hb);
    free(s->hb2);
    free(s->logits);
    free(s->rope_inv_freq);
    free(s->xq);
    free(s->router);
    free(s->moe_out);
    free(s->reduce_scratch);
    pi_state_set_ffn(s, NULL, NULL);
    free(s);
}

void pi_state_reset(pi_state *s) { s->n_past = 0; }

pi_status pi_state_truncate(pi_state *s, int64_t n) {
    if (n < 0 || n > s->n_past)
        return pi_error(PI_ERR_INVALID, "cannot keep %lld positions of the %lld in the KV cache", (long long)n,
                        (long long)s->n_past);
    s->n_past = n;
    return PI_OK;
}

static void rope(const pi_state *s, float *v, int64_t n_heads, int64_t pos);

pi_status pi_state_discard(pi_state *s, int64_t p0, int64_t n) {
    if (p0 < 0 || n < 0 || p0 + n > s->n_past)
        return pi_error(PI_ERR_INVALID, "cannot drop positions [%lld, %lld) of the %lld in the KV cache",
                        (long long)p0, (long long)(p0 + n), (long long)s->n_past);
    if (n == 0) return PI_OK;
    const pi_hparams *hp = &s->m->hp;
    const int64_t KV = hp->n_head_kv * hp->head_dim, moved = s->n_past - p0 - n;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        float *kc = s->k_cache + (size_t)il * (size_t)s->n_ctx * (size_t)KV;
        float *vc = s->v_cache + (size_t)il * (size_t)s->n_ctx * (size_t)KV;
        memmove(kc + p0 * KV, kc + (p0 + n) * KV, (size_t)(moved * KV) * sizeof(float));
        for (int64_t c = 0; c < KV; c++)
            memmove(vc + c * s->n_ctx + p0, vc + c * s->n_ctx + p0 + n, (size_t)moved * sizeof(float));
        for (int64_t t = 0; t < moved; t++) rope(s, kc + (p0 + t) * KV, hp->n_head_kv, -n);
    }
    s->n_past -= n;
    return PI_OK;
}

void pi_state_set_ffn(pi_state *s, const pi_ffn_ops *ops, void *impl) {
    if (s->ffn_ops && s->ffn_ops->free) s->ffn_ops->free(s->ffn_impl);
    s->ffn_ops = ops;
    s->ffn_impl = ops ? impl : NULL;
}

const pi_ffn_ops *pi_state_ffn(const pi_state *s, void **impl) {
    if (impl) *impl = s->ffn_impl;
    return s->ffn_ops;
}

void pi_state_set_observer(pi_state *s, pi_ffn_observer fn, void *ctx) {
    s->observer = fn;
    s->observer_ctx = ctx;
}

const float *pi_state_logits(const pi_state *s) { return s->logits; }

/* ---- building blocks ---- */

void pi_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = 1.0f / sqrtf((float)(ss / (double)n) + eps);
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * scale * w[i];
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
   floats apart). Quantized weights take the Q8_0 or Q8_K form of X, made
   once per distinct input and activation type. */
void pi_state_matmul(pi_state *s, const pi_weight *w, int64_t row0, int64_t rows, const float *X, int64_t x_stride,
                   int64_t nb, float *Y, int64_t y_stride) {
    const uint8_t *xin = (const uint8_t *)X;
    size_t xin_stride = (size_t)x_stride * sizeof(float);
    const int act = pi_vec_dot_type(w->type);
    if (act != PI_TYPE_F32) {
        if (s->xq_src != X || s->xq_nb != nb || s->xq_type != act) {
            for (int64_t b = 0; b < nb; b++)
                pi_quantize_act(s->k, w->type, X + b * x_stride, s->xq + (size_t)b * s->xq_row, w->ne[0]);
            s->xq_src = X;
            s->xq_nb = nb;
            s->xq_type = act;
        }
        xin = s->xq;
        xin_stride = s->xq_row;
    }
    matmul_job j = {s->k, w, (const uint8_t *)w->data + (size_t)row0 * w->row_bytes, xin, xin_stride, Y, y_stride, nb};
    if (nb == 1) {
        /* one thread: one call (each call prepares the activation again).
           The threads stream their own parts of the matrix, far apart, and
           even out at the end (pi_pool_for_spread): 2-3% less time in the
           7b-l8's matvecs on 2 threads than in neighbouring chunks */
        const int64_t T = pi_pool_size(s->pool), per = rows / (MATVEC_SHARES * T);
        const int64_t grain = T == 1 ? rows : per > MATVEC_GRAIN ? per / MATVEC_GRAIN * MATVEC_GRAIN : MATVEC_GRAIN;
        pi_pool_for_spread(s->pool, rows, grain, matmul_rows, &j);
    }
    else pi_pool_for_dynamic(s->pool, rows, MATMUL_BLOCK_ROWS, matmul_rows, &j);
}

void pi_state_input_changed(pi_state *s) { s->xq_src = NULL; }

typedef struct {
    pi_state *s;
    int64_t layer, pos0, nb;
} attn_job;

/* The heads of KV heads [g0, g1) (each with the group of query heads that
   share it) for every token of the batch; token b sits at pos0 + b and
   attends to positions 0..pos0+b (causal). Per KV head and block of up to
   ATT_TOKENS tokens, the block's queries (tokens x group) are one matrix:
   their scores against the keys are one F32 matmul over the key rows, and
   their outputs one F32 matmul over the rows of the transposed values, so
   each key and value is read once per block instead of once per query head
   and position. */
static void attention_heads(void *ctx, int64_t g0, int64_t g1, int tid) {
    (void)tid;
    attn_job *j = ctx;
    pi_state *s = j->s;
    const pi_hparams *hp = &s->m->hp;
    const int64_t D = hp->head_dim, KV = hp->n_head_kv * D, QD = hp->n_head * D, group = hp->n_head / hp->n_head_kv;
    const int64_t n_ctx = s->n_ctx;
    const float *kc = s->k_cache + (size_t)j->layer * (size_t)n_ctx * (size_t)KV;
    const float *vt = s->v_cache + (size_t)j->layer * (size_t)n_ctx * (size_t)KV;
    const float scale = 1.0f / sqrtf((float)D);
    const pi_matmul_fn mm = s->k->matmul[PI_TYPE_F32];
    for (int64_t g = g0; g < g1; g++) {
        /* this KV head's scratch: queries and outputs (rows: token, head of
           the group) and scores (the same rows, n_ctx apart) */
        float *qb = s->att_q + g * ATT_TOKENS * group * D, *ob = s->att_o + g * ATT_TOKENS * group * D;
        float *pb = s->att + g * ATT_TOKENS * group * n_ctx;
        const float *kg = kc + g * D, *vg = vt + (size_t)g * (size_t)D * (size_t)n_ctx;
        for (int64_t b0 = 0; b0 < j->nb; b0 += ATT_TOKENS) {
            const int64_t bn = j->nb - b0 < ATT_TOKENS ? j->nb - b0 : ATT_TOKENS, rows = bn * group;
            const int64_t T = j->pos0 + b0 + bn; /* positions the block's last token sees */
            for (int64_t b = 0; b < bn; b++)
                memcpy(qb + b * group * D, s->q + (b0 + b) * QD + g * group * D, (size_t)(group * D) * sizeof(float));
            mm(D, kg, (size_t)KV * sizeof(float), 0, T, qb, (size_t)D * sizeof(float), rows, pb, n_ctx);
            for (int64_t r = 0; r < rows; r++) {
                float *p = pb + r * n_ctx;
                const int64_t len = j->pos0 + b0 + r / group + 1;
                for (int64_t t = 0; t < len; t++) p[t] *= scale;
                s->k->softmax(p, len);
                memset(p + len, 0, (size_t)(T - len) * sizeof(float)); /* later positions: masked */
            }
            /* ob = P V over positions [0, T), in pieces the kernels take */
            for (int64_t t0 = 0; t0 < T; t0 += PI_MAX_ROW) {
                const int64_t tn = T - t0 < PI_MAX_ROW ? T - t0 : PI_MAX_ROW;
                float *dst = t0 == 0 ? ob : qb; /* the queries are no longer needed */
                mm(tn, vg + t0, (size_t)n_ctx * sizeof(float), 0, D, pb + t0, (size_t)n_ctx * sizeof(float), rows,
                   dst, D);
                if (t0 > 0)
                    for (int64_t i = 0; i < rows * D; i++) ob[i] += qb[i];
            }
            for (int64_t b = 0; b < bn; b++)
                memcpy(s->xb + (b0 + b) * s->xb_dim + g * group * D, ob + b * group * D,
                       (size_t)(group * D) * sizeof(float));
        }
    }
}

static void attention(pi_state *s, int64_t il, int64_t pos0, int64_t nb) {
    const pi_hparams *hp = &s->m->hp;
    const pi_layer *l = &s->m->layers[il];
    const int64_t E = hp->n_embd, KV = hp->n_head_kv * hp->head_dim, QD = hp->n_head * hp->head_dim;
    float *kdst = s->k_cache + ((size_t)il * (size_t)s->n_ctx + (size_t)pos0) * (size_t)KV;
    float *vt = s->v_cache + (size_t)il * (size_t)s->n_ctx * (size_t)KV;

    for (int64_t b = 0; b < nb; b++)
        pi_rmsnorm(s->xb + b * s->xb_dim, s->x + b * E, l->attn_norm.data, E, hp->rms_eps);
    pi_state_input_changed(s);
    pi_state_matmul(s, &l->wq, 0, QD, s->xb, s->xb_dim, nb, s->q, QD);
    pi_state_matmul(s, &l->wk, 0, KV, s->xb, s->xb_dim, nb, kdst, KV);
    pi_state_matmul(s, &l->wv, 0, KV, s->xb, s->xb_dim, nb, s->vtmp, KV);
    for (int64_t c = 0; c < KV; c++) /* values transposed: row c holds every position's value c */
        for (int64_t b = 0; b < nb; b++) vt[c * s->n_ctx + pos0 + b] = s->vtmp[b * KV + c];
    for (int64_t b = 0; b < nb; b++) {
        rope(s, s->q + b * QD, hp->n_head, pos0 + b);
        rope(s, kdst + b * KV, hp->n_head_kv, pos0 + b);
    }
    attn_job j = {s, il, pos0, nb};
    pi_pool_for(s->pool, hp->n_head_kv, 1, attention_heads, &j);
    pi_state_input_changed(s);
    pi_state_matmul(s, &l->wo, 0, E, s->xb, s->xb_dim, nb, s->xb2, E);
    for (int64_t i = 0; i < nb * E; i++) s->x[i] += s->xb2[i];
}

typedef struct {
    const pi_kernels *k;
    const pi_weight *w;
    const float *h;
    int64_t row0; /* the rows' first: expert x's block starts at x n_ff */
} down_t_job;

/* acc += sum over neurons [i0, i1) of h[i] * row i of down_t; silent
   neurons (h == 0, most of them for ReLU models) cost nothing. */
static void down_t_chunk(void *ctx, int64_t i0, int64_t i1, float *acc, int tid) {
    (void)tid;
    down_t_job *j = ctx;
    pi_axpy_fn axpy = j->k->axpy[j->w->type];
    const uint8_t *base = (const uint8_t *)j->w->data + (size_t)j->row0 * j->w->row_bytes;
    for (int64_t i = i0; i < i1; i++)
        if (j->h[i] != 0.0f) axpy(j->w->ne[0], j->h[i], base + (size_t)i * j->w->row_bytes, acc);
}

/* Y[b] = sum_i H[b][i] * down_t[row0 + i] for nb rows of H (the down
   projection with the matrix stored one neuron per row; row0: an expert's
   block). */
static void matmul_down_t(pi_state *s, const pi_weight *w, int64_t row0, const float *H, int64_t h_stride, int64_t nb,
                          float *Y, int64_t y_stride) {
    const int64_t n = w->ne[1], chunk = (n + PI_DOWN_T_CHUNKS - 1) / PI_DOWN_T_CHUNKS;
    for (int64_t b = 0; b < nb; b++) {
        down_t_job j = {s->k, w, H + b * h_stride, row0};
        pi_pool_reduce_f32(s->pool, n, chunk, down_t_chunk, &j, Y + b * y_stride, w->ne[0], s->reduce_scratch);
    }
}

void pi_ffn_activate(pi_ffn_act act, float *hb, const float *hb2, int64_t n) {
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
                       const float *xin, int64_t nb, int64_t pos0, float *out) {
    const pi_hparams *hp = &s->m->hp;
    const int64_t F = hp->n_ff, E = hp->n_embd;
    PI_ASSERT(s->hb_cols == F); /* the dense FFN in memory holds whole rows */
    pi_state_matmul(s, gate, e * F, F, xin, s->xb_dim, nb, s->hb, F);
    pi_state_matmul(s, up, e * F, F, xin, s->xb_dim, nb, s->hb2, F);
    pi_ffn_activate(hp->act, s->hb, s->hb2, nb * F);
    if (s->observer)
        for (int64_t b = 0; b < nb; b++)
            s->observer(s->observer_ctx, pi_ffn_unit(hp, s->cur_layer, e), pos0 + b, xin + b * s->xb_dim,
                        s->hb + b * F);
    pi_state_input_changed(s);
    if (down->data) pi_state_matmul(s, down, e * E, E, s->hb, F, nb, out, E);
    else matmul_down_t(s, &s->m->layers[s->cur_layer].ffn_down_t, e * F, s->hb, F, nb, out, E);
}

/* Mixtral routing for one token (xb row b): top-k router logits, softmax
   over the chosen ones, weighted sum of those experts' outputs. */
int64_t pi_moe_route(pi_state *s, const pi_layer *l, const float *xin, int64_t *chosen, float *wsel) {
    const pi_hparams *hp = &s->m->hp;
    pi_state_matmul(s, &l->ffn_gate_inp, 0, hp->n_expert, xin, s->xb_dim, 1, s->router, hp->n_expert);
    const int64_t K = hp->n_expert_used < PI_MOE_MAX_USED ? hp->n_expert_used : PI_MOE_MAX_USED;
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
    s->k->softmax(wsel, K);
    return K;
}

void pi_moe_mix(const float *w, int64_t K, const float *outs, int64_t E, float *out) {
    memset(out, 0, (size_t)E * sizeof *out);
    for (int64_t k = 0; k < K; k++)
        for (int64_t i = 0; i < E; i++) out[i] += w[k] * outs[k * E + i];
}

static void moe_token(pi_state *s, const pi_layer *l, int64_t b) {
    const int64_t E = s->m->hp.n_embd;
    const float *xin = s->xb + b * s->xb_dim;
    int64_t chosen[PI_MOE_MAX_USED];
    float wsel[PI_MOE_MAX_USED];
    const int64_t K = pi_moe_route(s, l, xin, chosen, wsel);
    memset(s->moe_out, 0, (size_t)E * sizeof(float));
    for (int64_t k = 0; k < K; k++) {
        ffn_expert(s, &l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps, chosen[k], xin, 1, s->cur_pos0 + b,
                   s->moe_out + E);
        for (int64_t i = 0; i < E; i++) s->moe_out[i] += wsel[k] * s->moe_out[E + i];
    }
    memcpy(s->xb2 + b * E, s->moe_out, (size_t)E * sizeof(float));
}

/* Row tok of the token embedding, from the installed FFN implementation
   when it keeps the embedding off memory. */
static pi_status embedding_row(pi_state *s, int32_t tok, float *out) {
    if (s->ffn_ops && s->ffn_ops->embed) return s->ffn_ops->embed(s->ffn_impl, s, tok, out);
    pi_weight_row_f32(&s->m->tok_embd, tok, out);
    return PI_OK;
}

static pi_status ffn(pi_state *s, int64_t il, int64_t nb) {
    const pi_hparams *hp = &s->m->hp;
    const pi_layer *l = &s->m->layers[il];
    const int64_t E = hp->n_embd;
    pi_status st = PI_OK;
    for (int64_t b = 0; b < nb; b++)
        pi_rmsnorm(s->xb + b * s->xb_dim, s->x + b * E, l->ffn_norm.data, E, hp->rms_eps);
    pi_state_input_changed(s);
    const pi_ffn_ops *ops = s->ffn_ops;
    if (ops && nb == 1) {
        st = ops->token(s->ffn_impl, s, il);
    } else if (ops && ops->batch) {
        st = ops->batch(s->ffn_impl, s, il, nb);
    } else if (!hp->n_expert) {
        ffn_expert(s, &l->ffn_gate, &l->ffn_up, &l->ffn_down, 0, s->xb, nb, s->cur_pos0, s->xb2);
    } else {
        /* routing differs per token: tokens go one at a time */
        for (int64_t b = 0; b < nb; b++) moe_token(s, l, b);
    }
    if (st) return st;
    for (int64_t i = 0; i < nb * E; i++) s->x[i] += s->xb2[i];
    return PI_OK;
}

/* The output head over nb rows of X (xb_dim apart) into nb rows of n_vocab
   logits: the installed FFN's (the head on flash), else from memory. */
static pi_status head_logits(pi_state *s, const float *X, int64_t nb, float *Y) {
    const int64_t V = s->m->hp.n_vocab;
    if (s->ffn_ops && s->ffn_ops->head) return s->ffn_ops->head(s->ffn_impl, s, X, s->xb_dim, nb, Y, V);
    pi_state_matmul(s, &s->m->output, 0, V, X, s->xb_dim, nb, Y, V);
    return PI_OK;
}

/* nb tokens at positions pos0..; logits of the last token into s->logits,
   and of every token into all_logits when it is not NULL. Fails only when
   the installed FFN fails (a read from flash). */
static pi_status forward(pi_state *s, const int32_t *tokens, int64_t nb, int64_t pos0, float *all_logits) {
    const pi_lm *m = s->m;
    const pi_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd;
    pi_status st;
    for (int64_t b = 0; b < nb; b++)
        if ((st = embedding_row(s, tokens[b], s->x + b * E))) return st;
    s->cur_pos0 = pos0;
    if (nb == 1 && s->ffn_ops && s->ffn_ops->token_start && (st = s->ffn_ops->token_start(s->ffn_impl, s))) return st;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        s->cur_layer = il;
        attention(s, il, pos0, nb);
        if ((st = ffn(s, il, nb))) return st;
    }
    int64_t first = all_logits ? 0 : nb - 1;
    for (int64_t b = first; b < nb; b++)
        pi_rmsnorm(s->xb + b * s->xb_dim, s->x + b * E, m->output_norm.data, E, hp->rms_eps);
    pi_state_input_changed(s);
    if (all_logits) {
        if ((st = head_logits(s, s->xb, nb, all_logits))) return st;
        memcpy(s->logits, all_logits + (nb - 1) * hp->n_vocab, (size_t)hp->n_vocab * sizeof(float));
    } else if ((st = head_logits(s, s->xb + first * s->xb_dim, 1, s->logits))) {
        return st;
    }
    if (nb == 1 && s->ffn_ops && s->ffn_ops->token_done) s->ffn_ops->token_done(s->ffn_impl);
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
    for (int64_t i = 0; i < n; i += s->n_batch) {
        int64_t nb = n - i < s->n_batch ? n - i : s->n_batch;
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

