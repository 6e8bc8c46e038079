// algo-ring's CUDA kernel: the very step loops the host backend runs (ring_collectives.h), one kernel per
// (datatype, operator) that runs every work of its launch. Broadcast and AllGather only move bytes: they run in the
// instance of their element size's unsigned type with FuncSum, so four instances serve every datatype.
#pragma once

#include <plexus/algo_v2.h>
#include <plexus/device/kernel.h>

#include "ring_collectives.h"

namespace plexus::ring {

template <typename T, typename F>
__global__ void __launch_bounds__(1024) ringKernel(const __grid_constant__ plexusDevKernelArgs_v1_t args) {
  dev::runLaunchDevice<Runner, T, F>(args);
}

/* The kernel (host stub) that runs a work of func: the instance of (T, F), or of the copy type for Broadcast and
 * AllGather. */
struct PickKernel {
  int func;
  const void* stub;
  template <typename T, typename F>
  void operator()() {
    if (isCopyFunc(func)) stub = (const void*)ringKernel<CopyType<T>, dev::FuncSum<CopyType<T>>>;
    else stub = (const void*)ringKernel<T, F>;
  }
};

/* The floating-point types' kernels (ring_kernels_float.cu, compiled beside the integers'): false for another
 * datatype or an unknown operator. */
bool pickFloatKernel(const plexusDevWork_v1_t* work, const void** stub);

}  // namespace plexus::ring
