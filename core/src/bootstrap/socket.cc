#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "misc/check.h"
#include "misc/env.h"

namespace plexus {

namespace {

std::string vformat(const char* fmt, va_list ap) {
  char buf[1024];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  return buf;
}

// Records and logs a failure, or hands it to the caller that probes untrusted connections.
__attribute__((format(printf, 3, 4))) ncclResult_t fail(std::string* errorOut, ncclResult_t res, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vformat(fmt, ap);
  va_end(ap);
  if (errorOut) {
    *errorOut = msg;
    return res;
  }
  return setError(nullptr, res, "%s", msg.c_str());
}

// Abort is deliberate, not a failure: log quietly and let the caller, who asked for it, report it.
ncclResult_t aborted(std::string* errorOut, const char* op, const std::string& peer) {
  INFO(NCCL_BOOTSTRAP, "bootstrap: %s %s aborted", op, peer.c_str());
  if (errorOut) *errorOut = "aborted";
  return ncclInternalError;
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

bool retriable(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == EINTR; }

bool parseAddressImpl(const char* str, SocketAddress* addr, std::string* why);

int socketFamily() {
  auto v = envGet("SOCKET_FAMILY");
  if (!v || v->empty()) return -1;
  if (*v == "AF_INET") return AF_INET;
  if (*v == "AF_INET6") return AF_INET6;
  WARN("environment: NCCL_SOCKET_FAMILY=\"%s\" is neither AF_INET nor AF_INET6; using any family", v->c_str());
  return -1;
}

struct IfAddr {
  std::string name;
  SocketAddress addr;
};

struct IfAddrsDeleter {
  void operator()(ifaddrs* p) const { freeifaddrs(p); }
};
using IfAddrsPtr = std::unique_ptr<ifaddrs, IfAddrsDeleter>;

IfAddrsPtr getInterfaces() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return nullptr;
  return IfAddrsPtr(list);
}

// NCCL's parseStringList: comma-separated prefixes, each with an optional ":port" that interfaces ignore.
std::vector<std::string> parsePrefixList(const char* s) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = s;; p++) {
    if (*p == ',' || *p == '\0') {
      if (!cur.empty()) out.push_back(cur.substr(0, cur.find(':')));
      cur.clear();
      if (*p == '\0') break;
    } else {
      cur += *p;
    }
  }
  return out;
}

bool matchIfList(const char* name, const std::vector<std::string>& list, bool exact) {
  if (list.empty()) return true;  // as NCCL: no list matches everything
  for (auto& p : list)
    if (exact ? p == name : strncmp(name, p.c_str(), p.size()) == 0) return true;
  return false;
}

// NCCL's findInterfaces: the first address of each matching interface, IPv6 loopback skipped.
std::vector<IfAddr> matchInterfaces(const char* prefixList, int family, size_t maxIfs) {
  bool searchNot = prefixList[0] == '^';
  if (searchNot) prefixList++;
  bool searchExact = prefixList[0] == '=';
  if (searchExact) prefixList++;
  std::vector<std::string> list = parsePrefixList(prefixList);
  std::vector<IfAddr> found;
  IfAddrsPtr ifs = getInterfaces();
  for (ifaddrs* i = ifs.get(); i && found.size() < maxIfs; i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (family != -1 && fam != family) continue;
    if (fam == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&((sockaddr_in6*)i->ifa_addr)->sin6_addr)) continue;
    if (!(matchIfList(i->ifa_name, list, searchExact) ^ searchNot)) continue;
    if (std::any_of(found.begin(), found.end(), [&](const IfAddr& f) { return f.name == i->ifa_name; })) continue;
    IfAddr f{i->ifa_name, {}};
    memcpy(&f.addr, i->ifa_addr, fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    found.push_back(f);
  }
  return found;
}

bool sameSubnet(const sockaddr* a, const sockaddr* b, const sockaddr* mask) {
  if (a->sa_family == AF_INET) {
    uint32_t m = ((const sockaddr_in*)mask)->sin_addr.s_addr;
    return (((const sockaddr_in*)a)->sin_addr.s_addr & m) == (((const sockaddr_in*)b)->sin_addr.s_addr & m);
  }
  const uint8_t* x = ((const sockaddr_in6*)a)->sin6_addr.s6_addr;
  const uint8_t* y = ((const sockaddr_in6*)b)->sin6_addr.s6_addr;
  const uint8_t* m = ((const sockaddr_in6*)mask)->sin6_addr.s6_addr;
  for (int k = 0; k < 16; k++)
    if ((x[k] & m[k]) != (y[k] & m[k])) return false;
  return true;
}

