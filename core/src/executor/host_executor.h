// The host executor: the host backend's "GPU" for one communicator. A launch (one plan: its kernel arguments) runs
// one channel per block, as a CUDA kernel would: the lowest channel on the stream's thread, every other one on a
// worker thread of its own that sleeps between launches. Launches of one communicator reach it one at a time, in
// launch order (the launcher orders them across streams).
#pragma once

#include <nccl.h>
#include <plexus/device_v1.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "device/runtime.h"

struct ncclComm;

namespace plexus {

struct ProxyConnection;

class HostExecutor {
 public:
  explicit HostExecutor(ncclComm* comm);
  ~HostExecutor();

  // What the host runtime's launch runs on the stream (KernelLaunch.function).
  const HostKernel& kernel() const { return kernel_; }

  // What a channel runs now, for hang reports: written by the channel's thread, read by any (a report taken while a
  // channel moves to the next launch may mix the two). The first work of the launch on the channel, how many more
  // the launch gives it, and the last operation among them (a pass of joined launches runs several operations).
  struct Activity {
    std::atomic<bool> running{false};
    std::atomic<int> func{0}, datatype{0}, algorithm{0}, more{0};
    std::atomic<uint64_t> opSeq{0}, lastOpSeq{0}, count{0};
  };
  const Activity& activity(int channel) const { return activity_[channel]; }
  // Launches that ran in the pass of the launch before them (join).
  uint64_t joined() const { return joined_.load(std::memory_order_relaxed); }

 private:
  struct Worker {
    std::thread thread;
    std::mutex mu;
    std::condition_variable cv;
    uint64_t generation = 0;  // bumped per launch that needs this channel
    bool stop = false;
  };

  static ncclResult_t runKernel(void* self, const void* args, size_t argsBytes, unsigned grid);
  static bool joinKernel(void* self, HostJoin* pass, const void* args);
  bool join(HostJoin* pass, const plexusDevKernelArgs_v1_t* next);
  ncclResult_t run(const plexusDevKernelArgs_v1_t* args);
  ncclResult_t runChannel(int channel, const plexusDevKernelArgs_v1_t* args);
  // The profiler's proxy events: marks where the launch's steps begin on each proxy-driven connection of the channel
  // (proxy/proxy_profile.h) and returns those connections, whose ends are marked after the channel ran.
  std::vector<ProxyConnection*> markProxySteps(int channel, const plexusDevKernelArgs_v1_t* args);
  uint64_t connStep(int channel, const ProxyConnection& pc) const;
  void workerLoop(int channel);

  ncclComm* comm_;
  HostKernel kernel_;
  const bool joins_;  // PLEXUS_P2P_JOIN
  std::vector<std::unique_ptr<Worker>> workers_;  // index = channel ([0] none)
  std::unique_ptr<Activity[]> activity_;          // index = channel
  // The launch the workers are running.
  const plexusDevKernelArgs_v1_t* cur_ = nullptr;
  std::atomic<int> pending_{0};
  std::atomic<uint64_t> joined_{0};
  std::atomic<int> channelError_{ncclSuccess};
  std::mutex doneMu_;
  std::condition_variable doneCv_;
};

}  // namespace plexus
