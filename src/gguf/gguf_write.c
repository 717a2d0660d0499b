/*
 * gguf_write.c — streamed GGUF v3 writer.
 *
 * Life of a writer: collecting (set_* and add_tensor append to in-memory
 * tables; nothing touches the file) -> data (begin_data has written header,
 * key-values, tensor infos and padding; write_data streams tensor bytes) ->
 * closed. Invariants:
 *   - key-value records are serialized into `meta` as they are set, exactly
 *     as they will appear in the file, so begin_data is a single copy;
 *   - tensor offsets are assigned at begin_data (the alignment may still change
 *     until then): offset[i+1] = align_up(offset[i] + nbytes[i]);
 *   - during the data phase, `pos` counts bytes written after the data
 *     section start; zero padding is inserted lazily when a tensor's first
 *     byte arrives, so pos == offset[cur] + written;
 *   - the first error is sticky: later calls fail with the same status and
 *     close() abandons the file and reports that first message again;
 *   - the bytes go to a base/outfile temporary, renamed over the path only by
 *     a successful close, so the path holds either its old content or the
 *     complete new file, never a partial one.
 * Everything the writer emits is something gguf_read.c accepts: values are
 * range-checked (bools 0/1, alignment a power of two, shapes as the reader
 * requires) before they are recorded.
 */
#include "gguf.h"
#include "names.h"

#include "base/outfile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PROGRESS_PIECE ((size_t)8 << 20) /* a large write is reported in pieces of this */

typedef struct {
    char *name;
    size_t name_len;
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[PI_GGUF_MAX_DIMS];
    uint64_t nbytes;
    uint64_t offset; /* relative to the data section; set by begin_data */
} wtensor;

typedef struct {
    size_t off; /* of the key bytes in meta */
    size_t len;
} wkey;

enum { PHASE_COLLECT, PHASE_DATA, PHASE_FAILED };

struct pi_gguf_writer {
    char *path;
    pi_outfile *of; /* NULL once committed or abandoned */
    FILE *f;        /* of's stream */
    bool pwri;
    int phase;
    uint32_t alignment;

    uint8_t *meta; /* serialized kv records */
    size_t meta_len, meta_cap;
    wkey *keys;
    size_t n_kv, kv_cap;

    wtensor *t;
    size_t n_t, t_cap;

    size_t cur;           /* tensor receiving data */
    uint64_t cur_written; /* bytes of it written so far */
    uint64_t pos;         /* bytes written after the data section start */
    uint64_t data_total;  /* the data section's size, padding included; set by begin_data */

    pi_gguf_progress_fn progress; /* may be NULL */
    void *progress_ctx;

    pi_status failed;
    char failmsg[PI_ERRMSG_MAX];
};

/* ---- errors ---- */

/* Record the first failure (sticky) and return it. */
static pi_status fail(pi_gguf_writer *w, pi_status st) {
    if (w->phase != PHASE_FAILED) {
        w->phase = PHASE_FAILED;
        w->failed = st;
        snprintf(w->failmsg, sizeof w->failmsg, "%s", pi_last_error());
    }
    return st;
}

static pi_status io_fail(pi_gguf_writer *w) {
    int e = errno;
    pi_error(PI_ERR_IO, "%s: write failed: %s", w->path, e ? strerror(e) : "unknown error");
    return fail(w, PI_ERR_IO);
}

static pi_status check_usable(pi_gguf_writer *w, int want_phase, const char *what) {
    if (w->phase == PHASE_FAILED)
        return pi_error(w->failed, "%s: %s: writer failed earlier: %s", w->path, what, w->failmsg);
    if (w->phase != want_phase)
        return pi_error(PI_ERR_INVALID, "%s: %s %s pi_gguf_writer_begin_data()", w->path, what,
                        want_phase == PHASE_COLLECT ? "after" : "before");
    return PI_OK;
}

/* ---- serialization into meta ---- */

