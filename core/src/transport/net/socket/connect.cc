#include "transport/net/socket/connect.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "misc/check.h"
#include "misc/rand.h"

namespace plexus::socketnet {

namespace {

constexpr int kAcceptPerCall = 64;                        // sockets taken from the backlog per accept() call
constexpr size_t kMaxIncoming = 1024;                     // accepted sockets waiting for their hello
constexpr size_t kMaxGroups = 1024;                       // connections with some, not all, of their sockets in
constexpr auto kHelloTimeout = std::chrono::seconds(10);  // an accepted socket that says nothing is dropped

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void setTrafficClass(int fd, int family, int trafficClass) {
  if (trafficClass == NCCL_NET_TRAFFIC_CLASS_UNDEF) return;
  int r = family == AF_INET6 ? setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &trafficClass, sizeof(trafficClass))
                             : setsockopt(fd, IPPROTO_IP, IP_TOS, &trafficClass, sizeof(trafficClass));
  if (r != 0) INFO(NCCL_NET, "NET/Socket: cannot set traffic class %d: %s", trafficClass, strerror(errno));
}

}  // namespace

ncclResult_t checkHandle(const Handle& h) {
  if (h.signature != kHandleSignature)
    return setError(nullptr, ncclInvalidArgument,
                    "NET/Socket: connect() was given a handle that no Socket-net listen() wrote (it starts with "
                    "%#x, not %#x). Pass the peer's listen() handle unchanged, to the net plugin that made it",
                    h.signature, kHandleSignature);
  if (h.version != kProtocolVersion)
    return setError(nullptr, ncclInvalidArgument,
                    "NET/Socket: connect() was given a handle of Socket-net protocol %u; this library speaks %u. "
                    "Every rank must run the same Plexus version",
                    h.version, kProtocolVersion);
  if (h.nSocks < 1 || h.nSocks > kMaxSocks)
    return setError(nullptr, ncclInvalidArgument,
                    "NET/Socket: connect() was given a corrupt handle (%u data sockets; 1 to %d are possible)",
                    h.nSocks, kMaxSocks);
  int family = h.addr.sa.sa_family;
  if ((family != AF_INET && family != AF_INET6) || addressPort(h.addr) == 0)
    return setError(nullptr, ncclInvalidArgument,
                    "NET/Socket: connect() was given a corrupt handle (address %s is not a listening IPv4/IPv6 "
                    "address)",
                    toString(h.addr).c_str());
  return ncclSuccess;
}

// --- listener ------------------------------------------------------------------------------------------

