/*
 * test_cli.c — the pinfer command end to end, as a user runs it: golden text
 * on stdout, a converted llama2.c checkpoint giving the same text, inspect on
 * every fixture, a generated model (also profiled and converted to a bundle
 * file), and the exit status and message of each kind of bad input. The
 * binary comes from $PI_TEST_PINFER (set by the test runner, with
 * $PI_TEST_RUNNER as a prefix such as qemu-aarch64).
 */
#include "test_hw.h"
#include "test_util.h"

#include <stdbool.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>

static const char *g_pinfer, *g_runner;
static char g_tmp[256];

/* Run `pinfer ARGS`, stdout to out_path (or /dev/null), stderr to err_path;
   returns the exit status. */
static int pinfer(const char *args, const char *out_path, const char *err_path) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s %s >%s 2>%s", g_runner, g_pinfer, args, out_path ? out_path : "/dev/null",
             err_path ? err_path : "/dev/null");
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* bench-kernels on a small shape: a line per type with all twelve fields,
   every figure positive, the plain read of the down path's scattered rows
   among them. */
static void bench_kernels_small(const char *out, const char *err) {
    CHECK(pinfer("bench-kernels --types q4_0,f16 --variants ref -t 1 --rows 256 --cols 256 --ws-mib 8 --bw-mib 64 "
                 "--reps 1",
                 out, err) == 0);
    char *text = t_read_file(out, NULL);
    CHECK(text && strstr(text, "read GB/s") && strstr(text, "read share"));
    int lines = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        char type[16], set[16];
        int threads = 0;
        double v[9];
        if (strncmp(line, "q4_0 ", 5) && strncmp(line, "f16 ", 4)) continue;
        const int got = sscanf(line, "%15s %15s %d %lf %lf%% %lf %lf %lf%% %lf %lf %lf %lf%%", type, set, &threads,
                               &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]);
        CHECKF(got == 12, "bench-kernels line has %d of 12 fields: %s", got, line);
        CHECK(!strcmp(set, "ref") && threads == 1);
        for (int i = 0; i < 9 && got == 12; i++) CHECKF(v[i] > 0.0, "field %d of '%s' is not positive", i + 3, line);
        lines++;
    }
    CHECK(lines == 2);
    free(text);
}

