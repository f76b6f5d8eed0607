/* Thrift compact protocol and Parquet encodings against exact bytes worked out by hand from the
 * specifications (Thrift's compact protocol spec; Parquet Encodings.md, whose own examples are
 * used where it has them). */
#include "test.h"
#include "parquet/column_decode.h"
#include "parquet/encoding.h"
#include "parquet/levels.h"
#include "parquet/page_crc.h"
#include "parquet/thrift.h"
#include "util/rng.h"

#include <stdlib.h>
#include <zlib.h>

/* ---- thrift ---- */

TEST(parquet_thrift_compact_exact_bytes) {
    /* struct {1: i32 150, 2: binary "hi", 20: i64 -1, 21: bool true, 22: list<i32> [1, -1, 0]} */
    static const uint8_t want[] = {0x15, 0xAC, 0x02,             /* delta 1, I32; zigzag(150) = 300 */
                                   0x18, 0x02, 'h', 'i',         /* delta 1, BINARY, length 2 */
                                   0x06, 0x28, 0x01,             /* delta 18 > 15: type byte + zigzag i16 id 20; zigzag(-1) */
                                   0x11,                         /* delta 1, BOOL_TRUE */
                                   0x19, 0x35, 0x02, 0x01, 0x00, /* delta 1, LIST; 3 x I32 */
                                   0x00};                        /* STOP */
    thrift_writer w = {0};
    thrift_write_struct_begin(&w, 0);
    thrift_write_i32_field(&w, 1, 150);
    thrift_write_binary_field(&w, 2, "hi", 2);
    thrift_write_i64_field(&w, 20, -1);
    thrift_write_bool_field(&w, 21, true);
    thrift_write_list_begin(&w, 22, THRIFT_I32, 3);
    thrift_write_zigzag(&w, 1);
    thrift_write_zigzag(&w, -1);
    thrift_write_zigzag(&w, 0);
    thrift_write_struct_end(&w);
    CHECK_EQ_INT(w.size, sizeof want);
    CHECK(w.size == sizeof want && memcmp(w.data, want, sizeof want) == 0);

    thrift_reader r;
    thrift_reader_init(&r, want, sizeof want);
    int16_t last = 0, id;
    int type, fields = 0;
    while (thrift_next_field(&r, &last, &type, &id)) {
        fields++;
        if (id == 1) CHECK_EQ_INT(thrift_read_i32(&r), 150);
        else if (id == 2) {
            const uint8_t *d;
            uint32_t n;
            thrift_read_binary(&r, &d, &n);
            CHECK(n == 2 && memcmp(d, "hi", 2) == 0);
        } else if (id == 20) CHECK_EQ_INT(thrift_read_i64(&r), -1);
        else if (id == 21) CHECK_EQ_INT(type, THRIFT_BOOL_TRUE);
        else if (id == 22) {
            int et;
            uint32_t n;
            thrift_read_list_header(&r, &et, &n);
            CHECK_EQ_INT(et, THRIFT_I32);
            CHECK_EQ_INT(n, 3);
            CHECK_EQ_INT(thrift_read_i32(&r), 1);
            CHECK_EQ_INT(thrift_read_i32(&r), -1);
            CHECK_EQ_INT(thrift_read_i32(&r), 0);
        } else ftl_test_fail(__FILE__, __LINE__, "unexpected field %d", id);
    }
    CHECK(r.error == NULL);
    CHECK_EQ_INT(fields, 5);
    CHECK(r.p == r.end);
    thrift_writer_free(&w);
}

TEST(parquet_thrift_long_list_and_varints) {
    thrift_writer w = {0};
    thrift_write_list_begin(&w, 1, THRIFT_BINARY, 300); /* 15+ elements: 0xF8 then varint 300 */
    CHECK(w.size == 4 && w.data[0] == 0x19 && w.data[1] == 0xF8 && w.data[2] == 0xAC && w.data[3] == 0x02);
    thrift_writer_reset(&w);
    thrift_write_zigzag(&w, INT64_MIN); /* zigzag: 2^64 - 1: ten bytes, the last 0x01 */
    CHECK_EQ_INT(w.size, 10);
    CHECK(w.data[0] == 0xFF && w.data[9] == 0x01);
    thrift_reader r;
    thrift_reader_init(&r, w.data, w.size);
    CHECK(thrift_read_i64(&r) == INT64_MIN);
    CHECK(r.error == NULL);
    /* an 11-byte varint is an error, not a wrap-around */
    static const uint8_t too_long[11] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    thrift_reader_init(&r, too_long, sizeof too_long);
    thrift_read_uvarint(&r);
    CHECK(r.error != NULL);
    thrift_writer_free(&w);
}

