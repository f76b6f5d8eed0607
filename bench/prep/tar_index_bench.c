/* The tar index on a WebDataset shard: how long indexing takes (headers only: the bytes it reads are
 * counted too), grouping the members into samples, reading every label, and reading every member
 * with 1 and T threads. The shard is written once by GNU tar from a folder of SAMPLES samples
 * (KEY.jpg of synthetic bytes around --jpg-bytes, KEY.cls), 2 members each; the page cache is warm
 * (the median of --runs runs after one unmeasured run), as it is when prep reads a shard it has
 * just indexed.
 *
 *   tar_index_bench [--samples 5000] [--jpg-bytes 16384] [--format gnu|pax|ustar] [--runs 5]
 *                   [--threads 2] [--out DIR]
 */
#include "../bench_clock.h"
#include "data/tar_index.h"
#include "data/webdataset.h"
#include "util/alloc.h"
#include "util/fsutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct opts {
    int samples, jpg_bytes, runs, threads;
    const char *format, *out;
} opts;

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static long long bytes_read_so_far(void) {
    FILE *f = fopen("/proc/self/io", "r");
    long long v = -1;
    char line[128];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "rchar: %lld", &v) == 1) break;
    if (f) fclose(f);
    return v;
}

/* SAMPLES samples in DIR/tree/NNN/KEY.{jpg,cls} (100 per folder), then GNU tar's shard of them. */
static char *make_shard(const opts *o) {
    char *shard = ftl_format("%s/shard-%s-%d-%d.tar", o->out, o->format, o->samples, o->jpg_bytes);
    if (ftl_path_exists(shard)) return shard;
    char *tree = ftl_format("%s/tree-%d-%d", o->out, o->samples, o->jpg_bytes);
    char *list = ftl_format("%s/list-%d", o->out, o->samples);
    ftl_remove_tree(tree);
    FILE *names = fopen(list, "w");
    uint8_t *body = ftl_xmalloc((size_t)o->jpg_bytes * 2);
    for (int i = 0; i < o->samples && names; i++) {
        size_t size = (size_t)o->jpg_bytes / 2 + (size_t)((i * 7919) % o->jpg_bytes); /* 0.5x .. 1.5x */
        for (size_t j = 0; j < size; j++) body[j] = (uint8_t)(j * 31 + (size_t)i);
        char *folder = ftl_format("%s/%03d", tree, i / 100);
        if (i % 100 == 0) ftl_make_dirs(folder);
        char *jpg = ftl_format("%s/%06d.jpg", folder, i), *cls = ftl_format("%s/%06d.cls", folder, i);
        char label[16];
        snprintf(label, sizeof label, "%d\n", i % 257);
        if (ftl_write_file_atomic(jpg, body, size) != FTL_OK || ftl_write_file_atomic(cls, label, strlen(label)) != FTL_OK) {
            fprintf(stderr, "cannot write %s: %s\n", jpg, ftl_last_error());
            exit(1);
        }
        fprintf(names, "%03d/%06d.jpg\n%03d/%06d.cls\n", i / 100, i, i / 100, i);
        free(jpg), free(cls), free(folder);
    }
    if (names) fclose(names);
    free(body);
    char *cmd = ftl_format("tar --format=%s -cf '%s' -C '%s' --no-recursion -T '%s'", o->format, shard, tree, list);
    int rc = system(cmd);
    ftl_remove_tree(tree);
    if (rc != 0) {
        fprintf(stderr, "failed: %s\n", cmd);
        exit(1);
    }
    free(cmd), free(list), free(tree);
    return shard;
}

typedef struct read_job {
    const tar_index *t;
    size_t first, step;
    uint64_t bytes;
} read_job;

static void *read_members(void *arg) {
    read_job *j = arg;
    for (size_t i = j->first; i < j->t->count; i += j->step) {
        uint8_t *data;
        size_t n;
        if (tar_index_read(j->t, i, &data, &n) != FTL_OK) {
            fprintf(stderr, "%s\n", ftl_last_error());
            exit(1);
        }
        j->bytes += n;
        free(data);
    }
    return NULL;
}

