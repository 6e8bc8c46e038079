// The device seam over the CUDA driver API (libcuda.so.1, loaded at run time through plexus/cuda/driver.h), so that
// this file compiles, and libplexus loads, where no CUDA toolkit or driver exists. It speaks to the driver alone,
// never to libcudart: the application's cudaStream_t is the driver's CUstream, and the runtime's device is the
// device of the thread's current context, as cudaGetDevice reports it.
#include "device/cuda_runtime.h"

#include <plexus/cuda/driver.h>

#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

namespace plexus {

namespace {

using namespace cuda;

// What the last failed call said, per thread: the caller reads it through lastError() right after the failure.
thread_local std::string lastFailure;

ncclResult_t failWith(ncclResult_t result, std::string message) {
  lastFailure = std::move(message);
  return result;
}

// The calling thread's stream-capture mode, relaxed for the guard's lifetime: the driver then allows calls that
// are "potentially unsafe" during a capture in global or thread-local mode (allocations, synchronous copies), which
// the core makes while the application may be capturing its own stream. The copies themselves run on a stream of
// ours, so they join no capture. NCCL does the same around its allocations and copies.
class RelaxedCapture {
 public:
  explicit RelaxedCapture(const Driver* d) : d_(d) {
    exchanged_ = d_->threadExchangeStreamCaptureMode(&mode_) == CUDA_SUCCESS;
  }
  ~RelaxedCapture() {
    if (exchanged_) d_->threadExchangeStreamCaptureMode(&mode_);
  }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  const Driver* d_;
  CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
  bool exchanged_ = false;
};

// What a graph's user object owns: release(arg), or nothing once graphRetain has handed arg back to its caller.
struct GraphRelease {
  void (*release)(void*);
  void* arg;
};

// Runs on a driver thread once the graph's last reference goes; it must not call the driver, and does not.
void runGraphRelease(void* p) {
  auto* r = static_cast<GraphRelease*>(p);
  if (r->release) r->release(r->arg);
  delete r;
}

CUdeviceptr devicePtr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

class CudaRuntime final : public DeviceRuntime {
 public:
  CudaRuntime(const Driver* d, int count) : d_(d), count_(count), primary_(count) {}

  // The runtime lives as long as the process (runtime.h); tests destroy theirs, and get every reference back.
  ~CudaRuntime() override {
    for (auto& [ctx, stream] : copyStreams_) d_->streamDestroy(stream);
    for (const Primary& p : primary_)
      if (p.ctx) d_->devicePrimaryCtxRelease(p.device);
  }

  plexusBackend_t backend() const override { return plexusBackendCuda; }
  const char* name() const override { return "cuda"; }

  ncclResult_t deviceCount(int* count) override {
    *count = count_;
    return ncclSuccess;
  }

  ncclResult_t currentDevice(int* device) override {
    CUcontext ctx = nullptr;
    if (const CUresult r = d_->ctxGetCurrent(&ctx); r != CUDA_SUCCESS) return fail("cuCtxGetCurrent", r);
    if (!ctx) {
      *device = 0;  // no current context: device 0, as cudaGetDevice says
      return ncclSuccess;
    }
    CUdevice dev = 0;
    if (const CUresult r = d_->ctxGetDevice(&dev); r != CUDA_SUCCESS) return fail("cuCtxGetDevice", r);
    *device = dev;
    return ncclSuccess;
  }

  ncclResult_t setCurrent(int device) override {
    CUcontext ctx = nullptr;
    if (ncclResult_t res = primaryContext(device, &ctx); res != ncclSuccess) return res;
    return check(d_->ctxSetCurrent(ctx), "cuCtxSetCurrent");
  }

