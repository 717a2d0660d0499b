/*
 * test_sparse.c — the sparse FFN against the dense one:
 *  - oracle mode (exactly the active neurons) equals dense decoding to 1e-5
 *    relative on relu-stories, drelu-stories, moe-relu-stories (each routed
 *    expert sparse) and a generated ReLU model, and is bit-identical for 1
 *    and 2 threads;
 *  - predictor mode with every neuron in the hot prefix equals dense, for a
 *    dense layer and for each routed expert (per-expert predictors);
 *  - with a real (random) predictor the counters are consistent;
 *  - models the sparse path cannot serve are refused with a message.
 */
#include "model/genmodel.h"
#include "model/model.h"
#include "model/session.h"
#include "sparse/ffn_sparse.h"
#include "sparse/reorder.h"
#include "sparse/stats.h"
#include "test_util.h"

#include <stdbool.h>



static void test_oracle(const char *path, const char *label, int n_tokens) {
    pi_lm *m;
    pi_status st = pi_lm_load(path, PI_MAP_LOAD, &m);
    CHECKF(st == PI_OK, "%s: %s", label, pi_last_error());
    if (st) return;
    CHECK(pi_lm_make_down_t(m) == PI_OK);
    pi_state *dense, *o1, *o2;
    CHECK(pi_state_create(m, 256, 2, &dense) == PI_OK);
    CHECK(pi_state_create(m, 256, 1, &o1) == PI_OK);
    CHECK(pi_state_create(m, 256, 2, &o2) == PI_OK);
    CHECK(pi_sparse_ffn_install(o1, PI_FFN_ORACLE, 0) == PI_OK);
    CHECK(pi_sparse_ffn_install(o2, PI_FFN_ORACLE, 0) == PI_OK);
    int32_t toks[256];
    t_rng r = {7};
    toks[0] = 1;
    for (int i = 1; i < n_tokens; i++) toks[i] = (int32_t)(t_next(&r) % (uint64_t)m->hp.n_vocab);
    double e = t_compare_decode(dense, o2, toks, n_tokens);
    /* the same tokens, 1 thread vs 2: bit-identical */
    pi_state_reset(o1);
    pi_state_reset(o2);
    int same = 0;
    for (int t = 0; t < n_tokens; t++) {
        CHECK(pi_state_decode(o1, &toks[t], 1) == PI_OK && pi_state_decode(o2, &toks[t], 1) == PI_OK);
        same += !memcmp(pi_state_logits(o1), pi_state_logits(o2), (size_t)m->hp.n_vocab * sizeof(float));
    }
    uint64_t act = 0, tok = 0;
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        act += pi_sparse_ffn_stats(o2)[il].active;
        tok += pi_sparse_ffn_stats(o2)[il].tokens;
    }
    fprintf(stderr, "%s: oracle vs dense: logits relative error %.2e over %d tokens; %.1f%% of neurons active; "
            "1 vs 2 threads identical at %d/%d positions\n", label, e, n_tokens,
            100.0 * (double)act / (double)tok / (double)(m->hp.n_ff * (m->hp.n_expert ? m->hp.n_expert_used : 1)),
            same, n_tokens);
    CHECKF(e <= 1e-5, "%s: oracle differs from dense by %.3g", label, e);
    CHECK(same == n_tokens);
    pi_state_free(dense);
    pi_state_free(o1);
    pi_state_free(o2);
    pi_lm_free(m);
}

/* m with predictors (random ones bolted on): every neuron hot gives the
   dense result; a hot prefix of `hot` and the predictor's selection keep the
   counters consistent (one token per step, whatever the experts). */
