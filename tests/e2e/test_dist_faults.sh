#!/usr/bin/env bash
# Faults between hosts (tests/e2e/two_hosts.sh: two "hosts" in namespaces, one rank each, the
# documented launch line with its keepalive settings): the link between the hosts goes down, the
# remote rank is frozen (SIGSTOP), a disk fills up (host B's cache, rank 0's checkpoints). Each
# time every process of the job (ranks, mpirun, the remote orted) must be gone within the stall
# timeout + 30 s, the messages must name the host, rank or file, nothing partial may be left,
# and a resume from the last complete checkpoint must give the uninterrupted run's model.
source "$(dirname "$0")/lib.sh"
d=$(scratch dist_faults)
TESTS="dist_fault_reference_run dist_link_down_ends_every_process dist_link_down_names_the_host dist_link_down_resume_same_model
dist_frozen_rank_named dist_frozen_rank_ends_every_process dist_frozen_rank_resume_same_model
dist_full_cache_disk_names_file_and_host dist_full_cache_disk_ends_every_process dist_full_cache_disk_rerun_same_model
dist_full_checkpoint_disk_names_file dist_full_checkpoint_disk_keeps_last_checkpoint dist_full_checkpoint_disk_resume_other_np
dist_documented_launch_lines_have_the_keepalive_settings"
skip_all() { for t in $TESTS; do skip "$t" "$1"; done; finish; }
source "$(dirname "$0")/two_hosts.sh"
# the launch line these tests use is the one the docs give users
root="$(dirname "$0")/../.."
documented=yes
for setting in "${MPI_KEEPALIVE[@]}"; do
    [ "$setting" = --mca ] && continue
    for doc in "$root/docs/DIST.md" "$root/README.md" <("$FTL" train --help); do grep -q -- "$setting" "$doc" || documented="no: $setting in $doc"; done
done
[ "$documented" = yes ] && pass dist_documented_launch_lines_have_the_keepalive_settings ||
    fail dist_documented_launch_lines_have_the_keepalive_settings "$documented"
two_hosts_up "$d" skip_all
MODEL="$SHARED/models/mobilenet_v1_0.25_128.onnx"
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --size 128 --quiet 2>/dev/null || fail dist_fault_reference_run "prep failed"
RUN=(--backbone "$MODEL" --lr 0.004 --dropout 0.5 --epochs 6 --seed 5 --threads 1)
DATA=("$d/ds/train.parquet" --val "$d/ds/val.parquet")

# train NAME STALL_TIMEOUT [ftl train options...]: the two-host job in the background ($JOB);
# every step sleeps STEP_SLEEP_MS (numbers unchanged), so a fault lands mid-training.
STEP_SLEEP_MS=0
train() {
    local name=$1 t=$2
    shift 2
    mkdir -p "$PRIV_A/$name"
    FTL_TEST_STEP_SLEEP_MS=$STEP_SLEEP_MS on_host_a timeout 240 "${MPI[@]}" -x FTL_TEST_STEP_SLEEP_MS \
        "$FTL" train "${DATA[@]}" "${RUN[@]}" --batch 16 --stall-timeout "$t" --quiet "$@" \
        >"$d/$name.out" 2>"$d/$name.err" &
    JOB=$!
}
wait_for_file() {  # PATH SECONDS: polls until PATH exists
    local i
    for i in $(seq 1 $(($2 * 10))); do [ -e "$1" ] && return 0; sleep 0.1; done
    return 1
}
# ended_within SECONDS: the job's launcher has exited and no process is left on either host;
# sets RC (the launcher's status) and TOOK (seconds since FAULT_AT).
ended_within() {
    local limit=$1 i
    RC=none
    for i in $(seq 1 $((limit * 10))); do
        if [ "$RC" = none ] && ! kill -0 "$JOB" 2>/dev/null; then wait "$JOB"; RC=$?; fi
        [ "$RC" != none ] && [ -z "$(two_hosts_pids)" ] && break
        sleep 0.1
    done
    TOOK=$(( $(date +%s) - FAULT_AT ))
    [ "$RC" != none ] && [ "$RC" -ne 0 ] && [ -z "$(two_hosts_pids)" ]
}
last_checkpoint() { ls "$1" 2>/dev/null | grep -E '^c-[0-9]+\.ckpt$' | sort -t- -k2 -n | tail -1; }
no_temporaries() { ! find "$PRIV_A" "$PRIV_B" -name '*.tmp-*' 2>/dev/null | grep -q .; }
same_model() {  # NAME FILE: byte-identical to the uninterrupted run's model
    cmp -s "$PRIV_A/ref/model.ftl" "$1" && pass "$2" || fail "$2" "$(ls -la "$1" 2>&1) differs from the uninterrupted model"
}
# resume NAME CHECKPOINT: the same two-host job from a checkpoint, to its end
resume() {
    on_host_a timeout 120 "${MPI[@]}" "$FTL" train "${DATA[@]}" "${RUN[@]}" --batch 16 --quiet --cache-dir "$SCR/cache" \
        --resume "$SCR/$1/ck/$2" --out "$SCR/$1/resumed.ftl" >"$d/$1.resume.out" 2>"$d/$1.resume.err"
}

