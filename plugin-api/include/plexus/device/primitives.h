/*
 * Primitives over the Simple protocol: the building blocks of every step loop (send, recv,
 * recvReduceSend, recvReduceCopySend, copySend, recvCopySend, recvReduceCopy). One instance serves
 * one channel's step loop against a set of recv peers and send peers.
 *
 * Handshake per step (NCCL's Simple protocol, nccl-abi.md §5.2): a sender waits for credit
 * (head + PLEXUS_STEPS > step), writes slot step % PLEXUS_STEPS of the receiver's buffer, records
 * the size in connFifo, and publishes tail = step + 1; a receiver waits for tail > step, consumes
 * the slot and publishes head = step + 1. Each call moves its elements in slices of one step.
 */
#ifndef PLEXUS_DEVICE_PRIMITIVES_H_
#define PLEXUS_DEVICE_PRIMITIVES_H_

#include "../device_v1.h"
#include "arch.h"
#include "reduce_copy.h"

namespace plexus::dev {

/* Peers one primitives instance talks to at once: tree arity, or every other rank of a direct algorithm. */
#define PLEXUS_MAX_PRIM_PEERS 8

/* Polls ready() until it holds; false when the communicator aborts or the wait outlives the timeout.
 * The channel then says which (status) and on whom it waited (waitPeer, waitIsSend, waitSince), and
 * every later primitive call returns at once. */
template <typename Ready>
PLEXUS_HD bool waitUntil(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, int peer, int isSend,
                         Ready ready) {
  if (ready()) return true;
  uint64_t start = 0;
  for (uint32_t iter = 0;; iter++) {
    if (ready()) {
      if (start) storeRelaxed(&ch->waitPeer, -1);
      return true;
    }
    if ((iter & 63) == 63) {
      if (loadRelaxed(comm->abortFlag)) {
        storeRelaxed(&ch->status, PLEXUS_CHANNEL_ABORTED);
        return false;
      }
      uint64_t now = clockNs();
      if (!start) {
        start = now;
        storeRelaxed(&ch->waitSince, now);
        storeRelaxed(&ch->waitIsSend, isSend);
        storeRelaxed(&ch->waitPeer, peer);
      } else if (comm->timeoutNs && now - start > comm->timeoutNs) {
        storeRelaxed(&ch->status, PLEXUS_CHANNEL_TIMEOUT);
        return false;
      }
    }
    backoff(iter, comm->spinPolls);
  }
}

/* Waits until *p >= target (a peer's head or tail). */
PLEXUS_HD bool waitAtLeast(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, const volatile uint64_t* p,
                           uint64_t target, int peer, int isSend) {
  return waitUntil(comm, ch, peer, isSend, [&]() { return loadAcquire(p) >= target; });
}

/* Tells a proxy-driven receive connector that steps up to (not including) `end` will be consumed. */
PLEXUS_HD void wantRecv(plexusConnInfo_v1_t* c, uint64_t end) {
  if (c->recvWanted && *c->recvWanted < end) storeRelease(c->recvWanted, end);
}

/* The connectors one primitives instance talks through, with the step counts it advances; the counts
 * are loaded from the connectors at construction and stored back by thread 0 at the end. */
struct PeerConns {
  int nrecv, nsend;
  int recvPeer[PLEXUS_MAX_PRIM_PEERS], sendPeer[PLEXUS_MAX_PRIM_PEERS];
  plexusConnInfo_v1_t* recv[PLEXUS_MAX_PRIM_PEERS];
  plexusConnInfo_v1_t* send[PLEXUS_MAX_PRIM_PEERS];
  uint64_t recvStep[PLEXUS_MAX_PRIM_PEERS], sendStep[PLEXUS_MAX_PRIM_PEERS];
  uint64_t sendHead[PLEXUS_MAX_PRIM_PEERS]; /* the send peers' heads as last read */

