// plexus-plugin-check's rules for a transport plugin (plexusTransportPlugin_v1). The tool plays both ranks of one
// connection in this process (two ranks of one host and process, host backend), the core's part (setup, the
// exchange of connect info, connect polled until both sides are done, the proxy thread for a proxy-driven
// transport) and the kernels' part (NCCL's Simple handshake, as plexus/device/primitives.h runs it: a sender waits
// for credit, writes its slot, records the size in connFifo and publishes tail; a receiver announces recvWanted,
// waits for tail, reads, frees the connFifo entry and publishes head; LL and LL128 through the SDK's primitives).
#include <dlfcn.h>
#include <nccl.h>
#include <plexus.h>
#include <plexus/device/protocol_prims.h>
#include <plexus/transport_v1.h>

#include <atomic>
#include <memory>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "misc/debug.h"
#include "plugin/loader.h"
#include "topo/topo.h"
#include "transport_check.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Pair {
  const plexusTransport_v1_t* t = nullptr;
  void* ctx = nullptr;
  void* commCtx[2] = {};
  void* send = nullptr;  // rank 0's send resources
  void* recv = nullptr;  // rank 1's receive resources
  plexusConnInfo_v1_t sendConn{}, recvConn{};
  int buffSizes[PLEXUS_NUM_PROTOCOLS] = {};
};

plexusPeerInfo_v1_t peers[2];

// Runs fn on a thread of its own and waits for it at most `seconds`; false (the thread left behind) when it did
// not return: a hang the rule reports instead of hanging the tool.
bool within(double seconds, std::function<void()> fn) {
  struct State {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
  };
  auto s = std::make_shared<State>();
  std::thread([s, fn = std::move(fn)] {
    fn();
    std::lock_guard<std::mutex> lock(s->m);
    s->done = true;
    s->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(s->m);
  return s->cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return s->done; });
}

// The core's proxy thread for one pair: proxyProgress on both sides until stopped; the first error is kept.
struct Proxy {
  const plexusTransport_v1_t* t;
  std::vector<void*> conns;
  std::atomic<bool> stop{false};
  std::string error;
  std::thread thread;
  Proxy(const plexusTransport_v1_t* tt, std::vector<void*> cs) : t(tt), conns(std::move(cs)) {
    if (!t->proxyProgress) return;
    thread = std::thread([this] {
      while (!stop.load() && error.empty())
        for (void* c : conns) {
          int idle = 1;
          char why[512] = "";
          if (ncclResult_t r = t->proxyProgress(c, &idle, why, sizeof why); r != ncclSuccess) {
            error = std::string("proxyProgress returned ") + ncclGetErrorString(r) + ": " + why;
            break;
          }
          if (idle) std::this_thread::yield();
        }
    });
  }
  void halt() {
    stop = true;
    if (thread.joinable()) thread.join();
  }
  ~Proxy() { halt(); }
};

// Setup of both sides (send first or receive first), then connect polled on both until each is done.
std::string setupAndConnect(Pair* p, bool recvFirst) {
  plexusTransportSetup_v1_t s[2]{};
  for (int r = 0; r < 2; r++) {
    s[r].self = &peers[r];
    s[r].peer = &peers[1 - r];
    memcpy(s[r].buffSizes, p->buffSizes, sizeof p->buffSizes);
    s[r].commCtx = p->commCtx[r];
  }
  plexusConnectInfo_v1_t sendInfo{}, recvInfo{};
  for (int i = 0; i < 2; i++) {
    const bool doRecv = (i == 0) == recvFirst;
    ncclResult_t r = doRecv ? p->t->recvSetup(p->ctx, &s[1], &recvInfo, &p->recv)
                            : p->t->sendSetup(p->ctx, &s[0], &sendInfo, &p->send);
    if (r != ncclSuccess) return std::string(doRecv ? "recvSetup" : "sendSetup") + " returned " + ncclGetErrorString(r);
  }
  bool sendDone = false, recvDone = false;
  const auto end = Clock::now() + std::chrono::seconds(10);
  while (!sendDone || !recvDone) {
    if (!sendDone) {
      const ncclResult_t r = p->t->sendConnect(p->send, &recvInfo, &p->sendConn);
      if (r != ncclSuccess && r != ncclInProgress) return std::string("sendConnect returned ") + ncclGetErrorString(r);
      sendDone = r == ncclSuccess;
    }
    if (!recvDone) {
      const ncclResult_t r = p->t->recvConnect(p->recv, &sendInfo, &p->recvConn);
      if (r != ncclSuccess && r != ncclInProgress) return std::string("recvConnect returned ") + ncclGetErrorString(r);
      recvDone = r == ncclSuccess;
    }
    if (Clock::now() > end) return "connect still in progress after 10 s (each side polled in turn, as the core does)";
  }
  if (p->t->connected) {
    if (p->t->connected(p->send) != ncclSuccess) return "connected(send side) failed";
    if (p->t->connected(p->recv) != ncclSuccess) return "connected(receive side) failed";
  }
  return "";
}

