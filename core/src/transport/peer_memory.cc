#include "transport/peer_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "health/health.h"
#include "misc/check.h"
#include "misc/env.h"

namespace plexus {

PeerMappings::~PeerMappings() {
  for (PeerMapping& m : maps) munmap(m.base, m.size);
}

bool cmaOffered(ncclComm* comm, int peer) {
  static const bool enabled = envInt("CMA", 1) != 0;
  // Pids mean the same here only on one machine, in one pid namespace (what the watchdog checks too).
  if (!enabled || !comm->health || !comm->health->watchable[peer]) return false;
  return !comm->peerMappings || comm->peerMappings->cmaRefused.empty() || !comm->peerMappings->cmaRefused[peer];
}

bool cmaWrite(uint64_t pid, uint64_t addr, const char* src, size_t bytes) {
  size_t done = 0;
  for (int calls = 0; done < bytes && calls < 1 << 20; calls++) {  // the kernel may write less than asked
    iovec local{(void*)(src + done), bytes - done};
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

void cmaRefuse(ncclComm* comm, int peer) {
  if (!comm->peerMappings) comm->peerMappings = std::make_unique<PeerMappings>();
  std::vector<char>& r = comm->peerMappings->cmaRefused;
  if (r.empty()) r.assign(comm->nRanks, 0);
  r[peer] = 1;
}

ncclResult_t peerMemoryDestination(ncclComm* comm, int peer, const plexusPtrExchange_v1_t& x, char** dst) {
  if (!comm->peerMappings) comm->peerMappings = std::make_unique<PeerMappings>();
  PeerMapping* found = nullptr;
  for (PeerMapping& m : comm->peerMappings->maps)
    if (m.peer == peer && m.pid == x.pid && m.serial == x.serial) found = &m;
  if (!found) {
    const std::string path = "/proc/" + std::to_string(x.pid) + "/fd/" + std::to_string(x.fd);
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0)
      return setError(comm, ncclSystemError,
                      "rank %d: cannot open rank %d's registered ncclMemAlloc memory (%s) for a zero-copy receive: "
                      "%s. Run the ranks as one user (and allow reading /proc/<pid>/fd), or do not register the "
                      "receive buffers", comm->rank, peer, path.c_str(), strerror(errno));
    struct stat st;
    void* p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size > 0)
      p = mmap(nullptr, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int err = errno;
    close(fd);
    if (p == MAP_FAILED)
      return setError(comm, ncclSystemError, "rank %d: cannot map rank %d's registered ncclMemAlloc memory (%s): %s",
                      comm->rank, peer, path.c_str(), strerror(err));
    comm->peerMappings->maps.push_back(PeerMapping{peer, x.pid, x.serial, (char*)p, (size_t)st.st_size});
    found = &comm->peerMappings->maps.back();
    INFO(NCCL_P2P | NCCL_REG, "rank %d: mapped rank %d's ncclMemAlloc memory %s (%zu bytes) for zero-copy", comm->rank,
         peer, path.c_str(), found->size);
  }
  if (x.offset > found->size || x.size > found->size - x.offset)
    return setError(comm, ncclRemoteError,
                    "rank %d: rank %d asked for %llu bytes at offset %llu of a %zu-byte allocation (corrupt exchange)",
                    comm->rank, peer, (unsigned long long)x.size, (unsigned long long)x.offset, found->size);
  *dst = found->base + x.offset;
  return ncclSuccess;
}

}  // namespace plexus
