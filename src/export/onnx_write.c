/* Serialising the exported model, with external data when it is too large (see onnx_write.h). */
#include "export/onnx_write.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DATA_ALIGN = 64 }; /* offsets in the data file: lets readers map tensors aligned */

static Onnx__StringStringEntryProto *entry(onnx_builder *b, const char *key, const char *value) {
    Onnx__StringStringEntryProto *e = ob_alloc(b, sizeof *e);
    onnx__string_string_entry_proto__init(e);
    e->key = ob_strdup(b, key);
    e->value = ob_strdup(b, value);
    return e;
}

static ftl_status pack_to(ftl_atomic_file *f, const Onnx__ModelProto *m, size_t size, const char *path) {
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return ftl_fail(FTL_E_NOMEM, "out of memory for %zu bytes of %s", size, path);
    size_t packed = onnx__model_proto__pack(m, buf);
    ftl_status st = packed == size ? ftl_write_all(f->fp, buf, size, path)
                                   : ftl_fail(FTL_E_INTERNAL, "%s: packed %zu bytes, expected %zu", path, packed, size);
    free(buf);
    return st;
}

/* Moves initializers of at least ONNX_WRITE_EXTERNAL_MIN_BYTES into the data file. */
static ftl_status write_external(onnx_builder *b, Onnx__GraphProto *g, const char *location, ftl_atomic_file *data,
                                 onnx_write_result *r) {
    static const uint8_t zeros[DATA_ALIGN] = {0};
    uint64_t offset = 0;
    for (size_t i = 0; i < g->n_initializer; i++) {
        Onnx__TensorProto *t = g->initializer[i];
        if (!t->has_raw_data || t->raw_data.len < ONNX_WRITE_EXTERNAL_MIN_BYTES) continue;
        size_t pad = (size_t)((DATA_ALIGN - offset % DATA_ALIGN) % DATA_ALIGN);
        FTL_TRY(ftl_write_all(data->fp, zeros, pad, data->final_path));
        offset += pad;
        FTL_TRY(ftl_write_all(data->fp, t->raw_data.data, t->raw_data.len, data->final_path));
        Onnx__TensorProto *copy = ob_alloc(b, sizeof *copy);
        *copy = *t;
        copy->has_raw_data = 0;
        copy->raw_data.data = NULL;
        copy->raw_data.len = 0;
        copy->has_data_location = 1;
        copy->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
        copy->n_external_data = 3;
        copy->external_data = ob_alloc(b, 3 * sizeof *copy->external_data);
        char num[32];
        copy->external_data[0] = entry(b, "location", location);
        snprintf(num, sizeof num, "%llu", (unsigned long long)offset);
        copy->external_data[1] = entry(b, "offset", num);
        snprintf(num, sizeof num, "%zu", t->raw_data.len);
        copy->external_data[2] = entry(b, "length", num);
        g->initializer[i] = copy;
        offset += t->raw_data.len;
        r->external_tensors++;
    }
    r->data_bytes = offset;
    return FTL_OK;
}

ftl_status onnx_model_write(onnx_builder *b, Onnx__ModelProto *m, const char *path, bool overwrite,
                            uint64_t max_model_bytes, onnx_write_result *r) {
    memset(r, 0, sizeof *r);
    if (!max_model_bytes) max_model_bytes = ONNX_WRITE_DEFAULT_LIMIT;
    if (ftl_is_directory(path)) return ftl_fail(FTL_E_INVALID_ARG, "%s is a folder; give the .onnx file to write", path);
    if (ftl_path_exists(path) && !overwrite)
        return ftl_fail(FTL_E_EXISTS, "%s already exists (use --overwrite to replace it)", path);
    size_t size = onnx__model_proto__get_packed_size(m);
    ftl_atomic_file data = {0}, model = {0};
    ftl_status st = FTL_OK;
    if (size > max_model_bytes) {
        r->data_path = ftl_format("%s.data", path);
        if (ftl_path_exists(r->data_path) && !overwrite)
            st = ftl_fail(FTL_E_EXISTS, "%s already exists (use --overwrite to replace it)", r->data_path);
        if (st == FTL_OK) st = ftl_atomic_open(&data, r->data_path);
        data.no_replace = !overwrite;
        if (st == FTL_OK) st = write_external(b, m->graph, ftl_path_file_name(r->data_path), &data, r);
        if (st == FTL_OK) size = onnx__model_proto__get_packed_size(m);
        if (st == FTL_OK && size > max_model_bytes)
            st = ftl_fail(FTL_E_UNSUPPORTED, "%s: %zu bytes even with every initializer of %d bytes or more in %s",
                          path, size, ONNX_WRITE_EXTERNAL_MIN_BYTES, r->data_path);
    }
    if (st == FTL_OK) st = ftl_atomic_open(&model, path);
    model.no_replace = !overwrite;
    if (st == FTL_OK) st = pack_to(&model, m, size, path);
    /* Both on disk before either is renamed: a new .data never sits beside the old model. */
    if (st == FTL_OK && data.fp) st = ftl_atomic_flush(&data);
    if (st == FTL_OK) st = ftl_atomic_flush(&model);
    if (st == FTL_OK && data.fp) st = ftl_atomic_commit(&data);
    if (st == FTL_OK) st = ftl_atomic_commit(&model);
    if (st != FTL_OK) {
        ftl_atomic_abort(&data);
        ftl_atomic_abort(&model);
        free(r->data_path);
        r->data_path = NULL;
        return st;
    }
    r->model_bytes = size;
    return FTL_OK;
}
