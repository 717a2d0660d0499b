/*
 * llama2c.c — llama2.c checkpoint and tokenizer import.
 *
 * Legacy checkpoint layout (run.c): 7 int32 (dim, hidden_dim, n_layers,
 * n_heads, n_kv_heads, vocab_size, seq_len; a negative vocab_size means a
 * separate classifier follows), then float32 arrays: token embedding
 * (vocab, dim); rms_att (L, dim); wq (L, dim, dim); wk, wv (L, kv_dim, dim);
 * wo (L, dim, dim); rms_ffn (L, dim); w1 (L, hidden, dim); w2 (L, dim,
 * hidden); w3 (L, hidden, dim); rms_final (dim); two RoPE tables (seq_len,
 * head_size/2) that GGUF does not need; the classifier (vocab, dim) if any.
 * Matrices are (out, in) row-major, which is GGUF's {in, out} byte for byte,
 * and llama2.c rotates adjacent pairs, which is llama.cpp's normal RoPE: no
 * permutation is needed.
 */
#include "llama2c.h"

#include "base/mapfile.h"
#include "gguf/gguf.h"
#include "gguf/names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp token types */
enum { TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_BYTE = 6 };

static uint64_t n_weights(const pi_llama2c_config *c, int with_cls) {
    uint64_t d = (uint64_t)c->dim, h = (uint64_t)c->hidden_dim, L = (uint64_t)c->n_layers;
    uint64_t kv = d / (uint64_t)c->n_heads * (uint64_t)c->n_kv_heads, V = (uint64_t)c->vocab_size;
    uint64_t hs = d / (uint64_t)c->n_heads;
    uint64_t n = V * d + L * d + L * d * d + 2 * L * kv * d + L * d * d + L * d + 3 * L * h * d + d +
                 2 * (uint64_t)c->seq_len * (hs / 2);
    return with_cls ? n + V * d : n;
}

pi_status pi_llama2c_parse_config(const void *data, size_t size, pi_llama2c_config *out) {
    memset(out, 0, sizeof *out);
    if (size < 28) return pi_error(PI_ERR_FORMAT, "llama2.c checkpoint: %zu bytes is shorter than the 28-byte header", size);
    int32_t h[7];
    memcpy(h, data, sizeof h);
    static const char *names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
    static const int32_t limit[7] = {1 << 16, 1 << 18, 1024, 1024, 1024, 1 << 22, 1 << 22};
    for (int i = 0; i < 7; i++) {
        int32_t v = i == 5 && h[i] < 0 && h[i] != INT32_MIN ? -h[i] : h[i];
        if (v <= 0 || v > limit[i])
            return pi_error(PI_ERR_FORMAT, "llama2.c checkpoint: byte %d: %s = %d is out of range [1, %d]", 4 * i,
                            names[i], h[i], limit[i]);
    }
    pi_llama2c_config c = {h[0], h[1], h[2], h[3], h[4], h[5] < 0 ? -h[5] : h[5], h[6], h[5] > 0};
    if (c.dim % c.n_heads || c.n_heads % c.n_kv_heads || (c.dim / c.n_heads) % 2)
        return pi_error(PI_ERR_FORMAT,
                        "llama2.c checkpoint: dim %d, n_heads %d, n_kv_heads %d do not divide evenly into heads "
                        "of even size",
                        c.dim, c.n_heads, c.n_kv_heads);
    uint64_t want = 28 + 4 * n_weights(&c, !c.shared_classifier);
    if ((uint64_t)size != want)
        return pi_error(PI_ERR_FORMAT,
                        "llama2.c checkpoint: the header (dim %d, hidden %d, layers %d, heads %d/%d, vocab %d, "
                        "seq_len %d) implies %llu bytes but the file has %zu",
                        c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.seq_len,
                        (unsigned long long)want, size);
    *out = c;
    return PI_OK;
}

void pi_llama2c_vocab_free(char **strs, uint64_t *lens, float *scores) {
    if (strs) free(strs[0]);
    free(strs);
    free(lens);
    free(scores);
}

