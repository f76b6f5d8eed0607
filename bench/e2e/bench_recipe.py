"""bench/e2e: the whole recipe (prep, train, eval) frozen and fine-tuned (--fine-tune-last 4, --augment
flip, MobileNetV2), on hymenoptera repeated K times with distinct paths, at 1x, 4x and 16x that set:
wall time per stage, passes of the backbone (or its frozen bottom) over the data, phase-1 epoch times
(first and last) and each command's peak memory (RSS, from wait4). At 1x also the PyTorch 1.13 peer
doing the same fine-tune recipe the way its tutorials do (bench/e2e/torch_fine_tune.py), same threads.
Writes BUILD/bench-recipe/results.json and a chart of time and memory against the data size
(results.svg). The targets: the fine-tuned recipe <= 2.5x the frozen one, time linear in the data,
peak memory flat.

usage: /usr/bin/python3 bench/e2e/bench_recipe.py [--scales 1,4,16] [--threads 2] [--peer-scales 1]"""
import argparse, json, os, re, shutil, statistics, subprocess, sys, time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
shared = os.environ.get("SHARED", os.path.join(os.path.dirname(root), "shared"))
build = os.environ.get("BUILD", os.path.join(root, "build"))
ap = argparse.ArgumentParser()
ap.add_argument("--scales", default="1,4,16")
ap.add_argument("--peer-scales", default="1")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--epochs", type=int, default=10)
ap.add_argument("--fine-tune-epochs", type=int, default=3)
ap.add_argument("--model", default=os.path.join(shared, "models", "mobilenet_v2_1.0_224_features.onnx"))
ap.add_argument("--results-from", action="append", default=[],
                help="instead of running: the JSON lines an earlier run printed (repeatable), tabled and charted together")
a = ap.parse_args()
work = os.path.join(build, "bench-recipe")
os.makedirs(work, exist_ok=True)
ftl = os.path.join(build, "ftl")
source = os.path.join(shared, "data", "hymenoptera")


def dataset(k):
    """hymenoptera k times, each copy's files under their own names (copies: prep reads a file that
    links lead to once)."""
    out = os.path.join(work, f"images-x{k}")
    if os.path.isdir(out):
        return out
    for split in ("train", "val"):
        for cls in sorted(os.listdir(os.path.join(source, split))):
            os.makedirs(os.path.join(out, split, cls), exist_ok=True)
            for f in sorted(os.listdir(os.path.join(source, split, cls))):
                for c in range(k):
                    shutil.copyfile(os.path.join(source, split, cls, f), os.path.join(out, split, cls, f"c{c}_{f}"))
    return out


