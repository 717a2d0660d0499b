/*
 * cmd_bench.c — `pinfer bench`: prompt-processing and decode speed of a
 * model, next to the memory-bandwidth bound of decode measured in the same
 * run, and optionally a peer's benchmark (llama-bench) on the same file in
 * the same run, with the ratio.
 *
 * Like llama-bench: ppN evaluates N tokens as one prompt from an empty
 * context; tgN generates N tokens one at a time from an empty context; each
 * figure is the median of -r repetitions after one warm-up.
 */
#include "args.h"
#include "cmds.h"
#include "common.h"

#include "plot.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>

#define MAX_REPS 50

static void usage(FILE *f) {
    fprintf(f, "usage: pinfer bench -m FILE [options]\n"
               "  -p N                 prompt tokens for the pp test (default 512; 0 = skip)\n"
               "  -n N                 generated tokens for the tg test (default 128; 0 = skip)\n"
               "  -t N                 threads (default: all cores)\n"
               "  -r N                 repetitions, median reported (default 5)\n"
               "  --peer PATH          also run this llama-bench binary on the same file and print ratios\n"
               "  --rounds N           alternate pinfer and the peer N times; report medians and the\n"
               "                       median of the per-round ratios (robust to a noisy machine)\n"
               "  --mem-budget SIZE    decode with the FFN on flash under this budget (a bundle file)\n"
               "  --sweep F,F,...      decode speed across budgets (a bundle file): for each F, a budget of the\n"
               "                       model's minimum plus F times its FFN bytes (1 = all resident), planned,\n"
               "                       predicted and measured; plus the in-memory sparse and dense speeds\n"
               "  --naive              with --sweep: also measure the naive split (uniform hot prefix, default\n"
               "                       cache) at each budget\n"
               "  --sweep-out PREFIX   write PREFIX.json, PREFIX.csv and PREFIX.svg (speed versus memory)\n");
    app_usage_common(f);
}

/* Parse llama-bench's CSV: avg_ts of the row with the given n_prompt/n_gen. */
static int csv_split(char *line, char **f, int max) {
    int n = 0;
    char *p = line;
    while (*p && n < max) {
        char *start;
        if (*p == '"') {
            start = ++p;
            while (*p && *p != '"') p++;
            if (*p) *p++ = '\0';
        } else {
            start = p;
            while (*p && *p != ',' && *p != '\n' && *p != '\r') p++;
        }
        if (*p == ',' || *p == '\n' || *p == '\r') *p++ = '\0';
        f[n++] = start;
    }
    return n;
}

static bool run_peer(const char *peer, const char *model, long p, long n, long t, long r, double *pp, double *tg) {
    char cmdline[4096];
    *pp = *tg = 0.0;
    int w = snprintf(cmdline, sizeof cmdline, "'%s' -m '%s' -p %ld -n %ld -t %ld -r %ld -o csv 2>/dev/null", peer,
                     model, p, n, t, r);
    if (w < 0 || (size_t)w >= sizeof cmdline || strchr(peer, '\'') || strchr(model, '\'')) {
        fprintf(stderr, "pinfer: bench: peer path or model path cannot be quoted\n");
        return false;
    }
    fprintf(stderr, "bench: running peer: %s\n", cmdline);
    FILE *f = popen(cmdline, "r");
    if (!f) return false;
    char line[8192];
    int i_np = -1, i_ng = -1, i_ts = -1;
    while (fgets(line, sizeof line, f)) {
        char *fld[128];
        int nf = csv_split(line, fld, 128);
        if (i_ts < 0) {
            for (int k = 0; k < nf; k++) {
                if (!strcmp(fld[k], "n_prompt")) i_np = k;
                if (!strcmp(fld[k], "n_gen")) i_ng = k;
                if (!strcmp(fld[k], "avg_ts")) i_ts = k;
            }
            continue;
        }
        if (i_np < 0 || i_ng < 0 || nf <= i_ts || nf <= i_np || nf <= i_ng) continue;
        long np = atol(fld[i_np]), ng = atol(fld[i_ng]);
        double ts = atof(fld[i_ts]);
        if (np > 0 && ng == 0) *pp = ts;
        if (ng > 0 && np == 0) *tg = ts;
    }
    int st = pclose(f);
    if (st != 0 || i_ts < 0) {
        fprintf(stderr, "pinfer: bench: the peer failed or printed no CSV (exit status %d)\n", st);
        return false;
    }
    return true;
}

