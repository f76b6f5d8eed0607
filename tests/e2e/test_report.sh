#!/usr/bin/env bash
# ftl report: the page's plotted points read back against the logs (every value, every epoch),
# the eval and timeline sections against their files, several logs overlaid, a resumed run, a
# fine-tuned run (two phases on one axis), the layout (ticks, axes, bars, labels), the time parts, the
# degenerate logs (one epoch, no validation, a truncated last line) and a file that is not a
# log; then headless Chromium renders it in a network namespace without network: the screenshot
# is not blank and nothing was requested from outside.
source "$(dirname "$0")/lib.sh"
d=$(scratch report)
MODEL="$SHARED/models/mobilenet_v1_0.25_128.onnx"
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --size 128 --quiet 2>/dev/null
T="$d/ds/train.parquet" V="$d/ds/val.parquet"
RUN=(--backbone "$MODEL" --lr 0.004 --dropout 0.5 --epochs 8 --early-stopping monitor=val_acc,patience=3 --quiet)
"$FTL" train "$T" --val "$V" "${RUN[@]}" --checkpoint "$d/ck/c-{epoch}.ckpt" --log "$d/a.jsonl" --timeline "$d/trace.json" \
    --out "$d/a.ftl" >/dev/null 2>&1 || fail report_setup "train failed"
"$FTL" train "$T" --val "$V" "${RUN[@]}" --lr 0.001 --log "$d/b.jsonl" --out "$d/b.ftl" >/dev/null 2>&1
"$FTL" eval "$d/a.ftl" "$V" --json "$d/eval.json" --quiet >/dev/null 2>&1
# a resumed run: 2 epochs, then a resume to 5 appending to the same log
"$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 2 --checkpoint "$d/rk/c-{epoch}.ckpt" --log "$d/r.jsonl" --out "$d/r1.ftl" >/dev/null 2>&1
"$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 5 --early-stopping monitor=val_acc,patience=9 --checkpoint "$d/rk/c-{epoch}.ckpt" \
    --resume "$d/rk/c-2.ckpt" --log "$d/r.jsonl" --out "$d/r2.ftl" >/dev/null 2>&1

"$FTL" report "$d/a.jsonl" "$d/b.jsonl" -o "$d/report.html" --eval "$d/eval.json" --timeline "$d/trace.json" >/dev/null 2>"$d/report.err" &&
    pass report_runs || fail report_runs "$(cat "$d/report.err")"
READBACK="$(dirname "$0")/report_readback.py"
$PY "$READBACK" "$d/report.html" "$d/a.jsonl" "$d/b.jsonl" --eval "$d/eval.json" --timeline "$d/trace.json" &&
    pass report_points_agree_with_logs_eval_and_timeline || fail report_points_agree_with_logs_eval_and_timeline "see log"

"$FTL" report "$d/r.jsonl" -o "$d/resumed.html" >/dev/null 2>&1
$PY "$READBACK" "$d/resumed.html" "$d/r.jsonl" --expect-resumes 1 && pass report_resumed_run_shows_its_segments ||
    fail report_resumed_run_shows_its_segments "see log"

# a fine-tuned run: one run with two phases on one epoch axis
"$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 4 --early-stopping monitor=val_acc,patience=9 --fine-tune-last 2 --fine-tune-epochs 3 \
    --log "$d/ft.jsonl" --out "$d/ft.ftl" >/dev/null 2>&1 || fail report_fine_tuned_run "train failed"
"$FTL" report "$d/ft.jsonl" "$d/a.jsonl" -o "$d/ft.html" >/dev/null 2>"$d/ft.err"
$PY "$READBACK" "$d/ft.html" "$d/ft.jsonl" "$d/a.jsonl" && grep -q '<th>phase 2</th><td>fine-tuning ' "$d/ft.html" &&
    grep -q 'fine-tuning from here' "$d/ft.html" && pass report_fine_tuned_run_phases_on_one_axis ||
    fail report_fine_tuned_run_phases_on_one_axis "$(cat "$d/ft.err")"
# a fine-tuned run resumed from a phase-1 checkpoint into the same log: the interrupted run's later
# epochs (phase 1's and its phase 2) give way to the resumed run's; its phase 2 is not a resume
FT=("${RUN[@]}" --epochs 4 --early-stopping monitor=val_acc,patience=9 --fine-tune-last 2 --fine-tune-epochs 2
    --checkpoint "$d/fk/c-{epoch}.ckpt" --log "$d/fr.jsonl")
