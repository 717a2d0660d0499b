/*
 * test_pool.c — the thread pool: coverage of every index exactly once, many
 * back-to-back jobs (wake-up races), jobs after workers went to sleep or
 * were parked, and reductions that are bit-identical for every thread count.
 */
#include "base/pool.h"
#include "test_util.h"

#include <stdatomic.h>
#include <time.h>

typedef struct {
    atomic_int *hits;
    atomic_int max_tid;
} cover_ctx;

static void cover(void *vctx, int64_t i0, int64_t i1, int tid) {
    cover_ctx *c = vctx;
    for (int64_t i = i0; i < i1; i++) atomic_fetch_add(&c->hits[i], 1);
    int m = atomic_load(&c->max_tid);
    while (tid > m && !atomic_compare_exchange_weak(&c->max_tid, &m, tid)) {}
}

static void test_cover(int threads) {
    pi_pool *p;
    CHECK(pi_pool_create(threads, &p) == PI_OK);
    CHECK(pi_pool_size(p) == threads);
    static const int64_t ns[] = {0, 1, 2, 3, 7, 64, 1000, 4097};
    static const int64_t grains[] = {1, 3, 16, 5000};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
        for (size_t b = 0; b < sizeof grains / sizeof grains[0]; b++) {
            for (int mode = 0; mode < 3; mode++) { /* static, counter, spread */
                int64_t n = ns[a];
                atomic_int *hits = calloc((size_t)n + 1, sizeof *hits);
                cover_ctx c = {hits, 0};
                if (mode == 2) pi_pool_for_spread(p, n, grains[b], cover, &c);
                else if (mode) pi_pool_for_dynamic(p, n, grains[b], cover, &c);
                else pi_pool_for(p, n, grains[b], cover, &c);
                int bad = 0;
                for (int64_t i = 0; i < n; i++) bad += atomic_load(&hits[i]) != 1;
                CHECKF(bad == 0, "threads %d n %lld grain %lld mode %d: %d indices not hit exactly once",
                       threads, (long long)n, (long long)grains[b], mode, bad);
                CHECK(atomic_load(&c.max_tid) < threads);
                free(hits);
            }
        }
    }
    pi_pool_free(p);
}

typedef struct {
    atomic_long first[8]; /* the first item each thread ran, -1: none */
} spread_ctx;

/* Records each thread's first item and holds that first chunk for 2 ms, so
   that no thread is done with its share before the others have begun. */
static void first_item(void *vctx, int64_t i0, int64_t i1, int tid) {
    (void)i1;
    spread_ctx *c = vctx;
    long none = -1;
    if (atomic_compare_exchange_strong(&c->first[tid], &none, (long)i0)) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* pi_pool_for_spread: each thread begins at the front of its own share (as
   pi_pool_for splits the chunks), so threads start far apart; a thread
   whose share is done takes the rest of the others' (coverage above). Each
   thread holds its first chunk for 2 ms so that the others start; a worker
   the scheduler keeps away longer may find its share taken, so the check is
   that some jobs (not every one) show every thread at its own front, which
   a shared counter never does (thread 1 would begin at chunk 1). */
static void test_spread_starts(int threads) {
    pi_pool *p;
    CHECK(pi_pool_create(threads, &p) == PI_OK);
    const int64_t n = 64 * threads, grain = 4, chunks = n / grain;
    int fronts = 0;
    for (int rep = 0; rep < 50; rep++) {
        spread_ctx c;
        for (int t = 0; t < 8; t++) atomic_init(&c.first[t], -1);
        pi_pool_for_spread(p, n, grain, first_item, &c);
        int at_front = 0;
        for (int t = 0; t < threads; t++) at_front += atomic_load(&c.first[t]) == chunks * t / threads * grain;
        fronts += at_front == threads;
    }
    CHECKF(fronts > 0, "threads %d: in no job did every thread begin at the front of its own share", threads);
    pi_pool_free(p);
}

static void add_one(void *vctx, int64_t i0, int64_t i1, int tid) {
    (void)tid;
    atomic_long *sum = vctx;
    atomic_fetch_add(sum, (long)(i1 - i0));
}

/* Back-to-back jobs: a lost wake-up or a premature return shows as a wrong sum or a hang. */
static void test_many_jobs(int threads) {
    pi_pool *p;
    CHECK(pi_pool_create(threads, &p) == PI_OK);
    atomic_long sum = 0;
    const int jobs = 5000;
    for (int j = 0; j < jobs; j++) pi_pool_for(p, 64, 1, add_one, &sum);
    CHECKF(atomic_load(&sum) == 64L * jobs, "threads %d: sum %ld", threads, (long)atomic_load(&sum));
    /* let the workers fall asleep, then wake them */
    for (int j = 0; j < 5; j++) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
        atomic_store(&sum, 0);
        pi_pool_for(p, 1000, 1, add_one, &sum);
        CHECK(atomic_load(&sum) == 1000);
    }
    pi_pool_free(p);
}

