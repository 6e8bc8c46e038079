// Faults end in errors, never in hangs. A rank killed with -9 at a random point of an AllReduce,
// AllGather or Send/Recv, over shared memory and over each net: every survivor's operation fails within
// a bound, ncclCommGetAsyncError reports it, and the message names the dead rank. A rank that never
// joins: every other rank times out (PLEXUS_TIMEOUT) with a hang report. SIGUSR1 prints a report and
// the job goes on. ncclCommAbort from another thread returns within 1 s, also while the proxy is stuck
// inside a net plugin.
//
// Trials per kind: PLEXUS_FAULT_TRIALS (default 2 here; ctest -L stress runs 20);
// PLEXUS_FAULT_KINDS=ucx runs the kinds whose names hold that string; PLEXUS_FAULT_SEED=<n> replays the trials a
// failing run printed (the seed of its kind, with PLEXUS_FAULT_KINDS naming that kind).
#include <doctest/doctest.h>

#include <dlfcn.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "matrix.h"
#include "nets.h"

namespace {

enum class Op { AllReduce = 0, AllGather = 1, SendRecv = 2 };
const char* opName(int op) { return op == 0 ? "AllReduce" : op == 1 ? "AllGather" : "Send/Recv"; }

int64_t realtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

void appendLine(const char* path, const std::string& line) {
  FILE* f = fopen(path, "a");  // one write of a short line: processes' lines do not interleave
  if (!f) return;
  fputs(line.c_str(), f);
  fclose(f);
}

ncclResult_t launch(int op, int rank, int nranks, const float* send, float* recv, size_t count, ncclComm_t comm,
                    cudaStream_t stream) {
  switch (op) {
    case 0: return ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, stream);
    case 1: return ncclAllGather(send, recv, count, ncclFloat32, comm, stream);
    default: {
      ncclGroupStart();
      ncclSend(send, count, ncclFloat32, (rank + 1) % nranks, comm, stream);
      ncclRecv(recv, count, ncclFloat32, (rank + nranks - 1) % nranks, comm, stream);
      return ncclGroupEnd();
    }
  }
}

// PLEXUS_TEST_FAULT="op victim iteration delayUs"; results go to PLEXUS_TEST_FAULT_LOG: the victim's
// "fault <ns>" just before it dies, each survivor's "survivor <rank> <ns> <ok>" when its operation failed.
long killScenario(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  int op = 0, victim = 0, iteration = 0, delayUs = 0;
  if (sscanf(getenv("PLEXUS_TEST_FAULT"), "%d %d %d %d", &op, &victim, &iteration, &delayUs) != 4) return 1;
  const char* log = getenv("PLEXUS_TEST_FAULT_LOG");
  const size_t count = 1 << 17;  // 512 KiB per rank: an operation takes long enough to die inside it
  std::vector<float> send(count, 1.0f), recv(op == 1 ? count * nranks : count);
  for (int i = 0; i < 100; i++) {
    ncclResult_t r = launch(op, rank, nranks, send.data(), recv.data(), count, comm, stream);
    if (rank == victim && i == iteration) {
      if (delayUs) usleep(delayUs);
      appendLine(log, "fault " + std::to_string(realtimeNs()) + "\n");
      raise(SIGKILL);
    }
    if (r == ncclSuccess) r = plexusStreamSynchronize(stream);
    if (r == ncclSuccess) continue;
    const int64_t when = realtimeNs();
    const std::string e = ncclGetLastError(comm);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    const std::string named = "rank " + std::to_string(victim) + " (pid ";
    bool ok = true;
    if (e.find(named) == std::string::npos) {
      fprintf(stderr, "rank %d: the error does not name \"%s...\": %s\n", rank, named.c_str(), e.c_str());
      ok = false;
    }
    if (async != ncclRemoteError && async != ncclSystemError) {
      fprintf(stderr, "rank %d: ncclCommGetAsyncError gives %s after: %s\n", rank, ncclGetErrorString(async), e.c_str());
      ok = false;
    }
    appendLine(log, "survivor " + std::to_string(rank) + " " + std::to_string(when) + " " + (ok ? "1" : "0") + "\n");
    // Let the other survivors hear of the dead rank first: closing connections now could make them
    // see this rank leave instead.
    if (!harness::processBarrier(rank, nranks, "survivors-failed", 30, victim))
      fprintf(stderr, "rank %d: the other survivors never reached the barrier\n", rank);
    ncclCommAbort(comm);
    _exit(ok ? 0 : 1);
  }
  fprintf(stderr, "rank %d: 100 %s operations succeeded; expected a failure\n", rank, opName(op));
  return 1;
}
const harness::Scenario kKill("fault-kill", killScenario);

