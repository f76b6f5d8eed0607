"""bench/e2e: wall time from image folders to a trained, evaluated model on hymenoptera with the
MobileNet v1 backbone (the same ONNX file for both), ftl against the PyTorch recipe
(../shared/bench/torch_recipe.py: Pillow prep, frozen backbone, Dropout + Linear, NAdam with Keras'
momentum schedule, early stopping on val_acc with restore-best), same threads, batch, learning
rate, dropout, epochs and early stopping. Peer variants: the article's way (backbone recomputed
every epoch) and --cache-features. ftl: prep + train (feature cache computed from scratch each
run) + eval. Runs are interleaved (ftl, peer, peer-cached, ftl, ...); medians and ratios.

usage: /usr/bin/python3 bench/e2e/bench_e2e.py [--rounds 3] [--threads 2]   (env SHARED, BUILD)"""
import argparse, json, os, re, shutil, statistics, subprocess, sys, time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
shared = os.environ.get("SHARED", os.path.join(os.path.dirname(root), "shared"))
build = os.environ.get("BUILD", os.path.join(root, "build"))
ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--model", default=os.path.join(shared, "models", "mobilenet_v1_1.0_224_embedding.onnx"))
ap.add_argument("--skip-recompute", action="store_true", help="leave out the slow per-epoch peer")
a = ap.parse_args()
data = os.path.join(shared, "data", "hymenoptera")
work = os.path.join(build, "bench-e2e")
os.makedirs(work, exist_ok=True)
ftl = os.path.join(build, "ftl")
recipe = ["--batch", "16", "--lr", "0.004", "--dropout", "0.5", "--epochs", "30"]
env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))


def run_ftl():
    shutil.rmtree(os.path.join(work, "ftl"), ignore_errors=True)
    out = os.path.join(work, "ftl")
    t0 = time.perf_counter()
    subprocess.run([ftl, "prep", data, out + "/ds", "--threads", str(a.threads), "--quiet"], check=True, stderr=subprocess.DEVNULL)
    tr = subprocess.run([ftl, "train", out + "/ds/train.parquet", "--val", out + "/ds/val.parquet", "--backbone", a.model,
                         "--out", out + "/model.ftl", "--threads", str(a.threads), *recipe,
                         "--early-stopping", "monitor=val_acc,patience=3,min_delta=0.001", "--log", out + "/run.jsonl"],
                        check=True, capture_output=True, text=True)
    subprocess.run([ftl, "eval", out + "/model.ftl", out + "/ds/val.parquet", "--cache-dir", out + "/ftl-feature-cache",
                    "--threads", str(a.threads), "--json", out + "/eval.json", "--quiet"], check=True, capture_output=True)
    total = time.perf_counter() - t0
    ev = json.load(open(out + "/eval.json"))
    logs = [r for r in map(json.loads, open(out + "/run.jsonl")) if r.get("record") == "epoch"]
    epochs = len(logs)
    epoch_s = statistics.median(l["time_s"] for l in logs)
    return {"tool": "ftl", "total_s": total, "val_acc": ev["top1"], "epochs": epochs, "epoch_s": epoch_s}


def run_peer(cached):
    args = ["/usr/bin/python3", os.path.join(shared, "bench", "torch_recipe.py"), data + "/train", data + "/val", "--onnx", a.model,
            "--threads", str(a.threads), "--batch", "16", "--lr", "0.004", "--dropout", "0.5", "--epochs", "30"]
    if cached:
        args.append("--cache-features")
    t0 = time.perf_counter()
    res = subprocess.run(args, check=True, capture_output=True, text=True, env=env)
    total = time.perf_counter() - t0
    last = json.loads(res.stdout.strip().splitlines()[-1])
    return {"tool": "torch-cached" if cached else "torch-recompute", "total_s": total, "val_acc": last["best_val_acc"],
            "epochs": last["epochs"]}


rows = []
for rnd in range(a.rounds):
    for fn in ([run_ftl, lambda: run_peer(True)] + ([] if a.skip_recompute else [lambda: run_peer(False)])):
        r = fn()
        r["round"] = rnd + 1
        rows.append(r)
        print(json.dumps(r), file=sys.stderr, flush=True)
with open(os.path.join(work, "results.jsonl"), "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
print(f"hymenoptera end to end (prep + train with early stopping + eval), MobileNet v1 1.0 224, {a.threads} threads, "
      f"medians of {a.rounds} interleaved rounds")
ftl_t = statistics.median(r["total_s"] for r in rows if r["tool"] == "ftl")
print(f"{'tool':<18} {'total s':>8} {'val_acc':>8} {'epochs':>7} {'ftl speed-up':>13}")
for tool in ["ftl", "torch-cached", "torch-recompute"]:
    rs = [r for r in rows if r["tool"] == tool]
    if not rs:
        continue
    t = statistics.median(r["total_s"] for r in rs)
    print(f"{tool:<18} {t:>8.1f} {statistics.median(r['val_acc'] for r in rs):>8.4f} "
          f"{statistics.median(r['epochs'] for r in rs):>7.0f} {t / ftl_t:>12.1f}x")
fe = [r["epoch_s"] for r in rows if r["tool"] == "ftl"]
print(f"ftl: one epoch from the feature cache (244 images): {statistics.median(fe) * 1000:.2f} ms")