/* Median tok/s of `reps` prompt evaluations of n tokens from an empty context. */
static bool measure_pp(app *a, const int32_t *toks, long n, long reps, double *out) {
    double v[MAX_REPS];
    for (long r = -1; r < reps; r++) { /* r = -1: warm-up */
        pi_session_kv_clear(a->s);
        double t0 = app_time_s();
        if (pi_session_eval(a->s, toks, (size_t)n)) return false;
        if (r >= 0) v[r] = (double)n / (app_time_s() - t0);
    }
    *out = app_median(v, (int)reps);
    return true;
}

/* Median tok/s of `reps` runs generating n tokens one at a time. */
static bool measure_tg(app *a, long n, long reps, double *out) {
    const int64_t V = a->info.n_vocab;
    double v[MAX_REPS];
    for (long r = -1; r < reps; r++) {
        pi_session_kv_clear(a->s);
        int32_t tok = 1 % (int32_t)V;
        double t0 = app_time_s();
        for (long i = 0; i < n; i++) {
            if (pi_session_decode(a->s, tok)) return false;
            tok = (int32_t)((tok * 31 + 7) % V);
        }
        if (r >= 0) v[r] = (double)n / (app_time_s() - t0);
    }
    *out = app_median(v, (int)reps);
    return true;
}

/* The sparse FFN's counters since they were cleared: per layer, per token.
   Recall is measured against the exact active set (pi_session_set_recall_check). */
static void print_sparse_stats(const app *a, bool check, double bw, double tg) {
    const pi_model_info *in = &a->info;
    const double F = (double)in->n_ff;
    double touched = 0.0, sum_pred = 0.0, sum_act = 0.0, sum_truth = 0.0, sum_missed = 0.0;
    printf("sparse FFN per token (%s), neurons of %lld per layer (fraction):\n", app_ffn_mode(a), (long long)in->n_ff);
    printf("%-6s %16s %16s %16s %8s %11s\n", "layer", "predicted", "computed", "active", "recall", "MB touched");
    for (int64_t il = 0; il < in->n_layer; il++) {
        pi_layer_stats st;
        if (pi_session_layer_stats(a->s, il, &st)) return;
        double t = st.tokens ? (double)st.tokens : 1.0;
        char rec[16] = "-";
        if (check && st.oracle_active)
            snprintf(rec, sizeof rec, "%.4f", 1.0 - (double)st.missed / (double)st.oracle_active);
        printf("%-6lld %8.0f (%.3f) %8.0f (%.3f) %8.0f (%.3f) %8s %11.2f\n", (long long)il, (double)st.computed / t,
               (double)st.computed / t / F, (double)st.computed / t, (double)st.computed / t / F,
               (double)st.active / t, (double)st.active / t / F, rec, (double)st.weight_bytes / t * 1e-6);
        touched += (double)st.weight_bytes / t;
        sum_pred += (double)st.computed / t;
        sum_act += (double)st.active / t;
        sum_truth += (double)st.oracle_active;
        sum_missed += (double)st.missed;
    }
    printf("all layers: %.3f of FFN neurons computed, %.3f active", sum_pred / (F * (double)in->n_layer),
           sum_act / (F * (double)in->n_layer));
    if (check && sum_truth > 0) printf(", predictor recall %.4f vs the oracle", 1.0 - sum_missed / sum_truth);
    printf("\n");
    const double ffn = (double)in->ffn_bytes, all = (double)in->bytes_per_token - ffn + touched;
    double bound = bw * 1e9 / all;
    printf("weights touched per token: %.1f MB (FFN %.1f of %.1f MB dense) -> bound %.1f tok/s; tg reaches %.0f%%\n",
           all * 1e-6, touched * 1e-6, ffn * 1e-6, bound, 100.0 * tg / bound);
}

#define MAX_SWEEP 16

typedef struct {
    double frac, budget_mib, predicted, measured, naive, rss_mib;
} sweep_point;

