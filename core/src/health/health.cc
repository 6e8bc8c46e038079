#include "health/health.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <plexus/device/arch.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bootstrap/socket.h"
#include "comm/communicator.h"
#include "executor/host_executor.h"
#include "misc/check.h"
#include "misc/env.h"
#include "planner/planner.h"

namespace plexus {

namespace {

constexpr uint64_t kFaultMagic = 0x31304c46584c50ull;  // "PLXFL01"
constexpr uint64_t kQueryMagic = 0x31305146584c50ull;  // "PLXFQ01"
constexpr double kFaultSendSeconds = 0.5;
constexpr uint64_t kProbeAfterNs = 1000000000ull;
constexpr int kGraceTicks = 2;

// What a rank that saw a failure sends to the fault port of every process of the communicator (kFaultMagic). A rank
// that has waited long on a peer asks the peer's process whether the peer's communicator failed (kQueryMagic,
// reporter: the asking rank, lost: the peer, no why): one notice can be missed, and a failed rank stays failed. The
// peer answers a failure with a notice on the same connection and closes it.
struct FaultMessage {
  uint64_t magic;
  uint64_t commHash;
  int32_t reporter;
  int32_t lost;  // -1: not one rank
  char why[496];
};
static_assert(sizeof(FaultMessage) == 520, "FaultMessage is a fixed-size wire record");

// The start time of process pid, or 0 when it is gone (a zombie counts as gone: its memory is).
uint64_t processStartTime(int pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char* p = strrchr(buf, ')');  // the command name may hold spaces and parentheses
  if (!p || p[1] != ' ') return 0;
  p += 2;
  if (*p == 'Z' || *p == 'X' || *p == 'x') return 0;
  // starttime is field 22; p is at field 3.
  for (int field = 3; field < 22; field++) {
    p = strchr(p, ' ');
    if (!p) return 0;
    p++;
  }
  return strtoull(p, nullptr, 10);
}

uint64_t pidNamespace() {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

// Connects to a process's fault port, waiting up to timeoutMs: the connected descriptor, or -1. A refused connection
// (*refused) means the process is gone (its host answers for it); -1 alone is unknown (a slow or unreachable host:
// counted as alive).
int connectFaultPort(const SocketAddress& addr, int timeoutMs, bool* refused) {
  *refused = false;
  int fd = socket(addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int err = 0;
  if (connect(fd, &addr.sa, addressLength(addr)) < 0) {
    err = errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      socklen_t len = sizeof err;
      if (poll(&p, 1, timeoutMs) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = ETIMEDOUT;
    }
  }
  if (err == 0) return fd;
  *refused = err == ECONNREFUSED;
  close(fd);
  return -1;
}

// The notice of comm's failure: why, or else the message the communicator failed with.
FaultMessage faultNotice(ncclComm* comm, int lost, const char* why) {
  FaultMessage m{};
  m.magic = kFaultMagic;
  m.commHash = comm->commHash;
  m.reporter = comm->rank;
  m.lost = lost;
  std::string failed;
  if (!why) {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    failed = comm->lastError;
    why = failed.c_str();
  }
  memcpy(m.why, why, std::min(strlen(why), sizeof m.why - 1));  // cut to fit
  return m;
}

int signalPipe[2] = {-1, -1};

void onReportSignal(int) {
  const int saved = errno;
  if (signalPipe[1] >= 0) (void)!write(signalPipe[1], "r", 1);
  errno = saved;
}

std::string logPrefix(int rank) {
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  return std::string(host) + ":" + std::to_string(getpid()) + " [" + std::to_string(rank) + "] PLEXUS ";
}

void printReport(const std::string& report, int rank, const char* why) {
  // Printed whatever NCCL_DEBUG says: the user asked for it (signal) or the job just failed (timeout).
  std::string out = logPrefix(rank) + "HANG REPORT (" + why + ")\n" + report;
  fwrite(out.data(), 1, out.size(), stderr);
  fflush(stderr);
  INFO(NCCL_RAS, "hang report (%s):\n%s", why, report.c_str());
}

class Watchdog {
 public:
  // Never destroyed: communicators may outlive static destructors. A child of fork() starts afresh,
  // with a thread and a fault port of its own (the parent's thread did not come along).
  static Watchdog& get() {
    static std::mutex made;
    static const int registered = pthread_atfork(nullptr, nullptr, [] {
      if (Watchdog* w = instance.load()) w->listen_.close();  // the parent's port stays the parent's
      instance = nullptr;
    });
    (void)registered;
    Watchdog* w = instance.load(std::memory_order_acquire);
    if (w) return *w;
    std::lock_guard<std::mutex> lock(made);
    if (!instance.load()) instance.store(new Watchdog(), std::memory_order_release);
    return *instance.load();
  }

  const SocketAddress& faultAddr() const { return faultAddr_; }

  void add(ncclComm* comm) {
    std::lock_guard<std::mutex> lock(mu_);
    comms_.push_back(comm);
  }
  void remove(ncclComm* comm) {
    std::lock_guard<std::mutex> lock(mu_);  // held by the watchdog while it looks at comms_
    comms_.erase(std::remove(comms_.begin(), comms_.end(), comm), comms_.end());
  }

 private:
  struct Pending {
    Socket sock;
    Deadline deadline;
    FaultMessage msg;
    size_t got = 0;
  };

  Watchdog() {
    intervalMs_ = (int)std::clamp<int64_t>(envInt("WATCHDOG_MS", 100), 10, 10000);
    SocketAddress addr{};
    std::string ifName;
    if (findInterface(&addr, &ifName) == ncclSuccess && listen_.listen(addr) == ncclSuccess)
      faultAddr_ = listen_.addr();
    else
      INFO(NCCL_RAS, "no fault port: failures seen by other ranks reach this process only through its connections");
    if (pipe2(signalPipe, O_CLOEXEC | O_NONBLOCK) == 0 && envInt("REPORT_SIGNAL", 1) != 0) {
      // Only where the application left SIGUSR1 alone: its default would kill the process.
      struct sigaction old {};
      sigaction(SIGUSR1, nullptr, &old);
      if (old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO)) {
        struct sigaction sa {};
        sa.sa_handler = onReportSignal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGUSR1, &sa, nullptr);
      }
    }
    std::thread([this] { loop(); }).detach();
  }

  void loop() {
    auto nextTick = std::chrono::steady_clock::now();
    for (;;) {
      std::vector<pollfd> pfds;
      pfds.push_back({signalPipe[0], POLLIN, 0});
      pfds.push_back({listen_.valid() ? listen_.fd() : -1, POLLIN, 0});
      for (Pending& p : pending_) pfds.push_back({p.sock.fd(), POLLIN, 0});
      const int waitMs = (int)std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(nextTick - std::chrono::steady_clock::now()).count());
      if (poll(pfds.data(), pfds.size(), waitMs) < 0 && errno != EINTR) {
        std::this_thread::sleep_for(std::chrono::milliseconds(intervalMs_));
        continue;
      }
      if (pfds[0].revents & POLLIN) {
        char drain[64];
        while (read(signalPipe[0], drain, sizeof drain) > 0) {
        }
        reportAll();
      }
      for (size_t i = 0; i < pending_.size(); i++)
        if (pfds[i + 2].revents) readFault(pending_[i]);
      if (pfds[1].revents & POLLIN) acceptFaults();
      for (Pending& p : pending_)
        if (p.sock.valid() && p.deadline.expired()) p.sock.close();  // silent or slow: dropped
      std::erase_if(pending_, [](const Pending& p) { return !p.sock.valid(); });
      if (std::chrono::steady_clock::now() >= nextTick) {
        checkWaits();
        nextTick = std::chrono::steady_clock::now() + std::chrono::milliseconds(intervalMs_);
      }
    }
  }

