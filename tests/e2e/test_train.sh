#!/usr/bin/env bash
# ftl train / eval / predict end to end on the real hymenoptera photos with the ImageNet-pretrained
# MobileNet v1 embedding model: accuracy, eval reproducing the training run's val accuracy,
# predict agreeing with eval, exact resume after SIGKILL, the feature cache's keys, the
# per-batch backbone giving the same model, and bad inputs.
source "$(dirname "$0")/lib.sh"
d=$(scratch train)
MODEL="$SHARED/models/mobilenet_v1_1.0_224_embedding.onnx"
READ_ST="$PY $(dirname "$0")/../ref/read_safetensors.py"
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --quiet 2>/dev/null || fail train_prep "prep failed"
T="$d/ds/train.parquet"
V="$d/ds/val.parquet"
RECIPE=(--backbone "$MODEL" --batch 16 --lr 0.004 --dropout 0.5 --epochs 30
        --early-stopping monitor=val_acc,patience=3,min_delta=0.001)

# ---- the article's recipe: accuracy, eval and predict
if "$FTL" train "$T" --val "$V" "${RECIPE[@]}" --out "$d/model.ftl" --log "$d/run.jsonl" >"$d/train.out" 2>"$d/train.err"; then
    pass train_recipe_runs
else
    fail train_recipe_runs "$(tail -5 "$d/train.err")"
fi
grep -q '^Epoch 1/30 - ' "$d/train.out" && pass train_prints_keras_epoch_lines || fail train_prints_keras_epoch_lines "$(head -3 "$d/train.out")"
$READ_ST "$d/model.ftl" >"$d/model.json" || fail train_model_file_readable "independent safetensors reader failed"
$PY - "$d" <<'PYEOF' && pass train_val_accuracy_at_least_0.90 || fail train_val_accuracy_at_least_0.90 "see log"
import json, sys
d = sys.argv[1]
m = json.load(open(d + "/model.json"))
meta = m["metadata"]
metrics = json.loads(meta["ftl.metrics"])
print("metrics", metrics)
assert metrics["val_acc"] >= 0.90, metrics
assert json.loads(meta["ftl.classes"]) == ["ants", "bees"]
assert meta["ftl.feature_dim"] == "1024"
records = [json.loads(l) for l in open(d + "/run.jsonl")]
runs = [r for r in records if r.get("record") == "run"]
logs = [r for r in records if r.get("record") == "epoch"]
assert len(runs) == 1 and len(records) == len(runs) + len(logs), [r.get("record") for r in records]
run = runs[0]
assert run["command"][:2] == ["ftl", "train"] and run["backbone"]["sha256"] == meta["ftl.backbone_sha256"], run
assert run["classes"] == ["ants", "bees"] and run["ranks"] == 1 and run["machine"]["cores"] >= 1 and run["resume"] is None, run
assert len(logs) == metrics["epochs_run"] and all("val_acc" in r and "lr" in r for r in logs), logs[:1]
PYEOF

"$FTL" eval "$d/model.ftl" "$V" --json "$d/eval.json" --predictions "$d/pred.csv" --confusion "$d/confusion.csv" --quiet >"$d/eval.out" 2>"$d/eval.err" ||
    fail eval_runs "$(cat "$d/eval.err")"