# ---- the uninterrupted run (also fills each host's cache)
train ref 60 --cache-dir "$SCR/cache" --checkpoint "$SCR/ref/ck/c-{epoch}.ckpt" --out "$SCR/ref/model.ftl"
wait "$JOB" && [ -s "$PRIV_A/ref/model.ftl" ] && pass dist_fault_reference_run ||
    skip_all "the uninterrupted two-host run failed: $(tail -3 "$d/ref.err")"
STEP_SLEEP_MS=150

# ---- the link goes down: Open MPI's keepalive notices the lost host (the stall timeout, 30 s,
# leaves it the time: a rank that writes while the link is down defeats TCP keepalive)
T=30
train link $T --cache-dir "$SCR/cache" --checkpoint "$SCR/link/ck/c-{epoch}.ckpt" --out "$SCR/link/model.ftl"
wait_for_file "$PRIV_A/link/ck/c-2.ckpt" 60
ip -n "$A" link set "$VETH_A" down
FAULT_AT=$(date +%s)
ended_within $((T + 30)) && [ ! -e "$PRIV_A/link/model.ftl" ] && no_temporaries && pass dist_link_down_ends_every_process ||
    fail dist_link_down_ends_every_process "rc $RC after ${TOOK}s, left: $(two_hosts_pids); $(grep -v '^\s*$' "$d/link.err" | tail -4)"
echo "# link down: every process gone ${TOOK} s after the cut (--stall-timeout $T)"
grep -q 'lost communication with a remote daemon' "$d/link.err" && grep -q 'on node 192.0.2.2' "$d/link.err" &&
    pass dist_link_down_names_the_host || fail dist_link_down_names_the_host "$(grep -v '^\s*$' "$d/link.err" | head -12)"
ip -n "$A" link set "$VETH_A" up
sleep 1
ck=$(last_checkpoint "$PRIV_A/link/ck")
[ -n "$ck" ] && resume link "$ck" && same_model "$PRIV_A/link/resumed.ftl" dist_link_down_resume_same_model ||
    fail dist_link_down_resume_same_model "resume from '$ck': $(tail -3 "$d/link.resume.err")"

# ---- the remote rank freezes (SIGSTOP): rank 0 names it within T, the job ends; after SIGCONT
# nothing of it is left
T=8
train frozen $T --cache-dir "$SCR/cache" --checkpoint "$SCR/frozen/ck/c-{epoch}.ckpt" --out "$SCR/frozen/model.ftl"
wait_for_file "$PRIV_A/frozen/ck/c-2.ckpt" 60
stopped=""
for p in $(ip netns pids "$B"); do [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ftl ] && kill -STOP "$p" && stopped="$stopped $p"; done
FAULT_AT=$(date +%s)
ended_within $((T + 30)); ended=$?
for p in $stopped; do kill -CONT "$p" 2>/dev/null; done
sleep 1
[ -n "$stopped" ] && [ $ended -eq 0 ] && [ -z "$(two_hosts_pids)" ] && [ ! -e "$PRIV_A/frozen/model.ftl" ] && no_temporaries &&
    pass dist_frozen_rank_ends_every_process ||
    fail dist_frozen_rank_ends_every_process "stopped '$stopped', rc $RC after ${TOOK}s, left: $(two_hosts_pids)"
echo "# frozen rank: every process gone ${TOOK} s after SIGSTOP (--stall-timeout $T)"
grep -q "rank 0 (ftl-host-a): stalled for [0-9]* s in the gradient allreduce at step [0-9]*: rank 1 (ftl-host-b) has not joined" "$d/frozen.err" &&
    [ "$TOOK" -le $((T + 30)) ] && pass dist_frozen_rank_named || fail dist_frozen_rank_named "$(grep -v '^\s*$' "$d/frozen.err" | head -6)"
