// plexus-gpu-tests syncprobe: which CUDA calls wait for kernels already running. A report, not a test: a gate
// kernel holds one stream while a helper thread makes one call; a call still inside after 1.5 s waits for the
// running kernel (it returns once the gate opens). What a collective library may call while its peers' kernels
// spin (enqueue, abort, teardown) follows from it: a call that waits can deadlock ranks that share a GPU. The driver's
// entry points come through plexus/cuda/driver.h (loaded at run time: the binary must start where no driver is).
#include <plexus/cuda/driver.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "gpu_test.h"

namespace gt {
namespace {

__global__ void probeLookedUp(int* p) { p[0] = 1; }
__global__ void probeLaunched(int* p) { p[1] = 1; }
__global__ void probeAttributes(int* p) { p[2] = 1; }

namespace pc = plexus::cuda;
const pc::Driver* drv = nullptr;

#define PROBE_CU(call)                                                              \
  do {                                                                              \
    pc::CUresult r_ = (call);                                                       \
    if (r_ != pc::CUDA_SUCCESS) fatal("%s:%d: %s: CUresult %d", __FILE__, __LINE__, #call, (int)r_); \
  } while (0)

struct Vmm {
  pc::CUmemGenericAllocationHandle handle = 0;
  pc::CUdeviceptr ptr = 0;
  size_t size = 0;
};

Vmm vmmAlloc() {
  pc::CUmemAllocationProp prop{};
  prop.type = pc::CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = pc::CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = pc::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  PROBE_CU(drv->memGetAllocationGranularity(&gran, &prop, pc::CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  Vmm v;
  v.size = gran;
  PROBE_CU(drv->memCreate(&v.handle, v.size, &prop, 0));
  PROBE_CU(drv->memAddressReserve(&v.ptr, v.size, gran, 0, 0));
  PROBE_CU(drv->memMap(v.ptr, v.size, 0, v.handle, 0));
  pc::CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = pc::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  PROBE_CU(drv->memSetAccess(v.ptr, v.size, &access, 1));
  return v;
}

void vmmFree(const Vmm& v) {
  PROBE_CU(drv->memUnmap(v.ptr, v.size));
  PROBE_CU(drv->memAddressFree(v.ptr, v.size));
  PROBE_CU(drv->memRelease(v.handle));
}

}  // namespace

int testSyncProbe(int, char**) {
  requireDevice(false);
  startWatchdog(300);
  GT_CUDA(cudaSetDevice(0));
  GT_CUDA(cudaFree(nullptr));
  std::string why;
  if (!(drv = pc::driver(&why))) fatal("the CUDA driver did not load: %s", why.c_str());
  cudaStream_t held, other;
  GT_CUDA(cudaStreamCreateWithFlags(&held, cudaStreamNonBlocking));
  GT_CUDA(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  int* gate = nullptr;
  GT_CUDA(cudaHostAlloc(&gate, 2 * sizeof(int), cudaHostAllocMapped));
  int* devGate = nullptr;
  GT_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&devGate), gate, 0));
  int* scratch = nullptr;
  GT_CUDA(cudaMalloc(&scratch, 64));
  cudaMemPool_t pool = nullptr;
  cudaMemPoolProps poolProps{};
  poolProps.allocType = cudaMemAllocationTypePinned;
  poolProps.location.type = cudaMemLocationTypeDevice;
  poolProps.location.id = 0;
  GT_CUDA(cudaMemPoolCreate(&pool, &poolProps));
  pc::CUmoduleLoadingMode mode = pc::CU_MODULE_EAGER_LOADING;
  PROBE_CU(drv->moduleGetLoadingMode(&mode));
  note("module loading mode: %s (CUDA_MODULE_LOADING=%s)", mode == pc::CU_MODULE_LAZY_LOADING ? "lazy" : "eager",
       std::getenv("CUDA_MODULE_LOADING") ? std::getenv("CUDA_MODULE_LOADING") : "unset");

  // Made ahead where the probe is of freeing.
  void *devFree = nullptr, *hostFree = nullptr, *poolFree = nullptr;
  Vmm vmmToFree;
  std::vector<char> registered(1 << 20);
  int waits = 0;
  auto probe = [&](const char* what, const std::function<void()>& prepare, const std::function<void()>& call) {
    prepare();
    gate[0] = gate[1] = 0;
    launchGate(held, devGate, devGate + 1);
    // The gate kernel runs: it set gate[1] (bounded: a gate that never starts is a broken device).
    for (const double start = nowSeconds(); !reinterpret_cast<volatile int*>(gate)[1];) {
      if (nowSeconds() - start > 5) fatal("the gate kernel never started");
      std::this_thread::yield();
    }
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::thread t([&] {
      GT_CUDA(cudaSetDevice(0));
      call();
      std::lock_guard<std::mutex> lock(m);
      done = true;
      cv.notify_one();
    });
    const double t0 = nowSeconds();
    bool waited;
    {
      // The window is the verdict: a call still inside 1.5 s after the kernel started waits for it.
      std::unique_lock<std::mutex> lock(m);
      waited = !cv.wait_for(lock, std::chrono::milliseconds(1500), [&] { return done; });
    }
    const double took = nowSeconds() - t0;
    reinterpret_cast<volatile int*>(gate)[0] = 1;
    t.join();
    GT_CUDA(cudaStreamSynchronize(held));
    GT_CUDA(cudaStreamSynchronize(other));
    waits += waited;
    std::printf("SYNCPROBE %-58s %s\n", what,
                waited ? "WAITS for the running kernel" : format("returns (%.3f ms)", took * 1e3).c_str());
  };
  auto none = [] {};
  probe("cuLaunchKernel of a kernel never used (lazy load)", none,
        [&] { probeLaunched<<<1, 1, 0, other>>>(scratch); });
  probe("cudaGetFuncBySymbol of a kernel never used (lazy load)", none, [&] {
    cudaFunction_t fn;
    GT_CUDA(cudaGetFuncBySymbol(&fn, (const void*)probeLookedUp));
  });
  probe("cudaFuncGetAttributes of a kernel never used (lazy load)", none, [&] {
    cudaFuncAttributes attr;
    GT_CUDA(cudaFuncGetAttributes(&attr, (const void*)probeAttributes));
  });
  probe("cudaMalloc 4 MiB", none, [&] {
    void* p;
    GT_CUDA(cudaMalloc(&p, 4 << 20));
    devFree = p;
  });
  probe("cudaFree (cudaMalloc'd)", [&] { if (!devFree) GT_CUDA(cudaMalloc(&devFree, 4 << 20)); },
        [&] { GT_CUDA(cudaFree(devFree)); devFree = nullptr; });
  probe("cudaHostAlloc 1 MiB mapped", none, [&] {
    void* p;
    GT_CUDA(cudaHostAlloc(&p, 1 << 20, cudaHostAllocMapped | cudaHostAllocPortable));
    hostFree = p;
  });
  probe("cudaFreeHost", [&] { if (!hostFree) GT_CUDA(cudaHostAlloc(&hostFree, 1 << 20, cudaHostAllocMapped)); },
        [&] { GT_CUDA(cudaFreeHost(hostFree)); hostFree = nullptr; });
  probe("cudaHostRegister 1 MiB mapped", none,
        [&] { GT_CUDA(cudaHostRegister(registered.data(), registered.size(), cudaHostRegisterMapped)); });
  probe("cudaHostUnregister", none, [&] { GT_CUDA(cudaHostUnregister(registered.data())); });
  probe("cuMemCreate + cuMemAddressReserve + cuMemMap + cuMemSetAccess", none, [&] { vmmToFree = vmmAlloc(); });
  probe("cuMemUnmap + cuMemAddressFree + cuMemRelease", [&] { if (!vmmToFree.ptr) vmmToFree = vmmAlloc(); },
        [&] { vmmFree(vmmToFree); vmmToFree = Vmm{}; });
  probe("cudaMallocFromPoolAsync 4 MiB (own pool, own stream) + sync", none, [&] {
    GT_CUDA(cudaMallocFromPoolAsync(&poolFree, 4 << 20, pool, other));
    GT_CUDA(cudaStreamSynchronize(other));
  });
  probe("cudaFreeAsync (pool) + sync of its stream", none, [&] {
    GT_CUDA(cudaFreeAsync(poolFree, other));
    GT_CUDA(cudaStreamSynchronize(other));
  });
  probe("cudaMemsetAsync + sync on another non-blocking stream", none, [&] {
    GT_CUDA(cudaMemsetAsync(scratch, 0, 64, other));
    GT_CUDA(cudaStreamSynchronize(other));
  });
  probe("cudaIpcGetMemHandle", none, [&] {
    cudaIpcMemHandle_t h;
    GT_CUDA(cudaIpcGetMemHandle(&h, scratch));
  });
  probe("cudaStreamCreate + cudaStreamDestroy", none, [&] {
    cudaStream_t s;
    GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    GT_CUDA(cudaStreamDestroy(s));
  });
  probe("cudaEventCreate + cudaEventDestroy", none, [&] {
    cudaEvent_t e;
    GT_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    GT_CUDA(cudaEventDestroy(e));
  });
  GT_CUDA(cudaMemPoolDestroy(pool));
  note("%d of the calls waited for the running kernel", waits);
  return finish("syncprobe (a report: which calls wait for running kernels)");
}

}  // namespace gt
