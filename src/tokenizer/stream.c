/*
 * stream.c — streaming detokenization: token pieces in, whole UTF-8
 * characters out.
 *
 * A piece may end in the middle of a character (byte-fallback tokens, BPE
 * byte tokens); the incomplete tail (at most 3 bytes) is held back until the
 * next piece completes it or the stream is flushed. Bytes that can never
 * become a character (a stray continuation byte) pass through, so the
 * concatenated output always equals the concatenated pieces, less the
 * dummy-prefix space of the first word after BOS.
 */
#include "tok_internal.h"

#include "unicode.h"

#include <stdlib.h>
#include <string.h>

struct pi_text_stream {
    const pi_tokenizer *tok;
    int32_t prev;
    char *buf;        /* held bytes, then the piece */
    size_t cap;
    size_t out;       /* bytes handed out by the last call; the held ones follow them */
    size_t held;
};

pi_status pi_text_stream_create(const pi_tokenizer *tok, pi_text_stream **out) {
    if (out) *out = NULL;
    if (!tok || !out) return pi_error(PI_ERR_INVALID, "pi_text_stream_create: %s is NULL", !tok ? "tok" : "out");
    const size_t longest = tok->max_piece_len;
    pi_text_stream *st = calloc(1, sizeof *st);
    if (!st || !(st->buf = malloc(longest + 8))) {
        free(st);
        return pi_error(PI_ERR_NOMEM, "text stream: out of memory");
    }
    st->tok = tok;
    st->cap = longest + 8;
    st->prev = -1;
    *out = st;
    return PI_OK;
}

void pi_text_stream_free(pi_text_stream *st) {
    if (!st) return;
    free(st->buf);
    free(st);
}

void pi_text_stream_reset(pi_text_stream *st, int32_t prev) {
    if (!st) return;
    st->prev = prev;
    st->out = st->held = 0;
}

/* Bytes at the end of s[0..n) that start a character not yet complete. */
static size_t incomplete_tail(const uint8_t *s, size_t n) {
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        const uint8_t b = s[n - k];
        if ((b & 0xC0) == 0x80) continue;              /* a continuation byte: look further back */
        return b >= 0xC2 && b < 0xF5 && pi_utf8_len_lead(b) > k ? k : 0;
    }
    return 0;
}

pi_status pi_text_stream_push(pi_text_stream *st, int32_t token, const char **text, size_t *len) {
    if (text) *text = "";
    if (len) *len = 0;
    if (!st || !text || !len)
        return pi_error(PI_ERR_INVALID, "pi_text_stream_push: %s is NULL", !st ? "the stream" : !text ? "text" : "len");
    const char *piece;
    size_t n;
    pi_status s = pi_token_piece(st->tok, token, false, &piece, &n);
    if (s) return s;
    /* the dummy-prefix space of the first word after BOS is not text */
    if (st->prev >= 0 && st->prev == st->tok->bos && st->tok->add_space_prefix && n && piece[0] == ' ') piece++, n--;
    st->prev = token;
    memmove(st->buf, st->buf + st->out, st->held);
    memcpy(st->buf + st->held, piece, n);
    const size_t total = st->held + n, tail = incomplete_tail((const uint8_t *)st->buf, total);
    st->out = total - tail;
    st->held = tail;
    *text = st->buf;
    *len = st->out;
    return PI_OK;
}

void pi_text_stream_flush(pi_text_stream *st, const char **text, size_t *len) {
    if (text) *text = "";
    if (len) *len = 0;
    if (!st || !text || !len) return;
    memmove(st->buf, st->buf + st->out, st->held);
    *text = st->buf;
    *len = st->held;
    st->out = st->held;
    st->held = 0;
}

bool pi_utf8_check(const char *text, size_t len, size_t *bad_at) {
    if (!text) {
        if (bad_at) *bad_at = 0;
        return len == 0;
    }
    return pi_utf8_valid((const uint8_t *)text, len, bad_at);
}
