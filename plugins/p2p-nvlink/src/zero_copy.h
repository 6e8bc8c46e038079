// Zero-copy point-to-point between processes of one machine on the host backend, the capability p2p-nvlink gives
// the shared step loop (transport_v1's p2pDescribe / p2pWrite): a receiver's registered ncclMemAlloc memory, which
// the sender maps through /proc/<pid>/fd/<fd>, or any receive buffer, which the sender writes with
// process_vm_writev (one copy, as MPI's CMA path; PLEXUS_CMA=0 turns it off).
#pragma once

#include <plexus/device_v1.h>
#include <plexus/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace p2p {

// PLEXUS_CMA (else NCCL_CMA), default on.
bool cmaEnabled();
// This process's pid namespace (its inode), 0 when unknown: pids of two processes mean the same only within one.
uint64_t pidNamespace();
// Writes bytes from src to addr in process pid; false, with errno, when the kernel refuses.
bool cmaWrite(uint64_t pid, uint64_t addr, const void* src, size_t bytes);

// The peers' registered allocations a sender has mapped, kept until its connection goes.
class PeerMemory {
 public:
  ~PeerMemory();
  // Where x (kind PLEXUS_XCHG_MEMFD) says to write; nullptr (logged) when the memory cannot be mapped or x lies.
  char* destination(const plexusPtrExchange_v1_t& x);

 private:
  struct Mapping {
    uint64_t pid, serial;
    char* base;
    size_t size;
  };
  std::vector<Mapping> maps_;
};

}  // namespace p2p
