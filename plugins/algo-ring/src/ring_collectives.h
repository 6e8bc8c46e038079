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

/* Broadcast, Reduce, AllGather, ReduceScatter for (T, F). The non-reducing two exist only in the
 * instance isCopyInstance<T, F> (callers map every datatype there by its size). False when the
 * instance does not serve the work's func. */
template <typename T, typename F>
PLEXUS_HD bool runCollective(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, const plexusDevWork_v1_t* w,
                             int tid, int nthreads) {
  switch (w->func) {
    case ncclFuncReduce: runReduce<T, F>(comm, ch, w, tid, nthreads); return true;
    case ncclFuncReduceScatter: runReduceScatter<T, F>(comm, ch, w, tid, nthreads); return true;
    case ncclFuncBroadcast:
      if constexpr (isCopyInstance<T, F>) {
        runBroadcast<T>(comm, ch, w, tid, nthreads);
        return true;
      }
      return false;
    case ncclFuncAllGather:
      if constexpr (isCopyInstance<T, F>) {
        runAllGather<T>(comm, ch, w, tid, nthreads);
        return true;
      }
      return false;
  }
  return false;
}

/* Runs one work item for whatever (datatype, redop) it carries, on the host. */
struct Runner {
  const plexusDevComm_v1_t* comm;
  plexusDevChannel_v1_t* ch;
  const plexusDevWork_v1_t* work;
  int tid, nthreads;
  bool known;
  template <typename T, typename F>
  PLEXUS_HD_OUTLINE void operator()() {
    if (work->func == ncclFuncAllReduce) {
      runAllReduce<T, F>(comm, ch, work, tid, nthreads);
    } else if (isCopyFunc(work->func)) {
      using C = CopyType<T>;
      known = runCollective<C, FuncSum<C>>(comm, ch, work, tid, nthreads);
    } else {
      known = runCollective<T, F>(comm, ch, work, tid, nthreads);
    }
  }
};

}  // namespace plexus::ring
