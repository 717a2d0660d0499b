/*
 * test_bundle.c — the bundle file (gguf/bundle.h) written by pi_bundle_write
 * and read by pi_lm_load, on generated models: a ReLU F32 model and a ReLU
 * Q8_0 model without ffn_down_t (the down part is transposed, as
 * pi_lm_make_down_t does), and a planted dReLU Q4_0 model with ffn_down_t
 * and predictors. For each, with synthetic statistics:
 *  - every bundle's gate, up and down parts are byte-identical to the source
 *    rows under the permutation pi_stats_order gives (identity without
 *    statistics), every other byte of a bundle is zero, fc2 rows follow the
 *    permutation, the permutation and the counts are stored, every other
 *    tensor and key of the source is kept, every tensor starts on a
 *    4096-byte file offset; for align 4096, 512 and 0 (packed), and for a
 *    bundle file rewritten from a bundle file;
 *  - the loaded bundle model gives the logits of the reordered source
 *    (pi_reorder_write with the same statistics) to 1e-6 relative, dense
 *    (decode and prefill) and in ORACLE mode, and so does the same file
 *    loaded with PI_LOAD_FFN_ON_FLASH (strided views of the bundles);
 *  - MoE and SiLU inputs, bad alignments, and bundle files with a corrupted
 *    key or tensor shape are refused with a message naming the field.
 */
#include "model/genmodel.h"
#include "model/model.h"
#include "model/session.h"
#include "sparse/ffn_sparse.h"
#include "sparse/reorder.h"
#include "sparse/stats.h"
#include "gguf/bundle.h"
#include "gguf/names.h"
#include "test_moe.h"
#include "test_util.h"

#include <stdarg.h>
#include <stdbool.h>

static bool g_emulated;



static void small_model(pi_genmodel_params *p, pi_type type, pi_ffn_act act) {
    CHECK(pi_genmodel_preset("tiny", p) == PI_OK);
    p->n_embd = 128;
    p->n_head = 4;
    p->n_head_kv = 2;
    p->n_ff = 384;
    p->n_layer = 2;
    p->n_vocab = 300;
    p->n_ctx = 128;
    p->type = p->embd_type = p->output_type = type;
    p->act = act;
    p->n_threads = 2;
}

/* Counts in [0, 1000] with many ties, so the order's tie rule matters. */
static pi_stats *synthetic_stats(int64_t n_layer, int64_t n_ff, uint64_t seed) {
    pi_stats *st = NULL;
    CHECK(pi_stats_create(n_layer, n_ff, 0.0f, "synthetic", &st) == PI_OK);
    if (!st) return NULL;
    st->tokens = 1000;
    t_rng r = {seed};
    for (int64_t i = 0; i < n_layer * n_ff; i++) st->counts[i] = (int64_t)(t_next(&r) % 41) * 25;
    return st;
}

static const void *row_of(const pi_weight *w, int64_t i) { return (const uint8_t *)w->data + (size_t)i * w->row_bytes; }

