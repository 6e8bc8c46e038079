// Launching (layer 2 → 5): the planner's work items for one stream become plans, each one kernel launch through the
// device seam with one block per channel, the same on both backends. A plan is a run of consecutive works that one
// kernel runs (CUDA: the same CUfunction from the algorithm plugin; host: the same algorithm). Its works travel in
// one of three storage kinds (NCCL's ncclDevWorkStorageType):
//   Args        inline in the kernel's parameter, when they fit (PLEXUS_KERNEL_ARGS_MAX_WORKS);
//   FIFO        in the communicator's workFifo ring, when they do not; an event recorded after the launch marks
//               how far the ring is produced, and its completion (polled by the producer, NCCL's event callback)
//               advances workFifoConsumed;
//   Persistent  in memory owned by the CUDA graph a captured launch becomes, released with the graph (a user
//               object's destructor queues it; the next launch or the communicator's end frees it).
// Launches of one communicator run in launch order whatever streams they come on: a launch on another stream than
// the previous one first waits for an event recorded on that one.
#pragma once

#include <nccl.h>
#include <plexus/device_v1.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "device/runtime.h"

struct ncclComm;

namespace plexus {

enum class WorkStorage : uint8_t { Args = PLEXUS_WORK_STORAGE_ARGS, Fifo = PLEXUS_WORK_STORAGE_FIFO,
                                   Persistent = PLEXUS_WORK_STORAGE_PERSISTENT };
const char* workStorageName(WorkStorage s);

// PLEXUS_WORK_STORAGE: auto (the choice above), or args / fifo to force one where it can hold the plan.
enum class StoragePolicy : uint8_t { Auto, Args, Fifo };

// The storage of a plan of n works: Persistent when the stream captures and the works do not fit the parameter,
// else Args when they fit (and the policy allows), else FIFO.
WorkStorage chooseWorkStorage(uint32_t n, bool capturing, StoragePolicy policy);

// The bytes of a kernel parameter that carries n works (Args), or none inline.
size_t kernelArgsBytes(const plexusDevKernelArgs_v1_t& args);

// Works of captured launches, freed once their graph is gone. release() may run on any thread (the driver's);
// it only queues, since a user object's destructor must not call the driver.
class PersistentWorks {
 public:
  explicit PersistentWorks(DeviceRuntime* rt) : rt_(rt) {}
  ~PersistentWorks();
  // Device memory holding n works (copied from works), retained by graph until it is destroyed.
  ncclResult_t create(void* graph, const plexusDevWork_v1_t* works, uint32_t n, const plexusDevWork_v1_t** out);
  // create's first half: the block, before a graph owns it (what release takes).
  ncclResult_t allocate(const plexusDevWork_v1_t* works, uint32_t n, void** block, const plexusDevWork_v1_t** out);
  // Frees what released graphs left; returns how many blocks it freed. Called per launch: a load when there is none.
  int reclaim() { return anyReleased_.load(std::memory_order_acquire) ? freeReleased() : 0; }
  int live() const;  // blocks not yet freed (tests)
  static void release(void* block);

 private:
  int freeReleased();
  struct Block {
    PersistentWorks* owner;
    DeviceMem mem;
  };
  DeviceRuntime* rt_;
  mutable std::mutex mu_;
  std::vector<Block*> released_;
  std::atomic<bool> anyReleased_{false};  // lets reclaim, called per launch, skip the lock when there is nothing
  int live_ = 0;
};

class Launcher {
 public:
  explicit Launcher(ncclComm* comm);
  ~Launcher();
  ncclResult_t init();