std::string checkConn(const Pair& p) {
  for (const auto* c : {&p.sendConn, &p.recvConn}) {
    const char* side = c == &p.sendConn ? "send" : "receive";
    if (!c->buffs[PLEXUS_PROTO_SIMPLE] || !c->head || !c->tail)
      return std::string(side) + " connector without a Simple buffer, head or tail";
    if (c->stepSize <= 0 || (long)c->stepSize * PLEXUS_STEPS > p.buffSizes[PLEXUS_PROTO_SIMPLE])
      return std::string(side) + " connector's stepSize " + std::to_string(c->stepSize) + " is not within (0, " +
             std::to_string(p.buffSizes[PLEXUS_PROTO_SIMPLE] / PLEXUS_STEPS) + "]";
    const int ll = c->llSlots, most = p.buffSizes[PLEXUS_PROTO_LL] / PLEXUS_LL_SLOT_BYTES;
    if (ll && (ll < PLEXUS_STEPS || (ll & (ll - 1)) || ll > most))
      return std::string(side) + " connector's llSlots " + std::to_string(ll) + " is not 0 or a power of two from " +
             std::to_string(PLEXUS_STEPS) + " to the " + std::to_string(most) + " slots of the LL buffer asked for";
  }
  if (p.sendConn.stepSize != p.recvConn.stepSize) return "the two sides' stepSize differ";
  if (!(p.sendConn.flags & PLEXUS_CONN_LL_IN_SLOTS) && p.sendConn.llSlots != p.recvConn.llSlots)
    return "the two sides' llSlots differ";
  if (p.t->proxyProgress && !p.recvConn.recvWanted)
    return "a proxy-driven transport's receive connector has no recvWanted (its proxy cannot know what to receive)";
  return "";
}

uint8_t pattern(uint64_t step, size_t i) { return (uint8_t)(step * 131 + i * 7 + 1); }

