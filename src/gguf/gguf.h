/*
 * gguf.h — GGUF v2/v3 reader (mmap, zero-copy) and streamed writer.
 *
 * Reader: the whole file is mapped read-only; keys, strings, arrays and tensor
 * data are views into the mapping, valid until pi_gguf_close(). Every offset,
 * count and size is checked against the file length with overflow-safe
 * arithmetic before use, so a malformed file yields PI_ERR_FORMAT with a message
 * that names the field and its byte offset, never a crash, a hang or an
 * allocation larger than the file justifies. A pi_gguf is immutable after open
 * and may be shared by threads.
 *
 * Writer: metadata and tensor infos are collected first, then the header is
 * written and tensor data streamed in declaration order (in pieces if wanted),
 * with alignment padding inserted automatically. Nothing of the tensor data is
 * held in memory. The file goes through base/outfile.h: it is written to a
 * temporary beside the target and renamed over it only when complete, so a
 * failure or an abandoned writer leaves a previous file at the path untouched
 * (and an input mapped from that path is never truncated under its reader).
 */
#ifndef PI_GGUF_H
#define PI_GGUF_H

#include "../base/mapfile.h"
#include "../base/status.h"
#include "../kernels/types.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define PI_GGUF_MAGIC "GGUF"
#define PI_GGUF_MAGIC_PWRI "PWRI" /* PowerInfer's sparse variant: same layout */
#define PI_GGUF_DEFAULT_ALIGNMENT 32
#define PI_GGUF_MAX_DIMS 4

typedef enum pi_gguf_vtype {
    PI_GGUF_UINT8 = 0,
    PI_GGUF_INT8 = 1,
    PI_GGUF_UINT16 = 2,
    PI_GGUF_INT16 = 3,
    PI_GGUF_UINT32 = 4,
    PI_GGUF_INT32 = 5,
    PI_GGUF_FLOAT32 = 6,
    PI_GGUF_BOOL = 7,
    PI_GGUF_STRING = 8,
    PI_GGUF_ARRAY = 9,
    PI_GGUF_UINT64 = 10,
    PI_GGUF_INT64 = 11,
    PI_GGUF_FLOAT64 = 12,
    PI_GGUF_VTYPE_COUNT = 13,
} pi_gguf_vtype;

/* A string inside the mapping: not NUL-terminated. */
typedef struct pi_gguf_str {
    uint64_t len;
    const char *data;
} pi_gguf_str;

typedef struct pi_gguf_kv {
    pi_gguf_str key;
    pi_gguf_vtype type;
    uint64_t offset;          /* file offset of the key's length field */
    union {                   /* scalars, widened; for type != ARRAY/STRING */
        uint64_t u64;         /* UINT8/16/32/64, BOOL (0/1) */
        int64_t i64;          /* INT8/16/32/64 */
        double f64;           /* FLOAT32/64 */
    } val;
    pi_gguf_str str;          /* type == STRING */
    pi_gguf_vtype arr_type;   /* type == ARRAY: element type (never ARRAY) */
    uint64_t arr_n;           /* type == ARRAY: element count */
    const void *arr_data;     /* type == ARRAY of scalars: packed little-endian elements */
    const pi_gguf_str *arr_str; /* type == ARRAY of STRING: arr_n views (owned by the pi_gguf; NULL if arr_n is 0) */
} pi_gguf_kv;

typedef struct pi_gguf_tensor {
    pi_gguf_str name;
    uint32_t n_dims;
    int64_t ne[PI_GGUF_MAX_DIMS]; /* ne[0] is the row length (innermost); unused dims are 1 */
    uint32_t type;            /* GGML type id (see kernels/types.h) */
    uint64_t offset;          /* relative to the data section, as stored */
    uint64_t nbytes;          /* bytes of data, from type and shape */
    const void *data;         /* view into the mapping */
    uint64_t info_offset;     /* file offset of this tensor's info record */
} pi_gguf_tensor;

typedef struct pi_gguf pi_gguf;

