/*
 * common.c — shared plumbing of run, chat, perplexity and bench.
 */
#include "common.h"

#include "args.h"
#include "base/timer.h"
#include "sparse/ffn_offload.h"
#include "api/engine.h"

#include <sys/stat.h>
#include "tokenizer/unicode.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

void app_opts_init(app_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = 128;
    o->sp = pi_sampler_default_params();
}

void app_usage_common(FILE *f) {
    fprintf(f,
            "  -m FILE              model (GGUF)\n"
            "  -t N                 threads (default: all cores)\n"
            "  -c N                 context size (default: the model's, at most 4096)\n"
            "  --dense              compute every FFN neuron (default: sparse when the model has predictors)\n"
            "  --predictor P        model (the file's predictors) or oracle (exact mask, for testing)\n"
            "  --hot N              neurons of each layer's hot prefix computed densely (default 0)\n"
            "  --mem-budget SIZE    keep at most SIZE bytes resident (e.g. 600M, 2G): the FFN is read from\n"
            "                       flash (a bundle file: pinfer convert --bundle)\n"
            "  --plan FILE          use a plan from pinfer plan (budget, hot neurons per layer, cache, threads,\n"
            "                       queue depth); without it --mem-budget plans on the fly\n"
            "  --no-plan            with --mem-budget: a uniform split instead of the planner's\n"
            "  --io B               uring (default where the kernel allows it) or pread\n"
            "  --qd N               reads in flight at most (default 64)\n"
            "  --cache SIZE         of the budget, the neuron cache's share (default: room for 15%% of a layer's\n"
            "                       neurons); the rest keeps each layer's hottest neurons resident\n"
            "  --mmap               map the model file instead of loading it into memory\n"
            "                       (starts faster and shares the page cache; decodes ~15%% slower)\n"
            "  --temp T             temperature (default 0.8; 0 = greedy)\n"
            "  --top-k N            (default 40; 0 = off)\n"
            "  --top-p P            (default 0.95; 1 = off)\n"
            "  --min-p P            (default 0.05; 0 = off)\n"
            "  --repeat-penalty R   (default 1 = off)   --repeat-last-n N (default 64)\n"
            "  --seed N             sampling seed (default: random, printed)\n");
}

