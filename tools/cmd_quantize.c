/*
 * cmd_quantize.c — `pinfer quantize IN OUT TYPE`: a model's weights in
 * another type by llama-quantize's recipes (src/sparse/quantize.h), from an
 * F32, F16 or BF16 GGUF; pinfer's predictors and metadata are kept. OUT
 * appears only when complete and may not be IN.
 */
#include "args.h"
#include "cmds.h"
#include "progress.h"

#include "base/outfile.h"
#include "base/timer.h"
#include "sparse/quantize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f, "usage: pinfer quantize [options] IN.gguf OUT.gguf TYPE\n"
               "  TYPE: q4_k_m (q4_k), q4_k_s, q5_k_m (q5_k), q5_k_s, q6_k, q8_0, q4_0, f16, bf16, f32\n"
               "        as llama-quantize's recipes: in q4_k_m the output head and the attention value and FFN down\n"
               "        projections of some layers are q6_k; from the same F32/F16/BF16 input the tensors are byte\n"
               "        for byte those llama-quantize writes without an importance matrix\n"
               "  --output-tensor-type T     the output head in type T\n"
               "  --token-embedding-type T   the token embedding in type T\n"
               "  --pure                     every quantized tensor in TYPE's base type\n"
               "  -t, --threads N            threads (default: all cores)\n"
               "  activation predictors (fc1/fc2) keep their type; ffn_down_t takes its layer's ffn_down type\n");
}

static bool type_arg(const char *cmd, const char *opt, const char *v, int *out) {
    const int t = pi_type_from_name(v);
    const pi_type_info *ti = t >= 0 ? pi_type_get((uint32_t)t) : NULL;
    if (!ti || !ti->compute) {
        fprintf(stderr, "pinfer: %s: %s '%s' is not a type pinfer computes\n", cmd, opt, v);
        return false;
    }
    *out = t;
    return true;
}

int cmd_quantize(int argc, char **argv) {
    const char *cmd = "quantize";
    pi_quant_params p = {.output_type = -1, .embd_type = -1};
    const char *pos[3];
    int npos = 0;
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--pure")) p.pure = true;
        else if (!strcmp(a, "--output-tensor-type") || !strcmp(a, "--token-embedding-type")) {
            if (!(v = arg_value(cmd, argc, argv, &i)) ||
                !type_arg(cmd, a, v, a[2] == 'o' ? &p.output_type : &p.embd_type))
                return 2;
        } else if (!strcmp(a, "-t")) {
            if (!(v = arg_value(cmd, argc, argv, &i)) || !arg_int(cmd, a, v, 1, 1024, &threads)) return 2;
        } else if (a[0] == '-' && a[1]) return arg_unknown(cmd, a);
        else if (npos < 3) pos[npos++] = a;
        else {
            fprintf(stderr, "pinfer: %s: unexpected argument '%s'; see pinfer %s --help\n", cmd, a, cmd);
            return 2;
        }
    }
    if (npos < 3) {
        usage(stderr);
        return 2;
    }
    const int r = pi_quant_recipe_from_name(pos[2]);
    if (r < 0) {
        fprintf(stderr, "pinfer: %s: unknown type '%s' (q4_k_m, q4_k_s, q5_k_m, q5_k_s, q6_k, q8_0, q4_0, f16, bf16, f32)\n",
                cmd, pos[2]);
        return 2;
    }
    p.recipe = (pi_quant_recipe)r;
    p.n_threads = threads > 0 ? (int)threads : 1;
    if (pi_outfile_check_distinct(pos[1], pos[0], "the input model")) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 2;
    }
    progress pr;
    progress_init(&pr, "quantize", "bytes", 0);
    p.progress = progress_bytes, p.progress_ctx = &pr;
    const double t0 = pi_time_s();
    pi_quant_report rep;
    if (pi_quantize_model(pos[0], pos[1], &p, &rep)) {
        progress_abort(&pr);
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 1;
    }
    struct stat si, so;
    const double in_mib = stat(pos[0], &si) ? 0.0 : (double)si.st_size / (1 << 20),
                 out_mib = stat(pos[1], &so) ? 0.0 : (double)so.st_size / (1 << 20), el = pi_time_s() - t0;
    char types[512] = "";
    for (int t = 0; t < PI_TYPE_COUNT; t++)
        if (rep.n_tensors[t])
            snprintf(types + strlen(types), sizeof types - strlen(types), "%s%lld %s", types[0] ? ", " : "",
                     (long long)rep.n_tensors[t], pi_type_name((uint32_t)t));
    fprintf(stderr, "quantize: wrote %s (%s: %.1f MiB from %.1f MiB in %.1f s, %d threads): %s%s\n", pos[1],
            pi_quant_recipe_name(p.recipe), out_mib, in_mib, el, p.n_threads, types,
            rep.n_fallback ? "; some rows did not fit the type's blocks: fell back as llama.cpp does" : "");
    return 0;
}
