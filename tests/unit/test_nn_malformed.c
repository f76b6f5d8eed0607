/* Malformed and unsupported models give clear errors (status + message naming the node, tensor or
 * file), never a crash: the same tests run under ASan+UBSan (ftl_unit_san). The bad models are
 * built by tests/ref/nn_cases.py (bad_models) with python3-onnx; truncated and corrupted copies of
 * a shipped model are made here. */
#include "nn_testutil.h"
#include "test.h"
#include "util/alloc.h"
#include "util/fsutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Loading `path` fails with `want` and a message containing every needle. */
static void expect_load_error(const char *path, ftl_status want, const char *needle1, const char *needle2) {
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.batch = 2;
    ftl_model *m = NULL;
    ftl_status st = ftl_model_load(path, &o, &m);
    if (st == FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "%s loaded, expected an error", path);
        ftl_model_free(m);
        return;
    }
    const char *msg = ftl_last_error();
    printf("  %s -> %s\n", strrchr(path, '/') + 1, msg);
    if (want != FTL_OK && st != want)
        ftl_test_fail(__FILE__, __LINE__, "%s: status %s, expected %s", path, ftl_status_name(st), ftl_status_name(want));
    CHECK_CONTAINS(msg, needle1);
    if (needle2) CHECK_CONTAINS(msg, needle2);
}

static void bad(const char *name, ftl_status want, const char *needle1, const char *needle2) {
    char *path = ftl_format("%s/ref/nn/ops/bad/%s.onnx", ftl_test_build_dir(), name);
    if (!ftl_path_exists(path)) ftl_test_fail(__FILE__, __LINE__, "%s missing: run tests/ref/gen_nn.sh", path);
    else expect_load_error(path, want, needle1, needle2);
    free(path);
}

TEST(nn_bad_graphs) {
    bad("missing_initializer", FTL_E_FORMAT, "node 'conv1' (Conv)", "input 'W' is not produced");
    bad("wrong_shapes", FTL_E_FORMAT, "node 'conv1' (Conv)", "3 channels");
    bad("unknown_op", FTL_E_UNSUPPORTED, "node 'mystery'", "unsupported op 'FooBar'");
    bad("unknown_attribute", FTL_E_UNSUPPORTED, "node 'conv1' (Conv)", "unsupported attribute 'foo'");
    bad("unsupported_attribute_value", FTL_E_UNSUPPORTED, "node 'pool1' (MaxPool)", "storage_order");
    bad("cycle", FTL_E_FORMAT, "cycle", "node '");
    bad("self_loop", FTL_E_FORMAT, "'x'", "defined twice");
    bad("duplicate_output", FTL_E_FORMAT, "'y'", "defined twice");
    bad("two_inputs", FTL_E_UNSUPPORTED, "2 graph inputs", NULL);
    bad("old_opset", FTL_E_UNSUPPORTED, "opset 3", NULL);
    bad("dynamic_hw", FTL_E_UNSUPPORTED, "dynamic", "'x'");
    bad("batch_mixed_output", FTL_E_UNSUPPORTED, "not the batch", "'y'");
    /* shape arithmetic folds; values of activations do not, nor a Gather of several indices */
    bad("shape_from_values", FTL_E_UNSUPPORTED, "node 'to_shape' (Cast)", "runs on an activation");
    bad("gather_on_activation", FTL_E_UNSUPPORTED, "node 'pick_channel' (Gather)", "runs on an activation");
    bad("split_sizes_mismatch", FTL_E_FORMAT, "node 'halves' (Split)", "split sizes add up to 4, axis 1 of [1,3,8,8]");
    /* Einsum: only batched matrix products keeping the batch axis first */
    bad("einsum_ellipsis", FTL_E_UNSUPPORTED, "node 'mix' (Einsum): attribute 'equation'", "no '...'");
    bad("einsum_reduces", FTL_E_UNSUPPORTED, "node 'mix' (Einsum): attribute 'equation'", "sums an axis of one input away");
    bad("einsum_batch_moved", FTL_E_UNSUPPORTED, "node 'mix' (Einsum): attribute 'equation'", "keep the batch axis first");
    /* crafted files that once crashed the loader */
    bad("constant_without_output", FTL_E_FORMAT, "node 'nameless' (Constant)", "its output has no name");
    bad("div_int64_min", FTL_OK, "node 'reshape_div' (Reshape)", NULL);
    bad("conv_zero_channels", FTL_E_FORMAT, "node 'conv_empty' (Conv)", "zero-size dimension");
    bad("concat_axis_huge", FTL_E_UNSUPPORTED, "node 'cat' (Concat)", "'axis'");
}

