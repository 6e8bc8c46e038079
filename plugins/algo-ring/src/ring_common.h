/*
 * What every ring step loop shares: the channel's part of the buffer, the pipeline of chunks, the
 * one-rank fallback, and the element-size types the non-reducing collectives run on. Compiles as
 * host C++ and as CUDA.
 */
#pragma once

#include <plexus/device/primitives.h>
#include <plexus/device/primitives_ll.h>
#include <plexus/device/work.h>

#include <stdint.h>

#include <type_traits>
#if !defined(__CUDACC__)
#include <new>
#endif

namespace plexus::ring {

using namespace plexus::dev;

/* The primitives as the ring step loops call them, over the work's protocol.
 *
 * Host: each primitive is compiled once per (T, F), out of line, and shared by every collective's step
 * loop (the primitives are force-inlined, and inlining a dozen reduce-copy loops into every call site
 * of every collective for 72 (type, operator) pairs would take the compiler many minutes); the
 * protocol (Simple or LL) is chosen when the step loop starts. The cost is one call per chunk.
 * CUDA: Simple, inline (each kernel is compiled on its own); LL work is not given to CUDA kernels yet. */
#if defined(__CUDACC__)
#define PLEXUS_RING_PRIM PLEXUS_HD
#else
#define PLEXUS_RING_PRIM __attribute__((noinline))
#endif

#if defined(__CUDACC__)
template <typename T, typename F>
class RingPrims : public Primitives<T, F> {
  using P = Primitives<T, F>;

 public:
  PLEXUS_HD RingPrims(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, int tid, int nthreads, int proto,
                      const void* input, void* output, uint64_t redOpArg)
      : P(comm, ch, tid, nthreads, &ch->ring.prev, 1, &ch->ring.next, 1, input, output, redOpArg) {
    (void)proto;
  }
};
#else
template <typename T, typename F>
class RingPrims {
  using S = Primitives<T, F>;
  using L = PrimitivesLL<T, F>;

 public:
  RingPrims(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, int tid, int nthreads, int proto,
            const void* input, void* output, uint64_t redOpArg)
      : ll_(proto == PLEXUS_PROTO_LL) {
    if (ll_) new (storage_) L(comm, ch, tid, nthreads, &ch->ring.prev, 1, &ch->ring.next, 1, input, output, redOpArg);
    else new (storage_) S(comm, ch, tid, nthreads, &ch->ring.prev, 1, &ch->ring.next, 1, input, output, redOpArg);
  }
  ~RingPrims() {
    if (ll_) ll().~L();
    else simple().~S();
  }
  RingPrims(const RingPrims&) = delete;
  RingPrims& operator=(const RingPrims&) = delete;

  PLEXUS_RING_PRIM bool ok() const { return ll_ ? ll().ok() : simple().ok(); }
  PLEXUS_RING_PRIM void send(size_t inOff, size_t n) { ll_ ? ll().send(inOff, n) : simple().send(inOff, n); }
  PLEXUS_RING_PRIM void recv(size_t outOff, size_t n, bool postOp = false) {
    ll_ ? ll().recv(outOff, n, postOp) : simple().recv(outOff, n, postOp);
  }
  PLEXUS_RING_PRIM void recvReduceSend(size_t inOff, size_t n) {
    ll_ ? ll().recvReduceSend(inOff, n) : simple().recvReduceSend(inOff, n);
  }
  PLEXUS_RING_PRIM void recvReduceCopySend(size_t inOff, size_t outOff, size_t n, bool postOp = false) {
    ll_ ? ll().recvReduceCopySend(inOff, outOff, n, postOp) : simple().recvReduceCopySend(inOff, outOff, n, postOp);
  }
  PLEXUS_RING_PRIM void recvReduceCopy(size_t inOff, size_t outOff, size_t n, bool postOp = false) {
    ll_ ? ll().recvReduceCopy(inOff, outOff, n, postOp) : simple().recvReduceCopy(inOff, outOff, n, postOp);
  }
  PLEXUS_RING_PRIM void copySend(size_t inOff, size_t outOff, size_t n, bool postOp = false) {
    ll_ ? ll().copySend(inOff, outOff, n, postOp) : simple().copySend(inOff, outOff, n, postOp);
  }
  PLEXUS_RING_PRIM void recvCopySend(size_t outOff, size_t n, bool postOp = false) {
    ll_ ? ll().recvCopySend(outOff, n, postOp) : simple().recvCopySend(outOff, n, postOp);
  }

 private:
  L& ll() { return *reinterpret_cast<L*>(storage_); }
  const L& ll() const { return *reinterpret_cast<const L*>(storage_); }
  S& simple() { return *reinterpret_cast<S*>(storage_); }
  const S& simple() const { return *reinterpret_cast<const S*>(storage_); }

  bool ll_;
  alignas(L) alignas(S) unsigned char storage_[sizeof(L) > sizeof(S) ? sizeof(L) : sizeof(S)];
};
#endif

/* Elements per 64-byte cache line: channel parts start at multiples of it. */
template <typename T>
PLEXUS_HD size_t lineElems() {
  return 64 / sizeof(T) ? 64 / sizeof(T) : 1;
}

/* Broadcast and AllGather only move bytes: they run on one unsigned type per element size, with
 * FuncSum (never applied), so that each size is compiled once whatever the datatype. */
template <size_t N> struct BitsOfSize;
template <> struct BitsOfSize<1> { using type = uint8_t; };
template <> struct BitsOfSize<2> { using type = uint16_t; };
template <> struct BitsOfSize<4> { using type = uint32_t; };
template <> struct BitsOfSize<8> { using type = uint64_t; };
template <typename T> using CopyType = typename BitsOfSize<sizeof(T)>::type;
/* True for the (type, operator) pair the non-reducing collectives of T's size run as. */
template <typename T, typename F>
constexpr bool isCopyInstance = std::is_same_v<T, CopyType<T>> && std::is_same_v<F, FuncSum<T>>;

/* The part [*off, *off + *n) of `count` elements this channel owns. */
template <typename T>
PLEXUS_HD void ringChannelPart(const plexusDevWork_v1_t* w, const plexusDevChannel_v1_t* ch, size_t count,
                               size_t* off, size_t* n) {
  channelPart(w, ch->id, count, lineElems<T>(), off, n);
}

/* Elements per pipeline step of the chunk loops. */
PLEXUS_HD size_t ringChunk(const plexusDevWork_v1_t* w, size_t chCount) {
  return w->chunkCount ? w->chunkCount : (chCount ? chCount : 1);
}

/* One rank: dst = post(pre(src)) where the collective reduces (Reduce, ReduceScatter, AllReduce),
 * a plain copy otherwise (skipped when in place). */
template <typename T, typename F>
PLEXUS_RING_PRIM void localCopy(const plexusDevWork_v1_t* w, int tid, int nthreads, const T* src, T* dst, size_t n,
                         bool reduces) {
  if (n == 0 || (!reduces && src == dst)) return;
  F f(reduces ? workRedOpArg<T>(w) : 0);
  reduceCopy<T, F>(tid, nthreads, f, &src, 1, reduces, &dst, 1, reduces, n);
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
