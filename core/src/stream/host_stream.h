// Host streams and events: the host backend's CUDA streams. A stream is an in-order queue of
// operations. A thread that synchronizes the stream runs pending operations itself; the stream's own
// worker thread runs whatever is left unclaimed after a short launch delay (PLEXUS_LAUNCH_DELAY_US),
// so operations progress even when nobody synchronizes, and a synchronizing thread never competes
// with a worker for a core.
#pragma once

#include <nccl.h>
#include <plexus.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace plexus {

class HostStream {
 public:
  using Op = std::function<ncclResult_t()>;
  HostStream();
  ~HostStream();
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  void enqueue(Op op);
  ncclResult_t synchronize();  // returns the first error of the operations since the last synchronize
  bool idle();

 private:
  void workerLoop();
  bool drain();  // runs queued operations if no one else is; false if someone else is

  std::mutex mu_;
  std::condition_variable workCv_, doneCv_;
  std::deque<Op> queue_;
  uint64_t enqueued_ = 0, completed_ = 0;
  bool stop_ = false, workerSleeping_ = false;
  uint64_t wakeAt_ = UINT64_MAX;  // smallest completion count a synchronizing thread waits for
  ncclResult_t error_ = ncclSuccess;
  std::mutex execMu_;  // held by whoever runs operations: keeps them in order
  const std::chrono::microseconds launchDelay_;
  std::thread worker_;
};

// The host stream a cudaStream_t names: NULL is the default stream of host device `device` (as CUDA's
// default stream belongs to a device); a pointer that is not a live host stream gives nullptr.
HostStream* hostStreamOf(cudaStream_t stream, int device);
// The same, with NULL meaning the calling thread's current device (plexusSetDevice).
HostStream* hostStreamOf(cudaStream_t stream);

}  // namespace plexus

struct plexusEvent {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0, completed = 0;
  uint64_t timeNs = 0;
};
