/*
 * test_cache.c — the neuron cache (store/cache.h) against a slow reference
 * of each replacement policy on random traces with pinning epochs, and the
 * behaviour each policy exists for.
 */
#include "sparse/cachesim.h"
#include "base/mapfile.h"
#include "store/cache.h"
#include "test_util.h"

/* ---- a slow reference: every slot's list, recency stamp and count ---- */

enum { NL = 3, NF = 50, MAXS = 64 };

typedef struct {
    int policy, n;
    int64_t owner[MAXS];
    int list[MAXS];
    int64_t stamp[MAXS]; /* larger: more recent */
    int count[MAXS];
    bool pin[MAXS];
    int64_t clock, low; /* stamps for the most recent end, and for the least recent end */
    int64_t allocs;
} ref;

static void ref_init(ref *r, int policy, int n) {
    memset(r, 0, sizeof *r);
    r->policy = policy, r->n = n;
    for (int s = 0; s < n; s++) r->owner[s] = -1, r->stamp[s] = ++r->clock;
}

static int ref_find(const ref *r, int64_t key) {
    for (int s = 0; s < r->n; s++)
        if (r->owner[s] == key) return s;
    return -1;
}

static int ref_oldest(const ref *r, int list, bool unpinned_only) {
    int best = -1;
    for (int s = 0; s < r->n; s++)
        if (r->list[s] == list && (!unpinned_only || !r->pin[s]) && (best < 0 || r->stamp[s] < r->stamp[best]))
            best = s;
    return best;
}

static int ref_len(const ref *r, int list) {
    int n = 0;
    for (int s = 0; s < r->n; s++) n += r->list[s] == list;
    return n;
}

static int ref_get(ref *r, int64_t key) {
    int s = ref_find(r, key);
    if (s < 0) return -1;
    r->pin[s] = true;
    r->stamp[s] = ++r->clock;
    if (r->policy == PI_NCACHE_SLRU) {
        r->list[s] = 1;
        int h = ref_oldest(r, 1, false);
        if (ref_len(r, 1) > r->n * 3 / 4 && !r->pin[h]) r->list[h] = 0, r->stamp[h] = --r->low;
    } else if (r->policy == PI_NCACHE_LFU) {
        if (r->count[s] < PI_NCACHE_LFU_MAX) r->count[s]++;
        r->list[s] = r->count[s];
    }
    return s;
}

static int ref_alloc(ref *r, int64_t key) {
    /* the least recent unpinned slot of the first list whose least recent is unpinned */
    int s = -1;
    for (int l = 0; l <= PI_NCACHE_LFU_MAX && s < 0; l++) {
        int h = ref_oldest(r, l, false);
        if (h >= 0 && !r->pin[h]) s = h;
    }
    if (s < 0) return -1;
    r->owner[s] = key, r->count[s] = 0, r->list[s] = 0, r->pin[s] = true, r->stamp[s] = ++r->clock;
    r->allocs++;
    return s;
}

/* An epoch boundary: LFU ages after n allocations (lists move down in order). */
static void ref_epoch(ref *r) {
    for (int s = 0; s < r->n; s++) r->pin[s] = false;
    if (r->policy != PI_NCACHE_LFU || r->allocs < r->n) return;
    for (int l = 1; l <= PI_NCACHE_LFU_MAX; l++)
        for (int h; (h = ref_oldest(r, l, false)) >= 0;) r->list[h] = l - 1, r->count[h]--, r->stamp[h] = ++r->clock;
    r->allocs = 0;
}

static void ref_drop(ref *r, int s) {
    r->owner[s] = -1, r->count[s] = 0, r->list[s] = 0, r->pin[s] = false, r->stamp[s] = --r->low;
}

/* Random traces: lookups of a skewed key set, allocations on a miss, a few
   drops, epochs of varying length; the cache and the reference must agree on
   every slot returned. */
