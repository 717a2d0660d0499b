/*
 * cmd_serve.c — `pinfer serve`: the model behind an OpenAI-compatible HTTP
 * API (serve.h). Options as llama-server's; the slots (sessions) and the
 * order in which requests get them and take turns at evaluating; SIGTERM
 * or Ctrl-C stops accepting, finishes every request already accepted and
 * exits 0 (a second signal exits at once).
 */
#include "cmds.h"

#include "args.h"
#include "common.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef PI_HAVE_SERVE
#include "serve.h"

#include <microhttpd.h>
#include <unistd.h>
#endif

static void usage(FILE *f) {
    fprintf(f, "usage: pinfer serve -m FILE [--host H] [--port P] [-np N] [options]\n"
               "  an OpenAI-compatible HTTP server: POST /v1/completions, /v1/chat/completions (stream: true for\n"
               "  server-sent events), /tokenize, /detokenize; GET /v1/models, /health; GET / is a chat page\n"
               "  --host H             address to listen on (default 127.0.0.1)\n"
               "  --port P             port (default 8080; 0: any free port, printed)\n"
               "  -np, --parallel N    slots: requests served at once (default 1); -c is split evenly across\n"
               "                       them and further requests wait in line. Under --mem-budget the budget\n"
               "                       holds every slot's KV cache; the slots share its neuron cache\n"
               "  --api-key KEY        requests must send 'Authorization: Bearer KEY' (GET / and /health need not)\n"
               "  --alias NAME         the model's id in answers (default: the file's name)\n"
               "  -n N                 default max_tokens of requests (default -1: until the end or the context)\n"
               "  sampling options (--temp, --top-k, ..., -s) set the defaults of requests\n");
    app_usage_common(f);
}

#ifndef PI_HAVE_SERVE
int cmd_serve(int argc, char **argv) {
    (void)argc;
    if (argv[1] && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "pinfer: serve: this build has no HTTP server: it needs libmicrohttpd-dev and libcjson-dev "
                    "(sudo apt-get install libmicrohttpd-dev libcjson-dev), then make\n");
    return 1;
}
#else

/* ---- slots and turns ---- */

srv_slot *srv_slot_acquire(server *sv, bool (*gone)(void *ctx), void *ctx) {
    pthread_mutex_lock(&sv->lock);
    const uint64_t ticket = sv->next_ticket++;
    srv_slot *got = NULL;
    for (;;) {
        if (ticket == sv->serving)
            for (int k = 0; k < sv->n_slots && !got; k++)
                if (!sv->slots[k].busy) got = &sv->slots[k];
        if (got) break;
        /* wake now and then to see whether the client is still there */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&sv->freed, &sv->lock, &until);
        if (ticket == sv->serving && gone && gone(ctx)) break;
    }
    if (got) got->busy = true;
    if (ticket == sv->serving) { /* the next in line may take another free slot (or give up) now */
        sv->serving++;
        pthread_cond_broadcast(&sv->freed);
    }
    pthread_mutex_unlock(&sv->lock);
    return got;
}

void srv_slot_release(server *sv, srv_slot *sl) {
    if (!sl) return;
    pthread_mutex_lock(&sv->lock);
    sl->busy = false;
    pthread_cond_broadcast(&sv->freed);
    pthread_mutex_unlock(&sv->lock);
}

int srv_slots_busy(server *sv) {
    pthread_mutex_lock(&sv->lock);
    int n = 0;
    for (int k = 0; k < sv->n_slots; k++) n += sv->slots[k].busy;
    pthread_mutex_unlock(&sv->lock);
    return n;
}

void srv_turn_begin(server *sv) {
    pthread_mutex_lock(&sv->turn_lock);
    const uint64_t me = sv->turn_next++;
    while (me != sv->turn_serving) pthread_cond_wait(&sv->turn_cond, &sv->turn_lock);
    pthread_mutex_unlock(&sv->turn_lock);
}

