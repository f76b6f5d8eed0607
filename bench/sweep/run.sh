#!/usr/bin/env bash
# ftl sweep vs the same trials run one after the other with ftl train (same warm feature cache), vs
# successive halving, and vs a PyTorch loop over the trials, on data of Caltech-256's shape:
# bench/sweep/make_data.py makes 257 classes of synthetic 32x32 images and a random-projection
# "backbone" giving 2048 features (no Caltech-256 here), ftl prep splits them (29.6k train, 3.3k val).
# The grid is the issue's: 4 lr x 4 dropout x 2 batch x 2 optimizers = 64 trials. Rounds alternate
# the commands (the machine's speed drifts); prints the medians and ratios.
# usage: bench/sweep/run.sh [ROUNDS=2] [EPOCHS=9] [ETA=3]   (from the repository root, after make)
# env: SWEEP_ONLY=1 times the sweep and its halving only (no sequential ftl train, no PyTorch)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-2}
epochs=${2:-9}
eta=${3:-3}
BUILD=${BUILD:-build}
PY=${PY:-/usr/bin/python3}
FTL="$PWD/$BUILD/ftl"
W="$BUILD/bench-sweep"
mkdir -p "$W"
if [ ! -e "$W/ds/val.parquet" ]; then
    "$PY" bench/sweep/make_data.py "$W/data" 128 6.0
    "$FTL" prep "$W/data/images" "$W/ds" --size 32 --quiet
fi
GRID=(--grid lr=3e-4,1e-3,3e-3,1e-2 --grid dropout=0,0.2,0.4,0.6 --grid batch=16,64 --grid optimizer=nadam,sgd)
BASE=("$W/ds/train.parquet" --val "$W/ds/val.parquet" --backbone "$W/data/projection.onnx" --epochs "$epochs"
      --cache-dir "$W/cache" --quiet)
"$FTL" train "${BASE[@]}" --epochs 1 --out "$W/warm.ftl" --overwrite >/dev/null # fills the feature cache
lscpu | sed -n 's/^Model name: *//p' | head -1 | sed 's/^/CPU: /'
echo "trials: 64, epochs $epochs, 2 threads"
: >"$W/times.txt"
for r in $(seq "$rounds"); do
    t0=$(date +%s.%N)
    "$FTL" sweep "${BASE[@]}" "${GRID[@]}" --out "$W/sweep.ftl" --overwrite >"$W/sweep-$r.out"
    t1=$(date +%s.%N)
    "$FTL" sweep "${BASE[@]}" "${GRID[@]}" --halving "$eta" --out "$W/halving.ftl" --overwrite --trials-dir "$W/halving.trials" \
        >"$W/halving-$r.out"
    t2=$(date +%s.%N)
    [ "${SWEEP_ONLY:-0}" = 1 ] || for lr in 3e-4 1e-3 3e-3 1e-2; do for dr in 0 0.2 0.4 0.6; do for b in 16 64; do for o in nadam sgd; do
        "$FTL" train "${BASE[@]}" --lr $lr --dropout $dr --batch $b --optimizer $o --out "$W/seq.ftl" --overwrite >/dev/null
    done; done; done; done
    t3=$(date +%s.%N)
    best=$(sed -n 's/.*best: trial [0-9]* (val_acc \([0-9.]*\).*/\1/p' "$W/sweep-$r.out")
    hbest=$(sed -n 's/.*best: trial [0-9]* (val_acc \([0-9.]*\).*/\1/p' "$W/halving-$r.out")
    echo "$r $(awk "BEGIN{print $t1 - $t0, $t2 - $t1, $t3 - $t2}") $best $hbest" | tee -a "$W/times.txt"
done
if [ "${SWEEP_ONLY:-0}" = 1 ]; then
    "$PY" -c 'import sys, statistics as s; r = [l.split() for l in open(sys.argv[1])]; a = s.median(float(x[1]) for x in r); b = s.median(float(x[2]) for x in r); print(f"median: ftl sweep {a:.1f} s, halving {b:.1f} s ({b / a:.2f} of the sweep)")' "$W/times.txt"
    exit 0
fi
"$PY" bench/sweep/torch_sweep.py 29555 3341 2048 257 "$epochs" 2 3e-4,1e-3,3e-3,1e-2 0,0.2,0.4,0.6 16,64 nadam,sgd |
    tee "$W/torch.json"
"$PY" - "$W/times.txt" "$W/torch.json" <<'PYEOF'
import json, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
sweep, halving, seq = (statistics.median(float(r[i]) for r in rows) for i in (1, 2, 3))
torch_s = json.load(open(sys.argv[2]))["sweep_s_extrapolated"]
print("round: sweep s, halving s, sequential ftl train s, best val_acc full, best val_acc halving")
for r in rows: print("  " + " ".join(r))
print(f"median: ftl sweep {sweep:.1f} s, sequential ftl train {seq:.1f} s ({seq / sweep:.2f}x), "
      f"halving {halving:.1f} s ({halving / sweep:.2f} of the sweep), PyTorch loop {torch_s:.0f} s extrapolated "
      f"({torch_s / sweep:.1f}x)")
PYEOF
