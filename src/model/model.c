/*
 * model.c — binding a GGUF file to a pi_lm: hyperparameters from the
 * llama.cpp metadata keys, weight views by llama.cpp tensor names, and shape
 * checks so that the forward pass can trust every dimension it reads.
 * Bundle files (gguf/bundle.h) are de-interleaved into owned matrices here.
 */
#include "model.h"

#include "base/log.h"
#include "gguf/bundle.h"
#include "gguf/names.h"
#include "kernels/validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *pi_ffn_act_name(pi_ffn_act a) {
    switch (a) {
    case PI_ACT_SILU: return "silu";
    case PI_ACT_RELU: return "relu";
    case PI_ACT_DRELU: return "drelu";
    }
    return "?";
}

typedef struct {
    pi_lm *m;
    const char *path;
    uint64_t owned_used, owned_cap; /* floats */
    pi_bundle_layout bl;            /* m->bundled */
    bool ffn_on_flash;              /* PI_LOAD_FFN_ON_FLASH: views into the file, not copies */
    bool unchecked;                 /* PI_LOAD_UNCHECKED: bind() reads no tensor data */
} loader;

/* "<arch>.<suffix>" */
static const char *akey(char *buf, size_t n, const char *arch, const char *suffix) {
    snprintf(buf, n, "%s.%s", arch, suffix);
    return buf;
}

/* An integer hyperparameter in [lo, hi]; an optional one that is absent
   takes dflt (when that is in range). */
static pi_status get_int(loader *L, const char *arch, const char *suffix, bool required, int64_t dflt,
                         int64_t lo, int64_t hi, int64_t *out) {
    char key[128];
    akey(key, sizeof key, arch, suffix);
    pi_status st = pi_gguf_get_i64_range(L->m->gguf, key, lo, hi, out);
    if (st != PI_ERR_NOT_FOUND) return st;
    if (required) return pi_error(PI_ERR_NOT_FOUND, "%s: missing metadata key '%s'", L->path, key);
    if (dflt < lo || dflt > hi)
        return pi_error(PI_ERR_FORMAT, "%s: metadata '%s' is absent and its default %lld is out of range [%lld, %lld]",
                        L->path, key, (long long)dflt, (long long)lo, (long long)hi);
    *out = dflt;
    return PI_OK;
}

static pi_status get_float(loader *L, const char *arch, const char *suffix, float dflt, float *out) {
    char key[128];
    akey(key, sizeof key, arch, suffix);
    pi_status st = pi_gguf_get_f32(L->m->gguf, key, out);
    if (st == PI_ERR_NOT_FOUND) {
        *out = dflt;
        return PI_OK;
    }
    return st ? pi_error_prefix(st, "%s", L->path) : PI_OK;
}

pi_status pi_check_scales(const char *path, pi_gguf_str name, pi_type t, const void *data, int64_t n, int64_t row0,
                          int64_t rows, size_t stride) {
    float v = 0.0f;
    const int64_t bad = pi_rows_bad_scale(t, data, n, rows, stride, &v);
    if (bad < 0) return PI_OK;
    const int64_t nb = n / pi_type_get((uint32_t)t)->blck;
    return pi_error(PI_ERR_FORMAT, "%s: tensor '%.*s' (%s): block %lld of row %lld has a non-finite scale (%g)", path,
                    (int)name.len, name.data, pi_type_name(t), (long long)(bad % nb), (long long)(row0 + bad / nb),
                    (double)v);
}

static pi_status check_scales(const loader *L, pi_gguf_str name, pi_type t, const void *data, int64_t n, int64_t rows,
                              size_t stride) {
    return pi_check_scales(L->path, name, t, data, n, 0, rows, stride);
}

/* Bind tensor `name` with the expected shape (ne[i] < 0: any). Optional
   tensors that are absent leave w zeroed and return PI_OK. */
