/*
 * serve_job.c — one completion of `pinfer serve` (serve.h): the request
 * read and checked with cJSON, its prompt (the text, or the model's chat
 * template over the messages), its tokens generated on a slot one turn at a
 * time exactly as pi_generate does (so the text equals `pinfer run`'s at the
 * same seed), stop strings, and the answers: one JSON object, or OpenAI's
 * server-sent events. Also the small answers: tokenize, detokenize, models,
 * health.
 */
#include "serve.h"

#ifdef PI_HAVE_SERVE

#include "common.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool srv_fail(srv_error *err, int status, const char *type, const char *fmt, ...) {
    err->status = status;
    err->type = type;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return false;
}

/* Text as a JSON-safe C string: invalid UTF-8 and NUL bytes become U+FFFD. */
static char *clean_text(const char *s, size_t len) {
    char *out = malloc(3 * len + 1), *o = out;
    if (!out) return NULL;
    size_t bad;
    while (len) {
        if (pi_utf8_check(s, len, &bad)) bad = len;
        for (size_t i = 0; i < bad; i++) {
            if (s[i]) *o++ = s[i];
            else o += sizeof "\xEF\xBF\xBD" - 1, memcpy(o - 3, "\xEF\xBF\xBD", 3);
        }
        if (bad == len) break;
        memcpy(o, "\xEF\xBF\xBD", 3), o += 3;
        s += bad + 1, len -= bad + 1;
    }
    *o = '\0';
    return out;
}

static cJSON *add_text(cJSON *obj, const char *name, const char *s, size_t len) {
    char *c = clean_text(s, len);
    cJSON *it = c ? cJSON_AddStringToObject(obj, name, c) : NULL;
    free(c);
    return it;
}

char *srv_error_json(const srv_error *err) {
    cJSON *root = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(root, "error");
    add_text(e, "message", err->message, strlen(err->message));
    cJSON_AddStringToObject(e, "type", err->type ? err->type : "invalid_request_error");
    cJSON_AddNumberToObject(e, "code", err->status);
    cJSON_AddNullToObject(e, "param");
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* ---- reading fields ---- */

#define BAD(...) srv_fail(err, 400, "invalid_request_error", __VA_ARGS__)

/* The field, NULL when absent or null. */
static const cJSON *field(const cJSON *o, const char *name) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    return f && !cJSON_IsNull(f) ? f : NULL;
}

static bool get_num(const cJSON *o, const char *name, double lo, double hi, double *out, srv_error *err) {
    const cJSON *f = field(o, name);
    if (!f) return true;
    if (!cJSON_IsNumber(f)) return BAD("'%s' must be a number", name);
    if (!(f->valuedouble >= lo && f->valuedouble <= hi)) return BAD("'%s' is %g, outside [%g, %g]", name, f->valuedouble, lo, hi);
    *out = f->valuedouble;
    return true;
}

static bool get_int(const cJSON *o, const char *name, double lo, double hi, int64_t *out, srv_error *err) {
    const cJSON *f = field(o, name);
    if (!f) return true;
    if (!cJSON_IsNumber(f) || f->valuedouble != floor(f->valuedouble)) return BAD("'%s' must be an integer", name);
    if (!(f->valuedouble >= lo && f->valuedouble <= hi))
        return BAD("'%s' is %.0f, outside [%.0f, %.0f]", name, f->valuedouble, lo, hi);
    *out = (int64_t)f->valuedouble;
    return true;
}

static bool get_bool(const cJSON *o, const char *name, bool *out, srv_error *err) {
    const cJSON *f = field(o, name);
    if (!f) return true;
    if (!cJSON_IsBool(f)) return BAD("'%s' must be true or false", name);
    *out = cJSON_IsTrue(f);
    return true;
}

static cJSON *parse_object(const char *body, size_t len, srv_error *err) {
    if (!len) return BAD("the request has no body: a JSON object is expected"), NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (!root) {
        size_t at = end && end >= body && end <= body + len ? (size_t)(end - body) : 0;
        BAD("the body is not valid JSON (at byte %zu of %zu)", at, len);
        return NULL;
    }
    size_t at = (size_t)(end - body);
    while (at < len && (body[at] == ' ' || body[at] == '\t' || body[at] == '\n' || body[at] == '\r')) at++;
    if (at < len) {
        cJSON_Delete(root);
        BAD("the body has data after its JSON value (at byte %zu of %zu)", at, len);
        return NULL;
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        BAD("the body must be a JSON object");
        return NULL;
    }
    return root;
}

