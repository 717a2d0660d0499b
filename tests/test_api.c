/*
 * test_api.c — the public API (include/pinfer.h), used only through that
 * header, on the real fixtures:
 *  - stories260K: pi_generate's greedy text equals llama2.c's golden output;
 *    the info and the tokenizer behind the handles;
 *  - KV cache edits: truncate and discard of the tail reproduce the logits
 *    of a fresh evaluation bit for bit; a discard in the middle keeps going;
 *  - pi_generate stops on the callback, the stop flag and a full context;
 *  - relu-stories: an oracle session writes the dense session's text, and
 *    its statistics count what it computed;
 *  - two sessions of one model on two threads give the sequential result;
 *  - misuse: NULL handles, bad parameters, tokens outside the vocabulary,
 *    decoding past the context, a session whose model was closed — each
 *    PI_ERR_INVALID with a message, never a crash.
 */
#include "pinfer.h"
#include "api/engine.h"
#include "test_hw.h"
#include "test_util.h"

#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sys/stat.h>

/* Generated text, kept by the piece callback. */
typedef struct {
    char buf[8192];
    size_t n;
    int pieces;
    int stop_after; /* > 0: ask to stop after this many pieces */
} sink;

static int collect(void *ctx, const char *text, size_t len, int32_t token) {
    sink *k = ctx;
    if (k->n + len < sizeof k->buf) memcpy(k->buf + k->n, text, len), k->n += len;
    k->buf[k->n] = '\0';
    if (token >= 0) k->pieces++;
    return k->stop_after > 0 && k->pieces >= k->stop_after;
}

static pi_sampler *greedy(const pi_model *m) {
    pi_sampler_params sp = pi_sampler_default_params();
    sp.temp = 0.0f;
    pi_sampler *s = NULL;
    CHECK(pi_sampler_create(&sp, pi_model_n_vocab(m), &s) == PI_OK);
    return s;
}

/* Greedy text of n tokens from BOS into k. */
static pi_status gen_text(pi_session *s, const pi_model *m, int64_t n, sink *k) {
    pi_sampler *smp = greedy(m);
    int32_t bos = pi_tokenizer_bos(pi_model_tokenizer(m));
    pi_generate_params gp = pi_generate_default_params();
    gp.n_predict = n;
    memset(k, 0, sizeof *k);
    pi_status st = pi_generate(s, smp, &bos, 1, &gp, collect, k, NULL);
    pi_sampler_free(smp);
    return st;
}

static void test_golden(const char *model, const char *golden) {
    pi_model_params mp = pi_model_default_params();
    mp.n_threads = 2;
    pi_model *m = NULL;
    CHECKF(pi_model_open(model, &mp, &m) == PI_OK, "%s", pi_last_error());
    if (!m) return;
    pi_model_info in;
    CHECK(pi_model_get_info(m, &in) == PI_OK);
    CHECK(in.n_vocab == 512 && in.n_layer == 5 && in.n_embd == 64 && !strcmp(in.arch, "llama") &&
          !strcmp(in.activation, "silu") && in.ffn == PI_FFN_DENSE && !in.offloaded && in.kernels[0]);
    CHECK(in.n_ctx == 2048 && in.bytes_per_token > 0 && in.ffn_bytes > 0 && in.ffn_bytes < in.weight_bytes);
    const pi_tokenizer *tok = pi_model_tokenizer(m);
    CHECK(pi_tokenizer_n_vocab(tok) == 512 && pi_tokenizer_bos(tok) == 1 && pi_tokenizer_eos(tok) == 2);
    CHECK(pi_tokenizer_is_eog(tok, 2) && !pi_tokenizer_is_eog(tok, 5));
    int32_t ids[16];
    size_t n = 0;
    CHECK(pi_tokenize(tok, "Once upon a time", 16, true, false, ids, 16, &n) == PI_OK && n == 5 && ids[0] == 1);
    char text[64];
    size_t tl = 0;
    CHECK(pi_detokenize(tok, ids, n, text, sizeof text, &tl) == PI_OK && !strcmp(text, "Once upon a time"));

    pi_session *s = NULL;
    CHECK(pi_session_create(m, NULL, &s) == PI_OK && pi_session_n_ctx(s) == 2048 && pi_session_n_threads(s) == 2);
    sink k;
    pi_generate_result res;
    pi_sampler *smp = greedy(m);
    int32_t bos = 1;
    pi_generate_params gp = pi_generate_default_params();
    gp.n_predict = 256;
    memset(&k, 0, sizeof k);
    CHECK(pi_generate(s, smp, &bos, 1, &gp, collect, &k, &res) == PI_OK);
    CHECK(res.n_prompt == 1 && res.n_generated == 256 && res.stop == PI_STOP_LENGTH && k.pieces == 256);
    CHECK(pi_session_n_past(s) == 257); /* every token emitted was evaluated */
    size_t gn = 0;
    char *want = t_read_file(golden, &gn);
    if (k.n && k.buf[k.n - 1] != '\n') k.buf[k.n++] = '\n'; /* run ends its text with a newline */
    CHECKF(want && gn == k.n && !memcmp(want, k.buf, gn), "generated text differs from %s", golden);
    free(want);

    /* pi_session_eval_logits: the last row is the session's logits */
    float *all = malloc(5 * 512 * sizeof *all);
    CHECK(pi_session_kv_clear(s) == PI_OK && pi_session_logits(s) == NULL);
    CHECK(all && pi_session_eval_logits(s, ids, 5, all) == PI_OK && pi_session_n_past(s) == 5);
    CHECK(all && !memcmp(all + 4 * 512, pi_session_logits(s), 512 * sizeof(float)));
    free(all);
    pi_token_stats st;
    CHECK(pi_session_stats(s, &st) == PI_OK && st.prompt_tokens == 5 && st.decode_tokens == 257 &&
          st.decode_s > 0.0 && st.neurons_computed == 0);
    CHECK(pi_session_reset_stats(s) == PI_OK && pi_session_stats(s, &st) == PI_OK && st.decode_tokens == 0);
    pi_memory_report mr;
    CHECK(pi_model_memory(m, &mr) == PI_OK && mr.limit == 0 && mr.weights == in.weight_bytes && !mr.io_backend[0]);
    pi_sampler_free(smp);
    pi_session_free(s);
    pi_model_close(m);
}

