/*
 * Primitives over the LL protocol: the same operations as primitives.h, for small messages. Data
 * travels in 16-byte lines whose two 8-byte words each carry 4 bytes of data and a flag (step + 1),
 * NCCL's ncclLLFifoLine, so a receiver polls the data itself and needs no separate tail: one cache
 * line crosses per line instead of a tail and a slot. Credit for reusing a slot still flows back
 * through head; the sender also advances tail so that Simple and LL operations can share a
 * connection's step count.
 *
 * CUDA: every thread handles whole lines in registers (thread t takes lines t, t + nthreads, ...): a
 * line's 8 payload bytes are one Pack of elements, read from each recv peer once its flags say so,
 * combined with the input and the output as the operation asks (foldLane), and written out, one
 * 16-byte store per send peer. The host's one thread stages a slice instead (hostLines), which a CPU
 * runs faster. Both backends write and read the same lines with the same handshake, so a host and a
 * CUDA peer interoperate over one buffer.
 *
 * Step s's lines sit in slot s % llSlots of the LL buffer, and a sender runs up to llSlots steps ahead (llSlotsOf):
 * more than Simple's PLEXUS_STEPS where the transport offers them, so that a rank that leads does many small
 * operations before it must wait for its receiver.
 *
 * Where a proxy carries the connection (PLEXUS_CONN_LL_IN_SLOTS) the lines of step s sit in Simple slot
 * s % PLEXUS_STEPS; the sender records their bytes in connFifo and publishes tail, and a receiver reads
 * them once tail says the proxy delivered the slot.
 */
#ifndef PLEXUS_DEVICE_PRIMITIVES_LL_H_
#define PLEXUS_DEVICE_PRIMITIVES_LL_H_

#include "../device_v1.h"
#include "arch.h"
#include "primitives.h"
#include "reduce_copy.h"

#if !defined(__CUDA_ARCH__)
#include <string.h>
#endif

