/*
 * fuzz_stats.c — libFuzzer target for the statistics file (sparse/stats.h):
 * the GGUF reader, then the stats loader's checks of its keys, tensors,
 * counts, temporal reuse shares and activation masks. An accepted file is
 * queried through every function the reorder step and the planner use. Replayed by
 * fuzz/replay_main.c in `make test`.
 */
#include "gguf/gguf.h"
#include "sparse/stats.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile double g_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pi_gguf *g = NULL;
    if (pi_gguf_open_mem(size ? data : (const uint8_t *)"", size, &g) != PI_OK) return 0;
    pi_stats *st = NULL;
    if (pi_stats_from_gguf(g, "fuzz", &st) == PI_OK) {
        double sum = 0.0;
        int32_t *perm = malloc((size_t)st->n_ff * sizeof *perm);
        for (int64_t l = 0; l < st->n_layer; l++) {
            sum += pi_stats_mean_active(st, l) + pi_stats_coverage(st, l, st->n_ff / 2) +
                   (double)pi_stats_neurons_for(st, l, 0.8) + (double)pi_stats_never_active(st, l);
            for (int k = 1; k <= PI_STATS_REUSE_K; k++) sum += pi_stats_reuse(st, l, k);
            sum += pi_stats_reuse_independent(st, l, 1);
            if (perm && pi_stats_order_coact(st, l, PI_STATS_COACT_AUTO, perm) == PI_OK)
                sum += perm[0] + perm[st->n_ff - 1];
        }
        free(perm);
        g_sink = sum;
        pi_stats_free(st);
    }
    pi_gguf_close(g);
    return 0;
}
