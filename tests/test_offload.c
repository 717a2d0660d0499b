/*
 * test_offload.c — the FFN read from flash under a memory budget
 * (sparse/offload.h) against the same bundle file in memory.
 *
 * On generated ReLU and dReLU models with planted sparsity and predictors,
 * converted to bundle files:
 *  - a prompt batch (the streamed dense FFN) and token-by-token decoding
 *    (the sparse FFN through the hot region, the neuron cache and reads)
 *    give logits bit-identical to the in-memory sparse session, for several
 *    splits: everything resident, a hot prefix plus a cache, no hot prefix
 *    and a cache so small that a layer's neurons go in several waves, and
 *    a split chosen from a byte budget; with io_uring and pread, and with a
 *    hot prefix computed as a dense cluster (--hot);
 *  - the budget accountant refuses a budget below the minimum and says it;
 *  - injected faults (EIO, short reads) in a prompt batch and in decoding
 *    stop with PI_ERR_IO and a message naming the offset, and the session
 *    can be freed; a truncated bundle file is refused at load;
 *  - a file without bundles, or with packed bundles, is refused;
 *  - moe-relu-stories (random per-expert predictors) as a bundle file:
 *    the same splits, per expert, bit-identical to the in-memory sparse
 *    session; with the lookahead, the next chosen expert's reads and the
 *    next layer's guessed expert are read ahead, each guess counted;
 *  - through the public API (pinfer.h): a model opened under a budget
 *    decodes bit-identically to the same file opened in memory, reports its
 *    memory and reads, serves one session at a time, and refuses a budget
 *    below pi_budget_query's minimum and a context beyond the budget's.
 * Under an emulator (the NEON suite) the first file runs every split and
 * the others the four marked for it.
 */
#include "pinfer.h"
#include "model/genmodel.h"
#include "model/model.h"
#include "sparse/ffn_offload.h"
#include "model/session.h"
#include "sparse/quantize.h"
#include "sparse/reorder.h"
#include "test_moe.h"
#include "test_util.h"

#include <unistd.h>

#define N_PROMPT 12
#define N_DECODE 24

static void gen(const char *path, pi_type type, pi_ffn_act act) {
    pi_genmodel_params p;
    CHECK(pi_genmodel_preset("tiny", &p) == PI_OK);
    p.n_embd = 256;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.n_ff = 768;
    p.n_layer = 3;
    p.n_vocab = 300;
    p.n_ctx = 128;
    p.vocab_path = NULL;
    p.type = type;
    p.embd_type = type;
    p.output_type = type == PI_TYPE_F16 ? PI_TYPE_F16 : PI_TYPE_Q8_0; /* F16: an input for pinfer quantize */
    p.act = act;
    p.active = 0.15;
    p.skew = 1.0;
    p.predictor = true;
    p.pred_rank = 64;
    p.n_threads = 2;
    CHECK(pi_genmodel_write(&p, path) == PI_OK);
}

/* Prompt then decode with the session; logits of every step into out
   (N_DECODE + 1 rows). */
static pi_status run(pi_state *s, const int32_t *toks, float *out) {
    const int64_t V = s->m->hp.n_vocab;
    pi_state_reset(s);
    pi_status st = pi_state_decode(s, toks, N_PROMPT);
    if (st) return st;
    memcpy(out, pi_state_logits(s), (size_t)V * sizeof *out);
    for (int t = 0; t < N_DECODE; t++) {
        if ((st = pi_state_decode(s, &toks[N_PROMPT + t], 1))) return st;
        memcpy(out + (size_t)(t + 1) * (size_t)V, pi_state_logits(s), (size_t)V * sizeof *out);
    }
    return PI_OK;
}

static int64_t count_diff(const float *a, const float *b, size_t n) {
    int64_t d = 0;
    for (size_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], sizeof *a) != 0;
    return d;
}

typedef struct {
    const char *label;
    uint64_t budget;   /* 0: unlimited */
    int64_t hot;       /* resident bundles per layer; -1: the budget's split */
    int64_t slots;     /* 0: the budget's split */
    pi_io_backend io;
    int64_t cluster;   /* the session's dense hot prefix (--hot) */
    bool lookahead;    /* read the next layer's predicted misses while a layer computes */
    int delay_us;      /* > 0: the test backend, every read this late (lookahead reads still in flight) */
    bool emulated;     /* also run under an emulator for every file (the others: the first file only) */
} split;

/* run() through the public API. */
static pi_status run_api(pi_session *s, int64_t V, const int32_t *toks, float *out) {
    pi_status st = pi_session_kv_clear(s);
    if (!st) st = pi_session_eval(s, toks, N_PROMPT);
    if (st) return st;
    memcpy(out, pi_session_logits(s), (size_t)V * sizeof *out);
    for (int t = 0; t < N_DECODE; t++) {
        if ((st = pi_session_decode(s, toks[N_PROMPT + t]))) return st;
        memcpy(out + (size_t)(t + 1) * (size_t)V, pi_session_logits(s), (size_t)V * sizeof *out);
    }
    return PI_OK;
}

/* Three sessions under one budget (n_seq_max), their tokens interleaved one
   at a time, each equal to the in-memory run; the budget holds their KV
   caches and a fourth session is refused. */
