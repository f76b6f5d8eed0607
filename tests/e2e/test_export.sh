#!/usr/bin/env bash
# ftl export: ONNX Runtime on the exported model gives ftl eval's probabilities on every
# hymenoptera val image (within 1e-4, the same top-1) for a backbone at the dataset's size (224)
# and one that needs the resize (299 -> 224), whose in-graph preprocessing equals Pillow's resize
# and ftl's scaling bit for bit; onnx.checker and strict shape inference accept the files;
# --logits, --input float-nchw, external data above a forced small size, the opset conversion
# (opsets 11, 13, 17, 18 from backbones of opsets 11, 13, 14; NHWC input; reserved names; a
# backbone with external data and a fixed batch); and the bad inputs.
source "$(dirname "$0")/lib.sh"
d=$(scratch export)
CHECK="$PY $(dirname "$0")/export_check.py"
ORT=(node "$INTEROP/onnx_run.mjs")
IMAGES_NPY="$(dirname "$0")/../tools/dataset_images_npy.mjs"
MNV2="$SHARED/models/mobilenet_v2_1.0_224_features.onnx"
TRAIN=(--epochs 3 --batch 32 --lr 0.004 --quiet)

"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds224" --size 224 --quiet 2>/dev/null || fail export_setup "prep 224 failed"
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds299" --quiet 2>/dev/null || fail export_setup "prep 299 failed"
node "$IMAGES_NPY" "$d/ds224/val.parquet" "$d/v224.npy" >"$d/v224.json" || fail export_setup "reading the val images with DuckDB failed"
node "$IMAGES_NPY" "$d/ds299/val.parquet" "$d/v299.npy" >"$d/v299.json" || fail export_setup "reading the val images with DuckDB failed"
for s in 224 299; do
    "$FTL" train "$d/ds$s/train.parquet" --val "$d/ds$s/val.parquet" --backbone "$MNV2" "${TRAIN[@]}" --out "$d/m$s.ftl" \
        >/dev/null 2>&1 || fail export_setup "train $s failed"
    "$FTL" eval "$d/m$s.ftl" "$d/ds$s/val.parquet" --predictions "$d/p$s.csv" --quiet >/dev/null 2>&1 || fail export_setup "eval $s failed"
done

# ---- MobileNetV2 at the dataset's size, and 299 -> 224 with the resize in the graph
for s in 224 299; do
    if "$FTL_SAN" export "$d/m$s.ftl" "$d/m$s.onnx" >"$d/x$s.out" 2>"$d/x$s.err"; then pass "export_$s"; else fail "export_$s" "$(cat "$d/x$s.err")"; fi
    $CHECK model "$d/m$s.onnx" --opset 13 --size $s --classes ants,bees --output probabilities --input uint8 &&
        pass "export_${s}_checker_shape_inference_and_metadata" || fail "export_${s}_checker_shape_inference_and_metadata" "see log"
    "${ORT[@]}" "$d/m$s.onnx" "$d/v$s.npy" "$d/o$s.npy" --threads 2 >"$d/ort$s.json" || fail "export_${s}_runs_in_onnx_runtime" "onnx_run failed"
    $CHECK compare "$d/o$s.npy" "$d/p$s.csv" && pass "export_${s}_onnx_runtime_matches_ftl_eval_on_every_val_image" ||
        fail "export_${s}_onnx_runtime_matches_ftl_eval_on_every_val_image" "see log"
done
grep -q "^resize: 299 -> 224x224" "$d/x299.out" && ! grep -q "^resize" "$d/x224.out" && pass export_says_when_it_resizes ||
    fail export_says_when_it_resizes "$(cat "$d/x224.out" "$d/x299.out")"
# the preprocessing inside the graph is Pillow's resize and ftl's scaling, bit for bit
$PY "$INTEROP/onnx_expose_outputs.py" "$d/m299.onnx" "$d/m299_input.onnx" input >/dev/null &&
    "${ORT[@]}" "$d/m299_input.onnx" "$d/v299.npy" "$d/x299.npy" --output input --threads 2 >/dev/null &&
    $CHECK preprocess "$d/x299.npy" "$d/v299.npy" 224 224 tf && pass export_preprocessing_equals_pillow_resize_and_scaling_exactly ||
    fail export_preprocessing_equals_pillow_resize_and_scaling_exactly "see log"

