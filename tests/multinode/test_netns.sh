#!/usr/bin/env bash
# Two "nodes" in two network namespaces joined by a veth pair, each with its own address: plexus-perf
# runs AllReduce and AllGather across them (2 ranks per node as threads), results checked, all traffic
# between the nodes on the veth pair this test creates (and removes). Needs root and iproute2; exits
# 77 (skipped) where namespaces cannot be made.
#   test_netns.sh <plexus-perf>
set -uo pipefail
perf=$1
id=$$
ns=(plexus-$id-a plexus-$id-b)
dev=(pxa$id pxb$id)
net=10.213.$((id % 250)).
addr=(${net}1 ${net}2)
tmp=$(mktemp -d)
cleanup() {
  ip netns del "${ns[0]}" 2>/dev/null
  ip netns del "${ns[1]}" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
skip() { echo "test_netns: skipped: $*"; exit 77; }

command -v ip >/dev/null || skip "no ip command (iproute2)"
ip netns add "${ns[0]}" 2>"$tmp/err" || skip "cannot create a network namespace: $(cat "$tmp/err")"
ip netns add "${ns[1]}" || skip "cannot create a second network namespace"
ip link add "${dev[0]}" type veth peer name "${dev[1]}" 2>"$tmp/err" || skip "cannot create a veth pair: $(cat "$tmp/err")"
for i in 0 1; do
  ip link set "${dev[$i]}" netns "${ns[$i]}" || skip "cannot move ${dev[$i]} into ${ns[$i]}"
  ip -n "${ns[$i]}" addr add "${addr[$i]}/24" dev "${dev[$i]}"
  ip -n "${ns[$i]}" link set "${dev[$i]}" up
  ip -n "${ns[$i]}" link set lo up
done

fail=0
for coll in all_reduce all_gather; do
  port=$((20000 + id % 20000))
  for i in 0 1; do
    timeout 120 ip netns exec "${ns[$i]}" env NCCL_COMM_ID="${addr[0]}:$port" PLEXUS_RANK=$i PLEXUS_NRANKS=2 \
      NCCL_SOCKET_IFNAME="${dev[$i]}" PLEXUS_HOSTID="${ns[$i]}" PLEXUS_NET_PLUGIN=none NCCL_DEBUG=INFO \
      NCCL_DEBUG_SUBSYS=NET PLEXUS_TIMEOUT=60 \
      "$perf" "$coll" -t 2 -b 8 -e 8M -f 8 -n 3 -w 1 -c 1 >"$tmp/$coll.$i" 2>&1 &
  done
  wait %1; r0=$?
  wait %2; r1=$?
  if [[ $r0 != 0 || $r1 != 0 ]] || ! grep -q "Out of bounds values : 0 OK" "$tmp/$coll.0"; then
    echo "test_netns: $coll failed (exit codes $r0, $r1)"; cat "$tmp/$coll.0" "$tmp/$coll.1"; fail=1
  elif ! grep -q "net plugin Socket (built-in): chosen" "$tmp/$coll.0"; then
    echo "test_netns: $coll did not use the net transport"; cat "$tmp/$coll.0"; fail=1
  else
    echo "test_netns: $coll across namespaces ${ns[0]} (${addr[0]}) and ${ns[1]} (${addr[1]}): OK"
    grep -E "^ +[0-9]+ " "$tmp/$coll.0" | tail -2
  fi
done
exit $fail
