/*
 * ffn_offload.c — one step of the FFN read from flash: the sparse FFN with
 * its rows in the hot region, the neuron cache or on flash; the dense FFN
 * streamed for prompts; embedding rows read one at a time (ffn_offload.h).
 */
#include "ffn_offload.h"

#include "base/timer.h"
#include "kernels/validate.h"
#include "model/session.h"

#include <stdlib.h>
#include <string.h>

#define REAP_BATCH 16 /* reads to wait for at once: one wake-up per batch, not per read */
#define LA_TAG ((uint64_t)1 << 62) /* a lookahead read's tag: LA_TAG | its index */

typedef struct {
    pi_sparse_ffn *sp; /* NULL: dense, every step streams the FFN */
    pi_offload *off;   /* not owned */
} offload_ffn;

/* Read the batch's first n bundles (neurons and slots filled in) for layer
   il: neighbouring neurons in one read of at most max_merge bundles, each
   bundle into its own slot, read i tagged tag | i. Counts the reads. */
static pi_status batch_submit(pi_offload *o, pi_read_batch *b, int64_t il, int64_t n, uint64_t tag) {
    int64_t r = 0;
    for (int64_t k = 0; k < n; k++) {
        if (k > 0 && b->neuron[k] == b->neuron[k - 1] + 1 && b->run_len[r - 1] < o->max_merge) {
            b->run_len[r - 1]++;
        } else {
            b->run_first[r] = k;
            b->run_len[r++] = 1;
        }
        b->run_of[k] = (int32_t)(r - 1);
        b->iov[k] = (struct iovec){pi_ncache_slot(o->cache, b->slot[k]), o->stride};
    }
    uint64_t merged = 0;
    for (int64_t i = 0; i < r; i++) {
        const int64_t k = b->run_first[i];
        b->reqs[i] = (pi_io_req){o->bundle_off[il] + (int64_t)b->neuron[k] * (int64_t)o->stride, &b->iov[k],
                                 b->run_len[i], tag | (uint64_t)i};
        b->run_done[i] = 0;
        merged += b->run_len[i] > 1;
    }
    b->layer = il;
    b->n = n;
    b->runs = r;
    b->done = 0;
    pi_status err = r ? pi_io_submit(o->io, b->reqs, (int)r) : PI_OK;
    if (!err) {
        o->st.reads += (uint64_t)r;
        o->st.merged += merged;
        o->st.bytes += (uint64_t)n * o->stride;
    }
    return err;
}

#define LA_SET_BIT 61 /* which of the two lookahead sets */
#define LA_RUN_MASK (((uint64_t)1 << LA_SET_BIT) - 1)

static int64_t la_left(const pi_read_batch *a) { return a->layer >= 0 ? a->runs - a->done : 0; }

/* Check the bundles read run i of batch b brought (pi_offload_check_bundle). */
static pi_status check_run(pi_offload *o, const pi_read_batch *b, int64_t i) {
    pi_status st = PI_OK;
    for (int32_t j = 0; j < b->run_len[i] && !st; j++) {
        const int64_t k = b->run_first[i] + j;
        st = pi_offload_check_bundle(o, b->layer, b->neuron[k], pi_ncache_slot(o->cache, b->slot[k]));
    }
    return st;
}

/* Reap at least min completions of any kind: lookahead reads are marked
   done in their set, the tags of the step's own reads move to the front of
   o->tags; every bundle read is checked. Returns how many own tags, or -1
   with *err set when the engine failed or a bundle is malformed. */
static int reap(pi_offload *o, int64_t own_left, int min, pi_status *err) {
    int64_t want = own_left + la_left(&o->la[0]) + la_left(&o->la[1]);
    want = want < o->n_ff ? want : o->n_ff; /* the tags array */
    if (want <= 0) return 0;
    const uint64_t t = pi_time_ns();
    pi_pool_park(o->pool);
    const int got = pi_io_reap_min(o->io, o->tags, (int)want, min);
    o->st.io_wait_ns += pi_time_ns() - t;
    if (got < 0) {
        *err = PI_ERR_IO;
        return -1;
    }
    int own = 0;
    pi_status bad = PI_OK;
    for (int g = 0; g < got; g++) {
        const uint64_t tag = o->tags[g];
        if (tag & LA_TAG) {
            pi_read_batch *a = &o->la[(tag >> LA_SET_BIT) & 1];
            a->run_done[tag & LA_RUN_MASK] = 1;
            a->done++;
            if (!bad) bad = check_run(o, a, (int64_t)(tag & LA_RUN_MASK));
        } else {
            o->tags[own++] = tag;
            if (!bad) bad = check_run(o, &o->rd, (int64_t)tag);
        }
    }
    if (bad) {
        *err = bad;
        return -1;
    }
    return own;
}

/* Complete a lookahead set: wait for its reads (the step's own are all
   reaped), then its bundles are ordinary cache entries. After a failed
   read all of them are forgotten. */
static pi_status la_finish(pi_offload *o, pi_read_batch *a) {
    if (a->layer < 0) return PI_OK;
    pi_status err = PI_OK;
    while (a->done < a->runs)
        if (reap(o, 0, 1, &err) < 0) break;
    for (int64_t k = 0; k < a->n; k++) {
        if (err) pi_ncache_drop(o->cache, a->slot[k]);
        else pi_ncache_settle(o->cache, a->slot[k]);
    }
    a->layer = -1;
    return err;
}

static pi_status la_finish_all(pi_offload *o) {
    pi_status e0 = la_finish(o, &o->la[0]), e1 = la_finish(o, &o->la[1]);
    return e0 ? e0 : e1;
}

/* After a failed step: reap what is still in flight on io, so that nothing
   lands in buffers given back to the neuron cache. */
static void drain(pi_io *io) {
    uint64_t tags[16];
    while (pi_io_in_flight(io) > 0 && pi_io_reap(io, tags, 16, true) > 0) {}
}

/* The read that brings layer `la->layer`'s neuron i, or -1 (binary search:
   the set's neurons ascend). */
