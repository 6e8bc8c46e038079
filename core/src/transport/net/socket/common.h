// What the socket net's pieces share: limits, the wire formats (listen handle, per-socket hello, message
// header), the knobs, and small POSIX helpers.
#pragma once

#include <plexus/net_v12.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "bootstrap/socket.h"

namespace plexus::socketnet {

using Clock = std::chrono::steady_clock;

constexpr int kMaxDevices = 16;  // interfaces used, as NCCL's MAX_IFS
constexpr int kMaxSocks = 64;    // data sockets per connection, as NCCL
constexpr int kMaxThreads = 16;  // helper threads per connection, as NCCL
constexpr int kMaxRecvs = 8;     // buffers of one multi-receive (properties.maxRecvs)
constexpr int kMaxRecvRequests = NCCL_NET_MAX_REQUESTS;
// A send comm must take NCCL_NET_MAX_REQUESTS receives' worth of sends, each of up to maxRecvs buffers.
constexpr int kMaxSendRequests = NCCL_NET_MAX_REQUESTS * kMaxRecvs;
// Tasks a data socket may hold: a message puts at most one chunk on each socket, and at most
// kMaxSendRequests (send side) or kMaxRecvRequests * kMaxRecvs (receive side) messages are in flight.
constexpr uint32_t kTaskRingSize = 256;
static_assert(kTaskRingSize >= kMaxSendRequests && kTaskRingSize >= kMaxRecvRequests * kMaxRecvs);
static_assert((kTaskRingSize & (kTaskRingSize - 1)) == 0, "the task ring size must be a power of two");

// The wire formats below travel in host byte order: every platform Plexus runs on is little-endian.
constexpr uint32_t kHandleSignature = 0x4e535850;  // "PXSN" in memory: marks our handles
constexpr uint16_t kProtocolVersion = 1;

// What listen() writes into NCCL's 128-byte handle. The connector's progress lives in `pendingId` (the
// caller passes the same handle to every connect() call of one connection, as NCCL requires).
struct Handle {
  uint32_t signature;  // kHandleSignature
  uint16_t version;    // kProtocolVersion
  uint16_t nSocks;     // data sockets per connection: the listener decides, the connector follows
  uint64_t magic;      // random per listen; every socket of a connection presents it
  SocketAddress addr;  // where the listener listens
  uint32_t reserved;
  uint64_t pendingId;  // the connector's key while connect() is in progress on this handle; 0 otherwise
};
static_assert(sizeof(Handle) <= NCCL_NET_HANDLE_MAXSIZE, "the socket net's handle must fit NCCL's");

// The first bytes on every socket of a connection, connector to listener.
struct Hello {
  uint64_t magic;   // the handle's
  uint64_t connId;  // random per connection: groups the sockets of one connection at the listener
  uint16_t index;   // 0: the control socket, 1..nSocks: data sockets
  uint16_t nSocks;
  uint16_t version;
  uint16_t reserved;
};
static_assert(sizeof(Hello) == 24);
// The listener's judgement of a socket's hello (sizeof(Hello) bytes as received): nullptr when it belongs to a
// connection to the listener of `handle` (then its index is in [0, nSocks]), else why not, written to why[n].
// Pure (hello.cc), so that tests/fuzz/ runs what the listener runs.
const char* helloProblem(const void* data, size_t size, const Handle& handle, char* why, size_t n);

// One per message, on the control socket, before the message's inline payload (if any).
struct WireHeader {
  uint32_t check;  // sequence number ^ low bits of the magic: catches a stream out of step or garbage
  int32_t tag;
  uint64_t size;       // bytes sent
  uint64_t chunkSize;  // 0: the payload follows inline; else its chunks go to the data sockets in turn
};
static_assert(sizeof(WireHeader) == 24);

// Knobs, read where a connection is set up (NCCL's names; PLEXUS_ twins win).
struct Knobs {
  int nThreads;         // NCCL_SOCKET_NTHREADS: helper threads per connection; 0: the caller's thread
  int nSocksPerThread;  // NCCL_NSOCKS_PERTHREAD
  size_t inlineMax;     // NCCL_SOCKET_INLINE: payloads up to this go on the control socket
  size_t minChunk;      // NCCL_SOCKET_MIN_TASKSIZE: smallest chunk given to a data socket
  int retryCount;       // NCCL_SOCKET_RETRY_CNT: refused connects retried this often
  int retrySleepMs;     // NCCL_SOCKET_RETRY_SLEEP_MSEC: first wait between retries, growing linearly
  int spinUs;           // PLEXUS_SOCKET_SPIN_USEC: an idle helper thread spins this long before blocking (0)
  static Knobs read();
  int nSocks() const { return (nThreads > 0 ? nThreads : 1) * nSocksPerThread; }  // data sockets per connection
};

// An owned file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

bool wouldBlock(int err);
void setNoDelay(int fd);
// "what happened" for a failed socket call whose errno is err, with the hint that fits it.
std::string describeSocketError(int err);

}  // namespace plexus::socketnet
