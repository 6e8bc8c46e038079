/*
 * CUDA only: an algorithm plugin's kernels and how getCudaKernel finds them. A plugin's step loops run in
 * two kinds of kernel, each over a launch's works (runLaunchDevice):
 *   reducing kernels, one per (T, F) of the 12 datatypes and their operators, for the collectives that
 *     reduce (Runner = the plugin's runner of those);
 *   copy kernels, one per element size (uint8/16/32/64_t), for the collectives that only move bytes
 *     (Broadcast, AllGather), whatever the datatype.
 * The protocol (Simple, LL, LL128) is the work's, chosen inside the kernel (ProtocolPrims). A plugin splits
 * its instances over translation units that nvcc compiles in parallel, each instance once: one with the
 * integer kernels (intKernelOf), the copy kernels (copyKernelOf) and getCudaKernel, one with the
 * floating-point kernels (floatKernelOf). The primitives and step loops are out-of-line functions
 * (PLEXUS_HD_OUTLINE), compiled once per (T, F) per translation unit rather than inlined into every caller.
 */
#pragma once

#include <cuda_runtime_api.h>

#include "kernel.h"
#include "work.h"

namespace plexus::dev {

template <typename Runner, typename T, typename F>
__global__ void __launch_bounds__(1024) collKernel(const __grid_constant__ plexusDevKernelArgs_v1_t args) {
  runLaunchDevice<Runner, T, F>(args);
}

/* Host side: the stub of Runner's kernel for T and a run-time operator. */
template <typename Runner>
struct KernelOfOp {
  const void* stub = nullptr;
  template <typename T, typename F>
  void operator()() {
    stub = (const void*)collKernel<Runner, T, F>;
  }
};

template <typename Runner, typename T>
inline const void* reduceKernelOf(int redop) {
  KernelOfOp<Runner> k;
  return dispatchOp<T>(redop, k) ? k.stub : nullptr;
}

/* The copy kernel of a datatype's element size (nullptr for an unknown datatype). */
template <typename Runner>
inline const void* copyKernelOf(int datatype) {
  switch (datatype) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return (const void*)collKernel<Runner, uint8_t, FuncSum<uint8_t>>;
    case ncclFloat16:
    case ncclBfloat16: return (const void*)collKernel<Runner, uint16_t, FuncSum<uint16_t>>;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return (const void*)collKernel<Runner, uint32_t, FuncSum<uint32_t>>;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return (const void*)collKernel<Runner, uint64_t, FuncSum<uint64_t>>;
  }
  return nullptr;
}

/* The reducing kernel of an integer work (nullptr for another datatype or an unknown operator). */
template <typename Runner>
inline const void* intKernelOf(const plexusDevWork_v1_t* w) {
  switch (w->datatype) {
    case ncclInt8: return reduceKernelOf<Runner, int8_t>(w->redop);
    case ncclUint8: return reduceKernelOf<Runner, uint8_t>(w->redop);
    case ncclInt32: return reduceKernelOf<Runner, int32_t>(w->redop);
    case ncclUint32: return reduceKernelOf<Runner, uint32_t>(w->redop);
    case ncclInt64: return reduceKernelOf<Runner, int64_t>(w->redop);
    case ncclUint64: return reduceKernelOf<Runner, uint64_t>(w->redop);
  }
  return nullptr;
}

/* The reducing kernel of a floating-point work (nullptr for another datatype or an unknown operator). */
template <typename Runner>
inline const void* floatKernelOf(const plexusDevWork_v1_t* w) {
  switch (w->datatype) {
    case ncclFloat16: return reduceKernelOf<Runner, half_t>(w->redop);
    case ncclFloat32: return reduceKernelOf<Runner, float>(w->redop);
    case ncclFloat64: return reduceKernelOf<Runner, double>(w->redop);
    case ncclBfloat16: return reduceKernelOf<Runner, bf16_t>(w->redop);
    case ncclFloat8e4m3: return reduceKernelOf<Runner, fp8e4m3_t>(w->redop);
    case ncclFloat8e5m2: return reduceKernelOf<Runner, fp8e5m2_t>(w->redop);
  }
  return nullptr;
}

/* The kernel of a host stub as a function of the calling thread's current context (each plugin's own CUDA
 * runtime is static). */
inline ncclResult_t kernelFunction(const void* stub, void** function) {
  if (!stub) return ncclInvalidArgument;
  cudaFunction_t fn = nullptr;
  if (cudaGetFuncBySymbol(&fn, stub) != cudaSuccess) return ncclUnhandledCudaError;
  *function = (void*)fn;
  return ncclSuccess;
}

}  // namespace plexus::dev
