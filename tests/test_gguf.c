/*
 * test_gguf.c — GGUF reader and writer.
 *
 *   1. every fixture GGUF opens and known facts about it hold;
 *   2. writer round trips: every value type, strings with NULs, empty arrays,
 *      tensors of each compute type with odd shapes, non-default alignments,
 *      data streamed in odd pieces; copying all kvs of a fixture; misuse;
 *   3. malformed files: every truncation prefix, targeted corruption of each
 *      header field, random byte flips — each rejected cleanly (or, for
 *      flips, at least never crashing), in bounded time.
 *
 * `test_gguf --write-seeds DIR` writes small valid GGUF files for the fuzzer
 * (scripts/fuzz-seeds.sh) and exits.
 */
#include "test_util.h"

#include "base/status.h"
#include "gguf/gguf.h"
#include "gguf/names.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <time.h>

/* ---- helpers ---- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void put32(uint8_t *b, uint64_t off, uint32_t v) {
    for (int i = 0; i < 4; i++) b[off + (uint64_t)i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *b, uint64_t off, uint64_t v) {
    for (int i = 0; i < 8; i++) b[off + (uint64_t)i] = (uint8_t)(v >> (8 * i));
}

/* Touch everything a successful open hands out, so ASan sees any view that
   escapes the buffer. Returns a checksum to keep the reads alive. */
static unsigned walk(const pi_gguf *g) {
    unsigned sum = 0;
    const uint8_t *base = pi_gguf_base(g);
    uint64_t size = pi_gguf_file_size(g);
    for (int64_t i = 0; i < pi_gguf_n_kv(g); i++) {
        const pi_gguf_kv *kv = pi_gguf_kv_at(g, i);
        if (kv->key.len) sum += (unsigned char)kv->key.data[kv->key.len - 1];
        if (kv->type == PI_GGUF_STRING && kv->str.len) sum += (unsigned char)kv->str.data[kv->str.len - 1];
        if (kv->type == PI_GGUF_ARRAY) {
            if (kv->arr_type == PI_GGUF_STRING) {
                for (uint64_t j = 0; j < kv->arr_n; j++)
                    if (kv->arr_str[j].len) sum += (unsigned char)kv->arr_str[j].data[kv->arr_str[j].len - 1];
            } else if (kv->arr_n) {
                size_t es = pi_gguf_vtype_size(kv->arr_type);
                sum += ((const uint8_t *)kv->arr_data)[kv->arr_n * es - 1];
            }
        }
    }
    for (int64_t i = 0; i < pi_gguf_n_tensors(g); i++) {
        const pi_gguf_tensor *t = pi_gguf_tensor_at(g, i);
        const uint8_t *d = t->data;
        if (t->nbytes) sum += d[0] + d[t->nbytes - 1];
        CHECK(d >= base + pi_gguf_data_offset(g) && (uint64_t)(d - base) + t->nbytes <= size);
    }
    CHECK(pi_gguf_data_offset(g) <= size);
    return sum;
}

/* Open a copy of buf[0..n) in an exactly sized heap block, so ASan catches
   any read past the end. */
static pi_status open_copy(const uint8_t *buf, size_t n, unsigned *sum) {
    uint8_t *c = malloc(n ? n : 1);
    if (n) memcpy(c, buf, n);
    pi_gguf *g = NULL;
    pi_status st = pi_gguf_open_mem(c, n, &g);
    if (st == PI_OK) {
        unsigned s = walk(g);
        if (sum) *sum = s;
        pi_gguf_close(g);
    } else {
        CHECK(g == NULL);
    }
    free(c);
    return st;
}

static bool kv_equal(const pi_gguf_kv *a, const pi_gguf_kv *b) {
    if (a->key.len != b->key.len || memcmp(a->key.data, b->key.data, a->key.len) || a->type != b->type) return false;
    switch (a->type) {
    case PI_GGUF_STRING: return a->str.len == b->str.len && !memcmp(a->str.data, b->str.data, a->str.len);
    case PI_GGUF_ARRAY:
        if (a->arr_type != b->arr_type || a->arr_n != b->arr_n) return false;
        if (a->arr_type == PI_GGUF_STRING) {
            for (uint64_t i = 0; i < a->arr_n; i++)
                if (a->arr_str[i].len != b->arr_str[i].len ||
                    memcmp(a->arr_str[i].data, b->arr_str[i].data, a->arr_str[i].len))
                    return false;
            return true;
        }
        return a->arr_n == 0 || !memcmp(a->arr_data, b->arr_data, a->arr_n * pi_gguf_vtype_size(a->arr_type));
    case PI_GGUF_FLOAT32:
    case PI_GGUF_FLOAT64: return !memcmp(&a->val.f64, &b->val.f64, sizeof(double));
    default: return a->val.u64 == b->val.u64;
    }
}

static uint64_t tensor_nbytes(pi_type t, int n_dims, const int64_t *ne) {
    uint64_t nb = pi_row_size(t, ne[0]);
    for (int d = 1; d < n_dims; d++) nb *= (uint64_t)ne[d];
    return nb;
}

/* ---- 1. fixtures ---- */

static int g_fixtures_seen;

static pi_gguf *open_fixture(const char *name) {
    char path[1024];
    if (!t_fixture(path, sizeof path, name)) return NULL;
    pi_gguf *g = NULL;
    pi_status st = pi_gguf_open(path, &g);
    CHECKF(st == PI_OK, "%s: %s", name, pi_last_error());
    if (g) {
        g_fixtures_seen++;
        walk(g);
        CHECK(pi_gguf_version(g) == 2 || pi_gguf_version(g) == 3);
        CHECK(!pi_gguf_is_pwri(g));
        CHECK(pi_gguf_data_offset(g) % pi_gguf_alignment(g) == 0 || pi_gguf_n_tensors(g) == 0);
    }
    return g;
}

static void test_fixtures(void) {
    pi_gguf *g;
    uint32_t u;
    const pi_gguf_kv *kv;

    if ((g = open_fixture("stories260K.gguf"))) {
        CHECK(pi_gguf_n_tensors(g) == 48);
        CHECK(pi_gguf_alignment(g) == 32);
        CHECK(pi_gguf_data_offset(g) == 14176);
        CHECK(pi_gguf_file_size(g) == 1185376);
        for (int64_t i = 0; i < pi_gguf_n_tensors(g); i++) CHECK(pi_gguf_tensor_at(g, i)->type == PI_TYPE_F32);
        CHECK(pi_gguf_get_u32(g, "llama.context_length", &u) == PI_OK && u == 2048);
        CHECK(pi_gguf_get_arr(g, "tokenizer.ggml.tokens", PI_GGUF_STRING, &kv) == PI_OK && kv->arr_n == 512);
        CHECK(pi_gguf_str_eq(kv->arr_str[1], "<s>"));
        pi_gguf_str s;
        CHECK(pi_gguf_get_str(g, "general.architecture", &s) == PI_OK && pi_gguf_str_eq(s, "llama"));
        const pi_gguf_tensor *t = pi_gguf_find_tensor(g, "token_embd.weight");
        CHECK(t && t->n_dims == 2 && t->ne[0] == 64 && t->ne[1] == 512 && t->nbytes == 64 * 512 * 4);
        CHECK(pi_gguf_find_tensor(g, "no.such.tensor") == NULL);
        float f;
        CHECK(pi_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &f) == PI_OK && fabsf(f - 1e-5f) < 1e-9f);
        /* getter type errors */
        CHECK(pi_gguf_get_u32(g, "general.architecture", &u) == PI_ERR_FORMAT);
        CHECK(strstr(pi_last_error(), "general.architecture") != NULL);
        CHECK(pi_gguf_get_u32(g, "no.such.key", &u) == PI_ERR_NOT_FOUND);
        CHECK(pi_gguf_get_arr(g, "tokenizer.ggml.tokens", PI_GGUF_UINT8, &kv) == PI_ERR_FORMAT);
        pi_gguf_close(g);
    }
    if ((g = open_fixture("llama-2-tiny-random.gguf"))) {
        int n_f16 = 0;
        for (int64_t i = 0; i < pi_gguf_n_tensors(g); i++) n_f16 += pi_gguf_tensor_at(g, i)->type == PI_TYPE_F16;
        CHECK(n_f16 > 0);
        pi_gguf_close(g);
    }
    if ((g = open_fixture("vocab/ggml-vocab-llama-spm.gguf"))) {
        CHECK(pi_gguf_n_tensors(g) == 0);
        CHECK(pi_gguf_get_arr(g, "tokenizer.ggml.tokens", PI_GGUF_STRING, &kv) == PI_OK && kv->arr_n == 32000);
        bool b;
        CHECK(pi_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b) == PI_OK && b);
        pi_gguf_close(g);
    }
    if ((g = open_fixture("vocab/ggml-vocab-gpt-2.gguf"))) {
        CHECK(pi_gguf_get_arr(g, "tokenizer.ggml.merges", PI_GGUF_STRING, &kv) == PI_OK && kv->arr_n == 50000);
        CHECK(pi_gguf_get_arr(g, "tokenizer.ggml.tokens", PI_GGUF_STRING, &kv) == PI_OK && kv->arr_n == 50257);
        pi_gguf_close(g);
    }
    if ((g = open_fixture("vocab/ggml-vocab-deepseek-llm.gguf"))) {
        CHECK(pi_gguf_get_arr(g, "tokenizer.ggml.tokens", PI_GGUF_STRING, &kv) == PI_OK && kv->arr_n == 102400);
        CHECK(pi_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &u) == PI_OK && u == 100000);
        pi_gguf_close(g);
    }
    static const char *const relu[][2] = {{"relu/relu-stories.gguf", "relu"},
                                          {"relu/drelu-stories.gguf", "drelu"},
                                          {"relu/moe-relu-stories.gguf", "relu"}};
    for (int i = 0; i < 3; i++) {
        if (!(g = open_fixture(relu[i][0]))) continue;
        pi_gguf_str s;
        CHECK(pi_gguf_get_str(g, "pinfer.ffn_activation", &s) == PI_OK && pi_gguf_str_eq(s, relu[i][1]));
        for (int64_t j = 0; j < pi_gguf_n_tensors(g); j++) CHECK(pi_gguf_tensor_at(g, j)->type == PI_TYPE_F32);
        if (i == 2) CHECK(pi_gguf_get_u32(g, "llama.expert_count", &u) == PI_OK && u == 4);
        pi_gguf_close(g);
    }
    fprintf(stderr, "fixtures: %d opened\n", g_fixtures_seen);

    /* open() failures are errors, not crashes */
    char p[512];
    CHECK(pi_gguf_open("/nonexistent/x.gguf", &g) == PI_ERR_NOT_FOUND && g == NULL);
    CHECK(pi_gguf_open("/", &g) == PI_ERR_IO && g == NULL);
    t_tmp_path(p, sizeof p, "empty.gguf");
    FILE *f = fopen(p, "wb");
    if (f) {
        fclose(f);
        CHECK(pi_gguf_open(p, &g) == PI_ERR_FORMAT && g == NULL);
        CHECK(strstr(pi_last_error(), p) != NULL);
        remove(p);
    }
    CHECK(pi_gguf_open_mem("", 0, &g) == PI_ERR_FORMAT && g == NULL);
}

