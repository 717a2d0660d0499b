/*
 * cmd_chat.c — `pinfer chat`: an interactive conversation.
 *
 * The prompt format comes from the GGUF's tokenizer.chat_template. Like
 * llama.cpp's built-in templates, the common families are recognised by a
 * marker they contain (ChatML, Llama 2/Mistral [INST], Llama 3 headers,
 * Zephyr, Gemma); a model without a template gets a plain "User:/Assistant:"
 * transcript. The KV cache is kept across turns: each turn only evaluates
 * the new text.
 */
#include "cmds.h"
#include "common.h"

#include "tokenizer/unicode.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const char *name, *marker;
    const char *user_pre, *user_post; /* around each user message */
    const char *assistant_post;       /* after the model's reply */
} chat_format;

static const chat_format k_formats[] = {
    {"chatml", "<|im_start|>", "<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n", "<|im_end|>\n"},
    {"llama3", "<|start_header_id|>", "<|start_header_id|>user<|end_header_id|>\n\n",
     "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"},
    {"llama2", "[INST]", "[INST] ", " [/INST]", "</s>"},
    {"zephyr", "<|user|>", "<|user|>\n", "</s>\n<|assistant|>\n", "</s>\n"},
    {"gemma", "<start_of_turn>", "<start_of_turn>user\n", "<end_of_turn>\n<start_of_turn>model\n", "<end_of_turn>\n"},
};
static const chat_format k_plain = {"plain", NULL, "User: ", "\nAssistant:", "\n"};

static const chat_format *pick_format(const pi_gguf *g) {
    pi_gguf_str t;
    if (pi_gguf_get_str(g, "tokenizer.chat_template", &t) != PI_OK) return &k_plain;
    for (size_t i = 0; i < sizeof k_formats / sizeof k_formats[0]; i++) {
        size_t ml = strlen(k_formats[i].marker);
        for (uint64_t k = 0; k + ml <= t.len; k++)
            if (!memcmp(t.data + k, k_formats[i].marker, ml)) return &k_formats[i];
    }
    return &k_plain;
}

static void usage(FILE *f) {
    fprintf(f, "usage: pinfer chat -m FILE [-n N] [options]\n"
               "  reads one message per line from stdin; an empty line or end of input ends the chat\n"
               "  -n N                 longest reply in tokens (default 256)\n");
    app_usage_common(f);
}

/* Evaluate text (special tokens parsed) at the end of the conversation. */
static bool feed(const char *cmd, app *a, pi_sampler *smp, const char *text, bool first) {
    size_t need = 0, n;
    bool bos = first && pi_tokenizer_add_bos(a->tok) && pi_tokenizer_bos(a->tok) >= 0;
    pi_tokenize(a->tok, text, strlen(text), bos, true, NULL, 0, &need);
    int32_t *ids = malloc((need + 1) * sizeof *ids);
    bool ok = ids && pi_tokenize(a->tok, text, strlen(text), bos, true, ids, need, &n) == PI_OK;
    if (ok && a->s->n_past + (int64_t)n >= a->s->n_ctx) {
        fprintf(stderr, "pinfer: %s: the conversation no longer fits in the context of %lld tokens (raise -c)\n", cmd,
                (long long)a->s->n_ctx);
        ok = false;
    } else if (ok && pi_state_decode(a->s, ids, (int64_t)n)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        ok = false;
    }
    for (size_t i = 0; ok && i < n; i++) pi_sampler_accept(smp, ids[i]);
    free(ids);
    return ok;
}

int cmd_chat(int argc, char **argv) {
    const char *cmd = "chat";
    app_opts o;
    app_opts_init(&o);
    o.n_predict = 256;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        int r = app_parse_common(cmd, &o, argc, argv, &i);
        if (r < 0) return 2;
        if (r == 0) {
            fprintf(stderr, "pinfer: %s: unknown option '%s'\n", cmd, argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!o.seed_given) o.sp.seed = (uint64_t)time(NULL) & 0x7fffffff;
    app a;
    pi_sampler *smp = NULL;
    if (!app_load(cmd, &o, &a)) return 1;
    if (pi_sampler_create(&o.sp, a.m->hp.n_vocab, &smp)) {
        fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
        app_free(&a);
        return 1;
    }
    const chat_format *fmt = pick_format(a.m->gguf);
    bool tty = isatty(0);
    fprintf(stderr, "chat: %s template; %s\n", fmt->name,
            tty ? "type a message and press Enter; an empty line ends the chat" : "reading messages from stdin");
    char line[8192], turn[8192 + 256];
    int rc = 0;
    for (bool first = true;; first = false) {
        if (tty) fputs("> ", stdout), fflush(stdout);
        if (!fgets(line, sizeof line, stdin)) break;
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0]) break;
        size_t bad;
        if (!pi_utf8_valid((const uint8_t *)line, strlen(line), &bad)) {
            fprintf(stderr, "pinfer: %s: the message is not valid UTF-8 at byte %zu; ignored\n", cmd, bad);
            continue;
        }
        snprintf(turn, sizeof turn, "%s%s%s", fmt->user_pre, line, fmt->user_post);
        if (!feed(cmd, &a, smp, turn, first)) {
            rc = 1;
            break;
        }
        long n_gen = 0;
        while (n_gen < o.n_predict && a.s->n_past < a.s->n_ctx) {
            int32_t tok = pi_sampler_sample(smp, pi_state_logits(a.s));
            if (pi_tokenizer_is_eog(a.tok, tok)) break;
            const char *piece;
            size_t len;
            if (pi_token_piece(a.tok, tok, false, &piece, &len) == PI_OK) fwrite(piece, 1, len, stdout);
            fflush(stdout);
            pi_sampler_accept(smp, tok);
            n_gen++;
            if (pi_state_decode(a.s, &tok, 1)) {
                fprintf(stderr, "pinfer: %s: %s\n", cmd, pi_last_error());
                rc = 1;
                break;
            }
        }
        fputc('\n', stdout);
        if (rc || !feed(cmd, &a, smp, fmt->assistant_post, false)) {
            rc = 1;
            break;
        }
    }
    pi_sampler_free(smp);
    app_free(&a);
    return rc;
}
