// ncclTunerPlugin_v3 (NCCL 2.23-2.25): v4 without regBuff.
#include "plugin/tuner.h"

namespace plexus {

namespace {

class TunerV3 final : public TunerApi {
 public:
  explicit TunerV3(const ncclTuner_v3_t* t) : t_(t) {}
  ncclResult_t init(void** ctx, uint64_t, size_t nRanks, size_t nNodes, ncclDebugLogger_t logger,
                    ncclNvlDomainInfo_v6_t*, ncclTunerConstants_v6_t*) const override {
    return t_->init(nRanks, nNodes, logger, ctx);
  }
  ncclResult_t getCollInfo(void* ctx, ncclFunc_t func, size_t nBytes, int numPipeOps, float** table, int numAlgo,
                           int numProto, int, int* nChannels) const override {
    return t_->getCollInfo(ctx, func, nBytes, numPipeOps, table, numAlgo, numProto, nChannels);
  }
  ncclResult_t finalize(void* ctx) const override { return t_->destroy(ctx); }

 private:
  const ncclTuner_v3_t* t_;
};

}  // namespace

std::unique_ptr<const TunerApi> tunerAdapt_v3(const void* table, std::string* why) {
  auto* t = (const ncclTuner_v3_t*)table;
  *why = tunerNullMembers({{"init", !t->init}, {"getCollInfo", !t->getCollInfo}, {"destroy", !t->destroy}});
  if (!why->empty()) return nullptr;
  return std::make_unique<TunerV3>(t);
}

}  // namespace plexus
