/*
 * simple.c — the smallest pinfer program: open a model, stream a greedy
 * completion of a prompt.
 *
 *   cc simple.c $(pkg-config --cflags --libs pinfer) -o simple
 *   ./simple model.gguf "Once upon a time" 64
 */
#include <pinfer.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int print_piece(void *ctx, const char *text, size_t len, int32_t token) {
    (void)ctx, (void)token;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0; /* non-zero would stop generation */
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [PROMPT] [TOKENS]\n", argv[0]);
        return 2;
    }
    const char *prompt = argc > 2 ? argv[2] : "";
    const long n_predict = argc > 3 ? atol(argv[3]) : 64;
    pi_model *model = NULL;
    pi_session *session = NULL;
    pi_sampler *sampler = NULL;
    int32_t *tokens = NULL;
    size_t n = 0;
    int rc = 1;

    if (pi_model_open(argv[1], NULL, &model)) goto out;
    const pi_tokenizer *tok = pi_model_tokenizer(model);
    const bool bos = pi_tokenizer_add_bos(tok);
    pi_tokenize(tok, prompt, strlen(prompt), bos, false, NULL, 0, &n); /* how many tokens */
    if (!(tokens = malloc((n + 1) * sizeof *tokens)) ||
        pi_tokenize(tok, prompt, strlen(prompt), bos, false, tokens, n, &n))
        goto out;

    pi_sampler_params sp = pi_sampler_default_params();
    sp.temp = 0.0f; /* greedy */
    if (pi_session_create(model, NULL, &session) || pi_sampler_create(&sp, pi_model_n_vocab(model), &sampler))
        goto out;

    fputs(prompt, stdout);
    pi_generate_params gp = pi_generate_default_params();
    gp.n_predict = n_predict;
    if (pi_generate(session, sampler, tokens, n, &gp, print_piece, NULL, NULL)) goto out;
    putchar('\n');
    rc = 0;
out:
    if (rc) fprintf(stderr, "simple: %s\n", pi_last_error());
    free(tokens);
    pi_sampler_free(sampler);
    pi_session_free(session);
    pi_model_close(model);
    return rc;
}
