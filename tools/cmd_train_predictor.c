/*
 * cmd_train_predictor.c — `pinfer train-predictor`: record (FFN input,
 * activation mask) pairs of every FFN unit (a dense layer, or one expert of
 * a mixture's layer, for the tokens routed to it) on calibration text,
 * train a low-rank predictor per unit (src/sparse/predictor.h), report its
 * recall and precision, and write a copy of the model with the predictors
 * (blk.N.fc1/fc2.weight or fc1_exps/fc2_exps, and the threshold keys) added.
 *
 * Tokens come from the text in windows of n_ctx, each evaluated from an
 * empty cache and starting with BOS, like `profile`: every position sees
 * the kind of context it sees in use. Recording stops at --tokens; the
 * recorded pairs take n_layer * (4 n_embd + n_ff / 8) bytes per token, so
 * the default is lowered for models whose pairs would not fit in
 * DEFAULT_MEM (a 7B model: ~7500 tokens).
 *
 * With --holdout-text, the trained predictors run next to the dense model on
 * that text (never trained on) and the report gives their held-out recall,
 * precision and predicted-active fraction against the true one.
 *
 * stdout carries the report only; progress and timings go to stderr.
 */
#include "args.h"
#include "cmds.h"
#include "common.h"

#include "api/api.h"
#include "progress.h"
#include "window.h"

#include "base/outfile.h"
#include "base/timer.h"
#include "sparse/predictor.h"
#include "sparse/stats.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_CTX 512              /* window size unless -c; at most the model's context */
#define DEFAULT_TOKENS 50000         /* tokens recorded unless --tokens */
#define DEFAULT_MEM (4ull << 30)     /* the default token count keeps the recorded pairs under this */


static void usage(FILE *f) {
    pi_pred_params d = pi_pred_default_params();
    fprintf(f,
            "usage: pinfer train-predictor -m FILE --text FILE -o OUT [options]\n"
            "  -m FILE              model (GGUF), dense or a mixture of experts (ReLU or dReLU for real\n"
            "                       sparsity); a mixture gets one predictor per expert\n"
            "  --text FILE          calibration text (UTF-8), run in windows of -c tokens\n"
            "  -o FILE              the model with predictors: a copy of -m plus blk.N.fc1/fc2.weight\n"
            "                       (mixtures: blk.N.fc1_exps/fc2_exps, stacked per expert),\n"
            "                       powerinfer.sparse_threshold and pinfer.predictor.* keys\n"
            "  --tokens N           record at most N tokens (default %d, fewer when the recorded pairs,\n"
            "                       n_layer * (4 n_embd + n_ff/8) bytes per token, would pass %llu GiB)\n"
            "  --rank R|auto        predictor rank of every layer, or auto (default): per layer the\n"
            "                       candidate n_embd/8 .. n_embd with the least work per token\n"
            "                       (predictor + predicted neurons) on the validation split\n"
            "  --epochs E           passes over the training tokens (default %d)\n"
            "  --lr LR              Adam step size (default %g, cosine decay to a tenth)\n"
            "  --recall R           recall target of the thresholds on the validation split (default %g)\n"
            "  --neuron-cost W      auto rank: cost of a predicted neuron's multiply-add relative to the\n"
            "                       predictor's (default %g; raise it when cold neurons come from flash)\n"
            "  --holdout-text FILE  report recall and precision on this text (never trained on)\n"
            "  --holdout-tokens N   evaluate at most N tokens of it (default: all)\n"
            "  -c CTX               window size in tokens (default: the model's context, at most %d)\n"
            "  -t N                 threads (default: all cores; the result does not depend on it)\n"
            "  --seed N             initial weights and shuffling (default %llu)\n"
            "  --mmap               map the model file instead of loading it into memory\n",
            DEFAULT_TOKENS, (unsigned long long)(DEFAULT_MEM >> 30), d.epochs, (double)d.lr, (double)d.recall,
            (double)d.neuron_cost, DEFAULT_CTX, (unsigned long long)d.seed);
}

/* Run the text's tokens (ids, starting with BOS when bos >= 0) through the
   session in windows of n_ctx, at most max_tokens of them (0: all), with
   whatever observer is installed; *n_win counts windows, *n_done tokens. */
