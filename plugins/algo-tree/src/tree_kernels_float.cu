// algo-tree's reducing CUDA kernels of the floating-point types (see tree_kernels.cu).
#include "tree_kernels.cuh"

const void* plexus::tree::floatKernel(const plexusDevWork_v1_t* work) {
  return dev::floatKernelOf<ReduceRunner>(work);
}
