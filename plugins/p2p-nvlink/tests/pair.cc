#include "pair.h"

#include <dirent.h>
#include <dlfcn.h>
#include <plexus/cuda/driver.h>
#include <plexus/transport_v1.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>

namespace p2ptest {

namespace {

namespace pc = plexus::cuda;
using Clock = std::chrono::steady_clock;

constexpr int kSimpleBytes = PLEXUS_STEPS * 16384;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// This process's warnings (each side runs in a process of its own).
std::vector<std::string> warnings;

void logger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != NCCL_LOG_WARN && level != NCCL_LOG_INFO) return;
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (level == NCCL_LOG_WARN) warnings.push_back(buf);
  if (getenv("P2P_TEST_VERBOSE"))
    fprintf(stderr, "[pid %d] %s %s\n", getpid(), level == NCCL_LOG_WARN ? "WARN" : "INFO", buf);
}

std::string allWarnings() {
  std::string s;
  for (const std::string& w : warnings) s += "\n    WARN " + w;
  return s;
}

bool writeAll(int fd, const void* p, size_t n) {
  const char* c = (const char*)p;
  while (n) {
    const ssize_t k = write(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= (size_t)k;
  }
  return true;
}

bool readAll(int fd, void* p, size_t n, double seconds) {
  char* c = (char*)p;
  const auto start = Clock::now();
  while (n) {
    pollfd pfd{fd, POLLIN, 0};
    const int left = (int)((seconds - since(start)) * 1000);
    if (left <= 0 || poll(&pfd, 1, left) <= 0) return false;
    const ssize_t k = read(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= (size_t)k;
  }
  return true;
}

void applyEnv(const std::vector<std::string>& env) {
  for (const std::string& e : env) {
    const size_t eq = e.find('=');
    setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), 1);
  }
}

// The stand-in driver's record of calls and its view of an address; absent with the real driver.
const char* (*fakeCalls)() = nullptr;
const char* (*fakeKindOf)(const void*) = nullptr;
int (*fakeOwned)(const void*) = nullptr;

struct Side {
  bool isSend = false;
  int device = 0;
  const plexusTransport_v1_t* t = nullptr;
  void* ctx = nullptr;
  void* res = nullptr;
  plexusPeerInfo_v1_t self{}, peer{};
  plexusConnectInfo_v1_t info{}, peerInfo{};
  plexusConnInfo_v1_t conn{};
  bool connected = false;
  int channel = 0;
};

const plexusTransport_v1_t* loadPlugin(const char* path, std::string* why) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    *why = std::string("dlopen: ") + dlerror();
    return nullptr;
  }
  auto* t = (const plexusTransport_v1_t*)dlsym(h, PLEXUS_TRANSPORT_PLUGIN_SYMBOL);
  if (!t) *why = "no " PLEXUS_TRANSPORT_PLUGIN_SYMBOL;
  return t;
}

plexusPeerInfo_v1_t peerInfo(int rank, int device, int pid, uint64_t pidHash) {
  plexusPeerInfo_v1_t p{};
  p.rank = rank;
  p.device = device;
  p.backend = 1;
  p.pid = pid;
  p.hostHash = 0x1111;
  p.pidHash = pidHash;
  p.shmDev = 0x2222;
  p.machineHash = 0x3333;
  return p;
}

ncclResult_t setup(Side* s) {
  plexusTransportSetup_v1_t st{};
  st.self = &s->self;
  st.peer = &s->peer;
  st.channelId = s->channel;
  st.buffSizes[PLEXUS_PROTO_LL] = PLEXUS_LL_BUFF_BYTES;
  st.buffSizes[PLEXUS_PROTO_SIMPLE] = kSimpleBytes;
  return s->isSend ? s->t->sendSetup(s->ctx, &st, &s->info, &s->res) : s->t->recvSetup(s->ctx, &st, &s->info, &s->res);
}