static void check_sessions(const char *bundle, const pi_budget_info *need, int64_t V, const int32_t *toks,
                           const float *ref, const char *what) {
    enum { NS = 3 };
    pi_model_params mp = pi_model_default_params();
    mp.n_threads = 2;
    mp.n_ctx = 64;
    mp.no_plan = true;
    mp.n_seq_max = NS;
    const uint64_t each = need->kv + need->scratch;
    pi_model *fl = NULL;
    mp.mem_budget = need->minimum + (NS - 1) * each - 1;
    CHECK(pi_model_open(bundle, &mp, &fl) == PI_ERR_NOMEM && !fl);
    mp.mem_budget = need->minimum + (NS - 1) * each + (4u << 20);
    CHECKF(pi_model_open(bundle, &mp, &fl) == PI_OK, "%s", pi_last_error());
    if (!fl) return;
    const size_t rows = (size_t)(N_DECODE + 1) * (size_t)V;
    pi_session *s[NS + 1] = {0};
    float *got[NS] = {0};
    for (int k = 0; k < NS; k++) {
        CHECKF(pi_session_create(fl, NULL, &s[k]) == PI_OK, "%s", pi_last_error());
        got[k] = malloc(rows * sizeof *got[k]);
    }
    CHECK(pi_session_create(fl, NULL, &s[NS]) == PI_ERR_INVALID && strstr(pi_last_error(), "3 sessions"));
    bool ok = true;
    for (int k = 0; k < NS; k++) ok = ok && s[k] && got[k];
    /* session k starts k tokens late, so that each step finds the shared cache left by another */
    for (int step = 0; ok && step < N_DECODE + 1 + NS; step++)
        for (int k = 0; ok && k < NS; k++) {
            const int t = step - k;
            if (t < 0 || t > N_DECODE) continue;
            ok = (t == 0 ? pi_session_eval(s[k], toks, N_PROMPT) : pi_session_decode(s[k], toks[N_PROMPT + t - 1])) ==
                 PI_OK;
            if (ok) memcpy(got[k] + (size_t)t * (size_t)V, pi_session_logits(s[k]), (size_t)V * sizeof(float));
        }
    CHECKF(ok, "%s: %d sessions under one budget: %s", what, NS, pi_last_error());
    for (int k = 0; ok && k < NS; k++) {
        int64_t d = count_diff(got[k], ref, rows);
        CHECKF(d == 0, "%s: session %d of %d interleaved under one budget: %lld of %zu logits differ", what, k, NS,
               (long long)d, rows);
    }
    pi_memory_report r;
    CHECK(pi_model_memory(fl, &r) == PI_OK && r.limit == mp.mem_budget && r.used <= r.limit &&
          r.kv == NS * need->kv && r.used == r.fixed + r.kv + r.scratch + r.io + r.hot + r.cache);
    for (int k = 0; k < NS; k++) {
        pi_session_free(s[k]);
        free(got[k]);
    }
    pi_model_close(fl);
}

/* A prompt longer than the in-memory session's batch (PI_DEFAULT_BATCH):
   the offloaded session takes it in one pass over the FFN on flash
   (pi_offload_session_shape), at a budget where part of each unit is
   streamed, and every prompt position's logits equal the in-memory ones. */
static void check_long_prompt(const char *bundle, const char *what) {
    enum { NP = PI_DEFAULT_BATCH + 36 };
    pi_model_params mp = pi_model_default_params();
    mp.n_threads = 2;
    mp.n_ctx = NP + 8;
    pi_budget_info need;
    CHECKF(pi_budget_query(bundle, mp.n_ctx, &need) == PI_OK, "%s", pi_last_error());
    pi_model *mem = NULL, *fl = NULL;
    CHECK(pi_model_open(bundle, &mp, &mem) == PI_OK);
    mp.no_plan = true;
    mp.mem_budget = need.minimum + (need.ffn_bytes > (8u << 20) ? (2u << 20) : need.ffn_bytes / 4);
    CHECKF(pi_model_open(bundle, &mp, &fl) == PI_OK, "%s", pi_last_error());
    pi_session *a = NULL, *b = NULL;
    pi_model_info fi;
    if (mem && fl && pi_model_get_info(fl, &fi) == PI_OK && pi_session_create(mem, NULL, &a) == PI_OK &&
        pi_session_create(fl, NULL, &b) == PI_OK) {
        const int64_t V = fi.n_vocab;
        int32_t toks[NP];
        for (int i = 0; i < NP; i++) toks[i] = (int32_t)((i * 53 + 7) % V);
        float *la = malloc((size_t)NP * (size_t)V * sizeof *la), *lb = malloc((size_t)NP * (size_t)V * sizeof *lb);
        CHECK(la && lb && pi_session_eval_logits(a, toks, NP, la) == PI_OK && pi_session_eval_logits(b, toks, NP, lb) == PI_OK);
        if (la && lb) {
            const int64_t d = count_diff(lb, la, (size_t)NP * (size_t)V);
            CHECKF(d == 0, "%s: a %d-token prompt offloaded: %lld of %lld logits differ", what, NP, (long long)d,
                   (long long)(NP * V));
        }
        free(la);
        free(lb);
        pi_memory_report r;
        pi_token_stats st;
        const uint64_t units = (uint64_t)(fi.n_layer * (fi.n_expert ? fi.n_expert : 1)), F = (uint64_t)fi.n_ff;
        CHECK(pi_model_memory(fl, &r) == PI_OK && pi_session_stats(b, &st) == PI_OK);
        CHECKF(r.hot_min < fi.n_ff && st.prompt_bytes_read > 0 &&
                   st.prompt_bytes_read <= units * (F - (uint64_t)r.hot_min) * r.slot_bytes,
               "%s: one pass for %d tokens: %llu bytes streamed, at most %llu", what, NP,
               (unsigned long long)st.prompt_bytes_read,
               (unsigned long long)(units * (F - (uint64_t)r.hot_min) * r.slot_bytes));
    }
    pi_session_free(a);
    pi_session_free(b);
    pi_model_close(mem);
    pi_model_close(fl);
}

