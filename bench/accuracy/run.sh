#!/usr/bin/env bash
# The accuracy tools at cached-feature cost (issue 50), on the largest real labelled photo set here
# (hymenoptera: 245 train / 153 val, ants vs bees) with the real ImageNet MobileNetV2: val accuracy
# (last epoch, no early stopping, no restore of the best epoch, so every tool is judged alike) and
# wall time of the article's head recipe alone and with each tool, and of the combination, over
# SEEDS seeds; ftl train on a warm feature cache (both orientations of train and val cached once,
# that one-off cost printed apart) vs PyTorch 1.13 doing the same on the same features
# (bench/accuracy/torch_tools.py: only its head loop is timed). Same threads.
# usage: bench/accuracy/run.sh [SEEDS=5] [EPOCHS=10] [THREADS=2]   (from the repository root, after make)
set -euo pipefail
cd "$(dirname "$0")/../.."
seeds=${1:-5}
epochs=${2:-10}
threads=${3:-2}
BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
PY=${PY:-/usr/bin/python3}
FTL="$PWD/$BUILD/ftl"
W="$BUILD/bench-accuracy"
MODEL="$SHARED/models/mobilenet_v2_1.0_224_features.onnx"
export INTEROP_NODE_DIR=${INTEROP_NODE_DIR:-$PWD/$BUILD/interop-node}
mkdir -p "$W"
[ -e "$W/ds/val.parquet" ] || "$FTL" prep "$SHARED/data/hymenoptera" "$W/ds" --size 224 --quiet 2>/dev/null
[ -e "$W/train.npy" ] || node tests/tools/dataset_images_npy.mjs "$W/ds/train.parquet" "$W/train.npy" >/dev/null
[ -e "$W/val.npy" ] || node tests/tools/dataset_images_npy.mjs "$W/ds/val.parquet" "$W/val.npy" >/dev/null
lscpu | sed -n 's/^Model name: *//p' | head -1 | sed 's/^/CPU: /'
RECIPE=("$W/ds/train.parquet" --val "$W/ds/val.parquet" --backbone "$MODEL" --batch 16 --lr 0.004 --dropout 0.5
        --epochs "$epochs" --no-restore-best --threads "$threads" --cache-dir "$W/cache" --quiet)
rm -rf "$W/cache"
t0=$(date +%s.%N)
"$FTL" train "${RECIPE[@]}" --epochs 1 --augment flip --tta flip --out "$W/warm.ftl" --overwrite >/dev/null
t1=$(date +%s.%N)
echo "feature cache, once: train and val, both orientations ($((245 * 2 + 153 * 2)) backbone passes): $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s"
CONFIGS=("recipe:" "label_smoothing_0.1:ls=0.1" "cosine:cosine=1" "augment_flip:augment=1" "tta_flip:tta=1"
         "combination:ls=0.1,cosine=1,augment=1,tta=1" "cosine_tta:cosine=1,tta=1")
flags() {
    case $1 in
    recipe) ;;
    label_smoothing_0.1) echo --label-smoothing 0.1 ;;
    cosine) echo --lr-schedule cosine ;;
    augment_flip) echo --augment flip ;;
    tta_flip) echo --tta flip ;;
    combination) echo --label-smoothing 0.1 --lr-schedule cosine --augment flip --tta flip ;;
    cosine_tta) echo --lr-schedule cosine --tta flip ;;
    esac
}
: >"$W/ftl.jsonl"
for spec in "${CONFIGS[@]}"; do
    name=${spec%%:*}
    for s in $(seq "$seeds"); do
        rm -f "$W/m.jsonl"
        a=$(date +%s.%N)
        # shellcheck disable=SC2046
        "$FTL" train "${RECIPE[@]}" $(flags "$name") --seed "$s" --out "$W/m.ftl" --log "$W/m.jsonl" --overwrite >/dev/null
        b=$(date +%s.%N)
        "$PY" -c 'import json, sys; e = [json.loads(l) for l in open(sys.argv[1]) if "\"record\":\"epoch\"" in l]
print(json.dumps(dict(name=sys.argv[2], seed=int(sys.argv[3]), val_acc=e[-1]["val_acc"], seconds=float(sys.argv[4]),
                      head_seconds=sum(r["time_s"] for r in e))))' \
            "$W/m.jsonl" "$name" "$s" "$(awk "BEGIN{print $b - $a}")" >>"$W/ftl.jsonl"
    done
done
PYTHONPATH="$PWD/$BUILD/python" "$PY" bench/accuracy/torch_tools.py "$W/ds" "$MODEL" "$W/train.npy" "$W/val.npy" "$epochs" "$seeds" "$threads" \
    "${CONFIGS[@]}" >"$W/torch.jsonl"
"$PY" - "$W/ftl.jsonl" "$W/torch.jsonl" "$seeds" <<'PYEOF'
import json, statistics as st, sys
ftl = [json.loads(l) for l in open(sys.argv[1])]
torch = {r["name"]: r for r in map(json.loads, open(sys.argv[2]))}
print(f"val accuracy over {sys.argv[3]} seeds: mean [min, max]; seconds: median per run")
print("ftl train s: the whole command (backbone load, cache lookup, training, model file); ftl head s and torch")
print("head s: the epochs (training and validation), in the log's time_s")
print(f"{'tool':22} {'ftl val_acc':>24} {'ftl train s':>11} {'ftl head s':>10} {'torch val_acc':>24} {'torch head s':>12}")
for name in torch:
    a = [r["val_acc"] for r in ftl if r["name"] == name]
    s = [r["seconds"] for r in ftl if r["name"] == name]
    h = [r["head_seconds"] for r in ftl if r["name"] == name]
    ta, ts = torch[name]["val_acc"], torch[name]["seconds"]
    f = lambda v: f"{st.mean(v):.4f} [{min(v):.4f}, {max(v):.4f}]"
    print(f"{name:22} {f(a):>24} {st.median(s):>11.3f} {st.median(h):>10.4f} {f(ta):>24} {st.median(ts):>12.3f}")
PYEOF
