// ncclTunerPlugin_v2 (NCCL 2.21-2.22): the tuner names an (algorithm, protocol) instead of rewriting
// the cost table. As NCCL's tuner_v2.cc: collNet/NVLS support is read from the table (their cells are
// always IGNORE here, so 0), and the pair named is forced by writing 0.0 into its cell, unless that
// cell is IGNORE (the pair cannot run; the default choice stands).
#include "plugin/tuner.h"

#include <atomic>

#include "misc/debug.h"

namespace plexus {

namespace {

class TunerV2 final : public TunerApi {
 public:
  explicit TunerV2(const ncclTuner_v2_t* t) : t_(t) {}
  ncclResult_t init(void** ctx, uint64_t, size_t nRanks, size_t nNodes, ncclDebugLogger_t logger,
                    ncclNvlDomainInfo_v6_t*, ncclTunerConstants_v6_t*) const override {
    return t_->init(nRanks, nNodes, logger, ctx);
  }
  ncclResult_t getCollInfo(void* ctx, ncclFunc_t func, size_t nBytes, int numPipeOps, float** collCostTable, int,
                           int, int, int* nChannels) const override {
    auto table = (float (*)[NCCL_NUM_PROTOCOLS])collCostTable;
    const int collNetSupport = table[NCCL_ALGO_COLLNET_CHAIN][NCCL_PROTO_SIMPLE] != NCCL_ALGO_PROTO_IGNORE;
    const int nvlsSupport = table[NCCL_ALGO_NVLS][NCCL_PROTO_SIMPLE] != NCCL_ALGO_PROTO_IGNORE ||
                            table[NCCL_ALGO_NVLS_TREE][NCCL_PROTO_SIMPLE] != NCCL_ALGO_PROTO_IGNORE;
    int algo = NCCL_ALGO_UNDEF, proto = NCCL_PROTO_UNDEF;
    ncclResult_t r = t_->getCollInfo(ctx, func, nBytes, collNetSupport, nvlsSupport, numPipeOps, &algo, &proto,
                                     nChannels);
    if (r != ncclSuccess) return r;
    const bool unset = algo == NCCL_ALGO_UNDEF && proto == NCCL_PROTO_UNDEF;
    if (algo >= 0 && algo < NCCL_NUM_ALGORITHMS && proto >= 0 && proto < NCCL_NUM_PROTOCOLS) {
      if (table[algo][proto] != NCCL_ALGO_PROTO_IGNORE) table[algo][proto] = 0.0f;
    } else if (!unset && !warned_.exchange(true)) {
      // NCCL ignores such an answer too; say so once instead of silently.
      WARN("tuner plugin (ncclTunerPlugin_v2): getCollInfo named algorithm %d, protocol %d, outside NCCL's "
           "tables [0, %d) x [0, %d); the answer is ignored and the cost model decides", algo, proto,
           NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS);
    }
    return ncclSuccess;
  }
  ncclResult_t finalize(void* ctx) const override { return t_->destroy(ctx); }

 private:
  const ncclTuner_v2_t* t_;
  mutable std::atomic<bool> warned_{false};
};

}  // namespace

std::unique_ptr<const TunerApi> tunerAdapt_v2(const void* table, std::string* why) {
  auto* t = (const ncclTuner_v2_t*)table;
  *why = tunerNullMembers({{"init", !t->init}, {"getCollInfo", !t->getCollInfo}, {"destroy", !t->destroy}});
  if (!why->empty()) return nullptr;
  return std::make_unique<TunerV2>(t);
}

}  // namespace plexus
