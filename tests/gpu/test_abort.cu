// ncclCommAbort with a kernel in flight. Three ranks on one GPU run one AllReduce together; then ranks 0 and 2 start
// another that rank 1 never joins, so their kernels wait for it. Once the kernels are seen running (the event
// before them is done, the one after them is not, for half a second), another thread aborts ranks 0 and 2: each
// abort must return within a few seconds, their streams must drain, and the GPU must stay usable. Rank 1, whose
// peers are gone, must then fail an AllReduce cleanly (its timeout set to 2 s) and abort too. Last, a new pair of
// communicators on the same GPU must work.
#include <condition_variable>
#include <mutex>
#include <thread>

#include "gpu_test.h"

namespace gt {
namespace {

constexpr size_t kCount = 1u << 20;
constexpr double kAbortLimit = 5.0;  // seconds an abort may take

// Runs fn on another thread and waits for it up to limit seconds; returns its duration, or a negative number when it
// did not finish (the thread is then left behind: the process ends with a failure soon after).
template <class Fn>
double timed(Fn fn, double limit) {
  auto m = std::make_shared<std::mutex>();
  auto cv = std::make_shared<std::condition_variable>();
  auto done = std::make_shared<bool>(false);
  const double t0 = nowSeconds();
  std::thread([=] {
    fn();
    std::lock_guard<std::mutex> lock(*m);
    *done = true;
    cv->notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(*m);
  if (!cv->wait_for(lock, std::chrono::duration<double>(limit), [&] { return *done; })) {
    lock.unlock();
    dumpStacks("a call did not return in time");
    return -1;
  }
  return nowSeconds() - t0;
}

bool allReduceOk(std::vector<ncclComm_t>& comms, std::vector<cudaStream_t>& streams, std::vector<float*>& bufs,
                 const std::vector<int>& ranks) {
  const int n = int(comms.size());
  std::vector<float> host(kCount);
  for (int r : ranks) {
    for (size_t i = 0; i < kCount; ++i) host[i] = float(i % 100 + r);
    toDevice(bufs[r], host.data(), kCount * sizeof(float), streams[r]);
  }
  GT_NCCL(nullptr, ncclGroupStart());
  for (int r : ranks) GT_NCCL(comms[r], ncclAllReduce(bufs[r], bufs[r], kCount, ncclFloat32, ncclSum, comms[r], streams[r]));
  GT_NCCL(nullptr, ncclGroupEnd());
  bool ok = true;
  for (int r : ranks) {
    toHost(host.data(), bufs[r], kCount * sizeof(float), streams[r]);
    for (size_t i = 0; i < kCount; ++i)
      if (host[i] != float(n * (i % 100)) + float(n * (n - 1) / 2)) {
        fail("rank %d: AllReduce element %zu is %g, expected %g", r, i, host[i],
             float(n * (i % 100)) + float(n * (n - 1) / 2));
        ok = false;
        break;
      }
  }
  return ok;
}

void makeComms(int n, std::vector<ncclComm_t>* comms, std::vector<cudaStream_t>* streams, std::vector<float*>* bufs) {
  ncclUniqueId id;
  GT_NCCL(nullptr, ncclGetUniqueId(&id));
  comms->assign(n, nullptr);
  streams->assign(n, nullptr);
  bufs->assign(n, nullptr);
  GT_NCCL(nullptr, ncclGroupStart());
  for (int r = 0; r < n; ++r) GT_NCCL(nullptr, ncclCommInitRank(&(*comms)[r], n, id, r));
  GT_NCCL(nullptr, ncclGroupEnd());
  for (int r = 0; r < n; ++r) {
    GT_CUDA(cudaStreamCreateWithFlags(&(*streams)[r], cudaStreamNonBlocking));
    GT_CUDA(cudaMalloc(&(*bufs)[r], kCount * sizeof(float)));
  }
}

}  // namespace

int testAbort(int, char**) {
  requireDevice(false);
  startWatchdog(180);
  GT_CUDA(cudaSetDevice(0));
  const int n = 3;
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<float*> bufs;
  setPhase("init and a first AllReduce of all ranks");
  makeComms(n, &comms, &streams, &bufs);
  if (!allReduceOk(comms, streams, bufs, {0, 1, 2})) return finish("ncclCommAbort with a kernel in flight");

  setPhase("ranks 0 and 2 start an AllReduce rank 1 never joins");
  std::vector<cudaEvent_t> before(n), after(n);
  for (int r = 0; r < n; ++r) {
    GT_CUDA(cudaEventCreateWithFlags(&before[r], cudaEventDisableTiming));
    GT_CUDA(cudaEventCreateWithFlags(&after[r], cudaEventDisableTiming));
  }
  GT_NCCL(nullptr, ncclGroupStart());
  for (int r : {0, 2}) {
    GT_CUDA(cudaEventRecord(before[r], streams[r]));
    GT_NCCL(comms[r], ncclAllReduce(bufs[r], bufs[r], kCount, ncclFloat32, ncclSum, comms[r], streams[r]));
  }
  GT_NCCL(nullptr, ncclGroupEnd());
  for (int r : {0, 2}) GT_CUDA(cudaEventRecord(after[r], streams[r]));
  // Running: the work before the collective is done and the collective is not, and stays so.
  const double t0 = nowSeconds();
  bool running = false;
  while (nowSeconds() - t0 < 10 && !running) {
    running = cudaEventQuery(before[0]) == cudaSuccess && cudaEventQuery(before[2]) == cudaSuccess &&
              cudaEventQuery(after[0]) == cudaErrorNotReady && cudaEventQuery(after[2]) == cudaErrorNotReady;
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!running) fatal("the AllReduce of ranks 0 and 2 was never seen in flight (it cannot finish without rank 1)");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  cudaError_t q0 = cudaEventQuery(after[0]), q2 = cudaEventQuery(after[2]);
  GT_CHECK(q0 == cudaErrorNotReady && q2 == cudaErrorNotReady,
           "the AllReduce without rank 1 completed (%s, %s): it cannot have", cudaGetErrorName(q0),
           cudaGetErrorName(q2));

  setPhase("ncclCommAbort of ranks 0 and 2 from another thread");
  ncclResult_t abort0 = ncclInternalError, abort2 = ncclInternalError;
  double took = timed([&] { abort0 = ncclCommAbort(comms[0]); }, 20);
  if (took < 0) fatal("ncclCommAbort(rank 0) did not return within 20 s with its kernel in flight");
  GT_CHECK(took <= kAbortLimit, "ncclCommAbort(rank 0) took %.2f s (limit %.0f s)", took, kAbortLimit);
  GT_CHECK(abort0 == ncclSuccess, "ncclCommAbort(rank 0) returned %s", ncclGetErrorString(abort0));
  note("ncclCommAbort(rank 0) with its kernel in flight returned in %.3f s", took);
  took = timed([&] { abort2 = ncclCommAbort(comms[2]); }, 20);
  if (took < 0) fatal("ncclCommAbort(rank 2) did not return within 20 s with its kernel in flight");
  GT_CHECK(took <= kAbortLimit, "ncclCommAbort(rank 2) took %.2f s (limit %.0f s)", took, kAbortLimit);
  GT_CHECK(abort2 == ncclSuccess, "ncclCommAbort(rank 2) returned %s", ncclGetErrorString(abort2));
  comms[0] = comms[2] = nullptr;

  setPhase("the aborted ranks' streams drain");
  for (int r : {0, 2}) {
    cudaError_t res = cudaErrorNotReady;
    const double t1 = nowSeconds();
    while ((res = cudaStreamQuery(streams[r])) == cudaErrorNotReady && nowSeconds() - t1 < 10)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    GT_CHECK(res != cudaErrorNotReady, "rank %d: the stream still runs the aborted kernel 10 s after the abort", r);
    if (res != cudaSuccess && res != cudaErrorNotReady)
      fail("rank %d: the stream reports %s after the abort: the aborted kernel broke the CUDA context", r,
           cudaGetErrorName(res));
  }
  // The device still works: our own kernel on a fresh stream, and memory operations.
  {
    cudaStream_t s;
    GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    launchFill(s, bufs[0], kCount, 0, 1);
    float v = 0;
    toHost(&v, bufs[0] + 7, sizeof v, s);
    GT_CHECK(v == 8.0f, "our kernel after the abort wrote %g, expected 8", v);
    GT_CUDA(cudaStreamDestroy(s));
  }

  setPhase("rank 1, whose peers are gone, fails cleanly");
  GT_NCCL(comms[1], plexusCommSetTimeout(comms[1], 2.0));
  ncclResult_t call = ncclAllReduce(bufs[1], bufs[1], kCount, ncclFloat32, ncclSum, comms[1], streams[1]);
  if (call == ncclSuccess) {
    ncclResult_t async = ncclSuccess;
    const double t1 = nowSeconds();
    while (nowSeconds() - t1 < 20) {
      GT_NCCL(comms[1], ncclCommGetAsyncError(comms[1], &async));
      if (async != ncclSuccess && async != ncclInProgress) break;
      if (cudaStreamQuery(streams[1]) == cudaSuccess) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    GT_NCCL(comms[1], ncclCommGetAsyncError(comms[1], &async));
    if (async == ncclSuccess || async == ncclInProgress) {
      if (cudaStreamQuery(streams[1]) == cudaSuccess)
        fail("rank 1: an AllReduce whose peers were aborted completed without an error");
      else
        fail("rank 1: an AllReduce whose peers were aborted is still running after 20 s (timeout 2 s)");
    } else {
      note("rank 1: the AllReduce after its peers' abort failed with %s (%s)", ncclGetErrorString(async),
           lastError(comms[1]));
    }
  } else {
    note("rank 1: the AllReduce after its peers' abort was refused with %s (%s)", ncclGetErrorString(call),
         lastError(comms[1]));
  }
  ncclResult_t abort1 = ncclInternalError;
  took = timed([&] { abort1 = ncclCommAbort(comms[1]); }, 20);
  if (took < 0) fatal("ncclCommAbort(rank 1) did not return within 20 s");
  GT_CHECK(took <= kAbortLimit, "ncclCommAbort(rank 1) took %.2f s", took);
  GT_CHECK(abort1 == ncclSuccess, "ncclCommAbort(rank 1) returned %s", ncclGetErrorString(abort1));
  {
    cudaError_t res = cudaErrorNotReady;
    const double t1 = nowSeconds();
    while ((res = cudaStreamQuery(streams[1])) == cudaErrorNotReady && nowSeconds() - t1 < 10)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    GT_CHECK(res != cudaErrorNotReady, "rank 1: its stream still runs 10 s after its abort");
  }
  for (int r = 0; r < n; ++r) {
    GT_CUDA(cudaStreamDestroy(streams[r]));
    GT_CUDA(cudaFree(bufs[r]));
    GT_CUDA(cudaEventDestroy(before[r]));
    GT_CUDA(cudaEventDestroy(after[r]));
  }

  setPhase("new communicators on the same GPU after the aborts");
  makeComms(2, &comms, &streams, &bufs);
  allReduceOk(comms, streams, bufs, {0, 1});
  GT_NCCL(nullptr, ncclGroupStart());
  for (ncclComm_t c : comms) GT_NCCL(c, ncclCommFinalize(c));
  GT_NCCL(nullptr, ncclGroupEnd());
  for (int r = 0; r < 2; ++r) {
    GT_NCCL(comms[r], ncclCommDestroy(comms[r]));
    GT_CUDA(cudaStreamDestroy(streams[r]));
    GT_CUDA(cudaFree(bufs[r]));
  }
  return finish("ncclCommAbort with a kernel in flight");
}

}  // namespace gt