  ncclResult_t alloc(MemKind kind, size_t bytes, DeviceMem* mem) override {
    *mem = DeviceMem{};
    RelaxedCapture relaxed(d_);
    if (ncclResult_t res = ensureContext(); res != ncclSuccess) return res;
    // At least a byte: the driver refuses empty allocations, and a caller may size a buffer by a count that can be 0.
    const size_t n = bytes ? bytes : 1;
    // Zeroed, as the host backend's memory is: connectors expect clean flags and counters.
    switch (kind) {
      case MemKind::Device: {
        CUdeviceptr p = 0;
        if (const CUresult r = d_->memAlloc(&p, n); r != CUDA_SUCCESS) return fail("cuMemAlloc", r);
        CUstream s = nullptr;
        ncclResult_t res = copyStream(&s);
        if (res == ncclSuccess) res = check(d_->memsetD8Async(p, 0, n, s), "cuMemsetD8Async");
        if (res == ncclSuccess) res = check(d_->streamSynchronize(s), "cuStreamSynchronize");
        if (res != ncclSuccess) {
          d_->memFree(p);
          return res;
        }
        *mem = DeviceMem{reinterpret_cast<void*>(p), nullptr, bytes, kind};
        return ncclSuccess;
      }
      case MemKind::HostPinned:
      case MemKind::HostMapped: {
        const bool mapped = kind == MemKind::HostMapped;
        void* host = nullptr;
        const unsigned flags = CU_MEMHOSTALLOC_PORTABLE | (mapped ? CU_MEMHOSTALLOC_DEVICEMAP : 0u);
        if (const CUresult r = d_->memHostAlloc(&host, n, flags); r != CUDA_SUCCESS) return fail("cuMemHostAlloc", r);
        void* ptr = host;
        if (mapped) {
          CUdeviceptr p = 0;
          if (const CUresult r = d_->memHostGetDevicePointer(&p, host, 0); r != CUDA_SUCCESS) {
            d_->memFreeHost(host);
            return fail("cuMemHostGetDevicePointer", r);
          }
          ptr = reinterpret_cast<void*>(p);
        }
        memset(host, 0, n);
        *mem = DeviceMem{ptr, host, bytes, kind};
        return ncclSuccess;
      }
    }
    return failWith(ncclInvalidArgument, "cuda backend: unknown memory kind " + std::to_string(int(kind)));
  }

  void free(DeviceMem* mem) override {
    if (!mem->ptr && !mem->host) return;
    // No status to return: a failure is left for lastError(), and the memory is the driver's to reclaim at exit.
    RelaxedCapture relaxed(d_);
    if (ensureContext() == ncclSuccess) {
      if (mem->kind == MemKind::Device)
        check(d_->memFree(devicePtr(mem->ptr)), "cuMemFree");
      else
        check(d_->memFreeHost(mem->host), "cuMemFreeHost");
    }
    *mem = DeviceMem{};
  }

  ncclResult_t copyToDevice(void* dst, const void* src, size_t bytes) override {
    if (!bytes) return ncclSuccess;
    RelaxedCapture relaxed(d_);
    CUstream s = nullptr;
    if (ncclResult_t res = copyBegin(&s); res != ncclSuccess) return res;
    if (const CUresult r = d_->memcpyHtoDAsync(devicePtr(dst), src, bytes, s); r != CUDA_SUCCESS)
      return fail("cuMemcpyHtoDAsync", r);
    return check(d_->streamSynchronize(s), "cuStreamSynchronize");
  }

  ncclResult_t copyFromDevice(void* dst, const void* src, size_t bytes) override {
    if (!bytes) return ncclSuccess;
    RelaxedCapture relaxed(d_);
    CUstream s = nullptr;
    if (ncclResult_t res = copyBegin(&s); res != ncclSuccess) return res;
    if (const CUresult r = d_->memcpyDtoHAsync(dst, devicePtr(src), bytes, s); r != CUDA_SUCCESS)
      return fail("cuMemcpyDtoHAsync", r);
    return check(d_->streamSynchronize(s), "cuStreamSynchronize");
  }

