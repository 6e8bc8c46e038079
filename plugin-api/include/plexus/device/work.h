/*
 * Helpers every step loop needs to interpret a work item: which elements a channel owns.
 */
#ifndef PLEXUS_DEVICE_WORK_H_
#define PLEXUS_DEVICE_WORK_H_

#include <stddef.h>
#include <stdint.h>

#include "../device_v1.h"
#include "arch.h"

namespace plexus::dev {

/* The channels of a work item split `count` elements into contiguous parts, each a multiple of
 * `align` elements (but the last), so that every channel's part starts cache-line aligned. */
PLEXUS_HD void channelPart(const plexusDevWork_v1_t* w, int channelId, size_t count, size_t align, size_t* offset,
                           size_t* n) {
  size_t nch = w->nChannels ? w->nChannels : 1;
  size_t idx = (size_t)(channelId - w->channelLo);
  size_t per = (count + nch - 1) / nch;
  per = (per + align - 1) / align * align;
  size_t begin = idx * per < count ? idx * per : count;
  size_t end = begin + per < count ? begin + per : count;
  *offset = begin;
  *n = end - begin;
}

/* The operator's argument in T's bits, read through the pointer when the scalar lives in memory. */
template <typename T>
PLEXUS_HD uint64_t workRedOpArg(const plexusDevWork_v1_t* w) {
  if (!(w->flags & PLEXUS_WORK_REDOP_ARG_PTR)) return w->redOpArg;
  uint64_t bits = 0;
  const volatile unsigned char* src = (const volatile unsigned char*)(uintptr_t)w->redOpArg;
  for (size_t i = 0; i < sizeof(T); i++) bits |= (uint64_t)src[i] << (8 * i);
  return bits;
}

/* Elements per 64-byte cache line: channel parts start at multiples of it. */
template <typename T>
PLEXUS_HD size_t lineElems() {
  return 64 / sizeof(T) ? 64 / sizeof(T) : 1;
}

/* Elements per pipeline chunk of a step loop over a channel part of n elements. */
PLEXUS_HD size_t workChunk(const plexusDevWork_v1_t* w, size_t n) { return w->chunkCount ? w->chunkCount : (n ? n : 1); }

/* The unsigned type of T's size: collectives that only move bytes (Broadcast, AllGather) run on it,
 * so that each element size is compiled once whatever the datatype. */
template <size_t N> struct BitsOfSize;
template <> struct BitsOfSize<1> { using type = uint8_t; };
template <> struct BitsOfSize<2> { using type = uint16_t; };
template <> struct BitsOfSize<4> { using type = uint32_t; };
template <> struct BitsOfSize<8> { using type = uint64_t; };
template <typename T> using CopyType = typename BitsOfSize<sizeof(T)>::type;

PLEXUS_HD size_t divUp(size_t a, size_t b) { return (a + b - 1) / b; }
PLEXUS_HD size_t alignUp(size_t a, size_t b) { return divUp(a, b) * b; }
PLEXUS_HD size_t minSize(size_t a, size_t b) { return a < b ? a : b; }

}  // namespace plexus::dev

#endif /* PLEXUS_DEVICE_WORK_H_ */
