#!/usr/bin/env bash
# ftl sweep: every trial's model and epoch records are the ones `ftl train` gives alone with its
# settings (byte for byte), for trials trained in stacks over shared batches, any number of workers and
# any stack size; the table is sorted by val_acc (read back from the models), BEST.ftl is the best
# trial's model and loads in eval; the features are embedded once; what cannot be stacked runs trial
# by trial; bad search spaces are refused before any work.
source "$(dirname "$0")/lib.sh"
d=$(scratch sweep)
MODEL="$SHARED/models/mobilenet_v1_1.0_224_embedding.onnx"
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --quiet 2>/dev/null || fail sweep_prep "prep failed"
T="$d/ds/train.parquet"
V="$d/ds/val.parquet"
COMMON=(--val "$V" --backbone "$MODEL" --epochs 4 --early-stopping monitor=val_acc,patience=1,min_delta=0.02 --seed 7)

# 2 lr x 2 dropout x 2 batch sizes x 2 optimizers: 4 stacks (batch x dropout) trained over shared
# batches; early stopping at patience 1 stops some trials early
if "$FTL" sweep "$T" "${COMMON[@]}" --grid lr=1e-3,1e-2 --grid dropout=0,0.5 --grid batch=16,32 \
    --grid optimizer=nadam,sgd --out "$d/best.ftl" >"$d/sweep.out" 2>"$d/sweep.err"; then
    pass sweep_runs
else
    fail sweep_runs "$(tail -5 "$d/sweep.err")"
fi
check sweep_stacks_by_batch_and_dropout grep -q "16 trials in 4 stacks (4 side by side, one GEMM per step)" "$d/sweep.out"
# the features are embedded once: one train and one val file in the shared cache
n_files=$(find "$d/best.trials/ftl-feature-cache" -name '*.features.parquet' | wc -l)
check sweep_embeds_once test "$n_files" -eq 2 -a "$(grep -c 'embedded once' "$d/sweep.out")" -eq 1

# each trial alone, as ftl train (its settings from the sweep's table): the model byte for byte,
# and the log's epoch records (loss, acc, val_loss, val_acc, lr, best epoch) exactly
"$PY" - "$d/best.trials/results.json" >"$d/trials.txt" <<'PYEOF'
import json, sys
for r in json.load(open(sys.argv[1])):
    s = r["settings"]
    print(r["trial"], s["lr"], s["dropout"], s["batch"], s["optimizer"])
PYEOF
same=0 total=0
while read -r trial lr dropout batch optimizer; do
    total=$((total + 1))
    "$FTL" train "$T" "${COMMON[@]}" --lr "$lr" --dropout "$dropout" --batch "$batch" --optimizer "$optimizer" \
        --out "$d/alone-$trial.ftl" --log "$d/alone-$trial.jsonl" --cache-dir "$d/best.trials/ftl-feature-cache" \
        >/dev/null 2>"$d/alone-$trial.err" &&
        cmp -s "$d/alone-$trial.ftl" "$(printf '%s/best.trials/trial-%04d.ftl' "$d" "$trial")" && same=$((same + 1))
done <"$d/trials.txt"
echo "trials equal to ftl train alone: $same of $total"
check sweep_trials_equal_ftl_train_alone test "$same" -eq 16 -a "$total" -eq 16
"$PY" - "$d" <<'PYEOF' && pass sweep_trial_logs_equal_ftl_train_alone || fail sweep_trial_logs_equal_ftl_train_alone "see log"
import json, sys
d = sys.argv[1]
keys = ("epoch", "steps", "examples", "loss", "acc", "val_loss", "val_acc", "lr", "improved", "best_epoch")
early = dropout = 0
for t in range(1, 17):
    def epochs(path):
        return [tuple(r[k] for k in keys) for r in map(json.loads, open(path)) if r.get("record") == "epoch"]
    mine, alone = epochs("%s/best.trials/trial-%04d.jsonl" % (d, t)), epochs("%s/alone-%d.jsonl" % (d, t))
    assert mine == alone and mine, (t, mine, alone)
    early += len(mine) < 4
runs = [json.loads(l) for l in open(d + "/best.trials/trial-0003.jsonl")]
cmd = runs[0]["command"]  # trial 3: lr 1e-3, dropout 0, batch 32, nadam (the grid's order)
assert runs[0]["record"] == "run" and cmd[len(cmd) - 1 - cmd[::-1].index("--batch") + 1] == "32", cmd
print("16 trial logs equal;", early, "stopped early")
assert early > 0
PYEOF

