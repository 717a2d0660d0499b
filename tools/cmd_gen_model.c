/*
 * cmd_gen_model.c — `pinfer gen-model`: write a llama GGUF with random
 * weights of a chosen shape and type (for tests and benchmarks), optionally
 * with planted activation sparsity and predictors (model/genmodel.h).
 *
 * --check N proves a planted model does what was asked: it loads the file
 * written, runs N random tokens through it densely, and prints per layer the
 * requested and measured active fraction, the planted and measured skew
 * (fraction of neurons that account for 80% of activations) and, with a
 * predictor, its recall and precision against the exact mask, evaluated on
 * the FFN inputs the run observed with the same kernels decode uses.
 *
 * The file reaches -o only when complete (the GGUF writer goes through
 * base/outfile.h): a failure (disk full, `ulimit -f`) leaves a previous file
 * there untouched. Progress goes to stderr (tools/progress.h), then one
 * summary line.
 */
#include "args.h"
#include "cmds.h"
#include "progress.h"

#include "base/outfile.h"
#include "base/timer.h"
#include "model/genmodel.h"
#include "model/session.h"
#include "sparse/stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: pinfer gen-model -o FILE [options]\n"
            "  --preset NAME        shape: 7b-l8 (default), 7b, small, tiny\n"
            "  --type T             attention/FFN matrices: q4_0 (default), q8_0, f16, bf16, f32\n"
            "  --embd-type T        token embedding (default q4_0)\n"
            "  --output-type T      output head (default q8_0)\n"
            "  --dim N --n-head N --n-head-kv N --ffn N --layers N --ctx N --vocab-size N\n"
            "                       override the preset's shape\n"
            "  --act A              FFN activation: silu (default), relu, drelu\n"
            "  --active F           plant sparsity (relu/drelu): each token activates about fraction F\n"
            "                       of every layer's neurons (default: no planting, plain noise)\n"
            "  --skew S             planted neuron frequencies follow a power law (rank+1)^-S (default 1)\n"
            "  --persist R          temporal persistence in [0, 0.99]: generation walks the vocabulary and\n"
            "                       consecutive tokens' FFN inputs correlate by R, so they share active neurons\n"
            "                       (each neuron keeps its frequency); default 0.2, calibrated on trained\n"
            "                       ReLU models (README); 0: independent tokens, the worst case for a cache\n"
            "  --predictor          also write activation predictors (fc1/fc2) and their threshold\n"
            "  --pred-rank N        predictor rank (default n_embd/4: 1024 at dim 4096, like PowerInfer)\n"
            "  --pred-type T        predictor matrices: q8_0 (default), f16, bf16, f32, q4_0\n"
            "  --check N            after writing, run N random tokens (at most 4096) and print requested\n"
            "                       vs measured: active fraction, skew, predictor recall/precision\n"
            "  --vocab FILE         copy the tokenizer from this GGUF (default: ../shared/models/vocab/\n"
            "                       ggml-vocab-llama-spm.gguf when present, else a byte-level vocabulary)\n"
            "  --seed N             weights are a function of the seed only (default 1)\n"
            "  -t N                 threads (default: all cores)\n");
}

static bool parse_type(const char *opt, const char *v, pi_type *out) {
    int t = pi_type_from_name(v);
    if (t < 0 || !pi_type_get((uint32_t)t)->compute) {
        fprintf(stderr, "pinfer: gen-model: %s '%s' is not one of f32, f16, bf16, q8_0, q4_0\n", opt, v);
        return false;
    }
    *out = (pi_type)t;
    return true;
}

static bool parse_real(const char *opt, const char *v, double lo, double hi, double *out) {
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "pinfer: gen-model: %s '%s' is not a number in [%g, %g]\n", opt, v, lo, hi);
        return false;
    }
    *out = x;
    return true;
}

/* ---- --check ---- */

typedef struct {
    pi_stats *st;
    int64_t n_tok, E, F, mask_bytes;
    float *x;      /* (n_layer, n_tok, E) FFN inputs */
    uint8_t *mask; /* (n_layer, n_tok, mask_bytes) active neurons, bit i%8 of byte i/8 */
    int64_t *seen; /* (n_layer) tokens recorded per layer (a batch reaches layer 1 after all of it passed layer 0) */
} check_rec;