/* The tensor named by a printf format, or NULL. */
PI_PRINTF(2, 3)
static const pi_gguf_tensor *tensor_fmt(const pi_gguf *g, const char *fmt, ...) {
    char nm[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(nm, sizeof nm, fmt, ap);
    va_end(ap);
    return pi_gguf_find_tensor(g, nm);
}

static bool is_ffn_matrix(pi_gguf_str name) {
    static const char *const sfx[] = {".ffn_gate.weight", ".ffn_up.weight", ".ffn_down.weight", ".ffn_down_t.weight"};
    for (size_t i = 0; i < 4; i++) {
        size_t n = strlen(sfx[i]);
        if (name.len > n && !memcmp(name.data + name.len - n, sfx[i], n)) return true;
    }
    return false;
}

/* Check bundle file `bpath` against the source model at `src` (neurons
   permuted by st's order, or kept when st is NULL). */
static void check_file(const char *label, const char *src, const char *bpath, const pi_stats *st, uint32_t align) {
    pi_lm *m = NULL;
    pi_gguf *g = NULL;
    pi_bundle_layout b = {0};
    CHECKF(pi_lm_load(src, PI_MAP_FILE, &m) == PI_OK, "%s: %s", label, pi_last_error());
    CHECKF(pi_gguf_open(bpath, &g) == PI_OK, "%s: %s", label, pi_last_error());
    if (!m || !g) goto out;
    CHECK(pi_lm_make_down_t(m) == PI_OK);
    const int64_t E = m->hp.n_embd, F = m->hp.n_ff, L = m->hp.n_layer;
    CHECKF(pi_bundle_layout_read(g, bpath, L, &b) == PI_OK, "%s: %s", label, pi_last_error());
    if (!b.layer) goto out;
    CHECK(b.align == align && b.n_embd == E && b.n_ff == F && b.n_layer == L);
    size_t largest = 0;
    bool uniform = true;
    for (int64_t il = 0; il < L; il++) { /* each layer's parts in its own types, one after the other */
        const pi_layer *l = &m->layers[il];
        const pi_bundle_parts *pt = &b.layer[il];
        const pi_weight *w[3] = {&l->ffn_gate, &l->ffn_up, &l->ffn_down_t};
        size_t at = 0;
        for (int k = 0; k < 3; k++) {
            CHECKF(pt->type[k] == w[k]->type && pt->bytes[k] == w[k]->row_bytes && pt->off[k] == at,
                   "%s: layer %lld part %d", label, (long long)il, k);
            at += pt->bytes[k];
            uniform &= pt->type[k] == b.layer[0].type[k];
        }
        if (at > largest) largest = at;
    }
    uint32_t version = 0;
    CHECK(pi_gguf_get_u32(g, PI_KEY_BUNDLE_VERSION, &version) == PI_OK &&
          version == (uniform ? PI_BUNDLE_VERSION : PI_BUNDLE_VERSION_MIXED));
    if (align) CHECK(b.stride % align == 0 && b.stride >= largest && b.stride < largest + align);
    else CHECK(b.stride == largest);
    CHECK(pi_gguf_alignment(g) == PI_BUNDLE_FILE_ALIGN);
    for (int64_t i = 0; i < pi_gguf_n_tensors(g); i++) {
        const pi_gguf_tensor *t = pi_gguf_tensor_at(g, i);
        CHECKF(pi_gguf_tensor_file_offset(g, t) % 4096 == 0, "%s: tensor %.*s at %llu", label, (int)t->name.len,
               t->name.data, (unsigned long long)pi_gguf_tensor_file_offset(g, t));
        CHECKF(!is_ffn_matrix(t->name), "%s: %.*s kept", label, (int)t->name.len, t->name.data);
    }
    /* the source's other tensors and keys are kept */
    for (int64_t i = 0; i < pi_gguf_n_tensors(m->gguf); i++) {
        const pi_gguf_tensor *s = pi_gguf_tensor_at(m->gguf, i);
        if (is_ffn_matrix(s->name)) continue;
        char nm[96];
        snprintf(nm, sizeof nm, "%.*s", (int)s->name.len, s->name.data);
        const pi_gguf_tensor *t = pi_gguf_find_tensor(g, nm);
        CHECKF(t && t->type == s->type && t->nbytes == s->nbytes && !memcmp(t->ne, s->ne, sizeof t->ne), "%s: %s",
               label, nm);
        if (t && t->nbytes == s->nbytes && (!st || !strstr(nm, ".fc2.")))
            CHECKF(!memcmp(t->data, s->data, s->nbytes), "%s: %s changed", label, nm);
    }
    for (int64_t i = 0; i < pi_gguf_n_kv(m->gguf); i++) {
        const pi_gguf_kv *kv = pi_gguf_kv_at(m->gguf, i);
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.data);
        const pi_gguf_kv *k2 = pi_gguf_find_kv(g, key);
        CHECKF(k2 && k2->type == kv->type, "%s: key %s", label, key);
    }
    /* reordered now, or kept as the source was */
    bool reordered = false, was = false;
    pi_gguf_get_bool(m->gguf, "pinfer.reordered", &was);
    CHECK(pi_gguf_get_bool(g, "pinfer.reordered", &reordered) == (st || was ? PI_OK : PI_ERR_NOT_FOUND));
    CHECK(reordered == (st || was));

    int32_t *perm = malloc((size_t)F * sizeof *perm);
    uint8_t *zero = calloc(b.stride, 1);
    for (int64_t il = 0; il < L; il++) {
        const pi_layer *l = &m->layers[il];
        if (st) pi_stats_order(st, il, perm);
        else for (int64_t k = 0; k < F; k++) perm[k] = (int32_t)k;
        const pi_gguf_tensor *t = tensor_fmt(g, PI_TN_FFN_BUNDLE, (int)il);
        CHECKF(t && t->type == PI_TYPE_I8 && t->ne[0] == (int64_t)b.stride && t->ne[1] == F, "%s: layer %lld", label,
               (long long)il);
        if (!t) continue;
        int bad_gate = 0, bad_up = 0, bad_down = 0, bad_pad = 0;
        const pi_bundle_parts *pt = &b.layer[il];
        const size_t total = pt->bytes[0] + pt->bytes[1] + pt->bytes[2];
        for (int64_t k = 0; k < F; k++) {
            const uint8_t *bd = (const uint8_t *)t->data + (size_t)k * b.stride;
            bad_gate += memcmp(bd + pt->off[PI_BUNDLE_GATE], row_of(&l->ffn_gate, perm[k]), pt->bytes[PI_BUNDLE_GATE]) != 0;
            bad_up += memcmp(bd + pt->off[PI_BUNDLE_UP], row_of(&l->ffn_up, perm[k]), pt->bytes[PI_BUNDLE_UP]) != 0;
            bad_down += memcmp(bd + pt->off[PI_BUNDLE_DOWN], row_of(&l->ffn_down_t, perm[k]), pt->bytes[PI_BUNDLE_DOWN]) != 0;
            bad_pad += memcmp(bd + total, zero, b.stride - total) != 0;
        }
        CHECKF(!bad_gate && !bad_up && !bad_down && !bad_pad, "%s layer %lld: %d gate, %d up, %d down, %d padding differ",
               label, (long long)il, bad_gate, bad_up, bad_down, bad_pad);
        if (l->fc2.data) { /* predictor rows follow the neurons */
            const pi_gguf_tensor *f2 = tensor_fmt(g, "blk.%d.fc2.weight", (int)il);
            int bad = !f2;
            for (int64_t k = 0; f2 && k < F; k++)
                bad += memcmp((const uint8_t *)f2->data + (size_t)k * l->fc2.row_bytes, row_of(&l->fc2, perm[k]),
                              l->fc2.row_bytes) != 0;
            CHECKF(bad == 0, "%s layer %lld: %d fc2 rows differ", label, (long long)il, bad);
        }
        const pi_gguf_tensor *permt = tensor_fmt(g, "blk.%d.ffn_perm.weight", (int)il);
        const pi_gguf_tensor *ct = tensor_fmt(g, PI_TN_FFN_ACT_COUNT, (int)il);
        if (!st) { /* the source's, if any, compared above */
            CHECK(!permt == !tensor_fmt(m->gguf, "blk.%d.ffn_perm.weight", (int)il));
            CHECK(!ct == !tensor_fmt(m->gguf, PI_TN_FFN_ACT_COUNT, (int)il));
            continue;
        }
        CHECK(permt && permt->type == PI_TYPE_I32 && permt->ne[0] == F && ct && ct->type == PI_TYPE_I32 && ct->ne[0] == F);
        if (!permt || !ct) continue;
        int bad_perm = 0, bad_count = 0, unsorted = 0;
        for (int64_t k = 0; k < F; k++) {
            int32_t v, c;
            memcpy(&v, (const uint8_t *)permt->data + 4 * k, 4);
            memcpy(&c, (const uint8_t *)ct->data + 4 * k, 4);
            bad_perm += v != perm[k];
            bad_count += c != st->counts[il * F + perm[k]];
            if (k) {
                int32_t prev;
                memcpy(&prev, (const uint8_t *)ct->data + 4 * (k - 1), 4);
                unsorted += c > prev;
            }
        }
        CHECKF(!bad_perm && !bad_count && !unsorted, "%s layer %lld: perm %d, counts %d, unsorted %d", label,
               (long long)il, bad_perm, bad_count, unsorted);
    }
    if (st) {
        int64_t tokens = 0;
        CHECK(pi_gguf_get_i64(g, PI_KEY_STATS_TOKENS, &tokens) == PI_OK && tokens == st->tokens);
    }
    free(perm);
    free(zero);
out:
    pi_bundle_layout_free(&b);
    pi_gguf_close(g);
    pi_lm_free(m);
}

