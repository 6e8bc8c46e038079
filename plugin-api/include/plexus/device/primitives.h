/*
 * Primitives over the Simple protocol: the building blocks of every step loop (send, recv,
 * recvReduceSend, recvReduceCopySend, copySend, recvCopySend, recvReduceCopy). One instance serves
 * one channel's step loop against a set of recv peers and send peers. What every protocol shares is
 * here too: the waits, the connectors' step counts (PeerConns), the state of one instance
 * (PrimState) and the named operations (PrimitiveOps); primitives_ll.h and primitives_ll128.h add
 * the LL and LL128 protocols, protocol_prims.h picks one at run time.
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
PLEXUS_HD bool waitUntil(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, int peer, int isSend, Ready ready) {
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

/* Steps of LL a sender on connector c may run ahead of its receiver: its LL buffer's slots (llSlots). */
PLEXUS_HD uint64_t llSlotsOf(const plexusConnInfo_v1_t* c) {
  return (c->flags & PLEXUS_CONN_LL_IN_SLOTS) || c->llSlots <= 0 ? PLEXUS_STEPS : (uint64_t)c->llSlots;
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
    for (int i = 0; i < nrecv; i++) wantRecv(recv[i], recvStep[i] + (slices < PLEXUS_STEPS ? slices : PLEXUS_STEPS));
  }
  /* Thread 0 waits until every send connector has a free slot of protocol proto for the next step. The
   * peer's head is read only when the credit last seen is used up (NCCL's sendConnHeadCache): reading it
   * every step would cost a cache miss on the critical path.
   *
   * A rank that only sends (leads) and finds its receiver a whole LL buffer behind (many small operations, a
   * receiver with more to do per operation: a Reduce's root) would otherwise wait for one slot per step, each wait
   * bouncing head's cache line between the two cores. It waits for a quarter of the slots instead (2 ranks, 8 B
   * Reduce: 250-290 -> 200-220 ns), and only for steps of earlier operations (below send[i]->step, where this one
   * began). It waits for no data in this operation, and those steps complete without it: the longer wait closes no
   * cycle the exact one would not. */
  PLEXUS_HD bool waitSendCredit(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, int proto, bool leads) {
    for (int i = 0; i < nsend; i++) {
      const uint64_t slots = proto == PLEXUS_PROTO_LL ? llSlotsOf(send[i]) : PLEXUS_STEPS;
      if (sendStep[i] + 1 <= slots) continue;
      const uint64_t need = sendStep[i] + 1 - slots;
      if (sendHead[i] >= need) continue;
      const volatile uint64_t* head = send[i]->head;
      uint64_t* seen = &sendHead[i];
      if ((*seen = loadAcquire(head)) >= need) continue;
      uint64_t want = need;
      if (leads && slots > PLEXUS_STEPS) {
        const uint64_t batch = need + slots / 4, began = send[i]->step;
        const uint64_t cap = batch < began ? batch : began;
        if (want < cap) want = cap;
      }
      if (!waitUntil(comm, ch, sendPeer[i], 1, [&]() { return (*seen = loadAcquire(head)) >= want; })) return false;
    }
    return true;
  }
};

/* What one primitive call does: take from the recv peers (Recv), give to the send peers (Send), read
 * the input (Src: where a rank's own data enters, the operator's pre-op applies), write the output
 * (Dst). Each protocol has one function per (T, F) for every combination, chosen by these bits at run
 * time: compiled once, not once per named operation. */
enum : unsigned { kPrimRecv = 1u, kPrimSend = 2u, kPrimSrc = 4u, kPrimDst = 8u };

/* The operations every protocol's primitives offer, each one call of the protocol's
 * run(flags, inOff, outOff, n, postOp, selfPos). Offsets are in elements of the input/output buffers
 * given at construction. */
