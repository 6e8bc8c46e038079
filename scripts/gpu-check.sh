#!/usr/bin/env bash
# The GPU check: everything that needs a real GPU, in one run on a GPU machine, in the repository root of a copy of
# the working tree (scripts/gpu-check.md says how to start it). It needs .gpu-carry/ (scripts/gpu-prepare.sh fills it
# here): the header-only packages that machine lacks and a copy of nccl-tests.
#
#   1 configure + build (RelWithDebInfo, -j16) into build-gpu/, install to build-gpu/prefix
#   2 ctest -L gpu
#   3 plexus-perf all_reduce -c 1: 1 rank; 2 and 4 ranks as threads; 2 and 4 ranks as processes, all on GPU 0;
#     then the kernels' bandwidth at 256 MiB beside cudaMemcpy device to device (bench/cuda_memcpy_bw), 1 and 2 ranks
#   4 NVIDIA's nccl-tests built against the install (in the background during 2 and 3), every *_perf with
#     -b 8 -e 64M -f 4 -g 1 -c 1
#   5 PyTorch's NCCL backend on Plexus's libnccl.so.2: 1 and 2 processes on cuda:0 (scripts/gpu-check-torch.py)
#
# One line per part: PASS, FAIL or SKIP and why, with the seconds since the start; the summary is repeated at the end.
# Exit status 1 if any part failed. Every phase runs under `timeout`; the whole stays within PLEXUS_GPU_CHECK_BUDGET
# seconds (default 470): a phase that no longer fits is reported as SKIP. Logs go to $OUT when set (the device tool
# brings them back), else to <build>/logs. PLEXUS_GPU_CHECK_JOBS (16) sets the build's parallelism,
# PLEXUS_GPU_CHECK_BUILD_DIR (build-gpu) the build folder.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$PWD
t0=$(date +%s)
budget=${PLEXUS_GPU_CHECK_BUDGET:-470}
jobs=${PLEXUS_GPU_CHECK_JOBS:-16}
build=${PLEXUS_GPU_CHECK_BUILD_DIR:-$root/build-gpu}
prefix=$build/prefix
carry=$root/.gpu-carry
logs=${OUT:-$build/logs}
mkdir -p "$logs" "$build"
summary=$logs/summary.txt
: >"$summary"
failed=0

now() { echo $(($(date +%s) - t0)); }
say() { printf '[%3ds] %s\n' "$(now)" "$*" | tee -a "$summary"; }
verdict() {  # PASS|FAIL|SKIP <part> <reason>
  say "$1 $2: $3"
  [[ $1 == FAIL ]] && failed=1
  return 0
}
# phase <log> <seconds> <command...>: runs the command under timeout, cut to what is left of the budget; returns its
# status (124: timed out, 125: no time left to start it).
phase() {
  local log=$1 secs=$2 left
  shift 2
  left=$((budget - $(now) - 3))
  ((secs > left)) && secs=$left
  if ((secs < 5)); then
    echo "not started: no time left in the ${budget} s budget" >>"$log"
    return 125
  fi
  echo "+ $* (timeout ${secs}s)" >>"$log"
  timeout --kill-after=5 "$secs" "$@" >>"$log" 2>&1
}
why() {  # a short reason from a status
  case $1 in
    124) echo "timed out" ;;
    125) echo "no time left in the budget" ;;
    *) echo "exit status $1" ;;
  esac
}

# ---- 0: the machine ------------------------------------------------------------------------------------------------
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuda_home=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
{
  echo "date: $(date -u)"; uname -a
  nvidia-smi -L 2>&1; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  "$nvcc" --version 2>&1 | tail -2; echo "CUDA_HOME=$cuda_home"
  cmake --version | head -1; ninja --version; python3 --version
  echo "the toolkit's own NCCL headers (nccl-tests' device-API code compiles against them):"
  grep -hE "define NCCL_(MAJOR|MINOR|PATCH) " "$cuda_home/include/nccl.h" 2>&1; ls "$cuda_home/include/nccl_device" 2>&1
  nproc; free -g | head -2; df -h . | tail -1
} >"$logs/env.log" 2>&1
gpu=$(nvidia-smi -L 2>/dev/null | head -1)
say "machine: ${gpu:-no GPU}; nvcc $("$nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p'); $(nproc) cores"
[[ -n $gpu ]] || verdict FAIL gpu "nvidia-smi lists no GPU: the GPU parts below will skip or fail"
if [[ ! -d $carry/include ]]; then
  verdict FAIL setup ".gpu-carry/ is missing: run scripts/gpu-prepare.sh before the device call and pass carry: [\".gpu-carry\"]"
  exit 1