struct Kind {
  const char* name;
  const nets::Net* net;  // null: one node, shared memory
  int nranks, perNode;
};

struct Tally {
  int trials = 0, survived = 0;
  double worst = 0;
};

// Runs trials of kill -9 of a random rank at a random point; every survivor must report the failure.
Tally killTrials(const Kind& k, int trials, uint32_t seed) {
  Tally t;
  matrix::ScopedEnv env;
  if (k.net) {
    env.set("NCCL_NET_PLUGIN", k.net->pluginFile.empty() ? "none" : k.net->name.c_str());
    for (auto& [name, value] : k.net->env) env.set(name, value);
  }
  const std::string log = "/tmp/plexus-fault-" + std::to_string(getpid()) + ".log";
  env.set("PLEXUS_TEST_FAULT_LOG", log.c_str());
  std::mt19937 rng(seed);
  for (int i = 0; i < trials; i++) {
    const int op = (int)(rng() % 3), victim = (int)(rng() % k.nranks), iteration = (int)(rng() % 4);
    const int delayUs = (int)(rng() % 3000);
    const std::string spec = std::to_string(op) + " " + std::to_string(victim) + " " + std::to_string(iteration) +
                             " " + std::to_string(delayUs);
    env.set("PLEXUS_TEST_FAULT", spec.c_str());
    unlink(log.c_str());
    INFO(std::string(k.name), ": ", std::string(opName(op)), ", rank ", victim, " killed in operation ", iteration, " after ", delayUs, " us");
    // The victim dies of SIGKILL: exactly one process fails when every survivor did what it should.
    const int failed = harness::runProcesses("fault-kill", k.nranks, 60, k.perNode);
    CHECK(failed == 1);
    std::ifstream in(log);
    std::string word;
    int64_t fault = 0;
    std::vector<int64_t> errors;
    int ok = 0;
    while (in >> word) {
      if (word == "fault") {
        in >> fault;
      } else if (word == "survivor") {
        int rank, good;
        int64_t when;
        in >> rank >> when >> good;
        errors.push_back(when);
        ok += good;
      }
    }
    CHECK(fault != 0);
    CHECK((int)errors.size() == k.nranks - 1);
    CHECK(ok == k.nranks - 1);
    t.trials++;
    if (failed == 1 && ok == k.nranks - 1 && (int)errors.size() == k.nranks - 1) t.survived++;
    for (int64_t e : errors) t.worst = std::max(t.worst, (e - fault) / 1e9);
  }
  unlink(log.c_str());
  return t;
}

int trialsWanted(int deflt) {
  const char* v = getenv("PLEXUS_FAULT_TRIALS");
  return v ? std::max(1, atoi(v)) : deflt;
}

void runKinds(int trials) {
  const Kind kinds[] = {{"shared memory (4 ranks, 1 node)", nullptr, 4, 0},
                        {"socket (2 nodes x 2 ranks)", &nets::kSocket, 4, 2},
                        {"socket (3 nodes x 1 rank)", &nets::kSocket, 3, 1},
                        {"net-ucx tcp (2 nodes x 2 ranks)", &nets::kUcx, 4, 2},
                        {"net-ofi tcp (2 nodes x 2 ranks)", &nets::kOfi, 4, 2}};
  const char* fixed = getenv("PLEXUS_FAULT_SEED");
  uint32_t seed = fixed ? (uint32_t)strtoul(fixed, nullptr, 10)
                        : (uint32_t)std::chrono::steady_clock::now().time_since_epoch().count();
  const char* only = getenv("PLEXUS_FAULT_KINDS");  // a substring of the kinds' names to run alone
  for (const Kind& k : kinds) {
    if (only && !strstr(k.name, only)) continue;
    if (k.net && !nets::available(*k.net)) {
      MESSAGE("skipped ", std::string(k.name), ": ", k.net->path().c_str(), " was not built");
      continue;
    }
    const Tally t = killTrials(k, trials, seed++);
    MESSAGE(std::string(k.name), ": ", t.trials, " trials, ", t.survived, " with every survivor failing cleanly; worst fault to "
            "error ", t.worst, " s (seed ", seed - 1, ")");
    CHECK(t.worst < 5.0);
  }
}

}  // namespace