template <typename Derived>
class PrimitiveOps {
 public:
  PLEXUS_HD void send(size_t inOff, size_t n) { d().run(kPrimSend | kPrimSrc, inOff, 0, n, false, -1); }
  PLEXUS_HD void recv(size_t outOff, size_t n, bool postOp = false) {
    d().run(kPrimRecv | kPrimDst, 0, outOff, n, postOp, -1);
  }
  PLEXUS_HD void recvReduceSend(size_t inOff, size_t n) {
    d().run(kPrimRecv | kPrimSend | kPrimSrc, inOff, 0, n, false, -1);
  }
  PLEXUS_HD void recvReduceCopySend(size_t inOff, size_t outOff, size_t n, bool postOp = false) {
    d().run(kPrimRecv | kPrimSend | kPrimSrc | kPrimDst, inOff, outOff, n, postOp, -1);
  }
  PLEXUS_HD void recvReduceCopy(size_t inOff, size_t outOff, size_t n, bool postOp = false) {
    d().run(kPrimRecv | kPrimSrc | kPrimDst, inOff, outOff, n, postOp, -1);
  }
  PLEXUS_HD void copySend(size_t inOff, size_t outOff, size_t n, bool postOp = false) {
    d().run(kPrimSend | kPrimSrc | kPrimDst, inOff, outOff, n, postOp, -1);
  }
  PLEXUS_HD void recvCopySend(size_t outOff, size_t n, bool postOp = false) {
    d().run(kPrimRecv | kPrimSend | kPrimDst, 0, outOff, n, postOp, -1);
  }
  PLEXUS_HD void recvSend(size_t n) { d().run(kPrimRecv | kPrimSend, 0, 0, n, false, -1); }
  /* Direct algorithms: reduces the recv peers' slices together with this rank's own slice, already in
   * the output with the pre-op applied (copySend put it there), taken at position selfPos among the
   * recv peers, into the output. With peers in rank order every rank combines the same values in the
   * same order, so every rank gets the same bits. */
  PLEXUS_HD void recvReduceOrdered(size_t outOff, size_t n, int selfPos, bool postOp = false) {
    d().run(kPrimRecv | kPrimDst, 0, outOff, n, postOp, selfPos);
  }
  /* Sends what is already in the output (NCCL's directSendFromOutput): no pre-op, it was applied
   * when the data entered. */
  PLEXUS_HD void sendFromOutput(size_t outOff, size_t n) { d().run(kPrimSend, 0, outOff, n, false, 0); }

 private:
  PLEXUS_HD Derived& d() { return *static_cast<Derived*>(this); }
};

/* One primitives instance, whatever its protocol: the channel, this thread's place among the channel's
 * threads, the buffers, the operator and the connectors. Every thread of the channel holds its own
 * copy and advances the step counts alike; thread 0 stores them back (finish). */
template <typename T, typename F>
struct PrimState {
  const plexusDevComm_v1_t* comm;
  plexusDevChannel_v1_t* ch;
  int tid, nthreads;
  const T* input;
  T* output;
  F func;
  size_t minStep;   /* the smallest Simple step (bytes) of the connectors; SIZE_MAX without peers */
  bool stopped;     /* the threads agreed that the channel stopped (abort, timeout) */
  bool leads;       /* setLeads: this rank only sends in this operation */
  unsigned ptrSent; /* bit i: send connector i took a step by pointer (netPtrRoute), not yet known sent */
  PeerConns p;

  PLEXUS_HD PrimState(const plexusDevComm_v1_t* comm_, plexusDevChannel_v1_t* ch_, int tid_, int nthreads_,
                      const int* recvPeers, int nrecv, const int* sendPeers, int nsend, const void* input_,
                      void* output_, uint64_t redOpArg)
      : comm(comm_),
        ch(ch_),
        tid(tid_),
        nthreads(nthreads_),
        input((const T*)input_),
        output((T*)output_),
        func(redOpArg),
        minStep((size_t)-1),
        stopped(loadRelaxed(&ch_->status) != PLEXUS_CHANNEL_OK),
        leads(false),
        ptrSent(0) {
    p.load(ch_, recvPeers, nrecv, sendPeers, nsend);
    for (int i = 0; i < nrecv; i++)
      if ((size_t)p.recv[i]->stepSize < minStep) minStep = (size_t)p.recv[i]->stepSize;
    for (int i = 0; i < nsend; i++)
      if ((size_t)p.send[i]->stepSize < minStep) minStep = (size_t)p.send[i]->stepSize;
  }

