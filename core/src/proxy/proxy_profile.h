// NCCL's proxy events (profiler/profiler.h) for one proxy-driven connection on the host backend: ProxyOp, ProxyStep,
// and the NetPlugin events a net plugin hangs off the steps through its profiler callback.
//
// The kernels decide their steps as they go, so no host plan says how many steps an operation takes on a
// connection. The proxy watches the connection's step counters instead (any proxy-driven transport keeps them: the
// kernel's tail and head, the receiver's wanted), around each proxyProgress, and the executor marks where each
// launch's steps begin and end on the connection, so that every step has its operation. A launch's steps on one
// connection belong to its first work on that channel that can use the connection (a send or receive to that peer,
// else the first collective), as its KernelCh event does.
#pragma once

#include <plexus/device_v1.h>
#include <plexus/profiler.h>

#include <cstdint>
#include <deque>
#include <mutex>

struct ncclComm;

namespace plexus {

// The events that need the proxy: ProxyOp and its descendants.
constexpr int kProfileProxyTree = ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileNetPlugin;

// What a net plugin receives as phandle for a step (and hands back to the profiler callback): the step's event and
// its communicator. NULL where the step has no event.
struct ProxyStepHandle {
  ncclComm* comm = nullptr;
  void* event = nullptr;
};

class ProxyProfile {
 public:
  ProxyProfile(ncclComm* comm, const plexusConnInfo_v1_t* conn, int peer, int channel, bool isSend);
  ~ProxyProfile();  // stops what is still open: the proxy no longer touches the connection
  ProxyProfile(const ProxyProfile&) = delete;
  ProxyProfile& operator=(const ProxyProfile&) = delete;

  // The channel's executor thread: a launch's steps on this connection begin at `step` and belong to opSeq; then
  // end at `step` once the channel has run the launch.
  void launchBegins(uint64_t opSeq, uint64_t step);
  void launchEnds(uint64_t step);

  // The proxy thread, before and after each proxyProgress of the connection.
  void observe();
  // The phandle for step `step` (the proxy thread, inside proxyProgress).
  void* stepHandle(uint64_t step);

  int peer() const { return peer_; }
  int channel() const { return channel_; }
  bool isSend() const { return isSend_; }

 private:
  static constexpr uint64_t kOpen = ~0ull;  // a launch whose end is not known yet
  struct Mark {
    uint64_t opSeq, start, end;  // the launch's steps on this connection: [start, end)
  };
  struct OpenOp {
    uint64_t launch;  // its mark: marks_[launch - popped_]
    uint64_t start;
    void* event;
  };

  const OpenOp* opFor(uint64_t step);  // the operation of `step`, opened on its first step; NULL: no launch covers it
  void closeFinishedOps();
  void startStep(uint64_t step, ncclProfilerEventState_t state);
  void stopStep(uint64_t step);

  ncclComm* const comm_;
  const plexusConnInfo_v1_t* const conn_;
  const int peer_, channel_;
  const bool isSend_;

  std::mutex mu_;  // marks_ and popped_, shared with the executor
  std::deque<Mark> marks_;  // launch number popped_ + i
  uint64_t popped_ = 0;

  // The proxy thread's own. Operations stay open until their last step stops: the next launch's steps may start
  // while this one's are still on the wire.
  bool primed_ = false;
  uint64_t started_ = 0, exposed_ = 0, finished_ = 0;  // steps whose event started / reached the kernel / stopped
  uint64_t nextLaunch_ = 0;                            // the first launch neither opened nor passed over
  std::deque<OpenOp> ops_;
  ProxyStepHandle steps_[PLEXUS_STEPS];
};

// ProxyCtrl events: the proxy thread going to sleep (Sleep) and waking (Wakeup), one event per communicator whose
// connections it serves. The handle (NULL: not wanted) is started at sleep and ended at wake or when the
// communicator's last connection leaves.
void* proxyCtrlSleep(ncclComm* comm);
void proxyCtrlWake(ncclComm* comm, void* handle);

}  // namespace plexus
