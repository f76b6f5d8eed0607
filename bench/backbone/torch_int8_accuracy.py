#!/usr/bin/python3
"""PyTorch 1.13's int8 on the real ImageNet MobileNetV2 ftl uses: the shared ONNX file rebuilt as torch
modules (nn.Conv2d with its weights, ReLU6, residual adds, the global average pool), quantized by FX
post-training static quantization (default qconfig mapping, the x86 engine Debian's torch has) and
calibrated on the same training images ftl calibrates on; prints the mean and lowest cosine of its
int8 features to its fp32 features on the val images, as one JSON line, so the accuracy cost of
ftl's int8 can be set beside PyTorch's on the same photos.
usage: torch_int8_accuracy.py MODEL.onnx TRAIN.npy VAL.npy [--threads 2]
(TRAIN/VAL.npy: uint8 [N, 224, 224, 3] as tests/tools/dataset_images_npy.mjs writes them; inputs
scaled to [-1, 1] as ftl's tf preprocessing does)"""
import argparse
import json
import operator

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from torch import nn
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("train")
ap.add_argument("val")
ap.add_argument("--threads", type=int, default=2)
a = ap.parse_args()
torch.set_num_threads(a.threads)
ENGINE = "fbgemm" if "fbgemm" in torch.backends.quantized.supported_engines else "onednn"
torch.backends.quantized.engine = ENGINE


class Graph(nn.Module):
    """The ONNX nodes as modules in file order; forward is a fixed sequence FX traces straight through."""

    def __init__(self, path):
        super().__init__()
        m = onnx.load(path)
        g = m.graph
        init = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        self.input, self.output = g.input[0].name, g.output[0].name
        self.steps = []  # (kind, module name or None, inputs, output)
        for i, nd in enumerate(g.node):
            at = {x.name: onnx.helper.get_attribute_value(x) for x in nd.attribute}
            name = f"n{i}"
            if nd.op_type == "Conv":
                w = torch.from_numpy(init[nd.input[1]].copy())
                b = torch.from_numpy(init[nd.input[2]].copy()) if len(nd.input) > 2 else None
                t, l, bo, r = at.get("pads", [0, 0, 0, 0])
                conv = nn.Conv2d(w.shape[1] * at.get("group", 1), w.shape[0], tuple(w.shape[2:]),
                                 stride=tuple(at.get("strides", [1, 1])), groups=at.get("group", 1), bias=b is not None)
                conv.weight.data.copy_(w)
                if b is not None:
                    conv.bias.data.copy_(b)
                mod = nn.Sequential(nn.ZeroPad2d((l, r, t, bo)), conv) if (t, l, bo, r) != (0, 0, 0, 0) else conv
                self.add_module(name, mod)
                self.steps.append(("module", name, [nd.input[0]], nd.output[0]))
            elif nd.op_type == "Clip":
                lo, hi = float(init[nd.input[1]]), float(init[nd.input[2]])
                assert (lo, hi) == (0.0, 6.0), (lo, hi)
                self.add_module(name, nn.ReLU6())
                self.steps.append(("module", name, [nd.input[0]], nd.output[0]))
            elif nd.op_type == "Add":
                self.steps.append(("add", None, list(nd.input), nd.output[0]))
            elif nd.op_type == "GlobalAveragePool":
                self.add_module(name, nn.AdaptiveAvgPool2d(1))
                self.steps.append(("module", name, [nd.input[0]], nd.output[0]))
            elif nd.op_type == "Reshape":
                self.steps.append(("flatten", None, [nd.input[0]], nd.output[0]))
            else:
                raise SystemExit(f"op {nd.op_type} not handled")

    def forward(self, x):
        env = {self.input: x}
        for kind, name, ins, out in self.steps:
            if kind == "module":
                env[out] = getattr(self, name)(env[ins[0]])
            elif kind == "add":
                env[out] = operator.add(env[ins[0]], env[ins[1]])
            else:
                env[out] = torch.flatten(env[ins[0]], 1)
        return env[self.output]


def images(path):
    x = torch.from_numpy(np.load(path)).permute(0, 3, 1, 2).float()
    return x / 127.5 - 1.0


train, val = images(a.train), images(a.val)
fp32 = Graph(a.model).eval()
with torch.no_grad():
    prepared = prepare_fx(Graph(a.model).eval(), get_default_qconfig_mapping(ENGINE), (train[:1],))
    for i in range(0, len(train), 16):
        prepared(train[i:i + 16])
    int8 = convert_fx(prepared)
    f32 = torch.cat([fp32(val[i:i + 16]) for i in range(0, len(val), 16)])
    f8 = torch.cat([int8(val[i:i + 16]) for i in range(0, len(val), 16)])
cos = torch.nn.functional.cosine_similarity(f32.double(), f8.double(), dim=1)
print(json.dumps({"engine": "torch", "method": f"FX static int8 ({ENGINE}), default qconfig", "calibration_images": len(train),
                  "val_images": len(val), "mean_cosine": round(cos.mean().item(), 5), "lowest_cosine": round(cos.min().item(), 5)}))