static bool run_windows(const char *cmd, app *a, const char *what, const int32_t *ids, int64_t n_ids, int32_t bos,
                        int64_t max_tokens, int64_t *n_win, int64_t *n_done) {
    progress p;
    progress_init(&p, what, "tokens", window_total(pi_session_n_ctx(a->s), n_ids, bos, max_tokens));
    if (window_feed(pi_session_state(a->s), ids, n_ids, bos, max_tokens, progress_show, &p, n_win, n_done)) {
        progress_abort(&p);
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return false;
    }
    return true;
}

/* Read a whole text file (through the prompt reader, for its checks);
   NULL with a message that names the option when it cannot be read. */
static char *read_text(const char *cmd, const char *opt, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "pinfer: %s: %s %s: cannot open: %s\n", cmd, opt, path, strerror(errno));
        return NULL;
    }
    fclose(f);
    app_opts o;
    app_opts_init(&o);
    o.prompt_file = path;
    const char *text;
    char *owned = NULL;
    return app_prompt_text(cmd, &o, &text, &owned) ? owned : NULL;
}

static double frac_of(int64_t n, const pi_pred_counts *c, int64_t n_ff) {
    return c->tokens ? (double)n / ((double)c->tokens * (double)n_ff) : 0.0;
}

/* A unit's name in the report: its layer, or layer.expert. */
static const char *unit_name(const pi_predictor *P, int64_t l, char *buf, size_t n) {
    if (P->n_expert) snprintf(buf, n, "%lld.%lld", (long long)(l / P->n_expert), (long long)(l % P->n_expert));
    else snprintf(buf, n, "%lld", (long long)l);
    return buf;
}

static void report(const pi_predictor *P, const pi_pred_eval *ev) {
    const int64_t F = P->n_ff;
    char nm[48];
    printf("%s  rank  threshold | validation: recall  precision  predicted  active |", P->n_expert ? "l.exp" : "layer");
    printf(ev ? " held-out: recall  precision  predicted  active\n" : "\n");
    double sum[8] = {0};
    for (int64_t l = 0; l < P->n_layer; l++) {
        const pi_pred_layer *L = &P->layers[l];
        const pi_pred_counts *v = &L->val;
        double row[8] = {pi_pred_recall(v), pi_pred_precision(v), frac_of(v->predicted, v, F), frac_of(v->active, v, F)};
        printf("%5s  %4lld  %9.3f |             %6.4f  %9.3f  %9.3f  %6.3f |", unit_name(P, l, nm, sizeof nm),
               (long long)L->rank, L->untrained ? -INFINITY : (double)L->threshold, row[0], row[1], row[2], row[3]);
        if (ev) {
            const pi_pred_counts *h = &ev->counts[l];
            row[4] = pi_pred_recall(h);
            row[5] = pi_pred_precision(h);
            row[6] = frac_of(h->predicted, h, F);
            row[7] = frac_of(h->active, h, F);
            printf("           %6.4f  %9.3f  %9.3f  %6.3f", row[4], row[5], row[6], row[7]);
        }
        printf("%s\n", L->untrained ? "  (too few tokens routed: untrained, every neuron computed)" : "");
        for (int i = 0; i < 8; i++) sum[i] += row[i];
    }
    const double n = (double)P->n_layer;
    printf("  all            mean |             %6.4f  %9.3f  %9.3f  %6.3f |", sum[0] / n, sum[1] / n, sum[2] / n,
           sum[3] / n);
    if (ev) printf("           %6.4f  %9.3f  %9.3f  %6.3f", sum[4] / n, sum[5] / n, sum[6] / n, sum[7] / n);
    printf("\n(predicted, active: fractions of the %s's %lld neurons per token%s; a neuron is predicted active\n"
           " when its logit >= threshold; thresholds chosen for recall %.3f on the validation split)\n",
           P->n_expert ? "expert" : "layer", (long long)F, P->n_expert ? " routed to it" : "", (double)P->recall_target);
    if (P->n_expert) {
        /* the weakest expert: what the acceptance of a mixture's predictors looks at */
        int64_t wv = 0, wh = 0;
        for (int64_t l = 1; l < P->n_layer; l++) {
            if (pi_pred_recall(&P->layers[l].val) < pi_pred_recall(&P->layers[wv].val)) wv = l;
            if (ev && pi_pred_recall(&ev->counts[l]) < pi_pred_recall(&ev->counts[wh])) wh = l;
        }
        printf("lowest expert recall: validation %.4f (%s)", pi_pred_recall(&P->layers[wv].val),
               unit_name(P, wv, nm, sizeof nm));
        if (ev) printf(", held-out %.4f (%s)", pi_pred_recall(&ev->counts[wh]), unit_name(P, wh, nm, sizeof nm));
        printf("\n");
    }
    if (P->layers[0].n_tried > 1) {
        printf("rank candidates (validation predicted fraction at the recall target):\n");
        for (int64_t l = 0; l < P->n_layer; l++) {
            const pi_pred_layer *L = &P->layers[l];
            printf("%5s ", unit_name(P, l, nm, sizeof nm));
            for (int i = 0; i < L->n_tried; i++)
                printf(" %4lld: %.3f%s", (long long)L->tried_rank[i], frac_of(L->tried_val[i].predicted, &L->tried_val[i], F),
                       L->tried_rank[i] == L->rank ? "*" : " ");
            printf("\n");
        }
        printf("(* chosen: least multiply-adds per token, predictor + predicted neurons x 3 n_embd)\n");
    }
}

