// algo-ring's CUDA kernels: the very step loops the host backend runs, compiled for the GPU. AllReduce
// has one kernel per (datatype, operator) so that each stays small; the other collectives' kernels
// are in ring_coll_kernels.cu (a second translation unit, so that the two compile in parallel).
#include <plexus/algo_v1.h>

#include "ring_allreduce.h"
#include "ring_kernels.h"

namespace {

template <typename T, typename F>
__global__ void ringAllReduceKernel(plexusDevComm_v1_t* comm, const plexusDevWork_v1_t* work) {
  plexusDevChannel_v1_t* ch = &comm->channels[work->channelLo + blockIdx.x];
  plexus::ring::runAllReduce<T, F>(comm, ch, work, (int)threadIdx.x, (int)blockDim.x);
}

struct PickKernel {
  const void* kernel;
  template <typename T, typename F>
  void operator()() {
    kernel = (const void*)ringAllReduceKernel<T, F>;
  }
};

}  // namespace

extern "C" ncclResult_t plexusRingGetCudaKernel(const plexusDevWork_v1_t* work, const void** kernel) {
  if (work->proto != PLEXUS_PROTO_SIMPLE) return ncclInvalidArgument;  // LL kernels are host-only so far
  if (work->func != ncclFuncAllReduce) {
    const void* k = plexus::ring::collCudaKernel(work);
    if (!k) return ncclInvalidArgument;
    *kernel = k;
    return ncclSuccess;
  }
  PickKernel pick{nullptr};
  if (!plexus::dev::dispatchTypeOp(work->datatype, work->redop, pick)) return ncclInvalidArgument;
  *kernel = pick.kernel;
  return ncclSuccess;
}
