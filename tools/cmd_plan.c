/*
 * cmd_plan.c — `pinfer plan`: the configuration the planner chooses for a
 * bundle file under a memory budget, and the speed it predicts.
 */
#include "args.h"
#include "cmds.h"
#include "common.h"

#include "plan/plan.h"

#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: pinfer plan -m FILE --mem-budget SIZE [-o PLAN] [-t N] [--min-speed TOKS] [--hw FILE] [-c CTX]\n"
               "  -m FILE              a bundle file (pinfer convert --bundle)\n"
               "  --mem-budget SIZE    memory the run may keep resident (e.g. 600M, 2G)\n"
               "  -o PLAN              write the plan (for pinfer run --plan PLAN)\n"
               "  -t N                 use at most N threads (default: as many as hwprobe measured)\n"
               "  --min-speed TOKS     fail unless the plan is predicted to reach TOKS tokens/s\n"
               "  --hw FILE            hardware figures (default: the cached pinfer hwprobe result for the\n"
               "                       model's filesystem; measured now with --quick when there is none)\n"
               "  -c CTX               context the KV cache must hold (default: the model's, at most 4096, as run)\n");
}

int cmd_plan(int argc, char **argv) {
    const char *cmd = "plan", *model = NULL, *out = NULL, *hw_path = NULL;
    uint64_t budget = 0;
    long threads = 0, n_ctx = 0;
    double min_speed = 0.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!(v = arg_value(cmd, argc, argv, &i))) return 2;
        if (!strcmp(a, "-m")) model = v;
        else if (!strcmp(a, "-o")) out = v;
        else if (!strcmp(a, "--hw")) hw_path = v;
        else if (!strcmp(a, "--mem-budget")) { if (!arg_size(cmd, a, v, &budget)) return 2; }
        else if (!strcmp(a, "-t")) { if (!arg_int(cmd, a, v, 1, 1024, &threads)) return 2; }
        else if (!strcmp(a, "-c")) { if (!arg_int(cmd, a, v, 1, 1 << 24, &n_ctx)) return 2; }
        else if (!strcmp(a, "--min-speed")) {
            char *end;
            min_speed = strtod(v, &end);
            if (end == v || *end || !(min_speed > 0.0)) {
                fprintf(stderr, "pinfer: %s: --min-speed expects tokens per second above 0, got '%s'\n", cmd, v);
                return 2;
            }
        } else {
            fprintf(stderr, "pinfer: %s: unknown option '%s'\n", cmd, a);
            usage(stderr);
            return 2;
        }
    }
    if (!model || !budget) {
        fprintf(stderr, "pinfer: %s: -m FILE and --mem-budget SIZE are required\n", cmd);
        usage(stderr);
        return 2;
    }
    pi_plan p;
    pi_plan_limits lim = {budget, (int)threads, min_speed};
    int rc = app_plan(cmd, model, hw_path, n_ctx, &lim, true, &p);
    if (rc == 2) return 1;
    app_print_plan(&p, stdout);
    if (out) {
        if (pi_plan_save(&p, out)) {
            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
            return 1;
        }
        printf("wrote %s\n", out);
    }
    return rc;
}