ck=$(last_checkpoint "$PRIV_A/frozen/ck")
[ -n "$ck" ] && resume frozen "$ck" && same_model "$PRIV_A/frozen/resumed.ftl" dist_frozen_rank_resume_same_model ||
    fail dist_frozen_rank_resume_same_model "resume from '$ck': $(tail -3 "$d/frozen.resume.err")"

# ---- host B's disk fills up while it writes its part of the feature cache
STEP_SLEEP_MS=0
small_disk "$PRIV_B/small" 64
mkdir -p "$PRIV_A/small"
train fullcache 30 --cache-dir "$SCR/small/cache" --out "$SCR/fullcache/model.ftl"
FAULT_AT=$(date +%s)
ended_within 60 && [ ! -e "$PRIV_A/fullcache/model.ftl" ] && no_temporaries && pass dist_full_cache_disk_ends_every_process ||
    fail dist_full_cache_disk_ends_every_process "rc $RC after ${TOOK}s, left: $(two_hosts_pids) $(find "$PRIV_A" "$PRIV_B" -name '*.tmp-*')"
grep -q "rank 1 (ftl-host-b): cannot write $SCR/small/cache/train-[0-9a-f]*\.rows-[0-9]*-[0-9]*\.features\.parquet: No space left on device" "$d/fullcache.err" &&
    pass dist_full_cache_disk_names_file_and_host || fail dist_full_cache_disk_names_file_and_host "$(grep -v '^\s*$' "$d/fullcache.err" | head -4)"
mount -o remount,size=16m "$PRIV_B/small"
train fullcache 30 --cache-dir "$SCR/small/cache" --out "$SCR/fullcache/model.ftl"
wait "$JOB" && same_model "$PRIV_A/fullcache/model.ftl" dist_full_cache_disk_rerun_same_model ||
    fail dist_full_cache_disk_rerun_same_model "rerun with space: $(tail -3 "$d/fullcache.err")"

# ---- rank 0's disk fills up while it writes a checkpoint; the last complete one resumes the run
# under another rank count (one process, the same global batch) to the uninterrupted model
STEP_SLEEP_MS=150
small_disk "$PRIV_A/ckdisk" 1024
train fullck 30 --cache-dir "$SCR/cache" --checkpoint "$SCR/ckdisk/c-{epoch}.ckpt" --out "$SCR/fullck/model.ftl"
wait_for_file "$PRIV_A/ckdisk/c-2.ckpt" 60
dd if=/dev/zero of="$PRIV_A/ckdisk/filler" bs=4k 2>/dev/null
FAULT_AT=$(date +%s)
ended_within 60; ended=$?
grep -q "rank 0 (ftl-host-a): .*$SCR/ckdisk/c-[0-9]*\.ckpt.*No space left on device" "$d/fullck.err" && [ $ended -eq 0 ] &&
    pass dist_full_checkpoint_disk_names_file || fail dist_full_checkpoint_disk_names_file "rc $RC, left: $(two_hosts_pids); $(grep -v '^\s*$' "$d/fullck.err" | head -4)"
ck=$(last_checkpoint "$PRIV_A/ckdisk")
rm -f "$PRIV_A/ckdisk/filler"
[ -n "$ck" ] && "$FTL" inspect "$PRIV_A/ckdisk/$ck" >/dev/null 2>&1 && no_temporaries && [ ! -e "$PRIV_A/fullck/model.ftl" ] &&
    pass dist_full_checkpoint_disk_keeps_last_checkpoint || fail dist_full_checkpoint_disk_keeps_last_checkpoint "last '$ck': $(ls "$PRIV_A/ckdisk")"
"$FTL" train "${DATA[@]}" "${RUN[@]}" --batch 32 --quiet --cache-dir "$d/cache1" --resume "$PRIV_A/ckdisk/$ck" \
    --out "$d/fullck-np1.ftl" >/dev/null 2>"$d/fullck-np1.err" || fail dist_full_checkpoint_disk_resume_other_np "$(tail -3 "$d/fullck-np1.err")"
same_head_weights "$PRIV_A/ref/model.ftl" "$d/fullck-np1.ftl" && pass dist_full_checkpoint_disk_resume_other_np ||
    fail dist_full_checkpoint_disk_resume_other_np "see log"
finish
