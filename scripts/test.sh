#!/usr/bin/env bash
# Builds Plexus and runs the test suite through ctest. Default: everything but the long matrix
# (label "full"); pass ctest arguments to choose, e.g. scripts/test.sh -L full.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
build=${BUILD_DIR:-build}
# Bootstrap and test traffic stays on loopback.
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
args=("$@")
((${#args[@]})) || args=(-LE full)
cd "$build"
ctest --output-on-failure --timeout 600 "${args[@]}"
