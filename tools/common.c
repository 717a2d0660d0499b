/*
 * common.c — shared plumbing of run, chat, perplexity and bench, on the
 * public API only.
 */
#include "common.h"

#include "args.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void app_opts_init(app_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = 128;
    o->mp = pi_model_default_params();
    o->sp = pi_sampler_default_params();
}

void app_usage_common(FILE *f) {
    fprintf(f,
            "  -m, --model FILE     model (GGUF)\n"
            "  -t, --threads N      threads (default: all cores)\n"
            "  -c, --ctx-size N     context size (default: the model's, at most 4096)\n"
            "  --dense              compute every FFN neuron (default: sparse when the model has predictors)\n"
            "  --predictor P        model (the file's predictors) or oracle (exact mask, for testing)\n"
            "  --hot N              neurons of each layer's hot prefix computed densely (default 0)\n"
            "  --mem-budget SIZE    keep at most SIZE bytes resident (e.g. 600M, 2G): the FFN is read from\n"
            "                       flash (a bundle file: pinfer convert --bundle)\n"
            "  --plan FILE          use a plan from pinfer plan (budget, hot neurons per layer, cache, threads,\n"
            "                       queue depth); without it --mem-budget plans on the fly\n"
            "  --no-plan            with --mem-budget: a uniform split instead of the planner's\n"
            "  --in-memory          with --plan: the whole model in memory, with the plan's predictor\n"
            "                       thresholds only (the in-memory run the planned one equals)\n"
            "  --io B               uring (default where the kernel allows it) or pread\n"
            "  --qd N               reads in flight at most (default: the plan's, else 256)\n"
            "  --cache SIZE         of the budget, the neuron cache's share (default: room for 15%% of a layer's\n"
            "                       neurons); the rest keeps each layer's hottest neurons resident\n"
            "  --cache-policy P     the neuron cache's replacement: slru (auto: the measured default), lru, lfu\n"
            "  --no-lookahead       with --mem-budget: no reads for the next layer while a layer computes\n"
            "  --recall R           predictor thresholds per layer for recall R in (0, 1], from the file's logit\n"
            "                       histograms (default: the file's thresholds; under --mem-budget the planner\n"
            "                       picks R in [0.95, 0.99], the highest within 3%% of the fastest)\n"
            "  --mmap               map the model file instead of loading it into memory\n"
            "                       (starts faster and shares the page cache; decodes ~15%% slower)\n"
            "  --temp T             temperature (default 0.8; 0 = greedy)\n"
            "  --top-k N            (default 40; 0 = off)\n"
            "  --top-p P            (default 0.95; 1 = off)\n"
            "  --min-p P            (default 0.05; 0 = off)\n"
            "  --repeat-penalty R   (default 1 = off)   --repeat-last-n N (default 64)\n"
            "  -s, --seed N         sampling seed (default: random, printed)\n"
            "  every option also takes the form --option=value\n");
}

/* A float option's value in [lo, hi] (and above 0 for --top-p). */
static bool float_value(const char *cmd, const char *a, const char *v, float *out) {
    const bool top_p = !strcmp(a, "--top-p"), penalty = !strcmp(a, "--repeat-penalty");
    const float lo = penalty ? 1e-3f : 0.0f, hi = !strcmp(a, "--temp") || penalty ? 100.0f : 1.0f;
    char *end;
    float f = strtof(v, &end);
    if (end == v || *end || !(f >= lo && f <= hi) || (top_p && f <= 0.0f)) {
        fprintf(stderr, "pinfer: %s: %s expects a number in [%g, %g]%s, got '%s'\n", cmd, a, lo, hi,
                top_p ? " above 0" : "", v);
        return false;
    }
    *out = f;
    return true;
}