static bool write_sweep(const char *prefix, const char *model, const sweep_point *pt, int n, double sparse, double dense) {
    char path[1024];
    snprintf(path, sizeof path, "%s.csv", prefix);
    FILE *f = fopen(path, "w");
    if (!f) return false;
    fprintf(f, "ffn_fraction,budget_mib,predicted_tok_s,measured_tok_s,naive_tok_s\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "%.3f,%.1f,%.3f,%.3f,%.3f\n", pt[i].frac, pt[i].budget_mib, pt[i].predicted, pt[i].measured,
                pt[i].naive);
    if (fclose(f)) return false;
    snprintf(path, sizeof path, "%s.json", prefix);
    if (!(f = fopen(path, "w"))) return false;
    fprintf(f, "{\"model\": \"%s\", \"in_memory_sparse_tok_s\": %.3f, \"dense_tok_s\": %.3f, \"points\": [", model,
            sparse, dense);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\n  {\"ffn_fraction\": %.3f, \"budget_mib\": %.1f, \"predicted_tok_s\": %.3f, "
                   "\"measured_tok_s\": %.3f, \"naive_tok_s\": %.3f}",
                i ? "," : "", pt[i].frac, pt[i].budget_mib, pt[i].predicted, pt[i].measured, pt[i].naive);
    fprintf(f, "\n]}\n");
    if (fclose(f)) return false;
    double x[MAX_SWEEP + 1], ym[MAX_SWEEP + 1], yp[MAX_SWEEP + 1], yn[MAX_SWEEP + 1];
    for (int i = 0; i < n; i++) {
        x[i] = pt[i].budget_mib;
        ym[i] = pt[i].measured;
        yp[i] = pt[i].predicted;
        yn[i] = pt[i].naive > 0.0 ? pt[i].naive : NAN;
    }
    plot_series s[3] = {{"measured (planned)", x, ym, n, false}, {"predicted", x, yp, n, true},
                        {"measured (naive split)", x, yn, n, false}};
    bool naive = false;
    for (int i = 0; i < n; i++) naive |= pt[i].naive > 0.0;
    snprintf(path, sizeof path, "%s.svg", prefix);
    char title[256];
    snprintf(title, sizeof title, "decode speed vs memory budget (in memory: sparse %.1f, dense %.1f tok/s)", sparse,
             dense);
    return plot_svg(path, title, "memory budget (MiB)", "tokens/s", s, naive ? 3 : 2) == 0;
}

/* bench --sweep: plan, predict and measure decode at each budget. */
static int bench_sweep(const char *cmd, const app_opts *o, const char *fracs, long n_gen, long reps, bool naive,
                       const char *prefix) {
    sweep_point pt[MAX_SWEEP];
    int n = 0;
    for (const char *c = fracs; *c && n < MAX_SWEEP;) {
        char *end;
        double f = strtod(c, &end);
        if (end == c || f < 0.0 || f > 1.0 || (*end && *end != ',')) {
            fprintf(stderr, "pinfer: %s: --sweep expects fractions in [0, 1] separated by commas, got '%s'\n", cmd, fracs);
            return 2;
        }
        pt[n++] = (sweep_point){.frac = f};
        c = *end ? end + 1 : end;
    }
    const int64_t n_ctx = n_gen + 1;
    pi_budget_info need;
    if (pi_budget_query(o->model, n_ctx, &need)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 1;
    }
    const uint64_t base = need.minimum;
    const double ffn = (double)need.ffn_bytes;
    printf("sweep: %s: minimum budget %.1f MiB, FFN %.1f MiB resident when all hot\n", o->model,
           (double)base / (1 << 20), ffn / (1 << 20));
    /* in memory, for reference: the sparse path and the dense one */
    double sparse = 0.0, dense = 0.0;
    for (int dense_run = 0; dense_run < 2; dense_run++) {
        app_opts oi = *o;
        oi.mp.mem_budget = 0;
        if (dense_run) oi.mp.ffn = PI_FFN_DENSE;
        oi.mp.n_ctx = n_ctx;
        app a;
        if (!app_load(cmd, &oi, &a)) return 1;
        bool ok = measure_tg(&a, n_gen, reps, dense_run ? &dense : &sparse);
        app_free(&a);
        if (!ok) {
            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
            return 1;
        }
    }
    printf("in memory: sparse %.2f tok/s, dense %.2f tok/s\n", sparse, dense);
    printf("%8s %11s %12s %12s %8s %12s\n", "FFN frac", "budget MiB", "predicted", "measured", "error", naive ? "naive" : "");
    for (int i = 0; i < n; i++) {
        const uint64_t budget = base + (uint64_t)(pt[i].frac * ffn);
        pt[i].budget_mib = (double)budget / (1 << 20);
        for (int k = 0; k < (naive ? 2 : 1); k++) {
            app_opts oi = *o;
            oi.mp.n_ctx = n_ctx;
            oi.mp.mem_budget = budget;
            oi.mp.plan_path = NULL;
            oi.mp.no_plan = k;
            app a;
            if (!app_load(cmd, &oi, &a)) return 1;
            if (!k && !a.info.planned) {
                fprintf(stderr, "pinfer: %s: no plan for %.1f MiB\n", cmd, pt[i].budget_mib);
                app_free(&a);
                return 1;
            }
            if (!k) pt[i].predicted = a.info.plan_tok_s;
            bool ok = measure_tg(&a, n_gen, reps, k ? &pt[i].naive : &pt[i].measured);
            app_free(&a);
            if (!ok) {
                fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
                return 1;
            }
        }
        printf("%8.2f %11.1f %12.2f %12.2f %+7.0f%%", pt[i].frac, pt[i].budget_mib, pt[i].predicted, pt[i].measured,
               100.0 * (pt[i].predicted / pt[i].measured - 1.0));
        if (naive) printf(" %12.2f (planned/naive %.2f)", pt[i].naive, pt[i].measured / pt[i].naive);
        printf("\n");
        fflush(stdout);
    }
    if (prefix) {
        if (!write_sweep(prefix, o->model, pt, n, sparse, dense)) {
            fprintf(stderr, "pinfer: %s: cannot write %s.{csv,json,svg}\n", cmd, prefix);
            return 1;
        }
        printf("wrote %s.json, %s.csv, %s.svg\n", prefix, prefix, prefix);
    }
    return 0;
}