# ---- --logits, --input float-nchw, external data
"$FTL" export "$d/m299.ftl" "$d/logits.onnx" --logits --quiet &&
    $CHECK model "$d/logits.onnx" --opset 13 --size 299 --classes ants,bees --output logits --input uint8 >/dev/null &&
    "${ORT[@]}" "$d/logits.onnx" "$d/v299.npy" "$d/ol.npy" --threads 2 >/dev/null &&
    $CHECK same "$d/ol.npy" "$d/o299.npy" --softmax-of-a --tol 1e-6 && pass export_logits_output_is_the_softmax_input ||
    fail export_logits_output_is_the_softmax_input "see log"
$CHECK float_input "$d/v299.npy" "$d/f299.npy" 224 224 tf &&
    "$FTL" export "$d/m299.ftl" "$d/float.onnx" --input float-nchw --quiet &&
    $CHECK model "$d/float.onnx" --opset 13 --size 299 --classes ants,bees --output probabilities --input float >/dev/null &&
    "${ORT[@]}" "$d/float.onnx" "$d/f299.npy" "$d/of.npy" --threads 2 >/dev/null &&
    $CHECK same "$d/of.npy" "$d/o299.npy" --tol 1e-6 && pass export_float_nchw_input_takes_preprocessed_images ||
    fail export_float_nchw_input_takes_preprocessed_images "see log"
mkdir -p "$d/ext"
if "$FTL_SAN" export "$d/m299.ftl" "$d/ext/m.onnx" --external-data-above 1MiB >"$d/ext.out" 2>"$d/ext.err"; then
    size=$(stat -c %s "$d/ext/m.onnx")
    [ "$size" -lt 1048576 ] && [ -s "$d/ext/m.onnx.data" ] && grep -q "external data in .*m.onnx.data" "$d/ext.out" &&
        pass export_external_data_above_the_limit || fail export_external_data_above_the_limit "model $size bytes; $(cat "$d/ext.out")"
    mv "$d/ext" "$d/ext_moved" # the location is relative: the pair works wherever it goes
    $CHECK model "$d/ext_moved/m.onnx" --opset 13 --size 299 --classes ants,bees --output probabilities --input uint8 >/dev/null &&
        "${ORT[@]}" "$d/ext_moved/m.onnx" "$d/v299.npy" "$d/oe.npy" --threads 2 >/dev/null &&
        $CHECK same "$d/oe.npy" "$d/o299.npy" && pass export_external_data_gives_the_same_outputs ||
        fail export_external_data_gives_the_same_outputs "see log"
else
    fail export_external_data_above_the_limit "$(cat "$d/ext.err")"
fi

# ---- opset conversion, layouts, reserved names, a backbone with external data and a fixed batch
mkdir -p "$d/tiny"
$PY "$(dirname "$0")/../ref/export_backbones.py" "$d/tiny" || fail export_setup "building the small backbones failed"
$PY -c "import numpy as np; np.save('$d/v299_4.npy', np.load('$d/v299.npy')[:4])"
for m in op11_nhwc op14_hswish op13_external; do
    "$FTL" train "$d/ds299/train.parquet" --val "$d/ds299/val.parquet" --backbone "$d/tiny/$m.onnx" "${TRAIN[@]}" \
        --out "$d/t_$m.ftl" >/dev/null 2>&1 || fail export_setup "train on $m failed"
    "$FTL" eval "$d/t_$m.ftl" "$d/ds299/val.parquet" --predictions "$d/tp_$m.csv" --quiet >/dev/null 2>&1
    in="$d/v299.npy" rows=() batch=()
    [ $m = op13_external ] && in="$d/v299_4.npy" rows=(--rows 4) batch=(--batch 4)
    for op in 11 13 17 18; do
        name="export_${m}_to_opset_$op"
        checker=()
        [ $op = 18 ] && checker=(--no-checker) # python3-onnx 1.12 knows opsets up to 17
        if "$FTL_SAN" export "$d/t_$m.ftl" "$d/t_${m}_$op.onnx" --opset $op >/dev/null 2>"$d/t_${m}_$op.err" &&
            $CHECK model "$d/t_${m}_$op.onnx" --opset $op --size 299 --classes ants,bees --output probabilities --input uint8 \
                "${checker[@]}" "${batch[@]}" >/dev/null &&
            "${ORT[@]}" "$d/t_${m}_$op.onnx" "$in" "$d/to.npy" --threads 2 >/dev/null 2>&1 &&
            $CHECK compare "$d/to.npy" "$d/tp_$m.csv" "${rows[@]}" >/dev/null; then
            pass "$name"
        else
            fail "$name" "$(head -c 400 "$d/t_${m}_$op.err")"
        fi
    done
