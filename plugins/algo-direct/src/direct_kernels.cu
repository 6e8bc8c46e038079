// algo-direct's CUDA kernels of the integer types and of the collectives that only move bytes, and the plugin's
// getCudaKernel. The floating-point types' reducing kernels compile in direct_kernels_float.cu, in parallel.
#include "direct_kernels.cuh"

extern "C" ncclResult_t plexusDirectGetCudaKernel(void*, const plexusDevWork_v1_t* work, void** function) {
  using namespace plexus::direct;
  const void* stub = nullptr;
  if (isCopyFunc(work->func)) stub = plexus::dev::copyKernelOf<CopyRunner>(work->datatype);
  else if (!(stub = plexus::dev::intKernelOf<ReduceRunner>(work))) stub = floatKernel(work);
  return plexus::dev::kernelFunction(stub, function);
}
