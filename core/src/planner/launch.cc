#include "planner/launch.h"

#include <plexus/device/arch.h>
#include <plexus/device/kernel.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <unordered_set>

#include "comm/communicator.h"
#include "executor/host_executor.h"
#include "misc/check.h"
#include "misc/env.h"
#include "stream/host_stream.h"

namespace plexus {

const char* workStorageName(WorkStorage s) {
  switch (s) {
    case WorkStorage::Args: return "args";
    case WorkStorage::Fifo: return "fifo";
    case WorkStorage::Persistent: return "persistent";
  }
  return "?";
}

WorkStorage chooseWorkStorage(uint32_t n, bool capturing, StoragePolicy policy) {
  const bool fits = n <= PLEXUS_KERNEL_ARGS_MAX_WORKS;
  // A graph replays long after the ring has moved on: captured works live in the parameter or with the graph.
  if (capturing) return fits ? WorkStorage::Args : WorkStorage::Persistent;
  if (policy == StoragePolicy::Fifo || !fits) return WorkStorage::Fifo;
  return WorkStorage::Args;
}

size_t kernelArgsBytes(const plexusDevKernelArgs_v1_t& args) {
  const uint32_t inlined = args.storage == PLEXUS_WORK_STORAGE_ARGS ? args.nWorks : 0;
  return offsetof(plexusDevKernelArgs_v1_t, inlineWorks) + inlined * sizeof(plexusDevWork_v1_t);
}

PersistentWorks::~PersistentWorks() {
  reclaim();
  // Blocks still owned by live graphs stay with them: their release will find released_ gone, so it frees nothing
  // (the graph outlived the communicator; NCCL requires graphs to be destroyed first).
}

ncclResult_t PersistentWorks::allocate(const plexusDevWork_v1_t* works, uint32_t n, void** block,
                                       const plexusDevWork_v1_t** out) {
  auto* b = new Block{this, {}};
  const size_t bytes = sizeof(plexusDevWork_v1_t) * n;
  if (rt_->alloc(MemKind::Device, bytes, &b->mem) != ncclSuccess || rt_->copyToDevice(b->mem.ptr, works, bytes) != ncclSuccess) {
    const std::string why = rt_->lastError();
    if (b->mem.ptr) rt_->free(&b->mem);
    delete b;
    return setError(nullptr, ncclUnhandledCudaError, "cannot put a captured launch's %zu bytes of works in device "
                    "memory: %s", bytes, why.c_str());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_++;
  }
  *block = b;
  *out = static_cast<const plexusDevWork_v1_t*>(b->mem.ptr);
  return ncclSuccess;
}

ncclResult_t PersistentWorks::create(void* graph, const plexusDevWork_v1_t* works, uint32_t n,
                                     const plexusDevWork_v1_t** out) {
  void* block;
  NCCLCHECK(allocate(works, n, &block, out));
  if (rt_->graphRetain(graph, &PersistentWorks::release, block) != ncclSuccess) {
    const std::string why = rt_->lastError();
    release(block);
    reclaim();
    return setError(nullptr, ncclUnhandledCudaError, "cannot give a captured launch's works to its graph: %s",
                    why.c_str());
  }
  return ncclSuccess;
}

void PersistentWorks::release(void* block) {
  auto* b = static_cast<Block*>(block);
  std::lock_guard<std::mutex> lock(b->owner->mu_);
  b->owner->released_.push_back(b);
  b->owner->anyReleased_.store(true, std::memory_order_release);
}

int PersistentWorks::freeReleased() {
  std::vector<Block*> blocks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    anyReleased_.store(false, std::memory_order_relaxed);
    blocks.swap(released_);
    live_ -= (int)blocks.size();
  }
  for (Block* b : blocks) {
    rt_->free(&b->mem);
    delete b;
  }
  return (int)blocks.size();
}

int PersistentWorks::live() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_;
}

Launcher::Launcher(ncclComm* comm) : comm_(comm), rt_(comm->runtime), persistent_(comm->runtime) {}

Launcher::~Launcher() {
  // Every launch has run (the communicator waited): the events are idle.
  for (const Mark& m : marks_) rt_->eventDestroy(m.event);
  for (void* e : idleEvents_) rt_->eventDestroy(e);
  if (orderEvent_) rt_->eventDestroy(orderEvent_);
}

