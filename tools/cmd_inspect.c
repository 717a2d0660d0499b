/*
 * cmd_inspect.c — `pinfer inspect FILE [--all] [--json]`: print a GGUF
 * file's header, metadata and tensor table, totals (parameters, bytes per
 * type, bits per weight) and a summary of the model (architecture, shape,
 * predictors, bundles).
 *
 * The report goes to stdout and nothing else does; errors go to stderr as
 * "pinfer: inspect: <message>". Exit 0 on success, 1 when the file cannot be
 * read or is malformed, 2 on bad usage. Strings from the file are printed
 * escaped (control bytes as \n, \t, \xNN; UTF-8 left as is) so a hostile file
 * cannot drive the terminal; long strings and arrays are cut unless --all.
 *
 * --json writes the same as one JSON document (cJSON; refused with exit 2
 * in a build without it): strings whole (invalid UTF-8 and NUL bytes as
 * U+FFFD), arrays whole except the tokenizer's (tokenizer.*: type and length
 * only, unless --all).
 */
#include "cmds.h"
#include "gguf/gguf.h"
#include "gguf/names.h"
#include "report.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STR_MAX   80 /* bytes of a string shown before cutting */
#define ARR_SHOW  8  /* array elements shown without --all */
#define ARR_CHARS 96 /* ... or fewer when they get long */

static void usage(FILE *f) {
    fprintf(f, "usage: pinfer inspect FILE [--all] [--json]\n"
               "  print a GGUF file's header, key-values, tensors, totals and a summary of the model\n"
               "  --all   print long strings and every array element in full\n"
               "  --json  the same as one JSON document (the tokenizer's arrays as type and length unless --all)\n");
}

/* Print bytes escaped, at most max bytes (0 = all), cut at a UTF-8 character
   boundary. Returns the number of characters printed, roughly. */
static size_t put_escaped(FILE *f, const char *s, uint64_t len, uint64_t max) {
    uint64_t n = len;
    if (max && len > max) {
        n = max;
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80) n--; /* don't split a character */
    }
    size_t out = 0;
    for (uint64_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '\n': out += (size_t)fprintf(f, "\\n"); break;
        case '\t': out += (size_t)fprintf(f, "\\t"); break;
        case '\r': out += (size_t)fprintf(f, "\\r"); break;
        case '"': out += (size_t)fprintf(f, "\\\""); break;
        case '\\': out += (size_t)fprintf(f, "\\\\"); break;
        default:
            if (c < 0x20 || c == 0x7f)
                out += (size_t)fprintf(f, "\\x%02x", c);
            else {
                fputc(c, f);
                out += (c & 0xc0) != 0x80; /* count characters, not bytes */
            }
        }
    }
    return out;
}

/* A quoted string; cut strings end with a note of their full length. */
static size_t put_str(FILE *f, pi_gguf_str s, bool all) {
    fputc('"', f);
    size_t out = 2 + put_escaped(f, s.data, s.len, all ? 0 : STR_MAX);
    fputc('"', f);
    if (!all && s.len > STR_MAX) out += (size_t)fprintf(f, "… (%" PRIu64 " bytes)", s.len);
    return out;
}

