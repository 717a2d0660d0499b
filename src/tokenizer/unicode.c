/*
 * unicode.c — category lookup over the generated range table, white space,
 * UTF-8 coding and the GPT-2 byte map (see unicode.h for the rules).
 *
 * Invariant: pi_unicode_cat_ranges is sorted by start code point, starts at 0
 * and covers every code point up to U+10FFFF.
 */
#include "unicode.h"

unsigned pi_unicode_cat(uint32_t cp) {
    if (cp > PI_UNICODE_MAX) return PI_UCAT_UNDEF;
    /* Largest entry whose start is <= cp. */
    size_t lo = 0, hi = pi_unicode_cat_ranges_n;
    uint32_t key = cp << 8 | 0xFFu;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (pi_unicode_cat_ranges[mid] <= key) lo = mid;
        else hi = mid;
    }
    return pi_unicode_cat_ranges[lo] & 0xFFu;
}

bool pi_unicode_is_space(uint32_t cp) {
    if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    if (cp < 0x85) return false;
    switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

static inline bool is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

uint32_t pi_utf8_decode(const uint8_t *s, size_t n, size_t *adv) {
    uint8_t b = s[0];
    *adv = 1;
    if (b < 0x80) return b;
    if (b < 0xC0) return PI_UNICODE_REPLACEMENT; /* stray continuation byte */
    if (b < 0xE0) {
        if (n < 2 || !is_cont(s[1])) return PI_UNICODE_REPLACEMENT;
        *adv = 2;
        return (uint32_t)(b & 0x1F) << 6 | (s[1] & 0x3Fu);
    }
    if (b < 0xF0) {
        if (n < 3 || !is_cont(s[1]) || !is_cont(s[2])) return PI_UNICODE_REPLACEMENT;
        *adv = 3;
        return (uint32_t)(b & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3Fu);
    }
    if (b < 0xF8) {
        if (n < 4 || !is_cont(s[1]) || !is_cont(s[2]) || !is_cont(s[3])) return PI_UNICODE_REPLACEMENT;
        uint32_t cp = (uint32_t)(b & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 |
                      (s[3] & 0x3Fu);
        if (cp > PI_UNICODE_MAX) return PI_UNICODE_REPLACEMENT;
        *adv = 4;
        return cp;
    }
    return PI_UNICODE_REPLACEMENT;
}

size_t pi_utf8_encode(uint32_t cp, uint8_t out[4]) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | cp >> 6);
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | cp >> 12);
        out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18 & 0x07));
    out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

bool pi_utf8_valid(const uint8_t *s, size_t n, size_t *bad_at) {
    size_t i = 0;
    while (i < n) {
        uint8_t b = s[i];
        size_t len;
        uint32_t cp, min;
        if (b < 0x80) { i++; continue; }
        if (b >= 0xC2 && b < 0xE0) { len = 2; cp = b & 0x1Fu; min = 0x80; }
        else if (b >= 0xE0 && b < 0xF0) { len = 3; cp = b & 0x0Fu; min = 0x800; }
        else if (b >= 0xF0 && b < 0xF5) { len = 4; cp = b & 0x07u; min = 0x10000; }
        else goto bad;
        if (n - i < len) goto bad;
        for (size_t k = 1; k < len; k++) {
            if (!is_cont(s[i + k])) goto bad;
            cp = cp << 6 | (s[i + k] & 0x3Fu);
        }
        if (cp < min || cp > PI_UNICODE_MAX || (cp >= 0xD800 && cp <= 0xDFFF)) goto bad;
        i += len;
    }
    return true;
bad:
    if (bad_at) *bad_at = i;
    return false;
}

/* Bytes that GPT-2 keeps as themselves: '!'..'~', U+00A1..U+00AC, U+00AE..U+00FF. */
static inline bool gpt2_keeps(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t pi_gpt2_byte_to_cp(uint8_t b) {
    if (gpt2_keeps(b)) return b;
    /* The n-th byte (in byte order) that is not kept maps to U+0100 + n. */
    unsigned n = b <= 0x20 ? b : b <= 0x7E ? 0 : b <= 0xA0 ? 0x21u + (b - 0x7Fu) : 0x21u + 0x22u;
    return 0x100u + n;
}

int pi_gpt2_cp_to_byte(uint32_t cp) {
    if (cp < 0x100) return gpt2_keeps(cp) ? (int)cp : -1;
    if (cp < 0x100 + 0x21) return (int)(cp - 0x100);           /* 0x00..0x20 */
    if (cp < 0x100 + 0x21 + 0x22) return (int)(cp - 0x121 + 0x7F); /* 0x7F..0xA0 */
    if (cp == 0x100 + 0x43) return 0xAD;
    return -1;
}
