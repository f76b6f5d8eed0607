/* safetensors: a file written by hand in Python (tests/ref/train_ref.py, struct + json, following
 * the format spec) read here; our files read by an independent Python reader
 * (tests/ref/read_safetensors.py); round trips; and malformed files (truncated at every offset,
 * every bit flipped, hostile headers) rejected with a message naming the file, never a crash
 * (these tests also run under ASan and UBSan). */
#include "train_test_util.h"
#include "util/alloc.h"
#include "util/json.h"

#include <stdint.h>

static bool value_matches(const ftl_safetensors_tensor *t, size_t i, const char *repr) {
    const uint8_t *p = t->data + i * ftl_dtype_size(t->dtype);
    switch (t->dtype) {
    case FTL_DTYPE_F32: { float v; memcpy(&v, p, 4); return v == (float)strtod(repr, NULL); }
    case FTL_DTYPE_F64: { double v; memcpy(&v, p, 8); return v == strtod(repr, NULL); }
    case FTL_DTYPE_I32: { int32_t v; memcpy(&v, p, 4); return v == (int32_t)strtol(repr, NULL, 10); }
    case FTL_DTYPE_I64: { int64_t v; memcpy(&v, p, 8); return v == strtoll(repr, NULL, 10); }
    case FTL_DTYPE_U8: return *p == (uint8_t)strtoul(repr, NULL, 10);
    case FTL_DTYPE_U64: { uint64_t v; memcpy(&v, p, 8); return v == strtoull(repr, NULL, 10); }
    default: return false;
    }
}

/* Compares tensors and metadata against {"name": {"dtype", "shape", "values": [repr]}} plus a
 * metadata object (at `meta_key`). */
static void check_against_json(const ftl_safetensors *st, const ftl_json *tensors, const ftl_json *meta) {
    size_t expected = 0;
    for (size_t i = 0; i < tensors->count; i++) {
        if (strcmp(tensors->keys[i], "__metadata__") == 0) continue;
        expected++;
        const ftl_json *e = &tensors->items[i];
        const ftl_safetensors_tensor *t = ftl_safetensors_find(st, tensors->keys[i]);
        if (!t) {
            ftl_test_fail(__FILE__, __LINE__, "tensor %s missing", tensors->keys[i]);
            continue;
        }
        CHECK_STR_EQ(ftl_dtype_name(t->dtype), ftl_json_get_string(e, "dtype"));
        const ftl_json *shape = ftl_json_get(e, "shape"), *values = ftl_json_get(e, "values");
        REQUIRE(shape && values);
        CHECK_EQ_INT(t->ndim, shape->count);
        for (size_t d = 0; d < shape->count && d < (size_t)t->ndim; d++) CHECK_EQ_INT(t->shape[d], shape->items[d].number);
        CHECK_EQ_INT(t->element_count, values->count);
        for (size_t k = 0; k < values->count && k < t->element_count; k++)
            if (!value_matches(t, k, values->items[k].string))
                ftl_test_fail(__FILE__, __LINE__, "%s[%zu] != %s", tensors->keys[i], k, values->items[k].string);
    }
    CHECK_EQ_INT(ftl_safetensors_tensor_count(st), expected);
    CHECK_EQ_INT(ftl_safetensors_metadata_count(st), meta->count);
    for (size_t i = 0; i < meta->count; i++) CHECK_STR_EQ(ftl_safetensors_metadata(st, meta->keys[i]), meta->items[i].string);
}

TEST(train_safetensors_reads_file_written_by_python) {
    char *path = train_ref_path("torch_written.safetensors"), *json_path = train_ref_path("torch_written.json");
    uint8_t *text = NULL;
    size_t n = 0;
    ftl_json *expected = NULL;
    ftl_safetensors *st = NULL;
    if (ftl_read_file(json_path, &text, &n) != FTL_OK)
        ftl_test_fail(__FILE__, __LINE__, "reference missing (run tests/ref/gen_train.sh): %s", ftl_last_error());
    else if (ftl_json_parse((const char *)text, n, &expected) != FTL_OK)
        ftl_test_fail(__FILE__, __LINE__, "bad reference JSON: %s", ftl_last_error());
    else if (ftl_safetensors_open(path, &st) != FTL_OK)
        ftl_test_fail(__FILE__, __LINE__, "%s", ftl_last_error());
    else
        check_against_json(st, expected, ftl_json_get(expected, "__metadata__"));
    ftl_safetensors_close(st);
    ftl_json_free(expected);
    free(text), free(path), free(json_path);
}