/* ---- the job ---- */

struct job {
    server *sv;
    bool chat, stream, include_usage, ignore_eos;
    int32_t *prompt;
    size_t n_prompt;
    pi_sampler_params sp;
    int64_t max_tokens;              /* -1: until the end of text or the context */
    char *stop[SERVE_MAX_STOP];
    size_t stop_len[SERVE_MAX_STOP];
    int n_stop;
    char id[48];
    long long created;
    /* the run */
    srv_slot *slot;
    pi_sampler *smp;
    pi_text_stream *ts;
    int phase;                       /* 0 waiting, 1 generating, 2 finished */
    char *text;
    size_t len, cap, sent;           /* generated bytes; of them sent in events */
    int64_t n_gen;
    const char *finish;              /* "stop" or "length" once finished */
    srv_error fail;                  /* a failure mid-way */
    double prompt_ms;
    double t_gen0;
    double gen_s;
    pi_token_stats acc;              /* this request's share of the counters */
    uint64_t n_decoded;
    /* events not yet read */
    char *out;
    size_t out_len, out_off, out_cap;
};

bool job_stream(const job *j) { return j->stream; }

static bool tokenize_text(server *sv, const char *text, size_t len, bool special, job *j, srv_error *err) {
    size_t bad;
    if (!pi_utf8_check(text, len, &bad)) return BAD("the prompt is not valid UTF-8 at byte %zu", bad);
    const bool bos = pi_tokenizer_add_bos(sv->tok) && pi_tokenizer_bos(sv->tok) >= 0;
    size_t need = 0;
    pi_status st = pi_tokenize(sv->tok, text, len, bos, special, NULL, 0, &need);
    if (st && st != PI_ERR_INVALID) return BAD("cannot tokenize the prompt: %s", pi_last_error());
    if (!(j->prompt = malloc((need + 1) * sizeof *j->prompt)))
        return srv_fail(err, 500, "server_error", "out of memory");
    if (pi_tokenize(sv->tok, text, len, bos, special, j->prompt, need, &j->n_prompt))
        return BAD("cannot tokenize the prompt: %s", pi_last_error());
    return true;
}

/* A message's content: a string or an array of {"type":"text","text":...} parts. */
static char *message_text(const cJSON *c, size_t k, srv_error *err) {
    if (cJSON_IsString(c)) return strdup(c->valuestring);
    if (!cJSON_IsArray(c)) return BAD("messages[%zu].content must be a string or an array of text parts", k), NULL;
    size_t n = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, c) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "text"), *ty = cJSON_GetObjectItemCaseSensitive(p, "type");
        if (!cJSON_IsObject(p) || !cJSON_IsString(ty) || strcmp(ty->valuestring, "text") || !cJSON_IsString(t))
            return BAD("messages[%zu].content: only parts {\"type\": \"text\", \"text\": ...} are supported", k), NULL;
        n += strlen(t->valuestring);
    }
    char *s = malloc(n + 1);
    if (!s) return NULL;
    s[0] = '\0';
    cJSON_ArrayForEach(p, c) strcat(s, cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring);
    return s;
}

static bool chat_prompt(server *sv, const cJSON *root, job *j, srv_error *err) {
    const cJSON *msgs = field(root, "messages");
    if (!msgs) return BAD("'messages' is required");
    const int n = cJSON_GetArraySize(msgs);
    if (!cJSON_IsArray(msgs) || n == 0) return BAD("'messages' must be a non-empty array");
    pi_chat_message *m = calloc((size_t)n, sizeof *m);
    char **texts = calloc((size_t)n, sizeof *texts);
    bool ok = m && texts;
    if (!ok) srv_fail(err, 500, "server_error", "out of memory");
    size_t k = 0;
    const cJSON *msg;
    cJSON_ArrayForEach(msg, msgs) {
        if (!ok) break;
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        if (!cJSON_IsObject(msg) || !cJSON_IsString(role)) {
            ok = BAD("messages[%zu] must be an object with a string 'role'", k);
            break;
        }
        const char *r = role->valuestring;
        if (!strcmp(r, "developer")) r = "system"; /* OpenAI's newer name of the system role */
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant")) {
            ok = BAD("messages[%zu].role is '%s': system, user or assistant", k, role->valuestring);
            break;
        }
        const cJSON *c = field(msg, "content");
        if (!c) {
            ok = BAD("messages[%zu].content is required", k);
            break;
        }
        if (!(texts[k] = message_text(c, k, err))) {
            ok = err->status ? false : srv_fail(err, 500, "server_error", "out of memory");
            break;
        }
        m[k].role = r;
        m[k].content = texts[k];
        k++;
    }
    char *buf = NULL;
    size_t len = 0;
    if (ok) {
        pi_status st = pi_chat_apply(sv->tok, m, k, true, NULL, 0, &len);
        if (st && st != PI_ERR_INVALID) ok = BAD("%s", pi_last_error());
        else if (!(buf = malloc(len + 1))) ok = srv_fail(err, 500, "server_error", "out of memory");
        else if (pi_chat_apply(sv->tok, m, k, true, buf, len + 1, &len)) ok = BAD("%s", pi_last_error());
    }
    if (ok) ok = tokenize_text(sv, buf, len, true, j, err);
    free(buf);
    for (size_t i = 0; texts && i < (size_t)n; i++) free(texts[i]);
    free(texts);
    free(m);
    return ok;
}

