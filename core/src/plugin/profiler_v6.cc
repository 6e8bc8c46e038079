// ncclProfiler_v6 (NCCL 2.29-2.30): the current ABI, called as it is.
#include "plugin/profiler.h"

namespace plexus {

namespace {

class ProfilerV6 final : public ProfilerApi {
 public:
  explicit ProfilerV6(const ncclProfiler_v6_t* t) : t_(t) {}
  ncclResult_t init(void** ctx, uint64_t commId, int* mask, const char* commName, int nNodes, int nRanks, int rank,
                    ncclDebugLogger_t logger) const override {
    return t_->init(ctx, commId, mask, commName, nNodes, nRanks, rank, logger);
  }
  void startEvent(void* ctx, void** handle, ncclProfilerEventDescr_v6_t* d) const override {
    *handle = nullptr;
    t_->startEvent(ctx, handle, d);
  }
  void stopEvent(void* handle) const override { t_->stopEvent(handle); }
  void recordEventState(void* handle, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v6_t* a) const override {
    t_->recordEventState(handle, s, a);
  }
  void finalize(void* ctx) const override { t_->finalize(ctx); }

 private:
  const ncclProfiler_v6_t* t_;
};

}  // namespace

std::unique_ptr<const ProfilerApi> profilerAdapt_v6(const void* table, std::string* why) {
  auto* t = (const ncclProfiler_v6_t*)table;
  *why = profiler::nullMembers(t);
  if (!why->empty()) return nullptr;
  return std::make_unique<ProfilerV6>(t);
}

}  // namespace plexus
