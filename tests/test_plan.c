/*
 * test_plan.c — the planner (plan/plan.h) on synthetic profiles and
 * hardware figures, and on a generated bundle file:
 *  - the cost model: more resident neurons never predict slower; with
 *    everything resident there are no reads; the I/O term follows the
 *    measured IOPS; Che's approximation gives all hits when the cache holds
 *    every cold neuron and none when it has no room;
 *  - the solver: refuses a budget below the minimum and names it, fills the
 *    budget without exceeding it, puts the most often selected neurons in
 *    the hot prefixes, predicts no worse than a uniform split, and reports
 *    an unreachable --min-speed;
 *  - the plan file: a round trip, and malformed files refused with the line;
 *  - a real bundle file: the profile reads its counts and figures, a plan
 *    loads and the session gives the same logits as in memory.
 */
#include "model/genmodel.h"
#include "api/engine.h"
#include "sparse/ffn_offload.h"
#include "model/session.h"
#include "plan/plan.h"
#include "sparse/reorder.h"
#include "sparse/stats.h"
#include "test_util.h"

#include <float.h>
#include <math.h>
#include <unistd.h>

/* hw with every random read k times slower. */
static pi_hw slower_disk(pi_hw hw, double k) {
    for (int b = 0; b < PI_HW_N_BLOCKS; b++)
        for (int q = 0; q < PI_HW_N_QD; q++) hw.read_iops[b][q] /= k;
    return hw;
}

static void fake_hw(pi_hw *hw) {
    memset(hw, 0, sizeof *hw);
    hw->n_threads = 2;
    for (int t = 1; t <= 2; t++) {
        hw->mem_bw[t] = 15.0 * t;
        for (int y = 0; y < PI_TYPE_COUNT; y++) {
            hw->matvec[y][t] = 14.0 * t;
            hw->rowdot[y][t] = 8.0 * t;
            hw->axpy[y][t] = 6.0 * t;
        }
    }
    static const int blocks[PI_HW_N_BLOCKS] = {4096, 8192, 16384, 32768, 65536, 131072};
    static const int qds[PI_HW_N_QD] = {1, 8, 32, 64, 128};
    for (int b = 0; b < PI_HW_N_BLOCKS; b++) {
        hw->block[b] = blocks[b];
        for (int q = 0; q < PI_HW_N_QD; q++) {
            hw->qd[q] = qds[q];
            hw->read_iops[b][q] = (qds[q] < 64 ? 15000.0 * qds[q] : 130000.0) / (b < 2 ? 1.0 : (double)(b));
            hw->read_lat_us[b][q] = 60.0;
        }
    }
    hw->seq_read_gbs = 2.5;
    hw->read_cpu_us = 0.2; /* a fast submission path: the tests of the disk's model see the disk */
    snprintf(hw->io_backend, sizeof hw->io_backend, "io_uring");
}

/* A profile of L layers of F neurons with power-law activity. */
static pi_mprofile *fake_profile(int64_t L, int64_t F) {
    pi_mprofile *p = calloc(1, sizeof *p);
    p->n_layer = L;
    p->n_ff = F;
    p->n_embd = 1024;
    p->n_ctx = 256;
    p->have_stats = true;
    p->fixed = 100u << 20;
    p->session = 8u << 20;
    p->io = 4u << 20;
    p->stride = 4096;
    p->bundle_mem = 3 * 576;
    p->min_slots = 2 * ((F + 63) / 64) + 16;
    p->min_cold = (uint64_t)p->min_slots * 4096 + (uint64_t)(L * F) * 4;
    for (int k = 0; k < 3; k++) {
        p->part_bytes[k] = 576;
        p->part_type[k] = PI_TYPE_Q4_0;
    }
    p->fixed_by_type[PI_TYPE_Q4_0] = 90u << 20;
    p->pred_by_type[PI_TYPE_Q8_0] = 10u << 20;
    p->lookahead = true; /* as pi_mprofile_make sets it for a file with predictors */
    p->act = malloc((size_t)(L * F) * sizeof *p->act);
    p->sel = malloc((size_t)(L * F) * sizeof *p->sel);
    for (int64_t l = 0; l < L; l++)
        for (int64_t i = 0; i < F; i++) {
            double a = 0.6 / (1.0 + (double)i * (1.0 + 0.3 * (double)l) / 40.0);
            p->act[l * F + i] = a;
            p->sel[l * F + i] = 0.96 * a + 0.05 * (1.0 - a);
        }
    return p;
}

static void test_cost_and_solver(void) {
    pi_hw hw;
    fake_hw(&hw);
    const int64_t L = 4, F = 2048;
    pi_mprofile *mp = fake_profile(L, F);
    const uint64_t base = mp->fixed + mp->session + mp->io;
    const double ffn = (double)mp->bundle_mem * (double)(L * F);

    /* below the minimum */
    pi_plan p;
    pi_plan_limits lim = {base, 0, 0.0, 0.0};
    CHECK(pi_plan_solve(mp, &hw, &lim, &p) == PI_ERR_NOMEM && strstr(pi_last_error(), "minimum"));

    /* unlimited: all resident, no reads */
    lim.mem_budget = 0;
    CHECK(pi_plan_solve(mp, &hw, &lim, &p) == PI_OK);
    for (int64_t l = 0; l < L; l++) CHECK(p.hot[l] == F);
    CHECK(p.cost.reads == 0.0 && p.cost.misses == 0.0 && p.cost.tok_s > 0.0);
    const double unlimited = p.cost.tok_s;

    /* more budget never predicts slower; the budget is respected; the hot
       prefixes take the most selected neurons (deeper layers are less active
       here, so they get fewer; layer 0, whose reads no lookahead hides, is
       priced apart) */
    double prev = 0.0;
    for (int k = 0; k <= 10; k++) {
        lim.mem_budget = base + mp->min_cold + (uint64_t)(ffn * k / 10.0);
        CHECK(pi_plan_solve(mp, &hw, &lim, &p) == PI_OK);
        CHECKF(p.cost.tok_s >= prev * 0.999, "budget step %d: %.3f after %.3f", k, p.cost.tok_s, prev);
        CHECKF(p.resident_bytes <= lim.mem_budget, "step %d: plan holds %llu of %llu", k,
               (unsigned long long)p.resident_bytes, (unsigned long long)lim.mem_budget);
        CHECK(p.cost.tok_s <= unlimited * 1.0001);
        for (int64_t l = 2; l < L; l++) CHECK(p.hot[l] <= p.hot[l - 1]);
        if (k > 0 && k < 10) CHECK(p.cost.reads > 0.0 && p.cost.ms_io > 0.0);
        prev = p.cost.tok_s;
        /* no worse than a uniform split with the same cache */
        pi_plan u = p;
        int64_t sum = 0;
        for (int64_t l = 0; l < L; l++) sum += p.hot[l];
        for (int64_t l = 0; l < L; l++) u.hot[l] = sum / L;
        pi_cost cu;
        pi_plan_cost(mp, &hw, &u, &cu);
        CHECKF(p.cost.tok_s >= cu.tok_s * 0.999, "step %d: planned %.3f < uniform %.3f", k, p.cost.tok_s, cu.tok_s);
    }

    /* reads follow the IOPS: halving them slows the I/O term */
    lim.mem_budget = base + mp->min_cold + (uint64_t)(ffn * 0.2);
    CHECK(pi_plan_solve(mp, &hw, &lim, &p) == PI_OK);
    pi_cost c1, c2;
    pi_plan_cost(mp, &hw, &p, &c1);
    const pi_hw slow = slower_disk(hw, 2.0);
    pi_plan_cost(mp, &slow, &p, &c2);
    CHECKF(fabs(c2.ms_io / c1.ms_io - 2.0) < 0.05, "I/O term %.3f -> %.3f ms", c1.ms_io, c2.ms_io);

    /* a predictor that selects every neuron: neighbours merge, but a read
       carries at most the engine's max_merge bundles (16 by default) */
    {
        pi_mprofile all = *mp;
        all.sel = malloc((size_t)(L * F) * sizeof *all.sel);
        CHECK(all.sel != NULL);
        if (!all.sel) return;
        for (int64_t i = 0; i < L * F; i++) all.sel[i] = 1.0;
        pi_plan none = p;
        for (int64_t l = 0; l < L; l++) none.hot[l] = 0;
        none.cache_bytes = 0;
        pi_cost ca;
        pi_plan_cost(&all, &hw, &none, &ca);
        CHECKF(ca.misses > 0.99 * (double)(L * F) && fabs(ca.reads - ca.misses / 16.0) < 1e-6 * ca.misses,
               "every neuron selected: %.0f misses in %.1f reads", ca.misses, ca.reads);
        all.max_merge = 4;
        pi_plan_cost(&all, &hw, &none, &ca);
        CHECKF(fabs(ca.reads - ca.misses / 4.0) < 1e-6 * ca.misses, "max_merge 4: %.0f misses in %.1f reads", ca.misses,
               ca.reads);
        free(all.sel);
    }

    /* temporal persistence (kappa): with a cache that keeps more than one
       token's neurons, the same plan hits more and reads less */
    pi_cost k0, k1;
    pi_plan kp = p;
    kp.cache_bytes = (uint64_t)(L * F / 4) * (mp->stride + 64) + (uint64_t)(L * F) * 4;
    pi_plan_cost(mp, &hw, &kp, &k0);
    double *kap = malloc((size_t)(L * F) * sizeof *kap);
    CHECK(kap != NULL);
    if (!kap) return;
    for (int64_t i = 0; i < L * F; i++) kap[i] = 0.5;
    mp->kappa = kap;
    pi_plan_cost(mp, &hw, &kp, &k1);
    /* (within 0.1%: fewer reads per layer fill a shallower queue, which
       this machine's table makes slower per read) */
    CHECKF(k1.hits > k0.hits && k1.misses < k0.misses && k1.tok_s >= k0.tok_s * 0.999,
           "kappa 0.5: hits %.1f -> %.1f, misses %.1f -> %.1f", k0.hits, k1.hits, k0.misses, k1.misses);
    CHECKF(fabs(k1.resident + k1.hits + k1.misses - (k0.resident + k0.hits + k0.misses)) < 1e-6,
           "the selected neurons per token do not depend on kappa");
    mp->kappa = NULL;
    free(kap);
    /* a cache smaller than one token's misses keeps nothing until it is asked again */
    kp.cache_bytes = 0;
    pi_plan_cost(mp, &hw, &kp, &k0);
    CHECKF(k0.hits == 0.0, "hits %.1f with the smallest cache", k0.hits);

    /* Che: a cache that holds every cold neuron hits always */
    pi_plan big = p;
    big.cache_bytes = (uint64_t)(L * F) * 4200 + (1u << 20);
    pi_plan_cost(mp, &hw, &big, &c1);
    CHECKF(c1.misses < 1e-6, "misses %.3g with a cache for every neuron", c1.misses);

    /* an unreachable speed */
    lim.min_speed = unlimited * 10.0;
    CHECK(pi_plan_solve(mp, &hw, &lim, &p) == PI_ERR_INVALID && strstr(pi_last_error(), "tok/s"));
    CHECK(p.cost.tok_s > 0.0);
    pi_mprofile_free(mp);
}