namespace plexus::dev {

/* B bytes of consecutive elements of T, in registers: what one thread holds of a line (LL: 8 bytes;
 * LL128: 16 bytes on CUDA, the whole 120 on the host). Elements never straddle a line (T is at most 8
 * bytes and B a multiple of 8). */
template <typename T, int B>
union Pack {
  uint64_t w[B / 8];
  T e[B / sizeof(T)];
};

template <typename T, int B>
PLEXUS_HD void zeroPack(Pack<T, B>& x) {
  for (int k = 0; k < B / 8; k++) x.w[k] = 0;
}

/* The first ne elements from p (the rest zero). */
template <typename T, int B>
PLEXUS_HD void loadPack(Pack<T, B>& x, const T* p, int ne) {
  constexpr int N = B / (int)sizeof(T);
#if defined(__CUDA_ARCH__)
  if (ne == N && ((uintptr_t)p & 7) == 0) {
    for (int k = 0; k < B / 8; k++) x.w[k] = ((const uint64_t*)p)[k];
    return;
  }
  zeroPack(x);
  for (int i = 0; i < N; i++)
    if (i < ne) x.e[i] = p[i];
#else
  if (ne == N) {
    memcpy(&x, p, B);
    return;
  }
  zeroPack(x);
  memcpy(&x, p, (size_t)ne * sizeof(T));
#endif
}

/* The first ne elements to p. */
template <typename T, int B>
PLEXUS_HD void storePack(T* p, const Pack<T, B>& x, int ne) {
#if defined(__CUDA_ARCH__)
  constexpr int N = B / (int)sizeof(T);
  if (ne == N && ((uintptr_t)p & 7) == 0) {
    for (int k = 0; k < B / 8; k++) ((uint64_t*)p)[k] = x.w[k];
    return;
  }
  for (int i = 0; i < N; i++)
    if (i < ne) p[i] = x.e[i];
#else
  if (ne == B / (int)sizeof(T))
    memcpy(p, &x, B); /* a constant size: inlined moves, no call */
  else
    memcpy(p, &x, (size_t)ne * sizeof(T));
#endif
}

/* One thread's share of a line, combined as the primitive's flags say, in the order of Simple's
 * reduceCopy sources: the input (Src, with the operator's pre-op), then each recv peer's values in
 * peer order with the output's own values at selfPos among them (recvReduceOrdered, sendFromOutput);
 * the post-op last where asked. recvPack(i, pack) waits for recv peer i's share and reads it; false
 * when the wait failed (abort, timeout). */
template <typename T, typename F, int B, typename RecvPack>
PLEXUS_HD bool foldLane(const F& f, unsigned flags, int nrecv, int selfPos, bool postOp, const T* in, const T* self,
                        int ne, RecvPack recvPack, Pack<T, B>& acc) {
  constexpr int N = B / (int)sizeof(T);
  bool have = false;
  Pack<T, B> x;
  zeroPack(acc); /* always assigned below; this tells the compiler so */
  auto take = [&]() {
    if (!have) {
      acc = x;
      have = true;
    } else {
      for (int e = 0; e < N; e++) acc.e[e] = f.op(acc.e[e], x.e[e]);
    }
  };
  if (flags & kPrimSrc) {
    loadPack(x, in, ne);
    if (F::hasPre)
      for (int e = 0; e < N; e++) x.e[e] = f.pre(x.e[e]);
    take();
  }
  for (int i = 0; i < nrecv; i++) {
    if (i == selfPos) {
      loadPack(x, self, ne);
      take();
    }
    if (!recvPack(i, x)) return false;
    take();
  }
  if (selfPos >= nrecv) {
    loadPack(x, self, ne);
    take();
  }
  if (F::hasPost && postOp)
    for (int e = 0; e < N; e++) acc.e[e] = f.post(acc.e[e]);
  return true;
}

/* One LL line, read whole: on CUDA one 16-byte volatile load (NCCL's ld.volatile.global.v4.u32), on
 * the host two 8-byte atomic loads. Each 8-byte word holds its own flag, so a word is never seen
 * without its data either way. */
PLEXUS_HD void loadLLLine(volatile plexusLLFifoLine_v1_t* l, uint64_t* w0, uint64_t* w1) {
#if defined(__CUDA_ARCH__)
  uint32_t d1, f1, d2, f2;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(d1), "=r"(f1), "=r"(d2), "=r"(f2)
               : "l"(l)
               : "memory");
  *w0 = (uint64_t)d1 | ((uint64_t)f1 << 32);
  *w1 = (uint64_t)d2 | ((uint64_t)f2 << 32);
#else
  *w0 = loadAcquire(&l->v[0]);
  *w1 = loadAcquire(&l->v[1]);
#endif
}

/* Writes one LL line: 8 bytes of data, and flag in both halves. */
PLEXUS_HD void storeLLLine(volatile plexusLLFifoLine_v1_t* l, uint64_t data, uint32_t flag) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(l), "r"((uint32_t)data), "r"(flag),
               "r"((uint32_t)(data >> 32)), "r"(flag)
               : "memory");
#else
  const uint64_t f = (uint64_t)flag << 32;
  storeRelaxed(&l->v[0], f | (data & 0xffffffffull));
  storeRelaxed(&l->v[1], f | (data >> 32));
#endif
}

/* Whether both words of a line, as loaded, carry flag. */
PLEXUS_HD bool lineCarries(uint64_t w0, uint64_t w1, uint32_t flag) {
  return (uint32_t)(w0 >> 32) == flag && (uint32_t)(w1 >> 32) == flag;
}

/* Waits until both words of a line carry flag; false on abort or timeout (the channel says which). */
PLEXUS_HD bool waitLine(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, volatile plexusLLFifoLine_v1_t* line,
                        uint32_t flag, int peer, uint64_t* w0, uint64_t* w1) {
  return waitUntil(comm, ch, peer, 0, [&]() {
    loadLLLine(line, w0, w1);
    return lineCarries(*w0, *w1, flag);
  });
}

