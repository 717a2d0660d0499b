/*
 * cmd_bench.c — `pinfer bench`: prompt-processing and decode speed of a
 * model, next to the memory-bandwidth bound of decode measured in the same
 * run, and optionally a peer's benchmark (llama-bench) on the same file in
 * the same run, with the ratio.
 *
 * Like llama-bench: ppN evaluates N tokens as one prompt from an empty
 * context; tgN generates N tokens one at a time from an empty context; each
 * figure is the median of -r repetitions after one warm-up.
 *
 * -o json|jsonl|csv|md writes the same figures as records, one per test (pp
 * and tg), with llama-bench's field names where a field exists and pinfer's
 * own after them (FFN mode, the sparse FFN's counters, the offload figures
 * under --mem-budget, the bandwidth bound). Then stdout carries only that
 * document and the human report goes to stderr; every figure in the
 * document comes from the measurement the report shows.
 */
#include "args.h"
#include "cmds.h"
#include "common.h"

#include "plot.h"
#include "report.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

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
               "  --vs-dense           a sparse model in memory: each round also decodes the same tokens with\n"
               "                       the dense FFN (a second session on the same weights), alternated with\n"
               "                       the sparse runs; reports the median of the per-round sparse/dense ratios,\n"
               "                       and of the ratios with the two sessions in step (one token of each in turn)\n"
               "  --greedy             the tg test decodes the model's own greedy continuation of token 1\n"
               "                       instead of llama-bench's fixed pseudo-random tokens: consecutive tokens\n"
               "                       of text reuse neurons, which a neuron cache under --mem-budget sees\n"
               "  --mem-budget SIZE    decode with the FFN on flash under this budget (a bundle file)\n"
               "  --sweep F,F,...      decode speed across budgets (a bundle file): for each F, a budget of the\n"
               "                       model's minimum plus F times its FFN bytes (1 = all resident), planned,\n"
               "                       predicted and measured; plus the in-memory sparse and dense speeds\n"
               "  --naive              with --sweep: also measure the naive split (uniform hot prefix, default\n"
               "                       cache) at each budget\n"
               "  --sweep-out PREFIX   write PREFIX.json, PREFIX.csv and PREFIX.svg (speed versus memory)\n"
               "  -o FMT               text (default), or json, jsonl, csv, md: one record per test with\n"
               "                       llama-bench's field names on stdout, the report on stderr\n");
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

/* One timed repetition: its tok/s into v[r], and into ts[r] and ns[r] (the
   samples of the machine-readable report) when they are given. */
static void sample(long r, long n, double dt, double *v, double *ts, double *ns) {
    if (r < 0) return; /* the warm-up */
    v[r] = (double)n / dt;
    if (ts) ts[r] = v[r];
    if (ns) ns[r] = nearbyint(dt * 1e9);
}

/* Median tok/s of `reps` prompt evaluations of n tokens from an empty context;
   each repetition's tok/s and ns into ts and ns (may be NULL). */
static bool measure_pp(app *a, const int32_t *toks, long n, long reps, double *out, double *ts, double *ns) {
    double v[MAX_REPS];
    for (long r = -1; r < reps; r++) { /* r = -1: warm-up */
        pi_session_kv_clear(a->s);
        double t0 = app_time_s();
        if (pi_session_eval(a->s, toks, (size_t)n)) return false;
        sample(r, n, app_time_s() - t0, v, ts, ns);
    }
    *out = app_median(v, (int)reps);
    return true;
}

/* Each timed repetition's flash reads: how many, and for how long one was
   in flight. */
typedef struct {
    double reads[MAX_REPS], bytes[MAX_REPS], busy_s[MAX_REPS];
    double wait_s[MAX_REPS];                        /* decoding blocked on them */
    bool disk_ok[MAX_REPS];                         /* the block device's counters (pi_model_disk_counts): */
    double disk_reads[MAX_REPS], disk_bytes[MAX_REPS], disk_read_s[MAX_REPS], disk_busy_s[MAX_REPS];
    double head_bytes[MAX_REPS], head_s[MAX_REPS]; /* the output head read from flash */
    bool cpu_ok[MAX_REPS];                          /* the cores' time (cpu_times): */
    double cpu_busy_s[MAX_REPS], cpu_steal_s[MAX_REPS], cpu_idle_s[MAX_REPS]; /* every core's, summed */
    double self_user_s[MAX_REPS], self_sys_s[MAX_REPS]; /* of cpu_busy_s, this process's */
} rep_reads;

/* The cores' time so far: every core's, from the first line of /proc/stat
   (busy: user, nice, system, irq and softirq; steal: taken by the host of a
   virtual machine; idle: idle and iowait), and this process's user and
   system time. false where /proc/stat cannot be read. */
typedef struct {
    double busy, steal, idle, self_user, self_sys;
} cpu_times;

static bool cpu_times_now(cpu_times *c) {
    memset(c, 0, sizeof *c);
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[8] = {0};
    const int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
                             &v[5], &v[6], &v[7])
                    : 0;
    if (f) fclose(f);
    const long hz = sysconf(_SC_CLK_TCK);
    struct rusage ru;
    if (n < 8 || hz <= 0 || getrusage(RUSAGE_SELF, &ru)) return false;
    c->busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6]) / (double)hz;
    c->idle = (double)(v[3] + v[4]) / (double)hz;
    c->steal = (double)v[7] / (double)hz;
    c->self_user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
    c->self_sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    return true;
}

/* Median tok/s of `reps` runs generating n tokens one at a time. The
   session's counters start after the warm-up, so that the figures printed
   with the result (reads, hit rates, time per token) are those of the timed
   runs: the warm-up's first reads of a model can be far slower than later
   ones. io (may be NULL) gets each timed run's reads. */
/* The tg test's tokens, seq[0..n): llama-bench's kind, a fixed pseudo-random
   walk over the vocabulary (the first token 1), the same for every model. */
static int32_t *tg_fixed_tokens(int64_t V, long n) {
    int32_t *seq = malloc((size_t)(n > 0 ? n : 1) * sizeof *seq);
    if (!seq) return NULL;
    int32_t tok = 1 % (int32_t)V;
    for (long i = 0; i < n; i++) {
        seq[i] = tok;
        tok = (int32_t)((tok * 31 + 7) % V);
    }
    return seq;
}

/* --greedy: the model's own greedy continuation from token 1, chosen by the
   sampler at temperature 0 as `run --temp 0` chooses (no penalty), decoded
   once on a's session from an empty context. Consecutive tokens of real
   text share neurons (pinfer.stats.reuse), llama-bench's sequence shares
   none beyond what the context carries: a neuron cache sees the difference. */
static bool tg_greedy_tokens(app *a, long n, int32_t *seq) {
    pi_sampler_params sp = pi_sampler_default_params();
    sp.temp = 0.0f;
    sp.repeat_penalty = 1.0f;
    pi_sampler *smp;
    if (pi_sampler_create(&sp, a->info.n_vocab, &smp)) return false;
    pi_session_kv_clear(a->s);
    int32_t tok = 1 % (int32_t)a->info.n_vocab;
    bool ok = true;
    for (long i = 0; i < n && ok; i++) {
        seq[i] = tok;
        ok = !pi_session_decode(a->s, tok);
        if (ok) tok = pi_sampler_sample(smp, pi_session_logits(a->s));
    }
    pi_sampler_free(smp);
    return ok;
}

