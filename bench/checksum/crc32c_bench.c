/* Checksum throughput: CRC32C (the tensor checksums of model files and checkpoints) on both code
 * paths, zlib's CRC-32 (Parquet page CRCs, the feature cache's check) and memcpy as the ceiling,
 * each on sizes from a small tensor to a large one; then loading a safetensors file of many
 * tensors (open + every tensor read) with and without checksums, the cost the check adds.
 * GB/s = 10^9 bytes/s; each number is the median of the runs.
 *
 *   crc32c_bench [--mib N] [--runs K] [--out DIR]   (default 256 MiB, 7 runs, build/bench-tmp)
 * Prints one JSON line per measurement. */
#include "ftl.h"
#include "util/crc32c.h"
#include "util/fsutil.h"
#include "util/json.h"
#include "../bench_clock.h"
#include "util/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum { MAX_RUNS = 64 };

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef enum { KIND_PORTABLE, KIND_HARDWARE, KIND_ZLIB, KIND_MEMCPY } kind;
static const char *kind_name[] = {"crc32c_portable", "crc32c_sse42", "crc32_zlib", "memcpy"};

/* Seconds for one pass of `kind` over `total` bytes in pieces of `size` (the sink keeps the
 * compiler from dropping the work). */
static double one_pass(kind k, const uint8_t *src, uint8_t *dst, size_t total, size_t size, uint64_t *sink) {
    double t = bench_now();
    for (size_t at = 0; at + size <= total; at += size) {
        switch (k) {
        case KIND_PORTABLE: *sink += ftl_crc32c_portable(0, src + at, size); break;
        case KIND_HARDWARE: *sink += ftl_crc32c_hardware(0, src + at, size); break;
        case KIND_ZLIB: *sink += crc32(0, src + at, (uInt)size); break;
        case KIND_MEMCPY: memcpy(dst + at, src + at, size); *sink += dst[at]; break;
        }
    }
    return bench_now() - t;
}

/* A file of `count` F32 tensors of `floats` values each, written by ftl (with checksums) or by hand
 * without the checksum entry (as files written before them). */
static ftl_status write_model(const char *path, int count, size_t floats, const float *data, bool checksums) {
    if (checksums) {
        ftl_safetensors_writer *w = ftl_safetensors_writer_new();
        int64_t shape[1] = {(int64_t)floats};
        char name[32];
        for (int i = 0; i < count; i++) {
            snprintf(name, sizeof name, "t%03d", i);
            ftl_safetensors_writer_add(w, name, FTL_DTYPE_F32, 1, shape, data + (size_t)i * floats);
        }
        ftl_status s = ftl_safetensors_writer_write(w, path);
        ftl_safetensors_writer_free(w);
        return s;
    }
    ftl_strbuf h = {0};
    ftl_strbuf_append(&h, "{", 1);
    for (int i = 0; i < count; i++)
        ftl_strbuf_printf(&h, "%s\"t%03d\":{\"dtype\":\"F32\",\"shape\":[%zu],\"data_offsets\":[%zu,%zu]}", i ? "," : "", i,
                          floats, (size_t)i * floats * 4, (size_t)(i + 1) * floats * 4);
    ftl_strbuf_append(&h, "}", 1);
    while ((8 + h.len) % 8) ftl_strbuf_append(&h, " ", 1);
    FILE *fp = fopen(path, "wb");
    uint64_t n = h.len;
    bool ok = fp && fwrite(&n, 8, 1, fp) == 1 && fwrite(h.data, 1, h.len, fp) == h.len &&
              fwrite(data, 4, (size_t)count * floats, fp) == (size_t)count * floats;
    ok = fp && fclose(fp) == 0 && ok;
    ftl_strbuf_free(&h);
    return ok ? FTL_OK : FTL_E_IO;
}