static ftl_safetensors_writer *sample_writer(float *f, double *d, int32_t *i32, int64_t *i64, uint8_t *u8, uint64_t *u64) {
    for (int i = 0; i < 6; i++) f[i] = (float)i * 0.25f - 1.0f / 3.0f;
    d[0] = 1e-300, d[1] = -0.1, d[2] = 3.0;
    i32[0] = INT32_MIN, i32[1] = 7;
    i64[0] = INT64_MAX, i64[1] = -5;
    for (int i = 0; i < 5; i++) u8[i] = (uint8_t)(i * 60);
    u64[0] = UINT64_MAX, u64[1] = 1;
    ftl_safetensors_writer *w = ftl_safetensors_writer_new();
    int64_t s23[2] = {2, 3}, s3[1] = {3}, s2[1] = {2}, s5[1] = {5}, s21[2] = {2, 1}, s04[2] = {0, 4};
    ftl_safetensors_writer_add(w, "head.kernel", FTL_DTYPE_F32, 2, s23, f);
    ftl_safetensors_writer_add(w, "f64", FTL_DTYPE_F64, 1, s3, d);
    ftl_safetensors_writer_add(w, "i32", FTL_DTYPE_I32, 1, s2, i32);
    ftl_safetensors_writer_add(w, "i64", FTL_DTYPE_I64, 2, s21, i64);
    ftl_safetensors_writer_add(w, "u8", FTL_DTYPE_U8, 1, s5, u8);
    ftl_safetensors_writer_add(w, "u64", FTL_DTYPE_U64, 1, s2, u64);
    ftl_safetensors_writer_add(w, "scalar", FTL_DTYPE_F64, 0, NULL, d + 1);
    ftl_safetensors_writer_add(w, "empty", FTL_DTYPE_F32, 2, s04, f);
    ftl_safetensors_writer_set_metadata(w, "ftl.classes", "[\"ants\", \"b\\\"ees\"]");
    ftl_safetensors_writer_set_metadata(w, "note", "line1\nline2 \"quoted\" caf\xc3\xa9 \\ tab\t");
    ftl_safetensors_writer_set_metadata(w, "note", "replaced: caf\xc3\xa9"); /* replaces, not duplicates */
    return w;
}

