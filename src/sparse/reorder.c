/*
 * reorder.c — the neuron permutation applied to a model file, streamed
 * tensor by tensor through the GGUF writer.
 */
#include "sparse/reorder.h"

#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { T_COPY, T_ROWS, T_COLS, T_TRANSPOSE, T_PERM } how;

typedef struct {
    const pi_gguf_tensor *src; /* NULL for new tensors (ffn_perm) */
    char name[96];
    how how;
    int layer;
    pi_type type;
    uint32_t n_dims;
    int64_t ne[4];
} plan_t;

/* Layer index and suffix of a "blk.N.<suffix>" name, or -1. */
static int layer_of(pi_gguf_str name, const char **suffix, char *buf, size_t n) {
    snprintf(buf, n, "%.*s", (int)(name.len < n - 1 ? name.len : n - 1), name.data);
    int layer, used = 0;
    if (sscanf(buf, "blk.%d.%n", &layer, &used) != 1 || used == 0) return -1;
    *suffix = buf + used;
    return layer;
}

static bool is_float_type(pi_type t) { return t == PI_TYPE_F32 || t == PI_TYPE_F16 || t == PI_TYPE_BF16; }

pi_status pi_reorder_write(const char *in_path, const pi_stats *st, const char *out_path) {
    pi_model *m = NULL;
    pi_gguf_writer *w = NULL;
    plan_t *plan = NULL;
    int32_t *perm = NULL;
    float *dense = NULL, *row = NULL;
    uint8_t *buf = NULL;
    pi_status rc = pi_model_load(in_path, PI_MAP_FILE, &m);
    if (rc) return rc;
    const pi_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, F = hp->n_ff, L = hp->n_layer;
    if (hp->n_expert) {
        rc = pi_error(PI_ERR_UNSUPPORTED, "%s: reordering mixture-of-experts models is not supported", in_path);
        goto done;
    }
    if (st->n_layer != L || st->n_ff != F) {
        rc = pi_error(PI_ERR_INVALID, "statistics are for %lld layers of %lld neurons; %s has %lld of %lld",
                      (long long)st->n_layer, (long long)st->n_ff, in_path, (long long)L, (long long)F);
        goto done;
    }
    const pi_gguf *g = m->gguf;
    const int64_t nt = pi_gguf_n_tensors(g);
    perm = malloc((size_t)(L * F) * sizeof *perm);
    plan = calloc((size_t)(nt + L), sizeof *plan);
    buf = malloc((size_t)F * 4 + (size_t)E * 4 + 64);
    if (!perm || !plan || !buf) {
        rc = pi_error(PI_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t il = 0; il < L; il++) pi_stats_order(st, il, perm + il * F);

    /* which tensors change, and how */
    int64_t np = 0;
    for (int64_t i = 0; i < nt; i++) {
        const pi_gguf_tensor *t = pi_gguf_tensor_at(g, i);
        plan_t *p = &plan[np];
        char nb[96];
        const char *suffix = NULL;
        int layer = layer_of(t->name, &suffix, nb, sizeof nb);
        p->src = t;
        p->layer = layer;
        p->type = (pi_type)t->type;
        p->n_dims = t->n_dims;
        memcpy(p->ne, t->ne, sizeof p->ne);
        snprintf(p->name, sizeof p->name, "%.*s", (int)t->name.len, t->name.data);
        p->how = T_COPY;
        if (layer >= 0 && layer < L) {
            const pi_layer *l = &m->layers[layer];
            if (!strcmp(suffix, "ffn_gate.weight") || !strcmp(suffix, "ffn_up.weight") ||
                !strcmp(suffix, "fc2.weight") || !strcmp(suffix, "ffn_down_t.weight")) {
                p->how = T_ROWS;
            } else if (!strcmp(suffix, "ffn_perm.weight")) {
                continue; /* replaced by the composed permutation */
            } else if (!strcmp(suffix, "ffn_down.weight")) {
                if (is_float_type(p->type)) {
                    p->how = T_COLS;
                } else if (l->ffn_down_t.data) {
                    continue; /* the permuted ffn_down_t serves both paths */
                } else {
                    p->how = T_TRANSPOSE;
                    snprintf(p->name, sizeof p->name, "blk.%d.ffn_down_t.weight", layer);
                    p->ne[0] = E;
                    p->ne[1] = F;
                    if (!pi_row_size(p->type, E)) p->type = PI_TYPE_F32;
                }
            }
        }
        np++;
    }
    for (int64_t il = 0; il < L; il++) {
        plan_t *p = &plan[np++];
        p->how = T_PERM;
        p->layer = (int)il;
        p->type = PI_TYPE_I32;
        p->n_dims = 1;
        p->ne[0] = F;
        p->ne[1] = p->ne[2] = p->ne[3] = 1;
        snprintf(p->name, sizeof p->name, "blk.%lld.ffn_perm.weight", (long long)il);
    }

    if ((rc = pi_gguf_writer_create(out_path, pi_gguf_is_pwri(g), &w))) goto done;
    for (int64_t i = 0; i < pi_gguf_n_kv(g) && !rc; i++) {
        const pi_gguf_kv *kv = pi_gguf_kv_at(g, i);
        if (!pi_gguf_str_eq(kv->key, "pinfer.reordered")) rc = pi_gguf_set_kv(w, kv);
    }
    if (!rc) rc = pi_gguf_set_bool(w, "pinfer.reordered", true);
    for (int64_t i = 0; i < np && !rc; i++) rc = pi_gguf_add_tensor(w, plan[i].name, plan[i].type, plan[i].n_dims, plan[i].ne);
    if (!rc) rc = pi_gguf_writer_begin_data(w);

    for (int64_t i = 0; i < np && !rc; i++) {
        const plan_t *p = &plan[i];
        const int32_t *pp = p->layer >= 0 && p->layer < L ? perm + (int64_t)p->layer * F : NULL;
        const uint8_t *data = p->src ? p->src->data : NULL;
        switch (p->how) {
        case T_COPY:
            rc = pi_gguf_write_data(w, data, p->src->nbytes);
            break;
        case T_ROWS: { /* n_ff rows: new row k is old row perm[k] */
            size_t rb = pi_row_size(p->type, p->ne[0]);
            for (int64_t k = 0; k < F && !rc; k++) rc = pi_gguf_write_data(w, data + (size_t)pp[k] * rb, rb);
            break;
        }
        case T_COLS: { /* float ffn_down: E rows of F elements, columns permuted */
            size_t es = pi_type_get(p->type)->size, rb = es * (size_t)F;
            for (int64_t j = 0; j < E && !rc; j++) {
                const uint8_t *src = data + (size_t)j * rb;
                for (int64_t k = 0; k < F; k++) memcpy(buf + (size_t)k * es, src + (size_t)pp[k] * es, es);
                rc = pi_gguf_write_data(w, buf, rb);
            }
            break;
        }
        case T_TRANSPOSE: { /* quantized ffn_down -> permuted ffn_down_t, requantized */
            const pi_weight *d = &m->layers[p->layer].ffn_down;
            if (!dense && (!(dense = malloc((size_t)(E * F) * sizeof *dense)) || !(row = malloc((size_t)E * sizeof *row)))) {
                rc = pi_error(PI_ERR_NOMEM, "cannot allocate %.0f MiB to transpose ffn_down", (double)(E * F) * 4 / (1 << 20));
                break;
            }
            for (int64_t j = 0; j < E; j++) pi_weight_row_f32(d, j, dense + j * F);
            size_t rb = pi_row_size(p->type, E);
            for (int64_t k = 0; k < F && !rc; k++) {
                for (int64_t j = 0; j < E; j++) row[j] = dense[j * F + pp[k]];
                pi_quantize_row(p->type, row, buf, E);
                rc = pi_gguf_write_data(w, buf, rb);
            }
            break;
        }
        case T_PERM: { /* compose with a permutation the input already had */
            char nm[64];
            snprintf(nm, sizeof nm, "blk.%d.ffn_perm.weight", p->layer);
            const pi_gguf_tensor *old = pi_gguf_find_tensor(g, nm);
            int32_t *out = (int32_t *)buf;
            for (int64_t k = 0; k < F; k++) {
                int32_t v = pp[k];
                if (old && old->type == PI_TYPE_I32 && old->ne[0] == F) memcpy(&v, (const uint8_t *)old->data + 4 * (size_t)pp[k], 4);
                out[k] = v;
            }
            rc = pi_gguf_write_data(w, out, (size_t)F * 4);
            break;
        }
        }
    }
done:
    if (w) {
        pi_error_saved saved;
        pi_error_save(&saved);
        pi_status cst = pi_gguf_writer_close(w);
        if (!rc) rc = cst;
        else pi_error_restore(&saved);
    }
    free(dense);
    free(row);
    free(buf);
    free(plan);
    free(perm);
    pi_model_free(m);
    return rc;
}