static void check_api(const char *bundle, const char *what) {
    pi_budget_info need;
    CHECKF(pi_budget_query(bundle, 64, &need) == PI_OK, "%s", pi_last_error());
    CHECK(need.minimum == need.fixed + need.kv + need.scratch + need.io + need.min_cache && need.ffn_bytes > 0);
    pi_model_params mp = pi_model_default_params();
    mp.n_threads = 2;
    mp.n_ctx = 64;
    pi_model *mem = NULL, *fl = NULL;
    CHECK(pi_model_open(bundle, &mp, &mem) == PI_OK);
    mp.no_plan = true;
    mp.mem_budget = need.minimum - 1;
    CHECK(pi_model_open(bundle, &mp, &fl) == PI_ERR_NOMEM && strstr(pi_last_error(), "minimum") && !fl);
    mp.mem_budget = need.minimum + (4u << 20);
    CHECKF(pi_model_open(bundle, &mp, &fl) == PI_OK, "%s", pi_last_error());
    if (!mem || !fl) return;
    pi_model_info mi, fi;
    CHECK(pi_model_get_info(mem, &mi) == PI_OK && pi_model_get_info(fl, &fi) == PI_OK);
    CHECK(mi.ffn == PI_FFN_SPARSE && fi.ffn == PI_FFN_SPARSE && !mi.offloaded && fi.offloaded && fi.bundled);
    const int64_t V = mi.n_vocab;
    const size_t rows = (size_t)(N_DECODE + 1) * (size_t)V;
    float *ref = malloc(rows * sizeof *ref), *got = malloc(rows * sizeof *got);
    int32_t toks[N_PROMPT + N_DECODE];
    for (int i = 0; i < N_PROMPT + N_DECODE; i++) toks[i] = (int32_t)((i * 37 + 11) % V);
    pi_session *a = NULL, *b = NULL, *b2 = NULL;
    pi_session_params big = pi_session_default_params();
    big.n_ctx = 65;
    CHECK(pi_session_create(fl, &big, &b) == PI_ERR_INVALID && strstr(pi_last_error(), "64 positions"));
    CHECK(pi_session_create(mem, NULL, &a) == PI_OK && pi_session_create(fl, NULL, &b) == PI_OK);
    CHECK(pi_session_create(fl, NULL, &b2) == PI_ERR_INVALID && strstr(pi_last_error(), "1 session"));
    if (a && b && ref && got) {
        CHECK(run_api(a, V, toks, ref) == PI_OK && run_api(b, V, toks, got) == PI_OK);
        int64_t d = count_diff(got, ref, rows);
        CHECKF(d == 0, "%s: through the API, %lld of %zu logits differ from the in-memory model", what, (long long)d,
               rows);
        pi_memory_report r;
        pi_token_stats st;
        CHECK(pi_model_memory(fl, &r) == PI_OK && r.limit == mp.mem_budget && r.used <= r.limit &&
              r.used == r.fixed + r.kv + r.scratch + r.io + r.hot + r.cache && r.io_backend[0] && r.cache_slots > 0);
        CHECK(pi_session_stats(b, &st) == PI_OK && st.decode_tokens == N_DECODE &&
              st.neurons_resident + st.neurons_cached + st.neurons_read > 0);
        /* the prompt streams only what is not resident: each unit's bundles past its hot prefix */
        const uint64_t units = (uint64_t)(fi.n_layer * (fi.n_expert ? fi.n_expert : 1)), F = (uint64_t)fi.n_ff;
        const uint64_t most = units * (F - (uint64_t)r.hot_min) * r.slot_bytes,
                       least = units * (F - (uint64_t)r.hot_max) * r.slot_bytes;
        CHECKF(st.prompt_bytes_read >= (fi.n_expert ? 0 : least) && st.prompt_bytes_read <= most &&
                   (st.prompt_bytes_read > 0) == (r.hot_min < fi.n_ff),
               "%s: prompt read %llu bytes, hot %lld-%lld of %lld neurons per unit", what,
               (unsigned long long)st.prompt_bytes_read, (long long)r.hot_min, (long long)r.hot_max,
               (long long)fi.n_ff);
    }
    pi_session_free(b);
    CHECK(pi_session_create(fl, NULL, &b2) == PI_OK); /* the flash state is free again */
    pi_session_free(b2);
    pi_session_free(a);
    pi_model_close(fl);
    if (ref && got) check_sessions(bundle, &need, V, toks, ref, what);
    pi_model_close(mem);
    free(ref);
    free(got);
}

/* Between the minimum with the output head resident and that minimum less
   the head, the head stays on flash and is read every token: the logits
   are the in-memory sparse session's (ref, from the last split run), the
   budget holds, the head was read; at the resident minimum it stays in
   memory; below the lower minimum the refusal says the head was on flash. */
