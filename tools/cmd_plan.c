/*
 * cmd_plan.c — `pinfer plan`: the configuration the planner chooses for a
 * bundle file under a memory budget, and the speed it predicts. The plan
 * file reaches -o whole or not at all (pi_plan_save).
 */
#include "args.h"
#include "cmds.h"
#include "common.h"

#include "api/engine.h"
#include "base/outfile.h"

#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: pinfer plan -m FILE --mem-budget SIZE [-o PLAN] [-t N] [--min-speed TOKS] [--hw FILE] [-c CTX]\n"
               "       [--recall R]\n"
               "  -m FILE              a bundle file (pinfer convert --bundle)\n"
               "  --mem-budget SIZE    memory the run may keep resident (e.g. 600M, 2G)\n"
               "  -o PLAN              write the plan (for pinfer run --plan PLAN)\n"
               "  -t N                 use at most N threads (default: as many as hwprobe measured)\n"
               "  --min-speed TOKS     fail unless the plan is predicted to reach TOKS tokens/s\n"
               "  --hw FILE            hardware figures (default: the cached pinfer hwprobe result for the\n"
               "                       model's filesystem; measured now with --quick when there is none)\n"
               "  -c CTX               context the KV cache must hold (default: the model's, at most 4096, as run)\n"
               "  --recall R           predictor thresholds for recall R (default: where the file has the\n"
               "                       predictors' logit histograms, the planner picks R from the file's target\n"
               "                       or 0.95 up to 0.99: the highest predicted within 3%% of the fastest)\n");
}

/* The plan, human-readable, ending with "predicted: X tok/s" and the breakdown. */
static void print_plan(const pi_plan *p, FILE *f) {
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
    if (p->recall > 0.0) {
        fprintf(f, "\n  predictor thresholds for recall %.2f:", p->recall);
        for (int64_t l = 0; l < p->n_layer; l++) fprintf(f, " %.4g", (double)p->thr[l]);
        if (p->split) {
            fprintf(f, "\n  and for the hot neurons (a false positive there costs no read):");
            for (int64_t l = 0; l < p->n_layer; l++) fprintf(f, " %.4g", (double)p->thr_hot[l]);
        }
    }
    const pi_cost *c = &p->cost;
    fprintf(f, "\n  per token: %.0f neurons resident, %.0f cache hits, %.0f misses in %.0f reads\n", c->resident, c->hits,
            c->misses, c->reads);
    if (c->ms_head_read > 0.0) {
        char kept[64] = "whole";
        if (p->head_rows > 0) snprintf(kept, sizeof kept, "but for its first %lld rows", (long long)p->head_rows);
        fprintf(f, "  the output head stays on flash (the budget is below the minimum with it resident): read %s "
                   "every token, %.2f ms of the fixed region's time\n", kept, c->ms_head_read);
    }
    fprintf(f, "predicted: %.2f tok/s (ms per token: fixed %.2f, predictor %.2f, gate/up %.2f, down %.2f, reads %.2f "
               "of which %.2f hidden behind compute, the reads' CPU %.2f, overhead %.2f)\n",
            c->tok_s, c->ms_fixed, c->ms_pred, c->ms_gu, c->ms_down, c->ms_io, c->ms_io_hidden, c->ms_read_cpu,
            c->ms_overhead);
    if (c->ms_cores * c->tok_s > 1e3 * (1.0 - 1e-9))
        fprintf(f, "  the cores bind: their work and the reads' CPU spread over %d threads take %.2f ms a token\n",
                p->threads, c->ms_cores);
}

int cmd_plan(int argc, char **argv) {
    static const char *const valued[] = {"-m", "-o", "--hw", "--mem-budget", "-t", "-c", "--min-speed", "--recall"};
    const char *cmd = "plan", *model = NULL, *out = NULL, *hw_path = NULL;
    uint64_t budget = 0;
    long threads = 0, n_ctx = 0;
    double min_speed = 0.0, recall = 0.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        bool known = false;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) known |= !strcmp(a, valued[k]);
        if (!known) return arg_unknown(cmd, a);
        if (!(v = arg_value(cmd, argc, argv, &i))) return 2;
        if (!strcmp(a, "-m")) model = v;
        else if (!strcmp(a, "-o")) out = v;
        else if (!strcmp(a, "--hw")) hw_path = v;
        else if (!strcmp(a, "--mem-budget")) { if (!arg_size(cmd, a, v, &budget)) return 2; }
        else if (!strcmp(a, "-t")) { if (!arg_int(cmd, a, v, 1, 1024, &threads)) return 2; }
        else if (!strcmp(a, "-c")) { if (!arg_int(cmd, a, v, 1, 1 << 24, &n_ctx)) return 2; }
        else if (!strcmp(a, "--recall")) { if (!arg_share(cmd, a, v, &recall)) return 2; }
        else { /* --min-speed */
            char *end;
            min_speed = strtod(v, &end);
            if (end == v || *end || !(min_speed > 0.0)) {
                fprintf(stderr, "pinfer: %s: --min-speed expects tokens per second above 0, got '%s'\n", cmd, v);
                return 2;
            }
        }
    }
    if (!model || !budget) {
        fprintf(stderr, "pinfer: %s: -m FILE and --mem-budget SIZE are required\n", cmd);
        usage(stderr);
        return 2;
    }
    /* before the planning, which may measure the hardware first (~20 s) */
    if (out && (pi_outfile_check_distinct(out, model, "the input model") ||
                pi_outfile_check_distinct(out, hw_path, "the hardware figures (--hw)"))) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 2;
    }
    if (out && !app_out_writable(out)) {
        fprintf(stderr, "pinfer: %s: cannot write %s: its directory is missing or not writable\n", cmd, out);
        return 1;
    }
    pi_plan p;
    memset(&p, 0, sizeof p);
    pi_plan_limits lim = {budget, (int)threads, min_speed, recall};
    pi_status st = pi_engine_plan(model, hw_path, n_ctx, &lim, &p, NULL);
    /* PI_ERR_INVALID with a plan filled in: --min-speed is out of reach; the
       best plan is shown, but not written over -o */
    const bool have_plan = !st || (st == PI_ERR_INVALID && min_speed > 0.0 && p.n_layer > 0);
    if (!have_plan) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 1;
    }
    if (st) fprintf(stderr, "pinfer: %s: %s%s\n", cmd, pi_last_error(), out ? "; the plan is not written" : "");
    print_plan(&p, stdout);
    if (st) return 1;
    if (out) {
        if (pi_plan_save(&p, out)) {
            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
            return 1;
        }
        printf("wrote %s\n", out);
    }
    return 0;
}
