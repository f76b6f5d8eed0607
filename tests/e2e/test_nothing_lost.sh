#!/usr/bin/env bash
# Nothing overwritten, nothing left behind: every output that is one of a command's inputs (or
# another of its outputs) refused before any work with the inputs unchanged, from the CLI and from
# Python; two runs publishing one output (a test-only pause between the work and the rename), so
# exactly one wins and the other's result is kept under the name it prints; SIGKILL at the publish,
# then a rerun that removes the killed run's temporaries (also under mpirun).
source "$(dirname "$0")/lib.sh"
d=$(scratch nothing_lost)
MODEL="$SHARED/models/mobilenet_v1_0.25_128.onnx" # small and fast
SRC="$d/photos"
mkdir -p "$SRC/ants" "$SRC/bees"
for c in ants bees; do
    ls "$SHARED/data/hymenoptera/train/$c"/*.jpg | head -12 | xargs -I{} cp {} "$SRC/$c/"
done
"$FTL" prep "$SRC" "$d/ds" --size 64 --quiet >/dev/null 2>&1 || fail nothing_lost_setup "prep failed"
T="$d/ds/train.parquet" V="$d/ds/val.parquet"
cp "$MODEL" "$d/backbone.onnx"
B="$d/backbone.onnx"
RUN=(--backbone "$B" --epochs 2 --batch 8 --quiet)
"$FTL" train "$T" --val "$V" "${RUN[@]}" --out "$d/m.ftl" --log "$d/run.jsonl" >/dev/null 2>&1 ||
    fail nothing_lost_setup "train failed"

sums() { sha256sum "$T" "$V" "$B" "$d/m.ftl" "$d/run.jsonl" | awk '{print $1}' | tr '\n' ' '; }
before=$(sums)
# refused NAME REGEX command...: exit 2 before any work, a message naming both paths, inputs unchanged.
refused() {
    local name=$1 pattern=$2
    shift 2
    expect_error "$name" 2 "$pattern" "$@"
    [ "$(sums)" = "$before" ] || fail "${name}_inputs_unchanged" "an input changed"
    before=$(sums)
}

# ---- outputs that are inputs or other outputs (--overwrite does not change that)
refused refuse_out_is_train 'train: --out .*train.parquet is the input TRAIN .*train.parquet' \
    "$FTL" train "$T" --val "$V" "${RUN[@]}" --out "$T" --overwrite
refused refuse_out_is_backbone 'train: --out .*backbone.onnx is the input --backbone' \
    "$FTL" train "$T" --val "$V" "${RUN[@]}" --out "$B" --overwrite
refused refuse_out_is_val_through_dotdot 'is the input --val' \
    "$FTL" train "$T" --val "$V" "${RUN[@]}" --out "$d/ds/../ds/./val.parquet" --overwrite
ln -sf "$T" "$d/link.parquet"
ln -f "$T" "$d/hardlink.parquet"
refused refuse_out_is_train_symlink 'is the input TRAIN' \
    "$FTL" train "$T" --val "$V" "${RUN[@]}" --out "$d/link.parquet" --overwrite
refused refuse_out_is_train_hard_link 'hardlink.parquet is the input TRAIN' \
    "$FTL" train "$T" --val "$V" "${RUN[@]}" --out "$d/hardlink.parquet" --overwrite
refused refuse_log_is_out '--out .*m2.ftl is also the output --log .*m2.ftl' \
    "$FTL" train "$T" --val "$V" "${RUN[@]}" --out "$d/m2.ftl" --log "$d/m2.ftl"
refused refuse_checkpoint_is_out '--checkpoint .*ck-\{epoch\}.ftl would overwrite the output --out .*ck-2.ftl' \
    "$FTL" train "$T" --val "$V" "${RUN[@]}" --out "$d/ck-2.ftl" --checkpoint "$d/ck-{epoch}.ftl"
cp "$T" "$d/t-1.parquet"
t1=$(sha256sum <"$d/t-1.parquet")
refused refuse_checkpoint_is_train '--checkpoint .*t-\{epoch\}.parquet would overwrite the input TRAIN .*t-1.parquet' \
    "$FTL" train "$d/t-1.parquet" --val "$V" "${RUN[@]}" --out "$d/m3.ftl" --checkpoint "$d/t-{epoch}.parquet"
[ "$(sha256sum <"$d/t-1.parquet")" = "$t1" ] || fail refuse_checkpoint_is_train_input_unchanged "t-1.parquet changed"
refused refuse_report_is_val '--report .*val.parquet is the input --val' \
    "$FTL" train "$T" --val "$V" "${RUN[@]}" --out "$d/m3.ftl" --log "$d/r3.jsonl" --report "$V" --overwrite
refused refuse_timeline_is_train '--timeline .*train.parquet is the input TRAIN' \
    "$FTL" train "$T" --val "$V" "${RUN[@]}" --out "$d/m3.ftl" --timeline "$T"
refused refuse_init_is_out '--out .*m.ftl is the input --init' \
    "$FTL" train "$T" --val "$V" "${RUN[@]}" --fine-tune-only --fine-tune-last 1 --init "$d/m.ftl" --out "$d/m.ftl" --overwrite
mkdir -p "$d/cache"
cp "$T" "$d/cache/t.features.parquet"
refused refuse_cache_writes_over_input '--cache-dir .*cache would write over the input TRAIN' \
    "$FTL" train "$d/cache/t.features.parquet" --val "$V" "${RUN[@]}" --out "$d/m3.ftl" --cache-dir "$d/cache"
refused refuse_embed_out_is_data 'embed: OUT .*train.parquet is the input DATA' \
    "$FTL" embed "$T" --backbone "$B" "$T" --overwrite --quiet
refused refuse_export_out_is_model 'export: OUT .*m.ftl is the input MODEL' \
    "$FTL" export "$d/m.ftl" "$d/m.ftl" --overwrite --quiet
refused refuse_export_out_is_backbone 'export: OUT .*backbone.onnx is the input --backbone' \
    "$FTL" export "$d/m.ftl" "$B" --backbone "$B" --overwrite --quiet
refused refuse_eval_json_is_data 'eval: --json .*val.parquet is the input DATA' \
    "$FTL" eval "$d/m.ftl" "$V" --json "$V" --overwrite --quiet
refused refuse_eval_predictions_is_model 'eval: --predictions .*m.ftl is the input MODEL' \
    "$FTL" eval "$d/m.ftl" "$V" --predictions "$d/m.ftl" --overwrite --quiet
refused refuse_report_is_log 'report: -o .*run.jsonl is the input LOG' \
    "$FTL" report "$d/run.jsonl" -o "$d/run.jsonl" --overwrite
refused refuse_sweep_out_is_train 'sweep: --out .*train.parquet is the input TRAIN' \
    "$FTL" sweep "$T" --val "$V" "${RUN[@]}" --grid lr=0.01,0.001 --out "$T" --overwrite
refused refuse_sweep_table_is_val 'sweep: --table .*val.parquet is the input --val' \
    "$FTL" sweep "$T" --val "$V" "${RUN[@]}" --grid lr=0.01,0.001 --out "$d/best.ftl" --table "$V"
# a backbone's external data files are inputs too (links to the shared Xception: nothing copied)
mkdir -p "$d/xc"
for f in "$SHARED"/models/xception_random.onnx*; do ln -sf "$f" "$d/xc/"; done
refused refuse_embed_out_is_external_data "embed: OUT .*xception_random.onnx.data0 is the input --backbone's external data" \
    "$FTL" embed "$V" --backbone "$d/xc/xception_random.onnx" "$d/xc/xception_random.onnx.data0" --overwrite --quiet
# a resume under its own checkpoint pattern is not a conflict: it continues after the checkpoint
"$FTL" train "$T" --val "$V" "${RUN[@]}" --epochs 1 --out "$d/r.ftl" --checkpoint "$d/ck/c-{epoch}.ckpt" >/dev/null 2>&1
if "$FTL" train "$T" --val "$V" "${RUN[@]}" --out "$d/r.ftl" --resume "$d/ck/c-1.ckpt" --checkpoint "$d/ck/c-{epoch}.ckpt" \
    >"$d/resume.log" 2>&1 && [ -f "$d/ck/c-2.ckpt" ]; then
    pass resume_under_own_pattern_allowed
else
    fail resume_under_own_pattern_allowed "$(tail -3 "$d/resume.log")"
fi

# the same refusals from Python
if ls "$BUILD"/python/ftl/_ftl*.so >/dev/null 2>&1; then
    out=$(PYTHONPATH="$BUILD/python" "$PY" - "$T" "$V" "$B" "$d/m.ftl" <<'EOF' 2>&1
import sys, ftl
T, V, B, M = sys.argv[1:]
for what, call in [("train", lambda: ftl.train(T, val=V, backbone=B, out=T, epochs=1, overwrite=True, verbose=0)),
                   ("export", lambda: ftl.Model.load(M).export(M, overwrite=True))]:
    try:
        call()
        print(what, "ACCEPTED")
    except Exception as e:
        print(what, "REFUSED", e)
EOF
)
    if grep -q 'train REFUSED.*out .*train.parquet is the input TRAIN' <<<"$out" &&
        grep -q 'export REFUSED.*OUT .*m.ftl is the input MODEL' <<<"$out" && [ "$(sums)" = "$before" ]; then
        pass refuse_from_python
    else
        fail refuse_from_python "$out"
    fi
else
    skip refuse_from_python "the Python package is not built (make python)"
fi

# ---- two runs on one output: a pause between the work and the publish makes the order certain
# pause_then NAME MATCH MARKER command...: starts the command paused before publishing MATCH; waits.
pause_start() {
    local marker=$1 match=$2
    shift 2
    rm -f "$marker" "$marker.go"
    FTL_TEST_PAUSE_BEFORE_PUBLISH="$marker" FTL_TEST_PAUSE_MATCH="$match" "$@" >"$marker.out" 2>&1 &
    PAUSED_PID=$!
    for _ in $(seq 600); do [ -f "$marker" ] && return 0; sleep 0.1; done
    return 1
}
two_runs() { # NAME MATCH OUT KEPT first-command -- second-command
    local name=$1 match=$2 out=$3 kept=$4
    shift 4
    local first=() second=()
    while [ "$1" != "--" ]; do first+=("$1"); shift; done
    shift
    second=("$@")
    if ! pause_start "$d/$name.mark" "$match" "${first[@]}"; then
        fail "$name" "the first run never reached its publish: $(tail -3 "$d/$name.mark.out")"
        kill "$PAUSED_PID" 2>/dev/null
        return
    fi
    "${second[@]}" >"$d/$name.second" 2>&1
    local rc2=$? sum2
    sum2=$(find "$out" -type f -exec sha256sum {} + | sort | sha256sum)
    touch "$d/$name.mark.go"
    wait "$PAUSED_PID"
    local rc1=$?
    if [ $rc2 -eq 0 ] && [ $rc1 -ne 0 ] && grep -q "was created by another run while this one worked.*kept as .*$(basename "$kept")" "$d/$name.mark.out" &&
        [ -e "$kept" ] && [ "$(find "$out" -type f -exec sha256sum {} + | sort | sha256sum)" = "$sum2" ] &&
        ! ls -a "$(dirname "$out")" | grep -q '\.tmp-'; then
        pass "$name"
    else
        fail "$name" "rc first $rc1, second $rc2; $(tail -2 "$d/$name.mark.out") $(ls "$(dirname "$out")")"
    fi
}
mkdir -p "$d/two"
two_runs two_trains_one_out 'm.ftl$' "$d/two/m.ftl" "$d/two/m-2.ftl" \
    "$FTL" train "$T" --val "$V" "${RUN[@]}" --seed 1 --out "$d/two/m.ftl" -- \
    "$FTL" train "$T" --val "$V" "${RUN[@]}" --seed 2 --out "$d/two/m.ftl"
if [ -f "$d/two/m-2.ftl" ] && "$FTL" eval "$d/two/m-2.ftl" "$V" --quiet >/dev/null 2>&1 &&
    ! cmp -s "$d/two/m.ftl" "$d/two/m-2.ftl"; then
    pass two_trains_kept_model_is_the_losers
else
    fail two_trains_kept_model_is_the_losers "the kept model is not a usable, different model"
fi
two_runs two_preps_one_out 'two/ds$' "$d/two/ds" "$d/two/ds-2" \
    "$FTL" prep "$SRC" "$d/two/ds" --size 64 --seed 1 --quiet -- \
    "$FTL" prep "$SRC" "$d/two/ds" --size 64 --seed 2 --quiet
two_runs two_embeds_one_out 'f.parquet$' "$d/two/f.parquet" "$d/two/f-2.parquet" \
    "$FTL" embed "$V" --backbone "$B" "$d/two/f.parquet" --quiet -- \
    "$FTL" embed "$V" --backbone "$B" "$d/two/f.parquet" --quiet
# --overwrite: the last writer wins, whole
if pause_start "$d/ow.mark" 'm.ftl$' "$FTL" train "$T" --val "$V" "${RUN[@]}" --seed 3 --out "$d/two/m.ftl" --overwrite; then
    "$FTL" train "$T" --val "$V" "${RUN[@]}" --seed 4 --out "$d/two/m.ftl" --overwrite >/dev/null 2>&1
    touch "$d/ow.mark.go"
    wait "$PAUSED_PID"
    rc=$?
    read -r _ tmp <"$d/ow.mark"
    if [ $rc -eq 0 ] && "$FTL" eval "$d/two/m.ftl" "$V" --quiet >/dev/null 2>&1 && [ ! -e "$tmp" ]; then
        pass two_trains_overwrite_last_wins
    else
        fail two_trains_overwrite_last_wins "rc $rc: $(tail -2 "$d/ow.mark.out")"
    fi
else
    fail two_trains_overwrite_last_wins "never paused"
fi

# ---- SIGKILL at the publish, then a rerun into the same folder removes the temporary
# killed_then_rerun NAME MATCH FOLDER first-command -- rerun-command
killed_then_rerun() {
    local name=$1 match=$2 folder=$3
    shift 3
    local first=() rerun=()
    while [ "$1" != "--" ]; do first+=("$1"); shift; done
    shift
    rerun=("$@")
    if ! pause_start "$d/$name.mark" "$match" "${first[@]}"; then
        fail "$name" "never paused: $(tail -3 "$d/$name.mark.out")"
        kill "$PAUSED_PID" 2>/dev/null
        return
    fi
    kill -9 "$PAUSED_PID"
    wait "$PAUSED_PID" 2>/dev/null
    local left
    left=$(find "$folder" -maxdepth 1 -name '*.tmp-*' | wc -l)
    "${rerun[@]}" >"$d/$name.rerun" 2>&1
    local rc=$?
    if [ "$left" -gt 0 ] && [ $rc -eq 0 ] && [ -z "$(find "$folder" -maxdepth 1 -name '*.tmp-*')" ] &&
        grep -q "removed [0-9]* temporar.* left by interrupted runs in .*(.* MB)" "$d/$name.rerun"; then
        pass "$name"
    else
        fail "$name" "left $left, rerun rc $rc; now: $(find "$folder" -maxdepth 1 -name '*.tmp-*') $(grep -i remov "$d/$name.rerun")"
    fi
}
mkdir -p "$d/kill"
killed_then_rerun killed_prep_swept 'kill/p1$' "$d/kill" \
    "$FTL" prep "$SRC" "$d/kill/p1" --size 64 -- "$FTL" prep "$SRC" "$d/kill/p2" --size 64
killed_then_rerun killed_embed_swept 'kill/e1.parquet$' "$d/kill" \
    "$FTL" embed "$V" --backbone "$B" "$d/kill/e1.parquet" -- "$FTL" embed "$V" --backbone "$B" "$d/kill/e1.parquet"
killed_then_rerun killed_feature_cache_swept '.features.parquet' "$d/kill/cache" \
    "$FTL" train "$T" --val "$V" "${RUN[@]}" --out "$d/kill/m.ftl" --cache-dir "$d/kill/cache" -- \
    "$FTL" train "$T" --val "$V" "${RUN[@]}" --out "$d/kill/m.ftl" --cache-dir "$d/kill/cache"
killed_then_rerun killed_checkpoint_swept 'c-2.ckpt' "$d/kill/ck" \
    "$FTL" train "$T" --val "$V" "${RUN[@]}" --out "$d/kill/m2.ftl" --checkpoint "$d/kill/ck/c-{epoch}.ckpt" -- \
    "$FTL" train "$T" --val "$V" "${RUN[@]}" --out "$d/kill/m2.ftl" --checkpoint "$d/kill/ck/c-{epoch}.ckpt"
killed_then_rerun killed_sweep_swept 'trial-0002.ftl$' "$d/kill/s.trials" \
    "$FTL" sweep "$T" --val "$V" "${RUN[@]}" --grid lr=0.01,0.001 --out "$d/kill/s.ftl" -- \
    "$FTL" sweep "$T" --val "$V" "${RUN[@]}" --grid lr=0.01,0.001 --out "$d/kill/s.ftl" --overwrite
# a live writer's temporary is never taken for a dead one's
if pause_start "$d/live.mark" 'kill/live$' "$FTL" prep "$SRC" "$d/kill/live" --size 64; then
    "$FTL" prep "$SRC" "$d/kill/p3" --size 64 >"$d/live.other" 2>&1
    read -r _ tmp <"$d/live.mark"
    touch "$d/live.mark.go"
    wait "$PAUSED_PID"
    rc=$?
    if [ $rc -eq 0 ] && [ -f "$d/kill/live/train.parquet" ] && ! grep -q 'removed' "$d/live.other"; then
        pass live_temporary_not_swept
    else
        fail live_temporary_not_swept "rc $rc: $(tail -2 "$d/live.mark.out") $(grep removed "$d/live.other")"
    fi
else
    fail live_temporary_not_swept "never paused"
fi

# ---- under mpirun: every rank's temporaries, on every rank's disk
if command -v mpirun >/dev/null 2>&1 && "$FTL" --version | grep -q 'Open MPI'; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
    MPI=(mpirun --oversubscribe --bind-to none -np 2)
    mkdir -p "$d/mpi" "$d/mpi/tmp1"
    # rank 1 killed while rank 0 waits at the publish: rank 0's cleanup removes the whole folder,
    # rank 1's parts in it too, and says so only because it did
    if pause_start "$d/mk1.mark" 'mpi/a$' "${MPI[@]}" -x FTL_TEST_PAUSE_BEFORE_PUBLISH -x FTL_TEST_PAUSE_MATCH \
        "$FTL" prep "$SRC" "$d/mpi/a" --size 64; then
        read -r pid0 _ <"$d/mk1.mark" # rank 0 wrote the marker; the other rank's process is rank 1
        kill -9 "$(pgrep -f "^$FTL prep $SRC $d/mpi/a" | grep -v "^$pid0\$" | head -1)"
        wait "$PAUSED_PID"
        if [ -z "$(find "$d/mpi" -maxdepth 1 -name 'a.tmp-*')" ] && grep -q 'temporary outputs removed' "$d/mk1.mark.out"; then
            pass dist_prep_rank_killed_nothing_left
        else
            fail dist_prep_rank_killed_nothing_left "$(find "$d/mpi" -maxdepth 1) $(tail -5 "$d/mk1.mark.out")"
        fi
    else
        fail dist_prep_rank_killed_nothing_left "never paused: $(tail -3 "$d/mk1.mark.out")"
    fi
    # every rank killed at once: the next mpirun prep there sweeps what they left
    if pause_start "$d/mk2.mark" 'mpi/b$' "${MPI[@]}" -x FTL_TEST_PAUSE_BEFORE_PUBLISH -x FTL_TEST_PAUSE_MATCH \
        "$FTL" prep "$SRC" "$d/mpi/b" --size 64; then
        pkill -9 -f "^$FTL prep $SRC $d/mpi/b"
        wait "$PAUSED_PID" 2>/dev/null
        left=$(find "$d/mpi" -maxdepth 1 -name 'b.tmp-*' | wc -l)
        "${MPI[@]}" "$FTL" prep "$SRC" "$d/mpi/b" --size 64 >"$d/mk2.rerun" 2>&1
        if [ "$left" -gt 0 ] && [ -z "$(find "$d/mpi" -maxdepth 1 -name '*.tmp-*')" ] && grep -q 'removed 1 temporary' "$d/mk2.rerun"; then
            pass dist_prep_all_killed_swept
        else
            fail dist_prep_all_killed_swept "left $left: $(find "$d/mpi" -maxdepth 1) $(tail -3 "$d/mk2.rerun")"
        fi
    else
        fail dist_prep_all_killed_swept "never paused: $(tail -3 "$d/mk2.mark.out")"
    fi
    # embed: rank 1's part sits in its host's TMPDIR; all killed while it is written; the next
    # embed's rank 1 sweeps it there, rank 0 beside OUT
    if pause_start "$d/mk3.mark" '-rank1.parquet.tmp-' "${MPI[@]}" -x TMPDIR="$d/mpi/tmp1" -x FTL_TEST_PAUSE_BEFORE_PUBLISH \
        -x FTL_TEST_PAUSE_MATCH "$FTL" embed "$V" --backbone "$B" "$d/mpi/f.parquet"; then
        pkill -9 -f "^$FTL embed $V --backbone $B $d/mpi/f.parquet"
        wait "$PAUSED_PID" 2>/dev/null
        left=$(find "$d/mpi/tmp1" -name '*.tmp-*' | wc -l)
        "${MPI[@]}" -x TMPDIR="$d/mpi/tmp1" "$FTL" embed "$V" --backbone "$B" "$d/mpi/f.parquet" >"$d/mk3.rerun" 2>&1
        rc=$?
        if [ "$left" -gt 0 ] && [ $rc -eq 0 ] && [ -z "$(find "$d/mpi/tmp1" "$d/mpi" -maxdepth 1 -name '*.tmp-*')" ]; then
            pass dist_embed_all_killed_swept
        else
            fail dist_embed_all_killed_swept "left $left, rc $rc: $(find "$d/mpi" -name '*.tmp-*') $(tail -3 "$d/mk3.rerun")"
        fi
    else
        fail dist_embed_all_killed_swept "never paused: $(tail -3 "$d/mk3.mark.out")"
    fi
else
    for t in dist_prep_rank_killed_nothing_left dist_prep_all_killed_swept dist_embed_all_killed_swept; do
        skip "$t" "mpirun (openmpi-bin) is not installed or ftl was built without MPI"
    done
fi
finish