static int32_t la_run_of(const pi_read_batch *a, int64_t i) {
    int64_t lo = 0, hi = a->n;
    while (lo < hi) {
        const int64_t mid = (lo + hi) / 2;
        if (a->neuron[mid] < i) lo = mid + 1;
        else hi = mid;
    }
    return lo < a->n && a->neuron[lo] == i ? a->run_of[lo] : -1;
}

/* Lookahead for the unit the next step computes (nx: layer il's expert
   x, input in), called while this step computes: its predictor on in, and
   a read for each predicted neuron (and each of the sparse FFN's fixed
   prefix) that is neither resident nor cached, into slots allocated now in
   the other set; they stay pinned until that unit is done with them.
   Neighbours merge as in the step's own reads; at most max neurons. A full
   queue skips the lookahead: it never changes what the unit computes, only
   when its rows are read. */
static pi_status la_issue(const pi_sparse_ffn *f, pi_offload *o, pi_state *s, const pi_la_target *nx,
                          int64_t max) {
    const pi_lm *m = s->m;
    const int64_t F = m->hp.n_ff, jl = pi_ffn_unit(&m->hp, nx->il, nx->x), H = o->hot[jl];
    const int set = o->la_turn ^ 1;
    pi_read_batch *a = &o->la[set];
    if (a->layer >= 0) return PI_OK; /* still in use (cannot happen: the step finished it) */
    if (H >= F) return PI_OK; /* all of it resident: nothing to read, no predictor pass to spend */
    pi_state_input_changed(s);
    pi_sparse_logits_from(s, nx->il, nx->x, nx->in, H, o->la_u, o->la_z); /* the resident prefix is never read */
    pi_state_input_changed(s);
    int64_t split;
    float thr_hot;
    const float thr = pi_sparse_threshold(m, nx->il, nx->x, &split, &thr_hot);
    int64_t n = 0;
    for (int64_t i = H; i < F && n < max; i++) {
        if ((i >= f->hot && o->la_z[i] < (i < split ? thr_hot : thr)) || pi_ncache_contains(o->cache, jl, i))
            continue;
        const int64_t slot = pi_ncache_alloc_ahead(o->cache, jl, i);
        if (slot < 0) break; /* every slot is in use */
        a->slot[n] = slot;
        a->neuron[n++] = (int32_t)i;
    }
    pi_status err = batch_submit(o, a, jl, n, LA_TAG | ((uint64_t)set << LA_SET_BIT));
    if (err) { /* none of them queued */
        for (int64_t k = 0; k < n; k++) pi_ncache_drop(o->cache, a->slot[k]);
        a->layer = -1;
        return err == PI_ERR_FULL ? PI_OK : err;
    }
    o->st.ahead_neurons += (uint64_t)n;
    o->st.ahead_reads += (uint64_t)a->runs;
    return PI_OK;
}

/* The sparse FFN of one token through layer il's expert x (0 for a dense
   layer; FFN unit u) into out, with the rows in the hot region, the neuron
   cache, or on flash. The list is processed in waves of whole down chunks
   (one wave unless the cache cannot hold a unit's misses at once): pin what
   is cached, read the misses, compute the resident and cached neurons while
   the reads run, then each read's neurons as it completes, then the wave's
   chunk partials. The result equals ffn_sparse's bit for bit. */