$PY - "$d" <<'PYEOF' && pass eval_reproduces_training_val_accuracy_exactly || fail eval_reproduces_training_val_accuracy_exactly "see log"
import json, sys
d = sys.argv[1]
metrics = json.loads(json.load(open(d + "/model.json"))["metadata"]["ftl.metrics"])
ev = json.load(open(d + "/eval.json"))
print("train val_acc", metrics["val_acc"], "eval top1", ev["top1"], "| val_loss", metrics["val_loss"], ev["loss"])
assert ev["images"] == 153
assert ev["top1"] == metrics["val_acc"], (ev["top1"], metrics["val_acc"])
assert abs(ev["loss"] - metrics["val_loss"]) < 1e-6
conf = ev["confusion"]
assert sum(map(sum, conf)) == 153 and sum(conf[i][i] for i in range(2)) == round(ev["top1"] * 153)
PYEOF
# eval finds the cache train left next to the model (same key), and gives the same numbers
"$FTL" eval "$d/model.ftl" "$V" --json "$d/eval_cached.json" >/dev/null 2>"$d/eval_cached.err"
mkdir -p "$d/elsewhere" && cp "$d/model.ftl" "$d/elsewhere/"
"$FTL" eval "$d/elsewhere/model.ftl" "$V" --json "$d/eval_images.json" >/dev/null 2>"$d/eval_images.err"
grep -q 'feature cache: reusing .* for eval' "$d/eval_cached.err" && ! grep -q 'reusing' "$d/eval_images.err" &&
    $PY -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); assert a["top1"]==b["top1"] and a["confusion"]==b["confusion"] and abs(a["loss"]-b["loss"])<1e-6' \
        "$d/eval_cached.json" "$d/eval_images.json" && pass eval_uses_the_cache_train_left_next_to_the_model ||
    fail eval_uses_the_cache_train_left_next_to_the_model "$(cat "$d/eval_cached.err" "$d/eval_images.err" | head -5)"
# predict on every val image agrees with eval's per-image prediction
$PY -c 'import csv,sys; [print(sys.argv[1] + "/" + r["path"]) for r in csv.DictReader(open(sys.argv[2]))]' \
    "$SHARED/data/hymenoptera" "$d/pred.csv" >"$d/val_files.txt"
tr '\n' '\0' <"$d/val_files.txt" | xargs -0 "$FTL" predict "$d/model.ftl" --json --top 2 >"$d/predict.jsonl" 2>"$d/predict.err"
$PY - "$d" "$SHARED/data/hymenoptera/" <<'PYEOF' && pass predict_agrees_with_eval || fail predict_agrees_with_eval "see log"
import csv, json, sys
d, root = sys.argv[1], sys.argv[2]
ev = {r["path"]: int(r["predicted"]) for r in csv.DictReader(open(d + "/pred.csv"))}
pr = [json.loads(l) for l in open(d + "/predict.jsonl")]
assert len(pr) == len(ev) == 153, (len(pr), len(ev))
for p in pr:
    rel = p["path"][len(root):]
    assert p["top"][0]["index"] == ev[rel], (rel, p, ev[rel])
    assert p["top"][0]["probability"] >= p["top"][1]["probability"]
PYEOF
expect_error predict_bad_file_reported_others_run 1 'imageNotFound.gif: unsupported image format GIF' \
    "$FTL_SAN" predict "$d/model.ftl" "$SHARED/data/hymenoptera/train/ants/imageNotFound.gif" "$SHARED/data/hymenoptera/val/ants/10308379_1b6c72e180.jpg"
"$FTL" predict "$d/model.ftl" README.md "$SHARED/data/hymenoptera/val/ants/10308379_1b6c72e180.jpg" 2>/dev/null | grep -q '10308379_1b6c72e180.jpg:  ' &&
    pass predict_continues_after_a_bad_file || fail predict_continues_after_a_bad_file "no prediction for the good image"

# ---- the feature cache: reused, and rebuilt when a key changes
"$FTL" train "$T" --val "$V" "${RECIPE[@]}" --out "$d/again.ftl" >/dev/null 2>"$d/again.err"
grep -q 'feature cache: reusing .*train' "$d/again.err" && ! grep -q 'computing' "$d/again.err" &&
    pass feature_cache_reused || fail feature_cache_reused "$(cat "$d/again.err")"
"$FTL" train "$T" --val "$V" "${RECIPE[@]}" --input-scale torch --epochs 1 --out "$d/torch.ftl" >/dev/null 2>"$d/torch.err"
grep -q 'feature cache: computing train features' "$d/torch.err" && pass feature_cache_rebuilt_for_other_preprocessing ||
    fail feature_cache_rebuilt_for_other_preprocessing "$(cat "$d/torch.err")"