static bool text_prompt(server *sv, const cJSON *root, job *j, srv_error *err) {
    const cJSON *p = field(root, "prompt");
    if (!p) return BAD("'prompt' is required");
    if (cJSON_IsString(p)) return tokenize_text(sv, p->valuestring, strlen(p->valuestring), false, j, err);
    const int n = cJSON_GetArraySize(p);
    if (!cJSON_IsArray(p) || n == 0) return BAD("'prompt' must be a string, an array of one string or of token ids");
    const cJSON *first = cJSON_GetArrayItem(p, 0);
    if (cJSON_IsString(first)) {
        if (n > 1) return BAD("'prompt' holds %d strings: one prompt per request", n);
        return tokenize_text(sv, first->valuestring, strlen(first->valuestring), false, j, err);
    }
    if (!(j->prompt = malloc((size_t)n * sizeof *j->prompt))) return srv_fail(err, 500, "server_error", "out of memory");
    const int32_t V = pi_tokenizer_n_vocab(sv->tok);
    const cJSON *t;
    cJSON_ArrayForEach(t, p) {
        if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 || t->valuedouble >= V)
            return BAD("'prompt'[%zu] is not a token id in [0, %d)", j->n_prompt, V);
        j->prompt[j->n_prompt++] = (int32_t)t->valuedouble;
    }
    return true;
}

static bool read_stop(const cJSON *root, job *j, srv_error *err) {
    const cJSON *s = field(root, "stop");
    if (!s) return true;
    if (!cJSON_IsString(s) && !cJSON_IsArray(s)) return BAD("'stop' must be a string or an array of strings");
    if (cJSON_IsArray(s) && cJSON_GetArraySize(s) > SERVE_MAX_STOP)
        return BAD("'stop' holds %d strings, at most %d", cJSON_GetArraySize(s), SERVE_MAX_STOP);
    const cJSON *one = s;
    const cJSON *item = cJSON_IsArray(s) ? s->child : one;
    for (; item; item = cJSON_IsArray(s) ? item->next : NULL) {
        if (!cJSON_IsString(item)) return BAD("'stop' must be a string or an array of strings");
        const size_t n = strlen(item->valuestring);
        if (!n) continue;
        if (!(j->stop[j->n_stop] = strdup(item->valuestring))) return srv_fail(err, 500, "server_error", "out of memory");
        j->stop_len[j->n_stop++] = n;
    }
    return true;
}

