/*
 * test_quantize.c — `pinfer quantize` end to end:
 *  - from the F16 model the K-quant fixtures were made from (gen-model, its
 *    sha256 checked against ../shared/models/kquant/README.md), q4_k_m and
 *    q6_k give every tensor with the type and the bytes llama-quantize gave
 *    it in tiny-q4_k_m.gguf and tiny-q6_k.gguf;
 *  - the recipes' other types: q8_0 keeps a Q8_0 head, q4_0 takes llama.cpp's
 *    Q6_K head; pinfer's predictors keep their type and ffn_down_t takes its
 *    layer's ffn_down type; the outputs load and generate;
 *  - bad input: OUT naming IN, an unknown TYPE or option, a quantized input,
 *    a bundle file — each refused with a message, nothing written;
 *  - llama.cpp's fallbacks on models whose rows are not multiples of 256
 *    (relu-stories, dim 128; stories260K, dim 64, n_ff 172): which tensors
 *    become Q5_0 / Q5_1 / Q8_0 / F16 under q4_k_m, q5_k_m and q6_k, every
 *    Q5_0 / Q5_1 row equal to the reference quantizer's bytes and within a
 *    step of its input when dequantized, and a digest of every tensor's name,
 *    type and bytes equal to that of llama-quantize's output of the same
 *    input and type (llama.cpp at c392e509; see expected_digests).
 */
#include "test_util.h"

#include "gguf/gguf.h"

#include <limits.h>
#include <math.h>
#include <unistd.h>
#include <sys/stat.h>

static const char *g_pinfer, *g_runner;
static char g_tmp[256];

static int pinfer(const char *args, const char *err_path) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s %s >/dev/null 2>%s", g_runner, g_pinfer, args, err_path ? err_path : "/dev/null");
    return t_sh(cmd);
}

/* Every tensor of want is in got with the same type, shape and bytes. */
static void same_tensors(const char *got_path, const char *want_path, const char *what) {
    pi_gguf *got = NULL, *want = NULL;
    CHECKF(pi_gguf_open(got_path, &got) == PI_OK && pi_gguf_open(want_path, &want) == PI_OK, "%s: %s", what,
           pi_last_error());
    if (!got || !want) goto out;
    CHECKF(pi_gguf_n_tensors(got) == pi_gguf_n_tensors(want), "%s: %lld tensors, llama-quantize wrote %lld", what,
           (long long)pi_gguf_n_tensors(got), (long long)pi_gguf_n_tensors(want));
    int64_t same = 0, quant = 0;
    for (int64_t i = 0; i < pi_gguf_n_tensors(want); i++) {
        const pi_gguf_tensor *w = pi_gguf_tensor_at(want, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)w->name.len, w->name.data);
        const pi_gguf_tensor *g = pi_gguf_find_tensor(got, name);
        CHECKF(g != NULL, "%s: %s missing", what, name);
        if (!g) continue;
        CHECKF(g->type == w->type, "%s: %s is %s, llama-quantize made it %s", what, name, pi_type_name(g->type),
               pi_type_name(w->type));
        const bool eq = g->type == w->type && g->nbytes == w->nbytes && !memcmp(g->data, w->data, w->nbytes);
        CHECKF(eq, "%s: %s (%s): bytes differ from llama-quantize's", what, name, pi_type_name(w->type));
        same += eq;
        quant += w->type != PI_TYPE_F32;
    }
    fprintf(stderr, "%s: %lld of %lld tensors byte-identical to llama-quantize's (%lld quantized)\n", what,
            (long long)same, (long long)pi_gguf_n_tensors(want), (long long)quant);
out:
    pi_gguf_close(got);
    pi_gguf_close(want);
}

static uint32_t type_of(const char *path, const char *name) {
    pi_gguf *g = NULL;
    uint32_t t = 999;
    if (pi_gguf_open(path, &g) == PI_OK) {
        const pi_gguf_tensor *x = pi_gguf_find_tensor(g, name);
        if (x) t = x->type;
    }
    pi_gguf_close(g);
    return t;
}

