"""bench/prep: images/s of `ftl prep` from the three forms users keep their photos in, on the same
JPEGs: class folders, a Spark binaryFile-like Parquet table (path URI + content, written by DuckDB's
read_blob through the pinned interop tools) and WebDataset shards (KEY.jpg + KEY.cls, 1000 samples a
shard, written by Python's tarfile), beside the article's Pillow recipe on the folders (the peer
script ../shared/bench/peer/bench_prep.py). The photos are hymenoptera's, copied --copies times under
distinct names and with distinct bytes (a JPEG comment segment naming the copy, so a Parquet writer
cannot dictionary-encode identical copies into a small table, and prep reads every copy). Rounds interleave the
four; ftl's time is the whole command (scan, read, decode, thumbnail, Parquet write and fsync), the
peer's its recipe loop alone, so the ratios are conservative for ftl.

usage: /usr/bin/python3 bench/prep/bench_prep_sources.py [--copies 16] [--rounds 3] [--threads 2]
       (env SHARED, BUILD, INTEROP_NODE_DIR)"""
import argparse, io, json, os, statistics, subprocess, sys, tarfile, time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
shared = os.environ.get("SHARED", os.path.join(os.path.dirname(root), "shared"))
build = os.environ.get("BUILD", os.path.join(root, "build"))
ap = argparse.ArgumentParser()
ap.add_argument("--copies", type=int, default=16)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--size", type=int, default=299)
a = ap.parse_args()
src = os.path.join(shared, "data", "hymenoptera")
work = os.path.join(build, "bench-prep-sources")
folders = os.path.join(work, f"x{a.copies}-distinct")
ftl = os.path.join(build, "ftl")

# the photos, copied under distinct names: <split>/<class>/<stem>-c<k>.<ext>
photos = []
for split in ("train", "val"):
    for cls in ("ants", "bees"):
        d = os.path.join(src, split, cls)
        for name in sorted(os.listdir(d)):
            if name.lower().endswith((".jpg", ".jpeg")):
                photos.append((split, cls, os.path.join(d, name)))
if not os.path.isdir(folders):
    for split, cls, path in photos:
        out = os.path.join(folders, split, cls)
        os.makedirs(out, exist_ok=True)
        stem, ext = os.path.splitext(os.path.basename(path))
        with open(path, "rb") as f:
            data = f.read()
        for k in range(a.copies):
            note = f"copy {k}".encode()
            with open(os.path.join(out, f"{stem}-c{k}{ext}"), "wb") as f:  # SOI, COM segment, the rest
                f.write(data[:2] + b"\xff\xfe" + (2 + len(note)).to_bytes(2, "big") + note + data[2:])
files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(folders) for f in fs)
n = len(files)

table = os.path.join(work, f"x{a.copies}-distinct-binaryfile.parquet")
if not os.path.exists(table):
    query = (f"COPY (SELECT 'file:' || filename AS path, last_modified AS modificationTime, size AS length, content "
             f"FROM read_blob('{folders}/*/*/*')) TO '{table}' (FORMAT parquet)")
    subprocess.run(["node", os.path.join(root, "tests", "tools", "duckdb_query.mjs"), query], check=True,
                   stdout=subprocess.DEVNULL)
shards = os.path.join(work, f"x{a.copies}-distinct-shards")
if not os.path.isdir(shards):
    os.makedirs(shards)
    classes = {"ants": 0, "bees": 1}
    tar = None
    for i, path in enumerate(files):
        if i % 1000 == 0:
            if tar: tar.close()
            tar = tarfile.open(os.path.join(shards, f"shard-{i // 1000:06d}.tar"), "w", format=tarfile.GNU_FORMAT)
        key = f"{i:08d}"
        tar.add(path, arcname=key + ".jpg")
        label = str(classes[os.path.basename(os.path.dirname(path))]).encode()
        info = tarfile.TarInfo(key + ".cls")
        info.size = len(label)
        tar.addfile(info, io.BytesIO(label))
    tar.close()

runs = {"folders": [ftl, "prep", folders], "table": [ftl, "prep", table, "--label-from", "path"],
        "shards": [ftl, "prep", shards]}
peer = os.path.join(shared, "bench", "peer", "bench_prep.py")
rows = []
for rnd in range(1, a.rounds + 1):
    for form, cmd in runs.items():
        out = os.path.join(work, "out-" + form)
        t0 = time.perf_counter()
        subprocess.run(cmd + [out, "--size", str(a.size), "--threads", str(a.threads), "--overwrite", "--quiet"], check=True,
                       stderr=subprocess.DEVNULL)
        rows.append({"tool": "ftl " + form, "round": rnd, "images_per_s": n / (time.perf_counter() - t0)})
        print(f"round {rnd}: ftl from {form} {rows[-1]['images_per_s']:.1f} img/s", file=sys.stderr)
    res = subprocess.run(["/usr/bin/python3", peer, folders, "--size", str(a.size), "--procs", str(a.threads), "--reps", "1",
                          "--variants", "recipe"], check=True, capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1"))
    for line in res.stdout.splitlines():
        r = json.loads(line)
        if r.get("bench") == "prep":
            rows.append({"tool": "Pillow recipe", "round": rnd, "images_per_s": r["median"]})
    print(f"round {rnd}: Pillow {rows[-1]['images_per_s']:.1f} img/s", file=sys.stderr)
with open(os.path.join(work, "results.jsonl"), "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
sizes = {"folders": sum(os.path.getsize(p) for p in files), "table": os.path.getsize(table),
         "shards": sum(os.path.getsize(os.path.join(shards, s)) for s in os.listdir(shards))}
print(f"prep of {n} JPEGs (hymenoptera x{a.copies}) at {a.size}x{a.size}, {a.threads} threads, medians of {a.rounds} "
      f"interleaved rounds")
pillow = statistics.median(r["images_per_s"] for r in rows if r["tool"] == "Pillow recipe")
print(f"{'source':<16} {'input MB':>9} {'img/s':>8} {'vs Pillow':>10}  per-round img/s")
for tool in ["ftl folders", "ftl table", "ftl shards", "Pillow recipe"]:
    v = [r["images_per_s"] for r in rows if r["tool"] == tool]
    mb = sizes.get(tool.split()[-1], sizes["folders"]) / 1e6
    print(f"{tool:<16} {mb:>9.0f} {statistics.median(v):>8.1f} {statistics.median(v) / pillow:>10.2f}  "
          + " ".join(f"{x:.1f}" for x in v))