static pi_status bind(loader *L, pi_weight *w, const char *name, int n_dims, int64_t e0, int64_t e1, int64_t e2,
                      bool required) {
    memset(w, 0, sizeof *w);
    const pi_gguf_tensor *t = pi_gguf_find_tensor(L->m->gguf, name);
    if (!t) {
        if (!required) return PI_OK;
        return pi_error(PI_ERR_NOT_FOUND, "%s: missing tensor '%s'", L->path, name);
    }
    const int64_t want[3] = {e0, e1, e2};
    for (int i = 0; i < PI_GGUF_MAX_DIMS; i++) {
        int64_t expect = i < n_dims ? want[i] : 1;
        int64_t have = i < (int)t->n_dims ? t->ne[i] : 1;
        if (expect >= 0 && have != expect) {
            char shape[96];
            int k = 0;
            for (uint32_t d = 0; d < t->n_dims; d++)
                k += snprintf(shape + k, sizeof shape - (size_t)k, "%s%lld", d ? " x " : "", (long long)t->ne[d]);
            return pi_error(PI_ERR_FORMAT, "%s: tensor '%s' has shape [%s]; dimension %d should be %lld", L->path,
                            name, shape, i, (long long)expect);
        }
    }
    const pi_type_info *ti = pi_type_get(t->type);
    if (!ti || !ti->compute)
        return pi_error(PI_ERR_UNSUPPORTED,
                        "%s: tensor '%s' has type %s; supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, "
                        "q5_K, q6_K",
                        L->path, name, pi_type_name(t->type));
    if (t->ne[0] % ti->blck) /* the GGUF reader checks this too; the kernels rely on it */
        return pi_error(PI_ERR_FORMAT, "%s: tensor '%s' has rows of %lld elements, not a multiple of %s's block of %lld",
                        L->path, name, (long long)t->ne[0], ti->name, (long long)ti->blck);
    if (t->ne[0] > PI_MAX_ROW)
        return pi_error(PI_ERR_UNSUPPORTED, "%s: tensor '%s' rows of %lld elements exceed the limit %d", L->path, name,
                        (long long)t->ne[0], PI_MAX_ROW);
    w->data = t->data;
    w->type = (pi_type)t->type;
    for (int i = 0; i < 4; i++) w->ne[i] = i < (int)t->n_dims ? t->ne[i] : 1;
    w->row_bytes = pi_row_size(w->type, w->ne[0]);
    w->name = t->name;
    pi_status st = L->unchecked ? PI_OK
                                : check_scales(L, t->name, w->type, w->data, w->ne[0], w->ne[1] * w->ne[2] * w->ne[3],
                                               w->row_bytes);
    if (st) return st;
    L->m->weight_bytes += t->nbytes;
    L->m->n_params += (uint64_t)(w->ne[0] * w->ne[1] * w->ne[2] * w->ne[3]);
    return PI_OK;
}

/* Norm vectors are used as F32; convert other types into the owned buffer. */
static pi_status as_f32(loader *L, pi_weight *w) {
    if (!w->data || w->type == PI_TYPE_F32) return PI_OK;
    PI_ASSERT(L->owned_used + (uint64_t)w->ne[0] <= L->owned_cap);
    float *dst = L->m->owned_f32 + L->owned_used;
    pi_dequantize_row(w->type, w->data, dst, w->ne[0]);
    L->owned_used += (uint64_t)w->ne[0];
    w->data = dst;
    w->type = PI_TYPE_F32;
    w->row_bytes = (size_t)w->ne[0] * sizeof(float);
    return PI_OK;
}

