#include "cuda_memory.h"

#include <sys/mman.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "fd_mailbox.h"
#include "log.h"

namespace p2p {

using namespace plexus::cuda;

namespace {

constexpr const char* kAdviceDriver =
    "check that the GPU is healthy (nvidia-smi) and not out of memory, or run with PLEXUS_BACKEND=host";

ncclResult_t fail(const Driver* d, const char* who, const char* call, CUresult r, const char* advice) {
  P2P_WARN("p2p-nvlink: %s: %s; %s", who, failureMessage(d, call, r).c_str(), advice);
  return ncclUnhandledCudaError;
}

// A failure while letting memory go: nothing to return it to, but it is said (the memory may stay allocated).
void teardownCheck(const Driver* d, const char* call, CUresult r) {
  if (r != CUDA_SUCCESS)
    P2P_WARN("p2p-nvlink: freeing connection memory: %s; the memory may stay allocated until the process ends",
             failureMessage(d, call, r).c_str());
}

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

bool envTrue(const char* a, const char* b) {
  const char* v = getenv(a);
  if (!v && b) v = getenv(b);
  return v && *v && strcmp(v, "0") != 0;
}

// Device and HostMapped allocations alive in this process, by address: a rank maps its peer's by the address the peer
// sent, and the peer may have freed it meanwhile, so a reference is taken only on one still registered under the same
// serial. The last reference frees it, in its owner's context.
struct Shared {
  uint32_t serial;
  int refs;
  CudaKind kind;
  const Driver* d;
  CUdevice dev;
  CUcontext ctx;  // the owner's primary context, retained while the allocation lives
};
std::mutex sharedMutex;
std::atomic<uint32_t> sharedSerial{1};
std::unordered_map<uint64_t, Shared>& shared() {
  static auto* m = new std::unordered_map<uint64_t, Shared>();
  return *m;
}

void sharedRelease(uint64_t address) {
  Shared s;
  {
    std::lock_guard<std::mutex> lock(sharedMutex);
    auto it = shared().find(address);
    if (it == shared().end() || --it->second.refs > 0) return;
    s = it->second;
    shared().erase(it);
  }
  {
    ContextScope scope(s.d, s.ctx);
    const CUresult r =
        s.kind == CudaKind::Device ? s.d->memFree((CUdeviceptr)address) : s.d->memFreeHost((void*)(uintptr_t)address);
    teardownCheck(s.d, s.kind == CudaKind::Device ? "cuMemFree" : "cuMemFreeHost", r);
  }
  s.d->devicePrimaryCtxRelease(s.dev);
}

ncclResult_t clear(const CudaDevice& dev, CUdeviceptr p, size_t n, const char* who) {
  if (CUresult r = dev.d->memsetD8Async(p, 0, n, dev.stream); r != CUDA_SUCCESS)
    return fail(dev.d, who, "cuMemsetD8Async", r, kAdviceDriver);
  if (CUresult r = dev.d->streamSynchronize(dev.stream); r != CUDA_SUCCESS)
    return fail(dev.d, who, "cuStreamSynchronize", r, kAdviceDriver);
  return ncclSuccess;
}

CUmemAllocationProp vmmProp(const CudaDevice& dev) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev.dev;
  return prop;
}

// cuMem memory with a POSIX file descriptor handle. false (with *why, and nothing left allocated) where the device or
// driver cannot: the caller falls back to legacy IPC.
bool allocVmm(const CudaDevice& dev, size_t size, CudaLocal* mem, std::string* why) {
  const Driver* d = dev.d;
  int vmm = 0, fd = 0;
  if (d->deviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev.dev) != CUDA_SUCCESS ||
      d->deviceGetAttribute(&fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev.dev) !=
          CUDA_SUCCESS ||
      !vmm || !fd) {
    *why = "the device does not support cuMem allocations with POSIX file descriptor handles";
    return false;
  }
  const CUmemAllocationProp prop = vmmProp(dev);
  size_t gran = 0;
  if (CUresult r = d->memGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
      r != CUDA_SUCCESS || !gran) {
    *why = failureMessage(d, "cuMemGetAllocationGranularity", r);
    return false;
  }
  size = roundUp(size, gran);
  CUmemGenericAllocationHandle h = 0;
  if (CUresult r = d->memCreate(&h, size, &prop, 0); r != CUDA_SUCCESS) {
    *why = failureMessage(d, "cuMemCreate", r);
    return false;
  }
  CUdeviceptr p = 0;
  CUresult r = d->memAddressReserve(&p, size, gran, 0, 0);
  const char* call = "cuMemAddressReserve";
  bool reserved = r == CUDA_SUCCESS, mapped = false;
  if (r == CUDA_SUCCESS) {
    r = d->memMap(p, size, 0, h, 0);
    call = "cuMemMap";
    mapped = r == CUDA_SUCCESS;
  }
  if (r == CUDA_SUCCESS) {
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = dev.dev;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = d->memSetAccess(p, size, &access, 1);
    call = "cuMemSetAccess";
  }
  if (r != CUDA_SUCCESS) {
    *why = failureMessage(d, call, r);
    if (mapped) d->memUnmap(p, size);
    if (reserved) d->memAddressFree(p, size);
    d->memRelease(h);
    return false;
  }
  mem->handle.kind = CudaKind::Vmm;
  mem->handle.size = size;
  mem->dptr = (void*)p;
  mem->mapped = size;
  mem->vmm = h;
  return true;
}

}  // namespace

