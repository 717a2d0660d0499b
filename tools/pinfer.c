/*
 * pinfer.c — entry point of the `pinfer` command: dispatches to subcommands.
 */
#include "args.h"
#include "cmds.h"
#include "pinfer.h"
#include "base/cpu.h"
#include "kernels/kernels.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *usage;
} command;

static const command k_commands[] = {
    {"run", cmd_run, "run -m FILE -p PROMPT    complete a prompt (-n N tokens; sampling options)"},
    {"chat", cmd_chat, "chat -m FILE            interactive chat using the model's chat template"},
    {"perplexity", cmd_perplexity, "perplexity -m FILE --text FILE   perplexity over a text in windows of -c"},
    {"quantize", cmd_quantize, "quantize IN OUT TYPE     weights in another type by llama-quantize's recipes (q4_k_m, q6_k, ...)"},
    {"serve", cmd_serve, "serve -m FILE           an OpenAI-compatible HTTP server with a chat page (--port, -np, --api-key)"},
    {"bench", cmd_bench, "bench -m FILE           prompt and decode tok/s vs the bandwidth bound (--peer llama-bench)"},
    {"tokenize", cmd_tokenize, "tokenize -m FILE TEXT   a text's token ids and pieces (--ids, --no-bos, --special, -f FILE)"},
    {"profile", cmd_profile, "profile -m FILE -o STATS  per-neuron FFN activation counts (--text FILE or sampled tokens)"},
    {"train-predictor", cmd_train_predictor, "train-predictor -m FILE --text FILE -o OUT  per-layer activation predictors"},
    {"inspect", cmd_inspect, "inspect FILE            print a GGUF file's metadata and tensors"},
    {"bench-kernels", cmd_bench_kernels, "bench-kernels [opts]    matvec throughput per type vs memory bandwidth"},
    {"plan", cmd_plan, "plan -m FILE --mem-budget S   the fastest configuration under a memory budget, and its speed"},
    {"hwprobe", cmd_hwprobe, "hwprobe [-m FILE | --dir DIR]   measure memory, kernels and flash for the planner (--quick)"},
    {"bench-io", cmd_bench_io, "bench-io FILE           random O_DIRECT read throughput; --bundle B: padded vs packed layout"},
    {"gen-model", cmd_gen_model, "gen-model -o FILE       write a llama GGUF with random weights (--preset 7b-l8)"},
    {"convert", cmd_convert, "convert ...             llama2.c checkpoint -> GGUF; --reorder STATS; --bundle for --mem-budget"},
};

static void usage(FILE *f) {
    fprintf(f, "pinfer %s — sparse LLM inference beyond memory (PowerInfer-2 design)\n\n", PI_VERSION_STRING);
    fprintf(f, "usage: pinfer COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        fprintf(f, "  %s\n", k_commands[i].usage);
    fprintf(f, "  version                 print version, CPU features and kernel set\n");
    fprintf(f, "\n`pinfer COMMAND --help` describes a command's options.\n");
}

/* A command's output reached stdout, or its exit status says it did not:
   a full disk or /dev/full must not look like success. */
static int finish_stdout(const char *cmd, int rc) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout) && fclose(stdout) == 0) return rc;
    fprintf(stderr, "pinfer: %s: cannot write to standard output: %s\n", cmd, errno ? strerror(errno) : "write error");
    return rc ? rc : 1;
}

int main(int argc, char **argv) {
    /* A write past `ulimit -f` fails with EFBIG (and the output's temporary
       is removed) instead of killing the process mid-file. */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return finish_stdout("help", argc < 2 ? 2 : 0);
    }
    if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
        printf("pinfer %s\ncpu: %s\nkernels: %s\n", PI_VERSION_STRING, pi_cpu_describe(), pi_kernels_get()->name);
        return finish_stdout("version", 0);
    }
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++) {
        if (strcmp(argv[1], k_commands[i].name)) continue;
        int n = argc - 1;
        char **args = arg_normalize(&n, argv + 1);
        if (!args) {
            fprintf(stderr, "pinfer: out of memory\n");
            return 1;
        }
        const int rc = k_commands[i].fn(n, args);
        free(args);
        return finish_stdout(k_commands[i].name, rc);
    }
    fprintf(stderr, "pinfer: unknown command '%s'; see pinfer --help\n", argv[1]);
    return 2;
}