static pi_status ffn_offload(pi_sparse_ffn *f, pi_offload *o, pi_state *s, int64_t il, int64_t x, float *out,
                             const pi_la_target *next) {
    const pi_hparams *hp = &s->m->hp;
    const int64_t u = pi_ffn_unit(hp, il, x), E = hp->n_embd, Hres = o->hot[u];
    const pi_weight *hw = &o->hot_w[3 * u];
    uint64_t t0 = pi_time_ns();
    const pi_bundle_parts *pt = &o->parts[u];
    f->types = (pi_ffn_types){pt->type[PI_BUNDLE_GATE], pt->type[PI_BUNDLE_UP], pt->type[PI_BUNDLE_DOWN]};
    const int64_t n = pi_sparse_select(f, s, il, x);
    pi_sparse_hot_cluster(f, s, &hw[0], &hw[1], 0);
    for (int64_t k = 0; k < f->hot; k++)
        pi_sparse_set_rows(f, k, NULL, NULL, (const uint8_t *)hw[2].data + (size_t)k * hw[2].row_bytes);
    pi_sparse_job cj = pi_sparse_input(f, s, 0);
    const int64_t q = pi_down_chunk_rows(n, hp->n_ff), n_chunks = (n + q - 1) / q; /* as ffn_sparse's */
    pi_sparse_down dj = {f, E, s->k->axpy_rows[f->types.down]};
    /* this step's lookahead set (reads issued by the step before, for this
       unit or a guess that missed); the other set is completed first */
    pi_read_batch *la = &o->la[o->la_turn], *la_next = &o->la[o->la_turn ^ 1];
    pi_status err = PI_OK;
    if (la->layer >= 0 && la->layer != u) err = la_finish(o, la);
    if (!err && la_next->layer >= 0) err = la_finish(o, la_next);
    if (err) return err;
    for (int64_t c0 = 0; c0 < n_chunks;) {
        int64_t n_ready = 0, n_miss = 0, n_pend = 0, c1 = c0;
        for (; c1 < n_chunks; c1++) {
            const int64_t mark_m = n_miss, mark_r = n_ready, mark_p = n_pend;
            uint64_t resident = 0, hits = 0, aheads = 0;
            int64_t k = c1 * q > f->hot ? c1 * q : f->hot, k_end = (c1 + 1) * q < n ? (c1 + 1) * q : n;
            bool fits = true;
            for (; k < k_end; k++) {
                const int64_t i = f->idx[k];
                if (i < Hres) {
                    pi_sparse_set_rows(f, k, (const uint8_t *)hw[0].data + (size_t)i * hw[0].row_bytes,
                             (const uint8_t *)hw[1].data + (size_t)i * hw[1].row_bytes,
                             (const uint8_t *)hw[2].data + (size_t)i * hw[2].row_bytes);
                    o->ready[n_ready++] = k;
                    resident++;
                    continue;
                }
                bool ahead;
                int64_t slot = pi_ncache_use(o->cache, u, i, &ahead);
                const bool hit = slot >= 0;
                if (!hit && (slot = pi_ncache_alloc(o->cache, u, i)) < 0) {
                    fits = false;
                    break;
                }
                if (!hit) o->rd.slot[n_miss] = slot, o->rd.neuron[n_miss] = (int32_t)i;
                const uint8_t *b = pi_ncache_slot(o->cache, slot);
                pi_sparse_set_rows(f, k, b + pt->off[PI_BUNDLE_GATE], b + pt->off[PI_BUNDLE_UP], b + pt->off[PI_BUNDLE_DOWN]);
                const int32_t run = ahead && la->layer == u ? la_run_of(la, i) : -1;
                if (run >= 0 && !la->run_done[run]) { /* read ahead, still in flight */
                    o->pend[n_pend] = k;
                    o->pend_run[n_pend++] = run;
                } else if (hit) {
                    o->ready[n_ready++] = k; /* computed while the misses are read */
                } else {
                    o->miss[n_miss++] = k;
                }
                hits += hit && !ahead;
                aheads += ahead;
            }
            if (!fits) { /* this chunk does not fit beside the wave: undo its misses */
                for (int64_t m = mark_m; m < n_miss; m++) pi_ncache_drop(o->cache, o->rd.slot[m]);
                n_miss = mark_m;
                n_ready = mark_r;
                n_pend = mark_p;
                break;
            }
            o->st.resident += resident;
            o->st.hits += hits;
            o->st.misses += (uint64_t)(n_miss - mark_m) + aheads; /* read early is still read */
            o->st.ahead_used += aheads;
            if (o->la_start) o->st.ahead_start_used += aheads, o->la_start_used += aheads;
        }
        if (c1 == c0)
            return pi_error(PI_ERR_NOMEM, "%s: the neuron cache (%lld slots) cannot hold one chunk of layer %lld's "
                            "neurons", o->path, (long long)pi_ncache_slots(o->cache), (long long)il);
        err = batch_submit(o, &o->rd, u, n_miss, 0);
        const int64_t n_runs = err ? 0 : o->rd.runs;
        const uint64_t t_issue = pi_time_ns();
        if (o->la_gap_from) { /* the lookahead's reads were in flight since the last layer's own ended */
            o->st.io_busy_ns += t_issue - o->la_gap_from;
            o->la_gap_from = 0;
        }
        /* the next unit's likely misses go out behind this one's, when this
           unit is one wave */
        if (!err && next && c0 == 0 && c1 == n_chunks) err = la_issue(f, o, s, next, INT64_MAX);
        pi_sparse_compute_list(&cj, o->ready, n_ready);
        const bool had_pend = n_pend > 0;
        for (int64_t done = 0; !err && (done < n_runs || n_pend > 0);) {
            const int64_t own_left = n_runs - done;
            const int own = reap(o, own_left, own_left <= 0 ? 1 : own_left < REAP_BATCH ? (int)own_left : REAP_BATCH, &err);
            if (own < 0) break;
            int64_t nr = 0;
            for (int g = 0; g < own; g++)
                for (int32_t b = 0; b < o->rd.run_len[o->tags[g]]; b++)
                    o->ready[nr++] = o->miss[o->rd.run_first[o->tags[g]] + b];
            for (int64_t p = 0; p < n_pend;) /* lookahead reads that completed */
                if (la->run_done[o->pend_run[p]]) {
                    o->ready[nr++] = o->pend[p];
                    o->pend[p] = o->pend[--n_pend];
                    o->pend_run[p] = o->pend_run[n_pend];
                } else {
                    p++;
                }
            pi_sparse_compute_list(&cj, o->ready, nr);
            done += own;
        }
        /* what this layer read ahead and did not select completes before the
           slots are unpinned */
        if (!err && la->layer == u) err = la_finish(o, la);
        if (n_runs > 0 || had_pend) o->st.io_busy_ns += pi_time_ns() - t_issue; /* until the last read's neurons are computed */
        if (err) { /* the slots of this wave's reads hold nothing usable */
            for (int64_t m = 0; m < n_miss; m++) pi_ncache_drop(o->cache, o->rd.slot[m]);
            pi_ncache_next_epoch(o->cache);
            la_finish_all(o);
            return err;
        }
        pi_pool_reduce_f32_chunks(s->pool, n, q, c0, c1, pi_sparse_down_chunk, &dj, E, s->reduce_scratch);
        pi_ncache_next_epoch(o->cache);
        if (la_next->layer >= 0) { /* its reads may still be in flight: keep their slots */
            for (int64_t k2 = 0; k2 < la_next->n; k2++) pi_ncache_pin(o->cache, la_next->slot[k2]);
            if (la_next->done < la_next->runs) o->la_gap_from = pi_time_ns();
        }
        if (c0 > 0 || c1 < n_chunks) o->st.waves++;
        c0 = c1;
    }
    pi_pool_reduce_f32_sum(s->pool, n, q, out, E, s->reduce_scratch);
    pi_sparse_count_list(f, il, n);
    o->la_turn ^= 1; /* the set issued for the next step is its own */
    o->la_start = false;
    o->st.ffn_ns += pi_time_ns() - t0;
    return PI_OK;
}

typedef struct {
    pi_state *s;
    const pi_offload *o;
    const uint8_t *down; /* the piece's first neuron's down row */
    pi_type down_type;
    size_t stride;       /* from one neuron's down row to the next's */
    int64_t i0, rows, q, E;
} stream_down_job;

/* For tokens [b0, b1): add the piece's neurons to the running chunk
   partial, closing a chunk (sum += partial) at each chunk boundary: the
   order of matmul_down_t's reduction, neuron by neuron. */
