// Host streams and events: the host backend's CUDA streams. A stream is an in-order queue of
// operations. A thread that synchronizes the stream runs pending operations itself; the stream's own
// worker thread runs whatever is left unclaimed for a launch delay (PLEXUS_LAUNCH_DELAY_US), so
// operations progress even when nobody synchronizes, and a synchronizing thread never competes
// with a worker for a core.
//
// The worker is not woken per operation (a wake-up is a context switch, and on a busy node the worker
// would take the core a peer rank needs): after activity it checks back on a timer, after 4 ms while
// another thread runs the queue, at doubling intervals while other threads move it on (up to 4 ms) or
// keep enqueuing (up to 1 ms), and only after a quiet spell does it sleep until the next enqueue wakes
// it. A synchronizing thread that returns rouses it, so that what the application launches next starts
// after a launch delay; not while the rouses keep finding the next operation run by a synchronizing thread.
#pragma once

#include <nccl.h>
#include <plexus.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace plexus {

class HostStream {
 public:
  using Op = std::function<ncclResult_t()>;
  HostStream();
  ~HostStream();
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  void enqueue(Op op);
  class Following;
  // An operation with bytes of its own: head and body are copied into the operation's slot, which keeps
  // them until fn(ctx, bytes, next) has returned; the slot's buffer is reused, so a launch allocates nothing
  // and takes no lock once the ring's buffers have grown to the launches' size. next: the operations queued behind
  // it, which fn may run with its own.
  using DataFn = ncclResult_t (*)(void* ctx, const char* bytes, Following* next);
  // The operations published right behind a running DataFn operation, of the same fn and ctx: bytes(i) is the i-th
  // one's, or nullptr where there is none (not published yet, another kind, or the ring's end); take(n) says that
  // the run covered the first n of them, which then complete with it (a host launch runs the launches behind it
  // that it can run in the same pass).
  class Following {
   public:
    const char* bytes(uint64_t i) const;
    void take(uint64_t n) { taken_ = n; }

   private:
    friend class HostStream;
    Following(const HostStream* stream, uint64_t ticket, DataFn fn, void* ctx)
        : stream_(stream), ticket_(ticket), fn_(fn), ctx_(ctx) {}
    const HostStream* stream_;
    uint64_t ticket_;  // the running operation's
    DataFn fn_;
    void* ctx_;
    uint64_t taken_ = 0;
  };
  void enqueue(DataFn fn, void* ctx, const void* head, size_t headBytes, const void* body, size_t bodyBytes);
  ncclResult_t synchronize();  // returns the first error of the operations since the last synchronize
  bool idle() const;
  // Runs what is queued on the calling thread unless another thread is running it: for a thread that
  // must wait for the queue to drain (a producer facing a full workFifo).
  void help();
  // How often the worker has looked at the queue (each look follows a wait): for tests of its back-off.
  uint64_t workerLooks() const { return workerLooks_.load(std::memory_order_relaxed); }
  // For tests: how many times the worker went to sleep until an enqueue wakes it, and whether membarrier(2) orders
  // that sleep (publish then takes no locked instruction).
  uint64_t workerSleeps() const { return workerSleeps_.load(std::memory_order_relaxed); }
  bool processBarriers() const { return processBarriers_; }
  // For tests: whether the worker sleeps until an enqueue wakes it, or is on its way to.
  bool workerAsleep() const { return workerAsleep_.load(std::memory_order_relaxed); }
  // For tests: how many times a returning synchronize cut the worker's back-off short.
  uint64_t workerRouses() const { return workerRouses_.load(std::memory_order_relaxed); }

 private:
  // Operations live in a ring of slots: a producer takes a ticket (tail_), fills the ticket's slot and
  // publishes it (seq = ticket + 1); whoever runs operations takes them in ticket order and advances
  // head_. The launch path takes no lock; locks only guard the sleeps of the worker and of threads
  // waiting for another thread's operations.
  static constexpr uint64_t kSlots = 1024;
  // Each slot's bytes sit in one arena, mapped and written when the stream is made: the first pass through the ring
  // then neither allocates nor faults pages in, which made its operations 2-4 times slower (2 ranks, 8 B Broadcast:
  // the first 1024 at 0.8-1.2 us each, then 0.28 us; 4 ranks on 2 cores, 64 B AlltoAll, a launch of 8 works that
  // outgrew 512-byte slots: the first 1000 at 37-52 us, then 12-18). On a VM the kernel populates pages for 1 us
  // each (MAP_POPULATE) where a fault costs 6, and the first write of a page costs 5 more either way. 1 KiB holds a
  // launch of up to 14 works (an AlltoAll of 7 ranks); a larger one grows the slot's own vector.
  static constexpr size_t kSlotBytes = 1024;
  struct Slot {
    std::atomic<uint64_t> seq{0};
    Op op;
    DataFn fn = nullptr;  // instead of op
    void* ctx = nullptr;
    const char* data = nullptr;  // fn's bytes: the slot's part of the arena, or big
    std::vector<char> big;
  };
  static char* mapArena();
  uint64_t claim();  // takes a ticket and waits for its slot to be free (several threads may enqueue)
  void publish(uint64_t ticket);

  void workerLoop();
  // Runs published operations unless another thread is (false then). The worker stops early when a
  // synchronizing thread is waiting, to hand the queue over.
  bool tryRun(bool isWorker);
  void notifyDone();
  bool published(uint64_t ticket) const { return slots_[ticket % kSlots].seq.load() == ticket + 1; }
  void wakeWorker();

  std::unique_ptr<Slot[]> slots_;
  char* arena_;                                // kSlots * kSlotBytes, mapped
  alignas(64) std::atomic<uint64_t> tail_{0};  // tickets handed out
  alignas(64) std::atomic<uint64_t> head_{0};  // operations completed
  std::atomic<bool> running_{false};           // a thread is running operations
  std::atomic<int> error_{ncclSuccess};        // first error since the last synchronize
  std::atomic<int> syncing_{0};                // threads in synchronize
  std::atomic<uint64_t> wakeAt_{UINT64_MAX};   // smallest head a thread asleep on doneCv_ waits for
  std::atomic<bool> workerAsleep_{false};      // waits for an enqueue, not on a timer
  std::atomic<bool> workerDozes_{false};       // backs off while other threads move the queue on
  std::atomic<bool> rouseWanted_{true};        // a returning synchronize rouses a dozing worker (workerLoop)
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> workerLooks_{0};
  std::atomic<uint64_t> workerSleeps_{0};
  std::atomic<uint64_t> workerRouses_{0};
  std::mutex mu_;
  std::condition_variable workCv_, doneCv_;
  const std::chrono::microseconds launchDelay_;
  const bool processBarriers_;  // the worker's sleep is ordered by membarrier(2): publish takes no locked instruction
  std::thread worker_;
};

// The host stream a cudaStream_t names: NULL is the default stream of host device `device` (as CUDA's
// default stream belongs to a device); a pointer that is not a live host stream gives nullptr.
HostStream* hostStreamOf(cudaStream_t stream, int device);
// The same, with NULL meaning the calling thread's current device (plexusSetDevice).
HostStream* hostStreamOf(cudaStream_t stream);

}  // namespace plexus

struct plexusEvent;
namespace plexus {
// plexusEventRecord and plexusStreamWaitEvent on a resolved stream (a device's default stream too).
void eventRecord(plexusEvent* event, HostStream* stream);
void streamWaitEvent(HostStream* stream, plexusEvent* event);
}  // namespace plexus

struct plexusEvent {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0, completed = 0;
  uint64_t timeNs = 0;
};
