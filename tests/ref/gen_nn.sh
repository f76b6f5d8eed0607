#!/usr/bin/env bash
# Reference data for the nn tests, under $BUILD/ref/nn/:
#   ops/          per-op ONNX graphs + random inputs (nn_cases.py, python3-onnx), expected outputs from
#                 ONNX Runtime (nn_ort_batch.mjs: one node process for all cases), malformed models in
#                 ops/bad/, Pillow BILINEAR resize pairs in ops/resize/
#   qdq/          quantized models (QDQ, QLinear and Integer ops, nn_qdq.py) with ONNX Runtime's outputs, graph
#                 optimisations off and on; malformed quantization in qdq/bad/
#   families/     one model per torchvision family, exported at opset 13 and 17 with dynamic and fixed batch
#                 (nn_families.py), PyTorch's logits and ONNX Runtime's for every file
#   torchvision/  torchvision families exported with torch.onnx + PyTorch outputs (nn_torchvision.py); for the
#                 ViT also ONNX Runtime's class-token features (that tensor exposed as an output)
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
qdq_cmd() {
    "$PY" "$here/nn_qdq.py" "$out/qdq" && node "$here/nn_ort_batch.mjs" "$out/qdq/manifest.txt" &&
        ORT_GRAPH_OPT=all node "$here/nn_ort_batch.mjs" "$out/qdq/manifest_opt.txt"
}
part nn-qdq "$out/qdq" "$(stamp_of "$here/nn_qdq.py" "$here/nn_ort_batch.mjs" "$SHARED/tools/interop/package-lock.json")" qdq_cmd
torchvision_cmd() {
    local d="$out/torchvision"
    "$PY" -W ignore "$here/nn_torchvision.py" "$d" || return 1
    # the ViT's class token after the last LayerNorm (the Gemm head's input), by ONNX Runtime
    local name
    name=$("$PY" -c "import onnx,sys; g=onnx.load(sys.argv[1]).graph; print([n for n in g.node if n.op_type=='Gemm'][-1].input[0])" \
        "$d/vit_small.onnx") || return 1
    echo "$name" >"$d/vit_small.features_name.txt"
    # exposed as a graph output with its shape written out (onnx's inference cannot follow the exporter's
    # shape arithmetic, so the interop tool's checked exposure refuses it)
    "$PY" -c "import onnx,sys; m=onnx.load(sys.argv[1]); m.graph.output.append(onnx.helper.make_tensor_value_info(sys.argv[3], onnx.TensorProto.FLOAT, ['N', 96])); onnx.save(m, sys.argv[2])" \
        "$d/vit_small.onnx" "$d/vit_small.exposed.onnx" "$name" &&
        node "$SHARED/tools/interop/onnx_run.mjs" "$d/vit_small.exposed.onnx" "$d/vit_small.in.npy" "$d/vit_small.features.npy" \
            --output "$name" >/dev/null
}
families_cmd() {
    "$PY" -W ignore "$here/nn_families.py" "$out/families" && node "$here/nn_ort_batch.mjs" "$out/families/ort_manifest.txt"
}
part nn-families "$out/families" "$(stamp_of "$here/nn_families.py" "$here/tv_models.py" "$here/nn_ort_batch.mjs" \
    "$SHARED/tools/interop/package-lock.json")" families_cmd
part nn-torchvision "$out/torchvision" "$(stamp_of "$here/nn_torchvision.py" "$here/tv_models.py" "$here/gen_nn.sh")" torchvision_cmd
exit $status