static bool measure_tg(app *a, const int32_t *seq, long n, long reps, double *out, double *ts, double *ns,
                       rep_reads *io) {
    double v[MAX_REPS];
    for (long r = -1; r < reps; r++) {
        if (r == 0) pi_session_reset_stats(a->s);
        pi_token_stats s0 = {0}, s1 = {0};
        pi_disk_counts d0 = {0}, d1 = {0};
        cpu_times c0, c1;
        bool disk = false, cpu = false;
        if (io && r >= 0) {
            pi_session_stats(a->s, &s0);
            disk = pi_model_disk_counts(a->m, &d0) == PI_OK;
        }
        pi_session_kv_clear(a->s);
        if (io && r >= 0) cpu = cpu_times_now(&c0);
        double t0 = app_time_s();
        for (long i = 0; i < n; i++)
            if (pi_session_decode(a->s, seq[i])) return false;
        sample(r, n, app_time_s() - t0, v, ts, ns);
        if (io && r >= 0) {
            io->cpu_ok[r] = cpu && cpu_times_now(&c1) && c1.busy >= c0.busy && c1.idle >= c0.idle;
            io->cpu_busy_s[r] = io->cpu_ok[r] ? c1.busy - c0.busy : 0.0;
            io->cpu_steal_s[r] = io->cpu_ok[r] ? c1.steal - c0.steal : 0.0;
            io->cpu_idle_s[r] = io->cpu_ok[r] ? c1.idle - c0.idle : 0.0;
            io->self_user_s[r] = io->cpu_ok[r] ? c1.self_user - c0.self_user : 0.0;
            io->self_sys_s[r] = io->cpu_ok[r] ? c1.self_sys - c0.self_sys : 0.0;
        }
        if (io && r >= 0 && !pi_session_stats(a->s, &s1)) {
            io->reads[r] = (double)(s1.reads - s0.reads);
            io->bytes[r] = (double)(s1.bytes_read - s0.bytes_read);
            io->busy_s[r] = s1.io_busy_s - s0.io_busy_s;
            io->wait_s[r] = s1.io_wait_s - s0.io_wait_s;
            io->disk_ok[r] = disk && pi_model_disk_counts(a->m, &d1) == PI_OK && d1.reads >= d0.reads &&
                             d1.bytes >= d0.bytes && d1.busy_s > d0.busy_s;
            io->disk_reads[r] = io->disk_ok[r] ? (double)(d1.reads - d0.reads) : 0.0;
            io->disk_bytes[r] = io->disk_ok[r] ? (double)(d1.bytes - d0.bytes) : 0.0;
            io->disk_read_s[r] = io->disk_ok[r] ? d1.read_s - d0.read_s : 0.0;
            io->disk_busy_s[r] = io->disk_ok[r] ? d1.busy_s - d0.busy_s : 0.0;
            io->head_bytes[r] = (double)(s1.head_bytes_read - s0.head_bytes_read);
            io->head_s[r] = s1.head_read_s - s0.head_read_s;
        }
    }
    *out = app_median(v, (int)reps);
    return true;
}

/* The same n tokens through two sessions (a->s and other) in step, one
   token of each in turn, the first of each pair alternating between them,
   timed token by token: tok/s of each over the whole pass, into *a_ts and
   *b_ts. A host whose speed drifts from second to second (another tenant's
   load, the memory's clock) slows both alike, so their ratio holds where
   two runs one after the other can differ by more than the difference
   being measured. */
static bool measure_tg_in_step(app *a, pi_session *other, const int32_t *seq, long n, double *a_ts, double *b_ts) {
    double ta = 0.0, tb = 0.0;
    pi_session_kv_clear(a->s);
    pi_session_kv_clear(other);
    for (long i = 0; i < n; i++) {
        for (int k = 0; k < 2; k++) {
            const bool first_a = (i & 1) == 0, run_a = (k == 0) == first_a;
            const double t0 = app_time_s();
            if (pi_session_decode(run_a ? a->s : other, seq[i])) return false;
            const double dt = app_time_s() - t0;
            if (run_a) ta += dt;
            else tb += dt;
        }
    }
    *a_ts = ta > 0.0 ? (double)n / ta : 0.0;
    *b_ts = tb > 0.0 ? (double)n / tb : 0.0;
    return true;
}

/* What print_sparse_stats shows, for the records: per token, per layer and
   over all layers. NaN where the text shows "-" (no recall check). */
typedef struct {
    bool valid;
    int64_t n_layer;
    double *computed, *active, *recall, *mb; /* (n_layer): per token; mb: MB touched */
    double computed_frac, active_frac, recall_all;
    double mb_all, mb_ffn, mb_ffn_dense;     /* weights touched per token; FFN part; dense FFN */
    double bound, of_bound;                  /* tok/s at that traffic; tg's share of it, % */
} sparse_figs;

static void sparse_figs_free(sparse_figs *sf) {
    free(sf->computed);
    memset(sf, 0, sizeof *sf);
}

/* The sparse FFN's counters since they were cleared: per layer, per token.
   Recall is measured against the exact active set (pi_session_set_recall_check).
   The figures also go to sf (its arrays malloc'd; sf->valid false when out
   of memory). */
static void print_sparse_stats(const app *a, bool check, double bw, double tg, FILE *out, sparse_figs *sf) {
    const pi_model_info *in = &a->info;
    const double F = (double)in->n_ff;
    const int64_t L = in->n_layer;
    double touched = 0.0, sum_pred = 0.0, sum_act = 0.0, sum_truth = 0.0, sum_missed = 0.0;
    memset(sf, 0, sizeof *sf);
    sf->n_layer = L;
    sf->computed = malloc(4 * (size_t)L * sizeof *sf->computed);
    if (sf->computed) {
        sf->active = sf->computed + L;
        sf->recall = sf->active + L;
        sf->mb = sf->recall + L;
    }
    fprintf(out, "sparse FFN per token (%s), neurons of %lld per layer (fraction):\n", app_ffn_mode(a),
            (long long)in->n_ff);
    fprintf(out, "%-6s %16s %16s %16s %8s %11s\n", "layer", "predicted", "computed", "active", "recall", "MB touched");
    for (int64_t il = 0; il < L; il++) {
        pi_layer_stats st;
        if (pi_session_layer_stats(a->s, il, &st)) {
            sparse_figs_free(sf);
            return;
        }
        double t = st.tokens ? (double)st.tokens : 1.0;
        char rec[16] = "-";
        double r = NAN;
        if (check && st.oracle_active) {
            r = 1.0 - (double)st.missed / (double)st.oracle_active;
            snprintf(rec, sizeof rec, "%.4f", r);
        }
        fprintf(out, "%-6lld %8.0f (%.3f) %8.0f (%.3f) %8.0f (%.3f) %8s %11.2f\n", (long long)il,
                (double)st.computed / t, (double)st.computed / t / F, (double)st.computed / t,
                (double)st.computed / t / F, (double)st.active / t, (double)st.active / t / F, rec,
                (double)st.weight_bytes / t * 1e-6);
        if (sf->computed) {
            sf->computed[il] = (double)st.computed / t;
            sf->active[il] = (double)st.active / t;
            sf->recall[il] = r;
            sf->mb[il] = (double)st.weight_bytes / t * 1e-6;
        }
        touched += (double)st.weight_bytes / t;
        sum_pred += (double)st.computed / t;
        sum_act += (double)st.active / t;
        sum_truth += (double)st.oracle_active;
        sum_missed += (double)st.missed;
    }
    sf->computed_frac = sum_pred / (F * (double)L);
    sf->active_frac = sum_act / (F * (double)L);
    sf->recall_all = NAN;
    fprintf(out, "all layers: %.3f of FFN neurons computed, %.3f active", sf->computed_frac, sf->active_frac);
    if (check && sum_truth > 0) {
        sf->recall_all = 1.0 - sum_missed / sum_truth;
        fprintf(out, ", predictor recall %.4f vs the oracle", sf->recall_all);
    }
    fprintf(out, "\n");
    const double ffn = (double)in->ffn_bytes, all = (double)in->bytes_per_token - ffn + touched;
    double bound = bw * 1e9 / all;
    sf->mb_all = all * 1e-6;
    sf->mb_ffn = touched * 1e-6;
    sf->mb_ffn_dense = ffn * 1e-6;
    sf->bound = bound;
    sf->of_bound = 100.0 * tg / bound;
    fprintf(out, "weights touched per token: %.1f MB (FFN %.1f of %.1f MB dense) -> bound %.1f tok/s; tg reaches "
                 "%.0f%%\n", sf->mb_all, sf->mb_ffn, sf->mb_ffn_dense, bound, sf->of_bound);
    sf->valid = sf->computed != NULL;
}

