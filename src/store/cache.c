/*
 * cache.c — neuron cache: an arena of slots, a per-layer map neuron ->
 * slot, and two intrusive doubly linked recency lists over the slots (LRU
 * uses the first; SLRU: probation, protected; LFU: one per use count).
 *
 * Pinning uses epochs: a slot touched in the current epoch is pinned. Each
 * list keeps pinned slots at its most-recent end (every touch moves a slot
 * there; a demoted slot, never pinned, enters probation at the least-recent
 * end), so a list's least recent slot is unpinned whenever any of its slots
 * is, and allocation never scans: the victim is the first unpinned head in
 * list order. LFU ages at an epoch boundary (nothing pinned) once n_slots
 * allocations have passed: every count drops by one, each list moving down
 * one in order. `pinned` counts the slots touched this epoch.
 */
#include "cache.h"
#include "base/mapfile.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define N_LISTS (PI_NCACHE_LFU_MAX + 1)

struct pi_ncache {
    int64_t n_layer, n_ff, n_slots;
    size_t slot_bytes;
    uint8_t *arena;
    size_t arena_bytes;
    int32_t *map;       /* (n_layer * n_ff) slot or -1 */
    int64_t *owner;     /* (n_slots) layer * n_ff + neuron, or -1 */
    int32_t *prev, *next; /* recency lists: head = least recent, tail = most recent */
    uint8_t *list_of;   /* (n_slots) the list a slot is on: LRU 0; SLRU 0 probation, 1 protected; LFU its count */
    uint8_t *count;     /* (n_slots) LFU use count, at most PI_NCACHE_LFU_MAX */
    uint8_t *ahead;     /* (n_slots) 1: filled ahead of use (pi_ncache_alloc_ahead), not used since */
    uint32_t *epoch_of; /* (n_slots) epoch of the last touch */
    int32_t head[N_LISTS], tail[N_LISTS];
    int64_t len[N_LISTS];
    int64_t allocs;     /* LFU: allocations since the counts last aged */
    pi_ncache_policy policy;
    int64_t protected_cap;
    uint32_t epoch;
    int64_t pinned;
    int64_t lent;       /* the last `lent` slots are lent out (pi_ncache_lend): on no list */
    pi_ncache_stats st;
};

size_t pi_ncache_footprint(int64_t n_layer, int64_t n_ff, size_t slot_bytes, int64_t n_slots) {
    return (size_t)n_slots * slot_bytes + (size_t)(n_layer * n_ff) * sizeof(int32_t) +
           (size_t)n_slots * (sizeof(int64_t) + 2 * sizeof(int32_t) + sizeof(uint32_t) + 3);
}

const char *pi_ncache_policy_name(pi_ncache_policy p) {
    static const char *const names[PI_NCACHE_N_POLICIES] = {"lru", "slru", "lfu"};
    return (unsigned)p < PI_NCACHE_N_POLICIES ? names[p] : "?";
}

static void unlink_slot(pi_ncache *c, int32_t s) {
    const int l = c->list_of[s];
    int32_t p = c->prev[s], n = c->next[s];
    if (p >= 0) c->next[p] = n;
    else c->head[l] = n;
    if (n >= 0) c->prev[n] = p;
    else c->tail[l] = p;
    c->prev[s] = c->next[s] = -1;
    c->len[l]--;
}

static void push_tail(pi_ncache *c, int32_t s, int l) {
    c->list_of[s] = (uint8_t)l;
    c->prev[s] = c->tail[l];
    c->next[s] = -1;
    if (c->tail[l] >= 0) c->next[c->tail[l]] = s;
    else c->head[l] = s;
    c->tail[l] = s;
    c->len[l]++;
}

static void push_head(pi_ncache *c, int32_t s, int l) {
    c->list_of[s] = (uint8_t)l;
    c->next[s] = c->head[l];
    c->prev[s] = -1;
    if (c->head[l] >= 0) c->prev[c->head[l]] = s;
    else c->tail[l] = s;
    c->head[l] = s;
    c->len[l]++;
}

static bool pinned(const pi_ncache *c, int32_t s) { return c->epoch_of[s] == c->epoch; }

/* Pin s and make it the most recent of list l. */
static void touch(pi_ncache *c, int32_t s, int l) {
    if (!pinned(c, s)) {
        c->epoch_of[s] = c->epoch;
        c->pinned++;
    }
    unlink_slot(c, s);
    push_tail(c, s, l);
}

/* A hit: LRU refreshes; SLRU promotes to protected, demoting protected's
   least recent into probation when over its share; LFU counts. */
