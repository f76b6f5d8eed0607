#!/usr/bin/env bash
# Flip test-time augmentation (--tta flip) on the real hymenoptera photos (MobileNet v1 0.25): the
# model records it and eval / predict / export follow it; predict's probabilities are the mean of
# `ftl predict --tta none` on the file and on the file mirrored by Pillow; eval from the feature
# cache (both orientations) equals eval from the images; train's validation under TTA equals ftl
# eval's, for cached, streamed (--no-feature-cache) and fine-tuned runs; the exported graph (uint8
# and float input, --logits) equals ftl in ONNX Runtime; Python's Model takes tta=; the refusals (a
# resume under another --tta: the monitored metric would change meaning).
source "$(dirname "$0")/lib.sh"
d=$(scratch tta)
MODEL="$SHARED/models/mobilenet_v1_0.25_128.onnx"
READ_ST="$PY $(dirname "$0")/../ref/read_safetensors.py"
CHECK="$PY $(dirname "$0")/export_check.py"
ORT=(node "$INTEROP/onnx_run.mjs")
IMAGES_NPY="$(dirname "$0")/../tools/dataset_images_npy.mjs"
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --size 128 --quiet 2>/dev/null || fail tta_prep "prep failed"
T="$d/ds/train.parquet"
V="$d/ds/val.parquet"
BASE=(--val "$V" --backbone "$MODEL" --batch 16 --seed 5 --epochs 3 --lr 0.003 --no-restore-best)

# ---- training with TTA: recorded, and its validation is what ftl eval computes
"$FTL" train "$T" "${BASE[@]}" --cache-dir "$d/cache" --tta flip --out "$d/tta.ftl" --log "$d/tta.jsonl" \
    >"$d/tta.out" 2>"$d/tta.err" || fail tta_train_runs "$(tail -n 3 "$d/tta.err")"
grep -q 'val features of .*, mirrored' "$d/tta.err" && pass tta_train_caches_mirrored_val ||
    fail tta_train_caches_mirrored_val "$(grep 'feature cache' "$d/tta.err")"
"$FTL" eval "$d/tta.ftl" "$V" --cache-dir "$d/cache" --json "$d/eval_cached.json" --predictions "$d/pred_cached.csv" \
    >"$d/eval_cached.out" 2>"$d/eval_cached.err" || fail tta_eval_runs "$(tail -n 3 "$d/eval_cached.err")"
"$FTL" eval "$d/tta.ftl" "$V" --cache-dir "$d/nothing-cached" --json "$d/eval_images.json" \
    --predictions "$d/pred_images.csv" >/dev/null 2>"$d/eval_images.err" || fail tta_eval_runs "$(tail -n 3 "$d/eval_images.err")"
"$FTL" eval "$d/tta.ftl" "$V" --cache-dir "$d/cache" --tta none --json "$d/eval_plain.json" >/dev/null 2>&1 ||
    fail tta_eval_runs "--tta none failed"
[ "$(grep -c 'reusing 1 part' "$d/eval_cached.err")" = 2 ] && grep -q 'flip TTA (as the model was trained)' "$d/eval_cached.err" &&
    pass tta_eval_follows_the_model_and_reuses_both_orientations ||
    fail tta_eval_follows_the_model_and_reuses_both_orientations "$(cat "$d/eval_cached.err")"
$READ_ST "$d/tta.ftl" >"$d/tta.json" || fail tta_model_readable "independent safetensors reader failed"
$PY - "$d" <<'PYEOF' && pass tta_val_equals_eval_and_differs_from_plain || fail tta_val_equals_eval_and_differs_from_plain "see log"
import csv, json, sys
d = sys.argv[1]
meta = json.load(open(d + "/tta.json"))["metadata"]
assert meta["ftl.tta"] == "flip" and json.loads(meta["ftl.training_args"])["tta"] == "flip", meta
last = [json.loads(l) for l in open(d + "/tta.jsonl") if '"record":"epoch"' in l][-1]
cached, images, plain = (json.load(open(f"{d}/eval_{k}.json")) for k in ("cached", "images", "plain"))
print("val", last["val_loss"], last["val_acc"], "eval cached", cached["loss"], cached["top1"], "images", images["loss"],
      "plain", plain["loss"])