/* Logits after decoding toks[0..n) one at a time into out. */
static void decode_all(pi_session *s, const int32_t *toks, int n, float *out, int64_t V) {
    for (int i = 0; i < n; i++) CHECK(pi_session_decode(s, toks[i]) == PI_OK);
    const float *l = pi_session_logits(s);
    if (l) memcpy(out, l, (size_t)V * sizeof *out);
}

static void test_kv(const char *model) {
    pi_model *m = NULL;
    CHECK(pi_model_open(model, NULL, &m) == PI_OK);
    if (!m) return;
    const int64_t V = pi_model_n_vocab(m);
    pi_session_params sp = pi_session_default_params();
    sp.n_ctx = 64;
    sp.n_threads = 2;
    pi_session *s = NULL;
    CHECK(pi_session_create(m, &sp, &s) == PI_OK);
    if (!s) return;
    const int32_t toks[12] = {1, 403, 407, 261, 378, 11, 29, 72, 85, 104, 200, 7};
    float *a = calloc((size_t)V, sizeof *a), *b = calloc((size_t)V, sizeof *b);
    /* truncate to 5 and decode the same tokens again: the same logits */
    decode_all(s, toks, 12, a, V);
    CHECK(pi_session_kv_truncate(s, 5) == PI_OK && pi_session_n_past(s) == 5 && pi_session_logits(s) == NULL);
    decode_all(s, toks + 5, 7, b, V);
    CHECK(!memcmp(a, b, (size_t)V * sizeof *a));
    /* dropping the tail is truncating */
    CHECK(pi_session_kv_discard(s, 8, 4) == PI_OK && pi_session_n_past(s) == 8);
    decode_all(s, toks + 8, 4, b, V);
    CHECK(!memcmp(a, b, (size_t)V * sizeof *a));
    /* dropping the middle: later positions move down and decoding goes on */
    CHECK(pi_session_kv_discard(s, 2, 6) == PI_OK && pi_session_n_past(s) == 6);
    decode_all(s, toks + 6, 3, b, V);
    bool finite = true;
    for (int64_t i = 0; i < V; i++) finite &= isfinite(b[i]);
    CHECK(finite && pi_session_n_past(s) == 9);
    /* out of range */
    CHECK(pi_session_kv_truncate(s, 10) == PI_ERR_INVALID && strstr(pi_last_error(), "pi_session_kv_truncate"));
    CHECK(pi_session_kv_truncate(s, -1) == PI_ERR_INVALID);
    CHECK(pi_session_kv_discard(s, -1, 1) == PI_ERR_INVALID && pi_session_kv_discard(s, 5, 5) == PI_ERR_INVALID);
    CHECK(pi_session_kv_discard(s, 0, -2) == PI_ERR_INVALID && pi_session_n_past(s) == 9);
    free(a);
    free(b);
    pi_session_free(s);
    pi_model_close(m);
}

