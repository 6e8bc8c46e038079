// algo-direct: one-shot collectives among the ranks of one node (every rank connected to every
// other on channel 0), an alpha-beta cost model, and the host entry of the step loops.
#include <plexus/algo_v2.h>
#include <plexus/device/kernel.h>

#include <atomic>
#include <new>

#include "direct_collectives.h"

// Compiled in the units plexus_add_algo_plugin writes, one per group of datatypes.
PLEXUS_ALGO_HOST_EXTERN(plexus::direct::Runner)

namespace {

// Every communicator passes the same function; kept where runHost (which needs no context) finds it.
std::atomic<ncclDebugLogger_t> logger{nullptr};

struct Context {
  plexusAlgoTopo_v2_t topo;            // the arrays are not kept (valid during init only)
  plexusAlgoProtocols_v2_t protocols;  // setProtocols: the core's figures; its defaults until then
};

ncclResult_t directInit(void** ctx, const plexusAlgoTopo_v2_t* topo, ncclDebugLogger_t log) {
  if (log) logger.store(log, std::memory_order_relaxed);
  auto* c = new (std::nothrow) Context{*topo, plexusAlgoDefaultProtocols(topo)};
  if (!c) return ncclSystemError;
  c->topo.rankNode = c->topo.rankLocalRank = nullptr;
  *ctx = c;
  return ncclSuccess;
}

// Every pair of ranks is connected on one channel; nothing else is needed. Across nodes (or beyond
// the primitives' fan-out) the algorithm declines every operation in its cost model, so it asks for
// no connections there either.
ncclResult_t directBuildGraph(void* ctx, plexusAlgoGraph_v2_t* graph) {
  auto* c = (Context*)ctx;
  const bool serves = c->topo.nNodes == 1 && c->topo.nRanks - 1 <= PLEXUS_MAX_PRIM_PEERS;
  graph->connectMask = serves ? PLEXUS_ALGO_CONNECT_ALL : 0;
  graph->maxChannels = 1;
  return ncclSuccess;
}

ncclResult_t directSetProtocols(void* ctx, const plexusAlgoProtocols_v2_t* protocols) {
  ((Context*)ctx)->protocols = *protocols;
  return ncclSuccess;
}

// Alpha-beta model on one channel with the link figures the core gives: one hop of latency (but
// where the node's ranks share cores every other rank has to run before the step completes, a hop
// each), plus the bytes the busiest rank puts on its links (nBytes is NCCL's size for func):
//   AllReduce, Broadcast, Reduce  (n-1) * nBytes   (every rank, or root, talks to every other)
//   AllGather, ReduceScatter,     (n-1)/n * nBytes (as a ring, in one hop)
//   AlltoAll
// at 70% of a ring's link bandwidth: every rank copies and reduces whole buffers, not parts (an AllReduce of two
// ranks excepted, below). LL and LL128 by the core's figures (setProtocols).
ncclResult_t directCost(void* ctx, ncclFunc_t func, int proto, size_t nBytes, int nChannels, float* timeUs) {
  auto* c = (Context*)ctx;
  const plexusAlgoTopo_v2_t& t = c->topo;
  const int n = t.nRanks;
  *timeUs = -1.0f;
  if (t.nNodes != 1 || n - 1 > PLEXUS_MAX_PRIM_PEERS || nChannels != 1) return ncclSuccess;
  if (proto < 0 || proto >= PLEXUS_NUM_PROTOCOLS) return ncclSuccess;
  const float bytes = (float)nBytes;
  float linkBytes;
  switch (func) {
    case ncclFuncAllReduce:
    case ncclFuncBroadcast:
    case ncclFuncReduce: linkBytes = (float)(n - 1) * bytes; break;
    case ncclFuncAllGather:
    case ncclFuncReduceScatter:
    case ncclFuncAlltoAll: linkBytes = (float)(n - 1) / n * bytes; break;
    default: return ncclSuccess;
  }
  if (n == 1) {
    *timeUs = bytes / (t.localGBs * 1e3f);
    return ncclSuccess;
  }
  const float hops = t.coresShared ? (float)(n - 1) : 1.0f;
  // Two ranks: a one-shot AllReduce moves what the ring's moves (each rank's buffer once across the one link), in
  // one step and without the ring's pipeline: measured twice the ring's speed from 256 KiB to 8 MiB (1 MiB: 107
  // against 225 us) and as fast from 16 MiB on, where memory bounds both. No 30% less.
  const float share = n == 2 && func == ncclFuncAllReduce ? 1.0f : 0.7f;
  const float gbs = t.localGBs * share * c->protocols.bw[proto];
  *timeUs = hops * t.localHopUs * c->protocols.hop[proto] + linkBytes / (gbs * 1e3f);
  return ncclSuccess;
}

ncclResult_t directRunHost(void*, const plexusDevKernelArgs_v1_t* args, int channelId) {
  const plexusDevWork_v1_t* bad = nullptr;
  const ncclResult_t r = plexus::dev::runLaunchHost<plexus::direct::Runner>(args, channelId, &bad);
  if (bad)
    if (ncclDebugLogger_t log = logger.load(std::memory_order_relaxed))
      log(NCCL_LOG_WARN, NCCL_COLL, __FILE__, __LINE__, "algo-direct: no step loop for func %d datatype %d redop %d",
          bad->func, bad->datatype, bad->redop);
  return r;
}

ncclResult_t directFinalize(void* ctx) {
  delete (Context*)ctx;
  return ncclSuccess;
}

}  // namespace

#ifdef PLEXUS_ALGO_CUDA
extern "C" ncclResult_t plexusDirectGetCudaKernel(void* ctx, const plexusDevWork_v1_t* work, void** function);
#endif

extern "C" __attribute__((visibility("default"))) const plexusAlgo_v2_t plexusAlgoPlugin_v2 = {
    PLEXUS_ALGO_ABI_VERSION,
    sizeof(plexusAlgo_v2_t),
    "direct",
    (1u << ncclFuncAllReduce) | (1u << ncclFuncBroadcast) | (1u << ncclFuncReduce) | (1u << ncclFuncAllGather) |
        (1u << ncclFuncReduceScatter) | (1u << ncclFuncAlltoAll),
    (1u << PLEXUS_PROTO_SIMPLE) | (1u << PLEXUS_PROTO_LL) | (1u << PLEXUS_PROTO_LL128),
    directInit,
    directBuildGraph,
    directCost,
    directRunHost,
#ifdef PLEXUS_ALGO_CUDA
    plexusDirectGetCudaKernel,
#else
    nullptr,
#endif
    directFinalize,
    nullptr,  // setPlaces: every rank talks to every other, wherever it sits
    directSetProtocols,
};
