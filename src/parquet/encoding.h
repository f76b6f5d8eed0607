/* Parquet value and level encodings: the RLE / bit-packing hybrid (levels, dictionary indices,
 * booleans), bit unpacking, the DELTA_* encodings and BYTE_STREAM_SPLIT. Decoders are bounds-
 * checked against their input and return false (with a static message) on malformed data. */
#ifndef FTL_PARQUET_ENCODING_H
#define FTL_PARQUET_ENCODING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reads `bit_width` (<= 64) bits at bit position `bitpos` of src (LSB first, as Parquet packs);
 * the caller guarantees (bitpos + bit_width + 7) / 8 <= src_len. */
uint64_t pq_read_bits(const uint8_t *src, size_t src_len, uint64_t bitpos, int bit_width);

typedef struct pq_rle_decoder {
    const uint8_t *p, *end;
    int bit_width;
    int value_bytes;            /* bytes of an RLE run's value: ceil(bit_width / 8) */
    uint64_t rle_left;          /* values left in the current RLE run */
    uint32_t rle_value;
    uint64_t packed_left;       /* values left in the current bit-packed run */
    const uint8_t *packed;      /* that run's data */
    size_t packed_len;          /* bytes of it present in the input */
    uint64_t packed_pos;        /* bit position of its next value */
    const char *error;
} pq_rle_decoder;

/* bit_width 0..32. */
void pq_rle_init(pq_rle_decoder *d, const uint8_t *data, size_t size, int bit_width);
/* Decodes the next n values; false (d->error set) when the data ends early or is malformed. */
bool pq_rle_decode_u32(pq_rle_decoder *d, uint32_t *out, size_t n);
/* Same, for bit widths <= 8 (definition levels, booleans). */
bool pq_rle_decode_u8(pq_rle_decoder *d, uint8_t *out, size_t n);

/* Appends the RLE / bit-packed hybrid encoding of n values (each < 2^bit_width, bit_width <= 8)
 * to *buf (grown with ftl_xrealloc); returns the bytes appended. Long runs become RLE runs,
 * the rest bit-packed groups of 8. */
size_t pq_rle_encode_u8(const uint8_t *values, size_t n, int bit_width, uint8_t **buf, size_t *len, size_t *cap);

/* The deprecated BIT_PACKED encoding (old definition levels): values packed MSB first, no
 * header. Needs (n * bit_width + 7) / 8 bytes; false when size is short. */
bool pq_bitpacked_msb_decode(const uint8_t *data, size_t size, int bit_width, uint8_t *out, size_t n);

/* DELTA_BINARY_PACKED: decodes exactly `count` values (the header must say so) from
 * data[0..size) into out; *used gets the bytes consumed. Arithmetic wraps modulo 2^64 (the low
 * 32 bits are the INT32 values). */
bool pq_delta_decode(const uint8_t *data, size_t size, int64_t *out, size_t count, size_t *used, const char **err);

/* BYTE_STREAM_SPLIT: `width` byte streams of `count` bytes each -> count values of width bytes. */
bool pq_byte_stream_split_decode(const uint8_t *data, size_t size, size_t count, int width, uint8_t *out, const char **err);

#endif
