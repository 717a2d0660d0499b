/*
 * model.c — pi_model: opening a model file as the engine's policy says
 * (a plan or the default split under a memory budget, huge-page loading or
 * a mapping otherwise, the sparse FFN where the model allows it), and the
 * model's queries (include/pinfer.h).
 */
#include "api.h"

#include "api/engine.h"
#include "base/cpu.h"
#include "base/log.h"
#include "base/pool.h"
#include "gguf/names.h"
#include "kernels/kernels.h"
#include "plan/hwprobe.h"
#include "base/units.h"
#include "sparse/ffn_sparse.h"
#include "gguf/predhist.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DEFAULT_CTX_MAX 4096 /* sessions' default context: the model's, at most this */
#define DEFAULT_QD 256 /* a ring that holds a layer's reads and the lookahead's (plan.c: io_left) */

const char *pi_version(void) { return PI_VERSION_STRING; }

const char *pi_system_info(void) {
    static char buf[256];
    static atomic_flag made = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&made))
        snprintf(buf, sizeof buf, "cpu: %s; kernels: %s; %d CPUs", pi_cpu_describe(), pi_kernels_get()->name,
                 pi_cpu_count());
    return buf;
}

pi_model_params pi_model_default_params(void) {
    pi_model_params p;
    memset(&p, 0, sizeof p);
    return p;
}

static int64_t default_ctx(int64_t n_ctx_train) {
    return n_ctx_train > 0 && n_ctx_train < DEFAULT_CTX_MAX ? n_ctx_train : DEFAULT_CTX_MAX;
}

static char *gguf_strdup(const pi_gguf *g, const char *key) {
    pi_gguf_str v = {0, NULL};
    if (pi_gguf_get_str(g, key, &v) != PI_OK) v.len = 0;
    char *s = malloc(v.len + 1);
    if (!s) return NULL;
    if (v.len) memcpy(s, v.data, v.len);
    s[v.len] = '\0';
    return s;
}

static pi_status check_params(const pi_model_params *p) {
    if (p->n_threads < 0 || p->n_threads > 1024)
        return pi_error(PI_ERR_INVALID, "pi_model_open: n_threads %d is outside [0, 1024]", p->n_threads);
    if (p->n_ctx < 0 || p->n_ctx > ((int64_t)1 << 24))
        return pi_error(PI_ERR_INVALID, "pi_model_open: n_ctx %lld is outside [0, 16777216]", (long long)p->n_ctx);
    if ((int)p->ffn < PI_FFN_AUTO || (int)p->ffn > PI_FFN_ORACLE)
        return pi_error(PI_ERR_INVALID, "pi_model_open: ffn mode %d is not a pi_ffn_mode", (int)p->ffn);
    if (p->hot < 0) return pi_error(PI_ERR_INVALID, "pi_model_open: hot %lld is negative", (long long)p->hot);
    if ((int)p->io < PI_IO_AUTO || (int)p->io > PI_IO_PREAD)
        return pi_error(PI_ERR_INVALID, "pi_model_open: io backend %d is not a pi_io_backend", (int)p->io);
    if ((int)p->cache_policy < PI_CACHE_AUTO || (int)p->cache_policy > PI_CACHE_LFU)
        return pi_error(PI_ERR_INVALID, "pi_model_open: cache policy %d is not a pi_cache_policy", (int)p->cache_policy);
    if (p->queue_depth < 0 || p->queue_depth > PI_IO_MAX_QUEUE_DEPTH)
        return pi_error(PI_ERR_INVALID, "pi_model_open: queue_depth %d is outside [0, %d]", p->queue_depth,
                        PI_IO_MAX_QUEUE_DEPTH);
    if (p->recall != 0.0f && !(p->recall > 0.0f && p->recall <= 1.0f))
        return pi_error(PI_ERR_INVALID, "pi_model_open: recall %g is outside (0, 1]", (double)p->recall);
    if (p->n_seq_max < 0 || p->n_seq_max > PI_MAX_SESSIONS)
        return pi_error(PI_ERR_INVALID, "pi_model_open: n_seq_max %d is outside [0, %d]", p->n_seq_max, PI_MAX_SESSIONS);
    if (p->ffn == PI_FFN_ORACLE && p->mem_budget)
        return pi_error(PI_ERR_INVALID, "the oracle FFN computes every gate and needs the FFN in memory: it cannot "
                        "run under a memory budget");
    return PI_OK;
}

