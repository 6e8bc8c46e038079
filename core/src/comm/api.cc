// The public C API: NCCL's entry points (and pncclX twins), validated here and nowhere else, with
// errors turned into NCCL's codes and a message for ncclGetLastError.
#include <nccl.h>
#include <plexus.h>

#include <cstddef>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "executor/host_executor.h"
#include "health/health.h"
#include "planner/launch.h"
#include "group/group.h"
#include "misc/check.h"
#include "misc/env.h"
#include "device/runtime.h"
#include "planner/planner.h"
#include "stream/host_stream.h"

namespace plexus {
ncclResult_t commInitRank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank, const ncclConfig_t* config);
ncclResult_t setDevice(int device);
int getDevice();
}  // namespace plexus

using namespace plexus;

// ncclX is weak so that a profiling library can interpose it and still reach pncclX, as with NCCL.
#define NCCL_API(ret, func, ...)                                                                        \
  extern "C" __attribute__((visibility("default"))) __attribute__((alias(#func))) ret p##func(__VA_ARGS__); \
  extern "C" __attribute__((visibility("default"))) __attribute__((weak)) ret func(__VA_ARGS__)

NCCL_API(ncclResult_t, ncclGetVersion, int* version);
ncclResult_t ncclGetVersion(int* version) {
  if (!version) return setError(nullptr, ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId);
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (!uniqueId) return setError(nullptr, ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  if (const ncclResult_t r = envPluginCheck(); r != ncclSuccess)
    return setError(nullptr, r, "ncclGetUniqueId: the env plugin's init failed (NCCL_ENV_PLUGIN); fix it or set "
                    "NCCL_ENV_PLUGIN=none");
  return bootstrapGetUniqueId(uniqueId);
}

NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return commInitRank(comm, nranks, commId, rank, nullptr);
}

NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
         ncclConfig_t* config);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config) {
  return commInitRank(comm, nranks, commId, rank, config);
}

NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist);
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (!comms) return setError(nullptr, ncclInvalidArgument, "ncclCommInitAll: comms is NULL");
  if (ndev < 1) return setError(nullptr, ncclInvalidArgument, "ncclCommInitAll: ndev %d must be at least 1", ndev);
  // The devices are of the backend a communicator made on this thread would get (CUDA devices where CUDA runs).
  plexusBackend_t backend;
  int current;
  NCCLCHECK(chooseBackend(&backend, &current));
  if (devlist)
    for (int i = 0; i < ndev; i++) {
      if (devlist[i] < 0 || (backend == plexusBackendHost && devlist[i] >= PLEXUS_MAX_HOST_DEVICES))
        return setError(nullptr, ncclInvalidArgument, "ncclCommInitAll: devlist[%d]=%d is not a valid device", i,
                        devlist[i]);
      // Host devices name ranks; several ranks may share one GPU (which NCCL refuses).
      for (int j = 0; j < i && backend == plexusBackendHost; j++)
        if (devlist[j] == devlist[i])
          return setError(nullptr, ncclInvalidUsage, "ncclCommInitAll: device %d appears twice in devlist", devlist[i]);
    }
  for (int i = 0; i < ndev; i++) comms[i] = nullptr;
  ncclUniqueId id;
  NCCLCHECK(bootstrapGetUniqueId(&id));
  std::vector<ncclResult_t> results(ndev, ncclSuccess);
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; i++)
    threads.emplace_back([&, i] {
      results[i] = useDevice(backend, devlist ? devlist[i] : i);
      if (results[i] == ncclSuccess) results[i] = commInitRank(&comms[i], ndev, id, i, nullptr);
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < ndev; i++)
    if (results[i] != ncclSuccess) {
      for (int j = 0; j < ndev; j++)
        if (comms[j]) {
          ncclCommAbort(comms[j]);
          comms[j] = nullptr;
        }
      return results[i];
    }
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm);
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  NCCLCHECK(checkComm(comm, "ncclCommFinalize"));
  comm->launcher->waitIdle();
  return comm->asyncError.load();
}

namespace {
// Aborted CUDA communicators whose memory is not freed yet: cuMemFree and cuMemFreeHost wait for every kernel running
// on the GPU, another communicator's too (one still waiting for a peer), so an abort that freed at once could hang
// behind a kernel that only a later abort stops. They are freed once no kernel of theirs or of any live communicator
// runs; those whose own kernels never stop are never freed (the kernels may still touch the memory).
std::mutex zombieMutex;
std::vector<ncclComm*> zombies;

void reapZombies() {
  std::vector<ncclComm*> ready;
  {
    std::lock_guard<std::mutex> lock(zombieMutex);
    if (zombies.empty() || commCudaKernelsBusy()) return;
    for (ncclComm* z : zombies)
      if (z->launcher && !z->launcher->waitIdle(0)) return;  // freeing anything would wait for this one's kernels
    ready.swap(zombies);
  }
  for (ncclComm* z : ready) {
    INFO(NCCL_INIT, "rank %d: the aborted communicator's memory is freed now that no kernel runs", z->rank);
    commFree(z);
    delete z;
  }
}
}  // namespace

