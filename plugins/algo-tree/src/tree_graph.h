/*
 * The trees of algo-tree, as a table of every rank's parent per channel (host only; the step loops
 * read the links the core copies into each channel).
 *
 * Within one node: a binary tree over the node's ranks, heap-shaped (position p has parent
 * (p - 1) / 2), depth log2(n). Across nodes (NCCL's shape): a binary tree over the nodes whose
 * edges join the nodes' first ranks, and a chain through the ranks of each node below its first.
 * Odd channels mirror the positions (the rank at position p is the one at n - 1 - p), so that the
 * inner ranks of one tree are leaves of the other and two channels share the work of the inner
 * ranks: NCCL's double binary tree.
 */
#pragma once

#include <plexus/algo_v1.h>

#include <algorithm>
#include <vector>

namespace plexus::tree {

/* The parent of heap position p among n positions, mirrored on odd variants; -1 at the root. */
inline int heapParent(int p, int n, int variant) {
  const int pos = variant % 2 ? n - 1 - p : p;
  if (pos == 0) return -1;
  const int parentPos = (pos - 1) / 2;
  return variant % 2 ? n - 1 - parentPos : parentPos;
}

/* Every rank's parent in the tree of `variant` (0 or 1). */
inline std::vector<int> treeParents(const plexusAlgoTopo_v1_t& t, const std::vector<int>& rankNode,
                                    const std::vector<int>& rankLocalRank, int variant) {
  const int n = t.nRanks;
  std::vector<std::vector<int>> nodes(t.nNodes);
  for (int r = 0; r < n; r++) nodes[rankNode[r]].push_back(r);
  for (auto& members : nodes)
    std::sort(members.begin(), members.end(), [&](int a, int b) { return rankLocalRank[a] < rankLocalRank[b]; });
  std::vector<int> parents(n, -1);
  if (t.nNodes == 1) {
    const std::vector<int>& m = nodes[0];
    for (int i = 0; i < n; i++) {
      const int p = heapParent(i, n, variant);
      parents[m[i]] = p < 0 ? -1 : m[p];
    }
    return parents;
  }
  for (int node = 0; node < t.nNodes; node++) {
    const std::vector<int>& m = nodes[node];
    if (m.empty()) continue;
    for (size_t i = 1; i < m.size(); i++) parents[m[i]] = m[i - 1];
    const int up = heapParent(node, t.nNodes, variant);
    parents[m[0]] = up < 0 || nodes[up].empty() ? -1 : nodes[up][0];
  }
  return parents;
}

/* The hops from `rank` to the root, within a node and between nodes. */
struct Depth {
  int local = 0, net = 0;
};
inline Depth depthOf(const std::vector<int>& parents, const std::vector<int>& rankNode, int rank) {
  Depth d;
  for (int r = rank; parents[r] >= 0 && d.local + d.net < (int)parents.size(); r = parents[r])
    (rankNode[parents[r]] == rankNode[r] ? d.local : d.net)++;
  return d;
}

}  // namespace plexus::tree