int app_parse_common(const char *cmd, app_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *v;
    pi_model_params *mp = &o->mp;
    long n;
    if (!strcmp(a, "--ignore-eos")) return o->ignore_eos = true, 1;
    if (!strcmp(a, "--mmap")) return mp->use_mmap = true, 1;
    if (!strcmp(a, "--dense")) return mp->ffn = PI_FFN_DENSE, o->dense_given = true, 1;
    if (!strcmp(a, "--no-plan")) return mp->no_plan = true, 1;
    if (!strcmp(a, "--in-memory")) return mp->plan_in_memory = true, 1;
    if (!strcmp(a, "--no-lookahead")) return mp->no_lookahead = true, 1;
    static const char *with_value[] = {"-m", "-t", "-c", "--temp", "--top-k", "--top-p", "--min-p",
                                       "--repeat-penalty", "--repeat-last-n", "--seed", "-p", "-f", "-n",
                                       "--predictor", "--hot", "--mem-budget", "--io", "--qd", "--cache", "--plan",
                                       "--cache-policy", "--recall"};
    bool known = false;
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++) known |= !strcmp(a, with_value[k]);
    if (!known) return 0;
    if (!(v = arg_value(cmd, argc, argv, i))) return -1;
    if (!strcmp(a, "-m")) o->model = v;
    else if (!strcmp(a, "-p")) o->prompt = v;
    else if (!strcmp(a, "-f")) o->prompt_file = v;
    else if (!strcmp(a, "--plan")) mp->plan_path = v;
    else if (!strcmp(a, "-n")) { if (!arg_int(cmd, a, v, -1, 1 << 24, &o->n_predict)) return -1; }
    else if (!strcmp(a, "-t")) { if (!arg_int(cmd, a, v, 1, 1024, &n)) return -1; mp->n_threads = (int)n; }
    else if (!strcmp(a, "-c")) { if (!arg_int(cmd, a, v, 1, 1 << 24, &n)) return -1; mp->n_ctx = n; o->ctx_given = true; }
    else if (!strcmp(a, "--hot")) { if (!arg_int(cmd, a, v, 0, 1 << 24, &n)) return -1; mp->hot = n; }
    else if (!strcmp(a, "--qd")) { if (!arg_int(cmd, a, v, 1, 4096, &n)) return -1; mp->queue_depth = (int)n; }
    else if (!strcmp(a, "--mem-budget")) {
        if (!arg_size(cmd, a, v, &mp->mem_budget)) return -1;
        o->budget_arg = v;
        if (!mp->mem_budget) {
            fprintf(stderr, "pinfer: %s: --mem-budget expects a size such as 600M or 2G, got '%s'\n", cmd, v);
            return -1;
        }
    }
    else if (!strcmp(a, "--recall")) {
        double r;
        if (!arg_share(cmd, a, v, &r)) return -1;
        mp->recall = (float)r;
    }
    else if (!strcmp(a, "--cache")) { if (!arg_size(cmd, a, v, &mp->cache_bytes)) return -1; o->cache_arg = v; }
    else if (!strcmp(a, "--cache-policy")) {
        static const char *const names[] = {"auto", "lru", "slru", "lfu"};
        int k = 0;
        while (k < 4 && strcmp(v, names[k])) k++;
        if (k == 4) {
            fprintf(stderr, "pinfer: %s: --cache-policy is auto, lru, slru or lfu, got '%s'\n", cmd, v);
            return -1;
        }
        mp->cache_policy = (pi_cache_policy)k;
    }
    else if (!strcmp(a, "--io")) {
        if (!strcmp(v, "uring")) mp->io = PI_IO_URING;
        else if (!strcmp(v, "pread")) mp->io = PI_IO_PREAD;
        else {
            fprintf(stderr, "pinfer: %s: --io is 'uring' or 'pread', got '%s'\n", cmd, v);
            return -1;
        }
    }
    else if (!strcmp(a, "--predictor")) {
        if (strcmp(v, "oracle") && strcmp(v, "model")) {
            fprintf(stderr, "pinfer: %s: --predictor is 'model' (the file's predictors) or 'oracle' (exact mask)\n", cmd);
            return -1;
        }
        mp->ffn = !strcmp(v, "oracle") ? PI_FFN_ORACLE : PI_FFN_SPARSE;
        o->predictor_given = true;
    }
    else if (!strcmp(a, "--top-k")) { if (!arg_int(cmd, a, v, 0, 1 << 24, &n)) return -1; o->sp.top_k = (int32_t)n; }
    else if (!strcmp(a, "--repeat-last-n")) { if (!arg_int(cmd, a, v, 0, 1 << 20, &n)) return -1; o->sp.repeat_last_n = (int32_t)n; }
    else if (!strcmp(a, "--seed")) { if (!arg_int(cmd, a, v, 0, 0x7fffffff, &n)) return -1; o->sp.seed = (uint64_t)n; o->seed_given = true; }
    else if (!strcmp(a, "--temp")) { if (!float_value(cmd, a, v, &o->sp.temp)) return -1; }
    else if (!strcmp(a, "--top-p")) { if (!float_value(cmd, a, v, &o->sp.top_p)) return -1; }
    else if (!strcmp(a, "--min-p")) { if (!float_value(cmd, a, v, &o->sp.min_p)) return -1; }
    else if (!float_value(cmd, a, v, &o->sp.repeat_penalty)) return -1;
    return 1;
}

