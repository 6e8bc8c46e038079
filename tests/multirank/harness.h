// Multi-rank test harness (after Gloo's BaseTest::spawn): the same test body runs with ranks as
// threads of this process or as separate processes (this binary re-executed per rank).
#pragma once

#include <nccl.h>
#include <plexus.h>

#include <functional>
#include <string>

namespace harness {

// The body of a test on one rank. Returns the number of problems seen (wrong elements, failed calls).
using RankFn = std::function<long(int rank, int nranks, ncclComm_t comm, cudaStream_t stream)>;

// Runs fn on nranks threads, each with a communicator of its own (host device = rank). Returns the
// sum of what fn returned, or -1 if a communicator could not be created.
long runThreads(int nranks, const RankFn& fn);

// Runs the scenario registered as `name` in nranks processes; returns the number of processes that
// failed (non-zero exit, signal, or not done within timeoutSec, which kills the rest). With
// ranksPerNode > 0 the processes act as nodes of that many ranks each (PLEXUS_HOSTID differs between
// nodes), so that traffic between nodes takes the net transport.
int runProcesses(const std::string& name, int nranks, int timeoutSec = 120, int ranksPerNode = 0);

// Scenarios that runProcesses can start in a child process.
void registerScenario(const std::string& name, RankFn fn);
struct Scenario {
  Scenario(const std::string& name, RankFn fn) { registerScenario(name, std::move(fn)); }
};

// Waits, outside the communicator, until every process of the running scenario has reached the
// barrier named `tag` (each tag used once), all but absentRank (a rank that died, or -1); false after
// timeoutSec. For tests where a rank must not leave before its peers have observed something. Only in
// processes started by runProcesses.
bool processBarrier(int rank, int nranks, const char* tag, int timeoutSec = 60, int absentRank = -1);

// This process's cores (its CPU set), comm's channels, and whether nranks ranks of one machine, each running its
// channels, outnumber those cores: the planner's test (Topology::coresShared) for the sizes it picks by it.
struct CoreUse {
  int cores = 0, channels = 0;
  bool shared = false;
};
CoreUse coreUse(ncclComm_t comm, int nranks);

// If argv asks for a child rank, runs it and returns its exit code; otherwise -1.
int maybeRunChild(int argc, char** argv);

}  // namespace harness

#define CHECK_NCCL(call)                                                                                  \
  do {                                                                                                   \
    ncclResult_t r_ = (call);                                                                            \
    if (r_ != ncclSuccess) {                                                                             \
      fprintf(stderr, "%s:%d %s -> %s (%s)\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_),         \
              ncclGetLastError(nullptr));                                                                \
      return 1000000L;                                                                                   \
    }                                                                                                    \
  } while (0)
