/*
 * cmd_run.c — `pinfer run`: complete a prompt.
 *
 * stdout carries the prompt and then the generated text, nothing else, so
 * the output can be piped or compared; timings and memory go to stderr.
 */
#include "cmds.h"
#include "common.h"

#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: pinfer run -m FILE [-p PROMPT | -f FILE] [-n N] [options]\n"
               "  -p, --prompt PROMPT  text to complete (default: empty, i.e. BOS only)\n"
               "  -f, --file FILE      read the prompt from a file (- for standard input)\n"
               "  -n, --n-predict N    tokens to generate (default 128; -1: until end of text or context)\n"
               "  --ignore-eos         keep generating past end-of-text tokens\n"
               "  --special            parse special tokens (e.g. <s>) written in the prompt\n"
               "  --stats              with --mem-budget: memory per region, cache hits and misses, reads and\n"
               "                       I/O wait per token\n");
    app_usage_common(f);
}

/* Streams generated text to stdout and remembers whether it ended a line. */
typedef struct {
    bool out_nl;
} run_out;

static int put_piece(void *ctx, const char *text, size_t len, int32_t token) {
    (void)token;
    run_out *r = ctx;
    if (!len) return 0;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    r->out_nl = text[len - 1] == '\n';
    return !app_stdout_ok(); /* nobody reads the rest */
}

typedef struct {
    app_opts *o;
    bool stats;
} run_args;

static int run_option(void *ctx, const char *cmd, int argc, char **argv, int *i) {
    (void)cmd, (void)argc;
    run_args *r = ctx;
    if (!strcmp(argv[*i], "--special")) return r->o->special = true, 1;
    if (!strcmp(argv[*i], "--stats")) return r->stats = true, 1;
    return 0;
}

int cmd_run(int argc, char **argv) {
    const char *cmd = "run";
    app_opts o;
    app_opts_init(&o);
    run_args ra = {&o, false};
    int pr = app_parse_args(cmd, argc, argv, &o, NULL, run_option, &ra, usage);
    if (pr <= 0) return pr ? 2 : 0;
    const bool stats = ra.stats;
    const char *text;
    char *owned;
    if (!app_prompt_text(cmd, &o, &text, &owned)) return 2;
    app a;
    int32_t *ids = NULL;
    pi_sampler *smp = NULL;
    int rc = 1;
    size_t n_ids;
    if (!app_load(cmd, &o, &a)) goto out;
    if (!app_tokenize(cmd, &a, text, o.special, &ids, &n_ids)) goto out;
    if (n_ids == 0) {
        fprintf(stderr, "pinfer: %s: the prompt is empty and the model has no BOS token to start from\n", cmd);
        goto out;
    }
    if ((int64_t)n_ids > pi_session_n_ctx(a.s)) {
        fprintf(stderr, "pinfer: %s: the prompt is %zu tokens but the context holds %lld (raise -c, at most %lld)\n",
                cmd, n_ids, (long long)pi_session_n_ctx(a.s), (long long)a.info.n_ctx_train);
        goto out;
    }
    if (pi_sampler_create(&o.sp, a.info.n_vocab, &smp)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        goto out;
    }
    fputs(text, stdout);
    fflush(stdout);

    run_out ro = {text[0] && text[strlen(text) - 1] == '\n'};
    pi_generate_params gp = pi_generate_default_params();
    gp.n_predict = o.n_predict;
    gp.ignore_eos = o.ignore_eos;
    gp.stop = app_catch_interrupt();
    pi_generate_result res;
    pi_status st = pi_generate(a.s, smp, ids, n_ids, &gp, put_piece, &ro, &res);
    if (!ro.out_nl) fputc('\n', stdout);
    fflush(stdout);
    if (st) {
        fprintf(stderr, "\npinfer: %s: %s\n", cmd, pi_last_error());
        goto out;
    }
    const char *why = res.stop == PI_STOP_CONTEXT ? "stopped: the context is full (raise -c)"
                    : res.stop == PI_STOP_EOG     ? "end of text"
                    : !app_stdout_ok()            ? "stopped: standard output failed"
                    : app_interrupted()           ? "interrupted"
                                                  : NULL;
    fprintf(stderr, "\n");
    if (why) fprintf(stderr, "run: %s\n", why);
    fprintf(stderr, "run: load %.2f s; prompt %zu tokens in %.3f s (%.1f tok/s); generated %lld tokens in %.3f s (%.2f tok/s)\n",
            a.load_s, n_ids, res.prompt_s, (double)n_ids / res.prompt_s, (long long)res.n_generated, res.gen_s,
            res.n_generated ? (double)res.n_generated / res.gen_s : 0.0);
    fprintf(stderr, "run: %d threads, context %lld, seed %llu, kernels %s, FFN %s, peak RSS %.1f MiB\n",
            pi_session_n_threads(a.s), (long long)pi_session_n_ctx(a.s),
            (unsigned long long)o.sp.seed, a.info.kernels, app_ffn_mode(&a), app_peak_rss_mib());
    if (stats) app_print_offload(&a, stderr);
    rc = app_interrupted() ? 130 : 0;
out:
    pi_sampler_free(smp);
    free(ids);
    free(owned);
    app_free(&a);
    return rc;
}
