/*
 * Primitives over the LL protocol: the same operations as primitives.h, for small messages. Data
 * travels in 16-byte lines whose two 8-byte words each carry 4 bytes of data and a flag (step + 1),
 * so a receiver polls the data itself and needs no separate tail: one cache line crosses per line
 * instead of a tail and a slot. Credit for reusing a slot still flows back through head; the sender
 * also advances tail so that Simple and LL operations can share a connection's step count.
 */
#ifndef PLEXUS_DEVICE_PRIMITIVES_LL_H_
#define PLEXUS_DEVICE_PRIMITIVES_LL_H_

#include "../device_v1.h"
#include "arch.h"
#include "primitives.h"
#include "reduce_copy.h"

namespace plexus::dev {

/* Waits until both words of a line carry flag; false on abort or timeout (the channel says which). */
PLEXUS_HD bool waitLine(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, volatile plexusLLFifoLine_v1_t* line,
                        uint32_t flag, int peer, uint64_t* w0, uint64_t* w1) {
  return waitUntil(comm, ch, peer, 0, [&]() {
    *w0 = loadAcquire(&line->v[0]);
    *w1 = loadAcquire(&line->v[1]);
    return (uint32_t)(*w0 >> 32) == flag && (uint32_t)(*w1 >> 32) == flag;
  });
}

template <typename T, typename F>
class PrimitivesLL : public PrimitiveOps<PrimitivesLL<T, F>> {
  friend class PrimitiveOps<PrimitivesLL<T, F>>;

 public:
  static constexpr size_t kSliceBytes = PLEXUS_LL_SLOT_LINES * 8;

  PLEXUS_HD PrimitivesLL(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, int tid, int nthreads,
                         const int* recvPeers, int nrecv, const int* sendPeers, int nsend, const void* input,
                         void* output, uint64_t redOpArg)
      : comm_(comm), ch_(ch), tid_(tid), nthreads_(nthreads), input_((const T*)input), output_((T*)output),
        func_(redOpArg) {
    p_.load(ch, recvPeers, nrecv, sendPeers, nsend);
  }

  PLEXUS_HD ~PrimitivesLL() {
    if (tid_ == 0) p_.store();
  }

  /* Elements per pipeline chunk that step loops should use with this protocol. */
  static PLEXUS_HD size_t chunkElems() { return kSliceBytes / sizeof(T); }
  PLEXUS_HD bool ok() const { return loadRelaxed(&ch_->status) == PLEXUS_CHANNEL_OK; }

 private:
  static PLEXUS_HD volatile plexusLLFifoLine_v1_t* lines(plexusConnInfo_v1_t* c, uint64_t step) {
    if (c->flags & PLEXUS_CONN_LL_IN_SLOTS)
      return (volatile plexusLLFifoLine_v1_t*)(c->buffs[PLEXUS_PROTO_SIMPLE] + (size_t)(step % PLEXUS_STEPS) * (size_t)c->stepSize);
    return (volatile plexusLLFifoLine_v1_t*)(c->buffs[PLEXUS_PROTO_LL]) + (size_t)(step % PLEXUS_STEPS) * PLEXUS_LL_SLOT_LINES;
  }

