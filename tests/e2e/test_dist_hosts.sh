#!/usr/bin/env bash
# Two "hosts" on one machine (tests/e2e/two_hosts.sh: network, mount and UTS namespaces), one
# rank each, Open MPI's TCP transport. SCR is a private folder on each host: its caches, and on
# host A rank 0's outputs, so a hidden shared-filesystem assumption fails the test. Trains hymenoptera
# across the two and compares with the single-process model; a host that sees other data at the
# same path is refused at start.
source "$(dirname "$0")/lib.sh"
d=$(scratch dist_hosts)
TESTS="dist_hosts_train dist_hosts_timeline_has_both_ranks dist_hosts_same_model dist_hosts_outputs_only_on_rank0 dist_hosts_caches_local dist_hosts_other_data_refused"
skip_all() { for t in $TESTS; do skip "$t" "$1"; done; finish; }
source "$(dirname "$0")/two_hosts.sh"
two_hosts_up "$d" skip_all
# Data and backbone at the same path on both hosts (read-only inputs); SCR private per host.
MODEL="$SHARED/models/mobilenet_v1_0.25_128.onnx"
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --size 128 --quiet 2>/dev/null || fail dist_hosts_train "prep failed"
RUN=(--backbone "$MODEL" --lr 0.004 --dropout 0.5 --epochs 4 --seed 5 --threads 1)
on_host_a timeout 300 "${MPI[@]}" "$FTL" train "$d/ds/train.parquet" --val "$d/ds/val.parquet" "${RUN[@]}" --batch 16 \
    --cache-dir "$SCR/cache" --checkpoint "$SCR/ck/c-{epoch}.ckpt" --log "$SCR/run.jsonl" --timeline "$SCR/trace.json" --out "$SCR/model.ftl" \
    >"$d/hosts.out" 2>"$d/hosts.err"
rc=$?
[ $rc -eq 0 ] && pass dist_hosts_train || fail dist_hosts_train "rc $rc: $(grep -v '^\s*$' "$d/hosts.err" | tail -5)"
"$FTL" train "$d/ds/train.parquet" --val "$d/ds/val.parquet" "${RUN[@]}" --batch 32 --cache-dir "$d/cache1" \
    --log "$d/one.jsonl" --out "$d/one.ftl" >/dev/null 2>&1 || fail dist_hosts_same_model "single-process run failed"
$PY - "$d/one.jsonl" "$PRIV_A/run.jsonl" <<'PYEOF' && same_head_weights "$d/one.ftl" "$PRIV_A/model.ftl" &&
import json, sys
epochs = lambda f: [r for r in map(json.loads, open(f)) if r.get("record") == "epoch"]
la, lb = epochs(sys.argv[1]), epochs(sys.argv[2])
assert len(la) == len(lb) == 4, (len(la), len(lb))
for x, y in zip(la, lb):
    for k in ("loss", "acc", "val_loss", "val_acc"):
        assert abs(x[k] - y[k]) <= 1e-5 * max(1, abs(x[k])), (k, x[k], y[k])
PYEOF
    pass dist_hosts_same_model || fail dist_hosts_same_model "see log"
# rank 0's outputs only on host A; host B holds no model, log or checkpoint
[ -e "$PRIV_A/model.ftl" ] && [ -e "$PRIV_A/ck/c-4.ckpt" ] && [ ! -e "$PRIV_B/model.ftl" ] && [ ! -e "$PRIV_B/ck" ] &&
    [ ! -e "$PRIV_B/run.jsonl" ] && [ -z "$(ls -A "$SCR")" ] && pass dist_hosts_outputs_only_on_rank0 ||
    fail dist_hosts_outputs_only_on_rank0 "A: $(ls "$PRIV_A" | tr '\n' ' ') B: $(ls "$PRIV_B" | tr '\n' ' ') shared: $(ls -A "$SCR")"
# the timeline, written on host A, has a track for the rank on each host
$PY - "$PRIV_A/trace.json" <<'PYEOF' && [ ! -e "$PRIV_B/trace.json" ] && pass dist_hosts_timeline_has_both_ranks || fail dist_hosts_timeline_has_both_ranks "see log"
import json, sys
ev = json.load(open(sys.argv[1]))
pids = {e["pid"] for e in ev if e.get("ph") == "X" and e["name"] == "allreduce"}
assert pids == {0, 1}, pids
PYEOF
# each host's cache holds its own rows only
a=$(ls "$PRIV_A/cache" 2>/dev/null | grep -c 'rows-0-')
b=$(ls "$PRIV_B/cache" 2>/dev/null | grep -c 'rows-0-')
[ "$a" -ge 1 ] && [ "$b" -eq 0 ] && [ "$(ls "$PRIV_B/cache" 2>/dev/null | wc -l)" -ge 1 ] && pass dist_hosts_caches_local ||
    fail dist_hosts_caches_local "A: $(ls "$PRIV_A/cache" 2>/dev/null | tr '\n' ' ') B: $(ls "$PRIV_B/cache" 2>/dev/null | tr '\n' ' ')"

# the same dataset path with other content on host B: refused at start, naming what differs
mkdir -p "$PRIV_A/data" "$PRIV_B/data"
cp "$d/ds/train.parquet" "$PRIV_A/data/train.parquet"
"$FTL" prep "$SHARED/data/hymenoptera" "$d/other" --size 128 --seed 9 --quiet 2>/dev/null  # same rows, another order
cp "$d/other/train.parquet" "$PRIV_B/data/train.parquet"
on_host_a timeout 120 "${MPI[@]}" "$FTL" train "$SCR/data/train.parquet" "${RUN[@]}" --batch 16 --early-stopping monitor=acc \
    --cache-dir "$SCR/cache2" --out "$SCR/bad.ftl" >"$d/bad.out" 2>"$d/bad.err"
rc=$?
[ $rc -ne 0 ] && grep -q 'rank 1 has the training dataset' "$d/bad.err" && [ ! -e "$PRIV_A/bad.ftl" ] &&
    pass dist_hosts_other_data_refused || fail dist_hosts_other_data_refused "rc $rc: $(grep -v '^\s*$' "$d/bad.err" | tail -4)"
finish
