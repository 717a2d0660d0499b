/*
 * tokenizer.c — loading a vocabulary from GGUF metadata, the string -> id
 * table, special-token partitioning, and the public tokenize / piece /
 * detokenize entry points. The merging algorithms live in spm.c and bpe.c.
 *
 * Behaviour follows llama.cpp (src/llama-vocab.cpp) so that ids match it
 * exactly: the same defaults for missing keys, the same special-token search
 * (longest token first, control/unknown only when asked), the same dummy
 * prefix rules and the same detokenizer clean-up. Where llama.cpp would assert
 * or throw on a malformed vocabulary, load fails with a message instead.
 *
 * Invariants: see tok_internal.h. Every allocation here is proportional to
 * the metadata that was read (or, per call, to the text being processed).
 */
#include "tok_internal.h"

#include "gguf/names.h"
#include "unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Longest text pi_tokenize accepts: symbol indices are int32 and SPM
   triples the size of every space. */
#define PI_TOK_MAX_TEXT ((size_t)1 << 28)

/* ---- string -> id table ---- */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ull;
    }
    return h ^ h >> 29;
}

int32_t pi_tok_lookup(const pi_tokenizer *t, const char *s, size_t n) {
    if (n == 0 || n > t->max_token_len) return -1;
    uint64_t h = hash_bytes(s, n);
    for (size_t i = (size_t)h & t->slot_mask;; i = (i + 1) & t->slot_mask) {
        const pi_tok_slot *sl = &t->slots[i];
        if (sl->id < 0) return -1;
        if (sl->h != (uint32_t)h) continue;
        size_t len;
        const char *p = pi_tok_str(t, sl->id, &len);
        if (len == n && memcmp(p, s, n) == 0) return sl->id;
    }
}

/* Insert id; returns the id already holding the same string, or -1. */
static int32_t slot_insert(pi_tokenizer *t, int32_t id) {
    size_t n;
    const char *s = pi_tok_str(t, id, &n);
    uint64_t h = hash_bytes(s, n);
    for (size_t i = (size_t)h & t->slot_mask;; i = (i + 1) & t->slot_mask) {
        pi_tok_slot *sl = &t->slots[i];
        if (sl->id < 0) {
            sl->id = id;
            sl->h = (uint32_t)h;
            return -1;
        }
        size_t len;
        const char *p = pi_tok_str(t, sl->id, &len);
        if (sl->h == (uint32_t)h && len == n && memcmp(p, s, n) == 0) return sl->id;
    }
}

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

/* ---- loading ---- */

/* Print at most 48 bytes of a token for messages. */
#define SHOWN(len) ((int)((len) < 48 ? (len) : 48))

static pi_status load_strings(pi_tokenizer *t, const pi_gguf_kv *kv) {
    uint64_t n = kv->arr_n;
    if (n == 0) return pi_error(PI_ERR_FORMAT, "tokenizer: %s is empty", PI_KEY_TOKENIZER_TOKENS);
    if (n > (uint64_t)INT32_MAX - 1)
        return pi_error(PI_ERR_FORMAT, "tokenizer: %s has %llu entries, more than ids can address", PI_KEY_TOKENIZER_TOKENS,
                        (unsigned long long)n);
    t->n_vocab = (int32_t)n;
    char empty[32];
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++)
        total += kv->arr_str[i].len ? (size_t)kv->arr_str[i].len
                                    : (size_t)snprintf(empty, sizeof empty, "[EMPTY_%u]", (unsigned)i);
    t->text = malloc(total ? total : 1);
    t->text_off = malloc((n + 1) * sizeof *t->text_off);
    size_t cap = pow2_at_least(2 * n);
    t->slots = malloc(cap * sizeof *t->slots);
    if (!t->text || !t->text_off || !t->slots)
        return pi_error(PI_ERR_NOMEM, "tokenizer: out of memory for %llu tokens", (unsigned long long)n);
    t->slot_mask = cap - 1;
    for (size_t i = 0; i < cap; i++) t->slots[i].id = -1;
    size_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        t->text_off[i] = off;
        const pi_gguf_str *s = &kv->arr_str[i];
        size_t len;
        if (s->len) {
            len = (size_t)s->len;
            memcpy(t->text + off, s->data, len);
        } else {
            /* llama.cpp renames empty strings so they stay addressable. */
            len = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%u]", (unsigned)i);
            memcpy(t->text + off, empty, len);
        }
        off += len;
        if (len > t->max_token_len) t->max_token_len = len;
    }
    t->text_off[n] = off;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        int32_t dup = slot_insert(t, i);
        if (dup >= 0) {
            size_t len;
            const char *s = pi_tok_str(t, i, &len);
            return pi_error(PI_ERR_FORMAT, "tokenizer: %s[%d] repeats token %d ('%.*s')", PI_KEY_TOKENIZER_TOKENS, i, dup,
                            SHOWN(len), s);
        }
    }
    return PI_OK;
}

