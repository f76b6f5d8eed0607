#!/usr/bin/env bash
# ftl export: the time to export an Xception classifier (and a MobileNetV2 one), and what deploying
# on ONNX Runtime gains or loses: ORT's images/s on the exported MobileNetV2 classifier (uint8 images
# in, preprocessing in the graph; at the backbone's size 224 and with the 299 -> 224 resize) vs ftl
# on the same images and threads (`ftl eval` from the Parquet dataset with a fresh feature cache,
# and `ftl predict` on the JPEG files). 5 runs of each command, medians; prints the CPU and its
# measured fp32 peak.
# usage: bench/export/run.sh [BUILD] [SHARED]
set -u
cd "$(dirname "$0")/../.."
BUILD=$(cd "${1:-build}" && pwd)
SHARED=$(cd "${2:-../shared}" && pwd)
export INTEROP_NODE_DIR=${INTEROP_NODE_DIR:-$BUILD/interop-node}
bash "$SHARED/tools/interop/install.sh" "$INTEROP_NODE_DIR" >/dev/null || exit 1
F="$BUILD/ftl"
T=$(nproc)
out=$BUILD/bench-export
rm -rf "$out"; mkdir -p "$out"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
seconds() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }

cc -O2 -mavx512f -mavx512bf16 -pthread bench/backbone/peak.c -o "$out/peak"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $T threads; peak $("$out/peak" "$T")"

MNV2="$SHARED/models/mobilenet_v2_1.0_224_features.onnx" XCEPTION="$SHARED/models/xception_random.onnx"
for s in 224 299; do
    "$F" prep "$SHARED/data/hymenoptera" "$out/ds$s" --size $s --quiet 2>/dev/null
    "$F" train "$out/ds$s/train.parquet" --val "$out/ds$s/val.parquet" --backbone "$MNV2" --epochs 5 --quiet \
        --out "$out/m$s.ftl" >/dev/null 2>&1
    "$F" export "$out/m$s.ftl" "$out/m$s.onnx" --quiet
    node tests/tools/dataset_images_npy.mjs "$out/ds$s/val.parquet" "$out/v$s.npy" >/dev/null
done
# Xception: a head trained on 10 photos per class is enough to export (the time is the graph's)
for c in ants bees; do
    mkdir -p "$out/small/$c"
    ls "$SHARED/data/hymenoptera/train/$c"/*.jpg | head -10 | while read -r f; do ln -sf "$f" "$out/small/$c/"; done
done
"$F" prep "$out/small" "$out/xds" --val-fraction 0 --quiet 2>/dev/null
"$F" train "$out/xds/train.parquet" --backbone "$XCEPTION" --epochs 1 --quiet --out "$out/x.ftl" >/dev/null 2>&1

for m in x m224; do
    for r in 1 2 3 4 5; do seconds "$F" export "$out/$m.ftl" "$out/e-$m.onnx" --overwrite --quiet; done | median >"$out/export-$m.s"
done
echo "ftl export, Xception classifier (83 MB of weights, 4 external data files read): median $(cat "$out/export-x.s") s"
echo "ftl export, MobileNetV2 classifier: median $(cat "$out/export-m224.s") s"

n=$(ls "$SHARED/data/hymenoptera/val"/*/* | wc -l)
for s in 224 299; do
    for b in 1 32; do
        node bench/export/ort_bench.mjs "$out/m$s.onnx" "$out/v$s.npy" --threads "$T" --batch $b --rounds 5 | tee "$out/ort-$s-b$b.json"
    done
    for r in 1 2 3 4 5; do
        rm -rf "$out/cache"
        seconds "$F" eval "$out/m$s.ftl" "$out/ds$s/val.parquet" --cache-dir "$out/cache" --threads "$T" --quiet
    done | median >"$out/eval-$s.s"
    echo "ftl eval, S=$s, $n images, batch 32, whole command (load, read Parquet, backbone, head): median $(cat "$out/eval-$s.s") s" \
         "= $(echo "$n / $(cat "$out/eval-$s.s")" | bc -l | xargs printf '%.1f') images/s"
done
for r in 1 2 3 4 5; do
    seconds "$F" predict "$out/m224.ftl" "$SHARED/data/hymenoptera/val"/*/* --threads "$T"
done | median >"$out/predict.s"
echo "ftl predict, $n JPEG files (decode, thumbnail 224, backbone, head; one image at a time), whole command:" \
     "median $(cat "$out/predict.s") s = $(echo "$n / $(cat "$out/predict.s")" | bc -l | xargs printf '%.1f') images/s"
