/*
 * gguf_read.c — GGUF v2/v3 (and PowerInfer "PWRI") parser over a read-only
 * mapping or a caller buffer.
 *
 * Invariants established by a successful open (and relied on by every user):
 *   - every pi_gguf_str, arr_data and tensor data pointer lies inside
 *     [base, base + size), lengths included;
 *   - keys and tensor names are unique (byte-wise); BOOL values are 0 or 1;
 *   - alignment is a non-zero power of two, data_offset is a multiple of it
 *     and data_offset <= size (a tensor-less file may end before its padding;
 *     data_offset is then clamped to the file size);
 *   - each tensor has 1..4 dims, ne[i] >= 0, ne[0] a multiple of the type's
 *     block size, a known type, an aligned offset, and nelements / nbytes
 *     computed without overflow; its bytes lie inside the file.
 *
 * Hostile input: the file is never trusted. Every read goes through a cursor
 * that checks the remaining length first; a count read from the file is first
 * bounded by the smallest number of bytes one element could occupy, and arrays
 * sized by such counts grow as elements are actually parsed (or are allocated
 * after a validating pass), so memory stays proportional to the bytes really
 * present. Errors are PI_ERR_FORMAT with "path: byte N: field: problem".
 *
 * All multi-byte fields are little-endian and decoded byte by byte, so the
 * reader does not depend on the host's byte order or on alignment.
 */
#include "gguf.h"
#include "names.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct pi_gguf {
    const uint8_t *base; /* mapping or caller buffer */
    uint64_t size;
    pi_mapping map; /* what pi_gguf_open mapped or loaded; zeroed for open_mem */
    char *path;  /* for messages of the getters; NULL for memory */
    uint32_t version;
    bool pwri;
    uint64_t alignment;
    uint64_t data_offset;
    int64_t n_kv;
    pi_gguf_kv *kv; /* (n_kv) */
    int64_t n_tensors;
    pi_gguf_tensor *tensors; /* (n_tensors) */
    /* Open-addressing hash tables of indices (-1 = empty), sized to a power
       of two at least twice the count: duplicate detection in O(n) on files
       with many entries, and O(1) lookups for loaders. */
    int64_t *kv_hash;
    uint64_t kv_mask;
    int64_t *t_hash;
    uint64_t t_mask;
};

/* ---- little-endian decoding ---- */

static uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | (unsigned)p[1] << 8); }
static uint32_t ld32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t ld64(const uint8_t *p) { return (uint64_t)ld32(p) | (uint64_t)ld32(p + 4) << 32; }

/* ---- value types ---- */

static const char *const k_vtype_names[PI_GGUF_VTYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64",
};
static const uint8_t k_vtype_sizes[PI_GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *pi_gguf_vtype_name(uint32_t t) { return t < PI_GGUF_VTYPE_COUNT ? k_vtype_names[t] : "?"; }

size_t pi_gguf_vtype_size(uint32_t t) { return t < PI_GGUF_VTYPE_COUNT ? k_vtype_sizes[t] : 0; }

bool pi_gguf_str_eq(pi_gguf_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && (n == 0 || memcmp(s.data, c, n) == 0);
}

bool pi_gguf_str_has_prefix(pi_gguf_str s, const char *prefix) {
    size_t n = strlen(prefix);
    return s.len >= n && (n == 0 || memcmp(s.data, prefix, n) == 0);
}

static bool vtype_is_int(uint32_t t) {
    return t == PI_GGUF_UINT8 || t == PI_GGUF_INT8 || t == PI_GGUF_UINT16 || t == PI_GGUF_INT16 ||
           t == PI_GGUF_UINT32 || t == PI_GGUF_INT32 || t == PI_GGUF_UINT64 || t == PI_GGUF_INT64;
}
static bool vtype_is_signed(uint32_t t) {
    return t == PI_GGUF_INT8 || t == PI_GGUF_INT16 || t == PI_GGUF_INT32 || t == PI_GGUF_INT64;
}

/* ---- messages ---- */

/* Quote a view for a message: printable ASCII as is, the rest as \xNN, cut at
   40 bytes (so a quoted name fits QBUF). Names come from the file and may hold anything. */
static const char *quote(char *buf, size_t n, const char *s, uint64_t len) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    uint64_t i = 0;
    for (; i < len && o + 8 < n && i < 40; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\' && ch != '\'') {
            buf[o++] = (char)ch;
        } else {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[ch >> 4];
            buf[o++] = hex[ch & 15];
        }
    }
    if (i < len && o + 4 < n) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

/* Buffer sizes for quoted names and field descriptions: a quoted name is at
   most 40 * 4 + 3 bytes; a field description adds a short prefix and suffix. */
#define QBUF 176
#define WBUF 256

/* ---- parse cursor ---- */

