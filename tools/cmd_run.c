/*
 * cmd_run.c — `pinfer run`: complete a prompt.
 *
 * stdout carries the prompt and then the generated text, nothing else, so
 * the output can be piped or compared; timings and memory go to stderr.
 */
#include "cmds.h"
#include "common.h"

#include "base/timer.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f) {
    fprintf(f, "usage: pinfer run -m FILE [-p PROMPT | -f FILE] [-n N] [options]\n"
               "  -p PROMPT            text to complete (default: empty, i.e. BOS only)\n"
               "  -f FILE              read the prompt from a file\n"
               "  -n N                 tokens to generate (default 128; -1: until end of text or context)\n"
               "  --ignore-eos         keep generating past end-of-text tokens\n"
               "  --special            parse special tokens (e.g. <s>) written in the prompt\n"
               "  --stats              with --mem-budget: memory per region, cache hits and misses, reads and\n"
               "                       I/O wait per token\n");
    app_usage_common(f);
}

int cmd_run(int argc, char **argv) {
    const char *cmd = "run";
    bool stats = false;
    app_opts o;
    app_opts_init(&o);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--special")) {
            o.special = true;
            continue;
        }
        if (!strcmp(argv[i], "--stats")) {
            stats = true;
            continue;
        }
        int r = app_parse_common(cmd, &o, argc, argv, &i);
        if (r < 0) return 2;
        if (r == 0) {
            fprintf(stderr, "pinfer: %s: unknown option '%s'\n", cmd, argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!o.seed_given) o.sp.seed = (uint64_t)time(NULL) & 0x7fffffff;
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
    if ((int64_t)n_ids > a.s->n_ctx) {
        fprintf(stderr, "pinfer: %s: the prompt is %zu tokens but the context holds %lld (raise -c, at most %lld)\n",
                cmd, n_ids, (long long)a.s->n_ctx, (long long)a.m->hp.n_ctx_train);
        goto out;
    }
    if (pi_sampler_create(&o.sp, a.m->hp.n_vocab, &smp)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        goto out;
    }
    fputs(text, stdout);
    fflush(stdout);

    double t0 = pi_time_s();
    if (pi_state_decode(a.s, ids, (int64_t)n_ids)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        goto out;
    }
    double t_prompt = pi_time_s() - t0;
    for (size_t i = 0; i < n_ids; i++) pi_sampler_accept(smp, ids[i]);

    const int32_t bos = pi_tokenizer_bos(a.tok);
    int32_t prev = ids[n_ids - 1];
    long n_gen = 0;
    bool ended = false, full = false, out_nl = text[0] && text[strlen(text) - 1] == '\n';
    t0 = pi_time_s();
    while (o.n_predict < 0 || n_gen < o.n_predict) {
        int32_t tok = pi_sampler_sample(smp, pi_state_logits(a.s));
        if (!o.ignore_eos && pi_tokenizer_is_eog(a.tok, tok)) {
            ended = true;
            break;
        }
        const char *piece;
        size_t len;
        if (pi_token_piece(a.tok, tok, false, &piece, &len) == PI_OK && len) {
            /* the dummy-prefix space of the first word after BOS is not text */
            if (prev == bos && piece[0] == ' ' && pi_tokenizer_add_space_prefix(a.tok)) piece++, len--;
            fwrite(piece, 1, len, stdout);
            fflush(stdout);
            if (len) out_nl = piece[len - 1] == '\n';
        }
        pi_sampler_accept(smp, tok);
        prev = tok;
        n_gen++;
        if (o.n_predict >= 0 && n_gen == o.n_predict) break;
        if (a.s->n_past == a.s->n_ctx) {
            full = true;
            break;
        }
        if (pi_state_decode(a.s, &tok, 1)) {
            fprintf(stderr, "\npinfer: %s: %s\n", cmd, pi_last_error());
            goto out;
        }
    }
    double t_gen = pi_time_s() - t0;
    if (!out_nl) fputc('\n', stdout);
    fflush(stdout);
    fprintf(stderr, "\n%s", full ? "run: stopped: the context is full (raise -c)\n" : ended ? "run: end of text\n" : "");
    fprintf(stderr, "run: load %.2f s; prompt %zu tokens in %.3f s (%.1f tok/s); generated %ld tokens in %.3f s (%.2f tok/s)\n",
            a.load_s, n_ids, t_prompt, (double)n_ids / t_prompt, n_gen, t_gen, n_gen ? (double)n_gen / t_gen : 0.0);
    fprintf(stderr, "run: %d threads, context %lld, seed %llu, kernels %s, FFN %s, peak RSS %.1f MiB\n",
            pi_pool_size(a.s->pool), (long long)a.s->n_ctx, (unsigned long long)o.sp.seed, a.s->k->name,
            app_ffn_mode(&a), app_peak_rss_mib());
    if (stats) app_print_offload(&a, stderr);
    rc = 0;
out:
    pi_sampler_free(smp);
    free(ids);
    free(owned);
    app_free(&a);
    return rc;
}