int app_parse_common(const char *cmd, app_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *v;
    long n;
    if (!strcmp(a, "--ignore-eos")) {
        o->ignore_eos = true;
        return 1;
    }
    if (!strcmp(a, "--mmap")) {
        o->use_mmap = true;
        return 1;
    }
    if (!strcmp(a, "--dense")) {
        o->dense = true;
        return 1;
    }
    if (!strcmp(a, "--no-plan")) {
        o->no_plan = true;
        return 1;
    }
    static const char *with_value[] = {"-m", "-t", "-c", "--temp", "--top-k", "--top-p", "--min-p",
                                       "--repeat-penalty", "--repeat-last-n", "--seed", "-p", "-f", "-n",
                                       "--predictor", "--hot", "--mem-budget", "--io", "--qd", "--cache", "--plan"};
    bool known = false;
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++) known |= !strcmp(a, with_value[k]);
    if (!known) return 0;
    if (!(v = arg_value(cmd, argc, argv, i))) return -1;
    char *end;
    if (!strcmp(a, "-m")) o->model = v;
    else if (!strcmp(a, "-p")) o->prompt = v;
    else if (!strcmp(a, "-f")) o->prompt_file = v;
    else if (!strcmp(a, "-n")) { if (!arg_int(cmd, a, v, -1, 1 << 24, &o->n_predict)) return -1; }
    else if (!strcmp(a, "-t")) { if (!arg_int(cmd, a, v, 1, 1024, &o->threads)) return -1; }
    else if (!strcmp(a, "-c")) { if (!arg_int(cmd, a, v, 1, 1 << 24, &o->n_ctx)) return -1; }
    else if (!strcmp(a, "--hot")) { if (!arg_int(cmd, a, v, 0, 1 << 24, &o->hot)) return -1; }
    else if (!strcmp(a, "--qd")) { if (!arg_int(cmd, a, v, 1, 4096, &o->queue_depth)) return -1; }
    else if (!strcmp(a, "--mem-budget")) {
        if (pi_parse_size(v, &o->mem_budget) || o->mem_budget == 0) {
            fprintf(stderr, "pinfer: %s: --mem-budget expects a size such as 600M or 2G, got '%s'\n", cmd, v);
            return -1;
        }
    }
    else if (!strcmp(a, "--plan")) o->plan = v;
    else if (!strcmp(a, "--cache")) {
        if (pi_parse_size(v, &o->cache_bytes)) {
            fprintf(stderr, "pinfer: %s: --cache expects a size such as 64M, got '%s'\n", cmd, v);
            return -1;
        }
    }
    else if (!strcmp(a, "--io")) {
        if (!strcmp(v, "uring")) o->io_backend = PI_IO_URING;
        else if (!strcmp(v, "pread")) o->io_backend = PI_IO_PREAD;
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
        o->oracle = !strcmp(v, "oracle");
    }
    else if (!strcmp(a, "--top-k")) { if (!arg_int(cmd, a, v, 0, 1 << 24, &n)) return -1; o->sp.top_k = (int32_t)n; }
    else if (!strcmp(a, "--repeat-last-n")) { if (!arg_int(cmd, a, v, 0, 1 << 20, &n)) return -1; o->sp.repeat_last_n = (int32_t)n; }
    else if (!strcmp(a, "--seed")) { if (!arg_int(cmd, a, v, 0, 0x7fffffff, &n)) return -1; o->sp.seed = (uint64_t)n; o->seed_given = true; }
    else {
        float f = strtof(v, &end);
        float lo = !strcmp(a, "--repeat-penalty") ? 1e-3f : 0.0f, hi = !strcmp(a, "--temp") ? 100.0f : !strcmp(a, "--repeat-penalty") ? 100.0f : 1.0f;
        if (end == v || *end || !(f >= lo && f <= hi) || (!strcmp(a, "--top-p") && f <= 0.0f)) {
            fprintf(stderr, "pinfer: %s: %s expects a number in [%g, %g]%s, got '%s'\n", cmd, a, lo, hi,
                    !strcmp(a, "--top-p") ? " above 0" : "", v);
            return -1;
        }
        if (!strcmp(a, "--temp")) o->sp.temp = f;
        else if (!strcmp(a, "--top-p")) o->sp.top_p = f;
        else if (!strcmp(a, "--min-p")) o->sp.min_p = f;
        else o->sp.repeat_penalty = f;
    }
    return 1;
}

