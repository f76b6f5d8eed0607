#!/usr/bin/env bash
# Fine-tuning step time, MobileNetV2 @224 with --fine-tune-last 4, batch 16: ftl's training plan on cached
# boundary tensors (plan_step.c; also the frozen bottom's forward, which the cache saves) vs PyTorch 1.13 doing it
# the usual way (torch_peer.py: the bottom recomputed every batch, the top's backward). Rounds alternate ftl and
# the peer; one JSON line each, with the CPU and its measured peak first.
# usage: bench/finetune/run.sh [--rounds R] [--threads N]
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-$PWD/build}
SHARED=${SHARED:-$(cd .. && pwd)/shared}
rounds=3 threads=$(nproc)
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
out=$BUILD/bench-finetune
mkdir -p "$out"
make -s -j2 all >/dev/null
cc -O2 -std=c17 -D_GNU_SOURCE -fopenmp -Iinclude bench/finetune/plan_step.c "$BUILD/libftl.a" \
    -lturbojpeg -lpng -lprotobuf-c -ldnnl -lgomp -lzstd -lsnappy -lz -lm -lpthread -o "$out/plan_step" $(mpicc --showme:link 2>/dev/null)
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $threads threads"
for r in $(seq 1 "$rounds"); do
    # stderr: the step's profile (per node and work, GFLOP/s) and the CPU's fp32 peak measured in the same process
    OMP_NUM_THREADS=$threads "$out/plan_step" "$SHARED/models/mobilenet_v2_1.0_224_features.onnx" --last 4 --batch 16 \
        --threads "$threads" --reps 3 2>"$out/profile-$r.txt" | sed "s/^{/{\"round\":$r,/"
    grep -E '^(training step|peak)' "$out/profile-$r.txt" >&2
    OMP_NUM_THREADS=$threads /usr/bin/python3 -W ignore bench/finetune/torch_peer.py --batch 16 --threads "$threads" --reps 3 |
        sed "s/^{/{\"round\":$r,/"
done | tee "$out/results.jsonl"