static uint64_t ld(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Element i of a scalar array, decoded from its little-endian bytes. */
static size_t put_elem(FILE *f, const pi_gguf_kv *kv, uint64_t i) {
    size_t es = pi_gguf_vtype_size(kv->arr_type);
    uint64_t v = ld((const uint8_t *)kv->arr_data + i * es, es);
    switch (kv->arr_type) {
    case PI_GGUF_UINT8:
    case PI_GGUF_UINT16:
    case PI_GGUF_UINT32:
    case PI_GGUF_UINT64: return (size_t)fprintf(f, "%" PRIu64, v);
    case PI_GGUF_INT8: return (size_t)fprintf(f, "%d", (int)(int8_t)v);
    case PI_GGUF_INT16: return (size_t)fprintf(f, "%d", (int)(int16_t)v);
    case PI_GGUF_INT32: return (size_t)fprintf(f, "%" PRId32, (int32_t)v);
    case PI_GGUF_INT64: return (size_t)fprintf(f, "%" PRId64, (int64_t)v);
    case PI_GGUF_BOOL: return (size_t)fprintf(f, "%s", v ? "true" : "false");
    case PI_GGUF_FLOAT32: {
        uint32_t u = (uint32_t)v;
        float x;
        memcpy(&x, &u, 4);
        return (size_t)fprintf(f, "%g", (double)x);
    }
    case PI_GGUF_FLOAT64: {
        double x;
        memcpy(&x, &v, 8);
        return (size_t)fprintf(f, "%g", x);
    }
    default: return 0;
    }
}

static void put_value(FILE *f, const pi_gguf_kv *kv, bool all) {
    switch (kv->type) {
    case PI_GGUF_UINT8:
    case PI_GGUF_UINT16:
    case PI_GGUF_UINT32:
    case PI_GGUF_UINT64: fprintf(f, "%" PRIu64, kv->val.u64); break;
    case PI_GGUF_INT8:
    case PI_GGUF_INT16:
    case PI_GGUF_INT32:
    case PI_GGUF_INT64: fprintf(f, "%" PRId64, kv->val.i64); break;
    case PI_GGUF_FLOAT32:
    case PI_GGUF_FLOAT64: fprintf(f, "%g", kv->val.f64); break;
    case PI_GGUF_BOOL: fprintf(f, "%s", kv->val.u64 ? "true" : "false"); break;
    case PI_GGUF_STRING: put_str(f, kv->str, all); break;
    case PI_GGUF_ARRAY: {
        bool is_str = kv->arr_type == PI_GGUF_STRING;
        fprintf(f, "[%s × %" PRIu64 "]", pi_gguf_vtype_name(kv->arr_type), kv->arr_n);
        if (all) {
            /* One element per line: vocabularies have tens of thousands. */
            for (uint64_t i = 0; i < kv->arr_n; i++) {
                fprintf(f, "\n      [%" PRIu64 "] ", i);
                if (is_str)
                    put_str(f, kv->arr_str[i], true);
                else
                    put_elem(f, kv, i);
            }
            break;
        }
        size_t chars = 0;
        uint64_t i = 0;
        for (; i < kv->arr_n && i < ARR_SHOW && chars < ARR_CHARS; i++) {
            fputs(i ? ", " : " ", f);
            chars += 2 + (is_str ? put_str(f, kv->arr_str[i], false) : put_elem(f, kv, i));
        }
        if (i < kv->arr_n) fprintf(f, ", … (%" PRIu64 " more)", kv->arr_n - i);
        break;
    }
    default: fprintf(f, "?"); break;
    }
}

/* Tensor name, escaped, into buf (names are normally plain ASCII). */
static const char *name_of(char *buf, size_t n, pi_gguf_str s) {
    size_t o = 0;
    for (uint64_t i = 0; i < s.len && o + 5 < n; i++) {
        unsigned char c = (unsigned char)s.data[i];
        if (c < 0x20 || c == 0x7f || c == '\\')
            o += (size_t)snprintf(buf + o, n - o, "\\x%02x", c);
        else
            buf[o++] = (char)c;
    }
    buf[o] = '\0';
    return buf;
}

static void human(char *buf, size_t n, uint64_t bytes) {
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 6) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, n, "%" PRIu64 " B", bytes);
    else
        snprintf(buf, n, "%.2f %s", v, unit[u]);
}

/* What the totals and the summary show, computed once for the text and the JSON. */
typedef struct {
    /* totals, per type id: tensors, elements, bytes */
    uint64_t cnt[PI_TYPE_COUNT], nel[PI_TYPE_COUNT], byt[PI_TYPE_COUNT];
    uint64_t params, bytes;
    /* the model; strings of length 0 and numbers -1 when the file does not say */
    pi_gguf_str arch, name, act;
    int64_t n_layer, n_embd, n_ff, n_head, n_head_kv, n_expert, n_expert_used, n_vocab, n_ctx_train;
    int64_t predictor_layers, bundle_layers, bundle_stride;
    int reordered;  /* -1 when the file does not say */
} summary;

static pi_gguf_str str_of(const pi_gguf *g, const char *key) {
    const pi_gguf_kv *kv = pi_gguf_find_kv(g, key);
    return kv && kv->type == PI_GGUF_STRING ? kv->str : (pi_gguf_str){0, NULL};
}

