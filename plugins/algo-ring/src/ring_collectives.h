/*
 * Dispatch of a work item to the ring step loop of its collective, shared by the host entry
 * (ring.cc) and the CUDA kernels (ring_kernels*.cu).
 */
#pragma once

#include <plexus/device/kernel.h>

#include "ring_allgather.h"
#include "ring_allreduce.h"
#include "ring_broadcast.h"
#include "ring_common.h"
#include "ring_reduce.h"
#include "ring_reducescatter.h"

namespace plexus::ring {

PLEXUS_HD bool isCopyFunc(int func) { return func == ncclFuncBroadcast || func == ncclFuncAllGather; }

/* The collectives that reduce (AllReduce, Reduce, ReduceScatter) for (T, F); false for another func. */
template <typename T, typename F>
PLEXUS_HD_OUTLINE bool runReducing(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch,
                                   const plexusDevWork_v1_t* w, int tid, int nthreads) {
  switch (w->func) {
    case ncclFuncAllReduce: runAllReduce<T, F>(comm, ch, w, tid, nthreads); return true;
    case ncclFuncReduce: runReduce<T, F>(comm, ch, w, tid, nthreads); return true;
    case ncclFuncReduceScatter: runReduceScatter<T, F>(comm, ch, w, tid, nthreads); return true;
  }
  return false;
}

/* The collectives that only move bytes (Broadcast, AllGather), on C, one of CopyType's unsigned types
 * (callers map every datatype there by its size); false for another func. */
template <typename C>
PLEXUS_HD_OUTLINE bool runCopying(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch,
                                  const plexusDevWork_v1_t* w, int tid, int nthreads) {
  switch (w->func) {
    case ncclFuncBroadcast: runBroadcast<C>(comm, ch, w, tid, nthreads); return true;
    case ncclFuncAllGather: runAllGather<C>(comm, ch, w, tid, nthreads); return true;
  }
  return false;
}

/* Its step loops, for the runners of plexus/device/kernel.h: the host backend's (Runner) and the CUDA kernels'
 * (ReduceRunner of (T, F), CopyRunner of an element type; each instantiates only its own collectives). */
struct Collectives {
  static PLEXUS_HD bool isCopy(int func) { return isCopyFunc(func); }
  template <typename T, typename F>
  static PLEXUS_HD bool reducing(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch,
                                 const plexusDevWork_v1_t* w, int tid, int nthreads) {
    return runReducing<T, F>(comm, ch, w, tid, nthreads);
  }
  template <typename C>
  static PLEXUS_HD bool copying(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch,
                                const plexusDevWork_v1_t* w, int tid, int nthreads) {
    return runCopying<C>(comm, ch, w, tid, nthreads);
  }
};
using Runner = dev::AlgoRunner<Collectives>;
using ReduceRunner = dev::AlgoReduceRunner<Collectives>;
using CopyRunner = dev::AlgoCopyRunner<Collectives>;

}  // namespace plexus::ring