static pi_status meta_put(pi_gguf_writer *w, const void *p, size_t n) {
    if (n > SIZE_MAX - w->meta_len) return pi_error(PI_ERR_NOMEM, "%s: metadata too large", w->path);
    if (w->meta_len + n > w->meta_cap) {
        size_t nc = w->meta_cap ? w->meta_cap : 4096;
        while (nc < w->meta_len + n) nc = nc > SIZE_MAX / 2 ? w->meta_len + n : nc * 2;
        uint8_t *m = realloc(w->meta, nc);
        if (!m) return pi_error(PI_ERR_NOMEM, "%s: out of memory for %zu bytes of metadata", w->path, nc);
        w->meta = m;
        w->meta_cap = nc;
    }
    if (n) memcpy(w->meta + w->meta_len, p, n);
    w->meta_len += n;
    return PI_OK;
}

static void enc32(uint8_t *b, uint32_t v) {
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
}
static void enc64(uint8_t *b, uint64_t v) {
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
}

static pi_status meta_u32(pi_gguf_writer *w, uint32_t v) {
    uint8_t b[4];
    enc32(b, v);
    return meta_put(w, b, 4);
}
static pi_status meta_u64(pi_gguf_writer *w, uint64_t v) {
    uint8_t b[8];
    enc64(b, v);
    return meta_put(w, b, 8);
}
static pi_status meta_str(pi_gguf_writer *w, const char *s, uint64_t n) {
    pi_status st = meta_u64(w, n);
    if (!st && n > SIZE_MAX) return pi_error(PI_ERR_NOMEM, "%s: string too large", w->path);
    return st ? st : meta_put(w, s, (size_t)n);
}

/* Scalar of type t from the widened value, little-endian. */
static pi_status meta_scalar(pi_gguf_writer *w, uint32_t t, uint64_t u, int64_t i, double f) {
    uint8_t b[8];
    switch (t) {
    case PI_GGUF_UINT8:
    case PI_GGUF_BOOL: b[0] = (uint8_t)u; return meta_put(w, b, 1);
    case PI_GGUF_INT8: b[0] = (uint8_t)(int8_t)i; return meta_put(w, b, 1);
    case PI_GGUF_UINT16:
        b[0] = (uint8_t)u;
        b[1] = (uint8_t)(u >> 8);
        return meta_put(w, b, 2);
    case PI_GGUF_INT16: {
        uint16_t v = (uint16_t)(int16_t)i;
        b[0] = (uint8_t)v;
        b[1] = (uint8_t)(v >> 8);
        return meta_put(w, b, 2);
    }
    case PI_GGUF_UINT32: return meta_u32(w, (uint32_t)u);
    case PI_GGUF_INT32: return meta_u32(w, (uint32_t)(int32_t)i);
    case PI_GGUF_UINT64: return meta_u64(w, u);
    case PI_GGUF_INT64: return meta_u64(w, (uint64_t)i);
    case PI_GGUF_FLOAT32: {
        float x = (float)f;
        uint32_t v;
        memcpy(&v, &x, 4);
        return meta_u32(w, v);
    }
    case PI_GGUF_FLOAT64: {
        uint64_t v;
        memcpy(&v, &f, 8);
        return meta_u64(w, v);
    }
    default: PI_ASSERT(0);
    }
    return PI_OK;
}

/* Start a kv record: checks phase and uniqueness, appends key and type.
   The record starts at *mark, where a failed value append rolls back to. */
static pi_status kv_begin(pi_gguf_writer *w, const char *key, size_t klen, uint32_t type, size_t *mark) {
    pi_status st = check_usable(w, PHASE_COLLECT, "setting a key");
    if (st) return st;
    if (!key) return pi_error(PI_ERR_INVALID, "%s: NULL key", w->path);
    for (size_t i = 0; i < w->n_kv; i++)
        if (w->keys[i].len == klen && !memcmp(w->meta + w->keys[i].off, key, klen))
            return pi_error(PI_ERR_INVALID, "%s: duplicate key '%.*s'", w->path, (int)(klen > 200 ? 200 : klen), key);
    if (w->n_kv == w->kv_cap) {
        size_t nc = w->kv_cap ? w->kv_cap * 2 : 32;
        wkey *k = realloc(w->keys, nc * sizeof *k);
        if (!k) return pi_error(PI_ERR_NOMEM, "%s: out of memory", w->path);
        w->keys = k;
        w->kv_cap = nc;
    }
    *mark = w->meta_len;
    if ((st = meta_str(w, key, klen)) || (st = meta_u32(w, type))) {
        w->meta_len = *mark;
        return st;
    }
    return PI_OK;
}