cp "$MODEL" "$d/backbone.onnx"
"$FTL" train "$T" --val "$V" --backbone "$d/backbone.onnx" --epochs 1 --out "$d/b1.ftl" >/dev/null 2>&1
$PY - "$d/backbone.onnx" <<'PYEOF'
import sys, onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
t = m.graph.initializer[0]
a = numpy_helper.to_array(t).copy()
a.flat[0] += 0.5
t.CopyFrom(numpy_helper.from_array(a, t.name))
onnx.save(m, sys.argv[1])
PYEOF
"$FTL" train "$T" --val "$V" --backbone "$d/backbone.onnx" --epochs 1 --out "$d/b2.ftl" >/dev/null 2>"$d/b2.err"
grep -q 'feature cache: computing train features' "$d/b2.err" && pass feature_cache_rebuilt_for_changed_backbone ||
    fail feature_cache_rebuilt_for_changed_backbone "$(cat "$d/b2.err")"

# A changed pixel with every size unchanged (no footer change) still invalidates the cache.
mkdir -p "$d/tiny/ants" "$d/tiny/bees"
cp "$SHARED"/data/hymenoptera/train/ants/0013035.jpg "$SHARED"/data/hymenoptera/train/ants/formica.jpeg "$d/tiny/ants/"
cp "$SHARED"/data/hymenoptera/train/bees/2405441001_b06c36fa72.jpg "$SHARED"/data/hymenoptera/train/bees/1092977343_cb42b38d62.jpg "$d/tiny/bees/"
"$FTL" prep "$d/tiny" "$d/tiny-ds" --val-fraction 0 --quiet 2>/dev/null
"$FTL" train "$d/tiny-ds/train.parquet" --backbone "$MODEL" --batch 2 --epochs 1 --out "$d/tiny1.ftl" --quiet >/dev/null 2>&1
$PY - "$d/tiny/ants/0013035.jpg" <<'PYEOF'
import sys
from PIL import Image
Image.open(sys.argv[1]).transpose(Image.FLIP_LEFT_RIGHT).save(sys.argv[1], quality=95)
PYEOF
"$FTL" prep "$d/tiny" "$d/tiny-ds" --val-fraction 0 --overwrite --quiet 2>/dev/null
"$FTL" train "$d/tiny-ds/train.parquet" --backbone "$MODEL" --batch 2 --epochs 1 --out "$d/tiny2.ftl" >/dev/null 2>"$d/tiny2.err"
grep -q 'feature cache: computing train features' "$d/tiny2.err" && pass feature_cache_rebuilt_for_changed_pixels ||
    fail feature_cache_rebuilt_for_changed_pixels "$(cat "$d/tiny2.err")"

# ---- the per-batch backbone (the article's way) trains the same model
FIXED=(--backbone "$MODEL" --batch 16 --lr 0.004 --dropout 0.5 --epochs 3)
"$FTL" train "$T" --val "$V" "${FIXED[@]}" --out "$d/cached.ftl" --quiet >/dev/null 2>&1
"$FTL" train "$T" --val "$V" "${FIXED[@]}" --out "$d/recomputed.ftl" --no-feature-cache --quiet >/dev/null 2>&1
"$FTL" train "$T" --val "$V" "${FIXED[@]}" --out "$d/streamed.ftl" --max-memory 1 >/dev/null 2>"$d/streamed.err"
grep -q 'streaming them' "$d/streamed.err" && pass cached_features_streamed_when_over_memory_limit ||
    fail cached_features_streamed_when_over_memory_limit "$(cat "$d/streamed.err")"