/* An integer key, or -1 when absent or not a non-negative integer. */
static int64_t int_of(const pi_gguf *g, const char *key) {
    const pi_gguf_kv *kv = pi_gguf_find_kv(g, key);
    if (!kv) return -1;
    switch (kv->type) {
    case PI_GGUF_UINT8:
    case PI_GGUF_UINT16:
    case PI_GGUF_UINT32:
    case PI_GGUF_UINT64: return kv->val.u64 <= INT64_MAX ? (int64_t)kv->val.u64 : -1;
    case PI_GGUF_INT8:
    case PI_GGUF_INT16:
    case PI_GGUF_INT32:
    case PI_GGUF_INT64: return kv->val.i64 >= 0 ? kv->val.i64 : -1;
    default: return -1;
    }
}

/* "<arch>.<akey>" of the file's architecture, or -1. */
static int64_t arch_int(const pi_gguf *g, pi_gguf_str arch, const char *akey) {
    char key[256];
    if (!arch.len || arch.len > 128) return -1;
    snprintf(key, sizeof key, "%.*s.%s", (int)arch.len, arch.data, akey);
    return int_of(g, key);
}

static void summarize(const pi_gguf *g, summary *sm) {
    memset(sm, 0, sizeof *sm);
    for (int64_t i = 0; i < pi_gguf_n_tensors(g); i++) {
        const pi_gguf_tensor *t = pi_gguf_tensor_at(g, i);
        uint64_t e = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) e *= (uint64_t)t->ne[d]; /* fits: the reader checked the product */
        if (t->type < PI_TYPE_COUNT) {
            sm->cnt[t->type]++;
            sm->nel[t->type] += e;
            sm->byt[t->type] += t->nbytes;
        }
        sm->params += e;
        sm->bytes += t->nbytes;
        sm->predictor_layers += pi_tensor_layer(t->name, PI_TN_FC1) >= 0;
        sm->bundle_layers += pi_tensor_layer(t->name, PI_TN_FFN_BUNDLE) >= 0;
    }
    sm->arch = str_of(g, PI_KEY_GENERAL_ARCHITECTURE);
    sm->name = str_of(g, PI_KEY_GENERAL_NAME);
    sm->act = str_of(g, PI_KEY_FFN_ACTIVATION);
    sm->n_layer = arch_int(g, sm->arch, PI_AKEY_BLOCK_COUNT);
    sm->n_embd = arch_int(g, sm->arch, PI_AKEY_EMBEDDING_LENGTH);
    sm->n_ff = arch_int(g, sm->arch, PI_AKEY_FEED_FORWARD_LENGTH);
    sm->n_head = arch_int(g, sm->arch, PI_AKEY_HEAD_COUNT);
    sm->n_head_kv = arch_int(g, sm->arch, PI_AKEY_HEAD_COUNT_KV);
    sm->n_expert = arch_int(g, sm->arch, PI_AKEY_EXPERT_COUNT);
    sm->n_expert_used = arch_int(g, sm->arch, PI_AKEY_EXPERT_USED_COUNT);
    sm->n_ctx_train = arch_int(g, sm->arch, PI_AKEY_CONTEXT_LENGTH);
    sm->n_vocab = arch_int(g, sm->arch, PI_AKEY_VOCAB_SIZE);
    const pi_gguf_kv *tokens = pi_gguf_find_kv(g, PI_KEY_TOKENIZER_TOKENS);
    const pi_gguf_tensor *embd = pi_gguf_find_tensor(g, PI_TN_TOKEN_EMBD);
    if (sm->n_vocab < 0 && tokens && tokens->type == PI_GGUF_ARRAY && tokens->arr_n <= INT64_MAX)
        sm->n_vocab = (int64_t)tokens->arr_n;
    if (sm->n_vocab < 0 && embd && embd->n_dims == 2) sm->n_vocab = embd->ne[1];
    sm->bundle_stride = int_of(g, PI_KEY_BUNDLE_STRIDE);
    const pi_gguf_kv *re = pi_gguf_find_kv(g, PI_KEY_REORDERED);
    sm->reordered = re && re->type == PI_GGUF_BOOL ? (int)(re->val.u64 != 0) : -1;
}