/* A mixture: units (layer x expert) visited by a share of the tokens. An
   expert's activity counts fold in its popularity, so the solver keeps the
   popular experts' neurons resident first; a unit's reads are priced per
   visit (its misses of one token, merged and queued together) and weighted
   by the visits; a dense profile of the same numbers is priced as before. */
static void test_mixture(void) {
    pi_hw hw;
    fake_hw(&hw);
    const int64_t L = 8, F = 2048; /* 2 layers x 4 experts, top 2 */
    pi_mprofile *mp = fake_profile(L, F);
    const double share[4] = {0.9, 0.6, 0.3, 0.2}; /* sums to 2 = n_expert_used */
    mp->n_expert = 4;
    mp->n_expert_used = 2;
    for (int64_t u = 0; u < L; u++) {
        mp->visit[u] = share[u % 4];
        for (int64_t i = 0; i < F; i++) {
            const double a = share[u % 4] * 0.3 / (1.0 + (double)i / 40.0);
            mp->act[u * F + i] = a;
            mp->sel[u * F + i] = 0.96 * a + 0.05 * (share[u % 4] - a);
        }
    }
    const uint64_t base = mp->fixed + mp->session + mp->io;
    pi_plan_limits lim = {base + mp->min_cold + (uint64_t)((double)mp->bundle_mem * (double)(L * F) * 0.2), 0, 0.0, 0.0};
    pi_plan p;
    CHECK(pi_plan_solve(mp, &hw, &lim, &p) == PI_OK);
    CHECKF(p.hot[0] > p.hot[3] && p.hot[4] >= p.hot[7] && p.hot[1] >= p.hot[2],
           "hot prefixes by popularity: %lld %lld %lld %lld", (long long)p.hot[0], (long long)p.hot[1],
           (long long)p.hot[2], (long long)p.hot[3]);
    CHECK(p.cost.tok_s > 0.0 && isfinite(p.cost.tok_s) && p.cost.reads > 0.0);
    /* every expert visited by every token would cost more than visits by share */
    pi_cost c_share, c_all;
    pi_plan_cost(mp, &hw, &p, &c_share);
    for (int64_t u = 0; u < L; u++) mp->visit[u] = 1.0;
    pi_plan_cost(mp, &hw, &p, &c_all);
    /* the cache holds a visit's misses: a rarely visited expert misses more per visit */
    pi_plan p1;
    CHECK(pi_plan_solve(mp, &hw, &lim, &p1) == PI_OK);
    CHECKF(p.cache_bytes > p1.cache_bytes, "cache %llu bytes with visits by share, %llu when every token visits",
           (unsigned long long)p.cache_bytes, (unsigned long long)p1.cache_bytes);
    CHECKF(c_all.tok_s < c_share.tok_s && fabs(c_all.misses - c_share.misses) < 1e-9,
           "visits by share %.2f tok/s, every token %.2f", c_share.tok_s, c_all.tok_s);
    pi_mprofile_free(mp);
}

/* Four identical layers of 2048 neurons under a budget that keeps 30% of
   the bundles resident, with fake_hw and the plan solved for it. */
typedef struct {
    pi_hw hw;
    int64_t L, F;
    pi_plan_limits lim;
    pi_plan p;
    pi_mprofile *mp;
} layers4;

static void identical_layers(layers4 *x) {
    fake_hw(&x->hw);
    const int64_t L = x->L = 4, F = x->F = 2048;
    pi_mprofile *mp = x->mp = fake_profile(L, F);
    for (int64_t l = 1; l < L; l++)
        for (int64_t i = 0; i < F; i++) mp->act[l * F + i] = mp->act[i], mp->sel[l * F + i] = mp->sel[i];
    const uint64_t base = mp->fixed + mp->session + mp->io;
    x->lim = (pi_plan_limits){base + mp->min_cold + (uint64_t)((double)mp->bundle_mem * (double)(L * F) * 0.3), 0, 0.0,
                              0.0};
    CHECK(pi_plan_solve(mp, &x->hw, &x->lim, &x->p) == PI_OK);
}

/* The lookahead: each unit's predicted misses are read while the step
   before computes, so reads that computation covers cost nothing, the
   first layer's reads wait whole, and never more than C_AHEAD of a unit's
   reads are hidden that way. */