bool app_load(const char *cmd, const app_opts *o, app *a) {
    memset(a, 0, sizeof *a);
    if (!o->model) {
        fprintf(stderr, "pinfer: %s: -m FILE is required\n", cmd);
        return false;
    }
    double t0 = pi_time_s();
    int64_t n_ctx = o->n_ctx;
    pi_plan plan;
    bool planned = false;
    if (o->plan_in) {
        plan = *o->plan_in;
        planned = true;
    } else if (o->plan) {
        if (pi_plan_load(o->plan, &plan)) {
            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
            return false;
        }
        struct stat sb;
        if (stat(o->model, &sb) == 0 && plan.model_size && (uint64_t)sb.st_size != plan.model_size) {
            fprintf(stderr, "pinfer: %s: %s was made for a file of %llu bytes, %s has %llu: plan again\n", cmd, o->plan,
                    (unsigned long long)plan.model_size, o->model, (unsigned long long)sb.st_size);
            return false;
        }
        if (o->mem_budget && o->mem_budget != plan.mem_budget) {
            fprintf(stderr, "pinfer: %s: --mem-budget differs from the plan's %.0f MiB: plan again or drop one\n", cmd,
                    (double)plan.mem_budget / (1 << 20));
            return false;
        }
        planned = true;
    } else if (o->mem_budget && !o->no_plan && !o->cache_bytes) {
        pi_plan_limits lim = {o->mem_budget, (int)o->threads, 0.0};
        planned = app_plan(cmd, o->model, NULL, n_ctx, &lim, false, &plan) == 0;
        if (!planned) fprintf(stderr, "pinfer: %s: planning failed; using the default split\n", cmd);
    }
    app_opts oc = *o;
    if (planned) {
        oc.mem_budget = plan.mem_budget;
        if (!o->n_ctx && plan.n_ctx) n_ctx = oc.n_ctx = plan.n_ctx;
        if (!o->threads) oc.threads = plan.threads;
        if (!o->queue_depth) oc.queue_depth = plan.queue_depth;
        if (!o->plan_in)
            fprintf(stderr, "%s: plan: predicted %.2f tok/s; %d threads, queue depth %d, neuron cache %.1f MiB\n", cmd,
                    plan.cost.tok_s, plan.threads, plan.queue_depth, (double)plan.cache_bytes / (1 << 20));
    }
    o = &oc;
    if (o->mem_budget) {
        if (o->oracle) {
            fprintf(stderr, "pinfer: %s: --predictor oracle computes every gate and needs the FFN in memory: "
                            "drop --mem-budget\n", cmd);
            return false;
        }
        pi_offload_opts oo = {.mem_budget = o->mem_budget, .n_ctx = n_ctx ? n_ctx : 4096};
        oo.io.backend = (pi_io_backend)o->io_backend;
        oo.io.queue_depth = o->queue_depth ? (int)o->queue_depth : 64;
        oo.cold_cache_bytes = o->cache_bytes;
        if (planned) {
            oo.hot = plan.hot;
            oo.cold_cache_bytes = plan.cache_bytes;
        }
        /* the session's context is known only from the model: peek at it first */
        pi_lm *peek;
        if (!n_ctx && !pi_lm_load_ex(o->model, PI_MAP_FILE, PI_LOAD_FFN_ON_FLASH, &peek)) {
            oo.n_ctx = peek->hp.n_ctx_train < 4096 ? peek->hp.n_ctx_train : 4096;
            pi_lm_free(peek);
        }
        n_ctx = oo.n_ctx;
        if (pi_offload_load(o->model, &oo, &a->m, &a->off)) {
            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
            app_free(a);
            return false;
        }
    } else if (pi_lm_load(o->model, o->use_mmap ? PI_MAP_FILE : PI_MAP_LOAD, &a->m)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        app_free(a);
        return false;
    }
    if (pi_tokenizer_load(a->m->gguf, &a->tok)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        app_free(a);
        return false;
    }
    if (pi_tokenizer_n_vocab(a->tok) > a->m->hp.n_vocab) {
        fprintf(stderr, "pinfer: %s: %s: the tokenizer has %d tokens but the model only %lld\n", cmd, o->model,
                pi_tokenizer_n_vocab(a->tok), (long long)a->m->hp.n_vocab);
        app_free(a);
        return false;
    }
    if (!n_ctx) n_ctx = a->m->hp.n_ctx_train < 4096 ? a->m->hp.n_ctx_train : 4096;
    if (pi_state_create(a->m, n_ctx, (int)o->threads, &a->s)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        app_free(a);
        return false;
    }
    bool sparse = !o->dense && (o->oracle || a->m->has_predictor);
    if (sparse) {
        if (a->m->hp.n_expert || a->m->hp.act == PI_ACT_SILU) {
            if (o->oracle) {
                fprintf(stderr, "pinfer: %s: --predictor oracle needs a dense ReLU or dReLU model\n", cmd);
                app_free(a);
                return false;
            }
            sparse = false; /* predictors on a model the sparse path cannot serve: run densely */
        }
    }
    a->mode = !sparse ? PI_FFN_DENSE : o->oracle ? PI_FFN_ORACLE : PI_FFN_SPARSE;
    a->hot = o->hot;
    if (sparse && pi_lm_make_down_t(a->m)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        app_free(a);
        return false;
    }
    if (!app_install_ffn(cmd, a, a->s)) {
        app_free(a);
        return false;
    }
    a->load_s = pi_time_s() - t0;
    return true;
}