static void stream_down(void *ctx, int64_t b0, int64_t b1, int tid) {
    (void)tid;
    stream_down_job *j = ctx;
    pi_state *s = j->s;
    pi_axpy_fn axpy = s->k->axpy[j->down_type];
    for (int64_t b = b0; b < b1; b++) {
        float *part = j->o->stream_acc + b * j->E, *sum = j->o->stream_acc + (PI_MAX_BATCH + b) * j->E;
        const float *h = s->hb + b * s->hb_cols; /* the piece's neurons from 0 */
        for (int64_t r = 0; r < j->rows; r++) {
            int64_t i = j->i0 + r;
            if (i % j->q == 0 && i > 0) {
                for (int64_t d = 0; d < j->E; d++) sum[d] += part[d];
                memset(part, 0, (size_t)j->E * sizeof *part);
            }
            if (h[r] != 0.0f) axpy(j->E, h[r], j->down + (size_t)r * j->stride, part);
        }
    }
}

/* Neurons [i0, i0 + rows) of a unit for nt tokens (rows <= the state's
   hb_cols), their gate, up and down rows in g, up and down (down_stride
   bytes apart; g and up from their row 0): act(gate) * up to hb from
   column 0, the down projection into stream_acc (see stream_unit). */
static void stream_piece(pi_offload *o, pi_state *s, const int64_t *rows_of, int64_t nt, const pi_weight *g,
                         const pi_weight *up, const uint8_t *down, pi_type down_type, size_t down_stride, int64_t i0,
                         int64_t rows) {
    const pi_hparams *hp = &s->m->hp;
    const int64_t F = hp->n_ff, E = hp->n_embd, q = (F + PI_DOWN_T_CHUNKS - 1) / PI_DOWN_T_CHUNKS, ld = s->hb_cols;
    if (!rows_of) {
        pi_state_matmul(s, g, 0, rows, s->xb, s->xb_dim, nt, s->hb, ld);
        pi_state_matmul(s, up, 0, rows, s->xb, s->xb_dim, nt, s->hb2, ld);
    } else { /* one token at a time, as the in-memory mixture computes its experts */
        for (int64_t j = 0; j < nt; j++) {
            const float *xin = s->xb + rows_of[j] * s->xb_dim;
            pi_state_matmul(s, g, 0, rows, xin, s->xb_dim, 1, s->hb + j * ld, ld);
            pi_state_matmul(s, up, 0, rows, xin, s->xb_dim, 1, s->hb2 + j * ld, ld);
        }
    }
    for (int64_t b = 0; b < nt; b++) pi_ffn_activate(hp->act, s->hb + b * ld, s->hb2 + b * ld, rows);
    stream_down_job dj = {s, o, down, down_type, down_stride, i0, rows, q, E};
    pi_pool_for(s->pool, nt, 1, stream_down, &dj);
}

/* Unit u's FFN for nt tokens: the rows of xb listed in rows_of, or with
   rows_of NULL rows 0 .. nt - 1 in one batch. The hot prefix from memory,
   then the rest of the unit's bundles streamed through two buffers (the
   next piece is read while this one is computed). Token j's act(gate) * up
   goes to hb row j, its down projection to the partial and sum of
   stream_acc row j (the caller adds them), neuron by neuron in order, so
   the result is the in-memory dense FFN's whatever the hot prefix. */
static pi_status stream_unit(pi_offload *o, pi_state *s, int64_t u, const int64_t *rows_of, int64_t nt) {
    const pi_hparams *hp = &s->m->hp;
    const int64_t F = hp->n_ff, E = hp->n_embd, R = o->piece_rows, H = o->hot[u];
    const pi_bundle_parts *pt = &o->parts[u];
    /* the nt partials (rows 0 ..) and sums (rows PI_MAX_BATCH ..) this unit uses */
    memset(o->stream_acc, 0, (size_t)nt * (size_t)E * sizeof(float));
    memset(o->stream_acc + PI_MAX_BATCH * E, 0, (size_t)nt * (size_t)E * sizeof(float));
    for (int64_t i0 = 0; i0 < H; i0 += R) { /* the hot prefix, a piece's width at a time */
        const pi_weight *hw = &o->hot_w[3 * u];
        const int64_t rows = H - i0 < R ? H - i0 : R;
        pi_weight g = hw[0], w_up = hw[1];
        g.data = (const uint8_t *)hw[0].data + (size_t)i0 * hw[0].row_bytes;
        w_up.data = (const uint8_t *)hw[1].data + (size_t)i0 * hw[1].row_bytes;
        g.ne[1] = w_up.ne[1] = rows;
        stream_piece(o, s, rows_of, nt, &g, &w_up, (const uint8_t *)hw[2].data + (size_t)i0 * hw[2].row_bytes,
                     hw[2].type, hw[2].row_bytes, i0, rows);
    }
    struct iovec iov[2];
    pi_status err;
    for (int64_t i0 = H, p = 0; i0 < F; i0 += R, p ^= 1) {
        const int64_t rows = F - i0 < R ? F - i0 : R;
        if (i0 == H) { /* the first piece; later ones were issued one piece ahead */
            iov[0] = (struct iovec){o->stream_buf[0], (size_t)rows * o->stride};
            pi_io_req rq = {o->bundle_off[u] + i0 * (int64_t)o->stride, &iov[0], 1, 0};
            if ((err = pi_io_submit(o->io, &rq, 1))) return err;
        }
        uint64_t tag;
        pi_pool_park(o->pool);
        if (pi_io_reap(o->io, &tag, 1, true) != 1) return PI_ERR_IO;
        if (i0 + R < F) {
            const int64_t next = F - i0 - R < R ? F - i0 - R : R;
            iov[p ^ 1] = (struct iovec){o->stream_buf[p ^ 1], (size_t)next * o->stride};
            pi_io_req rq = {o->bundle_off[u] + (i0 + R) * (int64_t)o->stride, &iov[p ^ 1], 1, 0};
            if ((err = pi_io_submit(o->io, &rq, 1))) return err;
        }
        o->st.prefill_bytes += (uint64_t)rows * o->stride;
        const uint8_t *buf = o->stream_buf[p];
        for (int64_t r = 0; r < rows; r++)
            if ((err = pi_offload_check_bundle(o, u, i0 + r, buf + (size_t)r * o->stride))) return err;
        pi_weight g = {buf + pt->off[PI_BUNDLE_GATE], pt->type[PI_BUNDLE_GATE], {E, rows, 1, 1}, o->stride, {0, NULL}};
        pi_weight w_up = {buf + pt->off[PI_BUNDLE_UP], pt->type[PI_BUNDLE_UP], {E, rows, 1, 1}, o->stride, {0, NULL}};
        stream_piece(o, s, rows_of, nt, &g, &w_up, buf + pt->off[PI_BUNDLE_DOWN], pt->type[PI_BUNDLE_DOWN], o->stride,
                     i0, rows);
    }
    return PI_OK;
}

