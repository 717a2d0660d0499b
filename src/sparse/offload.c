/*
 * offload.c — loading a bundle file under a memory budget: charging and
 * reading the fixed region, choosing the split between resident hot
 * prefixes and the neuron cache, reading the hot prefixes.
 */
#include "offload.h"

#include "base/log.h"
#include "base/mapfile.h"
#include "base/units.h"
#include "ffn_sparse.h"
#include "gguf/names.h"
#include "kernels/validate.h"
#include "model/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))
#define STREAM_ROWS 512       /* bundles per prompt-streaming buffer: a multiple of the matmul block */
#define MIN_PIECE 8           /* bundles per streaming buffer at least, where the neuron cache is small */
#define HOT_READ_BYTES (8u << 20) /* hot prefixes are read in pieces of this size */

static bool in_mapping(const pi_lm *m, const void *p) {
    const uint8_t *b = pi_gguf_base(m->gguf);
    return b && (const uint8_t *)p >= b && (const uint8_t *)p < b + pi_gguf_file_size(m->gguf);
}

static size_t weight_bytes(const pi_weight *w) {
    return w->row_bytes * (size_t)(w->ne[1] * w->ne[2] * w->ne[3]);
}

/* The weights that stay resident, in a fixed order; the output head only
   with `head` (else it stays on flash). */
static int fixed_weights(pi_lm *m, pi_weight **ws, int max, bool head) {
    int n = 0;
#define ADD(w) \
    do { \
        if ((w)->data && in_mapping(m, (w)->data) && n < max) ws[n++] = (w); \
    } while (0)
    ADD(&m->output_norm);
    if (head) ADD(&m->output);
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        pi_layer *l = &m->layers[il];
        ADD(&l->attn_norm);
        ADD(&l->wq);
        ADD(&l->wk);
        ADD(&l->wv);
        ADD(&l->wo);
        ADD(&l->ffn_norm);
        ADD(&l->fc1);
        ADD(&l->fc2);
        ADD(&l->ffn_gate_inp);
        ADD(&l->fc1_exps);
        ADD(&l->fc2_exps);
    }
#undef ADD
    return n;
}

/* The largest predictor rank of any layer; 1 without predictors. */
static int64_t max_rank(const pi_lm *m) {
    const int64_t rank = pi_sparse_predictor_rank(m);
    return rank > 0 ? rank : 1;
}

static size_t batch_bytes(int64_t F) {
    return (size_t)F * (2 * sizeof(int64_t) + 3 * sizeof(int32_t) + 1 + sizeof(pi_io_req) + sizeof(struct iovec));
}

static void batch_free(pi_read_batch *b) {
    free(b->slot);
    free(b->neuron);
    free(b->run_of);
    free(b->run_done);
    free(b->run_first);
    free(b->run_len);
    free(b->reqs);
    free(b->iov);
}

/* Tables for up to F bundles; false when out of memory. */
static bool batch_alloc(pi_read_batch *b, int64_t F) {
    b->layer = -1;
    b->slot = malloc((size_t)F * sizeof *b->slot);
    b->neuron = malloc((size_t)F * sizeof *b->neuron);
    b->run_of = malloc((size_t)F * sizeof *b->run_of);
    b->run_done = malloc((size_t)F * sizeof *b->run_done);
    b->run_first = malloc((size_t)F * sizeof *b->run_first);
    b->run_len = malloc((size_t)F * sizeof *b->run_len);
    b->reqs = malloc((size_t)F * sizeof *b->reqs);
    b->iov = malloc((size_t)F * sizeof *b->iov);
    return b->slot && b->neuron && b->run_of && b->run_done && b->run_first && b->run_len && b->reqs && b->iov;
}

/* The streamed down projection's partials and sums (stream_acc), and the
   cache slots they take when lent. */
