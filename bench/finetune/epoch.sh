#!/usr/bin/env bash
# Fine-tuning per epoch (the issue's benchmark): phase 2 of `ftl train` with --fine-tune-last 4 on
# hymenoptera (15 steps of batch 16, then validation over 153 images), on MobileNetV2 @224 and Xception
# @299, 2 threads: ftl with the boundary cache, ftl recomputing the bottom every batch
# (--no-feature-cache), and PyTorch 1.13 the usual way (torch_epoch.py). Each round runs the three in
# turn; ftl's epoch times come from its --log (every epoch after the first of a run, whose time includes
# the plan's first allocations), the peer's from its own clock. One JSON line per measurement, CPU and
# peak first. Also the frozen vs fine-tuned val accuracy of the real MobileNetV2 (--accuracy).
# usage: bench/finetune/epoch.sh [--rounds R] [--threads N] [--models mobilenet_v2,xception] [--accuracy]
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-$PWD/build}
SHARED=${SHARED:-$(cd .. && pwd)/shared}
rounds=2 threads=2 models=mobilenet_v2,xception accuracy=0 epochs=3
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --accuracy) accuracy=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
out=$BUILD/bench-finetune
mkdir -p "$out"
make -s -j2 all >/dev/null
FTL=$BUILD/ftl
cc -O2 -mavx512f -mavx512bf16 -pthread bench/backbone/peak.c -o "$out/peak"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $threads threads; peak $("$out/peak" "$threads")"
[ -f "$out/ds/train.parquet" ] || "$FTL" prep "$SHARED/data/hymenoptera" "$out/ds" --quiet >/dev/null 2>&1
T=$out/ds/train.parquet V=$out/ds/val.parquet

# the median phase-2 epoch time of a run's log, leaving out its first epoch
epoch_times() {
    /usr/bin/python3 - "$1" <<'EOF'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
runs = [i for i, r in enumerate(recs) if r.get("record") == "run"]
e = [r["time_s"] for r in recs[runs[-1]:] if r.get("record") == "epoch"][1:]
print(json.dumps({"epoch_s": e, "median_epoch_s": statistics.median(e)}))
EOF
}

for model in ${models//,/ }; do
    case $model in
    mobilenet_v2) onnx=$SHARED/models/mobilenet_v2_1.0_224_features.onnx size=224
                  peer=(--model mobilenet_v2) ;;
    xception) onnx=$SHARED/models/xception_random.onnx size=299
              peer=(--model onnx --onnx "$onnx" --boundary /block13/Add_output_0) ;;
    *) echo "unknown model $model" >&2; exit 2 ;;
    esac
    C=(--cache-dir "$out/cache-$model" --threads "$threads" --batch 16)
    # phase 1 once (the head to start from), then one run to fill the boundary cache
    [ -f "$out/head-$model.ftl" ] || "$FTL" train "$T" --val "$V" --backbone "$onnx" --epochs 3 "${C[@]}" \
        --out "$out/head-$model.ftl" --overwrite --quiet >/dev/null 2>&1
    FT=(--backbone "$onnx" --fine-tune-only --init "$out/head-$model.ftl" --fine-tune-last 4 --fine-tune-lr 1e-4 "${C[@]}")
    "$FTL" train "$T" --val "$V" "${FT[@]}" --fine-tune-epochs 1 --out "$out/ft-$model.ftl" --overwrite --quiet >/dev/null 2>&1
    for r in $(seq 1 "$rounds"); do
        rm -f "$out/cached.jsonl" "$out/recomputed.jsonl"
        "$FTL" train "$T" --val "$V" "${FT[@]}" --fine-tune-epochs $((epochs + 1)) --out "$out/ft-$model.ftl" --overwrite \
            --log "$out/cached.jsonl" --quiet >/dev/null 2>&1
        echo "{\"round\":$r,\"engine\":\"ftl\",\"boundary_cache\":true,\"model\":\"$model\",$(epoch_times "$out/cached.jsonl" | cut -c2-)"
        "$FTL" train "$T" --val "$V" "${FT[@]}" --fine-tune-epochs $((epochs + 1)) --out "$out/ft-$model.ftl" --overwrite \
            --no-feature-cache --log "$out/recomputed.jsonl" --quiet >/dev/null 2>&1
        echo "{\"round\":$r,\"engine\":\"ftl\",\"boundary_cache\":false,\"model\":\"$model\",$(epoch_times "$out/recomputed.jsonl" | cut -c2-)"
        OMP_NUM_THREADS=$threads /usr/bin/python3 -W ignore bench/finetune/torch_epoch.py "${peer[@]}" --shared "$SHARED" \
            --size "$size" --batch 16 --threads "$threads" --epochs "$epochs" | sed "s/^{/{\"round\":$r,/"
    done
done | tee "$out/epoch-results.jsonl"

# frozen vs fine-tuned: the article's head recipe, then phase 2 at the Keras guide's 1e-5 and at 1e-4
if [ "$accuracy" = 1 ]; then
    onnx=$SHARED/models/mobilenet_v2_1.0_224_features.onnx
    REC=(--backbone "$onnx" --batch 16 --lr 0.004 --dropout 0.5 --epochs 30 --early-stopping monitor=val_acc,patience=3,min_delta=0.001
         --cache-dir "$out/cache-mobilenet_v2" --threads "$threads" --overwrite)
    for lr in 1e-5 1e-4; do
        "$FTL" train "$T" --val "$V" "${REC[@]}" --fine-tune-last 4 --fine-tune-epochs 10 --fine-tune-lr $lr \
            --out "$out/acc-$lr.ftl" 2>/dev/null | grep '^train:' | sed "s/^/fine-tune-lr $lr: /"
    done
fi
