/* The backbone's nodes, pruned at the feature tensor (see backbone_graph.h). */
#include "export/backbone_graph.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <stdlib.h>
#include <string.h>

void backbone_graph_free(backbone_graph *g) {
    if (g->model) onnx__model_proto__free_unpacked(g->model, NULL);
    nn_extdata_free(&g->ext);
    free(g->ext.model_dir);
    free(g->input_name);
    free(g->feature_name);
    free(g->nodes);
    free(g->inits);
    ob_table_free(&g->init_index);
    memset(g, 0, sizeof *g);
}

Onnx__TensorProto *backbone_graph_init(const backbone_graph *g, const char *name) {
    int i = ob_table_get(&g->init_index, name);
    return i >= 0 ? g->inits[i] : NULL;
}

void backbone_graph_add_init(backbone_graph *g, Onnx__TensorProto *t) {
    g->inits = ftl_xrealloc(g->inits, (g->n_inits + 1) * sizeof *g->inits);
    ob_table_put(&g->init_index, t->name, (int)g->n_inits);
    g->inits[g->n_inits++] = t;
}

/* A node copy whose lists belong to the builder, so conversions can edit them. */
static Onnx__NodeProto *clone_node(onnx_builder *b, const Onnx__NodeProto *src) {
    Onnx__NodeProto *n = ob_alloc(b, sizeof *n);
    *n = *src;
    n->input = ob_alloc(b, (src->n_input + 1) * sizeof *n->input);
    if (src->n_input) memcpy(n->input, src->input, src->n_input * sizeof *n->input);
    n->output = ob_alloc(b, (src->n_output + 1) * sizeof *n->output);
    if (src->n_output) memcpy(n->output, src->output, src->n_output * sizeof *n->output);
    n->attribute = ob_alloc(b, (src->n_attribute + 1) * sizeof *n->attribute);
    if (src->n_attribute) memcpy(n->attribute, src->attribute, src->n_attribute * sizeof *n->attribute);
    return n;
}

static bool is_external(const Onnx__TensorProto *t) {
    return t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
}

/* A copy of an external tensor with its bytes inline (pointing into the loaded data file). */
static ftl_status inline_tensor(onnx_builder *b, backbone_graph *g, Onnx__TensorProto *src, const char *what,
                                Onnx__TensorProto **out) {
    const uint8_t *bytes;
    size_t size;
    FTL_TRY(nn_tensor_external_data(src, what, &g->ext, &bytes, &size));
    Onnx__TensorProto *t = ob_alloc(b, sizeof *t);
    *t = *src;
    t->has_data_location = 0;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
    t->n_external_data = 0;
    t->external_data = NULL;
    t->has_raw_data = 1;
    t->raw_data.data = (uint8_t *)bytes;
    t->raw_data.len = size;
    *out = t;
    return FTL_OK;
}

static const char *value_name(const Onnx__ValueInfoProto *v) { return v && v->name ? v->name : ""; }

