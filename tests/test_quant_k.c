/*
 * test_quant_k.c — the K-quant quantizers (Q4_K, Q5_K, Q6_K).
 *
 *   1. byte identity with llama.cpp: the F16 model the kquant fixtures were
 *      made from is generated again with `pinfer gen-model` (its sha256 must be
 *      the one in ../shared/models/kquant/README.md, or its tensor data the
 *      recorded data below), and every q4_K, q5_K and
 *      q6_K tensor of tiny-q4_k_m.gguf and tiny-q6_k.gguf is quantized again,
 *      row by row, from that file's F16 tensor of the same name; each row must
 *      equal llama-quantize's bytes. Skipped (exit 77 when nothing failed)
 *      without $PI_TEST_PINFER, the fixtures or sha256sum, or when gen-model's
 *      output changed.
 *   2. synthetic rows (zero, constant, negative only, one huge value, random,
 *      non-finite): quantized, then dequantized, within a bound relative to
 *      the row's largest magnitude; non-finite input must only not crash.
 *      Rows are dequantized by a local decoder written from the layouts in
 *      kernels/types.h, and also by pi_dequantize_row once it handles the K
 *      types (then both must agree to 1e-6 of the row's largest value).
 */
#include "test_util.h"

#include "base/status.h"
#include "gguf/gguf.h"
#include "kernels/quant_k.h"
#include "kernels/types.h"

#include <inttypes.h>

/* The F16 input: `pinfer gen-model --preset tiny --type f16 --embd-type f16
   --output-type f16 --seed 7`. Accepted when the whole file has the sha256
   kquant/README.md records, or when its tensor data (data section to the
   end) has TINY_F16_DATA_SHA256: gen-model has since added tokenizer keys
   (tokenizer.ggml.pre, add_bos_token, add_eos_token) to the metadata, and
   llama.cpp's llama_model_quantize (the fixtures' commit) turns that data
   into exactly the fixtures' tensor data, Q4_K_M and Q6_K alike. */
#define TINY_F16_SHA256 "86029829a8eb14680e03733dd9206d5cc98bf9d2deebdda778b7894631a5cfd4"
#define TINY_F16_DATA_SHA256 "6bd82411ed8f7dbf6174be0161d57237f70c0983228ea83ad65cf589c8606f25"

static bool g_skipped;
static bool g_lib_dequant; /* pi_dequantize_row handled a K type */

/* ---- a local decoder, from the layouts described in kernels/types.h ---- */

static void unpack_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

static void local_dequant(pi_type t, const void *vx, float *y, int64_t n) {
    for (int64_t b = 0; b < n / PI_QK_K; b++, y += PI_QK_K) {
        if (t == PI_TYPE_Q4_K || t == PI_TYPE_Q5_K) {
            const uint8_t *scales, *qs, *qh = NULL;
            float d, dmin;
            if (t == PI_TYPE_Q4_K) {
                const pi_block_q4_K *x = (const pi_block_q4_K *)vx + b;
                d = pi_f16_to_f32(x->d), dmin = pi_f16_to_f32(x->dmin);
                scales = x->scales, qs = x->qs;
            } else {
                const pi_block_q5_K *x = (const pi_block_q5_K *)vx + b;
                d = pi_f16_to_f32(x->d), dmin = pi_f16_to_f32(x->dmin);
                scales = x->scales, qs = x->qs, qh = x->qh;
            }
            for (int j = 0; j < 8; j++) {
                int sc, m;
                unpack_scale_min(scales, j, &sc, &m);
                for (int l = 0; l < 32; l++) {
                    int q = (qs[32 * (j / 2) + l] >> (4 * (j & 1))) & 15;
                    if (qh) q |= ((qh[l] >> j) & 1) << 4;
                    y[32 * j + l] = d * (float)sc * (float)q - dmin * (float)m;
                }
            }
        } else { /* Q6_K */
            const pi_block_q6_K *x = (const pi_block_q6_K *)vx + b;
            const float d = pi_f16_to_f32(x->d);
            for (int i = 0; i < PI_QK_K; i++) {
                const int h = i / 128, r = i % 128, l = r % 32, quarter = r / 32;
                const uint8_t lo = x->ql[64 * h + l + 32 * (quarter & 1)] >> (4 * (quarter >> 1)) & 15;
                const int hi = (x->qh[32 * h + l] >> (2 * quarter)) & 3;
                y[i] = d * (float)x->scales[i / 16] * (float)((lo | hi << 4) - 32);
            }
        }
    }
}

static const pi_type k_types[3] = {PI_TYPE_Q4_K, PI_TYPE_Q5_K, PI_TYPE_Q6_K};