typedef struct {
    const char *peer, *sweep, *sweep_out;
    bool naive;
    long n_prompt, n_gen, reps, rounds;
} bench_args;

/* bench's own options; -p and -n are token counts here, as in llama-bench */
static int bench_option(void *ctx, const char *cmd, int argc, char **argv, int *i) {
    bench_args *b = ctx;
    const char *a = argv[*i], *v;
    if (!strcmp(a, "--naive")) return b->naive = true, 1;
    static const char *const with_value[] = {"--sweep", "--sweep-out", "-p", "-n", "-r", "--peer", "--rounds"};
    bool mine = false;
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++) mine |= !strcmp(a, with_value[k]);
    if (!mine) return 0;
    if (!(v = arg_value(cmd, argc, argv, i))) return -1;
    if (!strcmp(a, "--sweep")) b->sweep = v;
    else if (!strcmp(a, "--sweep-out")) b->sweep_out = v;
    else if (!strcmp(a, "--peer")) b->peer = v;
    else if (!strcmp(a, "--rounds")) return arg_int(cmd, a, v, 1, MAX_REPS, &b->rounds) ? 1 : -1;
    else if (!strcmp(a, "-p")) return arg_int(cmd, a, v, 0, 1 << 20, &b->n_prompt) ? 1 : -1;
    else if (!strcmp(a, "-n")) return arg_int(cmd, a, v, 0, 1 << 20, &b->n_gen) ? 1 : -1;
    else return arg_int(cmd, a, v, 1, MAX_REPS, &b->reps) ? 1 : -1;
    return 1;
}

