/*
 * reorder.c — rewriting a model file neuron by neuron, streamed tensor by
 * tensor through the GGUF writer. Reordering (convert --reorder) and bundling
 * (convert --bundle, format in gguf/bundle.h) are one routine: a plan says
 * for every output tensor where its bytes come from, and one permutation per
 * layer (new position k holds old neuron perm[k]; the identity when no
 * statistics are given) is applied to every neuron-indexed tensor, whether it
 * is written as its own matrix or interleaved into bundles.
 *
 * Memory: the input is mapped, so besides small scratch only one layer's
 * transposed down matrix is ever held (when the input has no ffn_down_t),
 * plus one bundle.
 */
#include "sparse/reorder.h"

#include "model/model.h"
#include "gguf/bundle.h"
#include "gguf/names.h"

#include "base/pool.h"

#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
    T_COPY,      /* the input tensor's bytes */
    T_ROWS,      /* n_ff rows, permuted */
    T_COLS,      /* float ffn_down: columns permuted */
    T_TRANSPOSE, /* quantized ffn_down -> ffn_down_t, rows permuted */
    T_PERM,      /* blk.N.ffn_perm.weight, composed with the input's */
    T_COUNTS,    /* blk.N.ffn_act_count from the statistics, permuted */
    T_SELS,      /* blk.N.ffn_sel_count from the statistics, permuted */
    T_BUNDLE,    /* blk.N.ffn_bundle: gate | up | down_t per neuron, permuted */
    T_RETYPE,    /* every row requantized to another type */
} how;

typedef struct {
    const pi_gguf_tensor *src; /* NULL for new tensors */
    char name[96];
    how how;
    int layer;
    pi_type type;
    uint32_t n_dims;
    int64_t ne[4];
} plan_t;

typedef struct {
    const char *in_path;
    const pi_stats *st;    /* NULL: keep the input's order */
    bool bundle;           /* write bundles instead of the FFN matrices */
    bool plain;            /* drop what llama.cpp does not read (predictors, ffn_down_t, permutations, counts) */
    double recall;         /* > 0: predictor thresholds for this recall, from st's logit histograms */
    pi_bundle_layout bl;   /* bundle */
    pi_lm *m;           /* the input, mapped */
    int32_t *perm;         /* (n_layer, n_ff); NULL without st (identity) */
    bool *has_bundle;      /* (n_layer) bundle: the layer's T_BUNDLE is planned */
    plan_t *plan;
    int64_t np;
    uint8_t *buf;          /* scratch: one bundle, one float row of n_ff, or n_ff I32 */
    uint8_t *down_t;       /* one layer's transposed down matrix, when the input has none */
    size_t down_t_cap;
    int64_t file_type;     /* >= 0: general.file_type to write */
    int n_threads;         /* requantizing rows */
} rewriter;

/* The tensors of a layer that a rewrite treats specially. */
typedef enum {
    K_OTHER,
    K_GATE,
    K_UP,
    K_DOWN,
    K_DOWN_T,
    K_BUNDLE,
    K_PERM,
    K_ACT_COUNT,
    K_SEL_COUNT,
    K_FC2,
    K_FC1,
} kind;