"$FTL" train "$T" --val "$V" "${FT[@]}" --out "$d/fr1.ftl" >/dev/null 2>&1 &&
    "$FTL" train "$T" --val "$V" "${FT[@]}" --resume "$d/fk/c-2.ckpt" --out "$d/fr2.ftl" >/dev/null 2>"$d/fr.err" &&
    "$FTL" report "$d/fr.jsonl" -o "$d/fr.html" >/dev/null 2>>"$d/fr.err" &&
    $PY "$READBACK" "$d/fr.html" "$d/fr.jsonl" --expect-resumes 1 &&
    $PY -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; runs=[x for x in r if x["record"]=="run"]; assert [x.get("phase") for x in runs]==[None,"fine-tune",None,"fine-tune"] and runs[2]["resume"] and runs[3]["resume"] is None, runs' "$d/fr.jsonl" &&
    pass report_resumed_fine_tune_run || fail report_resumed_fine_tune_run "$(tail -3 "$d/fr.err")"
# two runs appended to one log without a resume: nothing of the first is dropped
"$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 2 --log "$d/twice.jsonl" --out "$d/tw1.ftl" >/dev/null 2>&1
"$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 2 --log "$d/twice.jsonl" --out "$d/tw2.ftl" >/dev/null 2>&1
"$FTL" report "$d/twice.jsonl" -o "$d/twice.html" >/dev/null 2>&1 && $PY "$READBACK" "$d/twice.html" "$d/twice.jsonl" &&
    [ "$(grep -o '<circle[^>]*data-metric\|<g class="series" data-run="0" data-metric="loss">' "$d/twice.html" | wc -l)" -ge 1 ] &&
    ! grep -q 'logged again' "$d/twice.html" && pass report_two_runs_in_one_log_keep_all_epochs ||
    fail report_two_runs_in_one_log_keep_all_epochs "see log"
# every page's layout: round ticks in range, axes >= 0, a log lr axis when it spans > 10x, bars in
# the plot, one scale for overlaid runs, no overlapping labels, no empty facts
LAYOUT="$(dirname "$0")/report_layout.py"
for page in report resumed ft fr twice; do
    $PY "$LAYOUT" "$d/$page.html" && pass "report_layout_$page" || fail "report_layout_$page" "see log"
done
grep -q 'data-y-scale="log"' "$d/ft.html" && pass report_lr_axis_log_across_phases || fail report_lr_axis_log_across_phases "linear"
# no line joins phase 1's last epoch to phase 2's first (the learning rate's 0.004 to 1e-5)
$PY - "$d/ft.html" <<'PYEOF' && pass report_lines_break_between_phases || fail report_lines_break_between_phases "see log"
import re, sys
page = open(sys.argv[1]).read()
for g in re.findall(r'<g class="series" data-run="0" data-metric="[a-z_]+">(.*?)</g>', page):
    lines = re.findall(r'<polyline [^>]*points="([^"]*)"', g)
    phases = re.findall(r'data-phase="(\d)"', g)
    assert len(lines) == len(set(phases)) == 2, (len(lines), set(phases))
PYEOF

# the epoch records' time parts: measured, >= 0, adding up to the epoch's time (fine-tuned,
# resumed and, where mpirun exists, 2-rank runs)
logs=("$d/ft.jsonl" "$d/r.jsonl" "$d/a.jsonl")
if command -v mpirun >/dev/null 2>&1 && "$FTL" --version | grep -q 'Open MPI'; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
        mpirun --oversubscribe --bind-to none -np 2 "$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 3 --batch 16 --threads 1 \
        --log "$d/np2.jsonl" --out "$d/np2.ftl" >/dev/null 2>&1 && logs+=("$d/np2.jsonl") || fail report_time_parts "np 2 run failed"
else
    skip report_time_parts_np2 "mpirun (openmpi-bin) is not installed or ftl was built without MPI"
fi
$PY - "${logs[@]}" <<'PYEOF' && pass report_time_parts_measured_and_complete || fail report_time_parts_measured_and_complete "see log"
import json, sys
parts = ("data_wait_s", "backbone_s", "head_s", "allreduce_s", "validation_s", "checkpoint_s", "other_s")
n = 0
for path in sys.argv[1:]:
    phases = set()
    for r in map(json.loads, open(path)):
        if r.get("record") == "run":
            phases.add(r.get("phase", "head"))
        if r.get("record") != "epoch":
            continue
        t = r["time"]
        assert set(t) == set(parts), (path, sorted(t))
        assert all(t[k] >= 0 for k in parts), (path, r["epoch"], t)
        total = sum(t[k] for k in parts)
        assert abs(total - r["time_s"]) <= 0.05 * r["time_s"] + 1e-6, (path, r["epoch"], total, r["time_s"])
        n += 1
    print(path, sorted(phases), "ok")