typedef struct {
    const uint8_t *base;
    uint64_t size;
    uint64_t pos;
    const char *path; /* NULL for memory buffers */
} cursor;

static uint64_t left(const cursor *c) { return c->size - c->pos; }

/* "path: byte at: <message>" as PI_ERR_FORMAT (or st). */
static pi_status perr_st(const cursor *c, pi_status st, uint64_t at, const char *fmt, ...) PI_PRINTF(4, 5);
static pi_status perr_st(const cursor *c, pi_status st, uint64_t at, const char *fmt, ...) {
    char msg[PI_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->path) return pi_error(st, "%s: byte %llu: %s", c->path, (unsigned long long)at, msg);
    return pi_error(st, "byte %llu: %s", (unsigned long long)at, msg);
}
#define perr(c, at, ...) perr_st((c), PI_ERR_FORMAT, (at), __VA_ARGS__)

/* The truncation message: the field needs n bytes and fewer are left. */
static pi_status trunc_err(const cursor *c, uint64_t n, const char *what) {
    return perr(c, c->pos, "%s: needs %llu bytes, only %llu left (file size %llu)", what, (unsigned long long)n,
                (unsigned long long)left(c), (unsigned long long)c->size);
}

/* Take n bytes or fail with a truncation message naming `what`. */
static pi_status take(cursor *c, uint64_t n, const uint8_t **p, const char *what) {
    if (n > left(c)) return trunc_err(c, n, what);
    *p = c->base + c->pos;
    c->pos += n;
    return PI_OK;
}

static pi_status take_u32(cursor *c, uint32_t *v, const char *what) {
    const uint8_t *p = NULL;
    pi_status st = take(c, 4, &p, what);
    if (st == PI_OK) *v = ld32(p);
    return st;
}

static pi_status take_u64(cursor *c, uint64_t *v, const char *what) {
    const uint8_t *p = NULL;
    pi_status st = take(c, 8, &p, what);
    if (st == PI_OK) *v = ld64(p);
    return st;
}

/* A string: u64 length then bytes; the length is checked against what is
   left before anything else. */
static pi_status take_str(cursor *c, pi_gguf_str *s, const char *what) {
    char w[WBUF + 128];
    uint64_t at = c->pos, len;
    snprintf(w, sizeof w, "%s length", what);
    pi_status st = take_u64(c, &len, w);
    if (st) return st;
    if (len > left(c))
        return perr(c, at, "%s: length %llu exceeds the %llu bytes left (file size %llu)", what,
                    (unsigned long long)len, (unsigned long long)left(c), (unsigned long long)c->size);
    s->len = len;
    s->data = (const char *)(c->base + c->pos);
    c->pos += len;
    return PI_OK;
}

/* Grow a vector of `elem`-sized items to hold at least need items. Capacity
   only ever follows what has been parsed, so a lying count cannot make us
   allocate more than twice what the file really contains. */
static pi_status grow(void **v, uint64_t *cap, uint64_t need, size_t elem) {
    if (need <= *cap) return PI_OK;
    uint64_t nc = *cap ? *cap * 2 : 16;
    if (nc < need) nc = need;
    if (nc > SIZE_MAX / elem)
        return pi_error(PI_ERR_NOMEM, "gguf: table of %llu entries too large", (unsigned long long)nc);
    void *p = realloc(*v, (size_t)(nc * elem));
    if (!p) return pi_error(PI_ERR_NOMEM, "gguf: out of memory for %llu entries", (unsigned long long)nc);
    *v = p;
    *cap = nc;
    return PI_OK;
}

/* ---- hash tables of names ---- */

static uint64_t hash_bytes(const char *s, uint64_t n) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (uint64_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static bool str_same(pi_gguf_str a, pi_gguf_str b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.data, b.data, (size_t)a.len) == 0);
}

/* Build a table over n names given by name_at(i); on a duplicate, *dup_i and
   *dup_first name the pair and PI_ERR_FORMAT is returned (no message: the
   caller knows what the names are). */
static pi_status build_hash(int64_t n, const void *items, size_t stride, size_t name_off, int64_t **table,
                            uint64_t *mask, int64_t *dup_i, int64_t *dup_first) {
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2) cap *= 2;
    if (cap > SIZE_MAX / sizeof(int64_t)) return pi_error(PI_ERR_NOMEM, "gguf: name table too large");
    int64_t *t = malloc((size_t)cap * sizeof *t);
    if (!t)
        return pi_error(PI_ERR_NOMEM, "gguf: out of memory for a name table of %llu slots", (unsigned long long)cap);
    for (uint64_t i = 0; i < cap; i++) t[i] = -1;
    for (int64_t i = 0; i < n; i++) {
        pi_gguf_str s;
        memcpy(&s, (const char *)items + (size_t)i * stride + name_off, sizeof s);
        uint64_t h = hash_bytes(s.data, s.len) & (cap - 1);
        while (t[h] >= 0) {
            pi_gguf_str o;
            memcpy(&o, (const char *)items + (size_t)t[h] * stride + name_off, sizeof o);
            if (str_same(s, o)) {
                *dup_i = i;
                *dup_first = t[h];
                free(t);
                return PI_ERR_FORMAT;
            }
            h = (h + 1) & (cap - 1);
        }
        t[h] = i;
    }
    *table = t;
    *mask = cap - 1;
    return PI_OK;
}

