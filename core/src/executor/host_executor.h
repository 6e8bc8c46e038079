// The host executor: runs a communicator's "kernels" on host threads. A launch covers a range of the
// workFifo; channel 0 runs on the stream's thread, every other channel on a worker thread of its own
// that sleeps between launches. Launches of one communicator run one at a time, in workFifo order,
// whatever streams they came on, so that every rank runs them in the same order.
#pragma once

#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

struct ncclComm;

namespace plexus {

class HostStream;

class HostExecutor {
 public:
  explicit HostExecutor(ncclComm* comm);
  ~HostExecutor();

  // Queues works [first, first + n) on stream. Works with nChannels == 0 are skipped.
  void launch(HostStream* stream, uint32_t first, uint32_t n);
  // Waits until every launch so far has run (or failed).
  void waitIdle();
  int inflight() const { return inflight_.load(); }

  // What a channel runs now, for hang reports: written by the channel's thread, read by any (a report
  // taken while a channel moves to the next work may mix the two).
  struct Activity {
    std::atomic<bool> running{false};
    std::atomic<int> func{0}, datatype{0}, algorithm{0};
    std::atomic<uint64_t> opSeq{0}, count{0};
  };
  const Activity& activity(int channel) const { return activity_[channel]; }

 private:
  struct Worker {
    std::thread thread;
    std::mutex mu;
    std::condition_variable cv;
    uint64_t generation = 0;  // bumped per launch that needs this channel
    bool stop = false;
  };

  ncclResult_t run(uint32_t first, uint32_t n);
  ncclResult_t runChannel(int channel, uint32_t first, uint32_t n);
  void workerLoop(int channel);

  ncclComm* comm_;
  std::vector<std::unique_ptr<Worker>> workers_;  // index = channel; [0] unused
  std::unique_ptr<Activity[]> activity_;          // index = channel
  // The launch the workers are running.
  uint32_t curFirst_ = 0, curN_ = 0;
  std::atomic<int> pending_{0};
  std::atomic<int> channelError_{ncclSuccess};
  std::mutex doneMu_;
  std::condition_variable doneCv_;
  std::atomic<int> inflight_{0};
};

}  // namespace plexus