  PLEXUS_HD void load(plexusDevChannel_v1_t* ch, const int* recvPeers, int nr, const int* sendPeers, int ns) {
    nrecv = nr;
    nsend = ns;
    for (int i = 0; i < nr; i++) {
      recvPeer[i] = recvPeers[i];
      recv[i] = &ch->peers[recvPeers[i]].recv.conn;
      recvStep[i] = recv[i]->step;
    }
    for (int i = 0; i < ns; i++) {
      sendPeer[i] = sendPeers[i];
      send[i] = &ch->peers[sendPeers[i]].send.conn;
      sendStep[i] = send[i]->step;
      sendHead[i] = send[i]->headCache;
    }
  }
  PLEXUS_HD void store() {
    for (int i = 0; i < nrecv; i++) recv[i]->step = recvStep[i];
    for (int i = 0; i < nsend; i++) {
      send[i]->step = sendStep[i];
      send[i]->headCache = sendHead[i];
    }
  }
  /* Thread 0 announces the steps a call of `slices` slices will receive on each recv connector. */
  PLEXUS_HD void announce(size_t slices) {
    for (int i = 0; i < nrecv; i++)
      wantRecv(recv[i], recvStep[i] + (slices < PLEXUS_STEPS ? slices : PLEXUS_STEPS));
  }
  /* Thread 0 waits until every send connector has a free slot for the next step. The peer's head is
   * read only when the credit last seen is used up (NCCL's sendConnHeadCache): reading it every step
   * would cost a cache miss on the critical path. */
  PLEXUS_HD bool waitSendCredit(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch) {
    for (int i = 0; i < nsend; i++) {
      if (sendStep[i] + 1 <= PLEXUS_STEPS) continue;
      const uint64_t need = sendStep[i] + 1 - PLEXUS_STEPS;
      if (sendHead[i] >= need) continue;
      const volatile uint64_t* head = send[i]->head;
      uint64_t* seen = &sendHead[i];
      if (!waitUntil(comm, ch, sendPeer[i], 1, [&]() { return (*seen = loadAcquire(head)) >= need; })) return false;
    }
    return true;
  }
};

/* The operations every protocol's primitives offer, each one instance of the protocol's
 * op<Recv, Send, Src, Dst>: Recv takes from the recv peers, Send gives to the send peers, Src reads
 * the input (where a rank's own data enters, the operator's pre-op applies), Dst writes the output.
 * Offsets are in elements of the input/output buffers given at construction. */
template <typename Derived>
class PrimitiveOps {
 public:
  PLEXUS_HD void send(size_t inOff, size_t n) { d().template op<false, true, true, false>(inOff, 0, n, false); }
  PLEXUS_HD void recv(size_t outOff, size_t n, bool postOp = false) {
    d().template op<true, false, false, true>(0, outOff, n, postOp);
  }
  PLEXUS_HD void recvReduceSend(size_t inOff, size_t n) { d().template op<true, true, true, false>(inOff, 0, n, false); }
  PLEXUS_HD void recvReduceCopySend(size_t inOff, size_t outOff, size_t n, bool postOp = false) {
    d().template op<true, true, true, true>(inOff, outOff, n, postOp);
  }
  PLEXUS_HD void recvReduceCopy(size_t inOff, size_t outOff, size_t n, bool postOp = false) {
    d().template op<true, false, true, true>(inOff, outOff, n, postOp);
  }
  PLEXUS_HD void copySend(size_t inOff, size_t outOff, size_t n, bool postOp = false) {
    d().template op<false, true, true, true>(inOff, outOff, n, postOp);
  }
  PLEXUS_HD void recvCopySend(size_t outOff, size_t n, bool postOp = false) {
    d().template op<true, true, false, true>(0, outOff, n, postOp);
  }
  PLEXUS_HD void recvSend(size_t n) { d().template op<true, true, false, false>(0, 0, n, false); }
  /* Direct algorithms: reduces the recv peers' slices together with this rank's own slice, already in
   * the output with the pre-op applied (copySend put it there), taken at position selfPos among the
   * recv peers, into the output. With peers in rank order every rank combines the same values in the
   * same order, so every rank gets the same bits. */
  PLEXUS_HD void recvReduceOrdered(size_t outOff, size_t n, int selfPos, bool postOp = false) {
    d().template op<true, false, false, true>(0, outOff, n, postOp, selfPos);
  }
  /* Sends what is already in the output (NCCL's directSendFromOutput): no pre-op, it was applied
   * when the data entered. */
  PLEXUS_HD void sendFromOutput(size_t outOff, size_t n) { d().template op<false, true, false, false>(0, outOff, n, false, 0); }

 private:
  PLEXUS_HD Derived& d() { return *static_cast<Derived*>(this); }
};

template <typename T, typename F>
class Primitives : public PrimitiveOps<Primitives<T, F>> {
  friend class PrimitiveOps<Primitives<T, F>>;

