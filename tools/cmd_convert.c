/*
 * cmd_convert.c — `pinfer convert`: import other formats into a GGUF that
 * pinfer (and llama.cpp) load.
 */
#include "args.h"
#include "cmds.h"

#include "model/llama2c.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: pinfer convert --from-llama2c MODEL.bin --tokenizer TOK.bin -o OUT.gguf [--name NAME]\n"
               "  a llama2.c checkpoint (legacy float32 format) and its tokenizer -> llama GGUF (F32)\n");
}

int cmd_convert(int argc, char **argv) {
    const char *cmd = "convert", *l2c = NULL, *tok = NULL, *out = NULL, *name = NULL;
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
        else {
            fprintf(stderr, "pinfer: %s: unknown option '%s'\n", cmd, a);
            usage(stderr);
            return 2;
        }
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