fi

# ---- 1: build --------------------------------------------------------------------------------------------------------
blog=$logs/build.log
: >"$blog"
phase "$blog" 90 cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPLEXUS_THIRD_PARTY_DIR="$carry" -DCMAKE_CUDA_COMPILER="$nvcc" -DPLEXUS_FUZZ=OFF
rc=$?
if ((rc)); then
  verdict FAIL configure "$(why $rc) (build.log)"
  tail -30 "$blog"
  exit 1
fi
# What the install and the checks need (the doctest suites are not built here).
targets=(plexus plexus-algo-ring plexus-algo-direct plexus-algo-tree plexus-algo-p2p plexus-p2p-nvlink nccl-tuner-csv
  nccl-profiler-trace
  plexus-perf plexus-info plexus-net-check plexus-plugin-check plexus-gpu-tests cuda_memcpy_bw)
# p2p-nvlink's GPU test is a doctest binary: built where doctest is (carried in .gpu-carry/).
ninja -C "$build" -t targets all 2>/dev/null | grep -q '^plexus-p2p-nvlink-gpu-tests:' && targets+=(plexus-p2p-nvlink-gpu-tests)
ninja -C "$build" -t targets all 2>/dev/null | grep -q '^nccl-net-ib:' && targets+=(nccl-net-ib)
phase "$blog" 330 cmake --build "$build" -j "$jobs" --target "${targets[@]}"
rc=$?
if ((rc)); then
  verdict FAIL build "$(why $rc) (build.log)"
  grep -E "error|FAILED" "$blog" | head -20
  exit 1
fi
rm -rf "$prefix"
phase "$blog" 60 cmake --install "$build" --prefix "$prefix"
rc=$?
if ((rc)); then
  verdict FAIL build "install: $(why $rc) (build.log)"
  exit 1
fi
verdict PASS build "configured, built ${#targets[@]} targets with -j$jobs and installed to $prefix"

# ---- 4a: nccl-tests build, in the background -----------------------------------------------------------------------
nlog=$logs/nccl-tests.log
: >"$nlog"
ntests=$build/nccl
nccl_dir=$carry/nccl-tests
nccl_pid=
# PLEXUS_GPU_CHECK_SKIP: parts to leave out, e.g. "nccl-tests torch" on a rerun where they passed before.
skipped_part() { [[ " ${PLEXUS_GPU_CHECK_SKIP:-} " == *" $1 "* ]]; }
if skipped_part nccl-tests; then
  verdict SKIP nccl-tests "left out (PLEXUS_GPU_CHECK_SKIP)"
elif [[ -f $nccl_dir/src/Makefile ]]; then
  (CUDA_HOME=$cuda_home phase "$nlog" 300 nice tests/tools/test_nccl_tests.sh "$build" "$root" \
     --nccl-tests "$nccl_dir" --out "$ntests" --jobs $((jobs / 2)) --keep-going; echo "BUILD-STATUS $?" >>"$nlog") &
  nccl_pid=$!
fi

