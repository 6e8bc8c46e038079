// Loading the CUDA driver (plexus/cuda/driver.h) where it cannot be loaded, from the toolkit's stub, and from a fake
// libcuda that answers like a driver of a given version; and the CUDA runtime's creation on this machine.
#include <doctest/doctest.h>
#include <plexus/cuda/driver.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>

#include "device/cuda_runtime.h"
#include "fake_libcuda.h"
#include "skip.h"

namespace pc = plexus::cuda;

namespace {

constexpr const char* kStub = "/usr/local/cuda/lib64/stubs/libcuda.so";

fake::State* fakeState(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  REQUIRE_MESSAGE(h, dlerror());
  auto* get = reinterpret_cast<fake::State* (*)()>(dlsym(h, "plexusFakeCuda"));
  REQUIRE(!!get);
  fake::State* s = get();
  s->reset();
  return s;
}

// What the fake at path hands out for symbol (its plexusFakeCudaSymbol, reached as the loader reaches the fake).
void* fakeSymbol(const char* path, const char* symbol) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  auto* get = h ? reinterpret_cast<void* (*)(const char*)>(dlsym(h, "plexusFakeCudaSymbol")) : nullptr;
  return get ? get(symbol) : nullptr;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("cuda driver: a path that does not exist fails, naming it and the host backend") {
  pc::Driver d;
  d.library = reinterpret_cast<void*>(1);  // must be cleared
  std::string error;
  CHECK_FALSE(pc::loadDriver("/nonexistent/plexus/libcuda.so.1", &d, &error));
  MESSAGE(error);
  CHECK(contains(error, "/nonexistent/plexus/libcuda.so.1 could not be loaded ("));
  CHECK(contains(error, "no NVIDIA driver on this machine"));
  CHECK(contains(error, "use the host backend (PLEXUS_BACKEND=host)"));
  CHECK(d.library == nullptr);
  CHECK(!d.memAlloc);
}

TEST_CASE("cuda driver: the toolkit's stub library fails with CUDA_ERROR_STUB_LIBRARY") {
  if (access(kStub, R_OK) != 0) {
    testskip::skip(std::string(kStub) + " is not here");
    return;
  }
  pc::Driver d;
  std::string error;
  CHECK_FALSE(pc::loadDriver(kStub, &d, &error));
  MESSAGE(error);
  // The stub answers every call with CUDA_ERROR_STUB_LIBRARY, cuGetProcAddress_v2 and cuGetErrorName included: the
  // first lookup (cuGetErrorName) fails, and the name comes from the header's own table.
  CHECK(contains(error, std::string(kStub) + " is the CUDA toolkit's stub library, not a driver"));
  CHECK(contains(error,
                 "cuGetProcAddress(cuGetErrorName) failed: CUDA_ERROR_STUB_LIBRARY (CUDA driver is a stub "
                 "library)"));
  CHECK(contains(error, "install the NVIDIA driver, or use the host backend (PLEXUS_BACKEND=host)"));
  CHECK(d.library == nullptr);
}

TEST_CASE("cuda driver: a library that is no driver at all is refused") {
  pc::Driver d;
  std::string error;
  CHECK_FALSE(pc::loadDriver("libm.so.6", &d, &error));
  MESSAGE(error);
  CHECK(contains(error, "libm.so.6 exports neither cuGetProcAddress_v2 nor cuGetProcAddress"));
  CHECK(contains(error, "PLEXUS_BACKEND=host"));
}

TEST_CASE("cuda driver: every entry point comes from cuGetProcAddress under its own name, at the CUDA 12.0 ABI") {
  fake::State* fake = fakeState(PLEXUS_FAKE_CUDA);
  pc::Driver d;
  std::string error;
  REQUIRE_MESSAGE(pc::loadDriver(PLEXUS_FAKE_CUDA, &d, &error), error);
  CHECK(d.library != nullptr);
  CHECK(d.version == 12040);
  CHECK(fake->initFlags == 0);

  // The pairing of names and members, written here independently of the header's.
  const std::pair<const char*, void*> entries[] = {
      {"cuGetProcAddress", reinterpret_cast<void*>(d.getProcAddress)},
      {"cuGetErrorName", reinterpret_cast<void*>(d.getErrorName)},
      {"cuGetErrorString", reinterpret_cast<void*>(d.getErrorString)},
      {"cuInit", reinterpret_cast<void*>(d.init)},
      {"cuDriverGetVersion", reinterpret_cast<void*>(d.driverGetVersion)},
      {"cuDeviceGetCount", reinterpret_cast<void*>(d.deviceGetCount)},
      {"cuDeviceGet", reinterpret_cast<void*>(d.deviceGet)},
      {"cuDeviceGetAttribute", reinterpret_cast<void*>(d.deviceGetAttribute)},
      {"cuDeviceGetPCIBusId", reinterpret_cast<void*>(d.deviceGetPCIBusId)},
      {"cuDeviceCanAccessPeer", reinterpret_cast<void*>(d.deviceCanAccessPeer)},
      {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(d.devicePrimaryCtxRetain)},
      {"cuDevicePrimaryCtxRelease", reinterpret_cast<void*>(d.devicePrimaryCtxRelease)},
      {"cuCtxGetCurrent", reinterpret_cast<void*>(d.ctxGetCurrent)},
      {"cuCtxSetCurrent", reinterpret_cast<void*>(d.ctxSetCurrent)},
      {"cuCtxGetDevice", reinterpret_cast<void*>(d.ctxGetDevice)},
      {"cuCtxEnablePeerAccess", reinterpret_cast<void*>(d.ctxEnablePeerAccess)},
      {"cuMemAlloc", reinterpret_cast<void*>(d.memAlloc)},
      {"cuMemFree", reinterpret_cast<void*>(d.memFree)},
      {"cuMemHostAlloc", reinterpret_cast<void*>(d.memHostAlloc)},
      {"cuMemHostGetDevicePointer", reinterpret_cast<void*>(d.memHostGetDevicePointer)},
      {"cuMemFreeHost", reinterpret_cast<void*>(d.memFreeHost)},
      {"cuMemHostRegister", reinterpret_cast<void*>(d.memHostRegister)},
      {"cuMemHostUnregister", reinterpret_cast<void*>(d.memHostUnregister)},
      {"cuMemcpyHtoD", reinterpret_cast<void*>(d.memcpyHtoD)},
      {"cuMemcpyDtoH", reinterpret_cast<void*>(d.memcpyDtoH)},
      {"cuMemcpyHtoDAsync", reinterpret_cast<void*>(d.memcpyHtoDAsync)},
      {"cuMemcpyDtoHAsync", reinterpret_cast<void*>(d.memcpyDtoHAsync)},
      {"cuMemcpyAsync", reinterpret_cast<void*>(d.memcpyAsync)},
      {"cuMemsetD8", reinterpret_cast<void*>(d.memsetD8)},
      {"cuMemsetD8Async", reinterpret_cast<void*>(d.memsetD8Async)},
      {"cuMemGetAddressRange", reinterpret_cast<void*>(d.memGetAddressRange)},
      {"cuMemCreate", reinterpret_cast<void*>(d.memCreate)},
      {"cuMemRelease", reinterpret_cast<void*>(d.memRelease)},
      {"cuMemAddressReserve", reinterpret_cast<void*>(d.memAddressReserve)},
      {"cuMemAddressFree", reinterpret_cast<void*>(d.memAddressFree)},
      {"cuMemMap", reinterpret_cast<void*>(d.memMap)},
      {"cuMemUnmap", reinterpret_cast<void*>(d.memUnmap)},
      {"cuMemSetAccess", reinterpret_cast<void*>(d.memSetAccess)},
      {"cuMemGetAllocationGranularity", reinterpret_cast<void*>(d.memGetAllocationGranularity)},
      {"cuMemExportToShareableHandle", reinterpret_cast<void*>(d.memExportToShareableHandle)},
      {"cuMemImportFromShareableHandle", reinterpret_cast<void*>(d.memImportFromShareableHandle)},
      {"cuMemGetHandleForAddressRange", reinterpret_cast<void*>(d.memGetHandleForAddressRange)},
      {"cuIpcGetMemHandle", reinterpret_cast<void*>(d.ipcGetMemHandle)},
      {"cuIpcOpenMemHandle", reinterpret_cast<void*>(d.ipcOpenMemHandle)},
      {"cuIpcCloseMemHandle", reinterpret_cast<void*>(d.ipcCloseMemHandle)},
      {"cuPointerGetAttributes", reinterpret_cast<void*>(d.pointerGetAttributes)},
      {"cuStreamCreate", reinterpret_cast<void*>(d.streamCreate)},
      {"cuStreamDestroy", reinterpret_cast<void*>(d.streamDestroy)},
      {"cuStreamSynchronize", reinterpret_cast<void*>(d.streamSynchronize)},
      {"cuStreamQuery", reinterpret_cast<void*>(d.streamQuery)},
      {"cuStreamWaitEvent", reinterpret_cast<void*>(d.streamWaitEvent)},
      {"cuStreamWaitValue64", reinterpret_cast<void*>(d.streamWaitValue64)},
      {"cuStreamGetCaptureInfo", reinterpret_cast<void*>(d.streamGetCaptureInfo)},
      {"cuThreadExchangeStreamCaptureMode", reinterpret_cast<void*>(d.threadExchangeStreamCaptureMode)},
      {"cuEventCreate", reinterpret_cast<void*>(d.eventCreate)},
      {"cuEventRecord", reinterpret_cast<void*>(d.eventRecord)},
      {"cuEventQuery", reinterpret_cast<void*>(d.eventQuery)},
      {"cuEventSynchronize", reinterpret_cast<void*>(d.eventSynchronize)},
      {"cuEventDestroy", reinterpret_cast<void*>(d.eventDestroy)},
      {"cuLaunchKernel", reinterpret_cast<void*>(d.launchKernel)},
      {"cuLaunchHostFunc", reinterpret_cast<void*>(d.launchHostFunc)},
      {"cuFuncGetAttribute", reinterpret_cast<void*>(d.funcGetAttribute)},
      {"cuFuncSetAttribute", reinterpret_cast<void*>(d.funcSetAttribute)},
      {"cuModuleGetLoadingMode", reinterpret_cast<void*>(d.moduleGetLoadingMode)},
      {"cuUserObjectCreate", reinterpret_cast<void*>(d.userObjectCreate)},
      {"cuUserObjectRelease", reinterpret_cast<void*>(d.userObjectRelease)},
      {"cuGraphRetainUserObject", reinterpret_cast<void*>(d.graphRetainUserObject)},
  };
  static_assert(sizeof(pc::Driver) == 16 + std::size(entries) * sizeof(void*), "an entry point is not listed here");
  std::set<void*> distinct;
  for (const auto& [name, fn] : entries) {
    INFO(name);
    CHECK(fn != nullptr);
    CHECK(fn == fakeSymbol(PLEXUS_FAKE_CUDA, name));
    distinct.insert(fn);
  }
  CHECK(distinct.size() == std::size(entries));
  // Each looked up once, all at 12000 with the default flags; cuInit ran before the bulk of the lookups, and the
  // version check before them too (an old driver may lack them).
  CHECK(fake->procVersions.size() == std::size(entries));
  for (int v : fake->procVersions) CHECK(v == pc::kDriverAbiVersion);
  for (auto f : fake->procFlags) CHECK(f == pc::CU_GET_PROC_ADDRESS_DEFAULT);
  const auto at = [&](const std::string& call) {
    return std::find(fake->calls.begin(), fake->calls.end(), call) - fake->calls.begin();
  };
  CHECK(at("cuInit") < at("cuDriverGetVersion"));
  CHECK(at("cuDriverGetVersion") < at("proc:cuMemAlloc"));
}

TEST_CASE("cuda driver: cuInit's failure is named, with what to do") {
  fake::State* fake = fakeState(PLEXUS_FAKE_CUDA);
  fake->initResult = pc::CUDA_ERROR_NO_DEVICE;
  pc::Driver d;
  std::string error;
  CHECK_FALSE(pc::loadDriver(PLEXUS_FAKE_CUDA, &d, &error));
  MESSAGE(error);
  CHECK(error ==
        "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected): no CUDA device is visible to this "
        "process (check CUDA_VISIBLE_DEVICES); use the host backend (PLEXUS_BACKEND=host)");
  CHECK(d.library == nullptr);

  fake->reset();
  fake->initResult = pc::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH;
  CHECK_FALSE(pc::loadDriver(PLEXUS_FAKE_CUDA, &d, &error));
  CHECK(contains(error, "cuInit failed: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH ("));
  CHECK(contains(error, "the NVIDIA driver cannot start; use the host backend (PLEXUS_BACKEND=host)"));
}

TEST_CASE("cuda driver: a driver older than CUDA 12.0 is refused, saying how old it is") {
  for (const char* path : {PLEXUS_FAKE_CUDA, PLEXUS_FAKE_CUDA_V1}) {
    INFO(std::string(path));
    fake::State* fake = fakeState(path);
    fake->version = 11040;
    pc::Driver d;
    std::string error;
    CHECK_FALSE(pc::loadDriver(path, &d, &error));
    MESSAGE(error);
    CHECK(contains(error, "the CUDA driver supports CUDA 11.4; Plexus needs 12.0 or newer"));
    CHECK(contains(error, "update the NVIDIA driver, or use the host backend (PLEXUS_BACKEND=host)"));
    // Nothing past the first four entry points was asked for.
    CHECK(fake->procVersions.size() == 4);
  }
}

TEST_CASE("cuda driver: an entry point the driver lacks is named") {
  fake::State* fake = fakeState(PLEXUS_FAKE_CUDA);
  fake->missingSymbol = "cuMemGetHandleForAddressRange";
  pc::Driver d;
  std::string error;
  CHECK_FALSE(pc::loadDriver(PLEXUS_FAKE_CUDA, &d, &error));
  MESSAGE(error);
  CHECK(contains(error, "lacks cuMemGetHandleForAddressRange at the CUDA 12.0 ABI (no such symbol)"));
  CHECK(contains(error, "update the NVIDIA driver, or use the host backend"));
  CHECK(!d.memAlloc);  // nothing half-loaded
}

TEST_CASE("cuda driver: failure messages take the driver's words, else the header's, else the number") {
  fake::State* fake = fakeState(PLEXUS_FAKE_CUDA);
  (void)fake;
  pc::Driver d;
  std::string error;
  REQUIRE_MESSAGE(pc::loadDriver(PLEXUS_FAKE_CUDA, &d, &error), error);
  CHECK(pc::failureMessage(&d, "cuMemAlloc", pc::CUDA_ERROR_OUT_OF_MEMORY) ==
        "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory (fake driver))");
  CHECK(pc::failureMessage(&d, "cuCtxSetCurrent", pc::CUDA_ERROR_INVALID_CONTEXT) ==
        "cuCtxSetCurrent failed: CUDA_ERROR_INVALID_CONTEXT (invalid device context)");
  CHECK(pc::failureMessage(nullptr, "cuMemAlloc", pc::CUDA_ERROR_OUT_OF_MEMORY) ==
        "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
  CHECK(pc::failureMessage(&d, "cuFoo", 12345) == "cuFoo failed: CUDA error 12345 (no description)");
}

TEST_CASE("cuda runtime: creation on this machine fails cleanly where no driver loads, and works where one does") {
  pc::Driver d;
  std::string loadError;
  const bool haveDriver = pc::loadDriver(nullptr, &d, &loadError);
  plexus::DeviceRuntime* rt = reinterpret_cast<plexus::DeviceRuntime*>(1);
  std::string error;
  const ncclResult_t res = plexus::cudaRuntimeCreate(&rt, &error);
  MESSAGE("cudaRuntimeCreate: ", int(res), " ", error);
  if (getenv("PLEXUS_CUDA_DRIVER")) {
    MESSAGE("PLEXUS_CUDA_DRIVER is set: the comparison with libcuda.so.1 does not apply");
    return;
  }
  if (!haveDriver) {
    CHECK(res == ncclSystemError);
    CHECK(rt == nullptr);
    CHECK(error == loadError);
    CHECK(contains(error, "libcuda.so.1"));
    CHECK(contains(error, "PLEXUS_BACKEND=host"));
    // Remembered: a second call says the same, without loading again.
    std::string again;
    CHECK(plexus::cudaRuntimeCreate(&rt, &again) == ncclSystemError);
    CHECK(again == error);
  } else {
    MESSAGE("a CUDA driver is installed here (", d.version, ")");
    int count = 0;
    const bool devices = d.deviceGetCount(&count) == pc::CUDA_SUCCESS && count > 0;
    CHECK((res == ncclSuccess) == devices);
    if (res == ncclSuccess) delete rt;
  }
}

TEST_CASE("cuda driver: driver() loads PLEXUS_CUDA_DRIVER once") {
  const char* path = getenv("PLEXUS_CUDA_DRIVER");
  if (!path || std::string(path) != PLEXUS_FAKE_CUDA) {
    testskip::skip("run with PLEXUS_CUDA_DRIVER=" PLEXUS_FAKE_CUDA " (ctest unit_cuda.driver_env does)");
    return;
  }
  std::string error;
  const pc::Driver* d = pc::driver(&error);
  REQUIRE_MESSAGE(d, error);
  CHECK(reinterpret_cast<void*>(d->memAlloc) == fakeSymbol(PLEXUS_FAKE_CUDA, "cuMemAlloc"));
  CHECK(pc::driver(nullptr) == d);
  plexus::DeviceRuntime* rt = nullptr;
  REQUIRE(plexus::cudaRuntimeCreate(&rt, &error) == ncclSuccess);
  int count = 0;
  CHECK(rt->deviceCount(&count) == ncclSuccess);
  CHECK(count == 2);
  delete rt;
}
