/*
 * cmd_chat.c — `pinfer chat`: an interactive conversation.
 *
 * The prompt format is the model's chat template (pi_chat_apply: ChatML,
 * Llama 2/3, Zephyr, Gemma, or a plain "User:/Assistant:" transcript). The
 * KV cache is kept across turns: each turn evaluates only the text the
 * template adds for it.
 *
 * When the next turn would not fit in the context, the oldest turns are
 * dropped (the system prompt stays). Where the template gives the system
 * prompt a turn of its own, the dropped turns' positions are discarded from
 * the KV cache and the rest moves down (pi_session_kv_discard); otherwise
 * (the system prompt sits inside the first user message) the shortened
 * conversation is evaluated again.
 */
#include "cmds.h"
#include "common.h"

#include "args.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f, "usage: pinfer chat -m FILE [--system TEXT] [-p FIRST] [-n N] [options]\n"
               "  reads one message per line from stdin; an empty line or end of input ends the chat;\n"
               "  Ctrl-C stops a reply, and at the prompt ends the chat\n"
               "  --system TEXT        the system prompt (kept when old turns are dropped)\n"
               "  -p, --prompt TEXT    the first user message (then stdin as usual)\n"
               "  -n, --n-predict N    longest reply in tokens (default 256; -1: until end of text)\n");
    app_usage_common(f);
}

/* The conversation: its messages (owned copies), the template text of them,
   and for each message that starts a chunk fed to the session (the system
   prompt when it is a turn of its own, each user message) the session
   position its text starts at. */
typedef struct {
    pi_chat_message *msg;
    int64_t *pos;        /* per message: position of its first token, -1 when not a chunk start */
    size_t n, cap;
    char *text;          /* the template text of msg[0..n) */
    size_t text_cap, text_len;
    size_t fed;          /* bytes of it evaluated */
    bool sys_turn;       /* the system prompt is a chunk of its own */
    const volatile int *stop; /* Ctrl-C */
    char *reply;         /* the reply being generated */
    size_t reply_len, reply_cap;
    /* totals for the summary */
    int turns, shifts, reevals;
    int64_t generated;
    double gen_s;
} chat;

static bool chat_add(chat *c, const char *role, const char *content, size_t len) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        pi_chat_message *m = realloc(c->msg, cap * sizeof *m);
        if (m) c->msg = m;
        int64_t *p = m ? realloc(c->pos, cap * sizeof *p) : NULL;
        if (!p) return false;
        c->pos = p, c->cap = cap;
    }
    char *s = malloc(len + 1);
    if (!s) return false;
    memcpy(s, content, len);
    s[len] = '\0';
    c->pos[c->n] = -1;
    c->msg[c->n++] = (pi_chat_message){role, s};
    return true;
}

/* Remove messages [i, i + k). */
static void chat_remove(chat *c, size_t i, size_t k) {
    for (size_t j = i; j < i + k; j++) free((char *)c->msg[j].content);
    memmove(c->msg + i, c->msg + i + k, (c->n - i - k) * sizeof *c->msg);
    memmove(c->pos + i, c->pos + i + k, (c->n - i - k) * sizeof *c->pos);
    c->n -= k;
}

static void chat_free(chat *c) {
    for (size_t i = 0; i < c->n; i++) free((char *)c->msg[i].content);
    free(c->msg);
    free(c->pos);
    free(c->text);
    free(c->reply);
}

/* The template text of msg[0..n) into *buf (grown as needed); its length or -1. */
static long format_into(const char *cmd, const pi_tokenizer *tok, const pi_chat_message *msg, size_t n,
                        bool add_assistant, char **buf, size_t *cap) {
    size_t len = 0;
    pi_status st = pi_chat_apply(tok, msg, n, add_assistant, *buf, *cap, &len);
    if (st == PI_ERR_INVALID && len >= *cap) {
        char *t = realloc(*buf, len + 1);
        if (!t) {
            fprintf(stderr, "pinfer: %s: out of memory\n", cmd);
            return -1;
        }
        *buf = t, *cap = len + 1;
        st = pi_chat_apply(tok, msg, n, add_assistant, *buf, *cap, &len);
    }
    if (st) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return -1;
    }
    return (long)len;
}