static size_t stream_acc_bytes(const pi_lm *m) { return 2 * PI_MAX_BATCH * (size_t)m->hp.n_embd * sizeof(float); }
static int64_t acc_lent_slots(const pi_lm *m, size_t stride) {
    return (int64_t)((stream_acc_bytes(m) + stride - 1) / stride);
}
/* One bit per bundle: checked once (pi_offload_check_bundle). */
static size_t checked_bytes(int64_t units, int64_t n_ff) { return (size_t)((units * n_ff + 63) / 64) * 8; }
/* A mixture's routed experts' outputs for each token (mixed in routing
   order at the end). */
static size_t moe_out_bytes(const pi_lm *m) {
    const size_t used = m->hp.n_expert ? (size_t)m->hp.n_expert_used : 0;
    return used * PI_MAX_BATCH * (size_t)m->hp.n_embd * sizeof(float);
}

pi_status pi_offload_measure(pi_lm *m, int64_t n_ctx, int max_merge, size_t align, pi_budget_needs *z) {
    memset(z, 0, sizeof *z);
    if (!m->bundled || !m->layers[0].bundle.present)
        return pi_error(PI_ERR_INVALID, "%s: not a bundle file", m->path);
    const pi_hparams *hp = &m->hp;
    const int64_t F = hp->n_ff, E = hp->n_embd, U = pi_ffn_units(hp);
    z->n_layer = U; /* FFN units: a mixture's experts each hold bundles as a dense layer does */
    z->n_expert = hp->n_expert;
    z->n_expert_used = hp->n_expert ? hp->n_expert_used : 0;
    z->n_ff = F;
    z->n_embd = E;
    z->n_ctx = n_ctx;
    if (max_merge <= 0) max_merge = 16;
    if (align < 4096) align = 4096;
    pi_weight *ws[1024];
    int nw = fixed_weights(m, ws, 1024, true);
    for (int i = 0; i < nw; i++) {
        z->fixed += ALIGN_UP(weight_bytes(ws[i]), 64);
        if (ws[i]->ne[1] > 1) z->fixed_by_type[ws[i]->type] += weight_bytes(ws[i]);
        if (ws[i] == &m->output && !m->tied_output && m->output.data != m->tok_embd.data) {
            z->head_flash = ALIGN_UP(weight_bytes(ws[i]), 64);
            z->head_n_rows = ws[i]->ne[1];
            z->head_row_bytes = ws[i]->row_bytes;
        }
    }
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const pi_layer *l = &m->layers[il];
        const pi_weight *pw[4] = {&l->fc1, &l->fc2, &l->fc1_exps, &l->fc2_exps};
        for (int k = 0; k < 4; k++)
            if (pw[k]->data) z->pred_by_type[pw[k]->type] += weight_bytes(pw[k]);
    }
    for (int t = 0; t < PI_TYPE_COUNT; t++) z->fixed_by_type[t] -= z->pred_by_type[t];
    z->stride = m->layers[0].bundle.stride;
    /* layers may differ in their parts' types (Q4_K_M): the costs take each
       part's mean size and the type most layers have, memory the largest */
    int64_t n_of[3][PI_TYPE_COUNT] = {{0}};
    uint64_t sum[3] = {0};
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const pi_bundle_parts *p = &m->layers[il].bundle.parts;
        const size_t b = p->bytes[0] + p->bytes[1] + p->bytes[2];
        if (b > z->bundle_mem) z->bundle_mem = b;
        for (int k = 0; k < 3; k++) sum[k] += p->bytes[k], n_of[k][p->type[k]]++;
    }
    for (int k = 0; k < 3; k++) {
        z->part_bytes[k] = (size_t)((sum[k] + (uint64_t)hp->n_layer / 2) / (uint64_t)hp->n_layer);
        for (int t = 0; t < PI_TYPE_COUNT; t++)
            if (n_of[k][t] > n_of[k][z->part_type[k]]) z->part_type[k] = (pi_type)t;
    }
    z->embd_on_flash = m->tok_embd.data != m->output.data;
    const size_t embd_buf = ALIGN_UP(m->tok_embd.row_bytes, align) + align;
    const int64_t stream_rows = STREAM_ROWS < F ? STREAM_ROWS : F;
    /* the step's tables and read batch, the lookahead's vectors, pending
       list and two read batches, and the bundles' checked bits */
    const int64_t rank = max_rank(m);
    const size_t tables = (size_t)F * (2 * sizeof(int64_t) + sizeof(uint64_t)) + 3 * batch_bytes(F) +
                          (size_t)(E + rank + F) * sizeof(float) + (size_t)F * (sizeof(int64_t) + sizeof(int32_t)) +
                          checked_bytes(U, F);
    z->io = embd_buf + tables;
    z->session = pi_state_bytes_ex(m, n_ctx, PI_MAX_BATCH, stream_rows) + pi_sparse_ffn_bytes(m) + moe_out_bytes(m);
    z->kv = pi_state_kv_bytes(m, n_ctx);
    z->min_slots = 2 * ((F + 63) / 64) + max_merge;
    z->max_merge = max_merge;
    /* two streaming buffers and a prompt's partial sums, lent by the cache:
       at least MIN_PIECE bundles, or a row of a head on flash with its
       alignment, per buffer */
    const int64_t acc_slots = acc_lent_slots(m, z->stride);
    int64_t piece = MIN_PIECE < stream_rows ? MIN_PIECE : stream_rows;
    const int64_t head_row = z->head_flash ? (int64_t)((z->head_row_bytes + 2 * align - 1) / z->stride) + 1 : 0;
    piece = head_row > piece ? head_row : piece;
    z->lend_slots = acc_slots + 2 * stream_rows;
    z->lend_min = acc_slots + 2 * piece;
    z->min_cold = pi_ncache_footprint(U, F, z->stride, z->min_slots > z->lend_min ? z->min_slots : z->lend_min);
    z->minimum = z->fixed + z->session + z->io + z->min_cold;
    return PI_OK;
}

