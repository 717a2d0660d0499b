/*
 * genmodel.c — writing random-weight llama GGUFs quickly, optionally with
 * planted activation sparsity.
 *
 * Each row of each tensor gets its own PRNG stream (seed, tensor slot, row),
 * so rows are generated in parallel yet the file does not depend on the
 * thread count. Weights are uniform with standard deviation 1/sqrt(n_in),
 * which keeps activations of order one through the layers; norms are one.
 * Rows are generated and quantized a slab at a time and streamed to the
 * writer, so memory use stays small whatever the model size.
 *
 * Planted sparsity (act relu/drelu, active > 0). Llama FFNs have no biases,
 * yet a neuron that fires with frequency p needs an offset. So:
 *  - Every token embedding has coordinate 0 = C = sqrt(rho * n_embd) and the
 *    rest scaled to a fixed norm: the row's rms is exactly 1 and coordinate 0
 *    holds the share rho of its energy. Coordinates [1, 32) (the rest of
 *    coordinate 0's quantization block) are left out of what follows, so a
 *    Q4_0 embedding, whose block 0 is dominated by C, loses nothing.
 *  - Coordinates [0, d) are reserved: row j < d of every attn_output and
 *    ffn_down is zero, so no layer writes them. Whatever the layers add
 *    elsewhere only grows the rms, and RMSNorm then scales the whole reserved
 *    part of every later FFN input by the same factor. Every sign below is
 *    invariant to that scale, so each layer sees exactly the statistics
 *    planted in the embedding. attn_output and ffn_down are also scaled by
 *    PLANT_GAIN / sqrt(n_layer), so the residual's rms grows by a few
 *    percent only and the predictor's fixed threshold meets logits of the
 *    planned size. The zero rows are stored and computed like any others.
 *    The price: a token's activity depends on the token, not on its
 *    context. Over random tokens that measures the planted statistics; over
 *    natural text frequent tokens repeat their masks, so a profile shows
 *    more skew than planted.
 *  - Per layer, k orthonormal directions U over D' = [32, d) and per neuron i
 *    a unit k-vector a_i, a unit vector r_i in D' orthogonal to U and an
 *    offset t_i:
 *        gate_i = (c1 a_i.U + eps r_i) . x / sigma  -  t_i x_0 / C
 *    sigma is the spread of an embedding coordinate, so across tokens
 *    gate_i ~ N(-t_i, c1^2 + eps^2 = 1): P(gate_i > 0) = 1 - Phi(t_i) sets the
 *    frequency. The part c1 a_i.U x / sigma - t_i x_0 / C is what a
 *    predictor can know; eps r_i . x / sigma (and the weights' rounding) it
 *    cannot, which keeps recall and precision honest.
 *  - Frequencies: p(rank r) = min(p_max, c (r+1)^-S) with c chosen so that
 *    the mean is `active`, over a random ranking of each layer's neurons (so
 *    reordering has work to do).
 *  - ReLU: up rows are plain noise (relu(gate) * up is non-zero exactly when
 *    gate > 0). dReLU: up_i = w_i . x / sigma + b x_0 / C with w_i like r_i
 *    and b = Phi^-1(q), so P(up > 0) = q, independent of the gate; the gate
 *    is planted with p / q.
 *  - Predictor (PowerInfer's fc2 relu(fc1 x)): fc1 rows U/sigma, -U/sigma
 *    and e_0/C, since relu(u) - relu(-u) = u; fc2 row i = [c1 a_i, -c1 a_i,
 *    -t_i], so logit_i is gate_i without the noise. The analytic rank is
 *    2k+1; the rest of the rank, up to the realistic size, is random fc1 rows
 *    with zero fc2 columns, whose bytes and flops are paid like real ones.
 *    The threshold is set, from the planted p_i alone, for PLANT_RECALL
 *    (it must be in the header before any row exists); the rounding of a
 *    quantized gate counts as more unpredictable noise (quant_noise).
 *  - ffn_down_t is written next to ffn_down, the same values one neuron per
 *    row: the dense path keeps its matrix-vector product over ffn_down, the
 *    sparse path reads ffn_down_t, and each is measured at its best. In a
 *    quantized type the two are rounded along different axes, so the oracle
 *    path differs from dense by that rounding (exact in F32).
 *
 * Numbers (constants below): rho 0.25, eps 0.3, recall target 0.97, q 0.95,
 * p_max 0.99; d = n_embd/4 within [128, n_embd/2]; k = min(32, |D'|/4);
 * predictor rank n_embd/4, at least 2k+1, in whole blocks (PowerInfer's 1024
 * at 4096: with n_ff 14336 that is 10.7% of the FFN's parameters), Q8_0 by
 * default so a Q4_0 model pays about what a quantized real one would.
 *
 * Mixture of experts (n_expert X > 0, top K). Stacked tensors are written
 * expert after expert, so row r of a stack is row r mod n of expert r / n,
 * and every per-row construction above works on the global row r: its
 * stream, its rank, its direction a_i. With planted sparsity:
 *  - The reserved part D' is split: the router reads R = [32, 32 + n_r),
 *    n_r = max(32, X rounded up to 32), the experts' gates and predictors
 *    read G = [32 + n_r, d) (d grown for this where n_embd allows). Each
 *    expert of each layer is planted on G as a dense layer is on D' (its
 *    own ranking of neurons, k directions U_x, offsets t_i; the frequencies
 *    are the same multiset for every expert), and ffn_down_exps keeps rows
 *    [0, d) of every expert zero.
 *  - The embedding's R block is Gaussian (a sum of four uniforms, so the
 *    router's logits have the tails the calibration assumes); with expert
 *    persistence it is a moving average along the walk as D' is for
 *    --persist, with its own noise and weights expert_persist^j. Router row x
 *    (F32, as llama.cpp keeps ffn_gate_inp) = V_x / sigma + b_x e_0 / C with
 *    V orthonormal in R, so logit_x = b_x + z_x, the z_x independent N(0, 1)
 *    across experts (independent of everything G holds: routing says
 *    nothing about the neurons) and along the walk lag-1 correlated by
 *    expert_persist. RMSNorm scales every logit alike: the top K keep.
 *  - Popularity: the share of tokens routed to the expert of rank r is
 *    L(r) = min(p_max, c (r+1)^-expert_skew), sum K, over a random ranking of
 *    each layer's experts. The offsets b that give P(x in top K) = L are
 *    solved once (plant_router): P(x in top K) = integral over s of
 *    phi(s - b_x) P(at most K-1 other logits exceed s), the count a
 *    Poisson-binomial computed from both ends of the expert list, and
 *    b_x += Phi^-1(L_x) - Phi^-1(P_x) (damped) until it agrees to 1e-7.
 *  - Persistence cannot be written in closed form for K > 1; plant_info
 *    reports the expected reuse (share of a token's experts the previous
 *    token used) from a fixed-seed simulation of the calibrated router with
 *    the walk's lag-1 correlation, next to the independent sum L(r)^2 / K.
 * Without planting a mixture is plain noise like a dense model (the router
 * too, so routing is random but a fixed function of the token).
 *
 * Writing: rows are generated a slab at a time on the pool while a writer
 * thread writes the previous slab, so generation and the disk overlap.
 */
#include "genmodel.h"

#include "base/pool.h"
#include "gguf/bundle.h"
#include "gguf/names.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#define PLANT_RHO 0.25     /* share of an embedding's energy in coordinate 0 */
#define PLANT_EPS 0.30     /* sd of the unpredictable part of a gate (total sd 1) */
#define PLANT_RECALL 0.97  /* recall the predictor threshold is chosen for */
#define HIST_BINS 1024     /* the planted logit histograms: bins of 1/32 over [-16, 16), as profile's */
#define HIST_LO (-16.0)
#define HIST_W (1.0 / 32.0)
#define HIST_SUB 8         /* midpoints per bin of the integration */
#define PLANT_UP_POS 0.95  /* dReLU: P(up > 0) */
#define PLANT_PMAX 0.99    /* no neuron fires more often than this */
#define PLANT_GAIN 0.25    /* attn_output and ffn_down scale: gain / sqrt(n_layer) of the usual */
#define PLANT_D0 32        /* D' starts after coordinate 0's quantization block */
#define PLANT_MAX_K 32
#define WALK_TERMS 32     /* persistence: noise vectors averaged per embedding */
/* The presets' persistence, calibrated on the trained fixtures (README): at
   0.2 the share of a token's active neurons that were active in the previous
   token exceeds independence by 7.7% of the rest (relu) and 7.3% (drelu), as
   relu-stories (8.8%) and drelu-stories (7.4%) do on calib.txt. */
#define PLANT_PERSIST 0.2
/* The presets' expert persistence: the lag-1 correlation of the router's
   logits along the walk. Mixtral 8x7B's routing analysis (Jiang et al. 2024,
   section 5) has consecutive tokens share at least one of their two experts
   about 62-67% of the time in its middle layer, where independent top-2 of
   8 gives 46%, and their first choices agree about a quarter of the time
   (12.5%); at even load this value gives 65% and 23% (an expert reuse share
   of 0.37 against 0.25). */
#define PLANT_EXPERT_PERSIST 0.3
#define ROUTER_TAG_ORDER 3        /* layer_stream tags: the ranking of the experts, */
#define ROUTER_TAG_DIRS 4         /* the router's directions, */
#define EXPERT_TAG_RANK 0x100     /* + x: expert x's ranking of its neurons, */
#define EXPERT_TAG_DIRS 0x10000   /* + x: expert x's directions U */

typedef struct {
    const char *name;
    int64_t n_embd, n_head, n_head_kv, n_ff, n_layer, n_vocab, n_ctx;
    int64_t n_expert, n_expert_used;
} preset;

static const preset k_presets[] = {
    {"7b-l8", 4096, 32, 8, 14336, 8, 32000, 4096, 0, 0},
    {"7b", 4096, 32, 8, 14336, 32, 32000, 4096, 0, 0},
    {"small", 1024, 16, 4, 4096, 8, 32000, 2048, 0, 0},
    {"tiny", 256, 8, 4, 768, 4, 32000, 512, 0, 0},
    /* Mixtral 8x7B: 46.7B parameters, about 26 GB in Q4_0 */
    {"mixtral", 4096, 32, 8, 14336, 32, 32000, 32768, 8, 2},
    {"mixtral-l4", 4096, 32, 8, 14336, 4, 32000, 32768, 8, 2},
    {"moe-tiny", 256, 8, 4, 512, 4, 32000, 512, 8, 2},
};

static const char *const k_preset_names[] = {"7b-l8", "7b", "small", "tiny", "mixtral", "mixtral-l4", "moe-tiny", NULL};

const char *const *pi_genmodel_preset_names(void) { return k_preset_names; }

pi_status pi_genmodel_preset(const char *name, pi_genmodel_params *p) {
    for (size_t i = 0; i < sizeof k_presets / sizeof k_presets[0]; i++) {
        if (strcmp(name, k_presets[i].name)) continue;
        const preset *s = &k_presets[i];
        memset(p, 0, sizeof *p);
        p->n_embd = s->n_embd;
        p->n_head = s->n_head;
        p->n_head_kv = s->n_head_kv;
        p->n_ff = s->n_ff;
        p->n_layer = s->n_layer;
        p->n_vocab = s->n_vocab;
        p->n_ctx = s->n_ctx;
        p->type = PI_TYPE_Q4_0;
        p->embd_type = PI_TYPE_Q4_0;
        p->output_type = PI_TYPE_Q8_0;
        p->act = PI_ACT_SILU;
        p->seed = 1;
        p->name = s->name;
        p->skew = 1.0;
        p->persist = PLANT_PERSIST;
        p->pred_type = PI_TYPE_Q8_0;
        p->n_expert = s->n_expert;
        p->n_expert_used = s->n_expert_used;
        p->expert_skew = 1.0;
        p->expert_persist = PLANT_EXPERT_PERSIST;
        return PI_OK;
    }
    return pi_error(PI_ERR_NOT_FOUND, "unknown preset '%s' (7b-l8, 7b, small, tiny, mixtral, mixtral-l4, moe-tiny)",
                    name);
}

static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define GOLDEN 0x9e3779b97f4a7c15ull

/* The stream of row r of the tensor with stream `stream`. */
static uint64_t row_seed(uint64_t stream, int64_t r) { return mix(stream ^ mix((uint64_t)r + 0x632be59bd9b4e019ull)); }

/* The next value of a row's stream, uniform in [-1, 1). Element i of a row is
   mix(row_seed + (i + 1) * GOLDEN), so any element can be computed alone
   (ffn_down_t reads ffn_down's values that way). */
