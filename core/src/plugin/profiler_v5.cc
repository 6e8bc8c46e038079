// ncclProfiler_v5 (NCCL 2.28): v6's layout without the copy-engine events; those get no handle, and their bits are
// cleared from the mask after init (as NCCL's v5 adapter).
#include "plugin/profiler.h"

namespace plexus {

namespace {

constexpr int kCeBits = ncclProfileCeColl | ncclProfileCeSync | ncclProfileCeBatch;

class ProfilerV5 final : public ProfilerApi {
 public:
  explicit ProfilerV5(const ncclProfiler_v5_t* t) : t_(t) {}
  ncclResult_t init(void** ctx, uint64_t commId, int* mask, const char* commName, int nNodes, int nRanks, int rank,
                    ncclDebugLogger_t logger) const override {
    const ncclResult_t r = t_->init(ctx, commId, mask, commName, nNodes, nRanks, rank, logger);
    __atomic_fetch_and(mask, ~kCeBits, __ATOMIC_RELAXED);
    return r;
  }
  void startEvent(void* ctx, void** handle, ncclProfilerEventDescr_v6_t* d) const override {
    *handle = nullptr;
    if (d->type & kCeBits) return;
    // The same bytes up to the end of v5's union; v6's CE members are never read for these types.
    t_->startEvent(ctx, handle, reinterpret_cast<ncclProfilerEventDescr_v5_t*>(d));
  }
  void stopEvent(void* handle) const override { t_->stopEvent(handle); }
  void recordEventState(void* handle, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v6_t* a) const override {
    if (profiler::v4State(s) || s == ncclProfilerGroupStartApiStop || s == ncclProfilerGroupEndApiStart)
      t_->recordEventState(handle, s, a);
  }
  void finalize(void* ctx) const override { t_->finalize(ctx); }

 private:
  const ncclProfiler_v5_t* t_;
};

static_assert(sizeof(ncclProfilerEventDescr_v5_t) == sizeof(ncclProfilerEventDescr_v6_t));

}  // namespace

std::unique_ptr<const ProfilerApi> profilerAdapt_v5(const void* table, std::string* why) {
  auto* t = (const ncclProfiler_v5_t*)table;
  *why = profiler::nullMembers(t);
  if (!why->empty()) return nullptr;
  return std::make_unique<ProfilerV5>(t);
}

}  // namespace plexus
