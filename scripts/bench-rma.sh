#!/usr/bin/env bash
# One-sided put+signal ping-pong between 2 ranks, Plexus (ncclPutSignal / ncclWaitSignal) beside Open MPI (MPI_Put +
# MPI_Win_flush + a zero-byte MPI_Send) in one run: bench/rma_pingpong.cc.
#
#   scripts/bench-rma.sh [node|nodes] [maxbytes=16M]
#
# node: both ranks on one node (Plexus writes the peer's ncclMemAlloc window directly; MPI its shared-memory path).
# nodes: two "nodes" of one machine over TCP on loopback (PLEXUS_HOSTID differs per rank: Plexus puts up to
# PLEXUS_RMA_INLINE_BYTES (4 KiB) ride with their header on the one-sided socket, larger ones go through the net
# transport, here the built-in socket net; Open MPI is held to TCP: --mca pml ob1 --mca btl tcp,self --mca osc pt2pt).
# Environment: BUILD_DIR (./build), PLEXUS_RMA_INLINE_BYTES.
set -euo pipefail
mode=${1:-node}
max=${2:-16M}
build=${BUILD_DIR:-./build}
bin=$build/bin/rma_pingpong
[[ -x $bin ]] || { echo "bench-rma: $bin not found (built where CMake finds MPI; set BUILD_DIR)" >&2; exit 2; }
case $max in *K) max=$((${max%K} << 10)) ;; *M) max=$((${max%M} << 20)) ;; esac
export NCCL_SOCKET_IFNAME=lo OMPI_MCA_btl_tcp_if_include=lo OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
case $mode in
  node) exec timeout 600 mpirun -np 2 --bind-to none "$bin" "$max" ;;
  nodes)
    exec timeout 600 mpirun -np 2 --bind-to none --mca pml ob1 --mca btl tcp,self --mca osc pt2pt \
      bash -c 'PLEXUS_HOSTID=bench-node$OMPI_COMM_WORLD_RANK exec "$0" "$@"' "$bin" "$max" ;;
  *) echo "bench-rma: mode is node or nodes, not '$mode'" >&2; exit 2 ;;
esac