/* Quantize a row (through pi_quantize_row, which must give the bytes of the
   type's own function), dequantize it; max |error| / max |x|. */
static double roundtrip(pi_type t, const float *x, int64_t n, const char *what, bool finite) {
    const size_t rs = pi_row_size(t, n);
    uint8_t *q = malloc(rs), *q2 = malloc(rs);
    float *y = malloc((size_t)n * sizeof *y), *y2 = malloc((size_t)n * sizeof *y2);
    memset(q, 0xa5, rs);
    pi_quantize_row(t, x, q, n);
    if (t == PI_TYPE_Q4_K) pi_quantize_row_q4_K(x, (pi_block_q4_K *)q2, n);
    if (t == PI_TYPE_Q5_K) pi_quantize_row_q5_K(x, (pi_block_q5_K *)q2, n);
    if (t == PI_TYPE_Q6_K) pi_quantize_row_q6_K(x, (pi_block_q6_K *)q2, n);
    CHECKF(!memcmp(q, q2, rs), "%s %s: pi_quantize_row differs from the type's quantizer", pi_type_name(t), what);
    local_dequant(t, q, y, n);
    /* pi_dequantize_row, where it handles the type (it leaves the NaNs
       otherwise): it must agree up to the order of the float products */
    for (int64_t i = 0; i < n; i++) y2[i] = NAN;
    pi_dequantize_row(t, q, y2, n);
    if (finite && !isnan(y2[0])) {
        g_lib_dequant = true;
        const double e = t_rel_err(y2, y, n);
        CHECKF(e <= 1e-6, "%s %s: pi_dequantize_row differs from the layout by %g", pi_type_name(t), what, e);
    }
    const double e = t_rel_err(y, x, n);
    free(q), free(q2), free(y), free(y2);
    return e;
}

static void test_synthetic(void) {
    enum { N = 4 * PI_QK_K };
    static float x[N];
    t_rng rng = {2024};
    /* error bounds relative to the row's largest magnitude: half a level step
       of a sub-block's range (2 max / 15, 31, 63 levels) plus what the 6-bit
       (8-bit for Q6_K) sub-block scales lose; about 1.5 times the worst seen
       on these rows (0.068, 0.047, 0.023) */
    const double bound[3] = {0.10, 0.07, 0.035};
    double worst[3] = {0};
    for (int k = 0; k < 3; k++) {
        const pi_type t = k_types[k];
        const char *tn = pi_type_name(t);

        /* all zero: every byte zero, and zeros back */
        memset(x, 0, sizeof x);
        {
            const size_t rs = pi_row_size(t, N);
            uint8_t *q = malloc(rs);
            float y[N];
            memset(q, 0x5a, rs);
            pi_quantize_row(t, x, q, N);
            size_t nz = 0;
            for (size_t i = 0; i < rs; i++) nz += q[i] != 0;
            CHECKF(nz == 0, "%s: zero row has %zu non-zero bytes", tn, nz);
            local_dequant(t, q, y, N);
            double m = 0;
            for (int i = 0; i < N; i++) m = fabs(y[i]) > m ? fabs(y[i]) : m; /* (fmax here crashes aarch64 gcc 12) */
            CHECKF(m == 0, "%s: zero row dequantizes to %g", tn, m);
            free(q);
        }

        double e;
        /* constants, both signs and several magnitudes */
        const float consts[] = {1.0f, -1.0f, 0.37f, -2.5e-3f, 1000.0f, -42.0f};
        for (size_t c = 0; c < sizeof consts / sizeof consts[0]; c++) {
            for (int i = 0; i < N; i++) x[i] = consts[c];
            e = roundtrip(t, x, N, "constant", true);
            worst[k] = fmax(worst[k], e);
            CHECKF(e <= bound[k], "%s: constant %g: relative error %g", tn, consts[c], e);
        }
        /* negative only */
        for (int i = 0; i < N; i++) x[i] = -0.1f - 0.9f * fabsf(t_uniform(&rng));
        e = roundtrip(t, x, N, "negative", true);
        worst[k] = fmax(worst[k], e);
        CHECKF(e <= bound[k], "%s: negative row: relative error %g", tn, e);
        /* random normal rows at several scales */
        const float mags[] = {1.0f, 0.02f, 30.0f};
        for (size_t s = 0; s < sizeof mags / sizeof mags[0]; s++) {
            for (int r = 0; r < 8; r++) {
                for (int i = 0; i < N; i++) x[i] = mags[s] * t_normal(&rng);
                e = roundtrip(t, x, N, "normal", true);
                worst[k] = fmax(worst[k], e);
                CHECKF(e <= bound[k], "%s: normal row (scale %g): relative error %g", tn, mags[s], e);
            }
        }
        /* one huge value among normal ones, at several places (first, middle of
           a sub-block, last), both signs; 3e4 keeps the scales inside f16 */
        const int where[] = {0, 77, N - 1};
        for (int w = 0; w < 3; w++) {
            for (int sgn = -1; sgn <= 1; sgn += 2) {
                for (int i = 0; i < N; i++) x[i] = t_normal(&rng);
                x[where[w]] = (float)sgn * 3e4f;
                e = roundtrip(t, x, N, "huge value", true);
                worst[k] = fmax(worst[k], e);
                CHECKF(e <= bound[k], "%s: huge value %d at %d: relative error %g", tn, sgn, where[w], e);
            }
        }
        /* non-finite values, and magnitudes past f16: only memory safety */
        const float odd[] = {NAN, INFINITY, -INFINITY, 3e38f, -1e30f};
        for (size_t o = 0; o < sizeof odd / sizeof odd[0]; o++) {
            for (int i = 0; i < N; i++) x[i] = t_normal(&rng);
            x[5] = odd[o];
            x[300] = odd[o];
            (void)roundtrip(t, x, N, "non-finite", false);
            for (int i = 0; i < N; i++) x[i] = odd[o];
            (void)roundtrip(t, x, N, "non-finite", false);
        }
        fprintf(stderr, "%s: synthetic round trips: worst relative error %.4f (bound %.3f)\n", tn, worst[k], bound[k]);
    }
    fprintf(stderr, "round trips decoded by the local decoder%s\n",
            g_lib_dequant ? " and pi_dequantize_row (agreeing)"
                          : " only: pi_dequantize_row does not handle the K types");
}

