#include "transport/net/socket/common.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "misc/debug.h"
#include "misc/env.h"

namespace plexus::socketnet {

namespace {

// Defaults measured on loopback (tests/unit/test_socket_net.cc, "socket net bandwidth", on a 2-core host
// shared with other jobs): one helper thread and one data socket per connection, with the caller's turns
// (data.h), carried one connection at 0.8-1.5x a plain blocking TCP stream with 4 MiB messages (most runs
// above 1x); more threads or sockets only added threads competing for the cores. Where cores are many
// and the NIC is faster than one core's copies, raise NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD (NCCL
// uses 2 x 8 on AWS). NCCL_SOCKET_NTHREADS=0 leaves everything to the caller's turns, as NCCL's default.
constexpr int kDefaultThreads = 1;
constexpr int kDefaultSocksPerThread = 1;
constexpr int kDefaultInline = 16 << 10;    // below this a helper thread's hand-off costs more than the copy
constexpr int kDefaultMinChunk = 64 << 10;  // NCCL's MIN_CHUNKSIZE
constexpr int kDefaultRetryCount = 34;      // NCCL_SOCKET_RETRY_CNT
constexpr int kDefaultRetrySleepMs = 100;   // NCCL_SOCKET_RETRY_SLEEP_MSEC
// Helper threads get their work from the caller's turns (data.h), so spinning for it only takes a core
// from the threads that move the bytes: a 64 KiB ping-pong took 14 us without, 25-45 us with 10-50 us.
constexpr int kDefaultSpinUs = 0;

int64_t knob(const char* name, int64_t deflt, int64_t lo, int64_t hi) {
  int64_t v = envInt(name, deflt);
  if (v < lo || v > hi) {
    int64_t c = std::clamp(v, lo, hi);
    WARN("NET/Socket: NCCL_%s=%lld is outside [%lld, %lld]; using %lld", name, (long long)v, (long long)lo,
         (long long)hi, (long long)c);
    return c;
  }
  return v;
}

}  // namespace

Knobs Knobs::read() {
  Knobs k;
  k.nThreads = (int)knob("SOCKET_NTHREADS", kDefaultThreads, 0, kMaxThreads);
  k.nSocksPerThread = (int)knob("NSOCKS_PERTHREAD", kDefaultSocksPerThread, 1, kMaxSocks);
  if (k.nSocks() > kMaxSocks) {
    int per = kMaxSocks / std::max(k.nThreads, 1);
    WARN(
        "NET/Socket: NCCL_SOCKET_NTHREADS=%d x NCCL_NSOCKS_PERTHREAD=%d is more than %d sockets per connection; "
        "using %d sockets per thread",
        k.nThreads, k.nSocksPerThread, kMaxSocks, per);
    k.nSocksPerThread = per;
  }
  k.inlineMax = (size_t)knob("SOCKET_INLINE", kDefaultInline, 0, 1 << 30);
  k.minChunk = (size_t)knob("SOCKET_MIN_TASKSIZE", kDefaultMinChunk, 1, (int64_t)1 << 40);
  k.retryCount = (int)knob("SOCKET_RETRY_CNT", kDefaultRetryCount, 0, 1 << 20);
  k.retrySleepMs = (int)knob("SOCKET_RETRY_SLEEP_MSEC", kDefaultRetrySleepMs, 1, 60 * 1000);
  k.spinUs = (int)knob("SOCKET_SPIN_USEC", kDefaultSpinUs, 0, 1000 * 1000);
  return k;
}

bool wouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK; }

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string describeSocketError(int err) {
  std::string s = strerror(err);
  if (err == EMFILE || err == ENFILE) s += ". Raise the open-files limit (ulimit -n)";
  if (err == ENOBUFS || err == ENOMEM) s += ". The host is short of memory";
  return s;
}

}  // namespace plexus::socketnet
