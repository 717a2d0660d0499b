/*
 * names.h — the one table of GGUF metadata keys and tensor names that pinfer
 * reads or writes, as llama.cpp keeps LLM_KV_NAMES and LLM_TENSOR_NAMES in
 * llama-arch.cpp. No other file spells a key or a tensor name.
 *
 * Keys are string literals (PI_KEY_*), so they concatenate and a compiler
 * checks every use. The hyperparameters of an architecture are
 * "<arch>.<key>" (llama.cpp's "%s.context_length"): PI_AKEY_* is the part
 * after the architecture, PI_LLAMA_KEY(PI_AKEY_...) the whole llama key at
 * compile time.
 *
 * Tensor names are printf formats (PI_TN_*): the whole-model ones are plain
 * names, the per-layer ones are "blk.%d." followed by the layer's part and
 * take the layer index (an int) as their one argument, so
 *     snprintf(buf, sizeof buf, PI_TN_ATTN_Q, il)
 * is checked by -Wformat like any printf. pi_tensor_layer() reads the layer
 * back from a name.
 */
#ifndef PI_GGUF_NAMES_H
#define PI_GGUF_NAMES_H

#include "gguf/gguf.h"

#include <stdint.h>

#define PI_NAME_MAX 64 /* bytes that hold any tensor name below, its layer and the NUL */

/* ---- general.* ---- */

#define PI_KEY_GENERAL_ARCHITECTURE "general.architecture" /* str: PI_ARCH_LLAMA for models */
#define PI_KEY_GENERAL_NAME "general.name"                 /* str */
#define PI_KEY_GENERAL_ALIGNMENT "general.alignment"       /* u32: data alignment (gguf_write.c) */
#define PI_KEY_GENERAL_FILE_TYPE "general.file_type"       /* u32: llama.cpp's llama_ftype of the file's weights */

#define PI_ARCH_LLAMA "llama" /* the architecture pinfer runs */

/* ---- <arch>.*: hyperparameters ---- */

#define PI_LLAMA_KEY(akey) PI_ARCH_LLAMA "." akey

#define PI_AKEY_CONTEXT_LENGTH "context_length"
#define PI_AKEY_EMBEDDING_LENGTH "embedding_length"
#define PI_AKEY_FEED_FORWARD_LENGTH "feed_forward_length"
#define PI_AKEY_BLOCK_COUNT "block_count"
#define PI_AKEY_HEAD_COUNT "attention.head_count"
#define PI_AKEY_HEAD_COUNT_KV "attention.head_count_kv"
#define PI_AKEY_RMS_EPS "attention.layer_norm_rms_epsilon"
#define PI_AKEY_ROPE_DIMENSION_COUNT "rope.dimension_count"
#define PI_AKEY_ROPE_FREQ_BASE "rope.freq_base"
#define PI_AKEY_EXPERT_COUNT "expert_count"
#define PI_AKEY_EXPERT_USED_COUNT "expert_used_count"
#define PI_AKEY_VOCAB_SIZE "vocab_size"

/* ---- tokenizer.* ---- */