# label smoothing and the lr schedule swept as the head's other settings: 2 x 3 trials with dropout 0.5
# in one stack, side by side and one at a time; each trial's model and epoch records (lr included)
# are ftl train's alone with its --label-smoothing and --lr-schedule, and the table names them
TOOLS=(--grid label-smoothing=0,0.1 --grid lr-schedule=constant,cosine,plateau:1:0.5 --dropout 0.5 --lr 1e-2)
for mode in 1 0; do
    FTL_SWEEP_SIDE_BY_SIDE=$mode "$FTL" sweep "$T" "${COMMON[@]}" "${TOOLS[@]}" --out "$d/tools-$mode.ftl" \
        --cache-dir "$d/best.trials/ftl-feature-cache" >"$d/tools-$mode.out" 2>&1 || fail sweep_tools_grid_runs "$(tail -3 "$d/tools-$mode.out")"
done
grep -q -E "^sweep: 6 trials in [12] stacks \([12] side by side" "$d/tools-1.out" &&
    grep -q -E "^sweep: 6 trials in [12] stacks \(0 side by side" "$d/tools-0.out" && ! grep -q "one after the other" "$d/tools-1.out" &&
    pass sweep_tools_grid_stacked || fail sweep_tools_grid_stacked "$(grep 'trials in' "$d/tools-1.out" "$d/tools-0.out")"
"$PY" - "$d/tools-1.trials/results.csv" >"$d/tools.txt" <<'PYEOF'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print(r["trial"], r["label-smoothing"], r["lr-schedule"])
PYEOF
same=0 total=0
while read -r trial smoothing schedule; do
    total=$((total + 1))
    f=$(printf 'trial-%04d' "$trial")
    "$FTL" train "$T" "${COMMON[@]}" --dropout 0.5 --lr 1e-2 --label-smoothing "$smoothing" --lr-schedule "$schedule" \
        --out "$d/tools-alone-$trial.ftl" --log "$d/tools-alone-$trial.jsonl" --cache-dir "$d/best.trials/ftl-feature-cache" \
        >/dev/null 2>&1 && cmp -s "$d/tools-alone-$trial.ftl" "$d/tools-1.trials/$f.ftl" &&
        cmp -s "$d/tools-alone-$trial.ftl" "$d/tools-0.trials/$f.ftl" && same=$((same + 1))
done <"$d/tools.txt"
echo "smoothing/schedule trials equal to ftl train alone (side by side and one at a time): $same of $total"
check sweep_smoothing_and_schedule_trials_equal_ftl_train_alone test "$same" -eq 6 -a "$total" -eq 6
"$PY" - "$d" <<'PYEOF' && pass sweep_smoothing_and_schedule_logs_equal_alone || fail sweep_smoothing_and_schedule_logs_equal_alone "see log"
import csv, json, sys
d = sys.argv[1]
keys = ("epoch", "loss", "acc", "val_loss", "val_acc", "lr", "best_epoch")  # the model records both settings
rows = list(csv.DictReader(open(d + "/tools-1.trials/results.csv")))
assert sorted((r["label-smoothing"], r["lr-schedule"]) for r in rows) == sorted(
    (e, s) for e in ("0", "0.1") for s in ("constant", "cosine", "plateau:1:0.5")), rows
lrs = set()
for r in rows:
    t = int(r["trial"])
    def epochs(path):
        return [tuple(x[k] for k in keys) for x in map(json.loads, open(path)) if x.get("record") == "epoch"]
    mine, alone = epochs("%s/tools-1.trials/trial-%04d.jsonl" % (d, t)), epochs("%s/tools-alone-%d.jsonl" % (d, t))
    assert mine == alone and mine, (t, mine, alone)
    raw = open("%s/tools-1.trials/trial-%04d.ftl" % (d, t), "rb").read()
    n = int.from_bytes(raw[:8], "little")
    args = json.loads(json.loads(raw[8:8 + n])["__metadata__"]["ftl.training_args"])
    assert args["label_smoothing"] == float(r["label-smoothing"]), args
    assert args["lr_schedule"].split(" ")[0].startswith(r["lr-schedule"].split(":")[0]), (args, r)
    lrs.add(tuple(e[5] for e in mine))
