// Physical mapping (layer 6): who shares a node and a process with whom. hwloc topology (NUMA, PCI,
// NICs, GPUs) comes with the net transport; the host backend needs only node and process identity.
#pragma once

#include <plexus/algo_v2.h>
#include <plexus/transport_v1.h>

#include <cstdint>
#include <vector>

namespace plexus {

// Equal for ranks of one node. NCCL_HOSTID / PLEXUS_HOSTID overrides, so that ranks of one machine
// can act as separate nodes.
uint64_t hostHash();
// Equal for ranks of one machine (host name and boot id), NCCL_HOSTID or not.
uint64_t machineHash();
// Equal for ranks of one process.
uint64_t pidHash();
// Device number of /dev/shm: processes that see the same one can share memory.
uint64_t shmDevice();

plexusPeerInfo_v1_t localPeerInfo(int rank, int device, int backend);

struct Topology {
  int nNodes = 0;
  int node = 0;                // this rank's node
  int localRank = 0;
  int nLocalRanks = 0;
  std::vector<int> rankNode;   // node index per rank, nodes numbered by their lowest rank
  std::vector<int> rankLocalRank;
  // CPUs the machine's ranks may run on: the union of their affinity sets (cgroup cpusets narrow them too).
  // Not one process's own set: a launcher that binds each rank to a core (mpirun does) leaves each a
  // single CPU, yet the ranks do not share one.
  int cores = 1;
  // Who else runs on this machine: more than the node's ranks where NCCL_HOSTID splits a machine into
  // nodes, and they all share its cores.
  int machineRanks = 1;
  int machineProcs = 1;
  // Where each rank sits in its machine (HwTopology::place): what algorithm plugins order a node's ranks by.
  std::vector<uint64_t> rankPlace;
  // CUDA backend: a channel is a block of the rank's kernel on its GPU, not a host thread, so cores bound nothing.
  bool deviceChannels = false;

  // True when the machine's ranks, each running nChannels host channels (and, across nodes or where `proxy` says
  // a proxy-driven transport serves, each process its proxy thread), outnumber its cores.
  bool coresShared(int nChannels, bool proxy = false) const {
    return !deviceChannels && (long)machineRanks * nChannels + (nNodes > 1 || proxy ? machineProcs : 0) > cores;
  }
};

// What cost models assume of a link: one hop's latency and one channel's bandwidth.
struct LinkPerf {
  float hopUs;
  float gbs;
};
// Host shared memory between the node's ranks, measured on a 2-core EPYC VM (a hop of ~0.08 us
// with a core per rank, ~2.2 us of context switch when they share; ~16 GB/s per channel of cached
// copies, shared out when the ranks' channels outnumber the cores).
LinkPerf localLinkPerf(const Topology& t, int nChannels);
// The network between nodes (the socket net over TCP until the net transport measures its plugin).
LinkPerf netLinkPerf();

// The CPUs a rank may run on, as exchanged at init (CPU_SETSIZE bits).
struct CpuMask {
  uint64_t bits[16] = {};
};
CpuMask localCpuMask();
Topology computeTopology(const std::vector<plexusPeerInfo_v1_t>& peers, const std::vector<CpuMask>& cpus, int rank);

// Channels to set up: NCCL_MIN_NCHANNELS/NCCL_MAX_NCHANNELS bound it; by default as many as the
// node's cores can run at once for its ranks (a host channel is a thread), at most 4; on the CUDA backend 16 (a
// channel is a thread block: one block moves a few tens of GB/s, a GPU's memory several TB/s).
int channelCount(const Topology& t);

// LL slots per connection between host-backend ranks when NCCL_LL_BUFFSIZE does not say: PLEXUS_LL_HOST_SLOTS, or
// where the machine's ranks (nChannels host threads each) outnumber its cores up to kLLSharedSlots, as many as
// kLLSharedBytes of LL buffer per rank allow over its connections with the node's other ranks, both ways.
constexpr int kLLSharedSlots = 1024;
constexpr int64_t kLLSharedBytes = 32ll << 20;
int llHostSlots(const Topology& t, int nChannels);

// What algorithm plugins are told of rank's view of t, with nChannels channels of buffSize bytes per
// connection. The arrays point into t.
plexusAlgoTopo_v1_t algoTopology(const Topology& t, int rank, int nChannels, size_t buffSize);

// What the step loops make of each protocol on these links (plexusAlgo_v2_t.setProtocols), for algoTopology's topo.
plexusAlgoProtocols_v2_t algoProtocols(const Topology& t, const plexusAlgoTopo_v1_t& topo);

}  // namespace plexus
