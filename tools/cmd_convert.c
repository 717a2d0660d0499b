/*
 * cmd_convert.c — `pinfer convert`: import other formats into a GGUF that
 * pinfer (and llama.cpp) load.
 *
 * The output reaches -o only when complete (the GGUF writer goes through
 * base/outfile.h): a failure leaves a previous file there untouched. An -o
 * that names one of the inputs (also through a link) is refused before any
 * work. Progress goes to stderr (tools/progress.h), then one summary line.
 */
#include "args.h"
#include "cmds.h"
#include "progress.h"

#include "base/outfile.h"
#include "base/timer.h"
#include "gguf/bundle.h"
#include "model/llama2c.h"
#include "sparse/reorder.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f) {
    fprintf(f, "usage: pinfer convert --from-llama2c MODEL.bin --tokenizer TOK.bin -o OUT.gguf [--name NAME]\n"
               "         a llama2.c checkpoint (legacy float32 format) and its tokenizer -> llama GGUF (F32)\n"
               "       pinfer convert -m MODEL.gguf --reorder STATS.gguf -o OUT.gguf\n"
               "         neurons of every FFN layer renumbered by activation frequency (pinfer profile),\n"
               "         so the hot neurons form a prefix; the model computes the same function\n"
               "       pinfer convert -m MODEL.gguf [--reorder STATS.gguf] --bundle [--bundle-align N] -o OUT.gguf\n"
               "         a bundle file: each dense ReLU/dReLU FFN layer stored as one bundle per neuron\n"
               "         (gate row | up row | down column), bundles starting on multiples of N bytes\n"
               "         (a power of two in [512, 65536], default 4096; 0: packed), tensors 4096-aligned;\n"
               "         with --reorder the neurons are first ordered by activation frequency\n"
               "       any of the -m forms (or alone): --output-type T / --embd-type T write the output head /\n"
               "         token embedding in type T (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K,\n"
               "         q6_K): under --mem-budget the output head is part of the fixed region, so a smaller\n"
               "         type lowers the minimum\n"
               "       with --reorder STATS: --order coact (the default when STATS holds activation masks,\n"
               "         pinfer profile --masks) places neurons that fire together side by side within the\n"
               "         frequency order, so that one read fetches their bundles (--coact-window W: among W\n"
               "         neighbours in frequency on either side, default n_ff/32 up to %d); --order freq:\n"
               "         frequency alone\n"
               "       with --reorder STATS: --recall R sets each layer's predictor threshold to the largest that\n"
               "         keeps recall R on the profiled tokens (STATS from profiling a model with predictors)\n"
               "       pinfer convert -m MODEL.gguf --plain -o OUT.gguf\n"
               "         a file llama.cpp reads: the model without pinfer's additions (predictors, ffn_down_t,\n"
               "         neuron permutations and counts), e.g. to run a peer on the same weights\n",
            PI_STATS_COACT_WINDOW);
}

/* The end of a conversion: the error, or the summary line. */
static int finish(const char *cmd, pi_status st, progress *pr, const char *out, double t0, const char *what) {
    if (st) {
        progress_abort(pr);
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 1;
    }
    const double el = pi_time_s() - t0;
    struct stat sb;
    const double mib = stat(out, &sb) ? 0.0 : (double)sb.st_size / (1 << 20);
    fprintf(stderr, "convert: wrote %s (%.1f MiB in %.1f s, %.1f MiB/s%s%s)\n", out, mib, el, el > 0 ? mib / el : 0.0,
            *what ? "; " : "", what);
    return 0;
}