// The kernels' part: `steps` steps of varying sizes (empty, one byte, a full slot, in between) through the pair,
// every byte checked. consume=false: the receiver takes nothing (data left in flight).
std::string moveSteps(Pair* p, int steps, bool consume, double seconds) {
  plexusConnInfo_v1_t& s = p->sendConn;
  plexusConnInfo_v1_t& r = p->recvConn;
  const int stepSize = s.stepSize;
  auto sizeOf = [&](uint64_t step) -> int64_t {
    switch (step % 4) {
      case 0: return 0;
      case 1: return 1;
      case 2: return stepSize;
      default: return (int64_t)((step * 2654435761u) % (uint64_t)stepSize);
    }
  };
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  std::string sendError, recvError;
  std::atomic<bool> recvFailed{false};  // the sender stops waiting once the receiver has given up
  std::thread sender([&] {
    for (uint64_t step = 0; step < (uint64_t)steps; step++) {
      while (__atomic_load_n(s.head, __ATOMIC_ACQUIRE) + PLEXUS_STEPS < step + 1) {
        if (recvFailed.load()) return;
        if (Clock::now() > end) {
          sendError = "the sender waited for credit (head) for step " + std::to_string(step) + " until the deadline";
          return;
        }
        std::this_thread::yield();  // the proxy and the receiver may need this core
      }
      char* slot = s.buffs[PLEXUS_PROTO_SIMPLE] + (step % PLEXUS_STEPS) * (size_t)stepSize;
      const int64_t bytes = sizeOf(step);
      for (int64_t i = 0; i < bytes; i++) slot[i] = (char)pattern(step, (size_t)i);
      if (s.connFifo) s.connFifo[step % PLEXUS_STEPS].size = bytes;
      __atomic_store_n(s.tail, step + 1, __ATOMIC_RELEASE);
    }
  });
  if (consume)
    for (uint64_t step = 0; step < (uint64_t)steps && recvError.empty(); step++) {
      if (r.recvWanted && *r.recvWanted < step + 1) __atomic_store_n(r.recvWanted, step + 1, __ATOMIC_RELEASE);
      while (__atomic_load_n(r.tail, __ATOMIC_ACQUIRE) < step + 1) {
        if (Clock::now() > end) {
          recvError = "the receiver waited for step " + std::to_string(step) + " (tail) until the deadline";
          break;
        }
        std::this_thread::yield();
      }
      if (!recvError.empty()) break;
      const char* slot = r.buffs[PLEXUS_PROTO_SIMPLE] + (step % PLEXUS_STEPS) * (size_t)stepSize;
      for (int64_t i = 0, bytes = sizeOf(step); i < bytes; i++)
        if ((uint8_t)slot[i] != pattern(step, (size_t)i)) {
          recvError = "step " + std::to_string(step) + " byte " + std::to_string(i) + " arrived wrong";
          break;
        }
      if (r.connFifo) r.connFifo[step % PLEXUS_STEPS].size = PLEXUS_CONNFIFO_FREE;
      __atomic_store_n(r.head, step + 1, __ATOMIC_RELEASE);
    }
  if (!recvError.empty() && recvError.find("(tail)") == std::string::npos) recvFailed = true;
  sender.join();
  // A receiver waiting for data a sender could not send (no credit) is the sender's failure.
  if (!sendError.empty() && (recvError.empty() || recvError.find("(tail)") != std::string::npos)) return sendError;
  return recvError;
}

// The kernels' LL or LL128 path: the SDK's own primitives (what every algorithm's step loop runs) on two threads,
// rank 0 sending and rank 1 receiving messages of several sizes, every byte checked. Waits give up after 5 s (the
// primitives' timeout) instead of hanging the tool.
std::string moveLines(Pair* p, int proto, std::string* how) {
  const char* name = proto == PLEXUS_PROTO_LL ? "LL" : "LL128";
  for (const plexusConnInfo_v1_t* c : {&p->sendConn, &p->recvConn})
    if (!c->buffs[proto] && !(c->flags & PLEXUS_CONN_LL_IN_SLOTS))
      return std::string("the ") + (c == &p->sendConn ? "send" : "receive") + " connector has no " + name +
             " buffer (buffs[" + std::to_string(proto) + "] NULL) and does not carry lines in its Simple slots "
             "(PLEXUS_CONN_LL_IN_SLOTS): kernels running " + name + " would fault";
  volatile uint32_t abortFlag = 0;
  struct Rank {
    plexusDevComm_v1_t comm{};
    plexusDevChannel_v1_t ch{};
    plexusDevChannelPeer_v1_t peers[2]{};
  } ranks[2];
  for (int r = 0; r < 2; r++) {
    Rank& k = ranks[r];
    k.comm.version = PLEXUS_DEVICE_ABI_VERSION;
    k.comm.rank = r;
    k.comm.nRanks = 2;
    k.comm.nChannels = 1;
    k.comm.abortFlag = &abortFlag;
    k.comm.timeoutNs = 5000000000ull;
    k.comm.channels = &k.ch;
    k.comm.spinPolls = 64;  // the proxy thread and the other rank share the cores
    k.ch.peers = k.peers;
    k.ch.status = PLEXUS_CHANNEL_OK;
    k.ch.waitPeer = -1;
  }
  ranks[0].peers[1].send.conn = p->sendConn;
  ranks[0].peers[1].send.connected = 1;
  ranks[1].peers[0].recv.conn = p->recvConn;
  ranks[1].peers[0].recv.connected = 1;
  using Prims = plexus::dev::ProtocolPrims<uint8_t, plexus::dev::FuncSum<uint8_t>>;
  const int to = 1, from = 0;
  size_t total = 0;
  const size_t sizes[] = {1, 7, 8, 120, 4096, 65536 + 3, (size_t)p->sendConn.stepSize * 3 + 5};
  for (size_t bytes : sizes) {
    std::vector<uint8_t> in(bytes), out(bytes, 0xee);
    for (size_t i = 0; i < bytes; i++) in[i] = pattern(bytes, i);
    std::thread sender([&] {
      Prims prims(&ranks[0].comm, &ranks[0].ch, 0, 1, proto, nullptr, 0, &to, 1, in.data(), nullptr, 0);
      prims.send(0, bytes);
    });
    {
      Prims prims(&ranks[1].comm, &ranks[1].ch, 0, 1, proto, &from, 1, nullptr, 0, nullptr, out.data(), 0);
      prims.recv(0, bytes);
    }
    sender.join();
    // The connectors keep their step counts from one operation to the next, as the core's do.
    p->sendConn = ranks[0].peers[1].send.conn;
    p->recvConn = ranks[1].peers[0].recv.conn;
    const std::string what = std::string(name) + ", " + std::to_string(bytes) + " B: ";
    for (int r = 0; r < 2; r++)
      if (ranks[r].ch.status != PLEXUS_CHANNEL_OK)
        return what + (r ? "the receiver" : "the sender") + " waited 5 s for the other side and gave up (" +
               (ranks[r].ch.status == PLEXUS_CHANNEL_TIMEOUT ? "timeout" : "stopped") + ")";
    for (size_t i = 0; i < bytes; i++)
      if (out[i] != in[i]) return what + "byte " + std::to_string(i) + " arrived wrong";
    total += bytes;
  }
  *how = std::string(name) + ": " + std::to_string(sizeof sizes / sizeof sizes[0]) + " messages (1 B to " +
         std::to_string(sizes[6]) + " B, " + std::to_string(total) + " B in all) through the SDK's primitives, every "
         "byte right" + (p->sendConn.flags & PLEXUS_CONN_LL_IN_SLOTS ? " (lines in the Simple slots)" : "");
  return "";
}

