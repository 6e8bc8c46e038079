#!/usr/bin/env bash
# The timeline a user asks plexus-perf for (--trace): 4 ranks as threads, AllReduce at three sizes, results checked;
# one Chrome trace file per rank, checked by check_trace.py (parses, lanes, nesting, durations, NCCL's names).
#   test_trace.sh <plexus-perf>
set -euo pipefail
perf=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
NCCL_DEBUG=WARN timeout 120 "$perf" all_reduce -b 1K -e 1M -f 32 -n 3 -w 1 -c 1 -t 4 --trace "$tmp/t" >"$tmp/log" 2>&1 ||
  { cat "$tmp/log"; echo "test_trace: plexus-perf failed"; exit 1; }
grep -q "Out of bounds values : 0 OK" "$tmp/log" || { cat "$tmp/log"; echo "test_trace: results not checked"; exit 1; }
python3 "$here/check_trace.py" 4 AllReduce "$tmp"/t-*-rank*.json
