#include "work_fifo.h"

#include <plexus/device/arch.h>

namespace plexus {

WorkFifo::WorkFifo(uint32_t capacity) : works_(capacity), mask_(capacity - 1) {}

ncclResult_t WorkFifo::reserve(uint32_t n, const volatile uint32_t* abortFlag, uint32_t* first) {
  if (n > capacity()) return ncclInternalError;
  for (uint32_t iter = 0; produced_ + n - consumed() > capacity(); iter++) {
    if (*abortFlag) return ncclRemoteError;
    dev::backoff(iter);
  }
  *first = produced_;
  produced_ += n;
  return ncclSuccess;
}

}  // namespace plexus
