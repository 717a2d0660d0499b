/*
 * sample.h — choosing the next token from logits.
 *
 * The chain follows llama.cpp's default order: repetition penalty over the
 * last `repeat_last_n` tokens, then top-k, top-p (nucleus), min-p, then
 * temperature and a draw from the resulting distribution. temp <= 0 is greedy
 * (argmax after the penalty). The same seed and inputs give the same tokens
 * on every platform (the PRNG is splitmix64, the draw uses doubles).
 *
 * One sampler belongs to one session; it allocates only at creation.
 */
#ifndef PI_SAMPLE_SAMPLE_H
#define PI_SAMPLE_SAMPLE_H

#include "base/status.h"

#include <stdint.h>

typedef struct pi_sampler_params {
    float temp;           /* <= 0: greedy */
    int32_t top_k;        /* <= 0: off */
    float top_p;          /* >= 1: off */
    float min_p;          /* <= 0: off */
    float repeat_penalty; /* 1: off */
    int32_t repeat_last_n;/* tokens the penalty looks back over */
    uint64_t seed;
} pi_sampler_params;

/* llama.cpp's defaults: temp 0.8, top-k 40, top-p 0.95, min-p 0.05, no penalty (64 tokens). */
pi_sampler_params pi_sampler_default_params(void);

typedef struct pi_sampler pi_sampler;

pi_status pi_sampler_create(const pi_sampler_params *p, int64_t n_vocab, pi_sampler **out);
void pi_sampler_free(pi_sampler *s); /* accepts NULL */

/* Record a token of the context (prompt or generated) for the penalty. */
void pi_sampler_accept(pi_sampler *s, int32_t token);

/* Forget the recorded tokens and restart the PRNG from the seed. */
void pi_sampler_reset(pi_sampler *s);

/* Pick a token from n_vocab logits (not modified). */
int32_t pi_sampler_sample(pi_sampler *s, const float *logits);

#endif
