#!/usr/bin/env bash
# A real two-node Slurm cluster on this one machine, for the tests (run as root).
#
#   cluster.sh check          can this machine host it? (root, Slurm + munge, namespaces); the
#                             reason on stderr and exit 1 when not
#   cluster.sh up DIR         start it; everything (configuration, state, logs, pids) under DIR
#   cluster.sh run DIR NS CMD...  run CMD in namespace NS (ctl, node1, node2): its network, its
#                             hostname and its mounts (its /etc/hosts names the cluster)
#   cluster.sh down DIR       stop every process of the cluster, by pid, and so remove its
#                             namespaces, bridge and veths; safe to repeat, safe after a failed up
#
# Three holder processes each own a network, UTS and mount namespace: `ctl` (slurmctld, and
# where srun/salloc run), `node1` and `node2` (one slurmd each). The bridge lives inside `ctl`,
# the nodes reach it through veth pairs, so no interface, address or port is added to the
# host's own network namespace and two clusters can run side by side. munged runs in the host
# namespaces: its socket is a file under DIR, reachable from every namespace.
set -euo pipefail

NODES=(node1 node2)
NET=10.231.19
declare -A ADDR=([ctl]=$NET.1 [node1]=$NET.11 [node2]=$NET.12)

die() { echo "cluster.sh: $*" >&2; exit 1; }

holder() { cat "$D/ns-$1.pid"; }

in_ns() {  # in_ns NS CMD...: CMD inside namespace NS, in this directory (nsenter execs: the
    local ns=$1; shift  # same pid when backgrounded)
    nsenter -t "$(holder "$ns")" -m -n -u --wd="$PWD" -- "$@"
}

check() {
    [[ $(id -u) == 0 ]] || die "needs root (network namespaces, veth pairs, Slurm daemons)"
    local c
    for c in slurmctld slurmd srun salloc scontrol munged mungekey unshare nsenter ip; do
        command -v "$c" >/dev/null || die "$c is not installed (apt-get install slurm-wlm munge)"
    done
    unshare -m -n -u true 2>/dev/null || die "cannot create network/UTS/mount namespaces here"
}

start_namespace() {  # a process holding new namespaces: hostname NS, the cluster's /etc/hosts
    local ns=$1
    unshare -m -n -u --propagation private sh -c \
        "mount --bind '$D/hosts' /etc/hosts && hostname '$ns' && ip link set lo up && exec sleep infinity" \
        </dev/null >>"$D/log/ns-$ns.log" 2>&1 &
    echo $! >"$D/ns-$ns.pid"
    local i
    for i in $(seq 50); do
        [[ $(cat "/proc/$!/comm" 2>/dev/null) == sleep ]] && return
        kill -0 $! 2>/dev/null || die "namespace $ns did not start: $(cat "$D/log/ns-$ns.log")"
        sleep 0.1
    done
    die "namespace $ns did not start"
}

write_config() {
    {
        echo "127.0.0.1 localhost"
        local ns
        for ns in ctl "${NODES[@]}"; do echo "${ADDR[$ns]} $ns"; done
    } >"$D/hosts"
    # Per-node task environment: TaskProlog prints `export NAME=value` lines, which Slurm adds to
    # the environment of every task on that node (DIR/task-env-NODE, written by the tests).
    cat >"$D/task-prolog.sh" <<PROLOG
#!/bin/sh
f="$D/task-env-\$SLURMD_NODENAME"
[ -f "\$f" ] && cat "\$f"
exit 0
PROLOG
    chmod 755 "$D/task-prolog.sh"
    cat >"$D/slurm.conf" <<CONF
ClusterName=mgpudoctor
SlurmctldHost=ctl(${ADDR[ctl]})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/munge.socket
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd-%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
TaskProlog=$D/task-prolog.sh
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
KillWait=5
InactiveLimit=0
MessageTimeout=20
NodeName=node1 NodeAddr=${ADDR[node1]} CPUs=$(nproc) State=UNKNOWN
NodeName=node2 NodeAddr=${ADDR[node2]} CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=node[1-2] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
}

start_munge() {
    mungekey --create --keyfile="$D/munge/munge.key" >/dev/null
    chmod 400 "$D/munge/munge.key"
    munged --force --socket="$D/munge/munge.socket" --key-file="$D/munge/munge.key" \
        --pid-file="$D/munge/munged.pid" --log-file="$D/log/munged.log" \
        --seed-file="$D/munge/munged.seed" 2>>"$D/log/munged.log" \
        || die "munged did not start: $(tail -5 "$D/log/munged.log")"
}