/* Token j's streamed down projection: its last chunk's partial added to the
   closed chunks' sum. */
static void stream_result(const pi_offload *o, int64_t j, int64_t E, float *out) {
    const float *part = o->stream_acc + j * E, *sum = o->stream_acc + (PI_MAX_BATCH + j) * E;
    for (int64_t d = 0; d < E; d++) out[d] = sum[d] + part[d];
}

/* The dense FFN of a prompt batch with the FFN on flash: each layer's
   bundles streamed (stream_unit), giving exactly the in-memory dense
   result. A mixture routes each token as the in-memory path does, streams
   each expert that some token chose once for all of its tokens, and mixes
   every token's experts in routing order. */
static pi_status stream_layer(pi_offload *o, pi_state *s, int64_t il, int64_t nb) {
    const pi_hparams *hp = &s->m->hp;
    const int64_t E = hp->n_embd;
    pi_status err;
    if (!hp->n_expert) {
        if ((err = stream_unit(o, s, il, NULL, nb))) return err;
        for (int64_t b = 0; b < nb; b++) stream_result(o, b, E, s->xb2 + b * E);
        pi_state_input_changed(s);
        return PI_OK;
    }
    const pi_layer *l = &s->m->layers[il];
    int64_t chosen[PI_MAX_BATCH][PI_MOE_MAX_USED], K = 0;
    float w[PI_MAX_BATCH][PI_MOE_MAX_USED];
    for (int64_t b = 0; b < nb; b++) K = pi_moe_route(s, l, s->xb + b * s->xb_dim, chosen[b], w[b]);
    float *eo = o->moe_out; /* (nb, K, E): token b's k-th expert's output */
    int64_t rows[PI_MAX_BATCH], slot[PI_MAX_BATCH];
    for (int64_t x = 0; x < hp->n_expert; x++) {
        int64_t nt = 0;
        for (int64_t b = 0; b < nb; b++)
            for (int64_t k = 0; k < K; k++)
                if (chosen[b][k] == x) {
                    rows[nt] = b;
                    slot[nt++] = b * K + k;
                }
        if (!nt) continue;
        if ((err = stream_unit(o, s, pi_ffn_unit(hp, il, x), rows, nt))) return err;
        for (int64_t j = 0; j < nt; j++) stream_result(o, j, E, eo + slot[j] * E);
    }
    for (int64_t b = 0; b < nb; b++) pi_moe_mix(w[b], K, eo + b * K * E, E, s->xb2 + b * E);
    pi_state_input_changed(s);
    return PI_OK;
}

/* The aligned range covering the file's bytes [off, off + len): its start
   *at, off's place in it *skip, and its length, returned (it may pass the
   end of the file). */
static int64_t covering(const pi_io *io, int64_t off, int64_t len, int64_t *at, int64_t *skip) {
    const int64_t a = (int64_t)pi_io_align(io);
    *at = off / a * a;
    *skip = off - *at;
    return (*skip + len + a - 1) / a * a;
}

/* Row `tok` of the token embedding, from flash when it is not resident. */
static pi_status embedding_row(pi_offload *o, pi_state *s, int32_t tok, float *out) {
    const pi_weight *w = &s->m->tok_embd;
    if (!o->embd_on_flash) {
        pi_weight_row_f32(w, tok, out);
        return PI_OK;
    }
    pi_status st = la_finish_all(o);
    if (st) return st;
    /* the row's covering aligned range straight into the aligned buffer
       (pi_io_read would otherwise bounce through a buffer of its own) */
    int64_t at, skip;
    int64_t want = covering(o->io, o->embd_off + (int64_t)tok * (int64_t)w->row_bytes, (int64_t)w->row_bytes, &at, &skip);
    if (at + want > pi_io_file_size(o->io)) want = pi_io_file_size(o->io) - at; /* a row at the end of the file */
    if ((st = pi_io_read(o->io, at, o->embd_buf, (size_t)want))) return st;
    o->st.bytes += (uint64_t)want;
    if ((st = pi_check_scales(o->path, w->name, w->type, o->embd_buf + skip, w->ne[0], tok, 1, w->row_bytes))) {
        snprintf(o->refusal, sizeof o->refusal, "%s", pi_last_error());
        return st;
    }
    pi_weight row = *w;
    row.data = o->embd_buf + skip;
    pi_weight_row_f32(&row, 0, out);
    return PI_OK;
}

/* The head's pieces are read as reads of at most HEAD_SUB bytes, all in
   flight at once, and the next piece's while this one is multiplied: one
   4 MiB read at a time measured 1.0-1.55 GB/s where the probe's 1 MiB
   reads eight deep read 1.55. */
#define HEAD_SUB ((int64_t)1 << 20)
#define HEAD_MAX_SUB 32

typedef struct {
    struct iovec iov[HEAD_MAX_SUB];
    pi_io_req rq[HEAD_MAX_SUB];
    int n, done;
} head_batch;