static void check_predictor_runs(pi_lm *m, int64_t hot, const char *label, t_rng *r) {
    pi_state *dense, *all_hot, *sp;
    CHECK(pi_state_create(m, 64, 2, &dense) == PI_OK);
    CHECK(pi_state_create(m, 64, 2, &all_hot) == PI_OK);
    CHECK(pi_state_create(m, 64, 2, &sp) == PI_OK);
    CHECK(pi_sparse_ffn_install(all_hot, PI_FFN_SPARSE, m->hp.n_ff) == PI_OK);
    CHECK(pi_sparse_ffn_install(sp, PI_FFN_SPARSE, hot) == PI_OK);
    pi_sparse_ffn_of(all_hot)->check = true;
    pi_sparse_ffn_of(sp)->check = true;
    int32_t toks[32];
    for (int i = 0; i < 32; i++) toks[i] = (int32_t)(t_next(r) % (uint64_t)m->hp.n_vocab);
    double e = t_compare_decode(dense, all_hot, toks, 32);
    CHECKF(e <= 1e-5, "%s: all-hot sparse differs from dense by %.3g", label, e);
    t_compare_decode(dense, sp, toks, 32);
    const uint64_t per_token = (uint64_t)hot * (uint64_t)(m->hp.n_expert ? m->hp.n_expert_used : 1);
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        const pi_sparse_stats *st = &pi_sparse_ffn_stats(sp)[il], *ah = &pi_sparse_ffn_stats(all_hot)[il];
        CHECKF(st->tokens == 32 && st->predicted >= 32 * per_token && st->computed == st->predicted &&
                   st->active <= st->computed && st->bytes > 0,
               "%s layer %lld: tokens %llu, predicted %llu", label, (long long)il, (unsigned long long)st->tokens,
               (unsigned long long)st->predicted);
        /* recall against the exact set: every active neuron was computed, so the
           ones the selection missed are exactly oracle_active - active */
        CHECK(st->oracle_active >= st->active && st->missed == st->oracle_active - st->active);
        CHECK(ah->missed == 0 && ah->oracle_active == ah->active);
    }
    pi_state_free(dense);
    pi_state_free(all_hot);
    pi_state_free(sp);
}

/* A generated F32 ReLU model with predictors bolted on: every neuron hot
   gives the dense result; a random predictor keeps the counters sane. */
static void test_predictor_mode(void) {
    char path[256];
    t_tmp_path(path, sizeof path, "sparse-gen.gguf");
    pi_genmodel_params p;
    CHECK(pi_genmodel_preset("tiny", &p) == PI_OK);
    p.n_embd = 128;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.n_ff = 384;
    p.n_layer = 2;
    p.n_vocab = 300;
    p.type = p.embd_type = p.output_type = PI_TYPE_F32;
    p.act = PI_ACT_RELU;
    p.n_threads = 2;
    CHECK(pi_genmodel_write(&p, path) == PI_OK);
    test_oracle(path, "generated relu (f32)", 48);

    pi_lm *m;
    if (pi_lm_load(path, PI_MAP_LOAD, &m) != PI_OK) return;
    /* no predictor: SPARSE is refused, ORACLE needs down_t first */
    pi_state *s;
    CHECK(pi_state_create(m, 64, 2, &s) == PI_OK);
    CHECK(pi_sparse_ffn_install(s, PI_FFN_SPARSE, 0) == PI_ERR_INVALID && strstr(pi_last_error(), "predictor"));
    CHECK(pi_sparse_ffn_install(s, PI_FFN_ORACLE, 0) == PI_ERR_INVALID && strstr(pi_last_error(), "ffn_down_t"));
    CHECK(pi_lm_make_down_t(m) == PI_OK);
    /* a random rank-8 predictor in memory */
    const int64_t E = 128, F = 384, R = 8;
    float *fc1 = malloc((size_t)(E * R) * sizeof *fc1), *fc2 = malloc((size_t)(R * F) * sizeof *fc2);
    t_rng r = {3};
    for (int64_t i = 0; i < E * R; i++) fc1[i] = t_uniform(&r);
    for (int64_t i = 0; i < R * F; i++) fc2[i] = t_uniform(&r);
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        m->layers[il].fc1 = (pi_weight){fc1, PI_TYPE_F32, {E, R, 1, 1}, (size_t)E * 4, {0, NULL}};
        m->layers[il].fc2 = (pi_weight){fc2, PI_TYPE_F32, {R, F, 1, 1}, (size_t)R * 4, {0, NULL}};
    }
    m->has_predictor = true;
    /* the logits from a neuron on (the lookahead's, past a resident prefix):
       each the bits of the whole pass's, fewer bytes read */
    float in[128], u_all[8], u_from[8], z_all[384], z_from[384];
    for (int64_t i = 0; i < E; i++) in[i] = t_uniform(&r);
    const uint64_t b_all = pi_sparse_logits(s, 1, 0, in, u_all, z_all);
    for (int64_t i0 = 0; i0 <= F; i0 += 127) {
        for (int64_t i = 0; i < F; i++) z_from[i] = -1e30f;
        const uint64_t b_from = pi_sparse_logits_from(s, 1, 0, in, i0, u_from, z_from);
        int same = 0, untouched = 0;
        for (int64_t i = 0; i < F; i++)
            if (i >= i0) same += memcmp(&z_from[i], &z_all[i], sizeof(float)) == 0;
            else untouched += z_from[i] == -1e30f;
        CHECKF(same == F - i0 && untouched == i0 && !memcmp(u_from, u_all, sizeof u_all) &&
                   b_from == b_all - (uint64_t)i0 * (uint64_t)R * 4,
               "logits from %lld: %d of %lld the same, %d below untouched, %llu of %llu bytes", (long long)i0, same,
               (long long)(F - i0), untouched, (unsigned long long)b_from, (unsigned long long)b_all);
    }
    pi_state_free(s);
    check_predictor_runs(m, 32, "generated relu", &r);
    free(fc1);
    free(fc2);
    pi_lm_free(m);
    unlink(path);
}

