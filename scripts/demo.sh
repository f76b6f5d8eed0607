#!/usr/bin/env bash
# `make demo`: the main job on the demo data (ants vs bees), the article's recipe end to end:
# prep the photos into Parquet, train a softmax head on a frozen ImageNet-pretrained MobileNet
# (features cached after one pass), evaluate it, and classify two photos.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:=$here/../build}"
: "${SHARED:=$here/../../shared}"
export BUILD SHARED
FTL="$BUILD/ftl"
BACKBONE=${BACKBONE:-$SHARED/models/mobilenet_v1_1.0_224_embedding.onnx}
data=$("$here/demo_data.sh")
out="$BUILD/demo"
mkdir -p "$out"
if [ ! -f "$BACKBONE" ]; then
    echo "demo: the backbone $BACKBONE is missing (set BACKBONE=path/to/model.onnx)" >&2
    exit 1
fi
start=$(date +%s.%N)
echo "== ftl prep $data $out/dataset"
"$FTL" prep "$data" "$out/dataset" --overwrite
echo
echo "== ftl train (MobileNet v1 features, dropout 0.5, Nadam lr 0.004, batch 16, early stopping on val_acc)"
"$FTL" train "$out/dataset/train.parquet" --val "$out/dataset/val.parquet" --backbone "$BACKBONE" \
    --out "$out/model.ftl" --overwrite --batch 16 --lr 0.004 --dropout 0.5 --epochs 30 \
    --early-stopping monitor=val_acc,patience=3,min_delta=0.001 --log "$out/run.jsonl"
echo
echo "== ftl eval $out/model.ftl $out/dataset/val.parquet"
"$FTL" eval "$out/model.ftl" "$out/dataset/val.parquet" --cache-dir "$out/ftl-feature-cache" --json "$out/eval.json" --overwrite --quiet
echo
ant=$(find "$data/val/ants" -name '*.jpg' | sort | head -1)
bee=$(find "$data/val/bees" -name '*.jpg' | sort | head -1)
echo "== ftl predict $out/model.ftl <an ant> <a bee>"
"$FTL" predict "$out/model.ftl" "$ant" "$bee" --top 2
end=$(date +%s.%N)
echo
/usr/bin/env python3 -c "import json,sys; e=json.load(open(sys.argv[1])); print(f'demo: validation accuracy {e[\"top1\"]:.4f} on {e[\"images\"]} images; whole job {float(sys.argv[3])-float(sys.argv[2]):.1f} s')" \
    "$out/eval.json" "$start" "$end"
