/*
 * bundle.c — the bundle layout: computing it for convert, recording it as
 * keys, and reading it back with every field checked before a loader trusts
 * an offset (format in bundle.h).
 */
#include "gguf/bundle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STRIDE ((uint64_t)1 << 32) /* far above any bundle; keeps stride * n_ff in range */

static bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

/* Row size of n elements of type t, or 0 when t has no kernels or n is not a
   whole number of its blocks. */
static size_t part_bytes(uint32_t t, int64_t n) {
    const pi_type_info *ti = pi_type_get(t);
    if (!ti || !ti->compute || n <= 0 || n % ti->blck) return 0;
    return pi_row_size((pi_type)t, n);
}

static const char *const part_name[3] = {"gate", "up", "down"};
static const char *const type_key[3] = {PI_KEY_BUNDLE_GATE_TYPE, PI_KEY_BUNDLE_UP_TYPE, PI_KEY_BUNDLE_DOWN_TYPE};
static const char *const off_key[3] = {PI_KEY_BUNDLE_GATE_OFFSET, PI_KEY_BUNDLE_UP_OFFSET, PI_KEY_BUNDLE_DOWN_OFFSET};

void pi_bundle_layout_free(pi_bundle_layout *b) {
    if (!b) return;
    free(b->layer);
    b->layer = NULL;
}

static bool same_parts(const pi_bundle_parts *a, const pi_bundle_parts *b) {
    for (int k = 0; k < 3; k++)
        if (a->type[k] != b->type[k] || a->off[k] != b->off[k]) return false;
    return true;
}

bool pi_bundle_layout_uniform(const pi_bundle_layout *b) {
    for (int64_t il = 1; il < b->n_layer; il++)
        if (!same_parts(&b->layer[il], &b->layer[0])) return false;
    return true;
}

pi_status pi_bundle_layout_make(const pi_type (*types)[3], int64_t n_layer, int64_t n_embd, int64_t n_ff,
                                uint32_t align, pi_bundle_layout *out) {
    memset(out, 0, sizeof *out);
    if (align && (!is_pow2(align) || align < PI_BUNDLE_MIN_ALIGN || align > PI_BUNDLE_MAX_ALIGN))
        return pi_error(PI_ERR_INVALID, "bundle alignment %u is not 0 (packed) or a power of two in [%d, %d]", align,
                        PI_BUNDLE_MIN_ALIGN, PI_BUNDLE_MAX_ALIGN);
    if (n_ff < 1 || n_ff > INT32_MAX)
        return pi_error(PI_ERR_INVALID, "bundles: n_ff %lld is out of range", (long long)n_ff);
    if (n_layer < 1 || n_layer > PI_BUNDLE_MAX_LAYERS)
        return pi_error(PI_ERR_INVALID, "bundles: %lld layers is out of range", (long long)n_layer);
    pi_bundle_parts *parts = calloc((size_t)n_layer, sizeof *parts);
    if (!parts) return pi_error(PI_ERR_NOMEM, "out of memory");
    size_t largest = 0;
    for (int64_t il = 0; il < n_layer; il++) {
        pi_bundle_parts *p = &parts[il];
        size_t total = 0;
        for (int k = 0; k < 3; k++) {
            p->type[k] = types[il][k];
            if (!(p->bytes[k] = part_bytes(p->type[k], n_embd))) {
                free(parts);
                return pi_error(PI_ERR_INVALID, "bundles: layer %lld's %s part type %s cannot hold rows of %lld elements",
                                (long long)il, part_name[k], pi_type_name(types[il][k]), (long long)n_embd);
            }
            p->off[k] = total;
            total += p->bytes[k];
        }
        if (total > largest) largest = total;
    }
    out->align = align;
    out->n_embd = n_embd;
    out->n_ff = n_ff;
    out->n_layer = n_layer;
    out->layer = parts;
    out->stride = align ? (largest + align - 1) / align * align : largest;
    if (out->stride > MAX_STRIDE) {
        pi_bundle_layout_free(out);
        return pi_error(PI_ERR_INVALID, "bundles of %zu bytes are too large", largest);
    }
    return PI_OK;
}

