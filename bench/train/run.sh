#!/usr/bin/env bash
# Head-training epoch time over cached features: ftl vs the PyTorch recipe's loop, interleaved
# (ftl, torch, ftl, torch, ...) because the machine is shared; prints the JSON lines and the
# median ratio per configuration. Run from the repository root after `make`.
# usage: bench/train/run.sh [THREADS] [REPEATS]   (default 2 threads, 3 repeats)
# env: EPOCHS (ftl, default 5), TORCH_EPOCHS (default 3; Debian's torch uses reference BLAS and
# takes tens of seconds per epoch here).
set -euo pipefail
cd "$(dirname "$0")/../.."
threads=${1:-2}
repeats=${2:-3}
BUILD=${BUILD:-build}
PY=${PY:-/usr/bin/python3}
make -s "$BUILD/bench/train/bench_train_epoch"
for shape in "30000 1024 257 16" "30000 1024 257 256" "30000 2048 257 16" "30000 2048 257 256"; do
    for r in $(seq "$repeats"); do
        "$BUILD/bench/train/bench_train_epoch" $shape "${EPOCHS:-5}" "$threads"
        "$PY" bench/train/torch_head_epoch.py $shape "${TORCH_EPOCHS:-3}" "$threads"
    done
done | tee "$BUILD/bench_train.jsonl"
"$PY" - "$BUILD/bench_train.jsonl" <<'PYEOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
keys = sorted({(r["d"], r["batch"]) for r in rows})
for d, b in keys:
    f = statistics.median(r["epoch_s"] for r in rows if r["tool"] == "ftl" and (r["d"], r["batch"]) == (d, b))
    t = statistics.median(r["epoch_s"] for r in rows if r["tool"] == "torch" and (r["d"], r["batch"]) == (d, b))
    print(f"N=30000 D={d} C=257 batch {b}: ftl {f:.3f} s/epoch, torch {t:.3f} s/epoch, torch/ftl {t / f:.1f}x")
PYEOF