static bool read_sampling(server *sv, const cJSON *root, job *j, srv_error *err) {
    pi_sampler_params *sp = &j->sp;
    *sp = sv->sp;
    double d;
    int64_t i;
    d = sp->temp;
    if (!get_num(root, "temperature", 0, 100, &d, err)) return false;
    sp->temp = (float)d;
    d = sp->top_p;
    if (!get_num(root, "top_p", 0, 1, &d, err)) return false;
    sp->top_p = d > 0 ? (float)d : 1.0f;
    d = sp->min_p;
    if (!get_num(root, "min_p", 0, 1, &d, err)) return false;
    sp->min_p = (float)d;
    d = sp->repeat_penalty;
    if (!get_num(root, "repeat_penalty", 1e-3, 100, &d, err)) return false;
    sp->repeat_penalty = (float)d;
    i = sp->top_k;
    if (!get_int(root, "top_k", -1, 1 << 24, &i, err)) return false;
    sp->top_k = (int32_t)i;
    i = sp->repeat_last_n;
    if (!get_int(root, "repeat_last_n", -1, 1 << 20, &i, err)) return false;
    sp->repeat_last_n = i < 0 ? (int32_t)sv->n_ctx_slot : (int32_t)i;
    i = -1;
    if (!get_int(root, "seed", -1, 9007199254740991.0, &i, err)) return false;
    if (i >= 0) sp->seed = (uint64_t)i;
    else if (!sv->seed_given) sp->seed = app_random_seed();
    i = sv->n_predict;
    if (!get_int(root, "max_tokens", -1, (double)sv->n_ctx_slot, &i, err)) return false;
    if (!get_int(root, "max_completion_tokens", -1, (double)sv->n_ctx_slot, &i, err)) return false;
    j->max_tokens = i;
    i = 1;
    if (!get_int(root, "n", 1, 1, &i, err)) return false;
    bool logprobs = false;
    if (!get_bool(root, "logprobs", &logprobs, err)) return false;
    if (logprobs) return BAD("'logprobs' is not supported");
    if (!get_bool(root, "ignore_eos", &j->ignore_eos, err)) return false;
    if (!get_bool(root, "stream", &j->stream, err)) return false;
    const cJSON *so = field(root, "stream_options");
    if (so && !cJSON_IsObject(so)) return BAD("'stream_options' must be an object");
    if (so && !get_bool(so, "include_usage", &j->include_usage, err)) return false;
    return read_stop(root, j, err);
}

job *job_create(server *sv, const char *body, size_t len, bool chat, srv_error *err) {
    memset(err, 0, sizeof *err);
    cJSON *root = parse_object(body, len, err);
    if (!root) return NULL;
    job *j = calloc(1, sizeof *j);
    if (!j) {
        cJSON_Delete(root);
        srv_fail(err, 500, "server_error", "out of memory");
        return NULL;
    }
    j->sv = sv;
    j->chat = chat;
    bool ok = read_sampling(sv, root, j, err) && (chat ? chat_prompt(sv, root, j, err) : text_prompt(sv, root, j, err));
    cJSON_Delete(root);
    if (ok && j->n_prompt == 0)
        ok = BAD("the prompt is empty and the model has no BOS token to start from");
    if (ok && (int64_t)j->n_prompt > sv->n_ctx_slot)
        ok = BAD("the prompt is %zu tokens but a slot's context holds %lld (-c %lld across %d slot%s)", j->n_prompt,
                 (long long)sv->n_ctx_slot, (long long)sv->n_ctx_slot * sv->n_slots, sv->n_slots,
                 sv->n_slots == 1 ? "" : "s");
    if (!ok) {
        job_free(j);
        return NULL;
    }
    const uint64_t n = atomic_fetch_add(&sv->n_requests, 1);
    snprintf(j->id, sizeof j->id, "%s-%llx%04llx", chat ? "chatcmpl" : "cmpl", (unsigned long long)time(NULL),
             (unsigned long long)(n & 0xffff));
    j->created = (long long)time(NULL);
    return j;
}

void job_free(job *j) {
    if (!j) return;
    if (j->slot) srv_slot_release(j->sv, j->slot);
    pi_sampler_free(j->smp);
    pi_text_stream_free(j->ts);
    for (int k = 0; k < j->n_stop; k++) free(j->stop[k]);
    free(j->prompt);
    free(j->text);
    free(j->out);
    free(j);
}

/* ---- generating ---- */

/* Evaluate n tokens in a turn, adding the counters' change to the job's. */
static pi_status eval_turn(job *j, const int32_t *t, size_t n, bool decoding) {
    server *sv = j->sv;
    pi_session *s = j->slot->s;
    pi_token_stats a, b;
    srv_turn_begin(sv);
    pi_session_stats(s, &a);
    pi_status st = decoding ? pi_session_decode(s, t[0]) : pi_session_eval(s, t, n);
    pi_session_stats(s, &b);
    srv_turn_end(sv);
    if (decoding) {
        j->n_decoded++;
        pi_token_stats *c = &j->acc;
        c->neurons_resident += b.neurons_resident - a.neurons_resident;
        c->neurons_cached += b.neurons_cached - a.neurons_cached;
        c->neurons_read += b.neurons_read - a.neurons_read;
        c->reads += b.reads - a.reads;
        c->bytes_read += b.bytes_read - a.bytes_read;
        c->io_wait_s += b.io_wait_s - a.io_wait_s;
        c->io_busy_s += b.io_busy_s - a.io_busy_s;
    }
    if (st) srv_fail(&j->fail, 500, "server_error", "%s", pi_last_error());
    return st;
}

