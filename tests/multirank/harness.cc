#include "harness.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>
#include <vector>

extern char** environ;

namespace harness {

static std::map<std::string, RankFn>& scenarios() {
  static std::map<std::string, RankFn> m;
  return m;
}

void registerScenario(const std::string& name, RankFn fn) { scenarios()[name] = std::move(fn); }

static long runRank(const ncclUniqueId& id, int rank, int nranks, const RankFn& fn) {
  plexusSetDevice(rank);
  ncclComm_t comm;
  ncclResult_t r = ncclCommInitRank(&comm, nranks, id, rank);
  if (r != ncclSuccess) {
    fprintf(stderr, "rank %d: ncclCommInitRank: %s (%s)\n", rank, ncclGetErrorString(r), ncclGetLastError(nullptr));
    return -1;
  }
  cudaStream_t stream;
  plexusStreamCreate(&stream);
  long bad = fn(rank, nranks, comm, stream);
  plexusStreamDestroy(stream);
  if (ncclCommDestroy(comm) != ncclSuccess) bad++;
  return bad;
}

long runThreads(int nranks, const RankFn& fn) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return -1;
  std::vector<long> results(nranks, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; r++) threads.emplace_back([&, r] { results[r] = runRank(id, r, nranks, fn); });
  for (auto& t : threads) t.join();
  long total = 0;
  for (long v : results) {
    if (v < 0) return -1;
    total += v;
  }
  return total;
}

static std::string hex(const void* data, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = ((const unsigned char*)data)[i];
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

static void unhex(const char* s, void* data, size_t n) {
  auto v = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i < n; i++) ((unsigned char*)data)[i] = (unsigned char)(v(s[2 * i]) << 4 | v(s[2 * i + 1]));
}

static const char* kBarrierEnv = "PLEXUS_TEST_BARRIER_DIR";

static std::string barrierFile(const char* dir, const char* tag, int rank) {
  return std::string(dir) + "/" + tag + "." + std::to_string(rank);
}

bool processBarrier(int rank, int nranks, const char* tag, int timeoutSec, int absentRank) {
  const char* dir = getenv(kBarrierEnv);
  if (!dir) return false;
  int fd = open(barrierFile(dir, tag, rank).c_str(), O_CREAT | O_WRONLY, 0600);
  if (fd < 0) return false;
  close(fd);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSec);
  for (int r = 0; r < nranks;) {
    if (r == absentRank || access(barrierFile(dir, tag, r).c_str(), F_OK) == 0) {
      r++;
    } else if (std::chrono::steady_clock::now() > deadline) {
      return false;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return true;
}

CoreUse coreUse(ncclComm_t comm, int nranks) {
  CoreUse u;
  cpu_set_t set;
  u.cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  if (plexusCommChannelCount(comm, &u.channels) != ncclSuccess) u.channels = 1;
  u.shared = nranks * u.channels > u.cores;
  return u;
}

int runProcesses(const std::string& name, int nranks, int timeoutSec, int ranksPerNode) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return nranks;
  char dirTemplate[] = "/tmp/plexus-barrier-XXXXXX";
  if (!mkdtemp(dirTemplate)) return nranks;
  const std::string barrierDir = dirTemplate;
  struct Cleanup {
    const std::string& dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{barrierDir};
  std::string idHex = hex(&id, sizeof(id));
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; r++) {
    std::string rank = std::to_string(r), n = std::to_string(nranks);
    const char* argv[] = {"/proc/self/exe", "--plexus-child", name.c_str(), rank.c_str(), n.c_str(), idHex.c_str(),
                          nullptr};
    std::vector<std::string> env;
    for (char** e = environ; *e; e++)
      if (!ranksPerNode || strncmp(*e, "PLEXUS_HOSTID=", 14) != 0) env.push_back(*e);
    if (ranksPerNode) env.push_back("PLEXUS_HOSTID=plexus-test-node" + std::to_string(r / ranksPerNode));
    env.push_back(std::string(kBarrierEnv) + "=" + barrierDir);
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t pid;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, (char* const*)argv, envp.data()) != 0) return nranks;
    pids.push_back(pid);
  }
  int failed = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSec);
  std::vector<bool> done(nranks, false);
  for (int remaining = nranks; remaining > 0;) {
    for (int r = 0; r < nranks; r++) {
      if (done[r]) continue;
      int status;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        done[r] = true;
        remaining--;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
          fprintf(stderr, "process rank %d of scenario %s: %s %d\n", r, name.c_str(),
                  WIFEXITED(status) ? "exit code" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
          failed++;
        }
      }
    }
    if (remaining && std::chrono::steady_clock::now() > deadline) {
      fprintf(stderr, "scenario %s: %d process(es) still running after %d s; killing them\n", name.c_str(), remaining,
              timeoutSec);
      for (int r = 0; r < nranks; r++)
        if (!done[r]) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], nullptr, 0);
          failed++;
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return failed;
}

int maybeRunChild(int argc, char** argv) {
  if (argc < 6 || strcmp(argv[1], "--plexus-child") != 0) return -1;
  auto it = scenarios().find(argv[2]);
  if (it == scenarios().end()) {
    fprintf(stderr, "unknown scenario %s\n", argv[2]);
    return 2;
  }
  int rank = atoi(argv[3]), nranks = atoi(argv[4]);
  ncclUniqueId id;
  unhex(argv[5], &id, sizeof(id));
  long bad = runRank(id, rank, nranks, it->second);
  if (bad != 0) fprintf(stderr, "scenario %s rank %d: %ld problem(s)\n", argv[2], rank, bad);
  return bad == 0 ? 0 : 1;
}

}  // namespace harness