void pi_offload_lend(pi_offload *o, bool sums) {
    const int64_t acc = sums ? o->acc_slots : 0, want = acc + 2 * o->stream_rows, have = pi_ncache_slots(o->cache);
    o->piece_rows = ((have < want ? have : want) - acc) / 2; /* at least lend_min's pieces: the loader's floor */
    uint8_t *p = pi_ncache_lend(o->cache, acc + 2 * o->piece_rows);
    const size_t piece_bytes = (size_t)o->piece_rows * o->stride;
    o->stream_buf[0] = p;
    o->stream_buf[1] = p + piece_bytes;
    o->stream_acc = sums ? (float *)(void *)(p + 2 * piece_bytes) : NULL;
}

void pi_offload_take_back(pi_offload *o) {
    pi_ncache_take_back(o->cache);
    o->stream_buf[0] = o->stream_buf[1] = NULL;
    o->stream_acc = NULL;
    o->piece_rows = 0;
}

void pi_offload_free(pi_offload *o) {
    if (!o) return;
    pi_io_close(o->io);
    pi_io_close(o->head_io);
    pi_ncache_free(o->cache);
    pi_huge_free(o->hot_arena, o->hot_bytes);
    pi_huge_free(o->fixed_arena, o->fixed_bytes);
    pi_huge_free(o->head_res, o->head_res_bytes);
    free(o->hot);
    free(o->hot_w);
    free(o->bundle_off);
    free(o->parts);
    free(o->embd_buf);
    free(o->moe_out);
    free(o->miss);
    free(o->ready);
    batch_free(&o->rd);
    free(o->tags);
    free(o->checked);
    free(o->la_x);
    free(o->la_u);
    free(o->la_z);
    batch_free(&o->la[0]);
    batch_free(&o->la[1]);
    free(o->pend);
    free(o->pend_run);
    free(o->path);
    free(o);
}