static bool append(job *j, const char *s, size_t n) {
    if (j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? 2 * j->cap : 256;
        while (cap < j->len + n + 1) cap *= 2;
        char *t = realloc(j->text, cap);
        if (!t) return false;
        j->text = t, j->cap = cap;
    }
    memcpy(j->text + j->len, s, n);
    j->len += n;
    j->text[j->len] = '\0';
    return true;
}

/* Cut the text at the first stop string found in its last `added` bytes (or
   reaching back into the text before them); true when one was. */
static bool cut_at_stop(job *j, size_t added) {
    size_t best = SIZE_MAX;
    for (int k = 0; k < j->n_stop; k++) {
        const size_t L = j->stop_len[k];
        const size_t from = j->len - added > L - 1 ? j->len - added - (L - 1) : 0;
        const char *p = memmem(j->text + from, j->len - from, j->stop[k], L);
        if (p && (size_t)(p - j->text) < best) best = (size_t)(p - j->text);
    }
    if (best == SIZE_MAX) return false;
    j->len = best;
    j->text[best] = '\0';
    return true;
}

/* Bytes at the end that could begin a stop string: held back from events. */
static size_t held_back(const job *j) {
    size_t hold = 0;
    for (int k = 0; k < j->n_stop; k++)
        for (size_t n = j->stop_len[k] - 1; n > hold; n--)
            if (n <= j->len && !memcmp(j->text + j->len - n, j->stop[k], n)) {
                hold = n;
                break;
            }
    return hold;
}

static void finish(job *j, const char *why) {
    const char *text;
    size_t n;
    pi_text_stream_flush(j->ts, &text, &n);
    if (n && append(j, text, n) && cut_at_stop(j, n)) why = "stop";
    j->finish = why;
    j->gen_s = app_time_s() - j->t_gen0;
    j->phase = 2;
    srv_slot_release(j->sv, j->slot); /* the answer is known: the next request may start */
    j->slot = NULL;
}

/* Prompt: reset the slot, evaluate the prompt. */
static bool start(job *j) {
    pi_session *s = j->slot->s;
    const double t0 = app_time_s();
    if (pi_session_kv_clear(s) || pi_sampler_create(&j->sp, j->sv->info.n_vocab, &j->smp) ||
        pi_text_stream_create(j->sv->tok, &j->ts)) {
        srv_fail(&j->fail, 500, "server_error", "%s", pi_last_error());
        return false;
    }
    if (eval_turn(j, j->prompt, j->n_prompt, false)) return false;
    for (size_t i = 0; i < j->n_prompt; i++) pi_sampler_accept(j->smp, j->prompt[i]);
    pi_text_stream_reset(j->ts, j->prompt[j->n_prompt - 1]);
    j->prompt_ms = (app_time_s() - t0) * 1e3;
    j->t_gen0 = app_time_s();
    j->phase = 1;
    if (j->max_tokens == 0) finish(j, "length");
    return true;
}

/* One token: sample, emit, decode (as pi_generate). false on a failure. */
static bool step(job *j) {
    pi_session *s = j->slot->s;
    const int32_t t = pi_sampler_sample(j->smp, pi_session_logits(s));
    if (!j->ignore_eos && pi_tokenizer_is_eog(j->sv->tok, t)) {
        finish(j, "stop");
        return true;
    }
    pi_sampler_accept(j->smp, t);
    j->n_gen++;
    const char *text;
    size_t n;
    if (pi_text_stream_push(j->ts, t, &text, &n) || !append(j, text, n)) {
        srv_fail(&j->fail, 500, "server_error", "%s", pi_last_error());
        return false;
    }
    if (cut_at_stop(j, n)) finish(j, "stop");
    else if (j->n_gen == j->max_tokens || pi_session_n_past(s) == pi_session_n_ctx(s)) finish(j, "length");
    else if (eval_turn(j, &t, 1, true)) return false;
    return true;
}

/* ---- answers ---- */

