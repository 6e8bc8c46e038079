// One-sided operations on device memory, as an NCCL 2.30 user writes them: every rank registers a window
// (cudaMalloc'd), puts a block of its own into its next rank's window with ncclPutSignal, raises a second signal with
// ncclSignal, and waits on its stream (ncclWaitSignal) for what its previous rank sent; then a small put lands beside
// the block. The windows are read back on the host and checked element by element against what the previous rank
// wrote, and the communicator must report no asynchronous error. On the host backend (PLEXUS_GPU_TEST_HOST=1) the
// same program checks the test itself.
#include <cstring>

#include "gpu_test.h"

namespace gt {
namespace {

constexpr size_t kCount = (1u << 20) + 3;  // int32 elements of the block: 4 MiB and a bit
constexpr size_t kSmall = 5;               // the small put's elements, after the block

int32_t valueOf(int rank, size_t i, int round) { return (int32_t)((rank + 1) * 1000003 + (int)i * 7 + round); }

struct RankState {
  int32_t* win = nullptr;  // kCount + kSmall elements
  int32_t* src = nullptr;  // kCount + kSmall elements: the block, then the small put's
  ncclWindow_t w = nullptr;
};

void body(Driver& d) {
  const int n = d.nranks;
  const size_t bytes = (kCount + kSmall) * sizeof(int32_t);
  std::vector<RankState> st(d.ranks.size());
  std::vector<int32_t> host(kCount + kSmall);
  for (size_t li = 0; li < d.ranks.size(); ++li) {
    const Rank& r = d.ranks[li];
    RankState& s = st[li];
    s.win = static_cast<int32_t*>(devAlloc(bytes));
    s.src = static_cast<int32_t*>(devAlloc(bytes));
    devMemset(s.win, 0, bytes, r.stream);
    for (size_t i = 0; i < host.size(); ++i) host[i] = valueOf(r.rank, i, 0);
    toDevice(s.src, host.data(), bytes, r.stream);
    streamSync(r.stream);
  }
  // Windows are registered in the same order on every rank (a collective call in NCCL).
  d.groupStart();
  for (size_t li = 0; li < d.ranks.size(); ++li)
    GT_NCCL(d.ranks[li].comm, ncclCommWindowRegister(d.ranks[li].comm, st[li].win, bytes, &st[li].w, NCCL_WIN_DEFAULT));
  GT_NCCL(nullptr, d.groupEnd());
  d.barrier();  // every window exists before anyone puts

  setPhase("a ring of puts and signals");
  d.groupStart();
  for (size_t li = 0; li < d.ranks.size(); ++li) {
    const Rank& r = d.ranks[li];
    const int next = (r.rank + 1) % n, prev = (r.rank + n - 1) % n;
    GT_NCCL(r.comm, ncclPutSignal(st[li].src, kCount, ncclInt32, next, st[li].w, 0, 0, 0, 0, r.comm, r.stream));
    GT_NCCL(r.comm, ncclSignal(next, 2, 0, 0, r.comm, r.stream));
    ncclWaitSignalDesc_t both[2] = {{1, prev, 0, 0}, {1, prev, 2, 0}};
    GT_NCCL(r.comm, ncclWaitSignal(2, both, r.comm, r.stream));
    // The small put goes after the wait on the stream: it leaves only once this rank has the previous one's block.
    GT_NCCL(r.comm, ncclPutSignal(st[li].src + kCount, kSmall, ncclInt32, next, st[li].w, kCount * sizeof(int32_t), 1,
                                  0, 0, r.comm, r.stream));
    ncclWaitSignalDesc_t small{1, prev, 1, 0};
    GT_NCCL(r.comm, ncclWaitSignal(1, &small, r.comm, r.stream));
  }
  GT_NCCL(nullptr, d.groupEnd());

  setPhase("reading the windows back");
  for (size_t li = 0; li < d.ranks.size(); ++li) {
    const Rank& r = d.ranks[li];
    const int prev = (r.rank + n - 1) % n;
    streamSync(r.stream);  // the waits are done (toHost orders itself behind them only on a CUDA stream)
    toHost(host.data(), st[li].win, bytes, r.stream);
    long wrong = 0;
    size_t first = 0;
    for (size_t i = 0; i < host.size(); ++i)
      if (host[i] != valueOf(prev, i, 0) && wrong++ == 0) first = i;
    GT_CHECK(wrong == 0, "rank %d: %ld of %zu elements differ from rank %d's; the first at %zu: got %d, want %d", r.rank,
             wrong, host.size(), prev, first, host[first], valueOf(prev, first, 0));
    ncclResult_t async = ncclSuccess;
    GT_NCCL(r.comm, ncclCommGetAsyncError(r.comm, &async));
    GT_CHECK(async == ncclSuccess, "rank %d: asynchronous error %s: %s", r.rank, ncclGetErrorString(async),
             lastError(r.comm));
    countRun();
  }
  d.barrier();  // every put has landed (each rank saw its signals) before the windows go
  for (size_t li = 0; li < d.ranks.size(); ++li) {
    GT_NCCL(d.ranks[li].comm, ncclCommWindowDeregister(d.ranks[li].comm, st[li].w));
    devFree(st[li].win);
    devFree(st[li].src);
  }
}

// Rank 0 waits on its stream for a signal rank 1 never raises, with a 2 s timeout: the wait must end (on the CUDA
// backend the stream goes on and the communicator reports ncclTimeout; on the host backend the stream's
// synchronization returns it) within a bound, naming rank 1. Then every rank aborts its communicator.
void bodyTimeout(Driver& d) {
  for (Rank& r : d.ranks) GT_NCCL(r.comm, plexusCommSetTimeout(r.comm, 2.0));
  d.barrier();
  setPhase("a wait for a signal that never comes");
  for (Rank& r : d.ranks) {
    if (r.rank != 0) continue;
    ncclWaitSignalDesc_t never{1, 1, 7, 0};
    GT_NCCL(r.comm, ncclWaitSignal(1, &never, r.comm, r.stream));
    const double t0 = nowSeconds();
    ncclResult_t synced = ncclSuccess;
    if (hostMode())
      synced = plexusStreamSynchronize(r.stream);
    else
      GT_CUDA(cudaStreamSynchronize(r.stream));
    const double took = nowSeconds() - t0;
    ncclResult_t async = ncclSuccess;
    GT_NCCL(r.comm, ncclCommGetAsyncError(r.comm, &async));
    const ncclResult_t seen = synced != ncclSuccess ? synced : async;
    const std::string why = ncclGetLastError(r.comm);
    note("rank 0: the wait ended after %.1f s with %s: %s", took, ncclGetErrorString(seen), why.c_str());
    GT_CHECK(seen == ncclTimeout, "the wait ended with %s, not ncclTimeout", ncclGetErrorString(seen));
    GT_CHECK(took > 1.5 && took < 30, "the wait ended after %.1f s; the timeout is 2 s", took);
    GT_CHECK(why.find("from rank 1") != std::string::npos, "the message does not name rank 1: %s", why.c_str());
    countRun();
  }
  d.barrier();
  for (Rank& r : d.ranks) {
    GT_NCCL(nullptr, ncclCommAbort(r.comm));
    r.comm = nullptr;
  }
}

}  // namespace

int testOneSided(int argc, char** argv) {
  if (argc < 3) fatal("usage: onesided <group|threads|procs> <nranks> [timeout]");
  const Mode mode = parseMode(argv[1]);
  const int n = std::atoi(argv[2]);
  const bool timeout = argc > 3 && std::strcmp(argv[3], "timeout") == 0;
  if (n < 2 || n > 8) fatal("nranks %d: 2 to 8", n);
  requireDevice(mode == Mode::Procs);
  startWatchdog(240);
  const std::string label = format("one-sided%s %s %d ranks%s", timeout ? " timeout" : "", modeName(mode), n,
                                   hostMode() ? " on the host backend" : "");
  runTeam(mode, n, 200, timeout ? bodyTimeout : body);
  return finish(label);
}

}  // namespace gt
