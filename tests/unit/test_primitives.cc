// The Simple and LL primitives between two threads over connectors wired by hand: data arrives
// intact across many steps (slot reuse, credit through head), and a receiver can reduce on arrival.
#include <doctest/doctest.h>
#include <plexus/device/primitives.h>
#include <plexus/device/primitives_ll.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

using namespace plexus::dev;

namespace {

// Rank 0 sends to rank 1 over one connection.
struct Link {
  std::vector<char> simple = std::vector<char>(PLEXUS_STEPS * 4096);
  std::vector<plexusLLFifoLine_v1_t> ll = std::vector<plexusLLFifoLine_v1_t>(PLEXUS_STEPS * PLEXUS_LL_SLOT_LINES);
  alignas(64) uint64_t head = 0, tail = 0;
  uint32_t abortFlag = 0;
  plexusDevChannelPeer_v1_t peers[2][2]{};  // [rank][peer]
  plexusDevChannel_v1_t ch[2]{};
  plexusDevComm_v1_t comm[2]{};

  Link() {
    for (int r = 0; r < 2; r++) {
      plexusConnInfo_v1_t& c = r == 0 ? peers[0][1].send.conn : peers[1][0].recv.conn;
      c.buffs[PLEXUS_PROTO_SIMPLE] = simple.data();
      c.buffs[PLEXUS_PROTO_LL] = (char*)ll.data();
      c.stepSize = 4096;  // Simple: 4 KiB per step
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
void sendRecv(size_t n, bool reduce) {
  Link link;
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
  for (size_t n : {1ul, 7ul, 512ul, 513ul, 100000ul}) {
    sendRecv<PrimitivesLL>(n, false);
    sendRecv<PrimitivesLL>(n, true);
  }
}

TEST_CASE("primitives: an abort releases a receiver whose sender never comes") {
  Link link;
  std::vector<float> out(100);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    __atomic_store_n(&link.abortFlag, 1u, __ATOMIC_RELEASE);
  });
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
