// Compiles algo-tree's step loops as CUDA device code (one instance per protocol and collective), so
// that nothing host-only creeps into them. No kernel here is launched yet.
#include <plexus/algo_v1.h>

#include "tree_collectives.h"

namespace {

template <typename T, typename F>
__global__ void treeCheckKernel(plexusDevComm_v1_t* comm, const plexusDevWork_v1_t* work) {
  plexusDevChannel_v1_t* ch = &comm->channels[work->channelLo + blockIdx.x];
  plexus::tree::runAllReduce<T, F>(comm, ch, work, (int)threadIdx.x, (int)blockDim.x);
  plexus::tree::runReduce<T, F>(comm, ch, work, (int)threadIdx.x, (int)blockDim.x);
  plexus::tree::runBroadcast<T>(comm, ch, work, (int)threadIdx.x, (int)blockDim.x);
}

using Sum = plexus::dev::FuncSum<uint32_t>;
template __global__ void treeCheckKernel<uint32_t, Sum>(
    plexusDevComm_v1_t*, const plexusDevWork_v1_t*);

}  // namespace