/* The kind of a tensor name and its layer (-1 for K_OTHER). */
static kind kind_of(pi_gguf_str name, int64_t *layer) {
    /* a mixture's stacked expert matrices and predictors are of the kinds of a dense layer's */
    static const struct {
        const char *fmt;
        kind k;
    } names[] = {
        {PI_TN_FFN_GATE, K_GATE},           {PI_TN_FFN_UP, K_UP},           {PI_TN_FFN_DOWN, K_DOWN},
        {PI_TN_FFN_DOWN_T, K_DOWN_T},       {PI_TN_FFN_BUNDLE, K_BUNDLE},   {PI_TN_FFN_PERM, K_PERM},
        {PI_TN_FFN_ACT_COUNT, K_ACT_COUNT}, {PI_TN_FC2, K_FC2},             {PI_TN_FC1, K_FC1},
        {PI_TN_FFN_SEL_COUNT, K_SEL_COUNT},
        {PI_TN_FFN_GATE_EXPS, K_GATE},      {PI_TN_FFN_UP_EXPS, K_UP},      {PI_TN_FFN_DOWN_EXPS, K_DOWN},
        {PI_TN_FC2_EXPS, K_FC2},            {PI_TN_FC1_EXPS, K_FC1},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((*layer = pi_tensor_layer(name, names[i].fmt)) >= 0) return names[i].k;
    *layer = -1;
    return K_OTHER;
}

static bool is_float_type(pi_type t) { return t == PI_TYPE_F32 || t == PI_TYPE_F16 || t == PI_TYPE_BF16; }

/* The old neuron at new position k of a layer. */
static int64_t old_of(const rewriter *r, int layer, int64_t k) {
    return r->perm ? r->perm[(int64_t)layer * r->m->hp.n_ff + k] : k;
}

/* A layer's experts (1 for a dense layer): its neuron-indexed tensors hold
   that many blocks of n_ff, block x permuted by unit layer * X + x. */
static int64_t experts_of(const rewriter *r) { return r->m->hp.n_expert ? r->m->hp.n_expert : 1; }

/* The old row (in the layer's stacked blocks) at new row x n_ff + k. */
static int64_t old_row(const rewriter *r, int layer, int64_t x, int64_t k) {
    return x * r->m->hp.n_ff + old_of(r, (int)(layer * experts_of(r) + x), k);
}

/* Plan a tensor the input does not have, named by fmt (one %d: the layer). */
PI_PRINTF(7, 8)
static void new_tensor(rewriter *r, how h, int layer, pi_type type, int64_t ne0, int64_t ne1, const char *fmt, ...) {
    plan_t *p = &r->plan[r->np++];
    memset(p, 0, sizeof *p);
    p->how = h;
    p->layer = layer;
    p->type = type;
    p->n_dims = ne1 > 1 ? 2 : 1;
    p->ne[0] = ne0, p->ne[1] = ne1, p->ne[2] = p->ne[3] = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->name, sizeof p->name, fmt, ap);
    va_end(ap);
}

/* The layer's down matrix one neuron per row, in the input's order: the
   input's ffn_down_t, or ffn_down transposed (as pi_lm_make_down_t does;
   a mixture's experts one after the other, expert x's neuron i at row
   x n_ff + i). */
static pi_status layer_down_t(rewriter *r, int layer, const uint8_t **rows) {
    const pi_layer *l = &r->m->layers[layer];
    if (l->ffn_down_t.data) {
        *rows = l->ffn_down_t.data;
        return PI_OK;
    }
    const int64_t E = r->m->hp.n_embd, F = r->m->hp.n_ff, X = r->m->hp.n_expert ? r->m->hp.n_expert : 1;
    const pi_weight *down = r->m->hp.n_expert ? &l->ffn_down_exps : &l->ffn_down;
    const pi_type t = pi_weight_down_t_type(down);
    const size_t rb = pi_row_size(t, E), bytes = rb * (size_t)(F * X);
    if (bytes > r->down_t_cap) {
        free(r->down_t);
        r->down_t_cap = 0;
        if (!(r->down_t = malloc(bytes)))
            return pi_error(PI_ERR_NOMEM, "cannot allocate %.0f MiB to transpose ffn_down", (double)bytes / (1 << 20));
        r->down_t_cap = bytes;
    }
    pi_status st = PI_OK;
    for (int64_t x = 0; x < X && !st; x++) {
        pi_weight slice = *down;
        slice.data = (const uint8_t *)down->data + (size_t)(x * E) * down->row_bytes;
        slice.ne[2] = 1;
        st = pi_weight_transpose(&slice, t, r->down_t + (size_t)(x * F) * rb);
    }
    if (st) return pi_error_prefix(st, "%s: layer %d", r->in_path, layer);
    *rows = r->down_t;
    return PI_OK;
}

/* Check the input and fix the bundle layout; every dense layer must agree
   with layer 0's types, since one layout serves the whole file. */
