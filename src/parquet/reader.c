/* Opening a Parquet file: footer read and validation, schema -> leaf columns, accessors. */
#include "parquet/codec.h"
#include "parquet/page_map.h"
#include "parquet/reader.h"
#include "util/alloc.h"
#include "util/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static int32_t value_width(int type, int32_t type_length) {
    switch (type) {
    case FTL_PARQUET_BOOLEAN: return 1;
    case FTL_PARQUET_INT32:
    case FTL_PARQUET_FLOAT: return 4;
    case FTL_PARQUET_INT64:
    case FTL_PARQUET_DOUBLE: return 8;
    case FTL_PARQUET_INT96: return 12;
    case FTL_PARQUET_FIXED_LEN_BYTE_ARRAY: return type_length;
    }
    return 0;
}

/* Leaf columns with their levels; a leaf is "nested" when it is not a direct, non-repeated
 * child of the root, "repeated" when it or a group holding it is (a list's or map's leaf).
 * Paths were validated by the metadata parser. */
static ftl_status build_columns(ftl_parquet_file *f) {
    const pq_file_metadata *md = &f->md;
    f->columns = ftl_xcalloc((size_t)md->schema_count, sizeof *f->columns);
    int remaining[THRIFT_MAX_DEPTH + 1], def[THRIFT_MAX_DEPTH + 1], rep[THRIFT_MAX_DEPTH + 1];
    size_t prefix_len[THRIFT_MAX_DEPTH + 1];
    char prefix[4096];
    int depth = 0, i = 1, n = 0;
    remaining[0] = md->schema[0].num_children;
    def[0] = rep[0] = 0;
    prefix_len[0] = 0;
    while (depth >= 0) {
        if (remaining[depth] == 0) {
            depth--;
            continue;
        }
        remaining[depth]--;
        const pq_schema_element *e = &md->schema[i++];
        int d = def[depth] + (e->repetition == PQ_OPTIONAL || e->repetition == PQ_REPEATED);
        int r = rep[depth] + (e->repetition == PQ_REPEATED);
        size_t base = prefix_len[depth], nl = strlen(e->name);
        if (base) prefix[base - 1] = '.';
        memcpy(prefix + base, e->name, nl + 1);
        if (e->num_children > 0) {
            depth++;
            remaining[depth] = e->num_children;
            def[depth] = d;
            rep[depth] = r;
            prefix_len[depth] = base + nl + 1;
        } else {
            pq_column *c = &f->columns[n++];
            c->element = e;
            c->info.name = ftl_strdup(prefix);
            c->info.type = (ftl_parquet_type)e->type;
            c->info.fixed_length = value_width(e->type, e->type_length);
            c->info.max_definition_level = d;
            c->info.max_repetition_level = r;
            c->info.optional = d > 0;
            c->info.nested = depth > 0 || r > 0;
            c->info.repeated = r > 0;
            if (e->converted_type >= 0) {
                snprintf(c->converted, sizeof c->converted, "%s", pq_converted_type_name(e->converted_type));
                c->info.converted_type = c->converted;
            }
            if (e->logical[0]) {
                snprintf(c->logical, sizeof c->logical, "%s", e->logical);
                c->info.logical_type = c->logical;
            }
            c->info.utf8 = e->converted_type == PQ_CONVERTED_UTF8 || strcmp(e->logical, "STRING") == 0;
            if (e->type == FTL_PARQUET_FIXED_LEN_BYTE_ARRAY && (e->type_length <= 0 || e->type_length > (1 << 30)))
                return ftl_fail(FTL_E_FORMAT, "%s: column '%s': FIXED_LEN_BYTE_ARRAY with bad type_length %d", f->path,
                                c->info.name, (int)e->type_length);
        }
    }
    f->column_count = n;
    return FTL_OK;
}

/* Every chunk: type matches the schema, sizes are sane, the byte range lies inside the data
 * area (after the leading magic, before the footer). */