static void check_head_on_flash(const char *bundle, pi_lm *m, const int32_t *toks, const float *ref, float *got,
                                size_t rows, const char *what) {
    pi_budget_needs z;
    CHECK(pi_offload_measure(m, 64, 0, 4096, &z) == PI_OK);
    const bool tied = m->tied_output || m->output.data == m->tok_embd.data;
    CHECKF(tied ? z.head_flash == 0 : z.head_flash > 0 && z.head_flash <= z.fixed, "%s: head_flash %llu", what,
           (unsigned long long)z.head_flash);
    if (getenv("PI_TEST_VERBOSE"))
        fprintf(stderr, "%s: output head %s, %llu bytes on flash at budgets below %llu\n", what, tied ? "tied" : "own",
                (unsigned long long)z.head_flash, (unsigned long long)z.minimum);
    if (!z.head_flash) return;
    const uint64_t budgets[2] = {z.minimum - z.head_flash / 2, z.minimum};
    for (int k = 0; k < 2; k++) {
        /* pieces of about 5 rows: the head takes several reads */
        pi_offload_opts oo = {.mem_budget = budgets[k], .n_ctx = 64, .lookahead = k == 0,
                              .head_piece = 4096 + 5 * m->output.row_bytes};
        pi_lm *om = NULL;
        pi_offload *off = NULL;
        CHECKF(pi_offload_load(bundle, &oo, &om, &off) == PI_OK, "%s, budget %llu: %s", what,
               (unsigned long long)budgets[k], pi_last_error());
        if (!off) continue;
        CHECK(off->head_on_flash == (k == 0) && (k == 0) == (om->output.data == NULL));
        pi_state *s;
        CHECK(pi_state_create(om, 64, 2, &s) == PI_OK && pi_offload_ffn_install(s, off, PI_FFN_SPARSE, 0) == PI_OK);
        CHECKF(run(s, toks, got) == PI_OK, "%s", pi_last_error());
        const int64_t d = count_diff(got, ref, rows);
        CHECKF(d == 0, "%s, output head %s: %lld of %zu logits differ from the in-memory sparse session", what,
               k ? "resident" : "on flash", (long long)d, rows);
        CHECK(pi_budget_used(&off->budget) <= budgets[k]);
        /* every token's head was read whole (the prompt's once) */
        if (k == 0)
            CHECKF(off->st.head_reads >= (uint64_t)(N_DECODE + 1) &&
                       off->st.head_bytes >= (uint64_t)(N_DECODE + 1) * (uint64_t)(z.head_flash - 4096),
                   "%s: %llu head reads, %llu bytes", what, (unsigned long long)off->st.head_reads,
                   (unsigned long long)off->st.head_bytes);
        else CHECK(off->st.head_reads == 0 && off->st.head_bytes == 0 && off->st.head_uses == 0);
        if (k == 0) CHECK(off->st.head_uses == (uint64_t)(N_DECODE + 1));
        pi_state_free(s);
        pi_offload_free(off);
        pi_lm_free(om);
    }
    pi_offload_opts lo = {.mem_budget = z.minimum - z.head_flash - 1, .n_ctx = 64};
    pi_lm *om = NULL;
    pi_offload *off = NULL;
    CHECK(pi_offload_load(bundle, &lo, &om, &off) == PI_ERR_NOMEM && !off);
    CHECKF(strstr(pi_last_error(), "output head read from flash") != NULL, "%s", pi_last_error());
}

/* every_split: run all the splits below; false runs, under an emulator,
   only those marked for it (the same paths, fewer repeats). */
