#!/usr/bin/env python3
"""The article's prep recipe in Pillow (the peer), timed the same way as bench_image.c:
read + decode + convert + thumbnail(LANCZOS) + paste on white + tobytes, per JPEG.
  pillow_recipe.py DIR [--size 299] [--passes 1] [--procs 1] [--split]
Prints one JSON line per timed pass (after one warm-up pass)."""
import argparse
import json
import multiprocessing as mp
import os
import time

from PIL import Image

LANCZOS = getattr(Image, "Resampling", Image).LANCZOS
SIZE = 299


def recipe(path):
    img = Image.open(path).convert("RGB")
    img.thumbnail((SIZE, SIZE), LANCZOS)
    bg = Image.new("RGB", (SIZE, SIZE), (255, 255, 255))
    bg.paste(img, ((SIZE - img.width) // 2, (SIZE - img.height) // 2))
    return bg.tobytes()


def cpu_seconds(pool):
    """CPU seconds of this process and its pool workers (user + system)."""
    total = time.process_time()
    for w in (pool._pool if pool else []):
        try:
            with open(f"/proc/{w.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            pass
    return total


def init(size):
    global SIZE
    SIZE = size


def list_jpegs(root):
    out = []
    for d, _, fs in os.walk(root):
        out += [os.path.join(d, f) for f in fs if f.lower().endswith((".jpg", ".jpeg"))]
    return sorted(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--size", type=int, default=299)
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--split", action="store_true")
    a = ap.parse_args()
    init(a.size)
    files = list_jpegs(a.root)
    for p in files:
        with open(p, "rb") as f:
            f.read()
    if a.split:
        t = [0.0, 0.0, 0.0]
        for _ in range(2):
            t = [0.0, 0.0, 0.0]
            for p in files:
                t0 = time.perf_counter()
                img = Image.open(p).convert("RGB")
                t1 = time.perf_counter()
                img.thumbnail((a.size, a.size), LANCZOS)
                t2 = time.perf_counter()
                bg = Image.new("RGB", (a.size, a.size), (255, 255, 255))
                bg.paste(img, ((a.size - img.width) // 2, (a.size - img.height) // 2))
                bg.tobytes()
                t3 = time.perf_counter()
                t = [t[0] + t1 - t0, t[1] + t2 - t1, t[2] + t3 - t2]
        n = len(files)
        print(json.dumps({"bench": "pillow_split", "images": n, "size": a.size, "decode_ms": round(1e3 * t[0] / n, 4),
                          "thumbnail_ms": round(1e3 * t[1] / n, 4), "paste_ms": round(1e3 * t[2] / n, 4)}))
        return
    pool = mp.Pool(a.procs, initializer=init, initargs=(a.size,)) if a.procs > 1 else None
    run = (lambda: [recipe(p) for p in files]) if pool is None else (lambda: pool.map(recipe, files, chunksize=4))
    run()
    for _ in range(a.passes):
        t0, c0 = time.perf_counter(), cpu_seconds(pool)
        run()
        dt, dc = time.perf_counter() - t0, cpu_seconds(pool) - c0
        print(json.dumps({"bench": "pillow_prep", "images": len(files), "size": a.size, "threads": a.procs,
                          "seconds": round(dt, 4), "images_per_s": round(len(files) / dt, 1),
                          "cpu_seconds": round(dc, 4), "images_per_cpu_s": round(len(files) / dc, 1)}), flush=True)
    if pool:
        pool.close()
        pool.join()


if __name__ == "__main__":
    main()
