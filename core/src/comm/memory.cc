// ncclMemAlloc / ncclMemFree, ncclCommRegister / ncclCommDeregister and ncclCommWindowRegister /
// ncclCommWindowDeregister. Host backend allocations are memfd pages mapped MAP_SHARED and kept
// in a process-wide table (CUDA's are device memory); registrations and windows are per-communicator records whose address is the
// handle. No data path uses them yet: this is the bookkeeping (and the argument checks) a zero-copy
// path will build on.
#include "comm/memory.h"

#include <nccl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "device/runtime.h"
#include "misc/check.h"
#include "transport/rma.h"

// The opaque type behind ncclWindow_t: one registered window.
struct ncclWindow_vidmem {
  ncclComm* comm;
  void* buff;
  size_t size;
  int flags;
  bool fromMemAlloc;  // the buffer lies in one ncclMemAlloc allocation: peers can map it
  plexus::MemAllocation alloc;
  uint64_t index;  // registration order on this rank: ranks register a window in the same order, so one-sided
                   // operations name a peer's window by the index of their own
};

namespace plexus {

namespace {

// One ncclCommRegister record. As NCCL, registrations cover whole pages and a buffer inside an
// already registered range shares its record (reference counted): the same handle comes back.
struct Registration {
  uintptr_t begin, end;  // page-aligned
  void* buff;
  size_t size;
  int refs;
  bool fromMemAlloc;
  MemAllocation alloc;
};

size_t pageSize() {
  static const size_t p = (size_t)std::max<long>(4096, sysconf(_SC_PAGESIZE));
  return p;
}

std::mutex allocMutex;
std::map<uintptr_t, MemAllocation>& allocations() {
  static auto* m = new std::map<uintptr_t, MemAllocation>();  // never destroyed: frees may run at exit
  return *m;
}
// ncclMemAlloc on a thread whose communicators are CUDA's: device memory of its current device.
std::map<uintptr_t, DeviceMem>& deviceAllocations() {
  static auto* m = new std::map<uintptr_t, DeviceMem>();
  return *m;
}

}  // namespace

struct CommRegistry {
  std::mutex mutex;
  std::vector<std::unique_ptr<Registration>> regs;
  std::vector<std::unique_ptr<ncclWindow_vidmem>> windows;
  uint64_t windowsRegistered = 0;
};

namespace {

std::mutex registryMutex;  // creation of a communicator's registry

CommRegistry* registryOf(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(registryMutex);
  if (!comm->registry) comm->registry = std::make_shared<CommRegistry>();
  return comm->registry.get();
}

}  // namespace

ncclResult_t sharedMemCreate(size_t size, const char* name, MemAllocation* out) {
  const size_t page = pageSize();
  const size_t mapped = (size + page - 1) / page * page;
  int fd = memfd_create((std::string("plexus-") + name).c_str(), MFD_CLOEXEC);
  if (fd < 0) return setError(nullptr, ncclSystemError, "%s: memfd_create failed: %s", name, strerror(errno));
  if (ftruncate(fd, (off_t)mapped) != 0) {
    int e = errno;
    close(fd);
    return setError(nullptr, ncclSystemError, "%s: cannot size %zu bytes of shared memory: %s", name, mapped,
                    strerror(e));
  }
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    return setError(nullptr, ncclSystemError, "%s: cannot map %zu bytes: %s", name, mapped, strerror(e));
  }
  *out = MemAllocation{p, size, mapped, fd, 0};
  return ncclSuccess;
}

void sharedMemDestroy(const MemAllocation& m) {
  munmap(m.base, m.mapped);
  close(m.fd);
}

bool memAllocationOf(const void* ptr, size_t size, MemAllocation* out) {
  const uintptr_t p = (uintptr_t)ptr;
  std::lock_guard<std::mutex> lock(allocMutex);
  auto& m = allocations();
  auto it = m.upper_bound(p);
  if (it == m.begin()) return false;
  --it;
  const MemAllocation& a = it->second;
  if (p < it->first || p - it->first > a.mapped || size > a.mapped - (p - it->first)) return false;
  if (out) *out = a;
  return true;
}

