/*
 * serve_http.c — the HTTP side of `pinfer serve` (serve.h), on
 * libmicrohttpd with a thread per connection: a request's body is gathered
 * (at most SERVE_MAX_BODY), its key checked, its route found; a completion
 * runs in its connection's thread, a streamed one inside the response's
 * reader, one event at a time. Every error is OpenAI's JSON error object.
 * A client that leaves is noticed between tokens (its socket hung up) and
 * its slot given back.
 */
#include "serve.h"

#ifdef PI_HAVE_SERVE

#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct req {
    char *body;
    size_t len, cap;
    bool too_big;  /* over SERVE_MAX_BODY: dropped */
    bool answered; /* refused from its headers */
} req;

typedef struct stream {
    job *j;
    struct MHD_Connection *c;
} stream;

/* The client hung up (or its socket failed). */
static bool client_gone(void *ctx) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(ctx, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return true;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static enum MHD_Result send_body(struct MHD_Connection *c, int status, const char *type, char *body, bool close) {
    if (!body) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"code\":500}}";
        body = strdup(oom);
        status = 500;
        if (!body) return MHD_NO;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (close) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result send_json(struct MHD_Connection *c, char *json) {
    return send_body(c, 200, "application/json", json, false);
}

static enum MHD_Result send_error(struct MHD_Connection *c, const srv_error *e, bool close) {
    return send_body(c, e->status, "application/json", srv_error_json(e), close);
}

static enum MHD_Result fail(struct MHD_Connection *c, int status, const char *type, bool close, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static enum MHD_Result fail(struct MHD_Connection *c, int status, const char *type, bool close, const char *fmt, ...) {
    srv_error e = {status, type, ""};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    return send_error(c, &e, close);
}

/* ---- streamed answers ---- */

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *s = cls;
    long n = job_read(s->j, buf, max, client_gone, s->c);
    return n > 0 ? (ssize_t)n : n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void stream_free(void *cls) {
    stream *s = cls;
    job_free(s->j);
    free(s);
}

static enum MHD_Result send_stream(struct MHD_Connection *c, job *j) {
    stream *s = malloc(sizeof *s);
    struct MHD_Response *r = s ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 << 10, stream_read, s,
                                                                   stream_free)
                               : NULL;
    if (!r) {
        free(s);
        job_free(j);
        return fail(c, 500, "server_error", false, "out of memory");
    }
    s->j = j;
    s->c = c;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

/* ---- routes ---- */

static enum MHD_Result completion(server *sv, struct MHD_Connection *c, const req *q, bool chat) {
    srv_error e;
    job *j = job_create(sv, q->body ? q->body : "", q->len, chat, &e);
    if (!j) return send_error(c, &e, false);
    if (job_stream(j)) return send_stream(c, j);
    char *json = job_run(j, client_gone, c, &e);
    job_free(j);
    if (!json && e.status == 499) return MHD_NO; /* nobody to answer */
    return json ? send_json(c, json) : send_error(c, &e, false);
}

typedef enum { R_PAGE, R_HEALTH, R_MODELS, R_COMPLETIONS, R_CHAT, R_TOKENIZE, R_DETOKENIZE } route_id;

static const struct {
    const char *path;
    bool post;
    route_id id;
} routes[] = {
    {"/", false, R_PAGE},
    {"/index.html", false, R_PAGE},
    {"/health", false, R_HEALTH},
    {"/v1/health", false, R_HEALTH},
    {"/v1/models", false, R_MODELS},
    {"/models", false, R_MODELS},
    {"/v1/completions", true, R_COMPLETIONS},
    {"/completions", true, R_COMPLETIONS},
    {"/v1/chat/completions", true, R_CHAT},
    {"/chat/completions", true, R_CHAT},
    {"/tokenize", true, R_TOKENIZE},
    {"/detokenize", true, R_DETOKENIZE},
};

/* The key, compared in time independent of where it differs. */
static bool key_ok(const server *sv, struct MHD_Connection *c) {
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7)) return false;
    h += 7;
    const size_t n = strlen(sv->api_key);
    if (strlen(h) != n) return false;
    unsigned diff = 0;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)h[i] ^ (unsigned char)sv->api_key[i];
    return diff == 0;
}

