/*
 * fuzz_tokenizer.c — libFuzzer target for the tokenizers.
 *
 * Text mode (any input not starting with "GGUF"): the bytes (at most 4 KiB)
 * are tokenized with the llama-spm, gpt-2 and deepseek-llm fixture
 * vocabularies (loaded once, from $PI_MODELS_DIR or ../shared/models), with
 * and without BOS and special-token parsing. Every id must be in range, the
 * measuring call must agree with the real one, detokenize must succeed, and
 * valid UTF-8 must come back byte for byte where the tokenizer is lossless
 * (SPM without U+2581 in the text, deepseek-llm without special-token
 * parsing).
 * The ids also pass through a text stream: its pieces are whole UTF-8
 * characters when the text was valid, and joined they equal the token
 * pieces joined. The text, cut at newlines into messages, goes through the
 * chat template: the measuring call agrees, and each shorter conversation's
 * text is a prefix of the longer's.
 * Loader mode (input starting with "GGUF"): the input is parsed as a GGUF file
 * and, when it holds a usable vocabulary, a fixed sample is tokenized with it
 * and put in a chat (its chat template, if any, is the file's); load must
 * fail cleanly or give a tokenizer whose ids are in range.
 *
 * Build with clang from the repository root: fuzz/fuzz_tokenizer.c, every .c
 * file of src/tokenizer, src/gguf and src/base, and src/kernels/types.c, with
 * -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -fsanitize=fuzzer,address,undefined.
 * A violated invariant aborts.
 */
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_VOCAB_FILES 3
static const char *const k_files[N_VOCAB_FILES] = {
    "vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-deepseek-llm.gguf"};
static pi_tokenizer *g_tok[N_VOCAB_FILES];
static int g_loaded;

static void must(int cond, const char *what) {
    if (cond) return;
    fprintf(stderr, "fuzz_tokenizer: invariant violated: %s (%s)\n", what, pi_last_error());
    abort();
}

static void load_vocabularies(void) {
    const char *dir = getenv("PI_MODELS_DIR");
    if (!dir || !*dir) dir = "../shared/models";
    for (int i = 0; i < N_VOCAB_FILES; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, k_files[i]);
        pi_gguf *g;
        if (pi_gguf_open(path, &g) != PI_OK) {
            fprintf(stderr, "fuzz_tokenizer: %s (skipped)\n", pi_last_error());
            continue;
        }
        if (pi_tokenizer_load(g, &g_tok[i]) != PI_OK) {
            fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, pi_last_error());
            abort(); /* the fixtures are valid */
        }
        pi_gguf_close(g);
    }
}

/* Tokenize and check; returns the ids (caller frees) and their count. The
   measuring call (cap 0) is compared with the real one when measure is set. */
static int32_t *run_one(const pi_tokenizer *t, const char *s, size_t n, bool bos, bool special, bool measure,
                        size_t *n_ids) {
    /* Usually enough; otherwise the call reports the size needed. */
    size_t cap = n + 8, got = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    must(ids != NULL, "malloc");
    pi_status st = pi_tokenize(t, s, n, bos, special, ids, cap, &got);
    if (st == PI_ERR_INVALID && got > cap) {
        free(ids);
        cap = got;
        must((ids = malloc(cap * sizeof *ids)) != NULL, "malloc");
        st = pi_tokenize(t, s, n, bos, special, ids, cap, &got);
    }
    if (bos && pi_tokenizer_bos(t) < 0) {
        must(st == PI_ERR_INVALID, "BOS requested without a BOS token");
        free(ids);
        *n_ids = 0;
        return NULL;
    }
    must(st == PI_OK && got <= cap, "tokenize");
    if (measure) {
        size_t need = 0;
        st = pi_tokenize(t, s, n, bos, special, NULL, 0, &need);
        must(need == got && (st == PI_OK) == (got == 0), "measuring call");
        if (got > 1) {
            int32_t one;
            must(pi_tokenize(t, s, n, bos, special, &one, 1, &need) == PI_ERR_INVALID && need == got, "short buffer");
        }
    }
    int32_t nv = pi_tokenizer_n_vocab(t);
    for (size_t i = 0; i < got; i++) must(ids[i] >= 0 && ids[i] < nv, "id in range");
    if (bos) must(got >= 1 && ids[0] == pi_tokenizer_bos(t), "BOS first");
    for (size_t i = 0; i < got; i++) {
        const char *p;
        size_t pl;
        must(pi_token_piece(t, ids[i], i & 1, &p, &pl) == PI_OK, "piece");
    }
    *n_ids = got;
    return ids;
}

static char *detok(const pi_tokenizer *t, const int32_t *ids, size_t n, size_t *len) {
    size_t need = 0;
    pi_status st = pi_detokenize(t, ids, n, NULL, 0, &need);
    must(st == PI_OK ? need == 0 : st == PI_ERR_INVALID && need > 0, "measuring detokenize");
    char *b = malloc(need + 1);
    must(b != NULL, "malloc");
    must(pi_detokenize(t, ids, n, b, need + 1, len) == PI_OK && *len == need, "detokenize");
    return b;
}

/* Stream ids[0..n) (after BOS when bos): whole characters for valid text,
   and always the pieces joined, less the dummy-prefix space after BOS. */
