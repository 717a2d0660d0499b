/*
 * chat.c — chat templates: a conversation as the prompt text a chat model
 * was trained on.
 *
 * Like llama.cpp's built-in templates, the common families are recognised
 * by a marker their tokenizer.chat_template contains (ChatML, Llama 3
 * headers, Llama 2 [INST], Zephyr, Gemma); a model without a template, or
 * with one of no known family, gets a plain "User:/Assistant:" transcript.
 * (The Jinja template itself is not run.)
 *
 * Each message is written as its role's prefix, the content and the role's
 * suffix, so the text of a conversation's first k messages is a prefix of
 * the text of all of them; families without a system turn (Llama 2, Gemma)
 * put the system message inside the first user message instead.
 */
#include "tok_internal.h"

#include "gguf/names.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name, *marker;
    const char *pre[3], *post[3]; /* system, user, assistant */
    const char *sys_in_user_pre, *sys_in_user_post; /* NULL: the system message is a turn of its own */
} chat_family;

enum { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT };

static const chat_family k_families[] = {
    {"chatml", "<|im_start|>",
     {"<|im_start|>system\n", "<|im_start|>user\n", "<|im_start|>assistant\n"},
     {"<|im_end|>\n", "<|im_end|>\n", "<|im_end|>\n"}, NULL, NULL},
    {"llama3", "<|start_header_id|>",
     {"<|start_header_id|>system<|end_header_id|>\n\n", "<|start_header_id|>user<|end_header_id|>\n\n",
      "<|start_header_id|>assistant<|end_header_id|>\n\n"},
     {"<|eot_id|>", "<|eot_id|>", "<|eot_id|>"}, NULL, NULL},
    {"llama2", "[INST]", {"", "[INST] ", ""}, {"", " [/INST]", "</s>"}, "<<SYS>>\n", "\n<</SYS>>\n\n"},
    {"zephyr", "<|user|>", {"<|system|>\n", "<|user|>\n", "<|assistant|>\n"}, {"</s>\n", "</s>\n", "</s>\n"}, NULL,
     NULL},
    {"gemma", "<start_of_turn>", {"", "<start_of_turn>user\n", "<start_of_turn>model\n"},
     {"", "<end_of_turn>\n", "<end_of_turn>\n"}, "", "\n\n"},
    {"plain", NULL, {"System: ", "User: ", "Assistant:"}, {"\n", "\n", "\n"}, NULL, NULL},
};
#define N_FAMILIES (int)(sizeof k_families / sizeof k_families[0])
#define PLAIN (N_FAMILIES - 1)

int pi_chat_family_of(const pi_gguf *g) {
    pi_gguf_str t;
    if (pi_gguf_get_str(g, PI_KEY_TOKENIZER_CHAT_TEMPLATE, &t) != PI_OK) return PLAIN;
    for (int f = 0; f < PLAIN; f++) {
        size_t ml = strlen(k_families[f].marker);
        for (uint64_t k = 0; k + ml <= t.len; k++)
            if (!memcmp(t.data + k, k_families[f].marker, ml)) return f;
    }
    return PLAIN;
}

const char *pi_chat_template(const pi_tokenizer *tok) {
    if (!tok) return "";
    return k_families[tok->chat >= 0 && tok->chat < N_FAMILIES ? tok->chat : PLAIN].name;
}

/* Appends text to buf[0..cap) at *n, counting past cap. */
static void put(char *buf, size_t cap, size_t *n, const char *s) {
    size_t len = strlen(s);
    if (*n < cap) memcpy(buf + *n, s, *n + len <= cap ? len : cap - *n);
    *n += len;
}

static int role_of(const char *r) {
    if (!r) return -1;
    if (!strcmp(r, "system")) return ROLE_SYSTEM;
    if (!strcmp(r, "user")) return ROLE_USER;
    if (!strcmp(r, "assistant")) return ROLE_ASSISTANT;
    return -1;
}

pi_status pi_chat_apply(const pi_tokenizer *tok, const pi_chat_message *msgs, size_t n, bool add_assistant,
                        char *buf, size_t cap, size_t *len) {
    if (len) *len = 0;
    if (!tok || !len || (n && !msgs) || (cap && !buf))
        return pi_error(PI_ERR_INVALID, "pi_chat_apply: %s is NULL",
                        !tok ? "the tokenizer" : !len ? "len" : (n && !msgs) ? "msgs" : "buf");
    const chat_family *f = &k_families[tok->chat >= 0 && tok->chat < N_FAMILIES ? tok->chat : PLAIN];
    size_t out = 0;
    const char *pending_sys = NULL; /* a system message waiting for the first user turn */
    for (size_t i = 0; i < n; i++) {
        const int r = role_of(msgs[i].role);
        if (r < 0 || !msgs[i].content)
            return pi_error(PI_ERR_INVALID, "pi_chat_apply: message %zu: %s", i,
                            r < 0 ? "role must be \"system\", \"user\" or \"assistant\"" : "content is NULL");
        if (r == ROLE_SYSTEM && f->sys_in_user_pre) {
            pending_sys = msgs[i].content;
            continue;
        }
        put(buf, cap, &out, f->pre[r]);
        if (r == ROLE_USER && pending_sys) {
            put(buf, cap, &out, f->sys_in_user_pre);
            put(buf, cap, &out, pending_sys);
            put(buf, cap, &out, f->sys_in_user_post);
            pending_sys = NULL;
        }
        put(buf, cap, &out, msgs[i].content);
        put(buf, cap, &out, f->post[r]);
    }
    if (add_assistant) put(buf, cap, &out, f->pre[ROLE_ASSISTANT]);
    *len = out;
    if (out >= cap) {
        if (cap) buf[cap - 1] = '\0';
        return cap == 0 && out == 0 ? PI_OK : pi_error(PI_ERR_INVALID, "pi_chat_apply: the text needs %zu bytes, "
                                                       "the buffer holds %zu", out + 1, cap);
    }
    buf[out] = '\0';
    return PI_OK;
}
