/*
 * Ring AllGather step loop (NCCL's runRing for AllGather): each rank copies its own block into place
 * and sends it on (only sends when in place, sendbuff == recvbuff + rank * count); the block of the
 * rank j positions back arrives at step j and is copied and forwarded, the last one only copied.
 *
 * w->count is the per-rank block; recvbuff holds nranks blocks, rank r's at r * count. The channels
 * split the block, so each moves the same part of every rank's block, in chunks.
 */
#pragma once

#include "ring_common.h"

namespace plexus::ring {

/* T is one of CopyType's unsigned types: AllGather moves bytes, whatever the datatype. */
template <typename T>
PLEXUS_HD void runAllGather(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, const plexusDevWork_v1_t* w,
                            int tid, int nthreads) {
  using F = FuncSum<T>;
  const int nranks = comm->nRanks;
  const int rank = comm->rank;
  const size_t count = w->count;
  size_t chOff, chCount;
  ringChannelPart<T>(w, ch, count, &chOff, &chCount);
  if (chCount == 0) return;

  if (nranks == 1) {
    localCopy<T, F>(w, tid, nthreads, (const T*)w->sendbuff + chOff, (T*)w->recvbuff + chOff, chCount, false);
    return;
  }

  const bool inPlace = (const T*)w->sendbuff == (const T*)w->recvbuff + (size_t)rank * count;
  /* Input: sendbuff (one block, offsets within it); output: recvbuff (all blocks). */
  RingPrims<T, F> prims(comm, ch, tid, nthreads, w->proto, w->sendbuff, w->recvbuff, 0);
  const size_t chunk = workChunk(w, chCount);
  auto outOff = [&](int r, size_t blockOff) { return (size_t)r * count + blockOff; };
  for (size_t base = 0; base < chCount && prims.ok(); base += chunk) {
    const size_t blk = chOff + base, n = minSize(chunk, chCount - base);
    if (inPlace) prims.send(blk, n);
    else prims.copySend(blk, outOff(rank, blk), n);
    for (int j = 1; j < nranks - 1; j++) prims.recvCopySend(outOff(ringRankAt(ch, nranks, -j), blk), n);
    prims.recv(outOff(ringRankAt(ch, nranks, 1), blk), n);
  }
}

}  // namespace plexus::ring