// Zero-copy point-to-point (the optional p2pDescribe / p2pWrite): messages of several sizes and alignments described
// on the receiving side and written from the sending side land byte for byte, and nothing around them changes.
std::string zeroCopy(Pair* p, std::string* how) {
  const plexusTransport_v1_t* t = p->t;
  constexpr size_t kGuard = 64;
  int written = 0, declined = 0;
  for (size_t bytes : {(size_t)1, (size_t)4097, (size_t)(1 << 20) + 3}) {
    for (size_t misalign : {(size_t)0, (size_t)5}) {
      std::vector<unsigned char> dst(bytes + misalign + 2 * kGuard, 0xA5), src(bytes);
      for (size_t i = 0; i < bytes; i++) src[i] = (unsigned char)(i * 31 + bytes + misalign);
      unsigned char* buff = dst.data() + kGuard + misalign;
      plexusPtrExchange_v1_t x{};
      ncclResult_t r = t->p2pDescribe(p->recv, buff, bytes, nullptr, &x);
      if (r != ncclSuccess) return "p2pDescribe of " + std::to_string(bytes) + " B returned " + ncclGetErrorString(r);
      if (x.kind == PLEXUS_XCHG_SLOTS) {
        declined++;
        continue;
      }
      if (x.size < bytes)
        return "p2pDescribe of " + std::to_string(bytes) + " B offers only " + std::to_string(x.size) + " B";
      r = t->p2pWrite(p->send, &x, src.data(), bytes);
      if (r != ncclSuccess) return "p2pWrite of " + std::to_string(bytes) + " B returned " + ncclGetErrorString(r);
      for (size_t i = 0; i < dst.size(); i++) {
        const bool inside = i >= kGuard + misalign && i < kGuard + misalign + bytes;
        const unsigned char want = inside ? src[i - kGuard - misalign] : 0xA5;
        if (dst[i] != want)
          return "p2pWrite of " + std::to_string(bytes) + " B (offset " + std::to_string(misalign) + "): byte " +
                 std::to_string((long)i - (long)(kGuard + misalign)) + (inside ? " arrived wrong" : " outside the message changed");
      }
      written++;
      *how = "kind " + std::to_string(x.kind);
    }
  }
  *how = std::to_string(written) + " messages (1 B to 1 MiB, aligned and not) described and written byte for byte, "
         "nothing around them touched" + (declined ? ", " + std::to_string(declined) + " declined (slots)" : "") +
         (written ? " (" + *how + ")" : "");
  return "";
}