pi_status pi_bundle_layout_set(pi_gguf_writer *w, const pi_bundle_layout *b) {
    const bool uniform = pi_bundle_layout_uniform(b);
    pi_status st;
    if ((st = pi_gguf_set_u32(w, PI_KEY_BUNDLE_VERSION, uniform ? PI_BUNDLE_VERSION : PI_BUNDLE_VERSION_MIXED)) ||
        (st = pi_gguf_set_u32(w, PI_KEY_BUNDLE_ALIGN, b->align)) ||
        (st = pi_gguf_set_u64(w, PI_KEY_BUNDLE_STRIDE, b->stride)))
        return st;
    for (int k = 0; k < 3 && uniform; k++)
        if ((st = pi_gguf_set_u32(w, type_key[k], (uint32_t)b->layer[0].type[k])) ||
            (st = pi_gguf_set_u64(w, off_key[k], b->layer[0].off[k])))
            return st;
    if (!uniform) {
        uint32_t *t = malloc((size_t)b->n_layer * sizeof *t);
        uint64_t *o = malloc((size_t)b->n_layer * sizeof *o);
        for (int k = 0; k < 3 && t && o && !st; k++) {
            for (int64_t il = 0; il < b->n_layer; il++) t[il] = (uint32_t)b->layer[il].type[k], o[il] = b->layer[il].off[k];
            if (!(st = pi_gguf_set_arr(w, type_key[k], PI_GGUF_UINT32, t, (uint64_t)b->n_layer)))
                st = pi_gguf_set_arr(w, off_key[k], PI_GGUF_UINT64, o, (uint64_t)b->n_layer);
        }
        if (!t || !o) st = pi_error(PI_ERR_NOMEM, "out of memory");
        free(t);
        free(o);
        if (st) return st;
    }
    if ((st = pi_gguf_set_u64(w, PI_KEY_BUNDLE_N_FF, (uint64_t)b->n_ff)) ||
        (st = pi_gguf_set_u64(w, PI_KEY_BUNDLE_N_EMBD, (uint64_t)b->n_embd)))
        return st;
    return PI_OK;
}

bool pi_bundle_present(const pi_gguf *g) { return pi_gguf_find_kv(g, PI_KEY_BUNDLE_VERSION) != NULL; }

/* An integer key in [lo, hi]; a missing one says what the file lacks. */
static pi_status get_key(const pi_gguf *g, const char *path, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    pi_status st = pi_gguf_get_i64_range(g, key, lo, hi, out);
    if (st == PI_ERR_NOT_FOUND) return pi_error(st, "%s: bundle file without the key '%s'", path, key);
    return st;
}

/* A per-layer key: one integer for every layer, or (mixed files) an array of
   n_layer u32/u64, each in [lo, hi], into v[0..n_layer). */
static pi_status layer_key(const pi_gguf *g, const char *path, const char *key, int64_t n_layer, int64_t lo, int64_t hi,
                           int64_t *v) {
    const pi_gguf_kv *kv = pi_gguf_find_kv(g, key);
    if (kv && kv->type == PI_GGUF_ARRAY) {
        const size_t es = kv->arr_type == PI_GGUF_UINT32 ? 4 : kv->arr_type == PI_GGUF_UINT64 ? 8 : 0;
        if (!es || kv->arr_n != (uint64_t)n_layer)
            return pi_error(PI_ERR_FORMAT, "%s: %s is an array of %llu %s; per-layer values are %lld u32 or u64", path,
                            key, (unsigned long long)kv->arr_n, pi_gguf_vtype_name(kv->arr_type), (long long)n_layer);
        for (int64_t il = 0; il < n_layer; il++) {
            uint64_t x = 0;
            memcpy(&x, (const uint8_t *)kv->arr_data + (size_t)il * es, es); /* little-endian */
            if (x < (uint64_t)lo || x > (uint64_t)hi)
                return pi_error(PI_ERR_FORMAT, "%s: %s[%lld] = %llu is out of range [%lld, %lld]", path, key,
                                (long long)il, (unsigned long long)x, (long long)lo, (long long)hi);
            v[il] = (int64_t)x;
        }
        return PI_OK;
    }
    pi_status st = get_key(g, path, key, lo, hi, &v[0]);
    for (int64_t il = 1; il < n_layer && !st; il++) v[il] = v[0];
    return st;
}