static pi_status check_input(rewriter *r, uint32_t align) {
    const pi_lm *m = r->m;
    const pi_hparams *hp = &m->hp;
    if (r->plain) {
        if (m->bundled)
            return pi_error(PI_ERR_UNSUPPORTED, "%s is a bundle file: llama.cpp cannot read bundles; convert the "
                            "model the bundles were made from", r->in_path);
        for (int64_t il = 0; il < hp->n_layer; il++)
            if (!m->layers[il].ffn_down.data && !m->layers[il].ffn_down_exps.data)
                return pi_error(PI_ERR_UNSUPPORTED, "%s: layer %lld has no ffn_down (only pinfer's ffn_down_t), "
                                "which llama.cpp needs", r->in_path, (long long)il);
    }
    if (hp->n_expert && r->st && !r->bundle)
        return pi_error(PI_ERR_UNSUPPORTED, "%s: a mixture's experts are reordered into a bundle file only (convert "
                        "--reorder STATS --bundle)", r->in_path);
    if (hp->n_expert && r->recall > 0.0)
        return pi_error(PI_ERR_UNSUPPORTED, "%s: thresholds for a recall target (--recall) are for dense models; a "
                        "mixture keeps the thresholds its predictors were trained with", r->in_path);
    if (r->bundle && hp->act == PI_ACT_SILU)
        return pi_error(PI_ERR_UNSUPPORTED,
                        "%s: the FFN activation is SiLU; bundles are for dense ReLU/dReLU FFNs (sparse activations)",
                        r->in_path);
    if (!r->bundle && m->bundled)
        return pi_error(PI_ERR_UNSUPPORTED, "%s is a bundle file; reorder with --bundle to write one again", r->in_path);
    if (r->st) {
        if (r->st->n_expert != hp->n_expert)
            return pi_error(PI_ERR_INVALID, "statistics are for %lld experts per layer; %s has %lld", (long long)r->st->n_expert,
                            r->in_path, (long long)hp->n_expert);
        if (r->st->n_layer != pi_ffn_units(hp) || r->st->n_ff != hp->n_ff)
            return pi_error(PI_ERR_INVALID, "statistics are for %lld layers of %lld neurons; %s has %lld of %lld",
                            (long long)r->st->n_layer, (long long)r->st->n_ff, r->in_path, (long long)pi_ffn_units(hp),
                            (long long)hp->n_ff);
        if (r->st->tokens > PI_STATS_MAX_TOKENS)
            return pi_error(PI_ERR_UNSUPPORTED, "statistics of %lld tokens do not fit the I32 counts stored with them",
                            (long long)r->st->tokens);
    }
    if (!r->bundle) return PI_OK;
    /* each layer's parts in its own types (Q4_K_M keeps some layers' down
       projections in Q6_K): the layout records them per layer */
    pi_type (*types)[3] = malloc((size_t)hp->n_layer * sizeof *types);
    if (!types) return pi_error(PI_ERR_NOMEM, "out of memory");
    for (int il = 0; il < hp->n_layer; il++) {
        const pi_layer *l = &m->layers[il];
        const bool moe = hp->n_expert > 0;
        const pi_weight *gate = moe ? &l->ffn_gate_exps : &l->ffn_gate, *up = moe ? &l->ffn_up_exps : &l->ffn_up;
        types[il][0] = gate->type;
        types[il][1] = up->type;
        types[il][2] = l->ffn_down_t.data ? l->ffn_down_t.type : pi_weight_down_t_type(moe ? &l->ffn_down_exps : &l->ffn_down);
    }
    pi_status st = pi_bundle_layout_make((const pi_type(*)[3])types, hp->n_layer, hp->n_embd, hp->n_ff, align, &r->bl);
    free(types);
    if (st) return pi_error_prefix(st, "%s", r->in_path);
    return PI_OK;
}

/* A layer's bundles: {stride, n_ff}, or for a mixture {stride, n_ff,
   n_expert} (expert x's neuron i at row x n_ff + i). */
static void new_bundle(rewriter *r, int layer) {
    new_tensor(r, T_BUNDLE, layer, PI_TYPE_I8, (int64_t)r->bl.stride, r->m->hp.n_ff, PI_TN_FFN_BUNDLE, layer);
    if (r->m->hp.n_expert) {
        r->plan[r->np - 1].ne[2] = r->m->hp.n_expert;
        r->plan[r->np - 1].n_dims = 3;
    }
}