  // A CUDA channel whose kernel stopped with a timeout or an error: the communicator fails with it (and prints its
  // hang report on a timeout, as every rank that timed out does).
  static bool kernelStopped(ncclComm* comm) {
    for (int c = 0; c < comm->channels.count; c++) {
      const plexusDevChannel_v1_t& ch = comm->channels.live[c];
      const int status = dev::loadRelaxed(&ch.status);
      if (status != PLEXUS_CHANNEL_TIMEOUT && status != PLEXUS_CHANNEL_ERROR) continue;
      const int peer = dev::loadRelaxed(&ch.waitPeer);
      const bool send = dev::loadRelaxed(&ch.waitIsSend);
      if (status == PLEXUS_CHANNEL_TIMEOUT) {
        commFail(comm, ncclTimeout, false, -1,
                 "rank %d: a kernel timed out after %.1f s on channel %d waiting to %s %s. Every rank printed a hang "
                 "report: the rank that is not waiting on anyone, or that every chain of waits ends at, is the stuck "
                 "one. Raise PLEXUS_TIMEOUT (seconds; 0: wait forever) if it is only slow",
                 comm->rank, comm->devComm.timeoutNs / 1e9, c, send ? "send to" : "receive from",
                 describeRank(comm, peer).c_str());
        reportHangOnce(comm, "timeout");
      } else {
        commFail(comm, ncclInvalidUsage, false, -1,
                 "rank %d: a kernel stopped channel %d: its operation cannot run (a send and its receive differ in "
                 "size, a rank's sends to itself and receives from itself differ, or a peer has no connection)%s%s",
                 comm->rank, c, peer >= 0 ? "; with " : "", peer >= 0 ? describeRank(comm, peer).c_str() : "");
      }
      return true;
    }
    return false;
  }