/* moe-relu-stories with random per-expert predictors bolted on, each
   routed expert computed sparsely (check_predictor_runs). */
static void test_moe_predictor_mode(void) {
    char p[512];
    if (!t_fixture(p, sizeof p, "relu/moe-relu-stories.gguf")) return;
    pi_lm *m;
    CHECK(pi_lm_load(p, PI_MAP_LOAD, &m) == PI_OK);
    CHECK(!m->has_predictor && pi_lm_make_down_t(m) == PI_OK);
    const int64_t E = m->hp.n_embd, F = m->hp.n_ff, X = m->hp.n_expert, R = 8;
    float *fc1 = malloc((size_t)(E * R * X) * sizeof *fc1), *fc2 = malloc((size_t)(R * F * X) * sizeof *fc2);
    t_rng r = {5};
    for (int64_t i = 0; i < E * R * X; i++) fc1[i] = t_uniform(&r);
    for (int64_t i = 0; i < R * F * X; i++) fc2[i] = t_uniform(&r);
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        m->layers[il].fc1_exps = (pi_weight){fc1, PI_TYPE_F32, {E, R, X, 1}, (size_t)E * 4, {0, NULL}};
        m->layers[il].fc2_exps = (pi_weight){fc2, PI_TYPE_F32, {R, F, X, 1}, (size_t)R * 4, {0, NULL}};
    }
    m->has_predictor = true;
    check_predictor_runs(m, 16, "moe-relu-stories", &r);
    free(fc1);
    free(fc2);
    pi_lm_free(m);
}

