/*
 * bundle.c — the bundle layout: computing it for convert, recording it as
 * keys, and reading it back with every field checked before a loader trusts
 * an offset (format in bundle.h).
 */
#include "gguf/bundle.h"

#include <stdio.h>
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

pi_status pi_bundle_layout_make(pi_type gate, pi_type up, pi_type down, int64_t n_embd, int64_t n_ff,
                                uint32_t align, pi_bundle_layout *out) {
    memset(out, 0, sizeof *out);
    if (align && (!is_pow2(align) || align < PI_BUNDLE_MIN_ALIGN || align > PI_BUNDLE_MAX_ALIGN))
        return pi_error(PI_ERR_INVALID, "bundle alignment %u is not 0 (packed) or a power of two in [%d, %d]", align,
                        PI_BUNDLE_MIN_ALIGN, PI_BUNDLE_MAX_ALIGN);
    if (n_ff < 1 || n_ff > INT32_MAX)
        return pi_error(PI_ERR_INVALID, "bundles: n_ff %lld is out of range", (long long)n_ff);
    const pi_type ts[3] = {gate, up, down};
    size_t rb[3];
    static const char *const part[3] = {"gate", "up", "down"};
    for (int i = 0; i < 3; i++)
        if (!(rb[i] = part_bytes(ts[i], n_embd)))
            return pi_error(PI_ERR_INVALID, "bundles: the %s part's type %s cannot hold rows of %lld elements", part[i],
                            pi_type_name(ts[i]), (long long)n_embd);
    out->align = align;
    out->n_embd = n_embd;
    out->n_ff = n_ff;
    out->gate_type = gate, out->up_type = up, out->down_type = down;
    out->gate_bytes = rb[0], out->up_bytes = rb[1], out->down_bytes = rb[2];
    out->gate_off = 0;
    out->up_off = rb[0];
    out->down_off = rb[0] + rb[1];
    size_t total = rb[0] + rb[1] + rb[2];
    out->stride = align ? (total + align - 1) / align * align : total;
    if (out->stride > MAX_STRIDE) return pi_error(PI_ERR_INVALID, "bundles of %zu bytes are too large", out->stride);
    return PI_OK;
}

pi_status pi_bundle_layout_set(pi_gguf_writer *w, const pi_bundle_layout *b) {
    pi_status st;
    if ((st = pi_gguf_set_u32(w, PI_KEY_BUNDLE_VERSION, PI_BUNDLE_VERSION)) ||
        (st = pi_gguf_set_u32(w, PI_KEY_BUNDLE_ALIGN, b->align)) ||
        (st = pi_gguf_set_u64(w, PI_KEY_BUNDLE_STRIDE, b->stride)) ||
        (st = pi_gguf_set_u32(w, PI_KEY_BUNDLE_GATE_TYPE, (uint32_t)b->gate_type)) ||
        (st = pi_gguf_set_u32(w, PI_KEY_BUNDLE_UP_TYPE, (uint32_t)b->up_type)) ||
        (st = pi_gguf_set_u32(w, PI_KEY_BUNDLE_DOWN_TYPE, (uint32_t)b->down_type)) ||
        (st = pi_gguf_set_u64(w, PI_KEY_BUNDLE_GATE_OFFSET, b->gate_off)) ||
        (st = pi_gguf_set_u64(w, PI_KEY_BUNDLE_UP_OFFSET, b->up_off)) ||
        (st = pi_gguf_set_u64(w, PI_KEY_BUNDLE_DOWN_OFFSET, b->down_off)) ||
        (st = pi_gguf_set_u64(w, PI_KEY_BUNDLE_N_FF, (uint64_t)b->n_ff)) ||
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

pi_status pi_bundle_layout_read(const pi_gguf *g, const char *path, pi_bundle_layout *out) {
    memset(out, 0, sizeof *out);
    pi_status st;
    int64_t version, align, stride, n_ff, n_embd, type[3], off[3];
    if ((st = get_key(g, path, PI_KEY_BUNDLE_VERSION, 0, UINT32_MAX, &version))) return st;
    if (version != PI_BUNDLE_VERSION)
        return pi_error(PI_ERR_UNSUPPORTED, "%s: %s = %lld is not supported (this build reads %d)", path,
                        PI_KEY_BUNDLE_VERSION, (long long)version, PI_BUNDLE_VERSION);
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
    static const char *const tkey[3] = {PI_KEY_BUNDLE_GATE_TYPE, PI_KEY_BUNDLE_UP_TYPE, PI_KEY_BUNDLE_DOWN_TYPE};
    static const char *const okey[3] = {PI_KEY_BUNDLE_GATE_OFFSET, PI_KEY_BUNDLE_UP_OFFSET, PI_KEY_BUNDLE_DOWN_OFFSET};
    size_t rb[3], total = 0;
    for (int i = 0; i < 3; i++) {
        if ((st = get_key(g, path, tkey[i], 0, PI_TYPE_COUNT - 1, &type[i])) ||
            (st = get_key(g, path, okey[i], 0, (int64_t)MAX_STRIDE, &off[i])))
            return st;
        if (!(rb[i] = part_bytes((uint32_t)type[i], n_embd)))
            return pi_error(PI_ERR_FORMAT, "%s: %s = %s: not a type with kernels whose rows of %s = %lld elements have a size",
                            path, tkey[i], pi_type_name((pi_type)type[i]), PI_KEY_BUNDLE_N_EMBD, (long long)n_embd);
        total += rb[i];
        /* both operands are below 2^32: no overflow */
        if ((uint64_t)off[i] + rb[i] > (uint64_t)stride)
            return pi_error(PI_ERR_FORMAT, "%s: %s = %lld plus the part's %zu bytes exceeds %s = %lld", path, okey[i],
                            (long long)off[i], rb[i], PI_KEY_BUNDLE_STRIDE, (long long)stride);
    }
    if (total > (uint64_t)stride)
        return pi_error(PI_ERR_FORMAT, "%s: %s = %lld is smaller than a bundle's parts (%zu bytes)", path,
                        PI_KEY_BUNDLE_STRIDE, (long long)stride, total);
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if ((uint64_t)off[i] < (uint64_t)off[j] + rb[j] && (uint64_t)off[j] < (uint64_t)off[i] + rb[i])
                return pi_error(PI_ERR_FORMAT, "%s: %s = %lld and %s = %lld make the parts overlap", path, okey[i],
                                (long long)off[i], okey[j], (long long)off[j]);
    out->align = (uint32_t)align;
    out->n_embd = n_embd;
    out->n_ff = n_ff;
    out->gate_type = (pi_type)type[0], out->up_type = (pi_type)type[1], out->down_type = (pi_type)type[2];
    out->gate_bytes = rb[0], out->up_bytes = rb[1], out->down_bytes = rb[2];
    out->gate_off = (size_t)off[0], out->up_off = (size_t)off[1], out->down_off = (size_t)off[2];
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
