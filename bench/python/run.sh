#!/usr/bin/env bash
# `import ftl` on the PyTorch transfer-learning tutorial's job (ants and bees, frozen backbone, the
# tutorial's SGD settings, 25 epochs): the Python API vs the CLI doing the same steps (the binding's
# overhead), in alternating rounds, and vs PyTorch 1.13 running the tutorial's own script (its
# backbone on every batch of every epoch), all on 2 threads. Prints the medians and ratios.
# usage: bench/python/run.sh [ROUNDS=3] [TORCH_ROUNDS=1] [EPOCHS=25]  (from the repository root, after make python)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
torch_rounds=${2:-1}
epochs=${3:-25}
BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
PY=${PY:-/usr/bin/python3}
FTL="$PWD/$BUILD/ftl"
W="$BUILD/bench-python"
DATA="$SHARED/data/hymenoptera"
M="$SHARED/models/mobilenet_v2_1.0_224_features.onnx"
mkdir -p "$W"
: >"$W/times.txt"
lscpu | sed -n 's/^Model name: *//p' | head -1 | sed 's/^/CPU: /'
echo "hymenoptera, MobileNetV2 (ImageNet weights), $epochs epochs, batch 4, SGD lr 0.001 momentum 0.9, 2 threads"
for r in $(seq "$rounds"); do
    py=$(PYTHONPATH="$BUILD/python" OMP_NUM_THREADS=2 "$PY" bench/python/tutorial_ftl.py "$DATA" "$M" "$W/py" "$epochs")
    rm -rf "$W/cli"
    t0=$(date +%s.%N)
    "$FTL" prep "$DATA" "$W/cli/ds" --size 224 --quiet 2>/dev/null
    t1=$(date +%s.%N)
    "$FTL" train "$W/cli/ds/train.parquet" --val "$W/cli/ds/val.parquet" --backbone "$M" --out "$W/cli/model.ftl" \
        --epochs "$epochs" --batch 4 --optimizer sgd --lr 0.001 --momentum 0.9 --augment flip --quiet >/dev/null 2>&1
    t2=$(date +%s.%N)
    "$FTL" eval "$W/cli/model.ftl" "$W/cli/ds/val.parquet" --quiet >"$W/cli/eval.txt" 2>/dev/null
    t3=$(date +%s.%N)
    echo "$r $py $(awk "BEGIN{print $t1 - $t0, $t2 - $t1, $t3 - $t2, $t3 - $t0}")" | tee -a "$W/times.txt"
done
: >"$W/torch.txt"
for r in $(seq "$torch_rounds"); do
    "$PY" bench/python/tutorial_torch.py "$DATA" "$M" "$SHARED/bench" "$epochs" 2 | tee -a "$W/torch.txt"
done
"$PY" - "$W/times.txt" "$W/torch.txt" <<'PYEOF'
import json, statistics as st, sys
rows = []
for line in open(sys.argv[1]):
    r, rest = line.split(" ", 1)
    j, cli = rest.rsplit("}", 1)
    rows.append((json.loads(j + "}"), [float(x) for x in cli.split()]))
med = lambda xs: st.median(xs)
py_total, cli_total = med(p["total_s"] for p, _ in rows), med(c[3] for _, c in rows)
py_train, cli_train = med(p["train_s"] + p["eval_s"] for p, _ in rows), med(c[1] + c[2] for _, c in rows)
overheads = sorted(p["total_s"] / c[3] - 1 for p, c in rows)
torch_runs = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
print("round: python prep/train/eval/total s, val_acc | CLI prep/train/eval/total s")
for p, c in rows:
    print(f"  {p['prep_s']:.2f} {p['train_s']:.2f} {p['eval_s']:.2f} {p['total_s']:.2f} {p['val_acc']:.4f} | "
          + " ".join(f"{x:.2f}" for x in c))
print(f"median: ftl from Python {py_total:.2f} s (train+eval {py_train:.2f}), CLI {cli_total:.2f} s (train+eval "
      f"{cli_train:.2f}); the binding's overhead {100 * (py_total / cli_total - 1):+.1f}% "
      f"(rounds {', '.join(f'{100 * o:+.1f}%' for o in overheads)})")
if torch_runs:
    t = med(x["total_s"] for x in torch_runs)
    print(f"PyTorch 1.13, the tutorial's script: {t:.1f} s, best val_acc {torch_runs[0]['val_acc']:.4f}; "
          f"ftl from Python {t / py_total:.1f}x faster (val_acc {rows[0][0]['val_acc']:.4f})")
PYEOF