pi_status pi_llama2c_parse_vocab(const void *data, size_t size, int32_t n_vocab, char ***strs_out,
                                 uint64_t **lens_out, float **scores_out) {
    *strs_out = NULL;
    *lens_out = NULL;
    *scores_out = NULL;
    const uint8_t *p = data;
    if (size < 4) return pi_error(PI_ERR_FORMAT, "llama2.c tokenizer: %zu bytes is too short", size);
    int32_t max_len;
    memcpy(&max_len, p, 4);
    if (max_len <= 0 || max_len > 4096)
        return pi_error(PI_ERR_FORMAT, "llama2.c tokenizer: byte 0: max_token_length %d is out of range", max_len);
    if (n_vocab <= 0 || (uint64_t)n_vocab > (size - 4) / 8)
        return pi_error(PI_ERR_FORMAT, "llama2.c tokenizer: %zu bytes cannot hold %d tokens", size, n_vocab);
    char **strs = calloc((size_t)n_vocab, sizeof *strs);
    uint64_t *lens = calloc((size_t)n_vocab, sizeof *lens);
    float *scores = calloc((size_t)n_vocab, sizeof *scores);
    char *block = malloc(size); /* all strings, NUL-separated: never more than the file */
    if (!strs || !lens || !scores || !block) {
        free(block);
        pi_llama2c_vocab_free(strs, lens, scores);
        return pi_error(PI_ERR_NOMEM, "llama2.c tokenizer: out of memory");
    }
    strs[0] = block; /* owner of the block until filled */
    size_t off = 4, used = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        int32_t len;
        if (size - off < 8) {
            pi_llama2c_vocab_free(strs, lens, scores);
            return pi_error(PI_ERR_FORMAT, "llama2.c tokenizer: byte %zu: file ends in token %d of %d", off, i, n_vocab);
        }
        memcpy(&scores[i], p + off, 4);
        memcpy(&len, p + off + 4, 4);
        if (len <= 0 || len > max_len || (size_t)len > size - off - 8) {
            pi_llama2c_vocab_free(strs, lens, scores);
            return pi_error(PI_ERR_FORMAT, "llama2.c tokenizer: byte %zu: token %d has length %d (max %d)", off + 4,
                            i, len, max_len);
        }
        memcpy(block + used, p + off + 8, (size_t)len);
        strs[i] = block + used;
        lens[i] = (uint64_t)len;
        used += (size_t)len;
        off += 8 + (size_t)len;
    }
    if (off != size) {
        pi_llama2c_vocab_free(strs, lens, scores);
        return pi_error(PI_ERR_FORMAT, "llama2.c tokenizer: %zu bytes left after %d tokens (wrong vocabulary size?)",
                        size - off, n_vocab);
    }
    *strs_out = strs;
    *lens_out = lens;
    *scores_out = scores;
    return PI_OK;
}

/* llama2.c vocabularies store SentencePiece pieces with plain spaces and
   BOS/EOS as "\n<s>\n" / "\n</s>\n"; GGUF (and llama.cpp's tokenizer) expect
   U+2581 for spaces and "<s>" / "</s>". Writes the GGUF form of every token
   into one returned block (at most 3x the input), with views in gstrs/glens. */
static char *to_gguf_pieces(char *const *strs, const uint64_t *lens, int32_t n, char **gstrs, uint64_t *glens) {
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) total += 3 * lens[i] + 1;
    char *block = malloc(total), *p = block;
    if (!block) return NULL;
    for (int32_t i = 0; i < n; i++) {
        const char *src = strs[i];
        uint64_t len = lens[i], out = 0;
        if (len == 5 && !memcmp(src, "\n<s>\n", 5)) src = "<s>", len = 3;
        else if (len == 6 && !memcmp(src, "\n</s>\n", 6)) src = "</s>", len = 4;
        char *start = p;
        for (uint64_t k = 0; k < len; k++) {
            if (src[k] == ' ') {
                memcpy(p, "\xe2\x96\x81", 3);
                p += 3;
                out += 3;
            } else {
                *p++ = src[k];
                out++;
            }
        }
        gstrs[i] = start;
        glens[i] = out;
    }
    return block;
}

static int is_byte_token(const char *s, uint64_t n) {
    return n == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>';
}

pi_status pi_llama2c_convert(const char *ckpt_path, const char *tok_path, const char *out_path, const char *name) {
    return pi_llama2c_convert_progress(ckpt_path, tok_path, out_path, name, NULL, NULL);
}

