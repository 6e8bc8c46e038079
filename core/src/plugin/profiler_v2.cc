// ncclProfiler_v2 (NCCL 2.24-2.25): v1 with strings.
#include "plugin/profiler_old.h"

namespace plexus {

std::unique_ptr<const ProfilerApi> profilerAdapt_v2(const void* table, std::string* why) {
  auto* t = (const ncclProfiler_v2_t*)table;
  *why = profiler::nullMembers(t);
  if (!why->empty()) return nullptr;
  return std::make_unique<profiler::ProfilerOld<ncclProfiler_v2_t, ncclProfilerEventDescr_v2_t,
                                                ncclProfilerEventStateArgs_v2_t, false, false>>(t);
}

}  // namespace plexus
