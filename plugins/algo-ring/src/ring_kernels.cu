// algo-ring's CUDA kernels of the integer types, and the plugin's getCudaKernel. The floating-point types'
// instances compile in ring_kernels_float.cu, in parallel with these.
#include "ring_kernels.cuh"

namespace {

bool pickIntKernel(const plexusDevWork_v1_t* w, const void** stub) {
  plexus::ring::PickKernel pick{w->func, nullptr};
  bool ok = false;
  switch (w->datatype) {
    case ncclInt8: ok = plexus::dev::dispatchOp<int8_t>(w->redop, pick); break;
    case ncclUint8: ok = plexus::dev::dispatchOp<uint8_t>(w->redop, pick); break;
    case ncclInt32: ok = plexus::dev::dispatchOp<int32_t>(w->redop, pick); break;
    case ncclUint32: ok = plexus::dev::dispatchOp<uint32_t>(w->redop, pick); break;
    case ncclInt64: ok = plexus::dev::dispatchOp<int64_t>(w->redop, pick); break;
    case ncclUint64: ok = plexus::dev::dispatchOp<uint64_t>(w->redop, pick); break;
    default: return false;
  }
  *stub = pick.stub;
  return ok && pick.stub;
}

}  // namespace

extern "C" ncclResult_t plexusRingGetCudaKernel(void*, const plexusDevWork_v1_t* work, void** function) {
  const void* stub = nullptr;
  if (!pickIntKernel(work, &stub) && !plexus::ring::pickFloatKernel(work, &stub)) return ncclInvalidArgument;
  // The kernel as a function of the calling thread's current context (this plugin's own CUDA runtime is static).
  cudaFunction_t fn = nullptr;
  if (cudaGetFuncBySymbol(&fn, stub) != cudaSuccess) return ncclUnhandledCudaError;
  *function = (void*)fn;
  return ncclSuccess;
}