done
# ---- flip TTA in the graph: the channels-last backbone at opset 11; a fixed batch cannot take 2N
"$FTL" eval "$d/t_op11_nhwc.ftl" "$d/ds299/val.parquet" --tta flip --predictions "$d/tp_tta.csv" --quiet >/dev/null 2>&1
"$FTL_SAN" export "$d/t_op11_nhwc.ftl" "$d/t_tta_11.onnx" --tta flip --opset 11 >/dev/null 2>"$d/t_tta_11.err" &&
    "${ORT[@]}" "$d/t_tta_11.onnx" "$d/v299.npy" "$d/tto.npy" --threads 2 >/dev/null 2>&1 &&
    $CHECK compare "$d/tto.npy" "$d/tp_tta.csv" && pass export_tta_channels_last_opset_11_equals_ftl_eval ||
    fail export_tta_channels_last_opset_11_equals_ftl_eval "$(head -c 400 "$d/t_tta_11.err")"
"$FTL" export "$d/t_op13_external.ftl" "$d/t_tta_fixed.onnx" --tta flip >/dev/null 2>"$d/t_tta_fixed.err"
[ $? -ne 0 ] && grep -q 'takes a fixed batch of 4: re-export the backbone with a dynamic batch axis' "$d/t_tta_fixed.err" &&
    [ ! -e "$d/t_tta_fixed.onnx" ] && pass export_tta_refuses_a_fixed_batch_saying_why ||
    fail export_tta_refuses_a_fixed_batch_saying_why "$(cat "$d/t_tta_fixed.err")"
skip export_opset_18_onnx_checker "python3-onnx 1.12 (Debian 12) knows opsets up to 17; ONNX Runtime ran the opset-18 files"
$PY - "$d" <<'PYEOF' && pass export_opset_conversion_rewrites_what_changed || fail export_opset_conversion_rewrites_what_changed "see log"
import onnx, sys
d = sys.argv[1]
def ops(f):
    return [(n.op_type, len(n.input), sorted(a.name for a in n.attribute)) for n in onnx.load(f"{d}/{f}").graph.node]
o11_13, o11_18 = ops("t_op11_nhwc_13.onnx"), ops("t_op11_nhwc_18.onnx")
assert ("Squeeze", 2, []) in o11_13 and ("ReduceMean", 1, ["axes", "keepdims"]) in o11_13, o11_13   # axes -> input at 13
assert ("ReduceMean", 2, ["keepdims"]) in o11_18 and not any(o[0] == "Dropout" for o in o11_18), o11_18  # and at 18
assert ("Dropout", 1, ["ratio"]) in ops("t_op11_nhwc_11.onnx")                                        # untouched at its own opset
h13, h17 = ops("t_op14_hswish_13.onnx"), ops("t_op14_hswish_17.onnx")
assert not any(o[0] == "HardSwish" for o in h13) and ("HardSigmoid", 1, ["alpha", "beta"]) in h13, h13  # no HardSwish before 14
assert any(o[0] == "HardSwish" for o in h17), h17
e11 = ops("t_op13_external_11.onnx")
assert ("Squeeze", 1, ["axes"]) in e11 and ("Unsqueeze", 1, ["axes"]) in e11, e11
m = onnx.load(f"{d}/t_op14_hswish_13.onnx")
names = {o for n in m.graph.node for o in n.output}
assert {"probabilities_backbone", "images_backbone"} <= names, names  # the backbone's own 'probabilities' and 'images' renamed
m = onnx.load(f"{d}/t_op13_external_13.onnx")
assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 4  # a fixed batch stays fixed
assert all(not t.external_data for t in m.graph.initializer)          # the backbone's external data is inline
used = {i for n in m.graph.node for i in n.input}
assert all(t.name in used for t in onnx.load(f"{d}/t_op13_external_11.onnx").graph.initializer)  # no orphans after conversion
print("conversions as expected")
PYEOF
grep -q "fixed batch of 4" "$d/t_op13_external_13.err" && pass export_warns_about_a_fixed_batch ||
    fail export_warns_about_a_fixed_batch "$(cat "$d/t_op13_external_13.err")"