static int64_t hash_find(const int64_t *t, uint64_t mask, const void *items, size_t stride, size_t name_off,
                         const char *name) {
    if (!t || !name) return -1;
    size_t n = strlen(name);
    uint64_t h = hash_bytes(name, n) & mask;
    while (t[h] >= 0) {
        pi_gguf_str o;
        memcpy(&o, (const char *)items + (size_t)t[h] * stride + name_off, sizeof o);
        if (o.len == n && (n == 0 || memcmp(o.data, name, n) == 0)) return t[h];
        h = (h + 1) & mask;
    }
    return -1;
}

/* ---- key-values ---- */

/* Parse one scalar of type t at the cursor into kv->val. */
static pi_status parse_scalar(cursor *c, uint32_t t, pi_gguf_kv *kv, const char *what) {
    const uint8_t *p = NULL;
    uint64_t at = c->pos;
    pi_status st = take(c, k_vtype_sizes[t], &p, what);
    if (st) return st;
    switch (t) {
    case PI_GGUF_UINT8: kv->val.u64 = p[0]; break;
    case PI_GGUF_INT8: kv->val.i64 = (int8_t)p[0]; break;
    case PI_GGUF_UINT16: kv->val.u64 = ld16(p); break;
    case PI_GGUF_INT16: kv->val.i64 = (int16_t)ld16(p); break;
    case PI_GGUF_UINT32: kv->val.u64 = ld32(p); break;
    case PI_GGUF_INT32: kv->val.i64 = (int32_t)ld32(p); break;
    case PI_GGUF_UINT64: kv->val.u64 = ld64(p); break;
    case PI_GGUF_INT64: kv->val.i64 = (int64_t)ld64(p); break;
    case PI_GGUF_FLOAT32: {
        uint32_t u = ld32(p);
        float f;
        memcpy(&f, &u, 4);
        kv->val.f64 = f;
        break;
    }
    case PI_GGUF_FLOAT64: {
        uint64_t u = ld64(p);
        memcpy(&kv->val.f64, &u, 8);
        break;
    }
    case PI_GGUF_BOOL:
        if (p[0] > 1) return perr(c, at, "%s: bool must be 0 or 1, found %u", what, p[0]);
        kv->val.u64 = p[0];
        break;
    default: PI_ASSERT(0);
    }
    return PI_OK;
}

static pi_status parse_array(cursor *c, pi_gguf_kv *kv, const char *what) {
    char w[WBUF + 64];
    uint64_t at = c->pos;
    uint32_t et;
    snprintf(w, sizeof w, "%s array element type", what);
    pi_status st = take_u32(c, &et, w);
    if (st) return st;
    if (et == PI_GGUF_ARRAY) return perr_st(c, PI_ERR_UNSUPPORTED, at, "%s: nested arrays are not supported", what);
    if (et >= PI_GGUF_VTYPE_COUNT) return perr(c, at, "%s: unknown array element type %u", what, et);
    uint64_t n;
    at = c->pos;
    snprintf(w, sizeof w, "%s array count", what);
    if ((st = take_u64(c, &n, w))) return st;
    kv->arr_type = (pi_gguf_vtype)et;
    kv->arr_n = n;
    if (et != PI_GGUF_STRING) {
        uint64_t es = k_vtype_sizes[et];
        if (n > left(c) / es)
            return perr(c, at, "%s: %llu elements of %s (%llu bytes each) exceed the %llu bytes left (file size %llu)",
                        what, (unsigned long long)n, k_vtype_names[et], (unsigned long long)es,
                        (unsigned long long)left(c), (unsigned long long)c->size);
        kv->arr_data = c->base + c->pos;
        if (et == PI_GGUF_BOOL) {
            for (uint64_t i = 0; i < n; i++)
                if (c->base[c->pos + i] > 1)
                    return perr(c, c->pos + i, "%s element %llu: bool must be 0 or 1, found %u", what,
                                (unsigned long long)i, c->base[c->pos + i]);
        }
        c->pos += n * es;
        return PI_OK;
    }
    /* Strings: each takes at least its 8-byte length. A validating pass walks
       them without allocating, so the view table below is sized by strings
       that are really present. */
    if (n > left(c) / 8)
        return perr(c, at, "%s: %llu strings (at least 8 bytes each) exceed the %llu bytes left (file size %llu)", what,
                    (unsigned long long)n, (unsigned long long)left(c), (unsigned long long)c->size);
    uint64_t start = c->pos;
    for (uint64_t i = 0; i < n; i++) {
        /* Inline rather than take_str(): vocabularies have 10^5 strings and
           the field description is only worth formatting on error. */
        if (left(c) < 8) {
            snprintf(w, sizeof w, "%s element %llu length", what, (unsigned long long)i);
            return trunc_err(c, 8, w);
        }
        uint64_t len = ld64(c->base + c->pos);
        if (len > left(c) - 8)
            return perr(c, c->pos, "%s element %llu: length %llu exceeds the %llu bytes left (file size %llu)", what,
                        (unsigned long long)i, (unsigned long long)len, (unsigned long long)(left(c) - 8),
                        (unsigned long long)c->size);
        c->pos += 8 + len;
    }
    if (n == 0) return PI_OK;
    if (n > SIZE_MAX / sizeof(pi_gguf_str)) return pi_error(PI_ERR_NOMEM, "%s: too many strings", what);
    pi_gguf_str *tab = malloc((size_t)n * sizeof *tab);
    if (!tab) return pi_error(PI_ERR_NOMEM, "%s: out of memory for %llu string views", what, (unsigned long long)n);
    uint64_t p = start;
    for (uint64_t i = 0; i < n; i++) {
        tab[i].len = ld64(c->base + p);
        tab[i].data = (const char *)(c->base + p + 8);
        p += 8 + tab[i].len;
    }
    kv->arr_str = tab;
    return PI_OK;
}

