# Two "hosts" on one machine, for the distributed tests: two network namespaces joined by a veth
# pair (192.0.2.0/24, the documentation range, inside the namespaces only), each also with its own
# mount namespace in which one path (SCR) is a private folder, and its own UTS namespace with its
# own host name, so messages that name a host can be told apart. Open MPI's rsh agent is a small
# script that runs the command in the other namespace, as ssh would on another machine.
# Source after lib.sh; call `two_hosts_up DIR SKIP_FN` (SKIP_FN reason: reports every test as
# skipped and exits). Sets A, B (namespace names), HOST_A, HOST_B (host names), SCR, PRIV_A,
# PRIV_B (the folders SCR shows on each host), VETH_A (host A's end of the link), MPI (the launch
# line, with the documented keepalive settings) and on_host_a (runs a command on host A). The
# namespaces are removed, and every process left in them killed, on exit.

# The keepalive settings docs/DIST.md documents for -H/--hostfile launches: a host that stops
# answering is declared lost within ~5 + 3 x 2 s of silence instead of Open MPI's 300 + 9 x 20 s.
MPI_KEEPALIVE=(--mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3)

two_hosts_kill_all() {  # kills what runs in the two namespaces: only this test's processes
    local ns pid
    for ns in "$A" "$B"; do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -CONT "$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null; done
    done
}
two_hosts_pids() {  # the processes still running on either host
    { ip netns pids "$A" 2>/dev/null; ip netns pids "$B" 2>/dev/null; } | tr '\n' ' '
}
two_hosts_down() {
    two_hosts_kill_all
    sleep 0.2
    ip netns del "$A" 2>/dev/null
    ip netns del "$B" 2>/dev/null
    local m
    for m in "${TWO_HOSTS_MOUNTS[@]}"; do umount "$m" 2>/dev/null; done
}

two_hosts_up() {  # DIR SKIP_FN
    local d=$1 skip_fn=$2
    command -v mpirun >/dev/null 2>&1 || "$skip_fn" "mpirun (openmpi-bin) is not installed"
    "$FTL" --version | grep -q 'Open MPI' || "$skip_fn" "this ftl was built without MPI"
    [ "$(id -u)" = 0 ] || "$skip_fn" "network and mount namespaces need root"
    command -v ip >/dev/null 2>&1 && command -v unshare >/dev/null 2>&1 || "$skip_fn" "ip (iproute2) or unshare (util-linux) is missing"
    A=ftl-test-a-$$ B=ftl-test-b-$$ HOST_A=ftl-host-a HOST_B=ftl-host-b VETH_A=va$$
    TWO_HOSTS_MOUNTS=()
    trap two_hosts_down EXIT
    if ! ip netns add "$A" 2>"$d/netns.err" || ! ip netns add "$B" 2>>"$d/netns.err" ||
       ! ip link add "va$$" netns "$A" type veth peer name "vb$$" netns "$B" 2>>"$d/netns.err"; then
        "$skip_fn" "cannot create network namespaces here: $(head -c 200 "$d/netns.err")"
    fi
    ip -n "$A" addr add 192.0.2.1/24 dev "va$$" && ip -n "$B" addr add 192.0.2.2/24 dev "vb$$"
    ip -n "$A" link set "va$$" up && ip -n "$B" link set "vb$$" up
    ip -n "$A" link set lo up && ip -n "$B" link set lo up
    # A TCP connect to a closed port: "refused" (or a connection) proves packets cross the pair.
    local probe
    probe=$(ip netns exec "$A" timeout 3 bash -c 'exec 3<>/dev/tcp/192.0.2.2/9 && echo connected' 2>&1)
    grep -q -E 'refused|connected' <<<"$probe" || "$skip_fn" "the veth pair between the namespaces does not pass traffic ($probe)"
    SCR="$d/scr" PRIV_A="$d/hostA" PRIV_B="$d/hostB"
    mkdir -p "$SCR" "$PRIV_A" "$PRIV_B"
    # The agent Open MPI calls as `agent HOST command...` (as it would call ssh): run the command on
    # the "host" named by the address, inside its namespaces.
    cat >"$d/agent.sh" <<EOF
#!/bin/bash
host=\$1; shift
case "\$host" in
  192.0.2.1) ns=$A; name=$HOST_A; private=$PRIV_A ;;
  192.0.2.2) ns=$B; name=$HOST_B; private=$PRIV_B ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
# like ssh, the rest is one command line for a shell
exec ip netns exec "\$ns" unshare -m -u --propagation private bash -c 'hostname "\$1" && mount --rbind "\$2" "\$3" && eval "\$4"' agent "\$name" "\$private" "$SCR" "\$*"
EOF
    chmod +x "$d/agent.sh"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    MPI=(mpirun -H 192.0.2.1:1,192.0.2.2:1 -np 2 "${MPI_KEEPALIVE[@]}" --mca plm_rsh_agent "$d/agent.sh" --mca btl tcp,self
         --mca btl_tcp_if_include 192.0.2.0/24 --mca oob_tcp_if_include 192.0.2.0/24 --bind-to none
         -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM)
}

# on_host_a command...: mpirun itself runs on host A (rank 0 there), with A's private SCR
on_host_a() {
    ip netns exec "$A" unshare -m -u --propagation private bash -c 'hostname "$1" && mount --rbind "$2" "$3" && shift 3 && exec "$@"' x "$HOST_A" "$PRIV_A" "$SCR" "$@"
}

# same_head_weights A.ftl B.ftl: the heads' weights agree within 1e-4 relative (another rank count
# sums in another order)
same_head_weights() {
    $PY - "$1" "$2" "$(dirname "${BASH_SOURCE[0]}")/../ref/read_safetensors.py" <<'PYEOF'
import json, subprocess, sys
read = lambda f: json.loads(subprocess.run([sys.executable, sys.argv[3], f], capture_output=True, text=True, check=True).stdout)
ma, mb = read(sys.argv[1]), read(sys.argv[2])
for t in ("head.kernel", "head.bias"):
    va = [float(v) for v in ma["tensors"][t]["values"]]
    vb = [float(v) for v in mb["tensors"][t]["values"]]
    worst = max(abs(p - q) / max(1e-3, abs(p)) for p, q in zip(va, vb))
    assert worst <= 1e-4, (t, worst)
PYEOF
}

# small_disk FOLDER KIB: FOLDER (under PRIV_A or PRIV_B) becomes a tmpfs of that size, unmounted on exit
small_disk() {
    mkdir -p "$1" && mount -t tmpfs -o "size=${2}k" ftl-test-small "$1" && TWO_HOSTS_MOUNTS+=("$1")
}
