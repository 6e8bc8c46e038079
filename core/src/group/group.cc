#include "group.h"

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
}  // namespace

void groupAddInit(ncclComm* comm) { groupInits.push_back(comm); }

int groupDepth() { return depth; }

void groupRecordError(ncclResult_t error) {
  if (depth > 0 && groupError == ncclSuccess) groupError = error;
}

ncclResult_t groupStart() {
  depth++;
  return ncclSuccess;
}

ncclResult_t groupEnd() {
  if (depth == 0)
    return setError(nullptr, ncclInvalidUsage, "ncclGroupEnd: no matching ncclGroupStart on this thread");
  if (--depth > 0) return ncclSuccess;
  ncclResult_t result = groupError;
  std::vector<ncclComm*> inits;
  inits.swap(groupInits);
  for (ncclComm* comm : inits) {
    if (!comm->blocking) continue;  // the application polls ncclCommGetAsyncError
    comm->initThread.join();
    if (comm->state != ncclComm::State::Ready && result == ncclSuccess) result = comm->asyncError.load();
  }
  std::vector<ncclComm*> comms;
  comms.swap(groupComms);
  groupError = ncclSuccess;
  for (ncclComm* comm : comms) {
    comm->inGroup = false;
    if (result != ncclSuccess) {
      comm->tasks.clear();  // an operation of the group was refused: launch none of it
      continue;
    }
    ncclResult_t r = planAndLaunch(comm);
    if (r != ncclSuccess) result = r;
  }
  return result;
}

ncclResult_t enqueueTask(ncclComm* comm, const Task& task) {
  comm->tasks.push_back(task);
  if (!comm->inGroup) {
    comm->inGroup = true;
    groupComms.push_back(comm);
  }
  if (depth == 0) {
    depth = 1;
    return groupEnd();
  }
  return ncclSuccess;
}

}  // namespace plexus
