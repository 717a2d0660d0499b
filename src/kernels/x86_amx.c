/*
 * x86_amx.c — the quant matmuls on Intel AMX tiles (AMX-TILE + AMX-INT8,
 * Sapphire Rapids and later), with AVX-512 for everything around the tiles.
 *
 * Compiled with the AVX-512 and AMX flags only here; reached only through the
 * "amx" table, which dispatch.c hands out after the OS has granted this
 * process tile state. Semantics are ref.c's (pi_matmul_fn in kernels.h).
 *
 * One TDPBSSD multiplies a 16 x 64-byte tile of signed bytes by a 16 x 64-byte
 * one; here K is one 32-element block, 16 x 16 x 32 products, because every
 * block has its own pair of scales and each block's integer dot must be
 * scaled before blocks are summed. So for each block:
 *   A = 16 inputs' Q8_0 quants of the block (16 rows of 32 bytes);
 *   B = 16 weight rows of the block in the tiles' "VNNI" layout (byte 4n + i
 *       of tile row k is weight 4k + i of row n), Q4_0 nibbles made signed;
 *   C = A x B, 16 inputs x 16 rows of exact int32 block dots, stored and added
 *       into float sums as sum += float(C) * (d_w of the 16 rows) * d_x.
 * Scaling a C tile (16 x load, convert, multiply, FMA) and storing it cost as
 * much as the tile product itself. Up to 4 groups of 16 inputs share each B
 * tile, their 4 products issued back to back so that they overlap with the
 * scaling of the previous ones: measured on a Sapphire Rapids core, 18 ns per
 * 16 x 16 x 32 step in isolation (27 ns one group at a time with register
 * sums), ~28 ns in this kernel with the repacking and the weights streaming
 * from memory: ~280 GMAC/s, 3x the AVX-512 VNNI matmul.
 *
 * B is built from the file's layout into a stack buffer (no repacked copy of a
 * matrix is kept: memory is the scarce resource), AMX_KC blocks of 16 rows at
 * a time, with one gather per tile row; each repacked chunk serves all the
 * inputs of the pass (up to AMX_NT = 64, the session's batch), so its cost
 * (~13% of the time) is spread over them. The inputs' quants of the chunk are
 * copied once per call into A tiles of 512 contiguous bytes: loading tiles
 * straight from the activations (rows 34 bytes per block apart) touches 16-32
 * cache lines per tile and was 10% slower overall.
 *
 * Loop order, per pass of up to 64 inputs: chunk-major, as in the AVX-512
 * matmuls. A chunk of every row tile in [r0, r1) meets every input before the
 * next chunk, partial sums collect in Y, so each weight byte is read from
 * memory once per pass, the A tiles of a chunk serve every row tile, and the
 * next row tile's share of the chunk is prefetched while one is multiplied.
 *
 * Stack scratch: ~54 KiB. Rows of a partial last tile repeat the last row
 * (their results are never stored); a partial last group of inputs has zero
 * quants and scales past its end.
 */
#include "x86_amx.h"

#include "simd_common.h"

#include <immintrin.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

#define AMX_KC 16 /* blocks per chunk: 8 KiB of B tiles, 32 KiB of A tiles */
#define AMX_NT 64 /* inputs per pass over the weights */
static_assert(AMX_KC <= 16, "the d_x of a chunk are one gather per input");

/* Tile registers: a C tile for each of up to 4 groups of 16 inputs and the
   one B tile they share; the A tiles alternate. (Macros, not an enum: the
   tile intrinsics paste the number into the instruction.) */
#define TC0 0
#define TC1 1
#define TC2 2
#define TC3 3
#define TA0 4
#define TA1 5
#define TB 6

/* GCC 12's tile intrinsics under-declare their memory operands: as far as the
   compiler knows, _tile_loadconfig reads 8 bytes of the configuration and
   _tile_loadd no memory at all, so the stores that fill a configuration or a
   repacked buffer could be dropped or sunk past the instruction that reads
   them (the configuration's were, and LDTILECFG faulted). A compiler barrier
   before those instructions makes every store land first; it emits nothing. */
#define AMX_BARRIER() __asm__ volatile("" ::: "memory")

/* The LDTILECFG operand (palette 1). */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16]; /* bytes per row of each tile */
    uint8_t rows[16];
} amx_tilecfg;

typedef struct {
    _Alignas(64) int8_t b[AMX_KC][8 * 64];               /* B tiles of the chunk, one per block */
    _Alignas(64) int8_t a[AMX_NT / 16][AMX_KC][16 * 32]; /* A tiles: the inputs' quants, zero-padded */
    _Alignas(64) float dw[AMX_KC][16];                   /* d_w of the 16 rows, per block */
    _Alignas(64) float dx[AMX_NT][AMX_KC];               /* d_x per input and block; 0 past the pass */
    _Alignas(64) float acc[AMX_NT][16];                  /* per input, the sums of the 16 rows */
    _Alignas(64) int32_t c[4][16 * 16];                  /* C tiles as stored */
} amx_scratch;

