/*
 * tok_internal.h — the loaded tokenizer's layout, shared by tokenizer.c (load,
 * special tokens, pieces, detokenize), spm.c and bpe.c. Not a public header.
 *
 * Invariants after load: every token string is non-empty (an empty one is
 * renamed "[EMPTY_<id>]") and unique; every id stored in a field or table is
 * in [0, n_vocab) or -1; merges name two tokens; nothing changes afterwards,
 * so readers need no locks.
 */
#ifndef PI_TOKENIZER_INTERNAL_H
#define PI_TOKENIZER_INTERNAL_H

#include "tokenizer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef enum pi_bpe_pre {
    PI_PRE_NONE = 0,     /* SPM */
    PI_PRE_DEFAULT,      /* llama.cpp's default sequence of four patterns */
    PI_PRE_GPT2,         /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    PI_PRE_DEEPSEEK_LLM, /* six patterns, see bpe.c */
} pi_bpe_pre;

/* Open-addressing slot of the string -> id table. */
typedef struct pi_tok_slot {
    int32_t id; /* -1: empty */
    uint32_t h; /* low bits of the hash, to skip most compares */
} pi_tok_slot;

/* Slot of the (left, right) -> merge table. */
typedef struct pi_merge {
    int32_t left;   /* -1: empty */
    int32_t right;
    int32_t rank;   /* index in tokenizer.ggml.merges (first occurrence wins) */
    int32_t result; /* token of the concatenation, or -1 */
} pi_merge;

struct pi_tokenizer {
    pi_tokenizer_kind kind;
    pi_bpe_pre pre;
    int32_t n_vocab;
    size_t max_token_len;

    char *text;          /* every token string, back to back */
    size_t *text_off;    /* (n_vocab + 1) offsets into text */
    float *score;        /* (n_vocab) */
    uint8_t *type;       /* (n_vocab) pi_token_type */
    char *piece;         /* output bytes of every token (special tokens as text) */
    size_t *piece_off;   /* (n_vocab + 1) offsets into piece */
    size_t max_piece_len; /* the longest piece (with special tokens as text) */

    pi_tok_slot *slots;  /* (slot_mask + 1) string -> id */
    size_t slot_mask;

    pi_merge *merges;    /* (merge_mask + 1), BPE only */
    size_t merge_mask;
    int32_t n_merges;

    /* SPM: token for a byte that no token spells (<0xXX>, else the byte as a
       one-byte string, else unk, else -1). BPE: token spelling the byte's
       GPT-2 code point, or -1. */
    int32_t byte_tok[256];
    /* BPE: token whose string is exactly that one byte, or -1. */
    int32_t single_tok[256];
    /* SPM: ASCII bytes that occur in no token longer than one byte; symbols
       never merge across them. */
    bool spm_alone[256];

    int32_t *special;    /* control/user-defined/unknown ids, longest string first */
    int32_t n_special;

    int32_t bos, eos, eot, eom, unk, pad;
    int32_t *eog;        /* end-of-generation ids, ascending */
    int32_t n_eog;

    bool add_bos, add_eos, add_space_prefix, clean_spaces;
    int chat;            /* the chat template family (chat.c), from tokenizer.chat_template */
};

static inline const char *pi_tok_str(const pi_tokenizer *t, int32_t id, size_t *len) {
    *len = t->text_off[id + 1] - t->text_off[id];
    return t->text + t->text_off[id];
}

/* Where token ids go: counts past cap so the caller learns the size needed. */
typedef struct pi_tok_sink {
    int32_t *out;
    size_t cap;
    size_t n;
} pi_tok_sink;

static inline void pi_tok_emit(pi_tok_sink *s, int32_t id) {
    if (s->n < s->cap) s->out[s->n] = id;
    s->n++;
}

/* A candidate merge of two adjacent symbols, queued by both tokenizers: SPM
   orders by token score (highest first), BPE by merge rank (lowest first),
   each through `key` (-score or rank: both exact in a double), ties going
   to the leftmost pair as in llama.cpp. */
typedef struct pi_tok_pair {
    double key;          /* lower merges first */
    int32_t left, right; /* symbol indices */
    int32_t id;          /* the token the merge makes */
    uint32_t size;       /* bytes of left + right when queued: a pair is stale once it differs */
} pi_tok_pair;

/* Binary min-heap of pairs; grows on push, reused across calls (n = 0). */
typedef struct pi_tok_heap {
    pi_tok_pair *v;
    size_t n, cap;
} pi_tok_heap;

static inline bool pi_tok_pair_before(const pi_tok_pair *a, const pi_tok_pair *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

/* false when out of memory (the heap is unchanged then). */
static inline bool pi_tok_heap_push(pi_tok_heap *h, pi_tok_pair p) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        pi_tok_pair *v = realloc(h->v, cap * sizeof *v);
        if (!v) return false;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!pi_tok_pair_before(&p, &h->v[up])) break;
        h->v[i] = h->v[up];
        i = up;
    }
    h->v[i] = p;
    return true;
}

/* The first pair; the heap must not be empty. */
static inline pi_tok_pair pi_tok_heap_pop(pi_tok_heap *h) {
    pi_tok_pair top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && pi_tok_pair_before(&h->v[c + 1], &h->v[c])) c++;
        if (!pi_tok_pair_before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

/* The id spelled exactly s[0..n), or -1. */
int32_t pi_tok_lookup(const pi_tokenizer *t, const char *s, size_t n);

/* SentencePiece-style tokenization of one text fragment (spm.c); prefix: add
   the dummy-prefix space first. */
pi_status pi_spm_tokenize(const pi_tokenizer *t, const char *s, size_t n, bool prefix, pi_tok_sink *sink);

/* Byte-level BPE of one text fragment: pre-tokenize, then merge (bpe.c). */
pi_status pi_bpe_tokenize(const pi_tokenizer *t, const char *s, size_t n, pi_tok_sink *sink);

/* Build t->merges from tokenizer.ggml.merges (bpe.c); t's strings and lookup
   table must be ready. */
pi_status pi_bpe_load_merges(pi_tokenizer *t, const pi_gguf_kv *kv);

/* Map a tokenizer.ggml.pre value to a pre-tokenizer; PI_PRE_NONE when unknown. */
pi_bpe_pre pi_bpe_pre_from_name(const char *name, size_t len);
const char *pi_bpe_pre_name(pi_bpe_pre pre);

#endif
