// A non-blocking TCP socket for a plugin's out-of-band handshake (the listen handle carries a SockAddr; the
// sender connects, both sides exchange what their transport needs, and the socket may stay open as the
// connection's liveness signal: the peer's kernel closes it when the peer closes its comm or dies). Header-only
// C++ for plugins built against the SDK alone; net-ucx and net-ib use it. Every call is non-blocking: results
// are 0, EAGAIN (not yet: call again), kEof (the peer closed) or another errno.
#pragma once

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstring>
#include <map>
#include <string>
#include <utility>

namespace plexus::sdk {

// An IPv4 or IPv6 address and port, small enough for the listen handle.
union SockAddr {
  sockaddr sa;
  sockaddr_in v4;
  sockaddr_in6 v6;
};
static_assert(sizeof(SockAddr) == 28, "SockAddr travels inside the listen handle");

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
  void reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

constexpr int kEof = -1;

inline socklen_t sockLen(const SockAddr& a) { return a.sa.sa_family == AF_INET6 ? sizeof(a.v6) : sizeof(a.v4); }

// AF_INET or AF_INET6 with a port
inline bool sockValid(const SockAddr& a) {
  if (a.sa.sa_family == AF_INET) return a.v4.sin_port != 0;
  if (a.sa.sa_family == AF_INET6) return a.v6.sin6_port != 0;
  return false;
}

// "127.0.0.1", "::1"
inline std::string sockHost(const SockAddr& a) {
  char host[INET6_ADDRSTRLEN] = "";
  if (a.sa.sa_family == AF_INET) inet_ntop(AF_INET, &a.v4.sin_addr, host, sizeof(host));
  if (a.sa.sa_family == AF_INET6) inet_ntop(AF_INET6, &a.v6.sin6_addr, host, sizeof(host));
  return host[0] ? host : "(no address)";
}

// "127.0.0.1:41234", "[::1]:41234"
inline std::string sockName(const SockAddr& a) {
  if (a.sa.sa_family == AF_INET) return sockHost(a) + ":" + std::to_string(ntohs(a.v4.sin_port));
  if (a.sa.sa_family == AF_INET6) return "[" + sockHost(a) + "]:" + std::to_string(ntohs(a.v6.sin6_port));
  return sockHost(a);
}

namespace detail {

// A connection socket outlives its handshake as the liveness signal of the comm: TCP keepalive makes a
// vanished peer host (no FIN ever comes) show as an error within about 25 s.
inline void tuneConnection(int fd) {
  int one = 1, idle = 10, interval = 5, count = 3;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

}  // namespace detail

// "connection closed by the peer" or strerror
inline std::string ioError(int err) { return err == kEof ? "connection closed by the peer" : strerror(err); }

// Listens on `at`'s address with a port the kernel picks; *bound is the address a peer connects to.
inline int socketListen(const SockAddr& at, Socket* out, SockAddr* bound) {
  Socket s(socket(at.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s) return errno;
  SockAddr any = at;  // port 0: the kernel picks a free one
  if (any.sa.sa_family == AF_INET)
    any.v4.sin_port = 0;
  else
    any.v6.sin6_port = 0;
  socklen_t len = sockLen(any);
  if (bind(s.fd(), &any.sa, len) != 0 || listen(s.fd(), SOMAXCONN) != 0) return errno;
  len = sizeof(*bound);
  if (getsockname(s.fd(), &bound->sa, &len) != 0) return errno;
  *out = std::move(s);
  return 0;
}

// Starts a connection; finish with socketConnected.
inline int socketConnect(const SockAddr& to, Socket* out) {
  Socket s(socket(to.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s) return errno;
  detail::tuneConnection(s.fd());
  if (connect(s.fd(), &to.sa, sockLen(to)) != 0 && errno != EINPROGRESS) return errno;
  *out = std::move(s);
  return 0;
}

// 0 once established.
inline int socketConnected(const Socket& s) {
  pollfd p{s.fd(), POLLOUT, 0};
  int n = poll(&p, 1, 0);
  if (n < 0) return errno == EINTR ? EAGAIN : errno;
  if (n == 0) return EAGAIN;
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

inline int socketAccept(const Socket& listener, Socket* out, SockAddr* peer) {
  socklen_t len = sizeof(*peer);
  int fd = accept4(listener.fd(), &peer->sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return (errno == EWOULDBLOCK || errno == EINTR) ? EAGAIN : errno;
  detail::tuneConnection(fd);
  *out = Socket(fd);
  return 0;
}

// 0 once all len bytes went (*done counts across calls).
inline int socketSend(const Socket& s, const void* buf, size_t len, size_t* done) {
  while (*done < len) {
    ssize_t n = send(s.fd(), static_cast<const char*>(buf) + *done, len - *done, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EWOULDBLOCK ? EAGAIN : errno;
    }
    *done += static_cast<size_t>(n);
  }
  return 0;
}

// 0 once all len bytes came (*done counts across calls).
inline int socketRecv(const Socket& s, void* buf, size_t len, size_t* done) {
  while (*done < len) {
    ssize_t n = recv(s.fd(), static_cast<char*>(buf) + *done, len - *done, 0);
    if (n == 0) return kEof;
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EWOULDBLOCK ? EAGAIN : errno;
    }
    *done += static_cast<size_t>(n);
  }
  return 0;
}

// The peer closed or reset its end (nothing is expected on the socket after the handshake).
inline bool socketPeerClosed(const Socket& s) {
  // Nothing is written on the socket after the handshake, so readable means end of file (or an error).
  pollfd p{s.fd(), POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  char byte;
  ssize_t n = recv(s.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

// The address of each interface that has one: IPv4 first, then global IPv6, then link-local IPv6.
struct InterfaceAddress {
  SockAddr addr{};
  int rank = INT_MAX;  // lower is better
  bool loopback = false;
};
inline std::map<std::string, InterfaceAddress> interfaceAddresses() {
  std::map<std::string, InterfaceAddress> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    SockAddr a{};
    int rank;
    if (i->ifa_addr->sa_family == AF_INET) {
      memcpy(&a.v4, i->ifa_addr, sizeof(a.v4));
      rank = 0;
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      memcpy(&a.v6, i->ifa_addr, sizeof(a.v6));
      rank = IN6_IS_ADDR_LINKLOCAL(&a.v6.sin6_addr) ? 2 : 1;
    } else {
      continue;
    }
    InterfaceAddress& best = out[i->ifa_name];
    if (rank < best.rank) best = {a, rank, (i->ifa_flags & IFF_LOOPBACK) != 0};
  }
  freeifaddrs(list);
  return out;
}

}  // namespace plexus::sdk
