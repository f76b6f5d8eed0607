"""bench/prep: datasets that keep the JPEG (`ftl prep --keep-encoded`) against pixel datasets.

Two photo sets: hymenoptera (397 large photos, ~132 KB each) and a Caltech-like set built here from
them (each photo scaled by Pillow to 300 px on its long side and saved as JPEG quality 85, ~25 KB,
copied --copies times with distinct bytes: a JPEG comment names the copy). For each set and form:
bytes on disk; the streaming loader's rows/s on 1 and 2 readers (bench_loader: decode + thumbnail
per core for the encoded form, a copy for pixels) beside Pillow's recipe on 1 process (the peer:
the article's decode + thumbnail, ../shared/bench/peer/bench_prep.py); the backbone's own rate
(ftl embed of the pixel dataset); the frozen recipe's wall time (a fresh feature cache: the first
pass decodes, later epochs read the cache) and `--no-feature-cache` streaming epochs, both with
the default loader threads. Rounds interleave the forms; medians are printed.

usage: /usr/bin/python3 bench/prep/bench_keep_encoded.py [--copies 4] [--rounds 3] [--backbone ONNX]
       (env SHARED, BUILD)"""
import argparse, io, json, os, shutil, statistics, subprocess, sys, time

from PIL import Image

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
shared = os.environ.get("SHARED", os.path.join(os.path.dirname(root), "shared"))
build = os.environ.get("BUILD", os.path.join(root, "build"))
ap = argparse.ArgumentParser()
ap.add_argument("--copies", type=int, default=4)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--epochs", type=int, default=5)
ap.add_argument("--backbone", default=os.path.join(shared, "models", "mobilenet_v2_1.0_224_features.onnx"))
a = ap.parse_args()
ftl = os.path.join(build, "ftl")
src = os.path.join(shared, "data", "hymenoptera")
work = os.path.join(build, "bench-keep-encoded")
os.makedirs(work, exist_ok=True)
subprocess.run(["make", "-s", "-C", root, os.path.join(build, "bench", "loader", "bench_loader")], check=True)
bench_loader = os.path.join(build, "bench", "loader", "bench_loader")

# the Caltech-like set: small JPEGs, distinct bytes per copy
small = os.path.join(work, f"small-x{a.copies}")
if not os.path.isdir(small):
    for split in ("train", "val"):
        for cls in ("ants", "bees"):
            d = os.path.join(src, split, cls)
            out = os.path.join(small + ".tmp", split, cls)
            os.makedirs(out, exist_ok=True)
            for name in sorted(os.listdir(d)):
                if not name.lower().endswith((".jpg", ".jpeg")):
                    continue
                img = Image.open(os.path.join(d, name)).convert("RGB")
                img.thumbnail((300, 300), Image.LANCZOS)
                buf = io.BytesIO()
                img.save(buf, "JPEG", quality=85)
                data = buf.getvalue()
                stem = os.path.splitext(name)[0]
                for k in range(a.copies):
                    note = f"copy {k}".encode()
                    with open(os.path.join(out, f"{stem}-c{k}.jpg"), "wb") as f:
                        f.write(data[:2] + b"\xff\xfe" + (2 + len(note)).to_bytes(2, "big") + note + data[2:])
    os.rename(small + ".tmp", small)
sets = {"hymenoptera": src, f"caltech-like x{a.copies}": small}


def run(cmd, **kw):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    return time.perf_counter() - t0


def files_bytes(folder):
    return sum(os.path.getsize(os.path.join(folder, f)) for f in ("train.parquet", "val.parquet"))