/* A mixture's activation counts per unit (blk.N.ffn_act_count, I32
   [n_ff * n_expert], tokens in which each expert's neuron fired: routing
   popularity times the neuron's own frequency), or NULL when the file has
   none for some layer. Owned by the caller. */
static int32_t *unit_counts(const pi_lm *m) {
    const int64_t L = m->hp.n_layer, XF = m->hp.n_ff * m->hp.n_expert;
    int32_t *c = m->hp.n_expert ? malloc((size_t)(L * XF) * sizeof *c) : NULL;
    for (int64_t il = 0; c && il < L; il++) {
        char nm[PI_NAME_MAX];
        snprintf(nm, sizeof nm, PI_TN_FFN_ACT_COUNT, (int)il);
        const pi_gguf_tensor *t = pi_gguf_find_tensor(m->gguf, nm);
        if (!t || t->type != PI_TYPE_I32 || t->nbytes != (uint64_t)XF * 4) {
            free(c);
            return NULL;
        }
        memcpy(c + il * XF, t->data, (size_t)XF * 4);
    }
    return c;
}

/* Spread n_hot resident neurons over a mixture's units by their counts: the
   most frequently active neurons of the whole model, as prefixes (each
   expert's neurons in its hotness order, as convert or gen-model stored
   them): hot[u] = the neurons of u counted at least c, for the smallest c
   that fits. A popular expert gets a longer prefix than a rare one. */
static void hot_by_counts(const int32_t *counts, int64_t U, int64_t F, int64_t n_hot, int64_t *hot) {
    int64_t lo = 0, hi = INT32_MAX; /* the answer c lies in [lo, hi]: count(>= hi) fits */
    while (lo < hi) {
        const int64_t c = lo + (hi - lo) / 2;
        int64_t n = 0;
        for (int64_t i = 0; i < U * F; i++) n += counts[i] >= c && counts[i] > 0;
        if (n <= n_hot) hi = c;
        else lo = c + 1;
    }
    for (int64_t u = 0; u < U; u++) {
        int64_t h = 0;
        while (h < F && counts[u * F + h] >= lo && counts[u * F + h] > 0) h++;
        hot[u] = h - h % 32 > 0 ? h - h % 32 : 0;
    }
}

static void *aligned(size_t align, size_t bytes) {
    void *p = NULL;
    return posix_memalign(&p, align < 64 ? 64 : align, bytes ? bytes : align) ? NULL : p;
}

pi_status pi_offload_check_bundle(pi_offload *o, int64_t u, int64_t neuron, const uint8_t *bundle) {
    static const char *const part[3] = {"gate", "up", "down"};
    const uint64_t bit = (uint64_t)(u * o->n_ff + neuron);
    if (o->checked[bit / 64] >> (bit % 64) & 1) return PI_OK;
    const pi_bundle_parts *pt = &o->parts[u];
    for (int k = 0; k < 3; k++) {
        float v = 0.0f;
        const int64_t bad = pi_rows_bad_scale(pt->type[k], bundle + pt->off[k], o->n_embd, 1, pt->bytes[k], &v);
        if (bad >= 0) {
            snprintf(o->refusal, sizeof o->refusal, "%s: bundle %lld of FFN unit %lld: the %s part (%s) has a non-finite "
                     "scale (%g) in block %lld", o->path, (long long)neuron, (long long)u, part[k],
                     pi_type_name(pt->type[k]), (double)v, (long long)bad);
            return pi_error(PI_ERR_FORMAT, "%s", o->refusal);
        }
    }
    o->checked[bit / 64] |= (uint64_t)1 << (bit % 64);
    o->st.checked++;
    return PI_OK;
}

/* Read the first hot[il] bundles of every layer into the resident region,
   de-interleaved into gate, up and down_t matrices. */