/* Queue the reads of [at, at + want) into buf as batch b (tag: its buffer). */
static pi_status head_issue(pi_offload *o, head_batch *b, int64_t at, int64_t want, uint8_t *buf, uint64_t tag) {
    b->n = b->done = 0;
    for (int64_t x = 0; x < want; x += HEAD_SUB) {
        const int64_t len = want - x < HEAD_SUB ? want - x : HEAD_SUB;
        b->iov[b->n] = (struct iovec){buf + x, (size_t)len};
        b->rq[b->n] = (pi_io_req){at + x, &b->iov[b->n], 1, tag};
        b->n++;
    }
    return pi_io_submit(o->head_io, b->rq, b->n);
}

/* Wait until batch bs[tag] has completed (the other batch's completions are
   counted on the way). */
static pi_status head_wait(pi_offload *o, head_batch *bs, uint64_t tag) {
    while (bs[tag].done < bs[tag].n) {
        uint64_t tags[2 * HEAD_MAX_SUB];
        pi_pool_park(o->pool);
        const int got = pi_io_reap(o->head_io, tags, 2 * HEAD_MAX_SUB, true);
        if (got < 0) return PI_ERR_IO;
        if (got == 0) return pi_error(PI_ERR_IO, "%s: the output head's reads were lost", o->path);
        for (int k = 0; k < got; k++) bs[tags[k] & 1].done++;
    }
    return PI_OK;
}

/* The output head on flash over nb rows of X into rows of Y, a piece at a
   time through the two streaming buffers (each piece's covering aligned
   range read while the piece before is multiplied, by the head's own
   handle; its scales checked as a bundle's are; then multiplied as the
   resident head is: the same rows by the same kernel give the same
   logits). A resident prefix of the head's rows (head_res_rows) is
   multiplied while the first piece after it is read. */
static pi_status head_stream(pi_offload *o, pi_state *s, const float *X, int64_t x_stride, int64_t nb, float *Y,
                             int64_t y_stride) {
    const pi_weight *w = &s->m->output;
    pi_status st = PI_OK;
    const uint64_t t0 = pi_time_ns();
    const int64_t a = (int64_t)pi_io_align(o->head_io), rb = (int64_t)w->row_bytes, R = w->ne[1];
    const int64_t R0 = o->head_res_rows; /* rows [0, R0) resident (at most R: the loader's clamp) */
    const int64_t size = pi_io_file_size(o->head_io);
    int64_t cap = o->piece_rows * (int64_t)o->stride;
    if (cap > HEAD_MAX_SUB * HEAD_SUB) cap = HEAD_MAX_SUB * HEAD_SUB;
    if (o->head_piece > 0 && (int64_t)o->head_piece < cap) cap = (int64_t)o->head_piece;
    cap = cap / a * a; /* a piece's covering aligned range then stays within cap */
    const int64_t per = cap > a + rb ? (cap - a) / rb : 1; /* one row with its alignment always fits the buffer */
    head_batch bs[2];
    int64_t at = 0, skip = 0, want = 0;
    bool sync = false;
    if (R0 < R) {
        want = covering(o->head_io, o->head_off + R0 * rb, (R - R0 < per ? R - R0 : per) * rb, &at, &skip);
        sync = at + want > size; /* the file's last block: read it whole, synchronously */
        if (!sync && (st = head_issue(o, bs, at, want, o->stream_buf[0], 0))) return st;
    }
    uint64_t t_res = 0; /* the resident rows' product: not the streaming's time */
    if (R0 > 0) {
        pi_weight res = *w;
        res.data = o->head_res;
        res.ne[1] = R0;
        const uint64_t ts = pi_time_ns();
        pi_state_matmul(s, &res, 0, R0, X, x_stride, nb, Y, y_stride);
        t_res = pi_time_ns() - ts;
    }
    for (int64_t r0 = R0, p = 0; r0 < R; r0 += per, p ^= 1) {
        const int64_t rows = R - r0 < per ? R - r0 : per;
        const int64_t cur_skip = skip;
        uint8_t *buf = o->stream_buf[p];
        if (sync) {
            if ((st = pi_io_read(o->head_io, at, buf, (size_t)(size - at)))) return st;
            o->st.head_bytes += (uint64_t)(size - at);
        } else {
            if ((st = head_wait(o, bs, (uint64_t)p))) break;
            o->st.head_bytes += (uint64_t)want;
        }
        o->st.head_reads++;
        if (r0 + per < R) { /* the next piece's reads, while this one is multiplied */
            const int64_t next = R - r0 - per < per ? R - r0 - per : per;
            want = covering(o->head_io, o->head_off + (r0 + per) * rb, next * rb, &at, &skip);
            sync = at + want > size;
            if (!sync && (st = head_issue(o, bs + (p ^ 1), at, want, o->stream_buf[p ^ 1], (uint64_t)(p ^ 1)))) break;
        }
        float v = 0.0f;
        const int64_t bad = pi_rows_bad_scale(w->type, buf + cur_skip, w->ne[0], rows, (size_t)rb, &v);
        if (bad >= 0) {
            snprintf(o->refusal, sizeof o->refusal, "%s: the output head (%s) read from flash has a non-finite "
                     "scale (%g) in row %lld", o->path, pi_type_name(w->type), (double)v,
                     (long long)(r0 + bad / (w->ne[0] / pi_type_get(w->type)->blck)));
            st = pi_error(PI_ERR_FORMAT, "%s", o->refusal);
            break;
        }
        pi_weight piece = *w;
        piece.data = buf + cur_skip;
        piece.ne[1] = rows;
        pi_state_matmul(s, &piece, 0, rows, X, x_stride, nb, Y + r0, y_stride);
    }
    if (st) return st; /* the caller drains what is in flight */
    o->st.head_ns += pi_time_ns() - t0 - t_res;
    o->st.head_uses++;
    return PI_OK;
}

/* The output head: from memory, or from flash (head_stream) through
   buffers the neuron cache lends: it is idle from the last layer's step to
   the next token's first reads. */