ncclResult_t connectOnce(Side* s) {
  return s->isSend ? s->t->sendConnect(s->res, &s->peerInfo, &s->conn)
                   : s->t->recvConnect(s->res, &s->peerInfo, &s->conn);
}

void freeSide(Side* s) {
  if (!s->res) return;
  (s->isSend ? s->t->sendFree : s->t->recvFree)(s->res);
  s->res = nullptr;
}

// The driver, with the side's device current on this thread, for the copies a kernel would make.
struct Copier {
  const pc::Driver* d = nullptr;
  std::string error;
  bool open(int device) {
    d = pc::driver(&error);
    if (!d) return false;
    pc::CUdevice dev = 0;
    pc::CUcontext ctx = nullptr;
    if (d->deviceGet(&dev, device) != pc::CUDA_SUCCESS || d->devicePrimaryCtxRetain(&ctx, dev) != pc::CUDA_SUCCESS ||
        d->ctxSetCurrent(ctx) != pc::CUDA_SUCCESS) {
      error = "cannot make device " + std::to_string(device) + " current";
      return false;
    }
    return true;
  }
  bool put(volatile void* dst, const void* src, size_t n) {
    return d->memcpyHtoD((pc::CUdeviceptr)(uintptr_t)dst, src, n) == pc::CUDA_SUCCESS;
  }
  bool get(void* dst, const volatile void* src, size_t n) {
    return d->memcpyDtoH(dst, (pc::CUdeviceptr)(uintptr_t)src, n) == pc::CUDA_SUCCESS;
  }
  bool waitFor(const volatile uint64_t* p, uint64_t value, double seconds) {
    const auto start = Clock::now();
    for (;;) {
      uint64_t v = 0;
      if (!get(&v, p, sizeof(v))) return false;
      if (v == value) return true;
      if (since(start) > seconds) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
};

unsigned char pattern(size_t i, int proto) { return (unsigned char)(i * 131 + proto * 7 + 1); }

std::string checkConn(const Side& s, const PairSpec& spec) {
  const char* who = s.isSend ? "sender" : "receiver";
  const plexusConnInfo_v1_t& c = s.conn;
  std::string e;
  if (spec.sameSpace >= 0 && ((c.flags & PLEXUS_CONN_P2P_SAME_SPACE) != 0) != (spec.sameSpace != 0))
    e += std::string(who) + ": PLEXUS_CONN_P2P_SAME_SPACE is " +
         ((c.flags & PLEXUS_CONN_P2P_SAME_SPACE) ? "set" : "clear") + "; ";
  if (spec.ptrExchange >= 0 && (c.ptrExchange != nullptr) != (spec.ptrExchange != 0))
    e += std::string(who) + ": ptrExchange is " + (c.ptrExchange ? "set" : "null") + "; ";
  if (c.stepSize != kSimpleBytes / PLEXUS_STEPS)
    e += std::string(who) + ": stepSize " + std::to_string(c.stepSize) + "; ";
  if (!c.buffs[PLEXUS_PROTO_SIMPLE] || !c.buffs[PLEXUS_PROTO_LL] || c.buffs[PLEXUS_PROTO_LL128])
    e += std::string(who) + ": buffers missing or LL128 present; ";
  if (!c.tail || !c.head || c.connFifo) e += std::string(who) + ": head/tail missing or a connFifo; ";
  if (fakeKindOf) {
    // Every pointer must be one the side's kernels can use: device memory, or the device view of host memory.
    const void* ptrs[] = {c.buffs[PLEXUS_PROTO_SIMPLE], c.buffs[PLEXUS_PROTO_LL], (const void*)c.tail,
                          (const void*)c.head, c.ptrExchange};
    for (const void* p : ptrs) {
      if (!p) continue;
      const std::string kind = fakeKindOf(p);
      if (kind != "device" && kind != "device view") e += std::string(who) + ": a connector pointer is " + kind + "; ";
    }
  }
  return e;
}

// The sender's kernel: fills its Simple and LL buffers through the connector, then publishes tail.
std::string sendWrite(Copier& cp, const Side& s) {
  const plexusConnInfo_v1_t& c = s.conn;
  std::vector<unsigned char> simple(kSimpleBytes), ll(PLEXUS_LL_BUFF_BYTES);
  for (size_t i = 0; i < simple.size(); i++) simple[i] = pattern(i, PLEXUS_PROTO_SIMPLE);
  for (size_t i = 0; i < ll.size(); i++) ll[i] = pattern(i, PLEXUS_PROTO_LL);
  const uint64_t one = 1;
  if (!cp.put(c.buffs[PLEXUS_PROTO_SIMPLE], simple.data(), simple.size()) ||
      !cp.put(c.buffs[PLEXUS_PROTO_LL], ll.data(), ll.size()) || !cp.put(c.tail, &one, sizeof(one)))
    return "sender: a copy into the connector failed; ";
  return "";
}

// The sender's kernel again: the receiver's credit (head) and zero-copy record arrived.
std::string sendCheck(Copier& cp, const Side& s) {
  const plexusConnInfo_v1_t& c = s.conn;
  if (!cp.waitFor(c.head, 1, 20)) return "sender: head never reached 1; ";
  if (c.ptrExchange) {
    uint64_t seq = 0;
    if (!cp.get(&seq, &c.ptrExchange->seq, sizeof(seq)) || seq != 7)
      return "sender: the zero-copy record was not written; ";
  }
  return "";
}

// The receiver's kernel: waits for tail, checks every byte, writes the zero-copy record and head.
std::string recvTraffic(Copier& cp, const Side& s) {
  const plexusConnInfo_v1_t& c = s.conn;
  if (!cp.waitFor(c.tail, 1, 20)) return "receiver: tail never reached 1; ";
  std::vector<unsigned char> simple(kSimpleBytes), ll(PLEXUS_LL_BUFF_BYTES);
  if (!cp.get(simple.data(), c.buffs[PLEXUS_PROTO_SIMPLE], simple.size()) ||
      !cp.get(ll.data(), c.buffs[PLEXUS_PROTO_LL], ll.size()))
    return "receiver: a copy out of the connector failed; ";
  for (size_t i = 0; i < simple.size(); i++)
    if (simple[i] != pattern(i, PLEXUS_PROTO_SIMPLE))
      return "receiver: Simple byte " + std::to_string(i) + " differs; ";
  for (size_t i = 0; i < ll.size(); i++)
    if (ll[i] != pattern(i, PLEXUS_PROTO_LL)) return "receiver: LL byte " + std::to_string(i) + " differs; ";
  const uint64_t one = 1, seven = 7;
  if (c.ptrExchange && !cp.put(&c.ptrExchange->seq, &seven, sizeof(seven)))
    return "receiver: cannot write the record; ";
  if (!cp.put(c.head, &one, sizeof(one))) return "receiver: cannot write head; ";
  return "";
}

std::string checkCalls(const std::vector<std::string>& must, const std::vector<std::string>& mustNot, const char* who) {
  if (!fakeCalls) return "";
  const std::string calls = std::string("\n") + fakeCalls();
  std::string e;
  for (const std::string& c : must)
    if (calls.find("\n" + c + "\n") == std::string::npos) e += std::string(who) + " never called " + c + "; ";
  for (const std::string& c : mustNot)
    if (calls.find("\n" + c + "\n") != std::string::npos) e += std::string(who) + " called " + c + "; ";
  return e;
}

// Whether a warning holds every '|'-separated part of what.
bool warned(const std::string& what) {
  for (const std::string& w : warnings) {
    bool all = true;
    for (size_t at = 0; at <= what.size();) {
      const size_t bar = std::min(what.find('|', at), what.size());
      all &= w.find(what.substr(at, bar - at)) != std::string::npos;
      at = bar + 1;
    }
    if (all) return true;
  }
  return false;
}

// Descriptors open in this process (fd -> what it points to), not counting the NVIDIA driver's devices (/dev/nvidia*:
// a real driver opens a few dozen as its context and memory come up, and keeps them for the process's life).
std::map<int, std::string> openFds() {
  std::map<int, std::string> fds;
  if (DIR* d = opendir("/proc/self/fd")) {
    const int own = dirfd(d);
    while (const dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const int fd = atoi(e->d_name);
      char path[64], target[256];
      snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
      const ssize_t len = readlink(path, target, sizeof(target) - 1);
      const std::string t = len > 0 ? std::string(target, (size_t)len) : "?";
      if (fd != own && t.rfind("/dev/nvidia", 0) != 0) fds[fd] = t;
    }
    closedir(d);
  }
  return fds;
}

// What comes and goes with each connection and must be closed: memfds, /dev/shm files, exported dmabufs. Sockets are
// not counted: the plugin's one is the process's mailbox, kept for the process's life, and NVIDIA's driver opens one
// of its own in the exporting process (seen on the H200: the sender kept a second socket, with every memory path). A
// real driver also keeps eventfds and pipes it opens on first use.
bool pluginKind(const std::string& target) {
  return target.rfind("/memfd:", 0) == 0 || target.rfind("/dev/shm/", 0) == 0 ||
         target.find("dmabuf") != std::string::npos;
}

// The descriptors opened since `before` and still open; of the plugin's kinds when pluginOnly.
std::string newFds(const std::map<int, std::string>& before, bool pluginOnly, int* count) {
  std::string out;
  *count = 0;
  for (const auto& [fd, target] : openFds()) {
    const auto was = before.find(fd);
    if ((was != before.end() && was->second == target) || pluginKind(target) != pluginOnly) continue;
    ++*count;
    out += (out.empty() ? "" : ", ") + std::to_string(fd) + " -> " + target;
  }
  return out;
}

// What a side's process says to the parent: "OK", "EXPECTED <what>", or "ERROR <what>".
void report(int fd, const std::string& line) {
  writeAll(fd, line.data(), line.size());
  close(fd);
}

void prepare(const char* driverPath) {
  setenv("PLEXUS_CUDA_DRIVER", driverPath, 1);
  if (void* h = dlopen(driverPath, RTLD_NOW | RTLD_LOCAL)) {
    fakeCalls = (const char* (*)())dlsym(h, "p2pFakeCudaCalls");
    fakeKindOf = (const char* (*)(const void*))dlsym(h, "p2pFakeCudaKindOf");
    fakeOwned = (int (*)(const void*))dlsym(h, "p2pFakeCudaOwned");
  }
}

int runSameProcess(const char* pluginPath, const char* driverPath, const PairSpec& spec, int out) {
  applyEnv(spec.env);
  applyEnv(spec.sendEnv);
  applyEnv(spec.recvEnv);
  prepare(driverPath);
  std::string why;
  const plexusTransport_v1_t* t = loadPlugin(pluginPath, &why);
  if (!t) return report(out, "ERROR " + why), 1;
  void* ctx = nullptr;
  t->init(&ctx, logger);
  Side s, r;
  s.isSend = true;
  s.t = r.t = t;
  s.ctx = r.ctx = ctx;
  s.self = r.peer = peerInfo(0, spec.sendDevice, getpid(), 77);
  r.self = s.peer = peerInfo(1, spec.recvDevice, getpid(), 77);
  auto failed = [&](const std::string& what) {
    freeSide(&s);
    freeSide(&r);
    if (spec.expectFailure && warned(spec.failMessage)) return report(out, "EXPECTED " + what), 0;
    return report(out, "ERROR " + what + allWarnings()), 1;
  };
  if (ncclResult_t res = setup(&r); res != ncclSuccess) return failed("receiver setup " + std::to_string(res));
  if (ncclResult_t res = setup(&s); res != ncclSuccess) return failed("sender setup " + std::to_string(res));
  s.peerInfo = r.info;
  r.peerInfo = s.info;
  const auto start = Clock::now();
  while (!s.connected || !r.connected) {
    for (Side* x : {&s, &r}) {
      if (x->connected) continue;
      const ncclResult_t res = connectOnce(x);
      if (res == ncclSuccess)
        x->connected = true;
      else if (res != ncclInProgress)
        return failed(std::string(x->isSend ? "sender" : "receiver") + " connect " + std::to_string(res));
    }
    if (since(start) > 20) return failed("connect still in progress after 20 s");
  }
  if (spec.expectFailure) return failed("connected although it should not");
  for (Side* x : {&s, &r})
    if (x->t->connected && x->t->connected(x->res) != ncclSuccess) return failed("connected() failed");
  std::string e = checkConn(s, spec) + checkConn(r, spec);
  if (spec.sameSpace == 1 &&
      (s.conn.buffs[PLEXUS_PROTO_SIMPLE] != r.conn.buffs[PLEXUS_PROTO_SIMPLE] || s.conn.tail != r.conn.tail))
    e += "one address space, yet the two connectors differ; ";
  Copier cp;
  if (!cp.open(spec.sendDevice)) e += cp.error + "; ";
  // One thread plays both kernels: the sender's writes, the receiver's checks and answer, the sender's check.
  if (e.empty()) e += sendWrite(cp, s);
  if (e.empty()) e += recvTraffic(cp, r);
  if (e.empty()) e += sendCheck(cp, s);
  if (!e.empty()) return failed(e);
  freeSide(spec.freeReceiverFirst ? &r : &s);
  freeSide(spec.freeReceiverFirst ? &s : &r);
  e += checkCalls(spec.sendCalls, spec.sendNoCalls, "the sender's process");
  e += checkCalls(spec.recvCalls, spec.recvNoCalls, "the receiver's process");
  if (!warnings.empty()) e += "warnings where all went well; ";
  if (!e.empty()) return report(out, "ERROR " + e + allWarnings()), 1;
  return report(out, "OK"), 0;
}

int runSide(const char* pluginPath, const char* driverPath, const PairSpec& spec, bool isSend, int peerFd, int out) {
  applyEnv(spec.env);
  applyEnv(isSend ? spec.sendEnv : spec.recvEnv);
  prepare(driverPath);
  const char* who = isSend ? "sender" : "receiver";
  std::string why;
  const plexusTransport_v1_t* t = loadPlugin(pluginPath, &why);
  if (!t) return report(out, "ERROR " + why), 1;
  void* ctx = nullptr;
  t->init(&ctx, logger);
  const int n = spec.connections;
  std::vector<Side> sides(n);
  auto failed = [&](const std::string& what) {
    for (Side& s : sides) freeSide(&s);
    if (spec.expectFailure && warned(spec.failMessage))
      return report(out, "EXPECTED " + std::string(who) + " " + what), 0;
    return report(out, "ERROR " + std::string(who) + ": " + what + allWarnings()), 1;
  };
  int pid = getpid(), peerPid = 0;
  if (!writeAll(peerFd, &pid, sizeof(pid)) || !readAll(peerFd, &peerPid, sizeof(peerPid), 30))
    return failed("no pid from the peer");
  const std::map<int, std::string> fdsBefore = openFds();
  ncclResult_t sr = ncclSuccess;
  for (int i = 0; i < n && sr == ncclSuccess; i++) {
    Side& s = sides[i];
    s.isSend = isSend;
    s.t = t;
    s.ctx = ctx;
    s.channel = i;
    s.self = peerInfo(isSend ? 0 : 1, isSend ? spec.sendDevice : spec.recvDevice, pid, 1000 + (isSend ? 0 : 1));
    s.peer = peerInfo(isSend ? 1 : 0, isSend ? spec.recvDevice : spec.sendDevice, peerPid, 1000 + (isSend ? 1 : 0));
    sr = setup(&s);
  }
  const uint8_t ok = sr == ncclSuccess;
  // The peer learns whether this side could set up at all, so that it does not wait for a connect that never comes.
  if (!writeAll(peerFd, &ok, 1)) return failed("cannot send info");
  for (int i = 0; i < n && ok; i++)
    if (!writeAll(peerFd, &sides[i].info, sizeof(sides[i].info))) return failed("cannot send info");
  if (!ok) return failed("setup " + std::to_string(sr));
  uint8_t peerOk = 0;
  if (!readAll(peerFd, &peerOk, 1, 30)) return failed("no answer from the peer");
  if (!peerOk) return failed("the peer could not set up");
  for (int i = 0; i < n; i++)
    if (!readAll(peerFd, &sides[i].peerInfo, sizeof(sides[i].peerInfo), 30)) return failed("no info from the peer");
  if (!isSend && spec.fault == PairSpec::ReceiverDies) _exit(0);
  if (!isSend && spec.fault == PairSpec::ReceiverSilent) {
    sleep(120);  // the parent ends it
    _exit(0);
  }
  // As the core: every connect of the round in turn (the receiver in the opposite order, so that messages of several
  // connections cross), until all are done.
  const auto start = Clock::now();
  for (int left = n; left > 0;) {
    for (int k = 0; k < n; k++) {
      Side& s = sides[isSend ? k : n - 1 - k];
      if (s.connected) continue;
      const ncclResult_t res = connectOnce(&s);
      if (res == ncclSuccess) {
        s.connected = true;
        left--;
      } else if (res != ncclInProgress) {
        const double el = since(start);
        if (spec.expectFailure && (el < spec.failAfter || el > spec.failWithin))
          return failed("connect failed after " + std::to_string(el) + " s, not between " +
                        std::to_string(spec.failAfter) + " and " + std::to_string(spec.failWithin));
        return failed("connect " + std::to_string(res) + " after " + std::to_string(el) + " s");
      }
    }
    if (since(start) > 40) return failed("connect still in progress after 40 s");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (spec.expectFailure) return failed("connected although it should not");
  // As the core: once both sides are connected, names that let the memory be found go.
  uint8_t mapped = 1, peerMapped = 0;
  if (!writeAll(peerFd, &mapped, 1) || !readAll(peerFd, &peerMapped, 1, 30)) return failed("the peer did not connect");
  for (Side& s : sides)
    if (t->connected && t->connected(s.res) != ncclSuccess) return failed("connected() failed");
  std::string e;
  for (Side& s : sides) e += checkConn(s, spec);
  if (isSend && spec.simpleInSender >= 0 && fakeOwned)
    for (Side& s : sides)
      if (fakeOwned(s.conn.buffs[PLEXUS_PROTO_SIMPLE]) != spec.simpleInSender)
        e += std::string("the Simple buffer is ") + (spec.simpleInSender ? "not " : "") + "in the sender's memory; ";
  Copier cp;
  if (e.empty() && !cp.open(isSend ? spec.sendDevice : spec.recvDevice)) e += cp.error;
  for (Side& s : sides)
    if (e.empty() && isSend) e += sendWrite(cp, s);
  for (Side& s : sides)
    if (e.empty()) e += isSend ? sendCheck(cp, s) : recvTraffic(cp, s);
  // Both sides hold their memory until both have checked; then one frees first (spec.freeReceiverFirst).
  uint8_t done = 1, peerDone = 0;
  writeAll(peerFd, &done, 1);
  readAll(peerFd, &peerDone, 1, 30);
  if (!e.empty()) return failed(e);
  if (spec.freeReceiverFirst == isSend) {
    uint8_t freed = 0;
    readAll(peerFd, &freed, 1, 30);
  }
  for (Side& s : sides) freeSide(&s);
  writeAll(peerFd, &done, 1);
  e += isSend ? checkCalls(spec.sendCalls, spec.sendNoCalls, who) : checkCalls(spec.recvCalls, spec.recvNoCalls, who);
  // Every descriptor that came or went with the connections is closed.
  int left = 0, driver = 0;
  const std::string leftList = newFds(fdsBefore, true, &left), driverList = newFds(fdsBefore, false, &driver);
  if (left) e += std::to_string(left) + " descriptors left open (" + leftList + "); ";
  if (driver) fprintf(stderr, "note: %s: %d descriptors the driver opened are left (%s)\n", who, driver, driverList.c_str());
  if (!warnings.empty()) e += "warnings where all went well; ";
  if (!e.empty()) return report(out, "ERROR " + std::string(who) + ": " + e + allWarnings()), 1;
  return report(out, "OK"), 0;
}

struct Child {
  pid_t pid = -1;
  int out = -1;
  std::string said;
  bool done = false;
  int status = 0;
};

Child fork1(const std::function<int(int)>& body) {
  int p[2];
  if (pipe(p) != 0) return {};
  Child c;
  c.pid = fork();
  if (c.pid == 0) {
    signal(SIGPIPE, SIG_IGN);  // a peer that ended must not end this side silently
    close(p[0]);
    _exit(body(p[1]));
  }
  close(p[1]);
  c.out = p[0];
  return c;
}

void collect(std::vector<Child>& kids, double seconds, bool cutAfterFirst) {
  const auto start = Clock::now();
  double firstDone = -1;
  for (;;) {
    bool all = true;
    for (Child& k : kids) {
      if (k.done) continue;
      if (waitpid(k.pid, &k.status, WNOHANG) == k.pid) {
        k.done = true;
        if (firstDone < 0) firstDone = since(start);
      } else {
        all = false;
      }
    }
    if (all) break;
    const bool cut = since(start) > seconds || (cutAfterFirst && firstDone >= 0 && since(start) > firstDone + 5);
    if (cut) {
      for (Child& k : kids)
        if (!k.done) {
          kill(k.pid, SIGKILL);
          waitpid(k.pid, &k.status, 0);
          k.done = true;
          k.said = "KILLED";
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (Child& k : kids) {
    char buf[8192];
    ssize_t n;
    while ((n = read(k.out, buf, sizeof(buf))) > 0) k.said.append(buf, (size_t)n);
    close(k.out);
  }
}

}  // namespace

int inChild(int (*fn)(void*), void* arg, double seconds) {
  const pid_t pid = fork();
  if (pid == 0) _exit(fn(arg));
  const auto start = Clock::now();
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (since(start) > seconds) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string runPair(const char* pluginPath, const char* driverPath, const PairSpec& spec) {
  std::vector<Child> kids;
  fflush(stdout);
  fflush(stderr);
  if (spec.sameProcess) {
    kids.push_back(fork1([&](int out) { return runSameProcess(pluginPath, driverPath, spec, out); }));
  } else {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return "socketpair failed";
    kids.push_back(fork1([&](int out) {
      close(sv[1]);
      return runSide(pluginPath, driverPath, spec, true, sv[0], out);
    }));
    kids.push_back(fork1([&](int out) {
      close(sv[0]);
      return runSide(pluginPath, driverPath, spec, false, sv[1], out);
    }));
    close(sv[0]);
    close(sv[1]);
  }
  collect(kids, 90, spec.expectFailure || spec.fault != PairSpec::None);
  std::string errors;
  bool expected = false;
  for (size_t i = 0; i < kids.size(); i++) {
    const Child& k = kids[i];
    const bool faulty = !spec.sameProcess && i == 1 && spec.fault != PairSpec::None;  // the receiver that misbehaves
    if (faulty) continue;
    if (k.said.rfind("EXPECTED", 0) == 0) {
      expected = true;
    } else if (k.said == "KILLED" && spec.expectFailure) {
      // The other side of a failure may wait for its own deadline; the failing side has spoken.
    } else if (k.said != "OK") {
      errors += (k.said.empty() ? std::string("a side said nothing (crashed?), status ") + std::to_string(k.status)
                                : k.said) +
                "\n";
    }
  }
  if (spec.expectFailure && !expected && errors.empty())
    errors = "no side failed as expected (" + spec.failMessage + ")";
  return errors;
}

}  // namespace p2ptest
