/*
 * What every ring step loop shares: the channel's part of the buffer, the pipeline of chunks, the
 * one-rank fallback, and the element-size types the non-reducing collectives run on. Compiles as
 * host C++ and as CUDA.
 */
#pragma once

#include <plexus/device/protocol_prims.h>
#include <plexus/device/work.h>

#include <stdint.h>

namespace plexus::ring {

using namespace plexus::dev;

/* The ring's primitives: recv from the ring's prev, send to its next, over the work's protocol. */

template <typename T, typename F>
class RingPrims : public ProtocolPrims<T, F> {
 public:
  PLEXUS_HD RingPrims(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, int tid, int nthreads, int proto,
                      const void* input, void* output, uint64_t redOpArg)
      : ProtocolPrims<T, F>(comm, ch, tid, nthreads, proto, &ch->ring.prev, 1, &ch->ring.next, 1, input, output,
                            redOpArg) {}
};

/* The part [*off, *off + *n) of `count` elements this channel owns. */
template <typename T>
PLEXUS_HD void ringChannelPart(const plexusDevWork_v1_t* w, const plexusDevChannel_v1_t* ch, size_t count,
                               size_t* off, size_t* n) {
  channelPart(w, ch->id, count, lineElems<T>(), off, n);
}

/* Position of `rank` in the channel's ring (userRanks[i] is the rank at position i). */
PLEXUS_HD int ringIndexOf(const plexusDevChannel_v1_t* ch, int nranks, int rank) {
  for (int i = 0; i < nranks; i++)
    if (ch->ring.userRanks[i] == rank) return i;
  return -1;
}

/* The rank `k` positions after this one along the ring (k may be negative). */
PLEXUS_HD int ringRankAt(const plexusDevChannel_v1_t* ch, int nranks, int k) {
  int i = ((ch->ring.index + k) % nranks + nranks) % nranks;
  return ch->ring.userRanks[i];
}

}  // namespace plexus::ring