std::string freePair(Pair* p, bool recvFirst) {
  // Everything the frees need is copied into the thread: one that never returns must not write into this frame.
  struct Results {
    std::atomic<ncclResult_t> send{ncclSuccess}, recv{ncclSuccess};
  };
  auto res = std::make_shared<Results>();
  const plexusTransport_v1_t* t = p->t;
  void* send = p->send;
  void* recv = p->recv;
  const bool returned = within(10, [res, t, send, recv, recvFirst] {
    if (recvFirst) res->recv = t->recvFree(recv);
    res->send = t->sendFree(send);
    if (!recvFirst) res->recv = t->recvFree(recv);
  });
  if (!returned) return std::string("free (") + (recvFirst ? "receive side first" : "send side first") +
                        ") did not return within 10 s";
  const ncclResult_t rs = res->send, rr = res->recv;
  if (rs != ncclSuccess || rr != ncclSuccess)
    return std::string("sendFree/recvFree returned ") + ncclGetErrorString(rs) + "/" + ncclGetErrorString(rr);
  return "";
}

}  // namespace

namespace {
std::string transportPath(const std::string& spec) {
  return spec.find('/') != std::string::npos ? spec : plexus::findPluginFile("libplexus-" + spec + ".so");
}
}  // namespace

bool isTransportPlugin(const std::string& spec) {
  const std::string path = transportPath(spec);
  void* lib = path.empty() ? nullptr : dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
  const bool yes = lib && dlsym(lib, PLEXUS_TRANSPORT_PLUGIN_SYMBOL);
  if (lib) dlclose(lib);
  return yes;
}