static void stream_check(const pi_tokenizer *t, const int32_t *ids, size_t n, bool bos, bool valid) {
    pi_text_stream *st;
    must(pi_text_stream_create(t, &st) == PI_OK, "text stream");
    pi_text_stream_reset(st, bos && n ? ids[0] : -1);
    size_t joined = 0, pieces = 0;
    for (size_t i = bos ? 1 : 0; i < n; i++) {
        const char *txt, *pc;
        size_t len, pl;
        must(pi_text_stream_push(st, ids[i], &txt, &len) == PI_OK, "stream push");
        must(pi_token_piece(t, ids[i], false, &pc, &pl) == PI_OK, "piece");
        /* a piece right after BOS loses its leading space */
        const bool after_bos = i > 0 && ids[i - 1] == pi_tokenizer_bos(t);
        if (after_bos && pi_tokenizer_add_space_prefix(t) && pl && pc[0] == ' ') pl--;
        if (valid) must(pi_utf8_valid((const uint8_t *)txt, len, NULL), "stream gives whole characters");
        joined += len, pieces += pl;
    }
    const char *txt;
    size_t len;
    pi_text_stream_flush(st, &txt, &len);
    must(joined + len == pieces, "stream text is the pieces joined");
    pi_text_stream_free(st);
}

/* The text cut at newlines into at most 8 messages of cycling roles. */
static void chat_check(const pi_tokenizer *t, const char *s, size_t n) {
    static const char *const roles[] = {"system", "user", "assistant"};
    pi_chat_message msg[8];
    char *copy = malloc(n + 1);
    must(copy != NULL, "malloc");
    memcpy(copy, s, n);
    copy[n] = '\0';
    size_t k = 0;
    for (char *p = copy; k < 8;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        msg[k] = (pi_chat_message){roles[k % 3], p};
        k++;
        if (!nl) break;
        p = nl + 1;
    }
    size_t full = 0, len = 0;
    pi_status st = pi_chat_apply(t, msg, k, true, NULL, 0, &full);
    must(st == (full ? PI_ERR_INVALID : PI_OK), "measuring chat");
    char *all = malloc(full + 1), *part = malloc(full + 1);
    must(all && part, "malloc");
    must(pi_chat_apply(t, msg, k, true, all, full + 1, &len) == PI_OK && len == full, "chat");
    for (size_t j = 1; j < k; j++) {
        must(pi_chat_apply(t, msg, j, false, part, full + 1, &len) == PI_OK && len <= full, "shorter chat");
        must(!memcmp(part, all, len), "a shorter conversation's text is a prefix");
    }
    free(all);
    free(part);
    free(copy);
}

/* Longer texts add little coverage and cost much time: the unit test covers
   100 KB inputs. */
#define TEXT_MAX 4096

static void text_mode(const uint8_t *data, size_t size) {
    const char *s = (const char *)data;
    if (size > TEXT_MAX) size = TEXT_MAX;
    bool valid = pi_utf8_valid(data, size, NULL);
    for (int k = 0; k < N_VOCAB_FILES; k++) {
        const pi_tokenizer *t = g_tok[k];
        if (!t) continue;
        for (int mode = 0; mode < 4; mode++) {
            bool bos = mode & 1, special = mode & 2;
            size_t n, len;
            int32_t *ids = run_one(t, s, size, bos, special, mode == 0, &n);
            char *back = detok(t, ids, n, &len);
            bool spm = pi_tokenizer_kind_of(t) == PI_TOKENIZER_SPM;
            bool lossless = valid && !special &&
                            ((spm && !memmem(s, size, "\xE2\x96\x81", 3)) ||
                             strcmp(pi_tokenizer_pre(t), "deepseek-llm") == 0);
            if (lossless) must(len == size && memcmp(back, s, size) == 0, "round trip");
            stream_check(t, ids, n, bos, valid && !special);
            free(back);
            free(ids);
        }
        chat_check(t, s, size);
    }
}

static void loader_mode(const uint8_t *data, size_t size) {
    pi_gguf *g;
    if (pi_gguf_open_mem(data, size, &g) != PI_OK) return;
    pi_tokenizer *t = NULL;
    pi_status st = pi_tokenizer_load(g, &t);
    pi_gguf_close(g); /* the tokenizer must not point into the file */
    if (st != PI_OK) {
        must(t == NULL && pi_last_error()[0] != '\0', "failed load leaves no tokenizer and a message");
        return;
    }
    static const char sample[] = "Hello world! It's 2024:\n\t  <s> </s> <|endoftext|> \xE2\x96\x81 caf\xC3\xA9 "
                                 "\xE4\xBD\xA0\xE5\xA5\xBD 333 \xF0\x9F\xA6\x99 \xFF\xC3";
    for (int mode = 0; mode < 4; mode++) {
        size_t n, len;
        int32_t *ids = run_one(t, sample, sizeof sample - 1, mode & 1, mode & 2, true, &n);
        free(detok(t, ids, n, &len));
        stream_check(t, ids, n, mode & 1, false);
        free(ids);
    }
    chat_check(t, sample, sizeof sample - 1);
    int32_t nv = pi_tokenizer_n_vocab(t);
    for (int32_t id = 0; id < nv && id < 4096; id++) {
        const char *p;
        size_t pl;
        must(pi_token_piece(t, id, true, &p, &pl) == PI_OK, "piece of every id");
    }
    pi_tokenizer_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_loaded) {
        load_vocabularies();
        g_loaded = 1;
    }
    if (size >= 4 && memcmp(data, "GGUF", 4) == 0) loader_mode(data, size);
    else text_mode(data, size);
    return 0;
}