static inline float unif_at(uint64_t s) { return (float)(mix(s) >> 40) * 0x1.0p-24f * 2.0f - 1.0f; }
static inline float unif(uint64_t *s) {
    *s += GOLDEN;
    return unif_at(*s);
}

/* ---- the planted design ---- */

typedef struct {
    int64_t E, F, d, nd, k, R; /* nd = d - g0: size of the gates' block */
    int64_t g0;                /* the gates' block [g0, d): D' = [PLANT_D0, d), or G after the router's block */
    float C;                   /* coordinate 0 of every embedding */
    float sigma;               /* spread of an embedding coordinate other than 0 */
    float c1, eps;             /* gate = c1 (predictable) + eps (noise), c1^2 + eps^2 = 1 */
    float up_bias;             /* dReLU: up offset in sd units */
    double q;                  /* P(up > 0): 1 for ReLU */
    double *p;                 /* (F) planted activity by rank, non-increasing */
    float *t;                  /* (F) gate offset by rank */
    int64_t n_clipped;
    double cover80, recall, precision;
    float threshold;
    double persist;            /* lag-1 correlation along the walk; 0: none */
    float walk_w[WALK_TERMS];  /* moving-average weights, unit sum of squares */
    bool walk;                 /* the output head walks the vocabulary (any persistence) */
    /* mixture of experts: X == 0 for a dense model */
    int64_t X, K, nr;          /* experts, experts per token, size of the router's block R */
    double *load;              /* (X) planted share of tokens by expert rank, non-increasing, sum K */
    float *rb;                 /* (X) router offset by expert rank */
    int64_t n_load_clipped;
    double router_sd;          /* sd of a router logit around its offset (1, plus the embedding's rounding) */
    double router_corr;        /* lag-1 correlation of the router's block along the walk */
    double reuse, reuse_ind;   /* expected expert reuse, and for independent tokens */
    float walk_r[WALK_TERMS];  /* the router block's moving-average weights */
    int n_walk_r;              /* terms of walk_r used: 1 without expert persistence */
    /* the layer being written */
    int64_t layer;
    int32_t *rank;             /* (max(X, 1), F) rank of each neuron of each expert */
    int32_t *order;            /* (max(F, X)) scratch: neuron of each rank */
    float *U;                  /* (max(X, 1), k, nd) orthonormal rows over the gates' block, per expert */
    float *V;                  /* (X, nr) the router's orthonormal directions over R */
    int32_t *erank;            /* (X) rank of each expert */
    double *gs;                /* (max(nd, nr)) Gram-Schmidt scratch */
    uint64_t *down_seed;       /* (E) row streams of the layer's ffn_down */
} plant;

static double norm_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

/* Phi^-1(u) for u in (0, 1), by bisection: slow but exact to double precision
   and the same on every platform with a correct erfc. */
static double norm_quantile(double u) {
    double lo = -40.0, hi = 40.0;
    for (int i = 0; i < 100 && hi - lo > 1e-13; i++) {
        double m = 0.5 * (lo + hi);
        if (norm_cdf(m) < u) lo = m;
        else hi = m;
    }
    return 0.5 * (lo + hi);
}

/* Variance that rounding a gate row to type adds to the gate, relative to
   the gate's (unit) variance: for a row of roughly Gaussian values, Q4_0's
   step is about a block's max / 8 and its error uniform within a step. */
static double quant_noise(pi_type t) {
    switch (t) {
    case PI_TYPE_Q4_0: return 0.0075;
    case PI_TYPE_Q8_0: return 3e-5;
    case PI_TYPE_BF16: return 3e-6;
    default: return 0.0;
    }
}

static void plant_free(plant *pl) {
    free(pl->p);
    free(pl->t);
    free(pl->rank);
    free(pl->order);
    free(pl->U);
    free(pl->V);
    free(pl->erank);
    free(pl->load);
    free(pl->rb);
    free(pl->gs);
    free(pl->down_seed);
    memset(pl, 0, sizeof *pl);
}

/* Size of the router's block for X experts. */
static int64_t router_dims(int64_t X) { return X <= 32 ? 32 : (X + 31) / 32 * 32; }

/* The reserved coordinates [0, d) of a planted model: n_embd / 4 within
   [128, n_embd / 2]; a mixture also wants room for its router's block and
   128 gate coordinates, within n_embd / 2. */
static int64_t plant_d(int64_t E, int64_t X) {
    int64_t d = E / 4 / 32 * 32;
    if (d < 128) d = 128;
    if (d > E / 2) d = E / 2 / 32 * 32;
    if (X) {
        const int64_t want = PLANT_D0 + router_dims(X) + 128;
        if (d < want) d = want < E / 2 ? want : E / 2 / 32 * 32;
    }
    return d;
}

static pi_status check_plant(const pi_genmodel_params *p) {
    if (p->active == 0.0) {
        if (p->predictor)
            return pi_error(PI_ERR_INVALID, "a predictor is only written for planted sparsity (set the active fraction)");
        return PI_OK;
    }
    if (p->act != PI_ACT_RELU && p->act != PI_ACT_DRELU)
        return pi_error(PI_ERR_INVALID, "planted sparsity needs a relu or drelu activation, not %s", pi_ffn_act_name(p->act));
    double pmax = PLANT_PMAX * (p->act == PI_ACT_DRELU ? PLANT_UP_POS : 1.0);
    if (!(p->active > 0.0 && p->active <= 0.9 && p->active < pmax))
        return pi_error(PI_ERR_INVALID, "active fraction %g is outside (0, %.2f]", p->active, 0.9 < pmax ? 0.9 : pmax);
    if (!(p->skew >= 0.0 && p->skew <= 4.0)) return pi_error(PI_ERR_INVALID, "skew %g is outside [0, 4]", p->skew);
    if (!(p->persist >= 0.0 && p->persist <= 0.99))
        return pi_error(PI_ERR_INVALID, "persistence %g is outside [0, 0.99]", p->persist);
    if (p->persist > 0.0 && p->n_vocab && p->n_vocab < 2 * PI_GENMODEL_WALK_FIRST + WALK_TERMS)
        return pi_error(PI_ERR_INVALID, "persistence needs a vocabulary of at least %d tokens",
                        2 * PI_GENMODEL_WALK_FIRST + WALK_TERMS);
    if (p->n_embd < 128 || p->n_embd % 32)
        return pi_error(PI_ERR_INVALID, "planted sparsity needs n_embd >= 128 and a multiple of 32 (got %lld)",
                        (long long)p->n_embd);
    if (p->n_ff < 2) return pi_error(PI_ERR_INVALID, "planted sparsity needs n_ff >= 2");
    if (p->n_expert) {
        if (!(p->expert_skew >= 0.0 && p->expert_skew <= 4.0))
            return pi_error(PI_ERR_INVALID, "expert skew %g is outside [0, 4]", p->expert_skew);
        if (!(p->expert_persist >= 0.0 && p->expert_persist <= 0.99))
            return pi_error(PI_ERR_INVALID, "expert persistence %g is outside [0, 0.99]", p->expert_persist);
        if (p->expert_persist > 0.0 && p->n_vocab && p->n_vocab < 2 * PI_GENMODEL_WALK_FIRST + WALK_TERMS)
            return pi_error(PI_ERR_INVALID, "expert persistence needs a vocabulary of at least %d tokens",
                            2 * PI_GENMODEL_WALK_FIRST + WALK_TERMS);
        const int64_t nr = router_dims(p->n_expert);
        if (plant_d(p->n_embd, p->n_expert) - PLANT_D0 - nr < 32)
            return pi_error(PI_ERR_INVALID, "planted routing over %lld experts needs n_embd >= %lld (got %lld)",
                            (long long)p->n_expert, (long long)(2 * (PLANT_D0 + nr + 32)), (long long)p->n_embd);
    }
    return PI_OK;
}

/* ---- the planted router ---- */

/* P[x] = probability that x is among the K largest of b_y + sd w_y over
   y < X, the w_y independent N(0, 1): the integral over x's logit s of its
   density times P(at most K-1 others exceed s). That count is
   Poisson-binomial; pre (X+1, K) and suf (X+1, K) hold its distribution
   over the experts before x and after x, truncated below K, so each x costs
   O(K) per point of the grid. */
static void route_probs(const double *b, int64_t X, int64_t K, double sd, double *P, double *pre, double *suf,
                        double *q) {
    double bmin = b[0], bmax = b[0];
    for (int64_t x = 0; x < X; x++) {
        bmin = fmin(bmin, b[x]);
        bmax = fmax(bmax, b[x]);
        P[x] = 0.0;
    }
    const double h = 0.02 * sd, lo = bmin - 9.0 * sd, hi = bmax + 9.0 * sd;
    const int64_t G = (int64_t)((hi - lo) / h) + 1;
    for (int64_t g = 0; g < G; g++) {
        const double s = lo + ((double)g + 0.5) * h;
        for (int64_t y = 0; y < X; y++) q[y] = 0.5 * erfc((s - b[y]) / (sd * sqrt(2.0)));
        for (int64_t j = 0; j < K; j++) pre[j] = j == 0, suf[X * K + j] = j == 0;
        for (int64_t y = 0; y < X; y++)
            for (int64_t j = 0; j < K; j++)
                pre[(y + 1) * K + j] = pre[y * K + j] * (1.0 - q[y]) + (j ? pre[y * K + j - 1] * q[y] : 0.0);
        for (int64_t y = X - 1; y >= 0; y--)
            for (int64_t j = 0; j < K; j++)
                suf[y * K + j] = suf[(y + 1) * K + j] * (1.0 - q[y]) + (j ? suf[(y + 1) * K + j - 1] * q[y] : 0.0);
        for (int64_t y = 0; y <= X; y++) /* suf becomes P(at most j after y exceed s) */
            for (int64_t j = 1; j < K; j++) suf[y * K + j] += suf[y * K + j - 1];
        for (int64_t x = 0; x < X; x++) {
            double atmost = 0.0;
            for (int64_t a = 0; a < K; a++) atmost += pre[x * K + a] * suf[(x + 1) * K + K - 1 - a];
            const double z = (s - b[x]) / sd;
            P[x] += h / sd * exp(-0.5 * z * z) / sqrt(2.0 * M_PI) * atmost;
        }
    }
}

/* The walk's lag-1 correlation for moving-average weights w (unit sum of squares). */
static double walk_corr(const float *w, int n) {
    double c = 0.0;
    for (int j = 0; j + 1 < n; j++) c += (double)w[j] * w[j + 1];
    return c;
}

