// The rules: NCCL's contract for a net plugin (nccl-abi.md §2.9, NCCL's plugins/net/README.md), one small
// function per side of each. The receiver side runs alone when a rule has no sender side.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>

#include "misc/debug.h"
#include "netcheck.h"

namespace netcheck {
using plexus::format;

namespace {

constexpr int kTag = 1;  // NCCL's tags: isend passes the sender's rank, irecv the peer's rank: they match

double ms(double seconds) { return seconds * 1e3; }

// Both sides done with their transfers before either closes a comm (the close rules order closes
// themselves); the Connection then closes what is open when the rule's function returns.
void finish(Worker& w) {
  w.link.signal('F');
  w.link.expect('F', "end of transfers");
}

// One message through a connection, checked: it is up and matches.
void exchangeOne(Worker& w, void* comm, uint32_t id) {
  std::vector<Message> msgs{{4096, id}};
  if (w.role == Role::Sender)
    sendStream(w, comm, msgs, 1, kTag);
  else
    recvStream(w, comm, msgs, 1, kTag, 4096);
}

// ---- init: load, init, devices, finalize ----

std::string initRule(Worker& w) {
  // setup() opened the plugin, made a context and counted the devices. NCCL (v11+) makes one context per
  // communicator, so a second one must come and go beside the first.
  step("init of a second context");
  void* second = nullptr;
  require(w.init(&second, w.commId ^ 0x9e3779b97f4a7c15ull), "init of a second context (a second communicator)");
  require(w.finalize(second), "finalize of the second context");
  require(w.finalize(w.ctx), "finalize");
  w.ctx = nullptr;
  return format(
      "%s: init made a context, devices reported %d; a second context came and went beside it; finalize "
      "returned ncclSuccess for both",
      w.plugin->label.c_str(), w.ndev);
}

// What the plugin's ABI promised: NCCL up to 2.18 (ABI v6) kept at most 8 requests in flight per comm.
int maxRequests(const Worker& w) { return w.plugin->version <= 6 ? NCCL_NET_MAX_REQUESTS_V6 : NCCL_NET_MAX_REQUESTS; }

// ---- init leaves the environment alone ----

std::string environmentRule(Worker& w) {
  if (!w.envChanged.empty())
    fail("init changed the process environment (%s): setenv races getenv in the application's other threads "
         "(glibc's are not safe together); take settings from the context or NCCL's variables instead",
         w.envChanged.c_str());
  return "init set, changed and removed no environment variable";
}

// ---- properties of every device ----

std::string ptrText(int bits) {
  std::string s;
  if (bits & NCCL_PTR_HOST) s += "|HOST";
  if (bits & NCCL_PTR_CUDA) s += "|CUDA";
  if (bits & NCCL_PTR_DMABUF) s += "|DMABUF";
  return s.empty() ? "none" : s.substr(1);
}

std::string propertiesRule(Worker& w) {
  for (int d = 0; d < w.ndev; d++) {
    ncclNetProperties_v12_t p{};
    require(w.getProperties(d, &p), "getProperties");
    if (!p.name)
      fail("device %d: name is NULL; expected a name (NCCL prints it and matches NCCL_IB_HCA-style lists)", d);
    if (!(p.ptrSupport & NCCL_PTR_HOST))
      fail("device %d ('%s'): ptrSupport is 0x%x (%s), without NCCL_PTR_HOST (0x1); expected host memory support", d,
           p.name, p.ptrSupport, ptrText(p.ptrSupport).c_str());
    if (p.speed <= 0)
      fail("device %d ('%s'): speed is %d Mbps; expected > 0 (NCCL's topology divides by it)", d, p.name, p.speed);
    if (p.maxRecvs < 1)
      fail("device %d ('%s'): maxRecvs is %d; expected >= 1 (buffers per irecv)", d, p.name, p.maxRecvs);
    if (p.maxComms < 1) fail("device %d ('%s'): maxComms is %d; expected >= 1", d, p.name, p.maxComms);
    if (!(p.latency >= 0))
      fail("device %d ('%s'): latency is %g us; expected >= 0 (0: NCCL's default)", d, p.name, p.latency);
    if (p.netDeviceType != NCCL_NET_DEVICE_HOST)
      fail(
          "device %d ('%s'): netDeviceType is %d; expected NCCL_NET_DEVICE_HOST (0): Plexus hands the plugin host "
          "buffers and runs no device-side network code",
          d, p.name, (int)p.netDeviceType);
    if (p.maxP2pBytes < 1)
      fail("device %d ('%s'): maxP2pBytes is 0; expected >= 1 (NCCL splits transfers by it)", d, p.name);
  }
  const auto& p = w.props;
  return format(
      "%d device(s), each named, with NCCL_PTR_HOST, speed > 0, maxRecvs >= 1, maxComms >= 1 and the host "
      "device type; device %d: '%s', %d Mbps, latency %g us, ptrSupport %s, maxRecvs %d, forceFlush %d",
      w.ndev, w.opt.device, p.name, p.speed, p.latency, ptrText(p.ptrSupport).c_str(), p.maxRecvs, p.forceFlush);
}

// ---- listen: a non-NULL listenComm and a handle within NCCL_NET_HANDLE_MAXSIZE ----

std::string listenRule(Worker& w) {
  constexpr size_t kGuard = 64;
  constexpr unsigned char kFill = 0xa5;
  unsigned char buf[2][NCCL_NET_HANDLE_MAXSIZE + kGuard];
  void* comms[2] = {nullptr, nullptr};
  int lastWritten = -1;
  for (int k = 0; k < 2; k++) {  // NCCL listens once per connection: several listenComms live at once
    memset(buf[k], kFill, sizeof buf[k]);
    step("listen %d of 2", k + 1);
    require(w.listen(buf[k], &comms[k]), "listen");
    if (!comms[k]) fail("listen %d of 2 returned ncclSuccess and a NULL listenComm; NCCL needs a non-NULL one", k + 1);
    for (size_t b = NCCL_NET_HANDLE_MAXSIZE; b < sizeof buf[k]; b++)
      if (buf[k][b] != kFill)
        fail(
            "listen wrote past the handle: byte %zu changed; NCCL's handle buffer is NCCL_NET_HANDLE_MAXSIZE (%d) "
            "bytes",
            b, NCCL_NET_HANDLE_MAXSIZE);
    for (int b = NCCL_NET_HANDLE_MAXSIZE - 1; b > lastWritten; b--)
      if (buf[k][b] != kFill) lastWritten = b;
  }
  if (comms[0] == comms[1]) fail("two listens at once returned the same listenComm %p; expected two", comms[0]);
  if (lastWritten < 0)
    fail("listen wrote nothing into the handle; the sender's connect needs it to find this listener");
  require(w.closeListen(comms[1]), "closeListen of a listenComm never accepted on");
  require(w.closeListen(comms[0]), "closeListen of a listenComm never accepted on");
  return format(
      "listenComm non-NULL; the handle within %d bytes (last byte written: %d), the %zu guard bytes after "
      "it untouched; two listens at once, both closed before any accept",
      NCCL_NET_HANDLE_MAXSIZE, lastWritten, kGuard);
}

// ---- connect / accept: non-blocking, retried until the comm is there ----

// Each call returns at once, NULL until ready: the first accept comes before any connect and the first connect
// while the receiver is not in accept, so a plugin that waits for the other side is caught by the watchdog.
double promptBound(const Worker& w) { return std::min(1.0, w.opt.timeout / 4); }

std::string connectReceiver(Worker& w) {
  Connection c(w);
  step("listen");
  c.listen();
  w.link.put(c.handle, sizeof c.handle);
  step("the first accept, before any connect");
  bool early = c.acceptOnce();
  w.link.signal('A');
  w.link.expect('C', "first connect call");
  step("accept until the recvComm is there");
  while (!c.recvComm && !c.acceptOnce()) {
    if (w.expired())
      fail(
          "accept gave a NULL comm %d times in %.1f s after the sender's first connect; expected the comm within the "
          "bound",
          c.acceptCalls, w.opt.timeout);
    sched_yield();
  }
  if (c.slowestCall > promptBound(w))
    fail(
        "an accept call took %.0f ms; expected each to return at once (here within %.0f ms), with a NULL comm until "
        "ready",
        ms(c.slowestCall), ms(promptBound(w)));
  c.closeListen();
  exchangeOne(w, c.recvComm, 1);
  finish(w);
  return format("accept: %d call%s%s, slowest %.2f ms", c.acceptCalls, c.acceptCalls == 1 ? "" : "s",
                early ? " (a comm at the first, before any connect)" : " (the first before any connect)",
                ms(c.slowestCall));
}

std::string connectSender(Worker& w) {
  Connection c(w);
  w.link.get(c.handle, sizeof c.handle, "listen handle");
  w.link.expect('A', "first accept call");
  step("the first connect, the receiver not in accept");
  c.connectOnce(c.handle);
  w.link.signal('C');
  step("connect until the sendComm is there");
  while (!c.sendComm && !c.connectOnce(c.handle)) {
    if (w.expired())
      fail(
          "connect gave a NULL comm %d times in %.1f s while the receiver was accepting; expected the comm within the "
          "bound",
          c.connectCalls, w.opt.timeout);
    sched_yield();
  }
  if (c.slowestCall > promptBound(w))
    fail(
        "a connect call took %.0f ms; expected each to return at once (here within %.0f ms), with a NULL comm until "
        "ready",
        ms(c.slowestCall), ms(promptBound(w)));
  exchangeOne(w, c.sendComm, 1);
  finish(w);
  return format(
      "connect: %d call%s, slowest %.2f ms; each returned at once, NULL until ready, and the comms carried "
      "a message",
      c.connectCalls, c.connectCalls == 1 ? "" : "s", ms(c.slowestCall));
}

// ---- regMr / deregMr of host memory ----

void regmrSide(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c);
  HostMemory mem(17 << 20);
  struct Region {
    size_t offset, size;
  };
  const Region regions[] = {{0, 4096}, {1, 1000}, {4096, 1 << 20}, {0, 16 << 20}, {4096, 1 << 20}};
  step("regMr of 5 host regions");
  std::vector<std::unique_ptr<Registration>> regs;
  for (const Region& r : regions)
    regs.push_back(std::make_unique<Registration>(w, comm, mem.data() + r.offset, r.size));
  // A message through the unaligned region: its handle is one the data path accepts.
  step("a message through the unaligned region");
  char* p = mem.data() + 1;
  void* mh = regs[1]->handle();
  if (w.role == Role::Sender) {
    fillPattern(p, 1000, 7);
    waitDone(w, postSend(w, comm, p, 1000, kTag, mh, "the message"), nullptr, "the send");
  } else {
    size_t size = 1000;
    int tag = kTag, got = -1;
    waitDone(w, postRecv(w, comm, 1, (void**)&p, &size, &tag, &mh, "the message"), &got, "the receive");
    if (got != 1000 || !matchesPattern(p, 1000, 7))
      fail("the 1000-byte message through the unaligned registration arrived as %d bytes%s", got,
           got == 1000 ? " with other contents" : "");
  }
  step("deregMr of the 5 regions");
  while (!regs.empty()) regs.back()->release(), regs.pop_back();
  finish(w);
}

std::string regmrReceiver(Worker& w) {
  regmrSide(w);
  return "on the recvComm and the sendComm: 5 host regions each (4 KiB page, 1000 B unaligned, 1 MiB, 16 MiB, and one "
         "registered twice); a 1000-byte message between the unaligned ones arrived intact; all deregistered";
}

std::string regmrSender(Worker& w) {
  regmrSide(w);
  return "";
}

// ---- in-order matching ----

// 64 distinct sizes, 1 B .. 256 KiB, in no order: i * 40503 mod 262139 (a prime) repeats for no i < 262139.
std::vector<Message> orderMessages() {
  std::vector<Message> m;
  for (uint32_t i = 0; i < 64; i++) m.push_back({1 + (size_t)i * 40503 % 262139, i});
  return m;
}
constexpr int kOrderWindow = 8;

std::string orderReceiver(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c);
  recvStream(w, comm, orderMessages(), kOrderWindow, kTag, 262144);
  finish(w);
  return format(
      "64 messages of distinct sizes (1 B .. 256 KiB) and contents, %d in flight, each receive of 256 KiB: "
      "matched in posting order, each with its size and bytes",
      kOrderWindow);
}