/* ---- 2. writer ---- */

typedef struct {
    const char *name;
    pi_type type;
    int n_dims;
    int64_t ne[4];
} tspec;

static const tspec k_tensors[] = {
    {"t.f32.1d", PI_TYPE_F32, 1, {7, 1, 1, 1}},    {"t.f16.2d", PI_TYPE_F16, 2, {3, 5, 1, 1}},
    {"t.bf16.3d", PI_TYPE_BF16, 3, {5, 1, 3, 1}},  {"t.q8_0.4d", PI_TYPE_Q8_0, 4, {64, 3, 1, 2}},
    {"t.q4_0.2d", PI_TYPE_Q4_0, 2, {32, 3, 1, 1}}, {"t.empty", PI_TYPE_F32, 2, {0, 4, 1, 1}},
    {"t.f32.4d", PI_TYPE_F32, 4, {1, 1, 1, 1}},    {"t.q8_0.1d", PI_TYPE_Q8_0, 1, {96, 1, 1, 1}},
};
#define N_TENSORS ((int)(sizeof k_tensors / sizeof k_tensors[0]))

/* The expected metadata of the round-trip file, as hand-built kvs; written
   partly through the typed setters and partly through pi_gguf_set_kv. */
static const uint8_t k_u8s[] = {0, 1, 255, 7, 9};
static const int8_t k_i8s[] = {-128, 127, 0};
static const uint16_t k_u16s[] = {65535, 1};
static const int16_t k_i16s[] = {-32768, 32767, -1};
static const uint32_t k_u32s[] = {4000000000u, 0, 1, 2, 3, 4, 5};
static const int32_t k_i32s[] = {-2147483647 - 1, 2147483647};
static const float k_f32s[] = {1.5f, -0.0f, 3.4e38f};
static const uint8_t k_bools[] = {1, 0, 1, 1};
static const uint64_t k_u64s[] = {UINT64_MAX, 0};
static const int64_t k_i64s[] = {INT64_MIN, INT64_MAX, -1};
static const double k_f64s[] = {1e300, -2.5};
static const char *const k_strs[] = {"hello", "", "w\xc3\xb6rld", "a\0b"};
static const uint64_t k_str_lens[] = {5, 0, 6, 3};

