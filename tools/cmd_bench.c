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
#include "plan/hwprobe.h"

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
               "                       median of the per-round ratios (robust to a noisy machine)\n");
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
        pi_session_reset(a->s);
        double t0 = pi_time_s();
        if (pi_session_decode(a->s, toks, n)) return false;
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
        pi_session_reset(a->s);
        int32_t tok = 1 % (int32_t)V;
        double t0 = pi_time_s();
        for (long i = 0; i < n; i++) {
            if (pi_session_decode(a->s, &tok, 1)) return false;
            tok = (int32_t)((tok * 31 + 7) % V);
        }
        if (r >= 0) v[r] = (double)n / (pi_time_s() - t0);
    }
    *out = pi_median(v, (int)reps);
    return true;
}

/* Weight bytes of the dense FFNs (gate, up, down) of all layers. */
static double ffn_dense_bytes(const pi_model *m) {
    double b = 0.0;
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        const pi_layer *l = &m->layers[il];
        const pi_weight *down = l->ffn_down.data ? &l->ffn_down : &l->ffn_down_t;
        b += (double)(pi_weight_nbytes(&l->ffn_gate) + pi_weight_nbytes(&l->ffn_up) + pi_weight_nbytes(down));
    }
    return b;
}

/* The sparse FFN's counters since they were cleared: per layer, per token.
   Recall is measured against the exact active set (pi_session_set_sparse_check). */
static void print_sparse_stats(const app *a, double bw, double tg) {
    const pi_model *m = a->m;
    const double F = (double)m->hp.n_ff;
    double touched = 0.0, sum_pred = 0.0, sum_act = 0.0, sum_truth = 0.0, sum_missed = 0.0;
    bool check = a->s->sp_check;
    printf("sparse FFN per token (%s), neurons of %lld per layer (fraction):\n", app_ffn_mode(a), (long long)m->hp.n_ff);
    printf("%-6s %16s %16s %16s %8s %11s\n", "layer", "predicted", "computed", "active", "recall", "MB touched");
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        const pi_sparse_stats *st = &a->s->sp_stats[il];
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
    double all = (double)pi_model_bytes_per_token(m) - ffn_dense_bytes(m) + touched;
    double bound = bw * 1e9 / all;
    printf("weights touched per token: %.1f MB (FFN %.1f of %.1f MB dense) -> bound %.1f tok/s; tg reaches %.0f%%\n",
           all * 1e-6, touched * 1e-6, ffn_dense_bytes(m) * 1e-6, bound, 100.0 * tg / bound);
}

int cmd_bench(int argc, char **argv) {
    const char *cmd = "bench", *peer = NULL;
    long n_prompt = 512, n_gen = 128, reps = 5, rounds = 1;
    app_opts o;
    app_opts_init(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
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

    double bytes = (double)pi_model_bytes_per_token(a.m);
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
    if (n_gen > 0 && a.s->ffn_mode != PI_FFN_DENSE && !a.off) {
        /* a separate, untimed pass: the recall check computes every gate */
        memset(a.s->sp_stats, 0, (size_t)a.m->hp.n_layer * sizeof *a.s->sp_stats);
        pi_session_set_sparse_check(a.s, a.s->ffn_mode == PI_FFN_SPARSE);
        double once;
        if (!measure_tg(&a, n_gen, 1, &once)) goto out;
        print_sparse_stats(&a, bw, pi_median(tg, (int)rounds));
        pi_session_set_sparse_check(a.s, false);
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
