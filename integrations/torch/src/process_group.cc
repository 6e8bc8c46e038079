#include "process_group.h"

#include <Python.h>

#include <ATen/core/ivalue.h>

#include <cstring>
#include <stdexcept>

namespace plexus_torch {

namespace {

// torch's element types as NCCL's; bool travels as bytes (NCCL has no bool).
ncclDataType_t ncclType(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kChar: return ncclInt8;
    case at::kByte: return ncclUint8;
    case at::kBool: return ncclUint8;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    default:
      TORCH_CHECK(false, "plexus: tensors of ", t.scalar_type(), " cannot be communicated: Plexus (as NCCL) carries "
                  "float, double, half, bfloat16, int8, uint8, int32, int64 and bool");
  }
}

// A reduction as NCCL's. Bool: sum is or (max), product is and (min), as ProcessGroupNCCL does.
ncclRedOp_t ncclOp(const c10d::ReduceOp& op, const at::Tensor& t) {
  const bool isBool = t.scalar_type() == at::kBool;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return isBool ? ncclMax : ncclSum;
    case c10d::ReduceOp::PRODUCT: return isBool ? ncclMin : ncclProd;
    case c10d::ReduceOp::MIN: return ncclMin;
    case c10d::ReduceOp::MAX: return ncclMax;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!isBool, "plexus: ReduceOp.AVG of bool tensors is not defined");
      return ncclAvg;
    default:
      TORCH_CHECK(false, "plexus: ReduceOp ", (int)op.op_, " (BAND, BOR, BXOR) is not supported: NCCL has no bitwise "
                  "reductions; use SUM, PRODUCT, MIN, MAX, AVG or PREMUL_SUM");
  }
}

void checkTensor(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().is_cpu(), "plexus: ", what, ": the tensor is on ", t.device(), "; this backend runs Plexus's "
              "host backend and takes CPU tensors");
  TORCH_CHECK(t.is_contiguous(), "plexus: ", what, ": the tensor is not contiguous; call .contiguous() first");
  TORCH_CHECK(!t.is_sparse(), "plexus: ", what, ": sparse tensors are not supported");
}

const at::Tensor& single(const std::vector<at::Tensor>& ts, const char* what) {
  TORCH_CHECK(ts.size() == 1, "plexus: ", what, " takes one tensor per process (got ", ts.size(), ")");
  checkTensor(ts[0], what);
  return ts[0];
}

// Tensors of one list that must all be like `like` (count and type).
void checkAlike(const std::vector<at::Tensor>& ts, const at::Tensor& like, size_t n, const char* what) {
  TORCH_CHECK(ts.size() == n, "plexus: ", what, ": ", n, " tensors expected (one per rank), got ", ts.size());
  for (const at::Tensor& t : ts) {
    checkTensor(t, what);
    TORCH_CHECK(t.numel() == like.numel() && t.scalar_type() == like.scalar_type(), "plexus: ", what,
                ": every tensor of the list must have the input's size and type (", like.numel(), " x ",
                like.scalar_type(), "), one has ", t.numel(), " x ", t.scalar_type());
  }
}

// Whether the tensors lie end to end in list order (views of one buffer, as torch.chunk gives): then they are the
// flat buffer itself.
bool adjacent(const std::vector<at::Tensor>& ts) {
  for (size_t i = 1; i < ts.size(); i++)
    if ((char*)ts[i].data_ptr() != (char*)ts[i - 1].data_ptr() + ts[i - 1].nbytes()) return false;
  return true;
}

// Copies between the staging buffers and the tensors of a list (contiguous, CPU: checkTensor): a memcpy, where
// at::Tensor::copy_ and the views it needs go through torch's dispatcher (2 processes, 8 B to 4 KiB: list all_gather
// 24-26 -> 19-23 us, list reduce_scatter 23-27 -> 19-22 us).
void copyBytes(void* dst, const void* src, size_t bytes) { memcpy(dst, src, bytes); }

