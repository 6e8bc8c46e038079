// ProcessGroupPlexus: torch.distributed's process-group API over one Plexus communicator (host backend: CPU
// tensors), as ProcessGroupNCCL is over NCCL.
//
// Every operation is enqueued on the group's Plexus stream and returns at once. A Plexus host stream runs its
// operations on the thread that synchronizes it, and Work::wait() is that thread: the caller runs what it waits for,
// then completes the operations' futures. A completion thread completes the rest: futures asked for (getFuture, DDP's
// communication hooks, isCompleted) at once, operations nobody waits for at its next polls. Handing each operation to
// that thread and back cost 8-10 us per operation (2 processes, dist.all_reduce of 8 B: 13 -> 4.8 us). An operation
// Plexus fails (a timeout, a dead peer, an abort) fails its future with Plexus's message, which Python raises.
#pragma once

#include <nccl.h>
#include <plexus.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace plexus_torch {

// An operation enqueued on a group's stream and not yet settled.
struct PendingOp {
  c10::intrusive_ptr<c10::ivalue::Future> future;
  std::vector<at::Tensor> outputs;  // its result
  std::function<void()> after;      // runs once it is done (copies out of a staging buffer)
  std::string what;
  c10d::OpType type;
};

// The operations of a group not yet settled (run, and their futures completed or failed), shared by the group and
// its Works, which may outlive it.
class Settlement {
 public:
  Settlement(ncclComm_t comm, cudaStream_t stream);
  void push(std::vector<PendingOp> ops);
  // Settles every operation pushed so far on this thread, the first of them in order.
  void settle();
  // Has the completion thread settle what is pending now: a future was asked for, or polled.
  void rouse();
  // Whether this thread is settling: a future's callback runs here, and whatever it waits for must settle here too.
  bool settlingHere() const { return settler_.load() == std::this_thread::get_id(); }
  // Settles what is left and stops the completion thread; the stream and communicator are not touched after.
  void close();
  // For tests: how often the completion thread woke, and how many operations it settled.
  std::pair<uint64_t, uint64_t> completerCounts() const { return {wakes_.load(), completerSettled_.load()}; }

 private:
  void complete();  // the completion thread

  const ncclComm_t comm_;
  const cudaStream_t stream_;
  std::recursive_mutex settleMu_;  // recursive: a future's callback may wait for an operation pushed after it
  std::atomic<std::thread::id> settler_{};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<PendingOp> pending_;
  uint64_t pushed_ = 0, taken_ = 0;  // operations pushed, and taken by a settle, so far
  bool hurry_ = false, stopping_ = false;
  std::atomic<uint64_t> wakes_{0}, completerSettled_{0};
  std::thread completer_;
};

// An operation's handle: its future, completed (or failed with Plexus's message) when the operation is settled.
// wait() raises the failure, as ProcessGroupNCCL's does (torch's future-wrapping Work would not).
class WorkPlexus : public c10d::Work {
 public:
  WorkPlexus(int rank, c10d::OpType type, c10::intrusive_ptr<c10::ivalue::Future> future,
             std::shared_ptr<Settlement> settlement)
      : c10d::Work(rank, type), future_(std::move(future)), settlement_(std::move(settlement)) {}
  bool isCompleted() override;
  bool isSuccess() const override { return !future_->hasError(); }
  std::exception_ptr exception() const override { return future_->exception_ptr(); }
  std::vector<at::Tensor> result() override { return future_->value().toTensorVector(); }
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<Settlement> settlement_;
};

class ProcessGroupPlexus : public c10d::ProcessGroup {
 public:
  // Rendezvous through the store torch hands over: rank 0 writes the ncclUniqueId, the others read it.
  ProcessGroupPlexus(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout);
  ~ProcessGroupPlexus() override;

  const std::string getBackendName() const override { return "plexus"; }
  // dist.batch_isend_irecv: the operations between them are one NCCL group (one launch, matched as a whole).
  void startCoalescing() override;
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& reqs) override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits, std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = {}) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts = {}, bool waitAllRanks = false) override;
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seq_; }

  ncclComm_t comm() const { return comm_; }
  const Settlement& settlement() const { return *settlement_; }

 private:
  // Work that runs once the operation is done, on the settling thread (copies out of a flat buffer).
  using After = std::function<void()>;
  // Enqueues `enqueue` (NCCL calls on stream_) and returns the operation's Work; `outputs` are its result.
  c10::intrusive_ptr<c10d::Work> run(const char* what, c10d::OpType type, std::vector<at::Tensor> outputs,
                                     const std::function<ncclResult_t()>& enqueue, After after = nullptr);
  [[noreturn]] void fail(const char* what, ncclResult_t r) const;
  c10::intrusive_ptr<c10d::Work> push(std::vector<PendingOp> ops);
  // A staging buffer of numel elements like `like`'s: the group's kept one when free, else a new one. release()
  // gives the kept one back once its operation is done.
  at::Tensor scratch(const at::Tensor& like, int64_t numel);
  void release(const at::Tensor& t);

  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::chrono::milliseconds timeout_;
  uint64_t seq_ = 0;
  std::mutex enqueueMu_;  // operations from several threads (DDP's autograd hooks) keep one order on every rank
  std::mutex scratchMu_;
  at::Tensor scratch_;  // bytes
  bool scratchBusy_ = false;
  bool coalescing_ = false;  // the caller's thread, between startCoalescing and endCoalescing
  std::vector<PendingOp> coalesced_;
  std::shared_ptr<Settlement> settlement_;
};

}  // namespace plexus_torch
