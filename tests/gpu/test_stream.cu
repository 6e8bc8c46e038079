// Stream semantics, as NCCL defines them: a collective is enqueued on the caller's stream and ncclGroupEnd (or the
// call) returns before it has run; it runs after what was enqueued before it and before what comes after.
//
// Each rank's stream gets: our gate kernel (spins until the host opens it), our fill kernel (writes the input), an
// event, AllReduce, Broadcast, an event, our kernel that reads the Broadcast's result. While the gate is shut the
// NCCL calls must already have returned and the stream and the last event must be pending. Once the gates open, the
// results prove the order: the AllReduce saw the fill kernel's input, our last kernel saw the Broadcast's output.
#include <thread>

#include "gpu_test.h"

namespace gt {
namespace {

constexpr size_t kCount = (4u << 20) / sizeof(float) + 5;  // 4 MiB + 5 elements

struct RankState {
  float *in = nullptr, *reduced = nullptr, *bcast = nullptr, *after = nullptr;
  int* gate = nullptr;  // host-mapped: [0] opens the gate, [1] says the gate kernel started
  cudaEvent_t before = nullptr, done = nullptr;
};

void body(Driver& d) {
  const int n = d.nranks;
  const int root = n - 1;
  const float seed = 3;
  std::vector<RankState> st(d.ranks.size());
  for (size_t li = 0; li < d.ranks.size(); ++li) {
    RankState& s = st[li];
    GT_CUDA(cudaMalloc(&s.in, kCount * sizeof(float)));
    GT_CUDA(cudaMalloc(&s.reduced, kCount * sizeof(float)));
    GT_CUDA(cudaMalloc(&s.bcast, kCount * sizeof(float)));
    GT_CUDA(cudaMalloc(&s.after, kCount * sizeof(float)));
    GT_CUDA(cudaMemsetAsync(s.in, 0xFF, kCount * sizeof(float), d.ranks[li].stream));  // NaN until the fill kernel
    GT_CUDA(cudaHostAlloc(&s.gate, 2 * sizeof(int), cudaHostAllocMapped));
    s.gate[0] = s.gate[1] = 0;
    GT_CUDA(cudaEventCreateWithFlags(&s.before, cudaEventDisableTiming));
    GT_CUDA(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
  }
  d.barrier();
  setPhase("enqueue behind a shut gate");
  for (size_t li = 0; li < d.ranks.size(); ++li) {
    const Rank& r = d.ranks[li];
    RankState& s = st[li];
    int* devGate = nullptr;
    GT_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&devGate), s.gate, 0));
    launchGate(r.stream, devGate, devGate + 1);
    launchFill(r.stream, s.in, kCount, r.rank, seed);
    GT_CUDA(cudaEventRecord(s.before, r.stream));
  }
  // If the NCCL calls wait for the kernels they enqueue, they never return while the gates are shut: a helper opens
  // them after 20 s so that the test ends with a clear failure rather than a hang.
  std::atomic<bool> returned{false}, forced{false};
  std::thread rescue([&] {
    for (int i = 0; i < 200 && !returned; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!returned) {
      dumpStacks("the NCCL calls have not returned after 20 s behind shut gates");
      forced = true;
      for (RankState& s : st) reinterpret_cast<volatile int*>(s.gate)[0] = 1;
    }
  });
  const double t0 = nowSeconds();
  d.groupStart();
  for (size_t li = 0; li < d.ranks.size(); ++li) {
    const Rank& r = d.ranks[li];
    GT_NCCL(r.comm, ncclAllReduce(st[li].in, st[li].reduced, kCount, ncclFloat32, ncclSum, r.comm, r.stream));
  }
  GT_NCCL(nullptr, d.groupEnd());
  d.groupStart();
  for (size_t li = 0; li < d.ranks.size(); ++li) {
    const Rank& r = d.ranks[li];
    GT_NCCL(r.comm, ncclBroadcast(st[li].in, st[li].bcast, kCount, ncclFloat32, root, r.comm, r.stream));
  }
  GT_NCCL(nullptr, d.groupEnd());
  const double enqueueSeconds = nowSeconds() - t0;
  returned = true;
  for (size_t li = 0; li < d.ranks.size(); ++li) {
    const Rank& r = d.ranks[li];
    launchTwicePlusOne(r.stream, st[li].bcast, st[li].after, kCount);
    GT_CUDA(cudaEventRecord(st[li].done, r.stream));
  }
  if (forced)
    fail("the NCCL calls returned only after the gate kernels were released (%.1f s): they wait for the device "
         "instead of returning once enqueued", enqueueSeconds);
  for (size_t li = 0; li < d.ranks.size() && !forced; ++li) {
    const Rank& r = d.ranks[li];
    cudaError_t q = cudaStreamQuery(r.stream);
    GT_CHECK(q == cudaErrorNotReady, "rank %d: cudaStreamQuery returned %s while the gate is shut", r.rank,
             cudaGetErrorName(q));
    q = cudaEventQuery(st[li].done);
    GT_CHECK(q == cudaErrorNotReady, "rank %d: the event after the collectives is %s while the gate is shut", r.rank,
             cudaGetErrorName(q));
    q = cudaEventQuery(st[li].before);
    GT_CHECK(q == cudaErrorNotReady, "rank %d: the event before the collectives is %s while the gate is shut",
             r.rank, cudaGetErrorName(q));
  }
  rescue.join();
  note("ncclAllReduce + ncclBroadcast of %zu floats per rank enqueued in %.3f ms behind shut gates", kCount,
       enqueueSeconds * 1e3);
  d.barrier();  // every rank has looked before any gate opens
  setPhase("gates open; waiting for the streams");
  for (RankState& s : st) reinterpret_cast<volatile int*>(s.gate)[0] = 1;
  for (size_t li = 0; li < d.ranks.size(); ++li) {
    GT_CUDA(cudaEventSynchronize(st[li].done));
    GT_CUDA(cudaStreamSynchronize(d.ranks[li].stream));
    GT_CHECK(st[li].gate[1] == 1, "rank %d: the gate kernel never ran", d.ranks[li].rank);
  }
  setPhase("checking");
  std::vector<float> reduced(kCount), bcast(kCount), after(kCount);
  const float rankSum = float(n * (n + 1) / 2);
  for (size_t li = 0; li < d.ranks.size(); ++li) {
    const Rank& r = d.ranks[li];
    toHost(reduced.data(), st[li].reduced, kCount * sizeof(float), r.stream);
    toHost(bcast.data(), st[li].bcast, kCount * sizeof(float), r.stream);
    toHost(after.data(), st[li].after, kCount * sizeof(float), r.stream);
    long wrongR = 0, wrongB = 0, wrongA = 0;
    for (size_t i = 0; i < kCount; ++i) {
      const float base = float(i % 1000);
      const float wantR = base * rankSum + float(n) * seed;
      const float wantB = base * float(root + 1) + seed;
      if (reduced[i] != wantR && wrongR++ == 0)
        fail("rank %d: AllReduce element %zu is %g, expected %g (did it run before the fill kernel?)", r.rank, i,
             reduced[i], wantR);
      if (bcast[i] != wantB && wrongB++ == 0)
        fail("rank %d: Broadcast element %zu is %g, expected %g", r.rank, i, bcast[i], wantB);
      if (after[i] != wantB * 2 + 1 && wrongA++ == 0)
        fail("rank %d: our kernel after the Broadcast read %g at %zu, expected %g (did it run before the Broadcast "
             "finished?)", r.rank, (after[i] - 1) / 2, i, wantB);
    }
  }
  // Threads: one more AllReduce on the thread's per-thread default stream (each thread's own).
  if (d.mode == Mode::Threads) {
    setPhase("AllReduce on cudaStreamPerThread");
    const Rank& r = d.ranks[0];
    GT_CUDA(cudaMemsetAsync(st[0].reduced, 0xFF, kCount * sizeof(float), cudaStreamPerThread));
    GT_NCCL(r.comm, ncclAllReduce(st[0].in, st[0].reduced, kCount, ncclFloat32, ncclSum, r.comm, cudaStreamPerThread));
    GT_CUDA(cudaStreamSynchronize(cudaStreamPerThread));
    toHost(reduced.data(), st[0].reduced, kCount * sizeof(float), cudaStreamPerThread);
    long wrong = 0;
    for (size_t i = 0; i < kCount; ++i)
      wrong += reduced[i] != float(i % 1000) * rankSum + float(n) * seed;
    GT_CHECK(wrong == 0, "rank %d: %ld wrong elements of the AllReduce on cudaStreamPerThread", r.rank, wrong);
  }
  d.barrier();
  for (RankState& s : st) {
    GT_CUDA(cudaFree(s.in));
    GT_CUDA(cudaFree(s.reduced));
    GT_CUDA(cudaFree(s.bcast));
    GT_CUDA(cudaFree(s.after));
    GT_CUDA(cudaFreeHost(s.gate));
    GT_CUDA(cudaEventDestroy(s.before));
    GT_CUDA(cudaEventDestroy(s.done));
  }
}

}  // namespace

int testStream(int argc, char** argv) {
  if (argc < 3) fatal("usage: stream <group|threads|procs> <nranks>");
  const Mode mode = parseMode(argv[1]);
  const int n = std::atoi(argv[2]);
  requireDevice(mode == Mode::Procs);
  startWatchdog(240);
  runTeam(mode, n, 200, body);
  return finish(format("stream semantics, %s, %d ranks", modeName(mode), n));
}

}  // namespace gt
