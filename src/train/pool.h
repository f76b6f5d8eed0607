/* A small process-wide worker pool for the head's GEMMs and optimizer updates.
 *
 * Work is always split over OUTPUT elements (columns, rows, parameter ranges), never over a
 * reduction, so every result is bit-identical whatever the thread count. Workers spin briefly
 * after a task (a training step dispatches 3 tasks within a millisecond) and then sleep, so an
 * idle pool costs nothing and never competes with the backbone's own threads for long. */
#ifndef FTL_TRAIN_POOL_H
#define FTL_TRAIN_POOL_H

#include <stdbool.h>
#include <stddef.h>

/* fn(ctx, part, parts) is called once for each part in [0, parts), by whichever thread claims it. */
typedef void (*ftl_pool_fn)(void *ctx, int part, int parts);

/* Threads the pool may use (ftl_train_set_threads, default one per available core). */
int ftl_pool_threads(void);
/* Runs fn on `parts` parts and returns when all are done. Parts may outnumber threads: on a busy
 * machine a descheduled worker then holds up only one small part. */
void ftl_pool_run(int parts, ftl_pool_fn fn, void *ctx);
/* On: tasks run from the calling thread run on it alone (a sweep's worker threads each train their
 * own trials, so sharing a step would only make them wait for each other). Per thread. */
void ftl_pool_set_caller_only(bool on);
/* How many parts a task of `work` units should be cut into: 1 when it is too small to share
 * (below 2 x min_work_per_part), else up to 4 per thread, each at least min_work_per_part. */
int ftl_pool_parts_for(double work, double min_work_per_part);

/* Whether sharing a kind of task pays is measured, not assumed: on a machine whose other cores
 * are busy (a shared CI box, or the backbone's threads), waking workers only adds latency. A site
 * keeps the running cost per unit of work with one thread and shared, uses the cheaper, and
 * re-measures the other mode now and then, as the load changes. */
typedef struct ftl_pool_site {
    double cost[2];      /* moving average seconds per unit of work: [0] caller only, [1] shared */
    unsigned samples[2];
    unsigned calls;
} ftl_pool_site;

/* ftl_pool_run with `parts` or 1 part, as the site's measurements say; work sizes the timing. */
void ftl_pool_run_adaptive(ftl_pool_site *site, int parts, ftl_pool_fn fn, void *ctx, double work);

#endif
