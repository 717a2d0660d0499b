/*
 * hwprobe.h — measurements of this machine that the cost model and the
 * benchmarks compare against.
 */
#ifndef PI_PLAN_HWPROBE_H
#define PI_PLAN_HWPROBE_H

#include "base/pool.h"

#include <stddef.h>

/* Memory read bandwidth in GB/s (1e9 bytes/s): the median of `reps` passes of
   all of the pool's threads reading disjoint parts of a `bytes`-byte buffer
   (make it far larger than the last-level cache). *out receives the figure.
   Allocates and frees the buffer. */
pi_status pi_probe_read_bw(pi_pool *pool, size_t bytes, int reps, double *out);

/* Median of n doubles (reorders v). */
double pi_median(double *v, int n);

#endif
