#!/usr/bin/python3
"""Table for bench/backbone/run.sh: median over rounds of each process's median images/s.
usage: report.py results.jsonl peak.json"""
import json
import statistics
import sys
from collections import defaultdict

MACS = {"xception": 8.355355496e9, "mobilenet_v2": 0.299494272e9, "resnet50": 4.087136256e9}


def main():
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
    peaks = [json.loads(l) for l in open(sys.argv[2]) if l.startswith("{")]
    peak = {"threads": peaks[0]["threads"], "fp32_fma_gflops": max(p["fp32_fma_gflops"] for p in peaks),
            "bf16_dp_gflops": max(p["bf16_dp_gflops"] for p in peaks)}
    rates = defaultdict(list)
    for r in rows:
        if "error" in r:
            continue
        if r.get("engine") == "ftl":
            key = (r["name"], r["batch"], "ftl " + r["precision"])
        else:
            key = (r["model"], r["batch"], "torch " + r["mode"])
        rates[key].append(r["median"])
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"peak (measured, best of {len(peaks)} runs, {peak['threads']} threads): fp32 FMA {peak['fp32_fma_gflops']:.0f} "
          f"GFLOP/s, AVX512-BF16 {peak['bf16_dp_gflops']:.0f} GFLOP/s\n")
    print("| model | batch | engine mode | img/s (median) | rounds | GFLOP/s | % of peak | ftl / torch |")
    print("|---|---|---|---|---|---|---|---|")
    for (model, batch) in sorted({(k[0], k[1]) for k in med}, key=lambda x: (x[0], x[1])):
        gflop = 2 * MACS[model] / 1e9
        best32, best32_mode = max((med.get((model, batch, f"torch {m}"), 0), m) for m in ("fp32_cf", "fp32_cl", "fp32_jit"))
        bf16 = med.get((model, batch, "torch bf16_cl"), 0)
        for mode in ("ftl fp32", "ftl bf16", "torch fp32_cf", "torch fp32_cl", "torch fp32_jit", "torch bf16_cl"):
            k = (model, batch, mode)
            if k not in med:
                continue
            v = med[k]
            gf = v * gflop
            pk = peak["bf16_dp_gflops"] if "bf16" in mode else peak["fp32_fma_gflops"]
            ratio = ""
            if mode == "ftl fp32" and best32:
                ratio = f"**{v / best32:.2f}x** vs {best32_mode}"
            elif mode == "ftl bf16" and bf16:
                ratio = f"**{v / bf16:.2f}x** vs bf16_cl"
            print(f"| {model} | {batch} | {mode} | {v:.3g} | {len(rates[k])} | {gf:.0f} | {100 * gf / pk:.0f}% | {ratio} |")


if __name__ == "__main__":
    main()