ncclResult_t Launcher::init() {
  const std::string policy = envStr("WORK_STORAGE", "auto");
  if (policy == "auto") policy_ = StoragePolicy::Auto;
  else if (policy == "args") policy_ = StoragePolicy::Args;
  else if (policy == "fifo") policy_ = StoragePolicy::Fifo;
  else
    return setError(comm_, ncclInvalidArgument,
                    "PLEXUS_WORK_STORAGE=%s: use auto (works in the kernel's parameter when they fit, else in the "
                    "workFifo), args or fifo", policy.c_str());
  host_ = comm_->backend == plexusBackendHost;
  if (comm_->backend == plexusBackendCuda) {
    const int64_t t = envInt("NTHREADS", 512);
    if (t < 64 || t > 1024 || t % 32)
      return setError(comm_, ncclInvalidArgument, "NCCL_NTHREADS=%lld: use a multiple of 32 from 64 to 1024",
                      (long long)t);
    threads_ = (unsigned)t;
  }
  if (comm_->backend == plexusBackendCuda) NCCLCHECK(loadKernels());
  if (rt_->eventCreate(&orderEvent_) != ncclSuccess)
    return setError(comm_, ncclUnhandledCudaError, "rank %d: cannot create an event: %s", comm_->rank,
                    rt_->lastError().c_str());
  return ncclSuccess;
}

void Launcher::retireCompleted() {
  while (!marks_.empty()) {
    const Mark m = marks_.front();
    const ncclResult_t r = rt_->eventQuery(m.event);
    if (r == ncclInProgress) return;
    // Done, or the stream failed (the launch's error reaches the application through the stream): either way the
    // device reads none of these entries any more.
    comm_->workFifo->consumeTo(m.produced);
    idleEvents_.push_back(m.event);
    marks_.erase(marks_.begin());
  }
}

bool Launcher::waitIdle(double seconds) {
  if (!haveLast_.load(std::memory_order_acquire)) return true;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds < 0 ? 1e9 : seconds);
  for (uint32_t iter = 0; rt_->eventQuery(orderEvent_) == ncclInProgress; iter++) {
    if (seconds == 0) return false;  // "idle now?": asked under locks (commCudaKernelsBusy), never waits
    if ((iter & 255) == 255 && std::chrono::steady_clock::now() > end) return false;
    dev::backoff(iter < 4096 ? iter : 4096);
  }
  return true;
}

ncclResult_t Launcher::markProduced(cudaStream_t stream) {
  void* event;
  if (!idleEvents_.empty()) {
    event = idleEvents_.back();
    idleEvents_.pop_back();
  } else if (rt_->eventCreate(&event) != ncclSuccess) {
    return setError(comm_, ncclUnhandledCudaError, "rank %d: cannot create an event: %s", comm_->rank,
                    rt_->lastError().c_str());
  }
  if (rt_->eventRecord(event, stream) != ncclSuccess) {
    idleEvents_.push_back(event);
    return setError(comm_, ncclUnhandledCudaError, "rank %d: cannot record an event: %s", comm_->rank,
                    rt_->lastError().c_str());
  }
  marks_.push_back(Mark{event, comm_->workFifo->produced()});
  return ncclSuccess;
}

size_t Launcher::kernelSlot(const plexusDevWork_v1_t& w) const {
  if (w.func >= ncclNumFuncs || w.datatype >= ncclNumTypes || w.redop >= plexusDevNumRedOps) return SIZE_MAX;
  const size_t slot = ((size_t(w.algorithm) * ncclNumFuncs + w.func) * ncclNumTypes + w.datatype) * plexusDevNumRedOps + w.redop;
  return slot < kernels_.size() ? slot : SIZE_MAX;
}