/* The sha256 of a file's bytes, as sha256sum prints it. */
static bool file_sha256(const char *path, char sum[65]) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "sha256sum %s | cut -c1-64", path);
    FILE *p = popen(cmd, "r");
    bool ok = false;
    if (p) {
        ok = fgets(sum, 65, p) != NULL && strlen(sum) == 64;
        pclose(p);
    }
    return ok;
}

/* The sha256 of every tensor of out, in the order of in's tensor table:
   its name, a NUL, its type (4 bytes, little-endian) and its bytes. */
static bool digest(const char *in_path, const char *out_path, char sum[65]) {
    pi_gguf *in = NULL, *out = NULL;
    bool ok = false;
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s-digest", g_tmp);
    FILE *f = fopen(tmp, "wb");
    if (!f || pi_gguf_open(in_path, &in) != PI_OK || pi_gguf_open(out_path, &out) != PI_OK) goto done;
    for (int64_t i = 0; i < pi_gguf_n_tensors(in); i++) {
        const pi_gguf_tensor *t = pi_gguf_tensor_at(in, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.data);
        const pi_gguf_tensor *o = pi_gguf_find_tensor(out, name);
        if (!o) goto done;
        const uint8_t ty[4] = {(uint8_t)o->type, (uint8_t)(o->type >> 8), (uint8_t)(o->type >> 16),
                               (uint8_t)(o->type >> 24)};
        fwrite(name, 1, strlen(name) + 1, f);
        fwrite(ty, 1, 4, f);
        fwrite(o->data, 1, o->nbytes, f);
    }
    if (fclose(f) != 0) {
        f = NULL;
        goto done;
    }
    f = NULL;
    ok = file_sha256(tmp, sum);
done:
    if (f) fclose(f);
    pi_gguf_close(in);
    pi_gguf_close(out);
    unlink(tmp);
    return ok;
}

/* Every Q5_0 / Q5_1 / Q4_1 tensor of out: each row is what pi_quantize_row
   makes of in's row, and dequantized it is within one step of it (a
   block's max |x| / 16 for Q5_0, its (max - min) / levels otherwise, with
   slack for the f16 scale and offset). Returns how many tensors it checked. */
static int round_trips(const char *in_path, const char *out_path, const char *what) {
    pi_gguf *in = NULL, *out = NULL;
    int checked = 0;
    if (pi_gguf_open(in_path, &in) != PI_OK || pi_gguf_open(out_path, &out) != PI_OK) goto done;
    for (int64_t i = 0; i < pi_gguf_n_tensors(out); i++) {
        const pi_gguf_tensor *o = pi_gguf_tensor_at(out, i);
        if (o->type != PI_TYPE_Q4_1 && o->type != PI_TYPE_Q5_0 && o->type != PI_TYPE_Q5_1) continue;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)o->name.len, o->name.data);
        const pi_gguf_tensor *t = pi_gguf_find_tensor(in, name);
        CHECKF(t != NULL, "%s: %s not in the input", what, name);
        if (!t) continue;
        const int64_t n = o->ne[0], rows = (int64_t)(o->nbytes / pi_row_size((pi_type)o->type, n));
        const size_t ib = pi_row_size((pi_type)t->type, n), ob = pi_row_size((pi_type)o->type, n);
        float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
        uint8_t *q = malloc(ob);
        int bytes_bad = 0, far = 0;
        for (int64_t r = 0; r < rows; r++) {
            pi_dequantize_row((pi_type)t->type, (const uint8_t *)t->data + (size_t)r * ib, x, n);
            pi_quantize_row((pi_type)o->type, x, q, n);
            const uint8_t *orow = (const uint8_t *)o->data + (size_t)r * ob;
            bytes_bad += memcmp(q, orow, ob) != 0;
            pi_dequantize_row((pi_type)o->type, orow, y, n);
            for (int64_t b = 0; b < n / 32; b++) {
                float lo = x[32 * b], hi = lo, amax = 0;
                for (int j = 0; j < 32; j++) {
                    lo = fminf(lo, x[32 * b + j]), hi = fmaxf(hi, x[32 * b + j]);
                    amax = fmaxf(amax, fabsf(x[32 * b + j]));
                }
                const double step = o->type == PI_TYPE_Q5_0 ? amax / 16.0
                                                            : (hi - lo) / (o->type == PI_TYPE_Q4_1 ? 15.0 : 31.0);
                for (int j = 0; j < 32; j++)
                    far += fabs((double)x[32 * b + j] - y[32 * b + j]) > step * 1.01 + amax * 1e-3;
            }
        }
        CHECKF(bytes_bad == 0, "%s: %s (%s): %d rows differ from pi_quantize_row's", what, name,
               pi_type_name(o->type), bytes_bad);
        CHECKF(far == 0, "%s: %s (%s): %d weights more than a step from the input", what, name,
               pi_type_name(o->type), far);
        checked++;
        free(x), free(y), free(q);
    }