# ---- 2: ctest -L gpu -------------------------------------------------------------------------------------------------
clog=$logs/ctest.log
: >"$clog"
# PLEXUS_GPU_CHECK_CTEST_ARGS: more ctest arguments (e.g. -E to leave out what passed before).
read -r -a ctest_extra <<<"${PLEXUS_GPU_CHECK_CTEST_ARGS:-}"
phase "$clog" "${PLEXUS_GPU_CHECK_CTEST_SECONDS:-240}" ctest --test-dir "$build" -L gpu -j 4 -V --timeout 600 "${ctest_extra[@]}"
rc=$?
# The syncprobe's report (which CUDA calls wait for a running kernel) goes to the summary as it is.
grep -E "SYNCPROBE|module loading mode" "$clog" | sed -E 's/^[0-9]+: //' | while IFS= read -r line; do say "INFO $line"; done
counts=$(grep -E "tests passed|tests failed" "$clog" | tail -1)
skipped=$(grep -cE "\*\*\*Skipped" "$clog")
if ((rc == 0)) && [[ $counts == *"out of $skipped" ]]; then
  verdict SKIP "ctest -L gpu" "every test skipped (no usable CUDA device): $(grep -m1 'SKIPPED:' "$clog")"
elif ((rc == 0)); then
  verdict PASS "ctest -L gpu" "${counts:-?}; ${skipped} skipped $(grep -E '^\s+[0-9]+ - gpu\..*\(Skipped\)' "$clog" | sed -E 's/.*(gpu\.[^ ]+).*/\1/' | tr '\n' ' ')"
else
  verdict FAIL "ctest -L gpu" "$(why $rc): ${counts:-no summary}; not passed: $(grep -E '^\s+[0-9]+ - gpu\.' "$clog" | grep -v '(Skipped)' | sed -E 's/.*(gpu\.[^ ]+ \([^)]*\)).*/\1/' | tr '\n' ' ')(ctest.log)"
fi

# ---- 2b: net-ib on the machine's HCAs (issue 14), if it has any ---------------------------------------------------------
if [[ ! -f $build/lib/plexus/libnccl-net-ib.so ]]; then
  verdict SKIP net-ib "not built (no <infiniband/verbs.h>: scripts/gpu-prepare.sh carries it)"
elif ! ls /sys/class/infiniband/* >/dev/null 2>&1; then
  verdict SKIP net-ib "no RDMA device on this machine (/sys/class/infiniband is empty)"
else
  ilog=$logs/net-ib.log
  phase "$ilog" 120 env NCCL_SOCKET_IFNAME=lo "$build/bin/plexus-net-check" "$build/lib/plexus/libnccl-net-ib.so" \
    -e 64M -t 10 --skip-without-device
  rc=$?
  verdict "$( ((rc == 0)) && echo PASS || ( ((rc == 77)) && echo SKIP || echo FAIL ))" net-ib \
    "plexus-net-check: $(grep -E '^# [0-9]+ passed' "$ilog" | tail -1) (net-ib.log)"
fi

# ---- 3: plexus-perf on the GPU ----------------------------------------------------------------------------------------
plog=$logs/perf.log
: >"$plog"
perf=$build/bin/plexus-perf
pargs=(all_reduce -b 8 -e 64M -f 4 -c 1)
perf_ok() {  # <log part> : the run checked its results on the CUDA backend
  grep -q "Plexus CUDA backend" "$1" && grep -q "Out of bounds values : 0 OK" "$1"
}
for t in 1 2 4; do
  part=$build/perf-t$t.log
  : >"$part"
  phase "$part" 60 env NCCL_SOCKET_IFNAME=lo "$perf" "${pargs[@]}" -t "$t"
  rc=$?
  cat "$part" >>"$plog"
  if ((rc == 0)) && perf_ok "$part"; then
    verdict PASS "plexus-perf -t $t" "$(grep 'Avg bus bandwidth' "$part" | sed 's/# *//')"
  else
    verdict FAIL "plexus-perf -t $t" "$(why $rc)$(perf_ok "$part" || echo ', no checked CUDA-backend result') (perf.log)"
  fi