TEST(train_safetensors_round_trip_and_python_reads_ours) {
    float f[6];
    double d[3];
    int32_t i32[2];
    int64_t i64[2];
    uint8_t u8[5];
    uint64_t u64[2];
    ftl_safetensors_writer *w = sample_writer(f, d, i32, i64, u8, u64);
    char *path = ftl_format("%s/ours.safetensors", ftl_test_scratch_dir());
    REQUIRE_OK(ftl_safetensors_writer_write(w, path));
    ftl_safetensors_writer_free(w);

    ftl_safetensors *st;
    REQUIRE_OK(ftl_safetensors_open(path, &st));
    CHECK_EQ_INT(ftl_safetensors_tensor_count(st), 8);
    CHECK_STR_EQ(ftl_safetensors_metadata(st, "note"), "replaced: caf\xc3\xa9");
    float back[6];
    int64_t want[2] = {2, 3}, wrong[2] = {3, -1};
    CHECK_OK(ftl_safetensors_read(st, "head.kernel", FTL_DTYPE_F32, 2, want, back, sizeof back));
    CHECK(memcmp(back, f, sizeof back) == 0);
    CHECK(ftl_safetensors_read(st, "head.kernel", FTL_DTYPE_F32, 2, wrong, back, sizeof back) == FTL_E_FORMAT);
    CHECK_CONTAINS(ftl_last_error(), "tensor \"head.kernel\": expected F32 [3, *], found F32 [2, 3]");
    CHECK(ftl_safetensors_read(st, "head.kernel", FTL_DTYPE_F64, -1, NULL, back, sizeof back) == FTL_E_FORMAT);
    CHECK(ftl_safetensors_read(st, "nope", FTL_DTYPE_F32, -1, NULL, back, 4) == FTL_E_FORMAT);
    CHECK_CONTAINS(ftl_last_error(), "ours.safetensors: tensor \"nope\" is missing");
    double scalar;
    CHECK_OK(ftl_safetensors_read(st, "scalar", FTL_DTYPE_F64, 0, NULL, &scalar, 8));
    CHECK(scalar == -0.1);
    ftl_safetensors_close(st);

    /* The independent Python reader: run it and compare what it saw with what we wrote. */
    const char *py = getenv("PY");
    char *cmd = ftl_format("%s tests/ref/read_safetensors.py '%s'", py && *py ? py : "/usr/bin/python3", path);
    FILE *p = popen(cmd, "r");
    ftl_strbuf out = {0};
    char buf[4096];
    size_t got;
    while (p && (got = fread(buf, 1, sizeof buf, p)) > 0) ftl_strbuf_append(&out, buf, got);
    int rc = p ? pclose(p) : -1;
    ftl_json *seen = NULL;
    if (rc != 0 || !out.data) {
        ftl_test_fail(__FILE__, __LINE__, "%s failed (exit %d)", cmd, rc);
    } else if (ftl_json_parse(out.data, out.len, &seen) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "bad JSON from the Python reader: %s", ftl_last_error());
    } else {
        REQUIRE_OK(ftl_safetensors_open(path, &st));
        check_against_json(st, ftl_json_get(seen, "tensors"), ftl_json_get(seen, "metadata"));
        ftl_safetensors_close(st);
    }
    ftl_json_free(seen);
    ftl_strbuf_free(&out);
    free(cmd), free(path);
}

TEST(train_safetensors_writer_refuses_bad_input_and_leaves_nothing) {
    const char *dir = ftl_test_scratch_dir();
    float x = 1;
    int64_t one[1] = {1};
    ftl_safetensors_writer *w = ftl_safetensors_writer_new();
    ftl_safetensors_writer_add(w, "a", FTL_DTYPE_F32, 1, one, &x);
    ftl_safetensors_writer_add(w, "a", FTL_DTYPE_F32, 1, one, &x);
    char *path = ftl_format("%s/dup.safetensors", dir);
    CHECK(ftl_safetensors_writer_write(w, path) == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "tensor \"a\" added twice");
    CHECK(!ftl_path_exists(path));
    ftl_safetensors_writer_free(w);
    free(path);
    w = ftl_safetensors_writer_new();
    ftl_safetensors_writer_add(w, "a", FTL_DTYPE_F32, 1, one, &x);
    path = ftl_format("%s/no/such/dir/x.safetensors", dir);
    CHECK(ftl_safetensors_writer_write(w, path) == FTL_E_IO);
    CHECK_CONTAINS(ftl_last_error(), "no/such/dir/x.safetensors");
    ftl_safetensors_writer_free(w);
    free(path);
}


static void expect_rejected(const char *header, size_t data_len, const char *message_part) {
    size_t size;
    uint8_t *buf = safetensors_make_file(header, data_len, &size);
    ftl_safetensors *st = NULL;
    ftl_status s = ftl_safetensors_open_buffer(buf, size, "crafted.safetensors", &st);
    if (s == FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "accepted: %s", header);
        ftl_safetensors_close(st);
    } else {
        CHECK_CONTAINS(ftl_last_error(), "crafted.safetensors");
        CHECK_CONTAINS(ftl_last_error(), message_part);
    }
    free(buf);
}

