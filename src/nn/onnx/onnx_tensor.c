/* ONNX TensorProto -> constant data. Every size read from the file is checked against the
 * bytes actually present before anything is allocated or copied. */
#include "nn/onnx/onnx_tensor.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* As many elements as any tensor of a plan may have (graph.h): a larger initializer could not
 * be used, and its allocation (int8 data widens 8x) would only abort the process. */
enum { MAX_ELEMENTS_LOG2 = 31 };

void nn_extdata_free(nn_extdata *x) {
    for (int i = 0; i < x->n; i++) {
        free(x->files[i].location);
        free(x->files[i].data);
    }
    x->n = 0;
}

static size_t elem_size(int dt) {
    switch (dt) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: return 4;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: return 8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: return 2;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return 1;
    default: return 0;
    }
}

static bool is_float_type(int dt) {
    return dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || dt == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ||
           dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 || dt == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
}

static float half_to_float(uint16_t h) {
    int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
    float v;
    if (exp == 0) v = ldexpf((float)man, -24);
    else if (exp == 31) v = man ? NAN : INFINITY;
    else v = ldexpf((float)(man | 1024), exp - 25);
    return sign ? -v : v;
}

static float bf16_to_float(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Little-endian bytes of type dt -> float or int64 array of `count` elements. */
static void convert_bytes(const uint8_t *src, int dt, int64_t count, void *dst) {
    float *f = dst;
    int64_t *q = dst;
    for (int64_t i = 0; i < count; i++) {
        const uint8_t *p = src + (size_t)i * elem_size(dt);
        switch (dt) {
        case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: memcpy(&f[i], p, 4); break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: { double d; memcpy(&d, p, 8); f[i] = (float)d; break; }
        case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: { uint16_t h; memcpy(&h, p, 2); f[i] = half_to_float(h); break; }
        case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: { uint16_t h; memcpy(&h, p, 2); f[i] = bf16_to_float(h); break; }
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: memcpy(&q[i], p, 8); break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: { int32_t v; memcpy(&v, p, 4); q[i] = v; break; }
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: { uint32_t v; memcpy(&v, p, 4); q[i] = v; break; }
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: { int16_t v; memcpy(&v, p, 2); q[i] = v; break; }
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: { uint16_t v; memcpy(&v, p, 2); q[i] = v; break; }
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: q[i] = (int8_t)p[0]; break;
        default: q[i] = p[0]; break; /* UINT8, BOOL */
        }
    }
}

static ftl_status parse_i64(const char *s, int64_t *v) {
    if (!s || !*s) return FTL_E_FORMAT;
    errno = 0;
    char *end;
    long long x = strtoll(s, &end, 10);
    if (errno || *end || x < 0) return FTL_E_FORMAT;
    *v = x;
    return FTL_OK;
}

static bool location_is_safe(const char *loc) {
    if (!*loc || loc[0] == '/') return false;
    for (const char *p = loc; *p;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.') return false;
        if (!slash) break;
        p = slash + 1;
    }
    return true;
}

static ftl_status external_file(nn_extdata *x, const char *location, const char *tname, struct nn_extfile **out) {
    for (int i = 0; i < x->n; i++)
        if (strcmp(x->files[i].location, location) == 0) {
            *out = &x->files[i];
            return FTL_OK;
        }
    if (x->n == (int)(sizeof x->files / sizeof x->files[0]))
        return ftl_fail(FTL_E_UNSUPPORTED, "initializer '%s': more than 64 external data files", tname);
    char *path = ftl_format("%s/%s", x->model_dir, location);
    uint8_t *data = NULL;
    size_t size = 0;
    ftl_status st = FTL_OK;
    struct stat sb;
    if (!ftl_path_exists(path))
        st = ftl_fail(FTL_E_NOT_FOUND, "initializer '%s': external data file '%s' not found (looked for %s; keep the "
                      "data files next to the model)", tname, location, path);
    else if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) /* a FIFO or device would block or never end */
        st = ftl_fail(FTL_E_FORMAT, "initializer '%s': external data '%s' is not a regular file", tname, path);
    else if ((st = ftl_read_file(path, &data, &size)) != FTL_OK)
        ftl_fail_context(st, "initializer '%s': external data", tname);
    free(path);
    if (st != FTL_OK) return st;
    if (x->hash) ftl_sha256_update(x->hash, data, size);
    struct nn_extfile *f = &x->files[x->n++];
    f->location = ftl_strdup(location);
    f->data = data;
    f->size = size;
    *out = f;
    return FTL_OK;
}

/* Returns a pointer to the tensor's bytes in its external file after checking the range. */
static ftl_status external_bytes(Onnx__TensorProto *tp, const char *tname, size_t want, nn_extdata *x,
                                 const uint8_t **bytes) {
    const char *location = NULL;
    int64_t offset = 0, length = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e->key) continue;
        if (strcmp(e->key, "location") == 0) location = e->value;
        else if (strcmp(e->key, "offset") == 0 || strcmp(e->key, "length") == 0) {
            int64_t *dst = e->key[0] == 'o' ? &offset : &length;
            if (parse_i64(e->value, dst) != FTL_OK)
                return ftl_fail(FTL_E_FORMAT, "initializer '%s': external data %s '%s' is not a non-negative integer",
                                tname, e->key, e->value ? e->value : "");
        }
    }
    if (!location || !*location)
        return ftl_fail(FTL_E_FORMAT, "initializer '%s': data_location is EXTERNAL but no 'location' is given", tname);
    if (!location_is_safe(location))
        return ftl_fail(FTL_E_FORMAT, "initializer '%s': external data location '%s' must be a relative path inside "
                        "the model's folder", tname, location);
    struct nn_extfile *f = NULL;
    FTL_TRY(external_file(x, location, tname, &f));
    if ((uint64_t)offset > f->size)
        return ftl_fail(FTL_E_FORMAT, "initializer '%s': external data offset %lld is past the end of '%s' (%zu bytes)",
                        tname, (long long)offset, location, f->size);
    if (length < 0) length = (int64_t)(f->size - (size_t)offset);
    if ((uint64_t)length > f->size - (size_t)offset)
        return ftl_fail(FTL_E_FORMAT, "initializer '%s': external data range offset %lld + length %lld is past the "
                        "end of '%s' (%zu bytes)", tname, (long long)offset, (long long)length, location, f->size);
    if ((uint64_t)length != want)
        return ftl_fail(FTL_E_FORMAT, "initializer '%s': external data length %lld, but its shape and type need %zu "
                        "bytes", tname, (long long)length, want);
    *bytes = f->data + offset;
    return FTL_OK;
}

