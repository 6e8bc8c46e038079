#include "channel.h"

#include <algorithm>

#include "misc/check.h"

namespace plexus {

void channelsInit(Channels* ch, int nChannels, int nRanks) {
  ch->count = nChannels;
  ch->dev.assign(nChannels, plexusDevChannel_v1_t{});
  ch->peers.assign(nChannels, std::vector<plexusDevChannelPeer_v1_t>(nRanks, plexusDevChannelPeer_v1_t{}));
  ch->ringOrder.assign(nChannels, std::vector<int>(nRanks, 0));
  ch->treeParents.assign(nChannels, std::vector<int>(nRanks, -1));
  for (int c = 0; c < nChannels; c++) {
    plexusDevChannel_v1_t& d = ch->dev[c];
    d.id = c;
    d.status = PLEXUS_CHANNEL_OK;
    d.peers = ch->peers[c].data();
    d.ring.userRanks = ch->ringOrder[c].data();
    d.tree.up = -1;
    for (int& down : d.tree.down) down = -1;
    d.tree.parents = ch->treeParents[c].data();
    d.waitPeer = -1;
  }
}

ncclResult_t channelsSetRings(Channels* ch, int rank, int nRanks, const plexusAlgoGraph_v1_t& graph) {
  for (int c = 0; c < ch->count; c++) {
    std::vector<int>& order = ch->ringOrder[c];
    std::copy(graph.channels[c].ringOrder, graph.channels[c].ringOrder + nRanks, order.begin());
    std::vector<int> seen(nRanks, 0);
    int index = -1;
    for (int i = 0; i < nRanks; i++) {
      int r = order[i];
      if (r < 0 || r >= nRanks || seen[r]++)
        return setError(nullptr, ncclInternalError,
                        "algorithm graph: channel %d's ring order is not a permutation of the %d ranks (position %d "
                        "holds %d)", c, nRanks, i, r);
      if (r == rank) index = i;
    }
    plexusDevRing_v1_t& ring = ch->dev[c].ring;
    ring.index = index;
    ring.prev = order[(index + nRanks - 1) % nRanks];
    ring.next = order[(index + 1) % nRanks];
  }
  return ncclSuccess;
}

ncclResult_t channelsSetTrees(Channels* ch, int rank, int nRanks, const plexusAlgoGraph_v1_t& graph) {
  for (int c = 0; c < ch->count; c++) {
    const plexusDevTree_v1_t& t = graph.channels[c].tree;
    auto bad = [&](const char* what, int v) {
      return setError(nullptr, ncclInternalError,
                      "algorithm graph: channel %d's tree on rank %d has %s %d (ranks are 0..%d, -1 for none, never "
                      "the rank itself or twice)", c, rank, what, v, nRanks - 1);
    };
    if (t.up < -1 || t.up >= nRanks || t.up == rank) return bad("up", t.up);
    for (int i = 0; i < PLEXUS_MAX_TREE_ARITY; i++) {
      const int d = t.down[i];
      if (d < -1 || d >= nRanks || d == rank || (d >= 0 && d == t.up)) return bad("down", d);
      for (int j = 0; j < i; j++)
        if (d >= 0 && t.down[j] == d) return bad("down", d);
    }
    // The parent table: this rank's links as given, and one root that every rank reaches.
    const int* parents = graph.channels[c].treeParents;
    auto badTable = [&](const char* why, int r) {
      return setError(nullptr, ncclInternalError, "algorithm graph: channel %d's tree parent table on rank %d: %s "
                      "(rank %d)", c, rank, why, r);
    };
    if (parents[rank] != t.up) return badTable("the entry of this rank is not its tree.up", rank);
    for (int d : t.down)
      if (d >= 0 && parents[d] != rank) return badTable("a child of this rank has another parent", d);
    int roots = 0;
    for (int r = 0; r < nRanks; r++) {
      if (parents[r] < -1 || parents[r] >= nRanks) return badTable("a parent is not a rank", r);
      roots += parents[r] == -1;
      int hops = 0;
      for (int p = r; p >= 0; p = parents[p])
        if (++hops > nRanks) return badTable("the parents form a cycle", r);
    }
    if (roots != 1) return badTable("the table has no single root", -1);
    std::copy(parents, parents + nRanks, ch->treeParents[c].begin());
    plexusDevTree_v1_t& dev = ch->dev[c].tree;
    dev.depth = t.depth;
    dev.up = t.up;
    std::copy(t.down, t.down + PLEXUS_MAX_TREE_ARITY, dev.down);
  }
  return ncclSuccess;
}

}  // namespace plexus
