/*
 * fuzz_gguf.c — libFuzzer target for the GGUF reader.
 *
 * Parses the input with pi_gguf_open_mem and, when it is accepted, touches
 * every view the reader hands out (each key, string, string-array element,
 * the last byte of each scalar array and the first and last byte of each
 * tensor's data) and calls the typed getters on common keys. Tensors of a
 * weight type (every quantized type pinfer reads: Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1, Q4_K, Q5_K, Q6_K) have their scales checked as the loader checks
 * them and their first row dequantized. Under ASan any
 * view that escapes the input, and any crash, hang or oversized allocation in
 * the parser, is a finding. The target must also be deterministic and leak
 * nothing: it is replayed by fuzz/replay_main.c in `make test`.
 */
#include "gguf/gguf.h"
#include "kernels/types.h"
#include "kernels/validate.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned g_sink; /* keeps the touches from being optimized out */

static unsigned touch(const void *p, uint64_t n) {
    const uint8_t *b = p;
    return n ? (unsigned)b[0] + b[n - 1] : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pi_gguf *g = NULL;
    if (pi_gguf_open_mem(size ? data : (const uint8_t *)"", size, &g) != PI_OK) return 0;
    unsigned sum = pi_gguf_version(g) + pi_gguf_is_pwri(g) + (unsigned)pi_gguf_alignment(g);
    const uint8_t *base = pi_gguf_base(g);
    uint64_t fsize = pi_gguf_file_size(g);

    for (int64_t i = 0; i < pi_gguf_n_kv(g); i++) {
        const pi_gguf_kv *kv = pi_gguf_kv_at(g, i);
        sum += touch(kv->key.data, kv->key.len);
        sum += pi_gguf_vtype_name(kv->type)[0];
        if (kv->type == PI_GGUF_STRING) sum += touch(kv->str.data, kv->str.len);
        if (kv->type == PI_GGUF_ARRAY) {
            if (kv->arr_type == PI_GGUF_STRING) {
                for (uint64_t j = 0; j < kv->arr_n; j++) sum += touch(kv->arr_str[j].data, kv->arr_str[j].len);
            } else {
                sum += touch(kv->arr_data, kv->arr_n * pi_gguf_vtype_size(kv->arr_type));
            }
        }
        /* Every kv can be found by its key unless the key holds a NUL. */
        if (memchr(kv->key.data, 0, kv->key.len) == NULL && kv->key.len < 4096) {
            char key[4096];
            memcpy(key, kv->key.data, kv->key.len);
            key[kv->key.len] = '\0';
            if (pi_gguf_find_kv(g, key) != kv) __builtin_trap();
        }
    }
    static float row[1 << 14];
    for (int64_t i = 0; i < pi_gguf_n_tensors(g); i++) {
        const pi_gguf_tensor *t = pi_gguf_tensor_at(g, i);
        const pi_type_info *ti = pi_type_get(t->type);
        if (ti && ti->compute && t->ne[0] > 0 && t->ne[0] % ti->blck == 0 && t->ne[0] <= (int64_t)(sizeof row / sizeof row[0])) {
            const size_t rb = pi_row_size((pi_type)t->type, t->ne[0]);
            const int64_t rows = rb ? (int64_t)(t->nbytes / rb) : 0;
            float v;
            sum += (unsigned)pi_rows_bad_scale((pi_type)t->type, t->data, t->ne[0], rows < 64 ? rows : 64, rb, &v);
            if (rows > 0) {
                pi_dequantize_row((pi_type)t->type, t->data, row, t->ne[0]);
                sum += (unsigned)(row[0] != row[0]);
            }
        }
        sum += touch(t->name.data, t->name.len);
        sum += touch(t->data, t->nbytes);
        if ((const uint8_t *)t->data < base + pi_gguf_data_offset(g) ||
            (uint64_t)((const uint8_t *)t->data - base) + t->nbytes > fsize || t->offset % pi_gguf_alignment(g))
            __builtin_trap();
    }
    if (pi_gguf_data_offset(g) > fsize) __builtin_trap();

    static const char *const keys[] = {
        "general.architecture",
        "general.alignment",
        "general.name",
        "llama.context_length",
        "llama.embedding_length",
        "llama.block_count",
        "llama.attention.layer_norm_rms_epsilon",
        "tokenizer.ggml.model",
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.scores",
        "tokenizer.ggml.merges",
        "tokenizer.ggml.add_bos_token",
        "tokenizer.ggml.bos_token_id",
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        uint32_t u;
        int64_t l;
        float f;
        bool b;
        pi_gguf_str s;
        const pi_gguf_kv *kv;
        if (pi_gguf_get_u32(g, keys[i], &u) == PI_OK) sum += u;
        if (pi_gguf_get_i64(g, keys[i], &l) == PI_OK) sum += (unsigned)l;
        if (pi_gguf_get_f32(g, keys[i], &f) == PI_OK) sum += f > 0;
        if (pi_gguf_get_bool(g, keys[i], &b) == PI_OK) sum += b;
        if (pi_gguf_get_str(g, keys[i], &s) == PI_OK) sum += touch(s.data, s.len);
        if (pi_gguf_get_arr(g, keys[i], -1, &kv) == PI_OK) sum += (unsigned)kv->arr_n;
        if (pi_gguf_get_arr(g, keys[i], PI_GGUF_STRING, &kv) == PI_OK && kv->arr_n)
            sum += touch(kv->arr_str[kv->arr_n - 1].data, kv->arr_str[kv->arr_n - 1].len);
    }
    if (pi_gguf_find_tensor(g, "token_embd.weight")) sum++;
    g_sink = sum;
    pi_gguf_close(g);
    return 0;
}
