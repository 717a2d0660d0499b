/*
 * cmd_inspect.c — `pinfer inspect FILE [--all]`: print a GGUF file's header,
 * metadata and tensor table, and totals (parameters, bytes per type, bits per
 * weight).
 *
 * The report goes to stdout and nothing else does; errors go to stderr as
 * "pinfer: inspect: <message>". Exit 0 on success, 1 when the file cannot be
 * read or is malformed, 2 on bad usage. Strings from the file are printed
 * escaped (control bytes as \n, \t, \xNN; UTF-8 left as is) so a hostile file
 * cannot drive the terminal; long strings and arrays are cut unless --all.
 */
#include "cmds.h"
#include "gguf/gguf.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define STR_MAX   80 /* bytes of a string shown before cutting */
#define ARR_SHOW  8  /* array elements shown without --all */
#define ARR_CHARS 96 /* ... or fewer when they get long */

static void usage(FILE *f) {
    fprintf(f, "usage: pinfer inspect FILE [--all]\n"
               "  print a GGUF file's header, key-values, tensors and totals\n"
               "  --all   print long strings and every array element in full\n");
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

static void report(const char *path, const pi_gguf *g, bool all) {
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
        return;
    }
    char nb[256];
    int nw = 4;
    for (int64_t i = 0; i < nt; i++) {
        int l = (int)strlen(name_of(nb, sizeof nb, pi_gguf_tensor_at(g, i)->name));
        if (l > nw) nw = l;
    }
    fprintf(f, "\ntensors:\n  %5s  %-*s  %-7s  %-20s %12s %12s\n", "#", nw, "name", "type", "shape", "offset", "bytes");
    /* Totals per type id: tensors, elements, bytes. */
    uint64_t cnt[PI_TYPE_COUNT] = {0}, nel[PI_TYPE_COUNT] = {0}, byt[PI_TYPE_COUNT] = {0};
    uint64_t params = 0, bytes = 0;
    for (int64_t i = 0; i < nt; i++) {
        const pi_gguf_tensor *t = pi_gguf_tensor_at(g, i);
        char shape[128];
        size_t o = 0;
        uint64_t e = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            o += (size_t)snprintf(shape + o, sizeof shape - o, d ? " × %" PRId64 : "%" PRId64, t->ne[d]);
            e *= (uint64_t)t->ne[d]; /* fits: the reader checked the product */
        }
        /* "×" is 2 bytes but one column: pad by characters, not bytes. */
        int pad = 20 - (int)(o - (t->n_dims - 1));
        fprintf(f, "  %5" PRId64 "  %-*s  %-7s  %s%*s %12" PRIu64 " %12" PRIu64 "\n", i, nw,
                name_of(nb, sizeof nb, t->name), pi_type_name(t->type), shape, pad > 0 ? pad : 0, "",
                pi_gguf_data_offset(g) + t->offset, t->nbytes);
        if (t->type < PI_TYPE_COUNT) {
            cnt[t->type]++;
            nel[t->type] += e;
            byt[t->type] += t->nbytes;
        }
        params += e;
        bytes += t->nbytes;
    }

    fprintf(f, "\ntotals:\n");
    fprintf(f, "  parameters: %" PRIu64 "\n", params);
    for (uint32_t ty = 0; ty < PI_TYPE_COUNT; ty++) {
        if (!cnt[ty]) continue;
        human(h, sizeof h, byt[ty]);
        fprintf(f, "  %-7s %5" PRIu64 " tensors %14" PRIu64 " params %14" PRIu64 " bytes (%s)\n", pi_type_name(ty),
                cnt[ty], nel[ty], byt[ty], h);
    }
    human(h, sizeof h, bytes);
    fprintf(f, "  all     %5" PRId64 " tensors %14" PRIu64 " params %14" PRIu64 " bytes (%s)", nt, params, bytes, h);
    if (params) fprintf(f, ", %.2f bits per weight", 8.0 * (double)bytes / (double)params);
    fputc('\n', f);
}

int cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    bool all = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--all")) {
            all = true;
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
    pi_gguf *g = NULL;
    if (pi_gguf_open(path, &g) != PI_OK) {
        fprintf(stderr, "pinfer: inspect: %s\n", pi_last_error());
        return 1;
    }
    report(path, g, all);
    pi_gguf_close(g);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "pinfer: inspect: cannot write the report\n");
        return 1;
    }
    return 0;
}
