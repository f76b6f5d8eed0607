/* A small process-wide worker pool for the head's GEMMs and optimizer updates.
 *
 * Work is always split over OUTPUT elements (columns, rows, parameter ranges), never over a
 * reduction, so every result is bit-identical whatever the thread count. Workers spin briefly
 * after a task (a training step dispatches 3 tasks within a millisecond) and then sleep, so an
 * idle pool costs nothing and never competes with the backbone's own threads for long. */
#ifndef FTL_TRAIN_POOL_H
#define FTL_TRAIN_POOL_H

#include <stddef.h>

/* fn(ctx, part, parts) is called once for each part in [0, parts); the caller runs part 0. */
typedef void (*ftl_pool_fn)(void *ctx, int part, int parts);

/* Threads used for one task: min(requested threads, parts wanted). */
int ftl_pool_threads(void);
/* Runs fn on `parts` parts (clamped to the pool size) and returns when all are done. */
void ftl_pool_run(int parts, ftl_pool_fn fn, void *ctx);
/* How many parts a task of `work` units should use: 1 below min_work_per_thread per thread. */
int ftl_pool_parts_for(double work, double min_work_per_thread);

#endif