static void test_lookahead(void) {
    layers4 x;
    identical_layers(&x);
    pi_hw hw = x.hw;
    const int64_t L = x.L, F = x.F;
    pi_plan_limits lim = x.lim;
    pi_plan p = x.p;
    pi_mprofile *mp = x.mp;
    for (int64_t l = 1; l < L; l++)
        CHECKF(p.hot[0] >= p.hot[l], "layer 0 (no lookahead) %lld hot, layer %lld %lld", (long long)p.hot[0],
               (long long)l, (long long)p.hot[l]);
    pi_cost on, off;
    pi_plan_cost(mp, &hw, &p, &on);
    mp->lookahead = false;
    pi_plan_cost(mp, &hw, &p, &off);
    CHECKF(on.tok_s > off.tok_s && on.ms_io_hidden > off.ms_io_hidden && on.ms_io == off.ms_io &&
               on.reads == off.reads,
           "lookahead %.2f tok/s (%.3f of %.3f ms hidden), without %.2f (%.3f)", on.tok_s, on.ms_io_hidden, on.ms_io,
           off.tok_s, off.ms_io_hidden);
    /* reads hidden behind compute get the probe's share with the cores
       computing (read_busy_k), waited ones the full rate: a share of 1 is
       no share; a smaller one costs time, but less than the whole table at
       that share */
    {
        pi_hw one = hw, half = hw, halved = hw;
        one.read_busy_k = 1.0;
        half.read_busy_k = 0.5;
        for (int b = 0; b < PI_HW_N_BLOCKS; b++)
            for (int q = 0; q < PI_HW_N_QD; q++) halved.read_iops[b][q] *= 0.5;
        pi_cost c_one, c_half, c_halved;
        mp->lookahead = true;
        pi_plan_cost(mp, &one, &p, &c_one);
        pi_plan_cost(mp, &half, &p, &c_half);
        pi_plan_cost(mp, &halved, &p, &c_halved);
        CHECKF(c_one.tok_s == on.tok_s && c_half.tok_s < on.tok_s && c_half.tok_s > c_halved.tok_s &&
                   c_half.ms_io == on.ms_io,
               "busy share: 1: %.3f, 0.5: %.3f, the table halved: %.3f, none: %.3f tok/s", c_one.tok_s,
               c_half.tok_s, c_halved.tok_s, on.tok_s);
        mp->lookahead = false;
    }
    /* a slow disk: the I/O dwarfs the compute between layers, so the time
       saved is at most that compute (window), and the token still costs all
       its reads less what the windows covered */
    const pi_hw slow = slower_disk(hw, 200.0);
    pi_plan_cost(mp, &slow, &p, &off);
    mp->lookahead = true;
    pi_plan_cost(mp, &slow, &p, &on);
    const double saved = 1e3 / off.tok_s - 1e3 / on.tok_s, compute = on.ms_fixed + on.ms_pred + on.ms_down + on.ms_overhead;
    CHECKF(saved > 0.0 && saved <= compute + 1e-9 && on.ms_io_hidden - off.ms_io_hidden <= 0.85 * on.ms_io + 1e-9,
           "slow disk: %.3f ms saved of %.3f ms compute, I/O %.3f ms", saved, compute, on.ms_io);
    /* the output head runs after the last layer with no read in flight:
       the larger its share of the fixed region, the less the lookahead hides */
    pi_cost headed;
    mp->head_bytes = mp->fixed_by_type[PI_TYPE_Q4_0] / 2;
    mp->head_type = PI_TYPE_Q4_0;
    pi_plan_cost(mp, &slow, &p, &headed);
    CHECKF(headed.ms_io_hidden < on.ms_io_hidden && headed.tok_s < on.tok_s && headed.tok_s > off.tok_s,
           "head half the fixed region: %.3f ms hidden (%.3f without a head, %.3f without the lookahead)",
           headed.ms_io_hidden, on.ms_io_hidden, off.ms_io_hidden);
    mp->head_bytes = 0;
    /* a step that reads ahead first computes the next unit's predictor: one
       pass more for each layer before one with neurons off its prefix, none
       before an all-resident layer (the engine skips it there), and one as
       the token starts where the first layer has neurons off its prefix;
       each pass without the second layer's rows of the resident prefix it
       looks ahead to (a share n_ff / (n_embd + n_ff) of a pass's bytes) */
    pi_cost pass, none, all_hot;
    pi_plan_cost(mp, &hw, &p, &pass);
    mp->lookahead = false;
    pi_plan_cost(mp, &hw, &p, &none);
    mp->lookahead = true;
    const double one = none.ms_pred / (double)L, s2 = (double)F / (double)(mp->n_embd + F);
    int64_t cold_after = 0;
    double passes = 0.0;
    for (int64_t l = 0; l < L; l++)
        if (p.hot[l] < F) cold_after++, passes += one * (1.0 - s2 * (double)p.hot[l] / (double)F);
    CHECKF(mp->n_embd > 0 && fabs(pass.ms_pred - none.ms_pred - passes) < 1e-9 && cold_after > 1 &&
               passes < (double)cold_after * one,
           "predictor %.4f ms with the lookahead, %.4f without, %lld passes more of %.4f (%.4f in all expected)",
           pass.ms_pred, none.ms_pred, (long long)cold_after, one, passes);
    pi_plan q = p;
    for (int64_t l = 0; l < L; l++) q.hot[l] = F;
    q.hot[0] = p.hot[0]; /* only layer 0 reads: only the token's start looks ahead to it */
    pi_plan_cost(mp, &hw, &q, &all_hot);
    mp->lookahead = false;
    pi_plan_cost(mp, &hw, &q, &none);
    mp->lookahead = true;
    CHECKF(p.hot[0] < F && fabs(all_hot.ms_pred - none.ms_pred - one * (1.0 - s2 * (double)p.hot[0] / (double)F)) < 1e-12,
           "all-resident later layers: predictor %.4f ms, %.4f without", all_hot.ms_pred, none.ms_pred);
    /* the ring: nothing reaps while the lookahead's window computes, so of
       a layer's reads beyond the queue depth none completes in it (those
       the reap loop submits hide only behind their own CPU and the gate/up
       work); a ring
       that holds them all hides up to the window. On a disk no faster at
       32 than deeper the solver takes a ring that holds a layer's reads. */
    pi_hw flat = hw;
    for (int b = 0; b < PI_HW_N_BLOCKS; b++)
        for (int k = 0; k < PI_HW_N_QD; k++) flat.read_iops[b][k] = hw.read_iops[b][flat.qd[k] < 32 ? k : 2];
    pi_plan s32 = p, s512 = p;
    s32.queue_depth = 32;
    s512.queue_depth = 512;
    pi_cost shallow, deep;
    pi_plan_cost(mp, &flat, &s32, &shallow);
    pi_plan_cost(mp, &flat, &s512, &deep);
    const double R = deep.reads / (double)L;
    CHECKF(R > 32.0 && deep.ms_io == shallow.ms_io && deep.ms_io_hidden > shallow.ms_io_hidden &&
               shallow.ms_io_hidden <=
                   0.85 * 32.0 / R * shallow.ms_io + shallow.ms_gu + (double)L * 0.2e-3 * (R - 32.0) + 1e-6 &&
               deep.tok_s > shallow.tok_s,
           "%.0f reads a layer: %.4f of %.3f ms hidden at qd 32 (gate/up %.4f ms), %.3f of %.3f at 512; %.2f, %.2f tok/s",
           R, shallow.ms_io_hidden, shallow.ms_io, shallow.ms_gu, deep.ms_io_hidden, deep.ms_io, shallow.tok_s,
           deep.tok_s);
    pi_plan pf;
    CHECK(pi_plan_solve(mp, &flat, &lim, &pf) == PI_OK);
    CHECKF(pf.queue_depth > 32 && pf.queue_depth >= pf.cost.reads / (double)L,
           "flat disk: queue depth %d for %.0f reads a layer", pf.queue_depth, pf.cost.reads / (double)L);
    pi_mprofile_free(mp);
}

/* One token's predictor logits for a layer of F neurons active at rates
   a[i]: active neurons' near +1, inactive ones' near -5, both with sd 1.5
   (a sum of four uniforms); act[i] 1 for the active ones. */
static void planted_logits(const double *a, int64_t F, uint64_t *rng, float *z, float *act) {
#define NEXT_U() (*rng = *rng * 6364136223846793005ull + 1442695040888963407ull, (double)(*rng >> 11) / 9007199254740992.0)
    for (int64_t i = 0; i < F; i++) {
        const bool on = NEXT_U() < a[i];
        double g = 0.0;
        for (int k = 0; k < 4; k++) g += NEXT_U() - 0.5;
        z[i] = (float)((on ? 1.0 : -5.0) + 1.5 * sqrt(3.0) * g);
        act[i] = on ? 1.0f : 0.0f;
    }
#undef NEXT_U
}

/* The predictor thresholds chosen by the solver, from logit histograms:
   the highest recall target predicted within the slack of the fastest. */
