#!/usr/bin/env bash
# Builds Plexus and runs the test suite through ctest. Default: everything but PyTorch's whole
# distributed suite (label "torch_full", 6 minutes; its sample runs) and the fault trials at full strength (label
# "stress", 1.5 minutes; the same cases run with fewer trials); pass ctest arguments to choose, e.g. scripts/test.sh
# -L full for the long cases alone, -L stress for the fault trials.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
build=${BUILD_DIR:-build}
# Bootstrap and test traffic stays on loopback.
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
args=("$@")
((${#args[@]})) || args=(-LE '^(torch_full|stress)$')
cd "$build"
ctest --output-on-failure --timeout 600 "${args[@]}"
