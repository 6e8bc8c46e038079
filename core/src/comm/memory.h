// Memory the application hands to NCCL (comm/memory.cc): ncclMemAlloc's process-wide allocations and
// each communicator's registrations (ncclCommRegister) and windows (ncclCommWindowRegister). Only
// bookkeeping so far; a zero-copy path looks buffers up here to share them with peers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include <nccl.h>

struct ncclComm;

namespace plexus {

// One ncclMemAlloc allocation on the host backend: a memfd mapped MAP_SHARED, so that another process
// of the node can map the same pages (through /proc/<pid>/fd/<fd> or an fd passed over a socket).
struct MemAllocation {
  void* base = nullptr;
  size_t size = 0;    // what the application asked for
  size_t mapped = 0;  // size rounded up to pages
  int fd = -1;
  uint64_t serial = 0;  // unique within the process (fds are reused after ncclMemFree)
};

// Host memory that other processes of the node can map: a memfd, mapped shared (ncclMemAlloc's on the host
// backend, which also enters it in the process's table). name: who wants it, for the memfd's name and errors.
ncclResult_t sharedMemCreate(size_t size, const char* name, MemAllocation* out);
void sharedMemDestroy(const MemAllocation& m);

// The ncclMemAlloc allocation that contains [ptr, ptr + size); false if none does.
bool memAllocationOf(const void* ptr, size_t size, MemAllocation* out);

// True when [ptr, ptr + size) lies in ncclMemAlloc memory that is registered with comm
// (ncclCommRegister or ncclCommWindowRegister): peers may then map it and write it directly.
bool registeredShareable(ncclComm* comm, const void* ptr, size_t size, MemAllocation* out);

// What one-sided operations need of a window.
struct WindowView {
  void* buff;
  size_t size;
  uint64_t index;       // its registration order on its rank
  bool fromMemAlloc;    // the buffer lies in ncclMemAlloc memory (alloc), which processes of the node can map
  MemAllocation alloc;
};
// win's view if comm holds it.
bool windowOf(ncclComm* comm, ncclWindow_t win, WindowView* out);
// Runs f with this rank's window of registration order index (nullptr if it holds none), the window kept
// registered meanwhile; returns whether there was one.
bool withWindow(ncclComm* comm, uint64_t index, const std::function<void(const WindowView*)>& f);

}  // namespace plexus
