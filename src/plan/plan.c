/*
 * plan.c — model profile, cost model, solver and plan file (see plan.h for
 * the equations). Nothing here loads a model: the profile is read from the
 * file's metadata and the budget figures its loader measured.
 */
#include "plan.h"

#include "base/units.h"

#include "gguf/bundle.h"
#include "gguf/gguf.h"
#include "gguf/names.h"
#include "store/cache.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Fixed overheads, calibrated on the project machine against measured
   runs of bench (see README, "Planner"). */
#define C_LAYER_S 200e-6  /* per layer: pool barriers, norms, attention over a short context */
#define C_TOKEN_S 300e-6  /* per token: embedding row, sampling, bookkeeping */
/* Per selected neuron and thread, beyond its rows' bytes at the measured
   row-dot rate: the scattered rows' first cache misses, the selection list
   and the activation. On a planted 7b-l8 with everything resident, 2
   threads, recall 0.95 and 0.99 selected 15748 and 21570 neurons per token
   and their FFN took 5.80-5.93 and 6.66-6.82 ms (two rounds each, build of
   2026-11-27): 0.15 us more per token for each neuron more, of which the
   gate row's bytes at the row-dot rate are 0.10 us. (Before the integer
   down path and the gathered row-dots' rework the same runs measured 0.32
   us per neuron, and this constant was 0.5e-6: it priced a resident 7b-l8
   token at 19.1 ms where 11.9-14.1 ms were measured.) */
#define C_NEURON_S 0.1e-6
/* The share of a unit's misses that the lookahead has read by the time the
   unit runs, when the file has predictors (the engine reads the next unit's
   predicted misses while this one computes): 82-95% of the misses on the
   planted 47B mixture at 8-16 GiB, 99-100% of them then selected. */
#define C_AHEAD 0.85

/* ---- model profile ---- */

void pi_mprofile_free(pi_mprofile *p) {
    if (!p) return;
    free(p->act);
    free(p->sel);
    free(p->sel_file);
    free(p->sel_z);
    free(p->kappa);
    free(p->hist.h);
    pi_pred_ghist_free(&p->ghist);
    free(p);
}

static bool f32_array(const pi_gguf *g, const char *key, int64_t n, float *out) {
    const pi_gguf_kv *kv;
    if (pi_gguf_get_arr(g, key, PI_GGUF_FLOAT32, &kv) || (int64_t)kv->arr_n < n) return false;
    memcpy(out, kv->arr_data, (size_t)n * sizeof *out);
    return true;
}

/* out[0..n) = the counts of tensor nm (I32 or F32 [n]) over `tokens`, each
   at most 1; false when the file has no such tensor of that shape. */
static bool count_tensor(const pi_gguf *g, const char *nm, int64_t n, double tokens, double *out) {
    const pi_gguf_tensor *t = pi_gguf_find_tensor(g, nm);
    if (!t || t->ne[0] != n || (t->type != PI_TYPE_I32 && t->type != PI_TYPE_F32)) return false;
    for (int64_t i = 0; i < n; i++) {
        const double c = t->type == PI_TYPE_I32 ? (double)((const int32_t *)t->data)[i] : (double)((const float *)t->data)[i];
        out[i] = c / tokens > 1.0 ? 1.0 : c / tokens > 0.0 ? c / tokens : 0.0;
    }
    return true;
}

static double norm_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

/* Phi^-1(u) for u in (0, 1): Acklam's rational approximation (relative
   error below 1.2e-9) and one Halley step. */
static double norm_quantile(double u) {
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                               1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                               6.680131188771972e+01,  -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                               -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                               3.754408661907416e+00};
    double x;
    if (u < 0.02425) {
        const double q = sqrt(-2.0 * log(u));
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    } else if (u > 1.0 - 0.02425) {
        const double q = sqrt(-2.0 * log(1.0 - u));
        x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    } else {
        const double q = u - 0.5, r = q * q;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
    }
    const double e = norm_cdf(x) - u, g = e * sqrt(2.0 * M_PI) * exp(0.5 * x * x);
    return x - g / (1.0 + 0.5 * x * g);
}

/* Temporal persistence (pi_mprofile.rho, .kappa). A neuron of rate s fires
   when its latent normal variable exceeds z = Phi^-1(1 - s); with lag-1
   correlation rho, P(fires now and the token before) = s^2 + C(z, rho), where
   by Sheppard's formula for equal thresholds
     C(z, rho) = 1/(2 pi) * integral over [0, asin rho] of exp(-z^2 / (1 + sin t)) dt
   (Simpson's rule, 32 intervals: the integrand is smooth on a bounded
   interval). Its persistence, the excess over independence as a share of
   the rest, is kappa = C / (s (1 - s)). At the same rho a neuron of rate
   0.02 keeps under a third of the kappa of one of rate 0.5 (rho 0.2: 0.036
   and 0.128), so one figure per layer, weighted by activity as the reuse is
   measured, overstates the cold neurons' persistence: on a planted 7b-l8 at
   50% it predicted 495 cache hits per token where 228-259 were measured. */
#define KZ_LO (-6.0) /* the latent thresholds tabulated: [-6, 6] in steps of 0.05 */
#define KZ_STEP 0.05
#define KZ_N 241

static double excess_both(double z, double rho) {
    if (!(rho > 0.0)) return 0.0;
    const double T = asin(rho < 0.999 ? rho : 0.999), h = T / 32.0;
    double sum = 0.0;
    for (int j = 0; j <= 32; j++) sum += (j == 0 || j == 32 ? 1.0 : (j & 1) ? 4.0 : 2.0) * exp(-z * z / (1.0 + sin(j * h)));
    return sum * h / 3.0 / (2.0 * M_PI);
}

/* The grid index nearest the latent threshold of rate s (0 < s < 1). */
static int kz_index(double s) {
    const double z = -norm_quantile(s), j = floor((z - KZ_LO) / KZ_STEP + 0.5);
    return j < 0.0 ? 0 : j > KZ_N - 1 ? KZ_N - 1 : (int)j;
}

/* The rho in [0, 0.99] at which a layer's neurons of rates a[0..F) reuse
   the share r1 of their activity from the token before: sum_i (a_i^2 +
   C(z_i, rho)) / sum_i a_i = r1, the C term over the neurons binned by z
   (bisection; the reuse grows with rho). */
