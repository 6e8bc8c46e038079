// A profiler plugin for the tests, built once per NCCL profiler ABI version (PROFILER_VERSION=1..6), exporting that
// version alone. It writes every call, as its version received it, one line each, to the file TEST_PROFILER_LOG
// names (appended; lines of one process's calls are whole; "%p" in it: the process id). TEST_PROFILER_MASK (default: every bit its version knows)
// is the activation mask it sets; TEST_PROFILER_INIT_FAIL=1 makes init fail.
//
//   init v<N> rank <r> nranks <n> nnodes <m> name <commName|->          (v4+: the communicator's shape)
//   start <id> type <bits> parent <id|0> rank <r> [<per-type fields>]  (ids count from 1; 0: NULL or unknown)
//   state <id> <state>
//   stop <id>
//   finalize
#include <plexus/profiler.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include <unistd.h>

#ifndef PROFILER_VERSION
#error "PROFILER_VERSION must be 1..6"
#endif

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define V(name) CAT(CAT(name, _v), CAT(PROFILER_VERSION, _t))

namespace {

using Descr = V(ncclProfilerEventDescr);
using Args = V(ncclProfilerEventStateArgs);
using Table = V(ncclProfiler);

struct Event {
  uint64_t id;
};

std::mutex mu;
std::atomic<uint64_t> nextId{1};
int mask = 0;

uint64_t idOf(const void* handle) { return handle ? static_cast<const Event*>(handle)->id : 0; }

void line(const std::string& s) {
  const char* log = getenv("TEST_PROFILER_LOG");
  if (!log) return;
  // "%p" in the name: one file per process (ids count per process).
  std::string path = log;
  if (const size_t at = path.find("%p"); at != std::string::npos) path.replace(at, 2, std::to_string(getpid()));
  std::lock_guard<std::mutex> lock(mu);
  if (FILE* f = fopen(path.c_str(), "a")) {
    fprintf(f, "%s\n", s.c_str());
    fclose(f);
  }
}

std::string str(const char* s) { return s ? s : "-"; }

ncclResult_t setMask(int* eActivationMask) {
  if (getenv("TEST_PROFILER_INIT_FAIL")) return ncclInternalError;
  const char* m = getenv("TEST_PROFILER_MASK");
  mask = m ? (int)strtol(m, nullptr, 0) : (1 << 15) - 1;
  *eActivationMask = mask;
  return ncclSuccess;
}

#if PROFILER_VERSION <= 3
ncclResult_t init(void** context, int* eActivationMask) {
  line("init v" + std::to_string(PROFILER_VERSION));
  *context = &mask;
  return setMask(eActivationMask);
}
#elif PROFILER_VERSION == 4
ncclResult_t init(void** context, int* eActivationMask, const char* commName, uint64_t, int nNodes, int nranks,
                  int rank, ncclDebugLogger_t) {
  line("init v4 rank " + std::to_string(rank) + " nranks " + std::to_string(nranks) + " nnodes " +
       std::to_string(nNodes) + " name " + str(commName));
  *context = &mask;
  return setMask(eActivationMask);
}
#else
ncclResult_t init(void** context, uint64_t, int* eActivationMask, const char* commName, int nNodes, int nranks,
                  int rank, ncclDebugLogger_t) {
  line("init v" + std::to_string(PROFILER_VERSION) + " rank " + std::to_string(rank) + " nranks " +
       std::to_string(nranks) + " nnodes " + std::to_string(nNodes) + " name " + str(commName));
  *context = &mask;
  return setMask(eActivationMask);
}
#endif

ncclResult_t startEvent(void*, void** eHandle, Descr* d) {
  auto* e = new Event{nextId++};
  *eHandle = e;
  std::string s = "start " + std::to_string(e->id) + " type " + std::to_string((uint64_t)d->type) + " parent " +
                  std::to_string(idOf(d->parentObj)) + " rank " + std::to_string(d->rank);
  auto num = [](uint64_t v) { return std::to_string(v); };
  switch (d->type) {
    case ncclProfileColl:
#if PROFILER_VERSION == 1
      s += " func " + num(d->coll.func) + " datatype " + num(d->coll.datatype) + " algo " + num(d->coll.algo) +
           " proto " + num(d->coll.proto) + " channels " + num(d->coll.nMaxChannels);
#elif PROFILER_VERSION <= 3
      s += " func " + str(d->coll.func) + " datatype " + str(d->coll.datatype) + " algo " + str(d->coll.algo) +
           " proto " + str(d->coll.proto) + " channels " + num(d->coll.nMaxChannels);
#else
      s += " func " + str(d->coll.func) + " datatype " + str(d->coll.datatype) + " algo " + str(d->coll.algo) +
           " proto " + str(d->coll.proto) + " channels " + num(d->coll.nChannels);
#endif
      s += " seq " + num(d->coll.seqNumber) + " count " + num(d->coll.count) + " root " +
           std::to_string(d->coll.root);
#if PROFILER_VERSION >= 5
      s += " group " + num(idOf(d->coll.parentGroup));
#endif
      break;
    case ncclProfileP2p:
#if PROFILER_VERSION == 1
      s += " func " + num(d->p2p.func) + " datatype " + num(d->p2p.datatype);
#else
      s += " func " + str(d->p2p.func) + " datatype " + str(d->p2p.datatype);
#endif
      s += " count " + num(d->p2p.count) + " peer " + std::to_string(d->p2p.peer);
#if PROFILER_VERSION >= 5
      s += " group " + num(idOf(d->p2p.parentGroup));
#endif
      break;
#if PROFILER_VERSION >= 5
    case ncclProfileGroupApi: s += " depth " + std::to_string(d->groupApi.groupDepth); break;
    case ncclProfileCollApi:
      s += " func " + str(d->collApi.func) + " count " + num(d->collApi.count) + " datatype " +
           str(d->collApi.datatype) + " root " + std::to_string(d->collApi.root);
      break;
    case ncclProfileP2pApi:
      s += " func " + str(d->p2pApi.func) + " count " + num(d->p2pApi.count) + " datatype " + str(d->p2pApi.datatype);
      break;
#endif
    case ncclProfileProxyOp:
      s += " channel " + num(d->proxyOp.channelId) + " peer " + std::to_string(d->proxyOp.peer) + " send " +
           std::to_string(d->proxyOp.isSend) + " chunk " + std::to_string(d->proxyOp.chunkSize);
      break;
    case ncclProfileProxyStep: s += " step " + std::to_string(d->proxyStep.step); break;
#if PROFILER_VERSION >= 3
    case ncclProfileNetPlugin: s += " id " + num((uint64_t)d->netPlugin.id); break;
#endif
    default: break;
  }
  line(s);
  return ncclSuccess;
}

ncclResult_t stopEvent(void* eHandle) {
  if (!eHandle) return ncclSuccess;
  line("stop " + std::to_string(idOf(eHandle)));
  // Kept, not freed: a child may still name it as parent after it stopped (NCCL's rule); ids stay unique.
  return ncclSuccess;
}

ncclResult_t recordEventState(void* eHandle, V(ncclProfilerEventState) eState, Args*) {
  if (!eHandle) return ncclSuccess;
  line("state " + std::to_string(idOf(eHandle)) + " " + std::to_string((int)eState));
  return ncclSuccess;
}

ncclResult_t finalize(void*) {
  line("finalize");
  return ncclSuccess;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const Table CAT(ncclProfiler_v, PROFILER_VERSION) = {
    "test-profiler", init, startEvent, stopEvent, recordEventState, finalize};
