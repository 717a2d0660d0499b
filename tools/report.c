/*
 * report.c — records written as JSON (cJSON), JSON lines, CSV or markdown.
 *
 * Records are kept until report_write so that every record can carry every
 * column. Strings are copied; keys and markdown titles are borrowed.
 */
#include "report.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef enum { CELL_NULL, CELL_STR, CELL_INT, CELL_NUM, CELL_BOOL, CELL_NUMS, CELL_MD } cell_kind;

typedef struct {
    const char *key; /* borrowed; the title of a CELL_MD */
    cell_kind kind;
    char *s;         /* CELL_STR, CELL_MD: owned */
    int64_t i;       /* CELL_INT, CELL_BOOL */
    double d;        /* CELL_NUM */
    double *v;       /* CELL_NUMS: n values, owned */
    size_t n;
} cell;

typedef struct {
    cell *c;
    size_t n, cap;
} record;

struct report {
    report_fmt fmt;
    record *rows;
    size_t n, cap;
    char *footer;    /* markdown only */
    bool failed;    /* out of memory, or a field before any record */
};

bool report_have_json(void) {
#ifdef PI_HAVE_CJSON
    return true;
#else
    return false;
#endif
}

bool report_fmt_parse(const char *cmd, const char *s, report_fmt *out) {
    static const struct {
        const char *name;
        report_fmt fmt;
    } k_fmts[] = {{"text", REPORT_TEXT}, {"json", REPORT_JSON}, {"jsonl", REPORT_JSONL},
                  {"csv", REPORT_CSV},   {"md", REPORT_MD}};
    for (size_t k = 0; k < sizeof k_fmts / sizeof k_fmts[0]; k++) {
        if (strcmp(s, k_fmts[k].name)) continue;
        if ((k_fmts[k].fmt == REPORT_JSON || k_fmts[k].fmt == REPORT_JSONL) && !report_have_json()) {
            fprintf(stderr, "pinfer: %s: -o %s needs a pinfer built with cJSON (libcjson-dev); csv and md work "
                            "without it\n", cmd, s);
            return false;
        }
        *out = k_fmts[k].fmt;
        return true;
    }
    fprintf(stderr, "pinfer: %s: -o expects text, json, jsonl, csv or md, got '%s'\n", cmd, s);
    return false;
}

report *report_create(report_fmt fmt) {
    report *r = calloc(1, sizeof *r);
    if (r) r->fmt = fmt;
    return r;
}

static void cell_free(cell *c) {
    free(c->s);
    free(c->v);
}

void report_free(report *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n; i++) {
        for (size_t k = 0; k < r->rows[i].n; k++) cell_free(&r->rows[i].c[k]);
        free(r->rows[i].c);
    }
    free(r->rows);
    free(r->footer);
    free(r);
}

void report_begin(report *r) {
    if (r->failed) return;
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 4;
        record *nr = realloc(r->rows, cap * sizeof *nr);
        if (!nr) {
            r->failed = true;
            return;
        }
        r->rows = nr;
        r->cap = cap;
    }
    r->rows[r->n++] = (record){NULL, 0, 0};
}

/* The cell for key in the current record (replacing an earlier one of the
   same key and kind family), or NULL when out of memory or no record. */
static cell *add(report *r, const char *key, bool md) {
    if (r->failed || !r->n) {
        r->failed = true;
        return NULL;
    }
    record *row = &r->rows[r->n - 1];
    for (size_t k = 0; k < row->n; k++) {
        cell *c = &row->c[k];
        if ((c->kind == CELL_MD) == md && !strcmp(c->key, key)) {
            cell_free(c);
            *c = (cell){.key = key};
            return c;
        }
    }
    if (row->n == row->cap) {
        size_t cap = row->cap ? 2 * row->cap : 32;
        cell *nc = realloc(row->c, cap * sizeof *nc);
        if (!nc) {
            r->failed = true;
            return NULL;
        }
        row->c = nc;
        row->cap = cap;
    }
    cell *c = &row->c[row->n++];
    *c = (cell){.key = key};
    return c;
}