static void add_timings(cJSON *obj, const job *j) {
    cJSON *t = cJSON_AddObjectToObject(obj, "timings");
    const double gen_s = j->phase == 2 ? j->gen_s : j->phase == 1 ? app_time_s() - j->t_gen0 : 0.0;
    const double n = (double)j->n_gen;
    cJSON_AddNumberToObject(t, "prompt_n", (double)j->n_prompt);
    cJSON_AddNumberToObject(t, "prompt_ms", j->prompt_ms);
    cJSON_AddNumberToObject(t, "prompt_per_second", j->prompt_ms > 0 ? (double)j->n_prompt / j->prompt_ms * 1e3 : 0.0);
    cJSON_AddNumberToObject(t, "predicted_n", n);
    cJSON_AddNumberToObject(t, "predicted_ms", gen_s * 1e3);
    cJSON_AddNumberToObject(t, "predicted_per_token_ms", n > 0 ? gen_s * 1e3 / n : 0.0);
    cJSON_AddNumberToObject(t, "predicted_per_second", gen_s > 0 ? n / gen_s : 0.0);
    if (!j->sv->info.offloaded) {
        cJSON_AddNullToObject(t, "offload");
        return;
    }
    cJSON *o = cJSON_AddObjectToObject(t, "offload");
    const pi_token_stats *c = &j->acc;
    const double d = j->n_decoded ? (double)j->n_decoded : 1.0;
    cJSON_AddNumberToObject(o, "tokens", (double)j->n_decoded);
    cJSON_AddNumberToObject(o, "neurons_resident", (double)c->neurons_resident / d);
    cJSON_AddNumberToObject(o, "neurons_cached", (double)c->neurons_cached / d);
    cJSON_AddNumberToObject(o, "neurons_read", (double)c->neurons_read / d);
    cJSON_AddNumberToObject(o, "reads", (double)c->reads / d);
    cJSON_AddNumberToObject(o, "mb_read", (double)c->bytes_read / d * 1e-6);
    cJSON_AddNumberToObject(o, "io_wait_ms", c->io_wait_s / d * 1e3);
    cJSON_AddNumberToObject(o, "io_hidden_pct",
                            c->io_busy_s > 0 ? 100.0 * (c->io_busy_s - c->io_wait_s) / c->io_busy_s : 0.0);
}

static void add_usage(cJSON *obj, const job *j) {
    cJSON *u = cJSON_AddObjectToObject(obj, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)j->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)j->n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(j->n_prompt + (size_t)j->n_gen));
}

static cJSON *head(const job *j, const char *object) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "id", j->id);
    cJSON_AddStringToObject(r, "object", object);
    cJSON_AddNumberToObject(r, "created", (double)j->created);
    cJSON_AddStringToObject(r, "model", j->sv->model_id);
    return r;
}

static char *print(cJSON *r) {
    char *s = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    return s;
}

/* The whole answer. */
static char *answer(const job *j) {
    cJSON *r = head(j, j->chat ? "chat.completion" : "text_completion");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "choices"), c);
    cJSON_AddNumberToObject(c, "index", 0);
    if (j->chat) {
        cJSON *m = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        add_text(m, "content", j->text ? j->text : "", j->len);
    } else {
        add_text(c, "text", j->text ? j->text : "", j->len);
        cJSON_AddNullToObject(c, "logprobs");
    }
    cJSON_AddStringToObject(c, "finish_reason", j->finish);
    add_usage(r, j);
    add_timings(r, j);
    return print(r);
}

char *job_run(job *j, bool (*gone)(void *ctx), void *ctx, srv_error *err) {
    if (!(j->slot = srv_slot_acquire(j->sv, gone, ctx))) {
        srv_fail(err, 503, "unavailable_error", "the server is shutting down or the client left");
        return NULL;
    }
    bool ok = start(j);
    while (ok && j->phase == 1) {
        if (gone && gone(ctx)) {
            srv_fail(err, 499, "invalid_request_error", "the client left");
            return NULL;
        }
        ok = step(j);
    }
    if (!ok) {
        *err = j->fail;
        return NULL;
    }
    return answer(j);
}

/* ---- events ---- */

static bool emit(job *j, const char *s) {
    const size_t n = strlen(s);
    if (j->out_len + n + 1 > j->out_cap) {
        size_t cap = j->out_cap ? 2 * j->out_cap : 1024;
        while (cap < j->out_len + n + 1) cap *= 2;
        char *t = realloc(j->out, cap);
        if (!t) return false;
        j->out = t, j->out_cap = cap;
    }
    memcpy(j->out + j->out_len, s, n);
    j->out_len += n;
    return true;
}

static void emit_event(job *j, char *json) {
    if (!json) return;
    emit(j, "data: ");
    emit(j, json);
    emit(j, "\n\n");
    free(json);
}

/* A chunk with text [from, to) of the generated bytes (chat: a delta), and
   the finish reason when finished. role: the opening chunk of a chat. */
