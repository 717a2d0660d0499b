/*
 * cache.c — neuron cache: an arena of slots, a per-layer map neuron ->
 * slot, and an intrusive doubly linked LRU list over the slots.
 *
 * Pinning uses epochs: a slot touched in the current epoch is pinned. The
 * LRU list keeps pinned slots at the most-recent end (every touch moves a
 * slot there), so the least recent slot is unpinned whenever any is, and
 * allocation never scans. `pinned` counts the slots touched this epoch.
 */
#include "cache.h"

#include <stdlib.h>
#include <string.h>

struct pi_ncache {
    int64_t n_layer, n_ff, n_slots;
    size_t slot_bytes;
    uint8_t *arena;
    size_t arena_bytes;
    int32_t *map;       /* (n_layer * n_ff) slot or -1 */
    int64_t *owner;     /* (n_slots) layer * n_ff + neuron, or -1 */
    int32_t *prev, *next; /* LRU list: head = least recent, tail = most recent */
    uint32_t *epoch_of; /* (n_slots) epoch of the last touch */
    int32_t head, tail;
    uint32_t epoch;
    int64_t pinned;
    pi_ncache_stats st;
};

size_t pi_ncache_footprint(int64_t n_layer, int64_t n_ff, size_t slot_bytes, int64_t n_slots) {
    return (size_t)n_slots * slot_bytes + (size_t)(n_layer * n_ff) * sizeof(int32_t) +
           (size_t)n_slots * (sizeof(int64_t) + 2 * sizeof(int32_t) + sizeof(uint32_t));
}

static void unlink_slot(pi_ncache *c, int32_t s) {
    int32_t p = c->prev[s], n = c->next[s];
    if (p >= 0) c->next[p] = n;
    else c->head = n;
    if (n >= 0) c->prev[n] = p;
    else c->tail = p;
    c->prev[s] = c->next[s] = -1;
}

static void push_tail(pi_ncache *c, int32_t s) {
    c->prev[s] = c->tail;
    c->next[s] = -1;
    if (c->tail >= 0) c->next[c->tail] = s;
    else c->head = s;
    c->tail = s;
}

static void push_head(pi_ncache *c, int32_t s) {
    c->next[s] = c->head;
    c->prev[s] = -1;
    if (c->head >= 0) c->prev[c->head] = s;
    else c->tail = s;
    c->head = s;
}

/* Pin s and make it the most recent. */
static void touch(pi_ncache *c, int32_t s) {
    if (c->epoch_of[s] != c->epoch) {
        c->epoch_of[s] = c->epoch;
        c->pinned++;
    }
    unlink_slot(c, s);
    push_tail(c, s);
}

pi_status pi_ncache_create(int64_t n_layer, int64_t n_ff, size_t slot_bytes, int64_t n_slots, size_t align,
                           pi_ncache **out) {
    *out = NULL;
    if (n_layer <= 0 || n_ff <= 0 || slot_bytes == 0 || n_slots <= 0 || n_slots > INT32_MAX ||
        (align && slot_bytes % align))
        return pi_error(PI_ERR_INVALID, "neuron cache: bad geometry (%lld slots of %zu bytes, alignment %zu)",
                        (long long)n_slots, slot_bytes, align);
    pi_ncache *c = calloc(1, sizeof *c);
    if (!c) return pi_error(PI_ERR_NOMEM, "neuron cache: out of memory");
    c->n_layer = n_layer;
    c->n_ff = n_ff;
    c->n_slots = n_slots;
    c->slot_bytes = slot_bytes;
    c->arena_bytes = (size_t)n_slots * slot_bytes;
    if (align < 64) align = 64;
    void *arena = NULL;
    if (posix_memalign(&arena, align, c->arena_bytes)) arena = NULL;
    c->arena = arena;
    c->map = malloc((size_t)(n_layer * n_ff) * sizeof *c->map);
    c->owner = malloc((size_t)n_slots * sizeof *c->owner);
    c->prev = malloc((size_t)n_slots * sizeof *c->prev);
    c->next = malloc((size_t)n_slots * sizeof *c->next);
    c->epoch_of = calloc((size_t)n_slots, sizeof *c->epoch_of);
    if (!c->arena || !c->map || !c->owner || !c->prev || !c->next || !c->epoch_of) {
        pi_ncache_free(c);
        return pi_error(PI_ERR_NOMEM, "neuron cache: cannot allocate %.1f MiB for %lld slots",
                        (double)pi_ncache_footprint(n_layer, n_ff, slot_bytes, n_slots) / (1 << 20),
                        (long long)n_slots);
    }
    memset(c->map, 0xff, (size_t)(n_layer * n_ff) * sizeof *c->map);
    c->head = c->tail = -1;
    for (int32_t s = 0; s < (int32_t)n_slots; s++) {
        c->owner[s] = -1;
        push_tail(c, s);
    }
    c->epoch = 1;
    *out = c;
    return PI_OK;
}

void pi_ncache_free(pi_ncache *c) {
    if (!c) return;
    free(c->arena);
    free(c->map);
    free(c->owner);
    free(c->prev);
    free(c->next);
    free(c->epoch_of);
    free(c);
}

int64_t pi_ncache_slots(const pi_ncache *c) { return c->n_slots; }

void *pi_ncache_arena(const pi_ncache *c, size_t *bytes) {
    if (bytes) *bytes = c->arena_bytes;
    return c->arena;
}

uint8_t *pi_ncache_slot(const pi_ncache *c, int64_t slot) { return c->arena + (size_t)slot * c->slot_bytes; }

int64_t pi_ncache_get(pi_ncache *c, int64_t layer, int64_t neuron) {
    int32_t s = c->map[layer * c->n_ff + neuron];
    if (s < 0) {
        c->st.misses++;
        return -1;
    }
    c->st.hits++;
    touch(c, s);
    return s;
}

int64_t pi_ncache_alloc(pi_ncache *c, int64_t layer, int64_t neuron) {
    int32_t s = c->head;
    if (s < 0 || c->epoch_of[s] == c->epoch) return -1; /* the least recent is pinned: all are */
    if (c->owner[s] >= 0) {
        c->map[c->owner[s]] = -1;
        c->st.evictions++;
    }
    c->owner[s] = layer * c->n_ff + neuron;
    c->map[c->owner[s]] = s;
    touch(c, s);
    return s;
}

void pi_ncache_drop(pi_ncache *c, int64_t slot) {
    int32_t s = (int32_t)slot;
    if (c->owner[s] >= 0) c->map[c->owner[s]] = -1;
    c->owner[s] = -1;
    if (c->epoch_of[s] == c->epoch) c->pinned--;
    c->epoch_of[s] = 0;
    unlink_slot(c, s);
    push_head(c, s);
}

void pi_ncache_next_epoch(pi_ncache *c) {
    c->epoch++;
    if (c->epoch == 0) { /* wrapped: clear the old marks so none looks pinned */
        memset(c->epoch_of, 0, (size_t)c->n_slots * sizeof *c->epoch_of);
        c->epoch = 1;
    }
    c->pinned = 0;
}

int64_t pi_ncache_unpinned(const pi_ncache *c) { return c->n_slots - c->pinned; }

void pi_ncache_get_stats(const pi_ncache *c, pi_ncache_stats *st) { *st = c->st; }
void pi_ncache_reset_stats(pi_ncache *c) { memset(&c->st, 0, sizeof c->st); }