 public:
  PLEXUS_HD Primitives(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, int tid, int nthreads,
                       const int* recvPeers, int nrecv, const int* sendPeers, int nsend, const void* input,
                       void* output, uint64_t redOpArg)
      : comm_(comm), ch_(ch), tid_(tid), nthreads_(nthreads), input_((const T*)input), output_((T*)output),
        func_(redOpArg) {
    p_.load(ch, recvPeers, nrecv, sendPeers, nsend);
    sliceElems_ = (size_t)-1;
    for (int i = 0; i < nrecv; i++)
      if ((size_t)p_.recv[i]->stepSize / sizeof(T) < sliceElems_) sliceElems_ = (size_t)p_.recv[i]->stepSize / sizeof(T);
    for (int i = 0; i < nsend; i++)
      if ((size_t)p_.send[i]->stepSize / sizeof(T) < sliceElems_) sliceElems_ = (size_t)p_.send[i]->stepSize / sizeof(T);
  }

  PLEXUS_HD ~Primitives() {
    if (tid_ == 0) p_.store();
  }

  PLEXUS_HD bool ok() const { return loadRelaxed(&ch_->status) == PLEXUS_CHANNEL_OK; }

 private:
  template <bool Recv, bool Send, bool Src, bool Dst>
  PLEXUS_HD void op(size_t inOff, size_t outOff, size_t nelem, bool postOp, int selfPos = -1) {
    for (size_t done = 0; done < nelem && ok(); done += sliceElems_) {
      size_t n = nelem - done < sliceElems_ ? nelem - done : sliceElems_;
      if (Recv && tid_ == 0) p_.announce((nelem - done + sliceElems_ - 1) / sliceElems_);
      if (tid_ == 0) waitPeers<Recv, Send>();
      barrier();
      if (!ok()) return;
      const T* srcs[PLEXUS_MAX_SRCS];
      T* dsts[PLEXUS_MAX_DSTS];
      int nsrc = 0, ndst = 0;
      if (Src) srcs[nsrc++] = input_ + inOff + done;
      if (Recv)
        for (int i = 0; i < p_.nrecv; i++) {
          if (i == selfPos) srcs[nsrc++] = output_ + outOff + done;
          srcs[nsrc++] = (const T*)slot(p_.recv[i], p_.recvStep[i]);
        }
      if (selfPos >= (Recv ? p_.nrecv : 0)) srcs[nsrc++] = output_ + outOff + done;
      if (Dst) dsts[ndst++] = output_ + outOff + done;
      if (Send)
        for (int i = 0; i < p_.nsend; i++) dsts[ndst++] = (T*)slot(p_.send[i], p_.sendStep[i]);
      /* Pre-op only where a rank's own input enters a reduction, post-op only where asked. */
      reduceCopy<T, F>(tid_, nthreads_, func_, srcs, nsrc, Src, dsts, ndst, postOp, n);
      barrier();
      if (tid_ == 0) postPeers<Recv, Send>(n * sizeof(T));
    }
  }

  static PLEXUS_HD char* slot(plexusConnInfo_v1_t* c, uint64_t step) {
    return c->buffs[PLEXUS_PROTO_SIMPLE] + (size_t)(step % PLEXUS_STEPS) * (size_t)c->stepSize;
  }

  template <bool Recv, bool Send>
  PLEXUS_HD void waitPeers() {
    if (Recv)
      for (int i = 0; i < p_.nrecv; i++)
        if (!waitAtLeast(comm_, ch_, p_.recv[i]->tail, p_.recvStep[i] + 1, p_.recvPeer[i], 0)) return;
    if (Send) p_.waitSendCredit(comm_, ch_);
  }

  template <bool Recv, bool Send>
  PLEXUS_HD void postPeers(size_t bytes) {
    if (Recv)
      for (int i = 0; i < p_.nrecv; i++) {
        plexusConnInfo_v1_t* c = p_.recv[i];
        if (c->connFifo) c->connFifo[p_.recvStep[i] % PLEXUS_STEPS].size = PLEXUS_CONNFIFO_FREE;
        storeRelease(c->head, ++p_.recvStep[i]);
      }
    if (Send)
      for (int i = 0; i < p_.nsend; i++) {
        plexusConnInfo_v1_t* c = p_.send[i];
        if (c->connFifo) c->connFifo[p_.sendStep[i] % PLEXUS_STEPS].size = (int64_t)bytes;
        storeRelease(c->tail, ++p_.sendStep[i]);
      }
  }

  const plexusDevComm_v1_t* comm_;
  plexusDevChannel_v1_t* ch_;
  int tid_, nthreads_;
  const T* input_;
  T* output_;
  F func_;
  size_t sliceElems_;
  PeerConns p_;
};

}  // namespace plexus::dev

#endif /* PLEXUS_DEVICE_PRIMITIVES_H_ */