static void test_recall_choice(void) {
    pi_hw hw;
    fake_hw(&hw);
    const int64_t L = 4, F = 2048;
    pi_mprofile *mp = fake_profile(L, F);
    mp->fixed_by_type[PI_TYPE_Q4_0] = 4u << 20; /* little else to do per token: the FFN's cost shows */
    mp->pred_by_type[PI_TYPE_Q8_0] = 1u << 20;
    const uint64_t base = mp->fixed + mp->session + mp->io;
    pi_plan p;
    pi_plan_limits lim = {0, 0, 0.0, 0.97};
    CHECK(pi_plan_solve(mp, &hw, &lim, &p) == PI_ERR_NOT_FOUND && strstr(pi_last_error(), "histograms"));
    CHECK(pi_mprofile_at_recall(mp, 0.97, NULL) == PI_ERR_NOT_FOUND);
    /* logits near normal (planted_logits) */
    pi_stats *hs = NULL;
    CHECK(pi_stats_create(L, F, 0.0f, NULL, &hs) == PI_OK && pi_stats_enable_hist(hs) == PI_OK);
    float *z = malloc((size_t)F * sizeof *z), *act = malloc((size_t)F * sizeof *act);
    uint64_t rng = 7;
    for (int tok = 0; tok < 200; tok++)
        for (int64_t l = 0; l < L; l++) {
            planted_logits(mp->act + l * F, F, &rng, z, act);
            pi_stats_observe_logits(hs, l, z, act, 0.0f);
        }
    free(z);
    free(act);
    mp->hist = (pi_pred_hist){L, hs->hist_bins, hs->hist_lo, hs->hist_w, hs->hist};
    hs->hist = NULL; /* the profile owns the counts now */
    pi_stats_free(hs);
    mp->file_recall = 0.95;
    /* a target's thresholds are the histogram's; higher targets, lower thresholds, more selected */
    float t95[PI_PLAN_MAX_LAYERS], t99[PI_PLAN_MAX_LAYERS], want[PI_PLAN_MAX_LAYERS];
    double sel95 = 0.0, sel99 = 0.0;
    CHECK(pi_mprofile_at_recall(mp, 0.95, t95) == PI_OK);
    for (int64_t i = 0; i < L * F; i++) sel95 += mp->sel[i];
    CHECK(pi_mprofile_at_recall(mp, 0.99, t99) == PI_OK);
    for (int64_t i = 0; i < L * F; i++) sel99 += mp->sel[i];
    for (int64_t l = 0; l < L; l++) CHECKF(t99[l] < t95[l], "layer %lld: %g !< %g", (long long)l, t99[l], t95[l]);
    CHECKF(sel99 > sel95 * 1.02, "selected %.0f at 0.99, %.0f at 0.95", sel99, sel95);
    for (int64_t l = 0; l < L; l++) CHECK(mp->recall[l] >= 0.99 && mp->precision[l] > 0.0);

    const double ffn = (double)mp->bundle_mem * (double)(L * F);
    const uint64_t budgets[] = {0, base + mp->min_cold + (uint64_t)(0.05 * ffn), base + mp->min_cold + (uint64_t)(0.4 * ffn)};
    double chosen[3];
    for (int b = 0; b < 3; b++) {
        /* each target alone, then the solver's choice among them */
        static const double targets[] = {0.95, 0.96, 0.97, 0.98, 0.99};
        double v[5], best = 0.0;
        for (int k = 0; k < 5; k++) {
            pi_plan_limits one = {budgets[b], 0, 0.0, targets[k]};
            CHECK(pi_plan_solve(mp, &hw, &one, &p) == PI_OK && fabs(p.recall - targets[k]) < 1e-9);
            CHECK(pi_mprofile_at_recall(mp, targets[k], want) == PI_OK && !memcmp(want, p.thr, (size_t)L * sizeof *want));
            v[k] = p.cost.tok_s;
            best = v[k] > best ? v[k] : best;
        }
        int expect = 0;
        for (int k = 4; k >= 0; k--)
            if (v[k] >= (1.0 - PI_PLAN_RECALL_SLACK) * best) {
                expect = k;
                break;
            }
        pi_plan_limits any = {budgets[b], 0, 0.0, 0.0};
        CHECK(pi_plan_solve(mp, &hw, &any, &p) == PI_OK);
        CHECKF(fabs(p.recall - targets[expect]) < 1e-9, "budget %d: chose %g, expected %g (%.2f %.2f %.2f %.2f %.2f tok/s)",
               b, p.recall, targets[expect], v[0], v[1], v[2], v[3], v[4]);
        chosen[b] = p.recall;
        /* the file's own target is the floor */
        mp->file_recall = 0.98;
        CHECK(pi_plan_solve(mp, &hw, &any, &p) == PI_OK && p.recall >= 0.98 - 1e-9);
        mp->file_recall = 0.95;
    }
    /* everything resident: a false positive costs a gate row, not a read: the most accurate;
       tight: reads dominate, the fewest false positives */
    CHECKF(chosen[0] > chosen[1], "recall %g resident, %g at the smallest budget", chosen[0], chosen[1]);
    CHECK(chosen[2] >= chosen[1]);
    pi_mprofile_free(mp);
}

/* Phi^-1 by bisection: the selection rates' probits, as pi_mprofile_make
   keeps them. */