/* Seconds to open the file and read every tensor into dst (the file in the page cache). */
static double load_model(const char *path, int count, size_t floats, float *dst) {
    double t = bench_now();
    ftl_safetensors *st;
    if (ftl_safetensors_open(path, &st) != FTL_OK) {
        fprintf(stderr, "crc32c_bench: %s\n", ftl_last_error());
        exit(1);
    }
    int64_t shape[1] = {(int64_t)floats};
    char name[32];
    for (int i = 0; i < count; i++) {
        snprintf(name, sizeof name, "t%03d", i);
        if (ftl_safetensors_read(st, name, FTL_DTYPE_F32, 1, shape, dst + (size_t)i * floats, floats * 4) != FTL_OK) {
            fprintf(stderr, "crc32c_bench: %s\n", ftl_last_error());
            exit(1);
        }
    }
    ftl_safetensors_close(st);
    return bench_now() - t;
}

int main(int argc, char **argv) {
    size_t mib = 256;
    int runs = 7;
    const char *out = "build/bench-tmp";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--mib") == 0) mib = (size_t)atol(argv[i + 1]);
        else if (strcmp(argv[i], "--runs") == 0) runs = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--out") == 0) out = argv[i + 1];
    }
    if (mib < 1 || runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "usage: crc32c_bench [--mib N>=1] [--runs 1..%d] [--out DIR]\n", MAX_RUNS);
        return 2;
    }
    size_t total = mib << 20;
    uint8_t *src = malloc(total), *dst = malloc(total);
    if (!src || !dst) return 1;
    uint64_t x = 88172645463325252ull, sink = 0;
    for (size_t i = 0; i < total; i++) { /* xorshift bytes: nothing compresses or repeats */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        src[i] = (uint8_t)x;
    }
    memcpy(dst, src, total); /* pages touched before timing */
    static const size_t sizes[] = {4096, 65536, 1 << 20, 0};
    bool hardware = ftl_crc32c_hardware_available();
    for (int k = 0; k <= KIND_MEMCPY; k++) {
        if (k == KIND_HARDWARE && !hardware) {
            printf("{\"what\": \"%s\", \"skipped\": \"this CPU has no SSE4.2\"}\n", kind_name[k]);
            continue;
        }
        for (int si = 0; si < 4; si++) {
            size_t size = sizes[si] ? sizes[si] : total;
            double t[MAX_RUNS];
            for (int r = 0; r < runs; r++) t[r] = one_pass((kind)k, src, dst, total, size, &sink);
            double s = median(t, runs);
            printf("{\"what\": \"%s\", \"piece_bytes\": %zu, \"total_bytes\": %zu, \"gb_per_s\": %.2f}\n", kind_name[k], size,
                   total - total % size, (double)(total - total % size) / s / 1e9);
        }
    }
    fflush(stdout);
    /* Loading: 64 tensors over the buffer's bytes, verified (ftl's files) and unverifiable (older ones). */
    if (ftl_make_dirs(out) != FTL_OK) {
        fprintf(stderr, "crc32c_bench: %s\n", ftl_last_error());
        return 1;
    }
    int count = 64;
    size_t floats = total / 4 / (size_t)count;
    char *with = ftl_format("%s/crc32c_bench_with.safetensors", out), *without = ftl_format("%s/crc32c_bench_without.safetensors", out);
    if (write_model(with, count, floats, (const float *)src, true) != FTL_OK ||
        write_model(without, count, floats, (const float *)src, false) != FTL_OK) {
        fprintf(stderr, "crc32c_bench: cannot write %s: %s\n", out, ftl_last_error());
        return 1;
    }
    ftl_log_set_level(FTL_LOG_WARN); /* the note on the file without checksums, once */
    double tw[MAX_RUNS], to[MAX_RUNS];
    for (int r = 0; r < runs; r++) { /* interleaved: the machine may be shared */
        tw[r] = load_model(with, count, floats, (float *)dst);
        to[r] = load_model(without, count, floats, (float *)dst);
    }
    double sw = median(tw, runs), so = median(to, runs);
    printf("{\"what\": \"safetensors_load\", \"tensors\": %d, \"bytes\": %zu, \"with_checksums_s\": %.4f, "
           "\"without_checksums_s\": %.4f, \"checksum_overhead_percent\": %.1f, \"crc32c_path\": \"%s\"}\n",
           count, (size_t)count * floats * 4, sw, so, 100.0 * (sw - so) / so, hardware ? "sse4.2" : "portable");
    unlink(with), unlink(without);
    free(with), free(without), free(src), free(dst);
    return sink == 42 ? 3 : 0;
}
