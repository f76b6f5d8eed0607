/* ftl public API: Parquet files (reader and writer), written from the Apache Parquet spec.
 *
 * Reader: REQUIRED and OPTIONAL leaf columns, top-level or inside structs (groups, any depth, each
 * level REQUIRED or OPTIONAL), every physical type, PLAIN, dictionary (PLAIN_DICTIONARY /
 * RLE_DICTIONARY, with fallback to PLAIN mid-chunk), RLE booleans, DELTA_BINARY_PACKED,
 * DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY and BYTE_STREAM_SPLIT encodings, definition levels of
 * any bit width, data pages v1 and v2, codecs none/snappy/gzip/zstd, page CRCs checked when
 * present. Whole column chunks (ftl_parquet_read_column) or single values at random
 * (ftl_parquet_read_value: one page read). Leaves inside lists and maps (any repeated field) are
 * listed but reading them is an FTL_E_UNSUPPORTED error that names the column. Every size and
 * offset in the file is checked before use: a truncated or corrupt file is an FTL_E_FORMAT error
 * naming the file, row group, column and page.
 *
 * Writer: one call per row group, DATA_PAGE (v1) pages with PLAIN values (RLE definition
 * levels for optional columns), page CRCs, column statistics, key-value metadata; the file
 * appears under its final name only when closed (temporary name + fsync + rename).
 * Output is deterministic: the same input gives a byte-identical file. */
#ifndef FTL_PARQUET_H
#define FTL_PARQUET_H

#include "ftl/base.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Physical types; the values are those of parquet.thrift. */
typedef enum ftl_parquet_type {
    FTL_PARQUET_BOOLEAN = 0,
    FTL_PARQUET_INT32 = 1,
    FTL_PARQUET_INT64 = 2,
    FTL_PARQUET_INT96 = 3, /* legacy timestamps: read as 12-byte fixed values, never written */
    FTL_PARQUET_FLOAT = 4,
    FTL_PARQUET_DOUBLE = 5,
    FTL_PARQUET_BYTE_ARRAY = 6,
    FTL_PARQUET_FIXED_LEN_BYTE_ARRAY = 7,
} ftl_parquet_type;

/* Compression codecs; the values are those of parquet.thrift. ftl reads and writes NONE,
 * SNAPPY, GZIP and ZSTD; the others are named in errors and by inspect. */
typedef enum ftl_parquet_codec {
    FTL_PARQUET_CODEC_NONE = 0,
    FTL_PARQUET_CODEC_SNAPPY = 1,
    FTL_PARQUET_CODEC_GZIP = 2,
    FTL_PARQUET_CODEC_LZO = 3,
    FTL_PARQUET_CODEC_BROTLI = 4,
    FTL_PARQUET_CODEC_LZ4 = 5,
    FTL_PARQUET_CODEC_ZSTD = 6,
    FTL_PARQUET_CODEC_LZ4_RAW = 7,
} ftl_parquet_codec;

/* Value encodings; the values are those of parquet.thrift. */
typedef enum ftl_parquet_encoding {
    FTL_PARQUET_ENC_PLAIN = 0,
    FTL_PARQUET_ENC_PLAIN_DICTIONARY = 2,
    FTL_PARQUET_ENC_RLE = 3,
    FTL_PARQUET_ENC_BIT_PACKED = 4,
    FTL_PARQUET_ENC_DELTA_BINARY_PACKED = 5,
    FTL_PARQUET_ENC_DELTA_LENGTH_BYTE_ARRAY = 6,
    FTL_PARQUET_ENC_DELTA_BYTE_ARRAY = 7,
    FTL_PARQUET_ENC_RLE_DICTIONARY = 8,
    FTL_PARQUET_ENC_BYTE_STREAM_SPLIT = 9,
} ftl_parquet_encoding;

/* Names as parquet.thrift spells them ("INT32", "SNAPPY", "RLE_DICTIONARY"); "?" for numbers
 * outside the enumeration. */