bool registeredShareable(ncclComm* comm, const void* ptr, size_t size, MemAllocation* out) {
  std::shared_ptr<CommRegistry> reg;
  {
    std::lock_guard<std::mutex> lock(registryMutex);
    reg = comm->registry;
  }
  if (!reg) return false;
  const uintptr_t b = (uintptr_t)ptr, e = b + size;
  bool covered = false;
  {
    std::lock_guard<std::mutex> lock(reg->mutex);
    for (auto& r : reg->regs) covered |= r->fromMemAlloc && r->begin <= b && e <= r->end;
    for (auto& w : reg->windows)
      covered |= w->fromMemAlloc && (uintptr_t)w->buff <= b && e <= (uintptr_t)w->buff + w->size;
  }
  return covered && memAllocationOf(ptr, size, out);
}

}  // namespace plexus

using namespace plexus;

#define NCCL_API(ret, func, ...)                                                                            \
  extern "C" __attribute__((visibility("default"))) __attribute__((alias(#func))) ret p##func(__VA_ARGS__); \
  extern "C" __attribute__((visibility("default"))) __attribute__((weak)) ret func(__VA_ARGS__)

// Host memory that other processes of the node can map: a memfd, mapped shared. As cudaMalloc, a size of
// 0 succeeds with *ptr = NULL (which ncclMemFree accepts).
NCCL_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size);
ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (!ptr) return setError(nullptr, ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  *ptr = nullptr;
  if (size == 0) return ncclSuccess;
  const size_t page = pageSize();
  if (size > SIZE_MAX - page)
    return setError(nullptr, ncclInvalidArgument, "ncclMemAlloc: size %zu is too large", size);
  // The memory of the backend a communicator made on this thread would get: on a GPU, the device's (NCCL's
  // ncclMemAlloc is device memory, which the application passes to its collectives).
  plexusBackend_t backend;
  int device;
  NCCLCHECK(chooseBackend(&backend, &device));
  if (backend == plexusBackendCuda) {
    DeviceRuntime* rt;
    NCCLCHECK(deviceRuntime(backend, &rt));
    DeviceMem mem;
    if (rt->alloc(MemKind::Device, size, &mem) != ncclSuccess)
      return setError(nullptr, ncclUnhandledCudaError, "ncclMemAlloc: cannot allocate %zu bytes on CUDA device %d: %s",
                      size, device, rt->lastError().c_str());
    std::lock_guard<std::mutex> lock(allocMutex);
    deviceAllocations()[(uintptr_t)mem.ptr] = mem;
    *ptr = mem.ptr;
    INFO(NCCL_ALLOC, "ncclMemAlloc: %zu bytes at %p on CUDA device %d", size, mem.ptr, device);
    return ncclSuccess;
  }
  MemAllocation a;
  NCCLCHECK(sharedMemCreate(size, "ncclMemAlloc", &a));
  void* p = a.base;
  const int fd = a.fd;
  const size_t mapped = a.mapped;
  {
    std::lock_guard<std::mutex> lock(allocMutex);
    static uint64_t serials = 0;
    a.serial = ++serials;
    allocations()[(uintptr_t)p] = a;
  }
  INFO(NCCL_ALLOC, "ncclMemAlloc: %zu bytes at %p (memfd %d, %zu bytes mapped)", size, p, fd, mapped);
  *ptr = p;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclMemFree, void* ptr);
ncclResult_t ncclMemFree(void* ptr) {
  if (!ptr) return ncclSuccess;  // as cudaFree(NULL)
  MemAllocation a;
  {
    std::lock_guard<std::mutex> lock(allocMutex);
    auto d = deviceAllocations().find((uintptr_t)ptr);
    if (d != deviceAllocations().end()) {
      DeviceMem mem = d->second;
      deviceAllocations().erase(d);
      if (DeviceRuntime* rt = cudaRuntimeIfLoaded()) rt->free(&mem);
      return ncclSuccess;
    }
    auto it = allocations().find((uintptr_t)ptr);
    if (it == allocations().end())
      return setError(nullptr, ncclInvalidArgument,
                      "ncclMemFree: %p is not the start of an allocation made by ncclMemAlloc (never allocated, "
                      "already freed, or a pointer inside one)", ptr);
    a = it->second;
    allocations().erase(it);
  }
  sharedMemDestroy(a);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  NCCLCHECK(checkComm(comm, "ncclCommRegister"));
  if (!handle) return setError(comm, ncclInvalidArgument, "ncclCommRegister: handle is NULL");
  *handle = nullptr;
  if (!buff) return setError(comm, ncclInvalidArgument, "ncclCommRegister: buff is NULL");
  if (size == 0) return setError(comm, ncclInvalidArgument, "ncclCommRegister: size is 0");
  const uintptr_t b = (uintptr_t)buff;
  if (size > UINTPTR_MAX - b - pageSize())
    return setError(comm, ncclInvalidArgument, "ncclCommRegister: buff %p + size %zu overflows the address space",
                    buff, size);
  const uintptr_t page = pageSize();
  const uintptr_t begin = b & ~(page - 1), end = (b + size + page - 1) & ~(page - 1);
  CommRegistry* reg = registryOf(comm);
  std::lock_guard<std::mutex> lock(reg->mutex);
  for (auto& r : reg->regs)
    if (r->begin <= begin && end <= r->end) {
      r->refs++;
      *handle = r.get();
      return ncclSuccess;
    }
  auto r = std::make_unique<Registration>(Registration{begin, end, buff, size, 1, false, {}});
  r->fromMemAlloc = memAllocationOf(buff, size, &r->alloc);
  INFO(NCCL_REG, "ncclCommRegister: comm %p rank %d buffer %p size %zu%s", (void*)comm, comm->rank, buff, size,
       r->fromMemAlloc ? " (ncclMemAlloc memory)" : "");
  *handle = r.get();
  reg->regs.push_back(std::move(r));
  return ncclSuccess;
}

// As NCCL: a NULL handle is a no-op (ncclCommRegister may hand one out), a handle this communicator does
// not hold (never registered here, or already deregistered as often as registered) is ncclInvalidUsage.
NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  NCCLCHECK(checkComm(comm, "ncclCommDeregister", false));
  if (!handle) return ncclSuccess;
  CommRegistry* reg = registryOf(comm);
  std::lock_guard<std::mutex> lock(reg->mutex);
  auto it = std::find_if(reg->regs.begin(), reg->regs.end(), [&](const auto& r) { return r.get() == handle; });
  if (it == reg->regs.end())
    return setError(comm, ncclInvalidUsage,
                    "ncclCommDeregister: handle %p is not a registration of this communicator (never registered "
                    "here, or already deregistered)", handle);
  if (--(*it)->refs == 0) reg->regs.erase(it);
  return ncclSuccess;
}

// A window is a record of this rank's buffer; NCCL_WIN_COLL_SYMMETRIC needs a buffer aligned to
// NCCL_WIN_REQUIRED_ALIGNMENT. Whether it came from ncclMemAlloc is recorded for a zero-copy path.
NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
         int winFlags);
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  NCCLCHECK(checkComm(comm, "ncclCommWindowRegister"));
  if (!win) return setError(comm, ncclInvalidArgument, "ncclCommWindowRegister: win is NULL");
  *win = nullptr;
  if (!buff) return setError(comm, ncclInvalidArgument, "ncclCommWindowRegister: buff is NULL");
  if (size == 0) return setError(comm, ncclInvalidArgument, "ncclCommWindowRegister: size is 0");
  if (size > UINTPTR_MAX - (uintptr_t)buff)
    return setError(comm, ncclInvalidArgument,
                    "ncclCommWindowRegister: buff %p + size %zu overflows the address space", buff, size);
  if ((winFlags & NCCL_WIN_COLL_SYMMETRIC) && (uintptr_t)buff % NCCL_WIN_REQUIRED_ALIGNMENT != 0)
    return setError(comm, ncclInvalidArgument,
                    "ncclCommWindowRegister: buff %p is not aligned to NCCL_WIN_REQUIRED_ALIGNMENT (%d bytes), "
                    "which NCCL_WIN_COLL_SYMMETRIC requires; allocate it with ncclMemAlloc", buff,
                    NCCL_WIN_REQUIRED_ALIGNMENT);
  auto w = std::make_unique<ncclWindow_vidmem>(ncclWindow_vidmem{comm, buff, size, winFlags, false, {}, 0});
  w->fromMemAlloc = memAllocationOf(buff, size, &w->alloc);
  rmaStart(comm);  // peers may put into it from now on
  INFO(NCCL_REG, "ncclCommWindowRegister: comm %p rank %d buffer %p size %zu flags 0x%x%s", (void*)comm, comm->rank,
       buff, size, winFlags, w->fromMemAlloc ? " (ncclMemAlloc memory)" : "");
  CommRegistry* reg = registryOf(comm);
  std::lock_guard<std::mutex> lock(reg->mutex);
  w->index = reg->windowsRegistered++;
  *win = w.get();
  reg->windows.push_back(std::move(w));
  return ncclSuccess;
}

