// The Simple, LL and LL128 primitives between two threads over connectors wired by hand: data arrives
// intact across many steps (slot reuse, credit through head), and a receiver can reduce on arrival. The
// LL and LL128 lines a sender writes are checked byte by byte against the line formats (NCCL's), as
// computed here from nccl-abi.md §5.5, in the protocols' own buffers and in Simple slots (proxy-driven
// connections).
#include <doctest/doctest.h>
#include <plexus/device/p2p.h>
#include <plexus/device/primitives.h>
#include <plexus/device/primitives_ll.h>
#include <plexus/device/primitives_ll128.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <cstring>
#include <thread>
#include <vector>

using namespace plexus::dev;

namespace {

// Rank 0 sends to rank 1 over one connection. With inSlots the LL and LL128 lines travel in the Simple
// slots, as over a proxy-driven connection (net), with connFifo recording each step's bytes. llSlots: the LL
// buffer's slots as a transport reports them (0: it does not, PLEXUS_STEPS).
struct Link {
  int stepSize;
  std::vector<char> simple;
  std::vector<plexusLLFifoLine_v1_t> ll;
  std::vector<uint64_t> ll128 = std::vector<uint64_t>(PLEXUS_LL128_BUFF_BYTES / 8);
  plexusConnFifo_v1_t fifo[PLEXUS_STEPS];
  alignas(64) uint64_t head = 0, tail = 0;
  uint32_t abortFlag = 0;
  plexusDevChannelPeer_v1_t peers[2][2]{};  // [rank][peer]
  plexusDevChannel_v1_t ch[2]{};
  plexusDevComm_v1_t comm[2]{};

  explicit Link(int step = 4096, bool inSlots = false, int llSlots = 0)
      : stepSize(step), simple((size_t)PLEXUS_STEPS * step),
        ll((size_t)(llSlots ? llSlots : PLEXUS_STEPS) * PLEXUS_LL_SLOT_LINES) {
    for (auto& f : fifo) f = plexusConnFifo_v1_t{PLEXUS_MODE_NORMAL, 0, PLEXUS_CONNFIFO_FREE, nullptr};
    for (int r = 0; r < 2; r++) {
      plexusConnInfo_v1_t& c = r == 0 ? peers[0][1].send.conn : peers[1][0].recv.conn;
      c.buffs[PLEXUS_PROTO_SIMPLE] = simple.data();
      c.buffs[PLEXUS_PROTO_LL] = (char*)ll.data();
      c.buffs[PLEXUS_PROTO_LL128] = (char*)ll128.data();
      if (inSlots) {
        c.buffs[PLEXUS_PROTO_LL] = c.buffs[PLEXUS_PROTO_LL128] = simple.data();
        c.flags = PLEXUS_CONN_LL_IN_SLOTS;
        c.connFifo = fifo;
      }
      c.stepSize = step;
      c.llSlots = llSlots;
      c.head = &head;
      c.tail = &tail;
      ch[r].peers = peers[r];
      ch[r].waitPeer = -1;
      comm[r].rank = r;
      comm[r].nRanks = 2;
      comm[r].abortFlag = &abortFlag;
      comm[r].spinPolls = 64;
    }
  }
};

template <template <typename, typename> class Prims>
void sendRecv(size_t n, bool reduce, int stepSize = 4096, int llSlots = 0) {
  Link link(stepSize, false, llSlots);
  std::vector<float> src(n), mine(n), out(n, -1.0f);
  for (size_t i = 0; i < n; i++) src[i] = (float)i, mine[i] = 0.5f;
  std::thread sender([&] {
    int peer = 1;
    Prims<float, FuncSum<float>> p(&link.comm[0], &link.ch[0], 0, 1, nullptr, 0, &peer, 1, src.data(), nullptr, 0);
    p.send(0, n);
  });
  {
    int peer = 0;
    Prims<float, FuncSum<float>> p(&link.comm[1], &link.ch[1], 0, 1, &peer, 1, nullptr, 0, mine.data(), out.data(), 0);
    if (reduce) p.recvReduceCopy(0, 0, n);
    else p.recv(0, n);
    CHECK(p.ok());
  }
  sender.join();
  size_t wrong = 0;
  for (size_t i = 0; i < n; i++) wrong += out[i] != (float)i + (reduce ? 0.5f : 0.0f);
  CHECK_MESSAGE(wrong == 0, "n=" << n);
  // Both sides agree on how many steps the connection advanced.
  CHECK(link.peers[0][1].send.conn.step == link.peers[1][0].recv.conn.step);
}

}  // namespace

