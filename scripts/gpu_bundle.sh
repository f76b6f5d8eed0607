#!/usr/bin/env bash
# Builds the folder a GPU machine runs (tests/gpu/run.sh): the CUDA build of ftl and its test and
# benchmark binaries, every library they link that such a machine may lack (the Debian ones and
# glibc itself, run through the bundled loader, xz-compressed), small models, the per-op
# references, a prepped sample of the hymenoptera photos and the scripts. The NVIDIA libraries are
# not in it: the GPU machine's own driver, cuDNN, cuBLAS and NCCL are found there at run time.
# usage: scripts/gpu_bundle.sh [OUT]   (default build/gpu-bundle; at most 64 MiB)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BUILD:=build}" "${SHARED:=$(cd .. && pwd)/shared}"
OUT=${1:-$BUILD/gpu-bundle}
command -v nvcc >/dev/null || { echo "gpu_bundle: nvcc not found: the bundle needs the CUDA build" >&2; exit 1; }
make --no-print-directory -j2 CUDA=1 all "$BUILD/tools/ftl_cuda_check" "$BUILD/tools/ftl_parquet_gen" \
  "$BUILD/bench/backbone/ftl_bench" >/dev/null
# the per-op references need the pinned Node tools (make test-deps installs them)
[ -e "$BUILD/ref/nn/ops/manifest.txt" ] || INTEROP_NODE_DIR=${INTEROP_NODE_DIR:-$BUILD/interop-node} \
  bash tests/ref/gen_nn.sh >"$BUILD/gpu-bundle-refs.log" 2>&1 || {
  rm -f "$BUILD/ref/nn/ops/manifest.txt"
  echo "gpu_bundle: making the per-op references failed (tests/ref/gen_nn.sh; it needs the pinned Node tools of" \
       "make test-deps, or INTEROP_NODE_DIR): $(grep -m3 FAIL "$BUILD/gpu-bundle-refs.log")" >&2
  exit 1
}
rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/models" "$OUT/ref" "$OUT/data" "$OUT/stage/lib"
BINS=("$BUILD/ftl" "$BUILD/tools/ftl_cuda_check" "$BUILD/tools/ftl_parquet_gen" "$BUILD/bench/backbone/ftl_bench")
cp "${BINS[@]}" "$OUT/bin/"
# every shared library the binaries need, glibc and its loader included (the GPU machine's glibc may
# be older than Debian 12's)
for b in "${BINS[@]}"; do ldd "$b"; done | awk '/=>/ && $3 ~ /^\// {print $3} /^\t\/.*ld-linux/ {print $1}' | sort -u |
  while read -r lib; do cp -L "$lib" "$OUT/stage/lib/"; done
tar -C "$OUT/stage" -cJf "$OUT/lib.tar.xz" lib
rm -rf "$OUT/stage"
cp "$SHARED/models/mobilenet_v1_0.25_128.onnx" "$SHARED/models/mobilenet_v2_1.0_224_features.onnx" "$OUT/models/"
xz -9 "$OUT/models/mobilenet_v2_1.0_224_features.onnx"
cp "$SHARED/tools/xception_torch.py" "$SHARED/bench/onnx_torch.py" "$OUT/models/"
tar -C "$BUILD/ref/nn" -cJf "$OUT/ref/ops.tar.xz" ops
"$BUILD/ftl" prep "$SHARED/data/hymenoptera" "$OUT/data/hymenoptera128" --size 128 --codec zstd --quiet 2>/dev/null
cp tests/gpu/run.sh "$OUT/run.sh"
cp bench/gpu/torch_peer.py "$OUT/torch_peer.py"
git rev-parse HEAD >"$OUT/COMMIT" 2>/dev/null || true
size=$(du -sb "$OUT" | cut -f1)
echo "gpu_bundle: $OUT: $((size / 1048576)) MiB ($(git rev-parse --short HEAD 2>/dev/null))"
[ "$size" -le $((64 << 20)) ] || { echo "gpu_bundle: over 64 MiB" >&2; exit 1; }
