/*
 * args.c — option value parsing for the subcommands.
 */
#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *from, *to, *only; /* only: the one command it applies to, or NULL for all */
} k_aliases[] = {
    {"--model", "-m", NULL},       {"--prompt", "-p", NULL},       {"--file", "-f", NULL},
    {"--n-predict", "-n", NULL},   {"--predict", "-n", NULL},      {"--threads", "-t", NULL},
    {"--ctx-size", "-c", NULL},    {"--output", "-o", NULL},       {"-s", "--seed", NULL},
    {"--repetitions", "-r", "bench"}, {"--n-prompt", "-p", "bench"}, {"--n-gen", "-n", "bench"},
};

/* Options of any command that take no value: the word after them is an
   option again, so it may be rewritten. Every other option takes one. */
static const char *const k_flags[] = {
    "-h",     "--help",    "--version", "--mmap", "--dense",   "--no-plan", "--ignore-eos", "--special",
    "--stats", "--no-lookahead", "--in-memory", "--compare-dense", "--ids", "--no-bos", "--naive", "--quick", "--all", "--json", "--bundle", "--plain",
};

static bool is_flag(const char *a) {
    for (size_t k = 0; k < sizeof k_flags / sizeof k_flags[0]; k++)
        if (!strcmp(a, k_flags[k])) return true;
    return false;
}

char **arg_normalize(int *argc, char **argv) {
    const char *cmd = *argc > 0 ? argv[0] : "";
    /* one block: at most one extra word per argument, then the option names
       cut from "--opt=value" words */
    size_t names = 0;
    for (int i = 0; i < *argc; i++) names += strlen(argv[i]) + 1;
    char **out = malloc((2 * (size_t)*argc + 1) * sizeof *out + names);
    if (!out) return NULL;
    char *arena = (char *)(out + 2 * (size_t)*argc + 1);
    int n = 0;
    bool value_next = false, rest = false;
    for (int i = 0; i < *argc; i++) {
        char *a = argv[i];
        if (i == 0 || rest || value_next || a[0] != '-' || !a[1]) {
            out[n++] = a;
            value_next = false;
            continue;
        }
        if (!strcmp(a, "--")) {
            out[n++] = a;
            rest = true;
            continue;
        }
        char *eq = a[1] == '-' ? strchr(a, '=') : NULL, *val = NULL;
        if (eq) {
            const size_t len = (size_t)(eq - a);
            memcpy(arena, a, len);
            arena[len] = '\0';
            a = arena;
            arena += len + 1;
            val = eq + 1;
        }
        for (size_t k = 0; k < sizeof k_aliases / sizeof k_aliases[0]; k++)
            if (!strcmp(a, k_aliases[k].from) && (!k_aliases[k].only || !strcmp(cmd, k_aliases[k].only))) {
                a = (char *)k_aliases[k].to;
                break;
            }
        out[n++] = a;
        if (val) out[n++] = val;
        else value_next = !is_flag(a);
    }
    out[n] = NULL;
    *argc = n;
    return out;
}

int arg_unknown(const char *cmd, const char *opt) {
    fprintf(stderr, "pinfer: %s: unknown option '%s'; see pinfer %s --help\n", cmd, opt, cmd);
    return 2;
}

const char *arg_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "pinfer: %s: option %s needs a value\n", cmd, argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

bool arg_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "pinfer: %s: %s expects a whole number from %ld to %ld, got '%s'\n", cmd, opt, lo, hi, s);
        return false;
    }
    *out = v;
    return true;
}

bool arg_share(const char *cmd, const char *opt, const char *s, double *out) {
    char *end;
    const double v = strtod(s, &end);
    if (end == s || *end || !(v > 0.0 && v <= 1.0)) {
        fprintf(stderr, "pinfer: %s: %s expects a number in (0, 1], got '%s'\n", cmd, opt, s);
        return false;
    }
    *out = v;
    return true;
}

bool arg_size(const char *cmd, const char *opt, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    double mul = 1;
    if (end != s && *end) {
        switch (toupper((unsigned char)*end)) {
        case 'K': mul = 1024.0; break;
        case 'M': mul = 1024.0 * 1024; break;
        case 'G': mul = 1024.0 * 1024 * 1024; break;
        case 'T': mul = 1024.0 * 1024 * 1024 * 1024; break;
        default: mul = 0; break;
        }
        end++;
        if (*end == 'i' || *end == 'I') end++;
        if (*end == 'B' || *end == 'b') end++;
    }
    if (errno || end == s || *end || mul == 0 || !(v >= 0) || v * mul > 9.0e18) {
        fprintf(stderr, "pinfer: %s: %s expects a size such as 600M or 2G, got '%s'\n", cmd, opt, s);
        return false;
    }
    *out = (uint64_t)(v * mul);
    return true;
}

int arg_list(const char *cmd, const char *opt, char *s, char **items, int max) {
    int n = 0;
    for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
        if (n == max) {
            fprintf(stderr, "pinfer: %s: %s takes at most %d items\n", cmd, opt, max);
            return -1;
        }
        items[n++] = tok;
    }
    if (!n) fprintf(stderr, "pinfer: %s: %s needs at least one item\n", cmd, opt);
    return n ? n : -1;
}
