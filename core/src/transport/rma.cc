// One-sided operations on the host backend (transport/rma.h): ncclPutSignal, ncclSignal, ncclWaitSignal.
#include "transport/rma.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <plexus/device/arch.h>
#include <plexus/device/primitives.h>
#include <plexus/device/reduce.h>

#include "channel/channel.h"
#include "comm/communicator.h"
#include "comm/memory.h"
#include "device/runtime.h"
#include "group/group.h"
#include "misc/check.h"
#include "misc/debug.h"
#include "misc/env.h"
#include "planner/planner.h"
#include "proxy/proxy.h"
#include "stream/host_stream.h"
#include "transport/transport.h"

#define NCCL_API(ret, func, ...)                                                                            \
  extern "C" __attribute__((visibility("default"))) __attribute__((alias(#func))) ret p##func(__VA_ARGS__); \
  extern "C" __attribute__((visibility("default"))) __attribute__((weak)) ret func(__VA_ARGS__)

namespace plexus {

namespace {

constexpr uint32_t kRmaMagic = 0x524d4131;  // 'RMA1'
constexpr int kMaxSigIdx = 1 << 16;
// Signals below this index from ranks of the node are counters in the target's signal board (shared memory the
// origin adds to after its direct write, the waiter polls): no message, no thread in between. Higher ones, and
// signals from other nodes, travel to the service.
constexpr int kBoardSigs = 16;
// Puts up to this size travel in one send with their header.
constexpr uint64_t kSmallPut = 4096;
// Puts above PLEXUS_RMA_INLINE_BYTES that the origin cannot write itself travel through a connector of the
// communicator's transports (the net plugin between nodes), moved by the shared primitives and the proxy as every
// collective's data; smaller ones ride on the one-sided socket with their header, one message.
constexpr int64_t kInlineDefault = 4096;

// What an origin writes first on a connection.
struct RmaHello {
  uint64_t commHash;
  int32_t rank;
  uint32_t magic;
};
// Then, per operation, this (and a put's bytes, for kPut).
enum RmaKind : uint32_t {
  kPut = 0,     // the bytes follow (none: a signal alone), then the signal counts
  kMap = 1,     // where the window lies, for a direct write: the target answers with an RmaMapReply
  kDirect = 2,  // the origin has written the bytes into the window itself: the signal counts
  kLink = 3,    // the origin's connect info for a connector to the target follows (bytes): answered by a LinkReply
  kLinkPut = 4,  // the bytes follow on the connector from the origin, then the signal counts
};
struct RmaHeader {
  uint32_t magic;
  int32_t sigIdx;
  int32_t ctx;
  uint32_t kind;
  uint64_t window;  // the target's window of this registration order, plus one; 0: a signal alone
  uint64_t offset;
  uint64_t bytes;
};
struct RmaMapReply {
  int32_t found;      // 0: no such window; 1: yes
  int32_t pid;        // the target's process
  int32_t fd;         // its ncclMemAlloc memfd, or -1 where the window is other memory
  uint32_t pad;
  uint64_t allocOffset;  // the window's offset in that allocation
  uint64_t allocBytes;   // the allocation's mapped bytes
  uint64_t windowBytes;
  uint64_t addr;  // the window's address in the target's process
  // The target's signal board: its memfd, size, address, and how many contexts it holds per origin.
  int32_t boardFd;
  int32_t boardCtx;
  uint64_t boardBytes;
  uint64_t boardAddr;
};

// The target's answer to kLink: its side's connect info, or why it has none.
struct LinkReply {
  int32_t ok;
  char why[252];
  plexusConnectInfo_v1_t info;
};

// Where origin's signal (ctx, sigIdx) counts in a board of boardCtx contexts per origin.
size_t boardSlot(int origin, int ctx, int sigIdx, int boardCtx) {
  return ((size_t)origin * boardCtx + ctx) * kBoardSigs + sigIdx;
}

// A shared mapping of another process's memfd (/proc/<pid>/fd/<fd>); nullptr (and *why) when it cannot be had.
void* mapPeerFd(int pid, int fd, size_t bytes, std::string* why) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const int local = open(path.c_str(), O_RDWR | O_CLOEXEC);
  void* m = local < 0 ? MAP_FAILED : mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, local, 0);
  const int err = errno;
  if (local >= 0) close(local);
  if (m != MAP_FAILED) return m;
  *why = path + ": " + strerror(err);
  return nullptr;
}

using SignalKey = std::tuple<int, int, int>;  // peer, ctx, sigIdx

// Where an origin writes a peer's window itself; base nullptr: through the peer's service.
struct DirectWindow {
  char* base = nullptr;
  size_t bytes = 0;
  void* mapped = nullptr;  // our mapping of the peer's memfd, if we made one
  size_t mappedBytes = 0;
};

struct OutPeer {
  std::mutex mutex;  // one operation at a time on the connection, whichever stream it comes from
  Socket sock;
  std::string who;  // for messages
  std::map<uint64_t, DirectWindow> direct;  // by the window's registration order
  uint64_t* board = nullptr;  // the peer's signal board, where it shares this node
  int boardCtx = 0;
  void* boardMapped = nullptr;
  size_t boardMappedBytes = 0;
  ~OutPeer() {
    for (auto& [index, d] : direct)
      if (d.mapped) munmap(d.mapped, d.mappedBytes);
    if (boardMapped) munmap(boardMapped, boardMappedBytes);
  }
};

}  // namespace

struct CudaRma;  // the CUDA backend's part (below)

struct RmaState {
  Socket listen;
  std::vector<SocketAddress> peers;
  std::vector<std::unique_ptr<OutPeer>> out;
  std::once_flag started;
  std::thread service;
  uint32_t stopFlag = 0;  // set at rmaFree; the service's loop and sockets watch it
  std::mutex sigMutex;
  std::map<SignalKey, uint64_t> arrived, consumed;
  std::string error;  // the first put the service had to drop, for the waits to report
  std::atomic<uint64_t> directBytes{0}, socketBytes{0}, transportBytes{0};
  // Connectors for puts through a transport: [rank].send carries this rank's puts to rank, [rank].recv rank's puts
  // here; made on an origin's first such put (its side by the origin, the target's by the service). Each direction
  // of each peer has a channel of its own (what a wait that fails marks): one transfer at a time uses it.
  int64_t inlineBytes = kInlineDefault;
  std::vector<plexusDevChannelPeer_v1_t> linkPeers;
  std::vector<plexusDevChannel_v1_t> linkChannels;  // [rank * 2 + isSend]
  std::mutex linksMutex;
  std::vector<Connection> links;
  // ncclCommSuspend released the connectors' buffers: no use of them (LinkUse) until ncclCommResume.
  bool linksSuspended = false;
  int linkUses = 0;
  std::condition_variable linksChanged;
  std::vector<char> linkProxied;  // [rank * 2 + isSend]: the connector is moved by the proxy
  double bootstrapSeconds = 120;  // NCCL_BOOTSTRAP_TIMEOUT at init (the environment costs more than a put)
  // This rank's signal board (shared with the ranks of its node): [origin][ctx][sigIdx < kBoardSigs].
  uint64_t* board = nullptr;
  MemAllocation boardMem;
  // The CUDA backend's thread and memory, made by the first one-sided call of a CUDA communicator.
  std::once_flag cudaStarted;
  CudaRma* cuda = nullptr;
  ncclResult_t cudaStartResult = ncclSuccess;
  std::string cudaStartError;
};

namespace {

// Seconds a one-sided transfer may block: the communicator's timeout, else the bootstrap's.
double transferSeconds(ncclComm* comm) {
  const uint64_t ns = comm->devComm.timeoutNs;
  return ns ? (double)ns / 1e9 : comm->rma->bootstrapSeconds;
}

struct InConn {
  Socket sock;
  int peer;
  std::string who;  // for messages
};

// The channel id one-sided connectors have for their transport: one no collective uses.
int linkChannel(ncclComm* comm) { return comm->channels.count; }

// One use of the one-sided connectors (a transfer, or making one). None runs while the communicator is suspended
// (their buffers are released): a use waits for the resume, within `seconds`; suspend waits for a use in progress.
class LinkUse {
 public:
  LinkUse(ncclComm* comm, RmaState* st, double seconds) : st_(st) {
    std::unique_lock<std::mutex> lock(st->linksMutex);
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + std::chrono::duration<double>(seconds);
    const bool waited = st->linksSuspended;
    while (st->linksSuspended && std::chrono::steady_clock::now() < deadline &&
           !__atomic_load_n(&st->stopFlag, __ATOMIC_ACQUIRE) && !__atomic_load_n(&comm->abortFlag, __ATOMIC_ACQUIRE))
      st->linksChanged.wait_for(lock, std::chrono::milliseconds(100));  // the flags have no notification
    held_ = !st->linksSuspended;
    st->linkUses += held_;
    if (waited && held_)
      INFO(NCCL_NET, "one-sided: rank %d: a put waited %.3f s for this rank's ncclCommResume", comm->rank,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  ~LinkUse() {
    if (!held_) return;
    std::lock_guard<std::mutex> lock(st_->linksMutex);
    st_->linkUses--;
    st_->linksChanged.notify_all();
  }
  bool held() const { return held_; }

 private:
  RmaState* st_;
  bool held_ = false;
};

void keepLink(RmaState* st, Connection&& conn) {
  std::lock_guard<std::mutex> lock(st->linksMutex);
  st->linkProxied[(size_t)conn.peer * 2 + conn.isSend] = conn.proxy != nullptr;
  st->links.push_back(std::move(conn));
}

void dropLink(ncclComm* comm, RmaState* st, Connection&& conn) {
  plexusDevChannelPeer_v1_t& peer = st->linkPeers[(size_t)conn.peer];
  (conn.isSend ? peer.send : peer.recv) = plexusDevConnector_v1_t{};
  std::vector<Connection> one;
  one.push_back(std::move(conn));
  transportFree(comm, one);
}

// Connects a connector made by transportSetupOne with the peer's side (theirs), then waits for the peer to be
// connected too before the transport's connected() (which may remove what let the peer find this side's memory).
ncclResult_t linkConnect(ncclComm* comm, RmaState* st, Socket& sock, Connection& conn,
                         const plexusConnectInfo_v1_t& theirs, const Deadline& deadline, AbortFlag abort,
                         const char* who) {
  plexusDevChannelPeer_v1_t& peer = st->linkPeers[(size_t)conn.peer];
  NCCLCHECK(transportConnectOne(comm, conn, theirs, conn.isSend ? &peer.send : &peer.recv, deadline));
  const int32_t done = 1;
  int32_t peerDone = 0;
  NCCLCHECK(sock.sendAll(&done, sizeof done, deadline, abort, who));
  NCCLCHECK(sock.recvAll(&peerDone, sizeof peerDone, deadline, abort, who));
  if (conn.transport->api->connected) NCCLCHECK(conn.transport->api->connected(conn.resources));
  INFO(NCCL_NET | NCCL_INIT, "one-sided: rank %d %s rank %d above %lld bytes through transport %s", comm->rank,
       conn.isSend ? "puts to" : "takes puts from", conn.peer, (long long)st->inlineBytes, conn.transport->api->name);
  return ncclSuccess;
}

// Moves a put's bytes through the connector with peer (this rank's sending side, or its receiving side) with the
// primitives every collective uses. Its waits end after transferSeconds, so a service whose origin went quiet stops
// (a destroy never waits for ever). On failure *why says what happened, and the connector is not used again (its
// steps no longer match the peer's).
bool linkMove(ncclComm* comm, RmaState* st, int peer, bool isSend, const void* src, void* dst, uint64_t bytes,
              std::string* why) {
  plexusDevChannel_v1_t& ch = st->linkChannels[(size_t)peer * 2 + isSend];
  plexusDevComm_v1_t dc = comm->devComm;
  const double seconds = transferSeconds(comm);
  dc.timeoutNs = (uint64_t)(seconds * 1e9);
  {
    ProxyActivity moving(st->linkProxied[(size_t)peer * 2 + isSend]);
    const int* peers = &peer;
    dev::Primitives<int8_t, dev::FuncSum<int8_t>> prims(&dc, &ch, 0, 1, peers, isSend ? 0 : 1, peers, isSend ? 1 : 0,
                                                       src, dst, 0);
    if (isSend)
      prims.send(0, bytes);
    else
      prims.recv(0, bytes);
  }
  if (ch.status == PLEXUS_CHANNEL_OK) return true;
  // The communicator's failure where it has one (the proxy found the connector broken), else the wait's.
  char buf[128];
  snprintf(buf, sizeof buf, "rank %d moved nothing within %.0f s (dead, or stuck)", peer, seconds);
  *why = comm->asyncError.load() != ncclSuccess           ? std::string(lastError(comm))
         : ch.status == PLEXUS_CHANNEL_TIMEOUT ? std::string(buf)
                                               : std::string("the communicator was aborted");
  plexusDevChannelPeer_v1_t& links = st->linkPeers[(size_t)peer];
  (isSend ? links.send : links.recv).connected = 0;
  return false;
}

// The service's side of an origin's kLink: sets up the receiving connector, answers with its connect info, connects.
ncclResult_t linkAccept(ncclComm* comm, RmaState* st, InConn& c, const RmaHeader& h, const Deadline& deadline,
                        AbortFlag abort) {
  const char* who = c.who.c_str();
  plexusConnectInfo_v1_t theirs{};
  if (h.bytes != sizeof theirs)
    return setError(comm, ncclRemoteError, "one-sided: rank %d sent a connect request of %llu bytes (expected %zu)",
                    c.peer, (unsigned long long)h.bytes, sizeof theirs);
  NCCLCHECK(c.sock.recvAll(&theirs, sizeof theirs, deadline, abort, who));
  LinkReply reply{};
  Connection conn;
  const LinkUse use(comm, st, transferSeconds(comm));
  if (use.held()) {
    // An origin asks again only once it gave up its side (a failed put): this side's old connector goes too (freed
    // with the others at the end).
    st->linkPeers[(size_t)c.peer].recv.connected = 0;
    if (transportSetupOne(comm, c.peer, linkChannel(comm), false, &conn, &reply.info) == ncclSuccess)
      reply.ok = 1;
    else
      snprintf(reply.why, sizeof reply.why, "%s", lastError(comm));
  } else {
    snprintf(reply.why, sizeof reply.why, "rank %d stayed suspended (ncclCommSuspend without ncclCommResume) for %.0f s",
             comm->rank, transferSeconds(comm));
  }
  ncclResult_t r = c.sock.sendAll(&reply, sizeof reply, deadline, abort, who);
  if (r == ncclSuccess && reply.ok) r = linkConnect(comm, st, c.sock, conn, theirs, deadline, abort, who);
  if (r == ncclSuccess && reply.ok) keepLink(st, std::move(conn));
  else if (conn.resources) dropLink(comm, st, std::move(conn));
  return r;
}

// Takes a put's bytes into dst (nullptr: the put is dropped, its bytes read and discarded): from the socket, or
// from the origin's connector.
ncclResult_t takePut(ncclComm* comm, RmaState* st, InConn& c, const RmaHeader& h, char* dst, const Deadline& deadline,
                     AbortFlag abort) {
  if (h.kind == kPut) {
    if (dst && comm->backend == plexusBackendCuda) {  // a window in device memory: through host memory
      std::vector<char> bounce(h.bytes);
      NCCLCHECK(c.sock.recvAll(bounce.data(), h.bytes, deadline, abort, c.who.c_str()));
      if (comm->runtime->copyToDevice(dst, bounce.data(), h.bytes) != ncclSuccess)
        return setError(comm, ncclUnhandledCudaError, "one-sided: rank %d cannot copy rank %d's put of %llu bytes "
                        "into its window: %s", comm->rank, c.peer, (unsigned long long)h.bytes,
                        comm->runtime->lastError().c_str());
      return ncclSuccess;
    }
    if (dst) return c.sock.recvAll(dst, h.bytes, deadline, abort, c.who.c_str());
    char buf[4096];
    for (uint64_t left = h.bytes; left; left -= std::min<uint64_t>(left, sizeof buf))
      NCCLCHECK(c.sock.recvAll(buf, std::min<uint64_t>(left, sizeof buf), deadline, abort, c.who.c_str()));
    return ncclSuccess;
  }
  const LinkUse use(comm, st, transferSeconds(comm));
  if (!use.held())
    return setError(comm, ncclRemoteError, "one-sided: rank %d: rank %d's put of %llu bytes came while this rank was "
                    "suspended, and it stayed so for %.0f s (ncclCommSuspend without ncclCommResume)", comm->rank,
                    c.peer, (unsigned long long)h.bytes, transferSeconds(comm));
  if (!st->linkPeers[(size_t)c.peer].recv.connected)
    return setError(comm, ncclRemoteError,
                    "one-sided: rank %d put through a connector to rank %d that is not there (never made, or given up "
                    "after a failed put)", c.peer, comm->rank);
  std::vector<char> scratch(dst ? 0 : h.bytes);
  std::string why;
  if (!linkMove(comm, st, c.peer, false, nullptr, dst ? dst : scratch.data(), h.bytes, &why))
    return setError(comm, ncclRemoteError, "one-sided: rank %d: rank %d's put of %llu bytes stopped: %s", comm->rank,
                    c.peer, (unsigned long long)h.bytes, why.c_str());
  return ncclSuccess;
}

// Reads one operation from a peer and applies it: the data into the window, then the signal.
ncclResult_t serveOne(ncclComm* comm, RmaState* st, InConn& c) {
  const AbortFlag abort(&comm->abortFlag, &st->stopFlag);
  const Deadline deadline = Deadline::after(transferSeconds(comm));
  const char* who = c.who.c_str();
  RmaHeader h;
  NCCLCHECK(c.sock.recvAll(&h, sizeof h, deadline, abort, who));
  if (h.magic != kRmaMagic)
    return setError(comm, ncclRemoteError, "one-sided: rank %d sent garbage (magic 0x%x) on its connection to rank %d",
                    c.peer, h.magic, comm->rank);
  if (h.kind == kMap) {
    RmaMapReply reply{};
    reply.fd = -1;
    reply.pid = (int32_t)getpid();
    reply.boardFd = st->board ? st->boardMem.fd : -1;
    reply.boardCtx = comm->options.numRmaCtx;
    reply.boardBytes = st->boardMem.mapped;
    reply.boardAddr = (uint64_t)(uintptr_t)st->board;
    withWindow(comm, h.window - 1, [&](const WindowView* w) {
      if (!w) return;
      reply.found = 1;
      reply.windowBytes = w->size;
      reply.addr = (uint64_t)(uintptr_t)w->buff;
      if (w->fromMemAlloc) {
        reply.fd = w->alloc.fd;
        reply.allocOffset = (uint64_t)((char*)w->buff - (char*)w->alloc.base);
        reply.allocBytes = w->alloc.mapped;
      }
    });
    return c.sock.sendAll(&reply, sizeof reply, deadline, abort, who);
  }
  if (h.kind == kLink) return linkAccept(comm, st, c, h, deadline, abort);
  std::string dropped;
  ncclResult_t r = ncclSuccess;
  if (h.window && (h.kind == kPut || h.kind == kLinkPut)) {
    withWindow(comm, h.window - 1, [&](const WindowView* w) {
      const bool fits = w && h.offset <= w->size && h.bytes <= w->size - h.offset;
      if (!fits)
        dropped = w ? "window " + std::to_string(h.window - 1) + " of rank " + std::to_string(comm->rank) + " has " +
                          std::to_string(w->size) + " bytes"
                    : "rank " + std::to_string(comm->rank) + " has no window " + std::to_string(h.window - 1) +
                          " (windows are matched by registration order)";
      r = takePut(comm, st, c, h, fits ? (char*)w->buff + h.offset : nullptr, deadline, abort);
    });
  }
  if (r != ncclSuccess) {  // the waits for its signal report it rather than time out
    std::lock_guard<std::mutex> lock(st->sigMutex);
    if (st->error.empty()) st->error = lastError(comm);
    return r;
  }
  {
    std::lock_guard<std::mutex> lock(st->sigMutex);
    if (!dropped.empty() && st->error.empty()) {
      char msg[512];
      snprintf(msg, sizeof msg, "rank %d put %llu bytes at offset %llu, but %s; the data was dropped", c.peer,
               (unsigned long long)h.bytes, (unsigned long long)h.offset, dropped.c_str());
      st->error = msg;
      WARN("one-sided: %s", msg);
    }
    __atomic_fetch_add(&st->arrived[SignalKey{c.peer, h.ctx, h.sigIdx}], 1, __ATOMIC_RELEASE);  // waits read it unlocked
  }
  return ncclSuccess;
}

void serviceLoop(ncclComm* comm, RmaState* st) {
  debugSetThreadRank(comm->rank);
  const DeviceGuard device(comm);  // CUDA: its copies into windows belong to the communicator's device
  if (device.result() != ncclSuccess) WARN("one-sided: rank %d: %s", comm->rank, lastError(comm));
  std::vector<InConn> conns;
  while (!__atomic_load_n(&st->stopFlag, __ATOMIC_ACQUIRE)) {
    std::vector<pollfd> fds{{st->listen.fd(), POLLIN, 0}};
    for (const InConn& c : conns) fds.push_back({c.sock.fd(), POLLIN, 0});
    if (poll(fds.data(), fds.size(), 100) <= 0) continue;
    // The connections polled first (fds[i + 1] is conns[i]'s), then a new one.
    for (size_t i = conns.size(); i-- > 0;) {
      if (!(fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char byte;
      if (recv(conns[i].sock.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {  // the origin closed between operations
        conns.erase(conns.begin() + (long)i);
        continue;
      }
      if (serveOne(comm, st, conns[i]) != ncclSuccess) {
        if (!__atomic_load_n(&st->stopFlag, __ATOMIC_ACQUIRE)) WARN("one-sided: rank %d: %s", comm->rank, lastError(comm));
        conns.erase(conns.begin() + (long)i);
      }
    }
    if (fds[0].revents & POLLIN) {
      Socket s;
      bool accepted = false;
      if (st->listen.tryAccept(&s, &accepted) == ncclSuccess && accepted) {
        RmaHello hello{};
        std::string why;
        if (s.recvAll(&hello, sizeof hello, Deadline::after(5), AbortFlag(&st->stopFlag), "a hello", &why) ==
                ncclSuccess &&
            hello.magic == kRmaMagic && hello.commHash == comm->commHash && hello.rank >= 0 &&
            hello.rank < comm->nRanks)
          conns.push_back(InConn{std::move(s), hello.rank, "rank " + std::to_string(hello.rank) + "'s one-sided operation"});
        else
          INFO(NCCL_NET, "one-sided: rank %d dropped a connection that is not a rank's of this communicator%s%s",
               comm->rank, why.empty() ? "" : ": ", why.c_str());
      }
    }
  }
}

RmaState* stateOf(ncclComm* comm) { return comm->rma; }

// Where this rank reaches memory of a peer of its node: at its address where the peer shares this process, else
// through its memfd (fd, mapBytes from its start, the memory at offset), mapped through /proc/<pid>/fd; *mapped is
// that mapping (to undo at the end). nullptr and *why where it cannot be mapped.
char* reachPeer(ncclComm* comm, int peer, int pid, int fd, uint64_t addr, uint64_t offset, uint64_t mapBytes,
                void** mapped, std::string* why) {
  *mapped = nullptr;
  if (comm->peerInfo[comm->rank].pidHash == comm->peerInfo[peer].pidHash) return (char*)(uintptr_t)addr;
  if (fd < 0) {
    *why = "not ncclMemAlloc memory: only its process can reach it";
    return nullptr;
  }
  *mapped = mapPeerFd(pid, fd, mapBytes, why);
  return *mapped ? (char*)*mapped + offset : nullptr;
}

bool sameNode(ncclComm* comm, int peer) {
  const plexusPeerInfo_v1_t &me = comm->peerInfo[comm->rank], &them = comm->peerInfo[peer];
  return me.hostHash == them.hostHash && me.shmDev == them.shmDev;
}

// Asks a peer of this node where its window `index` lies (index ~0: no window, only its signal board), and takes its
// board on the first answer. Called with the peer's connection up and its mutex held.
ncclResult_t askPeer(ncclComm* comm, int peer, OutPeer& p, uint64_t index, const Deadline& deadline, AbortFlag abort,
                     const char* who, RmaMapReply* reply) {
  const RmaHeader ask{kRmaMagic, -1, 0, kMap, index + 1, 0, 0};
  NCCLCHECK(p.sock.sendAll(&ask, sizeof ask, deadline, abort, who));
  NCCLCHECK(p.sock.recvAll(reply, sizeof *reply, deadline, abort, who));
  if (p.board || p.boardCtx < 0 || reply->boardFd < 0) return ncclSuccess;
  std::string why;
  p.board = (uint64_t*)reachPeer(comm, peer, reply->pid, reply->boardFd, reply->boardAddr, 0, reply->boardBytes,
                                 &p.boardMapped, &why);
  p.boardMappedBytes = reply->boardBytes;
  if (!p.board) {
    INFO(NCCL_NET, "one-sided: rank %d cannot map rank %d's signal board (%s); its signals go through rank %d's "
         "service", comm->rank, peer, why.c_str(), peer);
    p.boardCtx = -1;  // not asked again
    return ncclSuccess;
  }
  p.boardCtx = reply->boardCtx;
  return ncclSuccess;
}

// How this rank writes peer's window `index` (asked once, then kept): straight into it where the peer shares this
// process, or has the window in ncclMemAlloc memory on this node (its memfd mapped through /proc/<pid>/fd); else
// through its service.
ncclResult_t directWindow(ncclComm* comm, int peer, OutPeer& p, uint64_t index, const Deadline& deadline,
                          AbortFlag abort, const char* who, DirectWindow** out) {
  auto it = p.direct.find(index);
  if (it != p.direct.end()) {
    *out = &it->second;
    return ncclSuccess;
  }
  DirectWindow& d = p.direct[index];
  *out = &d;
  if (!sameNode(comm, peer)) return ncclSuccess;
  RmaMapReply reply{};
  NCCLCHECK(askPeer(comm, peer, p, index, deadline, abort, who, &reply));
  if (!reply.found) return ncclSuccess;  // the put goes to the service, which reports the missing window
  std::string why;
  d.base = reachPeer(comm, peer, reply.pid, reply.fd, reply.addr, reply.allocOffset, reply.allocBytes, &d.mapped,
                     &why);
  d.mappedBytes = reply.allocBytes;
  d.bytes = reply.windowBytes;
  if (!d.base) {
    INFO(NCCL_NET, "one-sided: rank %d cannot reach rank %d's window %llu (%s); its puts go through rank %d's service",
         comm->rank, peer, (unsigned long long)index, why.c_str(), peer);
    return ncclSuccess;
  }
  INFO(NCCL_NET, "one-sided: rank %d writes rank %d's window %llu directly (%llu bytes)", comm->rank, peer,
       (unsigned long long)index, (unsigned long long)reply.windowBytes);
  return ncclSuccess;
}

// A put through this rank's connector to peer (made with the peer's service on the first such put): its header on the
// socket, then its bytes through the connector; returns once they are all in the connector's slots.
ncclResult_t linkPut(ncclComm* comm, RmaState* st, int peer, OutPeer& p, const RmaHeader& h, const void* data,
                     const Deadline& deadline, AbortFlag abort, const char* who) {
  const LinkUse use(comm, st, transferSeconds(comm));
  if (!use.held())
    return setError(comm, ncclInvalidUsage, "ncclPutSignal: rank %d was suspended (ncclCommSuspend) before its put to "
                    "rank %d ran, and stayed so for %.0f s; synchronize the stream before suspending", comm->rank,
                    peer, transferSeconds(comm));
  if (!st->linkPeers[(size_t)peer].send.connected) {
    Connection conn;
    LinkReply reply{};
    plexusConnectInfo_v1_t mine{};
    NCCLCHECK(transportSetupOne(comm, peer, linkChannel(comm), true, &conn, &mine));
    const RmaHeader ask{kRmaMagic, -1, 0, kLink, 0, 0, sizeof mine};
    ncclResult_t r = p.sock.sendAll(&ask, sizeof ask, deadline, abort, who);
    if (r == ncclSuccess) r = p.sock.sendAll(&mine, sizeof mine, deadline, abort, who);
    if (r == ncclSuccess) r = p.sock.recvAll(&reply, sizeof reply, deadline, abort, who);
    if (r == ncclSuccess && !reply.ok)
      r = setError(comm, ncclRemoteError, "ncclPutSignal: rank %d cannot take rank %d's puts through a transport: %.*s",
                   peer, comm->rank, (int)sizeof reply.why, reply.why);
    if (r == ncclSuccess) r = linkConnect(comm, st, p.sock, conn, reply.info, deadline, abort, who);
    if (r != ncclSuccess) {
      dropLink(comm, st, std::move(conn));
      return r;
    }
    keepLink(st, std::move(conn));
  }
  RmaHeader put = h;
  put.kind = kLinkPut;
  NCCLCHECK(p.sock.sendAll(&put, sizeof put, deadline, abort, who));
  std::string why;
  if (!linkMove(comm, st, peer, true, data, nullptr, h.bytes, &why))
    return setError(comm, ncclRemoteError, "ncclPutSignal: rank %d's put of %llu bytes to rank %d stopped: %s",
                    comm->rank, (unsigned long long)h.bytes, peer, why.c_str());
  st->transportBytes += h.bytes;
  return ncclSuccess;
}

// Writes one operation to peer, connecting on first use: a put's bytes straight into the window where this rank
// can reach it, else on the connection; then the signal, into the peer's board where it can, else on the connection.
ncclResult_t rmaSend(ncclComm* comm, int peer, const RmaHeader& h, const void* data) {
  RmaState* st = stateOf(comm);
  OutPeer& p = *st->out[peer];
  std::lock_guard<std::mutex> lock(p.mutex);
  const AbortFlag abort(&comm->abortFlag);
  const Deadline deadline = Deadline::after(transferSeconds(comm));
  const char* who = p.who.c_str();
  ncclResult_t r = ncclSuccess;
  // On the CUDA backend windows are device memory, which neither this thread nor a connector's host-side step loop
  // reaches: every operation goes to the peer's service, its bytes (staged in host memory) with the header.
  const bool hostMemory = comm->backend == plexusBackendHost;
  if (!p.sock.valid()) {
    NCCLCHECK(p.sock.connect(st->peers[peer], deadline, abort, who));
    const RmaHello hello{comm->commHash, comm->rank, kRmaMagic};
    r = p.sock.sendAll(&hello, sizeof hello, deadline, abort, who);
    RmaMapReply reply{};
    if (r == ncclSuccess && hostMemory && sameNode(comm, peer))
      r = askPeer(comm, peer, p, ~0ull, deadline, abort, who, &reply);  // its board
  }
  DirectWindow* direct = nullptr;
  if (r == ncclSuccess && hostMemory && h.window)
    r = directWindow(comm, peer, p, h.window - 1, deadline, abort, who, &direct);
  if (r == ncclSuccess && direct && direct->base) {
    if (h.offset > direct->bytes || h.bytes > direct->bytes - h.offset)
      return setError(comm, ncclInvalidArgument,
                      "ncclPutSignal: %llu bytes at offset %llu do not fit rank %d's window %llu of %zu bytes",
                      (unsigned long long)h.bytes, (unsigned long long)h.offset, peer,
                      (unsigned long long)(h.window - 1), direct->bytes);
    memcpy(direct->base + h.offset, data, h.bytes);
    st->directBytes += h.bytes;
  }
  const bool written = direct && direct->base;
  if (r == ncclSuccess && (written || !h.window) && p.board && h.sigIdx < kBoardSigs && h.ctx < p.boardCtx) {
    // The release orders the bytes before the count the waiter reads with acquire.
    __atomic_fetch_add(&p.board[boardSlot(comm->rank, h.ctx, h.sigIdx, p.boardCtx)], 1, __ATOMIC_RELEASE);
    return ncclSuccess;
  }
  if (r == ncclSuccess && written) {
    // The bytes are in place before the signal leaves: send() orders them for the target, which reads after recv().
    RmaHeader signal = h;
    signal.kind = kDirect;
    r = p.sock.sendAll(&signal, sizeof signal, deadline, abort, who);
  } else if (r == ncclSuccess && hostMemory && h.window && (int64_t)h.bytes > st->inlineBytes) {
    r = linkPut(comm, st, peer, p, h, data, deadline, abort, who);
  } else if (r == ncclSuccess) {
    if (h.bytes <= kSmallPut) {  // one segment: header and bytes together
      char msg[sizeof(RmaHeader) + kSmallPut];
      memcpy(msg, &h, sizeof h);
      if (h.bytes) memcpy(msg + sizeof h, data, h.bytes);
      r = p.sock.sendAll(msg, sizeof h + h.bytes, deadline, abort, who);
    } else {
      r = p.sock.sendAll(&h, sizeof h, deadline, abort, who);
      if (r == ncclSuccess) r = p.sock.sendAll(data, h.bytes, deadline, abort, who);
    }
    if (r == ncclSuccess) st->socketBytes += h.bytes;
  }
  if (r != ncclSuccess) p.sock.close();  // a partial operation leaves the stream unusable
  return r;
}

// Per descriptor of a wait: the count to reach, and the two counters that add up to it: the service's (a map node,
// which stays where it is while others are added) and the board's. Both are read without the lock, with acquire:
// each counter's increment follows its data.
struct Watch {
  uint64_t need;
  const uint64_t* service;
  const uint64_t* board;
};

uint64_t countOf(const Watch& w) {
  return __atomic_load_n(w.service, __ATOMIC_ACQUIRE) + (w.board ? __atomic_load_n(w.board, __ATOMIC_ACQUIRE) : 0);
}

// The watches of descs, each needing opCnt more than taken[its key] (the counts earlier waits took). Called with
// sigMutex held.
std::vector<Watch> watchesOf(ncclComm* comm, RmaState* st, const std::vector<ncclWaitSignalDesc_t>& descs,
                             std::map<SignalKey, uint64_t>& taken) {
  std::vector<Watch> watches;
  for (const ncclWaitSignalDesc_t& d : descs) {
    const SignalKey k{d.peer, d.ctx, d.sigIdx};
    const bool onBoard = st->board && d.sigIdx < kBoardSigs && d.ctx < comm->options.numRmaCtx;
    watches.push_back(Watch{taken[k] + (uint64_t)d.opCnt, &st->arrived[k],
                            onBoard ? &st->board[boardSlot(d.peer, d.ctx, d.sigIdx, comm->options.numRmaCtx)]
                                    : nullptr});
  }
  return watches;
}

ncclResult_t waitSignals(ncclComm* comm, const std::vector<ncclWaitSignalDesc_t>& descs) {
  RmaState* st = stateOf(comm);
  std::vector<Watch> watches;
  {
    std::lock_guard<std::mutex> lock(st->sigMutex);
    watches = watchesOf(comm, st, descs, st->consumed);
  }
  const uint64_t timeoutNs = comm->devComm.timeoutNs;
  const uint64_t start = dev::clockNs();
  const uint32_t spin = comm->devComm.spinPolls;
  for (uint64_t polls = 0;; polls++) {
    size_t shortOf = watches.size();
    for (size_t i = 0; i < watches.size() && shortOf == watches.size(); i++)
      if (countOf(watches[i]) < watches[i].need) shortOf = i;
    if (shortOf == watches.size()) break;
    if ((polls & 255) == 255) {  // now and then: errors, abort, time
      {
        std::lock_guard<std::mutex> lock(st->sigMutex);
        if (!st->error.empty())
          return setError(comm, ncclRemoteError, "ncclWaitSignal: rank %d: %s", comm->rank, st->error.c_str());
      }
      if (__atomic_load_n(&comm->abortFlag, __ATOMIC_ACQUIRE))
        return setError(comm, ncclInvalidUsage, "ncclWaitSignal: rank %d: the communicator was aborted", comm->rank);
      const double waited = (double)(dev::clockNs() - start) / 1e9;
      if (timeoutNs && waited * 1e9 > (double)timeoutNs) {
        const ncclWaitSignalDesc_t& d = descs[shortOf];
        const uint64_t had = watches[shortOf].need - (uint64_t)d.opCnt;
        return setError(comm, ncclTimeout,
                        "ncclWaitSignal: rank %d waited %.1f s for %d signal(s) from rank %d (sigIdx %d, ctx %d) and "
                        "got %llu: the peer never put or signalled them, or died; check its ncclPutSignal/ncclSignal "
                        "calls", comm->rank, waited, d.opCnt, d.peer, d.sigIdx, d.ctx,
                        (unsigned long long)(countOf(watches[shortOf]) - had));
      }
    }
    // Signals come without a wake-up (the board is plain memory): poll as every wait of the communicator does.
    dev::backoff((uint32_t)std::min<uint64_t>(polls, UINT32_MAX), spin);
  }
  std::lock_guard<std::mutex> lock(st->sigMutex);
  for (const ncclWaitSignalDesc_t& d : descs) st->consumed[SignalKey{d.peer, d.ctx, d.sigIdx}] += (uint64_t)d.opCnt;
  return ncclSuccess;
}

}  // namespace

// ---- The CUDA backend ----------------------------------------------------------------------------------------------
// Windows and a put's source are device memory, which the host's paths cannot touch. A put's stream copies the bytes
// into pinned host memory and records an event; the communicator's one-sided thread (cudaLoop) sends them once the
// event is done, with the header on the peer's socket, and the peer's service copies them into its window before it
// counts the signal. A wait's stream waits (cuStreamWaitValue64) on a word of host-mapped memory, one per stream,
// which the thread raises once the signals have come: the GPU never polls the network, and a signal that never comes
// ends the wait after the communicator's timeout with ncclTimeout on the communicator (ncclCommGetAsyncError), not a
// stream stuck for ever.
struct CudaRma {
  struct Item {
    bool wait = false;
    int peer = -1;
    RmaHeader h{};
    DeviceMem staging;      // a put's bytes, in pinned host memory
    void* event = nullptr;  // done once the stream has reached the item
    std::vector<ncclWaitSignalDesc_t> descs;  // a wait's
    size_t slot = 0;        // its stream's word
    uint64_t gen = 0;       // the word's value that lets the stream go on
    std::vector<Watch> watches;  // made once the stream has reached the wait
    uint64_t startNs = 0;
  };
  static constexpr size_t kStreams = 256;  // the streams one communicator's waits may use
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Item> items;  // in call order
  std::vector<DeviceMem> spare;  // staging buffers to use again
  std::vector<DeviceMem> retired;  // staging a failed call's copy may still write: freed with the communicator
  DeviceMem words;  // HostMapped, kStreams words
  std::map<cudaStream_t, size_t> slotOf;
  uint64_t gens[kStreams] = {};  // per slot: the last value handed out
  std::map<SignalKey, uint64_t> claimed;  // the counts waits took once their streams reached them (under sigMutex)
  bool stop = false;
  std::thread thread;
};

namespace {

// Lets the stream of wait x go on. The release orders the counts (and the window copies before them) before the
// stream's next work.
void releaseWait(CudaRma* c, const CudaRma::Item& x) {
  __atomic_store_n((uint64_t*)c->words.host + x.slot, x.gen, __ATOMIC_RELEASE);
}

// The first failure of the one-sided thread becomes the communicator's, as a kernel's would.
void cudaFail(ncclComm* comm, ncclResult_t r) {
  ncclResult_t none = ncclSuccess;
  comm->asyncError.compare_exchange_strong(none, r);
  WARN("one-sided: rank %d: %s", comm->rank, lastError(comm));
}

// Whether a wait the stream has reached may let the stream go on; false while it must wait more. A failure
// (a dropped put, an abort, the timeout) lets it go on too, with the communicator's error set.
bool waitDone(ncclComm* comm, RmaState* st, CudaRma::Item& x) {
  bool short_ = false;
  size_t shortOf = 0;
  for (size_t i = 0; i < x.watches.size() && !short_; i++)
    if (countOf(x.watches[i]) < x.watches[i].need) {
      short_ = true;
      shortOf = i;
    }
  if (!short_) return true;
  {
    std::lock_guard<std::mutex> lock(st->sigMutex);
    if (!st->error.empty()) {
      cudaFail(comm, setError(comm, ncclRemoteError, "ncclWaitSignal: rank %d: %s", comm->rank, st->error.c_str()));
      return true;
    }
  }
  if (__atomic_load_n(&comm->abortFlag, __ATOMIC_ACQUIRE)) {
    cudaFail(comm, setError(comm, ncclInvalidUsage, "ncclWaitSignal: rank %d: the communicator was aborted",
                            comm->rank));
    return true;
  }
  const uint64_t timeoutNs = comm->devComm.timeoutNs;
  const uint64_t waited = dev::clockNs() - x.startNs;
  if (!timeoutNs || waited <= timeoutNs) return false;
  const ncclWaitSignalDesc_t& d = x.descs[shortOf];
  const uint64_t had = x.watches[shortOf].need - (uint64_t)d.opCnt;
  cudaFail(comm, setError(comm, ncclTimeout,
                          "ncclWaitSignal: rank %d waited %.1f s for %d signal(s) from rank %d (sigIdx %d, ctx %d) and "
                          "got %llu: the peer never put or signalled them, or died; the stream went on, and the "
                          "communicator must be aborted", comm->rank, (double)waited / 1e9, d.opCnt, d.peer, d.sigIdx,
                          d.ctx, (unsigned long long)(countOf(x.watches[shortOf]) - had)));
  return true;
}

// The communicator's one-sided thread: sends each put once its stream has staged the bytes, and lets each wait's
// stream go on once its signals have come. Items of one stream are reached in their order, so taking them in call
// order, and passing over those their streams have not reached, keeps every stream's order.
void cudaLoop(ncclComm* comm, RmaState* st, CudaRma* c) {
  debugSetThreadRank(comm->rank);
  const DeviceGuard device(comm);
  DeviceRuntime* rt = comm->runtime;
  uint32_t idle = 0;
  std::unique_lock<std::mutex> lock(c->mu);
  while (!c->stop) {
    if (c->items.empty()) {
      c->cv.wait_for(lock, std::chrono::milliseconds(100));  // new items notify; the bound re-checks stop
      idle = 0;
      continue;
    }
    bool moved = false;
    for (size_t i = 0; i < c->items.size() && !c->stop;) {
      CudaRma::Item& x = c->items[i];
      if (!x.wait || !x.startNs) {
        const ncclResult_t q = rt->eventQuery(x.event);
        if (q == ncclInProgress) {
          i++;
          continue;
        }
        if (q != ncclSuccess) {  // the stream failed before the item: it is dropped (a wait lets the stream go on)
          cudaFail(comm, setError(comm, ncclUnhandledCudaError, "%s: rank %d: the stream failed before it: %s",
                                  x.wait ? "ncclWaitSignal" : "ncclPutSignal", comm->rank, rt->lastError().c_str()));
          if (x.wait) releaseWait(c, x);
          if (x.staging.host) c->spare.push_back(x.staging);
          rt->eventDestroy(x.event);
          c->items.erase(c->items.begin() + (long)i);
          moved = true;
          continue;
        }
        if (x.wait) {  // the stream has reached it: the counts it needs are the next ones of each signal
          std::lock_guard<std::mutex> sig(st->sigMutex);
          x.watches = watchesOf(comm, st, x.descs, c->claimed);
          for (const ncclWaitSignalDesc_t& d : x.descs) c->claimed[SignalKey{d.peer, d.ctx, d.sigIdx}] += d.opCnt;
          x.startNs = dev::clockNs();
        }
      }
      if (x.wait) {
        if (!waitDone(comm, st, x)) {
          i++;
          continue;
        }
        releaseWait(c, x);
        rt->eventDestroy(x.event);
        c->items.erase(c->items.begin() + (long)i);
        moved = true;
        continue;
      }
      // A put (or a signal alone) whose bytes are staged: sent without the lock (the socket may block).
      CudaRma::Item put = std::move(x);
      c->items.erase(c->items.begin() + (long)i);
      lock.unlock();
      const ncclResult_t r = rmaSend(comm, put.peer, put.h, put.staging.host);
      if (r != ncclSuccess) cudaFail(comm, r);
      rt->eventDestroy(put.event);
      lock.lock();
      if (put.staging.host) c->spare.push_back(put.staging);
      moved = true;
    }
    if (moved) {
      idle = 0;
    } else {
      lock.unlock();
      dev::backoff(idle < UINT32_MAX ? idle++ : idle, comm->devComm.spinPolls);
      lock.lock();
    }
  }
}

// The CUDA part of the communicator's one-sided state, made (memory, thread) on its first use.
ncclResult_t cudaRmaOf(ncclComm* comm, CudaRma** out) {
  RmaState* st = comm->rma;
  std::call_once(st->cudaStarted, [comm, st] {
    auto* c = new CudaRma();
    const DeviceGuard device(comm);
    if (device.result() != ncclSuccess ||
        comm->runtime->alloc(MemKind::HostMapped, CudaRma::kStreams * sizeof(uint64_t), &c->words) != ncclSuccess) {
      st->cudaStartResult = ncclUnhandledCudaError;
      st->cudaStartError = device.result() != ncclSuccess ? lastError(comm) : comm->runtime->lastError();
      delete c;
      return;
    }
    c->thread = std::thread(cudaLoop, comm, st, c);
    st->cuda = c;
  });
  if (!st->cuda)
    return setError(comm, st->cudaStartResult, "rank %d: one-sided calls cannot start on the CUDA backend: %s",
                    comm->rank, st->cudaStartError.c_str());
  *out = st->cuda;
  return ncclSuccess;
}

// Puts item on stream: a put's bytes copied from src into staging, an event, a wait's cuStreamWaitValue64; then
// hands it to the one-sided thread.
ncclResult_t cudaEnqueue(ncclComm* comm, const char* api, cudaStream_t stream, CudaRma::Item item, const void* src) {
  CudaRma* c = nullptr;
  NCCLCHECK(cudaRmaOf(comm, &c));
  const DeviceGuard device(comm);
  NCCLCHECK(device.result());
  DeviceRuntime* rt = comm->runtime;
  bool copying = false;  // the stream may still write the staging buffer
  auto failed = [&](const char* what) {
    const std::string why = rt->lastError();
    if (item.staging.host) {
      std::lock_guard<std::mutex> lock(c->mu);
      (copying ? c->retired : c->spare).push_back(item.staging);
    }
    if (item.event) rt->eventDestroy(item.event);
    return setError(comm, ncclUnhandledCudaError, "%s: rank %d: %s failed: %s", api, comm->rank, what, why.c_str());
  };
  const size_t bytes = item.h.bytes;
  if (bytes) {
    {
      std::lock_guard<std::mutex> lock(c->mu);
      for (size_t i = 0; i < c->spare.size(); i++)
        if (c->spare[i].size >= bytes) {
          item.staging = c->spare[i];
          c->spare.erase(c->spare.begin() + (long)i);
          break;
        }
    }
    // Sizes in powers of two from 64 KiB, so that buffers serve the puts after them.
    size_t size = 64 << 10;
    while (size < bytes) size *= 2;
    if (!item.staging.host && rt->alloc(MemKind::HostPinned, size, &item.staging) != ncclSuccess)
      return failed("allocating pinned memory for the put's bytes");
    if (rt->copyAsync(item.staging.ptr, src, bytes, stream) != ncclSuccess) return failed("the copy to pinned memory");
    copying = true;
  }
  if (rt->eventCreate(&item.event) != ncclSuccess || rt->eventRecord(item.event, stream) != ncclSuccess)
    return failed("an event behind it");
  if (item.wait) {
    {
      std::lock_guard<std::mutex> lock(c->mu);
      auto it = c->slotOf.find(stream);
      if (it == c->slotOf.end()) {
        if (c->slotOf.size() == CudaRma::kStreams) {
          rt->eventDestroy(item.event);
          return setError(comm, ncclInvalidUsage, "%s: rank %d: waits on more than %zu streams of one communicator; "
                          "use fewer streams for ncclWaitSignal", api, comm->rank, CudaRma::kStreams);
        }
        it = c->slotOf.emplace(stream, c->slotOf.size()).first;
      }
      item.slot = it->second;
      item.gen = ++c->gens[item.slot];
    }
    if (rt->streamWaitValue(stream, (char*)c->words.ptr + item.slot * sizeof(uint64_t), item.gen) != ncclSuccess)
      return failed("cuStreamWaitValue64 on the stream");
  }
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->items.push_back(std::move(item));
  }
  c->cv.notify_one();
  return ncclSuccess;
}

// On the stream at once, or at ncclGroupEnd inside a group.
ncclResult_t submitCuda(ncclComm* comm, const char* api, cudaStream_t stream, CudaRma::Item item, const void* src) {
  if (groupDepth() > 0) {
    groupAddDeferred([comm, api, stream, item = std::move(item), src]() mutable {
      return cudaEnqueue(comm, api, stream, std::move(item), src);
    });
    return ncclSuccess;
  }
  return cudaEnqueue(comm, api, stream, std::move(item), src);
}

// Stops the one-sided thread. Waits it never let go are let go now (a stream must not stay stuck on a freed
// communicator); their words stay allocated, since a stream may still read them.
void cudaRmaFree(ncclComm* comm, RmaState* st) {
  CudaRma* c = st->cuda;
  if (!c) return;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->stop = true;
  }
  c->cv.notify_all();
  c->thread.join();
  const DeviceGuard device(comm);
  DeviceRuntime* rt = comm->runtime;
  bool waiting = false;
  for (CudaRma::Item& x : c->items) {
    if (x.wait) {
      releaseWait(c, x);
      waiting = true;
    }
    if (x.staging.host) c->spare.push_back(x.staging);
    rt->eventDestroy(x.event);
  }
  if (!c->items.empty())
    WARN("one-sided: rank %d: the communicator was freed with %zu one-sided operation(s) its streams had not reached",
         comm->rank, c->items.size());
  for (DeviceMem& m : c->spare) rt->free(&m);
  for (DeviceMem& m : c->retired) rt->free(&m);
  if (!waiting) rt->free(&c->words);
  delete c;
  st->cuda = nullptr;
}

// Checks shared by the three calls; *stream gets the host stream (nullptr on the CUDA backend).
ncclResult_t checkOneSided(ncclComm* comm, const char* api, cudaStream_t stream, HostStream** out) {
  NCCLCHECK(checkComm(comm, api));
  *out = nullptr;
  if (comm->revoked.load() || comm->suspended.load())
    return setError(comm, ncclInvalidUsage, "%s: the communicator is %s", api,
                    comm->revoked.load() ? "revoked" : "suspended (ncclCommResume first)");
  const ncclResult_t async = comm->asyncError.load();
  if (async != ncclSuccess)
    return setError(comm, ncclInvalidUsage, "%s: the communicator has failed earlier (%s: %s); abort it", api,
                    ncclGetErrorString(async), lastError(comm));
  if (comm->backend == plexusBackendCuda) {
    const DeviceGuard device(comm);
    NCCLCHECK(device.result());
    bool capturing = false;
    void* graph = nullptr;
    if (comm->runtime->captureStatus(stream, &capturing, &graph) != ncclSuccess)
      return setError(comm, ncclUnhandledCudaError, "%s: rank %d: cannot ask the stream's capture status: %s", api,
                      comm->rank, comm->runtime->lastError().c_str());
    if (capturing)
      return setError(comm, ncclInvalidUsage, "%s: the stream is capturing a CUDA graph; one-sided calls cannot be "
                      "captured yet (call them outside the capture)", api);
    rmaStart(comm);
    return ncclSuccess;
  }
  *out = hostStreamOf(stream, comm->device);
  if (!*out)
    return setError(comm, ncclInvalidArgument,
                    "%s: stream %p is not a Plexus host stream; create streams with plexusStreamCreate (or pass NULL "
                    "for the default stream)", api, (void*)stream);
  rmaStart(comm);
  return ncclSuccess;
}

ncclResult_t checkSignal(ncclComm* comm, const char* api, int peer, int sigIdx, int ctx) {
  if (peer < 0 || peer >= comm->nRanks)
    return setError(comm, ncclInvalidArgument, "%s: peer %d is out of range [0, %d)", api, peer, comm->nRanks);
  if (sigIdx < 0 || sigIdx >= kMaxSigIdx)
    return setError(comm, ncclInvalidArgument, "%s: sigIdx %d is out of range [0, %d)", api, sigIdx, kMaxSigIdx);
  if (ctx < 0 || ctx >= comm->options.numRmaCtx)
    return setError(comm, ncclInvalidArgument,
                    "%s: ctx %d is out of range [0, %d) (the communicator's config.numRmaCtx)", api, ctx,
                    comm->options.numRmaCtx);
  return ncclSuccess;
}

// On the stream at once, or at ncclGroupEnd inside a group.
ncclResult_t submit(HostStream* stream, std::function<ncclResult_t()> op) {
  if (groupDepth() > 0) {  // in call order at ncclGroupEnd: one stream's operations must keep theirs
    groupAddDeferred([stream, op = std::move(op)] {
      stream->enqueue(op);
      return ncclSuccess;
    });
    return ncclSuccess;
  }
  stream->enqueue(std::move(op));
  return ncclSuccess;
}

}  // namespace

ncclResult_t rmaInit(ncclComm* comm, SocketAddress* addr) {
  auto* st = new RmaState();
  comm->rma = st;
  st->bootstrapSeconds = bootstrapTimeout();
  st->inlineBytes = std::max<int64_t>(0, envInt("RMA_INLINE_BYTES", kInlineDefault));
  *addr = comm->bootstrap->address();  // the bootstrap's interface, chosen once
  setAddressPort(addr, 0);
  NCCLCHECK(st->listen.listen(*addr));
  *addr = st->listen.addr();
  return ncclSuccess;
}

void rmaSetPeers(ncclComm* comm, const SocketAddress* addrs) {
  RmaState* st = stateOf(comm);
  st->peers.assign(addrs, addrs + comm->nRanks);
  st->out.clear();
  st->linkPeers.assign((size_t)comm->nRanks, plexusDevChannelPeer_v1_t{});
  st->linkProxied.assign((size_t)comm->nRanks * 2, 0);
  st->linkChannels.assign((size_t)comm->nRanks * 2, plexusDevChannel_v1_t{});
  for (plexusDevChannel_v1_t& ch : st->linkChannels) {
    ch.peers = st->linkPeers.data();
    ch.id = linkChannel(comm);
    ch.waitPeer = -1;
  }
  for (int r = 0; r < comm->nRanks; r++) {
    st->out.push_back(std::make_unique<OutPeer>());
    st->out.back()->who = "rank " + std::to_string(r) + "'s one-sided endpoint";
  }
}

void rmaStart(ncclComm* comm) {
  RmaState* st = stateOf(comm);
  if (!st) return;
  std::call_once(st->started, [comm, st] {
    // The board first: the service hands it out. Without one, every signal goes through the service.
    const size_t bytes = (size_t)comm->nRanks * comm->options.numRmaCtx * kBoardSigs * sizeof(uint64_t);
    if (sharedMemCreate(bytes, "rma-signals", &st->boardMem) == ncclSuccess)
      st->board = (uint64_t*)st->boardMem.base;
    else
      INFO(NCCL_NET, "one-sided: rank %d has no signal board (%s); signals go through its service", comm->rank,
           lastError(nullptr));
    st->service = std::thread(serviceLoop, comm, st);
  });
}

ncclResult_t rmaSuspendLinks(ncclComm* comm, double seconds) {
  RmaState* st = stateOf(comm);
  if (!st) return ncclSuccess;
  std::unique_lock<std::mutex> lock(st->linksMutex);
  if (!st->linksChanged.wait_for(lock, std::chrono::duration<double>(seconds), [st] { return st->linkUses == 0; }))
    return setError(comm, ncclInvalidUsage,
                    "ncclCommSuspend: rank %d: a one-sided put through a connector was still moving after %.0f s; "
                    "suspend when the puts to and from this rank are complete (ncclWaitSignal, stream synchronized)",
                    comm->rank, seconds);
  st->linksSuspended = true;
  return ncclSuccess;
}

void rmaResumeLinks(ncclComm* comm) {
  RmaState* st = stateOf(comm);
  if (!st) return;
  std::lock_guard<std::mutex> lock(st->linksMutex);
  st->linksSuspended = false;
  st->linksChanged.notify_all();
}

void rmaForEachLink(ncclComm* comm, const std::function<void(const Connection&, plexusDevConnector_v1_t&)>& f) {
  RmaState* st = stateOf(comm);
  if (!st) return;
  std::lock_guard<std::mutex> lock(st->linksMutex);
  // A direction made again after a failed put has its old connection here too: the latest one is the connector's.
  std::vector<char> seen((size_t)comm->nRanks * 2, 0);
  for (size_t i = st->links.size(); i-- > 0;) {
    const Connection& c = st->links[i];
    if (std::exchange(seen[(size_t)c.peer * 2 + c.isSend], 1)) continue;
    plexusDevChannelPeer_v1_t& peer = st->linkPeers[(size_t)c.peer];
    plexusDevConnector_v1_t& connector = c.isSend ? peer.send : peer.recv;
    if (connector.connected) f(c, connector);
  }
}

bool rmaFree(ncclComm* comm) {
  RmaState* st = stateOf(comm);
  if (!st) return true;
  cudaRmaFree(comm, st);  // its sends end within the timeout (the service still answers meanwhile)
  __atomic_store_n(&st->stopFlag, 1, __ATOMIC_RELEASE);
  if (st->service.joinable()) st->service.join();
  const bool released = transportFree(comm, st->links);
  if (st->board) sharedMemDestroy(st->boardMem);
  delete st;
  comm->rma = nullptr;
  return released;
}

}  // namespace plexus

using namespace plexus;

// Writes count elements of localbuff into peer's window (the one registered in the same order as peerWin here) at
// peerWinOffset bytes, then raises peer's signal (sigIdx, ctx) from this rank. Stream-ordered; complete (localbuff
// reusable) once handed to the connection.
NCCL_API(ncclResult_t, ncclPutSignal, const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
         cudaStream_t stream);
ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                           ncclComm_t comm, cudaStream_t stream) {
  const char* api = "ncclPutSignal";
  HostStream* hs = nullptr;
  NCCLCHECK(checkOneSided(comm, api, stream, &hs));
  NCCLCHECK(checkSignal(comm, api, peer, sigIdx, ctx));
  if (flags != 0) return setError(comm, ncclInvalidArgument, "%s: flags 0x%x: none are defined; pass 0", api, flags);
  if ((int)datatype < 0 || (int)datatype >= ncclNumTypes)
    return setError(comm, ncclInvalidArgument, "%s: invalid datatype %d (valid: 0..%d)", api, (int)datatype,
                    ncclNumTypes - 1);
  const size_t elem = typeSize(datatype);
  if (count > SIZE_MAX / elem)
    return setError(comm, ncclInvalidArgument, "%s: count %zu overflows the address space", api, count);
  const size_t bytes = count * elem;
  if (bytes && !localbuff) return setError(comm, ncclInvalidArgument, "%s: localbuff is NULL", api);
  WindowView win;
  if (!windowOf(comm, peerWin, &win))
    return setError(comm, ncclInvalidArgument,
                    "%s: peerWin %p is not a window of this communicator (ncclCommWindowRegister on every rank, in "
                    "the same order)", api, (void*)peerWin);
  // Windows of one registration are alike on every rank (NCCL's windows are collective): a put beyond this rank's
  // window is beyond the peer's too. The peer checks again against its own.
  if (peerWinOffset > win.size || bytes > win.size - peerWinOffset)
    return setError(comm, ncclInvalidArgument, "%s: %zu bytes at offset %zu do not fit the %zu-byte window", api,
                    bytes, peerWinOffset, win.size);
  const RmaHeader h{kRmaMagic, sigIdx, ctx, kPut, win.index + 1, peerWinOffset, bytes};
  if (!hs) {
    if (bytes) NCCLCHECK(checkPointer(comm, api, "localbuff", localbuff));
    CudaRma::Item item;
    item.peer = peer;
    item.h = h;
    return submitCuda(comm, api, stream, std::move(item), localbuff);
  }
  return submit(hs, [comm, peer, h, localbuff] { return rmaSend(comm, peer, h, localbuff); });
}

NCCL_API(ncclResult_t, ncclSignal, int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
         cudaStream_t stream);
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  const char* api = "ncclSignal";
  HostStream* hs = nullptr;
  NCCLCHECK(checkOneSided(comm, api, stream, &hs));
  NCCLCHECK(checkSignal(comm, api, peer, sigIdx, ctx));
  if (flags != 0) return setError(comm, ncclInvalidArgument, "%s: flags 0x%x: none are defined; pass 0", api, flags);
  const RmaHeader h{kRmaMagic, sigIdx, ctx, kPut, 0, 0, 0};
  if (!hs) {
    CudaRma::Item item;
    item.peer = peer;
    item.h = h;
    return submitCuda(comm, api, stream, std::move(item), nullptr);
  }
  return submit(hs, [comm, peer, h] { return rmaSend(comm, peer, h, nullptr); });
}

// Waits, on the stream, until each descriptor's peer has raised its signal opCnt more times than earlier waits
// consumed; then consumes them. Fails after the communicator's timeout (plexusCommSetTimeout / NCCL_TIMEOUT).
NCCL_API(ncclResult_t, ncclWaitSignal, int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
         cudaStream_t stream);
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream) {
  const char* api = "ncclWaitSignal";
  HostStream* hs = nullptr;
  NCCLCHECK(checkOneSided(comm, api, stream, &hs));
  if (nDesc < 0) return setError(comm, ncclInvalidArgument, "%s: nDesc %d is negative", api, nDesc);
  if (nDesc > 0 && !signalDescs) return setError(comm, ncclInvalidArgument, "%s: signalDescs is NULL", api);
  std::vector<ncclWaitSignalDesc_t> descs(signalDescs, signalDescs + nDesc);
  for (int i = 0; i < nDesc; i++) {
    NCCLCHECK(checkSignal(comm, api, descs[i].peer, descs[i].sigIdx, descs[i].ctx));
    if (descs[i].opCnt < 0)
      return setError(comm, ncclInvalidArgument, "%s: signalDescs[%d].opCnt %d is negative", api, i, descs[i].opCnt);
  }
  if (!hs) {
    CudaRma::Item item;
    item.wait = true;
    item.descs = std::move(descs);
    return submitCuda(comm, api, stream, std::move(item), nullptr);
  }
  return submit(hs, [comm, descs = std::move(descs)] { return waitSignals(comm, descs); });
}

extern "C" __attribute__((visibility("default"))) ncclResult_t plexusCommGetRmaStats(ncclComm_t comm,
                                                                                      uint64_t* directBytes,
                                                                                      uint64_t* socketBytes,
                                                                                      uint64_t* transportBytes) {
  NCCLCHECK(checkComm(comm, "plexusCommGetRmaStats"));
  RmaState* st = comm->rma;
  if (directBytes) *directBytes = st ? st->directBytes.load() : 0;
  if (socketBytes) *socketBytes = st ? st->socketBytes.load() : 0;
  if (transportBytes) *transportBytes = st ? st->transportBytes.load() : 0;
  return ncclSuccess;
}