static pi_status load_scores_types(pi_tokenizer *t, const pi_gguf *g) {
    size_t n = (size_t)t->n_vocab;
    t->score = calloc(n, sizeof *t->score);
    t->type = malloc(n);
    if (!t->score || !t->type) return pi_error(PI_ERR_NOMEM, "tokenizer: out of memory");
    const pi_gguf_kv *kv;
    pi_status st = pi_gguf_get_arr(g, PI_KEY_TOKENIZER_SCORES, PI_GGUF_FLOAT32, &kv);
    if (st == PI_OK) {
        if (kv->arr_n != n)
            return pi_error(PI_ERR_FORMAT, "tokenizer: %s has %llu entries but %s has %zu", PI_KEY_TOKENIZER_SCORES,
                            (unsigned long long)kv->arr_n, PI_KEY_TOKENIZER_TOKENS, n);
        memcpy(t->score, kv->arr_data, n * sizeof(float));
    } else if (st != PI_ERR_NOT_FOUND) {
        return pi_error_prefix(st, "tokenizer");
    }
    memset(t->type, PI_TOKEN_NORMAL, n); /* llama.cpp's default without a type array */
    st = pi_gguf_get_arr(g, PI_KEY_TOKENIZER_TOKEN_TYPE, -1, &kv);
    if (st == PI_OK) {
        if (kv->arr_type != PI_GGUF_INT32 && kv->arr_type != PI_GGUF_UINT32)
            return pi_error(PI_ERR_FORMAT, "tokenizer: %s holds %s, expected i32", PI_KEY_TOKENIZER_TOKEN_TYPE,
                            pi_gguf_vtype_name(kv->arr_type));
        if (kv->arr_n != n)
            return pi_error(PI_ERR_FORMAT, "tokenizer: %s has %llu entries but %s has %zu", PI_KEY_TOKENIZER_TOKEN_TYPE,
                            (unsigned long long)kv->arr_n, PI_KEY_TOKENIZER_TOKENS, n);
        const uint8_t *p = kv->arr_data;
        for (size_t i = 0; i < n; i++) {
            int32_t v;
            memcpy(&v, p + 4 * i, 4);
            t->type[i] = (uint8_t)(v >= PI_TOKEN_NORMAL && v <= PI_TOKEN_BYTE ? v : PI_TOKEN_UNDEFINED);
        }
    } else if (st != PI_ERR_NOT_FOUND) {
        return pi_error_prefix(st, "tokenizer");
    }
    return PI_OK;
}

/* A special-token id key: absent, negative or 0xFFFFFFFF leave *id as it
   is (llama.cpp keeps its default then); any other value must be a token. */
static pi_status get_id(const pi_tokenizer *t, const pi_gguf *g, const char *key, int32_t *id) {
    const pi_gguf_kv *kv = pi_gguf_find_kv(g, key);
    if (!kv) return PI_OK;
    int64_t v;
    switch (kv->type) {
    case PI_GGUF_UINT8: case PI_GGUF_UINT16: case PI_GGUF_UINT32: case PI_GGUF_UINT64:
        if (kv->val.u64 == UINT32_MAX || kv->val.u64 == UINT64_MAX) return PI_OK;
        v = kv->val.u64 > INT64_MAX ? INT64_MAX : (int64_t)kv->val.u64;
        break;
    case PI_GGUF_INT8: case PI_GGUF_INT16: case PI_GGUF_INT32: case PI_GGUF_INT64:
        v = kv->val.i64;
        if (v < 0) return PI_OK;
        break;
    default:
        return pi_error(PI_ERR_FORMAT, "tokenizer: %s is %s, expected an integer", key, pi_gguf_vtype_name(kv->type));
    }
    if (v >= t->n_vocab)
        return pi_error(PI_ERR_FORMAT, "tokenizer: %s = %lld is not a token (vocabulary of %d)", key, (long long)v,
                        t->n_vocab);
    *id = (int32_t)v;
    return PI_OK;
}

static pi_status get_flag(const pi_gguf *g, const char *key, bool *v) {
    pi_status st = pi_gguf_get_bool(g, key, v);
    if (st == PI_ERR_NOT_FOUND) return PI_OK;
    return st ? pi_error_prefix(st, "tokenizer") : PI_OK;
}

