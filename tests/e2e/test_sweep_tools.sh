#!/usr/bin/env bash
# ftl sweep, then fine-tune (--fine-tune-top K) on the real hymenoptera photos with MobileNetV2: phase
# 1 of every trial is trained together on the shared boundary rows (each trial's phase 1 equals ftl
# train's with the cut, epoch for epoch), only the K best by val are fine-tuned, and the one kept as
# BEST equals ftl train with the best trial's settings and --fine-tune-last N: the same tensors, bit
# for bit, and the same metrics. Then the refusals, and the new grid parameters' refusals.
source "$(dirname "$0")/lib.sh"
d=$(scratch sweep-tools)
MODEL="$SHARED/models/mobilenet_v2_1.0_224_features.onnx"
READ_ST="$PY $(dirname "$0")/../ref/read_safetensors.py"
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --quiet 2>/dev/null || fail sweep_tools_prep "prep failed"
T="$d/ds/train.parquet"
V="$d/ds/val.parquet"
RECIPE=(--val "$V" --backbone "$MODEL" --batch 16 --epochs 3 --seed 7 --fine-tune-last 4 --fine-tune-epochs 2
        --fine-tune-lr 1e-4)

# ---- three trials (lr), the best one fine-tuned
if "$FTL" sweep "$T" "${RECIPE[@]}" --grid lr=1e-4,3e-4,1e-3 --fine-tune-top 1 --out "$d/best.ftl" \
    >"$d/sweep.out" 2>"$d/sweep.err"; then
    pass sweep_fine_tune_top_runs
else
    fail sweep_fine_tune_top_runs "$(tail -5 "$d/sweep.err")"
fi
# phase 1 stacked (not trial by trial), its features through the cut from the boundary rows, computed once
grep -q '^sweep: 3 trials in [12] stacks' "$d/sweep.out" && ! grep -q 'one after the other' "$d/sweep.out" &&
    [ "$(grep -c 'feature cache: computing' "$d/sweep.err")" -eq 2 ] &&
    grep -q "phase 1's features of 397 rows made from their boundary rows by the frozen top (last 4)" "$d/sweep.err" &&
    pass sweep_fine_tune_top_phase_1_stacked_on_boundary_rows ||
    fail sweep_fine_tune_top_phase_1_stacked_on_boundary_rows "$(grep 'feature cache\|stacks\|fine-tuning' "$d/sweep.out" "$d/sweep.err")"
n_tuned=$(find "$d/best.trials" -name 'trial-*.fine-tuned.ftl' | wc -l)
check sweep_fine_tune_top_tunes_only_k test "$n_tuned" -eq 1 -a "$(grep -c '^sweep: fine-tuning trial' "$d/sweep.out")" -eq 1

# the fine-tuned one is the best of phase 1; BEST is its fine-tuned model; the table says so
"$PY" - "$d" >"$d/best.txt" <<'PYEOF' && pass sweep_fine_tune_top_picks_the_best_of_phase_1 || fail sweep_fine_tune_top_picks_the_best_of_phase_1 "$(cat "$d/best.txt")"
import json, sys
d = sys.argv[1]
rows = json.load(open(d + "/best.trials/results.json"))
assert len(rows) == 3 and rows[0]["fine_tuned"] and not any(r["fine_tuned"] for r in rows[1:]), rows
phase1 = [(r["head_val_acc"], -r["trial"]) for r in rows]
top = rows[0]
assert top["head_val_acc"] >= max(r["val_acc"] for r in rows[1:]), rows
assert top["val_acc"] >= top["head_val_acc"], top  # phase 2 never ends worse on val than phase 1
assert top["model"].endswith("trial-%04d.fine-tuned.ftl" % top["trial"]), top
assert open(d + "/best.ftl", "rb").read() == open(top["model"], "rb").read()
print(top["trial"], top["settings"]["lr"])
PYEOF
read -r best_trial best_lr <"$d/best.txt"

# by hand: ftl train with the best trial's settings and the cut, both phases in one run
"$FTL" train "$T" "${RECIPE[@]}" --lr "${best_lr:-1}" --cache-dir "$d/best.trials/ftl-feature-cache" \
    --out "$d/hand.ftl" --log "$d/hand.jsonl" >"$d/hand.out" 2>"$d/hand.err" || fail sweep_fine_tune_by_hand_runs "$(tail -3 "$d/hand.err")"
