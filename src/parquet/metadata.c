/* Parsing of FileMetaData (parquet.thrift field ids) from the compact protocol: schema, row
 * groups, column chunks, statistics, key-value metadata. Unknown fields are skipped; missing
 * required fields and wrong wire types are errors. */
#include "parquet/format.h"
#include "util/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *pq_converted_type_name(int t) {
    static const char *const names[PQ_CONVERTED_COUNT] = {
        "UTF8", "MAP", "MAP_KEY_VALUE", "LIST", "ENUM", "DECIMAL", "DATE", "TIME_MILLIS", "TIME_MICROS",
        "TIMESTAMP_MILLIS", "TIMESTAMP_MICROS", "UINT_8", "UINT_16", "UINT_32", "UINT_64", "INT_8",
        "INT_16", "INT_32", "INT_64", "JSON", "BSON", "INTERVAL"};
    return t >= 0 && t < PQ_CONVERTED_COUNT ? names[t] : "?";
}

const char *pq_page_type_name(int t) {
    switch (t) {
    case PQ_DATA_PAGE: return "DATA_PAGE";
    case PQ_INDEX_PAGE: return "INDEX_PAGE";
    case PQ_DICTIONARY_PAGE: return "DICTIONARY_PAGE";
    case PQ_DATA_PAGE_V2: return "DATA_PAGE_V2";
    }
    return "?";
}

static char *dup_bytes(const uint8_t *data, uint32_t n) {
    char *s = ftl_xmalloc((size_t)n + 1);
    if (n) memcpy(s, data, n);
    s[n] = '\0';
    return s;
}

static char *read_string(thrift_reader *r) {
    const uint8_t *d;
    uint32_t n;
    thrift_read_binary(r, &d, &n);
    return r->error ? NULL : dup_bytes(d, n);
}

/* Reads an i32 enum field; wire type must be I32. */
static int32_t read_i32_field(thrift_reader *r, int type) {
    if (!thrift_expect(r, type, THRIFT_I32)) return 0;
    return thrift_read_i32(r);
}

static int64_t read_i64_field(thrift_reader *r, int type) {
    if (type == THRIFT_I32 || type == THRIFT_I16) return thrift_read_i64(r); /* same varint */
    if (!thrift_expect(r, type, THRIFT_I64)) return 0;
    return thrift_read_i64(r);
}

/* Skips a struct's remaining fields: used for unions whose members are empty structs. */
static void skip_rest(thrift_reader *r, int16_t *last) {
    int t;
    int16_t id;
    while (thrift_next_field(r, last, &t, &id)) thrift_skip(r, t);
}

/* ---- LogicalType union -> a short description ---- */

static const char *time_unit_name(thrift_reader *r) {
    const char *unit = "?";
    if (!thrift_enter(r)) return unit;
    int16_t last = 0, id;
    int t;
    while (thrift_next_field(r, &last, &t, &id)) {
        if (t == THRIFT_STRUCT) unit = id == 1 ? "MILLIS" : id == 2 ? "MICROS" : id == 3 ? "NANOS" : "?";
        thrift_skip(r, t);
    }
    thrift_leave(r);
    return unit;
}