/* Finish a record begun by kv_begin: st is the status of appending the value. */
static pi_status kv_end(pi_gguf_writer *w, size_t mark, size_t klen, pi_status st) {
    if (st) {
        w->meta_len = mark;
        return st;
    }
    w->keys[w->n_kv].off = mark + 8;
    w->keys[w->n_kv].len = klen;
    w->n_kv++;
    return PI_OK;
}

static bool is_alignment_key(const char *key, size_t klen) {
    return klen == strlen(PI_KEY_GENERAL_ALIGNMENT) && !memcmp(key, PI_KEY_GENERAL_ALIGNMENT, klen);
}

/* general.alignment is special: it must be a u32 power of two, and it sets
   the data alignment. Check before recording so a bad value writes nothing. */
static pi_status check_alignment_kv(pi_gguf_writer *w, const char *key, size_t klen, uint32_t type, uint64_t v) {
    if (!key || !is_alignment_key(key, klen)) return PI_OK;
    if (type != PI_GGUF_UINT32)
        return pi_error(PI_ERR_INVALID, "%s: " PI_KEY_GENERAL_ALIGNMENT " must be u32, not %s", w->path,
                        pi_gguf_vtype_name(type));
    if (v == 0 || (v & (v - 1)) || v > UINT32_MAX)
        return pi_error(PI_ERR_INVALID, "%s: " PI_KEY_GENERAL_ALIGNMENT " %llu is not a power of two", w->path,
                        (unsigned long long)v);
    return PI_OK;
}

/* Record a scalar of type t (value given widened, already range-checked). */
static pi_status set_scalar(pi_gguf_writer *w, const char *key, size_t klen, uint32_t t, uint64_t u, int64_t i,
                            double f) {
    pi_status st = check_usable(w, PHASE_COLLECT, "setting a key");
    if (st) return st;
    if ((st = check_alignment_kv(w, key, klen, t, u))) return st;
    size_t mark;
    if ((st = kv_begin(w, key, klen, t, &mark))) return st;
    st = kv_end(w, mark, klen, meta_scalar(w, t, u, i, f));
    if (!st && is_alignment_key(key, klen)) w->alignment = (uint32_t)u;
    return st;
}

static size_t klen_of(const char *key) { return key ? strlen(key) : 0; }

pi_status pi_gguf_set_u32(pi_gguf_writer *w, const char *key, uint32_t v) {
    return set_scalar(w, key, klen_of(key), PI_GGUF_UINT32, v, 0, 0);
}
pi_status pi_gguf_set_i32(pi_gguf_writer *w, const char *key, int32_t v) {
    return set_scalar(w, key, klen_of(key), PI_GGUF_INT32, 0, v, 0);
}
pi_status pi_gguf_set_u64(pi_gguf_writer *w, const char *key, uint64_t v) {
    return set_scalar(w, key, klen_of(key), PI_GGUF_UINT64, v, 0, 0);
}
pi_status pi_gguf_set_f32(pi_gguf_writer *w, const char *key, float v) {
    return set_scalar(w, key, klen_of(key), PI_GGUF_FLOAT32, 0, 0, v);
}
pi_status pi_gguf_set_bool(pi_gguf_writer *w, const char *key, bool v) {
    return set_scalar(w, key, klen_of(key), PI_GGUF_BOOL, v ? 1 : 0, 0, 0);
}

static pi_status set_str_view(pi_gguf_writer *w, const char *key, size_t klen, const char *s, uint64_t n) {
    pi_status st = check_usable(w, PHASE_COLLECT, "setting a key");
    if (st) return st;
    if (!s && n)
        return pi_error(PI_ERR_INVALID, "%s: key '%.*s': NULL string", w->path, (int)(klen > 200 ? 200 : klen),
                        key ? key : "");
    if ((st = check_alignment_kv(w, key, klen, PI_GGUF_STRING, 0))) return st;
    size_t mark;
    if ((st = kv_begin(w, key, klen, PI_GGUF_STRING, &mark))) return st;
    return kv_end(w, mark, klen, meta_str(w, s, n));
}

pi_status pi_gguf_set_str(pi_gguf_writer *w, const char *key, const char *v) {
    return set_str_view(w, key, klen_of(key), v, v ? strlen(v) : 0);
}