  // A channel that waits on a rank whose process is gone will wait forever: fail its communicator. A process of this
  // machine is looked up by pid; one elsewhere is probed through its fault port once its wait has lasted
  // kProbeAfterNs (the network alone may never tell: UCX and libfabric over TCP can leave a receive posted to a dead
  // peer pending). A wait that long on a live peer also asks it whether its communicator failed: a rank that failed
  // waits on nobody, and its one notice of the failure may not have arrived.
  void checkWaits() {
    std::lock_guard<std::mutex> lock(mu_);
    std::unordered_map<int, uint64_t> started;  // pid -> start time, looked up once per pass
    const uint64_t now = dev::clockNs();
    for (ncclComm* comm : comms_) {
      // A failed or revoked communicator waits on nobody any more (stale wait fields aside).
      if (dev::loadRelaxed(&comm->abortFlag) || comm->state.load() != ncclComm::State::Ready || comm->revoked ||
          comm->asyncError.load() != ncclSuccess)
        continue;
      HealthState& h = *comm->health;
      // CUDA kernels stop a channel on their own (a timeout, an operation that cannot run) but return nothing to the
      // host: their channel's status, in host-mapped memory, says so here, as the host executor says it at once.
      if (comm->backend == plexusBackendCuda && kernelStopped(comm)) continue;
      for (int c = 0; c < comm->channels.count; c++) {
        const plexusDevChannel_v1_t& ch = comm->channels.live[c];
        const int peer = dev::loadRelaxed(&ch.waitPeer);
        if (peer < 0 || peer >= comm->nRanks) continue;
        const RankHealth& r = h.ranks[peer];
        const uint64_t since = dev::loadRelaxed(&ch.waitSince);
        bool gone = false;
        if (h.watchable[peer]) {
          auto it = started.find(r.pid);
          if (it == started.end()) it = started.emplace(r.pid, processStartTime(r.pid)).first;
          Suspect& sus = h.suspects[c];
          if (it->second != r.startTime) {
            // A peer that sent its last data and exited leaves waits that end on their own as soon as their
            // thread runs again (or the proxy receives what is in flight): fail only a wait that has
            // made no progress for kGraceTicks passes since the peer was seen gone.
            if (sus.peer != peer || sus.waitSince != since) {
              sus = Suspect{peer, since, 0};
              continue;
            }
            if (++sus.ticks < kGraceTicks) continue;
            gone = true;
          } else {
            sus = Suspect{};
          }
        }
        if (!gone) {
          if (addressPort(r.faultAddr) == 0 || !since || now - since < kProbeAfterNs ||
              now - h.lastProbe[peer] < kProbeAfterNs)
            continue;
          h.lastProbe[peer] = now;
          bool refused = false;
          const int fd = connectFaultPort(r.faultAddr, 200, &refused);
          if (fd >= 0) {
            ask(Socket(fd), comm, peer);
            continue;
          }
          // The pid says it of a process of this machine.
          if (!refused || h.watchable[peer]) continue;
        }
        const bool send = dev::loadRelaxed(&ch.waitIsSend);
        commFail(comm, ncclRemoteError, true, peer,
                 "rank %d: %s died: its process is gone (killed or exited) while channel %d waited to %s it. "
                 "The communicator cannot complete operations any more: ncclCommAbort it, or ncclCommShrink it "
                 "to the surviving ranks",
                 comm->rank, describeRank(comm, peer).c_str(), c, send ? "send to" : "receive from");
        break;
      }
    }
  }

