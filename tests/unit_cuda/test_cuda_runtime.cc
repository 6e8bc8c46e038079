// The CUDA device runtime (core/src/device/cuda_runtime.cc) over the fake libcuda: which driver calls each seam call
// makes, with which flags, in which capture mode, and what it makes of their answers.
#include <doctest/doctest.h>
#include <plexus/cuda/driver.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "device/cuda_runtime.h"
#include "fake_libcuda.h"
#include "skip.h"

namespace pc = plexus::cuda;
using plexus::DeviceMem;
using plexus::DeviceRuntime;
using plexus::MemKind;
using plexus::PointerInfo;
using plexus::PointerKind;

namespace {

// A fresh fake driver and a runtime over it.
struct Fixture {
  fake::State* fake = nullptr;
  pc::Driver driver;
  std::unique_ptr<DeviceRuntime> rt;

  Fixture() {
    void* h = dlopen(PLEXUS_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
    REQUIRE_MESSAGE(h, dlerror());
    fake = reinterpret_cast<fake::State* (*)()>(dlsym(h, "plexusFakeCuda"))();
    fake->reset();
    std::string error;
    REQUIRE_MESSAGE(pc::loadDriver(PLEXUS_FAKE_CUDA, &driver, &error), error);
    DeviceRuntime* r = nullptr;
    REQUIRE_MESSAGE(plexus::cudaRuntimeCreate(&driver, &r, &error) == ncclSuccess, error);
    rt.reset(r);
    fake->calls.clear();
  }

  size_t count(const std::string& call) const { return std::count(fake->calls.begin(), fake->calls.end(), call); }
};

bool allBytes(const void* p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; i++)
    if (static_cast<const unsigned char*>(p)[i] != v) return false;
  return true;
}

cudaStream_t someStream() { return reinterpret_cast<cudaStream_t>(0x5000); }

}  // namespace

TEST_CASE("cuda runtime: creation counts the devices, and refuses a driver that sees none") {
  Fixture f;
  int count = 0;
  CHECK(f.rt->deviceCount(&count) == ncclSuccess);
  CHECK(count == 2);
  CHECK(f.rt->backend() == plexusBackendCuda);
  CHECK(std::string(f.rt->name()) == "cuda");

  DeviceRuntime* rt = reinterpret_cast<DeviceRuntime*>(1);
  std::string error;
  f.fake->deviceCount = 0;
  CHECK(plexus::cudaRuntimeCreate(&f.driver, &rt, &error) == ncclSystemError);
  CHECK(rt == nullptr);
  CHECK(error ==
        "the CUDA driver sees no device (check CUDA_VISIBLE_DEVICES); use the host backend "
        "(PLEXUS_BACKEND=host)");
  f.fake->failCall = "cuDeviceGetCount";
  f.fake->failResult = pc::CUDA_ERROR_UNKNOWN;
  CHECK(plexus::cudaRuntimeCreate(&f.driver, &rt, &error) == ncclUnhandledCudaError);
  CHECK(error == "cuDeviceGetCount failed: CUDA_ERROR_UNKNOWN (unknown error)");
}

TEST_CASE("cuda runtime: setCurrent retains each primary context once, currentDevice follows the context") {
  Fixture f;
  std::thread([&] {
    int device = -1;
    CHECK(f.rt->currentDevice(&device) == ncclSuccess);
    CHECK(device == 0);                          // no context: device 0, as cudaGetDevice
    CHECK(f.fake->currentContext() == nullptr);  // and none was made
    CHECK(f.rt->setCurrent(1) == ncclSuccess);
    CHECK(f.rt->currentDevice(&device) == ncclSuccess);
    CHECK(device == 1);
    CHECK(f.rt->setCurrent(0) == ncclSuccess);
    CHECK(f.rt->setCurrent(1) == ncclSuccess);
  }).join();
  std::thread([&] {
    CHECK(f.rt->setCurrent(1) == ncclSuccess);
    int device = -1;
    CHECK(f.rt->currentDevice(&device) == ncclSuccess);
    CHECK(device == 1);
    CHECK(f.rt->setCurrent(2) == ncclInvalidArgument);
    CHECK(f.rt->lastError() == "CUDA device 2 does not exist (there are 2)");
    CHECK(f.rt->setCurrent(-1) == ncclInvalidArgument);
  }).join();
  CHECK(f.fake->retains[0] == 1);
  CHECK(f.fake->retains[1] == 1);
  CHECK(f.fake->releases[1] == 0);
  f.rt.reset();
  CHECK(f.fake->releases[0] == 1);
  CHECK(f.fake->releases[1] == 1);
}

