#!/usr/bin/env bash
# The installed SDK as a plugin developer and an application use it: install the build tree, build
# examples/algo-recursive-doubling against the install tree alone (find_package(plexus)), compile an
# application and a plugin through pkg-config, then run the installed plexus-perf with a config
# file that loads the example by path and routes small AllReduces to it, checking every result and
# that the example really ran; then build examples/transport-unix the same way and run every collective over
# it, chosen by a config file.
#   test_sdk.sh <build dir> <source dir>
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_sdk: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/install" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "install failed"; }
prefix=$tmp/install
for f in include/nccl.h include/plexus.h include/plexus/algo_v2.h include/plexus/device/kernel.h include/plexus/device/protocol_prims.h \
         lib/cmake/plexus/plexusConfig.cmake lib/pkgconfig/plexus.pc lib/pkgconfig/plexus-plugin-api.pc \
         lib/plexus/libplexus-algo-ring.so bin/plexus-perf bin/plexus-plugin-check; do
  [[ -e $prefix/$f ]] || fail "the install tree lacks $f"
done
[[ -e $prefix/lib/libnccl.so.2 ]] || fail "the install tree lacks the drop-in libnccl.so.2"

# An out-of-tree plugin through CMake, seeing nothing of the source tree; a developer's Debug build (every datatype x
# operator instantiated at -O0 builds in a third of Release's time, and runs the small sizes below as well).
cmake -S "$src/examples/algo-recursive-doubling" -B "$tmp/rd" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Debug \
  >"$tmp/rd.log" 2>&1 || { cat "$tmp/rd.log"; fail "configuring the example failed"; }
cmake --build "$tmp/rd" >>"$tmp/rd.log" 2>&1 || { cat "$tmp/rd.log"; fail "building the example failed"; }
plugin=$tmp/rd/libplexus-algo-rd.so
[[ -f $plugin ]] || fail "the example built no $plugin"
# The installed conformance tool passes the example, rule by rule.
check=$(env -u PLEXUS_PLUGIN_PATH "$prefix/bin/plexus-plugin-check" "$plugin" 2>&1) ||
  { echo "$check"; fail "plexus-plugin-check failed the example"; }
for rule in load graphs cost finalize; do
  grep -q "^PASS $rule:" <<<"$check" || { echo "$check"; fail "plexus-plugin-check: no PASS line for $rule"; }
done

# pkg-config, relocated: an application against plexus, a plugin against the headers alone.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cat >"$tmp/app.c" <<'C'
#include <nccl.h>
#include <stdio.h>
int main(void) { int v; ncclGetVersion(&v); printf("%d\n", v); return v > 0 ? 0 : 1; }
C
cc "$tmp/app.c" -o "$tmp/app" $(pkg-config --cflags --libs plexus) -Wl,-rpath,"$prefix/lib" || fail "app via pkg-config"
"$tmp/app" >/dev/null || fail "the pkg-config app did not run"
cat >"$tmp/plugin.c" <<'C'
#include <plexus/algo_v2.h>
#include <plexus/transport_v1.h>
int plexusExampleAbi(void) { return PLEXUS_ALGO_ABI_VERSION + PLEXUS_TRANSPORT_ABI_VERSION; }
C
cc -std=c99 -Wall -Werror -c "$tmp/plugin.c" -o "$tmp/plugin.o" $(pkg-config --cflags plexus-plugin-api) \
  || fail "the plugin headers do not compile as C99 via pkg-config"

# Run: the installed tools and plugins only (no build-tree plugin path).
unset PLEXUS_PLUGIN_PATH PLEXUS_ALGORITHMS
cat >"$tmp/plexus.json" <<JSON
{ "version": 1,
  "plugins": { "algorithms": ["ring", "direct", "$plugin"] },
  "tuning": [ { "collective": "allreduce", "bytes": [0, "256K"], "algorithm": "recursive-doubling" } ] }
JSON
out=$(PLEXUS_CONFIG=$tmp/plexus.json NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING,INIT \
      "$prefix/bin/plexus-perf" all_reduce -t 4 -b 8 -e 512K -f 4 -n 3 -w 1 -c 1 -d all -o all 2>&1) \
  || { echo "$out"; fail "plexus-perf failed"; }
