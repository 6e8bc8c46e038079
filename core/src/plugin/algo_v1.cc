// plexusAlgoPlugin_v1: its runHost ran one work item at a time, and its getCudaKernel gave a kernel of another
// signature, which the core never launched: a v1 plugin runs every work of a launch in turn, on the host backend
// only.
#include <plexus/device/kernel.h>

#include "plugin/algo.h"

namespace plexus {

namespace {

class AlgoV1 final : public AlgoApi {
 public:
  explicit AlgoV1(const plexusAlgo_v1_t* t) : AlgoApi(t->name, t->funcMask, t->protoMask), t_(t) {}
  ncclResult_t init(void** ctx, const plexusAlgoTopo_v2_t* topo, ncclDebugLogger_t logger) const override {
    return t_->init(ctx, topo, logger);
  }
  ncclResult_t buildGraph(void* ctx, plexusAlgoGraph_v2_t* graph) const override { return t_->buildGraph(ctx, graph); }
  ncclResult_t cost(void* ctx, ncclFunc_t func, int proto, size_t nBytes, int nChannels, float* us) const override {
    return t_->cost(ctx, func, proto, nBytes, nChannels, us);
  }
  ncclResult_t runHost(void*, const plexusDevKernelArgs_v1_t* args, int channelId) const override {
    for (uint32_t i = 0; i < args->nWorks; i++) {
      const plexusDevWork_v1_t* w = dev::kernelWork(args, i);
      if (!dev::workOnChannel(w, channelId)) continue;
      ncclResult_t r = t_->runHost(args->comm, channelId, w);
      if (r != ncclSuccess) return r;
    }
    return ncclSuccess;
  }
  bool hasCudaKernels() const override { return false; }
  ncclResult_t getCudaKernel(void*, const plexusDevWork_v1_t*, void**) const override { return ncclInvalidUsage; }
  ncclResult_t finalize(void* ctx) const override { return t_->finalize(ctx); }

 private:
  const plexusAlgo_v1_t* t_;
};

}  // namespace

std::unique_ptr<const AlgoApi> algoAdapt_v1(const void* table, std::string* why) {
  auto* t = (const plexusAlgo_v1_t*)table;
  if (t->abiVersion != PLEXUS_ALGO_V1_ABI_VERSION) *why = "ABI version mismatch";
  else if (t->structSize < sizeof(plexusAlgo_v1_t)) *why = "function table smaller than ABI v1's";
  else if (!t->name || !t->name[0]) *why = "no name";
  else if (!t->init || !t->buildGraph || !t->cost || !t->runHost || !t->finalize)
    *why = "a required member (init, buildGraph, cost, runHost, finalize) is NULL";
  else return std::make_unique<AlgoV1>(t);
  *why += " (plugin ABI " + std::to_string(t->abiVersion) + ", size " + std::to_string(t->structSize) +
          "; symbol plexusAlgoPlugin_v1 expects ABI " + std::to_string(PLEXUS_ALGO_V1_ABI_VERSION) + ", size " +
          std::to_string(sizeof(plexusAlgo_v1_t)) + ")";
  return nullptr;
}

}  // namespace plexus
