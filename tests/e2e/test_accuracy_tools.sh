#!/usr/bin/env bash
# The accuracy tools at cached-feature cost on the real hymenoptera photos (MobileNet v1 0.25):
# label smoothing (the reported train loss is the smoothed one, val's the plain one that `ftl eval`
# computes), the learning-rate schedules as logged per epoch against their formulas (computed here
# in Python), plateau's reductions, a resume in the middle of a plateau schedule giving the same
# model as the uninterrupted run, phase 2's own schedule, Python's ftl.train taking the options,
# and the refusals.
source "$(dirname "$0")/lib.sh"
d=$(scratch accuracy-tools)
MODEL="$SHARED/models/mobilenet_v1_0.25_128.onnx"
READ_ST="$PY $(dirname "$0")/../ref/read_safetensors.py"
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --size 128 --quiet 2>/dev/null || fail accuracy_prep "prep failed"
T="$d/ds/train.parquet"
V="$d/ds/val.parquet"
BASE=(--val "$V" --backbone "$MODEL" --cache-dir "$d/cache" --batch 16 --seed 5)

# ---- label smoothing: train loss smoothed, val loss plain (= ftl eval's)
"$FTL" train "$T" "${BASE[@]}" --epochs 3 --lr 0.003 --label-smoothing 0.2 --no-restore-best --out "$d/ls.ftl" \
    --log "$d/ls.jsonl" >"$d/ls.out" 2>"$d/ls.err" || fail label_smoothing_runs "$(tail -3 "$d/ls.err")"
"$FTL" train "$T" "${BASE[@]}" --epochs 3 --lr 0.003 --no-restore-best --out "$d/plain.ftl" --log "$d/plain.jsonl" \
    >/dev/null 2>&1 || fail label_smoothing_runs "the plain run failed"
"$FTL" eval "$d/ls.ftl" "$V" --json "$d/ls-eval.json" --quiet >/dev/null 2>"$d/ls-eval.err"
$READ_ST "$d/ls.ftl" >"$d/ls.json" || fail label_smoothing_model_readable "independent safetensors reader failed"
$PY - "$d" <<'PYEOF' && pass label_smoothing_val_loss_is_plain || fail label_smoothing_val_loss_is_plain "see log"
import json, sys
d = sys.argv[1]
ls = [json.loads(l) for l in open(d + "/ls.jsonl")]
plain = [json.loads(l) for l in open(d + "/plain.jsonl")]
epochs = [r for r in ls if r["record"] == "epoch"]
ev = json.load(open(d + "/ls-eval.json"))
print("eval", ev.get("loss"), "last epoch val_loss", epochs[-1]["val_loss"])
assert abs(ev["loss"] - epochs[-1]["val_loss"]) <= 1e-5 * abs(ev["loss"]), (ev["loss"], epochs[-1]["val_loss"])
model = json.load(open(d + "/ls.json"))["metadata"]
args = json.loads(model["ftl.training_args"])
assert args["label_smoothing"] == 0.2 and args["lr_schedule"] == "constant", args  # recorded in the model
# the same first step from the same weights: a smoothed loss differs from the plain one
p1 = [r for r in plain if r["record"] == "epoch"][0]
assert abs(epochs[0]["loss"] - p1["loss"]) > 1e-3, (epochs[0]["loss"], p1["loss"])
PYEOF

# ---- schedules as logged, against their formulas
check_lrs() {  # NAME LOG PYTHON-EXPR-OF(e, T, lr) [warmup]: each epoch's logged lr (its last step's)
    $PY - "$2" "$3" <<'PYEOF' && pass "$1" || fail "$1" "see log"
import json, math, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
epochs = [r for r in recs if r["record"] == "epoch"]
T = epochs[0]["epochs"]
for r in epochs:
    e, lr = r["epoch"] - 1, 0.01
    want = eval(sys.argv[2], {"math": math, "e": e, "T": T, "lr": lr})
    print(r["epoch"], r["lr"], want)
    assert abs(r["lr"] - want) <= 1e-12 * want, (r["epoch"], r["lr"], want)
PYEOF
}
"$FTL" train "$T" "${BASE[@]}" --epochs 6 --lr 0.01 --lr-schedule cosine --min-lr 0.001 --out "$d/cos.ftl" \
    --log "$d/cos.jsonl" --quiet >/dev/null 2>"$d/cos.err" || fail schedule_cosine_runs "$(tail -3 "$d/cos.err")"
