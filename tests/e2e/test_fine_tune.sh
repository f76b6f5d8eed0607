#!/usr/bin/env bash
# ftl train's two-phase recipe end to end on the real hymenoptera photos with the ImageNet-pretrained
# MobileNetV2: phase 1 trains the head on cached features, phase 2 (--fine-tune-last 4) trains the
# backbone's top with it on cached boundary tensors. Checked: phase 2 never ends worse on val than
# phase 1, the model holds the tuned tensors under the ONNX initializer names (python3-onnx reads
# the originals), ftl eval reproduces the run's val accuracy, SIGKILL + --resume in phase 2 is
# byte-identical, the per-batch bottom gives the same model as the boundary cache, a cut crossed by
# two tensors, --fine-tune-only --init, and the refusals.
source "$(dirname "$0")/lib.sh"
d=$(scratch fine-tune)
MODEL="$SHARED/models/mobilenet_v2_1.0_224_features.onnx"
READ_ST="$PY $(dirname "$0")/../ref/read_safetensors.py"
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --quiet 2>/dev/null || fail fine_tune_prep "prep failed"
T="$d/ds/train.parquet"
V="$d/ds/val.parquet"
C=(--cache-dir "$d/cache")
RECIPE=(--backbone "$MODEL" --batch 16 --epochs 6 --fine-tune-last 4 --fine-tune-epochs 4 --fine-tune-lr 1e-4
        --early-stopping monitor=val_acc,patience=2 "${C[@]}")

# ---- the two-phase recipe
if "$FTL" train "$T" --val "$V" "${RECIPE[@]}" --out "$d/model.ftl" --log "$d/run.jsonl" \
    --checkpoint "$d/ckpt/c-{epoch}.ckpt" >"$d/train.out" 2>"$d/train.err"; then
    pass two_phase_recipe_runs
else
    fail two_phase_recipe_runs "$(tail -5 "$d/train.err")"
fi
# one pass of the frozen bottom per split (its boundary rows); phase 1's features from them through the top
[ "$(grep -c 'feature cache: computing' "$d/train.err")" -eq 2 ] &&
    grep -q 'feature cache: computing train features of .* (rows 0-244)' "$d/train.err" &&
    grep -q 'feature cache: computing val features of .* (rows 0-153)' "$d/train.err" &&
    grep -q "phase 1's features of 397 rows made from their boundary rows by the frozen top (last 4)" "$d/train.err" &&
    pass recipe_runs_the_bottom_once_per_split || fail recipe_runs_the_bottom_once_per_split "$(grep 'feature cache\|fine-tuning' "$d/train.err")"
grep -q '^Fine-tuning 9 nodes (last 4, 882560 values) with the head at lr 0.0001; epoch 0: val_acc ' "$d/train.out" &&
    [ -f "$d/ckpt/fine-tune-c-1.ckpt" ] && [ -f "$d/ckpt/c-1.ckpt" ] &&
    pass phase_2_announced_with_its_own_checkpoints || fail phase_2_announced_with_its_own_checkpoints "$(tail -8 "$d/train.out")"
"$FTL" eval "$d/model.ftl" "$V" --json "$d/eval.json" --quiet >/dev/null 2>"$d/eval.err" || fail fine_tuned_eval_runs "$(cat "$d/eval.err")"
$READ_ST "$d/model.ftl" >"$d/model.json" || fail fine_tuned_model_readable "independent safetensors reader failed"
# with the train run's cache: val's boundary rows reused, only the tuned top and the head run, the same metrics
"$FTL" eval "$d/model.ftl" "$V" "${C[@]}" --json "$d/eval_cached.json" --quiet >/dev/null 2>"$d/eval_cached.err" &&
    grep -q 'eval: reusing the boundary rows of the cut (last 4) from 1 part' "$d/eval_cached.err" &&
    ! grep -q 'eval: reusing' "$d/eval.err" && cmp -s "$d/eval.json" "$d/eval_cached.json" &&
    pass eval_of_fine_tuned_model_reuses_boundary_rows || fail eval_of_fine_tuned_model_reuses_boundary_rows "$(cat "$d/eval_cached.err")"