static pi_status load_hparams(loader *L, const char *arch) {
    pi_hparams *hp = &L->m->hp;
    pi_status st;
    const int64_t BIG = (int64_t)1 << 24;
    if ((st = get_int(L, arch, PI_AKEY_EMBEDDING_LENGTH, true, 0, 1, BIG, &hp->n_embd)) ||
        (st = get_int(L, arch, PI_AKEY_BLOCK_COUNT, true, 0, 1, 4096, &hp->n_layer)) ||
        (st = get_int(L, arch, PI_AKEY_FEED_FORWARD_LENGTH, true, 0, 1, BIG, &hp->n_ff)) ||
        (st = get_int(L, arch, PI_AKEY_HEAD_COUNT, true, 0, 1, 65536, &hp->n_head)) ||
        (st = get_int(L, arch, PI_AKEY_HEAD_COUNT_KV, false, hp->n_head, 1, hp->n_head, &hp->n_head_kv)) ||
        (st = get_int(L, arch, PI_AKEY_CONTEXT_LENGTH, false, 2048, 1, (int64_t)1 << 30, &hp->n_ctx_train)) ||
        (st = get_int(L, arch, PI_AKEY_EXPERT_COUNT, false, 0, 0, 1024, &hp->n_expert)) ||
        (st = get_int(L, arch, PI_AKEY_EXPERT_USED_COUNT, false, 0, 0, hp->n_expert, &hp->n_expert_used)) ||
        (st = get_float(L, arch, PI_AKEY_RMS_EPS, 1e-5f, &hp->rms_eps)) ||
        (st = get_float(L, arch, PI_AKEY_ROPE_FREQ_BASE, 10000.0f, &hp->rope_freq_base)))
        return st;
    if (hp->n_embd % hp->n_head)
        return pi_error(PI_ERR_FORMAT, "%s: %s %lld is not a multiple of %s %lld", L->path, PI_AKEY_EMBEDDING_LENGTH,
                        (long long)hp->n_embd, PI_AKEY_HEAD_COUNT, (long long)hp->n_head);
    if (hp->n_head % hp->n_head_kv)
        return pi_error(PI_ERR_FORMAT, "%s: %s %lld is not a multiple of %s %lld", L->path, PI_AKEY_HEAD_COUNT,
                        (long long)hp->n_head, PI_AKEY_HEAD_COUNT_KV, (long long)hp->n_head_kv);
    hp->head_dim = hp->n_embd / hp->n_head;
    if ((st = get_int(L, arch, PI_AKEY_ROPE_DIMENSION_COUNT, false, hp->head_dim, 2, hp->head_dim, &hp->n_rot)))
        return st;
    if (hp->n_rot % 2)
        return pi_error(PI_ERR_FORMAT, "%s: %s %lld must be even", L->path, PI_AKEY_ROPE_DIMENSION_COUNT,
                        (long long)hp->n_rot);
    if (hp->n_expert && !hp->n_expert_used)
        return pi_error(PI_ERR_FORMAT, "%s: %s.%s is %lld but %s is missing or 0", L->path, arch, PI_AKEY_EXPERT_COUNT,
                        (long long)hp->n_expert, PI_AKEY_EXPERT_USED_COUNT);
    if (hp->n_expert_used > PI_MOE_MAX_USED)
        return pi_error(PI_ERR_UNSUPPORTED, "%s: %s is %lld; at most %d experts per token are supported", L->path,
                        PI_AKEY_EXPERT_USED_COUNT, (long long)hp->n_expert_used, PI_MOE_MAX_USED);
    if (!(hp->rms_eps > 0.0f) || !(hp->rope_freq_base > 0.0f))
        return pi_error(PI_ERR_FORMAT, "%s: rms epsilon and rope frequency base must be positive", L->path);

    /* PowerInfer's files are ReLU models and have no activation key */
    hp->act = pi_gguf_is_pwri(L->m->gguf) ? PI_ACT_RELU : PI_ACT_SILU;
    pi_gguf_str act;
    st = pi_gguf_get_str(L->m->gguf, PI_KEY_FFN_ACTIVATION, &act);
    if (st == PI_OK) {
        if (pi_gguf_str_eq(act, "silu")) hp->act = PI_ACT_SILU;
        else if (pi_gguf_str_eq(act, "relu")) hp->act = PI_ACT_RELU;
        else if (pi_gguf_str_eq(act, "drelu")) hp->act = PI_ACT_DRELU;
        else
            return pi_error(PI_ERR_UNSUPPORTED, "%s: %s = '%.*s' is not one of silu, relu, drelu", L->path,
                            PI_KEY_FFN_ACTIVATION, (int)(act.len > 64 ? 64 : act.len), act.data);
    } else if (st != PI_ERR_NOT_FOUND) {
        return pi_error_prefix(st, "%s", L->path);
    }
    return PI_OK;
}

/* A bundled layer: record where its bundles are and copy each part into an
   owned matrix, bound as ffn_gate, ffn_up and ffn_down_t (a mixture:
   ffn_gate_exps, ffn_up_exps and ffn_down_t, ne {n_embd, n_ff, n_expert}). */
