/*
 * Ring AllReduce step loop: reduce-scatter around the ring, then all-gather. Compiles as host C++ and
 * as CUDA. Each channel owns a contiguous part of the buffer; within it the ring runs loops of
 * nranks chunks, so large buffers stream through the connectors' slots.
 */
#pragma once

#include "ring_common.h"

namespace plexus::ring {

template <typename T, typename F>
PLEXUS_HD void runAllReduce(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, const plexusDevWork_v1_t* w,
                            int tid, int nthreads) {
  const int nranks = comm->nRanks;
  const size_t align = lineElems<T>();
  size_t chOff, chCount;
  ringChannelPart<T>(w, ch, w->count, &chOff, &chCount);
  if (chCount == 0) return;

  if (nranks == 1) {
    /* Still apply the operator's pre/post ops (Avg, PreMulSum) as the collective would. */
    localCopy<T, F>(w, tid, nthreads, (const T*)w->sendbuff + chOff, (T*)w->recvbuff + chOff, chCount, true);
    return;
  }

  const int ringIx = ch->ring.index;
  RingPrims<T, F> prims(comm, ch, tid, nthreads, w->proto, w->sendbuff, w->recvbuff, workRedOpArg<T>(w));
  const size_t chunk = workChunk(w, chCount);
  const size_t loopSize = (size_t)nranks * chunk;

  for (size_t base = 0; base < chCount && prims.ok(); base += loopSize) {
    const size_t remaining = chCount - base;
    size_t realChunk = minSize(chunk, alignUp(divUp(remaining, nranks), align));
    auto part = [&](int c, size_t* off, size_t* n) {
      size_t o = (size_t)c * realChunk;
      *off = chOff + base + o;
      *n = o < remaining ? minSize(realChunk, remaining - o) : 0;
    };
    size_t off, n;
    /* Reduce-scatter: after nranks-1 steps this rank holds the full reduction of chunk ringIx. */
    part((ringIx + nranks - 1) % nranks, &off, &n);
    prims.send(off, n);
    for (int j = 2; j < nranks; j++) {
      part((ringIx + nranks - j) % nranks, &off, &n);
      prims.recvReduceSend(off, n);
    }
    part(ringIx, &off, &n);
    prims.recvReduceCopySend(off, off, n, /*postOp=*/true);
    /* All-gather the reduced chunks. */
    for (int j = 1; j < nranks - 1; j++) {
      part((ringIx + nranks - j) % nranks, &off, &n);
      prims.recvCopySend(off, n);
    }
    part((ringIx + 1) % nranks, &off, &n);
    prims.recv(off, n);
  }
}

}  // namespace plexus::ring
