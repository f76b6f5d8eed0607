/* bench/loader: how fast the streaming loader delivers batches, per epoch: rows/s, MB/s of image
 * bytes, the time the consumer waited, and disk-cache hits. --compute-ms simulates work per batch
 * (a spinning consumer) to show how much of it the background readers hide.
 *
 *   bench_loader DATA.parquet [--threads T] [--batch B] [--epochs E] [--shuffle-buffer N]
 *                [--cache-dir DIR] [--cache-limit BYTES] [--compute-ms X] */
#include "ftl.h"
#include "ftl/loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_loader DATA.parquet [--threads T] [--batch B] [--epochs E] [--shuffle-buffer N] "
                        "[--cache-dir DIR] [--cache-limit BYTES] [--compute-ms X]\n");
        return 2;
    }
    const char *src[1] = {argv[1]};
    ftl_loader_options o;
    ftl_loader_options_init(&o);
    o.sources = src;
    o.source_count = 1;
    o.batch_size = 64;
    o.epochs = 2;
    double compute_ms = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) o.threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) o.batch_size = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--epochs")) o.epochs = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--shuffle-buffer")) o.shuffle_buffer = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--cache-dir")) o.cache_dir = argv[i + 1];
        else if (!strcmp(argv[i], "--cache-limit")) o.cache_size_limit = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--compute-ms")) compute_ms = atof(argv[i + 1]);
        else {
            fprintf(stderr, "bench_loader: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    ftl_loader *l;
    if (ftl_loader_open(&o, &l) != FTL_OK) {
        fprintf(stderr, "bench_loader: %s\n", ftl_last_error());
        return 1;
    }
    ftl_loader_stats prev = {0}, s;
    double t0 = now();
    ftl_batch b;
    volatile uint64_t sink = 0;
    for (;;) {
        ftl_status st = ftl_loader_next(l, &b);
        if (st != FTL_OK) {
            fprintf(stderr, "bench_loader: %s\n", ftl_last_error());
            return 1;
        }
        if (b.rows == 0) break;
        sink += b.values[0];
        if (compute_ms > 0) {
            double until = now() + compute_ms * 1e-3;
            while (now() < until) sink++;
        }
        if (b.last_in_epoch) {
            double t1 = now();
            ftl_loader_stats_get(l, &s);
            double secs = t1 - t0;
            int64_t rows = s.rows - prev.rows;
            printf("{\"epoch\": %lld, \"threads\": %d, \"batch\": %d, \"rows\": %lld, \"seconds\": %.4f, \"rows_per_s\": %.1f, "
                   "\"MB_per_s\": %.1f, \"wait_s\": %.4f, \"wait_fraction\": %.4f, \"cache_hits\": %lld, \"cache_misses\": %lld}\n",
                   (long long)b.epoch, o.threads, o.batch_size, (long long)rows, secs, (double)rows / secs,
                   (double)rows * (double)b.row_bytes / secs / 1e6, s.wait_seconds - prev.wait_seconds,
                   (s.wait_seconds - prev.wait_seconds) / secs, (long long)(s.cache_hits - prev.cache_hits),
                   (long long)(s.cache_misses - prev.cache_misses));
            fflush(stdout);
            prev = s;
            t0 = now();
        }
    }
    ftl_loader_close(l);
    return sink == 42 ? 3 : 0;
}