/* Take the further sessions' `extra` bytes from the budget, or from a plan
   file's neuron cache (cache != NULL), refusing what cannot hold them. */
static pi_status take_sessions(pi_model_params *p, uint64_t extra, uint64_t *cache) {
    if (!extra) return PI_OK;
    uint64_t *from = cache ? cache : &p->mem_budget;
    if (*from <= extra)
        return pi_error(PI_ERR_NOMEM, "%d sessions need %s more for their KV caches and scratch than one, more than "
                        "the %s %s: raise the budget, lower the context or the number of sessions", p->n_seq_max,
                        PI_BYTES(extra), cache ? "plan's neuron cache of" : "memory budget of", PI_BYTES(*from));
    *from -= extra;
    return PI_OK;
}

/* A plan from plan_path, checked against the file and the budget asked for. */
static pi_status load_plan(const char *path, const pi_model_params *p, pi_plan *plan) {
    pi_status st = pi_plan_load(p->plan_path, plan);
    if (st) return st;
    struct stat sb;
    if (stat(path, &sb) == 0 && plan->model_size && (uint64_t)sb.st_size != plan->model_size)
        return pi_error(PI_ERR_INVALID, "%s was made for a file of %llu bytes, %s has %llu: plan again", p->plan_path,
                        (unsigned long long)plan->model_size, path, (unsigned long long)sb.st_size);
    if (p->mem_budget && p->mem_budget != plan->mem_budget)
        return pi_error(PI_ERR_INVALID, "the memory budget differs from %s's %s: plan again or drop one",
                        p->plan_path, PI_BYTES(plan->mem_budget));
    if (p->recall > 0.0f && plan->recall > 0.0 && fabs(p->recall - plan->recall) > 1e-6)
        return pi_error(PI_ERR_INVALID, "the recall %g differs from %s's %g: plan again or drop one", (double)p->recall,
                        p->plan_path, plan->recall);
    return PI_OK;
}

/* The predictor thresholds: the plan's, or those for params.recall from the
   file's logit histograms; else the file's own stand. */
static pi_status set_thresholds(pi_model *m, const pi_model_params *p) {
    pi_lm *lm = m->lm;
    const int64_t L = pi_ffn_units(&lm->hp); /* a threshold per layer, for a mixture per layer and expert */
    float recall_target = 0.0f;
    if (!pi_gguf_get_f32(lm->gguf, PI_KEY_PREDICTOR_RECALL_TARGET, &recall_target) && recall_target > 0.0f)
        m->recall = recall_target;
    const bool from_plan = m->planned && m->plan.recall > 0.0;
    if (!from_plan && !(p->recall > 0.0f)) return PI_OK;
    if (!lm->has_predictor)
        return pi_error(PI_ERR_INVALID, "%s has no predictors: a recall target chooses their thresholds", m->path);
    if (!lm->layer_threshold && !(lm->layer_threshold = malloc((size_t)L * sizeof *lm->layer_threshold)))
        return pi_error(PI_ERR_NOMEM, "out of memory");
    if (from_plan) {
        if (m->plan.n_layer != L)
            return pi_error(PI_ERR_INVALID, "the plan has thresholds for %lld FFN units, %s has %lld: plan again",
                            (long long)m->plan.n_layer, m->path, (long long)L);
        memcpy(lm->layer_threshold, m->plan.thr, (size_t)L * sizeof *lm->layer_threshold);
        m->recall = (float)m->plan.recall;
        if (!m->plan.split) return PI_OK;
        /* the resident prefixes' own thresholds, in memory as under the budget: the same selection */
        if ((!lm->layer_split && !(lm->layer_split = malloc((size_t)L * sizeof *lm->layer_split))) ||
            (!lm->layer_threshold_hot && !(lm->layer_threshold_hot = malloc((size_t)L * sizeof *lm->layer_threshold_hot))))
            return pi_error(PI_ERR_NOMEM, "out of memory");
        for (int64_t l = 0; l < L; l++) {
            lm->layer_split[l] = m->plan.hot[l] < lm->hp.n_ff ? m->plan.hot[l] : lm->hp.n_ff;
            lm->layer_threshold_hot[l] = m->plan.thr_hot[l];
        }
        return PI_OK;
    }
    pi_pred_hist ph;
    pi_status st = pi_pred_hist_read(lm->gguf, m->path, L, &ph);
    if (!st && !ph.h)
        st = pi_error(PI_ERR_NOT_FOUND, "%s has no predictor logit histograms for a recall target: pinfer profile "
                      "-m PLAIN.gguf -o stats.gguf (the model with predictors), then pinfer convert -m PLAIN.gguf "
                      "--reorder stats.gguf", m->path);
    if (!st) st = pi_pred_hist_thresholds(&ph, p->recall, lm->layer_threshold, NULL, NULL, NULL);
    free(ph.h);
    if (!st) m->recall = p->recall;
    return st;
}

