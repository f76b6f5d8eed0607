#!/usr/bin/env python3
"""Per-primitive time profile from oneDNN's verbose log (ONEDNN_VERBOSE=1).

usage: ONEDNN_VERBOSE=1 ftl_bench MODEL ... > log; profile.py log [--peak GFLOPS] [--skip-first N]

Groups the `exec` lines by (primitive, implementation, problem), ignores the first N execs of each
group (warm-up), and prints each group's share of the total time, its mean time per call, and for
convolutions its GFLOP/s and % of the peak (2 x MACs from the problem descriptor)."""
import re
import sys
from collections import OrderedDict


def conv_macs(desc):
    """MACs of one convolution call from a descriptor like mb2_g1ic64oc256_ih56oh56kh1sh1dh0ph0_iw56..."""
    f = dict((k, int(v)) for k, v in re.findall(r"([a-z]+)(\d+)", desc))
    g = f.get("g", 1)
    oh, ow = f.get("oh", 1), f.get("ow", 1)
    return f["mb"] * f["oc"] * oh * ow * (f["ic"] // g) * f.get("kh", 1) * f.get("kw", 1)


def main():
    args = sys.argv[1:]
    peak, skip = 574.0, 8
    if "--peak" in args:
        i = args.index("--peak")
        peak = float(args[i + 1])
        del args[i:i + 2]
    if "--skip-first" in args:
        i = args.index("--skip-first")
        skip = int(args[i + 1])
        del args[i:i + 2]
    groups = OrderedDict()
    for line in open(args[0]):
        if not line.startswith(("onednn_verbose,exec,", "dnnl_verbose,exec,")):
            continue
        parts = line.rstrip("\n").split(",")
        prim, impl, mds, desc, ms = parts[3], parts[4], parts[6], parts[-2], float(parts[-1])
        key = (prim, impl, desc, mds)
        g = groups.setdefault(key, {"n": 0, "ms": 0.0, "seen": 0})
        g["seen"] += 1
        if g["seen"] <= skip:
            continue
        g["n"] += 1
        g["ms"] += ms
    rows = [(k, v) for k, v in groups.items() if v["n"] > 0]
    total = sum(v["ms"] for _, v in rows)
    calls = max(v["n"] for _, v in rows)  # calls of the most frequent primitive ~ micro-batches run
    print(f"total {total:.1f} ms over {calls} calls of the busiest group; peak {peak:.0f} GFLOP/s")
    print(f"{'prim':12} {'impl':22} {'problem':58} {'share':>6} {'ms/call':>8} {'GF/s':>6} {'%peak':>6}")
    by_kind = {}
    for (prim, impl, desc, mds), v in rows:
        per = v["ms"] / v["n"]
        gf = pk = ""
        if prim == "convolution":
            flops = 2 * conv_macs(desc)
            gfs = flops / (per * 1e-3) / 1e9
            gf, pk = f"{gfs:6.0f}", f"{100 * gfs / peak:5.0f}%"
        k = by_kind.setdefault((prim, impl), [0.0, 0])
        k[0] += v["ms"]
        print(f"{prim:12} {impl:22} {desc[:58]:58} {100 * v['ms'] / total:5.1f}% {per:8.3f} {gf:>6} {pk:>6}")
    print("\nby implementation:")
    for (prim, impl), (ms, _) in sorted(by_kind.items(), key=lambda x: -x[1][0]):
        print(f"  {prim:12} {impl:24} {100 * ms / total:5.1f}%")


if __name__ == "__main__":
    main()
