/* The supported ONNX operators: names, arity, allowed attributes, parameter parsing. */
#ifndef FTL_NN_OPS_H
#define FTL_NN_OPS_H

#include "nn/ir/graph.h"

bool nn_op_from_name(const char *op_type, nn_op *op);
/* Checks the node's arity and attributes (an unknown attribute or an unsupported value is an
 * error naming the node, op and attribute) and fills n->p. Parameters given as constant
 * inputs (Clip min/max, Pad pads, axes of opset 13+) must be constants. */
ftl_status nn_node_parse_params(nn_graph *g, nn_node *n);
/* Parameter inputs that were not constants at the first parse (n->p.deferred) may be computed by
 * folds; at shape time the node is parsed again, and a parameter still missing is an error. */
ftl_status nn_node_reparse_params(nn_graph *g, nn_node *n);
/* Ops whose output is a pure re-indexing of their input (no arithmetic). */
bool nn_op_is_reshape_like(nn_op op);
bool nn_op_is_activation(nn_op op);

#endif