pi_status pi_bundle_layout_read(const pi_gguf *g, const char *path, int64_t n_layer, pi_bundle_layout *out) {
    memset(out, 0, sizeof *out);
    pi_status st;
    int64_t version, align, stride, n_ff, n_embd;
    if ((st = get_key(g, path, PI_KEY_BUNDLE_VERSION, 0, UINT32_MAX, &version))) return st;
    if (version != PI_BUNDLE_VERSION && version != PI_BUNDLE_VERSION_MIXED)
        return pi_error(PI_ERR_UNSUPPORTED, "%s: %s = %lld is not supported (this build reads %d and %d)", path,
                        PI_KEY_BUNDLE_VERSION, (long long)version, PI_BUNDLE_VERSION, PI_BUNDLE_VERSION_MIXED);
    if (n_layer < 1 || n_layer > PI_BUNDLE_MAX_LAYERS)
        return pi_error(PI_ERR_FORMAT, "%s: bundles for %lld layers", path, (long long)n_layer);
    if ((st = get_key(g, path, PI_KEY_BUNDLE_ALIGN, 0, (int64_t)1 << 30, &align)) ||
        (st = get_key(g, path, PI_KEY_BUNDLE_STRIDE, 1, (int64_t)MAX_STRIDE, &stride)) ||
        (st = get_key(g, path, PI_KEY_BUNDLE_N_FF, 1, INT32_MAX, &n_ff)) ||
        (st = get_key(g, path, PI_KEY_BUNDLE_N_EMBD, 1, (int64_t)1 << 24, &n_embd)))
        return st;
    if (align && !is_pow2((uint64_t)align))
        return pi_error(PI_ERR_FORMAT, "%s: %s = %lld is not 0 (packed) or a power of two", path, PI_KEY_BUNDLE_ALIGN,
                        (long long)align);
    if (align && stride % align)
        return pi_error(PI_ERR_FORMAT, "%s: %s = %lld is not a multiple of %s = %lld", path, PI_KEY_BUNDLE_STRIDE,
                        (long long)stride, PI_KEY_BUNDLE_ALIGN, (long long)align);
    pi_bundle_parts *parts = calloc((size_t)n_layer, sizeof *parts);
    int64_t *v = malloc((size_t)n_layer * 6 * sizeof *v);
    if (!parts || !v) {
        free(parts);
        free(v);
        return pi_error(PI_ERR_NOMEM, "out of memory");
    }
    int64_t *type = v, *off = v + 3 * n_layer; /* [k * n_layer + il] */
    for (int k = 0; k < 3 && !st; k++)
        if (!(st = layer_key(g, path, type_key[k], n_layer, 0, PI_TYPE_COUNT - 1, type + k * n_layer)))
            st = layer_key(g, path, off_key[k], n_layer, 0, (int64_t)MAX_STRIDE, off + k * n_layer);
    for (int64_t il = 0; il < n_layer && !st; il++) {
        pi_bundle_parts *p = &parts[il];
        size_t total = 0;
        char at[40];
        snprintf(at, sizeof at, " (layer %lld)", (long long)il);
        for (int k = 0; k < 3 && !st; k++) {
            p->type[k] = (pi_type)type[k * n_layer + il];
            p->off[k] = (size_t)off[k * n_layer + il];
            if (!(p->bytes[k] = part_bytes((uint32_t)p->type[k], n_embd)))
                st = pi_error(PI_ERR_FORMAT, "%s: %s = %s%s: not a type with kernels whose rows of %s = %lld elements "
                              "have a size", path, type_key[k], pi_type_name(p->type[k]), at,
                              PI_KEY_BUNDLE_N_EMBD, (long long)n_embd);
            /* both operands are below 2^32: no overflow */
            else if ((uint64_t)p->off[k] + p->bytes[k] > (uint64_t)stride)
                st = pi_error(PI_ERR_FORMAT, "%s: %s = %zu%s plus the part's %zu bytes exceeds %s = %lld", path,
                              off_key[k], p->off[k], at, p->bytes[k], PI_KEY_BUNDLE_STRIDE, (long long)stride);
            total += p->bytes[k];
        }
        if (!st && total > (uint64_t)stride)
            st = pi_error(PI_ERR_FORMAT, "%s: %s = %lld is smaller than a bundle's parts (%zu bytes%s)", path,
                          PI_KEY_BUNDLE_STRIDE, (long long)stride, total, at);
        for (int i = 0; i < 3 && !st; i++)
            for (int j = i + 1; j < 3 && !st; j++)
                if (p->off[i] < p->off[j] + p->bytes[j] && p->off[j] < p->off[i] + p->bytes[i])
                    st = pi_error(PI_ERR_FORMAT, "%s: %s = %zu and %s = %zu make the parts overlap%s", path,
                                  off_key[i], p->off[i], off_key[j], p->off[j], at);
    }
    free(v);
    if (st) {
        free(parts);
        return st;
    }
    out->align = (uint32_t)align;
    out->n_embd = n_embd;
    out->n_ff = n_ff;
    out->n_layer = n_layer;
    out->layer = parts;
    out->stride = (size_t)stride;
    return PI_OK;
}

