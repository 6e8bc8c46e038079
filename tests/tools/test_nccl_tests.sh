#!/usr/bin/env bash
# NVIDIA's nccl-tests, unmodified, built against the installed Plexus as an NCCL user builds them: install the build
# tree to a prefix, `make` nccl-tests' src/ with NCCL_HOME=<prefix> and nvcc for sm_90, then check that every
# *_perf binary's NCCL (libnccl.so.2, or the SONAME lib/libnccl.so leads to) resolves to the Plexus of that prefix
# (readelf, ldd).
# Running them needs a GPU (scripts/gpu-check.sh does); building them does not.
#
#   test_nccl_tests.sh <build dir> <source dir> [options]
#     --nccl-tests DIR   nccl-tests' source (default: $PLEXUS_NCCL_TESTS_DIR, else <source dir>/../shared/third-party/
#                        nccl-tests); it is only read: everything is built under the output folder
#     --out DIR          keep the install (DIR/prefix) and the binaries (DIR/nccl-tests) there (default: a temporary
#                        folder, removed at the end)
#     --jobs N           make -j N (default 2)
#     --only "a b"       build these binaries only, e.g. "all_reduce sendrecv" (default: $PLEXUS_NCCL_TESTS_ONLY, else
#                        every binary of nccl-tests' Makefile)
# Exits 77 (skipped), saying where it looked, when nccl-tests or nvcc is not there.
set -euo pipefail
build=$1
src=$2
shift 2
tests_dir=${PLEXUS_NCCL_TESTS_DIR:-}
out=
jobs=2
only=${PLEXUS_NCCL_TESTS_ONLY:-}
keep_going=0
while (($#)); do
  case $1 in
    --nccl-tests) tests_dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --keep-going) keep_going=1; shift ;;  # build what compiles, check it, and name what did not (exit 1 still)
    *) echo "test_nccl_tests: unknown option $1" >&2; exit 2 ;;
  esac
done
looked=()
if [[ -z $tests_dir ]]; then
  tests_dir=$src/../shared/third-party/nccl-tests
fi
looked+=("$tests_dir")
if [[ ! -f $tests_dir/src/Makefile ]]; then
  echo "SKIPPED: nccl-tests not found (looked for src/Makefile in: ${looked[*]}; set PLEXUS_NCCL_TESTS_DIR or the CMake variable PLEXUS_NCCL_TESTS_DIR)"
  exit 77
fi
tests_dir=$(cd "$tests_dir" && pwd)
cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [[ ! -x $cuda_home/bin/nvcc ]]; then
  echo "SKIPPED: no nvcc at $cuda_home/bin/nvcc (set CUDA_HOME)"
  exit 77
fi
fail() { echo "test_nccl_tests: FAIL: $*" >&2; exit 1; }

if [[ -n $out ]]; then
  mkdir -p "$out"
  work=$(cd "$out" && pwd)
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
prefix=$work/prefix
bindir=$work/nccl-tests
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "cmake --install failed"; }
[[ -e $prefix/include/nccl.h && -e $prefix/lib/libnccl.so.2 ]] || fail "the install lacks include/nccl.h or lib/libnccl.so.2"
[[ -e $prefix/lib/libnccl.so ]] || fail "the install lacks lib/libnccl.so, which -lnccl (nccl-tests' link line) needs"

# nccl-tests links with -L$CUDA_LIB before -L$NCCL_HOME/lib: where the toolkit's lib64 holds NVIDIA's own libnccl.so
# (it does on CI's image), -lnccl would take that one. CUDA_LIB (a variable its Makefile lets the caller set) points
# at a folder with the CUDA runtime alone instead, so -lnccl can only be Plexus's.
cudalib=$work/cuda-lib
rm -rf "$cudalib"
mkdir -p "$cudalib"
for f in "$cuda_home"/lib64/libcudart.so* "$cuda_home"/lib64/libcudart_static.a; do
  [[ -e $f ]] && ln -s "$f" "$cudalib/"
done
[[ -e $cudalib/libcudart.so ]] || fail "no libcudart.so in $cuda_home/lib64"