static void parse_logical_type(thrift_reader *r, char *out, size_t cap) {
    static const char *const simple[] = {NULL, "STRING", "MAP", "LIST", "ENUM", "DECIMAL", "DATE", "TIME",
                                         "TIMESTAMP", NULL, "INTEGER", "UNKNOWN", "JSON", "BSON", "UUID",
                                         "FLOAT16", "VARIANT", "GEOMETRY", "GEOGRAPHY"};
    snprintf(out, cap, "?");
    if (!thrift_enter(r)) return;
    int16_t last = 0, id;
    int t;
    while (thrift_next_field(r, &last, &t, &id)) {
        if (t != THRIFT_STRUCT) {
            thrift_skip(r, t);
            continue;
        }
        const char *name = id > 0 && id < (int)(sizeof simple / sizeof simple[0]) && simple[id] ? simple[id] : "?";
        if (!thrift_enter(r)) return;
        int16_t l2 = 0, f;
        int t2;
        if (id == 5) { /* DECIMAL: scale, precision */
            int32_t scale = 0, precision = 0;
            while (thrift_next_field(r, &l2, &t2, &f)) {
                if (f == 1 && t2 == THRIFT_I32) scale = thrift_read_i32(r);
                else if (f == 2 && t2 == THRIFT_I32) precision = thrift_read_i32(r);
                else thrift_skip(r, t2);
            }
            snprintf(out, cap, "DECIMAL(%d,%d)", (int)precision, (int)scale);
        } else if (id == 7 || id == 8) { /* TIME / TIMESTAMP: isAdjustedToUTC, unit */
            bool utc = false;
            const char *unit = "?";
            while (thrift_next_field(r, &l2, &t2, &f)) {
                if (f == 1 && (t2 == THRIFT_BOOL_TRUE || t2 == THRIFT_BOOL_FALSE)) utc = t2 == THRIFT_BOOL_TRUE;
                else if (f == 2 && t2 == THRIFT_STRUCT) unit = time_unit_name(r);
                else thrift_skip(r, t2);
            }
            snprintf(out, cap, "%s(%s%s)", name, unit, utc ? ",utc" : "");
        } else if (id == 10) { /* INTEGER: bitWidth (i8), isSigned */
            int bits = 0;
            bool is_signed = true;
            while (thrift_next_field(r, &l2, &t2, &f)) {
                if (f == 1 && t2 == THRIFT_BYTE) bits = thrift_read_byte(r);
                else if (f == 2 && (t2 == THRIFT_BOOL_TRUE || t2 == THRIFT_BOOL_FALSE)) is_signed = t2 == THRIFT_BOOL_TRUE;
                else thrift_skip(r, t2);
            }
            snprintf(out, cap, "INTEGER(%d,%s)", bits, is_signed ? "signed" : "unsigned");
        } else {
            skip_rest(r, &l2);
            snprintf(out, cap, "%s", name);
        }
        thrift_leave(r);
    }
    thrift_leave(r);
}

static void parse_schema_element(thrift_reader *r, pq_schema_element *e) {
    memset(e, 0, sizeof *e);
    e->type = -1;
    e->repetition = -1;
    e->converted_type = -1;
    if (!thrift_enter(r)) return;
    int16_t last = 0, id;
    int t;
    bool has_name = false;
    while (thrift_next_field(r, &last, &t, &id)) {
        switch (id) {
        case 1: e->type = read_i32_field(r, t); break;
        case 2: e->type_length = read_i32_field(r, t); break;
        case 3: e->repetition = read_i32_field(r, t); break;
        case 4:
            if (thrift_expect(r, t, THRIFT_BINARY)) {
                free(e->name);
                e->name = read_string(r);
                has_name = true;
            }
            break;
        case 5: e->num_children = read_i32_field(r, t); break;
        case 6: e->converted_type = read_i32_field(r, t); break;
        case 10:
            if (thrift_expect(r, t, THRIFT_STRUCT)) parse_logical_type(r, e->logical, sizeof e->logical);
            break;
        default: thrift_skip(r, t);
        }
    }
    thrift_leave(r);
    if (!r->error && !has_name) thrift_set_error(r, "schema element without a name");
    if (!r->error && (e->type < -1 || e->type > FTL_PARQUET_FIXED_LEN_BYTE_ARRAY)) thrift_set_error(r, "schema element with an unknown physical type");
    if (!r->error && (e->repetition < -1 || e->repetition > PQ_REPEATED)) thrift_set_error(r, "schema element with an unknown repetition");
    if (!r->error && e->num_children < 0) thrift_set_error(r, "schema element with a negative child count");
}

static void parse_statistics(thrift_reader *r, pq_stats *s) {
    memset(s, 0, sizeof *s);
    if (!thrift_enter(r)) return;
    int16_t last = 0, id;
    int t;
    while (thrift_next_field(r, &last, &t, &id)) {
        const uint8_t *d;
        uint32_t n;
        switch (id) {
        case 5: /* max_value; the deprecated min/max (1, 2) had no defined order and are ignored */
        case 6:
            if (!thrift_expect(r, t, THRIFT_BINARY)) break;
            thrift_read_binary(r, &d, &n);
            if (id == 5) s->max = d, s->max_len = n, s->has_max = true;
            else s->min = d, s->min_len = n, s->has_min = true;
            break;
        case 3:
            s->null_count = read_i64_field(r, t);
            s->has_null_count = !r->error;
            break;
        default: thrift_skip(r, t);
        }
    }
    thrift_leave(r);
}

