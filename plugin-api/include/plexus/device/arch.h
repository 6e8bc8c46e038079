/*
 * The little that differs between the two backends that run kernel code: function qualifiers,
 * memory ordering of the head/tail handshake, thread barriers and the wait back-off. Everything
 * else under plexus/device/ compiles identically as host C++ and as CUDA device code.
 */
#ifndef PLEXUS_DEVICE_ARCH_H_
#define PLEXUS_DEVICE_ARCH_H_

#include <stdint.h>

#if defined(__CUDACC__)
#define PLEXUS_HD __host__ __device__ inline
#else
#define PLEXUS_HD inline __attribute__((always_inline))
#endif
/* Code kept out of line on both backends: a step loop's entry for one (datatype, redop) instance and
 * each protocol's primitive operation. Compiled once per (T, F) and called, never inlined into every
 * caller: on the host a dispatcher over every instance then has the frame of one, not the sum of all
 * (which AddressSanitizer's redzones grow past a thread's stack); on CUDA each is compiled once per
 * translation unit instead of once per kernel, which keeps nvcc's time within CI's. */
#if defined(__CUDACC__)
#define PLEXUS_HD_OUTLINE __host__ __device__ inline __noinline__
#else
#define PLEXUS_HD_OUTLINE inline __attribute__((noinline))
#endif

#if !defined(__CUDA_ARCH__)
#include <sched.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#endif

namespace plexus::dev {

/* Loads and stores of the counters that two agents (ranks, proxy) hand each other. */
PLEXUS_HD uint64_t loadAcquire(const volatile uint64_t* p) {
#if defined(__CUDA_ARCH__)
  uint64_t v = *p;
  __threadfence_system();
  return v;
#else
  return __atomic_load_n(const_cast<const uint64_t*>(p), __ATOMIC_ACQUIRE);
#endif
}

PLEXUS_HD void storeRelease(volatile uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  __threadfence_system();
  *p = v;
#else
  __atomic_store_n(const_cast<uint64_t*>(p), v, __ATOMIC_RELEASE);
#endif
}

/* Words another agent only watches or polls (flags, LL lines, a channel's wait diagnostics): each access
 * whole, no ordering. On the host an atomic access, which costs a plain move and tells ThreadSanitizer
 * that the race is meant. */
template <typename T>
PLEXUS_HD T loadRelaxed(const volatile T* p) {
#if defined(__CUDA_ARCH__)
  return *p;
#else
  return __atomic_load_n(const_cast<const T*>(p), __ATOMIC_RELAXED);
#endif
}

template <typename T, typename V>
PLEXUS_HD void storeRelaxed(volatile T* p, V v) {
#if defined(__CUDA_ARCH__)
  *p = (T)v;
#else
  __atomic_store_n(const_cast<T*>(p), (T)v, __ATOMIC_RELAXED);
#endif
}

/* A flag another agent publishes with storeRelease, polled until it holds and then acquired: on CUDA
 * each poll is a plain (volatile) load and one fence follows the poll that succeeds; on the host each
 * poll is an acquire load (a plain move on x86). */
PLEXUS_HD uint64_t loadFlag(const volatile uint64_t* p) {
#if defined(__CUDA_ARCH__)
  return *p;
#else
  return __atomic_load_n(const_cast<const uint64_t*>(p), __ATOMIC_ACQUIRE);
#endif
}
PLEXUS_HD void flagAcquired() {
#if defined(__CUDA_ARCH__)
  __threadfence_system();
#endif
}

PLEXUS_HD void storeRelease64(volatile int64_t* p, int64_t v) {
#if defined(__CUDA_ARCH__)
  __threadfence_system();
  *p = v;
#else
  __atomic_store_n(const_cast<int64_t*>(p), v, __ATOMIC_RELEASE);
#endif
}

/* All threads of the "block" running one channel. The host backend runs a channel on one thread. */
PLEXUS_HD void barrier() {
#if defined(__CUDA_ARCH__)
  __syncthreads();
#endif
}

/* A barrier that tells every thread whether any thread passed true: how the threads of a channel agree
 * to stop (abort, timeout) at the same point, so that none is left waiting at a later barrier. */
PLEXUS_HD bool barrierAny(bool pred) {
#if defined(__CUDA_ARCH__)
  return __syncthreads_or(pred ? 1 : 0) != 0;
#else
  return pred;
#endif
}

/* The same within a warp (all 32 lanes call it); the host's "warp" is its one thread. */
PLEXUS_HD bool warpAny(bool pred) {
#if defined(__CUDA_ARCH__)
  return __any_sync(0xffffffffu, pred ? 1 : 0) != 0;
#else
  return pred;
#endif
}

/* Orders the stores of the warp's lanes before what any lane does next (all 32 lanes call it). */
PLEXUS_HD void warpSync() {
#if defined(__CUDA_ARCH__)
  __syncwarp();
#endif
}

#if !defined(__CUDA_ARCH__)
/* Host: fetches a cache line for writing (x86: prefetchw, which every x86-64 CPU of the last decade has and older
 * ones run as a no-op). */
inline void prefetchForWrite(volatile const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetchw %0" ::"m"(*(const char*)const_cast<const void*>(p)));
#else
  __builtin_prefetch(const_cast<const void*>(p), 1, 3);
#endif
}
/* Host: fetches a cache line for reading. */
inline void prefetchForRead(volatile const void* p) { __builtin_prefetch(const_cast<const void*>(p), 0, 3); }
#endif

/* Called on each unsuccessful poll. On the host: spin for `spin` polls (long when every rank of the
 * node has a core of its own, short when they share), then yield the core, then sleep in growing
 * steps so that an idle wait costs almost nothing. */
#define PLEXUS_SPIN_SHARED 64
PLEXUS_HD void backoff(uint32_t iter, uint32_t spin = PLEXUS_SPIN_SHARED) {
#if defined(__CUDA_ARCH__)
  if (iter > 1024) __nanosleep(iter > 65536 ? 1000 : 100);
#else
  if (iter < spin) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
  } else if (iter < spin + 4096) {
    sched_yield();
  } else {
    struct timespec ts = {0, iter < spin + 16384 ? 2000 : 50000};
    nanosleep(&ts, nullptr);
  }
#endif
}

/* Monotonic nanoseconds, for timeouts inside wait loops. */
PLEXUS_HD uint64_t clockNs() {
#if defined(__CUDA_ARCH__)
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

}  // namespace plexus::dev

#endif /* PLEXUS_DEVICE_ARCH_H_ */