/* ---- byte identity with llama-quantize ---- */

/* sha256 of a file's bytes from offset on, as 64 hex digits into out[65];
   false when sha256sum cannot be run. */
static bool sha256_file(const char *path, uint64_t offset, char out[65]) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "tail -c +%" PRIu64 " '%s' 2>/dev/null | sha256sum 2>/dev/null", offset + 1, path);
    FILE *p = popen(cmd, "r");
    if (!p) return false;
    bool ok = fscanf(p, "%64s", out) == 1 && strlen(out) == 64;
    return pclose(p) == 0 && ok;
}

typedef struct {
    int64_t tensors[3], rows[3], bad_rows[3];
} identity_counts;

static int type_index(uint32_t t) {
    for (int k = 0; k < 3; k++)
        if (k_types[k] == t) return k;
    return -1;
}

/* Every K-quant tensor of the fixture against the F16 source. */
static void compare_file(const pi_gguf *src, const char *fixture, identity_counts *c) {
    char path[1024];
    if (!t_fixture(path, sizeof path, fixture)) {
        g_skipped = true;
        return;
    }
    pi_gguf *g = NULL;
    CHECKF(pi_gguf_open(path, &g) == PI_OK, "%s", pi_last_error());
    if (!g) return;
    int reports = 0;
    for (int64_t ti = 0; ti < pi_gguf_n_tensors(g); ti++) {
        const pi_gguf_tensor *t = pi_gguf_tensor_at(g, ti);
        const int k = type_index(t->type);
        if (k < 0) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(t->name.len < 255 ? t->name.len : 255), t->name.data);
        const pi_gguf_tensor *s = pi_gguf_find_tensor(src, name);
        CHECKF(s && s->type == PI_TYPE_F16, "%s: %s has no F16 source tensor", fixture, name);
        if (!s || s->type != PI_TYPE_F16) continue;
        bool same_shape = s->n_dims == t->n_dims;
        for (int d = 0; d < PI_GGUF_MAX_DIMS; d++) same_shape = same_shape && s->ne[d] == t->ne[d];
        CHECKF(same_shape, "%s: %s: shape differs from the F16 tensor", fixture, name);
        if (!same_shape || t->ne[0] % PI_QK_K) continue;
        const int64_t ne0 = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
        const size_t rs = pi_row_size((pi_type)t->type, ne0);
        CHECK((uint64_t)rs * (uint64_t)rows == t->nbytes);
        float *f = malloc((size_t)ne0 * sizeof *f);
        uint8_t *q = malloc(rs);
        int64_t bad = 0;
        for (int64_t r = 0; r < rows; r++) {
            pi_dequantize_row(PI_TYPE_F16, (const uint8_t *)s->data + (size_t)r * (size_t)ne0 * 2, f, ne0);
            pi_quantize_row((pi_type)t->type, f, q, ne0);
            const uint8_t *want = (const uint8_t *)t->data + (size_t)r * rs;
            if (memcmp(q, want, rs)) {
                size_t b = 0;
                while (q[b] == want[b]) b++;
                if (bad++ == 0 || reports < 20) {
                    fprintf(stderr,
                            "%s: %s (%s) row %" PRId64 ": first differing byte %zu of %zu (block %zu, offset %zu): "
                            "got 0x%02x, llama.cpp 0x%02x\n",
                            fixture, name, pi_type_name(t->type), r, b, rs, b / pi_type_get(t->type)->size,
                            b % pi_type_get(t->type)->size, q[b], want[b]);
                    reports++;
                }
            }
        }
        CHECKF(bad == 0, "%s: %s: %" PRId64 " of %" PRId64 " rows differ from llama.cpp's", fixture, name, bad, rows);
        c->tensors[k]++;
        c->rows[k] += rows;
        c->bad_rows[k] += bad;
        free(f);
        free(q);
    }
    pi_gguf_close(g);
}

