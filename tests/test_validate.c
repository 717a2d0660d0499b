/*
 * test_validate.c — quantized data with a NaN or infinite scale is refused,
 * naming the tensor (or bundle), the type and the block:
 *  - pi_rows_bad_scale finds the first bad scale of every scaled type (d,
 *    and m / dmin where the type has one) and passes clean rows;
 *  - a K-quant model whose blocks were damaged in the file is refused on
 *    load, and so is a truncated one;
 *  - a bundle file with a damaged bundle: refused on an in-memory load, on
 *    an offloaded load when the bundle is resident, and, when it is cold, at
 *    the decode step that reads it (PI_ERR_FORMAT, never NaN logits); the
 *    session stays stopped.
 */
#include "gguf/gguf.h"
#include "kernels/validate.h"
#include "model/genmodel.h"
#include "model/model.h"
#include "model/session.h"
#include "sparse/ffn_offload.h"
#include "sparse/reorder.h"
#include "test_util.h"

#include <unistd.h>

static const uint16_t bad_values[3] = {0x7e00, 0x7c00, 0xfc00}; /* NaN, +Inf, -Inf */

/* Byte offset of the k-th f16 scale in a block of type t (the layouts of
   types.h), -1 when it has no k-th. */
static int scale_at(pi_type t, int k) {
    switch (t) {
    case PI_TYPE_Q8_0: case PI_TYPE_Q4_0: case PI_TYPE_Q5_0: return k == 0 ? 0 : -1;
    case PI_TYPE_Q4_1: case PI_TYPE_Q5_1: case PI_TYPE_Q4_K: case PI_TYPE_Q5_K: return k < 2 ? 2 * k : -1;
    case PI_TYPE_Q6_K: return k == 0 ? 208 : -1;
    default: return -1;
    }
}

/* The types with scales to check. */
static const pi_type scaled_types[] = {PI_TYPE_Q8_0, PI_TYPE_Q4_0, PI_TYPE_Q4_1, PI_TYPE_Q5_0,
                                       PI_TYPE_Q5_1, PI_TYPE_Q4_K, PI_TYPE_Q5_K, PI_TYPE_Q6_K};
enum { N_SCALED = sizeof scaled_types / sizeof scaled_types[0] };

/* n_rows rows of n normal values quantized to t (malloc'ed, *rb bytes each),
   or NULL for a type this build does not read. */
static uint8_t *quantized_rows(pi_type t, int64_t n, int n_rows, uint64_t seed, size_t *rb) {
    const pi_type_info *info = pi_type_get(t);
    if (!info || !info->compute) return NULL;
    *rb = pi_row_size(t, n);
    float *x = malloc((size_t)n * sizeof *x);
    uint8_t *rows = malloc(*rb * (size_t)n_rows);
    t_rng r = {seed};
    for (int64_t i = 0; i < n; i++) x[i] = t_normal(&r);
    for (int j = 0; j < n_rows; j++) pi_quantize_row(t, x, rows + (size_t)j * *rb, n);
    free(x);
    return rows;
}

static void test_rows(void) {
    enum { N = 512, ROWS = 3 };
    for (int ti = 0; ti < N_SCALED; ti++) {
        const pi_type t = scaled_types[ti];
        const pi_type_info *info = pi_type_get(t);
        size_t rb;
        uint8_t *rows = quantized_rows(t, N, ROWS, 5, &rb);
        if (!rows) continue; /* a type this build does not read */
        float v = 0.0f;
        CHECKF(pi_rows_bad_scale(t, rows, N, ROWS, rb, &v) == -1, "%s: clean rows", info->name);
        const int64_t nb = N / info->blck;
        for (int k = 0; scale_at(t, k) >= 0; k++)
            for (int bv = 0; bv < 3; bv++) {
                const int64_t row = 2, blk = nb - 1 - k; /* the last row's late blocks */
                uint8_t *p = rows + (size_t)row * rb + (size_t)blk * info->size + (size_t)scale_at(t, k);
                uint16_t keep;
                memcpy(&keep, p, 2);
                memcpy(p, &bad_values[bv], 2);
                const int64_t got = pi_rows_bad_scale(t, rows, N, ROWS, rb, &v);
                CHECKF(got == row * nb + blk && (bv ? isinf(v) : isnan(v)), "%s: scale %d value %04x at block %lld: %lld",
                       info->name, k, bad_values[bv], (long long)(row * nb + blk), (long long)got);
                memcpy(p, &keep, 2);
            }
        CHECK(pi_rows_bad_scale(t, rows, N, ROWS, rb, &v) == -1);
        free(rows);
    }
    /* unscaled types always pass */
    float f[8] = {NAN, INFINITY};
    CHECK(pi_rows_bad_scale(PI_TYPE_F32, f, 8, 1, sizeof f, NULL) == -1);
}