static pi_status set_arr_view(pi_gguf_writer *w, const char *key, size_t klen, pi_gguf_vtype t, const void *data,
                              uint64_t n) {
    pi_status st = check_usable(w, PHASE_COLLECT, "setting a key");
    if (st) return st;
    size_t es = pi_gguf_vtype_size((uint32_t)t);
    if (es == 0)
        return pi_error(PI_ERR_INVALID, "%s: key '%.*s': array element type %s is not a scalar type", w->path,
                        (int)(klen > 200 ? 200 : klen), key ? key : "", pi_gguf_vtype_name((uint32_t)t));
    if (n > SIZE_MAX / es)
        return pi_error(PI_ERR_INVALID, "%s: array of %llu elements too large", w->path, (unsigned long long)n);
    if (!data && n) return pi_error(PI_ERR_INVALID, "%s: NULL array data", w->path);
    if (t == PI_GGUF_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (((const uint8_t *)data)[i] > 1)
                return pi_error(PI_ERR_INVALID, "%s: bool array element %llu is %u, not 0 or 1", w->path,
                                (unsigned long long)i, ((const uint8_t *)data)[i]);
    if ((st = check_alignment_kv(w, key, klen, PI_GGUF_ARRAY, 0))) return st;
    size_t mark;
    if ((st = kv_begin(w, key, klen, PI_GGUF_ARRAY, &mark))) return st;
    if (!(st = meta_u32(w, (uint32_t)t)) && !(st = meta_u64(w, n))) st = meta_put(w, data, (size_t)(n * es));
    return kv_end(w, mark, klen, st);
}

pi_status pi_gguf_set_arr(pi_gguf_writer *w, const char *key, pi_gguf_vtype t, const void *data, uint64_t n) {
    return set_arr_view(w, key, klen_of(key), t, data, n);
}

/* Strings given as an array of pointers with optional lengths, or as views. */
static pi_status set_arr_str_any(pi_gguf_writer *w, const char *key, size_t klen, const char *const *strs,
                                 const uint64_t *lens, const pi_gguf_str *views, uint64_t n) {
    pi_status st = check_usable(w, PHASE_COLLECT, "setting a key");
    if (st) return st;
    if (n && !strs && !views) return pi_error(PI_ERR_INVALID, "%s: NULL string array", w->path);
    if ((st = check_alignment_kv(w, key, klen, PI_GGUF_ARRAY, 0))) return st;
    size_t mark;
    if ((st = kv_begin(w, key, klen, PI_GGUF_ARRAY, &mark))) return st;
    if (!(st = meta_u32(w, PI_GGUF_STRING))) st = meta_u64(w, n);
    for (uint64_t i = 0; i < n && !st; i++) {
        const char *s = views ? views[i].data : strs[i];
        uint64_t len = views ? views[i].len : lens ? lens[i] : s ? strlen(s) : 0;
        if (!s && len) {
            st = pi_error(PI_ERR_INVALID, "%s: string array element %llu is NULL", w->path, (unsigned long long)i);
            break;
        }
        st = meta_str(w, s, len);
    }
    return kv_end(w, mark, klen, st);
}

pi_status pi_gguf_set_arr_str(pi_gguf_writer *w, const char *key, const char *const *strs, const uint64_t *lens,
                              uint64_t n) {
    return set_arr_str_any(w, key, klen_of(key), strs, lens, NULL, n);
}

/* Does the widened value of a (possibly hand-built) kv fit its type? */
static bool scalar_fits(const pi_gguf_kv *kv) {
    switch (kv->type) {
    case PI_GGUF_UINT8: return kv->val.u64 <= UINT8_MAX;
    case PI_GGUF_UINT16: return kv->val.u64 <= UINT16_MAX;
    case PI_GGUF_UINT32: return kv->val.u64 <= UINT32_MAX;
    case PI_GGUF_BOOL: return kv->val.u64 <= 1;
    case PI_GGUF_INT8: return kv->val.i64 >= INT8_MIN && kv->val.i64 <= INT8_MAX;
    case PI_GGUF_INT16: return kv->val.i64 >= INT16_MIN && kv->val.i64 <= INT16_MAX;
    case PI_GGUF_INT32: return kv->val.i64 >= INT32_MIN && kv->val.i64 <= INT32_MAX;
    default: return true; /* u64, i64, f32 (rounded), f64 */
    }
}

pi_status pi_gguf_set_kv(pi_gguf_writer *w, const pi_gguf_kv *kv) {
    PI_ASSERT(w && kv);
    pi_status st = check_usable(w, PHASE_COLLECT, "setting a key");
    if (st) return st;
    if (!kv->key.data && kv->key.len) return pi_error(PI_ERR_INVALID, "%s: kv with NULL key", w->path);
    if (kv->key.len > SIZE_MAX) return pi_error(PI_ERR_INVALID, "%s: key too long", w->path);
    const char *key = kv->key.data ? kv->key.data : "";
    size_t klen = (size_t)kv->key.len;
    uint32_t t = (uint32_t)kv->type;
    if (t >= PI_GGUF_VTYPE_COUNT)
        return pi_error(PI_ERR_INVALID, "%s: kv '%.*s': unknown type %u", w->path, (int)(klen > 200 ? 200 : klen), key,
                        t);
    if (t == PI_GGUF_STRING) return set_str_view(w, key, klen, kv->str.data, kv->str.len);
    if (t == PI_GGUF_ARRAY) {
        if (kv->arr_type == PI_GGUF_STRING) {
            if (kv->arr_n && !kv->arr_str) return pi_error(PI_ERR_INVALID, "%s: string array without views", w->path);
            return set_arr_str_any(w, key, klen, NULL, NULL, kv->arr_str, kv->arr_n);
        }
        return set_arr_view(w, key, klen, kv->arr_type, kv->arr_data, kv->arr_n);
    }
    if (!scalar_fits(kv))
        return pi_error(PI_ERR_INVALID, "%s: kv '%.*s': value does not fit %s", w->path, (int)(klen > 200 ? 200 : klen),
                        key, pi_gguf_vtype_name(t));
    return set_scalar(w, key, klen, t, kv->val.u64, kv->val.i64, kv->val.f64);
}

/* ---- tensors ---- */

pi_status pi_gguf_add_tensor(pi_gguf_writer *w, const char *name, pi_type type, uint32_t n_dims, const int64_t *ne) {
    pi_status st = check_usable(w, PHASE_COLLECT, "adding a tensor");
    if (st) return st;
    if (!name || !ne) return pi_error(PI_ERR_INVALID, "%s: add_tensor: NULL name or shape", w->path);
    size_t nlen = strlen(name);
    const pi_type_info *ti = pi_type_get((uint32_t)type);
    if (!ti) return pi_error(PI_ERR_INVALID, "%s: tensor '%s': unknown type %d", w->path, name, (int)type);
    if (n_dims < 1 || n_dims > PI_GGUF_MAX_DIMS)
        return pi_error(PI_ERR_INVALID, "%s: tensor '%s': n_dims %u is not in 1..%d", w->path, name, n_dims,
                        PI_GGUF_MAX_DIMS);
    wtensor t = {0};
    t.type = (uint32_t)type;
    t.n_dims = n_dims;
    for (int d = 0; d < PI_GGUF_MAX_DIMS; d++) t.ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 0)
            return pi_error(PI_ERR_INVALID, "%s: tensor '%s': ne[%u] = %lld is negative", w->path, name, d,
                            (long long)ne[d]);
        t.ne[d] = ne[d];
    }
    if (t.ne[0] % ti->blck)
        return pi_error(PI_ERR_INVALID, "%s: tensor '%s': ne[0] = %lld is not a multiple of the %s block size %lld",
                        w->path, name, (long long)t.ne[0], ti->name, (long long)ti->blck);
    /* Same limits as the reader: elements fit int64, bytes fit uint64. */
    int64_t nel = 1;
    uint64_t nb = (uint64_t)(t.ne[0] / ti->blck);
    bool ovf = nb != 0 && ti->size > UINT64_MAX / nb;
    nb *= ti->size;
    for (int d = 0; d < PI_GGUF_MAX_DIMS && !ovf; d++) {
        if (t.ne[d] != 0 && nel > INT64_MAX / t.ne[d])
            ovf = true;
        else
            nel *= t.ne[d];
        if (d > 0 && t.ne[d] != 0 && nb > UINT64_MAX / (uint64_t)t.ne[d])
            ovf = true;
        else if (d > 0)
            nb *= (uint64_t)t.ne[d];
    }
    if (ovf) return pi_error(PI_ERR_INVALID, "%s: tensor '%s': size overflows", w->path, name);
    t.nbytes = nb;
    for (size_t i = 0; i < w->n_t; i++)
        if (w->t[i].name_len == nlen && !memcmp(w->t[i].name, name, nlen))
            return pi_error(PI_ERR_INVALID, "%s: duplicate tensor name '%s'", w->path, name);
    if (w->n_t == w->t_cap) {
        size_t nc = w->t_cap ? w->t_cap * 2 : 64;
        wtensor *p = realloc(w->t, nc * sizeof *p);
        if (!p) return pi_error(PI_ERR_NOMEM, "%s: out of memory", w->path);
        w->t = p;
        w->t_cap = nc;
    }
    t.name = malloc(nlen + 1);
    if (!t.name) return pi_error(PI_ERR_NOMEM, "%s: out of memory", w->path);
    memcpy(t.name, name, nlen + 1);
    t.name_len = nlen;
    w->t[w->n_t++] = t;
    return PI_OK;
}

