/*
 * cmd_profile.c — `pinfer profile`: run calibration tokens through the dense
 * model, count per layer how often each FFN neuron is active, write the
 * counts as a stats GGUF (src/sparse/stats.h) and print the per-layer
 * sparsity and skew.
 *
 * Tokens come from a text (--text), cut into windows of n_ctx tokens like
 * the perplexity tool does: each window is evaluated from an empty cache and
 * starts with BOS, so every position sees the kind of context it sees in
 * use. A window is BOS and the next n_ctx-1 tokens of text (perplexity
 * overwrites a text token with BOS instead; here no text is skipped), and
 * the last, partial window is profiled too. Without a text, the model samples its own calibration tokens
 * (temperature 1, no truncation, so they follow the model's distribution),
 * one window per sequence, a new window at end of text; the seed is printed
 * so a run can be repeated. Every token evaluated is profiled, BOS included.
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
#include "sparse/cachesim.h"
#include "sparse/ffn_sparse.h"
#include "sparse/predictor.h"
#include "sparse/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_CTX 512      /* window size unless -c; at most the model's context */
#define DEFAULT_SAMPLED 8192 /* tokens to sample when there is no --text and no --tokens */

static void usage(FILE *f) {
    fprintf(f,
            "usage: pinfer profile -m FILE [--text FILE | --tokens N] -o STATS [options]\n"
            "  -m FILE              model (GGUF) with dense FFN layers\n"
            "  -o FILE              where to write the statistics (GGUF, pinfer-stats)\n"
            "  --text FILE          calibration text (UTF-8); without it the model samples its own\n"
            "                       tokens (temperature 1, seeded)\n"
            "  --tokens N           profile at most N tokens (default: all of --text, or %d sampled)\n"
            "  -c CTX               window size in tokens (default: the model's context, at most %d)\n"
            "  -t N                 threads (default: all cores)\n"
            "  --threshold T        a neuron is active when |act| > T (default: 0 for relu/drelu,\n"
            "                       %g for SiLU models, whose activations are never exactly 0)\n"
            "  --seed N             sampling seed (default: random, printed)\n"
            "  --mmap               map the model file instead of loading it into memory\n"
            "  --cache-sim SIZES    replay the activations through the neuron cache under each policy\n"
            "                       (lru, slru, lfu) at these sizes, in shares of all neurons (e.g.\n"
            "                       0.02,0.05,0.1); the hot set (--cache-hot, default 0.1 of each layer's\n"
            "                       neurons, the most frequent) stays resident\n"
            "  --cache-hot F        the hot share for --cache-sim\n"
            "  --masks N            keep the activation masks of the first N tokens (default %d; 0: none),\n"
            "                       from which convert --order coact places neurons that fire together\n"
            "                       side by side (a mixture's experts: of the first N tokens routed to each)\n",
            DEFAULT_SAMPLED, DEFAULT_CTX, (double)PI_STATS_SILU_THRESHOLD, PI_STATS_MASK_TOKENS);
}

/* A decode failed: end the progress line and say why. */
static bool failed(const char *cmd, progress *p) {
    progress_abort(p);
    fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
    return false;
}

/* Profile the text's tokens (ids, starting with BOS when bos >= 0) in
   windows of n_ctx, at most max_tokens of them; *n_win counts windows. */
static bool profile_text(const char *cmd, app *a, const int32_t *ids, int64_t n_ids, int32_t bos, int64_t max_tokens,
                         int64_t *n_win) {
    progress p;
    progress_init(&p, "profile", "tokens", window_total(pi_session_n_ctx(a->s), n_ids, bos, max_tokens));
    int64_t done;
    if (window_feed(pi_session_state(a->s), ids, n_ids, bos, max_tokens, progress_show, &p, n_win, &done)) return failed(cmd, &p);
    return true;
}

typedef struct {
    progress *p;
    pi_session *s;
    int64_t done; /* tokens evaluated before this window */
} sampled_progress;

