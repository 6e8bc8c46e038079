// TCP sockets for the bootstrap: addresses, interface choice (NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY as NCCL
// reads them) and a small RAII socket whose every blocking call honours a deadline and an abort flag.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"

namespace plexus {

// NCCL's ncclSocketAddress: big enough for either family, and what travels inside ncclUniqueId.
union SocketAddress {
  sockaddr sa;
  sockaddr_in sin;
  sockaddr_in6 sin6;
};
static_assert(sizeof(SocketAddress) == 28, "SocketAddress must keep NCCL's ncclSocketAddress layout");

std::string toString(const SocketAddress& addr);  // "ip:port" or "[ip6]:port"
socklen_t addressLength(const SocketAddress& addr);
uint16_t addressPort(const SocketAddress& addr);
void setAddressPort(SocketAddress* addr, uint16_t port);
// "host:port" or "[v6]:port"; host is a numeric address or a name (getaddrinfo, NCCL_SOCKET_FAMILY honoured).
// `what` names the string's origin in the error ("NCCL_COMM_ID").
ncclResult_t parseAddress(const char* str, SocketAddress* addr, const char* what = "the address");

// The interface the bootstrap uses, chosen as NCCL does: NCCL_SOCKET_IFNAME (comma-separated prefixes, '^' to
// exclude, '=' for exact names), NCCL_SOCKET_FAMILY (AF_INET / AF_INET6); when unset: ib*, then the subnet of
// NCCL_COMM_ID, then anything but docker*/lo*, then docker*, then lo. The port of *addr is 0.
ncclResult_t findInterface(SocketAddress* addr, std::string* ifName);
// Up to maxIfs interfaces, chosen by the same rules (NCCL's ncclFindInterfaces; the socket net uses 16): every
// match of the first rule that matches any. Ports are 0. `who` starts the error message ("NET/Socket").
struct NetInterface {
  std::string name;
  SocketAddress addr;
};
ncclResult_t findInterfaces(size_t maxIfs, std::vector<NetInterface>* out, const char* who);
// "lo(127.0.0.1, ::1) eth0(10.0.0.2)": the host's interfaces, as NCCL_SOCKET_IFNAME names them.
std::string describeInterfaces();

// The bootstrap's one timeout knob: PLEXUS_BOOTSTRAP_TIMEOUT / NCCL_BOOTSTRAP_TIMEOUT, seconds (default 120).
int bootstrapTimeout();

// A point in time after which a blocking call gives up; it remembers its length for error messages.
struct Deadline {
  std::chrono::steady_clock::time_point start, end;

  static Deadline after(double seconds);
  bool expired() const { return std::chrono::steady_clock::now() >= end; }
  double seconds() const { return std::chrono::duration<double>(end - start).count(); }
  // How long one poll() may sleep: the time left, capped so that abort flags are seen every <= capMs.
  int pollMs(int capMs = 100) const;
};

// Up to two flags (a communicator's external abortFlag and the bootstrap's own); either set aborts a blocking
// call within ~100 ms. Converts from a plain pointer, so callers with one flag pass it directly.
class AbortFlag {
 public:
  AbortFlag(volatile uint32_t* a = nullptr, volatile uint32_t* b = nullptr) : a_(a), b_(b) {}
  bool set() const {
    return (a_ && __atomic_load_n(a_, __ATOMIC_ACQUIRE)) || (b_ && __atomic_load_n(b_, __ATOMIC_ACQUIRE));
  }

 private:
  volatile uint32_t* a_;
  volatile uint32_t* b_;
};

// One TCP endpoint (listening or connected). Non-blocking, close-on-exec, TCP_NODELAY; blocking calls poll in
// slices of <= 100 ms. Failures return ncclSystemError (ncclRemoteError when the peer closed the connection,
// ncclInternalError when aborted) with a message naming the peer. `what` names the data or peer for messages
// ("the root's reply", "rank 3"). When `errorOut` is given, a failure is described there instead of being
// recorded and logged as a WARN: for probing connections that may be garbage.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int connectedFd) : fd_(connectedFd) {}  // takes ownership
  ~Socket() { close(); }
  Socket(Socket&& o) noexcept;
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Binds to addr (port 0: an ephemeral one) and listens; addr() is then the bound address.
  ncclResult_t listen(const SocketAddress& addr);
  // Connects to addr, retrying refused / timed-out attempts until the deadline. `hint` ends the error message.
  ncclResult_t connect(const SocketAddress& addr, const Deadline& deadline, AbortFlag abort, const char* what,
                       const char* hint = nullptr);
  // Waits for one connection on a listening socket; out->addr() is the peer's address.
  ncclResult_t accept(Socket* out, const Deadline& deadline, AbortFlag abort, const char* what);
  // Non-blocking accept: *accepted says whether a connection was waiting.
  ncclResult_t tryAccept(Socket* out, bool* accepted);
  ncclResult_t sendAll(const void* data, size_t size, const Deadline& deadline, AbortFlag abort,
                       const char* what = "data", std::string* errorOut = nullptr);
  ncclResult_t recvAll(void* data, size_t size, const Deadline& deadline, AbortFlag abort, const char* what = "data",
                       std::string* errorOut = nullptr);

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // A listening socket's bound address, or a connected socket's peer.
  const SocketAddress& addr() const { return addr_; }
  void close();

 private:
  friend ncclResult_t socketSendRecv(Socket*, const void*, size_t, Socket*, void*, size_t, const Deadline&, AbortFlag,
                                     const char*, std::string*);
  int fd_ = -1;
  SocketAddress addr_{};
};

// Sends on one socket while receiving on another (either may be null), so that a ring step cannot deadlock when
// every rank sends more than the socket buffers hold before receiving.
ncclResult_t socketSendRecv(Socket* sendSock, const void* sendData, size_t sendSize, Socket* recvSock, void* recvData,
                            size_t recvSize, const Deadline& deadline, AbortFlag abort, const char* what,
                            std::string* errorOut = nullptr);

}  // namespace plexus