  // Launches works [0, n) of the planner's, all for stream, as plans (CUDA: with the communicator's device current,
  // DeviceGuard). On error nothing more of them is launched
  // and the communicator's error says why.
  ncclResult_t launch(cudaStream_t stream, const plexusDevWork_v1_t* works, uint32_t n);
  // Host backend: when the last launch was one work in the kernel's parameter, on stream, for the same collective,
  // datatype and count (hence the same decision: algorithm, protocol, channels, chunk), that work as it was
  // launched; the caller sets the task's own fields (buffers, operator, root, opSeq) and calls relaunch. Else
  // nullptr. A lone collective repeated in a loop then launches without deciding, planning or building arguments
  // again: 640 -> 250 instructions of its 1,465 (1 rank, 8 B Broadcast).
  plexusDevWork_v1_t* repeatable(cudaStream_t stream, int func, int datatype, size_t count) {
    if (!repeat_.valid || stream != lastStream_) return nullptr;
    plexusDevWork_v1_t& w = repeat_.args.inlineWorks[0];
    return w.func == func && w.datatype == datatype && w.count == count ? &w : nullptr;
  }
  ncclResult_t relaunch();
  // Advances the workFifo's consumed count past every launch whose completion event has fired. Called per launch: a
  // test when no FIFO launch is pending.
  void pollCompletions() {
    if (!marks_.empty()) retireCompleted();
  }
  // Waits until every launch so far has run (or failed), at most `seconds` (< 0: for ever); false when that time
  // passed first. Any thread.
  bool waitIdle(double seconds = -1);
  unsigned threads() const { return threads_; }  // CUDA: threads per block
  uint64_t launches() const { return launchSeq_; }
  uint64_t repeats() const { return repeats_; }  // relaunches
  // What the last launch used, for tests and reports.
  struct Last {
    WorkStorage storage = WorkStorage::Args;
    uint32_t nWorks = 0, plans = 0;
    uint64_t channelMask = 0;
  };
  Last last() const { return last_; }
  PersistentWorks& persistent() { return persistent_; }
  StoragePolicy policy() const { return policy_; }

 private:
  // recordAfter: an event the plan's kernel records behind it (*recorded: it did; not when no kernel ran).
  ncclResult_t launchPlan(cudaStream_t stream, const plexusDevWork_v1_t* works, uint32_t n, const void* function,
                          bool capturing, void* graph, void* recordAfter, bool* recorded);
  // The kernel that runs w. Host: one host kernel (the executor) runs every plan; plans split where the algorithm
  // changes, so the algorithm stands for the kernel here.
  ncclResult_t kernelOf(const plexusDevWork_v1_t& w, const void** function) {
    if (host_) {
      *function = (const void*)(uintptr_t)(w.algorithm + 1);
      return ncclSuccess;
    }
    return cudaKernelOf(w, function);
  }
  ncclResult_t cudaKernelOf(const plexusDevWork_v1_t& w, const void** function);
  void retireCompleted();
  ncclResult_t loadKernels();
  size_t kernelSlot(const plexusDevWork_v1_t& w) const;
  ncclResult_t orderAfterPrevious(cudaStream_t stream);
  ncclResult_t markProduced(cudaStream_t stream);

  ncclComm* comm_;
  DeviceRuntime* rt_;
  // CUDA: every algorithm's kernel by (algorithm, func, datatype, redop), found and loaded at init (loadKernels),
  // so that no launch asks the plugin or makes the driver load code.
  std::vector<const void*> kernels_;
  StoragePolicy policy_ = StoragePolicy::Auto;
  unsigned threads_ = 1;
  bool host_ = false;  // the host backend (init)
  uint64_t launchSeq_ = 0, repeats_ = 0;
  Last last_;
  // Cross-stream order: the stream of the previous launch, and the event the next stream waits on.
  cudaStream_t lastStream_ = nullptr;
  std::atomic<bool> haveLast_{false};
  void* orderEvent_ = nullptr;
  // FIFO completion: events recorded after launches, each with the produced count it marks, oldest first.
  struct Mark {
    void* event;
    uint32_t produced;
  };
  std::vector<Mark> marks_;
  std::vector<void*> idleEvents_;
  uint32_t lastMarked_ = 0;
  PersistentWorks persistent_;
  // The last launch, kept for repeatable (host backend, one work in the parameter, not captured).
  struct Repeat {
    bool valid = false;
    KernelLaunch k;
    plexusDevKernelArgs_v1_t args;
  } repeat_;
};

}  // namespace plexus
