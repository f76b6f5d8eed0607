/* The run's timeline (--timeline, Horovod Timeline's counterpart): a Chrome trace-event file
 * (chrome://tracing, Perfetto) with one track per rank and a span for each data wait, backbone
 * run, head step, allreduce, validation and checkpoint. Clocks are aligned at start: every rank
 * counts from the moment it leaves a barrier. Each rank buffers its spans; at every epoch end
 * they are gathered to rank 0, which appends them to the file (under a temporary name until the
 * run ends, then renamed). */
#ifndef FTL_TRAIN_TIMELINE_H
#define FTL_TRAIN_TIMELINE_H

#include "ftl/dist.h"
#include "util/fsutil.h"
#include "util/json.h"

typedef struct ftl_timeline {
    const ftl_collectives *col;
    double origin;        /* ftl_now() when this rank left the start barrier */
    ftl_strbuf events;    /* this rank's spans since the last flush, comma-separated JSON objects */
    ftl_atomic_file file; /* rank 0 */
    bool any_written;
} ftl_timeline;

/* Collective: every rank calls it. path NULL: a disabled timeline (all calls do nothing). */
ftl_status ftl_timeline_open(ftl_timeline *t, const char *path, const ftl_collectives *col);
/* A span [start, end) of ftl_now() seconds on this rank's track. */
void ftl_timeline_span(ftl_timeline *t, const char *name, double start, double end, int64_t step);
/* A counter sample at time `at` on this rank's track (Chrome's "C" events: drawn as a graph), e.g.
 * the GPU's busy percent per epoch. */
void ftl_timeline_counter(ftl_timeline *t, const char *name, double at, double value);
/* Collective: gathers every rank's spans to rank 0 and appends them. */
ftl_status ftl_timeline_flush(ftl_timeline *t);
/* Collective when ok: a last flush, then rank 0 completes and renames the file; else it is dropped. */
ftl_status ftl_timeline_close(ftl_timeline *t, bool ok);

#endif
