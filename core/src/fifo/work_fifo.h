// The workFifo (layer 5): a ring of work descriptors in memory the device reads (host-mapped on CUDA), written by
// the planner for launches whose works do not fit the kernel's parameter. The counters are monotonic mod 2^32, as
// NCCL's workFifoProduced/workFifoConsumed: the producer waits while the ring is full, watching the abort flag so
// that a stuck consumer cannot hang it; completion (an event per launch mark, launch.h) advances consumed.
#pragma once

#include <plexus/device_v1.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

#include "device/runtime.h"

namespace plexus {

class WorkFifo {
 public:
  // entries: a power of two. Memory from rt (host-mapped, so that kernels read what the host wrote).
  explicit WorkFifo(uint32_t capacity = 1024, DeviceRuntime* rt = hostRuntime());
  ~WorkFifo();
  WorkFifo(const WorkFifo&) = delete;
  WorkFifo& operator=(const WorkFifo&) = delete;
  // The memory could not be allocated (the runtime's error says why).
  bool ok() const { return works_ != nullptr; }

  uint32_t capacity() const { return mask_ + 1; }
  uint32_t mask() const { return mask_; }
  // Claims n consecutive entries (n <= capacity) and returns the index of the first. While full, calls help (which
  // polls completions, and on the host backend may run the consumer on this thread), then waits; returns
  // ncclRemoteError if the abort flag is raised while waiting.
  ncclResult_t reserve(uint32_t n, const volatile uint32_t* abortFlag, uint32_t* first,
                       const std::function<void()>& help = {});
  plexusDevWork_v1_t& at(uint32_t index) { return works_[index & mask_]; }
  const plexusDevWork_v1_t& at(uint32_t index) const { return works_[index & mask_]; }
  // The ring as kernels address it.
  const plexusDevWork_v1_t* deviceRing() const { return deviceWorks_; }
  // Every entry before mark is consumed (marks only grow).
  void consumeTo(uint32_t mark);
  uint32_t produced() const { return produced_; }
  uint32_t consumed() const { return consumed_.load(std::memory_order_acquire); }

 private:
  DeviceRuntime* rt_;
  DeviceMem mem_;
  plexusDevWork_v1_t* works_ = nullptr;
  const plexusDevWork_v1_t* deviceWorks_ = nullptr;
  uint32_t mask_;
  uint32_t produced_ = 0;  // touched by the planner's thread only
  std::atomic<uint32_t> consumed_{0};
  // A producer blocked on a full ring sleeps here rather than spin against the consumer for a core.
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> producerWaiting_{false};
  std::atomic<uint32_t> wakeAt_{0};  // consumed count at which a waiting producer is woken
};

}  // namespace plexus