static void amx_configure(void) {
    amx_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = TC0; t <= TC3; t++) {
        cfg.rows[t] = 16; /* 16 inputs x 16 rows of int32 */
        cfg.colsb[t] = 64;
    }
    cfg.rows[TA0] = cfg.rows[TA1] = 16; /* 16 inputs x 32 quants */
    cfg.colsb[TA0] = cfg.colsb[TA1] = 32;
    cfg.rows[TB] = 8; /* 32 quants / 4 x 16 rows x 4 */
    cfg.colsb[TB] = 64;
    AMX_BARRIER();
    _tile_loadconfig(&cfg);
}

/* B tiles and d_w of blocks [0, kc) of 16 rows, the first block of row n at
   w + ridx[n]. Q4_0: tile row k (k < 4) holds dword k of each row's packed
   nibbles, low nibbles (weights 4k..4k+3), and tile row k + 4 their high
   nibbles (weights 16+4k..16+4k+3). Q8_0: tile row k holds quants 4k..4k+3.
   A gather per tile row does the transposition. */
INLINE void amx_repack(pi_type t, const uint8_t *w, __m512i ridx, int64_t kc, amx_scratch *S) {
    const size_t bsz = t == PI_TYPE_Q4_0 ? sizeof(pi_block_q4_0) : sizeof(pi_block_q8_0);
    const __m512i m4 = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);
    for (int64_t j = 0; j < kc; j++) {
        const uint8_t *p = w + j * bsz;
        /* the scale is the low half of the block's first dword */
        const __m512i d = _mm512_i32gather_epi32(ridx, p, 1);
        _mm512_store_ps(S->dw[j], _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d)));
        if (t == PI_TYPE_Q4_0) {
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m512i v = _mm512_i32gather_epi32(ridx, p + 2 + 4 * k, 1);
                _mm512_store_si512(S->b[j] + 64 * k, _mm512_sub_epi8(_mm512_and_si512(v, m4), eight));
                _mm512_store_si512(S->b[j] + 64 * (k + 4),
                                   _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), eight));
            }
        } else {
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++)
                _mm512_store_si512(S->b[j] + 64 * k, _mm512_i32gather_epi32(ridx, p + 2 + 4 * k, 1));
        }
    }
}

/* acc[i] += float(C[i]) * dw * dx[i * AMX_KC] for the 16 inputs i of a stored
   C tile. */
INLINE void amx_accumulate(float (*acc)[16], const int32_t *c, const float *dw, const float *dx) {
    const __m512 w = _mm512_load_ps(dw);
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        _mm512_store_ps(acc[i], _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * i)),
                                                _mm512_mul_ps(w, _mm512_set1_ps(dx[i * AMX_KC])),
                                                _mm512_load_ps(acc[i])));
}

/* S->acc += blocks [0, kc) of the ng groups of 16 inputs (S->a) times the
   repacked row tile (S->b). While the tiles work, row j of the next row
   tile's share of the chunk (at pf + j * stride, pf_len bytes) is prefetched
   at block j unless pf is NULL: spread out like this the prefetches do not
   pile up in the fill buffers, as a burst of 16 rows' worth did. */
INLINE void amx_row_tile(int64_t ng, int64_t kc, amx_scratch *S, const uint8_t *pf, size_t stride, size_t pf_len) {
    AMX_BARRIER(); /* the repacked tiles and the input copy are in memory */
    for (int64_t j = 0; j < kc; j++) {
        if (pf) prefetch_span(pf + (size_t)j * stride, pf_len);
        _tile_loadd(TB, S->b[j], 64);
        _tile_loadd(TA0, S->a[0][j], 32);
        _tile_zero(TC0);
        _tile_dpbssd(TC0, TA0, TB);
        if (ng > 1) {
            _tile_loadd(TA1, S->a[1][j], 32);
            _tile_zero(TC1);
            _tile_dpbssd(TC1, TA1, TB);
        }
        if (ng > 2) {
            _tile_loadd(TA0, S->a[2][j], 32);
            _tile_zero(TC2);
            _tile_dpbssd(TC2, TA0, TB);
        }
        if (ng > 3) {
            _tile_loadd(TA1, S->a[3][j], 32);
            _tile_zero(TC3);
            _tile_dpbssd(TC3, TA1, TB);
        }
        _tile_stored(TC0, S->c[0], 64);
        amx_accumulate(S->acc, S->c[0], S->dw[j], &S->dx[0][j]);
        if (ng > 1) {
            _tile_stored(TC1, S->c[1], 64);
            amx_accumulate(S->acc + 16, S->c[1], S->dw[j], &S->dx[16][j]);
        }
        if (ng > 2) {
            _tile_stored(TC2, S->c[2], 64);
            amx_accumulate(S->acc + 32, S->c[2], S->dw[j], &S->dx[32][j]);
        }
        if (ng > 3) {
            _tile_stored(TC3, S->c[3], 64);
            amx_accumulate(S->acc + 48, S->c[3], S->dw[j], &S->dx[48][j]);
        }
    }
}

