// unix-socket: a transport plugin built outside the Plexus tree, against the installed SDK alone
// (plexus/transport_v1.h). Each connection is one Unix-domain stream socket between two ranks of one machine,
// moved by the core's proxy thread, as the built-in net transport moves a network connection:
//
//   sender:   the kernel writes step s into slot s % PLEXUS_STEPS of the sender's own buffer, records its bytes in
//             connFifo and raises tail; proxyProgress writes [bytes][data] to the socket, frees the slot and
//             returns credit through head;
//   receiver: the kernel raises recvWanted to the steps it is about to consume; proxyProgress reads that many
//             steps (never more: data no kernel waits for stays in the socket), each into its slot, and raises
//             tail; the kernel consumes it and raises head, which frees the slot for the next step.
//
// LL and LL128 lines travel in the Simple slots (PLEXUS_CONN_LL_IN_SLOTS). Host backend only. Load it through the
// configuration file: { "version": 1, "plugins": { "transports": ["/path/libplexus-transport-unix.so"] } }.
#include <errno.h>
#include <fcntl.h>
#include <plexus/transport_v1.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <new>
#include <random>

namespace {

ncclDebugLogger_t logger = nullptr;
#define LOG(level, ...) \
  do {                  \
    if (logger) logger(level, NCCL_NET, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

// The words the kernel and the proxy share, on separate cache lines.
struct alignas(128) Ctrl {
  volatile uint64_t tail;
  char pad0[120];
  volatile uint64_t head;
  char pad1[120];
  volatile uint64_t wanted;
  char pad2[120];
  plexusConnFifo_v1_t connFifo[PLEXUS_STEPS];
};

// What the receiver tells the sender: where to connect, and its slot size (both sides must agree).
struct Info {
  char name[96];  // abstract socket name, without its leading NUL
  int stepSize;
};
static_assert(sizeof(Info) <= PLEXUS_CONNECT_INFO_BYTES, "connect info");

struct Conn {
  bool isSend = false;
  int self = -1, peer = -1, channel = -1;
  int stepSize = 0;
  size_t buffBytes = 0;
  char* buff = nullptr;  // PLEXUS_STEPS slots, then the Ctrl
  Ctrl* ctrl = nullptr;
  int listenFd = -1, fd = -1;
  // Steps counted from the connection's start: handed to the socket or read from it (posted, partly done at
  // `done` bytes of the current one, header included), and released back to the kernel (receiver).
  uint64_t posted = 0;
  size_t done = 0;
  uint64_t header = 0;  // the step's byte count, as it travels
};

sockaddr_un address(const char* name, socklen_t* len) {
  sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  const size_t n = strnlen(name, sizeof a.sun_path - 2);
  memcpy(a.sun_path + 1, name, n);  // sun_path[0] = 0: the abstract namespace, no file to remove
  *len = (socklen_t)(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

ncclResult_t unixInit(void** ctx, ncclDebugLogger_t log) {
  logger = log;
  *ctx = nullptr;
  return ncclSuccess;
}

// Ranks of one machine on the host backend: a Unix socket reaches any process of the machine.
ncclResult_t unixCanConnect(void*, const plexusPeerInfo_v1_t* self, const plexusPeerInfo_v1_t* peer, int* ret) {
  *ret = self->machineHash == peer->machineHash && self->backend == 0 && peer->backend == 0;
  return ncclSuccess;
}

Conn* allocate(const plexusTransportSetup_v1_t* setup, bool isSend) {
  auto* c = new (std::nothrow) Conn();
  if (!c) return nullptr;
  c->isSend = isSend;
  c->self = setup->self->rank;
  c->peer = setup->peer->rank;
  c->channel = setup->channelId;
  c->stepSize = setup->buffSizes[PLEXUS_PROTO_SIMPLE] / PLEXUS_STEPS;
  c->buffBytes = (size_t)c->stepSize * PLEXUS_STEPS;
  void* mem = mmap(nullptr, c->buffBytes + sizeof(Ctrl), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    LOG(NCCL_LOG_WARN, "unix-socket: rank %d: cannot allocate %zu bytes for rank %d: %s", c->self, c->buffBytes,
        c->peer, strerror(errno));
    delete c;
    return nullptr;
  }
  c->buff = (char*)mem;
  c->ctrl = new ((char*)mem + c->buffBytes) Ctrl{};
  for (auto& f : c->ctrl->connFifo) f.size = PLEXUS_CONNFIFO_FREE;
  return c;
}

ncclResult_t unixFree(void* resources) {
  auto* c = (Conn*)resources;
  if (!c) return ncclSuccess;
  if (c->fd >= 0) close(c->fd);  // data in flight is dropped: the peer sees the socket close
  if (c->listenFd >= 0) close(c->listenFd);
  munmap(c->buff, c->buffBytes + sizeof(Ctrl));
  delete c;
  return ncclSuccess;
}

ncclResult_t unixRecvSetup(void*, const plexusTransportSetup_v1_t* setup, plexusConnectInfo_v1_t* info,
                           void** resources) {
  Conn* c = allocate(setup, false);
  if (!c) return ncclSystemError;
  Info mine{};
  static std::mt19937_64 gen{std::random_device{}()};
  static std::atomic<uint64_t> serial{0};
  snprintf(mine.name, sizeof mine.name, "plexus-unix-%d-%llx-%llu", (int)getpid(), (unsigned long long)gen(),
           (unsigned long long)serial++);
  mine.stepSize = c->stepSize;
  c->listenFd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  socklen_t len;
  const sockaddr_un a = address(mine.name, &len);
  if (c->listenFd < 0 || bind(c->listenFd, (const sockaddr*)&a, len) != 0 || listen(c->listenFd, 1) != 0) {
    LOG(NCCL_LOG_WARN, "unix-socket: rank %d: cannot listen for rank %d: %s", c->self, c->peer, strerror(errno));
    unixFree(c);
    return ncclSystemError;
  }
  memset(info, 0, sizeof *info);
  memcpy(info->data, &mine, sizeof mine);
  *resources = c;
  return ncclSuccess;
}

ncclResult_t unixSendSetup(void*, const plexusTransportSetup_v1_t* setup, plexusConnectInfo_v1_t* info,
                           void** resources) {
  Conn* c = allocate(setup, true);
  if (!c) return ncclSystemError;
  memset(info, 0, sizeof *info);
  *resources = c;
  return ncclSuccess;
}

// What the kernel sees: this side's own slots and control words; the proxy moves the data between the sides.
void fillConn(const Conn* c, plexusConnInfo_v1_t* conn) {
  memset(conn, 0, sizeof *conn);
  for (int p = 0; p < PLEXUS_NUM_PROTOCOLS; p++) conn->buffs[p] = c->buff;
  conn->tail = &c->ctrl->tail;
  conn->head = &c->ctrl->head;
  conn->connFifo = c->ctrl->connFifo;
  conn->stepSize = c->stepSize;
  conn->flags = PLEXUS_CONN_LL_IN_SLOTS;
  if (!c->isSend) conn->recvWanted = &c->ctrl->wanted;
}

ncclResult_t unixSendConnect(void* resources, const plexusConnectInfo_v1_t* peerInfo, plexusConnInfo_v1_t* conn) {
  auto* c = (Conn*)resources;
  Info theirs;
  memcpy(&theirs, peerInfo->data, sizeof theirs);
  if (theirs.stepSize != c->stepSize) {
    LOG(NCCL_LOG_WARN, "unix-socket: rank %d: rank %d's slots are %d bytes, this rank's %d: every rank must use the "
        "same NCCL_BUFFSIZE", c->self, c->peer, theirs.stepSize, c->stepSize);
    return ncclInvalidUsage;
  }
  if (c->fd < 0) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t len;
    const sockaddr_un a = address(theirs.name, &len);
    if (fd < 0 || connect(fd, (const sockaddr*)&a, len) != 0) {
      const int err = errno;
      if (fd >= 0) close(fd);
      if (err == EAGAIN) return ncclInProgress;  // the listener's queue is full: try again
      LOG(NCCL_LOG_WARN, "unix-socket: rank %d: cannot connect to rank %d (%s): %s", c->self, c->peer, theirs.name,
          strerror(err));
      return ncclSystemError;
    }
    // Non-blocking from here on: the proxy never waits inside the plugin.
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
      close(fd);
      return ncclSystemError;
    }
    c->fd = fd;
  }
  fillConn(c, conn);
  return ncclSuccess;
}

ncclResult_t unixRecvConnect(void* resources, const plexusConnectInfo_v1_t*, plexusConnInfo_v1_t* conn) {
  auto* c = (Conn*)resources;
  if (c->fd < 0) {
    const int fd = accept4(c->listenFd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EINTR) return ncclInProgress;  // the sender has not connected yet
      LOG(NCCL_LOG_WARN, "unix-socket: rank %d: accept of rank %d failed: %s", c->self, c->peer, strerror(errno));
      return ncclSystemError;
    }
    c->fd = fd;
    close(c->listenFd);
    c->listenFd = -1;
  }
  fillConn(c, conn);
  return ncclSuccess;
}

// Moves the current step between its slot and the socket, its byte count first: on from c->done bytes (header
// included), as far as the socket takes or gives without waiting. True once the step is complete; *error when the
// peer closed, the socket failed, or what came is not a step of ours.
bool moveStep(Conn* c, char* slot, bool write, bool* error) {
  for (;;) {
    const bool inHeader = c->done < sizeof c->header;
    if (!inHeader && c->header > (uint64_t)c->stepSize) {
      errno = EPROTO;
      *error = true;
      return false;
    }
    const size_t total = sizeof c->header + (inHeader ? 0 : (size_t)c->header);
    if (!inHeader && c->done == total) return true;
    char* at = inHeader ? (char*)&c->header + c->done : slot + (c->done - sizeof c->header);
    const size_t len = (inHeader ? sizeof c->header : total) - c->done;
    const ssize_t n = write ? send(c->fd, at, len, MSG_NOSIGNAL) : recv(c->fd, at, len, 0);
    if (n > 0) {
      c->done += (size_t)n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
    if (n == 0) errno = 0;  // the peer closed
    *error = true;
    return false;
  }
}

ncclResult_t unixProxyProgress(void* resources, int* idle, char* error, int errorLen) {
  auto* c = (Conn*)resources;
  *idle = 1;
  if (c->fd < 0) return ncclSuccess;
  bool moved = false, failed = false;
  if (c->isSend) {
    const uint64_t tail = __atomic_load_n(&c->ctrl->tail, __ATOMIC_ACQUIRE);
    while (c->posted < tail) {
      const int slot = (int)(c->posted % PLEXUS_STEPS);
      const int64_t bytes = c->ctrl->connFifo[slot].size;
      if (bytes < 0 || bytes > c->stepSize) {
        snprintf(error, errorLen, "unix-socket: rank %d: a step of %lld bytes for rank %d on channel %d (slots hold "
                 "%d)", c->self, (long long)bytes, c->peer, c->channel, c->stepSize);
        return ncclInternalError;
      }
      if (c->done == 0) c->header = (uint64_t)bytes;
      if (!moveStep(c, c->buff + (size_t)slot * c->stepSize, true, &failed)) break;
      // In the socket: the slot is the kernel's again.
      c->ctrl->connFifo[slot].size = PLEXUS_CONNFIFO_FREE;
      c->done = 0;
      c->posted++;
      __atomic_store_n(&c->ctrl->head, c->posted, __ATOMIC_RELEASE);
      moved = true;
    }
    *idle = !moved && c->posted == tail;
  } else {
    // A step is read only into a slot the kernel has consumed (head) and only when the kernel wants it.
    const uint64_t wanted = __atomic_load_n(&c->ctrl->wanted, __ATOMIC_ACQUIRE);
    const uint64_t head = __atomic_load_n(&c->ctrl->head, __ATOMIC_ACQUIRE);
    while (c->posted < wanted && c->posted < head + PLEXUS_STEPS) {
      const int slot = (int)(c->posted % PLEXUS_STEPS);
      if (!moveStep(c, c->buff + (size_t)slot * c->stepSize, false, &failed)) break;
      c->done = 0;
      c->posted++;
      __atomic_store_n(&c->ctrl->tail, c->posted, __ATOMIC_RELEASE);
      moved = true;
    }
    *idle = !moved;
  }
  if (failed) {
    snprintf(error, errorLen, "unix-socket: rank %d: the connection %s rank %d on channel %d broke (%s)", c->self,
             c->isSend ? "to" : "from", c->peer, c->channel, errno ? strerror(errno) : "the peer closed it");
    return ncclRemoteError;
  }
  return ncclSuccess;
}

ncclResult_t unixFinalize(void*) { return ncclSuccess; }

}  // namespace

extern "C" __attribute__((visibility("default"))) const plexusTransport_v1_t plexusTransportPlugin_v1 = {
    PLEXUS_TRANSPORT_ABI_VERSION,
    sizeof(plexusTransport_v1_t),
    "unix-socket",
    unixInit,
    unixCanConnect,
    unixSendSetup,
    unixRecvSetup,
    unixSendConnect,
    unixRecvConnect,
    nullptr,  // connected
    unixFree,
    unixFree,
    unixProxyProgress,
    unixFinalize,
    nullptr,  // commInit
    nullptr,  // commFinalize
    nullptr,  // p2pDescribe: every message goes through the slots
    nullptr,  // p2pWrite
};