static double probit(double p) {
    double lo = -40.0, hi = 40.0;
    for (int it = 0; it < 200; it++) {
        const double mid = 0.5 * (lo + hi);
        if (0.5 * erfc(-mid / sqrt(2.0)) < p) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* Two thresholds per layer (plan.h): with the logit histograms by group
   and the file's selection counts, a plan under a budget gives the
   resident prefixes thresholds no higher than the cold neurons', reaches
   the recall target counted on the logits themselves, and predicts faster
   than one threshold per layer; everything resident keeps one. */
static void test_pair_choice(void) {
    pi_hw hw;
    fake_hw(&hw);
    const int64_t L = 4, F = 2048, T = 150;
    pi_mprofile *mp = fake_profile(L, F);
    mp->fixed_by_type[PI_TYPE_Q4_0] = 4u << 20;
    mp->pred_by_type[PI_TYPE_Q8_0] = 1u << 20;
    pi_stats *hs = NULL;
    CHECK(pi_stats_create(L, F, 0.0f, NULL, &hs) == PI_OK && pi_stats_enable_hist(hs) == PI_OK && hs->nhist);
    float *zs = malloc((size_t)(T * L * F) * sizeof *zs);
    uint8_t *on = malloc((size_t)(T * L * F));
    float *act = malloc((size_t)F * sizeof *act);
    if (!hs || !hs->nhist || !zs || !on || !act) {
        free(zs), free(on), free(act);
        pi_stats_free(hs);
        pi_mprofile_free(mp);
        return;
    }
    for (int64_t l = 0; l < L; l++)
        for (int64_t i = 0; i < F; i++) hs->counts[l * F + i] = F - i; /* the frequency order is the profile's */
    uint64_t rng = 11;
    for (int64_t t = 0; t < T; t++)
        for (int64_t l = 0; l < L; l++) {
            float *z = zs + (t * L + l) * F;
            planted_logits(mp->act + l * F, F, &rng, z, act);
            for (int64_t i = 0; i < F; i++) on[(t * L + l) * F + i] = act[i] > 0.0f;
            pi_stats_observe_logits(hs, l, z, act, 0.0f);
        }
    hs->tokens = T;
    CHECK(pi_stats_group_hist(hs, &mp->ghist) == PI_OK);
    mp->hist = (pi_pred_hist){L, hs->hist_bins, hs->hist_lo, hs->hist_w, hs->hist};
    hs->hist = NULL;
    mp->sel_file = malloc((size_t)(L * F) * sizeof *mp->sel_file);
    mp->sel_z = malloc((size_t)(L * F) * sizeof *mp->sel_z);
    for (int64_t k = 0; k < L * F; k++) {
        const double v = (double)hs->sel[k] / (double)T;
        mp->sel_file[k] = v;
        mp->sel_z[k] = v <= 0.0 ? -INFINITY : v >= 1.0 ? INFINITY : probit(v);
    }
    pi_stats_free(hs);

    const uint64_t budget = mp->fixed + mp->session + mp->io + mp->min_cold +
                            (uint64_t)(0.3 * (double)mp->bundle_mem * (double)(L * F));
    pi_plan two, one, all;
    pi_plan_limits lim = {budget, 0, 0.0, 0.95};
    CHECKF(pi_plan_solve(mp, &hw, &lim, &two) == PI_OK, "%s", pi_last_error());
    pi_mprofile m1 = *mp;
    m1.ghist.h = NULL; /* one threshold per layer */
    CHECK(pi_plan_solve(&m1, &hw, &lim, &one) == PI_OK && !one.split);
    CHECKF(two.split && two.cost.tok_s > one.cost.tok_s, "pair %d: %.2f tok/s, one threshold %.2f", two.split,
           two.cost.tok_s, one.cost.tok_s);
    for (int64_t l = 0; l < L && two.split; l++) {
        const int64_t H = two.hot[l];
        if (H > 0 && H < F)
            CHECKF(two.thr_hot[l] <= two.thr[l], "layer %lld: %g for the %lld resident, %g for the rest", (long long)l,
                   (double)two.thr_hot[l], (long long)H, (double)two.thr[l]);
        double n_on = 0, n_sel = 0;
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < F; i++)
                if (on[(t * L + l) * F + i]) {
                    n_on += 1;
                    n_sel += zs[(t * L + l) * F + i] >= (i < H ? two.thr_hot[l] : two.thr[l]);
                }
        CHECKF(n_sel / n_on >= 0.95 - 0.005, "layer %lld: recall %.4f counted on the logits", (long long)l, n_sel / n_on);
    }
    fprintf(stderr, "two thresholds per layer at %.0f MiB: %.2f tok/s predicted (%.0f reads a token), one: %.2f (%.0f)\n",
            (double)budget / (1 << 20), two.cost.tok_s, two.cost.reads, one.cost.tok_s, one.cost.reads);
    pi_plan_limits none = {0, 0, 0.0, 0.95};
    CHECK(pi_plan_solve(mp, &hw, &none, &all) == PI_OK && !all.split);
    free(zs), free(on), free(act);
    pi_mprofile_free(mp);
}

static void test_plan_file(void) {
    pi_plan p = {0}, q;
    p.mem_budget = 600u << 20;
    p.threads = 2;
    p.queue_depth = 64;
    p.cache_bytes = 12345678;
    p.n_layer = 3;
    p.hot[0] = 100, p.hot[1] = 50, p.hot[2] = 0;
    p.cost.tok_s = 12.5;
    p.model_size = 999;
    snprintf(p.model, sizeof p.model, "/tmp/some model.gguf");
    char path[256];
    t_tmp_path(path, sizeof path, "plan.txt");
    CHECK(pi_plan_save(&p, path) == PI_OK);
    CHECK(pi_plan_load(path, &q) == PI_OK);
    CHECK(q.mem_budget == p.mem_budget && q.threads == 2 && q.queue_depth == 64 && q.cache_bytes == p.cache_bytes &&
          q.n_layer == 3 && q.hot[0] == 100 && q.hot[1] == 50 && q.hot[2] == 0 && q.cost.tok_s == 12.5 &&
          q.model_size == 999 && !strcmp(q.model, p.model) && q.recall == 0.0);
    /* with thresholds chosen for a recall target */
    p.recall = 0.97;
    p.thr[0] = -0.3125f, p.thr[1] = 1.5e-3f, p.thr[2] = -FLT_MAX;
    CHECK(pi_plan_save(&p, path) == PI_OK);
    CHECK(pi_plan_load(path, &q) == PI_OK);
    CHECK(q.recall == 0.97 && q.thr[0] == p.thr[0] && q.thr[1] == p.thr[1] && q.thr[2] == p.thr[2]);
    CHECK(q.head_rows == 0 && !q.split);
    /* with the resident prefixes' own thresholds */
    p.split = true;
    p.thr_hot[0] = -1.25f, p.thr_hot[1] = -2e-3f, p.thr_hot[2] = -FLT_MAX;
    CHECK(pi_plan_save(&p, path) == PI_OK);
    CHECK(pi_plan_load(path, &q) == PI_OK);
    CHECK(q.split && q.thr_hot[0] == p.thr_hot[0] && q.thr_hot[1] == p.thr_hot[1] && q.thr_hot[2] == p.thr_hot[2] &&
          q.thr[0] == p.thr[0]);
    p.split = false;
    /* with a prefix of the output head's rows resident */
    p.head_rows = 12000;
    CHECK(pi_plan_save(&p, path) == PI_OK);
    CHECK(pi_plan_load(path, &q) == PI_OK && q.head_rows == 12000);
    unlink(path);
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"", "empty"},
        {"pinfer-plan 2\n", "line 1"},
        {"pinfer-plan 1\nthreads 2\nqueue_depth 8\nn_layer 2\nhot 1\n", "line 5"},
        {"pinfer-plan 1\nthreads 2\nqueue_depth 8\nn_layer 2\nhot 1 2 3\n", "line 5"},
        {"pinfer-plan 1\nhot 1 2\n", "line 2"},
        {"pinfer-plan 1\nthreads x\n", "line 2"},
        {"pinfer-plan 1\nthreads 0\n", "line 2"},
        {"pinfer-plan 1\nwhat 3\n", "line 2"},
        {"pinfer-plan 1\nthreads 2\n", "incomplete"},
        {"pinfer-plan 1\nn_layer 99999\n", "line 2"},
        {"pinfer-plan 1\nhead_rows 9999999999\n", "line 2"},
        {"pinfer-plan 1\npredicted_tok_s nan\n", "line 2"},
        {"pinfer-plan 1\nrecall 1.5\n", "line 2"},
        {"pinfer-plan 1\nthresholds 1 2\n", "line 2"},
        {"pinfer-plan 1\nn_layer 2\nthresholds 1 nan\n", "line 3"},
        {"pinfer-plan 1\nn_layer 2\nthresholds 1 2 3\n", "line 3"},
        {"pinfer-plan 1\nn_layer 2\nthresholds 1\n", "line 3"},
        {"pinfer-plan 1\nthreads 2\nqueue_depth 8\nn_layer 2\nhot 1 2\nrecall 0.97\n", "together"},
        {"pinfer-plan 1\nthresholds_hot 1 2\n", "line 2"},
        {"pinfer-plan 1\nn_layer 2\nthresholds_hot 1 inf\n", "line 3"},
        {"pinfer-plan 1\nthreads 2\nqueue_depth 8\nn_layer 2\nhot 1 2\nthresholds_hot 1 2\n", "without"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pi_status st = pi_plan_parse(bad[i].text, strlen(bad[i].text), &q);
        CHECKF(st == PI_ERR_FORMAT && strstr(pi_last_error(), bad[i].want), "case %zu: %d '%s'", i, (int)st,
               pi_last_error());
    }
}

/* A generated bundle file with statistics: the profile reads them, and a
   planned session equals the in-memory one. */
/* A tiny Q4_0 ReLU model with planted activity and predictors. */
static void planted_tiny(pi_genmodel_params *gp, int64_t n_ff, int64_t n_layer, double active) {
    CHECK(pi_genmodel_preset("tiny", gp) == PI_OK);
    gp->n_embd = 256, gp->n_head = 4, gp->n_head_kv = 2, gp->n_ff = n_ff, gp->n_layer = n_layer, gp->n_vocab = 300;
    gp->n_ctx = 128;
    gp->vocab_path = NULL;
    gp->type = gp->embd_type = PI_TYPE_Q4_0;
    gp->output_type = PI_TYPE_Q8_0;
    gp->act = PI_ACT_RELU;
    gp->active = active;
    gp->skew = 1.0;
    gp->predictor = true;
    gp->pred_rank = 64;
    gp->n_threads = 2;
}

/* A bundle file with the predictors' selection counts (gen-model plants
   them; profile measures them): the profile spreads each layer's selections
   as the counts do, scaled to the recall and precision it prices, and so
   counts fewer cold selections outside a hot prefix than the square-root
   rule does on planted neurons. */