struct LLProtocol {
  /* Elements per step (a slot of PLEXUS_LL_SLOT_LINES lines): what step loops may take as their chunk. */
  template <typename T>
  static PLEXUS_HD size_t sliceElems() {
    return (size_t)PLEXUS_LL_SLOT_LINES * (8 / sizeof(T));
  }

  /* Step `step`'s lines on connector c. */
  static PLEXUS_HD volatile plexusLLFifoLine_v1_t* lines(plexusConnInfo_v1_t* c, uint64_t step) {
    if (c->flags & PLEXUS_CONN_LL_IN_SLOTS)
      return (volatile plexusLLFifoLine_v1_t*)(c->buffs[PLEXUS_PROTO_SIMPLE] +
                                               (size_t)(step % PLEXUS_STEPS) * (size_t)c->stepSize);
    return (volatile plexusLLFifoLine_v1_t*)(c->buffs[PLEXUS_PROTO_LL]) +
           (size_t)(step & (llSlotsOf(c) - 1)) * PLEXUS_LL_SLOT_LINES;
  }

  /* The current step's lines and flag on each recv and send connector, found once per step. */
  struct Step {
    volatile plexusLLFifoLine_v1_t* recv[PLEXUS_MAX_PRIM_PEERS];
    volatile plexusLLFifoLine_v1_t* send[PLEXUS_MAX_PRIM_PEERS];
    uint32_t recvFlag[PLEXUS_MAX_PRIM_PEERS], sendFlag[PLEXUS_MAX_PRIM_PEERS];
  };

  /* Recv peer i's line j, once its flags say so. */
  template <typename T, typename F>
  static PLEXUS_HD bool recvLine(PrimState<T, F>& s, const Step& st, int i, size_t j, uint64_t* data) {
    uint64_t w0, w1;
    if (!waitLine(s.comm, s.ch, st.recv[i] + j, st.recvFlag[i], s.p.recvPeer[i], &w0, &w1)) return false;
    *data = (w0 & 0xffffffffull) | (w1 << 32);
    return true;
  }

  template <typename T, typename F>
  static PLEXUS_HD_OUTLINE void run(PrimState<T, F>& s, unsigned flags, size_t inOff, size_t outOff, size_t nelem,
                                    bool postOp, int selfPos) {
    constexpr int N = 8 / (int)sizeof(T);
    const size_t slice = sliceElems<T>();
    const int nr = (flags & kPrimRecv) ? s.p.nrecv : 0, ns = (flags & kPrimSend) ? s.p.nsend : 0;
    for (size_t done = 0; done < nelem; done += slice) {
      const size_t n = nelem - done < slice ? nelem - done : slice, nlines = (n + N - 1) / N;
      bool good = true;
      if (s.tid == 0) good = s.waitStep(flags, (nelem - done + slice - 1) / slice, PLEXUS_PROTO_LL);
      if (s.stopAll(!good)) return;
      const T* in = (flags & kPrimSrc) ? s.input + inOff + done : nullptr;
      T* out = ((flags & kPrimDst) || selfPos >= 0) ? s.output + outOff + done : nullptr;
      Step st;
      for (int i = 0; i < nr; i++) {
        st.recv[i] = lines(s.p.recv[i], s.p.recvStep[i]);
        st.recvFlag[i] = (uint32_t)(s.p.recvStep[i] + 1);
      }
      for (int i = 0; i < ns; i++) {
        st.send[i] = lines(s.p.send[i], s.p.sendStep[i]);
        st.sendFlag[i] = (uint32_t)(s.p.sendStep[i] + 1);
      }
#if defined(__CUDA_ARCH__)
      /* Line j: thread j % nthreads, in registers. */
      for (size_t j = (size_t)s.tid; good && j < nlines; j += (size_t)s.nthreads) {
        const size_t e0 = j * N;
        const int ne = n - e0 < (size_t)N ? (int)(n - e0) : N;
        Pack<T, 8> acc;
        good = foldLane<T, F, 8>(
            s.func, flags, nr, selfPos, postOp, in ? in + e0 : nullptr, out ? out + e0 : nullptr, ne,
            [&](int i, Pack<T, 8>& x) { return recvLine(s, st, i, j, &x.w[0]); }, acc);
        if (!good) break;
        if (flags & kPrimDst) storePack(out + e0, acc, ne);
        for (int i = 0; i < ns; i++) storeLLLine(st.send[i] + j, acc.w[0], st.sendFlag[i]);
      }
#else
      good = hostLines(s, st, flags, in, out, n, nlines, postOp, selfPos);
#endif
      /* Every thread has read its lines before head returns the slot. */
      if (s.stopAll(!good)) return;
      s.postStep(flags, (int64_t)(nlines * sizeof(plexusLLFifoLine_v1_t)), false);
    }
  }

#if !defined(__CUDA_ARCH__)
  /* Steps of at most this many lines (4 cache lines) are polled whole (hostLines). Beyond, a receiver that polls
   * every line takes each cache line from the sender while it writes them (2 ranks, 256 B: no gain, 512 B slower). */
  static constexpr size_t kPollAllLines = 16;