static void parse_column_metadata(thrift_reader *r, pq_chunk *c, const char *leaf_path) {
    if (!thrift_enter(r)) return;
    int16_t last = 0, id;
    int t;
    unsigned seen = 0;
    size_t path_len = 0;
    bool path_ok = true;
    while (thrift_next_field(r, &last, &t, &id)) {
        if (id > 0 && id < 32) seen |= 1u << id;
        switch (id) {
        case 1: c->type = read_i32_field(r, t); break;
        case 2: {
            if (!thrift_expect(r, t, THRIFT_LIST)) break;
            int et;
            uint32_t n;
            thrift_read_list_header(r, &et, &n);
            for (uint32_t i = 0; i < n && !r->error; i++) {
                int32_t e = thrift_read_i32(r);
                if (e >= 0 && e < 32) c->encodings |= 1u << e;
            }
            break;
        }
        case 3: {
            /* path_in_schema must name the schema leaf this chunk belongs to */
            if (!thrift_expect(r, t, THRIFT_LIST)) break;
            int et;
            uint32_t n;
            thrift_read_list_header(r, &et, &n);
            for (uint32_t i = 0; i < n && !r->error; i++) {
                const uint8_t *d;
                uint32_t len;
                thrift_read_binary(r, &d, &len);
                if (r->error || !leaf_path || !path_ok) continue;
                if (i > 0) {
                    if (leaf_path[path_len] != '.') {
                        path_ok = false;
                        continue;
                    }
                    path_len++;
                }
                size_t left = strlen(leaf_path + path_len);
                if (len <= left && memcmp(leaf_path + path_len, d, len) == 0) path_len += len;
                else path_ok = false;
            }
            if (leaf_path && leaf_path[path_len] != '\0') path_ok = false;
            break;
        }
        case 4: c->codec = read_i32_field(r, t); break;
        case 5: c->num_values = read_i64_field(r, t); break;
        case 6: c->total_uncompressed_size = read_i64_field(r, t); break;
        case 7: c->total_compressed_size = read_i64_field(r, t); break;
        case 9: c->data_page_offset = read_i64_field(r, t); break;
        case 11:
            c->dictionary_page_offset = read_i64_field(r, t);
            c->has_dictionary_page_offset = !r->error;
            break;
        case 12:
            if (thrift_expect(r, t, THRIFT_STRUCT)) parse_statistics(r, &c->stats);
            break;
        default: thrift_skip(r, t);
        }
    }
    thrift_leave(r);
    unsigned required = 1u << 1 | 1u << 2 | 1u << 3 | 1u << 4 | 1u << 5 | 1u << 6 | 1u << 7 | 1u << 9;
    if (!r->error && (seen & required) != required) thrift_set_error(r, "column metadata misses a required field");
    c->path_mismatch = !path_ok;
}

/* ColumnChunk: only the embedded ColumnMetaData matters (file_path means another file). */
static void parse_column_chunk(thrift_reader *r, pq_chunk *c, const char *leaf_path) {
    memset(c, 0, sizeof *c);
    if (!thrift_enter(r)) return;
    int16_t last = 0, id;
    int t;
    bool has_meta = false;
    while (thrift_next_field(r, &last, &t, &id)) {
        if (id == 1 && t == THRIFT_BINARY) {
            c->has_file_path = true;
            thrift_skip(r, t);
        } else if (id == 3 && thrift_expect(r, t, THRIFT_STRUCT)) {
            parse_column_metadata(r, c, leaf_path);
            has_meta = true;
        } else if (id == 4) {
            c->offset_index_offset = read_i64_field(r, t);
            c->has_offset_index = !r->error && c->offset_index_offset > 0 && c->offset_index_length > 0;
        } else if (id == 5) {
            c->offset_index_length = read_i32_field(r, t);
            c->has_offset_index = !r->error && c->offset_index_offset > 0 && c->offset_index_length > 0;
        } else if (id == 8 || id == 9) {
            thrift_set_error(r, "encrypted column chunks are not supported");
        } else if (id != 3) {
            thrift_skip(r, t);
        }
    }
    thrift_leave(r);
    if (!r->error && !has_meta) thrift_set_error(r, "column chunk without column metadata");
}

