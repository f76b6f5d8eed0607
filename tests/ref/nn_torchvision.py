#!/usr/bin/python3
"""torchvision mobilenet_v2, resnet50, densenet121 and shufflenet_v2_x0_5 (random weights, seeded; BatchNorm statistics randomised
so folding matters) exported with torch.onnx, with PyTorch's own outputs as the reference.

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
import torchvision
from PIL import Image

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def randomize_bn(model, gen):
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.weight.data = torch.rand(c, generator=gen) + 0.5
            m.bias.data = torch.randn(c, generator=gen) * 0.1
            m.running_mean = torch.randn(c, generator=gen) * 0.1
            m.running_var = torch.rand(c, generator=gen) + 0.5


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
    # densenet: concats of up to 32 inputs; shufflenet: the exporter's shape arithmetic for the dynamic
    # batch (Shape, Gather, Div, Unsqueeze, Concat) feeding Reshape and Slice of activations
    # vit_small: torchvision's VisionTransformer class with fewer layers and narrower (the ops of
    # ViT-B/16 - patch conv, class token, decomposed LayerNorm, attention MatMuls, Softmax, GELU - at a
    # size CI runs in seconds); its zero-initialised head randomised so the logits mean something
    # convnext_small_cfg: torchvision's ConvNeXt class with two narrow stages (LayerNorm over channels
    # after permutes, 7x7 depthwise convs, Linear on 4-D tensors, layer scale, GELU)
    # swin_small_cfg: torchvision's SwinTransformer class, two narrow stages (shifted windows: the
    # attention mask built by Slice/ScatterND-style arithmetic, torch.roll as Slice+Concat, patch
    # merging by strided slices, relative position bias gathered from a table)
    # and one model per remaining family (alexnet and vgg with their 100M-parameter classifiers narrowed:
    # the same Linear/ReLU/Dropout ops at a size CI holds)
    for name in ("mobilenet_v2", "resnet50", "densenet121", "shufflenet_v2_x0_5", "vit_small", "convnext_small_cfg",
                 "swin_small_cfg", "alexnet", "vgg11_bn", "efficientnet_b0", "efficientnet_v2_s", "googlenet",
                 "inception_v3", "mnasnet0_5", "mobilenet_v3_small", "regnet_y_400mf", "resnext50_32x4d",
                 "squeezenet1_1"):
        gen = torch.Generator().manual_seed(1)
        torch.manual_seed(1)
        if name == "vit_small":
            from torchvision.models.vision_transformer import VisionTransformer
            model = VisionTransformer(image_size=224, patch_size=16, num_layers=3, num_heads=4, hidden_dim=96,
                                      mlp_dim=192, num_classes=10).eval()
            model.heads.head.weight.data = torch.randn(model.heads.head.weight.shape, generator=gen) * 0.2
            model.heads.head.bias.data = torch.randn(model.heads.head.bias.shape, generator=gen) * 0.1
        elif name == "swin_small_cfg":
            from torchvision.models.swin_transformer import SwinTransformer
            model = SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[7, 7],
                                    num_classes=10).eval()
            model.head.weight.data = torch.randn(model.head.weight.shape, generator=gen) * 0.5  # logits of size ~1
        elif name == "convnext_small_cfg":
            from torchvision.models.convnext import CNBlockConfig, ConvNeXt
            model = ConvNeXt([CNBlockConfig(32, 64, 2), CNBlockConfig(64, None, 2)], layer_scale=0.5).eval()
        elif name in ("alexnet", "vgg11_bn"):
            model = getattr(torchvision.models, name)(weights=None).eval()
            width = 256 * 6 * 6 if name == "alexnet" else 512 * 7 * 7
            model.classifier = torch.nn.Sequential(torch.nn.Dropout(), torch.nn.Linear(width, 128), torch.nn.ReLU(True),
                                                   torch.nn.Dropout(), torch.nn.Linear(128, 10)).eval()
        else:
            model = getattr(torchvision.models, name)(weights=None).eval()
        randomize_bn(model, gen)
        if name == "inception_v3":  # its default init grows activations to ~1e13 over 94 convs: keep them O(1)
            for mod in model.modules():
                if isinstance(mod, torch.nn.Conv2d):
                    fan_in = mod.weight[0].numel()
                    mod.weight.data = torch.randn(mod.weight.shape, generator=gen) * (1.0 / fan_in) ** 0.5
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
