/*
 * args.h — small helpers the subcommands share for reading their options.
 * They print "pinfer: CMD: ..." on bad input and return false; the caller
 * exits with status 2.
 */
#ifndef PI_TOOLS_ARGS_H
#define PI_TOOLS_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* llama.cpp's spellings, for every command: "--opt=value" becomes "--opt"
   "value", and the long forms of the short options (--model, --prompt,
   --file, --n-predict/--predict, --threads, --ctx-size, --output; for bench
   llama-bench's --repetitions, --n-prompt, --n-gen) and -s (--seed) become
   the forms the commands read; argv[0] is the command. Values
   of options are never rewritten, and nothing after "--" is. Returns a new
   argv (with *argc updated) in one allocation (free() it), or NULL when out
   of memory. */
char **arg_normalize(int *argc, char **argv);

/* "pinfer: CMD: unknown option 'OPT'; see pinfer CMD --help" on stderr;
   returns 2, the exit status of usage errors. */
int arg_unknown(const char *cmd, const char *opt);

/* The value after option argv[*i] (advancing *i), or NULL with a message. */
const char *arg_value(const char *cmd, int argc, char **argv, int *i);

/* A whole number in [lo, hi]. */
bool arg_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);

/* A share in (0, 1], e.g. a recall target. */
bool arg_share(const char *cmd, const char *opt, const char *s, double *out);

/* A size with an optional K/M/G/T suffix (powers of 1024), e.g. "600M". */
bool arg_size(const char *cmd, const char *opt, const char *s, uint64_t *out);

/* Split a comma-separated list in place into at most max items; returns the count or -1. */
int arg_list(const char *cmd, const char *opt, char *s, char **items, int max);

#endif