TEST_CASE("primitives: Simple send/recv and recvReduceCopy over many steps") {
  for (size_t n : {1ul, 7ul, 1024ul, 1025ul, 100000ul}) {
    sendRecv<Primitives>(n, false);
    sendRecv<Primitives>(n, true);
  }
}

TEST_CASE("primitives: LL send/recv and recvReduceCopy over many steps") {
  for (int llSlots : {0, 64})
    for (size_t n : {1ul, 7ul, 512ul, 513ul, 100000ul, 300000ul}) {
      CAPTURE(llSlots);
      sendRecv<PrimitivesLL>(n, false, 4096, llSlots);
      sendRecv<PrimitivesLL>(n, true, 4096, llSlots);
    }
}

TEST_CASE("primitives: LL128 send/recv and recvReduceCopy over many steps") {
  // 4 KiB Simple steps: 32 lines (3840 bytes) per LL128 step; 64 KiB: a whole slot of 512 lines.
  for (int step : {4096, 65536})
    for (size_t n : {1ul, 29ul, 30ul, 31ul, 959ul, 960ul, 961ul, 15360ul, 15361ul, 100000ul}) {
      CAPTURE(step);
      sendRecv<PrimitivesLL128>(n, false, step);
      sendRecv<PrimitivesLL128>(n, true, step);
    }
}

namespace {

// The bytes a sender of `bytes` bytes (pattern below) leaves in the buffers of a link, step by step,
// with no receiver (the first PLEXUS_STEPS steps need no credit).
unsigned char pattern(size_t i) { return (unsigned char)(i * 7 + 3); }

template <template <typename, typename> class Prims>
bool sendAlone(Link& link, size_t bytes) {
  std::vector<unsigned char> src(bytes);
  for (size_t i = 0; i < bytes; i++) src[i] = pattern(i);
  int peer = 1;
  Prims<uint8_t, FuncSum<uint8_t>> p(&link.comm[0], &link.ch[0], 0, 1, nullptr, 0, &peer, 1, src.data(), nullptr, 0);
  p.send(0, bytes);
  return p.ok();
}

uint64_t word(const void* base, size_t byteOffset) {
  uint64_t w;
  memcpy(&w, (const char*)base + byteOffset, 8);
  return w;
}

// LL128 (nccl-abi.md §5.5): 128-byte lines; bytes 0..119 of line j of step s are bytes
// (s * linesPerStep + j) * 120 .. + 119 of the data, bytes 120..127 the flag, the uint64 s + 1.
void checkLL128Layout(int stepSize, bool inSlots) {
  const size_t linesPerStep = std::min<size_t>(512, (size_t)stepSize / 128);
  const size_t perStep = linesPerStep * 120;
  const size_t bytes = 3 * perStep + 121;  // three whole steps, then a line and one byte
  Link link(stepSize, inSlots);
  CHECK(sendAlone<PrimitivesLL128>(link, bytes));
  const size_t steps = (bytes + perStep - 1) / perStep;
  CHECK(link.tail == steps);
  CHECK(link.peers[0][1].send.conn.step == steps);
  size_t wrongData = 0, wrongFlags = 0, wrongSizes = 0;
  for (size_t s = 0; s < steps; s++) {
    const char* slot = inSlots ? link.simple.data() + s * (size_t)stepSize
                               : (const char*)link.ll128.data() + s * 512 * 128;
    const size_t first = s * perStep, n = std::min(perStep, bytes - first), lines = (n + 119) / 120;
    for (size_t j = 0; j < lines; j++) {
      for (size_t b = 0; b < 120 && j * 120 + b < n; b++)
        wrongData += (unsigned char)slot[j * 128 + b] != pattern(first + j * 120 + b);
      wrongFlags += word(slot, j * 128 + 120) != s + 1;
    }
    // Lines past the step's data are not written.
    for (size_t j = lines; j < linesPerStep; j++) wrongFlags += word(slot, j * 128 + 120) != 0;
    if (inSlots) wrongSizes += link.fifo[s].size != (int64_t)(lines * 128);
  }
  CHECK(wrongData == 0);
  CHECK(wrongFlags == 0);
  CHECK(wrongSizes == 0);
}

// LL (nccl-abi.md §5.5): 16-byte lines {data1, flag1, data2, flag2} of 4-byte words; line j of step s
// carries data bytes (s * 256 + j) * 8 .. + 7, the flags are (uint32) s + 1.
void checkLLLayout(bool inSlots) {
  const size_t perStep = 256 * 8, bytes = 2 * perStep + 13;
  Link link(4096, inSlots);
  CHECK(sendAlone<PrimitivesLL>(link, bytes));
  size_t wrong = 0;
  for (size_t s = 0; s < 3; s++) {
    const char* slot = inSlots ? link.simple.data() + s * 4096 : (const char*)link.ll.data() + s * 256 * 16;
    const size_t first = s * perStep, n = std::min(perStep, bytes - first), lines = (n + 7) / 8;
    for (size_t j = 0; j < lines; j++) {
      uint32_t f[4];
      memcpy(f, slot + j * 16, 16);
      wrong += f[1] != s + 1 || f[3] != s + 1;
      for (size_t b = 0; b < 8 && j * 8 + b < n; b++) {
        const size_t at = b < 4 ? j * 16 + b : j * 16 + 8 + (b - 4);  // data1 at bytes 0..3, data2 at 8..11
        wrong += (unsigned char)slot[at] != pattern(first + j * 8 + b);
      }
    }
    if (inSlots) wrong += link.fifo[s].size != (int64_t)(lines * 16);
  }
  CHECK(wrong == 0);
  CHECK(link.tail == 3);
}

}  // namespace

