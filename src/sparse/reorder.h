/*
 * reorder.h — renumbering each layer's FFN neurons by activation frequency,
 * so that the hot set is a contiguous prefix (one sequential read loads it,
 * one dense kernel computes it; DESIGN.md §2).
 */
#ifndef PI_SPARSE_REORDER_H
#define PI_SPARSE_REORDER_H

#include "sparse/stats.h"

/* Write a copy of the model at in_path whose dense FFN neurons are ordered
   by the counts in st (most active first; ties by index). Per layer: gate and
   up rows, predictor fc2 rows and ffn_down_t rows are permuted (exact in any
   type); ffn_down's columns are permuted when its type is a float type
   (exact); a quantized ffn_down is replaced by a permuted ffn_down_t made by
   transposing and requantizing (blocks run along the other axis), since
   permuting columns would requantize anyway. blk.N.ffn_perm (I32, n_ff)
   records, for each new position, the original neuron (composed with an
   existing permutation). Everything else is copied byte for byte. */
pi_status pi_reorder_write(const char *in_path, const pi_stats *st, const char *out_path);

#endif
