#!/usr/bin/env bash
# Transformer backbones (ViT-B/16, Swin-T, ConvNeXt-T at 224, batch 16): ftl fp32 (and bf16 where the CPU
# has AVX512-BF16, or with --bf16 anyway: then both engines emulate it) vs PyTorch 1.13 (torch_peer.py: fp32 TorchScript-frozen, bf16 autocast channels-last),
# same threads, with the CPU's measured fp32 peak. Rounds alternate ftl and the peer.
# usage: bench/transformers/run.sh [--models vit_b_16,swin_t,convnext_tiny] [--threads N] [--rounds R] [--bf16]
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-$PWD/build}
models=vit_b_16,swin_t,convnext_tiny threads=$(nproc) rounds=2 bf16=
while [ $# -gt 0 ]; do
    case $1 in
    --models) models=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --bf16) bf16=--bf16; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
out=$BUILD/bench-transformers
mkdir -p "$out"
make -s -j2 all >/dev/null
cc -O2 -std=c17 -D_GNU_SOURCE -Iinclude bench/backbone/ftl_bench.c "$BUILD/libftl.a" \
    -lturbojpeg -lpng -lprotobuf-c -ldnnl -lgomp -lzstd -lsnappy -lz -lm -lpthread -o "$out/ftl_bench" $(mpicc --showme:link 2>/dev/null)
cc -O2 -mavx512f -mavx512bf16 -pthread bench/backbone/peak.c -o "$out/peak"
grep -q avx512_bf16 /proc/cpuinfo && bf16=--bf16
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $threads threads; peak $("$out/peak" "$threads")"
for r in $(seq 1 "$rounds"); do
    OMP_NUM_THREADS=$threads /usr/bin/python3 -W ignore bench/transformers/torch_peer.py "$out" --models "$models" \
        --threads "$threads" --batch 16 $bf16 | sed "s/^{/{\"round\":$r,/"
    for m in ${models//,/ }; do
        for p in fp32 ${bf16:+bf16}; do
            OMP_NUM_THREADS=$threads "$out/ftl_bench" "$out/$m.onnx" --batch 16 --precision $p --threads "$threads" --reps 3 |
                sed "s/^{/{\"round\":$r,\"engine\":\"ftl\",\"name\":\"$m\",/"
        done
    done
done | tee "$out/results.jsonl"