for m in cached recomputed streamed; do $READ_ST "$d/$m.ftl" >"$d/$m.json"; done
same_weights() {  # NAME A B
    $PY - "$d/$2.json" "$d/$3.json" <<'PYEOF' && pass "$1" || fail "$1" "see log"
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
worst = 0.0
for name, t in a["tensors"].items():
    va, vb = [float(x) for x in t["values"]], [float(x) for x in b["tensors"][name]["values"]]
    worst = max(worst, max(abs(x - y) for x, y in zip(va, vb)))
print("max weight difference", sys.argv[1], sys.argv[2], worst)
assert worst <= 1e-4, worst
PYEOF
}
same_weights no_feature_cache_gives_the_same_model cached recomputed
same_weights streamed_feature_cache_gives_the_same_model cached streamed

# ---- exact resume after SIGKILL (per-batch backbone, so epochs take long enough to interrupt)
RESUME=(--backbone "$MODEL" --batch 16 --lr 0.004 --dropout 0.5 --epochs 5 --no-feature-cache --quiet)
"$FTL" train "$T" --val "$V" "${RESUME[@]}" --out "$d/straight.ftl" >/dev/null 2>&1
"$FTL" train "$T" --val "$V" "${RESUME[@]}" --out "$d/killed.ftl" --checkpoint "$d/ckpt/checkpoint-{epoch}.ckpt" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 6000); do [ -f "$d/ckpt/checkpoint-2.ckpt" ] && break; sleep 0.05; done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
if [ -f "$d/ckpt/checkpoint-2.ckpt" ] && [ ! -f "$d/killed.ftl" ]; then pass train_killed_after_epoch_2; else fail train_killed_after_epoch_2 "no checkpoint-2 or already finished"; fi
"$FTL" train "$T" --val "$V" "${RESUME[@]}" --out "$d/killed.ftl" --checkpoint "$d/ckpt/checkpoint-{epoch}.ckpt" \
    --resume "$d/ckpt/checkpoint-2.ckpt" >/dev/null 2>"$d/resume.err" || fail train_resume_runs "$(cat "$d/resume.err")"
cmp -s "$d/straight.ftl" "$d/killed.ftl" && pass resumed_model_byte_identical || fail resumed_model_byte_identical "models differ"
# another convolution algorithm: allowed, with a warning that the run will not be identical
if "$FTL" train "$T" --val "$V" "${RESUME[@]}" --out "$d/direct.ftl" --conv-algorithm direct \
    --resume "$d/ckpt/checkpoint-2.ckpt" >/dev/null 2>"$d/resume-direct.err" &&
    grep -q 'ftl.conv_algorithm was "auto", this run uses "direct"' "$d/resume-direct.err"; then
    pass resume_other_conv_algorithm_warns
else
    fail resume_other_conv_algorithm_warns "$(cat "$d/resume-direct.err")"
fi
# inspect describes a trained model and a checkpoint (text and JSON), read back against the files
"$FTL" inspect "$d/model.ftl" --json >"$d/inspect_model.json" 2>"$d/inspect.err" &&
    "$FTL" inspect "$d/ckpt/checkpoint-2.ckpt" --json >"$d/inspect_ckpt.json" 2>>"$d/inspect.err" &&
    "$FTL" inspect "$d/model.ftl" >"$d/inspect_model.txt" 2>>"$d/inspect.err" &&
    $PY - "$d" <<'PYEOF' && pass inspect_describes_models_and_checkpoints || fail inspect_describes_models_and_checkpoints "$(cat "$d/inspect.err")"