std::string orderSender(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c);
  sendStream(w, comm, orderMessages(), kOrderWindow, kTag);
  finish(w);
  return "";
}

// ---- a receive larger than its send ----

const std::vector<Message> kLarger = {{1, 0}, {1000, 1}, {4096, 2}, {65537, 3}, {(1 << 20) - 1, 4}};

std::string largerReceiver(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c);
  recvStream(w, comm, kLarger, 2, kTag, 1 << 20);
  finish(w);
  return "receives of 1 MiB for sends of 1, 1000, 4096, 65537 and 1048575 B: test reported each send's size, bytes "
         "intact";
}

std::string largerSender(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c);
  sendStream(w, comm, kLarger, 2, kTag);
  finish(w);
  return "";
}

// ---- zero-byte messages ----

const std::vector<Message> kZero = {{0, 0}, {17, 1}, {0, 2}, {0, 3}, {4096, 4}, {0, 5}, {1, 6}};

std::string zeroReceiver(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c);
  recvStream(w, comm, kZero, 4, kTag, 8192);
  finish(w);
  return "sends of 0, 17, 0, 0, 4096, 0, 1 B into 8 KiB receives: test reported 0 for each empty one, the others "
         "intact, all in order";
}

std::string zeroSender(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c);
  sendStream(w, comm, kZero, 4, kTag);
  finish(w);
  return "";
}