// From this size of one rank's part on, an AllGather into separate tensors is sends and receives into them (Plexus's
// planner lowers a one-buffer AllGather to the same from about here, within a node).
constexpr int64_t kDirectAllGatherBytes = 64 << 10;

// A group of NCCL calls: one launch, matched on every rank.
ncclResult_t grouped(const std::function<ncclResult_t()>& calls) {
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return r;
  r = calls();
  const ncclResult_t end = ncclGroupEnd();
  return r != ncclSuccess ? r : end;
}

// Plexus's failure as the exception Python raises: what failed, NCCL's error string, and the communicator's last
// error (which names the rank and peer of a timeout).
std::runtime_error plexusError(ncclComm_t comm, const char* what, ncclResult_t r) {
  const char* last = comm ? ncclGetLastError(comm) : ncclGetLastError(nullptr);
  return std::runtime_error(std::string("plexus: ") + what + " failed: " + ncclGetErrorString(r) +
                            (last && *last ? std::string(": ") + last : std::string()));
}

}  // namespace

ProcessGroupPlexus::ProcessGroupPlexus(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                       std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size), timeout_(timeout) {
  ncclUniqueId id;
  const std::string key = "plexus_torch/unique_id";
  if (rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) fail("ncclGetUniqueId", r);
    store->set(key, std::vector<uint8_t>((uint8_t*)&id, (uint8_t*)&id + sizeof id));
  } else {
    const std::vector<uint8_t> got = store->get(key);  // waits up to the store's timeout
    TORCH_CHECK(got.size() == sizeof id, "plexus: the store holds a unique id of ", got.size(), " bytes, not ",
                sizeof id, ": another Plexus version wrote it");
    memcpy(&id, got.data(), sizeof id);
  }
  // CPU tensors: Plexus's host backend, whatever GPUs the machine has (PLEXUS_BACKEND set by the user wins).
  setenv("PLEXUS_BACKEND", "host", 0);
  ncclResult_t r = ncclCommInitRank(&comm_, size, id, rank);
  if (r != ncclSuccess) fail("ncclCommInitRank", r);
  // torch's process-group timeout bounds every wait of every operation (0: none).
  if (timeout.count() > 0) plexusCommSetTimeout(comm_, (double)timeout.count() / 1000.0);
  r = plexusStreamCreate(&stream_);
  if (r != ncclSuccess) fail("plexusStreamCreate", r);
  settlement_ = std::make_shared<Settlement>(comm_, stream_);
}

ProcessGroupPlexus::~ProcessGroupPlexus() {
  if (settlement_) settlement_->close();
  if (stream_) plexusStreamDestroy(stream_);
  if (comm_) ncclCommDestroy(comm_);
}

void ProcessGroupPlexus::fail(const char* what, ncclResult_t r) const { throw plexusError(comm_, what, r); }

Settlement::Settlement(ncclComm_t comm, cudaStream_t stream) : comm_(comm), stream_(stream) {
  completer_ = std::thread([this] { complete(); });
}

void Settlement::push(std::vector<PendingOp> ops) {
  std::lock_guard<std::mutex> lock(mu_);
  for (PendingOp& op : ops) pending_.push_back(std::move(op));
  pushed_ += ops.size();
}

void Settlement::rouse() {
  std::lock_guard<std::mutex> lock(mu_);
  if (hurry_ || taken_ == pushed_) return;
  hurry_ = true;
  cv_.notify_one();
}

void Settlement::settle() {
  std::lock_guard<std::recursive_mutex> order(settleMu_);
  const std::thread::id outer = settler_.exchange(std::this_thread::get_id());
  std::deque<PendingOp> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(pending_);
    taken_ = pushed_;
  }
  if (!batch.empty()) {
    // Everything enqueued before this call, the batch among it, has run when this returns (with the first error).
    const ncclResult_t r = plexusStreamSynchronize(stream_);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm_, &async);
    for (PendingOp& op : batch) {
      try {
        if (r != ncclSuccess || async != ncclSuccess)
          throw plexusError(comm_, op.what.c_str(), async != ncclSuccess ? async : r);
        if (op.after) op.after();
        op.future->markCompleted(c10::IValue(op.outputs));
      } catch (...) {
        op.future->setError(std::current_exception());
      }
    }
  }
  settler_.store(outer);
}

