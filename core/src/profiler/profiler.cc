#include "profiler/profiler.h"

#include <dlfcn.h>
#include <strings.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "comm/communicator.h"
#include "misc/debug.h"
#include "misc/env.h"
#include "plugin/loader.h"
#include "plugin/net.h"
#include "plugin/profiler.h"
#include "proxy/proxy_profile.h"

namespace plexus {

int profilerEventMask = 0;

namespace {

struct Version {
  int version;
  std::unique_ptr<const ProfilerApi> (*adapt)(const void*, std::string*);
};
// Newest first, as NCCL tries them.
const Version versions[] = {{6, profilerAdapt_v6}, {5, profilerAdapt_v5}, {4, profilerAdapt_v4},
                            {3, profilerAdapt_v3}, {2, profilerAdapt_v2}, {1, profilerAdapt_v1}};

std::mutex loadMutex;
int refs = 0;
// What a load that failed was asked for (NCCL_PROFILER_PLUGIN, the net plugin): not tried again in this process while
// that stays the same (NCCL never tries again; a program that names another plugin before its next init gets it).
std::optional<std::string> failedFor;
void* library = nullptr;
std::unique_ptr<const ProfilerApi> api;
std::string label, report;

// Under loadMutex: opens the plugin NCCL_PROFILER_PLUGIN names; false (with report set) when there is none.
bool load(const std::string& netSpec) {
  const std::optional<std::string> env = envGet("PROFILER_PLUGIN");
  const std::string spec = env.value_or("");
  const std::string source = env ? "NCCL_PROFILER_PLUGIN=" + spec : "default";
  if (env && strcasecmp(spec.c_str(), "none") == 0) {
    report = "profiler plugin: none (" + source + ")";
    return false;
  }
  NcclLibrary opened = openNcclLibrary(spec, "libnccl-profiler");
  std::string fromNet;
  if (!opened.lib && strcasecmp(netSpec.c_str(), "none") != 0) {
    // NCCL's fallback (2.28+), even when a name was given: the profiler inside the net plugin's library.
    std::string netPath, found;
    int version = 0;
    if (void* netLib = netPluginLibrary(netSpec, &netPath)) {
      if (newestSymbol(netLib, "ncclProfiler_v", {6, 5, 4, 3, 2, 1}, &version, &found)) {
        opened.lib = netLib;
        opened.path = netPath;
        fromNet = "; from the net plugin's library, as no profiler library of its own was found";
      } else {
        dlclose(netLib);
      }
    }
  }
  if (!opened.lib) {
    // Nobody asked for one: the usual case, said under INFO only.
    report = env ? format("profiler plugin '%s': not loaded: tried %s%s. Running without a profiler; give a path, "
                          "put the file in PLEXUS_PLUGIN_PATH, or set NCCL_PROFILER_PLUGIN=none",
                          spec.c_str(), opened.tried.c_str(), opened.errors.c_str())
                 : "profiler plugin: none (no libnccl-profiler.so in the library path, PLEXUS_PLUGIN_PATH or beside "
                   "libplexus.so)";
    return false;
  }
  int version = 0;
  std::string found, why;
  const void* table = newestSymbol(opened.lib, "ncclProfiler_v", {6, 5, 4, 3, 2, 1}, &version, &found);
  if (table)
    for (const Version& v : versions)
      if (v.version == version) api = v.adapt(table, &why);
  if (!api) {
    report = format("profiler plugin %s: refused: looked for ncclProfiler_v6 down to _v1, found %s%s%s. Running "
                    "without a profiler: rebuild the plugin against NCCL's profiler headers (plexus/profiler.h)",
                    opened.path.c_str(), found.empty() ? "none" : found.c_str(), why.empty() ? "" : "; ",
                    why.empty() ? "" : ("ncclProfiler_v" + std::to_string(version) + "'s " + why).c_str());
    dlclose(opened.lib);
    return false;
  }
  library = opened.lib;
  const char* name = *(const char* const*)table;  // every version's table starts with its name
  label = format("profiler plugin '%s' (%s, ncclProfiler_v%d)", name && name[0] ? name : "?", opened.path.c_str(),
                 version);
  report = label + ": loaded (the file exports " + found + fromNet + ")";
  return true;
}

}  // namespace

void profilerCommInit(ncclComm* comm) {
  {
    std::lock_guard<std::mutex> lock(loadMutex);
    if (!api) {
      const std::string netSpec = netPluginSpec(comm->config->net);
      const std::optional<std::string> env = envGet("PROFILER_PLUGIN");
      const std::string asked = (env ? "=" + *env : "unset") + "\n" + netSpec;
      if (failedFor == asked) return;
      if (!load(netSpec)) {
        failedFor = asked;
        if (env) WARN("%s", report.c_str());
        else INFO(NCCL_INIT, "%s", report.c_str());
        return;
      }
      failedFor.reset();
    }
    if (refs++ == 0) INFO(NCCL_INIT, "%s", report.c_str());
  }
  comm->profiler = api.get();
  const ncclResult_t r = api->init(&comm->profilerContext, comm->commHash, &profilerEventMask,
                                   comm->options.name.empty() ? nullptr : comm->options.name.c_str(),
                                   comm->topo.nNodes, comm->nRanks, comm->rank, debugLog);
  if (r != ncclSuccess) {
    // As NCCL, this communicator's reference goes (without finalize); it emits no events.
    WARN("rank %d: %s: init returned %s; continuing without a profiler for this communicator", comm->rank,
         label.c_str(), ncclGetErrorString(r));
    comm->profilerContext = nullptr;
    profilerCommFinalize(comm);
  }
}

void profilerCommFinalize(ncclComm* comm) {
  if (!comm->profiler) return;
  if (comm->profilerContext) comm->profiler->finalize(comm->profilerContext);
  comm->profiler = nullptr;
  comm->profilerContext = nullptr;
  std::lock_guard<std::mutex> lock(loadMutex);
  if (--refs > 0) return;
  // The last communicator closes the library; the next init loads it again.
  api.reset();
  __atomic_store_n(&profilerEventMask, 0, __ATOMIC_RELAXED);
  if (library) dlclose(library);
  library = nullptr;
}

void* profilerStart(ncclComm* comm, ncclProfilerEventDescr_v6_t* d) {
  const ProfilerApi* p = comm->profiler;
  if (!p) return nullptr;
  void* handle = nullptr;
  p->startEvent(comm->profilerContext, &handle, d);
  return handle;
}

void profilerStop(ncclComm* comm, void* handle) {
  if (handle && comm->profiler) comm->profiler->stopEvent(handle);
}

void profilerRecord(ncclComm* comm, void* handle, ncclProfilerEventState_t state, ncclProfilerEventStateArgs_v6_t* args) {
  if (handle && comm->profiler) comm->profiler->recordEventState(handle, state, args);
}

ncclResult_t profilerNetCallback(void** eHandle, int type, void* pHandle, int64_t pluginId, void* extData) {
  if (!eHandle) return ncclSuccess;
  if (type == 0) {  // start, under the step whose handle the plugin got with isend/irecv
    const auto* step = (const ProxyStepHandle*)pHandle;
    if (!step || !step->comm || !step->event || !(profilerMask() & ncclProfileNetPlugin)) return ncclSuccess;
    ncclProfilerEventDescr_v6_t d{};
    d.type = ncclProfileNetPlugin;
    d.parentObj = step->event;
    d.rank = step->comm->rank;
    d.netPlugin.id = pluginId;
    d.netPlugin.data = extData;
    *eHandle = profilerStart(step->comm, &d);
    return ncclSuccess;
  }
  // Update (2), stop (1), or both (3), on the handle a start gave: the process's one profiler.
  const ProfilerApi* p = api.get();
  if (!*eHandle || !p) return ncclSuccess;
  if (type == 2 || type == 3) {
    ncclProfilerEventStateArgs_v6_t args{};
    args.netPlugin.data = extData;
    p->recordEventState(*eHandle, ncclProfilerNetPluginUpdate, &args);
  }
  if (type == 1 || type == 3) p->stopEvent(*eHandle);
  return ncclSuccess;
}

uint64_t profilerNowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char* profilerTypeName(int datatype) {
  static const char* names[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",    "ncclUint32",
                                "ncclInt64",   "ncclUint64",  "ncclFloat16",  "ncclFloat32",
                                "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  return datatype >= 0 && datatype < (int)(sizeof names / sizeof names[0]) ? names[datatype] : "ncclUnknown";
}

const char* profilerProtoName(int proto) {
  static const char* names[] = {"LL", "LL128", "SIMPLE"};
  return proto >= 0 && proto < 3 ? names[proto] : "SIMPLE";
}

const char* profilerReport() { return report.c_str(); }

namespace profiler {

namespace {
uint8_t lookup(const char* s, std::initializer_list<const char*> names, uint8_t fallback) {
  if (!s) return fallback;
  uint8_t i = 0;
  for (const char* n : names) {
    if (strcmp(s, n) == 0) return i;
    i++;
  }
  return fallback;
}
}  // namespace

uint8_t funcNumber(const char* func) {
  return lookup(func, {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce", "SendRecv", "Send", "Recv"},
                6);
}
uint8_t typeNumber(const char* datatype) {
  return lookup(datatype, {"ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32", "ncclInt64", "ncclUint64",
                           "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3",
                           "ncclFloat8e5m2"},
                8);
}
uint8_t algoNumber(const char* algo) {
  return lookup(algo, {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"}, 6);
}
uint8_t protoNumber(const char* proto) { return lookup(proto, {"LL", "LL128", "SIMPLE"}, 2); }

}  // namespace profiler

}  // namespace plexus