// NCCL's ncclFindInterfaceMatchSubnet: the interface on the same subnet as NCCL_COMM_ID's address.
std::vector<IfAddr> findInterfaceMatchSubnet(const SocketAddress& remote, int family) {
  std::vector<IfAddr> found;
  IfAddrsPtr ifs = getInterfaces();
  for (ifaddrs* i = ifs.get(); i; i = i->ifa_next) {
    if (!i->ifa_addr || !i->ifa_netmask) continue;
    int fam = i->ifa_addr->sa_family;
    if (fam != remote.sa.sa_family || (family != -1 && fam != family)) continue;
    if (!sameSubnet(i->ifa_addr, &remote.sa, i->ifa_netmask)) continue;
    IfAddr f{i->ifa_name, {}};
    memcpy(&f.addr, i->ifa_addr, fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    found.push_back(f);
    break;
  }
  return found;
}


bool parseAddressImpl(const char* str, SocketAddress* addr, std::string* why) {
  std::string s(str ? str : "");
  std::string host, port;
  if (!s.empty() && s[0] == '[') {
    size_t close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':') {
      *why = "an IPv6 address must be written [addr]:port";
      return false;
    }
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
  } else {
    size_t colon = s.rfind(':');
    if (colon == std::string::npos) {
      *why = "the port is missing (expected host:port or [ipv6]:port)";
      return false;
    }
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
    if (host.find(':') != std::string::npos) {
      *why = "an IPv6 address must be written [addr]:port";
      return false;
    }
  }
  if (host.empty()) {
    *why = "the host is missing (expected host:port or [ipv6]:port)";
    return false;
  }
  if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit) || std::stoi(port) > 65535) {
    *why = "the port must be a number from 0 to 65535";
    return false;
  }
  addrinfo hints{};
  hints.ai_family = socketFamily() == -1 ? AF_UNSPEC : socketFamily();
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) {
    *why = std::string("cannot resolve \"") + host + "\": " + gai_strerror(rc);
    return false;
  }
  memset(addr, 0, sizeof(*addr));
  memcpy(addr, res->ai_addr, std::min<size_t>(res->ai_addrlen, sizeof(*addr)));
  freeaddrinfo(res);
  setAddressPort(addr, (uint16_t)std::stoi(port));
  return true;
}

}  // namespace

// "lo(127.0.0.1, ::1) eth0(10.0.0.2)": what the user can put in NCCL_SOCKET_IFNAME.
std::string describeInterfaces() {
  std::vector<std::pair<std::string, std::string>> ifs;
  IfAddrsPtr list = getInterfaces();
  for (ifaddrs* i = list.get(); i; i = i->ifa_next) {
    if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
    SocketAddress a{};
    memcpy(&a, i->ifa_addr, i->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    std::string ip = toString(a);
    ip = ip.substr(0, ip.rfind(':'));  // drop the port
    if (ip.size() > 1 && ip[0] == '[') ip = ip.substr(1, ip.size() - 2);
    auto it = std::find_if(ifs.begin(), ifs.end(), [&](auto& p) { return p.first == i->ifa_name; });
    if (it == ifs.end())
      ifs.push_back({i->ifa_name, ip});
    else
      it->second += ", " + ip;
  }
  if (ifs.empty()) return "none with an IPv4/IPv6 address";
  std::string out;
  for (auto& [name, ips] : ifs) out += (out.empty() ? "" : " ") + name + "(" + ips + ")";
  return out;
}

std::string toString(const SocketAddress& addr) {
  char ip[INET6_ADDRSTRLEN] = "?";
  if (addr.sa.sa_family == AF_INET) {
    inet_ntop(AF_INET, &addr.sin.sin_addr, ip, sizeof(ip));
    return std::string(ip) + ":" + std::to_string(ntohs(addr.sin.sin_port));
  }
  if (addr.sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &addr.sin6.sin6_addr, ip, sizeof(ip));
    return "[" + std::string(ip) + "]:" + std::to_string(ntohs(addr.sin6.sin6_port));
  }
  return "<unset address, family " + std::to_string(addr.sa.sa_family) + ">";
}