$PY - "$d" "$MODEL" <<'PYEOF' && pass phase_2_never_worse_and_eval_reproduces_it || fail phase_2_never_worse_and_eval_reproduces_it "see log"
import json, sys
d = sys.argv[1]
recs = [json.loads(l) for l in open(d + "/run.jsonl")]
runs = [i for i, r in enumerate(recs) if r["record"] == "run"]
assert len(runs) == 2 and recs[runs[1]].get("phase") == "fine-tune", [recs[i] for i in runs]
p1 = [r for r in recs[runs[0]:runs[1]] if r["record"] == "epoch"]
p2 = [r for r in recs[runs[1]:] if r["record"] == "epoch"]
best1 = max(r["val_acc"] for r in p1)
meta = json.load(open(d + "/model.json"))["metadata"]
m = json.loads(meta["ftl.metrics"])
print("phase 1 best", best1, "phase 2 epochs", [r["val_acc"] for r in p2], "model", m)
assert m["val_acc"] >= best1 and m["val_acc"] == max([best1] + [r["val_acc"] for r in p2]), m
e = json.load(open(d + "/eval.json"))
print("eval", e["top1"], e["loss"])
assert round(e["top1"] * 153) == round(m["val_acc"] * 153), (e["top1"], m["val_acc"])
assert abs(e["loss"] - m["val_loss"]) < 1e-4, (e["loss"], m["val_loss"])
PYEOF
# phase 1 on the features the frozen top makes from the boundary rows trains as the frozen recipe does on
# the full backbone's features: the same epochs, every metric within 0.5 point (and 1e-3 in loss)
"$FTL" train "$T" --val "$V" --backbone "$MODEL" --batch 16 --epochs 6 --early-stopping monitor=val_acc,patience=2 "${C[@]}" \
    --out "$d/frozen.ftl" --log "$d/frozen.jsonl" --quiet >/dev/null 2>"$d/frozen.err" || fail frozen_recipe_runs "$(tail -3 "$d/frozen.err")"
$PY - "$d/run.jsonl" "$d/frozen.jsonl" <<'PYEOF' && pass phase_1_through_the_top_trains_as_the_frozen_recipe || fail phase_1_through_the_top_trains_as_the_frozen_recipe "see log"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
runs = [i for i, r in enumerate(recs) if r["record"] == "run"]
p1 = [r for r in recs[runs[0]:runs[1]] if r["record"] == "epoch"]
frozen = [r for r in map(json.loads, open(sys.argv[2])) if r["record"] == "epoch"]
print("phase 1", [r["val_acc"] for r in p1], "frozen", [r["val_acc"] for r in frozen])
assert len(p1) == len(frozen), (len(p1), len(frozen))
for a, b in zip(p1, frozen):
    assert abs(a["val_acc"] - b["val_acc"]) <= 0.005 and abs(a["acc"] - b["acc"]) <= 0.005, (a, b)
    assert abs(a["val_loss"] - b["val_loss"]) <= 1e-3 and abs(a["loss"] - b["loss"]) <= 1e-3, (a, b)
PYEOF
$PY - "$d/model.json" "$MODEL" <<'PYEOF' && pass tuned_tensors_named_as_onnx_initializers || fail tuned_tensors_named_as_onnx_initializers "see log"
import json, sys
import numpy as np, onnx
from onnx import numpy_helper
m = json.load(open(sys.argv[1]))
meta, tensors = m["metadata"], m["tensors"]
assert meta["ftl.format"] == "ftl-model-2" and meta["ftl.fine_tuned_tensors"] == "8" and meta["ftl.fine_tune_cut"] == "last 4", meta
inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(sys.argv[2]).graph.initializer}
tuned = {k[len("backbone/"):]: np.array(v["values"], dtype=np.float32) for k, v in tensors.items() if k.startswith("backbone/")}
assert len(tuned) == 8, list(tuned)
moved = 0
for name, values in tuned.items():
    assert name in inits and inits[name].size == values.size, name
    moved += float(np.abs(inits[name].ravel() - values).max()) > 0
