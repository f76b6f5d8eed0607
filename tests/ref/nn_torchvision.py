#!/usr/bin/python3
"""torchvision models at their full torchvision size where CI allows (tv_models.build: random weights,
randomised BatchNorm statistics) exported with torch.onnx, with PyTorch's own outputs as the reference,
for float input, the uint8 path through ftl's preprocessing, and --features-from.

usage: nn_torchvision.py OUTDIR
Writes per model: <m>.onnx (opset 13, dynamic batch), <m>.in.npy (float input) and <m>.out.npy
(PyTorch logits for it), <m>.images.rgb (3 random uint8 256x256x3 images) and <m>.images.out.npy
(logits for those images after Pillow BILINEAR resize to 224 and torchvision normalisation), and
for resnet50 <m>.features.npy + <m>.features_name.txt (the pooled 2048-d features under fc).
"""
import os
import shutil
import sys

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tv_models  # noqa: E402

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(2)
    rng = np.random.default_rng(7)
    images = rng.integers(0, 256, (3, 256, 256, 3), dtype=np.uint8)
    # the reference preprocessing: Pillow resize, then (q/255 - mean) / std, computed in float64
    resized = np.stack([np.asarray(Image.fromarray(im).resize((224, 224), Image.BILINEAR)) for im in images])
    pre = ((resized.astype(np.float64) / 255.0 - MEAN.astype(np.float64)) / STD.astype(np.float64)).astype(np.float32)
    pre = np.ascontiguousarray(pre.transpose(0, 3, 1, 2))
    # densenet121: concats of up to 32 inputs; shufflenet: the exporter's shape arithmetic for the dynamic batch;
    # the transformers at small configurations (tv_models.py says which)
    for name in ("mobilenet_v2", "resnet50", "densenet121", "shufflenet_v2_x0_5", "vit_small", "convnext_small_cfg",
                 "swin_small_cfg", "alexnet", "vgg11_bn", "efficientnet_b0", "efficientnet_v2_s", "googlenet",
                 "inception_v3", "mnasnet0_5", "mobilenet_v3_small", "regnet_y_400mf", "resnext50_32x4d",
                 "squeezenet1_1"):
        gen = torch.Generator().manual_seed(1)
        model = tv_models.build(name, gen)
        x = torch.randn(3, 3, 224, 224, generator=gen)
        path = os.path.join(out, f"{name}.onnx")
        torch.onnx.export(model, x, path, opset_version=13, input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
        if name == "shufflenet_v2_x0_5":  # a fixed batch of 2 (no dynamic axes): the exporter bakes 2 into Reshapes
            torch.onnx.export(model, x[:2], os.path.join(out, f"{name}_fixed2.onnx"), opset_version=13,
                              input_names=["input"], output_names=["logits"])
        if name in ("vit_small", "swin_small_cfg"):  # opset 17: LayerNorm as one LayerNormalization node
            # (outside no_grad: there torch 1.13 takes a fused attention path it cannot export)
            torch.onnx.export(model, x, os.path.join(out, f"{name}_op17.onnx"), opset_version=17,
                              input_names=["input"], output_names=["logits"],
                              dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
        with torch.no_grad():
            np.save(os.path.join(out, f"{name}.in.npy"), x.numpy())
            np.save(os.path.join(out, f"{name}.out.npy"), model(x).numpy())
            np.save(os.path.join(out, f"{name}.images.out.npy"), model(torch.from_numpy(pre)).numpy())
            images.tofile(os.path.join(out, f"{name}.images.rgb"))
            for variant in {"vit_small": ["op17"], "swin_small_cfg": ["op17"], "shufflenet_v2_x0_5": ["fixed2"]}.get(name, []):
                for ext in ("in.npy", "out.npy", "images.out.npy", "images.rgb"):
                    shutil.copyfile(os.path.join(out, f"{name}.{ext}"), os.path.join(out, f"{name}_{variant}.{ext}"))
            if name == "resnet50":
                import onnx
                g = onnx.load(path, load_external_data=False).graph
                gemm = [n for n in g.node if n.op_type == "Gemm"][-1]
                with open(os.path.join(out, f"{name}.features_name.txt"), "w") as f:
                    f.write(gemm.input[0] + "\n")
                model.fc = torch.nn.Identity()
                np.save(os.path.join(out, f"{name}.features.npy"), model(x).numpy())
        print(f"exported {name}")


if __name__ == "__main__":
    main()