static void check_file(const char *bundle, const char *what, bool every_split) {
    pi_lm *m;
    CHECK(pi_lm_load(bundle, PI_MAP_LOAD, &m) == PI_OK);
    if (!m) return;
    const int64_t L = pi_ffn_units(&m->hp), F = m->hp.n_ff, V = m->hp.n_vocab; /* hot prefixes per unit */
    const size_t rows = (size_t)(N_DECODE + 1) * (size_t)V;
    /* the in-memory sparse session's logits, computed once per cluster size
       the splits use (0 and 64): refs[k] for cluster ref_cluster[k] */
    float *refs[2] = {malloc(rows * sizeof(float)), malloc(rows * sizeof(float))}, *got = malloc(rows * sizeof *got);
    int64_t ref_cluster[2] = {-1, -1};
    int32_t toks[N_PROMPT + N_DECODE];
    t_rng r = {7};
    for (int i = 0; i < N_PROMPT + N_DECODE; i++) toks[i] = (int32_t)(t_next(&r) % (uint64_t)V);

    /* the minimum budget: refused below it, with the figure in the message */
    pi_offload_opts o0 = {.mem_budget = 1 << 20, .n_ctx = 64};
    pi_lm *om = NULL;
    pi_offload *off = NULL;
    CHECK(pi_offload_load(bundle, &o0, &om, &off) == PI_ERR_NOMEM);
    CHECKF(strstr(pi_last_error(), "minimum of") != NULL, "%s", pi_last_error());
    double min_mib = 0.0;
    const char *mp = strstr(pi_last_error(), "minimum of ");
    if (mp) min_mib = atof(mp + strlen("minimum of "));
    CHECK(min_mib > 0.0);

    const uint64_t base = (uint64_t)(min_mib * (1 << 20));
    split splits[] = {
        {"all resident", 0, F, 0, PI_IO_AUTO, 0, false, 0, true},
        {"hot 256 + cache", 0, 256, 600, PI_IO_AUTO, 0, false, 0, false},
        {"no hot, tiny cache (waves)", 0, 0, 2 * ((F + 63) / 64) + 16, PI_IO_AUTO, 0, false, 0, true},
        {"no hot, cache, pread", 0, 0, 900, PI_IO_PREAD, 0, false, 0, false},
        {"budget: minimum + 2 MiB", base + (2u << 20), -1, 0, PI_IO_AUTO, 0, false, 0, true},
        {"budget: minimum + 4 MiB, --hot 64", base + (4u << 20), -1, 0, PI_IO_AUTO, 64, false, 0, false},
        {"lookahead: hot 256 + cache", 0, 256, 600, PI_IO_AUTO, 0, true, 0, true},
        {"lookahead: no hot, tiny cache (waves)", 0, 0, 2 * ((F + 63) / 64) + 16, PI_IO_AUTO, 0, true, 0, false},
        {"lookahead: no hot, cache, pread", 0, 0, 900, PI_IO_PREAD, 0, true, 0, false},
        {"lookahead: budget minimum + 2 MiB, --hot 64", base + (2u << 20), -1, 0, PI_IO_AUTO, 64, true, 0, false},
        {"lookahead: slow reads (300 us)", 0, 0, 900, PI_IO_TEST, 0, true, 300, false},
    };
    for (size_t c = 0; c < sizeof splits / sizeof splits[0]; c++) {
        const split *sp = &splits[c];
        if (!every_split && !sp->emulated && t_emulated()) continue;
        pi_state *s;
        const int rk = sp->cluster == 0 ? 0 : 1;
        float *ref = refs[rk];
        if (ref_cluster[rk] != sp->cluster) {
            CHECK(pi_state_create(m, 64, 2, &s) == PI_OK);
            CHECK(pi_sparse_ffn_install(s, PI_FFN_SPARSE, sp->cluster) == PI_OK);
            CHECK(run(s, toks, ref) == PI_OK);
            pi_state_free(s);
            ref_cluster[rk] = sp->cluster;
        }

        int64_t hot[64];
        for (int64_t il = 0; il < L; il++) hot[il] = sp->hot;
        pi_offload_opts oo = {.mem_budget = sp->budget, .n_ctx = 64, .hot = sp->hot >= 0 ? hot : NULL,
                              .cold_slots = sp->slots, .lookahead = sp->lookahead};
        oo.io.backend = sp->io;
        if (sp->delay_us) oo.io.fault = (pi_io_fault){PI_FAULT_DELAY, -1, -1, sp->delay_us};
        CHECKF(pi_offload_load(bundle, &oo, &om, &off) == PI_OK, "%s %s: %s", what, sp->label, pi_last_error());
        if (!off) continue;
        CHECK(pi_state_create(om, 64, 2, &s) == PI_OK);
        int64_t min_hot = F;
        for (int64_t u = 0; u < L; u++) min_hot = off->hot[u] < min_hot ? off->hot[u] : min_hot;
        pi_status ist = pi_offload_ffn_install(s, off, PI_FFN_SPARSE, sp->cluster);
        if (sp->cluster > min_hot) { /* the cluster is computed from resident rows: refused */
            CHECKF(ist == PI_ERR_INVALID && strstr(pi_last_error(), "--hot"), "%s: %s", sp->label, pi_last_error());
            pi_state_free(s);
            pi_offload_free(off);
            pi_lm_free(om);
            continue;
        }
        CHECKF(ist == PI_OK, "%s", pi_last_error());
        CHECKF(run(s, toks, got) == PI_OK, "%s", pi_last_error());
        int64_t d = count_diff(got, ref, rows);
        CHECKF(d == 0, "%s, %s: %lld of %zu logits differ from the in-memory sparse session", what, sp->label,
               (long long)d, rows);
        const pi_offload_stats *st = &off->st;
        CHECK(st->tokens == N_DECODE && st->resident + st->hits + st->misses > 0);
        if (sp->hot == 0) CHECK(st->misses > 0 && st->reads > 0 && st->reads <= st->misses && st->bytes > 0);
        /* the prompt streamed every bundle and decoding read some again:
           each bundle's scales were checked on its first read only */
        CHECKF(st->checked <= (uint64_t)(L * F) && (sp->hot != 0 || st->checked > 0), "%s: %llu bundles checked of %lld",
               sp->label, (unsigned long long)st->checked, (long long)(L * F));
        if (c == 2) CHECKF(st->waves > 0, "%s: expected split steps", sp->label);
        /* the lookahead reads ahead where a layer is one wave, and what it
           read is counted once: used ones are misses, every read is a read */
        if (sp->lookahead && sp->hot == 0 && sp->slots > 100)
            CHECKF(st->ahead_neurons > 0 && st->ahead_used > 0 && st->ahead_used <= st->ahead_neurons &&
                       st->ahead_used <= st->misses && st->ahead_reads <= st->reads,
                   "%s: ahead %llu used %llu reads %llu", sp->label, (unsigned long long)st->ahead_neurons,
                   (unsigned long long)st->ahead_used, (unsigned long long)st->ahead_reads);
        if (!sp->lookahead) CHECK(st->ahead_neurons == 0 && st->ahead_used == 0 && st->router_guesses == 0);
        /* the first layer is read ahead as the token starts (its guess from the embedding) where
           the cache has room beside a down chunk's neurons */
        if (sp->lookahead && sp->hot == 0 && sp->slots > 2 * pi_down_chunk_rows(F, F))
            CHECKF(st->ahead_start > 0 && st->ahead_start <= st->ahead_neurons && st->ahead_start_used <= st->ahead_start,
                   "%s: %llu of %llu read at the start",
                   sp->label, (unsigned long long)st->ahead_start, (unsigned long long)st->ahead_neurons);
        if (!sp->lookahead) CHECK(st->ahead_start == 0);
        /* a mixture guesses each layer's first expert once per token: the first layer's from the
           embedding, the others' from the layer before's residual */
        if (sp->lookahead && m->hp.n_expert)
            CHECKF(st->router_guesses == (uint64_t)(N_DECODE * m->hp.n_layer) &&
                       st->router_hits <= st->router_guesses,
                   "%s: %llu guesses, %llu right", sp->label, (unsigned long long)st->router_guesses,
                   (unsigned long long)st->router_hits);
        if (sp->lookahead && m->hp.n_expert && getenv("PI_TEST_VERBOSE"))
            fprintf(stderr, "%s, %s: next layer's expert guessed right %llu of %llu\n", what, sp->label,
                    (unsigned long long)st->router_hits, (unsigned long long)st->router_guesses);
        if (sp->budget) CHECK(pi_budget_used(&off->budget) <= sp->budget);
        if (getenv("PI_TEST_VERBOSE"))
            fprintf(stderr, "%s, %s: resident %llu hits %llu misses %llu reads %llu merged %llu waves %llu\n", what,
                    sp->label, (unsigned long long)st->resident, (unsigned long long)st->hits,
                    (unsigned long long)st->misses, (unsigned long long)st->reads, (unsigned long long)st->merged,
                    (unsigned long long)st->waves);
        pi_state_free(s);
        pi_offload_free(off);
        pi_lm_free(om);
    }
    CHECK(ref_cluster[0] == 0);
    check_head_on_flash(bundle, m, toks, refs[0], got, rows, what);
    free(refs[0]);
    free(refs[1]);
    free(got);
    pi_lm_free(m);
}

