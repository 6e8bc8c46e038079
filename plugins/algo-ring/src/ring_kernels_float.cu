// algo-ring's CUDA kernels of the floating-point types (see ring_kernels.cu).
#include "ring_kernels.cuh"

namespace plexus::ring {

bool pickFloatKernel(const plexusDevWork_v1_t* w, const void** stub) {
  PickKernel pick{w->func, nullptr};
  bool ok = false;
  switch (w->datatype) {
    case ncclFloat16: ok = dev::dispatchOp<dev::half_t>(w->redop, pick); break;
    case ncclFloat32: ok = dev::dispatchOp<float>(w->redop, pick); break;
    case ncclFloat64: ok = dev::dispatchOp<double>(w->redop, pick); break;
    case ncclBfloat16: ok = dev::dispatchOp<dev::bf16_t>(w->redop, pick); break;
    case ncclFloat8e4m3: ok = dev::dispatchOp<dev::fp8e4m3_t>(w->redop, pick); break;
    case ncclFloat8e5m2: ok = dev::dispatchOp<dev::fp8e5m2_t>(w->redop, pick); break;
    default: return false;
  }
  *stub = pick.stub;
  return ok && pick.stub;
}

}  // namespace plexus::ring