static void parse_row_group(thrift_reader *r, pq_row_group *g, int *chunk_count, char *const *leaf_paths, int leaf_count) {
    memset(g, 0, sizeof *g);
    if (!thrift_enter(r)) return;
    int16_t last = 0, id;
    int t;
    unsigned seen = 0;
    while (thrift_next_field(r, &last, &t, &id)) {
        if (id > 0 && id < 32) seen |= 1u << id;
        switch (id) {
        case 1: {
            if (!thrift_expect(r, t, THRIFT_LIST)) break;
            int et;
            uint32_t n;
            thrift_read_list_header(r, &et, &n);
            if (r->error) break;
            if (g->chunks || (et != THRIFT_STRUCT && n)) {
                thrift_set_error(r, "bad column chunk list");
                break;
            }
            if ((int64_t)n != leaf_count) {
                thrift_set_error(r, "row group column count differs from the schema's leaf count");
                break;
            }
            g->chunks = ftl_xcalloc(n ? n : 1, sizeof *g->chunks);
            for (uint32_t i = 0; i < n && !r->error; i++) parse_column_chunk(r, &g->chunks[i], leaf_paths ? leaf_paths[i] : NULL);
            *chunk_count = (int)n;
            break;
        }
        case 2: g->total_byte_size = read_i64_field(r, t); break;
        case 3: g->num_rows = read_i64_field(r, t); break;
        default: thrift_skip(r, t);
        }
    }
    thrift_leave(r);
    if (!r->error && (seen & 0xe) != 0xe) thrift_set_error(r, "row group misses a required field");
}

static void parse_key_value(thrift_reader *r, char **key, char **value) {
    *key = NULL;
    *value = NULL;
    if (!thrift_enter(r)) return;
    int16_t last = 0, id;
    int t;
    while (thrift_next_field(r, &last, &t, &id)) {
        if ((id == 1 || id == 2) && thrift_expect(r, t, THRIFT_BINARY)) {
            char **slot = id == 1 ? key : value;
            free(*slot);
            *slot = read_string(r);
        } else if (id != 1 && id != 2) {
            thrift_skip(r, t);
        }
    }
    thrift_leave(r);
    if (!r->error && !*key) thrift_set_error(r, "key-value metadata entry without a key");
}

/* Dotted paths of the schema's leaves, in order (the order of column chunks). NULL on a
 * malformed tree (children counts that do not add up). */
static char **leaf_paths_of(const pq_schema_element *s, int count, int *leaf_count) {
    char **paths = ftl_xcalloc((size_t)count, sizeof *paths);
    int n = 0;
    /* iterative walk with an explicit stack of (remaining children, path prefix length) */
    int remaining[THRIFT_MAX_DEPTH + 1];
    size_t prefix_len[THRIFT_MAX_DEPTH + 1];
    char prefix[4096];
    int depth = 0, i = 1;
    remaining[0] = s[0].num_children;
    prefix_len[0] = 0;
    prefix[0] = '\0';
    while (depth >= 0) {
        if (remaining[depth] == 0) {
            depth--;
            continue;
        }
        if (i >= count) goto bad;
        remaining[depth]--;
        const pq_schema_element *e = &s[i++];
        size_t base = prefix_len[depth];
        size_t nl = strlen(e->name);
        if (base + nl + 2 > sizeof prefix) goto bad;
        if (base) prefix[base - 1] = '.';
        memcpy(prefix + base, e->name, nl + 1);
        if (e->num_children > 0) {
            if (depth + 1 > THRIFT_MAX_DEPTH) goto bad;
            depth++;
            remaining[depth] = e->num_children;
            prefix_len[depth] = base + nl + 1;
        } else {
            if (e->type < 0) goto bad; /* a leaf needs a physical type */
            paths[n++] = ftl_strdup(prefix);
        }
    }
    if (i != count) goto bad;
    *leaf_count = n;
    return paths;
bad:
    for (int k = 0; k < n; k++) free(paths[k]);
    free(paths);
    return NULL;
}

