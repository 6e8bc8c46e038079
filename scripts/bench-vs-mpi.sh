#!/usr/bin/env bash
# Side-by-side bus bandwidth of plexus-perf and Open MPI (bench/mpi_allreduce) for one collective,
# same rank count, same sizes, out-of-place.
#
#   scripts/bench-vs-mpi.sh [nranks=2] [collective=all_reduce]
#
# collective: all_reduce, all_gather, broadcast, reduce, reduce_scatter, alltoall.
# Environment: BUILD_DIR (./build), MINBYTES (8), MAXBYTES (64M), STEPFACTOR (2), ITERS (20), WARMUP (20: a
# process's first operations of a size touch the connection's slot pages for the first time, 8 slots, each touch a
# trap to this VM's hypervisor, about 5 us a page; 5 left 256 KiB at 0.16-0.42x of Open MPI, 1.2-2.5x after 100),
# SMALL_ITERS (1000) and SMALL_WARMUP (100) for the sizes up to SMALL_MAX (64K) unless ITERS is set (as OSU's
# benchmarks do: 20 operations of a few microseconds are over in less time than one of this VM's scheduler hiccups),
# CHECK (1: plexus-perf validates results), MPIRUN_ARGS (extra mpirun flags), REPEAT (1: runs each side this many
# times, alternating plexus and Open MPI, and compares the median times per size: a machine whose speed drifts
# from one minute to the next then weighs on both sides alike).
set -euo pipefail

nranks=${1:-2}
coll=${2:-all_reduce}
build=${BUILD_DIR:-./build}
minbytes=${MINBYTES:-8}
maxbytes=${MAXBYTES:-64M}
factor=${STEPFACTOR:-2}
iters=${ITERS:-20}
warmup=${WARMUP:-20}
smallIters=${SMALL_ITERS:-1000}
smallWarmup=${SMALL_WARMUP:-100}
smallMax=${SMALL_MAX:-64K}
check=${CHECK:-1}
repeat=${REPEAT:-1}

die() { echo "bench-vs-mpi: $*" >&2; exit 2; }

[[ $nranks =~ ^[1-9][0-9]*$ ]] || die "nranks must be a positive integer, not '$nranks'"
[[ $repeat =~ ^[1-9][0-9]?$ ]] || die "REPEAT must be an integer from 1 to 99, not '$repeat'"
case $coll in
  all_reduce) mpicoll=allreduce ;;
  all_gather) mpicoll=allgather ;;
  broadcast) mpicoll=bcast ;;
  reduce) mpicoll=reduce ;;
  reduce_scatter) mpicoll=reduce_scatter ;;
  alltoall) mpicoll=alltoall ;;
  *) die "no Open MPI counterpart for '$coll' (all_reduce, all_gather, broadcast, reduce, reduce_scatter, alltoall)" ;;
esac

perf=$build/bin/plexus-perf
mpibench=$build/bin/mpi_allreduce
[[ -x $perf ]] || die "$perf not found (build it, or set BUILD_DIR)"
[[ -x $mpibench ]] || die "$mpibench not found (it is built only when CMake finds MPI)"
command -v mpirun >/dev/null || die "mpirun not found"

# shellcheck disable=SC2206  # MPIRUN_ARGS is a list of words on purpose
mpirun=(mpirun --allow-run-as-root --oversubscribe -np "$nranks" ${MPIRUN_ARGS:-})
if ! "$perf" -h | grep -q "MPI: enabled"; then
  # plexus-perf without MPI: its processes meet at rank 0's bootstrap address instead.
  export NCCL_COMM_ID=${NCCL_COMM_ID:-127.0.0.1:$((20000 + RANDOM % 12000))}
  mpirun+=(-x NCCL_COMM_ID)
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

bytes() {  # 64K -> 65536 (the suffixes plexus-perf takes)
  [[ $1 =~ ^([0-9]+)([KkMmGg]?)$ ]] || die "not a size: '$1'"
  local n=${BASH_REMATCH[1]}
  case ${BASH_REMATCH[2]} in K | k) n=$((n << 10)) ;; M | m) n=$((n << 20)) ;; G | g) n=$((n << 30)) ;; esac
  echo "$n"
}
[[ $factor =~ ^([2-9]|[1-9][0-9]+)$ ]] || die "STEPFACTOR must be an integer of at least 2, not '$factor'"
# The small sizes run with many iterations, in a run of their own; the whole sequence with ITERS, whose rows beyond
# them are kept (so each large size follows the smaller ones in its process, as in a single run: this VM makes a
# process's first touch of a page cost about 5 us, and the smaller sizes' operations take that for the larger ones).
# One assignment each: under set -e a failed $(bytes ...) then ends the script, not only its subshell.
lo=$(bytes "$minbytes")
hi=$(bytes "$maxbytes")
cut=$(bytes "$smallMax")
((lo >= 1)) || die "MINBYTES must be at least 1, not '$minbytes'"
last=0
if [[ -z ${ITERS:-} ]] && ((lo <= cut)); then
  last=$lo
  while ((last * factor <= hi && last * factor <= cut)); do last=$((last * factor)); done
