#include "socket.h"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace plexus::net_ucx {

socklen_t sockLen(const SockAddr& a) { return a.sa.sa_family == AF_INET6 ? sizeof(a.v6) : sizeof(a.v4); }

bool sockValid(const SockAddr& a) {
  if (a.sa.sa_family == AF_INET) return a.v4.sin_port != 0;
  if (a.sa.sa_family == AF_INET6) return a.v6.sin6_port != 0;
  return false;
}

std::string sockHost(const SockAddr& a) {
  char host[INET6_ADDRSTRLEN] = "";
  if (a.sa.sa_family == AF_INET) inet_ntop(AF_INET, &a.v4.sin_addr, host, sizeof(host));
  if (a.sa.sa_family == AF_INET6) inet_ntop(AF_INET6, &a.v6.sin6_addr, host, sizeof(host));
  return host[0] ? host : "(no address)";
}

std::string sockName(const SockAddr& a) {
  if (a.sa.sa_family == AF_INET) return sockHost(a) + ":" + std::to_string(ntohs(a.v4.sin_port));
  if (a.sa.sa_family == AF_INET6) return "[" + sockHost(a) + "]:" + std::to_string(ntohs(a.v6.sin6_port));
  return sockHost(a);
}

namespace {

// A connection socket outlives its handshake as the liveness signal of the comm: TCP keepalive makes a
// vanished peer host (no FIN ever comes) show as an error within about 25 s.
void tuneConnection(int fd) {
  int one = 1, idle = 10, interval = 5, count = 3;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

}  // namespace

void Socket::reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

std::string ioError(int err) { return err == kEof ? "connection closed by the peer" : strerror(err); }

int socketListen(const SockAddr& at, Socket* out, SockAddr* bound) {
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

int socketConnect(const SockAddr& to, Socket* out) {
  Socket s(socket(to.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s) return errno;
  tuneConnection(s.fd());
  if (connect(s.fd(), &to.sa, sockLen(to)) != 0 && errno != EINPROGRESS) return errno;
  *out = std::move(s);
  return 0;
}

int socketConnected(const Socket& s) {
  pollfd p{s.fd(), POLLOUT, 0};
  int n = poll(&p, 1, 0);
  if (n < 0) return errno == EINTR ? EAGAIN : errno;
  if (n == 0) return EAGAIN;
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

int socketAccept(const Socket& listener, Socket* out, SockAddr* peer) {
  socklen_t len = sizeof(*peer);
  int fd = accept4(listener.fd(), &peer->sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return (errno == EWOULDBLOCK || errno == EINTR) ? EAGAIN : errno;
  tuneConnection(fd);
  *out = Socket(fd);
  return 0;
}

int socketSend(const Socket& s, const void* buf, size_t len, size_t* done) {
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

int socketRecv(const Socket& s, void* buf, size_t len, size_t* done) {
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

bool socketPeerClosed(const Socket& s) {
  // Nothing is written on the socket after the handshake, so readable means end of file (or an error).
  pollfd p{s.fd(), POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  char byte;
  ssize_t n = recv(s.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace plexus::net_ucx
