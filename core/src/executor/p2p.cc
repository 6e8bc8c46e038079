#include "p2p.h"

#include <plexus/device/arch.h>
#include <plexus/device/primitives.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <unistd.h>

#include "comm/communicator.h"
#include "comm/memory.h"
#include "misc/check.h"
#include "planner/planner.h"
#include "transport/peer_memory.h"

namespace plexus {

namespace {

struct Message {
  char* buf;
  size_t bytes;
  size_t done;
  enum class Mode { Slots, Negotiate, Direct } mode;
  char* dst;  // Direct, send side: where the receiver wants the bytes
};

// The messages of one connector, in posting order.
struct Queue {
  bool isSend;
  int peer;
  bool sameProcess;
  plexusConnInfo_v1_t* conn;
  uint64_t step;
  std::vector<Message> msgs;
  size_t current = 0;
};

char* slot(plexusConnInfo_v1_t* c, uint64_t step) {
  return c->buffs[PLEXUS_PROTO_SIMPLE] + (size_t)(step % PLEXUS_STEPS) * (size_t)c->stepSize;
}

// The receiver's side of a large message: where the sender should write it. Same process: the buffer
// itself; another process: the buffer's place in registered ncclMemAlloc memory, else the buffer's
// address for process_vm_writev; elsewhere the slots.
void describeDestination(ncclComm* comm, const Queue& q, const Message& m, plexusPtrExchange_v1_t* x) {
  x->kind = PLEXUS_XCHG_SLOTS;
  x->size = m.bytes;
  MemAllocation a;
  if (q.sameProcess) {
    x->kind = PLEXUS_XCHG_ADDRESS;
    x->addr = (uint64_t)(uintptr_t)m.buf;
  } else if (registeredShareable(comm, m.buf, m.bytes, &a)) {
    x->kind = PLEXUS_XCHG_MEMFD;
    x->pid = (uint64_t)getpid();
    x->fd = (uint64_t)a.fd;
    x->offset = (uint64_t)(m.buf - (char*)a.base);
    x->serial = a.serial;
  } else if (cmaOffered(comm, q.peer)) {
    x->kind = PLEXUS_XCHG_CMA;
    x->pid = (uint64_t)getpid();
    x->addr = (uint64_t)(uintptr_t)m.buf;
  }
}

// Moves the queue's current message on if the connector allows it now: one slice, or the whole
// message once zero-copy is agreed. Returns false when nothing could move; *err on a failure.
bool progress(ncclComm* comm, Queue& q, ncclResult_t* err) {
  Message& m = q.msgs[q.current];
  plexusConnInfo_v1_t* c = q.conn;
  plexusPtrExchange_v1_t* x = c->ptrExchange;
  if (m.mode == Message::Mode::Negotiate) {
    if (q.isSend) {
      // Wait for the receiver's record for this step, then write where it says (or use the slots).
      if (dev::loadAcquire(&x->seq) != q.step + 1) return false;
      if (x->kind == PLEXUS_XCHG_SLOTS) {
        m.mode = Message::Mode::Slots;
        return true;
      }
      if (x->size != m.bytes) {
        *err = setError(comm, ncclInvalidUsage,
                        "rank %d: a send of %zu bytes to rank %d meets a receive of %llu bytes; counts must match",
                        comm->rank, m.bytes, q.peer, (unsigned long long)x->size);
        return false;
      }
      if (x->kind == PLEXUS_XCHG_CMA) {
        if (!cmaWrite(x->pid, x->addr, m.buf, m.bytes)) {
          // Refused (ptrace rules, another user): say so through the record, spend the step on it, and
          // go on through the slots.
          INFO(NCCL_P2P, "rank %d: process_vm_writev into rank %d failed (%s); its messages go through the "
               "slots from now on", comm->rank, q.peer, strerror(errno));
          cmaRefuse(comm, q.peer);
          x->kind = PLEXUS_XCHG_SLOTS;
          dev::storeRelease(c->tail, ++q.step);
          m.mode = Message::Mode::Slots;
          return true;
        }
        dev::storeRelease(c->tail, ++q.step);
        m.done = m.bytes;
        q.current++;
        return true;
      }
      if (x->kind == PLEXUS_XCHG_ADDRESS) m.dst = (char*)(uintptr_t)x->addr;
      else if ((*err = peerMemoryDestination(comm, q.peer, *x, &m.dst)) != ncclSuccess) return false;
      memcpy(m.dst, m.buf, m.bytes);
      dev::storeRelease(c->tail, ++q.step);
    } else {
      plexusPtrExchange_v1_t d{};
      describeDestination(comm, q, m, &d);
      x->kind = d.kind;
      x->addr = d.addr;
      x->size = d.size;
      x->pid = d.pid;
      x->fd = d.fd;
      x->offset = d.offset;
      x->serial = d.serial;
      dev::storeRelease(&x->seq, q.step + 1);
      m.mode = d.kind == PLEXUS_XCHG_SLOTS ? Message::Mode::Slots : Message::Mode::Direct;
      return true;
    }
    m.done = m.bytes;
    q.current++;
    return true;
  }
  if (m.mode == Message::Mode::Direct) {  // receive side: the sender's write is complete at tail
    if (dev::loadAcquire(c->tail) < q.step + 1) return false;
    dev::storeRelease(c->head, ++q.step);
    // The sender could not write into us (CMA refused): the message goes through the slots.
    if (__atomic_load_n(&x->kind, __ATOMIC_RELAXED) == PLEXUS_XCHG_SLOTS) {
      cmaRefuse(comm, q.peer);
      m.mode = Message::Mode::Slots;
      return true;
    }
    comm->p2pZeroCopyBytes.fetch_add(m.bytes, std::memory_order_relaxed);
    m.done = m.bytes;
    q.current++;
    return true;
  }
  const size_t n = std::min(m.bytes - m.done, (size_t)c->stepSize);
  if (q.isSend) {
    // The peer's head is read only when the credit last seen runs out (see PeerConns::waitSendCredit).
    if (c->headCache + PLEXUS_STEPS < q.step + 1 && (c->headCache = dev::loadAcquire(c->head)) + PLEXUS_STEPS < q.step + 1)
      return false;
    memcpy(slot(c, q.step), m.buf + m.done, n);
    if (c->connFifo) c->connFifo[q.step % PLEXUS_STEPS].size = (int64_t)n;
    dev::storeRelease(c->tail, ++q.step);
  } else {
    // The slices of the message still to come (a proxy posts receives for these alone).
    dev::wantRecv(c, q.step + std::min<size_t>(PLEXUS_STEPS, std::max<size_t>(1, (m.bytes - m.done + c->stepSize - 1) / c->stepSize)));
    if (dev::loadAcquire(c->tail) < q.step + 1) return false;
    memcpy(m.buf + m.done, slot(c, q.step), n);
    if (c->connFifo) c->connFifo[q.step % PLEXUS_STEPS].size = PLEXUS_CONNFIFO_FREE;
    dev::storeRelease(c->head, ++q.step);
  }
  m.done += n;
  if (!q.isSend) comm->p2pSlotBytes.fetch_add(n, std::memory_order_relaxed);
  if (m.done == m.bytes) q.current++;
  return true;
}

}  // namespace

ncclResult_t runP2p(ncclComm* comm, const plexusDevWork_v1_t* const* works, int n) {
  std::vector<Queue> queues;
  std::vector<const plexusDevWork_v1_t*> selfSends, selfRecvs;
  for (int i = 0; i < n; i++) {
    const plexusDevWork_v1_t* w = works[i];
    const bool isSend = w->func == ncclFuncSend;
    const size_t bytes = w->count * typeSize((ncclDataType_t)w->datatype);
    if (w->peer == comm->rank) {
      (isSend ? selfSends : selfRecvs).push_back(w);
      continue;
    }
    Queue* q = nullptr;
    for (Queue& e : queues)
      if (e.peer == w->peer && e.isSend == isSend) q = &e;
    if (!q) {
      plexusDevChannelPeer_v1_t& peer = comm->channels.peers[0][w->peer];
      plexusDevConnector_v1_t& connector = isSend ? peer.send : peer.recv;
      if (!connector.connected)
        return setError(comm, ncclInternalError, "rank %d: no %s connector with rank %d for point-to-point",
                        comm->rank, isSend ? "send" : "recv", w->peer);
      const bool sameProcess = comm->peerInfo[w->peer].pidHash == comm->peerInfo[comm->rank].pidHash;
      queues.push_back(Queue{isSend, w->peer, sameProcess, &connector.conn, connector.conn.step, {}, 0});
      q = &queues.back();
    }
    // Both sides take the same path by the same rule: the message's size and the transport.
    const bool negotiate = bytes >= kZeroCopyMinBytes && q->conn->ptrExchange;
    q->msgs.push_back(Message{isSend ? (char*)w->sendbuff : (char*)w->recvbuff, bytes, 0,
                              negotiate ? Message::Mode::Negotiate : Message::Mode::Slots, nullptr});
  }
  if (selfSends.size() != selfRecvs.size())
    return setError(comm, ncclInvalidUsage, "rank %d: %zu send(s) to itself but %zu receive(s) from itself in one group",
                    comm->rank, selfSends.size(), selfRecvs.size());
  for (size_t i = 0; i < selfSends.size(); i++) {
    size_t sendBytes = selfSends[i]->count * typeSize((ncclDataType_t)selfSends[i]->datatype);
    size_t recvBytes = selfRecvs[i]->count * typeSize((ncclDataType_t)selfRecvs[i]->datatype);
    if (sendBytes != recvBytes)
      return setError(comm, ncclInvalidUsage, "rank %d: a send of %zu bytes to itself meets a receive of %zu bytes",
                      comm->rank, sendBytes, recvBytes);
  }
  // This rank's own copies wait for the first pass over the queues: by then the receives have told their
  // senders where to write, so the peers' copies into this rank overlap with these.
  bool selfCopied = false;
  auto copySelf = [&] {
    selfCopied = true;
    for (size_t i = 0; i < selfSends.size(); i++)
      if (selfRecvs[i]->recvbuff != selfSends[i]->sendbuff)
        memmove(selfRecvs[i]->recvbuff, selfSends[i]->sendbuff,
                selfSends[i]->count * typeSize((ncclDataType_t)selfSends[i]->datatype));
  };

  plexusDevChannel_v1_t& ch = comm->channels.dev[0];
  size_t pending = 0;
  for (Queue& q : queues) pending += q.msgs.size();
  uint64_t waitStart = 0;
  ncclResult_t err = ncclSuccess;
  for (uint32_t iter = 0; pending > 0;) {
    bool moved = false;
    pending = 0;
    for (Queue& q : queues) {
      // A queue moves until its connector runs out of credit (sends) or data (receives).
      while (q.current < q.msgs.size() && progress(comm, q, &err)) moved = true;
      if (err != ncclSuccess) {
        for (Queue& e : queues) e.conn->step = e.step;
        return err;
      }
      pending += q.msgs.size() - q.current;
    }
    if (!selfCopied) copySelf();
    if (moved) {
      iter = 0;
      if (waitStart) dev::storeRelaxed(&ch.waitPeer, -1);
      waitStart = 0;
      continue;
    }
    if ((++iter & 63) == 0) {
      if (dev::loadRelaxed(&comm->abortFlag)) {
        dev::storeRelaxed(&ch.status, PLEXUS_CHANNEL_ABORTED);
        break;
      }
      uint64_t now = dev::clockNs();
      if (!waitStart) {
        waitStart = now;
        // Say on whom it waits (watchdog, hang reports): the first message that cannot move.
        for (Queue& q : queues)
          if (q.current < q.msgs.size()) {
            dev::storeRelaxed(&ch.waitSince, now);
            dev::storeRelaxed(&ch.waitIsSend, q.isSend);
            dev::storeRelaxed(&ch.waitPeer, q.peer);
            break;
          }
      } else if (comm->devComm.timeoutNs && now - waitStart > comm->devComm.timeoutNs) {
        dev::storeRelaxed(&ch.status, PLEXUS_CHANNEL_TIMEOUT);
        break;
      }
    }
    dev::backoff(iter, comm->devComm.spinPolls);
  }
  for (Queue& q : queues) q.conn->step = q.step;
  if (!selfCopied) copySelf();  // nothing but copies to itself
  if (pending == 0) {
    if (waitStart) dev::storeRelaxed(&ch.waitPeer, -1);
    return ncclSuccess;
  }
  for (Queue& q : queues)
    if (q.current < q.msgs.size()) {
      dev::storeRelaxed(&ch.waitIsSend, q.isSend);
      dev::storeRelaxed(&ch.waitPeer, q.peer);
      break;
    }
  return ch.status == PLEXUS_CHANNEL_TIMEOUT ? ncclTimeout : ncclRemoteError;
}

}  // namespace plexus
