/* Arena-owned ONNX messages for the exporter (see onnx_build.h). */
#include "export/onnx_build.h"
#include "util/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t hash_key(const char *s) {
    size_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

void ob_table_free(ob_table *t) {
    for (size_t i = 0; i < t->cap; i++) free(t->keys[i]);
    free(t->keys);
    free(t->values);
    memset(t, 0, sizeof *t);
}

static size_t table_slot(const ob_table *t, const char *key) {
    size_t mask = t->cap - 1;
    size_t i = hash_key(key) & mask;
    while (t->keys[i] && strcmp(t->keys[i], key) != 0) i = (i + 1) & mask;
    return i;
}

void ob_table_put(ob_table *t, const char *key, int value) {
    if (2 * (t->count + 1) > t->cap) {
        ob_table old = *t;
        t->cap = old.cap ? 2 * old.cap : 256;
        t->keys = ftl_xcalloc(t->cap, sizeof *t->keys);
        t->values = ftl_xcalloc(t->cap, sizeof *t->values);
        t->count = 0;
        for (size_t i = 0; i < old.cap; i++)
            if (old.keys[i]) {
                size_t s = table_slot(t, old.keys[i]);
                t->keys[s] = old.keys[i];
                t->values[s] = old.values[i];
                t->count++;
            }
        free(old.keys);
        free(old.values);
    }
    size_t s = table_slot(t, key);
    if (!t->keys[s]) {
        t->keys[s] = ftl_strdup(key);
        t->count++;
    }
    t->values[s] = value;
}

int ob_table_get(const ob_table *t, const char *key) {
    if (!t->cap || !key) return -1;
    size_t s = table_slot(t, key);
    return t->keys[s] ? t->values[s] : -1;
}

void ob_init(onnx_builder *b) { memset(b, 0, sizeof *b); }

void ob_free(onnx_builder *b) {
    for (size_t i = 0; i < b->n_allocs; i++) free(b->allocs[i]);
    free(b->allocs);
    free(b->nodes);
    free(b->inits);
    ob_table_free(&b->names);
    memset(b, 0, sizeof *b);
}

void ob_adopt(onnx_builder *b, void *p) {
    if (b->n_allocs == b->cap_allocs) {
        b->cap_allocs = b->cap_allocs ? 2 * b->cap_allocs : 256;
        b->allocs = ftl_xrealloc(b->allocs, b->cap_allocs * sizeof *b->allocs);
    }
    b->allocs[b->n_allocs++] = p;
}

void *ob_alloc(onnx_builder *b, size_t size) {
    void *p = ftl_xcalloc(1, size ? size : 1);
    ob_adopt(b, p);
    return p;
}

char *ob_strdup(onnx_builder *b, const char *s) {
    char *d = ftl_strdup(s ? s : "");
    ob_adopt(b, d);
    return d;
}

bool ob_name_used(const onnx_builder *b, const char *name) { return ob_table_get(&b->names, name) >= 0; }

void ob_reserve_name(onnx_builder *b, const char *name) { ob_table_put(&b->names, name, 1); }

const char *ob_fresh_name(onnx_builder *b, const char *stem) {
    char buf[256];
    snprintf(buf, sizeof buf, "ftl/%s", stem);
    for (int k = 2; ob_name_used(b, buf); k++) snprintf(buf, sizeof buf, "ftl/%s_%d", stem, k);
    ob_reserve_name(b, buf);
    return ob_strdup(b, buf);
}

static void grow_ptrs(void ***items, size_t n, size_t *cap) {
    if (n < *cap) return;
    *cap = *cap ? 2 * *cap : 64;
    *items = ftl_xrealloc(*items, *cap * sizeof **items);
}

void ob_append_node(onnx_builder *b, Onnx__NodeProto *n) {
    grow_ptrs((void ***)&b->nodes, b->n_nodes, &b->cap_nodes);
    b->nodes[b->n_nodes++] = n;
}

void ob_append_init(onnx_builder *b, Onnx__TensorProto *t) {
    grow_ptrs((void ***)&b->inits, b->n_inits, &b->cap_inits);
    b->inits[b->n_inits++] = t;
}