assert n > 10, n
PYEOF

# ftl train --report: the page of the run just trained
"$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 3 --log "$d/t.jsonl" --report "$d/t.html" --out "$d/t.ftl" >/dev/null 2>&1 &&
    $PY "$READBACK" "$d/t.html" "$d/t.jsonl" && pass report_from_train_flag || fail report_from_train_flag "see log"
expect_error report_flag_needs_a_log 2 '--report draws the log: give --log' "$FTL_SAN" train "$T" "${RUN[@]}" --report "$d/x.html" --out "$d/x.ftl"

# degenerate logs still render, each with a note
head -2 "$d/a.jsonl" >"$d/one.jsonl"
"$FTL" train "$T" "${RUN[@]}" --early-stopping monitor=acc --epochs 2 --log "$d/noval.jsonl" --out "$d/nv.ftl" >/dev/null 2>&1
head -c $(($(wc -c <"$d/a.jsonl") - 40)) "$d/a.jsonl" >"$d/cut.jsonl"
for k in one:'one epoch only' noval:'no validation metrics' cut:'is incomplete and was skipped'; do
    name=${k%%:*} want=${k#*:}
    if "$FTL" report "$d/$name.jsonl" -o "$d/$name.html" >/dev/null 2>"$d/$name.err" && grep -q "$want" "$d/$name.html" &&
        $PY "$READBACK" "$d/$name.html" "$d/$name.jsonl" >/dev/null; then
        pass "report_degenerate_log_${name}_renders_with_a_note"
    else
        fail "report_degenerate_log_${name}_renders_with_a_note" "$(cat "$d/$name.err")"
    fi
done
expect_error report_refuses_a_file_that_is_not_a_log 1 'README.md: line 1 is not a JSON object: not an ftl training log' \
    "$FTL_SAN" report README.md -o "$d/bad.html"
[ ! -e "$d/bad.html" ] && pass report_writes_nothing_on_error || fail report_writes_nothing_on_error "bad.html exists"
expect_error report_refuses_an_existing_output 2 'already exists' "$FTL_SAN" report "$d/a.jsonl" -o "$d/report.html"
# hostile inputs: huge numbers in a log, a timeline whose step numbers ask for terabytes, inf counts
printf '{"record":"epoch","epoch":1,"loss":1,"acc":0.5}\n{"record":"epoch","epoch":2,"loss":1e999,"acc":0.5,"best_epoch":1e999,"epochs":1e300}\n' >"$d/huge.jsonl"
"$FTL_SAN" report "$d/huge.jsonl" -o "$d/huge.html" >/dev/null 2>"$d/huge.err" && ! grep -q -E 'Sanitizer|runtime error' "$d/huge.err" &&
    pass report_survives_huge_numbers || fail report_survives_huge_numbers "$(head -3 "$d/huge.err")"
# a learning rate that spans decades and reaches 0: a log axis, the 0 drawn on its floor below the rest
printf '%s\n' '{"record":"epoch","epoch":1,"loss":1,"acc":0.5,"lr":0.01}' '{"record":"epoch","epoch":2,"loss":0.8,"acc":0.6,"lr":1e-4}' \
    '{"record":"epoch","epoch":3,"loss":0.7,"acc":0.7,"lr":0}' >"$d/lr0.jsonl"
"$FTL_SAN" report "$d/lr0.jsonl" -o "$d/lr0.html" >/dev/null 2>"$d/lr0.err" && $PY - "$d/lr0.html" <<'PYEOF' &&
import re, sys
page = open(sys.argv[1]).read()
start = page.rindex("<svg", 0, page.index("<title>Learning rate</title>"))
svg = page[start:page.index("</svg>", start)]
assert 'data-y-scale="log"' in svg, svg[:300]
ys = {v: float(y) for y, v in re.findall(r'<circle cx="[0-9.]+" cy="([0-9.]+)"[^>]*data-value="([^"]+)"', svg)}
print(ys)
assert set(ys) == {"0.01", "0.0001", "0"} and ys["0.01"] < ys["0.0001"] < ys["0"]  # screen y grows downwards
PYEOF
    pass report_lr_log_axis_copes_with_zero || fail report_lr_log_axis_copes_with_zero "$(cat "$d/lr0.err")"
# phases and resumes from a hostile log: a fine-tune record without its fields, a resume naming
# nothing real, epoch numbers near the clamp, infinite time parts
printf '%s\n' '{"record":"epoch","epoch":99999999,"loss":1,"acc":0.5,"time":{"head_s":1e308,"backbone_s":1e308}}' \
    '{"record":"run","phase":"fine-tune","resume":"x"}' '{"record":"epoch","epoch":1,"loss":3e38,"acc":0.5,"lr":5}' \
    '{"record":"run","phase":"fine-tune","fine_tune":{"cut":7,"nodes":"a"}}' '{"record":"epoch","epoch":100000000,"loss":1e-300,"acc":0.5,"lr":1e-300}' >"$d/hostile.jsonl"
"$FTL_SAN" report "$d/hostile.jsonl" -o "$d/hostile.html" >/dev/null 2>"$d/hostile.err" && ! grep -q -E 'Sanitizer|runtime error' "$d/hostile.err" &&
    $PY "$LAYOUT" "$d/hostile.html" >/dev/null && pass report_survives_hostile_phases || fail report_survives_hostile_phases "$(head -3 "$d/hostile.err")"
printf '%s\n' '{"record":"run","phase":"fine-tune"}' '{"record":"epoch","epoch":1e300,"loss":1,"acc":0.5}' >"$d/badepoch.jsonl"
expect_error report_refuses_an_impossible_epoch_number 1 'badepoch.jsonl: line 2: an epoch record without a valid epoch number' \
    "$FTL_SAN" report "$d/badepoch.jsonl" -o "$d/badepoch.html"
printf '[{"name":"head","ph":"X","pid":4095,"ts":0,"dur":1,"args":{"step":99999999}}]' >"$d/sparse_trace.json"
expect_error report_refuses_a_sparse_timeline 1 'not an ftl --timeline file' \
    "$FTL_SAN" report "$d/a.jsonl" -o "$d/sparse.html" --timeline "$d/sparse_trace.json"
$PY -c 'import json,sys; e=json.load(open(sys.argv[1])); e["confusion"][0][0]=float("inf"); open(sys.argv[2],"w").write(json.dumps(e).replace("Infinity","1e999"))' \
    "$d/eval.json" "$d/inf_eval.json"
expect_error report_refuses_an_eval_with_impossible_counts 1 'confusion\[0\]\[0\] is not an image count' \
    "$FTL_SAN" report "$d/a.jsonl" -o "$d/inf.html" --eval "$d/inf_eval.json"
# a run killed while writing its log, then resumed into the same log: the broken line is skipped
head -c $(($(wc -c <"$d/r.jsonl") - 30)) "$d/r.jsonl" >"$d/killed.jsonl"
cat "$d/r.jsonl" >>"$d/killed.jsonl"
"$FTL" report "$d/killed.jsonl" -o "$d/killed.html" >/dev/null 2>"$d/killed.err" && grep -q 'is incomplete (a run killed while writing it?)' "$d/killed.html" &&
    pass report_skips_a_half_line_before_a_resume || fail report_skips_a_half_line_before_a_resume "$(cat "$d/killed.err")"

# the page in a browser, without network
if ! command -v chromium >/dev/null 2>&1; then
    skip report_renders_in_chromium_without_requests "chromium is not installed (scripts/install_deps.sh test installs it)"
elif ! unshare -n true 2>/dev/null; then
    skip report_renders_in_chromium_without_requests "cannot make a network namespace here (unshare -n)"
else
    rm -rf "$d/chrome"
    timeout 120 unshare -n chromium --headless --no-sandbox --disable-gpu --user-data-dir="$d/chrome" --window-size=1200,2400 \
        --enable-logging=stderr --v=0 --screenshot="$d/shot.png" "file://$d/report.html" >"$d/chrome.out" 2>"$d/chrome.err"
    if [ -s "$d/shot.png" ] && $PY - "$d/shot.png" <<'PYEOF' && ! grep -q -i -E 'Refused to (load|connect)|net::ERR_|blocked' "$d/chrome.err"; then
import sys
from PIL import Image
im = Image.open(sys.argv[1]).convert("RGB")
colors = im.getcolors(1 << 24)
assert colors and len(colors) > 20, len(colors or [])
# the curves' colours are on the page
assert any(c[1] == (31, 119, 180) for c in colors), "no series colour in the screenshot"
PYEOF
        pass report_renders_in_chromium_without_requests
    else
        fail report_renders_in_chromium_without_requests "$(grep -i -E 'refused|err_|blocked|error' "$d/chrome.err" | head -3)"
    fi
fi
finish