grep -q "Out of bounds values : 0 OK" <<<"$out" || { echo "$out"; fail "wrong results"; }
grep -q "algorithm plugin 'recursive-doubling': loaded $plugin" <<<"$out" || { echo "$out"; fail "not loaded"; }
grep -q -- "-> recursive-doubling/.*rule 1 of $tmp/plexus.json" <<<"$out" || { echo "$out"; fail "the rule did not route to it"; }
grep -q "AllReduce of 524288 B .*: cost model: " <<<"$out" || { echo "$out"; fail "beyond the rule the cost model should decide"; }

# The transport example, built the same way and chosen by the configuration file: every collective and
# point-to-point pattern over it (3 ranks as threads), every protocol, and 2 processes; results checked.
cmake -S "$src/examples/transport-unix" -B "$tmp/tu" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/tu.log" 2>&1 &&
  cmake --build "$tmp/tu" >>"$tmp/tu.log" 2>&1 || { cat "$tmp/tu.log"; fail "building the transport example failed"; }
transport=$tmp/tu/libplexus-transport-unix.so
[[ -f $transport ]] || fail "the transport example built no $transport"
check=$(env -u PLEXUS_PLUGIN_PATH "$prefix/bin/plexus-plugin-check" "$transport" 2>&1) ||
  { echo "$check"; fail "plexus-plugin-check failed the transport example"; }
for rule in load canConnect steps close lines finalize; do
  grep -q "^PASS $rule:" <<<"$check" || { echo "$check"; fail "plexus-plugin-check: no PASS line for $rule (transport)"; }
done
cat >"$tmp/transport.json" <<JSON
{ "version": 1, "plugins": { "transports": ["$transport"] } }
JSON
over_unix() {  # over_unix <what> <env and plexus-perf arguments...>: runs, checks results and the transport used
  local what=$1
  shift
  out=$(env PLEXUS_CONFIG="$tmp/transport.json" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P "$@" 2>&1) ||
    { echo "$out"; fail "$what over the transport example failed"; }
  grep -q "Out of bounds values : 0 OK" <<<"$out" || { echo "$out"; fail "$what: wrong results over the example"; }
  grep -q "through transport 'unix-socket'" <<<"$out" || { echo "$out"; fail "$what: the example did not serve"; }
  grep -q "through transport '\(p2p-nvlink\|net\)'" <<<"$out" && { echo "$out"; fail "$what: another transport served"; }
  return 0
}
for coll in all_reduce broadcast reduce all_gather reduce_scatter alltoall gather scatter sendrecv; do
  over_unix "$coll" "$prefix/bin/plexus-perf" "$coll" -t 3 -b 8 -e 1M -f 16 -n 2 -w 1 -c 1
done
over_unix hypercube "$prefix/bin/plexus-perf" hypercube -t 4 -b 8 -e 1M -f 16 -n 2 -w 1 -c 1  # 2^k ranks
# LL up to 64 KiB (the sizes LL serves), in 8 KiB slots (NCCL_BUFFSIZE=64K) rather than the default 512 KiB: 1 MiB
# of every datatype and operator took 40 s of this test.
for proto in LL LL128 Simple; do
  size=(-e 1M) buff=()
  [[ $proto == LL ]] && size=(-e 64K) buff=(NCCL_BUFFSIZE=65536)
  over_unix "AllReduce/$proto" NCCL_PROTO=$proto "${buff[@]}" "$prefix/bin/plexus-perf" all_reduce -t 3 -b 8 "${size[@]}" \
    -f 16 -n 2 -w 1 -c 1 -d all -o all
done
port=$((20000 + RANDOM % 12000))
pids=()
for r in 0 1; do
  PLEXUS_CONFIG="$tmp/transport.json" NCCL_COMM_ID=127.0.0.1:$port PLEXUS_RANK=$r PLEXUS_NRANKS=2 NCCL_DEBUG=INFO \
    NCCL_DEBUG_SUBSYS=INIT,P2P timeout 120 "$prefix/bin/plexus-perf" all_reduce -b 8 -e 4M -f 8 -n 2 -w 1 -c 1 \
    >"$tmp/procs.$r" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { cat "$tmp"/procs.*; fail "2 processes over the transport example failed"; }; done
grep -q "Out of bounds values : 0 OK" "$tmp/procs.0" || { cat "$tmp"/procs.*; fail "2 processes: wrong results"; }
grep -q "rank 0: rank 1 through transport 'unix-socket'" "$tmp/procs.0" ||
  { cat "$tmp"/procs.*; fail "2 processes: the example did not serve"; }
echo "test_sdk: OK (install, find_package, pkg-config, out-of-tree algorithm and transport plugins loaded by the" \
  "config and checked)"