check_lrs schedule_cosine_logged "$d/cos.jsonl" '0.001 + (lr - 0.001) * (1 + math.cos(math.pi * e / T)) / 2'
"$FTL" train "$T" "${BASE[@]}" --epochs 7 --lr 0.01 --lr-schedule step:2:0.5 --out "$d/step.ftl" \
    --log "$d/step.jsonl" --quiet >/dev/null 2>"$d/step.err" || fail schedule_step_runs "$(tail -3 "$d/step.err")"
check_lrs schedule_step_logged "$d/step.jsonl" 'lr * 0.5 ** (e // 2)'

# ---- plateau: reductions said and logged; a resume in the middle gives the uninterrupted model
PL=(--epochs 12 --lr 0.05 --lr-schedule plateau:2:0.5:0.006 --early-stopping monitor=val_loss)
"$FTL" train "$T" "${BASE[@]}" "${PL[@]}" --out "$d/pl.ftl" --log "$d/pl.jsonl" --checkpoint "$d/ck/c-{epoch}.ckpt" \
    >"$d/pl.out" 2>"$d/pl.err" || fail plateau_runs "$(tail -3 "$d/pl.err")"
$PY - "$d/pl.jsonl" "$d/pl.out" <<'PYEOF' && pass plateau_reduces_as_keras || fail plateau_reduces_as_keras "see log"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"epoch"' in l]
epochs = [r for r in recs if r["record"] == "epoch"]
said = [l for l in open(sys.argv[2]) if "reducing the learning rate" in l]
# Keras ReduceLROnPlateau(patience=2, factor=0.5, min_lr=0.006, min_delta=0), written out here
lr, best, wait, want = 0.05, None, 0, []
for r in epochs:
    want.append(lr)
    v = r["val_loss"]
    if best is None or v < best:
        best, wait = v, 0
    else:
        wait += 1
        if wait >= 2:
            wait = 0
            if lr > 0.006:
                lr = max(lr * 0.5, 0.006)
got = [r["lr"] for r in epochs]
print("logged", got, "expected", want, "said", len(said))
assert all(abs(a - b) <= 1e-12 for a, b in zip(got, want)), (got, want)
assert len(set(got)) >= 2, "no reduction happened: the test data did not plateau"
assert len(said) == len(set(got)) - 1, said
PYEOF
ck=$(ls "$d/ck" | grep -E '^c-[0-9]+\.ckpt$' | sort -t- -k2 -n | sed -n 5p)
"$FTL" train "$T" "${BASE[@]}" "${PL[@]}" --out "$d/pl-resumed.ftl" --resume "$d/ck/$ck" --quiet >/dev/null 2>"$d/resume.err"
if $READ_ST "$d/pl.ftl" >"$d/a.json" && $READ_ST "$d/pl-resumed.ftl" >"$d/b.json" &&
    $PY -c 'import json,sys; a,b=(json.load(open(p))["tensors"] for p in sys.argv[1:3]); assert a and a==b' "$d/a.json" "$d/b.json"; then
    pass plateau_resume_same_model
else
    fail plateau_resume_same_model "resumed from $ck: $(tail -3 "$d/resume.err")"
fi

# ---- phase 2's own schedule (cosine over --fine-tune-epochs at --fine-tune-lr)
"$FTL" train "$T" "${BASE[@]}" --epochs 2 --fine-tune-last 1 --fine-tune-epochs 3 --fine-tune-lr 1e-3 \
    --fine-tune-lr-schedule cosine --out "$d/ft.ftl" --log "$d/ft.jsonl" --quiet >/dev/null 2>"$d/ft.err" ||
    fail fine_tune_schedule_runs "$(tail -3 "$d/ft.err")"