static pi_status bind_bundles(loader *L, int il) {
    pi_lm *m = L->m;
    pi_layer *l = &m->layers[il];
    const pi_bundle_layout *b = &L->bl;
    const pi_gguf_tensor *t;
    const int64_t X = m->hp.n_expert;
    pi_status st = pi_bundle_tensor(m->gguf, L->path, b, il, X, &t);
    if (st) return st;
    const pi_bundle_parts *pt = &b->layer[il];
    l->bundle = (pi_layer_bundle){t->data, (int64_t)pi_gguf_tensor_file_offset(m->gguf, t), b->stride, *pt, true};
    const size_t *off = pt->off, *rb = pt->bytes;
    const pi_type *type = pt->type;
    pi_weight *dst[3] = {X ? &l->ffn_gate_exps : &l->ffn_gate, X ? &l->ffn_up_exps : &l->ffn_up, &l->ffn_down_t};
    const int64_t F = b->n_ff, XF = F * (X ? X : 1);
    if (L->ffn_on_flash) { /* strided views of the bundles; the offload path never touches them */
        for (int k = 0; k < 3; k++)
            *dst[k] = (pi_weight){(const uint8_t *)t->data + off[k], type[k], {b->n_embd, F, X ? X : 1, 1}, b->stride,
                                  t->name};
        m->weight_bytes += t->nbytes;
        m->n_params += 3 * (uint64_t)(b->n_embd * XF);
        return PI_OK;
    }
    for (int k = 0; k < 3; k++) {
        size_t bytes = rb[k] * (size_t)XF;
        uint8_t *p = pi_huge_alloc(bytes);
        if (!p)
            return pi_error(PI_ERR_NOMEM, "%s: cannot allocate %.0f MiB for layer %d's FFN", L->path,
                            (double)bytes / (1 << 20), il);
        m->owned_ffn[3 * il + k] = p;
        m->owned_ffn_bytes[3 * il + k] = bytes;
        const uint8_t *src = (const uint8_t *)t->data + off[k];
        for (int64_t i = 0; i < XF; i++) memcpy(p + (size_t)i * rb[k], src + (size_t)i * b->stride, rb[k]);
        *dst[k] = (pi_weight){p, type[k], {b->n_embd, F, X ? X : 1, 1}, rb[k], t->name};
        if ((st = check_scales(L, t->name, type[k], p, b->n_embd, XF, rb[k]))) return st; /* row = bundle */
    }
    m->weight_bytes += t->nbytes;
    m->n_params += 3 * (uint64_t)(b->n_embd * XF);
    return PI_OK;
}

