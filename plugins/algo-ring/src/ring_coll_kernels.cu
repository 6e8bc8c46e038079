// CUDA kernels of Broadcast, Reduce, AllGather and ReduceScatter: one kernel per (datatype, operator)
// that switches on the work's func, so that four collectives cost one set of instances. Broadcast
// and AllGather only move bytes: every datatype runs them in the instance of its size's unsigned
// type with FuncSum (ring_common.h, isCopyInstance); the others never compile them.
#include <plexus/algo_v1.h>

#include "ring_collectives.h"
#include "ring_kernels.h"

namespace {

template <typename T, typename F>
__global__ void ringCollKernel(plexusDevComm_v1_t* comm, const plexusDevWork_v1_t* work) {
  plexusDevChannel_v1_t* ch = &comm->channels[work->channelLo + blockIdx.x];
  plexus::ring::runCollective<T, F>(comm, ch, work, (int)threadIdx.x, (int)blockDim.x);
}

struct PickCollKernel {
  int func;
  const void* kernel;
  template <typename T, typename F>
  void operator()() {
    using plexus::ring::CopyType;
    if (plexus::ring::isCopyFunc(func))
      kernel = (const void*)ringCollKernel<CopyType<T>, plexus::dev::FuncSum<CopyType<T>>>;
    else if (func == ncclFuncReduce || func == ncclFuncReduceScatter)
      kernel = (const void*)ringCollKernel<T, F>;
  }
};

}  // namespace

namespace plexus::ring {

const void* collCudaKernel(const plexusDevWork_v1_t* work) {
  PickCollKernel pick{work->func, nullptr};
  if (!plexus::dev::dispatchTypeOp(work->datatype, work->redop, pick)) return nullptr;
  return pick.kernel;
}

}  // namespace plexus::ring
