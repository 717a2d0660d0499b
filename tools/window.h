/*
 * window.h — feeding a text's tokens through a session the way calibration
 * does it (`profile`, `train-predictor`): in windows of n_ctx tokens, each
 * evaluated from an empty cache and starting with BOS, so every position
 * sees the kind of context it sees in use. A window is BOS and the next
 * n_ctx-1 tokens of text (perplexity overwrites a text token with BOS
 * instead; here no text is skipped), and the last, partial window is fed
 * too. Whatever FFN observer the session has installed sees every token
 * evaluated, BOS included. Nothing is printed: errors come back as a
 * pi_status with pi_last_error() set, progress through a callback.
 */
#ifndef PI_TOOLS_WINDOW_H
#define PI_TOOLS_WINDOW_H

#include "model/session.h"

#include <stdint.h>

/* Called after each batch with the tokens evaluated so far. */
typedef void (*window_progress)(void *ctx, int64_t done);

/* How many tokens window_feed evaluates for ids[0..n_ids) (whose first is
   BOS when bos >= 0) in windows of n_ctx: at most max_tokens (0: all). */
int64_t window_total(int64_t n_ctx, int64_t n_ids, int32_t bos, int64_t max_tokens);

/* Evaluate the text's tokens ids[0..n_ids) (the first is BOS when
   bos >= 0) in windows of s->n_ctx, window_total() of them. *n_win counts
   the windows begun, *n_done the tokens evaluated. PI_ERR_NOMEM, or the
   error of a decode. */
pi_status window_feed(pi_state *s, const int32_t *ids, int64_t n_ids, int32_t bos, int64_t max_tokens,
                      window_progress progress, void *ctx, int64_t *n_win, int64_t *n_done);

#endif