TEST(parquet_thrift_rejects_malformed_input) {
    static const uint8_t good[] = {0x15, 0xAC, 0x02, 0x28, 0x02, 'h', 'i', 0x19, 0x35, 0x02, 0x01, 0x00, 0x00};
    /* every truncation is an error, never a read past the end */
    for (size_t n = 0; n < sizeof good; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, good, n);
        thrift_reader r;
        thrift_reader_init(&r, copy, n);
        thrift_skip(&r, THRIFT_STRUCT);
        CHECK(r.error != NULL);
        free(copy);
    }
    /* a list claiming more elements than bytes left */
    static const uint8_t big_list[] = {0x19, 0xF5, 0xFF, 0xFF, 0x03, 0x00, 0x00};
    thrift_reader r;
    thrift_reader_init(&r, big_list, sizeof big_list);
    thrift_skip(&r, THRIFT_STRUCT);
    CHECK(r.error != NULL);
    /* structs nested deeper than the limit */
    uint8_t deep[200];
    memset(deep, 0x1C, sizeof deep); /* field 1 of type STRUCT, again and again */
    thrift_reader_init(&r, deep, sizeof deep);
    thrift_skip(&r, THRIFT_STRUCT);
    CHECK(r.error != NULL);
    /* a binary longer than the input */
    static const uint8_t long_bin[] = {0x18, 0x7F, 'a'};
    thrift_reader_init(&r, long_bin, sizeof long_bin);
    thrift_skip(&r, THRIFT_STRUCT);
    CHECK(r.error != NULL);
    /* maps are skipped (Parquet has none, but unknown fields may) */
    static const uint8_t with_map[] = {0x1B, 0x02, 0x55, 0x02, 0x04, 0x06, 0x08, 0x15, 0x07, 0x00};
    thrift_reader_init(&r, with_map, sizeof with_map);
    int16_t last = 0, id;
    int type;
    int32_t seen = 0;
    while (thrift_next_field(&r, &last, &type, &id)) {
        if (id == 2) seen = thrift_read_i32(&r);
        else thrift_skip(&r, type);
    }
    CHECK(r.error == NULL);
    CHECK_EQ_INT(seen, -4);
}

/* ---- RLE / bit-packing hybrid ---- */

TEST(parquet_rle_spec_examples) {
    /* Encodings.md: 0..7 bit-packed with bit width 3 are 10001000 11000110 11111010 */
    static const uint8_t packed[] = {0x03, 0x88, 0xC6, 0xFA}; /* header (1 group << 1) | 1 */
    uint32_t out[8];
    pq_rle_decoder d;
    pq_rle_init(&d, packed, sizeof packed, 3);
    REQUIRE(pq_rle_decode_u32(&d, out, 8));
    for (uint32_t i = 0; i < 8; i++) CHECK_EQ_INT(out[i], i);
    /* an RLE run: 100 times the value 5 (header 100 << 1 = 200 = varint C8 01) */
    static const uint8_t run[] = {0xC8, 0x01, 0x05};
    uint32_t many[100];
    pq_rle_init(&d, run, sizeof run, 3);
    REQUIRE(pq_rle_decode_u32(&d, many, 100));
    for (int i = 0; i < 100; i++) CHECK_EQ_INT(many[i], 5);
    CHECK(!pq_rle_decode_u32(&d, many, 1)); /* nothing left */
    /* the deprecated BIT_PACKED encoding of 0..7, bit width 3: 00000101 00111001 01110111 */
    static const uint8_t msb[] = {0x05, 0x39, 0x77};
    uint8_t v[8];
    REQUIRE(pq_bitpacked_msb_decode(msb, sizeof msb, 3, v, 8));
    for (int i = 0; i < 8; i++) CHECK_EQ_INT(v[i], i);
    CHECK(!pq_bitpacked_msb_decode(msb, 2, 3, v, 8));
}