def loader_epoch(path, threads):
    out = subprocess.run([bench_loader, path, "--threads", str(threads), "--epochs", "1", "--batch", "32"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def loader_rate(path, threads):
    return loader_epoch(path, threads)["rows_per_s"]


res = {}  # (set, measure) -> [values]
def add(key, v):
    res.setdefault(key, []).append(v)


info = {}
for name, folder in sets.items():
    images = sum(len(fs) for _, _, fs in os.walk(folder))
    photo_bytes = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(folder) for f in fs)
    info[name] = (images, photo_bytes)
    for form, flags in (("pixels", []), ("encoded", ["--keep-encoded"])):
        out = os.path.join(work, f"{name.split()[0]}-{form}")
        if not os.path.isdir(out):
            run([ftl, "prep", folder, out, "--quiet"] + flags)
        info[(name, form)] = files_bytes(out)
    info[(name, "train rows")] = loader_epoch(os.path.join(work, f"{name.split()[0]}-pixels", "train.parquet"), 1)["rows"]

for rnd in range(a.rounds):
    for name, folder in sets.items():
        for form in ("pixels", "encoded"):
            ds = os.path.join(work, f"{name.split()[0]}-{form}")
            train, val = os.path.join(ds, "train.parquet"), os.path.join(ds, "val.parquet")
            for t in (1, 2):
                add((name, form, f"loader {t}"), loader_rate(train, t))
            if form == "pixels":  # the backbone alone: pixel rows cost a copy
                secs = run([ftl, "embed", train, "--backbone", a.backbone, os.path.join(work, "f.parquet"), "--overwrite",
                            "--quiet"])
                add((name, "backbone"), info[(name, "train rows")] / secs)
            cache = os.path.join(work, "cache")
            shutil.rmtree(cache, ignore_errors=True)
            add((name, form, "frozen"), run([ftl, "train", train, "--val", val, "--backbone", a.backbone, "--epochs",
                                             str(a.epochs), "--cache-dir", cache, "--out", os.path.join(work, "m.ftl"),
                                             "--overwrite", "--quiet"]))
            add((name, form, "streaming"), run([ftl, "train", train, "--val", val, "--backbone", a.backbone, "--epochs", "2",
                                                "--no-feature-cache", "--out", os.path.join(work, "m.ftl"), "--overwrite",
                                                "--quiet"]))
            if form == "encoded":  # the default (a reader per core) against one reader
                add((name, form, "streaming 1 reader"), run([ftl, "train", train, "--val", val, "--backbone", a.backbone,
                                                             "--epochs", "2", "--no-feature-cache", "--loader-threads", "1",
                                                             "--out", os.path.join(work, "m.ftl"), "--overwrite", "--quiet"]))
        peer = subprocess.run(["/usr/bin/python3", os.path.join(shared, "bench", "peer", "bench_prep.py"), folder, "--size",
                               "299", "--procs", "1", "--reps", "1", "--variants", "recipe"], check=True, capture_output=True,
                              text=True, env=dict(os.environ, OMP_NUM_THREADS="1")).stdout
        for line in peer.splitlines():
            r = json.loads(line)
            if r.get("bench") == "prep":
                add((name, "pillow"), r["median"])
    print(f"round {rnd + 1} done", file=sys.stderr)

med = lambda k: statistics.median(res[k])
print(f"backbone {os.path.basename(a.backbone)}, 2 threads; medians of {a.rounds} interleaved rounds")
for name in sets:
    images, photo_bytes = info[name]
    print(f"\n{name}: {images} files, {photo_bytes / 1e6:.1f} MB of photos ({photo_bytes / images / 1e3:.0f} KB each)")
    print(f"  bytes on disk: pixels {info[(name, 'pixels')] / 1e6:.1f} MB, encoded {info[(name, 'encoded')] / 1e6:.1f} MB "
          f"({info[(name, 'encoded')] / info[(name, 'pixels')]:.2f}x)")
    print(f"  Pillow recipe, 1 process: {med((name, 'pillow')):.0f} images/s")
    for form in ("pixels", "encoded"):
        print(f"  {form:8} loader rows/s: 1 reader {med((name, form, 'loader 1')):.0f}, 2 readers {med((name, form, 'loader 2')):.0f}"
              f"; frozen recipe {med((name, form, 'frozen')):.2f} s ({a.epochs} epochs; per round "
              + " ".join(f"{x:.2f}" for x in res[(name, form, 'frozen')])
              + f"); streaming 2 epochs {med((name, form, 'streaming')):.2f} s (per round "
              + " ".join(f"{x:.2f}" for x in res[(name, form, 'streaming')]) + ")")
    print(f"  encoded, streaming 2 epochs with --loader-threads 1: {med((name, 'encoded', 'streaming 1 reader')):.2f} s (per round "
          + " ".join(f"{x:.2f}" for x in res[(name, 'encoded', 'streaming 1 reader')]) + ")")
    print(f"  backbone alone (embed of the {info[(name, 'train rows')]} pixel train rows): {med((name, 'backbone')):.0f} images/s")
