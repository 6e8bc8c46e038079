/*
 * Ring Broadcast step loop (NCCL's runRing for Broadcast): the ring starts at root. Root copies its
 * input to its output and sends it (only sends when in place), every other rank receives, copies
 * and forwards, and the rank before root in the ring only receives. Each channel owns a part of the
 * buffer and pipelines it through the connectors in chunks.
 */
#pragma once

#include "ring_common.h"

namespace plexus::ring {

/* T is one of CopyType's unsigned types: Broadcast moves bytes, whatever the datatype. */
template <typename T>
PLEXUS_HD void runBroadcast(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, const plexusDevWork_v1_t* w,
                            int tid, int nthreads) {
  using F = FuncSum<T>;
  const int nranks = comm->nRanks;
  size_t chOff, chCount;
  ringChannelPart<T>(w, ch, w->count, &chOff, &chCount);
  if (chCount == 0) return;

  if (nranks == 1) {
    localCopy<T, F>(w, tid, nthreads, (const T*)w->sendbuff + chOff, (T*)w->recvbuff + chOff, chCount, false);
    return;
  }

  /* Distance from root along the ring: 0 at root, nranks - 1 at the rank before it. */
  const int rootIx = ringIndexOf(ch, nranks, w->root);
  const int dist = (ch->ring.index - rootIx + nranks) % nranks;
  const bool inPlace = w->sendbuff == w->recvbuff;
  RingPrims<T, F> prims(comm, ch, tid, nthreads, w->proto, w->sendbuff, w->recvbuff, 0);
  prims.setLeads(dist == 0);
  const size_t chunk = workChunk(w, chCount);
  for (size_t base = 0; base < chCount && prims.ok(); base += chunk) {
    const size_t off = chOff + base, n = minSize(chunk, chCount - base);
    if (dist == 0) {
      if (inPlace) prims.send(off, n);
      else prims.copySend(off, off, n);
    } else if (dist == nranks - 1) {
      prims.recv(off, n);
    } else {
      prims.recvCopySend(off, n);
    }
  }
}

}  // namespace plexus::ring
