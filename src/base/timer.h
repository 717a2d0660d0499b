/*
 * timer.h — monotonic wall-clock time in seconds and nanoseconds.
 */
#ifndef PI_BASE_TIMER_H
#define PI_BASE_TIMER_H

#include <stdint.h>
#include <time.h>

static inline uint64_t pi_time_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline double pi_time_s(void) { return (double)pi_time_ns() * 1e-9; }

#endif
