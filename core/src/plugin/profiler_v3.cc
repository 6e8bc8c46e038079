// ncclProfiler_v3 (NCCL 2.26): v2 without trafficBytes, with KernelCh (no timer) and NetPlugin
// events.
#include "plugin/profiler_old.h"

namespace plexus {

std::unique_ptr<const ProfilerApi> profilerAdapt_v3(const void* table, std::string* why) {
  auto* t = (const ncclProfiler_v3_t*)table;
  *why = profiler::nullMembers(t);
  if (!why->empty()) return nullptr;
  return std::make_unique<profiler::ProfilerOld<ncclProfiler_v3_t, ncclProfilerEventDescr_v3_t,
                                                ncclProfilerEventStateArgs_v3_t, false, true>>(t);
}

}  // namespace plexus
