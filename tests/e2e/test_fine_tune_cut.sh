#!/usr/bin/env bash
# ftl inspect MODEL.onnx --fine-tune-last N / --fine-tune-from TENSOR: the unfrozen nodes, trained parameters and
# boundary tensors equal those python3-onnx computes from the file (tests/ref/fine_tune_cut.py), on graphs with
# folded BN (the TFLite MobileNet), real BN and a skip connection across the cut (ResNet-50: two boundary
# tensors), dense concats (DenseNet-121: 16), branches (Inception v3) and a transformer cut at a tensor (ViT).
source "$(dirname "$0")/lib.sh"
tmp=$(scratch fine_tune_cut)
tv="$BUILD/ref/nn/torchvision"

# ftl's listing in the reference's format
ftl_lines() {
    sed -n -E 's/^unfrozen    (.*) \([A-Za-z]+\)$/unfrozen \1/p
               s/^param       ([^ ]+) .*, ([0-9]+) values \(node .*$/param \1 \2/p
               s/^boundary    ([^ ]+) .*: ([0-9]+) floats per image$/boundary \1 \2/p' | sort
}

cut_matches() {  # NAME MODEL FTL_FLAG REF_FLAG VALUE
    local name=$1 model=$2 flag=$3 rflag=$4 value=$5
    if ! "$FTL" inspect "$model" "$flag" "$value" >"$tmp/$name.out" 2>"$tmp/$name.err"; then
        fail "$name" "ftl inspect failed: $(head -c 300 "$tmp/$name.err")"
        return
    fi
    ftl_lines <"$tmp/$name.out" >"$tmp/$name.ftl"
    "$PY" "$(dirname "$0")/../ref/fine_tune_cut.py" "$model" "$rflag" "$value" >"$tmp/$name.ref" 2>"$tmp/$name.referr" ||
        { fail "$name" "reference failed: $(tail -c 300 "$tmp/$name.referr")"; return; }
    if [ ! -s "$tmp/$name.ref" ]; then fail "$name" "empty reference"; return; fi
    # where onnx's shape inference cannot follow the exporter's shape arithmetic the reference has no size ("?")
    awk 'NR == FNR { if ($1 == "boundary" && $3 == "?") unknown[$2] = 1; next }
         $1 == "boundary" && ($2 in unknown) { $3 = "?" } { print }' "$tmp/$name.ref" "$tmp/$name.ftl" >"$tmp/$name.ftl2"
    mv "$tmp/$name.ftl2" "$tmp/$name.ftl"
    if diff "$tmp/$name.ref" "$tmp/$name.ftl" >"$tmp/$name.diff"; then
        pass "$name ($(grep -c '^unfrozen' "$tmp/$name.ftl") nodes, $(grep -c '^boundary' "$tmp/$name.ftl") boundary tensors)"
    else
        fail "$name" "differs from the reference: $(head -c 600 "$tmp/$name.diff")"
    fi
}

cut_matches cut-mobilenet-v2-last-4 "$SHARED/models/mobilenet_v2_1.0_224_features.onnx" --fine-tune-last --last 4
cut_matches cut-resnet50-last-2 "$tv/resnet50.onnx" --fine-tune-last --last 2
cut_matches cut-resnet50-last-7 "$tv/resnet50.onnx" --fine-tune-last --last 7
cut_matches cut-densenet121-last-3 "$tv/densenet121.onnx" --fine-tune-last --last 3
cut_matches cut-inception-v3-last-5 "$tv/inception_v3.onnx" --fine-tune-last --last 5
cut_matches cut-vit-from-last-block "$tv/vit_small.onnx" --fine-tune-from --from /encoder/layers/encoder_layer_1/Add_1_output_0

# the skip connection: ResNet-50's last block cut inside, both its branch input and the skip cross
check cut-resnet50-two-boundaries grep -q "2 boundary tensors, 125,440 floats per image" "$tmp/cut-resnet50-last-2.out"
# DenseNet's pre-activation BatchNorms (after a concat: not folded) train scale and shift, not mean and variance
check cut-bn-scale-shift-trained grep -q "^param       .* \[1024\] scale" "$tmp/cut-densenet121-last-3.out"

expect_error cut-last-too-many 2 "--fine-tune-last 999: the graph has 53 Conv nodes" \
    "$FTL_SAN" inspect "$tv/resnet50.onnx" --fine-tune-last 999
expect_error cut-from-unknown 2 "--fine-tune-from 'nope': no tensor of that name" \
    "$FTL_SAN" inspect "$tv/resnet50.onnx" --fine-tune-from nope
expect_error cut-from-constant 2 "--fine-tune-from 'fc.weight': a constant" \
    "$FTL_SAN" inspect "$tv/resnet50.onnx" --fine-tune-from fc.weight
expect_error cut-both-flags 2 "not together with --fine-tune-from" \
    "$FTL_SAN" inspect "$tv/resnet50.onnx" --fine-tune-last 2 --fine-tune-from x
finish
