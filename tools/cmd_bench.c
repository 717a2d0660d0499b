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

#include "base/timer.h"
#include "sparse/ffn_offload.h"
#include "plan/hwprobe.h"
#include "api/engine.h"
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
        pi_state_reset(a->s);
        double t0 = pi_time_s();
        if (pi_state_decode(a->s, toks, n)) return false;
        if (r >= 0) v[r] = (double)n / (pi_time_s() - t0);
    }
    *out = pi_median(v, (int)reps);
    return true;
}

/* Median tok/s of `reps` runs generating n tokens one at a time. */
static bool measure_tg(app *a, long n, long reps, double *out) {
    const int64_t V = a->m->hp.n_vocab;
    double v[MAX_REPS];
    for (long r = -1; r < reps; r++) {
        pi_state_reset(a->s);
        int32_t tok = 1 % (int32_t)V;
        double t0 = pi_time_s();
        for (long i = 0; i < n; i++) {
            if (pi_state_decode(a->s, &tok, 1)) return false;
            tok = (int32_t)((tok * 31 + 7) % V);
        }
        if (r >= 0) v[r] = (double)n / (pi_time_s() - t0);
    }
    *out = pi_median(v, (int)reps);
    return true;
}

/* Weight bytes of the dense FFNs (gate, up, down) of all layers. */
static double ffn_dense_bytes(const pi_lm *m) {
    double b = 0.0;
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        const pi_layer *l = &m->layers[il];
        const pi_weight *down = l->ffn_down.data ? &l->ffn_down : &l->ffn_down_t;
        b += (double)(pi_weight_nbytes(&l->ffn_gate) + pi_weight_nbytes(&l->ffn_up) + pi_weight_nbytes(down));
    }
    return b;
}

/* The sparse FFN's counters since they were cleared: per layer, per token.
   Recall is measured against the exact active set (pi_state_set_sparse_check). */