/* Reordering by profiled frequency: the same function, the hot set first. */
static void test_reorder(const char *name, pi_type requant_type) {
    char src[512], rel[128], dst[256];
    snprintf(rel, sizeof rel, "relu/%s.gguf", name);
    if (!t_fixture(src, sizeof src, rel)) return;
    t_tmp_path(dst, sizeof dst, "reordered.gguf");
    pi_lm *m, *r;
    CHECK(pi_lm_load(src, PI_MAP_LOAD, &m) == PI_OK);
    pi_stats *st;
    CHECK(pi_stats_for_model(m, 0.0f, &st) == PI_OK);
    pi_state *s;
    CHECK(pi_state_create(m, 256, 2, &s) == PI_OK);
    pi_state_set_observer(s, pi_stats_observe, st);
    int32_t toks[128];
    t_rng rng = {11};
    toks[0] = 1;
    for (int i = 1; i < 128; i++) toks[i] = (int32_t)(t_next(&rng) % 512);
    CHECK(pi_state_decode(s, toks, 128) == PI_OK);
    pi_state_set_observer(s, NULL, NULL);
    CHECK(pi_reorder_write(src, st, dst) == PI_OK);
    CHECK(pi_lm_load(dst, PI_MAP_LOAD, &r) == PI_OK);
    pi_state *rs;
    CHECK(pi_state_create(r, 256, 2, &rs) == PI_OK);
    double e = t_compare_decode(s, rs, toks, 48);
    fprintf(stderr, "%s: reordered vs original, dense: logits relative error %.2e\n", name, e);
    CHECKF(e <= 1e-5, "%s: reordering changed the logits by %.3g", name, e);
    /* re-profiling the reordered model: counts never increase along the neurons */
    pi_stats *st2;
    CHECK(pi_stats_for_model(r, 0.0f, &st2) == PI_OK);
    pi_state_set_observer(rs, pi_stats_observe, st2);
    pi_state_reset(rs);
    CHECK(pi_state_decode(rs, toks, 128) == PI_OK);
    int64_t unsorted = 0;
    for (int64_t il = 0; il < r->hp.n_layer; il++)
        for (int64_t i = 1; i < r->hp.n_ff; i++) unsorted += st2->counts[il * r->hp.n_ff + i] > st2->counts[il * r->hp.n_ff + i - 1];
    CHECK(unsorted == 0);
    /* the permutation is stored and is one */
    const pi_gguf_tensor *pt = pi_gguf_find_tensor(r->gguf, "blk.0.ffn_perm.weight");
    CHECK(pt && pt->type == PI_TYPE_I32 && pt->ne[0] == r->hp.n_ff);
    if (pt) {
        char *seen = calloc((size_t)r->hp.n_ff, 1);
        int bad = 0;
        for (int64_t i = 0; i < r->hp.n_ff; i++) {
            int32_t v;
            memcpy(&v, (const uint8_t *)pt->data + 4 * i, 4);
            bad += v < 0 || v >= r->hp.n_ff || seen[v]++;
        }
        CHECK(bad == 0);
        free(seen);
    }
    /* oracle on the reordered model equals dense on the original */
    CHECK(pi_lm_make_down_t(r) == PI_OK);
    pi_state_set_observer(rs, NULL, NULL);
    CHECK(pi_sparse_ffn_install(rs, PI_FFN_ORACLE, 0) == PI_OK);
    e = t_compare_decode(s, rs, toks, 48);
    CHECKF(e <= 1e-5, "%s: reordered oracle differs from dense by %.3g", name, e);
    (void)requant_type;
    pi_stats_free(st);
    pi_stats_free(st2);
    pi_state_free(s);
    pi_state_free(rs);
    pi_lm_free(m);
    pi_lm_free(r);
    unlink(dst);
}

