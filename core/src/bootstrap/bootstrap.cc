#include "bootstrap/bootstrap.h"

#include <poll.h>
#include <sys/resource.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "misc/check.h"
#include "misc/env.h"
#include "misc/rand.h"

namespace plexus {

using namespace wire;

namespace {

constexpr double kHelloTimeout = 2.0;  // for a new connection to say who it is
constexpr int kMaxFailLinger = 30;     // seconds a failed root keeps telling late ranks why
// Connections a rank holds while their hellos come in; past this the oldest goes (a flood, not a rank).
constexpr size_t kMaxPendingPeers = 256;

uint32_t handleCheck(const BootstrapHandle& h) {
  uint64_t x = hashBytes(&h.magic, sizeof(h.magic));
  x = hashBytes(&h.addr, sizeof(h.addr), x);
  x = hashBytes(&h.tag, sizeof(h.tag), x);
  return (uint32_t)(x ^ (x >> 32));
}

// A root holds one connection per rank until all have arrived; raise the soft limit as NCCL does.
void raiseFilesLimit() {
  static std::once_flag once;
  std::call_once(once, [] {
    rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
      lim.rlim_cur = lim.rlim_max;
      setrlimit(RLIMIT_NOFILE, &lim);
    }
  });
}

// The root (NCCL's bootstrapRoot): collects {rank, nranks, address} from every rank, then tells each rank its
// successor's address. One poll loop with a deadline per connection, so that garbage, silent or half-open
// connections cost nothing but a dropped fd. What the registrations say is judged by wire::Registry.
class Root {
 public:
  Root(Socket listen, uint64_t magic, int timeout)
      : listen_(std::move(listen)), magic_(magic), timeout_(timeout), where_(toString(listen_.addr())) {}

  void run() {
    for (;;) {
      std::vector<pollfd> pfds{{listen_.fd(), POLLIN, 0}};
      int waitMs = -1;  // idle until the first rank arrives, as NCCL's root
      auto consider = [&](const Deadline& d) {
        int ms = d.pollMs(INT_MAX);
        waitMs = waitMs < 0 ? ms : std::min(waitMs, ms);
      };
      for (auto& c : pending_) {
        pfds.push_back({c.sock.fd(), POLLIN, 0});
        consider(c.deadline);
      }
      if (failed_)
        consider(*failUntil_);
      else if (deadline_)
        consider(*deadline_);
      if (poll(pfds.data(), pfds.size(), waitMs) < 0 && errno != EINTR) {
        WARN("bootstrap root %s: poll failed: %s; the root stops", where_.c_str(), strerror(errno));
        fail(ncclSystemError, std::string("poll failed: ") + strerror(errno));
        return;
      }
      size_t polled = pending_.size();
      for (size_t i = 0; i < polled; i++)
        if (pfds[i + 1].revents) readPending(pending_[i]);
      if (pfds[0].revents) acceptAll();
      for (auto& c : pending_)
        if (c.sock.valid() && c.deadline.expired()) drop(c, "it sent nothing valid within 2 s");
      // Registrations complete in readPending; handle them here so that pending_ is not reshaped mid-loop.
      std::vector<Pending> done;
      for (auto& c : pending_)
        if (c.sock.valid() && c.got == sizeof(c.buf)) done.push_back(std::move(c));
      std::erase_if(pending_, [](const Pending& c) { return !c.sock.valid(); });
      for (auto& c : done)
        if (registerRank(c)) return;
      if (!failed_ && deadline_ && deadline_->expired())
        fail(ncclSystemError, "only " + std::to_string(registry_.registered()) + " of " +
                                  std::to_string(registry_.expected()) +
                                  " ranks registered with the bootstrap root at " + where_ + " within " +
                                  std::to_string(timeout_) + " s; missing ranks: " + registry_.missing() +
                                  ". Check that every rank calls ncclCommInitRank with this unique id, or raise "
                                  "NCCL_BOOTSTRAP_TIMEOUT (seconds) if they are only slow");
      if (failed_ && (failUntil_->expired() || told_ >= registry_.maxNranks())) return;
    }
  }