/* Under a budget: the flash state and the model whose FFN it reads. */
static pi_status open_offloaded(const char *path, const pi_model_params *p, int64_t n_ctx, pi_model *m) {
    static const pi_ncache_policy policies[] = {PI_NCACHE_SLRU, PI_NCACHE_LRU, PI_NCACHE_SLRU, PI_NCACHE_LFU};
    pi_offload_opts oo = {.mem_budget = p->mem_budget, .n_ctx = n_ctx, .policy = policies[p->cache_policy],
                          .lookahead = !p->no_lookahead};
    oo.io.backend = p->io;
    oo.io.queue_depth = p->queue_depth ? p->queue_depth : DEFAULT_QD;
    m->queue_depth = oo.io.queue_depth;
    oo.cold_cache_bytes = p->cache_bytes;
    if (m->planned) {
        oo.hot = m->plan.hot;
        oo.cold_cache_bytes = m->plan.cache_bytes;
        oo.head_rows = m->plan.head_rows;
    }
    if (!oo.n_ctx) { /* the session's context is known only from the model: peek at it */
        pi_lm *peek;
        pi_status st = pi_lm_load_ex(path, PI_MAP_FILE, PI_LOAD_FFN_ON_FLASH | PI_LOAD_UNCHECKED, &peek);
        if (st) return st;
        oo.n_ctx = default_ctx(peek->hp.n_ctx_train);
        pi_lm_free(peek);
    }
    m->n_ctx = oo.n_ctx;
    return pi_offload_load(path, &oo, &m->lm, &m->off);
}

/* The sessions' default FFN mode: AUTO becomes sparse where it can run. */
static pi_status resolve_ffn(pi_model *m, pi_ffn_mode want) {
    const pi_lm *lm = m->lm;
    if (want == PI_FFN_AUTO)
        want = lm->has_predictor && lm->hp.act != PI_ACT_SILU ? PI_FFN_SPARSE : PI_FFN_DENSE;
    if (want != PI_FFN_DENSE) {
        pi_status st = pi_sparse_ffn_check(lm, want, false);
        if (st) return st;
        if ((st = pi_lm_make_down_t(m->lm))) return st;
    }
    m->ffn = want;
    return PI_OK;
}

void pi_model_close(pi_model *m) {
    if (!m) return;
    pi_offload_free(m->off);
    pi_tokenizer_free(m->tok);
    pi_lm_free(m->lm);
    free(m->arch);
    free(m->name);
    free(m->path);
    free(m->hw_path);
    pthread_mutex_destroy(&m->off_lock);
    if (m->life) {
        atomic_store(&m->life->alive, false);
        if (atomic_fetch_sub(&m->life->refs, 1) == 1) free(m->life);
    }
    free(m);
}

