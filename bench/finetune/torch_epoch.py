#!/usr/bin/python3
"""The per-epoch peer for fine-tuning: PyTorch 1.13 CPU the usual way. The frozen bottom is recomputed
for every batch under no_grad, the unfrozen top (same nodes as ftl's --fine-tune-last 4; BatchNorm in
eval mode, its scale and shift trained, as Keras' training=False) and a Linear head are trained with
NAdam on cross-entropy, then a validation pass runs the whole network. Inputs are random tensors held in
memory (no decoding: that favours the peer). Prints one JSON line with every epoch's time and the median.

  mobilenet_v2: torchvision's (random weights), bottom features[:17], top features[17:] + average pool
  onnx: the ONNX graph itself (the shared onnx_torch.OnnxModule), cut at --boundary: the top is every
        node that depends on it, its float initializers trained except BatchNorm's mean and variance
usage: torch_epoch.py --model mobilenet_v2|onnx [--onnx PATH --boundary TENSOR] --size S --batch 16 --threads 2
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torchvision


def torchvision_mobilenet_v2():
    m = torchvision.models.mobilenet_v2(weights=None).features.eval()
    bottom = torch.nn.Sequential(*list(m.children())[:17])
    top_layers = torch.nn.Sequential(*list(m.children())[17:])
    for p in bottom.parameters():
        p.requires_grad_(False)
    trained = list(top_layers.parameters())

    def top(b):
        return top_layers(b).mean(dim=(2, 3))

    return bottom, top, trained, 1280


def onnx_cut(path, boundary, shared):
    sys.path.insert(0, os.path.join(shared, "bench"))
    from onnx_torch import OnnxModule

    bottom = OnnxModule(path, output=boundary).eval()
    top_mod = OnnxModule(path).eval()
    # the top: every node that depends on the boundary tensor
    live, nodes = {boundary}, []
    for nd in top_mod.nodes:
        if any(i in live for i in nd.input):
            nodes.append(nd)
            live.update(nd.output)
    top_mod.nodes, top_mod.input_name = nodes, boundary
    trained, seen = [], set()
    for nd in nodes:
        names = list(nd.input[1:3]) if nd.op_type in ("Conv", "BatchNormalization", "Gemm") else []
        for n in names:
            if n and n in top_mod._names and n not in seen:
                seen.add(n)
                t = top_mod._c(n)
                if t.is_floating_point():
                    t.requires_grad_(True)
                    trained.append(t)

    def top(b):
        return top_mod(b).flatten(1)

    return bottom, top, trained, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--onnx")
    ap.add_argument("--boundary")
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared"))
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--train", type=int, default=244)
    ap.add_argument("--val", type=int, default=153)
    ap.add_argument("--classes", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if a.model == "mobilenet_v2":
        bottom, top, trained, dim = torchvision_mobilenet_v2()
    else:
        bottom, top, trained, dim = onnx_cut(a.onnx, a.boundary, a.shared)
    x = torch.randn(a.train, 3, a.size, a.size)
    y = torch.randint(0, a.classes, (a.train,))
    xv = torch.randn(a.val, 3, a.size, a.size)
    yv = torch.randint(0, a.classes, (a.val,))
    if dim is None:
        with torch.no_grad():
            dim = top(bottom(x[:1])).shape[1]
    head = torch.nn.Linear(dim, a.classes)
    opt = torch.optim.NAdam(trained + list(head.parameters()), lr=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    steps = a.train // a.batch  # drop_remainder, as ftl's default

    def epoch():
        perm = torch.randperm(a.train)
        for s in range(steps):
            idx = perm[s * a.batch:(s + 1) * a.batch]
            with torch.no_grad():
                b = bottom(x[idx])
            loss = loss_fn(head(top(b)), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        correct = 0
        with torch.no_grad():
            for s in range(0, a.val, a.batch):
                correct += int((head(top(bottom(xv[s:s + a.batch]))).argmax(1) == yv[s:s + a.batch]).sum())
        return correct

    times = []
    for _ in range(a.epochs):
        t = time.time()
        epoch()
        times.append(time.time() - t)
    print(json.dumps({"engine": "torch", "model": a.model if a.model != "onnx" else os.path.basename(a.onnx),
                      "size": a.size, "batch": a.batch, "threads": a.threads, "train": a.train, "val": a.val,
                      "trained_values": sum(p.numel() for p in trained), "epoch_s": times,
                      "median_epoch_s": statistics.median(times)}), flush=True)


if __name__ == "__main__":
    main()
