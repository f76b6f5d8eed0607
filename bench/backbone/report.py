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
    peak = json.load(open(sys.argv[2]))
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
    print(f"peak (measured, {peak['threads']} threads): fp32 FMA {peak['fp32_fma_gflops']:.0f} GFLOP/s, "
          f"AVX512-BF16 {peak['bf16_dp_gflops']:.0f} GFLOP/s\n")
    print("| model | batch | engine mode | img/s (median) | rounds | GFLOP/s | % of peak | vs torch best fp32 | vs torch bf16_cl |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (model, batch) in sorted({(k[0], k[1]) for k in med}, key=lambda x: (x[0], x[1])):
        gflop = 2 * MACS[model] / 1e9
        best32 = max([med.get((model, batch, f"torch {m}"), 0) for m in ("fp32_cf", "fp32_cl", "fp32_jit")])
        bf16 = med.get((model, batch, "torch bf16_cl"), 0)
        for mode in ("ftl fp32", "ftl bf16", "torch fp32_cf", "torch fp32_cl", "torch fp32_jit", "torch bf16_cl"):
            k = (model, batch, mode)
            if k not in med:
                continue
            v = med[k]
            gf = v * gflop
            pk = peak["bf16_dp_gflops"] if "bf16" in mode else peak["fp32_fma_gflops"]
            r32 = f"{v / best32:.2f}x" if best32 and mode.startswith("ftl") else ""
            rbf = f"{v / bf16:.2f}x" if bf16 and mode.startswith("ftl") else ""
            print(f"| {model} | {batch} | {mode} | {v:.3g} | {len(rates[k])} | {gf:.0f} | {100 * gf / pk:.0f}% | {r32} | {rbf} |")


if __name__ == "__main__":
    main()