fi
runs=""
((repeat == 1)) || runs=", median of $repeat alternating runs each"
what="$iters iters"
((last > 0)) && what="$smallIters iters up to $smallMax ($smallWarmup warm-up), $iters beyond"
echo "# plexus-perf $coll vs Open MPI $mpicoll: $nranks ranks, float, ${minbytes}..${maxbytes} x$factor, $what$runs"
all=(-b "$lo" -e "$hi" -f "$factor" -n "$iters" -w "$warmup")
small=(-b "$lo" -e "$last" -f "$factor" -n "$smallIters" -w "$smallWarmup")
# Runs one side (plexus or mpi) into $tmp/<side>.<k>.txt: the small sizes' rows, then the rest of the whole run's.
side() {
  local name=$1 k=$2
  shift 2
  if ((last > 0)) && ! "${mpirun[@]}" "$@" "${small[@]}" >"$tmp/$name.$k.small.txt" 2>&1; then
    cat "$tmp/$name.$k.small.txt" >&2
    die "$name run failed"
  fi
  if ! "${mpirun[@]}" "$@" "${all[@]}" >"$tmp/$name.$k.all.txt" 2>&1; then
    cat "$tmp/$name.$k.all.txt" >&2
    die "$name run failed"
  fi
  { ((last == 0)) || cat "$tmp/$name.$k.small.txt"
    awk -v last="$last" '/^#/ || NF < 8 || $1 !~ /^[0-9]+$/ || $1 + 0 > last + 0' "$tmp/$name.$k.all.txt"; } >"$tmp/$name.$k.txt"
}
for ((k = 1; k <= repeat; k++)); do
  side plexus "$k" "$perf" "$coll" -c "$check"
  side mpi "$k" "$mpibench" -C "$mpicoll"
done

# Table rows only: size in $1, out-of-place time in $6, busbw in $8. Every run walks the same sizes, so rows pair up
# by position. Per size, the run of median time stands for each side (its busbw with it). ratio = plexus busbw /
# Open MPI busbw = MPI time / plexus time (the times keep more digits than the printed bandwidths).
rows() { awk '!/^#/ && NF >= 8 && $1 ~ /^[0-9]+$/ { print $1, $6, $8 }' "$1"; }
median() {  # the runs' rows of one side -> per size: size, median time, busbw of that run
  for ((k = 1; k <= repeat; k++)); do rows "$tmp/$1.$k.txt" | awk '{ print NR, $0 }'; done |
    sort -k1,1n -k3,3g | awk -v r="$repeat" '{ n[$1]++; if (n[$1] == int((r + 1) / 2)) print $2, $3, $4 }'
}
median plexus >"$tmp/plexus.txt"
median mpi >"$tmp/mpi.txt"
paste -d' ' "$tmp/plexus.txt" "$tmp/mpi.txt" | awk -v min="$minbytes" '
  BEGIN { printf "# %10s  %14s  %14s  %8s\n", "size (B)", "plexus busbw", "open-mpi busbw", "ratio"
          printf "# %10s  %14s  %14s  %8s\n", "", "(GB/s)", "(GB/s)", "" }
  NF == 6 {
    if ($1 != $4) { printf "size mismatch: %s vs %s\n", $1, $4 > "/dev/stderr"; exit 1 }
    ratio = ($2 > 0 && $5 > 0) ? sprintf("%.2f", $5 / $2) : "-"
    printf "%12s  %14s  %14s  %8s\n", $1, $3, $6, ratio
    if (!first++) { t0 = $1; tp = $2; tm = $5 }
  }
  END { if (first) printf "# time at %s B: plexus %s us, open-mpi %s us\n", t0, tp, tm }'

# The memory bound, in the same run: every rank reduces two arrays of the largest size into a third at once (the
# reads and the write an AllReduce of 2 ranks cannot avoid). A host collective's busbw cannot pass its rate.
if "${mpirun[@]}" "$mpibench" -C memprobe -b "$maxbytes" -e "$maxbytes" -n "$iters" -w "$warmup" >"$tmp/probe.txt" 2>&1; then
  probe=$(rows "$tmp/probe.txt" | awk 'NR == 1 { print $3 }')
  ours=$(awk 'END { print $3 }' "$tmp/plexus.txt")
  awk -v p="$probe" -v o="$ours" -v s="$maxbytes" 'BEGIN {
    printf "# memory bound (each rank reduces two %s arrays into a third, all at once): %s GB/s; plexus busbw at %s: %s GB/s (%.0f%% of it)\n", s, p, s, o, (p > 0 ? 100 * o / p : 0) }'
else
  echo "# memory probe failed:" >&2
  cat "$tmp/probe.txt" >&2
fi

wrong=$(cat "$tmp"/plexus.[0-9]*.small.txt "$tmp"/plexus.[0-9]*.all.txt 2>/dev/null | awk '/Out of bounds values/ { n += $(NF-1) } END { print n + 0 }')
[[ -z $wrong || $wrong == 0 ]] || echo "# WARNING: plexus-perf reported $wrong wrong results" >&2
