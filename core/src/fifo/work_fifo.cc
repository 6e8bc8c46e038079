#include "work_fifo.h"

#include <plexus/device/arch.h>

#include <chrono>

namespace plexus {

WorkFifo::WorkFifo(uint32_t capacity) : works_(capacity), mask_(capacity - 1) {}

ncclResult_t WorkFifo::reserve(uint32_t n, const volatile uint32_t* abortFlag, uint32_t* first) {
  if (n > capacity()) return ncclInternalError;
  for (uint32_t iter = 0; produced_ + n - consumed() > capacity(); iter++) {
    if (*abortFlag) return ncclRemoteError;
    if (iter < 64) {
      dev::backoff(iter);
      continue;
    }
    std::unique_lock<std::mutex> lock(mu_);
    producerWaiting_ = true;
    // The timeout only bounds how late an abort is noticed.
    cv_.wait_for(lock, std::chrono::milliseconds(10), [&] { return produced_ + n - consumed() <= capacity(); });
    producerWaiting_ = false;
  }
  *first = produced_;
  produced_ += n;
  return ncclSuccess;
}

void WorkFifo::consume(uint32_t n) {
  consumed_.fetch_add(n, std::memory_order_release);
  if (producerWaiting_.load()) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
}

}  // namespace plexus
