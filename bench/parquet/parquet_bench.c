/* Parquet throughput on image rows, the loader's workload: write and read a ~100 MB file of
 * S x S x 3 images (real photos centre-cropped from a JPEG folder, so compression sees real
 * pixels; or synthetic ones), per codec. Reports MB/s of image bytes (1 MB = 10^6 bytes), the
 * median of several runs, next to a raw pread of the same file as the ceiling.
 *
 *   parquet_bench [--images DIR] [--rows N] [--size S] [--row-group-bytes B] [--runs K]
 *                 [--threads T] [--out DIR]
 *   parquet_bench --read FILE [--runs K] [--threads T]   (time reading FILE's `image` column)
 *   --verify-crc 0: skip the page CRC check (on by default, as in the library)
 */
#include "ftl.h"
#include "util/alloc.h"
#include "util/fsutil.h"
#include "util/timing.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>
#include <unistd.h>

typedef struct opts {
    const char *images, *out, *read;
    int rows, size, runs, threads;
    int64_t row_group_bytes;
} opts;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Centre crop (white padding where the photo is smaller) of a decoded JPEG. */
static bool load_jpeg(tjhandle tj, const char *path, int S, uint8_t *out) {
    uint8_t *buf;
    size_t n;
    if (ftl_read_file(path, &buf, &n) != FTL_OK) return false;
    int w, h, sub, cs;
    bool ok = false;
    if (tjDecompressHeader3(tj, buf, (unsigned long)n, &w, &h, &sub, &cs) == 0) {
        uint8_t *rgb = malloc((size_t)w * (size_t)h * 3);
        if (tjDecompress2(tj, buf, (unsigned long)n, rgb, w, 0, h, TJPF_RGB, 0) == 0) {
            memset(out, 255, (size_t)S * (size_t)S * 3);
            int x0 = (w - S) / 2, y0 = (h - S) / 2;
            for (int y = 0; y < S; y++) {
                int sy = y0 + y;
                if (sy < 0 || sy >= h) continue;
                for (int x = 0; x < S; x++) {
                    int sx = x0 + x;
                    if (sx >= 0 && sx < w) memcpy(out + ((size_t)y * S + x) * 3, rgb + ((size_t)sy * w + sx) * 3, 3);
                }
            }
            ok = true;
        }
        free(rgb);
    }
    free(buf);
    return ok;
}

static int collect_jpegs(const char *dir, char ***paths, int *count, int *cap) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *p = ftl_format("%s/%s", dir, e->d_name);
        if (ftl_is_directory(p)) {
            collect_jpegs(p, paths, count, cap);
            free(p);
        } else if (strstr(e->d_name, ".jpg") || strstr(e->d_name, ".jpeg")) {
            if (*count == *cap) {
                *cap = *cap ? *cap * 2 : 64;
                *paths = realloc(*paths, (size_t)*cap * sizeof **paths);
            }
            (*paths)[(*count)++] = p;
        } else {
            free(p);
        }
    }
    closedir(d);
    return *count;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static uint8_t *make_images(const opts *o) {
    size_t img = (size_t)o->size * o->size * 3;
    uint8_t *all = malloc(img * (size_t)o->rows);
    char **paths = NULL;
    int count = 0, cap = 0;
    if (o->images) collect_jpegs(o->images, &paths, &count, &cap);
    qsort(paths, (size_t)count, sizeof *paths, cmp_str);
    tjhandle tj = tjInitDecompress();
    int loaded = 0;
    for (int i = 0; i < o->rows; i++) {
        uint8_t *dst = all + img * (size_t)i;
        if (count && load_jpeg(tj, paths[i % count], o->size, dst)) {
            loaded++;
            continue;
        }
        /* synthetic: gradients, texture and a white border, roughly as compressible as photos */
        for (int y = 0; y < o->size; y++)
            for (int x = 0; x < o->size; x++)
                for (int c = 0; c < 3; c++) {
                    uint32_t h = (uint32_t)(x * 73856093u ^ y * 19349663u ^ (uint32_t)i * 83492791u ^ (uint32_t)c);
                    dst[((size_t)y * o->size + x) * 3 + c] = y < 20 ? 255 : (uint8_t)((x + y * 2 + i * 7 + c * 40) / 3 + (h >> 28));
                }
    }
    tjDestroy(tj);
    for (int i = 0; i < count; i++) free(paths[i]);
    free(paths);
    fprintf(stderr, "images: %d rows of %dx%dx3 (%s)\n", o->rows, o->size, o->size,
            loaded ? "centre crops of the JPEGs" : "synthetic");
    return all;
}

