// net-ucx: the TCP socket that introduces two UCX workers. listen() hands out its address (the
// 128-byte handle cannot hold a UCX worker address, which over tcp is larger); the sender connects,
// the receiver answers with its worker address, and the socket then stays open as a liveness signal:
// the peer's kernel closes it when the peer closes its comm or its process dies.
// Every call here is non-blocking.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <string>
#include <utility>

namespace plexus::net_ucx {

// An IPv4 or IPv6 address and port, small enough for the listen handle.
union SockAddr {
  sockaddr sa;
  sockaddr_in v4;
  sockaddr_in6 v6;
};
static_assert(sizeof(SockAddr) == 28, "SockAddr travels inside the listen handle");

socklen_t sockLen(const SockAddr& a);
bool sockValid(const SockAddr& a);        // AF_INET or AF_INET6 with a port
std::string sockName(const SockAddr& a);  // "127.0.0.1:41234", "[::1]:41234"
std::string sockHost(const SockAddr& a);  // "127.0.0.1", "::1"

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { reset(); }

  int fd() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

// Results are 0, EAGAIN (not yet: call again), kEof (the peer closed) or another errno.
constexpr int kEof = -1;
std::string ioError(int err);  // "connection closed by the peer" or strerror

int socketListen(const SockAddr& at, Socket* out, SockAddr* bound);
int socketConnect(const SockAddr& to, Socket* out);  // started; finish with socketConnected
int socketConnected(const Socket& s);                // 0 once established
int socketAccept(const Socket& listener, Socket* out, SockAddr* peer);
int socketSend(const Socket& s, const void* buf, size_t len, size_t* done);  // 0 once all len bytes went
int socketRecv(const Socket& s, void* buf, size_t len, size_t* done);        // 0 once all len bytes came
bool socketPeerClosed(const Socket& s);                                      // the peer closed or reset its end

}  // namespace plexus::net_ucx