/* A standard normal from stream s (Box-Muller), for the simulation only. */
static double sim_normal(uint64_t *s) {
    *s += GOLDEN;
    const double u1 = ((double)(mix(*s) >> 11) + 0.5) * 0x1.0p-53;
    *s += GOLDEN;
    const double u2 = (double)(mix(*s) >> 11) * 0x1.0p-53;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* The K largest of l[0..X) into set (0/1 per expert). */
static void top_k(const double *l, int64_t X, int64_t K, uint8_t *set) {
    memset(set, 0, (size_t)X);
    for (int64_t k = 0; k < K; k++) {
        int64_t best = -1;
        for (int64_t x = 0; x < X; x++)
            if (!set[x] && (best < 0 || l[x] > l[best])) best = x;
        set[best] = 1;
    }
}

/* What plant_init computes besides the neurons' design (costly for many experts). */
enum { PLANT_NEURONS = 0, PLANT_LOADS = 1, PLANT_OFFSETS = 2, PLANT_REUSE = 3 };

/* Shares of tokens by expert rank, and with `what` the router offsets that
   give them and the expert reuse they are expected to give along the walk
   of the router's block. */
static pi_status plant_router(const pi_genmodel_params *p, plant *pl, int what) {
    const int64_t X = pl->X, K = pl->K;
    pl->load = malloc((size_t)X * sizeof *pl->load);
    pl->rb = calloc((size_t)X, sizeof *pl->rb);
    pl->V = malloc((size_t)(X * pl->nr) * sizeof *pl->V);
    pl->erank = malloc((size_t)X * sizeof *pl->erank);
    double *b = calloc((size_t)X, sizeof *b), *P = malloc((size_t)X * sizeof *P), *q = malloc((size_t)X * sizeof *q),
           *pre = malloc((size_t)((X + 1) * K) * sizeof *pre), *suf = malloc((size_t)((X + 1) * K) * sizeof *suf),
           *l0 = malloc((size_t)(2 * X) * sizeof *l0);
    uint8_t *s0 = malloc((size_t)(2 * X));
    pi_status st = PI_OK;
    if (!pl->load || !pl->rb || !pl->V || !pl->erank || !b || !P || !q || !pre || !suf || !l0 || !s0) {
        st = pi_error(PI_ERR_NOMEM, "out of memory");
        goto done;
    }
    pl->router_sd = sqrt(1.0 + quant_noise(p->embd_type)); /* the embedding's rounding: more independent noise */
    /* L(r) = min(pmax, c (r+1)^-S) with sum K, by bisection on log c as for neurons */
    const double pmax = PLANT_PMAX, S = p->expert_skew;
    if (K == X) {
        for (int64_t r = 0; r < X; r++) pl->load[r] = 1.0; /* every expert, every token: nothing to plant */
    } else {
        for (int64_t r = 0; r < X; r++) pl->load[r] = pow((double)(r + 1), -S);
        double lo = log((double)K / (double)X) - 1.0, hi = log(pmax) + S * log((double)X) + 1.0;
        for (int it = 0; it < 100 && hi - lo > 1e-14; it++) {
            double c = exp(0.5 * (lo + hi)), sum = 0.0;
            for (int64_t r = 0; r < X; r++) sum += fmin(pmax, c * pl->load[r]);
            if (sum < (double)K) lo = 0.5 * (lo + hi);
            else hi = 0.5 * (lo + hi);
        }
        const double c = exp(0.5 * (lo + hi));
        for (int64_t r = 0; r < X; r++) {
            pl->n_load_clipped += c * pl->load[r] >= pmax;
            pl->load[r] = fmin(pmax, c * pl->load[r]);
        }
        if (what < PLANT_OFFSETS) goto done;
        /* offsets: probit steps, damped (they move the top-K threshold too), centred */
        for (int it = 0; it < 500; it++) {
            route_probs(b, X, K, pl->router_sd, P, pre, suf, q);
            double worst = 0.0, mean = 0.0;
            for (int64_t r = 0; r < X; r++) {
                worst = fmax(worst, fabs(P[r] - pl->load[r]));
                const double pr = fmin(fmax(P[r], 1e-12), 1.0 - 1e-12);
                b[r] += 0.7 * pl->router_sd * (norm_quantile(pl->load[r]) - norm_quantile(pr));
            }
            if (worst < 1e-7) break;
            for (int64_t r = 0; r < X; r++) mean += b[r] / (double)X;
            for (int64_t r = 0; r < X; r++) b[r] -= mean;
        }
        for (int64_t r = 0; r < X; r++) pl->rb[r] = (float)b[r];
    }
    /* the router's block along the walk: weights persist^j as for D' */
    pl->n_walk_r = 1;
    pl->walk_r[0] = 1.0f;
    if (p->expert_persist > 0.0) {
        double ss = 0.0;
        for (int j = 0; j < WALK_TERMS; j++) ss += pow(p->expert_persist, 2.0 * j);
        for (int j = 0; j < WALK_TERMS; j++) pl->walk_r[j] = (float)(pow(p->expert_persist, j) / sqrt(ss));
        pl->n_walk_r = WALK_TERMS;
        pl->router_corr = walk_corr(pl->walk_r, WALK_TERMS);
    }
    if (what < PLANT_REUSE) goto done;
    /* expected reuse: pairs of consecutive logit vectors, the walk's part
       correlated by router_corr, the rounding's not */
    const double rho = pl->router_corr / (pl->router_sd * pl->router_sd), rc = sqrt(1.0 - rho * rho);
    int64_t T = 20000000 / (X * (K + 2));
    T = T < 2000 ? 2000 : T > 50000 ? 50000 : T;
    uint64_t rs = 0x853c49e6748fea9bull;
    uint64_t same = 0;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t x = 0; x < X; x++) {
            const double w = sim_normal(&rs);
            l0[x] = pl->rb[x] + pl->router_sd * w;
            l0[X + x] = pl->rb[x] + pl->router_sd * (rho * w + rc * sim_normal(&rs));
        }
        top_k(l0, X, K, s0);
        top_k(l0 + X, X, K, s0 + X);
        for (int64_t x = 0; x < X; x++) same += s0[x] & s0[X + x];
    }
    pl->reuse = (double)same / (double)(T * K);
    for (int64_t r = 0; r < X; r++) pl->reuse_ind += pl->load[r] * pl->load[r] / (double)K;
done:
    free(b);
    free(P);
    free(q);
    free(pre);
    free(suf);
    free(l0);
    free(s0);
    return st;
}

/* Sizes, frequencies, offsets and the predictor threshold (no layer yet);
   for a mixture what plant_router computes. */
static pi_status plant_init(const pi_genmodel_params *p, plant *pl, int what) {
    memset(pl, 0, sizeof *pl);
    pl->layer = -1;
    const int64_t E = p->n_embd, F = p->n_ff;
    pl->E = E;
    pl->F = F;
    pl->X = p->n_expert;
    pl->K = p->n_expert_used;
    pl->nr = pl->X ? router_dims(pl->X) : 0;
    pl->d = plant_d(E, pl->X);
    pl->g0 = PLANT_D0 + pl->nr;
    pl->nd = pl->d - pl->g0;
    pl->k = pl->nd / 4 < PLANT_MAX_K ? pl->nd / 4 : PLANT_MAX_K;
    if (p->predictor) {
        const pi_type_info *ti = pi_type_get((uint32_t)p->pred_type);
        if (!ti || !ti->compute)
            return pi_error(PI_ERR_INVALID, "predictor type %s has no kernels", pi_type_name(p->pred_type));
        int64_t b = ti->blck, need = (2 * pl->k + 1 + b - 1) / b * b, R = p->pred_rank;
        if (R == 0) {
            R = (E / 4 + b - 1) / b * b;
            if (R < need) R = need;
        }
        if (R < 2 * pl->k + 1 || R % b || R > PI_MAX_ROW)
            return pi_error(PI_ERR_INVALID, "predictor rank %lld: must be at least %lld (2k+1), at most %d and a multiple "
                            "of %s's block of %lld", (long long)R, (long long)(2 * pl->k + 1), PI_MAX_ROW, ti->name,
                            (long long)b);
        if (E % b)
            return pi_error(PI_ERR_INVALID, "n_embd %lld must be a multiple of %s's block of %lld", (long long)E,
                            ti->name, (long long)b);
        pl->R = R;
    }
    pl->persist = p->persist;
    pl->walk = p->persist > 0.0 || (pl->X && p->expert_persist > 0.0);
    if (p->persist > 0.0) {
        double ss = 0.0;
        for (int j = 0; j < WALK_TERMS; j++) ss += pow(p->persist, 2.0 * j);
        for (int j = 0; j < WALK_TERMS; j++) pl->walk_w[j] = (float)(pow(p->persist, j) / sqrt(ss));
    }
    pl->C = (float)sqrt(PLANT_RHO * (double)E);
    pl->sigma = (float)sqrt((1.0 - PLANT_RHO) * (double)E / (double)(E - 1));
    pl->eps = (float)PLANT_EPS;
    pl->c1 = (float)sqrt(1.0 - PLANT_EPS * PLANT_EPS);
    pl->q = p->act == PI_ACT_DRELU ? PLANT_UP_POS : 1.0;
    pl->up_bias = (float)norm_quantile(pl->q);
    const int64_t units = pl->X ? pl->X : 1;
    pl->p = malloc((size_t)F * sizeof *pl->p);
    pl->t = malloc((size_t)F * sizeof *pl->t);
    pl->rank = malloc((size_t)(units * F) * sizeof *pl->rank);
    pl->order = malloc((size_t)(F > pl->X ? F : pl->X) * sizeof *pl->order);
    pl->U = malloc((size_t)(units * pl->k * pl->nd) * sizeof *pl->U);
    pl->gs = malloc((size_t)(pl->nd > pl->nr ? pl->nd : pl->nr) * sizeof *pl->gs);
    pl->down_seed = malloc((size_t)E * sizeof *pl->down_seed);
    if (!pl->p || !pl->t || !pl->rank || !pl->order || !pl->U || !pl->gs || !pl->down_seed) {
        plant_free(pl);
        return pi_error(PI_ERR_NOMEM, "out of memory");
    }
    if (pl->X) {
        pi_status st = plant_router(p, pl, what);
        if (st) {
            plant_free(pl);
            return st;
        }
    }

    /* p(r) = min(pmax, c (r+1)^-S), mean `active`: bisection on log c (the
       mean grows with c), with (r+1)^-S kept in p meanwhile */
    const double pmax = PLANT_PMAX * pl->q, S = p->skew;
    for (int64_t r = 0; r < F; r++) pl->p[r] = pow((double)(r + 1), -S);
    double lo = log(p->active) - 1.0, hi = log(pmax) + S * log((double)F) + 1.0;
    for (int it = 0; it < 100 && hi - lo > 1e-14; it++) {
        double c = exp(0.5 * (lo + hi)), sum = 0.0;
        for (int64_t r = 0; r < F; r++) sum += fmin(pmax, c * pl->p[r]);
        if (sum / (double)F < p->active) lo = 0.5 * (lo + hi);
        else hi = 0.5 * (lo + hi);
    }
    const double c = exp(0.5 * (lo + hi)), qn = quant_noise(p->type);
    double total = 0.0;
    for (int64_t r = 0; r < F; r++) {
        double v = c * pl->p[r];
        pl->n_clipped += v >= pmax;
        pl->p[r] = fmin(pmax, v);
        total += pl->p[r];
        /* the gate's total sd is sqrt(1 + qn) with rounding */
        pl->t[r] = (float)(sqrt(1.0 + qn) * norm_quantile(1.0 - pl->p[r] / pl->q));
    }
    double cum = 0.0;
    for (int64_t r = 0; r < F; r++) {
        cum += pl->p[r];
        if (cum >= 0.8 * total) {
            pl->cover80 = (double)(r + 1) / (double)F;
            break;
        }
    }

    /* Threshold: the predictor's logit L ~ N(-t, c1^2); the gate is L + N with
       N ~ N(0, eps^2 + qn) independent. On a grid over L, accumulate for all
       neurons the density of "predicted at L" and of "active at L"; recall at
       threshold L_g is the active mass above it. */
    if (p->predictor) {
        const double h = 0.02, w = 7.0 * pl->c1, en = sqrt(PLANT_EPS * PLANT_EPS + qn);
        double tmin = pl->t[0], tmax = pl->t[F - 1];
        const double Lmin = -tmax - w, Lmax = -tmin + w;
        const int64_t G = (int64_t)((Lmax - Lmin) / h) + 2;
        double *dp = calloc((size_t)G, sizeof *dp), *da = calloc((size_t)G, sizeof *da),
               *phi = malloc((size_t)G * sizeof *phi);
        if (!dp || !da || !phi) {
            free(dp), free(da), free(phi);
            plant_free(pl);
            return pi_error(PI_ERR_NOMEM, "out of memory");
        }
        for (int64_t g = 0; g < G; g++) phi[g] = norm_cdf((Lmin + (double)g * h) / en);
        for (int64_t r = 0; r < F; r++) {
            const double t = pl->t[r];
            int64_t g0 = (int64_t)((-t - w - Lmin) / h), g1 = (int64_t)((-t + w - Lmin) / h) + 1;
            if (g0 < 0) g0 = 0;
            if (g1 > G) g1 = G;
            for (int64_t g = g0; g < g1; g++) {
                double z = (Lmin + (double)g * h + t) / pl->c1, dens = exp(-0.5 * z * z);
                dp[g] += dens;
                da[g] += dens * phi[g];
            }
        }
        double tot_a = 0.0, cum_a = 0.0, cum_p = 0.0;
        for (int64_t g = 0; g < G; g++) tot_a += da[g];
        int64_t g = G - 1;
        for (; g >= 0; g--) {
            cum_a += da[g];
            cum_p += dp[g];
            if (cum_a >= PLANT_RECALL * tot_a) break;
        }
        if (g < 0) g = 0;
        pl->threshold = (float)(Lmin + ((double)g - 0.5) * h);
        pl->recall = tot_a > 0.0 ? cum_a / tot_a : 1.0;
        pl->precision = cum_p > 0.0 ? cum_a / cum_p * pl->q : 1.0;
        free(dp);
        free(da);
        free(phi);
    }
    return PI_OK;
}

/* Stream of a per-layer design choice (tag) */
static uint64_t layer_stream(uint64_t seed, int64_t layer, uint64_t tag) {
    return mix(seed * GOLDEN ^ mix((uint64_t)layer * 0xd1b54a32d192ed03ull + tag));
}

