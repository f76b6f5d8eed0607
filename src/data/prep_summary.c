/* The end-of-job report of `ftl prep`. */
#include "ftl/prep.h"

#include <stdlib.h>
#include <string.h>

static void print_bytes(FILE *out, uint64_t bytes) {
    if (bytes >= (1ull << 30)) fprintf(out, "%.2f GiB", (double)bytes / (double)(1ull << 30));
    else if (bytes >= (1ull << 20)) fprintf(out, "%.1f MiB", (double)bytes / (double)(1ull << 20));
    else fprintf(out, "%.1f KiB", (double)bytes / 1024.0);
}

void ftl_prep_summary_print(const ftl_prep_summary *s, FILE *out) {
    int64_t images = s->train_rows + s->val_rows;
    fprintf(out, "prep: %lld images (%lld train, %lld val) in %.2f s, %.1f images/s on %d thread%s; split: %s\n",
            (long long)images, (long long)s->train_rows, (long long)s->val_rows, s->seconds,
            s->seconds > 0 ? (double)images / s->seconds : 0.0, s->threads, s->threads == 1 ? "" : "s", s->split_method);
    int width = 5;
    for (int c = 0; c < s->class_count; c++) {
        int n = (int)strlen(s->class_names[c]);
        if (n > width) width = n < 40 ? n : 40;
    }
    fprintf(out, "  %-*s %8s %8s\n", width, "class", "train", "val");
    for (int c = 0; c < s->class_count; c++)
        fprintf(out, "  %-*.*s %8lld %8lld%s\n", width, width, s->class_names[c], (long long)s->train_counts[c],
                (long long)s->val_counts[c], s->train_counts[c] + s->val_counts[c] == 0 ? "  (empty)" : "");
    fprintf(out, "  files: train.parquet ");
    print_bytes(out, s->train_file_bytes);
    fprintf(out, ", val.parquet ");
    print_bytes(out, s->val_file_bytes);
    fprintf(out, "; read ");
    print_bytes(out, s->source_bytes);
    fprintf(out, " of images\n");
    if (s->keep_encoded)
        fprintf(out, "  kept encoded: %lld of %lld images (the others as pixels: their files are larger, or decoded with a warning)\n",
                (long long)s->encoded_rows, (long long)images);
    if (s->skipped_count > 0) {
        fprintf(out, "  skipped %lld file%s:\n", (long long)s->skipped_count, s->skipped_count == 1 ? "" : "s");
        for (int64_t i = 0; i < s->skipped_count; i++) fprintf(out, "    %s: %s\n", s->skipped[i].path, s->skipped[i].reason);
    } else {
        fprintf(out, "  skipped 0 files\n");
    }
    if (s->empty_class_count > 0) fprintf(out, "  %d empty class folder%s\n", s->empty_class_count, s->empty_class_count == 1 ? "" : "s");
}

void ftl_prep_summary_free(ftl_prep_summary *s) {
    for (int c = 0; c < s->class_count; c++) free(s->class_names[c]);
    free(s->class_names);
    free(s->train_counts);
    free(s->val_counts);
    for (int64_t i = 0; i < s->skipped_count; i++) {
        free(s->skipped[i].path);
        free(s->skipped[i].reason);
    }
    free(s->skipped);
    memset(s, 0, sizeof *s);
}