static void print_summary(FILE *f, const summary *sm) {
    if (!sm->arch.len) return;
    fprintf(f, "\nsummary:\n  architecture: ");
    put_escaped(f, sm->arch.data, sm->arch.len, STR_MAX);
    fputc('\n', f);
    if (sm->name.len) {
        fprintf(f, "  name:         ");
        put_str(f, sm->name, false);
        fputc('\n', f);
    }
    if (sm->n_layer >= 0) {
        fprintf(f, "  layers:       %" PRId64, sm->n_layer);
        const char *sep = " (";
        const struct {
            const char *what;
            int64_t v;
        } dims[] = {{"n_embd", sm->n_embd}, {"n_ff", sm->n_ff}, {"heads", sm->n_head}, {"KV heads", sm->n_head_kv}};
        for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++) {
            if (dims[k].v < 0) continue;
            fprintf(f, "%s%s %" PRId64, sep, dims[k].what, dims[k].v);
            sep = ", ";
        }
        fprintf(f, "%s\n", strcmp(sep, " (") ? ")" : "");
    }
    if (sm->n_expert > 0) fprintf(f, "  experts:      %" PRId64 " (%" PRId64 " used)\n", sm->n_expert, sm->n_expert_used);
    if (sm->n_vocab >= 0) fprintf(f, "  vocab:        %" PRId64 "\n", sm->n_vocab);
    if (sm->n_ctx_train >= 0) fprintf(f, "  context:      %" PRId64 "\n", sm->n_ctx_train);
    if (sm->act.len) {
        fprintf(f, "  activation:   ");
        put_escaped(f, sm->act.data, sm->act.len, STR_MAX);
        fputc('\n', f);
    }
    if (sm->n_layer >= 0) {
        fprintf(f, "  predictors:   %" PRId64 " of %" PRId64 " layers\n", sm->predictor_layers, sm->n_layer);
        fprintf(f, "  bundles:      %" PRId64 " of %" PRId64 " layers", sm->bundle_layers, sm->n_layer);
        if (sm->bundle_stride >= 0) fprintf(f, ", stride %" PRId64 " bytes", sm->bundle_stride);
        fputc('\n', f);
    }
    if (sm->reordered >= 0) fprintf(f, "  reordered:    %s\n", sm->reordered ? "yes" : "no");
}

static void print_report(const char *path, const pi_gguf *g, const summary *sm, bool all) {
    FILE *f = stdout;
    char h[32];
    human(h, sizeof h, pi_gguf_file_size(g));
    fprintf(f, "file:        %s\n", path);
    fprintf(f, "size:        %" PRIu64 " bytes (%s)\n", pi_gguf_file_size(g), h);
    fprintf(f, "magic:       %s\n", pi_gguf_is_pwri(g) ? "PWRI" : "GGUF");
    fprintf(f, "version:     %u\n", pi_gguf_version(g));
    fprintf(f, "alignment:   %" PRIu64 "\n", pi_gguf_alignment(g));
    fprintf(f, "data offset: %" PRIu64 "\n", pi_gguf_data_offset(g));
    fprintf(f, "kv:          %" PRId64 "\n", pi_gguf_n_kv(g));
    fprintf(f, "tensors:     %" PRId64 "\n", pi_gguf_n_tensors(g));

    fprintf(f, "\nkey-values:\n");
    int kw = 0;
    for (int64_t i = 0; i < pi_gguf_n_kv(g); i++) {
        uint64_t l = pi_gguf_kv_at(g, i)->key.len;
        if (l > (uint64_t)kw) kw = l > 48 ? 48 : (int)l;
    }
    for (int64_t i = 0; i < pi_gguf_n_kv(g); i++) {
        const pi_gguf_kv *kv = pi_gguf_kv_at(g, i);
        fputs("  ", f);
        size_t w = put_escaped(f, kv->key.data, kv->key.len, 0);
        fprintf(f, "%*s %-4s = ", w < (size_t)kw ? kw - (int)w : 0, "", pi_gguf_vtype_name(kv->type));
        put_value(f, kv, all);
        fputc('\n', f);
    }

    int64_t nt = pi_gguf_n_tensors(g);
    if (nt == 0) {
        fprintf(f, "\nno tensors\n");
        print_summary(f, sm);
        return;
    }
    char nb[256];
    int nw = 4;
    for (int64_t i = 0; i < nt; i++) {
        int l = (int)strlen(name_of(nb, sizeof nb, pi_gguf_tensor_at(g, i)->name));
        if (l > nw) nw = l;
    }
    fprintf(f, "\ntensors:\n  %5s  %-*s  %-7s  %-20s %12s %12s\n", "#", nw, "name", "type", "shape", "offset", "bytes");
    for (int64_t i = 0; i < nt; i++) {
        const pi_gguf_tensor *t = pi_gguf_tensor_at(g, i);
        char shape[128];
        size_t o = 0;
        for (uint32_t d = 0; d < t->n_dims; d++)
            o += (size_t)snprintf(shape + o, sizeof shape - o, d ? " × %" PRId64 : "%" PRId64, t->ne[d]);
        /* "×" is 2 bytes but one column: pad by characters, not bytes. */
        int pad = 20 - (int)(o - (t->n_dims - 1));
        fprintf(f, "  %5" PRId64 "  %-*s  %-7s  %s%*s %12" PRIu64 " %12" PRIu64 "\n", i, nw,
                name_of(nb, sizeof nb, t->name), pi_type_name(t->type), shape, pad > 0 ? pad : 0, "",
                pi_gguf_data_offset(g) + t->offset, t->nbytes);
    }

    fprintf(f, "\ntotals:\n");
    fprintf(f, "  parameters: %" PRIu64 "\n", sm->params);
    for (uint32_t ty = 0; ty < PI_TYPE_COUNT; ty++) {
        if (!sm->cnt[ty]) continue;
        human(h, sizeof h, sm->byt[ty]);
        fprintf(f, "  %-7s %5" PRIu64 " tensors %14" PRIu64 " params %14" PRIu64 " bytes (%s)\n", pi_type_name(ty),
                sm->cnt[ty], sm->nel[ty], sm->byt[ty], h);
    }
    human(h, sizeof h, sm->bytes);
    fprintf(f, "  all     %5" PRId64 " tensors %14" PRIu64 " params %14" PRIu64 " bytes (%s)", nt, sm->params,
            sm->bytes, h);
    if (sm->params) fprintf(f, ", %.2f bits per weight", 8.0 * (double)sm->bytes / (double)sm->params);
    fputc('\n', f);
    print_summary(f, sm);
}