/* Decide every output tensor (see `how`). */
static void make_plan(rewriter *r) {
    const pi_gguf *g = r->m->gguf;
    const int64_t L = r->m->hp.n_layer, E = r->m->hp.n_embd, F = r->m->hp.n_ff;
    for (int64_t i = 0; i < pi_gguf_n_tensors(g); i++) {
        const pi_gguf_tensor *t = pi_gguf_tensor_at(g, i);
        int64_t layer;
        const kind k = kind_of(t->name, &layer);
        plan_t *p = &r->plan[r->np];
        memset(p, 0, sizeof *p);
        p->src = t;
        p->layer = layer < L ? (int)layer : -1;
        p->type = (pi_type)t->type;
        p->n_dims = t->n_dims;
        memcpy(p->ne, t->ne, sizeof p->ne);
        snprintf(p->name, sizeof p->name, "%.*s", (int)t->name.len, t->name.data);
        p->how = T_COPY;
        if (r->plain && layer < L && layer >= 0 &&
            (k == K_FC1 || k == K_FC2 || k == K_PERM || k == K_ACT_COUNT || k == K_SEL_COUNT || k == K_DOWN_T))
            continue; /* check_input made sure ffn_down is there */
        if (r->plain) { /* everything else as it is */
            r->np++;
            continue;
        }
        if (k != K_OTHER && layer < L) {
            const bool ffn = k == K_GATE || k == K_UP || k == K_DOWN || k == K_DOWN_T || k == K_BUNDLE;
            if (k == K_PERM && r->perm) {
                continue; /* replaced by the composed permutation */
            } else if ((k == K_ACT_COUNT || k == K_SEL_COUNT) && r->st) {
                continue; /* replaced by the new statistics (selections: where they have them) */
            } else if (k == K_FC2) {
                if (r->perm) p->how = T_ROWS;
            } else if (r->bundle && ffn) {
                /* the layer's bundles take the place of its first FFN tensor */
                if (r->has_bundle[layer]) continue;
                r->has_bundle[layer] = true;
                new_bundle(r, (int)layer);
                continue;
            } else if (!r->bundle && !r->perm && ffn) {
                /* nothing reordered: the FFN as it is (or requantized) */
            } else if (!r->bundle && (k == K_GATE || k == K_UP || k == K_DOWN_T)) {
                p->how = T_ROWS;
            } else if (!r->bundle && k == K_DOWN) {
                if (is_float_type(p->type)) {
                    p->how = T_COLS;
                } else if (r->m->layers[layer].ffn_down_t.data) {
                    continue; /* the permuted ffn_down_t serves both paths */
                } else {
                    p->how = T_TRANSPOSE;
                    snprintf(p->name, sizeof p->name, PI_TN_FFN_DOWN_T, (int)layer);
                    p->type = pi_weight_down_t_type(&r->m->layers[layer].ffn_down);
                    p->ne[0] = E;
                    p->ne[1] = F;
                }
            }
        }
        r->np++;
    }
    for (int64_t il = 0; r->bundle && il < L; il++)
        if (!r->has_bundle[il]) new_bundle(r, (int)il);
    const int64_t XF = F * experts_of(r); /* a mixture: the experts' blocks one after the other */
    for (int64_t il = 0; r->perm && il < L; il++)
        new_tensor(r, T_PERM, (int)il, PI_TYPE_I32, XF, 1, PI_TN_FFN_PERM, (int)il);
    for (int64_t il = 0; r->st && il < L; il++)
        new_tensor(r, T_COUNTS, (int)il, PI_TYPE_I32, XF, 1, PI_TN_FFN_ACT_COUNT, (int)il);
    for (int64_t il = 0; r->st && r->st->sel && il < L; il++)
        new_tensor(r, T_SELS, (int)il, PI_TYPE_I32, XF, 1, PI_TN_FFN_SEL_COUNT, (int)il);
}

/* Mark tensors for requantizing as asked: by type_of, then output.weight and
   token_embd.weight. */
static pi_status plan_retype(rewriter *r, const pi_rewrite_params *p) {
    const bool tied = !pi_gguf_find_tensor(r->m->gguf, PI_TN_OUTPUT);
    if (p->retype_output && tied)
        return pi_error(PI_ERR_INVALID, "%s: the output head is tied to the token embedding: give --embd-type",
                        r->in_path);
    for (int64_t i = 0; i < r->np; i++) {
        plan_t *pl = &r->plan[i];
        const bool out = p->retype_output && !strcmp(pl->name, PI_TN_OUTPUT);
        const bool embd = p->retype_embd && !strcmp(pl->name, PI_TN_TOKEN_EMBD);
        int want = -1;
        if (p->type_of && pl->how == T_COPY && pl->src) want = p->type_of(p->type_ctx, pl->name, pl->type, pl->n_dims, pl->ne);
        if (!out && !embd && (want < 0 || want == (int)pl->type)) continue;
        const pi_type to = out ? p->output_type : embd ? p->embd_type : (pi_type)want;
        const pi_type_info *ti = pi_type_get((uint32_t)to);
        if (!ti || !ti->compute)
            return pi_error(PI_ERR_INVALID, "%s: type %s has no kernels", pl->name, pi_type_name(to));
        if (pl->ne[0] % ti->blck)
            return pi_error(PI_ERR_INVALID, "%s: rows of %lld are not a multiple of %s's block of %lld", pl->name,
                            (long long)pl->ne[0], ti->name, (long long)ti->blck);
        if (pl->how != T_COPY) return pi_error(PI_ERR_INVALID, "%s: cannot be retyped", pl->name);
        if (to != pl->type) pl->how = T_RETYPE;
        pl->type = to;
    }
    return PI_OK;
}