const char *ftl_parquet_type_name(ftl_parquet_type type);
const char *ftl_parquet_codec_name(ftl_parquet_codec codec);
const char *ftl_parquet_encoding_name(int encoding);
/* Parses "none"/"uncompressed", "snappy", "gzip", "zstd" (any case); false otherwise. */
bool ftl_parquet_codec_parse(const char *name, ftl_parquet_codec *out);

/* ------------------------------------------------------------------------------------------
 * Writer */

typedef struct ftl_parquet_column_def {
    const char *name;
    ftl_parquet_type type;  /* any type but INT96 */
    int32_t fixed_length;   /* FIXED_LEN_BYTE_ARRAY: bytes per value (> 0); ignored otherwise */
    bool utf8;              /* BYTE_ARRAY holding UTF-8 text: STRING logical type (UTF8 converted type) */
    bool optional;          /* nullable (OPTIONAL repetition); else REQUIRED */
} ftl_parquet_column_def;

/* All-zero options (or NULL) mean: no compression, the codec's default level, 1 MiB pages,
 * page CRCs on. */
typedef struct ftl_parquet_writer_options {
    ftl_parquet_codec codec;   /* NONE, SNAPPY, GZIP or ZSTD */
    int compression_level;     /* 0 = codec default (zstd 3, gzip 6); ignored by snappy */
    int64_t max_page_bytes;    /* data pages hold about this many value bytes (0 = 1 MiB); a value
                                  larger than this gets a page of its own */
    bool no_page_crc;          /* leave out the CRC-32 of each page (readers verify it) */
    bool no_replace;           /* an output without --overwrite: close never replaces a file another run
                                  made at the path meanwhile (FTL_E_EXISTS; this one kept beside it) */
} ftl_parquet_writer_options;

/* One column of one row group, for ftl_parquet_writer_write_row_group. Rows are indexed
 * 0..rows-1 in every array; a null row's slot is ignored (fixed-width arrays still have it).
 * - BOOLEAN: `values` = rows bytes, 0 = false, anything else = true.
 * - INT32/FLOAT: rows x 4 bytes, INT64/DOUBLE: rows x 8 bytes, FIXED_LEN_BYTE_ARRAY:
 *   rows x fixed_length bytes, all packed in `values` (little-endian, IEEE-754).
 * - BYTE_ARRAY: either `offsets` (rows + 1 int64, non-decreasing) into the bytes at `values`
 *   (the layout ftl_parquet_read_column produces), or, when `offsets` is NULL, one pointer and
 *   one length per row in `byte_values` / `byte_lengths` (no copy into one buffer needed).
 * - `validity`: optional columns only; rows bytes, 0 = null; NULL = no nulls. */
typedef struct ftl_parquet_column_data {
    const void *values;
    const int64_t *offsets;
    const uint8_t *const *byte_values;
    const uint32_t *byte_lengths;
    const uint8_t *validity;
} ftl_parquet_column_data;

typedef struct ftl_parquet_writer ftl_parquet_writer;

/* Creates `path` (under a temporary name until ftl_parquet_writer_close) for the given columns
 * (copied; names must be unique and non-empty). FTL_E_INVALID_ARG for a bad definition,
 * FTL_E_IO when the file cannot be created. */
ftl_status ftl_parquet_writer_open(const char *path, const ftl_parquet_column_def *columns, int column_count,
                                   const ftl_parquet_writer_options *opts, ftl_parquet_writer **out);
/* Writes one whole row group of `rows` rows (0 writes nothing); `columns` has one entry per
 * column, in definition order. Invalid input (FTL_E_INVALID_ARG, naming the column and row) is
 * refused before anything is written and the writer stays usable; after a write error only
 * ftl_parquet_writer_abort remains. */
ftl_status ftl_parquet_writer_write_row_group(ftl_parquet_writer *w, int64_t rows, const ftl_parquet_column_data *columns);
/* Sets (or replaces) a key-value metadata entry; written in the footer, in order of first set.
 * May be called any time before close. */
ftl_status ftl_parquet_writer_set_metadata(ftl_parquet_writer *w, const char *key, const char *value);
/* Writes the footer, fsyncs and renames the file to its final name, and frees the writer
 * (also on failure, which leaves no file behind). */
