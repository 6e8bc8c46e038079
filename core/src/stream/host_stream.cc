#include "host_stream.h"

#include <linux/membarrier.h>
#include <plexus/device/arch.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <new>
#include <unordered_map>
#include <unordered_set>

#include "misc/check.h"
#include "misc/env.h"

namespace plexus {

namespace {

// Whether this process may use membarrier(2)'s private expedited barrier (Linux 4.14; refused under some seccomp
// filters and by valgrind). Registered by each stream, not once: a child after fork is not registered, and its
// streams are its own.
bool membarrierRegistered() {
  static const bool offered = [] {
    const long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);
    return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED);
  }();
  return offered && syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) == 0;
}

}  // namespace

static uint64_t nowNs() {
  return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

char* HostStream::mapArena() {
  void* p = mmap(nullptr, kSlots * kSlotBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                 -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();  // as the new[] it replaces
  memset(p, 0, kSlots * kSlotBytes);  // the first write of each page still traps on a VM: here, not in a launch
  return static_cast<char*>(p);
}

HostStream::HostStream()
    : slots_(new Slot[kSlots]),
      arena_(mapArena()),
      launchDelay_(std::chrono::microseconds(std::max<int64_t>(1, envInt("LAUNCH_DELAY_US", 20)))),
      processBarriers_(membarrierRegistered()),
      worker_([this] { workerLoop(); }) {}

HostStream::~HostStream() {
  synchronize();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  workCv_.notify_all();
  worker_.join();
  munmap(arena_, kSlots * kSlotBytes);
}

void HostStream::wakeWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    workerAsleep_ = false;
  }
  workCv_.notify_one();
}

uint64_t HostStream::claim() {
  const uint64_t ticket = tail_.fetch_add(1);
  // A full ring: this thread has nothing better to do than run the oldest operations itself.
  if (ticket - head_.load(std::memory_order_acquire) >= kSlots) {
    syncing_++;
    for (uint32_t iter = 0; ticket - head_.load(std::memory_order_acquire) >= kSlots; iter++)
      if (!tryRun(false)) dev::backoff(iter < 8192 ? iter : 8192);
    syncing_--;
  }
  return ticket;
}

// Publishing and the worker's going to sleep are a Dekker pair: each side stores its flag, then loads the other's, so
// that the worker never sleeps on an operation it did not see. Where the worker orders its side with a barrier on
// every thread of the process (membarrier, on its rare way to sleep), publishing needs only the compiler's order: a
// seq_cst store is a locked exchange on x86, which waits for the stores of the launch before it (1 rank, 8 B
// Broadcast: 100 -> 97 ns per operation).
void HostStream::publish(uint64_t ticket) {
  if (processBarriers_) {
    slots_[ticket % kSlots].seq.store(ticket + 1, std::memory_order_release);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (workerAsleep_.load(std::memory_order_relaxed)) wakeWorker();
    return;
  }
  slots_[ticket % kSlots].seq.store(ticket + 1);  // seq_cst: ordered before the check of workerAsleep_ below
  if (workerAsleep_.load()) wakeWorker();
}

void HostStream::enqueue(Op op) {
  const uint64_t ticket = claim();
  Slot& slot = slots_[ticket % kSlots];
  slot.op = std::move(op);
  slot.fn = nullptr;
  publish(ticket);
}

void HostStream::enqueue(DataFn fn, void* ctx, const void* head, size_t headBytes, const void* body, size_t bodyBytes) {
  const uint64_t ticket = claim();
  Slot& slot = slots_[ticket % kSlots];
  slot.fn = fn;
  slot.ctx = ctx;
  char* data = arena_ + (ticket % kSlots) * kSlotBytes;
  if (headBytes + bodyBytes > kSlotBytes) {
    slot.big.resize(headBytes + bodyBytes);
    data = slot.big.data();
  }
  if (headBytes) memcpy(data, head, headBytes);
  if (bodyBytes) memcpy(data + headBytes, body, bodyBytes);
  slot.data = data;
  publish(ticket);
}