TEST_CASE("faults: kill -9 of a random rank mid-operation fails every survivor's operation, naming it") {
  runKinds(trialsWanted(2));
}

namespace {

// The last rank dies in the second AllReduce; the survivors learn which rank it was, shrink it away
// and carry on over the new communicator.
long shrinkScenario(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  std::vector<float> buf(1 << 16, 1.0f);
  const int victim = nranks - 1;
  for (int i = 0; i < 100; i++) {
    ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, stream);
    if (rank == victim && i == 1) raise(SIGKILL);
    if (r == ncclSuccess) r = plexusStreamSynchronize(stream);
    if (r != ncclSuccess) break;
  }
  int lost = -1;
  plexusCommFailedRank(comm, &lost);
  if (lost != victim) {
    fprintf(stderr, "rank %d: plexusCommFailedRank says %d, not %d (%s)\n", rank, lost, victim,
            ncclGetLastError(comm));
    return 1;
  }
  ncclComm_t child = nullptr;
  CHECK_NCCL(ncclCommShrink(comm, &lost, 1, &child, nullptr, NCCL_SHRINK_ABORT));
  int n = 0;
  CHECK_NCCL(ncclCommCount(child, &n));
  std::fill(buf.begin(), buf.end(), 1.0f);
  CHECK_NCCL(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, child, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  long bad = n != nranks - 1;
  for (float v : buf) bad += v != (float)(nranks - 1);
  ncclCommDestroy(child);
  ncclCommAbort(comm);
  _exit(bad ? 1 : 0);
}
const harness::Scenario kShrink("fault-shrink", shrinkScenario);

}  // namespace

TEST_CASE("faults: the survivors of a dead rank shrink it away and carry on") {
  CHECK(harness::runProcesses("fault-shrink", 4, 60) == 1);  // the victim's SIGKILL
}

