// algo-p2p's CUDA kernel: the host backend's step loop (plexus/device/p2p.h), its state in shared memory. One kernel
// serves every datatype: point-to-point only moves bytes.
#include <plexus/algo_v2.h>
#include <plexus/device/p2p.h>

namespace {

__global__ void __launch_bounds__(1024) p2pKernel(const __grid_constant__ plexusDevKernelArgs_v1_t args) {
  __shared__ plexus::dev::P2pState state;
  const int channel = plexus::dev::kernelChannel(&args, blockIdx.x);
  if (channel >= 0) plexus::dev::runP2p(&args, channel, (int)threadIdx.x, (int)blockDim.x, &state);
}

}  // namespace

extern "C" ncclResult_t plexusP2pGetCudaKernel(void*, const plexusDevWork_v1_t*, void** function) {
  cudaFunction_t fn = nullptr;
  if (cudaGetFuncBySymbol(&fn, (const void*)p2pKernel) != cudaSuccess) return ncclUnhandledCudaError;
  *function = (void*)fn;
  return ncclSuccess;
}
