#!/usr/bin/env bash
# How long a two-host job (tests/e2e/two_hosts.sh: namespaces joined by a veth pair) takes to end
# when the link between the hosts goes down mid-training, with Open MPI's default keepalive and
# with the documented settings, for two stall timeouts: seconds until mpirun exits and until no
# process of the job (mpirun, ranks, remote orted) is left. Each case is bounded by LIMIT s.
# Usage: BUILD=build SHARED=../shared bench/dist/link_down.sh [LIMIT]
set -u
cd "$(dirname "$0")/../../tests/e2e"
: "${BUILD:=$(cd ../.. && pwd)/build}" "${SHARED:=$(cd ../../.. && pwd)/shared}"
export BUILD SHARED
LIMIT=${1:-150}
source ./lib.sh
source ./two_hosts.sh
d=$(scratch bench_link_down)
give_up() { echo "cannot run: $1"; exit 1; }
two_hosts_up "$d" give_up
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --size 128 --quiet 2>/dev/null
KEEPALIVE=("${MPI_KEEPALIVE[@]}")
case_run() {  # NAME STALL_TIMEOUT KEEPALIVE(yes|no)
    local name=$1 t=$2 line=("${MPI[@]}")
    if [ "$3" = no ]; then  # the launch line without the keepalive settings
        line=(); local skip=0 w
        for w in "${MPI[@]}"; do
            if [ $skip -gt 0 ]; then skip=$((skip - 1)); continue; fi
            case "$w" in oob_tcp_keepalive_*) line=("${line[@]:0:${#line[@]}-1}"); skip=1 ;; *) line+=("$w") ;; esac
        done
    fi
    ip -n "$A" link set "$VETH_A" up
    rm -rf "${PRIV_A:?}/$name"
    mkdir -p "$PRIV_A/$name"
    FTL_TEST_STEP_SLEEP_MS=150 on_host_a timeout $((LIMIT + 30)) "${line[@]}" -x FTL_TEST_STEP_SLEEP_MS "$FTL" train \
        "$d/ds/train.parquet" --val "$d/ds/val.parquet" --backbone "$SHARED/models/mobilenet_v1_0.25_128.onnx" \
        --epochs 200 --seed 5 --threads 1 --batch 16 --quiet --stall-timeout "$t" --cache-dir "$SCR/cache" \
        --checkpoint "$SCR/$name/c-{epoch}.ckpt" --out "$SCR/$name/model.ftl" >"$d/$name.out" 2>"$d/$name.err" &
    local job=$! i cut launcher=-1 gone=-1
    for i in $(seq 1 600); do [ -e "$PRIV_A/$name/c-2.ckpt" ] && break; sleep 0.1; done
    ip -n "$A" link set "$VETH_A" down
    cut=$(date +%s.%N)
    for i in $(seq 1 $((LIMIT * 10))); do
        if [ "$launcher" = -1 ] && ! kill -0 $job 2>/dev/null; then launcher=$(echo "$(date +%s.%N) - $cut" | bc); fi
        if [ "$launcher" != -1 ] && [ -z "$(two_hosts_pids)" ]; then gone=$(echo "$(date +%s.%N) - $cut" | bc); break; fi
        sleep 0.1
    done
    printf '%-34s stall-timeout %3s s: mpirun ended %8s s after the cut, every process gone %8s s (left: %s)\n' \
        "$name" "$t" "$([ "$launcher" = -1 ] && echo ">$LIMIT" || printf '%.1f' "$launcher")" \
        "$([ "$gone" = -1 ] && echo ">$LIMIT" || printf '%.1f' "$gone")" "$(for p in $(two_hosts_pids); do cat /proc/$p/comm; done | sort | uniq -c | tr -s ' \n' ' ')"
    two_hosts_kill_all
    wait $job 2>/dev/null
}
case_run "open-mpi-default-keepalive" 60 no
case_run "documented-keepalive" 60 yes
case_run "documented-keepalive-stall-30" 30 yes
case_run "documented-keepalive-short-stall" 10 yes
