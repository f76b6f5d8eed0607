#!/usr/bin/env python3
"""Per-layer time profile of an ftl plan from oneDNN's verbose log.

usage: ONEDNN_VERBOSE=1 ftl_bench MODEL --batch B ... > log
       profile.py log [--peak GFLOPS] [--images B]

Cuts the `exec` lines into plan runs (a run ends with the plan's last primitive, the features
reorder), drops the first two runs (warm-up) and takes, for every executed primitive (each chunk
of a per-layer micro-batch counts), the median time over runs: a machine shared with other jobs
adds spikes that medians ignore. Prints each layer shape's ms per image, share, and for
convolutions GFLOP/s (2 x MACs from the problem descriptor) and % of --peak (bench/backbone/peak)."""
import re
import statistics
import sys
from collections import OrderedDict


def conv_macs(desc):
    """MACs of one convolution call from a descriptor like mb2_g1ic64oc256_ih56oh56kh1sh1dh0ph0_iw56..."""
    f = dict((k, int(v)) for k, v in re.findall(r"([a-z]+)(\d+)", desc))
    g = f.get("g", 1)
    return f["mb"] * f["oc"] * f.get("oh", 1) * f.get("ow", 1) * (f["ic"] // g) * f.get("kh", 1) * f.get("kw", 1)


def runs_of(path):
    ex = []
    for line in open(path):
        if line.startswith(("onednn_verbose,exec,", "dnnl_verbose,exec,")):
            p = line.rstrip("\n").split(",")
            if p[3] == "reorder" and "x" not in p[-2]:
                continue  # bias/weight reorders at compile time
            ex.append((p[3], p[4], p[-2], float(p[-1])))
    # compile-time weight reorders land in the first "run", dropped with the warm-up below
    end_key = ex[-1][:3]
    runs, cur = [], []
    for e in ex:
        cur.append(e)
        if e[:3] == end_key:
            runs.append(cur)
            cur = []
    n = len(runs[-1])
    return [r for r in runs[2:] if len(r) == n and [x[:3] for x in r] == [x[:3] for x in runs[-1]]]


def main():
    args = sys.argv[1:]
    peak, images = 574.0, None
    for opt in ("--peak", "--images"):
        if opt in args:
            i = args.index(opt)
            if opt == "--peak":
                peak = float(args[i + 1])
            else:
                images = int(args[i + 1])
            del args[i:i + 2]
    runs = runs_of(args[0])
    if not runs:
        sys.exit("no complete runs in the log")
    steps = [(p, impl, d, statistics.median(r[i][3] for r in runs)) for i, (p, impl, d, _) in enumerate(runs[-1])]
    if images is None:  # images per run: the first primitive's batch x its chunk count
        first = steps[0][2]
        m = re.match(r"mb(\d+)", first)
        mb = int(m.group(1)) if m else int(first.split("x")[0])
        images = mb * sum(1 for s in steps if s[2] == first)
    total = sum(s[3] for s in steps)
    print(f"{len(runs)} runs; median run {total:.2f} ms = {total / images:.3f} ms/image = {1000 * images / total:.1f} "
          f"images/s (primitive time only); peak {peak:.0f} GFLOP/s")
    agg = OrderedDict()
    for prim, impl, desc, ms in steps:
        a = agg.setdefault((prim, desc), [0.0, 0, impl])
        a[0] += ms
        a[1] += 1
    print(f"{'prim':5} {'problem':62} {'implementation':24} {'calls':>5} {'ms/img':>7} {'share':>6} {'%peak':>6}")
    for (prim, desc), (ms, n, impl) in agg.items():
        pk = ""
        if prim == "convolution":
            pk = f"{100 * 2 * conv_macs(desc) * n / (ms * 1e-3) / 1e9 / peak:5.0f}%"
        print(f"{prim[:5]:5} {desc[:62]:62} {impl[:24]:24} {n:5d} {ms / images:7.3f} {100 * ms / total:5.1f}% {pk:>6}")


if __name__ == "__main__":
    main()