/* Every block position, the last whole group of four blocks and the blocks
   after it included (17 blocks of 32 weights, 5 super-blocks of 256): a bad
   scale anywhere is found, and with two the first is named. */
static void test_rows_every_block(void) {
    for (int ti = 0; ti < N_SCALED; ti++) {
        const pi_type t = scaled_types[ti];
        const pi_type_info *info = pi_type_get(t);
        if (!info) continue;
        const int64_t nb = info->blck == 256 ? 5 : 17, n = nb * info->blck;
        size_t rb;
        uint8_t *rows = quantized_rows(t, n, 2, 11, &rb);
        if (!rows) continue;
        CHECKF(pi_rows_bad_scale(t, rows, n, 2, rb, NULL) == -1, "%s: clean rows of %lld blocks", info->name,
               (long long)nb);
        for (int k = 0; scale_at(t, k) >= 0; k++)
            for (int64_t b = 0; b < nb; b++) {
                uint8_t *p = rows + rb + (size_t)b * info->size + (size_t)scale_at(t, k);
                uint8_t *q = rows + rb + (size_t)(nb - 1) * info->size + (size_t)scale_at(t, k);
                uint16_t keep_p, keep_q;
                memcpy(&keep_p, p, 2);
                memcpy(&keep_q, q, 2);
                memcpy(p, &bad_values[b % 3], 2);
                float v = 0.0f;
                CHECKF(pi_rows_bad_scale(t, rows, n, 2, rb, &v) == nb + b && !isfinite(v), "%s: scale %d of block %lld",
                       info->name, k, (long long)b);
                memcpy(q, &bad_values[0], 2); /* a second bad scale, in the row's last block */
                CHECKF(pi_rows_bad_scale(t, rows, n, 2, rb, NULL) == nb + b, "%s: block %lld named before block %lld",
                       info->name, (long long)b, (long long)(nb - 1));
                memcpy(q, &keep_q, 2);
                memcpy(p, &keep_p, 2);
            }
        CHECK(pi_rows_bad_scale(t, rows, n, 2, rb, NULL) == -1);
        free(rows);
    }
}

static void gen(const char *path, pi_type type) {
    pi_genmodel_params p;
    CHECK(pi_genmodel_preset("tiny", &p) == PI_OK);
    p.n_layer = 2;
    p.n_ff = 512;
    p.n_vocab = 300;
    p.n_ctx = 64;
    p.vocab_path = NULL;
    p.type = type;
    p.embd_type = PI_TYPE_Q8_0;
    p.output_type = PI_TYPE_Q6_K;
    p.act = PI_ACT_RELU;
    p.active = 0.15;
    p.predictor = true;
    p.pred_rank = 64;
    p.n_threads = 2;
    CHECKF(pi_genmodel_write(&p, path) == PI_OK, "%s", pi_last_error());
}

/* Copy src to dst with the f16 at file offset `at` replaced by v (at < 0:
   the copy cut to `cut` bytes). */
static bool copy_with(const char *src, const char *dst, int64_t at, uint16_t v, size_t cut) {
    size_t n = 0;
    uint8_t *b = t_read_file(src, &n);
    if (!b) return false;
    if (at >= 0 && (size_t)at + 2 <= n) memcpy(b + at, &v, 2);
    if (at < 0 && cut < n) n = cut;
    FILE *f = fopen(dst, "wb");
    const bool ok = f && fwrite(b, 1, n, f) == n;
    if (f) fclose(f);
    free(b);
    return ok;
}