static pi_gguf_kv mk(const char *key, pi_gguf_vtype t) {
    pi_gguf_kv kv;
    memset(&kv, 0, sizeof kv);
    kv.key.data = key;
    kv.key.len = strlen(key);
    kv.type = t;
    return kv;
}
static pi_gguf_kv mk_u(const char *key, pi_gguf_vtype t, uint64_t v) {
    pi_gguf_kv kv = mk(key, t);
    kv.val.u64 = v;
    return kv;
}
static pi_gguf_kv mk_i(const char *key, pi_gguf_vtype t, int64_t v) {
    pi_gguf_kv kv = mk(key, t);
    kv.val.i64 = v;
    return kv;
}
static pi_gguf_kv mk_f(const char *key, pi_gguf_vtype t, double v) {
    pi_gguf_kv kv = mk(key, t);
    kv.val.f64 = v;
    return kv;
}
static pi_gguf_kv mk_s(const char *key, const char *s, uint64_t len) {
    pi_gguf_kv kv = mk(key, PI_GGUF_STRING);
    kv.str = (pi_gguf_str){len, s};
    return kv;
}
static pi_gguf_kv mk_a(const char *key, pi_gguf_vtype t, const void *data, uint64_t n) {
    pi_gguf_kv kv = mk(key, PI_GGUF_ARRAY);
    kv.arr_type = t;
    kv.arr_data = data;
    kv.arr_n = n;
    return kv;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The last entry is the string array; its views are set by the caller. */
static int build_expected(pi_gguf_kv *e, uint32_t alignment) {
    int n = 0;
    e[n++] = mk_s("general.architecture", "llama", 5);
    if (alignment != PI_GGUF_DEFAULT_ALIGNMENT) e[n++] = mk_u("general.alignment", PI_GGUF_UINT32, alignment);
    e[n++] = mk_u("v.u8", PI_GGUF_UINT8, 200);
    e[n++] = mk_i("v.i8", PI_GGUF_INT8, -100);
    e[n++] = mk_u("v.u16", PI_GGUF_UINT16, 60000);
    e[n++] = mk_i("v.i16", PI_GGUF_INT16, -30000);
    e[n++] = mk_u("v.u32", PI_GGUF_UINT32, 4000000000u);
    e[n++] = mk_i("v.i32", PI_GGUF_INT32, -2000000000);
    e[n++] = mk_f("v.f32", PI_GGUF_FLOAT32, 3.25);
    e[n++] = mk_u("v.bool.t", PI_GGUF_BOOL, 1);
    e[n++] = mk_u("v.bool.f", PI_GGUF_BOOL, 0);
    e[n++] = mk_u("v.u64", PI_GGUF_UINT64, (1ull << 63) + 5);
    e[n++] = mk_i("v.i64", PI_GGUF_INT64, INT64_MIN);
    e[n++] = mk_f("v.f64", PI_GGUF_FLOAT64, -1e300);
    e[n++] = mk_s("v.str", "hello", 5);
    e[n++] = mk_s("v.str.empty", "", 0);
    e[n++] = mk_s("v.str.nul", "a\0b\0c", 5);
    pi_gguf_kv kv = mk_u("v.key.nul", PI_GGUF_UINT32, 1); /* a key with NULs in it */
    kv.key = (pi_gguf_str){12, "v.key\0nul\0xx"};
    e[n++] = kv;
    e[n++] = mk_a("a.u8", PI_GGUF_UINT8, k_u8s, COUNT(k_u8s));
    e[n++] = mk_a("a.i8", PI_GGUF_INT8, k_i8s, COUNT(k_i8s));
    e[n++] = mk_a("a.u16", PI_GGUF_UINT16, k_u16s, COUNT(k_u16s));
    e[n++] = mk_a("a.i16", PI_GGUF_INT16, k_i16s, COUNT(k_i16s));
    e[n++] = mk_a("a.u32", PI_GGUF_UINT32, k_u32s, COUNT(k_u32s));
    e[n++] = mk_a("a.i32", PI_GGUF_INT32, k_i32s, COUNT(k_i32s));
    e[n++] = mk_a("a.f32", PI_GGUF_FLOAT32, k_f32s, COUNT(k_f32s));
    e[n++] = mk_a("a.bool", PI_GGUF_BOOL, k_bools, COUNT(k_bools));
    e[n++] = mk_a("a.u64", PI_GGUF_UINT64, k_u64s, COUNT(k_u64s));
    e[n++] = mk_a("a.i64", PI_GGUF_INT64, k_i64s, COUNT(k_i64s));
    e[n++] = mk_a("a.f64", PI_GGUF_FLOAT64, k_f64s, COUNT(k_f64s));
    e[n++] = mk_a("a.empty.u32", PI_GGUF_UINT32, NULL, 0);
    e[n++] = mk_a("a.empty.str", PI_GGUF_STRING, NULL, 0);
    e[n++] = mk_a("a.str", PI_GGUF_STRING, NULL, COUNT(k_strs));
    return n;
}

/* Write the expected kvs: typed setters where they exist, set_kv otherwise. */
static pi_status write_kvs(pi_gguf_writer *w, const pi_gguf_kv *e, int n) {
    for (int i = 0; i < n; i++) {
        const pi_gguf_kv *kv = &e[i];
        bool cstr_key = strlen(kv->key.data) == kv->key.len;
        pi_status st;
        if (cstr_key && kv->type == PI_GGUF_UINT32)
            st = pi_gguf_set_u32(w, kv->key.data, (uint32_t)kv->val.u64);
        else if (cstr_key && kv->type == PI_GGUF_INT32)
            st = pi_gguf_set_i32(w, kv->key.data, (int32_t)kv->val.i64);
        else if (cstr_key && kv->type == PI_GGUF_UINT64)
            st = pi_gguf_set_u64(w, kv->key.data, kv->val.u64);
        else if (cstr_key && kv->type == PI_GGUF_FLOAT32)
            st = pi_gguf_set_f32(w, kv->key.data, (float)kv->val.f64);
        else if (cstr_key && kv->type == PI_GGUF_BOOL)
            st = pi_gguf_set_bool(w, kv->key.data, kv->val.u64 != 0);
        else if (cstr_key && kv->type == PI_GGUF_STRING && strlen(kv->str.data) == kv->str.len)
            st = pi_gguf_set_str(w, kv->key.data, kv->str.data);
        else if (kv->type == PI_GGUF_ARRAY && kv->arr_type == PI_GGUF_STRING && kv->arr_n)
            st = pi_gguf_set_arr_str(w, kv->key.data, k_strs, k_str_lens, kv->arr_n);
        else if (kv->type == PI_GGUF_ARRAY && kv->arr_type != PI_GGUF_STRING && (i & 1))
            st = pi_gguf_set_arr(w, kv->key.data, kv->arr_type, kv->arr_data, kv->arr_n);
        else
            st = pi_gguf_set_kv(w, kv);
        if (st) return st;
    }
    return PI_OK;
}

/* Write a round-trip file; returns the tensor data for comparison. */
static void roundtrip(uint32_t alignment, bool pwri, t_rng *rng) {
    char path[512];
    t_tmp_path(path, sizeof path, "roundtrip.gguf");
    pi_gguf_kv e[64];
    int ne = build_expected(e, alignment);
    pi_gguf_str strviews[4];
    for (int i = 0; i < 4; i++) strviews[i] = (pi_gguf_str){k_str_lens[i], k_strs[i]};
    e[ne - 1].arr_str = strviews;

    pi_gguf_writer *w = NULL;
    CHECKF(pi_gguf_writer_create(path, pwri, &w) == PI_OK, "%s", pi_last_error());
    if (!w) return;
    CHECKF(write_kvs(w, e, ne) == PI_OK, "%s", pi_last_error());
    uint8_t *data[N_TENSORS];
    uint64_t nbytes[N_TENSORS];
    for (int i = 0; i < N_TENSORS; i++) {
        const tspec *ts = &k_tensors[i];
        CHECKF(pi_gguf_add_tensor(w, ts->name, ts->type, (uint32_t)ts->n_dims, ts->ne) == PI_OK, "%s", pi_last_error());
        nbytes[i] = tensor_nbytes(ts->type, ts->n_dims, ts->ne);
        data[i] = malloc(nbytes[i] + 1);
        for (uint64_t j = 0; j < nbytes[i]; j++) data[i][j] = (uint8_t)t_next(rng);
    }
    CHECKF(pi_gguf_writer_begin_data(w) == PI_OK, "%s", pi_last_error());
    for (int i = 0; i < N_TENSORS; i++) {
        uint64_t done = 0;
        while (done < nbytes[i]) { /* odd-sized pieces */
            uint64_t k = 1 + t_next(rng) % 61;
            if (k > nbytes[i] - done) k = nbytes[i] - done;
            CHECKF(pi_gguf_write_data(w, data[i] + done, (size_t)k) == PI_OK, "%s", pi_last_error());
            done += k;
        }
    }
    CHECKF(pi_gguf_writer_close(w) == PI_OK, "%s", pi_last_error());

    pi_gguf *g = NULL;
    CHECKF(pi_gguf_open(path, &g) == PI_OK, "%s", pi_last_error());
    if (g) {
        walk(g);
        CHECK(pi_gguf_version(g) == 3);
        CHECK(pi_gguf_is_pwri(g) == pwri);
        CHECK(pi_gguf_alignment(g) == alignment);
        CHECK(pi_gguf_data_offset(g) % alignment == 0);
        CHECK(pi_gguf_file_size(g) % alignment == 0);
        CHECK(pi_gguf_n_kv(g) == ne);
        for (int i = 0; i < ne && i < pi_gguf_n_kv(g); i++)
            CHECKF(kv_equal(pi_gguf_kv_at(g, i), &e[i]), "kv %d '%s' differs", i, e[i].key.data);
        CHECK(pi_gguf_n_tensors(g) == N_TENSORS);
        for (int i = 0; i < N_TENSORS && i < pi_gguf_n_tensors(g); i++) {
            const pi_gguf_tensor *t = pi_gguf_tensor_at(g, i);
            const tspec *ts = &k_tensors[i];
            CHECK(pi_gguf_str_eq(t->name, ts->name));
            CHECK(pi_gguf_find_tensor(g, ts->name) == t);
            CHECK(t->type == (uint32_t)ts->type && t->n_dims == (uint32_t)ts->n_dims);
            for (int d = 0; d < 4; d++) CHECK(t->ne[d] == ts->ne[d]);
            CHECK(t->offset % alignment == 0);
            CHECK(t->nbytes == nbytes[i]);
            CHECKF(nbytes[i] == 0 || !memcmp(t->data, data[i], nbytes[i]), "tensor %s data differs", ts->name);
        }
        /* typed getters on known types */
        uint32_t u;
        int64_t i64;
        float f;
        bool b;
        pi_gguf_str s;
        const pi_gguf_kv *kv;
        CHECK(pi_gguf_get_u32(g, "v.u8", &u) == PI_OK && u == 200);
        CHECK(pi_gguf_get_u32(g, "v.u16", &u) == PI_OK && u == 60000);
        CHECK(pi_gguf_get_u32(g, "v.i8", &u) == PI_ERR_FORMAT);     /* negative */
        CHECK(pi_gguf_get_u32(g, "v.u64", &u) == PI_ERR_FORMAT);    /* too big */
        CHECK(pi_gguf_get_u32(g, "v.bool.t", &u) == PI_ERR_FORMAT); /* not an integer */
        CHECK(pi_gguf_get_i64(g, "v.i64", &i64) == PI_OK && i64 == INT64_MIN);
        CHECK(pi_gguf_get_i64(g, "v.i8", &i64) == PI_OK && i64 == -100);
        CHECK(pi_gguf_get_i64(g, "v.u32", &i64) == PI_OK && i64 == 4000000000);
        CHECK(pi_gguf_get_i64(g, "v.u64", &i64) == PI_ERR_FORMAT);
        CHECK(pi_gguf_get_f32(g, "v.f32", &f) == PI_OK && f == 3.25f);
        CHECK(pi_gguf_get_f32(g, "v.f64", &f) == PI_ERR_FORMAT); /* beyond float range */
        CHECK(pi_gguf_get_f32(g, "v.u32", &f) == PI_ERR_FORMAT);
        CHECK(pi_gguf_get_bool(g, "v.bool.t", &b) == PI_OK && b);
        CHECK(pi_gguf_get_bool(g, "v.bool.f", &b) == PI_OK && !b);
        CHECK(pi_gguf_get_str(g, "v.str.empty", &s) == PI_OK && s.len == 0);
        CHECK(pi_gguf_get_str(g, "v.str.nul", &s) == PI_OK && s.len == 5 && !memcmp(s.data, "a\0b\0c", 5));
        CHECK(pi_gguf_get_arr(g, "a.str", PI_GGUF_STRING, &kv) == PI_OK && kv->arr_n == 4 && kv->arr_str[3].len == 3 &&
              !memcmp(kv->arr_str[3].data, "a\0b", 3));
        CHECK(pi_gguf_get_arr(g, "a.empty.str", -1, &kv) == PI_OK && kv->arr_n == 0);
        CHECK(pi_gguf_get_arr(g, "v.u8", -1, &kv) == PI_ERR_FORMAT);
        CHECK(pi_gguf_find_kv(g, "v.key") == NULL); /* the key with a NUL is not "v.key" */
        pi_gguf_close(g);
    }
    for (int i = 0; i < N_TENSORS; i++) free(data[i]);
    remove(path);
}

/* Copy every kv of a fixture through set_kv and compare. */
static void copy_kvs(const char *fixture) {
    char src[1024], dst[512];
    if (!t_fixture(src, sizeof src, fixture)) return;
    t_tmp_path(dst, sizeof dst, "copy.gguf");
    pi_gguf *g = NULL, *h = NULL;
    if (pi_gguf_open(src, &g) != PI_OK) return;
    pi_gguf_writer *w = NULL;
    CHECK(pi_gguf_writer_create(dst, false, &w) == PI_OK);
    for (int64_t i = 0; w && i < pi_gguf_n_kv(g); i++)
        CHECKF(pi_gguf_set_kv(w, pi_gguf_kv_at(g, i)) == PI_OK, "%s", pi_last_error());
    CHECK(pi_gguf_writer_begin_data(w) == PI_OK);
    CHECK(pi_gguf_writer_close(w) == PI_OK);
    CHECKF(pi_gguf_open(dst, &h) == PI_OK, "%s", pi_last_error());
    if (h) {
        CHECK(pi_gguf_n_kv(h) == pi_gguf_n_kv(g) && pi_gguf_n_tensors(h) == 0);
        for (int64_t i = 0; i < pi_gguf_n_kv(g) && i < pi_gguf_n_kv(h); i++)
            CHECKF(kv_equal(pi_gguf_kv_at(g, i), pi_gguf_kv_at(h, i)), "%s kv %lld differs", fixture, (long long)i);
        CHECK(pi_gguf_alignment(h) == pi_gguf_alignment(g));
    }
    pi_gguf_close(h);
    pi_gguf_close(g);
    remove(dst);
}

static bool exists(const char *p) { return access(p, F_OK) == 0; }

static void test_writer_misuse(void) {
    char path[512];
    t_tmp_path(path, sizeof path, "misuse.gguf");
    pi_gguf_writer *w = NULL;
    int64_t ne[4] = {8, 1, 1, 1}, bad[4] = {31, 1, 1, 1}, neg[4] = {-1, 1, 1, 1};
    uint8_t buf[64] = {0};

    CHECK(pi_gguf_writer_close(NULL) == PI_OK);
    CHECK(pi_gguf_writer_create("/nonexistent-dir/x.gguf", false, &w) != PI_OK && w == NULL);
    CHECK(*pi_last_error());

    CHECK(pi_gguf_writer_create(path, false, &w) == PI_OK);
    CHECK(pi_gguf_write_data(w, buf, 1) == PI_ERR_INVALID); /* before begin_data */
    CHECK(pi_gguf_set_u32(w, "k", 1) == PI_OK);
    CHECK(pi_gguf_set_u32(w, "k", 2) == PI_ERR_INVALID); /* duplicate key */
    CHECK(pi_gguf_set_str(w, "k", "x") == PI_ERR_INVALID);
    CHECK(pi_gguf_set_u32(w, "general.alignment", 3) == PI_ERR_INVALID);
    CHECK(pi_gguf_set_u32(w, "general.alignment", 0) == PI_ERR_INVALID);
    CHECK(pi_gguf_set_u64(w, "general.alignment", 64) == PI_ERR_INVALID);
    CHECK(pi_gguf_set_str(w, "general.alignment", "64") == PI_ERR_INVALID);
    CHECK(pi_gguf_set_arr(w, "a", PI_GGUF_STRING, buf, 1) == PI_ERR_INVALID);
    CHECK(pi_gguf_set_arr(w, "a", PI_GGUF_BOOL, (const uint8_t[]){0, 2}, 2) == PI_ERR_INVALID);
    pi_gguf_kv kv = mk("v", PI_GGUF_UINT8);
    kv.val.u64 = 256;
    CHECK(pi_gguf_set_kv(w, &kv) == PI_ERR_INVALID); /* value does not fit */
    kv.type = (pi_gguf_vtype)99;
    CHECK(pi_gguf_set_kv(w, &kv) == PI_ERR_INVALID);
    /* a value that fails half-way leaves no trace: the key can be set again */
    const char *const with_null[] = {"ok", NULL};
    const uint64_t null_lens[] = {2, 3};
    CHECK(pi_gguf_set_arr_str(w, "s", with_null, null_lens, 2) == PI_ERR_INVALID);
    CHECK(pi_gguf_set_arr_str(w, "s", with_null, NULL, 1) == PI_OK);
    int64_t ovf[4] = {1ll << 40, 1ll << 40, 1 << 20, 1};
    CHECK(pi_gguf_add_tensor(w, "big", PI_TYPE_F32, 3, ovf) == PI_ERR_INVALID);
    CHECK(pi_gguf_add_tensor(w, "t", PI_TYPE_Q8_0, 1, bad) == PI_ERR_INVALID);
    CHECK(pi_gguf_add_tensor(w, "t", PI_TYPE_F32, 1, neg) == PI_ERR_INVALID);
    CHECK(pi_gguf_add_tensor(w, "t", PI_TYPE_F32, 0, ne) == PI_ERR_INVALID);
    CHECK(pi_gguf_add_tensor(w, "t", PI_TYPE_F32, 5, ne) == PI_ERR_INVALID);
    CHECK(pi_gguf_add_tensor(w, "t", (pi_type)4, 1, ne) == PI_ERR_INVALID);
    CHECK(pi_gguf_add_tensor(w, "t", PI_TYPE_F32, 1, ne) == PI_OK); /* 32 bytes */
    CHECK(pi_gguf_add_tensor(w, "t", PI_TYPE_F32, 1, ne) == PI_ERR_INVALID);
    CHECK(pi_gguf_add_tensor(w, "u", PI_TYPE_F16, 1, ne) == PI_OK); /* 16 bytes */
    CHECK(pi_gguf_writer_begin_data(w) == PI_OK);
    CHECK(pi_gguf_set_u32(w, "late", 1) == PI_ERR_INVALID);
    CHECK(pi_gguf_add_tensor(w, "late", PI_TYPE_F32, 1, ne) == PI_ERR_INVALID);
    CHECK(pi_gguf_writer_begin_data(w) == PI_ERR_INVALID);
    CHECK(pi_gguf_write_data(w, buf, 33) == PI_ERR_INVALID); /* too much for 't' */
    CHECK(strstr(pi_last_error(), "'t'") != NULL);
    CHECK(pi_gguf_write_data(w, buf, 32) == PI_OK);
    CHECK(pi_gguf_write_data(w, buf, 10) == PI_OK);
    CHECK(pi_gguf_writer_close(w) == PI_ERR_INVALID); /* 'u' incomplete */
    CHECKF(strstr(pi_last_error(), "'u'") && strstr(pi_last_error(), "10 of 16"), "%s", pi_last_error());
    CHECK(!exists(path));

    CHECK(pi_gguf_writer_create(path, false, &w) == PI_OK);
    CHECK(pi_gguf_add_tensor(w, "t", PI_TYPE_F32, 1, ne) == PI_OK);
    CHECK(pi_gguf_writer_begin_data(w) == PI_OK);
    CHECK(pi_gguf_write_data(w, buf, 32) == PI_OK);
    CHECK(pi_gguf_write_data(w, buf, 1) == PI_ERR_INVALID); /* after the last tensor */
    CHECK(pi_gguf_write_data(w, buf, 0) == PI_OK);
    CHECK(pi_gguf_writer_close(w) == PI_OK);
    CHECK(exists(path));
    remove(path);

    CHECK(pi_gguf_writer_create(path, false, &w) == PI_OK);
    CHECK(pi_gguf_writer_close(w) == PI_ERR_INVALID); /* abandoned before begin_data */
    CHECK(!exists(path));

    /* Disk full: every write error is PI_ERR_IO naming the path. */
    if (access("/dev/full", W_OK) == 0) {
        int64_t big[4] = {1 << 20, 1, 1, 1};
        CHECK(pi_gguf_writer_create("/dev/full", false, &w) == PI_OK);
        if (w) {
            pi_status st = pi_gguf_add_tensor(w, "big", PI_TYPE_F32, 1, big);
            if (!st) st = pi_gguf_writer_begin_data(w);
            uint8_t *z = calloc(1, 1 << 16);
            for (int i = 0; i < 64 && st == PI_OK; i++) st = pi_gguf_write_data(w, z, 1 << 16);
            free(z);
            CHECK(st == PI_ERR_IO);
            CHECK(pi_gguf_write_data(w, "x", 1) == PI_ERR_IO); /* sticky */
            CHECK(strstr(pi_last_error(), "failed earlier") != NULL);
            pi_status cs = pi_gguf_writer_close(w);
            CHECKF(cs == PI_ERR_IO && strstr(pi_last_error(), "/dev/full"), "%d %s", cs, pi_last_error());
            CHECK(exists("/dev/full"));
        }
    }
}

/* pi_gguf_get_i64_range: every integer type, both ends of a range, values
   beyond i64, the wrong type and a missing key; each message names the key. */
static void test_int_range(void) {
    char path[512];
    t_tmp_path(path, sizeof path, "range.gguf");
    pi_gguf_writer *w = NULL;
    static const struct { const char *key; pi_gguf_vtype t; bool neg; uint64_t u; int64_t i; } vals[] = {
        {"u8", PI_GGUF_UINT8, false, 200, 0},           {"i8", PI_GGUF_INT8, true, 0, -100},
        {"u16", PI_GGUF_UINT16, false, 60000, 0},       {"i16", PI_GGUF_INT16, true, 0, -30000},
        {"u32", PI_GGUF_UINT32, false, 4000000000u, 0}, {"i32", PI_GGUF_INT32, true, 0, -2000000000},
        {"u64", PI_GGUF_UINT64, false, UINT64_MAX, 0},  {"i64", PI_GGUF_INT64, true, 0, INT64_MIN},
        {"i64+", PI_GGUF_INT64, true, 0, 5},
    };
    const size_t n = sizeof vals / sizeof vals[0];
    pi_status st = pi_gguf_writer_create(path, false, &w);
    for (size_t k = 0; k < n && !st; k++) {
        pi_gguf_kv kv = vals[k].neg ? mk_i(vals[k].key, vals[k].t, vals[k].i) : mk_u(vals[k].key, vals[k].t, vals[k].u);
        st = pi_gguf_set_kv(w, &kv);
    }
    if (!st) st = pi_gguf_set_f32(w, "f", 1.0f);
    if (!st) st = pi_gguf_set_str(w, "s", "7");
    if (!st) st = pi_gguf_writer_begin_data(w);
    CHECKF(pi_gguf_writer_finish(w, st) == PI_OK, "%s", pi_last_error());
    pi_gguf *g = NULL;
    CHECKF(pi_gguf_open(path, &g) == PI_OK, "%s", pi_last_error());
    for (size_t k = 0; g && k < n; k++) {
        const char *key = vals[k].key;
        int64_t v = 0, want = vals[k].neg ? vals[k].i : (int64_t)(vals[k].u > INT64_MAX ? INT64_MAX : vals[k].u);
        if (!vals[k].neg && vals[k].u > INT64_MAX) { /* beyond i64: out of any range, printed exactly */
            CHECK(pi_gguf_get_i64_range(g, key, 0, INT64_MAX, &v) == PI_ERR_FORMAT);
            CHECKF(strstr(pi_last_error(), key) && strstr(pi_last_error(), "18446744073709551615"), "%s",
                   pi_last_error());
            continue;
        }
        /* the exact range, then one step short at either end */
        CHECKF(pi_gguf_get_i64_range(g, key, want, want, &v) == PI_OK && v == want, "%s: %s", key, pi_last_error());
        v = 12345;
        if (want > INT64_MIN) {
            CHECK(pi_gguf_get_i64_range(g, key, INT64_MIN, want - 1, &v) == PI_ERR_FORMAT && v == 12345);
            CHECKF(strstr(pi_last_error(), key) && strstr(pi_last_error(), "out of range"), "%s", pi_last_error());
        }
        CHECK(pi_gguf_get_i64_range(g, key, want + 1, INT64_MAX, &v) == PI_ERR_FORMAT && v == 12345);
        CHECKF(strstr(pi_last_error(), key) && strstr(pi_last_error(), path), "%s", pi_last_error());
    }
    int64_t v = 0;
    CHECK(g && pi_gguf_get_i64_range(g, "f", 0, 10, &v) == PI_ERR_FORMAT && strstr(pi_last_error(), "'f'"));
    CHECK(g && pi_gguf_get_i64_range(g, "s", 0, 10, &v) == PI_ERR_FORMAT && strstr(pi_last_error(), "'s'"));
    CHECK(g && pi_gguf_get_i64_range(g, "none", 0, 10, &v) == PI_ERR_NOT_FOUND && strstr(pi_last_error(), "'none'"));
    /* a u8 against a range that is wholly negative, an i8 against one wholly positive */
    CHECK(g && pi_gguf_get_i64_range(g, "u8", -10, -1, &v) == PI_ERR_FORMAT);
    CHECK(g && pi_gguf_get_i64_range(g, "i8", 1, 10, &v) == PI_ERR_FORMAT);
    pi_gguf_close(g);
    remove(path);
}

/* pi_gguf_writer_finish keeps the caller's error over closing's own. */
static void test_writer_finish(void) {
    char path[512];
    t_tmp_path(path, sizeof path, "finish.gguf");
    pi_gguf_writer *w = NULL;
    CHECK(pi_gguf_writer_finish(NULL, PI_OK) == PI_OK);
    CHECK(pi_gguf_writer_finish(NULL, pi_error(PI_ERR_NOMEM, "first")) == PI_ERR_NOMEM);
    CHECK(pi_gguf_writer_create(path, false, &w) == PI_OK);
    /* an error before begin_data: closing would complain too; the first stays */
    CHECK(pi_gguf_writer_finish(w, pi_error(PI_ERR_NOMEM, "the first error")) == PI_ERR_NOMEM);
    CHECKF(!strcmp(pi_last_error(), "the first error"), "%s", pi_last_error());
    CHECK(!exists(path));
    /* no error of its own: closing's is the result */
    CHECK(pi_gguf_writer_create(path, false, &w) == PI_OK);
    CHECK(pi_gguf_writer_finish(w, PI_OK) == PI_ERR_INVALID && strstr(pi_last_error(), "begin_data"));
    CHECK(!exists(path));
    CHECK(pi_gguf_writer_create(path, false, &w) == PI_OK);
    CHECK(pi_gguf_writer_begin_data(w) == PI_OK);
    CHECK(pi_gguf_writer_finish(w, PI_OK) == PI_OK && exists(path));
    remove(path);
}

/* The names table: per-layer formats read back by pi_tensor_layer. */
static void test_names(void) {
    char nm[PI_NAME_MAX];
    snprintf(nm, sizeof nm, PI_TN_ATTN_Q, 12);
    CHECK(!strcmp(nm, "blk.12.attn_q.weight"));
    const pi_gguf_str s = {strlen(nm), nm};
    CHECK(pi_tensor_layer(s, PI_TN_ATTN_Q) == 12);
    CHECK(pi_tensor_layer(s, PI_TN_ATTN_K) == -1);
    CHECK(pi_tensor_layer(s, PI_TN_FFN_UP_EXPS) == -1);
    static const struct { const char *name; const char *fmt; int64_t layer; } cases[] = {
        {"blk.0.fc2.weight", PI_TN_FC2, 0},
        {"blk.007.fc1.weight", PI_TN_FC1, 7},
        {"blk.99999999999999999999.act_count", PI_TN_ACT_COUNT, INT64_MAX},
        {"blk..fc1.weight", PI_TN_FC1, -1},
        {"blk.-1.fc1.weight", PI_TN_FC1, -1},
        {"blk.1x.fc1.weight", PI_TN_FC1, -1},
        {"blk.1.fc1.weight.", PI_TN_FC1, -1},
        {"blk.1.ffn_act_count", PI_TN_ACT_COUNT, -1},
        {"blk.3.ffn_act_count", PI_TN_FFN_ACT_COUNT, 3},
        {"blk.3.ffn_bundle", PI_TN_FFN_BUNDLE, 3},
        {"token_embd.weight", PI_TN_FFN_GATE, -1},
        {"", PI_TN_FFN_GATE, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const pi_gguf_str c = {strlen(cases[i].name), cases[i].name};
        CHECKF(pi_tensor_layer(c, cases[i].fmt) == cases[i].layer, "%s", cases[i].name);
    }
    const pi_gguf_str key = {strlen(PI_KEY_BUNDLE_STRIDE), PI_KEY_BUNDLE_STRIDE};
    CHECK(!strcmp(PI_LLAMA_KEY(PI_AKEY_CONTEXT_LENGTH), "llama.context_length"));
    CHECK(pi_gguf_str_has_prefix(key, PI_KEY_BUNDLE_PREFIX) && pi_gguf_str_has_prefix(key, ""));
    CHECK(!pi_gguf_str_has_prefix(key, PI_KEY_STATS_PREFIX));
    CHECK(!pi_gguf_str_has_prefix((pi_gguf_str){3, "pin"}, "pinfer."));
}

/* ---- 3. malformed files ---- */

static int g_cases;

/* The small valid file the malformed-file suite corrupts. Its last kv is a
   string and it has 3 tensors, so no prefix ending before the last tensor's
   data can be valid. */
static uint8_t *make_mini(size_t *n) {
    char path[512];
    t_tmp_path(path, sizeof path, "mini.gguf");
    pi_gguf_writer *w = NULL;
    if (pi_gguf_writer_create(path, false, &w) != PI_OK) return NULL;
    static const char *const toks[] = {"a", "bc", ""};
    static const float scores[] = {1, 2, 3};
    int64_t ne_a[4] = {5}, ne_b[4] = {3, 2}, ne_c[4] = {32, 2};
    pi_status st = PI_OK;
    if (!st) st = pi_gguf_set_str(w, "general.architecture", "mini");
    if (!st) st = pi_gguf_set_u32(w, "general.alignment", 32);
    if (!st) st = pi_gguf_set_u32(w, "test.u32a", 7);
    if (!st) st = pi_gguf_set_u32(w, "test.u32b", 8);
    if (!st) st = pi_gguf_set_bool(w, "test.flag", true);
    if (!st) st = pi_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 3);
    if (!st) st = pi_gguf_set_arr(w, "tokenizer.ggml.scores", PI_GGUF_FLOAT32, scores, 3);
    if (!st) st = pi_gguf_set_str(w, "general.name", "mini-model");
    if (!st) st = pi_gguf_add_tensor(w, "a", PI_TYPE_F32, 1, ne_a);
    if (!st) st = pi_gguf_add_tensor(w, "b", PI_TYPE_F16, 2, ne_b);
    if (!st) st = pi_gguf_add_tensor(w, "c", PI_TYPE_Q8_0, 2, ne_c);
    if (!st) st = pi_gguf_writer_begin_data(w);
    uint8_t bytes[68];
    for (int i = 0; i < 68; i++) bytes[i] = (uint8_t)(i * 37 + 1);
    if (!st) st = pi_gguf_write_data(w, bytes, 20);
    if (!st) st = pi_gguf_write_data(w, bytes, 12);
    if (!st) st = pi_gguf_write_data(w, bytes, 68);
    CHECKF(st == PI_OK, "%s", pi_last_error());
    CHECKF(pi_gguf_writer_close(w) == PI_OK, "%s", pi_last_error());
    uint8_t *buf = t_read_file(path, n);
    remove(path);
    return buf;
}

/* End of the last tensor's data: the shortest prefix that can be valid. */
static uint64_t min_valid_len(const pi_gguf *g) {
    uint64_t end = 0;
    for (int64_t i = 0; i < pi_gguf_n_tensors(g); i++) {
        const pi_gguf_tensor *t = pi_gguf_tensor_at(g, i);
        uint64_t e = pi_gguf_data_offset(g) + t->offset + t->nbytes;
        if (e > end) end = e;
    }
    return end;
}

/* Every prefix [0, len) for len in [lo, hi) at the given stride must be
   PI_ERR_FORMAT unless it is at least min_valid. */
static void truncations(const char *what, const uint8_t *buf, size_t lo, size_t hi, size_t stride, uint64_t min_valid) {
    int bad = 0;
    for (size_t len = lo; len < hi; len += stride) {
        pi_status st = open_copy(buf, len, NULL);
        bool want_ok = len >= min_valid;
        g_cases++;
        if ((want_ok && st != PI_OK) || (!want_ok && (st != PI_ERR_FORMAT || !*pi_last_error()))) {
            if (bad++ < 5)
                CHECKF(0, "%s truncated to %zu bytes: got %s (%s)", what, len, pi_status_str(st), pi_last_error());
        }
    }
    CHECKF(bad == 0, "%s: %d truncations misjudged", what, bad);
}

static double g_max_case_s;

/* Overwrite a field of buf in place (width 1, 4 or 8 bytes), expect an error
   with a message, then restore the field. buf is a scratch copy of exactly
   n heap bytes, so ASan still sees reads past its end; patching in place
   spares a copy of a megabyte-sized fixture per case. */
static void corrupt(const char *what, uint8_t *buf, size_t n, uint64_t off, int width, uint64_t val) {
    uint8_t saved[8];
    memcpy(saved, buf + off, (size_t)width);
    if (width == 8)
        put64(buf, off, val);
    else if (width == 4)
        put32(buf, off, (uint32_t)val);
    else
        buf[off] = (uint8_t)val;
    double t0 = now_s();
    pi_gguf *g = NULL;
    pi_status st = pi_gguf_open_mem(buf, n, &g);
    double dt = now_s() - t0;
    if (dt > g_max_case_s) g_max_case_s = dt;
    g_cases++;
    CHECKF(st != PI_OK && g == NULL && *pi_last_error(), "%s = %#" PRIx64 ": accepted", what, val);
    if (getenv("PI_TEST_VERBOSE")) fprintf(stderr, "  %s = %#" PRIx64 " -> %s\n", what, val, pi_last_error());
    CHECKF(dt < 2.0, "%s: took %.2f s", what, dt);
    if (st == PI_OK) pi_gguf_close(g);
    memcpy(buf + off, saved, (size_t)width);
}

/* File offsets of the fields of kv i and tensor i of a parsed file. */
static uint64_t kv_type_at(const pi_gguf *g, int64_t i) {
    const pi_gguf_kv *kv = pi_gguf_kv_at(g, i);
    return kv->offset + 8 + kv->key.len;
}
static uint64_t t_ndims_at(const pi_gguf *g, int64_t i) {
    const pi_gguf_tensor *t = pi_gguf_tensor_at(g, i);
    return t->info_offset + 8 + t->name.len;
}
static uint64_t t_type_at(const pi_gguf *g, int64_t i) {
    return t_ndims_at(g, i) + 4 + 8ull * pi_gguf_tensor_at(g, i)->n_dims;
}
static uint64_t t_offset_at(const pi_gguf *g, int64_t i) { return t_type_at(g, i) + 4; }

static void test_corruptions(const uint8_t *orig, size_t n) {
    pi_gguf *g = NULL;
    CHECK(pi_gguf_open_mem(orig, n, &g) == PI_OK);
    if (!g) return;
    uint8_t *buf = malloc(n); /* scratch that corrupt() patches and restores */
    memcpy(buf, orig, n);
    const uint64_t huge[] = {UINT64_MAX, UINT64_MAX / 2, UINT64_MAX / 8 + 1, 1ull << 40, (uint64_t)n};
    int64_t ntens = pi_gguf_n_tensors(g), nkv = pi_gguf_n_kv(g);

    corrupt("magic", buf, n, 0, 4, 0x58554747); /* "GGUX" */
    corrupt("magic", buf, n, 0, 4, 0);
    corrupt("magic", buf, n, 0, 4, 0x47475546); /* "FUGG" */
    const uint32_t versions[] = {0, 1, 4, 0xffffffffu, 0x03000000u};
    for (int i = 0; i < 5; i++) corrupt("version", buf, n, 4, 4, versions[i]);
    for (int i = 0; i < 5; i++) corrupt("n_tensors", buf, n, 8, 8, huge[i]);
    for (int i = 0; i < 5; i++) corrupt("n_kv", buf, n, 16, 8, huge[i]);
    corrupt("n_tensors+1", buf, n, 8, 8, (uint64_t)ntens + 1);
    corrupt("n_kv+1", buf, n, 16, 8, (uint64_t)nkv + 1);
    corrupt("n_kv-1", buf, n, 16, 8, (uint64_t)nkv - 1);
    {
        /* n_tensors - 1 leaves a structurally valid file: the last tensor
           info becomes bytes before the data section, which GGUF does not
           constrain, and the remaining tensors still lie inside the file.
           It must not crash and must describe what it accepted. */
        uint8_t *c = malloc(n);
        memcpy(c, buf, n);
        put64(c, 8, (uint64_t)ntens - 1);
        pi_gguf *h = NULL;
        pi_status st = pi_gguf_open_mem(c, n, &h);
        g_cases++;
        CHECK(st != PI_OK || pi_gguf_n_tensors(h) == ntens - 1);
        if (h) walk(h);
        pi_gguf_close(h);
        free(c);
    }
    for (int64_t k = 0; k < nkv; k++) {
        const pi_gguf_kv *kv = pi_gguf_kv_at(g, k);
        char w[128];
        snprintf(w, sizeof w, "kv %lld key length", (long long)k);
        for (int i = 0; i < 5; i++) corrupt(w, buf, n, kv->offset, 8, huge[i]);
        snprintf(w, sizeof w, "kv %lld value type", (long long)k);
        corrupt(w, buf, n, kv_type_at(g, k), 4, 13);
        corrupt(w, buf, n, kv_type_at(g, k), 4, 0xffffffffu);
        uint64_t v = kv_type_at(g, k) + 4;
        if (kv->type == PI_GGUF_STRING) {
            snprintf(w, sizeof w, "kv %lld string length", (long long)k);
            for (int i = 0; i < 5; i++) corrupt(w, buf, n, v, 8, huge[i]);
        }
        if (kv->type == PI_GGUF_BOOL) {
            snprintf(w, sizeof w, "kv %lld bool", (long long)k);
            corrupt(w, buf, n, v, 1, 2);
            corrupt(w, buf, n, v, 1, 255);
        }
        if (kv->type == PI_GGUF_ARRAY) {
            snprintf(w, sizeof w, "kv %lld array element type", (long long)k);
            corrupt(w, buf, n, v, 4, PI_GGUF_ARRAY);
            corrupt(w, buf, n, v, 4, 13);
            corrupt(w, buf, n, v, 4, 0xffffffffu);
            snprintf(w, sizeof w, "kv %lld array count", (long long)k);
            for (int i = 0; i < 5; i++) corrupt(w, buf, n, v + 4, 8, huge[i]);
            if (kv->arr_type == PI_GGUF_STRING) {
                for (uint64_t j = 0; j < kv->arr_n; j++) {
                    if (j >= 4 && j + 1 < kv->arr_n) continue; /* the first few and the last suffice */
                    uint64_t at = (uint64_t)((const uint8_t *)kv->arr_str[j].data - orig) - 8;
                    snprintf(w, sizeof w, "kv %lld string element %llu length", (long long)k, (unsigned long long)j);
                    for (int i = 0; i < 5; i++) corrupt(w, buf, n, at, 8, huge[i]);
                }
            }
        }
        if (pi_gguf_str_eq(kv->key, "general.alignment")) {
            corrupt("general.alignment", buf, n, v, 4, 0);
            corrupt("general.alignment", buf, n, v, 4, 3);
            corrupt("general.alignment", buf, n, v, 4, 48);
            corrupt("general.alignment", buf, n, v, 4, 1u << 31); /* tensor offsets no longer aligned */
            corrupt("general.alignment type", buf, n, kv_type_at(g, k), 4, PI_GGUF_INT32);
            corrupt("general.alignment type", buf, n, kv_type_at(g, k), 4, PI_GGUF_FLOAT32);
        }
    }
    /* duplicate keys and names: make two same-length names equal */
    const pi_gguf_kv *ka = pi_gguf_find_kv(g, "test.u32a");
    if (ka) corrupt("duplicate key", buf, n, ka->offset + 8 + 8, 1, 'b');
    for (int64_t i = 1, done = 0; i < ntens && !done; i++) {
        const pi_gguf_tensor *t0 = pi_gguf_tensor_at(g, 0), *t1 = pi_gguf_tensor_at(g, i);
        if (t1->name.len != t0->name.len) continue;
        uint8_t *c = malloc(n);
        memcpy(c, buf, n);
        memcpy(c + t1->info_offset + 8, t0->name.data, t0->name.len);
        pi_gguf *h = NULL;
        g_cases++;
        CHECKF(pi_gguf_open_mem(c, n, &h) == PI_ERR_FORMAT && strstr(pi_last_error(), "duplicate name"), "%s",
               pi_last_error());
        pi_gguf_close(h);
        free(c);
        done = 1;
    }

    for (int64_t k = 0; k < ntens; k++) {
        const pi_gguf_tensor *t = pi_gguf_tensor_at(g, k);
        const pi_type_info *ti = pi_type_get(t->type);
        uint64_t nd = t_ndims_at(g, k), ne0 = nd + 4;
        char w[128];
        snprintf(w, sizeof w, "tensor %lld name length", (long long)k);
        for (int i = 0; i < 5; i++) corrupt(w, buf, n, t->info_offset, 8, huge[i]);
        snprintf(w, sizeof w, "tensor %lld n_dims", (long long)k);
        corrupt(w, buf, n, nd, 4, 0);
        corrupt(w, buf, n, nd, 4, 5);
        corrupt(w, buf, n, nd, 4, 0xffffffffu);
        snprintf(w, sizeof w, "tensor %lld ne", (long long)k);
        corrupt(w, buf, n, ne0, 8, (uint64_t)-1); /* negative */
        corrupt(w, buf, n, ne0, 8, (uint64_t) - (int64_t)ti->blck);
        corrupt(w, buf, n, ne0, 8, (uint64_t)INT64_MAX / (uint64_t)ti->blck * (uint64_t)ti->blck); /* huge */
        corrupt(w, buf, n, ne0, 8, (uint64_t)ti->blck * ((uint64_t)n + 1));   /* data past the end */
        if (ti->blck > 1) corrupt(w, buf, n, ne0, 8, (uint64_t)t->ne[0] + 1); /* not a block multiple */
        if (t->n_dims >= 2) {
            /* product overflows int64 although each ne is fine */
            uint8_t *c = malloc(n);
            memcpy(c, buf, n);
            put64(c, ne0, 1ull << 37);
            put64(c, ne0 + 8, 1ull << 30);
            pi_gguf *h = NULL;
            g_cases++;
            CHECKF(pi_gguf_open_mem(c, n, &h) == PI_ERR_FORMAT && strstr(pi_last_error(), "overflow"), "%s",
                   pi_last_error());
            pi_gguf_close(h);
            free(c);
            corrupt(w, buf, n, ne0 + 8, 8, (uint64_t)1 << 62);
        }
        snprintf(w, sizeof w, "tensor %lld type", (long long)k);
        const uint32_t types[] = {4, 5, 31, 40, 1000, 0xffffffffu};
        for (int i = 0; i < 6; i++) corrupt(w, buf, n, t_type_at(g, k), 4, types[i]);
        snprintf(w, sizeof w, "tensor %lld offset", (long long)k);
        uint64_t to = t_offset_at(g, k);
        corrupt(w, buf, n, to, 8, t->offset + 1);
        corrupt(w, buf, n, to, 8, t->offset + 16);
        corrupt(w, buf, n, to, 8, (uint64_t)n);
        corrupt(w, buf, n, to, 8, ((uint64_t)n + 31) / 32 * 32);
        corrupt(w, buf, n, to, 8, UINT64_MAX - 31);
        corrupt(w, buf, n, to, 8, UINT64_MAX);
    }
    CHECK(memcmp(buf, orig, n) == 0); /* every patch was undone */
    free(buf);
    pi_gguf_close(g);
}

/* Random byte flips: anything may happen except a crash or a hang. */
static void random_flips(const char *what, const uint8_t *buf, size_t n, size_t region, int seeds, int iters) {
    int ok = 0, err = 0;
    uint8_t *c = malloc(n);
    memcpy(c, buf, n);
    for (int s = 1; s <= seeds; s++) {
        t_rng r = {(uint64_t)s * 0x5851f42d4c957f2dull};
        for (int it = 0; it < iters; it++) {
            int k = 1 + (int)(t_next(&r) % 4);
            size_t at[4];
            uint8_t old[4];
            for (int j = 0; j < k; j++) {
                at[j] = (size_t)(t_next(&r) % region);
                old[j] = c[at[j]];
                uint64_t m = t_next(&r);
                c[at[j]] = (m & 256) ? (uint8_t)m : (uint8_t)(c[at[j]] ^ (1u << (m % 8))); /* overwrite or flip a bit */
            }
            double t0 = now_s();
            pi_gguf *g = NULL;
            pi_status st = pi_gguf_open_mem(c, n, &g);
            double dt = now_s() - t0;
            if (dt > g_max_case_s) g_max_case_s = dt;
            if (st == PI_OK) {
                walk(g);
                pi_gguf_close(g);
                ok++;
            } else {
                CHECK(g == NULL && *pi_last_error());
                err++;
            }
            g_cases++;
            for (int j = k - 1; j >= 0; j--) c[at[j]] = old[j]; /* undo, latest first */
        }
    }
    CHECK(memcmp(c, buf, n) == 0);
    free(c);
    fprintf(stderr, "%s random flips: %d accepted, %d rejected\n", what, ok, err);
}

static void test_malformed(void) {
    size_t n = 0;
    uint8_t *mini = make_mini(&n);
    CHECK(mini != NULL);
    if (!mini) return;
    pi_gguf *g = NULL;
    CHECKF(pi_gguf_open_mem(mini, n, &g) == PI_OK, "%s", pi_last_error());
    if (!g) {
        free(mini);
        return;
    }
    CHECK(pi_gguf_n_tensors(g) == 3 && pi_gguf_n_kv(g) == 8);
    uint64_t min_valid = min_valid_len(g);
    uint64_t data_off = pi_gguf_data_offset(g);

    /* (a) every truncation */
    int c0 = g_cases;
    truncations("mini", mini, 0, n, 1, min_valid);
    fprintf(stderr, "mini (%zu bytes): %d truncations\n", n, g_cases - c0);

    /* the message names path, byte offset and field */
    {
        uint64_t at = t_offset_at(g, 2);
        uint8_t *c = malloc(n);
        memcpy(c, mini, n);
        put64(c, at, 8); /* misaligned */
        pi_gguf *h = NULL;
        CHECK(pi_gguf_open_mem(c, n, &h) == PI_ERR_FORMAT);
        char want[64];
        snprintf(want, sizeof want, "byte %llu: ", (unsigned long long)at);
        CHECKF(strstr(pi_last_error(), want) && strstr(pi_last_error(), "tensor 2 'c' offset"), "%s", pi_last_error());
        char path[512];
        t_tmp_path(path, sizeof path, "bad.gguf");
        FILE *f = fopen(path, "wb");
        if (f) {
            fwrite(c, 1, n, f);
            fclose(f);
            CHECK(pi_gguf_open(path, &h) == PI_ERR_FORMAT && h == NULL);
            CHECKF(strncmp(pi_last_error(), path, strlen(path)) == 0 && strstr(pi_last_error(), want), "%s",
                   pi_last_error());
            remove(path);
        }
        /* data out of range names the tensor and both ends */
        memcpy(c, mini, n);
        put64(c, at, 1024);
        CHECK(pi_gguf_open_mem(c, n, &h) == PI_ERR_FORMAT);
        CHECKF(strstr(pi_last_error(), "tensor 2 'c': data [") && strstr(pi_last_error(), "exceeds file size"), "%s",
               pi_last_error());
        /* truncation names the field */
        CHECK(pi_gguf_open_mem(mini, 20, &h) == PI_ERR_FORMAT);
        CHECKF(strstr(pi_last_error(), "byte 16: kv count"), "%s", pi_last_error());
        /* version 1 */
        memcpy(c, mini, n);
        put32(c, 4, 1);
        CHECK(pi_gguf_open_mem(c, n, &h) == PI_ERR_UNSUPPORTED);
        CHECKF(strstr(pi_last_error(), "unsupported version 1"), "%s", pi_last_error());
        /* PWRI magic is accepted */
        memcpy(c, mini, n);
        memcpy(c, "PWRI", 4);
        CHECK(pi_gguf_open_mem(c, n, &h) == PI_OK && pi_gguf_is_pwri(h));
        pi_gguf_close(h);
        /* version 2 is accepted */
        put32(c, 4, 2);
        CHECK(pi_gguf_open_mem(c, n, &h) == PI_OK && pi_gguf_version(h) == 2);
        pi_gguf_close(h);
        free(c);
    }

    /* (b) targeted corruption */
    c0 = g_cases;
    test_corruptions(mini, n);
    fprintf(stderr, "mini: %d field corruptions\n", g_cases - c0);

    /* (c) random flips over the header */
    random_flips("mini", mini, n, (size_t)data_off, 8, 3000);
    pi_gguf_close(g);
    free(mini);

    /* the same on a real file's header region */
    char path[1024];
    if (t_fixture(path, sizeof path, "stories260K.gguf")) {
        size_t sn = 0;
        uint8_t *s = t_read_file(path, &sn);
        if (s && pi_gguf_open_mem(s, sn, &g) == PI_OK) {
            uint64_t hdr = pi_gguf_data_offset(g);
            uint64_t mv = min_valid_len(g);
            c0 = g_cases;
            truncations("stories260K", s, 0, (size_t)hdr + 256, 1, mv);
            truncations("stories260K", s, (size_t)hdr + 256, sn, 4093, mv);
            fprintf(stderr, "stories260K: %d truncations\n", g_cases - c0);
            c0 = g_cases;
            test_corruptions(s, sn);
            fprintf(stderr, "stories260K: %d field corruptions\n", g_cases - c0);
            random_flips("stories260K", s, sn, (size_t)hdr, 4, 300);
            pi_gguf_close(g);
        }
        free(s);
    }
    /* and a tensor-less vocabulary: it ends right after its kvs */
    if (t_fixture(path, sizeof path, "vocab/ggml-vocab-llama-spm.gguf")) {
        size_t sn = 0;
        uint8_t *s = t_read_file(path, &sn);
        if (s) {
            c0 = g_cases;
            truncations("llama-spm", s, 0, 4096, 1, sn);
            truncations("llama-spm", s, 4096, sn, 3001, sn);
            CHECK(open_copy(s, sn, NULL) == PI_OK);
            fprintf(stderr, "llama-spm: %d truncations\n", g_cases - c0);
        }
        free(s);
    }
    fprintf(stderr, "malformed: %d cases, slowest %.3f ms\n", g_cases, g_max_case_s * 1e3);
}

/* ---- seeds for the fuzzer ---- */

static int write_seeds(const char *dir) {
    char path[1024];
    size_t n = 0;
    uint8_t *mini = make_mini(&n);
    snprintf(path, sizeof path, "%s/gen-mini.gguf", dir);
    FILE *f = fopen(path, "wb");
    if (!f || !mini || fwrite(mini, 1, n, f) != n) {
        fprintf(stderr, "test_gguf: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    fclose(f);
    free(mini);
    /* The round-trip file's content (data zeroed), plain and PWRI. */
    const uint32_t aligns[] = {32, 64};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/gen-alltypes-%u%s.gguf", dir, aligns[i], i ? "-pwri" : "");
        pi_gguf_kv e[64];
        int ne = build_expected(e, aligns[i]);
        pi_gguf_str sv[4];
        for (int j = 0; j < 4; j++) sv[j] = (pi_gguf_str){k_str_lens[j], k_strs[j]};
        e[ne - 1].arr_str = sv;
        pi_gguf_writer *w = NULL;
        pi_status st = pi_gguf_writer_create(path, i == 1, &w);
        if (!st) st = write_kvs(w, e, ne);
        for (int j = 0; j < N_TENSORS && !st; j++)
            st = pi_gguf_add_tensor(w, k_tensors[j].name, k_tensors[j].type, (uint32_t)k_tensors[j].n_dims,
                                    k_tensors[j].ne);
        if (!st) st = pi_gguf_writer_begin_data(w);
        for (int j = 0; j < N_TENSORS && !st; j++) {
            uint64_t nb = tensor_nbytes(k_tensors[j].type, k_tensors[j].n_dims, k_tensors[j].ne);
            uint8_t *d = calloc(1, nb + 1);
            st = pi_gguf_write_data(w, d, (size_t)nb);
            free(d);
        }
        pi_status cs = pi_gguf_writer_close(w);
        if (st || cs) {
            fprintf(stderr, "test_gguf: %s\n", pi_last_error());
            return 1;
        }
    }
    /* stories260K's metadata with its small tensors: a real header that is
       also a complete, valid file of a few KiB. */
    char src[1024];
    pi_gguf *g = NULL;
    if (t_fixture(src, sizeof src, "stories260K.gguf") && pi_gguf_open(src, &g) == PI_OK) {
        snprintf(path, sizeof path, "%s/gen-stories-small.gguf", dir);
        pi_gguf_writer *w = NULL;
        pi_status st = pi_gguf_writer_create(path, false, &w);
        for (int64_t i = 0; i < pi_gguf_n_kv(g) && !st; i++) st = pi_gguf_set_kv(w, pi_gguf_kv_at(g, i));
        for (int64_t i = 0; i < pi_gguf_n_tensors(g) && !st; i++) {
            const pi_gguf_tensor *t = pi_gguf_tensor_at(g, i);
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)(t->name.len < 255 ? t->name.len : 255), t->name.data);
            if (t->nbytes <= 1024) st = pi_gguf_add_tensor(w, name, (pi_type)t->type, t->n_dims, t->ne);
        }
        if (!st) st = pi_gguf_writer_begin_data(w);
        for (int64_t i = 0; i < pi_gguf_n_tensors(g) && !st; i++) {
            const pi_gguf_tensor *t = pi_gguf_tensor_at(g, i);
            if (t->nbytes <= 1024) st = pi_gguf_write_data(w, t->data, (size_t)t->nbytes);
        }
        pi_status cs = pi_gguf_writer_close(w);
        pi_gguf_close(g);
        if (st || cs) {
            fprintf(stderr, "test_gguf: %s\n", pi_last_error());
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write-seeds")) return write_seeds(argv[2]);
    double t0 = now_s();
    test_fixtures();
    t_rng rng = {42};
    roundtrip(PI_GGUF_DEFAULT_ALIGNMENT, false, &rng);
    roundtrip(64, false, &rng);
    roundtrip(4096, true, &rng);
    copy_kvs("stories260K.gguf");
    copy_kvs("vocab/ggml-vocab-gpt-2.gguf");
    test_writer_misuse();
    test_writer_finish();
    test_int_range();
    test_names();
    test_malformed();
    fprintf(stderr, "test_gguf: %.2f s\n", now_s() - t0);
    return t_done("test_gguf");
}