TEST(parquet_rle_encoder_bytes_and_round_trip) {
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    uint8_t ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    pq_rle_encode_u8(ones, 8, 1, &buf, &len, &cap);
    CHECK(len == 2 && buf[0] == 0x10 && buf[1] == 0x01); /* RLE run of 8 */
    len = 0;
    uint8_t mixed[3] = {1, 0, 1};
    pq_rle_encode_u8(mixed, 3, 1, &buf, &len, &cap);
    CHECK(len == 2 && buf[0] == 0x03 && buf[1] == 0x05); /* one bit-packed group, padded */
    /* random level sequences with long and short runs decode back to themselves */
    ftl_rng rng;
    ftl_rng_seed(&rng, 42);
    for (int trial = 0; trial < 200; trial++) {
        size_t n = (size_t)ftl_rng_below(&rng, 3000);
        int bw = 1 + (int)ftl_rng_below(&rng, 8);
        uint8_t *x = malloc(n + 1), *y = malloc(n + 1);
        for (size_t i = 0; i < n;) {
            size_t r = 1 + (size_t)ftl_rng_below(&rng, ftl_rng_below(&rng, 2) ? 40 : 3);
            uint8_t value = (uint8_t)ftl_rng_below(&rng, 1u << bw);
            for (size_t k = 0; k < r && i < n; k++) x[i++] = value;
        }
        len = 0;
        pq_rle_encode_u8(x, n, bw, &buf, &len, &cap);
        pq_rle_decoder d;
        pq_rle_init(&d, buf, len, bw);
        CHECK(pq_rle_decode_u8(&d, y, n));
        CHECK(memcmp(x, y, n) == 0);
        free(x);
        free(y);
    }
    free(buf);
}

TEST(parquet_rle_rejects_truncated_and_wide_values) {
    static const uint8_t packed[] = {0x05, 0x88, 0xC6, 0xFA}; /* claims 2 groups (6 bytes), has 3 */
    uint32_t out[16];
    pq_rle_decoder d;
    pq_rle_init(&d, packed, sizeof packed, 3);
    CHECK(pq_rle_decode_u32(&d, out, 8));  /* the bytes present are readable */
    CHECK(!pq_rle_decode_u32(&d, out, 1)); /* the missing ones are not */
    static const uint8_t wide[] = {0x02, 0x09}; /* run value 9 does not fit in 3 bits */
    pq_rle_init(&d, wide, sizeof wide, 3);
    CHECK(!pq_rle_decode_u32(&d, out, 1));
    static const uint8_t zero_run[] = {0x00, 0x01};
    pq_rle_init(&d, zero_run, sizeof zero_run, 1);
    CHECK(!pq_rle_decode_u32(&d, out, 1));
}

/* ---- DELTA_BINARY_PACKED and friends ---- */

TEST(parquet_delta_binary_packed_spec_examples) {
    /* Example 1: 1 2 3 4 5 -> block size 8, 1 miniblock, 5 values, first 1; min delta 1, width 0 */
    static const uint8_t ex1[] = {0x08, 0x01, 0x05, 0x02, 0x02, 0x00};
    int64_t v[8];
    size_t used = 0;
    const char *err = NULL;
    REQUIRE(pq_delta_decode(ex1, sizeof ex1, v, 5, &used, &err));
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(v[i], i + 1);
    CHECK_EQ_INT(used, sizeof ex1);
    /* Example 2: 7 5 3 1 2 3 4 5 -> min delta -2, relative 0 0 0 3 3 3 3 (+1 padding) in 2 bits */
    static const uint8_t ex2[] = {0x08, 0x01, 0x08, 0x0E, 0x03, 0x02, 0xC0, 0x3F};
    static const int64_t want2[] = {7, 5, 3, 1, 2, 3, 4, 5};
    REQUIRE(pq_delta_decode(ex2, sizeof ex2, v, 8, &used, &err));
    for (int i = 0; i < 8; i++) CHECK_EQ_INT(v[i], want2[i]);
    CHECK_EQ_INT(used, sizeof ex2);
    /* the header's count must match the page's, and every truncation fails cleanly */
    CHECK(!pq_delta_decode(ex2, sizeof ex2, v, 7, &used, &err));
    for (size_t n = 0; n < sizeof ex2; n++) CHECK(!pq_delta_decode(ex2, n, v, 8, &used, &err));
    /* one value: the header alone */
    static const uint8_t one[] = {0x80, 0x01, 0x04, 0x01, 0x07}; /* 128, 4, 1, zigzag(-4) */
    REQUIRE(pq_delta_decode(one, sizeof one, v, 1, &used, &err));
    CHECK_EQ_INT(v[0], -4);
    CHECK_EQ_INT(used, sizeof one);
}