static int sampled_piece(void *ctx, const char *text, size_t len, int32_t token) {
    (void)text, (void)len, (void)token;
    sampled_progress *sp = ctx;
    progress_show(sp->p, sp->done + pi_session_n_past(sp->s));
    return 0;
}

/* Sample max_tokens tokens from the model, window by window, and profile
   them; a window starts at BOS and ends when the context is full or at end
   of text. */
static bool profile_sampled(const char *cmd, app *a, int32_t bos, uint64_t seed, int64_t max_tokens, int64_t *n_win) {
    pi_sampler_params sp = pi_sampler_default_params();
    sp.temp = 1.0f; /* the model's own distribution: no top-k/p, no min-p, no penalty */
    sp.top_k = 0;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    sp.repeat_penalty = 1.0f;
    sp.seed = seed;
    pi_sampler *smp;
    if (pi_sampler_create(&sp, a->info.n_vocab, &smp)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return false;
    }
    progress p;
    progress_init(&p, "profile", "tokens", max_tokens);
    sampled_progress spg = {&p, a->s, 0};
    bool ok = true;
    *n_win = 0;
    while (ok && spg.done < max_tokens) {
        ++*n_win;
        pi_generate_params gp = pi_generate_default_params();
        gp.n_predict = max_tokens - spg.done - 1; /* BOS is evaluated too */
        ok = pi_session_kv_clear(a->s) == PI_OK &&
             pi_generate(a->s, smp, &bos, 1, &gp, sampled_piece, &spg, NULL) == PI_OK;
        if (!ok) failed(cmd, &p);
        spg.done += pi_session_n_past(a->s);
        progress_show(&p, spg.done);
    }
    pi_sampler_free(smp);
    return ok;
}

static void report(const pi_stats *st) {
    printf("layer  active/token  neurons for 80%%  never active\n");
    double mean_sum = 0.0, cov_sum = 0.0;
    int64_t never = 0;
    for (int64_t l = 0; l < st->n_layer; l++) {
        double mean = pi_stats_mean_active(st, l);
        double cov = (double)pi_stats_neurons_for(st, l, 0.8) / (double)st->n_ff;
        int64_t nv = pi_stats_never_active(st, l);
        printf("%5lld  %12.3f  %15.3f  %12.3f\n", (long long)l, mean, cov, (double)nv / (double)st->n_ff);
        mean_sum += mean;
        cov_sum += cov;
        never += nv;
    }
    printf("  all  %12.3f  %15.3f  %12.3f\n", mean_sum / (double)st->n_layer, cov_sum / (double)st->n_layer,
           (double)never / (double)(st->n_layer * st->n_ff));
    printf("(fractions of each layer's %lld neurons; \"neurons for 80%%\": the most active neurons that account for\n"
           " 80%% of the layer's activations, 0.8 meaning no skew; \"all\": mean over layers)\n",
           (long long)st->n_ff);
    if (!st->reuse_tokens) {
        printf("temporal reuse: no window was longer than %d tokens\n", PI_STATS_REUSE_K);
        return;
    }
    printf("\ntemporal reuse over %lld tokens: share of a token's active neurons also active in the last k tokens\n",
           (long long)st->reuse_tokens);
    printf("layer");
    for (int k = 1; k <= PI_STATS_REUSE_K; k++) printf("    k=%d", k);
    printf("   independent k=1, k=8\n");
    double sum[PI_STATS_REUSE_K + 2] = {0};
    for (int64_t l = 0; l < st->n_layer; l++) {
        printf("%5lld", (long long)l);
        for (int k = 1; k <= PI_STATS_REUSE_K; k++) {
            double r = pi_stats_reuse(st, l, k);
            sum[k - 1] += r;
            printf("  %5.3f", r);
        }
        double i1 = pi_stats_reuse_independent(st, l, 1), i8 = pi_stats_reuse_independent(st, l, PI_STATS_REUSE_K);
        sum[PI_STATS_REUSE_K] += i1;
        sum[PI_STATS_REUSE_K + 1] += i8;
        printf("   %13.3f  %5.3f\n", i1, i8);
    }
    printf("  all");
    for (int k = 0; k < PI_STATS_REUSE_K; k++) printf("  %5.3f", sum[k] / (double)st->n_layer);
    printf("   %13.3f  %5.3f\n", sum[PI_STATS_REUSE_K] / (double)st->n_layer,
           sum[PI_STATS_REUSE_K + 1] / (double)st->n_layer);
    printf("(\"independent\": what the same frequencies give when tokens activate neurons independently)\n");
}

