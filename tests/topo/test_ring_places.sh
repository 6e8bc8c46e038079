#!/usr/bin/env bash
# The ring keeps a node's ranks together by where they sit: 4 ranks as processes, rank r bound to CPU r % 2, on
# tests/topo/host-2numa-interleaved.xml (CPU 0 on socket 0, CPU 1 on socket 1). The ring must cross between the
# sockets twice (0 2 1 3), not four times (0 1 2 3, which it is on this machine as it is: one NUMA node).
#   test_ring_places.sh <plexus-perf> <topology dir>
set -euo pipefail
perf=$1
topo=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_ring_places: $*" >&2; cat "$tmp"/log.* >&2 || true; exit 1; }
command -v taskset >/dev/null || { echo "SKIPPED: no taskset (util-linux)"; exit 77; }
taskset -c 1 true 2>/dev/null || { echo "SKIPPED: this process may not run on CPU 1 (fewer than 2 CPUs allowed)"; exit 77; }

# Runs the 4 ranks; prints rank 0's lines of the ring ("ring of 'ring', channel 0: <order> (rank:place ...)") and
# the tree ("tree of 'tree', channel 0 (rank:parent): ...").
# A random port below the kernel's ephemeral ones (32768-60999) may still be taken by a test running beside this
# one: a second try takes another.
ring() {
  local try ok
  for try in 1 2; do
    local port=$((20000 + RANDOM % 12000)) pids=()
    for r in 0 1 2 3; do
      NCCL_COMM_ID=127.0.0.1:$port PLEXUS_RANK=$r PLEXUS_NRANKS=4 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=GRAPH \
        timeout 120 taskset -c $((r % 2)) "$perf" all_reduce -b 1K -e 1K -n 2 -w 1 -c 1 >"$tmp/log.$r" 2>&1 &
      pids+=($!)
    done
    ok=1
    for pid in "${pids[@]}"; do wait "$pid" || ok=0; done
    ((ok)) && break
    ((try == 1)) && grep -qi "address already in use" "$tmp"/log.* && continue
    fail "a rank failed"
  done
  grep -o "ring of 'ring', channel 0:.*" "$tmp/log.0" || fail "rank 0 logged no ring"
  grep -o "tree of 'tree', channel 0.*" "$tmp/log.0" || fail "rank 0 logged no tree"
}

line=$(NCCL_TOPO_FILE=$topo/host-2numa-interleaved.xml ring)
echo "interleaved sockets: $line"
if grep -q "0:0 1:0 2:0 3:0" <<<"$line"; then echo "SKIPPED: Plexus was built without hwloc (no places)"; exit 77; fi
grep -q "channel 0: 0 2 1 3 (" <<<"$line" || fail "expected the ring 0 2 1 3 (ranks on CPUs 0 and 1 grouped), got: $line"
# The one-node tree is heap-shaped over positions taken in order of place (0 2 1 3): rank 3 hangs below rank 2, on
# its own socket, not below rank 1.
grep -q "(rank:parent): 0:-1 1:0 2:0 3:2$" <<<"$line" || fail "expected the tree 0:-1 1:0 2:0 3:2, got: $line"
line=$(NCCL_TOPO_FILE= ring)
echo "this machine: $line"
grep -q "channel 0: 0 1 2 3 (" <<<"$line" || fail "expected the ring 0 1 2 3 where every rank sits alike, got: $line"
grep -q "(rank:parent): 0:-1 1:0 2:0 3:1$" <<<"$line" || fail "expected the tree 0:-1 1:0 2:0 3:1, got: $line"
echo "PASS"
