#include "p2p.h"

#include <plexus/device/arch.h>

#include <cstring>
#include <vector>

#include "comm/communicator.h"
#include "misc/check.h"
#include "planner/planner.h"

namespace plexus {

namespace {

struct Message {
  char* buf;
  size_t bytes;
  size_t done;
};

// The messages of one connector, in posting order.
struct Queue {
  bool isSend;
  int peer;
  plexusConnInfo_v1_t* conn;
  uint64_t step;
  std::vector<Message> msgs;
  size_t current = 0;
};

char* slot(plexusConnInfo_v1_t* c, uint64_t step) {
  return c->buffs[PLEXUS_PROTO_SIMPLE] + (size_t)(step % PLEXUS_STEPS) * (size_t)c->stepSize;
}

// Moves one slice of the queue's current message if the connector allows it now.
bool progress(Queue& q) {
  Message& m = q.msgs[q.current];
  plexusConnInfo_v1_t* c = q.conn;
  const size_t n = std::min(m.bytes - m.done, (size_t)c->stepSize);
  if (q.isSend) {
    // The peer's head is read only when the credit last seen runs out (see PeerConns::waitSendCredit).
    if (c->headCache + PLEXUS_STEPS < q.step + 1 && (c->headCache = dev::loadAcquire(c->head)) + PLEXUS_STEPS < q.step + 1)
      return false;
    memcpy(slot(c, q.step), m.buf + m.done, n);
    if (c->connFifo) c->connFifo[q.step % PLEXUS_STEPS].size = (int64_t)n;
    dev::storeRelease(c->tail, ++q.step);
  } else {
    if (dev::loadAcquire(c->tail) < q.step + 1) return false;
    memcpy(m.buf + m.done, slot(c, q.step), n);
    if (c->connFifo) c->connFifo[q.step % PLEXUS_STEPS].size = PLEXUS_CONNFIFO_FREE;
    dev::storeRelease(c->head, ++q.step);
  }
  m.done += n;
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
      queues.push_back(Queue{isSend, w->peer, &connector.conn, connector.conn.step, {}, 0});
      q = &queues.back();
    }
    q->msgs.push_back(Message{isSend ? (char*)w->sendbuff : (char*)w->recvbuff, bytes, 0});
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
    if (selfRecvs[i]->recvbuff != selfSends[i]->sendbuff)
      memmove(selfRecvs[i]->recvbuff, selfSends[i]->sendbuff, sendBytes);
  }

  plexusDevChannel_v1_t& ch = comm->channels.dev[0];
  size_t pending = 0;
  for (Queue& q : queues) pending += q.msgs.size();
  uint64_t waitStart = 0;
  for (uint32_t iter = 0; pending > 0;) {
    bool moved = false;
    pending = 0;
    for (Queue& q : queues) {
      // A queue moves until its connector runs out of credit (sends) or data (receives).
      while (q.current < q.msgs.size() && progress(q)) moved = true;
      pending += q.msgs.size() - q.current;
    }
    if (moved) {
      iter = 0;
      waitStart = 0;
      continue;
    }
    if ((++iter & 63) == 0) {
      if (comm->abortFlag) {
        ch.status = PLEXUS_CHANNEL_ABORTED;
        break;
      }
      uint64_t now = dev::clockNs();
      if (!waitStart) {
        waitStart = now;
      } else if (comm->devComm.timeoutNs && now - waitStart > comm->devComm.timeoutNs) {
        ch.status = PLEXUS_CHANNEL_TIMEOUT;
        break;
      }
    }
    dev::backoff(iter, comm->devComm.spinPolls);
  }
  for (Queue& q : queues) q.conn->step = q.step;
  if (pending == 0) return ncclSuccess;
  for (Queue& q : queues)
    if (q.current < q.msgs.size()) {
      ch.waitPeer = q.peer;
      ch.waitIsSend = q.isSend;
      break;
    }
  return ch.status == PLEXUS_CHANNEL_TIMEOUT ? ncclTimeout : ncclRemoteError;
}

}  // namespace plexus
