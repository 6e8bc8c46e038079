// The device seam (layer 6): the only way the core reaches a device. Two implementations: host (device memory is
// ordinary memory, a stream is a HostStream, a kernel runs on the communicator's host executor) and CUDA (the
// driver, libcuda.so.1, loaded at run time through plexus/cuda/driver.h, so that libplexus loads and runs where
// there is no CUDA). Everything above it — planner, workFifo and its storage kinds, completion, connectors — is one
// code path whichever backend runs it.
#pragma once

#include <nccl.h>
#include <plexus.h>
#include <plexus/device_v1.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace plexus {

// Memory a communicator allocates for its device: kernels address it through ptr.
enum class MemKind : uint8_t {
  Device,      // device memory (host backend: ordinary memory)
  HostPinned,  // page-locked host memory (host: ordinary); ptr == host
  HostMapped,  // page-locked host memory mapped into the device: the host writes through host, kernels read ptr
};

struct DeviceMem {
  void* ptr = nullptr;   // the device's view (what kernels and device copies use)
  void* host = nullptr;  // the host's view; nullptr for Device memory on CUDA
  size_t size = 0;
  MemKind kind = MemKind::Device;
};

// What a pointer the application passed is, as the driver knows it.
enum class PointerKind : uint8_t {
  Host,            // ordinary host memory that no device knows of
  HostRegistered,  // page-locked or registered host memory: a device reaches it
  Device,          // device memory
  Managed,         // managed (unified) memory
};
const char* pointerKindName(PointerKind kind);

struct PointerInfo {
  PointerKind kind = PointerKind::Host;
  int device = -1;  // the device it belongs to (Device, Managed); -1 for host memory, registered or not
};

// A kernel launch over one plan: grid blocks of block threads, one by-value parameter of argsBytes bytes (the
// plan's plexusDevKernelArgs_v1_t, cut after its last inline work).
struct KernelLaunch {
  const void* function = nullptr;  // CUDA: a CUfunction; host: a HostKernel
  unsigned grid = 1;
  unsigned block = 1;
  const void* args = nullptr;
  size_t argsBytes = 0;
  void* recordAfter = nullptr;  // an event (eventCreate) recorded on the stream behind the kernel, or none
};

// Launches that a host stream runs as one pass (HostKernel::join): args, whose works are in works (storage
// PERSISTENT) once a launch joined; empty while args.nWorks is 0.
struct HostJoin {
  // At most what one pass of the point-to-point step loop takes (PLEXUS_P2P_MAX_WORKS, 256). 128: 4 ranks on 2
  // cores, 64 B AlltoAll back to back (8 works each), 4.4-7.2 us per operation with 64 works a pass, 5.2-5.9 with
  // 128, 7.8-8.2 with 256 (two runs each); 15-17 us without joins.
  static constexpr uint32_t kMaxWorks = 128;
  plexusDevKernelArgs_v1_t args;
  plexusDevWork_v1_t works[kMaxWorks];
};

