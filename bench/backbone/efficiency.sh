#!/usr/bin/env bash
# Backbone efficiency (issue 22): ftl against PyTorch 1.13's best mode on ViT-B/16, Swin-T, ConvNeXt-T,
# MobileNetV2, Xception and ResNet-50, with each model's share of the CPU's peak and of its own ceiling.
# Per round, model and batch, process by process (so the shared machine's drift hits all alike):
#   ftl_bench fp32, and bf16 when this CPU's measured bf16 rate beats its fp32 rate;
#   the peer: bench/transformers/torch_peer.py (fp32 TorchScript-frozen, bf16 where native) for the transformers,
#     $SHARED/bench/peer/bench_backbone.py (fp32_cf, fp32_cl, fp32_jit, and bf16_cl where native) for the CNNs;
#   at batch 16, `ftl inspect --profile --ceiling --json` (peak measured in the same process, the plan's
#     GFLOP/s, every conv and matmul alone = the ceiling) in fp32 (and bf16).
# efficiency_report.py prints the medians over rounds.
# usage: bench/backbone/efficiency.sh [--models LIST] [--batches 16,1] [--rounds R] [--threads N] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${SHARED:=$(cd .. && pwd)/shared}"
: "${BUILD:=$PWD/build}"
models=vit_b_16,swin_t,convnext_tiny,mobilenet_v2,xception,resnet50 batches=16,1 rounds=3 threads=$(nproc) out=
while [ $# -gt 0 ]; do
    case $1 in
    --models) models=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
out=${out:-$BUILD/bench/efficiency-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out" "$BUILD/bench" "$BUILD/bench-transformers"
PEER="$SHARED/bench/peer"
PRIO="$PEER/prio.sh"
PY=/usr/bin/python3

make -s -j2 all >/dev/null
cc -O2 -std=c17 -D_GNU_SOURCE -Iinclude bench/backbone/ftl_bench.c "$BUILD/libftl.a" \
    -lturbojpeg -lpng -lprotobuf-c -ldnnl -lgomp -lzstd -lsnappy -lz -lm -lpthread $(mpicc --showme:link 2>/dev/null) -o "$BUILD/bench/ftl_bench"
$PY -W ignore bench/backbone/export_models.py "$BUILD/bench" "$SHARED" >&2
$PY -W ignore bench/transformers/torch_peer.py "$BUILD/bench-transformers" --models vit_b_16,swin_t,convnext_tiny \
    --export-only >&2

transformer() { case $1 in vit_b_16 | swin_t | convnext_tiny) return 0 ;; esac; return 1; }
model_path() {
    case $1 in
    xception) echo "$SHARED/models/xception_random.onnx" ;;
    vit_b_16 | swin_t | convnext_tiny) echo "$BUILD/bench-transformers/$1.onnx" ;;
    *) echo "$BUILD/bench/$1.onnx" ;;
    esac
}

res="$out/results.jsonl"
: >"$res"
{
    echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) threads=$threads rounds=$rounds"
    lscpu | grep -E "Model name|^CPU\(s\)|CPU family|^Model:" | tr -s ' '
} >"$out/env.txt"
# bf16 runs where this CPU's bf16 rate beats fp32 (what --precision auto decides)
precisions="fp32"
"$BUILD/ftl" inspect "$(model_path mobilenet_v2)" --profile --batch 1 --json 2>/dev/null | $PY -c '
import json, sys
p = json.load(sys.stdin)["peak"]
sys.exit(0 if p.get("bf16_gflops", 0) > p["fp32_gflops"] else 1)' && precisions="fp32 bf16"
bf16_flag=
[ "$precisions" = "fp32 bf16" ] && bf16_flag=--bf16
# PyTorch's bf16 modes only where the CPU has native bf16: emulated (AVX2), bf16 channels-last ran
# MobileNetV2 at 3.8 img/s against 125 in fp32 TorchScript, and Xception's four modes took 20 minutes
peer_modes=fp32_cf,fp32_cl,fp32_jit
[ -n "$bf16_flag" ] && peer_modes=$peer_modes,bf16_cl

for r in $(seq 1 "$rounds"); do
    for m in ${models//,/ }; do
        for b in ${batches//,/ }; do
            for p in $precisions; do
                OMP_NUM_THREADS=$threads "$PRIO" "$BUILD/bench/ftl_bench" "$(model_path "$m")" --batch "$b" \
                    --precision "$p" --threads "$threads" --reps 3 |
                    sed "s/^{/{\"round\":$r,\"name\":\"$m\",/" | tee -a "$res"
                if [ "$b" = 16 ]; then
                    OMP_NUM_THREADS=$threads "$PRIO" "$BUILD/ftl" inspect "$(model_path "$m")" --profile --ceiling \
                        --json --batch 16 --precision "$p" --threads "$threads" 2>/dev/null | $PY -c '
import json, sys
d = json.load(sys.stdin)
print(json.dumps({"round": int(sys.argv[1]), "engine": "ftl_profile", "name": sys.argv[2], "batch": d["batch"],
                  "precision": d["precision"], "peak": d["peak"], "peak_gflops": d["peak_gflops"],
                  "gflops": d["gflops"], "ceiling_gflops": d["ceiling"]["gflops"],
                  "ceiling_share": d["ceiling"]["model_share"]}))' "$r" "$m" | tee -a "$res"
                fi
            done
            if transformer "$m"; then
                OMP_NUM_THREADS=$threads "$PRIO" $PY -W ignore bench/transformers/torch_peer.py "$BUILD/bench-transformers" \
                    --models "$m" --threads "$threads" --batch "$b" $bf16_flag | sed "s/^{/{\"round\":$r,/" | tee -a "$res"
            else
                (cd "$PEER" && OMP_NUM_THREADS=$threads "$PRIO" $PY -W ignore bench_backbone.py --threads "$threads" \
                    --models "$m" --batches "$b" --modes "$peer_modes" --reps 3 --max-rounds 4) \
                    2>/dev/null | grep '^{' | sed "s/^{/{\"round\":$r,\"engine\":\"torch\",/" | tee -a "$res"
            fi
        done
    done
done
$PY bench/backbone/efficiency_report.py "$res" | tee "$out/table.md"
echo "raw results: $res"
