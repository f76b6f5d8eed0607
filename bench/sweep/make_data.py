#!/usr/bin/env python3
"""Synthetic Caltech-256-sized data for the sweep benchmark (no real Caltech-256 here): 257 classes of
32x32 images (a seeded prototype per class plus noise), and a "backbone" that turns each image into
2048 features (Flatten -> a fixed random Gemm -> Relu), so `ftl sweep` and `ftl train` run on
features of Caltech-256's shape (30k x 2048, 257 classes) through the same cache as with a real one.
usage: make_data.py OUT_DIR [PER_CLASS=128] [NOISE=1.0]"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from PIL import Image

out = sys.argv[1]
per_class = int(sys.argv[2]) if len(sys.argv) > 2 else 128
noise = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
classes, size, dim = 257, 32, 2048
rng = np.random.default_rng(7)
images = os.path.join(out, "images")
for c in range(classes):
    folder = os.path.join(images, "%03d.class" % (c + 1))
    os.makedirs(folder, exist_ok=True)
    proto = rng.normal(0, 1, (size // 4, size // 4, 3)).repeat(4, 0).repeat(4, 1)  # coarse blocks
    for i in range(per_class):
        x = proto + noise * rng.normal(0, 1, (size, size, 3))
        q = np.clip(127.5 + 40 * x, 0, 255).astype(np.uint8)
        Image.fromarray(q).save(os.path.join(folder, "%04d.png" % i))
w = (rng.normal(0, 1, (3 * size * size, dim)) / np.sqrt(3 * size * size)).astype(np.float32)
graph = helper.make_graph(
    [helper.make_node("Flatten", ["input"], ["flat"], axis=1),
     helper.make_node("Gemm", ["flat", "w"], ["projected"]),
     helper.make_node("Relu", ["projected"], ["features"])],
    "random_projection", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, size, size])],
    [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["N", dim])], [numpy_helper.from_array(w, "w")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, os.path.join(out, "projection.onnx"))
print("wrote %d images of %d classes and projection.onnx to %s" % (classes * per_class, classes, out))