static void check_observe(void *ctx, int64_t layer, int64_t pos, const float *ffn_in, const float *act) {
    check_rec *c = ctx;
    pi_stats_observe(c->st, layer, pos, ffn_in, act);
    if (!c->x) return;
    int64_t t = c->seen[layer]++;
    float *x = c->x + ((size_t)layer * (size_t)c->n_tok + (size_t)t) * (size_t)c->E;
    uint8_t *mk = c->mask + ((size_t)layer * (size_t)c->n_tok + (size_t)t) * (size_t)c->mask_bytes;
    memcpy(x, ffn_in, (size_t)c->E * sizeof *x);
    memset(mk, 0, (size_t)c->mask_bytes);
    for (int64_t i = 0; i < c->F; i++)
        if (act[i] != 0.0f) mk[i >> 3] |= (uint8_t)(1u << (i & 7));
}

typedef struct {
    const pi_kernels *k;
    const pi_weight *w;
    const void *X;     /* nb inputs of w's vec_dot type */
    size_t x_stride;
    int64_t nb;
    float *Y;          /* (nb, w->ne[1]) */
} mm_job;

static void mm_rows(void *ctx, int64_t r0, int64_t r1, int tid) {
    (void)tid;
    mm_job *j = ctx;
    j->k->matmul[j->w->type](j->w->ne[0], j->w->data, j->w->row_bytes, r0, r1, j->X, j->x_stride, j->nb, j->Y,
                             j->w->ne[1]);
}

/* Y = W X for nb float inputs of length w->ne[0] (X rows x_stride floats
   apart), with the kernels decode uses (Q8_0 inputs for quantized W). */
static bool check_matmul(pi_pool *pool, const pi_weight *w, const float *X, int64_t nb, float *Y) {
    const pi_kernels *k = pi_kernels_get();
    const int64_t n = w->ne[0];
    mm_job j = {k, w, X, (size_t)n * sizeof(float), nb, Y};
    void *xq = NULL;
    if (pi_vec_dot_type(w->type) == PI_TYPE_Q8_0) {
        size_t rb = (size_t)(n / 32) * sizeof(pi_block_q8_0);
        if (!(xq = malloc(rb * (size_t)nb))) return false;
        for (int64_t b = 0; b < nb; b++) k->quantize_q8_0(X + b * n, (pi_block_q8_0 *)((uint8_t *)xq + rb * (size_t)b), n);
        j.X = xq;
        j.x_stride = rb;
    }
    pi_pool_for(pool, w->ne[1], 64, mm_rows, &j);
    free(xq);
    return true;
}