#define MAX_SWEEP 16

typedef struct {
    double frac, budget_mib, predicted, measured, naive, rss_mib;
} sweep_point;

#ifdef PI_HAVE_CJSON
/* The sweep as JSON: the model, the in-memory speeds and one object per point. */
static bool write_sweep_json(const char *path, const char *model, const sweep_point *pt, int n, double sparse,
                             double dense) {
    cJSON *root = cJSON_CreateObject(), *points = cJSON_CreateArray();
    bool ok = root && points && cJSON_AddItemToObject(root, "model", report_json_string(model, strlen(model))) &&
              cJSON_AddNumberToObject(root, "in_memory_sparse_tok_s", sparse) &&
              cJSON_AddNumberToObject(root, "dense_tok_s", dense) && cJSON_AddItemToObject(root, "points", points);
    if (!ok) cJSON_Delete(points);
    for (int i = 0; ok && i < n; i++) {
        cJSON *p = cJSON_CreateObject();
        ok = p && cJSON_AddNumberToObject(p, "ffn_fraction", pt[i].frac) &&
             cJSON_AddNumberToObject(p, "budget_mib", pt[i].budget_mib) &&
             cJSON_AddNumberToObject(p, "predicted_tok_s", pt[i].predicted) &&
             cJSON_AddNumberToObject(p, "measured_tok_s", pt[i].measured) &&
             cJSON_AddNumberToObject(p, "naive_tok_s", pt[i].naive) && cJSON_AddItemToArray(points, p);
        if (!ok) cJSON_Delete(p);
    }
    FILE *f = ok ? fopen(path, "w") : NULL;
    if (f) {
        ok = report_json_print(root, false, f);
        ok &= fclose(f) == 0;
    } else {
        ok = false;
    }
    cJSON_Delete(root);
    return ok;
}
#endif

/* PREFIX.csv, PREFIX.json (with cJSON; *json says whether) and PREFIX.svg. */
static bool write_sweep(const char *prefix, const char *model, const sweep_point *pt, int n, double sparse,
                        double dense, bool *json) {
    char path[1024];
    snprintf(path, sizeof path, "%s.csv", prefix);
    FILE *f = fopen(path, "w");
    if (!f) return false;
    fprintf(f, "ffn_fraction,budget_mib,predicted_tok_s,measured_tok_s,naive_tok_s\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "%.3f,%.1f,%.3f,%.3f,%.3f\n", pt[i].frac, pt[i].budget_mib, pt[i].predicted, pt[i].measured,
                pt[i].naive);
    if (fclose(f)) return false;
    *json = false;
#ifdef PI_HAVE_CJSON
    snprintf(path, sizeof path, "%s.json", prefix);
    if (!write_sweep_json(path, model, pt, n, sparse, dense)) return false;
    *json = true;
#else
    (void)model;
#endif
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
        int32_t *seq = tg_fixed_tokens(a.info.n_vocab, n_gen);
        bool ok = seq && measure_tg(&a, seq, n_gen, reps, dense_run ? &dense : &sparse, NULL, NULL, NULL);
        free(seq);
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
            int32_t *seq = tg_fixed_tokens(a.info.n_vocab, n_gen);
            bool ok = seq && measure_tg(&a, seq, n_gen, reps, k ? &pt[i].naive : &pt[i].measured, NULL, NULL, NULL);
            free(seq);
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
        bool json;
        if (!write_sweep(prefix, o->model, pt, n, sparse, dense, &json)) {
            fprintf(stderr, "pinfer: %s: cannot write %s.{csv,json,svg}\n", cmd, prefix);
            return 1;
        }
        if (json)
            printf("wrote %s.json, %s.csv, %s.svg\n", prefix, prefix, prefix);
        else
            printf("wrote %s.csv, %s.svg (no %s.json: pinfer was built without cJSON)\n", prefix, prefix, prefix);
    }
    return 0;
}

typedef struct {
    const char *peer, *sweep, *sweep_out;
    bool naive, vs_dense, greedy;
    long n_prompt, n_gen, reps, rounds;
    report_fmt fmt;
} bench_args;

/* bench's own options; -p and -n are token counts here, as in llama-bench */
static int bench_option(void *ctx, const char *cmd, int argc, char **argv, int *i) {
    bench_args *b = ctx;
    const char *a = argv[*i], *v;
    if (!strcmp(a, "--naive")) return b->naive = true, 1;
    if (!strcmp(a, "--vs-dense")) return b->vs_dense = true, 1;
    if (!strcmp(a, "--greedy")) return b->greedy = true, 1;
    /* (--output and --output=FMT reach here as -o FMT: args.c) */
    static const char *const with_value[] = {"--sweep", "--sweep-out", "-p", "-n", "-r", "--peer", "--rounds", "-o"};
    bool mine = false;
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++) mine |= !strcmp(a, with_value[k]);
    if (!mine) return 0;
    if (!(v = arg_value(cmd, argc, argv, i))) return -1;
    if (!strcmp(a, "--sweep")) b->sweep = v;
    else if (!strcmp(a, "--sweep-out")) b->sweep_out = v;
    else if (!strcmp(a, "--peer")) b->peer = v;
    else if (!strcmp(a, "-o")) return report_fmt_parse(cmd, v, &b->fmt) ? 1 : -1;
    else if (!strcmp(a, "--rounds")) return arg_int(cmd, a, v, 1, MAX_REPS, &b->rounds) ? 1 : -1;
    else if (!strcmp(a, "-p")) return arg_int(cmd, a, v, 0, 1 << 20, &b->n_prompt) ? 1 : -1;
    else if (!strcmp(a, "-n")) return arg_int(cmd, a, v, 0, 1 << 20, &b->n_gen) ? 1 : -1;
    else return arg_int(cmd, a, v, 1, MAX_REPS, &b->reps) ? 1 : -1;
    return 1;
}

/* ---- the machine-readable records ---- */

/* One test (ppN or tgN) over every round: what the text shows and the
   samples it came from. */
typedef struct {
    long n_prompt, n_gen;  /* one of them is 0 */
    double median;         /* tok/s as the report shows it: the median (of the rounds' medians) */
    double peer, ratio;    /* with --peer: the peer's tok/s, median of pinfer/peer per round */
    double dense, dratio;  /* with --vs-dense: dense decode's tok/s, median of sparse/dense per round */
    double sratio;         /* with --vs-dense: median over rounds of sparse/dense decoded token by token in step */
    double *ts, *ns;       /* (n): every timed repetition of every round */
    int n;
    char time[32];         /* when the test started, RFC 3339 */
} bench_test;

/* What app_print_offload shows, with the same formulas, read at the same
   point of the run (the figures do not change in between). */
