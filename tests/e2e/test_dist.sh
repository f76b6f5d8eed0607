#!/usr/bin/env bash
# Data parallelism under a real Open MPI launcher (the article's steps 5-6): the collectives for
# 1-4 ranks, the same model for any rank count (in memory and streamed), resume under another
# rank count, exact metrics on uneven shards, prep split over ranks, mismatched arguments, the
# stall inspector and a killed rank. Ranks oversubscribe the 2 cores here; CI runs as root.
source "$(dirname "$0")/lib.sh"
d=$(scratch dist)
if ! command -v mpirun >/dev/null 2>&1; then
    for t in collectives same_model fine_tune_same_model resume prep eval stall kill mismatch; do skip "dist_$t" "mpirun (openmpi-bin) is not installed"; done
    finish
fi
if ! "$FTL" --version | grep -q 'Open MPI'; then
    for t in collectives same_model fine_tune_same_model resume prep eval stall kill mismatch; do skip "dist_$t" "this ftl was built without MPI"; done
    finish
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none   # containers often forbid CMA (ptrace)
MPI=(mpirun --oversubscribe --bind-to none)
CHECK="$BUILD/tools/ftl_dist_check"
MODEL="$SHARED/models/mobilenet_v1_0.25_128.onnx"  # small and fast; its 1001 outputs are the features
READ_ST="$PY $(dirname "$0")/../ref/read_safetensors.py"

# ---- the collectives, 1 to 4 ranks, with large and with tiny MPI messages
for n in 1 2 3 4; do
    for chunk in 1073741824 64; do
        out=$("${MPI[@]}" -np $n "$CHECK" --chunk $chunk 2>&1)
        rc=$?
        if [ $rc -eq 0 ] && ! grep -q '^FAIL' <<<"$out" && [ "$(grep -c '^ok ' <<<"$out")" -eq 8 ]; then
            pass "dist_collectives_np${n}_chunk${chunk}"
        else
            fail "dist_collectives_np${n}_chunk${chunk}" "rc $rc: $(grep -E '^FAIL|rror' <<<"$out" | head -5)"
        fi
    done
done
"$FTL" --version | grep -q 'data parallelism: Open MPI' && pass dist_version_names_the_transport ||
    fail dist_version_names_the_transport "$("$FTL" --version)"

# ---- the stall inspector: rank 1 sleeps past the timeout; the others name it and the job ends
start=$(date +%s)
out=$(timeout 60 "${MPI[@]}" -np 3 "$CHECK" --stall-rank 1 --sleep 30 --stall-timeout 5 2>&1)
rc=$?
took=$(($(date +%s) - start))
if [ $rc -ne 0 ] && [ $took -le 15 ] && grep -q 'stalled for [0-9]* s in the test barrier at step 7: rank 1 has not joined' <<<"$out" &&
    grep -q 'warning: rank [02]: waiting' <<<"$out"; then
    pass dist_stall_inspector_names_the_missing_rank
else
    fail dist_stall_inspector_names_the_missing_rank "rc $rc after ${took}s: $(head -c 600 <<<"$out")"
fi
# ---- a rank whose MPI_Abort neither returns nor ends it (FTL_TEST_ABORT_HANGS: as when its
# daemon is unreachable) exits by itself a few seconds later, and the launcher ends the rest
start=$(date +%s)
out=$(FTL_TEST_ABORT_HANGS=1 timeout 60 "${MPI[@]}" -x FTL_TEST_ABORT_HANGS -np 2 "$CHECK" --stall-rank 1 --sleep 40 --stall-timeout 4 2>&1)
rc=$?
took=$(($(date +%s) - start))
if [ $rc -ne 0 ] && [ $took -le 20 ] && grep -q 'rank 0: stalled for [0-9]* s' <<<"$out" &&
    grep -q 'rank 0: MPI_Abort has not ended this process in 5 s; exiting' <<<"$out" && ! pgrep -f "$CHECK" >/dev/null; then
    pass dist_abort_guard_exits_when_mpi_abort_hangs
else
    fail dist_abort_guard_exits_when_mpi_abort_hangs "rc $rc after ${took}s: $(grep -v '^\s*$' <<<"$out" | head -c 600)"
fi
out=$(timeout 60 "${MPI[@]}" -np 2 "$CHECK" --stall-rank 0 --sleep 30 --stall-timeout 4 2>&1)
rc=$?
grep -q 'rank 1: stalled for [0-9]* s .*: rank 0 has not joined' <<<"$out" && [ $rc -ne 0 ] &&
    pass dist_stall_inspector_names_rank_0_too || fail dist_stall_inspector_names_rank_0_too "rc $rc: $(head -c 400 <<<"$out")"