  void acceptFaults() {
    for (int i = 0; i < 64; i++) {  // bounded: a flood of connections cannot keep the watchdog here
      Pending p{{}, Deadline::after(1.0), {}, 0};
      bool accepted = false;
      if (listen_.tryAccept(&p.sock, &accepted) != ncclSuccess || !accepted) return;
      if (pending_.size() >= 256) return;  // p closes: more pending fault reports than ranks could send
      pending_.push_back(std::move(p));
    }
  }

  void readFault(Pending& p) {
    ssize_t k = ::recv(p.sock.fd(), (char*)&p.msg + p.got, sizeof(p.msg) - p.got, MSG_DONTWAIT);
    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return p.sock.close();
    if (k < 0) return;
    p.got += (size_t)k;
    if (p.got >= sizeof(uint64_t) && p.msg.magic != kFaultMagic && p.msg.magic != kQueryMagic)
      return p.sock.close();  // not ours
    if (p.got < sizeof(p.msg)) return;
    FaultMessage m = p.msg;
    m.why[sizeof m.why - 1] = 0;
    std::lock_guard<std::mutex> lock(mu_);
    if (m.magic == kQueryMagic) {
      answer(p.sock, m);
    } else {
      INFO(NCCL_RAS, "fault notice from rank %d of commId 0x%llx: %s", m.reporter, (unsigned long long)m.commHash,
           m.why);
      for (ncclComm* comm : comms_)
        if (comm->commHash == m.commHash && m.reporter >= 0 && m.reporter < comm->nRanks && m.reporter != comm->rank)
          commFail(comm, ncclRemoteError, false, m.lost, "rank %d: %s reported a failure: %s", comm->rank,
                   describeRank(comm, m.reporter).c_str(), m.why);
    }
    p.sock.close();
  }

