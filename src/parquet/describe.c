/* ftl_parquet_describe: what `ftl inspect FILE.parquet` prints, as text or JSON. Built in a
 * buffer and printed at the end, so a failure midway prints nothing but the error. */
#include "data/dataset.h"
#include "ftl/parquet.h"
#include "parquet/format.h"
#include "parquet/reader.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"

#include <stdlib.h>
#include <string.h>

#define lit(b, s) ftl_strbuf_append((b), (s), sizeof(s) - 1)
static void lit_str(ftl_strbuf *b, const char *s) { ftl_strbuf_append(b, s, strlen(s)); }

/* Strings from the file may hold anything: invalid UTF-8 becomes U+FFFD, and for text output
 * control characters become '?', so neither the JSON nor the terminal breaks. */
static char *clean_text(const char *s, bool for_terminal) {
    size_t n = strlen(s);
    char *out = ftl_xmalloc(n * 3 + 1);
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = len > 0;
        for (int i = 1; ok && i < len; i++) ok = (p[i] & 0xc0) == 0x80;
        if (ok && len == 2 && c < 0xc2) ok = false;
        if (ok && len == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0))) ok = false;
        if (ok && len == 4 && ((c == 0xf0 && p[1] < 0x90) || c > 0xf4 || (c == 0xf4 && p[1] >= 0x90))) ok = false;
        if (!ok) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            p++;
            continue;
        }
        if (for_terminal && len == 1 && (c < 0x20 || c == 0x7f)) {
            out[o++] = '?';
        } else {
            memcpy(out + o, p, (size_t)len);
            o += (size_t)len;
        }
        p += len;
    }
    out[o] = '\0';
    return out;
}

static void json_str(ftl_strbuf *b, const char *s) {
    if (!s) {
        lit(b, "null");
        return;
    }
    char *c = clean_text(s, false);
    ftl_json_append_string(b, c);
    free(c);
}

static const char *repetition_name(int r) {
    return r == PQ_REQUIRED ? "REQUIRED" : r == PQ_OPTIONAL ? "OPTIONAL" : r == PQ_REPEATED ? "REPEATED" : "?";
}

typedef struct class_info {
    bool present;
    int count;
    char **names;
    int64_t *rows;
    int64_t invalid, nulls;
} class_info;

static void class_info_free(class_info *ci) {
    for (int i = 0; i < ci->count; i++) free(ci->names[i]);
    free(ci->names);
    free(ci->rows);
}

/* ftl datasets list their class names in ftl.classes (a JSON array) and have a `label` column. */
static ftl_status load_class_names(ftl_parquet_file *f, class_info *ci) {
    const char *text = ftl_parquet_metadata_get(f, FTL_META_CLASSES);
    int label = ftl_parquet_find_column(f, FTL_COLUMN_LABEL);
    if (!text || label < 0) return FTL_OK;
    ftl_json *doc = NULL;
    if (ftl_json_parse(text, strlen(text), &doc) != FTL_OK || doc->type != FTL_JSON_ARRAY) {
        ftl_json_free(doc);
        return ftl_fail(FTL_E_FORMAT, "%s: metadata %s is not a JSON array of class names", ftl_parquet_path(f), FTL_META_CLASSES);
    }
    const ftl_parquet_column_info *lc = ftl_parquet_column(f, label);
    if (lc->type != FTL_PARQUET_INT32 || lc->nested) {
        ftl_json_free(doc);
        return ftl_fail(FTL_E_FORMAT, "%s: column '%s' of an ftl dataset must be a flat INT32 column, not %s", ftl_parquet_path(f),
                        FTL_COLUMN_LABEL, ftl_parquet_type_name(lc->type));
    }
    ci->present = true;
    ci->count = (int)doc->count;
    ci->names = ftl_xcalloc(doc->count ? doc->count : 1, sizeof *ci->names);
    ci->rows = ftl_xcalloc(doc->count ? doc->count : 1, sizeof *ci->rows);
    for (size_t i = 0; i < doc->count; i++)
        ci->names[i] = ftl_strdup(doc->items[i].type == FTL_JSON_STRING ? doc->items[i].string : "?");
    ftl_json_free(doc);
    return FTL_OK;
}

static void count_labels(class_info *ci, const ftl_parquet_column_values *v) {
    const int32_t *labels = v->values;
    for (int64_t r = 0; r < v->rows; r++) {
        if (v->validity && !v->validity[r]) ci->nulls++;
        else if (labels[r] >= 0 && labels[r] < ci->count) ci->rows[labels[r]]++;
        else ci->invalid++;
    }
}

