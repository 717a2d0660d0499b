/*
 * fuzz_plan.c — libFuzzer target for the plan file parser (plan/plan.h).
 *
 * Any input must be either refused with a message or give a plan whose
 * fields are in range; under ASan and UBSan any out-of-bounds read, crash
 * or leak is a finding. Replayed by fuzz/replay_main.c in `make test`.
 */
#include "plan/plan.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pi_plan p;
    if (pi_plan_parse(size ? (const char *)data : "", size, &p) != PI_OK) return 0;
    if (p.n_layer < 1 || p.n_layer > PI_PLAN_MAX_LAYERS || p.threads < 1 || p.queue_depth < 1) abort();
    for (int64_t l = 0; l < p.n_layer; l++)
        if (p.hot[l] < 0) abort();
    return 0;
}
