/*
 * budget.c — the memory accountant.
 */
#include "budget.h"

#include <stdint.h>

static const char *const region_names[PI_MEM_N] = {"fixed", "kv", "scratch", "io", "hot", "cold"};

const char *pi_mem_region_name(pi_mem_region r) { return r < PI_MEM_N ? region_names[r] : "?"; }

uint64_t pi_budget_used(const pi_budget *b) {
    uint64_t u = 0;
    for (int r = 0; r < PI_MEM_N; r++) u += b->used[r];
    return u;
}

uint64_t pi_budget_left(const pi_budget *b) {
    if (!b->limit) return UINT64_MAX;
    uint64_t u = pi_budget_used(b);
    return u < b->limit ? b->limit - u : 0;
}

pi_status pi_budget_charge(pi_budget *b, pi_mem_region r, uint64_t bytes, const char *what) {
    if (b->limit && bytes > pi_budget_left(b))
        return pi_error(PI_ERR_NOMEM, "memory budget of %.1f MiB exceeded: %s needs %.1f MiB, %.1f MiB are left "
                        "(%.1f MiB already used)", (double)b->limit / (1 << 20), what, (double)bytes / (1 << 20),
                        (double)pi_budget_left(b) / (1 << 20), (double)pi_budget_used(b) / (1 << 20));
    b->used[r] += bytes;
    return PI_OK;
}
