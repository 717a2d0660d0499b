/*
 * cmd_perplexity.c — `pinfer perplexity`: perplexity of a text, computed as
 * llama.cpp's perplexity tool does so the figures compare: the tokenized
 * text is cut into windows of n_ctx tokens, each window starts with BOS (when
 * the model uses one) and is evaluated from an empty cache, and only the
 * second half of each window is scored (those tokens see at least n_ctx/2 of
 * context). PPL = exp(mean negative log-likelihood).
 *
 * The sparse FFN only runs when decoding one token at a time, so on a model
 * with predictors each window is fed token by token (the path `run` takes
 * while generating); --dense scores the batched dense path. --compare-dense
 * scores both on the same windows and reports how often the sparse path's
 * top-1 token equals the dense one, the perplexity increase and the fraction
 * of FFN neurons the sparse path computed.
 */
#include "args.h"
#include "cmds.h"
#include "common.h"


#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f, "usage: pinfer perplexity -m FILE -f FILE [-c CTX] [--chunks N] [-t N]\n"
               "  -f, --file FILE      text to score (UTF-8; - for standard input; also --text FILE)\n"
               "  -c CTX               window size in tokens (default 512, at most the model's context)\n"
               "  --chunks N           score at most N windows (default: all)\n"
               "  --compare-dense      also score with the dense FFN: top-1 agreement and perplexity change\n");
}

