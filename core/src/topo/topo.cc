#include "topo.h"

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>

#include "misc/env.h"
#include "misc/rand.h"

namespace plexus {

uint64_t hostHash() {
  if (auto id = envGet("HOSTID")) return hashBytes(id->data(), id->size());
  return machineHash();
}

uint64_t machineHash() {
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  std::string ident = host;
  // Containers of one machine may share a host name; the boot id tells machines apart.
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string bootId;
  if (boot >> bootId) ident += ":" + bootId;
  return hashBytes(ident.data(), ident.size());
}

uint64_t pidHash() {
  std::string ident = std::to_string(hostHash()) + ":" + std::to_string(getpid());
  // The pid namespace: two containers may reuse a pid.
  char ns[128] = "";
  ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  if (n > 0) ident.append(ns, (size_t)n);
  return hashBytes(ident.data(), ident.size());
}

uint64_t shmDevice() {
  struct stat st;
  if (stat("/dev/shm", &st) != 0) return 0;
  return (uint64_t)st.st_dev ^ hostHash();
}

plexusPeerInfo_v1_t localPeerInfo(int rank, int device, int backend) {
  plexusPeerInfo_v1_t info{};
  info.rank = rank;
  info.device = device;
  info.backend = backend;
  info.pid = getpid();
  info.hostHash = hostHash();
  info.pidHash = pidHash();
  info.shmDev = shmDevice();
  info.machineHash = machineHash();
  return info;
}

CpuMask localCpuMask() {
  CpuMask m;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return m;  // empty: the machine's count stands in
  static_assert(sizeof(m.bits) * 8 >= CPU_SETSIZE, "CpuMask holds a cpu_set_t");
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set)) m.bits[c / 64] |= 1ull << (c % 64);
  return m;
}

Topology computeTopology(const std::vector<plexusPeerInfo_v1_t>& peers, const std::vector<CpuMask>& cpus, int rank) {
  Topology t;
  const int n = (int)peers.size();
  t.rankNode.assign(n, -1);
  t.rankLocalRank.assign(n, 0);
  std::vector<uint64_t> nodeHash;
  std::vector<int> nodeCount;
  for (int r = 0; r < n; r++) {
    int node = -1;
    for (size_t i = 0; i < nodeHash.size(); i++)
      if (nodeHash[i] == peers[r].hostHash) node = (int)i;
    if (node < 0) {
      node = (int)nodeHash.size();
      nodeHash.push_back(peers[r].hostHash);
      nodeCount.push_back(0);
    }
    t.rankNode[r] = node;
    t.rankLocalRank[r] = nodeCount[node]++;
  }
  t.nNodes = (int)nodeHash.size();
  t.node = t.rankNode[rank];
  t.localRank = t.rankLocalRank[rank];
  t.nLocalRanks = nodeCount[t.node];
  t.machineRanks = 0;
  std::vector<uint64_t> procs;
  CpuMask machine;
  for (int r = 0; r < n; r++) {
    const plexusPeerInfo_v1_t& p = peers[r];
    if (p.machineHash != peers[rank].machineHash) continue;
    t.machineRanks++;
    if (r < (int)cpus.size())
      for (int w = 0; w < 16; w++) machine.bits[w] |= cpus[r].bits[w];
    if (std::find(procs.begin(), procs.end(), p.pidHash) == procs.end()) procs.push_back(p.pidHash);
  }
  t.machineProcs = (int)procs.size();
  int count = 0;
  for (uint64_t w : machine.bits) count += __builtin_popcountll(w);
  t.cores = count > 0 ? count : (int)std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN));
  return t;
}

LinkPerf localLinkPerf(const Topology& t, int nChannels) {
  // GPU to GPU (or within one GPU): a step's flag crosses device memory in about a microsecond; one block copies
  // some 20 GB/s.
  if (t.deviceChannels) return LinkPerf{1.0f, 20.0f};
  if (!t.coresShared(nChannels)) return LinkPerf{0.08f, 16.0f};
  return LinkPerf{2.2f, 16.0f * (float)t.cores / (float)(t.machineRanks * nChannels)};
}