/* File offset of block `blk` of row `row` of a tensor, plus the scale's. */
static int64_t scale_offset(const char *path, const char *name, int64_t row, int64_t blk, int k) {
    pi_gguf *g;
    if (pi_gguf_open(path, &g) != PI_OK) return -1;
    const pi_gguf_tensor *t = pi_gguf_find_tensor(g, name);
    int64_t at = -1;
    if (t) {
        const pi_type_info *ti = pi_type_get(t->type);
        at = (int64_t)pi_gguf_tensor_file_offset(g, t) + row * (int64_t)pi_row_size((pi_type)t->type, t->ne[0]) +
             blk * (int64_t)ti->size + scale_at((pi_type)t->type, k);
    }
    pi_gguf_close(g);
    return at;
}

static void expect_load_refused(const char *path, const char *what, const char *n1, const char *n2) {
    pi_lm *m = NULL;
    const pi_status st = pi_lm_load(path, PI_MAP_FILE, &m);
    const char *msg = pi_last_error();
    CHECKF(st == PI_ERR_FORMAT && strstr(msg, n1) && strstr(msg, n2), "%s: status %d, '%s'", what, (int)st, msg);
    if (st == PI_ERR_FORMAT) fprintf(stderr, "refused: %s\n", msg);
    pi_lm_free(m);
}