static void test_selection_counts(void) {
    char path[256];
    t_tmp_path(path, sizeof path, "plan-sel.bundle.gguf");
    pi_genmodel_params gp;
    planted_tiny(&gp, 1024, 2, 0.1);
    CHECKF(pi_genmodel_write_bundle(&gp, path) == PI_OK, "%s", pi_last_error());
    pi_mprofile *mp = NULL;
    CHECK(pi_engine_profile(path, 64, &mp) == PI_OK);
    if (!mp) return;
    const int64_t L = mp->n_layer, F = mp->n_ff;
    CHECK(mp->have_stats && mp->sel_file);
    for (int64_t l = 0; l < L && mp->sel_file; l++) {
        double A = 0.0, S = 0.0, cold_file = 0.0, cold_sqrt = 0.0, W = 0.0, lo = INFINITY, hi = 0.0;
        for (int64_t i = 0; i < F; i++) A += mp->act[l * F + i], S += mp->sel[l * F + i], W += sqrt(mp->act[l * F + i]);
        const double r = mp->recall[l], pr = mp->precision[l], fp = r * A / pr - r * A;
        for (int64_t i = 0; i < F; i++) {
            const double a = mp->act[l * F + i], k = mp->sel[l * F + i] / mp->sel_file[l * F + i];
            if (mp->sel_file[l * F + i] > 1e-3) lo = k < lo ? k : lo, hi = k > hi ? k : hi;
            if (i >= F / 2) cold_file += mp->sel[l * F + i], cold_sqrt += r * a + fp * sqrt(a) / W;
        }
        CHECKF(fabs(S - r * A / pr) < 1e-6 * S, "layer %lld: %.3f selections per token, %.3f from recall and precision",
               (long long)l, S, r * A / pr);
        CHECKF(lo > 0.999 && hi < 1.001, "layer %lld: at the file's own recall the counts move by %.6f..%.6f",
               (long long)l, lo, hi);
        CHECKF(cold_file < 0.97 * cold_sqrt, "layer %lld: beyond a hot half %.2f selections counted, %.2f by the "
               "square-root rule", (long long)l, cold_file, cold_sqrt);
    }
    /* at a lower recall (a higher threshold) every neuron is selected less,
       and the rarely selected ones lose the larger share: their logits sit
       further below the threshold */
    double *before = malloc((size_t)(L * F) * sizeof *before);
    if (before && mp->sel_file) {
        memcpy(before, mp->sel, (size_t)(L * F) * sizeof *before);
        CHECK(pi_mprofile_at_recall(mp, 0.90, NULL) == PI_OK);
        int rising = 0;
        double prev = 1.0, first = -1.0;
        for (int64_t i = 0; i < F; i++) {
            if (before[i] < 1e-4) continue;
            const double k = mp->sel[i] / before[i];
            rising += k > prev + 1e-9 || k >= 1.0;
            prev = k;
            if (first < 0.0) first = k;
        }
        /* one factor for every neuron (scaling the counts) would keep the
           shares equal: the rarest selected neuron must keep clearly less */
        CHECKF(rising == 0 && prev < 0.9 * first, "layer 0: %d neurons kept a larger share of their selections than a "
               "hotter one; the hottest keeps %.3f, the rarest %.3f", rising, first, prev);
    }
    free(before);
    pi_mprofile_free(mp);
    unlink(path);
}

/* The reuse share R1 = sum_i P(i active now and the token before) / sum_i
   a_i of neurons of rates counts[i] / tokens whose latent normal variables
   correlate by rho between tokens, by simulation (2^18 pairs, each neuron
   active above its rate's quantile of the simulated values). */
static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double simulated_reuse(const int64_t *counts, int64_t n, double tokens, double rho) {
    enum { N = 1 << 18 };
    double *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *sx = malloc(N * sizeof *sx);
    if (!x || !y || !sx) {
        free(x), free(y), free(sx);
        return 0.0;
    }
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < N; i++) { /* Box-Muller from a 64-bit LCG's top bits */
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        const double u1 = ((double)(r >> 11) + 0.5) / 9007199254740992.0;
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        const double u2 = ((double)(r >> 11) + 0.5) / 9007199254740992.0;
        const double g = sqrt(-2.0 * log(u1)), a = g * cos(2.0 * M_PI * u2), b = g * sin(2.0 * M_PI * u2);
        x[i] = sx[i] = a;
        y[i] = rho * a + sqrt(1.0 - rho * rho) * b;
    }
    qsort(sx, N, sizeof *sx, cmp_double);
    double both = 0.0, act = 0.0;
    for (int64_t k = 0; k < n; k++) {
        const double a = (double)counts[k] / tokens;
        if (!(a > 0.0)) continue;
        act += a;
        const int q = (int)((1.0 - a) * N);
        const double z = sx[q < N ? q : N - 1];
        int64_t c = 0;
        for (int i = 0; i < N; i++) c += x[i] > z && y[i] > z;
        both += (double)c / N;
    }
    free(x), free(y), free(sx);
    return both / act;
}

