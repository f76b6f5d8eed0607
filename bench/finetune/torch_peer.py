#!/usr/bin/python3
"""The peer for fine-tuning MobileNetV2's last 4 convolutions (torchvision mobilenet_v2, random weights, BN in eval
mode as Keras' training=False): PyTorch 1.13 CPU the usual way - every parameter frozen except those of the last 4
Conv2d layers and the BatchNorms after them (scale and shift), the frozen bottom recomputed every batch (autograd
records nothing there, so its backward is skipped), then the top's backward. Prints one JSON line: the median time
per training step (forward of the whole network + backward of the top) and of the frozen bottom's forward alone.
usage: torch_peer.py --batch 16 --threads 2 [--reps 5]
"""
import argparse
import json
import statistics
import time

import torch
import torchvision


def timed(fn, reps):
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
        out.append(1e3 * (time.time() - t) / n)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    m = torchvision.models.mobilenet_v2(weights=None).features.eval()
    for p in m.parameters():
        p.requires_grad_(False)
    convs = [mod for mod in m.modules() if isinstance(mod, torch.nn.Conv2d)]
    top = convs[-4:]
    trained = []
    for c in top:
        trained += list(c.parameters())
    bns = [mod for mod in m.modules() if isinstance(mod, torch.nn.BatchNorm2d)][-4:]
    for b in bns:
        trained += [b.weight, b.bias]
    for p in trained:
        p.requires_grad_(True)
    x = torch.randn(a.batch, 3, 224, 224)
    pool = torch.nn.AdaptiveAvgPool2d(1)
    g = torch.randn(a.batch, 1280) * 1e-3

    def step():
        for p in trained:
            p.grad = None
        f = pool(m(x)).flatten(1)
        f.backward(g)

    # the bottom alone: everything before the first unfrozen conv (features[:17] and the expand conv of 17)
    bottom = torch.nn.Sequential(*list(m.children())[:17])

    def bottom_fwd():
        with torch.no_grad():
            bottom(x)

    steps, bottoms = timed(step, a.reps), timed(bottom_fwd, a.reps)
    print(json.dumps({"engine": "torch", "model": "mobilenet_v2", "last": 4, "batch": a.batch, "threads": a.threads,
                      "trained_values": sum(p.numel() for p in trained), "step_ms": statistics.median(steps),
                      "bottom_forward_ms": statistics.median(bottoms), "steps": steps}), flush=True)


if __name__ == "__main__":
    main()
