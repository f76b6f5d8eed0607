#!/usr/bin/python3
"""The peer for the transformer backbones: torchvision vit_b_16, swin_t and convnext_tiny (random weights,
classification heads removed, eval), PyTorch 1.13 CPU on the same threads. fp32 as TorchScript-frozen
(the fastest fp32 mode on the CNNs); bf16 under CPU autocast with channels-last (asked for with --bf16;
without AVX512-BF16 both engines emulate it, and the lines say so). PyTorch 1.13's CPU autocast fails on
all three ("expected scalar type BFloat16 but found Float": layer_norm given fp32 weights and a bf16 input,
and ViT's native attention fast path), so a model that fails runs with its weights and input cast to bf16
instead (mode bf16_cast). Each also exported to ONNX (opset 13, dynamic batch) for ftl. Timing as the CNN peer does:
a warm-up of >= 1 s, then reps of >= 1 s; prints one JSON line per model and mode with the median images/s.
usage: torch_peer.py OUTDIR --models vit_b_16,swin_t,convnext_tiny --batch 16 --threads 2 [--reps 3] [--export-only]
"""
import argparse
import json
import os
import statistics
import time

import torch
import torchvision


def headless(name):
    m = getattr(torchvision.models, name)(weights=None).eval()
    if name.startswith("vit"):
        m.heads = torch.nn.Identity()
    elif name.startswith("swin"):
        m.head = torch.nn.Identity()
    else:
        m.classifier[2] = torch.nn.Identity()  # convnext: LayerNorm2d, Flatten kept
    return m


def rate(fn, batch, reps):
    t0 = time.time()
    while time.time() - t0 < 1.0:
        fn()
    out = []
    for _ in range(reps):
        n, t = 0, time.time()
        while True:
            fn()
            n += 1
            if time.time() - t >= 1.0:
                break
        out.append(n * batch / (time.time() - t))
    return out


NATIVE_BF16 = "avx512_bf16" in open("/proc/cpuinfo").read()


def bf16_rate(m, x, a):
    mc, xc = m.to(memory_format=torch.channels_last), x.to(memory_format=torch.channels_last)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            mc(xc[:1])
    except RuntimeError:  # autocast's layer_norm / attention failure (see the top): cast the whole model
        mb, xb = m.to(torch.bfloat16), x.to(torch.bfloat16)
        return "bf16_cast", rate(lambda: mb(xb), a.batch, a.reps)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return "bf16_cl", rate(lambda: mc(xc), a.batch, a.reps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--models", default="vit_b_16,swin_t,convnext_tiny")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--export-only", action="store_true", help="write the ONNX files, time nothing")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    os.makedirs(a.out, exist_ok=True)
    for name in a.models.split(","):
        m = headless(name)
        x = torch.randn(a.batch, 3, 224, 224)
        path = os.path.join(a.out, f"{name}.onnx")
        if not os.path.exists(path):
            torch.onnx.export(m, x[:1], path + ".tmp", opset_version=13, input_names=["input"], output_names=["features"],
                              dynamic_axes={"input": {0: "N"}, "features": {0: "N"}})
            os.replace(path + ".tmp", path)
        if a.export_only:
            continue
        with torch.no_grad():
            jit = torch.jit.freeze(torch.jit.trace(m, x))
            r = rate(lambda: jit(x), a.batch, a.reps)
            print(json.dumps({"engine": "torch", "name": name, "mode": "fp32_jit", "batch": a.batch, "threads": a.threads,
                              "images_per_s": statistics.median(r), "reps": r}), flush=True)
            if a.bf16:
                mode, r = bf16_rate(m, x, a)
                print(json.dumps({"engine": "torch", "name": name, "mode": mode, "batch": a.batch, "threads": a.threads,
                                  "native_bf16": NATIVE_BF16, "images_per_s": statistics.median(r), "reps": r}),
                      flush=True)


if __name__ == "__main__":
    main()