#define PI_KEY_TOKENIZER_PREFIX "tokenizer."          /* every tokenizer key starts so */
#define PI_KEY_TOKENIZER_GGML "tokenizer.ggml."
#define PI_KEY_TOKENIZER_MODEL PI_KEY_TOKENIZER_GGML "model"             /* str: "llama" (SPM) or "gpt2" (BPE) */
#define PI_KEY_TOKENIZER_PRE PI_KEY_TOKENIZER_GGML "pre"                 /* str: BPE pre-tokenizer */
#define PI_KEY_TOKENIZER_TOKENS PI_KEY_TOKENIZER_GGML "tokens"           /* str[n_vocab] */
#define PI_KEY_TOKENIZER_SCORES PI_KEY_TOKENIZER_GGML "scores"           /* f32[n_vocab] */
#define PI_KEY_TOKENIZER_TOKEN_TYPE PI_KEY_TOKENIZER_GGML "token_type"   /* i32[n_vocab] */
#define PI_KEY_TOKENIZER_MERGES PI_KEY_TOKENIZER_GGML "merges"           /* str[]: BPE */
#define PI_KEY_TOKENIZER_BOS_ID PI_KEY_TOKENIZER_GGML "bos_token_id"
#define PI_KEY_TOKENIZER_EOS_ID PI_KEY_TOKENIZER_GGML "eos_token_id"
#define PI_KEY_TOKENIZER_EOT_ID PI_KEY_TOKENIZER_GGML "eot_token_id"
#define PI_KEY_TOKENIZER_EOM_ID PI_KEY_TOKENIZER_GGML "eom_token_id"
#define PI_KEY_TOKENIZER_UNK_ID PI_KEY_TOKENIZER_GGML "unknown_token_id"
#define PI_KEY_TOKENIZER_PAD_ID PI_KEY_TOKENIZER_GGML "padding_token_id"
#define PI_KEY_TOKENIZER_ADD_BOS PI_KEY_TOKENIZER_GGML "add_bos_token"
#define PI_KEY_TOKENIZER_ADD_EOS PI_KEY_TOKENIZER_GGML "add_eos_token"
#define PI_KEY_TOKENIZER_ADD_SPACE_PREFIX PI_KEY_TOKENIZER_GGML "add_space_prefix"
/* fill-in-the-middle token ids (fim_* and their older names), which llama.cpp also reads */
#define PI_KEY_TOKENIZER_FIM_PRE_ID PI_KEY_TOKENIZER_GGML "fim_pre_token_id"
#define PI_KEY_TOKENIZER_FIM_SUF_ID PI_KEY_TOKENIZER_GGML "fim_suf_token_id"
#define PI_KEY_TOKENIZER_FIM_MID_ID PI_KEY_TOKENIZER_GGML "fim_mid_token_id"
#define PI_KEY_TOKENIZER_FIM_PAD_ID PI_KEY_TOKENIZER_GGML "fim_pad_token_id"
#define PI_KEY_TOKENIZER_FIM_REP_ID PI_KEY_TOKENIZER_GGML "fim_rep_token_id"
#define PI_KEY_TOKENIZER_FIM_SEP_ID PI_KEY_TOKENIZER_GGML "fim_sep_token_id"
#define PI_KEY_TOKENIZER_PREFIX_ID PI_KEY_TOKENIZER_GGML "prefix_token_id"
#define PI_KEY_TOKENIZER_SUFFIX_ID PI_KEY_TOKENIZER_GGML "suffix_token_id"
#define PI_KEY_TOKENIZER_MIDDLE_ID PI_KEY_TOKENIZER_GGML "middle_token_id"
#define PI_KEY_TOKENIZER_CHAT_TEMPLATE PI_KEY_TOKENIZER_PREFIX "chat_template"

/* ---- pinfer.* and powerinfer.* ---- */

#define PI_KEY_FFN_ACTIVATION "pinfer.ffn_activation"     /* str: silu, relu, drelu */
#define PI_KEY_REORDERED "pinfer.reordered"               /* bool: neurons in hotness order */
#define PI_KEY_SPARSE_THRESHOLD "powerinfer.sparse_threshold" /* f32: PowerInfer's one predictor threshold */

/* activation predictors (sparse/predictor.h) */
#define PI_KEY_PREDICTOR_PREFIX "pinfer.predictor."
#define PI_KEY_PREDICTOR_THRESHOLDS PI_KEY_PREDICTOR_PREFIX "thresholds"       /* f32[n_layer] */
#define PI_KEY_PREDICTOR_RANK PI_KEY_PREDICTOR_PREFIX "rank"                   /* u32[n_layer] */
#define PI_KEY_PREDICTOR_RECALL_TARGET PI_KEY_PREDICTOR_PREFIX "recall_target" /* f32 */
#define PI_KEY_PREDICTOR_VAL_RECALL PI_KEY_PREDICTOR_PREFIX "val_recall"       /* f32[n_layer], held-out tokens */
#define PI_KEY_PREDICTOR_VAL_PRECISION PI_KEY_PREDICTOR_PREFIX "val_precision" /* f32[n_layer] */

