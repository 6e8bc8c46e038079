// ncclTunerPlugin_v6 (NCCL 2.30): the current ABI, called as it is.
#include "plugin/tuner.h"

namespace plexus {

namespace {

class TunerV6 final : public TunerApi {
 public:
  explicit TunerV6(const ncclTuner_v6_t* t) : t_(t) {}
  ncclResult_t init(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logger,
                    ncclNvlDomainInfo_v6_t* nvl, ncclTunerConstants_v6_t* constants) const override {
    return t_->init(ctx, commId, nRanks, nNodes, logger, nvl, constants);
  }
  ncclResult_t getCollInfo(void* ctx, ncclFunc_t func, size_t nBytes, int numPipeOps, float** table, int numAlgo,
                           int numProto, int regBuff, int* nChannels) const override {
    return t_->getCollInfo(ctx, func, nBytes, numPipeOps, table, numAlgo, numProto, regBuff, nChannels);
  }
  ncclResult_t finalize(void* ctx) const override { return t_->finalize(ctx); }
  bool hasChunkSize() const override { return t_->getChunkSize != nullptr; }
  ncclResult_t getChunkSize(void* ctx, ncclFunc_t func, size_t nBytes, int algo, int proto, int nChannels,
                            size_t* chunkSize) const override {
    return t_->getChunkSize(ctx, func, nBytes, algo, proto, nChannels, chunkSize);
  }

 private:
  const ncclTuner_v6_t* t_;
};

}  // namespace

std::unique_ptr<const TunerApi> tunerAdapt_v6(const void* table, std::string* why) {
  auto* t = (const ncclTuner_v6_t*)table;
  *why = tunerNullMembers({{"init", !t->init}, {"getCollInfo", !t->getCollInfo}, {"finalize", !t->finalize}});
  if (!why->empty()) return nullptr;
  return std::make_unique<TunerV6>(t);
}

}  // namespace plexus
