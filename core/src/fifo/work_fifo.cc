#include "work_fifo.h"

#include <plexus/device/arch.h>

#include <algorithm>
#include <chrono>

namespace plexus {

WorkFifo::WorkFifo(uint32_t capacity, DeviceRuntime* rt) : rt_(rt), mask_(capacity - 1) {
  if (rt_->alloc(MemKind::HostMapped, sizeof(plexusDevWork_v1_t) * capacity, &mem_) != ncclSuccess) return;
  works_ = static_cast<plexusDevWork_v1_t*>(mem_.host);
  deviceWorks_ = static_cast<const plexusDevWork_v1_t*>(mem_.ptr);
}

WorkFifo::~WorkFifo() {
  if (works_) rt_->free(&mem_);
}

ncclResult_t WorkFifo::reserve(uint32_t n, const volatile uint32_t* abortFlag, uint32_t* first,
                              const std::function<void()>& help) {
  if (n > capacity()) return ncclInternalError;
  for (uint32_t iter = 0; produced_ + n - consumed() > capacity(); iter++) {
    if (dev::loadRelaxed(abortFlag)) return ncclRemoteError;
    if (help) help();
    if (iter < 64) {
      dev::backoff(iter);
      continue;
    }
    // Sleep until half the ring is free, not just n entries: a producer woken per consumed entry would trade a
    // context switch with the consumer for every work item. The timeout bounds how late an abort is noticed, and
    // how often completions are polled when they come from a device.
    const uint32_t room = std::max(n, capacity() / 2);
    std::unique_lock<std::mutex> lock(mu_);
    wakeAt_.store(produced_ + room - capacity(), std::memory_order_relaxed);
    producerWaiting_ = true;
    cv_.wait_for(lock, std::chrono::milliseconds(1),
                 [&] { return produced_ + room - consumed() <= capacity() || dev::loadRelaxed(abortFlag); });
    producerWaiting_ = false;
  }
  *first = produced_;
  produced_ += n;
  return ncclSuccess;
}

void WorkFifo::consumeTo(uint32_t mark) {
  uint32_t now = consumed_.load(std::memory_order_relaxed);
  while ((int32_t)(mark - now) > 0 && !consumed_.compare_exchange_weak(now, mark)) {
  }
  if (producerWaiting_.load() && (int32_t)(mark - wakeAt_.load(std::memory_order_relaxed)) >= 0) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
}

}  // namespace plexus