socklen_t addressLength(const SocketAddress& addr) {
  return addr.sa.sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

uint16_t addressPort(const SocketAddress& addr) {
  return ntohs(addr.sa.sa_family == AF_INET6 ? addr.sin6.sin6_port : addr.sin.sin_port);
}

void setAddressPort(SocketAddress* addr, uint16_t port) {
  if (addr->sa.sa_family == AF_INET6)
    addr->sin6.sin6_port = htons(port);
  else
    addr->sin.sin_port = htons(port);
}

ncclResult_t parseAddress(const char* str, SocketAddress* addr, const char* what) {
  std::string why;
  if (!parseAddressImpl(str, addr, &why))
    return setError(nullptr, ncclInvalidArgument, "bootstrap: cannot parse %s \"%s\": %s", what, str ? str : "",
                    why.c_str());
  return ncclSuccess;
}

ncclResult_t findInterfaces(size_t maxIfs, std::vector<NetInterface>* out, const char* who) {
  int family = socketFamily();
  auto env = envGet("SOCKET_IFNAME");
  std::vector<IfAddr> found;
  if (env && env->size() > 1) {  // NCCL ignores one-character values
    found = matchInterfaces(env->c_str(), family, maxIfs);
  } else {
    found = matchInterfaces("ib", family, maxIfs);
    if (found.empty()) {
      auto commId = envGet("COMM_ID");
      SocketAddress idAddr;
      std::string why;
      if (commId && commId->size() > 1 && parseAddressImpl(commId->c_str(), &idAddr, &why))
        found = findInterfaceMatchSubnet(idAddr, family);
    }
    if (found.empty()) found = matchInterfaces("^docker,lo", family, maxIfs);
    if (found.empty()) found = matchInterfaces("docker", family, maxIfs);
    if (found.empty()) found = matchInterfaces("lo", family, maxIfs);
  }
  if (found.empty()) {
    const char* fam = family == AF_INET    ? " with NCCL_SOCKET_FAMILY=AF_INET"
                      : family == AF_INET6 ? " with NCCL_SOCKET_FAMILY=AF_INET6"
                                           : "";
    std::string ifs = describeInterfaces();
    if (env && env->size() > 1)
      return setError(nullptr, ncclSystemError,
                      "%s: no network interface matches NCCL_SOCKET_IFNAME=\"%s\"%s; this host has: %s. Set "
                      "NCCL_SOCKET_IFNAME to one of them (comma-separated prefixes, '^' to exclude, '=' for exact "
                      "names)",
                      who, env->c_str(), fam, ifs.c_str());
    return setError(nullptr, ncclSystemError,
                    "%s: no usable network interface found%s; this host has: %s. Set NCCL_SOCKET_IFNAME to "
                    "one of them",
                    who, fam, ifs.c_str());
  }
  out->clear();
  for (auto& f : found) {
    out->push_back({f.name, f.addr});
    setAddressPort(&out->back().addr, 0);
  }
  return ncclSuccess;
}

ncclResult_t findInterface(SocketAddress* addr, std::string* ifName) {
  std::vector<NetInterface> found;
  NCCLCHECK(findInterfaces(1, &found, "bootstrap"));
  *addr = found[0].addr;
  *ifName = found[0].name;
  TRACE(NCCL_BOOTSTRAP, "bootstrap: interface %s (%s)", ifName->c_str(), toString(*addr).c_str());
  return ncclSuccess;
}

// PLEXUS_TIMEOUT, where set, bounds init and connection setup too: a rank that never answers fails init
// as it fails an operation.
int bootstrapTimeout() {
  const int64_t opTimeout = envInt("TIMEOUT", 0);
  return (int)std::clamp<int64_t>(envInt("BOOTSTRAP_TIMEOUT", opTimeout > 0 ? opTimeout : 120), 1, 1 << 24);
}

Deadline Deadline::after(double seconds) {
  auto now = std::chrono::steady_clock::now();
  return {now, now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(seconds))};
}

int Deadline::pollMs(int capMs) const {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
  return (int)std::clamp<int64_t>(left + 1, 0, capMs);  // +1: do not wake just before the deadline
}

Socket::Socket(Socket&& o) noexcept : fd_(o.fd_), addr_(o.addr_) { o.fd_ = -1; }

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    addr_ = o.addr_;
    o.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