/* Load a model for comparison on the down_t path: with ffn_down_t made and
   ffn_down forgotten, dense decoding reads the same rows a bundle file
   gives. */
static pi_lm *load_down_t(const char *path) {
    pi_lm *m = NULL;
    CHECKF(pi_lm_load(path, PI_MAP_LOAD, &m) == PI_OK, "%s: %s", path, pi_last_error());
    if (!m) return NULL;
    CHECK(pi_lm_make_down_t(m) == PI_OK);
    for (int64_t il = 0; il < m->hp.n_layer; il++) memset(&m->layers[il].ffn_down, 0, sizeof(pi_weight));
    return m;
}

/* The loaded bundle model against the reference (the source, reordered as
   the bundle file is): dense and oracle logits. */
static void check_logits(const char *label, const char *ref_path, const char *bpath) {
    pi_lm *ref = load_down_t(ref_path), *bm = NULL, *full = NULL;
    CHECKF(pi_lm_load(bpath, PI_MAP_LOAD, &bm) == PI_OK, "%s: %s", label, pi_last_error());
    CHECK(pi_lm_load(ref_path, PI_MAP_FILE, &full) == PI_OK);
    if (!ref || !bm || !full) goto out;
    CHECK(bm->bundled && !full->bundled);
    for (int64_t il = 0; il < bm->hp.n_layer; il++) {
        const pi_layer *l = &bm->layers[il];
        CHECK(l->bundle.present && l->bundle.file_off % 4096 == 0 && l->bundle.data && !l->ffn_down.data);
        CHECK(l->ffn_gate.data && l->ffn_up.data && l->ffn_down_t.data);
        CHECK((int64_t)((const uint8_t *)l->bundle.data - pi_gguf_base(bm->gguf)) == l->bundle.file_off);
        CHECK(l->fc1.data == NULL || (l->fc2.ne[1] == bm->hp.n_ff));
    }
    CHECK(bm->has_predictor == full->has_predictor);
    CHECK(pi_lm_bytes_per_token(bm) > 0);
    const int n = g_emulated ? 8 : 24;
    int32_t toks[32];
    t_rng r = {5};
    toks[0] = 1;
    for (int i = 1; i < n; i++) toks[i] = (int32_t)(t_next(&r) % (uint64_t)bm->hp.n_vocab);
    pi_state *rd, *bd, *ro, *bo, *fd;
    CHECK(pi_state_create(ref, 64, 2, &rd) == PI_OK);
    CHECK(pi_state_create(bm, 64, 2, &bd) == PI_OK);
    CHECK(pi_state_create(ref, 64, 2, &ro) == PI_OK);
    CHECK(pi_state_create(bm, 64, 2, &bo) == PI_OK);
    CHECK(pi_state_create(full, 64, 2, &fd) == PI_OK);
    CHECK(pi_lm_make_down_t(bm) == PI_OK); /* a no-op: bundles carry down_t */
    CHECK(pi_sparse_ffn_install(ro, PI_FFN_ORACLE, 0) == PI_OK);
    CHECKF(pi_sparse_ffn_install(bo, PI_FFN_ORACLE, 0) == PI_OK, "%s", pi_last_error());
    double e_dense = t_compare_decode(rd, bd, toks, n), e_oracle = t_compare_decode(ro, bo, toks, n), e_mix = t_compare_decode(rd, bo, toks, n);
    /* and the reference as stored (ffn_down, where it has one) */
    double e_full = t_compare_decode(fd, bd, toks, n);
    /* prefill: a batch through the dense path of both */
    pi_state_reset(rd);
    pi_state_reset(bd);
    CHECK(pi_state_decode(rd, toks, n) == PI_OK && pi_state_decode(bd, toks, n) == PI_OK);
    double e_prefill = t_rel_err(pi_state_logits(bd), pi_state_logits(rd), bm->hp.n_vocab);
    fprintf(stderr, "%s: bundle vs source, logits relative error: dense %.2e, oracle %.2e, oracle vs dense %.2e, "
            "prefill %.2e; vs the source's own ffn_down %.2e\n", label, e_dense, e_oracle, e_mix, e_prefill, e_full);
    CHECKF(e_dense <= 1e-6, "%s: dense %.3g", label, e_dense);
    CHECKF(e_oracle <= 1e-6, "%s: oracle %.3g", label, e_oracle);
    /* 4- to 6-bit down rows (Q4_0 .. Q6_K) are added in integers per group of
       8 rows with 16-bit coefficients (axpy_rows.h): the dense pass over
       down_t and the oracle's list group different rows, 15 bits of each
       group's largest coefficient apart (measured 3.5e-5 on drelu-q4_0) */
    const pi_type dt = bm->layers[0].ffn_down_t.type;
    const bool int_down = dt != PI_TYPE_F32 && dt != PI_TYPE_F16 && dt != PI_TYPE_BF16 && dt != PI_TYPE_Q8_0;
    const double mix_tol = int_down ? 1e-4 : 1e-5;
    CHECKF(e_mix <= mix_tol, "%s: oracle vs dense %.3g", label, e_mix);
    CHECKF(e_prefill <= 1e-6, "%s: prefill %.3g", label, e_prefill);
    /* the FFN left in the mapped file: strided views of the bundles */
    pi_lm *fm = NULL;
    CHECKF(pi_lm_load_ex(bpath, PI_MAP_FILE, PI_LOAD_FFN_ON_FLASH, &fm) == PI_OK, "%s", pi_last_error());
    if (fm) {
        const pi_layer *l = &fm->layers[0];
        CHECK(fm->bundled && l->ffn_gate.row_bytes == l->bundle.stride &&
              l->ffn_up.data == (const uint8_t *)l->bundle.data + l->bundle.parts.off[PI_BUNDLE_UP] &&
              l->ffn_down_t.data == (const uint8_t *)l->bundle.data + l->bundle.parts.off[PI_BUNDLE_DOWN]);
        CHECK(pi_lm_bytes_per_token(fm) == pi_lm_bytes_per_token(bm));
        pi_state *vd, *vo;
        CHECK(pi_state_create(fm, 64, 2, &vd) == PI_OK);
        CHECK(pi_state_create(fm, 64, 2, &vo) == PI_OK);
        CHECK(pi_sparse_ffn_install(vo, PI_FFN_ORACLE, 0) == PI_OK);
        double e_vd = t_compare_decode(bd, vd, toks, n), e_vo = t_compare_decode(bo, vo, toks, n);
        pi_state_reset(vd);
        pi_state_reset(bd);
        CHECK(pi_state_decode(vd, toks, n) == PI_OK && pi_state_decode(bd, toks, n) == PI_OK);
        double e_vp = t_rel_err(pi_state_logits(vd), pi_state_logits(bd), bm->hp.n_vocab);
        fprintf(stderr, "%s: FFN on flash (strided views) vs copies: dense %.2e, oracle %.2e, prefill %.2e\n", label,
                e_vd, e_vo, e_vp);
        CHECKF(e_vd <= 1e-6 && e_vo <= 1e-6 && e_vp <= 1e-6, "%s: views differ", label);
        pi_state_free(vd);
        pi_state_free(vo);
        pi_lm_free(fm);
    }
    pi_state_free(rd);
    pi_state_free(bd);
    pi_state_free(ro);
    pi_state_free(bo);
    pi_state_free(fd);
out:
    pi_lm_free(ref);
    pi_lm_free(bm);
    pi_lm_free(full);
}

