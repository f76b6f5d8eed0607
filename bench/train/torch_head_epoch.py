"""The peer for bench_train_epoch.c: the head loop of ../shared/bench/torch_recipe.py with
--cache-features (Dropout + Linear, NAdam(momentum_decay=0.004, eps=1e-7), randperm batches with
the remainder dropped, validation on a tenth of N each epoch), on random features of the same shape.
usage: torch_head_epoch.py N D C BATCH [EPOCHS] [THREADS] [DROPOUT]   prints one JSON line."""
import json, sys, time
import torch

n, d, c, b = (int(v) for v in sys.argv[1:5])
epochs = int(sys.argv[5]) if len(sys.argv) > 5 else 5
threads = int(sys.argv[6]) if len(sys.argv) > 6 else 2
dropout = float(sys.argv[7]) if len(sys.argv) > 7 else 0.5
torch.set_num_threads(threads)
torch.manual_seed(42)
nval = n // 10
Ftr, Fva = torch.rand(n, d) * 2, torch.rand(nval, d) * 2
ytr, yva = torch.arange(n) % c, torch.arange(nval) % c
head = torch.nn.Sequential(torch.nn.Dropout(dropout), torch.nn.Linear(d, c))
opt = torch.optim.NAdam(head.parameters(), lr=0.004, eps=1e-7, momentum_decay=0.004)
lossf = torch.nn.CrossEntropyLoss()
g = torch.Generator().manual_seed(42)
times = []
for ep in range(epochs):
    t0 = time.time()
    head.train()
    perm = torch.randperm(n, generator=g)
    tot, cor = 0.0, 0
    for i in range(0, n - b + 1, b):
        idx = perm[i:i + b]
        out = head(Ftr[idx]); loss = lossf(out, ytr[idx])
        opt.zero_grad(); loss.backward(); opt.step()
        tot += loss.item() * len(idx); cor += (out.argmax(1) == ytr[idx]).sum().item()
    head.eval()
    with torch.no_grad():
        ov = head(Fva); vl = lossf(ov, yva).item(); va = (ov.argmax(1) == yva).float().mean().item()
    times.append(time.time() - t0)
s = sorted(times)
print(json.dumps(dict(tool="torch", n=n, d=d, classes=c, batch=b, threads=threads, epochs=epochs,
                      epoch_s=round(s[len(s) // 2], 4), min_epoch_s=round(s[0], 4))))
