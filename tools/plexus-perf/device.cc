// plexus-perf: host and CUDA memory and streams (see device.h).
#include "device.h"

#include <plexus/cuda/driver.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace perf {
namespace {

namespace cu = plexus::cuda;

[[noreturn]] void cudaFailed(const cu::Driver* d, const char* call, cu::CUresult r) {
  std::fprintf(stderr, "plexus-perf: %s\n", cu::failureMessage(d, call, r).c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

const cu::Driver* drv() {
  std::string error;
  const cu::Driver* d = cu::driver(&error);
  if (!d) {
    std::fprintf(stderr, "plexus-perf: the CUDA driver is not usable: %s\n", error.c_str());
    std::_Exit(1);
  }
  return d;
}

#define CU_OK(d, call, args)                          \
  do {                                                \
    cu::CUresult r_ = (d)->call args;                 \
    if (r_ != cu::CUDA_SUCCESS) cudaFailed(d, "cu" #call, r_); \
  } while (0)

// The primary context of each device, retained once for the life of the process.
cu::CUcontext contextOf(int device) {
  static std::mutex m;
  static std::vector<cu::CUcontext> contexts;
  std::lock_guard<std::mutex> lock(m);
  if (size_t(device) >= contexts.size()) contexts.resize(device + 1, nullptr);
  if (!contexts[device]) {
    const cu::Driver* d = drv();
    cu::CUdevice dev;
    CU_OK(d, deviceGet, (&dev, device));
    CU_OK(d, devicePrimaryCtxRetain, (&contexts[device], dev));
  }
  return contexts[device];
}

[[noreturn]] void hostFailed(const char* what, size_t bytes) {
  std::fprintf(stderr, "plexus-perf: out of memory allocating %zu bytes (%s)\n", bytes, what);
  std::_Exit(1);
}

}  // namespace

bool cudaPlanned(std::string* why) {
  const char* backend = std::getenv("PLEXUS_BACKEND");
  if (backend && std::strcmp(backend, "host") == 0) {
    *why = "PLEXUS_BACKEND=host";
    return false;
  }
  std::string error;
  const cu::Driver* d = cu::driver(&error);
  if (!d) {
    *why = error;
    return false;
  }
  int count = 0;
  if (cu::CUresult r = d->deviceGetCount(&count); r != cu::CUDA_SUCCESS || count == 0) {
    *why = r != cu::CUDA_SUCCESS ? cu::failureMessage(d, "cuDeviceGetCount", r) : "no CUDA device";
    return false;
  }
  *why = std::to_string(count) + " CUDA device(s), driver " + std::to_string(d->version / 1000) + "." +
         std::to_string(d->version % 1000 / 10);
  return true;
}

int cudaDeviceCount() {
  int count = 0;
  CU_OK(drv(), deviceGetCount, (&count));
  return count;
}

std::string cudaBusId(int device) {
  const cu::Driver* d = drv();
  cu::CUdevice dev;
  char id[32] = "";
  if (d->deviceGet(&dev, device) != cu::CUDA_SUCCESS || d->deviceGetPCIBusId(id, sizeof id, dev) != cu::CUDA_SUCCESS)
    return "?";
  for (char* c = id; *c; ++c) *c = char(std::tolower(*c));
  return id;
}

void DeviceMem::makeCurrent() const {
  if (!cuda) return;
  const cu::Driver* d = drv();
  cu::CUcontext want = contextOf(device), have = nullptr;
  CU_OK(d, ctxGetCurrent, (&have));
  if (have != want) CU_OK(d, ctxSetCurrent, (want));
}

void* DeviceMem::alloc(size_t bytes) const {
  bytes = (std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096;
  if (!cuda) {
    void* p = std::aligned_alloc(4096, bytes);
    if (!p) hostFailed("host buffer", bytes);
    std::memset(p, 0, bytes);  // defined contents, and page faults stay out of the timed loop
    return p;
  }
  makeCurrent();
  const cu::Driver* d = drv();
  cu::CUdeviceptr p = 0;
  CU_OK(d, memAlloc, (&p, bytes));
  CU_OK(d, memsetD8, (p, 0, bytes));
  CU_OK(d, streamSynchronize, (nullptr));  // the zeroing (legacy stream) is done before any stream uses it
  return reinterpret_cast<void*>(p);
}

void DeviceMem::free(void* p) const {
  if (!p) return;
  if (!cuda) return std::free(p);
  makeCurrent();
  CU_OK(drv(), memFree, (reinterpret_cast<cu::CUdeviceptr>(p)));
}

void DeviceMem::memset(void* dst, int byte, size_t bytes, cudaStream_t s) const {
  if (!bytes) return;
  if (!cuda) {
    std::memset(dst, byte, bytes);
    return;
  }
  makeCurrent();
  CU_OK(drv(), memsetD8Async, (reinterpret_cast<cu::CUdeviceptr>(dst), static_cast<unsigned char>(byte), bytes, s));
}

void DeviceMem::toDevice(void* dst, const void* src, size_t bytes, cudaStream_t s) const {
  if (!bytes) return;
  if (!cuda) {
    std::memcpy(dst, src, bytes);
    return;
  }
  makeCurrent();
  // From pageable memory the copy is staged before the call returns: src may be reused at once.
  CU_OK(drv(), memcpyHtoDAsync, (reinterpret_cast<cu::CUdeviceptr>(dst), src, bytes, s));
}

void DeviceMem::toHost(void* dst, const void* src, size_t bytes, cudaStream_t s) const {
  if (!bytes) return;
  if (!cuda) {
    std::memcpy(dst, src, bytes);
    return;
  }
  makeCurrent();
  const cu::Driver* d = drv();
  CU_OK(d, memcpyDtoHAsync, (dst, reinterpret_cast<cu::CUdeviceptr>(src), bytes, s));
  CU_OK(d, streamSynchronize, (s));
}

cudaStream_t DeviceMem::createStream() const {
  cudaStream_t s = nullptr;
  if (!cuda) {
    ncclResult_t r = plexusStreamCreate(&s);
    if (r != ncclSuccess) {
      std::fprintf(stderr, "plexus-perf: plexusStreamCreate failed: %s (%s)\n", ncclGetErrorString(r),
                   ncclGetLastError(nullptr));
      std::_Exit(1);
    }
    return s;
  }
  makeCurrent();
  cu::CUstream cs = nullptr;
  CU_OK(drv(), streamCreate, (&cs, cu::CU_STREAM_NON_BLOCKING));
  return cs;  // the same type: struct CUstream_st*
}

void DeviceMem::destroyStream(cudaStream_t s) const {
  if (!cuda) {
    plexusStreamDestroy(s);
    return;
  }
  makeCurrent();
  CU_OK(drv(), streamDestroy, (s));
}

bool DeviceMem::synchronize(cudaStream_t s, std::string* error) const {
  if (!cuda) {
    ncclResult_t r = plexusStreamSynchronize(s);
    if (r == ncclSuccess) return true;
    *error = std::string("plexusStreamSynchronize: ") + ncclGetErrorString(r);
    return false;
  }
  makeCurrent();
  const cu::Driver* d = drv();
  cu::CUresult r = d->streamSynchronize(s);
  if (r == cu::CUDA_SUCCESS) return true;
  *error = cu::failureMessage(d, "cuStreamSynchronize", r);
  return false;
}

}  // namespace perf
