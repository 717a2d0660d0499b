/*
 * test_sample.c — the sampling chain: greedy, determinism by seed, the
 * empirical distribution against softmax, and what top-k, top-p, min-p and
 * the repetition penalty keep or change.
 */
#include "sample/sample.h"
#include "test_util.h"

#define NV 50

static pi_sampler *make(pi_sampler_params p) {
    pi_sampler *s = NULL;
    CHECK(pi_sampler_create(&p, NV, &s) == PI_OK);
    return s;
}

static pi_sampler_params plain(float temp) {
    pi_sampler_params p = {temp, 0, 1.0f, 0.0f, 1.0f, 64, 7};
    return p;
}

int main(void) {
    float logits[NV];
    t_rng r = {3};
    for (int i = 0; i < NV; i++) logits[i] = t_uniform(&r) * 3.0f;
    logits[17] = 5.0f; /* the argmax */

    /* greedy, and top-k 1 at any temperature, pick the argmax */
    pi_sampler *s = make(plain(0.0f));
    CHECK(pi_sampler_sample(s, logits) == 17);
    pi_sampler_free(s);
    pi_sampler_params p = plain(1.5f);
    p.top_k = 1;
    s = make(p);
    for (int i = 0; i < 20; i++) CHECK(pi_sampler_sample(s, logits) == 17);
    pi_sampler_free(s);

    /* same seed, same sequence; reset restarts it; another seed differs */
    int32_t a[64], b[64], c[64];
    s = make(plain(1.0f));
    for (int i = 0; i < 64; i++) a[i] = pi_sampler_sample(s, logits);
    pi_sampler_reset(s);
    for (int i = 0; i < 64; i++) b[i] = pi_sampler_sample(s, logits);
    pi_sampler_free(s);
    CHECK(memcmp(a, b, sizeof a) == 0);
    p = plain(1.0f);
    p.seed = 8;
    s = make(p);
    for (int i = 0; i < 64; i++) c[i] = pi_sampler_sample(s, logits);
    pi_sampler_free(s);
    CHECK(memcmp(a, c, sizeof a) != 0);

    /* empirical frequencies follow softmax(logits / T) */
    const float T = 1.3f;
    double prob[NV], z = 0.0;
    for (int i = 0; i < NV; i++) z += (prob[i] = exp(logits[i] / T));
    for (int i = 0; i < NV; i++) prob[i] /= z;
    const int draws = 200000;
    int count[NV] = {0};
    s = make(plain(T));
    for (int i = 0; i < draws; i++) count[pi_sampler_sample(s, logits)]++;
    pi_sampler_free(s);
    double chi2 = 0.0;
    for (int i = 0; i < NV; i++) {
        double e = prob[i] * draws;
        chi2 += (count[i] - e) * (count[i] - e) / e;
    }
    /* 49 degrees of freedom: the 99.99th percentile is about 95 */
    CHECKF(chi2 < 95.0, "chi-square %.1f: frequencies do not follow softmax", chi2);

    /* top-k 5: only the five largest logits appear */
    p = plain(1.0f);
    p.top_k = 5;
    s = make(p);
    float sorted[NV];
    memcpy(sorted, logits, sizeof sorted);
    for (int i = 0; i < NV; i++)
        for (int j = i + 1; j < NV; j++)
            if (sorted[j] > sorted[i]) { float t = sorted[i]; sorted[i] = sorted[j]; sorted[j] = t; }
    int bad = 0;
    for (int i = 0; i < 5000; i++) bad += logits[pi_sampler_sample(s, logits)] < sorted[4];
    CHECK(bad == 0);
    pi_sampler_free(s);

    /* top-p: two tokens hold 0.9 of the mass; p = 0.85 keeps exactly them */
    float lp[NV];
    for (int i = 0; i < NV; i++) lp[i] = -10.0f;
    lp[3] = logf(0.5f) + 10.0f;
    lp[9] = logf(0.4f) + 10.0f;
    p = plain(1.0f);
    p.top_p = 0.85f;
    s = make(p);
    int seen3 = 0, seen9 = 0, other = 0;
    for (int i = 0; i < 5000; i++) {
        int32_t t = pi_sampler_sample(s, lp);
        seen3 += t == 3;
        seen9 += t == 9;
        other += t != 3 && t != 9;
    }
    CHECK(other == 0 && seen3 > 0 && seen9 > 0);
    pi_sampler_free(s);

    /* min-p 0.5: only tokens with p >= 0.5 * p_max survive */
    p = plain(1.0f);
    p.min_p = 0.5f;
    s = make(p);
    float lm[NV];
    for (int i = 0; i < NV; i++) lm[i] = 0.0f;
    lm[1] = 2.0f;
    lm[2] = 2.0f - 0.6f; /* ratio e^-0.6 = 0.55: kept */
    lm[4] = 2.0f - 0.8f; /* ratio e^-0.8 = 0.45: dropped */
    bad = 0;
    int kept2 = 0;
    for (int i = 0; i < 5000; i++) {
        int32_t t = pi_sampler_sample(s, lm);
        bad += t != 1 && t != 2;
        kept2 += t == 2;
    }
    CHECK(bad == 0 && kept2 > 0);
    pi_sampler_free(s);

    /* repetition penalty: a repeated argmax loses to the runner-up */
    float lr[NV];
    for (int i = 0; i < NV; i++) lr[i] = 0.0f;
    lr[5] = 2.0f;
    lr[6] = 1.5f;
    p = plain(0.0f);
    p.repeat_penalty = 1.5f;
    s = make(p);
    CHECK(pi_sampler_sample(s, lr) == 5);
    pi_sampler_accept(s, 5);
    pi_sampler_accept(s, 5); /* counted once: 2.0 / 1.5 = 1.33 < 1.5 */
    CHECK(pi_sampler_sample(s, lr) == 6);
    pi_sampler_reset(s);
    CHECK(pi_sampler_sample(s, lr) == 5);
    pi_sampler_free(s);

    /* bad parameters are refused */
    p = plain(1.0f);
    p.top_p = 0.0f;
    s = NULL;
    CHECK(pi_sampler_create(&p, NV, &s) == PI_ERR_INVALID && s == NULL);
    pi_sampler_free(NULL);
    return t_done("test_sample");
}
