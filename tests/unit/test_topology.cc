// Layers 3 and 6: node identity and rings from a graph.
#include <doctest/doctest.h>

#include <cstdlib>

#include "channel/channel.h"
#include "misc/check.h"
#include "topo/topo.h"

using namespace plexus;

TEST_CASE("topology: ranks group into nodes by host identity, numbered by first appearance") {
  std::vector<plexusPeerInfo_v1_t> peers(5);
  uint64_t hosts[5] = {7, 9, 7, 9, 7};
  for (int r = 0; r < 5; r++) peers[r].hostHash = hosts[r];
  Topology t = computeTopology(peers, {}, 3);
  CHECK(t.nNodes == 2);
  CHECK(t.node == 1);
  CHECK(t.localRank == 1);
  CHECK(t.nLocalRanks == 2);
  CHECK(t.rankNode == std::vector<int>{0, 1, 0, 1, 0});
  CHECK(t.rankLocalRank == std::vector<int>{0, 0, 1, 1, 2});
}

TEST_CASE("topology: the machine's cores are the union of its ranks' CPU sets") {
  // Four ranks of one machine, each bound to a CPU of its own (as mpirun binds): four cores, not one.
  std::vector<plexusPeerInfo_v1_t> peers(5);
  std::vector<CpuMask> cpus(5);
  for (int r = 0; r < 4; r++) {
    peers[r].machineHash = 1;
    peers[r].pidHash = 10 + r;
    cpus[r].bits[r / 2] |= 1ull << (r % 2 ? 63 : 0);
  }
  peers[4].machineHash = 2;  // another machine's CPUs do not count
  cpus[4].bits[3] = ~0ull;
  Topology t = computeTopology(peers, cpus, 0);
  CHECK(t.cores == 4);
  CHECK(t.machineRanks == 4);
  CHECK_FALSE(t.coresShared(1));
  CHECK(t.coresShared(2));
  // All four bound to the same CPU: one core, shared.
  for (int r = 0; r < 4; r++) cpus[r] = CpuMask{};
  for (int r = 0; r < 4; r++) cpus[r].bits[0] = 1;
  t = computeTopology(peers, cpus, 2);
  CHECK(t.cores == 1);
  CHECK(t.coresShared(1));
  // This process's own set is in the mask it sends.
  CpuMask mine = localCpuMask();
  int count = 0;
  for (uint64_t w : mine.bits) count += __builtin_popcountll(w);
  CHECK(count >= 1);
}

TEST_CASE("topology: LL slots between host ranks: 64 with a core each, more where ranks share cores, within a budget") {
  // n ranks of one node and one machine on `cores` CPUs.
  auto node = [](int n, int cores) {
    std::vector<plexusPeerInfo_v1_t> peers(n);
    std::vector<CpuMask> cpus(n);
    for (int r = 0; r < n; r++) {
      peers[r].hostHash = peers[r].machineHash = 1;
      peers[r].pidHash = 10 + r;
      for (int c = 0; c < cores; c++) cpus[r].bits[c / 64] |= 1ull << (c % 64);
    }
    return computeTopology(peers, cpus, 0);
  };
  CHECK(llHostSlots(node(2, 2), 1) == 64);  // a core each
  CHECK(llHostSlots(node(4, 8), 2) == 64);
  // Shared: 1024 slots of 4 KiB while the rank's connections (2 per other rank and channel) stay within 32 MiB.
  CHECK(llHostSlots(node(4, 2), 1) == 1024);  // 6 connections: 24 MiB
  CHECK(llHostSlots(node(5, 2), 1) == 1024);  // 8: 32 MiB, the budget exactly
  CHECK(llHostSlots(node(6, 2), 1) == 512);   // 10: 40 MiB at 1024, 20 at 512
  CHECK(llHostSlots(node(16, 2), 1) == 256);  // 30: 60 MiB at 512, 30 at 256
  CHECK(llHostSlots(node(16, 2), 2) == 128);  // 60: 30 MiB at 128
  CHECK(llHostSlots(node(64, 8), 1) == 64);   // 126: 63 MiB at 128; never below the default
}