print("tuned tensors that moved", moved, "of", len(tuned))
assert moved >= 1
PYEOF

# ---- ftl export writes the tuned tensors: ONNX Runtime gives ftl eval's probabilities on every val image
ORT=(node "$INTEROP/onnx_run.mjs")
"$FTL" eval "$d/model.ftl" "$V" --predictions "$d/pred.csv" --quiet >/dev/null 2>&1
node "$(dirname "$0")/../tools/dataset_images_npy.mjs" "$V" "$d/v.npy" >/dev/null &&
    "$FTL_SAN" export "$d/model.ftl" "$d/model.onnx" >"$d/export.out" 2>"$d/export.err" &&
    grep -q '^fine-tuned: 8 backbone tensors in place of the file' "$d/export.out" &&
    "${ORT[@]}" "$d/model.onnx" "$d/v.npy" "$d/ort.npy" --threads 2 >/dev/null &&
    $PY "$(dirname "$0")/export_check.py" compare "$d/ort.npy" "$d/pred.csv" &&
    pass export_of_fine_tuned_model_matches_eval_in_onnx_runtime ||
    fail export_of_fine_tuned_model_matches_eval_in_onnx_runtime "$(cat "$d/export.err")"
# predict runs the tuned backbone too: its top class and probability are eval's for the same image
IMG=$(find "$SHARED/data/hymenoptera/val/bees" -name '*.jpg' | sort | head -1)
"$FTL" predict "$d/model.ftl" "$IMG" >"$d/predict.out" 2>"$d/predict.err" &&
    $PY - "$d/predict.out" "$d/pred.csv" "$(basename "$IMG")" <<'PYEOF' && pass predict_uses_the_tuned_backbone || fail predict_uses_the_tuned_backbone "$(cat "$d/predict.err")"
import csv, re, sys
out, rows, name = open(sys.argv[1]).read(), list(csv.DictReader(open(sys.argv[2]))), sys.argv[3]
row = next(r for r in rows if r["path"].endswith(name))
m = re.search(r":\s+(ants|bees)\s+([0-9.]+)", out)
print("predict", m.group(1), m.group(2), "eval", row["predicted"], row["probability"])
assert ["ants", "bees"].index(m.group(1)) == int(row["predicted"]) and abs(float(m.group(2)) - float(row["probability"])) < 2e-3, (out, row)
PYEOF
# a tuned tensor edited after training (its CRC32C updated too, so the edit passes the tensor
# checksums) no longer matches the identity recorded with it: refused
EDIT="$PY $(dirname "$0")/safetensors_edit.py"
$EDIT add-float "$d/model.ftl" "$d/edited.ftl" "$($EDIT tensors "$d/model.ftl" | grep -m1 '^backbone/')" 1.0
expect_error export_of_edited_tuned_tensors_refused 1 'edited.ftl: its fine-tuned backbone tensors give identity .*damaged or edited' \
    "$FTL_SAN" export "$d/edited.ftl" "$d/edited.onnx"
expect_error eval_of_edited_tuned_tensors_refused 1 'damaged or edited' "$FTL_SAN" eval "$d/edited.ftl" "$V" --quiet
# a model whose recorded cut cannot be read, or whose bottom identity is not the cache's, is evaluated from
# the images (said so, no crash) with the same metrics
bad_ok=yes
for bad in "cut=last x9" "cut=last 99999999999" "cut=from " "bottom=$(printf '0%.0s' {1..64})"; do
    $PY - "$d/model.ftl" "$d/badmeta.ftl" "$bad" <<'PYEOF'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