assert abs(cached["loss"] - last["val_loss"]) <= 1e-6 * cached["loss"] and abs(cached["top1"] - last["val_acc"]) < 1e-12
# the features from the cache and from the images are the same floats, so the same predictions
assert abs(cached["loss"] - images["loss"]) <= 1e-9 * cached["loss"]
assert list(csv.reader(open(d + "/pred_cached.csv"))) == list(csv.reader(open(d + "/pred_images.csv")))
assert abs(plain["loss"] - cached["loss"]) > 1e-4  # TTA changes the scores
PYEOF

# ---- predict: the mean of the two orientations, each predicted from its own file
ls "$SHARED"/data/hymenoptera/val/bees/*.jpg | head -n 6 >"$d/files.txt"
mkdir -p "$d/mirrored"
$PY - "$d" <<'PYEOF' || fail tta_predict_setup "Pillow mirroring failed"
import os, sys
from PIL import Image
d = sys.argv[1]
for f in open(d + "/files.txt").read().split():
    name = os.path.basename(f).rsplit(".", 1)[0]
    Image.open(f).convert("RGB").transpose(Image.FLIP_LEFT_RIGHT).save(f"{d}/mirrored/{name}.png")
PYEOF
mapfile -t files <"$d/files.txt"
"$FTL" predict "$d/tta.ftl" "${files[@]}" --json >"$d/p_tta.jsonl" 2>/dev/null &&
    "$FTL" predict "$d/tta.ftl" "${files[@]}" --tta none --json >"$d/p_plain.jsonl" 2>/dev/null &&
    "$FTL" predict "$d/tta.ftl" "$d"/mirrored/*.png --tta none --json >"$d/p_mirrored.jsonl" 2>/dev/null ||
    fail tta_predict_runs "predict failed"
$PY - "$d" <<'PYEOF' && pass tta_predict_is_the_mean_of_the_file_and_its_mirror || fail tta_predict_is_the_mean_of_the_file_and_its_mirror "see log"
import json, os, sys
d = sys.argv[1]
def load(f):
    return {os.path.basename(r["path"]).rsplit(".", 1)[0]: {t["class"]: t["probability"] for t in r["top"]}
            for r in map(json.loads, open(f"{d}/{f}"))}
tta, plain, mirrored = load("p_tta.jsonl"), load("p_plain.jsonl"), load("p_mirrored.jsonl")
assert len(tta) == 6 and tta.keys() == plain.keys() == mirrored.keys()
moved = 0
for k in tta:
    for c in tta[k]:
        want = (plain[k][c] + mirrored[k][c]) / 2
        print(k, c, tta[k][c], want)
        assert abs(tta[k][c] - want) <= 2e-6  # printed with 6 decimals
        moved += abs(plain[k][c] - mirrored[k][c]) > 1e-4
assert moved > 0  # the mirror images score differently, so the test can tell
PYEOF

# ---- export: the graph averages both orientations (uint8 input, --logits, float input)
node "$IMAGES_NPY" "$V" "$d/v.npy" >/dev/null || fail tta_export_setup "reading the val images with DuckDB failed"
if "$FTL_SAN" export "$d/tta.ftl" "$d/tta.onnx" >"$d/x.out" 2>"$d/x.err" &&
    "$FTL" export "$d/tta.ftl" "$d/tta_logits.onnx" --logits --quiet 2>>"$d/x.err" &&
    "${ORT[@]}" "$d/tta.onnx" "$d/v.npy" "$d/o.npy" --threads 2 >/dev/null &&
    "${ORT[@]}" "$d/tta_logits.onnx" "$d/v.npy" "$d/ol.npy" --threads 2 >/dev/null; then
    $CHECK compare "$d/o.npy" "$d/pred_cached.csv" && $CHECK compare "$d/ol.npy" "$d/pred_cached.csv" --logits &&
        grep -q '^flip TTA' "$d/x.out" && pass tta_export_equals_ftl_eval_in_onnx_runtime ||
        fail tta_export_equals_ftl_eval_in_onnx_runtime "see log"
else
    fail tta_export_equals_ftl_eval_in_onnx_runtime "$(cat "$d/x.err")"
fi
"$FTL" export "$d/tta.ftl" "$d/tta_float.onnx" --input float-nchw --quiet 2>/dev/null &&
    $PY -c "import numpy as np; x = np.load('$d/v.npy').astype(np.float32); np.save('$d/vf.npy', (x / 127.5 - 1).transpose(0, 3, 1, 2).copy())" &&
    "${ORT[@]}" "$d/tta_float.onnx" "$d/vf.npy" "$d/of.npy" --threads 2 >/dev/null &&
    $CHECK compare "$d/of.npy" "$d/pred_cached.csv" && pass tta_export_float_input_equals_ftl_eval ||
    fail tta_export_float_input_equals_ftl_eval "see log"
"$FTL" export "$d/tta.ftl" "$d/plain.onnx" --tta none --quiet 2>/dev/null &&
    "${ORT[@]}" "$d/plain.onnx" "$d/v.npy" "$d/op.npy" --threads 2 >/dev/null &&
    "$FTL" eval "$d/tta.ftl" "$V" --cache-dir "$d/cache" --tta none --predictions "$d/pred_plain.csv" --quiet >/dev/null 2>&1 &&
    $CHECK compare "$d/op.npy" "$d/pred_plain.csv" && pass tta_export_none_is_the_plain_graph ||
    fail tta_export_none_is_the_plain_graph "see log"

# ---- validation under TTA when the backbone runs per batch, and when fine-tuning
"$FTL" train "$T" "${BASE[@]}" --no-feature-cache --tta flip --out "$d/stream.ftl" --log "$d/stream.jsonl" \
    >/dev/null 2>"$d/stream.err" || fail tta_streamed_runs "$(tail -n 3 "$d/stream.err")"
$PY - "$d" <<'PYEOF' && pass tta_streamed_validation_equals_cached || fail tta_streamed_validation_equals_cached "see log"
import json, sys
d = sys.argv[1]
a = [json.loads(l) for l in open(d + "/tta.jsonl") if '"record":"epoch"' in l][0]
b = [json.loads(l) for l in open(d + "/stream.jsonl") if '"record":"epoch"' in l][0]
print(a["val_loss"], b["val_loss"], a["val_acc"], b["val_acc"])
# epoch 1 trains on the same batches in both modes; the scores of both orientations match
assert abs(a["val_loss"] - b["val_loss"]) <= 1e-5 * a["val_loss"] and a["val_acc"] == b["val_acc"]
PYEOF
"$FTL" train "$T" "${BASE[@]}" --cache-dir "$d/cache" --tta flip --fine-tune-last 2 --fine-tune-epochs 2 \
    --fine-tune-lr 1e-4 --out "$d/ft.ftl" --log "$d/ft.jsonl" >/dev/null 2>"$d/ft.err" ||
    fail tta_fine_tune_runs "$(tail -n 3 "$d/ft.err")"
"$FTL" eval "$d/ft.ftl" "$V" --cache-dir "$d/cache" --json "$d/eval_ft.json" --quiet >/dev/null 2>"$d/eval_ft.err" ||
    fail tta_fine_tune_runs "eval failed: $(tail -n 3 "$d/eval_ft.err")"
$PY - "$d" <<'PYEOF' && pass tta_fine_tuned_validation_equals_eval || fail tta_fine_tuned_validation_equals_eval "see log"
import json, sys
d = sys.argv[1]
last = [json.loads(l) for l in open(d + "/ft.jsonl") if '"record":"epoch"' in l][-1]
ev = json.load(open(d + "/eval_ft.json"))
print(last["val_loss"], ev["loss"], last["val_acc"], ev["top1"])
assert abs(ev["loss"] - last["val_loss"]) <= 1e-5 * ev["loss"] and abs(ev["top1"] - last["val_acc"]) < 1e-12
PYEOF

# ---- Python
PYTHONPATH="$BUILD/python" $PY - "$d" "$V" "$MODEL" <<'PYEOF' && pass tta_python_model_options || fail tta_python_model_options "see log"
import json, sys
import numpy as np
import ftl
d, val = sys.argv[1], sys.argv[2]
m = ftl.Model.load(d + "/tta.ftl")
assert m.tta == "flip"
x = np.random.RandomState(3).randint(0, 256, (4, 128, 128, 3)).astype(np.uint8)
p, plain, mirrored = m.predict(x), m.predict(x, tta="none"), m.predict(x[:, :, ::-1].copy(), tta="none")
assert np.abs(p - (plain + mirrored) / 2).max() <= 1e-6, np.abs(p - (plain + mirrored) / 2).max()
assert ftl.Model.load(d + "/tta.ftl", tta="none").tta == "none"
e = m.evaluate(val, cache_dir=d + "/cache", verbose=0)
e_none = m.evaluate(val, cache_dir=d + "/cache", verbose=0, tta="none")
assert e["loss"] == json.load(open(d + "/eval_cached.json"))["loss"] and e_none["loss"] == json.load(open(d + "/eval_plain.json"))["loss"]
assert m.export(d + "/py.onnx", tta="none")["tta_flip"] is False
h = ftl.train(d + "/ds/train.parquet", val=val, backbone=sys.argv[3], out=d + "/py.ftl", epochs=1, tta="flip",
              cache_dir=d + "/cache", verbose=0)
assert h.model.tta == "flip", h.model.tta
try:
    m.predict(x, tta="crop")
    raise SystemExit("tta='crop' was accepted")
except ValueError as err:
    assert "flip" in str(err), err
PYEOF

# ---- refusals
"$FTL" train "$T" "${BASE[@]}" --cache-dir "$d/cache" --tta flip --epochs 2 --checkpoint "$d/ck/c-{epoch}.ckpt" \
    --out "$d/ck.ftl" --quiet >/dev/null 2>&1 || fail tta_resume_setup "the checkpointed run failed"
"$FTL" train "$T" "${BASE[@]}" --cache-dir "$d/cache" --resume "$d/ck/c-1.ckpt" --out "$d/ck2.ftl" --quiet >/dev/null 2>"$d/ck.err"
[ $? -ne 0 ] && grep -q 'ftl.tta is "flip" in the checkpoint but "none" here' "$d/ck.err" && [ ! -e "$d/ck2.ftl" ] &&
    pass tta_resume_with_another_tta_refused || fail tta_resume_with_another_tta_refused "$(cat "$d/ck.err")"
"$FTL" eval "$d/tta.ftl" "$V" --tta crop >/dev/null 2>"$d/bad.err"
[ $? = 2 ] && grep -q 'test-time augmentation is flip' "$d/bad.err" && pass tta_unknown_kind_refused ||
    fail tta_unknown_kind_refused "$(cat "$d/bad.err")"
"$FTL" train "$T" --backbone "$MODEL" --epochs 1 --tta flip --cache-dir "$d/cache" --out "$d/noval.ftl" \
    >/dev/null 2>"$d/noval.err"
grep -q 'tta flip scores validation, and there is no --val' "$d/noval.err" && pass tta_without_val_says_so ||
    fail tta_without_val_says_so "$(cat "$d/noval.err")"
finish