namespace {

// Rank 0 sends 256 KiB where rank 1 receives 512 KiB: rank 0 finds that the sizes differ (the handshake of a message
// of 64 KiB or more carries the receiver's size, whether the message then goes zero-copy or through the slots) and
// fails at once, a verdict of its own that it sends nobody. Without PLEXUS_TIMEOUT rank 1 would
// wait for ever; it learns of rank 0's failure by asking rank 0's process, once its wait has lasted a second (as a
// rank does that missed a peer's notice of a failure).
long askScenario(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  const size_t count = 64 * 1024;
  std::vector<float> buf(2 * count, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  ncclResult_t r = rank == 0 ? ncclSend(buf.data(), count, ncclFloat32, 1, comm, stream)
                             : ncclRecv(buf.data(), 2 * count, ncclFloat32, 0, comm, stream);
  if (r == ncclSuccess) r = plexusStreamSynchronize(stream);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string e = ncclGetLastError(comm);
  long bad = 0;
  if (rank == 0 && r != ncclInvalidUsage)
    bad++, fprintf(stderr, "rank 0: the mismatched send gave %s, not ncclInvalidUsage: %s\n", ncclGetErrorString(r),
                   e.c_str());
  if (rank == 1) {
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    if (r == ncclSuccess || async != ncclRemoteError || e.find("rank 0 (pid ") == std::string::npos ||
        e.find("reported a failure") == std::string::npos || e.find("is wrong") == std::string::npos)
      bad++, fprintf(stderr, "rank 1: after %.1f s got %s (async %s), not rank 0's failure: %s\n", seconds,
                     ncclGetErrorString(r), ncclGetErrorString(async), e.c_str());
    else
      fprintf(stderr, "rank 1: learnt of rank 0's failure after %.2f s: %s\n", seconds, e.c_str());
  }
  // Rank 0's process answers for as long as its communicator lives.
  if (!harness::processBarrier(rank, nranks, "answered", 30, -1))
    bad++, fprintf(stderr, "rank %d: the other rank never reached the barrier\n", rank);
  ncclCommAbort(comm);
  _exit(bad ? 1 : 0);
}
const harness::Scenario kAsk("fault-ask", askScenario);

}  // namespace

TEST_CASE("faults: a rank waiting on a peer that failed without telling it asks the peer, and fails with its reason") {
  matrix::ScopedEnv env;
  env.set("PLEXUS_TIMEOUT", "0");  // only the answer can end rank 1's wait
  for (const char* cma : {"1", "0"}) {  // the message would go by process_vm_writev, or through the slots
    CAPTURE(cma);
    env.set("PLEXUS_CMA", cma);
    CHECK(harness::runProcesses("fault-ask", 2, 30) == 0);
  }
}

// ------------------------------------------------------------------------------------------------
// Timeouts and hang reports.

namespace {

// The last rank never joins the AllReduce (it sleeps, alive, then leaves): the others time out.
long timeoutScenario(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  if (rank == nranks - 1) {
    sleep(4);
    _exit(0);
  }
  std::vector<float> buf(1024, 1.0f);
  ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, stream);
  if (r == ncclSuccess) r = plexusStreamSynchronize(stream);
  const std::string e = ncclGetLastError(comm);
  char report[8192];
  plexusCommHangReport(comm, report, sizeof report);
  long bad = 0;
  if (r != ncclTimeout) bad++, fprintf(stderr, "rank %d: got %s, not ncclTimeout\n", rank, ncclGetErrorString(r));
  if (e.find("timed out") == std::string::npos || e.find("AllReduce opSeq") == std::string::npos)
    bad++, fprintf(stderr, "rank %d: the error does not say what timed out: %s\n", rank, e.c_str());
  if (!strstr(report, "stopped in AllReduce opSeq") || !strstr(report, "waiting") || !strstr(report, " rank ") ||
      !strstr(report, " for step "))
    bad++, fprintf(stderr, "rank %d: the report lacks the operation or the wait:\n%s\n", rank, report);
  ncclCommAbort(comm);
  _exit(bad ? 1 : 0);
}
const harness::Scenario kTimeout("fault-timeout", timeoutScenario);

// Rank 0 waits on rank 1, which comes 1.5 s late; meanwhile rank 0 signals itself SIGUSR1. The
// AllReduce still completes, with the right result.
long signalScenario(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  std::vector<float> buf(1024, 1.0f);
  if (rank == 1) usleep(1500000);
  std::thread signaller;
  if (rank == 0)
    signaller = std::thread([] {
      usleep(700000);
      kill(getpid(), SIGUSR1);
    });
  ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, stream);
  if (r == ncclSuccess) r = plexusStreamSynchronize(stream);
  if (signaller.joinable()) signaller.join();
  long bad = r != ncclSuccess;
  for (float v : buf) bad += v != (float)nranks;
  return bad;
}
const harness::Scenario kSignal("fault-sigusr1", signalScenario);

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The debug files of one run (NCCL_DEBUG_FILE=<prefix>.%p), read and removed.
std::vector<std::string> debugFiles(const std::string& prefix) {
  std::vector<std::string> out;
  FILE* ls = popen(("ls " + prefix + ".* 2>/dev/null").c_str(), "r");
  char path[512];
  while (ls && fgets(path, sizeof path, ls)) {
    std::string p(path);
    p.erase(p.find_last_not_of('\n') + 1);
    out.push_back(readFile(p));
    unlink(p.c_str());
  }
  if (ls) pclose(ls);
  return out;
}

}  // namespace

TEST_CASE("faults: a rank that never joins makes the others time out with ncclTimeout and a hang report") {
  matrix::ScopedEnv env;
  const std::string prefix = "/tmp/plexus-timeout-" + std::to_string(getpid());
  env.set("PLEXUS_TIMEOUT", "1");
  env.set("PLEXUS_BOOTSTRAP_TIMEOUT", "60");  // PLEXUS_TIMEOUT would bound init too: this test is about the operation
  env.set("NCCL_DEBUG", "INFO");
  env.set("NCCL_DEBUG_SUBSYS", "RAS");
  env.set("NCCL_DEBUG_FILE", (prefix + ".%p").c_str());
  CHECK(harness::runProcesses("fault-timeout", 3, 60) == 0);
  int reports = 0;
  for (const std::string& f : debugFiles(prefix)) {
    if (f.find("hang report (timeout)") == std::string::npos) continue;
    reports++;
    CHECK(f.find("AllReduce opSeq") != std::string::npos);
    CHECK(f.find("waiting") != std::string::npos);
  }
  CHECK(reports == 2);  // one per rank that waited, none from the rank that never joined
}

