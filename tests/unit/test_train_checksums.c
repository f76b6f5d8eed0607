/* Tensor checksums in safetensors files: the writer records each tensor's CRC32C (checked against
 * a bit-at-a-time CRC written here from the definition), every flipped bit of the data section is
 * refused naming its tensor, files without checksums still load, and malformed checksum metadata
 * is refused naming the file (these tests also run under ASan and UBSan). */
#include "train_test_util.h"
#include "util/alloc.h"
#include "util/json.h"

#include <stdint.h>


/* Three tensors of different sizes and dtypes, the last one empty; written to the scratch folder. */
static char *write_sample(const char *name, float *f, int64_t *step) {
    for (int i = 0; i < 12; i++) f[i] = (float)i / 7.0f - 0.5f;
    *step = 123456789;
    ftl_safetensors_writer *w = ftl_safetensors_writer_new();
    int64_t s34[2] = {3, 4}, s0[1] = {0};
    ftl_safetensors_writer_add(w, "head.kernel", FTL_DTYPE_F32, 2, s34, f);
    ftl_safetensors_writer_add(w, "optimizer.step", FTL_DTYPE_I64, 0, NULL, step);
    ftl_safetensors_writer_add(w, "empty", FTL_DTYPE_F32, 1, s0, f);
    /* A stale value copied from another file is replaced by the real ones. */
    ftl_safetensors_writer_set_metadata(w, FTL_SAFETENSORS_META_CRC32C, "{\"head.kernel\":\"00000000\"}");
    char *path = ftl_format("%s/%s", ftl_test_scratch_dir(), name);
    ftl_status s = ftl_safetensors_writer_write(w, path);
    ftl_safetensors_writer_free(w);
    if (s != FTL_OK) ftl_test_fail(__FILE__, __LINE__, "write: %s", ftl_last_error());
    return path;
}

TEST(train_checksums_writer_records_each_tensors_crc32c) {
    float f[12];
    int64_t step;
    char *path = write_sample("sample.safetensors", f, &step);
    ftl_safetensors *st;
    REQUIRE_OK(ftl_safetensors_open(path, &st));
    CHECK(ftl_safetensors_has_checksums(st));
    const char *text = ftl_safetensors_metadata(st, FTL_SAFETENSORS_META_CRC32C);
    REQUIRE(text);
    ftl_json *v = NULL;
    REQUIRE_OK(ftl_json_parse(text, strlen(text), &v));
    CHECK_EQ_INT(v->count, 3);
    for (size_t i = 0; i < ftl_safetensors_tensor_count(st); i++) {
        const ftl_safetensors_tensor *t = ftl_safetensors_tensor_at(st, i);
        char want[9];
        snprintf(want, sizeof want, "%08x", crc32c_bitwise(t->data, (size_t)t->byte_size));
        CHECK_STR_EQ(ftl_json_get_string(v, t->name), want);
        uint32_t recorded = 0;
        CHECK(ftl_safetensors_checksum(st, t, &recorded));
        CHECK_EQ_INT(recorded, crc32c_bitwise(t->data, (size_t)t->byte_size));
    }
    CHECK_STR_EQ(ftl_json_get_string(v, "empty"), "00000000"); /* the CRC of no bytes */
    CHECK_OK(ftl_safetensors_verify_all(st));
    ftl_json_free(v);
    ftl_safetensors_close(st);
    free(path);
}

/* Which tensor holds data byte `at` (offsets from the data section's start). */
static const ftl_safetensors_tensor *tensor_at_offset(const ftl_safetensors *st, const uint8_t *data, size_t at) {
    for (size_t i = 0; i < ftl_safetensors_tensor_count(st); i++) {
        const ftl_safetensors_tensor *t = ftl_safetensors_tensor_at(st, i);
        if ((size_t)(t->data - data) <= at && at < (size_t)(t->data - data) + t->byte_size) return t;
    }
    return NULL;
}

