// algo-direct's reducing CUDA kernels of the floating-point types (see direct_kernels.cu).
#include "direct_kernels.cuh"

const void* plexus::direct::floatKernel(const plexusDevWork_v1_t* work) {
  return dev::floatKernelOf<ReduceRunner>(work);
}
