/*
 * sample.c — the sampling chain over a candidate array sized once.
 */
#include "sample.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t id;
    float logit;
    float p;
} cand;

struct pi_sampler {
    pi_sampler_params par;
    int64_t n_vocab;
    cand *c;          /* (n_vocab) */
    int32_t *recent;  /* ring of the last repeat_last_n tokens */
    int32_t n_recent, head;
    uint64_t rng;
};

pi_sampler_params pi_sampler_default_params(void) {
    pi_sampler_params p = {0.8f, 40, 0.95f, 0.05f, 1.0f, 64, 0x5eed};
    return p;
}

pi_status pi_sampler_create(const pi_sampler_params *p, int64_t n_vocab, pi_sampler **out) {
    if (out) *out = NULL;
    if (!p || !out) return pi_error(PI_ERR_INVALID, "pi_sampler_create: %s is NULL", !p ? "params" : "out");
    if (n_vocab <= 0 || n_vocab > (1 << 26)) return pi_error(PI_ERR_INVALID, "sampler: vocabulary of %lld", (long long)n_vocab);
    if (!(p->top_p > 0.0f) || p->min_p > 1.0f || !(p->repeat_penalty > 0.0f) || p->repeat_last_n < 0 || isnan(p->temp))
        return pi_error(PI_ERR_INVALID, "sampler: need top_p in (0, 1], min_p <= 1, repeat_penalty > 0, repeat_last_n >= 0");
    pi_sampler *s = calloc(1, sizeof *s);
    if (!s) return pi_error(PI_ERR_NOMEM, "sampler: out of memory");
    s->par = *p;
    s->n_vocab = n_vocab;
    s->c = malloc((size_t)n_vocab * sizeof *s->c);
    s->recent = malloc((size_t)(p->repeat_last_n + 1) * sizeof *s->recent);
    if (!s->c || !s->recent) {
        pi_sampler_free(s);
        return pi_error(PI_ERR_NOMEM, "sampler: out of memory");
    }
    pi_sampler_reset(s);
    *out = s;
    return PI_OK;
}

void pi_sampler_free(pi_sampler *s) {
    if (!s) return;
    free(s->c);
    free(s->recent);
    free(s);
}

void pi_sampler_reset(pi_sampler *s) {
    if (!s) return;
    s->n_recent = s->head = 0;
    s->rng = s->par.seed;
}

void pi_sampler_accept(pi_sampler *s, int32_t token) {
    if (!s) return;
    int32_t cap = s->par.repeat_last_n;
    if (cap <= 0) return;
    s->recent[s->head] = token;
    s->head = (s->head + 1) % cap;
    if (s->n_recent < cap) s->n_recent++;
}

static double next_uniform(pi_sampler *s) {
    uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

static int by_logit_desc(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id - y->id; /* ties: lower id first, so order is total and stable */
}

/* Move the k largest candidates to the front (any order): quickselect. */
static void select_top(cand *c, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        cand pivot = c[lo + (hi - lo) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (by_logit_desc(&c[i], &pivot) < 0) i++;
            while (by_logit_desc(&c[j], &pivot) > 0) j--;
            if (i <= j) {
                cand t = c[i];
                c[i++] = c[j];
                c[j--] = t;
            }
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else break;
    }
}

int32_t pi_sampler_sample(pi_sampler *s, const float *logits) {
    if (!s || !logits) {
        pi_error(PI_ERR_INVALID, "pi_sampler_sample: %s is NULL", !s ? "the sampler" : "logits");
        return -1;
    }
    const pi_sampler_params *p = &s->par;
    int64_t n = s->n_vocab;
    cand *c = s->c;
    for (int64_t i = 0; i < n; i++) c[i] = (cand){(int32_t)i, logits[i], 0.0f};
    if (p->repeat_penalty != 1.0f) {
        for (int32_t r = 0; r < s->n_recent; r++) {
            int32_t id = s->recent[r];
            if (id < 0 || id >= n) continue;
            /* each distinct token is penalised once, however often it occurred */
            bool seen = false;
            for (int32_t q = 0; q < r && !seen; q++) seen = s->recent[q] == id;
            if (seen) continue;
            float *l = &c[id].logit;
            *l = *l > 0.0f ? *l / p->repeat_penalty : *l * p->repeat_penalty;
        }
    }
    if (p->temp <= 0.0f) {
        int64_t best = 0;
        for (int64_t i = 1; i < n; i++)
            if (c[i].logit > c[best].logit) best = i;
        return c[best].id;
    }
    /* top-k (then sort the survivors: top-p and min-p need them in order) */
    if (p->top_k > 0 && p->top_k < n) {
        select_top(c, n, p->top_k);
        n = p->top_k;
    }
    qsort(c, (size_t)n, sizeof *c, by_logit_desc);
    /* probabilities at temperature 1 for the truncation rules */
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += exp((double)c[i].logit - c[0].logit);
    if (p->top_p < 1.0f) {
        double cum = 0.0;
        int64_t keep = n;
        for (int64_t i = 0; i < n; i++) {
            cum += exp((double)c[i].logit - c[0].logit) / sum;
            if (cum >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    if (p->min_p > 0.0f) {
        /* keep tokens whose probability is at least min_p times the top one */
        double cut = (double)c[0].logit + log((double)p->min_p);
        int64_t keep = 1;
        while (keep < n && (double)c[keep].logit >= cut) keep++;
        n = keep;
    }
    /* temperature, then draw */
    double total = 0.0;
    for (int64_t i = 0; i < n; i++) total += (c[i].p = (float)exp(((double)c[i].logit - c[0].logit) / p->temp));
    double u = next_uniform(s) * total, acc = 0.0;
    for (int64_t i = 0; i < n; i++) {
        acc += c[i].p;
        if (u < acc) return c[i].id;
    }
    return c[n - 1].id;
}
