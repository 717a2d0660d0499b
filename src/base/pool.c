/*
 * pool.c — persistent workers woken by a generation counter.
 *
 * Publishing a job: the caller fills the job fields, sets `pending`, then bumps
 * `gen` (sequentially consistent). A worker spins on `gen` for a short while
 * (decode issues hundreds of small jobs per token, and a futex wake costs
 * microseconds), then sleeps on a condition variable. The lost-wakeup race is
 * closed by ordering: a worker increments `sleepers` and re-reads `gen` under
 * the mutex; the caller bumps `gen` then reads `sleepers`, and broadcasts under
 * the mutex when it is non-zero. With both sequences seq_cst, one of the two
 * sides always sees the other.
 *
 * Parking (pi_pool_park) is a flag that sends spinning workers to sleep at
 * once. The next job clears it before bumping `gen`; a worker that saw it set
 * takes the same sleeping path, so it cannot miss the job.
 */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

#define SPIN_ITERS 20000 /* spinning before sleeping: 0.6 ms of PAUSE on a Zen 3 core */

typedef struct {
    pi_pool *pool;
    int tid;
} worker_arg;

/* How a job's chunks are shared: pi_pool_for, pi_pool_for_dynamic, pi_pool_for_spread. */
enum { SHARE_STATIC, SHARE_COUNTER, SHARE_SPREAD };

struct pi_pool {
    int n_threads;
    pthread_t *threads;
    worker_arg *args;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint_fast64_t gen;
    atomic_int pending;
    atomic_int sleepers;
    atomic_int stop;
    atomic_int park; /* pi_pool_park: spinning workers go to sleep */
    int busy; /* re-entrancy guard, only touched by the driving thread */
    /* the current job */
    pi_pool_fn fn;
    void *ctx;
    int64_t n, grain, n_chunks;
    int mode; /* how the chunks are shared: SHARE_STATIC, SHARE_COUNTER or SHARE_SPREAD */
    atomic_int_fast64_t next_chunk;
    /* SHARE_SPREAD: the next chunk of each thread's share, a cache line each */
    struct {
        atomic_int_fast64_t next;
        char pad[64 - sizeof(atomic_int_fast64_t)];
    } *share;
};

/* The first chunk of thread t's share (pi_pool_for's split, and where
   pi_pool_for_spread starts thread t); t = n_threads: the end. */
static int64_t share_first(const pi_pool *p, int64_t t) { return p->n_chunks * t / p->n_threads; }

static void run_chunk(pi_pool *p, int64_t c, int tid) {
    const int64_t i0 = c * p->grain, i1 = i0 + p->grain < p->n ? i0 + p->grain : p->n;
    p->fn(p->ctx, i0, i1, tid);
}

static void run_share(pi_pool *p, int tid) {
    const int64_t T = p->n_threads;
    if (p->mode == SHARE_SPREAD) {
        /* the thread's own share from its start, then what is left of the
           others' shares, each taken from its own counter */
        for (int64_t k = 0; k < T; k++) {
            const int64_t s = (tid + k) % T, end = share_first(p, s + 1);
            for (int64_t c; (c = atomic_fetch_add_explicit(&p->share[s].next, 1, memory_order_relaxed)) < end;)
                run_chunk(p, c, tid);
        }
        return;
    }
    if (p->mode == SHARE_COUNTER) {
        for (;;) {
            int64_t c = atomic_fetch_add_explicit(&p->next_chunk, 1, memory_order_relaxed);
            if (c >= p->n_chunks) break;
            run_chunk(p, c, tid);
        }
        return;
    }
    int64_t c0 = share_first(p, tid), c1 = share_first(p, tid + 1);
    if (c0 >= c1) return;
    int64_t i0 = c0 * p->grain, i1 = c1 * p->grain < p->n ? c1 * p->grain : p->n;
    p->fn(p->ctx, i0, i1, tid);
}