bool pq_parse_file_metadata(const uint8_t *footer, size_t size, pq_file_metadata *md, const char **err, size_t *err_offset) {
    memset(md, 0, sizeof *md);
    thrift_reader r;
    thrift_reader_init(&r, footer, size);
    thrift_enter(&r);
    int16_t last = 0, id;
    int t;
    unsigned seen = 0;
    char **leaf_paths = NULL;
    int leaf_count = 0;
    while (thrift_next_field(&r, &last, &t, &id)) {
        if (id > 0 && id < 32) seen |= 1u << id;
        switch (id) {
        case 1: md->version = read_i32_field(&r, t); break;
        case 2: {
            if (!thrift_expect(&r, t, THRIFT_LIST)) break;
            int et;
            uint32_t n;
            thrift_read_list_header(&r, &et, &n);
            if (r.error) break;
            if (md->schema || et != THRIFT_STRUCT || n == 0) {
                thrift_set_error(&r, "bad schema list");
                break;
            }
            md->schema = ftl_xcalloc(n, sizeof *md->schema);
            for (uint32_t i = 0; i < n && !r.error; i++) {
                parse_schema_element(&r, &md->schema[i]);
                md->schema_count = (int)i + 1;
            }
            if (!r.error) {
                leaf_paths = leaf_paths_of(md->schema, md->schema_count, &leaf_count);
                if (!leaf_paths) thrift_set_error(&r, "schema tree is malformed (child counts do not match the elements)");
            }
            break;
        }
        case 3: md->num_rows = read_i64_field(&r, t); break;
        case 4: {
            if (!thrift_expect(&r, t, THRIFT_LIST)) break;
            int et;
            uint32_t n;
            thrift_read_list_header(&r, &et, &n);
            if (r.error) break;
            if (md->row_groups || (et != THRIFT_STRUCT && n)) {
                thrift_set_error(&r, "bad row group list");
                break;
            }
            if (!leaf_paths) {
                thrift_set_error(&r, "row groups before the schema");
                break;
            }
            md->row_groups = ftl_xcalloc(n ? n : 1, sizeof *md->row_groups);
            md->chunk_count = leaf_count;
            for (uint32_t i = 0; i < n && !r.error; i++) {
                int cc = 0;
                parse_row_group(&r, &md->row_groups[i], &cc, leaf_paths, leaf_count);
                md->row_group_count = (int)i + 1;
            }
            break;
        }
        case 5: {
            if (!thrift_expect(&r, t, THRIFT_LIST)) break;
            int et;
            uint32_t n;
            thrift_read_list_header(&r, &et, &n);
            if (r.error) break;
            if (md->kv_keys || (et != THRIFT_STRUCT && n)) {
                thrift_set_error(&r, "bad key-value metadata list");
                break;
            }
            md->kv_keys = ftl_xcalloc(n ? n : 1, sizeof *md->kv_keys);
            md->kv_values = ftl_xcalloc(n ? n : 1, sizeof *md->kv_values);
            for (uint32_t i = 0; i < n && !r.error; i++) {
                parse_key_value(&r, &md->kv_keys[i], &md->kv_values[i]);
                md->kv_count = (int)i + 1;
            }
            break;
        }
        case 6:
            if (thrift_expect(&r, t, THRIFT_BINARY)) {
                free(md->created_by);
                md->created_by = read_string(&r);
            }
            break;
        case 8:
        case 9: thrift_set_error(&r, "encrypted files are not supported"); break;
        default: thrift_skip(&r, t);
        }
    }
    thrift_leave(&r);
    if (leaf_paths) {
        for (int i = 0; i < leaf_count; i++) free(leaf_paths[i]);
        free(leaf_paths);
    }
    if (!r.error && (seen & 0x1e) != 0x1e) thrift_set_error(&r, "file metadata misses a required field (version, schema, num_rows or row_groups)");
    if (r.error) {
        *err = r.error;
        *err_offset = r.error_offset;
        pq_file_metadata_free(md);
        return false;
    }
    return true;
}

void pq_file_metadata_free(pq_file_metadata *md) {
    for (int i = 0; i < md->schema_count; i++) free(md->schema[i].name);
    free(md->schema);
    for (int i = 0; i < md->row_group_count; i++) free(md->row_groups[i].chunks);
    free(md->row_groups);
    for (int i = 0; i < md->kv_count; i++) {
        free(md->kv_keys[i]);
        free(md->kv_values[i]);
    }
    free(md->kv_keys);
    free(md->kv_values);
    free(md->created_by);
    memset(md, 0, sizeof *md);
}