static void test_against_reference(pi_ncache_policy policy) {
    for (int trial = 0; trial < 20; trial++) {
        t_rng rng = {(uint64_t)(trial * 7 + policy + 1)};
        const int n = 4 + (int)(t_next(&rng) % (MAXS - 4));
        pi_ncache *c = NULL;
        CHECK(pi_ncache_create(NL, NF, 64, n, 64, &c) == PI_OK);
        if (!c) return;
        pi_ncache_set_policy(c, policy);
        ref r;
        ref_init(&r, policy, n);
        int64_t hits = 0, misses = 0;
        bool same = true;
        for (int op = 0; op < 4000 && same; op++) {
            const uint64_t x = t_next(&rng);
            if (x % 17 == 0) { /* next epoch */
                pi_ncache_next_epoch(c);
                ref_epoch(&r);
                continue;
            }
            /* keys: a hot few and a long tail */
            const int64_t layer = (int64_t)((x >> 8) % NL), neuron = (x >> 16) % 4 ? (int64_t)((x >> 24) % 8)
                                                                                     : (int64_t)((x >> 24) % NF);
            const int64_t key = layer * NF + neuron;
            int64_t got = pi_ncache_get(c, layer, neuron);
            int want = ref_get(&r, key);
            same &= got == want;
            if (got >= 0) {
                hits++;
                continue;
            }
            misses++;
            got = pi_ncache_alloc(c, layer, neuron);
            want = ref_alloc(&r, key);
            same &= got == want;
            if (got >= 0 && (x >> 40) % 23 == 0) { /* a failed read */
                pi_ncache_drop(c, got);
                ref_drop(&r, (int)got);
            }
        }
        CHECKF(same, "%s: trial %d (%d slots) diverges from the reference", pi_ncache_policy_name(policy), trial, n);
        pi_ncache_stats st;
        pi_ncache_get_stats(c, &st);
        CHECK(st.hits == (uint64_t)hits && st.misses == (uint64_t)misses);
        pi_ncache_free(c);
    }
}

/* Pinned slots are never taken; with every slot pinned, alloc says so. */
static void test_pinning(pi_ncache_policy policy) {
    pi_ncache *c = NULL;
    CHECK(pi_ncache_create(1, 100, 64, 8, 64, &c) == PI_OK);
    if (!c) return;
    pi_ncache_set_policy(c, policy);
    int64_t slot[8];
    for (int i = 0; i < 8; i++) slot[i] = pi_ncache_alloc(c, 0, i);
    bool distinct = true;
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < i; j++) distinct &= slot[i] != slot[j] && slot[i] >= 0;
    CHECK(distinct && pi_ncache_unpinned(c) == 0);
    CHECK(pi_ncache_alloc(c, 0, 50) == -1);
    for (int i = 0; i < 8; i++) CHECK(pi_ncache_get(c, 0, i) == slot[i]);
    pi_ncache_next_epoch(c);
    CHECK(pi_ncache_unpinned(c) == 8);
    /* pin half again: the new neurons only take the other half */
    for (int i = 0; i < 4; i++) pi_ncache_get(c, 0, i);
    for (int i = 0; i < 4; i++) {
        int64_t s = pi_ncache_alloc(c, 0, 60 + i);
        bool other = s >= 0;
        for (int j = 0; j < 4; j++) other &= s != slot[j];
        CHECKF(other, "%s: a pinned slot was replaced", pi_ncache_policy_name(policy));
    }
    CHECK(pi_ncache_alloc(c, 0, 70) == -1);
    for (int i = 0; i < 4; i++) CHECK(pi_ncache_get(c, 0, i) == slot[i]);
    pi_ncache_free(c);
}

/* What each policy is for: an established working set (used in 10 steps in
   a row) survives later scans of neurons used once under SLRU and LFU; LRU
   loses it. */
static void test_scan_resistance(void) {
    double kept[PI_NCACHE_N_POLICIES];
    for (int p = 0; p < PI_NCACHE_N_POLICIES; p++) {
        pi_ncache *c = NULL;
        CHECK(pi_ncache_create(1, 10000, 64, 40, 64, &c) == PI_OK);
        if (!c) return;
        pi_ncache_set_policy(c, (pi_ncache_policy)p);
        int64_t hits = 0, tries = 0, fresh = 100;
        for (int step = 0; step < 200; step++) {
            for (int i = 0; i < 20; i++) { /* the working set, in a step of its own */
                tries += step >= 100;
                if (pi_ncache_get(c, 0, i) >= 0) hits += step >= 100;
                else pi_ncache_alloc(c, 0, i);
            }
            pi_ncache_next_epoch(c);
            for (int k = 0; k < (step < 10 ? 0 : 3); k++) { /* then three steps of 15 neurons never seen before */
                for (int i = 0; i < 15; i++, fresh++)
                    if (pi_ncache_get(c, 0, fresh) < 0) pi_ncache_alloc(c, 0, fresh);
                pi_ncache_next_epoch(c);
            }
        }
        kept[p] = (double)hits / (double)tries;
        pi_ncache_free(c);
    }
    CHECKF(kept[PI_NCACHE_LRU] < 0.5, "lru keeps %.2f of the working set", kept[PI_NCACHE_LRU]);
    CHECKF(kept[PI_NCACHE_SLRU] > 0.95, "slru keeps %.2f of the working set", kept[PI_NCACHE_SLRU]);
    CHECKF(kept[PI_NCACHE_LFU] > 0.95, "lfu keeps %.2f of the working set", kept[PI_NCACHE_LFU]);
}

