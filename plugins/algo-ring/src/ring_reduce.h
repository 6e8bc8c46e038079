/*
 * Ring Reduce step loop (NCCL's runRing for Reduce): the ring ends at root. The rank after root
 * sends its input, every rank after it adds its own and forwards, and root adds its input last and
 * writes the result, applying the operator's post-op (SumPostDiv's division for integer Avg).
 * Each channel owns a part of the buffer and pipelines it through the connectors in chunks.
 */
#pragma once

#include "ring_common.h"

namespace plexus::ring {

template <typename T, typename F>
PLEXUS_HD void runReduce(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, const plexusDevWork_v1_t* w,
                         int tid, int nthreads) {
  const int nranks = comm->nRanks;
  size_t chOff, chCount;
  ringChannelPart<T>(w, ch, w->count, &chOff, &chCount);
  if (chCount == 0) return;

  if (nranks == 1) {
    localCopy<T, F>(w, tid, nthreads, (const T*)w->sendbuff + chOff, (T*)w->recvbuff + chOff, chCount, true);
    return;
  }

  /* Distance from root along the ring: 0 at root, 1 at the rank after it (the first sender). */
  const int rootIx = ringIndexOf(ch, nranks, w->root);
  const int dist = (ch->ring.index - rootIx + nranks) % nranks;
  RingPrims<T, F> prims(comm, ch, tid, nthreads, w->proto, w->sendbuff, w->recvbuff, workRedOpArg<T>(w));
  prims.setLeads(dist == 1);
  const size_t chunk = workChunk(w, chCount);
  for (size_t base = 0; base < chCount && prims.ok(); base += chunk) {
    const size_t off = chOff + base, n = minSize(chunk, chCount - base);
    if (dist == 1) prims.send(off, n);
    else if (dist == 0) prims.recvReduceCopy(off, off, n, /*postOp=*/true);
    else prims.recvReduceSend(off, n);
  }
}

}  // namespace plexus::ring