int app_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Options that cannot go together, found once all are read. */
static bool check_conflicts(const char *cmd, const app_opts *o) {
    const pi_model_params *mp = &o->mp;
    const char *clash = NULL;
    char buf[256];
    if (mp->plan_path && mp->no_plan) clash = "--plan FILE and --no-plan contradict each other: give one";
    else if (mp->plan_in_memory && !mp->plan_path) clash = "--in-memory takes a plan's thresholds: give --plan FILE";
    else if (mp->plan_in_memory && mp->mem_budget)
        clash = "--in-memory and --mem-budget contradict each other: the plan's budget is what --in-memory drops";
    else if (o->dense_given && o->predictor_given) clash = "--dense and --predictor contradict each other: give one";
    else if (mp->cache_bytes && !mp->mem_budget && !mp->plan_path)
        clash = "--cache sizes the neuron cache of --mem-budget: give a budget too";
    else if (mp->cache_bytes && mp->mem_budget && mp->cache_bytes >= mp->mem_budget) {
        snprintf(buf, sizeof buf, "--cache %s is not below --mem-budget %s: the cache is a share of the budget",
                 o->cache_arg, o->budget_arg);
        clash = buf;
    } else if (mp->cache_bytes && mp->plan_path)
        clash = "--cache and --plan: the plan sizes the neuron cache; give one";
    else if (mp->recall > 0.0f && (mp->ffn == PI_FFN_ORACLE || mp->ffn == PI_FFN_DENSE))
        clash = "--recall sets the predictors' thresholds: it has no use with --dense or --predictor oracle";
    else if (mp->ffn == PI_FFN_ORACLE && mp->mem_budget)
        clash = "--predictor oracle computes every gate and needs the FFN in memory: drop --mem-budget";
    if (clash) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, clash);
        return false;
    }
    const int cores = app_cores();
    if (mp->n_threads > cores)
        fprintf(stderr, "%s: warning: -t %d is above the %d cores this process may use; threads will share cores "
                        "and each token waits for the slowest\n", cmd, mp->n_threads, cores);
    return true;
}

int app_parse_args(const char *cmd, int argc, char **argv, app_opts *o, const char *const *allowed, app_opt_fn fn,
                   void *ctx, void (*usage)(FILE *f)) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        int r = fn ? fn(ctx, cmd, argc, argv, &i) : 0;
        if (r == 0) {
            bool ok = !allowed;
            for (const char *const *k = allowed; k && *k; k++) ok |= !strcmp(a, *k);
            r = ok ? app_parse_common(cmd, o, argc, argv, &i) : 0;
        }
        if (r < 0) return -1;
        if (r == 0) {
            if (a[0] == '-' && a[1]) arg_unknown(cmd, a);
            else fprintf(stderr, "pinfer: %s: unexpected argument '%s'; see pinfer %s --help\n", cmd, a, cmd);
            return -1;
        }
    }
    if (!o->seed_given) o->sp.seed = app_random_seed();
    return check_conflicts(cmd, o) ? 1 : -1;
}

