/*
 * What a kernel does with its one parameter (plexusDevKernelArgs_v1_t): which channel a block runs, and where each
 * work item of the launch is, whatever the storage. The host backend's executor and every CUDA kernel read the
 * launch through these, so both walk the same works in the same order.
 */
#ifndef PLEXUS_DEVICE_KERNEL_H_
#define PLEXUS_DEVICE_KERNEL_H_

#include "../device_v1.h"
#include "arch.h"
#include "reduce.h"
#include "work.h"

namespace plexus::dev {

/* Work item i of the launch. */
PLEXUS_HD const plexusDevWork_v1_t* kernelWork(const plexusDevKernelArgs_v1_t* a, uint32_t i) {
  switch (a->storage) {
    case PLEXUS_WORK_STORAGE_ARGS: return &a->inlineWorks[i];
    case PLEXUS_WORK_STORAGE_FIFO: return &a->works[(a->first + i) & a->mask];
    default: return &a->works[i];
  }
}

/* The channel block `block` runs: the block-th set bit of channelMask; -1 past the last. */
PLEXUS_HD int kernelChannel(const plexusDevKernelArgs_v1_t* a, unsigned block) {
  uint64_t m = a->channelMask;
  for (int c = 0; m; c++, m >>= 1)
    if ((m & 1) && block-- == 0) return c;
  return -1;
}

/* Whether work w runs on channel c. */
PLEXUS_HD bool workOnChannel(const plexusDevWork_v1_t* w, int c) {
  return w->nChannels && c >= w->channelLo && c < w->channelLo + w->nChannels;
}

/* Blocks (channels) a launch of these works needs, and their mask. */
PLEXUS_HD uint64_t workChannelMask(const plexusDevWork_v1_t* w) {
  if (!w->nChannels) return 0;
  const uint64_t span = w->nChannels >= 64 ? ~0ull : ((1ull << w->nChannels) - 1);
  return span << w->channelLo;
}

PLEXUS_HD int popcount64(uint64_t m) {
  int n = 0;
  for (; m; m &= m - 1) n++;
  return n;
}

/* The channel's status as the result of a step loop: what runHost returns. */
PLEXUS_HD ncclResult_t channelResult(const plexusDevChannel_v1_t* ch) {
  switch (loadRelaxed(&ch->status)) {
    case PLEXUS_CHANNEL_OK: return ncclSuccess;
    case PLEXUS_CHANNEL_TIMEOUT: return ncclTimeout;
    default: return ncclRemoteError;
  }
}

/* The runners of an algorithm plugin, from its step loops as static members of Algo: isCopy(func) (the
 * collectives that only move bytes), reducing<T, F>(comm, ch, work, tid, nthreads) and copying<C>(...) on C, one
 * of CopyType's unsigned types; each returns false for a func it does not serve. AlgoRunner serves every work
 * (the host backend picks the instance at run time); the CUDA kernels of (T, F) use AlgoReduceRunner, those of
 * an element type AlgoCopyRunner, so that each instantiates only its own collectives. */
#define PLEXUS_ALGO_RUNNER_FIELDS          \
  const plexusDevComm_v1_t* comm;          \
  plexusDevChannel_v1_t* ch;               \
  const plexusDevWork_v1_t* w;             \
  int tid, nthreads;                       \
  bool known
template <typename Algo>
struct AlgoRunner {
  PLEXUS_ALGO_RUNNER_FIELDS;
  template <typename T, typename F>
  PLEXUS_HD_OUTLINE void operator()() {
    if (Algo::isCopy(w->func)) known = Algo::template copying<CopyType<T>>(comm, ch, w, tid, nthreads);
    else known = Algo::template reducing<T, F>(comm, ch, w, tid, nthreads);
  }
};
template <typename Algo>
struct AlgoReduceRunner {
  PLEXUS_ALGO_RUNNER_FIELDS;
  template <typename T, typename F>
  PLEXUS_HD void operator()() {
    known = Algo::template reducing<T, F>(comm, ch, w, tid, nthreads);
  }
};
template <typename Algo>
struct AlgoCopyRunner {
  PLEXUS_ALGO_RUNNER_FIELDS;
  template <typename T, typename F>
  PLEXUS_HD void operator()() {
    known = Algo::template copying<T>(comm, ch, w, tid, nthreads);
  }
};
#undef PLEXUS_ALGO_RUNNER_FIELDS

#if !defined(__CUDACC__)
/* The host backend's instances of an AlgoRunner (every datatype x operator, what dispatchTypeOp picks from) in
 * translation units that compile in parallel: the host entry declares them all extern
 * (PLEXUS_ALGO_HOST_EXTERN(Runner)), and each group's unit defines its own (PLEXUS_ALGO_HOST_GROUP_<group>(, Runner)
 * for ints, int64s, minifloats, float and double; CMake's plexus_add_algo_plugin writes those units). One unit of every
 * instance took over a minute and a gigabyte to compile. */
#define PLEXUS_ALGO_HOST_OPS(X, R, T)                                        \
  X template void R::operator()<T, ::plexus::dev::FuncSum<T>>();           \
  X template void R::operator()<T, ::plexus::dev::FuncProd<T>>();          \
  X template void R::operator()<T, ::plexus::dev::FuncMax<T>>();           \
  X template void R::operator()<T, ::plexus::dev::FuncMin<T>>();           \
  X template void R::operator()<T, ::plexus::dev::FuncPreMulSum<T>>();
#define PLEXUS_ALGO_HOST_OPS_DIV(X, R, T) \
  PLEXUS_ALGO_HOST_OPS(X, R, T)           \
  X template void R::operator()<T, ::plexus::dev::FuncSumPostDiv<T>>();
#define PLEXUS_ALGO_HOST_GROUP_ints(X, R)            \
  PLEXUS_ALGO_HOST_OPS_DIV(X, R, int8_t)             \
  PLEXUS_ALGO_HOST_OPS_DIV(X, R, uint8_t)            \
  PLEXUS_ALGO_HOST_OPS_DIV(X, R, int32_t)            \
  PLEXUS_ALGO_HOST_OPS_DIV(X, R, uint32_t)
#define PLEXUS_ALGO_HOST_GROUP_int64s(X, R)          \
  PLEXUS_ALGO_HOST_OPS_DIV(X, R, int64_t)            \
  PLEXUS_ALGO_HOST_OPS_DIV(X, R, uint64_t)
#define PLEXUS_ALGO_HOST_GROUP_minifloats(X, R)      \
  PLEXUS_ALGO_HOST_OPS(X, R, ::plexus::dev::half_t)  \
  PLEXUS_ALGO_HOST_OPS(X, R, ::plexus::dev::bf16_t)  \
  PLEXUS_ALGO_HOST_OPS(X, R, ::plexus::dev::fp8e4m3_t) \
  PLEXUS_ALGO_HOST_OPS(X, R, ::plexus::dev::fp8e5m2_t)
#define PLEXUS_ALGO_HOST_GROUP_float(X, R) PLEXUS_ALGO_HOST_OPS_DIV(X, R, float)
#define PLEXUS_ALGO_HOST_GROUP_double(X, R) PLEXUS_ALGO_HOST_OPS_DIV(X, R, double)
#define PLEXUS_ALGO_HOST_EXTERN(R)              \
  PLEXUS_ALGO_HOST_GROUP_ints(extern, R)        \
  PLEXUS_ALGO_HOST_GROUP_int64s(extern, R)      \
  PLEXUS_ALGO_HOST_GROUP_minifloats(extern, R)  \
  PLEXUS_ALGO_HOST_GROUP_float(extern, R)       \
  PLEXUS_ALGO_HOST_GROUP_double(extern, R)
#endif

/* A plugin's step loops as one kernel: Runner is an aggregate {comm, channel, work, tid, nthreads, known} whose
 * templated operator()<T, F>() runs one work's step loop (known = false when the instance does not serve its
 * func). Works of the launch run in order on the channel until one stops it (abort, timeout). */
#if !defined(__CUDACC__)
/* The host backend: every work's (datatype, op) instance is picked at run time. *unknown: a work no instance
 * serves (ncclInvalidArgument). */
template <typename Runner>
inline ncclResult_t runLaunchHost(const plexusDevKernelArgs_v1_t* args, int channelId,
                                  const plexusDevWork_v1_t** unknown) {
  plexusDevComm_v1_t* comm = args->comm;
  plexusDevChannel_v1_t* ch = &comm->channels[channelId];
  for (uint32_t i = 0; i < args->nWorks && loadRelaxed(&ch->status) == PLEXUS_CHANNEL_OK; i++) {
    const plexusDevWork_v1_t* w = kernelWork(args, i);
    if (!workOnChannel(w, channelId)) continue;
    Runner runner{comm, ch, w, 0, 1, true};
    if (!dispatchTypeOp(w->datatype, w->redop, runner) || !runner.known) {
      *unknown = w;
      return ncclInvalidArgument;
    }
  }
  return channelResult(ch);
}
#else
/* A CUDA kernel of one (T, F) instance: block b runs the channel of channelMask's b-th bit. The planner puts in
 * one launch only works for which the plugin named this kernel. */
template <typename Runner, typename T, typename F>
__device__ __forceinline__ void runLaunchDevice(const plexusDevKernelArgs_v1_t& args) {
  const int channelId = kernelChannel(&args, blockIdx.x);
  if (channelId < 0) return;
  plexusDevComm_v1_t* comm = args.comm;
  plexusDevChannel_v1_t* ch = &comm->channels[channelId];
  for (uint32_t i = 0; i < args.nWorks; i++) {
    const plexusDevWork_v1_t* w = kernelWork(&args, i);
    if (!workOnChannel(w, channelId)) continue;
    Runner runner{comm, ch, w, (int)threadIdx.x, (int)blockDim.x, true};
    runner.template operator()<T, F>();
    __syncthreads();
    if (loadRelaxed(&ch->status) != PLEXUS_CHANNEL_OK) return;
  }
}
#endif

}  // namespace plexus::dev

#endif /* PLEXUS_DEVICE_KERNEL_H_ */