/* The trace replay: a fixed cold set is all hits once warm; a cache smaller
   than one token's neurons refuses; the hot set never reaches the cache. */
static void test_replay(void) {
    enum { L = 2, F = 64, T = 100 };
    pi_trace *tr = NULL;
    pi_stats *st = NULL;
    CHECK(pi_trace_create(L, F, T, 0.0f, &tr) == PI_OK && pi_stats_create(L, F, 0.0f, "", &st) == PI_OK);
    if (!tr || !st) goto done;
    t_rng rng = {3};
    float act[F];
    for (int t = 0; t < T; t++)
        for (int l = 0; l < L; l++) {
            /* neurons 0..7 always (the hot set), 8..15 always (a cold working set), a random few of the rest */
            for (int i = 0; i < F; i++) act[i] = i < 16 || t_next(&rng) % 16 == 0 ? 1.0f : 0.0f;
            pi_trace_observe(tr, l, t, NULL, act);
            pi_stats_observe(st, l, t, NULL, act);
        }
    CHECK(tr->n_tok == T);
    pi_cachesim_result r;
    /* every neuron hot: nothing to look up */
    CHECK(pi_cachesim_run(tr, st, 1.0, 16, PI_NCACHE_LRU, 0.2, &r) == PI_OK && r.cold_per_tok == 0.0);
    for (int p = 0; p < PI_NCACHE_N_POLICIES; p++) {
        /* room for every cold neuron: only first uses miss */
        CHECK(pi_cachesim_run(tr, st, 8.0 / F, L * F, (pi_ncache_policy)p, 0.2, &r) == PI_OK);
        CHECKF(r.hit_rate > 0.95 && r.refused == 0.0, "%s: hit rate %.3f with room for all",
               pi_ncache_policy_name((pi_ncache_policy)p), r.hit_rate);
        /* two slots for a token's ~22 cold neurons: refusals */
        CHECK(pi_cachesim_run(tr, st, 8.0 / F, 2, (pi_ncache_policy)p, 0.2, &r) == PI_OK && r.refused > 0.5);
    }
    CHECKF(fabs(r.cold_per_tok - L * (8 + 48.0 / 16)) < 3.0, "cold neurons per token %.1f", r.cold_per_tok);
done:
    pi_trace_free(tr);
    pi_stats_free(st);
}

/* Slots filled ahead: not a hit on first use, an ordinary entry after it or
   after settling; pinning keeps one across a step boundary. */
static void test_ahead(pi_ncache_policy policy) {
    pi_ncache *c = NULL;
    CHECK(pi_ncache_create(2, 50, 64, 4, 64, &c) == PI_OK);
    if (!c) return;
    pi_ncache_set_policy(c, policy);
    CHECK(!pi_ncache_contains(c, 1, 7));
    const int64_t a = pi_ncache_alloc_ahead(c, 1, 7), b = pi_ncache_alloc_ahead(c, 1, 8);
    CHECK(a >= 0 && b >= 0 && a != b && pi_ncache_contains(c, 1, 7) && !pi_ncache_contains(c, 0, 7));
    pi_ncache_stats st0, st1;
    pi_ncache_get_stats(c, &st0);
    pi_ncache_next_epoch(c);
    pi_ncache_pin(c, a); /* a's read is still in flight: it must survive this epoch's allocations */
    for (int i = 0; i < 3; i++) CHECK(pi_ncache_alloc(c, 0, i) >= 0);
    CHECK(pi_ncache_alloc(c, 0, 10) < 0 && pi_ncache_contains(c, 1, 7) && !pi_ncache_contains(c, 1, 8));
    bool ahead = false;
    CHECK(pi_ncache_use(c, 1, 7, &ahead) == a && ahead);
    CHECK(pi_ncache_use(c, 1, 7, &ahead) == a && !ahead); /* the second use is a hit */
    pi_ncache_get_stats(c, &st1);
    CHECK(st1.misses == st0.misses + 1 && st1.hits == st0.hits + 1);
    pi_ncache_next_epoch(c);
    const int64_t d = pi_ncache_alloc_ahead(c, 1, 9);
    CHECK(d >= 0);
    pi_ncache_settle(c, d); /* read ahead, not used: an ordinary entry */
    CHECK(pi_ncache_use(c, 1, 9, &ahead) == d && !ahead);
    pi_ncache_drop(c, d);
    CHECK(!pi_ncache_contains(c, 1, 9) && pi_ncache_use(c, 1, 9, &ahead) < 0 && !ahead);
    pi_ncache_free(c);
}

/* Lending the last slots (buffers for what streams while the cache is
   idle): their neurons are forgotten, pinned or not; no allocation returns
   them while lent; given back they are empty and reused first; the rest of
   the cache keeps what it held. */
