// The latency and bandwidth table, measured between the two workers over the plugin's device. Each worker
// listens, passes its handle, then connects to the peer's and accepts in turns, so that neither waits on the
// other. The sender side times and reports the rows; the receiver side echoes pings and takes the one-way
// stream; in the bidirectional phase both sides send and receive at once, one connection per direction.
// Each size's latency, bandwidth and bidirectional phases are each bounded by --timeout.
#include <algorithm>
#include <cstdio>
#include <deque>

#include "netcheck.h"

namespace netcheck {
namespace {

constexpr int kTag = 1;
// Requests in flight in the bandwidth stream: what the plugin's ABI promised (8 for v6, NCCL up to 2.18).
int gWindow = NCCL_NET_MAX_REQUESTS;
void setWindow(const Worker& w) { gWindow = w.plugin->version <= 6 ? NCCL_NET_MAX_REQUESTS_V6 : NCCL_NET_MAX_REQUESTS; }
constexpr size_t kBudget = 128 << 20;           // memory per direction and side: distinct slots up to this
constexpr size_t kAckBytes = 8;                 // the acknowledgement that ends a bandwidth stream
constexpr size_t kAckRoom = 4096;               // past the receive slots: where an ack lands while they are busy
// Each bandwidth stream runs this often, the last one timed. A connection's first stream of a size ran at a
// fraction of the next one's speed (socket net over loopback, 1 MiB: 0.56-0.68 GB/s, then 2.2-5.6): the kernel's
// socket buffers grow with the traffic, and this VM backs the pages they take at their first use.
constexpr int kStreamPasses = 2;

// This worker's two connections: out (its sendComm to the peer) and in (its recvComm from the peer).
struct Duplex {
  explicit Duplex(Worker& w) : out(w), in(w) {}
  Connection out, in;
};

void connectBoth(Worker& w, Duplex& d) {
  step("listen");
  d.in.listen();
  w.link.put(d.in.handle, sizeof d.in.handle);
  w.link.get(d.out.handle, sizeof d.out.handle, "listen handle");
  step("connect and accept, both ways");
  while (!d.out.sendComm || !d.in.recvComm) {
    if (!d.out.sendComm) d.out.connectOnce(d.out.handle);
    if (!d.in.recvComm) d.in.acceptOnce();
    if (w.expired())
      fail("no connection both ways within %.1f s (connect %s after %d calls, accept %s after %d)", w.opt.timeout,
           d.out.sendComm ? "done" : "pending", d.out.connectCalls, d.in.recvComm ? "done" : "pending",
           d.in.acceptCalls);
    sched_yield();
  }
  d.in.closeListen();
}

// Messages of the bandwidth stream: enough that small sizes are not all start-up, few for large ones.
int bandwidthIters(const Options& o, size_t bytes) {
  long byBytes = (long)((64 << 20) / bytes);
  return (int)std::max<long>(o.iters, std::min<long>((long)o.iters * 50, byBytes));
}

// Send and receive memory of one side, registered on its comms. Message i of a size uses slot i % slots;
// the receive memory has room for an ack after the slots (ackOffset), apart from receives in flight.
struct Buffers {
  Buffers(Worker& w, Duplex& d, size_t bytes)
      : send(bytes),
        recv(bytes + kAckRoom),
        sendReg(w, d.out.sendComm, send.data(), send.size()),
        recvReg(w, d.in.recvComm, recv.data(), recv.size()),
        ackOffset(bytes) {}
  int slots(size_t msg) const { return (int)std::clamp<size_t>(send.size() / msg, 1, gWindow); }
  HostMemory send, recv;
  Registration sendReg, recvReg;
  size_t ackOffset;
};

size_t bufferBytes(const Options& o) { return std::max(o.maxBytes, std::min(kBudget, o.maxBytes * gWindow)); }

void* sendTo(Worker& w, Duplex& d, Buffers& b, size_t offset, size_t bytes, const char* what) {
  return postSend(w, d.out.sendComm, b.send.data() + offset, bytes, kTag, b.sendReg.handle(), what);
}
void* recvFrom(Worker& w, Duplex& d, Buffers& b, size_t offset, size_t bytes, const char* what) {
  void* p = b.recv.data() + offset;
  int tag = kTag;
  void* mh = b.recvReg.handle();
  return postRecv(w, d.in.recvComm, 1, &p, &bytes, &tag, &mh, what);
}

// test both until both are done.
void waitBoth(Worker& w, void* a, void* b, const char* what) {
  bool aDone = false, bDone = false;
  while (!aDone || !bDone) {
    int size = -1;
    if (!aDone) aDone = testOnce(w, a, &size, what);
    if (!bDone) bDone = testOnce(w, b, &size, what);
    if (w.expired()) fail("%s was not done within %.1f s", what, w.opt.timeout);
  }
}

void checkSize(int got, size_t bytes, const char* what) {
  if (got != (int)bytes) fail("%s of %zu B arrived as %d B", what, bytes, got);
}

// One direction of the bidirectional phase on this side: requests 0..n-1 carry the stream, request n the ack.
// Posted in order, up to gWindow in flight, the oldest tested (NCCL's proxy, as pipeline()).
struct Direction {
  std::deque<std::pair<int, void*>> inflight;
  int next = 0, done = 0;
  long nullsInARow = 0;
};

// The bidirectional phase of one size, the same on both sides: n messages of s bytes go out on this side's
// sendComm while the peer's n come in on its recvComm, each direction with up to gWindow requests in flight,
// from one loop, as NCCL's proxy drives a rank's sends and receives at once. Once all n have come in (and this
// side's n are posted: an ack must follow them on the connection), this side sends its ack; the peer's ack
// says that the peer has all of this side's messages. Returns the seconds from the start (both sides start on
// the link's signal) until the peer's ack: this side's figure for its outgoing direction.
double bidirectional(Worker& w, Duplex& d, Buffers& b, size_t s, int n) {
  const int slots = b.slots(s);
  w.link.signal('D');
  w.link.expect('D', "readiness for the bidirectional streams");
  const auto t0 = Clock::now();
  double seconds = -1;
  Direction out, in;
  auto post = [&](Direction& dir, bool sending) {
    bool posted = false;
    while (dir.next <= n && (int)dir.inflight.size() < gWindow) {
      const int i = dir.next;
      void* r;
      if (sending) {
        if (i == n && in.done < n) break;  // the ack goes once the peer's messages are all in
        r = trySend(w, d.out.sendComm, b.send.data() + (i < n ? (size_t)(i % slots) * s : 0), i < n ? s : kAckBytes,
                    kTag, b.sendReg.handle());
      } else {
        void* p = b.recv.data() + (i < n ? (size_t)(i % slots) * s : b.ackOffset);
        size_t bytes = i < n ? s : kAckBytes;
        int tag = kTag;
        void* mh = b.recvReg.handle();
        r = tryRecv(w, d.in.recvComm, 1, &p, &bytes, &tag, &mh);
      }
      if (!r) {
        dir.nullsInARow++;
        break;
      }
      dir.inflight.emplace_back(dir.next++, r);
      dir.nullsInARow = 0;
      posted = true;
    }
    return posted;
  };
  auto complete = [&](Direction& dir, bool sending) {
    if (dir.inflight.empty()) return false;
    const int i = dir.inflight.front().first;
    int size = -1;
    if (!testOnce(w, dir.inflight.front().second, &size,
                  sending ? (i < n ? "a send of the bidirectional stream" : "the ack of the bidirectional stream")
                          : (i < n ? "a receive of the bidirectional stream" : "the peer's ack")))
      return false;
    if (!sending && i < n) checkSize(size, s, "a message of the bidirectional stream");
    if (!sending && i == n) {
      checkSize(size, kAckBytes, "the peer's ack of the bidirectional stream");
      seconds = secondsSince(t0);
    }
    dir.inflight.pop_front();
    dir.done++;
    return true;
  };
  while (out.done <= n || in.done <= n) {
    bool progress = post(out, true);
    progress |= post(in, false);
    progress |= complete(out, true);
    progress |= complete(in, false);
    if (progress) continue;
    if (w.expired()) {
      auto state = [&](const Direction& dir, const char* what) {
        char text[256];
        if (dir.done > n)
          snprintf(text, sizeof text, "all %d %ss done", n + 1, what);
        else if (!dir.inflight.empty())
          snprintf(text, sizeof text, "%s %d of %d not done (%d done before it, %zu in flight)", what,
                   dir.inflight.front().first + 1, n + 1, dir.done, dir.inflight.size());
        else if (&dir == &out && dir.next == n && in.done < n)
          snprintf(text, sizeof text, "all %d sends done, the ack held until the peer's messages are in", n);
        else
          snprintf(text, sizeof text, "%s %d of %d never posted: a NULL request %ld times (%d done before it)", what,
                   dir.next + 1, n + 1, dir.nullsInARow, dir.done);
        return std::string(text);
      };
      fail(
          "the bidirectional streams of %zu B (%d messages each way, then an ack) were not done within %.1f s: %s; "
          "%s",
          s, n, w.opt.timeout, state(out, "send").c_str(), state(in, "receive").c_str());
    }
    sched_yield();
  }
  return seconds;
}

}  // namespace

std::vector<size_t> tableSizes(const Options& o) {
  std::vector<size_t> sizes;
  for (size_t s = o.minBytes; s <= o.maxBytes; s *= (size_t)o.stepFactor) {
    sizes.push_back(s);
    if (s > o.maxBytes / (size_t)o.stepFactor) break;
  }
  if (sizes.back() != o.maxBytes) sizes.push_back(o.maxBytes);  // the table spans what was asked for
  return sizes;
}

std::string tableSender(Worker& w) {
  setWindow(w);
  Duplex d(w);
  connectBoth(w, d);
  Buffers b(w, d, bufferBytes(w.opt));
  const auto sizes = tableSizes(w.opt);
  const size_t maxP2p = w.props.maxP2pBytes;
  note(
      "%s, device %d ('%s', %d Mbps), two processes: latency is half a ping-pong round trip; bandwidth one way, up "
      "to %d requests in flight; bidir both ways at once, per direction (the slower side's), up to %d in flight each; "
      "each stream timed after an untimed one",
      w.plugin->label.c_str(), w.opt.device, w.props.name ? w.props.name : "?", w.props.speed, gWindow, gWindow);
  row("%12s %14s %16s %16s %14s", "size(B)", "latency(us)", "bandwidth(GB/s)", "bidir(GB/s)", "iters(lat,bw)");
  int measured = 0;
  for (size_t s : sizes) {
    if (s > maxP2p) {
      row("%12zu %14s %16s %16s   above maxP2pBytes (%zu): NCCL would split it", s, "-", "-", "-", maxP2p);
      continue;
    }
    // Latency: the pong's receive is posted before the ping goes.
    w.restartClock();
    step("latency of %zu B", s);
    const int total = w.opt.warmup + w.opt.iters;
    auto t0 = Clock::now();
    void* pong = recvFrom(w, d, b, 0, s, "a pong");
    for (int i = 0; i < total; i++) {
      if (i == w.opt.warmup) t0 = Clock::now();
      void* ping = sendTo(w, d, b, 0, s, "a ping");
      waitBoth(w, ping, pong, "a ping-pong");
      if (i + 1 < total) pong = recvFrom(w, d, b, 0, s, "a pong");
    }
    const double latencyUs = secondsSince(t0) / w.opt.iters / 2 * 1e6;

    // Bandwidth: a stream of n messages, up to gWindow in flight, then the receiver's 8-byte ack. Each stream
    // runs twice and the second is timed (kStreamPasses).
    const int n = bandwidthIters(w.opt, s), slots = b.slots(s);
    double gbs = 0;
    for (int pass = 0; pass < kStreamPasses; pass++) {
      w.restartClock();
      step("bandwidth of %zu B%s", s, pass + 1 < kStreamPasses ? " (warm-up)" : "");
      void* ack = recvFrom(w, d, b, 0, 8, "the ack");
      w.link.signal('B');
      w.link.expect('B', "readiness for the bandwidth stream");
      t0 = Clock::now();
      pipeline(
          w, n, gWindow,
          [&](int i) {
            return trySend(w, d.out.sendComm, b.send.data() + (size_t)(i % slots) * s, s, kTag, b.sendReg.handle());
          },
          [](int, const int*) {}, "the bandwidth stream");
      int got = -1;
      waitDone(w, ack, &got, "the ack of the bandwidth stream");
      gbs = (double)s * n / secondsSince(t0) / 1e9;
    }

    // Bidirectional: n messages each way at once; per direction, the slower side's figure (the longer time).
    double bidir = 0;
    for (int pass = 0; pass < kStreamPasses; pass++) {
      w.restartClock();
      step("bidirectional bandwidth of %zu B%s", s, pass + 1 < kStreamPasses ? " (warm-up)" : "");
      const double mine = bidirectional(w, d, b, s, n);
      double theirs = 0;
      w.link.get(&theirs, sizeof theirs, "time of the bidirectional streams");
      bidir = (double)s * n / std::max(mine, theirs) / 1e9;
    }
    row("%12zu %14.2f %16.4f %16.4f %8d,%d", s, latencyUs, gbs, bidir, w.opt.iters, n);
    measured++;
  }
  w.link.signal('F');
  w.link.expect('F', "end of the table");
  return std::to_string(measured) + " sizes measured";
}

std::string tableReceiver(Worker& w) {
  setWindow(w);
  Duplex d(w);
  connectBoth(w, d);
  Buffers b(w, d, bufferBytes(w.opt));
  for (size_t s : tableSizes(w.opt)) {
    if (s > w.props.maxP2pBytes) continue;
    w.restartClock();
    step("echoing pings of %zu B", s);
    const int total = w.opt.warmup + w.opt.iters;
    void* ping = recvFrom(w, d, b, 0, s, "a ping");
    for (int i = 0; i < total; i++) {
      int got = -1;
      waitDone(w, ping, &got, "a ping");
      checkSize(got, s, "a ping");
      if (i + 1 < total) ping = recvFrom(w, d, b, 0, s, "a ping");
      waitDone(w, sendTo(w, d, b, 0, s, "a pong"), nullptr, "a pong");
    }

    const int n = bandwidthIters(w.opt, s), slots = b.slots(s);
    for (int pass = 0; pass < kStreamPasses; pass++) {
      w.restartClock();
      step("receiving the bandwidth stream of %zu B", s);
      w.link.signal('B');
      w.link.expect('B', "readiness for the bandwidth stream");
      pipeline(
          w, n, gWindow,
          [&](int i) {
            void* p = b.recv.data() + (size_t)(i % slots) * s;
            size_t bytes = s;
            int tag = kTag;
            void* mh = b.recvReg.handle();
            return tryRecv(w, d.in.recvComm, 1, &p, &bytes, &tag, &mh);
          },
          [&](int, const int* sizes) { checkSize(sizes[0], s, "a message of the bandwidth stream"); },
          "the bandwidth stream");
      waitDone(w, sendTo(w, d, b, 0, 8, "the ack"), nullptr, "the ack");
    }

    for (int pass = 0; pass < kStreamPasses; pass++) {
      w.restartClock();
      step("bidirectional streams of %zu B", s);
      const double seconds = bidirectional(w, d, b, s, n);
      w.link.put(&seconds, sizeof seconds);
    }
  }
  w.link.signal('F');
  w.link.expect('F', "end of the table");
  return "";
}

}  // namespace netcheck
