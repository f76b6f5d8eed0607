#!/usr/bin/env bash
# --keep-last K after an interrupt: a run killed between a checkpoint's write and the deletions it
# owes (FTL_TEST_KILL_AFTER_CHECKPOINT_EPOCH, a test-only hook: SIGKILL right there) leaves K+1
# files; the resume finishes those deletions, so at most K of the run's checkpoints remain, in one
# process and under mpirun. A file of the same name that another run wrote (another run id in its
# header) or that is no checkpoint is never deleted.
source "$(dirname "$0")/lib.sh"
d=$(scratch keep_last)
MODEL="$SHARED/models/mobilenet_v1_0.25_128.onnx"  # small and fast
READ_ST="$PY $(dirname "$0")/../ref/read_safetensors.py"
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --size 128 --quiet 2>/dev/null || fail keep_last_prep "prep failed"
T="$d/ds/train.parquet"
V="$d/ds/val.parquet"
RUN=(--backbone "$MODEL" --lr 0.004 --seed 3 --keep-last 2 --cache-dir "$d/cache" --quiet)

files() { ls "$1" 2>/dev/null | tr '\n' ' ' | sed 's/ $//'; }
# meta FILE KEY: one metadata value of a checkpoint, read by the independent safetensors reader
meta() { $READ_ST "$1" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["metadata"].get(sys.argv[1], ""))' "$2"; }
# killed RUN_DIR EPOCHS [launcher...]: a run killed right after writing checkpoint 3; its exit status
killed() {
    local dir=$1 epochs=$2
    shift 2
    FTL_TEST_KILL_AFTER_CHECKPOINT_EPOCH=3 "$@" "$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs "$epochs" \
        --checkpoint "$d/$dir/c-{epoch}.ckpt" --out "$d/$dir.ftl" >"$d/$dir.kill.out" 2>"$d/$dir.kill.err"
}

# ---- one process: killed after c-3 (c-1 still owed), resumed to epoch 5
killed a 5
rc=$?
if [ $rc -ne 0 ] && [ "$(files "$d/a")" = "c-1.ckpt c-2.ckpt c-3.ckpt" ] && [ ! -e "$d/a.ftl" ] &&
    [ "$(meta "$d/a/c-3.ckpt" ftl.checkpoints_to_delete)" = "[\"$d/a/c-1.ckpt\"]" ]; then
    pass keep_last_kill_leaves_the_owed_file_recorded
else
    fail keep_last_kill_leaves_the_owed_file_recorded "rc $rc, files: $(files "$d/a"); $(tail -2 "$d/a.kill.err")"
fi
id=$(meta "$d/a/c-3.ckpt" ftl.run_id)
"$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 5 --checkpoint "$d/a/c-{epoch}.ckpt" --out "$d/a.ftl" \
    --resume "$d/a/c-3.ckpt" >/dev/null 2>"$d/a.resume.err"
rc=$?
if [ $rc -eq 0 ] && [ "$(files "$d/a")" = "c-4.ckpt c-5.ckpt" ] && [[ "$id" =~ ^[0-9a-f]{32}$ ]] &&
    [ "$(meta "$d/a/c-5.ckpt" ftl.run_id)" = "$id" ]; then
    pass keep_last_resume_finishes_the_owed_deletions
else
    fail keep_last_resume_finishes_the_owed_deletions "rc $rc, files: $(files "$d/a"), run id '$id'; $(tail -2 "$d/a.resume.err")"
fi

# ---- killed after the last epoch's checkpoint: the resume has no epoch left and still finishes them
killed b 3
"$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 3 --checkpoint "$d/b/c-{epoch}.ckpt" --out "$d/b.ftl" \
    --resume "$d/b/c-3.ckpt" >/dev/null 2>"$d/b.resume.err"
rc=$?
[ $rc -eq 0 ] && [ "$(files "$d/b")" = "c-2.ckpt c-3.ckpt" ] && [ -e "$d/b.ftl" ] &&
    pass keep_last_resume_with_no_epoch_left_finishes_them ||
    fail keep_last_resume_with_no_epoch_left_finishes_them "rc $rc, files: $(files "$d/b"); $(tail -2 "$d/b.resume.err")"

