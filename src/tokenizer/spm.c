/*
 * spm.c — SentencePiece-style tokenization as llama.cpp's llm_tokenizer_spm
 * does it: spaces become U+2581 (after an optional dummy-prefix space), the
 * text is cut into UTF-8 characters (by lead byte, without validation), and
 * adjacent symbols are merged greedily, always taking the pair whose merged
 * string is the token with the highest score (ties: the leftmost pair).
 * Symbols that end up spelling no token are emitted byte by byte through the
 * byte-fallback tokens.
 *
 * Invariants: symbols form a doubly linked list over the escaped text in
 * order; a merged symbol always spells a token (merges only happen then); a
 * queued pair is stale exactly when one side was merged away or the right
 * side grew, which the stored byte size detects.
 */
#include "tok_internal.h"
#include "unicode.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t prev, next; /* -1 at the ends */
    uint32_t off, n;    /* bytes in the escaped text; n == 0 once merged away */
    int32_t id;         /* token spelled, when known (-1: look up at the end) */
} spm_sym;

/* Queue the merge of symbols l and r when their concatenation is a token. */
static bool try_pair(const pi_tokenizer *t, const char *s, const spm_sym *sym, int32_t l, int32_t r, pi_tok_heap *h) {
    if (l < 0 || r < 0) return true;
    uint32_t size = sym[l].n + sym[r].n;
    int32_t id = pi_tok_lookup(t, s + sym[l].off, size);
    if (id < 0) return true;
    return pi_tok_heap_push(h, (pi_tok_pair){-(double)t->score[id], l, r, id, size});
}

/* Merge the symbols of s[0..n) (n >= 1) and emit their tokens. */
static bool spm_chunk(const pi_tokenizer *t, const char *s, size_t n, spm_sym *sym, pi_tok_heap *h, pi_tok_sink *sink) {
    int32_t ns = 0;
    for (size_t off = 0; off < n;) {
        size_t cl = pi_utf8_len_lead((uint8_t)s[off]);
        if (cl > n - off) cl = n - off;
        sym[ns] = (spm_sym){ns - 1, -1, (uint32_t)off, (uint32_t)cl, -1};
        if (ns > 0) sym[ns - 1].next = ns;
        ns++;
        off += cl;
    }
    h->n = 0;
    for (int32_t i = 1; i < ns; i++)
        if (!try_pair(t, s, sym, i - 1, i, h)) return false;

    while (h->n) {
        pi_tok_pair p = pi_tok_heap_pop(h);
        spm_sym *l = &sym[p.left], *r = &sym[p.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != p.size) continue;
        l->n += r->n;
        l->id = p.id;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = p.left;
        if (!try_pair(t, s, sym, l->prev, p.left, h) || !try_pair(t, s, sym, p.left, l->next, h)) return false;
    }

    for (int32_t i = 0; i >= 0; i = sym[i].next) {
        const spm_sym *y = &sym[i];
        int32_t id = y->id >= 0 ? y->id : pi_tok_lookup(t, s + y->off, y->n);
        if (id >= 0) {
            pi_tok_emit(sink, id);
            continue;
        }
        for (uint32_t j = 0; j < y->n; j++) {
            int32_t b = t->byte_tok[(uint8_t)s[y->off + j]];
            if (b >= 0) pi_tok_emit(sink, b);
        }
    }
    return true;
}

pi_status pi_spm_tokenize(const pi_tokenizer *t, const char *text, size_t len, bool prefix, pi_tok_sink *sink) {
    /* Escape: optional leading space, then every ' ' as U+2581. */
    size_t n_sp = prefix;
    for (size_t i = 0; i < len; i++) n_sp += text[i] == ' ';
    size_t n = len + prefix + 2 * n_sp;
    if (n == 0) return PI_OK;
    char *s = malloc(n);
    spm_sym *sym = malloc(n * sizeof *sym);
    pi_tok_heap h = {0};
    if (!s || !sym) goto nomem;
    size_t k = 0;
    if (prefix) memcpy(s, "\xE2\x96\x81", 3), k = 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') memcpy(s + k, "\xE2\x96\x81", 3), k += 3;
        else s[k++] = text[i];
    }
    /* An ASCII character that no longer token contains can never be merged,
       so the text is merged in independent chunks between such characters
       (smaller queues, same result). Chunks follow the symbol boundaries:
       a lead byte may swallow the character after it. */
    size_t a = 0;
    for (size_t off = 0; off < n;) {
        size_t cl = pi_utf8_len_lead((uint8_t)s[off]);
        if (cl > n - off) cl = n - off;
        if (cl == 1 && t->spm_alone[(uint8_t)s[off]]) {
            if (off > a && !spm_chunk(t, s + a, off - a, sym, &h, sink)) goto nomem;
            if (!spm_chunk(t, s + off, 1, sym, &h, sink)) goto nomem;
            a = off + 1;
        }
        off += cl;
    }
    if (n > a && !spm_chunk(t, s + a, n - a, sym, &h, sink)) goto nomem;
    free(s);
    free(sym);
    free(h.v);
    return PI_OK;
nomem:
    free(s);
    free(sym);
    free(h.v);
    return pi_error(PI_ERR_NOMEM, "tokenize: out of memory for %zu bytes of text", len);
}