static bool eog_has(const pi_tokenizer *t, int32_t id) {
    for (int32_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return true;
    return false;
}

#define EOG_MAX 16 /* 3 fill-in-the-middle + 7 names + EOS, EOT, EOM */

static void eog_add(pi_tokenizer *t, int32_t id) {
    if (id < 0 || eog_has(t, id)) return;
    PI_ASSERT(t->n_eog < EOG_MAX);
    int32_t i = t->n_eog++;
    while (i > 0 && t->eog[i - 1] > id) {
        t->eog[i] = t->eog[i - 1];
        i--;
    }
    t->eog[i] = id;
}

/* The first of names that is a token, or -1. */
static int32_t find_first(const pi_tokenizer *t, const char *const *names, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int32_t id = pi_tok_lookup(t, names[i], strlen(names[i]));
        if (id >= 0) return id;
    }
    return -1;
}

#define FW_BAR "\xEF\xBD\x9C" /* U+FF5C, DeepSeek's fullwidth bar */
#define SPM_SP "\xE2\x96\x81" /* U+2581 */
#define NAMES(...) (const char *const[]){__VA_ARGS__}, sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)

/* llama.cpp recognises end-of-turn and fill-in-the-middle tokens by name,
   forces them to CONTROL and builds the end-of-generation set from them. */
static pi_status find_named_tokens(pi_tokenizer *t, const pi_gguf *g) {
    int32_t fim[6] = {-1, -1, -1, -1, -1, -1}; /* pre, suf, mid, pad, rep, sep */
    static const char *const fim_keys[6][2] = {
        {PI_KEY_TOKENIZER_FIM_PRE_ID, PI_KEY_TOKENIZER_PREFIX_ID}, {PI_KEY_TOKENIZER_FIM_SUF_ID, PI_KEY_TOKENIZER_SUFFIX_ID},
        {PI_KEY_TOKENIZER_FIM_MID_ID, PI_KEY_TOKENIZER_MIDDLE_ID}, {PI_KEY_TOKENIZER_FIM_PAD_ID, NULL},
        {PI_KEY_TOKENIZER_FIM_REP_ID, NULL},                   {PI_KEY_TOKENIZER_FIM_SEP_ID, NULL},
    };
    pi_status st;
    for (int k = 0; k < 6; k++)
        for (int j = 0; j < 2; j++)
            if (fim_keys[k][j] && (st = get_id(t, g, fim_keys[k][j], &fim[k]))) return st;

    t->eog = malloc(EOG_MAX * sizeof *t->eog);
    if (!t->eog) return pi_error(PI_ERR_NOMEM, "tokenizer: out of memory");
    int32_t id;
    if (t->eot < 0) {
        id = find_first(t, NAMES("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
                                 "<" FW_BAR "end" SPM_SP "of" SPM_SP "sentence" FW_BAR ">"));
        if (id >= 0) t->eot = id, t->type[id] = PI_TOKEN_CONTROL;
    }
    if (t->eom < 0 && (id = find_first(t, NAMES("<|eom_id|>"))) >= 0) t->eom = id, t->type[id] = PI_TOKEN_CONTROL;
    int32_t found[6] = {
        find_first(t, NAMES("<|fim_prefix|>", "<fim-prefix>", "<" FW_BAR "fim" SPM_SP "begin" FW_BAR ">", "<PRE>")),
        find_first(t, NAMES("<|fim_suffix|>", "<fim-suffix>", "<" FW_BAR "fim" SPM_SP "hole" FW_BAR ">", "<SUF>")),
        find_first(t, NAMES("<|fim_middle|>", "<fim-middle>", "<" FW_BAR "fim" SPM_SP "end" FW_BAR ">", "<MID>")),
        find_first(t, NAMES("<|fim_pad|>", "<fim-pad>", "<PAD>")),
        find_first(t, NAMES("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>")),
        find_first(t, NAMES("<|file_sep|>")),
    };
    for (int k = 0; k < 6; k++) {
        if (fim[k] >= 0 || found[k] < 0) continue;
        fim[k] = found[k];
        t->type[fim[k]] = PI_TOKEN_CONTROL;
    }
    for (int k = 3; k < 6; k++) eog_add(t, fim[k]);
    static const char *const eog_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                            "<|endoftext|>", "<|eom_id|>", "<EOT>"};
    for (size_t i = 0; i < sizeof eog_names / sizeof eog_names[0]; i++) {
        id = pi_tok_lookup(t, eog_names[i], strlen(eog_names[i]));
        if (id < 0) continue;
        eog_add(t, id);
        t->type[id] = PI_TOKEN_CONTROL;
    }
    eog_add(t, t->eos);
    eog_add(t, t->eot);
    eog_add(t, t->eom);
    return PI_OK;
}

