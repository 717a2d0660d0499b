/*
 * cmd_convert.c — `pinfer convert`: import other formats into a GGUF that
 * pinfer (and llama.cpp) load.
 */
#include "args.h"
#include "cmds.h"

#include "model/llama2c.h"
#include "sparse/reorder.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: pinfer convert --from-llama2c MODEL.bin --tokenizer TOK.bin -o OUT.gguf [--name NAME]\n"
               "         a llama2.c checkpoint (legacy float32 format) and its tokenizer -> llama GGUF (F32)\n"
               "       pinfer convert -m MODEL.gguf --reorder STATS.gguf -o OUT.gguf\n"
               "         neurons of every FFN layer renumbered by activation frequency (pinfer profile),\n"
               "         so the hot neurons form a prefix; the model computes the same function\n");
}

int cmd_convert(int argc, char **argv) {
    const char *cmd = "convert", *l2c = NULL, *tok = NULL, *out = NULL, *name = NULL, *model = NULL, *stats = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!(v = arg_value(cmd, argc, argv, &i))) return 2;
        if (!strcmp(a, "--from-llama2c")) l2c = v;
        else if (!strcmp(a, "--tokenizer")) tok = v;
        else if (!strcmp(a, "-o")) out = v;
        else if (!strcmp(a, "--name")) name = v;
        else if (!strcmp(a, "-m")) model = v;
        else if (!strcmp(a, "--reorder")) stats = v;
        else {
            fprintf(stderr, "pinfer: %s: unknown option '%s'\n", cmd, a);
            usage(stderr);
            return 2;
        }
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
