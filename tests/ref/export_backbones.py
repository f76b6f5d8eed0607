"""Small seeded-random ONNX backbones that exercise ftl export's opset conversion, layouts and
external data (ftl trains a head on each; ONNX Runtime then runs the export):

  op11_nhwc.onnx   opset 11, NHWC input [N,48,48,3]: Transpose, Pad (inputs), Conv, Relu, Dropout,
                   ReduceMean and Squeeze with axes attributes, feature [N,8]
  op14_hswish.onnx opset 14: Conv, BatchNormalization, HardSwish, GlobalAveragePool, Flatten ->
                   features named `probabilities` (a name the export reserves), input named `images`
  op13_external.onnx (+ .data) opset 13, every initializer in external data, Unsqueeze/Squeeze
                   with axes inputs, fixed batch 4

usage: export_backbones.py OUTDIR
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)


def w(name, *shape, scale=0.2):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def save(model, path, opset, **kw):
    model.opset_import[0].version = opset
    model.ir_version = 6 if opset <= 11 else 7
    onnx.checker.check_model(model)
    onnx.save(model, path, **kw)


def op11_nhwc(out):
    nodes = [
        helper.make_node("Transpose", ["x"], ["nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("Pad", ["nchw", "pads", "pad_value"], ["padded"], mode="constant"),
        helper.make_node("Conv", ["padded", "w1", "b1"], ["c1"], kernel_shape=[3, 3], strides=[2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Dropout", ["r1"], ["d1"], ratio=0.3),
        helper.make_node("ReduceMean", ["d1"], ["pooled"], axes=[2, 3], keepdims=1),
        helper.make_node("Squeeze", ["pooled"], ["features"], axes=[2, 3]),
    ]
    inits = [ints("pads", [0, 0, 1, 1, 0, 0, 1, 1]), numpy_helper.from_array(np.array(0.0, np.float32), "pad_value"),
             w("w1", 8, 3, 3, 3), w("b1", 8, scale=0.05)]
    g = helper.make_graph(nodes, "op11_nhwc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 48, 48, 3])],
                          [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["N", 8])], inits)
    save(helper.make_model(g), f"{out}/op11_nhwc.onnx", 11)


def op14_hswish(out):
    nodes = [
        helper.make_node("Conv", ["images", "w1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "g", "b", "m", "v"], ["bn"], epsilon=1e-3),
        helper.make_node("HardSwish", ["bn"], ["hs"]),
        helper.make_node("GlobalAveragePool", ["hs"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["probabilities"], axis=1),
    ]
    inits = [w("w1", 6, 3, 3, 3), numpy_helper.from_array((1 + 0.1 * rng.standard_normal(6)).astype(np.float32), "g"),
             w("b", 6, scale=0.1), w("m", 6, scale=0.1),
             numpy_helper.from_array((0.5 + rng.random(6)).astype(np.float32), "v")]
    g = helper.make_graph(nodes, "op14_hswish", [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, 40, 40])],
                          [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 6])], inits)
    save(helper.make_model(g), f"{out}/op14_hswish.onnx", 14)


def op13_external(out):
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], kernel_shape=[5, 5], strides=[4, 4]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("GlobalMaxPool", ["r1"], ["gmp"]),
        helper.make_node("Squeeze", ["gmp", "axes23"], ["sq"]),
        helper.make_node("Unsqueeze", ["sq", "axes2"], ["un"]),
        helper.make_node("Flatten", ["un"], ["features"], axis=1),
    ]
    inits = [w("w1", 16, 3, 5, 5, scale=0.1), w("b1", 16, scale=0.05), ints("axes23", [2, 3]), ints("axes2", [2])]
    g = helper.make_graph(nodes, "op13_external", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [4, 3, 64, 64])],
                          [helper.make_tensor_value_info("features", TensorProto.FLOAT, [4, 16])], inits)
    save(helper.make_model(g), f"{out}/op13_external.onnx", 13, save_as_external_data=True, all_tensors_to_one_file=True,
         location="op13_external.onnx.data", size_threshold=0)


if __name__ == "__main__":
    op11_nhwc(sys.argv[1])
    op14_hswish(sys.argv[1])
    op13_external(sys.argv[1])