static ncclResult_t commTeardown(ncclComm_t comm, bool abort) {
  if (comm->initThread.joinable()) comm->initThread.join();
  if (abort || comm->asyncError.load() != ncclSuccess) {
    // Waits give up at once (the bootstrap's too: this is its abort flag); whatever is in flight finishes
    // with an error.
    commSetAbort(comm, 1);
  }
  // After an abort every kernel's wait gives up; one that does not stop (a GPU hung elsewhere) keeps its memory.
  const bool stopped = !comm->launcher || comm->launcher->waitIdle(abort ? 10.0 : -1);
  groupForget(comm);
  commRegister(comm, false);
  if (abort && comm->backend == plexusBackendCuda && (!stopped || commCudaKernelsBusy())) {
    WARN("rank %d: %s; the communicator's GPU memory is freed once no kernel runs", comm->rank,
         stopped ? "another communicator's kernels are still running (freeing memory now would wait for them)"
                 : "its kernels did not stop within 10 s of the abort");
    std::lock_guard<std::mutex> lock(zombieMutex);
    zombies.push_back(comm);
    return ncclSuccess;
  }
  if (!stopped) {
    WARN("rank %d: the communicator's kernels did not stop within 10 s of the abort; its device memory is left "
         "allocated so that they never touch freed memory", comm->rank);
    comm->kernelsStuck = true;
  }
  commFree(comm);
  delete comm;
  reapZombies();
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;  // as NCCL: destroying NULL is a no-op
  NCCLCHECK(checkComm(comm, "ncclCommDestroy", false));
  return commTeardown(comm, false);
}

NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  NCCLCHECK(checkComm(comm, "ncclCommAbort", false));
  commSetAbort(comm, 1);
  return commTeardown(comm, true);
}

NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  NCCLCHECK(checkComm(comm, "ncclCommCount"));
  if (!count) return setError(comm, ncclInvalidArgument, "ncclCommCount: count is NULL");
  *count = comm->nRanks;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  NCCLCHECK(checkComm(comm, "ncclCommUserRank"));
  if (!rank) return setError(comm, ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
  *rank = comm->rank;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  NCCLCHECK(checkComm(comm, "ncclCommCuDevice"));
  if (!device) return setError(comm, ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
  *device = comm->device;
  return ncclSuccess;
}

NCCL_API(const char*, ncclGetErrorString, ncclResult_t result);
const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the Plexus developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclTimeout: return "operation timed out";
    default: return "unknown result code";
  }
}

NCCL_API(const char*, ncclGetLastError, ncclComm_t comm);
const char* ncclGetLastError(ncclComm_t comm) { return lastError(comm); }

NCCL_API(void, ncclResetDebugInit, void);
void ncclResetDebugInit(void) { debugLevel.store(-1); }

NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  NCCLCHECK(checkComm(comm, "ncclCommGetAsyncError", false));
  if (!asyncError) return setError(comm, ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  if (comm->state.load() == ncclComm::State::Initializing) {
    *asyncError = ncclInProgress;
    return ncclSuccess;
  }
  *asyncError = comm->asyncError.load();
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclGroupStart, void);
ncclResult_t ncclGroupStart(void) { return groupStart(); }

NCCL_API(ncclResult_t, ncclGroupEnd, void);
ncclResult_t ncclGroupEnd(void) { return groupEnd(); }

// Plexus extensions.

extern "C" __attribute__((visibility("default"))) ncclResult_t plexusSetDevice(int device) {
  return plexus::setDevice(device);
}

extern "C" __attribute__((visibility("default"))) ncclResult_t plexusGetDevice(int* device) {
  if (!device) return setError(nullptr, ncclInvalidArgument, "plexusGetDevice: device is NULL");
  *device = plexus::getDevice();
  return ncclSuccess;
}

extern "C" __attribute__((visibility("default"))) ncclResult_t plexusCommGetBackend(ncclComm_t comm,
                                                                                     plexusBackend_t* backend) {
  NCCLCHECK(checkComm(comm, "plexusCommGetBackend"));
  if (!backend) return setError(comm, ncclInvalidArgument, "plexusCommGetBackend: backend is NULL");
  *backend = comm->backend;
  return ncclSuccess;
}

