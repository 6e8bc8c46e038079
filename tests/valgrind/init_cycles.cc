// Init/destroy cycles of every kind of communicator, for valgrind's memcheck (ctest valgrind.init_cycles):
// ncclCommInitRank, ncclCommInitAll, nonblocking init, ncclCommSplit, ncclCommShrink,
// ncclCommInitRankScalable, and ncclCommAbort in place of destroy. Ranks are threads of this process; each
// communicator runs one checked AllReduce, so that its channels and connections are set up before it goes.
//   plexus-valgrind-init-cycles [cycles]      (default 2)
// Exit code 0 when every cycle passed. Memory that outlives the cycles must be what process-lifetime
// singletons hold (the proxy, watchdog and bootstrap root threads): "still reachable", never lost.
#include <nccl.h>
#include <plexus.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

#include "test_env.h"

namespace {

// A report of what failed, with the call's error string; returns the number of problems (0 or 1).
long failed(const char* what, ncclResult_t r) {
  if (r == ncclSuccess) return 0;
  fprintf(stderr, "init_cycles: %s: %s (%s)\n", what, ncclGetErrorString(r), ncclGetLastError(nullptr));
  return 1;
}

// Polls a nonblocking communicator until it leaves ncclInProgress (bounded: 120 s under valgrind).
ncclResult_t settle(ncclComm_t comm) {
  ncclResult_t e = ncclInProgress;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (e == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
    if (ncclCommGetAsyncError(comm, &e) != ncclSuccess) return ncclInternalError;
    if (e == ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return e;
}

// One AllReduce of `count` ints, in place, on a stream of its own; every element must be `expect`.
long allReduceCheck(ncclComm_t comm, int value, int expect, size_t count = 4096) {
  cudaStream_t stream;
  if (failed("plexusStreamCreate", plexusStreamCreate(&stream))) return 1;
  std::vector<int> buf(count, value);
  long bad = failed("ncclAllReduce", ncclAllReduce(buf.data(), buf.data(), count, ncclInt32, ncclSum, comm, stream));
  bad += failed("plexusStreamSynchronize", plexusStreamSynchronize(stream));
  for (int v : buf) bad += v != expect;
  plexusStreamDestroy(stream);
  return bad;
}

// Runs fn(rank) on n threads (host device = rank); returns the sum of what they returned.
long onThreads(int n, const std::function<long(int)>& fn) {
  std::vector<long> bad(n, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; r++)
    threads.emplace_back([&, r] {
      plexusSetDevice(r);
      bad[r] = fn(r);
    });
  for (auto& t : threads) t.join();
  long total = 0;
  for (long b : bad) total += b;
  return total;
}

constexpr int kRanks = 2;

long initRank(bool abort) {
  ncclUniqueId id;
  if (failed("ncclGetUniqueId", ncclGetUniqueId(&id))) return 1;
  return onThreads(kRanks, [&](int rank) {
    ncclComm_t comm = nullptr;
    if (failed("ncclCommInitRank", ncclCommInitRank(&comm, kRanks, id, rank))) return 1L;
    long bad = allReduceCheck(comm, rank + 1, 3);
    return bad + failed(abort ? "ncclCommAbort" : "ncclCommDestroy", abort ? ncclCommAbort(comm) : ncclCommDestroy(comm));
  });
}

long initAll() {
  ncclComm_t comms[kRanks] = {};
  if (failed("ncclCommInitAll", ncclCommInitAll(comms, kRanks, nullptr))) return 1;
  long bad = onThreads(kRanks, [&](int rank) { return allReduceCheck(comms[rank], rank + 1, 3); });
  for (ncclComm_t c : comms) bad += failed("ncclCommDestroy", ncclCommDestroy(c));
  return bad;
}

long nonblocking() {
  ncclUniqueId id;
  if (failed("ncclGetUniqueId", ncclGetUniqueId(&id))) return 1;
  return onThreads(kRanks, [&](int rank) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRankConfig(&comm, kRanks, id, rank, &config);
    if (r != ncclInProgress && failed("ncclCommInitRankConfig", r)) return 1L;
    if (!comm) return 1L;
    long bad = failed("nonblocking init", settle(comm));
    if (!bad) bad += allReduceCheck(comm, rank + 1, 3);
    return bad + failed("ncclCommDestroy", ncclCommDestroy(comm));
  });
}

// Parent and child: the child is made by ncclCommSplit, ncclCommShrink (3 ranks, rank 1 left out) or the
// parent is made by ncclCommInitRankScalable (2 ids).
long split() {
  ncclUniqueId id;
  if (failed("ncclGetUniqueId", ncclGetUniqueId(&id))) return 1;
  return onThreads(kRanks, [&](int rank) {
    ncclComm_t comm = nullptr, child = nullptr;
    if (failed("ncclCommInitRank", ncclCommInitRank(&comm, kRanks, id, rank))) return 1L;
    long bad = failed("ncclCommSplit", ncclCommSplit(comm, 0, -rank, &child, nullptr));
    if (child) {
      bad += allReduceCheck(child, rank + 1, 3);
      bad += failed("ncclCommDestroy(child)", ncclCommDestroy(child));
    }
    return bad + failed("ncclCommDestroy", ncclCommDestroy(comm));
  });
}

long shrink() {
  ncclUniqueId id;
  if (failed("ncclGetUniqueId", ncclGetUniqueId(&id))) return 1;
  constexpr int n = kRanks + 1;
  return onThreads(n, [&](int rank) {
    ncclComm_t comm = nullptr, child = nullptr;
    if (failed("ncclCommInitRank", ncclCommInitRank(&comm, n, id, rank))) return 1L;
    long bad = 0;
    if (rank != 1) {  // the one left out does not call
      int exclude[1] = {1};
      bad += failed("ncclCommShrink", ncclCommShrink(comm, exclude, 1, &child, nullptr, NCCL_SHRINK_DEFAULT));
      if (child) {
        bad += allReduceCheck(child, rank, 0 + 2);
        bad += failed("ncclCommDestroy(child)", ncclCommDestroy(child));
      }
    }
    return bad + failed("ncclCommDestroy", ncclCommDestroy(comm));
  });
}

long scalable() {
  ncclUniqueId ids[2];
  for (auto& id : ids)
    if (failed("ncclGetUniqueId", ncclGetUniqueId(&id))) return 1;
  return onThreads(kRanks, [&](int rank) {
    ncclComm_t comm = nullptr;
    if (failed("ncclCommInitRankScalable", ncclCommInitRankScalable(&comm, kRanks, rank, 2, ids, nullptr))) return 1L;
    long bad = allReduceCheck(comm, rank + 1, 3);
    return bad + failed("ncclCommDestroy", ncclCommDestroy(comm));
  });
}

}  // namespace

int main(int argc, char** argv) {
  testenv::setDefaults();
  const int cycles = argc > 1 ? atoi(argv[1]) : 2;
  struct Kind {
    const char* name;
    std::function<long()> run;
  };
  const Kind kinds[] = {
      {"ncclCommInitRank", [] { return initRank(false); }},
      {"ncclCommInitAll", initAll},
      {"nonblocking init", nonblocking},
      {"ncclCommSplit", split},
      {"ncclCommShrink", shrink},
      {"ncclCommInitRankScalable", scalable},
      {"ncclCommAbort", [] { return initRank(true); }},
  };
  long total = 0;
  for (const Kind& k : kinds) {
    for (int c = 0; c < cycles; c++) {
      auto t0 = std::chrono::steady_clock::now();
      long bad = k.run();
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      printf("init_cycles: %-26s cycle %d: %s (%.2f s)\n", k.name, c + 1, bad ? "FAILED" : "ok", s);
      fflush(stdout);
      total += bad;
    }
  }
  printf("init_cycles: %s\n", total ? "FAILED" : "all cycles passed");
  return total ? 1 : 0;
}