/* c->text = the conversation's text (with the opening of the assistant's
   turn when add_assistant). */
static bool chat_format(const char *cmd, chat *c, const pi_tokenizer *tok, bool add_assistant) {
    long len = format_into(cmd, tok, c->msg, c->n, add_assistant, &c->text, &c->text_cap);
    if (len < 0) return false;
    c->text_len = (size_t)len;
    return true;
}

/* Where message i's text starts: the length of the text of msg[0..i). */
static long offset_of(const char *cmd, const chat *c, const pi_tokenizer *tok, size_t i) {
    size_t len = 0;
    pi_status st = pi_chat_apply(tok, c->msg, i, false, NULL, 0, &len);
    if (st && st != PI_ERR_INVALID) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return -1;
    }
    return (long)len;
}

/* Tokens of text[0..len) (special tokens parsed), BOS first when asked. */
static int32_t *tokens_of(const pi_tokenizer *tok, const char *text, size_t len, bool bos, size_t *n) {
    size_t need = 0;
    pi_tokenize(tok, text, len, bos, true, NULL, 0, &need);
    int32_t *ids = malloc((need + 1) * sizeof *ids);
    if (ids && pi_tokenize(tok, text, len, bos, true, ids, need, n) == PI_OK) return ids;
    free(ids);
    return NULL;
}

static bool bos_first(const app *a, size_t fed) {
    return fed == 0 && pi_tokenizer_add_bos(a->tok) && pi_tokenizer_bos(a->tok) >= 0;
}

/* Tokens the text from c->fed to end will take. */
static int64_t count_tokens(const app *a, const chat *c, size_t end) {
    size_t need = 0;
    pi_tokenize(a->tok, c->text + c->fed, end - c->fed, bos_first(a, c->fed), true, NULL, 0, &need);
    return (int64_t)need;
}

/* Prints the reply as it comes and keeps its text. */
static int put_piece(void *ctx, const char *text, size_t len, int32_t token) {
    (void)token;
    chat *c = ctx;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    if (c->reply_len + len + 1 > c->reply_cap) {
        size_t cap = 2 * (c->reply_len + len + 1);
        char *r = realloc(c->reply, cap);
        if (!r) return 1;
        c->reply = r, c->reply_cap = cap;
    }
    memcpy(c->reply + c->reply_len, text, len);
    c->reply_len += len;
    return !app_stdout_ok();
}

/* Evaluate the text from c->fed to end, then generate up to n_predict
   tokens (0: none); message `starts` (or -1) begins at c->fed. */
static bool feed(const char *cmd, app *a, pi_sampler *smp, chat *c, size_t end, long starts, long n_predict,
                 pi_generate_result *res) {
    size_t n = 0;
    const bool bos = bos_first(a, c->fed);
    int32_t *ids = tokens_of(a->tok, c->text + c->fed, end - c->fed, bos, &n);
    if (!ids) {
        fprintf(stderr, "pinfer: %s: cannot tokenize the conversation: %s\n", cmd, pi_last_error());
        return false;
    }
    if (starts >= 0) c->pos[starts] = pi_session_n_past(a->s) + (bos ? 1 : 0);
    pi_generate_params gp = pi_generate_default_params();
    gp.n_predict = n_predict;
    gp.stop = c->stop;
    c->reply_len = 0;
    pi_generate_result r;
    pi_status st = pi_generate(a->s, smp, ids, n, &gp, put_piece, c, &r);
    free(ids);
    if (st) fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
    c->fed = end;
    if (res) *res = r;
    return st == PI_OK;
}

/* Evaluate the conversation's text from scratch (KV cache cleared) up to
   byte upto, a chunk per turn so that every kept turn has its position. */