void report_str(report *r, const char *key, const char *v) {
    cell *c = add(r, key, false);
    if (!c) return;
    if (!v) return; /* CELL_NULL */
    if (!(c->s = strdup(v))) {
        r->failed = true;
        return;
    }
    c->kind = CELL_STR;
}

void report_int(report *r, const char *key, int64_t v) {
    cell *c = add(r, key, false);
    if (c) c->kind = CELL_INT, c->i = v;
}

void report_num(report *r, const char *key, double v) {
    cell *c = add(r, key, false);
    if (c && isfinite(v)) c->kind = CELL_NUM, c->d = v;
}

void report_bool(report *r, const char *key, bool v) {
    cell *c = add(r, key, false);
    if (c) c->kind = CELL_BOOL, c->i = v;
}

void report_null(report *r, const char *key) { add(r, key, false); }

void report_nums(report *r, const char *key, const double *v, size_t n) {
    cell *c = add(r, key, false);
    if (!c) return;
    if (n && !(c->v = malloc(n * sizeof *v))) {
        r->failed = true;
        return;
    }
    if (n) memcpy(c->v, v, n * sizeof *v);
    c->kind = CELL_NUMS;
    c->n = n;
}

/* A malloc'd vprintf. */
static char *vformat(const char *fmt, va_list ap) {
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s) vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

void report_md(report *r, const char *title, const char *fmt, ...) {
    if (r->fmt != REPORT_MD) return;
    cell *c = add(r, title, true);
    if (!c) return;
    va_list ap;
    va_start(ap, fmt);
    c->s = vformat(fmt, ap);
    va_end(ap);
    c->kind = CELL_MD;
    if (!c->s) r->failed = true;
}

void report_md_footer(report *r, const char *fmt, ...) {
    if (r->fmt != REPORT_MD) return;
    free(r->footer);
    va_list ap;
    va_start(ap, fmt);
    r->footer = vformat(fmt, ap);
    va_end(ap);
    if (!r->footer) r->failed = true;
}

/* ---- columns ---- */

typedef struct {
    const char **key;
    size_t n;
} columns;

/* The union of the keys of the cells of every record (markdown cells or the
   others, arrays left out when scalars), in the order they first appear. */
static bool collect_columns(const report *r, bool md, bool scalars, columns *cols) {
    size_t total = 0;
    for (size_t i = 0; i < r->n; i++) total += r->rows[i].n;
    cols->n = 0;
    cols->key = malloc((total ? total : 1) * sizeof *cols->key);
    if (!cols->key) return false;
    for (size_t i = 0; i < r->n; i++)
        for (size_t k = 0; k < r->rows[i].n; k++) {
            const cell *c = &r->rows[i].c[k];
            if ((c->kind == CELL_MD) != md || (scalars && c->kind == CELL_NUMS)) continue;
            bool seen = false;
            for (size_t j = 0; j < cols->n && !seen; j++) seen = !strcmp(cols->key[j], c->key);
            if (!seen) cols->key[cols->n++] = c->key;
        }
    return true;
}

static const cell *find(const record *row, const char *key, bool md) {
    for (size_t k = 0; k < row->n; k++)
        if ((row->c[k].kind == CELL_MD) == md && !strcmp(row->c[k].key, key)) return &row->c[k];
    return NULL;
}

/* The shortest of %.15g and %.17g that reads back as v. */
static void fmt_num(char *buf, size_t n, double v) {
    snprintf(buf, n, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, n, "%.17g", v);
}

/* ---- CSV ---- */

/* A CSV field: strings quoted with doubled quotes (as llama-bench writes
   them), numbers bare, booleans 0/1, null empty. */
static void csv_cell(FILE *f, const cell *c) {
    char buf[40];
    if (!c) return;
    switch (c->kind) {
    case CELL_STR:
        fputc('"', f);
        for (const char *p = c->s; *p; p++) {
            if (*p == '"') fputc('"', f);
            fputc(*p, f);
        }
        fputc('"', f);
        break;
    case CELL_INT: fprintf(f, "%lld", (long long)c->i); break;
    case CELL_BOOL: fputc(c->i ? '1' : '0', f); break;
    case CELL_NUM:
        fmt_num(buf, sizeof buf, c->d);
        fputs(buf, f);
        break;
    default: break;
    }
}