def timed(cmd, **kw):
    """(seconds, peak RSS in MiB, stderr) of one command."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, **kw)
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{err[-2000:]}")
    return time.perf_counter() - t0, usage.ru_maxrss / 1024.0, err


def run_ftl(images, fine_tune):
    out = os.path.join(work, "ftl")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    r = {"tool": "ftl", "recipe": "fine-tune" if fine_tune else "frozen"}
    r["prep_s"], r["prep_rss_mib"], _ = timed([ftl, "prep", images, out + "/ds", "--threads", str(a.threads), "--quiet"])
    args = [ftl, "train", out + "/ds/train.parquet", "--val", out + "/ds/val.parquet", "--backbone", a.model, "--out",
            out + "/model.ftl", "--threads", str(a.threads), "--batch", "16", "--lr", "0.004", "--dropout", "0.5",
            "--epochs", str(a.epochs), "--early-stopping", "monitor=val_acc,patience=3,min_delta=0.001", "--augment", "flip",
            "--log", out + "/run.jsonl"]
    if fine_tune:
        args += ["--fine-tune-last", "4", "--fine-tune-epochs", str(a.fine_tune_epochs), "--fine-tune-lr", "1e-4"]
    r["train_s"], r["train_rss_mib"], err = timed(args)
    r["backbone_passes"] = len(re.findall(r"^feature cache: computing", err, re.M))
    m = re.search(r"phase 1's features of \d+ rows .* in ([0-9.]+) s", err)
    r["top_s"] = float(m.group(1)) if m else 0.0
    r["features_s"] = sum(float(x) for x in re.findall(r"^feature cache: \d+ \w+ images in ([0-9.]+) s", err, re.M))
    r["eval_s"], r["eval_rss_mib"], err = timed([ftl, "eval", out + "/model.ftl", out + "/ds/val.parquet", "--cache-dir",
                                                 out + "/ftl-feature-cache", "--threads", str(a.threads), "--json",
                                                 out + "/eval.json", "--quiet"])
    r["eval_reused_cache"] = "reusing" in err
    recs = [json.loads(l) for l in open(out + "/run.jsonl")]
    runs = [i for i, x in enumerate(recs) if x["record"] == "run"]
    p1 = [x for x in recs[runs[0]:(runs[1] if len(runs) > 1 else len(recs))] if x["record"] == "epoch"]
    p2 = [x for x in recs[runs[1]:] if x["record"] == "epoch"] if len(runs) > 1 else []
    r["phase1_epochs"], r["phase1_first_epoch_s"], r["phase1_last_epoch_s"] = len(p1), p1[0]["time_s"], p1[-1]["time_s"]
    if p2:
        r["phase2_epoch_s"] = statistics.median(x["time_s"] for x in p2)
    r["val_acc"] = json.load(open(out + "/eval.json"))["top1"]
    r["total_s"] = r["prep_s"] + r["train_s"] + r["eval_s"]
    r["peak_rss_mib"] = max(r["prep_rss_mib"], r["train_rss_mib"], r["eval_rss_mib"])
    return r


def run_peer(images):
    cmd = ["/usr/bin/python3", os.path.join(here, "torch_fine_tune.py"), images + "/train", images + "/val", "--onnx", a.model,
           "--shared", os.path.join(shared, "bench"), "--threads", str(a.threads), "--epochs", str(a.epochs),
           "--fine-tune-epochs", str(a.fine_tune_epochs)]
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("the PyTorch peer failed")
    r = json.loads(out.strip().splitlines()[-1])
    r.update(recipe="fine-tune", wall_s=time.perf_counter() - t0, peak_rss_mib=usage.ru_maxrss / 1024.0)
    return r


def svg(results):
    """Wall time and peak RSS of ftl's two recipes against the number of images, in the report's style."""
    rows = [r for r in results if r["tool"] == "ftl"]
    xs = sorted({r["images"] for r in rows})
    W, H, L, B, P = 640, 260, 64, 40, 24
    import math
    def nice_step(top):  # a 1-2-5 step giving about 4 ticks
        raw = top / 4
        mag = 10 ** math.floor(math.log10(raw))
        return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    lo, hi = math.log10(min(xs)) - 0.15, math.log10(max(xs)) + 0.15  # the data size on a log axis

    def panel(x0, key, title, unit):
        step = nice_step(max(r[key] for r in rows) * 1.05)
        top = step * math.ceil(max(r[key] for r in rows) * 1.05 / step)
        fx = lambda v: x0 + L + (math.log10(v) - lo) / (hi - lo) * (W / 2 - L - P)
        fy = lambda v: H - B - v / top * (H - B - P - 16)
        s = [f'<text x="{x0 + L}" y="16" font-size="13" font-weight="600">{title}</text>',
             f'<line x1="{x0 + L}" y1="{H - B}" x2="{x0 + W / 2 - P}" y2="{H - B}" stroke="#888"/>',
             f'<line x1="{x0 + L}" y1="{P}" x2="{x0 + L}" y2="{H - B}" stroke="#888"/>']
        for k in range(int(round(top / step)) + 1):
            v = step * k
            s.append(f'<text x="{x0 + L - 6}" y="{fy(v) + 4:.1f}" font-size="10" text-anchor="end">{v:.0f}</text>')
            s.append(f'<line x1="{x0 + L}" y1="{fy(v):.1f}" x2="{x0 + W / 2 - P}" y2="{fy(v):.1f}" stroke="#eee"/>')
        for v in xs:
            s.append(f'<text x="{fx(v):.1f}" y="{H - B + 14}" font-size="10" text-anchor="middle">{v}</text>')
        s.append(f'<text x="{x0 + L + (W / 2 - L - P) / 2}" y="{H - 8}" font-size="10" text-anchor="middle">files (train + val), log scale</text>')
        s.append(f'<text x="{x0 + 14}" y="{(H - B) / 2}" font-size="10" transform="rotate(-90 {x0 + 14} {(H - B) / 2})" text-anchor="middle">{unit}</text>')
        for recipe, colour in (("frozen", "#1f77b4"), ("fine-tune", "#d62728")):
            pts = sorted((r["images"], r[key]) for r in rows if r["recipe"] == recipe)
            s.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="' +
                     " ".join(f"{fx(x):.1f},{fy(y):.1f}" for x, y in pts) + '"/>')
            for x, y in pts:
                s.append(f'<circle cx="{fx(x):.1f}" cy="{fy(y):.1f}" r="3" fill="{colour}"><title>{recipe}, {x} images: {y:.1f} {unit}</title></circle>')
            s.append(f'<text x="{fx(pts[-1][0]) - 4:.1f}" y="{fy(pts[-1][1]) - 6:.1f}" font-size="10" fill="{colour}" text-anchor="end">{recipe}</text>')
        return s
    body = panel(0, "total_s", "Whole recipe: wall time", "seconds") + panel(W / 2, "peak_rss_mib", "Peak memory (RSS)", "MiB")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif">'
            + "".join(body) + "</svg>\n")


cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"CPU: {cpu}, {a.threads} threads; backbone {os.path.basename(a.model)}")
results = []
for path in a.results_from:
    results += [json.loads(l) for l in open(path) if l.startswith("{")]
for k in ([] if a.results_from else [int(x) for x in a.scales.split(",")]):
    images = dataset(k)
    n = sum(len(files) for _, _, files in os.walk(images))
    for fine_tune in (False, True):
        r = run_ftl(images, fine_tune)
        r.update(scale=k, images=n)
        results.append(r)
        print(json.dumps(r), flush=True)
    if str(k) in a.peer_scales.split(","):
        r = run_peer(images)
        r.update(scale=k, images=n)
        results.append(r)
        print(json.dumps(r), flush=True)
print(f"{'scale':>5} {'images':>6} {'recipe':>9} {'tool':>5} {'prep':>6} {'train':>7} {'eval':>5} {'total':>7} {'passes':>6} {'RSS MiB':>8} {'val_acc':>7}")
for r in results:
    if r["tool"] == "ftl":
        print(f"{r['scale']:>5} {r['images']:>6} {r['recipe']:>9} {'ftl':>5} {r['prep_s']:6.1f} {r['train_s']:7.1f} {r['eval_s']:5.1f} "
              f"{r['total_s']:7.1f} {r['backbone_passes']:>6} {r['peak_rss_mib']:8.0f} {r['val_acc']:7.4f}")
    else:
        print(f"{r['scale']:>5} {r['images']:>6} {r['recipe']:>9} {'torch':>5} {r['prep_s']:6.1f} {r['features_s'] + r['phase1_s'] + r['phase2_s']:7.1f} "
              f"{'':>5} {r['wall_s']:7.1f} {r['backbone_passes']:>6} {r['peak_rss_mib']:8.0f} {r['best_val_acc']:7.4f}")
for k in sorted({r["scale"] for r in results}):
    fr = sorted((r for r in results if r["scale"] == k and r["tool"] == "ftl"), key=lambda r: r["recipe"] != "frozen")
    ratio = fr[1]["total_s"] / fr[0]["total_s"]
    peer = [r for r in results if r["scale"] == k and r["tool"] == "torch"]
    extra = f"; PyTorch's fine-tune recipe / ftl's: {peer[0]['wall_s'] / fr[1]['total_s']:.2f}x" if peer else ""
    print(f"{k}x: fine-tuned / frozen wall time {ratio:.2f}x (target <= 2.5x){extra}")
json.dump(results, open(os.path.join(work, "results.json"), "w"), indent=1)
open(os.path.join(work, "results.svg"), "w").write(svg(results))
print("wrote", os.path.join(work, "results.json"), "and results.svg")
