/*
 * types.h — tensor element types, byte-compatible with GGML/GGUF.
 *
 * Type ids are GGML's (they are stored in GGUF tensor infos). Every id GGML has
 * defined is known here with its block size and bytes per block, so any real
 * GGUF file can be inspected and its tensor sizes checked; only the types with
 * `compute` set have quantize/dequantize and kernels: F32, F16, BF16, Q8_0,
 * Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K. Q8_K is an activation type only
 * (quantize and dequantize exist, weight kernels do not), so its `compute`
 * is false.
 *
 * Block layouts match ggml byte for byte:
 *   Q8_0: 32 weights = f16 scale d, int8 qs[32];          x = d * qs[i]
 *   Q4_0: 32 weights = f16 scale d, uint8 qs[16];         x = d * (nibble - 8)
 *         weight j (0..15) is the low nibble of qs[j], weight j+16 its high nibble.
 *   Q4_1: 32 weights = f16 d, f16 m, uint8 qs[16];         x = d * nibble + m
 *         (nibbles as in Q4_0).
 *   Q5_0: 32 weights = f16 d, uint8 qh[4], uint8 qs[16];   x = d * (q - 16)
 *         q = nibble | b << 4, nibbles as in Q4_0 and b bit j of the
 *         little-endian 32-bit qh for weight j (0..31).
 *   Q5_1: 32 weights = f16 d, f16 m, uint8 qh[4], uint8 qs[16]; x = d * q + m
 *         (q as in Q5_0). Q4_1, Q5_0 and Q5_1 are what llama.cpp's quantizer
 *         writes where a row does not fit a K-quant's 256 (see quant_k.h).
 *
 * K-quants: super-blocks of 256 weights (PI_QK_K).
 *   Q4_K: f16 d, f16 dmin, scales[12], qs[128]. Eight sub-blocks of 32, each
 *         with a 6-bit scale sc and 6-bit min m packed in scales[] (sub-block
 *         j < 4: sc = scales[j] & 63, m = scales[j+4] & 63; j >= 4: sc =
 *         (scales[j+4] & 15) | (scales[j-4] >> 6) << 4, m = (scales[j+4] >> 4)
 *         | (scales[j] >> 6) << 4); x = d*sc * q - dmin*m. Sub-blocks 2i and
 *         2i+1 are the low and high nibbles of qs[32i .. 32i+32).
 *   Q5_K: as Q4_K plus qh[32]: bit 2i of qh[l] is the fifth bit (16) of weight
 *         l of sub-block 2i, bit 2i+1 that of sub-block 2i+1.
 *   Q6_K: ql[128], qh[64], int8 scales[16], f16 d. Sixteen sub-blocks of 16
 *         with scale d*scales[k]; x = d*scales[k] * (q - 32), q 6 bits: each
 *         half of 128 weights takes 64 bytes of ql (low nibbles: weights 0-31
 *         and 32-63 of the half from ql[0..32) and ql[32..64); high nibbles:
 *         64-95, 96-127) and 32 of qh (bits 0-1, 2-3, 4-5, 6-7 of qh[l]: the
 *         top two bits of weights l, l+32, l+64, l+96).
 *   Q8_K: f32 d, int8 qs[256], int16 bsums[16] (sums of qs in groups of 16):
 *         the activations K-quant weights take; x = d * qs[i].
 */
#ifndef PI_KERNELS_TYPES_H
#define PI_KERNELS_TYPES_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef uint16_t pi_f16;  /* IEEE binary16 bits */
typedef uint16_t pi_bf16; /* bfloat16 bits (upper half of a binary32) */

#define PI_QK8_0 32
#define PI_QK4_0 32

typedef struct {
    pi_f16 d;
    int8_t qs[PI_QK8_0];
} pi_block_q8_0;
static_assert(sizeof(pi_block_q8_0) == 2 + PI_QK8_0, "pi_block_q8_0 must match ggml block_q8_0");

typedef struct {
    pi_f16 d;
    uint8_t qs[PI_QK4_0 / 2];
} pi_block_q4_0;
static_assert(sizeof(pi_block_q4_0) == 2 + PI_QK4_0 / 2, "pi_block_q4_0 must match ggml block_q4_0");

#define PI_QK4_1 32
#define PI_QK5_0 32
#define PI_QK5_1 32

typedef struct {
    pi_f16 d, m;
    uint8_t qs[PI_QK4_1 / 2];
} pi_block_q4_1;
static_assert(sizeof(pi_block_q4_1) == 4 + PI_QK4_1 / 2, "pi_block_q4_1 must match ggml block_q4_1");

typedef struct {
    pi_f16 d;
    uint8_t qh[4];
    uint8_t qs[PI_QK5_0 / 2];
} pi_block_q5_0;
static_assert(sizeof(pi_block_q5_0) == 2 + 4 + PI_QK5_0 / 2, "pi_block_q5_0 must match ggml block_q5_0");

typedef struct {
    pi_f16 d, m;
    uint8_t qh[4];
    uint8_t qs[PI_QK5_1 / 2];
} pi_block_q5_1;
static_assert(sizeof(pi_block_q5_1) == 4 + 4 + PI_QK5_1 / 2, "pi_block_q5_1 must match ggml block_q5_1");

