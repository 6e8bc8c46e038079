#include "proxy/proxy_profile.h"

#include <plexus/device/arch.h>
#include <unistd.h>

#include <algorithm>

#include "comm/communicator.h"
#include "profiler/profiler.h"

namespace plexus {

namespace {

uint64_t load(const volatile uint64_t* p) { return p ? dev::loadAcquire(p) : 0; }

// Launches remembered while the proxy has not looked at the connection.
constexpr size_t kMaxMarks = 1024;

}  // namespace

ProxyProfile::ProxyProfile(ncclComm* comm, const plexusConnInfo_v1_t* conn, int peer, int channel, bool isSend)
    : comm_(comm), conn_(conn), peer_(peer), channel_(channel), isSend_(isSend) {}

ProxyProfile::~ProxyProfile() {
  for (uint64_t s = finished_; s < started_; s++) stopStep(s);
  for (const OpenOp& o : ops_) profilerStop(comm_, o.event);
}

void ProxyProfile::launchBegins(uint64_t opSeq, uint64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  if (marks_.size() >= kMaxMarks) return;  // nobody observes (the proxy is stuck in a plugin call): not recorded
  marks_.push_back(Mark{opSeq, step, kOpen});
}

void ProxyProfile::launchEnds(uint64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!marks_.empty() && marks_.back().end == kOpen) marks_.back().end = std::max(step, marks_.back().start);
}

const ProxyProfile::OpenOp* ProxyProfile::opFor(uint64_t step) {
  Mark m{};
  uint64_t launch = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ops_.empty()) {
      const Mark& last = marks_[ops_.back().launch - popped_];
      if (last.start <= step && (last.end == kOpen || step < last.end)) return &ops_.back();
    }
    // Launches that ended before this step without an operation here (none of their steps used this connection).
    while (nextLaunch_ - popped_ < marks_.size()) {
      const Mark& next = marks_[nextLaunch_ - popped_];
      if (next.end == kOpen || next.end > step) break;
      nextLaunch_++;
    }
    const uint64_t keep = ops_.empty() ? nextLaunch_ : ops_.front().launch;
    for (; popped_ < keep && !marks_.empty(); popped_++) marks_.pop_front();
    if (nextLaunch_ - popped_ >= marks_.size() || marks_[nextLaunch_ - popped_].start > step) return nullptr;
    launch = nextLaunch_++;
    m = marks_[launch - popped_];
  }
  ncclProfilerEventDescr_v6_t d{};
  d.type = ncclProfileProxyOp;
  d.parentObj = comm_->profilerOps[m.opSeq % ncclComm::kProfilerOps];
  d.rank = comm_->rank;
  d.proxyOp.pid = getpid();
  d.proxyOp.channelId = (uint8_t)channel_;
  d.proxyOp.peer = peer_;
  d.proxyOp.nSteps = 0;  // not known in advance: the kernel decides its steps as it goes
  d.proxyOp.chunkSize = conn_->stepSize;
  d.proxyOp.isSend = isSend_;
  void* event = profilerStart(comm_, &d);
  profilerRecord(comm_, event, ncclProfilerProxyOpInProgress_v4);
  ops_.push_back(OpenOp{launch, m.start, event});
  return &ops_.back();
}

void ProxyProfile::closeFinishedOps() {
  while (!ops_.empty()) {
    uint64_t end;
    {
      std::lock_guard<std::mutex> lock(mu_);
      end = marks_[ops_.front().launch - popped_].end;
    }
    if (end == kOpen || finished_ < end) return;
    profilerStop(comm_, ops_.front().event);
    ops_.pop_front();
  }
}

void ProxyProfile::startStep(uint64_t step, ncclProfilerEventState_t state) {
  ProxyStepHandle& h = steps_[step % PLEXUS_STEPS];
  h = ProxyStepHandle{};
  const OpenOp* op = opFor(step);
  if (!op || !op->event) return;
  ncclProfilerEventDescr_v6_t d{};
  d.type = ncclProfileProxyStep;
  d.parentObj = op->event;
  d.rank = comm_->rank;
  d.proxyStep.step = (int)(step - op->start);
  h.comm = comm_;
  h.event = profilerStart(comm_, &d);
  ncclProfilerEventStateArgs_v6_t args{};
  args.proxyStep.transSize = (size_t)conn_->stepSize;
  profilerRecord(comm_, h.event, state, &args);
}

void ProxyProfile::stopStep(uint64_t step) {
  ProxyStepHandle& h = steps_[step % PLEXUS_STEPS];
  profilerStop(comm_, h.event);
  h = ProxyStepHandle{};
}

void ProxyProfile::observe() {
  // Send: the kernel publishes a step through tail and gets it back through head once sent. Receive: the kernel
  // wants a step, the proxy exposes it through tail once received, and the kernel consumes it through head.
  const uint64_t begun = load(isSend_ ? conn_->tail : conn_->recvWanted);
  const uint64_t exposed = isSend_ ? begun : load(conn_->tail);
  const uint64_t done = load(conn_->head);
  if (!primed_) {
    // From the first launch marked; without one, steps already in flight when profiling began get no events.
    primed_ = true;
    std::lock_guard<std::mutex> lock(mu_);
    started_ = exposed_ = finished_ = marks_.empty() ? begun : std::min(begun, marks_.front().start);
  }
  // Steps done first: a slot's next step starts only after its last one ended (a trace draws each slot on a lane).
  for (; finished_ < std::min(done, exposed_); finished_++) stopStep(finished_);
  for (; started_ < begun; started_++)
    startStep(started_, isSend_ ? ncclProfilerProxyStepSendWait : ncclProfilerProxyStepRecvWait);
  for (; exposed_ < std::min(exposed, started_); exposed_++) {
    if (isSend_) continue;
    ncclProfilerEventStateArgs_v6_t args{};
    args.proxyStep.transSize = (size_t)conn_->stepSize;
    profilerRecord(comm_, steps_[exposed_ % PLEXUS_STEPS].event, ncclProfilerProxyStepRecvGPUWait, &args);
  }
  for (; finished_ < std::min(done, exposed_); finished_++) stopStep(finished_);
  closeFinishedOps();
}

void* ProxyProfile::stepHandle(uint64_t step) {
  if (!primed_ || !(profilerMask() & kProfileProxyTree)) return nullptr;
  // A step the kernel published (or asked for) after the last observe: its event starts now, before the plugin
  // gets it.
  for (; started_ <= step && started_ < finished_ + PLEXUS_STEPS; started_++)
    startStep(started_, isSend_ ? ncclProfilerProxyStepSendWait : ncclProfilerProxyStepRecvWait);
  ProxyStepHandle& h = steps_[step % PLEXUS_STEPS];
  return h.event ? &h : nullptr;
}

void* proxyCtrlSleep(ncclComm* comm) {
  if (!(profilerMask() & ncclProfileProxyCtrl)) return nullptr;
  ncclProfilerEventDescr_v6_t d{};
  d.type = ncclProfileProxyCtrl;
  void* h = profilerStart(comm, &d);
  profilerRecord(comm, h, ncclProfilerProxyCtrlSleep);
  return h;
}

void proxyCtrlWake(ncclComm* comm, void* handle) {
  if (!handle) return;
  profilerRecord(comm, handle, ncclProfilerProxyCtrlWakeup);
  profilerStop(comm, handle);
}

}  // namespace plexus