static double write_file(const opts *o, const uint8_t *images, const char *path, ftl_parquet_codec codec) {
    size_t img = (size_t)o->size * o->size * 3;
    int per_group = (int)(o->row_group_bytes / (int64_t)img);
    if (per_group < 1) per_group = 1;
    ftl_parquet_column_def defs[2] = {{.name = "label", .type = FTL_PARQUET_INT32}, {.name = "image", .type = FTL_PARQUET_BYTE_ARRAY}};
    ftl_parquet_writer_options wo = {.codec = codec};
    int32_t *labels = calloc((size_t)o->rows, 4);
    const uint8_t **ptrs = malloc((size_t)o->rows * sizeof *ptrs);
    uint32_t *lens = malloc((size_t)o->rows * 4);
    for (int i = 0; i < o->rows; i++) {
        labels[i] = i % 257;
        ptrs[i] = images + img * (size_t)i;
        lens[i] = (uint32_t)img;
    }
    double t0 = ftl_now();
    ftl_parquet_writer *w;
    ftl_status st = ftl_parquet_writer_open(path, defs, 2, &wo, &w);
    for (int r = 0; st == FTL_OK && r < o->rows; r += per_group) {
        int m = o->rows - r < per_group ? o->rows - r : per_group;
        ftl_parquet_column_data cols[2] = {{.values = labels + r}, {.byte_values = ptrs + r, .byte_lengths = lens + r}};
        st = ftl_parquet_writer_write_row_group(w, m, cols);
    }
    if (st == FTL_OK) st = ftl_parquet_writer_close(w);
    double t = ftl_now() - t0;
    free(labels);
    free(ptrs);
    free(lens);
    if (st != FTL_OK) {
        fprintf(stderr, "write failed: %s\n", ftl_last_error());
        exit(1);
    }
    return t;
}

typedef struct read_job {
    ftl_parquet_file *f;
    int first, step, column;
    int64_t bytes;
    ftl_parquet_column_values *v; /* kept between runs, as a loader keeps its buffers */
} read_job;

static ftl_parquet_column_values thread_values[64];
static int no_crc; /* --verify-crc 0 */

static void *read_groups(void *arg) {
    read_job *j = arg;
    for (int g = j->first; g < ftl_parquet_num_row_groups(j->f); g += j->step) {
        if (ftl_parquet_read_column(j->f, g, j->column, j->v) != FTL_OK) {
            fprintf(stderr, "read failed: %s\n", ftl_last_error());
            exit(1);
        }
        j->bytes += j->v->data_size;
    }
    return NULL;
}

static void release_buffers(void) {
    for (int i = 0; i < 64; i++) ftl_parquet_column_values_free(&thread_values[i]);
}

/* Reads the image column once; the first call after release_buffers() pays for fresh memory
 * (page faults), later ones reuse the buffers. */
static double read_file(const char *path, int threads, int64_t *bytes) {
    double t0 = ftl_now();
    ftl_parquet_file *f;
    if (ftl_parquet_open(path, &f) != FTL_OK) {
        fprintf(stderr, "%s\n", ftl_last_error());
        exit(1);
    }
    ftl_parquet_set_verify_crc(f, !no_crc);
    pthread_t th[64];
    read_job jobs[64];
    int col = ftl_parquet_find_column(f, "image");
    for (int i = 0; i < threads; i++) {
        jobs[i] = (read_job){f, i, threads, col, 0, &thread_values[i]};
        pthread_create(&th[i], NULL, read_groups, &jobs[i]);
    }
    *bytes = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        *bytes += jobs[i].bytes;
    }
    ftl_parquet_close(f);
    return ftl_now() - t0;
}

