/*
 * Dispatch of a work item to the ring step loop of its collective, shared by the host entry
 * (ring.cc) and the CUDA kernels (ring_kernels*.cu).
 */
#pragma once

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

/* Runs one work item for whatever (datatype, redop) it carries: the host backend's runner. */
struct Runner {
  const plexusDevComm_v1_t* comm;
  plexusDevChannel_v1_t* ch;
  const plexusDevWork_v1_t* work;
  int tid, nthreads;
  bool known;
  template <typename T, typename F>
  PLEXUS_HD_OUTLINE void operator()() {
    if (isCopyFunc(work->func)) known = runCopying<CopyType<T>>(comm, ch, work, tid, nthreads);
    else known = runReducing<T, F>(comm, ch, work, tid, nthreads);
  }
};

/* The CUDA kernels' runners: a reducing kernel of (T, F) and a copy kernel of element type T
 * (cuda_kernels.cuh); each instantiates only its own collectives. */
struct ReduceRunner {
  const plexusDevComm_v1_t* comm;
  plexusDevChannel_v1_t* ch;
  const plexusDevWork_v1_t* work;
  int tid, nthreads;
  bool known;
  template <typename T, typename F>
  PLEXUS_HD void operator()() {
    known = runReducing<T, F>(comm, ch, work, tid, nthreads);
  }
};
struct CopyRunner {
  const plexusDevComm_v1_t* comm;
  plexusDevChannel_v1_t* ch;
  const plexusDevWork_v1_t* work;
  int tid, nthreads;
  bool known;
  template <typename T, typename F>
  PLEXUS_HD void operator()() {
    known = runCopying<T>(comm, ch, work, tid, nthreads);
  }
};

}  // namespace plexus::ring
