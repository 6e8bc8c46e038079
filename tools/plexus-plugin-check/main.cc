// plexus-plugin-check: conformance of an algorithm or transport plugin to Plexus's ABIs, as plexus-net-check is for
// NCCL's net ABI. For a transport plugin (a file exporting plexusTransportPlugin_v1): transport_check.cc. For an
// algorithm plugin it loads the plugin as the core does and checks, one PASS/FAIL line per rule:
//   load    the symbol, ABI version, table size and required members (the core's own adapters);
//   graphs  for 1..16 ranks on 1..4 nodes (ranks in blocks and interleaved), 1, 2 and 4 channels, and with places
//           that split a node in two: every rank builds the same graph; each ring holds every rank once; each tree
//           has one root, no cycle, every rank connected, at most PLEXUS_MAX_TREE_ARITY children, and each rank's
//           up/down links agree with the parents table; maxChannels within [0, nChannels];
//   cost    for every collective and protocol the plugin claims, 8 B .. 1 GiB: a time that is finite and positive
//           (or negative: "not supported"), never shrinking as the size grows;
//   finalize every context made is finalized with ncclSuccess.
// Exit status 0 when every rule passes, 1 otherwise, 2 for bad usage. The step loops' results are the test suite's
// (tests/multirank's matrix runs every plugin's collectives against an independent reference).
#include <plexus/algo_v2.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "plugin/algo.h"
#include "misc/check.h"
#include "planner/planner.h"
#include "plugin/loader.h"
#include "transport_check.h"