static pi_status parse_kv(cursor *c, int64_t i, pi_gguf_kv *kv) {
    char w[WBUF], kq[QBUF];
    pi_status st;
    memset(kv, 0, sizeof *kv);
    kv->offset = c->pos;
    snprintf(w, sizeof w, "kv %lld key", (long long)i);
    if ((st = take_str(c, &kv->key, w))) return st;
    quote(kq, sizeof kq, kv->key.data, kv->key.len);
    snprintf(w, sizeof w, "kv %lld '%s' value type", (long long)i, kq);
    uint64_t at = c->pos;
    uint32_t t;
    if ((st = take_u32(c, &t, w))) return st;
    if (t >= PI_GGUF_VTYPE_COUNT) return perr(c, at, "%s: unknown type %u", w, t);
    kv->type = (pi_gguf_vtype)t;
    snprintf(w, sizeof w, "kv %lld '%s' value", (long long)i, kq);
    if (t == PI_GGUF_STRING) return take_str(c, &kv->str, w);
    if (t == PI_GGUF_ARRAY) return parse_array(c, kv, w);
    return parse_scalar(c, t, kv, w);
}

/* ---- tensor infos ---- */

static pi_status parse_tensor_info(cursor *c, int64_t i, uint64_t alignment, pi_gguf_tensor *t) {
    char w[WBUF], nq[QBUF];
    pi_status st;
    memset(t, 0, sizeof *t);
    t->info_offset = c->pos;
    snprintf(w, sizeof w, "tensor %lld name", (long long)i);
    if ((st = take_str(c, &t->name, w))) return st;
    quote(nq, sizeof nq, t->name.data, t->name.len);

    uint64_t at = c->pos;
    snprintf(w, sizeof w, "tensor %lld '%s' n_dims", (long long)i, nq);
    if ((st = take_u32(c, &t->n_dims, w))) return st;
    if (t->n_dims < 1 || t->n_dims > PI_GGUF_MAX_DIMS)
        return perr(c, at, "%s: %u is not in 1..%d", w, t->n_dims, PI_GGUF_MAX_DIMS);

    for (int d = 0; d < PI_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t v;
        at = c->pos;
        snprintf(w, sizeof w, "tensor %lld '%s' ne[%u]", (long long)i, nq, d);
        if ((st = take_u64(c, &v, w))) return st;
        if (v > (uint64_t)INT64_MAX) return perr(c, at, "%s: %lld is negative", w, (long long)v);
        t->ne[d] = (int64_t)v;
    }

    at = c->pos;
    snprintf(w, sizeof w, "tensor %lld '%s' type", (long long)i, nq);
    if ((st = take_u32(c, &t->type, w))) return st;
    const pi_type_info *ti = pi_type_get(t->type);
    if (!ti) return perr(c, at, "%s: unknown GGML type id %u", w, t->type);

    /* Shape checks belong to the shape fields; report them at ne[0]. */
    uint64_t ne_at = t->info_offset + 8 + t->name.len + 4;
    if (t->ne[0] % ti->blck)
        return perr(c, ne_at, "tensor %lld '%s' ne[0]: %lld is not a multiple of the %s block size %lld", (long long)i,
                    nq, (long long)t->ne[0], ti->name, (long long)ti->blck);
    /* nelements must fit int64 and nbytes uint64 (and the file, checked later). */
    int64_t nel = 1;
    for (int d = 0; d < PI_GGUF_MAX_DIMS; d++) {
        if (t->ne[d] != 0 && nel > INT64_MAX / t->ne[d])
            return perr(c, ne_at, "tensor %lld '%s' shape: element count overflows int64", (long long)i, nq);
        nel *= t->ne[d];
    }
    uint64_t nb = (uint64_t)(t->ne[0] / ti->blck);
    if (nb != 0 && ti->size > UINT64_MAX / nb)
        return perr(c, ne_at, "tensor %lld '%s' shape: byte size overflows", (long long)i, nq);
    nb *= ti->size;
    for (int d = 1; d < PI_GGUF_MAX_DIMS; d++) {
        if (t->ne[d] != 0 && nb > UINT64_MAX / (uint64_t)t->ne[d])
            return perr(c, ne_at, "tensor %lld '%s' shape: byte size overflows", (long long)i, nq);
        nb *= (uint64_t)t->ne[d];
    }
    t->nbytes = nb;

    at = c->pos;
    snprintf(w, sizeof w, "tensor %lld '%s' offset", (long long)i, nq);
    if ((st = take_u64(c, &t->offset, w))) return st;
    if (t->offset % alignment)
        return perr(c, at, "%s: %llu is not a multiple of the alignment %llu", w, (unsigned long long)t->offset,
                    (unsigned long long)alignment);
    return PI_OK;
}