typedef struct {
    bool valid;
    pi_memory_report mem;
    pi_token_stats st;
    double neurons, resident, cached, read;      /* per token */
    double cache_hit_pct, hit_pct;               /* of the cold ones; of all selected */
    double reads, reads_merged, mb_read;         /* per token */
    double busy_ms, hidden_ms, hidden_pct, wait_ms, ffn_ms; /* per token */
    /* the floor: the reads at the disk's measured rate for this queue depth
       and read size, plus the time no read was in flight (compute that did
       not overlap I/O); 0 when the disk has not been measured */
    double token_ms, read_rate, io_floor_ms, no_io_ms, floor_ms, floor_ratio;
    /* the cores' floor: the CPU time the decoding took on every core (busy:
       this process's threads, and the interrupts, softirqs and other
       processes beside them, and what the host of a virtual machine took),
       per token, over the cores: the token's time were they never idle;
       cpu_valid false where /proc/stat is unreadable */
    bool cpu_valid;
    int n_cores;
    double cpu_ms, self_user_ms, self_sys_ms, other_ms, steal_ms, idle_ms; /* CPU ms per token */
    double cores_floor_ms, cores_ratio;
} offload_figs;

static void offload_figures(const app *a, offload_figs *f) {
    memset(f, 0, sizeof *f);
    if (!a->info.offloaded || pi_model_memory(a->m, &f->mem) || pi_session_stats(a->s, &f->st)) return;
    const pi_token_stats *st = &f->st;
    const double t = st->decode_tokens ? (double)st->decode_tokens : 1.0;
    const uint64_t cold = st->neurons_cached + st->neurons_read, sel = st->neurons_resident + cold;
    const double busy = st->io_busy_s, wait = st->io_wait_s;
    f->neurons = (double)sel / t;
    f->resident = (double)st->neurons_resident / t;
    f->cached = (double)st->neurons_cached / t;
    f->read = (double)st->neurons_read / t;
    f->cache_hit_pct = cold ? 100.0 * (double)st->neurons_cached / (double)cold : 100.0;
    f->hit_pct = sel ? 100.0 * (double)(sel - st->neurons_read) / (double)sel : 100.0;
    f->reads = (double)st->reads / t;
    f->reads_merged = (double)st->reads_merged / t;
    f->mb_read = (double)st->bytes_read / t * 1e-6;
    f->busy_ms = busy / t * 1e3;
    f->hidden_ms = (busy - wait) / t * 1e3;
    f->hidden_pct = busy > 0.0 ? 100.0 * (busy - wait) / busy : 0.0;
    f->wait_ms = wait / t * 1e3;
    f->ffn_ms = st->ffn_s / t * 1e3;
    f->token_ms = st->decode_s / t * 1e3;
    f->valid = true;
    if (st->reads && f->mem.queue_depth > 0 &&
        pi_model_read_rate(a->m, st->bytes_read / st->reads, f->mem.queue_depth, &f->read_rate) == PI_OK &&
        f->read_rate > 0.0) {
        f->io_floor_ms = f->reads / f->read_rate * 1e3;
        f->no_io_ms = f->token_ms > f->busy_ms ? f->token_ms - f->busy_ms : 0.0;
        f->floor_ms = f->io_floor_ms + f->no_io_ms;
        f->floor_ratio = f->floor_ms > 0.0 ? f->token_ms / f->floor_ms : 0.0;
    }
}

/* The cores' figures of the timed repetitions io holds (the last round's,
   over which f's counters ran). */
static void cores_figures(const rep_reads *io, long reps, offload_figs *f) {
    if (!f->valid || !f->st.decode_tokens) return;
    double busy = 0.0, steal = 0.0, idle = 0.0, user = 0.0, sys = 0.0;
    for (long r = 0; r < reps; r++) {
        if (!io->cpu_ok[r]) return;
        busy += io->cpu_busy_s[r], steal += io->cpu_steal_s[r], idle += io->cpu_idle_s[r];
        user += io->self_user_s[r], sys += io->self_sys_s[r];
    }
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1 || busy <= 0.0) return;
    const double k = 1e3 / (double)f->st.decode_tokens;
    f->n_cores = (int)cores;
    f->cpu_ms = (busy + steal) * k;
    f->self_user_ms = user * k;
    f->self_sys_ms = sys * k;
    f->other_ms = busy > user + sys ? (busy - user - sys) * k : 0.0;
    f->steal_ms = steal * k;
    f->idle_ms = idle * k;
    f->cores_floor_ms = f->cpu_ms / (double)cores;
    f->cores_ratio = f->token_ms / f->cores_floor_ms;
    f->cpu_valid = true;
}

/* The cores' line under the I/O floor, and which floor is the higher. */
static void print_cores(const offload_figs *f, FILE *out) {
    if (!f->cpu_valid || !f->reads) return;
    fprintf(out,
            "cores: %.2f ms of CPU time per token on %d cores (pinfer %.2f in user mode and %.2f in the kernel, "
            "interrupts and other processes %.2f, taken by the host %.2f), idle %.2f; never idle: %.2f ms per token "
            "(%.2f tok/s); measured %.2f ms, %.2fx",
            f->cpu_ms, f->n_cores, f->self_user_ms, f->self_sys_ms, f->other_ms, f->steal_ms, f->idle_ms,
            f->cores_floor_ms, 1e3 / f->cores_floor_ms, f->token_ms, f->cores_ratio);
    if (f->floor_ms > 0.0)
        fprintf(out, "; the higher floor: %s", f->cores_floor_ms > f->floor_ms ? "the cores'" : "the I/O floor");
    fputc('\n', out);
}

/* The floor line under the offload figures. */
static void print_floor(const offload_figs *f, FILE *out) {
    if (!f->valid || !f->st.decode_tokens || !f->reads) return;
    if (f->read_rate <= 0.0) {
        fprintf(out, "I/O floor: unknown (%s)\n", pi_last_error());
        return;
    }
    fprintf(out,
            "I/O floor: %.0f reads per token of %.1f KiB at %.1fK reads/s (hwprobe, queue depth %d) = %.2f ms, plus "
            "%.2f ms with no read in flight = %.2f ms per token (%.2f tok/s); measured %.2f ms, %.2fx the floor\n",
            f->reads, (double)f->st.bytes_read / (double)f->st.reads / 1024.0, f->read_rate * 1e-3, f->mem.queue_depth,
            f->io_floor_ms, f->no_io_ms, f->floor_ms, 1e3 / f->floor_ms, f->token_ms, f->floor_ratio);
}

/* The random reads the last round's median repetition achieved, kept
   beside the cached probe for the planner (pi_model_note_reads): the
   engine's own reads of this disk are the figure that prices the next
   plan. The median run's, as its tok/s is the one reported: on a disk
   whose first reads of a block are slow, a model just written read at
   35.1K/s over all three runs of a 47B benchmark and at about 64K/s in the
   two later ones. Only from enough reads to measure. Two clocks:
   - Where decoding waited on the reads for much of their time, the reads
     over the time one was in flight until computed, at the configured
     depth: that time also holds the queue left to drain while the cores
     computed, which the plan pays as well. (7b-l8 at 715M, 2026-11-29:
     the block device read 54.6K/s while busy and the engine 37.2K/s; priced
     at the device's rate the plan said 25.53 tok/s and the run made 16.98.)
   - Where most of that time was hidden behind compute, a read that lands
     waits there to be reaped, and the engine's clock says more about the
     compute than the disk: the block device's own counters
     (pi_model_disk_counts: reads over its busy time, at the mean number it
     had in flight), where they hold the engine's reads and no others. (make
     demo's model profiled on its own text: 58 reads a layer, 78-81%
     hidden; the engine's clock said 34-36K/s, the reads' time with
     io_uring 31-34K/s at 46 deep, the device's counters 64.2K/s at 42
     deep, the probe 76.9K/s at that depth. Priced at the io_uring time's
     rate the plan said 31.64 tok/s and the run made 43.73; at the device's,
     48.28 and 47.79. Priced at the engine's clock, 31.6K/s at depth 256, a
     plan from the build before was 66% slow.) Without those counters such
     a run keeps nothing.
   The output head read from flash likewise: its bytes over its time (the
   product's included, a few percent of it), which prices the head's read
   in later plans. A run that read nothing (every row resident) prices
   compute instead: its tok/s over the plan's prediction. io: each run's
   reads, ts: each run's tok/s. */