ftl_status ftl_parquet_writer_close(ftl_parquet_writer *w);
/* Deletes the temporary file and frees the writer. NULL is a no-op. */
void ftl_parquet_writer_abort(ftl_parquet_writer *w);

/* ------------------------------------------------------------------------------------------
 * Reader */

typedef struct ftl_parquet_file ftl_parquet_file;

typedef struct ftl_parquet_column_info {
    const char *name;            /* dotted path for a leaf inside a group ("a.b.c") */
    ftl_parquet_type type;
    int32_t fixed_length;        /* bytes per value: FIXED_LEN_BYTE_ARRAY's type_length, 12 for
                                    INT96, 1 for BOOLEAN, 4 or 8 for numbers, 0 for BYTE_ARRAY */
    bool optional;               /* may hold nulls (the leaf or one of its groups is OPTIONAL) */
    bool nested;                 /* inside a group ("a.b.c": a struct's field, a list's element),
                                    or repeated itself */
    bool repeated;               /* inside a LIST, a MAP or any repeated field: listed, but not
                                    readable by ftl (max_repetition_level > 0) */
    bool utf8;                   /* STRING logical type or UTF8 converted type */
    const char *converted_type;  /* "UTF8", "INT_8", "DATE", ... or NULL */
    const char *logical_type;    /* "STRING", "INTEGER(8,signed)", "TIMESTAMP(MICROS,utc)", ... or NULL */
    int max_definition_level, max_repetition_level;
} ftl_parquet_column_info;

typedef struct ftl_parquet_chunk_info {
    ftl_parquet_codec codec;
    uint32_t encodings;          /* bit mask: 1u << ftl_parquet_encoding, as the footer lists them */
    int64_t offset, length;      /* the column chunk's byte range in the file (all its pages,
                                    dictionary page first) */
    int64_t num_values;          /* values including nulls */
    int64_t compressed_size, uncompressed_size;
    bool has_dictionary_page;
    bool has_null_count;
    int64_t null_count;          /* from the footer statistics (when has_null_count) */
    bool has_min_max;            /* min/max statistics present (PLAIN-encoded bytes: e.g. 4 bytes
                                    little-endian for INT32); they point into the open file's footer */
    const uint8_t *min_value, *max_value;
    uint32_t min_length, max_length;
} ftl_parquet_chunk_info;

typedef struct ftl_parquet_row_group_info {
    int64_t rows;
    int64_t total_byte_size;     /* uncompressed bytes of all its column chunks (footer value) */
    int64_t compressed_size;     /* sum of its column chunks' compressed sizes */
    int64_t offset, length;      /* smallest byte range covering all its column chunks */
} ftl_parquet_row_group_info;

/* Opens a file and reads and validates its footer: magic numbers, footer length, schema,
 * row counts, and every column chunk's offset and size against the file size.
 * FTL_E_NOT_FOUND when the file does not exist, FTL_E_FORMAT when it is not a valid Parquet
 * file, FTL_E_UNSUPPORTED for an encrypted footer. The handle may be shared by threads. */
ftl_status ftl_parquet_open(const char *path, ftl_parquet_file **out);
void ftl_parquet_close(ftl_parquet_file *f);
/* Page CRCs are verified when a writer stored them (ftl does by default): a flipped bit in the
 * data is an error instead of a wrong pixel. It costs a part of the read time of uncompressed
 * data (CRC-32 folded with PCLMULQDQ where the CPU has it, ~10 GB/s; zlib's ~3 GB/s elsewhere); a
 * caller that verified the bytes otherwise may turn it off. Set it before reading, not while
 * other threads read. */
void ftl_parquet_set_verify_crc(ftl_parquet_file *f, bool verify);

