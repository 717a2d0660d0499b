/*
 * tokenizer.h — text <-> token ids for llama-family models, loaded from a
 * GGUF file's tokenizer.ggml.* metadata and matching llama.cpp's ids exactly.
 *
 * Two kinds of vocabulary are supported:
 *  - SentencePiece ("llama"): score-driven merging of UTF-8 characters, byte
 *    fallback through <0xXX> tokens, a dummy-prefix space and spaces written
 *    as U+2581;
 *  - byte-level BPE ("gpt2"): GPT-2's byte -> code point mapping, merges
 *    ranked by their order in tokenizer.ggml.merges, and a pre-tokenizer chosen
 *    by tokenizer.ggml.pre ("gpt-2" and its aliases, "deepseek-llm", "default").
 * Control, user-defined and unknown tokens are found in the text first
 * (user-defined always, control/unknown only when parse_special is set).
 *
 * Lifetime: a pi_tokenizer owns copies of everything it needs, so the pi_gguf
 * it was loaded from may be closed afterwards. It is immutable after load; all
 * calls may run concurrently on one tokenizer (each call allocates its own
 * scratch). Returned pointers are borrowed and live as long as the tokenizer.
 */
#ifndef PI_TOKENIZER_H
#define PI_TOKENIZER_H

#include "gguf/gguf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pi_tokenizer pi_tokenizer;

typedef enum pi_tokenizer_kind {
    PI_TOKENIZER_SPM = 1, /* tokenizer.ggml.model "llama" */
    PI_TOKENIZER_BPE = 2, /* tokenizer.ggml.model "gpt2" */
} pi_tokenizer_kind;

/* tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
typedef enum pi_token_type {
    PI_TOKEN_UNDEFINED = 0,
    PI_TOKEN_NORMAL = 1,
    PI_TOKEN_UNKNOWN = 2,
    PI_TOKEN_CONTROL = 3,
    PI_TOKEN_USER_DEFINED = 4,
    PI_TOKEN_UNUSED = 5,
    PI_TOKEN_BYTE = 6,
} pi_token_type;

/* Build a tokenizer from g's metadata. Errors (message names the key):
   PI_ERR_NOT_FOUND for a missing required key (tokenizer.ggml.model, .tokens,
   .merges for BPE); PI_ERR_FORMAT for a wrong value type, an array whose
   length differs from .tokens, a duplicate token, a special-token id out of
   range (0xFFFFFFFF or a negative value keeps llama.cpp's default instead),
   a merge without a space or naming a string that is not a token;
   PI_ERR_UNSUPPORTED for another tokenizer model or pre-tokenizer (named);
   PI_ERR_NOMEM. A missing tokenizer.ggml.pre means "default", as in
   llama.cpp. Memory is proportional to the metadata's size. Thread-safe. */
pi_status pi_tokenizer_load(const pi_gguf *g, pi_tokenizer **out);
void pi_tokenizer_free(pi_tokenizer *tok); /* accepts NULL */

pi_tokenizer_kind pi_tokenizer_kind_of(const pi_tokenizer *tok);
/* The pre-tokenizer in use: "gpt-2", "deepseek-llm", "default"; "" for SPM. */
const char *pi_tokenizer_pre(const pi_tokenizer *tok);

/* Special token ids (bos, eos, eot: include/pinfer.h); -1 when the vocabulary has none. */
int32_t pi_tokenizer_unk(const pi_tokenizer *tok);
int32_t pi_tokenizer_pad(const pi_tokenizer *tok);
/* Whether the model wants EOS appended to a prompt (tokenizer.ggml.add_eos_token,
   with llama.cpp's default; add_bos is public). */
bool pi_tokenizer_add_eos(const pi_tokenizer *tok);
/* Whether SPM text gets a leading space (tokenizer.ggml.add_space_prefix). */
bool pi_tokenizer_add_space_prefix(const pi_tokenizer *tok);

/* Per-token data; the id must be in [0, n_vocab) (PI_TOKEN_UNDEFINED / 0 /
   NULL otherwise). The type reflects llama.cpp's adjustments (end-of-turn
   names are forced to CONTROL). */
pi_token_type pi_tokenizer_token_type(const pi_tokenizer *tok, int32_t id);
float pi_tokenizer_score(const pi_tokenizer *tok, int32_t id);
/* The vocabulary string of a token (not NUL-terminated; an empty string in
   the file reads "[EMPTY_<id>]", as in llama.cpp). NULL for a bad id. */
const char *pi_tokenizer_text(const pi_tokenizer *tok, int32_t id, size_t *len);
/* The id whose vocabulary string is exactly text[0..len), or -1. */
int32_t pi_tokenizer_find(const pi_tokenizer *tok, const char *text, size_t len);

/* Public (include/pinfer.h), with these details:
   - pi_tokenize: EOS is never appended (callers check pi_tokenizer_add_eos);
     control and unknown tokens become their ids with parse_special.
   - pi_token_piece: U+2581 becomes a space, byte tokens one raw byte, BPE
     tokens are mapped back to bytes; with special false, control and unknown
     tokens give an empty piece (llama.cpp's llama_token_to_piece).
   - pi_detokenize: llama.cpp's llama_detokenize(remove_special=false,
     unparse_special=false): for SPM vocabularies with a space prefix, one
     leading space of the first token is removed, also after a leading BOS,
     so detokenize(tokenize(x)) == x with or without BOS (llama.cpp keeps
     the space after a BOS); BPE vocabularies of the gpt-2/default kind get
     llama.cpp's clean-up of spaces before punctuation and contractions.
   - the chat templates (chat.c) and the text stream (stream.c). */

/* The chat template family recognised at load (chat.c). */
int pi_chat_family_of(const pi_gguf *g);

#endif