# a small broadcast rank 2 joins late while the ranks that already have the value go on computing:
# they stay in it until everyone has it, so the stall is seen and every message names rank 2 alone
start=$(date +%s)
out=$(timeout 60 "${MPI[@]}" -np 4 "$CHECK" --stall-rank 2 --stall-in broadcast --sleep 30 --stall-timeout 5 2>&1)
rc=$?
took=$(($(date +%s) - start))
if [ $rc -ne 0 ] && [ $took -le 15 ] && grep -q 'stalled for [0-9]* s in the test broadcast at step 7: rank 2 has not joined' <<<"$out" &&
    ! grep 'stalled\|waiting' <<<"$out" | grep -v -q 'rank 2 has not joined\|for rank 2 (the job'; then
    pass dist_stall_in_a_broadcast_names_only_the_late_rank
else
    fail dist_stall_in_a_broadcast_names_only_the_late_rank "rc $rc after ${took}s: $(grep 'stalled\|waiting' <<<"$out" | head -4)"
fi

# ranks that entered different large collectives (a bug's shape: one broadcasts, the others sum):
# each says so and the job ends, instead of blocking in the tuned call forever
start=$(date +%s)
out=$(timeout 60 "${MPI[@]}" -np 3 "$CHECK" --stall-in diverge --stall-timeout 5 2>&1)
rc=$?
took=$(($(date +%s) - start))
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -le 30 ] &&
    grep -q 'rank 1: in the test collective at step 3 the ranks entered different collectives (this one: a blocking broadcast of 1200000 x 1 bytes from rank 0)' <<<"$out" &&
    grep -q 'rank 0: in the test collective at step 3 the ranks entered different collectives (this one: a blocking sum of 300000 x 4 bytes)' <<<"$out" &&
    pass dist_diverged_large_collectives_fail_not_hang || fail dist_diverged_large_collectives_fail_not_hang "rc $rc after ${took}s: $(head -c 600 <<<"$out")"

# ---- prep: np 2 writes part folders that read as the single-process dataset
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds1" --size 128 --quiet 2>/dev/null || fail dist_prep "single-process prep failed"
"${MPI[@]}" -np 2 "$FTL" prep "$SHARED/data/hymenoptera" "$d/ds2" --size 128 --threads 1 >"$d/prep2.out" 2>"$d/prep2.err" ||
    fail dist_prep_np2_runs "$(tail -3 "$d/prep2.err")"
q() { node "$(dirname "$0")/../tools/duckdb_query.mjs" "$1"; }
same_rows() {  # NAME A B: label, path and image bytes of every row, in order
    local a b
    a=$(q "SELECT label, path, md5(image::VARCHAR) h FROM read_parquet($2, filename=true, file_row_number=true) ORDER BY filename, file_row_number")
    b=$(q "SELECT label, path, md5(image::VARCHAR) h FROM read_parquet($3, filename=true, file_row_number=true) ORDER BY filename, file_row_number")
    if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$(wc -c <<<"$a")" -gt 1000 ]; then pass "$1"; else fail "$1" "rows differ ($(wc -c <<<"$a") vs $(wc -c <<<"$b") bytes)"; fi
}
same_rows dist_prep_np2_train_equals_np1 "'$d/ds1/train.parquet'" "'$d/ds2/train.parquet/*.parquet'"
same_rows dist_prep_np2_val_equals_np1 "'$d/ds1/val.parquet'" "'$d/ds2/val.parquet/*.parquet'"
grep -q '397 images (244 train, 153 val)' "$d/prep2.out" && grep -q 'skipped' "$d/prep2.out" && pass dist_prep_summary_counts_all_ranks ||
    fail dist_prep_summary_counts_all_ranks "$(head -5 "$d/prep2.out")"
ls "$d" | grep -q 'tmp' && fail dist_prep_leaves_no_temporary "$(ls "$d")" || pass dist_prep_leaves_no_temporary

# threads: an unbound rank takes its host's cores divided by the ranks on the host
"$FTL" prep "$SHARED/data/hymenoptera" "$d/th1" --size 64 2>/dev/null | grep -q "on $(nproc) thread" &&
    mpirun --oversubscribe --bind-to none -np 2 "$FTL" prep "$SHARED/data/hymenoptera" "$d/th2" --size 64 2>/dev/null |
    grep -q "on $(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 )) thread" && pass dist_threads_default_to_a_share_of_the_host ||
    fail dist_threads_default_to_a_share_of_the_host "$("$FTL" prep "$SHARED/data/hymenoptera" "$d/th3" --size 64 2>/dev/null | head -1)"

T="$d/ds1/train.parquet"
V="$d/ds1/val.parquet"
RUN=(--backbone "$MODEL" --lr 0.004 --dropout 0.5 --epochs 6 --seed 3 --early-stopping monitor=val_acc,patience=3,min_delta=0.001)

# ---- the same model for np 1, 2 and 4 with the same global batch (cache built by np 2's ranks)
"${MPI[@]}" -np 2 "$FTL" train "$T" --val "$V" "${RUN[@]}" --batch 32 --threads 1 --cache-dir "$d/cache" \
    --out "$d/np2.ftl" --log "$d/np2.jsonl" >"$d/np2.out" 2>"$d/np2.err" || fail dist_train_np2_runs "$(tail -3 "$d/np2.err")"