/* A Q8_0 model: ffn_down becomes a permuted ffn_down_t, requantized. */
static void test_reorder_quantized(void) {
    char src[256], dst[256];
    t_tmp_path(src, sizeof src, "q8.gguf");
    t_tmp_path(dst, sizeof dst, "q8-reordered.gguf");
    pi_genmodel_params p;
    CHECK(pi_genmodel_preset("tiny", &p) == PI_OK);
    p.n_embd = 128, p.n_head = 4, p.n_head_kv = 2, p.n_ff = 256, p.n_layer = 2, p.n_vocab = 300;
    p.type = p.embd_type = p.output_type = PI_TYPE_Q8_0;
    p.act = PI_ACT_RELU;
    CHECK(pi_genmodel_write(&p, src) == PI_OK);
    pi_lm *m, *r;
    CHECK(pi_lm_load(src, PI_MAP_LOAD, &m) == PI_OK);
    pi_stats *st;
    CHECK(pi_stats_for_model(m, 0.0f, &st) == PI_OK);
    pi_state *s, *rs;
    CHECK(pi_state_create(m, 64, 2, &s) == PI_OK);
    pi_state_set_observer(s, pi_stats_observe, st);
    int32_t toks[32];
    for (int i = 0; i < 32; i++) toks[i] = (int32_t)((i * 37 + 5) % 300);
    CHECK(pi_state_decode(s, toks, 32) == PI_OK);
    pi_state_set_observer(s, NULL, NULL);
    CHECK(pi_reorder_write(src, st, dst) == PI_OK);
    CHECK(pi_lm_load(dst, PI_MAP_LOAD, &r) == PI_OK);
    CHECK(r->layers[0].ffn_down.data == NULL && r->layers[0].ffn_down_t.type == PI_TYPE_Q8_0);
    CHECK(pi_state_create(r, 64, 2, &rs) == PI_OK);
    double e = t_compare_decode(s, rs, toks, 16);
    fprintf(stderr, "q8_0 generated: reordered (down requantized) vs original: logits relative error %.2e\n", e);
    CHECK(e <= 2e-2); /* Q8_0 rounding of the transposed down, once */
    pi_stats_free(st);
    pi_state_free(s);
    pi_state_free(rs);
    pi_lm_free(m);
    pi_lm_free(r);
    unlink(src);
    unlink(dst);
}

static void test_refused(void) {
    char p[512];
    if (!t_fixture(p, sizeof p, "stories260K.gguf")) return;
    pi_lm *m;
    pi_state *s;
    CHECK(pi_lm_load(p, PI_MAP_FILE, &m) == PI_OK);
    CHECK(pi_state_create(m, 16, 1, &s) == PI_OK);
    CHECK(pi_sparse_ffn_install(s, PI_FFN_ORACLE, 0) == PI_ERR_INVALID && strstr(pi_last_error(), "silu"));
    CHECK(pi_state_ffn(s, NULL) == NULL); /* refused: the state stays dense */
    pi_state_free(s);
    pi_lm_free(m);
    /* a mixture of experts without per-expert predictors: the exact mask runs, the predictor mode not */
    if (!t_fixture(p, sizeof p, "relu/moe-relu-stories.gguf")) return;
    CHECK(pi_lm_load(p, PI_MAP_FILE, &m) == PI_OK);
    CHECK(pi_state_create(m, 16, 1, &s) == PI_OK);
    CHECK(pi_sparse_ffn_install(s, PI_FFN_SPARSE, 0) == PI_ERR_INVALID && strstr(pi_last_error(), "fc1_exps"));
    CHECK(pi_sparse_ffn_install(s, PI_FFN_ORACLE, 0) == PI_ERR_INVALID && strstr(pi_last_error(), "ffn_down_t"));
    pi_state_free(s);
    pi_lm_free(m);
}

int main(void) {
    char p[512];
    bool emulated = t_emulated();
    int n = emulated ? 24 : 96;
    if (t_fixture(p, sizeof p, "relu/relu-stories.gguf")) test_oracle(p, "relu-stories", n);
    if (t_fixture(p, sizeof p, "relu/drelu-stories.gguf")) test_oracle(p, "drelu-stories", n);
    if (t_fixture(p, sizeof p, "relu/moe-relu-stories.gguf")) test_oracle(p, "moe-relu-stories", n);
    test_predictor_mode();
    test_moe_predictor_mode();
    test_reorder("relu-stories", PI_TYPE_F32);
    test_reorder("drelu-stories", PI_TYPE_F32);
    test_reorder_quantized();
    test_refused();
    return t_done("test_sparse");
}
