#!/usr/bin/env python3
"""The peer for bench/sweep/run.sh: the same trials as a PyTorch loop on cached features (each trial a
fresh Dropout + Linear head, its optimizer, randperm batches with the remainder dropped, validation
on the val rows after each epoch), on random features of the sweep's shape. Debian's torch takes
seconds per epoch here, so it times one epoch of one trial per (batch, optimizer) pair and gives
the sweep's total as the sum over its trials (stated as an extrapolation).
usage: torch_sweep.py N NVAL D C EPOCHS THREADS 'lr,...' 'dropout,...' 'batch,...' 'optimizer,...'
prints one JSON line."""
import json, sys, time
import torch

n, nval, d, c, epochs, threads = (int(v) for v in sys.argv[1:7])
lrs, dropouts, batches = ([float(x) for x in sys.argv[i].split(",")] for i in (7, 8, 9))
batches = [int(b) for b in batches]
optimizers = sys.argv[10].split(",")
torch.set_num_threads(threads)
torch.manual_seed(42)
Ftr, Fva = torch.rand(n, d) * 2, torch.rand(nval, d) * 2
ytr, yva = torch.arange(n) % c, torch.arange(nval) % c


def one_epoch(lr, dropout, b, kind):
    head = torch.nn.Sequential(torch.nn.Dropout(dropout), torch.nn.Linear(d, c))
    if kind == "nadam":
        opt = torch.optim.NAdam(head.parameters(), lr=lr, eps=1e-7, momentum_decay=0.004)
    elif kind == "adam":
        opt = torch.optim.Adam(head.parameters(), lr=lr, eps=1e-7)
    else:
        opt = torch.optim.SGD(head.parameters(), lr=lr)
    lossf = torch.nn.CrossEntropyLoss()
    t0 = time.time()
    head.train()
    perm = torch.randperm(n)
    for i in range(0, n - b + 1, b):
        idx = perm[i:i + b]
        loss = lossf(head(Ftr[idx]), ytr[idx])
        opt.zero_grad(); loss.backward(); opt.step()
    head.eval()
    with torch.no_grad():
        for i in range(0, nval, 1024):
            lossf(head(Fva[i:i + 1024]), yva[i:i + 1024])
    return time.time() - t0


per = {}
for b in batches:
    for kind in optimizers:
        per[(b, kind)] = one_epoch(lrs[0], dropouts[-1], b, kind)
total = sum(per[(b, k)] * epochs for _ in lrs for _ in dropouts for b in batches for k in optimizers)
print(json.dumps(dict(tool="torch", n=n, d=d, classes=c, epochs=epochs, threads=threads,
                      trials=len(lrs) * len(dropouts) * len(batches) * len(optimizers),
                      epoch_s={"%d/%s" % key: round(v, 3) for key, v in per.items()},
                      sweep_s_extrapolated=round(total, 1))))