typedef struct {
    const char *text_path, *out_path, *hold_path;
    long max_tokens, hold_tokens;
    pi_pred_params pp;
} train_args;

static int train_option(void *ctx, const char *cmd, int argc, char **argv, int *ip) {
    train_args *t = ctx;
    const char *a = argv[*ip], *v;
    long epochs = 0, seed = -1;
    static const char *const ours[] = {"--text", "-o", "--tokens", "--rank", "--epochs", "--lr", "--recall",
                                 "--neuron-cost", "--holdout-text", "--holdout-tokens", "--seed"};
    bool mine = false;
    for (size_t k = 0; k < sizeof ours / sizeof ours[0]; k++) mine |= !strcmp(a, ours[k]);
    if (mine) {
        if (!(v = arg_value(cmd, argc, argv, ip))) return -1;
        if (!strcmp(a, "--text")) t->text_path = v;
        else if (!strcmp(a, "-o")) t->out_path = v;
        else if (!strcmp(a, "--holdout-text")) t->hold_path = v;
        else if (!strcmp(a, "--tokens")) {
            if (!arg_int(cmd, a, v, 2, INT32_MAX, &t->max_tokens)) return -1;
        } else if (!strcmp(a, "--holdout-tokens")) {
            if (!arg_int(cmd, a, v, 1, INT32_MAX, &t->hold_tokens)) return -1;
        } else if (!strcmp(a, "--epochs")) {
            if (!arg_int(cmd, a, v, 1, 100000, &epochs)) return -1;
            t->pp.epochs = (int)epochs;
        } else if (!strcmp(a, "--seed")) {
            if (!arg_int(cmd, a, v, 0, 0x7fffffff, &seed)) return -1;
            t->pp.seed = (uint64_t)seed;
        } else if (!strcmp(a, "--rank")) {
            long r = 0;
            if (strcmp(v, "auto") && !arg_int(cmd, a, v, 1, INT32_MAX, &r)) return -1;
            t->pp.rank = r;
        } else {
            const bool lr = !strcmp(a, "--lr"), recall = !strcmp(a, "--recall");
            char *end;
            float f = strtof(v, &end);
            bool ok = end != v && !*end && isfinite(f) && f > 0.0f;
            if (lr) ok = ok && f < 1.0f;
            if (recall) ok = ok && f <= 1.0f;
            if (!ok) {
                fprintf(stderr, "pinfer: %s: %s expects a number in %s, got '%s'\n", cmd, a,
                        lr ? "(0, 1)" : recall ? "(0, 1]" : "(0, inf)", v);
                return -1;
            }
            if (lr) t->pp.lr = f;
            else if (recall) t->pp.recall = f;
            else t->pp.neuron_cost = f;
        }
        return 1;
    }
    return 0;
}

