#!/usr/bin/env bash
# --precision int8: calibration on the training set, the head trained on int8 features within 1.5
# points of fp32's val accuracy on hymenoptera (real MobileNetV2), the calibration recorded in the
# features file and the model and part of the cache key, eval and predict with the model's own
# scales (cache and images give the same metrics), the profiler's per-node choice, and the bad
# inputs: another image size, a set smaller than a batch, an unknown method, int8 on a GPU.
source "$(dirname "$0")/lib.sh"
d=$(scratch int8)
why=$(no_int8_reason)
if [ -n "$why" ]; then
    # the refusal, as a user meets it: a clear error, non-zero exit, nothing written
    "$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --size 128 --quiet 2>/dev/null
    "$FTL" train "$d/ds/train.parquet" --val "$d/ds/val.parquet" --backbone "$SHARED/models/mobilenet_v1_0.25_128.onnx" \
        --precision int8 --epochs 1 --out "$d/int8.ftl" >/dev/null 2>"$d/refused.err"
    rc=$?
    [ $rc -ne 0 ] && grep -q 'no int8 dot-product instructions' "$d/refused.err" && [ ! -e "$d/int8.ftl" ] &&
        pass int8_refused_where_its_kernels_saturate || fail int8_refused_where_its_kernels_saturate "rc $rc: $(tail -2 "$d/refused.err")"
    skip int8_all "$why"
    finish
fi
M="$SHARED/models/mobilenet_v2_1.0_224_features.onnx"
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --size 224 --quiet 2>/dev/null || fail int8_prep "prep failed"
T="$d/ds/train.parquet" V="$d/ds/val.parquet"
ARGS=(--backbone "$M" --epochs 10 --cache-dir "$d/cache" --seed 7)
val_acc() { sed -n 's/^train: .* val_acc \([0-9.]*\),.*/\1/p' "$1"; }

"$FTL" train "$T" --val "$V" "${ARGS[@]}" --out "$d/fp32.ftl" >"$d/fp32.out" 2>"$d/fp32.err" ||
    fail int8_fp32_train "$(tail -3 "$d/fp32.err")"
"$FTL" train "$T" --val "$V" "${ARGS[@]}" --precision int8 --out "$d/int8.ftl" >"$d/int8.out" 2>"$d/int8.err" ||
    fail int8_train "$(tail -3 "$d/int8.err")"
check int8_calibrates_on_the_training_set grep -qE '^int8: calibrated [0-9]+ tensors on 244 images \(percentile-99.99\)' "$d/int8.err"
check int8_computes_its_own_features grep -q "feature cache: computing train features" "$d/int8.err"
a32=$(val_acc "$d/fp32.out") a8=$(val_acc "$d/int8.out")
echo "  val_acc fp32 $a32, int8 $a8"
check int8_head_within_1.5_points_of_fp32 "$PY" -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 0.015)' "$a32" "$a8"
"$FTL" inspect "$d/int8.ftl" >"$d/int8.txt" 2>&1
check int8_model_records_its_precision grep -q "precision int8," "$d/int8.txt"

# the same calibration again: the cache is reused; other calibration rows: another key
"$FTL" train "$T" --val "$V" "${ARGS[@]}" --precision int8 --out "$d/again.ftl" >"$d/again.out" 2>"$d/again.err"
check int8_same_calibration_reuses_the_cache grep -q "feature cache: reusing 1 part .* for train" "$d/again.err"
check int8_calibration_kept_in_the_cache grep -qE '^int8: reusing the calibration of [0-9]+ tensors on 244 images \(percentile-99.99\) from .*/cache/int8-calibration-[0-9a-f]{32}\.json' "$d/again.err"
# a damaged kept calibration is said, ignored and replaced: the same scales, the same model
cal=$(ls "$d/cache"/int8-calibration-*.json | head -1)
printf '{"method":"percentile-99.99","rows":244,"hash":"00","tensors":[["x",1,true]]}' >"$cal"
"$FTL" train "$T" --val "$V" "${ARGS[@]}" --precision int8 --out "$d/again2.ftl" >"$d/again2.out" 2>"$d/again2.err"
check int8_damaged_kept_calibration_redone grep -q "int8: ignoring the cached calibration .*int8-calibration-.*does not match the recorded" "$d/again2.err"
check int8_redone_calibration_same_model cmp -s <(grep '^Epoch' "$d/int8.out" | sed 's/ - [0-9]*ms//') \
    <(grep '^Epoch' "$d/again2.out" | sed 's/ - [0-9]*ms//')
check int8_same_calibration_same_model cmp -s <(grep '^Epoch' "$d/int8.out" | sed 's/ - [0-9]*ms//') \
    <(grep '^Epoch' "$d/again.out" | sed 's/ - [0-9]*ms//')
"$FTL" train "$T" --val "$V" "${ARGS[@]}" --precision int8 --calibration-rows 64 --out "$d/rows64.ftl" \
    >"$d/rows64.out" 2>"$d/rows64.err"
