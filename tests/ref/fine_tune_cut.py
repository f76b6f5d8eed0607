#!/usr/bin/python3
"""The reference for `ftl inspect MODEL.onnx --fine-tune-last N | --fine-tune-from TENSOR`, computed from the
ONNX file with python3-onnx alone: the unfrozen nodes, their trained parameters and the boundary tensors.

usage: fine_tune_cut.py MODEL.onnx (--last N | --from TENSOR)
Prints, sorted: `unfrozen NODE`, `param TENSOR VALUES`, `boundary TENSOR FLOATS_PER_IMAGE` (? where onnx's shape
inference gives no shape).

Rules (as the fine-tuning issue states them): activations are the graph input and every output of a node other
than Shape that reads an activation (shape arithmetic and constants are not); the graph is cut back to the nodes
the first graph output depends on; `--last N` unfreezes the last N Conv nodes in file order and every node reading
what an unfrozen node wrote; `--from T` every node reading T or what an unfrozen node wrote. An unfrozen node trains
its float initializers (and Constant or Identity-of-constant values) of more than one value, except a BatchNormalization's mean and variance (inputs 3, 4).
"""
import sys

import numpy as np
import onnx
from onnx import shape_inference


def main():
    path, mode, arg = sys.argv[1], sys.argv[2], sys.argv[3]
    model = onnx.load(path, load_external_data=False)
    g = model.graph
    init = {t.name: t for t in g.initializer}
    consts = {}
    for t in g.initializer:
        consts[t.name] = (t.data_type, int(np.prod(t.dims)) if len(t.dims) else 1)
    for n in g.node:
        if n.op_type == "Constant":
            v = next(a for a in n.attribute if a.name == "value").t
            consts[n.output[0]] = (v.data_type, int(np.prod(v.dims)) if len(v.dims) else 1)
        elif n.op_type == "Identity" and n.input[0] in consts:  # torch.onnx ties equal-valued weights this way
            consts[n.output[0]] = consts[n.input[0]]
    act = {i.name for i in g.input if i.name not in init}
    for n in g.node:
        if n.op_type != "Shape" and any(x in act for x in n.input):
            act.update(o for o in n.output if o)
    producer = {o: n for n in g.node for o in n.output}
    # cut back to what the first output depends on, through activations
    need, keep = {g.output[0].name}, set()
    for n in reversed(g.node):
        if any(o in need for o in n.output) and any(o in act for o in n.output):
            keep.add(n.name)
            need.update(x for x in n.input if x in act)
    nodes = [n for n in g.node if n.name in keep]
    hot = set()
    if mode == "--last":
        convs = [n for n in nodes if n.op_type == "Conv"]
        first = set(c.name for c in convs[len(convs) - int(arg):])
    else:
        first = set()
        hot.add(arg)
    on = []
    for n in nodes:
        if n.name in first or any(x in hot for x in n.input):
            on.append(n)
            hot.update(n.output)
    inferred = shape_inference.infer_shapes(model)
    shapes = {v.name: v.type.tensor_type.shape for v in list(inferred.graph.value_info) + list(inferred.graph.input)}
    lines = set()
    for n in on:
        lines.add(f"unfrozen {n.name}")
        for k, x in enumerate(n.input):
            if x in consts and x not in act:
                dtype, count = consts[x]
                if dtype == onnx.TensorProto.FLOAT and count > 1 and not (n.op_type == "BatchNormalization" and k >= 3):
                    lines.add(f"param {x} {count}")
            elif x in act and (x not in producer or producer[x] not in on):
                dims = shapes.get(x)
                per = "?"
                if dims is not None and len(dims.dim) >= 2 and all(d.HasField("dim_value") for d in dims.dim[1:]):
                    per = str(int(np.prod([d.dim_value for d in dims.dim[1:]])))
                lines.add(f"boundary {x} {per}")
    for line in sorted(lines):
        print(line)


if __name__ == "__main__":
    main()