bool cudaP2pDisabled() { return envTrue("PLEXUS_P2P_DISABLE", "NCCL_P2P_DISABLE"); }
bool cudaP2pRead() { return envTrue("PLEXUS_P2P_READ", "NCCL_P2P_READ_ENABLE"); }
bool cudaP2pLegacyIpc() {
  if (const char* v = getenv("PLEXUS_P2P_IPC")) return strcmp(v, "legacy") == 0;
  const char* v = getenv("NCCL_CUMEM_ENABLE");
  return v && strcmp(v, "0") == 0;
}

const char* cudaKindName(CudaKind kind) {
  switch (kind) {
    case CudaKind::Device:
      return "device memory (cuMemAlloc)";
    case CudaKind::HostMapped:
      return "mapped host memory (cuMemHostAlloc)";
    case CudaKind::Vmm:
      return "cuMem memory (file descriptor)";
    case CudaKind::Ipc:
      return "device memory (legacy CUDA IPC handle)";
    case CudaKind::Shm:
      return "registered shared memory (/dev/shm, cuMemHostRegister)";
  }
  return "unknown memory";
}

ContextScope::ContextScope(const Driver* d, CUcontext ctx) : d_(d) {
  relaxed_ = d->threadExchangeStreamCaptureMode(&mode_) == CUDA_SUCCESS;
  result_ = d->ctxGetCurrent(&prev_);
  if (result_ == CUDA_SUCCESS && prev_ != ctx) {
    result_ = d->ctxSetCurrent(ctx);
    restore_ = result_ == CUDA_SUCCESS;
  }
}

ContextScope::~ContextScope() {
  if (restore_) d_->ctxSetCurrent(prev_);
  if (relaxed_) d_->threadExchangeStreamCaptureMode(&mode_);
}

