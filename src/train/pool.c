/* Process-wide worker pool. A task is `parts` fixed chunks claimed through one atomic word
 * (generation << 32 | next chunk), so the caller and whichever workers are awake share them:
 * on a busy machine where a worker is descheduled, the caller simply runs its chunks too. */
#include "train/pool.h"
#include "ftl/train.h"
#include "util/log.h"
#include "util/timing.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

enum { POOL_MAX_THREADS = 64 };
/* Workers spin this long after a task before sleeping: a training step dispatches several tasks
 * within a fraction of a millisecond, and a sleeping worker takes tens of microseconds to wake. */
static const double WORKER_SPIN_S = 200e-6, CALLER_SPIN_S = 2e-3;

static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER; /* one task at a time */
static pthread_mutex_t wake_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake_cond = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static atomic_uint published; /* generation of the latest task */
static atomic_int sleepers;
static _Atomic uint64_t claim_word;
static atomic_int done_parts;
static atomic_int requested_threads; /* 0: one per available core */
static int started_workers;          /* guarded by run_lock */
static ftl_pool_fn task_fn;
static void *task_ctx;
static int task_parts;
/* A sweep's workers each train their own trials: their tasks run on the calling thread only. */
static _Thread_local bool caller_only;

void ftl_pool_set_caller_only(bool on) { caller_only = on; }

void ftl_train_set_threads(int threads) {
    if (threads < 0) threads = 0;
    if (threads > POOL_MAX_THREADS) threads = POOL_MAX_THREADS;
    atomic_store(&requested_threads, threads);
}

int ftl_pool_threads(void) {
    int n = atomic_load(&requested_threads);
    if (n <= 0) n = ftl_cpu_count();
    return n > POOL_MAX_THREADS ? POOL_MAX_THREADS : n;
}

int ftl_train_threads(void) { return ftl_pool_threads(); }

int ftl_pool_parts_for(double work, double min_work_per_part) {
    int threads = caller_only ? 1 : ftl_pool_threads();
    if (threads <= 1) return 1;
    double parts = min_work_per_part > 0 ? work / min_work_per_part : 4.0 * threads;
    if (parts < 2) return 1;
    return parts < 4.0 * threads ? (int)parts : 4 * threads;
}

/* Claims and runs chunks of task `generation` until none are left. The task's fields are read
 * only after a successful claim, and the caller does not replace them before every claimed
 * chunk is done, so a late worker never sees a half-published task. */
static void run_chunks(unsigned generation) {
    for (;;) {
        uint64_t w = atomic_load_explicit(&claim_word, memory_order_acquire);
        if ((unsigned)(w >> 32) != generation || (int)(uint32_t)w >= task_parts) return;
        if (!atomic_compare_exchange_weak_explicit(&claim_word, &w, w + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        int parts = task_parts;
        task_fn(task_ctx, (int)(uint32_t)w, parts);
        if (atomic_fetch_add_explicit(&done_parts, 1, memory_order_acq_rel) + 1 == parts) {
            pthread_mutex_lock(&wake_lock);
            pthread_cond_broadcast(&done_cond);
            pthread_mutex_unlock(&wake_lock);
        }
    }
}

static void *worker_main(void *arg) {
    (void)arg;
    unsigned seen = atomic_load(&published);
    for (;;) {
        double spin_until = ftl_now() + WORKER_SPIN_S;
        for (int i = 0; atomic_load_explicit(&published, memory_order_acquire) == seen; i++) {
            cpu_relax();
            if ((i & 63) == 63 && ftl_now() > spin_until) {
                pthread_mutex_lock(&wake_lock);
                atomic_fetch_add(&sleepers, 1);
                while (atomic_load(&published) == seen) pthread_cond_wait(&wake_cond, &wake_lock);
                atomic_fetch_sub(&sleepers, 1);
                pthread_mutex_unlock(&wake_lock);
            }
        }
        seen = atomic_load_explicit(&published, memory_order_acquire);
        run_chunks(seen);
    }
    return NULL;
}

static void ensure_workers(int threads) {
    while (started_workers < threads - 1) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &attr, worker_main, NULL);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            ftl_log_warn("cannot start a training thread (error %d); using %d", rc, started_workers + 1);
            return;
        }
        started_workers++;
    }
}

void ftl_pool_run(int parts, ftl_pool_fn fn, void *ctx) {
    if (parts <= 1) {
        fn(ctx, 0, 1);
        return;
    }
    if (caller_only) { /* the same parts, in order: results never depend on who runs a part */
        for (int i = 0; i < parts; i++) fn(ctx, i, parts);
        return;
    }
    pthread_mutex_lock(&run_lock);
    ensure_workers(ftl_pool_threads());
    task_fn = fn;
    task_ctx = ctx;
    task_parts = parts;
    atomic_store(&done_parts, 0);
    unsigned generation = atomic_load(&published) + 1;
    atomic_store_explicit(&claim_word, (uint64_t)generation << 32, memory_order_release);
    atomic_store(&published, generation);
    if (atomic_load(&sleepers) > 0) {
        pthread_mutex_lock(&wake_lock);
        pthread_cond_broadcast(&wake_cond);
        pthread_mutex_unlock(&wake_lock);
    }
    run_chunks(generation);
    double spin_until = ftl_now() + CALLER_SPIN_S;
    for (int i = 0; atomic_load_explicit(&done_parts, memory_order_acquire) < parts; i++) {
        cpu_relax();
        if ((i & 63) == 63 && ftl_now() > spin_until) {
            pthread_mutex_lock(&wake_lock);
            while (atomic_load(&done_parts) < parts) pthread_cond_wait(&done_cond, &wake_lock);
            pthread_mutex_unlock(&wake_lock);
        }
    }
    pthread_mutex_unlock(&run_lock);
}

enum { SITE_WARMUP = 4, SITE_PROBE_EVERY = 64 };

void ftl_pool_run_adaptive(ftl_pool_site *site, int parts, ftl_pool_fn fn, void *ctx, double work) {
    if (parts <= 1 || !site || !(work > 0) || caller_only) {
        ftl_pool_run(parts, fn, ctx);
        return;
    }
    site->calls++;
    int mode;
    if (site->samples[0] < SITE_WARMUP || site->samples[1] < SITE_WARMUP) mode = (int)(site->calls & 1u);
    else {
        mode = site->cost[1] < site->cost[0] ? 1 : 0;
        if (site->calls % SITE_PROBE_EVERY == 0) mode = 1 - mode; /* keep the other estimate fresh */
    }
    double start = ftl_now();
    ftl_pool_run(mode ? parts : 1, fn, ctx);
    double cost = (ftl_now() - start) / work;
    /* Moving average; the first sample seeds it. */
    site->cost[mode] = site->samples[mode] ? 0.8 * site->cost[mode] + 0.2 * cost : cost;
    site->samples[mode]++;
}