TEST(parquet_delta_wraps_int64) {
    /* INT64_MAX then INT64_MIN: a delta of +1 modulo 2^64; then 0 (a delta of 2^63) */
    static const uint8_t enc[] = {0x08, 0x01, 0x03, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, /* first = INT64_MAX */
                                  0x02,                                       /* min delta 1 */
                                  0x40,                                       /* width 64 */
                                  0, 0, 0, 0, 0, 0, 0, 0,                     /* relative 0 */
                                  0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F}; /* 2^63 - 1 */
    int64_t v[3];
    size_t used;
    const char *err;
    REQUIRE(pq_delta_decode(enc, sizeof enc, v, 3, &used, &err));
    CHECK(v[0] == INT64_MAX);
    CHECK(v[1] == INT64_MIN);
    CHECK(v[2] == 0);
}

/* A decoder over fresh buffers for one page of n non-null byte arrays. */
static void bytes_decoder(pq_decoder *d, ftl_parquet_column_values *v, int64_t n) {
    memset(d, 0, sizeof *d);
    d->out = v;
    d->type = FTL_PARQUET_BYTE_ARRAY;
    d->page_rows = d->nonnull = n;
    pq_slot_reserve(v, SLOT_VALUES, (size_t)(n + 1) * 8, false);
    ((int64_t *)pq_slot(v, SLOT_VALUES))[0] = 0;
    v->data_size = 0;
}

static void check_strings(ftl_parquet_column_values *v, const char *const *want, int n) {
    const int64_t *off = pq_slot(v, SLOT_VALUES);
    const char *data = pq_slot(v, SLOT_DATA);
    for (int i = 0; i < n; i++) {
        size_t len = strlen(want[i]);
        CHECK_EQ_INT(off[i + 1] - off[i], len);
        CHECK(off[i + 1] - off[i] == (int64_t)len && memcmp(data + off[i], want[i], len) == 0);
    }
}

TEST(parquet_delta_length_and_delta_strings_spec_examples) {
    /* DELTA_LENGTH_BYTE_ARRAY: "Hello" "World" "Foobar" "ABCDEF": lengths 5 5 6 6 (deltas 0 1 0,
     * min 0, 1 bit), then the concatenated bytes */
    static const uint8_t dlba[] = {0x08, 0x01, 0x04, 0x0A, 0x00, 0x01, 0x02, 'H', 'e', 'l', 'l', 'o', 'W', 'o', 'r', 'l', 'd',
                                   'F', 'o', 'o', 'b', 'a', 'r', 'A', 'B', 'C', 'D', 'E', 'F'};
    static const char *const words[] = {"Hello", "World", "Foobar", "ABCDEF"};
    ftl_parquet_column_values v = {0};
    pq_decoder d;
    bytes_decoder(&d, &v, 4);
    REQUIRE_OK(pq_decode_bytes(&d, FTL_PARQUET_ENC_DELTA_LENGTH_BYTE_ARRAY, dlba, sizeof dlba));
    check_strings(&v, words, 4);
    bytes_decoder(&d, &v, 4);
    CHECK(pq_decode_bytes(&d, FTL_PARQUET_ENC_DELTA_LENGTH_BYTE_ARRAY, dlba, sizeof dlba - 1) == FTL_E_FORMAT);

    /* DELTA_BYTE_ARRAY: "axis" "axle" "babble" "babyhood": prefixes 0 2 0 3 (deltas 2 -2 3, min -2,
     * relative 4 0 5 in 3 bits), suffix lengths 4 2 6 5 (deltas -2 4 -1, min -2, relative 0 6 1),
     * suffixes "axis" "le" "babble" "yhood" */
    static const uint8_t dba[] = {0x08, 0x01, 0x04, 0x00, 0x03, 0x03, 0x44, 0x01, 0x00,
                                  0x08, 0x01, 0x04, 0x08, 0x03, 0x03, 0x70, 0x00, 0x00,
                                  'a', 'x', 'i', 's', 'l', 'e', 'b', 'a', 'b', 'b', 'l', 'e', 'y', 'h', 'o', 'o', 'd'};
    static const char *const strs[] = {"axis", "axle", "babble", "babyhood"};
    bytes_decoder(&d, &v, 4);
    REQUIRE_OK(pq_decode_bytes(&d, FTL_PARQUET_ENC_DELTA_BYTE_ARRAY, dba, sizeof dba));
    check_strings(&v, strs, 4);
    /* a prefix longer than the previous value is corrupt */
    uint8_t bad[sizeof dba];
    memcpy(bad, dba, sizeof dba);
    bad[3] = 0x02; /* first prefix 1, but there is no previous value */
    bytes_decoder(&d, &v, 4);
    CHECK(pq_decode_bytes(&d, FTL_PARQUET_ENC_DELTA_BYTE_ARRAY, bad, sizeof bad) == FTL_E_FORMAT);
    ftl_parquet_column_values_free(&v);
}