/* Map and parse a file. On success *out owns the mapping. The error message
   names the path, the field and its byte offset. Also accepts "PWRI" magic.
   Returns PI_ERR_FORMAT for a malformed file, PI_ERR_UNSUPPORTED for a
   well-formed one this reader does not handle (version 1 or > 3, big-endian,
   nested arrays), PI_ERR_NOT_FOUND when the file does not exist, PI_ERR_IO
   when it cannot be opened or mapped. */
pi_status pi_gguf_open(const char *path, pi_gguf **out);

/* pi_gguf_open, choosing how the file comes into memory: PI_MAP_FILE maps
   it (the page cache holds it), PI_MAP_LOAD reads it into huge-page-backed
   private memory (faster to stream, see base/mapfile.h). */
pi_status pi_gguf_open_mode(const char *path, pi_map_mode mode, pi_gguf **out);

/* Parse a buffer held by the caller (must outlive the pi_gguf); for fuzzing
   and tests. */
pi_status pi_gguf_open_mem(const void *data, size_t size, pi_gguf **out);

void pi_gguf_close(pi_gguf *g); /* accepts NULL */

uint32_t pi_gguf_version(const pi_gguf *g);
bool pi_gguf_is_pwri(const pi_gguf *g);          /* magic was "PWRI" */
uint64_t pi_gguf_alignment(const pi_gguf *g);
/* File offset of the data section; always <= the file size (a tensor-less
   file may end before its alignment padding: then it is the file size). */
uint64_t pi_gguf_data_offset(const pi_gguf *g);
uint64_t pi_gguf_file_size(const pi_gguf *g);
const uint8_t *pi_gguf_base(const pi_gguf *g);   /* start of the mapping */

int64_t pi_gguf_n_kv(const pi_gguf *g);
const pi_gguf_kv *pi_gguf_kv_at(const pi_gguf *g, int64_t i);
/* The key-value with this key, or NULL. */
const pi_gguf_kv *pi_gguf_find_kv(const pi_gguf *g, const char *key);

int64_t pi_gguf_n_tensors(const pi_gguf *g);
const pi_gguf_tensor *pi_gguf_tensor_at(const pi_gguf *g, int64_t i);
/* The tensor with this name, or NULL. */
const pi_gguf_tensor *pi_gguf_find_tensor(const pi_gguf *g, const char *name);
/* Absolute file offset of a tensor's data (data section start + its
   offset); the reader has checked that the data lies inside the file. */
uint64_t pi_gguf_tensor_file_offset(const pi_gguf *g, const pi_gguf_tensor *t);

/* Typed getters. Integer getters accept any integer type whose value fits;
   float getters accept FLOAT32/FLOAT64. PI_ERR_NOT_FOUND when the key is
   absent, PI_ERR_FORMAT (message names the key) when the type is wrong or the
   value does not fit. */
pi_status pi_gguf_get_u32(const pi_gguf *g, const char *key, uint32_t *out);
pi_status pi_gguf_get_i64(const pi_gguf *g, const char *key, int64_t *out);
/* An integer key of any integer type whose value lies in [lo, hi]:
   PI_ERR_NOT_FOUND when absent, PI_ERR_FORMAT when not an integer or out of
   the range; every message names the key (and g's path). */
pi_status pi_gguf_get_i64_range(const pi_gguf *g, const char *key, int64_t lo, int64_t hi, int64_t *out);
pi_status pi_gguf_get_f32(const pi_gguf *g, const char *key, float *out);
pi_status pi_gguf_get_bool(const pi_gguf *g, const char *key, bool *out);
pi_status pi_gguf_get_str(const pi_gguf *g, const char *key, pi_gguf_str *out);
/* An array with the given element type (any element type when want < 0). */
pi_status pi_gguf_get_arr(const pi_gguf *g, const char *key, int want, const pi_gguf_kv **out);

/* Name of a value type ("u32", "str", "arr", ...). */
const char *pi_gguf_vtype_name(uint32_t t);
/* Size in bytes of a scalar value type; 0 for STRING/ARRAY/unknown. */
size_t pi_gguf_vtype_size(uint32_t t);
/* Compare a view with a C string. */
bool pi_gguf_str_eq(pi_gguf_str s, const char *c);
/* Whether a view starts with a C string (e.g. a key with a family's prefix). */
bool pi_gguf_str_has_prefix(pi_gguf_str s, const char *prefix);

