// algo-ring: rings per channel, an alpha-beta cost model, and the host entry of the step loops.
#include <plexus/algo_v1.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "ring_collectives.h"

namespace {

ncclDebugLogger_t logger = nullptr;

struct Context {
  plexusAlgoTopo_v1_t topo;
  int* rankNode;
};

ncclResult_t ringInit(void** ctx, const plexusAlgoTopo_v1_t* topo, ncclDebugLogger_t log) {
  logger = log;
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
  *ctx = c;
  return ncclSuccess;
}

// Ranks of one node stay adjacent so that only one hop per node crosses the network. Odd channels
// run the ring the other way round, so each link carries traffic in both directions and two
// channels do not queue behind each other on the same connector.
ncclResult_t ringBuildGraph(void* ctx, plexusAlgoGraph_v1_t* graph) {
  auto* c = (Context*)ctx;
  const int n = c->topo.nRanks;
  for (int ch = 0; ch < graph->nChannels; ch++) {
    int* order = graph->channels[ch].ringOrder;
    int k = 0;
    for (int node = 0; node < c->topo.nNodes; node++)
      for (int r = 0; r < n; r++)
        if (c->rankNode[r] == node) order[k++] = r;
    if (k != n) return ncclInternalError;
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

// Alpha-beta model: steps on the critical path times the per-step latency, plus the bytes the
// busiest link carries over the channels' bandwidth. nBytes is NCCL's size for the func: the whole
// buffer for AllReduce, Broadcast and Reduce, nranks blocks for AllGather and ReduceScatter.
//   AllReduce              2(n-1) steps, 2(n-1)/n * nBytes per link (reduce-scatter + all-gather)
//   AllGather/ReduceScatter  n-1 steps,   (n-1)/n * nBytes per link
//   Broadcast/Reduce         n-1 steps (pipeline fill), nBytes per link (every link on the chain)
// Host shared memory: ~1.5 us per step, ~6 GB/s per channel; the network adds latency per
// inter-node hop. One rank: a local copy.
ncclResult_t ringCost(void* ctx, ncclFunc_t func, int proto, size_t nBytes, int nChannels, float* timeUs) {
  auto* c = (Context*)ctx;
  const int n = c->topo.nRanks;
  *timeUs = -1.0f;
  if (proto != PLEXUS_PROTO_SIMPLE && proto != PLEXUS_PROTO_LL) return ncclSuccess;
  float steps, bytesPerLink;
  const float bytes = (float)nBytes;
  switch (func) {
    case ncclFuncAllReduce:
      steps = 2.0f * (n - 1);
      bytesPerLink = 2.0f * (n - 1) / n * bytes;
      break;
    case ncclFuncAllGather:
    case ncclFuncReduceScatter:
      steps = (float)(n - 1);
      bytesPerLink = (float)(n - 1) / n * bytes;
      break;
    case ncclFuncBroadcast:
    case ncclFuncReduce:
      steps = (float)(n - 1);
      bytesPerLink = bytes;
      break;
    default: return ncclSuccess;
  }
  if (n <= 1) {
    steps = 0.0f;
    bytesPerLink = bytes;
  }
  // LL: the receiver polls the data lines themselves (a little less latency per step); half of each
  // line is flags and it is staged through a bounce buffer (far less bandwidth). Measured on the host
  // backend (2 processes): LL and Simple are at parity up to a few hundred bytes, Simple ahead beyond.
  const bool ll = proto == PLEXUS_PROTO_LL;
  const float stepLat = (c->topo.nNodes > 1 ? 8.0f : 1.5f) * (ll ? 0.8f : 1.0f);
  const float bwGBs = (c->topo.nNodes > 1 ? 3.0f : 6.0f) * (ll ? 0.1f : 1.0f) * (nChannels > 0 ? nChannels : 1);
  *timeUs = steps * stepLat + bytesPerLink / (bwGBs * 1e3f);
  return ncclSuccess;
}

ncclResult_t ringRunHost(plexusDevComm_v1_t* comm, int channelId, const plexusDevWork_v1_t* work) {
  plexusDevChannel_v1_t* ch = &comm->channels[channelId];
  plexus::ring::Runner runner{comm, ch, work, 0, 1, true};
  if (!plexus::dev::dispatchTypeOp(work->datatype, work->redop, runner) || !runner.known) {
    if (logger)
      logger(NCCL_LOG_WARN, NCCL_COLL, __FILE__, __LINE__,
             "algo-ring: no step loop for func %d datatype %d redop %d", work->func, work->datatype, work->redop);
    return ncclInvalidArgument;
  }
  switch (ch->status) {
    case PLEXUS_CHANNEL_OK: return ncclSuccess;
    case PLEXUS_CHANNEL_TIMEOUT: return ncclTimeout;
    default: return ncclRemoteError;
  }
}

ncclResult_t ringFinalize(void* ctx) {
  auto* c = (Context*)ctx;
  free(c->rankNode);
  delete c;
  return ncclSuccess;
}

}  // namespace

#ifdef PLEXUS_ALGO_RING_CUDA
extern "C" ncclResult_t plexusRingGetCudaKernel(const plexusDevWork_v1_t* work, const void** kernel);
#endif

extern "C" __attribute__((visibility("default"))) const plexusAlgo_v1_t plexusAlgoPlugin_v1 = {
    PLEXUS_ALGO_ABI_VERSION,
    sizeof(plexusAlgo_v1_t),
    "ring",
    (1u << ncclFuncAllReduce) | (1u << ncclFuncBroadcast) | (1u << ncclFuncReduce) | (1u << ncclFuncAllGather) |
        (1u << ncclFuncReduceScatter),
    (1u << PLEXUS_PROTO_SIMPLE) | (1u << PLEXUS_PROTO_LL),
    ringInit,
    ringBuildGraph,
    ringCost,
    ringRunHost,
#ifdef PLEXUS_ALGO_RING_CUDA
    plexusRingGetCudaKernel,
#else
    nullptr,
#endif
    ringFinalize,
};
