#include "zero_copy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "log.h"

namespace p2p {

bool cmaEnabled() {
  const char* v = getenv("PLEXUS_CMA");
  if (!v) v = getenv("NCCL_CMA");
  return !v || atoi(v) != 0;
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
