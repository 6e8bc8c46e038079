// Polls a nonblocking communicator until it leaves ncclInProgress, for at most `seconds`; returns its state.
#pragma once

#include <nccl.h>

#include <chrono>
#include <thread>

namespace testenv {

inline ncclResult_t settle(ncclComm_t comm, int seconds) {
  ncclResult_t e = ncclInProgress;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (e == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
    if (ncclCommGetAsyncError(comm, &e) != ncclSuccess) return ncclInternalError;
    if (e == ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return e;
}

}  // namespace testenv
