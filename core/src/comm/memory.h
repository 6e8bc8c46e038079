// Memory the application hands to NCCL (comm/memory.cc): ncclMemAlloc's process-wide allocations and
// each communicator's registrations (ncclCommRegister) and windows (ncclCommWindowRegister). Only
// bookkeeping so far; a zero-copy path looks buffers up here to share them with peers.
#pragma once

#include <cstddef>
#include <cstdint>

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

// The ncclMemAlloc allocation that contains [ptr, ptr + size); false if none does.
bool memAllocationOf(const void* ptr, size_t size, MemAllocation* out);

// True when [ptr, ptr + size) lies in ncclMemAlloc memory that is registered with comm
// (ncclCommRegister or ncclCommWindowRegister): peers may then map it and write it directly.
bool registeredShareable(ncclComm* comm, const void* ptr, size_t size, MemAllocation* out);

}  // namespace plexus