  ncclResult_t pointerInfo(const void* ptr, PointerInfo* info) override {
    *info = PointerInfo{};
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   CU_POINTER_ATTRIBUTE_IS_MANAGED};
    // Zeroed: the driver leaves them alone for memory it does not know, and writes IS_MANAGED as a one-byte bool.
    unsigned memoryType = 0;
    int ordinal = -1;
    unsigned managed = 0;
    void* data[] = {&memoryType, &ordinal, &managed};
    const CUresult r = d_->pointerGetAttributes(3, attrs, data, devicePtr(ptr));
    // Memory the driver does not know is ordinary host memory: cuPointerGetAttributes answers CUDA_SUCCESS with no
    // memory type for it. CUDA_ERROR_INVALID_VALUE, cuPointerGetAttribute's (singular) answer for such memory, is
    // taken alike. Any other error is a real failure (a driver shutting down, say), not a verdict on the pointer.
    if (r == CUDA_ERROR_INVALID_VALUE) return ncclSuccess;
    if (r != CUDA_SUCCESS) return fail("cuPointerGetAttributes", r);
    if (managed || memoryType == unsigned(CU_MEMORYTYPE_UNIFIED)) {
      *info = PointerInfo{PointerKind::Managed, ordinal};
    } else if (memoryType == unsigned(CU_MEMORYTYPE_DEVICE)) {
      *info = PointerInfo{PointerKind::Device, ordinal};
    } else if (memoryType == unsigned(CU_MEMORYTYPE_HOST)) {
      *info = PointerInfo{PointerKind::HostRegistered, -1};  // host memory: any device reaches it
    }
    return ncclSuccess;
  }

  ncclResult_t launch(cudaStream_t stream, const KernelLaunch& k) override {
    // One by-value parameter, passed as a packed buffer: the driver copies it before cuLaunchKernel returns.
    size_t bytes = k.argsBytes;
    void* extra[] = {launchParam(CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT), const_cast<void*>(k.args),
                     launchParam(CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT), &bytes, launchParam(CU_LAUNCH_PARAM_END_AS_INT)};
    auto* function = static_cast<CUfunction>(const_cast<void*>(k.function));
    const ncclResult_t r =
        check(d_->launchKernel(function, k.grid, 1, 1, k.block, 1, 1, 0, stream, nullptr, extra), "cuLaunchKernel");
    return r == ncclSuccess && k.recordAfter ? eventRecord(k.recordAfter, stream) : r;
  }

  ncclResult_t loadKernel(const void* function) override {
    // A function's attributes are known only once its code is loaded: asking for one loads it (cuFuncLoad's effect,
    // which drivers before 12.4 lack).
    int regs = 0;
    return check(d_->funcGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, static_cast<CUfunction>(const_cast<void*>(function))),
                 "cuFuncGetAttribute");
  }

  ncclResult_t copyAsync(void* dst, const void* src, size_t bytes, cudaStream_t stream) override {
    return check(d_->memcpyAsync(devicePtr(dst), devicePtr(src), bytes, stream), "cuMemcpyAsync");
  }

  ncclResult_t streamWaitValue(cudaStream_t stream, void* ptr, uint64_t value) override {
    return check(d_->streamWaitValue64(stream, devicePtr(ptr), value, CU_STREAM_WAIT_VALUE_GEQ), "cuStreamWaitValue64");
  }

  ncclResult_t hostCallback(cudaStream_t stream, void (*fn)(void*), void* arg) override {
    return check(d_->launchHostFunc(stream, fn, arg), "cuLaunchHostFunc");
  }

  ncclResult_t eventCreate(void** event) override {
    *event = nullptr;
    if (ncclResult_t res = ensureContext(); res != ncclSuccess) return res;
    CUevent e = nullptr;
    // No timing: a timed event costs a timestamp write per record, and completion is all the core asks.
    if (const CUresult r = d_->eventCreate(&e, CU_EVENT_DISABLE_TIMING); r != CUDA_SUCCESS)
      return fail("cuEventCreate", r);
    *event = e;
    return ncclSuccess;
  }