static void path_of(char *buf, size_t n, const char *label, const char *what) {
    char stem[128];
    snprintf(stem, sizeof stem, "bundle-%s-%s.gguf", label, what);
    t_tmp_path(buf, n, stem);
}

/* One source model through every path. */
static void test_model(const char *label, const pi_genmodel_params *p) {
    char src[256], reord[256], b4k[256], bpk[256], b512[256], bplain[256], again[256];
    path_of(src, sizeof src, label, "src");
    path_of(reord, sizeof reord, label, "reordered");
    path_of(b4k, sizeof b4k, label, "b4096");
    path_of(bpk, sizeof bpk, label, "packed");
    path_of(b512, sizeof b512, label, "b512");
    path_of(bplain, sizeof bplain, label, "plain");
    path_of(again, sizeof again, label, "again");
    CHECKF(pi_genmodel_write(p, src) == PI_OK, "%s: %s", label, pi_last_error());
    pi_stats *st = synthetic_stats(p->n_layer, p->n_ff, 99);
    if (!st) return;
    CHECKF(pi_reorder_write(src, st, reord) == PI_OK, "%s: %s", label, pi_last_error());
    CHECKF(pi_bundle_write(src, st, 4096, b4k) == PI_OK, "%s: %s", label, pi_last_error());
    CHECKF(pi_bundle_write(src, st, 0, bpk) == PI_OK, "%s: %s", label, pi_last_error());
    CHECKF(pi_bundle_write(src, NULL, 4096, bplain) == PI_OK, "%s: %s", label, pi_last_error());
    /* a bundle file is an input too: re-aligning keeps every part */
    CHECKF(pi_bundle_write(b4k, NULL, 512, b512) == PI_OK, "%s: %s", label, pi_last_error());
    /* the reordered file bundled in its own order is the same bundle file */
    CHECKF(pi_bundle_write(reord, NULL, 4096, again) == PI_OK, "%s: %s", label, pi_last_error());

    char lb[96];
    snprintf(lb, sizeof lb, "%s/4096", label);
    check_file(lb, src, b4k, st, 4096);
    snprintf(lb, sizeof lb, "%s/packed", label);
    check_file(lb, src, bpk, st, 0);
    snprintf(lb, sizeof lb, "%s/512", label);
    check_file(lb, src, b512, st, 512);
    snprintf(lb, sizeof lb, "%s/plain", label);
    check_file(lb, src, bplain, NULL, 4096);
    snprintf(lb, sizeof lb, "%s/of-reordered", label);
    check_file(lb, reord, again, NULL, 4096);

    snprintf(lb, sizeof lb, "%s/4096", label);
    check_logits(lb, reord, b4k);
    snprintf(lb, sizeof lb, "%s/packed", label);
    check_logits(lb, reord, bpk);
    snprintf(lb, sizeof lb, "%s/plain", label);
    check_logits(lb, src, bplain);

    /* reordering a bundle file is refused: bundle it again instead */
    CHECK(pi_reorder_write(b4k, st, again) == PI_ERR_UNSUPPORTED && strstr(pi_last_error(), "bundle"));
    pi_stats_free(st);
    const char *all[] = {src, reord, b4k, bpk, b512, bplain, again};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) unlink(all[i]);
}