# ---- bad input
sum0=$(sha256sum <"$d/m224.onnx")
expect_error export_refuses_to_overwrite 2 "m224.onnx already exists \(use --overwrite" "$FTL_SAN" export "$d/m224.ftl" "$d/m224.onnx"
[ "$(sha256sum <"$d/m224.onnx")" = "$sum0" ] && pass export_existing_out_untouched || fail export_existing_out_untouched "changed"
"$FTL" export "$d/m224.ftl" "$d/m224.onnx" --overwrite --logits --quiet &&
    $CHECK model "$d/m224.onnx" --opset 13 --size 224 --classes ants,bees --output logits --input uint8 >/dev/null &&
    pass export_overwrite_replaces || fail export_overwrite_replaces "see log"
cp "$d/tiny/op11_nhwc.onnx" "$d/moving.onnx"
"$FTL" train "$d/ds299/train.parquet" --backbone "$d/moving.onnx" --epochs 1 --quiet --out "$d/moving.ftl" >/dev/null 2>&1
mkdir -p "$d/moved" && mv "$d/moving.onnx" "$d/moved/"
expect_error export_missing_backbone 2 "moving.onnx recorded in .*moving.ftl does not exist \(pass --backbone PATH\)" \
    "$FTL_SAN" export "$d/moving.ftl" "$d/mv.onnx"
"$FTL" export "$d/moving.ftl" "$d/mv.onnx" --backbone "$d/moved/moving.onnx" --quiet && [ -s "$d/mv.onnx" ] &&
    pass export_backbone_flag_finds_a_moved_backbone || fail export_backbone_flag_finds_a_moved_backbone "export failed"
expect_error export_changed_backbone 2 "op14_hswish.onnx has sha256 .*trained on a backbone with sha256" \
    "$FTL_SAN" export "$d/moving.ftl" "$d/ch.onnx" --backbone "$d/tiny/op14_hswish.onnx"
expect_error export_unwritable_out 1 "cannot create .*no/such/folder/out.onnx" "$FTL_SAN" export "$d/m299.ftl" "$d/no/such/folder/out.onnx"
expect_error export_out_is_a_folder 2 "is a folder" "$FTL_SAN" export "$d/m299.ftl" "$d/tiny"
expect_error export_not_a_model 1 "mobilenet_v2_1.0_224_features.onnx" "$FTL_SAN" export "$MNV2" "$d/nm.onnx"
head -c 300 "$d/m299.ftl" >"$d/cut.ftl"
expect_error export_truncated_model 1 "cut.ftl" "$FTL_SAN" export "$d/cut.ftl" "$d/cut.onnx"
expect_error export_opset_out_of_range 2 "--opset 9: ftl exports opsets 11-18" "$FTL_SAN" export "$d/m299.ftl" "$d/o9.onnx" --opset 9
expect_error export_bad_input_kind 2 "--input 'rgb': expected uint8-nhwc or float-nchw" "$FTL_SAN" export "$d/m299.ftl" "$d/i.onnx" --input rgb
left=$(find "$d" -name '*.tmp-*' | head -3)
[ -z "$left" ] && [ ! -e "$d/ch.onnx" ] && [ ! -e "$d/cut.onnx" ] && pass export_failures_leave_no_files || fail export_failures_leave_no_files "$left"
finish
