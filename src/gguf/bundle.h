/*
 * bundle.h — the bundle file: a model whose dense FFN neurons are stored one
 * per "bundle", the unit read from flash (DESIGN.md §2).
 *
 * A bundle file is a pinfer GGUF (v3, the input's magic) written by
 * `pinfer convert -m IN [--reorder STATS] --bundle [--bundle-align N]`
 * (pi_bundle_write in sparse/reorder.h):
 *
 *   general.alignment = 4096: every tensor's data starts on a 4096-byte file
 *   offset, so a reader may use O_DIRECT.
 *
 *   Every tensor and key of the input is kept (embedding, attention, norms,
 *   output, predictors blk.N.fc1/fc2, tokenizer, ...) except the dense FFN
 *   matrices blk.N.ffn_gate/ffn_up/ffn_down/ffn_down_t.weight, which are
 *   replaced, per layer N, by
 *
 *     blk.N.ffn_bundle   I8, ne = {stride, n_ff}: row i is neuron i's bundle
 *                        [gate_offset, +gate row)  row i of ffn_gate
 *                        [up_offset,   +up row)    row i of ffn_up
 *                        [down_offset, +down row)  column i of ffn_down as a
 *                                                  row of n_embd (ffn_down_t's
 *                                                  row i; what
 *                                                  pi_lm_make_down_t makes
 *                                                  when the input has none)
 *                        each in the model's own type, byte for byte those
 *                        rows, and zeros in every other byte up to stride.
 *
 *   pinfer.bundle.version      u32  PI_BUNDLE_VERSION
 *   pinfer.bundle.align        u32  bundles start on multiples of this inside
 *                                   the tensor (a power of two; 4096 by
 *                                   default), or 0: packed, stride = the
 *                                   exact bundle size
 *   pinfer.bundle.stride       u64  bytes from one bundle to the next
 *   pinfer.bundle.gate_type    u32  GGML type of the gate part (and .up_type,
 *                                   .down_type)
 *   pinfer.bundle.gate_offset  u64  byte offset of the gate part inside a
 *                                   bundle (and .up_offset, .down_offset)
 *                              These six are one value for every layer, or,
 *                              in a file whose layers' FFN types differ
 *                              (version 2; e.g. Q4_K_M keeps some layers'
 *                              ffn_down in Q6_K), arrays of one value per
 *                              layer; stride is then the largest layer's.
 *   pinfer.bundle.n_ff         u64  bundles per layer
 *   pinfer.bundle.n_embd       u64  elements of each part
 *
 * A mixture of experts (llama.expert_count X > 0) stores its layers' experts
 * the same way, one after the other: blk.N.ffn_bundle has ne = {stride,
 * n_ff, X} and expert x's neuron i is row x n_ff + i; pinfer.bundle.n_ff is
 * the neurons of one expert. The router (ffn_gate_inp) and the per-expert
 * predictors (fc1_exps/fc2_exps) stay ordinary tensors. Experts are kept in
 * the input's neuron order (no --reorder).
 *
 * Neurons are in hotness order when the file was converted with --reorder:
 * the permutation is then stored as reorder stores it (blk.N.ffn_perm.weight,
 * I32 [n_ff]: original neuron of each position; pinfer.reordered = true), the
 * predictors' fc2 rows follow it, and so do the statistics it came from:
 *
 *   blk.N.ffn_act_count  I32 [n_ff]  tokens that activated neuron i (new order)
 *   blk.N.ffn_sel_count  I32 [n_ff]  optional: tokens whose predictor selected neuron i
 *                                    (profile of a model with predictors; the planner
 *                                    spreads false positives as these do)
 *   pinfer.stats.tokens  u64         tokens profiled
 *   pinfer.stats.threshold f32, pinfer.stats.model str (as in stats.h)
 *
 * so a planner can compute hit-rate curves from the bundle file alone.
 * Without --reorder the input's order (and any ffn_perm it has) is kept.
 *
 * Invariants a loaded layout satisfies (pi_bundle_layout_read checks them):
 * in every layer the three parts lie inside [0, stride) and do not overlap;
 * the part types are compute types whose rows of n_embd elements have a
 * size; when align is not 0 it is a power of two and divides stride.
 */
#ifndef PI_GGUF_BUNDLE_H
#define PI_GGUF_BUNDLE_H