/* activation statistics (sparse/stats.h; also carried by bundle files) */
#define PI_KEY_STATS_PREFIX "pinfer.stats."
#define PI_KEY_STATS_TOKENS PI_KEY_STATS_PREFIX "tokens"       /* u64 */
#define PI_KEY_STATS_N_LAYER PI_KEY_STATS_PREFIX "n_layer"     /* u32 */
#define PI_KEY_STATS_N_EXPERT PI_KEY_STATS_PREFIX "n_expert"   /* u32: a mixture's statistics per expert */
#define PI_KEY_STATS_N_EXPERT_USED PI_KEY_STATS_PREFIX "n_expert_used" /* u32 */
#define PI_KEY_STATS_UNIT_TOKENS PI_KEY_STATS_PREFIX "unit_tokens" /* f32[units]: tokens routed to each expert */
#define PI_KEY_STATS_N_FF PI_KEY_STATS_PREFIX "n_ff"           /* u32 */
#define PI_KEY_STATS_THRESHOLD PI_KEY_STATS_PREFIX "threshold" /* f32 */
#define PI_KEY_STATS_MODEL PI_KEY_STATS_PREFIX "model"         /* str */
#define PI_KEY_STATS_REUSE PI_KEY_STATS_PREFIX "reuse"         /* f32[n_layer * PI_STATS_REUSE_K]: temporal reuse */
#define PI_STATS_REUSE_K 8 /* reuse is measured over the last 1..8 tokens */
#define PI_KEY_STATS_REUSE_TOKENS PI_KEY_STATS_PREFIX "reuse_tokens" /* u64: tokens they come from */
#define PI_KEY_STATS_MASK_TOKENS PI_KEY_STATS_PREFIX "mask_tokens" /* u32: tokens whose masks are kept */
#define PI_KEY_STATS_PRED_HIST PI_KEY_STATS_PREFIX "pred_hist"   /* f32[n_layer * 2 * bins]: predictor logits */
#define PI_KEY_STATS_PRED_RANGE PI_KEY_STATS_PREFIX "pred_range" /* f32[2]: the first bin's edge, bin width */
#define PI_KEY_STATS_PRED_GHIST PI_KEY_STATS_PREFIX "pred_ghist" /* f32[n_layer * groups * 2 * bins]: by group */
#define PI_KEY_STATS_PRED_GLO PI_KEY_STATS_PREFIX "pred_glo"     /* f32[n_layer]: each layer's first bin's edge */
#define PI_KEY_STATS_PRED_GROUPS PI_KEY_STATS_PREFIX "pred_groups" /* u32: groups of neurons in hotness order */
#define PI_KEY_STATS_PRED_GWIDTH PI_KEY_STATS_PREFIX "pred_gwidth" /* f32: the bins' width */

/* the bundle layout (gguf/bundle.h) */
#define PI_KEY_BUNDLE_PREFIX "pinfer.bundle."
#define PI_KEY_BUNDLE_VERSION PI_KEY_BUNDLE_PREFIX "version"
#define PI_KEY_BUNDLE_ALIGN PI_KEY_BUNDLE_PREFIX "align"
#define PI_KEY_BUNDLE_STRIDE PI_KEY_BUNDLE_PREFIX "stride"
#define PI_KEY_BUNDLE_GATE_TYPE PI_KEY_BUNDLE_PREFIX "gate_type"
#define PI_KEY_BUNDLE_UP_TYPE PI_KEY_BUNDLE_PREFIX "up_type"
#define PI_KEY_BUNDLE_DOWN_TYPE PI_KEY_BUNDLE_PREFIX "down_type"
#define PI_KEY_BUNDLE_GATE_OFFSET PI_KEY_BUNDLE_PREFIX "gate_offset"
#define PI_KEY_BUNDLE_UP_OFFSET PI_KEY_BUNDLE_PREFIX "up_offset"
#define PI_KEY_BUNDLE_DOWN_OFFSET PI_KEY_BUNDLE_PREFIX "down_offset"
#define PI_KEY_BUNDLE_N_FF PI_KEY_BUNDLE_PREFIX "n_ff"
#define PI_KEY_BUNDLE_N_EMBD PI_KEY_BUNDLE_PREFIX "n_embd"

