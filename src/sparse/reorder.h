/*
 * reorder.h — renumbering each layer's FFN neurons by activation frequency,
 * so that the hot set is a contiguous prefix (one sequential read loads it,
 * one dense kernel computes it; DESIGN.md §2), and writing a model as a
 * bundle file (gguf/bundle.h). Both stream the input (mapped) to the output
 * one tensor, or one layer's bundles, at a time, and share one permutation
 * routine. Both are thread-safe (nothing shared is written).
 *
 * The output is written through the GGUF writer, so it reaches out_path
 * only when complete: on any failure a previous file there is untouched,
 * and out_path may even name the input (a caller should refuse that
 * anyway: see base/outfile.h pi_outfile_check_distinct).
 */
#ifndef PI_SPARSE_REORDER_H
#define PI_SPARSE_REORDER_H

#include "gguf/gguf.h"
#include "sparse/stats.h"

/* Write a copy of the model at in_path whose dense FFN neurons are ordered
   by the counts in st (most active first; ties by index). Per layer: gate and
   up rows, predictor fc2 rows and ffn_down_t rows are permuted (exact in any
   type); ffn_down's columns are permuted when its type is a float type
   (exact); a quantized ffn_down is replaced by a permuted ffn_down_t made by
   transposing and requantizing (blocks run along the other axis), since
   permuting columns would requantize anyway. blk.N.ffn_perm (I32, n_ff)
   records, for each new position, the original neuron (composed with an
   existing permutation). The statistics are stored too: blk.N.ffn_act_count
   (I32, n_ff, new order), blk.N.ffn_sel_count when they counted the
   predictors' selections, and pinfer.stats.tokens/threshold/model.
   Everything else is copied byte for byte. A bundle file is refused
   (PI_ERR_UNSUPPORTED): pi_bundle_write reorders those. */
pi_status pi_reorder_write(const char *in_path, const pi_stats *st, const char *out_path);

/* Write the model at in_path as a bundle file (format in gguf/bundle.h):
   each dense layer's gate/up/down matrices become blk.N.ffn_bundle, one
   bundle per neuron, each starting on a multiple of `align` inside the
   tensor (a power of two in [512, 65536]; 0: packed), every tensor on a
   4096-byte file offset. With st the neurons are first ordered as
   pi_reorder_write orders them (permutation, predictor rows and statistics
   stored the same way); with st NULL the input's order is kept. The down part
   is the input's ffn_down_t row, or the row pi_lm_make_down_t would make.
   A mixture of experts is bundled expert after expert, each expert ordered
   by its own counts when st holds statistics per expert (pinfer profile of
   the mixture); pi_reorder_write refuses mixtures. Refused: SiLU models
   (PI_ERR_UNSUPPORTED), layers whose FFN types differ, an align out of
   range (PI_ERR_INVALID). A bundle file as input is rewritten (e.g. with
   another align). */
pi_status pi_bundle_write(const char *in_path, const pi_stats *st, uint32_t align, const char *out_path);

/* Both of the above, with progress: what to write and whom to tell. */
typedef struct pi_rewrite_params {
    const pi_stats *st;           /* order neurons by these counts; NULL: keep the input's order (bundle only) */
    int64_t coact_window;         /* != 0 (st with activation masks): neurons that fire together side by side,
                                     pi_stats_order_coact with this window (PI_STATS_COACT_AUTO: by the
                                     layer's size); 0: by counts alone */
    bool bundle;                  /* pi_bundle_write, else pi_reorder_write */
    uint32_t align;               /* bundle: as pi_bundle_write's */
    pi_gguf_progress_fn progress; /* bytes of tensor data written; may be NULL */
    void *progress_ctx;
    /* the output head (output.weight) and the token embedding in another type
       (requantized row by row through F32): a smaller fixed region under a
       memory budget. A tied head (no output.weight) is the embedding. */
    bool retype_output, retype_embd;
    pi_type output_type, embd_type;
    /* a file llama.cpp reads: without pinfer's additions (predictors fc1/fc2
       and their keys, ffn_down_t beside ffn_down, ffn_perm, ffn_act_count,
       ffn_sel_count);
       not with st or bundle. A model without ffn_down is refused. */
    bool plain;
    /* > 0 (with st holding the predictors' logit histograms): per-layer
       predictor thresholds for this recall (pi_stats_thresholds), written
       with the recall and precision they give as the predictor's figures */
    double recall;
    /* every tensor copied from the input may be requantized (pinfer
       quantize): type_of returns the type to write for it (its own type or
       < 0: copied as it is). Applied before the output/embedding retypes. */
    int (*type_of)(void *ctx, const char *name, pi_type type, uint32_t n_dims, const int64_t ne[4]);
    void *type_ctx;
    int64_t file_type;            /* with type_of: general.file_type to write (< 0: the input's) */
    int n_threads;                /* requantizing: threads (0: 1) */
} pi_rewrite_params;

/* Needs st, bundle, plain, type_of or a retype (PI_ERR_INVALID otherwise, and for a target
   type without kernels or whose block does not divide the rows). */
pi_status pi_rewrite_model(const char *in_path, const pi_rewrite_params *p, const char *out_path);

#endif