pi_status pi_model_open(const char *path, const pi_model_params *params, pi_model **out) {
    if (out) *out = NULL;
    if (!path || !out) return pi_error(PI_ERR_INVALID, "pi_model_open: %s is NULL", !path ? "path" : "out");
    pi_model_params p = params ? *params : pi_model_default_params();
    pi_status st = check_params(&p);
    if (st) return st;
    pi_model *m = calloc(1, sizeof *m);
    if (!m || !(m->life = calloc(1, sizeof *m->life))) {
        free(m);
        return pi_error(PI_ERR_NOMEM, "pi_model_open: out of memory");
    }
    atomic_init(&m->life->refs, 1);
    atomic_init(&m->life->alive, true);
    atomic_init(&m->off_users, 0);
    pthread_mutex_init(&m->off_lock, NULL);

    /* Sessions beyond the first under a budget: their KV caches and scratch
       come off the top before the split is chosen (a plan file's split was
       made for one session: they come out of its neuron cache). */
    uint64_t extra = 0;
    const int n_seq = p.n_seq_max > 1 ? p.n_seq_max : 1;
    if (p.mem_budget && n_seq > 1) {
        pi_budget_info q;
        if ((st = pi_budget_query(path, p.n_ctx, &q))) goto fail;
        m->extra_kv = (uint64_t)(n_seq - 1) * q.kv;
        m->extra_scratch = (uint64_t)(n_seq - 1) * q.scratch;
        extra = m->extra_kv + m->extra_scratch;
        if (p.mem_budget < q.minimum + extra) {
            st = pi_error(PI_ERR_NOMEM, "--mem-budget %s is below this model's minimum of %s for %d sessions at "
                          "context %lld (-c) each: %s for one, and %s of KV cache and scratch for each further one",
                          PI_BYTES(p.mem_budget), PI_BYTES(q.minimum + extra), n_seq, (long long)q.n_ctx,
                          PI_BYTES(q.minimum), PI_BYTES(extra / (uint64_t)(n_seq - 1)));
            goto fail;
        }
    }
    m->n_seq_max = n_seq;

    /* the plan: from a file, or made now for a budget */
    if (p.plan_path) {
        if ((st = load_plan(path, &p, &m->plan))) goto fail;
        m->planned = true;
    } else if (p.mem_budget && !p.no_plan && !p.cache_bytes) {
        if ((st = take_sessions(&p, extra, NULL))) goto fail;
        extra = 0;
        /* The file's own problems (no bundles, a budget below its minimum)
           end here with their message; without the machine's figures the
           default split still runs. */
        pi_plan_limits lim = {p.mem_budget, p.n_threads, 0.0, p.recall};
        bool hw_failed;
        st = pi_engine_plan(path, p.hw_path, p.n_ctx, &lim, &m->plan, &hw_failed);
        if (st && !hw_failed && st != PI_ERR_UNSUPPORTED) goto fail;
        if (st == PI_ERR_UNSUPPORTED) PI_LOGI("%s", pi_last_error());
        else if (st) PI_LOGW("cannot measure this machine for the planner (%s); using the default split", pi_last_error());
        m->planned = st == PI_OK;
        st = PI_OK;
    }
    if (m->planned && p.plan_in_memory) { /* the plan's thresholds only */
        p.mem_budget = 0;
        if (!p.n_threads) p.n_threads = m->plan.threads;
    } else if (m->planned) {
        if ((st = take_sessions(&p, extra, &m->plan.cache_bytes))) goto fail;
        p.mem_budget = m->plan.mem_budget - extra;
        /* the plan's memory holds a KV cache for its context: a smaller one
           asked for would hand the difference to the neuron cache, and the
           run would not be the one planned (bench's context of n + 1) */
        if (!p.n_ctx || p.n_ctx < m->plan.n_ctx) p.n_ctx = m->plan.n_ctx;
        if (!p.n_threads) p.n_threads = m->plan.threads;
        if (!p.queue_depth) p.queue_depth = m->plan.queue_depth;
    }

    if (p.mem_budget && !m->planned && extra && (st = take_sessions(&p, extra, NULL))) goto fail;
    if (p.mem_budget) st = open_offloaded(path, &p, p.n_ctx, m);
    else st = pi_lm_load(path, p.use_mmap ? PI_MAP_FILE : PI_MAP_LOAD, &m->lm);
    if (st) goto fail;
    if ((st = pi_tokenizer_load(m->lm->gguf, &m->tok))) goto fail;
    if (pi_tokenizer_n_vocab(m->tok) > m->lm->hp.n_vocab) {
        st = pi_error(PI_ERR_FORMAT, "%s: the tokenizer has %d tokens but the model only %lld", path,
                      pi_tokenizer_n_vocab(m->tok), (long long)m->lm->hp.n_vocab);
        goto fail;
    }
    if (!m->n_ctx) m->n_ctx = p.n_ctx ? p.n_ctx : default_ctx(m->lm->hp.n_ctx_train);
    m->n_threads = p.n_threads;
    m->hot = p.hot;
    if (!(m->path = strdup(path))) {
        st = pi_error(PI_ERR_NOMEM, "pi_model_open: out of memory");
        goto fail;
    }
    if ((st = set_thresholds(m, &p))) goto fail;
    if ((st = resolve_ffn(m, p.ffn))) goto fail;
    m->arch = gguf_strdup(m->lm->gguf, PI_KEY_GENERAL_ARCHITECTURE);
    m->name = gguf_strdup(m->lm->gguf, PI_KEY_GENERAL_NAME);
    if (!m->arch || !m->name) {
        st = pi_error(PI_ERR_NOMEM, "pi_model_open: out of memory");
        goto fail;
    }
    m->file_size = pi_gguf_file_size(m->lm->gguf);
    m->hw_path = p.hw_path ? strdup(p.hw_path) : NULL;
    if (p.hw_path && !m->hw_path) {
        st = pi_error(PI_ERR_NOMEM, "pi_model_open: out of memory");
        goto fail;
    }
    *out = m;
    return PI_OK;
fail:;
    pi_error_saved e;
    pi_error_save(&e);
    pi_model_close(m);
    pi_error_restore(&e);
    return st;
}