// Wakes when a future is asked for (rouse), else polls: an operation pushed before one poll and still pending at the
// next is one nobody waits for (an asynchronous operation whose Work was dropped, or never waited), and is settled
// then. The polls come every 4 ms while they find operations pending, else every 100 ms: a push does not wake this
// thread, as each wake takes a core that a spinning rank needs (12,800 waited 1 MiB allreduces, 2 processes: 270 wakes
// where a push after a quiet spell woke it, 11 on the timer alone).
void Settlement::complete() {
  using std::chrono::milliseconds;
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t seen = 0;  // pushed_ at the last poll
  bool busy = false;  // the last poll found operations pending
  for (;;) {
    if (!hurry_ && !stopping_) {
      cv_.wait_for(lock, busy ? milliseconds(4) : milliseconds(100), [&] { return hurry_ || stopping_; });
      wakes_.fetch_add(1, std::memory_order_relaxed);
      if (!hurry_ && !stopping_) {
        const bool left = taken_ < seen;
        busy = taken_ < pushed_;
        seen = pushed_;
        if (!left) continue;
      }
    }
    hurry_ = false;
    if (stopping_ && taken_ == pushed_) return;
    const uint64_t before = taken_;
    lock.unlock();
    settle();
    lock.lock();
    // What this thread took (a waiting thread may have taken it first).
    completerSettled_.fetch_add(taken_ - before, std::memory_order_relaxed);
  }
}

void Settlement::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  // The completion thread settles what is pending and returns: a later settle() (a Work's wait) finds nothing, and
  // touches neither stream nor communicator. A thread still settling is waited for. Either may need the GIL (a future's Python callbacks), and Python drops the last reference
  // to the group with the GIL held: waiting under it would wait for ever.
  auto drain = [this] {
    if (completer_.joinable()) completer_.join();
    std::lock_guard<std::recursive_mutex> order(settleMu_);
  };
  if (Py_IsInitialized() && PyGILState_Check()) {
    Py_BEGIN_ALLOW_THREADS drain();
    Py_END_ALLOW_THREADS
  } else {
    drain();
  }
}

bool WorkPlexus::wait(std::chrono::milliseconds) {
  if (!future_->completed()) settlement_->settle();
  future_->wait();
  if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
  return true;
}

bool WorkPlexus::isCompleted() {
  if (future_->completed()) return true;
  settlement_->rouse();
  return false;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkPlexus::getFuture() {
  if (!future_->completed()) {
    // Inside a future's callback on the settling thread, nobody else would complete it: settled here, now.
    if (settlement_->settlingHere())
      settlement_->settle();
    else
      settlement_->rouse();
  }
  return future_;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::push(std::vector<PendingOp> ops) {
  auto future = ops.back().future;
  const c10d::OpType type = ops.size() == 1 ? ops[0].type : c10d::OpType::UNKNOWN;
  settlement_->push(std::move(ops));
  return c10::make_intrusive<WorkPlexus>(rank_, type, future, settlement_);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::run(const char* what, c10d::OpType type,
                                                       std::vector<at::Tensor> outputs,
                                                       const std::function<ncclResult_t()>& enqueue, After after) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
  PendingOp op{future, std::move(outputs), std::move(after), what, type};
  std::lock_guard<std::mutex> lock(enqueueMu_);
  ncclResult_t r = enqueue();
  if (r != ncclSuccess) fail(what, r);
  if (coalescing_) {  // launched, and settled, from endCoalescing on
    coalesced_.push_back(std::move(op));
    return c10::make_intrusive<WorkPlexus>(rank_, type, future, settlement_);
  }
  seq_++;
  std::vector<PendingOp> one;
  one.push_back(std::move(op));
  return push(std::move(one));
}

void ProcessGroupPlexus::startCoalescing() {
  TORCH_CHECK(!coalescing_, "plexus: startCoalescing twice without endCoalescing");
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) fail("ncclGroupStart", r);
  coalescing_ = true;
}

void ProcessGroupPlexus::endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>&) {
  TORCH_CHECK(coalescing_, "plexus: endCoalescing without startCoalescing");
  coalescing_ = false;
  std::vector<PendingOp> ops = std::move(coalesced_);
  coalesced_.clear();
  std::lock_guard<std::mutex> lock(enqueueMu_);
  ncclResult_t r = ncclGroupEnd();
  if (r != ncclSuccess) {
    for (PendingOp& op : ops)
      op.future->setError(std::make_exception_ptr(std::runtime_error(
          std::string("plexus: the coalesced group failed: ") + ncclGetErrorString(r) + ": " +
          ncclGetLastError(comm_))));
    fail("ncclGroupEnd (coalesced operations)", r);
  }
  seq_++;
  if (!ops.empty()) push(std::move(ops));
}