/* The predictor thresholds for r->recall from the statistics' logit
   histograms, with the recall and precision they give there (what the
   planner prices a plan with). */
static pi_status write_thresholds(rewriter *r, pi_gguf_writer *w) {
    const int64_t L = r->m->hp.n_layer;
    float *thr = malloc((size_t)L * 3 * sizeof *thr);
    double *rec = malloc((size_t)L * 2 * sizeof *rec);
    if (!thr || !rec) {
        free(thr);
        free(rec);
        return pi_error(PI_ERR_NOMEM, "out of memory");
    }
    float *rf = thr + L, *pf = thr + 2 * L, lowest = FLT_MAX;
    pi_status rc = pi_stats_thresholds(r->st, r->recall, thr, rec, rec + L, NULL);
    for (int64_t l = 0; !rc && l < L; l++) {
        rf[l] = (float)rec[l];
        pf[l] = (float)rec[L + l];
        lowest = thr[l] < lowest ? thr[l] : lowest;
    }
    if (!rc && !(rc = pi_gguf_set_arr(w, PI_KEY_PREDICTOR_THRESHOLDS, PI_GGUF_FLOAT32, thr, (uint64_t)L)) &&
        !(rc = pi_gguf_set_f32(w, PI_KEY_SPARSE_THRESHOLD, lowest)) &&
        !(rc = pi_gguf_set_f32(w, PI_KEY_PREDICTOR_RECALL_TARGET, (float)r->recall)) &&
        !(rc = pi_gguf_set_arr(w, PI_KEY_PREDICTOR_VAL_RECALL, PI_GGUF_FLOAT32, rf, (uint64_t)L)))
        rc = pi_gguf_set_arr(w, PI_KEY_PREDICTOR_VAL_PRECISION, PI_GGUF_FLOAT32, pf, (uint64_t)L);
    free(thr);
    free(rec);
    return rc;
}

/* The input's keys, less those this rewrite replaces, then the new ones. */
static pi_status write_keys(rewriter *r, pi_gguf_writer *w) {
    const pi_gguf *g = r->m->gguf;
    pi_status rc = PI_OK;
    for (int64_t i = 0; i < pi_gguf_n_kv(g) && !rc; i++) {
        const pi_gguf_kv *kv = pi_gguf_kv_at(g, i);
        const pi_gguf_str k = kv->key;
        if (r->st && (pi_gguf_str_eq(k, PI_KEY_REORDERED) || pi_gguf_str_has_prefix(k, PI_KEY_STATS_PREFIX))) continue;
        if (r->bundle && (pi_gguf_str_eq(k, PI_KEY_GENERAL_ALIGNMENT) || pi_gguf_str_has_prefix(k, PI_KEY_BUNDLE_PREFIX)))
            continue;
        if (r->plain && (pi_gguf_str_has_prefix(k, PI_KEY_PREDICTOR_PREFIX) || pi_gguf_str_eq(k, PI_KEY_SPARSE_THRESHOLD)))
            continue;
        if (r->file_type >= 0 && pi_gguf_str_eq(k, PI_KEY_GENERAL_FILE_TYPE)) continue;
        if (r->recall > 0.0 &&
            (pi_gguf_str_eq(k, PI_KEY_PREDICTOR_THRESHOLDS) || pi_gguf_str_eq(k, PI_KEY_SPARSE_THRESHOLD) ||
             pi_gguf_str_eq(k, PI_KEY_PREDICTOR_RECALL_TARGET) || pi_gguf_str_eq(k, PI_KEY_PREDICTOR_VAL_RECALL) ||
             pi_gguf_str_eq(k, PI_KEY_PREDICTOR_VAL_PRECISION) || pi_gguf_str_eq(k, PI_KEY_GEN_EXPECTED_RECALL) ||
             pi_gguf_str_eq(k, PI_KEY_GEN_EXPECTED_PRECISION)))
            continue; /* replaced by the thresholds chosen for the recall target */
        rc = pi_gguf_set_kv(w, kv);
    }
    if (!rc && r->recall > 0.0) rc = write_thresholds(r, w);
    if (!rc && r->file_type >= 0) rc = pi_gguf_set_u32(w, PI_KEY_GENERAL_FILE_TYPE, (uint32_t)r->file_type);
    if (!rc && r->bundle) {
        if (!(rc = pi_gguf_set_u32(w, PI_KEY_GENERAL_ALIGNMENT, PI_BUNDLE_FILE_ALIGN)))
            rc = pi_bundle_layout_set(w, &r->bl);
    }
    if (!rc && r->st) {
        if (!(rc = pi_gguf_set_bool(w, PI_KEY_REORDERED, true)) &&
            !(rc = pi_gguf_set_u64(w, PI_KEY_STATS_TOKENS, (uint64_t)r->st->tokens)) &&
            !(rc = pi_gguf_set_f32(w, PI_KEY_STATS_THRESHOLD, r->st->threshold)) &&
            !(rc = pi_gguf_set_str(w, PI_KEY_STATS_MODEL, r->st->model ? r->st->model : "")))
            rc = pi_stats_set_reuse(r->st, w); /* reuse does not depend on the neurons' order */
        if (!rc) rc = pi_stats_set_units(r->st, w); /* nor do the experts' shares of the tokens */
        if (!rc) rc = pi_stats_set_hist(r->st, w); /* nor do the logit histograms */
    }
    return rc;
}

