"""PyTorch references for the ftl head (tests/unit/test_train_*.c).

usage: train_ref.py OUT_DIR

Writes, per case (small: D=70 C=13 B=8; large: D=300 C=61 B=24 -- sizes that are not multiples
of any SIMD width and span several K blocks):
  CASE/features.f32 [N x D], labels.i32 [N], order.i32 [STEPS x B] (batch indices per step),
  CASE/init_kernel.f32 [D x C] (bias starts at 0),
  CASE/OPT.losses.f32 [STEPS] (loss of each step, before its update),
  CASE/OPT.kernel.f32 [D x C], CASE/OPT.bias.f32 [C] (after STEPS updates),
for OPT in nadam, adam, adam_wd, sgd, sgd_momentum, sgd_nesterov: torch.nn.Linear +
F.cross_entropy (mean) + torch.optim, dropout off. nadam uses foreach=True: torch 1.13's default
single-tensor NAdam multiplies mu_t into mu_product_next twice (pytorch/pytorch#92699, fixed in
2.0); its multi-tensor path has the correct Keras Nadam formula.

Also a safetensors file written by hand with struct (the format spec, no safetensors package):
  torch_written.safetensors + torch_written.json (the expected dtypes, shapes and values).
"""
import json
import os
import struct
import sys

import numpy as np
import torch

STEPS = 20
CASES = {"small": dict(N=96, D=70, C=13, B=8), "large": dict(N=240, D=300, C=61, B=24)}
OPTS = {
    "nadam": lambda p: torch.optim.NAdam(p, lr=0.01, betas=(0.9, 0.999), eps=1e-7, momentum_decay=0.004, foreach=True),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.9, 0.999), eps=1e-7),
    "adam_wd": lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.9, 0.999), eps=1e-7, weight_decay=0.05),
    "sgd": lambda p: torch.optim.SGD(p, lr=0.05),
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
    "sgd_nesterov": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
    "nadam_ls": lambda p: torch.optim.NAdam(p, lr=0.01, betas=(0.9, 0.999), eps=1e-7, momentum_decay=0.004, foreach=True),
    "sgd_ls": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
}
# label smoothing of the cases that have it: CrossEntropyLoss(label_smoothing=e)
SMOOTHING = {"nadam_ls": 0.1, "sgd_ls": 0.3}


def save(path, array, dtype):
    np.ascontiguousarray(array, dtype=dtype).tofile(path)