import json, sys
d = sys.argv[1]
m, c = json.load(open(d + "/inspect_model.json")), json.load(open(d + "/inspect_ckpt.json"))
meta = json.load(open(d + "/model.json"))["metadata"]
assert m["kind"] == "model" and m["classes"] == ["ants", "bees"] and m["feature_dim"] == 1024 and m["class_count"] == 2, m
assert m["backbone"]["sha256"] == meta["ftl.backbone_sha256"] and m["metrics"] == json.loads(meta["ftl.metrics"]), m
assert m["training_args"]["lr"] == 0.004 and m["preprocessing"] == json.loads(meta["ftl.input_scaling"])
assert c["kind"] == "checkpoint" and c["resumes_after_epoch"] == 2 and c["world_size"] == 1, c
assert c["position_kind"] == "per-rank", c  # RESUME streams (--no-feature-cache): its position is per rank
text = open(d + "/inspect_model.txt").read()
assert "ftl model (ftl-model-1)" in text and meta["ftl.backbone_sha256"] in text, text
PYEOF
# 1-based labels without class names (as Spark's file_to_label writes them): a warning offering
# --label-offset -1; with it, 2 classes, recorded in the model, and eval applies it unasked
Q="node $(dirname "$0")/../tools/duckdb_query.mjs"
$Q "COPY (SELECT label + 1 AS label, image, path FROM read_parquet('$T')) TO '$d/spark_train.parquet' (FORMAT parquet)" >/dev/null
$Q "COPY (SELECT label + 1 AS label, image, path FROM read_parquet('$V')) TO '$d/spark_val.parquet' (FORMAT parquet)" >/dev/null
SPARK=(--backbone "$MODEL" --image-size 299 --epochs 2 --batch 16)
"$FTL" train "$d/spark_train.parquet" --val "$d/spark_val.parquet" "${SPARK[@]}" --out "$d/spark3.ftl" >/dev/null 2>"$d/spark3.err"
"$FTL" train "$d/spark_train.parquet" --val "$d/spark_val.parquet" "${SPARK[@]}" --label-offset -1 --out "$d/spark2.ftl" >/dev/null 2>"$d/spark2.err"
"$FTL" eval "$d/spark2.ftl" "$d/spark_val.parquet" --image-size 299 --json "$d/spark_eval.json" --quiet >/dev/null 2>"$d/spark_eval.err"
$READ_ST "$d/spark3.ftl" >"$d/spark3.json" 2>/dev/null
$READ_ST "$d/spark2.ftl" >"$d/spark2.json" 2>/dev/null
grep -q 'smallest label is 1: classes 0..2 make 3 classes, 1 of them without any image.*pass --label-offset -1' "$d/spark3.err" &&
    ! grep -q 'smallest label' "$d/spark2.err" &&
    $PY - "$d" <<'PYEOF' && pass label_offset_for_one_based_labels || fail label_offset_for_one_based_labels "$(cat "$d/spark3.err" "$d/spark2.err" "$d/spark_eval.err" | head -5)"
import json, sys
d = sys.argv[1]
m3, m2 = json.load(open(d + "/spark3.json"))["metadata"], json.load(open(d + "/spark2.json"))["metadata"]
assert json.loads(m3["ftl.classes"]) == ["0", "1", "2"], m3["ftl.classes"]
assert json.loads(m2["ftl.classes"]) == ["0", "1"] and m2["ftl.label_offset"] == "-1", m2
e = json.load(open(d + "/spark_eval.json"))
assert e["images"] == 153 and sum(map(sum, e["confusion"])) == 153 and e["top1"] > 0.8, e
PYEOF
expect_error eval_with_another_label_offset_is_refused 2 'has classes \["0", "1", "2"\] but .*spark2.ftl has \["0", "1"\]' \
    "$FTL_SAN" eval "$d/spark2.ftl" "$d/spark_val.parquet" --image-size 299 --label-offset 0 --quiet
head -c 5000 "$d/ckpt/checkpoint-2.ckpt" >"$d/truncated.ckpt"
expect_error inspect_truncated_checkpoint_is_a_clear_error 1 'truncated.ckpt' "$FTL_SAN" inspect "$d/truncated.ckpt" --json
$PY -c 'import json,struct,sys; h=json.dumps({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"__metadata__":{"format":"pt"}}).encode(); open(sys.argv[1],"wb").write(struct.pack("<Q",len(h))+h+b"\0\0\0\0")' "$d/other.safetensors"
expect_error inspect_foreign_safetensors_named 1 'other.safetensors: a safetensors file, but not an ftl model or checkpoint' \
    "$FTL_SAN" inspect "$d/other.safetensors"