# ---- c-1 replaced meanwhile by another run's checkpoint of that name: kept, byte for byte, and named
killed c 5
"$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 1 --checkpoint "$d/other/c-{epoch}.ckpt" --out "$d/other.ftl" \
    >/dev/null 2>&1 || fail keep_last_other_run "the other run failed"
cp "$d/other/c-1.ckpt" "$d/c/c-1.ckpt"
"$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 5 --checkpoint "$d/c/c-{epoch}.ckpt" --out "$d/c.ftl" \
    --resume "$d/c/c-3.ckpt" >/dev/null 2>"$d/c.resume.err"
rc=$?
if [ $rc -eq 0 ] && [ "$(files "$d/c")" = "c-1.ckpt c-4.ckpt c-5.ckpt" ] && cmp -s "$d/other/c-1.ckpt" "$d/c/c-1.ckpt" &&
    [ "$(meta "$d/other/c-1.ckpt" ftl.run_id)" != "$(meta "$d/c/c-5.ckpt" ftl.run_id)" ] &&
    grep -q "not deleting $d/c/c-1.ckpt: a checkpoint of another run" "$d/c.resume.err"; then
    pass keep_last_never_deletes_another_runs_file_of_the_same_name
else
    fail keep_last_never_deletes_another_runs_file_of_the_same_name "rc $rc, files: $(files "$d/c"); $(tail -2 "$d/c.resume.err")"
fi
# ... nor a file that is no checkpoint
killed e 3
echo "my notes" >"$d/e/c-1.ckpt"
"$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 3 --checkpoint "$d/e/c-{epoch}.ckpt" --out "$d/e.ftl" \
    --resume "$d/e/c-3.ckpt" >/dev/null 2>"$d/e.resume.err"
[ "$(cat "$d/e/c-1.ckpt")" = "my notes" ] && grep -q "not deleting $d/e/c-1.ckpt: not an ftl checkpoint" "$d/e.resume.err" &&
    pass keep_last_never_deletes_a_file_that_is_no_checkpoint ||
    fail keep_last_never_deletes_a_file_that_is_no_checkpoint "files: $(files "$d/e"); $(tail -2 "$d/e.resume.err")"

# ---- under mpirun -np 2: rank 0 killed after c-3, the job ends; a resume under mpirun finishes them
if ! command -v mpirun >/dev/null 2>&1; then
    skip keep_last_mpirun "mpirun (openmpi-bin) is not installed"
elif ! "$FTL" --version | grep -q 'Open MPI'; then
    skip keep_last_mpirun "this ftl was built without MPI"
else
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_btl_vader_single_copy_mechanism=none # containers often forbid CMA (ptrace)
    MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x FTL_TEST_KILL_AFTER_CHECKPOINT_EPOCH)
    RUN+=(--threads 1)
    killed m 5 "${MPI[@]}"
    rc=$?
    [ $rc -ne 0 ] && [ "$(files "$d/m")" = "c-1.ckpt c-2.ckpt c-3.ckpt" ] && pass keep_last_mpirun_kill_leaves_the_owed_file ||
        fail keep_last_mpirun_kill_leaves_the_owed_file "rc $rc, files: $(files "$d/m"); $(tail -3 "$d/m.kill.err")"
    mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 5 \
        --checkpoint "$d/m/c-{epoch}.ckpt" --out "$d/m.ftl" --resume "$d/m/c-3.ckpt" >/dev/null 2>"$d/m.resume.err"
    rc=$?
    [ $rc -eq 0 ] && [ "$(files "$d/m")" = "c-4.ckpt c-5.ckpt" ] && pass keep_last_mpirun_resume_finishes_the_owed_deletions ||
        fail keep_last_mpirun_resume_finishes_the_owed_deletions "rc $rc, files: $(files "$d/m"); $(tail -3 "$d/m.resume.err")"
fi
finish
