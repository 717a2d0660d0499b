/*
 * test_machine_output.c — the machine-readable output of `pinfer bench -o
 * json|jsonl|csv|md` and `pinfer inspect --json`, end to end: the document
 * parses (cJSON), has llama-bench's fields with their types, and carries the
 * very figures the human report of the same run shows (the report goes to
 * stderr then: each of its lines is rebuilt from the document's numbers
 * with the report's own format and must appear there). CSV has a header and
 * one row per record, all of the same width; markdown is a table. Runs on
 * stories260K (../shared/models), a generated model with predictors (the
 * sparse figures) and its bundle file under --mem-budget (the offload
 * figures, with and without a plan). The binary comes from $PI_TEST_PINFER
 * ($PI_TEST_RUNNER as a prefix); without cJSON only the CSV and markdown
 * parts run.
 */
#include "test_hw.h"
#include "test_util.h"

#include "pinfer.h"

#include <stdarg.h>
#include <sys/stat.h>

#ifdef PI_HAVE_CJSON
#include <cjson/cJSON.h>
#endif

static const char *g_pinfer, *g_runner;
static char g_tmp[256], g_out[320], g_err[320];

/* Run `pinfer ARGS` (printf-formatted), stdout to g_out, stderr to g_err;
   returns the exit status. */