expect_error resume_truncated_checkpoint_refused 1 'truncated.ckpt' \
    "$FTL_SAN" train "$T" --val "$V" "${RESUME[@]}" --out "$d/t.ftl" --resume "$d/truncated.ckpt"

# ---- --keep-last across a resume: the files left are the uninterrupted run's (each checkpoint
# lists the run's files as they are once it is written, itself included)
KEEP=(--backbone "$MODEL" --batch 16 --lr 0.004 --keep-last 2 --quiet)
"$FTL" train "$T" --val "$V" "${KEEP[@]}" --epochs 4 --checkpoint "$d/kl_a/c-{epoch}.ckpt" --out "$d/kl_a.ftl" >/dev/null 2>&1
"$FTL" train "$T" --val "$V" "${KEEP[@]}" --epochs 2 --checkpoint "$d/kl_b/c-{epoch}.ckpt" --out "$d/kl_b2.ftl" >/dev/null 2>&1
"$FTL" train "$T" --val "$V" "${KEEP[@]}" --epochs 4 --checkpoint "$d/kl_b/c-{epoch}.ckpt" --out "$d/kl_b.ftl" \
    --resume "$d/kl_b/c-2.ckpt" >/dev/null 2>"$d/kl_b.err"
[ "$(ls "$d/kl_a")" = "$(printf 'c-3.ckpt\nc-4.ckpt')" ] && [ "$(ls "$d/kl_b")" = "$(ls "$d/kl_a")" ] &&
    $READ_ST "$d/kl_b/c-4.ckpt" >"$d/kl_b4.json" && $PY - "$d" <<'PYEOF' && pass keep_last_across_resume_keeps_the_uninterrupted_files ||
import json, sys
d = sys.argv[1]
meta = json.load(open(d + "/kl_b4.json"))["metadata"]
assert json.loads(meta["ftl.checkpoints"]) == [d + "/kl_b/c-3.ckpt", d + "/kl_b/c-4.ckpt"], meta["ftl.checkpoints"]
h = json.loads(meta["ftl.history"])
assert [e["epoch"] for e in h] == [1, 2, 3, 4] and h[-1]["checkpoint"] == d + "/kl_b/c-4.ckpt", h
PYEOF
    fail keep_last_across_resume_keeps_the_uninterrupted_files "a: $(ls "$d/kl_a" | tr '\n' ' ') b: $(ls "$d/kl_b" | tr '\n' ' ') $(tail -2 "$d/kl_b.err")"
# a resume under other settings runs, saying which differ
if "$FTL" train "$T" --val "$V" "${KEEP[@]}" --epochs 3 --checkpoint "$d/kl_c/c-{epoch}.ckpt" --out "$d/kl_c.ftl" \
    --resume "$d/kl_a/c-3.ckpt" --seed 7 --dropout 0.25 --warmup-epochs 1 --shuffle-buffer 100 >/dev/null 2>"$d/kl_c.err" &&
    grep -q 'c-3.ckpt was trained with other settings (--seed 42 -> 7, --dropout 0 -> 0.25, --warmup-epochs 0 -> 1): the result will differ from an uninterrupted run' "$d/kl_c.err" &&
    grep -q 'c-3.ckpt: ftl.shuffle_buffer was "400", this run uses "100"' "$d/kl_c.err"; then
    pass resume_with_other_settings_names_them
else
    fail resume_with_other_settings_names_them "$(cat "$d/kl_c.err")"