#ifdef PI_HAVE_CJSON
/* Element i of a scalar array as JSON. */
static cJSON *json_elem(const pi_gguf_kv *kv, uint64_t i) {
    size_t es = pi_gguf_vtype_size(kv->arr_type);
    uint64_t v = ld((const uint8_t *)kv->arr_data + i * es, es);
    switch (kv->arr_type) {
    case PI_GGUF_UINT8:
    case PI_GGUF_UINT16:
    case PI_GGUF_UINT32:
    case PI_GGUF_UINT64: return cJSON_CreateNumber((double)v);
    case PI_GGUF_INT8: return cJSON_CreateNumber((int8_t)v);
    case PI_GGUF_INT16: return cJSON_CreateNumber((int16_t)v);
    case PI_GGUF_INT32: return cJSON_CreateNumber((int32_t)v);
    case PI_GGUF_INT64: return cJSON_CreateNumber((double)(int64_t)v);
    case PI_GGUF_BOOL: return cJSON_CreateBool(v != 0);
    case PI_GGUF_FLOAT32: {
        uint32_t u = (uint32_t)v;
        float x;
        memcpy(&x, &u, 4);
        return cJSON_CreateNumber((double)x);
    }
    case PI_GGUF_FLOAT64: {
        double x;
        memcpy(&x, &v, 8);
        return cJSON_CreateNumber(x);
    }
    default: return cJSON_CreateNull();
    }
}

/* Add item under key to an object, or (key NULL) at the end of an array;
   false, with item freed, when item is NULL or cannot be added. Everything
   is attached as soon as it is made, so freeing the root frees it all. */
static bool put(cJSON *to, const char *key, cJSON *item) {
    bool ok = item && (key ? cJSON_AddItemToObject(to, key, item) : cJSON_AddItemToArray(to, item));
    if (!ok) cJSON_Delete(item);
    return ok;
}

/* A new object or array attached to `to`, or NULL. */
static cJSON *child(cJSON *to, const char *key, bool array) {
    cJSON *c = array ? cJSON_CreateArray() : cJSON_CreateObject();
    return put(to, key, c) ? c : NULL;
}

static bool put_num(cJSON *to, const char *key, double v) { return put(to, key, cJSON_CreateNumber(v)); }

static cJSON *json_str(pi_gguf_str s) { return report_json_string(s.data, s.len); }

/* A string, or null when the file does not say. */
static cJSON *json_str_or_null(pi_gguf_str s) { return s.len ? json_str(s) : cJSON_CreateNull(); }

/* A count, or null when negative (the file does not say). */
static cJSON *json_count(int64_t v) { return v >= 0 ? cJSON_CreateNumber((double)v) : cJSON_CreateNull(); }