ftl_status nn_tensor_external_data(Onnx__TensorProto *tp, const char *tname, nn_extdata *x, const uint8_t **bytes,
                                  size_t *size) {
    int dt = tp->has_data_type ? tp->data_type : 0;
    size_t es = elem_size(dt);
    if (!es) return ftl_fail(FTL_E_UNSUPPORTED, "tensor '%s': data type %d is not supported", tname, dt);
    uint64_t count = 1;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0 || tp->dims[i] > (1ll << MAX_ELEMENTS_LOG2))
            return ftl_fail(FTL_E_FORMAT, "tensor '%s': dimension %zu is %lld", tname, i, (long long)tp->dims[i]);
        /* checked before multiplying: two large dimensions must not wrap to a small count */
        if (tp->dims[i] != 0 && count > (1ull << MAX_ELEMENTS_LOG2) / (uint64_t)tp->dims[i])
            return ftl_fail(FTL_E_FORMAT, "tensor '%s': too many elements", tname);
        count *= (uint64_t)tp->dims[i];
    }
    *size = (size_t)count * es;
    return external_bytes(tp, tname, *size, x, bytes);
}

ftl_status nn_tensor_from_proto(Onnx__TensorProto *tp, nn_tensor *t, nn_extdata *x) {
    const char *tname = t->name;
    int dt = tp->has_data_type ? tp->data_type : 0;
    size_t es = elem_size(dt);
    if (!es)
        return ftl_fail(FTL_E_UNSUPPORTED, "tensor '%s': data type %d is not supported (float, double, float16, "
                        "bfloat16 and integer tensors are)", tname, dt);
    if (tp->n_dims > NN_MAX_RANK)
        return ftl_fail(FTL_E_UNSUPPORTED, "tensor '%s': rank %zu is above %d", tname, tp->n_dims, NN_MAX_RANK);
    nn_shape shape = {.rank = (int)tp->n_dims};
    int64_t count = 1;
    for (size_t i = 0; i < tp->n_dims; i++) {
        int64_t d = tp->dims[i];
        if (d < 0 || d > (1ll << MAX_ELEMENTS_LOG2))
            return ftl_fail(FTL_E_FORMAT, "tensor '%s': dimension %zu is %lld", tname, i, (long long)d);
        shape.d[i] = d;
        if (d != 0 && count > (1ll << MAX_ELEMENTS_LOG2) / d) /* before multiplying: no wrap */
            return ftl_fail(FTL_E_FORMAT, "tensor '%s': too many elements", tname);
        count *= d;
    }
    bool is_float = is_float_type(dt);
    size_t want = (size_t)count * es;
    size_t out_bytes = (size_t)(count ? count : 1) * (is_float ? sizeof(float) : sizeof(int64_t));
    const uint8_t *bytes = NULL;
    void *data = NULL;

    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        FTL_TRY(external_bytes(tp, tname, want, x, &bytes));
    } else if (tp->has_raw_data) {
        if (tp->raw_data.len != want)
            return ftl_fail(FTL_E_FORMAT, "tensor '%s': raw_data has %zu bytes, its shape and type need %zu", tname,
                            tp->raw_data.len, want);
        if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && count > 0) {
            data = tp->raw_data.data; /* take the bytes protobuf-c allocated: saves a copy of the weights */
            tp->raw_data.data = NULL;
            tp->raw_data.len = 0;
            tp->has_raw_data = 0;
        } else {
            bytes = tp->raw_data.data;
        }
    } else {
        size_t n;
        int64_t *q;
        float *f;
        switch (dt) {
        case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: n = tp->n_float_data; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: n = tp->n_double_data; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: n = tp->n_int64_data; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: n = tp->n_uint64_data; break;
        default: n = tp->n_int32_data; break;
        }
        if (n != (size_t)count)
            return ftl_fail(FTL_E_FORMAT, "tensor '%s': has %zu values, its shape %s needs %lld", tname, n,
                            nn_shape_str(&shape, false, (char[96]){0}, 96), (long long)count);
        data = ftl_xmalloc(out_bytes);
        f = data;
        q = data;
        for (size_t i = 0; i < n; i++) {
            switch (dt) {
            case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: f[i] = tp->float_data[i]; break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: f[i] = (float)tp->double_data[i]; break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: f[i] = half_to_float((uint16_t)tp->int32_data[i]); break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: f[i] = bf16_to_float((uint16_t)tp->int32_data[i]); break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: q[i] = tp->int64_data[i]; break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64:
                q[i] = (int64_t)tp->uint64_data[i]; break;
            default: q[i] = tp->int32_data[i]; break;
            }
        }
    }
    if (!data) {
        data = ftl_xmalloc(out_bytes);
        if (count) convert_bytes(bytes, dt, count, data);
    }
    nn_tensor_set_data(t, is_float ? NN_F32 : NN_I64, data, &shape);
    t->onnx_type = dt;
    return FTL_OK;
}
