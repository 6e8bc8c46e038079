// Peers' memory for zero-copy point-to-point (layer 5): a receiver in another process of the node
// describes its registered ncclMemAlloc buffer as (pid, fd, offset, serial); the sender opens
// /proc/<pid>/fd/<fd>, maps the whole allocation once, and keeps it until the communicator goes.
#pragma once

#include <nccl.h>
#include <plexus/device_v1.h>

#include <cstddef>
#include <cstdint>
#include <vector>

struct ncclComm;

namespace plexus {

struct PeerMapping {
  int peer;
  uint64_t pid, serial;
  char* base;
  size_t size;
};

struct PeerMappings {
  std::vector<PeerMapping> maps;
  std::vector<char> cmaRefused;  // [rank]: a write into that rank with process_vm_writev failed once
  ~PeerMappings();
};

// Whether peer (another process of this machine) may be offered a process_vm_writev destination.
bool cmaOffered(ncclComm* comm, int peer);
// Writes bytes from src to addr in process pid (PLEXUS_XCHG_CMA); false, with errno, when the
// kernel refuses (another user, ptrace restrictions, no CMA): the caller falls back to the slots.
bool cmaWrite(uint64_t pid, uint64_t addr, const char* src, size_t bytes);
// Remembers that CMA into peer does not work, so that neither side offers it again.
void cmaRefuse(ncclComm* comm, int peer);

// Where to write x.size bytes for peer's exchange record x (kind PLEXUS_XCHG_MEMFD); an error naming
// the peer and the reason when its memory cannot be mapped.
ncclResult_t peerMemoryDestination(ncclComm* comm, int peer, const plexusPtrExchange_v1_t& x, char** dst);

}  // namespace plexus
