// algo-ring's reducing CUDA kernels of the floating-point types (see ring_kernels.cu).
#include "ring_kernels.cuh"

const void* plexus::ring::floatKernel(const plexusDevWork_v1_t* work) {
  return dev::floatKernelOf<ReduceRunner>(work);
}
