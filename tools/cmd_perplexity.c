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

#include "base/timer.h"
#include "sparse/ffn_sparse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f, "usage: pinfer perplexity -m FILE --text FILE [-c CTX] [--chunks N] [-t N]\n"
               "  --text FILE          text to score (UTF-8)\n"
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
static pi_status eval_window(pi_state *s, bool dense, const int32_t *tok, int64_t n, float *logits) {
    pi_state_reset(s);
    if (dense) return pi_state_decode_all(s, tok, n, logits);
    const int64_t V = s->m->hp.n_vocab;
    for (int64_t j = 0; j < n; j++) {
        pi_status st = pi_state_decode(s, tok + j, 1);
        if (st) return st;
        memcpy(logits + j * V, pi_state_logits(s), (size_t)V * sizeof *logits);
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

int cmd_perplexity(int argc, char **argv) {
    const char *cmd = "perplexity", *text_path = NULL;
    long chunks_max = -1;
    bool compare = false;
    app_opts o;
    app_opts_init(&o);
    o.n_ctx = 512;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--compare-dense")) {
            compare = true;
            continue;
        }
        if (!strcmp(a, "--text") || !strcmp(a, "--chunks")) {
            if (!(v = arg_value(cmd, argc, argv, &i))) return 2;
            if (!strcmp(a, "--text")) text_path = v;
            else if (!arg_int(cmd, a, v, 1, 1 << 30, &chunks_max)) return 2;
            continue;
        }
        int r = app_parse_common(cmd, &o, argc, argv, &i);
        if (r < 0) return 2;
        if (r == 0) {
            fprintf(stderr, "pinfer: %s: unknown option '%s'\n", cmd, a);
            usage(stderr);
            return 2;
        }
    }
    if (!text_path) {
        fprintf(stderr, "pinfer: %s: --text FILE is required\n", cmd);
        usage(stderr);
        return 2;
    }
    o.prompt_file = text_path;
    const char *text;
    char *owned;
    if (!app_prompt_text(cmd, &o, &text, &owned)) return 2;
    app a;
    int32_t *ids = NULL, *wtok = NULL;
    float *logits = NULL, *dlogits = NULL;
    pi_state *dense = NULL;
    int rc = 1;
    size_t n_ids;
    if (!app_load(cmd, &o, &a)) goto out;
    if (!app_tokenize(cmd, &a, text, false, &ids, &n_ids)) goto out;
    const int64_t n_ctx = a.s->n_ctx, V = a.m->hp.n_vocab;
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
    if (compare && a.mode == PI_FFN_DENSE) {
        fprintf(stderr, "pinfer: %s: --compare-dense needs the sparse path (a model with predictors, or --predictor)\n",
                cmd);
        goto out;
    }
    if (compare && pi_state_create(a.m, n_ctx, (int)o.threads, &dense)) {
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
    double sum = 0.0, dsum = 0.0, t0 = pi_time_s();
    int64_t count = 0, agree = 0, compared = 0;
    pi_sparse_stats *sps = pi_sparse_ffn_stats(a.s);
    if (sps) memset(sps, 0, (size_t)a.m->hp.n_layer * sizeof *sps);
    for (int64_t c = 0; c < n_chunks; c++) {
        const int32_t *win = ids + c * n_ctx;
        memcpy(wtok, win, (size_t)(n_ctx - 1) * sizeof *wtok);
        if (bos >= 0) wtok[0] = bos;
        if (eval_window(a.s, a.mode == PI_FFN_DENSE, wtok, n_ctx - 1, logits) || (compare && eval_window(dense, true, wtok, n_ctx - 1, dlogits))) {
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
        double el = pi_time_s() - t0, eta = el / (double)(c + 1) * (double)(n_chunks - c - 1);
        if (tty)
            fprintf(stderr, "\r[%lld/%lld] ppl %.4f  %.1f tok/s  ETA %.0f s   ", (long long)(c + 1),
                    (long long)n_chunks, exp(sum / (double)count), (double)((c + 1) * (n_ctx - 1)) / el, eta);
        else
            fprintf(stderr, "[%lld]%.4f%s", (long long)(c + 1), exp(sum / (double)count), c + 1 == n_chunks ? "\n" : ",");
    }
    if (tty) fputc('\n', stderr);
    printf("perplexity: %.4f over %lld tokens (%lld windows of %lld)\n", exp(sum / (double)count), (long long)count,
           (long long)n_chunks, (long long)n_ctx);
    if (compare) {
        uint64_t pred = 0, tokens = 0;
        for (int64_t il = 0; il < a.m->hp.n_layer; il++) {
            pred += sps[il].predicted;
            tokens += sps[il].tokens;
        }
        double ppl = exp(sum / (double)count), dppl = exp(dsum / (double)count);
        printf("dense perplexity: %.4f; sparse/dense - 1 = %+.3f%%\n", dppl, 100.0 * (ppl / dppl - 1.0));
        printf("top-1 agreement with dense: %.2f%% of %lld positions\n", 100.0 * (double)agree / (double)compared,
               (long long)compared);
        printf("FFN neurons computed: %.3f of %lld per layer (mean over tokens and layers)\n",
               tokens ? (double)pred / (double)tokens / (double)a.m->hp.n_ff : 0.0, (long long)a.m->hp.n_ff);
    }
    fprintf(stderr, "perplexity: %.1f s, %.1f tok/s\n", pi_time_s() - t0,
            (double)(n_chunks * (n_ctx - 1)) / (pi_time_s() - t0));
    rc = 0;
out:
    free(wtok);
    free(logits);
    free(dlogits);
    pi_state_free(dense);
    free(ids);
    free(owned);
    app_free(&a);
    return rc;
}
