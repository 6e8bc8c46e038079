#!/usr/bin/env bash
# The main job: builds Plexus and runs plexus-perf AllReduce (float sum) on 4 host ranks (threads),
# 8 B to 64 MiB, checking every result. Extra arguments go to plexus-perf (e.g. -t 8, -d int32).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
exec "${BUILD_DIR:-build}/bin/plexus-perf" all_reduce -b 8 -e 64M -f 2 -t 4 -c 1 -n 20 -w 2 "$@"