static double raw_read(const char *path) {
    double t0 = ftl_now();
    int fd = open(path, O_RDONLY);
    static uint8_t buf[1 << 20];
    while (read(fd, buf, sizeof buf) > 0) {
    }
    close(fd);
    return ftl_now() - t0;
}

int main(int argc, char **argv) {
    opts o = {.rows = 700, .size = 224, .runs = 5, .threads = 1, .row_group_bytes = 1 << 20, .out = "build/bench-tmp"};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--images")) o.images = argv[i + 1];
        else if (!strcmp(argv[i], "--rows")) o.rows = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--size")) o.size = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--runs")) o.runs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) o.threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--row-group-bytes")) o.row_group_bytes = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--out")) o.out = argv[i + 1];
        else if (!strcmp(argv[i], "--read")) o.read = argv[i + 1];
        else if (!strcmp(argv[i], "--verify-crc")) no_crc = !atoi(argv[i + 1]);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (o.runs < 1 || o.runs > 50 || o.threads < 1 || o.threads > 64 || o.rows < 1) return 2;
    if (o.read) { /* an existing file, e.g. one written by another engine */
        double t[50];
        int64_t bytes = 0;
        double cold = read_file(o.read, o.threads, &bytes);
        for (int r = 0; r < o.runs; r++) t[r] = read_file(o.read, o.threads, &bytes);
        printf("%s: %.1f MB of image bytes; reused buffers: median %.1f ms, %.0f MB/s; fresh buffers: %.0f MB/s\n", o.read,
               (double)bytes / 1e6, median(t, o.runs) * 1e3, (double)bytes / 1e6 / median(t, o.runs), (double)bytes / 1e6 / cold);
        release_buffers();
        return 0;
    }
    ftl_make_dirs(o.out);
    uint8_t *images = make_images(&o);
    double image_mb = (double)o.rows * o.size * o.size * 3 / 1e6;
    static const ftl_parquet_codec codecs[] = {FTL_PARQUET_CODEC_NONE, FTL_PARQUET_CODEC_SNAPPY, FTL_PARQUET_CODEC_ZSTD};
    printf("%-8s %9s %10s %12s %12s %12s\n", "codec", "file MB", "write MB/s", "read MB/s", "raw pread", "read/raw");
    for (int c = 0; c < 3; c++) {
        char *path = ftl_format("%s/bench_%s.parquet", o.out, ftl_parquet_codec_name(codecs[c]));
        double tw[50], tr[50], traw[50];
        int64_t bytes = 0;
        for (int r = 0; r < o.runs; r++) tw[r] = write_file(&o, images, path, codecs[c]);
        /* interleave reads and raw reads so both see the same machine state; buffers are
         * reused between runs (steady state of a loader) */
        release_buffers();
        read_file(path, o.threads, &bytes);
        for (int r = 0; r < o.runs; r++) {
            tr[r] = read_file(path, o.threads, &bytes);
            traw[r] = raw_read(path);
        }
        uint64_t fsize = 0;
        ftl_file_size(path, &fsize);
        if ((double)bytes / 1e6 != image_mb) fprintf(stderr, "warning: read %lld image bytes\n", (long long)bytes);
        double w = median(tw, o.runs), rd = median(tr, o.runs), raw = median(traw, o.runs);
        printf("%-8s %9.1f %10.0f %12.0f %12.0f %12.2f\n", ftl_parquet_codec_name(codecs[c]), (double)fsize / 1e6, image_mb / w,
               image_mb / rd, (double)fsize / 1e6 / raw, raw / rd);
        unlink(path);
        free(path);
        release_buffers();
    }
    free(images);
    return 0;
}