TEST_CASE("primitives: LL128 lines as NCCL lays them out: 120 data bytes, then the flag step + 1") {
  for (int step : {4096, 65536, 1 << 20})
    for (bool inSlots : {false, true}) {
      CAPTURE(step);
      CAPTURE(inSlots);
      checkLL128Layout(step, inSlots);
    }
}

TEST_CASE("primitives: LL lines as NCCL lays them out: data1, flag1, data2, flag2") {
  checkLLLayout(false);
  checkLLLayout(true);
}

TEST_CASE("primitives: an LL sender runs as many steps ahead as the transport's llSlots and no more, step s in slot "
          "s % llSlots, while Simple keeps PLEXUS_STEPS") {
  constexpr size_t perStep = PLEXUS_LL_SLOT_LINES * 8;
  for (int llSlots : {0, 16, PLEXUS_LL_HOST_SLOTS}) {
    CAPTURE(llSlots);
    const size_t slots = llSlots ? (size_t)llSlots : PLEXUS_STEPS;
    Link link(4096, false, llSlots);
    link.comm[0].timeoutNs = 50 * 1000 * 1000;
    // No receiver: the first `slots` steps need no credit, one step per call.
    size_t done = 0;
    for (size_t s = 0; s < slots; s++) done += sendAlone<PrimitivesLL>(link, perStep);
    CHECK(done == slots);
    CHECK(link.tail == slots);
    size_t wrongFlags = 0;
    for (size_t s = 0; s < slots; s++) {
      uint32_t f[4];
      memcpy(f, &link.ll[s * PLEXUS_LL_SLOT_LINES], 16);
      wrongFlags += f[1] != s + 1 || f[3] != s + 1;
    }
    CHECK(wrongFlags == 0);
    // The next step waits for credit the receiver never gives: the sender times out, waiting on its peer.
    CHECK_FALSE(sendAlone<PrimitivesLL>(link, 8));
    CHECK(link.ch[0].status == PLEXUS_CHANNEL_TIMEOUT);
    CHECK(link.ch[0].waitIsSend == 1);
    CHECK(link.ch[0].waitPeer == 1);
    CHECK(link.tail == slots);
  }
  // Simple takes credit for PLEXUS_STEPS steps whatever llSlots says: after 8 steps of LL its next step waits.
  Link link(4096, false, PLEXUS_LL_HOST_SLOTS);
  link.comm[0].timeoutNs = 50 * 1000 * 1000;
  CHECK(sendAlone<PrimitivesLL>(link, PLEXUS_STEPS * perStep));
  CHECK_FALSE(sendAlone<Primitives>(link, 8));
  CHECK(link.ch[0].status == PLEXUS_CHANNEL_TIMEOUT);
  CHECK(link.tail == PLEXUS_STEPS);
}