/* ---- file output ---- */

static pi_status out(pi_gguf_writer *w, const void *p, size_t n) {
    errno = 0;
    if (n && fwrite(p, 1, n, w->f) != n) return io_fail(w);
    return PI_OK;
}

static pi_status out_zeros(pi_gguf_writer *w, uint64_t n) {
    static const uint8_t zeros[4096];
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        pi_status st = out(w, zeros, k);
        if (st) return st;
        n -= k;
    }
    return PI_OK;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

pi_status pi_gguf_writer_create(const char *path, bool pwri, pi_gguf_writer **outp) {
    PI_ASSERT(path && outp);
    *outp = NULL;
    pi_gguf_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return pi_error(PI_ERR_NOMEM, "%s: out of memory", path);
    }
    /* Opened now so an unwritable path fails early, before any work. */
    pi_status st = pi_outfile_open(path, &w->of);
    if (st) {
        free(w->path);
        free(w);
        return st;
    }
    w->f = pi_outfile_stream(w->of);
    w->pwri = pwri;
    w->alignment = PI_GGUF_DEFAULT_ALIGNMENT;
    w->phase = PHASE_COLLECT;
    *outp = w;
    return PI_OK;
}

void pi_gguf_writer_set_progress(pi_gguf_writer *w, pi_gguf_progress_fn fn, void *ctx) {
    PI_ASSERT(w);
    w->progress = fn;
    w->progress_ctx = ctx;
}

