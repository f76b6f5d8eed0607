"""bench/prep: images/s of `ftl prep` against the article's Pillow recipe (the peer script
../shared/bench/peer/bench_prep.py: open, convert RGB, thumbnail LANCZOS, paste on white), on the
same JPEGs, with 1 and 2 cores, interleaved: every round runs ftl then the peer for each count.
ftl's time is the whole command (folder scan, decode, thumbnail, Parquet write and fsync); the
peer's is its recipe loop alone (its warm-up pass excluded), so the ratio is conservative for ftl.

usage: /usr/bin/python3 bench/prep/bench_prep.py [--rounds 5] [--data DIR]   (env SHARED, BUILD)"""
import argparse, json, os, statistics, subprocess, sys, time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
shared = os.environ.get("SHARED", os.path.join(os.path.dirname(root), "shared"))
build = os.environ.get("BUILD", os.path.join(root, "build"))
ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--data", default=os.path.join(shared, "data", "hymenoptera"))
ap.add_argument("--threads", default="1,2")
a = ap.parse_args()
jpegs = sum(1 for d, _, fs in os.walk(a.data) for f in fs if f.lower().endswith((".jpg", ".jpeg")))
out = os.path.join(build, "bench-prep")
os.makedirs(out, exist_ok=True)
peer = os.path.join(shared, "bench", "peer", "bench_prep.py")
rows = []
for rnd in range(1, a.rounds + 1):
    for t in [int(x) for x in a.threads.split(",")]:
        t0 = time.perf_counter()
        subprocess.run([os.path.join(build, "ftl"), "prep", a.data, os.path.join(out, "ds"), "--threads", str(t),
                        "--overwrite", "--quiet"], check=True, stderr=subprocess.DEVNULL)
        rows.append({"tool": "ftl", "threads": t, "round": rnd, "images_per_s": jpegs / (time.perf_counter() - t0)})
        env = dict(os.environ, OMP_NUM_THREADS="1")
        res = subprocess.run(["/usr/bin/python3", peer, a.data, "--size", "299", "--procs", str(t), "--reps", "1",
                              "--variants", "recipe"], check=True, capture_output=True, text=True, env=env)
        for line in res.stdout.splitlines():
            r = json.loads(line)
            if r.get("bench") == "prep":
                rows.append({"tool": "pillow", "threads": t, "round": rnd, "images_per_s": r["median"]})
        print(f"round {rnd} threads {t}: ftl {rows[-2]['images_per_s']:.1f} img/s, Pillow {rows[-1]['images_per_s']:.1f} img/s",
              file=sys.stderr)
with open(os.path.join(out, "results.jsonl"), "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
print(f"prep of {jpegs} JPEGs at 299x299 ({a.data}), medians of {a.rounds} interleaved rounds")
print(f"{'threads':>7} {'ftl img/s':>10} {'Pillow img/s':>13} {'ftl/Pillow':>10}  per-round ratios")
for t in sorted({r["threads"] for r in rows}):
    fr = [r["images_per_s"] for r in rows if r["tool"] == "ftl" and r["threads"] == t]
    pr = [r["images_per_s"] for r in rows if r["tool"] == "pillow" and r["threads"] == t]
    ratios = [x / y for x, y in zip(fr, pr)]
    print(f"{t:>7} {statistics.median(fr):>10.1f} {statistics.median(pr):>13.1f} {statistics.median(ratios):>10.2f}  "
          + " ".join(f"{x:.2f}" for x in ratios))