static int pinfer(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int pinfer(const char *fmt, ...) {
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s %s %s >%s 2>%s", g_runner, g_pinfer, args, g_out, g_err);
    return t_sh(cmd);
}

/* Whether the text holds the printf-formatted line (or part of one). */
static bool has(const char *text, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool has(const char *text, const char *fmt, ...) {
    char want[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(want, sizeof want, fmt, ap);
    va_end(ap);
    bool ok = text && strstr(text, want);
    if (!ok) fprintf(stderr, "  not in the text report: \"%s\"\n", want);
    return ok;
}

/* ---- CSV ---- */

/* Split one CSV line (quoted fields with doubled quotes) in place; the
   count of fields, or -1 for a malformed line. */
static int csv_fields(char *line, char **f, int max) {
    int n = 0;
    char *p = line, *w;
    for (;;) {
        if (n == max) return -1;
        f[n++] = w = p;
        if (*p == '"') {
            for (p++;;) {
                if (!*p) return -1;
                if (*p == '"' && p[1] == '"') *w++ = '"', p += 2;
                else if (*p == '"') break;
                else *w++ = *p++;
            }
            p++;
        } else {
            while (*p && *p != ',') *w++ = *p++;
        }
        if (!*p) break;
        if (*p != ',') return -1;
        p++;
        *w = '\0';
    }
    *w = '\0';
    return n;
}

typedef struct {
    char *buf;
    char *hdr[256], *row[4][256];
    int n_hdr, n_rows, width[4];
} csv_doc;

static bool csv_read(csv_doc *d, const char *path) {
    memset(d, 0, sizeof *d);
    if (!(d->buf = t_read_file(path, NULL))) return false;
    char *save = NULL, *line = strtok_r(d->buf, "\n", &save);
    if (!line || (d->n_hdr = csv_fields(line, d->hdr, 256)) <= 0) return false;
    while ((line = strtok_r(NULL, "\n", &save))) {
        if (d->n_rows == 4) return false;
        d->width[d->n_rows] = csv_fields(line, d->row[d->n_rows], 256);
        d->n_rows++;
    }
    return true;
}

/* The field of row under column col; "?" when there is none. */
static const char *csv_get(const csv_doc *d, int row, const char *col) {
    for (int j = 0; j < d->n_hdr; j++)
        if (!strcmp(d->hdr[j], col) && j < d->width[row]) return d->row[row][j];
    fprintf(stderr, "  no CSV column %s\n", col);
    return "?";
}

static bool csv_is(const csv_doc *d, int row, const char *col, const char *v) { return !strcmp(csv_get(d, row, col), v); }

/* ---- markdown ---- */

/* Cell borders in a markdown line: every '|' but an escaped one (\|). */
static int count_bars(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '|' && (i == 0 || s[i - 1] != '\\');
    return k;
}

/* A markdown table: a header, a separator of dashes, then rows, each line
   with as many borders as the header. Returns the rows, -1 when malformed. */
static int md_rows(const char *text) {
    int lines = 0, bars = -1;
    for (const char *p = text; p && *p == '|';) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        int b = count_bars(p, n);
        if (bars < 0) bars = b;
        if (b != bars || b < 2 || p[n - 1] != '|') return -1;
        if (lines == 1 && strncmp(p, "| --", 4)) return -1;
        lines++;
        p = e ? e + 1 : NULL;
    }
    return lines >= 2 ? lines - 2 : -1;
}

#ifdef PI_HAVE_CJSON
/* ---- JSON ---- */

static cJSON *parse_file(const char *path) {
    char *text = t_read_file(path, NULL);
    const char *end = NULL;
    cJSON *j = text ? cJSON_ParseWithOpts(text, &end, 1) : NULL; /* the whole of stdout, nothing after it */
    if (!j) fprintf(stderr, "  %s does not parse as JSON near byte %ld\n", path, text && end ? (long)(end - text) : -1L);
    free(text);
    return j;
}

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static double num(const cJSON *o, const char *k) { return cJSON_IsNumber(get(o, k)) ? get(o, k)->valuedouble : NAN; }
static const char *str(const cJSON *o, const char *k) { return cJSON_IsString(get(o, k)) ? get(o, k)->valuestring : NULL; }
static bool is_num(const cJSON *o, const char *k) { return cJSON_IsNumber(get(o, k)); }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The fields every bench record has, with their types: s string, n number,
   b bool, a array, z null or number. */
static void check_record_types(const cJSON *r, long reps) {
    static const char *const k_fields[][2] = {
        {"build_commit", "s"}, {"cpu_info", "s"},   {"backends", "s"},     {"model_filename", "s"},
        {"model_type", "s"},   {"model_size", "n"}, {"n_threads", "n"},    {"type_k", "s"},
        {"type_v", "s"},       {"use_mmap", "b"},   {"n_prompt", "n"},     {"n_gen", "n"},
        {"n_depth", "n"},      {"test_time", "s"},  {"avg_ns", "n"},       {"stddev_ns", "n"},
        {"avg_ts", "n"},       {"stddev_ts", "n"},  {"samples_ns", "a"},   {"samples_ts", "a"},
        {"test", "s"},         {"median_ts", "n"},  {"ffn", "s"},          {"hot_neurons", "n"},
        {"n_layer", "n"},      {"n_ff", "n"},       {"mem_bw_gbs", "n"},   {"bound_ts", "n"},
        {"of_bound_pct", "z"}, {"model_n_params", "n"},
    };
    for (size_t k = 0; k < sizeof k_fields / sizeof k_fields[0]; k++) {
        const cJSON *v = get(r, k_fields[k][0]);
        bool ok = false;
        switch (k_fields[k][1][0]) {
        case 's': ok = cJSON_IsString(v); break;
        case 'n': ok = cJSON_IsNumber(v); break;
        case 'b': ok = cJSON_IsBool(v); break;
        case 'a': ok = cJSON_IsArray(v); break;
        case 'z': ok = cJSON_IsNull(v) || cJSON_IsNumber(v); break;
        }
        CHECKF(ok, "field %s: missing or not of type %s", k_fields[k][0], k_fields[k][1]);
    }
    /* the samples: one per repetition; the averages and the median are theirs */
    const cJSON *ns = get(r, "samples_ns"), *ts = get(r, "samples_ts");
    CHECK(cJSON_GetArraySize(ns) == reps && cJSON_GetArraySize(ts) == reps);
    double v[64], sum = 0.0, sum_ns = 0.0;
    int n = 0;
    for (const cJSON *e = ts ? ts->child : NULL; e && n < 64; e = e->next) sum += v[n++] = e->valuedouble;
    for (const cJSON *e = ns ? ns->child : NULL; e; e = e->next) sum_ns += e->valuedouble;
    if (n == reps && n > 0) {
        qsort(v, (size_t)n, sizeof *v, cmp_double);
        double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
        /* cJSON prints 15 significant digits when they read back within an epsilon: the last bit may differ */
        CHECKF(fabs(med - num(r, "median_ts")) <= 1e-14 * med, "median_ts %.17g is not the median of samples_ts %.17g",
               num(r, "median_ts"), med);
        CHECK(fabs(sum / n - num(r, "avg_ts")) <= 1e-9 * sum / n);
        CHECK(fabs(sum_ns / n - num(r, "avg_ns")) <= 1.0);
    }
    const char *tt = str(r, "test_time");
    CHECK(tt && strlen(tt) == 20 && tt[4] == '-' && tt[10] == 'T' && tt[19] == 'Z');
    char test[32];
    snprintf(test, sizeof test, "%s%.0f", num(r, "n_gen") > 0 ? "tg" : "pp",
             num(r, "n_gen") > 0 ? num(r, "n_gen") : num(r, "n_prompt"));
    CHECK(str(r, "test") && !strcmp(str(r, "test"), test));
}

/* The lines of bench's text report every run shows, rebuilt from a record. */
static void check_common_text(const cJSON *r, const char *text, const char *model, int threads) {
    const bool tg = num(r, "n_gen") > 0;
    CHECK(has(text, "model: %s (%.2f GB of weights; %.1f MB read per decode token)\n", model,
              num(r, "model_size") * 1e-9, num(r, "bytes_per_token") * 1e-6));
    CHECK(has(text, "memory read bandwidth, %d thread%s: %.1f GB/s -> decode bound %.1f tok/s\n", threads,
              threads > 1 ? "s" : "", num(r, "mem_bw_gbs"), num(r, "bound_ts")));
    if (tg)
        CHECK(has(text, "tg%-6.0f %7d %12.2f %11.0f%%\n", num(r, "n_gen"), threads, num(r, "median_ts"),
                  num(r, "of_bound_pct")));
    else
        CHECK(has(text, "pp%-6.0f %7d %12.2f %12s\n", num(r, "n_prompt"), threads, num(r, "median_ts"), ""));
}

/* bench -o json on stories260K: two records, pp then tg, with the report's figures. */
static void bench_json_dense(const char *model) {
    CHECK(pinfer("bench -m %s -p 16 -n 8 -r 3 -t 2 -o json", model) == 0);
    cJSON *doc = parse_file(g_out);
    char *text = t_read_file(g_err, NULL);
    CHECK(cJSON_IsArray(doc) && cJSON_GetArraySize(doc) == 2);
    const cJSON *pp = cJSON_GetArrayItem(doc, 0), *tg = cJSON_GetArrayItem(doc, 1);
    if (pp && tg) {
        check_record_types(pp, 3);
        check_record_types(tg, 3);
        CHECK(num(pp, "n_prompt") == 16 && num(pp, "n_gen") == 0 && num(tg, "n_prompt") == 0 && num(tg, "n_gen") == 8);
        CHECK(num(pp, "n_threads") == 2 && str(pp, "model_filename") && !strcmp(str(pp, "model_filename"), model));
        CHECK(str(tg, "ffn") && !strcmp(str(tg, "ffn"), "dense"));
        CHECK(cJSON_IsFalse(get(pp, "use_mmap")) && cJSON_IsNull(get(pp, "of_bound_pct")));
        CHECK(str(pp, "type_k") && !strcmp(str(pp, "type_k"), "f32"));
        CHECKF(num(pp, "model_n_params") > 2.0e5 && num(pp, "model_n_params") < 3.2e5, "stories260K: %.0f parameters",
               num(pp, "model_n_params"));
        /* both records have the same fields, in the same order */
        const cJSON *a = pp->child, *b = tg->child;
        for (; a && b; a = a->next, b = b->next) CHECKF(!strcmp(a->string, b->string), "%s vs %s", a->string, b->string);
        CHECK(!a && !b);
        check_common_text(pp, text, model, 2);
        check_common_text(tg, text, model, 2);
        CHECK(!get(tg, "sparse_neurons_frac") && !get(tg, "mem_budget")); /* dense, in memory */
    }
    cJSON_Delete(doc);
    free(text);
}

/* bench -o json on a model with predictors: the sparse FFN's figures. */
static void bench_json_sparse(const char *model) {
    CHECK(pinfer("bench -m %s -p 0 -n 8 -r 2 -t 2 -o json", model) == 0);
    cJSON *doc = parse_file(g_out);
    char *text = t_read_file(g_err, NULL);
    CHECK(cJSON_GetArraySize(doc) == 1);
    const cJSON *r = cJSON_GetArrayItem(doc, 0);
    if (r) {
        check_record_types(r, 2);
        check_common_text(r, text, model, 2);
        CHECK(str(r, "ffn") && !strcmp(str(r, "ffn"), "sparse") && cJSON_IsTrue(get(r, "has_predictor")));
        const cJSON *neur = get(r, "sparse_layer_neurons"), *act = get(r, "sparse_layer_active"),
                    *rec = get(r, "sparse_layer_recall"), *mb = get(r, "sparse_layer_mb");
        CHECK(cJSON_GetArraySize(neur) == 2 && cJSON_GetArraySize(act) == 2 && cJSON_GetArraySize(rec) == 2 &&
              cJSON_GetArraySize(mb) == 2);
        const double F = num(r, "n_ff");
        for (int il = 0; il < 2 && cJSON_GetArraySize(mb) == 2; il++) {
            double c = cJSON_GetArrayItem(neur, il)->valuedouble, x = cJSON_GetArrayItem(act, il)->valuedouble;
            CHECK(has(text, "%-6d %8.0f (%.3f) %8.0f (%.3f) %8.0f (%.3f) %8.4f %11.2f\n", il, c, c / F, c, c / F, x,
                      x / F, cJSON_GetArrayItem(rec, il)->valuedouble, cJSON_GetArrayItem(mb, il)->valuedouble));
        }
        CHECK(num(r, "sparse_recall") > 0.0 && num(r, "sparse_recall") <= 1.0);
        CHECK(has(text, "all layers: %.3f of FFN neurons computed, %.3f active, predictor recall %.4f vs the oracle\n",
                  num(r, "sparse_neurons_frac"), num(r, "sparse_active_frac"), num(r, "sparse_recall")));
        CHECK(has(text, "weights touched per token: %.1f MB (FFN %.1f of %.1f MB dense) -> bound %.1f tok/s; "
                        "tg reaches %.0f%%\n",
                  num(r, "sparse_mb_per_token"), num(r, "sparse_ffn_mb_per_token"), num(r, "ffn_dense_mb"),
                  num(r, "sparse_bound_ts"), num(r, "sparse_of_bound_pct")));
    }
    cJSON_Delete(doc);
    free(text);
    /* --vs-dense: each round also decodes with the dense FFN in a second
       session; the record's ratio is the median of the rounds' ratios */
    CHECK(pinfer("bench -m %s -p 0 -n 8 -r 1 -t 2 --rounds 3 --vs-dense -o json", model) == 0);
    doc = parse_file(g_out);
    text = t_read_file(g_err, NULL);
    r = cJSON_GetArrayItem(doc, 0);
    if (r && text) {
        double ratio[3] = {0};
        int n = 0;
        for (const char *q = text; n < 3 && (q = strstr(q, "| sparse/dense ")); q++) ratio[n++] = atof(q + 15);
        CHECK(n == 3);
        double lo = fmin(ratio[0], fmin(ratio[1], ratio[2])), hi = fmax(ratio[0], fmax(ratio[1], ratio[2]));
        const double med = ratio[0] + ratio[1] + ratio[2] - lo - hi;
        CHECKF(num(r, "dense_ts") > 0.0 && fabs(num(r, "sparse_over_dense") - med) < 0.006,
               "sparse_over_dense %g, rounds' median %g", num(r, "sparse_over_dense"), med);
        CHECK(has(text, "sparse/dense = %.2f (median of 3 rounds)", num(r, "sparse_over_dense")));
        /* the sessions in step: each round's ratio is its two speeds' quotient,
           and the record's is their median */
        double step[3] = {0};
        int m = 0;
        for (const char *q = text; m < 3 && (q = strstr(q, "| in step ")); q++) {
            double st = 0.0, dt = 0.0, rt = 0.0;
            CHECK(sscanf(q, "| in step %lf / %lf = %lf", &st, &dt, &rt) == 3 && st > 0.0 && dt > 0.0);
            CHECKF(fabs(rt - st / dt) < 0.006 * rt + 0.006, "in step %g / %g printed as %g", st, dt, rt);
            step[m++] = rt;
        }
        CHECK(m == 3);
        const double slo = fmin(step[0], fmin(step[1], step[2])), shi = fmax(step[0], fmax(step[1], step[2]));
        CHECKF(fabs(num(r, "sparse_over_dense_in_step") - (step[0] + step[1] + step[2] - slo - shi)) < 0.006,
               "sparse_over_dense_in_step %g", num(r, "sparse_over_dense_in_step"));
        CHECK(has(text, "one token of each in turn: sparse/dense = %.2f (median of 3 rounds)",
                  num(r, "sparse_over_dense_in_step")));
        CHECK(str(r, "ffn") && !strcmp(str(r, "ffn"), "sparse"));
    }
    cJSON_Delete(doc);
    free(text);
    CHECK(pinfer("bench -m %s -p 0 -n 8 --vs-dense --dense", model) == 1 && t_file_has(g_err, "decodes densely"));
    CHECK(pinfer("bench -m %s -p 0 -n 0 --vs-dense", model) == 2 && t_file_has(g_err, "--vs-dense"));
    CHECK(pinfer("bench -m %s -n 8 --vs-dense --mem-budget 1G", model) == 2 && t_file_has(g_err, "--vs-dense"));
}

/* bench --greedy decodes the model's own greedy continuation of token 1:
   the tokens it lists are those of a session of the same model here (the
   argmax of each token's logits, ties to the lower id); llama-bench's
   sequence does not list tokens; --greedy with --sweep is refused. */
static void bench_greedy(const char *model) {
    CHECK(pinfer("bench -m %s -p 0 -n 8 -r 1 -t 2 --greedy", model) == 0);
    char *text = t_read_file(g_out, NULL);
    const char *tag = "tg tokens: the model's greedy continuation of token 1 (";
    const char *q = text ? strstr(text, tag) : NULL;
    CHECK(q != NULL);
    pi_model *m = NULL;
    pi_session *s = NULL;
    pi_session_params sp = pi_session_default_params();
    sp.n_threads = 2;
    CHECK(pi_model_open(model, NULL, &m) == PI_OK && pi_session_create(m, &sp, &s) == PI_OK);
    if (q && s) {
        q = strstr(q, "):");
        if (q) q++;
        const int64_t V = pi_model_n_vocab(m);
        int32_t tok = 1;
        int same = 0;
        for (int i = 0; i < 8 && q; i++) {
            char *end;
            const long listed = strtol(q + 1, &end, 10);
            same += listed == tok;
            q = end;
            CHECK(pi_session_decode(s, tok) == PI_OK);
            const float *lg = pi_session_logits(s);
            int32_t best = 0;
            for (int64_t v = 1; v < V; v++)
                if (lg[v] > lg[best]) best = (int32_t)v;
            tok = best;
        }
        CHECKF(same == 8, "%d of the 8 listed tokens are the greedy continuation", same);
    }
    pi_session_free(s);
    pi_model_close(m);
    free(text);
    CHECK(pinfer("bench -m %s -p 0 -n 8 -r 1 -t 2", model) == 0 && !t_file_has(g_out, "tg tokens:"));
    CHECK(pinfer("bench -m %s -n 8 --greedy --sweep 1", model) == 2 && t_file_has(g_err, "--greedy"));
}

/* The offload figures of a tg record against app_print_offload's lines. */
static void check_offload(const cJSON *r, const char *text) {
    static const char *const k_num[] = {
        "mem_budget", "mem_used", "mem_fixed", "mem_kv", "mem_scratch", "mem_io", "mem_hot", "mem_cache",
        "hot_min", "hot_max", "cache_slots", "cache_slot_bytes", "decode_tokens", "neurons_per_token",
        "resident_per_token", "cache_hits_per_token", "cache_misses_per_token", "cache_hit_pct", "hit_pct",
        "reads_per_token", "merged_reads_per_token", "mb_read_per_token", "io_busy_ms", "io_hidden_ms",
        "io_hidden_pct", "io_wait_ms", "ffn_ms", "split_steps"};
    for (size_t k = 0; k < sizeof k_num / sizeof k_num[0]; k++) CHECKF(is_num(r, k_num[k]), "offload field %s", k_num[k]);
    CHECK(str(r, "io_backend") && cJSON_IsBool(get(r, "planned")));
    CHECK(num(r, "mem_used") <= num(r, "mem_budget"));
    const double M = 1 << 20;
    CHECK(has(text, "memory budget %.1f MiB, used %.1f: fixed %.1f, KV %.1f, scratch %.1f, I/O %.1f, hot %.1f "
                    "(%.0f-%.0f of %.0f neurons per layer), neuron cache %.1f (%.0f slots of %.0f bytes); I/O: %s\n",
              num(r, "mem_budget") / M, num(r, "mem_used") / M, num(r, "mem_fixed") / M, num(r, "mem_kv") / M,
              num(r, "mem_scratch") / M, num(r, "mem_io") / M, num(r, "mem_hot") / M, num(r, "hot_min"),
              num(r, "hot_max"), num(r, "n_ff"), num(r, "mem_cache") / M, num(r, "cache_slots"),
              num(r, "cache_slot_bytes"), str(r, "io_backend") ? str(r, "io_backend") : "?"));
    CHECK(has(text, "per token (%.0f decoded): neurons %.0f = %.0f resident + %.0f cache hits + %.0f misses "
                    "(hit rate: cache %.1f%%, overall %.1f%%); reads %.0f (%.0f merged), %.2f MB read; "
                    "reads in flight %.2f ms, of which %.2f ms (%.0f%%) hidden behind compute, I/O wait %.2f ms; "
                    "FFN %.2f ms%s\n",
              num(r, "decode_tokens"), num(r, "neurons_per_token"), num(r, "resident_per_token"),
              num(r, "cache_hits_per_token"), num(r, "cache_misses_per_token"), num(r, "cache_hit_pct"),
              num(r, "hit_pct"), num(r, "reads_per_token"), num(r, "merged_reads_per_token"),
              num(r, "mb_read_per_token"), num(r, "io_busy_ms"), num(r, "io_hidden_ms"), num(r, "io_hidden_pct"),
              num(r, "io_wait_ms"), num(r, "ffn_ms"),
              num(r, "split_steps") > 0 ? " (cache too small for one pass: split steps)" : ""));
    /* the cores' time, where /proc/stat is readable: its parts add up, the
       floor is it over the cores, and the line says the same figures */
    if (!is_num(r, "cores_floor_ms")) return;
    static const char *const k_cpu[] = {"n_cores", "cpu_ms", "cpu_self_user_ms", "cpu_self_sys_ms", "cpu_other_ms",
                                        "cpu_steal_ms", "cpu_idle_ms", "cores_ratio", "token_ms"};
    for (size_t k = 0; k < sizeof k_cpu / sizeof k_cpu[0]; k++) CHECKF(is_num(r, k_cpu[k]), "cores field %s", k_cpu[k]);
    const double cpu = num(r, "cpu_ms"), parts = num(r, "cpu_self_user_ms") + num(r, "cpu_self_sys_ms") +
                                                 num(r, "cpu_other_ms") + num(r, "cpu_steal_ms");
    CHECK(num(r, "n_cores") >= 1 && cpu > 0.0 && num(r, "cpu_other_ms") >= 0.0 && num(r, "cpu_idle_ms") >= 0.0);
    CHECKF(cpu <= parts * 1.0001 + 1e-9 && (num(r, "cpu_other_ms") == 0.0 || fabs(cpu - parts) <= 1e-6 * cpu),
           "cpu_ms %g against its parts %g", cpu, parts);
    CHECK(fabs(num(r, "cores_floor_ms") * num(r, "n_cores") - cpu) <= 1e-6 * cpu);
    CHECK(fabs(num(r, "cores_ratio") * num(r, "cores_floor_ms") - num(r, "token_ms")) <= 1e-6 * num(r, "token_ms"));
    if (num(r, "reads_per_token") > 0.0)
        CHECK(has(text, "cores: %.2f ms of CPU time per token on %.0f cores (pinfer %.2f in user mode and %.2f in "
                        "the kernel, interrupts and other processes %.2f, taken by the host %.2f), idle %.2f; never "
                        "idle: %.2f ms per token (%.2f tok/s); measured %.2f ms, %.2fx",
                  cpu, num(r, "n_cores"), num(r, "cpu_self_user_ms"), num(r, "cpu_self_sys_ms"),
                  num(r, "cpu_other_ms"), num(r, "cpu_steal_ms"), num(r, "cpu_idle_ms"), num(r, "cores_floor_ms"),
                  1e3 / num(r, "cores_floor_ms"), num(r, "token_ms"), num(r, "cores_ratio")));
}

/* inspect --json against inspect's text on the same file. */
static void inspect_json(const char *model, bool bundle) {
    CHECK(pinfer("inspect %s", model) == 0);
    char *text = t_read_file(g_out, NULL);
    CHECK(pinfer("inspect %s --json", model) == 0);
    cJSON *doc = parse_file(g_out);
    const cJSON *tensors = get(doc, "tensors"), *meta = get(doc, "metadata"), *sum = get(doc, "summary"),
                *tot = get(doc, "totals");
    CHECK(cJSON_IsObject(doc) && cJSON_IsArray(tensors) && cJSON_IsObject(meta) && cJSON_IsObject(sum) &&
          cJSON_IsObject(tot));
    const int nt = cJSON_GetArraySize(tensors);
    CHECK(nt > 0 && nt == num(doc, "n_tensors") && cJSON_GetArraySize(meta) == num(doc, "n_kv"));
    CHECK(has(text, "version:     %.0f\n", num(doc, "version")));
    CHECK(has(text, "alignment:   %.0f\n", num(doc, "alignment")));
    CHECK(has(text, "data offset: %.0f\n", num(doc, "data_offset")));
    CHECK(has(text, "tensors:     %d\n", nt));
    CHECK(has(text, "  parameters: %.0f\n", num(tot, "parameters")));
    /* every tensor: its text row has the same name, type, offset and bytes */
    int rows_ok = 0;
    for (const cJSON *t = tensors ? tensors->child : NULL; t; t = t->next) {
        const char *name = str(t, "name"), *type = str(t, "type");
        char want[256];
        snprintf(want, sizeof want, "  %s  ", name ? name : "?");
        const char *line = text ? strstr(text, want) : NULL;
        char nb[128], tb[32];
        unsigned long long off = 0, bytes = 0;
        const char *eol = line ? strchr(line, '\n') : NULL;
        const char *last = NULL;
        for (const char *p = line; p && p < eol; p++)
            if (*p == ' ' && p[1] != ' ') last = p; /* the last two numbers: offset, bytes */
        const char *prev = NULL;
        for (const char *p = line; p && last && p < last; p++)
            if (*p == ' ' && p[1] != ' ') prev = p;
        if (line && prev && sscanf(line, " %127s %31s", nb, tb) == 2 && sscanf(prev, " %llu %llu", &off, &bytes) == 2 &&
            type && !strcmp(nb, name) && !strcmp(tb, type) && (double)off == num(t, "offset") &&
            (double)bytes == num(t, "bytes") && cJSON_GetArraySize(get(t, "shape")) >= 1)
            rows_ok++;
        else
            fprintf(stderr, "  tensor %s: no matching row in the text\n", name ? name : "?");
    }
    CHECK(rows_ok == nt);
    /* metadata: scalars as the text shows them; the tokenizer's arrays as type and length */
    const cJSON *arch = get(meta, "general.architecture"), *tokens = get(meta, "tokenizer.ggml.tokens");
    CHECK(arch && str(arch, "type") && !strcmp(str(arch, "type"), "str") && str(arch, "value"));
    CHECK(str(sum, "architecture") && str(arch, "value") && !strcmp(str(sum, "architecture"), str(arch, "value")));
    char key[128];
    snprintf(key, sizeof key, "%s.block_count", str(sum, "architecture") ? str(sum, "architecture") : "?");
    const cJSON *blocks = get(meta, key);
    CHECK(is_num(blocks, "value") && num(blocks, "value") == num(sum, "n_layer"));
    CHECK(has(text, "%s", key) && has(text, " = %.0f\n", num(blocks, "value")));
    CHECK(has(text, "  layers:       %.0f (", num(sum, "n_layer")));
    CHECK(tokens && num(tokens, "length") > 0 && !get(tokens, "value") && str(tokens, "element_type"));
    if (bundle) {
        CHECK(num(sum, "bundle_layers") == num(sum, "n_layer") && num(sum, "predictor_layers") == num(sum, "n_layer"));
        CHECK(cJSON_IsTrue(get(sum, "reordered")) && is_num(sum, "bundle_stride"));
        CHECK(has(text, "  bundles:      %.0f of %.0f layers, stride %.0f bytes\n", num(sum, "bundle_layers"),
                  num(sum, "n_layer"), num(sum, "bundle_stride")));
        CHECK(has(text, "  predictors:   %.0f of %.0f layers\n", num(sum, "predictor_layers"), num(sum, "n_layer")));
    }
    cJSON_Delete(doc);
    /* --all: the tokenizer's arrays whole */
    CHECK(pinfer("inspect %s --json --all", model) == 0);
    doc = parse_file(g_out);
    tokens = get(get(doc, "metadata"), "tokenizer.ggml.tokens");
    CHECK(tokens && cJSON_GetArraySize(get(tokens, "value")) == num(tokens, "length"));
    cJSON_Delete(doc);
    free(text);
}
#endif

/* bench -o csv|md|jsonl|text on the bundle file under a budget (a small
   bandwidth probe: fast). */
static void bench_tables(const char *bundle, const char *budget) {
    /* csv: a header, one row per record, every row as wide as the header */
    CHECK(pinfer("bench -m %s -p 4 -n 8 -r 2 -t 2 --mem-budget %s --no-plan -o csv", bundle, budget) == 0);
    csv_doc d;
    char *text = t_read_file(g_err, NULL);
    CHECK(csv_read(&d, g_out) && d.n_rows == 2);
    CHECK(d.n_hdr > 30 && d.width[0] == d.n_hdr && d.width[1] == d.n_hdr);
    CHECK(!strcmp(d.hdr[0], "build_commit"));
    if (d.n_rows == 2 && d.width[1] == d.n_hdr) {
        CHECK(csv_is(&d, 0, "test", "pp4") && csv_is(&d, 1, "test", "tg8"));
        CHECK(csv_is(&d, 0, "n_prompt", "4") && csv_is(&d, 1, "n_gen", "8"));
        CHECK(atof(csv_get(&d, 0, "avg_ts")) > 0.0);
        /* arrays: JSON only, as in llama-bench's CSV */
        for (int j = 0; j < d.n_hdr; j++) CHECK(strcmp(d.hdr[j], "samples_ns") && strcmp(d.hdr[j], "samples_ts"));
        /* the figures of the report on stderr */
        CHECK(has(text, "pp%-6d %7d %12.2f", 4, 2, strtod(csv_get(&d, 0, "median_ts"), NULL)));
        CHECK(has(text, "tg%-6d %7d %12.2f %11.0f%%", 8, 2, strtod(csv_get(&d, 1, "median_ts"), NULL),
                  strtod(csv_get(&d, 1, "of_bound_pct"), NULL)));
        CHECK(has(text, "memory budget %.1f MiB, used %.1f:", strtod(csv_get(&d, 1, "mem_budget"), NULL) / (1 << 20),
                  strtod(csv_get(&d, 1, "mem_used"), NULL) / (1 << 20)));
        /* the two timed repetitions' tokens, not the warm-up's; pp: empty */
        CHECK(csv_is(&d, 1, "decode_tokens", "16") && csv_is(&d, 0, "decode_tokens", ""));
        CHECK(csv_is(&d, 0, "use_mmap", "0") && csv_is(&d, 0, "ffn", "sparse"));
    }
    free(d.buf);
    free(text);
    /* md: a table, one row per record */
    CHECK(pinfer("bench -m %s -p 4 -n 8 -r 1 -t 2 --mem-budget %s --no-plan -o md", bundle, budget) == 0);
    text = t_read_file(g_out, NULL);
    CHECK(text && md_rows(text) == 2 && strstr(text, "| pp4 ") && strstr(text, "| tg8 ") && strstr(text, " t/s "));
    free(text);
#ifdef PI_HAVE_CJSON
    /* jsonl: one object per line */
    CHECK(pinfer("bench -m %s -p 4 -n 8 -r 1 -t 2 --mem-budget %s --no-plan -o jsonl", bundle, budget) == 0);
    text = t_read_file(g_out, NULL);
    int lines = 0;
    for (char *save = NULL, *l = text ? strtok_r(text, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *o = cJSON_Parse(l);
        CHECK(cJSON_IsObject(o) && str(o, "test") && cJSON_GetArraySize(get(o, "samples_ns")) == 1);
        cJSON_Delete(o);
        lines++;
    }
    CHECK(lines == 2);
    free(text);
#endif
    /* text, the default: the report on stdout, as before */
    CHECK(pinfer("bench -m %s -p 4 -n 8 -r 1 -t 2 --mem-budget %s --no-plan -o text", bundle, budget) == 0);
    text = t_read_file(g_out, NULL);
    CHECK(text && !strncmp(text, "model: ", 7) && strstr(text, "\ntg8 ") && strstr(text, "per token (") &&
          !strchr(text, '{'));
    free(text);
}

#ifdef PI_HAVE_CJSON
/* bench -o json under --mem-budget: the offload figures; then planned (a
   plan from a made-up hardware file): the planner's prediction too. */
static void bench_json_offload(const char *bundle, const char *budget, const char *plan) {
    CHECK(pinfer("bench -m %s -p 4 -n 8 -r 2 -t 2 --mem-budget %s --no-plan -o json", bundle, budget) == 0);
    cJSON *doc = parse_file(g_out);
    char *text = t_read_file(g_err, NULL);
    CHECK(cJSON_GetArraySize(doc) == 2);
    const cJSON *pp = cJSON_GetArrayItem(doc, 0), *tg = cJSON_GetArrayItem(doc, 1);
    if (pp && tg) {
        check_record_types(tg, 2);
        check_common_text(pp, text, bundle, 2);
        check_common_text(tg, text, bundle, 2);
        check_offload(tg, text);
        CHECK(num(tg, "decode_tokens") == 8 * 2); /* the two timed repetitions, after the warm-up */
        CHECK(cJSON_IsFalse(get(tg, "planned")) && cJSON_IsNull(get(pp, "decode_tokens")));
        CHECK(is_num(pp, "mem_budget") && num(pp, "mem_budget") == num(tg, "mem_budget"));
    }
    cJSON_Delete(doc);
    free(text);
    if (!plan) return;
    CHECK(pinfer("bench -m %s --plan %s -p 0 -n 8 -r 1 -t 2 -o json", bundle, plan) == 0);
    doc = parse_file(g_out);
    text = t_read_file(g_err, NULL);
    const cJSON *r = cJSON_GetArrayItem(doc, 0);
    CHECK(r && cJSON_IsTrue(get(r, "planned")) && is_num(r, "plan_ts") && is_num(r, "plan_threads"));
    if (r) {
        check_offload(r, text);
        CHECK(has(text, "bench: plan: predicted %.2f tok/s; %.0f threads, queue depth %.0f, neuron cache %.1f MiB\n",
                  num(r, "plan_ts"), num(r, "plan_threads"), num(r, "plan_queue_depth"),
                  num(r, "plan_cache_bytes") / (1 << 20)));
        /* the run is the plan's: its context's KV cache, so the neuron cache
           the plan chose (a context of n + 1 handed the rest to the cache) */
        CHECKF(fabs(num(r, "mem_cache") - num(r, "plan_cache_bytes")) <= 2.0 * num(r, "cache_slot_bytes"),
               "neuron cache %.0f bytes, the plan's %.0f", num(r, "mem_cache"), num(r, "plan_cache_bytes"));
    }
    cJSON_Delete(doc);
    free(text);
}
#endif

#ifdef PI_HAVE_CJSON
/* --peer: a stand-in for llama-bench that prints its CSV; the records carry
   the peer's figures and the ratios the report shows. */
static void bench_json_peer(const char *bundle, const char *budget) {
    char peer[320];
    snprintf(peer, sizeof peer, "%s.peer.sh", g_tmp);
    FILE *f = fopen(peer, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("#!/bin/sh\necho 'build_commit,n_prompt,n_gen,avg_ts'\necho '\"x\",\"4\",\"0\",\"100.5\"'\n"
          "echo '\"x\",\"0\",\"8\",\"50.25\"'\n", f);
    fclose(f);
    CHECK(chmod(peer, 0755) == 0);
    CHECK(pinfer("bench -m %s -p 4 -n 8 -r 1 -t 2 --mem-budget %s --no-plan --peer %s -o json", bundle, budget, peer) == 0);
    cJSON *doc = parse_file(g_out);
    char *text = t_read_file(g_err, NULL);
    const cJSON *pp = cJSON_GetArrayItem(doc, 0), *tg = cJSON_GetArrayItem(doc, 1);
    CHECK(pp && tg && num(pp, "peer_ts") == 100.5 && num(tg, "peer_ts") == 50.25);
    if (pp && tg) {
        CHECK(fabs(num(pp, "pinfer_over_peer") - num(pp, "median_ts") / 100.5) <= 1e-12 * num(pp, "pinfer_over_peer"));
        CHECK(has(text, "pp%-6d %7d %12.2f   pinfer/peer = %.2f\n", 4, 2, num(pp, "peer_ts"), num(pp, "pinfer_over_peer")));
        CHECK(has(text, "tg%-6d %7d %12.2f %11.0f%%   pinfer/peer = %.2f\n", 8, 2, num(tg, "peer_ts"),
                  100.0 * num(tg, "peer_ts") / num(tg, "bound_ts"), num(tg, "pinfer_over_peer")));
    }
    cJSON_Delete(doc);
    free(text);
    unlink(peer);
}
#endif

int main(void) {
    if (!t_pinfer_binary(&g_pinfer, &g_runner)) return PI_TEST_SKIP;
    t_tmp_path(g_tmp, sizeof g_tmp, "mo");
    snprintf(g_out, sizeof g_out, "%s.out", g_tmp);
    snprintf(g_err, sizeof g_err, "%s.err", g_tmp);
    char gen[320], stats[320], bundle[320], plan[320], hwf[320], budget[64];
    snprintf(gen, sizeof gen, "%s.gguf", g_tmp);
    snprintf(stats, sizeof stats, "%s.stats", g_tmp);
    snprintf(bundle, sizeof bundle, "%s.bundle", g_tmp);
    snprintf(plan, sizeof plan, "%s.plan", g_tmp);
    snprintf(hwf, sizeof hwf, "%s.hw", g_tmp);

    /* -o takes text, json, jsonl, csv or md; anything else is a usage error */
    CHECK(pinfer("bench -m /nonexistent.gguf -o xml") == 2 && t_file_has(g_err, "-o expects"));
    CHECK(pinfer("bench -m /nonexistent.gguf -o") == 2);
    CHECK(pinfer("bench -m /nonexistent.gguf --output=yaml") == 2 && t_file_has(g_err, "yaml"));
    CHECK(pinfer("bench -m /nonexistent.gguf --sweep 1 -n 4 -o csv") == 2 && t_file_has(g_err, "--sweep"));
#ifndef PI_HAVE_CJSON
    fprintf(stderr, "skip: built without cJSON: JSON output is refused and not parsed here\n");
    CHECK(pinfer("bench -m /nonexistent.gguf -o json") == 2 && t_file_has(g_err, "cJSON"));
    CHECK(pinfer("inspect /nonexistent.gguf --json") == 2 && t_file_has(g_err, "cJSON"));
#endif

#ifdef PI_HAVE_CJSON
    char model[512];
    if (t_fixture(model, sizeof model, "stories260K.gguf")) {
        bench_json_dense(model);
        inspect_json(model, false);
        /* a file that is cut short: exit 1 and nothing on stdout */
        char cut[1024];
        snprintf(cut, sizeof cut, "head -c 20000 %s > %s.trunc", model, g_tmp);
        CHECK(t_sh(cut) == 0);
        CHECK(pinfer("inspect %s.trunc --json", g_tmp) == 1);
        size_t n = 1;
        free(t_read_file(g_out, &n));
        CHECK(n == 0);
        snprintf(cut, sizeof cut, "%s.trunc", g_tmp);
        unlink(cut);
    }
#endif

    /* a model with predictors, and its bundle file */
    CHECK(pinfer("gen-model -o %s --preset tiny --layers 2 --dim 256 --ffn 768 --n-head 4 --n-head-kv 2 "
                 "--vocab-size 300 --type q4_0 --act relu --active 0.15 --predictor --pred-rank 64", gen) == 0);
    CHECK(pinfer("profile -m %s --tokens 32 --seed 1 -t 2 -o %s", gen, stats) == 0);
    CHECK(pinfer("convert -m %s --reorder %s --bundle -o %s", gen, stats, bundle) == 0);
#ifdef PI_HAVE_CJSON
    bench_json_sparse(gen);
    bench_greedy(gen);
    inspect_json(bundle, true);
#endif
    /* the smallest budget it runs in, from the message of one too small */
    CHECK(pinfer("bench -m %s -p 0 -n 8 --mem-budget 1M --no-plan", bundle) == 1 && t_file_has(g_err, "minimum of"));
    char *e = t_read_file(g_err, NULL), *mp = e ? strstr(e, "minimum of ") : NULL;
    double min_mib = mp ? atof(mp + strlen("minimum of ")) : 0.0;
    free(e);
    CHECK(min_mib > 0.0);
    /* a little above it: some neurons come from flash */
    snprintf(budget, sizeof budget, "%.0fK", (min_mib + 0.25) * 1024);
    if (min_mib > 0.0) {
        bench_tables(bundle, budget);
        bool planned = t_write_hw(hwf);
        CHECK(planned);
        /* for a longer context than bench's n + 1: the plan's KV cache holds */
        if (planned) planned = pinfer("plan -m %s -c 64 --mem-budget %s --hw %s -o %s", bundle, budget, hwf, plan) == 0;
        CHECK(planned);
#ifdef PI_HAVE_CJSON
        bench_json_offload(bundle, budget, planned ? plan : NULL);
        bench_json_peer(bundle, budget);
#endif
    }
    unlink(plan);
    unlink(hwf);
    unlink(stats);
    unlink(bundle);
    unlink(gen);
    unlink(g_out);
    unlink(g_err);
    return t_done("test_machine_output");
}