  /* Each thread owns a contiguous run of lines and the elements they carry (no element straddles a
   * line: elements are at most 8 bytes), so it reads, combines and writes them alone. */
  template <bool Recv, bool Send, bool Src, bool Dst>
  PLEXUS_HD void op(size_t inOff, size_t outOff, size_t nelem, bool postOp, int selfPos = -1) {
    const size_t sliceElems = kSliceBytes / sizeof(T), perLine = 8 / sizeof(T);
    for (size_t done = 0; done < nelem && ok(); done += sliceElems) {
      const size_t n = nelem - done < sliceElems ? nelem - done : sliceElems;
      const size_t nlines = (n * sizeof(T) + 7) / 8;
      const size_t l0 = nlines * tid_ / nthreads_, l1 = nlines * (tid_ + 1) / nthreads_;
      const size_t e0 = l0 * perLine, e1 = l1 * perLine < n ? l1 * perLine : n;
      if (Recv && tid_ == 0) p_.announce((nelem - done + sliceElems - 1) / sliceElems);
      if (Send && tid_ == 0) p_.waitSendCredit(comm_, ch_);
      barrier();
      if (!ok()) return;
      const T* srcs[PLEXUS_MAX_SRCS];
      T* dsts[PLEXUS_MAX_DSTS];
      int nsrc = 0, ndst = 0;
      if (Src) srcs[nsrc++] = input_ + inOff + done + e0;
      if (Recv)
        for (int i = 0; i < p_.nrecv; i++) {
          if (!readLines(i, l0, l1)) return;
          if (i == selfPos) srcs[nsrc++] = output_ + outOff + done + e0;
          srcs[nsrc++] = (const T*)recvTmp_[i] + e0;
        }
      if (selfPos >= (Recv ? p_.nrecv : 0)) srcs[nsrc++] = output_ + outOff + done + e0;
      if (Dst) dsts[ndst++] = output_ + outOff + done + e0;
      if (Send) dsts[ndst++] = (T*)sendTmp_ + e0;
      if (e1 > e0) reduceCopy<T, F>(0, 1, func_, srcs, nsrc, Src, dsts, ndst, postOp, e1 - e0);
      if (Send)
        for (int i = 0; i < p_.nsend; i++) writeLines(i, l0, l1);
      barrier();  /* every thread has read its lines before head returns the slot */
      if (Recv)
        for (int i = 0; i < p_.nrecv; i++) {
          ++p_.recvStep[i];
          if (tid_ == 0) storeRelease(p_.recv[i]->head, p_.recvStep[i]);
        }
      if (Send)
        for (int i = 0; i < p_.nsend; i++) {
          plexusConnInfo_v1_t* c = p_.send[i];
          if (tid_ == 0 && (c->flags & PLEXUS_CONN_LL_IN_SLOTS))
            c->connFifo[p_.sendStep[i] % PLEXUS_STEPS].size = (int64_t)(nlines * sizeof(plexusLLFifoLine_v1_t));
          ++p_.sendStep[i];
          if (tid_ == 0) storeRelease(c->tail, p_.sendStep[i]);
        }
    }
  }

  PLEXUS_HD bool readLines(int i, size_t l0, size_t l1) {
    volatile plexusLLFifoLine_v1_t* l = lines(p_.recv[i], p_.recvStep[i]);
    const uint32_t flag = (uint32_t)(p_.recvStep[i] + 1);
    if (l1 == l0) return true;
    /* Lines that a proxy delivers in whole slots are complete once tail says so. */
    if ((p_.recv[i]->flags & PLEXUS_CONN_LL_IN_SLOTS) &&
        !waitAtLeast(comm_, ch_, p_.recv[i]->tail, p_.recvStep[i] + 1, p_.recvPeer[i], 0))
      return false;
    uint64_t w0, w1;
    /* Wait on the last line first: polling lines the sender is still writing would bounce each cache
     * line between the two cores. The sender writes in order, so on the host the earlier lines are
     * there too; each line's flag is still checked. */
    if (!waitLine(comm_, ch_, l + l1 - 1, flag, p_.recvPeer[i], &w0, &w1)) return false;
    for (size_t j = l0; j < l1; j++) {
      w0 = loadAcquire(&l[j].v[0]);
      w1 = loadAcquire(&l[j].v[1]);
      if (((uint32_t)(w0 >> 32) != flag || (uint32_t)(w1 >> 32) != flag) &&
          !waitLine(comm_, ch_, l + j, flag, p_.recvPeer[i], &w0, &w1))
        return false;
      recvTmp_[i][j] = (w0 & 0xffffffffull) | (w1 << 32);
    }
    return true;
  }

  PLEXUS_HD void writeLines(int i, size_t l0, size_t l1) {
    volatile plexusLLFifoLine_v1_t* l = lines(p_.send[i], p_.sendStep[i]);
    const uint64_t flag = (uint64_t)(uint32_t)(p_.sendStep[i] + 1) << 32;
    for (size_t j = l0; j < l1; j++) {
      /* Each 8-byte word is one store: its flag is never seen without its data. */
      storeRelaxed(&l[j].v[0], flag | (sendTmp_[j] & 0xffffffffull));
      storeRelaxed(&l[j].v[1], flag | (sendTmp_[j] >> 32));
    }
  }

  const plexusDevComm_v1_t* comm_;
  plexusDevChannel_v1_t* ch_;
  int tid_, nthreads_;
  const T* input_;
  T* output_;
  F func_;
  PeerConns p_;
  /* Staging for one slice: received lines unpacked, and the result packed into lines. */
  alignas(16) uint64_t recvTmp_[PLEXUS_MAX_PRIM_PEERS][PLEXUS_LL_SLOT_LINES];
  alignas(16) uint64_t sendTmp_[PLEXUS_LL_SLOT_LINES];
};

}  // namespace plexus::dev

#endif /* PLEXUS_DEVICE_PRIMITIVES_LL_H_ */
