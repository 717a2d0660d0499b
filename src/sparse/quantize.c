/*
 * quantize.c — llama-quantize's recipes on pinfer's rewriter (quantize.h).
 *
 * A recipe is a base type and, for the K-quant mixes, the tensors that get
 * more bits: the output head Q6_K (for every quantized recipe but Q8_0), and
 * in Q4_K_M / Q5_K_M the attention value and FFN down projections of the
 * layers i with i < n/8, i >= 7n/8 or (i - n/8) % 3 == 2 Q6_K; in Q4_K_S the
 * first four attn_v and the first n/8 ffn_down Q5_K; in an eight-expert
 * mixture attn_v and attn_k Q8_0. Layers are read from the tensor names.
 */
#include "sparse/quantize.h"

#include "gguf/names.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "sparse/reorder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *name;
    pi_type base;
    int file_type; /* llama.cpp's llama_ftype */
} recipes[PI_QR_COUNT] = {
    [PI_QR_F32] = {"f32", PI_TYPE_F32, 0},       [PI_QR_F16] = {"f16", PI_TYPE_F16, 1},
    [PI_QR_BF16] = {"bf16", PI_TYPE_BF16, 32},   [PI_QR_Q8_0] = {"q8_0", PI_TYPE_Q8_0, 7},
    [PI_QR_Q4_0] = {"q4_0", PI_TYPE_Q4_0, 2},    [PI_QR_Q4_K_S] = {"q4_k_s", PI_TYPE_Q4_K, 14},
    [PI_QR_Q4_K_M] = {"q4_k_m", PI_TYPE_Q4_K, 15}, [PI_QR_Q5_K_S] = {"q5_k_s", PI_TYPE_Q5_K, 16},
    [PI_QR_Q5_K_M] = {"q5_k_m", PI_TYPE_Q5_K, 17}, [PI_QR_Q6_K] = {"q6_k", PI_TYPE_Q6_K, 18},
};

int pi_quant_recipe_from_name(const char *name) {
    if (!strcasecmp(name, "q4_k")) return PI_QR_Q4_K_M;
    if (!strcasecmp(name, "q5_k")) return PI_QR_Q5_K_M;
    for (int r = 0; r < PI_QR_COUNT; r++)
        if (!strcasecmp(name, recipes[r].name)) return r;
    return -1;
}

const char *pi_quant_recipe_name(pi_quant_recipe r) { return r >= 0 && r < PI_QR_COUNT ? recipes[r].name : "?"; }

typedef struct {
    const pi_quant_params *p;
    int64_t n_layer, n_expert;
    pi_quant_report rep;
} qctx;

static bool ends_with(const char *s, const char *tail) {
    const size_t n = strlen(s), t = strlen(tail);
    return n >= t && !strcmp(s + n - t, tail);
}

static bool more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static bool is_quant(pi_type t) {
    const pi_type_info *ti = pi_type_get((uint32_t)t);
    return ti && ti->blck > 1;
}

/* The recipe's type for a tensor (-1: left as it is); *fell_back when its
   rows did not fit the type's blocks. */
static int decide(qctx *q, const char *name, pi_type type, uint32_t n_dims, const int64_t ne[4], bool *fell_back) {
    *fell_back = false;
    if (n_dims < 2 || !ends_with(name, "weight") || strstr(name, "_norm.weight") || strstr(name, "ffn_gate_inp.weight"))
        return -1;
    int layer = -1;
    sscanf(name, "blk.%d.", &layer);
    /* pinfer's predictors stay as trained */
    if (ends_with(name, ".fc1.weight") || ends_with(name, ".fc2.weight") || ends_with(name, ".fc1_exps.weight") ||
        ends_with(name, ".fc2_exps.weight"))
        return -1;
    if (type == PI_TYPE_I32 || type == PI_TYPE_I16 || type == PI_TYPE_I8) return -1;
    const pi_quant_params *p = q->p;
    const pi_quant_recipe r = p->recipe;
    pi_type t = recipes[r].base;
    const bool output = !strcmp(name, PI_TN_OUTPUT), embd = !strcmp(name, PI_TN_TOKEN_EMBD);
    if (!p->pure && is_quant(t)) {
        const bool k_m = r == PI_QR_Q4_K_M || r == PI_QR_Q5_K_M;
        if (output) { /* (a tied head is the embedding: it keeps the base type here, as llama.cpp's does) */
            if (ne[0] % pi_type_get((uint32_t)t)->blck) t = PI_TYPE_Q8_0;
            else if (t != PI_TYPE_Q8_0) t = PI_TYPE_Q6_K;
        } else if (strstr(name, "attn_v.weight")) {
            if (k_m && more_bits(layer, q->n_layer)) t = PI_TYPE_Q6_K;
            else if (r == PI_QR_Q4_K_S && layer < 4) t = PI_TYPE_Q5_K;
            if (q->n_expert == 8) t = PI_TYPE_Q8_0;
        } else if (strstr(name, "attn_k.weight")) {
            if (q->n_expert == 8) t = PI_TYPE_Q8_0;
        } else if (strstr(name, "ffn_down")) { /* ffn_down, ffn_down_exps and pinfer's ffn_down_t */
            if (k_m && more_bits(layer, q->n_layer)) t = PI_TYPE_Q6_K;
            else if (r == PI_QR_Q4_K_S && layer < q->n_layer / 8) t = PI_TYPE_Q5_K;
        }
    }
    if (output && p->output_type >= 0) t = (pi_type)p->output_type;
    if (embd && p->embd_type >= 0) t = (pi_type)p->embd_type;
    if (ne[0] % pi_type_get((uint32_t)t)->blck) {
        /* llama.cpp's fallbacks: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0 (blocks
           of 32), and F16 where the row does not fit those either (or the type
           has no fallback of its own) */
        *fell_back = true;
        t = t == PI_TYPE_Q4_K   ? PI_TYPE_Q5_0
            : t == PI_TYPE_Q5_K ? PI_TYPE_Q5_1
            : t == PI_TYPE_Q6_K ? PI_TYPE_Q8_0
                                : PI_TYPE_F16;
        if (ne[0] % pi_type_get((uint32_t)t)->blck) t = PI_TYPE_F16;
    }
    return (int)t;
}