#define NOTE_MIN_READS 4096
#define NOTE_MIN_BUSY_S 0.25
#define NOTE_MIN_DISK_S 0.1      /* the device busy: its counters are in ms */
#define NOTE_DISK_MATCH_LO 0.8  /* the device's reads against the engine's: none but the engine's */
#define NOTE_DISK_MATCH_HI 1.25
#define NOTE_MAX_HIDDEN 0.7     /* of the reads' time behind compute: the device's counters above */
#define NOTE_MIN_HEAD_BYTES (256.0 * 1024 * 1024)
#define NOTE_MIN_HEAD_S 0.1     /* a few large sequential reads: 16 products of a 7b-l8's head, 0.17 s */
static void note_achieved(const app *a, const offload_figs *f, const rep_reads *io, const double *ts, long reps,
                       const char *cmd) {
    long m = 0; /* the median run: as many runs faster as slower (the slower middle one of an even count) */
    for (long r = 0; r < reps; r++) {
        long below = 0, equal_before = 0;
        for (long q = 0; q < reps; q++) below += ts[q] < ts[r], equal_before += q < r && ts[q] == ts[r];
        if (below + equal_before == (reps - 1) / 2) m = r;
    }
    if (!f->valid) return;
    char path[1024];
    if (io->head_bytes[m] >= NOTE_MIN_HEAD_BYTES && io->head_s[m] >= NOTE_MIN_HEAD_S) {
        const double gbs = io->head_bytes[m] / io->head_s[m] * 1e-9;
        if (pi_model_note_head_reads(a->m, gbs, path, sizeof path))
            fprintf(stderr, "%s: the output head's read rate was not kept: %s\n", cmd, pi_last_error());
        else
            fprintf(stderr, "%s: output head read from flash at %.2f GB/s; kept in %s for the planner\n", cmd, gbs,
                    path);
    }
    if (io->reads[m] == 0 && io->head_bytes[m] == 0 && a->info.plan_tok_s > 0.0 && ts[m] > 0.0) {
        /* every row from memory: the run prices compute */
        const double k = ts[m] / a->info.plan_tok_s;
        if (pi_model_note_compute(a->m, k, path, sizeof path))
            fprintf(stderr, "%s: the compute achieved was not kept: %s\n", cmd, pi_last_error());
        else
            fprintf(stderr, "%s: every row in memory: decoded %.2fx the plan's prediction; kept in %s for the planner\n",
                    cmd, k, path);
        return;
    }
    if (io->reads[m] < NOTE_MIN_READS || io->busy_s[m] < NOTE_MIN_BUSY_S || f->mem.queue_depth < 1) return;
    const double dr = io->disk_reads[m], hidden = 1.0 - io->wait_s[m] / io->busy_s[m];
    const bool disk = io->disk_ok[m] && io->head_bytes[m] == 0.0 && dr >= NOTE_DISK_MATCH_LO * io->reads[m] &&
                      dr <= NOTE_DISK_MATCH_HI * io->reads[m] && io->disk_busy_s[m] >= NOTE_MIN_DISK_S;
    if (disk)
        fprintf(stderr, "%s: the block device: %.1fK reads/s while busy, %.1f in flight on average; the engine: %.1fK "
                "reads/s while one was in flight, %.0f%% of that time hidden behind compute\n", cmd,
                dr / io->disk_busy_s[m] * 1e-3, io->disk_read_s[m] / io->disk_busy_s[m],
                io->reads[m] / io->busy_s[m] * 1e-3, 100.0 * hidden);
    double rate, bytes, depth;
    char whose[96];
    if (hidden <= NOTE_MAX_HIDDEN) {
        rate = io->reads[m] / io->busy_s[m];
        bytes = io->bytes[m] / io->reads[m];
        depth = (double)f->mem.queue_depth;
        snprintf(whose, sizeof whose, "while one was in flight, at queue depth %d", f->mem.queue_depth);
    } else if (disk) {
        rate = dr / io->disk_busy_s[m];
        bytes = io->disk_bytes[m] / dr;
        depth = io->disk_read_s[m] / io->disk_busy_s[m];
        snprintf(whose, sizeof whose, "by the block device's counters, %.1f in flight on average", depth);
    } else {
        fprintf(stderr, "%s: reads achieved not kept for the planner: %.0f%% of their time was hidden behind compute, "
                "which holds a landed read until it is reaped, and %s\n", cmd, 100.0 * hidden,
                !io->disk_ok[m] ? "the model's filesystem has no block device counters"
                : io->head_bytes[m] > 0.0 ? "the block device's counters hold the output head's reads too"
                : "the block device's counters do not match the engine's reads (other I/O on the disk?)");
        return;
    }
    const int qd = depth < 1.0 ? 1 : (int)lround(depth);
    double probe = 0.0;
    if (pi_model_read_rate(a->m, (uint64_t)bytes, qd, &probe)) probe = 0.0;
    if (pi_model_note_reads(a->m, bytes, qd, rate, path, sizeof path)) {
        fprintf(stderr, "%s: the reads achieved were not kept: %s\n", cmd, pi_last_error());
        return;
    }
    fprintf(stderr, "%s: reads achieved: %.1fK/s of %.1f KiB %s (probe: %.1fK/s); kept in %s for the planner\n",
            cmd, rate * 1e-3, bytes / 1024.0, whose, probe * 1e-3, path);
}

/* The CPU's model name (llama-bench's cpu_info), else the machine type. */
static void cpu_info(char *buf, size_t n) {
    buf[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (!c || (strncmp(line, "model name", 10) && strncmp(line, "Hardware", 8))) continue;
        for (c++; *c == ' ' || *c == '\t'; c++) {}
        c[strcspn(c, "\r\n")] = '\0';
        snprintf(buf, n, "%s", c);
        break;
    }
    if (f) fclose(f);
    struct utsname u;
    if (!buf[0]) snprintf(buf, n, "%s", uname(&u) == 0 ? u.machine : "unknown");
}

static void now_rfc3339(char *buf, size_t n) {
    time_t t = time(NULL);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm)) snprintf(buf, n, "unknown");
}

static double mean(const double *v, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += v[i];
    return n ? s / n : 0.0;
}

/* Sample standard deviation (n - 1), 0 for fewer than two, as llama-bench. */
static double stddev(const double *v, int n) {
    if (n < 2) return 0.0;
    double m = mean(v, n), s = 0.0;
    for (int i = 0; i < n; i++) s += (v[i] - m) * (v[i] - m);
    return sqrt(s / (n - 1));
}

/* Everything a record needs besides its test. */
typedef struct {
    const app *a;
    const char *model, *peer;
    bool vs_dense;
    int threads;
    long reps, rounds;
    bool use_mmap;
    double bw, bound;     /* GB/s; dense decode's bound, tok/s */
    char cpu[256];
} bench_ctx;

static void md_size(char *buf, size_t n, uint64_t bytes) {
    if (bytes < ((uint64_t)1 << 30))
        snprintf(buf, n, "%.2f MiB", (double)bytes / (1 << 20));
    else
        snprintf(buf, n, "%.2f GiB", (double)bytes / (1 << 30));
}

