#include "group.h"

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "device/runtime.h"
#include "misc/check.h"
#include "planner/planner.h"
#include "profiler/profiler.h"

namespace plexus {

namespace {
thread_local int depth = 0;
thread_local std::vector<ncclComm*> groupComms;
thread_local ncclResult_t groupError = ncclSuccess;
thread_local std::vector<ncclComm*> groupInits;
struct Job {
  std::thread thread;
  std::shared_ptr<ncclResult_t> result;
};
thread_local std::vector<Job> groupJobs;
thread_local std::vector<std::function<ncclResult_t()>> groupDeferred;
// The profiler's GroupApi event: opened by the group's first operation, closed when its ncclGroupEnd returns.
thread_local struct {
  ncclComm* comm = nullptr;  // whose plugin opened it; nullptr: none open
  void* handle = nullptr;
} apiGroup;

bool streamCaptured(ncclComm* comm, cudaStream_t stream) {
  bool capturing = false;
  void* graph = nullptr;
  return comm->backend == plexusBackendCuda && comm->runtime->captureStatus(stream, &capturing, &graph) == ncclSuccess &&
         capturing;
}

void apiGroupOpen(ncclComm* comm, cudaStream_t stream) {
  if (apiGroup.comm || !comm->profiler) return;
  ncclProfilerEventDescr_v6_t d{};
  d.type = ncclProfileGroupApi;
  d.groupApi.graphCaptured = streamCaptured(comm, stream);
  d.groupApi.groupDepth = depth + 1;  // NCCL counts the implicit group it opens around every call
  apiGroup.comm = comm;
  apiGroup.handle = profilerStart(comm, &d);
  profilerRecord(comm, apiGroup.handle, ncclProfilerGroupStartApiStop);
}

// The outermost ncclGroupEnd (or a call outside any group) is about to plan: the GroupApi event says so, and its
// destruction closes the event.
struct ApiGroupEnd {
  ApiGroupEnd() {
    if (apiGroup.comm) profilerRecord(apiGroup.comm, apiGroup.handle, ncclProfilerGroupEndApiStart);
  }
  ~ApiGroupEnd() {
    if (!apiGroup.comm) return;
    // The communicator may have been destroyed inside the group; its plugin's table is the process's.
    if (commIsLive(apiGroup.comm)) profilerStop(apiGroup.comm, apiGroup.handle);
    apiGroup.comm = nullptr;
    apiGroup.handle = nullptr;
  }
};

// What a task would take, from the algorithms' cost models as the planner consults them (the best
// allowed algorithm and protocol); operations no algorithm costs (point-to-point) get a plain
// latency-bandwidth estimate of a host copy.
ncclResult_t groupEndImpl(float* simulatedUs);
}  // namespace

void groupAddInit(ncclComm* comm) { groupInits.push_back(comm); }

void groupForget(ncclComm* comm) {
  std::erase(groupComms, comm);
  std::erase(groupInits, comm);
}

void groupAddJob(std::function<ncclResult_t()> job) {
  auto result = std::make_shared<ncclResult_t>(ncclInProgress);
  std::thread t([job = std::move(job), result] { *result = job(); });
  groupJobs.push_back(Job{std::move(t), result});
}

void groupAddDeferred(std::function<ncclResult_t()> op) { groupDeferred.push_back(std::move(op)); }

int groupDepth() { return depth; }

void groupRecordError(ncclResult_t error) {
  if (depth > 0 && groupError == ncclSuccess) groupError = error;
}

ncclResult_t groupStart() {
  depth++;
  return ncclSuccess;
}

ncclResult_t groupEnd() { return groupEndImpl(nullptr); }

ncclResult_t groupSimulateEnd(float* estimatedUs) { return groupEndImpl(estimatedUs); }

namespace {
ncclResult_t groupEndImpl(float* simulatedUs) {
  if (depth == 0)
    return setError(nullptr, ncclInvalidUsage, "%s: no matching ncclGroupStart on this thread",
                    simulatedUs ? "ncclGroupSimulateEnd" : "ncclGroupEnd");
  if (--depth > 0) return ncclSuccess;
  const ApiGroupEnd profiled;
  ncclResult_t result = ncclSuccess;
  // Background jobs first (they may still use a parent's bootstrap), then the communicators' inits.
  std::vector<Job> jobs;
  jobs.swap(groupJobs);
  for (Job& j : jobs) {
    j.thread.join();
    if (*j.result != ncclSuccess && result == ncclSuccess) result = *j.result;
  }
  std::vector<ncclComm*> inits;
  inits.swap(groupInits);
  // A communicator aborted or destroyed by another thread inside the group is gone: skip it.
  auto gone = [&](ncclComm* comm) {
    if (commIsLive(comm)) return false;
    if (result == ncclSuccess)
      result = setError(nullptr, ncclInvalidUsage, "ncclGroupEnd: communicator %p of this group was destroyed or "
                        "aborted before the group ended; its operations are dropped", (void*)comm);
    return true;
  };
  for (ncclComm* comm : inits) {
    if (gone(comm) || !comm->blocking) continue;  // nonblocking: the application polls ncclCommGetAsyncError
    comm->initThread.join();
    if (comm->state != ncclComm::State::Ready && result == ncclSuccess) result = comm->asyncError.load();
  }
  if (groupError != ncclSuccess) result = groupError;
  // Swapped with a spare that keeps its capacity: an operation outside a group allocates nothing here.
  thread_local std::vector<ncclComm*> comms;
  comms.clear();
  comms.swap(groupComms);
  groupError = ncclSuccess;
  float slowest = 0;
  for (ncclComm* comm : comms) {
    if (gone(comm)) continue;
    comm->inGroup = false;
    if (result != ncclSuccess) {
      comm->tasks.clear();  // an operation of the group was refused: launch none of it
      continue;
    }
    if (simulatedUs) {
      float total = 0;
      for (const Task& t : comm->tasks) total += plannerEstimate(comm, t);
      comm->tasks.clear();
      slowest = std::max(slowest, total);
      continue;
    }
    ncclResult_t r = planAndLaunch(comm);
    if (r != ncclSuccess) result = r;
  }
  std::vector<std::function<ncclResult_t()>> deferred;
  deferred.swap(groupDeferred);
  for (auto& op : deferred) {
    if (result != ncclSuccess || simulatedUs) break;
    result = op();
  }
  if (simulatedUs && result == ncclSuccess) *simulatedUs = slowest;
  return result;
}
}  // namespace

void* groupApiEvent() { return apiGroup.handle; }

namespace {
ncclResult_t enqueueProfiled(ncclComm* comm, Task task);
}

ncclResult_t enqueueTask(ncclComm* comm, const Task& task) {
  if (comm->revoked.load()) {
    groupRecordError(ncclInvalidUsage);
    return setError(comm, ncclInvalidUsage,
                    "nccl%s: the communicator was revoked (ncclCommRevoke); it refuses new operations and can only be "
                    "split, shrunk (ncclCommShrink) or destroyed", funcName(task.func));
  }
  if (comm->suspended.load()) [[unlikely]] {
    groupRecordError(ncclInvalidUsage);
    return setError(comm, ncclInvalidUsage,
                    "nccl%s: the communicator is suspended (ncclCommSuspend); call ncclCommResume first",
                    funcName(task.func));
  }
  if (profilerMask() & kProfileGroupApiTree) [[unlikely]]
    return enqueueProfiled(comm, task);
  comm->tasks.push_back(task);
  // Outside any group an operation is a group of one: plan it at once (a group outside a group has
  // no deferred inits, jobs or other communicators to wait for).
  if (depth == 0) return planAndLaunch(comm);
  if (!comm->inGroup) {
    comm->inGroup = true;
    groupComms.push_back(comm);
  }
  return ncclSuccess;
}

namespace {
// enqueueTask with the profiler's API events: GroupApi (opened here by the group's first operation) and the
// operation's CollApi/P2pApi, which its Coll/P2p events name as parent.
ncclResult_t enqueueProfiled(ncclComm* comm, Task task) {
  apiGroupOpen(comm, task.stream);
  const bool p2p = task.func == ncclFuncSend || task.func == ncclFuncRecv;
  task.profApi = nullptr;
  if (profilerMask() & (p2p ? kProfileP2pApiTree : kProfileCollApiTree)) {
    ncclProfilerEventDescr_v6_t d{};
    d.type = p2p ? ncclProfileP2pApi : ncclProfileCollApi;
    d.parentObj = apiGroup.handle;
    if (p2p) {
      d.p2pApi.func = funcName(task.func);
      d.p2pApi.count = task.count;
      d.p2pApi.datatype = profilerTypeName(task.datatype);
      d.p2pApi.stream = task.stream;
      d.p2pApi.graphCaptured = streamCaptured(comm, task.stream);
    } else {
      d.collApi.func = funcName(task.func);
      d.collApi.count = task.count;
      d.collApi.datatype = profilerTypeName(task.datatype);
      d.collApi.root = task.root;
      d.collApi.stream = task.stream;
      d.collApi.graphCaptured = streamCaptured(comm, task.stream);
    }
    task.profApi = profilerStart(comm, &d);
  }
  ncclResult_t r;
  comm->tasks.push_back(task);
  if (depth == 0) {
    const ApiGroupEnd implicitGroup;
    r = planAndLaunch(comm);
    profilerStop(comm, task.profApi);
    return r;
  }
  if (!comm->inGroup) {
    comm->inGroup = true;
    groupComms.push_back(comm);
  }
  profilerStop(comm, task.profApi);
  return ncclSuccess;
}
}  // namespace

}  // namespace plexus