static int run_check(const char *cmd, const char *path, const pi_genmodel_params *p, long n_tok) {
    pi_genmodel_plant info;
    if (pi_genmodel_plant_info(p, &info)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 1;
    }
    pi_lm *m = NULL;
    pi_state *s = NULL;
    check_rec c = {0};
    int32_t *toks = NULL;
    double *freq = NULL;
    float *H = NULL, *Z = NULL;
    int rc = 1;
    double t0 = pi_time_s();
    if (pi_lm_load(path, PI_MAP_LOAD, &m) || pi_stats_for_model(m, 0.0f, &c.st)) goto fail;
    const int64_t E = m->hp.n_embd, F = m->hp.n_ff, L = m->hp.n_layer, win = n_tok < 512 ? n_tok : 512;
    if (pi_state_create(m, win, p->n_threads, &s)) goto fail;
    c.n_tok = n_tok, c.E = E, c.F = F, c.mask_bytes = (F + 7) / 8;
    toks = malloc((size_t)n_tok * sizeof *toks);
    freq = malloc((size_t)F * sizeof *freq);
    if (!toks || !freq) goto nomem;
    if (m->has_predictor) {
        c.x = malloc((size_t)(L * n_tok * E) * sizeof *c.x);
        c.mask = malloc((size_t)(L * n_tok * c.mask_bytes));
        c.seen = calloc((size_t)L, sizeof *c.seen);
        if (!c.x || !c.mask || !c.seen) goto nomem;
    }
    /* random tokens, windows of up to 512 positions from an empty cache;
       with persistence, each window walks the vocabulary from a random
       token as generation does (past the special tokens) */
    uint64_t r = 0x243f6a8885a308d3ull;
    const int64_t V = m->hp.n_vocab, first = PI_GENMODEL_WALK_FIRST;
    for (long i = 0; i < n_tok; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        toks[i] = (int32_t)((r >> 33) % (uint64_t)V);
        if (p->persist > 0.0 && i % win)
            toks[i] = (int32_t)(toks[i - 1] + 1 < V ? toks[i - 1] + 1 : first);
        else if (p->persist > 0.0 && toks[i] < first)
            toks[i] = (int32_t)first;
    }
    pi_state_set_observer(s, check_observe, &c);
    for (int64_t i = 0; i < n_tok; i += win) {
        pi_state_reset(s);
        for (int64_t b = i; b < i + win && b < n_tok; b += PI_MAX_BATCH) {
            int64_t n = n_tok - b < PI_MAX_BATCH ? n_tok - b : PI_MAX_BATCH;
            if (b + n > i + win) n = i + win - b;
            if (pi_state_decode(s, toks + b, n)) goto fail;
        }
    }
    pi_state_set_observer(s, NULL, NULL);

    printf("check: %ld random tokens through %s (%.1f s)\n", n_tok, path, pi_time_s() - t0);
    printf("planted: k %lld directions, reserved coordinates [0, %lld), %lld neurons clipped at p = %.3f\n",
           (long long)info.k, (long long)info.d, (long long)info.n_clipped, info.p_max);
    printf("%-5s | %-19s | %-19s | %-6s", "", "active fraction", "cover80", "freq");
    if (m->has_predictor) printf(" | predictor vs exact mask");
    printf("\n%-5s | %9s %9s | %9s %9s | %6s", "layer", "requested", "measured", "planted", "measured", "corr");
    if (m->has_predictor) printf(" | %7s %9s %8s", "recall", "precision", "pred/act");
    printf("\n");
    double worst_a = 0.0, worst_c = 0.0, min_rec = 1.0;
    for (int64_t l = 0; l < L; l++) {
        if (pi_genmodel_planted_freq(p, l, freq)) goto fail;
        double mean = pi_stats_mean_active(c.st, l);
        double cov = (double)pi_stats_neurons_for(c.st, l, 0.8) / (double)F;
        if (fabs(mean - p->active) > worst_a) worst_a = fabs(mean - p->active);
        if (fabs(cov - info.cover80) > worst_c) worst_c = fabs(cov - info.cover80);
        /* per neuron: does the measured frequency follow the planted one? */
        double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0, T = (double)c.st->tokens;
        for (int64_t i = 0; i < F; i++) {
            double x = freq[i], y = (double)c.st->counts[l * F + i] / T;
            sx += x, sy += y, sxx += x * x, syy += y * y, sxy += x * y;
        }
        double cxy = sxy - sx * sy / (double)F, vx = sxx - sx * sx / (double)F, vy = syy - sy * sy / (double)F;
        double corr = vx > 0 && vy > 0 ? cxy / sqrt(vx * vy) : 0.0;
        printf("%-5lld | %9.3f %9.3f | %9.3f %9.3f | %6.3f", (long long)l, p->active, mean, info.cover80, cov, corr);
        if (m->has_predictor) {
            const pi_layer *ly = &m->layers[l];
            const int64_t R = ly->fc1.ne[1];
            const float *X = c.x + (size_t)(l * n_tok * E);
            if (!H) {
                H = malloc((size_t)(n_tok * R) * sizeof *H);
                Z = malloc((size_t)(n_tok * F) * sizeof *Z);
                if (!H || !Z) goto nomem;
            }
            if (!check_matmul(s->pool, &ly->fc1, X, n_tok, H)) goto nomem;
            for (int64_t i = 0; i < n_tok * R; i++) H[i] = H[i] > 0.0f ? H[i] : 0.0f;
            if (!check_matmul(s->pool, &ly->fc2, H, n_tok, Z)) goto nomem;
            uint64_t tp = 0, pred = 0, act = 0;
            for (int64_t t = 0; t < n_tok; t++) {
                const uint8_t *mk = c.mask + (size_t)(l * n_tok + t) * (size_t)c.mask_bytes;
                for (int64_t i = 0; i < F; i++) {
                    bool a = mk[i >> 3] >> (i & 7) & 1, pr = Z[t * F + i] >= m->sparse_threshold;
                    tp += a && pr;
                    pred += pr;
                    act += a;
                }
            }
            double rec = act ? (double)tp / (double)act : 1.0, prec = pred ? (double)tp / (double)pred : 1.0;
            if (rec < min_rec) min_rec = rec;
            printf(" | %7.3f %9.3f %8.2f", rec, prec, act ? (double)pred / (double)act : 0.0);
        }
        printf("\n");
    }
    printf("worst |active - requested| %.3f; worst |cover80 - planted| %.3f", worst_a, worst_c);
    if (m->has_predictor)
        printf("; predictor threshold %.3f: lowest recall %.3f (expected %.3f, precision %.3f)", (double)m->sparse_threshold,
               min_rec, info.recall, info.precision);
    if (c.st->reuse_tokens) {
        double re = 0.0, ind = 0.0;
        for (int64_t l = 0; l < L; l++) {
            re += pi_stats_reuse(c.st, l, 1) / (double)L;
            ind += pi_stats_reuse_independent(c.st, l, 1) / (double)L;
        }
        printf("\ntemporal reuse (share of a token's active neurons active in the previous one): %.3f; independent "
               "tokens: %.3f (persistence %.2f)", re, ind, p->persist);
    }
    printf("\n(active: mean fraction of a layer's neurons active per token; cover80: fraction of neurons that\n"
           " account for 80%% of activations; freq corr: correlation of each neuron's measured frequency with\n"
           " its planted one; recall/precision: predicted set vs exact mask)\n");
    rc = 0;
    goto out;
nomem:
    fprintf(stderr, "pinfer: %s: check: out of memory\n", cmd);
    goto out;
fail:
    fprintf(stderr, "pinfer: %s: check: %s\n", cmd, pi_last_error());
out:
    free(H);
    free(Z);
    free(toks);
    free(freq);
    free(c.x);
    free(c.mask);
    free(c.seen);
    pi_stats_free(c.st);
    pi_state_free(s);
    pi_lm_free(m);
    return rc;
}