 private:
  struct Pending {
    Socket sock;
    Deadline deadline;
    char buf[kRegistrationSize];
    size_t got = 0;
  };

  void acceptAll() {
    for (;;) {
      Pending c{{}, Deadline::after(kHelloTimeout), {}, 0};
      bool accepted = false;
      if (listen_.tryAccept(&c.sock, &accepted) != ncclSuccess) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));  // out of fds: let others finish first
        return;
      }
      if (!accepted) return;
      pending_.push_back(std::move(c));
    }
  }

  void drop(Pending& c, const char* why) {
    INFO(NCCL_BOOTSTRAP, "bootstrap root %s: dropping a connection from %s: %s", where_.c_str(),
         toString(c.sock.addr()).c_str(), why);
    c.sock.close();
  }

  void readPending(Pending& c) {
    ssize_t k = ::recv(c.sock.fd(), c.buf + c.got, sizeof(c.buf) - c.got, MSG_DONTWAIT);
    if (k == 0) return drop(c, "it closed before registering");
    if (k < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) drop(c, strerror(errno));
      return;
    }
    size_t before = c.got;
    c.got += k;
    if (before < sizeof(Hello) && c.got >= sizeof(Hello))
      if (const char* bad = rootHelloProblem(c.buf, c.got, magic_)) return drop(c, bad);
  }

  // Returns true when the root is done.
  bool registerRank(Pending& c) {
    registry_.note(c.buf, sizeof(c.buf));
    if (failed_) {
      reply(c.sock, failCode_, nullptr, failMessage_);
      told_++;
      return false;
    }
    std::string why;
    const int conn = nextConn_++;
    Registry::Verdict v = registry_.add(c.buf, sizeof(c.buf), conn, toString(c.sock.addr()), &why);
    if (v == Registry::Verdict::Reject) {
      fail(ncclInvalidUsage, why, &c);
      return false;
    }
    conns_[conn] = std::move(c.sock);
    if (!deadline_) {  // the others must follow the first within the timeout
      deadline_ = Deadline::after(timeout_);
      INFO(NCCL_BOOTSTRAP, "bootstrap root %s: expecting %d ranks", where_.c_str(), registry_.expected());
    }
    if (v == Registry::Verdict::Wait) return false;
    for (auto& [conn, next] : registry_.replies()) reply(conns_[conn], ncclSuccess, next, "");
    INFO(NCCL_BOOTSTRAP, "bootstrap root %s: all %d ranks registered", where_.c_str(), registry_.expected());
    return true;
  }

  // Fails the communicator: every rank that registered, is registering (`c`) or registers later learns why.
  void fail(ncclResult_t code, const std::string& why, Pending* c = nullptr) {
    INFO(NCCL_BOOTSTRAP, "bootstrap root %s: %s", where_.c_str(), why.c_str());
    failed_ = true;
    failCode_ = code;
    failMessage_ = why;
    failUntil_ = Deadline::after(std::min(timeout_, kMaxFailLinger));
    for (int conn : registry_.takeAll()) {
      reply(conns_[conn], code, nullptr, why);
      told_++;
    }
    conns_.clear();
    if (c) {
      reply(c->sock, code, nullptr, why);
      told_++;
    }
  }

  void reply(Socket& sock, ncclResult_t code, const SocketAddress* next, const std::string& msg) {
    RootReply r{};
    r.result = code;
    if (next) r.next = *next;
    snprintf(r.message, sizeof(r.message), "%s", msg.c_str());
    std::string err;
    if (sock.sendAll(&r, sizeof(r), Deadline::after(kHelloTimeout), AbortFlag(), "the root's reply", &err) !=
        ncclSuccess)
      INFO(NCCL_BOOTSTRAP, "bootstrap root %s: cannot reply to %s: %s", where_.c_str(), toString(sock.addr()).c_str(),
           err.c_str());
    sock.close();
  }

  Socket listen_;
  uint64_t magic_;
  int timeout_;
  std::string where_;
  std::vector<Pending> pending_;
  Registry registry_;
  std::map<int, Socket> conns_;  // registered connections, by Registry key
  int nextConn_ = 0, told_ = 0;
  std::optional<Deadline> deadline_;  // from the first registration: the others must follow within the timeout
  bool failed_ = false;
  ncclResult_t failCode_ = ncclSuccess;
  std::string failMessage_;
  std::optional<Deadline> failUntil_;
};

