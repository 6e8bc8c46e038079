// Per-communicator channels (layer 3): each channel has a Ring (and a Tree), and per peer a send and
// a recv connector whose buffers, head/tail and connFifo the transports fill in.
#pragma once

#include <plexus/algo_v1.h>
#include <plexus/device_v1.h>

#include <memory>
#include <vector>

#include "proxy/proxy.h"

namespace plexus {

struct TransportPlugin;

// One connector's transport resources, freed with the communicator.
struct Connection {
  const TransportPlugin* transport = nullptr;
  void* resources = nullptr;
  bool isSend = false;
  int channel = 0;
  int peer = 0;
  std::unique_ptr<ProxyConnection> proxy;  // registered with the proxy while connected, if proxy-driven
};

struct Channels {
  int count = 0;
  std::vector<plexusDevChannel_v1_t> dev;                 // what host kernels see, one per channel
  // Where the running kernels keep each channel's status and waits (the watchdog and hang reports read them):
  // dev on the host backend, its host-mapped copy on CUDA.
  plexusDevChannel_v1_t* live = nullptr;
  std::vector<std::vector<plexusDevChannelPeer_v1_t>> peers;  // [channel][rank]
  std::vector<std::vector<int>> ringOrder;                // [channel][position] -> rank
  std::vector<std::vector<int>> treeParents;              // [channel][rank] -> its tree parent, -1 at the root
  std::vector<Connection> connections;
};

// Allocates nChannels channels for nRanks ranks with no connections yet.
void channelsInit(Channels* ch, int nChannels, int nRanks);
// Sets each channel's ring order and links (prev, next, this rank's index) from an algorithm's graph.
ncclResult_t channelsSetRings(Channels* ch, int rank, int nRanks, const plexusAlgoGraph_v1_t& graph);
// Sets each channel's tree (up, down[], depth, every rank's parent) from an algorithm's graph, after
// checking that it is one tree and agrees with this rank's links.
ncclResult_t channelsSetTrees(Channels* ch, int rank, int nRanks, const plexusAlgoGraph_v1_t& graph);

}  // namespace plexus
