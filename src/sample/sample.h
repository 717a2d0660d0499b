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

/* The sampler's API is public: pi_sampler_params, pi_sampler_create,
   _free, _accept, _reset, _sample (include/pinfer.h). */

#endif