/* Page counts by "TYPE/ENCODING" for one chunk, from its page headers. */
static ftl_status count_pages(ftl_parquet_file *f, int g, int c, ftl_strbuf *json) {
    const pq_chunk *ch = &f->md.row_groups[g].chunks[c];
    uint8_t *bytes = malloc(ch->length ? (size_t)ch->length : 1);
    if (!bytes) return ftl_fail(FTL_E_NOMEM, "%s: out of memory for a column chunk", f->path);
    ftl_status st = pq_pread_full(f, bytes, (size_t)ch->length, (uint64_t)ch->start);
    char keys[16][48];
    int64_t counts[16];
    int kinds = 0;
    size_t pos = 0;
    while (st == FTL_OK && pos < (size_t)ch->length) {
        pq_page_header h;
        size_t hs;
        const char *err = NULL;
        bool parsed = pq_parse_page_header(bytes + pos, (size_t)ch->length - pos, &h, &hs, &err);
        if (!parsed || (size_t)h.compressed_size > (size_t)ch->length - pos - hs) {
            st = ftl_fail(FTL_E_FORMAT, "%s: row group %d, column '%s': page at offset %lld: %s", f->path, g, f->columns[c].info.name,
                          (long long)(ch->start + (int64_t)pos), parsed ? "page runs past the chunk" : err);
            break;
        }
        char key[48];
        snprintf(key, sizeof key, "%s/%s", pq_page_type_name(h.type), ftl_parquet_encoding_name(h.encoding));
        int k = 0;
        while (k < kinds && strcmp(keys[k], key) != 0) k++;
        if (k == kinds && kinds < 16) {
            snprintf(keys[kinds], sizeof keys[kinds], "%s", key);
            counts[kinds++] = 0;
        }
        if (k < kinds) counts[k]++;
        pos += hs + (size_t)h.compressed_size;
    }
    free(bytes);
    if (st != FTL_OK) return st;
    lit(json, "{");
    for (int k = 0; k < kinds; k++) ftl_strbuf_printf(json, "%s\"%s\": %lld", k ? ", " : "", keys[k], (long long)counts[k]);
    lit(json, "}");
    return FTL_OK;
}

static void encodings_list(uint32_t mask, ftl_strbuf *b, bool json) {
    bool first = true;
    for (int e = 0; e < 32; e++) {
        if (!(mask >> e & 1)) continue;
        if (json) ftl_strbuf_printf(b, "%s\"%s\"", first ? "" : ", ", ftl_parquet_encoding_name(e));
        else ftl_strbuf_printf(b, "%s%s", first ? "" : ",", ftl_parquet_encoding_name(e));
        first = false;
    }
}

typedef struct describe_state {
    ftl_parquet_file *f;
    const ftl_parquet_describe_options *opts;
    class_info classes;
    ftl_parquet_colhash **hashes;
    ftl_parquet_colhash_result *results;
} describe_state;

/* Reads what the options need: every column for checksums, the label column for classes. */
static ftl_status read_data(describe_state *s) {
    ftl_parquet_file *f = s->f;
    int ncol = ftl_parquet_num_columns(f);
    int label = s->classes.present ? ftl_parquet_find_column(f, FTL_COLUMN_LABEL) : -1;
    if (!s->opts->checksums && label < 0) return FTL_OK;
    ftl_status st = FTL_OK;
    if (s->opts->checksums) {
        s->hashes = ftl_xcalloc((size_t)ncol + 1, sizeof *s->hashes);
        s->results = ftl_xcalloc((size_t)ncol + 1, sizeof *s->results);
        for (int c = 0; c < ncol && st == FTL_OK; c++) {
            const ftl_parquet_column_info *ci = ftl_parquet_column(f, c);
            /* struct leaves are hashed like top-level columns; colhash v1 defines no list or INT96 */
            if (!ci->repeated && ci->type != FTL_PARQUET_INT96)
                st = ftl_parquet_colhash_init(&s->hashes[c], ci->type);
        }
    }
    ftl_parquet_column_values v;
    memset(&v, 0, sizeof v);
    for (int g = 0; g < ftl_parquet_num_row_groups(f) && st == FTL_OK; g++) {
        for (int c = 0; c < ncol && st == FTL_OK; c++) {
            bool hash = s->opts->checksums && s->hashes[c];
            if (!hash && c != label) continue;
            st = ftl_parquet_read_column(f, g, c, &v);
            if (st == FTL_OK && hash) st = ftl_parquet_colhash_update(s->hashes[c], &v);
            if (st == FTL_OK && c == label) count_labels(&s->classes, &v);
        }
    }
    ftl_parquet_column_values_free(&v);
    if (st == FTL_OK && s->hashes)
        for (int c = 0; c < ncol; c++)
            if (s->hashes[c]) ftl_parquet_colhash_final(s->hashes[c], &s->results[c]);
    return st;
}