static bool model_ok(const pi_model *m, const char *fn) {
    if (m) return true;
    pi_error(PI_ERR_INVALID, "%s: the model is NULL", fn);
    return false;
}

pi_lm *pi_model_lm(pi_model *m) { return m ? m->lm : NULL; }

int64_t pi_model_n_vocab(const pi_model *m) { return m ? m->lm->hp.n_vocab : 0; }

const pi_tokenizer *pi_model_tokenizer(const pi_model *m) { return m ? m->tok : NULL; }

/* Weight bytes of the dense FFNs (gate, up, down) of all layers. */
static uint64_t ffn_bytes(const pi_lm *lm) {
    uint64_t b = 0;
    for (int64_t il = 0; il < lm->hp.n_layer; il++) {
        const pi_layer *l = &lm->layers[il];
        const pi_weight *down = l->ffn_down.data ? &l->ffn_down : &l->ffn_down_t;
        b += pi_weight_nbytes(&l->ffn_gate) + pi_weight_nbytes(&l->ffn_up) + pi_weight_nbytes(down);
        if (l->ffn_gate_exps.data)
            b += pi_weight_nbytes(&l->ffn_gate_exps) + pi_weight_nbytes(&l->ffn_up_exps) +
                 pi_weight_nbytes(&l->ffn_down_exps);
    }
    return b;
}

pi_status pi_model_get_info(const pi_model *m, pi_model_info *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!model_ok(m, "pi_model_get_info")) return PI_ERR_INVALID;
    if (!out) return pi_error(PI_ERR_INVALID, "pi_model_get_info: out is NULL");
    const pi_lm *lm = m->lm;
    const pi_hparams *hp = &lm->hp;
    out->path = lm->path;
    out->arch = m->arch;
    out->name = m->name;
    out->activation = pi_ffn_act_name(hp->act);
    out->kernels = pi_kernels_get()->name;
    out->n_vocab = hp->n_vocab;
    out->n_ctx_train = hp->n_ctx_train;
    out->n_embd = hp->n_embd;
    out->n_layer = hp->n_layer;
    out->n_head = hp->n_head;
    out->n_head_kv = hp->n_head_kv;
    out->n_ff = hp->n_ff;
    out->n_expert = hp->n_expert;
    out->n_expert_used = hp->n_expert_used;
    out->has_predictor = lm->has_predictor;
    out->bundled = lm->bundled;
    out->offloaded = m->off != NULL;
    out->ffn = m->ffn;
    out->hot = m->hot;
    out->n_ctx = m->n_ctx;
    out->n_threads = m->n_threads;
    out->file_size = m->file_size;
    out->weight_bytes = lm->weight_bytes;
    out->n_params = lm->n_params;
    out->bytes_per_token = pi_lm_bytes_per_token(lm);
    out->ffn_bytes = ffn_bytes(lm);
    out->planned = m->planned;
    if (m->planned) {
        out->plan_tok_s = m->plan.cost.tok_s;
        out->plan_threads = m->plan.threads;
        out->plan_queue_depth = m->plan.queue_depth;
        out->plan_cache_bytes = m->plan.cache_bytes;
    }
    out->recall = m->recall;
    return PI_OK;
}