static int type_of(void *ctx, const char *name, pi_type type, uint32_t n_dims, const int64_t ne[4]) {
    bool fb;
    return decide(ctx, name, type, n_dims, ne, &fb);
}

pi_status pi_quantize_model(const char *in_path, const char *out_path, const pi_quant_params *p,
                            pi_quant_report *report) {
    if (report) memset(report, 0, sizeof *report);
    if (!p || p->recipe < 0 || p->recipe >= PI_QR_COUNT)
        return pi_error(PI_ERR_INVALID, "unknown recipe %d", p ? (int)p->recipe : -1);
    const pi_type_info *ot = p->output_type >= 0 ? pi_type_get((uint32_t)p->output_type) : NULL,
                       *et = p->embd_type >= 0 ? pi_type_get((uint32_t)p->embd_type) : NULL;
    if ((p->output_type >= 0 && (!ot || !ot->compute)) || (p->embd_type >= 0 && (!et || !et->compute)))
        return pi_error(PI_ERR_INVALID, "the %s type has no kernels",
                        p->output_type >= 0 && (!ot || !ot->compute) ? "output" : "embedding");
    if (!pi_type_get((uint32_t)recipes[p->recipe].base)->compute)
        return pi_error(PI_ERR_UNSUPPORTED, "%s has no kernels in this build", recipes[p->recipe].name);
    pi_lm *m;
    pi_status st = pi_lm_load_ex(in_path, PI_MAP_FILE, PI_LOAD_FFN_ON_FLASH, &m);
    if (st) return st;
    qctx q = {.p = p, .n_layer = m->hp.n_layer, .n_expert = m->hp.n_expert};
    const pi_gguf *g = m->gguf;
    if (m->bundled) st = pi_error(PI_ERR_UNSUPPORTED, "%s is a bundle file: quantize the model it was made from, then "
                                  "pinfer convert --bundle", in_path);
    /* what each tensor becomes, checked before anything is written */
    for (int64_t i = 0; i < pi_gguf_n_tensors(g) && !st; i++) {
        const pi_gguf_tensor *t = pi_gguf_tensor_at(g, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.data);
        bool fb;
        int to = decide(&q, name, (pi_type)t->type, t->n_dims, t->ne, &fb);
        if (to < 0) to = (int)t->type;
        if (to != (int)t->type && is_quant((pi_type)t->type))
            st = pi_error(PI_ERR_INVALID, "%s: %s is already quantized (%s): quantize from an F32, F16 or BF16 file "
                          "(requantizing loses precision)", in_path, name, pi_type_name(t->type));
        else if (to != (int)t->type && !pi_type_get(t->type)->compute)
            st = pi_error(PI_ERR_UNSUPPORTED, "%s: %s is of type %s, which pinfer cannot read", in_path, name,
                          pi_type_name(t->type));
        if (to >= 0 && to < PI_TYPE_COUNT) q.rep.n_tensors[to]++;
        q.rep.n_fallback += fb;
    }
    pi_lm_free(m);
    if (st) return st;
    pi_rewrite_params rp = {.type_of = type_of, .type_ctx = &q, .file_type = recipes[p->recipe].file_type,
                            .n_threads = p->n_threads, .progress = p->progress, .progress_ctx = p->progress_ctx};
    st = pi_rewrite_model(in_path, &rp, out_path);
    if (!st && report) *report = q.rep;
    return st;
}
