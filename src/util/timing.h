/* Monotonic wall-clock time in seconds. */
#ifndef FTL_UTIL_TIMING_H
#define FTL_UTIL_TIMING_H

double ftl_now(void);

#endif