static bool reevaluate(const char *cmd, app *a, pi_sampler *smp, chat *c, size_t upto) {
    if (pi_session_kv_clear(a->s)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        return false;
    }
    c->fed = 0;
    for (size_t i = 0; i < c->n; i++) {
        if (c->pos[i] < 0) continue;
        const long off = offset_of(cmd, c, a->tok, i);
        if (off < 0) return false;
        if ((size_t)off > upto) break;
        if ((size_t)off > c->fed && !feed(cmd, a, smp, c, (size_t)off, -1, 0, NULL)) return false;
        size_t j = i + 1;
        while (j < c->n && c->pos[j] < 0) j++;
        long end = j < c->n ? offset_of(cmd, c, a->tok, j) : (long)upto;
        if (end < 0) return false;
        if ((size_t)end > upto) end = (long)upto;
        if (!feed(cmd, a, smp, c, (size_t)end, (long)i, 0, NULL)) return false;
    }
    return upto <= c->fed || feed(cmd, a, smp, c, upto, -1, 0, NULL);
}

/* Make room for `need` more positions by dropping the oldest whole turns (a
   user message and the reply after it) before message keep_from, the turn
   in progress. c->text holds the conversation's current text (formatted
   with add_assistant); on return the shortened one. 1: done (or nothing to
   do), 0: even dropping every old turn leaves too little room (nothing
   changed), -1: an error. */
static int make_room(const char *cmd, app *a, pi_sampler *smp, chat *c, size_t keep_from, int64_t need,
                     bool add_assistant) {
    const int64_t n_ctx = pi_session_n_ctx(a->s), n_past = pi_session_n_past(a->s);
    if (n_past + need <= n_ctx) return 1;
    const size_t first = c->n && !strcmp(c->msg[0].role, "system") ? 1 : 0;
    /* the fewest old turns whose positions make the room */
    size_t stop = first;
    int64_t freed = 0;
    while (stop < keep_from && n_past - freed + need > n_ctx) {
        size_t next = stop + 1;
        while (next < keep_from && c->pos[next] < 0) next++;
        freed = (next < c->n && c->pos[next] >= 0 ? c->pos[next] : n_past) - c->pos[first];
        stop = next;
    }
    if (stop == first || n_past - freed + need > n_ctx) return 0;
    /* the shortened conversation, and whether its text is the old one with
       the dropped turns cut out */
    const long off0 = offset_of(cmd, c, a->tok, first), off1 = offset_of(cmd, c, a->tok, stop);
    if (off0 < 0 || off1 < 0) return -1;
    char *old = malloc(c->text_len + 1);
    if (!old) return -1;
    memcpy(old, c->text, c->text_len + 1);
    const size_t old_len = c->text_len, unfed = old_len - c->fed;
    const int64_t p0 = c->pos[first];
    chat_remove(c, first, stop - first);
    const bool ok = chat_format(cmd, c, a->tok, add_assistant);
    const size_t cut = (size_t)(off1 - off0);
    const bool same = ok && c->text_len == old_len - cut && !memcmp(c->text, old, (size_t)off0) &&
                      !memcmp(c->text + off0, old + off1, old_len - (size_t)off1);
    free(old);
    if (!ok || c->text_len < unfed) return -1;
    c->shifts++;
    /* what was not fed yet is the same tail in both texts */
    const size_t upto = c->text_len - unfed;
    if (same && pi_session_kv_discard(a->s, p0, freed) == PI_OK) {
        for (size_t i = first; i < c->n; i++)
            if (c->pos[i] >= 0) c->pos[i] -= freed;
        c->fed = upto;
        fprintf(stderr, "\nchat: context full: dropped the oldest %zu messages (%lld positions)\n", stop - first,
                (long long)freed);
        return 1;
    }
    /* The text changed elsewhere too (the system prompt lives in the first
       user message): evaluate the shortened conversation again. */
    c->reevals++;
    fprintf(stderr, "\nchat: context full: dropped the oldest %zu messages; evaluating the rest again\n",
            stop - first);
    return reevaluate(cmd, a, smp, c, upto) ? 1 : -1;
}

/* make_room until the room is there: dropping turns whose text moves (the
   system prompt into the next user message) may free less than counted. */
