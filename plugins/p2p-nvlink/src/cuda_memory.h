// CUDA memory a peer rank maps: the CUDA backend's counterpart of host_memory.h, of the same shape (allocate and
// describe, map the peer's, unmap, free), through plexus/cuda/driver.h alone (the driver is loaded by the first CUDA
// connection, never before). Kinds:
//  * Device: cuMemAlloc, for a peer of this process that can reach this device; by pointer, reference counted (either
//    side may be freed first);
//  * HostMapped: cuMemHostAlloc(PORTABLE | DEVICEMAP), for a peer of this process whose device cannot reach this one
//    (or PLEXUS_P2P_DISABLE); by pointer, reference counted;
//  * Vmm: cuMemCreate with a POSIX file descriptor handle, reserved, mapped and made accessible to this device, for a
//    peer process: the descriptor travels over fd_mailbox.h;
//  * Ipc: cuMemAlloc + cuIpcGetMemHandle, for a peer process where cuMem is unavailable or refused, or
//    PLEXUS_P2P_IPC=legacy (NCCL_CUMEM_ENABLE=0): the handle travels in the connect info, no descriptor;
//  * Shm: the host's POSIX shared memory segment (host_memory.h) registered with cuMemHostRegister(DEVICEMAP), for a
//    peer process whose device cannot reach this one.
// Every dptr handed out is usable by kernels on the rank's own device (its device view); the host kinds also have a
// host view (hptr). Calls that need a context expect the caller to have made the device's current (ContextScope).
#pragma once

#include <plexus/cuda/driver.h>
#include <plexus/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "host_memory.h"

namespace p2p {

namespace pc = plexus::cuda;

// The rank's CUDA device, as one connection holds it: its primary context (retained), its PCI bus id, and a
// non-blocking stream of ours on which memory is cleared and initialised, so that this never waits on, nor joins, an
// application's stream.
struct CudaDevice {
  const pc::Driver* d = nullptr;
  int ordinal = -1;
  pc::CUdevice dev = 0;
  pc::CUcontext ctx = nullptr;
  pc::CUstream stream = nullptr;
  char busId[16] = {};  // lower case, "0000:01:00.0"
};

// Loads the driver (once per process) and opens device ordinal; who names the connection in messages.
ncclResult_t cudaDeviceOpen(int ordinal, const char* who, CudaDevice* out);
void cudaDeviceClose(CudaDevice* dev);
// The ordinal of the device with that PCI bus id among those this process sees; -1 when it does not see it.
int cudaDeviceByBusId(const CudaDevice& dev, const char* busId);
// Whether devices a and b (ordinals of this process) can reach each other's memory (cuDeviceCanAccessPeer both ways;
// a device reaches itself).
ncclResult_t cudaPeerAccessible(const CudaDevice& dev, int a, int b, const char* who, bool* ok);
// Lets this device's kernels reach device `peer`'s memory (cuCtxEnablePeerAccess; already enabled is fine).
ncclResult_t cudaEnablePeerAccess(const CudaDevice& dev, int peer, const char* who);

// Makes a context current for a scope (and the calling thread's capture mode relaxed, as the core does around its
// allocations), and gives the previous ones back.
class ContextScope {
 public:
  ContextScope(const pc::Driver* d, pc::CUcontext ctx);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
  pc::CUresult result() const { return result_; }

 private:
  const pc::Driver* d_;
  pc::CUcontext prev_ = nullptr;
  bool restore_ = false;
  bool relaxed_ = false;
  pc::CUstreamCaptureMode mode_ = pc::CU_STREAM_CAPTURE_MODE_RELAXED;
  pc::CUresult result_ = pc::CUDA_SUCCESS;
};

enum class CudaKind : uint32_t { Device = 1, HostMapped = 2, Vmm = 3, Ipc = 4, Shm = 5 };
const char* cudaKindName(CudaKind kind);
inline bool cudaKindSameProcess(CudaKind k) { return k == CudaKind::Device || k == CudaKind::HostMapped; }
inline bool cudaKindValid(uint32_t k) { return k >= (uint32_t)CudaKind::Device && k <= (uint32_t)CudaKind::Shm; }

// What travels to the peer (in the connect info, or a mailbox message) so that it can map the memory.
struct CudaHandle {
  CudaKind kind;
  uint32_t serial;   // Device, HostMapped: which allocation at that address (addresses are reused)
  uint64_t size;     // bytes the peer may map
  uint64_t address;  // Device: the device pointer; HostMapped: the host pointer (the owner's process only)
  uint64_t id;       // the allocation's id (fd_mailbox.h's newAllocationId): tags its messages
  union {
    pc::CUipcMemHandle ipc;  // Ipc
    char shmName[64];        // Shm: name under /dev/shm
  } u;
};
static_assert(sizeof(CudaHandle) == 96, "CudaHandle layout");

// Where the peer lives, which decides the kind.
enum class CudaPlace {
  SameProcess,      // Device
  SameProcessHost,  // HostMapped
  OtherProcess,     // Vmm, else Ipc
  OtherProcessHost  // Shm
};

// Memory this rank owns and exposes.
struct CudaLocal {
  CudaHandle handle{};
  void* dptr = nullptr;  // the device view
  void* hptr = nullptr;  // the host view (HostMapped, Shm)
  size_t mapped = 0;     // Vmm: bytes reserved and mapped
  pc::CUmemGenericAllocationHandle vmm = 0;
  LocalMem shm;  // Shm: the segment
  const pc::Driver* d = nullptr;
};

// The peer's memory, mapped.
struct CudaRemote {
  CudaHandle handle{};
  void* dptr = nullptr;
  void* hptr = nullptr;
  size_t mapped = 0;
  pc::CUmemGenericAllocationHandle vmm = 0;
  const pc::Driver* d = nullptr;
};

// Allocates at least size bytes, zeroed, of the kind `where` asks for (OtherProcess: Vmm unless cuMem is unavailable,
// refused, or PLEXUS_P2P_IPC=legacy, then Ipc).
ncclResult_t cudaMemAlloc(const CudaDevice& dev, size_t size, CudaPlace where, const char* who, CudaLocal* mem);
// Writes bytes at offset of the memory (initial control blocks).
ncclResult_t cudaMemWrite(const CudaDevice& dev, const CudaLocal& mem, size_t offset, const void* src, size_t bytes,
                          const char* who);
// Vmm: a file descriptor of the allocation for the peer (the caller closes it once sent).
ncclResult_t cudaMemExportFd(const CudaDevice& dev, const CudaLocal& mem, const char* who, int* fd);
// Removes the name of a Shm segment once the peer has mapped it.
void cudaMemUnlinkName(CudaLocal* mem);
void cudaMemFree(CudaLocal* mem);

// Maps the peer's memory described by handle (Vmm: fd is the descriptor the peer sent; this call does not close it).
// quiet: a failure is the caller's to report (it tries another kind), so only an INFO line is logged.
ncclResult_t cudaMemMap(const CudaDevice& dev, const CudaHandle& handle, int fd, const char* who, bool quiet,
                        CudaRemote* out);
void cudaMemUnmap(CudaRemote* mem);

// The env knobs of CUDA connections, PLEXUS_* first, then NCCL's twin.
bool cudaP2pDisabled();   // PLEXUS_P2P_DISABLE / NCCL_P2P_DISABLE: no direct access to another device's memory
bool cudaP2pLegacyIpc();  // PLEXUS_P2P_IPC=legacy / NCCL_CUMEM_ENABLE=0
bool cudaP2pRead();       // PLEXUS_P2P_READ / NCCL_P2P_READ_ENABLE

}  // namespace p2p
