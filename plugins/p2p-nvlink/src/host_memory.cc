#include "host_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <unordered_map>

#include "log.h"

namespace p2p {

static std::atomic<uint64_t> segmentCounter{0};

// Heap segments alive in this process, by address, with their serial and references: a rank maps a peer's
// segment by the address the peer sent, and the peer may have freed it meanwhile (aborted during setup), so
// a reference is taken only on a segment still registered under the same serial.
struct HeapSegment {
  uint32_t serial;
  int refs;
  size_t size;
};
static std::mutex heapMutex;
static std::unordered_map<void*, HeapSegment>& heapLive() {
  static auto* m = new std::unordered_map<void*, HeapSegment>();
  return *m;
}

static void heapRelease(void* ptr) {
  std::lock_guard<std::mutex> lock(heapMutex);
  auto it = heapLive().find(ptr);
  if (it == heapLive().end() || --it->second.refs > 0) return;
  const size_t size = it->second.size;
  heapLive().erase(it);
  munmap(ptr, size);
}

ncclResult_t memAlloc(size_t size, bool samePeerProcess, LocalMem* mem) {
  size = (size + 4095) & ~(size_t)4095;
  mem->handle = MemHandle{};
  mem->handle.size = size;
  if (samePeerProcess) {
    // Reference counted: either side may be torn down first, and the other may still post a head or
    // tail into this memory; it is freed when both have let go.
    // Zeroed and resident at once (MAP_POPULATE): writing a fresh page costs a trap each, and a 4-rank
    // communicator of threads spent 85% of its 185 ms init zeroing its connections' memory that way on a VM.
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) {
      P2P_WARN("p2p-nvlink: cannot allocate %zu bytes of connection memory: %s", size, strerror(errno));
      return ncclSystemError;
    }
    mem->ptr = p;
    mem->handle.kind = MemKind::Heap;
    mem->handle.address = (uint64_t)(uintptr_t)p;
    mem->handle.serial = (uint32_t)segmentCounter.fetch_add(1);
    std::lock_guard<std::mutex> lock(heapMutex);
    heapLive()[p] = HeapSegment{mem->handle.serial, 1, size};
    return ncclSuccess;
  }
  std::random_device rd;
  snprintf(mem->handle.shmName, sizeof(mem->handle.shmName), "/plexus-%d-%llu-%08x", (int)getpid(),
           (unsigned long long)segmentCounter.fetch_add(1), (unsigned)rd());
  int fd = shm_open(mem->handle.shmName, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    P2P_WARN("p2p-nvlink: shm_open(%s) failed: %s. Check that /dev/shm is mounted and writable.",
             mem->handle.shmName, strerror(errno));
    return ncclSystemError;
  }
  // Reserve the pages now: a full /dev/shm is then an error here, not a SIGBUS in the middle of a
  // collective.
  int rc = ftruncate(fd, (off_t)size) != 0 ? errno : posix_fallocate(fd, 0, (off_t)size);
  if (rc != 0) {
    int err = rc;
    close(fd);
    shm_unlink(mem->handle.shmName);
    P2P_WARN("p2p-nvlink: cannot size shared memory %s to %zu bytes: %s. /dev/shm may be full (df -h /dev/shm).",
             mem->handle.shmName, size, strerror(err));
    return ncclSystemError;
  }
  // Populated: page faults at first use of each slot would land in the first operations' time.
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(mem->handle.shmName);
    P2P_WARN("p2p-nvlink: mmap of %s (%zu bytes) failed: %s", mem->handle.shmName, size, strerror(errno));
    return ncclSystemError;
  }
  mem->ptr = p;
  mem->handle.kind = MemKind::Shm;
  return ncclSuccess;
}

void touchPages(const void* p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 4096) (void)*(const volatile uint64_t*)((const char*)p + off);
}

void memUnlinkName(LocalMem* mem) {
  if (mem->handle.kind == MemKind::Shm && mem->handle.shmName[0]) {
    shm_unlink(mem->handle.shmName);
    mem->handle.shmName[0] = '\0';
  }
}

void memFree(LocalMem* mem) {
  if (!mem->ptr) return;
  if (mem->handle.kind == MemKind::Heap) {
    heapRelease(mem->ptr);
  } else {
    memUnlinkName(mem);
    munmap(mem->ptr, mem->handle.size);
  }
  mem->ptr = nullptr;
}

ncclResult_t memMap(const MemHandle& handle, void** ptr) {
  if (handle.kind == MemKind::Heap) {
    void* p = (void*)(uintptr_t)handle.address;
    std::lock_guard<std::mutex> lock(heapMutex);
    auto it = heapLive().find(p);
    if (it == heapLive().end() || it->second.serial != handle.serial) {
      P2P_WARN("p2p-nvlink: the peer's connection memory is gone: the peer rank was aborted or destroyed while "
               "connecting");
      return ncclRemoteError;
    }
    it->second.refs++;
    *ptr = p;
    return ncclSuccess;
  }
  if (handle.kind != MemKind::Shm || handle.shmName[0] != '/' ||
      memchr(handle.shmName, '\0', sizeof(handle.shmName)) == nullptr) {
    P2P_WARN("p2p-nvlink: the peer's connection info is malformed (kind %u)", (unsigned)handle.kind);
    return ncclInternalError;
  }
  int fd = shm_open(handle.shmName, O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    P2P_WARN("p2p-nvlink: cannot open the peer's shared memory %s: %s. Ranks that share a host identity must "
             "share /dev/shm (same machine, same IPC namespace).", handle.shmName, strerror(errno));
    return ncclSystemError;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < handle.size) {
    close(fd);
    P2P_WARN("p2p-nvlink: the peer's shared memory %s is smaller than announced (%llu bytes)", handle.shmName,
             (unsigned long long)handle.size);
    return ncclSystemError;
  }
  void* p = mmap(nullptr, handle.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    P2P_WARN("p2p-nvlink: mmap of the peer's %s failed: %s", handle.shmName, strerror(errno));
    return ncclSystemError;
  }
  *ptr = p;
  return ncclSuccess;
}

void memUnmap(const MemHandle& handle, void* ptr) {
  if (!ptr) return;
  if (handle.kind == MemKind::Shm) munmap(ptr, handle.size);
  else heapRelease(ptr);
}

}  // namespace p2p
