/*
 * common.h — what the model-running subcommands share: loading a model with
 * its tokenizer and a session, the llama.cpp-style common options, prompt
 * tokenization with clear errors, and the run report on stderr.
 */
#ifndef PI_TOOLS_COMMON_H
#define PI_TOOLS_COMMON_H

#include "model/model.h"
#include "model/session.h"
#include "sample/sample.h"
#include "tokenizer/tokenizer.h"

#include <stdbool.h>
#include <stdio.h>

struct pi_plan;

typedef struct app_opts {
    const char *model;   /* -m */
    const char *prompt;  /* -p */
    const char *prompt_file; /* -f */
    long n_predict;      /* -n */
    long threads;        /* -t (0: all cores) */
    long n_ctx;          /* -c (0: min(training context, 4096)) */
    bool ignore_eos;
    bool special;        /* parse special tokens in the prompt */
    bool seed_given;
    bool use_mmap;       /* --mmap: map the file instead of loading it */
    bool dense;          /* --dense: never the sparse FFN */
    bool oracle;         /* --predictor oracle: the exact activation mask */
    long hot;            /* --hot N: neurons of each layer's hot prefix */
    uint64_t mem_budget; /* --mem-budget SIZE: FFN from flash under this budget (0: all in memory) */
    int io_backend;      /* --io uring|pread (pi_io_backend) */
    long queue_depth;    /* --qd N */
    uint64_t cache_bytes; /* --cache SIZE: the neuron cache's share of the budget (0: default split) */
    const char *plan;    /* --plan FILE: pinfer plan's output */
    const struct pi_plan *plan_in; /* or a plan in memory (bench --sweep) */
    bool no_plan;        /* --no-plan: with --mem-budget, the default split instead of planning */
    pi_sampler_params sp;
} app_opts;

typedef struct app {
    pi_lm *m;
    pi_tokenizer *tok;
    pi_state *s;
    struct pi_offload *off; /* with --mem-budget */
    pi_ffn_mode mode;       /* DENSE, SPARSE or ORACLE */
    int64_t hot;
    double load_s;
} app;

void app_opts_init(app_opts *o);

/* Try to consume option argv[*i] (and its value) as a common option.
   Returns 1 when consumed, 0 when not a common option, -1 on a bad value
   (message printed). */
int app_parse_common(const char *cmd, app_opts *o, int argc, char **argv, int *i);

/* Help text of the common options. */
void app_usage_common(FILE *f);

/* Load model, tokenizer and a session; prints "pinfer: CMD: ..." on error.
   The session decodes with the sparse FFN when the model has predictors (or
   with --predictor oracle on a ReLU model) unless --dense. */
bool app_load(const char *cmd, const app_opts *o, app *a);
void app_free(app *a);

/* Install a's FFN (mode, hot; through a->off when it has one) in a fresh
   state s; prints and returns false on error. */
bool app_install_ffn(const char *cmd, app *a, pi_state *s);

/* For tools that run text in windows of -c tokens: refuse a -c the user
   gave beyond the model's context; shrink the default window to that
   context when it is shorter. */
bool app_fit_window(const char *cmd, const app_opts *o, bool user_ctx, app *a);

/* The prompt text: -p, or -f FILE read whole (caller frees *owned). */
bool app_prompt_text(const char *cmd, const app_opts *o, const char **text, char **owned);

/* Tokenize text (UTF-8 checked) with BOS as the model wants; *ids malloc'd. */
bool app_tokenize(const char *cmd, const app *a, const char *text, bool special, int32_t **ids, size_t *n);

/* "dense", "sparse (hot N)" or "oracle" for reports. */
const char *app_ffn_mode(const app *a);

/* With --mem-budget: where the memory went, and per decoded token: neurons
   resident / cache hits / misses, reads (merged), MB read, I/O wait and FFN
   time. Prints nothing otherwise. */
void app_print_offload(const app *a, FILE *f);
void app_reset_offload_stats(app *a);

struct pi_plan;
struct pi_plan_limits;

/* The planner's choice for a bundle file: the model profile, the cached
   hardware probe of the model's filesystem (measured now with --quick and
   cached when there is none; hw_path overrides), the solver. Returns 0, 1
   when the plan misses limits->min_speed (the plan is still filled, the
   message printed), 2 on an error (printed). */
int app_plan(const char *cmd, const char *model, const char *hw_path, int64_t n_ctx,
             const struct pi_plan_limits *lim, bool verbose, struct pi_plan *out);

/* The plan, human-readable, ending with "predicted: X tok/s" and the breakdown. */
void app_print_plan(const struct pi_plan *p, FILE *f);

/* The directory of path can take a new file (checked before a long run). */
bool app_out_writable(const char *path);

/* Peak resident memory of this process in MiB. */
double app_peak_rss_mib(void);

#endif