static void *worker_main(void *argp) {
    worker_arg *a = argp;
    pi_pool *p = a->pool;
    uint_fast64_t seen = 0;
    for (;;) {
        uint_fast64_t g;
        int spins = 0;
        while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop)) {
            if (++spins < SPIN_ITERS && !atomic_load_explicit(&p->park, memory_order_relaxed)) {
                if (spins % 1024 == 1023) sched_yield(); /* more threads than cores */
                else CPU_RELAX();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = g;
        run_share(p, a->tid);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
}

pi_status pi_pool_create(int n_threads, pi_pool **out) {
    *out = NULL;
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    if (n_threads > 1024) return pi_error(PI_ERR_INVALID, "thread pool: %d threads is too many (max 1024)", n_threads);
    pi_pool *p = calloc(1, sizeof *p);
    if (!p) return pi_error(PI_ERR_NOMEM, "thread pool: out of memory");
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    atomic_init(&p->gen, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->park, 0);
    atomic_init(&p->next_chunk, 0);
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads, sizeof *p->threads);
        p->args = calloc((size_t)n_threads, sizeof *p->args);
        p->share = aligned_alloc(64, (size_t)n_threads * sizeof *p->share);
        if (!p->threads || !p->args || !p->share) {
            pi_pool_free(p);
            return pi_error(PI_ERR_NOMEM, "thread pool: out of memory");
        }
        for (int t = 1; t < n_threads; t++) {
            p->args[t] = (worker_arg){p, t};
            int rc = pthread_create(&p->threads[t], NULL, worker_main, &p->args[t]);
            if (rc) {
                p->n_threads = t; /* join only the ones started */
                pi_pool_free(p);
                return pi_error(PI_ERR_NOMEM, "thread pool: cannot start thread %d: %s", t, strerror(rc));
            }
        }
    }
    *out = p;
    return PI_OK;
}

void pi_pool_free(pi_pool *p) {
    if (!p) return;
    if (p->threads) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->stop, 1);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        for (int t = 1; t < p->n_threads; t++) pthread_join(p->threads[t], NULL);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->threads);
    free(p->args);
    free(p->share);
    free(p);
}

int pi_pool_size(const pi_pool *p) { return p ? p->n_threads : 1; }

void pi_pool_park(pi_pool *p) {
    if (p && p->n_threads > 1) atomic_store_explicit(&p->park, 1, memory_order_relaxed);
}

static void run_job(pi_pool *p, int64_t n, int64_t grain, pi_pool_fn fn, void *ctx, int mode) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t n_chunks = (n + grain - 1) / grain;
    if (!p || p->n_threads == 1 || n_chunks == 1) {
        /* nothing to share: run in place, in the same chunking */
        if (mode != SHARE_STATIC) {
            for (int64_t i0 = 0; i0 < n; i0 += grain) fn(ctx, i0, i0 + grain < n ? i0 + grain : n, 0);
        } else {
            fn(ctx, 0, n, 0);
        }
        return;
    }
    PI_ASSERT(!p->busy); /* jobs must not re-enter their pool */
    p->busy = 1;
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->grain = grain;
    p->n_chunks = n_chunks;
    p->mode = mode;
    atomic_store_explicit(&p->next_chunk, 0, memory_order_relaxed);
    if (mode == SHARE_SPREAD)
        for (int64_t t = 0; t < p->n_threads; t++)
            atomic_store_explicit(&p->share[t].next, share_first(p, t), memory_order_relaxed);
    atomic_store(&p->pending, p->n_threads - 1);
    atomic_store_explicit(&p->park, 0, memory_order_relaxed); /* ordered before gen's bump */
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    run_share(p, 0);
    /* wait for the others; yield now and then in case a worker shares our core */
    for (int spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; spins++) {
        if (spins % 1024 == 1023) sched_yield();
        else CPU_RELAX();
    }
    p->busy = 0;
}

void pi_pool_for(pi_pool *p, int64_t n, int64_t grain, pi_pool_fn fn, void *ctx) {
    run_job(p, n, grain, fn, ctx, SHARE_STATIC);
}

void pi_pool_for_dynamic(pi_pool *p, int64_t n, int64_t grain, pi_pool_fn fn, void *ctx) {
    run_job(p, n, grain, fn, ctx, SHARE_COUNTER);
}

void pi_pool_for_spread(pi_pool *p, int64_t n, int64_t grain, pi_pool_fn fn, void *ctx) {
    run_job(p, n, grain, fn, ctx, SHARE_SPREAD);
}