  /* On the host the channel's status itself; on CUDA what the threads last agreed on (stopAll), so that
   * every thread of the block takes the same branch of a step loop. */
  PLEXUS_HD bool ok() const {
#if defined(__CUDA_ARCH__)
    return !stopped;
#else
    return !stopped && loadRelaxed(&ch->status) == PLEXUS_CHANNEL_OK;
#endif
  }
  /* A barrier of the channel's threads, after which all of them know whether any saw the channel stop
   * (or failed a wait itself: `failed`). Returns true when they stop. */
  PLEXUS_HD bool stopAll(bool failed = false) {
    if (barrierAny(failed || loadRelaxed(&ch->status) != PLEXUS_CHANNEL_OK)) stopped = true;
    return stopped;
  }
  PLEXUS_HD void finish() {
    if (tid != 0) return;
#if !defined(__CUDA_ARCH__)
    /* Steps given by pointer are the proxy's until sent (head): the buffers go back to the application only then. */
    for (int i = 0; i < p.nsend; i++)
      if (ptrSent & (1u << i)) {
        if (!waitAtLeast(comm, ch, p.send[i]->head, p.sendStep[i], p.sendPeer[i], 1)) break;
        p.sendHead[i] = p.sendStep[i];
      }
#endif
    p.store();
  }
  /* Thread 0, before a step of protocol proto: announces the receives, waits for credit and, where the
   * protocol is Simple or lines travel in whole slots (PLEXUS_CONN_LL_IN_SLOTS), for the data. False when a
   * wait failed. */
  PLEXUS_HD bool waitStep(unsigned flags, size_t slicesLeft, int proto) {
    if (flags & kPrimRecv) p.announce(slicesLeft);
    if (flags & kPrimRecv)
      for (int i = 0; i < p.nrecv; i++) {
        if (proto != PLEXUS_PROTO_SIMPLE && !(p.recv[i]->flags & PLEXUS_CONN_LL_IN_SLOTS)) continue;
        if (!waitAtLeast(comm, ch, p.recv[i]->tail, p.recvStep[i] + 1, p.recvPeer[i], 0)) return false;
      }
    if (flags & kPrimSend) return p.waitSendCredit(comm, ch, proto, leads);
    return true;
  }
  /* After a step (every thread): the recv slots go back to their senders through head, the send slots
   * are published through tail with their bytes in connFifo; thread 0 stores. */
  PLEXUS_HD void postStep(unsigned flags, int64_t sendBytes, bool sizesAlways) {
    if (flags & kPrimRecv)
      for (int i = 0; i < p.nrecv; i++) {
        plexusConnInfo_v1_t* c = p.recv[i];
        ++p.recvStep[i];
        if (tid == 0) {
          if (sizesAlways && c->connFifo) c->connFifo[(p.recvStep[i] - 1) % PLEXUS_STEPS].size = PLEXUS_CONNFIFO_FREE;
          storeRelease(c->head, p.recvStep[i]);
        }
      }
    if (flags & kPrimSend)
      for (int i = 0; i < p.nsend; i++) {
        plexusConnInfo_v1_t* c = p.send[i];
        if (tid == 0 && c->connFifo && (sizesAlways || (c->flags & PLEXUS_CONN_LL_IN_SLOTS)))
          c->connFifo[p.sendStep[i] % PLEXUS_STEPS].size = sendBytes;
        ++p.sendStep[i];
        if (tid == 0) storeRelease(c->tail, p.sendStep[i]);
      }
  }
};

/* Where step `step` of connector c sits in its Simple buffer. */
PLEXUS_HD char* simpleSlot(plexusConnInfo_v1_t* c, uint64_t step) {
  return c->buffs[PLEXUS_PROTO_SIMPLE] + (size_t)(step % PLEXUS_STEPS) * (size_t)c->stepSize;
}

/* Host backend, over connectors whose proxy takes steps by pointer (PLEXUS_CONN_NET_PTR, a net): a call's steps skip
 * the slots where the application's buffer holds their bytes. A sender hands its proxy the output wherever the step
 * writes one, the input where the step only sends it (and no pre-op changes it); a receiver that only copies into
 * the output has its proxy receive there. So a ring AllReduce's reduce-scatter sends from its input, reduces into its
 * output and sends from there, and its all-gather receives into its output: no copy into or out of a slot. Partial
 * results that only a slot holds (recvReduceSend), reductions of what arrives, and CUDA keep the slots. Below
 * PLEXUS_NET_PTR_MIN_BYTES a call keeps them too: a copy costs less than registering the memory for the step. */