def make_case(out, name, N, D, C, B, seed):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(seed)
    # Pooled CNN features are non-negative (ReLU then average); make them look like that.
    X = rng.gamma(shape=1.5, scale=0.6, size=(N, D)).astype(np.float32)
    y = rng.integers(0, C, size=N).astype(np.int32)
    order = np.concatenate([rng.permutation(N) for _ in range((STEPS * B) // N + 1)])[: STEPS * B]
    order = order.reshape(STEPS, B).astype(np.int32)
    limit = np.sqrt(6.0 / (D + C))
    W0 = rng.uniform(-limit, limit, size=(D, C)).astype(np.float32)
    save(os.path.join(d, "features.f32"), X, np.float32)
    save(os.path.join(d, "labels.i32"), y, np.int32)
    save(os.path.join(d, "order.i32"), order, np.int32)
    save(os.path.join(d, "init_kernel.f32"), W0, np.float32)
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y).long()
    for opt_name, make_opt in OPTS.items():
        lin = torch.nn.Linear(D, C)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(W0.T.copy()))
            lin.bias.zero_()
        opt = make_opt(lin.parameters())
        losses = []
        for s in range(STEPS):
            idx = torch.from_numpy(order[s]).long()
            loss = torch.nn.functional.cross_entropy(lin(Xt[idx]), yt[idx], label_smoothing=SMOOTHING.get(opt_name, 0.0))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        save(os.path.join(d, opt_name + ".losses.f32"), np.array(losses), np.float32)
        save(os.path.join(d, opt_name + ".kernel.f32"), lin.weight.detach().numpy().T, np.float32)
        save(os.path.join(d, opt_name + ".bias.f32"), lin.bias.detach().numpy(), np.float32)


def write_schedules(out):
    """Per-epoch learning rates of torch.optim.lr_scheduler stepped once per epoch (the lr in effect
    during epoch e, then step()), and for plateau a scripted metric sequence: schedules.json."""
    def run(make, epochs, metrics=None):
        p = torch.nn.Parameter(torch.zeros(1))
        opt = torch.optim.SGD([p], lr=0.01)
        sched = make(opt)
        lrs = []
        for e in range(epochs):
            lrs.append(opt.param_groups[0]["lr"])
            if metrics is None:
                sched.step()
            else:
                sched.step(metrics[e])
        return lrs
    falling = [1.0, 0.9, 0.95, 0.92, 0.91, 0.8, 0.85, 0.86, 0.87, 0.7, 0.71, 0.72, 0.73, 0.74, 0.75, 0.76, 0.77, 0.78]
    rising = [0.5, 0.6, 0.605, 0.61, 0.62, 0.7, 0.705, 0.71, 0.69, 0.72, 0.8, 0.79, 0.8, 0.805, 0.81, 0.79]
    sch = torch.optim.lr_scheduler
    cases = [
        {"kind": "cosine", "lr": 0.01, "min_lr": 0.001, "epochs": 12,
         "lrs": run(lambda o: sch.CosineAnnealingLR(o, T_max=12, eta_min=0.001), 12)},
        {"kind": "cosine", "lr": 0.01, "min_lr": 0.0, "epochs": 7,
         "lrs": run(lambda o: sch.CosineAnnealingLR(o, T_max=7, eta_min=0.0), 7)},
        {"kind": "step", "lr": 0.01, "step_epochs": 3, "gamma": 0.5, "epochs": 10,
         "lrs": run(lambda o: sch.StepLR(o, step_size=3, gamma=0.5), 10)},
        # Keras' patience P is torch's P - 1 (Keras reduces after P bad epochs, torch after more than P)
        {"kind": "plateau", "lr": 0.01, "patience": 2, "factor": 0.5, "min_lr": 0.002, "maximize": False,
         "min_delta": 0.0, "metrics": falling, "epochs": len(falling),
         "lrs": run(lambda o: sch.ReduceLROnPlateau(o, mode="min", factor=0.5, patience=1, threshold=0.0,
                                                    threshold_mode="abs", min_lr=0.002), len(falling), falling)},
        {"kind": "plateau", "lr": 0.01, "patience": 3, "factor": 0.2, "min_lr": 0.0, "maximize": True,
         "min_delta": 0.01, "metrics": rising, "epochs": len(rising),
         "lrs": run(lambda o: sch.ReduceLROnPlateau(o, mode="max", factor=0.2, patience=2, threshold=0.01,
                                                    threshold_mode="abs", min_lr=0.0), len(rising), rising)},
    ]
    with open(os.path.join(out, "schedules.json"), "w") as f:
        json.dump(cases, f, indent=1)


def write_safetensors_by_hand(out):
    """A file following the format spec, built with struct; values chosen to be exact in JSON."""
    tensors = [
        ("weights", "F32", [2, 3], np.array([[1.5, -2.25, 3.0], [0.125, 1e-3, -7.0]], dtype="<f4")),
        ("doubles", "F64", [4], np.array([1.0 / 3.0, -2.5, 1e300, 0.0], dtype="<f8")),
        ("ints", "I32", [5], np.array([0, -1, 2147483647, -2147483648, 42], dtype="<i4")),
        ("longs", "I64", [2, 2], np.array([[1, -2], [2**62, -(2**62)]], dtype="<i8")),
        ("bytes", "U8", [7], np.array([0, 1, 2, 127, 128, 254, 255], dtype="u1")),
        ("unsigned", "U64", [3], np.array([0, 2**63 + 5, 2**64 - 1], dtype="<u8")),
        ("scalar", "F32", [], np.array(2.5, dtype="<f4")),
        ("empty", "F32", [0, 4], np.zeros((0, 4), dtype="<f4")),
    ]
    header, blobs, offset = {}, [], 0
    header["__metadata__"] = {"format": "pt", "written_by": "tests/ref/train_ref.py", "unicode": "caf\u00e9 \u2713"}
    for name, dtype, shape, arr in tensors:
        data = arr.tobytes()
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode("utf-8")
    text += b" " * ((8 - (len(text) + 8) % 8) % 8)
    with open(os.path.join(out, "torch_written.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    expected = {name: {"dtype": dtype, "shape": shape, "values": [repr(v) for v in arr.reshape(-1).tolist()]}
                for name, dtype, shape, arr in tensors}
    expected["__metadata__"] = header["__metadata__"]
    with open(os.path.join(out, "torch_written.json"), "w") as f:
        json.dump(expected, f, indent=1)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    for i, (name, c) in enumerate(CASES.items()):
        make_case(out, name, seed=1234 + i, **c)
    write_safetensors_by_hand(out)
    write_schedules(out)


if __name__ == "__main__":
    main()