"$FTL" train "$T" --val "$V" "${RUN[@]}" --batch 64 --threads 2 --cache-dir "$d/cache" \
    --out "$d/np1.ftl" --log "$d/np1.jsonl" >"$d/np1.out" 2>"$d/np1.err" || fail dist_train_np1_runs "$(tail -3 "$d/np1.err")"
"${MPI[@]}" -np 4 "$FTL" train "$T" --val "$V" "${RUN[@]}" --batch 16 --threads 1 --cache-dir "$d/cache" \
    --out "$d/np4.ftl" --log "$d/np4.jsonl" >"$d/np4.out" 2>"$d/np4.err" || fail dist_train_np4_runs "$(tail -3 "$d/np4.err")"
"${MPI[@]}" -np 2 "$FTL" train "$T" --val "$V" "${RUN[@]}" --batch 32 --threads 1 --cache-dir "$d/cache" --max-memory 1 \
    --out "$d/np2s.ftl" --log "$d/np2s.jsonl" >"$d/np2s.out" 2>"$d/np2s.err" || fail dist_train_np2_streamed_runs "$(tail -3 "$d/np2s.err")"
grep -q 'computing' "$d/np1.err" "$d/np4.err" && fail dist_feature_cache_reused_under_other_np "$(grep computing "$d/np1.err" "$d/np4.err")" ||
    pass dist_feature_cache_reused_under_other_np
# 3 ranks on 244 rows in 2 row groups (fewer row groups than ranks; 81/81/82 rows each), global
# batch 63 with a remainder: the same model as one process with --batch 63
"${MPI[@]}" -np 3 "$FTL" train "$T" --val "$V" "${RUN[@]}" --batch 21 --threads 1 --cache-dir "$d/cache3" \
    --out "$d/np3.ftl" --log "$d/np3.jsonl" >/dev/null 2>"$d/np3.err" || fail dist_train_np3_runs "$(tail -3 "$d/np3.err")"
"$FTL" train "$T" --val "$V" "${RUN[@]}" --batch 63 --cache-dir "$d/cache3" \
    --out "$d/np1b.ftl" --log "$d/np1b.jsonl" >/dev/null 2>"$d/np1b.err" || fail dist_train_np1b_runs "$(tail -3 "$d/np1b.err")"
$PY -c 'import sys, json; e = [r for r in map(json.loads, open(sys.argv[1])) if r.get("record") == "epoch"]; sys.exit(0 if e[0]["steps"] == 3 else 1)' "$d/np3.jsonl" &&
    pass dist_np3_equal_steps_on_uneven_shards || fail dist_np3_equal_steps_on_uneven_shards "$(head -c 300 "$d/np3.jsonl")"
why_int8=$(no_int8_reason)
if [ -n "$why_int8" ]; then
    skip dist_int8 "$why_int8"
else
    # int8: rank 0 calibrates and broadcasts the scales; one process computes the same ones (it reuses
    # the features np 2 cached under their hash) and trains the same model
    "${MPI[@]}" -np 2 "$FTL" train "$T" --val "$V" "${RUN[@]}" --batch 32 --threads 1 --precision int8 --cache-dir "$d/cache8" \
        --out "$d/np2i8.ftl" --log "$d/np2i8.jsonl" >/dev/null 2>"$d/np2i8.err" || fail dist_train_int8_np2_runs "$(tail -3 "$d/np2i8.err")"
    rm -f "$d/cache8"/int8-calibration-*.json # the one process calibrates by itself (not from rank 0's kept table)
    "$FTL" train "$T" --val "$V" "${RUN[@]}" --batch 64 --threads 2 --precision int8 --cache-dir "$d/cache8" \
        --out "$d/np1i8.ftl" --log "$d/np1i8.jsonl" >/dev/null 2>"$d/np1i8.err" || fail dist_train_int8_np1_runs "$(tail -3 "$d/np1i8.err")"
    check dist_int8_calibrated_once_on_rank_0 test "$(grep -c '^\[rank 0\] int8: calibrated' "$d/np2i8.err")" -eq 1
    check dist_int8_one_process_calibrates_by_itself grep -q '^int8: calibrated' "$d/np1i8.err"
    grep -q 'computing' "$d/np1i8.err" && fail dist_int8_same_scales_for_any_np "$(grep computing "$d/np1i8.err")" ||
        pass dist_int8_same_scales_for_any_np