/* ---- open ---- */

static pi_status parse(pi_gguf *g) {
    cursor cur = {g->base, g->size, 0, g->path};
    cursor *c = &cur;
    pi_status st;
    const uint8_t *p = NULL;

    if ((st = take(c, 4, &p, "magic"))) return st;
    if (!memcmp(p, PI_GGUF_MAGIC, 4)) {
        g->pwri = false;
    } else if (!memcmp(p, PI_GGUF_MAGIC_PWRI, 4)) {
        g->pwri = true;
    } else {
        char q[64];
        return perr(c, 0, "magic: '%s' is neither GGUF nor PWRI", quote(q, sizeof q, (const char *)p, 4));
    }

    if ((st = take_u32(c, &g->version, "version"))) return st;
    if (g->version == 0) return perr(c, 4, "version: 0 is not a GGUF version");
    if (g->version == 1) return perr_st(c, PI_ERR_UNSUPPORTED, 4, "version: unsupported version 1 (only 2 and 3)");
    if (g->version > 3) {
        /* A big-endian file reads as a huge version; say so rather than guess. */
        if ((g->version & 0xffff) == 0 && ((g->version >> 24) == 2 || (g->version >> 24) == 3))
            return perr_st(c, PI_ERR_UNSUPPORTED, 4, "version: big-endian GGUF files are not supported");
        return perr_st(c, PI_ERR_UNSUPPORTED, 4, "version: unsupported version %u (only 2 and 3)", g->version);
    }

    uint64_t n_tensors, n_kv;
    if ((st = take_u64(c, &n_tensors, "tensor count"))) return st;
    if ((st = take_u64(c, &n_kv, "kv count"))) return st;
    /* Smallest records: kv = key length (8) + type (4) + 1-byte value;
       tensor info = name length (8) + n_dims (4) + one ne (8) + type (4) +
       offset (8). Both must fit in what follows the header. */
    if (n_kv > left(c) / 13)
        return perr(c, 16, "kv count: %llu key-values cannot fit in the %llu bytes left (file size %llu)",
                    (unsigned long long)n_kv, (unsigned long long)left(c), (unsigned long long)c->size);
    if (n_tensors > left(c) / 32)
        return perr(c, 8, "tensor count: %llu tensor infos cannot fit in the %llu bytes left (file size %llu)",
                    (unsigned long long)n_tensors, (unsigned long long)left(c), (unsigned long long)c->size);

    uint64_t cap = 0;
    for (uint64_t i = 0; i < n_kv; i++) {
        if ((st = grow((void **)&g->kv, &cap, i + 1, sizeof *g->kv))) return st;
        st = parse_kv(c, (int64_t)i, &g->kv[i]);
        g->n_kv = (int64_t)i + 1; /* so close() frees a partial string table */
        if (st) return st;
    }

    int64_t di, df;
    if ((st = build_hash(g->n_kv, g->kv, sizeof *g->kv, offsetof(pi_gguf_kv, key), &g->kv_hash, &g->kv_mask, &di,
                         &df))) {
        if (st != PI_ERR_FORMAT) return st;
        char q[QBUF];
        const pi_gguf_kv *kv = &g->kv[di];
        return perr(c, kv->offset, "kv %lld '%s': duplicate key (first at kv %lld, byte %llu)", (long long)di,
                    quote(q, sizeof q, kv->key.data, kv->key.len), (long long)df, (unsigned long long)g->kv[df].offset);
    }

    g->alignment = PI_GGUF_DEFAULT_ALIGNMENT;
    int64_t ai =
        hash_find(g->kv_hash, g->kv_mask, g->kv, sizeof *g->kv, offsetof(pi_gguf_kv, key), PI_KEY_GENERAL_ALIGNMENT);
    if (ai >= 0) {
        const pi_gguf_kv *kv = &g->kv[ai];
        uint64_t at = kv->offset + 8 + kv->key.len;
        if (kv->type != PI_GGUF_UINT32)
            return perr(c, at, "kv %lld '" PI_KEY_GENERAL_ALIGNMENT "' value type: must be u32, found %s",
                        (long long)ai, pi_gguf_vtype_name(kv->type));
        uint64_t a = kv->val.u64;
        if (a == 0 || (a & (a - 1)))
            return perr(c, at + 4, "kv %lld '" PI_KEY_GENERAL_ALIGNMENT "' value: %llu is not a power of two",
                        (long long)ai, (unsigned long long)a);
        g->alignment = a;
    }

    cap = 0;
    for (uint64_t i = 0; i < n_tensors; i++) {
        if ((st = grow((void **)&g->tensors, &cap, i + 1, sizeof *g->tensors))) return st;
        if ((st = parse_tensor_info(c, (int64_t)i, g->alignment, &g->tensors[i]))) return st;
        g->n_tensors = (int64_t)i + 1;
    }
    if ((st = build_hash(g->n_tensors, g->tensors, sizeof *g->tensors, offsetof(pi_gguf_tensor, name), &g->t_hash,
                         &g->t_mask, &di, &df))) {
        if (st != PI_ERR_FORMAT) return st;
        char q[QBUF];
        const pi_gguf_tensor *t = &g->tensors[di];
        return perr(c, t->info_offset, "tensor %lld '%s': duplicate name (first at tensor %lld)", (long long)di,
                    quote(q, sizeof q, t->name.data, t->name.len), (long long)df);
    }

    /* pos <= size < 2^63 in practice and alignment <= 2^31: no overflow. */
    uint64_t data_off = (c->pos + g->alignment - 1) / g->alignment * g->alignment;
    if (data_off > g->size) {
        if (g->n_tensors > 0)
            return perr(c, c->pos, "data section: padding to alignment %llu needs %llu bytes, only %llu left",
                        (unsigned long long)g->alignment, (unsigned long long)(data_off - c->pos),
                        (unsigned long long)left(c));
        /* Tensor-less files (vocabularies) may stop right after the kvs. */
        data_off = g->size;
    }
    g->data_offset = data_off;

    uint64_t data_size = g->size - data_off;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        pi_gguf_tensor *t = &g->tensors[i];
        if (t->offset > data_size || t->nbytes > data_size - t->offset) {
            char q[QBUF];
            uint64_t at = t->info_offset + 8 + t->name.len + 4 + 8ull * t->n_dims + 4;
            quote(q, sizeof q, t->name.data, t->name.len);
            /* Absolute bounds when they are representable, else the raw fields. */
            if (t->offset <= UINT64_MAX - data_off && t->nbytes <= UINT64_MAX - data_off - t->offset)
                return perr(c, at, "tensor %lld '%s': data [%llu, %llu) exceeds file size %llu", (long long)i, q,
                            (unsigned long long)(data_off + t->offset),
                            (unsigned long long)(data_off + t->offset + t->nbytes), (unsigned long long)g->size);
            return perr(c, at,
                        "tensor %lld '%s': data at offset %llu (+%llu bytes) after the data section start %llu exceeds "
                        "file size %llu",
                        (long long)i, q, (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                        (unsigned long long)data_off, (unsigned long long)g->size);
        }
        t->data = g->base + data_off + t->offset;
    }
    return PI_OK;
}

