// algo-ring: rings per channel, an alpha-beta cost model, and the host entry of the step loops.
#include <plexus/algo_v2.h>
#include <plexus/device/kernel.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "ring_collectives.h"

// Compiled in the units plexus_add_algo_plugin writes, one per group of datatypes.
PLEXUS_ALGO_HOST_EXTERN(plexus::ring::Runner)

namespace {

// Every communicator passes the same function; kept where runHost (which needs no context) finds it.
std::atomic<ncclDebugLogger_t> logger{nullptr};

struct Context {
  plexusAlgoTopo_v2_t topo;
  int* rankNode;
  std::vector<uint64_t> place;            // setPlaces: where each rank sits; empty until then
  plexusAlgoProtocols_v2_t protocols{};  // setProtocols: the core's figures; its defaults until then
};

ncclResult_t ringInit(void** ctx, const plexusAlgoTopo_v2_t* topo, ncclDebugLogger_t log) {
  if (log) logger.store(log, std::memory_order_relaxed);
  auto* c = new (std::nothrow) Context{*topo, nullptr};
  if (!c) return ncclSystemError;
  c->rankNode = (int*)malloc(sizeof(int) * topo->nRanks);
  if (!c->rankNode) {
    delete c;
    return ncclSystemError;
  }
  memcpy(c->rankNode, topo->rankNode, sizeof(int) * topo->nRanks);
  c->topo.rankNode = c->rankNode;
  c->topo.rankLocalRank = nullptr;
  c->protocols = plexusAlgoDefaultProtocols(topo);
  *ctx = c;
  return ncclSuccess;
}

ncclResult_t ringSetPlaces(void* ctx, const uint64_t* place) {
  auto* c = (Context*)ctx;
  c->place.assign(place, place + c->topo.nRanks);
  return ncclSuccess;
}

ncclResult_t ringSetProtocols(void* ctx, const plexusAlgoProtocols_v2_t* protocols) {
  ((Context*)ctx)->protocols = *protocols;
  return ncclSuccess;
}

// Ranks of one node stay adjacent so that only one hop per node crosses the network; within a node they go in
// order of place (rank order where places are equal or unknown), so that the hops stay inside a PCIe switch, a
// host bridge, a NUMA node, a package where the machine allows: each group is entered and left once. Odd channels
// run the ring the other way round, so each link carries traffic in both directions and two
// channels do not queue behind each other on the same connector.
ncclResult_t ringBuildGraph(void* ctx, plexusAlgoGraph_v2_t* graph) {
  auto* c = (Context*)ctx;
  const int n = c->topo.nRanks;
  for (int ch = 0; ch < graph->nChannels; ch++) {
    int* order = graph->channels[ch].ringOrder;
    for (int r = 0; r < n; r++) order[r] = r;
    auto place = [c](int r) { return c->place.empty() ? 0 : c->place[r]; };
    std::stable_sort(order, order + n, [&](int a, int b) {
      return c->rankNode[a] != c->rankNode[b] ? c->rankNode[a] < c->rankNode[b] : place(a) < place(b);
    });
    if (ch % 2 == 1)
      for (int i = 1, j = n - 1; i < j; i++, j--) {
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
  }
  graph->connectMask = PLEXUS_ALGO_CONNECT_RING;
  return ncclSuccess;
}

// Alpha-beta model with the link figures the core gives (topo): the steps on the critical path
// times a hop's latency, the bytes the busiest link carries over the channels' bandwidth, and the
// pipeline's fill (the first chunk crosses every step before the last link is busy). nBytes is
// NCCL's size for the func: the whole buffer for AllReduce, Broadcast and Reduce, nranks blocks for
// AllGather and ReduceScatter.
//   AllReduce                2(n-1) steps, 2(n-1)/n * nBytes per link (reduce-scatter + all-gather)
//   AllGather/ReduceScatter  n-1 steps,    (n-1)/n * nBytes per link
//   Broadcast/Reduce         n-1 steps,    nBytes per link (every link on the chain)
// Across nodes, the ring's nNodes network hops set its bandwidth and add their latency. LL and LL128
// change a hop and the bandwidth by the core's figures (setProtocols). LL128, as measured on the host backend
// (plexus-perf all_reduce, 2 and 4 ranks on 2 cores, 8 B to 4 MiB), is about as fast as LL and Simple for small
// buffers and 40% of Simple's bandwidth for large ones, never faster than both: the figures put its hop 60% of the
// way from LL's to Simple's, so that wherever it would beat LL, Simple beats it first.
ncclResult_t ringCost(void* ctx, ncclFunc_t func, int proto, size_t nBytes, int nChannels, float* timeUs) {
  auto* c = (Context*)ctx;
  const plexusAlgoTopo_v2_t& t = c->topo;
  const int n = t.nRanks;
  *timeUs = -1.0f;
  if (proto < 0 || proto >= PLEXUS_NUM_PROTOCOLS) return ncclSuccess;
  const float bytes = (float)nBytes, ch = (float)(nChannels > 0 ? nChannels : 1);
  float steps, linkBytes, partBytes;
  switch (func) {
    case ncclFuncAllReduce:
      steps = 2.0f * (n - 1);
      linkBytes = 2.0f * (n - 1) / n * bytes;
      partBytes = bytes / n / ch;
      break;
    case ncclFuncAllGather:
    case ncclFuncReduceScatter:
      steps = (float)(n - 1);
      linkBytes = (float)(n - 1) / n * bytes;
      partBytes = bytes / n / ch;
      break;
    case ncclFuncBroadcast:
    case ncclFuncReduce:
      steps = (float)(n - 1);
      linkBytes = bytes;
      partBytes = bytes / ch;
      break;
    default: return ncclSuccess;
  }
  if (n <= 1) {
    *timeUs = bytes / (t.localGBs * 1e3f);
    return ncclSuccess;
  }
  const float netShare = (float)(t.nNodes > 1 ? t.nNodes : 0) / n;  // of the ring's hops
  const float hopUs = (1.0f - netShare) * t.localHopUs + netShare * t.netHopUs;
  const float gbs = (t.nNodes > 1 ? t.netGBs : t.localGBs) * c->protocols.bw[proto];
  float grain = partBytes < (float)t.stepBytes ? partBytes : (float)t.stepBytes;
  if (proto == PLEXUS_PROTO_LL128) grain = std::min(partBytes, (float)(PLEXUS_LL128_STEP_LINES(t.stepBytes) * 120));
  *timeUs = steps * hopUs * c->protocols.hop[proto] + linkBytes / (gbs * ch * 1e3f) + (steps - 1) * grain / (gbs * 1e3f);
  return ncclSuccess;
}

ncclResult_t ringRunHost(void*, const plexusDevKernelArgs_v1_t* args, int channelId) {
  const plexusDevWork_v1_t* bad = nullptr;
  const ncclResult_t r = plexus::dev::runLaunchHost<plexus::ring::Runner>(args, channelId, &bad);
  if (bad)
    if (ncclDebugLogger_t log = logger.load(std::memory_order_relaxed))
      log(NCCL_LOG_WARN, NCCL_COLL, __FILE__, __LINE__, "algo-ring: no step loop for func %d datatype %d redop %d",
          bad->func, bad->datatype, bad->redop);
  return r;
}

ncclResult_t ringFinalize(void* ctx) {
  auto* c = (Context*)ctx;
  free(c->rankNode);
  delete c;
  return ncclSuccess;
}

}  // namespace

#ifdef PLEXUS_ALGO_CUDA
extern "C" ncclResult_t plexusRingGetCudaKernel(void* ctx, const plexusDevWork_v1_t* work, void** function);
#endif

extern "C" __attribute__((visibility("default"))) const plexusAlgo_v2_t plexusAlgoPlugin_v2 = {
    PLEXUS_ALGO_ABI_VERSION,
    sizeof(plexusAlgo_v2_t),
    "ring",
    (1u << ncclFuncAllReduce) | (1u << ncclFuncBroadcast) | (1u << ncclFuncReduce) | (1u << ncclFuncAllGather) |
        (1u << ncclFuncReduceScatter),
    (1u << PLEXUS_PROTO_SIMPLE) | (1u << PLEXUS_PROTO_LL) | (1u << PLEXUS_PROTO_LL128),
    ringInit,
    ringBuildGraph,
    ringCost,
    ringRunHost,
#ifdef PLEXUS_ALGO_CUDA
    plexusRingGetCudaKernel,
#else
    nullptr,
#endif
    ringFinalize,
    ringSetPlaces,
    ringSetProtocols,
};
