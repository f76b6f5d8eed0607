/* The names of Parquet's types, codecs and encodings, as messages and `ftl inspect` print them,
 * and the codec names `ftl prep --compression` takes. */
#include "ftl/parquet.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

const char *ftl_parquet_type_name(ftl_parquet_type t) {
    static const char *const names[] = {"BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
    return (int)t >= 0 && (int)t < 8 ? names[t] : "?";
}

const char *ftl_parquet_codec_name(ftl_parquet_codec c) {
    static const char *const names[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
    return (int)c >= 0 && (int)c < 8 ? names[c] : "?";
}

const char *ftl_parquet_encoding_name(int e) {
    static const char *const names[] = {"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED",
                                        "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
                                        "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
    return e >= 0 && e < 10 ? names[e] : "?";
}

bool ftl_parquet_codec_parse(const char *name, ftl_parquet_codec *out) {
    static const struct { const char *name; ftl_parquet_codec codec; } table[] = {
        {"none", FTL_PARQUET_CODEC_NONE}, {"uncompressed", FTL_PARQUET_CODEC_NONE}, {"snappy", FTL_PARQUET_CODEC_SNAPPY},
        {"gzip", FTL_PARQUET_CODEC_GZIP}, {"zstd", FTL_PARQUET_CODEC_ZSTD}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcasecmp(name, table[i].name) == 0) {
            *out = table[i].codec;
            return true;
        }
    return false;
}