ncclResult_t startRoot(Socket listen, uint64_t magic) {
  raiseFilesLimit();
  int timeout = bootstrapTimeout();  // read here: setenv in other threads must not race the root's getenv
  INFO(NCCL_BOOTSTRAP | NCCL_INIT, "bootstrap root listening on %s", toString(listen.addr()).c_str());
  try {
    std::thread([sock = std::move(listen), magic, timeout]() mutable {
      Root(std::move(sock), magic, timeout).run();
    }).detach();
  } catch (const std::exception& e) {
    return setError(nullptr, ncclSystemError, "bootstrap: cannot start the root thread: %s", e.what());
  }
  return ncclSuccess;
}

}  // namespace

BootstrapHandle handleFromId(const ncclUniqueId& id) {
  BootstrapHandle h;
  memcpy(&h, &id, sizeof(h));
  return h;
}

bool handleValid(const ncclUniqueId& id) {
  BootstrapHandle h = handleFromId(id);
  if (h.tag != kBootstrapTag || h.check != handleCheck(h)) return false;
  if (h.addr.sa.sa_family != AF_INET && h.addr.sa.sa_family != AF_INET6) return false;
  if (addressPort(h.addr) == 0) return false;
  for (size_t i = sizeof(h); i < sizeof(id.internal); i++)
    if (id.internal[i] != 0) return false;
  return true;
}

