// ncclCommSuspend / ncclCommResume / ncclCommMemStats: a communicator between phases gives its connection buffers'
// memory back to the system and keeps everything else (connections, mappings, counters), so resuming costs nothing
// but the page faults of the next operations.
//
// The buffers are released by dropping their pages (MADV_REMOVE for shared memory, which frees them for every process
// mapping them; MADV_DONTNEED for private memory): the mappings stay valid and read zeros, and a buffer's contents
// only matter between a sender's write and the receiver's read, which suspend checks are done. A net connection's
// registration with its plugin is dropped first and made again at resume.
#include <nccl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>

#include "comm/communicator.h"
#include "misc/check.h"
#include <plexus/device/arch.h>
#include <plexus/device/primitives.h>
#include "planner/launch.h"
#include "transport/net/net_transport.h"
#include "transport/rma.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

using namespace plexus;

#define NCCL_API(ret, func, ...)                                                                            \
  extern "C" __attribute__((visibility("default"))) __attribute__((alias(#func))) ret p##func(__VA_ARGS__); \
  extern "C" __attribute__((visibility("default"))) __attribute__((weak)) ret func(__VA_ARGS__)

namespace {

size_t pageSize() {
  static const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return page;
}

// One buffer this rank owns, as whole pages (the partial pages at its ends may hold other data).
struct OwnedBuffer {
  char* pages;
  size_t bytes;
  const Connection* connection;
  const plexusConnInfo_v1_t* conn;
};

// Every connector of the communicator: the collectives' ones, then those one-sided puts made (transport/rma.h).
template <class F>
void forEachConnector(ncclComm* comm, F f) {
  for (const Connection& c : comm->channels.connections) {
    plexusDevChannelPeer_v1_t& peer = comm->channels.peers[c.channel][c.peer];
    f(c, c.isSend ? peer.send : peer.recv);
  }
  rmaForEachLink(comm, f);
}

// Every connector's buffer that this rank owns: each receive connector's (peers write into it) and each
// proxy-driven send connector's (the proxy's staging). A shared-memory send connector points into its receiver's
// memory, which the receiver releases.
template <class F>
void forEachOwnedBuffer(ncclComm* comm, F f) {
  forEachConnector(comm, [&](const Connection& c, const plexusDevConnector_v1_t& connector) {
    if ((c.isSend && !c.proxy) || !connector.connected) return;
    const plexusConnInfo_v1_t& conn = connector.conn;
    const size_t sizes[PLEXUS_NUM_PROTOCOLS] = {(size_t)dev::llSlotsOf(&conn) * PLEXUS_LL_SLOT_BYTES, PLEXUS_LL128_BUFF_BYTES,
                                                (size_t)conn.stepSize * PLEXUS_STEPS};
    for (int p = 0; p < PLEXUS_NUM_PROTOCOLS; p++) {
      if (!conn.buffs[p]) continue;
      const uintptr_t lo = ((uintptr_t)conn.buffs[p] + pageSize() - 1) & ~(pageSize() - 1);
      const uintptr_t hi = ((uintptr_t)conn.buffs[p] + sizes[p]) & ~(pageSize() - 1);
      if (hi > lo) f(OwnedBuffer{(char*)lo, hi - lo, &c, &conn});
    }
  });
}

// Why a buffer's contents are still needed, or nullptr: a receive connector holds data its rank has not consumed;
// a proxy-driven send connector holds data its proxy has not sent.
const char* stillNeeded(const OwnedBuffer& b) {
  const uint64_t step = b.conn->step;
  if (!b.connection->isSend) return b.conn->tail && *b.conn->tail > step ? "holds data it sent that this rank has not received" : nullptr;
  return b.conn->head && *b.conn->head < step ? "holds data this rank sent that is not on its way yet" : nullptr;
}

struct Needed {
  OwnedBuffer buffer;
  const char* why;
};
// The first buffer whose contents are still needed (receive buffers alone, or every one).
std::optional<Needed> firstNeeded(ncclComm* comm, bool receivesOnly) {
  std::optional<Needed> first;
  forEachOwnedBuffer(comm, [&](const OwnedBuffer& b) {
    if (first || (receivesOnly && b.connection->isSend)) return;
    if (const char* why = stillNeeded(b)) first = Needed{b, why};
  });
  return first;
}

uint64_t suspendableBytes(ncclComm* comm) {
  uint64_t bytes = 0;
  forEachOwnedBuffer(comm, [&](const OwnedBuffer& b) { bytes += b.bytes; });
  return bytes;
}

// What the communicator keeps while suspended: its work FIFO, its channels' state and the parts of its connection
// buffers that share pages with other data.
uint64_t persistentBytes(ncclComm* comm) {
  uint64_t bytes = comm->workFifo ? (uint64_t)comm->workFifo->capacity() * sizeof(plexusDevWork_v1_t) : 0;
  bytes += comm->channels.dev.size() * sizeof(plexusDevChannel_v1_t);
  for (const auto& peers : comm->channels.peers) bytes += peers.size() * sizeof(plexusDevChannelPeer_v1_t);
  bytes += comm->channels.connections.size() * sizeof(Connection);
  return bytes;
}

}  // namespace

// Local to the rank, once its operations are done: the ranks it exchanges data with suspend at the same point of
// the program (between phases), since a peer that keeps sending writes into the released buffers again.
NCCL_API(ncclResult_t, ncclCommSuspend, ncclComm_t comm, int flags);
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  NCCLCHECK(checkComm(comm, "ncclCommSuspend"));
  if (flags & ~NCCL_SUSPEND_MEM)
    return setError(comm, ncclInvalidArgument, "ncclCommSuspend: flags 0x%x: only NCCL_SUSPEND_MEM (0x1) is defined",
                    flags);
  if (comm->suspended.load())
    return setError(comm, ncclInvalidUsage, "ncclCommSuspend: the communicator is already suspended");
  if (comm->inGroup)
    return setError(comm, ncclInvalidUsage,
                    "ncclCommSuspend: operations of this communicator wait in an open group; end it first");
  if ((flags & NCCL_SUSPEND_MEM) && comm->backend != plexusBackendHost)
    return setError(comm, ncclInvalidUsage,
                    "ncclCommSuspend: NCCL_SUSPEND_MEM releases memory on the host backend only so far; this "
                    "communicator's buffers are GPU memory (suspend without it, or keep the communicator)");
  comm->launcher->waitIdle();
  if (!(flags & NCCL_SUSPEND_MEM)) {
    comm->suspended = true;
    return ncclSuccess;
  }
  // A proxy may still be sending what the last operation handed it, a one-sided put may still be moving: give them
  // the communicator's timeout (at least a second) to finish, then refuse rather than lose data.
  const uint64_t seconds = std::max<uint64_t>(1, comm->devComm.timeoutNs / 1000000000ull);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  NCCLCHECK(rmaSuspendLinks(comm, (double)seconds));
  for (uint32_t polls = 0;; polls++) {
    const std::optional<Needed> busy = firstNeeded(comm, false);
    if (!busy) break;
    const OwnedBuffer& b = busy->buffer;
    if (std::chrono::steady_clock::now() > deadline || !b.connection->isSend) {
      rmaResumeLinks(comm);
      return setError(comm, ncclInvalidUsage,
                      "ncclCommSuspend: rank %d: the connection with rank %d on channel %d %s (step %llu, tail %llu, "
                      "head %llu); suspend when the operations of both ranks are complete", comm->rank,
                      b.connection->peer, b.connection->channel, busy->why, (unsigned long long)b.conn->step,
                      (unsigned long long)(b.conn->tail ? *b.conn->tail : 0),
                      (unsigned long long)(b.conn->head ? *b.conn->head : 0));
    }
    dev::backoff(polls, comm->devComm.spinPolls);
  }
  comm->suspended = true;
  uint64_t released = 0;
  ncclResult_t result = ncclSuccess;
  // The net plugin's registrations go first: one pins the pages it was made on, which the NIC would keep writing.
  forEachConnector(comm, [&](const Connection& c, const plexusDevConnector_v1_t&) {
    if (c.transport && c.transport->api == &netTransport && result == ncclSuccess)
      result = netTransportDeregister(c.resources);
  });
  if (result != ncclSuccess) return result;
  forEachOwnedBuffer(comm, [&](const OwnedBuffer& b) {
    if (madvise(b.pages, b.bytes, MADV_REMOVE) == 0 || madvise(b.pages, b.bytes, MADV_DONTNEED) == 0) {
      released += b.bytes;
    } else if (result == ncclSuccess) {
      result = setError(comm, ncclSystemError, "ncclCommSuspend: rank %d: cannot release %zu bytes at %p: %s",
                        comm->rank, b.bytes, (void*)b.pages, strerror(errno));
    }
  });
  // A peer that sent while the pages went may have lost its data with them (it should have suspended too, or not yet
  // resumed): the communicator cannot be trusted any more.
  if (const std::optional<Needed> late = firstNeeded(comm, true); late && result == ncclSuccess) {
    comm->asyncError = ncclInvalidUsage;
    result = setError(comm, ncclInvalidUsage,
                      "ncclCommSuspend: rank %d: rank %d sent on channel %d while this rank was releasing its buffers; "
                      "that data may be lost and the communicator must be aborted. Suspend every rank at the same "
                      "point of the program, and resume none before all have suspended", comm->rank,
                      late->buffer.connection->peer, late->buffer.connection->channel);
  }
  INFO(NCCL_INIT | NCCL_ALLOC, "ncclCommSuspend: comm %p rank %d released %llu bytes of connection buffers",
       (void*)comm, comm->rank, (unsigned long long)released);
  return result;
}

// The buffers' pages come back at once (not at the next operation's first touch), contents untouched: a peer that
// resumed first may already have written into them.
NCCL_API(ncclResult_t, ncclCommResume, ncclComm_t comm);
ncclResult_t ncclCommResume(ncclComm_t comm) {
  NCCLCHECK(checkComm(comm, "ncclCommResume"));
  if (!comm->suspended.load())
    return setError(comm, ncclInvalidUsage, "ncclCommResume: the communicator is not suspended (ncclCommSuspend)");
  forEachOwnedBuffer(comm, [&](const OwnedBuffer& b) { (void)madvise(b.pages, b.bytes, MADV_POPULATE_WRITE); });
  ncclResult_t result = ncclSuccess;
  forEachConnector(comm, [&](const Connection& c, plexusDevConnector_v1_t& connector) {
    if (c.transport && c.transport->api == &netTransport && result == ncclSuccess)
      result = netTransportReregister(c.resources, &connector.conn);
  });
  NCCLCHECK(result);
  rmaResumeLinks(comm);
  comm->suspended = false;
  return ncclSuccess;
}

// NCCL's categories, for the memory this communicator allocated (host memory on the host backend).
NCCL_API(ncclResult_t, ncclCommMemStats, ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  NCCLCHECK(checkComm(comm, "ncclCommMemStats"));
  if (!value) return setError(comm, ncclInvalidArgument, "ncclCommMemStats: value is NULL");
  switch (stat) {
    case ncclStatGpuMemSuspend: *value = suspendableBytes(comm); break;
    case ncclStatGpuMemSuspended: *value = comm->suspended.load() ? 1 : 0; break;
    case ncclStatGpuMemPersist: *value = persistentBytes(comm); break;
    case ncclStatGpuMemTotal: *value = suspendableBytes(comm) + persistentBytes(comm); break;
    default:
      return setError(comm, ncclInvalidArgument,
                      "ncclCommMemStats: stat %d is not an ncclCommMemStat_t (ncclStatGpuMemSuspend .. "
                      "ncclStatGpuMemTotal)", (int)stat);
  }
  return ncclSuccess;
}