key, value = sys.argv[3].split("=", 1)
h["__metadata__"]["ftl.fine_tune_cut" if key == "cut" else "ftl.bottom_identity"] = value
head = json.dumps(h).encode()
head += b" " * (-len(head) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(head)) + head + raw[8 + n:])
PYEOF
    rm -f "$d/badmeta.json"
    "$FTL_SAN" eval "$d/badmeta.ftl" "$V" "${C[@]}" --json "$d/badmeta.json" --quiet >/dev/null 2>"$d/badmeta.err" &&
        ! grep -q 'reusing the boundary rows' "$d/badmeta.err" && cmp -s "$d/eval.json" "$d/badmeta.json" ||
        { bad_ok="$bad: $(cat "$d/badmeta.err")"; break; }
done
[ "$bad_ok" = yes ] && pass eval_with_unreadable_cut_metadata_uses_the_images ||
    fail eval_with_unreadable_cut_metadata_uses_the_images "$bad_ok"

# ---- SIGKILL in phase 2, then --resume: the same bytes as an uninterrupted run
KR=(--backbone "$MODEL" --batch 16 --epochs 3 --fine-tune-last 4 --fine-tune-epochs 3 --fine-tune-lr 1e-4 "${C[@]}" --quiet)
"$FTL" train "$T" --val "$V" "${KR[@]}" --out "$d/straight.ftl" >/dev/null 2>&1
FTL_TEST_STEP_SLEEP_MS=60 "$FTL" train "$T" --val "$V" "${KR[@]}" --out "$d/killed.ftl" \
    --checkpoint "$d/kckpt/c-{epoch}.ckpt" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 6000); do [ -f "$d/kckpt/fine-tune-c-1.ckpt" ] && break; sleep 0.05; done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
if [ -f "$d/kckpt/fine-tune-c-1.ckpt" ] && [ ! -f "$d/kckpt/fine-tune-c-3.ckpt" ] && [ ! -f "$d/killed.ftl" ]; then
    pass killed_in_phase_2
else
    fail killed_in_phase_2 "no phase-2 checkpoint, or the run had already finished"
fi
"$FTL" train "$T" --val "$V" "${KR[@]}" --out "$d/killed.ftl" --checkpoint "$d/kckpt/c-{epoch}.ckpt" \
    --resume "$d/kckpt/fine-tune-c-1.ckpt" >/dev/null 2>"$d/resume.err" || fail phase_2_resume_runs "$(cat "$d/resume.err")"
cmp -s "$d/straight.ftl" "$d/killed.ftl" && pass phase_2_resume_byte_identical || fail phase_2_resume_byte_identical "models differ"
# a resume in phase 1, whose features the frozen top makes per batch here (--max-memory 1 streams the
# boundary rows), finishes phase 1 and runs phase 2 to the uninterrupted run's model, byte for byte
P1=(--backbone "$MODEL" --epochs 3 --fine-tune-last 4 --fine-tune-epochs 1 --fine-tune-lr 1e-4 --max-memory 1 "${C[@]}")
"$FTL" train "$T" --val "$V" "${P1[@]}" --checkpoint "$d/p1ck/c-{epoch}.ckpt" --out "$d/p1_straight.ftl" >/dev/null 2>"$d/p1.err" &&
    "$FTL_SAN" train "$T" --val "$V" "${P1[@]}" --resume "$d/p1ck/c-1.ckpt" --out "$d/p1_resumed.ftl" >/dev/null 2>>"$d/p1.err" &&
    grep -q 'the frozen top runs on every batch' "$d/p1.err" && cmp -s "$d/p1_straight.ftl" "$d/p1_resumed.ftl" &&
    pass phase_1_resume_through_the_top_byte_identical || fail phase_1_resume_through_the_top_byte_identical "$(tail -3 "$d/p1.err")"
"$FTL" inspect "$d/kckpt/fine-tune-c-1.ckpt" --json >"$d/ckpt.json" 2>/dev/null &&
    "$FTL" inspect "$MODEL" --fine-tune-last 4 >"$d/cut.txt" 2>/dev/null &&
    $PY - "$d" <<'PYEOF' && pass inspect_phase_2_checkpoint || fail inspect_phase_2_checkpoint "see log"