#define PLEXUS_NET_PTR_MIN_BYTES (64 * 1024)
template <typename T, typename F>
PLEXUS_HD void netPtrRoute(const PrimState<T, F>& s, unsigned flags, size_t inOff, size_t outOff, size_t nelem,
                           bool postOp, int selfPos, const T** sendFrom, T** recvInto) {
  *sendFrom = nullptr;
  *recvInto = nullptr;
#if !defined(__CUDA_ARCH__)
  if (nelem * sizeof(T) < PLEXUS_NET_PTR_MIN_BYTES) return;
  const bool recv = flags & kPrimRecv;
  bool sendPtr = (flags & kPrimSend) && s.p.nsend > 0;
  for (int i = 0; sendPtr && i < s.p.nsend; i++) sendPtr = s.p.send[i]->flags & PLEXUS_CONN_NET_PTR;
  if (sendPtr) {
    if (flags & kPrimDst)
      *sendFrom = s.output + outOff;
    else if (!recv && (flags & kPrimSrc) && !F::hasPre)
      *sendFrom = s.input + inOff;
    else if (!recv && !(flags & kPrimSrc) && selfPos >= 0)
      *sendFrom = s.output + outOff; /* sendFromOutput */
  }
  if (recv && s.p.nrecv == 1 && (s.p.recv[0]->flags & PLEXUS_CONN_NET_PTR) && s.p.recv[0]->recvWanted &&
      (flags & kPrimDst) && !(flags & kPrimSrc) && selfPos < 0 && !postOp)
    *recvInto = s.output + outOff;
#endif
}

/* Thread 0, receiving into the application's buffer (netPtrRoute): says where each step up to `want` goes, before
 * announcing it (the proxy posts a step's receive once it is wanted). Steps announced already were described then. */
template <typename T, typename F>
PLEXUS_HD void describeRecvPtr(PrimState<T, F>& s, T* into, size_t done, size_t nelem, size_t slice,
                               size_t slicesLeft) {
  plexusConnInfo_v1_t* c = s.p.recv[0];
  const uint64_t step = s.p.recvStep[0];
  const uint64_t want = step + (slicesLeft < PLEXUS_STEPS ? slicesLeft : PLEXUS_STEPS);
  const uint64_t wanted = loadRelaxed(c->recvWanted);
  for (uint64_t t = wanted > step ? wanted : step; t < want; t++) {
    const size_t off = done + (size_t)(t - step) * slice;
    plexusConnFifo_v1_t& f = c->connFifo[t % PLEXUS_STEPS];
    f.ptr = into + off;
    f.size = (int64_t)((nelem - off < slice ? nelem - off : slice) * sizeof(T));
    f.mode = PLEXUS_MODE_PTR;
  }
}