fi
# a checkpoint whose train_state says it holds no best weights while it does: a malformed file, refused
$PY - "$d/kl_a/c-4.ckpt" "$d/lying.ckpt" <<'PYEOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
state = json.loads(h["__metadata__"]["ftl.train_state"])
assert state["early_stopping"]["has_best_params"] is True
state["early_stopping"]["has_best_params"] = False
h["__metadata__"]["ftl.train_state"] = json.dumps(state)
hb = json.dumps(h).encode()
hb += b" " * (-len(hb) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + b[8 + n:])
PYEOF
expect_error resume_best_weights_claim_checked 1 'lying.ckpt: ftl.train_state says has_best_params false but the tensor early_stopping.best_params is there' \
    "$FTL_SAN" train "$T" --val "$V" --backbone "$MODEL" --batch 16 --lr 0.004 --epochs 5 --out "$d/lying.ftl" --resume "$d/lying.ckpt"

# ---- eval's outputs: an existing file only with --overwrite, an input never, bad numbers named
cp "$d/eval.json" "$d/eval.json.before"
expect_error eval_existing_output_refused 2 'eval.json already exists \(use --overwrite' \
    "$FTL_SAN" eval "$d/model.ftl" "$V" --json "$d/eval.json" --quiet
cmp -s "$d/eval.json" "$d/eval.json.before" && pass eval_existing_output_kept || fail eval_existing_output_kept "eval.json changed"
expect_error eval_never_overwrites_its_dataset 2 'is the input DATA .*val.parquet: refusing before any work' \
    "$FTL_SAN" eval "$d/model.ftl" "$V" --predictions "$V" --overwrite --quiet
"$FTL" eval "$d/model.ftl" "$V" --json "$d/eval.json" --overwrite --quiet >/dev/null 2>"$d/eval_over.err" &&
    $PY -c 'import json,sys; assert json.load(open(sys.argv[1]))["images"] == 153' "$d/eval.json" &&
    pass eval_overwrite_replaces || fail eval_overwrite_replaces "$(cat "$d/eval_over.err")"
expect_error eval_huge_loader_threads_refused 2 'loader-threads 1500000000 is out of range' \
    "$FTL_SAN" eval "$d/model.ftl" "$V" --loader-threads 1500000000 --quiet
expect_error eval_negative_stall_timeout_refused 2 'stall-timeout must be a finite number of seconds >= 0' \
    "$FTL_SAN" eval "$d/model.ftl" "$V" --stall-timeout -5 --quiet

# ---- a checkpoint of another class set is refused
mkdir -p "$d/three/ants" "$d/three/bees" "$d/three/wasps"
cp "$SHARED"/data/hymenoptera/train/ants/0*.jpg "$d/three/ants/"
cp "$SHARED"/data/hymenoptera/train/bees/1*.jpg "$d/three/bees/"
cp "$SHARED"/data/hymenoptera/train/bees/2*.jpg "$d/three/wasps/"
"$FTL" prep "$d/three" "$d/three-ds" --quiet 2>/dev/null
"$FTL" train "$d/three-ds/train.parquet" --backbone "$MODEL" --epochs 1 --batch 4 --out "$d/three.ftl" \
    --checkpoint "$d/three-ckpt/c-{epoch}.ckpt" --quiet >/dev/null 2>&1
expect_error resume_other_class_set_refused 2 'class' \
    "$FTL" train "$T" --val "$V" "${RESUME[@]}" --out "$d/x.ftl" --resume "$d/three-ckpt/c-1.ckpt"

# ---- a validation set whose labels mean other classes is refused before any work
mkdir -p "$d/onlybees/bees"
cp "$SHARED"/data/hymenoptera/val/bees/1*.jpg "$d/onlybees/bees/"
"$FTL" prep "$d/onlybees" "$d/onlybees-ds" --val-fraction 0 --quiet 2>/dev/null
expect_error train_val_with_other_classes_refused 2 'has classes \["bees"\] but the training set' \
    "$FTL_SAN" train "$T" --val "$d/onlybees-ds/train.parquet" --backbone "$MODEL" --out "$d/x.ftl"
expect_error eval_data_with_other_classes_refused 2 'has classes \["bees"\] but .*model.ftl has' \
    "$FTL_SAN" eval "$d/model.ftl" "$d/onlybees-ds/train.parquet"