static ftl_status describe_json(describe_state *s, ftl_strbuf *b) {
    ftl_parquet_file *f = s->f;
    int ncol = ftl_parquet_num_columns(f), nrg = ftl_parquet_num_row_groups(f);
    lit(b, "{\n  \"file\": ");
    json_str(b, f->path);
    ftl_strbuf_printf(b, ",\n  \"file_size\": %llu,\n  \"format_version\": %d,\n  \"created_by\": ", (unsigned long long)f->file_size,
                      ftl_parquet_format_version(f));
    json_str(b, f->md.created_by);
    ftl_strbuf_printf(b, ",\n  \"num_rows\": %lld,\n  \"num_row_groups\": %d,\n  \"schema\": [", (long long)ftl_parquet_num_rows(f), nrg);
    for (int c = 0; c < ncol; c++) {
        const pq_column *pc = &f->columns[c];
        lit_str(b, c ? ",\n    {\"path\": " : "\n    {\"path\": ");
        json_str(b, pc->info.name);
        ftl_strbuf_printf(b, ", \"physical_type\": \"%s\", \"repetition\": \"%s\", \"converted_type\": ", ftl_parquet_type_name(pc->info.type),
                          repetition_name(pc->element->repetition));
        json_str(b, pc->info.converted_type);
        lit(b, ", \"logical_type\": ");
        json_str(b, pc->info.logical_type);
        if (pc->info.type == FTL_PARQUET_FIXED_LEN_BYTE_ARRAY) ftl_strbuf_printf(b, ", \"type_length\": %d", (int)pc->info.fixed_length);
        ftl_strbuf_printf(b, ", \"nested\": %s, \"repeated\": %s}", pc->info.nested ? "true" : "false",
                          pc->info.repeated ? "true" : "false");
    }
    lit(b, "\n  ],\n  \"key_value_metadata\": [");
    for (int i = 0; i < ftl_parquet_metadata_count(f); i++) {
        lit_str(b, i ? ",\n    {\"key\": " : "\n    {\"key\": ");
        json_str(b, ftl_parquet_metadata_key(f, i));
        lit(b, ", \"value\": ");
        json_str(b, ftl_parquet_metadata_value(f, i));
        lit(b, "}");
    }
    lit(b, "\n  ],\n  \"row_groups\": [");
    for (int g = 0; g < nrg; g++) {
        ftl_parquet_row_group_info ri;
        FTL_TRY(ftl_parquet_row_group_info_get(f, g, &ri));
        ftl_strbuf_printf(b, "%s\n    {\"index\": %d, \"num_rows\": %lld, \"total_byte_size\": %lld, \"total_compressed_size\": %lld, "
                             "\"offset\": %lld, \"length\": %lld, \"columns\": [",
                          g ? "," : "", g, (long long)ri.rows, (long long)ri.total_byte_size, (long long)ri.compressed_size,
                          (long long)ri.offset, (long long)ri.length);
        for (int c = 0; c < ncol; c++) {
            ftl_parquet_chunk_info ch;
            FTL_TRY(ftl_parquet_chunk_info_get(f, g, c, &ch));
            lit_str(b, c ? ",\n      {\"path\": " : "\n      {\"path\": ");
            json_str(b, f->columns[c].info.name);
            ftl_strbuf_printf(b, ", \"codec\": \"%s\", \"encodings\": [", ftl_parquet_codec_name(ch.codec));
            encodings_list(ch.encodings, b, true);
            ftl_strbuf_printf(b, "], \"num_values\": %lld, \"total_compressed_size\": %lld, \"total_uncompressed_size\": %lld, "
                                 "\"offset\": %lld, \"length\": %lld, \"null_count\": ",
                              (long long)ch.num_values, (long long)ch.compressed_size, (long long)ch.uncompressed_size,
                              (long long)ch.offset, (long long)ch.length);
            if (ch.has_null_count) ftl_strbuf_printf(b, "%lld", (long long)ch.null_count);
            else lit(b, "null");
            if (s->opts->pages) {
                lit(b, ", \"pages\": ");
                FTL_TRY(count_pages(f, g, c, b));
            }
            lit(b, "}");
        }
        lit(b, "]}");
    }
    lit(b, "\n  ]");
    if (s->classes.present) {
        lit(b, ",\n  \"classes\": [");
        for (int i = 0; i < s->classes.count; i++) {
            ftl_strbuf_printf(b, "%s\n    {\"label\": %d, \"name\": ", i ? "," : "", i);
            json_str(b, s->classes.names[i]);
            ftl_strbuf_printf(b, ", \"rows\": %lld}", (long long)s->classes.rows[i]);
        }
        ftl_strbuf_printf(b, "\n  ],\n  \"label_nulls\": %lld,\n  \"label_out_of_range\": %lld", (long long)s->classes.nulls,
                          (long long)s->classes.invalid);
    }
    if (s->opts->checksums) {
        lit(b, ",\n  \"checksum\": \"interop colhash v1\",\n  \"columns\": {");
        bool first = true;
        for (int c = 0; c < ncol; c++) {
            if (!s->hashes[c]) continue;
            const ftl_parquet_colhash_result *r = &s->results[c];
            lit_str(b, first ? "\n    " : ",\n    ");
            first = false;
            json_str(b, f->columns[c].info.name);
            ftl_strbuf_printf(b, ": {\"physical_type\": \"%s\", \"count\": %lld, \"null_count\": %lld, \"sha256\": \"%s\", \"nulls_sha256\": ",
                              ftl_parquet_type_name(f->columns[c].info.type), (long long)r->count, (long long)r->null_count, r->sha256);
            if (r->nulls_sha256[0]) ftl_strbuf_printf(b, "\"%s\"}", r->nulls_sha256);
            else lit(b, "null}");
        }
        lit(b, "\n  }");
    }
    lit(b, "\n}\n");
    return FTL_OK;
}