static double fit_rho(const double *a, int64_t F, double r1) {
    double n[KZ_N] = {0}, A = 0.0, ind = 0.0;
    for (int64_t i = 0; i < F; i++) {
        if (!(a[i] > 0.0)) continue;
        A += a[i];
        ind += a[i] * a[i];
        if (a[i] < 1.0) n[kz_index(a[i])] += 1.0;
    }
    if (!(A > 0.0) || !(r1 * A > ind)) return 0.0;
    double lo = 0.0, hi = 0.99;
    for (int it = 0; it < 30; it++) {
        const double mid = 0.5 * (lo + hi);
        double r = ind;
        for (int j = 0; j < KZ_N; j++)
            if (n[j] > 0.0) r += n[j] * excess_both(KZ_LO + KZ_STEP * j, mid);
        if (r < r1 * A) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* kappa_i from each layer's rho at the selection rates s_i: C on the grid,
   interpolated in its logarithm (it falls about exponentially in z). */
static void persist_rates(pi_mprofile *p) {
    if (!p->kappa) return;
    const int64_t L = p->n_layer, F = p->n_ff;
    for (int64_t l = 0; l < L; l++) {
        if (!(p->rho[l] > 0.0)) {
            memset(p->kappa + l * F, 0, (size_t)F * sizeof *p->kappa);
            continue;
        }
        double lc[KZ_N];
        for (int j = 0; j < KZ_N; j++) lc[j] = log(excess_both(KZ_LO + KZ_STEP * j, p->rho[l]));
        for (int64_t i = 0; i < F; i++) {
            const double s = p->sel[l * F + i];
            double k = 0.0;
            if (s > 0.0 && s < 1.0) {
                double x = (-norm_quantile(s) - KZ_LO) / KZ_STEP;
                x = x < 0.0 ? 0.0 : x > KZ_N - 1 ? KZ_N - 1 : x;
                const int j = x < KZ_N - 1 ? (int)x : KZ_N - 2;
                k = exp(lc[j] + (x - j) * (lc[j + 1] - lc[j])) / (s * (1.0 - s));
            }
            p->kappa[l * F + i] = k > 0.0 ? (k < 0.95 ? k : 0.95) : 0.0;
        }
    }
}

/* A layer's selections at another threshold, from those counted at the
   file's: each neuron's logit taken as normal with the layer's common
   spread sigma, so that a neuron selected with probability s at threshold
   T is selected with probability Phi(Phi^-1(s) - (T' - T) / sigma) at T'.
   With z[i] = Phi^-1(s_i), the shift d = (T' - T) / sigma for which the
   layer selects `target` neurons per token (Newton's method, kept in a
   bisection bracket; the total falls as d grows). On gen-model's planted
   neurons (logits N(-t_i, c1^2)) this is exact; scaling every neuron by
   the same factor instead counted 6-7% too many selections outside hot
   prefixes of 30-80% at recall 0.95 from counts taken at 0.97. */
static double probit_shift(const double *z, int64_t F, double target) {
    double lo = -40.0, hi = 40.0, d = 0.0;
    for (int it = 0; it < 60; it++) {
        double sum = 0.0, slope = 0.0;
        for (int64_t i = 0; i < F; i++) {
            if (isinf(z[i])) {
                sum += z[i] > 0.0;
                continue;
            }
            const double x = z[i] - d;
            sum += norm_cdf(x);
            slope += exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
        }
        if (fabs(sum - target) <= 1e-9 * (target > 1.0 ? target : 1.0)) break;
        if (sum > target) lo = d; /* too many selected: a higher threshold */
        else hi = d;
        double next = slope > 0.0 ? d + (sum - target) / slope : 0.5 * (lo + hi);
        if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
        if (fabs(next - d) < 1e-12) break;
        d = next;
    }
    return d;
}

/* s_i from a_i and each layer's recall and precision. */
static void select_rates(pi_mprofile *p) {
    const int64_t L = p->n_layer, F = p->n_ff;
    for (int64_t l = 0; l < L; l++) {
        double A = 0.0, S_file = 0.0;
        for (int64_t i = 0; i < F; i++) A += p->act[l * F + i];
        const double r = p->recall[l], pr = p->precision[l];
        if (p->sel_file)
            for (int64_t i = 0; i < F; i++) S_file += p->sel_file[l * F + i];
        if (S_file > 0.0) {
            /* the selections counted at the file's thresholds, moved to
               this recall's (see probit_shift): where a predictor's false
               positives fall depends on how each neuron's logits spread (on
               a planted 7b-l8, profile counted the selections outside hot
               prefixes of 20-80% within 0.4% of gen-model's planted counts;
               the square-root rule below gave 1-13% more) */
            const double *z = p->sel_z + l * F, d = probit_shift(z, F, r * A / pr);
            for (int64_t i = 0; i < F; i++) p->sel[l * F + i] = isinf(z[i]) ? (z[i] > 0.0 ? 1.0 : 0.0) : norm_cdf(z[i] - d);
            continue;
        }
        /* selected = r A / pr = r A + (false positives); the false positives
           are spread over the neurons in proportion to sqrt(a_i): between
           uniform and proportional to activity, and the split that matched
           measured selections (0.601 and 0.853 of them in hot prefixes of
           22% and 60%, against 0.603 and 0.855 measured, on a planted 7b-l8
           model; uniform gave 0.52 and 0.79) */
        double fp = r * A / pr - r * A, W = 0.0;
        for (int64_t i = 0; i < F; i++) W += sqrt(p->act[l * F + i]);
        if (fp < 0.0 || !(W > 0.0)) fp = 0.0, W = 1.0;
        for (int64_t i = 0; i < F; i++) {
            double a = p->act[l * F + i], sv = r * a + fp * sqrt(a) / W;
            p->sel[l * F + i] = sv > 1.0 ? 1.0 : sv;
        }
    }
    persist_rates(p);
}

pi_status pi_mprofile_at_recall(pi_mprofile *p, double r, float *thr) {
    if (!p->hist.h) return pi_error(PI_ERR_NOT_FOUND, "no predictor logit histograms to choose thresholds from");
    pi_status st = pi_pred_hist_thresholds(&p->hist, r, thr, p->recall, p->precision, NULL);
    if (st) return st;
    select_rates(p);
    return PI_OK;
}

pi_status pi_mprofile_make(const pi_gguf *g, const char *path, const pi_budget_needs *z, pi_mprofile **out) {
    *out = NULL;
    const int64_t L = z->n_layer, F = z->n_ff;
    if (L > PI_PLAN_MAX_LAYERS)
        return pi_error(PI_ERR_UNSUPPORTED, "%s: %lld layers exceed the planner's %d", path, (long long)L,
                        PI_PLAN_MAX_LAYERS);
    if (L <= 0 || F <= 0) return pi_error(PI_ERR_INVALID, "%s: a model profile needs layers and neurons", path);
    pi_mprofile *p = calloc(1, sizeof *p);
    if (!p || !(p->act = malloc((size_t)(L * F) * sizeof *p->act)) ||
        !(p->sel = malloc((size_t)(L * F) * sizeof *p->sel))) {
        pi_mprofile_free(p);
        return pi_error(PI_ERR_NOMEM, "out of memory");
    }
    p->n_layer = L;
    p->n_ff = F;
    p->n_embd = z->n_embd;
    p->n_ctx = z->n_ctx;
    p->kv = z->kv;
    p->fixed = z->fixed;
    p->head_flash = z->head_flash;
    p->head_n_rows = z->head_n_rows;
    p->head_row_bytes = z->head_row_bytes;
    p->session = z->session;
    p->io = z->io;
    p->min_cold = z->min_cold;
    p->min_slots = z->min_slots;
    p->lend_slots = z->lend_slots;
    p->max_merge = z->max_merge; /* 0: unknown, taken as 16 (reads_of) */
    p->stride = z->stride;
    p->bundle_mem = z->bundle_mem;
    memcpy(p->part_bytes, z->part_bytes, sizeof p->part_bytes);
    memcpy(p->part_type, z->part_type, sizeof p->part_type);
    memcpy(p->fixed_by_type, z->fixed_by_type, sizeof p->fixed_by_type);
    memcpy(p->pred_by_type, z->pred_by_type, sizeof p->pred_by_type);
    for (int y = 0; y < PI_TYPE_COUNT; y++) p->lookahead |= p->pred_by_type[y] > 0; /* run's default with predictors */
    p->file_size = pi_gguf_file_size(g);
    const pi_gguf_tensor *head = pi_gguf_find_tensor(g, PI_TN_OUTPUT); /* absent: tied to the embedding */
    if (!head) head = pi_gguf_find_tensor(g, PI_TN_TOKEN_EMBD);
    if (head && head->type < PI_TYPE_COUNT && pi_type_get(head->type)) p->head_bytes = head->nbytes, p->head_type = (pi_type)head->type;
    p->n_expert = z->n_expert;
    p->n_expert_used = z->n_expert_used;
    const int64_t X = p->n_expert ? p->n_expert : 1; /* a layer's count tensor holds its experts' */
    for (int64_t l = 0; l < L; l++) p->visit[l] = p->n_expert ? (double)p->n_expert_used / (double)X : 1.0;

    /* activation probabilities: the stored counts, else a uniform guess */
    int64_t tokens = 0;
    p->have_stats = !pi_gguf_get_i64(g, PI_KEY_STATS_TOKENS, &tokens) && tokens > 0;
    p->tokens = (double)tokens;
    for (int64_t l = 0; l < L / X && p->have_stats; l++) {
        char nm[64];
        snprintf(nm, sizeof nm, PI_TN_FFN_ACT_COUNT, (int)l);
        if (!count_tensor(g, nm, F * X, (double)tokens, p->act + l * F * X)) {
            p->have_stats = false;
            break;
        }
    }
    if (p->have_stats) { /* the selections at the file's thresholds, where counted (all layers or none) */
        if (!(p->sel_file = malloc((size_t)(L * F) * sizeof *p->sel_file))) {
            pi_mprofile_free(p);
            return pi_error(PI_ERR_NOMEM, "out of memory");
        }
        for (int64_t l = 0; l < L / X && p->sel_file; l++) {
            char nm[64];
            snprintf(nm, sizeof nm, PI_TN_FFN_SEL_COUNT, (int)l);
            if (!count_tensor(g, nm, F * X, (double)tokens, p->sel_file + l * F * X)) {
                free(p->sel_file);
                p->sel_file = NULL;
            }
        }
        if (p->sel_file && !(p->sel_z = malloc((size_t)(L * F) * sizeof *p->sel_z))) {
            pi_mprofile_free(p);
            return pi_error(PI_ERR_NOMEM, "out of memory");
        }
        for (int64_t i = 0; p->sel_file && i < L * F; i++) {
            const double v = p->sel_file[i];
            p->sel_z[i] = v <= 0.0 ? -INFINITY : v >= 1.0 ? INFINITY : norm_quantile(v);
        }
    }
    const pi_gguf_kv *ukv;
    if (p->n_expert && p->have_stats && !pi_gguf_get_arr(g, PI_KEY_STATS_UNIT_TOKENS, PI_GGUF_FLOAT32, &ukv) &&
        ukv->arr_n == (uint64_t)L)
        for (int64_t l = 0; l < L; l++) {
            float v;
            memcpy(&v, (const uint8_t *)ukv->arr_data + 4 * (size_t)l, 4);
            const double share = (double)v / (double)tokens;
            p->visit[l] = share > 1e-6 ? (share < 1.0 ? share : 1.0) : 1e-6;
        }
    if (!p->have_stats)
        for (int64_t i = 0; i < L * F; i++) p->act[i] = 0.1;

    /* temporal persistence: the measured reuse of the previous token's
       neurons, read as the latent variables' correlation (see fit_rho) */
    const pi_gguf_kv *rkv;
    if (p->have_stats && !pi_gguf_get_arr(g, PI_KEY_STATS_REUSE, PI_GGUF_FLOAT32, &rkv) &&
        rkv->arr_n == (uint64_t)(L * PI_STATS_REUSE_K)) {
        if (!(p->kappa = calloc((size_t)(L * F), sizeof *p->kappa))) {
            pi_mprofile_free(p);
            return pi_error(PI_ERR_NOMEM, "out of memory");
        }
        p->have_reuse = true;
        for (int64_t l = 0; l < L; l++) {
            float r1;
            memcpy(&r1, (const uint8_t *)rkv->arr_data + (size_t)(l * PI_STATS_REUSE_K) * 4, 4);
            p->rho[l] = fit_rho(p->act + l * F, F, (double)r1);
        }
    }

    /* the predictor's recall and precision per layer */
    float rec[PI_PLAN_MAX_LAYERS], prec[PI_PLAN_MAX_LAYERS];
    float r1, p1;
    if (f32_array(g, PI_KEY_PREDICTOR_VAL_RECALL, L, rec) && f32_array(g, PI_KEY_PREDICTOR_VAL_PRECISION, L, prec)) {
        snprintf(p->source, sizeof p->source, "the file's per-layer figures (train-predictor or convert --recall)");
    } else if (!pi_gguf_get_f32(g, PI_KEY_GEN_EXPECTED_RECALL, &r1) &&
               !pi_gguf_get_f32(g, PI_KEY_GEN_EXPECTED_PRECISION, &p1)) {
        for (int64_t l = 0; l < L; l++) rec[l] = r1, prec[l] = p1;
        snprintf(p->source, sizeof p->source, "gen-model's planted figures");
    } else {
        for (int64_t l = 0; l < L; l++) rec[l] = 0.96f, prec[l] = 0.6f;
        snprintf(p->source, sizeof p->source, "defaults (recall 0.96, precision 0.6)");
    }
    for (int64_t l = 0; l < L; l++) {
        p->recall[l] = rec[l] > 0.0f && rec[l] <= 1.0f ? rec[l] : 0.96;
        p->precision[l] = prec[l] > 0.0f && prec[l] <= 1.0f ? prec[l] : 0.6;
    }
    select_rates(p);

    /* the logit histograms, for thresholds at other recall targets */
    float target;
    if (!pi_gguf_get_f32(g, PI_KEY_PREDICTOR_RECALL_TARGET, &target) && target > 0.0f && target <= 1.0f)
        p->file_recall = target;
    pi_status st = pi_pred_hist_read(g, path, L, &p->hist);
    if (!st && p->hist.h && !p->n_expert) st = pi_pred_ghist_read(g, path, L, &p->ghist);
    if (st) {
        pi_mprofile_free(p);
        return st;
    }
    *out = p;
    return PI_OK;
}

double pi_mprofile_coverage(const pi_mprofile *p, int64_t l, int64_t k) {
    double a = 0.0, all = 0.0;
    for (int64_t i = 0; i < p->n_ff; i++) {
        all += p->act[l * p->n_ff + i];
        if (i < k) a += p->act[l * p->n_ff + i];
    }
    return all > 0.0 ? a / all : 1.0;
}

/* The loader's needs as the profile has them, with the output head on
   flash where the budget needs that (pi_budget_head_on_flash). */
static pi_budget_needs needs_at(const pi_mprofile *mp, uint64_t mem_budget) {
    pi_budget_needs z = {.fixed = mp->fixed, .session = mp->session, .kv = mp->kv, .io = mp->io,
                         .min_cold = mp->min_cold, .minimum = mp->fixed + mp->session + mp->io + mp->min_cold,
                         .head_flash = mp->head_flash};
    pi_budget_head_on_flash(&z, mem_budget);
    return z;
}

/* ---- cost model ---- */

/* The bytes a head on flash keeps resident with its first `rows` rows, as
   the loader charges them, and what is then read every token. */
static uint64_t head_res_bytes(const pi_mprofile *mp, int64_t rows) {
    return pi_budget_head_rows_bytes(mp->head_row_bytes, rows);
}
static uint64_t head_read_bytes(const pi_mprofile *mp, int64_t rows) {
    const uint64_t r = rows < mp->head_n_rows ? (uint64_t)(mp->head_n_rows - rows) * mp->head_row_bytes : 0;
    return r < mp->head_flash ? r : mp->head_flash;
}

/* A cold neuron of rate s and persistence kappa (its own: see
   persist_rates), modelled as a two-state Markov chain that keeps its rate:
   after an active token it is active again with probability s + kappa (1 -
   s), after an inactive one with s (1 - kappa). With the cache's
   characteristic time t (it keeps what the last t tokens used), continuous
   in t:
     in_cache(s, t) = P(active at least once) = 1 - exp(-s - s (1 - kappa) (t - 1))
   (Che's 1 - exp(-s t) at kappa 0), and a use hits when the neuron was used
   within the last t - 1 tokens, linear between whole tokens:
     hit(s, t) = H(t - 1), H(k) = 1 - (1 - s)(1 - kappa)(1 - s (1 - kappa))^(k - 1), H(0) = 0
   One token is lost because the engine visits the layers in order: between
   two uses of a layer's neuron come a whole token's other misses, and the
   slots pinned by the layer computing and by the lookahead are not there
   for the previous token's neurons. So a cache below one token hits nothing
   (measured: 0.0% on 7b-l8 at such sizes, where Che for random order
   predicted a few percent), one of 1.14 tokens few (47-58 hits per token
   measured at 50% on 7b-l8, 385 predicted without the lost token), and
   counting hits from the whole t, as an earlier model did, predicted 495 for
   a 43 MiB cache on a calibrated 7b-l8 that hit 228-259. */
static double kappa_of(const pi_mprofile *mp, int64_t i) { return mp->kappa ? mp->kappa[i] : 0.0; }
static double in_cache(double s, double kappa, double t) {
    return t < 1.0 ? 1.0 - exp(-s * t) : 1.0 - exp(-s - s * (1.0 - kappa) * (t - 1.0));
}
static double hit_of(double s, double kappa, double t) {
    if (t < 1.0) return 0.0;
    /* a use hits when the neuron was used within the last x = t - 1 tokens:
       after its use now, the chain was silent for k tokens before with
       probability (1 - s)(1 - kappa)(1 - s (1 - kappa))^(k - 1); linear
       between whole tokens, as a token's uses come layer by layer */
    const double x = t - 1.0, k = floor(x), q = 1.0 - s * (1.0 - kappa);
    const double miss_k = k < 1.0 ? 1.0 : (1.0 - s) * (1.0 - kappa) * pow(q, k - 1.0);
    const double miss_k1 = (1.0 - s) * (1.0 - kappa) * pow(q, k);
    return 1.0 - (miss_k + (x - k) * (miss_k1 - miss_k));
}

/* Che's characteristic time of an LRU cache of C slots over the cold
   neurons (rates s_i per token): sum in_cache(s_i, t) = C. */
static double che_time(const pi_mprofile *mp, const int64_t *hot, double C) {
    const int64_t L = mp->n_layer, F = mp->n_ff;
    double n_cold = 0.0;
    for (int64_t l = 0; l < L; l++) n_cold += (double)(F - hot[l]);
    if (C >= n_cold) return INFINITY;
    if (C <= 0.0) return 0.0;
    double lo = 0.0, hi = 1.0;
    for (;;) { /* grow until the cache would be overfull */
        double fill = 0.0;
        for (int64_t l = 0; l < L; l++)
            for (int64_t i = hot[l]; i < F; i++) fill += in_cache(mp->sel[l * F + i], kappa_of(mp, l * F + i), hi);
        if (fill >= C || hi > 1e12) break;
        lo = hi;
        hi *= 4.0;
    }
    for (int it = 0; it < 40; it++) {
        double mid = 0.5 * (lo + hi), fill = 0.0;
        for (int64_t l = 0; l < L; l++)
            for (int64_t i = hot[l]; i < F; i++) fill += in_cache(mp->sel[l * F + i], kappa_of(mp, l * F + i), mid);
        if (fill < C) lo = mid;
        else hi = mid;
        if (hi - lo < 1e-3 * hi) break;
    }
    return 0.5 * (lo + hi);
}

static int64_t cache_slots(const pi_mprofile *mp, uint64_t cache_bytes) {
    size_t per = pi_ncache_footprint(1, 0, mp->stride, 1);
    uint64_t map = (uint64_t)(mp->n_layer * mp->n_ff) * 4;
    int64_t s = cache_bytes > map ? (int64_t)((cache_bytes - map) / per) : 0;
    return s < mp->min_slots ? mp->min_slots : s;
}

/* R reads carrying M bundles of `stride` bytes kept qd deep: R / iops, plus one read's
   latency for the last one, which nothing overlaps. (Charging the whole
   queue's latency, qd / iops, made the solver pick shallow queues that
   measured slower: with a layer's reads issued at once and computed as they
   land, a deeper queue measured 19.5, 20.9 and 21.8 tok/s at 32, 64, 128.) */
static double io_time(const pi_hw *hw, size_t stride, double M, double R, double qd) {
    if (R <= 0.0) return 0.0;
    const int q = qd < 1.0 ? 1 : (int)qd;
    /* merged reads are larger, and larger reads are fewer per second: priced
       at the mean size of M bundles in R reads */
    const double size = M > R ? (double)stride * M / R : (double)stride;
    const int b = size < 1e9 ? (int)size : 1000000000;
    return R / pi_hw_iops(hw, b, q) + 1.0 / pi_hw_iops(hw, (int)stride, 1);
}

/* Reads for M misses whose neighbours merge `pairs` times, but at least
   M / max_merge: the engine reads at most max_merge bundles at once. (A
   plan that selects every neuron of a layer would otherwise read each
   layer in one request: on make demo's model at recall 0.99, 8 reads
   predicted, 2197 of 64 KiB made, 4.7 tok/s for 47.5 predicted.) */
static double reads_of(const pi_mprofile *mp, double M, double pairs) {
    const double R = M - pairs, least = M / (double)(mp->max_merge > 0 ? mp->max_merge : 16);
    return R > least ? R : least;
}

/* The fixed region's and the predictors' times per token at T threads. */
static void fixed_times(const pi_mprofile *mp, const pi_hw *hw, int T, double *t_fixed, double *t_pred_all) {
    *t_fixed = *t_pred_all = 0.0;
    for (int y = 0; y < PI_TYPE_COUNT; y++) {
        if (mp->fixed_by_type[y]) *t_fixed += (double)mp->fixed_by_type[y] / (pi_hw_kernel_gbs(hw, 0, (pi_type)y, T) * 1e9);
        if (mp->pred_by_type[y]) *t_pred_all += (double)mp->pred_by_type[y] / (pi_hw_kernel_gbs(hw, 0, (pi_type)y, T) * 1e9);
    }
}

/* Of the fixed region's time, the part between layers (attention), where
   the lookahead reads: all of it but the output head's, which runs after
   the last layer with no read in flight. */
static double between_layers(const pi_mprofile *mp, const pi_hw *hw, int T, double t_fixed) {
    const double t_head = mp->head_bytes ? (double)mp->head_bytes / (pi_hw_kernel_gbs(hw, 0, mp->head_type, T) * 1e9) : 0.0;
    return t_fixed > t_head ? t_fixed - t_head : 0.0;
}

/* The compute that unit l's lookahead reads overlap, per visit: the step
   before's work after its gate/up (its predictor, down rows and overhead,
   t_body) and its share of the attention between layers, t_att spread over
   the visits of a token (visits_per_token). The first layer's units, read
   ahead when the token starts, have only their share of the attention. 0
   without the lookahead. */
static double ahead_window(const pi_mprofile *mp, int64_t l, double t_body, double t_att, double visits) {
    const int64_t X = mp->n_expert ? mp->n_expert : 1;
    if (!mp->lookahead) return 0.0;
    return l < X ? t_att / visits : t_body + t_att / visits;
}

/* Whether the token's start reads ahead for the first layer, and so first
   computes its predictor on the token's embedding: where it has neurons off
   the hot prefix (a mixture: always, its expert being a guess). */
static bool starts_ahead(const pi_mprofile *mp, const int64_t *hot) {
    if (!mp->lookahead) return false;
    return mp->n_expert || hot[0] < mp->n_ff;
}

/* Whether unit l's step reads ahead, and so first computes the next unit's
   predictor on its own input (a second predictor pass beside the next
   step's own): a dense layer's step when a later layer has neurons off
   the hot prefix, a mixture's for every visit but the last layer's last
   expert (taken as all of them: its next expert is a guess). */
static bool looks_ahead(const pi_mprofile *mp, const int64_t *hot, int64_t l) {
    if (!mp->lookahead) return false;
    if (mp->n_expert) return true;
    return l + 1 < mp->n_layer && hot[l + 1] < mp->n_ff;
}

/* A lookahead pass's time given a whole predictor pass's t_pred: of a
   dense model's, the second layer's rows of unit u's resident prefix are
   not computed (their neurons are never read), a share n_ff / (n_embd +
   n_ff) of the pass's bytes times the prefix's share of the rows (both
   layers of one type). A mixture's pass is priced whole. */
static double ahead_pass(const pi_mprofile *mp, const int64_t *hot, int64_t u, double t_pred) {
    if (mp->n_expert || mp->n_ff <= 0 || mp->n_embd <= 0) return t_pred;
    const double F = (double)mp->n_ff, h = (double)hot[u] / F;
    return t_pred * (1.0 - F / ((double)mp->n_embd + F) * (h < 1.0 ? h : 1.0));
}

/* A visit's wait for its R reads at queue depth qd: t_io less what the
   lookahead read during the window before it. That is at most C_AHEAD of
   the reads, and at most the qd the ring holds: nothing reaps during the
   window (the step's end, the attention), so a read waiting behind a full
   ring starts only when the step that needs it reaps. (7b-l8 at 50%, ~290
   reads a layer: 13.3, 15.8, 15.9 and 17.3 tok/s at qd 32, 128, 256, 512;
   hidden 42%, 57%, 61%, 86% of the reads' time.) */
static double io_left(double t_io, double window, double R, double qd, double kb) {
    const double ring = R > qd ? qd / R : 1.0; /* qd as the callers clamp it, min(depth, R) */
    double ahead = C_AHEAD * ring * t_io;
    ahead = ahead < window * kb ? ahead : window * kb;
    return t_io - ahead;
}

/* A visit's time for its reads and its gate/up work t_gu, given the wait
   t_wait that the lookahead left: the reads that go out at once (up to the
   ring's depth qd) cost c_read each before anything overlaps them: the
   time a read's submission holds the submitting thread, the kernel doing
   its block-layer work inline (pi_hw_read_issue_s: 1.0-1.6 us at queue
   depth 128 on a 2-core virtual machine; files before version 5 give the
   machine's CPU per read instead, 2.7 us on the project machine, 4-9 us on
   2-core virtual machines); the rest are submitted and reaped as the ring
   refills, overlapping the reads still in flight as the gate/up work does.
   On a planted 7b-l8 at 50% of its file, 2622 reads a token, the compute
   outside the I/O wait measured 5-12 ms more than the plan without this
   term. *hidden: of t_wait, what the overlapped work covers. */
static double visit_io(double t_wait, double t_gu, double R, double qd, double c_read, double kb, double *hidden) {
    const double now = R < qd ? R : qd, busy = t_gu + c_read * (R - now), cover = busy * kb;
    if (hidden) *hidden = t_wait < cover ? t_wait : cover;
    return c_read * now + busy + (t_wait > cover ? t_wait - cover : 0.0);
}

/* The share of the disk's rate that reads get while the cores compute
   (pi_hw.read_busy_k: 0.55-0.66 on a 2-core virtual machine, whose idle
   time the host's disk emulation runs in), 1 where it was not measured or
   where a run's figure replaced the probe's (pi_hw.run_reads for the
   random reads, run_seq for the output head's: a run's rate holds that
   share already). The plan prices the reads hidden behind compute at that share
   and the waited ones at the full rate: priced all at the share, a plan at
   570 MiB on a planted 7b-l8 predicted 8.85 tok/s for 11.87 measured, its
   cores idle 42% of the time; priced all at the full rate, 15.22 for 11.42,
   and at 715 MiB 23.71 for 15.87. The output head's pieces are all read
   beside computing cores (each while the piece before is multiplied): at
   the probe's idle rate plans priced them at 5.8-8.1 GB/s where runs read
   the head at 3.9-5.6, and the first plans after a fresh probe at 285 MiB
   of a planted 7b-l8 measured 18-23% below what they predicted. */
static double busy_share(const pi_hw *hw, bool head) {
    if (!hw || (head ? hw->run_seq : hw->run_reads)) return 1.0;
    return hw->read_busy_k > 0.0 && hw->read_busy_k <= 1.0 ? hw->read_busy_k : 1.0;
}

/* The cores' bound on a token: their work (cpu, wall time at T threads)
   plus every read's CPU on the whole machine (c_cpu, pi_hw_read_cpu_s: the
   submission and the completion's interrupts and softirqs, which run on
   any core), spread over the T cores. The path of a token (cost_with)
   charges only the submitting thread's share of a read (pi_hw_read_issue_s)
   in line: the rest runs on whichever core is free, most of it while the
   reads are waited for, and the probe's read rates already include it. A
   token takes the longer of the two. On a 2-core virtual machine with 5.3
   us of CPU a read and 1.5 us in its submission at queue depth 128: at
   570 MiB on a planted 7b-l8 (3223 reads a token) the path priced with the
   machine's figure predicted 22.9 tok/s for 28.3-31.4 measured, the cores
   45% idle. */
static double cores_bound(double cpu, double reads, double c_cpu, int T) {
    return cpu + reads * c_cpu / (double)(T > 0 ? T : 1);
}

/* The gate/up work of a layer: the gate rows of S selected neurons and the
   up rows of A active ones at the row-dot rates (bytes/s), and each
   selected neuron's gather cost, at T threads. */
static double gu_time(const pi_mprofile *mp, double S, double A, double rd_g, double rd_u, int T) {
    return S * (double)mp->part_bytes[0] / rd_g + A * (double)mp->part_bytes[1] / rd_u + S * C_NEURON_S / (double)T;
}

/* The share of tokens that run unit l: 1 for a dense layer. */
static double visit_of(const pi_mprofile *mp, int64_t l) { return mp->n_expert ? mp->visit[l] : 1.0; }

/* The units a token visits: the layers, or a mixture's experts' shares summed. */
static double visits_per_token(const pi_mprofile *mp) {
    double v = 0.0;
    for (int64_t l = 0; l < mp->n_layer; l++) v += visit_of(mp, l);
    return v;
}

/* A step's fixed overhead per visit: a dense layer's C_LAYER_S; a mixture's
   layer pays it once for the experts its token visits. */
static double visit_overhead(const pi_mprofile *mp) {
    return mp->n_expert ? C_LAYER_S / (double)mp->n_expert_used : C_LAYER_S;
}

/* The cost with the Che time already known. */
static void cost_with(const pi_mprofile *mp, const pi_hw *hw, const pi_plan *p, double tc, pi_cost *c) {
    const int64_t L = mp->n_layer, F = mp->n_ff;
    const int T = p->threads > 0 ? p->threads : 1;
    memset(c, 0, sizeof *c);
    double t_fixed, t_pred_all;
    fixed_times(mp, hw, T, &t_fixed, &t_pred_all);
    const double t_att = between_layers(mp, hw, T, t_fixed), visits = visits_per_token(mp);
    const double rd_g = pi_hw_kernel_gbs(hw, 1, mp->part_type[0], T) * 1e9;
    const double rd_u = pi_hw_kernel_gbs(hw, 1, mp->part_type[1], T) * 1e9;
    const double ax_d = pi_hw_kernel_gbs(hw, 2, mp->part_type[2], T) * 1e9;
    const double d = (double)mp->part_bytes[2], c_read = pi_hw_read_issue_s(hw), c_cpu = pi_hw_read_cpu_s(hw),
                 kb = busy_share(hw, false);
    double cpu = t_fixed + C_TOKEN_S; /* the cores' work, as wall time at T threads (cores_bound) */
    /* the output head on flash: read in pieces one after the other, but for
       its resident rows, with no FFN read to overlap (it follows the last
       layer), beside its own product (busy_share) */
    if (needs_at(mp, p->mem_budget).head_on_flash && hw->seq_read_gbs > 0.0) {
        const double t_read = (double)head_read_bytes(mp, p->head_rows) / (hw->seq_read_gbs * busy_share(hw, true) * 1e9);
        t_fixed += t_read;
        c->ms_head_read = t_read * 1e3;
    }
    double total = t_fixed + C_TOKEN_S;
    c->ms_fixed = t_fixed * 1e3;
    if (starts_ahead(mp, p->hot)) { /* the first layer's lookahead pass, before its reads go out */
        const double t_pass = ahead_pass(mp, p->hot, 0, t_pred_all / (double)L);
        total += t_pass;
        cpu += t_pass;
        c->ms_pred += t_pass * 1e3;
    }
    const double c_visit = visit_overhead(mp);
    c->ms_overhead = C_TOKEN_S * 1e3;
    for (int64_t l = 0; l < L; l++) {
        double S = 0.0, A = 0.0, M = 0.0, pairs = 0.0, prev = 0.0, res = 0.0, hit = 0.0;
        for (int64_t i = 0; i < F; i++) {
            double s = mp->sel[l * F + i], a = mp->act[l * F + i];
            S += s;
            A += a;
            double mi = 0.0;
            if (i < p->hot[l]) res += s;
            else {
                double h = isinf(tc) ? 1.0 : hit_of(s, kappa_of(mp, l * F + i), tc);
                hit += s * h;
                mi = s * (1.0 - h);
            }
            M += mi;
            pairs += mi * prev;
            prev = mi;
        }
        /* per visit of the unit (every token for a dense layer), then weighted */
        const double w = visit_of(mp, l);
        /* two neighbours missed in one visit merge into one read: per visit
           the chance is (m_i / w)(m_{i-1} / w), per token w times that */
        double R = reads_of(mp, M, pairs / w);
        double t_pred = t_pred_all / (double)L;
        double t_gu = gu_time(mp, S / w, A / w, rd_g, rd_u, T);
        double t_down = A / w * d / ax_d;
        double qd = (double)p->queue_depth < R / w ? (double)p->queue_depth : R / w;
        double t_io = io_time(hw, mp->stride, M / w, R / w, qd);
        const double t_body = t_pred + t_down + c_visit,
                     t_wait = io_left(t_io, ahead_window(mp, l, t_body, t_att, visits), R / w, qd, kb);
        /* the lookahead's pass runs before its reads go out: outside their window */
        const double t_la = looks_ahead(mp, p->hot, l) ? ahead_pass(mp, p->hot, l + 1, t_pred) : 0.0;
        double covered;
        double t_l = t_body + t_la + visit_io(t_wait, t_gu, R / w, qd, c_read, kb, &covered);
        total += w * t_l;
        cpu += w * (t_body + t_la + t_gu);
        c->ms_overhead += w * c_visit * 1e3;
        c->ms_pred += w * (t_pred + t_la) * 1e3;
        c->ms_gu += w * t_gu * 1e3;
        c->ms_down += w * t_down * 1e3;
        c->ms_io += w * t_io * 1e3;
        c->ms_io_hidden += w * (t_io - t_wait + covered) * 1e3;
        c->ms_read_cpu += R * c_cpu * 1e3;
        c->resident += res;
        c->hits += hit;
        c->misses += M;
        c->reads += R;
    }
    const double bound = cores_bound(cpu, c->reads, c_cpu, T);
    c->ms_cores = bound * 1e3;
    c->tok_s = 1.0 / (total > bound ? total : bound);
}

void pi_plan_cost(const pi_mprofile *mp, const pi_hw *hw, const pi_plan *p, pi_cost *out) {
    double tc = p->mem_budget ? che_time(mp, p->hot, (double)cache_slots(mp, p->cache_bytes)) : INFINITY;
    cost_with(mp, hw, p, tc, out);
}

/* ---- solver ---- */

/* One layer's time as a function of its hot prefix H, with the cache's Che
   time fixed: suffix sums of the miss rates make each evaluation O(1). */
typedef struct {
    double *miss;   /* (F + 1) sum over i >= H of m_i */
    double *pairs;  /* (F + 1) sum over i > H of m_i m_{i-1} */
    double t_fixed_part; /* t_pred + t_down + c_layer */
    double t_gu;
    double window;       /* the compute its lookahead reads overlap (ahead_window) */
} layer_tab;

typedef struct {
    const pi_mprofile *mp;
    const pi_hw *hw;
    layer_tab *tab;
    double *store;
    int queue_depth;
    double c_read; /* pi_hw_read_issue_s */
    double kb;     /* busy_share */
} tables;

static double layer_time(const tables *tb, int64_t l, int64_t H) {
    const layer_tab *t = &tb->tab[l];
    const double w = visit_of(tb->mp, l); /* per visit, weighted by the share of tokens visiting */
    const double R = reads_of(tb->mp, t->miss[H], t->pairs[H] / w) / w; /* reads per visit, as in cost_with */
    double qd = (double)tb->queue_depth < R ? (double)tb->queue_depth : R;
    double t_wait = io_left(io_time(tb->hw, tb->mp->stride, t->miss[H] / w, R, qd), t->window, R, qd, tb->kb);
    return w * (t->t_fixed_part + visit_io(t_wait, t->t_gu, R, qd, tb->c_read, tb->kb, NULL));
}

static bool tables_make(tables *tb, const pi_mprofile *mp, const pi_hw *hw, int threads, int qd, double tc) {
    const int64_t L = mp->n_layer, F = mp->n_ff;
    tb->mp = mp;
    tb->hw = hw;
    tb->queue_depth = qd;
    tb->c_read = pi_hw_read_issue_s(hw);
    tb->kb = busy_share(hw, false);
    tb->tab = calloc((size_t)L, sizeof *tb->tab);
    tb->store = malloc((size_t)(2 * L * (F + 1)) * sizeof *tb->store);
    if (!tb->tab || !tb->store) return false;
    double t_fixed, t_pred_all;
    fixed_times(mp, hw, threads, &t_fixed, &t_pred_all);
    const double t_att = between_layers(mp, hw, threads, t_fixed), visits = visits_per_token(mp);
    const double rd_g = pi_hw_kernel_gbs(hw, 1, mp->part_type[0], threads) * 1e9;
    const double rd_u = pi_hw_kernel_gbs(hw, 1, mp->part_type[1], threads) * 1e9;
    const double ax_d = pi_hw_kernel_gbs(hw, 2, mp->part_type[2], threads) * 1e9;
    for (int64_t l = 0; l < L; l++) {
        layer_tab *t = &tb->tab[l];
        t->miss = tb->store + (size_t)(2 * l) * (size_t)(F + 1);
        t->pairs = t->miss + (F + 1);
        double S = 0.0, A = 0.0, m_next = 0.0;
        t->miss[F] = t->pairs[F] = 0.0;
        for (int64_t i = F - 1; i >= 0; i--) { /* pairs[H]: neighbours (j, j - 1) both >= H */
            double sv = mp->sel[l * F + i];
            S += sv;
            A += mp->act[l * F + i];
            double m = sv * (isinf(tc) ? 0.0 : exp(-sv * tc));
            t->miss[i] = t->miss[i + 1] + m;
            t->pairs[i] = t->pairs[i + 1] + m * m_next;
            m_next = m;
        }
        const double w = visit_of(mp, l);
        t->t_gu = gu_time(mp, S / w, A / w, rd_g, rd_u, threads);
        t->t_fixed_part = t_pred_all / (double)L + A / w * (double)mp->part_bytes[2] / ax_d + visit_overhead(mp);
        t->window = ahead_window(mp, l, t->t_fixed_part, t_att, visits);
    }
    return true;
}

static void tables_free(tables *tb) {
    free(tb->tab);
    free(tb->store);
}

typedef struct {
    double g, s; /* the time saved per neuron by the next unit; the next neuron's rate */
    int64_t l;
} gain_of;

/* a before b: the larger gain (within 1e-9), then the larger rate (within
   1e-12), then the fewer hot neurons, then the lower layer */
static bool gain_before(const gain_of *a, const gain_of *b, const int64_t *hot) {
    if (a->g > b->g * (1.0 + 1e-9)) return true;
    if (b->g > a->g * (1.0 + 1e-9)) return false;
    if (a->s > b->s * (1.0 + 1e-12)) return true;
    if (b->s > a->s * (1.0 + 1e-12)) return false;
    if (hot[a->l] != hot[b->l]) return hot[a->l] < hot[b->l];
    return a->l < b->l;
}

static void gain_sift(gain_of *h, int64_t n, int64_t k, const int64_t *hot) {
    for (;;) {
        int64_t c = 2 * k + 1;
        if (c >= n) return;
        if (c + 1 < n && gain_before(&h[c + 1], &h[c], hot)) c++;
        if (!gain_before(&h[c], &h[k], hot)) return;
        gain_of t = h[k];
        h[k] = h[c];
        h[c] = t;
        k = c;
    }
}

static gain_of gain_next(const tables *tb, const int64_t *hot, int64_t U, int64_t l) {
    const int64_t F = tb->mp->n_ff, to = hot[l] + U < F ? hot[l] + U : F;
    return (gain_of){(layer_time(tb, l, hot[l]) - layer_time(tb, l, to)) / (double)(to - hot[l]),
                     tb->mp->sel[l * F + hot[l]], l};
}

/* Hot prefixes for `bytes` of resident neurons: repeatedly give a unit of
   neurons to the layer whose time drops most per neuron (optimal for
   times that are convex in H, which these are: decreasing miss rates under
   a max with a constant); units that gain nothing go by selection rate.
   Equal gains and rates (identical layers, or no activation counts) go to
   the layer with the fewest hot neurons, so such layers share evenly. */
static void fill_hot_marginal(const tables *tb, uint64_t bytes, int64_t *hot) {
    const pi_mprofile *mp = tb->mp;
    const int64_t L = mp->n_layer, F = mp->n_ff;
    const int64_t U = F / 256 > 1 ? F / 256 : 1;
    memset(hot, 0, (size_t)L * sizeof *hot);
    int64_t units = (int64_t)(bytes / ((uint64_t)U * mp->bundle_mem));
    /* a heap of the layers by their next unit's gain: only the layer that
       grew changes its gain (O(log L) a unit; a 47B mixture's 256 units
       under 16 GiB take 30K of them, for every candidate plan) */
    gain_of heap[PI_PLAN_MAX_LAYERS];
    int64_t n = 0;
    for (int64_t l = 0; l < L; l++) heap[n++] = gain_next(tb, hot, U, l);
    for (int64_t k = n / 2 - 1; k >= 0; k--) gain_sift(heap, n, k, hot);
    for (; units > 0 && n > 0; units--) {
        if (!(heap[0].g >= 0.0)) break; /* no layer gains: the rest of the bytes stay unused */
        const int64_t l = heap[0].l;
        hot[l] = hot[l] + U < F ? hot[l] + U : F;
        if (hot[l] >= F) heap[0] = heap[--n];
        else heap[0] = gain_next(tb, hot, U, l);
        gain_sift(heap, n, 0, hot);
    }
}

/* Without activation counts every layer looks alike and the cost model's
   small differences (queue depths it cannot fill) would decide the split:
   as many hot neurons in each (the same bytes in all). */
static void spread_evenly(const pi_mprofile *mp, int64_t *hot) {
    const int64_t L = mp->n_layer;
    int64_t n = 0;
    for (int64_t l = 0; l < L; l++) n += hot[l];
    for (int64_t l = 0; l < L; l++) hot[l] = n / L + (l < n % L);
}

typedef struct {
    double s;
    int32_t l, i;
} cand;

/* by s, descending; equal rates by neuron index, then layer, so that equal
   layers fill round-robin rather than one after the other */
static int cand_desc(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->s != y->s) return x->s < y->s ? 1 : -1;
    if (x->i != y->i) return x->i > y->i ? 1 : -1;
    return (x->l > y->l) - (x->l < y->l);
}

/* Hot prefixes for `bytes` of resident neurons: the largest s_i first. */
static void fill_hot(const pi_mprofile *mp, const cand *order, uint64_t bytes, int64_t *hot) {
    const int64_t L = mp->n_layer, F = mp->n_ff;
    memset(hot, 0, (size_t)L * sizeof *hot);
    uint64_t n = bytes / mp->bundle_mem;
    if (n > (uint64_t)(L * F)) n = (uint64_t)(L * F);
    for (uint64_t k = 0; k < n; k++) hot[order[k].l]++;
}

pi_status pi_mprofile_check_budget(const pi_mprofile *mp, uint64_t mem_budget) {
    const pi_budget_needs z = needs_at(mp, mem_budget);
    if (!mem_budget || mem_budget >= z.minimum) return PI_OK;
    return pi_budget_below_minimum(&z, mem_budget, mp->n_ctx);
}

/* The fastest split for the profile's selection rates as they stand. */
static pi_status solve_split(const pi_mprofile *mp, const pi_hw *hw, const pi_plan_limits *lim, pi_plan *out) {
    const int64_t L = mp->n_layer, F = mp->n_ff;
    memset(out, 0, sizeof *out);
    out->n_layer = L;
    out->n_ctx = mp->n_ctx;
    out->mem_budget = lim->mem_budget;
    pi_status st = pi_mprofile_check_budget(mp, lim->mem_budget);
    if (st) return st;
    const pi_budget_needs zb = needs_at(mp, lim->mem_budget);
    const uint64_t base = zb.fixed + mp->session + mp->io;
    cand *order = malloc((size_t)(L * F) * sizeof *order);
    if (!order) return pi_error(PI_ERR_NOMEM, "out of memory");
    /* within a layer s_i need not be sorted if the counts were not: rank by s, then keep prefixes */
    for (int64_t l = 0; l < L; l++)
        for (int64_t i = 0; i < F; i++) order[l * F + i] = (cand){mp->sel[l * F + i], (int32_t)l, (int32_t)i};
    qsort(order, (size_t)(L * F), sizeof *order, cand_desc);

    int max_t = lim->max_threads > 0 ? lim->max_threads : hw->n_threads;
    if (max_t > hw->n_threads) max_t = hw->n_threads;
    if (max_t < 1) max_t = 1;
    /* beyond the probe's deepest point (128) a deeper ring reads no faster
       but keeps more of the lookahead's reads going while nothing reaps */
    static const int qds[] = {32, 64, 128, 256, 512};
    static const double cache_frac[] = {0.0, 0.05, 0.1, 0.2, 0.4};
    pi_plan best = *out, cur = *out;
    best.cost.tok_s = -1.0;
    const uint64_t left = lim->mem_budget ? lim->mem_budget - base : 0;
    const size_t nc = lim->mem_budget ? sizeof cache_frac / sizeof cache_frac[0] : 1;
    /* a head on flash: which prefix of its rows stays resident, in steps of
       an eighth. Each byte of it saves a byte read every token at the
       sequential rate, a hot neuron's a read when it is selected; the rows
       take their bytes from the hot neurons, never from the cache (a cache
       pushed below its floor costs the lookahead its room: measured 0.93x
       at 25% on 7b-l8 where the rows had taken it) */
    const int head_steps = lim->mem_budget && zb.head_on_flash && mp->head_n_rows > 0 ? PI_PLAN_HEAD_STEPS : 0;
    /* the steps after the first try only the cache share, threads and
       queue depth that the first found best (the cache's Che time, solved
       for each, is most of a plan's time) */
    size_t ci_best = 0;
    int t_best = 0, qd_best = 0;
    for (int hs = 0; hs <= head_steps; hs++) {
        if (hs == 1) t_best = best.threads, qd_best = best.queue_depth;
        cur.head_rows = head_steps ? mp->head_n_rows * hs / head_steps : 0;
        const uint64_t head_res = head_res_bytes(mp, cur.head_rows);
        for (size_t ci = 0; ci < nc; ci++) {
            if (hs > 0 && ci != ci_best) continue;
            uint64_t cache = 0;
            if (lim->mem_budget) {
                cache = mp->min_cold + (uint64_t)((double)(left - mp->min_cold) * cache_frac[ci]);
                /* first guess, for the cache's floor */
                fill_hot(mp, order, left - cache > head_res ? left - cache - head_res : 0, cur.hot);
                /* room for a layer's expected misses and a quarter more: a
                   cache that cannot take one layer's reads at once splits the
                   layer into waves that wait on each other (the model does not
                   price that); the lookahead reads ahead into what is left. A
                   mixture's unit: its misses per visit, not per token.
                   Twice a layer's misses, so that the lookahead could read all
                   of the next layer's, measured 5% slower at a 25% budget on
                   7b-l8 (the memory serves better as hot neurons). */
                double worst = 0.0;
                for (int64_t l = 0; l < L; l++) { /* per visit: a mixture's expert sees only its tokens */
                    double m = 0.0;
                    for (int64_t i = cur.hot[l]; i < F; i++) m += mp->sel[l * F + i];
                    m /= visit_of(mp, l);
                    worst = m > worst ? m : worst;
                }
                const size_t per_slot = pi_ncache_footprint(1, 0, mp->stride, 1);
                double floor_slots = 1.25 * worst + (double)mp->min_slots;
                /* and room to lend a prompt's streamed FFN its full pieces
                   where that is at most a quarter of the memory left:
                   pieces of 297 bundles instead of 512 measured pp512
                   0.77-0.87x on 7b-l8 at 570 MiB (the room: 1% of its
                   decode speed), pieces of 14 a third of the prompt speed
                   at `make demo`'s budget */
                if (floor_slots < (double)mp->lend_slots && (uint64_t)mp->lend_slots * per_slot <= left / 4)
                    floor_slots = (double)mp->lend_slots;
                uint64_t floor_bytes = (uint64_t)(L * F) * 4 + (uint64_t)floor_slots * per_slot;
                if (cache < floor_bytes) cache = floor_bytes < left ? floor_bytes : left;
                if (head_res > left - cache) continue;
                fill_hot(mp, order, left - cache - head_res, cur.hot);
                cur.cache_bytes = cache;
            } else {
                cur.cache_bytes = 0;
                for (int64_t l = 0; l < L; l++) cur.hot[l] = F;
            }
            double tc = lim->mem_budget ? che_time(mp, cur.hot, (double)cache_slots(mp, cur.cache_bytes)) : INFINITY;
            for (int t = 1; t <= max_t; t++)
                for (size_t qi = 0; qi < sizeof qds / sizeof qds[0]; qi++) {
                    if (hs > 0 && (t != t_best || qds[qi] != qd_best)) continue;
                    cur.threads = t;
                    cur.queue_depth = qds[qi];
                    if (lim->mem_budget) {
                        tables tb = {0};
                        if (!tables_make(&tb, mp, hw, t, qds[qi], tc)) {
                            tables_free(&tb);
                            free(order);
                            return pi_error(PI_ERR_NOMEM, "out of memory");
                        }
                        fill_hot_marginal(&tb, left - cache - head_res, cur.hot);
                        tables_free(&tb);
                        if (!mp->have_stats) spread_evenly(mp, cur.hot);
                    }
                    cost_with(mp, hw, &cur, tc, &cur.cost);
                    if (cur.cost.tok_s > best.cost.tok_s * 1.0001) {
                        best = cur;
                        if (hs == 0) ci_best = ci;
                    }
                }
        }
    }
    free(order);
    uint64_t hot_bytes = 0;
    for (int64_t l = 0; l < L; l++) hot_bytes += (uint64_t)best.hot[l] * mp->bundle_mem;
    best.resident_bytes = base + head_res_bytes(mp, best.head_rows) + hot_bytes + (lim->mem_budget ? best.cache_bytes : 0);
    *out = best;
    return PI_OK;
}

/* Each layer's pair of thresholds for recall r with its first hot[l]
   neurons resident (pi_pred_ghist_pair, priced c_hot and c_cold per
   selected neuron), and the profile's selection rates, recall and
   precision for them: each part's rates from the file's selections, moved
   in probit space to the part's total. Needs the group histograms and the
   file's selection counts. */
static void split_rates(pi_mprofile *p, const int64_t *hot, double r, double c_hot, double c_cold, float *thr_hot,
                        float *thr_cold) {
    const int64_t L = p->n_layer, F = p->n_ff;
    for (int64_t l = 0; l < L; l++) {
        pi_pred_pair pr;
        const int64_t H = hot[l] < F ? hot[l] : F;
        pi_pred_ghist_pair(&p->ghist, l, F, H, r + PI_PLAN_PAIR_MARGIN < 1.0 ? r + PI_PLAN_PAIR_MARGIN : 1.0, c_hot,
                           c_cold, &pr);
        thr_hot[l] = pr.thr_hot, thr_cold[l] = pr.thr_cold;
        const double *z = p->sel_z + l * F;
        double *sv = p->sel + l * F;
        for (int part = 0; part < 2; part++) {
            const int64_t i0 = part ? H : 0, i1 = part ? F : H;
            if (i1 <= i0) continue;
            const double d = probit_shift(z + i0, i1 - i0, part ? pr.sel_cold : pr.sel_hot);
            for (int64_t i = i0; i < i1; i++) sv[i] = isinf(z[i]) ? (z[i] > 0.0 ? 1.0 : 0.0) : norm_cdf(z[i] - d);
        }
        const double sel = pr.sel_hot + pr.sel_cold;
        p->recall[l] = pr.recall;
        p->precision[l] = sel > 0.0 && pr.act > 0.0 ? pr.recall * pr.act / sel : 1.0;
    }
    persist_rates(p);
}

/* A plan with two thresholds per layer for recall r (see plan.h), from the
   one-threshold plan one; c's selection rates are its to change. Returns
   whether *out predicts faster than one. */
static bool solve_pair(pi_mprofile *c, const pi_hw *hw, const pi_plan_limits *lim, double r, const pi_plan *one,
                       pi_plan *out) {
    pi_plan cur = *one;
    bool better = false;
    for (int round = 0; round < 3; round++) {
        /* the prices at the current plan: a gate row and a gather; a cold
           neuron also its share of a read where the plan misses */
        const int T = cur.threads > 0 ? cur.threads : 1;
        const double c_hot = (double)c->part_bytes[0] / (pi_hw_kernel_gbs(hw, 1, c->part_type[0], T) * 1e9) +
                             C_NEURON_S / (double)T;
        const pi_cost *k = &cur.cost;
        const double used = k->hits + k->misses, miss = used > 0.0 ? k->misses / used : 0.0;
        const double per_read = 1.0 / pi_hw_iops(hw, (int)c->stride, cur.queue_depth) + pi_hw_read_issue_s(hw);
        const double c_cold = c_hot + miss * (k->misses > 0.0 ? k->reads / k->misses : 1.0) * per_read;
        float th[PI_PLAN_MAX_LAYERS], tc[PI_PLAN_MAX_LAYERS];
        split_rates(c, cur.hot, r, c_hot, c_cold, th, tc);
        pi_plan nx;
        if (solve_split(c, hw, lim, &nx)) break;
        split_rates(c, nx.hot, r, c_hot, c_cold, th, tc); /* the pair for the split found, priced as it stands */
        pi_plan_cost(c, hw, &nx, &nx.cost);
        nx.recall = r;
        nx.split = true;
        memcpy(nx.thr, tc, sizeof tc);
        memcpy(nx.thr_hot, th, sizeof th);
        if (nx.cost.tok_s > (better ? out->cost.tok_s : one->cost.tok_s) * 1.001) {
            *out = nx;
            better = true;
        }
        cur = nx;
    }
    return better;
}

pi_status pi_plan_solve(const pi_mprofile *mp, const pi_hw *hw, const pi_plan_limits *lim, pi_plan *out) {
    if (lim->recall > 0.0 && !mp->hist.h)
        return pi_error(PI_ERR_NOT_FOUND, "thresholds for recall %g need the predictors' logit histograms in the file "
                        "(pinfer profile of the model with predictors, then convert --reorder STATS)", lim->recall);
    if (lim->recall > 0.0 && !(lim->recall <= 1.0))
        return pi_error(PI_ERR_INVALID, "recall target %g is not in (0, 1]", lim->recall);
    pi_status st;
    if (!mp->hist.h) {
        st = solve_split(mp, hw, lim, out);
    } else {
        /* the recall targets to try: one when asked for, else from the
           file's own (at least PI_PLAN_MIN_RECALL) up to PI_PLAN_MAX_RECALL */
        double cands[8];
        int n = 0;
        if (lim->recall > 0.0) {
            cands[n++] = lim->recall;
        } else {
            const double lo = mp->file_recall > PI_PLAN_MIN_RECALL ? mp->file_recall : PI_PLAN_MIN_RECALL;
            cands[n++] = lo;
            for (int k = 1; k <= 99 && n < 8; k++) /* in steps of 0.01 */
                if (k / 100.0 > lo + 1e-9 && k / 100.0 <= PI_PLAN_MAX_RECALL + 1e-9) cands[n++] = k / 100.0;
        }
        pi_mprofile c = *mp; /* its own selection rates and persistence: mp stays as it is */
        const size_t nf = (size_t)(mp->n_layer * mp->n_ff);
        pi_plan *plans = calloc((size_t)n, sizeof *plans);
        c.sel = malloc(nf * sizeof *c.sel);
        c.kappa = mp->kappa ? malloc(nf * sizeof *c.kappa) : NULL;
        if (!plans || !c.sel || (mp->kappa && !c.kappa)) {
            free(plans);
            free(c.sel);
            free(c.kappa);
            return pi_error(PI_ERR_NOMEM, "out of memory");
        }
        int pick = 0;
        st = PI_OK;
        for (int k = 0; k < n && !st; k++) {
            float thr[PI_PLAN_MAX_LAYERS];
            if (!(st = pi_mprofile_at_recall(&c, cands[k], thr)) && !(st = solve_split(&c, hw, lim, &plans[k]))) {
                memcpy(plans[k].thr, thr, sizeof thr);
                plans[k].recall = cands[k];
                pi_plan two;
                if (mp->ghist.h && mp->sel_z && lim->mem_budget && solve_pair(&c, hw, lim, cands[k], &plans[k], &two))
                    plans[k] = two;
                if (plans[k].cost.tok_s > plans[pick].cost.tok_s) pick = k;
            }
        }
        if (!st) { /* the highest recall within the slack of the fastest */
            const double floor_tok_s = (1.0 - PI_PLAN_RECALL_SLACK) * plans[pick].cost.tok_s;
            for (int k = n - 1; k >= 0; k--)
                if (plans[k].cost.tok_s >= floor_tok_s) {
                    pick = k;
                    break;
                }
            *out = plans[pick];
        }
        free(c.sel);
        free(c.kappa);
        free(plans);
    }
    if (st) return st;
    if (lim->min_speed > 0.0 && out->cost.tok_s < lim->min_speed)
        return pi_error(PI_ERR_INVALID, "no plan reaches %.2f tok/s within %s: the best predicts %.2f tok/s",
                        lim->min_speed, PI_BYTES(lim->mem_budget), out->cost.tok_s);
    return PI_OK;
}
