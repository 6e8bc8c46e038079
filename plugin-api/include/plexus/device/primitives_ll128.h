/*
 * Primitives over the LL128 protocol (NCCL's): the same operations as primitives.h, over 128-byte lines
 * of 16 uint64 words, 15 of data (120 bytes) and a flag word (step + 1), device_v1.h. Like LL a
 * receiver polls the lines and needs no tail, but only one word in sixteen is a flag, so LL128 keeps
 * most of Simple's bandwidth.
 *
 * The flag is written only once the line's data is visible, and read before the data:
 *   CUDA: 8 threads per line (a lane group), each 16 bytes (lane 7: word 14, and the flag); each lane
 *     stores its words, the warp synchronises, and lane 7 fences and stores the flag. A reader lane
 *     polls the flag word, fences, then loads its words. No reliance on NVLink's 128-byte atomicity: the
 *     peer may be in host-mapped memory.
 *   Host: one thread per line; the data words, then the flag with release; the flag with acquire, then
 *     the data.
 * Step s's lines are at slot s % PLEXUS_STEPS of buffs[PLEXUS_PROTO_LL128], or, where a proxy carries
 * the connection (PLEXUS_CONN_LL_IN_SLOTS), of the Simple buffer, published through tail and connFifo
 * as LL's.
 */
#ifndef PLEXUS_DEVICE_PRIMITIVES_LL128_H_
#define PLEXUS_DEVICE_PRIMITIVES_LL128_H_

#include "../device_v1.h"
#include "arch.h"
#include "primitives.h"
#include "primitives_ll.h"

#if !defined(__CUDA_ARCH__)
#include <string.h>
#endif

namespace plexus::dev {

struct LL128Protocol {
  /* Elements per step over connectors of Simple step stepSize: what step loops may take as their chunk. */
  template <typename T>
  static PLEXUS_HD size_t sliceElems(size_t stepSize) {
    return PLEXUS_LL128_STEP_LINES(stepSize) * (PLEXUS_LL128_DATA_BYTES / sizeof(T));
  }

  /* The first line of step `step` on connector c. */
  static PLEXUS_HD volatile uint64_t* lines(plexusConnInfo_v1_t* c, uint64_t step) {
    char* slot = (c->flags & PLEXUS_CONN_LL_IN_SLOTS)
                     ? c->buffs[PLEXUS_PROTO_SIMPLE] + (size_t)(step % PLEXUS_STEPS) * (size_t)c->stepSize
                     : c->buffs[PLEXUS_PROTO_LL128] +
                           (size_t)(step % PLEXUS_STEPS) * PLEXUS_LL128_SLOT_LINES * PLEXUS_LL128_LINE_BYTES;
    return (volatile uint64_t*)slot;
  }

  /* The current step's lines and flag on each recv and send connector, found once per step. */
  struct Step {
    volatile uint64_t* recv[PLEXUS_MAX_PRIM_PEERS];
    volatile uint64_t* send[PLEXUS_MAX_PRIM_PEERS];
    uint64_t recvFlag[PLEXUS_MAX_PRIM_PEERS], sendFlag[PLEXUS_MAX_PRIM_PEERS];
  };

  /* Waits until recv peer i's line j carries its flag, then acquires the line's data. */
  template <typename T, typename F>
  static PLEXUS_HD bool waitFlag(PrimState<T, F>& s, const Step& st, int i, size_t j) {
    volatile uint64_t* flag = st.recv[i] + j * PLEXUS_LL128_LINE_WORDS + PLEXUS_LL128_FLAG_WORD;
    const uint64_t want = st.recvFlag[i];
    if (!waitUntil(s.comm, s.ch, s.p.recvPeer[i], 0, [&]() { return loadFlag(flag) == want; })) return false;
    flagAcquired();
    return true;
  }

