/* Allreduce time and bandwidth through ftl's collectives (the stall-inspected MPI path the trainer
 * uses) for the head's gradient (2048 x 257 + 257 floats) and an Xception-sized buffer (20.9M
 * floats). usage: mpirun -np N allreduce_bench [REPEATS]: one line per size, the median over
 * REPEATS of rank 0's time, and the bus bandwidth as nccl-tests count it. */
#include "ftl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../bench_clock.h"

int main(int argc, char **argv) {
    const ftl_collectives *w;
    if (ftl_dist_init(NULL, &w) != FTL_OK) {
        fprintf(stderr, "%s\n", ftl_last_error());
        return 1;
    }
    int repeats = argc > 1 ? atoi(argv[1]) : 20;
    const struct { const char *name; size_t count; } sizes[] = {{"head 2048x257", 2048 * 257 + 257},
                                                                {"xception 20.9M", 20900000}};
    for (size_t k = 0; k < 2; k++) {
        size_t n = sizes[k].count;
        float *x = malloc(n * sizeof *x);
        for (size_t i = 0; i < n; i++) x[i] = 1.0f;
        double *t = malloc((size_t)repeats * sizeof *t);
        ftl_dist_barrier(w);
        ftl_dist_allreduce_f32(w, x, n); /* warm-up */
        for (int r = 0; r < repeats; r++) {
            ftl_dist_barrier(w);
            double t0 = bench_now();
            ftl_dist_allreduce_f32(w, x, n);
            t[r] = bench_now() - t0;
        }
        qsort(t, (size_t)repeats, sizeof *t, bench_cmp_double);
        double med = t[repeats / 2];
        double bytes = (double)n * 4;
        /* bus bandwidth, as nccl-tests: 2 (N-1)/N x bytes / time */
        double bus = med > 0 ? 2.0 * (w->world_size - 1) / w->world_size * bytes / med / 1e9 : 0;
        if (w->rank == 0)
            printf("allreduce %-16s np %d: median %.3f ms (min %.3f, max %.3f), %.2f GB/s bus bandwidth\n", sizes[k].name,
                   w->world_size, med * 1e3, t[0] * 1e3, t[repeats - 1] * 1e3, bus);
        free(x);
        free(t);
    }
    ftl_dist_finalize();
    return 0;
}