bool app_install_ffn(const char *cmd, app *a, pi_state *s) {
    pi_status st = PI_OK;
    if (a->off) st = pi_offload_ffn_install(s, a->off, a->mode, a->hot);
    else if (a->mode != PI_FFN_DENSE) st = pi_sparse_ffn_install(s, a->mode, a->hot);
    if (st) fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
    return st == PI_OK;
}

bool app_fit_window(const char *cmd, const app_opts *o, bool user_ctx, app *a) {
    const pi_hparams *hp = &a->m->hp;
    if (user_ctx && hp->n_ctx_train > 0 && o->n_ctx > hp->n_ctx_train) {
        fprintf(stderr, "pinfer: %s: -c %ld exceeds the model's context of %lld tokens\n", cmd, o->n_ctx,
                (long long)hp->n_ctx_train);
        return false;
    }
    if (!user_ctx && hp->n_ctx_train > 0 && hp->n_ctx_train < a->s->n_ctx) {
        pi_state_free(a->s);
        if (pi_state_create(a->m, hp->n_ctx_train, (int)o->threads, &a->s)) {
            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
            return false;
        }
        if (!app_install_ffn(cmd, a, a->s)) return false;
    }
    return true;
}

void app_free(app *a) {
    pi_state_free(a->s);
    pi_offload_free(a->off);
    pi_tokenizer_free(a->tok);
    pi_lm_free(a->m);
    memset(a, 0, sizeof *a);
}

bool app_prompt_text(const char *cmd, const app_opts *o, const char **text, char **owned) {
    *owned = NULL;
    *text = o->prompt ? o->prompt : "";
    if (!o->prompt_file) return true;
    if (o->prompt) {
        fprintf(stderr, "pinfer: %s: give the prompt with -p or -f, not both\n", cmd);
        return false;
    }
    FILE *f = fopen(o->prompt_file, "rb");
    if (!f) {
        fprintf(stderr, "pinfer: %s: cannot open prompt file %s\n", cmd, o->prompt_file);
        return false;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (cap - n - 1 == 0) {
            char *nb = cap < ((size_t)1 << 30) ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "pinfer: %s: prompt file %s is too large\n", cmd, o->prompt_file);
        return false;
    }
    buf[n] = '\0';
    if (strlen(buf) != n) {
        fprintf(stderr, "pinfer: %s: prompt file %s contains a NUL byte\n", cmd, o->prompt_file);
        free(buf);
        return false;
    }
    *text = *owned = buf;
    return true;
}