/* meta[key] = {"index", "type", "value"}, arrays also "element_type" and
   "length"; the tokenizer's arrays have no "value" unless all. */
static bool json_kv(cJSON *meta, const char *key, const pi_gguf_kv *kv, int64_t index, bool all) {
    cJSON *o = child(meta, key, false);
    if (!o || !put_num(o, "index", (double)index) || !put(o, "type", cJSON_CreateString(pi_gguf_vtype_name(kv->type))))
        return false;
    switch (kv->type) {
    case PI_GGUF_UINT8:
    case PI_GGUF_UINT16:
    case PI_GGUF_UINT32:
    case PI_GGUF_UINT64: return put_num(o, "value", (double)kv->val.u64);
    case PI_GGUF_INT8:
    case PI_GGUF_INT16:
    case PI_GGUF_INT32:
    case PI_GGUF_INT64: return put_num(o, "value", (double)kv->val.i64);
    case PI_GGUF_FLOAT32:
    case PI_GGUF_FLOAT64: return put_num(o, "value", kv->val.f64); /* NaN and infinities: null */
    case PI_GGUF_BOOL: return put(o, "value", cJSON_CreateBool(kv->val.u64 != 0));
    case PI_GGUF_STRING: return put(o, "value", json_str(kv->str));
    case PI_GGUF_ARRAY: {
        if (!put(o, "element_type", cJSON_CreateString(pi_gguf_vtype_name(kv->arr_type))) ||
            !put_num(o, "length", (double)kv->arr_n))
            return false;
        if (!all && pi_gguf_str_has_prefix(kv->key, PI_KEY_TOKENIZER_PREFIX)) return true;
        cJSON *v = child(o, "value", true);
        for (uint64_t i = 0; v && i < kv->arr_n; i++)
            if (!put(v, NULL, kv->arr_type == PI_GGUF_STRING ? json_str(kv->arr_str[i]) : json_elem(kv, i)))
                return false;
        return v != NULL;
    }
    default: return put(o, "value", cJSON_CreateNull());
    }
}

static bool json_tensor(cJSON *tensors, const pi_gguf *g, const pi_gguf_tensor *t, int64_t index) {
    cJSON *o = child(tensors, NULL, false);
    if (!o || !put_num(o, "index", (double)index) || !put(o, "name", json_str(t->name)) ||
        !put(o, "type", cJSON_CreateString(pi_type_name(t->type))))
        return false;
    cJSON *shape = child(o, "shape", true);
    uint64_t e = 1;
    for (uint32_t d = 0; shape && d < t->n_dims; d++) {
        if (!put_num(shape, NULL, (double)t->ne[d])) return false;
        e *= (uint64_t)t->ne[d]; /* fits: the reader checked the product */
    }
    return shape && put_num(o, "n_elements", (double)e) &&
           put_num(o, "offset", (double)(pi_gguf_data_offset(g) + t->offset)) && put_num(o, "bytes", (double)t->nbytes);
}

static bool json_totals(cJSON *root, const summary *sm, int64_t nt) {
    cJSON *o = child(root, "totals", false);
    if (!o || !put_num(o, "tensors", (double)nt) || !put_num(o, "parameters", (double)sm->params) ||
        !put_num(o, "bytes", (double)sm->bytes) ||
        !put(o, "bits_per_weight",
             sm->params ? cJSON_CreateNumber(8.0 * (double)sm->bytes / (double)sm->params) : cJSON_CreateNull()))
        return false;
    cJSON *types = child(o, "types", true);
    for (uint32_t ty = 0; types && ty < PI_TYPE_COUNT; ty++) {
        if (!sm->cnt[ty]) continue;
        cJSON *t = child(types, NULL, false);
        if (!t || !put(t, "type", cJSON_CreateString(pi_type_name(ty))) || !put_num(t, "tensors", (double)sm->cnt[ty]) ||
            !put_num(t, "parameters", (double)sm->nel[ty]) || !put_num(t, "bytes", (double)sm->byt[ty]))
            return false;
    }
    return types != NULL;
}