import json, re, sys
d = sys.argv[1]
c = json.load(open(d + "/ckpt.json"))
values = int(re.search(r"([\d,]+) values", open(d + "/cut.txt").read()).group(1).replace(",", ""))
assert c["kind"] == "checkpoint" and c["backbone"]["fine_tune_cut"] == "last 4", c
assert c["backbone"]["fine_tuning_values"] == values == 882560, (c, values)
PYEOF

# ---- the boundary cache off (the bottom recomputed every batch) trains the same model
BC=(--backbone "$MODEL" --batch 16 --epochs 2 --fine-tune-last 4 --fine-tune-epochs 2 --fine-tune-lr 1e-4 "${C[@]}" --quiet)
"$FTL" train "$T" --val "$V" "${BC[@]}" --out "$d/cached.ftl" >/dev/null 2>&1
"$FTL" train "$T" --val "$V" "${BC[@]}" --out "$d/recomputed.ftl" --no-feature-cache >/dev/null 2>&1
$READ_ST "$d/cached.ftl" >"$d/cached.json" && $READ_ST "$d/recomputed.ftl" >"$d/recomputed.json" &&
    $PY - "$d/cached.json" "$d/recomputed.json" <<'PYEOF' && pass boundary_cache_off_gives_the_same_model || fail boundary_cache_off_gives_the_same_model "see log"
import json, sys
import numpy as np
a, b = json.load(open(sys.argv[1]))["tensors"], json.load(open(sys.argv[2]))["tensors"]
assert sorted(a) == sorted(b) and len(a) == 10, sorted(a)
worst = max(float(np.abs(np.array(a[k]["values"], dtype=np.float64) - np.array(b[k]["values"], dtype=np.float64)).max()) for k in a)
print("max weight difference", worst)
assert worst <= 1e-4, worst
PYEOF

# ---- a cut crossed by two tensors (a residual Add and the last block's depthwise output), its boundary
# rows streamed from disk (--max-memory 1), with a phase-2 warmup
"$FTL" inspect "$MODEL" --fine-tune-last 5 | grep -c '^boundary' | grep -qx 2 || fail two_boundary_cut_exists "last 5 should have 2 boundary tensors"
"$FTL" train "$T" --val "$V" --backbone "$MODEL" --epochs 2 --fine-tune-last 5 --fine-tune-epochs 2 --fine-tune-lr 1e-4 \
    --fine-tune-warmup-epochs 2 --max-memory 1 --log "$d/two.jsonl" "${C[@]}" --out "$d/two.ftl" >/dev/null 2>"$d/two.err" &&
    [ "$(grep -c 'streaming them' "$d/two.err")" -eq 1 ] && grep -q 'the frozen top runs on every batch of boundary rows' "$d/two.err" &&
    $PY - "$d/two.jsonl" <<'PYEOF' && pass phase_2_warmup_and_streamed_boundary || fail phase_2_warmup_and_streamed_boundary "$(tail -3 "$d/two.err")"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
runs = [i for i, r in enumerate(recs) if r["record"] == "run"]
lrs = [r["lr"] for r in recs[runs[1]:] if r["record"] == "epoch"]
print("phase-2 lr at the end of each epoch", lrs)  # a ramp over 2 epochs of 15 steps: 15/30, then 30/30 of 1e-4
assert len(lrs) == 2 and abs(lrs[0] - 0.5e-4) < 1e-12 and abs(lrs[1] - 1e-4) < 1e-12, lrs
PYEOF
"$FTL" train "$T" --val "$V" --backbone "$MODEL" --epochs 2 --fine-tune-last 5 --fine-tune-epochs 1 --fine-tune-lr 1e-4 \
    "${C[@]}" --out "$d/two.ftl" --overwrite --quiet >/dev/null 2>"$d/two.err" &&
    "$FTL" eval "$d/two.ftl" "$V" --json "$d/two_eval.json" --quiet >/dev/null 2>>"$d/two.err" &&
    $READ_ST "$d/two.ftl" >"$d/two.json" &&
    $PY - "$d" <<'PYEOF' && pass two_boundary_cut_trains_and_eval_reproduces || fail two_boundary_cut_trains_and_eval_reproduces "$(tail -3 "$d/two.err")"
