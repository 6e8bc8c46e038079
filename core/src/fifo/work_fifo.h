// The workFifo (layer 5): the planner produces work descriptors, the executor consumes them. The
// counters are monotonic mod 2^32, as NCCL's workFifoProduced/workFifoConsumed; the producer waits
// while the ring is full, watching the abort flag so that a stuck consumer cannot hang it.
#pragma once

#include <plexus/device_v1.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <cstdint>
#include <functional>
#include <vector>

namespace plexus {

class WorkFifo {
 public:
  explicit WorkFifo(uint32_t capacity = 1024);  // entries, a power of two

  uint32_t capacity() const { return mask_ + 1; }
  // Claims n consecutive entries (n <= capacity) and returns the index of the first. While full, calls
  // help (which may run the consumer on this thread), then waits; returns ncclRemoteError if the abort
  // flag is raised while waiting.
  ncclResult_t reserve(uint32_t n, const volatile uint32_t* abortFlag, uint32_t* first,
                       const std::function<void()>& help = {});
  plexusDevWork_v1_t& at(uint32_t index) { return works_[index & mask_]; }
  const plexusDevWork_v1_t& at(uint32_t index) const { return works_[index & mask_]; }
  // The consumer is done with the n oldest entries.
  void consume(uint32_t n);
  uint32_t produced() const { return produced_; }
  uint32_t consumed() const { return consumed_.load(std::memory_order_acquire); }

 private:
  std::vector<plexusDevWork_v1_t> works_;
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