static pi_status read_hot(pi_offload *o, uint8_t *bounce, size_t bounce_bytes) {
    uint8_t *p = o->hot_arena;
    for (int64_t il = 0; il < o->n_layer; il++) {
        const int64_t H = o->hot[il];
        const pi_bundle_parts *pt = &o->parts[il];
        uint8_t *dst[3];
        for (int k = 0; k < 3; k++) {
            dst[k] = p;
            o->hot_w[3 * il + k] = (pi_weight){p, pt->type[k], {o->n_embd, H, 1, 1}, pt->bytes[k], {0, NULL}};
            p += ALIGN_UP(pt->bytes[k] * (size_t)H, 64);
        }
        const int64_t per = (int64_t)(bounce_bytes / o->stride);
        for (int64_t i0 = 0; i0 < H; i0 += per) {
            int64_t n = H - i0 < per ? H - i0 : per;
            pi_status st = pi_io_read(o->io, o->bundle_off[il] + i0 * (int64_t)o->stride, bounce, (size_t)n * o->stride);
            if (st) return st;
            for (int64_t i = 0; i < n; i++)
                if ((st = pi_offload_check_bundle(o, il, i0 + i, bounce + (size_t)i * o->stride))) return st;
            for (int64_t i = 0; i < n; i++)
                for (int k = 0; k < 3; k++)
                    memcpy(dst[k] + (size_t)(i0 + i) * pt->bytes[k], bounce + (size_t)i * o->stride + pt->off[k],
                           pt->bytes[k]);
        }
    }
    return PI_OK;
}

