/*
 * generate.c — the generate loop, written once: evaluate a prompt, then
 * sample, emit and decode until a stop (include/pinfer.h, pi_generate).
 *
 * Every token emitted is also evaluated, so the session holds the whole
 * text and its logits are ready for the next turn, except the one emitted
 * when the context is full (there is no room to evaluate it).
 */
#include "api.h"

#include "base/timer.h"

#include <string.h>

pi_generate_params pi_generate_default_params(void) {
    pi_generate_params p;
    memset(&p, 0, sizeof p);
    p.n_predict = -1;
    return p;
}

pi_status pi_generate(pi_session *s, pi_sampler *smp, const int32_t *prompt, size_t n_prompt,
                      const pi_generate_params *params, pi_piece_fn on_piece, void *ctx, pi_generate_result *res) {
    pi_generate_result r;
    memset(&r, 0, sizeof r);
    if (res) *res = r;
    if (!s || !smp)
        return pi_error(PI_ERR_INVALID, "pi_generate: %s is NULL", !s ? "the session" : "the sampler");
    if (n_prompt && !prompt) return pi_error(PI_ERR_INVALID, "pi_generate: prompt is NULL");
    const pi_generate_params p = params ? *params : pi_generate_default_params();
    uint64_t t0 = pi_time_ns();
    pi_status st = pi_session_eval(s, prompt, n_prompt);
    if (st) return st;
    for (size_t i = 0; i < n_prompt; i++) pi_sampler_accept(smp, prompt[i]);
    r.n_prompt = (int64_t)n_prompt;
    r.prompt_s = (double)(pi_time_ns() - t0) * 1e-9;
    if (p.n_predict == 0) {
        r.stop = PI_STOP_LENGTH;
        if (res) *res = r;
        return PI_OK;
    }
    if (!s->have_logits)
        return pi_error(PI_ERR_INVALID, "pi_generate: nothing to continue from: give a prompt");

    const pi_tokenizer *tok = s->m->tok;
    pi_text_stream *ts;
    if ((st = pi_text_stream_create(tok, &ts))) return st;
    pi_text_stream_reset(ts, s->last_token);
    t0 = pi_time_ns();
    const char *text;
    size_t len;
    while (r.stop == PI_STOP_NONE) {
        if (p.stop && *p.stop) {
            r.stop = PI_STOP_CALLER;
            break;
        }
        const int32_t t = pi_sampler_sample(smp, pi_state_logits(s->st));
        if (!p.ignore_eos && pi_tokenizer_is_eog(tok, t)) {
            r.stop = PI_STOP_EOG;
            break;
        }
        pi_sampler_accept(smp, t);
        r.n_generated++;
        if ((st = pi_text_stream_push(ts, t, &text, &len))) break;
        const int stop = on_piece ? on_piece(ctx, text, len, t) : 0;
        if (s->st->n_past == s->st->n_ctx) {
            r.stop = PI_STOP_CONTEXT;
            break;
        }
        if ((st = pi_session_decode(s, t))) break;
        if (stop) r.stop = PI_STOP_CALLER;
        else if (r.n_generated == p.n_predict) r.stop = PI_STOP_LENGTH;
    }
    pi_text_stream_flush(ts, &text, &len);
    if (len && on_piece) on_piece(ctx, text, len, -1);
    pi_text_stream_free(ts);
    r.gen_s = (double)(pi_time_ns() - t0) * 1e-9;
    if (res) *res = r;
    return st;
}
