#!/usr/bin/python3
"""Exports the peer benchmark's backbones to ONNX for ftl: the same feature extractors that
bench/peer/bench_backbone.py times (bench/peer/models.py build(): torchvision mobilenet_v2 and
resnet50 with the classifier removed, and vit_b_16 as build() gives it, with its heads; random
weights), opset 13, dynamic batch.
Xception uses the shipped ../shared/models/xception_random.onnx (same Keras architecture).
usage: export_models.py OUTDIR [SHARED_DIR]"""
import os
import sys

import torch


def main():
    out = sys.argv[1]
    shared = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared")
    sys.path.insert(0, os.path.join(shared, "bench", "peer"))
    from models import build  # the peer's own definitions

    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    for name in ("mobilenet_v2", "resnet50", "vit_b_16"):
        path = os.path.join(out, f"{name}.onnx")
        if os.path.exists(path):
            continue
        model, size = build(name)
        x = torch.randn(1, 3, size, size)
        torch.onnx.export(model, x, path + ".tmp", opset_version=13, input_names=["input"], output_names=["features"],
                          dynamic_axes={"input": {0: "N"}, "features": {0: "N"}})
        os.replace(path + ".tmp", path)
        print(f"exported {path}")


if __name__ == "__main__":
    main()