  template <typename T, typename F>
  static PLEXUS_HD_OUTLINE void run(PrimState<T, F>& s, unsigned flags, size_t inOff, size_t outOff, size_t nelem,
                                    bool postOp, int selfPos) {
    const size_t slice = sliceElems<T>(s.minStep);
    const int nr = (flags & kPrimRecv) ? s.p.nrecv : 0, ns = (flags & kPrimSend) ? s.p.nsend : 0;
    for (size_t done = 0; done < nelem; done += slice) {
      const size_t n = nelem - done < slice ? nelem - done : slice;
      const size_t nlines = (n * sizeof(T) + PLEXUS_LL128_DATA_BYTES - 1) / PLEXUS_LL128_DATA_BYTES;
      bool good = true;
      if (s.tid == 0) good = s.waitStep(flags, (nelem - done + slice - 1) / slice, PLEXUS_PROTO_LL128);
      if (s.stopAll(!good)) return;
      const T* in = (flags & kPrimSrc) ? s.input + inOff + done : nullptr;
      T* out = ((flags & kPrimDst) || selfPos >= 0) ? s.output + outOff + done : nullptr;
      Step st;
      for (int i = 0; i < nr; i++) {
        st.recv[i] = lines(s.p.recv[i], s.p.recvStep[i]);
        st.recvFlag[i] = s.p.recvStep[i] + 1;
      }
      for (int i = 0; i < ns; i++) {
        st.send[i] = lines(s.p.send[i], s.p.sendStep[i]);
        st.sendFlag[i] = s.p.sendStep[i] + 1;
      }
#if defined(__CUDA_ARCH__)
      good = deviceLines(s, st, flags, in, out, n, nlines, postOp, selfPos);
#else
      good = hostLines(s, st, flags, in, out, n, nlines, postOp, selfPos);
#endif
      /* Every thread has read its lines before head returns the slot. */
      if (s.stopAll(!good)) return;
      s.postStep(flags, (int64_t)(nlines * PLEXUS_LL128_LINE_BYTES), false);
    }
  }

#if defined(__CUDA_ARCH__)
  /* CUDA: 8 lanes (threads) per line, 16 bytes each (lane 7: word 14 and the flag); group g of the
   * block's nthreads / 8 takes lines g, g + groups, ... Every warp runs the same number of passes, so
   * that its lanes meet at each warpSync. */
  template <typename T, typename F>
  static __device__ bool deviceLines(PrimState<T, F>& s, const Step& st, unsigned flags, const T* in, T* out, size_t n,
                                     size_t nlines, bool postOp, int selfPos) {
    constexpr int kLanes = 8, kLaneBytes = 16;
    using P = Pack<T, kLaneBytes>;
    const int nr = (flags & kPrimRecv) ? s.p.nrecv : 0, ns = (flags & kPrimSend) ? s.p.nsend : 0;
    const int lane = s.tid % kLanes, group = s.tid / kLanes, ngroups = s.nthreads / kLanes;
    const int w0 = lane * 2, nw = lane == kLanes - 1 ? 1 : 2; /* this lane's data words of a line */
    const size_t bytes = n * sizeof(T);
    bool good = true;
    for (size_t base = 0; base < nlines; base += (size_t)ngroups) {
      const size_t j = base + (size_t)group;
      const bool mine = j < nlines;
      if (mine) {
        const size_t b0 = j * PLEXUS_LL128_DATA_BYTES + (size_t)w0 * 8;
        const size_t left = b0 < bytes ? bytes - b0 : 0;
        const int ne = (int)((left < (size_t)nw * 8 ? left : (size_t)nw * 8) / sizeof(T));
        const size_t e0 = b0 / sizeof(T);
        P acc;
        if (ne > 0) {
          good = foldLane<T, F, kLaneBytes>(
              s.func, flags, nr, selfPos, postOp, in ? in + e0 : nullptr, out ? out + e0 : nullptr, ne,
              [&](int i, P& x) {
                if (!waitFlag(s, st, i, j)) return false;
                volatile uint64_t* l = st.recv[i] + j * PLEXUS_LL128_LINE_WORDS + w0;
                x.w[0] = l[0];
                x.w[1] = nw > 1 ? l[1] : 0;
                return true;
              },
              acc);
          if (good && (flags & kPrimDst)) storePack(out + e0, acc, ne);
        } else {
          zeroPack(acc); /* past the data */
        }
        if (good)
          for (int i = 0; i < ns; i++) {
            volatile uint64_t* l = st.send[i] + j * PLEXUS_LL128_LINE_WORDS + w0;
            l[0] = acc.w[0];
            if (nw > 1) l[1] = acc.w[1];
          }
      }
      /* The line's data words are all written before its last lane publishes the flag, and only if
       * every lane of the warp got its share (a wait that failed stops the warp here). */
      warpSync();
      if (warpAny(!good)) return false;
      if (mine && lane == kLanes - 1)
        for (int i = 0; i < ns; i++)
          storeRelease(st.send[i] + j * PLEXUS_LL128_LINE_WORDS + PLEXUS_LL128_FLAG_WORD, st.sendFlag[i]);
    }
    return true;
  }
#else
  /* Host: one thread, line by line, the elements combined in place between the input, the output and
   * the lines (each line's 120 data bytes are contiguous), a whole line in one pass of fixed length. */
  template <typename T, typename F>
  static bool hostLines(PrimState<T, F>& s, const Step& st, unsigned flags, const T* in, T* out, size_t n,
                        size_t nlines, bool postOp, int selfPos) {
    constexpr size_t E = PLEXUS_LL128_DATA_BYTES / sizeof(T);
    const int nr = (flags & kPrimRecv) ? s.p.nrecv : 0, ns = (flags & kPrimSend) ? s.p.nsend : 0;
    const bool pre = (flags & kPrimSrc) != 0;
    /* As LL: wait on the last line first, rather than chase the sender line by line. */
    for (int i = 0; i < nr; i++)
      if (!waitFlag(s, st, i, nlines - 1)) return false;
    for (size_t j = 0; j < nlines; j++) {
      const size_t e0 = j * E, ne = n - e0 < E ? n - e0 : E;
      const T* srcs[PLEXUS_MAX_SRCS];
      T* dsts[PLEXUS_MAX_DSTS];
      int nsrc = 0, ndst = 0;
      if (flags & kPrimSrc) srcs[nsrc++] = in + e0;
      for (int i = 0; i < nr; i++) {
        if (!waitFlag(s, st, i, j)) return false;
        if (i == selfPos) srcs[nsrc++] = out + e0;
        srcs[nsrc++] = (const T*)const_cast<const uint64_t*>(st.recv[i] + j * PLEXUS_LL128_LINE_WORDS);
      }
      if (selfPos >= nr) srcs[nsrc++] = out + e0;
      if (flags & kPrimDst) dsts[ndst++] = out + e0;
      for (int i = 0; i < ns; i++) dsts[ndst++] = (T*)const_cast<uint64_t*>(st.send[i] + j * PLEXUS_LL128_LINE_WORDS);
      if (ne == E)
        reduceLine<T, F, E>(s.func, srcs, nsrc, pre, dsts, ndst, postOp);
      else
        reduceCopy<T, F>(0, 1, s.func, srcs, nsrc, pre, dsts, ndst, postOp, ne);
      /* The data words, then the flag with release. */
      for (int i = 0; i < ns; i++)
        storeRelease(st.send[i] + j * PLEXUS_LL128_LINE_WORDS + PLEXUS_LL128_FLAG_WORD, st.sendFlag[i]);
    }
    return true;
  }

