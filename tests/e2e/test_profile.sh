#!/usr/bin/env bash
# ftl inspect MODEL.onnx --profile: per-step times add up to the plain run, FLOPs and node kinds
# equal what python3-onnx's shape inference gives, --json parses, a reference kernel is flagged,
# --ceiling times every compute step alone; usage errors.
source "$(dirname "$0")/lib.sh"
M="$SHARED/models"
tmp=$(scratch profile)
ops="$BUILD/ref/nn/ops"

run_check() { # NAME MODEL BATCH [extra profile_check args] -- [extra ftl args]
    local name=$1 model=$2 batch=$3
    shift 3
    local checks=() ftl_args=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do checks+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    ftl_args=("$@")
    if "$FTL" inspect "$model" --profile --json --batch "$batch" --threads 2 --device cpu "${ftl_args[@]}" \
        >"$tmp/$name.json" 2>"$tmp/$name.err"; then
        local out rc=0
        out=$("$PY" "$(dirname "$0")/profile_check.py" "$tmp/$name.json" "$model" --batch "$batch" --name "$name" \
            "${checks[@]}" 2>&1) || rc=$?
        printf '%s\n' "$out"
        # a checker that died (not one that reported its failed checks) is a failure too
        if [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' <<<"$out"; then fail "$name-checked" "$(tail -3 <<<"$out")"; fi
    else
        fail "$name-runs" "$(head -c 400 "$tmp/$name.err")"
    fi
}

run_check profile-mnv1 "$M/mobilenet_v1_0.25_128.onnx" 16
# ConvNeXt's products with their layer-scale tail: a fast kernel on every CPU (on AVX2 oneDNN has none
# for the fused tail, which ran 1,000x slower in its reference kernel)
run_check profile-convnext-products "$BUILD/ref/nn/torchvision/convnext_small_cfg.onnx" 2 --no-reference MatMul
run_check profile-mnv2-ceiling "$M/mobilenet_v2_1.0_224_features.onnx" 8 -- --ceiling --reps 3
run_check profile-attention "$ops/attention_batch_moved.onnx" 13
# a fused attention's ceiling: its two products timed alone as oneDNN matmuls
run_check profile-attention-ceiling "$ops/attention_batch_moved.onnx" 13 -- --ceiling --reps 3
# oneDNN has only its reference kernel for a dilated max pool: flagged in JSON and text (ftl's own
# max pool, which AVX2 CPUs take, handles dilation: kept off here)
export FTL_NN_FTL_MAXPOOL=0
run_check profile-reference "$ops/maxpool_dilated.onnx" 4 --expect-reference
out=$("$FTL" inspect "$ops/maxpool_dilated.onnx" --profile --batch 4 --reps 1 2>&1)
unset FTL_NN_FTL_MAXPOOL
check profile-reference-text-warns grep -q "ran oneDNN's reference (scalar) kernel" <<<"$out"
check profile-reference-text-marked grep -qE "ref:any.* REF$" <<<"$out"
out=$("$FTL" inspect "$M/mobilenet_v1_0.25_128.onnx" --profile --batch 2 --reps 1 --top 3 2>&1)
check profile-text-total grep -qE "^total +[0-9.]+ ms per run .* of the fp32 peak" <<<"$out"
check profile-text-by-kind grep -qE "^ +Conv +[0-9]+ " <<<"$out"
n=$(sed -n '/^slowest/,$p' <<<"$out" | tail -n +2 | wc -l)
check profile-text-top-3 test "$n" -eq 3

expect_error profile-ceiling-alone 2 "go with --profile" "$FTL_SAN" inspect "$M/mobilenet_v1_0.25_128.onnx" --ceiling
expect_error profile-json-alone 2 "go with --profile" "$FTL_SAN" inspect "$M/mobilenet_v1_0.25_128.onnx" --json
expect_error profile-bad-top 2 "--top N >= 1" "$FTL_SAN" inspect "$M/mobilenet_v1_0.25_128.onnx" --profile --top 0
expect_error profile-bad-precision 2 "--precision 'fp8'" "$FTL_SAN" inspect "$M/mobilenet_v1_0.25_128.onnx" --profile \
    --precision fp8
finish
