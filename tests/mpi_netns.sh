#!/usr/bin/env bash
# tests/mpi_netns.sh MPI_TEST TMPDIR — two "hosts" on this machine: two network namespaces joined
# by a veth pair (10.231.N.1 and .2, nothing else reachable), Open MPI's TCP transport between
# them, and a launcher that enters the other namespace standing in for ssh. The 2-rank
# deterministic training must give the 1-process run's bits. Skips (77) without root or ip netns.
set -euo pipefail
bin=$1 tmp=$2
[ "$(id -u)" = 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: ip (iproute2) not found"; exit 77; }
n=$(( $$ % 200 + 20 ))
a=torc_a_$$ b=torc_b_$$ va=tva$$ vb=tvb$$ net=10.231.$n
ip netns add $a 2>/dev/null || { echo "SKIP: cannot create a network namespace here (ip netns add failed)"; exit 77; }
cleanup() { ip netns del $a 2>/dev/null || true; ip netns del $b 2>/dev/null || true; }
trap 'cleanup; rm -rf "$tmp"' EXIT
ip netns add $b
ip link add $va type veth peer name $vb
ip link set $va netns $a
ip link set $vb netns $b
ip -n $a addr add $net.1/24 dev $va
ip -n $b addr add $net.2/24 dev $vb
for ns in $a $b; do ip -n $ns link set lo up; done
ip -n $a link set $va up
ip -n $b link set $vb up

# The "ssh" Open MPI runs to start its daemon on the other host: host -> namespace.
cat > "$tmp/launch" <<L
#!/bin/sh
host=\$1; shift
echo "\$host" >> "$tmp/launched"
case \$host in
  $net.1) ns=$a ;;
  $net.2) ns=$b ;;
  *) echo "launch: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec \$ns sh -c "\$*"
L
chmod +x "$tmp/launch"

common=(--mca plm_rsh_agent "$tmp/launch" --mca btl tcp,self --mca btl_tcp_if_include $net.0/24
        --mca oob_tcp_if_include $net.0/24 --bind-to none -x TORC_BACKEND -x TORC_NUM_THREADS -x LD_LIBRARY_PATH
        -x TORC_PLUGIN_PATH)
export TORC_NUM_THREADS=1
# One process on host a, then one rank on each host (mpirun itself lives in namespace a).
timeout 60 ip netns exec $a mpirun -np 1 "${common[@]}" "$bin" train --optim adam --steps 20 --batch 32 --deterministic --out "$tmp/one"
start=$(date +%s.%N)
timeout 90 ip netns exec $a mpirun -np 2 --host $net.1:1,$net.2:1 "${common[@]}" \
  "$bin" train --optim adam --steps 20 --batch 32 --deterministic --out "$tmp/two" 2>&1 | tee "$tmp/log"
took=$(python3 -c "import time; print(round(time.time() - $start, 2))")
grep -qx "$net.2" "$tmp/launched" || { echo "FAIL: nothing was launched in the second namespace"; exit 1; }
cmp "$tmp/one" "$tmp/two" || { echo "FAIL: 2 ranks over TCP differ from 1 process"; exit 1; }
echo "2 ranks in 2 network namespaces over TCP ($net.1 <-> $net.2): bit-identical to 1 process, $took s"