/* Give every unit's first `prefix` neurons their own threshold (a plan's
   resident prefixes, pi_lm.layer_split) on model m: dh below the unit's
   own, the rest dc above it. */
static bool set_split(pi_lm *m, int64_t prefix, float dh, float dc) {
    const int64_t U = pi_ffn_units(&m->hp);
    float *thr = malloc((size_t)U * sizeof *thr), *th = malloc((size_t)U * sizeof *th);
    int64_t *sp = malloc((size_t)U * sizeof *sp);
    if (!thr || !th || !sp) {
        free(thr), free(th), free(sp);
        return false;
    }
    for (int64_t u = 0; u < U; u++) {
        int64_t s0;
        float h0;
        const int64_t X = m->hp.n_expert ? m->hp.n_expert : 1;
        const float t = pi_sparse_threshold(m, u / X, u % X, &s0, &h0);
        thr[u] = t + dc, th[u] = t - dh, sp[u] = prefix;
    }
    free(m->layer_threshold), free(m->layer_threshold_hot), free(m->layer_split);
    m->layer_threshold = thr, m->layer_threshold_hot = th, m->layer_split = sp;
    return true;
}

/* Two thresholds per unit, its resident prefix's lower: the offloaded
   session (the prefix resident, the rest read, with the lookahead choosing
   its reads by the same rule) equals the in-memory one, and the split
   changes what is computed. */
static void check_split_thresholds(const char *bundle, const char *what) {
    pi_lm *m;
    CHECK(pi_lm_load(bundle, PI_MAP_LOAD, &m) == PI_OK);
    if (!m) return;
    if (!m->has_predictor) {
        pi_lm_free(m);
        return;
    }
    const int64_t U = pi_ffn_units(&m->hp), V = m->hp.n_vocab, H = 256;
    const size_t rows = (size_t)(N_DECODE + 1) * (size_t)V;
    float *one = malloc(rows * sizeof(float)), *ref = malloc(rows * sizeof(float)), *got = malloc(rows * sizeof(float));
    int32_t toks[N_PROMPT + N_DECODE];
    t_rng r = {11};
    for (int i = 0; i < N_PROMPT + N_DECODE; i++) toks[i] = (int32_t)(t_next(&r) % (uint64_t)V);
    pi_state *s;
    CHECK(pi_state_create(m, 64, 2, &s) == PI_OK);
    CHECK(pi_sparse_ffn_install(s, PI_FFN_SPARSE, 0) == PI_OK);
    CHECK(run(s, toks, one) == PI_OK);
    pi_state_free(s);
    CHECK(set_split(m, H, 1.0f, 0.5f));
    CHECK(pi_state_create(m, 64, 2, &s) == PI_OK);
    CHECK(pi_sparse_ffn_install(s, PI_FFN_SPARSE, 0) == PI_OK);
    CHECK(run(s, toks, ref) == PI_OK);
    pi_state_free(s);
    CHECKF(count_diff(one, ref, rows) > 0, "%s: the split thresholds changed nothing", what);

    int64_t hot[64];
    for (int64_t u = 0; u < U; u++) hot[u] = H;
    for (int la = 0; la < 2; la++) {
        pi_offload_opts oo = {.n_ctx = 64, .hot = hot, .cold_slots = 600, .lookahead = la};
        pi_lm *om = NULL;
        pi_offload *off = NULL;
        CHECKF(pi_offload_load(bundle, &oo, &om, &off) == PI_OK, "%s: %s", what, pi_last_error());
        if (!off) continue;
        CHECK(set_split(om, H, 1.0f, 0.5f));
        CHECK(pi_state_create(om, 64, 2, &s) == PI_OK);
        CHECK(pi_offload_ffn_install(s, off, PI_FFN_SPARSE, 0) == PI_OK);
        CHECKF(run(s, toks, got) == PI_OK, "%s", pi_last_error());
        const int64_t d = count_diff(got, ref, rows);
        CHECKF(d == 0, "%s, split thresholds%s: %lld of %zu logits differ from the in-memory sparse session", what,
               la ? ", lookahead" : "", (long long)d, rows);
        if (la) CHECK(off->st.ahead_neurons > 0);
        pi_state_free(s);
        pi_offload_free(off);
        pi_lm_free(om);
    }
    free(one), free(ref), free(got);
    pi_lm_free(m);
}