import json, sys
d = sys.argv[1]
m = json.loads(json.load(open(d + "/two.json"))["metadata"]["ftl.metrics"])
e = json.load(open(d + "/two_eval.json"))
assert round(e["top1"] * 153) == round(m["val_acc"] * 153) and abs(e["loss"] - m["val_loss"]) < 1e-4, (e, m)
PYEOF

# ---- --fine-tune-only --init: phase 2 alone, its epoch 0 the given model measured on this val set
"$FTL" train "$T" --val "$V" --backbone "$MODEL" --epochs 3 "${C[@]}" --out "$d/head.ftl" --quiet >/dev/null 2>&1
"$FTL" eval "$d/head.ftl" "$V" --json "$d/head_eval.json" --quiet >/dev/null 2>&1
"$FTL" train "$T" --val "$V" --backbone "$MODEL" --fine-tune-only --init "$d/head.ftl" --fine-tune-last 4 \
    --fine-tune-epochs 1 --fine-tune-lr 1e-4 "${C[@]}" --out "$d/only.ftl" >"$d/only.out" 2>"$d/only.err" &&
    $PY - "$d" <<'PYEOF' && pass fine_tune_only_starts_from_init || fail fine_tune_only_starts_from_init "$(tail -3 "$d/only.err")"
import json, re, sys
d = sys.argv[1]
out = open(d + "/only.out").read()
epoch0 = float(re.search(r"epoch 0: val_acc ([\d.]+)", out).group(1))
e = json.load(open(d + "/head_eval.json"))
print("epoch 0", epoch0, "eval of --init", e["top1"])
assert abs(epoch0 - e["top1"]) < 1e-4 and "Epoch 1/1" in out and "phase 1" not in out, out
PYEOF

# ---- --augment flip: both orientations cached (features and boundary tensors), each (seed, pass, row)
# drawing one; the mirrored features are ONNX Runtime's on Pillow-mirrored images, and recomputing
# the backbone every batch draws the same flips (the same model)
AUG=(--backbone "$MODEL" --epochs 2 --fine-tune-last 4 --fine-tune-epochs 2 --fine-tune-lr 1e-4 --augment flip)
"$FTL" train "$T" --val "$V" "${AUG[@]}" --cache-dir "$d/flipcache" --out "$d/flip.ftl" --checkpoint "$d/fckpt/c-{epoch}.ckpt" \
    >/dev/null 2>"$d/flip.err" || fail flip_recipe_runs "$(tail -3 "$d/flip.err")"
"$FTL" train "$T" --val "$V" "${AUG[@]}" --cache-dir "$d/flipcache" --out "$d/flip_recomputed.ftl" --no-feature-cache \
    --quiet >/dev/null 2>&1 || fail flip_recomputed_runs "train --no-feature-cache failed"
# the bottom runs once per split and orientation: train, train mirrored, val; phase 1 uses the top on them
[ "$(grep -c 'feature cache: computing' "$d/flip.err")" -eq 3 ] &&
    [ "$(grep -c 'features of .*, mirrored (rows 0-244)' "$d/flip.err")" -eq 1 ] && ! grep -q 'val.parquet, mirrored' "$d/flip.err" &&
    grep -q "phase 1's features of 641 rows made from their boundary rows by the frozen top (last 4)" "$d/flip.err" &&
    pass flip_caches_both_orientations_of_train_only || fail flip_caches_both_orientations_of_train_only "$(cat "$d/flip.err")"
# the frozen recipe caches the full backbone's mirrored features: checked against ONNX Runtime below
"$FTL" train "$T" --backbone "$MODEL" --epochs 1 --augment flip --cache-dir "$d/flipcache" --out "$d/flip_frozen.ftl" \
    >/dev/null 2>"$d/flip_frozen.err" || fail flip_frozen_runs "$(tail -3 "$d/flip_frozen.err")"
