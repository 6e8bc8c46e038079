// algo-p2p: every point-to-point operation (ncclSend, ncclRecv, and AlltoAll, Gather, Scatter) runs here, through
// the step loop both backends share (plexus/device/p2p.h). It also prices AllGather and Broadcast done as grouped
// point-to-point within one node, where each part crosses once, written straight into the receiver's buffer
// (zero-copy), instead of into a connector slot and out again at every hop: when the tuner picks p2p for one of
// them (its cost model below, a configuration rule, NCCL_ALGO), the planner lowers it to sends and receives that
// run here.
#include <plexus/algo_v2.h>
#include <plexus/device/p2p.h>

#include <atomic>
#include <new>

namespace {

std::atomic<ncclDebugLogger_t> logger{nullptr};

struct Context {
  plexusAlgoTopo_v2_t topo;
};

ncclResult_t p2pInit(void** ctx, const plexusAlgoTopo_v2_t* topo, ncclDebugLogger_t log) {
  if (log) logger.store(log, std::memory_order_relaxed);
  auto* c = new (std::nothrow) Context{*topo};
  if (!c) return ncclSystemError;
  c->topo.rankNode = c->topo.rankLocalRank = nullptr;
  *ctx = c;
  return ncclSuccess;
}

// Point-to-point connects on demand, to the peers an operation names.
ncclResult_t p2pBuildGraph(void*, plexusAlgoGraph_v2_t* graph) {
  graph->connectMask = 0;
  graph->maxChannels = 1;
  return ncclSuccess;
}

// Broadcast as point-to-point only up to this: beyond, the root's one core copying everything measured slower than
// the ring's pipeline, which keeps both ranks copying.
constexpr size_t kBroadcastMaxBytes = 512 * 1024;

// AllGather (any number of ranks) and Broadcast (two ranks) within one node, from PLEXUS_P2P_ZERO_COPY_MIN_BYTES per
// part on (below, messages go through the connector slots as a ring's do, and gain nothing). Alpha-beta as
// algo-direct's, with the core's link figures: the zero-copy handshake costs a round trip (two hops; a hop per
// peer where the node's ranks share cores), and each part is copied once, where the ring and direct copy it into a
// slot and out again: twice the link bandwidth. The bytes the busiest rank receives: (n-1)/n of AllGather's size,
// all of Broadcast's.
ncclResult_t p2pCost(void* ctx, ncclFunc_t func, int proto, size_t nBytes, int, float* timeUs) {
  const plexusAlgoTopo_v2_t& t = static_cast<Context*>(ctx)->topo;
  const int n = t.nRanks;
  *timeUs = -1.0f;
  if (proto != PLEXUS_PROTO_SIMPLE || t.nNodes != 1 || n < 2 || 2 * n > PLEXUS_P2P_MAX_WORKS) return ncclSuccess;
  float bytes;
  if (func == ncclFuncAllGather && nBytes / n >= PLEXUS_P2P_ZERO_COPY_MIN_BYTES)
    bytes = (float)(n - 1) / n * (float)nBytes;  // a lowered unit is 2n tasks, which must fit one launch
  else if (func == ncclFuncBroadcast && n == 2 && nBytes >= PLEXUS_P2P_ZERO_COPY_MIN_BYTES &&
           nBytes <= kBroadcastMaxBytes)
    bytes = (float)nBytes;
  else
    return ncclSuccess;
  const float hops = 2.0f * (t.coresShared ? (float)(n - 1) : 1.0f);
  *timeUs = hops * t.localHopUs + bytes / (2.0f * t.localGBs * 1e3f);
  return ncclSuccess;
}

ncclResult_t p2pRunHost(void*, const plexusDevKernelArgs_v1_t* args, int channelId) {
  // 20 KiB: on the stack of the executor's thread, as a CUDA kernel keeps it in shared memory.
  plexus::dev::P2pState state;
  const ncclResult_t r = plexus::dev::runP2p(args, channelId, 0, 1, &state);
  if (state.status == PLEXUS_CHANNEL_ERROR)
    if (ncclDebugLogger_t log = logger.load(std::memory_order_relaxed))
      log(NCCL_LOG_WARN, NCCL_P2P, __FILE__, __LINE__,
          "algo-p2p: rank %d: the sends and receives of this launch cannot match: a send and its receive differ in "
          "size, a rank's sends to itself and receives from itself differ in number or size, a peer has no "
          "connection, or more than %d operations fall on channel %d",
          args->comm->rank, PLEXUS_P2P_MAX_WORKS, channelId);
  return r;
}

ncclResult_t p2pFinalize(void* ctx) {
  delete static_cast<Context*>(ctx);
  return ncclSuccess;
}

}  // namespace

#ifdef PLEXUS_ALGO_P2P_CUDA
extern "C" ncclResult_t plexusP2pGetCudaKernel(void* ctx, const plexusDevWork_v1_t* work, void** function);
#endif

extern "C" __attribute__((visibility("default"))) const plexusAlgo_v2_t plexusAlgoPlugin_v2 = {
    PLEXUS_ALGO_ABI_VERSION,
    sizeof(plexusAlgo_v2_t),
    "p2p",
    (1u << ncclFuncSend) | (1u << ncclFuncRecv) | (1u << ncclFuncAllGather) | (1u << ncclFuncBroadcast),
    1u << PLEXUS_PROTO_SIMPLE,
    p2pInit,
    p2pBuildGraph,
    p2pCost,
    p2pRunHost,
#ifdef PLEXUS_ALGO_P2P_CUDA
    plexusP2pGetCudaKernel,
#else
    nullptr,
#endif
    p2pFinalize,
};
