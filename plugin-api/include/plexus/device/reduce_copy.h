/*
 * reduceCopy: the one data-moving loop every primitive ends in. Combines up to a few sources
 * element-wise with the reduction operator and writes the result to up to a few destinations.
 * Host: each thread takes a contiguous range so the compiler vectorizes; CUDA: threads stride.
 */
#ifndef PLEXUS_DEVICE_REDUCE_COPY_H_
#define PLEXUS_DEVICE_REDUCE_COPY_H_

#include <stddef.h>
#include <stdint.h>
#if !defined(__CUDA_ARCH__)
#include <string.h>
#endif

#include "arch.h"
#include "reduce.h"

namespace plexus::dev {

/* A rank's own data plus one per primitive peer. */
#define PLEXUS_MAX_SRCS 9
#define PLEXUS_MAX_DSTS 9

struct Range {
  size_t begin, end, stride;
};
PLEXUS_HD Range threadRange(int tid, int nthreads, size_t n) {
#if defined(__CUDA_ARCH__)
  return Range{(size_t)tid, n, (size_t)nthreads};
#else
  return Range{n * tid / nthreads, n * (tid + 1) / nthreads, 1};
#endif
}

template <typename T, typename F, int NS, int ND, bool Pre, bool Post>
PLEXUS_HD void reduceCopyLoop(const F& f, Range r, const T* __restrict__ s0, const T* __restrict__ s1,
                              T* __restrict__ d0, T* __restrict__ d1) {
#if defined(__CUDA_ARCH__)
  /* 16 bytes per load and store where every pointer allows it (a thread's element-sized accesses reach a fraction
   * of the memory's bandwidth), two packs in flight per thread; the tail and misaligned buffers element by
   * element. */
  constexpr size_t K = sizeof(T) <= 16 ? 16 / sizeof(T) : 1;
  const uintptr_t addrs = (uintptr_t)s0 | (NS == 2 ? (uintptr_t)s1 : 0) | (uintptr_t)d0 | (ND == 2 ? (uintptr_t)d1 : 0);
  if (K > 1 && (addrs & 15) == 0) {
    union Pack {
      uint4 u;
      T t[K];
    };
    const size_t packs = r.end / K;
    const uint4* a = (const uint4*)s0;
    const uint4* b = (const uint4*)s1;
    for (size_t p = r.begin; p < packs; p += 2 * r.stride) {
      const size_t q = p + r.stride;
      Pack x[2], y[2];
      x[0].u = a[p];
      if (q < packs) x[1].u = a[q];
      if constexpr (NS == 2) {
        y[0].u = b[p];
        if (q < packs) y[1].u = b[q];
      }
      for (int j = 0; j < 2; j++) {
        if (j == 1 && q >= packs) break;
        for (size_t k = 0; k < K; k++) {
          T v = x[j].t[k];
          if constexpr (Pre) v = f.pre(v);
          if constexpr (NS == 2) v = f.op(v, y[j].t[k]);
          if constexpr (Post) v = f.post(v);
          x[j].t[k] = v;
        }
        const size_t at = j ? q : p;
        ((uint4*)d0)[at] = x[j].u;
        if constexpr (ND == 2) ((uint4*)d1)[at] = x[j].u;
      }
    }
    r.begin = packs * K + r.begin;
  }
#endif
  for (size_t i = r.begin; i < r.end; i += r.stride) {
    T v = s0[i];
    if constexpr (Pre) v = f.pre(v);
    if constexpr (NS == 2) v = f.op(v, s1[i]);
    if constexpr (Post) v = f.post(v);
    d0[i] = v;
    if constexpr (ND == 2) d1[i] = v;
  }
}

template <typename T, typename F, bool Pre, bool Post>
PLEXUS_HD void reduceCopy2(const F& f, Range r, int ns, int nd, const T* s0, const T* s1, T* d0, T* d1) {
  if (ns == 1 && nd == 1) reduceCopyLoop<T, F, 1, 1, Pre, Post>(f, r, s0, s1, d0, d1);
  else if (ns == 1) reduceCopyLoop<T, F, 1, 2, Pre, Post>(f, r, s0, s1, d0, d1);
  else if (nd == 1) reduceCopyLoop<T, F, 2, 1, Pre, Post>(f, r, s0, s1, d0, d1);
  else reduceCopyLoop<T, F, 2, 2, Pre, Post>(f, r, s0, s1, d0, d1);
}

/* dsts[*] = post(pre?(srcs[0]) op srcs[1] op ...). preSrc0 applies the operator's pre-op to srcs[0]
 * (a rank's own input entering the reduction); post applies the post-op to the result. Out of line:
 * every protocol of a (T, F) calls the one copy (once per slice). */
template <typename T, typename F>
PLEXUS_HD_OUTLINE void reduceCopy(int tid, int nthreads, const F& f, const T* const* srcs, int nsrc, bool preSrc0,
                          T* const* dsts, int ndst, bool post, size_t n) {
  if (n == 0 || nsrc == 0 || ndst == 0) return;
  const bool pre = F::hasPre && preSrc0;
  post = F::hasPost && post;
  Range r = threadRange(tid, nthreads, n);
#if !defined(__CUDA_ARCH__)
  if (nsrc == 1 && !pre && !post) {
    for (int d = 0; d < ndst; d++)
      if (dsts[d] != srcs[0]) memcpy(dsts[d] + r.begin, srcs[0] + r.begin, (r.end - r.begin) * sizeof(T));
    return;
  }
#endif
  if (nsrc <= 2 && ndst <= 2) {
    const T* s1 = nsrc == 2 ? srcs[1] : nullptr;
    T* d1 = ndst == 2 ? dsts[1] : nullptr;
    if (pre) reduceCopy2<T, F, F::hasPre, false>(f, r, nsrc, ndst, srcs[0], s1, dsts[0], d1);
    else if (post) reduceCopy2<T, F, false, F::hasPost>(f, r, nsrc, ndst, srcs[0], s1, dsts[0], d1);
    else reduceCopy2<T, F, false, false>(f, r, nsrc, ndst, srcs[0], s1, dsts[0], d1);
    return;
  }
  /* Wide fan-in or fan-out (trees, direct algorithms): fold block by block into a temporary, then
   * copy it out, so a destination may be any of the sources. */
#if defined(__CUDA_ARCH__)
  for (size_t i = r.begin; i < r.end; i += r.stride) {
    T v = srcs[0][i];
    if (pre) v = f.pre(v);
    for (int s = 1; s < nsrc; s++) v = f.op(v, srcs[s][i]);
    if (post) v = f.post(v);
    for (int d = 0; d < ndst; d++) dsts[d][i] = v;
  }
#else
  constexpr size_t kBlock = 4096 / sizeof(T);
  T tmp[kBlock];
  for (size_t b = r.begin; b < r.end; b += kBlock) {
    const Range br{0, (r.end - b < kBlock ? r.end - b : kBlock), 1};
    const T* s1 = nsrc >= 2 ? srcs[1] + b : nullptr;
    if (pre) reduceCopy2<T, F, F::hasPre, false>(f, br, nsrc >= 2 ? 2 : 1, 1, srcs[0] + b, s1, tmp, nullptr);
    else reduceCopy2<T, F, false, false>(f, br, nsrc >= 2 ? 2 : 1, 1, srcs[0] + b, s1, tmp, nullptr);
    for (int s = 2; s < nsrc; s++) reduceCopy2<T, F, false, false>(f, br, 2, 1, tmp, srcs[s] + b, tmp, nullptr);
    if (post) reduceCopy2<T, F, false, F::hasPost>(f, br, 1, 1, tmp, nullptr, tmp, nullptr);
    for (int d = 0; d < ndst; d++) memcpy(dsts[d] + b, tmp, br.end * sizeof(T));
  }
#endif
}

}  // namespace plexus::dev

#endif /* PLEXUS_DEVICE_REDUCE_COPY_H_ */