$PY - "$d/ft.jsonl" <<'PYEOF' && pass fine_tune_schedule_logged || fail fine_tune_schedule_logged "see log"
import json, math, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
runs = [i for i, r in enumerate(recs) if r["record"] == "run"]
phase2 = [r for r in recs[runs[-1]:] if r["record"] == "epoch"]
got = [r["lr"] for r in phase2]
want = [1e-3 * (1 + math.cos(math.pi * e / 3)) / 2 for e in range(len(got))]
print(got, want)
assert len(runs) == 2 and got and all(abs(a - b) <= 1e-15 for a, b in zip(got, want)), (runs, got, want)
phase1 = [r["lr"] for r in recs[:runs[-1]] if r["record"] == "epoch"]
assert phase1 and all(x == 0.001 for x in phase1), phase1  # phase 1 keeps its constant default
PYEOF

# ---- a sweep's best model: eval finds the trials' feature cache (BEST.trials/ftl-feature-cache)
mkdir -p "$d/sw"
"$FTL" sweep "$T" --val "$V" --backbone "$MODEL" --epochs 2 --seed 5 --grid lr=1e-3,1e-2 --out "$d/sw/best.ftl" \
    --quiet >/dev/null 2>"$d/sw.err" || fail sweep_for_eval_runs "$(tail -3 "$d/sw.err")"
"$FTL" eval "$d/sw/best.ftl" "$V" --json "$d/sw-eval.json" >/dev/null 2>"$d/sw-eval.err"
"$FTL" eval "$d/sw/best.ftl" "$V" --json "$d/sw-eval-fresh.json" --cache-dir "$d/empty-cache" >/dev/null 2>"$d/sw-fresh.err"
grep -q "eval: reusing the features of rows 0-153 from 1 part in .*sw/best.trials/ftl-feature-cache" "$d/sw-eval.err" &&
    cmp -s "$d/sw-eval.json" "$d/sw-eval-fresh.json" && pass eval_of_sweep_best_reuses_trial_cache ||
    fail eval_of_sweep_best_reuses_trial_cache "$(cat "$d/sw-eval.err" | head -3)"

# ---- Python: ftl.train takes the options
PYTHONPATH="$BUILD/python" $PY - "$T" "$V" "$MODEL" "$d" >"$d/py.out" 2>&1 <<'PYEOF' && pass python_train_takes_schedule_and_smoothing || fail python_train_takes_schedule_and_smoothing "$(tail -3 "$d/py.out")"
import math, sys, ftl
t, v, model, d = sys.argv[1:5]
h = ftl.train(t, val=v, backbone=model, out=d + "/py.ftl", cache_dir=d + "/cache", epochs=4, lr=0.01, seed=5,
              lr_schedule="cosine", label_smoothing=0.1, verbose=0)
lrs = [e["lr"] for e in h.history] if isinstance(h.history, list) else h.history["lr"]
want = [0.01 * (1 + math.cos(math.pi * e / 4)) / 2 for e in range(4)]
assert all(abs(a - b) <= 1e-12 for a, b in zip(lrs, want)), (lrs, want)
print("ok", lrs)
PYEOF

# ---- refusals
expect_error schedule_unknown_refused 2 'lr-schedule "linear": expected constant, cosine' \
    "$FTL_SAN" train "$T" "${BASE[@]}" --lr-schedule linear --out "$d/x.ftl"
expect_error schedule_plateau_without_val_refused 2 'plateau follows val_acc, which is not measured' \
    "$FTL_SAN" train "$T" --backbone "$MODEL" --cache-dir "$d/cache" --lr-schedule plateau:2:0.5 --out "$d/x.ftl"
expect_error min_lr_without_its_schedule_refused 2 'min-lr is the floor of --lr-schedule cosine or plateau' \
    "$FTL_SAN" train "$T" "${BASE[@]}" --min-lr 1e-4 --out "$d/x.ftl"
expect_error label_smoothing_out_of_range_refused 2 'label-smoothing must be in \[0, 1\), not 1' \
    "$FTL_SAN" train "$T" "${BASE[@]}" --label-smoothing 1 --out "$d/x.ftl"
[ ! -e "$d/x.ftl" ] && pass refusals_write_nothing || fail refusals_write_nothing "x.ftl exists"
finish
