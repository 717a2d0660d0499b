/*
 * test_habits.c — the command line as users of llama.cpp type it: long
 * options and --opt=value, -f - for stdin, perplexity -f, chat --system and
 * -p, chat past a full context (on three chat templates), a random default
 * seed, Ctrl-C, stdout write errors, one-line unknown options, conflicting
 * options, and the --mem-budget messages. The binary comes from
 * $PI_TEST_PINFER (with $PI_TEST_RUNNER as a prefix, e.g. qemu-aarch64).
 */
#include "gguf/gguf.h"
#include "gguf/names.h"
#include "test_util.h"

#include <stdbool.h>
#include <sys/wait.h>

static const char *g_pinfer, *g_runner;
static char g_tmp[256], g_out[320], g_err[320];

/* Run `pinfer ARGS` through sh; stdout to out (NULL: g_out), stderr to g_err. */
static int pinfer_to(const char *args, const char *out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s %s >%s 2>%s", g_runner, g_pinfer, args, out ? out : g_out, g_err);
    return t_sh(cmd);
}
static int pinfer(const char *args) { return pinfer_to(args, NULL); }

static int count_of(const char *path, const char *needle) {
    char *s = t_read_file(path, NULL);
    int n = 0;
    for (const char *p = s; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
    free(s);
    return n;
}

static int lines_of(const char *path) { return count_of(path, "\n"); }

/* g_tmp.in holding text, for commands that read stdin. */
static const char *input(const char *text) {
    static char path[320];
    snprintf(path, sizeof path, "%s.in", g_tmp);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return path;
}

/* A copy of src with tokenizer.chat_template set to tmpl. */
static bool with_template(const char *src, const char *dst, const char *tmpl) {
    pi_gguf *g;
    if (pi_gguf_open(src, &g)) return false;
    pi_gguf_writer *w;
    bool ok = pi_gguf_writer_create(dst, false, &w) == PI_OK;
    for (int64_t i = 0; ok && i < pi_gguf_n_kv(g); i++) {
        const pi_gguf_kv *kv = pi_gguf_kv_at(g, i);
        if (!pi_gguf_str_eq(kv->key, PI_KEY_TOKENIZER_CHAT_TEMPLATE)) ok = pi_gguf_set_kv(w, kv) == PI_OK;
    }
    ok = ok && pi_gguf_set_str(w, PI_KEY_TOKENIZER_CHAT_TEMPLATE, tmpl) == PI_OK;
    for (int pass = 0; ok && pass < 2; pass++) {
        if (pass == 1) ok = pi_gguf_writer_begin_data(w) == PI_OK;
        for (int64_t i = 0; ok && i < pi_gguf_n_tensors(g); i++) {
            const pi_gguf_tensor *t = pi_gguf_tensor_at(g, i);
            char nm[128];
            snprintf(nm, sizeof nm, "%.*s", (int)t->name.len, t->name.data);
            ok = (pass == 0 ? pi_gguf_add_tensor(w, nm, (pi_type)t->type, t->n_dims, t->ne)
                            : pi_gguf_write_data(w, t->data, t->nbytes)) == PI_OK;
        }
    }
    pi_status st = pi_gguf_writer_finish(w, ok ? PI_OK : PI_ERR_INVALID);
    pi_gguf_close(g);
    return ok && st == PI_OK;
}

static void test_options(const char *model, const char *text) {
    char args[2048], ref[320];
    snprintf(ref, sizeof ref, "%s.ref", g_tmp);
    /* long options and --opt=value give the short options' text */
    snprintf(args, sizeof args, "run -m %s -p 'Once upon a time' -n 24 --temp 0.7 --seed 5 -t 2 -c 256", model);
    CHECK(pinfer_to(args, ref) == 0);
    snprintf(args, sizeof args,
             "run --model %s --prompt 'Once upon a time' --n-predict 24 --temp=0.7 --seed=5 --threads 2 --ctx-size=256",
             model);
    CHECK(pinfer(args) == 0 && t_same_file(g_out, ref));
    snprintf(args, sizeof args, "run --model=%s --prompt='Once upon a time' --predict=24 --temp 0.7 -s 5 -t 2 -c 256",
             model);
    CHECK(pinfer(args) == 0 && t_same_file(g_out, ref));
    /* -f - reads the prompt from stdin; --file too */
    snprintf(args, sizeof args, "run -m %s -f - -n 24 --temp 0.7 -s 5 -t 2 -c 256 < %s", model,
             input("Once upon a time"));
    CHECK(pinfer(args) == 0 && t_same_file(g_out, ref));
    /* llama-bench's spellings reach bench only */
    snprintf(args, sizeof args, "bench -m %s --n-prompt 8 --n-gen 4 --repetitions 1 -t 2", model);
    CHECK(pinfer(args) == 0 && t_file_has(g_out, "pp8") && t_file_has(g_out, "tg4"));
    snprintf(args, sizeof args, "run -m %s --n-prompt 8", model);
    CHECK(pinfer(args) == 2 && t_file_has(g_err, "--n-prompt"));
    /* a value that looks like an option is never rewritten */
    snprintf(args, sizeof args, "run -m %s -p '--x=y' -n 2 --temp 0", model);
    CHECK(pinfer(args) == 0 && t_file_has(g_out, "--x=y"));
    /* a directory or a missing file is not an empty prompt */
    snprintf(args, sizeof args, "run -m %s -f /tmp -n 2", model);
    CHECK(pinfer(args) == 2 && t_file_has(g_err, "is a directory"));
    snprintf(args, sizeof args, "run -m %s --file /nonexistent/prompt.txt -n 2", model);
    CHECK(pinfer(args) == 2 && t_file_has(g_err, "/nonexistent/prompt.txt"));
    /* the default seed is random and printed: two runs differ */
    snprintf(args, sizeof args, "run -m %s -n 2 --temp 1", model);
    char seed_a[64] = "", seed_b[64] = "";
    for (int k = 0; k < 2; k++) {
        CHECK(pinfer(args) == 0);
        char *e = t_read_file(g_err, NULL), *p = e ? strstr(e, "seed ") : NULL;
        if (p) snprintf(k ? seed_b : seed_a, 64, "%.*s", (int)strcspn(p, ","), p);
        free(e);
    }
    CHECKF(seed_a[0] && seed_b[0] && strcmp(seed_a, seed_b), "seeds '%s' and '%s'", seed_a, seed_b);
    /* an unknown option: one line naming it and where to look */
    snprintf(args, sizeof args, "run -m %s --no-such-flag", model);
    CHECK(pinfer(args) == 2 && lines_of(g_err) == 1 && t_file_has(g_err, "--no-such-flag") &&
          t_file_has(g_err, "pinfer run --help"));
    CHECK(pinfer("convert --bogus") == 2 && lines_of(g_err) == 1 && t_file_has(g_err, "pinfer convert --help"));
    CHECK(pinfer("run stray-word") == 2 && lines_of(g_err) == 1);
    /* conflicting options are refused; too many threads only warned about */
    snprintf(args, sizeof args, "run -m %s --plan x.plan --no-plan", model);
    CHECK(pinfer(args) == 2 && t_file_has(g_err, "--no-plan"));
    snprintf(args, sizeof args, "run -m %s --mem-budget 64M --cache 100M", model);
    CHECK(pinfer(args) == 2 && t_file_has(g_err, "--cache 100M is not below --mem-budget 64M"));
    snprintf(args, sizeof args, "run -m %s --cache 10M", model);
    CHECK(pinfer(args) == 2 && t_file_has(g_err, "--mem-budget"));
    snprintf(args, sizeof args, "run -m %s --dense --predictor oracle", model);
    CHECK(pinfer(args) == 2 && t_file_has(g_err, "--dense and --predictor"));
    snprintf(args, sizeof args, "run -m %s -n 2 -t 64", model);
    CHECK(pinfer(args) == 0 && t_file_has(g_err, "warning: -t 64 is above"));
    /* stdout that cannot be written is an error */
    snprintf(args, sizeof args, "run -m %s -n 8", model);
    CHECK(pinfer_to(args, "/dev/full") == 1 && t_file_has(g_err, "standard output"));
    CHECK(pinfer_to("version", "/dev/full") == 1);
    snprintf(args, sizeof args, "inspect %s", model);
    CHECK(pinfer_to(args, "/dev/full") == 1);
    /* perplexity: -f is the text (same figures as --text), - is stdin; -p is refused */
    if (text) {
        char ppl[320];
        snprintf(ppl, sizeof ppl, "%s.ppl", g_tmp);
        snprintf(args, sizeof args, "perplexity -m %s --text %s -c 64 --chunks 3", model, text);
        CHECK(pinfer_to(args, ppl) == 0 && t_file_has(ppl, "perplexity:"));
        snprintf(args, sizeof args, "perplexity -m %s -f %s -c 64 --chunks 3", model, text);
        CHECK(pinfer(args) == 0 && t_same_file(g_out, ppl));
        snprintf(args, sizeof args, "perplexity --model=%s --file - --ctx-size 64 --chunks 3 < %s", model, text);
        CHECK(pinfer(args) == 0 && t_same_file(g_out, ppl));
        snprintf(args, sizeof args, "perplexity -m %s -p 'text' -c 64", model);
        CHECK(pinfer(args) == 2 && t_file_has(g_err, "-f FILE"));
        snprintf(args, sizeof args, "perplexity -m %s -f %s -c 64 --chunks 2", model, text);
        CHECK(pinfer_to(args, "/dev/full") == 1);
        unlink(ppl);
    }
    unlink(ref);
}

/* Ctrl-C stops generation and still prints the summary. */
static void test_interrupt(const char *model) {
    char cmd[2048], rcf[320];
    snprintf(rcf, sizeof rcf, "%s.rc", g_tmp);
    snprintf(cmd, sizeof cmd,
             "%s %s run -m %s -n -1 --ignore-eos -c 16384 -t 1 >%s 2>%s & p=$!; sleep 1; kill -INT $p; wait $p; "
             "echo $? > %s",
             g_runner, g_pinfer, model, g_out, g_err, rcf);
    CHECK(t_sh(cmd) == 0);
    char *rc = t_read_file(rcf, NULL);
    /* 16,384 tokens take many seconds even on a fast machine: the signal
       comes first (2,048 took 1.4 s on a Zen 3 core, and the signal came
       too late) */
    CHECKF(rc && atoi(rc) == 130, "exit status %s", rc ? rc : "?");
    CHECK(t_file_has(g_err, "interrupted") && t_file_has(g_err, "generated") && t_file_has(g_err, "seed"));
    free(rc);
    unlink(rcf);
}

/* A chat of many turns in a small context goes on, dropping old turns. */
static void test_chat(const char *model) {
    char args[4096], msgs[320], tm[320];
    snprintf(msgs, sizeof msgs, "%s.msgs", g_tmp);
    FILE *f = fopen(msgs, "w");
    if (!f) return;
    for (int i = 0; i < 8; i++) fprintf(f, "Tell me about the little dog number %d and the big red ball\n", i);
    fclose(f);
    /* plain transcript, the system prompt a turn of its own: KV positions discarded */
    snprintf(args, sizeof args, "chat -m %s -c 160 -n 24 --temp 0 --system 'You tell short stories.' < %s", model,
             msgs);
    CHECK(pinfer(args) == 0 && t_file_has(g_err, "context full: dropped") && t_file_has(g_err, "positions)") &&
          t_file_has(g_err, "chat: 8 turns"));
    CHECK(lines_of(g_out) >= 8);
    /* -p is the first turn */
    snprintf(args, sizeof args, "chat -m %s -n 8 --temp 0 -p 'Hello there' < /dev/null", model);
    CHECK(pinfer(args) == 0 && t_file_has(g_err, "chat: 1 turn,"));
    /* a message that can never fit is refused, the chat goes on */
    snprintf(args, sizeof args, "chat -m %s -c 48 -n 8 --temp 0 < %s", model,
             input("one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
                   "seventeen eighteen nineteen twenty twenty-one twenty-two twenty-three twenty-four\nhi\n"));
    CHECK(pinfer(args) == 0 && t_file_has(g_err, "message ignored") && t_file_has(g_err, "chat: 1 turn,"));
    CHECK(pinfer_to("chat --bogus", "/dev/null") == 2);
    /* a chat whose replies cannot be written stops with an error */
    snprintf(args, sizeof args, "chat -m %s -n 8 --temp 0 < %s", model, msgs);
    CHECK(pinfer_to(args, "/dev/full") == 1 && t_file_has(g_err, "standard output"));
    /* ChatML: the system turn stays, old turns' positions are discarded */
    snprintf(tm, sizeof tm, "%s.tmpl.gguf", g_tmp);
    if (with_template(model, tm, "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}")) {
        snprintf(args, sizeof args, "chat -m %s -c 192 -n 24 --temp 0 --system 'You tell short stories.' < %s", tm,
                 msgs);
        CHECK(pinfer(args) == 0 && t_file_has(g_err, "chatml template") && t_file_has(g_err, "positions)") &&
              t_file_has(g_err, "chat: 8 turns"));
    }
    /* Llama 2: the system prompt lives in the first user message, so the
       shortened conversation is evaluated again */
    if (with_template(model, tm, "{{ bos_token }}[INST] {{ messages[0]['content'] }} [/INST]")) {
        snprintf(args, sizeof args, "chat -m %s -c 192 -n 24 --temp 0 --system 'You tell short stories.' < %s", tm,
                 msgs);
        CHECK(pinfer(args) == 0 && t_file_has(g_err, "llama2 template") &&
              t_file_has(g_err, "evaluating the rest again") && t_file_has(g_err, "chat: 8 turns"));
        /* without a system prompt nothing moves: positions discarded */
        snprintf(args, sizeof args, "chat -m %s -c 160 -n 24 --temp 0 < %s", tm, msgs);
        CHECK(pinfer(args) == 0 && t_file_has(g_err, "positions)") && t_file_has(g_err, "chat: 8 turns"));
    }
    unlink(tm);
    unlink(msgs);
}

/* --mem-budget: a file without bundles, sizes, the minimum and -c, the
   first hardware probe announced and timed. */
static void test_budget(void) {
    char args[2048], plain[320], bundle[320], cache[320];
    snprintf(plain, sizeof plain, "%s.plain.gguf", g_tmp);
    snprintf(bundle, sizeof bundle, "%s.bundle.gguf", g_tmp);
    snprintf(cache, sizeof cache, "%s.cache", g_tmp);
    snprintf(args, sizeof args, "gen-model -o %s --preset tiny --layers 2 --dim 256 --ffn 768 --n-head 4 --n-head-kv 2 "
             "--vocab-size 300 --type q4_0 --act relu --active 0.15 --predictor --pred-rank 64", plain);
    CHECK(pinfer(args) == 0 && t_file_has(g_err, "(100%)") && t_file_has(g_err, "MiB/s")); /* progress */
    snprintf(args, sizeof args, "convert -m %s --bundle -o %s", plain, bundle);
    CHECK(pinfer(args) == 0);
    snprintf(args, sizeof args, "run -m %s --mem-budget 100M -n 2", plain);
    CHECK(pinfer(args) == 1 && lines_of(g_err) == 1 && t_file_has(g_err, "no neuron bundles") &&
          t_file_has(g_err, "convert -m") && t_file_has(g_err, "--bundle"));
    snprintf(args, sizeof args, "run -m %s --mem-budget 1 -n 2 -c 256", bundle);
    CHECK(pinfer(args) == 1 && t_file_has(g_err, "--mem-budget 1 B is below") && t_file_has(g_err, "(-c)") &&
          !t_file_has(g_err, " 0 MiB") && !t_file_has(g_err, "measuring"));
    /* the lowest minimum has the output head on flash; the message also
       gives the minimum with it resident */
    static const char *const k_res = "with the output head resident the minimum is ";
    char *e = t_read_file(g_err, NULL), *mp = e ? strstr(e, "minimum of ") : NULL, *rp = e ? strstr(e, k_res) : NULL;
    const double min_mib = mp && strstr(mp, " MiB") ? atof(mp + strlen("minimum of ")) : 0.0;
    const double res_mib = rp ? atof(rp + strlen(k_res)) : 0.0;
    free(e);
    CHECKF(min_mib > 1.0 && res_mib > min_mib, "the minimum at -c 256: %.2f MiB, with the head resident %.2f", min_mib,
           res_mib);
    snprintf(args, sizeof args, "run -m %s --mem-budget 1500K -n 2 -c 512", bundle);
    CHECK(pinfer(args) == 1 && t_file_has(g_err, "1.46 MiB is below"));
    /* no cached hardware figures: it says it measures them, and how long it took */
    if (!t_emulated()) {
        snprintf(args, sizeof args, "mkdir -p %s && XDG_CACHE_HOME=%s %s run -m %s --mem-budget 64M -n 4 --temp 0 "
                 "> %s 2> %s", cache, cache, g_pinfer, bundle, g_out, g_err);
        CHECK(t_sh(args) == 0 && t_file_has(g_err, "measuring") && t_file_has(g_err, "hardware measured in") &&
              t_file_has(g_err, "plan: predicted"));
        /* and only once */
        snprintf(args, sizeof args, "XDG_CACHE_HOME=%s %s run -m %s --mem-budget 64M -n 4 --temp 0 > %s 2> %s", cache,
                 g_pinfer, bundle, g_out, g_err);
        CHECK(t_sh(args) == 0 && !t_file_has(g_err, "measuring"));
        snprintf(args, sizeof args, "rm -rf %s", cache);
        t_sh(args);
    }
    /* the output head in a smaller type: a smaller fixed region, a lower minimum */
    char small[320];
    snprintf(small, sizeof small, "%s.small.gguf", g_tmp);
    snprintf(args, sizeof args, "convert -m %s --bundle --output-type q4_0 --embd-type q4_0 -o %s", plain, small);
    CHECK(pinfer(args) == 0 && t_file_has(g_err, "output head q4_0"));
    snprintf(args, sizeof args, "run -m %s --mem-budget 1 -n 2 -c 256", small);
    CHECK(pinfer(args) == 1);
    e = t_read_file(g_err, NULL), mp = e ? strstr(e, "minimum of ") : NULL, rp = e ? strstr(e, k_res) : NULL;
    const double small_mib = mp && strstr(mp, " MiB") ? atof(mp + strlen("minimum of ")) : 0.0;
    const double small_res = rp ? atof(rp + strlen(k_res)) : 0.0;
    free(e);
    CHECKF(small_mib > 0.0 && small_res > 0.0 && small_res < res_mib,
           "--output-type q4_0: minimum with the head resident %.2f MiB, before %.2f", small_res, res_mib);
    snprintf(args, sizeof args, "inspect %s", small);
    CHECK(pinfer(args) == 0 && t_file_has(g_out, "output.weight             q4_0"));
    snprintf(args, sizeof args, "run -m %s -p hello -n 8 --temp 0 -c 256 --mem-budget %.0fK", small,
             small_mib * 1024 + 700);
    CHECK(pinfer(args) == 0 && t_file_has(g_out, "hello"));
    snprintf(args, sizeof args, "convert -m %s --output-type q5_9 -o %s", plain, small);
    CHECK(pinfer(args) == 2 && t_file_has(g_err, "--output-type"));
    unlink(small);
    /* every cache policy reads differently and writes the in-memory text */
    char ref[320];
    snprintf(ref, sizeof ref, "%s.ref", g_tmp);
    snprintf(args, sizeof args, "run -m %s -p hello -n 48 --temp 0 -c 256", bundle);
    CHECK(pinfer_to(args, ref) == 0);
    static const char *const policies[] = {"lru", "slru", "lfu", "auto"};
    for (int k = 0; k < 4; k++) {
        /* the minimum, 600K of it the cache: the cache matters */
        snprintf(args, sizeof args, "run -m %s -p hello -n 48 --temp 0 -c 256 --mem-budget %.0fK --cache 600K "
                 "--cache-policy %s --stats", bundle, min_mib * 1024 + 700, policies[k]);
        CHECKF(pinfer(args) == 0 && t_same_file(g_out, ref) && t_file_has(g_err, "cache hits"),
               "--cache-policy %s", policies[k]);
    }
    snprintf(args, sizeof args, "run -m %s --mem-budget 7M --cache-policy mru", bundle);
    CHECK(pinfer(args) == 2 && t_file_has(g_err, "--cache-policy"));
    unlink(ref);
    /* --predictor model on a model without predictors says so */
    char model[512];
    if (t_fixture(model, sizeof model, "relu/relu-stories.gguf")) {
        snprintf(args, sizeof args, "run -m %s --predictor model -n 2", model);
        CHECK(pinfer(args) == 1 && t_file_has(g_err, "no activation predictors"));
    }
    unlink(plain);
    unlink(bundle);
}

int main(void) {
    if (!t_pinfer_binary(&g_pinfer, &g_runner)) return PI_TEST_SKIP;
    t_tmp_path(g_tmp, sizeof g_tmp, "habits");
    snprintf(g_out, sizeof g_out, "%s.out", g_tmp);
    snprintf(g_err, sizeof g_err, "%s.err", g_tmp);
    char model[512], text[512];
    if (t_fixture(model, sizeof model, "stories260K.gguf")) {
        test_options(model, t_fixture(text, sizeof text, "relu/val.txt"));
        test_interrupt(model);
        test_chat(model);
    } else {
        fprintf(stderr, "test_habits: stories260K fixture absent: option and chat checks skipped\n");
    }
    test_budget();
    unlink(g_out);
    unlink(g_err);
    unlink(input(""));
    return t_done("test_habits");
}