static int64_t argmax(const float *v, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

/* The logits of every token of one window: batched on the dense path, one
   token at a time otherwise (the sparse FFN is a decode-path kernel). */
static pi_status eval_window(pi_session *s, int64_t V, const int32_t *tok, int64_t n, float *logits) {
    pi_status st = pi_session_kv_clear(s);
    if (st) return st;
    if (pi_session_ffn(s) == PI_FFN_DENSE) return pi_session_eval_logits(s, tok, (size_t)n, logits);
    for (int64_t j = 0; j < n; j++) {
        if ((st = pi_session_decode(s, tok[j]))) return st;
        memcpy(logits + j * V, pi_session_logits(s), (size_t)V * sizeof *logits);
    }
    return PI_OK;
}

/* -log softmax(logits)[target], in double. */
static double nll(const float *logits, int64_t n, int32_t target) {
    float mx = logits[0];
    for (int64_t i = 1; i < n; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += exp((double)logits[i] - mx);
    return log(sum) - ((double)logits[target] - mx);
}

typedef struct {
    const char *text_path;
    long chunks_max;
    bool compare;
} ppl_args;

static int ppl_option(void *ctx, const char *cmd, int argc, char **argv, int *i) {
    ppl_args *p = ctx;
    const char *a = argv[*i], *v;
    if (!strcmp(a, "--compare-dense")) return p->compare = true, 1;
    if (strcmp(a, "--text") && strcmp(a, "--chunks")) return 0;
    if (!(v = arg_value(cmd, argc, argv, i))) return -1;
    if (!strcmp(a, "--text")) p->text_path = v;
    else if (!arg_int(cmd, a, v, 1, 1 << 30, &p->chunks_max)) return -1;
    return 1;
}

int cmd_perplexity(int argc, char **argv) {
    const char *cmd = "perplexity";
    app_opts o;
    app_opts_init(&o);
    ppl_args pa = {NULL, -1, false};
    int pr = app_parse_args(cmd, argc, argv, &o, NULL, ppl_option, &pa, usage);
    if (pr <= 0) return pr ? 2 : 0;
    const bool user_ctx = o.mp.n_ctx > 0;
    if (!user_ctx) o.mp.n_ctx = 512;
    const char *text_path = pa.text_path;
    const long chunks_max = pa.chunks_max;
    const bool compare = pa.compare;
    if (text_path && o.prompt_file && strcmp(text_path, o.prompt_file)) {
        fprintf(stderr, "pinfer: %s: give the text with -f or --text, not both\n", cmd);
        return 2;
    }
    if (o.prompt) {
        fprintf(stderr, "pinfer: %s: perplexity scores a file: give it with -f FILE (not -p)\n", cmd);
        return 2;
    }
    if (!text_path && !(text_path = o.prompt_file)) {
        fprintf(stderr, "pinfer: %s: the text to score is required: -f FILE; see pinfer %s --help\n", cmd, cmd);
        return 2;
    }
    char *owned = app_read_text(cmd, text_path, "text");
    if (!owned) return 2;
    const char *text = owned;
    app a;
    int32_t *ids = NULL, *wtok = NULL;
    float *logits = NULL, *dlogits = NULL;
    pi_session *dense = NULL;
    int rc = 1;
    size_t n_ids;
    if (!app_load(cmd, &o, &a) || !app_fit_window(cmd, &o, user_ctx, &a)) goto out;
    if (!app_tokenize(cmd, &a, text, false, &ids, &n_ids)) goto out;
    const int64_t n_ctx = pi_session_n_ctx(a.s), V = a.info.n_vocab;
    if (n_ctx < 8) {
        fprintf(stderr, "pinfer: %s: a window of %lld tokens is too small to score\n", cmd, (long long)n_ctx);
        goto out;
    }
    int64_t n_chunks = (int64_t)n_ids / n_ctx;
    if (chunks_max > 0 && n_chunks > chunks_max) n_chunks = chunks_max;
    if (n_chunks == 0) {
        fprintf(stderr, "pinfer: %s: the text is %zu tokens, less than one window of %lld (lower -c)\n", cmd, n_ids,
                (long long)n_ctx);
        goto out;
    }
    const int32_t bos = pi_tokenizer_add_bos(a.tok) ? pi_tokenizer_bos(a.tok) : -1;
    const int64_t first = n_ctx / 2;
    bool tty = isatty(2);
    if (compare && pi_session_ffn(a.s) == PI_FFN_DENSE) {
        fprintf(stderr, "pinfer: %s: --compare-dense needs the sparse path (a model with predictors, or --predictor)\n",
                cmd);
        goto out;
    }
    if (compare && a.info.offloaded) {
        fprintf(stderr, "pinfer: %s: --compare-dense scores a second, dense session, which needs the model in memory: "
                        "drop --mem-budget\n", cmd);
        goto out;
    }
    pi_session_params dp = pi_session_default_params();
    dp.n_ctx = n_ctx;
    dp.ffn = PI_FFN_DENSE;
    if (compare && pi_session_create(a.m, &dp, &dense)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        goto out;
    }
    wtok = malloc((size_t)n_ctx * sizeof *wtok);
    logits = malloc((size_t)n_ctx * (size_t)V * sizeof *logits);
    if (compare) dlogits = malloc((size_t)n_ctx * (size_t)V * sizeof *dlogits);
    if (!wtok || !logits || (compare && !dlogits)) {
        fprintf(stderr, "pinfer: %s: cannot allocate logits for a window of %lld tokens\n", cmd, (long long)n_ctx);
        goto out;
    }
    fprintf(stderr, "perplexity: %zu tokens, %lld windows of %lld, scoring the last %lld of each (%s FFN)\n", n_ids,
            (long long)n_chunks, (long long)n_ctx, (long long)(n_ctx - 1 - first), app_ffn_mode(&a));
    double sum = 0.0, dsum = 0.0, t0 = app_time_s();
    int64_t count = 0, agree = 0, compared = 0, done = 0;
    pi_session_reset_stats(a.s);
    app_catch_interrupt();
    for (int64_t c = 0; c < n_chunks && !app_interrupted(); c++, done++) {
        const int32_t *win = ids + c * n_ctx;
        memcpy(wtok, win, (size_t)(n_ctx - 1) * sizeof *wtok);
        if (bos >= 0) wtok[0] = bos;
        if (eval_window(a.s, V, wtok, n_ctx - 1, logits) || (compare && eval_window(dense, V, wtok, n_ctx - 1, dlogits))) {
            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
            goto out;
        }
        for (int64_t j = first; j < n_ctx - 1; j++) {
            sum += nll(logits + (size_t)j * (size_t)V, V, win[j + 1]);
            if (compare) dsum += nll(dlogits + (size_t)j * (size_t)V, V, win[j + 1]);
            count++;
        }
        for (int64_t j = 0; compare && j < n_ctx - 1; j++, compared++)
            agree += argmax(logits + (size_t)j * (size_t)V, V) == argmax(dlogits + (size_t)j * (size_t)V, V);
        double el = app_time_s() - t0, eta = el / (double)(c + 1) * (double)(n_chunks - c - 1);
        if (tty)
            fprintf(stderr, "\r[%lld/%lld] ppl %.4f  %.1f tok/s  ETA %.0f s   ", (long long)(c + 1),
                    (long long)n_chunks, exp(sum / (double)count), (double)((c + 1) * (n_ctx - 1)) / el, eta);
        else
            fprintf(stderr, "[%lld]%.4f%s", (long long)(c + 1), exp(sum / (double)count), c + 1 == n_chunks ? "\n" : ",");
    }
    if (tty) fputc('\n', stderr);
    if (!done) {
        fprintf(stderr, "perplexity: interrupted before the first window was scored\n");
        rc = 130;
        goto out;
    }
    if (done < n_chunks) fprintf(stderr, "\nperplexity: interrupted: %lld of %lld windows scored\n", (long long)done,
                                 (long long)n_chunks);
    printf("perplexity: %.4f over %lld tokens (%lld windows of %lld)\n", exp(sum / (double)count), (long long)count,
           (long long)done, (long long)n_ctx);
    if (compare) {
        uint64_t pred = 0, tokens = 0;
        for (int64_t il = 0; il < a.info.n_layer; il++) {
            pi_layer_stats ls;
            if (pi_session_layer_stats(a.s, il, &ls)) continue;
            pred += ls.computed;
            tokens += ls.tokens;
        }
        double ppl = exp(sum / (double)count), dppl = exp(dsum / (double)count);
        printf("dense perplexity: %.4f; sparse/dense - 1 = %+.3f%%\n", dppl, 100.0 * (ppl / dppl - 1.0));
        printf("top-1 agreement with dense: %.2f%% of %lld positions\n", 100.0 * (double)agree / (double)compared,
               (long long)compared);
        /* a token's layer computes in its routed experts: n_ff each */
        const int64_t per = a.info.n_ff * (a.info.n_expert ? a.info.n_expert_used : 1);
        printf("FFN neurons computed: %.1f%% of the %lld a token's layer %s (mean over tokens and layers)\n",
               tokens ? 100.0 * (double)pred / (double)tokens / (double)per : 0.0, (long long)per,
               a.info.n_expert ? "routes to" : "has");
    }
    fprintf(stderr, "perplexity: %.1f s, %.1f tok/s\n", app_time_s() - t0,
            (double)(done * (n_ctx - 1)) / (app_time_s() - t0));
    rc = done < n_chunks ? 130 : 0;
out:
    free(wtok);
    free(logits);
    free(dlogits);
    pi_session_free(dense);
    free(ids);
    free(owned);
    app_free(&a);
    return rc;
}