/* ---- refusals ---- */

typedef struct {
    const char *key;     /* key to replace (NULL: none) */
    uint64_t value;      /* its new value (integer keys) */
    const char *str;     /* its new value (string keys) */
    bool drop;           /* drop the key instead */
    int64_t bundle_ne1;  /* > 0: blk.0.ffn_bundle gets this many rows */
    const char *tensor;  /* or this tensor ... */
    int dim;             /* ... gets ne[dim] = ne (its data cut to fit) */
    int64_t ne;
} corruption;

/* Copy a bundle file, corrupting one thing. */
static pi_status copy_corrupt(const char *src, const char *dst, const corruption *c) {
    pi_gguf *g;
    pi_status st = pi_gguf_open(src, &g);
    if (st) return st;
    pi_gguf_writer *w;
    if ((st = pi_gguf_writer_create(dst, false, &w))) {
        pi_gguf_close(g);
        return st;
    }
    for (int64_t i = 0; i < pi_gguf_n_kv(g) && !st; i++) {
        const pi_gguf_kv *kv = pi_gguf_kv_at(g, i);
        if (c->key && pi_gguf_str_eq(kv->key, c->key)) {
            if (c->drop) continue;
            st = kv->type == PI_GGUF_STRING ? pi_gguf_set_str(w, c->key, c->str)
                 : kv->type == PI_GGUF_UINT64 ? pi_gguf_set_u64(w, c->key, c->value)
                                              : pi_gguf_set_u32(w, c->key, (uint32_t)c->value);
        } else {
            st = pi_gguf_set_kv(w, kv);
        }
    }
    for (int64_t i = 0; i < pi_gguf_n_tensors(g) && !st; i++) {
        const pi_gguf_tensor *t = pi_gguf_tensor_at(g, i);
        char nm[96];
        snprintf(nm, sizeof nm, "%.*s", (int)t->name.len, t->name.data);
        int64_t ne[4];
        memcpy(ne, t->ne, sizeof ne);
        if (c->bundle_ne1 > 0 && !strcmp(nm, "blk.0.ffn_bundle")) ne[1] = c->bundle_ne1;
        if (c->tensor && !strcmp(nm, c->tensor)) ne[c->dim] = c->ne;
        st = pi_gguf_add_tensor(w, nm, (pi_type)t->type, t->n_dims, ne);
    }
    if (!st) st = pi_gguf_writer_begin_data(w);
    for (int64_t i = 0; i < pi_gguf_n_tensors(g) && !st; i++) {
        const pi_gguf_tensor *t = pi_gguf_tensor_at(g, i);
        uint64_t n = t->nbytes;
        if (c->bundle_ne1 > 0 && pi_gguf_str_eq(t->name, "blk.0.ffn_bundle")) n = n / (uint64_t)t->ne[1] * (uint64_t)c->bundle_ne1;
        if (c->tensor && pi_gguf_str_eq(t->name, c->tensor)) n = n / (uint64_t)t->ne[c->dim] * (uint64_t)c->ne;
        /* a tensor made larger is its bytes, then zeros */
        st = pi_gguf_write_data(w, t->data, n < t->nbytes ? n : t->nbytes);
        static const uint8_t zeros[4096];
        for (uint64_t k = t->nbytes; !st && k < n; k += sizeof zeros)
            st = pi_gguf_write_data(w, zeros, n - k < sizeof zeros ? n - k : sizeof zeros);
    }
    pi_status cst = pi_gguf_writer_close(w);
    pi_gguf_close(g);
    return st ? st : cst;
}

static void expect_refused(const char *good, const char *bad, const corruption *c, pi_status want,
                           const char *needle) {
    CHECKF(copy_corrupt(good, bad, c) == PI_OK, "copy: %s", pi_last_error());
    pi_lm *m = NULL;
    pi_status st = pi_lm_load(bad, PI_MAP_FILE, &m);
    CHECKF(st == want && strstr(pi_last_error(), needle) && strstr(pi_last_error(), bad),
           "%s = %llu%s: status %d, message '%s' (wanted %d naming %s)", c->key ? c->key : "shape",
           (unsigned long long)c->value, c->drop ? " (dropped)" : "", st, pi_last_error(), want, needle);
    if (st == want) fprintf(stderr, "refused: %s\n", pi_last_error());
    pi_lm_free(m);
    unlink(bad);
}

/* ---- a mixture of experts ---- */

/* moe-relu-stories as a bundle file: each layer's experts one after the
   other, every part byte for byte the expert's rows (down: ffn_down_exps
   transposed, exact in F32); the same logits as the plain file, dense and
   with the exact mask; and what a broken one says. */