fi
for m in np1 np2 np4 np2s np3 np1b np1i8 np2i8; do $READ_ST "$d/$m.ftl" >"$d/$m.json" 2>/dev/null; done
same_model() {  # NAME A B
    $PY - "$d/$2" "$d/$3" <<'PYEOF' && pass "$1" || fail "$1" "see log"
import json, sys
a, b = sys.argv[1], sys.argv[2]
epochs = lambda f: [r for r in map(json.loads, open(f)) if r.get("record") == "epoch"]  # other records skipped
la, lb = epochs(a + ".jsonl"), epochs(b + ".jsonl")
assert len(la) == len(lb) and len(la) >= 2, (len(la), len(lb))
for x, y in zip(la, lb):
    for k in ("loss", "acc", "val_loss", "val_acc"):
        assert abs(x[k] - y[k]) <= 1e-5 * max(1, abs(x[k])), (k, x["epoch"], x[k], y[k])
    assert x["steps"] == y["steps"] and x["examples"] == y["examples"], (x["steps"], y["steps"])
ma, mb = json.load(open(a + ".json")), json.load(open(b + ".json"))
assert json.loads(ma["metadata"]["ftl.metrics"])["best_epoch"] == json.loads(mb["metadata"]["ftl.metrics"])["best_epoch"]
for t in ("head.kernel", "head.bias"):
    va, vb = [float(v) for v in ma["tensors"][t]["values"]], [float(v) for v in mb["tensors"][t]["values"]]
    worst = max(abs(p - q) / max(1e-3, abs(p)) for p, q in zip(va, vb))
    assert worst <= 1e-4, (t, worst)
print("same model", a, b)
PYEOF
}
# (called after the definition: before it, bash found no such command and the checks never ran)
same_model dist_same_model_np3_fewer_row_groups_than_ranks np1b np3
[ -n "$why_int8" ] || same_model dist_int8_same_model_np1_np2 np1i8 np2i8
same_model dist_same_model_np1_np2 np1 np2
same_model dist_same_model_np1_np4 np1 np4
same_model dist_same_model_np2_streamed np1 np2s
# fine-tuning (phase 2) under 2 ranks: one allreduce over head and top, the same model as one process
FT=(--fine-tune-last 2 --fine-tune-epochs 2 --fine-tune-lr 1e-4)
"${MPI[@]}" -np 2 "$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 3 "${FT[@]}" --batch 16 --threads 1 --cache-dir "$d/cache" \
    --out "$d/ft2.ftl" --log "$d/ft2.jsonl" >/dev/null 2>"$d/ft2.err" || fail dist_fine_tune_np2_runs "$(tail -3 "$d/ft2.err")"
"$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 3 "${FT[@]}" --batch 32 --cache-dir "$d/cache" \
    --out "$d/ft1.ftl" --log "$d/ft1.jsonl" >/dev/null 2>"$d/ft1.err" || fail dist_fine_tune_np1_runs "$(tail -3 "$d/ft1.err")"
$READ_ST "$d/ft1.ftl" >"$d/ft1.json" 2>/dev/null && $READ_ST "$d/ft2.ftl" >"$d/ft2.json" 2>/dev/null &&
    $PY - "$d/ft1" "$d/ft2" <<'PYEOF' && pass dist_fine_tune_same_model_np1_np2 || fail dist_fine_tune_same_model_np1_np2 "see log"
import json, sys
a, b = sys.argv[1], sys.argv[2]
epochs = lambda f: [r for r in map(json.loads, open(f)) if r.get("record") == "epoch"]
la, lb = epochs(a + ".jsonl"), epochs(b + ".jsonl")
assert len(la) == len(lb) == 5, (len(la), len(lb))  # 3 head epochs, then 2 fine-tuning
for x, y in zip(la, lb):
    for k in ("loss", "acc", "val_loss", "val_acc"):
        assert abs(x[k] - y[k]) <= 1e-4 * max(1, abs(x[k])), (k, x["epoch"], x[k], y[k])
ma, mb = json.load(open(a + ".json"))["tensors"], json.load(open(b + ".json"))["tensors"]
assert sorted(ma) == sorted(mb) and len([t for t in ma if t.startswith("backbone/")]) == 4, sorted(ma)
for t in ma:
    va, vb = [float(v) for v in ma[t]["values"]], [float(v) for v in mb[t]["values"]]
    worst = max(abs(p - q) / max(1e-3, abs(p)) for p, q in zip(va, vb))
    assert worst <= 1e-3, (t, worst)
print("same fine-tuned model", a, b)
PYEOF
# eval of the fine-tuned model reads the boundary rows the two ranks left in two parts, runs only the
# tuned top and the head, and gives exactly the metrics of the whole tuned backbone on the images
"$FTL" eval "$d/ft1.ftl" "$V" --cache-dir "$d/cache" --json "$d/ft1_cached.json" --quiet >/dev/null 2>"$d/ft1_eval.err" &&
    "$FTL" eval "$d/ft1.ftl" "$V" --cache-dir "$d/no-cache" --json "$d/ft1_images.json" --quiet >/dev/null 2>&1 &&
    grep -q 'eval: reusing the boundary rows of the cut (last 2) from 2 parts' "$d/ft1_eval.err" &&
    cmp -s "$d/ft1_cached.json" "$d/ft1_images.json" &&
    pass dist_eval_reuses_boundary_rows_of_two_parts || fail dist_eval_reuses_boundary_rows_of_two_parts "$(cat "$d/ft1_eval.err")"
