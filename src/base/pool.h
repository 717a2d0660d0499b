/*
 * pool.h — a persistent thread pool with parallel-for and deterministic reductions.
 *
 * Workers are created once and wait for jobs (spinning briefly, then sleeping),
 * so a parallel-for costs a wake-up, not a thread creation. The calling thread
 * takes part as thread 0. Every call returns only when all work is done: it is
 * a barrier.
 *
 * Determinism: pi_pool_for splits [0, n) into chunks of `grain` items; which
 * thread runs a chunk may vary, but code whose chunks write disjoint outputs
 * gives the same result for any thread count. pi_pool_reduce_f32 sums vectors
 * over chunks whose boundaries do not depend on the thread count, and adds the
 * partial sums in chunk order, so its result is bit-identical for 1..N threads.
 *
 * A pool is driven by one thread at a time; jobs may not call back into the
 * pool that runs them.
 */
#ifndef PI_BASE_POOL_H
#define PI_BASE_POOL_H

#include "status.h"

#include <stdint.h>

typedef struct pi_pool pi_pool;

/* Run items [i0, i1) on thread `tid` (0 = the caller, < pi_pool_size()). */
typedef void (*pi_pool_fn)(void *ctx, int64_t i0, int64_t i1, int tid);

/* Add the contribution of items [i0, i1) to acc[0..dim) (acc starts at zero). */
typedef void (*pi_pool_reduce_fn)(void *ctx, int64_t i0, int64_t i1, float *acc, int tid);

/* A pool of n_threads threads in all (n_threads - 1 workers plus the caller);
   n_threads <= 0 means one per online CPU. */
pi_status pi_pool_create(int n_threads, pi_pool **out);
void pi_pool_free(pi_pool *p); /* accepts NULL; joins the workers */
int pi_pool_size(const pi_pool *p);

/* The driving thread is about to block (on reads from disk): workers waiting
   for the next job sleep now instead of spinning out their spell. On a
   virtual machine a spinning core is taken from the virtual disk: with both
   of 2 cores spinning, random 8 KiB reads at queue depth 128 fell from
   61-84K/s to 36-38K/s, and an offloaded decode achieved 38-41K reads/s
   against 45-52K with the worker asleep while it waited. The next job wakes
   them as usual (a futex wake instead of a spin's exit). */
void pi_pool_park(pi_pool *p);
/* Run fn over [0, n) in chunks of at least `grain` items. Static split: thread t
   gets the t-th contiguous share of the chunks (best for streaming memory). */
void pi_pool_for(pi_pool *p, int64_t n, int64_t grain, pi_pool_fn fn, void *ctx);

/* Same, but threads take chunks of exactly `grain` items from a shared counter
   (best when chunks cost different amounts or cores are noisy). */
void pi_pool_for_dynamic(pi_pool *p, int64_t n, int64_t grain, pi_pool_fn fn, void *ctx);

/* Same, but each thread starts at the front of its own contiguous share of
   the chunks (as pi_pool_for splits them) and, when that is done, takes
   what is left of the others' shares: uneven chunks still even out, while
   the threads read memory far apart. On 2 threads (7b-l8, alternated token
   by token in one process) a sparse FFN's gathered rows took 2-6% less
   time this way than with a shared counter's neighbouring chunks, and the
   decode matvecs 2-3% less; the gathered down rows alone in `bench-kernels`
   ran 15-43% faster. */
void pi_pool_for_spread(pi_pool *p, int64_t n, int64_t grain, pi_pool_fn fn, void *ctx);

/* result[0..dim) = sum over chunks c of fn's acc for chunk c, where chunk c is
   items [c*chunk, min(n, (c+1)*chunk)), summed in order of c. `scratch` holds
   ceil(n/chunk) * dim floats. Bit-identical for every thread count. The
   chunks are shared as pi_pool_for_spread shares them. */
void pi_pool_reduce_f32(pi_pool *p, int64_t n, int64_t chunk, pi_pool_reduce_fn fn, void *ctx,
                        float *result, int64_t dim, float *scratch);

/* pi_pool_reduce_f32 in parts, with the same result: the partials of chunks
   [c0, c1) into their scratch rows (chunks may be done in any groups, e.g.
   as their inputs become available), then the sum of all chunks' rows. */
void pi_pool_reduce_f32_chunks(pi_pool *p, int64_t n, int64_t chunk, int64_t c0, int64_t c1, pi_pool_reduce_fn fn,
                               void *ctx, int64_t dim, float *scratch);
void pi_pool_reduce_f32_sum(pi_pool *p, int64_t n, int64_t chunk, float *result, int64_t dim, float *scratch);

#endif