ncclResult_t Socket::listen(const SocketAddress& addr) {
  close();
  std::string name = toString(addr);
  int fd = socket(addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return setError(nullptr, ncclSystemError, "bootstrap: cannot create a socket to listen on %s: %s", name.c_str(),
                    strerror(errno));
  if (addressPort(addr) != 0) {  // a fixed port (NCCL_COMM_ID) must be reusable right after the last job
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  }
  if (bind(fd, &addr.sa, addressLength(addr)) != 0) {
    int e = errno;
    ::close(fd);
    return setError(nullptr, ncclSystemError, "bootstrap: cannot bind to %s: %s. %s", name.c_str(), strerror(e),
                    e == EADDRINUSE ? "Another process holds the port; pick another one (NCCL_COMM_ID)"
                                    : "Check that the address belongs to this host (NCCL_SOCKET_IFNAME, NCCL_COMM_ID)");
  }
  if (::listen(fd, SOMAXCONN) != 0) {
    int e = errno;
    ::close(fd);
    return setError(nullptr, ncclSystemError, "bootstrap: listen on %s failed: %s", name.c_str(), strerror(e));
  }
  SocketAddress bound{};
  socklen_t len = sizeof(bound);
  if (getsockname(fd, &bound.sa, &len) != 0) {
    int e = errno;
    ::close(fd);
    return setError(nullptr, ncclSystemError, "bootstrap: getsockname on %s failed: %s", name.c_str(), strerror(e));
  }
  fd_ = fd;
  addr_ = bound;
  return ncclSuccess;
}

ncclResult_t Socket::connect(const SocketAddress& addr, const Deadline& deadline, AbortFlag abort, const char* what,
                             const char* hint) {
  close();
  std::string peer = toString(addr);
  if (!hint)
    hint =
        "Check that it is running and that the address is reachable from this host; set NCCL_SOCKET_IFNAME to "
        "the interface that routes to it";
  int sleepMs = 5;
  for (;;) {
    if (abort.set()) return aborted(nullptr, "connecting to", peer);
    int fd = socket(addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
      return setError(nullptr, ncclSystemError, "bootstrap: cannot create a socket to connect to %s at %s: %s", what,
                      peer.c_str(), strerror(errno));
    int e = ::connect(fd, &addr.sa, addressLength(addr)) == 0 ? 0 : errno;
    if (e == EINPROGRESS || e == EINTR) {
      for (;;) {  // wait for the handshake in slices, so that aborts and the deadline are seen
        if (abort.set()) {
          ::close(fd);
          return aborted(nullptr, "connecting to", peer);
        }
        pollfd p{fd, POLLOUT, 0};
        int r = poll(&p, 1, deadline.pollMs());
        if (r > 0) {
          socklen_t len = sizeof(e);
          if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0) e = errno;
          break;
        }
        if (r < 0 && errno != EINTR) {
          e = errno;
          break;
        }
        if (deadline.expired()) {
          e = ETIMEDOUT;
          break;
        }
      }
    }
    if (e == 0) {
      setNoDelay(fd);
      fd_ = fd;
      addr_ = addr;
      return ncclSuccess;
    }
    ::close(fd);
    // Refused: the listener is not up yet; timed out / reset: a busy or restarting peer. Both are worth retrying.
    bool retry = e == ECONNREFUSED || e == ETIMEDOUT || e == ECONNRESET || e == EAGAIN;
    if (!retry)
      return setError(nullptr, ncclSystemError, "bootstrap: cannot connect to %s at %s: %s. %s", what, peer.c_str(),
                      strerror(e), hint);
    if (deadline.expired())
      return setError(nullptr, ncclSystemError, "bootstrap: cannot reach %s at %s within %.0f s (last error: %s). %s",
                      what, peer.c_str(), deadline.seconds(), strerror(e), hint);
    for (int slept = 0; slept < sleepMs && !deadline.expired() && !abort.set(); slept += 5)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    sleepMs = std::min(sleepMs * 2, 100);
  }
}

ncclResult_t Socket::tryAccept(Socket* out, bool* accepted) {
  *accepted = false;
  SocketAddress peer{};
  socklen_t len = sizeof(peer);
  int fd = accept4(fd_, &peer.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    // A connection that died in the backlog is not this listener's failure.
    if (retriable(errno) || errno == ECONNABORTED || errno == EPROTO || errno == ENETDOWN || errno == EHOSTUNREACH)
      return ncclSuccess;
    return setError(nullptr, ncclSystemError, "bootstrap: accept on %s failed: %s%s", toString(addr_).c_str(),
                    strerror(errno),
                    errno == EMFILE || errno == ENFILE ? ". Raise the open-files limit (ulimit -n)" : "");
  }
  setNoDelay(fd);
  out->close();
  out->fd_ = fd;
  out->addr_ = peer;
  *accepted = true;
  return ncclSuccess;
}

ncclResult_t Socket::accept(Socket* out, const Deadline& deadline, AbortFlag abort, const char* what) {
  for (;;) {
    bool accepted;
    NCCLCHECK(tryAccept(out, &accepted));
    if (accepted) return ncclSuccess;
    if (abort.set()) return aborted(nullptr, "accepting on", toString(addr_));
    if (deadline.expired())
      return setError(nullptr, ncclSystemError,
                      "bootstrap: timed out after %.0f s waiting for %s to connect to %s. It may have failed or not "
                      "have started; check its log, or raise NCCL_BOOTSTRAP_TIMEOUT (seconds) if it is only slow",
                      deadline.seconds(), what, toString(addr_).c_str());
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, deadline.pollMs()) < 0 && errno != EINTR)
      return setError(nullptr, ncclSystemError, "bootstrap: poll on %s failed: %s", toString(addr_).c_str(),
                      strerror(errno));
  }
}