INLINE void amx_matmul(pi_type t, int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                       size_t xs, int64_t nb, float *Y, int64_t ys) {
    const size_t bsz = t == PI_TYPE_Q4_0 ? sizeof(pi_block_q4_0) : sizeof(pi_block_q8_0);
    const int64_t nblk = n / PI_QK8_0;
    const uint8_t *x = X;
    if (nblk == 0) {
        for (int64_t b = 0; b < nb; b++)
            for (int64_t r = r0; r < r1; r++) Y[b * ys + r] = 0.0f;
        return;
    }
    amx_scratch S;
    /* block j's scale within a Q8_0 row, for gathering d_x */
    const __m512i xidx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int)sizeof(pi_block_q8_0)));
    amx_configure();
    for (int64_t b0 = 0; b0 < nb; b0 += AMX_NT) {
        const int64_t tn = nb - b0 < AMX_NT ? nb - b0 : AMX_NT;
        for (int64_t c0 = 0; c0 < nblk; c0 += AMX_KC) {
            const int64_t kc = nblk - c0 < AMX_KC ? nblk - c0 : AMX_KC;
            /* d_x of the chunk for every input of the pass (0 for the padding
               of a partial group) */
            for (int64_t i = 0; i < ((tn + 15) & ~(int64_t)15); i++) {
                __m512 d = _mm512_setzero_ps();
                if (i < tn) {
                    const uint8_t *p = x + (size_t)(b0 + i) * xs + (size_t)c0 * sizeof(pi_block_q8_0);
                    const __m512i g =
                        _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), (__mmask16)((1u << kc) - 1), xidx, p, 1);
                    d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
                }
                _mm512_mask_storeu_ps(S.dx[i], (__mmask16)((1u << AMX_KC) - 1), d);
            }
            /* the inputs' quants of the chunk as A tiles, 512 contiguous
               bytes each: a tile load straight from the activations would
               touch 16-32 scattered cache lines (rows 34 bytes per block
               apart), several times per tile product */
            for (int64_t i = 0; i < ((tn + 15) & ~(int64_t)15); i++) {
                int8_t *dst = S.a[i / 16][0] + 32 * (i % 16);
                if (i < tn) {
                    const pi_block_q8_0 *xb = (const pi_block_q8_0 *)(x + (size_t)(b0 + i) * xs) + c0;
                    for (int64_t j = 0; j < kc; j++)
                        _mm256_store_si256((__m256i *)(dst + j * sizeof S.a[0][0]),
                                           _mm256_loadu_si256((const __m256i *)xb[j].qs));
                } else {
                    for (int64_t j = 0; j < kc; j++)
                        _mm256_store_si256((__m256i *)(dst + j * sizeof S.a[0][0]), _mm256_setzero_si256());
                }
            }
            for (int64_t rt = r0; rt < r1; rt += 16) {
                const int64_t nr = r1 - rt < 16 ? r1 - rt : 16;
                /* rows past r1 repeat the last row */
                __m512i ridx = _mm512_min_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                                _mm512_set1_epi32((int)nr - 1));
                ridx = _mm512_mullo_epi32(ridx, _mm512_set1_epi32((int)stride));
                const uint8_t *wt = (const uint8_t *)W + (size_t)rt * stride + (size_t)c0 * bsz;
                amx_repack(t, wt, ridx, kc, &S);
                const __mmask16 rmask = (__mmask16)((1u << nr) - 1);
                const int64_t tpad = (tn + 15) & ~(int64_t)15;
                for (int64_t i = 0; i < tpad; i++)
                    _mm512_store_ps(S.acc[i], c0 > 0 && i < tn ? _mm512_maskz_loadu_ps(rmask, Y + (b0 + i) * ys + rt)
                                                                : _mm512_setzero_ps());
                /* the next row tile's share is prefetched meanwhile: kc of
                   its 16 rows (all but in a row's short last chunk), or after
                   the last row tile the first one's share of the next chunk */
                const uint8_t *pf = NULL;
                size_t pf_len = (size_t)kc * bsz;
                if (rt + 16 < r1) {
                    pf = wt + 16 * stride;
                } else if (c0 + kc < nblk) {
                    pf = (const uint8_t *)W + (size_t)r0 * stride + (size_t)(c0 + kc) * bsz;
                    pf_len = (size_t)(nblk - c0 - kc < AMX_KC ? nblk - c0 - kc : AMX_KC) * bsz;
                }
                amx_row_tile(tpad / 16, kc, &S, pf, stride, pf_len);
                for (int64_t i = 0; i < tn; i++)
                    _mm512_mask_storeu_ps(Y + (b0 + i) * ys + rt, rmask, _mm512_load_ps(S.acc[i]));
            }
        }
    }
    _tile_release();
}

void pi_amx_matmul_q4_0_q8_0(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                             size_t xs, int64_t nb, float *Y, int64_t ys) {
    amx_matmul(PI_TYPE_Q4_0, n, W, stride, r0, r1, X, xs, nb, Y, ys);
}

void pi_amx_matmul_q8_0_q8_0(int64_t n, const void *W, size_t stride, int64_t r0, int64_t r1, const void *X,
                             size_t xs, int64_t nb, float *Y, int64_t ys) {
    amx_matmul(PI_TYPE_Q8_0, n, W, stride, r0, r1, X, xs, nb, Y, ys);
}