static pi_status head_rows(pi_offload *o, pi_state *s, const float *X, int64_t x_stride, int64_t nb, float *Y,
                           int64_t y_stride) {
    const pi_weight *w = &s->m->output;
    if (!o->head_on_flash) {
        pi_state_matmul(s, w, 0, w->ne[1], X, x_stride, nb, Y, y_stride);
        return PI_OK;
    }
    pi_status st = la_finish_all(o);
    if (st) return st;
    pi_offload_lend(o, false);
    st = head_stream(o, s, X, x_stride, nb, Y, y_stride);
    if (st) drain(o->head_io);
    pi_offload_take_back(o);
    return st;
}

/* Layer il's lookahead target, guessed from the residual s->x as it is
   before il's attention, normed with il's FFN norm: a dense layer, or the
   expert its router ranks first there (Deja Vu's observation: consecutive
   layers' inputs are close). NULL when there is no such layer or no
   lookahead. */
static const pi_la_target *guess_unit(pi_offload *o, pi_state *s, int64_t il, pi_la_target *t) {
    const pi_lm *m = s->m;
    if (!o->lookahead || il >= m->hp.n_layer) return NULL;
    const pi_layer *l1 = &m->layers[il];
    pi_rmsnorm(o->la_x, s->x, l1->ffn_norm.data, m->hp.n_embd, m->hp.rms_eps);
    *t = (pi_la_target){il, 0, o->la_x};
    if (m->hp.n_expert) {
        pi_state_input_changed(s);
        pi_state_matmul(s, &l1->ffn_gate_inp, 0, m->hp.n_expert, o->la_x, m->hp.n_embd, 1, s->router, m->hp.n_expert);
        pi_state_input_changed(s);
        for (int64_t x = 1; x < m->hp.n_expert; x++)
            if (s->router[x] > s->router[t->x]) t->x = x;
        o->la_guess = t->x;
    }
    return t;
}

/* Layer il + 1's target, guessed from layer il's residual. */
static const pi_la_target *guess_next(pi_offload *o, pi_state *s, int64_t il, pi_la_target *t) {
    return guess_unit(o, s, il + 1, t);
}

/* A mixture's token on the sparse path: routed as in memory, each chosen
   expert through ffn_offload, mixed in routing order (ffn_sparse's
   arithmetic). The experts' reads go out as early as their selection is
   known: while one expert computes, the next chosen expert's predicted
   misses are read (its input is this layer's, so the prediction is its
   own), and while the last computes, those of the expert the next layer's
   router is guessed to rank first. The guessed expert, when chosen, runs
   first. */
static pi_status moe_offload(pi_sparse_ffn *f, pi_offload *o, pi_state *s, int64_t il) {
    const int64_t E = s->m->hp.n_embd;
    int64_t chosen[PI_MOE_MAX_USED], ord[PI_MOE_MAX_USED];
    float w[PI_MOE_MAX_USED];
    const int64_t K = pi_sparse_route(f, s, il, chosen, w);
    pi_sparse_stats *st = &f->stats[il];
    for (int64_t k = 0; k < K; k++) ord[k] = k;
    if (o->la_guess >= 0) { /* a guess made by the layer before */
        o->st.router_guesses++;
        for (int64_t k = 0; k < K; k++)
            if (chosen[k] == o->la_guess) {
                o->st.router_hits++;
                ord[k] = 0;
                ord[0] = k;
            }
    }
    o->la_guess = -1;
    float *eo = o->moe_out; /* (K, E): each chosen expert's output */
    const uint64_t tokens = st->tokens;
    for (int64_t j = 0; j < K; j++) {
        pi_la_target t;
        const pi_la_target *next = NULL;
        if (j + 1 < K && o->lookahead) {
            t = (pi_la_target){il, chosen[ord[j + 1]], s->xb};
            next = &t;
        } else if (j + 1 == K) {
            next = guess_next(o, s, il, &t);
        }
        pi_status err = ffn_offload(f, o, s, il, chosen[ord[j]], eo + ord[j] * E, next);
        if (err) return err;
    }
    st->tokens = tokens + 1; /* the experts' lists are one token's */
    pi_moe_mix(w, K, eo, E, s->xb2);
    return PI_OK;
}

/* After a malformed bundle the file is not trusted again: every later step
   gives the same refusal. */
static pi_status refused(const pi_offload *o) {
    return o->refusal[0] ? pi_error(PI_ERR_FORMAT, "%s", o->refusal) : PI_OK;
}

/* A layer's FFN streamed (stream_layer) through buffers the neuron cache
   lends for it: the cache is idle while a layer streams. */
static pi_status ffn_stream(pi_offload *o, pi_state *s, int64_t il, int64_t nb) {
    pi_status err = la_finish_all(o); /* its reaps must not take a lookahead read's completion */
    if (err) return err;
    pi_offload_lend(o, true);
    err = stream_layer(o, s, il, nb);
    if (err) drain(o->io);
    pi_offload_take_back(o);
    return err;
}

/* The offload state for a step of session s: the pool its waits park is
   s's (sessions take turns on one state, so each step names its own, and a
   wait never parks the pool of a session freed since). */
static pi_offload *step_off(void *impl, const pi_state *s) {
    pi_offload *o = ((offload_ffn *)impl)->off;
    o->pool = s->pool;
    return o;
}

static pi_status offload_token(void *impl, pi_state *s, int64_t il) {
    pi_sparse_ffn *sp = ((offload_ffn *)impl)->sp;
    pi_offload *o = step_off(impl, s);
    pi_status st = refused(o);
    if (st) return st;
    if (!sp) return ffn_stream(o, s, il, 1);
    if (s->m->hp.n_expert) return moe_offload(sp, o, s, il);
    pi_la_target t;
    return ffn_offload(sp, o, s, il, 0, s->xb2, guess_next(o, s, il, &t));
}

static pi_status offload_batch(void *impl, pi_state *s, int64_t il, int64_t nb) {
    pi_offload *o = step_off(impl, s);
    pi_status st = refused(o);
    return st ? st : ffn_stream(o, s, il, nb);
}