#define MAX_SIM_SIZES 8

typedef struct {
    const char *text_path, *out_path;
    long max_tokens;
    long masks; /* tokens whose activation masks are kept (-1: the default) */
    float threshold;
    double sim[MAX_SIM_SIZES], sim_hot;
    int n_sim;
} profile_args;

/* The observers: the statistics, the trace for --cache-sim, and with a
   model's predictors the histograms of their logits. */
typedef struct {
    pi_stats *st;
    pi_trace *tr;
    pi_predictor *pred;
    const pi_lm *m; /* its thresholds: a neuron is selected when its logit reaches its unit's */
    float *h, *z;  /* (rank), (n_ff) */
} observers;

static void observe_both(void *ctx, int64_t layer, int64_t pos, const float *ffn_in, const float *act) {
    observers *o = ctx;
    pi_stats_observe(o->st, layer, pos, ffn_in, act);
    if (o->tr) pi_trace_observe(o->tr, layer, pos, ffn_in, act);
    if (o->pred) {
        pi_pred_logits(o->pred, layer, ffn_in, o->h, o->z);
        const int64_t X = o->m->hp.n_expert ? o->m->hp.n_expert : 1; /* layer is an FFN unit */
        int64_t split; /* the model profiled has no plan: one threshold per unit */
        float thr_hot;
        const float thr = pi_sparse_threshold(o->m, layer / X, layer % X, &split, &thr_hot);
        pi_stats_observe_logits(o->st, layer, o->z, act, thr);
    }
}

/* Per layer, the neurons the predictors select per token at a few recall
   targets (the thresholds convert --recall would write). */
static void threshold_report(const pi_stats *st) {
    static const double targets[] = {0.99, 0.97, 0.95, 0.90};
    enum { NT = sizeof targets / sizeof targets[0] };
    double *sel = malloc((size_t)(NT * st->n_layer) * sizeof *sel), *prec = malloc((size_t)(NT * st->n_layer) * sizeof *prec);
    float *thr = malloc((size_t)(NT * st->n_layer) * sizeof *thr);
    if (!sel || !prec || !thr) goto done;
    for (int t = 0; t < NT; t++)
        if (pi_stats_thresholds(st, targets[t], thr + t * st->n_layer, NULL, prec + t * st->n_layer,
                                sel + t * st->n_layer))
            goto done;
    printf("\npredictor thresholds by recall target (from the logits' histograms): per layer the threshold, the "
           "share of neurons selected per token and the precision\nlayer");
    for (int t = 0; t < NT; t++) printf("   recall %.2f: thr  sel%%  prec", targets[t]);
    printf("\n");
    for (int64_t l = 0; l < st->n_layer; l++) {
        printf("%5lld", (long long)l);
        for (int t = 0; t < NT; t++) {
            const int64_t k = t * st->n_layer + l;
            printf("      %8.3f %5.1f %5.3f", thr[k] < -1e30f ? -INFINITY : (double)thr[k], 100.0 * sel[k], prec[k]);
        }
        printf("\n");
    }
done:
    free(sel);
    free(prec);
    free(thr);
}

