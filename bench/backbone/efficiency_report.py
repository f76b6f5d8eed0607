#!/usr/bin/python3
"""Table for bench/backbone/efficiency.sh: per model, batch and precision the median over rounds of ftl's
images/s, PyTorch's best mode (the fastest mode's median), the ratio, and at batch 16 the plan's share of
the CPU's peak and of its own ceiling (ftl inspect --profile --ceiling, same rounds).
usage: efficiency_report.py results.jsonl"""
import json
import statistics
import sys
from collections import defaultdict


def med(v):
    return statistics.median(v) if v else None


def main():
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
    ftl, torch, prof = defaultdict(list), defaultdict(lambda: defaultdict(list)), defaultdict(list)
    peaks = defaultdict(list)
    for r in rows:
        if "error" in r:
            continue
        if r.get("engine") == "ftl":
            ftl[(r["name"], r["batch"], r["precision"])].append(r["median"])
        elif r.get("engine") == "ftl_profile":
            prof[(r["name"], r["precision"])].append(r)
            peaks["fp32"].append(r["peak"]["fp32_gflops"])
            peaks["bf16"].append(r["peak"].get("bf16_gflops", 0))
        elif r.get("engine") == "torch":
            name = r.get("name") or r.get("model")
            rate = r.get("images_per_s", r.get("median"))
            torch[(name, r["batch"])][r["mode"]].append(rate)
    if peaks["fp32"]:
        print(f"peak (measured in each profile run, median of {len(peaks['fp32'])}): fp32 "
              f"{med(peaks['fp32']):.0f} GFLOP/s (range {min(peaks['fp32']):.0f}-{max(peaks['fp32']):.0f}), "
              f"bf16 {med(peaks['bf16']):.0f}\n")
    print("| model | batch | ftl | img/s | PyTorch best mode | img/s | ftl / PyTorch | % of peak | % of own ceiling |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (name, batch, prec) in sorted(ftl, key=lambda k: (k[0], -k[1], k[2])):
        f = med(ftl[(name, batch, prec)])
        modes = {m: med(v) for m, v in torch.get((name, batch), {}).items() if v}
        best = max(modes.items(), key=lambda kv: kv[1]) if modes else ("-", None)
        peak_cols = "- | -"
        if batch == 16 and prof.get((name, prec)):
            ps = prof[(name, prec)]
            share = [100 * p["gflops"] / p["peak_gflops"] for p in ps]
            # best run vs best times alone, both timed in the same passes (older rounds: median run)
            ceil = [100 * p.get("ceiling_share", p["gflops"] / p["ceiling_gflops"]) for p in ps]
            peak_cols = f"{med(share):.1f} ({min(share):.0f}-{max(share):.0f}) | {med(ceil):.1f} ({min(ceil):.0f}-{max(ceil):.0f})"
        ratio = f"{f / best[1]:.2f}x" if best[1] else "-"
        print(f"| {name} | {batch} | {prec} | {f:.1f} | {best[0]} | {best[1] or 0:.1f} | {ratio} | {peak_cols} |")
    print("\nPyTorch per mode (median img/s):")
    for (name, batch), modes in sorted(torch.items()):
        print(f"  {name} batch {batch}: " + ", ".join(f"{m} {med(v):.1f}" for m, v in sorted(modes.items())))


if __name__ == "__main__":
    main()