/* A fault at the file offset of a bundle that the given phase reads. */
static void check_fault(const char *bundle, pi_io_fault_kind kind, bool in_prompt, bool lookahead) {
    pi_lm *om = NULL;
    pi_offload *off = NULL;
    pi_offload_opts oo = {.n_ctx = 64, .cold_slots = 1000, .lookahead = lookahead};
    int64_t hot[64] = {0};
    oo.hot = hot;
    oo.io.backend = PI_IO_TEST;
    /* find the bundle offset first */
    CHECK(pi_offload_load(bundle, &oo, &om, &off) == PI_OK);
    if (!off) return;
    int64_t where = off->bundle_off[1] + 3 * (int64_t)off->stride; /* layer 1, neuron 3: hot, read often */
    pi_offload_free(off);
    pi_lm_free(om);
    oo.io.fault = (pi_io_fault){kind, -1, where, 0};
    CHECK(pi_offload_load(bundle, &oo, &om, &off) == PI_OK);
    if (!off) return;
    pi_state *s;
    CHECK(pi_state_create(om, 64, 2, &s) == PI_OK);
    CHECK(pi_offload_ffn_install(s, off, PI_FFN_SPARSE, 0) == PI_OK);
    int32_t toks[40];
    for (int i = 0; i < 40; i++) toks[i] = (int32_t)((i * 37 + 11) % 300);
    pi_status st = PI_OK;
    if (in_prompt) st = pi_state_decode(s, toks, 8);
    for (int t = 0; !st && t < 40; t++) st = pi_state_decode(s, &toks[t], 1);
    CHECKF(st == PI_ERR_IO, "fault %d (%s%s): status %d", (int)kind, in_prompt ? "prompt" : "decode",
           lookahead ? ", lookahead" : "", (int)st);
    const char *msg = pi_last_error();
    CHECKF(strstr(msg, "offset") && (kind != PI_FAULT_SHORT || strstr(msg, "short")), "message: %s", msg);
    /* it stays stopped: no wrong output afterwards, and no hang */
    CHECK(pi_state_decode(s, &toks[0], 1) != PI_OK || kind == PI_FAULT_NONE);
    pi_state_free(s);
    pi_offload_free(off);
    pi_lm_free(om);
}

static void check_refusals(const char *plain, const char *bundle, const char *packed) {
    pi_lm *om = NULL;
    pi_offload *off = NULL;
    pi_offload_opts oo = {.mem_budget = 1ull << 30, .n_ctx = 64};
    CHECK(pi_offload_load(plain, &oo, &om, &off) == PI_ERR_INVALID && strstr(pi_last_error(), "--bundle"));
    CHECK(pi_offload_load(packed, &oo, &om, &off) == PI_ERR_INVALID && strstr(pi_last_error(), "packed"));
    /* a truncated bundle file */
    char cut[256];
    t_tmp_path(cut, sizeof cut, "offload-cut.gguf");
    FILE *in = fopen(bundle, "rb"), *out = fopen(cut, "wb");
    CHECK(in && out);
    if (in && out) {
        fseek(in, 0, SEEK_END);
        long size = ftell(in);
        fseek(in, 0, SEEK_SET);
        char buf[65536];
        for (long left = size - 5000; left > 0;) {
            size_t n = fread(buf, 1, left < (long)sizeof buf ? (size_t)left : sizeof buf, in);
            if (!n) break;
            fwrite(buf, 1, n, out);
            left -= (long)n;
        }
    }
    if (in) fclose(in);
    if (out) fclose(out);
    CHECK(pi_offload_load(cut, &oo, &om, &off) != PI_OK && om == NULL && off == NULL);
    unlink(cut);
}

/* A copy of a mixture's bundle file with activation counts per expert
   (blk.N.ffn_act_count [n_ff * n_expert], descending in each expert): expert
   x of every layer counted in proportion to n_expert - x. */
static bool add_counts(const char *src, const char *dst, int64_t L, int64_t X, int64_t F) {
    pi_gguf *g;
    if (pi_gguf_open(src, &g)) return false;
    pi_gguf_writer *w;
    pi_status st = pi_gguf_writer_create(dst, false, &w);
    for (int64_t i = 0; !st && i < pi_gguf_n_kv(g); i++) st = pi_gguf_set_kv(w, pi_gguf_kv_at(g, i));
    if (!st) st = pi_gguf_set_u64(w, PI_KEY_STATS_TOKENS, 100000);
    for (int64_t i = 0; !st && i < pi_gguf_n_tensors(g); i++) {
        const pi_gguf_tensor *t = pi_gguf_tensor_at(g, i);
        char nm[96];
        snprintf(nm, sizeof nm, "%.*s", (int)t->name.len, t->name.data);
        st = pi_gguf_add_tensor(w, nm, (pi_type)t->type, t->n_dims, t->ne);
    }
    for (int64_t il = 0; !st && il < L; il++) {
        char nm[96];
        snprintf(nm, sizeof nm, PI_TN_FFN_ACT_COUNT, (int)il);
        const int64_t ne[1] = {F * X};
        st = pi_gguf_add_tensor(w, nm, PI_TYPE_I32, 1, ne);
    }
    if (!st) st = pi_gguf_writer_begin_data(w);
    for (int64_t i = 0; !st && i < pi_gguf_n_tensors(g); i++)
        st = pi_gguf_write_data(w, pi_gguf_tensor_at(g, i)->data, pi_gguf_tensor_at(g, i)->nbytes);
    int32_t *c = malloc((size_t)(F * X) * sizeof *c);
    for (int64_t x = 0; c && x < X; x++)
        for (int64_t i = 0; i < F; i++) c[x * F + i] = (int32_t)((X - x) * 20000 / (i + 4));
    for (int64_t il = 0; !st && il < L; il++) st = c ? pi_gguf_write_data(w, c, (size_t)(F * X) * 4) : PI_ERR_NOMEM;
    free(c);
    st = pi_gguf_writer_finish(w, st);
    pi_gguf_close(g);
    return st == PI_OK;
}

/* The first layer's read at the token's start is paused for
   PI_LA_START_PAUSE tokens after a window of neurons fewer than half of
   which were then selected, and kept after a window of at least half. */