typedef struct {
    size_t len;
    int32_t id;
} special_key;

static int cmp_special(const void *a, const void *b) {
    const special_key *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Control, user-defined and unknown tokens, longest first (ties by id: the
   order llama.cpp leaves unspecified). */
static pi_status build_specials(pi_tokenizer *t) {
    int32_t n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        n += t->type[i] == PI_TOKEN_CONTROL || t->type[i] == PI_TOKEN_USER_DEFINED || t->type[i] == PI_TOKEN_UNKNOWN;
    special_key *keys = malloc((size_t)(n ? n : 1) * sizeof *keys);
    t->special = malloc((size_t)(n ? n : 1) * sizeof *t->special);
    if (!keys || !t->special) {
        free(keys);
        return pi_error(PI_ERR_NOMEM, "tokenizer: out of memory");
    }
    int32_t k = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        uint8_t ty = t->type[i];
        if (ty != PI_TOKEN_CONTROL && ty != PI_TOKEN_USER_DEFINED && ty != PI_TOKEN_UNKNOWN) continue;
        keys[k].len = t->text_off[i + 1] - t->text_off[i];
        keys[k].id = i;
        k++;
    }
    qsort(keys, (size_t)n, sizeof *keys, cmp_special);
    for (int32_t i = 0; i < n; i++) t->special[i] = keys[i].id;
    t->n_special = n;
    free(keys);
    return PI_OK;
}

/* Value of an SPM byte token "<0xHH>" (llama.cpp reads the two characters
   after "<0x" as hex); -1 when the string is too short to hold one. */
static int spm_byte_value(const char *s, size_t len) {
    if (len < 4) return -1;
    int v = 0;
    for (size_t i = 3; i < len && i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) break;
        v = v * 16 + d;
    }
    return v;
}

/* Output bytes of token id (special tokens as their text) into dst, which
   has room for piece_bound(); returns the length. */
static size_t make_piece(const pi_tokenizer *t, int32_t id, char *dst) {
    size_t len;
    const char *s = pi_tok_str(t, id, &len);
    uint8_t ty = t->type[id];
    if (ty == PI_TOKEN_CONTROL || ty == PI_TOKEN_UNKNOWN || ty == PI_TOKEN_USER_DEFINED) {
        if (dst) memcpy(dst, s, len);
        return len;
    }
    size_t n = 0;
    if (t->kind == PI_TOKENIZER_SPM) {
        if (ty == PI_TOKEN_BYTE) {
            int v = spm_byte_value(s, len);
            if (v >= 0) {
                if (dst) dst[0] = (char)v;
                return 1;
            }
            ty = PI_TOKEN_NORMAL;
        }
        if (ty != PI_TOKEN_NORMAL) return 0;
        for (size_t i = 0; i < len;) {
            if (len - i >= 3 && memcmp(s + i, SPM_SP, 3) == 0) {
                if (dst) dst[n] = ' ';
                n++;
                i += 3;
            } else {
                if (dst) dst[n] = s[i];
                n++;
                i++;
            }
        }
        return n;
    }
    if (ty != PI_TOKEN_NORMAL) return 0;
    /* Byte-level BPE: each code point stands for one byte. A code point
       outside GPT-2's map is shown as [UNK_BYTE_0x<utf-8 hex>] (llama.cpp also
       repeats the whole token inside the brackets; that is left out here to
       keep pieces proportional to the vocabulary's size). */
    for (size_t i = 0; i < len;) {
        size_t adv;
        uint32_t cp = pi_utf8_decode((const uint8_t *)s + i, len - i, &adv);
        i += adv;
        int b = pi_gpt2_cp_to_byte(cp);
        if (b >= 0) {
            if (dst) dst[n] = (char)b;
            n++;
            continue;
        }
        uint8_t u[4];
        size_t k = pi_utf8_encode(cp, u);
        char tmp[32];
        int m = snprintf(tmp, sizeof tmp, "[UNK_BYTE_0x");
        for (size_t j = 0; j < k; j++) m += snprintf(tmp + m, sizeof tmp - (size_t)m, "%02x", u[j]);
        m += snprintf(tmp + m, sizeof tmp - (size_t)m, "]");
        if (dst) memcpy(dst + n, tmp, (size_t)m);
        n += (size_t)m;
    }
    return n;
}

