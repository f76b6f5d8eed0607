#!/usr/bin/python3
"""The peer of `ftl train --fine-tune-last N --augment flip` the way PyTorch's transfer-learning
tutorials do it, on the same ONNX backbone (../shared/bench/onnx_torch.py): Pillow prep as
torch_recipe.py; phase 1 trains Dropout + Linear (NAdam, early stopping on val_acc with restore-best)
on cached features of both orientations (a flip drawn per image and epoch); phase 2 unfreezes the
last N Conv nodes and the BatchNormalizations after them (scale and shift; statistics fixed) and
trains them with the head on the images, the frozen bottom recomputed every batch (autograd records
only from the first trained tensor), each image flipped with probability 1/2. Prints one JSON line
with the time of each stage and the number of full backbone passes over the data.
usage: torch_fine_tune.py TRAIN_DIR VAL_DIR --onnx MODEL.onnx [--last 4] [--threads 2] [--epochs 10] [--fine-tune-epochs 3]"""
import argparse, json, os, sys, time
import numpy as np
import torch
from PIL import Image

ap = argparse.ArgumentParser()
ap.add_argument("train"); ap.add_argument("val")
ap.add_argument("--onnx", required=True); ap.add_argument("--shared", default=None)
ap.add_argument("--last", type=int, default=4)
ap.add_argument("--prep-size", type=int, default=299); ap.add_argument("--input-size", type=int, default=224)
ap.add_argument("--batch", type=int, default=16); ap.add_argument("--lr", type=float, default=0.004)
ap.add_argument("--fine-tune-lr", type=float, default=1e-4)
ap.add_argument("--dropout", type=float, default=0.5); ap.add_argument("--epochs", type=int, default=10)
ap.add_argument("--fine-tune-epochs", type=int, default=3)
ap.add_argument("--patience", type=int, default=3); ap.add_argument("--min-delta", type=float, default=0.001)
ap.add_argument("--threads", type=int, default=2); ap.add_argument("--seed", type=int, default=42)
a = ap.parse_args()
sys.path.insert(0, a.shared or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "bench"))
from onnx_torch import OnnxModule  # noqa: E402

torch.set_num_threads(a.threads); torch.manual_seed(a.seed)


def scan(root):
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    items = [(os.path.join(root, c, f), i) for i, c in enumerate(classes) for f in sorted(os.listdir(os.path.join(root, c)))
             if f.lower().endswith((".jpg", ".jpeg", ".png"))]
    return classes, items


def load(path):
    s = a.prep_size
    im = Image.open(path).convert("RGB"); im.thumbnail((s, s), Image.LANCZOS)
    x, y = im.size; bg = Image.new("RGB", (s, s), (255, 255, 255)); bg.paste(im, ((s - x) // 2, (s - y) // 2))
    if a.input_size != s: bg = bg.resize((a.input_size, a.input_size), Image.BILINEAR)
    return np.asarray(bg, np.uint8)


stage = {}
t0 = time.time()
classes, tr = scan(a.train); _, va = scan(a.val)
Xtr = np.stack([load(p) for p, _ in tr]); ytr = torch.tensor([l for _, l in tr])
Xva = np.stack([load(p) for p, _ in va]); yva = torch.tensor([l for _, l in va])
stage["prep_s"] = time.time() - t0
to_t = lambda X: torch.from_numpy((X.astype(np.float32) / 127.5 - 1).transpose(0, 3, 1, 2).copy()).contiguous(memory_format=torch.channels_last)
bb = OnnxModule(a.onnx).eval().to(memory_format=torch.channels_last)
passes = 0


def feats(X, flip=False):
    global passes
    passes += 1
    out = []
    with torch.no_grad():
        for i in range(0, len(X), 64):
            x = X[i:i + 64][:, :, ::-1] if flip else X[i:i + 64]
            out.append(bb(to_t(x)))
    return torch.cat(out).reshape(len(X), -1)


# ---- phase 1: the head on cached features of both orientations
t1 = time.time()
Ftr, Ftr_flip, Fva = feats(Xtr), feats(Xtr, True), feats(Xva)
stage["features_s"] = time.time() - t1
D = Ftr.shape[1]
head = torch.nn.Sequential(torch.nn.Dropout(a.dropout), torch.nn.Linear(D, len(classes)))
torch.nn.init.xavier_uniform_(head[1].weight); torch.nn.init.zeros_(head[1].bias)
opt = torch.optim.NAdam(head.parameters(), lr=a.lr, eps=1e-7, momentum_decay=0.004)
lossf = torch.nn.CrossEntropyLoss()
g = torch.Generator().manual_seed(a.seed)
best, best_state, wait, epochs1 = -1.0, None, 0, 0
t2 = time.time()
for ep in range(a.epochs):
    head.train(); perm = torch.randperm(len(tr), generator=g)
    flips = torch.rand(len(tr), generator=g) < 0.5
    for i in range(0, len(perm) - a.batch + 1, a.batch):
        idx = perm[i:i + a.batch]
        f = torch.where(flips[idx, None], Ftr_flip[idx], Ftr[idx])
        loss = lossf(head(f), ytr[idx]); opt.zero_grad(); loss.backward(); opt.step()
    head.eval()
    with torch.no_grad():
        vacc = (head(Fva).argmax(1) == yva).float().mean().item()
    epochs1 += 1
    if vacc - a.min_delta > best:
        best, wait = vacc, 0; best_state = {k: v.clone() for k, v in head.state_dict().items()}
    else:
        wait += 1
        if wait >= a.patience: break
head.load_state_dict(best_state)
stage["phase1_s"] = time.time() - t2
phase1_val = best

# ---- phase 2: the last N convs (and the BNs after them) with the head, on the images
convs = [n for n in bb.nodes if n.op_type == "Conv"][-a.last:]
first = bb.nodes.index(convs[0])
trained = [n.input[k] for n in convs for k in (1, 2) if len(n.input) > k and n.input[k]]
trained += [n.input[k] for n in bb.nodes[first:] if n.op_type == "BatchNormalization" for k in (1, 2)]
params = []
for name in trained:
    t = bb._c(name); t.requires_grad_(True); params.append(t)
opt2 = torch.optim.NAdam(list(head.parameters()) + params, lr=a.fine_tune_lr, eps=1e-7, momentum_decay=0.004)
t3 = time.time()
for ep in range(a.fine_tune_epochs):
    head.train(); perm = torch.randperm(len(tr), generator=g)
    passes += 1
    for i in range(0, len(perm) - a.batch + 1, a.batch):
        idx = perm[i:i + a.batch].numpy()
        X = Xtr[idx].copy()
        flip = np.random.default_rng(a.seed + ep * 100003 + i).random(len(idx)) < 0.5
        X[flip] = X[flip][:, :, ::-1]
        f = bb(to_t(X)).reshape(len(idx), -1)
        loss = lossf(head(f), ytr[idx]); opt2.zero_grad(); loss.backward(); opt2.step()
    head.eval()
    with torch.no_grad():
        vacc = (head(feats(Xva)).argmax(1) == yva).float().mean().item()
    best = max(best, vacc)
stage["phase2_s"] = time.time() - t3
res = dict(tool="torch", threads=a.threads, n_train=len(tr), n_val=len(va), epochs=epochs1, fine_tune_epochs=a.fine_tune_epochs,
           phase1_val_acc=phase1_val, best_val_acc=best, backbone_passes=passes, trained_values=sum(p.numel() for p in params),
           total_s=time.time() - t0, **{k: round(v, 2) for k, v in stage.items()})
print(json.dumps(res))