static volatile int g_stop_flag;

static void test_generate_stops(const char *model) {
    pi_model *m = NULL;
    CHECK(pi_model_open(model, NULL, &m) == PI_OK);
    if (!m) return;
    pi_session_params sp = pi_session_default_params();
    sp.n_ctx = 10;
    pi_session *s = NULL;
    CHECK(pi_session_create(m, &sp, &s) == PI_OK);
    pi_sampler *smp = greedy(m);
    int32_t bos = 1;
    pi_generate_params gp = pi_generate_default_params();
    pi_generate_result res;
    sink k;
    /* the callback stops after 3 pieces, which are evaluated */
    memset(&k, 0, sizeof k);
    k.stop_after = 3;
    CHECK(pi_generate(s, smp, &bos, 1, &gp, collect, &k, &res) == PI_OK);
    CHECK(res.stop == PI_STOP_CALLER && res.n_generated == 3 && pi_session_n_past(s) == 4);
    /* continue from the session's logits (no prompt) until the context is full */
    memset(&k, 0, sizeof k);
    CHECK(pi_generate(s, smp, NULL, 0, &gp, collect, &k, &res) == PI_OK);
    CHECK(res.stop == PI_STOP_CONTEXT && res.n_generated == 7 && pi_session_n_past(s) == 10 && k.n > 0);
    /* the stop flag, set before the first token */
    CHECK(pi_session_kv_clear(s) == PI_OK);
    g_stop_flag = 1;
    gp.stop = &g_stop_flag;
    CHECK(pi_generate(s, smp, &bos, 1, &gp, collect, &k, &res) == PI_OK);
    CHECK(res.stop == PI_STOP_CALLER && res.n_generated == 0 && pi_session_n_past(s) == 1);
    /* n_predict 0 only evaluates the prompt */
    gp.stop = NULL;
    gp.n_predict = 0;
    CHECK(pi_generate(s, smp, &bos, 1, &gp, NULL, NULL, &res) == PI_OK && res.n_generated == 0 &&
          pi_session_n_past(s) == 2);
    /* nothing to continue from */
    CHECK(pi_session_kv_clear(s) == PI_OK);
    gp.n_predict = 4;
    CHECK(pi_generate(s, smp, NULL, 0, &gp, NULL, NULL, &res) == PI_ERR_INVALID &&
          strstr(pi_last_error(), "nothing to continue"));
    pi_sampler_free(smp);
    pi_session_free(s);
    pi_model_close(m);
}

/* relu-stories: the oracle FFN writes the dense FFN's greedy text. */
static void test_oracle(const char *model) {
    pi_model_params mp = pi_model_default_params();
    mp.ffn = PI_FFN_ORACLE;
    mp.n_threads = 2;
    pi_model *m = NULL;
    CHECKF(pi_model_open(model, &mp, &m) == PI_OK, "%s", pi_last_error());
    if (!m) return;
    pi_model_info in;
    CHECK(pi_model_get_info(m, &in) == PI_OK && in.ffn == PI_FFN_ORACLE && !strcmp(in.activation, "relu"));
    pi_session *orc = NULL, *dense = NULL;
    pi_session_params dp = pi_session_default_params();
    dp.ffn = PI_FFN_DENSE;
    CHECK(pi_session_create(m, NULL, &orc) == PI_OK && pi_session_create(m, &dp, &dense) == PI_OK);
    if (!orc || !dense) return;
    CHECK(pi_session_ffn(orc) == PI_FFN_ORACLE && pi_session_ffn(dense) == PI_FFN_DENSE);
    sink a, b;
    CHECK(gen_text(orc, m, 40, &a) == PI_OK && gen_text(dense, m, 40, &b) == PI_OK);
    CHECKF(a.n == b.n && !memcmp(a.buf, b.buf, a.n), "oracle text differs from dense:\n%s\n%s", a.buf, b.buf);
    pi_token_stats st;
    pi_layer_stats ls;
    /* BOS and the 40 tokens: one-token steps on the sparse path */
    CHECK(pi_session_stats(orc, &st) == PI_OK && st.decode_tokens == 41 && st.neurons_active > 0 &&
          st.neurons_computed == st.neurons_active);
    CHECK(pi_session_layer_stats(orc, 0, &ls) == PI_OK && ls.tokens == 41 && ls.active > 0);
    CHECK(pi_session_layer_stats(orc, in.n_layer, &ls) == PI_ERR_INVALID && strstr(pi_last_error(), "layer"));
    CHECK(pi_session_layer_stats(dense, 0, &ls) == PI_ERR_INVALID && strstr(pi_last_error(), "densely"));
    CHECK(pi_session_set_recall_check(orc, true) == PI_ERR_INVALID);
    CHECK(pi_session_set_recall_check(dense, true) == PI_ERR_INVALID);
    pi_session_free(orc);
    pi_session_free(dense);
    pi_model_close(m);

    /* a model opened for dense sessions refuses sparse ones */
    CHECK(pi_model_open(model, NULL, &m) == PI_OK);
    pi_session_params op = pi_session_default_params();
    op.ffn = PI_FFN_ORACLE;
    pi_session *x = NULL;
    CHECK(pi_session_create(m, &op, &x) == PI_ERR_INVALID && x == NULL && strstr(pi_last_error(), "dense"));
    pi_model_close(m);
    /* a ReLU model without predictors cannot run the predictor's sparse FFN */
    mp.ffn = PI_FFN_SPARSE;
    CHECK(pi_model_open(model, &mp, &m) == PI_ERR_INVALID && m == NULL && strstr(pi_last_error(), "predictor"));
}

