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

namespace {

// Connection types announced after the magic, as NCCL's ncclSocketType (Bootstrap = 1 talks to the root).
constexpr int32_t kTypeRoot = 1;
constexpr int32_t kTypeRing = 16;
constexpr int32_t kTypeP2p = 17;

constexpr double kHelloTimeout = 2.0;         // for a new connection to say who it is
constexpr uint64_t kMaxMessage = 1ull << 30;  // any length field above this means a corrupt stream
constexpr int kMaxFailLinger = 30;            // seconds a failed root keeps telling late ranks why

// NCCL's handshake: every connection first sends its magic and type.
struct __attribute__((packed)) Hello {
  uint64_t magic;
  int32_t type;
};
struct __attribute__((packed)) PeerHello {  // rank to rank: the hello plus who is calling
  uint64_t magic;
  int32_t type;
  int32_t rank;
};
struct RootInfo {  // rank -> root, right after the hello
  int32_t rank, nranks;
  // The ranks this root serves (ncclCommInitRankScalable spreads them over several roots in contiguous
  // blocks); [0, nranks) with one root.
  int32_t blockFirst, blockCount;
  // 1: `rank` is the first rank of the next block, registering only its address with this root so that
  // the last rank of this block learns its successor (the ring is stitched across blocks this way).
  int32_t neighbor;
  int32_t pad;
  SocketAddress listenAddr;
};
struct RootReply {  // root -> rank: the next rank's address, or why the communicator failed
  int32_t result;
  int32_t pad;
  SocketAddress next;
  char message[468];
};
struct MsgHeader {  // frames every P2P message
  int32_t tag;
  uint32_t pad;
  uint64_t size;
};

uint32_t handleCheck(const BootstrapHandle& h) {
  uint64_t x = hashBytes(&h.magic, sizeof(h.magic));
  x = hashBytes(&h.addr, sizeof(h.addr), x);
  x = hashBytes(&h.tag, sizeof(h.tag), x);
  return (uint32_t)(x ^ (x >> 32));
}

Deadline earlier(const Deadline& a, const Deadline& b) { return a.end <= b.end ? a : b; }

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

// "3, 5-7": the ranks in [0, n) that `present` lacks, shortened for messages.
std::string missingRanks(const std::vector<bool>& present) {
  std::string out;
  int n = (int)present.size();
  for (int r = 0; r < n; r++) {
    if (present[r]) continue;
    int e = r;
    while (e + 1 < n && !present[e + 1]) e++;
    if (out.size() > 200) return out + ", ...";
    if (!out.empty()) out += ", ";
    out += std::to_string(r);
    if (e > r) {
      out += '-';
      out += std::to_string(e);
    }
    r = e;
  }
  return out;
}

// The root (NCCL's bootstrapRoot): collects {rank, nranks, address} from every rank, then tells each rank its
// successor's address. One poll loop with a deadline per connection, so that garbage, silent or half-open
// connections cost nothing but a dropped fd.
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
      if (!failed_ && deadline_ && deadline_->expired()) {
        std::vector<bool> present(nranks_, true);
        for (int r = blockFirst_; r < blockFirst_ + blockCount_; r++) present[r] = ranks_.count(r) != 0;
        if (blockCount_ < nranks_ && !neighbor_) present[successor()] = false;
        const int got = (int)ranks_.size() + (neighbor_ ? 1 : 0);
        fail(ncclSystemError, "only " + std::to_string(got) + " of " + std::to_string(expected()) +
                                  " ranks registered with the bootstrap root at " + where_ + " within " +
                                  std::to_string(timeout_) + " s; missing ranks: " + missingRanks(present) +
                                  ". Check that every rank calls ncclCommInitRank with this unique id, or raise "
                                  "NCCL_BOOTSTRAP_TIMEOUT (seconds) if they are only slow");
      }
      if (failed_ && (failUntil_->expired() || told_ >= maxNranks_)) return;
    }
  }

 private:
  struct Pending {
    Socket sock;
    Deadline deadline;
    char buf[sizeof(Hello) + sizeof(RootInfo)];
    size_t got = 0;
  };
  struct Registered {
    Socket sock;
    SocketAddress listenAddr;
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
    if (before < sizeof(Hello) && c.got >= sizeof(Hello)) {
      Hello h;
      memcpy(&h, c.buf, sizeof(h));
      if (h.magic != magic_) return drop(c, "wrong magic (not a rank of this communicator)");
      if (h.type != kTypeRoot) return drop(c, "wrong connection type");
    }
  }

  // Returns true when the root is done.
  bool registerRank(Pending& c) {
    RootInfo info;
    memcpy(&info, c.buf + sizeof(Hello), sizeof(info));
    std::string from = toString(c.sock.addr());
    if (info.nranks >= 1 && info.blockCount >= 1 && info.blockCount <= info.nranks)
      maxNranks_ = std::max(maxNranks_, info.blockCount + (info.blockCount < info.nranks ? 1 : 0));
    if (failed_) {
      reply(c.sock, failCode_, nullptr, failMessage_);
      told_++;
      return false;
    }
    if (info.nranks < 1 || info.rank < 0 || info.rank >= info.nranks) {
      fail(ncclInvalidUsage,
           "rank " + std::to_string(info.rank) + " (from " + from +
               ") registered with nranks=" + std::to_string(info.nranks) + ": the rank must be in [0, nranks)",
           &c);
      return false;
    }
    if (info.blockFirst < 0 || info.blockCount < 1 || info.blockFirst + info.blockCount > info.nranks) {
      fail(ncclInvalidUsage,
           "rank " + std::to_string(info.rank) + " (from " + from + ") registered for ranks [" +
               std::to_string(info.blockFirst) + ", +" + std::to_string(info.blockCount) + ") of " +
               std::to_string(info.nranks) + ", which is not a block of the communicator",
           &c);
      return false;
    }
    if (nranks_ < 0) {
      nranks_ = info.nranks;
      blockFirst_ = info.blockFirst;
      blockCount_ = info.blockCount;
      firstRank_ = info.rank;
      deadline_ = Deadline::after(timeout_);
      INFO(NCCL_BOOTSTRAP, "bootstrap root %s: expecting %d ranks", where_.c_str(), expected());
    }
    if (info.nranks != nranks_) {
      fail(ncclInvalidUsage,
           "rank " + std::to_string(info.rank) + " says nranks=" + std::to_string(info.nranks) + " but rank " +
               std::to_string(firstRank_) + " says nranks=" + std::to_string(nranks_) +
               ". Every rank must pass the same nranks",
           &c);
      return false;
    }
    if (info.blockFirst != blockFirst_ || info.blockCount != blockCount_) {
      fail(ncclInvalidUsage,
           "rank " + std::to_string(info.rank) + " expects this root to serve ranks " + blockName(info) +
               " but rank " + std::to_string(firstRank_) + " expects ranks " +
               blockName(RootInfo{0, nranks_, blockFirst_, blockCount_, 0, 0, {}}) +
               ". Every rank must pass the same nranks and the same unique ids, in the same order",
           &c);
      return false;
    }
    if (info.neighbor) {
      if (blockCount_ == nranks_ || info.rank != successor()) {
        fail(ncclInvalidUsage,
             "rank " + std::to_string(info.rank) + " (from " + from + ") registered as the successor of ranks " +
                 blockName(info) + ", which is rank " + std::to_string(successor()) +
                 ". Every rank must pass the same unique ids, in the same order",
             &c);
        return false;
      }
      if (neighbor_) {
        fail(ncclInvalidUsage, "rank " + std::to_string(info.rank) + " registered twice as a successor (from " +
                                   toString(neighbor_->sock.addr()) + " and " + from + ")",
             &c);
        return false;
      }
      neighbor_ = Registered{std::move(c.sock), info.listenAddr};
    } else {
      if (info.rank < blockFirst_ || info.rank >= blockFirst_ + blockCount_) {
        fail(ncclInvalidUsage,
             "rank " + std::to_string(info.rank) + " (from " + from + ") registered with the root of ranks " +
                 blockName(info) + ". Every rank must pass the same unique ids, in the same order",
             &c);
        return false;
      }
      if (ranks_.count(info.rank)) {
        fail(ncclInvalidUsage,
             "rank " + std::to_string(info.rank) + " registered twice (from " +
                 toString(ranks_[info.rank].sock.addr()) + " and " + from + "). Every rank must pass a distinct rank",
             &c);
        return false;
      }
      ranks_[info.rank] = Registered{std::move(c.sock), info.listenAddr};
    }
    if ((int)ranks_.size() < blockCount_ || (blockCount_ < nranks_ && !neighbor_)) return false;
    const int last = blockFirst_ + blockCount_ - 1;
    for (auto& [r, reg] : ranks_) {
      const SocketAddress* next = r < last                 ? &ranks_[r + 1].listenAddr
                                  : blockCount_ == nranks_ ? &ranks_[blockFirst_].listenAddr
                                                           : &neighbor_->listenAddr;
      reply(reg.sock, ncclSuccess, next, "");
    }
    if (neighbor_) reply(neighbor_->sock, ncclSuccess, nullptr, "");
    INFO(NCCL_BOOTSTRAP, "bootstrap root %s: all %d ranks registered", where_.c_str(), expected());
    return true;
  }

  int successor() const { return (blockFirst_ + blockCount_) % nranks_; }
  int expected() const { return blockCount_ + (blockCount_ < nranks_ ? 1 : 0); }
  static std::string blockName(const RootInfo& i) {
    return i.blockCount == i.nranks ? "0-" + std::to_string(i.nranks - 1) + " (all)"
                                    : std::to_string(i.blockFirst) + "-" + std::to_string(i.blockFirst + i.blockCount - 1);
  }

  // Fails the communicator: every rank that registered, is registering (`c`) or registers later learns why.
  void fail(ncclResult_t code, const std::string& why, Pending* c = nullptr) {
    INFO(NCCL_BOOTSTRAP, "bootstrap root %s: %s", where_.c_str(), why.c_str());
    failed_ = true;
    failCode_ = code;
    failMessage_ = why;
    failUntil_ = Deadline::after(std::min(timeout_, kMaxFailLinger));
    for (auto& [r, reg] : ranks_) reply(reg.sock, code, nullptr, why);
    told_ += (int)ranks_.size();
    ranks_.clear();
    if (neighbor_) {
      reply(neighbor_->sock, code, nullptr, why);
      told_++;
      neighbor_.reset();
    }
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
  std::map<int, Registered> ranks_;
  std::optional<Registered> neighbor_;  // the first rank of the next block (several roots only)
  int nranks_ = -1, firstRank_ = -1, maxNranks_ = 0, told_ = 0;
  int blockFirst_ = 0, blockCount_ = 0;
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
  if (reply.result != ncclSuccess) {
    reply.message[sizeof(reply.message) - 1] = '\0';
    ncclResult_t res =
        reply.result > 0 && reply.result < ncclNumResults ? (ncclResult_t)reply.result : ncclInternalError;
    return setError(nullptr, res, "bootstrap: rank %d: the root at %s failed the communicator: %s", rank_,
                    toString(h.addr).c_str(), reply.message);
  }
  if (next) *next = reply.next;
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
  for (;;) {
    Socket s;
    NCCLCHECK(listen_.accept(&s, deadline, abortFlag(), what.c_str()));
    // One connection at a time: only ranks of this communicator know the address, so garbage here is rare and
    // costs at most kHelloTimeout.
    PeerHello hello;
    std::string why;
    if (s.recvAll(&hello, sizeof(hello), earlier(deadline, Deadline::after(kHelloTimeout)), abortFlag(), "a hello",
                  &why) != ncclSuccess) {
      if (abortFlag().set()) return ncclInternalError;
      INFO(NCCL_BOOTSTRAP, "bootstrap: rank %d drops a connection from %s: %s", rank_, toString(s.addr()).c_str(),
           why.c_str());
      continue;
    }
    const char* bad = hello.magic != magic_                               ? "wrong magic"
                      : hello.type != kTypeRing && hello.type != kTypeP2p ? "wrong connection type"
                      : hello.rank < 0 || hello.rank >= nranks_           ? "rank out of range"
                      : hello.type == kTypeRing && hello.rank != peer     ? "unexpected ring connection"
                      : hello.type == kTypeP2p && hello.rank != peer && recvSocks_[hello.rank].valid()
                          ? "second connection from one rank"
                          : nullptr;
    if (bad) {
      INFO(NCCL_BOOTSTRAP, "bootstrap: rank %d drops a connection from %s: %s", rank_, toString(s.addr()).c_str(), bad);
      continue;
    }
    if (hello.type == type && hello.rank == peer) {
      *out = std::move(s);
      return ncclSuccess;
    }
    if (hello.type == kTypeP2p) recvSocks_[hello.rank] = std::move(s);  // for a later recv
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
    MsgHeader hdr;
    NCCLCHECK(sock.recvAll(&hdr, sizeof(hdr), deadline, abortFlag(), what.c_str()));
    if (hdr.size > kMaxMessage) {
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