static const char *ffn_name(pi_ffn_mode m) {
    return m == PI_FFN_SPARSE ? "sparse" : m == PI_FFN_ORACLE ? "oracle" : "dense";
}

/* One record: llama-bench's fields first, then pinfer's. The tg record
   carries the sparse and offload figures (they describe decoding); the pp
   record has them null. */
static void add_record(report *r, const bench_ctx *c, const bench_test *t, const sparse_figs *sf,
                       const offload_figs *of) {
    const pi_model_info *in = &c->a->info;
    const bool tg = t->n_gen > 0;
    char buf[512];
    report_begin(r);
    /* llama-bench's */
#ifdef PI_BUILD_COMMIT
    report_str(r, "build_commit", PI_BUILD_COMMIT);
#else
    report_str(r, "build_commit", pi_version());
#endif
    report_str(r, "cpu_info", c->cpu);
    report_str(r, "backends", "CPU");
    report_str(r, "model_filename", c->model);
    /* llama-bench's model_type is a description: the architecture, and the name when it says more */
    const bool named = in->name[0] && strcmp(in->name, in->arch);
    char type[256];
    snprintf(type, sizeof type, "%s%s%s", in->arch, named ? " " : "", named ? in->name : "");
    report_str(r, "model_type", type);
    report_int(r, "model_size", (int64_t)in->weight_bytes);
    report_int(r, "model_n_params", (int64_t)in->n_params);
    report_int(r, "n_threads", c->threads);
    report_str(r, "type_k", "f32");
    report_str(r, "type_v", "f32");
    report_bool(r, "use_mmap", c->use_mmap);
    report_int(r, "n_prompt", t->n_prompt);
    report_int(r, "n_gen", t->n_gen);
    report_int(r, "n_depth", 0);
    report_str(r, "test_time", t->time);
    report_int(r, "avg_ns", (int64_t)nearbyint(mean(t->ns, t->n)));
    report_int(r, "stddev_ns", (int64_t)nearbyint(stddev(t->ns, t->n)));
    report_num(r, "avg_ts", mean(t->ts, t->n));
    report_num(r, "stddev_ts", stddev(t->ts, t->n));
    report_nums(r, "samples_ns", t->ns, (size_t)t->n);
    report_nums(r, "samples_ts", t->ts, (size_t)t->n);
    /* pinfer's */
    report_str(r, "pinfer_version", pi_version());
    report_str(r, "kernels", in->kernels);
    snprintf(buf, sizeof buf, "%s%ld", tg ? "tg" : "pp", tg ? t->n_gen : t->n_prompt);
    report_str(r, "test", buf);
    report_num(r, "median_ts", t->median);
    report_int(r, "n_reps", c->reps);
    report_int(r, "n_rounds", c->rounds);
    report_str(r, "ffn", ffn_name(pi_session_ffn(c->a->s)));
    report_int(r, "hot_neurons", in->hot);
    report_bool(r, "has_predictor", in->has_predictor);
    report_int(r, "n_layer", in->n_layer);
    report_int(r, "n_ff", in->n_ff);
    report_int(r, "bytes_per_token", (int64_t)in->bytes_per_token);
    report_num(r, "mem_bw_gbs", c->bw);
    report_num(r, "bound_ts", c->bound);
    if (tg) report_num(r, "of_bound_pct", 100.0 * t->median / c->bound);
    else report_null(r, "of_bound_pct");
    if (c->peer) {
        report_num(r, "peer_ts", t->peer);
        report_num(r, "pinfer_over_peer", t->ratio);
    }
    if (c->vs_dense && tg) {
        report_num(r, "dense_ts", t->dense);
        report_num(r, "sparse_over_dense", t->dratio);
        report_num(r, "sparse_over_dense_in_step", t->sratio);
    }
    if (sf->valid && tg) {
        report_num(r, "sparse_neurons_frac", sf->computed_frac);
        report_num(r, "sparse_active_frac", sf->active_frac);
        report_num(r, "sparse_recall", sf->recall_all);
        report_nums(r, "sparse_layer_neurons", sf->computed, (size_t)sf->n_layer);
        report_nums(r, "sparse_layer_active", sf->active, (size_t)sf->n_layer);
        report_nums(r, "sparse_layer_recall", sf->recall, (size_t)sf->n_layer);
        report_nums(r, "sparse_layer_mb", sf->mb, (size_t)sf->n_layer);
        report_num(r, "sparse_mb_per_token", sf->mb_all);
        report_num(r, "sparse_ffn_mb_per_token", sf->mb_ffn);
        report_num(r, "ffn_dense_mb", sf->mb_ffn_dense);
        report_num(r, "sparse_bound_ts", sf->bound);
        report_num(r, "sparse_of_bound_pct", sf->of_bound);
    }
    if (of->valid) {
        const pi_memory_report *m = &of->mem;
        report_int(r, "mem_budget", (int64_t)m->limit);
        report_int(r, "mem_used", (int64_t)m->used);
        report_int(r, "mem_fixed", (int64_t)m->fixed);
        report_int(r, "mem_kv", (int64_t)m->kv);
        report_int(r, "mem_scratch", (int64_t)m->scratch);
        report_int(r, "mem_io", (int64_t)m->io);
        report_int(r, "mem_hot", (int64_t)m->hot);
        report_int(r, "mem_cache", (int64_t)m->cache);
        report_int(r, "hot_min", m->hot_min);
        report_int(r, "hot_max", m->hot_max);
        report_int(r, "cache_slots", m->cache_slots);
        report_int(r, "cache_slot_bytes", (int64_t)m->slot_bytes);
        report_str(r, "io_backend", m->io_backend);
        report_bool(r, "planned", in->planned);
        if (in->planned) {
            report_num(r, "plan_ts", in->plan_tok_s);
            report_int(r, "plan_threads", in->plan_threads);
            report_int(r, "plan_queue_depth", in->plan_queue_depth);
            report_int(r, "plan_cache_bytes", (int64_t)in->plan_cache_bytes);
        }
        if (in->recall > 0.0f) report_num(r, "recall_target", in->recall);
        if (tg) {
            report_int(r, "decode_tokens", (int64_t)of->st.decode_tokens);
            report_num(r, "neurons_per_token", of->neurons);
            report_num(r, "resident_per_token", of->resident);
            report_num(r, "cache_hits_per_token", of->cached);
            report_num(r, "cache_misses_per_token", of->read);
            report_num(r, "cache_hit_pct", of->cache_hit_pct);
            report_num(r, "hit_pct", of->hit_pct);
            report_num(r, "reads_per_token", of->reads);
            report_num(r, "merged_reads_per_token", of->reads_merged);
            report_num(r, "mb_read_per_token", of->mb_read);
            report_num(r, "io_busy_ms", of->busy_ms);
            report_num(r, "io_hidden_ms", of->hidden_ms);
            report_num(r, "io_hidden_pct", of->hidden_pct);
            report_num(r, "io_wait_ms", of->wait_ms);
            report_num(r, "ffn_ms", of->ffn_ms);
            report_int(r, "split_steps", (int64_t)of->st.split_steps);
            report_int(r, "queue_depth", of->mem.queue_depth);
            report_num(r, "token_ms", of->token_ms);
            if (of->read_rate > 0.0) {
                report_num(r, "read_rate", of->read_rate);
                report_num(r, "io_floor_ms", of->io_floor_ms);
                report_num(r, "no_io_ms", of->no_io_ms);
                report_num(r, "floor_ms", of->floor_ms);
                report_num(r, "floor_ratio", of->floor_ratio);
            }
            if (of->cpu_valid) {
                report_int(r, "n_cores", of->n_cores);
                report_num(r, "cpu_ms", of->cpu_ms);
                report_num(r, "cpu_self_user_ms", of->self_user_ms);
                report_num(r, "cpu_self_sys_ms", of->self_sys_ms);
                report_num(r, "cpu_other_ms", of->other_ms);
                report_num(r, "cpu_steal_ms", of->steal_ms);
                report_num(r, "cpu_idle_ms", of->idle_ms);
                report_num(r, "cores_floor_ms", of->cores_floor_ms);
                report_num(r, "cores_ratio", of->cores_ratio);
            }
            if (of->st.prompt_bytes_read) report_num(r, "prompt_mb_streamed", (double)of->st.prompt_bytes_read * 1e-6);
        }
    }
    /* markdown: llama-bench's columns, then pinfer's */
    report_md(r, "model", "%s", type);
    md_size(buf, sizeof buf, in->weight_bytes);
    report_md(r, "size", "%s", buf);
    report_md(r, "backend", "CPU");
    report_md(r, "threads", "%d", c->threads);
    report_md(r, "ffn", "%s", ffn_name(pi_session_ffn(c->a->s)));
    if (of->valid) report_md(r, "budget", "%.1f MiB", (double)of->mem.limit / (1 << 20));
    report_md(r, "test", "%s%ld", tg ? "tg" : "pp", tg ? t->n_gen : t->n_prompt);
    report_md(r, "t/s", "%.2f ± %.2f", mean(t->ts, t->n), stddev(t->ts, t->n));
    report_md(r, "median t/s", "%.2f", t->median);
    if (tg) report_md(r, "of bound", "%.0f%%", 100.0 * t->median / c->bound);
    if (c->peer) {
        report_md(r, "peer t/s", "%.2f", t->peer);
        report_md(r, "pinfer/peer", "%.2f", t->ratio);
    }
    if (c->vs_dense && tg) {
        report_md(r, "dense t/s", "%.2f", t->dense);
        report_md(r, "sparse/dense", "%.2f", t->dratio);
        report_md(r, "in step", "%.2f", t->sratio);
    }
}