typedef struct {
    pi_model *m;
    sink out;
    pi_status st;
} thread_job;

static void *thread_main(void *arg) {
    thread_job *j = arg;
    pi_session_params sp = pi_session_default_params();
    sp.n_threads = 1;
    sp.n_ctx = 128;
    pi_session *s = NULL;
    j->st = pi_session_create(j->m, &sp, &s);
    if (!j->st) j->st = gen_text(s, j->m, 64, &j->out);
    pi_session_free(s);
    return NULL;
}

static void test_threads(const char *model) {
    pi_model *m = NULL;
    CHECK(pi_model_open(model, NULL, &m) == PI_OK);
    if (!m) return;
    thread_job seq, j[2];
    memset(&seq, 0, sizeof seq);
    memset(j, 0, sizeof j);
    seq.m = j[0].m = j[1].m = m;
    thread_main(&seq);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, thread_main, &j[i]) == 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++)
        CHECKF(j[i].st == PI_OK && j[i].out.n == seq.out.n && !memcmp(j[i].out.buf, seq.out.buf, seq.out.n),
               "thread %d's text differs from the sequential one", i);
    pi_model_close(m);
}

/* Every call with a NULL handle or a bad argument: PI_ERR_INVALID, a message, no crash. */
#define INVALID(call)                                                                                  \
    do {                                                                                               \
        pi_status st_ = (call);                                                                        \
        CHECKF(st_ == PI_ERR_INVALID && pi_last_error()[0], "%s gave %s", #call, pi_status_str(st_)); \
    } while (0)

static void test_misuse(const char *model) {
    pi_model *m = NULL;
    pi_session *s = NULL;
    pi_sampler *smp = NULL;
    pi_model_info in;
    pi_memory_report mr;
    pi_token_stats ts;
    pi_layer_stats ls;
    pi_budget_info bi;
    int32_t tok = 1, ids[4];
    size_t n;
    const char *piece;
    char buf[16];
    double bw;

    INVALID(pi_model_open(NULL, NULL, &m));
    INVALID(pi_model_open(model, NULL, NULL));
    CHECK(pi_model_open("/nonexistent/model.gguf", NULL, &m) != PI_OK && m == NULL &&
          strstr(pi_last_error(), "/nonexistent/model.gguf"));
    pi_model_params bad = pi_model_default_params();
    bad.ffn = (pi_ffn_mode)9;
    INVALID(pi_model_open(model, &bad, &m));
    bad = pi_model_default_params();
    bad.n_threads = -1;
    INVALID(pi_model_open(model, &bad, &m));
    bad = pi_model_default_params();
    bad.n_ctx = -5;
    INVALID(pi_model_open(model, &bad, &m));
    bad = pi_model_default_params();
    bad.io = (pi_io_backend)7;
    INVALID(pi_model_open(model, &bad, &m));
    bad = pi_model_default_params();
    bad.ffn = PI_FFN_ORACLE;
    bad.mem_budget = 1 << 30;
    INVALID(pi_model_open(model, &bad, &m));
    bad = pi_model_default_params();
    bad.ffn = PI_FFN_ORACLE; /* a SiLU model */
    CHECK(pi_model_open(model, &bad, &m) == PI_ERR_INVALID && strstr(pi_last_error(), "ReLU"));
    bad = pi_model_default_params();
    bad.mem_budget = 1 << 30; /* not a bundle file */
    bad.no_plan = true;
    CHECK(pi_model_open(model, &bad, &m) == PI_ERR_INVALID && strstr(pi_last_error(), "bundle"));
    CHECK(m == NULL);

    INVALID(pi_model_get_info(NULL, &in));
    INVALID(pi_model_memory(NULL, &mr));
    CHECK(pi_model_n_vocab(NULL) == 0 && pi_model_tokenizer(NULL) == NULL);
    pi_model_close(NULL);
    INVALID(pi_budget_query(NULL, 0, &bi));
    CHECK(pi_budget_query(model, 0, &bi) == PI_ERR_INVALID && strstr(pi_last_error(), "bundle"));
    INVALID(pi_probe_memory_bandwidth(1, 1 << 20, NULL));
    INVALID(pi_session_create(NULL, NULL, &s));

    CHECK(pi_model_open(model, NULL, &m) == PI_OK);
    if (!m) return;
    const pi_tokenizer *t = pi_model_tokenizer(m);
    INVALID(pi_model_get_info(m, NULL));
    INVALID(pi_session_create(m, NULL, NULL));
    pi_session_params sp = pi_session_default_params();
    sp.n_ctx = -1;
    INVALID(pi_session_create(m, &sp, &s));
    sp = pi_session_default_params();
    sp.ffn = PI_FFN_SPARSE;
    INVALID(pi_session_create(m, &sp, &s));
    sp = pi_session_default_params();
    sp.n_ctx = 8;
    CHECK(pi_session_create(m, &sp, &s) == PI_OK);

    /* sessions */
    INVALID(pi_session_eval(NULL, &tok, 1));
    INVALID(pi_session_eval(s, NULL, 3));
    INVALID(pi_session_eval_logits(s, &tok, 1, NULL));
    INVALID(pi_session_decode(NULL, 1));
    CHECK(pi_session_decode(s, -1) == PI_ERR_INVALID && strstr(pi_last_error(), "vocabulary"));
    CHECK(pi_session_decode(s, 512) == PI_ERR_INVALID && strstr(pi_last_error(), "vocabulary"));
    int32_t nine[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    CHECK(pi_session_eval(s, nine, 9) == PI_ERR_INVALID && strstr(pi_last_error(), "context"));
    CHECK(pi_session_n_past(s) == 0 && pi_session_logits(s) == NULL);
    CHECK(pi_session_eval(s, nine, 8) == PI_OK && pi_session_n_past(s) == 8);
    CHECK(pi_session_decode(s, 1) == PI_ERR_INVALID && strstr(pi_last_error(), "context") &&
          pi_session_n_past(s) == 8 && pi_session_logits(s) != NULL);
    CHECK(pi_session_logits(NULL) == NULL && pi_session_n_past(NULL) == -1 && pi_session_n_ctx(NULL) == -1 &&
          pi_session_n_threads(NULL) == -1);
    INVALID(pi_session_kv_clear(NULL));
    INVALID(pi_session_kv_truncate(NULL, 0));
    INVALID(pi_session_kv_discard(NULL, 0, 0));
    INVALID(pi_session_stats(NULL, &ts));
    INVALID(pi_session_stats(s, NULL));
    INVALID(pi_session_reset_stats(NULL));
    INVALID(pi_session_layer_stats(NULL, 0, &ls));
    INVALID(pi_session_set_recall_check(NULL, true));
    pi_session_free(NULL);

    /* sampler and generation */
    INVALID(pi_sampler_create(NULL, 512, &smp));
    pi_sampler_params spp = pi_sampler_default_params();
    INVALID(pi_sampler_create(&spp, 0, &smp));
    spp.top_p = 0.0f;
    INVALID(pi_sampler_create(&spp, 512, &smp));
    CHECK(pi_sampler_sample(NULL, pi_session_logits(s)) == -1 && pi_last_error()[0]);
    pi_sampler_accept(NULL, 1);
    pi_sampler_reset(NULL);
    pi_sampler_free(NULL);
    smp = greedy(m);
    CHECK(pi_sampler_sample(smp, NULL) == -1);
    INVALID(pi_generate(NULL, smp, &tok, 1, NULL, NULL, NULL, NULL));
    INVALID(pi_generate(s, NULL, &tok, 1, NULL, NULL, NULL, NULL));
    INVALID(pi_generate(s, smp, NULL, 1, NULL, NULL, NULL, NULL));

    /* tokenizer */
    INVALID(pi_tokenize(NULL, "a", 1, false, false, ids, 4, &n));
    INVALID(pi_tokenize(t, "a", 1, false, false, ids, 4, NULL));
    INVALID(pi_token_piece(NULL, 1, false, &piece, &n));
    INVALID(pi_token_piece(t, 512, false, &piece, &n));
    INVALID(pi_detokenize(NULL, ids, 1, buf, sizeof buf, &n));
    CHECK(pi_tokenizer_bos(NULL) == -1 && pi_tokenizer_n_vocab(NULL) == 0 && !pi_tokenizer_is_eog(NULL, 2) &&
          !pi_tokenizer_add_bos(NULL));
    CHECK(pi_utf8_check("ok", 2, NULL) && !pi_utf8_check("\xff", 1, &n) && n == 0);

    /* a session whose model was closed fails cleanly; freeing it still works */
    pi_model_close(m);
    CHECK(pi_session_eval(s, &tok, 1) == PI_ERR_INVALID && strstr(pi_last_error(), "closed"));
    CHECK(pi_session_decode(s, 1) == PI_ERR_INVALID && strstr(pi_last_error(), "closed"));
    CHECK(pi_session_logits(s) == NULL && pi_session_n_past(s) == -1);
    INVALID(pi_session_kv_clear(s));
    INVALID(pi_session_stats(s, &ts));
    CHECK(pi_generate(s, smp, &tok, 1, NULL, NULL, NULL, NULL) == PI_ERR_INVALID && strstr(pi_last_error(), "closed"));
    pi_session_free(s);
    pi_sampler_free(smp);
    CHECK(pi_probe_memory_bandwidth(1, 16 << 20, &bw) == PI_OK && bw > 0.0);
    CHECK(strlen(pi_system_info()) > 0 && !strcmp(pi_version(), PI_VERSION_STRING));
    CHECK(!strcmp(pi_status_str(PI_ERR_INVALID), "invalid") && !strcmp(pi_status_str(PI_ERR_FULL), "full"));
}

/* pi_model_note_reads: the run's figure lands in the cache file of the
   model's filesystem, the file keeps the probe's time, the read rate the
   benchmarks' floor uses stays the probe's, and the planner's figures are
   scaled by the run's factor. */
static void test_note_reads(const char *bundle, pi_model_params *mp) {
    char cache[512], cpath[1024], got[1024] = "x", *old = getenv("XDG_CACHE_HOME");
    old = old ? strdup(old) : NULL;
    t_tmp_path(cache, sizeof cache, "api-cache");
    setenv("XDG_CACHE_HOME", cache, 1);
    struct stat sb;
    CHECK(stat(bundle, &sb) == 0 && pi_hw_default_path(cpath, sizeof cpath, (uint64_t)sb.st_dev) && t_write_hw(cpath));
    const struct timespec old_t[2] = {{1000000000, 0}, {1000000000, 0}};
    CHECK(utimensat(AT_FDCWD, cpath, old_t, 0) == 0);
    mp->hw_path = NULL;
    mp->no_plan = true;
    pi_model *m = NULL;
    CHECKF(pi_model_open(bundle, mp, &m) == PI_OK, "%s", pi_last_error());
    CHECK(pi_model_note_reads(m, 100.0, 128, 1e5, NULL, 0) == PI_ERR_INVALID &&
          pi_model_note_reads(m, 8192.0, 0, 1e5, NULL, 0) == PI_ERR_INVALID &&
          pi_model_note_reads(m, 8192.0, 128, NAN, NULL, 0) == PI_ERR_INVALID &&
          pi_model_note_reads(m, 8192.0, 128, -1.0, NULL, 0) == PI_ERR_INVALID &&
          pi_model_note_reads(NULL, 8192.0, 128, 1e5, NULL, 0) == PI_ERR_INVALID);
    CHECKF(pi_model_note_reads(m, 8192.0, 128, 3e5, got, sizeof got) == PI_OK && !strcmp(got, cpath), "%s | %s",
           pi_last_error(), got);
    pi_hw h;
    CHECKF(pi_hw_load(cpath, &h) == PI_OK && h.run_read_rate == 3e5 && h.run_read_bytes == 8192.0 && h.run_qd == 128 &&
               h.run_time > 1.7e9,
           "%s", pi_last_error());
    /* the output head's reads: beside the random reads' figure, not instead */
    CHECK(pi_model_note_head_reads(m, 0.0, NULL, 0) == PI_ERR_INVALID &&
          pi_model_note_head_reads(m, NAN, NULL, 0) == PI_ERR_INVALID &&
          pi_model_note_head_reads(NULL, 1.0, NULL, 0) == PI_ERR_INVALID);
    CHECKF(pi_model_note_head_reads(m, 0.6, got, sizeof got) == PI_OK && !strcmp(got, cpath), "%s", pi_last_error());
    CHECKF(pi_hw_load(cpath, &h) == PI_OK && h.run_seq_gbs == 0.6 && h.run_read_rate == 3e5, "%s", pi_last_error());
    /* compute: a factor over what the plan was priced at (the file's none: the probe's), beside the rest */
    CHECK(pi_model_note_compute(m, 0.0, NULL, 0) == PI_ERR_INVALID && pi_model_note_compute(m, NAN, NULL, 0) == PI_ERR_INVALID &&
          pi_model_note_compute(m, -1.5, NULL, 0) == PI_ERR_INVALID && pi_model_note_compute(NULL, 1.5, NULL, 0) == PI_ERR_INVALID);
    CHECKF(pi_model_note_compute(m, 1.5, got, sizeof got) == PI_OK && !strcmp(got, cpath), "%s", pi_last_error());
    CHECKF(pi_hw_load(cpath, &h) == PI_OK && h.run_compute_k == 1.5 && h.run_seq_gbs == 0.6 && h.run_read_rate == 3e5,
           "%s", pi_last_error());
    const double mem1 = h.mem_bw[1];
    struct stat cs;
    CHECK(stat(cpath, &cs) == 0 && cs.st_mtime == 1000000000);
    double r128 = 0.0;
    CHECK(pi_model_read_rate(m, 8192, 128, &r128) == PI_OK && fabs(r128 - 100000.0) < 1.0);
    pi_model_close(m);
    pi_hw planned;
    CHECKF(pi_engine_hw(bundle, NULL, &planned) == PI_OK, "%s", pi_last_error());
    CHECKF(fabs(pi_hw_iops(&planned, 8192, 128) - 3e5) < 1.0 && fabs(pi_hw_iops(&planned, 4096, 8) - 1.2e5) < 1.0 &&
               planned.run_read_rate == 0.0 && fabs(planned.seq_read_gbs - 0.6) < 1e-12 && planned.run_seq_gbs == 0.0,
           "planned at %.1f, sequential %.3f GB/s", pi_hw_iops(&planned, 8192, 128), planned.seq_read_gbs);
    CHECKF(fabs(planned.mem_bw[1] / mem1 - 1.5) < 1e-12 && planned.run_compute_k == 0.0, "compute planned at %.3fx",
           planned.mem_bw[1] / mem1);
    /* a new probe (a save without the run's figure) drops it */
    CHECK(t_write_hw(cpath) && pi_engine_hw(bundle, NULL, &planned) == PI_OK &&
          fabs(pi_hw_iops(&planned, 8192, 128) - 1e5) < 1.0);
    remove(cpath);
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/pinfer", cache);
    rmdir(dir);
    rmdir(cache);
    if (old) setenv("XDG_CACHE_HOME", old, 1);
    else unsetenv("XDG_CACHE_HOME");
    free(old);
}

/* Log messages reach the callback. */
static int g_logged;
static void on_log(void *ctx, pi_log_level level, const char *msg) {
    (void)ctx;
    g_logged += level == PI_LOG_WARN && msg[0];
}

static void test_log(const char *relu) {
    /* a file without bundles fails at once with the one message that says
       so, no warning first */
    pi_log_set(on_log, NULL, PI_LOG_WARN);
    pi_model_params mp = pi_model_default_params();
    mp.mem_budget = 1 << 30;
    pi_model *m = NULL;
    CHECK(pi_model_open(relu, &mp, &m) == PI_ERR_INVALID && strstr(pi_last_error(), "convert") &&
          strstr(pi_last_error(), "--bundle"));
    CHECK(g_logged == 0);
    /* a bundle file whose hardware figures cannot be read: a warning, and the
       default split runs */
    const char *pinfer = getenv("PI_TEST_PINFER"), *runner = getenv("PI_TEST_RUNNER");
    char bundle[512], cmd[2048];
    t_tmp_path(bundle, sizeof bundle, "api-bundle.gguf");
    snprintf(cmd, sizeof cmd, "%s %s convert -m %s --bundle -o %s >/dev/null 2>&1", runner ? runner : "",
             pinfer ? pinfer : "", relu, bundle);
    if (pinfer && t_sh(cmd) == 0) {
        mp.hw_path = "/nonexistent/hwprobe.txt";
        pi_model_info in;
        CHECKF(pi_model_open(bundle, &mp, &m) == PI_OK, "%s", pi_last_error());
        CHECK(g_logged > 0 && m && pi_model_get_info(m, &in) == PI_OK && in.offloaded && !in.planned);
        /* the disk's read rate: none measured here; then from a hardware file */
        pi_memory_report mr;
        double rate = -1.0;
        CHECK(pi_model_memory(m, &mr) == PI_OK && mr.queue_depth > 0);
        CHECK(pi_model_read_rate(m, 4096, mr.queue_depth, &rate) == PI_ERR_NOT_FOUND && rate == 0.0 &&
              strstr(pi_last_error(), "hwprobe"));
        CHECK(pi_model_read_rate(m, 0, 8, &rate) == PI_ERR_INVALID && pi_model_read_rate(m, 4096, 0, &rate) == PI_ERR_INVALID &&
              pi_model_read_rate(m, 4096, 8, NULL) == PI_ERR_INVALID && pi_model_read_rate(NULL, 4096, 8, &rate) == PI_ERR_INVALID);
        /* the block device's counters: where the filesystem has one, they only grow */
        pi_disk_counts d0, d1;
        pi_status ds = pi_model_disk_counts(m, &d0);
        CHECKF(ds == PI_OK || ds == PI_ERR_NOT_FOUND, "disk counters: %s", pi_last_error());
        if (ds == PI_OK)
            CHECK(pi_model_disk_counts(m, &d1) == PI_OK && d1.reads >= d0.reads && d1.bytes >= d0.bytes &&
                  d1.busy_s >= d0.busy_s && d0.read_s >= 0.0);
        else
            printf("test_api: no block device counters for %s's filesystem\n", bundle);
        CHECK(pi_model_disk_counts(m, NULL) == PI_ERR_INVALID && pi_model_disk_counts(NULL, &d0) == PI_ERR_INVALID);
        pi_model_close(m);
        char hwf[512];
        t_tmp_path(hwf, sizeof hwf, "api-hw.txt");
        CHECK(t_write_hw(hwf));
        mp.hw_path = hwf;
        mp.no_plan = true;
        CHECKF(pi_model_open(bundle, &mp, &m) == PI_OK, "%s", pi_last_error());
        double r8 = 0.0, r128 = 0.0;
        CHECK(m && pi_model_read_rate(m, 4096, 8, &r8) == PI_OK && pi_model_read_rate(m, 4096, 128, &r128) == PI_OK);
        CHECKF(fabs(r8 - 40000.0) < 1.0 && fabs(r128 - 100000.0) < 1.0, "read rates %.1f %.1f", r8, r128);
        /* a run's achieved reads go to the cache file only, never to a given one */
        CHECK(pi_model_note_reads(m, 8192.0, 128, 1e5, NULL, 0) == PI_ERR_INVALID && strstr(pi_last_error(), hwf));
        pi_model_close(m);
        remove(hwf);
        test_note_reads(bundle, &mp);
        remove(bundle);
    }
    pi_log_set(NULL, NULL, PI_LOG_WARN);
}

int main(void) {
    char model[512], golden[512], relu[512];
    if (!t_fixture(model, sizeof model, "stories260K.gguf") ||
        !t_fixture(golden, sizeof golden, "stories260K.greedy.txt")) {
        fprintf(stderr, "skip: stories260K fixtures absent\n");
        return PI_TEST_SKIP;
    }
    test_golden(model, golden);
    test_kv(model);
    test_generate_stops(model);
    test_threads(model);
    test_misuse(model);
    if (t_fixture(relu, sizeof relu, "relu/relu-stories.gguf")) {
        test_oracle(relu);
        test_log(relu);
    }
    return t_done("test_api");
}