at::Tensor ProcessGroupPlexus::scratch(const at::Tensor& like, int64_t numel) {
  const int64_t bytes = numel * (int64_t)like.element_size();
  std::lock_guard<std::mutex> lock(scratchMu_);
  if (!scratchBusy_ && scratch_.defined() && scratch_.numel() >= bytes) {
    scratchBusy_ = true;
    return scratch_.narrow(0, 0, bytes).view(like.scalar_type());
  }
  if (!scratchBusy_) {  // the kept buffer grows to the largest asked for
    scratch_ = at::empty({bytes}, at::kByte);
    scratchBusy_ = true;
    return scratch_.view(like.scalar_type());
  }
  return at::empty({numel}, like.options());  // in use by an operation in flight
}

void ProcessGroupPlexus::release(const at::Tensor& t) {
  std::lock_guard<std::mutex> lock(scratchMu_);
  if (scratch_.defined() && t.data_ptr() == scratch_.data_ptr()) scratchBusy_ = false;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  at::Tensor t = single(tensors, "broadcast");
  const int root = (int)opts.rootRank;
  return run("broadcast", c10d::OpType::BROADCAST, tensors, [&] {
    return ncclBroadcast(t.data_ptr(), t.data_ptr(), t.numel(), ncclType(t), root, comm_, stream_);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  at::Tensor t = single(tensors, "allreduce");
  if (opts.reduceOp.op_ == c10d::ReduceOp::PREMUL_SUM) {
    // PREMUL_SUM (torch.distributed._make_nccl_premul_sum): a scalar factor, as NCCL's ncclRedOpCreatePreMulSum.
    auto* s = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(opts.reduceOp.supplement_.get());
    TORCH_CHECK(s, "plexus: PREMUL_SUM without its factor");
    TORCH_CHECK(s->tensor_factors.empty(), "plexus: PREMUL_SUM with a tensor factor is not supported; pass a number");
    at::Tensor factor = at::scalar_tensor(s->double_factor, t.options());
    return run("allreduce (PREMUL_SUM)", c10d::OpType::ALLREDUCE, tensors, [&] {
      ncclRedOp_t op;
      ncclResult_t r = ncclRedOpCreatePreMulSum(&op, factor.data_ptr(), ncclType(t), ncclScalarHostImmediate, comm_);
      if (r != ncclSuccess) return r;
      r = ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), ncclType(t), op, comm_, stream_);
      ncclRedOpDestroy(op, comm_);  // NCCL allows it once the operation is enqueued
      return r;
    });
  }
  const ncclRedOp_t op = ncclOp(opts.reduceOp, t);
  return run("allreduce", c10d::OpType::ALLREDUCE, tensors, [&] {
    return ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), ncclType(t), op, comm_, stream_);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                       const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "plexus: allreduce_coalesced of no tensor");
  std::vector<ncclRedOp_t> ops;
  for (const at::Tensor& t : tensors) {
    checkTensor(t, "allreduce_coalesced");
    ops.push_back(ncclOp(opts.reduceOp, t));
  }
  return run("allreduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, tensors, [&] {
    return grouped([&] {
      for (size_t i = 0; i < tensors.size(); i++) {
        at::Tensor& t = tensors[i];
        ncclResult_t r = ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), ncclType(t), ops[i], comm_, stream_);
        if (r != ncclSuccess) return r;
      }
      return ncclSuccess;
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  at::Tensor t = single(tensors, "reduce");
  TORCH_CHECK(opts.reduceOp.op_ != c10d::ReduceOp::PREMUL_SUM, "plexus: reduce with PREMUL_SUM is not supported");
  const ncclRedOp_t op = ncclOp(opts.reduceOp, t);
  const int root = (int)opts.rootRank;
  return run("reduce", c10d::OpType::REDUCE, tensors, [&] {
    return ncclReduce(t.data_ptr(), t.data_ptr(), t.numel(), ncclType(t), op, root, comm_, stream_);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllgatherOptions&) {
  at::Tensor in = single(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "plexus: allgather takes one output list per process (got ", outputs.size(), ")");
  std::vector<at::Tensor> outs = outputs[0];
  checkAlike(outs, in, (size_t)size_, "allgather");
  if (adjacent(outs))  // the list is one buffer: gathered into it
    return run("allgather", c10d::OpType::ALLGATHER, outs, [&] {
      return ncclAllGather(in.data_ptr(), outs[0].data_ptr(), in.numel(), ncclType(in), comm_, stream_);
    });
  // Separate tensors, large parts: each rank's part sent straight into its tensor here. That is what Plexus does
  // for a one-buffer AllGather of these sizes too (lowered to sends and receives, zero-copy within a node), so the
  // result is the same without a staging buffer and a second copy.
  if (in.numel() * in.element_size() >= kDirectAllGatherBytes)
    return run("allgather", c10d::OpType::ALLGATHER, outs, [&] {
      return grouped([&] {
        for (int k = 0; k < size_; k++) {  // from this rank on, so that ranks start on different peers
          const int p = (rank_ + k) % size_;
          ncclResult_t r = ncclSend(in.data_ptr(), in.numel(), ncclType(in), p, comm_, stream_);
          if (r == ncclSuccess) r = ncclRecv(outs[p].data_ptr(), in.numel(), ncclType(in), p, comm_, stream_);
          if (r != ncclSuccess) return r;
        }
        return ncclSuccess;
      });
    });
  // Small parts: gathered into a staging buffer (kept from one call to the next: fresh pages cost as much as the
  // copy) by one AllGather, then copied out once done.
  at::Tensor flat = scratch(in, (int64_t)size_ * in.numel());
  return run(
      "allgather", c10d::OpType::ALLGATHER, outs,
      [&] { return ncclAllGather(in.data_ptr(), flat.data_ptr(), in.numel(), ncclType(in), comm_, stream_); },
      [this, flat, outs]() mutable {
        const size_t part = outs[0].nbytes();
        for (size_t r = 0; r < outs.size(); r++) copyBytes(outs[r].data_ptr(), (char*)flat.data_ptr() + r * part, part);
        release(flat);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                   const c10d::AllgatherOptions&) {
  checkTensor(input, "_allgather_base");
  checkTensor(output, "_allgather_base");
  TORCH_CHECK(output.numel() == input.numel() * size_ && output.scalar_type() == input.scalar_type(),
              "plexus: _allgather_base: the output must hold world size x the input (", input.numel() * size_, " x ",
              input.scalar_type(), "), it holds ", output.numel(), " x ", output.scalar_type());
  return run("_allgather_base", c10d::OpType::_ALLGATHER_BASE, {output}, [&] {
    return ncclAllGather(input.data_ptr(), output.data_ptr(), input.numel(), ncclType(input), comm_, stream_);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                       std::vector<at::Tensor>& inputs,
                                                                       const c10d::AllgatherOptions&) {
  TORCH_CHECK(outputs.size() == (size_t)size_, "plexus: allgather_coalesced: ", size_, " output lists expected (one "
              "per rank), got ", outputs.size());
  std::vector<at::Tensor> flats, all;
  for (size_t i = 0; i < inputs.size(); i++) {
    checkTensor(inputs[i], "allgather_coalesced");
    flats.push_back(at::empty({(int64_t)size_ * inputs[i].numel()}, inputs[i].options()));
  }
  for (auto& list : outputs) {
    TORCH_CHECK(list.size() == inputs.size(), "plexus: allgather_coalesced: every output list must hold one tensor "
                "per input (", inputs.size(), "), one holds ", list.size());
    for (size_t i = 0; i < list.size(); i++) {
      checkTensor(list[i], "allgather_coalesced");
      TORCH_CHECK(list[i].numel() == inputs[i].numel() && list[i].scalar_type() == inputs[i].scalar_type(),
                  "plexus: allgather_coalesced: output ", i, " holds ", list[i].numel(), " x ", list[i].scalar_type(),
                  ", its input ", inputs[i].numel(), " x ", inputs[i].scalar_type());
      all.push_back(list[i]);
    }
  }
  std::vector<std::vector<at::Tensor>> outs = outputs;
  return run("allgather_coalesced", c10d::OpType::ALLGATHER_COALESCED, all,
      [&] {
        return grouped([&] {
          for (size_t i = 0; i < inputs.size(); i++) {
            ncclResult_t r = ncclAllGather(inputs[i].data_ptr(), flats[i].data_ptr(), inputs[i].numel(),
                                           ncclType(inputs[i]), comm_, stream_);
            if (r != ncclSuccess) return r;
          }
          return ncclSuccess;
        });
      },
      [flats, outs]() mutable {
        for (size_t r = 0; r < outs.size(); r++)
          for (size_t i = 0; i < outs[r].size(); i++) {
            const size_t part = outs[r][i].nbytes();  // its input's (checked above)
            copyBytes(outs[r][i].data_ptr(), (char*)flats[i].data_ptr() + r * part, part);
          }
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::GatherOptions& opts) {
  at::Tensor in = single(inputs, "gather");
  const int root = (int)opts.rootRank;
  TORCH_CHECK(root >= 0 && root < size_, "plexus: gather: root ", root, " is out of range [0, ", size_, ")");
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1, "plexus: gather: the root takes one output list (got ", outputs.size(), ")");
    outs = outputs[0];
    checkAlike(outs, in, (size_t)size_, "gather");
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "plexus: gather: only the root (rank ", root, ") takes output tensors");
  }
  // Straight into the root's list: every rank sends its part, the root receives each (its own too).
  return run("gather", c10d::OpType::GATHER, outs, [&] {
    return grouped([&] {
      if (rank_ == root)
        for (int r = 0; r < size_; r++) {
          ncclResult_t res = ncclRecv(outs[r].data_ptr(), in.numel(), ncclType(in), r, comm_, stream_);
          if (res != ncclSuccess) return res;
        }
      return ncclSend(in.data_ptr(), in.numel(), ncclType(in), root, comm_, stream_);
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::scatter(std::vector<at::Tensor>& outputs,
                                                           std::vector<std::vector<at::Tensor>>& inputs,
                                                           const c10d::ScatterOptions& opts) {
  at::Tensor out = single(outputs, "scatter");
  const int root = (int)opts.rootRank;
  TORCH_CHECK(root >= 0 && root < size_, "plexus: scatter: root ", root, " is out of range [0, ", size_, ")");
  std::vector<at::Tensor> ins;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1, "plexus: scatter: the root takes one input list (got ", inputs.size(), ")");
    ins = inputs[0];
    checkAlike(ins, out, (size_t)size_, "scatter");
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "plexus: scatter: only the root (rank ", root, ") takes input tensors");
  }
  // Straight from the root's list: the root sends each part (its own too), every rank receives its own.
  return run("scatter", c10d::OpType::SCATTER, outputs, [&] {
    return grouped([&] {
      if (rank_ == root)
        for (int r = 0; r < size_; r++) {
          ncclResult_t res = ncclSend(ins[r].data_ptr(), out.numel(), ncclType(out), r, comm_, stream_);
          if (res != ncclSuccess) return res;
        }
      return ncclRecv(out.data_ptr(), out.numel(), ncclType(out), root, comm_, stream_);
    });
  }, [ins] {});  // the root's list stays alive until the operation is done
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                  std::vector<std::vector<at::Tensor>>& inputs,
                                                                  const c10d::ReduceScatterOptions& opts) {
  at::Tensor out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "plexus: reduce_scatter takes one input list per process (got ", inputs.size(), ")");
  checkAlike(inputs[0], out, (size_t)size_, "reduce_scatter");
  const ncclRedOp_t op = ncclOp(opts.reduceOp, out);
  // The list as one buffer: itself when its tensors lie end to end, else packed into the kept staging buffer.
  at::Tensor flat;
  if (!adjacent(inputs[0])) {
    flat = scratch(out, (int64_t)size_ * out.numel());
    for (int r = 0; r < size_; r++)
      copyBytes((char*)flat.data_ptr() + r * out.nbytes(), inputs[0][r].data_ptr(), out.nbytes());
  }
  void* src = flat.defined() ? flat.data_ptr() : inputs[0][0].data_ptr();
  return run("reduce_scatter", c10d::OpType::REDUCE_SCATTER, outputs, [&] {
    return ncclReduceScatter(src, out.data_ptr(), out.numel(), ncclType(out), op, comm_, stream_);
  }, [this, flat, keep = inputs[0]] {
    if (flat.defined()) release(flat);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                        const c10d::ReduceScatterOptions& opts) {
  checkTensor(input, "_reduce_scatter_base");
  checkTensor(output, "_reduce_scatter_base");
  TORCH_CHECK(input.numel() == output.numel() * size_ && output.scalar_type() == input.scalar_type(),
              "plexus: _reduce_scatter_base: the input must hold world size x the output (", output.numel() * size_,
              " x ", output.scalar_type(), "), it holds ", input.numel(), " x ", input.scalar_type());
  const ncclRedOp_t op = ncclOp(opts.reduceOp, output);
  return run("_reduce_scatter_base", c10d::OpType::_REDUCE_SCATTER_BASE, {output}, [&] {
    return ncclReduceScatter(input.data_ptr(), output.data_ptr(), output.numel(), ncclType(output), op, comm_,
                             stream_);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                 std::vector<int64_t>& outputSplits,
                                                                 std::vector<int64_t>& inputSplits,
                                                                 const c10d::AllToAllOptions&) {
  checkTensor(input, "alltoall_base");
  checkTensor(output, "alltoall_base");
  TORCH_CHECK(input.scalar_type() == output.scalar_type(), "plexus: alltoall_base: input and output types differ");
  if (outputSplits.empty() && inputSplits.empty()) {
    TORCH_CHECK(input.numel() == output.numel() && input.numel() % size_ == 0, "plexus: alltoall_base: input and "
                "output must hold the same number of elements, a multiple of the world size (", size_, ")");
    return run("alltoall_base", c10d::OpType::ALLTOALL_BASE, {output}, [&] {
      return ncclAlltoAll(input.data_ptr(), output.data_ptr(), input.numel() / size_, ncclType(input), comm_,
                          stream_);
    });
  }
  // Uneven splits (rows of dim 0): a send and a receive per rank, in one group.
  auto offsets = [&](const at::Tensor& t, std::vector<int64_t>& splits, const char* which) {
    const int64_t rows = t.dim() ? t.size(0) : 1;
    if (splits.empty()) splits.assign(size_, rows / size_);
    TORCH_CHECK(splits.size() == (size_t)size_, "plexus: alltoall_base: ", which, " splits must have one entry per "
                "rank (", size_, "), not ", splits.size());
    int64_t sum = 0;
    for (int64_t s : splits) sum += s;
    TORCH_CHECK(sum == rows, "plexus: alltoall_base: the ", which, " splits add up to ", sum, " rows; the tensor has ",
                rows);
    return rows ? t.numel() / rows : 0;  // elements per row
  };
  const int64_t inRow = offsets(input, inputSplits, "input"), outRow = offsets(output, outputSplits, "output");
  const size_t elem = input.element_size();
  return run("alltoall_base", c10d::OpType::ALLTOALL_BASE, {output}, [&] {
    return grouped([&] {
      int64_t inAt = 0, outAt = 0;
      for (int p = 0; p < size_; p++) {
        ncclResult_t r = ncclSend((char*)input.data_ptr() + inAt * inRow * elem, inputSplits[p] * inRow,
                                  ncclType(input), p, comm_, stream_);
        if (r == ncclSuccess)
          r = ncclRecv((char*)output.data_ptr() + outAt * outRow * elem, outputSplits[p] * outRow, ncclType(output),
                       p, comm_, stream_);
        if (r != ncclSuccess) return r;
        inAt += inputSplits[p];
        outAt += outputSplits[p];
      }
      return ncclSuccess;
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions&) {
  TORCH_CHECK(inputs.size() == (size_t)size_ && outputs.size() == (size_t)size_, "plexus: alltoall takes one input "
              "and one output tensor per rank (", size_, "), got ", inputs.size(), " and ", outputs.size());
  for (size_t p = 0; p < inputs.size(); p++) {
    checkTensor(inputs[p], "alltoall");
    checkTensor(outputs[p], "alltoall");
  }
  return run("alltoall", c10d::OpType::ALLTOALL, outputs, [&] {
    return grouped([&] {
      for (int p = 0; p < size_; p++) {
        ncclResult_t r = ncclSend(inputs[p].data_ptr(), inputs[p].numel(), ncclType(inputs[p]), p, comm_, stream_);
        if (r == ncclSuccess)
          r = ncclRecv(outputs[p].data_ptr(), outputs[p].numel(), ncclType(outputs[p]), p, comm_, stream_);
        if (r != ncclSuccess) return r;
      }
      return ncclSuccess;
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::send(std::vector<at::Tensor>& tensors, int dstRank, int) {
  at::Tensor t = single(tensors, "send");
  return run("send", c10d::OpType::SEND, tensors,
             [&] { return ncclSend(t.data_ptr(), t.numel(), ncclType(t), dstRank, comm_, stream_); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::recv(std::vector<at::Tensor>& tensors, int srcRank, int) {
  at::Tensor t = single(tensors, "recv");
  return run("recv", c10d::OpType::RECV, tensors,
             [&] { return ncclRecv(t.data_ptr(), t.numel(), ncclType(t), srcRank, comm_, stream_); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::recvAnysource(std::vector<at::Tensor>&, int) {
  TORCH_CHECK(false, "plexus: recv from any source is not supported: NCCL's point-to-point names its peer; pass src");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::barrier(const c10d::BarrierOptions&) {
  // An allreduce of one byte, as ProcessGroupNCCL's barrier.
  at::Tensor one = at::zeros({1}, at::kByte);
  return run("barrier", c10d::OpType::BARRIER, {one}, [&] {
    return ncclAllReduce(one.data_ptr(), one.data_ptr(), 1, ncclUint8, ncclSum, comm_, stream_);
  });
}

void ProcessGroupPlexus::monitoredBarrier(const c10d::BarrierOptions& opts, bool) {
  // A barrier bounded by the options' timeout (else the group's): a rank that never arrives fails it with Plexus's
  // hang report naming who waits on whom.
  const auto timeout = opts.timeout != c10d::kUnsetTimeout ? opts.timeout : timeout_;
  if (timeout.count() > 0) plexusCommSetTimeout(comm_, (double)timeout.count() / 1000.0);
  auto work = barrier(opts);
  try {
    work->wait();
  } catch (...) {
    if (timeout_.count() > 0) plexusCommSetTimeout(comm_, (double)timeout_.count() / 1000.0);
    throw;
  }
  if (timeout_.count() > 0) plexusCommSetTimeout(comm_, (double)timeout_.count() / 1000.0);
}

}  // namespace plexus_torch
