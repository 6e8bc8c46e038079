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
struct Job {
  std::thread thread;
  std::shared_ptr<ncclResult_t> result;
};
// A thread's group: one thread-local object, found once per call (each thread-local of a shared library costs a
// call to find it, and the launch path passes here several times per operation). The depth stands apart: an
// operation outside any group reads it alone, and a plain int needs no guard to construct it.
thread_local int depth = 0;
struct GroupState {
  ncclResult_t error = ncclSuccess;
  std::vector<ncclComm*> comms;
  std::vector<ncclComm*> launching;  // comms' spare: the two trade places, so neither allocates once grown
  std::vector<ncclComm*> inits;
  std::vector<Job> jobs;
  std::vector<std::function<ncclResult_t()>> deferred;
  // The profiler's GroupApi event: opened by the group's first operation, closed when its ncclGroupEnd returns.
  ncclComm* apiComm = nullptr;  // whose plugin opened it; nullptr: none open
  void* apiHandle = nullptr;
};
GroupState& groupState() {
  static thread_local GroupState state;
  return state;
}

bool streamCaptured(ncclComm* comm, cudaStream_t stream) {
  bool capturing = false;
  void* graph = nullptr;
  return comm->backend == plexusBackendCuda && comm->runtime->captureStatus(stream, &capturing, &graph) == ncclSuccess &&
         capturing;
}

void apiGroupOpen(GroupState& g, ncclComm* comm, cudaStream_t stream) {
  if (g.apiComm || !comm->profiler) return;
  ncclProfilerEventDescr_v6_t d{};
  d.type = ncclProfileGroupApi;
  d.groupApi.graphCaptured = streamCaptured(comm, stream);
  d.groupApi.groupDepth = depth + 1;  // NCCL counts the implicit group it opens around every call
  g.apiComm = comm;
  g.apiHandle = profilerStart(comm, &d);
  profilerRecord(comm, g.apiHandle, ncclProfilerGroupStartApiStop);
}

// The outermost ncclGroupEnd (or a call outside any group) is about to plan: the GroupApi event says so, and its
// destruction closes the event.
struct ApiGroupEnd {
  GroupState& g;
  explicit ApiGroupEnd(GroupState& state) : g(state) {
    if (g.apiComm) profilerRecord(g.apiComm, g.apiHandle, ncclProfilerGroupEndApiStart);
  }
  ~ApiGroupEnd() {
    if (!g.apiComm) return;
    // The communicator may have been destroyed inside the group; its plugin's table is the process's.
    if (commIsLive(g.apiComm)) profilerStop(g.apiComm, g.apiHandle);
    g.apiComm = nullptr;
    g.apiHandle = nullptr;
  }
};

// What a task would take, from the algorithms' cost models as the planner consults them (the best
// allowed algorithm and protocol); operations no algorithm costs (point-to-point) get a plain
// latency-bandwidth estimate of a host copy.
ncclResult_t groupEndImpl(float* simulatedUs);
}  // namespace

void groupAddInit(ncclComm* comm) { groupState().inits.push_back(comm); }

void groupForget(ncclComm* comm) {
  GroupState& g = groupState();
  std::erase(g.comms, comm);
  std::erase(g.inits, comm);
}

void groupAddJob(std::function<ncclResult_t()> job) {
  auto result = std::make_shared<ncclResult_t>(ncclInProgress);
  std::thread t([job = std::move(job), result] { *result = job(); });
  groupState().jobs.push_back(Job{std::move(t), result});
}

void groupAddDeferred(std::function<ncclResult_t()> op) { groupState().deferred.push_back(std::move(op)); }

int groupDepth() { return depth; }

void groupRecordError(ncclResult_t error) {
  if (depth == 0) return;
  GroupState& g = groupState();
  if (g.error == ncclSuccess) g.error = error;
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
  GroupState& g = groupState();
  const ApiGroupEnd profiled(g);
  ncclResult_t result = ncclSuccess;
  // Background jobs first (they may still use a parent's bootstrap), then the communicators' inits.
  std::vector<Job> jobs;
  jobs.swap(g.jobs);
  for (Job& j : jobs) {
    j.thread.join();
    if (*j.result != ncclSuccess && result == ncclSuccess) result = *j.result;
  }
  std::vector<ncclComm*> inits;
  inits.swap(g.inits);
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
  if (g.error != ncclSuccess) result = g.error;
  // Swapped with a spare that keeps its capacity: an operation outside a group allocates nothing here.
  std::vector<ncclComm*>& comms = g.launching;
  comms.clear();
  comms.swap(g.comms);
  g.error = ncclSuccess;
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
  deferred.swap(g.deferred);
  for (auto& op : deferred) {
    if (result != ncclSuccess || simulatedUs) break;
    result = op();
  }
  if (simulatedUs && result == ncclSuccess) *simulatedUs = slowest;
  return result;
}
}  // namespace

void* groupApiEvent() { return groupState().apiHandle; }

namespace {
ncclResult_t enqueueProfiled(GroupState& g, ncclComm* comm, Task task);
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
    return enqueueProfiled(groupState(), comm, task);
  // Outside any group an operation is a group of one: plan it at once (a group outside a group has
  // no deferred inits, jobs or other communicators to wait for).
  if (depth == 0) return planAndLaunchOne(comm, task);
  comm->tasks.push_back(task);
  if (!comm->inGroup) {
    comm->inGroup = true;
    groupState().comms.push_back(comm);
  }
  return ncclSuccess;
}

namespace {
// enqueueTask with the profiler's API events: GroupApi (opened here by the group's first operation) and the
// operation's CollApi/P2pApi, which its Coll/P2p events name as parent.
ncclResult_t enqueueProfiled(GroupState& g, ncclComm* comm, Task task) {
  apiGroupOpen(g, comm, task.stream);
  const bool p2p = task.func == ncclFuncSend || task.func == ncclFuncRecv;
  task.profApi = nullptr;
  if (profilerMask() & (p2p ? kProfileP2pApiTree : kProfileCollApiTree)) {
    ncclProfilerEventDescr_v6_t d{};
    d.type = p2p ? ncclProfileP2pApi : ncclProfileCollApi;
    d.parentObj = g.apiHandle;
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
    const ApiGroupEnd implicitGroup(g);
    r = planAndLaunch(comm);
    profilerStop(comm, task.profApi);
    return r;
  }
  if (!comm->inGroup) {
    comm->inGroup = true;
    g.comms.push_back(comm);
  }
  profilerStop(comm, task.profApi);
  return ncclSuccess;
}
}  // namespace

}  // namespace plexus