// ---- NULL requests: retried, counted ----

// The receiver starts posting late, so that a plugin that needs the receive posted before the send (as NCCL's IB
// transport does) shows its NULL requests.
constexpr int kNullMessages = 512;
constexpr int kNullDelayMs = 100;

std::vector<Message> nullMessages() {
  std::vector<Message> m;
  for (uint32_t i = 0; i < kNullMessages; i++) m.push_back({64 + i % 7, i});
  return m;
}

std::string nullReceiver(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c);
  usleep(kNullDelayMs * 1000);
  recvStream(w, comm, nullMessages(), maxRequests(w), kTag, 128);
  finish(w);
  return format("irecv gave a NULL request %ld times in %ld calls; %d messages, %d in flight, all intact after retries",
                w.count.irecvNull, w.count.irecvCalls, kNullMessages, maxRequests(w));
}

std::string nullSender(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c);
  sendStream(w, comm, nullMessages(), maxRequests(w), kTag);
  finish(w);
  return format("isend gave a NULL request %ld times in %ld calls (the receiver began %d ms late); each retried",
                w.count.isendNull, w.count.isendCalls, kNullDelayMs);
}

// ---- multi-receive: tags choose the buffer ----

constexpr int kMultiRounds = 4;
constexpr int kMultiTag0 = 100;
constexpr size_t kMultiSlot = 8192;

int multiCount(Worker& w) {
  int n = std::min(w.maxRecvs(), 8);
  if (n < 2) skip("maxRecvs is %d: one buffer per irecv, so no tags to choose among", w.props.maxRecvs);
  return n;
}
// The message for buffer k in round r: a size and contents of its own.
Message multiMessage(int r, int k) { return {(size_t)(100 + 37 * k + 1000 * r), (uint32_t)(1000 + 64 * r + k)}; }
// The order the sender sends in: never the buffers' order (reversed, then rotated by one).
int multiOrder(int r, int j, int n) { return r % 2 == 0 ? n - 1 - j : (j + 1) % n; }

std::string multiReceiver(Worker& w) {
  const int n = multiCount(w);
  Connection c(w);
  void* comm = establish(w, c);
  HostMemory mem(kMultiSlot * (size_t)n);
  Registration reg(w, comm, mem.data(), mem.size());
  for (int r = 0; r < kMultiRounds; r++) {
    step("multi-receive %d of %d (%d buffers)", r + 1, kMultiRounds, n);
    std::vector<void*> data(n), mhandles(n, reg.handle());
    std::vector<size_t> sizes(n, kMultiSlot);
    std::vector<int> tags(n), got(n, -1);
    for (int k = 0; k < n; k++) data[k] = mem.data() + k * kMultiSlot, tags[k] = kMultiTag0 + k;
    void* req = postRecv(w, comm, n, data.data(), sizes.data(), tags.data(), mhandles.data(), "a multi-receive");
    waitDone(w, req, got.data(), "a multi-receive");
    for (int k = 0; k < n; k++) {
      Message m = multiMessage(r, k);
      if (got[k] == (int)m.size && matchesPattern(data[k], m.size, m.id)) continue;
      for (int o = 0; o < n; o++) {
        Message other = multiMessage(r, o);
        if (got[k] == (int)other.size && matchesPattern(data[k], other.size, other.id))
          fail(
              "multi-receive %d: buffer %d (tag %d) got the message sent with tag %d; expected tag %d's (%zu B): tags "
              "choose the buffer within a multi-receive",
              r + 1, k, tags[k], kMultiTag0 + o, tags[k], m.size);
      }
      fail("multi-receive %d: buffer %d (tag %d) reported %d B%s; expected its tag's message of %zu B", r + 1, k,
           tags[k], got[k], got[k] == (int)m.size ? " of other contents" : "", m.size);
    }
  }
  reg.release();
  finish(w);
  return format(
      "%d multi-receives of %d buffers (tags %d..%d), one request each, the sends in other orders "
      "(reversed, rotated): each buffer got its tag's size and bytes",
      kMultiRounds, n, kMultiTag0, kMultiTag0 + n - 1);
}

std::string multiSender(Worker& w) {
  const int n = multiCount(w);
  Connection c(w);
  void* comm = establish(w, c);
  HostMemory mem(kMultiSlot * (size_t)n);
  Registration reg(w, comm, mem.data(), mem.size());
  for (int r = 0; r < kMultiRounds; r++) {
    step("sends for multi-receive %d of %d", r + 1, kMultiRounds);
    std::vector<void*> reqs;
    for (int j = 0; j < n; j++) {
      int k = multiOrder(r, j, n);
      Message m = multiMessage(r, k);
      char* p = mem.data() + k * kMultiSlot;
      fillPattern(p, m.size, m.id);
      reqs.push_back(postSend(w, comm, p, m.size, kMultiTag0 + k, reg.handle(), "a send to a multi-receive"));
    }
    for (void* req : reqs) waitDone(w, req, nullptr, "a send to a multi-receive");
  }
  reg.release();
  finish(w);
  return "";
}

// ---- NCCL_NET_MAX_REQUESTS in flight, posted before any test ----


