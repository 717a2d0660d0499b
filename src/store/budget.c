/*
 * budget.c — the memory accountant.
 */
#include "budget.h"

#include "base/units.h"

#include <stdint.h>
#include <stdio.h>

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
        return pi_error(PI_ERR_NOMEM, "memory budget of %s exceeded: %s needs %s, %s are left (%s already used)",
                        PI_BYTES(b->limit), what, PI_BYTES(bytes), PI_BYTES(pi_budget_left(b)),
                        PI_BYTES(pi_budget_used(b)));
    b->used[r] += bytes;
    return PI_OK;
}

pi_status pi_budget_below_minimum(const pi_budget_needs *z, uint64_t limit, int64_t n_ctx) {
    /* everything but the KV cache stays; the KV cache scales with -c */
    const uint64_t rest = z->minimum - z->kv;
    const double per_pos = n_ctx > 0 ? (double)z->kv / (double)n_ctx : 0.0;
    char lever[160] = "";
    if (per_pos > 0.0 && limit > rest) {
        int64_t fit = (int64_t)((double)(limit - rest) / per_pos) / 256 * 256;
        if (fit >= 256 && fit < n_ctx)
            snprintf(lever, sizeof lever, "; a smaller context lowers it: -c %lld fits in this budget", (long long)fit);
    }
    if (!lever[0] && per_pos > 0.0 && n_ctx > 256)
        snprintf(lever, sizeof lever, "; a smaller context lowers it (-c 256 needs %s), the rest is fixed",
                 PI_BYTES(rest + (uint64_t)(per_pos * 256.0)));
    char resident[96] = "";
    if (z->head_on_flash)
        snprintf(resident, sizeof resident, "; with the output head resident the minimum is %s",
                 PI_BYTES(z->minimum + z->head_flash));
    return pi_error(PI_ERR_NOMEM,
                    "--mem-budget %s is below this model's minimum of %s at context %lld (-c): fixed region %s "
                    "(%s), KV cache %s, scratch %s, I/O buffers %s, smallest neuron cache %s%s%s",
                    PI_BYTES(limit), PI_BYTES(z->minimum), (long long)n_ctx, PI_BYTES(z->fixed),
                    z->head_on_flash ? "attention, norms, predictors; the output head read from flash every token"
                                     : "attention, norms, predictors, output head",
                    PI_BYTES(z->kv), PI_BYTES(z->session - z->kv), PI_BYTES(z->io), PI_BYTES(z->min_cold), lever,
                    resident);
}

bool pi_budget_head_on_flash(pi_budget_needs *z, uint64_t limit) {
    if (z->head_on_flash) return true;
    if (!limit || limit >= z->minimum || !z->head_flash || z->head_flash > z->fixed) return false;
    z->fixed -= z->head_flash;
    z->minimum -= z->head_flash;
    z->head_on_flash = true;
    return true;
}
