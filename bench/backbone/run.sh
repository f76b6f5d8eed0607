#!/usr/bin/env bash
# Backbone throughput: ftl (fp32, bf16) vs PyTorch 1.13 (the peer: $SHARED/bench/peer/bench_backbone.py,
# modes fp32_cf, fp32_cl, fp32_jit, bf16_cl) on the same machine, threads and batch, interleaved
# process by process (round r runs ftl fp32, ftl bf16, then the peer for one model/batch), so drifts of
# the shared machine hit both. Every process runs through the peer's prio.sh (own autogroup, nice -15).
# Prints a table (median over rounds of each process's median images/s, GFLOP/s, % of the measured
# peak, ratios) and keeps the raw JSON lines.
#
# usage: bench/backbone/run.sh [--models xception,mobilenet_v2,resnet50] [--batches 1,16,64]
#                              [--threads N] [--rounds R] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${SHARED:=$(cd .. && pwd)/shared}"
: "${BUILD:=$PWD/build}"
models=xception,mobilenet_v2,resnet50 batches=1,16,64 threads=$(nproc) rounds=2 out=
while [ $# -gt 0 ]; do
    case $1 in
    --models) models=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
out=${out:-$BUILD/bench/backbone-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out" "$BUILD/bench"
PEER="$SHARED/bench/peer"
PRIO="$PEER/prio.sh"
PY=/usr/bin/python3

make -s -j2 all >/dev/null
cc -O2 -std=c17 -D_GNU_SOURCE -Iinclude bench/backbone/ftl_bench.c "$BUILD/libftl.a" \
    -lturbojpeg -lpng -lprotobuf-c -ldnnl -lgomp -lzstd -lsnappy -lz -lm -lpthread -o "$BUILD/bench/ftl_bench"
cc -O2 -mavx512f -mavx512bf16 -pthread bench/backbone/peak.c -o "$BUILD/bench/peak"
$PY -W ignore bench/backbone/export_models.py "$BUILD/bench" "$SHARED" >&2

model_path() {
    case $1 in
    xception) echo "$SHARED/models/xception_random.onnx" ;;
    *) echo "$BUILD/bench/$1.onnx" ;;
    esac
}

res="$out/results.jsonl"
: >"$res"
{
    echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) threads=$threads rounds=$rounds"
    lscpu | grep -E "Model name|^CPU\(s\)" | tr -s ' '
} >"$out/env.txt"
measure_peak() { for _ in 1 2 3; do "$PRIO" "$BUILD/bench/peak" "$threads" 10000000; done >>"$out/peak.json"; }
: >"$out/peak.json"
measure_peak

for m in ${models//,/ }; do
    for b in ${batches//,/ }; do
        for r in $(seq 1 "$rounds"); do
            for p in fp32 bf16; do
                OMP_NUM_THREADS=$threads "$PRIO" "$BUILD/bench/ftl_bench" "$(model_path "$m")" --batch "$b" \
                    --precision "$p" --threads "$threads" --reps 3 |
                    sed "s/^{/{\"round\":$r,\"name\":\"$m\",/" | tee -a "$res"
            done
            (cd "$PEER" && OMP_NUM_THREADS=$threads "$PRIO" $PY -W ignore bench_backbone.py --threads "$threads" \
                --models "$m" --batches "$b" --modes fp32_cf,fp32_cl,fp32_jit,bf16_cl --reps 3 --max-rounds 4 \
                --skip fp32_cf:64) 2>/dev/null | grep '^{' | sed "s/^{/{\"round\":$r,\"engine\":\"torch\",/" | tee -a "$res"
        done
    done
done
measure_peak  # again at the end: the report uses the best run (the clock varies with the host's load)
$PY bench/backbone/report.py "$res" "$out/peak.json" | tee "$out/table.md"
echo "raw results: $res"
