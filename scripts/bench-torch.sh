#!/usr/bin/env bash
# torch.distributed on plexus beside gloo in one run: collectives 8 B .. 64 MiB (bench/torch_bench.py) with 2 and 4
# processes, busbw and the ratio plexus/gloo; the DDP example's step time on both; and the binding's overhead: the
# 1 MiB allreduce through torch beside plexus-perf's own time in the same minutes; and Open MPI's AlltoAll and Broadcast
# beside plexus-perf's at 16 and 64 MiB, with a copy probe, the memory-bound references for the large sizes.
#   scripts/bench-torch.sh [build dir, default build]        (SECONDS_PER_POINT=0.2 by default)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
py=${PLEXUS_TORCH_PYTHON:-/usr/bin/python3}
[[ -f $build/python/plexus_torch/__init__.py ]] || { echo "bench-torch: $build has no plexus_torch (see the configure output)"; exit 1; }
export NCCL_SOCKET_IFNAME=lo PYTHONPATH=$build/python OMP_NUM_THREADS=1
secs=${SECONDS_PER_POINT:-0.2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in 2 4; do
  for b in gloo plexus; do
    timeout 900 "$py" -m plexus_torch.launch --nproc-per-node $n --timeout 880 "$root/bench/torch_bench.py" --backend $b \
      --seconds "$secs" | grep '^{' >>"$tmp/points"
  done
done
"$py" - "$tmp/points" <<'PY'
import json, sys
pts = [json.loads(l) for l in open(sys.argv[1])]
key = lambda d: (d["world"], d["op"], d["bytes"])
gloo = {key(d): d for d in pts if d["backend"] == "gloo"}
print("%-5s %-15s %10s %12s %12s %10s %10s %8s" % ("procs", "op", "bytes", "plexus us", "gloo us", "plexus GB/s", "gloo GB/s",
                                                   "ratio"))
for d in pts:
    if d["backend"] != "plexus":
        continue
    g = gloo.get(key(d))
    print("%-5d %-15s %10d %12.1f %12s %10.3f %10s %8s" % (
        d["world"], d["op"], d["bytes"], d["us"], "%.1f" % g["us"] if g else "-", d["busbw"],
        "%.3f" % g["busbw"] if g else "-", "%.1fx" % (g["us"] / d["us"]) if g else "(none)"))
PY
echo
echo "DDP (examples/torch-ddp, 2 processes, 30 steps): step time"
for b in gloo plexus; do
  timeout 600 "$py" -m plexus_torch.launch --nproc-per-node 2 --timeout 580 "$root/examples/torch-ddp/train.py" \
    --backend $b --steps 30 | grep '^{' | "$py" -c 'import json,sys; d=json.loads(sys.stdin.read()); print("  %-7s %.2f ms per step, final loss %.6f" % (d["backend"], d["step_ms"], d["losses"][-1]))'
done
echo
echo "Binding overhead: AllReduce 1 MiB, 2 processes (three rounds, torch then plexus-perf in each: this machine's"
echo "speed drifts by 20% from one minute to the next)"
for round in 1 2 3; do
  timeout 300 "$py" -m plexus_torch.launch --nproc-per-node 2 --timeout 280 "$root/bench/torch_bench.py" \
    --backend plexus --ops allreduce --sizes 1048576 --seconds 1 | grep '^{' >"$tmp/torch1m.$round"
  port=$((20000 + RANDOM % 12000))
  for r in 0 1; do
    NCCL_COMM_ID=127.0.0.1:$port PLEXUS_RANK=$r PLEXUS_NRANKS=2 timeout 300 "$build/bin/plexus-perf" all_reduce -b 1M \
      -e 1M -n 2000 -w 200 -z 2 >"$tmp/perf.$round.$r" 2>&1 &
  done
  wait
done
"$py" - "$tmp" <<'PY'
import json, sys
ratios = []
for k in (1, 2, 3):
    t = json.loads(open("%s/torch1m.%d" % (sys.argv[1], k)).read())["us"]
    row = [l.split() for l in open("%s/perf.%d.0" % (sys.argv[1], k)) if l.strip().startswith("1048576")][0]
    p = float(row[9])  # in-place time (us): torch's all_reduce works in place
    ratios.append(t / p)
    print("  round %d: torch.distributed (plexus) %.1f us, plexus-perf in place %.1f us (-z 2: synchronized after "
          "each): overhead %.0f%%" % (k, t, p, (t / p - 1) * 100))
print("  median overhead %.0f%%" % ((sorted(ratios)[1] - 1) * 100))
PY
echo
# Where gloo is within a few times of the machine's limit, 5x gloo cannot be had: Open MPI's and plexus-perf's own
# AlltoAll and Broadcast at the large sizes, same processes, show that limit (the bytes every rank must copy through
# memory).
mpiRun() {  # mpiRun NP KIND OUT: bench/mpi_allreduce's KIND at 16 and 64 MiB
  timeout 300 mpirun --allow-run-as-root -np "$1" "$build/bin/mpi_allreduce" -C "$2" -b 16M -e 64M -f 4 -n 10 -w 2 \
    >"$3" 2>&1 || echo "  $2's run failed: $(tail -1 "$3")"
}
perfRun() {  # perfRun COLL OUTPREFIX: plexus-perf's COLL at 16 and 64 MiB, 2 processes (OUTPREFIX.0 is rank 0's)
  port=$((port + 1))
  for r in 0 1; do
    NCCL_COMM_ID=127.0.0.1:$port PLEXUS_RANK=$r PLEXUS_NRANKS=2 timeout 300 "$build/bin/plexus-perf" "$1" -b 16M \
      -e 64M -f 4 -n 10 -w 2 -c 0 >"$2.$r" 2>&1 &
  done
  wait
}
tableColumn() { awk -v c="$2" '$1 ~ /^[0-9]+$/ { print $1, $c }' "$1"; }  # size and column c of a table
echo "The memory-bound reference: AlltoAll, 2 processes, Open MPI (bench/mpi_allreduce) beside plexus-perf"
if command -v mpirun >/dev/null && [[ -x $build/bin/mpi_allreduce ]]; then
  mpiRun 2 alltoall "$tmp/mpi.a2a"
  perfRun alltoall "$tmp/perf.a2a"
  join <(tableColumn "$tmp/mpi.a2a" 6) <(tableColumn "$tmp/perf.a2a.0" 6) |
    awk '{ printf "  %9d B: Open MPI %9.1f us, plexus-perf %9.1f us\n", $1, $2, $3 }'
  # Between two processes a Broadcast moves every byte through memory once at least: the root's buffer read, the
  # receiver's written. One process copying the size does the same reads and writes on one core.
  echo "Broadcast, 2 processes, beside the copy bound (one process copies the size once: bench/mpi_allreduce -C copyprobe)"
  mpiRun 2 bcast "$tmp/mpi.bc"
  mpiRun 1 copyprobe "$tmp/copy"
  perfRun broadcast "$tmp/perf.bc"
  # plexus-perf's in-place time (column 10), as torch's broadcast runs in place.
  join <(tableColumn "$tmp/copy" 6) <(tableColumn "$tmp/mpi.bc" 6) | join - <(tableColumn "$tmp/perf.bc.0" 10) |
    awk '{ printf "  %9d B: copy bound %9.1f us, Open MPI %9.1f us, plexus-perf %9.1f us\n", $1, $2, $3, $4 }'
else
  echo "  (no mpirun or bench/mpi_allreduce in this build)"
fi