/* rank[0..n) = a random ranking by a seeded Fisher-Yates shuffle of stream s. */
static void shuffle_rank(int32_t *rank, int32_t *order, int64_t n, uint64_t s) {
    for (int64_t r = 0; r < n; r++) order[r] = (int32_t)r;
    for (int64_t r = n - 1; r > 0; r--) {
        s += GOLDEN;
        int64_t j = (int64_t)(mix(s) % (uint64_t)(r + 1));
        int32_t tmp = order[r];
        order[r] = order[j];
        order[j] = tmp;
    }
    for (int64_t r = 0; r < n; r++) rank[order[r]] = (int32_t)r;
}

/* rank[0..F) = the ranking of the neurons of expert x of layer `layer` (x = 0 for a dense layer). */
static void unit_ranking(plant *pl, uint64_t seed, int64_t layer, int64_t x, int32_t *rank) {
    shuffle_rank(rank, pl->order, pl->F, layer_stream(seed, layer, pl->X ? EXPERT_TAG_RANK + (uint64_t)x : 1));
}

/* U[0..k) = Gram-Schmidt (twice, for orthogonality to rounding) of k random
   vectors of length n from stream s. */
static void orthonormal(float *U, int64_t k, int64_t n, double *v, uint64_t s) {
    for (int64_t j = 0; j < k; j++) {
        for (int64_t m = 0; m < n; m++) v[m] = unif(&s);
        for (int pass = 0; pass < 2; pass++)
            for (int64_t i = 0; i < j; i++) {
                const float *u = U + i * n;
                double dot = 0.0;
                for (int64_t m = 0; m < n; m++) dot += v[m] * u[m];
                for (int64_t m = 0; m < n; m++) v[m] -= dot * u[m];
            }
        double n2 = 0.0;
        for (int64_t m = 0; m < n; m++) n2 += v[m] * v[m];
        double inv = 1.0 / sqrt(n2);
        for (int64_t m = 0; m < n; m++) U[j * n + m] = (float)(v[m] * inv);
    }
}

/* Rankings and directions of a layer's units, and of a mixture its router's
   (single-threaded: the rows read them). */
static void plant_layer(plant *pl, uint64_t seed, int64_t layer) {
    const int64_t units = pl->X ? pl->X : 1, kn = pl->k * pl->nd;
    for (int64_t x = 0; x < units; x++) {
        unit_ranking(pl, seed, layer, x, pl->rank + x * pl->F);
        orthonormal(pl->U + x * kn, pl->k, pl->nd, pl->gs,
                    layer_stream(seed, layer, pl->X ? EXPERT_TAG_DIRS + (uint64_t)x : 2));
    }
    if (pl->X) {
        shuffle_rank(pl->erank, pl->order, pl->X, layer_stream(seed, layer, ROUTER_TAG_ORDER));
        orthonormal(pl->V, pl->X, pl->nr, pl->gs, layer_stream(seed, layer, ROUTER_TAG_DIRS));
    }
    pl->layer = layer;
}

/* a[0..k) = neuron i's unit direction in U's span: the first k values of
   its gate row's stream (fc2 regenerates it from there). */
static void gate_dir(const plant *pl, uint64_t gate_stream, int64_t i, float *a) {
    uint64_t s = row_seed(gate_stream, i);
    float n2 = 0.0f;
    for (int64_t j = 0; j < pl->k; j++) {
        a[j] = unif(&s);
        n2 += a[j] * a[j];
    }
    float inv = 1.0f / sqrtf(n2);
    for (int64_t j = 0; j < pl->k; j++) a[j] *= inv;
}

/* Vector helpers over n = a multiple of 8 floats, written as eight lanes so
   that -O2 vectorizes them (a plain float sum may not be reassociated). */
