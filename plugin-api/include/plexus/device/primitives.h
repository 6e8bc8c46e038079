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

#define PLEXUS_MAX_PRIM_PEERS 4

/* Waits until *p >= target. False when the communicator aborts or the wait outlives the timeout;
 * the channel's status then says which, and every later primitive call returns at once. */
PLEXUS_HD bool waitAtLeast(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, const volatile uint64_t* p,
                           uint64_t target, int peer, int isSend) {
  if (loadAcquire(p) >= target) return true;
  uint64_t start = 0;
  for (uint32_t iter = 0;; iter++) {
    if (loadAcquire(p) >= target) {
      if (start) ch->waitPeer = -1;
      return true;
    }
    if ((iter & 63) == 63) {
      if (*comm->abortFlag) {
        ch->status = PLEXUS_CHANNEL_ABORTED;
        return false;
      }
      uint64_t now = clockNs();
      if (!start) {
        start = now;
        ch->waitSince = now;
        ch->waitPeer = peer;
        ch->waitIsSend = isSend;
      } else if (comm->timeoutNs && now - start > comm->timeoutNs) {
        ch->status = PLEXUS_CHANNEL_TIMEOUT;
        return false;
      }
    }
    backoff(iter, comm->spinPolls);
  }
}

template <typename T, typename F>
class Primitives {
 public:
  PLEXUS_HD Primitives(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, int tid, int nthreads,
                       const int* recvPeers, int nrecv, const int* sendPeers, int nsend, const void* input,
                       void* output, uint64_t redOpArg)
      : comm_(comm), ch_(ch), tid_(tid), nthreads_(nthreads), nrecv_(nrecv), nsend_(nsend),
        input_((const T*)input), output_((T*)output), func_(redOpArg) {
    sliceElems_ = (size_t)-1;
    for (int i = 0; i < nrecv; i++) {
      recvPeer_[i] = recvPeers[i];
      recv_[i] = &ch->peers[recvPeers[i]].recv.conn;
      recvStep_[i] = recv_[i]->step;
      size_t e = (size_t)recv_[i]->stepSize / sizeof(T);
      if (e < sliceElems_) sliceElems_ = e;
    }
    for (int i = 0; i < nsend; i++) {
      sendPeer_[i] = sendPeers[i];
      send_[i] = &ch->peers[sendPeers[i]].send.conn;
      sendStep_[i] = send_[i]->step;
      size_t e = (size_t)send_[i]->stepSize / sizeof(T);
      if (e < sliceElems_) sliceElems_ = e;
    }
  }

  PLEXUS_HD ~Primitives() {
    if (tid_ != 0) return;
    for (int i = 0; i < nrecv_; i++) recv_[i]->step = recvStep_[i];
    for (int i = 0; i < nsend_; i++) send_[i]->step = sendStep_[i];
  }

  PLEXUS_HD bool ok() const { return ch_->status == PLEXUS_CHANNEL_OK; }

  /* Offsets are in elements of the input/output buffers given at construction. */
  PLEXUS_HD void send(size_t inOff, size_t n) { op<false, true, true, false>(inOff, 0, n, false); }
  PLEXUS_HD void recv(size_t outOff, size_t n, bool postOp = false) { op<true, false, false, true>(0, outOff, n, postOp); }
  PLEXUS_HD void recvReduceSend(size_t inOff, size_t n) { op<true, true, true, false>(inOff, 0, n, false); }
  PLEXUS_HD void recvReduceCopySend(size_t inOff, size_t outOff, size_t n, bool postOp = false) {
    op<true, true, true, true>(inOff, outOff, n, postOp);
  }
  PLEXUS_HD void recvReduceCopy(size_t inOff, size_t outOff, size_t n, bool postOp = false) {
    op<true, false, true, true>(inOff, outOff, n, postOp);
  }
  PLEXUS_HD void copySend(size_t inOff, size_t outOff, size_t n, bool postOp = false) {
    op<false, true, true, true>(inOff, outOff, n, postOp);
  }
  PLEXUS_HD void recvCopySend(size_t outOff, size_t n, bool postOp = false) { op<true, true, false, true>(0, outOff, n, postOp); }
  PLEXUS_HD void recvSend(size_t n) { op<true, true, false, false>(0, 0, n, false); }

 private:
  template <bool Recv, bool Send, bool Src, bool Dst>
  PLEXUS_HD void op(size_t inOff, size_t outOff, size_t nelem, bool postOp) {
    for (size_t done = 0; done < nelem && ok(); done += sliceElems_) {
      size_t n = nelem - done < sliceElems_ ? nelem - done : sliceElems_;
      if (tid_ == 0) waitPeers<Recv, Send>();
      barrier();
      if (!ok()) return;
      const T* srcs[PLEXUS_MAX_SRCS];
      T* dsts[PLEXUS_MAX_DSTS];
      int nsrc = 0, ndst = 0;
      if (Src) srcs[nsrc++] = input_ + inOff + done;
      if (Recv)
        for (int i = 0; i < nrecv_; i++) srcs[nsrc++] = (const T*)slot(recv_[i], recvStep_[i]);
      if (Dst) dsts[ndst++] = output_ + outOff + done;
      if (Send)
        for (int i = 0; i < nsend_; i++) dsts[ndst++] = (T*)slot(send_[i], sendStep_[i]);
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
      for (int i = 0; i < nrecv_; i++)
        if (!waitAtLeast(comm_, ch_, recv_[i]->tail, recvStep_[i] + 1, recvPeer_[i], 0)) return;
    if (Send)
      for (int i = 0; i < nsend_; i++)
        if (sendStep_[i] + 1 > PLEXUS_STEPS &&
            !waitAtLeast(comm_, ch_, send_[i]->head, sendStep_[i] + 1 - PLEXUS_STEPS, sendPeer_[i], 1))
          return;
  }

  template <bool Recv, bool Send>
  PLEXUS_HD void postPeers(size_t bytes) {
    if (Recv)
      for (int i = 0; i < nrecv_; i++) {
        if (recv_[i]->connFifo) recv_[i]->connFifo[recvStep_[i] % PLEXUS_STEPS].size = PLEXUS_CONNFIFO_FREE;
        storeRelease(recv_[i]->head, ++recvStep_[i]);
      }
    if (Send)
      for (int i = 0; i < nsend_; i++) {
        if (send_[i]->connFifo) send_[i]->connFifo[sendStep_[i] % PLEXUS_STEPS].size = (int64_t)bytes;
        storeRelease(send_[i]->tail, ++sendStep_[i]);
      }
  }

  const plexusDevComm_v1_t* comm_;
  plexusDevChannel_v1_t* ch_;
  int tid_, nthreads_, nrecv_, nsend_;
  const T* input_;
  T* output_;
  F func_;
  size_t sliceElems_;
  int recvPeer_[PLEXUS_MAX_PRIM_PEERS], sendPeer_[PLEXUS_MAX_PRIM_PEERS];
  plexusConnInfo_v1_t* recv_[PLEXUS_MAX_PRIM_PEERS];
  plexusConnInfo_v1_t* send_[PLEXUS_MAX_PRIM_PEERS];
  uint64_t recvStep_[PLEXUS_MAX_PRIM_PEERS], sendStep_[PLEXUS_MAX_PRIM_PEERS];
};

}  // namespace plexus::dev

#endif /* PLEXUS_DEVICE_PRIMITIVES_H_ */