TEST_CASE("faults: SIGUSR1 prints a hang report and the job goes on") {
  matrix::ScopedEnv env;
  const std::string prefix = "/tmp/plexus-sigusr1-" + std::to_string(getpid());
  env.set("NCCL_DEBUG", "INFO");
  env.set("NCCL_DEBUG_SUBSYS", "RAS");
  env.set("NCCL_DEBUG_FILE", (prefix + ".%p").c_str());
  CHECK(harness::runProcesses("fault-sigusr1", 2, 60) == 0);
  int reports = 0;
  for (const std::string& f : debugFiles(prefix))
    if (f.find("hang report (SIGUSR1)") != std::string::npos) {
      reports++;
      CHECK(f.find("running AllReduce opSeq") != std::string::npos);
      CHECK(f.find("to receive from rank 1") != std::string::npos);
    }
  CHECK(reports == 1);
}

// ------------------------------------------------------------------------------------------------
// Abort.

namespace {

// Ranks as threads run AllReduces until the controller aborts both communicators at a random moment
// (during init for some trials); each ncclCommAbort must return within 1 s.
double abortTrial(std::mt19937& rng, bool duringInit) {
  const int n = 2;
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  std::vector<ncclComm_t> comms(n, nullptr);
  std::vector<cudaStream_t> streams(n);
  std::vector<std::mutex> enqueue(n);
  std::atomic<bool> stop{false};
  std::atomic<int> ready{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; r++) {
    plexusStreamCreate(&streams[r]);
    ranks.emplace_back([&, r] {
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      plexusSetDevice(r);
      {
        std::lock_guard<std::mutex> lock(enqueue[r]);
        ncclCommInitRankConfig(&comms[r], n, id, r, &config);
      }
      ready++;
      ncclResult_t s = ncclInProgress;
      while (!stop && s == ncclInProgress) {
        std::lock_guard<std::mutex> lock(enqueue[r]);
        if (stop) return;
        ncclCommGetAsyncError(comms[r], &s);
      }
      std::vector<float> buf(1 << 16, 1.0f);
      for (int i = 0; i < 100000 && !stop; i++) {
        {
          std::lock_guard<std::mutex> lock(enqueue[r]);  // the handle is not used once aborted
          if (stop) return;
          const ncclResult_t e =
              ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comms[r], streams[r]);
          if (e != ncclSuccess && e != ncclInProgress) return;
        }
        if (plexusStreamSynchronize(streams[r]) != ncclSuccess) return;
      }
    });
  }
  while (ready < n) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::microseconds(duringInit ? rng() % 20000 : 30000 + rng() % 50000));
  for (int r = 0; r < n; r++) enqueue[r].lock();
  stop = true;
  double worst = 0;
  for (int r = 0; r < n; r++) {
    const auto t0 = std::chrono::steady_clock::now();
    ncclCommAbort(comms[r]);
    worst = std::max(worst, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  for (int r = 0; r < n; r++) enqueue[r].unlock();
  for (auto& t : ranks) t.join();
  for (auto& s : streams) plexusStreamDestroy(s);
  return worst;
}

// One node per rank over the defective plugin whose test() blocks for ever after a few calls: the proxy
// thread is stuck inside it when the rank aborts.
long abortStuckScenario(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  std::vector<float> buf(1 << 16, 1.0f);
  for (int i = 0; i < 8; i++)
    ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, stream);
  // The proxy is inside the plugin's test() for ever once the plugin says so.
  void* lib = dlopen(nets::testPlugin("defective").c_str(), RTLD_NOW | RTLD_NOLOAD);
  const int* blocked = lib ? (const int*)dlsym(lib, "defectiveBlockedCalls") : nullptr;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (blocked && !__atomic_load_n(blocked, __ATOMIC_SEQ_CST) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!blocked || !__atomic_load_n(blocked, __ATOMIC_SEQ_CST)) {
    fprintf(stderr, "rank %d: the proxy never blocked in the plugin's test() (%s)\n", rank,
            blocked ? "within 30 s" : "defectiveBlockedCalls not found");
    _exit(1);
  }
  const auto t0 = std::chrono::steady_clock::now();
  ncclCommAbort(comm);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fprintf(stderr, "rank %d: ncclCommAbort with the proxy stuck in the plugin returned in %.3f s\n", rank, secs);
  _exit(secs < 1.0 ? 0 : 1);
}
const harness::Scenario kAbortStuck("fault-abort-stuck-proxy", abortStuckScenario);

}  // namespace