const char *ftl_parquet_path(const ftl_parquet_file *f);
uint64_t ftl_parquet_file_size(const ftl_parquet_file *f);
int64_t ftl_parquet_num_rows(const ftl_parquet_file *f);
int ftl_parquet_num_row_groups(const ftl_parquet_file *f);
/* Rows in row group `row_group` (0 when out of range). */
int64_t ftl_parquet_row_group_rows(const ftl_parquet_file *f, int row_group);
ftl_status ftl_parquet_row_group_info_get(const ftl_parquet_file *f, int row_group, ftl_parquet_row_group_info *out);
int ftl_parquet_num_columns(const ftl_parquet_file *f);
/* Leaf column `column` (NULL when out of range); valid until ftl_parquet_close. */
const ftl_parquet_column_info *ftl_parquet_column(const ftl_parquet_file *f, int column);
/* Index of the leaf column with this (dotted) name, or -1. */
int ftl_parquet_find_column(const ftl_parquet_file *f, const char *name);
ftl_status ftl_parquet_chunk_info_get(const ftl_parquet_file *f, int row_group, int column, ftl_parquet_chunk_info *out);
/* The footer's created_by ("" when absent) and format version. */
const char *ftl_parquet_created_by(const ftl_parquet_file *f);
int ftl_parquet_format_version(const ftl_parquet_file *f);
/* Key-value metadata: count, i-th key and value (value NULL when the entry has none), lookup
 * by key (NULL when absent; the last entry wins if a key repeats). */
int ftl_parquet_metadata_count(const ftl_parquet_file *f);
const char *ftl_parquet_metadata_key(const ftl_parquet_file *f, int i);
const char *ftl_parquet_metadata_value(const ftl_parquet_file *f, int i);
const char *ftl_parquet_metadata_get(const ftl_parquet_file *f, const char *key);

/* One decoded column chunk. Rows are indexed 0..rows-1 in every array.
 * - validity: rows bytes, 1 = value, 0 = null (at any level: the leaf, or one of the structs
 *   holding it); NULL when the chunk has no nulls.
 * - def_levels: rows bytes, each row's definition level (0..max_definition_level): how many of
 *   the OPTIONAL levels on the leaf's path are present. For `image.bytes` in an optional struct
 *   `image` with an optional field `bytes`: 0 = the struct is null, 1 = the struct is there but
 *   its field is null, 2 = a value. NULL when the leaf and all its groups are REQUIRED.
 * - fixed-width types (all but BYTE_ARRAY): `values` holds rows x fixed_length bytes, packed,
 *   little-endian; BOOLEAN is one byte 0/1 per row; a null row's slot is zero.
 * - BYTE_ARRAY: value i is data[offsets[i] .. offsets[i+1]); `offsets` has rows + 1 entries,
 *   offsets[0] = 0, a null row is empty; `values` is NULL.
 * Zero-initialise before the first ftl_parquet_read_column; pass the same struct again to
 * reuse its buffers (no new allocations once they are big enough); release with
 * ftl_parquet_column_values_free. */
typedef struct ftl_parquet_column_values {
    ftl_parquet_type type;
    int32_t fixed_length;
    int64_t rows;
    int64_t null_count;
    uint8_t *validity;
    uint8_t *def_levels;
    void *values;
    int64_t *offsets;
    uint8_t *data;
    int64_t data_size;
    /* private: buffers kept between calls */
    void *priv_[11];
    size_t priv_cap_[11];
} ftl_parquet_column_values;

/* Decodes column `column` of row group `row_group` into `out`. Thread-safe: several threads may
 * read different (or the same) row groups of one open file at once (positioned reads, no shared
 * cursor); each thread uses its own `out`. FTL_E_UNSUPPORTED (naming the column) for leaves in
 * lists or maps (`repeated`), unknown encodings or codecs; FTL_E_FORMAT for corrupt data (a
 * definition level above the column's maximum, counts that do not add up); FTL_E_IO for read
 * errors. */
ftl_status ftl_parquet_read_column(ftl_parquet_file *f, int row_group, int column, ftl_parquet_column_values *out);
void ftl_parquet_column_values_free(ftl_parquet_column_values *v);

/* One value read at random by ftl_parquet_read_value.
 * - is_null: the row holds no value (null at some level; def_level tells which); data NULL, size 0.
 * - def_level: the row's definition level (see def_levels above; 0 for REQUIRED columns).
 * - data, size: the value's PLAIN bytes: a byte array's bytes (no length prefix), fixed-width
 *   values little-endian as in ftl_parquet_column_values (BOOLEAN: one byte 0/1).
 * `data` points into a buffer the struct owns, valid until the next ftl_parquet_read_value with
 * this struct or ftl_parquet_value_free. Zero-initialise before the first call; pass the same
 * struct again to reuse its buffers; release with ftl_parquet_value_free. */