constexpr size_t kMaxSlot = 4096;
constexpr int kMaxTag0 = 200;
// Buffers per receive: maxRecvs, up to the most NCCL's proxy ever groups (NCCL_PROXY_MAX_SUBS, 64).
int maxBuffers(const Worker& w) { return std::min(w.maxRecvs(), 64); }
Message maxMessage(int i) { return {(size_t)(512 + i % 3000), (uint32_t)(5000 + i)}; }

std::string maxReceiver(Worker& w) {
  const int R = maxRequests(w), n = maxBuffers(w);
  Connection c(w);
  void* comm = establish(w, c);
  HostMemory mem(kMaxSlot * (size_t)(R * n));
  Registration reg(w, comm, mem.data(), mem.size());
  std::vector<void*> reqs;
  std::vector<std::vector<void*>> data(R, std::vector<void*>(n));
  step("posting %d irecvs without testing any", R);
  for (int r = 0; r < R; r++) {
    std::vector<size_t> sizes(n, kMaxSlot);
    std::vector<int> tags(n);
    std::vector<void*> mhandles(n, reg.handle());
    for (int k = 0; k < n; k++) data[r][k] = mem.data() + (size_t)(r * n + k) * kMaxSlot, tags[k] = kMaxTag0 + k;
    void* req;
    while (!(req = tryRecv(w, comm, n, data[r].data(), sizes.data(), tags.data(), mhandles.data()))) {
      if (w.expired())
        fail(
            "irecv %d of %d kept giving a NULL request for %.1f s with %d posted and none tested; NCCL keeps "
            "NCCL_NET_MAX_REQUESTS (%d) receives in flight on a comm",
            r + 1, R, w.opt.timeout, r, R);
      sched_yield();
    }
    reqs.push_back(req);
  }
  step("testing the %d irecvs", R);
  std::vector<int> got(n);
  for (int r = 0; r < R; r++) {
    std::fill(got.begin(), got.end(), -1);
    waitDone(w, reqs[r], got.data(), "one of the receives in flight");
    for (int k = 0; k < n; k++) {
      Message m = maxMessage(r * n + k);
      if (got[k] != (int)m.size || !matchesPattern(data[r][k], m.size, m.id))
        fail("receive %d of %d (buffer %d) reported %d B%s; expected message %d (%zu B)", r + 1, R, k, got[k],
             got[k] == (int)m.size ? " of other contents" : "", r * n + k + 1, m.size);
    }
  }
  reg.release();
  finish(w);
  return format("%d irecvs%s in flight at once (posted before any test), then all done and intact", R,
                n > 1 ? format(" of %d buffers", n).c_str() : "");
}

std::string maxSender(Worker& w) {
  const int R = maxRequests(w), n = maxBuffers(w), total = R * n;
  Connection c(w);
  void* comm = establish(w, c);
  HostMemory mem(kMaxSlot * (size_t)total);
  Registration reg(w, comm, mem.data(), mem.size());
  std::vector<void*> reqs;
  step("posting %d isends without testing any", total);
  for (int i = 0; i < total; i++) {
    Message m = maxMessage(i);
    char* p = mem.data() + (size_t)i * kMaxSlot;
    fillPattern(p, m.size, m.id);
    void* req;
    while (!(req = trySend(w, comm, p, m.size, kMaxTag0 + i % n, reg.handle()))) {
      if (w.expired())
        fail(
            "isend %d of %d kept giving a NULL request for %.1f s with %d posted and none tested; a sendComm must take "
            "NCCL_NET_MAX_REQUESTS (%d) x maxRecvs (%d) sends in flight",
            i + 1, total, w.opt.timeout, i, R, n);
      sched_yield();
    }
    reqs.push_back(req);
  }
  step("testing the %d isends", total);
  for (void* req : reqs) waitDone(w, req, nullptr, "one of the sends in flight");
  reg.release();
  finish(w);
  return format("%d isends (NCCL_NET_MAX_REQUESTS x maxRecvs %d) in flight at once, then all done", total, n);
}

// ---- test alone brings every request to done ----

const std::vector<Message> kTestDone = {{4 << 20, 0},       {1, 1},     {1 << 20, 2}, {3000, 3},
                                        {(2 << 20) + 5, 4}, {65536, 5}, {7, 6},       {(4 << 20) - 1, 7}};

// Posts every request (retrying NULL ones, testing none), then tests them oldest first, as NCCL's proxy
// does, until each is done; returns the most test calls one needed.
long postThenTest(Worker& w, void* comm, HostMemory& mem, void* mh) {
  const int n = (int)kTestDone.size();
  const size_t slot = 4 << 20;
  std::vector<void*> reqs;
  for (int i = 0; i < n; i++) {
    char* p = mem.data() + (size_t)i * slot;
    if (w.role == Role::Sender) {
      fillPattern(p, kTestDone[i].size, kTestDone[i].id);
      reqs.push_back(postSend(w, comm, p, kTestDone[i].size, kTag, mh, "a request"));
    } else {
      size_t size = slot;
      int tag = kTag;
      reqs.push_back(postRecv(w, comm, 1, (void**)&p, &size, &tag, &mh, "a request"));
    }
  }
  long most = 0;
  for (int i = 0; i < n; i++) {
    int got = -1;
    char what[64];
    snprintf(what, sizeof what, "request %d of %d", i + 1, n);
    most = std::max(most, waitDone(w, reqs[i], &got, what));
    const char* p = mem.data() + (size_t)i * slot;
    if (w.role == Role::Receiver && (got != (int)kTestDone[i].size || !matchesPattern(p, got, kTestDone[i].id)))
      fail("receive %d of %d reported done with %d B%s; expected %zu B", i + 1, n, got,
           got == (int)kTestDone[i].size ? " of other contents" : "", kTestDone[i].size);
  }
  return most;
}

std::string testDoneSide(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c);
  HostMemory mem((4 << 20) * kTestDone.size());
  Registration reg(w, comm, mem.data(), mem.size());
  step("posting 8 requests, then testing each until done");
  long most = postThenTest(w, comm, mem, reg.handle());
  reg.release();
  finish(w);
  return format("%zu %s (1 B .. 4 MiB) posted, then test alone brought each to done (at most %ld calls)%s",
                kTestDone.size(), w.role == Role::Sender ? "sends" : "receives", most,
                w.role == Role::Receiver ? " with its size" : "");
}