static void test_model(const char *plain, const char *bad) {
    gen(plain, PI_TYPE_Q4_K);
    pi_lm *m = NULL;
    CHECKF(pi_lm_load(plain, PI_MAP_FILE, &m) == PI_OK, "%s", pi_last_error());
    pi_lm_free(m);
    const struct {
        const char *tensor, *type;
        int64_t row, blk;
        int k;
    } cases[] = {
        {"blk.1.ffn_down.weight", "q4_K", 100, 1, 0}, /* d */
        {"blk.0.attn_q.weight", "q4_K", 7, 0, 1},     /* dmin */
        {"output.weight", "q6_K", 299, 0, 0},         /* the last row */
        {"token_embd.weight", "q8_0", 3, 5, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int bv = 0; bv < 3; bv++) {
            const int64_t at = scale_offset(plain, cases[c].tensor, cases[c].row, cases[c].blk, cases[c].k);
            CHECK(at > 0 && copy_with(plain, bad, at, bad_values[bv], 0));
            char where[64];
            snprintf(where, sizeof where, "block %lld of row %lld", (long long)cases[c].blk, (long long)cases[c].row);
            expect_load_refused(bad, cases[c].tensor, cases[c].tensor, cases[c].type);
            expect_load_refused(bad, where, where, cases[c].type);
        }
    /* truncated inside the last tensor's blocks */
    size_t n = 0;
    free(t_read_file(plain, &n));
    CHECK(copy_with(plain, bad, -1, 0, n - 100));
    pi_lm *tm = NULL;
    CHECK(pi_lm_load(bad, PI_MAP_FILE, &tm) == PI_ERR_FORMAT && strstr(pi_last_error(), "exceeds"));
    pi_lm_free(tm);
}

/* Decode a few tokens of bundle file `path` offloaded with `hot` resident
   bundles per layer; the status of the first failing step (or of load). */
static pi_status offload_run(const char *path, int64_t hot_n) {
    pi_lm *om = NULL;
    pi_offload *off = NULL;
    int64_t hot[2] = {hot_n, hot_n};
    pi_offload_opts oo = {.n_ctx = 64, .cold_slots = 600, .hot = hot, .lookahead = true};
    pi_status st = pi_offload_load(path, &oo, &om, &off);
    if (st) return st;
    pi_state *s = NULL;
    if (!(st = pi_state_create(om, 64, 2, &s))) st = pi_offload_ffn_install(s, off, PI_FFN_SPARSE, 0);
    int32_t toks[24];
    for (int i = 0; i < 24; i++) toks[i] = (int32_t)((i * 37 + 11) % 300);
    if (!st) st = pi_state_decode(s, toks, 6); /* the streamed prompt reads every bundle */
    if (st) { /* stays stopped: no output after a refusal */
        CHECK(!s || pi_state_decode(s, &toks[0], 1) != PI_OK);
    }
    pi_state_free(s);
    pi_offload_free(off);
    pi_lm_free(om);
    return st;
}

static void test_bundles(const char *plain, const char *bundle, const char *bad) {
    CHECKF(pi_bundle_write(plain, NULL, 4096, bundle) == PI_OK, "%s", pi_last_error());
    CHECKF(offload_run(bundle, 0) == PI_OK, "%s", pi_last_error());
    pi_gguf *g;
    int64_t base = -1;
    size_t stride = 0;
    if (pi_gguf_open(bundle, &g) == PI_OK) {
        const pi_gguf_tensor *t = pi_gguf_find_tensor(g, "blk.1.ffn_bundle");
        if (t) base = (int64_t)pi_gguf_tensor_file_offset(g, t), stride = (size_t)t->ne[0];
        pi_gguf_close(g);
    }
    CHECK(base > 0);
    /* neuron 77's up part (q4_K, one block of 256 elements at byte 144) */
    const int64_t at = base + 77 * (int64_t)stride + 144;
    CHECK(copy_with(bundle, bad, at, bad_values[0], 0));
    expect_load_refused(bad, "in memory", "blk.1.ffn_bundle", "q4_K");
    pi_status st = offload_run(bad, 128); /* resident: refused on load */
    CHECKF(st == PI_ERR_FORMAT && strstr(pi_last_error(), "bundle 77") && strstr(pi_last_error(), "up part"),
           "resident: %d '%s'", (int)st, pi_last_error());
    st = offload_run(bad, 0); /* cold: refused by the step that reads it */
    CHECKF(st == PI_ERR_FORMAT && strstr(pi_last_error(), "bundle 77") && strstr(pi_last_error(), "q4_K"),
           "cold: %d '%s'", (int)st, pi_last_error());
    fprintf(stderr, "refused: %s\n", pi_last_error());
    /* the tensors an offloaded load reads itself instead of scanning the
       mapping: the fixed region when it is read, an embedding row when its
       token comes (token 11 is the first decoded), an unused row not at all */
    const struct {
        const char *tensor, *type;
        int64_t row;
        bool refused;
    } cases[] = {
        {"blk.0.attn_q.weight", "q4_K", 7, true},
        {"output.weight", "q6_K", 299, true},
        {"token_embd.weight", "q8_0", 11, true},
        {"token_embd.weight", "q8_0", 12, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int64_t at2 = scale_offset(bundle, cases[c].tensor, cases[c].row, 0, 0);
        CHECK(at2 > 0 && copy_with(bundle, bad, at2, bad_values[1], 0));
        char row[64];
        snprintf(row, sizeof row, "row %lld", (long long)cases[c].row);
        st = offload_run(bad, 0);
        if (cases[c].refused)
            CHECKF(st == PI_ERR_FORMAT && strstr(pi_last_error(), cases[c].tensor) &&
                       strstr(pi_last_error(), cases[c].type) && strstr(pi_last_error(), row),
                   "offloaded, %s %s: %d '%s'", cases[c].tensor, row, (int)st, pi_last_error());
        else
            CHECKF(st == PI_OK, "offloaded, %s %s (unused): %d '%s'", cases[c].tensor, row, (int)st, pi_last_error());
    }
}

int main(void) {
    test_rows();
    test_rows_every_block();
    char plain[256], bundle[256], bad[256];
    t_tmp_path(plain, sizeof plain, "validate.gguf");
    t_tmp_path(bundle, sizeof bundle, "validate.bundle.gguf");
    t_tmp_path(bad, sizeof bad, "validate.bad.gguf");
    test_model(plain, bad);
    test_bundles(plain, bundle, bad);
    unlink(plain);
    unlink(bundle);
    unlink(bad);
    return t_done("test_validate");
}