static void touch_hit(pi_ncache *c, int32_t s) {
    switch (c->policy) {
    case PI_NCACHE_SLRU:
        touch(c, s, 1);
        if (c->len[1] > c->protected_cap && !pinned(c, c->head[1])) {
            int32_t d = c->head[1];
            unlink_slot(c, d);
            push_head(c, d, 0);
        }
        return;
    case PI_NCACHE_LFU:
        if (c->count[s] < PI_NCACHE_LFU_MAX) c->count[s]++;
        touch(c, s, c->count[s]);
        return;
    default: touch(c, s, 0); return;
    }
}

/* The slot to replace, unpinned; -1 when every slot is pinned. */
static int32_t victim(const pi_ncache *c) {
    for (int l = 0; l < N_LISTS; l++)
        if (c->head[l] >= 0 && !pinned(c, c->head[l])) return c->head[l];
    return -1;
}

/* LFU aging: every count drops by one; list l moves, in order, to the end
   of list l - 1 (lowest first, so each list keeps its order). */
static void age(pi_ncache *c) {
    for (int l = 1; l < N_LISTS; l++)
        while (c->head[l] >= 0) {
            int32_t s = c->head[l];
            unlink_slot(c, s);
            c->count[s]--;
            push_tail(c, s, l - 1);
        }
    c->allocs = 0;
}

void pi_ncache_set_policy(pi_ncache *c, pi_ncache_policy p) {
    c->policy = (unsigned)p < PI_NCACHE_N_POLICIES ? p : PI_NCACHE_LRU;
}

pi_status pi_ncache_create(int64_t n_layer, int64_t n_ff, size_t slot_bytes, int64_t n_slots, size_t align,
                           pi_ncache **out) {
    *out = NULL;
    if (n_layer <= 0 || n_ff <= 0 || slot_bytes == 0 || n_slots <= 0 || n_slots > INT32_MAX ||
        (align && slot_bytes % align) || align > PI_HUGE_PAGE)
        return pi_error(PI_ERR_INVALID, "neuron cache: bad geometry (%lld slots of %zu bytes, alignment %zu)",
                        (long long)n_slots, slot_bytes, align);
    pi_ncache *c = calloc(1, sizeof *c);
    if (!c) return pi_error(PI_ERR_NOMEM, "neuron cache: out of memory");
    c->n_layer = n_layer;
    c->n_ff = n_ff;
    c->n_slots = n_slots;
    c->slot_bytes = slot_bytes;
    c->arena_bytes = (size_t)n_slots * slot_bytes;
    /* on a huge page (alignment up to 2 MiB) and in huge pages where the
       kernel gives them: a read into 4 KiB pages is a piece per page, and a
       bundle's 13.5 KiB or the output head's 1 MiB then take more of the
       disk's requests, and a 1 MiB read (256 pieces) more than a virtio
       queue's 254, which splits it (a harness on this virtual disk: 80-91K
       reads/s of 13.5 KiB into 4 KiB pages, 113-116K into huge pages) */
    c->arena = pi_huge_alloc(c->arena_bytes);
    c->map = malloc((size_t)(n_layer * n_ff) * sizeof *c->map);
    c->owner = malloc((size_t)n_slots * sizeof *c->owner);
    c->prev = malloc((size_t)n_slots * sizeof *c->prev);
    c->next = malloc((size_t)n_slots * sizeof *c->next);
    c->epoch_of = calloc((size_t)n_slots, sizeof *c->epoch_of);
    c->list_of = calloc((size_t)n_slots, sizeof *c->list_of);
    c->count = calloc((size_t)n_slots, sizeof *c->count);
    c->ahead = calloc((size_t)n_slots, sizeof *c->ahead);
    if (!c->arena || !c->map || !c->owner || !c->prev || !c->next || !c->epoch_of || !c->list_of || !c->count ||
        !c->ahead) {
        pi_ncache_free(c);
        return pi_error(PI_ERR_NOMEM, "neuron cache: cannot allocate %.1f MiB for %lld slots",
                        (double)pi_ncache_footprint(n_layer, n_ff, slot_bytes, n_slots) / (1 << 20),
                        (long long)n_slots);
    }
    memset(c->map, 0xff, (size_t)(n_layer * n_ff) * sizeof *c->map);
    for (int l = 0; l < N_LISTS; l++) c->head[l] = c->tail[l] = -1;
    for (int32_t s = 0; s < (int32_t)n_slots; s++) {
        c->owner[s] = -1;
        push_tail(c, s, 0);
    }
    c->protected_cap = n_slots * 3 / 4;
    c->epoch = 1;
    *out = c;
    return PI_OK;
}

void pi_ncache_free(pi_ncache *c) {
    if (!c) return;
    pi_huge_free(c->arena, c->arena_bytes);
    free(c->map);
    free(c->owner);
    free(c->prev);
    free(c->next);
    free(c->epoch_of);
    free(c->list_of);
    free(c->count);
    free(c->ahead);
    free(c);
}

int64_t pi_ncache_slots(const pi_ncache *c) { return c->n_slots; }

