/*
 * unicode.h — the Unicode facts the tokenizers need: general categories,
 * white space, UTF-8 decoding the way llama.cpp decodes it, strict UTF-8
 * validation, and GPT-2's byte <-> code point mapping.
 *
 * Decoding is deliberately lax so that token ids match llama.cpp on any input:
 * a lead byte announces the length, continuation bytes are checked but not
 * overlong forms or surrogates; a byte that cannot start a sequence becomes
 * U+FFFD and consumes one byte. One deviation: where llama.cpp would decode a
 * value above U+10FFFF (and then throw while re-encoding it), the lead byte
 * becomes U+FFFD instead.
 */
#ifndef PI_TOKENIZER_UNICODE_H
#define PI_TOKENIZER_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* General-category groups, one flag per code point (as in llama.cpp's tables). */
enum {
    PI_UCAT_UNDEF = 0x01, /* Cn: unassigned */
    PI_UCAT_N = 0x02,     /* \p{N} */
    PI_UCAT_L = 0x04,     /* \p{L} */
    PI_UCAT_Z = 0x08,     /* \p{Z} */
    PI_UCAT_M = 0x10,     /* \p{M} */
    PI_UCAT_P = 0x20,     /* \p{P} */
    PI_UCAT_S = 0x40,     /* \p{S} */
    PI_UCAT_C = 0x80,     /* \p{C}: Cc, Cf, Co, Cs */
};

#define PI_UNICODE_REPLACEMENT 0xFFFDu
#define PI_UNICODE_MAX 0x10FFFFu

/* Generated tables (unicode_data.c). */
extern const char pi_unicode_version[];
extern const uint32_t pi_unicode_cat_ranges[];
extern const size_t pi_unicode_cat_ranges_n;

/* Category flag of a code point; PI_UCAT_UNDEF above U+10FFFF. */
unsigned pi_unicode_cat(uint32_t cp);

/* The Unicode White_Space property (what llama.cpp's \s means in its own
   splitters): U+0009..000D, 0020, 0085, 00A0, 1680, 2000..200A, 2028, 2029,
   202F, 205F, 3000. */
bool pi_unicode_is_space(uint32_t cp);

/* Sequence length announced by a lead byte: 1 for ASCII and stray
   continuation bytes, 2, 3 or 4 (llama.cpp's unicode_len_utf8). */
static inline size_t pi_utf8_len_lead(uint8_t b) {
    return b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

/* Decode one code point from s[0..n) (n >= 1) with the lax rules above; sets
   *adv to the bytes consumed (>= 1). */
uint32_t pi_utf8_decode(const uint8_t *s, size_t n, size_t *adv);

/* Encode cp (<= U+10FFFF) into out; returns the byte count (1..4). */
size_t pi_utf8_encode(uint32_t cp, uint8_t out[4]);

/* Strict UTF-8 check (no overlongs, surrogates or values above U+10FFFF).
   Returns true when valid; otherwise *bad_at (when non-NULL) is the offset of
   the first byte of the first invalid sequence. */
bool pi_utf8_valid(const uint8_t *s, size_t n, size_t *bad_at);

/* GPT-2's reversible byte -> code point map: printable Latin-1 bytes map to
   themselves, the other 68 bytes to U+0100 upwards in byte order. */
uint32_t pi_gpt2_byte_to_cp(uint8_t b);
/* The inverse: the byte, or -1 when cp is not in the map's image. */
int pi_gpt2_cp_to_byte(uint32_t cp);

#endif