bool app_tokenize(const char *cmd, const app *a, const char *text, bool special, int32_t **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    size_t len = strlen(text), bad;
    if (!pi_utf8_valid((const uint8_t *)text, len, &bad)) {
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
    switch (a->mode) {
    case PI_FFN_AUTO:
    case PI_FFN_DENSE: return "dense";
    case PI_FFN_ORACLE: return "sparse (oracle mask)";
    case PI_FFN_SPARSE: snprintf(buf, sizeof buf, "sparse (predictor, hot %lld)", (long long)a->hot); return buf;
    }
    return "?";
}

double app_peak_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

void app_print_offload(const app *a, FILE *f) {
    if (!a->off) return;
    const pi_offload *o = a->off;
    char buf[512];
    pi_offload_describe(o, buf, sizeof buf);
    fprintf(f, "%s\n", buf);
    const pi_offload_stats *st = &o->st;
    const double t = st->tokens ? (double)st->tokens : 1.0;
    const uint64_t cold = st->hits + st->misses, sel = st->resident + cold;
    const double busy = (double)st->io_busy_ns, wait = (double)st->io_wait_ns;
    fprintf(f,
            "per token (%llu decoded): neurons %.0f = %.0f resident + %.0f cache hits + %.0f misses "
            "(hit rate: cache %.1f%%, overall %.1f%%); reads %.0f (%.0f merged), %.2f MB read; "
            "reads in flight %.2f ms, of which %.2f ms (%.0f%%) hidden behind compute, I/O wait %.2f ms; FFN %.2f ms%s\n",
            (unsigned long long)st->tokens, (double)sel / t, (double)st->resident / t, (double)st->hits / t,
            (double)st->misses / t, cold ? 100.0 * (double)st->hits / (double)cold : 100.0,
            sel ? 100.0 * (double)(sel - st->misses) / (double)sel : 100.0, (double)st->reads / t,
            (double)st->merged / t, (double)st->bytes / t * 1e-6, busy / t * 1e-6, (busy - wait) / t * 1e-6,
            busy > 0.0 ? 100.0 * (busy - wait) / busy : 0.0, wait / t * 1e-6, (double)st->ffn_ns / t * 1e-6,
            st->waves ? " (cache too small for one pass: split steps)" : "");
    if (st->prefill_bytes) fprintf(f, "prompt: %.1f MB of FFN streamed\n", (double)st->prefill_bytes * 1e-6);
}

void app_reset_offload_stats(app *a) {
    if (!a->off) return;
    memset(&a->off->st, 0, sizeof a->off->st);
    pi_io_reset_stats(a->off->io);
    pi_ncache_reset_stats(a->off->cache);
}

int app_plan(const char *cmd, const char *model, const char *hw_path, int64_t n_ctx, const pi_plan_limits *lim,
             bool verbose, pi_plan *out) {
    pi_status st = pi_engine_plan(model, hw_path, n_ctx, lim, out);
    if (st && st != PI_ERR_INVALID) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 2;
    }
    if (verbose && !out->have_stats)
        fprintf(stderr, "%s: %s has no activation counts (convert with --reorder STATS): assuming uniform activity\n",
                cmd, model);
    if (st) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 1;
    }
    return 0;
}

void app_print_plan(const pi_plan *p, FILE *f) {
    int64_t hmin = INT64_MAX, hmax = 0, hsum = 0;
    for (int64_t l = 0; l < p->n_layer; l++) {
        hmin = p->hot[l] < hmin ? p->hot[l] : hmin;
        hmax = p->hot[l] > hmax ? p->hot[l] : hmax;
        hsum += p->hot[l];
    }
    fprintf(f, "plan for %s under %.1f MiB:\n", p->model, (double)p->mem_budget / (1 << 20));
    fprintf(f, "  threads %d, queue depth %d, neuron cache %.1f MiB, resident in all %.1f MiB\n", p->threads,
            p->queue_depth, (double)p->cache_bytes / (1 << 20), (double)p->resident_bytes / (1 << 20));
    fprintf(f, "  hot neurons per layer (%lld in all, %lld-%lld):", (long long)hsum, (long long)hmin, (long long)hmax);
    for (int64_t l = 0; l < p->n_layer; l++) fprintf(f, " %lld", (long long)p->hot[l]);
    const pi_cost *c = &p->cost;
    fprintf(f, "\n  per token: %.0f neurons resident, %.0f cache hits, %.0f misses in %.0f reads\n", c->resident, c->hits,
            c->misses, c->reads);
    fprintf(f, "predicted: %.2f tok/s (ms per token: fixed %.2f, predictor %.2f, gate/up %.2f, down %.2f, reads %.2f "
               "of which %.2f hidden behind compute, overhead %.2f)\n",
            c->tok_s, c->ms_fixed, c->ms_pred, c->ms_gu, c->ms_down, c->ms_io, c->ms_io_hidden, c->ms_overhead);
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
