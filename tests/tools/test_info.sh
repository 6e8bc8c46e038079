#!/usr/bin/env bash
# plexus-info as a user runs it: what it reports of plugins (loaded and refused), the configuration,
# and the decision table a configuration file and a tuner plugin produce.
#   test_info.sh <plexus-info> <plugin dir> <test plugin dir>
set -euo pipefail
info=$1
plugins=$2
testplugins=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_info: $*" >&2; echo "$out" >&2; exit 1; }
expect() { grep -qE -- "$1" <<<"$out" || fail "no line matching '$1'"; }

out=$(PLEXUS_PLUGIN_PATH=$testplugins:$plugins "$info" 2>&1) || fail "plexus-info failed"
expect "^Plexus [0-9]+\.[0-9]+\.[0-9]+, NCCL API 2\."
expect "algorithm +ring +$plugins/libplexus-algo-ring.so \(plexusAlgoPlugin_v2, ABI 2[^)]*\).*\[in use\]"
expect "algorithm +tree .*\[in use\]"
expect "transport +p2p-nvlink"
expect "libplexus-algo-bad-wrong_version.so: refused: .*ABI version mismatch \(plugin ABI 3, size 88; this Plexus expects ABI 2, size 72 or more\)"
expect "algorithm +rd-v1 .*\(plexusAlgoPlugin_v1, ABI 1\)"
expect "algorithm +p2p .*Send,Recv"
expect "libplexus-algo-bad-null_member.so: refused: .*NULL"
expect "libnccl-tuner-bad-null_getCollInfo.so.*: refused .*getCollInfo is NULL"
expect "tuner plugin test-v3 \(.*libnccl-tuner-test-v3.so, v3\)"
expect "profiler +$plugins/libnccl-profiler-trace.so \(ncclProfiler_v6 'profiler-trace'; exports v6\)"
expect "profiler +.*libnccl-profiler-test-v3.so \(ncclProfiler_v3 'test-profiler'"
expect "net +.*libnccl-net-test-v6.so \(ncclNetPlugin_v6 'test-v6'; exports v6\)"
expect "env +.*libnccl-env-test-v1.so \(ncclEnvPlugin_v1 'test-env-v1'"
expect "^Topology"
expect "^Net devices"

cat >"$tmp/plexus.json" <<'JSON'
{ "version": 1,
  "tuning": [ { "collective": "allreduce", "bytes": [0, "64K"], "nnodes": [2, 2], "algorithm": "ring", "protocol": "ll" } ] }
JSON
out=$(PLEXUS_CONFIG=$tmp/plexus.json PLEXUS_PLUGIN_PATH=$plugins "$info" --tuning --nranks 16 --nnodes 2 2>&1) \
  || fail "plexus-info --tuning failed"
expect "Tuning for 16 ranks on 2 node\(s\) \(8 per node"
expect "rules: $tmp/plexus.json"
expect "AllReduce +\[0 B, 64 KiB\) +ring/LL .*rule 1 of $tmp/plexus.json"
expect "AllReduce +\[64 KiB, .*cost model: "
expect "Broadcast +\[0 B"
# On one node the rule does not hold.
out=$(PLEXUS_CONFIG=$tmp/plexus.json PLEXUS_PLUGIN_PATH=$plugins "$info" --tuning --nranks 8 2>&1) || fail "--nranks 8"
grep -q "rule 1 of" <<<"$out" && fail "a rule for 2 nodes applied to 1"
# A tuner plugin's answers show in the table.
out=$(NCCL_TUNER_PLUGIN=$testplugins/libnccl-tuner-test-v5.so PLEXUS_TEST_TUNER=tree,simple,1 PLEXUS_PLUGIN_PATH=$plugins \
      "$info" --tuning --nranks 4 2>&1) || fail "--tuning with a tuner plugin"
expect "tuner: tuner plugin test-v5"
expect "AllReduce +\[0 B, .* tree/Simple .*tuner plugin test-v5"
# Bad arguments: a usage line and exit code 2.
set +e
out=$("$info" --nranks 0 --tuning 2>&1); rc=$?
set -e
[[ $rc == 2 ]] || fail "--nranks 0: exit code $rc, expected 2"

# --topology: a server from tests/topo (NCCL_TOPO_FILE), each local rank's GPU, CPUs and NICs nearest first.
topo=$(cd "$(dirname "$0")/../topo" && pwd)
if out=$(NCCL_TOPO_FILE=$topo/server-8gpu-4nic.xml "$info" --topology 2>&1); then
  expect "^Topology \($topo/server-8gpu-4nic.xml\): 2 package\(s\), 2 NUMA node\(s\), 32 core\(s\)"
  expect "^ +Package 1 \(CPUs 16-31\)"
  expect "^ +GPU5 0000:54:00.0 \(NVIDIA GPU\)"
  expect "^ +NIC mlx5_2 0000:55:00.0 \(ib2\)"
  expect "^Local ranks \(8\)"
  expect "rank 5: GPU5 0000:54:00.0, CPUs 16-31; NICs nearest first: mlx5_2 PIX, mlx5_3 PHB, mlx5_0 SYS, mlx5_1 SYS; channel 0 on mlx5_2"
  expect "rank 0: GPU0 0000:13:00.0, CPUs 0-15; NICs nearest first: mlx5_0 PIX, mlx5_1 PHB"
  out=$(NCCL_TOPO_FILE=$topo/server-8gpu-nvlink.xml "$info" --topology 2>&1) || fail "--topology with NVLink"
  expect "^ +GPU0 0000:13:00.0 \(NVIDIA GPU\); NVLink to GPU1 100 GB/s, GPU2 100 GB/s, GPU3 100 GB/s$"
  expect "^ +GPU6 0000:73:00.0 \(NVIDIA GPU\); NVLink to GPU4 450 GB/s, GPU5 450 GB/s, GPU7 450 GB/s$"
  out=$(NCCL_TOPO_FILE=$topo/host-2numa-2nic.xml "$info" --topology --nranks 2 2>&1) || fail "--topology --nranks 2"
  expect "^Local ranks \(2\): no NVIDIA GPU"
  out=$("$info" --topology 2>&1) || fail "--topology on this machine"
  expect "^Topology \(this machine, live\)"
  set +e
  out=$(NCCL_TOPO_FILE=/nonexistent.xml "$info" --topology 2>&1); rc=$?
  set -e
  [[ $rc == 1 ]] || fail "--topology with a missing file: exit code $rc, expected 1"
  expect "Topology: unavailable: cannot read the topology file /nonexistent.xml"
elif grep -q "built without hwloc" <<<"$out"; then
  echo "test_info: --topology not checked: Plexus was built without hwloc"
else
  fail "plexus-info --topology failed"
fi
echo "test_info: OK"