int cmd_bench(int argc, char **argv) {
    const char *cmd = "bench";
    app_opts o;
    app_opts_init(&o);
    bench_args ba = {NULL, NULL, NULL, false, 512, 128, 5, 1};
    int pr = app_parse_args(cmd, argc, argv, &o, NULL, bench_option, &ba, usage);
    if (pr <= 0) return pr ? 2 : 0;
    const char *peer = ba.peer, *sweep = ba.sweep, *sweep_out = ba.sweep_out;
    const bool naive = ba.naive;
    const long n_prompt = ba.n_prompt, n_gen = ba.n_gen, reps = ba.reps, rounds = ba.rounds;
    if (sweep) {
        if (!o.model || n_gen <= 0) {
            fprintf(stderr, "pinfer: %s: --sweep needs -m FILE (a bundle file) and -n N > 0\n", cmd);
            return 2;
        }
        return bench_sweep(cmd, &o, sweep, n_gen, reps, naive, sweep_out);
    }
    o.mp.n_ctx = (n_prompt > n_gen ? n_prompt : n_gen) + 1;
    app a;
    int32_t *toks = NULL;
    int rc = 1;
    /* memory bandwidth first, before the model takes its memory: under
       --mem-budget the probe's buffer stays within the budget */
    double bw;
    size_t probe = (size_t)1 << 30;
    if (o.mp.mem_budget && o.mp.mem_budget / 2 < probe) probe = (size_t)(o.mp.mem_budget / 2);
    if (pi_probe_memory_bandwidth(o.mp.n_threads, probe, &bw)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 1;
    }
    if (!app_load(cmd, &o, &a)) goto out;
    const int64_t V = a.info.n_vocab;
    const int T = pi_session_n_threads(a.s);
    toks = malloc((size_t)(n_prompt + 1) * sizeof *toks);
    if (!toks) goto out;
    for (long i = 0; i < n_prompt; i++) toks[i] = (int32_t)((i * 7919 + 13) % V);

    double bytes = (double)a.info.bytes_per_token;
    double bound = bw * 1e9 / bytes;
    printf("model: %s (%.2f GB of weights; %.1f MB read per decode token)\n", o.model, (double)a.info.weight_bytes * 1e-9,
           bytes * 1e-6);
    printf("memory read bandwidth, %d thread%s: %.1f GB/s -> decode bound %.1f tok/s\n", T, T > 1 ? "s" : "", bw, bound);
    printf("%-8s %7s %12s %12s\n", "test", "threads", "tok/s", "of bound");

    double pp[MAX_REPS], tg[MAX_REPS], ppp[MAX_REPS], ptg[MAX_REPS], rpp[MAX_REPS], rtg[MAX_REPS];
    for (long k = 0; k < rounds; k++) {
        pp[k] = tg[k] = ppp[k] = ptg[k] = 0.0;
        if ((n_prompt > 0 && !measure_pp(&a, toks, n_prompt, reps, &pp[k])) ||
            (n_gen > 0 && !(pi_session_reset_stats(a.s), measure_tg(&a, n_gen, reps, &tg[k])))) {
            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
            goto out;
        }
        if (peer && !run_peer(peer, o.model, n_prompt, n_gen, T, reps, &ppp[k], &ptg[k])) goto out;
        rpp[k] = ppp[k] > 0 ? pp[k] / ppp[k] : 0.0;
        rtg[k] = ptg[k] > 0 ? tg[k] / ptg[k] : 0.0;
        if (rounds > 1)
            fprintf(stderr, "bench: round %ld: pp %.2f tg %.2f%s", k + 1, pp[k], tg[k], peer ? "" : "\n");
        if (rounds > 1 && peer) fprintf(stderr, " | peer pp %.2f tg %.2f\n", ppp[k], ptg[k]);
    }
    const char *med = rounds > 1 ? " (median of rounds)" : "";
    if (n_prompt > 0) printf("pp%-6ld %7d %12.2f %12s%s\n", n_prompt, T, app_median(pp, (int)rounds), "", med);
    if (n_gen > 0) {
        double m = app_median(tg, (int)rounds);
        printf("tg%-6ld %7d %12.2f %11.0f%%%s\n", n_gen, T, m, 100.0 * m / bound, med);
    }
    if (n_gen > 0) app_print_offload(&a, stdout); /* the last round's decoding, with --mem-budget */
    if (n_gen > 0 && pi_session_ffn(a.s) != PI_FFN_DENSE && !a.info.offloaded) {
        /* a separate, untimed pass: the recall check computes every gate */
        pi_session_reset_stats(a.s);
        const bool check = pi_session_set_recall_check(a.s, true) == PI_OK;
        double once;
        if (!measure_tg(&a, n_gen, 1, &once)) goto out;
        print_sparse_stats(&a, check, bw, app_median(tg, (int)rounds));
        if (check) pi_session_set_recall_check(a.s, false);
    }
    if (peer) {
        printf("peer (%s):\n", peer);
        if (n_prompt > 0)
            printf("pp%-6ld %7d %12.2f   pinfer/peer = %.2f\n", n_prompt, T, app_median(ppp, (int)rounds),
                   app_median(rpp, (int)rounds));
        if (n_gen > 0) {
            double m = app_median(ptg, (int)rounds);
            printf("tg%-6ld %7d %12.2f %11.0f%%   pinfer/peer = %.2f\n", n_gen, T, m, 100.0 * m / bound,
                   app_median(rtg, (int)rounds));
        }
    }
    rc = 0;
out:
    free(toks);
    app_free(&a);
    return rc;
}