static pi_status open_common(pi_gguf *g, pi_gguf **out) {
    pi_status st = parse(g);
    if (st) {
        pi_gguf_close(g);
        return st;
    }
    *out = g;
    return PI_OK;
}

pi_status pi_gguf_open_mem(const void *data, size_t size, pi_gguf **out) {
    PI_ASSERT(out);
    *out = NULL;
    if (!data && size) return pi_error(PI_ERR_INVALID, "gguf: NULL buffer of %zu bytes", size);
    pi_gguf *g = calloc(1, sizeof *g);
    if (!g) return pi_error(PI_ERR_NOMEM, "gguf: out of memory");
    g->base = data;
    g->size = size;
    return open_common(g, out);
}

pi_status pi_gguf_open(const char *path, pi_gguf **out) { return pi_gguf_open_mode(path, PI_MAP_FILE, out); }

pi_status pi_gguf_open_mode(const char *path, pi_map_mode mode, pi_gguf **out) {
    PI_ASSERT(path && out);
    *out = NULL;
    pi_mapping map;
    pi_status st = pi_map_file_mode(path, mode, &map);
    if (st) return st;
    pi_gguf *g = calloc(1, sizeof *g);
    char *pc = strdup(path);
    if (!g || !pc) {
        free(g);
        free(pc);
        pi_unmap_file(&map);
        return pi_error(PI_ERR_NOMEM, "%s: out of memory", path);
    }
    g->map = map;
    g->base = map.data;
    g->size = (uint64_t)map.size;
    g->path = pc;
    return open_common(g, out);
}

