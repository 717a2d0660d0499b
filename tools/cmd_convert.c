/*
 * cmd_convert.c — `pinfer convert`: import other formats into a GGUF that
 * pinfer (and llama.cpp) load.
 */
#include "args.h"
#include "cmds.h"

#include "model/llama2c.h"
#include "sparse/reorder.h"
#include "gguf/bundle.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static void usage(FILE *f) {
    fprintf(f, "usage: pinfer convert --from-llama2c MODEL.bin --tokenizer TOK.bin -o OUT.gguf [--name NAME]\n"
               "         a llama2.c checkpoint (legacy float32 format) and its tokenizer -> llama GGUF (F32)\n"
               "       pinfer convert -m MODEL.gguf --reorder STATS.gguf -o OUT.gguf\n"
               "         neurons of every FFN layer renumbered by activation frequency (pinfer profile),\n"
               "         so the hot neurons form a prefix; the model computes the same function\n"
               "       pinfer convert -m MODEL.gguf [--reorder STATS.gguf] --bundle [--bundle-align N] -o OUT.gguf\n"
               "         a bundle file: each dense ReLU/dReLU FFN layer stored as one bundle per neuron\n"
               "         (gate row | up row | down column), bundles starting on multiples of N bytes\n"
               "         (a power of two in [512, 65536], default 4096; 0: packed), tensors 4096-aligned;\n"
               "         with --reorder the neurons are first ordered by activation frequency\n");
}

int cmd_convert(int argc, char **argv) {
    const char *cmd = "convert", *l2c = NULL, *tok = NULL, *out = NULL, *name = NULL, *model = NULL, *stats = NULL;
    bool bundle = false, align_given = false;
    long align = PI_BUNDLE_DEFAULT_ALIGN;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--bundle")) {
            bundle = true;
            continue;
        }
        if (!(v = arg_value(cmd, argc, argv, &i))) return 2;
        if (!strcmp(a, "--from-llama2c")) l2c = v;
        else if (!strcmp(a, "--tokenizer")) tok = v;
        else if (!strcmp(a, "-o")) out = v;
        else if (!strcmp(a, "--name")) name = v;
        else if (!strcmp(a, "-m")) model = v;
        else if (!strcmp(a, "--reorder")) stats = v;
        else if (!strcmp(a, "--bundle-align")) {
            if (!arg_int(cmd, a, v, 0, PI_BUNDLE_MAX_ALIGN, &align)) return 2;
            if (align && (align < PI_BUNDLE_MIN_ALIGN || (align & (align - 1)))) {
                fprintf(stderr, "pinfer: %s: --bundle-align %ld is not 0 (packed) or a power of two in [%d, %d]\n", cmd,
                        align, PI_BUNDLE_MIN_ALIGN, PI_BUNDLE_MAX_ALIGN);
                return 2;
            }
            align_given = true;
        } else {
            fprintf(stderr, "pinfer: %s: unknown option '%s'\n", cmd, a);
            usage(stderr);
            return 2;
        }
    }
    if (bundle) {
        if (!model || !out || l2c) {
            fprintf(stderr, "pinfer: %s: --bundle takes -m MODEL, -o OUT and optionally --reorder STATS\n", cmd);
            return 2;
        }
        pi_stats *st = NULL;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if ((stats && pi_stats_load(stats, &st)) || pi_bundle_write(model, st, (uint32_t)align, out)) {
            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
            pi_stats_free(st);
            return 1;
        }
        pi_stats_free(st);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        struct stat sb;
        double mib = stat(out, &sb) ? 0.0 : (double)sb.st_size / (1 << 20);
        char how[48];
        if (align) snprintf(how, sizeof how, "aligned to %ld bytes", align);
        else snprintf(how, sizeof how, "packed");
        fprintf(stderr, "convert: wrote %s (%.1f MiB in %.1f s; FFN as bundles, %s%s)\n", out, mib,
                (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), how,
                stats ? ", neurons ordered by activation frequency" : "");
        return 0;
    }
    if (align_given) {
        fprintf(stderr, "pinfer: %s: --bundle-align needs --bundle\n", cmd);
        return 2;
    }
    if (model || stats) {
        if (!model || !stats || !out || l2c) {
            fprintf(stderr, "pinfer: %s: reordering takes -m MODEL, --reorder STATS and -o OUT\n", cmd);
            return 2;
        }
        pi_stats *st = NULL;
        if (pi_stats_load(stats, &st) || pi_reorder_write(model, st, out)) {
            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
            pi_stats_free(st);
            return 1;
        }
        pi_stats_free(st);
        fprintf(stderr, "convert: wrote %s (neurons ordered by activation frequency)\n", out);
        return 0;
    }
    if (!l2c || !tok || !out) {
        fprintf(stderr, "pinfer: %s: --from-llama2c, --tokenizer and -o are required\n", cmd);
        usage(stderr);
        return 2;
    }
    if (pi_llama2c_convert(l2c, tok, out, name)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 1;
    }
    fprintf(stderr, "convert: wrote %s\n", out);
    return 0;
}
