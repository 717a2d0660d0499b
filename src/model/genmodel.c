/*
 * genmodel.c — writing random-weight llama GGUFs quickly.
 *
 * Each row of each tensor gets its own PRNG stream (seed, tensor index, row),
 * so rows are generated in parallel yet the file does not depend on the
 * thread count. Weights are uniform with standard deviation 1/sqrt(n_in),
 * which keeps activations of order one through the layers; norms are one.
 * Rows are generated and quantized a slab at a time and streamed to the
 * writer, so memory use stays small whatever the model size.
 */
#include "genmodel.h"

#include "base/pool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    int64_t n_embd, n_head, n_head_kv, n_ff, n_layer, n_vocab, n_ctx;
} preset;

static const preset k_presets[] = {
    {"7b-l8", 4096, 32, 8, 14336, 8, 32000, 4096},
    {"7b", 4096, 32, 8, 14336, 32, 32000, 4096},
    {"small", 1024, 16, 4, 4096, 8, 32000, 2048},
    {"tiny", 256, 8, 4, 768, 4, 32000, 512},
};

static const char *const k_preset_names[] = {"7b-l8", "7b", "small", "tiny", NULL};

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
        return PI_OK;
    }
    return pi_error(PI_ERR_NOT_FOUND, "unknown preset '%s' (7b-l8, 7b, small, tiny)", name);
}

static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct {
    pi_type type;
    int64_t n_in, row0;
    uint64_t stream;   /* seed mixed with the tensor index */
    float scale;       /* half-width of the uniform distribution; 0: all ones */
    size_t row_bytes;
    uint8_t *out;      /* slab of rows */
    float *scratch;    /* (threads, n_in) */
} gen_job;

static void gen_rows(void *ctx, int64_t r0, int64_t r1, int tid) {
    gen_job *j = ctx;
    float *row = j->scratch + (size_t)tid * (size_t)j->n_in;
    for (int64_t r = r0; r < r1; r++) {
        uint64_t s = mix(j->stream ^ mix((uint64_t)(j->row0 + r) + 0x632be59bd9b4e019ull));
        for (int64_t i = 0; i < j->n_in; i++) {
            s += 0x9e3779b97f4a7c15ull;
            uint64_t z = mix(s);
            row[i] = j->scale == 0.0f ? 1.0f : ((float)(z >> 40) * 0x1.0p-24f * 2.0f - 1.0f) * j->scale;
        }
        pi_quantize_row(j->type, row, j->out + (size_t)r * j->row_bytes, j->n_in);
    }
}

typedef struct {
    char name[64];
    pi_type type;
    int n_dims;
    int64_t ne0, ne1;
    float scale;
} gtensor;

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
    if ((st = pi_gguf_set_str(w, "tokenizer.ggml.model", "llama")) ||
        (st = pi_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)strs, NULL, (uint64_t)n_vocab)) ||
        (st = pi_gguf_set_arr(w, "tokenizer.ggml.scores", PI_GGUF_FLOAT32, scores, (uint64_t)n_vocab)) ||
        (st = pi_gguf_set_arr(w, "tokenizer.ggml.token_type", PI_GGUF_INT32, types, (uint64_t)n_vocab)) ||
        (st = pi_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 0)) ||
        (st = pi_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1)) ||
        (st = pi_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 2)))
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
    if ((st = pi_gguf_get_arr(g, "tokenizer.ggml.tokens", PI_GGUF_STRING, &tokens))) {
        pi_error_prefix(st, "vocabulary %s", path);
        pi_gguf_close(g);
        return st;
    }
    *n_vocab = (int64_t)tokens->arr_n;
    for (int64_t i = 0; i < pi_gguf_n_kv(g) && !st; i++) {
        const pi_gguf_kv *kv = pi_gguf_kv_at(g, i);
        if (kv->key.len > 10 && !memcmp(kv->key.data, "tokenizer.", 10)) st = pi_gguf_set_kv(w, kv);
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
    return PI_OK;
}

