/* Building ONNX protobuf messages for the exporter: one arena owns every message, string and
 * array the exporter makes (the backbone's own messages stay owned by their unpacked file), a
 * name table keeps new tensor names apart from the backbone's, and helpers append nodes,
 * attributes and constant initializers. */
#ifndef FTL_EXPORT_ONNX_BUILD_H
#define FTL_EXPORT_ONNX_BUILD_H

#include "ftl/base.h"
#include "onnx.pb-c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A set of strings with an int each (tensor name -> producer, initializer -> index, ...). */
typedef struct ob_table {
    char **keys;
    int *values;
    size_t cap, count;
} ob_table;

void ob_table_free(ob_table *t);
/* Inserts or replaces; the key is copied. */
void ob_table_put(ob_table *t, const char *key, int value);
/* The value, or -1 when the key is absent. */
int ob_table_get(const ob_table *t, const char *key);

typedef struct onnx_builder {
    void **allocs;
    size_t n_allocs, cap_allocs;
    Onnx__NodeProto **nodes;
    size_t n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    size_t n_inits, cap_inits;
    ob_table names;  /* every tensor name in use (backbone and new) */
    int counter;
} onnx_builder;

void ob_init(onnx_builder *b);
void ob_free(onnx_builder *b);

void *ob_alloc(onnx_builder *b, size_t size);          /* zeroed, freed with the builder */
void ob_adopt(onnx_builder *b, void *p);               /* a malloc'ed block the builder frees */
char *ob_strdup(onnx_builder *b, const char *s);
/* A tensor name "ftl/<stem>" (then "ftl/<stem>_2", ...) not yet in use; it becomes used. */
const char *ob_fresh_name(onnx_builder *b, const char *stem);
/* Marks a name as used (the backbone's names, reserved outputs). */
void ob_reserve_name(onnx_builder *b, const char *name);
bool ob_name_used(const onnx_builder *b, const char *name);

/* Appends a node of the default domain. `in` may hold "" for an absent optional input. */
Onnx__NodeProto *ob_node(onnx_builder *b, const char *op_type, const char *const *in, int n_in,
                         const char *const *out, int n_out);
/* Shorthand: one input list and one fresh output named after the op; returns the output. */
const char *ob_op(onnx_builder *b, const char *op_type, const char *stem, const char *const *in, int n_in);
void ob_append_node(onnx_builder *b, Onnx__NodeProto *n);

void ob_attr_int(onnx_builder *b, Onnx__NodeProto *n, const char *name, int64_t v);
void ob_attr_float(onnx_builder *b, Onnx__NodeProto *n, const char *name, float v);
void ob_attr_ints(onnx_builder *b, Onnx__NodeProto *n, const char *name, const int64_t *v, int count);
void ob_attr_floats(onnx_builder *b, Onnx__NodeProto *n, const char *name, const float *v, int count);
/* Removes an attribute by name (nothing when absent); returns it for reading. */
Onnx__AttributeProto *ob_attr_take(Onnx__NodeProto *n, const char *name);
const Onnx__AttributeProto *ob_attr_find(const Onnx__NodeProto *n, const char *name);

/* A constant initializer (raw little-endian bytes, copied) under a fresh name; returns the name. */
const char *ob_const(onnx_builder *b, const char *stem, int data_type, const int64_t *dims, int rank,
                     const void *data, size_t bytes);
const char *ob_const_f32(onnx_builder *b, const char *stem, const int64_t *dims, int rank, const float *v);
const char *ob_const_i64(onnx_builder *b, const char *stem, const int64_t *dims, int rank, const int64_t *v);
const char *ob_scalar_f32(onnx_builder *b, const char *stem, float v);
void ob_append_init(onnx_builder *b, Onnx__TensorProto *t);

/* A tensor ValueInfo: elem_type, dims (a negative dim is the named dimension `param`). */
Onnx__ValueInfoProto *ob_value_info(onnx_builder *b, const char *name, int elem_type, const int64_t *dims, int rank,
                                    const char *param);

#endif
