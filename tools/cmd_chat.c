/*
 * cmd_chat.c — `pinfer chat`: an interactive conversation.
 *
 * The prompt format is the model's chat template (pi_chat_apply: ChatML,
 * Llama 2/3, Zephyr, Gemma, or a plain "User:/Assistant:" transcript). The
 * KV cache is kept across turns: each turn evaluates only the text the
 * template adds for it.
 */
#include "cmds.h"
#include "common.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f, "usage: pinfer chat -m FILE [-n N] [options]\n"
               "  reads one message per line from stdin; an empty line or end of input ends the chat\n"
               "  -n N                 longest reply in tokens (default 256)\n");
    app_usage_common(f);
}

/* The conversation: its messages (owned copies) and how much of its
   template text the session has evaluated. */
typedef struct {
    pi_chat_message *msg;
    size_t n, cap;
    char *text;          /* the template text of msg[0..n) */
    size_t text_cap;
    size_t fed;          /* bytes of it evaluated */
    char *reply;         /* the reply being generated */
    size_t reply_len, reply_cap;
} chat;

static bool chat_add(chat *c, const char *role, const char *content, size_t len) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        pi_chat_message *m = realloc(c->msg, cap * sizeof *m);
        if (!m) return false;
        c->msg = m, c->cap = cap;
    }
    char *s = malloc(len + 1);
    if (!s) return false;
    memcpy(s, content, len);
    s[len] = '\0';
    c->msg[c->n++] = (pi_chat_message){role, s};
    return true;
}

static void chat_free(chat *c) {
    for (size_t i = 0; i < c->n; i++) free((char *)c->msg[i].content);
    free(c->msg);
    free(c->text);
    free(c->reply);
}

/* c->text = the template text of the conversation (with the opening of the
   assistant's turn when add_assistant); returns its length or -1. */
static long chat_format(const char *cmd, chat *c, const pi_tokenizer *tok, bool add_assistant) {
    size_t len;
    pi_status st = pi_chat_apply(tok, c->msg, c->n, add_assistant, c->text, c->text_cap, &len);
    if (st == PI_ERR_INVALID && len >= c->text_cap) {
        char *t = realloc(c->text, len + 1);
        if (!t) return -1;
        c->text = t, c->text_cap = len + 1;
        st = pi_chat_apply(tok, c->msg, c->n, add_assistant, c->text, c->text_cap, &len);
    }
    if (st) {
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
    return 0;
}

/* Evaluate the template text from c->fed to `end`, then generate up to
   n_predict tokens (0: none). */
static bool feed(const char *cmd, app *a, pi_sampler *smp, chat *c, size_t end, long n_predict) {
    size_t n = 0;
    int32_t *ids = tokens_of(a->tok, c->text + c->fed, end - c->fed,
                             c->fed == 0 && pi_tokenizer_add_bos(a->tok) && pi_tokenizer_bos(a->tok) >= 0, &n);
    if (!ids) {
        fprintf(stderr, "pinfer: %s: cannot tokenize the conversation: %s\n", cmd, pi_last_error());
        return false;
    }
    if (pi_session_n_past(a->s) + (int64_t)n >= pi_session_n_ctx(a->s)) {
        fprintf(stderr, "pinfer: %s: the conversation no longer fits in the context of %lld tokens (raise -c)\n", cmd,
                (long long)pi_session_n_ctx(a->s));
        free(ids);
        return false;
    }
    pi_generate_params gp = pi_generate_default_params();
    gp.n_predict = n_predict;
    c->reply_len = 0;
    pi_status st = pi_generate(a->s, smp, ids, n, &gp, put_piece, c, NULL);
    free(ids);
    if (st) fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
    c->fed = end;
    return st == PI_OK;
}

int cmd_chat(int argc, char **argv) {
    const char *cmd = "chat";
    app_opts o;
    app_opts_init(&o);
    o.n_predict = 256;
    int pr = app_parse_args(cmd, argc, argv, &o, NULL, NULL, NULL, usage);
    if (pr <= 0) return pr ? 2 : 0;
    if (!o.seed_given) o.sp.seed = (uint64_t)time(NULL) & 0x7fffffff;
    app a;
    pi_sampler *smp = NULL;
    if (!app_load(cmd, &o, &a)) return 1;
    if (pi_sampler_create(&o.sp, a.info.n_vocab, &smp)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        app_free(&a);
        return 1;
    }
    bool tty = isatty(0);
    fprintf(stderr, "chat: %s template; %s\n", pi_chat_template(a.tok),
            tty ? "type a message and press Enter; an empty line ends the chat" : "reading messages from stdin");
    char line[8192];
    int rc = 0;
    chat c = {0};
    for (;;) {
        if (tty) fputs("> ", stdout), fflush(stdout);
        if (!fgets(line, sizeof line, stdin)) break;
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0]) break;
        size_t bad;
        if (!pi_utf8_check(line, strlen(line), &bad)) {
            fprintf(stderr, "pinfer: %s: the message is not valid UTF-8 at byte %zu; ignored\n", cmd, bad);
            continue;
        }
        long end;
        if (!chat_add(&c, "user", line, strlen(line)) || (end = chat_format(cmd, &c, a.tok, true)) < 0 ||
            !feed(cmd, &a, smp, &c, (size_t)end, o.n_predict)) {
            rc = 1;
            break;
        }
        fputc('\n', stdout);
        /* the reply is in the session; evaluate what the template closes it with */
        const size_t replied = c.fed + c.reply_len;
        if (!chat_add(&c, "assistant", c.reply ? c.reply : "", c.reply_len) ||
            (end = chat_format(cmd, &c, a.tok, false)) < 0) {
            rc = 1;
            break;
        }
        c.fed = replied;
        if (!feed(cmd, &a, smp, &c, (size_t)end, 0)) {
            rc = 1;
            break;
        }
    }
    chat_free(&c);
    pi_sampler_free(smp);
    app_free(&a);
    return rc;
}