int cmd_train_predictor(int argc, char **argv) {
    const char *cmd = "train-predictor";
    app_opts o;
    app_opts_init(&o);
    train_args ta = {NULL, NULL, NULL, 0, 0, pi_pred_default_params()};
    /* of the common options, only those that mean something here */
    static const char *const common[] = {"-m", "-t", "-c", "--mmap", NULL};
    int pr = app_parse_args(cmd, argc, argv, &o, common, train_option, &ta, usage);
    if (pr <= 0) return pr ? 2 : 0;
    const char *text_path = ta.text_path, *out_path = ta.out_path, *hold_path = ta.hold_path;
    long max_tokens = ta.max_tokens, hold_tokens = ta.hold_tokens;
    pi_pred_params pp = ta.pp;
    if (!o.model || !text_path || !out_path) {
        fprintf(stderr, "pinfer: %s: %s is required\n", cmd, !o.model ? "-m FILE" : !text_path ? "--text FILE" : "-o OUT");
        usage(stderr);
        return 2;
    }
    /* refused before any work: an output that would replace an input */
    if (pi_outfile_check_distinct(out_path, o.model, "the input model") ||
        pi_outfile_check_distinct(out_path, text_path, "the calibration text (--text)") ||
        pi_outfile_check_distinct(out_path, hold_path, "the held-out text (--holdout-text)")) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 2;
    }
    if (!app_out_writable(out_path)) {
        fprintf(stderr, "pinfer: %s: cannot write %s: its directory is missing or not writable\n", cmd, out_path);
        return 1;
    }
    /* every input is read before the long work starts */
    char *text = read_text(cmd, "--text", text_path), *hold = NULL;
    if (!text) return 1;
    if (hold_path && !(hold = read_text(cmd, "--holdout-text", hold_path))) {
        free(text);
        return 1;
    }
    const bool user_ctx = o.mp.n_ctx > 0;
    if (!user_ctx) o.mp.n_ctx = DEFAULT_CTX;

    app a;
    int32_t *ids = NULL, *hids = NULL;
    size_t n_ids = 0, n_hids = 0;
    pi_pred_data *d = NULL;
    pi_predictor *P = NULL;
    pi_pred_eval *ev = NULL;
    int rc = 1;
    o.mp.ffn = PI_FFN_DENSE; /* the FFN observer sees the dense path only */
    if (!app_load(cmd, &o, &a)) goto out;
    const pi_hparams *hp = &pi_model_lm(a.m)->hp;
    if (!app_fit_window(cmd, &o, user_ctx, &a)) goto out;
    const int64_t n_ctx = pi_session_n_ctx(a.s);
    if (max_tokens == 0) {
        const uint64_t per = pi_pred_data_bytes(pi_ffn_units(hp), hp->n_embd, hp->n_ff, 1);
        max_tokens = DEFAULT_TOKENS;
        if ((uint64_t)max_tokens * per > DEFAULT_MEM) {
            max_tokens = (long)(DEFAULT_MEM / per);
            fprintf(stderr, "%s: recording %ld tokens (%llu KiB each), not %d, to stay under %llu GiB; --tokens sets it\n",
                    cmd, max_tokens, (unsigned long long)(per >> 10), DEFAULT_TOKENS,
                    (unsigned long long)(DEFAULT_MEM >> 30));
        }
    }
    const float act_thr = pi_stats_default_threshold(hp->act);
    if (pi_pred_data_for_model(pi_model_lm(a.m), max_tokens, act_thr, &d)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        goto out;
    }
    if (pp.rank > pi_pred_max_rank(hp->n_embd, hp->n_ff)) {
        fprintf(stderr, "pinfer: %s: --rank %lld is above %lld (the smaller of n_embd and n_ff)\n", cmd,
                (long long)pp.rank, (long long)pi_pred_max_rank(hp->n_embd, hp->n_ff));
        rc = 2;
        goto out;
    }
    if (hp->act == PI_ACT_SILU)
        fprintf(stderr, "%s: note: %s has a SiLU FFN, which has no exact zeros: active means |act| > %g, and "
                        "sparse inference will be approximate\n",
                cmd, o.model, (double)act_thr);
    const int32_t bos = pi_tokenizer_add_bos(a.tok) ? pi_tokenizer_bos(a.tok) : -1;
    if (n_ctx < 2 && bos >= 0) {
        fprintf(stderr, "pinfer: %s: a window of %lld token holds BOS and nothing else (raise -c)\n", cmd,
                (long long)n_ctx);
        goto out;
    }
    if (!app_tokenize(cmd, &a, text, false, &ids, &n_ids)) goto out;
    if ((int64_t)n_ids <= (bos >= 0 ? 1 : 0) + 1) {
        fprintf(stderr, "pinfer: %s: %s holds too little text to train on\n", cmd, text_path);
        goto out;
    }
    if (hold) {
        if (!app_tokenize(cmd, &a, hold, false, &hids, &n_hids)) goto out;
        if ((int64_t)n_hids <= (bos >= 0 ? 1 : 0)) {
            fprintf(stderr, "pinfer: %s: %s holds no text to evaluate on\n", cmd, hold_path);
            goto out;
        }
    }
    fprintf(stderr, "%s: %s: %zu tokens, windows of %lld; recording at most %ld (%.1f MiB)\n", cmd, text_path, n_ids,
            (long long)n_ctx, max_tokens,
            (double)pi_pred_data_bytes(pi_ffn_units(hp), hp->n_embd, hp->n_ff, max_tokens) / (1 << 20));

    /* 1. record */
    double t0 = pi_time_s();
    int64_t n_win = 0, n_rec = 0;
    pi_state_set_observer(pi_session_state(a.s), pi_pred_data_observe, d);
    bool ok = run_windows(cmd, &a, "record", ids, (int64_t)n_ids, bos, max_tokens, &n_win, &n_rec);
    pi_state_set_observer(pi_session_state(a.s), NULL, NULL);
    const double rec_s = pi_time_s() - t0;
    if (!ok) goto out;

    /* 2. train */
    progress tp;
    progress_init(&tp, "train", NULL, 1);
    pp.progress = progress_update;
    pp.progress_ctx = &tp;
    t0 = pi_time_s();
    if (pi_pred_train(d, &pp, pi_session_state(a.s)->pool, &P)) {
        progress_abort(&tp);
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        goto out;
    }
    progress_show(&tp, tp.total);
    const double train_s = pi_time_s() - t0;

    /* 3. held-out evaluation */
    int64_t h_win = 0, h_done = 0;
    double hold_s = 0.0;
    if (hold) {
        if (pi_pred_eval_create(P, act_thr, &ev)) {
            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
            goto out;
        }
        t0 = pi_time_s();
        pi_state_set_observer(pi_session_state(a.s), pi_pred_eval_observe, ev);
        ok = run_windows(cmd, &a, "held-out", hids, (int64_t)n_hids, bos, hold_tokens, &h_win, &h_done);
        pi_state_set_observer(pi_session_state(a.s), NULL, NULL);
        hold_s = pi_time_s() - t0;
        if (!ok) goto out;
    }

    printf("train-predictor: %s: %s FFN, %lld layers x ", o.model, pi_ffn_act_name(hp->act), (long long)hp->n_layer);
    if (hp->n_expert) printf("%lld experts (%lld used) x ", (long long)hp->n_expert, (long long)hp->n_expert_used);
    printf("%lld neurons, n_embd %lld; active: |act| > %g\n", (long long)hp->n_ff, (long long)hp->n_embd,
           (double)act_thr);
    if (hp->n_expert) {
        printf("recorded %lld tokens of %s in %lld windows of up to %lld; each expert trained on the first %.0f%% of "
               "the tokens routed to it (%d epochs), validated on the rest\n",
               (long long)n_rec, text_path, (long long)n_win, (long long)n_ctx, 100.0 * (1.0 - (double)pp.val_frac),
               pp.epochs);
    } else {
        const int64_t n_val = P->layers[0].val.tokens;
        printf("recorded %lld tokens of %s in %lld windows of up to %lld: trained on the first %lld (%d epochs), "
               "validated on the last %lld\n",
               (long long)n_rec, text_path, (long long)n_win, (long long)n_ctx, (long long)(n_rec - n_val), pp.epochs,
               (long long)n_val);
    }
    if (hold)
        printf("held-out: %lld tokens of %s in %lld windows\n", (long long)h_done, hold_path, (long long)h_win);
    report(P, ev);
    if (pi_pred_save(P, pi_model_lm(a.m), out_path)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        goto out;
    }
    printf("wrote %s\n", out_path);
    fprintf(stderr, "%s: record %.1f s, train %.1f s, held-out %.1f s, %d threads, peak RSS %.1f MiB\n", cmd, rec_s,
            train_s, hold_s, pi_session_n_threads(a.s), app_peak_rss_mib());
    rc = 0;
out:
    pi_pred_eval_free(ev);
    pi_predictor_free(P);
    pi_pred_data_free(d);
    free(ids);
    free(hids);
    free(text);
    free(hold);
    app_free(&a);
    return rc;
}
