/*
 * cache.h — the cold region of the segmented neuron cache (DESIGN.md §3):
 * a fixed arena of equal slots, each holding one neuron bundle read from
 * flash, shared by all layers, with one of three replacement policies:
 *   LRU   the least recently used slot goes (PowerInfer-2's cold region);
 *   SLRU  two queues: a new neuron enters a probation queue and moves to a
 *         protected one (3/4 of the slots) when used again; the least recent
 *         of probation goes first, protected overflow is demoted to it — a
 *         neuron seen once cannot push out one used repeatedly;
 *   LFU   frequency with aging: a use raises a slot's count (at most
 *         PI_NCACHE_LFU_MAX), the least recent slot of the lowest count goes,
 *         and after every n_slots allocations all counts drop by one —
 *         neurons that fire often stay, old fame wears off.
 * `pinfer profile --cache-sim` replays a model's activations through each
 * (README: which wins, by how much, on which traces).
 *
 * A slot in use by the current step is pinned (its epoch equals the cache's
 * epoch) and is never evicted; pi_ncache_next_epoch() unpins everything at
 * once between steps. Lookups and allocation are O(1); the arena is
 * allocated once, aligned for O_DIRECT, and is what reads land in (it can
 * be registered with the I/O engine).
 */
#ifndef PI_STORE_CACHE_H
#define PI_STORE_CACHE_H

#include "base/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pi_ncache_stats {
    uint64_t hits, misses, evictions;
} pi_ncache_stats;

typedef struct pi_ncache pi_ncache;

typedef enum pi_ncache_policy {
    PI_NCACHE_LRU = 0,
    PI_NCACHE_SLRU = 1,
    PI_NCACHE_LFU = 2,
    PI_NCACHE_N_POLICIES
} pi_ncache_policy;

#define PI_NCACHE_LFU_MAX 3

const char *pi_ncache_policy_name(pi_ncache_policy p); /* "lru", "slru", "lfu" */

/* n_slots slots of slot_bytes (a multiple of align, at most 2 MiB) for
   neurons of n_layer layers of n_ff neurons, in an arena that starts on a
   2 MiB boundary with huge pages advised. PI_ERR_NOMEM names the size. */
pi_status pi_ncache_create(int64_t n_layer, int64_t n_ff, size_t slot_bytes, int64_t n_slots, size_t align,
                           pi_ncache **out);
void pi_ncache_free(pi_ncache *c); /* accepts NULL */

/* Replacement policy (before the first use; LRU by default). */
void pi_ncache_set_policy(pi_ncache *c, pi_ncache_policy p);

/* Bytes the cache holds in memory for these parameters (arena + tables):
   what the memory accountant charges. */
size_t pi_ncache_footprint(int64_t n_layer, int64_t n_ff, size_t slot_bytes, int64_t n_slots);

int64_t pi_ncache_slots(const pi_ncache *c);
void *pi_ncache_arena(const pi_ncache *c, size_t *bytes);
uint8_t *pi_ncache_slot(const pi_ncache *c, int64_t slot);

/* The slot holding (layer, neuron), pinned and made most recent; -1 when
   it is not cached. Counts a hit or a miss. */
int64_t pi_ncache_get(pi_ncache *c, int64_t layer, int64_t neuron);

/* pi_ncache_get, telling whether the slot was filled ahead of use
   (pi_ncache_alloc_ahead) and this is its first use: then the policy sees
   one use (no promotion) and the statistics count a miss, since the neuron
   came from flash for this use, only earlier. */
int64_t pi_ncache_use(pi_ncache *c, int64_t layer, int64_t neuron, bool *was_ahead);

/* Whether (layer, neuron) is cached; touches nothing. */
bool pi_ncache_contains(const pi_ncache *c, int64_t layer, int64_t neuron);

/* A slot for (layer, neuron), which must not be cached: the policy's victim
   among the unpinned slots (its old neuron is forgotten), pinned and most
   recent. -1 when every slot is pinned. The caller fills it, or calls
   pi_ncache_drop() if it cannot. */
int64_t pi_ncache_alloc(pi_ncache *c, int64_t layer, int64_t neuron);

/* pi_ncache_alloc for a neuron read ahead of its use (lookahead): marked so
   that its first pi_ncache_use reports it. */
int64_t pi_ncache_alloc_ahead(pi_ncache *c, int64_t layer, int64_t neuron);

/* Pin a cached slot into this epoch without counting a use (a read ahead
   still in flight across a step boundary). */
void pi_ncache_pin(pi_ncache *c, int64_t slot);

/* A slot filled ahead and not used: from now on an ordinary cached neuron. */
void pi_ncache_settle(pi_ncache *c, int64_t slot);

/* Forget what a slot holds (e.g. its read failed); it becomes the next to reuse. */
void pi_ncache_drop(pi_ncache *c, int64_t slot);

/* Unpin every slot: the step that used them is over. */
void pi_ncache_next_epoch(pi_ncache *c);

/* Slots that can still be allocated in this epoch (not pinned, not lent). */
int64_t pi_ncache_unpinned(const pi_ncache *c);

/* Lend the arena's last n slots (n <= the slot count) as one block of
   n * slot_bytes, aligned as the arena: what they held is forgotten, and no
   allocation returns them until pi_ncache_take_back(). For buffers that
   are used only while the cache is not (a prompt's streamed FFN); no read
   may be in flight into them. NULL when some are lent already. */
uint8_t *pi_ncache_lend(pi_ncache *c, int64_t n);
/* The lent slots, empty, become the next to reuse. */
void pi_ncache_take_back(pi_ncache *c);
int64_t pi_ncache_lent(const pi_ncache *c);

void pi_ncache_get_stats(const pi_ncache *c, pi_ncache_stats *st);
void pi_ncache_reset_stats(pi_ncache *c);

#endif