/* ---- writer ---- */

typedef struct pi_gguf_writer pi_gguf_writer;

/* Progress of the tensor data: done of total bytes of the data section
   (alignment padding included). Called on the writing thread: once at the
   end of begin_data (done 0), after every piece of written data (a large
   write_data is reported in pieces of a few MiB) and last with done == total
   when the file is complete. The callee limits how often it prints. */
typedef void (*pi_gguf_progress_fn)(void *ctx, uint64_t done, uint64_t total);

/* Start a file (version 3, "GGUF" magic unless pwri). The output is opened
   now, so a path whose directory is missing or not writable fails before any
   work (PI_ERR_NOT_FOUND / PI_ERR_IO); nothing reaches the path itself until
   a successful close. */
pi_status pi_gguf_writer_create(const char *path, bool pwri, pi_gguf_writer **out);
/* Report progress through fn (NULL: none). Any time before the last write. */
void pi_gguf_writer_set_progress(pi_gguf_writer *w, pi_gguf_progress_fn fn, void *ctx);
/* Finish or abandon. When every tensor is complete, the file is flushed,
   synced and renamed into place (PI_ERR_IO naming the path if that fails,
   e.g. disk full or a file size limit). Closing before all data is written
   abandons the file (PI_ERR_INVALID), as does an earlier error (returned
   again). Abandoning removes the temporary and leaves the path as it was.
   Accepts NULL. */
pi_status pi_gguf_writer_close(pi_gguf_writer *w);
/* The end of every write: st is how the caller's work went. When st is an
   error, abandon w and return st with its message kept (closing's own
   complaint is dropped); otherwise return what closing returns. Accepts NULL
   (then returns st). */
pi_status pi_gguf_writer_finish(pi_gguf_writer *w, pi_status st);

/* Metadata. Keys must be unique (PI_ERR_INVALID otherwise). Setting
   "general.alignment" (u32, power of two) changes the data alignment. Values
   are copied. */
pi_status pi_gguf_set_u32(pi_gguf_writer *w, const char *key, uint32_t v);
pi_status pi_gguf_set_i32(pi_gguf_writer *w, const char *key, int32_t v);
pi_status pi_gguf_set_u64(pi_gguf_writer *w, const char *key, uint64_t v);
pi_status pi_gguf_set_f32(pi_gguf_writer *w, const char *key, float v);
pi_status pi_gguf_set_bool(pi_gguf_writer *w, const char *key, bool v);
pi_status pi_gguf_set_str(pi_gguf_writer *w, const char *key, const char *v);
/* An array of n scalar elements of type t, packed little-endian. */
pi_status pi_gguf_set_arr(pi_gguf_writer *w, const char *key, pi_gguf_vtype t, const void *data, uint64_t n);
/* An array of n strings given as views (or NUL-terminated when lens == NULL). */
pi_status pi_gguf_set_arr_str(pi_gguf_writer *w, const char *key, const char *const *strs,
                              const uint64_t *lens, uint64_t n);
/* Copy a key-value from an open file (any type), e.g. to carry a tokenizer over. */
pi_status pi_gguf_set_kv(pi_gguf_writer *w, const pi_gguf_kv *kv);

/* Declare a tensor; data follows later in declaration order. */
pi_status pi_gguf_add_tensor(pi_gguf_writer *w, const char *name, pi_type type, uint32_t n_dims,
                             const int64_t *ne);

/* Write header, metadata and tensor infos; after this only tensor data. */
pi_status pi_gguf_writer_begin_data(pi_gguf_writer *w);
/* Append bytes of the current tensor (in one or several calls); moving to the
   next tensor happens when the current one is complete. Writing more than a
   tensor's size is PI_ERR_INVALID (a call never spans two tensors; nothing is
   written then). An I/O error (PI_ERR_IO, e.g. disk full) is sticky: later
   calls fail and close abandons the file. */
pi_status pi_gguf_write_data(pi_gguf_writer *w, const void *data, size_t n);

#endif
