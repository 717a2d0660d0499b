/*
 * budget.h — the memory accountant (DESIGN.md §3): every byte the engine
 * keeps resident under --mem-budget is charged to one region, and a charge
 * that would exceed the budget is refused with a message that names what
 * did not fit and how much would.
 */
#ifndef PI_STORE_BUDGET_H
#define PI_STORE_BUDGET_H

#include "base/status.h"

#include <stdint.h>

typedef enum pi_mem_region {
    PI_MEM_FIXED = 0, /* attention, norms, predictors, output head */
    PI_MEM_KV,        /* KV cache */
    PI_MEM_SCRATCH,   /* activations, logits, per-step lists */
    PI_MEM_IO,        /* I/O buffers and tables */
    PI_MEM_HOT,       /* hot prefixes of the FFN layers */
    PI_MEM_COLD,      /* neuron cache slots */
    PI_MEM_N
} pi_mem_region;

typedef struct pi_budget {
    uint64_t limit;             /* 0: unlimited (still counts) */
    uint64_t used[PI_MEM_N];
} pi_budget;

const char *pi_mem_region_name(pi_mem_region r);

/* Charge bytes to region r; PI_ERR_NOMEM naming `what` when the total would
   exceed the limit (nothing is charged then). */
pi_status pi_budget_charge(pi_budget *b, pi_mem_region r, uint64_t bytes, const char *what);
uint64_t pi_budget_used(const pi_budget *b);
uint64_t pi_budget_left(const pi_budget *b); /* UINT64_MAX when unlimited */

/* "600M", "2G", "1.5GiB", "123456" (bytes); K/M/G/T are powers of 1024, as
   in llama.cpp and most tools. PI_ERR_INVALID for anything else. */
pi_status pi_parse_size(const char *s, uint64_t *out);

#endif
