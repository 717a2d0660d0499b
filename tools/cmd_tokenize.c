/*
 * cmd_tokenize.c — `pinfer tokenize`: show how a model's tokenizer splits a
 * text, one token per line (id, tab, quoted piece with control bytes
 * escaped) or, with --ids, the ids on one line in the format of llama.cpp's
 * ggml-vocab-*.out files (each id preceded by a space).
 *
 * The text must be valid UTF-8 (the library accepts any bytes, the command
 * refuses them). Results go to stdout, errors to stderr; exit 0 on success,
 * 1 on failure, 2 on bad usage.
 */
#include "args.h"
#include "cmds.h"

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: pinfer tokenize -m FILE [options] (TEXT | -f TEXTFILE)\n"
            "  -m, --model FILE   GGUF file whose tokenizer.ggml.* metadata is used\n"
            "  -f, --file FILE    read the text from FILE instead of the command line\n"
            "  --ids              print only the ids, on one line, each preceded by a space\n"
            "  --no-bos           do not prepend BOS even when the model asks for it\n"
            "  --special          recognise control tokens written in the text (e.g. <s>)\n");
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, r;
    char *b = malloc(cap);
    while (b && (r = fread(b + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *nb = realloc(b, 2 * cap);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
    }
    if (b && ferror(f)) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = n;
    return b;
}

/* A piece between quotes: complete UTF-8 sequences as they are, control
   bytes and stray bytes of incomplete sequences as escapes. */
static void print_piece(const char *p, size_t n) {
    putchar('\'');
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 0x80) {
            size_t cl = pi_utf8_len_lead(c);
            if (cl > 1 && cl <= n - i && pi_utf8_valid((const uint8_t *)p + i, cl, NULL)) {
                fwrite(p + i, 1, cl, stdout);
                i += cl;
            } else {
                printf("\\x%02x", c);
                i++;
            }
            continue;
        }
        switch (c) {
        case '\n': fputs("\\n", stdout); break;
        case '\t': fputs("\\t", stdout); break;
        case '\r': fputs("\\r", stdout); break;
        case '\\': fputs("\\\\", stdout); break;
        case '\'': fputs("\\'", stdout); break;
        default:
            if (c < 0x20 || c == 0x7F) printf("\\x%02x", c);
            else putchar(c);
        }
        i++;
    }
    putchar('\'');
}

int cmd_tokenize(int argc, char **argv) {
    const char *cmd = "tokenize";
    const char *model = NULL, *file = NULL, *text_arg = NULL;
    bool ids_only = false, no_bos = false, special = false, opts_done = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!opts_done && a[0] == '-' && a[1]) {
            if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
                usage(stdout);
                return 0;
            } else if (!strcmp(a, "--")) {
                opts_done = true;
            } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
                if (!(model = arg_value(cmd, argc, argv, &i))) return 2;
            } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
                if (!(file = arg_value(cmd, argc, argv, &i))) return 2;
            } else if (!strcmp(a, "--ids")) {
                ids_only = true;
            } else if (!strcmp(a, "--no-bos")) {
                no_bos = true;
            } else if (!strcmp(a, "--special")) {
                special = true;
            } else {
                return arg_unknown(cmd, a);
            }
            continue;
        }
        if (text_arg) {
            fprintf(stderr, "pinfer: %s: more than one TEXT given (quote the text, or use -f)\n", cmd);
            return 2;
        }
        text_arg = a;
    }
    if (!model) {
        fprintf(stderr, "pinfer: %s: no model given (-m FILE)\n", cmd);
        usage(stderr);
        return 2;
    }
    if (!!text_arg == !!file) {
        fprintf(stderr, "pinfer: %s: give either TEXT or -f FILE\n", cmd);
        usage(stderr);
        return 2;
    }

    size_t len;
    char *text;
    if (file) {
        if (!(text = read_file(file, &len))) {
            fprintf(stderr, "pinfer: %s: cannot read %s\n", cmd, file);
            return 1;
        }
    } else {
        len = strlen(text_arg);
        if (!(text = malloc(len + 1))) return 1;
        memcpy(text, text_arg, len + 1);
    }
    size_t bad;
    if (!pi_utf8_valid((const uint8_t *)text, len, &bad)) {
        fprintf(stderr, "pinfer: %s: input is not valid UTF-8 at byte %zu\n", cmd, bad);
        free(text);
        return 1;
    }

    int rc = 1;
    pi_gguf *g = NULL;
    pi_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    if (pi_gguf_open(model, &g) != PI_OK || pi_tokenizer_load(g, &tok) != PI_OK) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        goto done;
    }
    bool add_bos = !no_bos && pi_tokenizer_add_bos(tok) && pi_tokenizer_bos(tok) >= 0;
    size_t n = 0;
    pi_status st = pi_tokenize(tok, text, len, add_bos, special, NULL, 0, &n);
    if (st == PI_OK || (st == PI_ERR_INVALID && n > 0)) {
        ids = malloc((n ? n : 1) * sizeof *ids);
        st = ids ? pi_tokenize(tok, text, len, add_bos, special, ids, n, &n) : PI_ERR_NOMEM;
    }
    if (st != PI_OK) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, st == PI_ERR_NOMEM && !ids ? "out of memory" : pi_last_error());
        goto done;
    }
    if (ids_only) {
        for (size_t i = 0; i < n; i++) printf(" %d", ids[i]);
        putchar('\n');
    } else {
        for (size_t i = 0; i < n; i++) {
            const char *p;
            size_t pl;
            pi_token_piece(tok, ids[i], true, &p, &pl);
            printf("%d\t", ids[i]);
            print_piece(p, pl);
            putchar('\n');
        }
    }
    rc = fflush(stdout) == 0 ? 0 : 1;
done:
    free(ids);
    pi_tokenizer_free(tok);
    pi_gguf_close(g);
    free(text);
    return rc;
}