pi_status pi_bundle_tensor(const pi_gguf *g, const char *path, const pi_bundle_layout *b, int layer, int64_t n_expert,
                           const pi_gguf_tensor **out) {
    *out = NULL;
    char name[PI_NAME_MAX];
    snprintf(name, sizeof name, PI_TN_FFN_BUNDLE, layer);
    const pi_gguf_tensor *t = pi_gguf_find_tensor(g, name);
    if (!t) return pi_error(PI_ERR_NOT_FOUND, "%s: bundle file without the tensor '%s'", path, name);
    if (t->type != PI_TYPE_I8)
        return pi_error(PI_ERR_FORMAT, "%s: tensor '%s' has type %s; bundles are i8", path, name,
                        pi_type_name((pi_type)t->type));
    int64_t ne[4] = {1, 1, 1, 1};
    for (uint32_t d = 0; d < t->n_dims && d < 4; d++) ne[d] = t->ne[d];
    if (n_expert > 0 && (ne[0] != (int64_t)b->stride || ne[1] != b->n_ff || ne[2] != n_expert || ne[3] != 1))
        return pi_error(PI_ERR_FORMAT, "%s: tensor '%s' has shape [%lld x %lld x %lld x %lld]; a mixture of %lld experts "
                        "needs one block of bundles per expert: [%s x %s x experts] = [%zu x %lld x %lld]",
                        path, name, (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3],
                        (long long)n_expert, PI_KEY_BUNDLE_STRIDE, PI_KEY_BUNDLE_N_FF, b->stride, (long long)b->n_ff,
                        (long long)n_expert);
    if (n_expert <= 0 && (ne[0] != (int64_t)b->stride || ne[1] != b->n_ff || ne[2] != 1 || ne[3] != 1))
        return pi_error(PI_ERR_FORMAT, "%s: tensor '%s' has shape [%lld x %lld x %lld x %lld]; it should be [%s x %s] = [%zu x %lld]",
                        path, name, (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3],
                        PI_KEY_BUNDLE_STRIDE, PI_KEY_BUNDLE_N_FF, b->stride, (long long)b->n_ff);
    *out = t;
    return PI_OK;
}
