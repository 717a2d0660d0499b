/*
 * types.c — the type table (GGML ids, block sizes, bytes per block) and the
 * scalar half-precision conversions. Quantize/dequantize live in ref.c (the
 * K-quant, Q4_1, Q5_0 and Q5_1 weight quantizers in quant_k.c).
 */
#include "types.h"

#include <ctype.h>
#include <string.h>

static const pi_type_info k_types[PI_TYPE_COUNT] = {
    [PI_TYPE_F32] = {"f32", 1, 4, true},
    [PI_TYPE_F16] = {"f16", 1, 2, true},
    [PI_TYPE_Q4_0] = {"q4_0", 32, 18, true},
    [PI_TYPE_Q4_1] = {"q4_1", 32, 20, true},
    [PI_TYPE_Q5_0] = {"q5_0", 32, 22, true},
    [PI_TYPE_Q5_1] = {"q5_1", 32, 24, true},
    [PI_TYPE_Q8_0] = {"q8_0", 32, 34, true},
    [PI_TYPE_Q8_1] = {"q8_1", 32, 36, false},
    [PI_TYPE_Q2_K] = {"q2_K", 256, 84, false},
    [PI_TYPE_Q3_K] = {"q3_K", 256, 110, false},
    [PI_TYPE_Q4_K] = {"q4_K", 256, 144, true},
    [PI_TYPE_Q5_K] = {"q5_K", 256, 176, true},
    [PI_TYPE_Q6_K] = {"q6_K", 256, 210, true},
    [PI_TYPE_Q8_K] = {"q8_K", 256, 292, false}, /* activations only: no weight kernels */
    [PI_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66, false},
    [PI_TYPE_IQ2_XS] = {"iq2_xs", 256, 74, false},
    [PI_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98, false},
    [PI_TYPE_IQ1_S] = {"iq1_s", 256, 50, false},
    [PI_TYPE_IQ4_NL] = {"iq4_nl", 32, 18, false},
    [PI_TYPE_IQ3_S] = {"iq3_s", 256, 110, false},
    [PI_TYPE_IQ2_S] = {"iq2_s", 256, 82, false},
    [PI_TYPE_IQ4_XS] = {"iq4_xs", 256, 136, false},
    [PI_TYPE_I8] = {"i8", 1, 1, false},
    [PI_TYPE_I16] = {"i16", 1, 2, false},
    [PI_TYPE_I32] = {"i32", 1, 4, false},
    [PI_TYPE_I64] = {"i64", 1, 8, false},
    [PI_TYPE_F64] = {"f64", 1, 8, false},
    [PI_TYPE_IQ1_M] = {"iq1_m", 256, 56, false},
    [PI_TYPE_BF16] = {"bf16", 1, 2, true},
    [PI_TYPE_TQ1_0] = {"tq1_0", 256, 54, false},
    [PI_TYPE_TQ2_0] = {"tq2_0", 256, 66, false},
};

const pi_type_info *pi_type_get(uint32_t id) {
    if (id >= PI_TYPE_COUNT || !k_types[id].name) return NULL;
    return &k_types[id];
}

const char *pi_type_name(uint32_t id) {
    const pi_type_info *t = pi_type_get(id);
    return t ? t->name : "?";
}

size_t pi_row_size(pi_type t, int64_t n) {
    const pi_type_info *ti = pi_type_get((uint32_t)t);
    if (!ti || n < 0 || n % ti->blck) return 0;
    return (size_t)(n / ti->blck) * ti->size;
}

int pi_type_from_name(const char *name) {
    for (int i = 0; i < PI_TYPE_COUNT; i++) {
        if (k_types[i].name && !strcasecmp(k_types[i].name, name)) return i;
    }
    return -1;
}

/* binary16 <-> binary32 without F16C, exact in both directions (RNE). */

float pi_f16_to_f32(pi_f16 h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0x1f) return pi_f32_from_bits(sign | 0x7f800000u | (man << 13)); /* inf/nan */
    if (exp == 0) {
        if (man == 0) return pi_f32_from_bits(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * 0x1.0p-24f;
        return sign ? -v : v;
    }
    return pi_f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

pi_f16 pi_f32_to_f16(float f) {
    uint32_t x = pi_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan (keep nan quiet and non-zero) */
        return (pi_f16)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 | ((ax >> 13) & 0x3ff) : 0));
    if (ax >= 0x477ff000u) return (pi_f16)(sign | 0x7c00); /* rounds to >= 65520: inf */
    if (ax < 0x38800000u) {
        /* result is subnormal or zero: round ax * 2^24 to an integer, RNE */
        float v = pi_f32_from_bits(ax) * 0x1.0p24f; /* exact: scaling by a power of two */
        uint32_t m = (uint32_t)v;
        float frac = v - (float)m;
        if (frac > 0.5f || (frac == 0.5f && (m & 1))) m++;
        return (pi_f16)(sign | m);
    }
    /* normal: rebias exponent, round mantissa from 23 to 10 bits, RNE */
    uint32_t r = ax - 0x38000000u; /* exponent 127 -> 15 */
    uint32_t lsb = (r >> 13) & 1;
    r += 0xfffu + lsb;
    return (pi_f16)(sign | (r >> 13));
}

float pi_bf16_to_f32(pi_bf16 h) { return pi_f32_from_bits((uint32_t)h << 16); }

pi_bf16 pi_f32_to_bf16(float f) {
    uint32_t x = pi_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (pi_bf16)((x >> 16) | 64); /* quiet nan */
    x += 0x7fffu + ((x >> 16) & 1);
    return (pi_bf16)(x >> 16);
}
