#!/usr/bin/env bash
# Transport plugins as a user chooses them: PLEXUS_TRANSPORT_PLUGIN and plugins.transports of the configuration
# file name and order them (the built-in net transport always last), "none" leaves the net transport alone, and a
# name that cannot be used fails init with a line that says so. 2 ranks as processes of one node, results checked.
#   test_transports.sh <plexus-perf>
set -euo pipefail
perf=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_transports: $*" >&2; cat "$tmp"/log.* >&2 || true; exit 1; }

# Runs 2 ranks of plexus-perf (AllReduce 1 KiB..1 MiB, checked) with the environment given; rank 0's log in log.0.
run() {
  # Below the kernel's ephemeral ports (32768-60999): no connection of a test beside this one holds it.
  local port=$((20000 + RANDOM % 12000)) rc=0
  for r in 0 1; do
    env "$@" NCCL_COMM_ID=127.0.0.1:$port PLEXUS_RANK=$r PLEXUS_NRANKS=2 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P \
      timeout 120 "$perf" all_reduce -b 1K -e 1M -f 32 -n 2 -w 1 -c 1 >"$tmp/log.$r" 2>&1 &
  done
  for r in 0 1; do wait -n || rc=1; done
  return $rc
}
checked() { grep -q "Out of bounds values : 0 OK" "$tmp/log.0" || fail "$1: results not checked as right"; }

run PLEXUS_TRANSPORT_PLUGIN=none || fail "none: plexus-perf failed"
checked none
grep -q "rank 0: rank 1 through transport 'net'" "$tmp/log.0" || fail "none: rank 1 was not reached through the net transport"
grep -q "through transport 'p2p-nvlink'" "$tmp/log.0" && fail "none: p2p-nvlink was used"

run || fail "default: plexus-perf failed"
checked default
grep -q "rank 0: rank 1 through transport 'p2p-nvlink'" "$tmp/log.0" || fail "default: p2p-nvlink did not serve the node"

printf '{ "version": 1, "plugins": { "transports": ["p2p-nvlink"] } }\n' >"$tmp/plexus.json"
run PLEXUS_CONFIG="$tmp/plexus.json" || fail "plugins.transports: plexus-perf failed"
checked plugins.transports
grep -q "rank 0: rank 1 through transport 'p2p-nvlink'" "$tmp/log.0" || fail "plugins.transports: p2p-nvlink not used"

run PLEXUS_TRANSPORT_PLUGIN=no-such-transport && fail "an unknown transport did not fail init"
grep -q "transport plugin 'no-such-transport' (PLEXUS_TRANSPORT_PLUGIN or plugins.transports) cannot be used: (no file)" \
  "$tmp/log.0" || fail "an unknown transport: no line naming it"

printf '{ "version": 1, "plugins": { "transports": ["net"] } }\n' >"$tmp/bad.json"
run PLEXUS_CONFIG="$tmp/bad.json" && fail "plugins.transports naming the net transport was accepted"
grep -q "plugins.transports\[0\].*the built-in net transport always comes last" "$tmp/log.0" ||
  fail "plugins.transports [\"net\"]: no line saying why"
echo PASS