static void check_start_guard(void) {
    pi_offload *o = calloc(1, sizeof *o);
    if (!o) return;
    CHECK(pi_offload_start_wanted(o) && pi_offload_start_wanted(o)); /* nothing judged yet */
    o->la_start_read = PI_LA_START_WINDOW;
    o->la_start_used = PI_LA_START_WINDOW / 2; /* exactly half: kept */
    CHECK(pi_offload_start_wanted(o) && o->la_start_read == 0 && o->la_start_used == 0);
    o->la_start_read = PI_LA_START_WINDOW + 10;
    o->la_start_used = (PI_LA_START_WINDOW + 10) / 2 - 1; /* below half: paused */
    int off = 0;
    while (!pi_offload_start_wanted(o) && off <= PI_LA_START_PAUSE) off++;
    CHECKF(off == PI_LA_START_PAUSE && o->la_start_read == 0, "paused for %d tokens", off);
    o->la_start_read = PI_LA_START_WINDOW - 1; /* a window not yet full is not judged */
    o->la_start_used = 0;
    CHECK(pi_offload_start_wanted(o) && o->la_start_read == PI_LA_START_WINDOW - 1);
    free(o);
}

int main(void) {
    char plain[256], bundle[256], packed[256];
    check_start_guard();
    t_tmp_path(plain, sizeof plain, "offload.gguf");
    t_tmp_path(bundle, sizeof bundle, "offload.bundle.gguf");
    t_tmp_path(packed, sizeof packed, "offload.packed.gguf");
    static const struct {
        pi_type type;
        pi_ffn_act act;
        const char *what;
    } cases[] = {{PI_TYPE_Q4_0, PI_ACT_RELU, "relu q4_0"}, {PI_TYPE_Q8_0, PI_ACT_DRELU, "drelu q8_0"},
                 {PI_TYPE_F32, PI_ACT_RELU, "relu f32"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gen(plain, cases[c].type, cases[c].act);
        CHECK(pi_bundle_write(plain, NULL, 4096, bundle) == PI_OK);
        check_file(bundle, cases[c].what, c == 0);
        check_split_thresholds(bundle, cases[c].what);
        check_api(bundle, cases[c].what);
        check_long_prompt(bundle, cases[c].what);
        if (c == 0) {
            CHECK(pi_bundle_write(plain, NULL, 0, packed) == PI_OK);
            check_refusals(plain, bundle, packed);
            for (int la = 0; la < 2; la++) {
                check_fault(bundle, PI_FAULT_EIO, false, la);
                check_fault(bundle, PI_FAULT_SHORT, false, la);
                check_fault(bundle, PI_FAULT_EIO, true, la);
            }
        }
    }
    /* Q4_K_M by llama-quantize's recipe: layer 2's down projection in Q6_K,
       layers 0 and 1 in Q4_K, so each layer's bundles have their own parts */
    {
        char f16[256];
        t_tmp_path(f16, sizeof f16, "offload.f16.gguf");
        gen(f16, PI_TYPE_F16, PI_ACT_RELU);
        pi_quant_params qp = {.recipe = PI_QR_Q4_K_M, .output_type = -1, .embd_type = -1, .n_threads = 2};
        CHECKF(pi_quantize_model(f16, plain, &qp, NULL) == PI_OK, "%s", pi_last_error());
        CHECKF(pi_bundle_write(plain, NULL, 4096, bundle) == PI_OK, "%s", pi_last_error());
        pi_lm *km = NULL;
        CHECK(pi_lm_load(bundle, PI_MAP_FILE, &km) == PI_OK);
        if (km) {
            CHECKF(km->layers[0].ffn_down_t.type == PI_TYPE_Q4_K && km->layers[2].ffn_down_t.type == PI_TYPE_Q6_K &&
                   km->layers[0].ffn_gate.type == PI_TYPE_Q4_K,
                   "q4_k_m bundle types: down %s / %s, gate %s", pi_type_name(km->layers[0].ffn_down_t.type),
                   pi_type_name(km->layers[2].ffn_down_t.type), pi_type_name(km->layers[0].ffn_gate.type));
            pi_lm_free(km);
        }
        check_file(bundle, "relu q4_k_m", false);
        check_api(bundle, "relu q4_k_m");
        check_long_prompt(bundle, "relu q4_k_m");
        unlink(f16);
    }
    /* a mixture of experts: every routed expert's neurons through the same
       hot prefixes (one per expert), cache and reads; prompts stream the
       experts their tokens chose */
    char moe[512];
    if (t_fixture(moe, sizeof moe, "relu/moe-relu-stories.gguf")) {
        CHECKF(t_moe_with_predictors(moe, plain), "%s", pi_last_error());
        CHECKF(pi_bundle_write(plain, NULL, 4096, bundle) == PI_OK, "%s", pi_last_error());
        check_file(bundle, "moe relu f32", false);
        check_api(bundle, "moe relu f32");
        check_long_prompt(bundle, "moe relu f32");
        /* with counts per expert, the default split gives a popular expert a
           longer resident prefix than a rare one, and the output is the same */
        CHECK(add_counts(bundle, packed, 6, 4, 256));
        pi_offload_opts oo = {.mem_budget = 12u << 20, .n_ctx = 64};
        pi_lm *om = NULL;
        pi_offload *off = NULL;
        CHECKF(pi_offload_load(packed, &oo, &om, &off) == PI_OK, "%s", pi_last_error());
        if (off) {
            int64_t sum = 0;
            for (int64_t u = 0; u < 24; u++) sum += off->hot[u];
            fprintf(stderr, "moe with counts at 12 MiB: hot prefixes of layer 0's experts %lld %lld %lld %lld (%lld in all)\n",
                    (long long)off->hot[0], (long long)off->hot[1], (long long)off->hot[2], (long long)off->hot[3],
                    (long long)sum);
            CHECK(sum > 0 && off->hot[0] > off->hot[3] && off->hot[4] == off->hot[0] && off->hot[3] < 256);
        }
        pi_offload_free(off);
        pi_lm_free(om);
        check_file(packed, "moe relu f32, counts", false);
    }
    unlink(plain);
    unlink(bundle);
    unlink(packed);
    return t_done("test_offload");
}