MIRRORED=$(grep -m1 'features of .*, mirrored' "$d/flip_frozen.err" | sed 's/.* into //')
DUCK="node $(dirname "$0")/../tools/duckdb_query.mjs"
$DUCK "SELECT file_row_number AS i, hex(image) AS img FROM read_parquet('$T', file_row_number=true) ORDER BY i" >"$d/train_images.json"
$DUCK "SELECT file_row_number AS i, hex(features) AS f FROM read_parquet('$MIRRORED', file_row_number=true) ORDER BY i" >"$d/mirrored.json"
$PY - "$d" <<'PYEOF' && node "$INTEROP/onnx_run.mjs" "$MODEL" "$d/mx.npy" "$d/mref.npy" --threads 2 >/dev/null 2>&1 &&
import json, sys
import numpy as np
from PIL import Image
d = sys.argv[1]
rows = json.load(open(d + "/train_images.json"))
x = np.zeros((len(rows), 3, 224, 224), np.float32)
for k, r in enumerate(rows):
    img = Image.frombytes("RGB", (299, 299), bytes.fromhex(r["img"])).transpose(Image.FLIP_LEFT_RIGHT)
    x[k] = (np.asarray(img.resize((224, 224), Image.BILINEAR), np.float32) / 127.5 - 1.0).transpose(2, 0, 1)
np.save(d + "/mx.npy", x)
PYEOF
    $PY - "$d" <<'PYEOF' && pass flipped_features_match_onnx_runtime_on_mirrored_images || fail flipped_features_match_onnx_runtime_on_mirrored_images "see log"
import json, sys
import numpy as np
d = sys.argv[1]
ref = np.load(d + "/mref.npy").reshape(244, -1)
got = np.array([np.frombuffer(bytes.fromhex(r["f"]), "<f4") for r in json.load(open(d + "/mirrored.json"))])
worst = float(np.abs(got - ref).max() / max(1.0, np.abs(ref).max()))
print("mirrored features vs ONNX Runtime: max relative difference", worst)
assert got.shape == ref.shape and worst < 1e-4, (got.shape, worst)
PYEOF
$READ_ST "$d/flip.ftl" >"$d/flip.json" && $READ_ST "$d/flip_recomputed.ftl" >"$d/flip_recomputed.json" &&
    $PY - "$d/flip.json" "$d/flip_recomputed.json" "$d/cached.json" <<'PYEOF' && pass flip_draws_the_same_with_the_cache_off || fail flip_draws_the_same_with_the_cache_off "see log"
import json, sys
import numpy as np
a, b, plain = (json.load(open(p)) for p in sys.argv[1:4])
assert json.loads(a["metadata"]["ftl.training_args"])["augment"] == "flip"
diff = lambda x, y: max(float(np.abs(np.array(x[k]["values"], np.float64) - np.array(y[k]["values"], np.float64)).max()) for k in x)
same, other = diff(a["tensors"], b["tensors"]), diff(a["tensors"], plain["tensors"])
print("flip cached vs recomputed", same, "flip vs no augmentation", other)
assert same <= 1e-4 and other > 1e-3, (same, other)
PYEOF
expect_error resume_with_other_augmentation_refused 2 'ftl.augment is "flip" in the checkpoint but "none" here' \
    "$FTL_SAN" train "$T" --val "$V" --backbone "$MODEL" --epochs 2 --cache-dir "$d/flipcache" --out "$d/t.ftl" \
    --resume "$d/fckpt/c-1.ckpt"
expect_error augment_crop_refused 2 'augments with flip' "$FTL_SAN" train "$T" --backbone "$MODEL" --augment crop --out "$d/t.ftl"

# ---- --precision bf16: the bottom and the top's convolutions in bf16 (fp32 master weights); eval of
# the model agrees with the run's own validation
if why=$(no_bf16_reason); then
    skip bf16_fine_tuning_trains_and_eval_agrees "$why"