TEST_CASE("faults: ncclCommAbort from another thread returns within 1 s, during init or with operations in flight") {
  std::mt19937 rng((uint32_t)std::chrono::steady_clock::now().time_since_epoch().count());
  const int trials = trialsWanted(2) * 5;
  double worst = 0;
  for (int i = 0; i < trials; i++) worst = std::max(worst, abortTrial(rng, i % 4 == 0));
  MESSAGE(trials, " aborts from another thread; worst ncclCommAbort ", worst, " s");
  CHECK(worst < 1.0);
}

TEST_CASE("faults: ncclCommAbort inside a group drops the group's operations of that communicator") {
  std::vector<ncclComm_t> comms(2);
  REQUIRE(ncclCommInitAll(comms.data(), 2, nullptr) == ncclSuccess);
  std::vector<std::thread> ranks;
  std::vector<ncclResult_t> ends(2, ncclInternalError);
  std::vector<double> took(2, 0);
  for (int r = 0; r < 2; r++)
    ranks.emplace_back([&, r] {
      cudaStream_t s;
      plexusStreamCreate(&s);
      std::vector<float> buf(4096, 1.0f);
      ncclGroupStart();
      ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comms[r], s);
      const auto t0 = std::chrono::steady_clock::now();
      ncclCommAbort(comms[r]);
      took[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ends[r] = ncclGroupEnd();  // nothing left to launch: the aborted communicator is out of the group
      plexusStreamDestroy(s);
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; r++) {
    CHECK(ends[r] == ncclSuccess);
    CHECK(took[r] < 1.0);
  }
}

TEST_CASE("faults: ncclCommAbort returns within 1 s while the proxy is blocked inside a net plugin call") {
  matrix::ScopedEnv env;
  env.set("NCCL_NET_PLUGIN", nets::testPlugin("defective").c_str());
  env.set("NETCHECK_DEFECT", "hang-test");
  CHECK(harness::runProcesses("fault-abort-stuck-proxy", 2, 60, 1) == 0);
}

// fork() without exec after communicators existed: the children's communicators need a watchdog and a
// proxy of their own (the parent's threads did not come along), and the parent's stay the parent's.
TEST_CASE("faults: children forked after a communicator existed get a watchdog of their own") {
  CHECK(harness::runThreads(2, [](int, int, ncclComm_t, cudaStream_t) { return 0L; }) == 0);
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);  // its root thread serves the children from here
  std::vector<pid_t> kids;
  for (int r = 0; r < 2; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(60);  // bounded, whatever happens
      plexusSetDevice(r);
      ncclComm_t comm;
      cudaStream_t s;
      if (ncclCommInitRank(&comm, 2, id, r) != ncclSuccess || plexusStreamCreate(&s) != ncclSuccess) _exit(2);
      if (r == 1) {
        usleep(200000);
        raise(SIGKILL);  // the survivor must hear of it through its own watchdog
      }
      std::vector<float> buf(1 << 16, 1.0f);
      ncclResult_t e = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, s);
      if (e == ncclSuccess) e = plexusStreamSynchronize(s);
      const bool named = strstr(ncclGetLastError(comm), "rank 1 (pid ") != nullptr;
      if (e == ncclSuccess || !named) fprintf(stderr, "forked rank 0: %s\n", ncclGetLastError(comm));
      _exit(e != ncclSuccess && named ? 0 : 1);
    }
    kids.push_back(pid);
  }
  int status = 0;
  waitpid(kids[0], &status, 0);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  waitpid(kids[1], &status, 0);
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
}
