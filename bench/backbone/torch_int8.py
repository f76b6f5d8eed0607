#!/usr/bin/python3
"""The int8 peer: PyTorch 1.13's FX post-training static quantization (fbgemm, or onednn where the build has no fbgemm, as Debian's; per-channel weights,
the default qconfig mapping) of the peer benchmark's feature extractors (bench/peer/models.py:
torchvision mobilenet_v2 and resnet50 without their classifier, the Keras-architecture Xception;
random weights, as ftl's exported copies), calibrated on `--calibration-rows` random images, and the
fp32 model in channels-last for reference. Prints one JSON line per (model, mode, batch): images/s
(median of reps) and the int8 features' mean cosine to the fp32 ones on the calibration images.
usage: torch_int8.py [--models resnet50,mobilenet_v2,xception] [--batches 16,1] [--threads 2] [--reps 5]
                     [--shared DIR]"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--models", default="resnet50,mobilenet_v2,xception")
ap.add_argument("--batches", default="16,1")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--calibration-rows", type=int, default=64)
ap.add_argument("--shared", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared"))
a = ap.parse_args()
sys.path.insert(0, os.path.join(a.shared, "bench", "peer"))
from models import build  # noqa: E402  the peer's own definitions

from torch.ao.quantization import get_default_qconfig_mapping  # noqa: E402
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx  # noqa: E402

torch.set_num_threads(a.threads)
torch.set_flush_denormal(True)  # as the peer benchmark: random weights make denormals
ENGINE = "fbgemm" if "fbgemm" in torch.backends.quantized.supported_engines else "onednn"  # Debian: no fbgemm
torch.backends.quantized.engine = ENGINE
torch.manual_seed(0)


def rate(model, x, reps):
    """Median images/s over reps timed runs of at least 0.5 s each."""
    with torch.no_grad():
        model(x)
        model(x)
        rates = []
        for _ in range(reps):
            n, t0 = 0, time.perf_counter()
            while True:
                model(x)
                n += 1
                if time.perf_counter() - t0 >= 0.5:
                    break
            rates.append(n * x.shape[0] / (time.perf_counter() - t0))
    return statistics.median(rates)


for name in a.models.split(","):
    fp32, size = build(name)
    calib = torch.randn(a.calibration_rows, 3, size, size)
    int8_mode = "fx_int8"
    with torch.no_grad():
        try:
            prepared = prepare_fx(build(name)[0], get_default_qconfig_mapping(ENGINE), (calib[:1],))
            for i in range(0, a.calibration_rows, 16):
                prepared(calib[i:i + 16])
            int8 = convert_fx(prepared)
        except Exception as e:  # FX cannot trace torchvision's ViT: PyTorch's own int8 path for transformers then
            print(f"torch_int8: {name}: FX quantization failed ({type(e).__name__}); dynamic quantization of its "
                  "Linear layers instead", file=sys.stderr)
            int8 = torch.ao.quantization.quantize_dynamic(build(name)[0], {torch.nn.Linear}, dtype=torch.qint8)
            int8_mode = "dynamic_int8"
        f32, f8 = fp32(calib[:16]), int8(calib[:16])
        cosine = torch.nn.functional.cosine_similarity(f32, f8, dim=1).mean().item()
    fp32_cl = fp32.to(memory_format=torch.channels_last)
    for b in (int(x) for x in a.batches.split(",")):
        x = torch.randn(b, 3, size, size)
        for mode, model, inp in (("fp32_cl", fp32_cl, x.to(memory_format=torch.channels_last)), (int8_mode, int8, x)):
            rec = {"engine": "torch", "model": name, "mode": mode, "batch": b, "threads": a.threads, "engine_int8": ENGINE}
            try:
                rec["median"] = round(rate(model, inp, a.reps), 3)
            except RuntimeError as e:  # e.g. the onednn engine has no reorder for MobileNetV2 at batch 1
                rec["error"] = str(e).splitlines()[0]
            if mode == int8_mode:  # random weights: says how far the random activations drift, not accuracy
                rec["int8_cosine_to_fp32"] = round(cosine, 5)
            print(json.dumps(rec), flush=True)
