/*
 * Ring ReduceScatter step loop (NCCL's runRing for ReduceScatter): the reduction of rank r's block
 * starts at the rank after r and travels the ring; each rank sends the block of the rank before it,
 * adds its own input to nranks - 2 blocks passing by, and finally adds its input to its own block
 * and writes it to recvbuff, applying the operator's post-op.
 *
 * w->count is the per-rank block; sendbuff holds nranks blocks, rank r's at r * count; recvbuff holds
 * one block (offsets into it are within the block). In place: recvbuff == sendbuff + rank * count.
 */
#pragma once

#include "ring_common.h"

namespace plexus::ring {

template <typename T, typename F>
PLEXUS_HD void runReduceScatter(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch,
                                const plexusDevWork_v1_t* w, int tid, int nthreads) {
  const int nranks = comm->nRanks;
  const int rank = comm->rank;
  const size_t count = w->count;
  size_t chOff, chCount;
  ringChannelPart<T>(w, ch, count, &chOff, &chCount);
  if (chCount == 0) return;

  if (nranks == 1) {
    localCopy<T, F>(w, tid, nthreads, (const T*)w->sendbuff + chOff, (T*)w->recvbuff + chOff, chCount, true);
    return;
  }

  RingPrims<T, F> prims(comm, ch, tid, nthreads, w->proto, w->sendbuff, w->recvbuff, workRedOpArg<T>(w));
  const size_t chunk = workChunk(w, chCount);
  auto inOff = [&](int r, size_t blockOff) { return (size_t)r * count + blockOff; };
  for (size_t base = 0; base < chCount && prims.ok(); base += chunk) {
    const size_t blk = chOff + base, n = minSize(chunk, chCount - base);
    prims.send(inOff(ringRankAt(ch, nranks, -1), blk), n);
    for (int j = 2; j < nranks; j++) prims.recvReduceSend(inOff(ringRankAt(ch, nranks, -j), blk), n);
    prims.recvReduceCopy(inOff(rank, blk), blk, n, /*postOp=*/true);
  }
}

}  // namespace plexus::ring