ncclResult_t cudaDeviceOpen(int ordinal, const char* who, CudaDevice* out) {
  *out = CudaDevice{};
  std::string why;
  const Driver* d = driver(&why);
  if (!d) {
    P2P_WARN("p2p-nvlink: %s: the CUDA driver cannot be used: %s", who, why.c_str());
    return ncclSystemError;
  }
  CudaDevice dev;
  dev.d = d;
  dev.ordinal = ordinal;
  if (CUresult r = d->deviceGet(&dev.dev, ordinal); r != CUDA_SUCCESS)
    return fail(d, who, "cuDeviceGet", r,
                "the rank's CUDA device does not exist in this process (CUDA_VISIBLE_DEVICES)");
  if (CUresult r = d->devicePrimaryCtxRetain(&dev.ctx, dev.dev); r != CUDA_SUCCESS)
    return fail(d, who, "cuDevicePrimaryCtxRetain", r, kAdviceDriver);
  auto release = [&](ncclResult_t res) {
    d->devicePrimaryCtxRelease(dev.dev);
    return res;
  };
  if (CUresult r = d->deviceGetPCIBusId(dev.busId, sizeof(dev.busId), dev.dev); r != CUDA_SUCCESS)
    return release(fail(d, who, "cuDeviceGetPCIBusId", r, kAdviceDriver));
  dev.busId[sizeof(dev.busId) - 1] = '\0';
  for (char& c : dev.busId) c = (char)tolower((unsigned char)c);
  {
    ContextScope scope(d, dev.ctx);
    if (scope.result() != CUDA_SUCCESS) return release(fail(d, who, "cuCtxSetCurrent", scope.result(), kAdviceDriver));
    if (CUresult r = d->streamCreate(&dev.stream, CU_STREAM_NON_BLOCKING); r != CUDA_SUCCESS)
      return release(fail(d, who, "cuStreamCreate", r, kAdviceDriver));
  }
  *out = dev;
  return ncclSuccess;
}

void cudaDeviceClose(CudaDevice* dev) {
  if (dev->d && dev->stream) {
    ContextScope scope(dev->d, dev->ctx);
    dev->d->streamDestroy(dev->stream);
  }
  if (dev->d && dev->ctx) dev->d->devicePrimaryCtxRelease(dev->dev);
  *dev = CudaDevice{};
}

int cudaDeviceByBusId(const CudaDevice& dev, const char* busId) {
  int count = 0;
  if (dev.d->deviceGetCount(&count) != CUDA_SUCCESS) return -1;
  for (int i = 0; i < count; i++) {
    CUdevice d = 0;
    char id[16] = {};
    if (dev.d->deviceGet(&d, i) != CUDA_SUCCESS || dev.d->deviceGetPCIBusId(id, sizeof(id), d) != CUDA_SUCCESS)
      continue;
    id[sizeof(id) - 1] = '\0';
    if (strcasecmp(id, busId) == 0) return i;
  }
  return -1;
}

ncclResult_t cudaPeerAccessible(const CudaDevice& dev, int a, int b, const char* who, bool* ok) {
  *ok = a == b;
  if (a == b) return ncclSuccess;
  CUdevice da = 0, db = 0;
  if (CUresult r = dev.d->deviceGet(&da, a); r != CUDA_SUCCESS)
    return fail(dev.d, who, "cuDeviceGet", r, kAdviceDriver);
  if (CUresult r = dev.d->deviceGet(&db, b); r != CUDA_SUCCESS)
    return fail(dev.d, who, "cuDeviceGet", r, kAdviceDriver);
  int ab = 0, ba = 0;
  if (CUresult r = dev.d->deviceCanAccessPeer(&ab, da, db); r != CUDA_SUCCESS)
    return fail(dev.d, who, "cuDeviceCanAccessPeer", r, kAdviceDriver);
  if (CUresult r = dev.d->deviceCanAccessPeer(&ba, db, da); r != CUDA_SUCCESS)
    return fail(dev.d, who, "cuDeviceCanAccessPeer", r, kAdviceDriver);
  *ok = ab && ba;
  return ncclSuccess;
}

ncclResult_t cudaEnablePeerAccess(const CudaDevice& dev, int peer, const char* who) {
  if (peer == dev.ordinal) return ncclSuccess;
  const Driver* d = dev.d;
  CUdevice pd = 0;
  CUcontext pctx = nullptr;
  if (CUresult r = d->deviceGet(&pd, peer); r != CUDA_SUCCESS) return fail(d, who, "cuDeviceGet", r, kAdviceDriver);
  if (CUresult r = d->devicePrimaryCtxRetain(&pctx, pd); r != CUDA_SUCCESS)
    return fail(d, who, "cuDevicePrimaryCtxRetain", r, kAdviceDriver);
  const CUresult r = d->ctxEnablePeerAccess(pctx, 0);  // from the current context, this rank's
  d->devicePrimaryCtxRelease(pd);
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) return ncclSuccess;
  return fail(d, who, "cuCtxEnablePeerAccess", r,
              "the GPUs report peer access but refuse it; set PLEXUS_P2P_DISABLE=1 to connect them through host "
              "memory");
}

