// ncclProfiler_v1 (NCCL 2.23): enum numbers for func, datatype, algo and proto.
#include "plugin/profiler_old.h"

namespace plexus {

std::unique_ptr<const ProfilerApi> profilerAdapt_v1(const void* table, std::string* why) {
  auto* t = (const ncclProfiler_v1_t*)table;
  *why = profiler::nullMembers(t);
  if (!why->empty()) return nullptr;
  return std::make_unique<profiler::ProfilerOld<ncclProfiler_v1_t, ncclProfilerEventDescr_v1_t,
                                                ncclProfilerEventStateArgs_v1_t, true, false>>(t);
}

}  // namespace plexus