static void test_moe(void) {
    char src[512], good[256], bad[256], logits_note[64];
    if (!t_fixture(src, sizeof src, "relu/moe-relu-stories.gguf")) return;
    t_tmp_path(good, sizeof good, "bundle-moe.gguf");
    t_tmp_path(bad, sizeof bad, "bundle-moe-bad.gguf");
    CHECKF(pi_bundle_write(src, NULL, 4096, good) == PI_OK, "%s", pi_last_error());
    pi_lm *a = NULL, *b = NULL;
    CHECK(pi_lm_load(src, PI_MAP_FILE, &a) == PI_OK && pi_lm_load(good, PI_MAP_FILE, &b) == PI_OK);
    if (a && b) {
        CHECK(b->bundled && b->hp.n_expert == 4 && !b->layers[0].ffn_down_exps.data);
        CHECK(pi_lm_make_down_t(a) == PI_OK);
        /* the plain file's dense path through ffn_down_t too, as the bundle file's (one summation order) */
        for (int il = 0; il < 6; il++) a->layers[il].ffn_down_exps.data = NULL;
        const int64_t E = 128, F = 256;
        int bad_rows = 0;
        for (int il = 0; il < 6; il++) {
            const pi_layer *la = &a->layers[il], *lb = &b->layers[il];
            CHECK(lb->ffn_gate_exps.ne[1] == F && lb->ffn_gate_exps.ne[2] == 4 && lb->ffn_down_t.ne[2] == 4);
            for (int64_t r = 0; r < 4 * F; r++) {
                bad_rows += memcmp(row_of(&la->ffn_gate_exps, r), row_of(&lb->ffn_gate_exps, r), (size_t)E * 4) != 0;
                bad_rows += memcmp(row_of(&la->ffn_up_exps, r), row_of(&lb->ffn_up_exps, r), (size_t)E * 4) != 0;
                bad_rows += memcmp(row_of(&la->ffn_down_t, r), row_of(&lb->ffn_down_t, r), (size_t)E * 4) != 0;
            }
        }
        CHECKF(bad_rows == 0, "%d expert rows differ between the plain and the bundle file", bad_rows);
        /* the dense and oracle paths of both files: the same logits */
        for (int mode = 0; mode < 2; mode++) {
            pi_state *sa = NULL, *sb = NULL;
            CHECK(pi_state_create(a, 64, 2, &sa) == PI_OK && pi_state_create(b, 64, 2, &sb) == PI_OK);
            if (mode) CHECK(pi_sparse_ffn_install(sa, PI_FFN_ORACLE, 0) == PI_OK &&
                            pi_sparse_ffn_install(sb, PI_FFN_ORACLE, 0) == PI_OK);
            int32_t toks[20];
            for (int i = 0; i < 20; i++) toks[i] = (int32_t)((i * 29 + 5) % 512);
            int diff = 0;
            CHECK(pi_state_decode(sa, toks, 12) == PI_OK && pi_state_decode(sb, toks, 12) == PI_OK);
            diff += memcmp(pi_state_logits(sa), pi_state_logits(sb), 512 * sizeof(float)) != 0;
            for (int i = 12; i < 20; i++) {
                CHECK(pi_state_decode(sa, &toks[i], 1) == PI_OK && pi_state_decode(sb, &toks[i], 1) == PI_OK);
                diff += memcmp(pi_state_logits(sa), pi_state_logits(sb), 512 * sizeof(float)) != 0;
            }
            snprintf(logits_note, sizeof logits_note, "%s", mode ? "oracle" : "dense");
            CHECKF(diff == 0, "%s: %d of 9 steps' logits differ between the plain and the bundle file", logits_note, diff);
            pi_state_free(sa);
            pi_state_free(sb);
        }
    }
    pi_lm_free(a);
    pi_lm_free(b);
    a = b = NULL;
    /* reordered per expert by statistics per expert: expert x's new neuron k
       is its old neuron perm[k], the counts and the permutation stored per
       expert, the logits unchanged */
    pi_stats *ms = synthetic_stats(24, 256, 5);
    if (ms) ms->n_expert = 4, ms->n_expert_used = 2;
    if (ms && (ms->sel = malloc(24 * 256 * sizeof *ms->sel))) /* selection counts, as profile measures them */
        for (int64_t i = 0; i < 24 * 256; i++) ms->sel[i] = (ms->counts[i] * 7 + i % 13) % 1001;
    CHECKF(ms && pi_bundle_write(src, ms, 4096, bad) == PI_OK, "%s", pi_last_error());
    CHECK(pi_lm_load(src, PI_MAP_FILE, &a) == PI_OK && pi_lm_load(bad, PI_MAP_FILE, &b) == PI_OK);
    if (a && b && ms) {
        CHECK(pi_lm_make_down_t(a) == PI_OK);
        for (int il = 0; il < 6; il++) a->layers[il].ffn_down_exps.data = NULL;
        int32_t perm[256];
        int wrong = 0;
        for (int il = 0; il < 6; il++) {
            const pi_gguf_tensor *cnt = tensor_fmt(b->gguf, PI_TN_FFN_ACT_COUNT, il);
            const pi_gguf_tensor *pt = tensor_fmt(b->gguf, PI_TN_FFN_PERM, il);
            const pi_gguf_tensor *sc = tensor_fmt(b->gguf, PI_TN_FFN_SEL_COUNT, il);
            CHECK(cnt && pt && sc && cnt->ne[0] == 4 * 256 && pt->ne[0] == 4 * 256 && sc->ne[0] == 4 * 256);
            if (!cnt || !pt || !sc) break;
            for (int x = 0; x < 4; x++) {
                pi_stats_order(ms, il * 4 + x, perm);
                for (int k = 0; k < 256; k++) {
                    const int64_t old = x * 256 + perm[k], nw = x * 256 + k;
                    int32_t c, pv;
                    memcpy(&c, (const uint8_t *)cnt->data + 4 * nw, 4);
                    memcpy(&pv, (const uint8_t *)pt->data + 4 * nw, 4);
                    wrong += c != ms->counts[(il * 4 + x) * 256 + perm[k]] || pv != perm[k];
                    int32_t sv;
                    memcpy(&sv, (const uint8_t *)sc->data + 4 * nw, 4);
                    wrong += sv != ms->sel[(il * 4 + x) * 256 + perm[k]];
                    wrong += memcmp(row_of(&a->layers[il].ffn_gate_exps, old), row_of(&b->layers[il].ffn_gate_exps, nw), 512) != 0;
                    wrong += memcmp(row_of(&a->layers[il].ffn_down_t, old), row_of(&b->layers[il].ffn_down_t, nw), 512) != 0;
                    if (k > 0) wrong += c > ms->counts[(il * 4 + x) * 256 + perm[k - 1]]; /* hottest first */
                }
            }
        }
        CHECKF(wrong == 0, "%d reordered expert rows, counts (activations, selections) or permutation entries are wrong",
               wrong);
        pi_state *sa = NULL, *sb = NULL;
        CHECK(pi_state_create(a, 64, 2, &sa) == PI_OK && pi_state_create(b, 64, 2, &sb) == PI_OK);
        int32_t toks[12];
        for (int i = 0; i < 12; i++) toks[i] = (int32_t)((i * 31 + 3) % 512);
        CHECK(pi_state_decode(sa, toks, 12) == PI_OK && pi_state_decode(sb, toks, 12) == PI_OK);
        /* the down projection sums the neurons in another order: equal within rounding */
        double worst = 0.0;
        for (int i = 0; i < 512; i++) {
            const double d = fabs((double)pi_state_logits(sa)[i] - (double)pi_state_logits(sb)[i]);
            if (d > worst) worst = d;
        }
        CHECKF(worst < 1e-3, "reordered mixture: logits differ by %g", worst);
        pi_state_free(sa);
        pi_state_free(sb);
    }
    pi_stats_free(ms);
    pi_lm_free(a);
    pi_lm_free(b);
    unlink(bad);
    /* an expert missing from a layer's bundles, a layer with one expert too
       many, the expert count changed, a router or predictors for another
       count of experts */
    corruption missing = {NULL, 0, NULL, false, 0, "blk.0.ffn_bundle", 2, 3};
    expect_refused(good, bad, &missing, PI_ERR_FORMAT, "experts");
    corruption extra = {NULL, 0, NULL, false, 0, "blk.3.ffn_bundle", 2, 5};
    expect_refused(good, bad, &extra, PI_ERR_FORMAT, "experts");
    pi_lm *m = NULL;
    corruption count = {"llama.expert_count", 3, NULL, false, 0, NULL, 0, 0};
    expect_refused(good, bad, &count, PI_ERR_FORMAT, "blk.0.ffn_bundle");
    corruption router = {NULL, 0, NULL, false, 0, "blk.2.ffn_gate_inp.weight", 1, 3};
    expect_refused(good, bad, &router, PI_ERR_FORMAT, "ffn_gate_inp");
    /* per-expert predictors for another count of experts than the weights' */
    char with_pred[256];
    t_tmp_path(with_pred, sizeof with_pred, "bundle-moe-pred.gguf");
    if (t_moe_with_predictors(src, bad) && pi_bundle_write(bad, NULL, 4096, with_pred) == PI_OK) {
        corruption pred = {NULL, 0, NULL, false, 0, "blk.1.fc2_exps.weight", 2, 3};
        expect_refused(with_pred, bad, &pred, PI_ERR_FORMAT, "fc2_exps");
    } else {
        CHECKF(false, "a mixture with predictors: %s", pi_last_error());
    }
    unlink(with_pred);
    /* a truncated file: the reader refuses it */
    size_t n;
    uint8_t *bytes = t_read_file(good, &n);
    FILE *f = bytes ? fopen(bad, "wb") : NULL;
    if (f) {
        fwrite(bytes, 1, n - 8192, f);
        fclose(f);
        pi_status st = pi_lm_load(bad, PI_MAP_FILE, &m);
        CHECKF(st != PI_OK && !m && strstr(pi_last_error(), bad), "truncated: %s", pi_last_error());
        fprintf(stderr, "refused: %s\n", pi_last_error());
    }
    free(bytes);
    unlink(bad);
    unlink(good);
}