void pi_gguf_close(pi_gguf *g) {
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++) free((void *)g->kv[i].arr_str);
    free(g->kv);
    free(g->tensors);
    free(g->kv_hash);
    free(g->t_hash);
    pi_unmap_file(&g->map); /* no-op for pi_gguf_open_mem */
    free(g->path);
    free(g);
}

/* ---- accessors ---- */

uint32_t pi_gguf_version(const pi_gguf *g) { return g->version; }
bool pi_gguf_is_pwri(const pi_gguf *g) { return g->pwri; }
uint64_t pi_gguf_alignment(const pi_gguf *g) { return g->alignment; }
uint64_t pi_gguf_data_offset(const pi_gguf *g) { return g->data_offset; }
uint64_t pi_gguf_file_size(const pi_gguf *g) { return g->size; }
uint64_t pi_gguf_tensor_file_offset(const pi_gguf *g, const pi_gguf_tensor *t) { return g->data_offset + t->offset; }
const uint8_t *pi_gguf_base(const pi_gguf *g) { return g->base; }
int64_t pi_gguf_n_kv(const pi_gguf *g) { return g->n_kv; }
int64_t pi_gguf_n_tensors(const pi_gguf *g) { return g->n_tensors; }

const pi_gguf_kv *pi_gguf_kv_at(const pi_gguf *g, int64_t i) { return i >= 0 && i < g->n_kv ? &g->kv[i] : NULL; }