/* Write the records of the tests run to stdout. */
static bool write_records(report_fmt fmt, const bench_ctx *c, const bench_test *tests, int n_tests,
                          const sparse_figs *sf, const offload_figs *of) {
    report *r = report_create(fmt);
    if (!r) return false;
    for (int k = 0; k < n_tests; k++) add_record(r, c, &tests[k], sf, of);
#ifdef PI_BUILD_COMMIT
    report_md_footer(r, "build: %s (pinfer %s)", PI_BUILD_COMMIT, pi_version());
#else
    report_md_footer(r, "build: pinfer %s", pi_version());
#endif
    bool ok = report_write(r, stdout);
    report_free(r);
    return ok;
}

int cmd_bench(int argc, char **argv) {
    const char *cmd = "bench";
    app_opts o;
    app_opts_init(&o);
    bench_args ba = {NULL, NULL, NULL, false, false, false, 512, 128, 5, 1, REPORT_TEXT};
    int pr = app_parse_args(cmd, argc, argv, &o, NULL, bench_option, &ba, usage);
    if (pr <= 0) return pr ? 2 : 0;
    const char *peer = ba.peer, *sweep = ba.sweep, *sweep_out = ba.sweep_out;
    const bool naive = ba.naive, vs_dense = ba.vs_dense, greedy = ba.greedy;
    const long n_prompt = ba.n_prompt, n_gen = ba.n_gen, reps = ba.reps, rounds = ba.rounds;
    const report_fmt fmt = ba.fmt;
    /* the human report: on stdout, or on stderr when stdout carries records */
    FILE *out = fmt == REPORT_TEXT ? stdout : stderr;
    if (sweep) {
        if (!o.model || n_gen <= 0) {
            fprintf(stderr, "pinfer: %s: --sweep needs -m FILE (a bundle file) and -n N > 0\n", cmd);
            return 2;
        }
        if (fmt != REPORT_TEXT) {
            fprintf(stderr, "pinfer: %s: -o applies to the pp/tg tests, not to --sweep; --sweep-out PREFIX writes "
                            "PREFIX.json and PREFIX.csv\n", cmd);
            return 2;
        }
        if (greedy) {
            fprintf(stderr, "pinfer: %s: --greedy applies to the tg test, not to --sweep (whose budgets each "
                            "decode llama-bench's token sequence)\n", cmd);
            return 2;
        }
        return bench_sweep(cmd, &o, sweep, n_gen, reps, naive, sweep_out);
    }
    if (vs_dense && (n_gen <= 0 || peer || o.mp.mem_budget)) {
        fprintf(stderr, "pinfer: %s: --vs-dense needs -n N > 0, and goes with neither --peer nor --mem-budget "
                        "(the dense FFN needs every weight in memory)\n", cmd);
        return 2;
    }
    o.mp.n_ctx = (n_prompt > n_gen ? n_prompt : n_gen) + 1;
    app a;
    memset(&a, 0, sizeof a);
    pi_session *dense = NULL; /* with --vs-dense */
    int32_t *toks = NULL, *seq = NULL; /* the pp test's prompt, the tg test's tokens */
    double *samples = NULL;
    sparse_figs sf;
    offload_figs of;
    memset(&sf, 0, sizeof sf);
    memset(&of, 0, sizeof of);
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
    if (vs_dense) {
        if (pi_session_ffn(a.s) == PI_FFN_DENSE) {
            fprintf(stderr, "pinfer: %s: --vs-dense compares the sparse FFN with the dense one, but %s decodes "
                            "densely (no activation predictors, or --dense)\n", cmd, o.model);
            goto out;
        }
        pi_session_params dp = pi_session_default_params();
        dp.n_ctx = pi_session_n_ctx(a.s);
        dp.n_threads = T;
        dp.ffn = PI_FFN_DENSE;
        if (pi_session_create(a.m, &dp, &dense)) {
            fprintf(stderr, "pinfer: %s: the dense session: %s\n", cmd, pi_last_error());
            goto out;
        }
    }
    toks = malloc((size_t)(n_prompt + 1) * sizeof *toks);
    /* every timed repetition of every round: tok/s and ns, for pp and for tg */
    const size_t n_samples = (size_t)(rounds * reps);
    samples = malloc(4 * n_samples * sizeof *samples);
    if (!toks || !samples) {
        fprintf(stderr, "pinfer: %s: out of memory\n", cmd);
        goto out;
    }
    for (long i = 0; i < n_prompt; i++) toks[i] = (int32_t)((i * 7919 + 13) % V);
    if (n_gen > 0) {
        seq = greedy ? malloc((size_t)n_gen * sizeof *seq) : tg_fixed_tokens(V, n_gen);
        if (!seq) {
            fprintf(stderr, "pinfer: %s: out of memory\n", cmd);
            goto out;
        }
        if (greedy && !tg_greedy_tokens(&a, n_gen, seq)) {
            fprintf(stderr, "pinfer: %s: the greedy continuation: %s\n", cmd, pi_last_error());
            goto out;
        }
    }
    bench_test tpp = {.n_prompt = n_prompt, .ts = samples, .ns = samples + n_samples, .n = (int)n_samples};
    bench_test ttg = {.n_gen = n_gen, .ts = samples + 2 * n_samples, .ns = samples + 3 * n_samples,
                      .n = (int)n_samples};

    double bytes = (double)a.info.bytes_per_token;
    double bound = bw * 1e9 / bytes;
    fprintf(out, "model: %s (%.2f GB of weights; %.1f MB read per decode token)\n", o.model,
            (double)a.info.weight_bytes * 1e-9, bytes * 1e-6);
    fprintf(out, "memory read bandwidth, %d thread%s: %.1f GB/s -> decode bound %.1f tok/s\n", T, T > 1 ? "s" : "",
            bw, bound);
    if (greedy && n_gen > 0) {
        long distinct = 0;
        for (long i = 0; i < n_gen; i++) {
            long j = 0;
            while (j < i && seq[j] != seq[i]) j++;
            distinct += j == i;
        }
        fprintf(out, "tg tokens: the model's greedy continuation of token 1 (%ld distinct of %ld):", distinct, n_gen);
        for (long i = 0; i < n_gen && i < 16; i++) fprintf(out, " %d", (int)seq[i]);
        fprintf(out, "%s\n", n_gen > 16 ? " ..." : "");
    }
    fprintf(out, "%-8s %7s %12s %12s\n", "test", "threads", "tok/s", "of bound");

    double pp[MAX_REPS], tg[MAX_REPS], ppp[MAX_REPS], ptg[MAX_REPS], rpp[MAX_REPS], rtg[MAX_REPS];
    double dtg[MAX_REPS], rdtg[MAX_REPS], stg[MAX_REPS]; /* stg: sparse/dense, the sessions in step */
    rep_reads tg_io;
    memset(&tg_io, 0, sizeof tg_io);
    for (long k = 0; k < rounds; k++) {
        pp[k] = tg[k] = ppp[k] = ptg[k] = 0.0;
        if (k == 0) now_rfc3339(tpp.time, sizeof tpp.time);
        if (n_prompt > 0 && !measure_pp(&a, toks, n_prompt, reps, &pp[k], tpp.ts + k * reps, tpp.ns + k * reps)) {
            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
            goto out;
        }
        if (k == 0) now_rfc3339(ttg.time, sizeof ttg.time);
        if (n_gen > 0 && !measure_tg(&a, seq, n_gen, reps, &tg[k], ttg.ts + k * reps, ttg.ns + k * reps, &tg_io)) {
            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
            goto out;
        }
        if (peer && !run_peer(peer, o.model, n_prompt, n_gen, T, reps, &ppp[k], &ptg[k])) goto out;
        dtg[k] = rdtg[k] = 0.0;
        if (dense) { /* the same tokens through the dense session; a.s is back before any error path */
            pi_session *sparse = a.s;
            a.s = dense;
            const bool ok = measure_tg(&a, seq, n_gen, reps, &dtg[k], NULL, NULL, NULL);
            a.s = sparse;
            if (!ok) {
                fprintf(stderr, "pinfer: %s: dense decode: %s\n", cmd, pi_last_error());
                goto out;
            }
            rdtg[k] = dtg[k] > 0 ? tg[k] / dtg[k] : 0.0;
            double st = 0.0, dt = 0.0;
            if (!measure_tg_in_step(&a, dense, seq, n_gen, &st, &dt)) {
                fprintf(stderr, "pinfer: %s: decoding in step: %s\n", cmd, pi_last_error());
                goto out;
            }
            stg[k] = dt > 0 ? st / dt : 0.0;
            fprintf(stderr,
                    "bench: round %ld: sparse tg %.2f | dense tg %.2f | sparse/dense %.2f | in step %.2f / %.2f = %.2f\n",
                    k + 1, tg[k], dtg[k], rdtg[k], st, dt, stg[k]);
        }
        rpp[k] = ppp[k] > 0 ? pp[k] / ppp[k] : 0.0;
        rtg[k] = ptg[k] > 0 ? tg[k] / ptg[k] : 0.0;
        if (rounds > 1 && !dense)
            fprintf(stderr, "bench: round %ld: pp %.2f tg %.2f%s", k + 1, pp[k], tg[k], peer ? "" : "\n");
        if (rounds > 1 && peer) fprintf(stderr, " | peer pp %.2f tg %.2f\n", ppp[k], ptg[k]);
    }
    tpp.median = app_median(pp, (int)rounds);
    ttg.median = app_median(tg, (int)rounds);
    const char *med = rounds > 1 ? " (median of rounds)" : "";
    if (n_prompt > 0) fprintf(out, "pp%-6ld %7d %12.2f %12s%s\n", n_prompt, T, tpp.median, "", med);
    if (n_gen > 0) fprintf(out, "tg%-6ld %7d %12.2f %11.0f%%%s\n", n_gen, T, ttg.median, 100.0 * ttg.median / bound, med);
    if (n_gen > 0) { /* the last round's decoding, with --mem-budget */
        app_print_offload(&a, out);
        offload_figures(&a, &of);
        cores_figures(&tg_io, reps, &of);
        print_floor(&of, out);
        print_cores(&of, out);
        note_achieved(&a, &of, &tg_io, ttg.ts + (rounds - 1) * reps, reps, cmd);
    }
    if (n_gen > 0 && pi_session_ffn(a.s) != PI_FFN_DENSE && !a.info.offloaded) {
        /* a separate, untimed pass: the recall check computes every gate */
        pi_session_reset_stats(a.s);
        const bool check = pi_session_set_recall_check(a.s, true) == PI_OK;
        double once;
        if (!measure_tg(&a, seq, n_gen, 1, &once, NULL, NULL, NULL)) goto out;
        print_sparse_stats(&a, check, bw, ttg.median, out, &sf);
        if (check) pi_session_set_recall_check(a.s, false);
    }
    if (peer) {
        tpp.peer = app_median(ppp, (int)rounds);
        tpp.ratio = app_median(rpp, (int)rounds);
        ttg.peer = app_median(ptg, (int)rounds);
        ttg.ratio = app_median(rtg, (int)rounds);
        fprintf(out, "peer (%s):\n", peer);
        if (n_prompt > 0)
            fprintf(out, "pp%-6ld %7d %12.2f   pinfer/peer = %.2f\n", n_prompt, T, tpp.peer, tpp.ratio);
        if (n_gen > 0)
            fprintf(out, "tg%-6ld %7d %12.2f %11.0f%%   pinfer/peer = %.2f\n", n_gen, T, ttg.peer,
                    100.0 * ttg.peer / bound, ttg.ratio);
    }
    if (dense) {
        ttg.dense = app_median(dtg, (int)rounds);
        ttg.dratio = app_median(rdtg, (int)rounds);
        ttg.sratio = app_median(stg, (int)rounds);
        fprintf(out, "dense FFN (a second session, alternated with the sparse runs):\n");
        fprintf(out, "tg%-6ld %7d %12.2f %11.0f%%   sparse/dense = %.2f (median of %ld round%s)\n", n_gen, T,
                ttg.dense, 100.0 * ttg.dense / bound, ttg.dratio, rounds, rounds > 1 ? "s" : "");
        fprintf(out, "the two sessions in step, one token of each in turn: sparse/dense = %.2f (median of %ld round%s)\n",
                ttg.sratio, rounds, rounds > 1 ? "s" : "");
    }
    if (fmt != REPORT_TEXT) {
        bench_ctx c = {.a = &a, .model = o.model, .peer = peer, .vs_dense = dense != NULL, .threads = T, .reps = reps, .rounds = rounds,
                       .use_mmap = o.mp.use_mmap, .bw = bw, .bound = bound};
        cpu_info(c.cpu, sizeof c.cpu);
        bench_test tests[2];
        int n_tests = 0;
        if (n_prompt > 0) tests[n_tests++] = tpp;
        if (n_gen > 0) tests[n_tests++] = ttg;
        if (!write_records(fmt, &c, tests, n_tests, &sf, &of)) {
            fprintf(stderr, "pinfer: %s: cannot write the report (out of memory or stdout failed)\n", cmd);
            goto out;
        }
    }
    rc = 0;
out:
    pi_session_free(dense);
    sparse_figs_free(&sf);
    free(samples);
    free(toks);
    free(seq);
    app_free(&a);
    return rc;
}