static pi_status build_pieces(pi_tokenizer *t) {
    size_t n = (size_t)t->n_vocab, total = 0;
    t->piece_off = malloc((n + 1) * sizeof *t->piece_off);
    if (!t->piece_off) return pi_error(PI_ERR_NOMEM, "tokenizer: out of memory");
    for (size_t i = 0; i < n; i++) {
        t->piece_off[i] = total;
        const size_t len = make_piece(t, (int32_t)i, NULL);
        t->max_piece_len = len > t->max_piece_len ? len : t->max_piece_len;
        total += len;
    }
    t->piece_off[n] = total;
    t->piece = malloc(total ? total : 1);
    if (!t->piece) return pi_error(PI_ERR_NOMEM, "tokenizer: out of memory for %zu bytes of pieces", total);
    for (size_t i = 0; i < n; i++) make_piece(t, (int32_t)i, t->piece + t->piece_off[i]);
    return PI_OK;
}

static void build_byte_tables(pi_tokenizer *t) {
    static const char hex[] = "0123456789ABCDEF";
    bool in_long[256] = {0};
    for (int32_t i = 0; i < t->n_vocab; i++) {
        size_t len;
        const char *s = pi_tok_str(t, i, &len);
        if (len > 1)
            for (size_t j = 0; j < len; j++) in_long[(uint8_t)s[j]] = true;
    }
    for (int b = 0; b < 256; b++) t->spm_alone[b] = b < 0x80 && !in_long[b];
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        t->single_tok[b] = pi_tok_lookup(t, &c, 1);
        if (t->kind == PI_TOKENIZER_SPM) {
            char s[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
            int32_t id = pi_tok_lookup(t, s, sizeof s);
            if (id < 0) id = t->single_tok[b];
            if (id < 0) id = t->unk; /* llama.cpp would throw here */
            t->byte_tok[b] = id;
        } else {
            uint8_t u[4];
            size_t k = pi_utf8_encode(pi_gpt2_byte_to_cp((uint8_t)b), u);
            t->byte_tok[b] = pi_tok_lookup(t, (const char *)u, k);
        }
    }
}

pi_status pi_tokenizer_load(const pi_gguf *g, pi_tokenizer **out) {
    if (!out) return pi_error(PI_ERR_INVALID, "pi_tokenizer_load: out is NULL");
    *out = NULL;
    if (!g) return pi_error(PI_ERR_INVALID, "pi_tokenizer_load: no file");
    pi_gguf_str model, pre = {0, NULL};
    pi_status st = pi_gguf_get_str(g, PI_KEY_TOKENIZER_MODEL, &model);
    if (st == PI_ERR_NOT_FOUND) return pi_error(st, "tokenizer: missing key %s", PI_KEY_TOKENIZER_MODEL);
    if (st) return pi_error_prefix(st, "tokenizer");
    pi_tokenizer_kind kind;
    if (pi_gguf_str_eq(model, "llama")) kind = PI_TOKENIZER_SPM;
    else if (pi_gguf_str_eq(model, "gpt2")) kind = PI_TOKENIZER_BPE;
    else
        return pi_error(PI_ERR_UNSUPPORTED, "tokenizer: %s '%.*s' is not supported (supported: llama, gpt2)",
                        PI_KEY_TOKENIZER_MODEL, SHOWN(model.len), model.data);
    pi_bpe_pre pre_kind = PI_PRE_NONE;
    if (kind == PI_TOKENIZER_BPE) {
        st = pi_gguf_get_str(g, PI_KEY_TOKENIZER_PRE, &pre);
        if (st == PI_ERR_NOT_FOUND) pre_kind = PI_PRE_DEFAULT; /* llama.cpp warns and uses its default */
        else if (st) return pi_error_prefix(st, "tokenizer");
        else if ((pre_kind = pi_bpe_pre_from_name(pre.data, (size_t)pre.len)) == PI_PRE_NONE)
            return pi_error(PI_ERR_UNSUPPORTED,
                            "tokenizer: pre-tokenizer '%.*s' (%s) is not supported (supported: gpt-2 and its "
                            "aliases, deepseek-llm, default)",
                            SHOWN(pre.len), pre.data, PI_KEY_TOKENIZER_PRE);
    }
    const pi_gguf_kv *tokens, *merges = NULL;
    st = pi_gguf_get_arr(g, PI_KEY_TOKENIZER_TOKENS, PI_GGUF_STRING, &tokens);
    if (st == PI_ERR_NOT_FOUND) return pi_error(st, "tokenizer: missing key %s", PI_KEY_TOKENIZER_TOKENS);
    if (st) return pi_error_prefix(st, "tokenizer");
    if (kind == PI_TOKENIZER_BPE) {
        st = pi_gguf_get_arr(g, PI_KEY_TOKENIZER_MERGES, PI_GGUF_STRING, &merges);
        if (st == PI_ERR_NOT_FOUND) return pi_error(st, "tokenizer: missing key %s (required for gpt2)", PI_KEY_TOKENIZER_MERGES);
        if (st) return pi_error_prefix(st, "tokenizer");
    }

    pi_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return pi_error(PI_ERR_NOMEM, "tokenizer: out of memory");
    t->kind = kind;
    t->pre = pre_kind;
    if ((st = load_strings(t, tokens)) || (st = load_scores_types(t, g))) goto fail;

    /* llama.cpp's defaults per kind, then the file's keys. */
    if (kind == PI_TOKENIZER_SPM) {
        t->bos = 1, t->eos = 2, t->unk = 0;
        t->add_bos = true, t->add_space_prefix = true;
    } else {
        t->bos = 11, t->eos = 11, t->unk = -1;
        t->clean_spaces = pre_kind != PI_PRE_DEEPSEEK_LLM;
    }
    if (t->bos >= t->n_vocab) t->bos = -1;
    if (t->eos >= t->n_vocab) t->eos = -1;
    if (t->unk >= t->n_vocab) t->unk = -1;
    t->eot = t->eom = t->pad = -1;
    if ((st = get_id(t, g, PI_KEY_TOKENIZER_BOS_ID, &t->bos)) || (st = get_id(t, g, PI_KEY_TOKENIZER_EOS_ID, &t->eos)) ||
        (st = get_id(t, g, PI_KEY_TOKENIZER_EOT_ID, &t->eot)) || (st = get_id(t, g, PI_KEY_TOKENIZER_EOM_ID, &t->eom)) ||
        (st = get_id(t, g, PI_KEY_TOKENIZER_UNK_ID, &t->unk)) ||
        (st = get_id(t, g, PI_KEY_TOKENIZER_PAD_ID, &t->pad)) ||
        (st = get_flag(g, PI_KEY_TOKENIZER_ADD_BOS, &t->add_bos)) ||
        (st = get_flag(g, PI_KEY_TOKENIZER_ADD_EOS, &t->add_eos)) ||
        (st = get_flag(g, PI_KEY_TOKENIZER_ADD_SPACE_PREFIX, &t->add_space_prefix)))
        goto fail;
    if ((st = find_named_tokens(t, g)) || (st = build_specials(t)) || (st = build_pieces(t))) goto fail;
    build_byte_tables(t);
    if (kind == PI_TOKENIZER_BPE && (st = pi_bpe_load_merges(t, merges))) goto fail;
    t->chat = pi_chat_family_of(g);
    *out = t;
    return PI_OK;
fail:
    pi_tokenizer_free(t);
    return st;
}