done:
    pi_gguf_close(in);
    pi_gguf_close(out);
    return checked;
}

/* What llama-quantize (llama.cpp c392e509, no importance matrix) wrote for
   these fixtures, as digest() computes it; every tensor was also compared
   byte for byte when these were recorded. */
static const struct {
    const char *model, *input_sha256, *recipe, *digest;
} expected_digests[] = {
    {"relu/relu-stories.gguf", "fb294f8e933b9e30d51dc04f538d8f8ee5f9dfacb822795f501e148dcb582d68", "q4_k_m",
     "37b189fa249372085240824d930b52bf5e0ae816ad9fac8c5736957fd7522cbb"},
    {"relu/relu-stories.gguf", "fb294f8e933b9e30d51dc04f538d8f8ee5f9dfacb822795f501e148dcb582d68", "q5_k_m",
     "69951a0b7aee5defbefe0b36942b71c307b7ceb113921be7b4b306f8bc5e5fb7"},
    {"relu/relu-stories.gguf", "fb294f8e933b9e30d51dc04f538d8f8ee5f9dfacb822795f501e148dcb582d68", "q6_k",
     "cc3e777acaf2c559c63507cdebdea8bb79095d4d747ec4092fa2ea2940945803"},
    {"stories260K.gguf", "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d", "q4_k_m",
     "7a932d8603d832bc37d6b5ff975448cac0af3cf93c22d3729bac10955653f44e"},
    {"stories260K.gguf", "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d", "q5_k_m",
     "670c86c2d525f9f76bde1ceb0faa1905b0279d6a4bfea19a447a71decee77edd"},
    {"stories260K.gguf", "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d", "q6_k",
     "3014c046fe63338ea1d8e70a0c72fa3ac0892f48b78fa2d537e9467f84f186d2"},
};