# nccl-tests picks NCCL's device API by NCCL_VERSION_CODE: from 2.29 on it needs 2.29's nccl_device.h, but the one
# it finds is the CUDA toolkit's (NCCL 2.28's; Plexus ships none). PLEXUS_NCCL_VERSION_2_28 makes Plexus's nccl.h
# say 2.28.9 to match (its Makefile's NVCC_GENCODE is the one variable that reaches nvcc's flags from outside).
device_api=
if ! grep -qs "ncclCommQueryProperties" -r "$cuda_home/include/nccl_device.h" "$cuda_home/include/nccl_device"; then
  device_api=-DPLEXUS_NCCL_VERSION_2_28
fi
targets=()
if [[ -n $only ]]; then
  for b in $only; do targets+=("$bindir/${b%_perf}_perf"); done
fi
start=$(date +%s)
echo "test_nccl_tests: building $( ((${#targets[@]})) && echo "${only}" || echo "every binary") of $tests_dir with -j$jobs"
unbuilt=
if ! make -C "$tests_dir/src" BUILDDIR="$bindir" NCCL_HOME="$prefix" CUDA_HOME="$cuda_home" CUDA_LIB="$cudalib" \
     NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90 $device_api" MPI=0 -j"$jobs" $( ((keep_going)) && echo -k) \
     "${targets[@]}" >"$work/make.log" 2>&1; then
  tail -n 60 "$work/make.log"
  ((keep_going)) || fail "building nccl-tests against $prefix failed (log: $work/make.log)"
  for cu in "$tests_dir"/src/*.cu; do
    name=$(basename "$cu" .cu)
    [[ $name == common || $name == timer || -e $bindir/${name}_perf ]] && continue
    grep -q "^${name}\.cu(\|/${name}\.cu(" "$work/make.log" || continue
    unbuilt+=" ${name}_perf"
    echo "FAIL ${name}_perf did not compile: $(grep -m1 "${name}\.cu([0-9]*): error" "$work/make.log")"
  done
  [[ -n $unbuilt ]] || fail "building nccl-tests against $prefix failed, not in any one test's source (log: $work/make.log)"
fi
echo "test_nccl_tests: built in $(($(date +%s) - start)) s"

# Every binary gets Plexus from the prefix. NVIDIA-built programs need libnccl.so.2; one linked here with -lnccl
# records the SONAME of the library lib/libnccl.so leads to, which is Plexus's own (libplexus.so.N) until Plexus ships
# a libnccl.so.2 with that SONAME: either name must resolve to the prefix's Plexus.
plexus_lib=$(readlink -f "$prefix/lib/libnccl.so.2")
soname=$(readelf -d "$plexus_lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
mapfile -t bins < <(find "$bindir" -maxdepth 1 -name '*_perf' -type f | sort)
((${#bins[@]})) || fail "no *_perf binary was built in $bindir"
bad=0
for bin in "${bins[@]}"; do
  needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  name=
  for n in libnccl.so.2 "$soname"; do
    [[ " $needed " == *" $n "* ]] && { name=$n; break; }
  done
  if [[ -z $name ]]; then
    echo "FAIL $(basename "$bin"): needs [$needed]: neither libnccl.so.2 nor $soname"
    bad=1
    continue
  fi
  resolved=$(LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "$bin" | awk -v n="$name" '$1 == n {print $3}')
  if [[ -z $resolved || $(readlink -f "$resolved") != "$plexus_lib" ]]; then
    echo "FAIL $(basename "$bin"): $name resolves to '${resolved:-nothing}', not $plexus_lib"
    bad=1
    continue
  fi
  echo "ok   $(basename "$bin"): needs $name => $resolved -> $plexus_lib"
done
if [[ $soname != libnccl.so.2 ]]; then
  echo "NOTE: the installed libnccl.so.2 is a link to a library whose SONAME is $soname, so programs linked against"
  echo "      this install record $soname, not libnccl.so.2: they run Plexus, but cannot be pointed at another NCCL"
  echo "      through LD_LIBRARY_PATH. NVIDIA-built programs (NEEDED libnccl.so.2) load Plexus through the link."
fi
((bad == 0)) || fail "some binaries do not load Plexus as libnccl.so.2"
[[ -z $unbuilt ]] || fail "did not compile:$unbuilt (the rest built and load Plexus; log: $work/make.log)"
echo "test_nccl_tests: OK (${#bins[@]} binaries built with nvcc for sm_90 against $prefix, each resolving its NCCL to Plexus)"
