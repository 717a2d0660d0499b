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
 *    a bundle file — each refused with a message, nothing written.
 */
#include "test_util.h"

#include "gguf/gguf.h"

#include <limits.h>
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
        char cmd[1024], sum[128] = "";
        snprintf(cmd, sizeof cmd, "sha256sum %s | cut -c1-64", f16);
        FILE *p = popen(cmd, "r");
        if (p) {
            if (!fgets(sum, sizeof sum, p)) sum[0] = '\0';
            pclose(p);
        }
        sum[strcspn(sum, "\n")] = '\0';
        if (!sum[0] || !t_file_has(dir, sum)) {
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
            /* the thread count does not change the bytes */
            snprintf(args, sizeof args, "quantize -t 1 %s %s q4_k_m", f16, out);
            CHECK(pinfer(args, err) == 0);
            snprintf(ref, sizeof ref, "%s/kquant/tiny-q4_k_m.gguf", t_models_dir());
            same_tensors(out, ref, "q4_k_m, one thread");
        }
    }

    /* 2. other recipes, and pinfer's own tensors */
    char relu[300], bundle[300];
    snprintf(relu, sizeof relu, "%s-relu.gguf", g_tmp);
    snprintf(bundle, sizeof bundle, "%s-bundle.gguf", g_tmp);
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

    snprintf(args, sizeof args, "%s-q8.gguf", g_tmp);
    unlink(args);
    unlink(f16), unlink(out), unlink(err), unlink(relu), unlink(bundle);
    snprintf(f16, sizeof f16, "%s-dir", g_tmp);
    rmdir(f16);
    return t_done("test_quantize");
}