ncclResult_t Listener::create(const SocketAddress& addr, const std::string& devName, Handle* handle,
                              std::unique_ptr<Listener>* out) {
  auto l = std::make_unique<Listener>();
  l->knobs_ = Knobs::read();
  std::string name = toString(addr);
  UniqueFd fd(socket(addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid())
    return setError(nullptr, ncclSystemError, "NET/Socket: cannot create a socket to listen on %s (%s): %s",
                    name.c_str(), devName.c_str(), describeSocketError(errno).c_str());
  SocketAddress bound = addr;
  setAddressPort(&bound, 0);
  if (bind(fd.get(), &bound.sa, addressLength(bound)) != 0)
    return setError(nullptr, ncclSystemError,
                    "NET/Socket: cannot bind to %s (%s): %s. Check that the interface is up; NCCL_SOCKET_IFNAME "
                    "chooses the interfaces",
                    name.c_str(), devName.c_str(), describeSocketError(errno).c_str());
  if (::listen(fd.get(), SOMAXCONN) != 0)
    return setError(nullptr, ncclSystemError, "NET/Socket: listen on %s (%s) failed: %s", name.c_str(), devName.c_str(),
                    describeSocketError(errno).c_str());
  socklen_t len = sizeof(bound);
  if (getsockname(fd.get(), &bound.sa, &len) != 0)
    return setError(nullptr, ncclSystemError, "NET/Socket: getsockname on %s failed: %s", name.c_str(),
                    strerror(errno));
  l->fd_ = std::move(fd);
  l->where_ = toString(bound) + " (" + devName + ")";
  Handle& h = l->handle_;
  h.signature = kHandleSignature;
  h.version = kProtocolVersion;
  h.nSocks = (uint16_t)l->knobs_.nSocks();
  h.magic = randomU64();
  h.addr = bound;
  *handle = h;
  TRACE(NCCL_NET, "NET/Socket: listening on %s, %u data sockets per connection", l->where_.c_str(), h.nSocks);
  *out = std::move(l);
  return ncclSuccess;
}

void Listener::drop(const Incoming& in, const char* why) {
  INFO(NCCL_NET, "NET/Socket: %s dropped a connection from %s: %s", where_.c_str(), toString(in.peer).c_str(), why);
}

// Puts a socket whose hello is in into its connection's group, or drops it.
void Listener::file(Incoming&& in) {
  const Hello& h = in.hello;
  char why[160];
  if (helloProblem(&h, sizeof(h), handle_, why, sizeof(why))) return drop(in, why);
  auto g = std::find_if(groups_.begin(), groups_.end(), [&](const Group& x) { return x.connId == h.connId; });
  if (g == groups_.end()) {
    if (groups_.size() >= kMaxGroups) return drop(in, "too many connections half set up");
    groups_.push_back({h.connId, std::vector<UniqueFd>(handle_.nSocks + 1), 0, in.peer, in.since});
    g = groups_.end() - 1;
  }
  if (g->sockets[h.index].valid()) return drop(in, "a second socket with the same index");
  if (h.index == 0) g->peer = in.peer;
  g->sockets[h.index] = std::move(in.fd);
  g->count++;
}

ncclResult_t Listener::accept(std::unique_ptr<RecvComm>* out) {
  // What the backlog holds.
  for (int i = 0; i < kAcceptPerCall && incoming_.size() < kMaxIncoming; i++) {
    SocketAddress peer{};
    socklen_t len = sizeof(peer);
    int fd = accept4(fd_.get(), &peer.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      // Empty, or a connection that died in the backlog: not this listener's failure.
      if (wouldBlock(errno) || errno == ECONNABORTED || errno == EPROTO || errno == ENETDOWN || errno == EHOSTUNREACH ||
          errno == ENETUNREACH)
        break;
      return setError(nullptr, ncclSystemError, "NET/Socket: accept on %s failed: %s", where_.c_str(),
                      describeSocketError(errno).c_str());
    }
    setNoDelay(fd);
    incoming_.push_back({UniqueFd(fd), peer, {}, 0, Clock::now()});
  }
  // Hellos.
  auto now = Clock::now();
  for (size_t i = 0; i < incoming_.size();) {
    Incoming& in = incoming_[i];
    ssize_t k = recv(in.fd.get(), (char*)&in.hello + in.got, sizeof(Hello) - in.got, MSG_DONTWAIT);
    if (k > 0) in.got += (size_t)k;
    bool keep = true;
    if (k == 0 || (k < 0 && !wouldBlock(errno) && errno != EINTR)) {
      drop(in, "it closed before its hello");
      keep = false;
    } else if (in.got == sizeof(Hello)) {
      file(std::move(in));
      keep = false;
    } else if (now - in.since > kHelloTimeout) {
      drop(in, "it sent no hello within 10 s");
      keep = false;
    }
    if (keep) {
      i++;
    } else {
      if (i + 1 != incoming_.size()) incoming_[i] = std::move(incoming_.back());
      incoming_.pop_back();
    }
  }
  // A connection whose other sockets never came (its connector failed or gave up) goes after the time a
  // connector itself would wait.
  double groupTimeout = bootstrapTimeout();
  for (auto g = groups_.begin(); g != groups_.end();) {
    if (g->count <= handle_.nSocks && std::chrono::duration<double>(now - g->since).count() > groupTimeout) {
      INFO(NCCL_NET, "NET/Socket: %s dropped a connection from %s: %d of its %d sockets came within %.0f s",
           where_.c_str(), toString(g->peer).c_str(), g->count, handle_.nSocks + 1, groupTimeout);
      g = groups_.erase(g);
    } else {
      ++g;
    }
  }
  // The first connection complete, in order of arrival.
  for (auto g = groups_.begin(); g != groups_.end(); ++g) {
    if (g->count != handle_.nSocks + 1) continue;
    UniqueFd ctrl = std::move(g->sockets[0]);
    std::vector<UniqueFd> data;
    for (int s = 1; s <= handle_.nSocks; s++) data.push_back(std::move(g->sockets[s]));
    SocketAddress peer = g->peer;
    groups_.erase(g);
    *out = std::make_unique<RecvComm>(std::move(ctrl), std::move(data), knobs_, handle_.magic, peer);
    INFO(NCCL_NET, "NET/Socket: %s accepted a connection from %s (%u data sockets)", where_.c_str(),
         toString(peer).c_str(), handle_.nSocks);
    return ncclSuccess;
  }
  return ncclSuccess;
}

// --- connector -----------------------------------------------------------------------------------------

Connector::Connector(const Handle& handle, int trafficClass)
    : handle_(handle),
      trafficClass_(trafficClass),
      knobs_(Knobs::read()),
      peer_(toString(handle.addr)),
      attempts_(handle.nSocks + 1),
      start_(Clock::now()),
      timeoutSec_(bootstrapTimeout()) {
  uint64_t connId = randomU64();
  for (size_t i = 0; i < attempts_.size(); i++)
    attempts_[i].hello = {handle.magic, connId, (uint16_t)i, handle.nSocks, kProtocolVersion, 0};
}

ncclResult_t Connector::fail(ncclResult_t result, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  return setError(nullptr, result, "%s", msg);
}

// A refused or reset attempt is retried (NCCL's NCCL_SOCKET_RETRY_CNT, sleeps growing linearly): the
// listener may be slow to take connections. Anything else fails at once.
ncclResult_t Connector::retryOrFail(Attempt& a, int err) {
  bool retriable = err == ECONNREFUSED || err == ECONNRESET || err == EPIPE || err == ETIMEDOUT || err == EAGAIN;
  if (retriable && a.retries < knobs_.retryCount) {
    a.retries++;
    a.fd.reset();
    a.sent = 0;
    a.state = Attempt::State::Idle;
    a.notBefore = Clock::now() + std::chrono::milliseconds((int64_t)a.retries * knobs_.retrySleepMs);
    return ncclSuccess;
  }
  if (retriable)
    return fail(ncclSystemError,
                "NET/Socket: cannot connect to %s: %s, %d times over %.1f s. Nothing takes connections there: the "
                "listener was closed, or the handle is stale or from another job. Check that the peer is alive; "
                "NCCL_SOCKET_RETRY_CNT and NCCL_SOCKET_RETRY_SLEEP_MSEC set the retries",
                peer_.c_str(), strerror(err), a.retries + 1, secondsSince(start_));
  return fail(ncclSystemError,
              "NET/Socket: cannot connect to %s: %s. Check that the address is reachable from this host "
              "(NCCL_SOCKET_IFNAME chooses the interfaces)",
              peer_.c_str(), describeSocketError(err).c_str());
}

ncclResult_t Connector::progress(std::unique_ptr<SendComm>* out) {
  auto now = Clock::now();
  const int family = handle_.addr.sa.sa_family;
  size_t ready = 0;
  for (Attempt& a : attempts_) {
    using State = Attempt::State;
    if (a.state == State::Idle && now >= a.notBefore) {
      a.fd.reset(socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (!a.fd.valid())
        return fail(ncclSystemError, "NET/Socket: cannot create a socket to connect to %s: %s", peer_.c_str(),
                    describeSocketError(errno).c_str());
      setNoDelay(a.fd.get());
      setTrafficClass(a.fd.get(), family, trafficClass_);
      a.started = now;
      if (::connect(a.fd.get(), &handle_.addr.sa, addressLength(handle_.addr)) == 0)
        a.state = State::Hello;
      else if (errno == EINPROGRESS || errno == EINTR)
        a.state = State::Connecting;
      else
        NCCLCHECK(retryOrFail(a, errno));
    }
    if (a.state == State::Connecting) {
      pollfd p{a.fd.get(), POLLOUT, 0};
      if (poll(&p, 1, 0) > 0) {
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(a.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        if (err == 0)
          a.state = State::Hello;
        else
          NCCLCHECK(retryOrFail(a, err));
      } else if (std::chrono::duration<double>(now - a.started).count() > timeoutSec_) {
        return fail(ncclSystemError,
                    "NET/Socket: cannot reach %s within %.0f s: the connection attempt got no answer. Check that "
                    "the address is reachable from this host (a firewall may drop it; NCCL_SOCKET_IFNAME chooses "
                    "the interfaces), or raise NCCL_BOOTSTRAP_TIMEOUT (seconds) if the network is only slow",
                    peer_.c_str(), timeoutSec_);
      }
    }
    if (a.state == State::Hello) {
      ssize_t k = send(a.fd.get(), (const char*)&a.hello + a.sent, sizeof(Hello) - a.sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (k > 0) {
        a.sent += (size_t)k;
        if (a.sent == sizeof(Hello)) a.state = State::Ready;
      } else if (k < 0 && !wouldBlock(errno) && errno != EINTR) {
        NCCLCHECK(retryOrFail(a, errno));
      }
    }
    if (a.state == State::Ready) ready++;
  }
  if (ready < attempts_.size()) return ncclSuccess;
  UniqueFd ctrl = std::move(attempts_[0].fd);
  std::vector<UniqueFd> data;
  for (size_t i = 1; i < attempts_.size(); i++) data.push_back(std::move(attempts_[i].fd));
  *out = std::make_unique<SendComm>(std::move(ctrl), std::move(data), knobs_, handle_.magic, handle_.addr);
  INFO(NCCL_NET, "NET/Socket: connected to %s (%u data sockets, %d helper threads)", peer_.c_str(), handle_.nSocks,
       std::min<int>(knobs_.nThreads, handle_.nSocks));
  return ncclSuccess;
}

}  // namespace plexus::socketnet