static float dot8(const float *restrict x, const float *restrict y, int64_t n) {
    float acc[8] = {0};
    for (int64_t m = 0; m < n; m += 8)
        for (int l = 0; l < 8; l++) acc[l] += x[m + l] * y[m + l];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

static void axpy8(float *restrict y, float c, const float *restrict x, int64_t n) {
    for (int64_t m = 0; m < n; m += 8)
        for (int l = 0; l < 8; l++) y[m + l] += c * x[m + l];
}

/* v[0..nd) = the next nd values of stream s, made orthogonal to U (k, nd) and unit. */
static void random_orth(const plant *pl, const float *U, uint64_t *s, float *v, float *coef) {
    const int64_t k = pl->k, nd = pl->nd;
    for (int64_t m = 0; m < nd; m++) v[m] = unif(s);
    for (int64_t j = 0; j < k; j++) coef[j] = dot8(v, U + j * nd, nd);
    for (int64_t j = 0; j < k; j++) axpy8(v, -coef[j], U + j * nd, nd);
    float inv = 1.0f / sqrtf(dot8(v, v, nd));
    for (int64_t m = 0; m < nd; m++) v[m] *= inv;
}

/* ---- tensors and their rows ---- */

typedef enum {
    G_UNIFORM, /* uniform noise (rows [0, zero_rows) zero) */
    G_ONES,    /* norms */
    G_EMBD,    /* planted: coordinate 0 = C, rms 1 */
    G_WALK,    /* persistence: output row w = the embedding of the token before w on the walk */
    G_GATE,    /* planted gate rows */
    G_UP,      /* planted dReLU up rows */
    G_DOWN_T,  /* ffn_down (tensor src) one neuron per row */
    G_FC1,     /* predictor */
    G_FC2,
    G_ROUTER,  /* planted router rows */
} gen_kind;

typedef struct {
    char name[64];
    pi_type type;
    int n_dims;
    int64_t ne0, ne1;
    int64_t ne2;       /* experts stacked (1: a plain matrix); rows = ne1 * ne2 */
    float scale;       /* half-width of the uniform distribution */
    gen_kind kind;
    int64_t layer;     /* -1: not a layer's */
    int64_t zero_rows; /* rows [0, zero_rows) of each expert's ne1 are zero */
    int src;           /* G_DOWN_T: the ffn_down; G_FC2: the ffn_gate; G_WALK: the embedding */
    uint64_t stream;   /* seed mixed with the tensor index */
} gtensor;

typedef struct {
    const gtensor *ts; /* all tensors (src lookups) */
    const gtensor *t;  /* the one being written */
    const plant *pl;
    const int32_t *row_map; /* output row -> the tensor's row (a bundle file's permuted fc2), or NULL */
    int64_t row0;
    size_t row_bytes;
    uint8_t *out;      /* slab of rows */
    float *scratch;    /* (threads, scratch_per) */
    int64_t scratch_per;
} gen_job;

/* Approximately N(0, 1): a sum of four uniforms of stream s. */
static inline float gauss4(uint64_t *s) {
    float a = unif(s), b = unif(s), c = unif(s), d = unif(s);
    return ((a + b) + (c + d)) * 0.8660254f;
}

/* The j-th token before v on the walk, which wraps from V - 1 to PI_GENMODEL_WALK_FIRST. */
static int64_t walk_back(int64_t v, int j, int64_t V) {
    int64_t u = v - j;
    if (v >= PI_GENMODEL_WALK_FIRST && u < PI_GENMODEL_WALK_FIRST) u += V - PI_GENMODEL_WALK_FIRST;
    return u;
}

/* Row v of the planted embedding t: uniform noise, coordinate 0 = C, the
   rest scaled to rms 1 as a whole. With persistence the gates' block is
   instead a moving average of per-token noise over the tokens before v on
   the walk (weights persist^j, unit sum of squares), so tokens j apart on
   the walk correlate there by about persist^j. A mixture's router block is
   Gaussian noise, averaged along the walk in the same way with its own
   weights (expert persistence). */
static void embd_row(const plant *pl, const gtensor *t, int64_t v, float *row) {
    const int64_t n = t->ne0, V = t->ne1;
    uint64_t s = row_seed(t->stream, v);
    for (int64_t i = 0; i < n; i++) row[i] = unif(&s) * t->scale;
    if (pl->X) {
        float *dst = row + PLANT_D0;
        memset(dst, 0, (size_t)pl->nr * sizeof *dst);
        const uint64_t walk = mix(t->stream ^ 0x2545f4914f6cdd1dull);
        for (int j = 0; j < pl->n_walk_r; j++) {
            uint64_t ns = row_seed(walk, walk_back(v, j, V));
            const float w = pl->walk_r[j];
            for (int64_t m = 0; m < pl->nr; m++) dst[m] += w * gauss4(&ns);
        }
    }
    if (pl->persist > 0.0) {
        float *dst = row + pl->g0;
        memset(dst, 0, (size_t)pl->nd * sizeof *dst);
        const uint64_t walk = mix(t->stream ^ 0x5bd1e9955bd1e995ull);
        for (int j = 0; j < WALK_TERMS; j++) {
            uint64_t ns = row_seed(walk, walk_back(v, j, V));
            const float w = pl->walk_w[j] * t->scale;
            for (int64_t m = 0; m < pl->nd; m++) dst[m] += w * unif(&ns);
        }
    }
    double n2 = 0.0;
    for (int64_t i = 1; i < n; i++) n2 += (double)row[i] * row[i];
    float f = (float)sqrt((1.0 - PLANT_RHO) * (double)n / n2);
    for (int64_t i = 1; i < n; i++) row[i] *= f;
    row[0] = pl->C;
}

static void gen_row(const gen_job *j, int64_t r, float *row, float *tmp) {
    const gtensor *t = j->t;
    const plant *pl = j->pl;
    const int64_t n = t->ne0;
    uint64_t s = row_seed(t->stream, r);
    switch (t->kind) {
    case G_UNIFORM:
        if (r % t->ne1 < t->zero_rows) memset(row, 0, (size_t)n * sizeof *row);
        else
            for (int64_t i = 0; i < n; i++) row[i] = unif(&s) * t->scale;
        return;
    case G_ONES:
        for (int64_t i = 0; i < n; i++) row[i] = 1.0f;
        return;
    case G_EMBD:
        embd_row(pl, t, r, row);
        return;
    case G_WALK: {
        /* logits = this row . the final state, dominated by the current
           token's embedding: token v's successor v + 1 scores the whole
           norm, every other token a fraction; specials are never next */
        const gtensor *e = &j->ts[t->src];
        const int64_t V = e->ne1;
        if (r < PI_GENMODEL_WALK_FIRST) {
            for (int64_t i = 0; i < n; i++) row[i] = unif(&s) * t->scale;
            return;
        }
        embd_row(pl, e, r == PI_GENMODEL_WALK_FIRST ? V - 1 : r - 1, row);
        return;
    }
    case G_GATE: {
        float *a = tmp, *coef = tmp + PLANT_MAX_K, *v = tmp + 2 * PLANT_MAX_K;
        const float *U = pl->U + r / pl->F * pl->k * pl->nd; /* the expert's */
        gate_dir(pl, t->stream, r, a);
        s += (uint64_t)pl->k * GOLDEN; /* past the values gate_dir took */
        random_orth(pl, U, &s, v, coef);
        memset(row, 0, (size_t)n * sizeof *row);
        float *dst = row + pl->g0, inv = 1.0f / pl->sigma;
        for (int64_t m = 0; m < pl->nd; m++) dst[m] = pl->eps * v[m];
        for (int64_t q = 0; q < pl->k; q++) axpy8(dst, pl->c1 * a[q], U + q * pl->nd, pl->nd);
        for (int64_t m = 0; m < pl->nd; m++) dst[m] *= inv;
        row[0] = -pl->t[pl->rank[r]] / pl->C;
        return;
    }
    case G_UP: {
        float *coef = tmp, *v = tmp + 2 * PLANT_MAX_K;
        random_orth(pl, pl->U + r / pl->F * pl->k * pl->nd, &s, v, coef);
        memset(row, 0, (size_t)n * sizeof *row);
        for (int64_t m = 0; m < pl->nd; m++) row[pl->g0 + m] = v[m] / pl->sigma;
        row[0] = pl->up_bias / pl->C;
        return;
    }
    case G_DOWN_T: {
        /* element c of row r = element r of ffn_down's row c */
        const gtensor *down = &j->ts[t->src];
        const uint64_t step = (uint64_t)(r + 1) * GOLDEN;
        for (int64_t c = 0; c < n; c++)
            row[c] = c < down->zero_rows ? 0.0f : unif_at(pl->down_seed[c] + step) * down->scale;
        return;
    }
    case G_FC1: {
        const int64_t k = pl->k, x = r / t->ne1, i = r % t->ne1; /* row i of expert x's predictor */
        if (i >= 2 * k + 1) { /* padding to the realistic rank: noise, zero in fc2 */
            for (int64_t c = 0; c < n; c++) row[c] = unif(&s) * t->scale;
            return;
        }
        memset(row, 0, (size_t)n * sizeof *row);
        if (i == 2 * k) {
            row[0] = 1.0f / pl->C;
            return;
        }
        const float sign = i < k ? 1.0f : -1.0f;
        const float *u = pl->U + (x * k + i % k) * pl->nd;
        for (int64_t m = 0; m < pl->nd; m++) row[pl->g0 + m] = sign * u[m] / pl->sigma;
        return;
    }
    case G_FC2: {
        float *a = tmp;
        const int64_t k = pl->k;
        gate_dir(pl, j->ts[t->src].stream, r, a);
        memset(row, 0, (size_t)n * sizeof *row);
        for (int64_t q = 0; q < k; q++) {
            row[q] = pl->c1 * a[q];
            row[k + q] = -pl->c1 * a[q];
        }
        row[2 * k] = -pl->t[pl->rank[r]];
        return;
    }
    case G_ROUTER: /* logit_r = z_r + b (rank of r), z_r = V_r . x / sigma over the router's block */
        memset(row, 0, (size_t)n * sizeof *row);
        for (int64_t m = 0; m < pl->nr; m++) row[PLANT_D0 + m] = pl->V[r * pl->nr + m] / pl->sigma;
        row[0] = pl->rb[pl->erank[r]] / pl->C;
        return;
    }
}

static void gen_rows(void *ctx, int64_t r0, int64_t r1, int tid) {
    const gen_job *j = ctx;
    float *row = j->scratch + (size_t)tid * (size_t)j->scratch_per;
    float *tmp = row + j->t->ne0;
    for (int64_t r = r0; r < r1; r++) {
        gen_row(j, j->row_map ? j->row_map[j->row0 + r] : j->row0 + r, row, tmp);
        pi_quantize_row(j->t->type, row, j->out + (size_t)r * j->row_bytes, j->t->ne0);
    }
}

static pi_status synthetic_vocab(pi_gguf_writer *w, int64_t n_vocab) {
    if (n_vocab < 259)
        return pi_error(PI_ERR_INVALID, "a synthetic vocabulary needs at least 259 tokens (3 special + 256 bytes), got %lld",
                        (long long)n_vocab);
    char **strs = calloc((size_t)n_vocab, sizeof *strs);
    float *scores = calloc((size_t)n_vocab, sizeof *scores);
    int32_t *types = calloc((size_t)n_vocab, sizeof *types);
    char *block = calloc((size_t)n_vocab, 32);
    pi_status st = PI_OK;
    if (!strs || !scores || !types || !block) {
        st = pi_error(PI_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < n_vocab; i++) {
        char *s = block + i * 32;
        if (i == 0) snprintf(s, 32, "<unk>"), types[i] = 2;
        else if (i == 1) snprintf(s, 32, "<s>"), types[i] = 3;
        else if (i == 2) snprintf(s, 32, "</s>"), types[i] = 3;
        else if (i < 259) snprintf(s, 32, "<0x%02X>", (unsigned)(i - 3)), types[i] = 6;
        else snprintf(s, 32, "\xe2\x96\x81t%lld", (long long)(i - 259)), types[i] = 1, scores[i] = -(float)(i - 259);
        strs[i] = s;
    }
    if ((st = pi_gguf_set_str(w, PI_KEY_TOKENIZER_MODEL, "llama")) ||
        (st = pi_gguf_set_arr_str(w, PI_KEY_TOKENIZER_TOKENS, (const char *const *)strs, NULL, (uint64_t)n_vocab)) ||
        (st = pi_gguf_set_arr(w, PI_KEY_TOKENIZER_SCORES, PI_GGUF_FLOAT32, scores, (uint64_t)n_vocab)) ||
        (st = pi_gguf_set_arr(w, PI_KEY_TOKENIZER_TOKEN_TYPE, PI_GGUF_INT32, types, (uint64_t)n_vocab)) ||
        (st = pi_gguf_set_u32(w, PI_KEY_TOKENIZER_UNK_ID, 0)) ||
        (st = pi_gguf_set_u32(w, PI_KEY_TOKENIZER_BOS_ID, 1)) ||
        (st = pi_gguf_set_u32(w, PI_KEY_TOKENIZER_EOS_ID, 2)))
        goto done;
done:
    free(strs);
    free(scores);
    free(types);
    free(block);
    return st;
}

/* Copy the tokenizer.* keys of a vocabulary GGUF; *n_vocab becomes its size. */
static pi_status copy_vocab(pi_gguf_writer *w, const char *path, int64_t *n_vocab) {
    pi_gguf *g;
    pi_status st = pi_gguf_open(path, &g);
    if (st) return st;
    const pi_gguf_kv *tokens;
    if ((st = pi_gguf_get_arr(g, PI_KEY_TOKENIZER_TOKENS, PI_GGUF_STRING, &tokens))) {
        pi_error_prefix(st, "vocabulary %s", path);
        pi_gguf_close(g);
        return st;
    }
    *n_vocab = (int64_t)tokens->arr_n;
    for (int64_t i = 0; i < pi_gguf_n_kv(g) && !st; i++) {
        const pi_gguf_kv *kv = pi_gguf_kv_at(g, i);
        if (kv->key.len > strlen(PI_KEY_TOKENIZER_PREFIX) && pi_gguf_str_has_prefix(kv->key, PI_KEY_TOKENIZER_PREFIX))
            st = pi_gguf_set_kv(w, kv);
    }
    pi_gguf_close(g);
    return st;
}

static pi_status check_params(const pi_genmodel_params *p) {
    if (p->n_embd <= 0 || p->n_head <= 0 || p->n_head_kv <= 0 || p->n_ff <= 0 || p->n_layer <= 0 || p->n_ctx <= 0 ||
        p->n_layer > 4096)
        return pi_error(PI_ERR_INVALID, "model shape: every dimension must be positive");
    if (p->n_embd % p->n_head || p->n_head % p->n_head_kv || (p->n_embd / p->n_head) % 2)
        return pi_error(PI_ERR_INVALID, "model shape: n_embd %lld, n_head %lld, n_head_kv %lld do not divide into even-sized heads",
                        (long long)p->n_embd, (long long)p->n_head, (long long)p->n_head_kv);
    const pi_type ts[3] = {p->type, p->embd_type, p->output_type};
    for (int i = 0; i < 3; i++) {
        const pi_type_info *ti = pi_type_get((uint32_t)ts[i]);
        if (!ti || !ti->compute) return pi_error(PI_ERR_INVALID, "weight type %s has no kernels", pi_type_name(ts[i]));
        if (p->n_embd % ti->blck || (i == 0 && p->n_ff % ti->blck))
            return pi_error(PI_ERR_INVALID, "n_embd %lld and n_ff %lld must be multiples of %s's block of %lld",
                            (long long)p->n_embd, (long long)p->n_ff, ti->name, (long long)ti->blck);
    }
    if (p->n_embd > PI_MAX_ROW || p->n_ff > PI_MAX_ROW)
        return pi_error(PI_ERR_INVALID, "rows longer than %d elements are not supported", PI_MAX_ROW);
    if (!p->n_expert && p->n_expert_used)
        return pi_error(PI_ERR_INVALID, "%lld experts used per token, but the model has no experts (n_expert 0)",
                        (long long)p->n_expert_used);
    if (p->n_expert && (p->n_expert < 2 || p->n_expert > PI_GENMODEL_MAX_EXPERTS))
        return pi_error(PI_ERR_INVALID, "n_expert %lld is outside [2, %d]", (long long)p->n_expert,
                        PI_GENMODEL_MAX_EXPERTS);
    if (p->n_expert && (p->n_expert_used < 1 || p->n_expert_used > p->n_expert || p->n_expert_used > PI_MOE_MAX_USED))
        return pi_error(PI_ERR_INVALID, "n_expert_used %lld is outside [1, %lld] (at most n_expert %lld and %d)",
                        (long long)p->n_expert_used,
                        (long long)(p->n_expert < PI_MOE_MAX_USED ? p->n_expert : PI_MOE_MAX_USED),
                        (long long)p->n_expert, PI_MOE_MAX_USED);
    return check_plant(p);
}

pi_status pi_genmodel_plant_info(const pi_genmodel_params *p, pi_genmodel_plant *out) {
    memset(out, 0, sizeof *out);
    pi_status st = check_params(p);
    if (st) return st;
    if (p->active == 0.0) return pi_error(PI_ERR_INVALID, "these parameters plant no sparsity (active fraction 0)");
    plant pl;
    if ((st = plant_init(p, &pl, PLANT_REUSE))) return st;
    out->k = pl.k;
    out->d = pl.d;
    out->rank = pl.R;
    out->n_clipped = pl.n_clipped;
    out->p_max = pl.p[0];
    out->cover80 = pl.cover80;
    out->threshold = pl.threshold;
    out->recall = p->predictor ? pl.recall : 0.0;
    out->precision = p->predictor ? pl.precision : 0.0;
    if (pl.X) {
        out->router_dims = pl.nr;
        out->load_max = pl.load[0];
        out->load_min = pl.load[pl.X - 1];
        out->n_load_clipped = pl.n_load_clipped;
        out->router_corr = pl.router_corr;
        out->expert_reuse = pl.reuse;
        out->expert_reuse_independent = pl.reuse_ind;
    }
    plant_free(&pl);
    return PI_OK;
}

pi_status pi_genmodel_planted_freq(const pi_genmodel_params *p, int64_t layer, double *freq) {
    pi_status st = check_params(p);
    if (st) return st;
    if (p->active == 0.0) return pi_error(PI_ERR_INVALID, "these parameters plant no sparsity (active fraction 0)");
    const int64_t units = p->n_layer * (p->n_expert ? p->n_expert : 1);
    if (layer < 0 || layer >= units)
        return pi_error(PI_ERR_INVALID, "%s %lld is outside [0, %lld)", p->n_expert ? "unit" : "layer",
                        (long long)layer, (long long)units);
    plant pl;
    if ((st = plant_init(p, &pl, PLANT_NEURONS))) return st;
    const int64_t X = p->n_expert ? p->n_expert : 1;
    unit_ranking(&pl, p->seed, layer / X, layer % X, pl.rank);
    for (int64_t i = 0; i < p->n_ff; i++) freq[i] = pl.p[pl.rank[i]];
    plant_free(&pl);
    return PI_OK;
}

pi_status pi_genmodel_planted_load(const pi_genmodel_params *p, int64_t il, double *load) {
    pi_status st = check_params(p);
    if (st) return st;
    if (p->active == 0.0) return pi_error(PI_ERR_INVALID, "these parameters plant no sparsity (active fraction 0)");
    if (!p->n_expert) return pi_error(PI_ERR_INVALID, "a dense model has no experts to route to");
    if (il < 0 || il >= p->n_layer)
        return pi_error(PI_ERR_INVALID, "layer %lld is outside [0, %lld)", (long long)il, (long long)p->n_layer);
    plant pl;
    if ((st = plant_init(p, &pl, PLANT_LOADS))) return st;
    shuffle_rank(pl.erank, pl.order, pl.X, layer_stream(p->seed, il, ROUTER_TAG_ORDER));
    for (int64_t x = 0; x < pl.X; x++) load[x] = pl.load[pl.erank[x]];
    plant_free(&pl);
    return PI_OK;
}

/* ---- writing: the disk's room, and a thread that writes one slab while the next is generated ---- */

/* PI_ERR_IO when the file system that will hold path has fewer than need
   bytes free (where that can be told: a regular file's directory). */
static pi_status check_room(const char *path, uint64_t need) {
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) return PI_OK; /* a device such as /dev/null */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
    struct statvfs vf;
    if (statvfs(dir, &vf) != 0) return PI_OK; /* cannot tell: the writes will say */
    const uint64_t avail = (uint64_t)vf.f_bavail * (uint64_t)vf.f_frsize;
    if (need > avail)
        return pi_error(PI_ERR_IO, "%s: not enough free disk space: the model needs %llu bytes (%.2f GiB), the file "
                        "system holding %s has %llu bytes free (%.2f GiB)", path, (unsigned long long)need,
                        (double)need / (1 << 30), dir, (unsigned long long)avail, (double)avail / (1 << 30));
    return PI_OK;
}

typedef struct {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pi_gguf_writer *w;
    const void *buf; /* the slab being written; NULL: idle */
    size_t n;
    bool quit;
    pi_status st;    /* the first failure, with its message (the error buffer is per thread) */
    char msg[PI_ERRMSG_MAX];
} slab_writer;

static void *slab_writer_main(void *arg) {
    slab_writer *sw = arg;
    pthread_mutex_lock(&sw->mu);
    for (;;) {
        while (!sw->buf && !sw->quit) pthread_cond_wait(&sw->cv, &sw->mu);
        if (!sw->buf) break;
        const void *buf = sw->buf;
        const size_t n = sw->n;
        const bool failed = sw->st != PI_OK;
        pthread_mutex_unlock(&sw->mu);
        pi_status st = failed ? PI_OK : pi_gguf_write_data(sw->w, buf, n);
        pthread_mutex_lock(&sw->mu);
        if (st && !sw->st) {
            sw->st = st;
            snprintf(sw->msg, sizeof sw->msg, "%s", pi_last_error());
        }
        sw->buf = NULL;
        pthread_cond_broadcast(&sw->cv);
    }
    pthread_mutex_unlock(&sw->mu);
    return NULL;
}

static pi_status slab_writer_start(slab_writer *sw, pi_gguf_writer *w) {
    memset(sw, 0, sizeof *sw);
    sw->w = w;
    if (pthread_mutex_init(&sw->mu, NULL)) return pi_error(PI_ERR_NOMEM, "cannot create a mutex");
    if (pthread_cond_init(&sw->cv, NULL)) {
        pthread_mutex_destroy(&sw->mu);
        return pi_error(PI_ERR_NOMEM, "cannot create a condition variable");
    }
    if (pthread_create(&sw->th, NULL, slab_writer_main, sw)) {
        pthread_cond_destroy(&sw->cv);
        pthread_mutex_destroy(&sw->mu);
        return pi_error(PI_ERR_NOMEM, "cannot start the writer thread");
    }
    return PI_OK;
}

/* Wait until the slab handed over last is written; the first failure so far. */
static pi_status slab_writer_wait(slab_writer *sw) {
    pthread_mutex_lock(&sw->mu);
    while (sw->buf) pthread_cond_wait(&sw->cv, &sw->mu);
    const pi_status st = sw->st;
    pthread_mutex_unlock(&sw->mu);
    return st ? pi_error(st, "%s", sw->msg) : PI_OK;
}

/* Hand buf over once the previous slab is written; buf must stay untouched
   until the next put or wait returns. */
static pi_status slab_writer_put(slab_writer *sw, const void *buf, size_t n) {
    pi_status st = slab_writer_wait(sw);
    if (st) return st;
    pthread_mutex_lock(&sw->mu);
    sw->buf = buf;
    sw->n = n;
    pthread_cond_broadcast(&sw->cv);
    pthread_mutex_unlock(&sw->mu);
    return PI_OK;
}

/* Let the last slab finish and end the thread. */
static void slab_writer_stop(slab_writer *sw) {
    pthread_mutex_lock(&sw->mu);
    sw->quit = true;
    pthread_cond_broadcast(&sw->cv);
    pthread_mutex_unlock(&sw->mu);
    pthread_join(sw->th, NULL);
    pthread_cond_destroy(&sw->cv);
    pthread_mutex_destroy(&sw->mu);
}

/* The model's keys: tokenizer, shape, and what was planted. */
static pi_status model_keys(pi_gguf_writer *w, const pi_genmodel_params *p, const plant *pl, int64_t *n_vocab) {
    pi_status st;
    const int64_t E = p->n_embd, hd = p->n_embd / p->n_head, F = p->n_ff, X = p->n_expert;
    const bool planted = p->active != 0.0;
    if (p->vocab_path) st = copy_vocab(w, p->vocab_path, n_vocab);
    else st = synthetic_vocab(w, *n_vocab);
    if (st) return st;
    if ((st = pi_gguf_set_str(w, PI_KEY_GENERAL_ARCHITECTURE, PI_ARCH_LLAMA)) ||
        (st = pi_gguf_set_str(w, PI_KEY_GENERAL_NAME, p->name ? p->name : "pinfer-synthetic")) ||
        (st = pi_gguf_set_u32(w, PI_LLAMA_KEY(PI_AKEY_CONTEXT_LENGTH), (uint32_t)p->n_ctx)) ||
        (st = pi_gguf_set_u32(w, PI_LLAMA_KEY(PI_AKEY_EMBEDDING_LENGTH), (uint32_t)E)) ||
        (st = pi_gguf_set_u32(w, PI_LLAMA_KEY(PI_AKEY_FEED_FORWARD_LENGTH), (uint32_t)F)) ||
        (st = pi_gguf_set_u32(w, PI_LLAMA_KEY(PI_AKEY_BLOCK_COUNT), (uint32_t)p->n_layer)) ||
        (st = pi_gguf_set_u32(w, PI_LLAMA_KEY(PI_AKEY_HEAD_COUNT), (uint32_t)p->n_head)) ||
        (st = pi_gguf_set_u32(w, PI_LLAMA_KEY(PI_AKEY_HEAD_COUNT_KV), (uint32_t)p->n_head_kv)) ||
        (st = pi_gguf_set_u32(w, PI_LLAMA_KEY(PI_AKEY_ROPE_DIMENSION_COUNT), (uint32_t)hd)) ||
        (st = pi_gguf_set_f32(w, PI_LLAMA_KEY(PI_AKEY_ROPE_FREQ_BASE), 10000.0f)) ||
        (st = pi_gguf_set_f32(w, PI_LLAMA_KEY(PI_AKEY_RMS_EPS), 1e-5f)) ||
        (st = pi_gguf_set_u32(w, PI_LLAMA_KEY(PI_AKEY_VOCAB_SIZE), (uint32_t)*n_vocab)) ||
        (st = pi_gguf_set_str(w, PI_KEY_FFN_ACTIVATION, pi_ffn_act_name(p->act))))
        return st;
    if (X && ((st = pi_gguf_set_u32(w, PI_LLAMA_KEY(PI_AKEY_EXPERT_COUNT), (uint32_t)X)) ||
              (st = pi_gguf_set_u32(w, PI_LLAMA_KEY(PI_AKEY_EXPERT_USED_COUNT), (uint32_t)p->n_expert_used))))
        return st;
    /* what was planted, so a check can print requested vs measured from the file */
    if (planted && p->persist > 0.0 && (st = pi_gguf_set_f32(w, PI_KEY_GEN_PERSIST, (float)p->persist))) return st;
    if (planted && ((st = pi_gguf_set_f32(w, PI_KEY_GEN_ACTIVE, (float)p->active)) ||
                    (st = pi_gguf_set_f32(w, PI_KEY_GEN_SKEW, (float)p->skew)) ||
                    (st = pi_gguf_set_f32(w, PI_KEY_GEN_COVER80, (float)pl->cover80))))
        return st;
    if (planted && p->predictor && !p->plain &&
        ((st = pi_gguf_set_f32(w, PI_KEY_SPARSE_THRESHOLD, pl->threshold)) ||
         (st = pi_gguf_set_f32(w, PI_KEY_GEN_EXPECTED_RECALL, (float)pl->recall)) ||
         (st = pi_gguf_set_f32(w, PI_KEY_GEN_EXPECTED_PRECISION, (float)pl->precision))))
        return st;

    return PI_OK;
}

/* The plain file's tensors in order, into ts (room for 3 + 12 n_layer);
   returns how many. */
static int model_tensors(const pi_genmodel_params *p, const plant *pl, int64_t n_vocab, gtensor *ts) {
    const int64_t E = p->n_embd, hd = p->n_embd / p->n_head, KV = hd * p->n_head_kv, F = p->n_ff, X = p->n_expert;
    const bool planted = p->active != 0.0;
    /* A tensor's stream comes from its slot: its index in the list, except
       that a planted layer has 12 slots (a mixture's layer always 16)
       whether or not the predictor is written, so --predictor changes
       nothing but the predictor. */
    int nt = 0, slot = 0;
#define ADD3(ty, nd, e0, e1, e2, sc, kd, ly, ...) do { snprintf(ts[nt].name, sizeof ts[nt].name, __VA_ARGS__); \
        ts[nt].type = ty; ts[nt].n_dims = nd; ts[nt].ne0 = e0; ts[nt].ne1 = e1; ts[nt].ne2 = e2;                  \
        ts[nt].scale = sc; ts[nt].kind = kd; ts[nt].layer = ly;                                                   \
        ts[nt].stream = mix(p->seed * GOLDEN + (uint64_t)slot); nt++; slot++; } while (0)
#define ADD(ty, nd, e0, e1, sc, kd, ly, ...) ADD3(ty, nd, e0, e1, 1, sc, kd, ly, __VA_ARGS__)
    const float u = 1.7320508f; /* uniform half-width for unit variance: sqrt(3) */
    /* planted: the layers' outputs are kept small next to the embedding, so
       the residual stays dominated by it and the predictor's fixed threshold
       meets logits of the planned scale */
    const float gain = planted ? (float)(PLANT_GAIN / sqrt((double)p->n_layer)) : 1.0f;
    const int64_t zr = planted ? pl->d : 0;
    ADD(p->embd_type, 2, E, n_vocab, u, planted ? G_EMBD : G_UNIFORM, -1, PI_TN_TOKEN_EMBD);
    for (int64_t l = 0; l < p->n_layer; l++) {
        const int L = (int)l;
        if (X) slot = 1 + 16 * (int)l;
        else if (planted) slot = 1 + 12 * (int)l;
        ADD(PI_TYPE_F32, 1, E, 1, 0.0f, G_ONES, l, PI_TN_ATTN_NORM, L);
        ADD(p->type, 2, E, E, u / sqrtf((float)E), G_UNIFORM, l, PI_TN_ATTN_Q, L);
        ADD(p->type, 2, E, KV, u / sqrtf((float)E), G_UNIFORM, l, PI_TN_ATTN_K, L);
        ADD(p->type, 2, E, KV, u / sqrtf((float)E), G_UNIFORM, l, PI_TN_ATTN_V, L);
        ADD(p->type, 2, E, E, gain * u / sqrtf((float)E), G_UNIFORM, l, PI_TN_ATTN_OUT, L);
        ts[nt - 1].zero_rows = zr;
        ADD(PI_TYPE_F32, 1, E, 1, 0.0f, G_ONES, l, PI_TN_FFN_NORM, L);
        if (X) {
            /* the router (F32, as llama.cpp keeps it) and the experts stacked, in Mixtral's order */
            ADD(PI_TYPE_F32, 2, E, X, u / sqrtf((float)E), planted ? G_ROUTER : G_UNIFORM, l, PI_TN_FFN_GATE_INP, L);
            const int gate = nt;
            ADD3(p->type, 3, E, F, X, u / sqrtf((float)E), planted ? G_GATE : G_UNIFORM, l, PI_TN_FFN_GATE_EXPS, L);
            ADD3(p->type, 3, F, E, X, gain * u / sqrtf((float)F), G_UNIFORM, l, PI_TN_FFN_DOWN_EXPS, L);
            ts[nt - 1].zero_rows = zr;
            ADD3(p->type, 3, E, F, X, u / sqrtf((float)E), planted && p->act == PI_ACT_DRELU ? G_UP : G_UNIFORM, l,
                 PI_TN_FFN_UP_EXPS, L);
            if (planted && p->predictor && !p->plain) {
                ADD3(p->pred_type, 3, E, pl->R, X, u / sqrtf((float)E), G_FC1, l, PI_TN_FC1_EXPS, L);
                ADD3(p->pred_type, 3, pl->R, F, X, 0.0f, G_FC2, l, PI_TN_FC2_EXPS, L);
                ts[nt - 1].src = gate;
            }
            continue;
        }
        const int gate = nt;
        ADD(p->type, 2, E, F, u / sqrtf((float)E), planted ? G_GATE : G_UNIFORM, l, PI_TN_FFN_GATE, L);
        const int down = nt;
        ADD(p->type, 2, F, E, gain * u / sqrtf((float)F), G_UNIFORM, l, PI_TN_FFN_DOWN, L);
        ts[nt - 1].zero_rows = zr;
        ADD(p->type, 2, E, F, u / sqrtf((float)E), planted && p->act == PI_ACT_DRELU ? G_UP : G_UNIFORM, l,
            PI_TN_FFN_UP, L);
        if (planted && !p->plain) {
            ADD(p->type, 2, E, F, 0.0f, G_DOWN_T, l, PI_TN_FFN_DOWN_T, L);
            ts[nt - 1].src = down;
        }
        if (planted && p->predictor && !p->plain) {
            ADD(p->pred_type, 2, E, pl->R, u / sqrtf((float)E), G_FC1, l, PI_TN_FC1, L);
            ADD(p->pred_type, 2, pl->R, F, 0.0f, G_FC2, l, PI_TN_FC2, L);
            ts[nt - 1].src = gate;
        }
    }
    if (X) slot = 1 + 16 * (int)p->n_layer;
    else if (planted) slot = 1 + 12 * (int)p->n_layer;
    ADD(PI_TYPE_F32, 1, E, 1, 0.0f, G_ONES, -1, PI_TN_OUTPUT_NORM);
    ADD(p->output_type, 2, E, n_vocab, u / sqrtf((float)E), planted && pl->walk ? G_WALK : G_UNIFORM, -1,
        PI_TN_OUTPUT);
    ts[nt - 1].src = 0; /* the embedding */
#undef ADD
#undef ADD3
    return nt;
}

