// NCCL's profiler plugins (NCCL_PROFILER_PLUGIN, ncclProfiler_v6 .. _v1): loaded at the first communicator's init,
// one per process, dropped with the last communicator. Every emission point reads the process-wide activation mask
// the plugin writes (one relaxed load: nothing else happens while no profiler is loaded or wants the event) and hands
// the plugin NCCL's v6 descriptor; the version adapters (plugin/profiler_vN.cc) convert it. A profiler never makes
// anything fail: a load or init that fails is one line and profiling off.
#pragma once

#include <plexus/profiler.h>

#include <cstdint>

struct ncclComm;

namespace plexus {

class ProfilerApi;

// The mask profilers' init receives (NCCL's ncclProfilerEventMask): ncclProfile* bits, 0 until a plugin sets some.
extern int profilerEventMask;
inline int profilerMask() { return __atomic_load_n(&profilerEventMask, __ATOMIC_RELAXED); }

// Which bits make each event worth emitting: its own and its descendants' (NCCL's rule).
constexpr int kProfileCollTree = ncclProfileColl | ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileKernelCh |
                                 ncclProfileNetPlugin;
constexpr int kProfileP2pTree = ncclProfileP2p | ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileKernelCh |
                                ncclProfileNetPlugin;
constexpr int kProfileGroupTree = ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp |
                                  ncclProfileProxyStep | ncclProfileKernelCh | ncclProfileNetPlugin;
constexpr int kProfileCollApiTree = kProfileCollTree | ncclProfileCollApi | ncclProfileCeColl | ncclProfileCeSync |
                                    ncclProfileCeBatch;
constexpr int kProfileP2pApiTree = kProfileP2pTree | ncclProfileP2pApi;
constexpr int kProfileGroupApiTree = ~ncclProfileProxyCtrl;

// At init (before the proxy starts) and at commFree: loads the plugin on first use and calls its init/finalize for
// this communicator. Never fails.
void profilerCommInit(ncclComm* comm);
void profilerCommFinalize(ncclComm* comm);

// The communicator's plugin calls; no-ops where it has none. start returns the handle (NULL: not interested).
void* profilerStart(ncclComm* comm, ncclProfilerEventDescr_v6_t* d);
void profilerStop(ncclComm* comm, void* handle);
void profilerRecord(ncclComm* comm, void* handle, ncclProfilerEventState_t state,
                    ncclProfilerEventStateArgs_v6_t* args = nullptr);

// The clock of KernelCh's pTimer on the host backend: CLOCK_REALTIME in ns (a GPU's globaltimer counts from the
// epoch too).
uint64_t profilerNowNs();

// The profiler callback net plugins of ABI v10+ get at init (NCCL always passes one; some plugins call it without
// looking). pHandle is what the plugin got with isend/irecv: a step's handle (proxy/proxy_profile.h), under which a
// start hangs a NetPlugin event; NULL (no step event) leaves *eHandle as it is. Every call succeeds.
ncclResult_t profilerNetCallback(void** eHandle, int type, void* pHandle, int64_t pluginId, void* extData);

// NCCL's strings for descriptors ("ncclFloat32", "RING", "SIMPLE").
const char* profilerTypeName(int datatype);
const char* profilerProtoName(int proto);

// For plexus-info and tests: the line the load logged ("profiler plugin: none ..."), empty before any init.
const char* profilerReport();

}  // namespace plexus