ncclResult_t cudaMemAlloc(const CudaDevice& dev, size_t size, CudaPlace where, const char* who, CudaLocal* mem) {
  *mem = CudaLocal{};
  mem->d = dev.d;
  mem->handle.id = newAllocationId();
  const Driver* d = dev.d;
  size = roundUp(size, 4096);
  switch (where) {
    case CudaPlace::SameProcess:
    case CudaPlace::OtherProcess: {
      if (where == CudaPlace::OtherProcess && !cudaP2pLegacyIpc()) {
        std::string why;
        if (allocVmm(dev, size, mem, &why)) {
          if (ncclResult_t res = clear(dev, (CUdeviceptr)mem->dptr, mem->handle.size, who); res != ncclSuccess) {
            cudaMemFree(mem);
            return res;
          }
          return ncclSuccess;
        }
        P2P_INFO("p2p-nvlink: %s: cuMem memory unavailable (%s); using legacy CUDA IPC handles", who, why.c_str());
      }
      CUdeviceptr p = 0;
      if (CUresult r = d->memAlloc(&p, size); r != CUDA_SUCCESS)
        return fail(d, who, "cuMemAlloc", r, "free GPU memory, or lower NCCL_BUFFSIZE");
      if (ncclResult_t res = clear(dev, p, size, who); res != ncclSuccess) {
        d->memFree(p);
        return res;
      }
      mem->dptr = (void*)p;
      mem->handle.size = size;
      if (where == CudaPlace::OtherProcess) {
        if (CUresult r = d->ipcGetMemHandle(&mem->handle.u.ipc, p); r != CUDA_SUCCESS) {
          d->memFree(p);
          return fail(d, who, "cuIpcGetMemHandle", r,
                      "legacy CUDA IPC is unavailable on this system; check the driver (nvidia-smi) and that the "
                      "processes may share GPU memory, or run the ranks as threads of one process");
        }
        mem->handle.kind = CudaKind::Ipc;
        return ncclSuccess;
      }
      mem->handle.kind = CudaKind::Device;
      mem->handle.address = (uint64_t)p;
      break;
    }
    case CudaPlace::SameProcessHost: {
      void* h = nullptr;
      if (CUresult r = d->memHostAlloc(&h, size, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
          r != CUDA_SUCCESS)
        return fail(d, who, "cuMemHostAlloc", r, "free host memory, or lower NCCL_BUFFSIZE");
      CUdeviceptr p = 0;
      if (CUresult r = d->memHostGetDevicePointer(&p, h, 0); r != CUDA_SUCCESS) {
        d->memFreeHost(h);
        return fail(d, who, "cuMemHostGetDevicePointer", r,
                    "the device cannot map host memory; use PLEXUS_BACKEND=host");
      }
      memset(h, 0, size);
      mem->hptr = h;
      mem->dptr = (void*)p;
      mem->handle.kind = CudaKind::HostMapped;
      mem->handle.size = size;
      mem->handle.address = (uint64_t)(uintptr_t)h;
      break;
    }
    case CudaPlace::OtherProcessHost: {
      if (ncclResult_t res = memAlloc(size, false, &mem->shm); res != ncclSuccess) return res;
      void* h = mem->shm.ptr;
      size = mem->shm.handle.size;
      if (CUresult r = d->memHostRegister(h, size, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
          r != CUDA_SUCCESS) {
        memFree(&mem->shm);
        return fail(d, who, "cuMemHostRegister", r,
                    "the driver cannot pin shared memory; check the locked-memory limit (ulimit -l)");
      }
      CUdeviceptr p = 0;
      if (CUresult r = d->memHostGetDevicePointer(&p, h, 0); r != CUDA_SUCCESS) {
        d->memHostUnregister(h);
        memFree(&mem->shm);
        return fail(d, who, "cuMemHostGetDevicePointer", r,
                    "the device cannot map host memory; use PLEXUS_BACKEND=host");
      }
      mem->hptr = h;
      mem->dptr = (void*)p;
      mem->handle.kind = CudaKind::Shm;
      mem->handle.size = size;
      static_assert(sizeof(mem->handle.u.shmName) == sizeof(mem->shm.handle.shmName), "shm name");
      memcpy(mem->handle.u.shmName, mem->shm.handle.shmName, sizeof(mem->handle.u.shmName));
      return ncclSuccess;
    }
  }
  // Shared by pointer with the peer of this process; its context stays while either side holds it.
  CUcontext ctx = nullptr;
  if (CUresult r = d->devicePrimaryCtxRetain(&ctx, dev.dev); r != CUDA_SUCCESS) {
    if (mem->handle.kind == CudaKind::Device)
      d->memFree((CUdeviceptr)mem->dptr);
    else
      d->memFreeHost(mem->hptr);
    *mem = CudaLocal{};
    return fail(d, who, "cuDevicePrimaryCtxRetain", r, kAdviceDriver);
  }
  mem->handle.serial = sharedSerial.fetch_add(1);
  std::lock_guard<std::mutex> lock(sharedMutex);
  shared()[mem->handle.address] = Shared{mem->handle.serial, 1, mem->handle.kind, d, dev.dev, ctx};
  return ncclSuccess;
}

ncclResult_t cudaMemWrite(const CudaDevice& dev, const CudaLocal& mem, size_t offset, const void* src, size_t bytes,
                          const char* who) {
  if (offset + bytes > mem.handle.size) {
    P2P_WARN("p2p-nvlink: %s: internal error: writing %zu bytes at %zu of a %llu-byte allocation", who, bytes, offset,
             (unsigned long long)mem.handle.size);
    return ncclInternalError;
  }
  if (mem.hptr) {
    memcpy((char*)mem.hptr + offset, src, bytes);
    return ncclSuccess;
  }
  if (CUresult r = dev.d->memcpyHtoDAsync((CUdeviceptr)mem.dptr + offset, src, bytes, dev.stream); r != CUDA_SUCCESS)
    return fail(dev.d, who, "cuMemcpyHtoDAsync", r, kAdviceDriver);
  if (CUresult r = dev.d->streamSynchronize(dev.stream); r != CUDA_SUCCESS)
    return fail(dev.d, who, "cuStreamSynchronize", r, kAdviceDriver);
  return ncclSuccess;
}

ncclResult_t cudaMemExportFd(const CudaDevice& dev, const CudaLocal& mem, const char* who, int* fd) {
  *fd = -1;
  int out = -1;
  if (CUresult r = dev.d->memExportToShareableHandle(&out, mem.vmm, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      r != CUDA_SUCCESS)
    return fail(dev.d, who, "cuMemExportToShareableHandle", r,
                "set PLEXUS_P2P_IPC=legacy to share GPU memory through legacy CUDA IPC handles instead");
  *fd = out;
  return ncclSuccess;
}

void cudaMemUnlinkName(CudaLocal* mem) {
  if (mem->handle.kind == CudaKind::Shm) memUnlinkName(&mem->shm);
}

void cudaMemFree(CudaLocal* mem) {
  const Driver* d = mem->d;
  if (!d || !mem->dptr) {
    *mem = CudaLocal{};
    return;
  }
  switch (mem->handle.kind) {
    case CudaKind::Device:
    case CudaKind::HostMapped:
      sharedRelease(mem->handle.address);
      break;
    case CudaKind::Vmm:
      teardownCheck(d, "cuMemUnmap", d->memUnmap((CUdeviceptr)mem->dptr, mem->mapped));
      teardownCheck(d, "cuMemAddressFree", d->memAddressFree((CUdeviceptr)mem->dptr, mem->mapped));
      teardownCheck(d, "cuMemRelease", d->memRelease(mem->vmm));
      break;
    case CudaKind::Ipc:
      teardownCheck(d, "cuMemFree", d->memFree((CUdeviceptr)mem->dptr));
      break;
    case CudaKind::Shm:
      teardownCheck(d, "cuMemHostUnregister", d->memHostUnregister(mem->hptr));
      memFree(&mem->shm);
      break;
  }
  *mem = CudaLocal{};
}

ncclResult_t cudaMemMap(const CudaDevice& dev, const CudaHandle& handle, int fd, const char* who, bool quiet,
                        CudaRemote* out) {
  *out = CudaRemote{};
  const Driver* d = dev.d;
  auto failed = [&](const char* call, CUresult r, const char* advice) {
    if (!quiet) return fail(d, who, call, r, advice);
    P2P_INFO("p2p-nvlink: %s: %s", who, failureMessage(d, call, r).c_str());
    return ncclUnhandledCudaError;
  };
  switch (handle.kind) {
    case CudaKind::Device:
    case CudaKind::HostMapped: {
      {
        std::lock_guard<std::mutex> lock(sharedMutex);
        auto it = shared().find(handle.address);
        if (it == shared().end() || it->second.serial != handle.serial || it->second.kind != handle.kind) {
          P2P_WARN(
              "p2p-nvlink: %s: the peer's connection memory is gone: the peer rank was aborted or destroyed "
              "while connecting",
              who);
          return ncclRemoteError;
        }
        it->second.refs++;
      }
      out->handle = handle;
      out->d = d;
      if (handle.kind == CudaKind::Device) {
        out->dptr = (void*)handle.address;
        return ncclSuccess;
      }
      out->hptr = (void*)(uintptr_t)handle.address;
      CUdeviceptr p = 0;
      // Portable memory: this device's view of it, which may differ from the owner's.
      if (CUresult r = d->memHostGetDevicePointer(&p, out->hptr, 0); r != CUDA_SUCCESS) {
        sharedRelease(handle.address);
        *out = CudaRemote{};
        return failed("cuMemHostGetDevicePointer", r, "the device cannot map host memory; use PLEXUS_BACKEND=host");
      }
      out->dptr = (void*)p;
      return ncclSuccess;
    }
    case CudaKind::Vmm: {
      if (fd < 0) {
        P2P_WARN("p2p-nvlink: %s: internal error: no file descriptor came with the peer's cuMem memory", who);
        return ncclInternalError;
      }
      CUmemGenericAllocationHandle h = 0;
      if (CUresult r =
              d->memImportFromShareableHandle(&h, (void*)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
          r != CUDA_SUCCESS)
        return failed("cuMemImportFromShareableHandle", r,
                      "set PLEXUS_P2P_IPC=legacy to share GPU memory through legacy CUDA IPC handles instead");
      const CUmemAllocationProp prop = vmmProp(dev);
      size_t gran = 0;
      CUresult r = d->memGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
      const char* call = "cuMemGetAllocationGranularity";
      const size_t size = (size_t)handle.size;
      const size_t span = gran ? roundUp(size, gran) : size;
      CUdeviceptr p = 0;
      bool reserved = false, mapped = false;
      if (r == CUDA_SUCCESS) {
        r = d->memAddressReserve(&p, span, gran, 0, 0);
        call = "cuMemAddressReserve";
        reserved = r == CUDA_SUCCESS;
      }
      if (r == CUDA_SUCCESS) {
        r = d->memMap(p, size, 0, h, 0);
        call = "cuMemMap";
        mapped = r == CUDA_SUCCESS;
      }
      if (r == CUDA_SUCCESS) {
        CUmemAccessDesc access{};
        access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access.location.id = dev.dev;
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        r = d->memSetAccess(p, size, &access, 1);
        call = "cuMemSetAccess";
      }
      if (r != CUDA_SUCCESS) {
        if (mapped) d->memUnmap(p, size);
        if (reserved) d->memAddressFree(p, span);
        d->memRelease(h);
        return failed(call, r,
                      "this GPU cannot reach the peer's GPU memory; set PLEXUS_P2P_DISABLE=1 to connect through host "
                      "memory");
      }
      out->handle = handle;
      out->d = d;
      out->dptr = (void*)p;
      out->mapped = span;
      out->vmm = h;
      return ncclSuccess;
    }
    case CudaKind::Ipc: {
      CUdeviceptr p = 0;
      if (CUresult r = d->ipcOpenMemHandle(&p, handle.u.ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS); r != CUDA_SUCCESS)
        return failed("cuIpcOpenMemHandle", r,
                      "this GPU cannot open the peer's GPU memory; set PLEXUS_P2P_DISABLE=1 to connect through host "
                      "memory");
      out->handle = handle;
      out->d = d;
      out->dptr = (void*)p;
      return ncclSuccess;
    }
    case CudaKind::Shm: {
      if (memchr(handle.u.shmName, '\0', sizeof(handle.u.shmName)) == nullptr || handle.u.shmName[0] != '/') {
        P2P_WARN("p2p-nvlink: %s: the peer's connection info is malformed (shared memory name)", who);
        return ncclInternalError;
      }
      MemHandle h{};
      h.kind = MemKind::Shm;
      h.size = handle.size;
      memcpy(h.shmName, handle.u.shmName, sizeof(h.shmName));
      void* host = nullptr;
      if (ncclResult_t res = memMap(h, &host); res != ncclSuccess) return res;
      if (CUresult r =
              d->memHostRegister(host, (size_t)handle.size, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
          r != CUDA_SUCCESS) {
        memUnmap(h, host);
        return failed("cuMemHostRegister", r,
                      "the driver cannot pin shared memory; check the locked-memory limit (ulimit -l)");
      }
      CUdeviceptr p = 0;
      if (CUresult r = d->memHostGetDevicePointer(&p, host, 0); r != CUDA_SUCCESS) {
        d->memHostUnregister(host);
        memUnmap(h, host);
        return failed("cuMemHostGetDevicePointer", r, "the device cannot map host memory; use PLEXUS_BACKEND=host");
      }
      out->handle = handle;
      out->d = d;
      out->hptr = host;
      out->dptr = (void*)p;
      return ncclSuccess;
    }
  }
  P2P_WARN("p2p-nvlink: %s: the peer's connection info is malformed (memory kind %u)", who, (unsigned)handle.kind);
  return ncclInternalError;
}

void cudaMemUnmap(CudaRemote* mem) {
  const Driver* d = mem->d;
  if (!d || !mem->dptr) {
    *mem = CudaRemote{};
    return;
  }
  switch (mem->handle.kind) {
    case CudaKind::Device:
    case CudaKind::HostMapped:
      sharedRelease(mem->handle.address);
      break;
    case CudaKind::Vmm:
      teardownCheck(d, "cuMemUnmap", d->memUnmap((CUdeviceptr)mem->dptr, (size_t)mem->handle.size));
      teardownCheck(d, "cuMemAddressFree", d->memAddressFree((CUdeviceptr)mem->dptr, mem->mapped));
      teardownCheck(d, "cuMemRelease", d->memRelease(mem->vmm));
      break;
    case CudaKind::Ipc:
      teardownCheck(d, "cuIpcCloseMemHandle", d->ipcCloseMemHandle((CUdeviceptr)mem->dptr));
      break;
    case CudaKind::Shm: {
      teardownCheck(d, "cuMemHostUnregister", d->memHostUnregister(mem->hptr));
      MemHandle h{};
      h.kind = MemKind::Shm;
      h.size = mem->handle.size;
      memUnmap(h, mem->hptr);
      break;
    }
  }
  *mem = CudaRemote{};
}

}  // namespace p2p