const pi_gguf_tensor *pi_gguf_tensor_at(const pi_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const pi_gguf_kv *pi_gguf_find_kv(const pi_gguf *g, const char *key) {
    int64_t i = hash_find(g->kv_hash, g->kv_mask, g->kv, sizeof *g->kv, offsetof(pi_gguf_kv, key), key);
    return i >= 0 ? &g->kv[i] : NULL;
}

const pi_gguf_tensor *pi_gguf_find_tensor(const pi_gguf *g, const char *name) {
    int64_t i = hash_find(g->t_hash, g->t_mask, g->tensors, sizeof *g->tensors, offsetof(pi_gguf_tensor, name), name);
    return i >= 0 ? &g->tensors[i] : NULL;
}

/* ---- typed getters ---- */

static const char *gpath(const pi_gguf *g) { return g->path ? g->path : "gguf"; }

/* The kv for key with a type check done by the caller; NOT_FOUND otherwise. */
static pi_status lookup(const pi_gguf *g, const char *key, const pi_gguf_kv **kv) {
    *kv = pi_gguf_find_kv(g, key);
    if (!*kv) return pi_error(PI_ERR_NOT_FOUND, "%s: key '%s' not found", gpath(g), key);
    return PI_OK;
}

static pi_status wrong_type(const pi_gguf *g, const pi_gguf_kv *kv, const char *key, const char *want) {
    if (kv->type == PI_GGUF_ARRAY)
        return pi_error(PI_ERR_FORMAT, "%s: key '%s': expected %s, found arr of %s", gpath(g), key, want,
                        pi_gguf_vtype_name(kv->arr_type));
    return pi_error(PI_ERR_FORMAT, "%s: key '%s': expected %s, found %s", gpath(g), key, want,
                    pi_gguf_vtype_name(kv->type));
}

/* Any integer kv as a signed/unsigned pair: neg set when the value is < 0. */
static pi_status get_int(const pi_gguf *g, const char *key, const char *want, const pi_gguf_kv **kvp, bool *neg,
                         uint64_t *mag) {
    pi_status st = lookup(g, key, kvp);
    if (st) return st;
    const pi_gguf_kv *kv = *kvp;
    if (!vtype_is_int(kv->type)) return wrong_type(g, kv, key, want);
    if (vtype_is_signed(kv->type) && kv->val.i64 < 0) {
        *neg = true;
        *mag = 0;
    } else {
        *neg = false;
        *mag = vtype_is_signed(kv->type) ? (uint64_t)kv->val.i64 : kv->val.u64;
    }
    return PI_OK;
}

pi_status pi_gguf_get_u32(const pi_gguf *g, const char *key, uint32_t *out) {
    const pi_gguf_kv *kv;
    bool neg;
    uint64_t v;
    pi_status st = get_int(g, key, "an integer", &kv, &neg, &v);
    if (st) return st;
    if (neg || v > UINT32_MAX) {
        if (neg)
            return pi_error(PI_ERR_FORMAT, "%s: key '%s': %lld does not fit u32", gpath(g), key,
                            (long long)kv->val.i64);
        return pi_error(PI_ERR_FORMAT, "%s: key '%s': %llu does not fit u32", gpath(g), key, (unsigned long long)v);
    }
    *out = (uint32_t)v;
    return PI_OK;
}

pi_status pi_gguf_get_i64(const pi_gguf *g, const char *key, int64_t *out) {
    const pi_gguf_kv *kv;
    bool neg;
    uint64_t v;
    pi_status st = get_int(g, key, "an integer", &kv, &neg, &v);
    if (st) return st;
    if (neg) {
        *out = kv->val.i64;
        return PI_OK;
    }
    if (v > (uint64_t)INT64_MAX)
        return pi_error(PI_ERR_FORMAT, "%s: key '%s': %llu does not fit i64", gpath(g), key, (unsigned long long)v);
    *out = (int64_t)v;
    return PI_OK;
}

pi_status pi_gguf_get_i64_range(const pi_gguf *g, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    const pi_gguf_kv *kv;
    bool neg;
    uint64_t v;
    pi_status st = get_int(g, key, "an integer", &kv, &neg, &v);
    if (st) return st;
    /* compared in the value's own sign, so a u64 above INT64_MAX stays exact */
    const bool in = neg ? kv->val.i64 >= lo && kv->val.i64 <= hi
                        : hi >= 0 && v <= (uint64_t)hi && (lo <= 0 || v >= (uint64_t)lo);
    if (!in) {
        if (neg)
            return pi_error(PI_ERR_FORMAT, "%s: %s = %lld is out of range [%lld, %lld]", gpath(g), key,
                            (long long)kv->val.i64, (long long)lo, (long long)hi);
        return pi_error(PI_ERR_FORMAT, "%s: %s = %llu is out of range [%lld, %lld]", gpath(g), key,
                        (unsigned long long)v, (long long)lo, (long long)hi);
    }
    *out = neg ? kv->val.i64 : (int64_t)v;
    return PI_OK;
}

pi_status pi_gguf_get_f32(const pi_gguf *g, const char *key, float *out) {
    const pi_gguf_kv *kv;
    pi_status st = lookup(g, key, &kv);
    if (st) return st;
    if (kv->type != PI_GGUF_FLOAT32 && kv->type != PI_GGUF_FLOAT64) return wrong_type(g, kv, key, "f32 or f64");
    double d = kv->val.f64;
    /* A finite f64 beyond float range would silently become inf. */
    if (isfinite(d) && fabs(d) > (double)FLT_MAX)
        return pi_error(PI_ERR_FORMAT, "%s: key '%s': %g does not fit f32", gpath(g), key, d);
    *out = (float)d;
    return PI_OK;
}

pi_status pi_gguf_get_bool(const pi_gguf *g, const char *key, bool *out) {
    const pi_gguf_kv *kv;
    pi_status st = lookup(g, key, &kv);
    if (st) return st;
    if (kv->type != PI_GGUF_BOOL) return wrong_type(g, kv, key, "bool");
    *out = kv->val.u64 != 0;
    return PI_OK;
}

pi_status pi_gguf_get_str(const pi_gguf *g, const char *key, pi_gguf_str *out) {
    const pi_gguf_kv *kv;
    pi_status st = lookup(g, key, &kv);
    if (st) return st;
    if (kv->type != PI_GGUF_STRING) return wrong_type(g, kv, key, "str");
    *out = kv->str;
    return PI_OK;
}

pi_status pi_gguf_get_arr(const pi_gguf *g, const char *key, int want, const pi_gguf_kv **out) {
    const pi_gguf_kv *kv;
    pi_status st = lookup(g, key, &kv);
    if (st) return st;
    if (kv->type != PI_GGUF_ARRAY || (want >= 0 && (uint32_t)want != (uint32_t)kv->arr_type)) {
        char w[32];
        if (want >= 0)
            snprintf(w, sizeof w, "arr of %s", pi_gguf_vtype_name((uint32_t)want));
        else
            snprintf(w, sizeof w, "arr");
        return wrong_type(g, kv, key, w);
    }
    *out = kv;
    return PI_OK;
}