pi_status pi_model_memory(const pi_model *m, pi_memory_report *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!model_ok(m, "pi_model_memory")) return PI_ERR_INVALID;
    if (!out) return pi_error(PI_ERR_INVALID, "pi_model_memory: out is NULL");
    out->weights = m->lm->weight_bytes;
    out->io_backend = "";
    const pi_offload *o = m->off;
    if (!o) return PI_OK;
    out->queue_depth = m->queue_depth;
    const pi_budget *b = &o->budget;
    /* further sessions' KV caches and scratch were taken off the top */
    const uint64_t extra = m->extra_kv + m->extra_scratch;
    out->limit = b->limit ? b->limit + extra : 0;
    out->used = pi_budget_used(b) + extra;
    out->fixed = b->used[PI_MEM_FIXED];
    out->kv = b->used[PI_MEM_KV] + m->extra_kv;
    out->scratch = b->used[PI_MEM_SCRATCH] + m->extra_scratch;
    out->io = b->used[PI_MEM_IO];
    out->hot = b->used[PI_MEM_HOT];
    out->cache = b->used[PI_MEM_COLD];
    out->hot_min = o->n_ff;
    for (int64_t il = 0; il < o->n_layer; il++) {
        out->hot_min = o->hot[il] < out->hot_min ? o->hot[il] : out->hot_min;
        out->hot_max = o->hot[il] > out->hot_max ? o->hot[il] : out->hot_max;
    }
    out->cache_slots = pi_ncache_slots(o->cache);
    out->slot_bytes = o->stride;
    out->io_backend = pi_io_backend_name(o->io);
    out->weights = o->fixed_bytes + o->hot_bytes;
    return PI_OK;
}

pi_status pi_budget_query(const char *path, int64_t n_ctx, pi_budget_info *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!path || !out) return pi_error(PI_ERR_INVALID, "pi_budget_query: %s is NULL", !path ? "path" : "out");
    if (n_ctx < 0 || n_ctx > ((int64_t)1 << 24))
        return pi_error(PI_ERR_INVALID, "pi_budget_query: n_ctx %lld is outside [0, 16777216]", (long long)n_ctx);
    pi_lm *lm;
    pi_status st = pi_lm_load_ex(path, PI_MAP_FILE, PI_LOAD_FFN_ON_FLASH | PI_LOAD_UNCHECKED, &lm);
    if (st) return st;
    if (!lm->bundled) {
        st = pi_error(PI_ERR_INVALID, "%s: a memory budget needs a bundle file: convert it with "
                      "pinfer convert -m %s --bundle -o OUT.gguf", path, path);
        pi_lm_free(lm);
        return st;
    }
    if (!n_ctx) n_ctx = default_ctx(lm->hp.n_ctx_train);
    pi_budget_needs z;
    if (!(st = pi_offload_measure(lm, n_ctx, 0, 4096, &z))) {
        out->head_flash = z.head_flash;
        pi_budget_head_on_flash(&z, 1); /* the smallest budget: with the head on flash where it can be */
        out->minimum = z.minimum;
        out->fixed = z.fixed;
        out->kv = z.kv;
        out->scratch = z.session - z.kv;
        out->io = z.io;
        out->min_cache = z.min_cold;
        out->ffn_bytes = (uint64_t)z.bundle_mem * (uint64_t)(z.n_layer * z.n_ff);
        out->n_ctx = n_ctx;
    }
    pi_lm_free(lm);
    return st;
}