/* Tensor j->t's rows generated slab by slab on the pool, alternating the
   two slabs (one generated while the writer writes the other). */
static pi_status put_tensor(slab_writer *sw, pi_pool *pool, gen_job *j, uint8_t *slab, size_t slab_bytes,
                            int64_t slab_rows, int *cur) {
    pi_status st = PI_OK;
    const int64_t n_rows = j->t->ne1 * j->t->ne2;
    for (int64_t r0 = 0; r0 < n_rows && !st; r0 += slab_rows) {
        const int64_t rows = n_rows - r0 < slab_rows ? n_rows - r0 : slab_rows;
        j->row0 = r0;
        j->out = slab + (size_t)*cur * slab_bytes;
        pi_pool_for(pool, rows, 8, gen_rows, j);
        st = slab_writer_put(sw, j->out, (size_t)rows * j->row_bytes);
        *cur ^= 1;
    }
    return st;
}

pi_status pi_genmodel_write(const pi_genmodel_params *p, const char *path) {
    pi_status st = check_params(p);
    if (st) return st;
    pi_gguf_writer *w = NULL;
    pi_pool *pool = NULL;
    gtensor *ts = NULL;
    uint8_t *slab = NULL;
    float *scratch = NULL;
    slab_writer sw;
    bool writing = false;
    plant pl;
    memset(&pl, 0, sizeof pl);
    int64_t n_vocab = p->n_vocab;
    const int64_t E = p->n_embd, F = p->n_ff;
    const bool planted = p->active != 0.0;

    /* the output first: an unwritable path fails before any work */
    if ((st = pi_gguf_writer_create(path, false, &w))) return st;
    pi_gguf_writer_set_progress(w, p->progress, p->progress_ctx);
    if (planted && (st = plant_init(p, &pl, PLANT_OFFSETS))) goto done;
    if ((st = model_keys(w, p, &pl, &n_vocab))) goto done;
    if (!(ts = calloc((size_t)(3 + 12 * p->n_layer), sizeof *ts))) {
        st = pi_error(PI_ERR_NOMEM, "out of memory");
        goto done;
    }
    const int nt = model_tensors(p, &pl, n_vocab, ts);
    /* the file's size: the data (each tensor aligned to 32) and a generous
       bound on the header (tokens, tensor infos) */
    uint64_t need = (uint64_t)n_vocab * 96 + (uint64_t)nt * 160 + ((uint64_t)1 << 20);
    for (int i = 0; i < nt && !st; i++) {
        int64_t ne[3] = {ts[i].ne0, ts[i].ne1, ts[i].ne2};
        st = pi_gguf_add_tensor(w, ts[i].name, ts[i].type, (uint32_t)ts[i].n_dims, ne);
        need += (pi_row_size(ts[i].type, ts[i].ne0) * (uint64_t)(ts[i].ne1 * ts[i].ne2) + 31) / 32 * 32;
    }
    if (st || (st = check_room(path, need)) || (st = pi_gguf_writer_begin_data(w)) ||
        (st = pi_pool_create(p->n_threads, &pool)))
        goto done;

    const int64_t slab_rows = 512;
    int64_t widest = E > F ? E : F;
    if (pl.R > widest) widest = pl.R;
    const int64_t scratch_per = widest + (planted ? pl.nd + 2 * PLANT_MAX_K : 0);
    size_t slab_bytes = pi_row_size(PI_TYPE_F32, widest) * (size_t)slab_rows;
    slab = malloc(2 * slab_bytes); /* two: one generated while the writer writes the other */
    scratch = malloc((size_t)pi_pool_size(pool) * (size_t)scratch_per * sizeof(float));
    if (!slab || !scratch) {
        st = pi_error(PI_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = slab_writer_start(&sw, w))) goto done;
    writing = true;
    int cur = 0;
    for (int i = 0; i < nt && !st; i++) {
        /* the writer reads only slabs, so the design may move to the next layer meanwhile */
        if (planted && ts[i].layer >= 0 && ts[i].layer != pl.layer) plant_layer(&pl, p->seed, ts[i].layer);
        if (ts[i].kind == G_DOWN_T) /* ffn_down's row streams, for reading it by columns */
            for (int64_t c = 0; c < E; c++) pl.down_seed[c] = row_seed(ts[ts[i].src].stream, c);
        gen_job j = {ts, &ts[i], &pl, NULL, 0, pi_row_size(ts[i].type, ts[i].ne0), NULL, scratch, scratch_per};
        st = put_tensor(&sw, pool, &j, slab, slab_bytes, slab_rows, &cur);
    }
    if (!st) st = slab_writer_wait(&sw);
done:
    if (writing) slab_writer_stop(&sw);
    st = pi_gguf_writer_finish(w, st);
    pi_pool_free(pool);
    plant_free(&pl);
    free(ts);
    free(slab);
    free(scratch);
    return st;
}

