// The device seam's host implementation, the choice of backend, and the pointer checks of the API.
#include "device/runtime.h"

#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include <plexus/device/arch.h>

#include "comm/communicator.h"
#include "device/cuda_runtime.h"
#include "misc/check.h"
#include "misc/env.h"
#include "stream/host_stream.h"

namespace plexus {

namespace {

// The device the calling thread chose with plexusSetDevice (ranks as threads name their host device so).
thread_local int hostDevice = 0;
thread_local bool hostDeviceChosen = false;

HostStream* asHostStream(cudaStream_t stream) { return reinterpret_cast<HostStream*>(stream); }

// Host "devices" are the process's memory and threads: every kind of memory is ordinary memory, a stream is a host
// stream (the core passes it resolved: the default stream of a host device is a HostStream too), and a kernel
// runs on the communicator's host executor, called from the stream's thread.
class HostRuntime final : public DeviceRuntime {
 public:
  plexusBackend_t backend() const override { return plexusBackendHost; }
  const char* name() const override { return "host"; }
  ncclResult_t deviceCount(int* count) override {
    *count = PLEXUS_MAX_HOST_DEVICES;
    return ncclSuccess;
  }
  ncclResult_t currentDevice(int* device) override {
    *device = hostDevice;
    return ncclSuccess;
  }
  ncclResult_t setCurrent(int device) override {
    if (device < 0 || device >= PLEXUS_MAX_HOST_DEVICES)
      return setError(nullptr, ncclInvalidArgument, "host device %d is out of range [0, %d)", device,
                      PLEXUS_MAX_HOST_DEVICES);
    hostDevice = device;
    hostDeviceChosen = true;
    return ncclSuccess;
  }
  ncclResult_t alloc(MemKind kind, size_t bytes, DeviceMem* mem) override {
    // Page-aligned and zeroed, as cuMemAlloc'd memory is aligned (and as connectors expect clean flags). Page-locked
    // kinds are resident from the start, as CUDA's are: a work FIFO or a net buffer is a ring, and its first pass
    // would otherwise fault each page in while the peers wait (on a VM a fault costs about 6 us more than populating
    // here, and a page's first write about 5 us either way).
    const int populate = kind == MemKind::Device ? 0 : MAP_POPULATE;
    void* p = mmap(nullptr, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | populate, -1, 0);
    if (p == MAP_FAILED)
      return setError(nullptr, ncclSystemError, "host backend: cannot allocate %zu bytes: %s", bytes, strerror(errno));
    *mem = DeviceMem{p, p, bytes, kind};
    return ncclSuccess;
  }
  void free(DeviceMem* mem) override {
    if (mem->host) munmap(mem->host, mem->size ? mem->size : 1);
    *mem = DeviceMem{};
  }
  ncclResult_t copyToDevice(void* dst, const void* src, size_t bytes) override {
    memcpy(dst, src, bytes);
    return ncclSuccess;
  }
  ncclResult_t copyFromDevice(void* dst, const void* src, size_t bytes) override {
    memcpy(dst, src, bytes);
    return ncclSuccess;
  }
  ncclResult_t pointerInfo(const void*, PointerInfo* info) override {
    *info = PointerInfo{};
    return ncclSuccess;
  }
  ncclResult_t launch(cudaStream_t stream, const KernelLaunch& k) override {
    // The arguments are the caller's until launch returns, as with cuLaunchKernel: the stream copies them into the
    // operation's slot (a buffer reused from launch to launch, sized to what launches use: a few hundred bytes, not
    // the 4 KiB a parameter may take). The event's record rides on the kernel's operation: one operation, not two.
    Launch l{static_cast<const HostKernel*>(k.function), k.grid, static_cast<HostEvent*>(k.recordAfter), 0, k.argsBytes};
    if (l.event) l.eventGen = l.event->record();
    asHostStream(stream)->enqueue(&runLaunch, nullptr, &l, sizeof l, k.args, k.argsBytes);
    return ncclSuccess;
  }
  ncclResult_t hostCallback(cudaStream_t stream, void (*fn)(void*), void* arg) override {
    asHostStream(stream)->enqueue([fn, arg] {
      fn(arg);
      return ncclSuccess;
    });
    return ncclSuccess;
  }
  // The core's events (not the API's plexusEvent: no timing, no condition variable): a record is one stream
  // operation that publishes its generation, so a launch pays no lock for the event that follows it.
  ncclResult_t eventCreate(void** event) override {
    *event = new HostEvent();
    return ncclSuccess;
  }
  ncclResult_t eventRecord(void* event, cudaStream_t stream) override {
    auto* e = static_cast<HostEvent*>(event);
    const uint64_t gen = e->record();
    asHostStream(stream)->enqueue([e, gen] {
      e->complete(gen);
      return ncclSuccess;
    });
    return ncclSuccess;
  }
  ncclResult_t loadKernel(const void*) override { return ncclSuccess; }
  ncclResult_t copyAsync(void*, const void*, size_t, cudaStream_t) override { return ncclInvalidUsage; }
  ncclResult_t streamWaitValue(cudaStream_t, void*, uint64_t) override { return ncclInvalidUsage; }
  ncclResult_t eventQuery(void* event) override { return static_cast<HostEvent*>(event)->done() ? ncclSuccess : ncclInProgress; }
  ncclResult_t streamWaitEvent(cudaStream_t stream, void* event) override {
    auto* e = static_cast<HostEvent*>(event);
    const uint64_t target = e->recorded.load(std::memory_order_relaxed);
    asHostStream(stream)->enqueue([e, target] {
      // Another stream's progress: rare (a launch on a new stream), and that stream's own thread moves it.
      for (uint32_t iter = 0; e->completed.load(std::memory_order_acquire) < target; iter++)
        dev::backoff(iter < 4096 ? iter : 4096);
      return ncclSuccess;
    });
    return ncclSuccess;
  }
  void eventDestroy(void* event) override {
    auto* e = static_cast<HostEvent*>(event);
    // A pending record still touches the event: wait for it.
    for (uint32_t iter = 0; !e->done(); iter++) dev::backoff(iter < 4096 ? iter : 4096);
    delete e;
  }
  ncclResult_t captureStatus(cudaStream_t, bool* capturing, void** graph) override {
    *capturing = false;
    *graph = nullptr;
    return ncclSuccess;
  }
  ncclResult_t graphRetain(void*, void (*)(void*), void*) override {
    return setError(nullptr, ncclInvalidUsage, "host backend: host streams are never captured into graphs");
  }
  ncclResult_t exportDmabuf(const DeviceMem&, int*, uint64_t*) override { return ncclInvalidUsage; }
  std::string lastError() override { return ""; }

