#!/usr/bin/env bash
# The accuracy cost of int8 on real weights, ftl beside PyTorch, on the same photos: the shared ImageNet
# MobileNetV2 on hymenoptera prepped at 224, calibrated on the 244 training images, features of the 153
# val images. ftl: `ftl embed --precision int8` vs fp32 (its features read back with DuckDB). PyTorch
# 1.13: FX static int8 of the same weights (torch_int8_accuracy.py), against its own fp32. Prints each
# engine's mean and lowest cosine of int8 to fp32 features.
# usage: bench/backbone/int8_accuracy.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${SHARED:=$(cd .. && pwd)/shared}"
: "${BUILD:=$PWD/build}"
export INTEROP_NODE_DIR=${INTEROP_NODE_DIR:-$BUILD/interop-node}
bash "$SHARED/tools/interop/install.sh" "$INTEROP_NODE_DIR" >/dev/null
PY=/usr/bin/python3
make -s -j2 all >/dev/null
out=$BUILD/bench/int8-accuracy
rm -rf "$out"; mkdir -p "$out"
M="$SHARED/models/mobilenet_v2_1.0_224_features.onnx"
"$BUILD/ftl" prep "$SHARED/data/hymenoptera" "$out/ds" --size 224 --quiet 2>/dev/null
"$BUILD/ftl" embed "$out/ds/val.parquet" --backbone "$M" "$out/f32.parquet" --quiet 2>/dev/null
"$BUILD/ftl" embed "$out/ds/val.parquet" --backbone "$M" "$out/i8.parquet" --precision int8 \
    --calibration "$out/ds/train.parquet" --quiet 2>/dev/null
for p in f32 i8; do
    node tests/tools/duckdb_query.mjs "SELECT hex(features) h FROM read_parquet('$out/$p.parquet')" >"$out/$p.json"
done
$PY - "$out/f32.json" "$out/i8.json" <<'PYEOF'
import json, sys
import numpy as np
a, b = ([np.frombuffer(bytes.fromhex(r["h"]), dtype="<f4").astype(np.float64) for r in json.load(open(p))] for p in sys.argv[1:])
c = np.array([x @ y / np.linalg.norm(x) / np.linalg.norm(y) for x, y in zip(a, b)])
print(json.dumps({"engine": "ftl", "method": "percentile-99.99 per tensor, weights per channel, stem fp32",
                  "val_images": len(c), "mean_cosine": round(c.mean(), 5), "lowest_cosine": round(c.min(), 5)}))
PYEOF
node tests/tools/dataset_images_npy.mjs "$out/ds/train.parquet" "$out/train.npy" >/dev/null
node tests/tools/dataset_images_npy.mjs "$out/ds/val.parquet" "$out/val.npy" >/dev/null
OMP_NUM_THREADS=2 $PY -W ignore bench/backbone/torch_int8_accuracy.py "$M" "$out/train.npy" "$out/val.npy"