grep -q 'streaming them' "$d/np2s.err" && pass dist_streamed_features_used || fail dist_streamed_features_used "$(head -3 "$d/np2s.err")"
[ "$(grep -c '^Epoch\|^train:' "$d/np2.out")" -eq "$(grep -c '^Epoch\|^train:' "$d/np1.out")" ] && [ "$(wc -l <"$d/np2.jsonl")" -eq "$(wc -l <"$d/np1.jsonl")" ] &&
    pass dist_rank0_alone_logs || fail dist_rank0_alone_logs "$(wc -l "$d/np2.jsonl" "$d/np1.jsonl")"

# ---- the timeline: a Chrome trace with a track per rank and every kind of span
"${MPI[@]}" -np 2 "$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 2 --batch 32 --threads 1 --cache-dir "$d/cache" \
    --checkpoint "$d/tck/c-{epoch}.ckpt" --timeline "$d/trace.json" --log "$d/tl.jsonl" --out "$d/tl.ftl" >/dev/null 2>"$d/tl.err" ||
    fail dist_timeline_run "$(tail -3 "$d/tl.err")"
$PY - "$d/trace.json" "$d/tl.jsonl" <<'PYEOF' && pass dist_timeline_has_a_track_per_rank_and_every_span || fail dist_timeline_has_a_track_per_rank_and_every_span "see log"
import json, sys
ev = json.load(open(sys.argv[1]))
steps = sum(r["steps"] for r in map(json.loads, open(sys.argv[2])) if r.get("record") == "epoch")
names = {e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "process_name"}
assert len(names) == 2 and any(n.startswith("rank 0 ") for n in names) and any(n.startswith("rank 1 ") for n in names), names
spans = [e for e in ev if e.get("ph") == "X"]
for pid in (0, 1):
    mine = [e for e in spans if e["pid"] == pid]
    kinds = {e["name"] for e in mine}
    want = {"data wait", "head", "allreduce", "optimizer", "validation"} | ({"checkpoint"} if pid == 0 else set())
    assert want <= kinds, (pid, kinds)
    assert sum(e["name"] == "allreduce" for e in mine) == steps, (pid, steps)
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in mine)
    ts = [e["ts"] for e in mine if e["name"] == "head"]
    assert ts == sorted(ts)
print("events", len(ev), "steps", steps)
PYEOF
ls "$d" | grep -q 'trace.json.tmp' && fail dist_timeline_temporary_removed "$(ls "$d")" || pass dist_timeline_temporary_removed

# ---- resume under another rank count ends with the uninterrupted model
"${MPI[@]}" -np 2 "$FTL" train "$T" --val "$V" "${RUN[@]}" --batch 32 --threads 1 --cache-dir "$d/cache" \
    --checkpoint "$d/ck/c-{epoch}.ckpt" --out "$d/full.ftl" --log "$d/full.jsonl" >/dev/null 2>"$d/full.err" ||
    fail dist_resume_setup "$(tail -3 "$d/full.err")"
"$FTL" train "$T" --val "$V" "${RUN[@]}" --batch 64 --cache-dir "$d/cache" --resume "$d/ck/c-2.ckpt" \
    --out "$d/resumed.ftl" --log "$d/resumed.jsonl" >/dev/null 2>"$d/resumed.err" || fail dist_resume_np1 "$(tail -3 "$d/resumed.err")"
$READ_ST "$d/full.ftl" >"$d/full.json" 2>/dev/null
$READ_ST "$d/resumed.ftl" >"$d/resumed.json" 2>/dev/null
epochs_after() {  # LOG N OUT: the epoch records after epoch N
    $PY -c 'import json,sys; [print(l, end="") for l in open(sys.argv[1]) if json.loads(l).get("record") == "epoch" and json.loads(l)["epoch"] > int(sys.argv[2])]' "$1" "$2" >"$3"
}
epochs_after "$d/full.jsonl" 2 "$d/fulltail.jsonl"; cp "$d/full.json" "$d/fulltail.json"
same_model dist_resume_np2_checkpoint_under_np1 fulltail resumed
$PY -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; assert r[0]["record"] == "run" and r[0]["resume"].endswith("c-2.ckpt") and r[0]["ranks"] == 1; f=[json.loads(l) for l in open(sys.argv[2])]; assert f[0]["record"] == "run" and f[0]["ranks"] == 2' \
    "$d/resumed.jsonl" "$d/full.jsonl" && pass dist_log_run_records_name_ranks_and_resume || fail dist_log_run_records_name_ranks_and_resume "$(head -c 300 "$d/resumed.jsonl")"

# ---- eval: exact global counts on uneven shards (3 ranks, 153 images), predictions in order
"$FTL" eval "$d/np1.ftl" "$V" --json "$d/e1.json" --predictions "$d/p1.csv" --quiet >/dev/null 2>"$d/e1.err" || fail dist_eval_np1 "$(cat "$d/e1.err")"
"${MPI[@]}" -np 3 "$FTL" eval "$d/np1.ftl" "$V" --threads 1 --json "$d/e3.json" --predictions "$d/p3.csv" --quiet >"$d/e3.out" 2>"$d/e3.err" ||
    fail dist_eval_np3 "$(tail -3 "$d/e3.err")"
