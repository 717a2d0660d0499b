/*
 * budget.h — the memory accountant (DESIGN.md §3): every byte the engine
 * keeps resident under --mem-budget is charged to one region, and a charge
 * that would exceed the budget is refused with a message that names what
 * did not fit and how much would.
 */
#ifndef PI_STORE_BUDGET_H
#define PI_STORE_BUDGET_H

#include "base/status.h"
#include "kernels/types.h"

#include <stdbool.h>
#include <stddef.h>

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

/* What a budget must hold for a bundle file before any hot neuron, as the
   loader charges it: sparse/offload.h measures it from a model, the
   planner (plan/plan.h) prices configurations with it. */
typedef struct pi_budget_needs {
    int64_t n_layer, n_ff, n_embd;
    int64_t n_ctx;           /* the KV cache it holds */
    uint64_t fixed;          /* resident weights: attention, norms, predictors, output head */
    uint64_t fixed_by_type[PI_TYPE_COUNT]; /* the matrices among them read every token, by type (no predictors) */
    uint64_t pred_by_type[PI_TYPE_COUNT];  /* predictor matrices, by type */
    uint64_t session, kv;    /* a session's buffers at n_ctx (KV cache, scratch, the sparse FFN's lists,
                                a mixture's expert outputs); the KV cache alone */
    uint64_t io;             /* I/O buffers and per-step tables */
    uint64_t min_cold;       /* the smallest neuron cache: min_slots, at least lend_min */
    int64_t min_slots;       /* slots a decoding step needs */
    int64_t lend_slots;      /* slots the cache lends to what streams while it is idle (a prompt's FFN:
                                two buffers and the partial sums; a head on flash: the two buffers),
                                charged once, as cache; a smaller cache lends what it has, with smaller
                                buffers */
    int64_t lend_min;        /* the fewest slots that lend buffers of a few bundles (or a head row) each */
    int max_merge;           /* bundles per read at most: neighbours merge up to this many */
    uint64_t minimum;        /* the sum: the smallest budget accepted */
    size_t stride;           /* bytes per bundle on flash and per cache slot */
    size_t bundle_mem;       /* bytes of one resident neuron (gate + up + down_t rows), the largest
                                layer's where layers differ in type */
    size_t part_bytes[3];    /* gate, up, down_t rows: the mean over layers */
    pi_type part_type[3];    /* the type most layers have */
    bool embd_on_flash;
    int64_t n_expert, n_expert_used; /* a mixture (n_layer counts its units, layer x expert); 0: dense */
    /* The output head can stay on flash and be read whole every token (in
       buffers the neuron cache lends, a piece at a time), where a budget is
       below the minimum with it resident: head_flash is what that saves, its
       bytes in the fixed region (0 where it cannot: a head tied to the
       embedding). head_on_flash: these needs are with it on flash
       (pi_budget_head_on_flash). */
    uint64_t head_flash;
    bool head_on_flash;
    int64_t head_n_rows;     /* the head's rows (with head_flash) and the bytes of each: a prefix of */
    size_t head_row_bytes;   /* them can stay resident (pi_offload_opts.head_rows) */
} pi_budget_needs;

/* Charge bytes to region r; PI_ERR_NOMEM naming `what` when the total would
   exceed the limit (nothing is charged then). */
pi_status pi_budget_charge(pi_budget *b, pi_mem_region r, uint64_t bytes, const char *what);
/* PI_ERR_NOMEM with the message for a budget below z->minimum: the parts of
   the minimum, and -c as the lever (the KV cache grows with the context: the
   largest context that fits in `limit`, or the minimum at a small one). */
pi_status pi_budget_below_minimum(const pi_budget_needs *z, uint64_t limit, int64_t n_ctx);

/* Whether a budget of `limit` (0: none) needs the output head on flash:
   below z's minimum with the head resident, and the head can stay on
   flash. The needs then become those with it on flash (fixed and minimum
   less head_flash). */
bool pi_budget_head_on_flash(pi_budget_needs *z, uint64_t limit);

/* What the first `rows` rows of a head on flash cost kept resident, as the
   loader charges them (pi_offload_opts.head_rows). */
static inline uint64_t pi_budget_head_rows_bytes(size_t row_bytes, int64_t rows) {
    return ((uint64_t)rows * row_bytes + 63) / 64 * 64;
}

uint64_t pi_budget_used(const pi_budget *b);
uint64_t pi_budget_left(const pi_budget *b); /* UINT64_MAX when unlimited */

#endif