static pi_status bind_layer(loader *L, int il) {
    const pi_hparams *hp = &L->m->hp;
    pi_layer *l = &L->m->layers[il];
    char nm[PI_NAME_MAX];
    pi_status st;
    const int64_t E = hp->n_embd, D = hp->head_dim, F = hp->n_ff;
#define NM(fmt) (snprintf(nm, sizeof nm, fmt, il), nm)
    if ((st = bind(L, &l->attn_norm, NM(PI_TN_ATTN_NORM), 1, E, 0, 0, true)) ||
        (st = bind(L, &l->wq, NM(PI_TN_ATTN_Q), 2, E, hp->n_head * D, 0, true)) ||
        (st = bind(L, &l->wk, NM(PI_TN_ATTN_K), 2, E, hp->n_head_kv * D, 0, true)) ||
        (st = bind(L, &l->wv, NM(PI_TN_ATTN_V), 2, E, hp->n_head_kv * D, 0, true)) ||
        (st = bind(L, &l->wo, NM(PI_TN_ATTN_OUT), 2, hp->n_head * D, E, 0, true)) ||
        (st = bind(L, &l->ffn_norm, NM(PI_TN_FFN_NORM), 1, E, 0, 0, true)))
        return st;
    if (L->m->bundled) {
        if ((st = bind_bundles(L, il))) return st;
    } else if (!hp->n_expert) {
        if ((st = bind(L, &l->ffn_gate, NM(PI_TN_FFN_GATE), 2, E, F, 0, true)) ||
            (st = bind(L, &l->ffn_up, NM(PI_TN_FFN_UP), 2, E, F, 0, true)) ||
            (st = bind(L, &l->ffn_down_t, NM(PI_TN_FFN_DOWN_T), 2, E, F, 0, false)) ||
            (st = bind(L, &l->ffn_down, NM(PI_TN_FFN_DOWN), 2, F, E, 0, !l->ffn_down_t.data)))
            return st;
    }
    if (!hp->n_expert) {
        /* the predictor: both matrices or neither, with one rank */
        if ((st = bind(L, &l->fc1, NM(PI_TN_FC1), 2, E, -1, 0, false)) ||
            (st = bind(L, &l->fc2, NM(PI_TN_FC2), 2, l->fc1.data ? l->fc1.ne[1] : -1, F, 0, false)))
            return st;
        if (!l->fc1.data != !l->fc2.data)
            return pi_error(PI_ERR_FORMAT, "%s: layer %d has only one of the predictor tensors fc1/fc2", L->path, il);
    } else {
        const int64_t X = hp->n_expert;
        if ((st = bind(L, &l->ffn_gate_inp, NM(PI_TN_FFN_GATE_INP), 2, E, X, 0, true)) ||
            (!L->m->bundled && ((st = bind(L, &l->ffn_gate_exps, NM(PI_TN_FFN_GATE_EXPS), 3, E, F, X, true)) ||
                                (st = bind(L, &l->ffn_up_exps, NM(PI_TN_FFN_UP_EXPS), 3, E, F, X, true)) ||
                                (st = bind(L, &l->ffn_down_exps, NM(PI_TN_FFN_DOWN_EXPS), 3, F, E, X, true)))) ||
            (st = bind(L, &l->fc1_exps, NM(PI_TN_FC1_EXPS), 3, E, -1, X, false)) ||
            (st = bind(L, &l->fc2_exps, NM(PI_TN_FC2_EXPS), 3, l->fc1_exps.data ? l->fc1_exps.ne[1] : -1, F, X, false)))
            return st;
        if (!l->fc1_exps.data != !l->fc2_exps.data)
            return pi_error(PI_ERR_FORMAT, "%s: layer %d has only one of the predictor tensors fc1_exps/fc2_exps",
                            L->path, il);
    }
#undef NM
    if ((st = as_f32(L, &l->attn_norm)) || (st = as_f32(L, &l->ffn_norm))) return st;
    return PI_OK;
}

static pi_status model_from_gguf(pi_gguf *g, const char *path, unsigned flags, pi_lm **out);

pi_status pi_lm_from_gguf(pi_gguf *g, const char *path, pi_lm **out) {
    return model_from_gguf(g, path, 0, out);
}