pi_status pi_probe_memory_bandwidth(int n_threads, size_t bytes, double *gb_s) {
    if (gb_s) *gb_s = 0.0;
    if (!gb_s) return pi_error(PI_ERR_INVALID, "pi_probe_memory_bandwidth: gb_s is NULL");
    if (n_threads < 0 || n_threads > 1024)
        return pi_error(PI_ERR_INVALID, "pi_probe_memory_bandwidth: n_threads %d is outside [0, 1024]", n_threads);
    pi_pool *pool;
    pi_status st = pi_pool_create(n_threads, &pool);
    if (st) return st;
    st = pi_probe_read_bw(pool, bytes ? bytes : (size_t)1 << 30, 3, gb_s);
    pi_pool_free(pool);
    return st;
}

pi_status pi_model_read_rate(const pi_model *m, uint64_t read_bytes, int queue_depth, double *reads_per_s) {
    if (reads_per_s) *reads_per_s = 0.0;
    if (!model_ok(m, "pi_model_read_rate")) return PI_ERR_INVALID;
    if (!reads_per_s || !read_bytes || read_bytes > INT_MAX || queue_depth < 1)
        return pi_error(PI_ERR_INVALID, "pi_model_read_rate: %s", !reads_per_s ? "reads_per_s is NULL"
                        : queue_depth < 1 ? "queue_depth below 1" : "read_bytes outside [1, INT_MAX]");
    pi_hw hw;
    pi_status st = pi_engine_hw_cached(m->path, m->hw_path, &hw);
    if (st) return st;
    *reads_per_s = pi_hw_iops(&hw, (int)read_bytes, queue_depth);
    return PI_OK;
}

pi_status pi_model_disk_counts(const pi_model *m, pi_disk_counts *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!model_ok(m, "pi_model_disk_counts")) return PI_ERR_INVALID;
    if (!out) return pi_error(PI_ERR_INVALID, "pi_model_disk_counts: out is NULL");
    struct stat sb;
    if (stat(m->path, &sb) != 0) return pi_error(PI_ERR_IO, "%s: %s", m->path, strerror(errno));
    return pi_hw_disk_counts((uint64_t)sb.st_dev, out);
}

/* The checks every pi_model_note_* makes: a model, and figures that are the
   cache's (a hardware file given at open is the user's). */
static bool note_ok(const pi_model *m, const char *fn, char *path_out, size_t path_n) {
    if (path_out && path_n) path_out[0] = '\0';
    if (!model_ok(m, fn)) return false;
    if (m->hw_path) {
        pi_error(PI_ERR_INVALID, "%s: the figures are %s's (given), not the cache's", fn, m->hw_path);
        return false;
    }
    return true;
}

pi_status pi_model_note_reads(const pi_model *m, double read_bytes, int queue_depth, double reads_per_s,
                              char *path_out, size_t path_n) {
    if (!note_ok(m, "pi_model_note_reads", path_out, path_n)) return PI_ERR_INVALID;
    /* the figures' ranges are the file's: pi_hw_save refuses what would not load */
    return pi_engine_hw_note_run(m->path, read_bytes, queue_depth, reads_per_s, 0.0, 0.0, path_out, path_n);
}

pi_status pi_model_note_head_reads(const pi_model *m, double gbs, char *path_out, size_t path_n) {
    if (!note_ok(m, "pi_model_note_head_reads", path_out, path_n)) return PI_ERR_INVALID;
    if (!(gbs > 0.0) || !isfinite(gbs))
        return pi_error(PI_ERR_INVALID, "pi_model_note_head_reads: %g GB/s is not a rate", gbs);
    return pi_engine_hw_note_run(m->path, 0.0, 0, 0.0, gbs, 0.0, path_out, path_n);
}

pi_status pi_model_note_compute(const pi_model *m, double k, char *path_out, size_t path_n) {
    if (!note_ok(m, "pi_model_note_compute", path_out, path_n)) return PI_ERR_INVALID;
    if (!(k > 0.0) || !isfinite(k))
        return pi_error(PI_ERR_INVALID, "pi_model_note_compute: %g is not a factor", k);
    return pi_engine_hw_note_run(m->path, 0.0, 0, 0.0, 0.0, k, path_out, path_n);
}
