/*
 * cmd_gen_model.c — `pinfer gen-model`: write a llama GGUF with random
 * weights of a chosen shape and type (for tests and benchmarks).
 */
#include "args.h"
#include "cmds.h"

#include "base/timer.h"
#include "model/genmodel.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: pinfer gen-model -o FILE [options]\n"
            "  --preset NAME        shape: 7b-l8 (default), 7b, small, tiny\n"
            "  --type T             attention/FFN matrices: q4_0 (default), q8_0, f16, bf16, f32\n"
            "  --embd-type T        token embedding (default q4_0)\n"
            "  --output-type T      output head (default q8_0)\n"
            "  --dim N --n-head N --n-head-kv N --ffn N --layers N --ctx N --vocab-size N\n"
            "                       override the preset's shape\n"
            "  --act A              FFN activation: silu (default), relu, drelu\n"
            "  --vocab FILE         copy the tokenizer from this GGUF (default: ../shared/models/vocab/\n"
            "                       ggml-vocab-llama-spm.gguf when present, else a byte-level vocabulary)\n"
            "  --seed N             weights are a function of the seed only (default 1)\n"
            "  -t N                 threads (default: all cores)\n");
}

static bool parse_type(const char *opt, const char *v, pi_type *out) {
    int t = pi_type_from_name(v);
    if (t < 0 || !pi_type_get((uint32_t)t)->compute) {
        fprintf(stderr, "pinfer: gen-model: %s '%s' is not one of f32, f16, bf16, q8_0, q4_0\n", opt, v);
        return false;
    }
    *out = (pi_type)t;
    return true;
}

int cmd_gen_model(int argc, char **argv) {
    const char *cmd = "gen-model", *out = NULL, *preset = "7b-l8", *vocab = NULL;
    pi_genmodel_params p;
    /* the preset is applied first, the shape options after it */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--preset") && i + 1 < argc) preset = argv[i + 1];
    if (pi_genmodel_preset(preset, &p)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 2;
    }
    static const char default_vocab[] = "../shared/models/vocab/ggml-vocab-llama-spm.gguf";
    bool vocab_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        long n;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!(v = arg_value(cmd, argc, argv, &i))) return 2;
        if (!strcmp(a, "-o")) out = v;
        else if (!strcmp(a, "--preset")) continue;
        else if (!strcmp(a, "--type")) { if (!parse_type(a, v, &p.type)) return 2; }
        else if (!strcmp(a, "--embd-type")) { if (!parse_type(a, v, &p.embd_type)) return 2; }
        else if (!strcmp(a, "--output-type")) { if (!parse_type(a, v, &p.output_type)) return 2; }
        else if (!strcmp(a, "--vocab")) { vocab = v; vocab_given = true; }
        else if (!strcmp(a, "--act")) {
            if (!strcmp(v, "silu")) p.act = PI_ACT_SILU;
            else if (!strcmp(v, "relu")) p.act = PI_ACT_RELU;
            else if (!strcmp(v, "drelu")) p.act = PI_ACT_DRELU;
            else {
                fprintf(stderr, "pinfer: %s: --act '%s' is not one of silu, relu, drelu\n", cmd, v);
                return 2;
            }
        } else {
            struct { const char *opt; int64_t *dst; long lo, hi; } ints[] = {
                {"--dim", &p.n_embd, 2, 1 << 17}, {"--n-head", &p.n_head, 1, 4096},
                {"--n-head-kv", &p.n_head_kv, 1, 4096}, {"--ffn", &p.n_ff, 1, 1 << 17},
                {"--layers", &p.n_layer, 1, 4096}, {"--ctx", &p.n_ctx, 1, 1 << 24},
                {"--vocab-size", &p.n_vocab, 259, 1 << 22},
            };
            bool found = false;
            for (size_t k = 0; k < sizeof ints / sizeof ints[0] && !found; k++) {
                if (strcmp(a, ints[k].opt)) continue;
                if (!arg_int(cmd, a, v, ints[k].lo, ints[k].hi, &n)) return 2;
                *ints[k].dst = n;
                found = true;
            }
            if (!found && !strcmp(a, "--seed")) {
                if (!arg_int(cmd, a, v, 0, 0x7fffffff, &n)) return 2;
                p.seed = (uint64_t)n;
                found = true;
            }
            if (!found && !strcmp(a, "-t")) {
                if (!arg_int(cmd, a, v, 1, 1024, &n)) return 2;
                p.n_threads = (int)n;
                found = true;
            }
            if (!found) {
                fprintf(stderr, "pinfer: %s: unknown option '%s'\n", cmd, a);
                usage(stderr);
                return 2;
            }
        }
    }
    if (!out) {
        fprintf(stderr, "pinfer: %s: -o FILE is required\n", cmd);
        usage(stderr);
        return 2;
    }
    if (!vocab_given && access(default_vocab, R_OK) == 0) vocab = default_vocab;
    p.vocab_path = vocab;
    double t0 = pi_time_s();
    if (pi_genmodel_write(&p, out)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 1;
    }
    fprintf(stderr, "gen-model: wrote %s (%s: dim %lld, %lld layers, ffn %lld, heads %lld/%lld, %s) in %.1f s\n", out,
            preset, (long long)p.n_embd, (long long)p.n_layer, (long long)p.n_ff, (long long)p.n_head,
            (long long)p.n_head_kv, pi_type_name(p.type), pi_time_s() - t0);
    return 0;
}