  /* Fetches the cache lines that hold nlines LL lines from l, for writing or for reading. */
  static void prefetchLines(volatile plexusLLFifoLine_v1_t* l, size_t nlines, bool forWrite) {
    for (size_t j = 0; j < nlines; j += 64 / sizeof(plexusLLFifoLine_v1_t)) {
      if (forWrite) prefetchForWrite(&l[j]);
      else prefetchForRead(&l[j]);
    }
  }

  /* The host's one thread stages the slice: it unpacks each recv peer's lines into a contiguous array,
   * runs Simple's reduceCopy over the arrays, the input and the output (vectorized, one call per slice),
   * and packs the result into each send peer's lines. Faster on a CPU than line by line in registers,
   * and the same lines and handshake. */
  template <typename T, typename F>
  static bool hostLines(PrimState<T, F>& s, const Step& st, unsigned flags, const T* in, T* out, size_t n,
                        size_t nlines, bool postOp, int selfPos) {
    alignas(16) uint64_t recvTmp[PLEXUS_MAX_PRIM_PEERS][PLEXUS_LL_SLOT_LINES];
    alignas(16) uint64_t sendTmp[PLEXUS_LL_SLOT_LINES];
    const int nr = (flags & kPrimRecv) ? s.p.nrecv : 0, ns = (flags & kPrimSend) ? s.p.nsend : 0;
    const T* srcs[PLEXUS_MAX_SRCS];
    T* dsts[PLEXUS_MAX_DSTS];
    int nsrc = 0, ndst = 0;
    if (flags & kPrimSrc) srcs[nsrc++] = in;
    for (int i = 0; i < nr; i++) {
      volatile plexusLLFifoLine_v1_t* l = st.recv[i];
      const uint32_t flag = st.recvFlag[i];
      uint64_t w0, w1;
      bool early;
      if (nlines <= kPollAllLines) {
        /* A few cache lines: each poll loads them all, so that their transfers overlap. Waiting on the last and
         * then reading the others takes one transfer after the other (2 ranks, us: AllReduce 64 B 0.66-0.70 ->
         * 0.59-0.61, AllGather 128 B 0.64-0.67 -> 0.58-0.59; 32 B, a single cache line, 0.55 either way). */
        auto all = [&]() {
          bool ok = true;
          for (size_t j = 0; j < nlines; j++) {
            loadLLLine(l + j, &w0, &w1);
            ok &= lineCarries(w0, w1, flag);
            recvTmp[i][j] = (w0 & 0xffffffffull) | (w1 << 32);
          }
          return ok;
        };
        early = all();
        if (!early && !waitUntil(s.comm, s.ch, s.p.recvPeer[i], 0, all)) return false;
      } else {
        /* Wait on the last line first: polling many lines the sender is still writing would bounce each cache
         * line between the two cores. The sender writes in order, so the earlier lines are there too; each line's
         * flags are still checked. */
        loadLLLine(l + nlines - 1, &w0, &w1);
        early = lineCarries(w0, w1, flag);
        if (!early && !waitLine(s.comm, s.ch, l + nlines - 1, flag, s.p.recvPeer[i], &w0, &w1)) return false;
        for (size_t j = 0; j < nlines; j++) {
          loadLLLine(l + j, &w0, &w1);
          if (!lineCarries(w0, w1, flag) && !waitLine(s.comm, s.ch, l + j, flag, s.p.recvPeer[i], &w0, &w1))
            return false;
          recvTmp[i][j] = (w0 & 0xffffffffull) | (w1 << 32);
        }
      }
      /* A sender that is ahead (this step's lines were here before this rank looked) has likely written the next
       * step's lines too: fetch them while this operation and the next one's launch run, not when the next one
       * polls them. Only where this rank receives and does not send: where it also sends, ranks move in step, and
       * a copy read early only costs the sender a second transfer. With the root's prefetch below, 2 ranks: 8 B
       * Broadcast and Reduce 0.30 -> 0.24 us. */
      if (early && !ns) prefetchLines(lines(s.p.recv[i], s.p.recvStep[i] + 1), nlines, false);
      if (i == selfPos) srcs[nsrc++] = out;
      srcs[nsrc++] = (const T*)recvTmp[i];
    }
    if (selfPos >= nr) srcs[nsrc++] = out;
    if (flags & kPrimDst) dsts[ndst++] = out;
    if (ns) dsts[ndst++] = (T*)sendTmp;
    reduceCopy<T, F>(0, 1, s.func, srcs, nsrc, (flags & kPrimSrc) != 0, dsts, ndst, postOp, n);
    for (int i = 0; i < ns; i++) {
      volatile plexusLLFifoLine_v1_t* l = st.send[i];
      const uint64_t flag = (uint64_t)st.sendFlag[i] << 32;
      /* The reader's core holds these cache lines from the slot's last use: ask for all of them at once, or
       * each store waits for its own line in turn (2 ranks, AllReduce of 1 KiB over LL: 1.6 -> 1.1 us). */
      prefetchLines(l, nlines, true);
      /* Each 8-byte word is one store: its flag is never seen without its data. */
      for (size_t j = 0; j < nlines; j++) {
        storeRelaxed(&l[j].v[0], flag | (sendTmp[j] & 0xffffffffull));
        storeRelaxed(&l[j].v[1], flag | (sendTmp[j] >> 32));
      }
      /* A rank that leads (setLeads: a root) waits for nobody and runs ahead of its receivers: ask now for the next
       * step's cache lines (as many as this step used), so that the next operation's stores find them here instead
       * of waiting for them at the first locked instruction after them (the stream's, the event's). Not where ranks
       * move in step (a direct AllReduce sends, then receives): the receiver may be polling those lines already,
       * and fetching them early cost 10% at 64 B. An operation of one cache line is over before the fetch is: ask
       * for the step after next instead (2 ranks, 8 B Broadcast and Reduce: 165 -> 145 ns; 64 B unchanged at two
       * steps ahead or one; three or more ahead was slower at 8 B). */
      const uint64_t ahead = nlines * sizeof(plexusLLFifoLine_v1_t) <= 64 ? 2 : 1;
      if (s.leads) prefetchLines(lines(s.p.send[i], s.p.sendStep[i] + ahead), nlines, true);
    }
    return true;
  }
#endif
};

template <typename T, typename F>
using PrimitivesLL = OneProtocolPrims<T, F, LLProtocol>;

}  // namespace plexus::dev

#endif /* PLEXUS_DEVICE_PRIMITIVES_LL_H_ */