// Lazy loading (CUDA 12.2+'s default) loads a kernel's code when it is first looked up or launched, and a load may
// wait for every kernel running in the context: behind a stream the application holds, or for ever where ranks share
// a GPU and a peer's kernel spins until ours arrives. NCCL loads its kernels at init for the same reason. Every
// (func, datatype, redop) of every algorithm is asked once; kernels shared by several are loaded once.
ncclResult_t Launcher::loadKernels() {
  const size_t perAlgo = size_t(ncclNumFuncs) * ncclNumTypes * plexusDevNumRedOps;
  kernels_.assign(comm_->algos.size() * perAlgo, nullptr);
  std::unordered_set<const void*> loaded;
  for (size_t a = 0; a < comm_->algos.size(); a++) {
    const AlgoInstance& algo = comm_->algos[a];
    if (!algo.plugin->api->hasCudaKernels()) continue;
    for (int f = 0; f < ncclNumFuncs; f++)
      for (int t = 0; t < ncclNumTypes; t++)
        for (int op = 0; op < plexusDevNumRedOps; op++) {
          plexusDevWork_v1_t w{};
          w.algorithm = (uint8_t)a;
          w.func = (uint8_t)f;
          w.datatype = (uint8_t)t;
          w.redop = (uint8_t)op;
          void* fn = nullptr;
          if (algo.plugin->api->getCudaKernel(algo.ctx, &w, &fn) != ncclSuccess || !fn) continue;
          if (loaded.insert(fn).second && rt_->loadKernel(fn) != ncclSuccess)
            return setError(comm_, ncclUnhandledCudaError, "rank %d: cannot load a CUDA kernel of algorithm "
                            "plugin '%s' (%s): %s", comm_->rank, algo.plugin->name.c_str(), algo.plugin->path.c_str(),
                            rt_->lastError().c_str());
          kernels_[kernelSlot(w)] = fn;
        }
  }
  INFO(NCCL_INIT, "rank %d: %zu CUDA kernels of %zu algorithm(s) loaded", comm_->rank, loaded.size(),
       comm_->algos.size());
  return ncclSuccess;
}

ncclResult_t Launcher::cudaKernelOf(const plexusDevWork_v1_t& w, const void** function) {
  if (const size_t slot = kernelSlot(w); slot != SIZE_MAX && kernels_[slot]) {
    *function = kernels_[slot];
    return ncclSuccess;
  }
  const AlgoInstance& a = comm_->algos[w.algorithm];
  void* fn = nullptr;
  if (!a.plugin->api->hasCudaKernels() || a.plugin->api->getCudaKernel(a.ctx, &w, &fn) != ncclSuccess || !fn)
    return setError(comm_, ncclInvalidUsage,
                    "rank %d: algorithm plugin '%s' (%s) has no CUDA kernel for %s of %s with op %d over %s%s",
                    comm_->rank, a.plugin->name.c_str(), a.plugin->path.c_str(), funcName((ncclFunc_t)w.func),
                    typeName((ncclDataType_t)w.datatype), (int)w.redop, protoName(w.proto),
                    a.plugin->version < PLEXUS_ALGO_ABI_VERSION ? " (its ABI v1 runs on the host backend only)" : "");
  *function = fn;
  return ncclSuccess;
}

ncclResult_t Launcher::relaunch() {
  pollCompletions();
  repeat_.args.launchSeq = ++launchSeq_;
  repeats_++;
  if (rt_->launch(lastStream_, repeat_.k) != ncclSuccess)
    return setError(comm_, ncclUnhandledCudaError, "rank %d: the kernel of %s opSeq %llu could not be launched: %s",
                    comm_->rank, funcName((ncclFunc_t)repeat_.args.inlineWorks[0].func),
                    (unsigned long long)repeat_.args.inlineWorks[0].opSeq, rt_->lastError().c_str());
  return ncclSuccess;
}

ncclResult_t Launcher::launch(cudaStream_t stream, const plexusDevWork_v1_t* works, uint32_t n) {
  repeat_.valid = false;
  pollCompletions();
  persistent_.reclaim();
  bool capturing = false;
  void* graph = nullptr;
  if (rt_->captureStatus(stream, &capturing, &graph) != ncclSuccess)
    return setError(comm_, ncclUnhandledCudaError, "rank %d: cannot query the stream's capture status: %s",
                    comm_->rank, rt_->lastError().c_str());
  // Launches of one communicator share its channels' connectors: a launch on another stream waits for the previous
  // one. A graph orders its own nodes; its launches neither wait nor are waited on.
  if (!capturing && haveLast_ && stream != lastStream_ && rt_->streamWaitEvent(stream, orderEvent_) != ncclSuccess)
    return setError(comm_, ncclUnhandledCudaError, "rank %d: cannot order the launch after the previous one: %s",
                    comm_->rank, rt_->lastError().c_str());
  uint32_t plans = 0;
  bool orderRecorded = false;
  for (uint32_t i = 0; i < n;) {
    const void* function;
    NCCLCHECK(kernelOf(works[i], &function));
    uint32_t j = i + 1;
    for (const void* next = nullptr; j < n; j++) {
      NCCLCHECK(kernelOf(works[j], &next));
      if (next != function) break;
    }
    if (comm_->backend == plexusBackendHost) function = &comm_->executor->kernel();
    // The last plan's kernel records the order event behind it.
    void* recordAfter = !capturing && j == n ? orderEvent_ : nullptr;
    bool recorded = false;
    NCCLCHECK(launchPlan(stream, works + i, j - i, function, capturing, graph, recordAfter, &recorded));
    if (recorded) orderRecorded = true;
    plans++;
    i = j;
  }
  last_.plans = plans;
  if (!capturing) {
    if (!orderRecorded && rt_->eventRecord(orderEvent_, stream) != ncclSuccess)
      return setError(comm_, ncclUnhandledCudaError, "rank %d: cannot record an event: %s", comm_->rank,
                      rt_->lastError().c_str());
    lastStream_ = stream;
    haveLast_.store(true, std::memory_order_release);
  }
  return ncclSuccess;
}

