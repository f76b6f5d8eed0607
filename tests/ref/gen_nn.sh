#!/usr/bin/env bash
# Reference data for the nn tests, under $BUILD/ref/nn/:
#   ops/          per-op ONNX graphs + random inputs (nn_cases.py, python3-onnx), expected outputs from
#                 ONNX Runtime (nn_ort_batch.mjs: one node process for all cases), malformed models in
#                 ops/bad/, Pillow BILINEAR resize pairs in ops/resize/
#   torchvision/  mobilenet_v2 and resnet50 exported with torch.onnx + PyTorch outputs (nn_torchvision.py)
# Skips a part when its stamp (sha256 of the scripts that make it) is unchanged.
set -u
: "${BUILD:?}" "${SHARED:?}" "${PY:=/usr/bin/python3}"
: "${INTEROP_NODE_DIR:=$BUILD/interop-node}"
export SHARED INTEROP_NODE_DIR
here=$(cd "$(dirname "$0")" && pwd)
out="$BUILD/ref/nn"
mkdir -p "$out"
status=0

stamp_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

part() {  # part NAME DIR STAMP COMMAND...
    local name=$1 dir=$2 stamp=$3
    shift 3
    if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$stamp" ]; then
        echo "ok $name (cached)"
        return
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    local log="$out/$name.log"
    if "$@" >"$log" 2>&1; then
        echo "$stamp" >"$dir/.stamp"
        echo "ok $name"
    else
        echo "FAIL $name: $(tail -5 "$log" | tr '\n' ' ')"
        status=1
    fi
}

ops_cmd() {
    "$PY" "$here/nn_cases.py" "$out/ops" && node "$here/nn_ort_batch.mjs" "$out/ops/manifest.txt"
}
part nn-ops "$out/ops" "$(stamp_of "$here/nn_cases.py" "$here/nn_ort_batch.mjs" "$SHARED/tools/interop/package-lock.json")" ops_cmd
part nn-torchvision "$out/torchvision" "$(stamp_of "$here/nn_torchvision.py")" \
    "$PY" -W ignore "$here/nn_torchvision.py" "$out/torchvision"
exit $status