int checkTransport(const std::string& spec,
                   const std::function<void(bool, const std::string&, const std::string&)>& report) {
  const std::string path = transportPath(spec);
  void* lib = path.empty() ? nullptr : dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  const auto* t = lib ? (const plexusTransport_v1_t*)dlsym(lib, PLEXUS_TRANSPORT_PLUGIN_SYMBOL) : nullptr;
  const char* bad = t ? plexus::checkTransportTable(t) : "no " PLEXUS_TRANSPORT_PLUGIN_SYMBOL;
  report(!bad, "load", bad ? (path.empty() ? "no file for '" + spec + "'" : path) + ": " + bad
                           : "'" + std::string(t->name) + "' from " + path + ", ABI " + std::to_string(t->abiVersion) +
                                 (t->proxyProgress ? ", proxy-driven" : ""));
  if (bad) return 1;
  Pair base;
  base.t = t;
  if (ncclResult_t r = t->init(&base.ctx, plexus::debugLog); r != ncclSuccess) {
    report(false, "init", std::string("init returned ") + ncclGetErrorString(r));
    return 1;
  }
  for (int r = 0; r < 2; r++) peers[r] = plexus::localPeerInfo(r, r, plexusBackendHost);
  int can = 0;
  t->canConnect(base.ctx, &peers[0], &peers[1], &can);
  if (!can) {
    report(true, "canConnect", "refuses two ranks of one process on the host backend; the data rules need such a "
                               "pair and are left out");
    t->finalize(base.ctx);
    return 0;
  }
  base.buffSizes[PLEXUS_PROTO_SIMPLE] = PLEXUS_STEPS * 64 * 1024;
  base.buffSizes[PLEXUS_PROTO_LL] = PLEXUS_LL_HOST_SLOTS * PLEXUS_LL_SLOT_BYTES;  // as the core asks for host ranks
  base.buffSizes[PLEXUS_PROTO_LL128] = PLEXUS_LL128_BUFF_BYTES;
  if (t->commInit) {
    for (int r = 0; r < 2; r++) {
      plexusTransportComm_v1_t info{};
      info.commHash = 0x706c6578757321ull;
      info.rank = r;
      info.nRanks = 2;
      info.localRank = r;
      info.nLocalRanks = 2;
      info.trafficClass = -1;
      if (t->commInit(base.ctx, &info, &base.commCtx[r]) != ncclSuccess) {
        report(false, "commInit", "commInit failed for rank " + std::to_string(r));
        return 1;
      }
    }
  }
  report(true, "canConnect", "accepts two ranks of one process on the host backend");

  // Setup, connect and data in both orders; free in both orders.
  std::string why;
  int steps = 0;
  for (bool recvFirst : {false, true}) {
    Pair p = base;
    why = setupAndConnect(&p, recvFirst);
    if (why.empty()) why = checkConn(p);
    if (!why.empty()) {
      why = (recvFirst ? "receive side first: " : "send side first: ") + why;
      break;
    }
    Proxy proxy(t, {p.send, p.recv});
    why = moveSteps(&p, 4 * PLEXUS_STEPS + 3, true, 10);
    proxy.halt();
    if (why.empty() && !proxy.error.empty()) why = proxy.error;
    if (why.empty()) why = freePair(&p, recvFirst);
    if (!why.empty()) {
      why = (recvFirst ? "receive side first: " : "send side first: ") + why;
      break;
    }
    steps += 4 * PLEXUS_STEPS + 3;
  }
  report(why.empty(), "steps",
         why.empty() ? "set up and connected in both orders (connect polled on both sides), " + std::to_string(steps) +
                           " steps of 0 B to a full slot through every slot several times, every byte right (Simple "
                           "handshake: credit by head, size in connFifo, tail; recvWanted; freed in both orders)"
                     : why);

  // Closing with data in flight: the sender fills every slot, the receiver takes nothing, then both are freed.
  {
    Pair p = base;
    why = setupAndConnect(&p, false);
    if (why.empty()) {
      Proxy proxy(t, {p.send, p.recv});
      why = moveSteps(&p, PLEXUS_STEPS, false, 5);
      const auto settle = Clock::now() + std::chrono::milliseconds(200);
      while (Clock::now() < settle && proxy.error.empty()) std::this_thread::yield();  // let the proxy move some
      proxy.halt();
      if (why.empty() && !proxy.error.empty()) why = proxy.error;
      if (why.empty()) why = freePair(&p, false);
    }
    report(why.empty(), "close", why.empty() ? "freed with " + std::to_string(PLEXUS_STEPS) + " steps in flight, "
                                               "within 10 s, with ncclSuccess" : why);
  }
  // LL and LL128 lines, through the primitives.
  {
    std::string how[2];
    Pair p = base;
    why = setupAndConnect(&p, false);
    // Kernels would run past buffers that connectors misdescribe: not run over them.
    const std::string bad = why.empty() ? checkConn(p) : "";
    if (!bad.empty()) {
      freePair(&p, false);
      why = "not run: " + bad;
    }
    if (why.empty()) {
      Proxy proxy(t, {p.send, p.recv});
      why = moveLines(&p, PLEXUS_PROTO_LL, &how[0]);
      if (why.empty()) why = moveLines(&p, PLEXUS_PROTO_LL128, &how[1]);
      proxy.halt();
      if (why.empty() && !proxy.error.empty()) why = proxy.error;
      const std::string freed = freePair(&p, false);
      if (why.empty()) why = freed;
    }
    report(why.empty(), "lines", why.empty() ? how[0] + "; " + how[1] : why);
  }
  // Zero-copy, where the transport offers it.
  if (t->structSize >= sizeof(plexusTransport_v1_t) && t->p2pDescribe && t->p2pWrite) {
    // Zero-copy beyond an address space is for ranks of different processes: the sender is presented as another
    // process of this machine (its own pid and process hash), while the receiver's pid stays this process's, where
    // the writes land.
    const plexusPeerInfo_v1_t saved = peers[0];
    peers[0].pid = saved.pid + 1;
    peers[0].pidHash = saved.pidHash ^ 0x5bd1e995ull;
    Pair p = base;
    std::string how;
    why = setupAndConnect(&p, false);
    if (why.empty()) why = zeroCopy(&p, &how);
    const std::string freed = freePair(&p, false);
    if (why.empty()) why = freed;
    peers[0] = saved;
    report(why.empty(), "zero-copy", why.empty() ? how : why);
  } else {
    report(true, "zero-copy", "not offered (p2pDescribe/p2pWrite are optional): messages go through the slots");
  }
  bool ok = true;
  for (int r = 0; r < 2; r++)
    if (t->commFinalize && base.commCtx[r]) ok &= t->commFinalize(base.commCtx[r]) == ncclSuccess;
  ok &= t->finalize(base.ctx) == ncclSuccess;
  report(ok, "finalize", ok ? "commFinalize and finalize returned ncclSuccess" : "commFinalize or finalize failed");
  return 0;
}