namespace {

using plexus::AlgoApi;

int failures = 0;
void report(bool pass, const std::string& rule, const std::string& what) {
  printf("%s %s: %s\n", pass ? "PASS" : "FAIL", rule.c_str(), what.c_str());
  if (!pass) failures++;
}

struct Case {
  int nRanks, nNodes, nChannels;
  bool interleaved;  // rank r on node r % nNodes, else in blocks
  bool places;       // each node's ranks in two places, alternating
  std::string name() const {
    char b[128];
    snprintf(b, sizeof b, "%d rank(s), %d node(s)%s, %d channel(s)%s", nRanks, nNodes,
             interleaved ? " interleaved" : "", nChannels, places ? ", two places per node" : "");
    return b;
  }
};

// A rank's view as the core gives it, with the core's link figures for host ranks with a core each and its socket net.
plexusAlgoTopo_v1_t topoOf(int rank, int nNodes, const std::vector<int>& rankNode, const std::vector<int>& rankLocal) {
  plexusAlgoTopo_v1_t t{};
  t.rank = rank;
  t.nRanks = (int)rankNode.size();
  t.node = rankNode[rank];
  t.nNodes = nNodes;
  t.localRank = rankLocal[rank];
  for (int r = 0; r < t.nRanks; r++) t.nLocalRanks += rankNode[r] == t.node;
  t.rankNode = rankNode.data();
  t.rankLocalRank = rankLocal.data();
  t.localHopUs = 0.08f;
  t.localGBs = 16.0f;
  t.netHopUs = 8.0f;
  t.netGBs = 3.0f;
  t.stepBytes = (4 << 20) / PLEXUS_STEPS;
  return t;
}

// What one rank's plugin instance built.
struct Built {
  uint32_t connectMask = 0;
  int maxChannels = 0;
  std::vector<std::vector<int>> rings, parents;
  std::vector<plexusDevTree_v1_t> trees;
};

// Runs init (and setPlaces), buildGraph and finalize for every rank of a case; "" or what went wrong.
std::string buildAll(const AlgoApi& api, const Case& c, std::vector<Built>* out, int* contexts, int* finalized) {
  std::vector<int> rankNode(c.nRanks), rankLocal(c.nRanks), count(c.nNodes, 0);
  for (int r = 0; r < c.nRanks; r++) {
    rankNode[r] = c.interleaved ? r % c.nNodes : (int)((long)r * c.nNodes / c.nRanks);
    rankLocal[r] = count[rankNode[r]]++;
  }
  std::vector<uint64_t> place(c.nRanks);
  for (int r = 0; r < c.nRanks; r++) place[r] = c.places ? 1ull << 32 | (uint64_t)(1 + rankLocal[r] % 2) << 16 : 0;
  out->assign(c.nRanks, Built{});
  for (int r = 0; r < c.nRanks; r++) {
    const plexusAlgoTopo_v1_t t = topoOf(r, c.nNodes, rankNode, rankLocal);
    void* ctx = nullptr;
    if (api.init(&ctx, &t, nullptr) != ncclSuccess) return "init failed on rank " + std::to_string(r);
    (*contexts)++;
    std::string error;
    if (c.places && api.setPlaces(ctx, place.data()) != ncclSuccess) error = "setPlaces failed";
    Built& b = (*out)[r];
    b.rings.assign(c.nChannels, std::vector<int>(c.nRanks, -1));
    b.parents.assign(c.nChannels, std::vector<int>(c.nRanks, -2));
    plexusAlgoGraph_v1_t g{};
    g.nChannels = c.nChannels;
    for (int ch = 0; ch < c.nChannels; ch++) {
      g.channels[ch].ringOrder = b.rings[ch].data();
      g.channels[ch].treeParents = b.parents[ch].data();
      for (int k = 0; k < PLEXUS_MAX_TREE_ARITY; k++) g.channels[ch].tree.down[k] = -1;
      g.channels[ch].tree.up = -1;
    }
    if (error.empty() && api.buildGraph(ctx, &g) != ncclSuccess) error = "buildGraph failed";
    b.connectMask = g.connectMask;
    b.maxChannels = g.maxChannels;
    for (int ch = 0; ch < c.nChannels; ch++) b.trees.push_back(g.channels[ch].tree);
    if (api.finalize(ctx) == ncclSuccess) (*finalized)++;
    if (!error.empty()) return error + " on rank " + std::to_string(r);
  }
  return "";
}

std::string checkGraphs(const Case& c, const std::vector<Built>& b) {
  const int n = c.nRanks;
  for (int r = 0; r < n; r++) {
    if (b[r].connectMask != b[0].connectMask) return "ranks 0 and " + std::to_string(r) + " ask for different connections";
    if (b[r].maxChannels < 0 || b[r].maxChannels > c.nChannels)
      return "rank " + std::to_string(r) + " set maxChannels " + std::to_string(b[r].maxChannels);
  }
  for (int ch = 0; ch < c.nChannels; ch++) {
    const std::string where = "channel " + std::to_string(ch) + ": ";
    if (b[0].connectMask & PLEXUS_ALGO_CONNECT_RING) {
      std::vector<int> seen(n, 0);
      for (int k = 0; k < n; k++) {
        const int r = b[0].rings[ch][k];
        if (r < 0 || r >= n || seen[r]++) return where + "the ring is not a permutation of the ranks (position " +
                                                  std::to_string(k) + " holds " + std::to_string(r) + ")";
      }
      for (int r = 1; r < n; r++)
        if (b[r].rings[ch] != b[0].rings[ch]) return where + "ranks 0 and " + std::to_string(r) + " built different rings";
    }
    if (b[0].connectMask & PLEXUS_ALGO_CONNECT_TREE) {
      const std::vector<int>& p = b[0].parents[ch];
      int roots = 0;
      std::vector<int> children(n, 0);
      for (int r = 0; r < n; r++) {
        if (b[r].parents[ch] != p) return where + "ranks 0 and " + std::to_string(r) + " built different trees";
        if (p[r] == -1) roots++;
        else if (p[r] < 0 || p[r] >= n || p[r] == r) return where + "rank " + std::to_string(r) + "'s parent is " + std::to_string(p[r]);
        else if (++children[p[r]] > PLEXUS_MAX_TREE_ARITY) return where + "rank " + std::to_string(p[r]) + " has too many children";
      }
      if (roots != 1) return where + std::to_string(roots) + " roots";
      for (int r = 0; r < n; r++) {
        int hops = 0;
        for (int x = r; p[x] != -1; x = p[x])
          if (++hops > n) return where + "a cycle through rank " + std::to_string(r);
        const plexusDevTree_v1_t& t = b[r].trees[ch];
        if (t.up != p[r]) return where + "rank " + std::to_string(r) + "'s up link disagrees with the parents table";
        int down = 0;
        for (int k = 0; k < PLEXUS_MAX_TREE_ARITY; k++) {
          if (t.down[k] < 0) continue;
          down++;
          if (t.down[k] >= n || p[t.down[k]] != r)
            return where + "rank " + std::to_string(r) + "'s down link " + std::to_string(t.down[k]) + " is no child";
        }
        if (down != children[r]) return where + "rank " + std::to_string(r) + " lists " + std::to_string(down) +
                                         " children of " + std::to_string(children[r]);
      }
    }
  }
  return "";
}

void checkCost(const AlgoApi& api) {
  if (!(api.funcMask & ~((1u << ncclFuncSend) | (1u << ncclFuncRecv))))
    return report(true, "cost", "the plugin serves point-to-point only, which the core never prices");
  int checked = 0;
  std::string bad;
  // 4 ranks on one node, then on two: a plugin may serve one and not the other (a negative time).
  for (int nNodes : {1, 2}) {
    const std::vector<int> node = {0, 0, nNodes - 1, nNodes - 1}, local = {0, 1, nNodes == 1 ? 2 : 0, nNodes == 1 ? 3 : 1};
    const plexusAlgoTopo_v1_t t = topoOf(0, nNodes, node, local);
    void* ctx = nullptr;
    if (api.init(&ctx, &t, nullptr) != ncclSuccess) return report(false, "cost", "init failed");
    for (int f = 0; f < ncclNumFuncs && bad.empty(); f++) {
      if (!(api.funcMask >> f & 1) || f == ncclFuncSend || f == ncclFuncRecv) continue;
      for (int proto = 0; proto < PLEXUS_NUM_PROTOCOLS && bad.empty(); proto++) {
        if (!(api.protoMask >> proto & 1)) continue;
        for (int ch : {1, 4}) {
          float last = 0;
          size_t lastBytes = 0;
          for (size_t bytes = 8; bytes <= (1ull << 30) && bad.empty(); bytes *= 4) {
            float us = 0;
            char what[192];
            snprintf(what, sizeof what, "%s over %s, %zu B, %d channel(s), %d node(s)", plexus::funcName((ncclFunc_t)f),
                     plexus::protoName(proto), bytes, ch, nNodes);
            if (api.cost(ctx, (ncclFunc_t)f, proto, bytes, ch, &us) != ncclSuccess) bad = std::string(what) + ": cost failed";
            else if (std::isnan(us) || std::isinf(us) || us == 0) bad = std::string(what) + ": time " + std::to_string(us);
            else if (us > 0 && last > 0 && us < last * (1 - 1e-5f))
              bad = std::string(what) + ": " + std::to_string(us) + " us, less than at " + std::to_string(lastBytes) +
                    " B (" + std::to_string(last) + " us)";
            if (us > 0) {
              last = us;
              lastBytes = bytes;
              checked++;
            }
          }
        }
      }
    }
    api.finalize(ctx);
  }
  report(bad.empty() && checked > 0, "cost",
         !bad.empty() ? bad : checked ? std::to_string(checked) + " estimates over the collectives and protocols claimed "
                                        "(4 ranks on 1 and 2 nodes), each finite and positive, none shrinking as the "
                                        "size grows"
                                      : "no collective claimed has a supported estimate");
}

int usage(FILE* f, int code) {
  fprintf(f, "usage: plexus-plugin-check <plugin: name or path>\n"
             "  an algorithm plugin (ring -> libplexus-algo-ring.so): rules load, graphs, cost, finalize;\n"
             "  a transport plugin (p2p-nvlink -> libplexus-p2p-nvlink.so, or any file exporting\n"
             "  plexusTransportPlugin_v1): rules load, canConnect, steps, close, finalize.\n"
             "One PASS/FAIL line per rule; exit status 0 when all pass.\n");
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return usage(stderr, 2);
  if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) return usage(stdout, 0);
  plexus::addToolPluginDir(PLEXUS_TOOL_LIBDIR);
  if (isTransportPlugin(argv[1])) {
    printf("# plexus-plugin-check: transport plugin '%s'\n", argv[1]);
    const int r = checkTransport(argv[1], report);
    return r || failures ? 1 : 0;
  }
  std::vector<const plexus::AlgoPlugin*> plugins;
  printf("# plexus-plugin-check: algorithm plugin '%s'\n", argv[1]);
  if (plexus::loadAlgorithms({argv[1]}, &plugins) != ncclSuccess) {
    report(false, "load", plexus::lastError(nullptr));
    return 1;
  }
  const plexus::AlgoPlugin& p = *plugins[0];
  const AlgoApi& api = *p.api;
  report(true, "load", "'" + p.name + "' from " + p.path + ", ABI " + std::to_string(p.version) +
                           (api.hasCudaKernels() ? ", CUDA kernels" : ""));
  int cases = 0, contexts = 0, finalized = 0;
  std::string bad;
  for (int nRanks : {1, 2, 3, 4, 5, 8, 16})
    for (int nNodes : {1, 2, 4})
      for (int nChannels : {1, 2, 4})
        for (bool interleaved : {false, true})
          for (bool places : {false, true}) {
            if (nNodes > nRanks || (interleaved && nNodes == 1) || !bad.empty()) continue;
            const Case c{nRanks, nNodes, nChannels, interleaved, places};
            std::vector<Built> built;
            std::string why = buildAll(api, c, &built, &contexts, &finalized);
            if (why.empty()) why = checkGraphs(c, built);
            if (!why.empty()) bad = c.name() + ": " + why;
            cases++;
          }
  report(bad.empty(), "graphs",
         bad.empty() ? std::to_string(cases) + " cases (1..16 ranks, 1..4 nodes in blocks and interleaved, 1..4 "
                       "channels, with and without places): every rank built the same graphs; rings hold every rank "
                       "once; trees have one root, no cycle, links that agree with the parents table"
                     : bad);
  checkCost(api);
  report(finalized == contexts, "finalize",
         std::to_string(finalized) + " of " + std::to_string(contexts) + " contexts finalized with ncclSuccess");
  return failures ? 1 : 0;
}
