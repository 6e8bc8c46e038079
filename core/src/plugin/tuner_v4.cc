// ncclTunerPlugin_v4 (NCCL 2.26-2.27): init without commId, NVLink domains and constants; destroy
// where v5 has finalize.
#include "plugin/tuner.h"

namespace plexus {

namespace {

class TunerV4 final : public TunerApi {
 public:
  explicit TunerV4(const ncclTuner_v4_t* t) : t_(t) {}
  ncclResult_t init(void** ctx, uint64_t, size_t nRanks, size_t nNodes, ncclDebugLogger_t logger,
                    ncclNvlDomainInfo_v6_t*, ncclTunerConstants_v6_t*) const override {
    return t_->init(nRanks, nNodes, logger, ctx);
  }
  ncclResult_t getCollInfo(void* ctx, ncclFunc_t func, size_t nBytes, int numPipeOps, float** table, int numAlgo,
                           int numProto, int regBuff, int* nChannels) const override {
    return t_->getCollInfo(ctx, func, nBytes, numPipeOps, table, numAlgo, numProto, regBuff, nChannels);
  }
  ncclResult_t finalize(void* ctx) const override { return t_->destroy(ctx); }

 private:
  const ncclTuner_v4_t* t_;
};

}  // namespace

std::unique_ptr<const TunerApi> tunerAdapt_v4(const void* table, std::string* why) {
  auto* t = (const ncclTuner_v4_t*)table;
  *why = tunerNullMembers({{"init", !t->init}, {"getCollInfo", !t->getCollInfo}, {"destroy", !t->destroy}});
  if (!why->empty()) return nullptr;
  return std::make_unique<TunerV4>(t);
}

}  // namespace plexus
