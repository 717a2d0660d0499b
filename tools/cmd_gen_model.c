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
 * the FFN inputs the run observed with the same kernels decode uses. For a
 * mixture of experts the same per routed expert (over the tokens routed to
 * it), and per layer each expert's share of the tokens against the planted
 * one and the expert reuse of consecutive tokens (the share of a token's
 * experts the token before also used) against the planted design's
 * expectation and against independent routing at the measured loads.
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
            "usage: pinfer gen-model -o FILE [--bundle-out BUNDLE] [options]\n"
            "  --bundle-out BUNDLE  also write the model as a pinfer bundle file (planted sparsity only):\n"
            "                       neurons in planted hotness order with the expected activation counts,\n"
            "                       what convert --reorder --bundle would make; -o then gets the plain\n"
            "                       GGUF llama.cpp reads (no predictors, no ffn_down_t), the same weights\n"
            "  --preset NAME        shape: 7b-l8 (default), 7b, small, tiny; mixtures of experts: mixtral\n"
            "                       (Mixtral 8x7B: dim 4096, 32 layers, 8 experts top 2, ffn 14336 each,\n"
            "                       about 26 GB in q4_0), mixtral-l4 (its first 4 layers, 3.5 GB),\n"
            "                       moe-tiny (dim 256, 4 layers, 8 experts top 2, ffn 512); every preset\n"
            "                       is SiLU with plain random weights unless --act/--active plant sparsity\n"
            "  --type T             attention/FFN matrices: q4_0 (default), q8_0, f16, bf16, f32, q4_K,\n"
            "                       q5_K, q6_K (K-quants: n_embd and n_ff multiples of 256)\n"
            "  --embd-type T        token embedding (default q4_0)\n"
            "  --output-type T      output head (default q8_0)\n"
            "  --dim N --n-head N --n-head-kv N --ffn N --layers N --ctx N --vocab-size N\n"
            "                       override the preset's shape (--ffn is per expert in a mixture)\n"
            "  --experts N          a mixture of experts with N experts per layer, 2..256 (Mixtral's layout:\n"
            "                       router ffn_gate_inp, stacked ffn_*_exps)\n"
            "  --experts-used K     experts per token, 1..64 and at most --experts (default 2)\n"
            "  --act A              FFN activation: silu (default), relu, drelu\n"
            "  --active F           plant sparsity (relu/drelu): each token activates about fraction F\n"
            "                       of every layer's neurons, in a mixture of every routed expert's\n"
            "                       (default: no planting, plain noise)\n"
            "  --skew S             planted neuron frequencies follow a power law (rank+1)^-S (default 1)\n"
            "  --persist R          temporal persistence in [0, 0.99]: generation walks the vocabulary and\n"
            "                       consecutive tokens' FFN inputs correlate by R, so they share active neurons\n"
            "                       (each neuron keeps its frequency); default 0.2, calibrated on trained\n"
            "                       ReLU models (README); 0: independent tokens, the worst case for a cache\n"
            "  --expert-skew S      mixture, planted: the share of tokens routed to each expert follows a power\n"
            "                       law (rank+1)^-S over a random ranking of each layer's experts (default 1;\n"
            "                       0: even load, as a load-balanced router gives)\n"
            "  --expert-persist P   mixture, planted: the router's logits of consecutive tokens along the walk\n"
            "                       correlate by P in [0, 0.99], so a layer reuses the experts of the token\n"
            "                       before more than independent routing would (default 0.3: with top 2 of 8\n"
            "                       at even load 65%% of consecutive tokens share an expert against 46%% when\n"
            "                       independent, about what Mixtral's middle layers do; 0: independent);\n"
            "                       each routed expert still activates about F of its neurons\n"
            "  --predictor          also write activation predictors (fc1/fc2, per expert fc1_exps/fc2_exps)\n"
            "                       and their threshold\n"
            "  --pred-rank N        predictor rank (default n_embd/4: 1024 at dim 4096, like PowerInfer)\n"
            "  --pred-type T        predictor matrices: q8_0 (default), f16, bf16, f32, q4_0\n"
            "  --check N            after writing, run N random tokens (at most 4096) and print requested\n"
            "                       vs measured: active fraction, skew, predictor recall/precision; for a\n"
            "                       mixture per routed expert, and each expert's load and the expert reuse\n"
            "  --vocab FILE         copy the tokenizer from this GGUF (default: ../shared/models/vocab/\n"
            "                       ggml-vocab-llama-spm.gguf when present and --vocab-size is not given,\n"
            "                       else a byte-level vocabulary of --vocab-size tokens)\n"
            "  --seed N             weights are a function of the seed only (default 1)\n"
            "  -t N                 threads (default: all cores)\n");
}

