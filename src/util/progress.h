/* Progress reporting for long jobs: a redrawn bar with rate and ETA on a terminal, a plain
 * line every few seconds otherwise (logs, CI), nothing on ranks other than 0. */
#ifndef FTL_UTIL_PROGRESS_H
#define FTL_UTIL_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct ftl_progress {
    const char *label;  /* e.g. "prep" */
    const char *unit;   /* e.g. "images" */
    int64_t total;      /* 0 when unknown */
    double start, last_draw;
    bool tty, enabled, drew_bar;
} ftl_progress;

void ftl_progress_start(ftl_progress *p, const char *label, const char *unit, int64_t total);
/* Cheap to call often: redraws at most every 0.2 s (terminal) or 10 s (plain lines). */
void ftl_progress_update(ftl_progress *p, int64_t done);
/* Clears the bar so the summary prints on a clean line. */
void ftl_progress_finish(ftl_progress *p, int64_t done);

#endif
