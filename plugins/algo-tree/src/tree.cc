// algo-tree: double binary trees per channel (tree_graph.h), an alpha-beta cost model, and the host
// entry of the step loops (tree_collectives.h).
#include <plexus/algo_v2.h>
#include <plexus/device/kernel.h>

#include <algorithm>
#include <atomic>
#include <new>
#include <vector>

#include "tree_collectives.h"

// Compiled in the units plexus_add_algo_plugin writes, one per group of datatypes.
PLEXUS_ALGO_HOST_EXTERN(plexus::tree::Runner)
#include "tree_graph.h"

namespace {

// Every communicator passes the same function; kept where runHost (which needs no context) finds it.
std::atomic<ncclDebugLogger_t> logger{nullptr};

struct Context {
  plexusAlgoTopo_v2_t topo;  // the arrays are not kept: rankNode and rankLocalRank below are
  std::vector<int> rankNode, rankLocalRank;
  plexus::tree::Depth deepest;  // the longest way to the root, over both trees
  int arity = 0;                // most children of any rank
  std::vector<int> widths;      // ranks at each depth of the first tree
  plexusAlgoProtocols_v2_t protocols{};  // setProtocols: the core's figures; its defaults until then
};

ncclResult_t treeInit(void** ctx, const plexusAlgoTopo_v2_t* topo, ncclDebugLogger_t log) {
  if (log) logger.store(log, std::memory_order_relaxed);
  auto* c = new (std::nothrow) Context{};
  if (!c) return ncclSystemError;
  c->topo = *topo;
  c->protocols = plexusAlgoDefaultProtocols(topo);
  c->rankNode.assign(topo->rankNode, topo->rankNode + topo->nRanks);
  c->rankLocalRank.assign(topo->rankLocalRank, topo->rankLocalRank + topo->nRanks);
  c->topo.rankNode = c->topo.rankLocalRank = nullptr;
  for (int variant = 0; variant < 2; variant++) {
    const std::vector<int> parents = plexus::tree::treeParents(c->topo, c->rankNode, c->rankLocalRank, variant);
    std::vector<int> children(topo->nRanks, 0);
    for (int r = 0; r < topo->nRanks; r++) {
      if (parents[r] >= 0) c->arity = std::max(c->arity, ++children[parents[r]]);
      const plexus::tree::Depth d = plexus::tree::depthOf(parents, c->rankNode, r);
      if (d.net > c->deepest.net || (d.net == c->deepest.net && d.local > c->deepest.local)) c->deepest = d;
      if (variant == 0) {
        if ((int)c->widths.size() <= d.local + d.net) c->widths.resize(d.local + d.net + 1, 0);
        c->widths[d.local + d.net]++;
      }
    }
  }
  *ctx = c;
  return ncclSuccess;
}

// Each node's ranks take their tree positions in order of place (local rank where places are equal): the chain
// inside a node, and siblings of the one-node tree, stay inside a switch, a host bridge, a NUMA node where the
// machine allows. The trees keep their shapes, so what init measured of them (depth, arity) stands.
ncclResult_t treeSetPlaces(void* ctx, const uint64_t* place) {
  auto* c = (Context*)ctx;
  const int n = c->topo.nRanks;
  std::vector<int> order(n);
  for (int r = 0; r < n; r++) order[r] = r;
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (c->rankNode[a] != c->rankNode[b]) return c->rankNode[a] < c->rankNode[b];
    if (place[a] != place[b]) return place[a] < place[b];
    return c->rankLocalRank[a] < c->rankLocalRank[b];
  });
  for (int i = 0, pos = 0; i < n; i++) {
    pos = i > 0 && c->rankNode[order[i]] == c->rankNode[order[i - 1]] ? pos + 1 : 0;
    c->rankLocalRank[order[i]] = pos;
  }
  return ncclSuccess;
}

ncclResult_t treeBuildGraph(void* ctx, plexusAlgoGraph_v2_t* graph) {
  auto* c = (Context*)ctx;
  const int me = c->topo.rank;
  for (int ch = 0; ch < graph->nChannels; ch++) {
    const std::vector<int> parents = plexus::tree::treeParents(c->topo, c->rankNode, c->rankLocalRank, ch % 2);
    plexusDevTree_v1_t& t = graph->channels[ch].tree;
    t.up = parents[me];
    int k = 0;
    for (int r = 0; r < c->topo.nRanks; r++)
      if (parents[r] == me) {
        if (k == PLEXUS_MAX_TREE_ARITY) return ncclInternalError;
        t.down[k++] = r;
      }
    for (; k < PLEXUS_MAX_TREE_ARITY; k++) t.down[k] = -1;
    const plexus::tree::Depth d = plexus::tree::depthOf(parents, c->rankNode, me);
    t.depth = d.local + d.net;
    std::copy(parents.begin(), parents.end(), graph->channels[ch].treeParents);
  }
  graph->connectMask = PLEXUS_ALGO_CONNECT_TREE;
  return ncclSuccess;
}

ncclResult_t treeSetProtocols(void* ctx, const plexusAlgoProtocols_v2_t* protocols) {
  ((Context*)ctx)->protocols = *protocols;
  return ncclSuccess;
}