/* Parking between jobs (pi_pool_park, as the flash reads' waits do): every
   job still runs whole, whether the workers were spinning, parked while
   spinning, asleep, or parked again before the job after; parking a pool
   of one thread or NULL does nothing. */
static void test_park(int threads) {
    pi_pool *p;
    CHECK(pi_pool_create(threads, &p) == PI_OK);
    atomic_long sum = 0;
    const int jobs = 3000;
    for (int j = 0; j < jobs; j++) {
        if (j % 3 != 2) pi_pool_park(p);
        if (j % 7 == 0) pi_pool_park(p);            /* twice in a row */
        if (j % 500 == 499) {                          /* parked, then asleep for a while */
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        pi_pool_for_dynamic(p, 64, 1, add_one, &sum);
    }
    CHECKF(atomic_load(&sum) == 64L * jobs, "threads %d, parked: sum %ld", threads, (long)atomic_load(&sum));
    pi_pool_free(p);
    pi_pool_park(NULL);
}

typedef struct {
    const float *x;
    int64_t dim;
} red_ctx;

/* acc[d] += x[i] * (d + 1) over the chunk: values of mixed magnitude, so any
   change of summation order changes the bits. */
static void red_fn(void *vctx, int64_t i0, int64_t i1, float *acc, int tid) {
    (void)tid;
    red_ctx *c = vctx;
    for (int64_t i = i0; i < i1; i++)
        for (int64_t d = 0; d < c->dim; d++) acc[d] += c->x[i] * (float)(d + 1);
}

static void test_reduce_deterministic(void) {
    const int64_t n = 100003, dim = 97, chunk = 1000;
    float *x = malloc(n * sizeof *x);
    t_rng r = {42};
    for (int64_t i = 0; i < n; i++) x[i] = t_uniform(&r) * powf(10.0f, (float)(t_next(&r) % 12) - 6.0f);
    int64_t n_chunks = (n + chunk - 1) / chunk;
    float *scratch = malloc((size_t)(n_chunks * dim) * sizeof *scratch);
    float ref[97], got[97];
    /* the specification: chunk partials summed in chunk order, sequentially */
    for (int64_t d = 0; d < dim; d++) {
        float s = 0.0f;
        for (int64_t c = 0; c < n_chunks; c++) {
            float acc = 0.0f;
            for (int64_t i = c * chunk; i < (c + 1) * chunk && i < n; i++) acc += x[i] * (float)(d + 1);
            s += acc;
        }
        ref[d] = s;
    }
    red_ctx c = {x, dim};
    for (int threads = 1; threads <= 8; threads++) {
        pi_pool *p;
        CHECK(pi_pool_create(threads, &p) == PI_OK);
        for (int rep = 0; rep < 3; rep++) {
            memset(got, 0xff, sizeof got);
            pi_pool_reduce_f32(p, n, chunk, red_fn, &c, got, dim, scratch);
            CHECKF(memcmp(got, ref, sizeof ref) == 0, "threads %d: reduction differs from chunk-order sum", threads);
        }
        pi_pool_free(p);
    }
    /* a NULL pool runs on the caller with the same result */
    pi_pool_reduce_f32(NULL, n, chunk, red_fn, &c, got, dim, scratch);
    CHECK(memcmp(got, ref, sizeof ref) == 0);
    free(x);
    free(scratch);
}

int main(void) {
    for (int t = 1; t <= 4; t++) test_cover(t);
    test_cover(8);
    test_many_jobs(2);
    test_many_jobs(4);
    test_spread_starts(2);
    test_spread_starts(4);
    for (int t = 1; t <= 4; t++) test_park(t);
    test_reduce_deterministic();
    pi_pool *p = NULL;
    CHECK(pi_pool_create(0, &p) == PI_OK && pi_pool_size(p) >= 1);
    pi_pool_free(p);
    pi_pool_free(NULL);
    CHECK(pi_pool_create(100000, &p) == PI_ERR_INVALID && p == NULL);
    return t_done("test_pool");
}