static pi_status model_from_gguf(pi_gguf *g, const char *path, unsigned flags, pi_lm **out) {
    *out = NULL;
    pi_lm *m = calloc(1, sizeof *m);
    if (!m) return pi_error(PI_ERR_NOMEM, "%s: out of memory", path);
    m->gguf = g;
    loader L = {.m = m, .path = path, .ffn_on_flash = (flags & PI_LOAD_FFN_ON_FLASH) != 0,
                .unchecked = (flags & PI_LOAD_UNCHECKED) != 0};
    pi_status st;
    pi_gguf_str arch;
    if ((st = pi_gguf_get_str(g, PI_KEY_GENERAL_ARCHITECTURE, &arch))) {
        st = pi_error(st == PI_ERR_NOT_FOUND ? PI_ERR_FORMAT : st,
                      "%s: missing or invalid '%s' (is this a model file?)", path, PI_KEY_GENERAL_ARCHITECTURE);
        goto fail;
    }
    if (!pi_gguf_str_eq(arch, PI_ARCH_LLAMA)) {
        st = pi_error(PI_ERR_UNSUPPORTED, "%s: architecture '%.*s' is not supported (supported: %s)", path,
                      (int)(arch.len > 64 ? 64 : arch.len), arch.data, PI_ARCH_LLAMA);
        goto fail;
    }
    m->pwri = pi_gguf_is_pwri(g);
    if ((st = load_hparams(&L, PI_ARCH_LLAMA))) goto fail;
    pi_hparams *hp = &m->hp;
    if (!(m->path = strdup(path)) ||
        !(m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers))) {
        st = pi_error(PI_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    if (pi_bundle_present(g)) {
        if ((st = pi_bundle_layout_read(g, path, hp->n_layer, &L.bl))) goto fail;
        if (hp->act == PI_ACT_SILU) {
            st = pi_error(PI_ERR_FORMAT, "%s: a bundle file of a SiLU model (bundles are for ReLU/dReLU FFNs)", path);
            goto fail;
        }
        if (L.bl.n_embd != hp->n_embd || L.bl.n_ff != hp->n_ff) {
            st = pi_error(PI_ERR_FORMAT, "%s: %s = %lld and %s = %lld disagree with the model's %lld and %lld", path,
                          PI_KEY_BUNDLE_N_EMBD, (long long)L.bl.n_embd, PI_KEY_BUNDLE_N_FF, (long long)L.bl.n_ff,
                          (long long)hp->n_embd, (long long)hp->n_ff);
            goto fail;
        }
        if (L.bl.n_embd > PI_MAX_ROW) {
            st = pi_error(PI_ERR_UNSUPPORTED, "%s: rows of %lld elements exceed the limit %d", path,
                          (long long)L.bl.n_embd, PI_MAX_ROW);
            goto fail;
        }
        m->bundled = true;
        m->bundle_align = L.bl.align;
        if (!(m->owned_ffn = calloc((size_t)hp->n_layer * 3, sizeof *m->owned_ffn)) ||
            !(m->owned_ffn_bytes = calloc((size_t)hp->n_layer * 3, sizeof *m->owned_ffn_bytes))) {
            st = pi_error(PI_ERR_NOMEM, "%s: out of memory", path);
            goto fail;
        }
    }
    L.owned_cap = (uint64_t)hp->n_embd * (uint64_t)(2 * hp->n_layer + 1);
    if (!(m->owned_f32 = malloc(L.owned_cap * sizeof(float)))) {
        st = pi_error(PI_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    if ((st = bind(&L, &m->tok_embd, PI_TN_TOKEN_EMBD, 2, hp->n_embd, -1, 0, true))) goto fail;
    hp->n_vocab = m->tok_embd.ne[1];
    if ((st = bind(&L, &m->output_norm, PI_TN_OUTPUT_NORM, 1, hp->n_embd, 0, 0, true)) ||
        (st = as_f32(&L, &m->output_norm)) ||
        (st = bind(&L, &m->output, PI_TN_OUTPUT, 2, hp->n_embd, hp->n_vocab, 0, false)))
        goto fail;
    if (!m->output.data) {
        m->output = m->tok_embd;
        m->tied_output = true;
    }
    for (int il = 0; il < hp->n_layer; il++)
        if ((st = bind_layer(&L, il))) goto fail;
    m->has_predictor = true;
    for (int il = 0; il < hp->n_layer; il++)
        m->has_predictor &= (hp->n_expert ? m->layers[il].fc1_exps.data : m->layers[il].fc1.data) != NULL;
    m->sparse_threshold = 0.0f; /* logit 0 = probability 0.5 */
    if ((st = pi_gguf_get_f32(g, PI_KEY_SPARSE_THRESHOLD, &m->sparse_threshold)) && st != PI_ERR_NOT_FOUND) {
        pi_error_prefix(st, "%s", path);
        goto fail;
    }
    st = PI_OK;
    const pi_gguf_kv *thr;
    st = pi_gguf_get_arr(g, PI_KEY_PREDICTOR_THRESHOLDS, PI_GGUF_FLOAT32, &thr);
    if (st == PI_OK) {
        /* one per FFN unit; a mixture of experts may give one per layer, shared by its experts */
        const int64_t U = pi_ffn_units(hp), per = U / hp->n_layer;
        if ((int64_t)thr->arr_n != U && (int64_t)thr->arr_n != hp->n_layer) {
            st = pi_error(PI_ERR_FORMAT, "%s: %s has %llu values for %lld layers%s", path, PI_KEY_PREDICTOR_THRESHOLDS,
                          (unsigned long long)thr->arr_n, (long long)hp->n_layer,
                          hp->n_expert ? " (one per layer, or per layer and expert)" : "");
            goto fail;
        }
        if (!(m->layer_threshold = malloc((size_t)U * sizeof(float)))) {
            st = pi_error(PI_ERR_NOMEM, "%s: out of memory", path);
            goto fail;
        }
        if ((int64_t)thr->arr_n == U) memcpy(m->layer_threshold, thr->arr_data, (size_t)U * sizeof(float)); /* packed */
        else
            for (int64_t u = 0; u < U; u++) memcpy(&m->layer_threshold[u], (const uint8_t *)thr->arr_data + 4 * (u / per), 4);
    } else if (st != PI_ERR_NOT_FOUND) {
        pi_error_prefix(st, "%s", path);
        goto fail;
    }
    st = PI_OK;
    pi_bundle_layout_free(&L.bl);
    *out = m;
    return PI_OK;
fail:
    pi_bundle_layout_free(&L.bl);
    m->gguf = NULL; /* the caller keeps g on failure */
    pi_lm_free(m);
    return st;
}

pi_status pi_lm_load_ex(const char *path, pi_map_mode mode, unsigned flags, pi_lm **out) {
    *out = NULL;
    pi_gguf *g;
    pi_status st = pi_gguf_open_mode(path, mode, &g);
    if (st) return st;
    if ((st = model_from_gguf(g, path, flags, out))) pi_gguf_close(g);
    return st;
}

pi_status pi_lm_load(const char *path, pi_map_mode mode, pi_lm **out) {
    return pi_lm_load_ex(path, mode, 0, out);
}

pi_type pi_weight_down_t_type(const pi_weight *down) {
    return pi_row_size(down->type, down->ne[1]) ? down->type : PI_TYPE_F32; /* else keep full precision */
}

#define TRANSPOSE_STRIP 256 /* columns of down dequantized at a time: a multiple of every block size */

pi_status pi_weight_transpose(const pi_weight *d, pi_type t, void *dst) {
    const int64_t F = d->ne[0], E = d->ne[1]; /* E rows of F */
    const pi_type_info *ti = pi_type_get(d->type);
    const size_t rb = pi_row_size(t, E);
    if (!ti || F % ti->blck || TRANSPOSE_STRIP % ti->blck || !rb)
        return pi_error(PI_ERR_INVALID, "cannot transpose '%.*s' (%lld x %lld, %s) into rows of %s", (int)d->name.len,
                        d->name.data ? d->name.data : "", (long long)F, (long long)E, pi_type_name(d->type),
                        pi_type_name(t));
    float *strip = malloc((size_t)E * TRANSPOSE_STRIP * sizeof *strip), *row = malloc((size_t)E * sizeof *row);
    if (!strip || !row) {
        free(strip);
        free(row);
        return pi_error(PI_ERR_NOMEM, "cannot allocate %.1f MiB to transpose a down projection",
                        (double)E * TRANSPOSE_STRIP * 4 / (1 << 20));
    }
    /* block types dequantize block by block, so a strip's values are the
       whole row's, and each transposed row is quantized once */
    for (int64_t i0 = 0; i0 < F; i0 += TRANSPOSE_STRIP) {
        const int64_t n = F - i0 < TRANSPOSE_STRIP ? F - i0 : TRANSPOSE_STRIP;
        const size_t skip = pi_row_size(d->type, i0);
        for (int64_t j = 0; j < E; j++)
            pi_dequantize_row(d->type, (const uint8_t *)d->data + (size_t)j * d->row_bytes + skip,
                              strip + j * TRANSPOSE_STRIP, n);
        for (int64_t i = 0; i < n; i++) {
            for (int64_t j = 0; j < E; j++) row[j] = strip[j * TRANSPOSE_STRIP + i];
            pi_quantize_row(t, row, (uint8_t *)dst + (size_t)(i0 + i) * rb, E);
        }
    }
    free(strip);
    free(row);
    return PI_OK;
}

pi_status pi_lm_make_down_t(pi_lm *m) {
    const pi_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, F = hp->n_ff, X = hp->n_expert ? hp->n_expert : 1;
    if (!m->owned_down_t) {
        m->owned_down_t = calloc((size_t)hp->n_layer, sizeof *m->owned_down_t);
        m->owned_down_t_bytes = calloc((size_t)hp->n_layer, sizeof *m->owned_down_t_bytes);
        if (!m->owned_down_t || !m->owned_down_t_bytes) return pi_error(PI_ERR_NOMEM, "out of memory");
    }
    for (int64_t il = 0; il < hp->n_layer; il++) {
        pi_layer *l = &m->layers[il];
        if (l->ffn_down_t.data) continue;
        const pi_weight *down = hp->n_expert ? &l->ffn_down_exps : &l->ffn_down;
        const pi_type t = pi_weight_down_t_type(down);
        const size_t rb = pi_row_size(t, E), bytes = rb * (size_t)(F * X);
        uint8_t *dst = pi_huge_alloc(bytes);
        if (!dst)
            return pi_error(PI_ERR_NOMEM, "%s: cannot allocate %.0f MiB for transposed down projections", m->path,
                            (double)bytes / (1 << 20));
        /* expert x's E rows of F become its F rows of E, at rows x F .. */
        pi_status st = PI_OK;
        for (int64_t x = 0; x < X && !st; x++) {
            pi_weight slice = *down;
            slice.data = (const uint8_t *)down->data + (size_t)(x * E) * down->row_bytes;
            slice.ne[2] = 1;
            st = pi_weight_transpose(&slice, t, dst + (size_t)(x * F) * rb);
        }
        if (st) {
            pi_huge_free(dst, bytes);
            return pi_error_prefix(st, "%s: layer %lld", m->path, (long long)il);
        }
        m->owned_down_t[il] = dst;
        m->owned_down_t_bytes[il] = bytes;
        l->ffn_down_t = (pi_weight){dst, t, {E, F, X, 1}, rb, {0, NULL}};
    }
    return PI_OK;
}

void pi_lm_free(pi_lm *m) {
    if (!m) return;
    for (int64_t il = 0; m->owned_down_t && il < m->hp.n_layer; il++)
        pi_huge_free(m->owned_down_t[il], m->owned_down_t_bytes[il]);
    free(m->owned_down_t);
    free(m->owned_down_t_bytes);
    for (int64_t i = 0; m->owned_ffn && i < 3 * m->hp.n_layer; i++) pi_huge_free(m->owned_ffn[i], m->owned_ffn_bytes[i]);
    free(m->owned_ffn);
    free(m->owned_ffn_bytes);
    pi_gguf_close(m->gguf);
    free(m->layers);
    free(m->owned_f32);
    free(m->layer_threshold);
    free(m->layer_split);
    free(m->layer_threshold_hot);
    free(m->path);
    free(m);
}

uint64_t pi_lm_bytes_per_token(const pi_lm *m) {
    const pi_hparams *hp = &m->hp;
    uint64_t b = m->tok_embd.row_bytes + m->output.row_bytes * (uint64_t)m->output.ne[1] +
                 (uint64_t)hp->n_embd * sizeof(float);
    for (int il = 0; il < hp->n_layer; il++) {
        const pi_layer *l = &m->layers[il];
        const pi_weight *ws[] = {&l->attn_norm, &l->wq, &l->wk, &l->wv, &l->wo, &l->ffn_norm,
                                 &l->ffn_gate, &l->ffn_up, l->ffn_down.data ? &l->ffn_down : &l->ffn_down_t,
                                 &l->ffn_gate_inp};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) /* rows, not strides: bundle views are strided */
            b += pi_weight_nbytes(ws[i]);
        if (hp->n_expert) { /* n_expert_used of the experts' matrices */
            const pi_weight *es[] = {&l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps};
            for (size_t i = 0; i < 3; i++) b += es[i]->row_bytes * (uint64_t)es[i]->ne[1] * (uint64_t)hp->n_expert_used;
        }
    }
    return b;
}

size_t pi_weight_nbytes(const pi_weight *w) {
    return w->data ? pi_row_size(w->type, w->ne[0]) * (size_t)(w->ne[1] * (w->ne[2] ? w->ne[2] : 1) * (w->ne[3] ? w->ne[3] : 1)) : 0;
}

void pi_weight_row_f32(const pi_weight *w, int64_t row, float *out) {
    pi_dequantize_row(w->type, (const uint8_t *)w->data + (size_t)row * w->row_bytes, out, w->ne[0]);
}
