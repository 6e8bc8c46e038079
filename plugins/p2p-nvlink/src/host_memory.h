// Memory that a peer rank maps: plain heap memory for a peer in the same process, a POSIX shared
// memory segment for a peer in another process of the node. The CUDA IPC path is a third kind of
// the same interface (cudaIpcGetMemHandle / cudaIpcOpenMemHandle) and drops in here.
#pragma once

#include <plexus/types.h>

#include <cstddef>
#include <cstdint>

namespace p2p {

enum class MemKind : uint32_t { Heap = 1, Shm = 2 };

// What travels to the peer (inside plexusConnectInfo_v1_t) so that it can map the memory.
struct MemHandle {
  MemKind kind;
  uint32_t serial;   // Heap: which allocation at that address (addresses are reused once freed)
  uint64_t size;
  uint64_t address;  // Heap: the pointer, valid in the owner's process only
  char shmName[64];  // Shm: name under /dev/shm
};

// Memory this rank owns and exposes.
struct LocalMem {
  void* ptr = nullptr;
  MemHandle handle{};
};

ncclResult_t memAlloc(size_t size, bool samePeerProcess, LocalMem* mem);
// Removes the name of a shared segment once the peer has mapped it, so a crash leaves nothing behind.
void memUnlinkName(LocalMem* mem);
void memFree(LocalMem* mem);

// Reads a word of every page in [p, p + bytes). Where the hypervisor fills its own page tables lazily (the CI machine,
// a Firecracker VM whose kernel runs under PVM), a process's first access to each page of a shared segment traps to it
// even after MAP_POPULATE: about 5 us a page, against 0.15 us for a whole 8-byte operation; measured there, a read
// takes the trap for the writes that follow too. Elsewhere MAP_POPULATE has made the mapping, and this costs a read
// a page.
void touchPages(const void* p, size_t bytes);

// Maps the peer's memory described by handle.
ncclResult_t memMap(const MemHandle& handle, void** ptr);
void memUnmap(const MemHandle& handle, void* ptr);

}  // namespace p2p