TEST(train_safetensors_rejects_hostile_headers) {
    /* A valid baseline first, so the rejections below are about the one thing each changes. */
    size_t size;
    uint8_t *ok = safetensors_make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, &size);
    ftl_safetensors *st = NULL;
    CHECK_OK(ftl_safetensors_open_buffer(ok, size, "ok", &st));
    ftl_safetensors_close(st);
    free(ok);
    expect_rejected("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlap");
    expect_rejected("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "belong to no tensor");
    expect_rejected("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "after the last tensor");
    expect_rejected("{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype \"F33\"");
    expect_rejected("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "need 12 bytes but data_offsets span 8");
    expect_rejected("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "shape[0]");
    expect_rejected("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8, "shape[0]");
    expect_rejected("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,80]}}", 8, "run past the data section");
    expect_rejected("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "end before they begin");
    expect_rejected("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "data_offsets");
    expect_rejected("{\"a\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776],\"data_offsets\":[0,8]}}", 8,
                    "more than the file's");
    expect_rejected("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "dimensions");
    expect_rejected("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                    "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2, "appears twice");
    expect_rejected("{\"__metadata__\":{\"k\":1}}", 0, "not a string");
    expect_rejected("{\"__metadata__\":[]}", 0, "__metadata__");
    expect_rejected("{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "missing \"dtype\"");
    expect_rejected("{\"a\":5}", 0, "not an object");
    expect_rejected("[1, 2]", 0, "does not start with '{'");
    expect_rejected("{\"a\": ", 0, "invalid JSON");

    /* Header lengths that point past the end of the file. */
    uint8_t huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'};
    CHECK(ftl_safetensors_open_buffer(huge, sizeof huge, "huge.safetensors", &st) == FTL_E_FORMAT);
    CHECK_CONTAINS(ftl_last_error(), "huge.safetensors: header length 18446744073709551615 exceeds the file size (16 bytes)");
    huge[0] = 9, memset(huge + 1, 0, 7);
    CHECK(ftl_safetensors_open_buffer(huge, sizeof huge, "off-by-one", &st) == FTL_E_FORMAT);
    CHECK(ftl_safetensors_open_buffer(huge, 5, "tiny", &st) == FTL_E_FORMAT);
    CHECK_CONTAINS(ftl_last_error(), "shorter than the 8-byte header length");
}

TEST(train_safetensors_truncated_and_bit_flipped_files_never_crash) {
    float f[6];
    double d[3];
    int32_t i32[2];
    int64_t i64[2];
    uint8_t u8[5];
    uint64_t u64[2];
    ftl_safetensors_writer *w = sample_writer(f, d, i32, i64, u8, u64);
    char *path = ftl_format("%s/victim.safetensors", ftl_test_scratch_dir());
    REQUIRE_OK(ftl_safetensors_writer_write(w, path));
    ftl_safetensors_writer_free(w);
    uint8_t *good;
    size_t size;
    REQUIRE_OK(ftl_read_file(path, &good, &size));
    /* Every truncation fails, with a message naming the file. */
    int accepted = 0;
    for (size_t len = 0; len < size; len++) {
        ftl_safetensors *st = NULL;
        if (ftl_safetensors_open_buffer(good, len, "cut.safetensors", &st) == FTL_OK) {
            accepted++;
            ftl_safetensors_close(st);
        } else if (!strstr(ftl_last_error(), "cut.safetensors")) {
            ftl_test_fail(__FILE__, __LINE__, "message without the file name: %s", ftl_last_error());
        }
    }
    CHECK_EQ_INT(accepted, 0);
    /* Every single-bit flip: either still a valid file (a flipped data byte) or a clean error. */
    uint8_t *copy = malloc(size);
    int rejected = 0;
    for (size_t i = 0; i < size; i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(copy, good, size);
            copy[i] ^= (uint8_t)(1u << bit);
            ftl_safetensors *st = NULL;
            if (ftl_safetensors_open_buffer(copy, size, "flip.safetensors", &st) == FTL_OK) {
                /* Whatever was accepted must be self-consistent: tensors within the buffer. */
                for (size_t k = 0; k < ftl_safetensors_tensor_count(st); k++) {
                    const ftl_safetensors_tensor *t = ftl_safetensors_tensor_at(st, k);
                    CHECK(t->byte_size == t->element_count * ftl_dtype_size(t->dtype));
                }
                ftl_safetensors_close(st);
            } else {
                rejected++;
                if (!strstr(ftl_last_error(), "flip.safetensors"))
                    ftl_test_fail(__FILE__, __LINE__, "byte %zu bit %d: %s", i, bit, ftl_last_error());
            }
        }
    CHECK(rejected > 0);
    free(copy), free(good), free(path);
}