// ---- iflush of host memory ----

void flushNeeded(Worker& w) {
  if (!w.props.forceFlush)
    skip(
        "forceFlush is 0: NCCL calls iflush only after receives into GPU memory that need a GDR flush, never on "
        "host memory");
}

std::string flushReceiver(Worker& w) {
  flushNeeded(w);
  Connection c(w);
  void* comm = establish(w, c);
  HostMemory mem(65536);
  Registration reg(w, comm, mem.data(), mem.size());
  void* p = mem.data();
  void* mh = reg.handle();
  size_t cap = 65536;
  int tag = kTag, got = -1;
  step("a receive, then iflush");
  waitDone(w, postRecv(w, comm, 1, &p, &cap, &tag, &mh, "the message"), &got, "the receive");
  if (got != 65536 || !matchesPattern(p, 65536, 11))
    fail("the 64 KiB message arrived as %d B or with other bytes", got);
  void* req = nullptr;
  require(w.iflush(comm, 1, &p, &got, &mh, &req), "iflush");
  std::string how = "iflush gave no request (nothing to flush)";
  if (req) {
    long calls = waitDone(w, req, nullptr, "the flush (test with sizes NULL, as NCCL)");
    how = format("iflush's request done after %ld test calls (sizes NULL, as NCCL)", calls);
  }
  reg.release();
  finish(w);
  return "forceFlush is set: a 64 KiB host receive, then " + how;
}

std::string flushSender(Worker& w) {
  flushNeeded(w);
  Connection c(w);
  void* comm = establish(w, c);
  sendStream(w, comm, {{65536, 11}}, 1, kTag);
  finish(w);
  return "";
}

// ---- irecv with NCCL_NET_OPTIONAL_RECV_COMPLETION ----

std::string optionalReceiver(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c);
  HostMemory mem(2 * 4096);
  Registration reg(w, comm, mem.data(), mem.size());
  void* p = mem.data();
  void* mh = reg.handle();
  size_t cap = 4096;
  int tag = kTag, got = -1;
  step("irecv with *request = NCCL_NET_OPTIONAL_RECV_COMPLETION");
  void* req = nullptr;
  for (long tries = 1; !req; tries++) {
    req = (void*)NCCL_NET_OPTIONAL_RECV_COMPLETION;  // what NCCL's LL protocols pass in
    w.count.irecvCalls++;
    require(w.irecv(comm, 1, &p, &cap, &tag, &mh, &req), "irecv with *request = NCCL_NET_OPTIONAL_RECV_COMPLETION");
    if (req == (void*)NCCL_NET_OPTIONAL_RECV_COMPLETION)
      fail(
          "irecv given *request = NCCL_NET_OPTIONAL_RECV_COMPLETION (0x1) left it so; expected a request NCCL can "
          "test (or NULL to retry)");
    if (!req && w.expired()) fail("irecv gave a NULL request %ld times in %.1f s", tries, w.opt.timeout);
  }
  waitDone(w, req, &got, "the receive with the optional-completion hint");
  recvStream(w, comm, {{4096, 22}}, 1, kTag, 4096);  // the stream goes on in order after it
  reg.release();
  finish(w);
  return format(
      "irecv with *request = NCCL_NET_OPTIONAL_RECV_COMPLETION (NCCL's LL protocols) gave a request that "
      "test completed; the next message then arrived intact%s",
      w.plugin->version <= 10 ? format(" (a v%d plugin: the core's adapter clears the hint first, as NCCL's "
                                       "does)",
                                       w.plugin->version)
                                    .c_str()
                              : "");
}

std::string optionalSender(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c);
  sendStream(w, comm, {{4096, 21}, {4096, 22}}, 2, kTag);
  finish(w);
  return "";
}

// ---- a peer that exits mid-stream ----

constexpr size_t kBig = 4 << 20;
const std::vector<Message> kMidStream = {{4096, 0}, {4096, 1}, {kBig, 2}, {kBig, 3}};

// How long the survivor watches its pending requests after the peer died: a third of the bound.
double watchWindow(const Worker& w) { return w.opt.timeout / 3; }

// The receiver survives: messages 0 and 1 arrive, the sender exits with message 2 in flight and never sends 3.
std::string senderExitsReceiver(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c);
  HostMemory mem(kBig * kMidStream.size());
  Registration reg(w, comm, mem.data(), mem.size());
  std::vector<void*> reqs;
  step("posting 4 receives");
  for (size_t i = 0; i < kMidStream.size(); i++) {
    void* p = mem.data() + i * kBig;
    size_t cap = kBig;
    int tag = kTag;
    void* mh = reg.handle();
    reqs.push_back(postRecv(w, comm, 1, &p, &cap, &tag, &mh, "a receive"));
  }
  for (int i = 0; i < 2; i++) {
    int got = -1;
    waitDone(w, reqs[i], &got, "one of the first two receives");
    if (got != 4096 || !matchesPattern(mem.data() + i * kBig, 4096, i))
      fail("message %d arrived as %d B or with other bytes; expected 4096 B", i + 1, got);
  }
  w.link.signal('G');
  step("waiting for the sender to exit");
  if (!w.link.waitClosed(w.deadline)) lost("the sender did not exit within the bound");
  const auto died = Clock::now(),
             until = died + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(watchWindow(w)));
  step("testing the receives pending when the sender died");
  std::string outcome;
  for (int i = 2; i < 4 && outcome.empty(); i++) {
    for (;;) {
      int done = 0, got = -1;
      w.count.testCalls++;
      ncclResult_t r = w.test(reqs[i], &done, &got);
      if (r != ncclSuccess) {
        outcome = format(
            "test of receive %d of 4 returned %s %.1f ms after the sender died (NCCL then fails the "
            "communicator)",
            i + 1, resultName(r), ms(secondsSince(died)));
        break;
      }
      if (done) {
        if (i == 2 && got == (int)kBig && matchesPattern(mem.data() + 2 * kBig, kBig, 2)) break;  // sent before it died
        fail("receive %d of 4 reported done with %d B after the sender died%s; expected an error or no completion",
             i + 1, got, i == 3 ? ", though the sender never posted message 4" : " with message 3 incomplete");
      }
      if (Clock::now() >= until) {
        outcome = format(
            "no error: receive %d of 4 was still pending %.1f s after the sender died (the plugin does "
            "not report a dead peer; NCCL then relies on its own timeouts)",
            i + 1, watchWindow(w));
        break;
      }
      sched_yield();
    }
  }
  step("closing after the peer's death");
  ncclResult_t dereg = reg.drop(), closed = w.closeRecv(comm);
  c.recvComm = nullptr;
  return outcome + format("; deregMr then returned %s, closeRecv %s", resultName(dereg), resultName(closed));
}

