// plexus/cuda/driver.h first, cuda.h after (a plugin that includes both in this order): cuda.h's macros
// (cuMemAlloc -> cuMemAlloc_v2) must not reach the Driver's members, and its types must mix with ours.
#include <cuda.h>
#include <plexus/cuda/driver.h>

namespace pc = plexus::cuda;

// Compiled, never run: it only has to build.
[[maybe_unused]] static pc::CUresult orderCheck(const pc::Driver& d, CUstream stream) {
  CUdeviceptr p = 0;
  if (pc::CUresult r = d.memAlloc(&p, 64); r != CUDA_SUCCESS) return r;
  void* host = nullptr;
  // After cuda.h, the names it spells as macros are its macros (same values): written unqualified.
  if (pc::CUresult r = d.memHostAlloc(&host, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
      r != CUDA_SUCCESS)
    return r;
  pc::CUstreamCaptureStatus status = pc::CU_STREAM_CAPTURE_STATUS_NONE;
  return d.streamGetCaptureInfo(stream, &status, nullptr, nullptr, nullptr, nullptr) + d.memFree(p) +
         d.eventDestroy(nullptr) + d.streamDestroy(stream);
}