/* Requantizing: rows through F32 into the new type, a batch of rows at a
   time spread over the threads (each row on its own: the bytes do not depend
   on the thread count). */
typedef struct {
    pi_type from, to;
    int64_t n, row0;
    const uint8_t *in;
    uint8_t *out;
    float *x;              /* (threads, n) */
    size_t in_rb, out_rb;
} retype_job;

static void retype_rows(void *ctx, int64_t j0, int64_t j1, int tid) {
    retype_job *j = ctx;
    float *x = j->x + (size_t)tid * (size_t)j->n;
    for (int64_t k = j0; k < j1; k++) {
        pi_dequantize_row(j->from, j->in + (size_t)(j->row0 + k) * j->in_rb, x, j->n);
        pi_quantize_row(j->to, x, j->out + (size_t)k * j->out_rb, j->n);
    }
}

static pi_status retype(rewriter *r, pi_gguf_writer *w, const plan_t *p, const uint8_t *data) {
    const int64_t n = p->ne[0], rows = p->ne[1] * p->ne[2] * p->ne[3];
    retype_job j = {(pi_type)p->src->type, p->type, n, 0, data, NULL, NULL, pi_row_size((pi_type)p->src->type, n),
                    pi_row_size(p->type, n)};
    int64_t batch = (int64_t)((8u << 20) / (j.out_rb ? j.out_rb : 1));
    if (batch < 1) batch = 1;
    if (batch > rows) batch = rows;
    pi_pool *pool = NULL;
    pi_status rc = r->n_threads > 1 ? pi_pool_create(r->n_threads, &pool) : PI_OK;
    j.x = malloc((size_t)r->n_threads * (size_t)n * sizeof *j.x);
    j.out = malloc((size_t)batch * j.out_rb);
    if (!rc && (!j.x || !j.out)) rc = pi_error(PI_ERR_NOMEM, "out of memory");
    for (int64_t j0 = 0; j0 < rows && !rc; j0 += batch) {
        const int64_t nb = rows - j0 < batch ? rows - j0 : batch;
        j.row0 = j0;
        if (pool) pi_pool_for(pool, nb, 1, retype_rows, &j);
        else retype_rows(&j, 0, nb, 0);
        rc = pi_gguf_write_data(w, j.out, (size_t)nb * j.out_rb);
    }
    pi_pool_free(pool);
    free(j.x);
    free(j.out);
    return rc;
}