js = json.load(open(d + "/tools-1.trials/results.json"))
assert all(isinstance(j["settings"]["lr-schedule"], str) for j in js), js
print(len(rows), "trials;", len(lrs), "distinct lr sequences")
assert len(lrs) >= 2  # the schedules differ
PYEOF

# flip TTA swept: trials with and without it in one stack, val's mirror images cached once for the
# sweep; each trial's model (which records ftl.tta) and epoch records are ftl train's alone with its --tta
TTA=(--grid tta=none,flip --grid lr=1e-3,1e-2 --dropout 0.5)
"$FTL" sweep "$T" "${COMMON[@]}" "${TTA[@]}" --out "$d/tta.ftl" --cache-dir "$d/best.trials/ftl-feature-cache" \
    >"$d/tta.out" 2>&1 || fail sweep_tta_grid_runs "$(tail -3 "$d/tta.out")"
grep -q -E "^sweep: 4 trials in [12] stacks \([12] side by side" "$d/tta.out" && grep -q 'val features of .*, mirrored' "$d/tta.out" &&
    pass sweep_tta_grid_stacked_and_mirrored_val_cached || fail sweep_tta_grid_stacked_and_mirrored_val_cached "$(cat "$d/tta.out")"
"$PY" - "$d/tta.trials/results.csv" >"$d/tta.txt" <<'PYEOF'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print(r["trial"], r["tta"], r["lr"])
PYEOF
same=0 total=0 logs=0
while read -r trial tta lr; do
    total=$((total + 1))
    f=$(printf 'trial-%04d' "$trial")
    "$FTL" train "$T" "${COMMON[@]}" --dropout 0.5 --lr "$lr" --tta "$tta" --out "$d/tta-alone-$trial.ftl" \
        --log "$d/tta-alone-$trial.jsonl" --cache-dir "$d/best.trials/ftl-feature-cache" >/dev/null 2>&1 &&
        cmp -s "$d/tta-alone-$trial.ftl" "$d/tta.trials/$f.ftl" && same=$((same + 1))
    "$PY" -c 'import json, sys
e = lambda p: [(r["epoch"], r["loss"], r["val_loss"], r["val_acc"]) for r in map(json.loads, open(p)) if r.get("record") == "epoch"]
sys.exit(0 if e(sys.argv[1]) == e(sys.argv[2]) and e(sys.argv[1]) else 1)' "$d/tta.trials/$f.jsonl" "$d/tta-alone-$trial.jsonl" &&
        logs=$((logs + 1))
done <"$d/tta.txt"
echo "tta trials equal to ftl train alone: models $same, logs $logs of $total"
check sweep_tta_trials_equal_ftl_train_alone test "$same" -eq 4 -a "$logs" -eq 4 -a "$total" -eq 4 -a \
    "$(cut -d' ' -f2 "$d/tta.txt" | sort -u | tr '\n' ' ')" = "flip none "

# the same sweep one stack at a time, at most 3 trials a stack, each trial stepped on its own (not
# side by side): the same models (no trial depends on which others share its stack or thread)
FTL_SWEEP_SIDE_BY_SIDE=0 "$FTL" sweep "$T" "${COMMON[@]}" --grid lr=1e-3,1e-2 --grid dropout=0,0.5 --grid batch=16,32 --grid optimizer=nadam,sgd \
    --workers 1 --stack-size 3 --out "$d/serial.ftl" --cache-dir "$d/best.trials/ftl-feature-cache" \
    >"$d/serial.out" 2>&1 || fail sweep_serial_runs "$(tail -3 "$d/serial.out")"
same=0
for t in $(seq 1 16); do
    f=$(printf 'trial-%04d.ftl' "$t")
    cmp -s "$d/best.trials/$f" "$d/serial.trials/$f" && same=$((same + 1))
done
check sweep_same_models_for_any_workers_and_stack_size test "$same" -eq 16 -a "$(grep -c 'in 8 stacks (0 side by side' "$d/serial.out")" -eq 1

# what cannot share the cached features runs trial by trial, as ftl train does (here: no feature cache)
"$FTL" sweep "$T" "${COMMON[@]}" --epochs 1 --grid lr=1e-3,1e-2 --no-feature-cache --out "$d/seq.ftl" \
    >"$d/seq.out" 2>"$d/seq.err" || fail sweep_sequential_fallback "$(tail -3 "$d/seq.err")"