  /* reduceCopy of exactly E elements (a whole line): loops of a fixed length, which the compiler
   * unrolls and vectorizes without a call. */
  template <typename T, typename F, size_t E>
  static inline void reduceLine(const F& f, const T* const* srcs, int nsrc, bool pre, T* const* dsts, int ndst,
                                bool post) {
    if (nsrc == 1 && !(F::hasPre && pre) && !(F::hasPost && post)) { /* a copy: straight through */
      for (int d = 0; d < ndst; d++) memcpy(dsts[d], srcs[0], E * sizeof(T));
      return;
    }
    T acc[E];
    if (F::hasPre && pre)
      for (size_t e = 0; e < E; e++) acc[e] = f.pre(srcs[0][e]);
    else
      memcpy(acc, srcs[0], sizeof acc);
    for (int k = 1; k < nsrc; k++)
      for (size_t e = 0; e < E; e++) acc[e] = f.op(acc[e], srcs[k][e]);
    if (F::hasPost && post)
      for (size_t e = 0; e < E; e++) acc[e] = f.post(acc[e]);
    for (int d = 0; d < ndst; d++) memcpy(dsts[d], acc, sizeof acc);
  }
#endif
};

template <typename T, typename F>
using PrimitivesLL128 = OneProtocolPrims<T, F, LL128Protocol>;

}  // namespace plexus::dev

#endif /* PLEXUS_DEVICE_PRIMITIVES_LL128_H_ */