void pi_tokenizer_free(pi_tokenizer *t) {
    if (!t) return;
    free(t->text);
    free(t->text_off);
    free(t->score);
    free(t->type);
    free(t->piece);
    free(t->piece_off);
    free(t->slots);
    free(t->merges);
    free(t->special);
    free(t->eog);
    free(t);
}

/* ---- accessors ---- */

pi_tokenizer_kind pi_tokenizer_kind_of(const pi_tokenizer *t) { return t->kind; }
const char *pi_tokenizer_pre(const pi_tokenizer *t) { return pi_bpe_pre_name(t->pre); }
/* The queries accept NULL (public API): 0, -1 or false. */
int32_t pi_tokenizer_n_vocab(const pi_tokenizer *t) { return t ? t->n_vocab : 0; }
int32_t pi_tokenizer_bos(const pi_tokenizer *t) { return t ? t->bos : -1; }
int32_t pi_tokenizer_eos(const pi_tokenizer *t) { return t ? t->eos : -1; }
int32_t pi_tokenizer_eot(const pi_tokenizer *t) { return t ? t->eot : -1; }
int32_t pi_tokenizer_unk(const pi_tokenizer *t) { return t ? t->unk : -1; }
int32_t pi_tokenizer_pad(const pi_tokenizer *t) { return t ? t->pad : -1; }
bool pi_tokenizer_add_bos(const pi_tokenizer *t) { return t && t->add_bos; }
bool pi_tokenizer_add_eos(const pi_tokenizer *t) { return t && t->add_eos; }
bool pi_tokenizer_add_space_prefix(const pi_tokenizer *t) { return t && t->add_space_prefix; }
bool pi_tokenizer_is_eog(const pi_tokenizer *t, int32_t id) { return t && id >= 0 && eog_has(t, id); }

pi_token_type pi_tokenizer_token_type(const pi_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab ? (pi_token_type)t->type[id] : PI_TOKEN_UNDEFINED;
}

float pi_tokenizer_score(const pi_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab ? t->score[id] : 0.0f;
}