static bool json_summary(cJSON *root, const summary *sm) {
    cJSON *o = child(root, "summary", false);
    return o && put(o, "architecture", json_str_or_null(sm->arch)) && put(o, "name", json_str_or_null(sm->name)) &&
           put(o, "n_layer", json_count(sm->n_layer)) && put(o, "n_embd", json_count(sm->n_embd)) &&
           put(o, "n_ff", json_count(sm->n_ff)) && put(o, "n_head", json_count(sm->n_head)) &&
           put(o, "n_head_kv", json_count(sm->n_head_kv)) && put(o, "n_expert", json_count(sm->n_expert)) &&
           put(o, "n_expert_used", json_count(sm->n_expert_used)) && put(o, "n_vocab", json_count(sm->n_vocab)) &&
           put(o, "n_ctx_train", json_count(sm->n_ctx_train)) && put(o, "activation", json_str_or_null(sm->act)) &&
           put_num(o, "predictor_layers", (double)sm->predictor_layers) &&
           put_num(o, "bundle_layers", (double)sm->bundle_layers) &&
           put(o, "bundle_stride", json_count(sm->bundle_stride)) &&
           put(o, "reordered", sm->reordered >= 0 ? cJSON_CreateBool(sm->reordered) : cJSON_CreateNull());
}

/* The whole report as one JSON object: the header, "metadata" (an object by
   key, in file order: the reader refuses duplicate keys), "tensors" (an
   array in file order), "totals" and "summary". NULL when out of memory. */
static cJSON *json_report(const char *path, const pi_gguf *g, const summary *sm, bool all) {
    cJSON *root = cJSON_CreateObject();
    bool ok = root && put(root, "file", report_json_string(path, strlen(path))) &&
              put_num(root, "size", (double)pi_gguf_file_size(g)) &&
              put(root, "magic", cJSON_CreateString(pi_gguf_is_pwri(g) ? "PWRI" : "GGUF")) &&
              put_num(root, "version", pi_gguf_version(g)) && put_num(root, "alignment", (double)pi_gguf_alignment(g)) &&
              put_num(root, "data_offset", (double)pi_gguf_data_offset(g)) &&
              put_num(root, "n_kv", (double)pi_gguf_n_kv(g)) && put_num(root, "n_tensors", (double)pi_gguf_n_tensors(g));
    cJSON *meta = ok ? child(root, "metadata", false) : NULL;
    ok = meta != NULL;
    for (int64_t i = 0; ok && i < pi_gguf_n_kv(g); i++) {
        const pi_gguf_kv *kv = pi_gguf_kv_at(g, i);
        char *key = report_json_key(kv->key.data, kv->key.len);
        /* keys made valid UTF-8 may meet an earlier key: name such a key by its index too */
        char *alt = NULL;
        if (key && (strlen(key) != kv->key.len || memcmp(key, kv->key.data, kv->key.len)) &&
            cJSON_GetObjectItemCaseSensitive(meta, key) && (alt = malloc(strlen(key) + 32)))
            sprintf(alt, "%s (kv %" PRId64 ")", key, i);
        ok = key && json_kv(meta, alt ? alt : key, kv, i, all);
        free(alt);
        free(key);
    }
    cJSON *tensors = ok ? child(root, "tensors", true) : NULL;
    ok = tensors != NULL;
    for (int64_t i = 0; ok && i < pi_gguf_n_tensors(g); i++) ok = json_tensor(tensors, g, pi_gguf_tensor_at(g, i), i);
    ok = ok && json_totals(root, sm, pi_gguf_n_tensors(g)) && json_summary(root, sm);
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}
#endif

int cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    bool all = false, json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--all")) {
            all = true;
        } else if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "pinfer: inspect: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (path) {
            fprintf(stderr, "pinfer: inspect: one FILE expected\n");
            usage(stderr);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    if (json && !report_have_json()) {
        fprintf(stderr, "pinfer: inspect: --json needs a pinfer built with cJSON (libcjson-dev)\n");
        return 2;
    }
    pi_gguf *g = NULL;
    if (pi_gguf_open(path, &g) != PI_OK) {
        fprintf(stderr, "pinfer: inspect: %s\n", pi_last_error());
        return 1;
    }
    summary sm;
    summarize(g, &sm);
    bool ok = true;
#ifdef PI_HAVE_CJSON
    if (json) {
        cJSON *doc = json_report(path, g, &sm, all);
        ok = doc && report_json_print(doc, false, stdout);
        cJSON_Delete(doc);
    }
#endif
    if (!json) print_report(path, g, &sm, all);
    pi_gguf_close(g);
    if (!ok || fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "pinfer: inspect: cannot write the report%s\n", ok ? "" : " (out of memory?)");
        return 1;
    }
    return 0;
}