/* Hit rates of each policy at each size, the winner per size. */
static bool cache_report(const char *cmd, const pi_trace *tr, const pi_stats *st, const profile_args *pa) {
    const int64_t all = st->n_layer * st->n_ff;
    printf("\nneuron cache replay: %lld tokens (first 20%% warm the cache), hot set %.0f%% of each layer's neurons "
           "resident\n", (long long)tr->n_tok, 100.0 * pa->sim_hot);
    printf("cache (share of all neurons)  cold/token");
    for (int p = 0; p < PI_NCACHE_N_POLICIES; p++) printf("  %8s", pi_ncache_policy_name((pi_ncache_policy)p));
    printf("  best\n");
    for (int k = 0; k < pa->n_sim; k++) {
        const int64_t slots = (int64_t)(pa->sim[k] * (double)all) > 0 ? (int64_t)(pa->sim[k] * (double)all) : 1;
        pi_cachesim_result r[PI_NCACHE_N_POLICIES];
        for (int p = 0; p < PI_NCACHE_N_POLICIES; p++)
            if (pi_cachesim_run(tr, st, pa->sim_hot, slots, (pi_ncache_policy)p, 0.2, &r[p])) {
                fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
                return false;
            }
        int best = 0;
        for (int p = 1; p < PI_NCACHE_N_POLICIES; p++) best = r[p].hit_rate > r[best].hit_rate ? p : best;
        printf("%8.3f (%9lld slots)  %10.1f", pa->sim[k], (long long)slots, r[0].cold_per_tok);
        for (int p = 0; p < PI_NCACHE_N_POLICIES; p++) printf("  %7.1f%%", 100.0 * r[p].hit_rate);
        printf("  %s%s\n", pi_ncache_policy_name((pi_ncache_policy)best),
               r[0].refused > 0.0 ? " (too small for one token's neurons)" : "");
    }
    printf("(hit rate: cold neurons found in the cache after the warm-up; cold/token: neurons outside the hot set\n"
           " a token activates, over all layers)\n");
    return true;
}

static int profile_option(void *ctx, const char *cmd, int argc, char **argv, int *i) {
    profile_args *p = ctx;
    const char *a = argv[*i], *v;
    if (strcmp(a, "--text") && strcmp(a, "--tokens") && strcmp(a, "-o") && strcmp(a, "--threshold") &&
        strcmp(a, "--cache-sim") && strcmp(a, "--cache-hot") && strcmp(a, "--masks"))
        return 0;
    if (!(v = arg_value(cmd, argc, argv, i))) return -1;
    if (!strcmp(a, "--cache-sim") || !strcmp(a, "--cache-hot")) {
        const bool sizes = !strcmp(a, "--cache-sim");
        char buf[256], *items[MAX_SIM_SIZES];
        snprintf(buf, sizeof buf, "%s", v);
        int n = sizes ? arg_list(cmd, a, buf, items, MAX_SIM_SIZES) : 1;
        if (!sizes) items[0] = buf;
        for (int k = 0; k < n; k++) {
            char *end;
            double f = strtod(items[k], &end);
            if (end == items[k] || *end || !(f > 0.0 && f < 1.0) || (!sizes && f >= 1.0)) {
                fprintf(stderr, "pinfer: %s: %s expects shares in (0, 1), got '%s'\n", cmd, a, items[k]);
                return -1;
            }
            if (sizes) p->sim[k] = f;
            else p->sim_hot = f;
        }
        if (n < 0) return -1;
        if (sizes) p->n_sim = n;
        return 1;
    }
    if (!strcmp(a, "--text")) p->text_path = v;
    else if (!strcmp(a, "-o")) p->out_path = v;
    else if (!strcmp(a, "--tokens")) return arg_int(cmd, a, v, 1, PI_STATS_MAX_TOKENS, &p->max_tokens) ? 1 : -1;
    else if (!strcmp(a, "--masks")) return arg_int(cmd, a, v, 0, PI_STATS_MAX_MASK_TOKENS, &p->masks) ? 1 : -1;
    else {
        char *end;
        p->threshold = strtof(v, &end);
        if (end == v || *end || !(p->threshold >= 0.0f) || isinf(p->threshold)) {
            fprintf(stderr, "pinfer: %s: --threshold expects a number >= 0, got '%s'\n", cmd, v);
            return -1;
        }
    }
    return 1;
}