// Alpha-beta model with the link figures the core gives, over the deepest way to the root (D hops,
// some within a node, some across):
//   AllReduce          2D hops (up, then down), and the busiest rank moves its buffer up and down:
//                      the children's data in and the result out, (1 + arity) copies each way where
//                      a ring's rank moves 2(n-1)/n; across nodes, every network link carries the
//                      buffer both ways (half of it per tree of the double tree).
//   Broadcast/Reduce   about 1.5D hops (the tree re-rooted at root is deeper than D from most
//                      roots), the buffer once through the busiest rank's 1 + arity copies.
// Where the node's ranks share cores, a level of the tree is done when each of its ranks has had a
// core: ceil(ranks at the level / cores) context switches a level, each a local hop; and the copies
// of every rank queue on the same cores, so the work of all ranks counts: the tree's is 1.6 times
// the ring's (measured: 8 ranks on 2 cores, 512 KiB to 16 MiB). LL and LL128 by the core's figures (setProtocols).
ncclResult_t treeCost(void* ctx, ncclFunc_t func, int proto, size_t nBytes, int nChannels, float* timeUs) {
  auto* c = (Context*)ctx;
  const plexusAlgoTopo_v2_t& t = c->topo;
  const int n = t.nRanks;
  *timeUs = -1.0f;
  if (proto < 0 || proto >= PLEXUS_NUM_PROTOCOLS) return ncclSuccess;
  if (func != ncclFuncAllReduce && func != ncclFuncBroadcast && func != ncclFuncReduce) return ncclSuccess;
  const float bytes = (float)nBytes, ch = (float)(nChannels > 0 ? nChannels : 1);
  if (n <= 1) {
    *timeUs = bytes / (t.localGBs * 1e3f);
    return ncclSuccess;
  }
  const bool allReduce = func == ncclFuncAllReduce;
  const float ways = allReduce ? 2.0f : 1.5f;
  float localHops = (float)c->deepest.local;
  if (t.coresShared && t.nNodes == 1) {
    const int cores = t.nLocalRanks / t.coresShared > 1 ? t.nLocalRanks / t.coresShared : 1;
    localHops = 0;
    for (size_t d = 1; d < c->widths.size(); d++) localHops += (float)((c->widths[d] + cores - 1) / cores);
  }
  const float hopUs = (localHops * t.localHopUs + c->deepest.net * t.netHopUs) * ways;
  const int hops = (int)((c->deepest.local + c->deepest.net) * ways + 0.5f);
  float linkBytes, gbs;
  if (t.nNodes > 1) {
    linkBytes = bytes * (allReduce ? 2.0f : 1.0f) * (nChannels > 1 ? 0.75f : 1.0f);
    gbs = t.netGBs;
  } else {
    const float ringBytes = (allReduce ? 2.0f : 1.0f) * (n - 1) / n * bytes;
    // Sharing cores, the ranks' copies and reductions share them: an inner rank's 3-way reductions
    // and 2-way copies cost about twice the ring's traffic (measured: 8 ranks on 2 cores).
    linkBytes = t.coresShared ? 2.0f * ringBytes : (1 + c->arity) / 2.0f * (allReduce ? 2.0f : 1.0f) * bytes;
    gbs = t.localGBs;
  }
  gbs *= c->protocols.bw[proto];
  // The pipeline's grain: the step loops' chunk (treeChunk), within an LL slot or an LL128 step of lines.
  const float part = bytes / ch;
  float grain = std::max(part / (2.0f * (c->widths.size())), 65536.0f);
  if (proto == PLEXUS_PROTO_LL) grain = (float)(PLEXUS_LL_SLOT_LINES * 8);
  if (proto == PLEXUS_PROTO_LL128) grain = std::min(grain, (float)(PLEXUS_LL128_STEP_LINES(t.stepBytes) * 120));
  grain = std::min(std::min(grain, part), (float)t.stepBytes);
  // The pipeline fills one rank at a time, so each hop of it has a core to itself.
  const float fillGBs = t.coresShared && t.nNodes == 1 ? gbs * (float)t.coresShared : gbs;
  *timeUs = hopUs * c->protocols.hop[proto] + linkBytes / (gbs * ch * 1e3f) + (hops - 1) * grain / (fillGBs * 1e3f);
  return ncclSuccess;
}

ncclResult_t treeRunHost(void*, const plexusDevKernelArgs_v1_t* args, int channelId) {
  const plexusDevWork_v1_t* bad = nullptr;
  const ncclResult_t r = plexus::dev::runLaunchHost<plexus::tree::Runner>(args, channelId, &bad);
  if (bad)
    if (ncclDebugLogger_t log = logger.load(std::memory_order_relaxed))
      log(NCCL_LOG_WARN, NCCL_COLL, __FILE__, __LINE__, "algo-tree: no step loop for func %d datatype %d redop %d",
          bad->func, bad->datatype, bad->redop);
  return r;
}

ncclResult_t treeFinalize(void* ctx) {
  delete (Context*)ctx;
  return ncclSuccess;
}

}  // namespace

#ifdef PLEXUS_ALGO_CUDA
extern "C" ncclResult_t plexusTreeGetCudaKernel(void* ctx, const plexusDevWork_v1_t* work, void** function);
#endif

extern "C" __attribute__((visibility("default"))) const plexusAlgo_v2_t plexusAlgoPlugin_v2 = {
    PLEXUS_ALGO_ABI_VERSION,
    sizeof(plexusAlgo_v2_t),
    "tree",
    (1u << ncclFuncAllReduce) | (1u << ncclFuncBroadcast) | (1u << ncclFuncReduce),
    (1u << PLEXUS_PROTO_SIMPLE) | (1u << PLEXUS_PROTO_LL) | (1u << PLEXUS_PROTO_LL128),
    treeInit,
    treeBuildGraph,
    treeCost,
    treeRunHost,
#ifdef PLEXUS_ALGO_CUDA
    plexusTreeGetCudaKernel,
#else
    nullptr,
#endif
    treeFinalize,
    treeSetPlaces,
    treeSetProtocols,
};
