// The collective and point-to-point entry points: validate NCCL's arguments, turn each call into
// tasks of the thread's group. AlltoAll, Gather and Scatter become grouped sends and receives, as in
// NCCL 2.28.
#include <nccl.h>
#include <plexus.h>
#include <plexus/device/reduce.h>

#include <cstring>

#include "comm/communicator.h"
#include "device/runtime.h"
#include "group/group.h"
#include "misc/check.h"
#include "planner/planner.h"
#include "stream/host_stream.h"

using namespace plexus;

#define NCCL_API(ret, func, ...)                                                                            \
  extern "C" __attribute__((visibility("default"))) __attribute__((alias(#func))) ret p##func(__VA_ARGS__); \
  extern "C" __attribute__((visibility("default"))) __attribute__((weak)) ret func(__VA_ARGS__)

namespace {

// Refuses an operation: inside a group the group's ncclGroupEnd fails too, as with NCCL.
ncclResult_t refuse(ncclResult_t r) {
  groupRecordError(r);
  return r;
}

// The kernel-side operator for a user op: ncclAvg is a pre-multiplication by 1/n for floating types
// and a post-division by n for integers; ops from ncclRedOpCreatePreMulSum carry their scalar. The op is the
// caller's integer, unchecked (as the datatype in checkCommon).
struct DeviceRedOp {
  plexusDevRedOp_t devOp = plexusDevSum;
  uint64_t redOpArg = 0;
  bool redOpArgIsPtr = false;
};
ncclResult_t deviceRedOp(ncclComm* comm, const char* api, int op, ncclDataType_t type, DeviceRedOp* t) {
  switch (op) {
    case ncclSum: t->devOp = plexusDevSum; return ncclSuccess;
    case ncclProd: t->devOp = plexusDevProd; return ncclSuccess;
    case ncclMax: t->devOp = plexusDevMax; return ncclSuccess;
    case ncclMin: t->devOp = plexusDevMin; return ncclSuccess;
    case ncclAvg: break;
    default: {
      // Another thread may create or destroy an op meanwhile (the vector may grow).
      std::lock_guard<std::mutex> lock(comm->userOpsMutex);
      int idx = op - ncclNumOps;
      if (idx < 0 || idx >= (int)comm->userOps.size() || !comm->userOps[idx].live)
        return setError(comm, ncclInvalidArgument,
                        "%s: reduction op %d is neither a built-in ncclRedOp_t (0..%d) nor a live op of this "
                        "communicator from ncclRedOpCreatePreMulSum", api, op, ncclNumOps - 1);
      const UserRedOp& u = comm->userOps[idx];
      if (u.datatype != type)
        return setError(comm, ncclInvalidArgument, "%s: reduction op %d was created for datatype %d, not %d", api,
                        op, (int)u.datatype, (int)type);
      t->devOp = plexusDevPreMulSum;
      t->redOpArgIsPtr = u.residence == ncclScalarDevice;
      t->redOpArg = t->redOpArgIsPtr ? (uint64_t)(uintptr_t)u.scalarPtr : u.scalarBits;
      return ncclSuccess;
    }
  }
  const float inv = 1.0f / (float)comm->nRanks;
  switch (type) {
    case ncclFloat32: t->devOp = plexusDevPreMulSum; t->redOpArg = dev::floatBits(inv); break;
    case ncclFloat64: {
      double d = 1.0 / comm->nRanks;
      t->devOp = plexusDevPreMulSum;
      memcpy(&t->redOpArg, &d, sizeof(d));
      break;
    }
    case ncclFloat16: t->devOp = plexusDevPreMulSum; t->redOpArg = dev::fromFloat<dev::half_t>(inv).bits; break;
    case ncclBfloat16: t->devOp = plexusDevPreMulSum; t->redOpArg = dev::fromFloat<dev::bf16_t>(inv).bits; break;
    case ncclFloat8e4m3: t->devOp = plexusDevPreMulSum; t->redOpArg = dev::fromFloat<dev::fp8e4m3_t>(inv).bits; break;
    case ncclFloat8e5m2: t->devOp = plexusDevPreMulSum; t->redOpArg = dev::fromFloat<dev::fp8e5m2_t>(inv).bits; break;
    default: t->devOp = plexusDevSumPostDiv; t->redOpArg = (uint64_t)comm->nRanks; break;
  }
  return ncclSuccess;
}

// Checks shared by every operation; *opStream: the stream as a Task holds it. Buffers are checked by the caller, since which
// of them must be valid depends on the operation and the rank. perRank: a buffer holds count elements for each rank
// (AllGather's output, AlltoAll's), which must fit the address space too.
// The datatype is the caller's integer until checked: a C caller may pass any value, which C++ may not
// hold in an ncclDataType_t.
ncclResult_t checkCommon(ncclComm* comm, const char* api, size_t count, bool perRank, int datatype, cudaStream_t stream,
                         cudaStream_t* opStream) {
  NCCLCHECK(checkComm(comm, api));
  if (datatype < 0 || datatype >= ncclNumTypes)
    return setError(comm, ncclInvalidArgument, "%s: invalid datatype %d (valid: 0..%d)", api, datatype,
                    ncclNumTypes - 1);
  size_t elem = typeSize((ncclDataType_t)datatype), bytes;
  if (__builtin_mul_overflow(count, elem, &bytes) ||
      (perRank && __builtin_mul_overflow(bytes, (size_t)comm->nRanks, &bytes)))
    return setError(comm, ncclInvalidArgument, "%s: count %zu of %zu-byte elements overflows the address space", api,
                    count, elem);
  if (comm->backend == plexusBackendHost) {
    *opStream = reinterpret_cast<cudaStream_t>(hostStreamOf(stream, comm->device));
    if (!*opStream)
      return setError(comm, ncclInvalidArgument,
                      "%s: stream %p is not a Plexus host stream; on the host backend create streams with "
                      "plexusStreamCreate (or pass NULL for the default stream)", api, (void*)stream);
  } else {
    *opStream = stream;
  }
  ncclResult_t async = comm->asyncError.load();
  if (async != ncclSuccess)
    return setError(comm, ncclInvalidUsage, "%s: the communicator has failed earlier (%s: %s); abort it", api,
                    ncclGetErrorString(async), lastError(comm));
  return ncclSuccess;
}

// The task of an operation whose arguments checkCommon accepted. Built only for an operation that moves data: a
// 0-element call, which a benchmark's smallest sizes make on many ranks, costs its checks alone.
Task checkedTask(ncclFunc_t func, size_t count, int datatype, cudaStream_t opStream) {
  Task t{};
  t.func = func;
  t.count = count;
  t.datatype = (ncclDataType_t)datatype;
  t.stream = opStream;
  t.root = t.peer = -1;
  t.devOp = plexusDevSum;
  return t;
}

ncclResult_t checkRoot(ncclComm* comm, const char* api, int root) {
  if (root < 0 || root >= comm->nRanks)
    return setError(comm, ncclInvalidArgument, "%s: root %d is out of range [0, %d)", api, root, comm->nRanks);
  return ncclSuccess;
}

// A buffer the operation reads or writes: not NULL, and memory the communicator's device can use.
ncclResult_t checkBuffer(ncclComm* comm, const char* api, const char* name, const void* buf, size_t count) {
  if (count > 0 && !buf) return setError(comm, ncclInvalidArgument, "%s: %s is NULL with count %zu", api, name, count);
  return count > 0 ? checkPointer(comm, api, name, buf) : ncclSuccess;
}

struct CollArgs {
  const char* api;
  ncclFunc_t func;
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  int datatype;  // unchecked (checkCommon)
  int op;        // unchecked (deviceRedOp); ncclSum where the collective does not reduce
  int root;
  bool reduces;
  ncclComm_t comm;
  cudaStream_t stream;
};

// One rank on a GPU: every collective but a scaling one leaves the input as it is, so the copy engines move it
// (cuMemcpyAsync runs at the GPU's copy bandwidth; a kernel's few blocks reach a fraction of it). At once, inside a
// group too, as NCCL does for one rank. False where a kernel must run (PreMulSum scales, the host backend).
bool oneRankCopy(ncclComm* comm, const Task& t, ncclResult_t* r) {
  if (comm->nRanks != 1 || comm->backend != plexusBackendCuda) return false;
  switch (t.func) {
    case ncclFuncBroadcast:
    case ncclFuncAllGather: break;
    case ncclFuncAllReduce:
    case ncclFuncReduce:
    case ncclFuncReduceScatter:
      if (t.devOp == plexusDevPreMulSum) return false;
      break;
    default: return false;
  }
  *r = ncclSuccess;
  if (t.sendbuff == t.recvbuff) return true;
  DeviceGuard device(comm);
  if (comm->runtime->copyAsync(t.recvbuff, t.sendbuff, t.count * typeSize(t.datatype), t.stream) != ncclSuccess)
    *r = setError(comm, ncclUnhandledCudaError, "rank 0: the one-rank %s of %zu bytes could not be enqueued: %s",
                  funcName(t.func), t.count * typeSize(t.datatype), comm->runtime->lastError().c_str());
  return true;
}

// The buffers a collective reads or writes on this rank: both, or one of them on the root only.
enum class Buffers { Both, SendOnRoot, RecvOnRoot };

// comm, its rank and its size are read only once checkCommon found comm live.
ncclResult_t collective(const CollArgs& a, Buffers buffers = Buffers::Both, bool perRank = false) {
  ncclComm* comm = a.comm;
  cudaStream_t stream = nullptr;
  ncclResult_t r = checkCommon(comm, a.api, a.count, perRank, a.datatype, a.stream, &stream);
  if (r == ncclSuccess && (a.func == ncclFuncBroadcast || a.func == ncclFuncReduce)) r = checkRoot(comm, a.api, a.root);
  const bool root = r == ncclSuccess && comm->rank == a.root;
  if (r == ncclSuccess && (buffers != Buffers::SendOnRoot || root))
    r = checkBuffer(comm, a.api, "sendbuff", a.sendbuff, a.count);
  if (r == ncclSuccess && (buffers != Buffers::RecvOnRoot || root))
    r = checkBuffer(comm, a.api, "recvbuff", a.recvbuff, a.count);
  DeviceRedOp op;
  if (r == ncclSuccess && a.reduces) r = deviceRedOp(comm, a.api, a.op, (ncclDataType_t)a.datatype, &op);
  if (r != ncclSuccess) return refuse(r);
  if (a.count == 0) return ncclSuccess;  // nothing moves; NCCL returns at once too
  Task t = checkedTask(a.func, a.count, a.datatype, stream);
  t.sendbuff = a.sendbuff;
  t.recvbuff = a.recvbuff;
  t.userOp = (ncclRedOp_t)a.op;
  t.devOp = op.devOp;
  t.redOpArg = op.redOpArg;
  t.redOpArgIsPtr = op.redOpArgIsPtr;
  t.root = a.root;
  if (ncclResult_t copied; oneRankCopy(comm, t, &copied)) return copied == ncclSuccess ? copied : refuse(copied);
  return enqueueTask(comm, t);
}

// A send or receive whose arguments were checked: checked is checkedTask's (stream, datatype, count).
ncclResult_t enqueueP2p(ncclComm* comm, const Task& checked, ncclFunc_t func, const void* buff, int peer) {
  Task t = checked;
  t.func = func;
  t.sendbuff = func == ncclFuncSend ? buff : nullptr;
  t.recvbuff = func == ncclFuncRecv ? const_cast<void*>(buff) : nullptr;
  t.peer = peer;
  return enqueueTask(comm, t);
}

// Send or Recv of count elements with peer; part of a group of such calls.
ncclResult_t p2p(const char* api, ncclFunc_t func, const void* buff, size_t count, ncclDataType_t datatype, int peer,
                 ncclComm_t comm, cudaStream_t stream) {
  cudaStream_t opStream = nullptr;
  ncclResult_t r = checkCommon(comm, api, count, false, datatype, stream, &opStream);
  if (r == ncclSuccess && (peer < 0 || peer >= comm->nRanks))
    r = setError(comm, ncclInvalidArgument, "%s: peer %d is out of range [0, %d)", api, peer, comm->nRanks);
  if (r == ncclSuccess) r = checkBuffer(comm, api, func == ncclFuncSend ? "sendbuff" : "recvbuff", buff, count);
  if (r != ncclSuccess) return refuse(r);
  if (count == 0) return ncclSuccess;
  return enqueueP2p(comm, checkedTask(func, count, datatype, opStream), func, buff, peer);
}

// Runs fn inside a group of its own, so that the sends and receives it enqueues launch together.
template <typename Fn>
ncclResult_t grouped(Fn&& fn) {
  groupStart();
  ncclResult_t r = fn();
  if (r != ncclSuccess) groupRecordError(r);
  ncclResult_t e = groupEnd();
  return r != ncclSuccess ? r : e;
}

}  // namespace

NCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return collective({"ncclAllReduce", ncclFuncAllReduce, sendbuff, recvbuff, count, datatype, op, 0, true, comm, stream});
}

NCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return collective({"ncclBroadcast", ncclFuncBroadcast, sendbuff, recvbuff, count, datatype, ncclSum, root, false,
                     comm, stream}, Buffers::SendOnRoot);
}

NCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
         cudaStream_t stream);
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

NCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return collective({"ncclReduce", ncclFuncReduce, sendbuff, recvbuff, count, datatype, op, root, true, comm, stream},
                    Buffers::RecvOnRoot);
}

NCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
         ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return collective({"ncclAllGather", ncclFuncAllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, false,
                     comm, stream}, Buffers::Both, true);
}

NCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return collective({"ncclReduceScatter", ncclFuncReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, true,
                     comm, stream}, Buffers::Both, true);
}

NCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return p2p("ncclSend", ncclFuncSend, sendbuff, count, datatype, peer, comm, stream);
}

NCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
         cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return p2p("ncclRecv", ncclFuncRecv, recvbuff, count, datatype, peer, comm, stream);
}

NCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                          cudaStream_t stream) {
  cudaStream_t opStream = nullptr;
  ncclResult_t r = checkCommon(comm, "ncclAlltoAll", count, true, datatype, stream, &opStream);
  if (r == ncclSuccess) r = checkBuffer(comm, "ncclAlltoAll", "sendbuff", sendbuff, count);
  if (r == ncclSuccess) r = checkBuffer(comm, "ncclAlltoAll", "recvbuff", recvbuff, count);
  if (r == ncclSuccess && count > 0 && sendbuff == recvbuff)
    r = setError(comm, ncclInvalidArgument, "ncclAlltoAll: in-place operation (sendbuff == recvbuff) is not supported");
  if (r != ncclSuccess) return refuse(r);
  if (count == 0) return ncclSuccess;  // nothing moves, as for the collectives: no group to open and close
  const size_t bytes = count * typeSize(datatype);
  if (alltoAllAsCollective(comm, bytes)) {
    Task t = checkedTask(ncclFuncAlltoAll, count, datatype, opStream);
    t.sendbuff = sendbuff;
    t.recvbuff = recvbuff;
    return enqueueTask(comm, t);
  }
  const Task probe = checkedTask(ncclFuncSend, count, datatype, opStream);  // checked once: each part is a copy
  return grouped([&]() -> ncclResult_t {
    for (int p = 0; p < comm->nRanks; p++) {
      NCCLCHECK(enqueueP2p(comm, probe, ncclFuncSend, (const char*)sendbuff + p * bytes, p));
      NCCLCHECK(enqueueP2p(comm, probe, ncclFuncRecv, (char*)recvbuff + p * bytes, p));
    }
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
         ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  cudaStream_t opStream = nullptr;
  ncclResult_t r = checkCommon(comm, "ncclGather", count, true, datatype, stream, &opStream);
  if (r == ncclSuccess) r = checkRoot(comm, "ncclGather", root);
  if (r == ncclSuccess) r = checkBuffer(comm, "ncclGather", "sendbuff", sendbuff, count);
  if (r == ncclSuccess && comm->rank == root) r = checkBuffer(comm, "ncclGather", "recvbuff", recvbuff, count);
  if (r != ncclSuccess) return refuse(r);
  if (count == 0) return ncclSuccess;
  const size_t bytes = count * typeSize(datatype);
  const Task probe = checkedTask(ncclFuncSend, count, datatype, opStream);
  return grouped([&]() -> ncclResult_t {
    if (comm->rank == root)
      for (int p = 0; p < comm->nRanks; p++)
        NCCLCHECK(enqueueP2p(comm, probe, ncclFuncRecv, (char*)recvbuff + p * bytes, p));
    return enqueueP2p(comm, probe, ncclFuncSend, sendbuff, root);
  });
}

NCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  cudaStream_t opStream = nullptr;
  ncclResult_t r = checkCommon(comm, "ncclScatter", count, true, datatype, stream, &opStream);
  if (r == ncclSuccess) r = checkRoot(comm, "ncclScatter", root);
  if (r == ncclSuccess) r = checkBuffer(comm, "ncclScatter", "recvbuff", recvbuff, count);
  if (r == ncclSuccess && comm->rank == root) r = checkBuffer(comm, "ncclScatter", "sendbuff", sendbuff, count);
  if (r != ncclSuccess) return refuse(r);
  if (count == 0) return ncclSuccess;
  const size_t bytes = count * typeSize(datatype);
  const Task probe = checkedTask(ncclFuncSend, count, datatype, opStream);
  return grouped([&]() -> ncclResult_t {
    if (comm->rank == root)
      for (int p = 0; p < comm->nRanks; p++)
        NCCLCHECK(enqueueP2p(comm, probe, ncclFuncSend, (const char*)sendbuff + p * bytes, p));
    return enqueueP2p(comm, probe, ncclFuncRecv, recvbuff, root);
  });
}

NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
         ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  NCCLCHECK(checkComm(comm, "ncclRedOpCreatePreMulSum"));
  if (!op || !scalar)
    return setError(comm, ncclInvalidArgument, "ncclRedOpCreatePreMulSum: %s is NULL", op ? "scalar" : "op");
  if ((int)datatype < 0 || datatype >= ncclNumTypes)
    return setError(comm, ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid datatype %d", (int)datatype);
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
    return setError(comm, ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid residence %d", (int)residence);
  UserRedOp u{};
  u.live = true;
  u.datatype = datatype;
  u.residence = residence;
  u.scalarPtr = scalar;
  if (residence == ncclScalarHostImmediate) memcpy(&u.scalarBits, scalar, typeSize(datatype));
  std::lock_guard<std::mutex> lock(comm->userOpsMutex);
  for (size_t i = 0; i < comm->userOps.size(); i++)
    if (!comm->userOps[i].live) {
      comm->userOps[i] = u;
      *op = (ncclRedOp_t)(ncclNumOps + i);
      return ncclSuccess;
    }
  if (comm->userOps.size() >= 1024)
    return setError(comm, ncclInvalidUsage, "ncclRedOpCreatePreMulSum: 1024 operators exist; destroy some first");
  comm->userOps.push_back(u);
  *op = (ncclRedOp_t)(ncclNumOps + comm->userOps.size() - 1);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm);
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  NCCLCHECK(checkComm(comm, "ncclRedOpDestroy"));
  int idx = (int)op - ncclNumOps;
  std::lock_guard<std::mutex> lock(comm->userOpsMutex);
  if ((int)op < ncclNumOps)
    return setError(comm, ncclInvalidArgument, "ncclRedOpDestroy: op %d is built in and cannot be destroyed", (int)op);
  if (idx >= (int)comm->userOps.size() || !comm->userOps[idx].live)
    return setError(comm, ncclInvalidArgument, "ncclRedOpDestroy: op %d is not a live op of this communicator",
                    (int)op);
  comm->userOps[idx].live = false;
  return ncclSuccess;
}
