/*
 * window.c — calibration windows (see window.h).
 */
#include "window.h"

#include <stdlib.h>
#include <string.h>

int64_t window_total(int64_t n_ctx, int64_t n_ids, int32_t bos, int64_t max_tokens) {
    const int64_t head = bos >= 0 ? 1 : 0, per = n_ctx - head, n_body = n_ids - head;
    const int64_t total = n_body + (n_body + per - 1) / per * head;
    return max_tokens > 0 && total > max_tokens ? max_tokens : total;
}

/* Evaluate toks[0..n) after what s holds, in batches of at most
   PI_DEFAULT_BATCH (so progress moves within a long window), adding each batch
   to *done. */
static pi_status window_decode(pi_state *s, const int32_t *toks, int64_t n, int64_t *done, window_progress progress,
                        void *ctx) {
    for (int64_t i = 0; i < n; i += PI_DEFAULT_BATCH) {
        const int64_t b = n - i < PI_DEFAULT_BATCH ? n - i : PI_DEFAULT_BATCH;
        pi_status st = pi_state_decode(s, toks + i, b);
        if (st) return st;
        *done += b;
        progress(ctx, *done);
    }
    return PI_OK;
}

pi_status window_feed(pi_state *s, const int32_t *ids, int64_t n_ids, int32_t bos, int64_t max_tokens,
                      window_progress progress, void *ctx, int64_t *n_win, int64_t *n_done) {
    const int64_t n_ctx = s->n_ctx, head = bos >= 0 ? 1 : 0, per = n_ctx - head;
    const int32_t *body = ids + head;
    const int64_t n_body = n_ids - head, total = window_total(n_ctx, n_ids, bos, max_tokens);
    *n_win = *n_done = 0;
    int32_t *win = malloc((size_t)n_ctx * sizeof *win);
    if (!win) return pi_error(PI_ERR_NOMEM, "out of memory");
    pi_status st = PI_OK;
    for (int64_t pos = 0; !st && *n_done < total;) {
        const int64_t take = n_body - pos < per ? n_body - pos : per;
        if (head) win[0] = bos;
        memcpy(win + head, body + pos, (size_t)take * sizeof *win);
        pos += take;
        int64_t n = head + take;
        if (n > total - *n_done) n = total - *n_done;
        pi_state_reset(s);
        ++*n_win;
        st = window_decode(s, win, n, n_done, progress, ctx);
    }
    free(win);
    return st;
}
