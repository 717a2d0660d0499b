/*
 * budget.c — the memory accountant.
 */
#include "budget.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

pi_status pi_parse_size(const char *s, uint64_t *out) {
    char *end;
    if (!s || !isdigit((unsigned char)*s)) return pi_error(PI_ERR_INVALID, "'%s' is not a size (e.g. 600M, 2G)", s ? s : "");
    double v = strtod(s, &end);
    double mul = 1.0;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1024.0; end++; break;
    case 'M': mul = 1024.0 * 1024; end++; break;
    case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (mul > 1.0 && (!strcasecmp(end, "iB") || !strcasecmp(end, "B"))) end += strlen(end);
    else if (mul == 1.0 && !strcasecmp(end, "B")) end++;
    if (*end || !isfinite(v) || v * mul >= 1.8e19)
        return pi_error(PI_ERR_INVALID, "'%s' is not a size (e.g. 600M, 2G)", s);
    *out = (uint64_t)(v * mul);
    return PI_OK;
}