int cmd_gen_model(int argc, char **argv) {
    static const char *const valued[] = {"-o", "--preset", "--type", "--embd-type", "--output-type", "--pred-type",
                                         "--vocab", "--active", "--skew", "--persist", "--act", "--dim", "--n-head", "--n-head-kv",
                                         "--ffn", "--layers", "--ctx", "--vocab-size", "--pred-rank", "--seed", "-t",
                                         "--check"};
    const char *cmd = "gen-model", *out = NULL, *preset = "7b-l8", *vocab = NULL;
    pi_genmodel_params p;
    /* the preset is applied first, the shape options after it */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--preset") && i + 1 < argc) preset = argv[i + 1];
    if (pi_genmodel_preset(preset, &p)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 2;
    }
    static const char default_vocab[] = "../shared/models/vocab/ggml-vocab-llama-spm.gguf";
    bool vocab_given = false, skew_given = false;
    long check = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        long n;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--predictor")) {
            p.predictor = true;
            continue;
        }
        bool known = false;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) known |= !strcmp(a, valued[k]);
        if (!known) return arg_unknown(cmd, a);
        if (!(v = arg_value(cmd, argc, argv, &i))) return 2;
        if (!strcmp(a, "-o")) out = v;
        else if (!strcmp(a, "--preset")) continue;
        else if (!strcmp(a, "--type")) { if (!parse_type(a, v, &p.type)) return 2; }
        else if (!strcmp(a, "--embd-type")) { if (!parse_type(a, v, &p.embd_type)) return 2; }
        else if (!strcmp(a, "--output-type")) { if (!parse_type(a, v, &p.output_type)) return 2; }
        else if (!strcmp(a, "--pred-type")) { if (!parse_type(a, v, &p.pred_type)) return 2; }
        else if (!strcmp(a, "--vocab")) { vocab = v; vocab_given = true; }
        else if (!strcmp(a, "--active")) { if (!parse_real(a, v, 0.001, 0.9, &p.active)) return 2; }
        else if (!strcmp(a, "--skew")) { if (!parse_real(a, v, 0.0, 4.0, &p.skew)) return 2; skew_given = true; }
        else if (!strcmp(a, "--persist")) { if (!parse_real(a, v, 0.0, 0.99, &p.persist)) return 2; skew_given |= p.persist > 0.0; }
        else if (!strcmp(a, "--act")) {
            if (!strcmp(v, "silu")) p.act = PI_ACT_SILU;
            else if (!strcmp(v, "relu")) p.act = PI_ACT_RELU;
            else if (!strcmp(v, "drelu")) p.act = PI_ACT_DRELU;
            else {
                fprintf(stderr, "pinfer: %s: --act '%s' is not one of silu, relu, drelu\n", cmd, v);
                return 2;
            }
        } else {
            struct { const char *opt; int64_t *dst; long lo, hi; } ints[] = {
                {"--dim", &p.n_embd, 2, 1 << 17}, {"--n-head", &p.n_head, 1, 4096},
                {"--n-head-kv", &p.n_head_kv, 1, 4096}, {"--ffn", &p.n_ff, 1, 1 << 17},
                {"--layers", &p.n_layer, 1, 4096}, {"--ctx", &p.n_ctx, 1, 1 << 24},
                {"--vocab-size", &p.n_vocab, 259, 1 << 22}, {"--pred-rank", &p.pred_rank, 1, 1 << 17},
            };
            bool found = false;
            for (size_t k = 0; k < sizeof ints / sizeof ints[0] && !found; k++) {
                if (strcmp(a, ints[k].opt)) continue;
                if (!arg_int(cmd, a, v, ints[k].lo, ints[k].hi, &n)) return 2;
                *ints[k].dst = n;
                found = true;
            }
            if (!found && !strcmp(a, "--seed")) {
                if (!arg_int(cmd, a, v, 0, 0x7fffffff, &n)) return 2;
                p.seed = (uint64_t)n;
                found = true;
            }
            if (!found && !strcmp(a, "-t")) {
                if (!arg_int(cmd, a, v, 1, 1024, &n)) return 2;
                p.n_threads = (int)n;
                found = true;
            }
            if (!found && !arg_int(cmd, a, v, 1, 4096, &check)) return 2; /* --check */
        }
    }
    if (!out) {
        fprintf(stderr, "pinfer: %s: -o FILE is required\n", cmd);
        usage(stderr);
        return 2;
    }
    if (p.active == 0.0 && (p.predictor || skew_given || p.pred_rank || check)) {
        fprintf(stderr, "pinfer: %s: --skew, --persist, --predictor, --pred-rank and --check need --active F (planted "
                        "sparsity)\n",
                cmd);
        return 2;
    }
    if (!vocab_given && access(default_vocab, R_OK) == 0) vocab = default_vocab;
    /* refused before any work: an output that would replace the vocabulary it copies */
    if (pi_outfile_check_distinct(out, vocab, "the vocabulary")) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 2;
    }
    p.vocab_path = vocab;
    progress pr;
    progress_init(&pr, "gen-model", "bytes", 0);
    p.progress = progress_bytes;
    p.progress_ctx = &pr;
    const double t0 = pi_time_s();
    if (pi_genmodel_write(&p, out)) {
        progress_abort(&pr);
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 1;
    }
    const double el = pi_time_s() - t0;
    struct stat sb;
    const double mib = stat(out, &sb) ? 0.0 : (double)sb.st_size / (1 << 20);
    fprintf(stderr, "gen-model: wrote %s (%.1f MiB in %.1f s, %.1f MiB/s; %s: dim %lld, %lld layers, ffn %lld, "
                    "heads %lld/%lld, %s)\n",
            out, mib, el, el > 0 ? mib / el : 0.0, preset, (long long)p.n_embd, (long long)p.n_layer, (long long)p.n_ff,
            (long long)p.n_head, (long long)p.n_head_kv, pi_type_name(p.type));
    if (p.active > 0.0) {
        pi_genmodel_plant info;
        if (pi_genmodel_plant_info(&p, &info) == PI_OK) {
            fprintf(stderr, "gen-model: planted %s sparsity: active %.3f, skew %.2f (80%% of activations in %.1f%% of "
                    "neurons)", pi_ffn_act_name(p.act), p.active, p.skew, 100.0 * info.cover80);
            if (p.persist > 0.0) fprintf(stderr, "; persistence %.2f along the walk", p.persist);
            if (p.predictor)
                fprintf(stderr, "; predictor rank %lld %s, threshold %.3f, expected recall %.3f, precision %.3f",
                        (long long)info.rank, pi_type_name(p.pred_type), (double)info.threshold, info.recall,
                        info.precision);
            fprintf(stderr, "\n");
        }
    }
    return check ? run_check(cmd, out, &p, check) : 0;
}
