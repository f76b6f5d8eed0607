/* Feature rows from cache parts, in memory or streamed through an LRU set of row groups. */
#include "pipeline/feature_store.h"
#include "data/dataset.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

static ftl_status open_file(feature_store_file *f, const feature_part *p, int64_t *dim) {
    f->path = ftl_strdup(p->path);
    f->begin = p->begin;
    f->end = p->end;
    FTL_TRY(ftl_parquet_open(p->path, &f->parquet));
    f->features_column = ftl_parquet_find_column(f->parquet, FTL_COLUMN_FEATURES);
    f->label_column = ftl_parquet_find_column(f->parquet, FTL_COLUMN_LABEL);
    if (f->features_column < 0 || f->label_column < 0)
        return ftl_fail(FTL_E_FORMAT, "%s: not a features file (no '%s' and '%s' columns)", p->path, FTL_COLUMN_FEATURES,
                        FTL_COLUMN_LABEL);
    const ftl_parquet_column_info *fc = ftl_parquet_column(f->parquet, f->features_column);
    const ftl_parquet_column_info *lc = ftl_parquet_column(f->parquet, f->label_column);
    if (fc->type != FTL_PARQUET_FIXED_LEN_BYTE_ARRAY || fc->fixed_length <= 0 || fc->fixed_length % 4 != 0 ||
        lc->type != FTL_PARQUET_INT32)
        return ftl_fail(FTL_E_FORMAT, "%s: features must be FIXED_LEN_BYTE_ARRAY of float32 and labels INT32", p->path);
    int64_t d = fc->fixed_length / 4;
    if (*dim && d != *dim)
        return ftl_fail(FTL_E_FORMAT, "%s: features have %lld floats, other parts %lld", p->path, (long long)d, (long long)*dim);
    *dim = d;
    if (ftl_parquet_num_rows(f->parquet) != p->end - p->begin)
        return ftl_fail(FTL_E_FORMAT, "%s: %lld rows, but its name says rows %lld-%lld: rebuild the cache", p->path,
                        (long long)ftl_parquet_num_rows(f->parquet), (long long)p->begin, (long long)p->end);
    f->groups = ftl_parquet_num_row_groups(f->parquet);
    f->group_first = ftl_xmalloc((size_t)(f->groups + 1) * sizeof *f->group_first);
    int64_t at = 0;
    for (int g = 0; g < f->groups; g++) {
        f->group_first[g] = at;
        at += ftl_parquet_row_group_rows(f->parquet, g);
    }
    f->group_first[f->groups] = at;
    return FTL_OK;
}

/* Decodes row group g of file f into dst (rows x dim floats, labels). */
static ftl_status read_group(feature_store *s, feature_store_file *f, int g, float *features, int32_t *labels,
                             int64_t *rows) {
    int64_t n = f->group_first[g + 1] - f->group_first[g];
    FTL_TRY(ftl_parquet_read_column(f->parquet, g, f->features_column, &s->values));
    if (s->values.rows != n || s->values.null_count)
        return ftl_fail(FTL_E_FORMAT, "%s: row group %d: bad features column", f->path, g);
    memcpy(features, s->values.values, (size_t)(n * s->dim) * sizeof(float));
    FTL_TRY(ftl_parquet_read_column(f->parquet, g, f->label_column, &s->values));
    if (s->values.rows != n || s->values.null_count)
        return ftl_fail(FTL_E_FORMAT, "%s: row group %d: bad label column", f->path, g);
    memcpy(labels, s->values.values, (size_t)n * sizeof(int32_t));
    *rows = n;
    s->row_groups_read++;
    return FTL_OK;
}

static int64_t largest_group(const feature_store *s) {
    int64_t most = 1;
    for (int i = 0; i < s->file_count; i++)
        for (int g = 0; g < s->files[i].groups; g++) {
            int64_t n = s->files[i].group_first[g + 1] - s->files[i].group_first[g];
            if (n > most) most = n;
        }
    return most;
}