// A NULL window is a no-op, as with NCCL; one this communicator does not hold is ncclInvalidArgument.
NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  NCCLCHECK(checkComm(comm, "ncclCommWindowDeregister", false));
  if (!win) return ncclSuccess;
  CommRegistry* reg = registryOf(comm);
  std::lock_guard<std::mutex> lock(reg->mutex);
  auto it = std::find_if(reg->windows.begin(), reg->windows.end(), [&](const auto& w) { return w.get() == win; });
  if (it == reg->windows.end())
    return setError(comm, ncclInvalidArgument,
                    "ncclCommWindowDeregister: window %p is not registered with this communicator (registered "
                    "elsewhere, or already deregistered)", (void*)win);
  reg->windows.erase(it);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclWinGetUserPtr, ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  NCCLCHECK(checkComm(comm, "ncclWinGetUserPtr", false));
  if (!outUserPtr) return setError(comm, ncclInvalidArgument, "ncclWinGetUserPtr: outUserPtr is NULL");
  *outUserPtr = nullptr;
  WindowView view;
  if (!windowOf(comm, win, &view))
    return setError(comm, ncclInvalidArgument,
                    "ncclWinGetUserPtr: window %p is not registered with this communicator (registered elsewhere, "
                    "or deregistered)", (void*)win);
  *outUserPtr = view.buff;
  return ncclSuccess;
}

namespace plexus {

bool windowOf(ncclComm* comm, ncclWindow_t win, WindowView* out) {
  if (!win) return false;
  CommRegistry* reg = registryOf(comm);
  std::lock_guard<std::mutex> lock(reg->mutex);
  for (auto& w : reg->windows)
    if (w.get() == win) {
      *out = WindowView{w->buff, w->size, w->index, w->fromMemAlloc, w->alloc};
      return true;
    }
  return false;
}

bool withWindow(ncclComm* comm, uint64_t index, const std::function<void(const WindowView*)>& f) {
  CommRegistry* reg = registryOf(comm);
  std::lock_guard<std::mutex> lock(reg->mutex);
  for (auto& w : reg->windows)
    if (w->index == index) {
      const WindowView view{w->buff, w->size, w->index, w->fromMemAlloc, w->alloc};
      f(&view);
      return true;
    }
  f(nullptr);
  return false;
}

}  // namespace plexus