pi_status pi_llama2c_convert_progress(const char *ckpt_path, const char *tok_path, const char *out_path,
                                      const char *name, pi_gguf_progress_fn progress, void *progress_ctx) {
    pi_mapping ck = {0}, tk = {0};
    pi_gguf_writer *w = NULL;
    char **strs = NULL;
    uint64_t *lens = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    char *pieces = NULL, **gstrs = NULL; /* GGUF form of the token strings, views into pieces */
    uint64_t *glens = NULL;
    pi_llama2c_config c;
    pi_status st;
    if ((st = pi_map_file(ckpt_path, &ck))) goto done;
    if ((st = pi_llama2c_parse_config(ck.data, ck.size, &c))) {
        pi_error_prefix(st, "%s", ckpt_path);
        goto done;
    }
    if ((st = pi_map_file(tok_path, &tk))) goto done;
    if ((st = pi_llama2c_parse_vocab(tk.data, tk.size, c.vocab_size, &strs, &lens, &scores))) {
        pi_error_prefix(st, "%s", tok_path);
        goto done;
    }
    gstrs = malloc((size_t)c.vocab_size * sizeof *gstrs);
    glens = malloc((size_t)c.vocab_size * sizeof *glens);
    if (!gstrs || !glens || !(pieces = to_gguf_pieces(strs, lens, c.vocab_size, gstrs, glens)) ||
        !(types = malloc((size_t)c.vocab_size * sizeof *types))) {
        st = pi_error(PI_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < c.vocab_size; i++)
        types[i] = i == 0 ? TOKEN_UNKNOWN : i <= 2 ? TOKEN_CONTROL : is_byte_token(gstrs[i], glens[i]) ? TOKEN_BYTE : TOKEN_NORMAL;

    const int64_t d = c.dim, hd = c.hidden_dim, hs = c.dim / c.n_heads, kv = hs * c.n_kv_heads, V = c.vocab_size;
    if ((st = pi_gguf_writer_create(out_path, false, &w))) goto done;
    pi_gguf_writer_set_progress(w, progress, progress_ctx);
    if ((st = pi_gguf_set_str(w, PI_KEY_GENERAL_ARCHITECTURE, PI_ARCH_LLAMA)) ||
        (st = pi_gguf_set_str(w, PI_KEY_GENERAL_NAME, name ? name : "llama2.c")) ||
        (st = pi_gguf_set_u32(w, PI_LLAMA_KEY(PI_AKEY_CONTEXT_LENGTH), (uint32_t)c.seq_len)) ||
        (st = pi_gguf_set_u32(w, PI_LLAMA_KEY(PI_AKEY_EMBEDDING_LENGTH), (uint32_t)d)) ||
        (st = pi_gguf_set_u32(w, PI_LLAMA_KEY(PI_AKEY_FEED_FORWARD_LENGTH), (uint32_t)hd)) ||
        (st = pi_gguf_set_u32(w, PI_LLAMA_KEY(PI_AKEY_BLOCK_COUNT), (uint32_t)c.n_layers)) ||
        (st = pi_gguf_set_u32(w, PI_LLAMA_KEY(PI_AKEY_HEAD_COUNT), (uint32_t)c.n_heads)) ||
        (st = pi_gguf_set_u32(w, PI_LLAMA_KEY(PI_AKEY_HEAD_COUNT_KV), (uint32_t)c.n_kv_heads)) ||
        (st = pi_gguf_set_u32(w, PI_LLAMA_KEY(PI_AKEY_ROPE_DIMENSION_COUNT), (uint32_t)hs)) ||
        (st = pi_gguf_set_f32(w, PI_LLAMA_KEY(PI_AKEY_ROPE_FREQ_BASE), 10000.0f)) ||
        (st = pi_gguf_set_f32(w, PI_LLAMA_KEY(PI_AKEY_RMS_EPS), 1e-5f)) ||
        (st = pi_gguf_set_str(w, PI_KEY_TOKENIZER_MODEL, "llama")) ||
        (st = pi_gguf_set_arr_str(w, PI_KEY_TOKENIZER_TOKENS, (const char *const *)gstrs, glens, (uint64_t)V)) ||
        (st = pi_gguf_set_arr(w, PI_KEY_TOKENIZER_SCORES, PI_GGUF_FLOAT32, scores, (uint64_t)V)) ||
        (st = pi_gguf_set_arr(w, PI_KEY_TOKENIZER_TOKEN_TYPE, PI_GGUF_INT32, types, (uint64_t)V)) ||
        (st = pi_gguf_set_u32(w, PI_KEY_TOKENIZER_UNK_ID, 0)) ||
        (st = pi_gguf_set_u32(w, PI_KEY_TOKENIZER_BOS_ID, 1)) ||
        (st = pi_gguf_set_u32(w, PI_KEY_TOKENIZER_EOS_ID, 2)))
        goto done;

    /* Source offsets (floats) of each array in the checkpoint. */
    const float *f = (const float *)((const uint8_t *)ck.data + 28);
    const int64_t L = c.n_layers;
    const float *emb = f, *rms_att = emb + V * d, *wq = rms_att + L * d, *wk = wq + L * d * d, *wv = wk + L * kv * d,
                *wo = wv + L * kv * d, *rms_ffn = wo + L * d * d, *w1 = rms_ffn + L * d, *w2 = w1 + L * hd * d,
                *w3 = w2 + L * d * hd, *rms_final = w3 + L * hd * d, *cls = rms_final + d + 2 * c.seq_len * (hs / 2);
    if (c.shared_classifier) cls = NULL;

    typedef struct { char name[PI_NAME_MAX]; int nd; int64_t ne0, ne1; const float *src; } tensor;
    tensor *ts = calloc((size_t)(3 + 9 * L), sizeof *ts);
    if (!ts) {
        st = pi_error(PI_ERR_NOMEM, "out of memory");
        goto done;
    }
    int nt = 0;
#define ADD(nd_, e0, e1, p, ...) do { snprintf(ts[nt].name, sizeof ts[nt].name, __VA_ARGS__); \
        ts[nt].nd = nd_; ts[nt].ne0 = e0; ts[nt].ne1 = e1; ts[nt].src = p; nt++; } while (0)
    ADD(2, d, V, emb, PI_TN_TOKEN_EMBD);
    for (int64_t l = 0; l < L; l++) {
        const int il = (int)l;
        ADD(1, d, 1, rms_att + l * d, PI_TN_ATTN_NORM, il);
        ADD(2, d, d, wq + l * d * d, PI_TN_ATTN_Q, il);
        ADD(2, d, kv, wk + l * kv * d, PI_TN_ATTN_K, il);
        ADD(2, d, kv, wv + l * kv * d, PI_TN_ATTN_V, il);
        ADD(2, d, d, wo + l * d * d, PI_TN_ATTN_OUT, il);
        ADD(1, d, 1, rms_ffn + l * d, PI_TN_FFN_NORM, il);
        ADD(2, d, hd, w1 + l * hd * d, PI_TN_FFN_GATE, il);
        ADD(2, hd, d, w2 + l * d * hd, PI_TN_FFN_DOWN, il);
        ADD(2, d, hd, w3 + l * hd * d, PI_TN_FFN_UP, il);
    }
    ADD(1, d, 1, rms_final, PI_TN_OUTPUT_NORM);
    if (cls) ADD(2, d, V, cls, PI_TN_OUTPUT);
#undef ADD
    for (int i = 0; i < nt && !st; i++) {
        int64_t ne[2] = {ts[i].ne0, ts[i].ne1};
        st = pi_gguf_add_tensor(w, ts[i].name, PI_TYPE_F32, (uint32_t)ts[i].nd, ne);
    }
    if (!st) st = pi_gguf_writer_begin_data(w);
    for (int i = 0; i < nt && !st; i++)
        st = pi_gguf_write_data(w, ts[i].src, (size_t)(ts[i].ne0 * ts[i].ne1) * sizeof(float));
    free(ts);
done:
    st = pi_gguf_writer_finish(w, st);
    pi_llama2c_vocab_free(strs, lens, scores);
    free(pieces);
    free(gstrs);
    free(glens);
    free(types);
    pi_unmap_file(&ck);
    pi_unmap_file(&tk);
    return st;
}