start_network() {
    in_ns ctl ip link add br0 type bridge
    in_ns ctl ip addr add "${ADDR[ctl]}/24" dev br0
    in_ns ctl ip link set br0 up
    local node
    for node in "${NODES[@]}"; do
        in_ns ctl ip link add "v-$node" type veth peer name eth0 netns "$(holder "$node")"
        in_ns ctl ip link set "v-$node" master br0 up
        in_ns "$node" ip addr add "${ADDR[$node]}/24" dev eth0
        in_ns "$node" ip link set eth0 up
    done
}

start_daemon() {  # start_daemon NS NAME CMD...: CMD in the foreground, in the background
    local ns=$1 name=$2; shift 2
    nsenter -t "$(holder "$ns")" -m -n -u --wd="$D" -- "$@" </dev/null >>"$D/log/$name.out" 2>&1 &
    echo "$!" >>"$D/daemons.pid"  # the daemon's own pid: nsenter execs it
}

wait_idle() {
    local i state
    for i in $(seq 150); do
        state=$(in_ns ctl sinfo -h -N -o '%N %T' 2>/dev/null | sort | tr '\n' ' ') || true
        [[ $state == "node1 idle node2 idle " ]] && return
        sleep 0.2
    done
    echo "cluster.sh: the nodes did not become idle in 30 s (sinfo: ${state:-nothing})" >&2
    tail -n 20 "$D"/log/*.log "$D"/log/*.out >&2 || true
    exit 1
}

up() {
    check
    mkdir -p "$D/munge" "$D/state" "$D/log" "${NODES[@]/#/$D/spool/}"
    chmod 700 "$D" "$D/munge"
    cd "$D"  # the daemons' working directory
    write_config
    start_munge
    local ns
    for ns in ctl "${NODES[@]}"; do start_namespace "$ns"; done
    start_network
    export SLURM_CONF=$D/slurm.conf
    start_daemon ctl slurmctld slurmctld -D -c
    local node
    for node in "${NODES[@]}"; do start_daemon "$node" "slurmd-$node" slurmd -D; done
    wait_idle
}

# Every process in one of the cluster's network namespaces (the daemons, the slurmstepd they
# forked and their tasks), then the holders: the namespaces, the bridge and the veths go with them.
cluster_pids() {
    local f ns pid
    declare -A nets=()
    for f in "$D"/ns-*.pid; do
        [[ -f $f ]] || continue
        ns=$(readlink "/proc/$(cat "$f")/ns/net" 2>/dev/null) && nets[$ns]=1
    done
    (( ${#nets[@]} )) || return 0
    for pid in /proc/[0-9]*; do
        ns=$(readlink "$pid/ns/net" 2>/dev/null) || continue
        [[ -n ${nets[$ns]:-} ]] && echo "${pid#/proc/}"
    done
    return 0
}

stop_pids() {  # TERM, up to 5 s, then KILL
    (( $# )) || return 0
    kill -TERM "$@" 2>/dev/null || true
    local i
    for i in $(seq 50); do
        kill -0 "$@" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$@" 2>/dev/null || true
}

down() {
    [[ -d $D ]] || return 0
    local pids=()
    [[ -f $D/daemons.pid ]] && mapfile -t pids <"$D/daemons.pid"
    stop_pids "${pids[@]}"
    mapfile -t pids < <(cluster_pids)
    stop_pids "${pids[@]}"
    [[ -f $D/munge/munged.pid ]] && stop_pids "$(cat "$D/munge/munged.pid")"
    rm -f "$D/daemons.pid" "$D"/ns-*.pid "$D/munge/munged.pid"
}

case ${1:-} in
    check) check ;;
    up) D=$(realpath -m "${2:?cluster.sh up DIR}"); up ;;
    down) D=$(realpath -m "${2:?cluster.sh down DIR}"); down ;;
    run) D=$(realpath -m "${2:?cluster.sh run DIR NS CMD...}"); ns=${3:?}; shift 3
         export SLURM_CONF=$D/slurm.conf; in_ns "$ns" "$@" ;;
    *) die "usage: cluster.sh check | up DIR | run DIR NS CMD... | down DIR" ;;
esac