/* ---- the bundle file, written directly ---- */

#define BUNDLE_TOKENS 1000000 /* the nominal tokens the planted activation counts are expected over */

/* The predictor's logit histograms a profile of the planted model would
   count, per token of a unit (2 HIST_BINS: inactive then active neurons by
   bin; NULL when out of memory): neuron r's logit L ~ N(-t_r, c1^2), and it
   is active with probability q Phi(L / en) given L (the gate is L plus
   independent noise of sd en, as for the threshold; dReLU's up is positive
   with probability q). Each bin's mass by the midpoint rule, HIST_SUB points
   per bin. */
static double *plant_hist(const pi_genmodel_params *p, const plant *pl) {
    const int64_t n = (int64_t)HIST_BINS * HIST_SUB;
    const double step = HIST_W / HIST_SUB, span = 8.0 * pl->c1;
    const double en = sqrt(PLANT_EPS * PLANT_EPS + quant_noise(p->type));
    double *phi = malloc((size_t)n * sizeof *phi), *hist = calloc(2 * (size_t)HIST_BINS, sizeof *hist);
    if (!phi || !hist) {
        free(phi);
        free(hist);
        return NULL;
    }
    for (int64_t g = 0; g < n; g++) phi[g] = pl->q * norm_cdf((HIST_LO + ((double)g + 0.5) * step) / en);
    const double norm = step / (pl->c1 * sqrt(2.0 * M_PI));
    for (int64_t r = 0; r < pl->F; r++) {
        const double mu = -(double)pl->t[r];
        int64_t g0 = (int64_t)floor((mu - span - HIST_LO) / step), g1 = (int64_t)ceil((mu + span - HIST_LO) / step);
        if (g0 < 0) g0 = 0;
        if (g1 > n) g1 = n;
        for (int64_t g = g0; g < g1; g++) {
            const double z = (HIST_LO + ((double)g + 0.5) * step - mu) / pl->c1, m = norm * exp(-0.5 * z * z);
            hist[g / HIST_SUB] += m * (1.0 - phi[g]);
            hist[HIST_BINS + g / HIST_SUB] += m * phi[g];
        }
    }
    free(phi);
    return hist;
}

/* The bundle file's planted statistics per FFN unit (layer, or layer and
   expert) over BUNDLE_TOKENS tokens: for a mixture each unit's tokens (its
   expert's planted share), with a predictor the logit histograms, every
   unit's scaled by its tokens. */