static enum MHD_Result route(server *sv, struct MHD_Connection *c, const char *url, const char *method, const req *q) {
    const bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    int found = -1;
    for (size_t k = 0; k < sizeof routes / sizeof routes[0] && found < 0; k++)
        if (!strcmp(url, routes[k].path)) found = (int)k;
    if (found < 0) return fail(c, 404, "not_found_error", false, "there is no route %s %s", method, url);
    if (routes[found].post ? !post : !get) {
        struct MHD_Response *r;
        srv_error e = {405, "invalid_request_error", ""};
        snprintf(e.message, sizeof e.message, "%s takes %s, not %s", url, routes[found].post ? "POST" : "GET", method);
        char *body = srv_error_json(&e);
        if (!body || !(r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE))) {
            free(body);
            return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, routes[found].post ? "POST" : "GET, HEAD");
        enum MHD_Result ok = MHD_queue_response(c, 405, r);
        MHD_destroy_response(r);
        return ok;
    }
    const route_id id = routes[found].id;
    if (sv->api_key && id != R_PAGE && id != R_HEALTH && !key_ok(sv, c))
        return fail(c, 401, "authentication_error", false, "invalid or missing API key: send 'Authorization: Bearer KEY'");
    if (id == R_HEALTH) return send_json(c, serve_health(sv));
    if (atomic_load(&sv->draining))
        return fail(c, 503, "unavailable_error", true, "the server is shutting down");
    srv_error e = {0};
    char *json = NULL;
    switch (id) {
    case R_PAGE: {
        size_t n;
        const char *page = serve_page(&n);
        struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)page, MHD_RESPMEM_PERSISTENT);
        if (!r) return MHD_NO;
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
        enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return ok;
    }
    case R_MODELS: return send_json(c, serve_models(sv));
    case R_COMPLETIONS: return completion(sv, c, q, false);
    case R_CHAT: return completion(sv, c, q, true);
    case R_TOKENIZE: json = serve_tokenize(sv, q->body ? q->body : "", q->len, &e); break;
    case R_DETOKENIZE: json = serve_detokenize(sv, q->body ? q->body : "", q->len, &e); break;
    default: break;
    }
    return json ? send_json(c, json) : send_error(c, &e, false);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    server *sv = cls;
    req *q = *con_cls;
    if (!q) { /* the headers: count the request, refuse an oversized body before reading it */
        if (!(q = calloc(1, sizeof *q))) return MHD_NO;
        *con_cls = q;
        atomic_fetch_add(&sv->in_flight, 1);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > SERVE_MAX_BODY) {
            q->too_big = q->answered = true;
            return fail(c, 413, "invalid_request_error", true, "the body is %s bytes, more than the %zu a request may have",
                        cl, SERVE_MAX_BODY);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        const size_t n = *upload_size;
        *upload_size = 0;
        if (q->too_big) return MHD_YES;
        if (q->len + n > SERVE_MAX_BODY) { /* no length given: the rest is read and dropped, then refused */
            q->too_big = true;
            free(q->body);
            q->body = NULL;
            return MHD_YES;
        }
        if (q->len + n + 1 > q->cap) {
            size_t cap = q->cap ? 2 * q->cap : 4096;
            while (cap < q->len + n + 1) cap *= 2;
            char *b = realloc(q->body, cap);
            if (!b) return MHD_NO;
            q->body = b, q->cap = cap;
        }
        memcpy(q->body + q->len, upload, n);
        q->len += n;
        q->body[q->len] = '\0';
        return MHD_YES;
    }
    if (q->answered) return MHD_YES;
    if (q->too_big)
        return fail(c, 413, "invalid_request_error", true, "the body is more than the %zu bytes a request may have",
                    SERVE_MAX_BODY);
    return route(sv, c, url, method, q);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)c, (void)toe;
    server *sv = cls;
    req *q = *con_cls;
    if (!q) return;
    free(q->body);
    free(q);
    *con_cls = NULL;
    atomic_fetch_sub(&sv->in_flight, 1);
}

static void on_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n') line[--n] = '\0';
    fprintf(stderr, "serve: http: %s\n", line);
}

struct MHD_Daemon *serve_http_start(server *sv, const char *host, int port, int *port_out) {
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int rc = getaddrinfo(host, ps, &hints, &ai);
    if (rc) {
        fprintf(stderr, "pinfer: serve: cannot listen on %s: %s\n", host, gai_strerror(rc));
        return NULL;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, on_request, sv, MHD_OPTION_EXTERNAL_LOGGER, on_log, NULL,
        MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, sv,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_CONNECTION_LIMIT, (unsigned)512, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!d) {
        fprintf(stderr, "pinfer: serve: cannot listen on %s port %d (in use, or not an address of this machine)\n",
                host, port);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    *port_out = info ? info->port : port;
    return d;
}

void serve_http_quiesce(struct MHD_Daemon *d) {
    MHD_socket s = MHD_quiesce_daemon(d);
    if (s != MHD_INVALID_SOCKET) close(s);
}

void serve_http_stop(struct MHD_Daemon *d) {
    if (d) MHD_stop_daemon(d);
}
#endif