# phase 1: the sweep's trial log equals the by-hand run's phase 1 epoch for epoch (metrics and lr)
"$PY" - "$d" "${best_trial:-0}" <<'PYEOF' && pass sweep_fine_tune_top_phase_1_equals_ftl_train || fail sweep_fine_tune_top_phase_1_equals_ftl_train "see log"
import json, sys
d, t = sys.argv[1], int(sys.argv[2])
keys = ("epoch", "steps", "loss", "acc", "val_loss", "val_acc", "lr", "best_epoch")
recs = [json.loads(l) for l in open(d + "/hand.jsonl")]
runs = [i for i, r in enumerate(recs) if r["record"] == "run"]
hand1 = [tuple(r[k] for k in keys) for r in recs[runs[0]:runs[1]] if r["record"] == "epoch"]
hand2 = [tuple(r[k] for k in keys) for r in recs[runs[1]:] if r["record"] == "epoch"]
mine1 = [tuple(r[k] for k in keys) for r in map(json.loads, open(d + "/best.trials/trial-%04d.jsonl" % t)) if r["record"] == "epoch"]
mine2 = [tuple(r[k] for k in keys) for r in map(json.loads, open(d + "/best.trials/trial-%04d.fine-tune.jsonl" % t)) if r["record"] == "epoch"]
print("phase 1", mine1, "\nphase 2", mine2)
assert mine1 == hand1 and mine1, (mine1, hand1)
assert mine2 == hand2 and mine2, (mine2, hand2)
PYEOF
# phase 2: the same tensors bit for bit (head and tuned top), the same metrics
$READ_ST "$d/best.ftl" >"$d/best.json" && $READ_ST "$d/hand.ftl" >"$d/hand.json" ||
    fail sweep_fine_tune_models_readable "independent safetensors reader failed"
"$PY" - "$d" <<'PYEOF' && pass sweep_fine_tune_top_equals_fine_tuning_by_hand || fail sweep_fine_tune_top_equals_fine_tuning_by_hand "see log"
import json, sys
d = sys.argv[1]
a, b = json.load(open(d + "/best.json")), json.load(open(d + "/hand.json"))
assert sorted(a["tensors"]) == sorted(b["tensors"]) and len(a["tensors"]) > 2, (sorted(a["tensors"]), sorted(b["tensors"]))
differ = [n for n in a["tensors"] if a["tensors"][n] != b["tensors"][n]]
assert not differ, differ
ma, mb = json.loads(a["metadata"]["ftl.metrics"]), json.loads(b["metadata"]["ftl.metrics"])
print(len(a["tensors"]), "tensors equal; metrics", ma)
assert ma == mb, (ma, mb)
assert a["metadata"]["ftl.fine_tune_start"] == b["metadata"]["ftl.fine_tune_start"]
PYEOF

# ---- refusals, before any work
expect_error sweep_fine_tune_top_zero_refused 2 '--fine-tune-top 0: the number of trials to fine-tune must be at least 1' \
    "$FTL_SAN" sweep "$T" "${RECIPE[@]}" --grid lr=1e-3,1e-2 --fine-tune-top 0 --out "$d/x.ftl"
expect_error sweep_fine_tune_top_needs_the_cut 2 '--fine-tune-top 2 picks the trials that phase 2 fine-tunes: give the cut too' \
    "$FTL_SAN" sweep "$T" --val "$V" --backbone "$MODEL" --grid lr=1e-3,1e-2 --fine-tune-top 2 --out "$d/x.ftl"
expect_error sweep_fine_tune_top_needs_stacking 2 '--fine-tune-top trains phase 1 of the trials together .*--no-feature-cache' \
    "$FTL_SAN" sweep "$T" "${RECIPE[@]}" --grid lr=1e-3,1e-2 --fine-tune-top 1 --no-feature-cache --out "$d/x.ftl"
expect_error sweep_label_smoothing_out_of_range 2 'label-smoothing 1 is out of range \(expected in \[0, 1\)\)' \
    "$FTL_SAN" sweep "$T" --val "$V" --backbone "$MODEL" --grid label-smoothing=0,1 --out "$d/x.ftl"
expect_error sweep_unknown_lr_schedule 2 '--grid lr-schedule=constant,linear: --lr-schedule "linear": expected' \
    "$FTL_SAN" sweep "$T" --val "$V" --backbone "$MODEL" --grid lr-schedule=constant,linear --out "$d/x.ftl"
expect_error sweep_min_lr_with_constant_trial 2 'trial 1 \(lr-schedule=constant\) is not a valid ftl train run' \
    "$FTL_SAN" sweep "$T" --val "$V" --backbone "$MODEL" --min-lr 1e-4 --grid lr-schedule=constant,cosine --out "$d/x.ftl"
test ! -e "$d/x.trials" && pass sweep_tools_refused_before_any_work || fail sweep_tools_refused_before_any_work "x.trials was made"
finish