void srv_turn_end(server *sv) {
    pthread_mutex_lock(&sv->turn_lock);
    sv->turn_serving++;
    pthread_cond_broadcast(&sv->turn_cond);
    pthread_mutex_unlock(&sv->turn_lock);
}

/* ---- options ---- */

typedef struct serve_args {
    const char *host, *api_key, *alias;
    long port, n_slots;
} serve_args;

static int serve_option(void *ctx, const char *cmd, int argc, char **argv, int *i) {
    serve_args *s = ctx;
    const char *a = argv[*i], *v;
    if (strcmp(a, "--host") && strcmp(a, "--port") && strcmp(a, "-np") && strcmp(a, "--parallel") &&
        strcmp(a, "--api-key") && strcmp(a, "--alias"))
        return 0;
    if (!(v = arg_value(cmd, argc, argv, i))) return -1;
    if (!strcmp(a, "--host")) s->host = v;
    else if (!strcmp(a, "--api-key")) {
        if (!*v) {
            fprintf(stderr, "pinfer: %s: --api-key is empty\n", cmd);
            return -1;
        }
        s->api_key = v;
    } else if (!strcmp(a, "--alias")) s->alias = v;
    else if (!strcmp(a, "--port")) return arg_int(cmd, a, v, 0, 65535, &s->port) ? 1 : -1;
    else return arg_int(cmd, a, v, 1, 64, &s->n_slots) ? 1 : -1;
    return 1;
}