static void print_sparse_stats(const app *a, double bw, double tg) {
    const pi_lm *m = a->m;
    const double F = (double)m->hp.n_ff;
    double touched = 0.0, sum_pred = 0.0, sum_act = 0.0, sum_truth = 0.0, sum_missed = 0.0;
    const pi_sparse_ffn *sf = pi_sparse_ffn_of(a->s);
    bool check = sf->check;
    printf("sparse FFN per token (%s), neurons of %lld per layer (fraction):\n", app_ffn_mode(a), (long long)m->hp.n_ff);
    printf("%-6s %16s %16s %16s %8s %11s\n", "layer", "predicted", "computed", "active", "recall", "MB touched");
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        const pi_sparse_stats *st = &sf->stats[il];
        double t = st->tokens ? (double)st->tokens : 1.0;
        char rec[16] = "-";
        if (check && st->oracle_active)
            snprintf(rec, sizeof rec, "%.4f", 1.0 - (double)st->missed / (double)st->oracle_active);
        printf("%-6lld %8.0f (%.3f) %8.0f (%.3f) %8.0f (%.3f) %8s %11.2f\n", (long long)il, (double)st->predicted / t,
               (double)st->predicted / t / F, (double)st->computed / t, (double)st->computed / t / F,
               (double)st->active / t, (double)st->active / t / F, rec, (double)st->bytes / t * 1e-6);
        touched += (double)st->bytes / t;
        sum_pred += (double)st->predicted / t;
        sum_act += (double)st->active / t;
        sum_truth += (double)st->oracle_active;
        sum_missed += (double)st->missed;
    }
    printf("all layers: %.3f of FFN neurons computed, %.3f active", sum_pred / (F * (double)m->hp.n_layer),
           sum_act / (F * (double)m->hp.n_layer));
    if (check && sum_truth > 0) printf(", predictor recall %.4f vs the oracle", 1.0 - sum_missed / sum_truth);
    printf("\n");
    double all = (double)pi_lm_bytes_per_token(m) - ffn_dense_bytes(m) + touched;
    double bound = bw * 1e9 / all;
    printf("weights touched per token: %.1f MB (FFN %.1f of %.1f MB dense) -> bound %.1f tok/s; tg reaches %.0f%%\n",
           all * 1e-6, touched * 1e-6, ffn_dense_bytes(m) * 1e-6, bound, 100.0 * tg / bound);
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
    pi_mprofile *mp;
    if (pi_engine_profile(o->model, n_ctx, &mp)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 1;
    }
    const uint64_t base = mp->fixed + mp->session + mp->io + mp->min_cold;
    const double ffn = (double)mp->bundle_mem * (double)(mp->n_layer * mp->n_ff);
    pi_mprofile_free(mp);
    printf("sweep: %s: minimum budget %.1f MiB, FFN %.1f MiB resident when all hot\n", o->model,
           (double)base / (1 << 20), ffn / (1 << 20));
    /* in memory, for reference: the sparse path and the dense one */
    double sparse = 0.0, dense = 0.0;
    for (int dense_run = 0; dense_run < 2; dense_run++) {
        app_opts oi = *o;
        oi.mem_budget = 0;
        oi.dense = dense_run;
        oi.n_ctx = n_ctx;
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
        pi_plan plan;
        pi_plan_limits lim = {base + (uint64_t)(pt[i].frac * ffn), (int)o->threads, 0.0};
        pt[i].budget_mib = (double)lim.mem_budget / (1 << 20);
        if (app_plan(cmd, o->model, NULL, n_ctx, &lim, false, &plan) == 2) return 1;
        pt[i].predicted = plan.cost.tok_s;
        for (int k = 0; k < (naive ? 2 : 1); k++) {
            app_opts oi = *o;
            oi.n_ctx = n_ctx;
            oi.mem_budget = lim.mem_budget;
            oi.plan_in = k ? NULL : &plan;
            oi.no_plan = k;
            app a;
            if (!app_load(cmd, &oi, &a)) return 1;
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

int cmd_bench(int argc, char **argv) {
    const char *cmd = "bench", *peer = NULL, *sweep = NULL, *sweep_out = NULL;
    bool naive = false;
    long n_prompt = 512, n_gen = 128, reps = 5, rounds = 1;
    app_opts o;
    app_opts_init(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--naive")) {
            naive = true;
            continue;
        }
        if (!strcmp(a, "--sweep") || !strcmp(a, "--sweep-out")) {
            if (!(v = arg_value(cmd, argc, argv, &i))) return 2;
            if (!strcmp(a, "--sweep")) sweep = v;
            else sweep_out = v;
            continue;
        }
        if (!strcmp(a, "-p") || !strcmp(a, "-n") || !strcmp(a, "-r") || !strcmp(a, "--peer") ||
            !strcmp(a, "--rounds")) {
            if (!(v = arg_value(cmd, argc, argv, &i))) return 2;
            if (!strcmp(a, "--rounds") && !arg_int(cmd, a, v, 1, MAX_REPS, &rounds)) return 2;
            if (!strcmp(a, "-p") && !arg_int(cmd, a, v, 0, 1 << 20, &n_prompt)) return 2;
            if (!strcmp(a, "-n") && !arg_int(cmd, a, v, 0, 1 << 20, &n_gen)) return 2;
            if (!strcmp(a, "-r") && !arg_int(cmd, a, v, 1, MAX_REPS, &reps)) return 2;
            if (!strcmp(a, "--peer")) peer = v;
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
    if (sweep) {
        if (!o.model || n_gen <= 0) {
            fprintf(stderr, "pinfer: %s: --sweep needs -m FILE (a bundle file) and -n N > 0\n", cmd);
            return 2;
        }
        return bench_sweep(cmd, &o, sweep, n_gen, reps, naive, sweep_out);
    }
    o.n_ctx = (n_prompt > n_gen ? n_prompt : n_gen) + 1;
    app a;
    int32_t *toks = NULL;
    int rc = 1;
    /* memory bandwidth first, before the model takes its memory: under
       --mem-budget the probe's buffer stays within the budget */
    double bw;
    size_t probe = (size_t)1 << 30;
    if (o.mem_budget && o.mem_budget / 2 < probe) probe = (size_t)(o.mem_budget / 2);
    pi_pool *probe_pool;
    if (pi_pool_create((int)o.threads, &probe_pool) || pi_probe_read_bw(probe_pool, probe, 3, &bw)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 1;
    }
    pi_pool_free(probe_pool);
    if (!app_load(cmd, &o, &a)) goto out;
    const int64_t V = a.m->hp.n_vocab;
    const int T = pi_pool_size(a.s->pool);
    toks = malloc((size_t)(n_prompt + 1) * sizeof *toks);
    if (!toks) goto out;
    for (long i = 0; i < n_prompt; i++) toks[i] = (int32_t)((i * 7919 + 13) % V);

    double bytes = (double)pi_lm_bytes_per_token(a.m);
    double bound = bw * 1e9 / bytes;
    printf("model: %s (%.2f GB of weights; %.1f MB read per decode token)\n", o.model, (double)a.m->weight_bytes * 1e-9,
           bytes * 1e-6);
    printf("memory read bandwidth, %d thread%s: %.1f GB/s -> decode bound %.1f tok/s\n", T, T > 1 ? "s" : "", bw, bound);
    printf("%-8s %7s %12s %12s\n", "test", "threads", "tok/s", "of bound");

    double pp[MAX_REPS], tg[MAX_REPS], ppp[MAX_REPS], ptg[MAX_REPS], rpp[MAX_REPS], rtg[MAX_REPS];
    for (long k = 0; k < rounds; k++) {
        pp[k] = tg[k] = ppp[k] = ptg[k] = 0.0;
        if ((n_prompt > 0 && !measure_pp(&a, toks, n_prompt, reps, &pp[k])) ||
            (n_gen > 0 && !(app_reset_offload_stats(&a), measure_tg(&a, n_gen, reps, &tg[k])))) {
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
    if (n_prompt > 0) printf("pp%-6ld %7d %12.2f %12s%s\n", n_prompt, T, pi_median(pp, (int)rounds), "", med);
    if (n_gen > 0) {
        double m = pi_median(tg, (int)rounds);
        printf("tg%-6ld %7d %12.2f %11.0f%%%s\n", n_gen, T, m, 100.0 * m / bound, med);
    }
    if (n_gen > 0) app_print_offload(&a, stdout); /* the last round's decoding, with --mem-budget */
    if (n_gen > 0 && a.mode != PI_FFN_DENSE && !a.off) {
        /* a separate, untimed pass: the recall check computes every gate */
        pi_sparse_ffn *sf = pi_sparse_ffn_of(a.s);
        memset(sf->stats, 0, (size_t)a.m->hp.n_layer * sizeof *sf->stats);
        sf->check = a.mode == PI_FFN_SPARSE;
        double once;
        if (!measure_tg(&a, n_gen, 1, &once)) goto out;
        print_sparse_stats(&a, bw, pi_median(tg, (int)rounds));
        sf->check = false;
    }
    if (peer) {
        printf("peer (%s):\n", peer);
        if (n_prompt > 0)
            printf("pp%-6ld %7d %12.2f   pinfer/peer = %.2f\n", n_prompt, T, pi_median(ppp, (int)rounds),
                   pi_median(rpp, (int)rounds));
        if (n_gen > 0) {
            double m = pi_median(ptg, (int)rounds);
            printf("tg%-6ld %7d %12.2f %11.0f%%   pinfer/peer = %.2f\n", n_gen, T, m, 100.0 * m / bound,
                   pi_median(rtg, (int)rounds));
        }
    }
    rc = 0;
out:
    free(toks);
    app_free(&a);
    return rc;
}