/* Arrays have no column, as in llama-bench's CSV. */
static bool write_csv(const report *r, FILE *f) {
    columns cols;
    if (!collect_columns(r, false, true, &cols)) return false;
    if (!cols.n) { /* no records: nothing to head */
        free(cols.key);
        return true;
    }
    for (size_t j = 0; j < cols.n; j++) fprintf(f, "%s%s", j ? "," : "", cols.key[j]);
    fputc('\n', f);
    for (size_t i = 0; i < r->n; i++) {
        for (size_t j = 0; j < cols.n; j++) {
            if (j) fputc(',', f);
            csv_cell(f, find(&r->rows[i], cols.key[j], false));
        }
        fputc('\n', f);
    }
    free(cols.key);
    return true;
}

/* ---- markdown ---- */

/* Display width of UTF-8 text: one column per character. */
static size_t text_width(const char *s) {
    size_t w = 0;
    for (; *s; s++) w += ((unsigned char)*s & 0xc0) != 0x80;
    return w;
}

/* A markdown cell's text: '|' would end the cell, so it is escaped. */
static void md_text(FILE *f, const char *s, size_t width, bool right) {
    size_t w = text_width(s);
    for (const char *p = s; *p; p++) w += *p == '|';
    size_t pad = width > w ? width - w : 0;
    if (right) fprintf(f, "%*s", (int)pad, "");
    for (const char *p = s; *p; p++) {
        if (*p == '|') fputc('\\', f);
        fputc(*p, f);
    }
    if (!right) fprintf(f, "%*s", (int)pad, "");
}

static bool looks_numeric(const char *s) {
    if (*s == '-' || *s == '+') s++;
    return isdigit((unsigned char)*s);
}

static bool write_md(const report *r, FILE *f) {
    columns cols;
    if (!collect_columns(r, true, false, &cols)) return false;
    if (!cols.n) {
        free(cols.key);
        return true;
    }
    size_t *width = calloc(cols.n ? cols.n : 1, sizeof *width);
    bool *right = calloc(cols.n ? cols.n : 1, sizeof *right);
    if (!width || !right) {
        free(width);
        free(right);
        free(cols.key);
        return false;
    }
    for (size_t j = 0; j < cols.n; j++) {
        width[j] = text_width(cols.key[j]);
        right[j] = true;
        bool any = false;
        for (size_t i = 0; i < r->n; i++) {
            const cell *c = find(&r->rows[i], cols.key[j], true);
            if (!c || !*c->s) continue;
            size_t w = text_width(c->s);
            for (const char *p = c->s; *p; p++) w += *p == '|';
            if (w > width[j]) width[j] = w;
            right[j] &= looks_numeric(c->s);
            any = true;
        }
        right[j] &= any;
        if (width[j] < 3) width[j] = 3;
    }
    fputc('|', f);
    for (size_t j = 0; j < cols.n; j++) {
        fputc(' ', f);
        md_text(f, cols.key[j], width[j], right[j]);
        fputs(" |", f);
    }
    fputs("\n|", f);
    for (size_t j = 0; j < cols.n; j++) {
        fputc(' ', f);
        for (size_t k = 0; k + 1 < width[j]; k++) fputc('-', f);
        fputs(right[j] ? ": |" : "- |", f);
    }
    fputc('\n', f);
    for (size_t i = 0; i < r->n; i++) {
        fputc('|', f);
        for (size_t j = 0; j < cols.n; j++) {
            const cell *c = find(&r->rows[i], cols.key[j], true);
            fputc(' ', f);
            md_text(f, c ? c->s : "", width[j], right[j]);
            fputs(" |", f);
        }
        fputc('\n', f);
    }
    if (r->footer) fprintf(f, "\n%s\n", r->footer);
    free(width);
    free(right);
    free(cols.key);
    return true;
}

/* ---- JSON ---- */

#ifdef PI_HAVE_CJSON

/* Length of the valid UTF-8 character at s (n bytes left), or 0 when the
   bytes there are not one (overlong forms, surrogates and code points above
   U+10FFFF are not). */