static void test_lend(pi_ncache_policy policy) {
    enum { S = 8, N = 3 };
    pi_ncache *c = NULL;
    CHECK(pi_ncache_create(2, 50, 64, S, 64, &c) == PI_OK);
    if (!c) return;
    pi_ncache_set_policy(c, policy);
    int64_t slot_of[S];
    for (int i = 0; i < S; i++) slot_of[i] = pi_ncache_alloc(c, 0, i);
    for (int i = 0; i < S; i++) CHECK(slot_of[i] >= 0);
    pi_ncache_use(c, 0, 1, NULL); /* a hit: SLRU protects it, LFU counts it */
    pi_ncache_next_epoch(c);
    pi_ncache_pin(c, slot_of[S - 1]); /* pinned ones are lent all the same */
    size_t arena_bytes = 0;
    uint8_t *arena = pi_ncache_arena(c, &arena_bytes);
    uint8_t *p = pi_ncache_lend(c, N);
    CHECK(p == arena + (S - N) * 64 && pi_ncache_lent(c) == N && pi_ncache_unpinned(c) == S - N);
    CHECK(pi_ncache_lend(c, 1) == NULL && pi_ncache_lend(c, 0) == NULL);
    for (int i = 0; i < S; i++) /* slots were given in order: neuron i in slot i */
        CHECKF(pi_ncache_contains(c, 0, i) == (slot_of[i] < S - N), "neuron %d in slot %lld", i, (long long)slot_of[i]);
    memset(p, 0xab, (size_t)N * 64);
    for (int i = 0; i < 10; i++) {
        const int64_t s = pi_ncache_alloc(c, 1, i);
        CHECKF(s < 0 || s < S - N, "allocation %d got lent slot %lld", i, (long long)s);
        if (i < S - N) CHECK(s >= 0);
    }
    pi_ncache_next_epoch(c);
    pi_ncache_take_back(c);
    CHECK(pi_ncache_lent(c) == 0 && pi_ncache_unpinned(c) == S);
    for (int i = 0; i < N; i++) { /* the given-back slots come first, and evict nothing */
        pi_ncache_stats a, b;
        pi_ncache_get_stats(c, &a);
        const int64_t s = pi_ncache_alloc(c, 0, 40 + i);
        pi_ncache_get_stats(c, &b);
        CHECKF(s >= S - N && b.evictions == a.evictions, "slot %lld after the loan", (long long)s);
    }
    CHECK(pi_ncache_lend(c, S) == arena && pi_ncache_unpinned(c) == 0 && pi_ncache_alloc(c, 0, 49) < 0);
    pi_ncache_take_back(c);
    CHECK(pi_ncache_lend(c, S + 1) == NULL && pi_ncache_alloc(c, 0, 49) >= 0);
    pi_ncache_free(c);
}

/* The arena starts on a 2 MiB boundary (huge pages advised there: reads
   into it take fewer of the disk's requests), is zeroed and writable to its
   end; alignments above 2 MiB are refused. */
static void test_arena(void) {
    static const int64_t slots[] = {1, 255, 1000};
    for (size_t k = 0; k < sizeof slots / sizeof slots[0]; k++) {
        pi_ncache *c = NULL;
        CHECK(pi_ncache_create(2, 4096, 13824, slots[k], 512, &c) == PI_OK);
        if (!c) continue;
        size_t n = 0;
        uint8_t *a = pi_ncache_arena(c, &n);
        CHECKF((uintptr_t)a % PI_HUGE_PAGE == 0 && n == (size_t)slots[k] * 13824,
               "%lld slots: arena at %p, %zu bytes", (long long)slots[k], (void *)a, n);
        CHECK(a[0] == 0 && a[n - 1] == 0);
        memset(a, 0x5a, n);
        CHECK(pi_ncache_slot(c, slots[k] - 1)[13823] == 0x5a);
        pi_ncache_free(c);
    }
    pi_ncache *c = NULL;
    CHECK(pi_ncache_create(1, 8, (size_t)4 << 20, 2, (size_t)4 << 20, &c) == PI_ERR_INVALID && !c);
}

int main(void) {
    test_arena();
    for (int p = 0; p < PI_NCACHE_N_POLICIES; p++) {
        test_against_reference((pi_ncache_policy)p);
        test_pinning((pi_ncache_policy)p);
        test_ahead((pi_ncache_policy)p);
        test_lend((pi_ncache_policy)p);
    }
    test_scan_resistance();
    test_replay();
    CHECK(!strcmp(pi_ncache_policy_name(PI_NCACHE_SLRU), "slru") && !strcmp(pi_ncache_policy_name(99), "?"));
    return t_done("test_cache");
}
