/*
 * report.h — machine-readable output of the tools (bench -o FMT): records,
 * each a list of named fields, collected during a run and written at its end
 * as a JSON array, JSON lines, CSV or a markdown table.
 *
 * Every record carries every column: the columns are the union of the
 * fields of all records in the order they first appear, and a field a record
 * lacks is null in JSON and empty in CSV and markdown. JSON is made with
 * cJSON (PI_HAVE_CJSON); without it json and jsonl are refused when parsed,
 * and CSV and markdown still work. Numeric arrays appear in JSON only;
 * markdown shows only the cells added with report_md, which the caller
 * formats for people (llama-bench's table does the same).
 *
 * Not thread-safe; nothing here exits. Out of memory marks the report
 * failed and report_write returns false.
 */
#ifndef PI_TOOLS_REPORT_H
#define PI_TOOLS_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef PI_HAVE_CJSON
#include <cjson/cJSON.h>
#endif

typedef enum report_fmt {
    REPORT_TEXT = 0, /* the tool's own human report: no records */
    REPORT_JSON,     /* an array of objects */
    REPORT_JSONL,    /* one object per line */
    REPORT_CSV,      /* a header row, then one row per record */
    REPORT_MD,       /* a markdown table */
} report_fmt;

/* -o's value: text, json, jsonl, csv or md. Prints "pinfer: CMD: ..." and
   returns false for anything else, and for json/jsonl in a build without
   cJSON; the caller exits with status 2. */
bool report_fmt_parse(const char *cmd, const char *s, report_fmt *out);

/* Whether this build writes JSON (PI_HAVE_CJSON). */
bool report_have_json(void);

typedef struct report report;

/* An empty report in fmt (not REPORT_TEXT); NULL when out of memory. */
report *report_create(report_fmt fmt);
void report_free(report *r); /* accepts NULL */

/* Start a new record; the fields below go to it. Keys are not copied: they
   must outlive the report (string literals). A key set twice in a record
   keeps its last value. */
void report_begin(report *r);
void report_str(report *r, const char *key, const char *v); /* copied; NULL: null */
void report_int(report *r, const char *key, int64_t v);
void report_num(report *r, const char *key, double v); /* non-finite: null */
void report_bool(report *r, const char *key, bool v);
void report_null(report *r, const char *key);
/* n numbers (copied; non-finite ones are null), in JSON only. */
void report_nums(report *r, const char *key, const double *v, size_t n);
/* A markdown cell under the column title, printf-formatted; markdown only. */
void report_md(report *r, const char *title, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A line after the markdown table (e.g. the build); markdown only. */
void report_md_footer(report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Write every record to f in the report's format and flush f. False when
   out of memory (now or while collecting) or f cannot be written. */
bool report_write(report *r, FILE *f);

#ifdef PI_HAVE_CJSON
/* A JSON string of len bytes that may hold anything: invalid UTF-8 and NUL
   bytes become U+FFFD, so the document stays valid. NULL when out of
   memory. The key variant returns a malloc'd NUL-terminated copy (free it). */
cJSON *report_json_string(const char *s, size_t len);
char *report_json_key(const char *s, size_t len);

/* Print item to f (indented unless compact), followed by a newline, and
   flush. False when out of memory or f cannot be written. */
bool report_json_print(const cJSON *item, bool compact, FILE *f);
#endif

#endif