const char* HostStream::Following::bytes(uint64_t i) const {
  const uint64_t t = ticket_ + 1 + i;
  if (i + 1 >= kSlots || !stream_->published(t)) return nullptr;
  const Slot& slot = stream_->slots_[t % kSlots];
  return slot.fn == fn_ && slot.ctx == ctx_ ? slot.data : nullptr;
}

bool HostStream::tryRun(bool isWorker) {
  if (running_.exchange(true, std::memory_order_acquire)) return false;
  for (uint64_t h = head_.load(std::memory_order_relaxed); published(h); h++) {
    // The worker hands the queue over to a synchronizing thread as soon as one waits: that thread
    // is awake anyway, and the two would otherwise take turns on a core.
    if (isWorker && syncing_.load()) break;
    Slot& slot = slots_[h % kSlots];
    ncclResult_t r;
    if (slot.fn) {
      Following next(this, h, slot.fn, slot.ctx);
      r = slot.fn(slot.ctx, slot.data, &next);  // the slot is not reused before head_ passes it
      h += next.taken_;                         // what it ran too completes with it
    } else {
      Op op = std::move(slot.op);
      slot.op = nullptr;
      r = op();
    }
    if (r != ncclSuccess) {
      int expected = ncclSuccess;
      error_.compare_exchange_strong(expected, r);
    }
    // Not seq_cst: a locked store here would wait for the operation's stores to reach the peers that read them (2
    // ranks, 8 B Broadcast: a fifth of the receiver's cycles). A synchronizing thread that sleeps sets wakeAt_ first;
    // this check sees it soon, and the one after the loop for certain.
    head_.store(h + 1, std::memory_order_release);
    // Wake a synchronizing thread only when what it waits for is done: a wake-up per operation
    // would cost a context switch each.
    if (h + 1 >= wakeAt_.load(std::memory_order_relaxed)) notifyDone();
  }
  running_.store(false);  // seq_cst: ordered before the checks of wakeAt_ and syncing_
  // A thread asleep in synchronize saw running_ set: it has set wakeAt_, and takes the queue over from here.
  if (wakeAt_.load() != UINT64_MAX || (isWorker && syncing_.load())) notifyDone();
  return true;
}

void HostStream::notifyDone() {
  std::lock_guard<std::mutex> lock(mu_);
  wakeAt_ = UINT64_MAX;
  doneCv_.notify_all();
}