static size_t utf8_char(const unsigned char *s, size_t n) {
    if (s[0] < 0x80) return 1;
    size_t len;
    uint32_t cp, min;
    if ((s[0] & 0xe0) == 0xc0) len = 2, cp = s[0] & 0x1f, min = 0x80;
    else if ((s[0] & 0xf0) == 0xe0) len = 3, cp = s[0] & 0x0f, min = 0x800;
    else if ((s[0] & 0xf8) == 0xf0) len = 4, cp = s[0] & 0x07, min = 0x10000;
    else return 0;
    if (len > n) return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

char *report_json_key(const char *s, size_t len) {
    /* at worst every byte becomes the 3 bytes of U+FFFD */
    if (len > (SIZE_MAX - 1) / 3) return NULL;
    char *out = malloc(3 * len + 1);
    if (!out) return NULL;
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t c = p[i] ? utf8_char(p + i, len - i) : 0;
        if (c) {
            memcpy(out + o, p + i, c);
            o += c;
            i += c;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    out[o] = '\0';
    return out;
}

cJSON *report_json_string(const char *s, size_t len) {
    char *t = report_json_key(s, len);
    cJSON *j = t ? cJSON_CreateString(t) : NULL;
    free(t);
    return j;
}

bool report_json_print(const cJSON *item, bool compact, FILE *f) {
    char *s = compact ? cJSON_PrintUnformatted(item) : cJSON_Print(item);
    if (!s) return false;
    fputs(s, f);
    fputc('\n', f);
    cJSON_free(s);
    return fflush(f) == 0 && !ferror(f);
}

static cJSON *json_cell(const cell *c) {
    if (!c) return cJSON_CreateNull();
    switch (c->kind) {
    case CELL_STR: return report_json_string(c->s, strlen(c->s));
    case CELL_INT: return cJSON_CreateNumber((double)c->i);
    case CELL_NUM: return cJSON_CreateNumber(c->d);
    case CELL_BOOL: return cJSON_CreateBool(c->i != 0);
    case CELL_NUMS: {
        cJSON *a = cJSON_CreateArray();
        for (size_t k = 0; a && k < c->n; k++) {
            cJSON *v = cJSON_CreateNumber(c->v[k]); /* cJSON writes null for NaN and infinities */
            if (!v || !cJSON_AddItemToArray(a, v)) {
                cJSON_Delete(v);
                cJSON_Delete(a);
                return NULL;
            }
        }
        return a;
    }
    default: return cJSON_CreateNull();
    }
}

static cJSON *json_record(const record *row, const columns *cols) {
    cJSON *o = cJSON_CreateObject();
    for (size_t j = 0; o && j < cols->n; j++) {
        cJSON *v = json_cell(find(row, cols->key[j], false));
        if (!v || !cJSON_AddItemToObject(o, cols->key[j], v)) {
            cJSON_Delete(v);
            cJSON_Delete(o);
            return NULL;
        }
    }
    return o;
}

static bool write_json(const report *r, FILE *f) {
    columns cols;
    if (!collect_columns(r, false, false, &cols)) return false;
    bool ok = true;
    cJSON *all = r->fmt == REPORT_JSON ? cJSON_CreateArray() : NULL;
    if (r->fmt == REPORT_JSON && !all) ok = false;
    for (size_t i = 0; ok && i < r->n; i++) {
        cJSON *o = json_record(&r->rows[i], &cols);
        if (!o) {
            ok = false;
        } else if (!all) { /* jsonl: a line per record */
            ok = report_json_print(o, true, f);
            cJSON_Delete(o);
        } else if (!cJSON_AddItemToArray(all, o)) {
            cJSON_Delete(o);
            ok = false;
        }
    }
    if (ok && all) ok = report_json_print(all, false, f);
    cJSON_Delete(all);
    free(cols.key);
    return ok;
}
#endif

bool report_write(report *r, FILE *f) {
    if (r->failed) return false;
    bool ok = false;
    switch (r->fmt) {
    case REPORT_CSV: ok = write_csv(r, f); break;
    case REPORT_MD: ok = write_md(r, f); break;
#ifdef PI_HAVE_CJSON
    case REPORT_JSON:
    case REPORT_JSONL: ok = write_json(r, f); break;
#endif
    default: break;
    }
    return ok && fflush(f) == 0 && !ferror(f);
}