static uint64_t read_all(const tar_index *t, int threads) {
    pthread_t tid[64];
    read_job jobs[64];
    uint64_t bytes = 0;
    for (int i = 0; i < threads; i++) {
        jobs[i] = (read_job){t, (size_t)i, (size_t)threads, 0};
        pthread_create(&tid[i], NULL, read_members, &jobs[i]);
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        bytes += jobs[i].bytes;
    }
    return bytes;
}

int main(int argc, char **argv) {
    opts o = {.samples = 5000, .jpg_bytes = 16384, .runs = 5, .threads = 2, .format = "gnu", .out = "build/bench-tmp/tar"};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--samples")) o.samples = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--jpg-bytes")) o.jpg_bytes = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--runs")) o.runs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) o.threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--format")) o.format = argv[i + 1];
        else if (!strcmp(argv[i], "--out")) o.out = argv[i + 1];
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (o.samples < 1 || o.jpg_bytes < 2 || o.runs < 1 || o.runs > 99 || o.threads < 1 || o.threads > 64) return 2;
    ftl_make_dirs(o.out);
    char *shard = make_shard(&o);
    uint64_t file_size = 0;
    ftl_file_size(shard, &file_size);
    double t_index[100], t_group[100], t_labels[100], t_read1[100], t_readn[100];
    long long index_bytes = -1;
    size_t members = 0;
    uint64_t data_bytes = 0;
    for (int r = 0; r <= o.runs; r++) { /* run 0 warms the page cache and is not counted */
        double t0 = bench_now();
        long long b0 = bytes_read_so_far();
        tar_index *t;
        webdataset_sample_list *l;
        if (tar_index_open(shard, &t) != FTL_OK) {
            fprintf(stderr, "%s\n", ftl_last_error());
            return 1;
        }
        double t1 = bench_now();
        long long b1 = bytes_read_so_far();
        if (webdataset_samples(t, &l) != FTL_OK) {
            fprintf(stderr, "%s\n", ftl_last_error());
            return 1;
        }
        double t2 = bench_now();
        for (size_t i = 0; i < l->count; i++) {
            webdataset_label label;
            if (webdataset_sample_label(t, &l->samples[i], &label) != FTL_OK || label.kind != WEBDATASET_LABEL_INDEX) {
                fprintf(stderr, "sample %zu: %s\n", i, ftl_last_error());
                return 1;
            }
        }
        double t3 = bench_now();
        data_bytes = read_all(t, 1);
        double t4 = bench_now();
        read_all(t, o.threads);
        double t5 = bench_now();
        if (r > 0) {
            t_index[r - 1] = t1 - t0, t_group[r - 1] = t2 - t1, t_labels[r - 1] = t3 - t2;
            t_read1[r - 1] = t4 - t3, t_readn[r - 1] = t5 - t4;
        }
        if (b0 >= 0 && b1 >= 0) index_bytes = b1 - b0;
        members = t->count;
        webdataset_samples_free(l);
        tar_index_close(t);
    }
    double mi = median(t_index, o.runs), mg = median(t_group, o.runs), ml = median(t_labels, o.runs);
    double m1 = median(t_read1, o.runs), mn = median(t_readn, o.runs);
    printf("shard: %s (%s format, %zu members, %.1f MB; warm page cache; median of %d runs)\n", shard, o.format, members,
           (double)file_size / 1e6, o.runs);
    printf("index:          %8.2f ms  (%.0f members/s; read %lld bytes of the file's %llu)\n", 1e3 * mi, (double)members / mi,
           index_bytes, (unsigned long long)file_size);
    printf("group samples:  %8.2f ms\n", 1e3 * mg);
    printf("read %d labels: %8.2f ms  (%.0f labels/s)\n", o.samples, 1e3 * ml, (double)o.samples / ml);
    printf("read members, 1 thread:  %8.2f ms  (%.0f members/s, %.0f MB/s)\n", 1e3 * m1, (double)members / m1,
           (double)data_bytes / 1e6 / m1);
    printf("read members, %d threads: %8.2f ms  (%.0f members/s, %.0f MB/s)\n", o.threads, 1e3 * mn, (double)members / mn,
           (double)data_bytes / 1e6 / mn);
    free(shard);
    return 0;
}