static ftl_status validate_row_groups(ftl_parquet_file *f) {
    const pq_file_metadata *md = &f->md;
    int64_t total = 0;
    for (int g = 0; g < md->row_group_count; g++) {
        pq_row_group *rg = &md->row_groups[g];
        if (rg->num_rows < 0) return ftl_fail(FTL_E_FORMAT, "%s: row group %d: negative row count", f->path, g);
        if (rg->num_rows > INT64_MAX - total) return ftl_fail(FTL_E_FORMAT, "%s: row counts overflow", f->path);
        total += rg->num_rows;
        if (!rg->chunks && f->column_count > 0)
            return ftl_fail(FTL_E_FORMAT, "%s: row group %d has no column chunks", f->path, g);
        for (int c = 0; c < f->column_count; c++) {
            pq_chunk *ch = &rg->chunks[c];
            const char *name = f->columns[c].info.name;
            if (ch->path_mismatch)
                return ftl_fail(FTL_E_FORMAT, "%s: row group %d: column chunk %d's path differs from schema column '%s'", f->path, g, c, name);
            if (ch->type != (int)f->columns[c].info.type)
                return ftl_fail(FTL_E_FORMAT, "%s: row group %d, column '%s': chunk type %s differs from the schema's %s", f->path, g,
                                name, ftl_parquet_type_name((ftl_parquet_type)ch->type), ftl_parquet_type_name(f->columns[c].info.type));
            if (ch->num_values < 0 || ch->total_compressed_size < 0 || ch->total_uncompressed_size < 0)
                return ftl_fail(FTL_E_FORMAT, "%s: row group %d, column '%s': negative size or count", f->path, g, name);
            int64_t start = ch->data_page_offset;
            /* some writers store dictionary_page_offset = 0 for "none": trust it only when it
             * precedes the data pages */
            if (ch->has_dictionary_page_offset && ch->dictionary_page_offset >= 4 && ch->dictionary_page_offset < start)
                start = ch->dictionary_page_offset;
            uint64_t end = (uint64_t)start + (uint64_t)ch->total_compressed_size;
            if (start < 4 || (uint64_t)start > f->footer_start || end > f->footer_start)
                return ftl_fail(FTL_E_FORMAT,
                                "%s: row group %d, column '%s': column chunk [%lld, +%lld) lies outside the data area [4, %llu)",
                                f->path, g, name, (long long)start, (long long)ch->total_compressed_size,
                                (unsigned long long)f->footer_start);
            ch->start = start;
            ch->length = ch->total_compressed_size;
        }
    }
    if (total != md->num_rows)
        return ftl_fail(FTL_E_FORMAT, "%s: footer says %lld rows, its row groups hold %lld", f->path, (long long)md->num_rows,
                        (long long)total);
    return FTL_OK;
}

