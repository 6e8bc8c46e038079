#include "host_stream.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>
#include <unordered_set>

#include "misc/check.h"
#include "misc/env.h"

namespace plexus {

HostStream::HostStream()
    : launchDelay_(std::chrono::microseconds(envInt("LAUNCH_DELAY_US", 20))), worker_([this] { workerLoop(); }) {}

HostStream::~HostStream() {
  synchronize();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  workCv_.notify_all();
  worker_.join();
}

void HostStream::enqueue(Op op) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(op));
    enqueued_++;
    wake = workerSleeping_;
  }
  if (wake) workCv_.notify_one();
}

bool HostStream::drain() {
  std::unique_lock<std::mutex> exec(execMu_, std::try_to_lock);
  if (!exec) return false;
  for (;;) {
    Op op;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) return true;
      op = std::move(queue_.front());
      queue_.pop_front();
    }
    ncclResult_t r = op();
    std::lock_guard<std::mutex> lock(mu_);
    if (r != ncclSuccess && error_ == ncclSuccess) error_ = r;
    // Wake synchronizing threads only when one of them is done: a wake-up per operation would
    // cost a context switch each.
    if (++completed_ >= wakeAt_) {
      wakeAt_ = UINT64_MAX;
      doneCv_.notify_all();
    }
  }
}

void HostStream::workerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (queue_.empty()) {
      workerSleeping_ = true;
      workCv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      workerSleeping_ = false;
      continue;
    }
    // Leave a moment for a thread that synchronizes to run the queue itself: it is awake and warm,
    // and the two would otherwise compete for a core. The worker runs whatever nobody claims, so
    // every operation makes progress even if the application never synchronizes.
    workCv_.wait_for(lock, launchDelay_, [this] { return stop_ || queue_.empty(); });
    if (stop_ || queue_.empty()) continue;
    lock.unlock();
    if (!drain()) {
      // A synchronizing thread is running the queue; wait until it is done with it.
      std::lock_guard<std::mutex> exec(execMu_);
    }
    lock.lock();
  }
}

ncclResult_t HostStream::synchronize() {
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(mu_);
    target = enqueued_;
  }
  for (;;) {
    drain();
    std::unique_lock<std::mutex> lock(mu_);
    if (completed_ >= target) {
      ncclResult_t r = error_;
      error_ = ncclSuccess;
      return r;
    }
    // The worker holds the queue: sleep until it has completed what this thread waits for.
    wakeAt_ = std::min(wakeAt_, target);
    doneCv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return completed_ >= target; });
  }
}

bool HostStream::idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ == enqueued_;
}

static std::mutex registryMutex;
static std::unordered_set<HostStream*>& registry() {
  static auto* set = new std::unordered_set<HostStream*>();
  return *set;
}

HostStream* hostStreamOf(cudaStream_t stream, int device) {
  std::lock_guard<std::mutex> lock(registryMutex);
  if (!stream) {
    // Default streams live as long as the process: a thread may still be running on one at exit.
    static auto* defaults = new std::unordered_map<int, HostStream*>();
    HostStream*& s = (*defaults)[device];
    if (!s) s = new HostStream();
    return s;
  }
  auto* s = reinterpret_cast<HostStream*>(stream);
  return registry().count(s) ? s : nullptr;
}

int getDevice();
HostStream* hostStreamOf(cudaStream_t stream) { return hostStreamOf(stream, getDevice()); }

static void registerStream(HostStream* s) {
  std::lock_guard<std::mutex> lock(registryMutex);
  registry().insert(s);
}

static bool unregisterStream(HostStream* s) {
  std::lock_guard<std::mutex> lock(registryMutex);
  return registry().erase(s) == 1;
}