int cmd_profile(int argc, char **argv) {
    const char *cmd = "profile";
    app_opts o;
    app_opts_init(&o);
    profile_args pa = {.threshold = -1.0f, .sim_hot = 0.1, .masks = -1};
    /* of the common options, only those that mean something here */
    static const char *const common[] = {"-m", "-t", "-c", "--seed", "--mmap", NULL};
    int pr = app_parse_args(cmd, argc, argv, &o, common, profile_option, &pa, usage);
    if (pr <= 0) return pr ? 2 : 0;
    const char *text_path = pa.text_path, *out_path = pa.out_path;
    long max_tokens = pa.max_tokens;
    const float threshold = pa.threshold;
    if (!o.model || !out_path) {
        fprintf(stderr, "pinfer: %s: %s is required\n", cmd, !o.model ? "-m FILE" : "-o STATS");
        usage(stderr);
        return 2;
    }
    /* refused before any work: an output that would replace an input */
    if (pi_outfile_check_distinct(out_path, o.model, "the input model") ||
        pi_outfile_check_distinct(out_path, text_path, "the calibration text")) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 2;
    }
    if (!app_out_writable(out_path)) {
        fprintf(stderr, "pinfer: %s: cannot write %s: its directory is missing or not writable\n", cmd, out_path);
        return 1;
    }
    const bool user_ctx = o.mp.n_ctx > 0;
    if (!user_ctx) o.mp.n_ctx = DEFAULT_CTX;
    const char *text = NULL;
    char *owned = NULL;
    o.prompt_file = text_path;
    if (text_path && !app_prompt_text(cmd, &o, &text, &owned)) return 2;

    app a;
    int32_t *ids = NULL;
    pi_stats *st = NULL;
    observers obs = {NULL, NULL, NULL, NULL, NULL, NULL};
    int rc = 1;
    size_t n_ids = 0;
    o.mp.ffn = PI_FFN_DENSE; /* the FFN observer sees the dense path only */
    if (!app_load(cmd, &o, &a)) goto out;
    const pi_hparams *hp = &pi_model_lm(a.m)->hp;
    if (pi_stats_for_model(pi_model_lm(a.m), threshold >= 0.0f ? threshold : pi_stats_default_threshold(hp->act), &st)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        goto out;
    }
    if (!app_fit_window(cmd, &o, user_ctx, &a)) goto out;
    const int64_t n_ctx = pi_session_n_ctx(a.s);
    const int32_t bos = pi_tokenizer_bos(a.tok);
    if (text_path) {
        if (!app_tokenize(cmd, &a, text, false, &ids, &n_ids)) goto out;
        const int32_t wbos = pi_tokenizer_add_bos(a.tok) ? bos : -1;
        if ((int64_t)n_ids <= (wbos >= 0 ? 1 : 0)) {
            fprintf(stderr, "pinfer: %s: %s holds no text to profile\n", cmd, text_path);
            goto out;
        }
        fprintf(stderr, "profile: %s: %zu tokens, windows of %lld\n", text_path, n_ids, (long long)n_ctx);
    } else if (bos < 0) {
        fprintf(stderr, "pinfer: %s: the model has no BOS token to start sampling from; give --text\n", cmd);
        goto out;
    }
    if (!text_path && max_tokens == 0) max_tokens = DEFAULT_SAMPLED;
    if (n_ctx < 2 && (!text_path || pi_tokenizer_add_bos(a.tok))) {
        fprintf(stderr, "pinfer: %s: a window of %lld token holds BOS and nothing else (raise -c)\n", cmd,
                (long long)n_ctx);
        goto out;
    }

    if (pa.masks && pi_stats_enable_masks(st, pa.masks > 0 ? pa.masks : PI_STATS_MASK_TOKENS)) {
        fprintf(stderr, "pinfer: %s: --masks: %s\n", cmd, pi_last_error());
        goto out;
    }
    obs.st = st;
    if (pi_model_lm(a.m)->has_predictor) { /* the predictors' logits, for choosing thresholds (convert --recall) */
        const pi_lm *lm = pi_model_lm(a.m);
        int64_t rank = 1;
        for (int64_t l = 0; l < hp->n_layer; l++) {
            const pi_weight *fc1 = hp->n_expert ? &lm->layers[l].fc1_exps : &lm->layers[l].fc1;
            rank = fc1->ne[1] > rank ? fc1->ne[1] : rank;
        }
        obs.m = lm;
        if (pi_predictor_from_model(lm, &obs.pred) || pi_stats_enable_hist(st) ||
            !(obs.h = malloc((size_t)rank * sizeof *obs.h)) || !(obs.z = malloc((size_t)hp->n_ff * sizeof *obs.z))) {
            fprintf(stderr, "pinfer: %s: the predictors' histograms: %s\n", cmd, pi_last_error());
            goto out;
        }
    }
    if (pa.n_sim) {
        const int64_t cap = max_tokens > 0 ? max_tokens : (int64_t)n_ids + (int64_t)n_ids / (n_ctx > 1 ? n_ctx - 1 : 1) + 1;
        if (pi_trace_create(st->n_layer, st->n_ff, cap, st->threshold, &obs.tr)) {
            fprintf(stderr, "pinfer: %s: --cache-sim: %s (profile fewer --tokens)\n", cmd, pi_last_error());
            goto out;
        }
    }
    pi_state_set_observer(pi_session_state(a.s), observe_both, &obs);
    double t0 = pi_time_s();
    int64_t n_win = 0;
    bool ok = text_path ? profile_text(cmd, &a, ids, (int64_t)n_ids, pi_tokenizer_add_bos(a.tok) ? bos : -1,
                                       max_tokens, &n_win)
                        : profile_sampled(cmd, &a, bos, o.sp.seed, max_tokens, &n_win);
    pi_state_set_observer(pi_session_state(a.s), NULL, NULL);
    double el = pi_time_s() - t0;
    if (!ok) goto out;

    printf("profile: %s: %s FFN, %lld layers x %lld neurons; active: |act| > %g\n", o.model, pi_ffn_act_name(hp->act),
           (long long)st->n_layer, (long long)st->n_ff, (double)st->threshold);
    if (text_path)
        printf("profile: %lld tokens of %s in %lld windows of up to %lld\n", (long long)st->tokens, text_path,
               (long long)n_win, (long long)n_ctx);
    else
        printf("profile: %lld tokens sampled from the model (temperature 1, seed %llu) in %lld windows of up to %lld\n",
               (long long)st->tokens, (unsigned long long)o.sp.seed, (long long)n_win, (long long)n_ctx);
    report(st);
    if (st->hist) threshold_report(st);
    if (obs.tr && !cache_report(cmd, obs.tr, st, &pa)) goto out;
    if (pi_stats_save(st, out_path)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        goto out;
    }
    if (st->mask_tokens)
        printf("profile: activation masks of the first %lld tokens kept (convert --order coact reads them)\n",
               (long long)st->mask_tokens);
    printf("wrote %s\n", out_path);
    fprintf(stderr, "profile: %.1f s, %.1f tok/s, %d threads, load %.2f s, peak RSS %.1f MiB\n", el,
            el > 0 ? (double)st->tokens / el : 0.0, pi_session_n_threads(a.s), a.load_s, app_peak_rss_mib());
    rc = 0;
out:
    pi_trace_free(obs.tr);
    pi_predictor_free(obs.pred);
    free(obs.h);
    free(obs.z);
    pi_stats_free(st);
    free(ids);
    free(owned);
    app_free(&a);
    return rc;
}
