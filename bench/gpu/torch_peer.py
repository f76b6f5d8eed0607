#!/usr/bin/env python3
"""The PyTorch peer of ftl's GPU benchmark: backbone forward images/s on the same GPU, batch B, in
the modes a PyTorch user would pick: fp32 (TF32 off), tf32 (matmul/cuDNN TF32 on), bf16 (channels
last + autocast, the fastest eager mode) and, with --compile, torch.compile of the bf16 one.
The model is torchvision's own (mobilenet_v2 / resnet50 features + global pool) when torchvision is
installed and the file name says which, else the same ONNX file ftl runs, turned into torch ops once
(every attribute and constant resolved at load, so no per-forward host syncs).
Prints one JSON line per mode: {"engine": "torch", "model", "precision", "batch", "rates", "median"}.
usage: torch_peer.py MODEL.onnx [--batch 256] [--size S] [--compile] [--modes fp32,tf32,bf16]"""
import argparse
import json
import os
import time

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper


class OnnxGraph(torch.nn.Module):
    """Conv/BN/Relu/Clip/Add/MaxPool/AveragePool/GlobalAveragePool/Flatten/Reshape graphs (the
    MobileNets and Xception), as a fixed list of torch calls."""

    def __init__(self, path):
        super().__init__()
        m = onnx.load(path)
        g = m.graph
        consts = {t.name: np.array(numpy_helper.to_array(t)) for t in g.initializer}
        self.params = torch.nn.ParameterDict()
        self.steps = []
        self.input = g.input[0].name
        self.output = g.output[0].name

        def param(name):
            key = f"p{len(self.params)}"
            self.params[key] = torch.nn.Parameter(torch.from_numpy(consts[name].copy()), requires_grad=False)
            return key

        for nd in g.node:
            a = {x.name: onnx.helper.get_attribute_value(x) for x in nd.attribute}
            ins, op = list(nd.input), nd.op_type
            if op == "Conv":
                p = a.get("pads", [0, 0, 0, 0])
                step = dict(op=op, w=param(ins[1]), b=param(ins[2]) if len(ins) > 2 and ins[2] else None,
                            pre=None if p[0] == p[2] and p[1] == p[3] else (p[1], p[3], p[0], p[2]),
                            pad=(p[0], p[1]) if p[0] == p[2] and p[1] == p[3] else 0,
                            stride=tuple(a.get("strides", [1, 1])), dil=tuple(a.get("dilations", [1, 1])),
                            groups=a.get("group", 1))
            elif op == "BatchNormalization":
                step = dict(op=op, s=param(ins[1]), t=param(ins[2]), m=param(ins[3]), v=param(ins[4]),
                            eps=a.get("epsilon", 1e-5))
            elif op == "Clip":
                lo = float(consts[ins[1]]) if len(ins) > 1 and ins[1] else a.get("min", -float("inf"))
                hi = float(consts[ins[2]]) if len(ins) > 2 and ins[2] else a.get("max", float("inf"))
                step = dict(op=op, lo=lo, hi=hi)
            elif op in ("MaxPool", "AveragePool"):
                p = a.get("pads", [0, 0, 0, 0])
                step = dict(op=op, k=tuple(a["kernel_shape"]), s=tuple(a.get("strides", [1, 1])),
                            pre=(p[1], p[3], p[0], p[2]))
            elif op == "Reshape":
                step = dict(op=op, shape=[int(v) for v in consts[ins[1]]])
            elif op == "Flatten":
                step = dict(op=op, axis=a.get("axis", 1))
            elif op in ("Relu", "Add", "GlobalAveragePool"):
                step = dict(op=op)
            else:
                raise NotImplementedError(op)
            step["ins"] = [i for i in ins if i not in consts]
            step["out"] = nd.output[0]
            self.steps.append(step)

    def forward(self, x):
        env = {self.input: x}
        P = self.params
        for s in self.steps:
            v = [env[i] for i in s["ins"]]
            op = s["op"]
            if op == "Conv":
                xin = F.pad(v[0], s["pre"]) if s["pre"] else v[0]
                y = F.conv2d(xin, P[s["w"]], P[s["b"]] if s["b"] else None, s["stride"], s["pad"], s["dil"], s["groups"])
            elif op == "BatchNormalization":
                y = F.batch_norm(v[0], P[s["m"]], P[s["v"]], P[s["s"]], P[s["t"]], False, 0.0, s["eps"])
            elif op == "Clip":
                y = torch.clamp(v[0], s["lo"], s["hi"])
            elif op == "Relu":
                y = F.relu(v[0])
            elif op == "Add":
                y = v[0] + v[1]
            elif op == "MaxPool":
                y = F.max_pool2d(F.pad(v[0], s["pre"], value=-float("inf")), s["k"], s["s"])
            elif op == "AveragePool":
                y = F.avg_pool2d(F.pad(v[0], s["pre"]), s["k"], s["s"])
            elif op == "GlobalAveragePool":
                y = v[0].mean(dim=(2, 3), keepdim=True)
            elif op == "Flatten":
                y = torch.flatten(v[0], s["axis"])
            else:
                y = v[0].reshape(s["shape"])
            env[s["out"]] = y
        return env[self.output]


def torchvision_model(path):
    try:
        import torchvision
    except ImportError:
        return None, None
    name = os.path.basename(path).lower()
    for key, ctor in (("mobilenet_v2", "mobilenet_v2"), ("resnet50", "resnet50")):
        if key in name:
            net = getattr(torchvision.models, ctor)()
            body = net.features if key == "mobilenet_v2" else torch.nn.Sequential(*list(net.children())[:-2])
            return torch.nn.Sequential(body, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()), "torchvision " + ctor
    return None, None


def measure(fn, x, reps=3, min_rep_s=1.0):
    with torch.inference_mode():
        for _ in range(3):
            fn(x)
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn(x)
        torch.cuda.synchronize()
        per = time.perf_counter() - t
        k = max(1, int(min_rep_s / max(per, 1e-4)))
        rates = []
        for _ in range(reps):
            t = time.perf_counter()
            for _ in range(k):
                fn(x)
            torch.cuda.synchronize()
            rates.append(k * x.shape[0] / (time.perf_counter() - t))
    return rates


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=0)
    ap.add_argument("--modes", default="fp32,tf32,bf16")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--onnx-torch", default="", help="unused (kept for older run scripts)")
    a = ap.parse_args()
    net, source = torchvision_model(a.model)
    if net is None:
        net, source = OnnxGraph(a.model), "onnx graph"
    size = a.size or (299 if "xception" in os.path.basename(a.model) else 224)
    net = net.cuda().eval()
    x = torch.randn(a.batch, 3, size, size, device="cuda")
    modes = a.modes.split(",") + (["bf16_compile"] if a.compile else [])
    for mode in modes:
        torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
        torch.backends.cudnn.allow_tf32 = mode == "tf32"
        torch.backends.cudnn.benchmark = True
        if mode.startswith("bf16"):
            m = net.to(memory_format=torch.channels_last)
            xin = x.to(memory_format=torch.channels_last)
            if mode == "bf16_compile":
                m = torch.compile(m)

            def fn(t, m=m):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    return m(t)
        else:
            fn, xin = net.to(memory_format=torch.contiguous_format), x
        rates = measure(fn, xin)
        print(json.dumps({"engine": "torch", "model": a.model, "source": source, "precision": mode, "batch": a.batch,
                          "torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "rates": rates,
                          "median": sorted(rates)[len(rates) // 2]}), flush=True)


if __name__ == "__main__":
    main()