TEST_CASE("topology: the protocols' figures: the host's own where every rank has a core, the defaults elsewhere") {
  // Two ranks of one machine, each on a core of its own.
  std::vector<plexusPeerInfo_v1_t> peers(2);
  peers[0].machineHash = peers[1].machineHash = 1;
  peers[0].pidHash = 10;
  peers[1].pidHash = 11;
  std::vector<CpuMask> cpus(2);
  cpus[0].bits[0] = 1;
  cpus[1].bits[0] = 2;
  Topology t = computeTopology(peers, cpus, 0);
  plexusAlgoTopo_v1_t topo = algoTopology(t, 0, 1, 4 << 20);
  const plexusAlgoProtocols_v2_t defaults = plexusAlgoDefaultProtocols(&topo);
  plexusAlgoProtocols_v2_t p = algoProtocols(t, topo);
  // A CPU reads LL's lines a cache line at a time: far below a quarter of Simple's bandwidth; LL128's hop is
  // Simple's, so that it never prices below Simple.
  CHECK(p.bw[PLEXUS_PROTO_LL] < defaults.bw[PLEXUS_PROTO_LL] / 2);
  CHECK(p.hop[PLEXUS_PROTO_LL] == defaults.hop[PLEXUS_PROTO_LL]);
  CHECK(p.hop[PLEXUS_PROTO_LL128] == p.hop[PLEXUS_PROTO_SIMPLE]);
  CHECK(p.bw[PLEXUS_PROTO_LL128] < p.bw[PLEXUS_PROTO_SIMPLE]);
  CHECK(p.hop[PLEXUS_PROTO_SIMPLE] == 1.0f);
  CHECK(p.bw[PLEXUS_PROTO_SIMPLE] == 1.0f);
  // Both on one core: a hop is a context switch; the defaults stand.
  cpus[1] = cpus[0];
  t = computeTopology(peers, cpus, 0);
  topo = algoTopology(t, 0, 1, 4 << 20);
  REQUIRE(topo.coresShared);
  p = algoProtocols(t, topo);
  const plexusAlgoProtocols_v2_t shared = plexusAlgoDefaultProtocols(&topo);
  for (int k = 0; k < PLEXUS_NUM_PROTOCOLS; k++) {
    CHECK(p.hop[k] == shared.hop[k]);
    CHECK(p.bw[k] == shared.bw[k]);
  }
  // GPUs: the defaults.
  t.deviceChannels = true;
  topo = algoTopology(t, 0, 1, 4 << 20);
  p = algoProtocols(t, topo);
  for (int k = 0; k < PLEXUS_NUM_PROTOCOLS; k++) {
    CHECK(p.hop[k] == plexusAlgoDefaultProtocols(&topo).hop[k]);
    CHECK(p.bw[k] == plexusAlgoDefaultProtocols(&topo).bw[k]);
  }
}

TEST_CASE("topology: NCCL_HOSTID gives a process another host identity") {
  uint64_t mine = hostHash();
  setenv("NCCL_HOSTID", "node-b", 1);
  uint64_t b = hostHash();
  setenv("PLEXUS_HOSTID", "node-c", 1);  // the PLEXUS_ twin wins
  uint64_t c = hostHash();
  unsetenv("NCCL_HOSTID");
  unsetenv("PLEXUS_HOSTID");
  CHECK(b != mine);
  CHECK(c != b);
  CHECK(hostHash() == mine);
  plexusPeerInfo_v1_t info = localPeerInfo(3, 5, 0);
  CHECK(info.rank == 3);
  CHECK(info.device == 5);
  CHECK(info.pidHash == pidHash());
}

TEST_CASE("channels: rings come from the graph, an order that is not a permutation is refused") {
  Channels ch;
  channelsInit(&ch, 2, 4);
  int order0[4] = {0, 1, 2, 3}, order1[4] = {0, 3, 2, 1};
  plexusAlgoGraph_v1_t graph{};
  graph.nChannels = 2;
  graph.channels[0].ringOrder = order0;
  graph.channels[1].ringOrder = order1;
  REQUIRE(channelsSetRings(&ch, 2, 4, graph) == ncclSuccess);
  CHECK(ch.dev[0].ring.prev == 1);
  CHECK(ch.dev[0].ring.next == 3);
  CHECK(ch.dev[0].ring.index == 2);
  CHECK(ch.dev[1].ring.prev == 3);
  CHECK(ch.dev[1].ring.next == 1);
  CHECK(ch.dev[1].peers == ch.peers[1].data());
  CHECK(ch.dev[1].ring.userRanks[1] == 3);
  order1[2] = 3;
  CHECK(channelsSetRings(&ch, 2, 4, graph) == ncclInternalError);
  CHECK(std::string(lastError(nullptr)).find("not a permutation") != std::string::npos);
}