ftl_status feature_store_open(feature_store *s, const feature_part *parts, int part_count, int64_t begin, int64_t end,
                              bool in_memory, int64_t stream_cache_bytes) {
    memset(s, 0, sizeof *s);
    s->begin = begin;
    s->end = end;
    s->in_memory = in_memory;
    s->files = ftl_xcalloc((size_t)(part_count ? part_count : 1), sizeof *s->files);
    ftl_status st = FTL_OK;
    int64_t covered = begin;
    /* Parts sorted by begin are taken in order; each covers from where the last one stopped. */
    for (int i = 0; i < part_count && st == FTL_OK && covered < end; i++) {
        if (parts[i].end <= covered || parts[i].begin >= end) continue;
        if (parts[i].begin > covered) break;
        feature_store_file *f = &s->files[s->file_count++];
        st = open_file(f, &parts[i], &s->dim);
        f->use_begin = covered;
        f->use_end = parts[i].end < end ? parts[i].end : end;
        covered = f->use_end;
    }
    if (st == FTL_OK && covered < end)
        st = ftl_fail(FTL_E_INTERNAL, "the feature cache parts do not cover rows %lld-%lld", (long long)covered, (long long)end);
    if (st == FTL_OK && s->dim == 0 && end > begin) st = ftl_fail(FTL_E_INTERNAL, "no feature cache part opened");
    if (st == FTL_OK && in_memory) {
        int64_t rows = end - begin;
        s->features = malloc((size_t)(rows * s->dim) * sizeof(float) + 1);
        s->labels = malloc((size_t)rows * sizeof(int32_t) + 1);
        if (!s->features || !s->labels)
            st = ftl_fail(FTL_E_NOMEM, "not enough memory for %lld feature vectors of %lld floats (lower --max-memory to stream them)",
                          (long long)rows, (long long)s->dim);
        int64_t most = largest_group(s);
        float *gf = ftl_xmalloc((size_t)(most * s->dim) * sizeof(float) + 1);
        int32_t *gl = ftl_xmalloc((size_t)most * sizeof(int32_t) + 1);
        for (int i = 0; i < s->file_count && st == FTL_OK; i++) {
            feature_store_file *f = &s->files[i];
            for (int g = 0; g < f->groups && st == FTL_OK; g++) {
                int64_t lo = f->begin + f->group_first[g], hi = f->begin + f->group_first[g + 1];
                if (hi <= f->use_begin || lo >= f->use_end) continue;
                int64_t n;
                st = read_group(s, f, g, gf, gl, &n);
                int64_t from = lo > f->use_begin ? lo : f->use_begin, to = hi < f->use_end ? hi : f->use_end;
                if (st == FTL_OK) {
                    memcpy(s->features + (from - begin) * s->dim, gf + (from - lo) * s->dim,
                           (size_t)((to - from) * s->dim) * sizeof(float));
                    memcpy(s->labels + (from - begin), gl + (from - lo), (size_t)(to - from) * sizeof(int32_t));
                }
            }
        }
        free(gf);
        free(gl);
    } else if (st == FTL_OK) {
        int64_t most = largest_group(s);
        int64_t slot_bytes = most * s->dim * 4;
        s->slot_count = (int)(stream_cache_bytes / (slot_bytes ? slot_bytes : 1));
        if (s->slot_count < 4) s->slot_count = 4;
        if (s->slot_count > 4096) s->slot_count = 4096;
        s->slots = ftl_xcalloc((size_t)s->slot_count, sizeof *s->slots);
        for (int i = 0; i < s->slot_count; i++) {
            s->slots[i].file = s->slots[i].group = -1;
            s->slots[i].features = ftl_xmalloc((size_t)(most * s->dim) * sizeof(float) + 1);
            s->slots[i].labels = ftl_xmalloc((size_t)most * sizeof(int32_t) + 1);
        }
    }
    if (st != FTL_OK) feature_store_close(s);
    return st;
}

ftl_status feature_store_get(feature_store *s, int64_t row, const float **features, int32_t *label) {
    if (row < s->begin || row >= s->end)
        return ftl_fail(FTL_E_INTERNAL, "row %lld is not among this rank's cached rows %lld-%lld", (long long)row,
                        (long long)s->begin, (long long)s->end);
    if (s->in_memory) {
        *features = s->features + (row - s->begin) * s->dim;
        *label = s->labels[row - s->begin];
        return FTL_OK;
    }
    int fi = 0;
    while (fi + 1 < s->file_count && row >= s->files[fi].use_end) fi++;
    feature_store_file *f = &s->files[fi];
    int64_t local = row - f->begin;
    int lo = 0, hi = f->groups - 1;
    while (lo < hi) { /* the row group holding `local` */
        int mid = (lo + hi + 1) / 2;
        if (f->group_first[mid] <= local) lo = mid;
        else hi = mid - 1;
    }
    int g = lo;
    feature_store_slot *slot = NULL, *victim = &s->slots[0];
    for (int i = 0; i < s->slot_count && !slot; i++) {
        if (s->slots[i].file == fi && s->slots[i].group == g) slot = &s->slots[i];
        else if (s->slots[i].used < victim->used) victim = &s->slots[i];
    }
    if (!slot) {
        slot = victim;
        slot->file = slot->group = -1;
        FTL_TRY(read_group(s, f, g, slot->features, slot->labels, &slot->rows));
        slot->file = fi;
        slot->group = g;
    }
    slot->used = ++s->clock;
    int64_t k = local - f->group_first[g];
    *features = slot->features + k * s->dim;
    *label = slot->labels[k];
    return FTL_OK;
}

void feature_store_close(feature_store *s) {
    for (int i = 0; i < s->file_count; i++) {
        free(s->files[i].path);
        free(s->files[i].group_first);
        ftl_parquet_close(s->files[i].parquet);
    }
    free(s->files);
    for (int i = 0; s->slots && i < s->slot_count; i++) {
        free(s->slots[i].features);
        free(s->slots[i].labels);
    }
    free(s->slots);
    free(s->features);
    free(s->labels);
    ftl_parquet_column_values_free(&s->values);
    memset(s, 0, sizeof *s);
}