static void tell_progress(const pi_gguf_writer *w) {
    if (w->progress) w->progress(w->progress_ctx, w->pos, w->data_total);
}

pi_status pi_gguf_writer_begin_data(pi_gguf_writer *w) {
    PI_ASSERT(w);
    pi_status st = check_usable(w, PHASE_COLLECT, "begin_data");
    if (st) return st;
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        w->t[i].offset = off;
        if (w->t[i].nbytes > UINT64_MAX - off - w->alignment)
            return fail(w, pi_error(PI_ERR_INVALID, "%s: tensor data exceeds 2^64 bytes", w->path));
        off = align_up(off + w->t[i].nbytes, w->alignment);
    }
    w->data_total = off;

    uint8_t hdr[24];
    memcpy(hdr, w->pwri ? PI_GGUF_MAGIC_PWRI : PI_GGUF_MAGIC, 4);
    enc32(hdr + 4, 3);
    enc64(hdr + 8, (uint64_t)w->n_t);
    enc64(hdr + 16, (uint64_t)w->n_kv);
    uint64_t written = sizeof hdr + w->meta_len;
    if ((st = out(w, hdr, sizeof hdr)) || (st = out(w, w->meta, w->meta_len))) return st;
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        uint8_t b[8 + 4 + 8 * PI_GGUF_MAX_DIMS + 4 + 8];
        size_t n = 0;
        enc64(b, t->name_len);
        if ((st = out(w, b, 8)) || (st = out(w, t->name, t->name_len))) return st;
        enc32(b + n, t->n_dims);
        n += 4;
        for (uint32_t d = 0; d < t->n_dims; d++, n += 8) enc64(b + n, (uint64_t)t->ne[d]);
        enc32(b + n, t->type);
        n += 4;
        enc64(b + n, t->offset);
        n += 8;
        if ((st = out(w, b, n))) return st;
        written += 8 + t->name_len + n;
    }
    if ((st = out_zeros(w, align_up(written, w->alignment) - written))) return st;
    w->phase = PHASE_DATA;
    w->cur = 0;
    w->cur_written = 0;
    w->pos = 0;
    tell_progress(w);
    return PI_OK;
}