$PY - "$d" <<'PYEOF' && pass dist_eval_np3_exact_metrics_and_ordered_predictions || fail dist_eval_np3_exact_metrics_and_ordered_predictions "see log"
import json, sys
d = sys.argv[1]
a, b = json.load(open(d + "/e1.json")), json.load(open(d + "/e3.json"))
assert a["images"] == b["images"] == 153 and a["top1"] == b["top1"] and a["top5"] == b["top5"], (a["top1"], b["top1"])
assert a["confusion"] == b["confusion"] and abs(a["loss"] - b["loss"]) < 1e-9, (a["loss"], b["loss"])
assert open(d + "/p1.csv").read() == open(d + "/p3.csv").read()
PYEOF

# ---- the same under ASan + UBSan (Open MPI's own allocations suppressed, its plugins kept loaded
# so the suppressions can see them)
san_env=(env OMPI_MCA_mca_base_component_disable_dlclose=1
         ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:fast_unwind_on_malloc=0
         LSAN_OPTIONS=suppressions=$PWD/tests/sanitizer/lsan_openmpi.supp:print_suppressions=0)
for n in 2 3; do
    out=$("${san_env[@]}" "${MPI[@]}" -np $n "$BUILD/tools/ftl_dist_check_san" --chunk 100 2>&1)
    rc=$?
    [ $rc -eq 0 ] && [ "$(grep -c '^ok ' <<<"$out")" -eq 8 ] && ! grep -q -E 'AddressSanitizer|runtime error:|LeakSanitizer' <<<"$out" &&
        pass "dist_collectives_np${n}_under_sanitizers" || fail "dist_collectives_np${n}_under_sanitizers" "rc $rc: $(grep -m3 -E 'Sanitizer|runtime error|FAIL' <<<"$out")"
done
"${san_env[@]}" "${MPI[@]}" -np 2 "$FTL_SAN" prep "$SHARED/data/hymenoptera" "$d/sanprep" --size 64 --threads 1 --quiet >/dev/null 2>"$d/sanprep.err"
rc=$?
[ $rc -eq 0 ] && [ -e "$d/sanprep/val.parquet/part-00001.parquet" ] && ! grep -q -E 'AddressSanitizer|runtime error:|LeakSanitizer' "$d/sanprep.err" &&
    pass dist_prep_np2_under_sanitizers || fail dist_prep_np2_under_sanitizers "rc $rc: $(grep -m3 -E 'Sanitizer|runtime error|rror' "$d/sanprep.err")"
"${san_env[@]}" "${MPI[@]}" -np 2 "$FTL_SAN" embed "$V" --backbone "$MODEL" "$d/sanemb.parquet" --threads 1 --quiet >/dev/null 2>"$d/sanemb.err"
rc=$?
[ $rc -eq 0 ] && [ -e "$d/sanemb.parquet" ] && ! grep -q -E 'AddressSanitizer|runtime error:|LeakSanitizer' "$d/sanemb.err" &&
    pass dist_embed_np2_under_sanitizers || fail dist_embed_np2_under_sanitizers "rc $rc: $(grep -m3 -E 'Sanitizer|runtime error|rror' "$d/sanemb.err")"
"$FTL" embed "$V" --backbone "$MODEL" "$d/emb1.parquet" --quiet 2>/dev/null
a=$(q "SELECT label, path, md5(features::VARCHAR) h FROM read_parquet('$d/emb1.parquet', file_row_number=true) ORDER BY file_row_number")
b=$(q "SELECT label, path, md5(features::VARCHAR) h FROM read_parquet('$d/sanemb.parquet', file_row_number=true) ORDER BY file_row_number")
[ -n "$a" ] && [ "$a" = "$b" ] && pass dist_embed_np2_equals_np1_row_for_row || fail dist_embed_np2_equals_np1_row_for_row "$(wc -c <<<"$a") vs $(wc -c <<<"$b") bytes"
"${san_env[@]}" "${MPI[@]}" -np 2 "$FTL_SAN" eval "$d/np1.ftl" "$V" --threads 1 --json "$d/es.json" --quiet >/dev/null 2>"$d/es.err"
rc=$?
cmp -s <($PY -c 'import json,sys; e=json.load(open(sys.argv[1])); print(e["top1"], e["confusion"])' "$d/e1.json") \
       <($PY -c 'import json,sys; e=json.load(open(sys.argv[1])); print(e["top1"], e["confusion"])' "$d/es.json" 2>/dev/null) &&
    [ $rc -eq 0 ] && ! grep -q -E 'AddressSanitizer|runtime error:|LeakSanitizer' "$d/es.err" &&
    pass dist_eval_np2_under_sanitizers || fail dist_eval_np2_under_sanitizers "rc $rc: $(grep -m3 -E 'Sanitizer|runtime error|rror' "$d/es.err")"
