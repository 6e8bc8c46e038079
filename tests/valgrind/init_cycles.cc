// Init/destroy cycles of every kind of communicator, for valgrind's memcheck (ctest valgrind.init_cycles):
// ranks as processes of one node (shared memory, single-copy), ranks as processes of two nodes (the socket net
// and the proxy), then with ranks as threads ncclCommInitRank, ncclCommInitAll, nonblocking init,
// ncclCommSplit, ncclCommShrink, ncclCommInitRankScalable, and ncclCommAbort in place of destroy. Each
// communicator runs one checked AllReduce, so that its channels and connections are set up before it goes.
// Process ranks are fork()ed children, which memcheck follows and checks for leaks when they exit.
//   plexus-valgrind-init-cycles [cycles]      (default 2)
// Exit code 0 when every cycle passed. Memory that outlives the cycles must be what process-lifetime
// singletons hold (the proxy, watchdog and bootstrap root threads): "still reachable", never lost.
#include <nccl.h>
#include <plexus.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

#include "settle.h"
#include "test_env.h"

namespace {

// A report of what failed, with the call's error string; returns the number of problems (0 or 1).
long failed(const char* what, ncclResult_t r) {
  if (r == ncclSuccess) return 0;
  fprintf(stderr, "init_cycles: %s: %s (%s)\n", what, ncclGetErrorString(r), ncclGetLastError(nullptr));
  return 1;
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
    long bad = failed("nonblocking init", testenv::settle(comm, 120));
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

// Ranks as fork()ed processes: each one inits, checks an AllReduce, destroys and exits 0 when all went well.
// With twoNodes each process is a node of its own (PLEXUS_HOSTID), so they connect through the net transport.
// The children are forked before the parent makes the unique id (and with it the bootstrap root's thread),
// which reaches them through a pipe: a child's copy of that thread's memory would have no thread holding it.
long processes(bool twoNodes) {
  pid_t pids[kRanks];
  int idPipes[kRanks][2];
  for (int rank = 0; rank < kRanks; rank++) {
    if (pipe(idPipes[rank]) != 0 || (pids[rank] = fork()) < 0) {
      perror("init_cycles: pipe/fork");
      return 1;
    }
    if (pids[rank] == 0) {
      close(idPipes[rank][1]);
      ncclUniqueId id;
      long bad = read(idPipes[rank][0], &id, sizeof(id)) != (ssize_t)sizeof(id);
      if (bad) fprintf(stderr, "init_cycles: rank %d did not get the unique id\n", rank);
      close(idPipes[rank][0]);
      if (twoNodes) setenv("PLEXUS_HOSTID", rank ? "valgrind-node-1" : "valgrind-node-0", 1);
      ncclComm_t comm = nullptr;
      if (!bad) bad = failed("ncclCommInitRank", ncclCommInitRank(&comm, kRanks, id, rank));
      if (!bad) {
        bad += allReduceCheck(comm, rank + 1, 3, 1 << 18);  // past the point-to-point zero-copy threshold
        bad += failed("ncclCommDestroy", ncclCommDestroy(comm));
      }
      fflush(stderr);
      exit(bad ? 1 : 0);  // exit, not _exit: memcheck's leak check runs at the child's exit
    }
    close(idPipes[rank][0]);
  }
  ncclUniqueId id;
  const bool haveId = !failed("ncclGetUniqueId", ncclGetUniqueId(&id));
  for (int rank = 0; rank < kRanks; rank++) {
    // Without an id the children see the pipe close and exit with an error.
    if (haveId && write(idPipes[rank][1], &id, sizeof(id)) != (ssize_t)sizeof(id)) perror("init_cycles: write");
    close(idPipes[rank][1]);
  }
  long bad = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  for (int rank = 0; rank < kRanks; rank++) {
    int status = 0;
    pid_t got = 0;
    while ((got = waitpid(pids[rank], &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (got != pids[rank]) {
      fprintf(stderr, "init_cycles: rank %d (pid %d) did not exit within 240 s; killed\n", rank, (int)pids[rank]);
      kill(pids[rank], SIGKILL);
      waitpid(pids[rank], &status, 0);
      bad++;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "init_cycles: rank %d (pid %d) failed (%s %d; memcheck's report is above)\n", rank,
              (int)pids[rank], WIFEXITED(status) ? "exit code" : "signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      bad++;
    }
  }
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  testenv::setDefaults();
  const int cycles = argc > 1 ? atoi(argv[1]) : 2;
  struct Kind {
    const char* name;
    std::function<long()> run;
  };
  // Processes first: fork() before this process has threads of its own (proxy, watchdog) keeps it simple.
  const Kind kinds[] = {
      {"processes, one node", [] { return processes(false); }},
      {"processes, two nodes", [] { return processes(true); }},
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
