// algo-tree's trees (plugins/algo-tree/src/tree_graph.h) and the core's check of a tree graph
// (channelsSetTrees): shapes within a node and across nodes, the double tree's disjoint inner ranks,
// and tables the core must refuse.
#include <doctest/doctest.h>

#include <vector>

#include "../../plugins/algo-tree/src/tree_graph.h"
#include "channel/channel.h"

using namespace plexus;

namespace {

plexusAlgoTopo_v1_t topoOf(int nRanks, int nNodes) {
  plexusAlgoTopo_v1_t t{};
  t.nRanks = nRanks;
  t.nNodes = nNodes;
  return t;
}

// Children per rank, and a check that every rank reaches the single root.
std::vector<int> childCounts(const std::vector<int>& parents) {
  std::vector<int> kids(parents.size(), 0);
  int roots = 0;
  for (size_t r = 0; r < parents.size(); r++) {
    if (parents[r] < 0) roots++;
    else kids[parents[r]]++;
    int hops = 0;
    for (int p = (int)r; p >= 0 && hops <= (int)parents.size(); p = parents[p]) hops++;
    CHECK(hops <= (int)parents.size());
  }
  CHECK(roots == 1);
  return kids;
}

}  // namespace

TEST_CASE("trees: one node, binary, log2 deep, inner ranks of the two trees disjoint") {
  for (int n = 1; n <= 17; n++) {
    CAPTURE(n);
    std::vector<int> node(n, 0), local(n);
    for (int r = 0; r < n; r++) local[r] = r;
    std::vector<int> inner[2];
    for (int variant = 0; variant < 2; variant++) {
      const std::vector<int> parents = tree::treeParents(topoOf(n, 1), node, local, variant);
      const std::vector<int> kids = childCounts(parents);
      int depth = 0, log2n = 0;
      while ((2 << log2n) <= n) log2n++;
      for (int r = 0; r < n; r++) {
        CHECK(kids[r] <= 2);
        if (kids[r]) inner[variant].push_back(r);
        depth = std::max(depth, tree::depthOf(parents, node, r).local);
        CHECK(tree::depthOf(parents, node, r).net == 0);
      }
      CHECK(depth == log2n);
    }
    if (n % 2 == 0)
      for (int r : inner[0]) CHECK(std::find(inner[1].begin(), inner[1].end(), r) == inner[1].end());
  }
}

TEST_CASE("trees: across nodes, a tree of the nodes' first ranks and a chain inside each node") {
  // 4 nodes of 3 ranks, ranks dealt round robin (rank r on node r % 4) and local ranks reversed, so
  // that the shape must come from rankNode and rankLocalRank, not from rank numbers.
  const int nNodes = 4, perNode = 3, n = nNodes * perNode;
  std::vector<int> node(n), local(n);
  for (int r = 0; r < n; r++) {
    node[r] = r % nNodes;
    local[r] = perNode - 1 - r / nNodes;
  }
  for (int variant = 0; variant < 2; variant++) {
    CAPTURE(variant);
    const std::vector<int> parents = tree::treeParents(topoOf(n, nNodes), node, local, variant);
    const std::vector<int> kids = childCounts(parents);
    for (int r = 0; r < n; r++) {
      CHECK(kids[r] <= PLEXUS_MAX_TREE_ARITY);
      const int p = parents[r];
      if (local[r] > 0) {
        // Inside a node: the chain, in local-rank order.
        REQUIRE(p >= 0);
        CHECK(node[p] == node[r]);
        CHECK(local[p] == local[r] - 1);
      } else if (p >= 0) {
        // A node's first rank hangs below another node's first rank.
        CHECK(node[p] != node[r]);
        CHECK(local[p] == 0);
      }
      CHECK(tree::depthOf(parents, node, r).net <= 2);  // log2(4) network hops at most
    }
  }
}

TEST_CASE("trees: the core takes a consistent table and refuses broken ones") {
  // Ranks 0..3: 0 is the root with children 1 and 2; 3 hangs below 1. This is rank 1's view.
  Channels ch;
  channelsInit(&ch, 1, 4);
  std::vector<int> parents{-1, 0, 0, 1};
  std::vector<int> order{0, 1, 2, 3};
  plexusAlgoGraph_v1_t g{};
  g.nChannels = 1;
  g.channels[0].ringOrder = order.data();
  g.channels[0].treeParents = parents.data();
  g.channels[0].tree = plexusDevTree_v1_t{1, 0, {3, -1, -1}, 0, nullptr};
  REQUIRE(channelsSetTrees(&ch, 1, 4, g) == ncclSuccess);
  CHECK(ch.dev[0].tree.up == 0);
  CHECK(ch.dev[0].tree.down[0] == 3);
  CHECK(ch.dev[0].tree.parents[3] == 1);
  CHECK(ch.dev[0].tree.parents == ch.treeParents[0].data());

  std::vector<int> cycle{-1, 3, 0, 1};  // 1 -> 3 -> 1
  g.channels[0].treeParents = cycle.data();
  g.channels[0].tree = plexusDevTree_v1_t{1, 3, {-1, -1, -1}, 0, nullptr};
  CHECK(channelsSetTrees(&ch, 1, 4, g) == ncclInternalError);

  std::vector<int> wrongChild{-1, 0, 0, 2};  // rank 1 says 3 is its child; the table says 2
  g.channels[0].treeParents = wrongChild.data();
  g.channels[0].tree = plexusDevTree_v1_t{1, 0, {3, -1, -1}, 0, nullptr};
  CHECK(channelsSetTrees(&ch, 1, 4, g) == ncclInternalError);

  std::vector<int> twoRoots{-1, 0, -1, 1};
  g.channels[0].treeParents = twoRoots.data();
  CHECK(channelsSetTrees(&ch, 1, 4, g) == ncclInternalError);
}