 private:
  // The core's use of an event: records from one thread at a time (the communicator's), completed in the order they
  // were made (a record on another stream than the last follows a wait for the event, as the launcher's order event
  // does). So neither side needs a locked instruction, which would wait for the stream's earlier stores to reach
  // their peers' caches: a launch's last store went to the rank it received from (2 ranks, 8 B Broadcast: 18% of the
  // receiver's cycles sat on the compare-and-swap this replaced).
  struct HostEvent {
    std::atomic<uint64_t> recorded{0}, completed{0};
    bool done() const { return completed.load(std::memory_order_acquire) >= recorded.load(std::memory_order_relaxed); }
    uint64_t record() {
      const uint64_t gen = recorded.load(std::memory_order_relaxed) + 1;
      recorded.store(gen, std::memory_order_relaxed);
      return gen;
    }
    void complete(uint64_t gen) {
      if (completed.load(std::memory_order_relaxed) < gen) completed.store(gen, std::memory_order_release);
    }
  };
  struct alignas(16) Launch {  // the arguments follow it, aligned as a malloc'd parameter would be
    const HostKernel* kernel;
    unsigned grid;
    HostEvent* event;
    uint64_t eventGen;
    size_t argsBytes;
  };
  static ncclResult_t runLaunch(void*, const char* bytes, HostStream::Following* next) {
    Launch l;
    memcpy(&l, bytes, sizeof l);
    if (l.kernel->join) {
      const HostKernel* behind = nullptr;
      if (const char* b = next->bytes(0)) memcpy(&behind, b + offsetof(Launch, kernel), sizeof behind);
      if (behind == l.kernel) return runJoined(l, bytes, next);
    }
    const ncclResult_t r = l.kernel->run(l.kernel->self, bytes + sizeof l, l.argsBytes, l.grid);
    if (l.event) l.event->complete(l.eventGen);
    return r;
  }
  // A launch with the launches of the same kernel queued right behind it that the kernel joins to it (sends and
  // receives that cannot see each other's effects), as one pass: a rank then moves on to the next operation's
  // messages while it waits for a peer in this one, and where ranks share cores one switch to a peer serves several
  // operations. Their events complete in order once the pass is done. Out of line: the pass's 12 KiB of arguments
  // stay off the stack of a launch that runs alone.
  [[gnu::noinline]] static ncclResult_t runJoined(const Launch& l, const char* bytes, HostStream::Following* next) {
    HostJoin pass;
    pass.args.nWorks = 0;
    uint64_t n = 0;
    if (l.kernel->join(l.kernel->self, &pass, bytes + sizeof l)) {
      for (const char* b; (b = next->bytes(n)) != nullptr; n++) {
        Launch m;
        memcpy(&m, b, sizeof m);
        if (m.kernel != l.kernel || !l.kernel->join(l.kernel->self, &pass, b + sizeof m)) break;
      }
    }
    const ncclResult_t r = n ? l.kernel->run(l.kernel->self, &pass.args, sizeof pass.args, l.grid)
                             : l.kernel->run(l.kernel->self, bytes + sizeof l, l.argsBytes, l.grid);
    if (l.event) l.event->complete(l.eventGen);
    for (uint64_t i = 0; i < n; i++) {
      Launch m;
      memcpy(&m, next->bytes(i), sizeof m);
      if (m.event) m.event->complete(m.eventGen);
    }
    next->take(n);
    return r;
  }
};

DeviceRuntime* cudaRt = nullptr;
std::string cudaError;
std::atomic<DeviceRuntime*> cudaLoaded{nullptr};
// Set once the driver was looked for and not found: a host-backend pointer check then costs a load and a branch.
std::atomic<bool> cudaAbsent{false};

ncclResult_t cudaRuntime(DeviceRuntime** out) {
  // A function-local static, not std::call_once: every collective's pointer check comes here, and
  // call_once costs thread-local accesses and a call each time.
  static const bool loaded = [] {
    if (cudaRuntimeCreate(&cudaRt, &cudaError) != ncclSuccess) {
      cudaRt = nullptr;
      cudaAbsent.store(true, std::memory_order_relaxed);
      return false;
    }
    cudaLoaded.store(cudaRt, std::memory_order_release);
    return true;
  }();
  *out = cudaRt;
  return loaded ? ncclSuccess : ncclSystemError;
}

}  // namespace

const char* pointerKindName(PointerKind kind) {
  switch (kind) {
    case PointerKind::Host: return "host memory";
    case PointerKind::HostRegistered: return "page-locked host memory";
    case PointerKind::Device: return "device memory";
    case PointerKind::Managed: return "managed memory";
  }
  return "unknown memory";
}

DeviceRuntime* hostRuntime() {
  static auto* rt = new HostRuntime();  // never destroyed: streams may still run at exit
  return rt;
}

DeviceRuntime* cudaRuntimeIfLoaded() { return cudaLoaded.load(std::memory_order_acquire); }

ncclResult_t deviceRuntime(plexusBackend_t backend, DeviceRuntime** out) {
  if (backend == plexusBackendHost) {
    *out = hostRuntime();
    return ncclSuccess;
  }
  if (cudaRuntime(out) != ncclSuccess)
    return setError(nullptr, ncclSystemError, "the CUDA backend cannot run here: %s", cudaError.c_str());
  return ncclSuccess;
}

ncclResult_t chooseBackend(plexusBackend_t* backend, int* device) {
  const std::string want = envStr("BACKEND", "auto");
  DeviceRuntime* cuda = nullptr;
  if (want == "host" || (want == "auto" && hostDeviceChosen)) {
    *backend = plexusBackendHost;
    *device = hostDevice;
    return ncclSuccess;
  }
  if (want == "cuda") {
    NCCLCHECK(deviceRuntime(plexusBackendCuda, &cuda));
  } else if (want != "auto") {
    return setError(nullptr, ncclInvalidArgument,
                    "PLEXUS_BACKEND=%s is not a backend: use host, cuda or auto (the default: CUDA where a CUDA device "
                    "is present and the thread did not choose a host device with plexusSetDevice)", want.c_str());
  } else if (cudaRuntime(&cuda) != ncclSuccess) {
    *backend = plexusBackendHost;
    *device = hostDevice;
    return ncclSuccess;
  }
  *backend = plexusBackendCuda;
  if (cuda->currentDevice(device) != ncclSuccess)
    return setError(nullptr, ncclUnhandledCudaError, "cannot tell the thread's CUDA device: %s",
                    cuda->lastError().c_str());
  return ncclSuccess;
}

ncclResult_t useDevice(plexusBackend_t backend, int device) {
  DeviceRuntime* rt;
  NCCLCHECK(deviceRuntime(backend, &rt));
  int count = 0;
  NCCLCHECK(rt->deviceCount(&count));
  if (device < 0 || device >= count)
    return setError(nullptr, ncclInvalidArgument, "device %d is not a %s device (there are %d)", device, rt->name(),
                    count);
  if (rt->setCurrent(device) != ncclSuccess)
    return setError(nullptr, ncclUnhandledCudaError, "cannot make %s device %d current: %s", rt->name(), device,
                    rt->lastError().c_str());
  return ncclSuccess;
}

ncclResult_t setDevice(int device) {
  if (device < 0 || device >= PLEXUS_MAX_HOST_DEVICES)
    return setError(nullptr, ncclInvalidArgument, "plexusSetDevice: device %d is out of range [0, %d)", device,
                    PLEXUS_MAX_HOST_DEVICES);
  hostDevice = device;
  hostDeviceChosen = true;
  return ncclSuccess;
}

int getDevice() { return hostDevice; }

DeviceGuard::DeviceGuard(ncclComm* comm) {
  if (comm->backend != plexusBackendCuda) return;
  DeviceRuntime* rt = comm->runtime;
  int current = -1;
  if (rt->currentDevice(&current) != ncclSuccess ||
      (current != comm->device && rt->setCurrent(comm->device) != ncclSuccess)) {
    result_ = setError(comm, ncclUnhandledCudaError, "rank %d: cannot make CUDA device %d current: %s", comm->rank,
                       comm->device, rt->lastError().c_str());
    return;
  }
  if (current != comm->device) {
    rt_ = rt;
    caller_ = current;
  }
}

DeviceGuard::~DeviceGuard() {
  if (rt_) rt_->setCurrent(caller_);
}

namespace {

// checkPointer's classification, out of line: the common case (host memory, no driver) keeps no frame.
[[gnu::noinline]] ncclResult_t classifyPointer(ncclComm* comm, const char* api, const char* what, const void* ptr) {
  DeviceRuntime* rt = comm->runtime;
  if (comm->backend == plexusBackendHost && cudaRuntime(&rt) != ncclSuccess) return ncclSuccess;
  PointerInfo info;
  if (rt->pointerInfo(ptr, &info) != ncclSuccess)
    return setError(comm, ncclInvalidArgument, "%s: cannot tell what %s %p is: %s", api, what, ptr,
                    rt->lastError().c_str());
  if (comm->backend == plexusBackendHost) {
    if (info.kind == PointerKind::Device)
      return setError(comm, ncclInvalidArgument,
                      "%s: %s %p is device memory (CUDA device %d), but the communicator runs on the host backend "
                      "(host device %d): pass host memory, or create the communicator on the CUDA device (do not call "
                      "plexusSetDevice on that thread, or set PLEXUS_BACKEND=cuda)", api, what, ptr, info.device,
                      comm->device);
    return ncclSuccess;
  }
  if (info.kind == PointerKind::Host)
    return setError(comm, ncclInvalidArgument,
                    "%s: %s %p is ordinary host memory, which CUDA device %d cannot reach: pass device memory (or "
                    "page-locked/registered host memory)", api, what, ptr, comm->device);
  if (info.kind == PointerKind::Device && info.device != comm->device)
    return setError(comm, ncclInvalidArgument,
                    "%s: %s %p is memory of CUDA device %d, but the communicator is on device %d", api, what, ptr,
                    info.device, comm->device);
  return ncclSuccess;
}

}  // namespace

ncclResult_t checkPointer(ncclComm* comm, const char* api, const char* what, const void* ptr) {
  // A host-backend communicator asks the CUDA driver too where there is one (loaded once; where there is none, the
  // one failed dlopen is all it costs): without a driver no pointer can be device memory.
  if (!ptr || (comm->backend == plexusBackendHost && cudaAbsent.load(std::memory_order_relaxed))) return ncclSuccess;
  return classifyPointer(comm, api, what, ptr);
}

}  // namespace plexus