static pi_status write_tensor(rewriter *r, pi_gguf_writer *w, const plan_t *p) {
    const pi_lm *m = r->m;
    const int64_t E = m->hp.n_embd, F = m->hp.n_ff;
    const uint8_t *data = p->src ? p->src->data : NULL;
    pi_status rc = PI_OK;
    switch (p->how) {
    case T_COPY:
        return pi_gguf_write_data(w, data, p->src->nbytes);
    case T_ROWS: { /* n_ff rows (per expert): new row k is old row perm[k] */
        const size_t rb = pi_row_size(p->type, p->ne[0]);
        for (int64_t x = 0; x < experts_of(r); x++)
            for (int64_t k = 0; k < F && !rc; k++)
                rc = pi_gguf_write_data(w, data + (size_t)old_row(r, p->layer, x, k) * rb, rb);
        return rc;
    }
    case T_COLS: { /* float ffn_down: E rows of F elements, columns permuted */
        const size_t es = pi_type_get(p->type)->size, rb = es * (size_t)F;
        for (int64_t j = 0; j < E && !rc; j++) {
            const uint8_t *src = data + (size_t)j * rb;
            for (int64_t k = 0; k < F; k++) memcpy(r->buf + (size_t)k * es, src + (size_t)old_of(r, p->layer, k) * es, es);
            rc = pi_gguf_write_data(w, r->buf, rb);
        }
        return rc;
    }
    case T_TRANSPOSE: {
        const uint8_t *rows;
        if ((rc = layer_down_t(r, p->layer, &rows))) return rc;
        const size_t rb = pi_row_size(p->type, E);
        for (int64_t k = 0; k < F && !rc; k++) rc = pi_gguf_write_data(w, rows + (size_t)old_of(r, p->layer, k) * rb, rb);
        return rc;
    }
    case T_PERM: { /* compose with a permutation the input already had */
        char nm[PI_NAME_MAX];
        snprintf(nm, sizeof nm, PI_TN_FFN_PERM, p->layer);
        const pi_gguf_tensor *old = pi_gguf_find_tensor(m->gguf, nm);
        int32_t *out = (int32_t *)r->buf;
        const int64_t X = experts_of(r);
        for (int64_t x = 0; x < X; x++) /* a mixture: each expert's original neuron, within the expert */
            for (int64_t k = 0; k < F; k++) {
                int32_t v = (int32_t)old_of(r, (int)(p->layer * X + x), k);
                if (old && old->type == PI_TYPE_I32 && old->ne[0] == F * X)
                    memcpy(&v, (const uint8_t *)old->data + 4 * (size_t)(x * F + v), 4);
                out[x * F + k] = v;
            }
        return pi_gguf_write_data(w, out, (size_t)(F * X) * 4);
    }
    case T_COUNTS:
    case T_SELS: { /* counts <= tokens <= INT32_MAX (checked) */
        int32_t *out = (int32_t *)r->buf;
        const int64_t X = experts_of(r); /* the layer's units */
        const int64_t *c = (p->how == T_SELS ? r->st->sel : r->st->counts) + (int64_t)p->layer * X * F;
        for (int64_t x = 0; x < X; x++)
            for (int64_t k = 0; k < F; k++) out[x * F + k] = (int32_t)c[x * F + old_of(r, (int)(p->layer * X + x), k)];
        return pi_gguf_write_data(w, out, (size_t)(F * X) * 4);
    }
    case T_RETYPE: return retype(r, w, p, data);
    case T_BUNDLE: { /* the parts overwrite the same bytes each time: the padding stays zero */
        const pi_layer *l = &m->layers[p->layer];
        const pi_bundle_parts *b = &r->bl.layer[p->layer];
        const size_t stride = r->bl.stride;
        const uint8_t *down;
        if ((rc = layer_down_t(r, p->layer, &down))) return rc;
        const bool moe = m->hp.n_expert > 0;
        const pi_weight *gw = moe ? &l->ffn_gate_exps : &l->ffn_gate, *uw = moe ? &l->ffn_up_exps : &l->ffn_up;
        const uint8_t *gate = gw->data, *up = uw->data;
        memset(r->buf, 0, stride);
        for (int64_t x = 0; x < (moe ? m->hp.n_expert : 1); x++) /* a mixture: its experts in order, unpermuted */
            for (int64_t k = 0; k < F && !rc; k++) {
                const size_t i = (size_t)old_row(r, p->layer, x, k);
                memcpy(r->buf + b->off[PI_BUNDLE_GATE], gate + i * gw->row_bytes, b->bytes[PI_BUNDLE_GATE]);
                memcpy(r->buf + b->off[PI_BUNDLE_UP], up + i * uw->row_bytes, b->bytes[PI_BUNDLE_UP]);
                memcpy(r->buf + b->off[PI_BUNDLE_DOWN], down + i * b->bytes[PI_BUNDLE_DOWN], b->bytes[PI_BUNDLE_DOWN]);
                rc = pi_gguf_write_data(w, r->buf, stride);
            }
        return rc;
    }
    }
    return PI_OK;
}