/* Skip past complete tensors (including empty ones). */
static void advance(pi_gguf_writer *w) {
    while (w->cur < w->n_t && w->cur_written == w->t[w->cur].nbytes) {
        w->cur++;
        w->cur_written = 0;
    }
}

pi_status pi_gguf_write_data(pi_gguf_writer *w, const void *data, size_t n) {
    PI_ASSERT(w);
    pi_status st = check_usable(w, PHASE_DATA, "writing tensor data");
    if (st) return st;
    if (n == 0) return PI_OK;
    if (!data) return pi_error(PI_ERR_INVALID, "%s: NULL tensor data", w->path);
    advance(w);
    if (w->cur == w->n_t)
        return pi_error(PI_ERR_INVALID, "%s: %zu bytes of tensor data after the last tensor is complete", w->path, n);
    const wtensor *t = &w->t[w->cur];
    uint64_t rest = t->nbytes - w->cur_written;
    if (n > rest)
        return pi_error(PI_ERR_INVALID, "%s: tensor %zu '%s': %zu bytes written but only %llu of its %llu bytes remain",
                        w->path, w->cur, t->name, n, (unsigned long long)rest, (unsigned long long)t->nbytes);
    if (w->cur_written == 0) {
        PI_ASSERT(t->offset >= w->pos);
        if ((st = out_zeros(w, t->offset - w->pos))) return st;
        w->pos = t->offset;
    }
    /* in pieces, so progress moves during a tensor of hundreds of MiB */
    const uint8_t *p = data;
    while (n) {
        size_t k = w->progress && n > PROGRESS_PIECE ? PROGRESS_PIECE : n;
        if ((st = out(w, p, k))) return st;
        w->cur_written += k;
        w->pos += k;
        p += k;
        n -= k;
        tell_progress(w);
    }
    return PI_OK;
}

static void writer_free(pi_gguf_writer *w) {
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->t);
    free(w->keys);
    free(w->meta);
    free(w->path);
    free(w);
}

/* Abandon: remove the temporary (the path keeps what it had; a device or
   FIFO such as /dev/full was written in place and is never removed), keep
   the message of st. */
static pi_status abandon(pi_gguf_writer *w, pi_status st) {
    pi_outfile_abort(w->of);
    writer_free(w);
    return st;
}

pi_status pi_gguf_writer_close(pi_gguf_writer *w) {
    if (!w) return PI_OK;
    if (w->phase == PHASE_FAILED) {
        pi_error(w->failed, "%s", w->failmsg);
        return abandon(w, w->failed);
    }
    if (w->phase == PHASE_COLLECT)
        return abandon(w, pi_error(PI_ERR_INVALID, "%s: closed before pi_gguf_writer_begin_data(); not written",
                                   w->path));
    advance(w);
    if (w->cur < w->n_t) {
        const wtensor *t = &w->t[w->cur];
        return abandon(w, pi_error(PI_ERR_INVALID,
                                   "%s: closed with tensor %zu '%s' incomplete (%llu of %llu bytes written); not written",
                                   w->path, w->cur, t->name, (unsigned long long)w->cur_written,
                                   (unsigned long long)t->nbytes));
    }
    /* Pad the end like ggml does, so the last tensor also ends aligned. */
    pi_status st = out_zeros(w, w->data_total - w->pos);
    if (st) return abandon(w, st);
    w->pos = w->data_total;
    /* flush, sync, rename into place; on failure the temporary is gone */
    st = pi_outfile_commit(w->of);
    w->of = NULL;
    w->f = NULL;
    if (!st) tell_progress(w);
    writer_free(w);
    return st;
}

pi_status pi_gguf_writer_finish(pi_gguf_writer *w, pi_status st) {
    if (!st) return pi_gguf_writer_close(w);
    pi_error_saved saved;
    pi_error_save(&saved);
    pi_gguf_writer_close(w);
    pi_error_restore(&saved);
    return st;
}
