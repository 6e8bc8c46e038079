// A fake libcuda.so.1 (fake_libcuda.cc) for testing the driver loader and the CUDA runtime where there is no GPU:
// it exports cuGetProcAddress_v2 (cuGetProcAddress in its PLEXUS_FAKE_CUDA_V1_ONLY build) like a driver, keeps host
// memory for "device" memory, and records what it was asked. Tests reach its state through plexusFakeCuda().
// Single-threaded, as the tests that use it are (a callback runs on the caller's thread, at once).
#pragma once

#include <plexus/cuda/driver.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fake {

namespace pc = plexus::cuda;

// A "device" allocation's address handed out by cuMemHostGetDevicePointer: apart from the host address, so a test
// sees which of the two the runtime used where (never dereferenced).
inline constexpr uintptr_t kMappedOffset = 0x10000000;

struct PointerAttributes {
  unsigned memoryType = 0;
  int ordinal = -1;
  bool managed = false;
};

struct UserObject {
  void* ptr = nullptr;
  pc::CUhostFn destroy = nullptr;
  unsigned refs = 0;
  unsigned flags = 0;
};

struct Launch {
  pc::CUfunction function = nullptr;
  unsigned grid[3] = {};
  unsigned block[3] = {};
  unsigned sharedMem = 0;
  pc::CUstream stream = nullptr;
  bool kernelParamsNull = false;
  std::vector<uintptr_t> extraKeys;  // the extra array's keys (1 = buffer pointer, 2 = buffer size, 0 = end)
  std::vector<char> args;            // the parameter buffer, copied
};

struct State {
  // What the fake answers.
  pc::CUresult initResult = pc::CUDA_SUCCESS;
  int version = 12040;
  int deviceCount = 2;
  std::string missingSymbol;  // cuGetProcAddress finds no such symbol
  std::string failCall;       // this entry point (by its cu name) returns failResult
  pc::CUresult failResult = pc::CUDA_SUCCESS;
  pc::CUresult eventQueryResult = pc::CUDA_SUCCESS;
  pc::CUresult pointerResult = pc::CUDA_SUCCESS;
  pc::CUstreamCaptureStatus captureStatus = pc::CU_STREAM_CAPTURE_STATUS_NONE;
  pc::CUgraph captureGraph = nullptr;
  std::map<uintptr_t, PointerAttributes> pointers;

  // What it was asked.
  std::vector<std::string> calls;  // entry points in call order; cuGetProcAddress lookups as "proc:<symbol>"
  std::vector<int> procVersions;   // cudaVersion of every cuGetProcAddress lookup
  std::vector<pc::cuuint64_t> procFlags;
  unsigned initFlags = ~0u;
  std::vector<int> retains, releases;  // primary context, per device
  unsigned hostAllocFlags = 0;
  unsigned streamFlags = ~0u;
  unsigned eventFlags = ~0u;
  int modeAtAlloc = -1;  // the thread's capture mode when cuMemAlloc ran
  int modeAtCopy = -1;   // ... when a copy ran
  pc::CUstream copyStream = nullptr;
  pc::CUstream syncStream = nullptr;
  pc::CUstream memsetStream = nullptr;
  std::vector<uintptr_t> freed;  // cuMemFree
  std::vector<void*> freedHost;  // cuMemFreeHost
  std::vector<Launch> launches;
  pc::CUstream callbackStream = nullptr;
  pc::CUevent recordedEvent = nullptr;
  pc::CUstream recordStream = nullptr;
  pc::CUevent waitedEvent = nullptr;
  pc::CUstream waitStream = nullptr;
  unsigned waitFlags = ~0u;
  pc::CUdeviceptr waitValueAddr = 0;  // cuStreamWaitValue64's last arguments
  pc::cuuint64_t waitValue = 0;
  unsigned waitValueFlags = ~0u;
  std::vector<pc::CUevent> destroyedEvents;
  bool captureDependenciesAsked = false;
  std::vector<UserObject*> userObjects;  // alive
  std::vector<UserObject*> graphOwned;   // references a graph holds (CU_GRAPH_USER_OBJECT_MOVE)
  unsigned retainCount = 0, retainFlags = ~0u;
  pc::CUgraph retainGraph = nullptr;

  // Destroys every graph: drops the graphs' references, running destructors that reach zero.
  void (*destroyGraphs)() = nullptr;
  // The current thread's context and capture mode (thread-locals of the fake).
  pc::CUcontext (*currentContext)() = nullptr;
  int (*captureMode)() = nullptr;
  void (*setCaptureMode)(int mode) = nullptr;
  // Back to a fresh driver (what it answers, and what it saw).
  void (*reset)() = nullptr;
};

}  // namespace fake

extern "C" {
// The fake's state; the address cuGetProcAddress hands out for symbol (nullptr for one it lacks).
fake::State* plexusFakeCuda();
void* plexusFakeCudaSymbol(const char* symbol);
}