static void test_real_file(void) {
    char plain[256], bundle[256];
    t_tmp_path(plain, sizeof plain, "plan-model.gguf");
    t_tmp_path(bundle, sizeof bundle, "plan-model.bundle.gguf");
    pi_genmodel_params gp;
    planted_tiny(&gp, 768, 3, 0.15);
    CHECK(pi_genmodel_write(&gp, plain) == PI_OK);
    pi_stats *st = NULL;
    CHECK(pi_stats_create(3, 768, 0.0f, "synthetic", &st) == PI_OK);
    if (!st) return;
    st->tokens = 1000;
    for (int64_t i = 0; i < 3 * 768; i++) st->counts[i] = (int64_t)(i % 768) * 7 % 1000;
    /* measured reuse above what independence gives: the planner reads it
       as the latent variables' correlation. The reuse of neurons of these
       rates at correlation 0.3, by simulation: pairs of normal variables
       of that correlation, the share of those above a neuron's threshold
       that are above it in both */
    const double rho = 0.3, r1 = simulated_reuse(st->counts, 768, 1000.0, rho);
    st->reuse_tokens = 900;
    for (int64_t l = 0; l < 3; l++) {
        st->reuse_base[l] = 1.0;
        for (int k = 0; k < PI_STATS_REUSE_K; k++) st->reuse[l * PI_STATS_REUSE_K + k] = r1 + 0.02 * k;
    }
    CHECK(pi_bundle_write(plain, st, 4096, bundle) == PI_OK);
    pi_stats_free(st);
    pi_mprofile *mp = NULL;
    CHECK(pi_engine_profile(bundle, 64, &mp) == PI_OK);
    if (!mp) return;
    CHECK(mp->have_stats && mp->tokens == 1000.0 && strstr(mp->source, "gen-model"));
    CHECK(mp->have_reuse);
    for (int64_t l = 0; l < 3; l++) CHECKF(fabs(mp->rho[l] - rho) < 0.02, "layer %d: rho %.4f for %.2f (reuse %.4f)",
                                           (int)l, mp->rho[l], rho, r1);
    /* a neuron's persistence follows its rate: the rarer, the less of it */
    for (int64_t l = 0; l < 3 && mp->kappa; l++) {
        int64_t falls = 0, rare = 0, often = 0;
        for (int64_t i = 0; i < 768; i++) {
            const double s = mp->sel[l * 768 + i];
            if (s > 0.01 && s < 0.5 && (!rare || s < mp->sel[l * 768 + rare])) rare = i;
            if (s > 0.01 && s < 0.5 && (!often || s > mp->sel[l * 768 + often])) often = i;
            for (int64_t j = i + 1; j < 768 && j < i + 8; j++) {
                const double t = mp->sel[l * 768 + j];
                falls += t > 0.0 && t < s && s < 0.5 && mp->kappa[l * 768 + j] > mp->kappa[l * 768 + i] * 1.002;
            }
        }
        CHECKF(falls == 0 && mp->kappa[l * 768 + rare] < 0.6 * mp->kappa[l * 768 + often],
               "layer %d: %lld pairs more persistent at the lower rate; kappa %.4f at rate %.3f, %.4f at %.3f", (int)l,
               (long long)falls, mp->kappa[l * 768 + rare], mp->sel[l * 768 + rare], mp->kappa[l * 768 + often],
               mp->sel[l * 768 + often]);
    }
    for (int64_t l = 0; l < 3; l++) {
        CHECK(mp->act[l * 768] >= mp->act[l * 768 + 767]); /* hotness order */
        CHECK(pi_mprofile_coverage(mp, l, 768) == 1.0 && pi_mprofile_coverage(mp, l, 0) == 0.0);
        CHECK(mp->recall[l] > 0.5 && mp->precision[l] > 0.1);
    }
    pi_hw hw;
    fake_hw(&hw);
    pi_plan plan;
    pi_plan_limits lim = {mp->fixed + mp->session + mp->io + mp->min_cold + (2u << 20), 2, 0.0, 0.0};
    CHECK(pi_plan_solve(mp, &hw, &lim, &plan) == PI_OK);
    CHECK(plan.cost.ms_head_read == 0.0);
    /* below the minimum with the output head resident, as the loader does:
       the head stays on flash, priced at the sequential read rate; below
       the minimum without it, refused naming it */
    const uint64_t min_res = mp->fixed + mp->session + mp->io + mp->min_cold;
    CHECK(mp->head_flash > 0 && mp->head_flash < mp->fixed);
    pi_plan hp;
    pi_plan_limits hl = {min_res - mp->head_flash / 2, 2, 0.0, 0.0};
    CHECKF(pi_mprofile_check_budget(mp, hl.mem_budget) == PI_OK && pi_plan_solve(mp, &hw, &hl, &hp) == PI_OK,
           "%s", pi_last_error());
    /* what is read: the rows after the plan's resident prefix */
    const double head_read = hp.head_rows ? (double)(mp->head_n_rows - hp.head_rows) * (double)mp->head_row_bytes
                                          : (double)mp->head_flash;
    CHECKF(mp->head_n_rows == 300 && hp.head_rows >= 0 && hp.head_rows < mp->head_n_rows &&
               fabs(hp.cost.ms_head_read - head_read / (hw.seq_read_gbs * 1e6)) < 1e-9 &&
               hp.cost.ms_fixed > hp.cost.ms_head_read && hp.resident_bytes <= hl.mem_budget,
           "head rows %lld of %lld, head read %.6f ms of fixed %.6f, resident %llu of %llu", (long long)hp.head_rows,
           (long long)mp->head_n_rows, hp.cost.ms_head_read, hp.cost.ms_fixed,
           (unsigned long long)hp.resident_bytes, (unsigned long long)hl.mem_budget);
    {   /* the head's pieces are read beside their product: at the probe's
           share with the cores computing (read_busy_k), until a run's head
           rate prices them (it holds that share already); a run's random
           reads alone leave the head's share as it was */
        pi_hw busy = hw;
        busy.read_busy_k = 0.5;
        pi_cost cb, cr, cs;
        pi_plan_cost(mp, &busy, &hp, &cb);
        pi_hw reads = busy;
        pi_hw_note_run(&reads, 8192.0, 32, pi_hw_iops(&reads, 8192, 32), 1.0);
        pi_hw_apply_run(&reads, NULL);
        pi_plan_cost(mp, &reads, &hp, &cr);
        pi_hw seq = busy;
        pi_hw_note_seq(&seq, seq.seq_read_gbs * 0.5, 1.0);
        double ks = 0.0;
        pi_hw_apply_run(&seq, &ks);
        pi_plan_cost(mp, &seq, &hp, &cs);
        CHECKF(fabs(cb.ms_head_read - 2.0 * hp.cost.ms_head_read) < 1e-9 && reads.run_reads && !reads.run_seq &&
                   fabs(cr.ms_head_read - cb.ms_head_read) < 1e-9 && seq.run_seq && fabs(ks - 0.5) < 1e-12 &&
                   fabs(cs.ms_head_read - cb.ms_head_read) < 1e-9,
               "head read %.6f ms at the idle rate, %.6f at a busy share of 0.5, %.6f after a run's random reads, "
               "%.6f at a run's head rate of half the probe's (x%.3f)", hp.cost.ms_head_read, cb.ms_head_read,
               cr.ms_head_read, cs.ms_head_read, ks);
    }
    /* the head's rows against hot neurons, on this profile with a head 64
       times larger (a large vocabulary): where the disk reads the head
       slowly a prefix of it stays in place of hot neurons (each byte saves
       a byte read every token), where it reads it fast the hot neurons
       come first (the rows take only what they leave) */
    pi_mprofile big = *mp;
    big.head_row_bytes *= 64;
    big.head_flash = ((uint64_t)big.head_n_rows * big.head_row_bytes + 63) / 64 * 64;
    big.fixed += big.head_flash - mp->head_flash;
    const uint64_t big_min = big.fixed + big.session + big.io + big.min_cold;
    pi_hw slow = hw, fast = hw;
    slow.seq_read_gbs = 0.01;
    fast.seq_read_gbs = 1000.0;
    pi_plan hs, hf, h0;
    pi_plan_limits bl = {big_min - big.head_flash / 4, 2, 0.0, 0.0};
    CHECK(pi_plan_solve(&big, &slow, &bl, &hs) == PI_OK && pi_plan_solve(&big, &fast, &bl, &hf) == PI_OK);
    int64_t hot_s = 0, hot_f = 0;
    for (int64_t l = 0; l < big.n_layer; l++) hot_s += hs.hot[l], hot_f += hf.hot[l];
    CHECKF(hs.head_rows > 0 && hs.resident_bytes <= bl.mem_budget && hot_s < 3 * 768 &&
               (hf.head_rows == 0 || hot_f == 3 * 768) && hot_f > hot_s,
           "head rows kept: %lld with a slow disk (%lld hot neurons), %lld with a fast one (%lld hot neurons)",
           (long long)hs.head_rows, (long long)hot_s, (long long)hf.head_rows, (long long)hot_f);
    h0 = hs;
    h0.head_rows = 0;
    pi_cost c0;
    pi_plan_cost(&big, &slow, &h0, &c0);
    CHECKF(fabs(c0.ms_head_read - (double)big.head_flash / (slow.seq_read_gbs * 1e6)) < 1e-6 &&
               fabs(hs.cost.ms_head_read - (double)(big.head_n_rows - hs.head_rows) * (double)big.head_row_bytes /
                                               (slow.seq_read_gbs * 1e6)) < 1e-6,
           "head read %.3f ms with none of its rows resident, %.3f with %lld", c0.ms_head_read, hs.cost.ms_head_read,
           (long long)hs.head_rows);
    CHECK(pi_mprofile_check_budget(mp, min_res - mp->head_flash - 1) == PI_ERR_NOMEM &&
          strstr(pi_last_error(), "output head read from flash"));
    pi_mprofile_free(mp);

    pi_lm *m, *om;
    pi_offload *off;
    CHECK(pi_lm_load(bundle, PI_MAP_LOAD, &m) == PI_OK);
    pi_offload_opts oo = {.mem_budget = plan.mem_budget, .n_ctx = 64, .hot = plan.hot, .cold_cache_bytes = plan.cache_bytes};
    CHECKF(pi_offload_load(bundle, &oo, &om, &off) == PI_OK, "%s", pi_last_error());
    pi_state *a, *b;
    CHECK(pi_state_create(m, 64, 2, &a) == PI_OK && pi_state_create(om, 64, 2, &b) == PI_OK);
    CHECK(pi_sparse_ffn_install(a, PI_FFN_SPARSE, 0) == PI_OK && pi_offload_ffn_install(b, off, PI_FFN_SPARSE, 0) == PI_OK);
    int same = 0;
    for (int t = 0; t < 20; t++) {
        int32_t tok = (int32_t)((t * 37 + 5) % 300);
        CHECK(pi_state_decode(a, &tok, 1) == PI_OK && pi_state_decode(b, &tok, 1) == PI_OK);
        same += !memcmp(pi_state_logits(a), pi_state_logits(b), 300 * sizeof(float));
    }
    CHECKF(same == 20, "%d of 20 steps identical", same);
    {   /* the plans with the head on flash load as planned; with a prefix of
           its rows resident, within the budget and with the same logits */
        pi_lm *hm = NULL;
        pi_offload *hoff = NULL;
        pi_offload_opts ho = {.mem_budget = hp.mem_budget, .n_ctx = 64, .hot = hp.hot, .cold_cache_bytes = hp.cache_bytes,
                              .head_rows = hp.head_rows};
        CHECKF(pi_offload_load(bundle, &ho, &hm, &hoff) == PI_OK && hoff && hoff->head_on_flash, "%s", pi_last_error());
        /* a prefix of the head's rows resident, charged beside the plan's */
        const int64_t keep = 120;
        const uint64_t keep_bytes = ((uint64_t)keep * hm->output.row_bytes + 63) / 64 * 64;
        pi_offload_free(hoff);
        pi_lm_free(hm);
        pi_offload_opts hso = {.mem_budget = hp.mem_budget + keep_bytes, .n_ctx = 64, .hot = hp.hot,
                               .cold_cache_bytes = hp.cache_bytes, .head_rows = keep};
        CHECKF(pi_offload_load(bundle, &hso, &hm, &hoff) == PI_OK && hoff->head_on_flash &&
                   hoff->head_res_rows == keep && pi_budget_used(&hoff->budget) <= hso.mem_budget,
               "%s", pi_last_error());
        pi_state *c, *d;
        CHECK(pi_state_create(m, 64, 2, &c) == PI_OK && pi_state_create(hm, 64, 2, &d) == PI_OK);
        CHECK(pi_sparse_ffn_install(c, PI_FFN_SPARSE, 0) == PI_OK &&
              pi_offload_ffn_install(d, hoff, PI_FFN_SPARSE, 0) == PI_OK);
        /* a prompt's batch first: its logits through the same two halves */
        const int32_t prompt[6] = {3, 141, 59, 26, 253, 58};
        CHECK(pi_state_decode(c, prompt, 6) == PI_OK && pi_state_decode(d, prompt, 6) == PI_OK);
        CHECK(!memcmp(pi_state_logits(c), pi_state_logits(d), 300 * sizeof(float)));
        int hsame = 0;
        for (int t = 0; t < 8; t++) {
            int32_t tok = (int32_t)((t * 53 + 11) % 300);
            CHECK(pi_state_decode(c, &tok, 1) == PI_OK && pi_state_decode(d, &tok, 1) == PI_OK);
            hsame += !memcmp(pi_state_logits(c), pi_state_logits(d), 300 * sizeof(float));
        }
        CHECKF(hsame == 8 && hoff->st.head_uses == 9, "%d of 8 steps identical with %lld head rows resident, %llu "
               "head products", hsame, (long long)keep, (unsigned long long)hoff->st.head_uses);
        pi_state_free(c);
        pi_state_free(d);
        pi_offload_free(hoff);
        pi_lm_free(hm);
    }
    pi_state_free(a);
    pi_state_free(b);
    pi_offload_free(off);
    pi_lm_free(om);
    pi_lm_free(m);
    unlink(plain);
    unlink(bundle);
}