TEST_CASE("primitives: a receiver reads LL128 lines another thread writes, in Simple slots (proxy-driven)") {
  // The receiver waits for tail, as behind a proxy, then for each line's flag.
  for (size_t n : {1ul, 960ul, 50000ul}) {
    Link link(8192, true);
    std::vector<double> src(n), out(n, -1);
    for (size_t i = 0; i < n; i++) src[i] = (double)i * 0.5;
    std::thread sender([&] {
      int peer = 1;
      PrimitivesLL128<double, FuncSum<double>> p(&link.comm[0], &link.ch[0], 0, 1, nullptr, 0, &peer, 1, src.data(),
                                                  nullptr, 0);
      p.send(0, n);
    });
    {
      int peer = 0;
      PrimitivesLL128<double, FuncSum<double>> p(&link.comm[1], &link.ch[1], 0, 1, &peer, 1, nullptr, 0, nullptr,
                                                  out.data(), 0);
      p.recv(0, n);
      CHECK(p.ok());
    }
    sender.join();
    CHECK(out == src);
  }
}

// Aborts once the receiver waits (its channel says since when), not before: the abort must free a wait under way.
static void abortOnceWaiting(Link& link) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (__atomic_load_n(&link.ch[1].waitSince, __ATOMIC_RELAXED) == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  __atomic_store_n(&link.abortFlag, 1u, __ATOMIC_RELEASE);
}

TEST_CASE("primitives: an abort releases a receiver whose sender never comes") {
  Link link;
  std::vector<float> out(100);
  std::thread aborter([&] { abortOnceWaiting(link); });
  int peer = 0;
  {
    PrimitivesLL<float, FuncSum<float>> p(&link.comm[1], &link.ch[1], 0, 1, &peer, 1, nullptr, 0, nullptr, out.data(), 0);
    p.recv(0, 100);
    CHECK_FALSE(p.ok());
  }
  aborter.join();
  CHECK(link.ch[1].status == PLEXUS_CHANNEL_ABORTED);
  CHECK(link.ch[1].waitPeer == 0);
}

TEST_CASE("primitives: an abort releases an LL128 receiver whose sender never comes") {
  Link link;
  std::vector<float> out(1000);
  std::thread aborter([&] { abortOnceWaiting(link); });
  int peer = 0;
  {
    PrimitivesLL128<float, FuncSum<float>> p(&link.comm[1], &link.ch[1], 0, 1, &peer, 1, nullptr, 0, nullptr,
                                             out.data(), 0);
    p.recv(0, 1000);
    CHECK_FALSE(p.ok());
  }
  aborter.join();
  CHECK(link.ch[1].status == PLEXUS_CHANNEL_ABORTED);
}

namespace {

// The link as a one-channel communicator of two ranks, for point-to-point launches.
void p2pWire(Link& link) {
  for (int r = 0; r < 2; r++) {
    link.comm[r].channels = &link.ch[r];
    link.comm[r].nChannels = 1;
    link.comm[r].timeoutNs = 5ull * 1000 * 1000 * 1000;
  }
  link.peers[0][1].send.connected = link.peers[1][0].recv.connected = 1;
}

// One send (rank 0) or receive (rank 1) of `bytes` bytes over the link, as a launch of one point-to-point work of
// protocol proto runs it (plexus/device/p2p.h).
ncclResult_t p2pOne(Link& link, int rank, void* buf, size_t bytes, int proto) {
  auto args = std::make_unique<plexusDevKernelArgs_v1_t>();
  args->comm = &link.comm[rank];
  args->storage = PLEXUS_WORK_STORAGE_ARGS;
  args->nWorks = 1;
  args->channelMask = 1;
  plexusDevWork_v1_t& w = args->inlineWorks[0];
  w.func = rank == 0 ? ncclFuncSend : ncclFuncRecv;
  w.datatype = ncclInt8;
  w.proto = (uint8_t)proto;
  w.nChannels = 1;
  w.peer = 1 - rank;
  w.count = bytes;
  if (rank == 0) w.sendbuff = buf;
  else w.recvbuff = buf;
  auto state = std::make_unique<P2pState>();
  return runP2p(args.get(), 0, 0, 1, state.get());
}

}  // namespace

