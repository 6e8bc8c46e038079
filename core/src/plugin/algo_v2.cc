// plexusAlgoPlugin_v2: the current ABI, called as it is.
#include "plugin/algo.h"

#include <cstddef>

namespace plexus {

namespace {

class AlgoV2 final : public AlgoApi {
 public:
  explicit AlgoV2(const plexusAlgo_v2_t* t) : AlgoApi(t->name, t->funcMask, t->protoMask), t_(t) {}
  ncclResult_t init(void** ctx, const plexusAlgoTopo_v2_t* topo, ncclDebugLogger_t logger) const override {
    return t_->init(ctx, topo, logger);
  }
  ncclResult_t buildGraph(void* ctx, plexusAlgoGraph_v2_t* graph) const override { return t_->buildGraph(ctx, graph); }
  ncclResult_t cost(void* ctx, ncclFunc_t func, int proto, size_t nBytes, int nChannels, float* us) const override {
    return t_->cost(ctx, func, proto, nBytes, nChannels, us);
  }
  ncclResult_t runHost(void* ctx, const plexusDevKernelArgs_v1_t* args, int channelId) const override {
    return t_->runHost(ctx, args, channelId);
  }
  bool hasCudaKernels() const override { return t_->getCudaKernel != nullptr; }
  ncclResult_t getCudaKernel(void* ctx, const plexusDevWork_v1_t* work, void** function) const override {
    return t_->getCudaKernel ? t_->getCudaKernel(ctx, work, function) : ncclInvalidUsage;
  }
  ncclResult_t finalize(void* ctx) const override { return t_->finalize(ctx); }
  ncclResult_t setPlaces(void* ctx, const uint64_t* place) const override {
    const bool has = t_->structSize >= offsetof(plexusAlgo_v2_t, setPlaces) + sizeof(t_->setPlaces) && t_->setPlaces;
    return has ? t_->setPlaces(ctx, place) : ncclSuccess;
  }
  ncclResult_t setProtocols(void* ctx, const plexusAlgoProtocols_v2_t* protocols) const override {
    const bool has =
        t_->structSize >= offsetof(plexusAlgo_v2_t, setProtocols) + sizeof(t_->setProtocols) && t_->setProtocols;
    return has ? t_->setProtocols(ctx, protocols) : ncclSuccess;
  }

 private:
  const plexusAlgo_v2_t* t_;
};

}  // namespace

std::unique_ptr<const AlgoApi> algoAdapt_v2(const void* table, std::string* why) {
  auto* t = (const plexusAlgo_v2_t*)table;
  if (t->abiVersion != PLEXUS_ALGO_ABI_VERSION) *why = "ABI version mismatch";
  else if (t->structSize < PLEXUS_ALGO_V2_BASE_SIZE) *why = "function table smaller than ABI v2's";
  else if (!t->name || !t->name[0]) *why = "no name";
  else if (!t->init || !t->buildGraph || !t->cost || !t->runHost || !t->finalize)
    *why = "a required member (init, buildGraph, cost, runHost, finalize) is NULL";
  else return std::make_unique<AlgoV2>(t);
  *why += " (plugin ABI " + std::to_string(t->abiVersion) + ", size " + std::to_string(t->structSize) +
          "; this Plexus expects ABI " + std::to_string(PLEXUS_ALGO_ABI_VERSION) + ", size " +
          std::to_string(PLEXUS_ALGO_V2_BASE_SIZE) + " or more)";
  return nullptr;
}

}  // namespace plexus