std::string senderExitsSender(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c);
  HostMemory mem(kBig);
  Registration reg(w, comm, mem.data(), mem.size());
  step("sending 2 messages");
  for (int i = 0; i < 2; i++) {
    fillPattern(mem.data(), 4096, i);
    waitDone(w, postSend(w, comm, mem.data(), 4096, kTag, reg.handle(), "a message"), nullptr, "a send");
  }
  w.link.expect('G', "signal to go on");
  step("posting message 3, then exiting");
  fillPattern(mem.data(), kBig, 2);
  void* req = postSend(w, comm, mem.data(), kBig, kTag, reg.handle(), "message 3");
  testOnce(w, req, nullptr, "message 3");
  pass("the sender exited (without closing) with message 3 of 4 (4 MiB) in flight");
}

// The sender survives: message 0 arrives, the receiver exits with a receive posted; the sender then sends.
std::string receiverExitsReceiver(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c);
  HostMemory mem(kBig * 2);
  Registration reg(w, comm, mem.data(), mem.size());
  int got = -1;
  void* p = mem.data();
  size_t cap = kBig;
  int tag = kTag;
  void* mh = reg.handle();
  step("receiving message 1");
  waitDone(w, postRecv(w, comm, 1, &p, &cap, &tag, &mh, "message 1"), &got, "message 1");
  p = mem.data() + kBig;
  postRecv(w, comm, 1, &p, &cap, &tag, &mh, "message 2");
  w.link.signal('G');
  pass("the receiver exited (without closing) with a receive posted");
}

std::string receiverExitsSender(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c);
  HostMemory mem(kBig);
  Registration reg(w, comm, mem.data(), mem.size());
  fillPattern(mem.data(), 4096, 0);
  step("sending message 1");
  waitDone(w, postSend(w, comm, mem.data(), 4096, kTag, reg.handle(), "message 1"), nullptr, "message 1");
  w.link.expect('G', "signal that it exits");
  step("waiting for the receiver to exit");
  if (!w.link.waitClosed(w.deadline)) lost("the receiver did not exit within the bound");
  const auto died = Clock::now(),
             until = died + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(watchWindow(w)));
  step("sending 3 messages of 4 MiB to the dead receiver");
  std::string outcome;
  std::vector<void*> reqs;
  int done = 0;
  while (outcome.empty()) {
    ncclResult_t r = ncclSuccess;
    if (reqs.size() < 3) {
      void* req = nullptr;
      w.count.isendCalls++;
      r = w.isend(comm, mem.data(), kBig, kTag, reg.handle(), &req);
      if (r == ncclSuccess && req) reqs.push_back(req);
      if (r != ncclSuccess)
        outcome = format("isend %zu of 3 returned %s %.1f ms after the receiver died", reqs.size() + 1, resultName(r),
                         ms(secondsSince(died)));
    }
    if (outcome.empty() && done < (int)reqs.size()) {
      int isDone = 0, size = -1;
      w.count.testCalls++;
      r = w.test(reqs[done], &isDone, &size);
      if (r != ncclSuccess)
        outcome = format(
            "test of send %d of 3 returned %s %.1f ms after the receiver died (NCCL then fails the "
            "communicator)",
            done + 1, resultName(r), ms(secondsSince(died)));
      else if (isDone && ++done == 3)
        outcome =
            "no error: all 3 sends completed (a send is done once its buffer may be reused; the data went to "
            "buffers on the way)";
    }
    if (outcome.empty() && Clock::now() >= until)
      outcome = format(
          "no error: %s %.1f s after the receiver died (the plugin does not report a dead peer; NCCL then "
          "relies on its own timeouts)",
          reqs.size() < 3 ? format("isend %zu of 3 still gave NULL requests", reqs.size() + 1).c_str()
                          : format("send %d of 3 was still pending", done + 1).c_str(),
          watchWindow(w));
    sched_yield();
  }
  step("closing after the peer's death");
  ncclResult_t dereg = reg.drop(), closed = w.closeSend(comm);
  c.sendComm = nullptr;
  return outcome + format("; deregMr then returned %s, closeSend %s", resultName(dereg), resultName(closed));
}

// ---- closes in any order ----

// One side of a close-order rule: a connection that carried messages, then this side's close (send or
// receive comm), first (then it signals `mark`) or after the peer's (it waits for `mark`).
std::string closeInOrder(Worker& w, int messages, bool closeSend, bool first, char mark) {
  Connection c(w);
  void* comm = establish(w, c);
  exchangeOne(w, comm, messages);
  const char* mine = closeSend ? "closeSend" : "closeRecv";
  const char* theirs = closeSend ? "closeRecv" : "closeSend";
  if (!first) w.link.expect(mark, theirs);
  const std::string what = first ? format("%s first", mine) : format("%s after the peer's %s", mine, theirs);
  step("%s", what.c_str());
  auto t0 = Clock::now();
  if (closeSend)
    c.closeSend();
  else
    c.closeRecv();
  if (first) w.link.signal(mark);
  return format("%s returned ncclSuccess in %.2f ms", what.c_str(), ms(secondsSince(t0)));
}

std::string closeSendFirstReceiver(Worker& w) { return closeInOrder(w, 3, false, false, 'S'); }
std::string closeSendFirstSender(Worker& w) { return closeInOrder(w, 3, true, true, 'S'); }
std::string closeRecvFirstReceiver(Worker& w) { return closeInOrder(w, 4, false, true, 'R'); }
std::string closeRecvFirstSender(Worker& w) { return closeInOrder(w, 4, true, false, 'R'); }

// ---- a close with data on its way ----

// NCCL frees a buffer once the close of its comm returns, with the transfer still in flight after an abort or a
// peer's death: by then the plugin must have stopped moving data into or out of it, or waited for the transfer
// to end. Each rule closes one side while a 64 MiB message is part way over, then keeps the plugin busy on a
// second connection of the same context (one worker, one progress engine) with a marker message.
constexpr size_t kLanding = 64 << 20;
constexpr uint32_t kLandingId = 11, kMarkerId = 12;