static ftl_status open_file(ftl_parquet_file *f) {
    f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0)
        return ftl_fail(errno == ENOENT ? FTL_E_NOT_FOUND : FTL_E_IO, "cannot open %s: %s", f->path, strerror(errno));
    struct stat st;
    if (fstat(f->fd, &st) != 0) return ftl_fail(FTL_E_IO, "cannot stat %s: %s", f->path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return ftl_fail(FTL_E_INVALID_ARG, "%s is a folder, not a Parquet file", f->path);
    f->file_size = (uint64_t)st.st_size;
    if (f->file_size < 12)
        return ftl_fail(FTL_E_FORMAT, "%s: not a Parquet file (%llu bytes; even an empty one has 12)", f->path,
                        (unsigned long long)f->file_size);
    uint8_t head[4], tail[8];
    FTL_TRY(pq_pread_full(f, head, 4, 0));
    FTL_TRY(pq_pread_full(f, tail, 8, f->file_size - 8));
    if (memcmp(tail + 4, PQ_MAGIC_ENCRYPTED, 4) == 0)
        return ftl_fail(FTL_E_UNSUPPORTED, "%s: encrypted Parquet files are not supported", f->path);
    if (memcmp(head, PQ_MAGIC, 4) != 0 || memcmp(tail + 4, PQ_MAGIC, 4) != 0)
        return ftl_fail(FTL_E_FORMAT, "%s: not a Parquet file (no PAR1 magic at its %s; truncated or not Parquet)", f->path,
                        memcmp(head, PQ_MAGIC, 4) != 0 ? "start" : "end");
    uint32_t len = (uint32_t)tail[0] | (uint32_t)tail[1] << 8 | (uint32_t)tail[2] << 16 | (uint32_t)tail[3] << 24;
    if ((uint64_t)len + 12 > f->file_size)
        return ftl_fail(FTL_E_FORMAT, "%s: footer length %u does not fit in the file (%llu bytes; truncated?)", f->path, len,
                        (unsigned long long)f->file_size);
    f->footer_start = f->file_size - 8 - len;
    f->footer_size = len;
    f->footer = ftl_xmalloc(len ? len : 1);
    FTL_TRY(pq_pread_full(f, f->footer, len, f->footer_start));
    const char *err = NULL;
    size_t off = 0;
    if (!pq_parse_file_metadata(f->footer, len, &f->md, &err, &off)) {
        ftl_status code = strstr(err, "not supported") ? FTL_E_UNSUPPORTED : FTL_E_FORMAT;
        return ftl_fail(code, "%s: corrupt footer: %s (footer byte %zu of %u)", f->path, err, off, len);
    }
    if (f->md.schema_count < 1) return ftl_fail(FTL_E_FORMAT, "%s: corrupt footer: empty schema", f->path);
    if (f->md.num_rows < 0) return ftl_fail(FTL_E_FORMAT, "%s: corrupt footer: negative row count", f->path);
    FTL_TRY(build_columns(f));
    return validate_row_groups(f);
}

ftl_status ftl_parquet_open(const char *path, ftl_parquet_file **out) {
    *out = NULL;
    if (!path) return ftl_fail(FTL_E_INVALID_ARG, "ftl_parquet_open: no path");
    static atomic_uint_fast64_t opens;
    ftl_parquet_file *f = ftl_xcalloc(1, sizeof *f);
    f->open_id = atomic_fetch_add(&opens, 1) + 1;
    f->path = ftl_strdup(path);
    f->fd = -1;
    pthread_mutex_init(&f->cache_lock, NULL);
    ftl_status st = open_file(f);
    if (st != FTL_OK) {
        ftl_parquet_close(f);
        return st;
    }
    *out = f;
    return FTL_OK;
}

void ftl_parquet_close(ftl_parquet_file *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    pq_page_cache_free(f);
    pthread_mutex_destroy(&f->cache_lock);
    if (f->columns)
        for (int i = 0; i < f->md.schema_count; i++) free((char *)f->columns[i].info.name);
    free(f->columns);
    pq_file_metadata_free(&f->md);
    free(f->footer);
    free(f->path);
    free(f);
}

void ftl_parquet_set_verify_crc(ftl_parquet_file *f, bool verify) { f->skip_crc = !verify; }

const char *ftl_parquet_path(const ftl_parquet_file *f) { return f->path; }
uint64_t ftl_parquet_file_size(const ftl_parquet_file *f) { return f->file_size; }
int64_t ftl_parquet_num_rows(const ftl_parquet_file *f) { return f->md.num_rows; }
int ftl_parquet_num_row_groups(const ftl_parquet_file *f) { return f->md.row_group_count; }
int ftl_parquet_num_columns(const ftl_parquet_file *f) { return f->column_count; }
const char *ftl_parquet_created_by(const ftl_parquet_file *f) { return f->md.created_by ? f->md.created_by : ""; }
int ftl_parquet_format_version(const ftl_parquet_file *f) { return f->md.version; }