static void emit_chunk(job *j, size_t from, size_t to, bool role, const char *finish_reason) {
    cJSON *r = head(j, j->chat ? "chat.completion.chunk" : "text_completion");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "choices"), c);
    cJSON_AddNumberToObject(c, "index", 0);
    if (j->chat) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (role) {
            cJSON_AddStringToObject(d, "role", "assistant");
            cJSON_AddStringToObject(d, "content", "");
        } else if (to > from)
            add_text(d, "content", j->text + from, to - from);
    } else {
        add_text(c, "text", to > from ? j->text + from : "", to - from);
        cJSON_AddNullToObject(c, "logprobs");
    }
    if (finish_reason) cJSON_AddStringToObject(c, "finish_reason", finish_reason);
    else cJSON_AddNullToObject(c, "finish_reason");
    add_timings(r, j);
    emit_event(j, print(r));
}

static void emit_end(job *j) {
    if (j->fail.status) {
        emit_event(j, srv_error_json(&j->fail));
    } else {
        /* what was held back for the stop strings, then the finish */
        if (j->chat && j->len > j->sent) emit_chunk(j, j->sent, j->len, false, NULL);
        emit_chunk(j, j->chat ? j->len : j->sent, j->len, false, j->finish);
        j->sent = j->len;
        if (j->include_usage) {
            cJSON *r = head(j, j->chat ? "chat.completion.chunk" : "text_completion");
            cJSON_AddArrayToObject(r, "choices");
            add_usage(r, j);
            add_timings(r, j);
            emit_event(j, print(r));
        }
    }
    emit(j, "data: [DONE]\n\n");
    j->phase = 3;
}

long job_read(job *j, char *buf, size_t cap, bool (*gone)(void *ctx), void *ctx) {
    for (;;) {
        if (j->out_off < j->out_len) {
            size_t n = j->out_len - j->out_off < cap ? j->out_len - j->out_off : cap;
            memcpy(buf, j->out + j->out_off, n);
            j->out_off += n;
            return (long)n;
        }
        j->out_len = j->out_off = 0;
        if (j->phase == 3) return 0;
        if (j->phase == 0) {
            if (!(j->slot = srv_slot_acquire(j->sv, gone, ctx))) return -1;
            if (!start(j)) emit_end(j);
            else if (j->chat) emit_chunk(j, 0, 0, true, NULL);
            continue;
        }
        if (j->phase == 1) {
            if (gone && gone(ctx)) return -1;
            if (!step(j)) {
                emit_end(j);
                continue;
            }
            const size_t upto = j->phase == 2 ? j->len : j->len - held_back(j);
            if (upto > j->sent) {
                emit_chunk(j, j->sent, upto, false, NULL);
                j->sent = upto;
            }
        }
        if (j->phase == 2) emit_end(j);
    }
}

/* ---- small answers ---- */

char *serve_tokenize(server *sv, const char *body, size_t len, srv_error *err) {
    memset(err, 0, sizeof *err);
    cJSON *root = parse_object(body, len, err);
    if (!root) return NULL;
    const cJSON *c = field(root, "content");
    bool add_special = false, pieces = false, ok = true;
    if (!c || !cJSON_IsString(c)) ok = BAD("'content' must be a string");
    else ok = get_bool(root, "add_special", &add_special, err) && get_bool(root, "with_pieces", &pieces, err);
    job tmp;
    memset(&tmp, 0, sizeof tmp);
    char *out = NULL;
    if (ok) {
        size_t bad, n = strlen(c->valuestring), need = 0;
        const bool bos = add_special && pi_tokenizer_bos(sv->tok) >= 0;
        if (!pi_utf8_check(c->valuestring, n, &bad)) ok = BAD("'content' is not valid UTF-8 at byte %zu", bad);
        else if (pi_tokenize(sv->tok, c->valuestring, n, bos, true, NULL, 0, &need) && need == 0 && n)
            ok = BAD("cannot tokenize: %s", pi_last_error());
        else if (!(tmp.prompt = malloc((need + 1) * sizeof *tmp.prompt)) ||
                 pi_tokenize(sv->tok, c->valuestring, n, bos, true, tmp.prompt, need, &tmp.n_prompt))
            ok = srv_fail(err, 500, "server_error", "cannot tokenize: %s", pi_last_error());
    }
    if (ok) {
        cJSON *r = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(r, "tokens");
        for (size_t i = 0; i < tmp.n_prompt; i++) {
            if (!pieces) {
                cJSON_AddItemToArray(a, cJSON_CreateNumber(tmp.prompt[i]));
                continue;
            }
            cJSON *t = cJSON_CreateObject();
            cJSON_AddNumberToObject(t, "id", tmp.prompt[i]);
            const char *p = "";
            size_t pl = 0;
            pi_token_piece(sv->tok, tmp.prompt[i], true, &p, &pl);
            if (pi_utf8_check(p, pl, NULL) && !memchr(p, 0, pl)) add_text(t, "piece", p, pl);
            else { /* part of a character: its bytes */
                cJSON *b = cJSON_AddArrayToObject(t, "piece");
                for (size_t k = 0; k < pl; k++) cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)p[k]));
            }
            cJSON_AddItemToArray(a, t);
        }
        out = print(r);
    }
    free(tmp.prompt);
    cJSON_Delete(root);
    return out;
}