/* 4. The fallbacks of rows that are not multiples of 256. */
static void test_fallbacks(const char *out, const char *err) {
    char path[512], args[2048];
    if (!t_fixture(path, sizeof path, "relu/relu-stories.gguf") || access(path, R_OK) != 0) {
        fprintf(stderr, "skip (fallbacks): no %s\n", path);
        return;
    }
    /* relu-stories: 6 layers of dim 128 (n_ff 512): every row of 128 falls
       back; ffn_down's rows of 512 do not; layers 2 and 5 get more bits */
    static const struct {
        const char *recipe, *fallback_type;
        uint32_t q, v_more, down, down_more, output;
        const char *summary;
    } cases[] = {
        {"q4_k_m", "q5_0", PI_TYPE_Q5_0, PI_TYPE_Q8_0, PI_TYPE_Q4_K, PI_TYPE_Q6_K, PI_TYPE_Q8_0,
         "13 f32, 35 q5_0, 3 q8_0, 4 q4_K, 2 q6_K"},
        {"q5_k_m", "q5_1", PI_TYPE_Q5_1, PI_TYPE_Q8_0, PI_TYPE_Q5_K, PI_TYPE_Q6_K, PI_TYPE_Q8_0,
         "13 f32, 35 q5_1, 3 q8_0, 4 q5_K, 2 q6_K"},
        {"q6_k", "q8_0", PI_TYPE_Q8_0, PI_TYPE_Q8_0, PI_TYPE_Q6_K, PI_TYPE_Q6_K, PI_TYPE_Q8_0,
         "13 f32, 38 q8_0, 6 q6_K"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        snprintf(args, sizeof args, "quantize -t 2 %s %s %s", path, out, cases[c].recipe);
        CHECKF(pinfer(args, err) == 0, "quantize relu-stories %s failed", cases[c].recipe);
        CHECKF(t_file_has(err, cases[c].summary) && t_file_has(err, "fell back"), "relu-stories %s: not \"%s\"",
               cases[c].recipe, cases[c].summary);
        const char *r = cases[c].recipe;
        CHECKF(type_of(out, "token_embd.weight") == cases[c].q && type_of(out, "blk.0.attn_q.weight") == cases[c].q &&
                   type_of(out, "blk.3.attn_k.weight") == cases[c].q &&
                   type_of(out, "blk.5.attn_output.weight") == cases[c].q &&
                   type_of(out, "blk.1.ffn_gate.weight") == cases[c].q &&
                   type_of(out, "blk.4.ffn_up.weight") == cases[c].q,
               "relu-stories %s: rows of 128 are not %s", r, cases[c].fallback_type);
        CHECKF(type_of(out, "blk.0.attn_v.weight") == cases[c].q &&
                   type_of(out, "blk.2.attn_v.weight") == cases[c].v_more &&
                   type_of(out, "blk.5.attn_v.weight") == cases[c].v_more,
               "relu-stories %s: attn_v types", r);
        CHECKF(type_of(out, "blk.0.ffn_down.weight") == cases[c].down &&
                   type_of(out, "blk.2.ffn_down.weight") == cases[c].down_more &&
                   type_of(out, "blk.5.ffn_down.weight") == cases[c].down_more,
               "relu-stories %s: ffn_down types", r);
        CHECKF(type_of(out, "output.weight") == cases[c].output &&
                   type_of(out, "blk.0.attn_norm.weight") == PI_TYPE_F32,
               "relu-stories %s: output / norm types", r);
        if (cases[c].q != PI_TYPE_Q8_0)
            CHECKF(round_trips(path, out, r) == 35, "relu-stories %s: not 35 tensors of the fallback type", r);
    }
    snprintf(args, sizeof args, "run -m %s -p 'Once upon' -n 8 --temp 0", out);
    CHECK(pinfer(args, err) == 0); /* the last one (q6_k); q4_k_m and q5_k_m load in the digest loop */

    /* stories260K: n_ff 172 fits no block of 32, so its ffn_down falls back to F16 */
    if (t_fixture(path, sizeof path, "stories260K.gguf") && access(path, R_OK) == 0) {
        snprintf(args, sizeof args, "quantize %s %s q4_k_m", path, out);
        CHECK(pinfer(args, err) == 0);
        CHECK(type_of(out, "blk.0.ffn_down.weight") == PI_TYPE_F16 &&
              type_of(out, "blk.0.ffn_up.weight") == PI_TYPE_Q5_0 && type_of(out, "blk.2.attn_v.weight") == PI_TYPE_Q8_0 && type_of(out, "output.weight") == PI_TYPE_Q8_0);
    }

    /* llama-quantize's bytes, where the fixtures are the ones recorded */
    for (size_t k = 0; k < sizeof expected_digests / sizeof expected_digests[0]; k++) {
        char sum[65] = "", dsum[65] = "";
        t_fixture(path, sizeof path, expected_digests[k].model);
        if (!file_sha256(path, sum) || strcmp(sum, expected_digests[k].input_sha256)) {
            fprintf(stderr, "skip (llama-quantize digest): %s is not the file recorded\n", path);
            continue;
        }
        snprintf(args, sizeof args, "quantize %s %s %s", path, out, expected_digests[k].recipe);
        CHECK(pinfer(args, err) == 0);
        CHECKF(digest(path, out, dsum) && !strcmp(dsum, expected_digests[k].digest),
               "%s %s: tensors differ from llama-quantize's (digest %s)", expected_digests[k].model,
               expected_digests[k].recipe, dsum);
        snprintf(args, sizeof args, "run -m %s -p 'Once upon' -n 4 --temp 0", out);
        CHECKF(pinfer(args, err) == 0, "%s %s does not run", expected_digests[k].model, expected_digests[k].recipe);
    }
}

int main(void) {
    if (!t_pinfer_binary(&g_pinfer, &g_runner)) return PI_TEST_SKIP;
    t_tmp_path(g_tmp, sizeof g_tmp, "quantize");
    char f16[300], out[300], err[300], args[2048], ref[512], dir[512];
    /* the file's name is part of what gen-model writes: the README's command exactly, in a directory of its own */
    snprintf(f16, sizeof f16, "%s-dir", g_tmp);
    mkdir(f16, 0700);
    snprintf(f16, sizeof f16, "%s-dir/tiny-f16.gguf", g_tmp);
    snprintf(out, sizeof out, "%s-out.gguf", g_tmp);
    snprintf(err, sizeof err, "%s.err", g_tmp);

    /* 1. byte identity with llama-quantize, from the fixtures' own F16 input */
    if (t_fixture(dir, sizeof dir, "kquant/README.md")) {
        char abs[PATH_MAX], cmd0[PATH_MAX + 1024];
        CHECK(realpath(g_pinfer, abs) != NULL);
        snprintf(cmd0, sizeof cmd0, "cd %s-dir && %s %s gen-model --preset tiny --type f16 --embd-type f16 "
                 "--output-type f16 --seed 7 -o tiny-f16.gguf >/dev/null 2>%s", g_tmp, g_runner, abs, err);
        CHECK(t_sh(cmd0) == 0);
        char sum[65] = "";
        if (!file_sha256(f16, sum) || !t_file_has(dir, sum)) {
            fprintf(stderr, "skip (byte identity): gen-model's F16 output changed (sha256 %s is not the README's)\n", sum);
        } else {
            static const char *const types[] = {"q4_k_m", "q6_k"};
            for (int k = 0; k < 2; k++) {
                snprintf(args, sizeof args, "quantize -t 2 %s %s %s", f16, out, types[k]);
                CHECKF(pinfer(args, err) == 0, "quantize %s failed", types[k]);
                snprintf(ref, sizeof ref, "%s/kquant/tiny-%s.gguf", t_models_dir(), types[k]);
                same_tensors(out, ref, types[k]);
                CHECK(t_file_has(err, "quantize: wrote"));
            }
            /* the thread count does not change the bytes (not under an
               emulator: the threads' split is the same code on every CPU) */
            if (!t_emulated()) {
                snprintf(args, sizeof args, "quantize -t 1 %s %s q4_k_m", f16, out);
                CHECK(pinfer(args, err) == 0);
                snprintf(ref, sizeof ref, "%s/kquant/tiny-q4_k_m.gguf", t_models_dir());
                same_tensors(out, ref, "q4_k_m, one thread");
            }
        }
    }

    /* 2 and 3 check which type each tensor gets and what is refused: the same
       C on every CPU, so natively only (under an emulator the gen-model and
       K-quant runs they need took half of this test's time) */
    char relu[300], bundle[300];
    snprintf(relu, sizeof relu, "%s-relu.gguf", g_tmp);
    snprintf(bundle, sizeof bundle, "%s-bundle.gguf", g_tmp);
    if (t_emulated()) {
        fprintf(stderr, "note: emulated: the recipes and refusals (parts 2 and 3) run natively only\n");
    } else {
        /* 2. other recipes, and pinfer's own tensors */
        snprintf(args, sizeof args,
                 "gen-model --preset tiny --type f16 --embd-type f16 --output-type f16 --act relu --active 0.1 --predictor "
                 "-o %s --bundle-out %s", relu, bundle);
        CHECK(pinfer(args, err) == 0);
        /* the plain file has no predictors: make one with them for the recipe */
        snprintf(args, sizeof args, "gen-model --preset tiny --type f16 --embd-type f16 --output-type f16 --act relu "
                 "--active 0.1 --predictor -o %s", relu);
        CHECK(pinfer(args, err) == 0);
        const uint32_t fc1 = type_of(relu, "blk.0.fc1.weight");
        CHECK(fc1 != 999);
        snprintf(args, sizeof args, "quantize %s %s q8_0", relu, out);
        CHECK(pinfer(args, err) == 0);
        CHECK(type_of(out, "output.weight") == PI_TYPE_Q8_0 && type_of(out, "blk.0.ffn_gate.weight") == PI_TYPE_Q8_0);
        CHECK(type_of(out, "blk.0.fc1.weight") == fc1 && type_of(out, "blk.0.attn_norm.weight") == PI_TYPE_F32);
        snprintf(args, sizeof args, "run -m %s -p 'Once upon' -n 8 --temp 0", out);
        CHECK(pinfer(args, err) == 0);
        snprintf(args, sizeof args, "quantize %s %s q4_0", relu, out);
        const int q40 = pinfer(args, err);
        { /* llama.cpp's q4_0 recipe writes the head in Q6_K: it needs the K-quant kernels */
            const pi_type_info *q6 = pi_type_get(PI_TYPE_Q6_K);
            if (q6 && q6->compute) {
                CHECK(q40 == 0 && type_of(out, "output.weight") == PI_TYPE_Q6_K &&
                      type_of(out, "blk.0.ffn_up.weight") == PI_TYPE_Q4_0);
                snprintf(args, sizeof args, "quantize %s %s q4_k_m", relu, out);
                CHECK(pinfer(args, err) == 0);
                /* four layers: layers 2 ((i - n/8) % 3 == 2) and 3 (i >= 7n/8) get more bits */
                CHECK(type_of(out, "blk.2.ffn_down.weight") == PI_TYPE_Q6_K &&
                      type_of(out, "blk.3.ffn_down.weight") == PI_TYPE_Q6_K &&
                      type_of(out, "blk.2.ffn_down_t.weight") == PI_TYPE_Q6_K &&
                      type_of(out, "blk.0.ffn_down.weight") == PI_TYPE_Q4_K &&
                      type_of(out, "blk.0.ffn_down_t.weight") == PI_TYPE_Q4_K && type_of(out, "blk.0.fc1.weight") == fc1);
                snprintf(args, sizeof args, "run -m %s -p 'Once upon' -n 8 --temp 0", out);
                CHECK(pinfer(args, err) == 0);
            } else
                CHECK(q40 == 1 && t_file_has(err, "q6_K"));
        }

        /* 3. bad input: exit status 2 for usage, 1 for what the files are; nothing written */
        unlink(out);
        snprintf(args, sizeof args, "quantize %s %s q8_0", relu, relu);
        CHECK(pinfer(args, err) == 2 && t_file_has(err, "same file"));
        snprintf(args, sizeof args, "quantize %s %s q3_x", relu, out);
        CHECK(pinfer(args, err) == 2 && t_file_has(err, "unknown type 'q3_x'"));
        snprintf(args, sizeof args, "quantize --frobnicate %s %s q8_0", relu, out);
        CHECK(pinfer(args, err) == 2 && t_file_has(err, "--frobnicate"));
        snprintf(args, sizeof args, "quantize %s %s", relu, out);
        CHECK(pinfer(args, err) == 2);
        snprintf(args, sizeof args, "quantize %s %s q4_0", bundle, out);
        CHECK(pinfer(args, err) == 1 && t_file_has(err, "bundle file"));
        snprintf(args, sizeof args, "quantize %s %s-q8.gguf q8_0", relu, g_tmp);
        CHECK(pinfer(args, err) == 0);
        snprintf(args, sizeof args, "quantize %s-q8.gguf %s q4_0", g_tmp, out);
        CHECK(pinfer(args, err) == 1 && t_file_has(err, "already quantized"));
        snprintf(args, sizeof args, "quantize /nonexistent.gguf %s q8_0", out);
        CHECK(pinfer(args, err) == 1 && t_file_has(err, "nonexistent"));
        struct stat sb;
        CHECK(stat(out, &sb) != 0); /* no refused run left a file */
    }

    /* 4. llama.cpp's fallbacks */
    test_fallbacks(out, err);
    unlink(out);

    snprintf(args, sizeof args, "%s-q8.gguf", g_tmp);
    unlink(args);
    unlink(f16), unlink(out), unlink(err), unlink(relu), unlink(bundle);
    snprintf(f16, sizeof f16, "%s-dir", g_tmp);
    rmdir(f16);
    return t_done("test_quantize");
}