int64_t ftl_parquet_row_group_rows(const ftl_parquet_file *f, int g) {
    return g >= 0 && g < f->md.row_group_count ? f->md.row_groups[g].num_rows : 0;
}

ftl_status ftl_parquet_row_group_info_get(const ftl_parquet_file *f, int g, ftl_parquet_row_group_info *out) {
    if (g < 0 || g >= f->md.row_group_count)
        return ftl_fail(FTL_E_INVALID_ARG, "%s: row group %d out of range (the file has %d)", f->path, g, f->md.row_group_count);
    const pq_row_group *rg = &f->md.row_groups[g];
    memset(out, 0, sizeof *out);
    out->rows = rg->num_rows;
    out->total_byte_size = rg->total_byte_size;
    int64_t lo = INT64_MAX, hi = 0;
    for (int c = 0; c < f->column_count; c++) {
        const pq_chunk *ch = &rg->chunks[c];
        out->compressed_size += ch->length;
        if (ch->start < lo) lo = ch->start;
        if (ch->start + ch->length > hi) hi = ch->start + ch->length;
    }
    out->offset = f->column_count ? lo : 0;
    out->length = f->column_count ? hi - lo : 0;
    return FTL_OK;
}

const ftl_parquet_column_info *ftl_parquet_column(const ftl_parquet_file *f, int c) {
    return c >= 0 && c < f->column_count ? &f->columns[c].info : NULL;
}

int ftl_parquet_find_column(const ftl_parquet_file *f, const char *name) {
    for (int c = 0; c < f->column_count; c++)
        if (strcmp(f->columns[c].info.name, name) == 0) return c;
    return -1;
}

ftl_status ftl_parquet_chunk_info_get(const ftl_parquet_file *f, int g, int c, ftl_parquet_chunk_info *out) {
    if (g < 0 || g >= f->md.row_group_count)
        return ftl_fail(FTL_E_INVALID_ARG, "%s: row group %d out of range (the file has %d)", f->path, g, f->md.row_group_count);
    if (c < 0 || c >= f->column_count)
        return ftl_fail(FTL_E_INVALID_ARG, "%s: column %d out of range (the file has %d)", f->path, c, f->column_count);
    const pq_chunk *ch = &f->md.row_groups[g].chunks[c];
    memset(out, 0, sizeof *out);
    out->codec = (ftl_parquet_codec)ch->codec;
    out->encodings = ch->encodings;
    out->offset = ch->start;
    out->length = ch->length;
    out->num_values = ch->num_values;
    out->compressed_size = ch->total_compressed_size;
    out->uncompressed_size = ch->total_uncompressed_size;
    out->has_dictionary_page = ch->start < ch->data_page_offset;
    out->has_null_count = ch->stats.has_null_count;
    out->null_count = ch->stats.null_count;
    out->has_min_max = ch->stats.has_min && ch->stats.has_max;
    if (out->has_min_max) {
        out->min_value = ch->stats.min;
        out->max_value = ch->stats.max;
        out->min_length = ch->stats.min_len;
        out->max_length = ch->stats.max_len;
    }
    return FTL_OK;
}

int ftl_parquet_metadata_count(const ftl_parquet_file *f) { return f->md.kv_count; }

const char *ftl_parquet_metadata_key(const ftl_parquet_file *f, int i) {
    return i >= 0 && i < f->md.kv_count ? f->md.kv_keys[i] : NULL;
}

const char *ftl_parquet_metadata_value(const ftl_parquet_file *f, int i) {
    return i >= 0 && i < f->md.kv_count ? f->md.kv_values[i] : NULL;
}

const char *ftl_parquet_metadata_get(const ftl_parquet_file *f, const char *key) {
    for (int i = f->md.kv_count - 1; i >= 0; i--)
        if (strcmp(f->md.kv_keys[i], key) == 0) return f->md.kv_values[i];
    return NULL;
}
