#!/usr/bin/env bash
# Run here, before the device call: fills .gpu-carry/ (ignored by git) with what the GPU machine lacks for
# scripts/gpu-check.sh: nlohmann/json's and doctest's headers (that image has no -dev packages; the top-level
# CMakeLists.txt falls back to them), doctest's CMake scripts, and a copy of NVIDIA's nccl-tests (../shared does not
# travel). Prints its size, what travels in all, and the `carry` list to pass.
#   scripts/gpu-prepare.sh            # nccl-tests from $PLEXUS_NCCL_TESTS_DIR, else ../shared/third-party/nccl-tests
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
carry=$root/.gpu-carry
tests_src=${PLEXUS_NCCL_TESTS_DIR:-$root/../shared/third-party/nccl-tests}
fail() { echo "gpu-prepare: $*" >&2; exit 1; }

[[ -d $carry ]] && chmod -R u+w "$carry"
rm -rf "$carry"
mkdir -p "$carry/include/doctest" "$carry/cmake"
# .gitignore lists it: it must never be committed (the device call carries it by name).
git check-ignore -q .gpu-carry/MANIFEST || fail ".gpu-carry/ is not ignored by git: add /.gpu-carry/ to .gitignore"

json=$(find /usr/include/nlohmann -maxdepth 1 -name json.hpp 2>/dev/null | head -1)
[[ -n $json ]] || fail "no /usr/include/nlohmann/json.hpp here (scripts/setup.sh installs nlohmann-json3-dev)"
cp -r /usr/include/nlohmann "$carry/include/"
[[ -f /usr/include/doctest/doctest.h ]] || fail "no /usr/include/doctest/doctest.h here (install doctest-dev)"
cp /usr/include/doctest/doctest.h "$carry/include/doctest/"
doctest_cmake=$(dirname "$(find /usr/lib /usr/share /usr/local -path '*doctest*' -name doctest.cmake 2>/dev/null | head -1)")
[[ -f $doctest_cmake/doctest.cmake && -f $doctest_cmake/doctestAddTests.cmake ]] ||
  fail "doctest's CMake scripts (doctest.cmake, doctestAddTests.cmake) not found"
cp "$doctest_cmake/doctest.cmake" "$doctest_cmake/doctestAddTests.cmake" "$carry/cmake/"

# net-ib builds against rdma-core's headers (it opens libibverbs at run time): <infiniband/*> and the kernel's <rdma/*>.
if [[ -f /usr/include/infiniband/verbs.h ]]; then
  cp -r /usr/include/infiniband "$carry/include/"
  [[ -d /usr/include/rdma ]] && cp -r /usr/include/rdma "$carry/include/"
fi

if [[ -f $tests_src/src/Makefile ]]; then
  cp -r "$tests_src" "$carry/nccl-tests"
  chmod -R u+w "$carry/nccl-tests"
  tests_note="nccl-tests from $(cd "$tests_src" && pwd)"
else
  tests_note="no nccl-tests at $tests_src: the GPU check will report that part as SKIP"
fi
{
  echo "Filled by scripts/gpu-prepare.sh on $(date -u) for scripts/gpu-check.sh; never commit it."
  echo "include/nlohmann: $(dpkg-query -W -f='${Package} ${Version}' nlohmann-json3-dev 2>/dev/null || echo /usr/include/nlohmann)"
  echo "include/doctest, cmake/: $(dpkg-query -W -f='${Package} ${Version}' doctest-dev 2>/dev/null || echo doctest)"
  echo "nccl-tests: $tests_note"
} >"$carry/MANIFEST"

carry_bytes=$(du -sb "$carry" | cut -f1)
# What the device call sends: tracked files, untracked files git does not ignore, and the carried folder.
tree_bytes=$(git ls-files -z --cached --others --exclude-standard | xargs -0 -r du -cb 2>/dev/null | tail -1 | cut -f1)
total=$((carry_bytes + tree_bytes))
echo "gpu-prepare: .gpu-carry/ holds $((carry_bytes / 1024)) KiB (nlohmann/json, doctest, doctest's CMake scripts; $tests_note)"
echo "gpu-prepare: the working tree sends $((tree_bytes / 1024)) KiB; with .gpu-carry $((total / 1024)) KiB of the 64 MiB limit"
((total < 64 * 1024 * 1024)) || fail "more than 64 MiB would travel"
echo 'gpu-prepare: now call the device tool with: command "scripts/gpu-check.sh", carry [".gpu-carry"], timeout_s 600'
