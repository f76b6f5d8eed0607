#!/usr/bin/env bash
# The embed pass from Parquet (read, 299 -> 224 resize, normalise, backbone, features written) against
# the backbone alone (ftl_bench on the same model, batch and threads), paired round by round.
# The dataset: the shared hymenoptera photos, each linked 15 times under distinct names (~5.9k
# images), prepped at 299 like the article's; the training split (~4k) is embedded.
# usage: bench/backbone/embed_pass.sh [--model MODEL.onnx] [--rounds R] [--threads N] [--precision P]
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-$PWD/build}
SHARED=${SHARED:-$(cd .. && pwd)/shared}
model=$SHARED/models/mobilenet_v2_1.0_224_features.onnx rounds=3 threads=$(nproc) precision=fp32
while [ $# -gt 0 ]; do
    case $1 in
    --model) model=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
out=$BUILD/bench-embed-pass
mkdir -p "$out"
make -s -j2 all >/dev/null
cc -O2 -std=c17 -D_GNU_SOURCE -Iinclude bench/backbone/ftl_bench.c "$BUILD/libftl.a" \
    -lturbojpeg -lpng -lprotobuf-c -ldnnl -lgomp -lzstd -lsnappy -lz -lm -lpthread -o "$out/ftl_bench" \
    $(mpicc --showme:link 2>/dev/null) -ldl
if [ ! -s "$out/data/train.parquet" ]; then
    rm -rf "$out/src" "$out/data"
    for c in ants bees; do
        mkdir -p "$out/src/$c"
        for k in $(seq 1 15); do
            for f in "$SHARED"/data/hymenoptera/{train,val}/$c/*.jpg; do cp --reflink=auto "$f" "$out/src/$c/r${k}_$(basename "$f")"; done
        done
    done
    "$BUILD/ftl" prep "$out/src" "$out/data" --size 299 --val-fraction 0.33 --quiet 2>/dev/null
fi
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $threads threads, $precision, $(basename "$model")"
for r in $(seq 1 "$rounds"); do
    line=$("$BUILD/ftl" embed "$out/data/train.parquet" --backbone "$model" "$out/features.parquet" --overwrite \
        --threads "$threads" --precision "$precision" 2>/dev/null | grep '^embed:')
    # whole command (model load, dataset fingerprint, writing included) and the pass alone (the
    # batches: read, resize, normalise, backbone; = rows / (backbone + waiting for data))
    embed=$(sed -E 's/.*\(([0-9.]+) images\/s\).*/\1/' <<<"$line")
    pass=$(sed -E 's/^embed: ([0-9]+) images.*; backbone ([0-9.]+) s, waiting for data ([0-9.]+) s.*/\1 \2 \3/' <<<"$line" |
        awk '{printf "%.1f", $1 / ($2 + $3)}')
    alone=$(OMP_NUM_THREADS=$threads "$out/ftl_bench" "$model" --batch 16 --precision "$precision" --threads "$threads" --reps 3 |
        sed -E 's/.*"median":([0-9.]+).*/\1/')
    echo "{\"round\":$r,\"embed_images_per_s\":$embed,\"pass_images_per_s\":$pass,\"backbone_images_per_s\":$alone,\"ratio_command\":$(echo "scale=3; $embed / $alone" | bc),\"ratio_pass\":$(echo "scale=3; $pass / $alone" | bc)}"
done | tee "$out/results.jsonl"