static char *write_copy(const char *name, const uint8_t *data, size_t size);

TEST(nn_bad_tensor_data) {
    bad("missing_external_file", FTL_E_NOT_FOUND, "initializer 'W'", "'missing_external_file.bin' not found");
    bad("offset_past_end", FTL_E_FORMAT, "initializer 'W'", "offset 4096 is past the end");
    bad("length_past_end", FTL_E_FORMAT, "initializer 'W'", "past the end");
    bad("external_escapes_folder", FTL_E_FORMAT, "initializer 'W'", "relative path inside");
    bad("external_wrong_length", FTL_E_FORMAT, "initializer 'W'", "length 400");
    bad("raw_data_short", FTL_E_FORMAT, "tensor 'W'", "raw_data has 100 bytes");
    bad("dims_overflow", FTL_E_FORMAT, "tensor 'W'", "too many elements");
    /* external data that is a FIFO: refused, not read (which would block forever) */
    char *src = ftl_format("%s/ref/nn/ops/bad/external_fifo.onnx", ftl_test_build_dir());
    uint8_t *bytes = NULL;
    size_t size = 0;
    if (ftl_read_file(src, &bytes, &size) != FTL_OK) ftl_test_fail(__FILE__, __LINE__, "%s missing: run tests/ref/gen_nn.sh", src);
    else {
        char *copy = write_copy("external_fifo.onnx", bytes, size); /* (a fresh scratch folder) */
        char *fifo = ftl_format("%.*s/external_fifo.bin", (int)(strrchr(copy, '/') - copy), copy);
        unlink(fifo);
        if (mkfifo(fifo, 0600) != 0) ftl_test_fail(__FILE__, __LINE__, "mkfifo %s failed", fifo);
        else expect_load_error(copy, FTL_E_FORMAT, "initializer 'W'", "is not a regular file");
        unlink(fifo);
        free(copy), free(fifo);
    }
    free(bytes), free(src);
}

static char *write_copy(const char *name, const uint8_t *data, size_t size) {
    char *path = ftl_format("%s/%s", ftl_test_scratch_dir(), name);
    FILE *f = fopen(path, "wb");
    if (f) {
        if (size) fwrite(data, 1, size, f);
        fclose(f);
    }
    return path;
}