const char *pi_tokenizer_text(const pi_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) {
        if (len) *len = 0;
        return NULL;
    }
    size_t n;
    const char *s = pi_tok_str(t, id, &n);
    if (len) *len = n;
    return s;
}

int32_t pi_tokenizer_find(const pi_tokenizer *t, const char *text, size_t len) {
    return text ? pi_tok_lookup(t, text, len) : -1;
}

/* ---- special-token partition ---- */

typedef struct {
    size_t off, len;
    int32_t id; /* -1: raw text still to be tokenized */
} frag;

typedef struct {
    frag *v;
    size_t n, cap;
} frag_vec;

static bool frag_push(frag_vec *f, size_t off, size_t len, int32_t id) {
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 16;
        frag *v = realloc(f->v, cap * sizeof *v);
        if (!v) return false;
        f->v = v;
        f->cap = cap;
    }
    f->v[f->n++] = (frag){off, len, id};
    return true;
}

/* Split s[0..n) into raw text and special tokens, the way llama.cpp's
   tokenizer_st_partition does: each special token in turn (longest first)
   is cut out of every raw fragment left by the ones before it. */
static pi_status partition(const pi_tokenizer *t, const char *s, size_t n, bool parse_special, frag_vec *out) {
    frag_vec cur = {0}, nxt = {0};
    if (n == 0) {
        *out = cur;
        return PI_OK;
    }
    if (!frag_push(&cur, 0, n, -1)) goto nomem;
    /* Byte pairs present in the text: most special tokens can be skipped
       without searching. */
    uint64_t pairs[1024] = {0};
    uint8_t bytes[256] = {0};
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)s[i];
        bytes[b] = 1;
        if (i + 1 < n) {
            unsigned p = (unsigned)b << 8 | (uint8_t)s[i + 1];
            pairs[p >> 6] |= 1ull << (p & 63);
        }
    }
    for (int32_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special[k];
        if (!parse_special && t->type[id] != PI_TOKEN_USER_DEFINED) continue;
        size_t len;
        const char *tx = pi_tok_str(t, id, &len);
        if (len > n) continue;
        if (len == 1) {
            if (!bytes[(uint8_t)tx[0]]) continue;
        } else {
            unsigned p = (unsigned)(uint8_t)tx[0] << 8 | (uint8_t)tx[1];
            if (!(pairs[p >> 6] >> (p & 63) & 1)) continue;
        }
        if (!memmem(s, n, tx, len)) continue;
        nxt.n = 0;
        for (size_t f = 0; f < cur.n; f++) {
            frag fr = cur.v[f];
            if (fr.id >= 0) {
                if (!frag_push(&nxt, fr.off, fr.len, fr.id)) goto nomem;
                continue;
            }
            size_t pos = fr.off, end = fr.off + fr.len;
            while (end - pos >= len) {
                const char *m = memmem(s + pos, end - pos, tx, len);
                if (!m) break;
                size_t at = (size_t)(m - s);
                if (at > pos && !frag_push(&nxt, pos, at - pos, -1)) goto nomem;
                if (!frag_push(&nxt, at, len, id)) goto nomem;
                pos = at + len;
            }
            if (pos < end && !frag_push(&nxt, pos, end - pos, -1)) goto nomem;
        }
        frag_vec tmp = cur;
        cur = nxt;
        nxt = tmp;
    }
    free(nxt.v);
    *out = cur;
    return PI_OK;
nomem:
    free(cur.v);
    free(nxt.v);
    return pi_error(PI_ERR_NOMEM, "tokenize: out of memory");
}

/* ---- entry points ---- */

pi_status pi_tokenize(const pi_tokenizer *t, const char *text, size_t len, bool add_bos, bool parse_special,
                      int32_t *out, size_t cap, size_t *n_out) {
    if (!t || !n_out || (len && !text) || (cap && !out))
        return pi_error(PI_ERR_INVALID, "pi_tokenize: a NULL tokenizer, text, out or n_out");
    *n_out = 0;
    if (len > PI_TOK_MAX_TEXT)
        return pi_error(PI_ERR_INVALID, "tokenize: text of %zu bytes exceeds the limit of %zu", len, PI_TOK_MAX_TEXT);
    pi_tok_sink sink = {out, cap, 0};
    if (add_bos) {
        if (t->bos < 0) return pi_error(PI_ERR_INVALID, "tokenize: the vocabulary has no BOS token");
        pi_tok_emit(&sink, t->bos);
    }
    frag_vec fr;
    pi_status st = partition(t, text, len, parse_special, &fr);
    if (st) return st;
    bool prev_special = true; /* SPM: the first fragment gets the dummy prefix */
    for (size_t i = 0; i < fr.n && !st; i++) {
        const frag *f = &fr.v[i];
        if (f->id >= 0) {
            pi_tok_emit(&sink, f->id);
            prev_special = true;
        } else if (t->kind == PI_TOKENIZER_SPM) {
            st = pi_spm_tokenize(t, text + f->off, f->len, t->add_space_prefix && prev_special, &sink);
            prev_special = false;
        } else {
            st = pi_bpe_tokenize(t, text + f->off, f->len, &sink);
        }
    }
    free(fr.v);
    if (st) return st;
    *n_out = sink.n;
    if (sink.n > cap)
        return pi_error(PI_ERR_INVALID, "tokenize: the text needs %zu token(s), room for %zu", sink.n, cap);
    return PI_OK;
}