void HostStream::workerLoop() {
  using std::chrono::microseconds;
  const microseconds maxPeriod(1000);
  // While other threads move the queue on, the checks back off further: a synchronizing thread rouses the worker
  // when it returns (what the application launches next is fresh work), and a thread that stops enqueuing leaves its
  // last operations waiting two of these at most.
  const microseconds busyPeriod(4000);
  constexpr int kQuietChecks = 8;  // timer checks with nothing queued before the worker sleeps
  microseconds period = launchDelay_;
  int quiet = 0;
  // An operation still first in the queue at two checks a launch delay apart was left unclaimed.
  uint64_t frontSeen = UINT64_MAX, tailSeen = UINT64_MAX;
  microseconds unclaimed(0);          // how long frontSeen has been first in the queue
  microseconds check = launchDelay_;  // the wait before the last look at the front
  // A wait while other threads move the queue on, cut short when a synchronizing thread returns: what the
  // application launches next is fresh work. Unless the last kIdleRouses rouses each found the next operation taken
  // by a synchronizing thread again: an application that synchronizes after each operation would otherwise have
  // the worker woken every few hundred operations for nothing, each time taking the core of a spinning rank (2 ranks
  // on 2 cores, 64 B AllGather and synchronize 300,000 times: 1,300-1,500 preemptions of rank 0, 0.78-0.89 us per
  // operation; 105 and 0.58-0.60 us without those rouses; PyTorch's 8 B allreduce 20-21 -> 13-15 us). The rouses
  // come back once the worker runs an operation, as it does at its next look or the one after (4 ms each) if
  // nobody synchronizes.
  constexpr int kIdleRouses = 16;
  int idleRouses = 0;      // rouses in a row after which the worker ran nothing before dozing again
  bool rouseOpen = false;  // roused, and nothing run since
  auto doze = [&] {
    std::unique_lock<std::mutex> lock(mu_);
    if (rouseOpen && ++idleRouses >= kIdleRouses) rouseWanted_.store(false, std::memory_order_relaxed);
    rouseOpen = false;
    workerDozes_ = true;
    workCv_.wait_for(lock, check, [this] { return stop_ || !workerDozes_; });
    if (!workerDozes_) {  // roused
      frontSeen = UINT64_MAX;
      rouseOpen = true;
    }
    workerDozes_ = false;
  };
  auto ran = [&] {
    idleRouses = 0;
    rouseOpen = false;
    rouseWanted_.store(true, std::memory_order_relaxed);
  };
  while (!stop_) {
    workerLooks_.fetch_add(1, std::memory_order_relaxed);
    const uint64_t front = head_.load();
    if (!published(front)) {
      std::unique_lock<std::mutex> lock(mu_);
      if (quiet >= kQuietChecks) {
        workerAsleep_ = true;  // seq_cst: ordered before the check below, as publish's store and load
        // Every enqueuing thread's publish before this point is seen below, and every one after it sees the flag. A
        // barrier refused (it should not be, once registered) leaves that unordered: the worker sleeps on a timer then.
        const bool ordered = !processBarriers_ || syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) == 0;
        if (!published(head_.load())) {
          workerSleeps_.fetch_add(1, std::memory_order_relaxed);
          const auto woken = [this] { return stop_ || !workerAsleep_; };
          if (ordered)
            workCv_.wait(lock, woken);
          else
            workCv_.wait_for(lock, maxPeriod, woken);
        }
        workerAsleep_ = false;
        rouseOpen = false;
        period = launchDelay_;
        quiet = 0;
      } else {
        workCv_.wait_for(lock, period, [this] { return stop_.load(); });
        quiet++;
        period = std::min(period * 2, maxPeriod);
      }
      frontSeen = UINT64_MAX;  // the next operation is fresh work: first looked at after a launch delay
      continue;
    }
    if (running_.load()) {
      // Another thread runs the queue: look again when a synchronizing thread returns, or after busyPeriod. Not at
      // each of its let-gos (a producer facing a full ring lets go once a ring of operations), nor on a short timer:
      // each look is a context switch that takes a core the ranks' spinning threads need.
      check = busyPeriod;
      frontSeen = front;
      tailSeen = tail_.load();
      doze();
      continue;
    }
    // Leave each operation to a synchronizing thread for a launch delay: it is awake and warm, and
    // the two would otherwise compete for a core. So is a thread still enqueuing: it synchronizes
    // next, or runs the queue itself once the ring is full. While it enqueues, the checks come at
    // doubling intervals: each is a context switch where the process has one core (mpirun binds each
    // rank to one). For maxPeriod at most, so that a slow producer that never synchronizes still sees
    // its operations progress. Where other threads move the queue on (the front moved since the last look), the
    // checks back off the same way, up to busyPeriod.
    const uint64_t tail = tail_.load();
    const bool fresh = frontSeen == UINT64_MAX, sameFront = front == frontSeen;
    unclaimed = sameFront ? unclaimed + check : microseconds(0);
    const bool producing = tail != tailSeen && unclaimed < maxPeriod;
    if (!sameFront || producing || !tryRun(true)) {
      const bool busy = !sameFront && !fresh;
      check = sameFront && producing ? std::min(check * 2, maxPeriod - unclaimed)
              : busy                 ? std::min(check * 2, busyPeriod)
                                     : launchDelay_;
      frontSeen = front;
      tailSeen = tail;
      if (busy) {
        doze();
        continue;
      }
      std::unique_lock<std::mutex> lock(mu_);
      workCv_.wait_for(lock, check, [this] { return stop_.load(); });
      continue;
    }
    // Work was left unclaimed: check back promptly.
    ran();
    period = launchDelay_;
    quiet = 0;
  }
}

