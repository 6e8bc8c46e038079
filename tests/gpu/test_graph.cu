// CUDA graph capture, as PyTorch and other frameworks use NCCL: each rank captures on its stream our kernel, then
// AllReduce, Broadcast, AllGather and ReduceScatter, then our kernel again (no collective ran before the capture);
// the graphs are instantiated and replayed 100 times with new inputs copied in between, every replay's results
// checked; then the graphs are destroyed, then the communicators.
#include "gpu_test.h"

namespace gt {
namespace {

constexpr size_t kCount = 4099;  // per rank: odd, a few chunks of LL, one of Simple
constexpr int kReplays = 100;

struct RankState {
  float *in = nullptr, *x = nullptr, *sum = nullptr, *bcast = nullptr, *gathered = nullptr, *scattered = nullptr,
        *after = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
};

// The input of rank in replay it: small integers, so every sum is exact.
float inputAt(int rank, int it, size_t i) { return float((i * 7 + size_t(rank) * 13 + size_t(it) * 31) % 1000); }

void body(Driver& d) {
  const int n = d.nranks;
  const int root = (n > 1) ? 1 : 0;
  std::vector<RankState> st(d.ranks.size());
  for (RankState& s : st) {
    GT_CUDA(cudaMalloc(&s.in, kCount * sizeof(float)));
    GT_CUDA(cudaMalloc(&s.x, kCount * sizeof(float)));
    GT_CUDA(cudaMalloc(&s.sum, kCount * sizeof(float)));
    GT_CUDA(cudaMalloc(&s.bcast, kCount * sizeof(float)));
    GT_CUDA(cudaMalloc(&s.gathered, n * kCount * sizeof(float)));
    GT_CUDA(cudaMalloc(&s.scattered, kCount * sizeof(float)));
    GT_CUDA(cudaMalloc(&s.after, kCount * sizeof(float)));
  }
  setPhase("capture");
  // As nccl-tests captures: global mode from a single thread, thread-local where several threads capture at once.
  const cudaStreamCaptureMode mode = d.mode == Mode::Threads ? cudaStreamCaptureModeThreadLocal
                                                             : cudaStreamCaptureModeGlobal;
  for (size_t li = 0; li < d.ranks.size(); ++li) GT_CUDA(cudaStreamBeginCapture(d.ranks[li].stream, mode));
  for (size_t li = 0; li < d.ranks.size(); ++li)
    launchTwicePlusOne(d.ranks[li].stream, st[li].in, st[li].x, kCount);  // x = 2 in + 1
  auto each = [&](auto&& call) {
    d.groupStart();
    for (size_t li = 0; li < d.ranks.size(); ++li) call(d.ranks[li], st[li]);
    GT_NCCL(nullptr, d.groupEnd());
  };
  each([&](const Rank& r, RankState& s) {
    GT_NCCL(r.comm, ncclAllReduce(s.x, s.sum, kCount, ncclFloat32, ncclSum, r.comm, r.stream));
  });
  each([&](const Rank& r, RankState& s) {
    GT_NCCL(r.comm, ncclBroadcast(s.x, s.bcast, kCount, ncclFloat32, root, r.comm, r.stream));
  });
  each([&](const Rank& r, RankState& s) {
    GT_NCCL(r.comm, ncclAllGather(s.x, s.gathered, kCount, ncclFloat32, r.comm, r.stream));
  });
  each([&](const Rank& r, RankState& s) {
    GT_NCCL(r.comm, ncclReduceScatter(s.gathered, s.scattered, kCount, ncclFloat32, ncclMax, r.comm, r.stream));
  });
  for (size_t li = 0; li < d.ranks.size(); ++li)
    launchTwicePlusOne(d.ranks[li].stream, st[li].sum, st[li].after, kCount);
  for (size_t li = 0; li < d.ranks.size(); ++li) {
    GT_CUDA(cudaStreamEndCapture(d.ranks[li].stream, &st[li].graph));
    size_t nodes = 0;
    GT_CUDA(cudaGraphGetNodes(st[li].graph, nullptr, &nodes));
    GT_CHECK(nodes >= 3, "rank %d: the captured graph has %zu nodes (our two kernels and the collectives expected)",
             d.ranks[li].rank, nodes);
  }
  // Instantiating is refused while any stream of the process still captures in global mode: every capture ends first.
  for (size_t li = 0; li < d.ranks.size(); ++li) GT_CUDA(cudaGraphInstantiate(&st[li].exec, st[li].graph, 0));

  std::vector<float> host(kCount), out(n * kCount);
  long wrongReplays = 0;
  for (int it = 0; it < kReplays; ++it) {
    setPhase(format("replay %d", it));
    for (size_t li = 0; li < d.ranks.size(); ++li) {
      for (size_t i = 0; i < kCount; ++i) host[i] = inputAt(d.ranks[li].rank, it, i);
      GT_CUDA(cudaMemcpyAsync(st[li].in, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice,
                              d.ranks[li].stream));
      GT_CUDA(cudaMemsetAsync(st[li].sum, 0xFF, kCount * sizeof(float), d.ranks[li].stream));
      GT_CUDA(cudaMemsetAsync(st[li].gathered, 0xFF, n * kCount * sizeof(float), d.ranks[li].stream));
    }
    for (size_t li = 0; li < d.ranks.size(); ++li) GT_CUDA(cudaGraphLaunch(st[li].exec, d.ranks[li].stream));
    for (size_t li = 0; li < d.ranks.size(); ++li) GT_CUDA(cudaStreamSynchronize(d.ranks[li].stream));
    long wrong = 0;
    for (size_t li = 0; li < d.ranks.size(); ++li) {
      const int rank = d.ranks[li].rank;
      auto x = [&](int r, size_t i) { return inputAt(r, it, i) * 2 + 1; };
      toHost(out.data(), st[li].sum, kCount * sizeof(float), d.ranks[li].stream);
      for (size_t i = 0; i < kCount; ++i) {
        float want = 0;
        for (int r = 0; r < n; ++r) want += x(r, i);
        if (out[i] != want && wrong++ < 2)
          fail("replay %d rank %d: AllReduce element %zu is %g, expected %g", it, rank, i, out[i], want);
      }
      toHost(out.data(), st[li].after, kCount * sizeof(float), d.ranks[li].stream);
      for (size_t i = 0; i < kCount; ++i) {
        float want = 0;
        for (int r = 0; r < n; ++r) want += x(r, i);
        if (out[i] != want * 2 + 1 && wrong++ < 2)
          fail("replay %d rank %d: our kernel after the collectives read %g at %zu, expected %g", it, rank,
               (out[i] - 1) / 2, i, want);
      }
      toHost(out.data(), st[li].bcast, kCount * sizeof(float), d.ranks[li].stream);
      for (size_t i = 0; i < kCount; ++i)
        if (out[i] != x(root, i) && wrong++ < 2)
          fail("replay %d rank %d: Broadcast element %zu is %g, expected %g", it, rank, i, out[i], x(root, i));
      toHost(out.data(), st[li].gathered, n * kCount * sizeof(float), d.ranks[li].stream);
      for (size_t j = 0; j < n * kCount; ++j)
        if (out[j] != x(int(j / kCount), j % kCount) && wrong++ < 2)
          fail("replay %d rank %d: AllGather element %zu is %g, expected %g", it, rank, j, out[j],
               x(int(j / kCount), j % kCount));
      toHost(out.data(), st[li].scattered, kCount * sizeof(float), d.ranks[li].stream);
      for (size_t i = 0; i < kCount; ++i) {
        const float want = x(rank, i);  // block `rank` of every rank's gathered buffer holds the same values
        if (out[i] != want && wrong++ < 2)
          fail("replay %d rank %d: ReduceScatter element %zu is %g, expected %g", it, rank, i, out[i], want);
      }
    }
    if (wrong) ++wrongReplays;
    d.barrier();  // every rank has read its results before anyone's next replay overwrites inputs
  }
  note("%d replays of the captured graphs, %ld with wrong results", kReplays, wrongReplays);
  setPhase("destroying the graphs");
  for (RankState& s : st) {
    GT_CUDA(cudaGraphExecDestroy(s.exec));
    GT_CUDA(cudaGraphDestroy(s.graph));
  }
  // The communicators are destroyed after this returns, the buffers now.
  for (RankState& s : st)
    for (float* p : {s.in, s.x, s.sum, s.bcast, s.gathered, s.scattered, s.after}) GT_CUDA(cudaFree(p));
}

}  // namespace

int testGraph(int argc, char** argv) {
  if (argc < 3) fatal("usage: graph <group|threads|procs> <nranks>");
  const Mode mode = parseMode(argv[1]);
  const int n = std::atoi(argv[2]);
  requireDevice(mode == Mode::Procs);
  startWatchdog(240);
  runTeam(mode, n, 200, body);
  return finish(format("CUDA graph capture and %d replays, %s, %d ranks", kReplays, modeName(mode), n));
}

}  // namespace gt
