#!/usr/bin/env bash
# tools/ddp-measure.sh [BUILD_DIR] [ROUNDS] — data-parallel torc-train on this machine: Cruncher
# D=1024 L=4, global batch 512, f32 (onednn), 1 process x 2 threads against 2 processes x 1
# thread, default and --deterministic, then 2 processes in two network namespaces over TCP (as
# root; the veth setup of tests/mpi_netns.sh). Rounds interleave the configurations, because a
# shared machine's speed drifts over minutes. Prints each run's steps/s and DDP summary lines.
set -euo pipefail
build=${1:-build} rounds=${2:-3}
T=$(cd "$build" && pwd)/bin/torc-train
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_base_warn_component_unused=0
A=(--dim 1024 --layers 4 --batch 512 --steps "${STEPS:-20}" --log-every 1000)
show() { grep -E "steps +[0-9]|all-reduced|all-gathered|communication|scaling" | sed 's/^ */    /'; }
mp() { mpirun -np 2 --oversubscribe --bind-to none -x TORC_NUM_THREADS=1 "$@"; }
uptime
for r in $(seq "$rounds"); do
  echo "== round $r"
  echo "  1 process x 2 threads";               TORC_NUM_THREADS=2 "$T" "${A[@]}" --dist off | show
  echo "  2 processes x 1 thread";              mp "$T" "${A[@]}" | show
  echo "  1 process x 2 threads, deterministic"; TORC_NUM_THREADS=2 "$T" "${A[@]}" --deterministic | show
  echo "  2 processes x 1 thread, deterministic"; mp "$T" "${A[@]}" --deterministic | show
done
[ "$(id -u)" = 0 ] && command -v ip >/dev/null || { echo "(no network-namespace run: needs root and ip)"; exit 0; }
a=torc_ma_$$ b=torc_mb_$$ net=10.232.$(( $$ % 200 + 20 )) tmp=$(mktemp -d)
trap 'ip netns del $a 2>/dev/null; ip netns del $b 2>/dev/null; rm -rf "$tmp"' EXIT
ip netns add $a; ip netns add $b
ip link add mva$$ type veth peer name mvb$$
ip link set mva$$ netns $a; ip link set mvb$$ netns $b
ip -n $a addr add $net.1/24 dev mva$$; ip -n $b addr add $net.2/24 dev mvb$$
for ns in $a $b; do ip -n $ns link set lo up; done
ip -n $a link set mva$$ up; ip -n $b link set mvb$$ up
printf '#!/bin/sh\nhost=$1; shift\n[ "$host" = %s ] && ns=%s || ns=%s\nexec ip netns exec $ns sh -c "$*"\n' $net.1 $a $b > "$tmp/launch"
chmod +x "$tmp/launch"
for r in $(seq "$rounds"); do
  echo "== round $r: 2 processes x 1 thread, one per namespace, TCP over a veth pair"
  ip netns exec $a mpirun -np 2 --host $net.1:1,$net.2:1 --mca plm_rsh_agent "$tmp/launch" --mca btl tcp,self \
    --mca btl_tcp_if_include $net.0/24 --mca oob_tcp_if_include $net.0/24 --bind-to none -x TORC_NUM_THREADS=1 \
    "$T" "${A[@]}" | show
  echo "  2 processes x 1 thread, one host (shared memory)"; mp "$T" "${A[@]}" | show
done
