#include "zero_copy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "log.h"

namespace p2p {

namespace {

// Whether process_vm_writev's one copy beats the slots' two: it writes 1 MiB into this process at 60% of memcpy's
// speed or better (best of 5 each). The slots' copies run one on each rank's core at the same time, so a message
// moves through them at a good part of one memcpy's speed; a kernel copy much slower than that loses although it
// touches memory once. On the CI machine (a VM) this probe reads 0.25-0.45, and the slots win at every size from
// 64 KiB to 64 MiB (2 ranks, malloc'ed buffers, busbw against Open MPI's: AlltoAll 1 MiB 1.15 -> 1.30, 64 MiB
// 1.20 -> 1.80; 4 ranks 1 MiB 0.90 -> 1.07; sendrecv 1 MiB 11.5-14 -> 18-20 GB/s).
bool cmaProbe() {
  constexpr size_t kBytes = 1 << 20;
  std::vector<char> src(kBytes, 1), dst(kBytes, 0);  // in memory, not first touched under the clock
  double cma = 1e30, copy = 1e30;
  for (int i = 0; i < 5; i++) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!cmaWrite((uint64_t)getpid(), (uint64_t)(uintptr_t)dst.data(), src.data(), kBytes)) {
      P2P_INFO("p2p-nvlink: process_vm_writev refused (%s): messages between processes go through the connection's "
               "slots", strerror(errno));
      return false;
    }
    const auto t1 = std::chrono::steady_clock::now();
    memcpy(dst.data(), src.data(), kBytes);
    __asm__ __volatile__("" : : "r"(dst.data()) : "memory");  // the copy is used
    const auto t2 = std::chrono::steady_clock::now();
    cma = std::min(cma, std::chrono::duration<double>(t1 - t0).count());
    copy = std::min(copy, std::chrono::duration<double>(t2 - t1).count());
  }
  const bool fast = copy >= 0.6 * cma;
  P2P_INFO("p2p-nvlink: process_vm_writev copies 1 MiB at %.1f GB/s, memcpy at %.1f GB/s: %s", kBytes / cma / 1e9,
           kBytes / copy / 1e9,
           fast ? "receive buffers between processes take messages from 64 KiB on in one copy"
                : "messages between processes go through the connection's slots (PLEXUS_CMA=1 uses it anyway)");
  return fast;
}

}  // namespace

bool cmaEnabled() {
  const char* v = getenv("PLEXUS_CMA");
  if (!v) v = getenv("NCCL_CMA");
  if (v) return atoi(v) != 0;
  static const bool fast = cmaProbe();
  return fast;
}

uint64_t pidNamespace() {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

bool cmaWrite(uint64_t pid, uint64_t addr, const void* src, size_t bytes) {
  size_t done = 0;
  for (int calls = 0; done < bytes && calls < 1 << 20; calls++) {  // the kernel may write less than asked
    iovec local{(char*)src + done, bytes - done};
    iovec remote{(void*)(uintptr_t)(addr + done), bytes - done};
    const ssize_t n = process_vm_writev((pid_t)pid, &local, 1, &remote, 1, 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) errno = EIO;
      return false;
    }
    done += (size_t)n;
  }
  return done == bytes;
}

PeerMemory::~PeerMemory() {
  for (Mapping& m : maps_) munmap(m.base, m.size);
}

char* PeerMemory::destination(const plexusPtrExchange_v1_t& x) {
  Mapping* found = nullptr;
  for (Mapping& m : maps_)
    if (m.pid == x.pid && m.serial == x.serial) found = &m;
  if (!found) {
    const std::string path = "/proc/" + std::to_string(x.pid) + "/fd/" + std::to_string(x.fd);
    const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      P2P_WARN("p2p-nvlink: cannot open the peer's registered ncclMemAlloc memory (%s) for a zero-copy send: %s; the "
               "message goes through the connection's slots. Run the ranks as one user (and allow reading "
               "/proc/<pid>/fd), or do not register the receive buffers", path.c_str(), strerror(errno));
      return nullptr;
    }
    struct stat st;
    void* p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size > 0)
      p = mmap(nullptr, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int err = errno;
    close(fd);
    if (p == MAP_FAILED) {
      P2P_WARN("p2p-nvlink: cannot map the peer's registered ncclMemAlloc memory (%s): %s; the message goes through "
               "the connection's slots", path.c_str(), strerror(err));
      return nullptr;
    }
    maps_.push_back(Mapping{x.pid, x.serial, (char*)p, (size_t)st.st_size});
    found = &maps_.back();
    P2P_INFO("p2p-nvlink: mapped the peer's ncclMemAlloc memory %s (%zu bytes) for zero-copy", path.c_str(),
             found->size);
  }
  if (x.offset > found->size || x.size > found->size - x.offset) {
    P2P_WARN("p2p-nvlink: the peer asked for %llu bytes at offset %llu of a %zu-byte allocation (corrupt exchange)",
             (unsigned long long)x.size, (unsigned long long)x.offset, found->size);
    return nullptr;
  }
  return found->base + x.offset;
}

}  // namespace p2p
