#!/usr/bin/env bash
# --precision auto: resolved (from this CPU's measured bf16 and fp32 rates) before anything is keyed
# or written, so the model, the feature cache and checkpoints record the real precision; asking for
# the other precision by name is a changed key (recomputed, never mixed), in train, resume and eval.
source "$(dirname "$0")/lib.sh"
d=$(scratch precision_auto)
M="$SHARED/models/mobilenet_v1_0.25_128.onnx"
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --size 128 --quiet 2>/dev/null || fail precision_auto_prep "prep failed"
T="$d/ds/train.parquet" V="$d/ds/val.parquet"
ARGS=(--backbone "$M" --epochs 3 --cache-dir "$d/cache")

"$FTL" train "$T" --val "$V" "${ARGS[@]}" --precision auto --out "$d/auto.ftl" --checkpoint "$d/ck/c-{epoch}.ckpt" \
    >"$d/auto.out" 2>"$d/auto.err" || fail precision_auto_train "$(tail -3 "$d/auto.err")"
chosen=$(sed -n 's/^ftl: --precision auto: \(fp32\|bf16\) (.*/\1/p' "$d/auto.err")
check precision_auto_says_what_it_chose test -n "$chosen"
check precision_auto_names_the_rates grep -qE -- "--precision auto: (bf16 \(measured on [0-9]+ threads: bf16 [0-9]+ GFLOP/s, fp32 [0-9]+\)|fp32 \()" "$d/auto.err"
# the same choice as the profiler's peak figures give: bf16 only when its rate beats fp32's by 1.2x
"$FTL" inspect "$M" --profile --json --batch 1 --reps 1 --threads "$(nproc)" >"$d/peak.json" 2>/dev/null
want=$("$PY" -c 'import json,sys; p=json.load(open(sys.argv[1]))["peak"]; print("bf16" if p["bf16_gflops"] > 1.2 * p["fp32_gflops"] else "fp32")' "$d/peak.json")
check precision_auto_follows_the_measured_rates test "$chosen" = "$want"
"$FTL" inspect "$d/auto.ftl" >"$d/auto.txt"
check precision_auto_model_records_the_choice grep -q "precision $chosen," "$d/auto.txt"
other=fp32
[ "$chosen" = fp32 ] && other=bf16
skip_other=""
if [ "$other" = bf16 ] && why=$(no_bf16_reason); then
    # auto chose fp32, the only precision this CPU runs: nothing to hold its choice against
    skip_other=$why
    for t in precision_auto_other_precision_recomputes precision_auto_two_cache_entries precision_auto_resume_warns \
        precision_auto_resume_uses_its_own_features precision_auto_resume_records_its_precision precision_auto_eval_other; do
        skip "$t" "$why"
    done
fi

# the same precision by name reuses the cache; the other one computes its own features
"$FTL" train "$T" --val "$V" "${ARGS[@]}" --precision "$chosen" --out "$d/same.ftl" >"$d/same.out" 2>"$d/same.err"
check precision_auto_same_name_reuses_cache grep -q "feature cache: reusing 1 part .* for train" "$d/same.err"
check precision_auto_same_name_same_model cmp -s <(grep '^Epoch' "$d/auto.out" | sed 's/ - [0-9]*ms//') \
    <(grep '^Epoch' "$d/same.out" | sed 's/ - [0-9]*ms//')
if [ -z "$skip_other" ]; then
"$FTL" train "$T" --val "$V" "${ARGS[@]}" --precision "$other" --out "$d/other.ftl" >"$d/other.out" 2>"$d/other.err"
check precision_auto_other_precision_recomputes grep -q "feature cache: computing train features" "$d/other.err"
n=$(ls "$d/cache"/train-*.features.parquet 2>/dev/null | wc -l)
check precision_auto_two_cache_entries test "$n" -eq 2
# a resume under the other precision: warned about, and its features are those of that precision
"$FTL" train "$T" --val "$V" "${ARGS[@]}" --precision "$other" --out "$d/resumed.ftl" --resume "$d/ck/c-2.ckpt" \
    >"$d/resumed.out" 2>"$d/resumed.err"
check precision_auto_resume_warns grep -q "ftl.precision was \"$chosen\", this run uses \"$other\"" "$d/resumed.err"
check precision_auto_resume_uses_its_own_features grep -q "feature cache: reusing 1 part .* for train" "$d/resumed.err"
"$FTL" inspect "$d/resumed.ftl" | grep -q "precision $other," && pass precision_auto_resume_records_its_precision ||
    fail precision_auto_resume_records_its_precision "$(grep precision "$d/resumed.ftl" 2>/dev/null | head -2)"
fi
# eval follows each model's recorded precision: equal to the training run's final val metrics
evals="auto other"
[ -n "$skip_other" ] && evals=auto
for m in $evals; do
    "$FTL" eval "$d/$m.ftl" "$V" --cache-dir "$d/cache" --json "$d/$m.eval.json" >"$d/$m.eval.out" 2>&1
    "$PY" - "$d/$m.eval.json" "$d/$m.ftl" "$BUILD" <<'PYEOF' && pass "precision_auto_eval_$m" || fail "precision_auto_eval_$m" "$(cat "$d/$m.eval.out" | tail -3)"
import json, subprocess, sys
ev = json.load(open(sys.argv[1]))
meta = json.loads(subprocess.run([sys.argv[3] + "/ftl", "inspect", sys.argv[2], "--json"], capture_output=True, text=True).stdout)
acc = ev.get("top1", ev.get("accuracy"))
want = meta["metrics"]["val_acc"] if "metrics" in meta else None
print(acc, want)
sys.exit(0 if want is not None and acc is not None and abs(acc - want) < 1e-9 else 1)
PYEOF
done
expect_error precision_auto_bad_name 2 "--precision 'fastest'" "$FTL_SAN" embed "$T" --backbone "$M" "$d/x.parquet" --precision fastest
finish