static pi_status offload_embed(void *impl, pi_state *s, int32_t tok, float *out) {
    return embedding_row(step_off(impl, s), s, tok, out);
}

static pi_status offload_head(void *impl, pi_state *s, const float *X, int64_t x_stride, int64_t nb, float *Y,
                              int64_t y_stride) {
    pi_offload *o = step_off(impl, s);
    pi_status st = refused(o);
    return st ? st : head_rows(o, s, X, x_stride, nb, Y, y_stride);
}

static void offload_token_done(void *impl) { ((offload_ffn *)impl)->off->st.tokens++; }

/* The first layer's lookahead: its likely misses, guessed from the token's
   embedding (the residual before the first attention), go out while that
   attention computes, as every later layer's go out while the layer before
   computes. Before it the step after the output head read nothing: the
   first layer's misses waited for its attention and predictor. It takes at
   most half the free cache slots, and leaves at least a down chunk's worth
   (the most a wave needs): the first step's own misses and the second
   layer's lookahead need the rest (at 285 MiB of the planted 7b-l8, with
   the start's set allowed all but a chunk's slots, decode was 0.93x the
   build before; the half cap ran 1.18x that variant).
   How good the guess is depends on the model: on the planted 7b-l8 it finds
   99.3% of the first layer's selection at a precision of 99.5%; on the
   trained relu-stories fixture (predictors from train-predictor) 82% at
   60%, where its reads went out in a window of microseconds. A wrong guess
   costs a read, so the guess is kept while at least half of what it reads
   is then selected (pi_offload_start_wanted). */
bool pi_offload_start_wanted(pi_offload *o) {
    if (o->la_start_read >= PI_LA_START_WINDOW) {
        if (2 * o->la_start_used < o->la_start_read) o->la_start_paused = PI_LA_START_PAUSE;
        o->la_start_read = o->la_start_used = 0;
    }
    if (o->la_start_paused == 0) return true;
    o->la_start_paused--;
    return false;
}

static pi_status offload_token_start(void *impl, pi_state *s) {
    pi_sparse_ffn *sp = ((offload_ffn *)impl)->sp;
    pi_offload *o = step_off(impl, s);
    pi_status st = refused(o);
    if (st || !sp || !o->lookahead || !pi_offload_start_wanted(o)) return st;
    const int64_t F = s->m->hp.n_ff, free_slots = pi_ncache_unpinned(o->cache);
    const int64_t beside_chunk = free_slots - pi_down_chunk_rows(F, F);
    const int64_t room = free_slots / 2 < beside_chunk ? free_slots / 2 : beside_chunk;
    pi_la_target t;
    const pi_la_target *first = guess_unit(o, s, 0, &t);
    if (!first || room <= 0 || o->la[o->la_turn ^ 1].layer >= 0) return PI_OK;
    const uint64_t before = o->st.ahead_neurons;
    if ((st = la_issue(sp, o, s, first, room))) return st;
    o->st.ahead_start += o->st.ahead_neurons - before;
    o->la_start_read += o->st.ahead_neurons - before;
    pi_read_batch *a = &o->la[o->la_turn ^ 1];
    o->la_start = a->layer >= 0;
    if (o->la_start && a->done < a->runs) o->la_gap_from = pi_time_ns(); /* in flight before the step's own */
    o->la_turn ^= 1; /* the set is the first step's own */
    return PI_OK;
}

static void offload_free(void *impl) {
    offload_ffn *x = impl;
    if (!x) return;
    pi_sparse_ffn_free(x->sp);
    free(x);
}

const pi_ffn_ops pi_offload_ffn_ops = {"offload", offload_token, offload_batch, offload_embed, offload_token_done,
                                       offload_free, offload_head, offload_token_start};

pi_sparse_ffn *pi_offload_ffn_sparse(void *impl) { return ((offload_ffn *)impl)->sp; }

void pi_offload_session_shape(const pi_offload *off, int64_t *n_batch, int64_t *hb_cols) {
    *n_batch = PI_MAX_BATCH;
    *hb_cols = off->stream_rows;
}

pi_status pi_offload_ffn_install(pi_state *s, pi_offload *off, pi_ffn_mode mode, int64_t hot) {
    if (!off || off->n_layer != pi_ffn_units(&s->m->hp) || off->n_ff != s->m->hp.n_ff)
        return pi_error(PI_ERR_INVALID, "the offload state belongs to another model");
    if (s->hb_cols < off->stream_rows) /* a streaming piece's gate / up rows go to hb */
        return pi_error(PI_ERR_INVALID, "the session's FFN rows (%lld) are narrower than a streaming piece (%lld)",
                        (long long)s->hb_cols, (long long)off->stream_rows);
    if (mode != PI_FFN_SPARSE && mode != PI_FFN_DENSE)
        return pi_error(PI_ERR_INVALID, "the FFN read from flash computes in SPARSE or DENSE mode, not mode %d",
                        (int)mode);
    /* the dense cluster is computed from the resident rows: it cannot be longer than any unit's prefix */
    for (int64_t u = 0; mode == PI_FFN_SPARSE && u < off->n_layer; u++)
        if (hot > off->hot[u])
            return pi_error(PI_ERR_INVALID, "--hot %lld is longer than the %lld neurons this budget keeps resident "
                            "in %s %lld: lower --hot or raise --mem-budget", (long long)hot, (long long)off->hot[u],
                            s->m->hp.n_expert ? "expert unit" : "layer", (long long)u);
    offload_ffn *x = calloc(1, sizeof *x);
    if (!x) return pi_error(PI_ERR_NOMEM, "out of memory");
    x->off = off;
    if (mode == PI_FFN_SPARSE) {
        pi_status st = pi_sparse_ffn_create(s->m, mode, hot, &x->sp);
        if (st) {
            free(x);
            return st;
        }
    }
    pi_state_set_ffn(s, &pi_offload_ffn_ops, x);
    return PI_OK;
}