typedef struct {
    pi_pool_reduce_fn fn;
    void *ctx;
    int64_t n, chunk, dim, n_chunks;
    float *scratch, *result;
    int64_t c_first; /* phase 1 runs chunks c_first + [c0, c1) */
} reduce_job;

/* Phase 1: item range [c0, c1) of chunk indices; each chunk's partial is its own row. */
static void reduce_chunks(void *vctx, int64_t c0, int64_t c1, int tid) {
    reduce_job *j = vctx;
    for (int64_t c = j->c_first + c0; c < j->c_first + c1; c++) {
        float *acc = j->scratch + c * j->dim;
        memset(acc, 0, (size_t)j->dim * sizeof *acc);
        int64_t i0 = c * j->chunk, i1 = i0 + j->chunk < j->n ? i0 + j->chunk : j->n;
        j->fn(j->ctx, i0, i1, acc, tid);
    }
}

/* Phase 2: columns [d0, d1) summed over chunks in chunk order. A tile of
   columns at a time, each chunk's partial added along its row: every
   column's sum still runs over the chunks in order (the same bits as one
   column at a time), but the adds vectorize and the scratch is read row by
   row, not down columns whose elements are dim floats apart (one cache line
   per add, the lines of a column competing for the same cache sets). */
static void reduce_sum(void *vctx, int64_t d0, int64_t d1, int tid) {
    (void)tid;
    reduce_job *j = vctx;
    enum { TILE = 64 };
    float s[TILE];
    int64_t t0 = d0;
    for (; t0 + TILE <= d1; t0 += TILE) { /* a constant trip count, which the compiler vectorizes */
        for (int d = 0; d < TILE; d++) s[d] = 0.0f;
        for (int64_t c = 0; c < j->n_chunks; c++) {
            const float *row = j->scratch + c * j->dim + t0;
            for (int d = 0; d < TILE; d++) s[d] += row[d];
        }
        memcpy(j->result + t0, s, sizeof s);
    }
    for (int64_t d = t0; d < d1; d++) {
        float v = 0.0f;
        for (int64_t c = 0; c < j->n_chunks; c++) v += j->scratch[c * j->dim + d];
        j->result[d] = v;
    }
}

void pi_pool_reduce_f32(pi_pool *p, int64_t n, int64_t chunk, pi_pool_reduce_fn fn, void *ctx,
                        float *result, int64_t dim, float *scratch) {
    if (dim <= 0) return;
    if (n <= 0) {
        memset(result, 0, (size_t)dim * sizeof *result);
        return;
    }
    if (chunk < 1) chunk = 1;
    reduce_job j = {fn, ctx, n, chunk, dim, (n + chunk - 1) / chunk, scratch, result, 0};
    pi_pool_for_spread(p, j.n_chunks, 1, reduce_chunks, &j);
    pi_pool_for(p, dim, 64, reduce_sum, &j);
}

void pi_pool_reduce_f32_chunks(pi_pool *p, int64_t n, int64_t chunk, int64_t c0, int64_t c1, pi_pool_reduce_fn fn,
                               void *ctx, int64_t dim, float *scratch) {
    if (chunk < 1) chunk = 1;
    reduce_job j = {fn, ctx, n, chunk, dim, (n + chunk - 1) / chunk, scratch, NULL, c0};
    if (c1 > j.n_chunks) c1 = j.n_chunks;
    if (dim <= 0 || c1 <= c0) return;
    pi_pool_for_dynamic(p, c1 - c0, 1, reduce_chunks, &j);
}

void pi_pool_reduce_f32_sum(pi_pool *p, int64_t n, int64_t chunk, float *result, int64_t dim, float *scratch) {
    if (dim <= 0) return;
    if (chunk < 1) chunk = 1;
    if (n <= 0) {
        memset(result, 0, (size_t)dim * sizeof *result);
        return;
    }
    reduce_job j = {NULL, NULL, n, chunk, dim, (n + chunk - 1) / chunk, scratch, result, 0};
    pi_pool_for(p, dim, 64, reduce_sum, &j);
}