ncclResult_t Socket::sendAll(const void* data, size_t size, const Deadline& deadline, AbortFlag abort, const char* what,
                             std::string* errorOut) {
  return socketSendRecv(this, data, size, nullptr, nullptr, 0, deadline, abort, what, errorOut);
}

ncclResult_t Socket::recvAll(void* data, size_t size, const Deadline& deadline, AbortFlag abort, const char* what,
                             std::string* errorOut) {
  return socketSendRecv(nullptr, nullptr, 0, this, data, size, deadline, abort, what, errorOut);
}

ncclResult_t socketSendRecv(Socket* ss, const void* sendData, size_t sendSize, Socket* rs, void* recvData,
                            size_t recvSize, const Deadline& deadline, AbortFlag abort, const char* what,
                            std::string* errorOut) {
  if (!ss) sendSize = 0;
  if (!rs) recvSize = 0;
  size_t sent = 0, got = 0;
  auto peers = [&]() {
    if (ss && rs && ss->fd_ != rs->fd_) return toString(ss->addr_) + " / " + toString(rs->addr_);
    return toString(ss ? ss->addr_ : rs->addr_);
  };
  while (sent < sendSize || got < recvSize) {
    if (abort.set()) return aborted(errorOut, "exchanging data with", peers());
    pollfd pfds[2];
    int n = 0, si = -1, ri = -1;
    if (sent < sendSize) pfds[si = n++] = {ss->fd_, POLLOUT, 0};
    if (got < recvSize) pfds[ri = n++] = {rs->fd_, POLLIN, 0};
    int r = poll(pfds, n, deadline.pollMs());
    if (r < 0 && errno != EINTR)
      return fail(errorOut, ncclSystemError, "bootstrap: poll on %s failed: %s", peers().c_str(), strerror(errno));
    if (r <= 0) {
      if (!deadline.expired()) continue;
      if (recvSize == 0)
        return fail(errorOut, ncclSystemError,
                    "bootstrap: timed out after %.0f s sending %s to %s (%zu of %zu bytes sent): the peer is not "
                    "reading. It may be stuck or have failed; check its log, or raise NCCL_BOOTSTRAP_TIMEOUT "
                    "(seconds) if it is only slow",
                    deadline.seconds(), what, peers().c_str(), sent, sendSize);
      return fail(errorOut, ncclSystemError,
                  "bootstrap: timed out after %.0f s waiting for %s from %s (%zu of %zu bytes received). The peer "
                  "may be stuck or have failed; check its log, or raise NCCL_BOOTSTRAP_TIMEOUT (seconds) if it is "
                  "only slow",
                  deadline.seconds(), what, toString(rs->addr_).c_str(), got, recvSize);
    }
    if (si >= 0 && pfds[si].revents) {
      ssize_t k = ::send(ss->fd_, (const char*)sendData + sent, sendSize - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (k > 0) {
        sent += k;
      } else if (k < 0 && !retriable(errno)) {
        if (errno == EPIPE || errno == ECONNRESET)
          return fail(errorOut, ncclRemoteError,
                      "bootstrap: %s closed the connection while this rank was sending %s (%zu of %zu bytes sent). "
                      "The peer probably exited or failed; check its log",
                      toString(ss->addr_).c_str(), what, sent, sendSize);
        return fail(errorOut, ncclSystemError, "bootstrap: sending %s to %s failed: %s", what,
                    toString(ss->addr_).c_str(), strerror(errno));
      }
    }
    if (ri >= 0 && pfds[ri].revents) {
      ssize_t k = ::recv(rs->fd_, (char*)recvData + got, recvSize - got, MSG_DONTWAIT);
      if (k > 0) {
        got += k;
      } else if (k == 0 || (k < 0 && errno == ECONNRESET)) {
        return fail(errorOut, ncclRemoteError,
                    "bootstrap: %s closed the connection while this rank was waiting for %s (%zu of %zu bytes "
                    "received). The peer probably exited or failed; check its log",
                    toString(rs->addr_).c_str(), what, got, recvSize);
      } else if (!retriable(errno)) {
        return fail(errorOut, ncclSystemError, "bootstrap: receiving %s from %s failed: %s", what,
                    toString(rs->addr_).c_str(), strerror(errno));
      }
    }
  }
  return ncclSuccess;
}

}  // namespace plexus
