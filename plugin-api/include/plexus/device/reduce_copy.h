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

#define PLEXUS_MAX_SRCS 5
#define PLEXUS_MAX_DSTS 5

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
 * (a rank's own input entering the reduction); post applies the post-op to the result. */
template <typename T, typename F>
PLEXUS_HD void reduceCopy(int tid, int nthreads, const F& f, const T* const* srcs, int nsrc, bool preSrc0,
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
  /* Wide fan-in or fan-out (trees): fold into dsts[0] pass by pass, then copy it out. Each pass only
   * touches this thread's range, so no barrier is needed between passes. */
  T* acc = dsts[0];
  if (pre) reduceCopy2<T, F, F::hasPre, false>(f, r, 2, 1, srcs[0], srcs[1], acc, nullptr);
  else reduceCopy2<T, F, false, false>(f, r, nsrc >= 2 ? 2 : 1, 1, srcs[0], srcs[1], acc, nullptr);
  for (int s = 2; s < nsrc; s++) reduceCopy2<T, F, false, false>(f, r, 2, 1, acc, srcs[s], acc, nullptr);
  if (post) reduceCopy2<T, F, false, F::hasPost>(f, r, 1, 1, acc, nullptr, acc, nullptr);
  for (int d = 1; d < ndst; d++) reduceCopy2<T, F, false, false>(f, r, 1, 1, acc, nullptr, dsts[d], nullptr);
}

}  // namespace plexus::dev

#endif /* PLEXUS_DEVICE_REDUCE_COPY_H_ */
