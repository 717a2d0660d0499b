/*
 * replay_main.c — a plain main() around the libFuzzer target, so the corpus
 * runs as an ordinary test (build/<mode>/tests/test_fuzz_gguf) without clang.
 *
 *   test_fuzz_gguf FILE...   run the target on each file
 *   test_fuzz_gguf           run it on every .gguf file under the fixture
 *                            directory ($PI_MODELS_DIR or ../shared/models,
 *                            recursively) with its first 4096 truncation
 *                            prefixes (plus ~160 longer ones for files of at
 *                            most 2 MiB), and on every file in fuzz/corpus/
 *
 * Each input is copied into a heap block of exactly its size so ASan sees any
 * read past its end. Exit 0 when everything ran, 77 when there was nothing to
 * run; a finding aborts (sanitizer or trap).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SMALL_FIXTURE (2u << 20) /* longer prefixes are replayed for files up to this size */
#define PREFIX_DENSE  4096       /* every prefix below this length (header region) ... */
#define PREFIX_SPARSE 160        /* ... then about this many more per file */

static long g_runs;

static void run_buf(const uint8_t *buf, size_t n) {
    uint8_t *c = malloc(n ? n : 1);
    if (!c) {
        fprintf(stderr, "replay: out of memory\n");
        exit(1);
    }
    if (n) memcpy(c, buf, n);
    LLVMFuzzerTestOneInput(c, n);
    free(c);
    g_runs++;
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct stat sb;
    uint8_t *buf = NULL;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode)) {
        buf = malloc(sb.st_size ? (size_t)sb.st_size : 1);
        if (buf && fread(buf, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size) {
            free(buf);
            buf = NULL;
        }
        *n = (size_t)sb.st_size;
    }
    fclose(f);
    return buf;
}

/* Whole file, then (fixtures only) its truncation prefixes. */
static int run_file(const char *path, int prefixes) {
    size_t n = 0;
    uint8_t *buf = slurp(path, &n);
    if (!buf) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        return 0;
    }
    long before = g_runs;
    run_buf(buf, n);
    if (prefixes) {
        size_t dense = n < PREFIX_DENSE ? n : PREFIX_DENSE;
        for (size_t len = 0; len < dense; len++) run_buf(buf, len);
    }
    if (prefixes && n <= SMALL_FIXTURE) {
        size_t dense = n < PREFIX_DENSE ? n : PREFIX_DENSE;
        size_t stride = n > dense ? (n - dense) / PREFIX_SPARSE + 1 : 1;
        for (size_t len = dense; len < n; len += stride) run_buf(buf, len);
    }
    fprintf(stderr, "replay: %s (%zu bytes): %ld runs\n", path, n, g_runs - before);
    free(buf);
    return 1;
}

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* Run every regular file under dir (recursively) whose name ends in suffix
   ("" for all). Returns the number of files run. */
static int run_dir(const char *dir, const char *suffix, int prefixes, int depth) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int count = 0;
    struct dirent *e;
    /* Sorted order keeps the replay deterministic across machines. */
    char **names = NULL;
    size_t nn = 0, cap = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (nn == cap) {
            cap = cap ? cap * 2 : 32;
            char **p = realloc(names, cap * sizeof *p);
            if (!p) break;
            names = p;
        }
        names[nn] = strdup(e->d_name);
        if (names[nn]) nn++;
    }
    closedir(d);
    for (size_t i = 1; i < nn; i++)
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    for (size_t i = 0; i < nn; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat sb;
        if (stat(path, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode) && depth < 8)
            count += run_dir(path, suffix, prefixes, depth + 1);
        else if (S_ISREG(sb.st_mode) && has_suffix(names[i], suffix))
            count += run_file(path, prefixes);
    }
    for (size_t i = 0; i < nn; i++) free(names[i]);
    free(names);
    return count;
}

int main(int argc, char **argv) {
    clock_t t0 = clock();
    int files = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++) files += run_file(argv[i], 0);
    } else {
        const char *models = getenv("PI_MODELS_DIR");
        if (!models || !*models) models = "../shared/models";
        files += run_dir(models, ".gguf", 1, 0);
        files += run_dir("fuzz/corpus", "", 0, 0);
    }
    if (files == 0) {
        fprintf(stderr, "skip: no inputs (no fixtures under $PI_MODELS_DIR or ../shared/models, no fuzz/corpus)\n");
        return 77;
    }
    fprintf(stderr, "replay: %d files, %ld runs, %.1f s cpu\n", files, g_runs, (double)(clock() - t0) / CLOCKS_PER_SEC);
    return 0;
}