TEST(train_checksums_every_flipped_data_bit_is_refused_naming_its_tensor) {
    float f[12];
    int64_t step;
    char *path = write_sample("victim.safetensors", f, &step);
    uint8_t *good, *copy;
    size_t size;
    REQUIRE_OK(ftl_read_file(path, &good, &size));
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--) header_len = header_len << 8 | good[i];
    size_t data_start = 8 + (size_t)header_len;
    REQUIRE(data_start + 12 * 4 + 8 == size);
    copy = malloc(size);
    int missed = 0;
    for (size_t at = 0; at < size - data_start; at++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(copy, good, size);
            copy[data_start + at] ^= (uint8_t)(1u << bit);
            ftl_safetensors *st = NULL;
            if (ftl_safetensors_open_buffer(copy, size, "flip.safetensors", &st) != FTL_OK) {
                ftl_test_fail(__FILE__, __LINE__, "a data flip made the header unreadable: %s", ftl_last_error());
                continue;
            }
            const ftl_safetensors_tensor *hit = tensor_at_offset(st, ftl_safetensors_tensor_at(st, 0)->data, at);
            char *want = ftl_format("flip.safetensors: tensor \"%s\" is damaged", hit ? hit->name : "?");
            if (ftl_safetensors_verify_all(st) != FTL_E_FORMAT || !strstr(ftl_last_error(), want)) missed++;
            /* Reading it fails the same way; reading the other tensor does not. */
            float back[12];
            int64_t n = 0;
            int64_t s34[2] = {3, 4};
            ftl_status kernel = ftl_safetensors_read(st, "head.kernel", FTL_DTYPE_F32, 2, s34, back, sizeof back);
            ftl_status count = ftl_safetensors_read(st, "optimizer.step", FTL_DTYPE_I64, 0, NULL, &n, sizeof n);
            bool in_kernel = hit && strcmp(hit->name, "head.kernel") == 0;
            if ((kernel == FTL_OK) == in_kernel || (count == FTL_OK) != in_kernel) missed++;
            free(want);
            ftl_safetensors_close(st);
        }
    CHECK_EQ_INT(missed, 0);
    free(copy), free(good), free(path);
}


TEST(train_checksums_files_without_them_load_unverified) {
    size_t size;
    uint8_t *buf = safetensors_make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, &size);
    ftl_safetensors *st = NULL;
    REQUIRE_OK(ftl_safetensors_open_buffer(buf, size, "old.safetensors", &st));
    CHECK(!ftl_safetensors_has_checksums(st));
    uint32_t crc = 0;
    CHECK(!ftl_safetensors_checksum(st, ftl_safetensors_tensor_at(st, 0), &crc));
    CHECK_OK(ftl_safetensors_verify_all(st));
    float back[2] = {1, 1};
    CHECK_OK(ftl_safetensors_read(st, "a", FTL_DTYPE_F32, 1, (int64_t[]){2}, back, sizeof back));
    CHECK(back[0] == 0 && back[1] == 0);
    ftl_safetensors_close(st);
    free(buf);
}

static void expect_refused(const char *crc_json_escaped, const char *message_part) {
    char *header = ftl_format("{\"__metadata__\":{\"ftl.crc32c\":\"%s\"},"
                              "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                              "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
                              crc_json_escaped);
    size_t size;
    uint8_t *buf = safetensors_make_file(header, 8, &size);
    ftl_safetensors *st = NULL;
    if (ftl_safetensors_open_buffer(buf, size, "crafted.safetensors", &st) == FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "accepted: %s", header);
        ftl_safetensors_close(st);
    } else {
        CHECK_CONTAINS(ftl_last_error(), "crafted.safetensors");
        CHECK_CONTAINS(ftl_last_error(), message_part);
    }
    free(buf), free(header);
}

TEST(train_checksums_malformed_metadata_is_refused) {
    /* The well-formed baseline (the CRC of four zero bytes is 48674bc7), so each refusal below is
     * about the one thing it changes. */
    size_t size;
    uint8_t *buf = safetensors_make_file("{\"__metadata__\":{\"ftl.crc32c\":\"{\\\"a\\\":\\\"48674bc7\\\",\\\"b\\\":\\\"48674BC7\\\"}\"},"
                             "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                             "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}", 8, &size);
    ftl_safetensors *st = NULL;
    CHECK_OK(ftl_safetensors_open_buffer(buf, size, "ok", &st));
    if (st) CHECK_OK(ftl_safetensors_verify_all(st));
    ftl_safetensors_close(st);
    free(buf);
    expect_refused("{\\\"a\\\":\\\"48674bc7\\\"}", "tensor \"b\" has no CRC");
    expect_refused("{\\\"a\\\":\\\"48674bc7\\\",\\\"b\\\":\\\"48674bc\\\"}", "CRC of tensor \"b\" is not 8 hex digits");
    expect_refused("{\\\"a\\\":\\\"48674bc7\\\",\\\"b\\\":\\\"48674bc7 \\\"}", "CRC of tensor \"b\" is not 8 hex digits");
    expect_refused("{\\\"a\\\":\\\"48674bc7\\\",\\\"b\\\":\\\"0x674bc7\\\"}", "not 8 hex digits");
    expect_refused("{\\\"a\\\":\\\"48674bc7\\\",\\\"b\\\":1215777735}", "not 8 hex digits");
    expect_refused("{\\\"a\\\":\\\"48674bc7\\\",\\\"b\\\":\\\"48674bc7\\\",\\\"c\\\":\\\"48674bc7\\\"}",
                   "names tensor \"c\", which the file does not hold");
    expect_refused("{\\\"a\\\":\\\"48674bc7\\\",\\\"a\\\":\\\"48674bc7\\\",\\\"b\\\":\\\"48674bc7\\\"}", "names tensor \"a\" twice");
    expect_refused("[\\\"48674bc7\\\"]", "not a JSON object");
    expect_refused("{\\\"a\\\":", "ftl.crc32c");
}