check int8_other_calibration_recomputes grep -q "feature cache: computing train features" "$d/rows64.err"
check int8_calibration_rows_taken grep -qE '^int8: calibrated [0-9]+ tensors on 64 images' "$d/rows64.err"

# eval and predict use the scales the model recorded: from the cache and from the images alike
"$FTL" eval "$d/int8.ftl" "$V" --cache-dir "$d/cache" >"$d/eval_cache.out" 2>"$d/eval_cache.err"
"$FTL" eval "$d/int8.ftl" "$V" --cache-dir "$d/empty" >"$d/eval_images.out" 2>"$d/eval_images.err"
check int8_eval_reuses_the_cache grep -q "feature cache: reusing" "$d/eval_cache.err"
check int8_eval_from_images_same_metrics cmp -s <(grep -E '^eval: 153' "$d/eval_cache.out" | sed 's/ in [0-9.]* s//') \
    <(grep -E '^eval: 153' "$d/eval_images.out" | sed 's/ in [0-9.]* s//')
check int8_eval_metrics_present grep -qE '^eval: 153 images .* top-1: 0\.[0-9]+' "$d/eval_cache.out"
img=$(ls "$SHARED/data/hymenoptera/val/bees/"*.jpg | head -1)
check int8_predict_runs "$FTL" predict "$d/int8.ftl" "$img"

# the profiler says which nodes run in int8
"$FTL" inspect "$M" --profile --precision int8 --batch 4 --reps 1 --top 3 >"$d/profile.txt" 2>&1
check int8_profile_names_the_fp32_nodes grep -qE '^int8 +[0-9]+ compute steps in int8, 2 in fp32: .*Conv/Relu6' "$d/profile.txt"
check int8_profile_peak_is_the_int8_one grep -qE '^total .* of the int8 peak' "$d/profile.txt"

# export: QDQ with the model's calibrated scales; ONNX Runtime runs it to ftl's predictions
CHECK="$PY $(dirname "$0")/export_check.py"
node "$(dirname "$0")/../tools/dataset_images_npy.mjs" "$V" "$d/v224.npy" >/dev/null || fail int8_export_setup "reading val with DuckDB failed"
"$FTL" eval "$d/int8.ftl" "$V" --cache-dir "$d/cache" --predictions "$d/p8.csv" --quiet >/dev/null 2>&1 || fail int8_export_setup "eval failed"
"$FTL_SAN" export "$d/int8.ftl" "$d/int8.onnx" >"$d/export.out" 2>"$d/export.err" || fail int8_export "$(cat "$d/export.err")"
int8_convs=$(sed -nE 's/^int8 nodes +([0-9]+) convolutions .*/\1/p' "$d/profile.txt") # a fused pair is one step, two convs
check int8_export_writes_every_int8_conv_as_qdq grep -q "^int8: $int8_convs convolutions / matrix products as QuantizeLinear/DequantizeLinear" "$d/export.out"
check int8_export_passes_checker_and_shape_inference $CHECK model "$d/int8.onnx" --opset 13 --size 224 --classes ants,bees \
    --output probabilities --input uint8
qdq_nodes=$("$PY" -c 'import onnx, sys; print(sum(n.op_type == "QuantizeLinear" for n in onnx.load(sys.argv[1]).graph.node))' "$d/int8.onnx")
echo "  QuantizeLinear nodes in the export: $qdq_nodes"
node "$INTEROP/onnx_run.mjs" "$d/int8.onnx" "$d/v224.npy" "$d/o8.npy" --threads 2 >/dev/null || fail int8_export_runs_in_onnx_runtime "onnx_run failed"
node "$INTEROP/onnx_run.mjs" "$d/int8.onnx" "$d/v224.npy" "$d/o8u.npy" --threads 2 --opt-level disabled >/dev/null ||
    fail int8_export_runs_unfused "onnx_run failed"
check int8_export_onnx_runtime_gives_ftl_predictions $CHECK compare "$d/o8.npy" "$d/p8.csv" --int8 --int8-self "$d/o8u.npy"
# a ViT (torchvision's small one, random weights): its linear layers int8 in ftl and QDQ in the export
VIT="$BUILD/ref/nn/torchvision/vit_small.onnx"
"$FTL" train "$T" --val "$V" --backbone "$VIT" --epochs 3 --cache-dir "$d/cache" --precision int8 --out "$d/vit8.ftl" \
    >"$d/vit8.out" 2>"$d/vit8.err" || fail int8_vit_train "$(tail -3 "$d/vit8.err")"
