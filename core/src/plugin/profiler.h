// The profiler plugin ABI as the core calls it: NCCL's newest (ncclProfiler_v6_t's calls and descriptor), over
// whichever version a plugin exports. One adapter per version (profiler_vN.cc, as NCCL's src/plugin/profiler/): each
// converts the v6 descriptor to its own layout, drops event types and states its version does not know, and never
// lets a return value reach the runtime (a profiler never makes an operation fail).
#pragma once

#include <plexus/profiler.h>

#include <memory>
#include <string>

namespace plexus {

class ProfilerApi {
 public:
  virtual ~ProfilerApi() = default;
  virtual ncclResult_t init(void** ctx, uint64_t commId, int* mask, const char* commName, int nNodes, int nRanks,
                            int rank, ncclDebugLogger_t logger) const = 0;
  // Writes *handle always: NULL where the plugin is not interested or its version has no such event.
  virtual void startEvent(void* ctx, void** handle, ncclProfilerEventDescr_v6_t* d) const = 0;
  virtual void stopEvent(void* handle) const = 0;
  virtual void recordEventState(void* handle, ncclProfilerEventState_t state,
                                ncclProfilerEventStateArgs_v6_t* args) const = 0;
  virtual void finalize(void* ctx) const = 0;
};

// Adapters over the table a plugin's ncclProfiler_vN symbol points at; nullptr, with *why set, where a member is NULL.
std::unique_ptr<const ProfilerApi> profilerAdapt_v1(const void* table, std::string* why);
std::unique_ptr<const ProfilerApi> profilerAdapt_v2(const void* table, std::string* why);
std::unique_ptr<const ProfilerApi> profilerAdapt_v3(const void* table, std::string* why);
std::unique_ptr<const ProfilerApi> profilerAdapt_v4(const void* table, std::string* why);
std::unique_ptr<const ProfilerApi> profilerAdapt_v5(const void* table, std::string* why);
std::unique_ptr<const ProfilerApi> profilerAdapt_v6(const void* table, std::string* why);

// Shared by the adapters.
namespace profiler {
// "startEvent is NULL"-style text for a table's missing members; empty when all are there.
template <class T>
std::string nullMembers(const T* t) {
  std::string s;
  auto add = [&](const char* n, bool isNull) {
    if (isNull) s += (s.empty() ? "" : ", ") + std::string(n);
  };
  add("init", !t->init);
  add("startEvent", !t->startEvent);
  add("stopEvent", !t->stopEvent);
  add("recordEventState", !t->recordEventState);
  add("finalize", !t->finalize);
  return s.empty() ? s : s + " NULL";
}
// v1's numbers for the strings of v2+ (NCCL's enums; unknown: Send, PAT, SIMPLE, Float64, as NCCL's v1 adapter).
uint8_t funcNumber(const char* func);
uint8_t typeNumber(const char* datatype);
uint8_t algoNumber(const char* algo);
uint8_t protoNumber(const char* proto);
// The states NCCL's v1-v3 adapters forward (8-12 with zeroed args, 13-18).
inline bool v1State(ncclProfilerEventState_t s) { return s >= 8 && s <= 18; }
// v4: 19, 8-12, 20, 21, 22 and 13-18.
inline bool v4State(ncclProfilerEventState_t s) { return s >= 8 && s <= 22; }
}  // namespace profiler

}  // namespace plexus
