#!/usr/bin/python3
"""One model per torchvision classification family (tv_models.FAMILY_MODELS), exported by torch.onnx four
ways: opset 13 and opset 17, each with a dynamic batch axis and with the batch fixed at 3.

usage: nn_families.py OUTDIR
Writes per family F: F.in.npy (3 float images), F.torch.npy (PyTorch's logits for them), F.<variant>.onnx for
variant in op13, op17, op13_fixed, op17_fixed, and a line per variant in ort_manifest.txt for
nn_ort_batch.mjs, which writes F.<variant>.ort.npy (ONNX Runtime's logits for the same file).
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tv_models  # noqa: E402

VARIANTS = (("op13", 13, True), ("op17", 17, True), ("op13_fixed", 13, False), ("op17_fixed", 17, False))


def main():
    out = sys.argv[1]
    only = sys.argv[2:]  # optional family names (for a quick local rerun)
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(2)
    manifest = []
    for family, (name, size) in tv_models.FAMILY_MODELS.items():
        if only and family not in only:
            continue
        gen = torch.Generator().manual_seed(1)
        model = tv_models.build(name, gen)
        x = torch.randn(3, 3, size, size, generator=gen)
        for variant, opset, dynamic in VARIANTS:
            # outside no_grad: there torch 1.13 takes a fused attention path it cannot export
            torch.onnx.export(model, x, os.path.join(out, f"{family}.{variant}.onnx"), opset_version=opset,
                              input_names=["input"], output_names=["logits"],
                              dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}} if dynamic else None)
            manifest.append(f"{family}.{variant} {family}.{variant}.onnx {family}.in.npy {family}.{variant}.ort.npy\n")
        with torch.no_grad():
            np.save(os.path.join(out, f"{family}.in.npy"), x.numpy())
            np.save(os.path.join(out, f"{family}.torch.npy"), model(x).numpy())
        print(f"exported {family} ({name} at {size}px)", flush=True)
    with open(os.path.join(out, "ort_manifest.txt"), "w") as f:
        f.writelines(manifest)


if __name__ == "__main__":
    main()