ncclResult_t Launcher::launchPlan(cudaStream_t stream, const plexusDevWork_v1_t* works, uint32_t n,
                                  const void* function, bool capturing, void* graph, void* recordAfter,
                                  bool* recorded) {
  *recorded = false;
  const WorkStorage storage = chooseWorkStorage(n, capturing, policy_);
  plexusDevKernelArgs_v1_t args;
  memset(&args, 0, offsetof(plexusDevKernelArgs_v1_t, inlineWorks));
  args.comm = comm_->devCommForKernels;
  args.storage = (uint32_t)storage;
  args.nWorks = n;
  args.launchSeq = ++launchSeq_;
  args.hostOps = comm_->backend == plexusBackendHost ? &comm_->p2pHostOps : nullptr;
  for (uint32_t i = 0; i < n; i++) args.channelMask |= dev::workChannelMask(&works[i]);
  switch (storage) {
    case WorkStorage::Args:
      memcpy(args.inlineWorks, works, sizeof(plexusDevWork_v1_t) * n);
      break;
    case WorkStorage::Fifo: {
      WorkFifo& fifo = *comm_->workFifo;
      HostStream* host = comm_->backend == plexusBackendHost ? reinterpret_cast<HostStream*>(stream) : nullptr;
      // A full ring: look for finished launches, and on the host run the stream's launches on this thread rather
      // than wait for its worker.
      NCCLCHECK(fifo.reserve(n, &comm_->abortFlag, &args.first, [this, host] {
        pollCompletions();
        if (host) host->help();
      }));
      for (uint32_t i = 0; i < n; i++) fifo.at(args.first + i) = works[i];
      args.works = fifo.deviceRing();
      args.mask = fifo.mask();
      break;
    }
    case WorkStorage::Persistent:
      if (persistent_.create(graph, works, n, &args.works) != ncclSuccess)
        return setError(comm_, ncclUnhandledCudaError, "rank %d: %s", comm_->rank, lastError(nullptr));
      break;
  }
  last_.storage = storage;
  last_.nWorks = n;
  last_.channelMask = args.channelMask;
  if (args.channelMask) {
    KernelLaunch k;
    k.function = function;
    k.grid = (unsigned)dev::popcount64(args.channelMask);
    k.block = threads_;
    k.args = &args;
    k.argsBytes = kernelArgsBytes(args);
    // Not behind a Fifo launch: its mark is recorded after it, and the order event must come last.
    k.recordAfter = storage == WorkStorage::Fifo ? nullptr : recordAfter;
    if (rt_->launch(stream, k) != ncclSuccess)
      return setError(comm_, ncclUnhandledCudaError, "rank %d: the kernel of %s opSeq %llu could not be launched: %s",
                      comm_->rank, funcName((ncclFunc_t)works[0].func), (unsigned long long)works[0].opSeq,
                      rt_->lastError().c_str());
    *recorded = k.recordAfter != nullptr;
    if (host_ && n == 1 && storage == WorkStorage::Args && *recorded) {
      // The whole launch (its one plan records the order event): what a repeat launches again.
      memcpy(&repeat_.args, &args, k.argsBytes);
      repeat_.k = k;
      repeat_.k.args = &repeat_.args;
      repeat_.valid = true;
    }
  }
  if (storage == WorkStorage::Fifo) NCCLCHECK(markProduced(stream));
  return ncclSuccess;
}

}  // namespace plexus