static pi_status unit_stats(pi_gguf_writer *w, const pi_genmodel_params *p, plant *pl, int64_t L) {
    const int64_t X = p->n_expert, U = X ? L * X : L;
    double *tok = malloc((size_t)U * sizeof *tok), *hist = p->predictor ? plant_hist(p, pl) : NULL;
    float *v = malloc((size_t)(p->predictor ? U * 2 * HIST_BINS : U) * sizeof *v);
    pi_status st = PI_OK;
    if (!tok || !v || (p->predictor && !hist)) {
        st = pi_error(PI_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t u = 0; u < U; u++) {
        if (X && u % X == 0) shuffle_rank(pl->erank, pl->order, pl->X, layer_stream(p->seed, u / X, ROUTER_TAG_ORDER));
        tok[u] = X ? pl->load[pl->erank[u % X]] * BUNDLE_TOKENS : BUNDLE_TOKENS;
    }
    if (X) {
        for (int64_t u = 0; u < U; u++) v[u] = (float)tok[u];
        if ((st = pi_gguf_set_arr(w, PI_KEY_STATS_UNIT_TOKENS, PI_GGUF_FLOAT32, v, (uint64_t)U))) goto done;
    }
    if (hist) { /* for thresholds at other recall targets */
        for (int64_t u = 0; u < U; u++)
            for (int64_t b = 0; b < 2 * HIST_BINS; b++) v[u * 2 * HIST_BINS + b] = (float)(hist[b] * tok[u]);
        const float range[2] = {(float)HIST_LO, (float)HIST_W};
        st = pi_gguf_set_arr(w, PI_KEY_STATS_PRED_HIST, PI_GGUF_FLOAT32, v, (uint64_t)(U * 2 * HIST_BINS));
        if (!st) st = pi_gguf_set_arr(w, PI_KEY_STATS_PRED_RANGE, PI_GGUF_FLOAT32, range, 2);
    }
done:
    free(tok);
    free(hist);
    free(v);
    return st;
}


/* Whether ts is one of its layer's FFN matrices (what bundles replace). */
static bool is_ffn_matrix(const gtensor *t) {
    static const char *const fmt[] = {PI_TN_FFN_GATE,      PI_TN_FFN_UP,      PI_TN_FFN_DOWN,     PI_TN_FFN_DOWN_T,
                                      PI_TN_FFN_GATE_EXPS, PI_TN_FFN_UP_EXPS, PI_TN_FFN_DOWN_EXPS};
    const pi_gguf_str name = {strlen(t->name), t->name};
    for (size_t k = 0; t->layer >= 0 && k < sizeof fmt / sizeof fmt[0]; k++)
        if (pi_tensor_layer(name, fmt[k]) == t->layer) return true;
    return false;
}

/* Layer il's gate and up matrices, and where its bundles' down part comes
   from: a mixture's ffn_down_exps (transposed), a dense planted layer's
   ffn_down_t. Indices into ts. */
static void ffn_roles(const gtensor *ts, int nt, int64_t il, bool moe, int *gate, int *up, int *down) {
    *gate = *up = *down = -1;
    for (int q = 0; q < nt; q++) {
        if (ts[q].layer != il || !is_ffn_matrix(&ts[q])) continue;
        if (strstr(ts[q].name, "ffn_gate")) *gate = q;
        else if (strstr(ts[q].name, "ffn_up")) *up = q;
        else if (strstr(ts[q].name, moe ? "ffn_down_exps" : "ffn_down_t")) *down = q;
    }
}

typedef struct {
    const gen_job *gate, *up;
    const pi_bundle_layout *bl;
    const int32_t *order;  /* (F) the expert's neuron at each position: hottest first */
    int64_t x, F, k0;      /* the expert; the slab's first position */
    const uint8_t *down_t; /* (F rows of the down part's bytes) the expert's down columns, in neuron order */
    uint8_t *out;          /* the slab's bundles */
    float *scratch;
    int64_t scratch_per;
} bundle_job;

static void gen_bundles(void *ctx, int64_t a, int64_t b, int tid) {
    const bundle_job *j = ctx;
    const pi_bundle_parts *bp = &j->bl->layer[0]; /* gen-model's layers are alike */
    const size_t stride = j->bl->stride;
    float *row = j->scratch + (size_t)tid * (size_t)j->scratch_per, *tmp = row + j->gate->t->ne0;
    for (int64_t k = a; k < b; k++) {
        const int64_t i = j->order[j->k0 + k], r = j->x * j->F + i;
        uint8_t *dst = j->out + (size_t)k * stride;
        memset(dst, 0, stride);
        gen_row(j->gate, r, row, tmp);
        pi_quantize_row(bp->type[PI_BUNDLE_GATE], row, dst + bp->off[PI_BUNDLE_GATE], j->gate->t->ne0);
        gen_row(j->up, r, row, tmp);
        pi_quantize_row(bp->type[PI_BUNDLE_UP], row, dst + bp->off[PI_BUNDLE_UP], j->up->t->ne0);
        memcpy(dst + bp->off[PI_BUNDLE_DOWN], j->down_t + (size_t)i * bp->bytes[PI_BUNDLE_DOWN], bp->bytes[PI_BUNDLE_DOWN]);
    }
}

pi_status pi_genmodel_write_bundle(const pi_genmodel_params *p, const char *path) {
    pi_status st = check_params(p);
    if (st) return st;
    if (p->active == 0.0 || p->act == PI_ACT_SILU)
        return pi_error(PI_ERR_INVALID, "a bundle file needs planted sparsity (--act relu|drelu --active F)");
    pi_gguf_writer *w = NULL;
    pi_pool *pool = NULL;
    gtensor *ts = NULL;
    uint8_t *slab = NULL, *down = NULL, *down_t = NULL;
    float *scratch = NULL;
    int32_t *order = NULL, *fc2_map = NULL, *small = NULL;
    slab_writer sw;
    bool writing = false;
    plant pl;
    memset(&pl, 0, sizeof pl);
    pi_bundle_layout bl = {0};
    int64_t n_vocab = p->n_vocab;
    const int64_t E = p->n_embd, F = p->n_ff, X = p->n_expert ? p->n_expert : 1, L = p->n_layer;

    if ((st = pi_gguf_writer_create(path, false, &w))) return st;
    pi_gguf_writer_set_progress(w, p->progress, p->progress_ctx);
    if ((st = plant_init(p, &pl, PLANT_OFFSETS)) || (st = model_keys(w, p, &pl, &n_vocab))) goto done;
    if (!(ts = calloc((size_t)(3 + 12 * L), sizeof *ts))) {
        st = pi_error(PI_ERR_NOMEM, "out of memory");
        goto done;
    }
    pi_genmodel_params full = *p;
    full.plain = false; /* the bundle file has pinfer's additions */
    const int nt = model_tensors(&full, &pl, n_vocab, ts);
    /* the layout: gate and up rows as generated, the down part as convert
       makes it from the plain file (a dense planted model's ffn_down_t; a
       mixture's ffn_down_exps transposed) */
    int gate_i, up_i, down_i;
    ffn_roles(ts, nt, 0, p->n_expert > 0, &gate_i, &up_i, &down_i);
    const pi_weight dw = {NULL, ts[down_i].type, {ts[down_i].ne0, ts[down_i].ne1, 1, 1}, 0, {0, NULL}};
    const pi_type dt = p->n_expert ? pi_weight_down_t_type(&dw) : ts[down_i].type;
    pi_type (*types)[3] = malloc((size_t)L * sizeof *types); /* every layer alike */
    if (!types) {
        st = pi_error(PI_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t il = 0; il < L; il++) types[il][0] = ts[gate_i].type, types[il][1] = ts[up_i].type, types[il][2] = dt;
    st = pi_bundle_layout_make((const pi_type(*)[3])types, L, E, F, PI_BUNDLE_DEFAULT_ALIGN, &bl);
    free(types);
    if (st ||
        (st = pi_gguf_set_u32(w, PI_KEY_GENERAL_ALIGNMENT, PI_BUNDLE_FILE_ALIGN)) || (st = pi_bundle_layout_set(w, &bl)))
        goto done;
    /* the planted statistics, as convert --reorder stores measured ones:
       expected counts over BUNDLE_TOKENS tokens, neurons in planted
       hotness order */
    if ((st = pi_gguf_set_bool(w, PI_KEY_REORDERED, true)) ||
        (st = pi_gguf_set_u64(w, PI_KEY_STATS_TOKENS, BUNDLE_TOKENS)) ||
        (st = pi_gguf_set_f32(w, PI_KEY_STATS_THRESHOLD, 0.0f)) ||
        (st = pi_gguf_set_str(w, PI_KEY_STATS_MODEL, "planted by pinfer gen-model (expected counts)")))
        goto done;
    if ((st = unit_stats(w, p, &pl, L))) goto done;
    /* the tensors: the plain file's, each layer's FFN matrices replaced by
       its bundles, then the permutations and the counts */
    uint64_t need = (uint64_t)n_vocab * 96 + (uint64_t)nt * 160 + ((uint64_t)1 << 20);
    int64_t last_layer = -1;
    for (int i = 0; i < nt && !st; i++) {
        if (is_ffn_matrix(&ts[i])) {
            if (ts[i].layer == last_layer) continue;
            last_layer = ts[i].layer;
            char nm[PI_NAME_MAX];
            snprintf(nm, sizeof nm, PI_TN_FFN_BUNDLE, (int)ts[i].layer);
            const int64_t ne[3] = {(int64_t)bl.stride, F, X};
            st = pi_gguf_add_tensor(w, nm, PI_TYPE_I8, p->n_expert ? 3 : 2, ne);
            need += (uint64_t)bl.stride * (uint64_t)(F * X) + PI_BUNDLE_FILE_ALIGN;
            continue;
        }
        int64_t ne[3] = {ts[i].ne0, ts[i].ne1, ts[i].ne2};
        st = pi_gguf_add_tensor(w, ts[i].name, ts[i].type, (uint32_t)ts[i].n_dims, ne);
        need += pi_row_size(ts[i].type, ts[i].ne0) * (uint64_t)(ts[i].ne1 * ts[i].ne2) + PI_BUNDLE_FILE_ALIGN;
    }
    for (int64_t l = 0; l < L && !st; l++) {
        char nm[PI_NAME_MAX];
        const int64_t ne[1] = {F * X};
        snprintf(nm, sizeof nm, PI_TN_FFN_PERM, (int)l);
        st = pi_gguf_add_tensor(w, nm, PI_TYPE_I32, 1, ne);
        snprintf(nm, sizeof nm, PI_TN_FFN_ACT_COUNT, (int)l);
        if (!st) st = pi_gguf_add_tensor(w, nm, PI_TYPE_I32, 1, ne);
        snprintf(nm, sizeof nm, PI_TN_FFN_SEL_COUNT, (int)l);
        if (!st && p->predictor) st = pi_gguf_add_tensor(w, nm, PI_TYPE_I32, 1, ne);
        need += 3 * ((uint64_t)(F * X) * 4 + PI_BUNDLE_FILE_ALIGN);
    }
    if (st || (st = check_room(path, need)) || (st = pi_gguf_writer_begin_data(w)) ||
        (st = pi_pool_create(p->n_threads, &pool)))
        goto done;

    const int64_t slab_rows = 512;
    int64_t widest = E > F ? E : F;
    if (pl.R > widest) widest = pl.R;
    const int64_t scratch_per = widest + pl.nd + 2 * PLANT_MAX_K;
    size_t slab_bytes = pi_row_size(PI_TYPE_F32, widest) * (size_t)slab_rows;
    if (bl.stride * (size_t)slab_rows > slab_bytes) slab_bytes = bl.stride * (size_t)slab_rows;
    const size_t down_rb = pi_row_size(ts[down_i].type, ts[down_i].ne0);
    slab = malloc(2 * slab_bytes);
    scratch = malloc((size_t)pi_pool_size(pool) * (size_t)scratch_per * sizeof(float));
    order = malloc((size_t)(X * F) * sizeof *order);
    fc2_map = malloc((size_t)(X * F) * sizeof *fc2_map);
    small = malloc((size_t)(X * F) * sizeof *small);
    down = malloc(down_rb * (size_t)(p->n_expert ? E : F));
    down_t = malloc(bl.layer[0].bytes[PI_BUNDLE_DOWN] * (size_t)F);
    if (!slab || !scratch || !order || !fc2_map || !small || !down || !down_t) {
        st = pi_error(PI_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = slab_writer_start(&sw, w))) goto done;
    writing = true;
    int cur = 0;
    last_layer = -1;
    for (int i = 0; i < nt && !st; i++) {
        const gtensor *t = &ts[i];
        if (t->layer >= 0 && t->layer != pl.layer) {
            plant_layer(&pl, p->seed, t->layer);
            for (int64_t x = 0; x < X; x++) /* each expert's neurons, hottest (rank 0) first */
                for (int64_t n = 0; n < F; n++) {
                    order[x * F + pl.rank[x * F + n]] = (int32_t)n;
                    fc2_map[x * F + pl.rank[x * F + n]] = (int32_t)(x * F + n);
                }
        }
        if (is_ffn_matrix(t)) {
            if (t->layer == last_layer) continue;
            last_layer = t->layer;
            int g, u, d;
            ffn_roles(ts, nt, t->layer, p->n_expert > 0, &g, &u, &d);
            if (!p->n_expert) /* ffn_down's row streams, for reading it by columns */
                for (int64_t c = 0; c < E; c++) pl.down_seed[c] = row_seed(ts[ts[d].src].stream, c);
            const gen_job gj = {ts, &ts[g], &pl, NULL, 0, 0, NULL, scratch, scratch_per};
            const gen_job uj = {ts, &ts[u], &pl, NULL, 0, 0, NULL, scratch, scratch_per};
            for (int64_t x = 0; x < X && !st; x++) {
                /* the expert's down columns, in neuron order */
                gen_job dj = {ts, &ts[d], &pl, NULL, 0, down_rb, down, scratch, scratch_per};
                if (p->n_expert) {
                    dj.row0 = x * E;
                    pi_pool_for(pool, E, 8, gen_rows, &dj);
                    const pi_weight slice = {down, ts[d].type, {F, E, 1, 1}, down_rb, {0, NULL}};
                    if ((st = pi_weight_transpose(&slice, dt, down_t))) break;
                } else {
                    dj.out = down_t;
                    pi_pool_for(pool, F, 8, gen_rows, &dj);
                }
                for (int64_t k0 = 0; k0 < F && !st; k0 += slab_rows) {
                    const int64_t n = F - k0 < slab_rows ? F - k0 : slab_rows;
                    bundle_job bj = {&gj, &uj, &bl, order + x * F, x, F, k0, down_t, slab + (size_t)cur * slab_bytes,
                                     scratch, scratch_per};
                    pi_pool_for(pool, n, 8, gen_bundles, &bj);
                    st = slab_writer_put(&sw, bj.out, (size_t)n * bl.stride);
                    cur ^= 1;
                }
            }
            continue;
        }
        gen_job j = {ts, t, &pl, t->kind == G_FC2 ? fc2_map : NULL, 0, pi_row_size(t->type, t->ne0), NULL, scratch,
                     scratch_per};
        st = put_tensor(&sw, pool, &j, slab, slab_bytes, slab_rows, &cur);
    }
    if (!st) st = slab_writer_wait(&sw);
    /* the permutations and the expected counts (small: written after the slabs) */
    for (int64_t l = 0; l < L && !st; l++) {
        plant_layer(&pl, p->seed, l);
        for (int64_t x = 0; x < X; x++)
            for (int64_t n = 0; n < F; n++) small[x * F + pl.rank[x * F + n]] = (int32_t)n;
        st = pi_gguf_write_data(w, small, (size_t)(X * F) * sizeof *small);
        for (int64_t x = 0; x < X && !st; x++) {
            const double load = p->n_expert ? pl.load[pl.erank[x]] : 1.0;
            for (int64_t k = 0; k < F; k++) small[x * F + k] = (int32_t)llround(load * pl.p[k] * BUNDLE_TOKENS);
        }
        if (!st) st = pi_gguf_write_data(w, small, (size_t)(X * F) * sizeof *small);
        /* the predictor selects neuron k when its logit, N(-t_k, c1^2), reaches the threshold */
        for (int64_t x = 0; x < X && !st && p->predictor; x++) {
            const double load = p->n_expert ? pl.load[pl.erank[x]] : 1.0;
            for (int64_t k = 0; k < F; k++)
                small[x * F + k] = (int32_t)llround(
                    load * norm_cdf((-(double)pl.t[k] - (double)pl.threshold) / (double)pl.c1) * BUNDLE_TOKENS);
        }
        if (!st && p->predictor) st = pi_gguf_write_data(w, small, (size_t)(X * F) * sizeof *small);
    }
done:
    if (writing) slab_writer_stop(&sw);
    st = pi_gguf_writer_finish(w, st);
    pi_pool_free(pool);
    plant_free(&pl);
    free(ts);
    free(slab);
    free(scratch);
    free(order);
    free(fc2_map);
    free(small);
    free(down);
    free(down_t);
    pi_bundle_layout_free(&bl);
    return st;
}