TEST_CASE("p2p kernel: a message marked LL crosses as LL lines where the transport describes its LL buffer (llSlots), "
          "through the Simple slots where it does not") {
  for (int llSlots : {PLEXUS_LL_HOST_SLOTS, 0}) {
    CAPTURE(llSlots);
    Link link(4096, false, llSlots);
    p2pWire(link);
    std::vector<unsigned char> src(13);
    for (size_t i = 0; i < src.size(); i++) src[i] = pattern(i);
    // No receiver: the send completes into step 0's slot, where the bytes are found.
    CHECK(p2pOne(link, 0, src.data(), src.size(), PLEXUS_PROTO_LL) == ncclSuccess);
    CHECK(link.tail == 1);
    size_t wrong = 0;
    if (llSlots) {
      // LL (nccl-abi.md section 5.5): line j holds bytes 8j..8j+7 as data1 (bytes 0..3) and data2 (8..11), flags
      // step + 1.
      const char* lines = (const char*)link.ll.data();
      for (size_t j = 0; j < 2; j++) {
        uint32_t f[4];
        memcpy(f, lines + j * 16, 16);
        wrong += f[1] != 1 || f[3] != 1;
        for (size_t b = 0; b < 8 && j * 8 + b < src.size(); b++)
          wrong += (unsigned char)lines[j * 16 + (b < 4 ? b : b + 4)] != src[j * 8 + b];
      }
      wrong += memcmp(link.simple.data(), src.data(), src.size()) == 0;  // not through the slots
    } else {
      wrong += memcmp(link.simple.data(), src.data(), src.size()) != 0;
      for (const plexusLLFifoLine_v1_t& l : link.ll) wrong += l.v[0] != 0 || l.v[1] != 0;
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("p2p kernel: LL and Simple messages of 0 B to several LL steps share one connection, every byte right, "
          "through many wraps of its 64 LL slots") {
  Link link(4096, false, PLEXUS_LL_HOST_SLOTS);
  p2pWire(link);
  struct Msg {
    size_t bytes;
    int proto;
  };
  std::vector<Msg> msgs;
  for (size_t b : {0ul, 1ul, 7ul, 8ul, 9ul, 64ul, 2047ul, 2048ul, 2049ul, 5000ul})
    for (int proto : {PLEXUS_PROTO_LL, PLEXUS_PROTO_SIMPLE}) msgs.push_back({b, proto});
  for (int i = 0; i < 300; i++) msgs.push_back({(size_t)(i % 70), i % 5 ? PLEXUS_PROTO_LL : PLEXUS_PROTO_SIMPLE});
  std::vector<std::vector<unsigned char>> sent(msgs.size()), got(msgs.size());
  for (size_t k = 0; k < msgs.size(); k++) {
    sent[k].resize(msgs[k].bytes);
    for (size_t i = 0; i < msgs[k].bytes; i++) sent[k][i] = (unsigned char)(pattern(i) ^ k);
    got[k].assign(msgs[k].bytes + 1, 0xee);  // one byte past the message, which must stay
  }
  ncclResult_t sendResult = ncclSuccess;
  std::thread sender([&] {
    for (size_t k = 0; k < msgs.size() && sendResult == ncclSuccess; k++)
      sendResult = p2pOne(link, 0, sent[k].data(), msgs[k].bytes, msgs[k].proto);
  });
  ncclResult_t recvResult = ncclSuccess;
  for (size_t k = 0; k < msgs.size() && recvResult == ncclSuccess; k++)
    recvResult = p2pOne(link, 1, got[k].data(), msgs[k].bytes, msgs[k].proto);
  sender.join();
  CHECK(sendResult == ncclSuccess);
  CHECK(recvResult == ncclSuccess);
  size_t wrong = 0;
  for (size_t k = 0; k < msgs.size(); k++) {
    wrong += msgs[k].bytes && memcmp(got[k].data(), sent[k].data(), msgs[k].bytes) != 0;  // empty: no pointer
    wrong += got[k][msgs[k].bytes] != 0xee;
  }
  CHECK(wrong == 0);
  CHECK(link.peers[0][1].send.conn.step == link.peers[1][0].recv.conn.step);
  CHECK(link.peers[0][1].send.conn.step > 2 * PLEXUS_LL_HOST_SLOTS);
}
