// Host scheduling (layer 2): the thread-local group. Operations called between ncclGroupStart and
// the outermost ncclGroupEnd are collected as tasks on their communicators and planned and launched
// together at the end; an operation outside any group is an implicit group of one.
#pragma once

#include <nccl.h>
#include <plexus/device_v1.h>

#include <cstddef>
#include <cstdint>
#include <functional>

struct ncclComm;

namespace plexus {

struct Task {
  ncclFunc_t func;
  const void* sendbuff;
  void* recvbuff;
  size_t count;  // NCCL's count for func
  ncclDataType_t datatype;
  ncclRedOp_t userOp;
  plexusDevRedOp_t devOp;
  uint64_t redOpArg;
  bool redOpArgIsPtr;  // redOpArg is the address of the scalar (ncclScalarDevice)
  int root;
  int peer;
  // The operation's stream as the device seam takes it: the application's (CUDA), or the host stream it names, its
  // device's default stream for NULL (host).
  cudaStream_t stream;
  // Nonzero on the sends and receives of one collective lowered to point-to-point (planner.cc): a launch
  // takes them all or none, as every rank splits its launches at the same places.
  uint32_t unit;
  const char* loweredBy;  // on those: why the tuner gave the collective to algo-p2p (an interned reason)
  void* profApi;  // the operation's CollApi/P2pApi profiler event: its Coll/P2p events' parent (NULL: none)
};

ncclResult_t groupStart();
ncclResult_t groupEnd();
int groupDepth();
// An operation of the open group was refused: the group's ncclGroupEnd returns this and launches nothing.
void groupRecordError(ncclResult_t error);

// A communicator whose init was called inside a group: its init runs in the background and the
// outermost ncclGroupEnd waits for it (unless it is nonblocking), as NCCL lets one thread create
// several communicators between ncclGroupStart and ncclGroupEnd.
void groupAddInit(ncclComm* comm);
// Drops comm from this thread's open group (ncclCommAbort / ncclCommDestroy inside a group).
void groupForget(ncclComm* comm);

// Work of a collective management call made inside a group that has no communicator of its own to
// carry it (ncclCommSplit with NCCL_SPLIT_NOCOLOR still takes part in the parent's exchange): it runs
// on a thread of its own at once, and the outermost ncclGroupEnd waits for it and returns its error.
void groupAddJob(std::function<ncclResult_t()> job);
// An operation made inside a group that goes on a stream at the outermost ncclGroupEnd (the one-sided calls): run
// there in call order, on the calling thread, after the group's collectives are launched; dropped when the group
// fails or is only simulated.
void groupAddDeferred(std::function<ncclResult_t()> op);

// ncclGroupSimulateEnd: ends the group as ncclGroupEnd does (communicators created in it are waited
// for), but launches nothing: the collected operations are costed with the algorithms' models and
// dropped. *estimatedUs: the slowest communicator's sum, in microseconds.
ncclResult_t groupSimulateEnd(float* estimatedUs);

// The profiler's GroupApi event of this thread's open group (NULL: none): the parent of its API and launch events.
void* groupApiEvent();

// Adds a validated task to comm; plans and launches at once when no group is open.
ncclResult_t enqueueTask(ncclComm* comm, const Task& task);

}  // namespace plexus
