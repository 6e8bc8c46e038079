#!/usr/bin/env bash
# Installs what Plexus needs to build, test and benchmark on Debian 12 (idempotent: apt runs only when
# a package is missing). nvcc is optional: the CUDA kernels are compiled when /usr/local/cuda has it.
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config git
          openmpi-bin libopenmpi-dev doctest-dev nlohmann-json3-dev libhwloc-dev iproute2
          libucx-dev ucx-utils libfabric-dev libfabric-bin
          libibverbs-dev  # net-ib builds against <infiniband/verbs.h> (and opens libibverbs at run time)
          python3-torch libtorch-dev pybind11-dev  # the torch.distributed backend (integrations/torch), torch 1.13
          clang libclang-rt-14-dev  # the libFuzzer targets (tests/fuzz): clang++ 14 and its runtimes
          valgrind)                 # memcheck over communicator init/destroy cycles (tests/valgrind)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