static void text_line(ftl_strbuf *b, const char *label, const char *value) {
    char *c = clean_text(value, true);
    ftl_strbuf_printf(b, "%s%s\n", label, c);
    free(c);
}

static ftl_status describe_text(describe_state *s, ftl_strbuf *b) {
    ftl_parquet_file *f = s->f;
    int ncol = ftl_parquet_num_columns(f), nrg = ftl_parquet_num_row_groups(f);
    text_line(b, "file:        ", f->path);
    ftl_strbuf_printf(b, "size:        %llu bytes\n", (unsigned long long)f->file_size);
    text_line(b, "created by:  ", ftl_parquet_created_by(f));
    ftl_strbuf_printf(b, "rows:        %lld in %d row group%s\n", (long long)ftl_parquet_num_rows(f), nrg, nrg == 1 ? "" : "s");
    ftl_strbuf_printf(b, "columns:     %d\n", ncol);
    for (int c = 0; c < ncol; c++) {
        const pq_column *pc = &f->columns[c];
        char *name = clean_text(pc->info.name, true);
        ftl_strbuf_printf(b, "  %-20s %s", name, ftl_parquet_type_name(pc->info.type));
        free(name);
        if (pc->info.type == FTL_PARQUET_FIXED_LEN_BYTE_ARRAY) ftl_strbuf_printf(b, "(%d)", (int)pc->info.fixed_length);
        ftl_strbuf_printf(b, " %s", repetition_name(pc->element->repetition));
        if (pc->info.logical_type) ftl_strbuf_printf(b, " %s", pc->info.logical_type);
        else if (pc->info.converted_type) ftl_strbuf_printf(b, " %s", pc->info.converted_type);
        if (pc->info.repeated) lit(b, "  (in a list or map: not readable by ftl)");
        /* codecs and encodings over all row groups */
        uint32_t codecs = 0, encodings = 0;
        for (int g = 0; g < nrg; g++) {
            const pq_chunk *ch = &f->md.row_groups[g].chunks[c];
            if (ch->codec >= 0 && ch->codec < 32) codecs |= 1u << ch->codec;
            encodings |= ch->encodings;
        }
        lit(b, "  codec ");
        bool first = true;
        for (int k = 0; k < 32; k++)
            if (codecs >> k & 1) {
                ftl_strbuf_printf(b, "%s%s", first ? "" : ",", ftl_parquet_codec_name((ftl_parquet_codec)k));
                first = false;
            }
        if (first) lit(b, "-");
        lit(b, "  encodings ");
        encodings_list(encodings, b, false);
        lit(b, "\n");
    }
    ftl_strbuf_printf(b, "row groups:  %d\n", nrg);
    for (int g = 0; g < nrg; g++) {
        ftl_parquet_row_group_info ri;
        FTL_TRY(ftl_parquet_row_group_info_get(f, g, &ri));
        if (nrg > 20 && g == 10) ftl_strbuf_printf(b, "  ... (%d more)\n", nrg - 20);
        if (nrg > 20 && g >= 10 && g < nrg - 10) continue;
        ftl_strbuf_printf(b, "  %4d: %lld rows, %lld bytes (%lld uncompressed) at offset %lld\n", g, (long long)ri.rows,
                          (long long)ri.compressed_size, (long long)ri.total_byte_size, (long long)ri.offset);
    }
    int nkv = ftl_parquet_metadata_count(f);
    if (nkv) ftl_strbuf_printf(b, "metadata:    %d key%s\n", nkv, nkv == 1 ? "" : "s");
    for (int i = 0; i < nkv; i++) {
        const char *v = ftl_parquet_metadata_value(f, i);
        char *k = clean_text(ftl_parquet_metadata_key(f, i), true);
        char *val = clean_text(v ? v : "(none)", true);
        if (strlen(val) > 200) strcpy(val + 197, "...");
        ftl_strbuf_printf(b, "  %s = %s\n", k, val);
        free(k);
        free(val);
    }
    if (s->classes.present) {
        ftl_strbuf_printf(b, "classes:     %d (rows per class, from column '%s')\n", s->classes.count, FTL_COLUMN_LABEL);
        for (int i = 0; i < s->classes.count; i++) {
            char *name = clean_text(s->classes.names[i], true);
            ftl_strbuf_printf(b, "  %4d %-30s %lld\n", i, name, (long long)s->classes.rows[i]);
            free(name);
        }
        if (s->classes.nulls) ftl_strbuf_printf(b, "  null labels: %lld\n", (long long)s->classes.nulls);
        if (s->classes.invalid) ftl_strbuf_printf(b, "  labels outside 0..%d: %lld\n", s->classes.count - 1, (long long)s->classes.invalid);
    }
    if (s->opts->checksums) {
        lit(b, "checksums (interop colhash v1):\n");
        for (int c = 0; c < ncol; c++) {
            char *name = clean_text(f->columns[c].info.name, true);
            if (!s->hashes[c] && f->columns[c].info.repeated) {
                ftl_strbuf_printf(b, "  %-20s (not read: in a list or map)\n", name);
            } else if (!s->hashes[c]) {
                ftl_strbuf_printf(b, "  %-20s (not defined for %s)\n", name, ftl_parquet_type_name(f->columns[c].info.type));
            } else {
                const ftl_parquet_colhash_result *r = &s->results[c];
                ftl_strbuf_printf(b, "  %-20s %s  %lld values, %lld nulls\n", name, r->sha256, (long long)r->count, (long long)r->null_count);
            }
            free(name);
        }
    }
    return FTL_OK;
}

ftl_status ftl_parquet_describe(const char *path, FILE *out, const ftl_parquet_describe_options *opts) {
    ftl_parquet_describe_options none = {0};
    describe_state s = {.opts = opts ? opts : &none};
    FTL_TRY(ftl_parquet_open(path, &s.f));
    ftl_strbuf b = {0};
    ftl_status st = load_class_names(s.f, &s.classes);
    if (st == FTL_OK) st = read_data(&s);
    if (st == FTL_OK) st = s.opts->json ? describe_json(&s, &b) : describe_text(&s, &b);
    if (st == FTL_OK && b.len && fwrite(b.data, 1, b.len, out) != b.len) st = ftl_fail(FTL_E_IO, "cannot write the description");
    if (s.hashes)
        for (int c = 0; c < ftl_parquet_num_columns(s.f); c++) ftl_parquet_colhash_free(s.hashes[c]);
    free(s.hashes);
    free(s.results);
    class_info_free(&s.classes);
    ftl_strbuf_free(&b);
    ftl_parquet_close(s.f);
    return st;
}