typedef struct ftl_parquet_value {
    bool is_null;
    int def_level;
    const uint8_t *data;
    int64_t size;
    void *priv_;  /* private: buffers kept between calls */
} ftl_parquet_value;

/* Reads the value of row `row` (0-based, within the row group) of column `column` in row group
 * `row_group`, reading only the page that holds it: one positioned read of that page, its CRC
 * checked when present, decompressed, its levels decoded up to the row, the value located (for
 * large byte arrays, such as encoded images, no per-value copy). The chunk's page map (each data
 * page's offset and first row, from the OffsetIndex when the file has one, else by walking the
 * page headers once) and its decoded dictionary are built on first use and kept in the file
 * handle. Thread-safe like ftl_parquet_read_column (each thread its own `out`). Errors as
 * ftl_parquet_read_column; FTL_E_INVALID_ARG for a row outside the row group. */
ftl_status ftl_parquet_read_value(ftl_parquet_file *f, int row_group, int column, int64_t row, ftl_parquet_value *out);
void ftl_parquet_value_free(ftl_parquet_value *v);
/* Checks that row group `row_group` still holds the bytes it was written with, without
 * decompressing or decoding: every column chunk's page headers (as ftl_parquet_read_column
 * checks them) and the CRC of every page that has one. FTL_E_FORMAT names the file, row group,
 * column and page. Sets *pages_without_crc (may be NULL) to the pages it could not check. */
ftl_status ftl_parquet_check_row_group(ftl_parquet_file *f, int row_group, int64_t *pages_without_crc);

/* ------------------------------------------------------------------------------------------
 * Column checksum "interop colhash v1" (shared/tools/interop/README.md): SHA-256 over the
 * column's values in row order, nulls skipped, each value as INT32 4 bytes LE, INT64 8 bytes
 * LE, FLOAT/DOUBLE 4/8 bytes LE, BOOLEAN 1 byte 0/1, byte arrays uint32 LE length + bytes;
 * and SHA-256 over the uint64 LE row indexes of the nulls. Fed one row group at a time. */

typedef struct ftl_parquet_colhash ftl_parquet_colhash;

typedef struct ftl_parquet_colhash_result {
    char sha256[65];             /* lowercase hex */
    char nulls_sha256[65];       /* lowercase hex; "" when the column has no nulls */
    int64_t count;               /* non-null values */
    int64_t null_count;
} ftl_parquet_colhash_result;

/* FTL_E_UNSUPPORTED for INT96 (colhash v1 does not define it). */
ftl_status ftl_parquet_colhash_init(ftl_parquet_colhash **out, ftl_parquet_type type);
/* Adds the next rows (values->type must match). */
ftl_status ftl_parquet_colhash_update(ftl_parquet_colhash *h, const ftl_parquet_column_values *values);
/* The checksum of everything added so far; the hash can no longer be updated afterwards. */
void ftl_parquet_colhash_final(ftl_parquet_colhash *h, ftl_parquet_colhash_result *out);
void ftl_parquet_colhash_free(ftl_parquet_colhash *h);

/* ------------------------------------------------------------------------------------------
 * Description (ftl inspect FILE.parquet) */

typedef struct ftl_parquet_describe_options {
    bool json;       /* one JSON document instead of text */
    bool checksums;  /* read every column and add its colhash v1 (sha256, count, null_count) */
    bool pages;      /* walk the page headers: page counts by type/encoding per chunk */
} ftl_parquet_describe_options;

/* Prints the schema, row count, row groups (rows, bytes, codec and encodings per column),
 * created_by and key-value metadata. For an ftl dataset (ftl.classes metadata and a `label`
 * column) also the class names and per-class row counts, counted from the label column. */
ftl_status ftl_parquet_describe(const char *path, FILE *out, const ftl_parquet_describe_options *opts);

#ifdef __cplusplus
}
#endif
#endif