  ncclResult_t eventRecord(void* event, cudaStream_t stream) override {
    return check(d_->eventRecord(static_cast<CUevent>(event), stream), "cuEventRecord");
  }

  ncclResult_t eventQuery(void* event) override {
    const CUresult r = d_->eventQuery(static_cast<CUevent>(event));
    if (r == CUDA_SUCCESS) return ncclSuccess;
    if (r == CUDA_ERROR_NOT_READY) return ncclInProgress;
    return fail("cuEventQuery", r);
  }

  // Not in runtime.h on this branch yet: the planner's rewrite adds it (work after this waits for the event).
  ncclResult_t streamWaitEvent(cudaStream_t stream, void* event) override {
    return check(d_->streamWaitEvent(stream, static_cast<CUevent>(event), 0), "cuStreamWaitEvent");
  }

  void eventDestroy(void* event) override {
    // A pending event may be destroyed: the driver frees it once its work is done.
    if (event) check(d_->eventDestroy(static_cast<CUevent>(event)), "cuEventDestroy");
  }

  ncclResult_t captureStatus(cudaStream_t stream, bool* capturing, void** graph) override {
    *capturing = false;
    *graph = nullptr;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    CUgraph g = nullptr;
    if (const CUresult r = d_->streamGetCaptureInfo(stream, &status, &id, &g, nullptr, nullptr); r != CUDA_SUCCESS)
      return fail("cuStreamGetCaptureInfo", r);
    if (status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
      return failWith(ncclInvalidUsage,
                      "the stream's capture was invalidated by an earlier failed operation: end the capture "
                      "(cudaStreamEndCapture) and capture again");
    if (status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
      *capturing = true;
      *graph = g;
    }
    return ncclSuccess;
  }

  ncclResult_t graphRetain(void* graph, void (*release)(void*), void* arg) override {
    // release(arg) goes through GraphRelease so that a failure can hand arg back to the caller untouched: a user
    // object cannot be dropped without running its destructor.
    auto* owned = new GraphRelease{release, arg};
    CUuserObject object = nullptr;
    if (const CUresult r = d_->userObjectCreate(&object, owned, runGraphRelease, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
        r != CUDA_SUCCESS) {
      delete owned;
      return fail("cuUserObjectCreate", r);
    }
    // MOVE: the graph takes our one reference, so the object dies with the graph (and its executable graphs).
    if (const CUresult r = d_->graphRetainUserObject(static_cast<CUgraph>(graph), object, 1, CU_GRAPH_USER_OBJECT_MOVE);
        r != CUDA_SUCCESS) {
      owned->release = nullptr;
      d_->userObjectRelease(object, 1);
      return fail("cuGraphRetainUserObject", r);
    }
    return ncclSuccess;
  }

  // NCCL's path to GPUDirect RDMA without nvidia-peermem: the driver exports the device pages as a dmabuf (CUDA 11.7+,
  // Linux 5.12+); the range must be page aligned, which cuMemAlloc's allocations are.
  ncclResult_t exportDmabuf(const DeviceMem& mem, int* fd, uint64_t* offset) override {
    if (mem.kind != MemKind::Device || !mem.ptr)
      return failWith(ncclInvalidArgument, "exportDmabuf: only device memory has a dmabuf");
    int handle = -1;
    const ncclResult_t r = check(d_->memGetHandleForAddressRange(&handle, devicePtr(mem.ptr),
                                                                 (mem.size + 4095) & ~(size_t)4095,
                                                                 CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0),
                                 "cuMemGetHandleForAddressRange");
    if (r != ncclSuccess) return r;
    *fd = handle;
    *offset = 0;
    return ncclSuccess;
  }
  std::string lastError() override { return lastFailure; }

 private:
  // A device's primary context, retained the first time the device is made current and released with the runtime.
  struct Primary {
    CUdevice device = 0;
    CUcontext ctx = nullptr;
  };

  ncclResult_t fail(const char* call, CUresult r) {
    return failWith(ncclUnhandledCudaError, failureMessage(d_, call, r));
  }
  ncclResult_t check(CUresult r, const char* call) { return r == CUDA_SUCCESS ? ncclSuccess : fail(call, r); }

  ncclResult_t primaryContext(int device, CUcontext* ctx) {
    if (device < 0 || device >= count_)
      return failWith(ncclInvalidArgument, "CUDA device " + std::to_string(device) + " does not exist (there are " +
                                               std::to_string(count_) + ")");
    std::lock_guard<std::mutex> lock(mu_);
    Primary& p = primary_[device];
    if (!p.ctx) {
      if (const CUresult r = d_->deviceGet(&p.device, device); r != CUDA_SUCCESS) return fail("cuDeviceGet", r);
      if (const CUresult r = d_->devicePrimaryCtxRetain(&p.ctx, p.device); r != CUDA_SUCCESS) {
        p.ctx = nullptr;
        return fail("cuDevicePrimaryCtxRetain", r);
      }
    }
    *ctx = p.ctx;
    return ncclSuccess;
  }

  // Calls that need a context (allocation, copies, event creation) get device 0's primary one on a thread that has
  // none, as the CUDA runtime does for cudaMalloc on a fresh thread.
  ncclResult_t ensureContext() {
    CUcontext ctx = nullptr;
    if (const CUresult r = d_->ctxGetCurrent(&ctx); r != CUDA_SUCCESS) return fail("cuCtxGetCurrent", r);
    return ctx ? ncclSuccess : setCurrent(0);
  }

  ncclResult_t copyBegin(CUstream* s) {
    if (ncclResult_t res = ensureContext(); res != ncclSuccess) return res;
    return copyStream(s);
  }

  // The current context's stream for our copies and memsets: non-blocking, so that it never waits on, nor joins,
  // the legacy default stream or an application stream that is capturing. Streams belong to a context, hence one
  // per context, kept for the runtime's lifetime.
  ncclResult_t copyStream(CUstream* s) {
    CUcontext ctx = nullptr;
    if (const CUresult r = d_->ctxGetCurrent(&ctx); r != CUDA_SUCCESS) return fail("cuCtxGetCurrent", r);
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [c, stream] : copyStreams_) {
      if (c == ctx) {
        *s = stream;
        return ncclSuccess;
      }
    }
    if (const CUresult r = d_->streamCreate(s, CU_STREAM_NON_BLOCKING); r != CUDA_SUCCESS)
      return fail("cuStreamCreate", r);
    copyStreams_.emplace_back(ctx, *s);
    return ncclSuccess;
  }

  const Driver* const d_;
  const int count_;
  std::mutex mu_;  // primary_ and copyStreams_
  std::vector<Primary> primary_;
  std::vector<std::pair<CUcontext, CUstream>> copyStreams_;
};

}  // namespace

ncclResult_t cudaRuntimeCreate(const Driver* driver, DeviceRuntime** out, std::string* error) {
  *out = nullptr;
  int count = 0;
  if (const CUresult r = driver->deviceGetCount(&count); r != CUDA_SUCCESS) {
    *error = failureMessage(driver, "cuDeviceGetCount", r);
    return ncclUnhandledCudaError;
  }
  if (count <= 0) {
    *error = "the CUDA driver sees no device (check CUDA_VISIBLE_DEVICES); use the host backend (PLEXUS_BACKEND=host)";
    return ncclSystemError;
  }
  *out = new CudaRuntime(driver, count);
  return ncclSuccess;
}

ncclResult_t cudaRuntimeCreate(DeviceRuntime** out, std::string* error) {
  *out = nullptr;
  const Driver* d = driver(error);
  if (!d) return ncclSystemError;
  return cudaRuntimeCreate(d, out, error);
}

}  // namespace plexus