char *serve_detokenize(server *sv, const char *body, size_t len, srv_error *err) {
    memset(err, 0, sizeof *err);
    cJSON *root = parse_object(body, len, err);
    if (!root) return NULL;
    const cJSON *t = field(root, "tokens"), *it;
    const int n = t ? cJSON_GetArraySize(t) : 0;
    const int32_t V = pi_tokenizer_n_vocab(sv->tok);
    int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
    bool ok = ids != NULL;
    if (!ok) srv_fail(err, 500, "server_error", "out of memory");
    else if (!t || !cJSON_IsArray(t)) ok = BAD("'tokens' must be an array of token ids");
    int k = 0;
    if (ok) cJSON_ArrayForEach(it, t) {
            if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 0 ||
                it->valuedouble >= V) {
                ok = BAD("'tokens'[%d] is not a token id in [0, %d)", k, V);
                break;
            }
            ids[k++] = (int32_t)it->valuedouble;
        }
    char *out = NULL, *text = NULL;
    size_t need = 0;
    if (ok) {
        pi_detokenize(sv->tok, ids, (size_t)k, NULL, 0, &need);
        if (!(text = malloc(need + 1)) || pi_detokenize(sv->tok, ids, (size_t)k, text, need + 1, &need))
            ok = srv_fail(err, 500, "server_error", "cannot detokenize: %s", pi_last_error());
    }
    if (ok) {
        cJSON *r = cJSON_CreateObject();
        add_text(r, "content", text, need);
        out = print(r);
    }
    free(text);
    free(ids);
    cJSON_Delete(root);
    return out;
}

char *serve_models(server *sv) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "object", "list");
    cJSON *m = cJSON_CreateObject(), *meta;
    cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "data"), m);
    cJSON_AddStringToObject(m, "id", sv->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)time(NULL));
    cJSON_AddStringToObject(m, "owned_by", "pinfer");
    meta = cJSON_AddObjectToObject(m, "meta");
    const pi_model_info *in = &sv->info;
    cJSON_AddNumberToObject(meta, "n_ctx_slot", (double)sv->n_ctx_slot);
    cJSON_AddNumberToObject(meta, "n_slots", sv->n_slots);
    cJSON_AddNumberToObject(meta, "n_ctx_train", (double)in->n_ctx_train);
    cJSON_AddNumberToObject(meta, "n_vocab", (double)in->n_vocab);
    cJSON_AddNumberToObject(meta, "n_params", (double)in->n_params);
    cJSON_AddNumberToObject(meta, "size", (double)in->file_size);
    cJSON_AddStringToObject(meta, "activation", in->activation);
    cJSON_AddStringToObject(meta, "ffn", in->ffn == PI_FFN_DENSE ? "dense" : in->ffn == PI_FFN_ORACLE ? "oracle" : "sparse");
    cJSON_AddBoolToObject(meta, "offloaded", in->offloaded);
    pi_memory_report mr;
    cJSON_AddNumberToObject(meta, "mem_budget", in->offloaded && !pi_model_memory(sv->m, &mr) ? (double)mr.limit : 0.0);
    return print(r);
}

char *serve_health(server *sv) {
    cJSON *r = cJSON_CreateObject();
    const int busy = srv_slots_busy(sv);
    cJSON_AddStringToObject(r, "status", atomic_load(&sv->draining) ? "shutting down" : "ok");
    cJSON_AddNumberToObject(r, "slots_idle", sv->n_slots - busy);
    cJSON_AddNumberToObject(r, "slots_processing", busy);
    return print(r);
}
#endif