static uint64_t nowNs() {
  return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace plexus

using plexus::HostStream;
using plexus::setError;

#define PLEXUS_EXPORT __attribute__((visibility("default")))

extern "C" {

PLEXUS_EXPORT ncclResult_t plexusStreamCreate(cudaStream_t* stream) {
  if (!stream) return setError(nullptr, ncclInvalidArgument, "plexusStreamCreate: stream is NULL");
  auto* s = new HostStream();
  plexus::registerStream(s);
  *stream = reinterpret_cast<cudaStream_t>(s);
  return ncclSuccess;
}

PLEXUS_EXPORT ncclResult_t plexusStreamDestroy(cudaStream_t stream) {
  auto* s = reinterpret_cast<HostStream*>(stream);
  if (!stream || !plexus::unregisterStream(s))
    return setError(nullptr, ncclInvalidArgument, "plexusStreamDestroy: %p is not a live host stream", (void*)stream);
  delete s;
  return ncclSuccess;
}

PLEXUS_EXPORT ncclResult_t plexusStreamSynchronize(cudaStream_t stream) {
  HostStream* s = plexus::hostStreamOf(stream);
  if (!s)
    return setError(nullptr, ncclInvalidArgument, "plexusStreamSynchronize: %p is not a host stream", (void*)stream);
  return s->synchronize();
}

PLEXUS_EXPORT ncclResult_t plexusStreamQuery(cudaStream_t stream) {
  HostStream* s = plexus::hostStreamOf(stream);
  if (!s) return setError(nullptr, ncclInvalidArgument, "plexusStreamQuery: %p is not a host stream", (void*)stream);
  return s->idle() ? ncclSuccess : ncclInProgress;
}

PLEXUS_EXPORT ncclResult_t plexusEventCreate(plexusEvent_t* event) {
  if (!event) return setError(nullptr, ncclInvalidArgument, "plexusEventCreate: event is NULL");
  *event = new plexusEvent();
  return ncclSuccess;
}

PLEXUS_EXPORT ncclResult_t plexusEventDestroy(plexusEvent_t event) {
  if (!event) return setError(nullptr, ncclInvalidArgument, "plexusEventDestroy: event is NULL");
  {
    // Wait for a pending record so that the stream never touches a freed event.
    std::unique_lock<std::mutex> lock(event->mu);
    event->cv.wait(lock, [&] { return event->completed >= event->recorded; });
  }
  delete event;
  return ncclSuccess;
}

PLEXUS_EXPORT ncclResult_t plexusEventRecord(plexusEvent_t event, cudaStream_t stream) {
  if (!event) return setError(nullptr, ncclInvalidArgument, "plexusEventRecord: event is NULL");
  HostStream* s = plexus::hostStreamOf(stream);
  if (!s) return setError(nullptr, ncclInvalidArgument, "plexusEventRecord: %p is not a host stream", (void*)stream);
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lock(event->mu);
    gen = ++event->recorded;
  }
  s->enqueue([event, gen] {
    std::lock_guard<std::mutex> lock(event->mu);
    event->timeNs = plexus::nowNs();
    if (event->completed < gen) event->completed = gen;
    event->cv.notify_all();
    return ncclSuccess;
  });
  return ncclSuccess;
}

PLEXUS_EXPORT ncclResult_t plexusEventSynchronize(plexusEvent_t event) {
  if (!event) return setError(nullptr, ncclInvalidArgument, "plexusEventSynchronize: event is NULL");
  std::unique_lock<std::mutex> lock(event->mu);
  uint64_t target = event->recorded;
  event->cv.wait(lock, [&] { return event->completed >= target; });
  return ncclSuccess;
}

PLEXUS_EXPORT ncclResult_t plexusEventQuery(plexusEvent_t event) {
  if (!event) return setError(nullptr, ncclInvalidArgument, "plexusEventQuery: event is NULL");
  std::lock_guard<std::mutex> lock(event->mu);
  return event->completed >= event->recorded ? ncclSuccess : ncclInProgress;
}

PLEXUS_EXPORT ncclResult_t plexusEventElapsedTime(float* ms, plexusEvent_t start, plexusEvent_t end) {
  if (!ms || !start || !end) return setError(nullptr, ncclInvalidArgument, "plexusEventElapsedTime: NULL argument");
  std::scoped_lock lock(start->mu, end->mu);
  if (!start->recorded || !end->recorded || start->completed < start->recorded || end->completed < end->recorded)
    return setError(nullptr, ncclInvalidUsage, "plexusEventElapsedTime: both events must be recorded and complete");
  *ms = (float)((double)((int64_t)(end->timeNs - start->timeNs)) / 1e6);
  return ncclSuccess;
}

PLEXUS_EXPORT ncclResult_t plexusStreamWaitEvent(cudaStream_t stream, plexusEvent_t event) {
  if (!event) return setError(nullptr, ncclInvalidArgument, "plexusStreamWaitEvent: event is NULL");
  HostStream* s = plexus::hostStreamOf(stream);
  if (!s) return setError(nullptr, ncclInvalidArgument, "plexusStreamWaitEvent: %p is not a host stream", (void*)stream);
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(event->mu);
    target = event->recorded;
  }
  s->enqueue([event, target] {
    std::unique_lock<std::mutex> lock(event->mu);
    event->cv.wait(lock, [&] { return event->completed >= target; });
    return ncclSuccess;
  });
  return ncclSuccess;
}

}  // extern "C"