static void test_refusals(void) {
    char src[256], good[256], packed[256], bad[256], out[256], p[512];
    t_tmp_path(src, sizeof src, "bundle-ref-src.gguf");
    t_tmp_path(good, sizeof good, "bundle-ref-good.gguf");
    t_tmp_path(packed, sizeof packed, "bundle-ref-packed.gguf");
    t_tmp_path(bad, sizeof bad, "bundle-ref-bad.gguf");
    t_tmp_path(out, sizeof out, "bundle-ref-out.gguf");
    pi_genmodel_params gp;

    /* SiLU: no sparsity to exploit */
    small_model(&gp, PI_TYPE_F32, PI_ACT_SILU);
    CHECK(pi_genmodel_write(&gp, src) == PI_OK);
    CHECK(pi_bundle_write(src, NULL, 4096, out) == PI_ERR_UNSUPPORTED && strstr(pi_last_error(), "SiLU"));
    CHECK(access(out, F_OK) != 0);
    /* MoE: statistics per layer, not per expert; a reorder without bundles */
    if (t_fixture(p, sizeof p, "relu/moe-relu-stories.gguf")) {
        pi_stats *ms = synthetic_stats(6, 256, 1);
        CHECK(pi_bundle_write(p, ms, 4096, out) == PI_ERR_INVALID && strstr(pi_last_error(), "experts"));
        CHECK(access(out, F_OK) != 0);
        pi_stats_free(ms);
        ms = synthetic_stats(24, 256, 1);
        if (ms) ms->n_expert = 4, ms->n_expert_used = 2;
        CHECK(pi_reorder_write(p, ms, out) == PI_ERR_UNSUPPORTED && strstr(pi_last_error(), "--bundle"));
        CHECK(access(out, F_OK) != 0);
        pi_stats_free(ms);
    }

    small_model(&gp, PI_TYPE_Q8_0, PI_ACT_RELU);
    CHECK(pi_genmodel_write(&gp, src) == PI_OK);
    /* alignments */
    static const uint32_t bad_align[] = {1000, 256, 131072, 3};
    for (size_t i = 0; i < sizeof bad_align / sizeof bad_align[0]; i++) {
        CHECK(pi_bundle_write(src, NULL, bad_align[i], out) == PI_ERR_INVALID && strstr(pi_last_error(), "alignment"));
        CHECK(access(out, F_OK) != 0);
    }
    /* statistics of another shape */
    pi_stats *st = synthetic_stats(gp.n_layer, gp.n_ff + 1, 1);
    CHECK(pi_bundle_write(src, st, 4096, out) == PI_ERR_INVALID && strstr(pi_last_error(), "statistics"));
    pi_stats_free(st);

    CHECK(pi_bundle_write(src, NULL, 4096, good) == PI_OK);
    CHECK(pi_bundle_write(src, NULL, 0, packed) == PI_OK);
    pi_gguf *g;
    pi_bundle_layout b = {0};
    if (pi_gguf_open(good, &g) == PI_OK) {
        CHECK(pi_bundle_layout_read(g, good, gp.n_layer, &b) == PI_OK);
        pi_gguf_close(g);
    }
    if (!b.layer) return;
    /* an unchanged copy loads: the copier itself is sound */
    corruption none = {NULL, 0, NULL, false, 0, NULL, 0, 0};
    CHECK(copy_corrupt(good, bad, &none) == PI_OK);
    pi_lm *m = NULL;
    CHECKF(pi_lm_load(bad, PI_MAP_FILE, &m) == PI_OK, "%s", pi_last_error());
    pi_lm_free(m);

    const struct {
        const char *file;
        corruption c;
        pi_status want;
        const char *needle;
    } cases[] = {
        {good, {PI_KEY_BUNDLE_STRIDE, b.stride - 1, NULL, false, 0, NULL, 0, 0}, PI_ERR_FORMAT, PI_KEY_BUNDLE_STRIDE},
        {good, {PI_KEY_BUNDLE_STRIDE, b.stride * 2, NULL, false, 0, NULL, 0, 0}, PI_ERR_FORMAT, PI_KEY_BUNDLE_STRIDE},
        {packed, {PI_KEY_BUNDLE_STRIDE, b.layer[0].bytes[0] + b.layer[0].bytes[1] + b.layer[0].bytes[2] - 2, NULL, false, 0, NULL, 0, 0}, PI_ERR_FORMAT,
         PI_KEY_BUNDLE_STRIDE},
        {good, {PI_KEY_BUNDLE_STRIDE, 0, NULL, true, 0, NULL, 0, 0}, PI_ERR_NOT_FOUND, PI_KEY_BUNDLE_STRIDE},
        {good, {NULL, 0, NULL, false, b.n_ff - 1, NULL, 0, 0}, PI_ERR_FORMAT, "blk.0.ffn_bundle"},
        {good, {NULL, 0, NULL, false, b.n_ff - 1, NULL, 0, 0}, PI_ERR_FORMAT, PI_KEY_BUNDLE_N_FF},
        {good, {PI_KEY_BUNDLE_N_FF, (uint64_t)b.n_ff * 2, NULL, false, 0, NULL, 0, 0}, PI_ERR_FORMAT, PI_KEY_BUNDLE_N_FF},
        {good, {PI_KEY_BUNDLE_N_EMBD, 64, NULL, false, 0, NULL, 0, 0}, PI_ERR_FORMAT, PI_KEY_BUNDLE_N_EMBD},
        {good, {PI_KEY_BUNDLE_DOWN_OFFSET, b.layer[0].off[PI_BUNDLE_UP], NULL, false, 0, NULL, 0, 0}, PI_ERR_FORMAT, PI_KEY_BUNDLE_DOWN_OFFSET},
        {good, {PI_KEY_BUNDLE_DOWN_OFFSET, b.stride - 1, NULL, false, 0, NULL, 0, 0}, PI_ERR_FORMAT, PI_KEY_BUNDLE_DOWN_OFFSET},
        {good, {PI_KEY_BUNDLE_GATE_TYPE, PI_TYPE_I8, NULL, false, 0, NULL, 0, 0}, PI_ERR_FORMAT, PI_KEY_BUNDLE_GATE_TYPE},
        {good, {PI_KEY_BUNDLE_UP_TYPE, 999, NULL, false, 0, NULL, 0, 0}, PI_ERR_FORMAT, PI_KEY_BUNDLE_UP_TYPE},
        {good, {PI_KEY_BUNDLE_ALIGN, 3, NULL, false, 0, NULL, 0, 0}, PI_ERR_FORMAT, PI_KEY_BUNDLE_ALIGN},
        {good, {PI_KEY_BUNDLE_VERSION, PI_BUNDLE_VERSION_MIXED + 1, NULL, false, 0, NULL, 0, 0}, PI_ERR_UNSUPPORTED, PI_KEY_BUNDLE_VERSION},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_refused(cases[i].file, bad, &cases[i].c, cases[i].want, cases[i].needle);

    /* a bundle file of a SiLU model is refused on load too */
    corruption silu = {"pinfer.ffn_activation", 0, "silu", false, 0, NULL, 0, 0};
    expect_refused(good, bad, &silu, PI_ERR_FORMAT, "SiLU");
    pi_bundle_layout_free(&b);
    unlink(src);
    unlink(good);
    unlink(packed);
}

int main(void) {
    g_emulated = t_emulated();
    pi_genmodel_params p;

    /* ReLU, F32, no ffn_down_t: the down part is ffn_down transposed (exact) */
    small_model(&p, PI_TYPE_F32, PI_ACT_RELU);
    test_model("relu-f32", &p);

    /* ReLU, Q8_0, no ffn_down_t: transposed and requantized once, as
       pi_lm_make_down_t does */
    small_model(&p, PI_TYPE_Q8_0, PI_ACT_RELU);
    p.seed = 3;
    test_model("relu-q8_0", &p);

    /* dReLU, Q4_0, planted sparsity: the file's ffn_down_t, predictors */
    small_model(&p, PI_TYPE_Q4_0, PI_ACT_DRELU);
    p.n_embd = 256, p.n_head = 8, p.n_head_kv = 4, p.n_ff = 512, p.n_vocab = 1024;
    p.embd_type = p.output_type = PI_TYPE_F16;
    p.active = 0.2;
    p.skew = 1.0;
    p.predictor = true;
    p.pred_type = PI_TYPE_Q8_0;
    test_model("drelu-q4_0", &p);

    test_refusals();
    test_moe();
    return t_done("test_bundle");
}