done
for n in 2 4; do
  port=$((29400 + RANDOM % 400))
  pids=()
  for ((r = 0; r < n; r++)); do
    : >"$build/perf-p$n-$r.log"
    phase "$build/perf-p$n-$r.log" 90 env NCCL_SOCKET_IFNAME=lo NCCL_COMM_ID=127.0.0.1:$port PLEXUS_RANK=$r \
      PLEXUS_NRANKS=$n "$perf" "${pargs[@]}" &
    pids+=($!)
  done
  rcs=()
  for p in "${pids[@]}"; do
    wait "$p"
    rcs+=($?)
  done
  for ((r = 0; r < n; r++)); do
    echo "=== process $r of $n: exit ${rcs[$r]}" >>"$plog"
    cat "$build/perf-p$n-$r.log" >>"$plog"
  done
  if [[ " ${rcs[*]} " =~ ^( 0)+\ $ ]] && perf_ok "$build/perf-p$n-0.log"; then
    verdict PASS "plexus-perf $n processes" "$(grep 'Avg bus bandwidth' "$build/perf-p$n-0.log" | sed 's/# *//')"
  else
    verdict FAIL "plexus-perf $n processes" "exit statuses ${rcs[*]} (perf.log)"
  fi
done

# ---- 3b: speed: the kernels' memory bandwidth beside cudaMemcpy's, in the same run ------------------------------------
# 1 rank: AllReduce out of place is one reduce-copy kernel (read N, write N), like a copy of N: algbw / memcpy GB/s.
# 2 ranks on the one GPU, ring/Simple: each rank reads 2N and writes 2N (its input, the peer's slots, the output), so
# the GPU moves 8N while memcpy of N moves 2N: the kernels' share of the copy bandwidth is 4 * algbw / memcpy GB/s.
slog=$logs/speed.log
: >"$slog"
phase "$slog" 40 "$build/bin/cuda_memcpy_bw" 256M 0 20
memcpy_gbs=$(awk 'NF == 2 && $1 ~ /^[0-9]+$/ { print $2 }' "$slog" | tail -1)
for t in 1 2; do
  part=$build/speed-t$t.log
  : >"$part"
  phase "$part" 60 env NCCL_SOCKET_IFNAME=lo NCCL_PROTO=Simple "$perf" all_reduce -b 256M -e 256M -n 20 -w 5 -c 0 -t "$t"
  cat "$part" >>"$slog"
  algbw=$(awk '$1 ~ /^[0-9]+$/ && NF >= 8 { print $7 }' "$part" | tail -1)
  if [[ -z $memcpy_gbs || -z $algbw ]]; then
    verdict FAIL "speed -t $t" "no figure (memcpy '${memcpy_gbs}', algbw '${algbw}') (speed.log)"
    continue
  fi
  ratio=$(awk -v a="$algbw" -v m="$memcpy_gbs" -v t="$t" 'BEGIN { printf "%.2f", (t == 1 ? 1 : 4) * a / m }')
  msg="algbw $algbw GB/s at 256 MiB, cudaMemcpy D2D $memcpy_gbs GB/s: kernels at ${ratio} of the copy bandwidth"
  if awk -v r="$ratio" 'BEGIN { exit !(r >= 0.9) }'; then verdict PASS "speed -t $t" "$msg"; else verdict FAIL "speed -t $t" "$msg (goal 0.90)"; fi
done

