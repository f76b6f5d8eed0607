#!/usr/bin/env bash
# Allreduce over Open MPI's TCP transport between two network namespaces joined by a veth pair
# (two "hosts" on one machine, 192.0.2.0/24 inside the namespaces only): np 2
# and np 4 (two ranks per host). Needs root. usage: bench/dist/tcp.sh [BUILD]
set -eu
BUILD=$(cd "${1:-build}" && pwd)
A=ftl-bench-a-$$ B=ftl-bench-b-$$
work=$(mktemp -d)
cleanup() { ip netns del "$A" 2>/dev/null || true; ip netns del "$B" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
ip netns add "$A"; ip netns add "$B"
ip link add "va$$" netns "$A" type veth peer name "vb$$" netns "$B"
ip -n "$A" addr add 192.0.2.1/24 dev "va$$"; ip -n "$B" addr add 192.0.2.2/24 dev "vb$$"
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set "va$$" up; ip -n "$B" link set "vb$$" up
cat >"$work/agent.sh" <<EOS
#!/bin/bash
host=\$1; shift
case "\$host" in 192.0.2.1) ns=$A ;; 192.0.2.2) ns=$B ;; *) exit 1 ;; esac
exec ip netns exec "\$ns" bash -c "\$*"
EOS
chmod +x "$work/agent.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for slots in ${SLOTS:-1 2}; do
    ip netns exec "$A" mpirun -H 192.0.2.1:$slots,192.0.2.2:$slots -np $((2 * slots)) --oversubscribe \
        --mca plm_rsh_agent "$work/agent.sh" --mca btl tcp,self --mca btl_tcp_if_include 192.0.2.0/24 \
        --mca oob_tcp_if_include 192.0.2.0/24 -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM \
        "$BUILD/bench/dist/allreduce_bench" 10
done