TEST_CASE("cuda runtime: a failing driver call is ncclUnhandledCudaError, its message this thread's lastError") {
  Fixture f;
  f.fake->failCall = "cuCtxSetCurrent";
  f.fake->failResult = pc::CUDA_ERROR_OUT_OF_MEMORY;
  CHECK(f.rt->setCurrent(0) == ncclUnhandledCudaError);
  CHECK(f.rt->lastError() == "cuCtxSetCurrent failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory (fake driver))");
  std::thread([&] { CHECK(f.rt->lastError() == ""); }).join();  // per thread
}

TEST_CASE("cuda runtime: device memory is cuMemAlloc'd and zeroed on our stream, in relaxed capture mode") {
  Fixture f;
  REQUIRE(f.rt->setCurrent(1) == ncclSuccess);
  f.fake->setCaptureMode(pc::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  DeviceMem mem;
  REQUIRE(f.rt->alloc(MemKind::Device, 4096, &mem) == ncclSuccess);
  CHECK(mem.ptr != nullptr);
  CHECK(mem.host == nullptr);
  CHECK(mem.size == 4096);
  CHECK(mem.kind == MemKind::Device);
  CHECK(allBytes(mem.ptr, 4096, 0));  // the fake fills with 0xab
  CHECK(f.fake->modeAtAlloc == pc::CU_STREAM_CAPTURE_MODE_RELAXED);
  CHECK(f.fake->captureMode() == pc::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);  // restored
  CHECK(f.fake->memsetStream != nullptr);                                   // not the legacy stream
  CHECK(f.fake->streamFlags == pc::CU_STREAM_NON_BLOCKING);
  CHECK(f.fake->syncStream == f.fake->memsetStream);
  void* ptr = mem.ptr;
  f.rt->free(&mem);
  CHECK(f.fake->freed == std::vector<uintptr_t>{reinterpret_cast<uintptr_t>(ptr)});
  CHECK(mem.ptr == nullptr);
  f.rt->free(&mem);  // freeing an empty DeviceMem does nothing
  CHECK(f.fake->freed.size() == 1);
}

TEST_CASE("cuda runtime: pinned and mapped host memory") {
  Fixture f;
  REQUIRE(f.rt->setCurrent(0) == ncclSuccess);
  DeviceMem pinned, mapped;
  REQUIRE(f.rt->alloc(MemKind::HostPinned, 100, &pinned) == ncclSuccess);
  CHECK(f.fake->hostAllocFlags == pc::CU_MEMHOSTALLOC_PORTABLE);
  CHECK(pinned.ptr == pinned.host);
  CHECK(allBytes(pinned.host, 100, 0));
  REQUIRE(f.rt->alloc(MemKind::HostMapped, 100, &mapped) == ncclSuccess);
  CHECK(f.fake->hostAllocFlags == (pc::CU_MEMHOSTALLOC_PORTABLE | pc::CU_MEMHOSTALLOC_DEVICEMAP));
  CHECK(reinterpret_cast<uintptr_t>(mapped.ptr) == reinterpret_cast<uintptr_t>(mapped.host) + fake::kMappedOffset);
  CHECK(allBytes(mapped.host, 100, 0));
  void* pinnedHost = pinned.host;
  void* mappedHost = mapped.host;
  f.rt->free(&pinned);
  f.rt->free(&mapped);
  CHECK(f.fake->freedHost == std::vector<void*>{pinnedHost, mappedHost});
  CHECK(f.fake->freed.empty());

  // The mapping fails: the pinned memory goes back, and the caller gets nothing.
  f.fake->failCall = "cuMemHostGetDevicePointer";
  f.fake->failResult = pc::CUDA_ERROR_NOT_SUPPORTED;
  CHECK(f.rt->alloc(MemKind::HostMapped, 100, &mapped) == ncclUnhandledCudaError);
  CHECK(f.rt->lastError() == "cuMemHostGetDevicePointer failed: CUDA_ERROR_NOT_SUPPORTED (operation not supported)");
  CHECK(mapped.ptr == nullptr);
  CHECK(f.fake->freedHost.size() == 3);
}

TEST_CASE("cuda runtime: alloc on a thread without a context uses device 0's primary one, 0 bytes is a byte") {
  Fixture f;
  std::thread([&] {
    DeviceMem mem;
    REQUIRE(f.rt->alloc(MemKind::Device, 0, &mem) == ncclSuccess);
    CHECK(mem.ptr != nullptr);
    CHECK(mem.size == 0);
    CHECK(f.fake->currentContext() != nullptr);
    int device = -1;
    CHECK(f.rt->currentDevice(&device) == ncclSuccess);
    CHECK(device == 0);
    f.rt->free(&mem);
  }).join();
  CHECK(f.fake->retains[0] == 1);
}

TEST_CASE("cuda runtime: a failed allocation says why and leaves the capture mode as it was") {
  Fixture f;
  REQUIRE(f.rt->setCurrent(0) == ncclSuccess);
  f.fake->failCall = "cuMemAlloc";
  f.fake->failResult = pc::CUDA_ERROR_OUT_OF_MEMORY;
  DeviceMem mem;
  mem.ptr = reinterpret_cast<void*>(1);
  CHECK(f.rt->alloc(MemKind::Device, 1 << 20, &mem) == ncclUnhandledCudaError);
  CHECK(f.rt->lastError() == "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory (fake driver))");
  CHECK(mem.ptr == nullptr);
  CHECK(f.fake->captureMode() == pc::CU_STREAM_CAPTURE_MODE_GLOBAL);

  // The zeroing fails: the memory goes back.
  f.fake->failCall = "cuMemsetD8Async";
  f.fake->failResult = pc::CUDA_ERROR_ILLEGAL_ADDRESS;
  CHECK(f.rt->alloc(MemKind::Device, 64, &mem) == ncclUnhandledCudaError);
  CHECK(f.rt->lastError() ==
        "cuMemsetD8Async failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)");
  CHECK(f.fake->freed.size() == 1);
  CHECK(mem.ptr == nullptr);
}

TEST_CASE("cuda runtime: synchronous copies run on our non-blocking stream with the capture mode relaxed") {
  Fixture f;
  REQUIRE(f.rt->setCurrent(0) == ncclSuccess);
  DeviceMem mem;
  REQUIRE(f.rt->alloc(MemKind::Device, 64, &mem) == ncclSuccess);
  const size_t streamsBefore = f.count("cuStreamCreate");
  f.fake->calls.clear();
  char in[64], out[64] = {};
  for (int i = 0; i < 64; i++) in[i] = char(i * 3);
  CHECK(f.rt->copyToDevice(mem.ptr, in, sizeof in) == ncclSuccess);
  CHECK(f.fake->modeAtCopy == pc::CU_STREAM_CAPTURE_MODE_RELAXED);
  CHECK(f.fake->captureMode() == pc::CU_STREAM_CAPTURE_MODE_GLOBAL);
  CHECK(f.fake->copyStream != nullptr);
  CHECK(f.fake->syncStream == f.fake->copyStream);
  f.fake->modeAtCopy = -1;
  CHECK(f.rt->copyFromDevice(out, mem.ptr, sizeof out) == ncclSuccess);
  CHECK(f.fake->modeAtCopy == pc::CU_STREAM_CAPTURE_MODE_RELAXED);
  CHECK(memcmp(in, out, sizeof in) == 0);
  // The stream made for the allocation's zeroing serves every copy in that context.
  CHECK(streamsBefore == 1);
  CHECK(f.count("cuStreamCreate") == 0);
  // The copy waits for itself: synchronize comes after the copy, and the mode is restored after both.
  const std::vector<std::string> expected = {"cuThreadExchangeStreamCaptureMode",
                                             "cuCtxGetCurrent",
                                             "cuCtxGetCurrent",
                                             "cuMemcpyHtoDAsync",
                                             "cuStreamSynchronize",
                                             "cuThreadExchangeStreamCaptureMode"};
  CHECK(std::vector<std::string>(f.fake->calls.begin(), f.fake->calls.begin() + 6) == expected);
  CHECK(f.rt->copyToDevice(mem.ptr, in, 0) == ncclSuccess);  // nothing to copy

  f.fake->failCall = "cuMemcpyDtoHAsync";
  f.fake->failResult = pc::CUDA_ERROR_ILLEGAL_ADDRESS;
  CHECK(f.rt->copyFromDevice(out, mem.ptr, sizeof out) == ncclUnhandledCudaError);
  CHECK(f.rt->lastError() ==
        "cuMemcpyDtoHAsync failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)");
  CHECK(f.fake->captureMode() == pc::CU_STREAM_CAPTURE_MODE_GLOBAL);
  f.fake->failCall.clear();
  f.rt->free(&mem);
}

TEST_CASE("cuda runtime: pointerInfo classifies what the driver knows, and treats the rest as host memory") {
  Fixture f;
  char a, b, c, d, e;
  const auto key = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
  f.fake->pointers[key(&a)] = {unsigned(pc::CU_MEMORYTYPE_DEVICE), 1, false};
  f.fake->pointers[key(&b)] = {unsigned(pc::CU_MEMORYTYPE_HOST), 0, false};
  f.fake->pointers[key(&c)] = {unsigned(pc::CU_MEMORYTYPE_DEVICE), 0, true};
  f.fake->pointers[key(&d)] = {unsigned(pc::CU_MEMORYTYPE_HOST), 1, true};  // managed, resident on the host
  PointerInfo info;
  CHECK(f.rt->pointerInfo(&a, &info) == ncclSuccess);
  CHECK(info.kind == PointerKind::Device);
  CHECK(info.device == 1);
  CHECK(f.rt->pointerInfo(&b, &info) == ncclSuccess);
  CHECK(info.kind == PointerKind::HostRegistered);
  CHECK(info.device == -1);
  CHECK(f.rt->pointerInfo(&c, &info) == ncclSuccess);
  CHECK(info.kind == PointerKind::Managed);
  CHECK(info.device == 0);
  CHECK(f.rt->pointerInfo(&d, &info) == ncclSuccess);
  CHECK(info.kind == PointerKind::Managed);
  CHECK(f.rt->pointerInfo(&e, &info) == ncclSuccess);  // unknown: CUDA_SUCCESS, no type
  CHECK(info.kind == PointerKind::Host);
  CHECK(info.device == -1);
  CHECK(f.fake->currentContext() == nullptr);  // classifying needs no context, and makes none

  f.fake->pointerResult = pc::CUDA_ERROR_INVALID_VALUE;  // some drivers, for addresses they never mapped
  CHECK(f.rt->pointerInfo(&a, &info) == ncclSuccess);
  CHECK(info.kind == PointerKind::Host);
  f.fake->pointerResult = pc::CUDA_ERROR_DEINITIALIZED;
  CHECK(f.rt->pointerInfo(&a, &info) == ncclUnhandledCudaError);
  CHECK(f.rt->lastError() == "cuPointerGetAttributes failed: CUDA_ERROR_DEINITIALIZED (driver shutting down)");
}

TEST_CASE("cuda runtime: launch passes the plan's arguments as one packed buffer") {
  Fixture f;
  struct Args {
    uint64_t a;
    uint32_t b;
    char tail[20];
  } args{0x1122334455667788ull, 42, "inline works"};
  plexus::KernelLaunch k;
  k.function = reinterpret_cast<const void*>(0x7000);
  k.grid = 5;
  k.block = 640;
  k.args = &args;
  k.argsBytes = offsetof(Args, tail) + 13;  // cut after the last inline work
  REQUIRE(f.rt->launch(someStream(), k) == ncclSuccess);
  REQUIRE(f.fake->launches.size() == 1);
  const fake::Launch& l = f.fake->launches[0];
  CHECK(l.function == reinterpret_cast<pc::CUfunction>(0x7000));
  CHECK(l.grid[0] == 5);
  CHECK(l.grid[1] == 1);
  CHECK(l.grid[2] == 1);
  CHECK(l.block[0] == 640);
  CHECK(l.block[1] == 1);
  CHECK(l.block[2] == 1);
  CHECK(l.sharedMem == 0);
  CHECK(l.stream == someStream());
  CHECK(l.kernelParamsNull);
  CHECK(l.extraKeys == std::vector<uintptr_t>{pc::CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT,
                                              pc::CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT, pc::CU_LAUNCH_PARAM_END_AS_INT});
  REQUIRE(l.args.size() == k.argsBytes);
  CHECK(memcmp(l.args.data(), &args, k.argsBytes) == 0);

  f.fake->failCall = "cuLaunchKernel";
  f.fake->failResult = pc::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  CHECK(f.rt->launch(someStream(), k) == ncclUnhandledCudaError);
  CHECK(f.rt->lastError() ==
        "cuLaunchKernel failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (too many resources requested for launch)");
}

TEST_CASE("cuda runtime: host callbacks go through cuLaunchHostFunc") {
  Fixture f;
  int ran = 0;
  CHECK(f.rt->hostCallback(
            someStream(), [](void* p) { ++*static_cast<int*>(p); }, &ran) == ncclSuccess);
  CHECK(ran == 1);
  CHECK(f.fake->callbackStream == someStream());
}

TEST_CASE("cuda runtime: a stream waits for a host word through cuStreamWaitValue64 (greater or equal)") {
  Fixture f;
  REQUIRE(f.rt->setCurrent(0) == ncclSuccess);
  int word = 0;
  CHECK(f.rt->streamWaitValue(someStream(), &word, 42) == ncclSuccess);
  CHECK(f.fake->waitStream == someStream());
  CHECK(f.fake->waitValueAddr == (pc::CUdeviceptr)(uintptr_t)&word);
  CHECK(f.fake->waitValue == 42);
  CHECK(f.fake->waitValueFlags == pc::CU_STREAM_WAIT_VALUE_GEQ);
  f.fake->failCall = "cuStreamWaitValue64";
  f.fake->failResult = pc::CUDA_ERROR_NOT_SUPPORTED;
  CHECK(f.rt->streamWaitValue(someStream(), &word, 43) == ncclUnhandledCudaError);
  CHECK(f.rt->lastError().find("cuStreamWaitValue64 failed") == 0);
}

TEST_CASE("cuda runtime: events are untimed, a pending one is ncclInProgress, a failed one an error") {
  Fixture f;
  REQUIRE(f.rt->setCurrent(0) == ncclSuccess);
  void* event = nullptr;
  REQUIRE(f.rt->eventCreate(&event) == ncclSuccess);
  CHECK(event != nullptr);
  CHECK(f.fake->eventFlags == pc::CU_EVENT_DISABLE_TIMING);
  CHECK(f.rt->eventRecord(event, someStream()) == ncclSuccess);
  CHECK(f.fake->recordedEvent == event);
  CHECK(f.fake->recordStream == someStream());
  CHECK(f.rt->eventQuery(event) == ncclSuccess);
  f.fake->eventQueryResult = pc::CUDA_ERROR_NOT_READY;
  CHECK(f.rt->eventQuery(event) == ncclInProgress);
  f.fake->eventQueryResult = pc::CUDA_ERROR_ILLEGAL_ADDRESS;
  CHECK(f.rt->eventQuery(event) == ncclUnhandledCudaError);
  CHECK(f.rt->lastError() ==
        "cuEventQuery failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)");
  f.rt->eventDestroy(event);
  CHECK(f.fake->destroyedEvents == std::vector<pc::CUevent>{static_cast<pc::CUevent>(event)});
}

TEST_CASE("cuda runtime: captureStatus reads cuStreamGetCaptureInfo, an invalidated capture is an error") {
  Fixture f;
  bool capturing = true;
  void* graph = reinterpret_cast<void*>(1);
  CHECK(f.rt->captureStatus(someStream(), &capturing, &graph) == ncclSuccess);
  CHECK_FALSE(capturing);
  CHECK(graph == nullptr);
  CHECK_FALSE(f.fake->captureDependenciesAsked);
  f.fake->captureStatus = pc::CU_STREAM_CAPTURE_STATUS_ACTIVE;
  f.fake->captureGraph = reinterpret_cast<pc::CUgraph>(0x6000);
  CHECK(f.rt->captureStatus(someStream(), &capturing, &graph) == ncclSuccess);
  CHECK(capturing);
  CHECK(graph == reinterpret_cast<void*>(0x6000));
  f.fake->captureStatus = pc::CU_STREAM_CAPTURE_STATUS_INVALIDATED;
  CHECK(f.rt->captureStatus(someStream(), &capturing, &graph) == ncclInvalidUsage);
  CHECK(f.rt->lastError().find("capture was invalidated") != std::string::npos);
  f.fake->failCall = "cuStreamGetCaptureInfo";
  f.fake->failResult = pc::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  CHECK(f.rt->captureStatus(someStream(), &capturing, &graph) == ncclUnhandledCudaError);
  CHECK(f.rt->lastError().rfind("cuStreamGetCaptureInfo failed: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (", 0) == 0);
}

TEST_CASE("cuda runtime: graphRetain ties release(arg) to the graph, a failure hands arg back unreleased") {
  Fixture f;
  int released = 0;
  auto release = [](void* p) { ++*static_cast<int*>(p); };
  auto* graph = reinterpret_cast<void*>(0x6000);
  REQUIRE(f.rt->graphRetain(graph, release, &released) == ncclSuccess);
  REQUIRE(f.fake->userObjects.size() == 1);
  CHECK(f.fake->userObjects[0]->flags == pc::CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
  CHECK(f.fake->retainGraph == graph);
  CHECK(f.fake->retainCount == 1);
  CHECK(f.fake->retainFlags == pc::CU_GRAPH_USER_OBJECT_MOVE);
  CHECK(f.fake->userObjects[0]->refs == 1);  // the graph's, moved: none left with us
  CHECK(released == 0);
  f.fake->destroyGraphs();
  CHECK(released == 1);
  CHECK(f.fake->userObjects.empty());

  f.fake->failCall = "cuGraphRetainUserObject";
  f.fake->failResult = pc::CUDA_ERROR_INVALID_HANDLE;
  CHECK(f.rt->graphRetain(graph, release, &released) == ncclUnhandledCudaError);
  CHECK(f.rt->lastError() == "cuGraphRetainUserObject failed: CUDA_ERROR_INVALID_HANDLE (invalid resource handle)");
  CHECK(released == 1);                // not run: arg is the caller's again
  CHECK(f.fake->userObjects.empty());  // and the user object is gone

  f.fake->failCall = "cuUserObjectCreate";
  f.fake->failResult = pc::CUDA_ERROR_OUT_OF_MEMORY;
  CHECK(f.rt->graphRetain(graph, release, &released) == ncclUnhandledCudaError);
  CHECK(released == 1);
}

// On a machine with a GPU, the same seam over the real driver (never run where this was written: no GPU there).
TEST_CASE("cuda runtime: memory, copies, pointer kinds, events and callbacks on a real GPU") {
  if (getenv("PLEXUS_CUDA_DRIVER")) {
    testskip::skip("PLEXUS_CUDA_DRIVER is set (a fake driver)");
    return;
  }
  DeviceRuntime* raw = nullptr;
  std::string error;
  if (plexus::cudaRuntimeCreate(&raw, &error) != ncclSuccess) {
    testskip::skip("no CUDA here (" + error + ")");
    return;
  }
  std::unique_ptr<DeviceRuntime> rt(raw);
  REQUIRE(rt->setCurrent(0) == ncclSuccess);
  int device = -1;
  CHECK(rt->currentDevice(&device) == ncclSuccess);
  CHECK(device == 0);

  DeviceMem dev, pinned, mapped;
  REQUIRE_MESSAGE(rt->alloc(MemKind::Device, 1 << 20, &dev) == ncclSuccess, rt->lastError());
  REQUIRE_MESSAGE(rt->alloc(MemKind::HostPinned, 4096, &pinned) == ncclSuccess, rt->lastError());
  REQUIRE_MESSAGE(rt->alloc(MemKind::HostMapped, 4096, &mapped) == ncclSuccess, rt->lastError());
  CHECK(allBytes(pinned.host, 4096, 0));
  CHECK(allBytes(mapped.host, 4096, 0));

  std::vector<unsigned char> in(1 << 20), out(1 << 20, 0xff);
  CHECK(rt->copyFromDevice(out.data(), dev.ptr, out.size()) == ncclSuccess);
  CHECK(allBytes(out.data(), out.size(), 0));  // zeroed
  for (size_t i = 0; i < in.size(); i++) in[i] = static_cast<unsigned char>(i * 7);
  CHECK(rt->copyToDevice(dev.ptr, in.data(), in.size()) == ncclSuccess);
  CHECK(rt->copyFromDevice(out.data(), dev.ptr, out.size()) == ncclSuccess);
  CHECK(in == out);

  PointerInfo info;
  CHECK(rt->pointerInfo(dev.ptr, &info) == ncclSuccess);
  CHECK(info.kind == PointerKind::Device);
  CHECK(info.device == 0);
  CHECK(rt->pointerInfo(pinned.ptr, &info) == ncclSuccess);
  CHECK(info.kind == PointerKind::HostRegistered);
  CHECK(rt->pointerInfo(mapped.host, &info) == ncclSuccess);
  CHECK(info.kind == PointerKind::HostRegistered);
  CHECK(rt->pointerInfo(in.data(), &info) == ncclSuccess);
  CHECK(info.kind == PointerKind::Host);

  // The legacy default stream: a callback, then an event after it.
  int ran = 0;
  void* event = nullptr;
  REQUIRE(rt->eventCreate(&event) == ncclSuccess);
  CHECK(rt->hostCallback(
            nullptr, [](void* p) { ++*static_cast<int*>(p); }, &ran) == ncclSuccess);
  CHECK(rt->eventRecord(event, nullptr) == ncclSuccess);
  ncclResult_t res;
  while ((res = rt->eventQuery(event)) == ncclInProgress) std::this_thread::yield();
  CHECK(res == ncclSuccess);
  CHECK(ran == 1);
  rt->eventDestroy(event);
  bool capturing = true;
  void* graph = nullptr;
  CHECK(rt->captureStatus(nullptr, &capturing, &graph) == ncclSuccess);
  CHECK_FALSE(capturing);

  rt->free(&dev);
  rt->free(&pinned);
  rt->free(&mapped);
}