# PLEXUS_GPU_CHECK_SWEEP: ';'-separated sets of knobs (e.g. "NCCL_MAX_NCHANNELS=32 NCCL_MIN_NCHANNELS=32;NCCL_NTHREADS=1024")
# under which the 2-rank figure is measured again, one INFO line each: data for choosing defaults.
IFS=';' read -r -a sweep <<<"${PLEXUS_GPU_CHECK_SWEEP:-}"
for knobs in "${sweep[@]}"; do
  [[ -n ${knobs// /} ]] || continue
  part=$build/sweep.log
  : >"$part"
  read -r -a kv <<<"$knobs"
  phase "$part" 30 env NCCL_SOCKET_IFNAME=lo NCCL_PROTO=Simple "${kv[@]}" "$perf" all_reduce -b 256M -e 256M -n 20 -w 5 \
    -c 0 -t 2
  cat "$part" >>"$slog"
  algbw=$(awk '$1 ~ /^[0-9]+$/ && NF >= 8 { print $7 }' "$part" | tail -1)
  say "INFO sweep -t 2 [$knobs]: algbw ${algbw:-?} GB/s at 256 MiB ($(awk -v a="${algbw:-0}" -v m="${memcpy_gbs:-1}" \
    'BEGIN { printf "%.2f", 4 * a / m }') of the copy bandwidth)"
done

# ---- 4b: nccl-tests ---------------------------------------------------------------------------------------------------
if skipped_part nccl-tests; then
  :
elif [[ -z $nccl_pid ]]; then
  verdict SKIP nccl-tests "no nccl-tests in .gpu-carry/ (scripts/gpu-prepare.sh copies ../shared/third-party/nccl-tests)"
else
  wait "$nccl_pid"
  st=$(sed -n 's/^BUILD-STATUS //p' "$nlog" | tail -1)
  built=$(find "$ntests/nccl-tests" -maxdepth 1 -name '*_perf' -type f 2>/dev/null | wc -l)
  if [[ $st != 0 ]]; then
    verdict FAIL "nccl-tests build" "$(why "${st:-1}"): $(grep -E '^FAIL|FAIL:' "$nlog" | head -4 | tr '\n' ' ') ($built built; nccl-tests.log)"
  else
    verdict PASS "nccl-tests build" "$(grep -E 'built in' "$nlog" | tail -1 | sed 's/test_nccl_tests: //'); every *_perf resolves its NCCL to the install's Plexus"
  fi
  if ((built > 0)); then
    for bin in "$ntests"/nccl-tests/*_perf; do
      name=$(basename "$bin")
      part=$build/$name.log
      : >"$part"
      phase "$part" 45 env LD_LIBRARY_PATH="$ntests/prefix/lib" NCCL_SOCKET_IFNAME=lo "$bin" -b 8 -e 64M -f 4 -g 1 -c 1
      rc=$?
      { echo "===== $name: exit $rc"; cat "$part"; } >>"$nlog"
      if ((rc == 0)) && grep -q "Out of bounds values : 0 OK" "$part"; then
        verdict PASS "$name" "$(grep 'Avg bus bandwidth' "$part" | sed 's/# *//')"
      else
        verdict FAIL "$name" "$(why $rc); $(grep -m1 -iE 'out of bounds|error|fail' "$part") (nccl-tests.log)"
      fi
    done
  fi
  # nccl-tests launches several processes only through MPI (src/common.cu sets its process count from MPI_Comm_size
  # under MPI_SUPPORT; with MPI=0 every process is a job of its own) and this machine has no MPI to build it with.
  verdict SKIP "all_reduce_perf 2 processes" "nccl-tests built with MPI=0 has no multi-process launch (no MPI here); plexus-perf covers 2 and 4 processes on one GPU"
fi

# ---- 5: PyTorch ---------------------------------------------------------------------------------------------------------
tlog=$logs/torch.log
: >"$tlog"
tout=$build/torch-verdicts.txt
: >"$tout"
if skipped_part torch; then
  verdict SKIP torch "left out (PLEXUS_GPU_CHECK_SKIP)"
  rc=0
else
  phase "$tout" 150 python3 scripts/gpu-check-torch.py "$prefix/lib" "$tlog"
  rc=$?
fi
cat "$tout" >>"$tlog"
while IFS= read -r line; do
  case $line in
    PASS* | FAIL* | SKIP*) verdict "${line%% *}" "$(echo "$line" | cut -d: -f1 | cut -d' ' -f2-)" "${line#*: }" ;;
    INFO*) say "$line" ;;
  esac
done < <(grep -E "^(PASS|FAIL|SKIP|INFO) " "$tout")
if ((rc != 0)) && ! grep -qE "^(PASS|FAIL|SKIP) torch" "$tout"; then
  verdict FAIL torch "$(why $rc) before any verdict (torch.log)"
fi

say "done in $(now) s; $( ((failed)) && echo 'FAILED' || echo 'all parts passed or skipped')"
echo "===== summary"
cat "$summary"
exit $failed