static int ensure_room(const char *cmd, app *a, pi_sampler *smp, chat *c, size_t keep_from, int64_t need,
                       bool add_assistant) {
    for (;;) {
        if (pi_session_n_past(a->s) + need <= pi_session_n_ctx(a->s)) return 1;
        const size_t before = c->n;
        int r = make_room(cmd, a, smp, c, keep_from, need, add_assistant);
        if (r <= 0) return r;
        if (c->n == before) return 0;
        keep_from -= before - c->n;
    }
}

typedef struct {
    const char *system;
} chat_args;

/* Positions kept free after a reply for the template's closing of it. */
#define CLOSE_ROOM 16

static int chat_option(void *ctx, const char *cmd, int argc, char **argv, int *i) {
    chat_args *ca = ctx;
    const char *a = argv[*i];
    if (strcmp(a, "--system") && strcmp(a, "--system-prompt") && strcmp(a, "-sys")) return 0;
    if (!(ca->system = arg_value(cmd, argc, argv, i))) return -1;
    return 1;
}

/* One user turn: the message, the reply, the template's closing of it.
   Returns 1 to go on, 0 when the message was refused (the chat goes on), -1
   on an error. */
static int turn(const char *cmd, app *a, pi_sampler *smp, chat *c, const char *line, long n_predict) {
    const int64_t n_ctx = pi_session_n_ctx(a->s);
    if (!chat_add(c, "user", line, strlen(line)) || !chat_format(cmd, c, a->tok, true)) return -1;
    /* room for the message and a reply: n_predict, or a quarter of the context when unbounded */
    const int64_t reserve = (n_predict > 0 && n_predict < n_ctx / 2 ? n_predict : n_ctx / 4) + CLOSE_ROOM;
    const int64_t need = count_tokens(a, c, c->text_len) + reserve;
    int r = need > n_ctx ? 0 : ensure_room(cmd, a, smp, c, c->n - 1, need, true);
    if (r < 0) return -1;
    if (r == 0) {
        fprintf(stderr, "pinfer: %s: the message and its reply need %lld of the context's %lld positions; message "
                        "ignored (raise -c or shorten it)\n", cmd, (long long)need, (long long)n_ctx);
        chat_remove(c, c->n - 1, 1);
        return chat_format(cmd, c, a->tok, false) ? 0 : -1;
    }
    const size_t ui = c->n - 1;
    /* the reply stops short of the context's end, leaving room for the template's closing */
    const int64_t room = n_ctx - pi_session_n_past(a->s) - count_tokens(a, c, c->text_len) - CLOSE_ROOM;
    const bool capped = n_predict < 0 || n_predict > room;
    const long cap = capped ? (long)(room > 0 ? room : 0) : n_predict;
    pi_generate_result res;
    if (!feed(cmd, a, smp, c, c->text_len, (long)ui, cap, &res)) return -1;
    c->turns++;
    c->generated += res.n_generated;
    c->gen_s += res.gen_s;
    fputc('\n', stdout);
    fflush(stdout);
    if (res.stop == PI_STOP_LENGTH && capped)
        fprintf(stderr, "chat: the reply reached the end of the context and was cut\n");
    if (res.stop == PI_STOP_CALLER && app_interrupted()) fprintf(stderr, "chat: reply stopped\n");
    /* the reply is in the session; evaluate what the template closes it with */
    const size_t replied = c->fed + c->reply_len;
    if (!chat_add(c, "assistant", c->reply ? c->reply : "", c->reply_len) || !chat_format(cmd, c, a->tok, false))
        return -1;
    c->fed = replied;
    if (ensure_room(cmd, a, smp, c, ui, count_tokens(a, c, c->text_len) + 1, false) <= 0) {
        fprintf(stderr, "pinfer: %s: no room left in the context of %lld to close the reply (raise -c)\n", cmd,
                (long long)n_ctx);
        return -1;
    }
    return feed(cmd, a, smp, c, c->text_len, -1, 0, NULL) ? 1 : -1;
}

