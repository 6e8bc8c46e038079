/*
 * What a kernel does with its one parameter (plexusDevKernelArgs_v1_t): which channel a block runs, and where each
 * work item of the launch is, whatever the storage. The host backend's executor and every CUDA kernel read the
 * launch through these, so both walk the same works in the same order.
 */
#ifndef PLEXUS_DEVICE_KERNEL_H_
#define PLEXUS_DEVICE_KERNEL_H_

#include "../device_v1.h"
#include "arch.h"

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

}  // namespace plexus::dev

#endif /* PLEXUS_DEVICE_KERNEL_H_ */