pi_status pi_rewrite_model(const char *in_path, const pi_rewrite_params *p, const char *out_path) {
    const pi_stats *st = p->st;
    const bool bundle = p->bundle;
    if (!st && !bundle && !p->retype_output && !p->retype_embd && !p->plain && !p->type_of)
        return pi_error(PI_ERR_INVALID, "reordering %s needs statistics", in_path);
    if (p->plain && (st || bundle))
        return pi_error(PI_ERR_INVALID, "a plain file is neither reordered nor bundled");
    if (p->recall > 0.0 && (!st || !st->hist))
        return pi_error(PI_ERR_INVALID, "thresholds for a recall target need statistics with the predictors' logit "
                        "histograms (pinfer profile of a model with predictors)");
    if (p->coact_window != 0 && (!st || !st->mask_tokens))
        return pi_error(PI_ERR_INVALID, "ordering by co-activation needs statistics with activation masks (pinfer "
                        "profile --masks N)");
    rewriter r = {.in_path = in_path, .st = st, .bundle = bundle, .plain = p->plain, .recall = p->recall,
                  .file_type = p->type_of ? p->file_type : -1, .n_threads = p->n_threads > 0 ? p->n_threads : 1};
    pi_gguf_writer *w = NULL;
    pi_status rc = pi_lm_load(in_path, PI_MAP_FILE, &r.m);
    if (rc) return rc;
    const pi_hparams *hp = &r.m->hp;
    const int64_t L = hp->n_layer, F = hp->n_ff;
    if ((rc = check_input(&r, p->align))) goto done;
    const int64_t U = pi_ffn_units(hp);
    size_t buf_bytes = (size_t)(F * (hp->n_expert ? hp->n_expert : 1)) * 8;
    if (bundle && r.bl.stride > buf_bytes) buf_bytes = r.bl.stride;
    r.plan = calloc((size_t)(pi_gguf_n_tensors(r.m->gguf) + 3 * L), sizeof *r.plan);
    r.buf = malloc(buf_bytes);
    r.has_bundle = calloc((size_t)L, sizeof *r.has_bundle);
    if (st) r.perm = malloc((size_t)(U * F) * sizeof *r.perm);
    if (!r.plan || !r.buf || !r.has_bundle || (st && !r.perm)) {
        rc = pi_error(PI_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t u = 0; st && u < U && !rc; u++) /* per unit: each expert on its own */
        rc = pi_stats_order_coact(st, u, p->coact_window, r.perm + u * F);
    if (rc) goto done;
    make_plan(&r);
    if ((rc = plan_retype(&r, p))) goto done;

    if ((rc = pi_gguf_writer_create(out_path, pi_gguf_is_pwri(r.m->gguf), &w)) || (rc = write_keys(&r, w))) goto done;
    pi_gguf_writer_set_progress(w, p->progress, p->progress_ctx);
    for (int64_t i = 0; i < r.np && !rc; i++)
        rc = pi_gguf_add_tensor(w, r.plan[i].name, r.plan[i].type, r.plan[i].n_dims, r.plan[i].ne);
    if (!rc) rc = pi_gguf_writer_begin_data(w);
    for (int64_t i = 0; i < r.np && !rc; i++) rc = write_tensor(&r, w, &r.plan[i]);
done:
    rc = pi_gguf_writer_finish(w, rc);
    free(r.down_t);
    free(r.buf);
    pi_bundle_layout_free(&r.bl);
    free(r.plan);
    free(r.perm);
    free(r.has_bundle);
    pi_lm_free(r.m);
    return rc;
}

pi_status pi_reorder_write(const char *in_path, const pi_stats *st, const char *out_path) {
    const pi_rewrite_params p = {.st = st};
    return pi_rewrite_model(in_path, &p, out_path);
}

pi_status pi_bundle_write(const char *in_path, const pi_stats *st, uint32_t align, const char *out_path) {
    const pi_rewrite_params p = {.st = st, .bundle = true, .align = align};
    return pi_rewrite_model(in_path, &p, out_path);
}
