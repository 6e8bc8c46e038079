// algo-p2p: every point-to-point operation (ncclSend, ncclRecv, and AlltoAll, Gather, Scatter and the collectives
// the planner lowers to them) runs here, through the step loop both backends share (plexus/device/p2p.h). It prices
// no collective: the tuner never picks it; the planner gives it every send and receive.
#include <plexus/algo_v2.h>
#include <plexus/device/p2p.h>

#include <atomic>

namespace {

std::atomic<ncclDebugLogger_t> logger{nullptr};

ncclResult_t p2pInit(void** ctx, const plexusAlgoTopo_v2_t*, ncclDebugLogger_t log) {
  if (log) logger.store(log, std::memory_order_relaxed);
  *ctx = nullptr;
  return ncclSuccess;
}

// Point-to-point connects on demand, to the peers an operation names.
ncclResult_t p2pBuildGraph(void*, plexusAlgoGraph_v2_t* graph) {
  graph->connectMask = 0;
  graph->maxChannels = 1;
  return ncclSuccess;
}

ncclResult_t p2pCost(void*, ncclFunc_t, int, size_t, int, float* timeUs) {
  *timeUs = -1.0f;
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

ncclResult_t p2pFinalize(void*) { return ncclSuccess; }

}  // namespace

#ifdef PLEXUS_ALGO_P2P_CUDA
extern "C" ncclResult_t plexusP2pGetCudaKernel(void* ctx, const plexusDevWork_v1_t* work, void** function);
#endif

extern "C" __attribute__((visibility("default"))) const plexusAlgo_v2_t plexusAlgoPlugin_v2 = {
    PLEXUS_ALGO_ABI_VERSION,
    sizeof(plexusAlgo_v2_t),
    "p2p",
    (1u << ncclFuncSend) | (1u << ncclFuncRecv),
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