#include "base/status.h"
#include "gguf/gguf.h"
#include "gguf/names.h"
#include "kernels/types.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PI_BUNDLE_VERSION 1       /* one set of part types for every layer */
#define PI_BUNDLE_VERSION_MIXED 2 /* part types and offsets per layer */
#define PI_BUNDLE_FILE_ALIGN 4096    /* general.alignment of a bundle file */
#define PI_BUNDLE_DEFAULT_ALIGN 4096 /* pinfer.bundle.align unless told otherwise */
#define PI_BUNDLE_MIN_ALIGN 512      /* the range convert accepts for a non-zero align */
#define PI_BUNDLE_MAX_ALIGN 65536
#define PI_BUNDLE_MAX_LAYERS 4096 /* the loader's limit on block_count */

/* The keys and tensor names are in gguf/names.h (PI_KEY_BUNDLE_*,
   PI_KEY_STATS_*, PI_TN_FFN_BUNDLE, PI_TN_FFN_ACT_COUNT). */

/* The parts of one layer's bundles: gate, up and down (index PI_BUNDLE_GATE,
   PI_BUNDLE_UP, PI_BUNDLE_DOWN). */
enum { PI_BUNDLE_GATE, PI_BUNDLE_UP, PI_BUNDLE_DOWN };
typedef struct pi_bundle_parts {
    pi_type type[3];
    size_t bytes[3]; /* one row of n_embd in each type */
    size_t off[3];   /* inside a bundle */
} pi_bundle_parts;

/* Where the parts of a bundle are: one stride for the file, the parts per
   layer (files whose layers differ in type, such as Q4_K_M's ffn_down in
   Q6_K on some layers and Q4_K on the others, keep each layer's rows as
   they are; stride fits the largest). */
typedef struct pi_bundle_layout {
    uint32_t align;               /* 0: packed */
    int64_t n_embd, n_ff, n_layer;
    size_t stride;                /* bytes between bundles */
    pi_bundle_parts *layer;       /* (n_layer) owned: pi_bundle_layout_free */
} pi_bundle_layout;

/* The layout convert writes, each layer's bundle gate | up | down, then
   zeros up to stride: the largest layer's parts rounded up to a multiple of
   align (align 0: packed, no rounding). types[il] are layer il's part types.
   PI_ERR_INVALID for an align that is neither 0 nor a power of two in
   [PI_BUNDLE_MIN_ALIGN, PI_BUNDLE_MAX_ALIGN], a type without kernels, or a
   row of n_embd that is not a whole number of blocks. */
pi_status pi_bundle_layout_make(const pi_type (*types)[3], int64_t n_layer, int64_t n_embd, int64_t n_ff,
                                uint32_t align, pi_bundle_layout *out);

/* Free what a layout owns (NULL, or a layout never made, is fine: zeroed). */
void pi_bundle_layout_free(pi_bundle_layout *b);

/* Whether every layer has the parts of layer 0. */
bool pi_bundle_layout_uniform(const pi_bundle_layout *b);

/* Record the layout's keys (pinfer.bundle.*) in a writer. */
pi_status pi_bundle_layout_set(pi_gguf_writer *w, const pi_bundle_layout *b);

/* Whether g carries a bundle layout (has pinfer.bundle.version). */
bool pi_bundle_present(const pi_gguf *g);

/* Read and check the pinfer.bundle.* keys of g for a model of n_layer
   layers (see the invariants above). PI_ERR_FORMAT (PI_ERR_NOT_FOUND for a
   missing key, PI_ERR_UNSUPPORTED for another version) with a message naming
   path and the key at fault. Free *out with pi_bundle_layout_free. */
pi_status pi_bundle_layout_read(const pi_gguf *g, const char *path, int64_t n_layer, pi_bundle_layout *out);

/* Layer `layer`'s bundle tensor, checked against the layout: type I8, shape
   {stride, n_ff}, or for a mixture of n_expert > 0 experts {stride, n_ff,
   n_expert}. PI_ERR_NOT_FOUND / PI_ERR_FORMAT naming path, the tensor and
   the key it disagrees with. (The reader has checked its extent.) */
pi_status pi_bundle_tensor(const pi_gguf *g, const char *path, const pi_bundle_layout *b, int layer, int64_t n_expert,
                           const pi_gguf_tensor **out);

#endif