  // Asks the process of rank peer, on sock connected to its fault port, whether the peer's communicator failed; the
  // answer, if any, arrives as a notice on sock.
  void ask(Socket sock, const ncclComm* comm, int peer) {
    FaultMessage q{};
    q.magic = kQueryMagic;
    q.commHash = comm->commHash;
    q.reporter = comm->rank;
    q.lost = peer;
    // The record fits in an empty socket buffer: one send, or nothing.
    if (send(sock.fd(), &q, sizeof q, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof q) return;
    pending_.push_back(Pending{std::move(sock), Deadline::after(1.0), {}, 0});
  }

  // A failed communicator answers a query about its rank with the notice of its failure. A timeout is not
  // answered: every waiting rank times out on its own, with its own hang report.
  void answer(const Socket& sock, const FaultMessage& q) {
    for (ncclComm* comm : comms_) {
      const ncclResult_t failed = comm->asyncError.load();
      if (comm->commHash != q.commHash || comm->rank != q.lost || failed == ncclSuccess || failed == ncclTimeout)
        continue;
      FaultMessage m = faultNotice(comm, comm->health ? comm->health->lostRank.load() : -1, nullptr);
      INFO(NCCL_RAS, "rank %d: rank %d asked whether this rank failed; told it: %s", comm->rank, q.reporter, m.why);
      (void)!send(sock.fd(), &m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT);
      return;
    }
  }

  void reportAll() {
    std::lock_guard<std::mutex> lock(mu_);
    for (ncclComm* comm : comms_) printReport(hangReport(comm), comm->rank, "SIGUSR1");
  }

  static inline std::atomic<Watchdog*> instance{nullptr};
  std::mutex mu_;
  std::vector<ncclComm*> comms_;
  Socket listen_;
  SocketAddress faultAddr_{};
  std::vector<Pending> pending_;
  int intervalMs_ = 100;
};

// Tells every process of comm but the lost rank's that comm failed. Off the caller's thread: a dead
// host can take the whole connect deadline.
void notifyPeers(ncclComm* comm, int lost, const char* why) {
  const HealthState* h = comm->health.get();
  if (!h) return;
  std::vector<SocketAddress> targets;
  auto same = [](const SocketAddress& a, const SocketAddress& b) {
    return addressLength(a) == addressLength(b) && memcmp(&a, &b, addressLength(a)) == 0;
  };
  for (int r = 0; r < comm->nRanks; r++) {
    const SocketAddress& a = h->ranks[r].faultAddr;
    if (addressPort(a) == 0 || (lost >= 0 && same(a, h->ranks[lost].faultAddr))) continue;
    if (std::none_of(targets.begin(), targets.end(), [&](const SocketAddress& t) { return same(t, a); }))
      targets.push_back(a);
  }
  const FaultMessage m = faultNotice(comm, lost, why);
  std::thread([targets = std::move(targets), m] {
    // All at once: a dead process refuses at once, but a dead host would hold up the ones behind it.
    std::vector<pollfd> pfds;
    for (const SocketAddress& a : targets) {
      int fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      if (connect(fd, &a.sa, addressLength(a)) == 0 || errno == EINPROGRESS)
        pfds.push_back({fd, POLLOUT, 0});
      else
        close(fd);
    }
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(kFaultSendSeconds);
    size_t left = pfds.size(), sent = 0;
    while (left > 0) {
      const int ms = (int)std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now())
                         .count();
      if (ms <= 0) break;
      const int ready = poll(pfds.data(), pfds.size(), ms);
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) break;
      for (pollfd& p : pfds) {
        if (p.fd < 0 || !p.revents) continue;
        int err = 0;
        socklen_t len = sizeof err;
        // The record fits in an empty socket buffer: one send, or nothing.
        if (getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
          sent += send(p.fd, &m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof m;
        close(p.fd);
        p.fd = -1;
        left--;
      }
    }
    for (pollfd& p : pfds)
      if (p.fd >= 0) close(p.fd);
    // A process that missed the notice learns of the failure when it asks (a long wait on this rank).
    INFO(NCCL_RAS, "rank %d: fault notice sent to %zu of %zu process(es)", m.reporter, sent, targets.size());
  }).detach();
}

}  // namespace

ncclResult_t healthInit(ncclComm* comm) {
  auto h = std::make_unique<HealthState>();
  h->ranks.assign(comm->nRanks, RankHealth{});
  RankHealth& me = h->ranks[comm->rank];
  me.pid = getpid();
  me.startTime = processStartTime(me.pid);
  me.pidNs = pidNamespace();
  me.machineHash = comm->peerInfo[comm->rank].machineHash;
  me.faultAddr = Watchdog::get().faultAddr();
  gethostname(me.host, sizeof me.host - 1);
  NCCLCHECK(comm->bootstrap->allGather(h->ranks.data(), sizeof(RankHealth)));
  h->watchable.assign(comm->nRanks, 0);
  h->lastProbe.assign(comm->nRanks, 0);
  h->suspects.assign(comm->channels.count, Suspect{});
  for (int r = 0; r < comm->nRanks; r++) {
    const RankHealth& p = h->ranks[r];
    h->watchable[r] = p.machineHash == me.machineHash && p.pidNs == me.pidNs && p.pidNs != 0 && p.pid != me.pid &&
                      p.startTime != 0;
  }
  comm->health = std::move(h);
  Watchdog::get().add(comm);
  return ncclSuccess;
}

void healthFinalize(ncclComm* comm) {
  if (comm->health) Watchdog::get().remove(comm);
}

void commFail(ncclComm* comm, ncclResult_t result, bool notify, int lost, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (lost >= 0 && lost < comm->nRanks && comm->health) {
    int none = -1;
    comm->health->lostRank.compare_exchange_strong(none, lost);
  }
  bool first;
  {
    // The message is in place before the failure shows: a thread that sees asyncError set reads lastError under
    // this lock, and must find why.
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    ncclResult_t expected = ncclSuccess;
    first = comm->asyncError.compare_exchange_strong(expected, result);
    if (first) comm->lastError = msg;
  }
  if (!first) {
    // Already failed: the abort flag is left alone, since ncclCommShrink may have lowered it to reuse
    // the bootstrap.
    INFO(NCCL_RAS, "%s (the communicator had failed already)", msg);
    return;
  }
  // A failure this thread has just reported (a connection made on demand that failed) is not logged twice.
  if (!isThreadLastError(msg)) setError(comm, result, "%s", msg);
  commSetAbort(comm, 1);
  if (notify) notifyPeers(comm, lost, msg);
}

std::string describeRank(const ncclComm* comm, int rank) {
  std::string s = "rank " + std::to_string(rank);
  if (comm->health && rank >= 0 && rank < comm->nRanks) {
    const RankHealth& r = comm->health->ranks[rank];
    s += " (pid " + std::to_string(r.pid) + " on " + r.host + ")";
  }
  return s;
}

std::string hangReport(const ncclComm* comm) {
  char line[512];
  snprintf(line, sizeof line, "  comm %p%s%s commId 0x%llx rank %d of %d, %s, timeout %s\n", (const void*)comm,
           comm->options.name.empty() ? "" : " ", comm->options.name.c_str(), (unsigned long long)comm->commHash,
           comm->rank, comm->nRanks,
           comm->asyncError.load() != ncclSuccess ? ncclGetErrorString(comm->asyncError.load()) : "no error",
           comm->devComm.timeoutNs ? (std::to_string(comm->devComm.timeoutNs / 1000000) + " ms").c_str() : "off");
  std::string out = line;
  if (comm->state.load() != ncclComm::State::Ready) return out + "  (not initialised: no operation runs)\n";
  const uint64_t now = dev::clockNs();
  for (int c = 0; c < comm->channels.count; c++) {
    const plexusDevChannel_v1_t& ch = comm->channels.live[c];
    std::string what = "idle";
    if (comm->executor) {
      const HostExecutor::Activity& a = comm->executor->activity(c);
      const bool running = a.running.load(std::memory_order_acquire);
      if (running || (dev::loadRelaxed(&ch.status) != PLEXUS_CHANNEL_OK && a.count.load() + a.opSeq.load() != 0)) {
        const int algo = a.algorithm.load();
        const int more = a.more.load();
        // The works after it: its launch's, or in a pass of joined launches the later launches' too.
        const std::string after = more ? " after it, up to opSeq " + std::to_string(a.lastOpSeq.load()) : "";
        snprintf(line, sizeof line, "%s %s opSeq %llu (%llu x %s, %s)%s%s%s", running ? "running" : "stopped in",
                 funcName((ncclFunc_t)a.func.load()),
                 (unsigned long long)a.opSeq.load(), (unsigned long long)a.count.load(),
                 typeName((ncclDataType_t)a.datatype.load()),
                 algo < (int)comm->algos.size() ? comm->algos[algo].plugin->name.c_str() : "?",
                 more ? " or one of the " : "", more ? std::to_string(more).c_str() : "",
                 after.c_str());
        what = line;
      }
    }
    std::string wait;
    const int peer = dev::loadRelaxed(&ch.waitPeer);
    if (peer >= 0 && peer < comm->nRanks) {
      const bool send = dev::loadRelaxed(&ch.waitIsSend);
      const uint64_t since = dev::loadRelaxed(&ch.waitSince);
      snprintf(line, sizeof line, "; waiting %.1f s to %s %s", since && now > since ? (now - since) / 1e9 : 0.0,
               send ? "send to" : "receive from", describeRank(comm, peer).c_str());
      wait = line;
      // The host's copy of the connector; its head and tail are host memory on the host backend only.
      const plexusDevChannelPeer_v1_t& p = comm->channels.peers[c][peer];
      const plexusDevConnector_v1_t& conn = send ? p.send : p.recv;
      if (comm->backend == plexusBackendHost && conn.connected && conn.conn.head && conn.conn.tail) {
        // tail: steps the sender published; head: steps the receiver consumed. A receiver waits for step
        // `head` to arrive, a sender for credit to publish step `tail`.
        const unsigned long long sent = dev::loadAcquire(conn.conn.tail), consumed = dev::loadAcquire(conn.conn.head);
        snprintf(line, sizeof line, " for step %llu (connection steps: %llu sent, %llu consumed)", send ? sent : consumed,
                 sent, consumed);
        wait += line;
      }
    }
    const int status = dev::loadRelaxed(&ch.status);
    snprintf(line, sizeof line, "  channel %d: %s%s%s\n", c, what.c_str(), wait.c_str(),
             status == PLEXUS_CHANNEL_TIMEOUT ? " [timed out]" : status == PLEXUS_CHANNEL_ABORTED ? " [aborted]" : "");
    out += line;
  }
  return out;
}

void reportHangOnce(ncclComm* comm, const char* why) {
  if (!comm->health || comm->health->reported.exchange(true)) return;
  printReport(hangReport(comm), comm->rank, why);
}

}  // namespace plexus