"${san_env[@]}" "${MPI[@]}" -np 2 "$FTL_SAN" train "$T" --val "$V" "${RUN[@]}" --epochs 2 --batch 32 --threads 1 --cache-dir "$d/cache" \
    --checkpoint "$d/sck/c-{epoch}.ckpt" --out "$d/san.ftl" >/dev/null 2>"$d/san.err"
rc=$?
[ $rc -eq 0 ] && [ -e "$d/san.ftl" ] && ! grep -q -E 'AddressSanitizer|runtime error:|LeakSanitizer' "$d/san.err" &&
    pass dist_train_np2_under_sanitizers || fail dist_train_np2_under_sanitizers "rc $rc: $(grep -m3 -E 'Sanitizer|runtime error|rror' "$d/san.err")"

# ---- different arguments on one rank: refused at start, naming the option
out=$(timeout 60 mpirun --oversubscribe -np 1 "$FTL" train "$T" --val "$V" "${RUN[@]}" --batch 32 --out "$d/mm.ftl" : \
      -np 1 "$FTL" train "$T" --val "$V" "${RUN[@]}" --batch 16 --out "$d/mm.ftl" 2>&1)
rc=$?
[ $rc -ne 0 ] && grep -q 'rank 1 was started with other arguments than rank 0: --batch is "16" here but "32" on rank 0' <<<"$out" &&
    [ ! -e "$d/mm.ftl" ] && pass dist_mismatched_arguments_named || fail dist_mismatched_arguments_named "rc $rc: $(head -c 500 <<<"$out")"

# ---- a build without MPI refuses a launcher's N ranks (and runs alone as before)
out=$(OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 "$BUILD/ftl_stub" eval "$d/np1.ftl" "$V" --quiet 2>&1)
[ $? -ne 0 ] && grep -q 'started by a launcher with 2 ranks, but this ftl was built without MPI' <<<"$out" &&
    "$BUILD/ftl_stub" --version | grep -q 'none: built without MPI' && "$BUILD/ftl_stub" eval "$d/np1.ftl" "$V" --quiet >/dev/null 2>&1 &&
    pass dist_stub_build_refuses_a_launcher || fail dist_stub_build_refuses_a_launcher "$out"

# ---- a checkpoint of the previous format (per-rank dropout streams) is refused, saying why
cp "$d/ck/c-1.ckpt" "$d/old.ckpt"
$PY - "$d/old.ckpt" <<'PYEOF'
import sys
b = open(sys.argv[1], "rb").read()
assert b.count(b"ftl-checkpoint-2") == 1
open(sys.argv[1], "wb").write(b.replace(b"ftl-checkpoint-2", b"ftl-checkpoint-1"))
PYEOF
expect_error dist_old_checkpoint_refused 2 'written by an older ftl \(ftl-checkpoint-1\).*train again from the start' \
    "$FTL_SAN" train "$T" --val "$V" "${RUN[@]}" --batch 64 --cache-dir "$d/cache" --resume "$d/old.ckpt" --out "$d/old.ftl" --quiet

# ---- streaming (--no-feature-cache): every rank's loader position kept, another N refused
"${MPI[@]}" -np 2 "$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 2 --batch 16 --threads 1 --no-feature-cache \
    --checkpoint "$d/sck2/c-{epoch}.ckpt" --out "$d/str.ftl" >/dev/null 2>"$d/str.err" || fail dist_streaming_np2_runs "$(tail -3 "$d/str.err")"