void *pi_ncache_arena(const pi_ncache *c, size_t *bytes) {
    if (bytes) *bytes = c->arena_bytes;
    return c->arena;
}

uint8_t *pi_ncache_slot(const pi_ncache *c, int64_t slot) { return c->arena + (size_t)slot * c->slot_bytes; }

int64_t pi_ncache_get(pi_ncache *c, int64_t layer, int64_t neuron) { return pi_ncache_use(c, layer, neuron, NULL); }

int64_t pi_ncache_use(pi_ncache *c, int64_t layer, int64_t neuron, bool *was_ahead) {
    int32_t s = c->map[layer * c->n_ff + neuron];
    if (was_ahead) *was_ahead = false;
    if (s < 0) {
        c->st.misses++;
        return -1;
    }
    if (c->ahead[s]) { /* its first use: the policy sees one use, the statistics a miss read early */
        c->ahead[s] = 0;
        if (was_ahead) *was_ahead = true;
        c->st.misses++;
        touch(c, s, c->list_of[s]);
        return s;
    }
    c->st.hits++;
    touch_hit(c, s);
    return s;
}

bool pi_ncache_contains(const pi_ncache *c, int64_t layer, int64_t neuron) {
    return c->map[layer * c->n_ff + neuron] >= 0;
}

int64_t pi_ncache_alloc(pi_ncache *c, int64_t layer, int64_t neuron) {
    int32_t s = victim(c);
    if (s < 0) return -1;
    if (c->owner[s] >= 0) {
        c->map[c->owner[s]] = -1;
        c->st.evictions++;
    }
    c->owner[s] = layer * c->n_ff + neuron;
    c->map[c->owner[s]] = s;
    c->count[s] = 0;
    c->ahead[s] = 0;
    c->allocs++;
    touch(c, s, 0); /* SLRU: on probation; LFU: count 0 */
    return s;
}

void pi_ncache_pin(pi_ncache *c, int64_t slot) {
    const int32_t s = (int32_t)slot;
    if (c->owner[s] < 0 || pinned(c, s)) return;
    c->epoch_of[s] = c->epoch;
    c->pinned++;
    /* a pinned slot sits at its list's most-recent end (victim() relies on it) */
    unlink_slot(c, s);
    push_tail(c, s, c->list_of[s]);
}

void pi_ncache_settle(pi_ncache *c, int64_t slot) { c->ahead[slot] = 0; }

int64_t pi_ncache_alloc_ahead(pi_ncache *c, int64_t layer, int64_t neuron) {
    int64_t s = pi_ncache_alloc(c, layer, neuron);
    if (s >= 0) c->ahead[s] = 1;
    return s;
}

void pi_ncache_drop(pi_ncache *c, int64_t slot) {
    int32_t s = (int32_t)slot;
    if (c->owner[s] >= 0) c->map[c->owner[s]] = -1;
    c->owner[s] = -1;
    c->ahead[s] = 0;
    if (c->epoch_of[s] == c->epoch) c->pinned--;
    c->epoch_of[s] = 0;
    c->count[s] = 0;
    unlink_slot(c, s);
    push_head(c, s, 0);
}

void pi_ncache_next_epoch(pi_ncache *c) {
    if (c->policy == PI_NCACHE_LFU && c->allocs >= c->n_slots) age(c);
    c->epoch++;
    if (c->epoch == 0) { /* wrapped: clear the old marks so none looks pinned */
        memset(c->epoch_of, 0, (size_t)c->n_slots * sizeof *c->epoch_of);
        c->epoch = 1;
    }
    c->pinned = 0;
}

int64_t pi_ncache_unpinned(const pi_ncache *c) { return c->n_slots - c->lent - c->pinned; }

uint8_t *pi_ncache_lend(pi_ncache *c, int64_t n) {
    if (c->lent || n <= 0 || n > c->n_slots) return NULL;
    for (int32_t s = (int32_t)(c->n_slots - n); s < (int32_t)c->n_slots; s++) {
        if (c->owner[s] >= 0) c->map[c->owner[s]] = -1;
        c->owner[s] = -1;
        if (pinned(c, s)) c->pinned--;
        c->epoch_of[s] = 0;
        c->ahead[s] = c->count[s] = 0;
        unlink_slot(c, s);
    }
    c->lent = n;
    return c->arena + (size_t)(c->n_slots - n) * c->slot_bytes;
}

void pi_ncache_take_back(pi_ncache *c) {
    for (int32_t s = (int32_t)(c->n_slots - c->lent); s < (int32_t)c->n_slots; s++) push_head(c, s, 0);
    c->lent = 0;
}

int64_t pi_ncache_lent(const pi_ncache *c) { return c->lent; }

void pi_ncache_get_stats(const pi_ncache *c, pi_ncache_stats *st) { *st = c->st; }
void pi_ncache_reset_stats(pi_ncache *c) { memset(&c->st, 0, sizeof c->st); }