ncclResult_t HostStream::synchronize() {
  const uint64_t target = tail_.load();
  if (head_.load() >= target) return (ncclResult_t)error_.exchange(ncclSuccess);
  syncing_++;
  for (uint32_t iter = 0; head_.load() < target; iter++) {
    if (tryRun(false)) continue;  // ran what was published (the rest is still being enqueued)
    if (iter < 64) {
      dev::backoff(iter);
      continue;
    }
    // Another thread runs the operations: sleep until what this thread waits for is done, or the
    // worker has handed the queue over.
    std::unique_lock<std::mutex> lock(mu_);
    uint64_t at = wakeAt_.load();
    while (target < at && !wakeAt_.compare_exchange_weak(at, target)) {
    }
    // seq_cst: wakeAt_ is set before running_ is checked; a runner that lets go after that check sees wakeAt_.
    if (head_.load() < target && running_.load()) doneCv_.wait_for(lock, std::chrono::milliseconds(10));
  }
  syncing_--;
  // Backing off while this thread ran the queue: what comes next is fresh work.
  if (workerDozes_.load() && rouseWanted_.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(mu_);
    workerDozes_ = false;
    workerRouses_.fetch_add(1, std::memory_order_relaxed);
    workCv_.notify_one();
  }
  return (ncclResult_t)error_.exchange(ncclSuccess);
}

void HostStream::help() {
  syncing_++;
  tryRun(false);
  syncing_--;
}

bool HostStream::idle() const { return head_.load() == tail_.load(); }

static std::mutex registryMutex;
static std::unordered_set<HostStream*>& registry() {
  static auto* set = new std::unordered_set<HostStream*>();
  return *set;
}
// Bumped whenever a stream is destroyed: a thread's cached answer is good while the epoch holds, so
// the launch path looks a stream up without taking the registry's lock.
static std::atomic<uint64_t> registryEpoch{0};

HostStream* hostStreamOf(cudaStream_t stream, int device) {
  // One thread-local: each costs a call to find it.
  thread_local struct {
    cudaStream_t stream;
    int device;
    HostStream* found;
    uint64_t epoch;
  } cache{nullptr, -1, nullptr, 0};
  const uint64_t epoch = registryEpoch.load(std::memory_order_acquire);
  if (cache.found && cache.stream == stream && (stream || cache.device == device) && cache.epoch == epoch)
    return cache.found;
  HostStream* s = nullptr;
  {
    std::lock_guard<std::mutex> lock(registryMutex);
    if (!stream) {
      // Default streams live as long as the process: a thread may still be running on one at exit.
      static auto* defaults = new std::unordered_map<int, HostStream*>();
      HostStream*& d = (*defaults)[device];
      if (!d) d = new HostStream();
      s = d;
    } else {
      auto* candidate = reinterpret_cast<HostStream*>(stream);
      if (registry().count(candidate)) s = candidate;
    }
  }
  if (s) cache = {stream, device, s, epoch};
  return s;
}

int getDevice();
HostStream* hostStreamOf(cudaStream_t stream) { return hostStreamOf(stream, getDevice()); }

static void registerStream(HostStream* s) {
  std::lock_guard<std::mutex> lock(registryMutex);
  registry().insert(s);
}

static bool unregisterStream(HostStream* s) {
  std::lock_guard<std::mutex> lock(registryMutex);
  if (registry().erase(s) != 1) return false;
  registryEpoch.fetch_add(1, std::memory_order_acq_rel);
  return true;
}

void eventRecord(plexusEvent* event, HostStream* s) {
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lock(event->mu);
    gen = ++event->recorded;
  }
  s->enqueue([event, gen] {
    std::lock_guard<std::mutex> lock(event->mu);
    event->timeNs = nowNs();
    if (event->completed < gen) event->completed = gen;
    event->cv.notify_all();
    return ncclSuccess;
  });
}

void streamWaitEvent(HostStream* s, plexusEvent* event) {
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
  plexus::eventRecord(event, s);
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
  if (!s)
    return setError(nullptr, ncclInvalidArgument, "plexusStreamWaitEvent: %p is not a host stream", (void*)stream);
  plexus::streamWaitEvent(s, event);
  return ncclSuccess;
}

}  // extern "C"