#define PI_QK_K 256
#define PI_K_SCALE_SIZE 12

typedef struct {
    pi_f16 d, dmin;
    uint8_t scales[PI_K_SCALE_SIZE];
    uint8_t qs[PI_QK_K / 2];
} pi_block_q4_K;
static_assert(sizeof(pi_block_q4_K) == 4 + PI_K_SCALE_SIZE + PI_QK_K / 2, "pi_block_q4_K must match ggml block_q4_K");

typedef struct {
    pi_f16 d, dmin;
    uint8_t scales[PI_K_SCALE_SIZE];
    uint8_t qh[PI_QK_K / 8];
    uint8_t qs[PI_QK_K / 2];
} pi_block_q5_K;
static_assert(sizeof(pi_block_q5_K) == 4 + PI_K_SCALE_SIZE + PI_QK_K / 8 + PI_QK_K / 2,
              "pi_block_q5_K must match ggml block_q5_K");

typedef struct {
    uint8_t ql[PI_QK_K / 2];
    uint8_t qh[PI_QK_K / 4];
    int8_t scales[PI_QK_K / 16];
    pi_f16 d;
} pi_block_q6_K;
static_assert(sizeof(pi_block_q6_K) == 2 + PI_QK_K / 16 + 3 * PI_QK_K / 4, "pi_block_q6_K must match ggml block_q6_K");

typedef struct {
    float d;
    int8_t qs[PI_QK_K];
    int16_t bsums[PI_QK_K / 16];
} pi_block_q8_K;
static_assert(sizeof(pi_block_q8_K) == 4 + PI_QK_K + PI_QK_K / 16 * 2, "pi_block_q8_K must match ggml block_q8_K");

typedef enum pi_type {
    PI_TYPE_F32 = 0,
    PI_TYPE_F16 = 1,
    PI_TYPE_Q4_0 = 2,
    PI_TYPE_Q4_1 = 3,
    PI_TYPE_Q5_0 = 6,
    PI_TYPE_Q5_1 = 7,
    PI_TYPE_Q8_0 = 8,
    PI_TYPE_Q8_1 = 9,
    PI_TYPE_Q2_K = 10,
    PI_TYPE_Q3_K = 11,
    PI_TYPE_Q4_K = 12,
    PI_TYPE_Q5_K = 13,
    PI_TYPE_Q6_K = 14,
    PI_TYPE_Q8_K = 15,
    PI_TYPE_IQ2_XXS = 16,
    PI_TYPE_IQ2_XS = 17,
    PI_TYPE_IQ3_XXS = 18,
    PI_TYPE_IQ1_S = 19,
    PI_TYPE_IQ4_NL = 20,
    PI_TYPE_IQ3_S = 21,
    PI_TYPE_IQ2_S = 22,
    PI_TYPE_IQ4_XS = 23,
    PI_TYPE_I8 = 24,
    PI_TYPE_I16 = 25,
    PI_TYPE_I32 = 26,
    PI_TYPE_I64 = 27,
    PI_TYPE_F64 = 28,
    PI_TYPE_IQ1_M = 29,
    PI_TYPE_BF16 = 30,
    PI_TYPE_TQ1_0 = 34,
    PI_TYPE_TQ2_0 = 35,
    PI_TYPE_COUNT = 40, /* upper bound for tables indexed by type id */
} pi_type;

typedef struct pi_type_info {
    const char *name;  /* GGML's name, e.g. "q4_0" */
    int64_t blck;      /* elements per block */
    size_t size;       /* bytes per block */
    bool compute;      /* a weight type: quantize/dequantize and kernels exist */
} pi_type_info;

/* Traits of a type id, or NULL when the id is not a GGML type. */
const pi_type_info *pi_type_get(uint32_t id);

/* Name of a type id ("?" when unknown). */
const char *pi_type_name(uint32_t id);

/* Bytes of a row of n elements; n must be a multiple of the block size
   (returns 0 otherwise or for unknown types). */
size_t pi_row_size(pi_type t, int64_t n);

/* Parse a type name ("q4_0", "F16", ...) case-insensitively; -1 when unknown. */
int pi_type_from_name(const char *name);

/* A float's bit pattern, and the float of a bit pattern. */
static inline uint32_t pi_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float pi_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Scalar conversions (exact, round-to-nearest-even, as ggml does). */
float pi_f16_to_f32(pi_f16 h);
pi_f16 pi_f32_to_f16(float f);
float pi_bf16_to_f32(pi_bf16 h);
pi_bf16 pi_f32_to_bf16(float f);

/* Reference conversion of one row of n elements (n a multiple of the block
   size) for the compute types (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
   Q4_K, Q5_K, Q6_K; the quantizers of Q4_1, Q5_0, Q5_1 and the K-quants are
   ggml's reference ones, in quant_k.c) and
   for the Q8_K activations. These are the specification; they return without
   writing for other types. */
void pi_quantize_row(pi_type t, const float *x, void *y, int64_t n);
void pi_dequantize_row(pi_type t, const void *x, float *y, int64_t n);

#endif