LinkPerf netLinkPerf() { return LinkPerf{8.0f, 3.0f}; }

int channelCount(const Topology& t) {
  int n = t.deviceChannels ? 16 : std::clamp(t.cores / std::max(1, t.machineRanks), 1, 4);
  int lo = (int)envInt("MIN_NCHANNELS", 1), hi = (int)envInt("MAX_NCHANNELS", PLEXUS_MAXCHANNELS);
  n = std::max(n, lo);
  n = std::min(n, hi);
  return std::clamp(n, 1, PLEXUS_MAXCHANNELS);
}

int llHostSlots(const Topology& t, int nChannels) {
  if (!t.coresShared(nChannels)) return PLEXUS_LL_HOST_SLOTS;
  // Ranks that share a core wait for each other through the scheduler: a rank that leads (a root) runs as many small
  // operations as its receiver's slots hold, then yields its core. The more slots, the rarer the switch (4 ranks on
  // 2 cores, 8 B Broadcast, us: 64 slots 1.15, 256 0.9, 1024 0.6; Reduce 1.0 -> 0.62 with 1024). Transports reserve
  // their buffers up front (p2p-nvlink: /dev/shm between processes, populated), hence a budget per rank.
  const int64_t conns = 2ll * nChannels * std::max(1, t.nLocalRanks - 1);
  int slots = kLLSharedSlots;
  while (slots > PLEXUS_LL_HOST_SLOTS && (int64_t)slots * PLEXUS_LL_SLOT_BYTES * conns > kLLSharedBytes) slots /= 2;
  return slots;
}

plexusAlgoTopo_v1_t algoTopology(const Topology& t, int rank, int nChannels, size_t buffSize) {
  plexusAlgoTopo_v1_t a{};
  a.rank = rank;
  a.nRanks = (int)t.rankNode.size();
  a.node = t.node;
  a.nNodes = t.nNodes;
  a.localRank = t.localRank;
  a.nLocalRanks = t.nLocalRanks;
  a.rankNode = t.rankNode.data();
  a.rankLocalRank = t.rankLocalRank.data();
  const LinkPerf local = localLinkPerf(t, nChannels), net = netLinkPerf();
  a.localHopUs = local.hopUs;
  a.localGBs = local.gbs;
  a.netHopUs = net.hopUs;
  a.netGBs = net.gbs;
  a.coresShared = t.coresShared(nChannels) ? (t.machineRanks * nChannels + t.cores - 1) / t.cores : 0;
  a.stepBytes = (int)(buffSize / PLEXUS_STEPS);
  return a;
}

plexusAlgoProtocols_v2_t algoProtocols(const Topology& t, const plexusAlgoTopo_v1_t& topo) {
  plexusAlgoProtocols_v2_t p = plexusAlgoDefaultProtocols(&topo);
  if (t.deviceChannels || topo.coresShared) return p;
  // The host's protocols where every rank has a core (measured: plexus-perf, 2 ranks on 2 cores, 8 B to 4 KiB,
  // NCCL_PROTO=LL, LL128 and Simple). LL: a reader takes the lines one cache line at a time from the core that
  // wrote them, each a coherence round trip, so past a line or two it falls far behind Simple's copies: ahead
  // below about 64 bytes per link, behind from 128 on (AllReduce of 128 B 0.84 against 0.70-0.75 us, AllGather of
  // 512 B 1.03-1.09 against 0.73-0.77 us, runs alternated); a twelfth of Simple's bandwidth puts the crossing
  // there. LL128 takes as long as Simple for 8 bytes and longer for more: its hop is Simple's. Where cores are
  // shared a hop is a context switch, which neither changes: the defaults stand.
  p.bw[PLEXUS_PROTO_LL] = 1.0f / 12.0f;
  p.hop[PLEXUS_PROTO_LL128] = 1.0f;
  return p;
}

}  // namespace plexus