uint64_t app_random_seed(void) {
    uint32_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = (uint32_t)ts.tv_nsec ^ (uint32_t)ts.tv_sec * 2654435761u ^ (uint32_t)getpid() * 40503u;
    }
    return v & 0x7fffffff;
}

/* Ctrl-C: the first asks generation to stop (the tools then print their
   summary); a second one ends the process as usual. */
static volatile int g_interrupted;

static void on_interrupt(int sig) {
    if (g_interrupted) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
    g_interrupted = 1;
}

const volatile int *app_catch_interrupt(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a blocked read of stdin returns */
    sigaction(SIGINT, &sa, NULL);
    return &g_interrupted;
}

bool app_interrupted(void) { return g_interrupted != 0; }

void app_clear_interrupt(void) { g_interrupted = 0; }

bool app_stdout_ok(void) { return !ferror(stdout); }

double app_time_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double app_median(double *v, int n) {
    if (n <= 0) return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static bool open_session(const char *cmd, app *a, int64_t n_ctx) {
    pi_session_params sp = pi_session_default_params();
    sp.n_ctx = n_ctx;
    if (pi_session_create(a->m, &sp, &a->s) == PI_OK) return true;
    fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
    return false;
}

bool app_load(const char *cmd, const app_opts *o, app *a) {
    memset(a, 0, sizeof *a);
    if (!o->model) {
        fprintf(stderr, "pinfer: %s: -m FILE is required\n", cmd);
        return false;
    }
    const double t0 = app_time_s();
    if (pi_model_open(o->model, &o->mp, &a->m) || pi_model_get_info(a->m, &a->info)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        app_free(a);
        return false;
    }
    a->tok = pi_model_tokenizer(a->m);
    const pi_model_info *in = &a->info;
    if (in->planned && o->mp.plan_in_memory)
        fprintf(stderr, "%s: plan: its predictor thresholds only, the model in memory (--in-memory)\n", cmd);
    else if (in->planned)
        fprintf(stderr, "%s: plan: predicted %.2f tok/s; %d threads, queue depth %d, neuron cache %.1f MiB\n", cmd,
                in->plan_tok_s, in->plan_threads, in->plan_queue_depth, (double)in->plan_cache_bytes / (1 << 20));
    if (in->recall > 0.0f && (in->planned || o->mp.recall > 0.0f))
        fprintf(stderr, "%s: predictor thresholds for recall %.2f%s\n", cmd, (double)in->recall,
                o->mp.recall > 0.0f ? "" : " (the plan's)");
    if (!open_session(cmd, a, 0)) {
        app_free(a);
        return false;
    }
    a->load_s = app_time_s() - t0;
    return true;
}

bool app_fit_window(const char *cmd, const app_opts *o, bool user_ctx, app *a) {
    const int64_t train = a->info.n_ctx_train;
    if (user_ctx && train > 0 && o->mp.n_ctx > train) {
        fprintf(stderr, "pinfer: %s: -c %lld exceeds the model's context of %lld tokens\n", cmd,
                (long long)o->mp.n_ctx, (long long)train);
        return false;
    }
    if (!user_ctx && train > 0 && train < pi_session_n_ctx(a->s)) {
        pi_session_free(a->s);
        a->s = NULL;
        return open_session(cmd, a, train);
    }
    return true;
}

void app_free(app *a) {
    pi_session_free(a->s);
    pi_model_close(a->m);
    memset(a, 0, sizeof *a);
}

/* All of f into a NUL-terminated buffer (NULL with a message). */
static char *read_all(const char *cmd, FILE *f, const char *name, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (cap - n - 1 == 0) {
            char *nb = cap < ((size_t)1 << 30) ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                free(buf);
                fprintf(stderr, "pinfer: %s: %s is too large (over 1 GiB)\n", cmd, name);
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (!buf) {
        fprintf(stderr, "pinfer: %s: out of memory reading %s\n", cmd, name);
        return NULL;
    }
    if (ferror(f)) {
        fprintf(stderr, "pinfer: %s: cannot read %s: %s\n", cmd, name, strerror(errno));
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

char *app_read_text(const char *cmd, const char *path, const char *what) {
    const bool std_in = !strcmp(path, "-");
    char name[600];
    snprintf(name, sizeof name, std_in ? "%s from standard input" : "%s file %s", what, path);
    FILE *f = std_in ? stdin : fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "pinfer: %s: cannot open %s: %s\n", cmd, name, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "pinfer: %s: %s is a directory\n", cmd, name);
        if (!std_in) fclose(f);
        return NULL;
    }
    size_t n = 0;
    char *buf = read_all(cmd, f, name, &n);
    if (!std_in) fclose(f);
    if (buf && strlen(buf) != n) {
        fprintf(stderr, "pinfer: %s: %s contains a NUL byte\n", cmd, name);
        free(buf);
        return NULL;
    }
    return buf;
}

bool app_prompt_text(const char *cmd, const app_opts *o, const char **text, char **owned) {
    *owned = NULL;
    *text = o->prompt ? o->prompt : "";
    if (!o->prompt_file) return true;
    if (o->prompt) {
        fprintf(stderr, "pinfer: %s: give the prompt with -p or -f, not both\n", cmd);
        return false;
    }
    char *buf = app_read_text(cmd, o->prompt_file, "prompt");
    if (!buf) return false;
    *text = *owned = buf;
    return true;
}

bool app_tokenize(const char *cmd, const app *a, const char *text, bool special, int32_t **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    size_t len = strlen(text), bad;
    if (!pi_utf8_check(text, len, &bad)) {
        fprintf(stderr, "pinfer: %s: the prompt is not valid UTF-8 at byte %zu\n", cmd, bad);
        return false;
    }
    bool bos = pi_tokenizer_add_bos(a->tok) && pi_tokenizer_bos(a->tok) >= 0;
    size_t need = 0;
    pi_status st = pi_tokenize(a->tok, text, len, bos, special, NULL, 0, &need);
    if (st && st != PI_ERR_INVALID) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return false;
    }
    *ids = malloc((need + 1) * sizeof **ids);
    if (!*ids || pi_tokenize(a->tok, text, len, bos, special, *ids, need, n)) {
        fprintf(stderr, "pinfer: %s: cannot tokenize the prompt: %s\n", cmd, pi_last_error());
        free(*ids);
        *ids = NULL;
        return false;
    }
    return true;
}

const char *app_ffn_mode(const app *a) {
    static _Thread_local char buf[64];
    switch (pi_session_ffn(a->s)) {
    case PI_FFN_ORACLE: return "sparse (oracle mask)";
    case PI_FFN_SPARSE: snprintf(buf, sizeof buf, "sparse (predictor, hot %lld)", (long long)a->info.hot); return buf;
    default: return "dense";
    }
}

double app_peak_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

void app_print_offload(const app *a, FILE *f) {
    pi_memory_report r;
    pi_token_stats st;
    if (!a->info.offloaded || pi_model_memory(a->m, &r) || pi_session_stats(a->s, &st)) return;
    const double M = 1 << 20;
    fprintf(f,
            "memory budget %.1f MiB, used %.1f: fixed %.1f, KV %.1f, scratch %.1f, I/O %.1f, hot %.1f "
            "(%lld-%lld of %lld neurons per layer), neuron cache %.1f (%lld slots of %llu bytes); I/O: %s\n",
            (double)r.limit / M, (double)r.used / M, (double)r.fixed / M, (double)r.kv / M, (double)r.scratch / M,
            (double)r.io / M, (double)r.hot / M, (long long)r.hot_min, (long long)r.hot_max, (long long)a->info.n_ff,
            (double)r.cache / M, (long long)r.cache_slots, (unsigned long long)r.slot_bytes, r.io_backend);
    const double t = st.decode_tokens ? (double)st.decode_tokens : 1.0;
    const uint64_t cold = st.neurons_cached + st.neurons_read, sel = st.neurons_resident + cold;
    const double busy = st.io_busy_s, wait = st.io_wait_s;
    fprintf(f,
            "per token (%llu decoded): neurons %.0f = %.0f resident + %.0f cache hits + %.0f misses "
            "(hit rate: cache %.1f%%, overall %.1f%%); reads %.0f (%.0f merged), %.2f MB read; "
            "reads in flight %.2f ms, of which %.2f ms (%.0f%%) hidden behind compute, I/O wait %.2f ms; FFN %.2f ms%s\n",
            (unsigned long long)st.decode_tokens, (double)sel / t, (double)st.neurons_resident / t,
            (double)st.neurons_cached / t, (double)st.neurons_read / t,
            cold ? 100.0 * (double)st.neurons_cached / (double)cold : 100.0,
            sel ? 100.0 * (double)(sel - st.neurons_read) / (double)sel : 100.0, (double)st.reads / t,
            (double)st.reads_merged / t, (double)st.bytes_read / t * 1e-6, busy / t * 1e3, (busy - wait) / t * 1e3,
            busy > 0.0 ? 100.0 * (busy - wait) / busy : 0.0, wait / t * 1e3, st.ffn_s / t * 1e3,
            st.split_steps ? " (cache too small for one pass: split steps)" : "");
    if (st.io_queue_s > 0.0)
        fprintf(f,
                "queue per token: reads with the kernel %.2f ms, %.1f of them at a time on average (queue depth %d); "
                "%.0f%% of the reads waited for a place\n",
                st.io_queue_s / t * 1e3, st.io_depth_s / st.io_queue_s, r.queue_depth,
                st.reads ? 100.0 * (double)st.reads_queued / (double)st.reads : 0.0);
    if (st.neurons_ahead)
        fprintf(f,
                "lookahead per token: %.0f neurons read ahead for the next layer (%.0f for the first layer as the token "
                "starts, %.0f%% of them then selected) in %.0f reads, %.0f of them (%.0f%%) then selected; they are "
                "%.0f%% of the misses\n",
                (double)st.neurons_ahead / t, (double)st.neurons_ahead_start / t,
                st.neurons_ahead_start ? 100.0 * (double)st.ahead_start_used / (double)st.neurons_ahead_start : 0.0,
                (double)st.reads_ahead / t, (double)st.ahead_used / t,
                100.0 * (double)st.ahead_used / (double)st.neurons_ahead,
                st.neurons_read ? 100.0 * (double)st.ahead_used / (double)st.neurons_read : 0.0);
    if (st.head_uses) {
        const double n = (double)st.head_uses;
        char kept[96] = "";
        if (st.head_rows_resident > 0)
            snprintf(kept, sizeof kept, "; its first %lld of %lld rows kept in memory", (long long)st.head_rows_resident,
                     (long long)st.head_rows);
        fprintf(f, "output head on flash (the budget is below the minimum with it resident%s): %.2f MB read for each "
                   "product, %.2f ms with it (%.2f GB/s)\n", kept,
                (double)st.head_bytes_read / n * 1e-6, st.head_read_s / n * 1e3,
                st.head_read_s > 0.0 ? (double)st.head_bytes_read / st.head_read_s * 1e-9 : 0.0);
    }
    if (st.router_guesses)
        fprintf(f, "experts: the next layer's first expert, guessed from this layer's residual, was chosen in %.1f%% "
                   "of %llu guesses\n",
                100.0 * (double)st.router_hits / (double)st.router_guesses, (unsigned long long)st.router_guesses);
    if (st.prompt_bytes_read) fprintf(f, "prompt: %.1f MB of FFN streamed\n", (double)st.prompt_bytes_read * 1e-6);
}

bool app_out_writable(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return access(".", W_OK) == 0;
    if (slash == path) return access("/", W_OK) == 0;
    char dir[4096];
    size_t n = (size_t)(slash - path);
    if (n >= sizeof dir) return true; /* let the save report it */
    memcpy(dir, path, n);
    dir[n] = '\0';
    return access(dir, W_OK) == 0;
}
