/*
 * serve.h — `pinfer serve`: an OpenAI-compatible HTTP server on the public
 * API (include/pinfer.h). HTTP is libmicrohttpd's, JSON is cJSON's.
 *
 *   cmd_serve.c    options, the model and its slots, start and drain
 *   serve_http.c   requests: routes, bodies, keys, errors, responses, events
 *   serve_job.c    one completion: its request read and checked, its tokens
 *                  generated on a slot step by step, its answers in JSON
 *   serve_page.c   the chat page served at GET /
 *
 * A slot is a session with its own KV cache (-c split evenly across -np
 * slots, as llama-server does). A request waits in line for a free slot;
 * slots generate at the same time, taking turns one evaluation (a prompt
 * or one token) at a time, so each evaluation has every thread. Under
 * --mem-budget the slots' sessions share the budget's hot neurons, neuron
 * cache and I/O queue (pi_model_params.n_seq_max).
 */
#ifndef PI_TOOLS_SERVE_H
#define PI_TOOLS_SERVE_H

#include "pinfer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SERVE_MAX_BODY ((size_t)4 << 20) /* request bodies above this get 413 */
#define SERVE_MAX_STOP 16                /* stop strings per request */

typedef struct srv_slot {
    int id;
    pi_session *s;
    bool busy;
} srv_slot;

typedef struct server {
    pi_model *m;
    const pi_tokenizer *tok;
    pi_model_info info;
    char model_id[256];
    const char *api_key;          /* NULL: none asked */
    pi_sampler_params sp;         /* defaults of requests (the command line's) */
    bool seed_given;              /* else each request without a seed draws one */
    long n_predict;               /* default max_tokens (-1: until the end or the context) */
    int64_t n_ctx_slot;
    int n_slots;
    srv_slot *slots;
    /* slots are handed out in order of arrival */
    pthread_mutex_t lock;
    pthread_cond_t freed;
    uint64_t next_ticket, serving;
    /* one evaluation at a time, in order of asking */
    pthread_mutex_t turn_lock;
    pthread_cond_t turn_cond;
    uint64_t turn_next, turn_serving;
    atomic_int in_flight;         /* requests accepted and not yet finished */
    atomic_bool draining;         /* shutting down: new requests get 503 */
    atomic_uint_fast64_t n_requests;
} server;

/* Slots: wait for one in line (NULL when gone() says the client left while
   waiting); give it back. Requests in line when the server drains are
   still served. */
srv_slot *srv_slot_acquire(server *sv, bool (*gone)(void *ctx), void *ctx);
void srv_slot_release(server *sv, srv_slot *sl);
int srv_slots_busy(server *sv);

/* Take and end a turn at evaluating. */
void srv_turn_begin(server *sv);
void srv_turn_end(server *sv);

/* ---- one completion (serve_job.c) ---- */

typedef struct job job;

/* A request's HTTP status and OpenAI-style error, for the caller to send. */
typedef struct srv_error {
    int status;                   /* 0: none */
    const char *type;
    char message[512];
} srv_error;

/* Read and check a completion request (chat: /v1/chat/completions). NULL
   with *err set when it is refused. */
job *job_create(server *sv, const char *body, size_t len, bool chat, srv_error *err);
void job_free(job *j);
bool job_stream(const job *j);

/* Run the whole completion on a slot; the JSON answer (malloc'd) or NULL
   with *err. gone(ctx) is asked between tokens: true stops the work (the
   client left). */
char *job_run(job *j, bool (*gone)(void *ctx), void *ctx, srv_error *err);

/* Streaming: the next bytes of the event stream (at most cap) into buf;
   0 at its end. Generates as needed: the first call waits for a slot.
   Returns -1 when the client left while it waited. */
long job_read(job *j, char *buf, size_t cap, bool (*gone)(void *ctx), void *ctx);

/* /tokenize, /detokenize, /v1/models and /health answers (malloc'd JSON), or NULL with *err. */
char *serve_tokenize(server *sv, const char *body, size_t len, srv_error *err);
char *serve_detokenize(server *sv, const char *body, size_t len, srv_error *err);
char *serve_models(server *sv);
char *serve_health(server *sv);

/* printf into an error; returns false for `return srv_fail(...)` chains. */
bool srv_fail(srv_error *err, int status, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The error's JSON body (malloc'd). */
char *srv_error_json(const srv_error *err);

/* ---- HTTP (serve_http.c) ---- */

/* Start listening on host:port (0: any free port); *port_out the real one. */
struct MHD_Daemon;
struct MHD_Daemon *serve_http_start(server *sv, const char *host, int port, int *port_out);
/* Stop accepting connections (those open finish). */
void serve_http_quiesce(struct MHD_Daemon *d);
void serve_http_stop(struct MHD_Daemon *d);

/* ---- the page (serve_page.c) ---- */

const char *serve_page(size_t *len);

#endif