out=$("$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 2 --batch 16 --no-feature-cache --resume "$d/sck2/c-1.ckpt" --out "$d/str1.ftl" 2>&1)
[ $? -ne 0 ] && grep -q 'cannot resume from .* with 1 rank: it was written by 2 ranks that each streamed their own shard' <<<"$out" &&
    pass dist_streaming_resume_under_other_np_refused || fail dist_streaming_resume_under_other_np_refused "$(head -c 400 <<<"$out")"
"${MPI[@]}" -np 2 "$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 2 --batch 16 --threads 1 --no-feature-cache \
    --resume "$d/sck2/c-1.ckpt" --out "$d/str2.ftl" >/dev/null 2>"$d/str2.err" && cmp -s "$d/str.ftl" "$d/str2.ftl" &&
    pass dist_streaming_resume_same_np_identical || fail dist_streaming_resume_same_np_identical "$(tail -3 "$d/str2.err")"

# ---- the stall inspector inside training: rank 1 sleeps before step 2; a slow checkpoint does not trip it
start=$(date +%s)
out=$(FTL_TEST_STALL_RANK=1 FTL_TEST_STALL_STEP=2 FTL_TEST_STALL_SECONDS=40 timeout 60 "${MPI[@]}" -np 2 "$FTL" train "$T" --val "$V" \
      "${RUN[@]}" --batch 32 --threads 1 --cache-dir "$d/cache" --stall-timeout 5 --out "$d/stall.ftl" 2>&1)
rc=$?
took=$(($(date +%s) - start))
[ $rc -ne 0 ] && [ $took -le 15 ] && grep -q 'rank 0: stalled for [0-9]* s in the gradient allreduce at step 2: rank 1 has not joined' <<<"$out" &&
    [ ! -e "$d/stall.ftl" ] && pass dist_train_stall_names_the_missing_rank ||
    fail dist_train_stall_names_the_missing_rank "rc $rc after ${took}s: $(grep -m3 'stall\|waiting\|rror' <<<"$out")"
out=$(FTL_TEST_CHECKPOINT_SLEEP_S=7 timeout 120 "${MPI[@]}" -np 2 "$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 2 --batch 32 \
      --threads 1 --cache-dir "$d/cache" --stall-timeout 3 --checkpoint "$d/slow/c-{epoch}.ckpt" --out "$d/slow.ftl" 2>&1)
rc=$?
[ $rc -eq 0 ] && [ -e "$d/slow.ftl" ] && grep -q 'waiting for rank 0 (writing a checkpoint)' <<<"$out" &&
    pass dist_slow_checkpoint_is_a_long_phase_not_a_stall || fail dist_slow_checkpoint_is_a_long_phase_not_a_stall "rc $rc: $(grep -m3 'stall\|waiting\|rror' <<<"$out")"

# ---- prep: one rank's failure leaves no dataset and no temporary folder
out=$("${MPI[@]}" -np 2 "$FTL" prep "$SHARED/data/hymenoptera" "$d/strict" --size 128 --strict --threads 1 2>&1)
[ $? -ne 0 ] && grep -q 'rank 0: .*imageNotFound.gif.*(--strict)' <<<"$out" && [ ! -e "$d/strict" ] && ! ls "$d" | grep -q '^strict' &&
    pass dist_prep_failure_leaves_nothing || fail dist_prep_failure_leaves_nothing "$(ls "$d" | grep strict) $(head -c 300 <<<"$out")"

# ---- predict refuses to run N copies
out=$("${MPI[@]}" -np 2 "$FTL" predict "$d/np1.ftl" "$SHARED/data/hymenoptera/val/ants/10308379_1b6c72e180.jpg" 2>&1)
[ $? -ne 0 ] && grep -q 'predict runs in one process' <<<"$out" && pass dist_predict_refuses_a_launcher ||
    fail dist_predict_refuses_a_launcher "$out"

# ---- a rank killed mid-epoch ends the job; the last checkpoint resumes to the uninterrupted model
rm -rf "$d/kck"
( FTL_TEST_STEP_SLEEP_MS=150 "${MPI[@]}" -np 2 "$FTL" train "$T" --val "$V" "${RUN[@]}" --batch 32 --threads 1 --cache-dir "$d/cache" \
    --checkpoint "$d/kck/c-{epoch}.ckpt" --out "$d/killed.ftl" >"$d/kill.out" 2>"$d/kill.err"; echo $? >"$d/kill.rc" ) &
for i in $(seq 1 100); do [ -e "$d/kck/c-2.ckpt" ] && break; sleep 0.2; done
victim=""
for p in $(pgrep -f "ftl train .*killed.ftl"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -q '^OMPI_COMM_WORLD_RANK=1$' && victim=$p
done
killed_at=$(date +%s)
[ -n "$victim" ] && kill -9 "$victim"
for i in $(seq 1 150); do [ -e "$d/kill.rc" ] && break; sleep 0.2; done
took=$(($(date +%s) - killed_at))
if [ -n "$victim" ] && [ -e "$d/kill.rc" ] && [ "$(cat "$d/kill.rc")" -ne 0 ] && [ $took -le 30 ] && [ ! -e "$d/killed.ftl" ] &&
    grep -q 'process rank 1 .*exited on signal 9' "$d/kill.err"; then
    pass dist_killed_rank_ends_the_job
else
    fail dist_killed_rank_ends_the_job "victim '$victim', rc $(cat "$d/kill.rc" 2>/dev/null), ${took}s: $(tail -3 "$d/kill.err")"
fi
last=$(ls "$d/kck" 2>/dev/null | sed 's/c-\([0-9]*\).ckpt/\1/' | sort -n | tail -1)
"${MPI[@]}" -np 4 "$FTL" train "$T" --val "$V" "${RUN[@]}" --batch 16 --threads 1 --cache-dir "$d/cache" --resume "$d/kck/c-$last.ckpt" \
    --out "$d/afterkill.ftl" --log "$d/afterkill.jsonl" >/dev/null 2>"$d/afterkill.err" || fail dist_resume_after_kill "$(tail -3 "$d/afterkill.err")"
$READ_ST "$d/afterkill.ftl" >"$d/afterkill.json" 2>/dev/null
epochs_after "$d/full.jsonl" "$last" "$d/fullk.jsonl"; cp "$d/full.json" "$d/fullk.json"
same_model dist_resume_after_kill_under_np4_matches_uninterrupted fullk afterkill
finish