// Both connections, and the message's memory registered on the first.
struct LandingSetup {
  Connection data, side;
  void* comm;
  void* sideComm;
  HostMemory mem{kLanding};
  Registration reg;
  explicit LandingSetup(Worker& w)
      : data(w), side(w), comm(establish(w, data)), sideComm(establish(w, side)), reg(w, comm, mem.data(), mem.size()) {}
};

// The receiver: posts the 64 MiB receive, lets the sender go, and tests the receive until its first bytes are in
// the buffer, telling the sender ('L') when asked to. A message that lands whole within one test() leaves nothing
// in flight to close: SKIPPED (the sender told 'D').
void* receiveUntilLanding(Worker& w, LandingSetup& s, bool tellSender) {
  void* p = s.mem.data();
  size_t cap = kLanding;
  int tag = kTag;
  void* mh = s.reg.handle();
  void* req = postRecv(w, s.comm, 1, &p, &cap, &tag, &mh, "the 64 MiB receive");
  w.link.signal('G');
  step("testing the 64 MiB receive until its first bytes are in the buffer");
  bool done = false;
  while (!done && !matchesPattern(s.mem.data(), 4096, kLandingId)) {
    done = testOnce(w, req, nullptr, "the 64 MiB receive");
    if (w.expired()) fail("the 64 MiB receive got no data in %.1f s", w.opt.timeout);
  }
  if (tellSender) w.link.signal(done ? 'D' : 'L');
  if (done) skip("the 64 MiB message arrived whole within one test() call: nothing was in flight to close");
  return req;
}

// The side that stays open: tests its request until it completes or fails (the peer closed meanwhile), or half the
// bound passes (the rest never comes); then the marker, and its own close, whatever that returns.
std::string testToEnd(Worker& w, void* req, const char* what, const HostMemory* intact) {
  step("testing %s until it completes or fails, at most half the bound", what);
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(w.opt.timeout / 2));
  for (;;) {
    int done = 0;
    w.count.testCalls++;
    ncclResult_t r = w.test(req, &done, nullptr);
    if (r != ncclSuccess) return format("%s failed with %s", what, resultName(r));
    if (done)
      return format("%s completed%s", what,
                    intact && matchesPattern(intact->data(), kLanding, kLandingId) ? ", intact" : "");
    if (Clock::now() >= until) return format("%s was still pending at half the bound", what);
  }
}

// closeRecv while the message lands: the buffer must not change after it returns.
std::string closeLandingReceiver(Worker& w) {
  LandingSetup s(w);
  receiveUntilLanding(w, s, false);  // the receive goes with the comm
  size_t landed = 0;  // what was in the buffer just before the close, for the report
  while (landed < kLanding && matchesPattern(s.mem.data() + landed, 4096, kLandingId)) landed += 4096;
  step("deregMr and closeRecv with the receive in flight (%s of 64 MiB in)", bytesText(landed).c_str());
  s.reg.release();  // NCCL's order when it frees a connection: its buffers' registrations, then the comm
  auto t0 = Clock::now();
  s.data.closeRecv();
  const double closeMs = ms(secondsSince(t0));
  std::vector<char> atClose(s.mem.data(), s.mem.data() + kLanding);
  step("receiving the marker on the second connection");
  recvStream(w, s.sideComm, {{4096, kMarkerId}}, 1, kTag, 4096);
  finish(w);
  size_t first = 0, changed = 0;
  for (size_t i = 0; i < kLanding; i++)
    if (s.mem.data()[i] != atClose[i] && changed++ == 0) first = i;
  if (changed)
    fail(
        "%zu bytes of the closed receive's buffer changed after closeRecv returned (the first at offset %zu), while "
        "the context went on with another connection: NCCL frees that buffer once closeRecv returns. Stop the "
        "transfer or wait for it to end inside closeRecv",
        changed, first);
  return format(
      "closeRecv (%.1f ms) with a 64 MiB receive in flight, %s or more of it in the buffer: no byte of the buffer "
      "changed after it returned, through a message on a second connection of the same context",
      closeMs, bytesText(landed).c_str());
}

std::string closeLandingSender(Worker& w) {
  LandingSetup s(w);
  fillPattern(s.mem.data(), kLanding, kLandingId);
  w.link.expect('G', "the receive posted");
  void* req = postSend(w, s.comm, s.mem.data(), kLanding, kTag, s.reg.handle(), "the 64 MiB send");
  const std::string outcome = testToEnd(w, req, "the 64 MiB send", nullptr);
  sendStream(w, s.sideComm, {{4096, kMarkerId}}, 1, kTag);
  finish(w);
  s.reg.drop();
  s.data.sendComm = nullptr;  // may be broken now: closed here, whatever it returns
  (void)w.closeSend(s.comm);
  return outcome + "; the marker went out on the second connection";
}

// closeSend while the message is on its way: afterwards the sender takes every access away from the buffer
// (mprotect PROT_NONE), so a plugin that still copies out of it crashes the sender.
std::string closeSendingReceiver(Worker& w) {
  LandingSetup s(w);
  void* req = receiveUntilLanding(w, s, true);
  const std::string outcome = testToEnd(w, req, "the 64 MiB receive", &s.mem);
  recvStream(w, s.sideComm, {{4096, kMarkerId}}, 1, kTag, 4096);
  finish(w);
  s.reg.drop();
  s.data.recvComm = nullptr;  // may be broken now: closed here, whatever it returns
  (void)w.closeRecv(s.comm);
  return outcome;
}

