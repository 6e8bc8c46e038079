#!/usr/bin/env bash
# NCCL's env plugin (NCCL_ENV_PLUGIN) as a user loads one: knobs the process environment does not hold (here
# NCCL_DEBUG and NCCL_DEBUG_SUBSYS) come from the plugin's getEnv, with ABI v2 and v1, by path and by name
# (libnccl-env-<name>.so in PLEXUS_PLUGIN_PATH); an init that fails makes communicator init fail with a line that
# says so; a plugin that cannot be found is a warning and the process environment serves. plexus-perf, 2 ranks as
# threads, results checked.
#   test_env_plugin.sh <plexus-perf> <folder of the test plugins>
set -euo pipefail
perf=$1
plugins=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_env_plugin: $*" >&2; cat "$tmp/log" >&2 || true; exit 1; }

run() {  # run <env...>: plexus-perf with no NCCL_DEBUG of its own; output in $tmp/log
  env -u NCCL_DEBUG -u NCCL_DEBUG_SUBSYS -u PLEXUS_DEBUG "$@" timeout 120 "$perf" all_reduce -b 1K -e 64K -f 8 -n 2 \
    -w 1 -c 1 -t 2 >"$tmp/log" 2>&1
}
values="NCCL_DEBUG=INFO;NCCL_DEBUG_SUBSYS=INIT,ENV"

for v in 2 1; do
  run NCCL_ENV_PLUGIN="$plugins/libnccl-env-test-v$v.so" TEST_ENV_VALUES="$values" || fail "v$v: plexus-perf failed"
  grep -q "Out of bounds values : 0 OK" "$tmp/log" || fail "v$v: results not checked as right"
  grep -q "env plugin 'test-env-v$v' (ncclEnvPlugin_v$v): loaded" "$tmp/log" ||
    fail "v$v: no INFO line saying the plugin loaded (NCCL_DEBUG=INFO came only from it)"
  grep -q "Init COMPLETE" "$tmp/log" || fail "v$v: NCCL_DEBUG_SUBSYS=INIT from the plugin did not reach the log"
done
grep -q "its init said: test-env-v2 for NCCL 2\." "$tmp/log" && fail "v1 has no logger, yet a v2 line appeared"
run NCCL_ENV_PLUGIN="$plugins/libnccl-env-test-v2.so" TEST_ENV_VALUES="$values" || fail "v2 again: plexus-perf failed"
grep -q "its init said: test-env-v2 for NCCL 2\." "$tmp/log" || fail "v2: the line its init logged is missing"

# By name: libnccl-env-<name>.so in the plugin folders.
run NCCL_ENV_PLUGIN=test-v2 PLEXUS_PLUGIN_PATH="$plugins" TEST_ENV_VALUES="$values" || fail "by name: plexus-perf failed"
grep -q "env plugin 'test-env-v2'" "$tmp/log" || fail "by name: NCCL_ENV_PLUGIN=test-v2 did not load libnccl-env-test-v2.so"

# Without the plugin the same run says nothing: the values above came from it.
run TEST_ENV_VALUES="$values" || fail "no plugin: plexus-perf failed"
grep -q "NCCL INFO" "$tmp/log" && fail "no plugin: INFO lines without NCCL_DEBUG"

# An init that fails: communicator init fails, naming the env plugin.
if run NCCL_DEBUG=WARN NCCL_ENV_PLUGIN="$plugins/libnccl-env-test-v2.so" TEST_ENV_INIT_FAIL=1; then fail "a failing init: plexus-perf ran"; fi
grep -q "env plugin's init failed" "$tmp/log" || fail "a failing init: no line naming the env plugin"

# A plugin that is not there: a warning, and the process environment serves.
run NCCL_DEBUG=WARN NCCL_ENV_PLUGIN=/nonexistent/libnccl-env-x.so || fail "missing: plexus-perf failed"
grep -q "env plugin '/nonexistent/libnccl-env-x.so': not loaded" "$tmp/log" || fail "missing: no warning"
grep -q "Out of bounds values : 0 OK" "$tmp/log" || fail "missing: results not checked as right"
echo "test_env_plugin: PASS (v2 and v1 by path, by name, without, failing init, missing)"
