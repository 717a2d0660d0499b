/*
 * test_util.h — the little every test binary shares: checks that count
 * failures, a seeded PRNG, where the shared fixtures live, temp paths.
 *
 * Exit codes follow the automake convention the runner reads:
 * 0 pass, 1 fail, 77 skip.
 */
#ifndef PI_TEST_UTIL_H
#define PI_TEST_UTIL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PI_TEST_SKIP 77

/* 1 in an ASan build: its checks on every access make the model ~10x
   slower, so long numeric runs take smaller slices there (the release suite
   runs them whole; the sanitizer suite still walks every path). */
#if defined(__SANITIZE_ADDRESS__)
#define T_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define T_SANITIZED 1
#endif
#endif
#ifndef T_SANITIZED
#define T_SANITIZED 0
#endif

/* Whether the test runs under an emulator ($PI_TEST_RUNNER non-empty, e.g.
   qemu-aarch64 for the NEON suite): the model runs 20-50x slower there, so
   repeated model runs take fewer tokens or fewer cases of the same path.
   The kernels themselves are checked whole in every suite (test_kernels,
   test_quant_k); the native suites run every case. */
static inline bool t_emulated(void) {
    const char *r = getenv("PI_TEST_RUNNER");
    return r && *r;
}

static int t_failures;
static int t_checks;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        t_checks++;                                                                    \
        if (!(cond)) {                                                                 \
            t_failures++;                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
        }                                                                              \
    } while (0)

#define CHECKF(cond, ...)                                                              \
    do {                                                                               \
        t_checks++;                                                                    \
        if (!(cond)) {                                                                 \
            t_failures++;                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
        }                                                                              \
    } while (0)

/* Finish a test binary: prints a one-line summary, returns the exit code. */
static inline int t_done(const char *name) {
    fprintf(stderr, "%s: %d checks, %d failed\n", name, t_checks, t_failures);
    return t_failures ? 1 : 0;
}

/* splitmix64: small, seedable, identical on every platform. */
typedef struct { uint64_t s; } t_rng;
static inline uint64_t t_next(t_rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* Uniform in [-1, 1). */
static inline float t_uniform(t_rng *r) { return (float)((double)(t_next(r) >> 11) * 0x1.0p-53 * 2.0 - 1.0); }
/* Approximately normal (sum of 4 uniforms, scaled). */
static inline float t_normal(t_rng *r) {
    return (t_uniform(r) + t_uniform(r) + t_uniform(r) + t_uniform(r)) * 0.8660254f;
}

/* Directory of the shared fixtures: $PI_MODELS_DIR or ../shared/models. */
static inline const char *t_models_dir(void) {
    const char *d = getenv("PI_MODELS_DIR");
    return d && *d ? d : "../shared/models";
}

/* Path of a fixture into buf; returns buf, or NULL (with a message saying it
   will be skipped) when the file is absent. */
static inline const char *t_fixture(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", t_models_dir(), name);
    if (access(buf, R_OK) != 0) {
        fprintf(stderr, "skip: fixture %s not found (set PI_MODELS_DIR)\n", buf);
        return NULL;
    }
    return buf;
}

/* A fresh path under $TMPDIR (or /tmp) unique to this process. */
/* max |got - ref| / max |ref| over n values (the absolute error when ref is all zero). */
static inline double t_rel_err(const float *got, const float *ref, int64_t n) {
    double maxref = 0.0, maxerr = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double r = fabs((double)ref[i]), e = fabs((double)got[i] - (double)ref[i]);
        if (r > maxref) maxref = r;
        if (e > maxerr) maxerr = e;
    }
    return maxref > 0.0 ? maxerr / maxref : maxerr;
}

#ifdef PI_MODEL_SESSION_H
/* Decode n tokens one at a time with both sessions (from an empty context);
   the worst relative logit error of b against a. */
static inline double t_compare_decode(pi_state *a, pi_state *b, const int32_t *toks, int n) {
    pi_state_reset(a);
    pi_state_reset(b);
    double worst = 0.0;
    const int64_t V = a->m->hp.n_vocab;
    for (int t = 0; t < n; t++) {
        CHECK(pi_state_decode(a, &toks[t], 1) == PI_OK);
        CHECK(pi_state_decode(b, &toks[t], 1) == PI_OK);
        double e = t_rel_err(pi_state_logits(b), pi_state_logits(a), V);
        if (e > worst) worst = e;
    }
    return worst;
}
#endif

/* A whole file, with a NUL after its n bytes (so text can be searched);
   NULL when it cannot be read. n may be NULL. */
static inline void *t_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *p = NULL;
    long sz = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (sz = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (p = malloc((size_t)sz + 1)) && fread(p, 1, (size_t)sz, f) == (size_t)sz) {
        p[sz] = '\0';
    } else {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (n) *n = p ? (size_t)sz : 0;
    return p;
}

/* Whether the file's text contains needle. */
static inline bool t_file_has(const char *path, const char *needle) {
    char *p = t_read_file(path, NULL);
    bool has = p && strstr(p, needle) != NULL;
    free(p);
    return has;
}

/* Whether two files hold the same bytes (false when either cannot be read). */
static inline bool t_same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *pa = t_read_file(a, &na), *pb = t_read_file(b, &nb);
    bool same = pa && pb && na == nb && !memcmp(pa, pb, na);
    free(pa);
    free(pb);
    return same;
}

/* The pinfer binary the runner names in $PI_TEST_PINFER, and the prefix to
   run it with ($PI_TEST_RUNNER, e.g. qemu-aarch64; "" when unset). False,
   with a "skip:" line, when there is none. */
static inline bool t_pinfer_binary(const char **pinfer, const char **runner) {
    *pinfer = getenv("PI_TEST_PINFER");
    *runner = getenv("PI_TEST_RUNNER");
    if (!*runner) *runner = "";
    if (!*pinfer || access(*pinfer, X_OK)) {
        fprintf(stderr, "skip: PI_TEST_PINFER does not name the pinfer binary\n");
        return false;
    }
    return true;
}

/* Run a shell command; its exit status (128 when it did not exit). */
static inline int t_sh(const char *cmd) {
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static inline const char *t_tmp_path(char *buf, size_t n, const char *stem) {
    const char *d = getenv("TMPDIR");
    snprintf(buf, n, "%s/pinfer-test-%ld-%s", d && *d ? d : "/tmp", (long)getpid(), stem);
    return buf;
}

#endif