/* Simple: one step's slot of each connector holds a slice of the data as is; tail and head say when. */
struct SimpleProtocol {
  template <typename T, typename F>
  static PLEXUS_HD_OUTLINE void run(PrimState<T, F>& s, unsigned flags, size_t inOff, size_t outOff, size_t nelem,
                                    bool postOp, int selfPos) {
    const bool recv = flags & kPrimRecv, send = flags & kPrimSend;
    const size_t slice = s.minStep == (size_t)-1 ? nelem : s.minStep / sizeof(T);
    const T* sendFrom;
    T* recvInto;
    netPtrRoute(s, flags, inOff, outOff, nelem, postOp, selfPos, &sendFrom, &recvInto);
    for (size_t done = 0; done < nelem; done += slice) {
      const size_t n = nelem - done < slice ? nelem - done : slice;
      const size_t slicesLeft = (nelem - done + slice - 1) / slice;
      bool waited = true;
      if (s.tid == 0) {
        if (recvInto) describeRecvPtr(s, recvInto, done, nelem, slice, slicesLeft);
        waited = s.waitStep(flags, slicesLeft, PLEXUS_PROTO_SIMPLE);
      }
      if (s.stopAll(!waited)) return;
      const T* srcs[PLEXUS_MAX_SRCS];
      T* dsts[PLEXUS_MAX_DSTS];
      int nsrc = 0, ndst = 0;
      if (flags & kPrimSrc) srcs[nsrc++] = s.input + inOff + done;
      const int nr = recv ? s.p.nrecv : 0;
      for (int i = 0; i < nr; i++) {
        if (i == selfPos) srcs[nsrc++] = s.output + outOff + done;
        srcs[nsrc++] = recvInto ? recvInto + done : (const T*)simpleSlot(s.p.recv[i], s.p.recvStep[i]);
      }
      if (selfPos >= nr) srcs[nsrc++] = s.output + outOff + done;
      if ((flags & kPrimDst) && !recvInto) dsts[ndst++] = s.output + outOff + done;
      if (send && !sendFrom)
        for (int i = 0; i < s.p.nsend; i++) dsts[ndst++] = (T*)simpleSlot(s.p.send[i], s.p.sendStep[i]);
      /* Pre-op only where a rank's own input enters a reduction, post-op only where asked. */
      if (ndst) reduceCopy<T, F>(s.tid, s.nthreads, s.func, srcs, nsrc, (flags & kPrimSrc) != 0, dsts, ndst, postOp, n);
      barrier();
      if (s.tid == 0 && (sendFrom || recvInto)) netPtrStep(s, sendFrom ? sendFrom + done : nullptr, recvInto);
      s.postStep(flags, (int64_t)(n * sizeof(T)), true);
    }
  }
  /* Thread 0, before postStep publishes a step taken by pointer: the sender's entry says where its bytes are; the
   * receiver's goes back to the slots' mode for the step that will reuse it. */
  template <typename T, typename F>
  static PLEXUS_HD void netPtrStep(PrimState<T, F>& s, const T* from, const T* recvInto) {
    if (recvInto) s.p.recv[0]->connFifo[s.p.recvStep[0] % PLEXUS_STEPS].mode = PLEXUS_MODE_NORMAL;
    if (!from) return;
    for (int i = 0; i < s.p.nsend; i++) {
      plexusConnFifo_v1_t& f = s.p.send[i]->connFifo[s.p.sendStep[i] % PLEXUS_STEPS];
      f.ptr = (void*)from;
      f.mode = PLEXUS_MODE_PTR;
      s.ptrSent |= 1u << i;
    }
  }
};

/* The primitives of one protocol as a class of its own: Primitives (Simple), PrimitivesLL,
 * PrimitivesLL128. Protocol::run<T, F> is the protocol's function. */
template <typename T, typename F, typename Protocol>
class OneProtocolPrims : public PrimitiveOps<OneProtocolPrims<T, F, Protocol>> {
 public:
  PLEXUS_HD OneProtocolPrims(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, int tid, int nthreads,
                             const int* recvPeers, int nrecv, const int* sendPeers, int nsend, const void* input,
                             void* output, uint64_t redOpArg)
      : s_(comm, ch, tid, nthreads, recvPeers, nrecv, sendPeers, nsend, input, output, redOpArg) {}
  PLEXUS_HD ~OneProtocolPrims() { s_.finish(); }
  OneProtocolPrims(const OneProtocolPrims&) = delete;
  OneProtocolPrims& operator=(const OneProtocolPrims&) = delete;

  PLEXUS_HD bool ok() const { return s_.ok(); }
  PLEXUS_HD void setLeads(bool leads) { s_.leads = leads; } /* as ProtocolPrims::setLeads */
  PLEXUS_HD void run(unsigned flags, size_t inOff, size_t outOff, size_t n, bool postOp, int selfPos) {
    Protocol::template run<T, F>(s_, flags, inOff, outOff, n, postOp, selfPos);
  }

 private:
  PrimState<T, F> s_;
};

template <typename T, typename F>
using Primitives = OneProtocolPrims<T, F, SimpleProtocol>;

}  // namespace plexus::dev

#endif /* PLEXUS_DEVICE_PRIMITIVES_H_ */