TEST(nn_truncated_and_corrupt_files) {
    char *src = ftl_format("%s/models/mobilenet_v1_0.25_128.onnx", ftl_test_shared_dir());
    size_t size = 0;
    uint8_t *data = nn_test_read(src, &size);
    REQUIRE(data && size > 100000);
    const size_t cuts[] = {0, 1, 10, 1000, 200000, size / 2, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "truncated_%zu.onnx", cuts[i]);
        char *path = write_copy(name, data, cuts[i]);
        expect_load_error(path, FTL_OK, "truncated_", NULL); /* any error, naming the file */
        free(path);
    }
    /* random byte corruptions: an error or a model, never a crash (parse and validate only) */
    uint64_t x = 42;
    FILE *null = fopen("/dev/null", "w");
    int errors = 0;
    for (int k = 0; k < 40; k++) {
        uint8_t *copy = malloc(size);
        memcpy(copy, data, size);
        for (int j = 0; j < 8; j++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            size_t pos = (size_t)((x >> 33) % (k < 20 ? 4096 : size)); /* the first half hits the graph structure */
            copy[pos] ^= (uint8_t)(1u << ((x >> 20) & 7));
        }
        char *path = write_copy("corrupt.onnx", copy, size);
        if (ftl_model_describe(path, NULL, null) != FTL_OK) {
            errors++;
            CHECK(ftl_last_error()[0] != 0);
        }
        free(path);
        free(copy);
    }
    fclose(null);
    printf("  40 corrupted copies: %d rejected with an error, %d still valid models\n", errors, 40 - errors);
    char *garbage = write_copy("garbage.onnx", (const uint8_t *)"this is not a protobuf at all\xff\xff\xff", 32);
    expect_load_error(garbage, FTL_E_FORMAT, "not an ONNX model", NULL);
    free(garbage);
    free(data);
    free(src);
}

TEST(nn_missing_paths_and_external_files) {
    expect_load_error("/nonexistent/model.onnx", FTL_E_NOT_FOUND, "no such file", NULL);
    expect_load_error(ftl_test_scratch_dir(), FTL_E_INVALID_ARG, "is a folder", NULL);
    /* Xception without its four data files next to it */
    char *src = ftl_format("%s/models/xception_random.onnx", ftl_test_shared_dir());
    size_t size = 0;
    uint8_t *data = nn_test_read(src, &size);
    REQUIRE(data);
    char *path = write_copy("xception_alone.onnx", data, size);
    expect_load_error(path, FTL_E_NOT_FOUND, "xception_random.onnx.data0' not found", "initializer '");
    free(path);
    free(data);
    free(src);
}

TEST(nn_bad_options) {
    char *src = ftl_format("%s/models/mobilenet_v1_0.25_128.onnx", ftl_test_shared_dir());
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.features_from = "no_such_tensor";
    ftl_model *m = NULL;
    CHECK_EQ_INT(ftl_model_load(src, &o, &m), FTL_E_NOT_FOUND);
    CHECK_CONTAINS(ftl_last_error(), "--features-from 'no_such_tensor'");
    o.features_from = NULL;
    o.batch = 0;
    CHECK_EQ_INT(ftl_model_load(src, &o, &m), FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "--batch 0");
    ftl_nn_precision p;
    CHECK_EQ_INT(ftl_nn_precision_parse("fp16", &p), FTL_E_INVALID_ARG);
    CHECK(m == NULL);
    free(src);
}

/* Telling an ONNX file from the others by its first bytes: a ModelProto starts with tag 0x08, but so
 * does a safetensors file (MODEL.ftl, a checkpoint) whose header length is 8 more than a multiple of
 * 256 - it must not be taken for a model (ftl inspect once did, for 1 in 32 model files). */
TEST(nn_onnx_sniffing_skips_safetensors_and_parquet) {
    const char *dir = ftl_test_scratch_dir();
    struct { const char *name; unsigned char head[12]; bool onnx; } files[] = {
        {"st.ftl", {0x08, 0x01, 0, 0, 0, 0, 0, 0, '{', '"', 'a', '"'}, false}, /* header of 264 bytes */
        {"model.bin", {0x08, 0x07, 0x12, 0x04, 't', 'e', 's', 't', 0x3a, 0x02, 0x0a, 0x00}, true},
        {"data.bin", {'P', 'A', 'R', '1', 0x15, 0x04, 0, 0, 0, 0, 0, 0}, false},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *path = ftl_format("%s/%s", dir, files[i].name);
        FILE *f = fopen(path, "wb");
        REQUIRE(f);
        fwrite(files[i].head, 1, sizeof files[i].head, f);
        fclose(f);
        CHECK(ftl_model_path_is_onnx(path) == files[i].onnx);
        free(path);
    }
}