TEST(parquet_byte_stream_split_spec_example) {
    /* Encodings.md: three floats AA BB CC DD, 00 11 22 33, A3 B4 C5 D6 are stored as
     * AA 00 A3 BB 11 B4 CC 22 C5 DD 33 D6 */
    static const uint8_t enc[] = {0xAA, 0x00, 0xA3, 0xBB, 0x11, 0xB4, 0xCC, 0x22, 0xC5, 0xDD, 0x33, 0xD6};
    static const uint8_t want[] = {0xAA, 0xBB, 0xCC, 0xDD, 0x00, 0x11, 0x22, 0x33, 0xA3, 0xB4, 0xC5, 0xD6};
    uint8_t out[12];
    const char *err;
    REQUIRE(pq_byte_stream_split_decode(enc, sizeof enc, 3, 4, out, &err));
    CHECK(memcmp(out, want, sizeof want) == 0);
    CHECK(!pq_byte_stream_split_decode(enc, sizeof enc - 1, 3, 4, out, &err));
}

TEST(parquet_read_bits_at_buffer_end) {
    /* 64-bit fields straddling bytes, read near the end where no 8-byte load is possible */
    uint8_t buf[17];
    for (int i = 0; i < 17; i++) buf[i] = (uint8_t)(0x11 * (i + 1));
    uint64_t want = 0;
    for (int i = 0; i < 8; i++) want |= (uint64_t)buf[9 + i] << (8 * i);
    CHECK(pq_read_bits(buf, sizeof buf, 72, 64) == want);
    /* 4 bits at the last nibble */
    CHECK(pq_read_bits(buf, sizeof buf, 16 * 8 + 4, 4) == (uint64_t)(buf[16] >> 4));
    /* a field crossing from byte 8 into 16 at bit offset 3 */
    uint64_t v = pq_read_bits(buf, sizeof buf, 67, 61);
    uint64_t ref = 0;
    for (int b = 0; b < 61; b++) {
        int bit = 67 + b;
        ref |= (uint64_t)(buf[bit >> 3] >> (bit & 7) & 1) << b;
    }
    CHECK(v == ref);
}

/* ---- definition levels ---- */

