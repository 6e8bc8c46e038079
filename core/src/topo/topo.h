// Physical mapping (layer 6): who shares a node and a process with whom. hwloc topology (NUMA, PCI,
// NICs, GPUs) comes with the net transport; the host backend needs only node and process identity.
#pragma once

#include <plexus/transport_v1.h>

#include <cstdint>
#include <vector>

namespace plexus {

// Equal for ranks of one node. NCCL_HOSTID / PLEXUS_HOSTID overrides, so that ranks of one machine
// can act as separate nodes.
uint64_t hostHash();
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
};

Topology computeTopology(const std::vector<plexusPeerInfo_v1_t>& peers, int rank);

}  // namespace plexus