int cmd_convert(int argc, char **argv) {
    static const char *const valued[] = {"--from-llama2c", "--tokenizer", "-o", "--name", "-m", "--reorder",
                                         "--bundle-align", "--output-type", "--embd-type", "--recall", "--order",
                                         "--coact-window"};
    const char *cmd = "convert", *l2c = NULL, *tok = NULL, *out = NULL, *name = NULL, *model = NULL, *stats = NULL;
    bool bundle = false, align_given = false;
    long align = PI_BUNDLE_DEFAULT_ALIGN, window = PI_STATS_COACT_AUTO;
    int order = -1; /* 0: frequency, 1: co-activation, -1: co-activation when the statistics have masks */
    pi_rewrite_params retype = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--bundle")) {
            bundle = true;
            continue;
        }
        if (!strcmp(a, "--plain")) {
            retype.plain = true;
            continue;
        }
        bool known = false;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) known |= !strcmp(a, valued[k]);
        if (!known) return arg_unknown(cmd, a);
        if (!(v = arg_value(cmd, argc, argv, &i))) return 2;
        if (!strcmp(a, "--from-llama2c")) l2c = v;
        else if (!strcmp(a, "--tokenizer")) tok = v;
        else if (!strcmp(a, "-o")) out = v;
        else if (!strcmp(a, "--name")) name = v;
        else if (!strcmp(a, "-m")) model = v;
        else if (!strcmp(a, "--reorder")) stats = v;
        else if (!strcmp(a, "--recall")) { if (!arg_share(cmd, a, v, &retype.recall)) return 2; }
        else if (!strcmp(a, "--coact-window")) { if (!arg_int(cmd, a, v, 1, 1 << 20, &window)) return 2; }
        else if (!strcmp(a, "--order")) {
            if (!strcmp(v, "freq") || !strcmp(v, "frequency")) order = 0;
            else if (!strcmp(v, "coact") || !strcmp(v, "coactivation")) order = 1;
            else {
                fprintf(stderr, "pinfer: %s: --order '%s' is not freq or coact\n", cmd, v);
                return 2;
            }
        }
        else if (!strcmp(a, "--output-type") || !strcmp(a, "--embd-type")) {
            const bool o_ = !strcmp(a, "--output-type");
            const int t = pi_type_from_name(v);
            if (t < 0 || !pi_type_get((uint32_t)t)->compute) {
                fprintf(stderr,
                        "pinfer: %s: %s '%s' is not one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, "
                        "q6_K\n",
                        cmd, a, v);
                return 2;
            }
            if (o_) retype.retype_output = true, retype.output_type = (pi_type)t;
            else retype.retype_embd = true, retype.embd_type = (pi_type)t;
        }
        else if (!strcmp(a, "--bundle-align")) {
            if (!arg_int(cmd, a, v, 0, PI_BUNDLE_MAX_ALIGN, &align)) return 2;
            if (align && (align < PI_BUNDLE_MIN_ALIGN || (align & (align - 1)))) {
                fprintf(stderr, "pinfer: %s: --bundle-align %ld is not 0 (packed) or a power of two in [%d, %d]\n", cmd,
                        align, PI_BUNDLE_MIN_ALIGN, PI_BUNDLE_MAX_ALIGN);
                return 2;
            }
            align_given = true;
        }
    }
    /* refused before any work: an output that would replace an input */
    if (out && (pi_outfile_check_distinct(out, model, "the input model") ||
                pi_outfile_check_distinct(out, stats, "the statistics") ||
                pi_outfile_check_distinct(out, l2c, "the llama2.c checkpoint") ||
                pi_outfile_check_distinct(out, tok, "the tokenizer"))) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 2;
    }
    if (align_given && !bundle) {
        fprintf(stderr, "pinfer: %s: --bundle-align needs --bundle\n", cmd);
        return 2;
    }
    if (bundle && (!model || !out || l2c)) {
        fprintf(stderr, "pinfer: %s: --bundle takes -m MODEL, -o OUT and optionally --reorder STATS\n", cmd);
        return 2;
    }
    if (retype.recall > 0.0 && (!stats || retype.plain)) {
        fprintf(stderr, "pinfer: %s: --recall takes --reorder STATS (from pinfer profile of a model with predictors)\n",
                cmd);
        return 2;
    }
    if (order >= 0 && !stats) {
        fprintf(stderr, "pinfer: %s: --order takes --reorder STATS\n", cmd);
        return 2;
    }
    if (retype.plain && (bundle || stats || !model || !out || l2c)) {
        fprintf(stderr, "pinfer: %s: --plain takes -m MODEL and -o OUT (no --bundle, no --reorder)\n", cmd);
        return 2;
    }
    const bool retyping = retype.retype_output || retype.retype_embd || retype.plain;
    if (retyping && (!model || !out || l2c)) {
        fprintf(stderr, "pinfer: %s: --output-type and --embd-type take -m MODEL and -o OUT\n", cmd);
        return 2;
    }
    if (!bundle && !retyping && (model || stats) && (!model || !stats || !out || l2c)) {
        fprintf(stderr, "pinfer: %s: reordering takes -m MODEL, --reorder STATS and -o OUT\n", cmd);
        return 2;
    }
    if (!model && (!l2c || !tok || !out)) {
        fprintf(stderr, "pinfer: %s: --from-llama2c, --tokenizer and -o are required\n", cmd);
        usage(stderr);
        return 2;
    }
    const double t0 = pi_time_s();
    progress pr;
    progress_init(&pr, "convert", "bytes", 0);
    if (!model)
        return finish(cmd, pi_llama2c_convert_progress(l2c, tok, out, name, progress_bytes, &pr), &pr, out, t0,
                      "from a llama2.c checkpoint");
    pi_stats *st = NULL;
    pi_status s = stats ? pi_stats_load(stats, &st) : PI_OK;
    if (!s && order == 1 && !st->mask_tokens) {
        fprintf(stderr, "pinfer: %s: --order coact: %s has no activation masks (pinfer profile --masks N keeps "
                "them)\n", cmd, stats);
        pi_stats_free(st);
        return 2;
    }
    const bool coact = st && st->mask_tokens && order != 0;
    if (!s) {
        pi_rewrite_params rp = retype;
        rp.st = st, rp.bundle = bundle, rp.align = (uint32_t)align;
        rp.coact_window = coact ? window : 0;
        rp.progress = progress_bytes, rp.progress_ctx = &pr;
        s = pi_rewrite_model(model, &rp, out);
    }
    pi_stats_free(st);
    char what[256] = "";
    if (bundle && align) snprintf(what, sizeof what, "FFN as bundles aligned to %ld bytes", align);
    else if (bundle) snprintf(what, sizeof what, "FFN as packed bundles");
    if (stats)
        snprintf(what + strlen(what), sizeof what - strlen(what), "%sneurons ordered by activation frequency%s",
                 bundle ? ", " : "", coact ? " and co-activation" : "");
    if (retype.plain) snprintf(what, sizeof what, "without pinfer's predictors and extra tensors, for llama.cpp");
    if (retype.recall > 0.0)
        snprintf(what + strlen(what), sizeof what - strlen(what), ", predictor thresholds for recall %.3g",
                 retype.recall);
    if (retype.retype_output)
        snprintf(what + strlen(what), sizeof what - strlen(what), "%soutput head %s", what[0] ? ", " : "",
                 pi_type_name(retype.output_type));
    if (retype.retype_embd)
        snprintf(what + strlen(what), sizeof what - strlen(what), "%sembedding %s", what[0] ? ", " : "",
                 pi_type_name(retype.embd_type));
    return finish(cmd, s, &pr, out, t0, what);
}
