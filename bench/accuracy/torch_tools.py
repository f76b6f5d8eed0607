"""The peer of bench/accuracy/run.sh: PyTorch 1.13 training the article's head (Dropout 0.5 + Linear,
NAdam lr 0.004, eps 1e-7, momentum_decay 0.004, batch 16 with the remainder dropped) on the same
cached features, with the same accuracy tools done the timm way: CrossEntropyLoss(label_smoothing),
CosineAnnealingLR stepped per epoch, per-row random mirrored features (flip augmentation on cached
features) and flip TTA (the mean of the two orientations' softmax).
The features come from ftl's Python package (Backbone.embed_dataset, and Backbone.embed of the
mirrored images), the same floats ftl train caches; only the head loop is timed.
usage: torch_tools.py DS BACKBONE IMAGES_TRAIN.npy IMAGES_VAL.npy EPOCHS SEEDS THREADS CONFIG...
  CONFIG: name:key=value,... with keys ls (label smoothing), cosine (0/1), augment (0/1), tta (0/1)
prints one JSON line per config: name, val_acc per seed, seconds per seed (the head loop)."""
import json, sys, time
import numpy as np
import torch
import ftl

ds, backbone, img_tr, img_va = sys.argv[1:5]
epochs, seeds, threads = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
torch.set_num_threads(threads)
b = ftl.Backbone(backbone, threads=threads)
Ftr, ytr = b.embed_dataset(ds + "/train.parquet")
Fva, yva = b.embed_dataset(ds + "/val.parquet")
Ftr_m = b.embed(np.load(img_tr)[:, :, ::-1].copy())  # the mirror images, as ftl's flip cache holds
Fva_m = b.embed(np.load(img_va)[:, :, ::-1].copy())
Ftr, Ftr_m, Fva, Fva_m = (torch.from_numpy(np.array(a)) for a in (Ftr, Ftr_m, Fva, Fva_m))
ytr, yva = torch.from_numpy(ytr.astype(np.int64)), torch.from_numpy(yva.astype(np.int64))
n, d, c = Ftr.shape[0], Ftr.shape[1], int(max(ytr.max(), yva.max())) + 1

def run(cfg, seed):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    head = torch.nn.Sequential(torch.nn.Dropout(0.5), torch.nn.Linear(d, c))
    opt = torch.optim.NAdam(head.parameters(), lr=0.004, eps=1e-7, momentum_decay=0.004)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs) if cfg.get("cosine") else None
    lossf = torch.nn.CrossEntropyLoss(label_smoothing=float(cfg.get("ls", 0)))
    t0 = time.perf_counter()
    for ep in range(epochs):
        head.train()
        perm = torch.randperm(n, generator=g)
        flip = torch.rand(n, generator=g) < 0.5 if cfg.get("augment") else None
        for i in range(0, n - 16 + 1, 16):
            idx = perm[i:i + 16]
            x = torch.where(flip[idx, None], Ftr_m[idx], Ftr[idx]) if flip is not None else Ftr[idx]
            loss = lossf(head(x), ytr[idx])
            opt.zero_grad(); loss.backward(); opt.step()
        if sched: sched.step()
        head.eval()
        with torch.no_grad():  # validation every epoch, as ftl does
            p = torch.softmax(head(Fva), 1)
            if cfg.get("tta"): p = (p + torch.softmax(head(Fva_m), 1)) / 2
            acc = (p.argmax(1) == yva).float().mean().item()
    return acc, time.perf_counter() - t0

for spec in sys.argv[8:]:
    name, _, kv = spec.partition(":")
    cfg = {k: float(v) for k, v in (p.split("=") for p in kv.split(",") if p)}
    res = [run(cfg, s) for s in range(1, seeds + 1)]
    print(json.dumps(dict(name=name, val_acc=[r[0] for r in res], seconds=[r[1] for r in res])), flush=True)
