#!/usr/bin/env bash
# `make demo`: the main job on the demo data (ants vs bees): prep images into Parquet and show
# what was written. Later stages (train, eval, predict) join as they land.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:=$here/../build}"
export BUILD
FTL="$BUILD/ftl"
data=$("$here/demo_data.sh")
out="$BUILD/demo"
mkdir -p "$out"
echo "== ftl prep $data -> $out/dataset"
"$FTL" prep "$data" "$out/dataset" --overwrite
echo
echo "== ftl inspect $out/dataset/train.parquet"
"$FTL" inspect "$out/dataset/train.parquet"