int main(void) {
    if (!t_pinfer_binary(&g_pinfer, &g_runner)) return PI_TEST_SKIP;
    char out[300], err[300], args[2048], model[512], golden[512], bin[512], tok[512], conv[300];
    t_tmp_path(g_tmp, sizeof g_tmp, "cli");
    snprintf(out, sizeof out, "%s.out", g_tmp);
    snprintf(err, sizeof err, "%s.err", g_tmp);
    snprintf(conv, sizeof conv, "%s.gguf", g_tmp);

    /* usage errors exit 2 with a message */
    CHECK(pinfer("no-such-command", NULL, err) == 2 && t_file_has(err, "unknown command"));
    CHECK(pinfer("run --no-such-flag", NULL, err) == 2 && t_file_has(err, "--no-such-flag"));
    CHECK(pinfer("run -m", NULL, err) == 2 && t_file_has(err, "needs a value"));
    CHECK(pinfer("inspect /nonexistent.gguf", NULL, err) == 1 && t_file_has(err, "/nonexistent.gguf"));
    CHECK(pinfer("version", out, NULL) == 0 && t_file_has(out, "kernels:"));
    bench_kernels_small(out, err);

    if (t_fixture(model, sizeof model, "stories260K.gguf") &&
        t_fixture(golden, sizeof golden, "stories260K.greedy.txt")) {
        /* greedy from BOS, 256 tokens: stdout is exactly llama2.c's text */
        snprintf(args, sizeof args, "run -m %s -n 256 --temp 0 -t 2", model);
        CHECK(pinfer(args, out, err) == 0);
        CHECKF(t_same_file(out, golden), "run output differs from %s", golden);
        CHECK(t_file_has(err, "tok/s"));
        /* the same from the converted llama2.c checkpoint */
        if (t_fixture(bin, sizeof bin, "stories260K.bin") && t_fixture(tok, sizeof tok, "tok512.bin")) {
            snprintf(args, sizeof args, "convert --from-llama2c %s --tokenizer %s -o %s", bin, tok, conv);
            CHECK(pinfer(args, NULL, err) == 0);
            snprintf(args, sizeof args, "run -m %s -n 256 --temp 0", conv);
            CHECK(pinfer(args, out, err) == 0);
            CHECKF(t_same_file(out, golden), "converted model's output differs from %s", golden);
            /* and its tokenizer reads prompts as the original's does */
            snprintf(args, sizeof args, "run -m %s -p 'Once upon a time' -n 12 --temp 0", conv);
            CHECK(pinfer(args, out, err) == 0 && t_file_has(out, "Once upon a time, there was a little girl named Lily."));
            snprintf(args, sizeof args, "convert --from-llama2c %s --tokenizer %s -o %s", tok, tok, conv);
            CHECK(pinfer(args, NULL, err) == 1 && t_file_has(err, "llama2.c checkpoint"));
        }
        /* the prompt is echoed, the continuation follows */
        snprintf(args, sizeof args, "run -m %s -p 'Once upon a time' -n 12 --temp 0", model);
        CHECK(pinfer(args, out, err) == 0 && t_file_has(out, "Once upon a time, there was a little girl named Lily."));
        /* same seed, same text */
        snprintf(args, sizeof args, "run -m %s -p 'The cat' -n 40 --temp 1 --seed 42 > %s.a 2>/dev/null; %s %s run -m %s -p 'The cat' -n 40 --temp 1 --seed 42",
                 model, g_tmp, g_runner, g_pinfer, model);
        CHECK(pinfer(args, out, NULL) == 0);
        char a_path[320];
        snprintf(a_path, sizeof a_path, "%s.a", g_tmp);
        CHECK(t_same_file(out, a_path));
        unlink(a_path);
        /* bad prompts */
        snprintf(args, sizeof args, "run -m %s -p \"$(printf 'bad \\377 byte')\" -n 4", model);
        CHECK(pinfer(args, out, err) == 1 && t_file_has(err, "not valid UTF-8 at byte 4"));
        snprintf(args, sizeof args, "run -m %s -c 8 -p 'one two three four five six seven eight nine ten' -n 4", model);
        CHECK(pinfer(args, out, err) == 1 && t_file_has(err, "context holds 8"));
        snprintf(args, sizeof args, "run -m %s --top-p 0 -n 4", model);
        CHECK(pinfer(args, NULL, err) == 2 && t_file_has(err, "--top-p"));
        /* inspect: a good file, then a truncated copy */
        snprintf(args, sizeof args, "inspect %s", model);
        CHECK(pinfer(args, out, err) == 0 && t_file_has(out, "blk.4.ffn_down.weight"));
        snprintf(args, sizeof args, "inspect %s.trunc", g_tmp);
        char cut[1024];
        snprintf(cut, sizeof cut, "head -c 20000 %s > %s.trunc", model, g_tmp);
        CHECK(system(cut) == 0);
        CHECK(pinfer(args, out, err) == 1 && t_file_has(err, "byte"));
        snprintf(cut, sizeof cut, "%s.trunc", g_tmp);
        unlink(cut);
    }

    /* the sparse FFN with the exact mask writes the dense text (for a mixture of experts, per
       routed expert, which have no predictors yet); a SiLU model refuses it */
    static const char *const relu_fixtures[] = {"relu/relu-stories.gguf", "relu/moe-relu-stories.gguf"};
    for (size_t i = 0; i < 2; i++) {
        if (!t_fixture(model, sizeof model, relu_fixtures[i])) continue;
        char dense_out[320];
        snprintf(dense_out, sizeof dense_out, "%s.dense", g_tmp);
        snprintf(args, sizeof args, "run -m %s -p 'Once upon a time' -n 40 --temp 0 --dense", model);
        CHECK(pinfer(args, dense_out, err) == 0 && t_file_has(err, "FFN dense"));
        snprintf(args, sizeof args, "run -m %s -p 'Once upon a time' -n 40 --temp 0 --predictor oracle", model);
        CHECK(pinfer(args, out, err) == 0 && t_file_has(err, "FFN sparse (oracle mask)"));
        CHECKF(t_same_file(out, dense_out), "%s: oracle text differs from dense", relu_fixtures[i]);
        unlink(dense_out);
        if (i == 1) {
            snprintf(args, sizeof args, "run -m %s -p 'Once upon a time' -n 4 --predictor model", model);
            CHECK(pinfer(args, NULL, err) == 1 && t_file_has(err, "per-expert"));
        }
    }
    if (t_fixture(model, sizeof model, "stories260K.gguf")) {
        snprintf(args, sizeof args, "run -m %s -n 4 --predictor oracle", model);
        CHECK(pinfer(args, NULL, err) == 1 && t_file_has(err, "ReLU"));
    }

    /* every GGUF fixture inspects cleanly */
    static const char *fixtures[] = {"stories260K.gguf", "llama-2-tiny-random.gguf", "vocab/ggml-vocab-llama-spm.gguf",
                                     "vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-deepseek-llm.gguf",
                                     "relu/relu-stories.gguf", "relu/drelu-stories.gguf", "relu/moe-relu-stories.gguf"};
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        if (!t_fixture(model, sizeof model, fixtures[i])) continue;
        snprintf(args, sizeof args, "inspect %s", model);
        CHECKF(pinfer(args, out, err) == 0 && t_file_has(out, "tensors"), "inspect %s", fixtures[i]);
    }

    /* a generated model runs; its shape is what was asked */
    snprintf(args, sizeof args, "gen-model -o %s --preset tiny --layers 2 --dim 128 --ffn 256 --n-head 4 --n-head-kv 2 --vocab /nonexistent", conv);
    CHECK(pinfer(args, NULL, err) == 1 && t_file_has(err, "/nonexistent"));
    snprintf(args, sizeof args, "gen-model -o %s --preset tiny --layers 2 --vocab-size 300 --vocab /nonexistent", conv);
    CHECK(pinfer(args, NULL, err) == 2 && t_file_has(err, "--vocab-size and --vocab /nonexistent"));
    snprintf(args, sizeof args, "gen-model -o %s --preset tiny --layers 2 --dim 128 --ffn 256 --n-head 4 --n-head-kv 2 --vocab-size 300 --type q8_0 --act relu", conv);
    CHECK(pinfer(args, NULL, err) == 0);
    snprintf(args, sizeof args, "inspect %s", conv);
    /* the size asked for, also where the default vocabulary file is present */
    CHECK(pinfer(args, out, err) == 0 && t_file_has(out, "q8_0") && t_file_has(out, "pinfer.ffn_activation") &&
          t_file_has(out, "llama.vocab_size                       u32  = 300\n"));
    snprintf(args, sizeof args, "run -m %s -p 'hello' -n 8 --temp 0", conv);
    CHECK(pinfer(args, out, err) == 0 && t_file_has(out, "hello"));
    /* profiled, reordered and written as a bundle file, it still runs */
    char stats[320], bundle[320];
    snprintf(stats, sizeof stats, "%s.stats", g_tmp);
    snprintf(bundle, sizeof bundle, "%s.bundle", g_tmp);
    snprintf(args, sizeof args, "profile -m %s --tokens 16 --seed 1 -t 2 -o %s", conv, stats);
    CHECK(pinfer(args, NULL, err) == 0);
    snprintf(args, sizeof args, "convert -m %s --reorder %s --bundle -o %s", conv, stats, bundle);
    CHECK(pinfer(args, NULL, err) == 0 && t_file_has(err, "bundles"));
    snprintf(args, sizeof args, "inspect %s", bundle);
    CHECK(pinfer(args, out, err) == 0 && t_file_has(out, "blk.1.ffn_bundle") && t_file_has(out, "pinfer.bundle.stride") &&
          !t_file_has(out, "ffn_gate"));
    snprintf(args, sizeof args, "run -m %s -p 'hello' -n 8 --temp 0", bundle);
    CHECK(pinfer(args, out, err) == 0 && t_file_has(out, "hello"));
    snprintf(args, sizeof args, "convert -m %s --bundle --bundle-align 1000 -o %s", conv, bundle);
    CHECK(pinfer(args, NULL, err) == 2 && t_file_has(err, "--bundle-align"));
    if (t_fixture(model, sizeof model, "stories260K.gguf")) {
        snprintf(args, sizeof args, "convert -m %s --bundle -o %s", model, bundle);
        CHECK(pinfer(args, NULL, err) == 1 && t_file_has(err, "SiLU"));
    }
    /* with predictors, under a memory budget, planned: the text of the in-memory run */
    snprintf(args, sizeof args, "gen-model -o %s --preset tiny --layers 2 --dim 256 --ffn 768 --n-head 4 --n-head-kv 2 "
             "--vocab-size 300 --type q4_0 --act relu --active 0.15 --predictor --pred-rank 64", conv);
    CHECK(pinfer(args, NULL, err) == 0);
    snprintf(args, sizeof args, "profile -m %s --tokens 32 --seed 1 -t 2 -o %s", conv, stats);
    CHECK(pinfer(args, NULL, err) == 0);
    /* thresholds for a recall target from the profile's logit histograms;
       every run below uses them, in memory and under each budget */
    snprintf(args, sizeof args, "convert -m %s --bundle --recall 0.95 -o %s", conv, bundle);
    CHECK(pinfer(args, NULL, err) == 2 && t_file_has(err, "--recall"));
    snprintf(args, sizeof args, "convert -m %s --reorder %s --bundle --recall 1.5 -o %s", conv, stats, bundle);
    CHECK(pinfer(args, NULL, err) == 2 && t_file_has(err, "--recall"));
    snprintf(args, sizeof args, "convert -m %s --reorder %s --bundle --recall 0.95 -o %s", conv, stats, bundle);
    CHECK(pinfer(args, NULL, err) == 0);
    snprintf(args, sizeof args, "inspect %s", bundle);
    CHECK(pinfer(args, out, err) == 0 && t_file_has(out, "pinfer.predictor.recall_target") &&
          t_file_has(out, "pinfer.stats.pred_hist"));
    char mem_out[320], plan[320], hwf[320], out2[320];
    snprintf(out2, sizeof out2, "%s.out2.txt", g_tmp);
    snprintf(mem_out, sizeof mem_out, "%s.mem.txt", g_tmp);
    snprintf(plan, sizeof plan, "%s.plan", g_tmp);
    snprintf(hwf, sizeof hwf, "%s.hw", g_tmp);
    snprintf(args, sizeof args, "run -m %s -p 'hello' -n 12 --temp 0", bundle);
    CHECK(pinfer(args, mem_out, err) == 0 && t_file_has(err, "sparse"));
    snprintf(args, sizeof args, "run -m %s -p 'hello' -n 12 --temp 0 --mem-budget 1M --no-plan", bundle);
    CHECK(pinfer(args, NULL, err) == 1 && t_file_has(err, "minimum of"));
    char *e = t_read_file(err, NULL), *mp = e ? strstr(e, "minimum of ") : NULL;
    double min_mib = mp ? atof(mp + strlen("minimum of ")) : 0.0;
    free(e);
    CHECK(min_mib > 0.0);
    CHECK(t_write_hw(hwf));
    for (int k = 0; k < 3; k++) { /* the minimum, a little more, and everything */
        double mib = k == 0 ? min_mib + 0.5 : k == 1 ? min_mib + 2.0 : min_mib + 64.0;
        snprintf(args, sizeof args, "plan -m %s --mem-budget %.0fK --hw %s -o %s", bundle, mib * 1024, hwf, plan);
        CHECKF(pinfer(args, out, err) == 0 && t_file_has(out, "predicted:") && t_file_has(out, "hot neurons per layer"),
               "plan at %.1f MiB", mib);
        /* the planner chose the thresholds' recall (and, where it pays, the resident prefixes' own): the
           in-memory run with the plan's thresholds gives the same text, and so does the one at that
           recall where the plan keeps one threshold per layer */
        char *pt = t_read_file(plan, NULL), *rp = pt ? strstr(pt, "\nrecall ") : NULL;
        const double r = rp ? atof(rp + strlen("\nrecall ")) : 0.0;
        const bool split = pt && strstr(pt, "\nthresholds_hot ");
        free(pt);
        CHECKF(r >= 0.95 && r <= 0.99, "plan at %.1f MiB: recall %g", mib, r);
        snprintf(args, sizeof args, "run -m %s -p 'hello' -n 12 --temp 0 --plan %s --in-memory --stats", bundle, plan);
        CHECKF(pinfer(args, out2, err) == 0 && t_file_has(err, "the plan's") && !t_file_has(err, "neuron cache"),
               "plan at %.1f MiB, --in-memory", mib);
        if (!split) {
            snprintf(args, sizeof args, "run -m %s -p 'hello' -n 12 --temp 0 --recall %.17g", bundle, r);
            CHECK(pinfer(args, out, err) == 0 && t_file_has(err, "thresholds for recall"));
            CHECKF(t_same_file(out, out2), "plan at %.1f MiB: --in-memory differs from the run at recall %g", mib, r);
        }
        fprintf(stderr, "plan at %.1f MiB: recall %g, %s\n", mib, r, split ? "two thresholds per layer" : "one threshold per layer");
        snprintf(args, sizeof args, "run -m %s -p 'hello' -n 12 --temp 0 --plan %s --stats", bundle, plan);
        CHECKF(pinfer(args, out, err) == 0 && t_same_file(out, out2) && t_file_has(err, "neuron cache") &&
                   t_file_has(err, "per token") && t_file_has(err, "the plan's"),
               "planned run at %.1f MiB differs from the in-memory run", mib);
    }
    snprintf(args, sizeof args, "run -m %s -p 'hello' -n 12 --temp 0 --recall 0.95", bundle);
    CHECK(pinfer(args, out, err) == 0 && t_same_file(out, mem_out)); /* the file's own target */
    snprintf(args, sizeof args, "run -m %s -p 'hello' -n 12 --temp 0 --recall 0.5 --plan %s", bundle, plan);
    CHECK(pinfer(args, out, err) == 1 && t_file_has(err, "differs"));
    snprintf(args, sizeof args, "run -m %s -p 'hello' -n 4 --in-memory", bundle);
    CHECK(pinfer(args, out, err) == 2 && t_file_has(err, "--plan FILE"));
    snprintf(args, sizeof args, "run -m %s -p 'hello' -n 4 --plan %s --in-memory --mem-budget 64M", bundle, plan);
    CHECK(pinfer(args, out, err) == 2 && t_file_has(err, "contradict"));
    snprintf(args, sizeof args, "run -m %s -p 'hello' -n 4 --recall 0.97 --dense", bundle);
    CHECK(pinfer(args, NULL, err) == 2 && t_file_has(err, "--recall"));
    snprintf(args, sizeof args, "run -m %s -p 'hello' -n 4 --recall 1.2", bundle);
    CHECK(pinfer(args, NULL, err) == 2 && t_file_has(err, "--recall"));
    snprintf(args, sizeof args, "run -m %s -p 'hello' -n 4 --recall 0.97", conv);
    CHECK(pinfer(args, NULL, err) == 1 && t_file_has(err, "histograms"));
    /* a mixture: gen-model's bundle file carries the planted logit histograms of
       every expert, so thresholds follow a recall target per expert, chosen by
       the planner under a budget or asked for; the planned runs give the text
       of the in-memory run at the plan's recall */
    char moe[320];
    snprintf(moe, sizeof moe, "%s.moe.gguf", g_tmp);
    snprintf(args, sizeof args, "gen-model --preset moe-tiny --layers 2 --vocab-size 300 --act relu --active 0.15 "
             "--predictor --pred-rank 64 -o %s --bundle-out %s", moe, bundle);
    CHECK(pinfer(args, NULL, err) == 0);
    snprintf(args, sizeof args, "inspect %s", bundle);
    CHECK(pinfer(args, out, err) == 0 && t_file_has(out, "pinfer.stats.pred_hist"));
    snprintf(args, sizeof args, "run -m %s -p 'hello' -n 12 --temp 0 --recall 0.95", bundle);
    CHECK(pinfer(args, mem_out, err) == 0 && t_file_has(err, "thresholds for recall 0.95"));
    snprintf(args, sizeof args, "run -m %s -p 'hello' -n 12 --temp 0 --recall 0.99", bundle);
    CHECK(pinfer(args, out2, err) == 0 && t_file_has(err, "thresholds for recall 0.99"));
    snprintf(args, sizeof args, "run -m %s -p 'hello' -n 12 --temp 0 --recall 0.95 --mem-budget 17M --no-plan", bundle);
    CHECK(pinfer(args, out, err) == 0 && t_same_file(out, mem_out));
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "plan -m %s --mem-budget %s --hw %s -o %s", bundle, k ? "64M" : "17M", hwf, plan);
        CHECKF(pinfer(args, out, err) == 0 && t_file_has(out, "predictor thresholds for recall"), "mixture plan %d", k);
        char *pt = t_read_file(plan, NULL), *rp = pt ? strstr(pt, "\nrecall ") : NULL;
        const double r = rp ? atof(rp + strlen("\nrecall ")) : 0.0;
        free(pt);
        CHECKF(r >= 0.95 && r <= 0.99, "mixture plan %d: recall %g", k, r);
        snprintf(args, sizeof args, "run -m %s -p 'hello' -n 12 --temp 0 --recall %.17g", bundle, r);
        CHECK(pinfer(args, out2, err) == 0);
        snprintf(args, sizeof args, "run -m %s -p 'hello' -n 12 --temp 0 --plan %s", bundle, plan);
        CHECKF(pinfer(args, out, err) == 0 && t_same_file(out, out2) && t_file_has(err, "the plan's"),
               "mixture: planned run %d differs from the in-memory run", k);
    }
    snprintf(args, sizeof args, "run -m %s -p 'hello' -n 4 --recall 0.97", moe); /* the plain file: no predictors */
    CHECK(pinfer(args, NULL, err) == 1 && t_file_has(err, "no predictors"));
    unlink(moe);
    /* --plain: a file llama.cpp reads (no predictors, no ffn_down_t), the same text dense */
    char plain[320];
    snprintf(plain, sizeof plain, "%s.plain.gguf", g_tmp);
    snprintf(args, sizeof args, "convert -m %s --plain -o %s", conv, plain);
    CHECK(pinfer(args, NULL, err) == 0);
    snprintf(args, sizeof args, "inspect %s", plain);
    CHECK(pinfer(args, out, err) == 0 && t_file_has(out, "ffn_down.weight") && !t_file_has(out, "ffn_down_t") &&
          !t_file_has(out, "fc1") && !t_file_has(out, "fc2") && !t_file_has(out, "pinfer.predictor"));
    snprintf(args, sizeof args, "run -m %s -p 'hello' -n 12 --temp 0 --dense", plain);
    CHECK(pinfer(args, out, err) == 0);
    snprintf(args, sizeof args, "run -m %s -p 'hello' -n 12 --temp 0 --dense", conv);
    CHECK(pinfer(args, out2, err) == 0 && t_same_file(out, out2));
    snprintf(args, sizeof args, "convert -m %s --plain -o %s", bundle, plain);
    CHECK(pinfer(args, NULL, err) == 1 && t_file_has(err, "bundle"));
    snprintf(args, sizeof args, "convert -m %s --plain --bundle -o %s", conv, plain);
    CHECK(pinfer(args, NULL, err) == 2 && t_file_has(err, "--plain"));
    unlink(plain);
    unlink(out2);
    /* figures that may not fit the disk are flagged: an old file, another filesystem */
    struct timeval old[2] = {{time(NULL) - 90 * 86400, 0}, {time(NULL) - 90 * 86400, 0}};
    CHECK(utimes(hwf, old) == 0);
    snprintf(args, sizeof args, "plan -m %s --mem-budget %.0fK --hw %s", bundle, (min_mib + 2.0) * 1024, hwf);
    CHECK(pinfer(args, out, err) == 0 && t_file_has(err, "days old") && t_file_has(err, "pinfer hwprobe -m"));
    pi_hw hwv;
    CHECK(pi_hw_load(hwf, &hwv) == PI_OK);
    hwv.fs_dev = 12345;
    CHECK(pi_hw_save(&hwv, hwf) == PI_OK);
    CHECK(pinfer(args, out, err) == 0 && t_file_has(err, "another filesystem") && !t_file_has(err, "days old"));
    /* kernel rates from another build, or from a file that does not say */
    CHECK(t_write_hw(hwf) && pi_hw_load(hwf, &hwv) == PI_OK);
    snprintf(hwv.kernels_build, sizeof hwv.kernels_build, "0000000000000000");
    CHECK(pi_hw_save(&hwv, hwf) == PI_OK);
    CHECK(pinfer(args, out, err) == 0 && t_file_has(err, "another build of pinfer's kernels") &&
          t_file_has(err, pi_kernels_build_id()) && t_file_has(err, "pinfer hwprobe --compute -o"));
    /* hwprobe --compute measures those again and keeps the file's flash figures
       (natively only: its quick kernel pass reads 320 MiB a point; test_hwprobe
       checks the same on a tiny probe everywhere) */
    if (!t_emulated() && !T_SANITIZED) {
        char cmd2[1200];
        pi_hw after;
        snprintf(cmd2, sizeof cmd2, "hwprobe --compute --quick -t 1 -o %s", hwf);
        CHECK(pinfer(cmd2, out, err) == 0 && t_file_has(err, "memory and kernels only") &&
              pi_hw_load(hwf, &after) == PI_OK && !strcmp(after.kernels_build, pi_kernels_build_id()) &&
              !memcmp(after.read_iops, hwv.read_iops, sizeof hwv.read_iops) &&
              after.seq_read_gbs == hwv.seq_read_gbs && after.fs_dev == hwv.fs_dev);
        snprintf(cmd2, sizeof cmd2, "hwprobe --compute -o %s.none", hwf);
        CHECK(pinfer(cmd2, out, err) == 1 && t_file_has(err, "--compute keeps the flash figures") &&
              t_file_has(err, ".none"));
    }
    hwv.kernels_build[0] = '\0';
    CHECK(pi_hw_save(&hwv, hwf) == PI_OK);
    CHECK(pinfer(args, out, err) == 0 && t_file_has(err, "does not say which build"));
    /* a probe from before the reads' CPU was measured: priced at the default, and said */
    CHECK(t_write_hw(hwf) && pi_hw_load(hwf, &hwv) == PI_OK);
    hwv.read_cpu_us = 0.0;
    CHECK(pi_hw_save(&hwv, hwf) == PI_OK);
    CHECK(pinfer(args, out, err) == 0 && t_file_has(err, "the CPU time a read costs") && t_file_has(err, "2.7 us"));
    /* a probe from before the reads were measured with the cores computing: said, with the command */
    CHECK(t_write_hw(hwf) && pi_hw_load(hwf, &hwv) == PI_OK);
    hwv.read_busy_k = 0.0;
    CHECK(pi_hw_save(&hwv, hwf) == PI_OK);
    CHECK(pinfer(args, out, err) == 0 && t_file_has(err, "with the cores computing") &&
          t_file_has(err, "pinfer hwprobe -m"));
    /* a probe whose reads went into 4 KiB pages: said, with the command */
    CHECK(t_write_hw(hwf) && pi_hw_load(hwf, &hwv) == PI_OK);
    hwv.io_huge_pages = false;
    CHECK(pi_hw_save(&hwv, hwf) == PI_OK);
    CHECK(pinfer(args, out, err) == 0 && t_file_has(err, "4 KiB pages") && t_file_has(err, "pinfer hwprobe -m"));
    CHECK(t_write_hw(hwf));
    CHECK(pinfer(args, out, err) == 0 && !t_file_has(err, "another filesystem") && !t_file_has(err, "warn"));
    /* without activation counts the hot neurons are spread evenly, and the
       warning says how to get counts */
    snprintf(args, sizeof args, "convert -m %s --bundle -o %s", conv, bundle);
    CHECK(pinfer(args, NULL, err) == 0);
    snprintf(args, sizeof args, "plan -m %s --mem-budget %.0fK --hw %s", bundle, (min_mib + 0.6) * 1024, hwf);
    CHECK(pinfer(args, out, err) == 0 && t_file_has(err, "no activation counts") && t_file_has(err, "pinfer profile"));
    char *po = t_read_file(out, NULL), *hp = po ? strstr(po, "hot neurons per layer (") : NULL;
    long hot_all = 0, hot_lo = -1, hot_hi = -1;
    CHECKF(hp && sscanf(hp, "hot neurons per layer (%ld in all, %ld-%ld)", &hot_all, &hot_lo, &hot_hi) == 3,
           "no hot neuron line in: %s", po ? po : "(nothing)");
    CHECKF(hot_all > 0 && hot_hi - hot_lo <= 3, "uniform activity: hot neurons %ld-%ld per layer (%ld in all)", hot_lo,
           hot_hi, hot_all);
    free(po);
    FILE *pf = fopen(plan, "w");
    if (pf) {
        fputs("pinfer-plan 1\nthreads two\n", pf);
        fclose(pf);
    }
    snprintf(args, sizeof args, "run -m %s -p 'hello' -n 4 --plan %s", bundle, plan);
    CHECK(pinfer(args, NULL, err) == 1 && t_file_has(err, "line 2"));
    snprintf(args, sizeof args, "plan -m %s --mem-budget 1M --hw %s", bundle, hwf);
    CHECK(pinfer(args, NULL, err) == 1 && t_file_has(err, "minimum"));
    unlink(mem_out);
    unlink(plan);
    unlink(hwf);
    unlink(stats);
    unlink(bundle);
    unlink(conv);
    unlink(out);
    unlink(err);
    return t_done("test_cli");
}