static const char *base_name(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* Open the model with a session per slot, -c split across them. */
static bool open_slots(const char *cmd, const app_opts *o, server *sv) {
    pi_model_params mp = o->mp;
    int64_t total = o->ctx_given ? o->mp.n_ctx : 0;
    if (!total && mp.mem_budget) { /* the model's default context, split across the slots under the budget too */
        pi_budget_info q;
        if (pi_budget_query(o->model, 0, &q)) {
            fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
            return false;
        }
        total = q.n_ctx;
    }
    if (total && total / sv->n_slots < 1) {
        fprintf(stderr, "pinfer: %s: -c %lld cannot be split across %d slots\n", cmd, (long long)total, sv->n_slots);
        return false;
    }
    mp.n_ctx = total ? total / sv->n_slots : 0;
    mp.n_seq_max = sv->n_slots;
    if (pi_model_open(o->model, &mp, &sv->m) || pi_model_get_info(sv->m, &sv->info)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return false;
    }
    sv->tok = pi_model_tokenizer(sv->m);
    sv->n_ctx_slot = total ? total / sv->n_slots : sv->info.n_ctx / sv->n_slots;
    if (sv->n_ctx_slot < 1) {
        fprintf(stderr, "pinfer: %s: the model's context of %lld cannot be split across %d slots\n", cmd,
                (long long)sv->info.n_ctx, sv->n_slots);
        return false;
    }
    if (!(sv->slots = calloc((size_t)sv->n_slots, sizeof *sv->slots))) return false;
    for (int k = 0; k < sv->n_slots; k++) {
        pi_session_params sp = pi_session_default_params();
        sp.n_ctx = sv->n_ctx_slot;
        sv->slots[k].id = k;
        if (pi_session_create(sv->m, &sp, &sv->slots[k].s)) {
            fprintf(stderr, "pinfer: %s: slot %d: %s\n", cmd, k, pi_last_error());
            return false;
        }
    }
    return true;
}

static void close_slots(server *sv) {
    for (int k = 0; sv->slots && k < sv->n_slots; k++) pi_session_free(sv->slots[k].s);
    free(sv->slots);
    pi_model_close(sv->m);
}

int cmd_serve(int argc, char **argv) {
    const char *cmd = "serve";
    app_opts o;
    app_opts_init(&o);
    o.n_predict = -1;
    serve_args sa = {"127.0.0.1", NULL, NULL, 8080, 1};
    int pr = app_parse_args(cmd, argc, argv, &o, NULL, serve_option, &sa, usage);
    if (pr <= 0) return pr ? 2 : 0;
    if (o.prompt || o.prompt_file) {
        fprintf(stderr, "pinfer: %s: prompts come in requests, not as -p or -f\n", cmd);
        return 2;
    }
    if (!o.model) {
        fprintf(stderr, "pinfer: %s: -m FILE is required\n", cmd);
        return 2;
    }
    server sv;
    memset(&sv, 0, sizeof sv);
    sv.n_slots = (int)sa.n_slots;
    sv.api_key = sa.api_key;
    sv.sp = o.sp;
    sv.seed_given = o.seed_given;
    sv.n_predict = o.n_predict;
    pthread_mutex_init(&sv.lock, NULL);
    pthread_cond_init(&sv.freed, NULL);
    pthread_mutex_init(&sv.turn_lock, NULL);
    pthread_cond_init(&sv.turn_cond, NULL);
    snprintf(sv.model_id, sizeof sv.model_id, "%s", sa.alias ? sa.alias : base_name(o.model));

    /* Signals are taken by this thread only (sigwait); every thread started
       from here on inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    int rc = 1, port = 0;
    struct MHD_Daemon *d = NULL;
    const double t0 = app_time_s();
    if (!open_slots(cmd, &o, &sv)) goto out;
    if (o.n_predict > sv.n_ctx_slot) {
        fprintf(stderr, "pinfer: %s: -n %ld exceeds a slot's context of %lld\n", cmd, o.n_predict,
                (long long)sv.n_ctx_slot);
        goto out;
    }
    const pi_model_info *in = &sv.info;
    fprintf(stderr, "serve: %s: %d slot%s of %lld tokens, %d threads, FFN %s%s, loaded in %.2f s\n", sv.model_id,
            sv.n_slots, sv.n_slots == 1 ? "" : "s", (long long)sv.n_ctx_slot, pi_session_n_threads(sv.slots[0].s),
            in->ffn == PI_FFN_DENSE ? "dense" : in->ffn == PI_FFN_ORACLE ? "oracle" : "sparse",
            in->offloaded ? " (from flash)" : "", app_time_s() - t0);
    if (in->offloaded) {
        pi_memory_report r;
        if (!pi_model_memory(sv.m, &r))
            fprintf(stderr, "serve: memory budget %.1f MiB: KV caches %.1f (%d slots), hot neurons %.1f, neuron "
                            "cache %.1f shared by the slots\n", (double)r.limit / (1 << 20), (double)r.kv / (1 << 20),
                    sv.n_slots, (double)r.hot / (1 << 20), (double)r.cache / (1 << 20));
    }
    if (!(d = serve_http_start(&sv, sa.host, (int)sa.port, &port))) goto out;
    fprintf(stderr, "serve: listening on http://%s:%d\n", strchr(sa.host, ':') ? "[::1]" : sa.host, port);

    int sig = 0;
    sigset_t stop = sigs;
    sigdelset(&stop, SIGPIPE);
    while (sigwait(&stop, &sig) != 0) {}
    atomic_store(&sv.draining, true);
    serve_http_quiesce(d);
    fprintf(stderr, "serve: %s: finishing %d request%s, accepting no more\n", sig == SIGTERM ? "SIGTERM" : "SIGINT",
            atomic_load(&sv.in_flight), atomic_load(&sv.in_flight) == 1 ? "" : "s");
    rc = 0;
    for (const struct timespec tick = {0, 20 * 1000 * 1000}; atomic_load(&sv.in_flight) > 0;) {
        if (sigtimedwait(&stop, NULL, &tick) > 0) {
            fprintf(stderr, "serve: second signal: exiting without finishing\n");
            _exit(130); /* requests are mid-way in other threads: nothing left to tidy */
        }
    }
    fprintf(stderr, "serve: done\n");
out:
    serve_http_stop(d);
    close_slots(&sv);
    return rc;
}
#endif
