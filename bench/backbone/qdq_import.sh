#!/usr/bin/env bash
# A quantized ONNX model a user brings, run by ftl and by ONNX Runtime (the engine such models are made
# for) on the same machine, threads and batch. The model: real ImageNet MobileNetV2 with a head trained
# on hymenoptera with --precision int8, exported by `ftl export --input float-nchw` as QDQ (50 int8
# convolutions with their calibrated scales, the head as Gemm + Softmax). ftl loads it as any ONNX file
# (its convolutions run in int8 on the model's own integers); ORT runs it with all graph optimisations
# (QDQ fused into its integer kernels). Also the same classifier in fp32 (the float export) in both
# engines. Rounds interleaved, medians and ranges; prints the CPU and ftl's measured peaks.
# usage: bench/backbone/qdq_import.sh [--rounds 3] [--batches 16,1] [--threads N]
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${SHARED:=$(cd .. && pwd)/shared}"
: "${BUILD:=$PWD/build}"
rounds=3 batches=16,1 threads=$(nproc)
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
export INTEROP_NODE_DIR=${INTEROP_NODE_DIR:-$BUILD/interop-node}
bash "$SHARED/tools/interop/install.sh" "$INTEROP_NODE_DIR" >/dev/null
PY=/usr/bin/python3
make -s -j2 all >/dev/null
mkdir -p "$BUILD/bench"
cc -O2 -std=c17 -D_GNU_SOURCE -Iinclude bench/backbone/ftl_bench.c "$BUILD/libftl.a" -lturbojpeg -lpng -lprotobuf-c -ldnnl \
    -lgomp -lzstd -lsnappy -lz -lm -lpthread -L/usr/lib/x86_64-linux-gnu/openmpi/lib -lmpi -ldl -o "$BUILD/bench/ftl_bench"
out=$BUILD/bench/qdq-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
F="$BUILD/ftl" M="$SHARED/models/mobilenet_v2_1.0_224_features.onnx"
"$F" prep "$SHARED/data/hymenoptera" "$out/ds" --size 224 --quiet 2>/dev/null
for p in fp32 int8; do
    "$F" train "$out/ds/train.parquet" --val "$out/ds/val.parquet" --backbone "$M" --epochs 5 --precision $p \
        --cache-dir "$out/cache" --out "$out/$p.ftl" --quiet >/dev/null 2>&1
    "$F" export "$out/$p.ftl" "$out/$p.onnx" --input float-nchw --quiet
done
node tests/tools/dataset_images_npy.mjs "$out/ds/val.parquet" "$out/v.npy" >/dev/null
$PY tests/e2e/export_check.py float_input "$out/v.npy" "$out/vf.npy" 224 224 tf
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $threads threads"
"$F" inspect "$out/int8.onnx" --profile --batch 16 --threads "$threads" --reps 3 --top 1 >"$out/profile.txt" 2>&1 || true
grep -iE '^peak|^total|^int8' "$out/profile.txt" || true
IFS=, read -ra B <<<"$batches"
for r in $(seq 1 "$rounds"); do
    for b in "${B[@]}"; do
        for p in int8 fp32; do
            "$BUILD/bench/ftl_bench" "$out/$p.onnx" --batch "$b" --threads "$threads" --reps 5 |
                sed "s/^{/{\"variant\":\"$p\",\"round\":$r,/" >>"$out/results.jsonl"
            node bench/export/ort_bench.mjs "$out/$p.onnx" "$out/vf.npy" --threads "$threads" --batch "$b" --rounds 5 |
                sed "s/^{/{\"engine\":\"ort\",\"variant\":\"$p\",\"round\":$r,/" >>"$out/results.jsonl"
        done
    done
done
$PY - "$out/results.jsonl" <<'PYEOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def rate(r):
    return r.get("images_per_s") if "images_per_s" in r else r.get("median_images_per_s", r.get("median"))
print("| model | batch | engine | images/s median (range) |")
print("|---|---|---|---|")
table = {}
for r in rows:
    table.setdefault((r["variant"], r["batch"], r["engine"]), []).append(rate(r))
for (m, b, e), v in sorted(table.items()):
    print(f"| {m} | {b} | {e} | {statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f}) |")
for m in ("int8", "fp32"):
    for b in sorted({k[1] for k in table}):
        f, o = table.get((m, b, "ftl")), table.get((m, b, "ort"))
        if f and o:
            print(f"{m} batch {b}: ftl / ORT {statistics.median(f) / statistics.median(o):.2f}x")
PYEOF
echo "results: $out/results.jsonl"