pi_status pi_offload_load(const char *path, const pi_offload_opts *opt, pi_lm **model, pi_offload **out) {
    *model = NULL;
    *out = NULL;
    pi_lm *m = NULL;
    /* unchecked: every weight used is read below or from flash, and checked there */
    pi_status st = pi_lm_load_ex(path, PI_MAP_FILE, PI_LOAD_FFN_ON_FLASH | PI_LOAD_UNCHECKED, &m);
    if (st) return st;
    if (!m->bundled) {
        pi_lm_free(m);
        return pi_error(PI_ERR_INVALID, "%s: --mem-budget needs a bundle file: convert it with "
                        "pinfer convert -m %s --bundle -o OUT.gguf", path, path);
    }
    if (!m->bundle_align) {
        pi_lm_free(m);
        return pi_error(PI_ERR_INVALID, "%s: its bundles are packed (pinfer.bundle.align 0), which O_DIRECT reads "
                        "cannot address one by one: convert with --bundle-align 4096", path);
    }
    pi_offload *o = calloc(1, sizeof *o);
    if (!o) {
        pi_lm_free(m);
        return pi_error(PI_ERR_NOMEM, "out of memory");
    }
    const pi_hparams *hp = &m->hp;
    const int64_t L = pi_ffn_units(hp), F = hp->n_ff, E = hp->n_embd, X = hp->n_expert ? hp->n_expert : 1;
    o->path = strdup(path);
    o->n_layer = L; /* units: every hot prefix, cache tag and file offset below is per unit */
    o->n_ff = F;
    o->n_embd = E;
    o->budget.limit = opt->mem_budget;
    o->max_merge = opt->max_merge > 0 ? opt->max_merge : 16;
    o->stride = m->layers[0].bundle.stride;
    if (!(o->hot = calloc((size_t)L, sizeof *o->hot)) || !(o->hot_w = calloc((size_t)L * 3, sizeof *o->hot_w)) ||
        !(o->bundle_off = calloc((size_t)L, sizeof *o->bundle_off)) || !(o->parts = calloc((size_t)L, sizeof *o->parts)) ||
        !o->path) {
        st = pi_error(PI_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int64_t u = 0; u < L; u++) o->parts[u] = m->layers[u / X].bundle.parts;
    for (int64_t u = 0; u < L; u++) /* expert x's bundles follow the layer's earlier experts' */
        o->bundle_off[u] = m->layers[u / X].bundle.file_off + (u % X) * F * (int64_t)o->stride;

    /* a layer's step issues at most one read per neuron at once, and the
       lookahead as many again for this layer and for the next */
    pi_io_opts io = opt->io;
    if (io.max_pending < 3 * F) io.max_pending = (int)(3 * F);
    if ((st = pi_io_open(path, &io, &o->io))) goto fail;
    const size_t align = pi_io_align(o->io) > 4096 ? pi_io_align(o->io) : 4096;
    if (o->stride % pi_io_align(o->io) || (size_t)o->bundle_off[0] % pi_io_align(o->io)) {
        st = pi_error(PI_ERR_INVALID, "%s: bundles of %zu bytes are not aligned to the device's %zu-byte blocks",
                      path, o->stride, pi_io_align(o->io));
        goto fail;
    }

    /* 1. fixed region, KV cache, scratch, I/O buffers and tables */
    pi_budget_needs z;
    if ((st = pi_offload_measure(m, opt->n_ctx, o->max_merge, align, &z))) goto fail;
    o->head_on_flash = pi_budget_head_on_flash(&z, o->budget.limit);
    pi_weight *ws[1024];
    int nw = fixed_weights(m, ws, 1024, !o->head_on_flash);
    const size_t fixed = z.fixed;
    o->embd_on_flash = z.embd_on_flash;
    o->embd_buf_bytes = ALIGN_UP(m->tok_embd.row_bytes, align) + align;
    o->stream_rows = STREAM_ROWS < F ? STREAM_ROWS : F;
    o->acc_slots = acc_lent_slots(m, o->stride);
    const int64_t min_slots = z.min_slots > z.lend_min ? z.min_slots : z.lend_min;
    const size_t min_cold = z.min_cold;
    const uint64_t sess = z.session, kv = z.kv, io_bytes = z.io, minimum = z.minimum;
    if (o->budget.limit && o->budget.limit < minimum) {
        st = pi_budget_below_minimum(&z, o->budget.limit, opt->n_ctx);
        goto fail;
    }
    if ((st = pi_budget_charge(&o->budget, PI_MEM_FIXED, fixed, "the fixed region")) ||
        (st = pi_budget_charge(&o->budget, PI_MEM_KV, kv, "the KV cache")) ||
        (st = pi_budget_charge(&o->budget, PI_MEM_SCRATCH, sess - kv, "the session's scratch")) ||
        (st = pi_budget_charge(&o->budget, PI_MEM_IO, io_bytes, "the I/O buffers")))
        goto fail;
    if (o->head_on_flash && opt->head_rows > 0) { /* a prefix of the head's rows stays */
        o->head_res_rows = opt->head_rows < m->output.ne[1] ? opt->head_rows : m->output.ne[1];
        o->head_res_bytes = pi_budget_head_rows_bytes(m->output.row_bytes, o->head_res_rows);
        if ((st = pi_budget_charge(&o->budget, PI_MEM_FIXED, o->head_res_bytes, "the output head's resident rows")))
            goto fail;
    }

    /* 2. the split of what is left: the neuron cache gets room for about one
       layer's selection (15% of its neurons) beyond its minimum, at most a
       quarter of what is left; the hot prefixes get the rest, uniform across
       layers (a plan overrides both). A static prefix in hotness order beats
       LRU when activations are independent across tokens: measured on a
       planted 7b-l8 model at 570 MiB, giving the cache 64 or 128 MiB
       instead of its minimum lowered the share of neurons served from
       memory from 63% to 57% and 47%. */
    const size_t bundle_mem = z.bundle_mem; /* the largest layer's: a split by counts may favour any layer */
    uint64_t left = pi_budget_left(&o->budget);
    if (left == UINT64_MAX) left = (uint64_t)L * (uint64_t)F * (bundle_mem + o->stride); /* unlimited: all hot */
    int64_t slots = opt->cold_slots;
    if (opt->hot) {
        for (int64_t il = 0; il < L; il++) o->hot[il] = opt->hot[il] < 0 ? 0 : opt->hot[il] > F ? F : opt->hot[il];
    } else {
        uint64_t cold = min_cold + (uint64_t)((double)F * 0.15) * o->stride;
        if (cold > min_cold + left / 4) cold = min_cold + left / 4;
        if (opt->cold_cache_bytes) cold = opt->cold_cache_bytes;
        if (cold < min_cold) cold = min_cold;
        int64_t H = cold < left ? (int64_t)((left - cold) / ((uint64_t)L * (bundle_mem + 3 * 64))) : 0;
        H = H > F ? F : H;
        int32_t *counts = H < F ? unit_counts(m) : NULL;
        if (counts) {
            hot_by_counts(counts, L, F, H * L, o->hot);
        } else {
            H -= H % 32;
            for (int64_t il = 0; il < L; il++) o->hot[il] = H;
        }
        free(counts);
    }
    size_t hot_bytes = 0;
    for (int64_t il = 0; il < L; il++)
        for (int k = 0; k < 3; k++) hot_bytes += ALIGN_UP(o->parts[il].bytes[k] * (size_t)o->hot[il], 64);
    if ((st = pi_budget_charge(&o->budget, PI_MEM_HOT, hot_bytes, "the hot neurons"))) goto fail;
    if (!slots) {
        left = pi_budget_left(&o->budget);
        if (left == UINT64_MAX) slots = min_slots + F;
        else {
            size_t per = pi_ncache_footprint(1, 0, o->stride, 1) + 1;
            slots = (int64_t)((left - (left > (uint64_t)L * F * 4 ? (uint64_t)L * F * 4 : left)) / per);
        }
        int64_t cold_total = 0;
        for (int64_t il = 0; il < L; il++) cold_total += F - o->hot[il];
        if (slots > cold_total + z.min_slots) slots = cold_total + z.min_slots;
    }
    if (slots < min_slots) slots = min_slots;
    if ((st = pi_budget_charge(&o->budget, PI_MEM_COLD, pi_ncache_footprint(L, F, o->stride, slots),
                               "the neuron cache")))
        goto fail;

    /* 3. allocate, read the fixed region and the hot prefixes */
    if ((st = pi_ncache_create(L, F, o->stride, slots, align, &o->cache))) goto fail;
    pi_ncache_set_policy(o->cache, opt->policy);
    size_t arena_bytes;
    void *arena = pi_ncache_arena(o->cache, &arena_bytes);
    if ((st = pi_io_register(o->io, arena, arena_bytes))) goto fail;
    o->fixed_bytes = fixed;
    o->hot_bytes = hot_bytes;
    o->fixed_arena = fixed ? pi_huge_alloc(fixed) : NULL;
    o->hot_arena = hot_bytes ? pi_huge_alloc(hot_bytes) : NULL;
    o->embd_buf = aligned(align, o->embd_buf_bytes);
    const size_t moe_bytes = moe_out_bytes(m);
    o->moe_out = moe_bytes ? aligned(64, moe_bytes) : NULL;
    o->miss = malloc((size_t)F * sizeof *o->miss);
    o->ready = malloc((size_t)F * sizeof *o->ready);
    const bool rd_ok = batch_alloc(&o->rd, F);
    o->tags = malloc((size_t)F * sizeof *o->tags);
    o->checked = calloc(1, checked_bytes(L, F));
    o->la[0].layer = o->la[1].layer = -1;
    o->lookahead = opt->lookahead && m->has_predictor;
    o->la_guess = -1;
    if (o->lookahead) {
        const int64_t rank = max_rank(m);
        o->la_x = malloc((size_t)E * sizeof *o->la_x);
        o->la_u = malloc((size_t)rank * sizeof *o->la_u);
        o->la_z = malloc((size_t)F * sizeof *o->la_z);
        o->pend = malloc((size_t)F * sizeof *o->pend);
        o->pend_run = malloc((size_t)F * sizeof *o->pend_run);
        const bool ok0 = batch_alloc(&o->la[0], F), ok1 = batch_alloc(&o->la[1], F);
        const bool ok = o->la_x && o->la_u && o->la_z && o->pend && o->pend_run && ok0 && ok1;
        if (!ok) {
            st = pi_error(PI_ERR_NOMEM, "cannot allocate the lookahead's tables");
            goto fail;
        }
    }
    o->head_res = o->head_res_bytes ? pi_huge_alloc(o->head_res_bytes) : NULL;
    if ((fixed && !o->fixed_arena) || (hot_bytes && !o->hot_arena) || (o->head_res_bytes && !o->head_res) ||
        !o->embd_buf ||
        (moe_bytes && !o->moe_out) || !o->miss || !o->ready || !rd_ok ||
        !o->tags || !o->checked) {
        st = pi_error(PI_ERR_NOMEM, "cannot allocate the %.0f MiB the budget allows",
                      (double)pi_budget_used(&o->budget) / (1 << 20));
        goto fail;
    }
    const uint8_t *base = pi_gguf_base(m->gguf);
    uint8_t *p = o->fixed_arena;
    for (int i = 0; i < nw; i++) {
        size_t nb = weight_bytes(ws[i]);
        if ((st = pi_io_read(o->io, (int64_t)((const uint8_t *)ws[i]->data - base), p, nb))) goto fail;
        ws[i]->data = p;
        if ((st = pi_check_scales(path, ws[i]->name, ws[i]->type, p, ws[i]->ne[0], 0,
                                  ws[i]->ne[1] * ws[i]->ne[2] * ws[i]->ne[3], ws[i]->row_bytes)))
            goto fail;
        p += ALIGN_UP(nb, 64);
    }
    if (m->tied_output) m->tok_embd.data = m->output.data;
    if (o->embd_on_flash) o->embd_off = (int64_t)((const uint8_t *)m->tok_embd.data - base);
    if (o->head_on_flash) { /* read a piece at a time by its own handle (offload.h) */
        o->head_off = (int64_t)((const uint8_t *)m->output.data - base);
        m->output.data = NULL;
        if (o->head_res_rows) {
            const size_t nb = m->output.row_bytes * (size_t)o->head_res_rows;
            if ((st = pi_io_read(o->io, o->head_off, o->head_res, nb)) ||
                (st = pi_check_scales(path, m->output.name, m->output.type, o->head_res, m->output.ne[0], 0,
                                      o->head_res_rows, m->output.row_bytes)))
                goto fail;
        }
        o->head_piece = opt->head_piece;
        if ((st = pi_io_open(path, &opt->io, &o->head_io))) goto fail;
        char kept[96] = "";
        if (o->head_res_rows)
            snprintf(kept, sizeof kept, " but for its first %lld of %lld rows (%s)", (long long)o->head_res_rows,
                     (long long)m->output.ne[1], PI_BYTES(o->head_res_bytes));
        PI_LOGI("%s: the output head (%s) stays on flash%s and is read every token: the budget is below the "
                "minimum with it resident", path, PI_BYTES(z.head_flash), kept);
    }
    pi_offload_lend(o, false); /* the cache's memory is the hot rows' bounce buffer */
    st = read_hot(o, o->stream_buf[0], (size_t)o->piece_rows * o->stride);
    pi_offload_take_back(o);
    if (st) goto fail;
    pi_io_reset_stats(o->io);
    pi_ncache_reset_stats(o->cache);
    *model = m;
    *out = o;
    return PI_OK;
fail:
    pi_offload_free(o);
    pi_lm_free(m);
    return st;
}
