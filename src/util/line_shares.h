/* Splitting n floats among threads in whole 64-byte lines, in order. Calibration's statistics scan a
 * tensor in these shares right after the bf16 widening wrote it in the same ones, so each thread reads
 * what it wrote, from its own cache: both ask here, so the splits agree. */
#ifndef FTL_UTIL_LINE_SHARES_H
#define FTL_UTIL_LINE_SHARES_H

#include <stddef.h>

enum { FTL_SHARES_MAX_TEAM = 64 };

/* The threads that split n floats: `threads` (at most FTL_SHARES_MAX_TEAM) from 2^16 floats on, else one
 * (below that a team costs more than it saves). */
static inline int ftl_line_shares_team(size_t n, int threads) {
    int team = n >= ((size_t)1 << 16) && threads > 1 ? threads : 1;
    return team > FTL_SHARES_MAX_TEAM ? FTL_SHARES_MAX_TEAM : team;
}

/* Thread t of nt's share [*begin, *end) of n floats (empty when begin >= end). */
static inline void ftl_line_share(size_t n, int t, int nt, size_t *begin, size_t *end) {
    size_t lines = (n + 15) / 16;
    *begin = lines * (size_t)t / (size_t)nt * 16;
    *end = lines * (size_t)(t + 1) / (size_t)nt * 16;
    if (*end > n) *end = n;
}

#endif
