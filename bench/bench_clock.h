/* What the C benchmarks share: a monotonic clock and a comparator for sorting timings (medians). */
#ifndef FTL_BENCH_CLOCK_H
#define FTL_BENCH_CLOCK_H

#include <time.h>

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
