/*
 * args.c — option value parsing for the subcommands.
 */
#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
