/* Per-image prep throughput of ftl's recipe (read file, decode, reduce, Lanczos, paste) on a folder
 * of JPEGs, single- or multi-threaded, plus a decode/resample time split.
 *   bench_image DIR [--size 299] [--passes 3] [--threads 1] [--dct] [--split]
 * Prints one JSON line per measurement. Built by bench/image/run.sh (not part of `make all`). */
#include "ftl/image.h"
#include "image/image_internal.h"
#include "util/alloc.h"
#include "util/fsutil.h"
#include "util/timing.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

typedef struct file_list {
    char **paths;
    int n, cap;
} file_list;

static void list_jpegs(const char *dir, file_list *l) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *p = ftl_format("%s/%s", dir, e->d_name);
        if (ftl_is_directory(p)) {
            list_jpegs(p, l);
            free(p);
            continue;
        }
        const char *dot = strrchr(e->d_name, '.');
        if (dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"))) {
            if (l->n == l->cap) l->paths = ftl_xrealloc(l->paths, (size_t)(l->cap = l->cap ? 2 * l->cap : 256) * sizeof *l->paths);
            l->paths[l->n++] = p;
        } else {
            free(p);
        }
    }
    closedir(d);
}

/* CPU seconds of the whole process (all threads): on a shared machine this is what a core
 * spends per image, whoever else runs. */
static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

typedef struct job {
    file_list *files;
    int size;
    bool dct;
    atomic_int next;
    int failures;
} job;

static void *worker(void *arg) {
    job *j = arg;
    ftl_image_prepper *p;
    if (ftl_image_prepper_init(&p, j->size) != FTL_OK) return NULL;
    ftl_image_prepper_set_dct_scaling(p, j->dct);
    uint8_t *canvas = ftl_xmalloc((size_t)j->size * j->size * 3);
    for (;;) {
        int i = atomic_fetch_add(&j->next, 1);
        if (i >= j->files->n) break;
        uint8_t *data;
        size_t size;
        if (ftl_read_file(j->files->paths[i], &data, &size) != FTL_OK ||
            ftl_image_prepper_run(p, data, size, canvas, NULL) != FTL_OK) {
            fprintf(stderr, "%s: %s\n", j->files->paths[i], ftl_last_error());
            j->failures++;
        } else {
            free(data);
        }
    }
    free(canvas);
    ftl_image_prepper_free(p);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [--size S] [--passes N] [--threads T] [--dct] [--split]\n", argv[0]);
        return 2;
    }
    int size = 299, passes = 3, threads = 1;
    bool dct = false, split = false;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--size") && i + 1 < argc) size = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--passes") && i + 1 < argc) passes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dct")) dct = true;
        else if (!strcmp(argv[i], "--split")) split = true;
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    file_list files = {0};
    list_jpegs(argv[1], &files);
    if (!files.n) { fprintf(stderr, "no JPEGs under %s\n", argv[1]); return 1; }
    qsort(files.paths, (size_t)files.n, sizeof *files.paths, cmp_str);
    for (int i = 0; i < files.n; i++) { /* warm the page cache */
        uint8_t *d; size_t s;
        if (ftl_read_file(files.paths[i], &d, &s) == FTL_OK) free(d);
    }
    const char *kern = ftl_resample_kernels_get()->name;
    if (split) {
        /* Decode vs the rest (reduce + resample + paste), one thread, one pass after a warm-up. */
        ftl_image_decoder dec = {0};
        ftl_resample_scratch scr = {0};
        ftl_image img = {0}, red = {0}, th = {0};
        uint8_t *canvas = ftl_xmalloc((size_t)size * size * 3);
        double t_read = 0, t_dec = 0, t_red = 0, t_res = 0, t_paste = 0;
        for (int pass = 0; pass < 2; pass++) {
            t_read = t_dec = t_red = t_res = t_paste = 0;
            for (int i = 0; i < files.n; i++) {
                double t0 = ftl_now();
                uint8_t *data; size_t n;
                if (ftl_read_file(files.paths[i], &data, &n) != FTL_OK) continue;
                double t1 = ftl_now();
                if (ftl_image_decoder_run(&dec, data, n, 1, &img, NULL) != FTL_OK) { free(data); continue; }
                double t2 = ftl_now();
                ftl_thumb_plan plan;
                ftl_thumb_plan_make(img.width, img.height, size, &plan);
                const ftl_image *from = &img, *out = &img;
                if (plan.resize && (plan.reduce_x > 1 || plan.reduce_y > 1)) {
                    ftl_image_alloc(&red, (img.width + plan.reduce_x - 1) / plan.reduce_x, (img.height + plan.reduce_y - 1) / plan.reduce_y);
                    ftl_reduce_rgb(img.pixels, img.width, img.height, plan.reduce_x, plan.reduce_y, red.pixels);
                    from = &red;
                }
                double t3 = ftl_now();
                if (plan.resize) {
                    ftl_image_alloc(&th, plan.width, plan.height);
                    ftl_resample_rgb(&scr, from->pixels, from->width, from->height, plan.box, th.pixels, plan.width, plan.height, FTL_IMAGE_FILTER_LANCZOS);
                    out = &th;
                }
                double t4 = ftl_now();
                ftl_image_paste_centered(out, size, canvas);
                double t5 = ftl_now();
                t_read += t1 - t0; t_dec += t2 - t1; t_red += t3 - t2; t_res += t4 - t3; t_paste += t5 - t4;
                free(data);
            }
        }
        printf("{\"bench\": \"ftl_split\", \"images\": %d, \"size\": %d, \"kernels\": \"%s\", \"read_ms\": %.4f, "
               "\"decode_ms\": %.4f, \"reduce_ms\": %.4f, \"resample_ms\": %.4f, \"paste_ms\": %.4f}\n",
               files.n, size, kern, 1e3 * t_read / files.n, 1e3 * t_dec / files.n, 1e3 * t_red / files.n,
               1e3 * t_res / files.n, 1e3 * t_paste / files.n);
        ftl_image_decoder_free(&dec);
        ftl_resample_scratch_free(&scr);
        ftl_image_free(&img); ftl_image_free(&red); ftl_image_free(&th);
        free(canvas);
        return 0;
    }
    for (int pass = 0; pass <= passes; pass++) { /* pass 0 warms up */
        job j = {.files = &files, .size = size, .dct = dct};
        atomic_init(&j.next, 0);
        pthread_t tid[64];
        if (threads > 64) threads = 64;
        double t0 = ftl_now(), c0 = cpu_seconds();
        for (int t = 0; t < threads; t++) pthread_create(&tid[t], NULL, worker, &j);
        for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
        double dt = ftl_now() - t0, dc = cpu_seconds() - c0;
        if (pass > 0)
            printf("{\"bench\": \"ftl_prep\", \"images\": %d, \"size\": %d, \"threads\": %d, \"dct\": %s, "
                   "\"kernels\": \"%s\", \"seconds\": %.4f, \"images_per_s\": %.1f, \"cpu_seconds\": %.4f, "
                   "\"images_per_cpu_s\": %.1f, \"failures\": %d}\n",
                   files.n, size, threads, dct ? "true" : "false", kern, dt, files.n / dt, dc, files.n / dc,
                   j.failures);
        fflush(stdout);
    }
    return 0;
}
