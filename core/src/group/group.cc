#include "group.h"

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "misc/check.h"
#include "planner/planner.h"

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
  if (simulatedUs && result == ncclSuccess) *simulatedUs = slowest;
  return result;
}
}  // namespace

ncclResult_t enqueueTask(ncclComm* comm, const Task& task) {
  if (comm->revoked.load()) {
    groupRecordError(ncclInvalidUsage);
    return setError(comm, ncclInvalidUsage,
                    "nccl%s: the communicator was revoked (ncclCommRevoke); it refuses new operations and can only be "
                    "split, shrunk (ncclCommShrink) or destroyed", funcName(task.func));
  }
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

}  // namespace plexus
