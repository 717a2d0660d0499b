/*
 * test_moe.h — a fixture helper shared by the suites that run a mixture of
 * experts from flash (test_bundle, test_offload).
 */
#ifndef PI_TEST_MOE_H
#define PI_TEST_MOE_H

#include "model/model.h"
#include "sparse/predictor.h"
#include "test_util.h"

/* src (a mixture) with random per-expert predictors of rank 16 and
   threshold 0 (about half of each expert's neurons selected) written to
   dst: what a budget moves between memory and flash does not depend on
   them, nor does a shape check. */
static inline bool t_moe_with_predictors(const char *src, const char *dst) {
    pi_lm *m = NULL;
    if (pi_lm_load(src, PI_MAP_FILE, &m)) return false;
    const int64_t U = pi_ffn_units(&m->hp), E = m->hp.n_embd, F = m->hp.n_ff, R = 16;
    pi_predictor P = {U, E, F, m->hp.n_expert, 0.9f, (pi_pred_layer *)calloc((size_t)U, sizeof(pi_pred_layer))};
    t_rng r = {11};
    bool ok = P.layers != NULL;
    for (int64_t u = 0; ok && u < U; u++) {
        pi_pred_layer *L = &P.layers[u];
        L->rank = R;
        L->fc1 = (float *)malloc((size_t)(R * E) * sizeof(float));
        L->fc2 = (float *)malloc((size_t)(F * R) * sizeof(float));
        ok = L->fc1 && L->fc2;
        for (int64_t i = 0; ok && i < R * E; i++) L->fc1[i] = 0.5f * t_uniform(&r);
        for (int64_t i = 0; ok && i < F * R; i++) L->fc2[i] = 0.5f * t_uniform(&r);
    }
    ok = ok && pi_pred_save(&P, m, dst) == PI_OK;
    for (int64_t u = 0; P.layers && u < U; u++) {
        free(P.layers[u].fc1);
        free(P.layers[u].fc2);
    }
    free(P.layers);
    pi_lm_free(m);
    return ok;
}

#endif