static bool parse_type(const char *opt, const char *v, pi_type *out) {
    int t = pi_type_from_name(v);
    if (t < 0 || !pi_type_get((uint32_t)t)->compute) {
        fprintf(stderr,
                "pinfer: gen-model: %s '%s' is not one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, "
                "q6_K\n",
                opt, v);
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
   apart), with the kernels decode uses (Q8_0 or Q8_K inputs for quantized W). */
static bool check_matmul(pi_pool *pool, const pi_weight *w, const float *X, int64_t nb, float *Y) {
    const pi_kernels *k = pi_kernels_get();
    const int64_t n = w->ne[0];
    mm_job j = {k, w, X, (size_t)n * sizeof(float), nb, Y};
    void *xq = NULL;
    if (pi_vec_dot_type(w->type) != PI_TYPE_F32) {
        const size_t rb = pi_vec_dot_bytes(w->type, n);
        if (!(xq = malloc(rb * (size_t)nb))) return false;
        for (int64_t b = 0; b < nb; b++) pi_quantize_act(k, w->type, X + b * n, (uint8_t *)xq + rb * (size_t)b, n);
        j.X = xq;
        j.x_stride = rb;
    }
    pi_pool_for(pool, w->ne[1], 64, mm_rows, &j);
    free(xq);
    return true;
}

/* The --check tokens: random, in windows of win; with walk (a planted
   persistence), each window walks the vocabulary from a random token as
   generation does (past the special tokens). */
static void check_tokens(int64_t V, long n_tok, int64_t win, bool walk, int32_t *toks) {
    uint64_t r = 0x243f6a8885a308d3ull;
    const int64_t first = PI_GENMODEL_WALK_FIRST;
    for (long i = 0; i < n_tok; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        toks[i] = (int32_t)((r >> 33) % (uint64_t)V);
        if (walk && i % win) toks[i] = (int32_t)(toks[i - 1] + 1 < V ? toks[i - 1] + 1 : first);
        else if (walk && toks[i] < first) toks[i] = (int32_t)first;
    }
}

/* The --check pass: toks decoded in windows of win positions from an empty
   cache, batch tokens per call, with the observer installed; after each
   call `after` (may be NULL) takes what the observer recorded. 0, or 1 when
   a decode failed, 2 when `after` did. */
static int check_decode(pi_state *s, pi_ffn_observer obs, void *ctx, const int32_t *toks, long n_tok, int64_t win,
                        int64_t batch, bool (*after)(void *), void *after_ctx) {
    int rc = 0;
    pi_state_set_observer(s, obs, ctx);
    for (int64_t i = 0; i < n_tok && !rc; i += win) {
        pi_state_reset(s);
        for (int64_t b = i; b < i + win && b < n_tok && !rc; b += batch) {
            int64_t n = n_tok - b < batch ? n_tok - b : batch;
            if (b + n > i + win) n = i + win - b;
            if (pi_state_decode(s, toks + b, n)) rc = 1;
            else if (after && !after(after_ctx)) rc = 2;
        }
    }
    pi_state_set_observer(s, NULL, NULL);
    return rc;
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
    check_tokens(m->hp.n_vocab, n_tok, win, p->persist > 0.0, toks);
    if (check_decode(s, check_observe, &c, toks, n_tok, win, PI_DEFAULT_BATCH, NULL, NULL)) goto fail;

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

/* ---- --check for a mixture of experts ---- */

typedef struct {
    int64_t L, X, E, F, mask_bytes;
    uint64_t *routed;   /* (L X) tokens routed to each unit (il X + x) */
    uint64_t *active;   /* (L X) active neurons summed over them */
    uint32_t *counts;   /* (L X, F) tokens in which each neuron was active */
    /* consecutive tokens, per layer */
    int64_t *pos, *prev_pos; /* (L) the token being seen and the one before; -1: none */
    uint8_t *set, *prev;     /* (L, X) their experts */
    uint64_t *same, *used;   /* (L) experts also used by the position before; experts counted */
    /* predictor: per layer, the (unit, input, mask) of the routed experts of one decode call */
    int64_t cap;        /* entries per layer: tokens per decode call x experts per token */
    int64_t *n;         /* (L) */
    int32_t *unit;      /* (L, cap) */
    float *x;           /* (L, cap, E) */
    uint8_t *mask;      /* (L, cap, mask_bytes) */
    uint64_t *tp, *pred, *act; /* (L X) */
} moe_rec;

/* The positions of layer il's token are over: count its experts shared with the position before. */
static void moe_close(moe_rec *c, int64_t il) {
    if (c->pos[il] < 0) return;
    uint8_t *cur = c->set + il * c->X, *prev = c->prev + il * c->X;
    if (c->prev_pos[il] >= 0 && c->prev_pos[il] == c->pos[il] - 1)
        for (int64_t x = 0; x < c->X; x++) {
            c->same[il] += cur[x] & prev[x];
            c->used[il] += cur[x];
        }
    memcpy(prev, cur, (size_t)c->X);
    memset(cur, 0, (size_t)c->X);
    c->prev_pos[il] = c->pos[il];
    c->pos[il] = -1;
}

static void moe_observe(void *ctx, int64_t unit, int64_t pos, const float *ffn_in, const float *act) {
    moe_rec *c = ctx;
    const int64_t il = unit / c->X, x = unit % c->X, F = c->F;
    if (c->pos[il] != pos) moe_close(c, il);
    c->pos[il] = pos;
    c->set[il * c->X + x] = 1;
    uint32_t *cnt = c->counts + (size_t)unit * (size_t)F;
    uint64_t a = 0;
    for (int64_t i = 0; i < F; i++)
        if (act[i] != 0.0f) cnt[i]++, a++;
    c->routed[unit]++;
    c->active[unit] += a;
    if (!c->x || c->n[il] >= c->cap) return;
    const int64_t e = il * c->cap + c->n[il]++;
    c->unit[e] = (int32_t)unit;
    memcpy(c->x + (size_t)e * (size_t)c->E, ffn_in, (size_t)c->E * sizeof(float));
    uint8_t *mk = c->mask + (size_t)e * (size_t)c->mask_bytes;
    memset(mk, 0, (size_t)c->mask_bytes);
    for (int64_t i = 0; i < F; i++)
        if (act[i] != 0.0f) mk[i >> 3] |= (uint8_t)(1u << (i & 7));
}

/* Expert x's slice of a stacked predictor matrix, as a matrix of its own. */
static pi_weight expert_view(const pi_weight *w, int64_t x) {
    pi_weight v = *w;
    v.data = (const uint8_t *)w->data + (size_t)x * (size_t)w->ne[1] * w->row_bytes;
    v.ne[2] = 1;
    return v;
}

/* Run the recorded entries through their experts' predictors; count
   predicted, active and both per unit. Returns false when out of memory. */
typedef struct {
    moe_rec *c;
    const pi_lm *m;
    pi_pool *pool;
    float *gx, *H, *Z;
    uint8_t *gm;
} moe_flush_ctx;

static bool moe_flush(moe_rec *c, const pi_lm *m, pi_pool *pool, float *gx, float *H, float *Z, uint8_t *gm);

/* check_decode's after-call hook: moe_flush. */
static bool moe_flush_after(void *ctx) {
    moe_flush_ctx *f = ctx;
    return moe_flush(f->c, f->m, f->pool, f->gx, f->H, f->Z, f->gm);
}

static bool moe_flush(moe_rec *c, const pi_lm *m, pi_pool *pool, float *gx, float *H, float *Z, uint8_t *gm) {
    const int64_t E = c->E, F = c->F;
    for (int64_t il = 0; il < c->L; il++) {
        const pi_layer *ly = &m->layers[il];
        const int64_t R = ly->fc1_exps.ne[1];
        for (int64_t x = 0; x < c->X; x++) {
            const int64_t unit = il * c->X + x;
            int64_t nb = 0;
            for (int64_t e = il * c->cap; e < il * c->cap + c->n[il]; e++) {
                if (c->unit[e] != unit) continue;
                memcpy(gx + nb * E, c->x + (size_t)e * (size_t)E, (size_t)E * sizeof(float));
                memcpy(gm + nb * c->mask_bytes, c->mask + (size_t)e * (size_t)c->mask_bytes, (size_t)c->mask_bytes);
                nb++;
            }
            if (!nb) continue;
            const pi_weight fc1 = expert_view(&ly->fc1_exps, x), fc2 = expert_view(&ly->fc2_exps, x);
            if (!check_matmul(pool, &fc1, gx, nb, H)) return false;
            for (int64_t i = 0; i < nb * R; i++) H[i] = H[i] > 0.0f ? H[i] : 0.0f;
            if (!check_matmul(pool, &fc2, H, nb, Z)) return false;
            const float thr = m->layer_threshold ? m->layer_threshold[unit] : m->sparse_threshold;
            for (int64_t t = 0; t < nb; t++) {
                const uint8_t *mk = gm + t * c->mask_bytes;
                for (int64_t i = 0; i < F; i++) {
                    bool a = mk[i >> 3] >> (i & 7) & 1, pr = Z[t * F + i] >= thr;
                    c->tp[unit] += a && pr;
                    c->pred[unit] += pr;
                    c->act[unit] += a;
                }
            }
        }
        c->n[il] = 0;
    }
    return true;
}

static int cmp_u32_desc(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Fraction of the n counts that hold 80% of their sum (sorts them). */
static double counts_cover80(uint32_t *v, int64_t n) {
    qsort(v, (size_t)n, sizeof *v, cmp_u32_desc);
    uint64_t total = 0, cum = 0;
    for (int64_t i = 0; i < n; i++) total += v[i];
    for (int64_t i = 0; i < n; i++) {
        cum += v[i];
        if ((double)cum >= 0.8 * (double)total) return (double)(i + 1) / (double)n;
    }
    return 1.0;
}

static int run_check_moe(const char *cmd, const char *path, const pi_genmodel_params *p, long n_tok) {
    pi_genmodel_plant info;
    if (pi_genmodel_plant_info(p, &info)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 1;
    }
    pi_lm *m = NULL;
    pi_state *s = NULL;
    moe_rec c = {0};
    int32_t *toks = NULL;
    double *freq = NULL, *load = NULL;
    float *gx = NULL, *H = NULL, *Z = NULL;
    uint8_t *gm = NULL;
    uint32_t *sorted = NULL;
    int rc = 1;
    double t0 = pi_time_s();
    if (pi_lm_load(path, PI_MAP_LOAD, &m)) goto fail;
    const int64_t E = m->hp.n_embd, F = m->hp.n_ff, L = m->hp.n_layer, X = m->hp.n_expert, K = m->hp.n_expert_used;
    const int64_t U = L * X, win = n_tok < 512 ? n_tok : 512;
    /* tokens per decode call: the predictor's records of one call stay under 256 MiB */
    int64_t batch = PI_DEFAULT_BATCH;
    const uint64_t per_tok = (uint64_t)(L * K) * (uint64_t)(E * (int64_t)sizeof(float) + (F + 7) / 8);
    if (m->has_predictor)
        while (batch > 1 && per_tok * (uint64_t)batch > ((uint64_t)256 << 20)) batch /= 2;
    if (pi_state_create(m, win, p->n_threads, &s)) goto fail;
    c.L = L, c.X = X, c.E = E, c.F = F, c.mask_bytes = (F + 7) / 8;
    c.routed = calloc((size_t)U, sizeof *c.routed);
    c.active = calloc((size_t)U, sizeof *c.active);
    c.counts = calloc((size_t)(U * F), sizeof *c.counts);
    c.pos = malloc((size_t)L * sizeof *c.pos);
    c.prev_pos = malloc((size_t)L * sizeof *c.prev_pos);
    c.set = calloc((size_t)U, 1);
    c.prev = calloc((size_t)U, 1);
    c.same = calloc((size_t)L, sizeof *c.same);
    c.used = calloc((size_t)L, sizeof *c.used);
    toks = malloc((size_t)n_tok * sizeof *toks);
    freq = malloc((size_t)F * sizeof *freq);
    load = malloc((size_t)X * sizeof *load);
    sorted = malloc((size_t)F * sizeof *sorted);
    if (!c.routed || !c.active || !c.counts || !c.pos || !c.prev_pos || !c.set || !c.prev || !c.same || !c.used ||
        !toks || !freq || !load || !sorted)
        goto nomem;
    for (int64_t l = 0; l < L; l++) c.pos[l] = c.prev_pos[l] = -1;
    if (m->has_predictor) {
        const int64_t R = m->layers[0].fc1_exps.ne[1];
        c.cap = batch * K;
        c.n = calloc((size_t)L, sizeof *c.n);
        c.unit = malloc((size_t)(L * c.cap) * sizeof *c.unit);
        c.x = malloc((size_t)(L * c.cap * E) * sizeof *c.x);
        c.mask = malloc((size_t)(L * c.cap * c.mask_bytes));
        c.tp = calloc((size_t)U, sizeof *c.tp);
        c.pred = calloc((size_t)U, sizeof *c.pred);
        c.act = calloc((size_t)U, sizeof *c.act);
        gx = malloc((size_t)(c.cap * E) * sizeof *gx);
        gm = malloc((size_t)(c.cap * c.mask_bytes));
        H = malloc((size_t)(c.cap * R) * sizeof *H);
        Z = malloc((size_t)(c.cap * F) * sizeof *Z);
        if (!c.n || !c.unit || !c.x || !c.mask || !c.tp || !c.pred || !c.act || !gx || !gm || !H || !Z) goto nomem;
    }
    /* random tokens in windows of up to 512 positions from an empty cache;
       with any persistence each window walks the vocabulary from a random
       token, as generation does */
    const bool walk = p->persist > 0.0 || p->expert_persist > 0.0;
    check_tokens(m->hp.n_vocab, n_tok, win, walk, toks);
    moe_flush_ctx fl = {&c, m, s->pool, gx, H, Z, gm};
    const int drc = check_decode(s, moe_observe, &c, toks, n_tok, win, batch, c.x ? moe_flush_after : NULL, &fl);
    if (drc == 1) goto fail;
    if (drc == 2) goto nomem;
    for (int64_t l = 0; l < L; l++) moe_close(&c, l);

    printf("check: %ld random tokens through %s (%.1f s)\n", n_tok, path, pi_time_s() - t0);
    printf("planted: %lld experts, top %lld; router reads %lld reserved coordinates, the experts' gates k %lld "
           "directions of [%lld, %lld); %lld neurons per expert clipped at p = %.3f\n",
           (long long)X, (long long)K, (long long)info.router_dims, (long long)info.k,
           (long long)(32 + info.router_dims), (long long)info.d, (long long)info.n_clipped, info.p_max);
    printf("%-5s %-6s | %-6s %-17s | %-17s | %-17s | %-6s", "", "", "routed", "load (share)", "active fraction",
           "cover80", "freq");
    if (m->has_predictor) printf(" | predictor vs exact mask");
    printf("\n%-5s %-6s | %6s %8s %8s | %8s %8s | %8s %8s | %6s", "layer", "expert", "tokens", "planted", "measured",
           "request", "measured", "planted", "measured", "corr");
    if (m->has_predictor) printf(" | %7s %9s", "recall", "precision");
    printf("\n");
    double worst_a = 0.0, worst_l = 0.0, min_rec = 1.0, re_sum = 0.0, ind_sum = 0.0;
    const double T = (double)n_tok;
    for (int64_t l = 0; l < L; l++) {
        if (pi_genmodel_planted_load(p, l, load)) goto fail;
        double ind = 0.0;
        for (int64_t x = 0; x < X; x++) {
            const int64_t u = l * X + x;
            const double share = (double)c.routed[u] / T;
            ind += share * share / (double)K;
            if (fabs(share - load[x]) > worst_l) worst_l = fabs(share - load[x]);
            if (pi_genmodel_planted_freq(p, u, freq)) goto fail;
            double mean = c.routed[u] ? (double)c.active[u] / (double)c.routed[u] / (double)F : 0.0;
            if (c.routed[u] && fabs(mean - p->active) > worst_a) worst_a = fabs(mean - p->active);
            const uint32_t *cnt = c.counts + (size_t)u * (size_t)F;
            double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0, n_u = c.routed[u] ? (double)c.routed[u] : 1.0;
            for (int64_t i = 0; i < F; i++) {
                double a = freq[i], b = (double)cnt[i] / n_u;
                sx += a, sy += b, sxx += a * a, syy += b * b, sxy += a * b;
            }
            double cxy = sxy - sx * sy / (double)F, vx = sxx - sx * sx / (double)F, vy = syy - sy * sy / (double)F;
            double corr = vx > 0 && vy > 0 ? cxy / sqrt(vx * vy) : 0.0;
            memcpy(sorted, cnt, (size_t)F * sizeof *sorted);
            double cov = counts_cover80(sorted, F);
            printf("%-5lld %-6lld | %6llu %8.3f %8.3f | %8.3f %8.3f | %8.3f %8.3f | %6.3f", (long long)l, (long long)x,
                   (unsigned long long)c.routed[u], load[x], share, p->active, mean, info.cover80, cov, corr);
            if (m->has_predictor) {
                double rec = c.act[u] ? (double)c.tp[u] / (double)c.act[u] : 1.0;
                double prec = c.pred[u] ? (double)c.tp[u] / (double)c.pred[u] : 1.0;
                if (c.act[u] && rec < min_rec) min_rec = rec;
                printf(" | %7.3f %9.3f", rec, prec);
            }
            printf("\n");
        }
        double re = c.used[l] ? (double)c.same[l] / (double)c.used[l] : 0.0;
        re_sum += re / (double)L;
        ind_sum += ind / (double)L;
        printf("layer %lld: expert reuse %.3f (planted: expected %.3f; independent routing at these loads %.3f)\n",
               (long long)l, re, info.expert_reuse, ind);
    }
    printf("worst |active - requested| %.3f over experts; worst |load - planted| %.3f", worst_a, worst_l);
    if (m->has_predictor)
        printf("; predictor threshold %.3f: lowest expert recall %.3f (expected %.3f, precision %.3f)",
               (double)m->sparse_threshold, min_rec, info.recall, info.precision);
    printf("\nexpert reuse (share of a token's experts the token before also used): %.3f; planted %.3f (router "
           "correlation %.2f along the walk); independent: %.3f measured loads, %.3f planted\n",
           re_sum, info.expert_reuse, info.router_corr, ind_sum, info.expert_reuse_independent);
    printf("(load: share of tokens routed to the expert; active: mean fraction of an expert's neurons active per\n"
           " token routed to it; cover80: fraction of its neurons that account for 80%% of its activations; freq\n"
           " corr: correlation of each neuron's measured frequency with its planted one)\n");
    rc = 0;
    goto out;
nomem:
    fprintf(stderr, "pinfer: %s: check: out of memory\n", cmd);
    goto out;
fail:
    fprintf(stderr, "pinfer: %s: check: %s\n", cmd, pi_last_error());
out:
    free(c.routed);
    free(c.active);
    free(c.counts);
    free(c.pos);
    free(c.prev_pos);
    free(c.set);
    free(c.prev);
    free(c.same);
    free(c.used);
    free(c.n);
    free(c.unit);
    free(c.x);
    free(c.mask);
    free(c.tp);
    free(c.pred);
    free(c.act);
    free(gx);
    free(gm);
    free(H);
    free(Z);
    free(toks);
    free(freq);
    free(load);
    free(sorted);
    pi_state_free(s);
    pi_lm_free(m);
    return rc;
}

int cmd_gen_model(int argc, char **argv) {
    static const char *const valued[] = {"-o", "--preset", "--type", "--embd-type", "--output-type", "--pred-type",
                                         "--vocab", "--active", "--skew", "--persist", "--act", "--dim", "--n-head", "--n-head-kv",
                                         "--ffn", "--layers", "--ctx", "--vocab-size", "--pred-rank", "--seed", "-t",
                                         "--check", "--experts", "--experts-used", "--expert-skew", "--expert-persist", "--bundle-out"};
    const char *cmd = "gen-model", *out = NULL, *preset = "7b-l8", *vocab = NULL, *bundle_out = NULL;
    pi_genmodel_params p;
    /* the preset is applied first, the shape options after it */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--preset") && i + 1 < argc) preset = argv[i + 1];
    if (pi_genmodel_preset(preset, &p)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 2;
    }
    static const char default_vocab[] = "../shared/models/vocab/ggml-vocab-llama-spm.gguf";
    bool vocab_given = false, vocab_size_given = false, skew_given = false, experts_given = false, used_given = false,
         router_given = false;
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
        else if (!strcmp(a, "--bundle-out")) bundle_out = v;
        else if (!strcmp(a, "--preset")) continue;
        else if (!strcmp(a, "--type")) { if (!parse_type(a, v, &p.type)) return 2; }
        else if (!strcmp(a, "--embd-type")) { if (!parse_type(a, v, &p.embd_type)) return 2; }
        else if (!strcmp(a, "--output-type")) { if (!parse_type(a, v, &p.output_type)) return 2; }
        else if (!strcmp(a, "--pred-type")) { if (!parse_type(a, v, &p.pred_type)) return 2; }
        else if (!strcmp(a, "--vocab")) { vocab = v; vocab_given = true; }
        else if (!strcmp(a, "--active")) { if (!parse_real(a, v, 0.001, 0.9, &p.active)) return 2; }
        else if (!strcmp(a, "--skew")) { if (!parse_real(a, v, 0.0, 4.0, &p.skew)) return 2; skew_given = true; }
        else if (!strcmp(a, "--persist")) { if (!parse_real(a, v, 0.0, 0.99, &p.persist)) return 2; skew_given |= p.persist > 0.0; }
        else if (!strcmp(a, "--expert-skew")) { if (!parse_real(a, v, 0.0, 4.0, &p.expert_skew)) return 2; router_given = true; }
        else if (!strcmp(a, "--expert-persist")) { if (!parse_real(a, v, 0.0, 0.99, &p.expert_persist)) return 2; router_given = true; }
        else if (!strcmp(a, "--experts")) {
            if (!arg_int(cmd, a, v, 2, PI_GENMODEL_MAX_EXPERTS, &n)) return 2;
            p.n_expert = n;
            experts_given = true;
        } else if (!strcmp(a, "--experts-used")) {
            if (!arg_int(cmd, a, v, 1, PI_MOE_MAX_USED, &n)) return 2;
            p.n_expert_used = n;
            used_given = true;
        }
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
                vocab_size_given |= ints[k].dst == &p.n_vocab;
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
    if (bundle_out && (p.active == 0.0 || p.act == PI_ACT_SILU)) {
        fprintf(stderr, "pinfer: %s: --bundle-out needs planted sparsity (--act relu|drelu --active F)\n", cmd);
        return 2;
    }
    if (bundle_out && pi_outfile_check_distinct(bundle_out, out, "-o")) {
        fprintf(stderr, "pinfer: %s: --bundle-out: %s\n", cmd, pi_last_error());
        return 2;
    }
    /* experts: a dense preset made a mixture uses Mixtral's top 2 unless told */
    if (experts_given && !used_given && !p.n_expert_used) p.n_expert_used = 2 < p.n_expert ? 2 : p.n_expert;
    if ((used_given || router_given) && !p.n_expert) {
        fprintf(stderr, "pinfer: %s: --experts-used, --expert-skew and --expert-persist need a mixture of experts "
                        "(--experts N or a mixture preset such as moe-tiny)\n", cmd);
        return 2;
    }
    if (p.n_expert && p.n_expert_used > p.n_expert) {
        fprintf(stderr, "pinfer: %s: --experts-used %lld is larger than --experts %lld%s: a token cannot use more "
                        "experts than a layer has\n", cmd, (long long)p.n_expert_used, (long long)p.n_expert,
                experts_given ? "" : " (the preset's)");
        return 2;
    }
    if (p.active == 0.0 && (p.predictor || skew_given || router_given || p.pred_rank || check)) {
        fprintf(stderr, "pinfer: %s: --skew, --persist, --expert-skew, --expert-persist, --predictor, --pred-rank and "
                        "--check need --active F (planted sparsity)\n",
                cmd);
        return 2;
    }
    if (vocab_given && vocab_size_given) {
        fprintf(stderr, "pinfer: %s: --vocab-size and --vocab %s together: a copied vocabulary has the size of its "
                        "own token list\n", cmd, vocab);
        return 2;
    }
    /* a size asked for is a byte-level vocabulary of that size, never the default file's */
    if (!vocab_given && !vocab_size_given && access(default_vocab, R_OK) == 0) vocab = default_vocab;
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
    if (bundle_out) {
        /* pinfer's bundle file first (the larger), then the plain file llama.cpp reads */
        if (pi_genmodel_write_bundle(&p, bundle_out)) {
            progress_abort(&pr);
            fprintf(stderr, "pinfer: %s: %s: %s\n", cmd, bundle_out, pi_last_error());
            return 1;
        }
        struct stat bs;
        const double el = pi_time_s() - t0, mib = stat(bundle_out, &bs) ? 0.0 : (double)bs.st_size / (1 << 20);
        fprintf(stderr, "\ngen-model: wrote %s (bundle file, %.1f MiB in %.1f s, %.1f MiB/s)\n", bundle_out, mib, el,
                el > 0 ? mib / el : 0.0);
        progress_init(&pr, "gen-model", "bytes", 0);
        p.plain = true;
    }
    if (pi_genmodel_write(&p, out)) {
        progress_abort(&pr);
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return 1;
    }
    const double el = pi_time_s() - t0;
    struct stat sb;
    const double mib = stat(out, &sb) ? 0.0 : (double)sb.st_size / (1 << 20);
    char experts[64] = "";
    if (p.n_expert)
        snprintf(experts, sizeof experts, ", %lld experts top %lld", (long long)p.n_expert, (long long)p.n_expert_used);
    fprintf(stderr, "gen-model: wrote %s (%.1f MiB in %.1f s, %.1f MiB/s; %s: dim %lld, %lld layers, ffn %lld%s, "
                    "heads %lld/%lld, %s)\n",
            out, mib, el, el > 0 ? mib / el : 0.0, preset, (long long)p.n_embd, (long long)p.n_layer, (long long)p.n_ff,
            experts, (long long)p.n_head, (long long)p.n_head_kv, pi_type_name(p.type));
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
            if (p.n_expert)
                fprintf(stderr, "gen-model: planted routing: expert loads %.3f..%.3f of tokens (skew %.2f), expert "
                        "persistence %.2f: expected expert reuse %.3f (independent %.3f)\n",
                        info.load_min, info.load_max, p.expert_skew, p.expert_persist, info.expert_reuse,
                        info.expert_reuse_independent);
        }
    }
    if (!check) return 0;
    return p.n_expert ? run_check_moe(cmd, out, &p, check) : run_check(cmd, out, &p, check);
}