else
"$FTL" train "$T" --val "$V" --backbone "$MODEL" --epochs 2 --fine-tune-last 4 --fine-tune-epochs 1 --fine-tune-lr 1e-4 \
    --precision bf16 "${C[@]}" --out "$d/bf16.ftl" --quiet >/dev/null 2>"$d/bf16.err" &&
    "$FTL" eval "$d/bf16.ftl" "$V" --json "$d/bf16_eval.json" --quiet >/dev/null 2>>"$d/bf16.err" &&
    $READ_ST "$d/bf16.ftl" >"$d/bf16.json" &&
    $PY - "$d" <<'PYEOF' && pass bf16_fine_tuning_trains_and_eval_agrees || fail bf16_fine_tuning_trains_and_eval_agrees "$(tail -3 "$d/bf16.err")"
import json, sys
d = sys.argv[1]
meta = json.load(open(d + "/bf16.json"))["metadata"]
m, e = json.loads(meta["ftl.metrics"]), json.load(open(d + "/bf16_eval.json"))
print("bf16 run val_acc", m["val_acc"], "eval", e["top1"], "loss", m["val_loss"], e["loss"])
assert meta["ftl.precision"] == "bf16" and abs(e["top1"] - m["val_acc"]) <= 1.5 / 153 and abs(e["loss"] - m["val_loss"]) < 0.02, (m, e)
PYEOF
fi

# ---- refusals, before any work where possible
head -c 6000 "$d/kckpt/fine-tune-c-1.ckpt" >"$d/truncated.ckpt"
expect_error phase_2_truncated_checkpoint_refused 1 'truncated.ckpt' \
    "$FTL_SAN" train "$T" --val "$V" "${KR[@]}" --out "$d/t.ftl" --resume "$d/truncated.ckpt"
expect_error phase_2_checkpoint_of_another_cut_refused 2 'fine-tunes the cut "last 4", this run "last 5"' \
    "$FTL_SAN" train "$T" --val "$V" --backbone "$MODEL" --fine-tune-last 5 "${C[@]}" --out "$d/t.ftl" \
    --resume "$d/kckpt/fine-tune-c-1.ckpt"
expect_error phase_2_checkpoint_without_the_cut_refused 2 'fine-tuning checkpoint; give the same --fine-tune-last' \
    "$FTL_SAN" train "$T" --val "$V" --backbone "$MODEL" "${C[@]}" --out "$d/t.ftl" --resume "$d/kckpt/fine-tune-c-1.ckpt"
expect_error init_without_fine_tune_only_refused 2 '--init MODEL.ftl goes with --fine-tune-only' \
    "$FTL_SAN" train "$T" --val "$V" --backbone "$MODEL" --fine-tune-last 4 --init "$d/head.ftl" --out "$d/t.ftl"
expect_error fine_tune_only_without_init_refused 2 'give --init MODEL.ftl' \
    "$FTL_SAN" train "$T" --val "$V" --backbone "$MODEL" --fine-tune-last 4 --fine-tune-only --out "$d/t.ftl"
expect_error fine_tune_last_too_many_refused 2 '1000' \
    "$FTL_SAN" train "$T" --val "$V" --backbone "$MODEL" --fine-tune-only --init "$d/head.ftl" --fine-tune-last 1000 \
    "${C[@]}" --out "$d/t.ftl"
expect_error fine_tune_from_unknown_tensor_refused 2 'no_such_tensor' \
    "$FTL_SAN" train "$T" --val "$V" --backbone "$MODEL" --fine-tune-only --init "$d/head.ftl" --fine-tune-from no_such_tensor \
    "${C[@]}" --out "$d/t.ftl"
# a reader refuses a model format it does not know (as ftl-model-1 readers refuse ftl-model-2)
$PY - "$d/model.ftl" "$d/future.ftl" <<'PYEOF'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
h["__metadata__"]["ftl.format"] = "ftl-model-3"
hb = json.dumps(h).encode()
hb += b" " * ((8 - len(hb) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])
PYEOF
expect_error newer_model_format_refused 1 'ftl-model-3' "$FTL_SAN" eval "$d/future.ftl" "$V" --quiet
finish
