/* Reference-table readers for the image tests (see image_ref.h). */
#include "image_ref.h"
#include "test.h"
#include "util/alloc.h"
#include "util/fsutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *ref_dir_path(const char *name) {
    return ftl_format("%s/ref/image/%s", ftl_test_build_dir(), name);
}

/* Splits `line` on tabs in place; returns the field count. */
static int split_tabs(char *line, char **fields, int max) {
    int n = 0;
    char *p = line;
    while (n < max) {
        fields[n++] = p;
        char *t = strchr(p, '\t');
        if (!t) break;
        *t = 0;
        p = t + 1;
    }
    return n;
}

static char *read_text(const char *name) {
    char *path = ref_dir_path(name);
    uint8_t *data = NULL;
    size_t size = 0;
    if (ftl_read_file(path, &data, &size) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "reference %s is missing: run tests/ref/gen_image.sh "
                      "(make test does)", path);
        free(path);
        return NULL;
    }
    free(path);
    char *text = realloc(data, size + 1);
    text[size] = 0;
    return text;
}

#define COPY_FIELD(dst, src) snprintf((dst), sizeof(dst), "%s", (src))

int image_ref_load(const char *set, image_ref_row **rows) {
    *rows = NULL;
    char *text = read_text("recipe.tsv");
    if (!text) return 0;
    int n = 0, cap = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *f[11];
        if (split_tabs(line, f, 11) < 11) continue;
        if (set && strcmp(f[0], set)) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            *rows = realloc(*rows, (size_t)cap * sizeof **rows);
        }
        image_ref_row *r = &(*rows)[n++];
        memset(r, 0, sizeof *r);
        COPY_FIELD(r->set, f[0]);
        COPY_FIELD(r->root, f[1]);
        COPY_FIELD(r->path, f[2]);
        r->size = atoi(f[3]);
        r->ok = !strcmp(f[4], "ok");
        r->w = atoi(f[5]);
        r->h = atoi(f[6]);
        r->x = atoi(f[7]);
        r->y = atoi(f[8]);
        r->offset = atoll(f[9]);
        COPY_FIELD(r->note, f[10]);
    }
    free(text);
    if (n == 0) ftl_test_fail(__FILE__, __LINE__, "no rows of set %s in recipe.tsv", set ? set : "*");
    return n;
}

int resize_ref_load(resize_ref_row **rows) {
    *rows = NULL;
    char *text = read_text("resize.tsv");
    if (!text) return 0;
    int n = 0, cap = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *f[8];
        if (split_tabs(line, f, 8) < 8) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            *rows = realloc(*rows, (size_t)cap * sizeof **rows);
        }
        resize_ref_row *r = &(*rows)[n++];
        COPY_FIELD(r->name, f[0]);
        COPY_FIELD(r->filter, f[1]);
        r->sw = atoi(f[2]);
        r->sh = atoi(f[3]);
        r->dw = atoi(f[4]);
        r->dh = atoi(f[5]);
        r->src_offset = atoll(f[6]);
        r->dst_offset = atoll(f[7]);
    }
    free(text);
    if (n == 0) ftl_test_fail(__FILE__, __LINE__, "resize.tsv has no rows");
    return n;
}

void image_ref_path(const image_ref_row *r, char *out, size_t out_size) {
    if (!strcmp(r->root, "shared"))
        snprintf(out, out_size, "%s/%s", ftl_test_shared_dir(), r->path);
    else
        snprintf(out, out_size, "%s/ref/image/%s", ftl_test_build_dir(), r->path);
}

bool image_ref_read(const char *bin_name, long long offset, uint8_t *buf, size_t n) {
    char *path = ref_dir_path(bin_name);
    FILE *f = fopen(path, "rb");
    free(path);
    if (!f) return false;
    bool ok = fseeko(f, (off_t)offset, SEEK_SET) == 0 && fread(buf, 1, n, f) == n;
    fclose(f);
    return ok;
}

pixel_diff pixel_diff_of(const uint8_t *a, const uint8_t *b, size_t n) {
    pixel_diff d = {0, 0, 0};
    unsigned long long sum = 0;
    for (size_t i = 0; i < n; i++) {
        int e = a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
        sum += (unsigned)e;
        if (e > d.max_abs) d.max_abs = e;
        d.differing += e != 0;
    }
    d.mean_abs = n ? (double)sum / (double)n : 0;
    return d;
}