"$FTL" eval "$d/vit8.ftl" "$V" --cache-dir "$d/cache" --predictions "$d/pv.csv" --quiet >/dev/null 2>&1
"$FTL_SAN" export "$d/vit8.ftl" "$d/vit8.onnx" >"$d/vit_export.out" 2>"$d/vit_export.err" || fail int8_vit_export "$(cat "$d/vit_export.err")"
check int8_vit_export_quantizes_the_linear_layers grep -qE "^int8: 1[0-9] convolutions / matrix products" "$d/vit_export.out"
node "$INTEROP/onnx_run.mjs" "$d/vit8.onnx" "$d/v224.npy" "$d/ov.npy" --threads 2 >/dev/null || fail int8_vit_export_runs "onnx_run failed"
check int8_vit_export_onnx_runtime_gives_ftl_predictions $CHECK compare "$d/ov.npy" "$d/pv.csv" --int8
expect_error int8_export_below_opset_13_refused 2 'int8 model, exported as QuantizeLinear/DequantizeLinear .* needs opset 13' \
    "$FTL_SAN" export "$d/int8.ftl" "$d/int8_11.onnx" --opset 11

# a model whose recorded scales are damaged (a scale edited, so the hash no longer matches; not JSON;
# missing) is refused by eval, predict and export naming the file, never run with other scales
for bad in edit garbage missing; do
    "$PY" - "$d/int8.ftl" "$d/bad_$bad.ftl" "$bad" <<'PYEOF'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
meta = h["__metadata__"]
if sys.argv[3] == "edit":
    table = json.loads(meta["ftl.int8_scales"])
    table["tensors"][1][1] *= 2  # [name, scale, unsigned]
    meta["ftl.int8_scales"] = json.dumps(table)
elif sys.argv[3] == "garbage":
    meta["ftl.int8_scales"] = '{"method": "percentile-99.99", "rows": 244, "hash": '
else:
    del meta["ftl.int8_scales"]
head = json.dumps(h).encode()
head += b" " * (-len(head) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(head)) + head + raw[8 + n:])
PYEOF
    expect_error "int8_damaged_scales_${bad}_refused_by_eval" 1 "bad_$bad.ftl" \
        "$FTL_SAN" eval "$d/bad_$bad.ftl" "$V" --cache-dir "$d/cache" --quiet
    expect_error "int8_damaged_scales_${bad}_refused_by_predict" 1 "bad_$bad.ftl" "$FTL_SAN" predict "$d/bad_$bad.ftl" "$img"
    expect_error "int8_damaged_scales_${bad}_refused_by_export" 1 "bad_$bad.ftl" \
        "$FTL_SAN" export "$d/bad_$bad.ftl" "$d/bad_$bad.onnx"
done
[ ! -e "$d/bad_edit.onnx" ] && [ ! -e "$d/bad_garbage.onnx" ] && pass int8_damaged_scales_leave_no_export ||
    fail int8_damaged_scales_leave_no_export "an export was written"

# ftl embed records the calibration in the features file
"$FTL" embed "$V" --backbone "$M" "$d/val8.parquet" --precision int8 --calibration "$T" --quiet 2>"$d/embed.err" ||
    fail int8_embed "$(tail -3 "$d/embed.err")"
"$FTL" inspect "$d/val8.parquet" >"$d/val8.txt" 2>&1
check int8_features_record_precision grep -q "ftl.precision = int8" "$d/val8.txt"
check int8_features_record_calibration grep -qE 'ftl.int8_scales = \{"method":"percentile-99.99","rows":244,"hash":"[0-9a-f]{64}"' "$d/val8.txt"

# bad input: each a clear error, no sanitizer report
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds128" --size 128 --quiet 2>/dev/null
expect_error int8_calibration_of_another_size_refused 2 'calibration set .*ds128/train.parquet has 128x128 images, the data .* 224x224' \
    "$FTL_SAN" embed "$V" --backbone "$M" "$d/x.parquet" --precision int8 --calibration "$d/ds128/train.parquet"
mkdir -p "$d/few/ants" "$d/few/bees"
for f in $(ls "$SHARED/data/hymenoptera/train/ants/"*.jpg | head -3); do cp "$f" "$d/few/ants/"; done
for f in $(ls "$SHARED/data/hymenoptera/train/bees/"*.jpg | head -3); do cp "$f" "$d/few/bees/"; done
"$FTL" prep "$d/few" "$d/fewds" --size 224 --val-fraction 0.3 --quiet 2>/dev/null
expect_error int8_calibration_smaller_than_a_batch_refused 2 'calibration set .*fewds.* has [0-9] rows, fewer than a batch \(16\)' \
    "$FTL_SAN" embed "$V" --backbone "$M" "$d/y.parquet" --precision int8 --batch 16 --calibration "$d/fewds/train.parquet"
expect_error int8_unknown_calibration_method_refused 2 "--calibration-method 'entropy': expected percentile or minmax" \
    "$FTL_SAN" embed "$V" --backbone "$M" "$d/z.parquet" --precision int8 --calibration-method entropy
expect_error int8_on_a_gpu_refused 1 '--precision int8 with --device cuda: the GPU backend has no int8 path yet' \
    "$FTL_SAN" embed "$V" --backbone "$M" "$d/w.parquet" --precision int8 --device cuda
finish