pi_status pi_genmodel_write(const pi_genmodel_params *p, const char *path) {
    pi_status st = check_params(p);
    if (st) return st;
    pi_gguf_writer *w = NULL;
    pi_pool *pool = NULL;
    gtensor *ts = NULL;
    uint8_t *slab = NULL;
    float *scratch = NULL;
    int64_t n_vocab = p->n_vocab;
    const int64_t E = p->n_embd, hd = p->n_embd / p->n_head, KV = hd * p->n_head_kv, F = p->n_ff;

    if ((st = pi_gguf_writer_create(path, false, &w))) return st;
    if (p->vocab_path) st = copy_vocab(w, p->vocab_path, &n_vocab);
    else st = synthetic_vocab(w, n_vocab);
    if (st) goto done;
    if ((st = pi_gguf_set_str(w, "general.architecture", "llama")) ||
        (st = pi_gguf_set_str(w, "general.name", p->name ? p->name : "pinfer-synthetic")) ||
        (st = pi_gguf_set_u32(w, "llama.context_length", (uint32_t)p->n_ctx)) ||
        (st = pi_gguf_set_u32(w, "llama.embedding_length", (uint32_t)E)) ||
        (st = pi_gguf_set_u32(w, "llama.feed_forward_length", (uint32_t)F)) ||
        (st = pi_gguf_set_u32(w, "llama.block_count", (uint32_t)p->n_layer)) ||
        (st = pi_gguf_set_u32(w, "llama.attention.head_count", (uint32_t)p->n_head)) ||
        (st = pi_gguf_set_u32(w, "llama.attention.head_count_kv", (uint32_t)p->n_head_kv)) ||
        (st = pi_gguf_set_u32(w, "llama.rope.dimension_count", (uint32_t)hd)) ||
        (st = pi_gguf_set_f32(w, "llama.rope.freq_base", 10000.0f)) ||
        (st = pi_gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f)) ||
        (st = pi_gguf_set_u32(w, "llama.vocab_size", (uint32_t)n_vocab)) ||
        (st = pi_gguf_set_str(w, "pinfer.ffn_activation", pi_ffn_act_name(p->act))))
        goto done;

    int64_t n_t = 3 + 9 * p->n_layer;
    if (!(ts = calloc((size_t)n_t, sizeof *ts))) {
        st = pi_error(PI_ERR_NOMEM, "out of memory");
        goto done;
    }
    int nt = 0;
#define ADD(ty, nd, e0, e1, sc, ...) do { snprintf(ts[nt].name, sizeof ts[nt].name, __VA_ARGS__); \
        ts[nt].type = ty; ts[nt].n_dims = nd; ts[nt].ne0 = e0; ts[nt].ne1 = e1; ts[nt].scale = sc; nt++; } while (0)
    const float u = 1.7320508f; /* uniform half-width for unit variance: sqrt(3) */
    ADD(p->embd_type, 2, E, n_vocab, u, "token_embd.weight");
    for (int64_t l = 0; l < p->n_layer; l++) {
        long long L = (long long)l;
        ADD(PI_TYPE_F32, 1, E, 1, 0.0f, "blk.%lld.attn_norm.weight", L);
        ADD(p->type, 2, E, E, u / sqrtf((float)E), "blk.%lld.attn_q.weight", L);
        ADD(p->type, 2, E, KV, u / sqrtf((float)E), "blk.%lld.attn_k.weight", L);
        ADD(p->type, 2, E, KV, u / sqrtf((float)E), "blk.%lld.attn_v.weight", L);
        ADD(p->type, 2, E, E, u / sqrtf((float)E), "blk.%lld.attn_output.weight", L);
        ADD(PI_TYPE_F32, 1, E, 1, 0.0f, "blk.%lld.ffn_norm.weight", L);
        ADD(p->type, 2, E, F, u / sqrtf((float)E), "blk.%lld.ffn_gate.weight", L);
        ADD(p->type, 2, F, E, u / sqrtf((float)F), "blk.%lld.ffn_down.weight", L);
        ADD(p->type, 2, E, F, u / sqrtf((float)E), "blk.%lld.ffn_up.weight", L);
    }
    ADD(PI_TYPE_F32, 1, E, 1, 0.0f, "output_norm.weight");
    ADD(p->output_type, 2, E, n_vocab, u / sqrtf((float)E), "output.weight");
#undef ADD
    for (int i = 0; i < nt && !st; i++) {
        int64_t ne[2] = {ts[i].ne0, ts[i].ne1};
        st = pi_gguf_add_tensor(w, ts[i].name, ts[i].type, (uint32_t)ts[i].n_dims, ne);
    }
    if (st || (st = pi_gguf_writer_begin_data(w)) || (st = pi_pool_create(p->n_threads, &pool))) goto done;

    const int64_t slab_rows = 512;
    int64_t widest = E > F ? E : F;
    size_t slab_bytes = pi_row_size(PI_TYPE_F32, widest) * (size_t)slab_rows;
    slab = malloc(slab_bytes);
    scratch = malloc((size_t)pi_pool_size(pool) * (size_t)widest * sizeof(float));
    if (!slab || !scratch) {
        st = pi_error(PI_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < nt && !st; i++) {
        gen_job j = {ts[i].type, ts[i].ne0, 0, mix(p->seed * 0x9e3779b97f4a7c15ull + (uint64_t)i), ts[i].scale,
                     pi_row_size(ts[i].type, ts[i].ne0), slab, scratch};
        for (int64_t r0 = 0; r0 < ts[i].ne1 && !st; r0 += slab_rows) {
            int64_t rows = ts[i].ne1 - r0 < slab_rows ? ts[i].ne1 - r0 : slab_rows;
            j.row0 = r0;
            pi_pool_for(pool, rows, 8, gen_rows, &j);
            st = pi_gguf_write_data(w, slab, (size_t)rows * j.row_bytes);
        }
    }
done:
    if (w) {
        /* on failure the writer removes the partial file; keep our message */
        pi_error_saved saved;
        pi_error_save(&saved);
        pi_status cst = pi_gguf_writer_close(w);
        if (!st) st = cst;
        else pi_error_restore(&saved);
    }
    pi_pool_free(pool);
    free(ts);
    free(slab);
    free(scratch);
    return st;
}