int cmd_chat(int argc, char **argv) {
    const char *cmd = "chat";
    app_opts o;
    app_opts_init(&o);
    o.n_predict = 256;
    chat_args ca = {NULL};
    int pr = app_parse_args(cmd, argc, argv, &o, NULL, chat_option, &ca, usage);
    if (pr <= 0) return pr ? 2 : 0;
    if (o.prompt_file) {
        fprintf(stderr, "pinfer: %s: -f is not a chat option: give the first message with -p, the rest on stdin\n",
                cmd);
        return 2;
    }
    app a;
    pi_sampler *smp = NULL;
    if (!app_load(cmd, &o, &a)) return 1;
    if (pi_sampler_create(&o.sp, a.info.n_vocab, &smp)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        app_free(&a);
        return 1;
    }
    const bool tty = isatty(0);
    fprintf(stderr, "chat: %s template, context %lld, seed %llu; %s\n", pi_chat_template(a.tok),
            (long long)pi_session_n_ctx(a.s), (unsigned long long)o.sp.seed,
            tty ? "type a message and press Enter; an empty line ends the chat" : "reading messages from stdin");
    int rc = 0;
    chat c = {0};
    c.stop = app_catch_interrupt();
    char *line = NULL;
    size_t line_cap = 0;
    if (ca.system) {
        size_t bad;
        if (!pi_utf8_check(ca.system, strlen(ca.system), &bad)) {
            fprintf(stderr, "pinfer: %s: the system prompt is not valid UTF-8 at byte %zu\n", cmd, bad);
            rc = 2;
            goto out;
        }
        /* The system prompt is its own chunk when the template writes it as
           a turn of its own (its text alone is not empty). */
        if (!chat_add(&c, "system", ca.system, strlen(ca.system)) || !chat_format(cmd, &c, a.tok, false)) {
            rc = 1;
            goto out;
        }
        c.sys_turn = c.text_len > 0;
        if (c.sys_turn) {
            if (count_tokens(&a, &c, c.text_len) + 16 > pi_session_n_ctx(a.s)) {
                fprintf(stderr, "pinfer: %s: the system prompt does not fit in the context of %lld (raise -c)\n",
                        cmd, (long long)pi_session_n_ctx(a.s));
                rc = 1;
                goto out;
            }
            if (!feed(cmd, &a, smp, &c, c.text_len, 0, 0, NULL)) {
                rc = 1;
                goto out;
            }
        }
    }
    for (bool first = true;; first = false) {
        const char *msg;
        if (first && o.prompt) {
            msg = o.prompt;
            if (tty) printf("> %s\n", msg);
        } else {
            if (tty) fputs("> ", stdout), fflush(stdout);
            errno = 0;
            ssize_t got = getline(&line, &line_cap, stdin);
            if (got < 0) {
                if (tty) fputc('\n', stdout);
                break; /* end of input, or Ctrl-C at the prompt */
            }
            line[strcspn(line, "\r\n")] = '\0';
            msg = line;
        }
        if (!msg[0]) break;
        size_t bad;
        if (!pi_utf8_check(msg, strlen(msg), &bad)) {
            fprintf(stderr, "pinfer: %s: the message is not valid UTF-8 at byte %zu; ignored\n", cmd, bad);
            continue;
        }
        app_clear_interrupt();
        int r = turn(cmd, &a, smp, &c, msg, o.n_predict);
        if (r < 0 || !app_stdout_ok()) {
            rc = 1;
            break;
        }
    }
    fprintf(stderr, "chat: %d turn%s, %lld tokens generated (%.2f tok/s), %d context shifts%s; context %lld of %lld "
                    "in use; peak RSS %.1f MiB\n",
            c.turns, c.turns == 1 ? "" : "s", (long long)c.generated, c.gen_s > 0.0 ? (double)c.generated / c.gen_s : 0.0, c.shifts,
            c.reevals ? " (re-evaluated)" : "", (long long)pi_session_n_past(a.s), (long long)pi_session_n_ctx(a.s),
            app_peak_rss_mib());
    if (o.mp.mem_budget) app_print_offload(&a, stderr);
out:
    free(line);
    chat_free(&c);
    pi_sampler_free(smp);
    app_free(&a);
    return rc;
}
