/*
 * validate.c — finite-scale checks of quantized rows (validate.h).
 */
#include "kernels/validate.h"

#include <string.h>

/* Byte offsets of a block's f16 scales; count 0: the type has none. */
static int scale_offsets(pi_type t, size_t off[2]) {
    switch (t) {
    case PI_TYPE_Q8_0:
    case PI_TYPE_Q4_0:
    case PI_TYPE_Q5_0: off[0] = 0; return 1;
    case PI_TYPE_Q4_1:
    case PI_TYPE_Q5_1:
    case PI_TYPE_Q4_K:
    case PI_TYPE_Q5_K: off[0] = 0, off[1] = 2; return 2; /* d, then m or dmin */
    case PI_TYPE_Q6_K: off[0] = 256 / 2 + 256 / 4 + 256 / 16; return 1; /* ql, qh, scales, then d */
    default: return 0;
    }
}

int64_t pi_rows_bad_scale(pi_type t, const void *data, int64_t n, int64_t n_rows, size_t stride, float *value) {
    size_t off[2];
    const int ns = scale_offsets(t, off);
    const pi_type_info *ti = pi_type_get((uint32_t)t);
    if (!ns || !ti || n <= 0) return -1;
    const int64_t nb = n / ti->blck;
    for (int64_t r = 0; r < n_rows; r++) {
        const uint8_t *row = (const uint8_t *)data + (size_t)r * stride;
        for (int64_t b = 0; b < nb; b++)
            for (int k = 0; k < ns; k++) {
                pi_f16 h;
                memcpy(&h, row + (size_t)b * ti->size + off[k], sizeof h);
                if ((h & 0x7c00) == 0x7c00) { /* exponent all ones: Inf or NaN */
                    if (value) *value = pi_f16_to_f32(h);
                    return r * nb + b;
                }
            }
    }
    return -1;
}
