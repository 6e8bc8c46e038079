#!/usr/bin/env bash
# Configures and builds Plexus into ${BUILD_DIR:-build} (idempotent; incremental after the first run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then
  # No GPU here: the CUDA kernels are only checked to compile (PTX at -O1), minutes less on 2 cores.
  # CMAKE_ARGS=-DPLEXUS_CUDA_COMPILE_CHECK=OFF builds them for a GPU all the same.
  check=()
  if [[ ${CMAKE_ARGS:-} != *PLEXUS_CUDA_COMPILE_CHECK* ]] && ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
    check=(-DPLEXUS_CUDA_COMPILE_CHECK=ON)
  fi
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "${check[@]}" ${CMAKE_ARGS:-}
fi
cmake --build "$build" -j "${JOBS:-$(nproc)}"