// The host backend's kernel: what a launch runs on the stream's thread. join, where it is set: whether the launch of
// args, queued right behind the launches of pass (or the first of them), can run in the same pass; if so its works
// are added to pass.
struct HostKernel {
  ncclResult_t (*run)(void* self, const void* args, size_t argsBytes, unsigned grid);
  void* self;
  bool (*join)(void* self, HostJoin* pass, const void* args) = nullptr;
};

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  virtual plexusBackend_t backend() const = 0;
  virtual const char* name() const = 0;

  // Devices this runtime drives, and the calling thread's current one (CUDA: the device of the current
  // context, else 0, as cudaGetDevice).
  virtual ncclResult_t deviceCount(int* count) = 0;
  virtual ncclResult_t currentDevice(int* device) = 0;
  // Makes device current on the calling thread (CUDA: its primary context, retained once per device).
  virtual ncclResult_t setCurrent(int device) = 0;

  // Zeroed memory (connectors start with clean flags); 0 bytes gives a valid, distinct, 0-sized block.
  virtual ncclResult_t alloc(MemKind kind, size_t bytes, DeviceMem* mem) = 0;
  // Failures are only logged (lastError): memory is never left half freed.
  virtual void free(DeviceMem* mem) = 0;
  // Synchronous copies between host memory and memory of alloc, outside any stream capture.
  virtual ncclResult_t copyToDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual ncclResult_t copyFromDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual ncclResult_t pointerInfo(const void* ptr, PointerInfo* info) = 0;

  // Streams are the application's cudaStream_t (host backend: a host stream; NULL the device's default stream).
  virtual ncclResult_t launch(cudaStream_t stream, const KernelLaunch& kernel) = 0;
  // Loads a kernel's code now (CUDA: the driver loads kernels lazily, and loading one may wait for every kernel in
  // the context: at enqueue time that waits behind the application's stream, or for ever where a peer rank's kernel
  // on the same GPU spins until ours runs). Host: nothing to load.
  virtual ncclResult_t loadKernel(const void* function) = 0;
  // Copies bytes from src to dst behind the stream's work (CUDA: cuMemcpyAsync, the copy engines; one rank's
  // collectives). Host: not offered (ncclInvalidUsage); its streams run kernels only.
  virtual ncclResult_t copyAsync(void* dst, const void* src, size_t bytes, cudaStream_t stream) = 0;
  // Work enqueued on stream after this waits until the 64-bit word at devicePtr (the ptr of HostMapped memory,
  // which the host writes through its host view) is at least value (CUDA: cuStreamWaitValue64, GEQ; the comparison
  // is cyclic, so a word that only grows works for ever). Host: not offered (ncclInvalidUsage).
  virtual ncclResult_t streamWaitValue(cudaStream_t stream, void* devicePtr, uint64_t value) = 0;
  // fn(arg) runs once everything enqueued on stream before it has run.
  virtual ncclResult_t hostCallback(cudaStream_t stream, void (*fn)(void*), void* arg) = 0;

  // Events: recorded on a stream, done once the stream's work before them is. One thread at a time records an event,
  // and a record on another stream than its last comes after a wait for it (streamWaitEvent): the host backend's
  // events rely on their records completing in order.
  virtual ncclResult_t eventCreate(void** event) = 0;
  virtual ncclResult_t eventRecord(void* event, cudaStream_t stream) = 0;
  // ncclSuccess when done, ncclInProgress while pending, an error if the work before it failed.
  virtual ncclResult_t eventQuery(void* event) = 0;
  // Work enqueued on stream after this waits for the event's last record.
  virtual ncclResult_t streamWaitEvent(cudaStream_t stream, void* event) = 0;
  virtual void eventDestroy(void* event) = 0;

  // Stream capture (CUDA graphs): whether stream is capturing, and the graph being built. The host backend never
  // captures.
  virtual ncclResult_t captureStatus(cudaStream_t stream, bool* capturing, void** graph) = 0;
  // Ties release(arg) to the lifetime of graph: it runs (on a thread of the driver's) once the graph and every
  // executable graph made from it are destroyed. It must not call the driver. On failure arg stays the caller's
  // (release is not called).
  virtual ncclResult_t graphRetain(void* graph, void (*release)(void*), void* arg) = 0;

  // A dmabuf file descriptor for Device memory (a net plugin's regMrDmaBuf), and mem's offset in it; the caller closes
  // the descriptor. An error where the device or driver cannot (and always on the host backend).
  virtual ncclResult_t exportDmabuf(const DeviceMem& mem, int* fd, uint64_t* offset) = 0;

  // What the last failed call said, for the error message of whoever called it.
  virtual std::string lastError() = 0;
};

// The runtime of a backend: the host one always exists; the CUDA one is loaded on first use, and an error says why
// it cannot be (no driver, no device, a driver older than CUDA 12). Both live as long as the process.
ncclResult_t deviceRuntime(plexusBackend_t backend, DeviceRuntime** out);
// The host runtime (never fails).
DeviceRuntime* hostRuntime();
// The CUDA runtime if this process has loaded it (a CUDA communicator exists, or a pointer was classified), else
// nullptr: host-backend checks then know that no pointer can be device memory.
DeviceRuntime* cudaRuntimeIfLoaded();

// Which backend a communicator created on this thread gets, and on which device: PLEXUS_BACKEND=host|cuda forces;
// otherwise a thread that called plexusSetDevice gets the host backend on that host device, and any other thread
// the CUDA backend on its current CUDA device when a CUDA device is present, else the host backend. An unknown
// PLEXUS_BACKEND, or cuda where CUDA cannot run, is an error that says why.
ncclResult_t chooseBackend(plexusBackend_t* backend, int* device);

// Makes device the calling thread's current device of backend (ncclCommInitAll's threads): afterwards chooseBackend
// on this thread gives that backend and device.
ncclResult_t useDevice(plexusBackend_t backend, int device);
ncclResult_t setDevice(int device);  // plexusSetDevice
int getDevice();                     // plexusGetDevice

// Makes a CUDA communicator's device current on the calling thread for the guard's lifetime (its kernels, memory and
// the plugins' kernel functions belong to that device's context), and the caller's device current again after, as
// NCCL does around its launches. Nothing on the host backend.
class DeviceGuard {
 public:
  explicit DeviceGuard(ncclComm* comm);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ncclResult_t result() const { return result_; }

 private:
  DeviceRuntime* rt_ = nullptr;
  int caller_ = -1;
  ncclResult_t result_ = ncclSuccess;
};

// Where every buffer of an operation is checked before it is enqueued: a device pointer given to a host-backend
// communicator, or unregistered host memory given to a CUDA one, is ncclInvalidArgument naming api and what.
ncclResult_t checkPointer(ncclComm* comm, const char* api, const char* what, const void* ptr);

}  // namespace plexus