Onnx__NodeProto *ob_node(onnx_builder *b, const char *op_type, const char *const *in, int n_in,
                         const char *const *out, int n_out) {
    Onnx__NodeProto *n = ob_alloc(b, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = ob_strdup(b, op_type);
    n->n_input = (size_t)n_in;
    n->input = ob_alloc(b, (size_t)(n_in + 1) * sizeof *n->input);
    for (int i = 0; i < n_in; i++) n->input[i] = ob_strdup(b, in[i]);
    n->n_output = (size_t)n_out;
    n->output = ob_alloc(b, (size_t)(n_out + 1) * sizeof *n->output);
    for (int i = 0; i < n_out; i++) n->output[i] = ob_strdup(b, out[i]);
    char stem[96];
    snprintf(stem, sizeof stem, "ftl/%s_%d", op_type, ++b->counter);
    n->name = ob_strdup(b, stem);
    ob_append_node(b, n);
    return n;
}

const char *ob_op(onnx_builder *b, const char *op_type, const char *stem, const char *const *in, int n_in) {
    const char *out = ob_fresh_name(b, stem);
    ob_node(b, op_type, in, n_in, &out, 1);
    return out;
}

static Onnx__AttributeProto *new_attr(onnx_builder *b, Onnx__NodeProto *n, const char *name,
                                      Onnx__AttributeProto__AttributeType type) {
    Onnx__AttributeProto *a = ob_alloc(b, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = ob_strdup(b, name);
    a->has_type = 1;
    a->type = type;
    Onnx__AttributeProto **list = ob_alloc(b, (n->n_attribute + 1) * sizeof *list);
    if (n->n_attribute) memcpy(list, n->attribute, n->n_attribute * sizeof *list);
    list[n->n_attribute++] = a;
    n->attribute = list; /* the old list stays owned by whoever made it */
    return a;
}

void ob_attr_int(onnx_builder *b, Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = new_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

void ob_attr_float(onnx_builder *b, Onnx__NodeProto *n, const char *name, float v) {
    Onnx__AttributeProto *a = new_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

void ob_attr_ints(onnx_builder *b, Onnx__NodeProto *n, const char *name, const int64_t *v, int count) {
    Onnx__AttributeProto *a = new_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = (size_t)count;
    a->ints = ob_alloc(b, (size_t)(count + 1) * sizeof *a->ints);
    if (count) memcpy(a->ints, v, (size_t)count * sizeof *v);
}

void ob_attr_floats(onnx_builder *b, Onnx__NodeProto *n, const char *name, const float *v, int count) {
    Onnx__AttributeProto *a = new_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
    a->n_floats = (size_t)count;
    a->floats = ob_alloc(b, (size_t)(count + 1) * sizeof *a->floats);
    if (count) memcpy(a->floats, v, (size_t)count * sizeof *v);
}

const Onnx__AttributeProto *ob_attr_find(const Onnx__NodeProto *n, const char *name) {
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0) return n->attribute[i];
    return NULL;
}

Onnx__AttributeProto *ob_attr_take(Onnx__NodeProto *n, const char *name) {
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0) {
            Onnx__AttributeProto *a = n->attribute[i];
            /* shifting in place is safe: the list keeps its owner, only its count shrinks */
            memmove(&n->attribute[i], &n->attribute[i + 1], (n->n_attribute - i - 1) * sizeof *n->attribute);
            n->n_attribute--;
            return a;
        }
    return NULL;
}

const char *ob_const(onnx_builder *b, const char *stem, int data_type, const int64_t *dims, int rank,
                     const void *data, size_t bytes) {
    Onnx__TensorProto *t = ob_alloc(b, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = (char *)ob_fresh_name(b, stem);
    t->has_data_type = 1;
    t->data_type = data_type;
    t->n_dims = (size_t)rank;
    t->dims = ob_alloc(b, (size_t)(rank + 1) * sizeof *t->dims);
    if (rank) memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
    t->has_raw_data = 1;
    t->raw_data.len = bytes;
    t->raw_data.data = ob_alloc(b, bytes);
    if (bytes) memcpy(t->raw_data.data, data, bytes); /* little-endian host (x86-64, aarch64) */
    ob_append_init(b, t);
    return t->name;
}

static size_t dims_count(const int64_t *dims, int rank) {
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    return n;
}

const char *ob_const_f32(onnx_builder *b, const char *stem, const int64_t *dims, int rank, const float *v) {
    return ob_const(b, stem, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, dims, rank, v, dims_count(dims, rank) * sizeof *v);
}

const char *ob_const_i64(onnx_builder *b, const char *stem, const int64_t *dims, int rank, const int64_t *v) {
    return ob_const(b, stem, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, dims, rank, v, dims_count(dims, rank) * sizeof *v);
}

const char *ob_scalar_f32(onnx_builder *b, const char *stem, float v) { return ob_const_f32(b, stem, NULL, 0, &v); }

Onnx__ValueInfoProto *ob_value_info(onnx_builder *b, const char *name, int elem_type, const int64_t *dims, int rank,
                                    const char *param) {
    Onnx__ValueInfoProto *vi = ob_alloc(b, sizeof *vi);
    onnx__value_info_proto__init(vi);
    vi->name = ob_strdup(b, name);
    Onnx__TypeProto *tp = ob_alloc(b, sizeof *tp);
    onnx__type_proto__init(tp);
    Onnx__TypeProto__Tensor *tt = ob_alloc(b, sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = elem_type;
    Onnx__TensorShapeProto *sp = ob_alloc(b, sizeof *sp);
    onnx__tensor_shape_proto__init(sp);
    sp->n_dim = (size_t)rank;
    sp->dim = ob_alloc(b, (size_t)(rank + 1) * sizeof *sp->dim);
    for (int i = 0; i < rank; i++) {
        Onnx__TensorShapeProto__Dimension *d = ob_alloc(b, sizeof *d);
        onnx__tensor_shape_proto__dimension__init(d);
        if (dims[i] < 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = ob_strdup(b, param);
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = dims[i];
        }
        sp->dim[i] = d;
    }
    tt->shape = sp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->type = tp;
    return vi;
}