ncclResult_t bootstrapGetUniqueId(ncclUniqueId* id) {
  if (!id) return setError(nullptr, ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  BootstrapHandle h{};
  if (auto env = envGet("COMM_ID"); env && !env->empty()) {
    NCCLCHECK(parseAddress(env->c_str(), &h.addr, "NCCL_COMM_ID"));
    if (addressPort(h.addr) == 0)
      return setError(nullptr, ncclInvalidArgument,
                      "bootstrap: NCCL_COMM_ID=%s has port 0; rank 0 listens on exactly that port, so give a fixed "
                      "one (host:port)",
                      env->c_str());
    h.magic = NCCL_MAGIC;
    INFO(NCCL_BOOTSTRAP | NCCL_ENV, "bootstrap: NCCL_COMM_ID set to %s; rank 0 will create the root there",
         toString(h.addr).c_str());
  } else {
    return bootstrapCreateUniqueId(id);
  }
  h.tag = kBootstrapTag;
  h.check = handleCheck(h);
  memset(id, 0, sizeof(*id));
  memcpy(id, &h, sizeof(h));
  return ncclSuccess;
}

ncclResult_t bootstrapCreateUniqueId(ncclUniqueId* id) {
  BootstrapHandle h{};
  SocketAddress ifAddr;
  std::string ifName;
  NCCLCHECK(findInterface(&ifAddr, &ifName));
  Socket listen;
  NCCLCHECK(listen.listen(ifAddr));
  h.magic = randomU64();
  h.addr = listen.addr();
  NCCLCHECK(startRoot(std::move(listen), h.magic));
  h.tag = kBootstrapTag;
  h.check = handleCheck(h);
  memset(id, 0, sizeof(*id));
  memcpy(id, &h, sizeof(h));
  return ncclSuccess;
}

RootBlock rootBlock(int nranks, int nIds, int i) {
  const int base = nranks / nIds, extra = nranks % nIds;
  return RootBlock{i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

ncclResult_t bootstrapCreateRoot(const ncclUniqueId& id, bool idFromEnv) {
  if (!handleValid(id))
    return setError(nullptr, ncclInvalidArgument, "bootstrap: cannot create a root for an invalid %s",
                    idFromEnv ? "NCCL_COMM_ID" : "unique id");
  BootstrapHandle h = handleFromId(id);
  INFO(NCCL_BOOTSTRAP, "bootstrap: rank 0 creates the root at %s (from %s)", toString(h.addr).c_str(),
       idFromEnv ? "NCCL_COMM_ID" : "the unique id");
  Socket listen;
  NCCLCHECK(listen.listen(h.addr));
  return startRoot(std::move(listen), h.magic);
}

ncclResult_t Bootstrap::init(const ncclUniqueId& id, int rank, int nranks, volatile uint32_t* abortFlag,
                             std::unique_ptr<Bootstrap>* out) {
  return init(&id, 1, rank, nranks, abortFlag, out);
}

ncclResult_t Bootstrap::init(const ncclUniqueId* ids, int nIds, int rank, int nranks, volatile uint32_t* abortFlag,
                             std::unique_ptr<Bootstrap>* out) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return setError(nullptr, ncclInvalidArgument, "bootstrap: rank %d is out of range for nranks=%d", rank, nranks);
  if (!ids || nIds < 1 || nIds > nranks)
    return setError(nullptr, ncclInvalidArgument, "bootstrap: %d unique id(s) for %d ranks: give between 1 and nranks",
                    ids ? nIds : 0, nranks);
  for (int i = 0; i < nIds; i++)
    if (!handleValid(ids[i]))
      return setError(nullptr, ncclInvalidArgument,
                      "bootstrap: the ncclUniqueId%s is not valid: it was not produced by ncclGetUniqueId, or it "
                      "was corrupted on its way to this rank. Pass every rank the bytes that one ncclGetUniqueId "
                      "returned",
                      nIds > 1 ? (" #" + std::to_string(i)).c_str() : "");
  // Root i serves a contiguous block of ranks; the first rank of each block also registers with the root
  // of the previous block, whose last rank connects to it.
  int myRoot = 0;
  while (myRoot + 1 < nIds && rootBlock(nranks, nIds, myRoot + 1).first <= rank) myRoot++;
  const RootBlock block = rootBlock(nranks, nIds, myRoot);
  const bool stitch = nIds > 1 && rank == block.first;
  const int prevRoot = (myRoot + nIds - 1) % nIds;
  // Only the first id sets the magic the ranks' own connections use: ranks of every block must agree.
  std::unique_ptr<Bootstrap> b(new Bootstrap(rank, nranks, handleFromId(ids[0]).magic, abortFlag));
  b->peerAddrs_.resize(nranks);
  b->sendSocks_.resize(nranks);
  b->recvSocks_.resize(nranks);

  SocketAddress ifAddr;
  std::string ifName;
  NCCLCHECK(findInterface(&ifAddr, &ifName));
  NCCLCHECK(b->listen_.listen(ifAddr));
  // Every registration goes out before any reply is awaited: a root answers once its whole block (and the
  // next block's first rank) has registered.
  Socket own, prev;
  NCCLCHECK(b->registerRoot(handleFromId(ids[myRoot]), block, false, &own));
  if (stitch) NCCLCHECK(b->registerRoot(handleFromId(ids[prevRoot]), rootBlock(nranks, nIds, prevRoot), true, &prev));
  SocketAddress next;
  NCCLCHECK(b->rootReply(handleFromId(ids[myRoot]), own, &next));
  if (stitch) NCCLCHECK(b->rootReply(handleFromId(ids[prevRoot]), prev, nullptr));
  // Ring: connecting completes in the listener's backlog, so every rank can connect before it accepts.
  NCCLCHECK(b->connectPeer(kTypeRing, (rank + 1) % nranks, next, &b->ringNext_));
  NCCLCHECK(b->acceptPeer(kTypeRing, (rank + nranks - 1) % nranks, Deadline::after(bootstrapTimeout()), &b->ringPrev_));
  b->peerAddrs_[rank] = b->listen_.addr();
  NCCLCHECK(b->allGather(b->peerAddrs_.data(), sizeof(SocketAddress)));
  INFO(NCCL_BOOTSTRAP | NCCL_INIT, "bootstrap: rank %d/%d up on %s (%s)%s", rank, nranks,
       toString(b->listen_.addr()).c_str(), ifName.c_str(),
       nIds > 1 ? (", root " + std::to_string(myRoot) + " of " + std::to_string(nIds)).c_str() : "");
  *out = std::move(b);
  return ncclSuccess;
}

namespace {
std::string rootHint(const BootstrapHandle& h) {
  return "Check that rank 0 is running and that " + toString(h.addr) + " is reachable from this host (" +
         (h.magic == NCCL_MAGIC ? "from NCCL_COMM_ID" : "from the unique id") +
         "); set NCCL_SOCKET_IFNAME to the interface that routes to it, or raise NCCL_BOOTSTRAP_TIMEOUT";
}
}  // namespace

ncclResult_t Bootstrap::registerRoot(const BootstrapHandle& h, const RootBlock& block, bool neighbor, Socket* root) {
  int timeout = bootstrapTimeout();
  std::string hint = rootHint(h);
  NCCLCHECK(root->connect(h.addr, Deadline::after(timeout), abortFlag(), "the root", hint.c_str()));
  char msg[sizeof(Hello) + sizeof(RootInfo)];
  Hello hello{h.magic, kTypeRoot};  // each root checks its own id's magic
  RootInfo info{rank_, nranks_, block.first, block.count, neighbor ? 1 : 0, 0, listen_.addr()};
  memcpy(msg, &hello, sizeof(hello));
  memcpy(msg + sizeof(hello), &info, sizeof(info));
  NCCLCHECK(root->sendAll(msg, sizeof(msg), Deadline::after(timeout), abortFlag(), "this rank's registration"));
  return ncclSuccess;
}

ncclResult_t Bootstrap::rootReply(const BootstrapHandle& h, Socket& root, SocketAddress* next) {
  int timeout = bootstrapTimeout();
  // The root gives up on missing ranks `timeout` after the first arrived; wait a little longer to hear why.
  RootReply reply;
  NCCLCHECK(root.recvAll(&reply, sizeof(reply), Deadline::after(timeout + kHelloTimeout), abortFlag(),
                         "the root's answer (it waits for every rank to register)"));
  std::string why;
  if (ncclResult_t res = parseRootReply(&reply, sizeof(reply), next, &why); res != ncclSuccess)
    return setError(nullptr, res, "bootstrap: rank %d: the root at %s %s", rank_, toString(h.addr).c_str(),
                    why.c_str());
  return ncclSuccess;
}

ncclResult_t Bootstrap::connectPeer(int type, int peer, const SocketAddress& addr, Socket* out) {
  std::string what = "rank " + std::to_string(peer);
  Deadline deadline = Deadline::after(bootstrapTimeout());
  NCCLCHECK(out->connect(addr, deadline, abortFlag(), what.c_str()));
  PeerHello hello{magic_, type, rank_};
  NCCLCHECK(out->sendAll(&hello, sizeof(hello), deadline, abortFlag(), "this rank's hello"));
  return ncclSuccess;
}

ncclResult_t Bootstrap::acceptPeer(int type, int peer, const Deadline& deadline, Socket* out) {
  std::string what = "rank " + std::to_string(peer) + (type == kTypeRing ? " (the previous rank in the ring)" : "");
  auto hasRecv = [this](int r) { return recvSocks_[r].valid(); };
  auto drop = [this](const PendingPeer& p, const char* why) {
    INFO(NCCL_BOOTSTRAP, "bootstrap: rank %d drops a connection from %s: %s", rank_, toString(p.sock.addr()).c_str(),
         why);
  };
  // Reads what a connection's hello has sent so far. True once the connection is settled: dropped, kept for a
  // later recv, or (*found) the one awaited, moved to *out.
  auto settle = [&](PendingPeer& p, bool* found) {
    ssize_t k = ::recv(p.sock.fd(), p.hello + p.got, sizeof(p.hello) - p.got, MSG_DONTWAIT);
    if (k == 0) return drop(p, "it closed before its hello"), true;
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return drop(p, strerror(errno)), true;
    if (k > 0) p.got += k;
    if (p.got < sizeof(p.hello)) {
      if (!p.deadline.expired()) return false;
      return drop(p, "it sent no hello within 2 s"), true;
    }
    if (const char* bad = peerHelloProblem(p.hello, sizeof(p.hello), magic_, nranks_, type, peer, hasRecv))
      return drop(p, bad), true;
    PeerHello hello;
    memcpy(&hello, p.hello, sizeof(hello));
    if (hello.type == type && hello.rank == peer) {
      *out = std::move(p.sock);
      *found = true;
    } else {
      recvSocks_[hello.rank] = std::move(p.sock);  // a P2P connection, for a later recv
    }
    return true;
  };
  // Every connection is read as its bytes come, none waited for in turn: garbage, silent or half-open
  // connections cost a slot in pendingPeers_ for at most kHelloTimeout, and stall nobody.
  for (;;) {
    bool found = false;
    for (size_t i = 0; i < pendingPeers_.size() && !found;) {
      if (settle(pendingPeers_[i], &found))
        pendingPeers_.erase(pendingPeers_.begin() + i);
      else
        i++;
    }
    for (int n = 0; n < 64 && !found; n++) {  // the backlog, in bounded helpings
      PendingPeer p{{}, Deadline::after(kHelloTimeout), {}, 0};
      bool accepted = false;
      NCCLCHECK(listen_.tryAccept(&p.sock, &accepted));
      if (!accepted) break;
      if (settle(p, &found)) continue;  // hellos of real ranks are usually in at once
      if (pendingPeers_.size() >= kMaxPendingPeers) {
        drop(pendingPeers_.front(), "too many connections without a hello (the oldest goes)");
        pendingPeers_.erase(pendingPeers_.begin());
      }
      pendingPeers_.push_back(std::move(p));
    }
    if (found) return ncclSuccess;
    if (abortFlag().set()) {
      INFO(NCCL_BOOTSTRAP, "bootstrap: accepting on %s aborted", toString(listen_.addr()).c_str());
      return ncclInternalError;
    }
    if (deadline.expired())
      return setError(nullptr, ncclSystemError,
                      "bootstrap: timed out after %.0f s waiting for %s to connect to %s. It may have failed or not "
                      "have started; check its log, or raise NCCL_BOOTSTRAP_TIMEOUT (seconds) if it is only slow",
                      deadline.seconds(), what.c_str(), toString(listen_.addr()).c_str());
    std::vector<pollfd> pfds{{listen_.fd(), POLLIN, 0}};
    int waitMs = deadline.pollMs();
    for (auto& p : pendingPeers_) {
      pfds.push_back({p.sock.fd(), POLLIN, 0});
      waitMs = std::min(waitMs, p.deadline.pollMs());
    }
    if (poll(pfds.data(), pfds.size(), waitMs) < 0 && errno != EINTR)
      return setError(nullptr, ncclSystemError, "bootstrap: poll on %s failed: %s", toString(listen_.addr()).c_str(),
                      strerror(errno));
  }
}

ncclResult_t Bootstrap::allGather(void* data, size_t size) {
  if (size > kMaxMessage)
    return setError(nullptr, ncclInvalidArgument, "bootstrap: allGather of %zu bytes per rank exceeds the 1 GiB limit",
                    size);
  char* d = (char*)data;
  int prev = (rank_ + nranks_ - 1) % nranks_;
  for (int i = 0; i < nranks_ - 1; i++) {
    Deadline deadline = Deadline::after(bootstrapTimeout());
    size_t sendSlot = (rank_ + nranks_ - i) % nranks_, recvSlot = (rank_ + nranks_ - i - 1) % nranks_;
    // Sizes first, so that ranks that disagree fail with a message instead of a garbled stream.
    uint64_t mySize = size, prevSize = 0;
    NCCLCHECK(socketSendRecv(&ringNext_, &mySize, sizeof(mySize), &ringPrev_, &prevSize, sizeof(prevSize), deadline,
                             abortFlag(), "an allGather block size from the previous rank"));
    if (prevSize != size)
      return setError(nullptr, ncclInternalError,
                      "bootstrap: allGather size mismatch: rank %d sends %llu bytes per rank but rank %d expects %zu",
                      prev, (unsigned long long)prevSize, rank_, size);
    NCCLCHECK(socketSendRecv(&ringNext_, d + sendSlot * size, size, &ringPrev_, d + recvSlot * size, size, deadline,
                             abortFlag(), "an allGather block from the previous rank"));
  }
  return ncclSuccess;
}

ncclResult_t Bootstrap::send(int peer, int tag, const void* data, size_t size) {
  if (peer < 0 || peer >= nranks_)
    return setError(nullptr, ncclInvalidArgument, "bootstrap: send to rank %d, out of range for nranks=%d", peer,
                    nranks_);
  if (size > kMaxMessage)
    return setError(nullptr, ncclInvalidArgument,
                    "bootstrap: send of %zu bytes to rank %d (tag %d) exceeds the 1 GiB limit", size, peer, tag);
  if (!sendSocks_[peer].valid()) NCCLCHECK(connectPeer(kTypeP2p, peer, peerAddrs_[peer], &sendSocks_[peer]));
  Deadline deadline = Deadline::after(bootstrapTimeout());
  MsgHeader hdr{tag, 0, size};
  std::string what = "a message (tag " + std::to_string(tag) + ") for rank " + std::to_string(peer);
  NCCLCHECK(sendSocks_[peer].sendAll(&hdr, sizeof(hdr), deadline, abortFlag(), what.c_str()));
  NCCLCHECK(sendSocks_[peer].sendAll(data, size, deadline, abortFlag(), what.c_str()));
  return ncclSuccess;
}

ncclResult_t Bootstrap::recv(int peer, int tag, void* data, size_t size) {
  if (peer < 0 || peer >= nranks_)
    return setError(nullptr, ncclInvalidArgument, "bootstrap: recv from rank %d, out of range for nranks=%d", peer,
                    nranks_);
  auto sizeMismatch = [&](size_t got) {
    return setError(nullptr, ncclInternalError,
                    "bootstrap: rank %d received %zu bytes from rank %d with tag %d but expected %zu bytes", rank_, got,
                    peer, tag, size);
  };
  if (auto it = unexpected_.find({peer, tag}); it != unexpected_.end()) {
    std::vector<char> msg = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) unexpected_.erase(it);
    if (msg.size() != size) return sizeMismatch(msg.size());
    if (size) memcpy(data, msg.data(), size);
    return ncclSuccess;
  }
  Deadline deadline = Deadline::after(bootstrapTimeout());
  if (!recvSocks_[peer].valid()) NCCLCHECK(acceptPeer(kTypeP2p, peer, deadline, &recvSocks_[peer]));
  Socket& sock = recvSocks_[peer];
  std::string what = "rank " + std::to_string(peer) + "'s message with tag " + std::to_string(tag);
  for (;;) {
    char raw[sizeof(MsgHeader)];
    NCCLCHECK(sock.recvAll(raw, sizeof(raw), deadline, abortFlag(), what.c_str()));
    MsgHeader hdr;
    if (!parseMsgHeader(raw, sizeof(raw), &hdr)) {
      sock.close();  // the stream cannot be resynchronised
      return setError(nullptr, ncclInternalError,
                      "bootstrap: rank %d sent a message of %llu bytes (tag %d) to rank %d; the limit is 1 GiB, so "
                      "the stream is corrupt",
                      peer, (unsigned long long)hdr.size, hdr.tag, rank_);
    }
    if (hdr.tag == tag && hdr.size == size) return sock.recvAll(data, size, deadline, abortFlag(), what.c_str());
    // Read the payload either way, so that the stream stays in step.
    std::vector<char> payload(hdr.size);
    NCCLCHECK(sock.recvAll(payload.data(), payload.size(), deadline, abortFlag(), what.c_str()));
    if (hdr.tag == tag) return sizeMismatch(hdr.size);
    unexpected_[{peer, hdr.tag}].push_back(std::move(payload));
  }
}

ncclResult_t Bootstrap::barrier() {
  std::vector<int> v(nranks_, 0);
  v[rank_] = rank_;
  return allGather(v.data(), sizeof(int));
}

}  // namespace plexus
