#!/usr/bin/env bash
# ftl inspect MODEL.onnx: the facts printed match models/README.md and the peer's FLOP counter
# (bench/peer/flops.py); bad models fail with a clear message and exit status (ASan build).
source "$(dirname "$0")/lib.sh"
M="$SHARED/models"
tmp=$(scratch nn_inspect)

out=$("$FTL" inspect "$M/mobilenet_v2_1.0_224.onnx" 2>&1)
check inspect-mnv2-params grep -q "parameters  3,489,097 float32" <<<"$out"
check inspect-mnv2-sha grep -q "sha256      4505398e65ed5bb7b341f40887767e7097b6b8ad0fd37be5e522e0d1916dae69" <<<"$out"
check inspect-mnv2-input grep -q "input       input \[N,3,224,224\] float32 (NCHW, 3 channels, 224x224)" <<<"$out"
check inspect-mnv2-ops grep -q "nodes       100: Conv 53, Clip 35, Add 10, GlobalAveragePool 1, Reshape 1" <<<"$out"
out=$("$FTL" inspect "$M/xception_random.onnx" 2>&1)
check inspect-xception-params grep -q "parameters  20,861,480 float32" <<<"$out"
check inspect-xception-macs grep -q "MACs/image  8,355,355,496" <<<"$out"   # peer: 8.355 GMAC
check inspect-xception-fused grep -q "40 BatchNormalization folded into Conv" <<<"$out"
n=$("$FTL" inspect "$M/mobilenet_v1_0.25_128.onnx" --tensors | wc -l)
check inspect-tensors-listed test "$n" -ge 30
out=$("$FTL" inspect "$M/mobilenet_v2_1.0_224.onnx" --features-from MobilenetV2/Logits/AvgPool/gpool 2>&1)
check inspect-features-from grep -q "features    MobilenetV2/Logits/AvgPool/gpool \[N,1280,1,1\]: 1280 floats per image" <<<"$out"
out=$("$FTL" inspect "$M/mobilenet_v1_0.25_128.onnx" --plan --batch 3 2>&1)
check inspect-plan grep -q "batch 3 run as micro-batches of 2" <<<"$out"
if why=$(no_bf16_reason); then
    skip inspect-plan-bf16 "$why"
    expect_error inspect-plan-bf16-refused-clearly 1 '--precision bf16 for .*: this CPU has no bf16 kernels in oneDNN .*bf16 needs AVX-512.*use --precision fp32, or auto' \
        "$FTL_SAN" inspect "$M/mobilenet_v1_0.25_128.onnx" --plan --batch 3 --precision bf16
else
    out=$("$FTL" inspect "$M/mobilenet_v1_0.25_128.onnx" --plan --batch 3 --precision bf16 2>&1)
    check inspect-plan-bf16 grep -q "plan: batch 2, bf16" <<<"$out"
fi
# the tensors worth cutting at: a ViT's class token (the head's input, as ONNX Runtime's reference in
# the unit tests names it) and ConvNeXt's pooled features; each listed name is one --features-from takes,
# with the size listed
tv="$BUILD/ref/nn/torchvision"
out=$("$FTL" inspect "$tv/vit_small.onnx" 2>&1)
check inspect-cut-vit-class-token grep -qF "cut at      $(cat "$tv/vit_small.features_name.txt") [N,96]: 96 floats per image" <<<"$out"
out=$("$FTL" inspect "$tv/convnext_small_cfg.onnx" 2>&1)
check inspect-cut-convnext-pooled grep -qF "/avgpool/GlobalAveragePool_output_0 [N,64,1,1]: 64 floats per image (pooled)" <<<"$out"
# the optimiser's pattern fusions: torch's 9-op tanh GELU after a conv leaves the conv alone (GELU as its post-op)
out=$("$FTL" inspect "$BUILD/ref/nn/ops/gelu_tanh_decomposed.onnx" 2>&1)
check inspect-gelu-tanh-fused grep -q "optimised   1 nodes: .* 2 activations" <<<"$out"
cut_ok=yes n_cut=0
for m in "$tv/convnext_small_cfg.onnx" "$tv/alexnet.onnx" "$M/mobilenet_v2_1.0_224.onnx"; do
    while read -r name per; do
        n_cut=$((n_cut + 1))
        "$FTL" inspect "$m" --features-from "$name" 2>&1 | grep -qF "features    $name " || cut_ok="no: $name of $m"
        "$FTL" inspect "$m" --features-from "$name" 2>&1 | grep -qF ": $per floats per image" || cut_ok="no: size of $name"
    done < <("$FTL" inspect "$m" | sed -n '/^cut at/,/^features/p' | grep -v '^features' | cut -c13- |
        sed -E 's/^([^ ]+) .*: ([0-9]+) floats per image.*/\1 \2/')
done
check inspect-cut-names-are-features-from test "$cut_ok/$n_cut" = yes/5

expect_error inspect-missing-file 2 "no such file" "$FTL_SAN" inspect "$tmp/nope.onnx"
head -c 5000 "$M/mobilenet_v1_0.25_128.onnx" >"$tmp/truncated.onnx"
expect_error inspect-truncated 1 "truncated.onnx: not an ONNX model" "$FTL_SAN" inspect "$tmp/truncated.onnx"
cp "$M/xception_random.onnx" "$tmp/xception_alone.onnx"
expect_error inspect-missing-external-data 2 "external data file 'xception_random.onnx.data0' not found" \
    "$FTL_SAN" inspect "$tmp/xception_alone.onnx"
bad="$BUILD/ref/nn/ops/bad"
expect_error inspect-unknown-op 1 "node 'mystery': unsupported op 'FooBar'" "$FTL_SAN" inspect "$bad/unknown_op.onnx"
expect_error inspect-cycle 1 "cycle" "$FTL_SAN" inspect "$bad/cycle.onnx"
expect_error inspect-offset-past-end 1 "offset 4096 is past the end" "$FTL_SAN" inspect "$bad/offset_past_end.onnx"
expect_error inspect-features-from-unknown 2 "--features-from 'nope'" \
    "$FTL_SAN" inspect "$M/mobilenet_v1_0.25_128.onnx" --features-from nope
expect_error inspect-features-from-suggests 2 "similar: 'MobilenetV2/Logits/AvgPool/gpool'" \
    "$FTL_SAN" inspect "$M/mobilenet_v2_1.0_224.onnx" --features-from MobilenetV2/Logits/AvgPool
expect_error inspect-bad-precision 2 "--precision 'fp8'" "$FTL_SAN" inspect "$M/mobilenet_v1_0.25_128.onnx" --precision fp8
# hostile shapes (inputs the fuzzer found, tests/fuzz/regressions): refused, naming the node
F="$(dirname "$0")/../fuzz/regressions/fuzz_onnx"
expect_error inspect-reshape-over-2g-elements 1 "node 'Reshape_2' \\(Reshape\\): the requested shape has more than 2\\^31 elements" \
    "$FTL_SAN" inspect "$F/reshape_shape_overflow.onnx"
expect_error inspect-pad-out-of-range 1 "node 'Pad_2' \\(Pad\\): attribute 'pads': a pad beyond" \
    "$FTL_SAN" inspect "$F/pad_int64_overflow.onnx"
expect_error inspect-activation-cap 1 "needs .* GiB of activation memory, more than the .* allowed \\(FTL_NN_MAX_ACTIVATION_BYTES\\)" \
    env FTL_NN_MAX_ACTIVATION_BYTES=1000000 "$FTL_SAN" inspect "$M/mobilenet_v1_0.25_128.onnx" --plan --batch 8
finish
