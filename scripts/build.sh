#!/usr/bin/env bash
# Configures and builds Plexus into ${BUILD_DIR:-build} (idempotent; incremental after the first run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} ${CMAKE_ARGS:-}
fi
cmake --build "$build" -j "${JOBS:-$(nproc)}"