std::string closeSendingSender(Worker& w) {
  LandingSetup s(w);
  fillPattern(s.mem.data(), kLanding, kLandingId);
  w.link.expect('G', "the receive posted");
  void* req = postSend(w, s.comm, s.mem.data(), kLanding, kTag, s.reg.handle(), "the 64 MiB send");
  step("testing the 64 MiB send until the receiver sees its first bytes");
  bool done = false;
  while (!w.link.ready()) {
    if (!done) done = testOnce(w, req, nullptr, "the 64 MiB send");
    if (w.expired()) fail("the receiver saw no byte of the 64 MiB send in %.1f s", w.opt.timeout);
  }
  char seen = 0;
  w.link.get(&seen, 1, "what the receiver saw");
  if (seen == 'D') skip("the 64 MiB message arrived whole within one test() call: nothing was in flight to close");
  if (done) skip("the 64 MiB send was done (its data left the buffer) before the receiver saw its first bytes");
  step("deregMr and closeSend with the send in flight");
  s.reg.release();
  auto t0 = Clock::now();
  s.data.closeSend();
  const double closeMs = ms(secondsSince(t0));
  if (mprotect(s.mem.data(), kLanding, PROT_NONE) != 0) fail("mprotect of the send buffer: %s", strerror(errno));
  step("sending the marker on the second connection, the closed send's buffer inaccessible");
  sendStream(w, s.sideComm, {{4096, kMarkerId}}, 1, kTag);
  finish(w);
  return format(
      "closeSend (%.1f ms) with a 64 MiB send in flight: nothing read its buffer afterwards (no access allowed), "
      "through a message on a second connection of the same context",
      closeMs);
}

std::vector<Message> eightMessages() {
  std::vector<Message> m;
  for (uint32_t i = 0; i < 8; i++) m.push_back({1000 + 100 * i, 300 + i});
  return m;
}

std::string listenEarlyReceiver(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c, /*keepListen=*/true);
  step("closeListen right after accept");
  c.closeListen();
  recvStream(w, comm, eightMessages(), 4, kTag, 4096);
  finish(w);
  return "listenComm closed right after accept (NCCL's order), before any data: 8 messages then arrived intact";
}

std::string listenLateReceiver(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c, /*keepListen=*/true);
  recvStream(w, comm, eightMessages(), 4, kTag, 4096);
  finish(w);
  c.closeRecv();
  w.link.expect('S', "closeSend");
  step("closeListen after both comms closed");
  c.closeListen();
  return "listenComm kept through 8 messages, closed after the recvComm and the peer's sendComm";
}

std::string listenEarlySender(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c);
  sendStream(w, comm, eightMessages(), 4, kTag);
  finish(w);
  return "";
}

std::string listenLateSender(Worker& w) {
  Connection c(w);
  void* comm = establish(w, c);
  sendStream(w, comm, eightMessages(), 4, kTag);
  finish(w);
  c.closeSend();
  w.link.signal('S');  // the receiver closes its listenComm after this
  return "";
}

}  // namespace

const std::vector<Rule>& rules() {
  static const std::vector<Rule> table = {
      {"init",
       "the plugin loads (through the core's loader and adapters), init makes a context, devices >= 1, a "
       "second context beside the first, finalize",
       initRule, nullptr},
      {"environment", "init leaves the process environment as it was (setenv races the application's getenv)",
       environmentRule, nullptr},
      {"properties",
       "getProperties of every device: name, NCCL_PTR_HOST, speed > 0, maxRecvs >= 1, maxComms >= 1, "
       "latency >= 0, host device type",
       propertiesRule, nullptr},
      {"listen",
       "listen gives a non-NULL listenComm and writes no more than NCCL_NET_HANDLE_MAXSIZE bytes of handle; "
       "two at once; closeListen before any accept",
       listenRule, nullptr},
      {"connect",
       "connect and accept never block: each call returns at once, a NULL comm until ready, retried "
       "until the comm is there",
       connectReceiver, connectSender},
      {"regmr",
       "regMr/deregMr of host memory (aligned, unaligned, 16 MiB, twice over) on both comms; the data path "
       "takes the handles",
       regmrReceiver, regmrSender},
      {"order", "sends and receives match in posting order: 64 messages of distinct sizes and contents", orderReceiver,
       orderSender},
      {"recv-larger", "a receive larger than its send: test reports the size sent", largerReceiver, largerSender},
      {"zero-byte", "zero-byte messages among others: test reports 0, order kept", zeroReceiver, zeroSender},
      {"null-requests", "isend/irecv may give NULL requests: retried (the receiver starts late), counted", nullReceiver,
       nullSender},
      {"multi-recv",
       "a multi-receive (maxRecvs > 1): one request, each buffer gets the message of its tag whatever "
       "the send order",
       multiReceiver, multiSender},
      {"max-requests",
       "NCCL_NET_MAX_REQUESTS receives in flight on a recvComm, and that times maxRecvs sends on a "
       "sendComm, posted before any test",
       maxReceiver, maxSender},
      {"test-done", "test alone (no more posts) brings every request to done, with the received size", testDoneSide,
       testDoneSide},
      {"flush", "iflush after a host receive, when the plugin sets forceFlush; its request is tested with sizes NULL",
       flushReceiver, flushSender},
      {"optional-completion", "irecv given *request = NCCL_NET_OPTIONAL_RECV_COMPLETION returns a testable request",
       optionalReceiver, optionalSender},
      {"sender-exits",
       "the sender exits mid-stream: the receiver's test returns an error or its request never "
       "completes (never a false completion); close still returns",
       senderExitsReceiver, senderExitsSender},
      {"receiver-exits",
       "the receiver exits: the sender's isend/test return an error or nothing completes; close "
       "still returns",
       receiverExitsReceiver, receiverExitsSender},
      {"close-send-first", "closeSend, then the peer's closeRecv", closeSendFirstReceiver, closeSendFirstSender},
      {"close-recv-first", "closeRecv, then the peer's closeSend", closeRecvFirstReceiver, closeRecvFirstSender},
      {"close-recv-landing",
       "closeRecv while a 64 MiB message is landing: its buffer does not change after closeRecv returns",
       closeLandingReceiver, closeLandingSender},
      {"close-send-inflight",
       "closeSend while a 64 MiB message is on its way: nothing reads its buffer after closeSend returns",
       closeSendingReceiver, closeSendingSender},
      {"close-listen-early", "closeListen right after accept, before any data (NCCL's order); data then flows",
       listenEarlyReceiver, listenEarlySender},
      {"close-listen-late", "closeListen after both comms are closed", listenLateReceiver, listenLateSender},
      {"table",
       "latency (ping-pong), bandwidth one way and both ways at once (up to NCCL_NET_MAX_REQUESTS in flight each) "
       "per message size",
       tableReceiver, tableSender},
  };
  return table;
}

const Rule* findRule(const std::string& name) {
  for (const Rule& r : rules())
    if (name == r.name) return &r;
  return nullptr;
}

}  // namespace netcheck