extern "C" __attribute__((visibility("default"))) ncclResult_t plexusCommChannelCount(ncclComm_t comm, int* n) {
  NCCLCHECK(checkComm(comm, "plexusCommChannelCount"));
  if (!n) return setError(comm, ncclInvalidArgument, "plexusCommChannelCount: nChannels is NULL");
  *n = comm->channels.count;
  return ncclSuccess;
}

extern "C" __attribute__((visibility("default"))) ncclResult_t plexusCommLastDecision(ncclComm_t comm,
                                                                                       plexusDecision_t* decision) {
  NCCLCHECK(checkComm(comm, "plexusCommLastDecision"));
  if (!decision) return setError(comm, ncclInvalidArgument, "plexusCommLastDecision: decision is NULL");
  *decision = comm->lastDecision;
  return ncclSuccess;
}

extern "C" __attribute__((visibility("default"))) ncclResult_t plexusCommGetStats(ncclComm_t comm,
                                                                                   plexusCommStats_t* stats) {
  NCCLCHECK(checkComm(comm, "plexusCommGetStats"));
  if (!stats) return setError(comm, ncclInvalidArgument, "plexusCommGetStats: stats is NULL");
  stats->operations = comm->opCount;
  stats->p2pZeroCopyBytes = comm->p2pZeroCopyBytes.load(std::memory_order_relaxed);
  stats->p2pSlotBytes = comm->p2pSlotBytes.load(std::memory_order_relaxed);
  return ncclSuccess;
}

// Pinned. joined was added last: a program built on a plexus.h without it must be rebuilt (the call writes 40 bytes).
static_assert(sizeof(plexusLaunchInfo_t) == 40 && offsetof(plexusLaunchInfo_t, repeats) == 24 &&
                  offsetof(plexusLaunchInfo_t, joined) == 32,
              "plexusLaunchInfo_t");

extern "C" __attribute__((visibility("default"))) ncclResult_t plexusCommGetLaunchInfo(ncclComm_t comm,
                                                                                        plexusLaunchInfo_t* info) {
  NCCLCHECK(checkComm(comm, "plexusCommGetLaunchInfo"));
  if (!info) return setError(comm, ncclInvalidArgument, "plexusCommGetLaunchInfo: info is NULL");
  const Launcher::Last last = comm->launcher->last();
  *info = plexusLaunchInfo_t{comm->launcher->launches(), (int)last.storage, (int)last.nWorks,
                             comm->workFifo->produced(), comm->workFifo->consumed(), comm->launcher->repeats(),
                             comm->executor ? comm->executor->joined() : 0};
  return ncclSuccess;
}

extern "C" __attribute__((visibility("default"))) ncclResult_t plexusCommSetTimeout(ncclComm_t comm,
                                                                                     double seconds) {
  NCCLCHECK(checkComm(comm, "plexusCommSetTimeout"));
  if (!(seconds >= 0) || seconds > 1e9)
    return setError(comm, ncclInvalidArgument, "plexusCommSetTimeout: %g seconds is not in [0, 1e9] (0: no timeout)",
                    seconds);
  const uint64_t ns = (uint64_t)(seconds * 1e9);
  __atomic_store_n(&comm->devComm.timeoutNs, ns, __ATOMIC_RELAXED);
  if (comm->devCommForKernels != &comm->devComm) {  // CUDA: the kernels' copy too
    DeviceGuard device(comm);
    NCCLCHECK(device.result());
    if (comm->runtime->copyToDevice(&comm->devCommForKernels->timeoutNs, &ns, sizeof(ns)) != ncclSuccess)
      return setError(comm, ncclUnhandledCudaError, "plexusCommSetTimeout: cannot update the kernels' timeout: %s",
                      comm->runtime->lastError().c_str());
  }
  return ncclSuccess;
}

extern "C" __attribute__((visibility("default"))) ncclResult_t plexusCommHangReport(ncclComm_t comm, char* report,
                                                                                     size_t size) {
  NCCLCHECK(checkComm(comm, "plexusCommHangReport", false));
  if (!report || size == 0)
    return setError(comm, ncclInvalidArgument, "plexusCommHangReport: report is NULL or size is 0");
  const std::string r = hangReport(comm);
  snprintf(report, size, "%s", r.c_str());
  return ncclSuccess;
}

extern "C" __attribute__((visibility("default"))) ncclResult_t plexusCommFailedRank(ncclComm_t comm, int* rank) {
  NCCLCHECK(checkComm(comm, "plexusCommFailedRank", false));
  if (!rank) return setError(comm, ncclInvalidArgument, "plexusCommFailedRank: rank is NULL");
  *rank = comm->health ? comm->health->lostRank.load() : -1;
  return ncclSuccess;
}