static void test_identity(void) {
    const char *pinfer, *runner;
    if (!t_pinfer_binary(&pinfer, &runner)) {
        g_skipped = true;
        return;
    }
    char dir[256], f16[300], err[320], cmd[2048];
    if (!t_fixture(dir, sizeof dir, "kquant/README.md")) {
        g_skipped = true;
        return;
    }
    t_tmp_path(f16, sizeof f16, "kquant-f16.gguf");
    snprintf(err, sizeof err, "%s.err", f16);
    snprintf(cmd, sizeof cmd,
             "%s %s gen-model --preset tiny --type f16 --embd-type f16 --output-type f16 --seed 7 -o %s "
             ">/dev/null 2>%s",
             runner, pinfer, f16, err);
    const int rc = t_sh(cmd);
    CHECKF(rc == 0, "gen-model exited %d (see %s)", rc, err);
    if (rc != 0) return;
    unlink(err);
    pi_gguf *src = NULL;
    CHECKF(pi_gguf_open(f16, &src) == PI_OK, "%s", pi_last_error());
    if (!src) {
        unlink(f16);
        return;
    }
    char sum[65] = "", data_sum[65] = "";
    if (!sha256_file(f16, 0, sum) || !sha256_file(f16, pi_gguf_data_offset(src), data_sum)) {
        fprintf(stderr, "skip: byte identity: cannot run sha256sum\n");
        g_skipped = true;
    } else if (strcmp(sum, TINY_F16_SHA256) != 0 && strcmp(data_sum, TINY_F16_DATA_SHA256) != 0) {
        fprintf(stderr,
                "skip: byte identity: gen-model's output changed (sha256 %s, tensor data %s; the fixtures were "
                "made from %s, tensor data %s); regenerate the F16 input as kquant/README.md says\n",
                sum, data_sum, TINY_F16_SHA256, TINY_F16_DATA_SHA256);
        g_skipped = true;
    }
    if (g_skipped) {
        pi_gguf_close(src);
        unlink(f16);
        return;
    }
    if (strcmp(sum, TINY_F16_SHA256) != 0)
        fprintf(stderr, "F16 input: the file differs from the README's (metadata), its tensor data is the same\n");
    identity_counts c4 = {{0}, {0}, {0}}, c6 = {{0}, {0}, {0}};
    compare_file(src, "kquant/tiny-q4_k_m.gguf", &c4);
    compare_file(src, "kquant/tiny-q6_k.gguf", &c6);
    const identity_counts *cs[2] = {&c4, &c6};
    const char *names[2] = {"tiny-q4_k_m.gguf", "tiny-q6_k.gguf"};
    for (int f = 0; f < 2; f++) {
        for (int k = 0; k < 3; k++) {
            if (!cs[f]->tensors[k]) continue;
            fprintf(stderr, "%s: %s: %" PRId64 " tensors, %" PRId64 " rows, %" PRId64 " byte-identical\n",
                    names[f], pi_type_name(k_types[k]), cs[f]->tensors[k], cs[f]->rows[k],
                    cs[f]->rows[k] - cs[f]->bad_rows[k]);
        }
    }
    /* what the fixtures hold (kquant/README.md; 39 tensors, 9 of them F32
       norms), when they were found */
    if (c4.tensors[0] + c4.tensors[2]) CHECK(c4.tensors[0] == 25 && c4.tensors[2] == 5);
    if (c6.tensors[0] + c6.tensors[2]) CHECK(c6.tensors[2] == 30 && c6.tensors[0] == 0);
    pi_gguf_close(src);
    unlink(f16);
}

int main(void) {
    test_synthetic();
    test_identity();
    if (g_skipped && t_failures == 0) {
        fprintf(stderr, "test_quant_k: synthetic checks passed (%d); byte identity skipped\n", t_checks);
        return PI_TEST_SKIP;
    }
    return t_done("test_quant_k");
}