TEST(parquet_levels_any_bit_width_exact_bytes) {
    CHECK_EQ_INT(pq_level_bit_width(0), 0);
    CHECK_EQ_INT(pq_level_bit_width(1), 1);
    CHECK_EQ_INT(pq_level_bit_width(2), 2);
    CHECK_EQ_INT(pq_level_bit_width(3), 2);
    CHECK_EQ_INT(pq_level_bit_width(4), 3);
    /* levels 0,1,2,2,2,2,2,2 | 2,2 | 1,0 at 2 bits: a bit-packed group (LSB first: 0 | 1<<2 | 2<<4 |
     * 2<<6 = 0xA4, then 0xAA), an RLE run of two 2s, a bit-packed group padded with zeros; as a v1
     * page: a 4-byte length first, the values after */
    static const uint8_t v1[] = {8, 0, 0, 0, 0x03, 0xA4, 0xAA, 0x04, 0x02, 0x03, 0x01, 0x00, 'Z'};
    static const uint8_t want[12] = {0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 1, 0};
    uint8_t got[16];
    size_t used = 0;
    char err[160];
    CHECK_OK(pq_decode_def_levels(v1, sizeof v1, FTL_PARQUET_ENC_RLE, true, 2, 12, 12, got, &used, err, sizeof err));
    CHECK(memcmp(got, want, 12) == 0);
    CHECK_EQ_INT(used, 12);
    /* v2: the same levels without the length; the first 3 only */
    memset(got, 9, sizeof got);
    CHECK_OK(pq_decode_def_levels(v1 + 4, 8, FTL_PARQUET_ENC_RLE, false, 2, 12, 3, got, &used, err, sizeof err));
    CHECK(memcmp(got, want, 3) == 0 && got[3] == 9);
    /* the deprecated BIT_PACKED, most significant bit first: 2,1,0,2 = 10 01 00 10 */
    static const uint8_t msb[] = {0x92, 'Z'};
    CHECK_OK(pq_decode_def_levels(msb, sizeof msb, FTL_PARQUET_ENC_BIT_PACKED, true, 3, 4, 4, got, &used, err, sizeof err));
    CHECK(got[0] == 2 && got[1] == 1 && got[2] == 0 && got[3] == 2);
    CHECK_EQ_INT(used, 1);
    /* a level of 3 where the maximum is 2 (2 bits hold it); at maximum 3 it is valid */
    static const uint8_t three[] = {0x02, 0x03};
    CHECK(pq_decode_def_levels(three, 2, FTL_PARQUET_ENC_RLE, false, 2, 1, 1, got, &used, err, sizeof err) == FTL_E_FORMAT);
    CHECK_CONTAINS(err, "definition level 3 of value 0 is above the column's maximum 2");
    CHECK_OK(pq_decode_def_levels(three, 2, FTL_PARQUET_ENC_RLE, false, 3, 1, 1, got, &used, err, sizeof err));
    /* cut short, a length past the page, an unknown encoding */
    CHECK(pq_decode_def_levels(v1 + 4, 2, FTL_PARQUET_ENC_RLE, false, 2, 12, 12, got, &used, err, sizeof err) == FTL_E_FORMAT);
    CHECK_CONTAINS(err, "truncated");
    CHECK(pq_decode_def_levels(v1, 6, FTL_PARQUET_ENC_RLE, true, 2, 12, 12, got, &used, err, sizeof err) == FTL_E_FORMAT);
    CHECK_CONTAINS(err, "run past the page");
    CHECK(pq_decode_def_levels(msb, 1, FTL_PARQUET_ENC_BIT_PACKED, true, 3, 5, 5, got, &used, err, sizeof err) == FTL_E_FORMAT);
    CHECK(pq_decode_def_levels(v1, sizeof v1, FTL_PARQUET_ENC_PLAIN, true, 2, 12, 12, got, &used, err, sizeof err) == FTL_E_UNSUPPORTED);
}

/* ---- page CRCs ---- */

TEST(parquet_page_crc_folded_equals_zlib) {
    enum { N = (1 << 20) + 77 };
    uint8_t *buf = malloc(N);
    ftl_rng rng;
    ftl_rng_seed(&rng, 5);
    for (size_t i = 0; i < N; i++) buf[i] = (uint8_t)ftl_rng_next(&rng);
    if (!pq_crc32_folding_available()) ftl_test_skip("parquet_page_crc_folded", "this CPU has no PCLMULQDQ (zlib's crc32 runs instead)");
    /* every length around the 16- and 64-byte blocks, at every alignment, and a large buffer */
    int bad = 0;
    for (size_t len = 0; len < 600; len++)
        for (size_t off = 0; off < 16; off += 5) bad += pq_crc32_folded(buf + off, len) != (uint32_t)crc32(0, buf + off, (uInt)len);
    CHECK_EQ_INT(bad, 0);
    CHECK(pq_crc32_folded(buf, N) == (uint32_t)crc32(0, buf, N));
    CHECK(pq_crc32(buf + 3, N - 3) == pq_crc32_zlib(buf + 3, N - 3));
    CHECK(pq_crc32((const uint8_t *)"123456789", 9) == 0xCBF43926u); /* the check value of CRC-32 */
    free(buf);
}