static const char *piece_of(const pi_tokenizer *t, int32_t id, bool special, size_t *len) {
    uint8_t ty = t->type[id];
    if (!special && (ty == PI_TOKEN_CONTROL || ty == PI_TOKEN_UNKNOWN)) {
        *len = 0;
        return t->piece;
    }
    *len = t->piece_off[id + 1] - t->piece_off[id];
    return t->piece + t->piece_off[id];
}

pi_status pi_token_piece(const pi_tokenizer *t, int32_t id, bool special, const char **piece, size_t *len) {
    if (!t || !piece || !len) return pi_error(PI_ERR_INVALID, "pi_token_piece: a NULL tokenizer, piece or len");
    if (id < 0 || id >= t->n_vocab)
        return pi_error(PI_ERR_INVALID, "token_piece: token id %d is out of range [0, %d)", id, t->n_vocab);
    *piece = piece_of(t, id, special, len);
    return PI_OK;
}

/* llama.cpp's clean-up for BPE vocabularies, done in place with the same
   steps (its in-place reads of already-moved bytes included): drop the
   space before ? ! . , ; turn " ' " into "'"; drop the space before 's 'm
   're 've. Returns the new length. */
static size_t clean_spaces(char *t, size_t total) {
    size_t end = total, k = total ? 1 : 0;
    for (size_t i = 1; i < end; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) k--;
        t[k++] = x;
    }
    end = k, k = end ? 1 : 0;
    for (size_t i = 1; i < end; i++) {
        char x = t[i];
        if (x == '\'' && i + 1 < end && t[i - 1] == ' ' && t[i + 1] == ' ') {
            k--;
            t[++i] = '\0';
        }
        t[k++] = x;
    }
    end = k, k = end ? 1 : 0;
    for (size_t i = 1; i < end; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && x == '\'' && i + 1 < end) {
            char x1 = t[i + 1];
            if (x1 == 's' || x1 == 'm') k--;
            else if (x1 != 't' && x1 != 'd' && i + 2 < end && (x1 == 'r' || x1 == 'v') && t[i + 2] == 'e') k--;
        }
        t[k++] = x;
    }
    return k;
}

pi_status pi_detokenize(const pi_tokenizer *t, const int32_t *ids, size_t n, char *buf, size_t cap, size_t *n_out) {
    if (!t || !n_out || (n && !ids) || (cap && !buf)) return pi_error(PI_ERR_INVALID, "pi_detokenize: a NULL tokenizer, ids, buf or n_out");
    *n_out = 0;
    /* The token whose leading space is the dummy prefix: the first, or the
       one after a leading BOS. */
    size_t strip_at = t->add_space_prefix ? (n > 0 && t->bos >= 0 && ids[0] == t->bos ? 1 : 0) : SIZE_MAX;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return pi_error(PI_ERR_INVALID, "detokenize: token id %d at position %zu is out of range [0, %d)",
                            ids[i], i, t->n_vocab);
        size_t len;
        const char *p = piece_of(t, ids[i], false, &len);
        total += len - (i == strip_at && len && p[0] == ' ');
    }
    char *dst = buf;
    if (total > cap && !(dst = malloc(total)))
        return pi_error(PI_ERR_NOMEM, "detokenize: out of memory for %zu bytes", total);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *p = piece_of(t, ids[i], false, &len);
        if (i == strip_at && len && p[0] == ' ') p++, len--;
        if (len) memcpy(dst + m, p, len);
        m += len;
    }
    if (t->clean_spaces) m = clean_spaces(dst, m);
    if (dst != buf) {
        if (m <= cap && m) memcpy(buf, dst, m);
        free(dst);
    }
    *n_out = m;
    if (m > cap) return pi_error(PI_ERR_INVALID, "detokenize: the text needs %zu bytes, room for %zu", m, cap);
    if (m < cap) buf[m] = '\0';
    return PI_OK;
}