ftl_status backbone_graph_read(onnx_builder *b, const char *path, const char *feature, const char *const *reserved,
                               int n_reserved, backbone_graph *g) {
    memset(g, 0, sizeof *g);
    uint8_t *bytes;
    size_t size;
    FTL_TRY(ftl_read_file(path, &bytes, &size));
    g->model = size ? onnx__model_proto__unpack(NULL, size, bytes) : NULL;
    free(bytes);
    if (!g->model) return ftl_fail(FTL_E_FORMAT, "%s: not an ONNX model (protobuf decoding failed)", path);
    g->ext.model_dir = ftl_path_folder(path);
    const Onnx__GraphProto *gp = g->model->graph;
    if (!gp) return ftl_fail(FTL_E_FORMAT, "%s: the model has no graph", path);
    g->opset = -1;
    for (size_t i = 0; i < g->model->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = g->model->opset_import[i];
        if ((!o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0) && o->has_version) g->opset = o->version;
    }
    if (g->opset < 0) return ftl_fail(FTL_E_FORMAT, "%s: the model imports no default-domain opset", path);

    ob_table producer = {0}, initializer = {0};
    for (size_t i = 0; i < gp->n_node; i++)
        for (size_t k = 0; k < gp->node[i]->n_output; k++)
            if (gp->node[i]->output[k] && *gp->node[i]->output[k]) ob_table_put(&producer, gp->node[i]->output[k], (int)i);
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (gp->initializer[i]->name) ob_table_put(&initializer, gp->initializer[i]->name, (int)i);
    const char *want = feature && *feature ? feature : (gp->n_output ? value_name(gp->output[0]) : "");
    ftl_status st = FTL_OK;
    if (ob_table_get(&producer, want) < 0)
        st = ftl_fail(FTL_E_NOT_FOUND, "%s: no node computes the feature tensor '%s'", path, want);

    /* Depth-first from the feature: post-order is a topological order (state 1 = on the path). */
    unsigned char *state = ftl_xcalloc(gp->n_node + 1, 1);
    size_t *stack = ftl_xmalloc((gp->n_node + 1) * sizeof *stack), *next_input = ftl_xcalloc(gp->n_node + 1, sizeof *next_input);
    bool *init_used = ftl_xcalloc(gp->n_initializer + 1, sizeof *init_used);
    g->nodes = ftl_xcalloc(gp->n_node + 1, sizeof *g->nodes);
    size_t depth = 0;
    if (st == FTL_OK) {
        stack[depth++] = (size_t)ob_table_get(&producer, want);
        state[stack[0]] = 1;
    }
    while (st == FTL_OK && depth > 0) {
        size_t ni = stack[depth - 1];
        const Onnx__NodeProto *n = gp->node[ni];
        if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0) {
            st = ftl_fail(FTL_E_UNSUPPORTED, "%s: node '%s' is from domain '%s'", path, n->name ? n->name : "", n->domain);
            break;
        }
        if (next_input[ni] < n->n_input) {
            const char *in = n->input[next_input[ni]++];
            if (!in || !*in) continue;
            int p = ob_table_get(&producer, in);
            if (p >= 0) {
                if (state[p] == 1) st = ftl_fail(FTL_E_FORMAT, "%s: the graph has a cycle through '%s'", path, in);
                else if (state[p] == 0) {
                    state[p] = 1;
                    stack[depth++] = (size_t)p;
                }
                continue;
            }
            int k = ob_table_get(&initializer, in);
            if (k >= 0) init_used[k] = true;
            continue; /* else a graph input: checked below */
        }
        state[ni] = 2;
        g->nodes[g->n_nodes++] = clone_node(b, n);
        depth--;
    }
    free(stack);
    free(next_input);

    /* the runtime input: the graph input that is not an initializer */
    for (size_t i = 0; st == FTL_OK && i < gp->n_input; i++) {
        if (ob_table_get(&initializer, value_name(gp->input[i])) >= 0) continue;
        if (g->input) {
            st = ftl_fail(FTL_E_UNSUPPORTED, "%s: more than one runtime input ('%s', '%s')", path, value_name(g->input),
                          value_name(gp->input[i]));
            break;
        }
        g->input = gp->input[i];
    }
    if (st == FTL_OK && !g->input) st = ftl_fail(FTL_E_UNSUPPORTED, "%s: the graph has no runtime input", path);

    for (size_t i = 0; st == FTL_OK && i < gp->n_initializer; i++) {
        if (!init_used[i]) continue;
        Onnx__TensorProto *t = gp->initializer[i];
        if (is_external(t)) st = inline_tensor(b, g, t, t->name, &t);
        if (st == FTL_OK) backbone_graph_add_init(g, t);
    }
    /* Constant nodes may hold external tensors too */
    for (size_t i = 0; st == FTL_OK && i < g->n_nodes; i++) {
        Onnx__NodeProto *n = g->nodes[i];
        for (size_t k = 0; st == FTL_OK && k < n->n_attribute; k++) {
            Onnx__AttributeProto *a = n->attribute[k];
            if (!a->t || !is_external(a->t)) continue;
            Onnx__AttributeProto *copy = ob_alloc(b, sizeof *copy);
            *copy = *a;
            st = inline_tensor(b, g, a->t, n->name ? n->name : "Constant", &copy->t);
            n->attribute[k] = copy;
        }
    }
    free(state);
    free(init_used);
    ob_table_free(&producer);
    ob_table_free(&initializer);
    if (st != FTL_OK) return st;

    g->input_name = ftl_strdup(value_name(g->input));
    g->feature_name = ftl_strdup(want);
    for (size_t i = 0; i < g->n_nodes; i++)
        for (size_t k = 0; k < g->nodes[i]->n_output; k++)
            if (g->nodes[i]->output[k] && *g->nodes[i]->output[k]) ob_reserve_name(b, g->nodes[i]->output[k]);
    for (size_t i = 0; i < g->n_inits; i++) ob_reserve_name(b, g->inits[i]->name);
    ob_reserve_name(b, g->input_name);
    for (int r = 0; r < n_reserved; r++) {
        const char *name = reserved[r];
        bool taken = strcmp(g->input_name, name) == 0 || backbone_graph_init(g, name);
        for (size_t i = 0; !taken && i < g->n_nodes; i++)
            for (size_t k = 0; k < g->nodes[i]->n_output; k++)
                if (g->nodes[i]->output[k] && strcmp(g->nodes[i]->output[k], name) == 0) taken = true;
        if (!taken) continue;
        char *to = ftl_format("%s_backbone", name);
        for (int k = 2; ob_name_used(b, to); k++) {
            free(to);
            to = ftl_format("%s_backbone_%d", name, k);
        }
        ob_reserve_name(b, to);
        backbone_graph_rename(b, g, name, to);
        free(to);
    }
    for (int r = 0; r < n_reserved; r++) ob_reserve_name(b, reserved[r]);
    return FTL_OK;
}

static void rename_in(onnx_builder *b, char **names, size_t n, const char *from, char **to) {
    for (size_t i = 0; i < n; i++)
        if (names[i] && strcmp(names[i], from) == 0) {
            if (!*to) *to = ob_strdup(b, "");
            names[i] = *to;
        }
}

void backbone_graph_rename(onnx_builder *b, backbone_graph *g, const char *from, const char *to) {
    char *copy = ob_strdup(b, to);
    char *from_copy = ftl_strdup(from); /* `from` may be one of the strings being replaced */
    for (size_t i = 0; i < g->n_nodes; i++) {
        rename_in(b, g->nodes[i]->input, g->nodes[i]->n_input, from_copy, &copy);
        rename_in(b, g->nodes[i]->output, g->nodes[i]->n_output, from_copy, &copy);
    }
    int k = ob_table_get(&g->init_index, from_copy);
    if (k >= 0) {
        Onnx__TensorProto *t = ob_alloc(b, sizeof *t);
        *t = *g->inits[k];
        t->name = copy;
        g->inits[k] = t;
        ob_table_put(&g->init_index, from_copy, -1);
        ob_table_put(&g->init_index, copy, k);
    }
    if (strcmp(g->input_name, from_copy) == 0) {
        free(g->input_name);
        g->input_name = ftl_strdup(to);
    }
    if (strcmp(g->feature_name, from_copy) == 0) {
        free(g->feature_name);
        g->feature_name = ftl_strdup(to);
    }
    free(from_copy);
}