/* what gen-model planted (model/genmodel.h), all f32 */
#define PI_KEY_GEN_PREFIX "pinfer.gen."
#define PI_KEY_GEN_ACTIVE PI_KEY_GEN_PREFIX "active"
#define PI_KEY_GEN_SKEW PI_KEY_GEN_PREFIX "skew"
#define PI_KEY_GEN_COVER80 PI_KEY_GEN_PREFIX "cover80"
#define PI_KEY_GEN_PERSIST PI_KEY_GEN_PREFIX "persist"
#define PI_KEY_GEN_EXPECTED_RECALL PI_KEY_GEN_PREFIX "expected_recall"
#define PI_KEY_GEN_EXPECTED_PRECISION PI_KEY_GEN_PREFIX "expected_precision"

/* ---- tensor names ---- */

#define PI_TN_BLK "blk.%d." /* how every per-layer name starts */

/* the whole model: llama.cpp's names */
#define PI_TN_TOKEN_EMBD "token_embd.weight"   /* {n_embd, n_vocab} */
#define PI_TN_OUTPUT_NORM "output_norm.weight" /* {n_embd} */
#define PI_TN_OUTPUT "output.weight"           /* {n_embd, n_vocab}; absent: tied to token_embd */

/* per layer: llama.cpp's names */
#define PI_TN_ATTN_NORM PI_TN_BLK "attn_norm.weight"
#define PI_TN_ATTN_Q PI_TN_BLK "attn_q.weight"
#define PI_TN_ATTN_K PI_TN_BLK "attn_k.weight"
#define PI_TN_ATTN_V PI_TN_BLK "attn_v.weight"
#define PI_TN_ATTN_OUT PI_TN_BLK "attn_output.weight"
#define PI_TN_FFN_NORM PI_TN_BLK "ffn_norm.weight"
#define PI_TN_FFN_GATE PI_TN_BLK "ffn_gate.weight"
#define PI_TN_FFN_UP PI_TN_BLK "ffn_up.weight"
#define PI_TN_FFN_DOWN PI_TN_BLK "ffn_down.weight"
#define PI_TN_FFN_GATE_INP PI_TN_BLK "ffn_gate_inp.weight"   /* MoE router */
#define PI_TN_FFN_GATE_EXPS PI_TN_BLK "ffn_gate_exps.weight" /* MoE experts */
#define PI_TN_FFN_UP_EXPS PI_TN_BLK "ffn_up_exps.weight"
#define PI_TN_FFN_DOWN_EXPS PI_TN_BLK "ffn_down_exps.weight"

/* per layer: PowerInfer's predictor */
#define PI_TN_FC1 PI_TN_BLK "fc1.weight"
#define PI_TN_FC2 PI_TN_BLK "fc2.weight"
#define PI_TN_FC1_EXPS PI_TN_BLK "fc1_exps.weight" /* MoE: one predictor per expert, stacked as the experts' */
#define PI_TN_FC2_EXPS PI_TN_BLK "fc2_exps.weight"

/* per layer: pinfer's own */
#define PI_TN_FFN_DOWN_T PI_TN_BLK "ffn_down_t.weight"   /* ffn_down, one neuron per row */
#define PI_TN_FFN_PERM PI_TN_BLK "ffn_perm.weight"       /* I32 [n_ff]: original neuron of each position */
#define PI_TN_FFN_BUNDLE PI_TN_BLK "ffn_bundle"          /* gguf/bundle.h */
#define PI_TN_FFN_ACT_COUNT PI_TN_BLK "ffn_act_count"    /* I32 [n_ff], in a model or bundle file */
#define PI_TN_ACT_COUNT PI_TN_BLK "act_count"            /* I32 [n_ff], in a stats file */
#define PI_TN_FFN_SEL_COUNT PI_TN_BLK "ffn_sel_count"    /* I32 [n_ff]: tokens whose predictor selected the
                                                            neuron at the file's thresholds */
#define PI_TN_SEL_COUNT PI_TN_BLK "sel_count"            /* the same in a stats file */
#define PI_TN_ACT_MASK PI_TN_BLK "act_mask"              /* I8 [ceil(n_ff/8), T], in a stats file */

/* The layer of a per-layer name: N when name is fmt (one of the PI_TN_*
   formats with "%d") printed with N, else -1. Leading zeros are read as
   printf never writes them; a layer too large for an int64_t reads as
   INT64_MAX, so it is still recognised as beyond any model. Thread-safe. */
int64_t pi_tensor_layer(pi_gguf_str name, const char *fmt);

#endif
