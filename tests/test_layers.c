/*
 * test_layers.c — the module map of DESIGN.md §6, checked on the sources:
 * every #include "..." under src/ points to the file's own module or one
 * listed above it (base, kernels, gguf, tokenizer, sample, store, model,
 * sparse, plan, api); the dense pass reads no flash (model/ includes no
 * store/) and the planner loads no model (plan/ includes neither model/ nor
 * sparse/); intrinsics headers appear only in src/kernels/; and the tools
 * that run models (run, chat, perplexity, bench, and what they share)
 * include no header under src/, only include/pinfer.h. Runs from the
 * repository root.
 */
#include "test_util.h"

#include <dirent.h>

static const char *const k_order[] = {"base", "kernels", "gguf", "tokenizer", "sample",
                                      "store", "model", "sparse", "plan", "api"};
#define N_MODULES (int)(sizeof k_order / sizeof k_order[0])

static int module_index(const char *name, size_t len) {
    for (int i = 0; i < N_MODULES; i++)
        if (strlen(k_order[i]) == len && !memcmp(k_order[i], name, len)) return i;
    return -1;
}

/* Calls fn for each #include "..." of path: the quoted name. */
static int for_includes(const char *path, void (*fn)(const char *path, const char *inc, void *ctx), void *ctx) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        const char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (strncmp(p, "#include", 8)) continue;
        p += 8;
        while (*p == ' ' || *p == '\t') p++;
        char inc[512];
        if (*p == '"' && sscanf(p + 1, "%511[^\"]", inc) == 1) fn(path, inc, ctx), n++;
        if (*p == '<' && sscanf(p + 1, "%511[^>]", inc) == 1 && strstr(inc, "intrin.h")) {
            CHECKF(!strncmp(path, "src/kernels/", 12), "%s includes <%s>: intrinsics live only in src/kernels/",
                   path, inc);
        }
    }
    fclose(f);
    return n;
}

typedef struct {
    int self; /* the including file's module */
} src_ctx;

static void check_src(const char *path, const char *inc, void *ctx) {
    const src_ctx *c = ctx;
    const char *name = !strncmp(inc, "../", 3) ? inc + 3 : inc;
    const char *slash = strchr(name, '/');
    if (!slash) return; /* the module's own header, or include/pinfer.h */
    int to = module_index(name, (size_t)(slash - name));
    CHECKF(to >= 0, "%s includes \"%s\": not a module of the map", path, inc);
    if (to < 0) return;
    CHECKF(to <= c->self, "%s (%s) includes \"%s\": includes point down the module list only", path,
           k_order[c->self], inc);
    /* narrower than the order: the dense pass reads no flash, the planner loads no model */
    static const char *const k_never[][2] = {{"model", "store"}, {"plan", "model"}, {"plan", "sparse"}};
    for (size_t i = 0; i < sizeof k_never / sizeof k_never[0]; i++)
        CHECKF(strcmp(k_order[c->self], k_never[i][0]) || strcmp(k_order[to], k_never[i][1]),
               "%s includes \"%s\": %s/ never includes %s/", path, inc, k_never[i][0], k_never[i][1]);
}

static void check_tool(const char *path, const char *inc, void *ctx) {
    (void)ctx;
    CHECKF(!strchr(inc, '/'), "%s includes \"%s\": run, chat, perplexity and bench use include/pinfer.h only", path,
           inc);
}

int main(void) {
    int files = 0, incs = 0;
    for (int m = 0; m < N_MODULES; m++) {
        char dir[64];
        snprintf(dir, sizeof dir, "src/%s", k_order[m]);
        DIR *d = opendir(dir);
        if (!d) {
            if (m == 0) {
                fprintf(stderr, "skip: run from the repository root (no src/base)\n");
                return PI_TEST_SKIP;
            }
            CHECKF(0, "module %s is missing", dir);
            continue;
        }
        for (struct dirent *e; (e = readdir(d));) {
            size_t n = strlen(e->d_name);
            if (n < 3 || (strcmp(e->d_name + n - 2, ".c") && strcmp(e->d_name + n - 2, ".h"))) continue;
            char path[512];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            src_ctx c = {m};
            incs += for_includes(path, check_src, &c);
            files++;
        }
        closedir(d);
    }
    /* every directory under src/ is a module of the map */
    DIR *d = opendir("src");
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.')
            CHECKF(module_index(e->d_name, strlen(e->d_name)) >= 0, "src/%s is not in the module map", e->d_name);
    if (d) closedir(d);
    static const char *const tools[] = {"tools/cmd_run.c", "tools/cmd_chat.c", "tools/cmd_perplexity.c",
                                        "tools/cmd_bench.c", "tools/common.c", "tools/common.h"};
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
        CHECKF(access(tools[i], R_OK) == 0, "%s is missing", tools[i]);
        incs += for_includes(tools[i], check_tool, NULL);
        files++;
    }
    fprintf(stderr, "layers: %d files, %d includes checked\n", files, incs);
    return t_done("test_layers");
}