"$FTL" train "$T" "${COMMON[@]}" --epochs 1 --lr 1e-2 --no-feature-cache --out "$d/seq-alone.ftl" >/dev/null 2>&1
check sweep_sequential_fallback_equals_alone cmp "$d/seq-alone.ftl" "$d/seq.trials/trial-0002.ftl"
check sweep_sequential_fallback_says_why grep -q "one after the other: --no-feature-cache" "$d/seq.out"

# the table: sorted by val_acc (then val_loss) as the models record them; BEST is the first row's model
"$PY" - "$d" "$PY" <<'PYEOF' && pass sweep_table_sorted_and_best_model || fail sweep_table_sorted_and_best_model "see log"
import csv, json, struct, sys
d = sys.argv[1]
def metrics(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(json.loads(raw[8:8 + n])["__metadata__"]["ftl.metrics"])
rows = list(csv.DictReader(open(d + "/best.trials/results.csv")))
js = json.load(open(d + "/best.trials/results.json"))
assert len(rows) == 16 and len(js) == 16, (len(rows), len(js))
keys = []
for r, j in zip(rows, js):
    m = metrics(d + "/best.trials/trial-%04d.ftl" % int(r["trial"]))
    assert abs(float(r["val_acc"]) - m["val_acc"]) < 1e-6 and abs(j["val_acc"] - m["val_acc"]) < 1e-9, (r, m)
    assert int(r["best_epoch"]) == m["best_epoch"] and int(r["epochs"]) == m["epochs_run"], (r, m)
    keys.append((-m["val_acc"], m["val_loss"], int(r["trial"])))
assert keys == sorted(keys), keys
assert sorted(int(r["trial"]) for r in rows) == list(range(1, 17))
assert any(int(r["epochs"]) < 4 for r in rows), "no trial stopped early"
best = open(d + "/best.ftl", "rb").read()
assert best == open(d + "/best.trials/trial-%04d.ftl" % int(rows[0]["trial"]), "rb").read()
print("best: trial", rows[0]["trial"], rows[0])
PYEOF
check sweep_best_model_evaluates "$FTL" eval "$d/best.ftl" "$V"

# a seeded random search: the trials drawn within the range, the same draws again with the same seed
for run in a b; do
    "$FTL" sweep "$T" "${COMMON[@]}" --random 3 --range lr=1e-3:1e-1:log --grid dropout=0,0.5 --search-seed 5 \
        --out "$d/rand-$run.ftl" >/dev/null 2>"$d/rand-$run.err" || fail sweep_random_runs "$(tail -3 "$d/rand-$run.err")"
done
"$PY" - "$d" <<'PYEOF' && pass sweep_random_search_seeded_within_range || fail sweep_random_search_seeded_within_range "see log"
import json, sys
d = sys.argv[1]
a = sorted((r["trial"], r["settings"]["lr"], r["settings"]["dropout"]) for r in json.load(open(d + "/rand-a.trials/results.json")))
b = sorted((r["trial"], r["settings"]["lr"], r["settings"]["dropout"]) for r in json.load(open(d + "/rand-b.trials/results.json")))
print(a)
assert a == b and len(a) == 3, (a, b)
assert all(1e-3 <= lr < 1e-1 and dr in (0, 0.5) for _, lr, dr in a), a
PYEOF

CACHE=(--cache-dir "$d/best.trials/ftl-feature-cache")
# the table follows the monitored metric: with monitor=val_loss the lowest val_loss first
"$FTL" sweep "$T" --val "$V" --backbone "$MODEL" --epochs 2 --seed 7 --early-stopping monitor=val_loss,patience=5 \
    --grid lr=1e-4,1e-3,1e-2 --grid dropout=0,0.5 --out "$d/byloss.ftl" "${CACHE[@]}" >"$d/byloss.out" 2>&1 ||
    fail sweep_by_loss_runs "$(tail -3 "$d/byloss.out")"
"$PY" - "$d/byloss.trials/results.csv" <<'PYEOF' && pass sweep_table_follows_the_monitor || fail sweep_table_follows_the_monitor "see log"
import csv, sys
losses = [float(r["val_loss"]) for r in csv.DictReader(open(sys.argv[1]))]
assert len(losses) == 6 and losses == sorted(losses), losses
PYEOF

# successive halving: 12 trials, --epochs 9, eta 3: rungs at epochs 1, 3, 9; 12 -> 4 -> 1 trials. A
# halted trial's weights are ftl train's with --epochs at its rung; a survivor's model is ftl train's
# alone; the sweep's log has a record per trial and epoch and one per trial
HALVE=(--val "$V" --backbone "$MODEL" --epochs 9 --seed 7 --grid lr=1e-3,3e-3,1e-2 --grid dropout=0,0.5
       --grid optimizer=nadam,sgd "${CACHE[@]}")
"$FTL" sweep "$T" "${HALVE[@]}" --halving 3 --log "$d/halve.jsonl" --out "$d/halve.ftl" >"$d/halve.out" 2>&1 ||
    fail sweep_halving_runs "$(tail -3 "$d/halve.out")"
check sweep_halving_rungs grep -q "rungs at epochs 1 3 9" "$d/halve.out"
"$PY" - "$d" >"$d/halve.txt" <<'PYEOF' && pass sweep_halving_keeps_the_best_third || fail sweep_halving_keeps_the_best_third "$(cat "$d/halve.txt")"
import json, sys
d = sys.argv[1]
rows = json.load(open(d + "/halve.trials/results.json"))
by_epochs = sorted(r["epochs"] for r in rows)
assert by_epochs == [1] * 8 + [3] * 3 + [9], by_epochs
assert all(r["halted_at"] == r["epochs"] for r in rows if r["epochs"] < 9), rows
log = [json.loads(l) for l in open(d + "/halve.jsonl")]
assert log[0]["record"] == "sweep" and log[0]["halving"] == 3
epochs = {}
for r in log:
    if r["record"] == "trial_epoch":
        epochs.setdefault(r["trial"], []).append(r["log"]["epoch"])
for r in rows:
    assert epochs[r["trial"]] == list(range(1, r["epochs"] + 1)), (r["trial"], epochs[r["trial"]])
# at each rung the survivors had the best val_acc by then
first = {r["trial"]: r["log"]["val_acc"] for r in log if r["record"] == "trial_epoch" and r["log"]["epoch"] == 1}
survivors = {r["trial"] for r in rows if r["epochs"] > 1}
assert min(first[t] for t in survivors) >= max(v for t, v in first.items() if t not in survivors), first
ends = [r for r in log if r["record"] == "trial"]
assert len(ends) == 12, len(ends)
for r in rows:  # each trial's settings and a halted one's rung, for the checks below
    s = r["settings"]
    print(r["trial"], r["epochs"], s["lr"], s["dropout"], s["optimizer"])
PYEOF
same=0 total=0 ones=0
while read -r trial epochs lr dropout optimizer; do
    if [ "$epochs" = 1 ]; then # two of the eight halved at the first rung
        ones=$((ones + 1))
        [ "$ones" -gt 2 ] && continue
    fi
    total=$((total + 1))
    "$FTL" train "$T" --val "$V" --backbone "$MODEL" --epochs "$epochs" --seed 7 "${CACHE[@]}" --lr "$lr" \
        --dropout "$dropout" --optimizer "$optimizer" --out "$d/h-alone-$trial.ftl" >/dev/null 2>&1 &&
        "$PY" - "$d/h-alone-$trial.ftl" "$(printf '%s/halve.trials/trial-%04d.ftl' "$d" "$trial")" "$epochs" <<'PYEOF' && same=$((same + 1))
import json, struct, sys
def tensors(path):  # the safetensors data after the header, and the recorded epochs
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    meta = json.loads(raw[8:8 + n])["__metadata__"]
    return raw[8 + n:], json.loads(meta["ftl.training_args"])["epochs"]
(a, ea), (b, eb) = tensors(sys.argv[1]), tensors(sys.argv[2])
assert a == b, "weights differ"
assert ea == int(sys.argv[3]) and eb == 9, (ea, eb)
if int(sys.argv[3]) == 9:  # a survivor: the whole file
    assert open(sys.argv[1], "rb").read() == open(sys.argv[2], "rb").read()
PYEOF
done <"$d/halve.txt"
echo "halving: $same of $total trials equal ftl train alone"
check sweep_halving_trials_equal_ftl_train_alone test "$same" -eq "$total" -a "$total" -eq 6

# ftl report of the sweep's log: every trial's final val_acc read back from the table and the
# scatters, ranked as the sweep's table; in a browser without network
"$FTL" report "$d/halve.jsonl" -o "$d/halve.html" >/dev/null 2>"$d/halve-report.err" ||
    fail sweep_report_writes "$(cat "$d/halve-report.err")"
"$PY" - "$d" <<'PYEOF' && pass sweep_report_reads_back || fail sweep_report_reads_back "see log"
import json, sys
from html.parser import HTMLParser
d = sys.argv[1]
class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows, self.points, self.setting, self.external, self.script = [], {}, None, [], False
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.external += [a[k] for k in ("src", "href") if k in a]
        self.script |= tag == "script"
        if tag == "tr" and a.get("class") == "trial":
            self.rows.append((int(a["data-trial"]), float(a["data-val-acc"]), a["data-ended"]))
        if tag == "div" and a.get("class") == "scatter":
            self.setting = a["data-setting"]
        if tag == "circle" and "data-trial" in a:
            self.points.setdefault(self.setting, {})[int(a["data-trial"])] = (float(a["data-x"]), float(a["data-value"]))
p = Page()
p.feed(open(d + "/halve.html").read())
res = json.load(open(d + "/halve.trials/results.json"))
assert [r["trial"] for r in res] == [t for t, _, _ in p.rows], ([r["trial"] for r in res], p.rows)
for r, (t, acc, ended) in zip(res, p.rows):
    assert abs(r["val_acc"] - acc) < 1e-9 and ended == "true", (r, acc)
    for key, value in r["settings"].items():
        x, y = p.points[key][t]
        assert abs(y - r["val_acc"]) < 1e-9, (key, t, y)
        assert isinstance(value, str) or abs(x - value) <= 1e-12 * abs(value), (key, t, x, value)
assert set(p.points) == {"lr", "dropout", "optimizer"}, p.points.keys()
assert not p.external and not p.script
print(len(p.rows), "trials read back")
PYEOF
if ! command -v chromium >/dev/null 2>&1; then
    skip sweep_report_renders_in_chromium "chromium is not installed (scripts/install_deps.sh test installs it)"
elif ! unshare -n true 2>/dev/null; then
    skip sweep_report_renders_in_chromium "cannot make a network namespace here (unshare -n)"
else
    timeout 120 unshare -n chromium --headless --no-sandbox --disable-gpu --user-data-dir="$d/chrome" --window-size=1000,2600 \
        --enable-logging=stderr --v=0 --screenshot="$d/shot.png" "file://$d/halve.html" >"$d/chrome.out" 2>"$d/chrome.err"
    if [ -s "$d/shot.png" ] && "$PY" - "$d/shot.png" <<'PYEOF' && ! grep -q -i -E 'Refused to (load|connect)|net::ERR_|blocked' "$d/chrome.err"; then
import sys
from PIL import Image
colors = Image.open(sys.argv[1]).convert("RGB").getcolors(1 << 24)
assert colors and len(colors) > 20 and any(c[1] == (31, 119, 180) for c in colors), "no curves or points drawn"
PYEOF
        pass sweep_report_renders_in_chromium
    else
        fail sweep_report_renders_in_chromium "$(grep -i -E 'refused|err_|blocked|error' "$d/chrome.err" | head -3)"
    fi
fi
printf '{"record":"sweep","trials":2}\n{"record":"trial_epoch","trial":7,"log":{"epoch":1}}\n' >"$d/bad-sweep.jsonl"
expect_error sweep_report_trial_out_of_range 1 'line 2 names trial 7, but the sweep has 2 trials' \
    "$FTL_SAN" report "$d/bad-sweep.jsonl" -o "$d/bad.html"

# --resume after SIGKILL mid-sweep: the uninterrupted sweep's table and models, exactly
RES=(--val "$V" --backbone "$MODEL" --epochs 6 --seed 7 --grid lr=1e-3,1e-2 --grid dropout=0,0.5 --grid batch=16,32
     --halving 2 "${CACHE[@]}")
"$FTL" sweep "$T" "${RES[@]}" --log "$d/whole.jsonl" --out "$d/whole.ftl" >"$d/whole.out" 2>&1 ||
    fail sweep_resume_reference "$(tail -3 "$d/whole.out")"
FTL_TEST_STEP_SLEEP_MS=60 "$FTL" sweep "$T" "${RES[@]}" --log "$d/cut.jsonl" --out "$d/cut.ftl" >"$d/cut1.out" 2>&1 &
pid=$!
for _ in $(seq 1 200); do # until some trials are done and others have a checkpoint
    [ "$(find "$d/cut.trials" -name '*.result.json' 2>/dev/null | wc -l)" -ge 2 ] &&
        [ "$(find "$d/cut.trials" -name '*.ckpt' 2>/dev/null | wc -l)" -ge 1 ] && break
    sleep 0.1
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
done_before=$(find "$d/cut.trials" -name '*.result.json' | wc -l)
echo "killed with $done_before trials done and $(find "$d/cut.trials" -name '*.ckpt' | wc -l) checkpoints"
check sweep_killed_mid_sweep test "$done_before" -ge 2 -a "$done_before" -lt 8 -a ! -e "$d/cut.ftl"
"$FTL" sweep "$T" "${RES[@]}" --log "$d/cut.jsonl" --out "$d/cut.ftl" --resume >"$d/cut2.out" 2>&1 ||
    fail sweep_resume_runs "$(tail -3 "$d/cut2.out")"
check sweep_resume_says_what_was_done grep -q "$done_before trials done before the resume" "$d/cut2.out"
same=0
for t in $(seq 1 8); do
    f=$(printf 'trial-%04d.ftl' "$t")
    cmp -s "$d/whole.trials/$f" "$d/cut.trials/$f" && same=$((same + 1))
done
check sweep_resume_models_equal_uninterrupted test "$same" -eq 8
check sweep_resume_best_equal_uninterrupted cmp "$d/whole.ftl" "$d/cut.ftl"
check sweep_resume_table_equal_uninterrupted diff <(cut -d, -f1-11 "$d/whole.trials/results.csv") <(cut -d, -f1-11 "$d/cut.trials/results.csv")
check sweep_resume_leaves_no_checkpoints test "$(find "$d/cut.trials" -name '*.ckpt' | wc -l)" -eq 0
expect_error sweep_resume_other_options 2 'continues the same sweep' \
    "$FTL" sweep "$T" "${RES[@]}" --epochs 7 --out "$d/cut.ftl" --resume
expect_error sweep_resume_nothing_there 2 'no sweep in' "$FTL" sweep "$T" "${RES[@]}" --out "$d/none.ftl" --resume

# under mpirun the trials are spread over the ranks, each trained whole by one: np 2 gives np 1's
# table, models and best model exactly (the any-N tolerance is not needed), halving included; a
# resume under np 2 after a kill gives the same again
if ! command -v mpirun >/dev/null 2>&1; then
    skip sweep_mpirun "mpirun (openmpi-bin) is not installed"
elif ! "$FTL" --version | grep -q 'Open MPI'; then
    skip sweep_mpirun "this ftl was built without MPI"
else
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
    MPI=(mpirun --oversubscribe --bind-to none)
    # its own cache folder: each rank embeds its half of the rows, and gets the other half
    NP=(--val "$V" --backbone "$MODEL" --epochs 6 --seed 7 --grid lr=1e-3,1e-2 --grid dropout=0,0.5 --grid batch=16,32
        --halving 2 --workers 1)
    "$FTL" sweep "$T" "${NP[@]}" --log "$d/np1.jsonl" --out "$d/np1.ftl" >"$d/np1.out" 2>&1 ||
        fail sweep_np1_runs "$(tail -3 "$d/np1.out")"
    timeout 300 "${MPI[@]}" -np 2 "$FTL" sweep "$T" "${NP[@]}" --log "$d/np2.jsonl" --out "$d/np2.ftl" >"$d/np2.out" 2>&1 ||
        fail sweep_np2_runs "$(tail -5 "$d/np2.out")"
    check sweep_np2_says_spread grep -q "spread over the ranks" "$d/np2.out"
    same=0
    for t in $(seq 1 8); do
        f=$(printf 'trial-%04d.ftl' "$t")
        cmp -s "$d/np1.trials/$f" "$d/np2.trials/$f" && same=$((same + 1))
    done
    check sweep_np2_models_equal_np1 test "$same" -eq 8
    check sweep_np2_best_equal_np1 cmp "$d/np1.ftl" "$d/np2.ftl"
    check sweep_np2_table_equal_np1 diff <(cut -d, -f1-11 "$d/np1.trials/results.csv") <(cut -d, -f1-11 "$d/np2.trials/results.csv")
    "$PY" - "$d" <<'PYEOF' && pass sweep_np2_log_has_every_trial || fail sweep_np2_log_has_every_trial "see log"
import json, sys
d = sys.argv[1]
def records(path):
    out = {}
    for r in map(json.loads, open(path)):
        if r["record"] == "trial_epoch":
            out[(r["trial"], r["log"]["epoch"])] = (r["log"]["val_acc"], r["log"]["loss"])
    return out
a, b = records(d + "/np1.jsonl"), records(d + "/np2.jsonl")
assert a == b and a, (len(a), len(b))
import glob
assert not glob.glob(d + "/np2.jsonl.rank-*"), "a rank's part of the log was left"
print(len(a), "trial epochs equal")
PYEOF
    # interrupted under np 2 (mpirun stopped), resumed under np 2: np 1's models again
    FTL_TEST_STEP_SLEEP_MS=60 timeout 300 "${MPI[@]}" -np 2 -x FTL_TEST_STEP_SLEEP_MS "$FTL" sweep "$T" "${NP[@]}" \
        --out "$d/np2cut.ftl" >"$d/np2cut1.out" 2>&1 &
    pid=$!
    for _ in $(seq 1 300); do
        [ "$(find "$d/np2cut.trials" -name '*.result.json' 2>/dev/null | wc -l)" -ge 2 ] &&
            [ "$(find "$d/np2cut.trials" -name '*.ckpt' 2>/dev/null | wc -l)" -ge 1 ] && break
        sleep 0.1
    done
    kill -TERM "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    sleep 1
    left=$(find "$d/np2cut.trials" -name '*.result.json' | wc -l)
    timeout 300 "${MPI[@]}" -np 2 "$FTL" sweep "$T" "${NP[@]}" --out "$d/np2cut.ftl" --resume >"$d/np2cut2.out" 2>&1 ||
        fail sweep_np2_resume_runs "$(tail -5 "$d/np2cut2.out")"
    same=0
    for t in $(seq 1 8); do
        f=$(printf 'trial-%04d.ftl' "$t")
        cmp -s "$d/np1.trials/$f" "$d/np2cut.trials/$f" && same=$((same + 1))
    done
    echo "np 2 interrupted with $left trials done; after the resume $same of 8 models equal np 1's"
    check sweep_np2_resume_equals_np1 test "$same" -eq 8 -a "$left" -ge 2 -a "$left" -lt 8
fi

# bad search spaces: refused before any trial, naming what is wrong
expect_error sweep_unknown_hyperparameter 2 'unknown hyperparameter "learning_rate"' \
    "$FTL_SAN" sweep "$T" "${COMMON[@]}" --grid learning_rate=1e-3 --out "$d/x.ftl"
expect_error sweep_negative_lr 2 'lr -0.1 is out of range' \
    "$FTL_SAN" sweep "$T" "${COMMON[@]}" --grid lr=-0.1,1e-3 --out "$d/x.ftl"
expect_error sweep_dropout_one 2 'dropout 1 is out of range' \
    "$FTL_SAN" sweep "$T" "${COMMON[@]}" --grid dropout=0,1 --out "$d/x.ftl"
expect_error sweep_malformed_range 2 'an empty range' \
    "$FTL_SAN" sweep "$T" "${COMMON[@]}" --range lr=1e-2:1e-3 --random 4 --out "$d/x.ftl"
expect_error sweep_too_many_trials 2 'makes 12 trials, more than --max-trials 10' \
    "$FTL_SAN" sweep "$T" "${COMMON[@]}" --grid lr=1,2,3 --grid dropout=0,0.1,0.2,0.3 --max-trials 10 --out "$d/x.ftl"
expect_error sweep_nothing_to_search 2 'nothing to search' "$FTL_SAN" sweep "$T" "${COMMON[@]}" --out "$d/x.ftl"
expect_error sweep_existing_out 2 'best.ftl already exists' \
    "$FTL_SAN" sweep "$T" "${COMMON[@]}" --grid lr=1e-3 --out "$d/best.ftl"
test ! -e "$d/x.trials" && pass sweep_refused_before_any_work || fail sweep_refused_before_any_work "x.trials was made"
finish
