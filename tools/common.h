/*
 * common.h — what the model-running subcommands share, written against the
 * public API (include/pinfer.h) only: the llama.cpp-style common options,
 * opening a model with a session, prompt text and its tokens with clear
 * errors, and the reports on stderr.
 */
#ifndef PI_TOOLS_COMMON_H
#define PI_TOOLS_COMMON_H

#include "pinfer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct app_opts {
    const char *model;   /* -m */
    const char *prompt;  /* -p */
    const char *prompt_file; /* -f */
    long n_predict;      /* -n */
    bool ignore_eos;
    bool special;        /* parse special tokens in the prompt */
    bool seed_given;     /* else a random seed (getrandom) is drawn */
    bool ctx_given, dense_given, predictor_given;
    const char *budget_arg, *cache_arg; /* as typed, for messages */
    pi_model_params mp;  /* -t, -c, --mmap, --dense, --predictor, --hot, --mem-budget, --plan, --no-plan,
                            --io, --qd, --cache */
    pi_sampler_params sp;
} app_opts;

typedef struct app {
    pi_model *m;
    pi_session *s;
    const pi_tokenizer *tok;
    pi_model_info info;
    double load_s;
} app;

void app_opts_init(app_opts *o);

/* Try to consume option argv[*i] (and its value) as a common option.
   Returns 1 when consumed, 0 when not a common option, -1 on a bad value
   (message printed). */
int app_parse_common(const char *cmd, app_opts *o, int argc, char **argv, int *i);

/* A tool's own options, tried before the common ones: 1 when argv[*i] is
   one (its value consumed with arg_value), 0 when it is not, -1 for a bad
   value (message printed). */
typedef int (*app_opt_fn)(void *ctx, const char *cmd, int argc, char **argv, int *i);

/* The option loop of the model-running tools: -h/--help prints the usage
   to stdout; each option goes to fn (may be NULL) first, then to the common
   options (only those listed in `allowed`, NULL-terminated, when it is not
   NULL); anything else is refused with the usage on stderr. Returns 1 to go
   on, 0 after --help (exit 0), -1 on an error (exit 2). */
int app_parse_args(const char *cmd, int argc, char **argv, app_opts *o, const char *const *allowed, app_opt_fn fn,
                   void *ctx, void (*usage)(FILE *f));

/* After the options: a seed is drawn when none was given, and conflicting
   options are refused (--plan with --no-plan, --dense with --predictor,
   --cache without or above --mem-budget, ...); -t above the cores this
   process may use is warned about. */

/* Cores this process may run on. */
int app_cores(void);

/* A random sampling seed in [0, 2^31) from getrandom. */
uint64_t app_random_seed(void);

/* Catch Ctrl-C: the returned flag turns non-zero at the first one (pass it
   as pi_generate_params.stop); a second one ends the process. Reads of stdin
   are interrupted rather than restarted. */
const volatile int *app_catch_interrupt(void);
bool app_interrupted(void);
void app_clear_interrupt(void); /* the next Ctrl-C stops again rather than ends */

/* stdout has not failed so far (a full disk, /dev/full, a closed pipe). */
bool app_stdout_ok(void);

/* A text file whole, "-" for stdin; directories, NUL bytes and read errors
   refused with a message naming `what` ("prompt", "text"). Caller frees. */
char *app_read_text(const char *cmd, const char *path, const char *what);

/* Help text of the common options. */
void app_usage_common(FILE *f);

/* Open the model and a session; prints "pinfer: CMD: ..." on error. The
   session decodes with the sparse FFN when the model has predictors (or
   with --predictor oracle on a ReLU model) unless --dense. */
bool app_load(const char *cmd, const app_opts *o, app *a);
void app_free(app *a);

/* For tools that run text in windows of -c tokens: refuse a -c the user
   gave beyond the model's context; shrink the default window to that
   context when it is shorter. */
bool app_fit_window(const char *cmd, const app_opts *o, bool user_ctx, app *a);

/* The prompt text: -p, or -f FILE read whole, -f - from stdin (caller frees
   *owned). */
bool app_prompt_text(const char *cmd, const app_opts *o, const char **text, char **owned);

/* Tokenize text (UTF-8 checked) with BOS as the model wants; *ids malloc'd. */
bool app_tokenize(const char *cmd, const app *a, const char *text, bool special, int32_t **ids, size_t *n);

/* "dense", "sparse (predictor, hot N)" or "sparse (oracle mask)" for reports. */
const char *app_ffn_mode(const app *a);

/* With --mem-budget: where the memory went, and per decoded token: neurons
   resident / cache hits / misses, reads (merged), MB read, I/O wait and FFN
   time. Prints nothing otherwise. */
void app_print_offload(const app *a, FILE *f);

/* The directory of path can take a new file (checked before a long run). */
bool app_out_writable(const char *path);

/* Peak resident memory of this process in MiB. */
double app_peak_rss_mib(void);

/* Monotonic seconds; the median of v[0..n) (sorts v). */
double app_time_s(void);
double app_median(double *v, int n);

#endif