# ---- a Spark-style dataset whose label column is not an integer: a clear error, no crash
node "$(dirname "$0")/../tools/duckdb_query.mjs" "COPY (SELECT (i % 2)::FLOAT AS label, repeat('a', 12)::BLOB AS image FROM range(10) t(i)) TO '$d/floatlabel.parquet' (FORMAT parquet)" >/dev/null
expect_error train_float_labels_refused 1 "column 'label' is FLOAT; labels must be INT32 or INT64" \
    "$FTL_SAN" train "$d/floatlabel.parquet" --backbone "$MODEL" --image-size 2 --out "$d/x.ftl"

# ---- --weight-decay reaches the optimizer: recorded, and it shrinks the head (same seed, data order
# and epochs; the L2 penalty is the only difference)
for wd in 0 0.05; do
    "$FTL" train "$T" --val "$V" --backbone "$MODEL" --optimizer adam --lr 0.004 --epochs 3 --weight-decay "$wd" \
        --cache-dir "$d/wd-cache" --out "$d/wd-$wd.ftl" --quiet >/dev/null 2>"$d/wd-$wd.err" ||
        fail train_weight_decay_runs "$(tail -3 "$d/wd-$wd.err")"
done
$PY - "$d" <<'PYEOF' && pass train_weight_decay_shrinks_the_head || fail train_weight_decay_shrinks_the_head "see log"
import json, struct, sys
d = sys.argv[1]
def head(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    body = raw[8 + n:]
    meta = header.pop("__metadata__")
    w = {k: struct.unpack("<%df" % ((v["data_offsets"][1] - v["data_offsets"][0]) // 4),
                          body[v["data_offsets"][0]:v["data_offsets"][1]])
         for k, v in header.items() if v["dtype"] == "F32"}
    return meta, w
m0, w0 = head(d + "/wd-0.ftl")
m5, w5 = head(d + "/wd-0.05.ftl")
assert json.loads(m0["ftl.training_args"])["weight_decay"] == 0, m0["ftl.training_args"]
assert json.loads(m5["ftl.training_args"])["weight_decay"] == 0.05, m5["ftl.training_args"]
kernel = [k for k in w0 if "kernel" in k or "weight" in k]
assert kernel, list(w0)
n0 = sum(x * x for k in kernel for x in w0[k]) ** 0.5
n5 = sum(x * x for k in kernel for x in w5[k]) ** 0.5
print("head weight norm: wd 0 %.4f, wd 0.05 %.4f" % (n0, n5))
assert n5 < 0.98 * n0, (n0, n5)  # 3 epochs of Adam at 0.004: ~6% smaller
PYEOF
expect_error train_negative_weight_decay_refused 2 '--weight-decay must be non-negative, not -' \
    "$FTL_SAN" train "$T" --backbone "$MODEL" --out "$d/x.ftl" --weight-decay -0.1

# ---- bad usage
expect_error train_needs_backbone 2 'backbone' "$FTL_SAN" train "$T" --out "$d/x.ftl"
expect_error train_existing_model_refused 2 'already exists' "$FTL_SAN" train "$T" --val "$V" --backbone "$MODEL" --out "$d/model.ftl"
expect_error train_missing_dataset 2 'does not exist' "$FTL_SAN" train "$d/none.parquet" --backbone "$MODEL" --out "$d/x.ftl"
expect_error train_bad_optimizer 2 'rmsprop' "$FTL_SAN" train "$T" --backbone "$MODEL" --out "$d/x.ftl" --optimizer rmsprop
expect_error eval_missing_model 2 'does not exist|cannot open' "$FTL_SAN" eval "$d/none.ftl" "$V"
printf 'not a model' >"$d/garbage.ftl"
expect_error eval_garbage_model 1 'garbage.ftl' "$FTL_SAN" eval "$d/garbage.ftl" "$V"
finish