/* The reads' CPU on the submitting thread: c a read, the reads that go
   out at once (up to the queue depth) before anything overlaps them, the
   rest hidden under the wait where the disk is the slower. */
static void test_read_cpu(void) {
    layers4 x;
    identical_layers(&x);
    const pi_hw hw = x.hw;
    const double L = (double)x.L;
    pi_mprofile *mp = x.mp;
    pi_plan *p = &x.p;
    pi_hw dear = hw, none = hw;
    dear.read_cpu_us = 20.0;
    none.read_cpu_us = 0.0; /* an older file: the default */
    CHECK(pi_hw_read_cpu_s(&none) == PI_HW_READ_CPU_S && pi_hw_read_cpu_s(&hw) == 0.2e-6);
    pi_cost cheap, costly;
    pi_plan_cost(mp, &hw, p, &cheap);
    pi_plan_cost(mp, &dear, p, &costly);
    CHECKF(cheap.reads > 0.0, "%.0f reads", cheap.reads);
    CHECKF(fabs(cheap.ms_read_cpu - cheap.reads * 0.2e-3) < 1e-9 && fabs(costly.ms_read_cpu - costly.reads * 20e-3) < 1e-9,
           "reads' CPU %.4f / %.4f ms for %.0f reads", cheap.ms_read_cpu, costly.ms_read_cpu, cheap.reads);
    const double extra = 1e3 / costly.tok_s - 1e3 / cheap.tok_s;
    CHECKF(extra > 0.0 && extra <= costly.ms_read_cpu - cheap.ms_read_cpu + 1e-9,
           "%.4f ms more a token for %.4f ms more of the reads' CPU", extra, costly.ms_read_cpu - cheap.ms_read_cpu);
    /* a disk 200 times slower: the wait covers all but the reads that go out at once */
    const pi_hw slow = slower_disk(hw, 200.0), slow_dear = slower_disk(dear, 200.0);
    pi_plan q = *p;
    q.queue_depth = 32; /* fewer than a layer's reads: the rest go out as the ring refills */
    pi_plan_cost(mp, &slow, &q, &cheap);
    pi_plan_cost(mp, &slow_dear, &q, &costly);
    const double R = cheap.reads / L, at_once = R < (double)q.queue_depth ? R : (double)q.queue_depth;
    const double issue = L * at_once * (20.0 - 0.2) * 1e-3, more = 1e3 / costly.tok_s - 1e3 / cheap.tok_s;
    CHECKF(R > 32.0 && fabs(more - issue) < 1e-6 * (1.0 + issue),
           "slow disk, %.0f reads a layer at qd %d: %.4f ms more a token, the issue's share %.4f", R, q.queue_depth,
           more, issue);
    pi_mprofile_free(mp);
}

/* A read's issue (the submitting thread's time, read_issue_us) is what
   the token's path pays; the machine's CPU for it (read_cpu_us) bounds the
   token only through the cores: the token takes at least the cores' work
   plus every read's CPU spread over the threads. */
static void test_read_issue(void) {
    layers4 x;
    identical_layers(&x);
    const pi_hw hw = x.hw; /* reads: 0.2 us of CPU, no issue figure (a version 4 file) */
    pi_mprofile *mp = x.mp;
    const pi_plan *p = &x.p;
    const int T = p->threads > 0 ? p->threads : 1;
    CHECK(pi_hw_read_issue_s(&hw) == pi_hw_read_cpu_s(&hw));
    /* a slow disk: the path is the reads' wait, the cores idle most of the time */
    const pi_hw slow = slower_disk(hw, 200.0);
    pi_hw busy_irq = slow; /* interrupts cost the machine 100 times the issue */
    busy_irq.read_cpu_us = 20.0;
    busy_irq.read_issue_us = 0.2;
    CHECK(fabs(pi_hw_read_issue_s(&busy_irq) - 0.2e-6) < 1e-18 && fabs(pi_hw_read_cpu_s(&busy_irq) - 20e-6) < 1e-18);
    pi_cost a, b;
    pi_plan_cost(mp, &slow, p, &a);
    pi_plan_cost(mp, &busy_irq, p, &b);
    CHECKF(a.reads > 0.0 && b.ms_cores < 1e3 / b.tok_s && fabs(a.tok_s - b.tok_s) <= 1e-12 * a.tok_s,
           "slow disk: %.6f against %.6f tok/s, the cores' bound %.3f ms", b.tok_s, a.tok_s, b.ms_cores);
    CHECKF(fabs(b.ms_read_cpu - b.reads * 20e-3) < 1e-9, "the reads' CPU %.4f ms for %.0f reads", b.ms_read_cpu,
           b.reads);
    /* the disk as fast as it was and the reads' CPU dear: the cores bind */
    pi_hw dear = hw;
    dear.read_cpu_us = 400.0;
    dear.read_issue_us = 0.2;
    pi_plan_cost(mp, &hw, p, &a);
    pi_plan_cost(mp, &dear, p, &b);
    const double spread = b.reads * (400.0 - 0.2) * 1e-3 / (double)T;
    CHECKF(fabs(1e3 / b.tok_s - b.ms_cores) < 1e-9 * b.ms_cores && fabs(b.ms_cores - a.ms_cores - spread) < 1e-6 * spread,
           "cores' bound %.4f ms (a token %.4f ms), %.4f more than at 0.2 us a read for %.4f ms of CPU over %d threads",
           b.ms_cores, 1e3 / b.tok_s, b.ms_cores - a.ms_cores, spread, T);
    CHECKF(a.ms_cores < 1e3 / a.tok_s, "cheap reads: the cores' bound %.4f ms binds a token of %.4f ms", a.ms_cores,
           1e3 / a.tok_s);
    pi_mprofile_free(mp);
}

/* The cache keeps room to lend a prompt's streamed FFN its full pieces
   where that room is at most a quarter of the memory left after the fixed
   parts, and not where it is more. */
static void test_lend_room(void) {
    pi_mprofile *mp = fake_profile(4, 2048);
    const uint64_t per = pi_ncache_footprint(1, 0, mp->stride, 1), map = (uint64_t)(4 * 2048) * 4;
    const uint64_t left = 48u << 20;
    pi_plan_limits lim = {mp->fixed + mp->session + mp->io + left, 2, 0.0, 0.0};
    pi_hw hw;
    fake_hw(&hw);
    pi_plan p0, p1, p2;
    CHECK(pi_plan_solve(mp, &hw, &lim, &p0) == PI_OK);
    mp->lend_slots = (int64_t)(p0.cache_bytes - map) / (int64_t)per + 400; /* more than the plan's cache */
    const uint64_t room = (uint64_t)mp->lend_slots * per;
    CHECK(room <= left / 4 && pi_plan_solve(mp, &hw, &lim, &p1) == PI_OK);
    CHECKF(p1.cache_bytes >= map + room && p1.resident_bytes <= lim.mem_budget, "cache %llu for a loan of %llu",
           (unsigned long long)p1.cache_bytes, (unsigned long long)room);
    mp->lend_slots = (int64_t)(left / 4 / per) + 1; /* more than a quarter: not kept */
    CHECK(pi_plan_solve(mp, &hw, &lim, &p2) == PI_OK);
    CHECKF(p2.cache_bytes == p0.cache_bytes, "cache %llu against %llu without the loan",
           (unsigned long long)p2.cache_bytes, (unsigned long long)p0.cache_bytes);
    pi_mprofile_free(mp);
}

int main(void) {
    test_cost_and_solver();
    test_lend_room();
    test_mixture();
    test_lookahead();
    test_read_cpu();
    test_read_issue();
    test_recall_choice();
    test_pair_choice();
    test_plan_file();
    test_real_file();
    test_selection_counts();
    return t_done("test_plan");
}
