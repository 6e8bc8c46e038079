#!/usr/bin/env bash
# Builds and runs the default suite under a sanitizer, each from its CMake preset (CMakePresets.json):
#   scripts/sanitize.sh [asan|tsan|valgrind|all|ci]     (default: all)
# ci: the bounded subset CI runs after the suite (.ci/run): ASan+UBSan over the unit tests and a multirank sample
# (AllReduce, point-to-point, launch storage, LL/LL128, one-sided, suspend/resume), building only what those need (about 7 minutes on 2 cores).
# asan: AddressSanitizer + UBSan in build-asan; tsan: ThreadSanitizer in build-tsan; valgrind: the plain build
# (${BUILD_DIR:-build}, as scripts/build.sh) and the tests labelled valgrind (memcheck over init/destroy cycles).
# Extra ctest arguments go after the mode, e.g. scripts/sanitize.sh tsan -R allreduce. Prints each phase's time.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
(($#)) && shift
case $mode in asan | tsan | valgrind | all | ci) ;; *)
  echo "usage: scripts/sanitize.sh [asan|tsan|valgrind|all|ci] [ctest arguments]" >&2
  exit 2
  ;;
esac

timings=()
phase() {  # phase <label> <command...>: runs it, records its wall time
  local label=$1 start=$SECONDS rc=0
  shift
  echo "== $label: $*"
  "$@" || rc=$?
  timings+=("$(printf '%-18s %5d s%s' "$label" $((SECONDS - start)) "$( ((rc)) && echo "  (failed, exit $rc)")")")
  return $rc
}
report() {
  echo "== timings"
  printf '  %s\n' "${timings[@]}"
}
trap report EXIT

phase setup scripts/setup.sh
jobs=${JOBS:-$(nproc)}
status=0
run_preset() {  # run_preset <asan|tsan> [ctest arguments]
  local p=$1
  shift
  phase "$p configure" cmake --preset "$p" >/dev/null || return
  phase "$p build" cmake --build --preset "$p" -j "$jobs" || return
  phase "$p test" ctest --preset "$p" "$@"
}
run_valgrind() {
  local build=${BUILD_DIR:-build}
  phase "valgrind build" scripts/build.sh || return
  phase "valgrind test" ctest --test-dir "$build" -L valgrind --output-on-failure "$@"
}
run_ci() {
  phase "asan configure" cmake --preset asan >/dev/null || return
  phase "asan build" cmake --build --preset asan -j "$jobs" --target plexus-sanitizer-subset || return
  # The unit tests but those of binaries not built here (the NVIDIA-header ABI checks, the CUDA seam's).
  phase "asan unit" ctest --preset asan -L unit -E '^(abi|unit_cuda)\.' -j "$jobs" "$@" || return
  # LL and LL128 at every size around lines and steps run as processes alone: as threads too took a minute more.
  phase "asan multirank" ctest --preset asan -L multirank -R '^(allreduce|p2p|launch|LL|ncclPutSignal|ncclWaitSignal|ncclCommSuspend)' \
    -E '^LL128 and LL forced: .*ranks as threads$' -j "$jobs" "$@"
}
if [[ $mode == ci ]]; then
  run_ci "$@" || status=1
  exit $status
fi
for m in asan tsan valgrind; do
  [[ $mode == all || $mode == "$m" ]] || continue
  if [[ $m == valgrind ]]; then run_valgrind "$@" || status=1; else run_preset "$m" "$@" || status=1; fi
done
exit $status
