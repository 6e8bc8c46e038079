// What goes wrong across nodes ends in an error, never a hang: a peer that dies mid-collective (reached
// over the network), a plugin that never completes a send (PLEXUS_NET_TIMEOUT), a plugin whose isend
// fails. Each survivor's operation fails within a bound, with a message naming the peer rank, the plugin
// and its device.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness.h"
#include "matrix.h"
#include "nets.h"

namespace {

// Every rank but `victim` runs AllReduces until one fails; the victim exits abruptly after the first.
// The survivors must see an error that names the victim, within the bound the test gives.
long survive(int rank, int nranks, ncclComm_t comm, cudaStream_t stream, int victim, const char* expect) {
  std::vector<float> buf(1 << 18, 1.0f);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; i++) {
    if (rank == victim && i == 1) _exit(0);  // no destroy, no goodbye: as a crashed process
    ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, stream);
    if (r == ncclSuccess) r = plexusStreamSynchronize(stream);
    if (r == ncclSuccess) continue;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string e = ncclGetLastError(comm);
    long bad = 0;
    if (e.find(expect) == std::string::npos) {
      fprintf(stderr, "rank %d: the error does not say \"%s\": %s\n", rank, expect, e.c_str());
      bad++;
    }
    if (secs > 30) {
      fprintf(stderr, "rank %d: the error took %.1f s\n", rank, secs);
      bad++;
    }
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    if (async == ncclSuccess) {
      fprintf(stderr, "rank %d: ncclCommGetAsyncError reports no error after: %s\n", rank, e.c_str());
      bad++;
    }
    fprintf(stderr, "rank %d: failed as expected after %.2f s: %s\n", rank, secs, e.c_str());
    ncclCommAbort(comm);  // the harness's destroy then finds it gone: exit here
    _exit(bad ? 1 : 0);
  }
  fprintf(stderr, "rank %d: 1000 AllReduces succeeded; expected a failure\n", rank);
  return 1;
}

const harness::Scenario kPeerDies("net-peer-dies", [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  return survive(rank, nranks, comm, stream, nranks - 1, ("rank " + std::to_string(nranks - 1)).c_str());
});
const harness::Scenario kPluginStuck("net-plugin-stuck", [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  return survive(rank, nranks, comm, stream, -1, "net plugin defective");
});

// A message each way, which the defective plugin's isend fails.
const harness::Scenario kIsendFails("net-isend-fails", [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  int out = rank, in = -1;
  const int peer = 1 - rank;
  ncclGroupStart();
  ncclSend(&out, 1, ncclInt32, peer, comm, stream);
  ncclRecv(&in, 1, ncclInt32, peer, comm, stream);
  ncclResult_t r = ncclGroupEnd();
  if (r == ncclSuccess) r = plexusStreamSynchronize(stream);
  const std::string e = ncclGetLastError(comm);
  const bool ok = r != ncclSuccess && e.find("isend failed with unhandled system error") != std::string::npos &&
                  e.find("net plugin defective") != std::string::npos;
  if (!ok) fprintf(stderr, "rank %d: %d \"%s\"\n", rank, (int)r, e.c_str());
  // Leaving at once could make the peer see this rank go before its own isend fails.
  if (!harness::processBarrier(rank, nranks, "errors-seen")) fprintf(stderr, "rank %d: peer never reached the barrier\n", rank);
  ncclCommAbort(comm);
  _exit(ok ? 0 : 1);
  return 0L;
});

}  // namespace

TEST_CASE("net errors: a rank that dies mid-collective fails the others' operations, naming it") {
  matrix::ScopedEnv env;
  env.set("NCCL_NET_PLUGIN", "none");
  env.set("PLEXUS_TIMEOUT", "60");  // a backstop: the test wants the network's own error, far sooner
  CHECK(harness::runProcesses("net-peer-dies", 2, 120, 1) == 0);
}

TEST_CASE("net errors: a plugin that never completes a send fails the operation after PLEXUS_NET_TIMEOUT") {
  matrix::ScopedEnv env;
  env.set("NCCL_NET_PLUGIN", nets::testPlugin("defective").c_str());
  env.set("NETCHECK_DEFECT", "never-done");
  env.set("PLEXUS_NET_TIMEOUT", "2");
  CHECK(harness::runProcesses("net-plugin-stuck", 2, 120, 1) == 0);
}

TEST_CASE("net errors: a plugin that gives NULL requests for ever fails the operation after PLEXUS_NET_TIMEOUT") {
  matrix::ScopedEnv env;
  env.set("NCCL_NET_PLUGIN", nets::testPlugin("defective").c_str());
  env.set("NETCHECK_DEFECT", "null-forever");
  env.set("PLEXUS_NET_TIMEOUT", "2");
  CHECK(harness::runProcesses("net-plugin-stuck", 2, 120, 1) == 0);
}

TEST_CASE("net errors: a plugin whose isend fails fails the operation, naming plugin, device and peer") {
  matrix::ScopedEnv env;
  env.set("NCCL_NET_PLUGIN", nets::testPlugin("defective").c_str());
  env.set("NETCHECK_DEFECT", "send-error");
  env.set("PLEXUS_TIMEOUT", "60");
  CHECK(harness::runProcesses("net-isend-fails", 2, 120, 1) == 0);
}

// Init, not only operations, is bounded by PLEXUS_TIMEOUT: rank 1's connect never completes (it waits, then
// fails), so rank 0's accept, which blocks in this plugin, never returns. Rank 0 still fails init in time,
// naming the peer and the connection it waited on.
TEST_CASE("net errors: a peer that never connects fails init after PLEXUS_TIMEOUT, naming it, though accept blocks") {
  matrix::ScopedEnv env;
  env.set("NCCL_NET_PLUGIN", nets::testPlugin("field-v6").c_str());
  env.set("FIELD_QUIRKS", "blocking-accept,hang-connect-node1");
  env.set("FIELD_HANG_SECONDS", "8");
  env.set("PLEXUS_TIMEOUT", "2");
  env.set("PLEXUS_BOOTSTRAP_TIMEOUT", nullptr);  // the tests' default (60) would win over PLEXUS_TIMEOUT
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  std::vector<pid_t> kids;
  for (int r = 0; r < 2; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(60);  // bounded, whatever happens
      setenv("PLEXUS_HOSTID", r ? "plexus-test-node1" : "plexus-test-node0", 1);
      plexusSetDevice(r);
      ncclComm_t comm;
      const auto t0 = std::chrono::steady_clock::now();
      const ncclResult_t e = ncclCommInitRank(&comm, 2, id, r);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const std::string why = ncclGetLastError(nullptr);
      bool ok = e != ncclSuccess;
      if (r == 0) ok = ok && secs < 6 && why.find("recv from 1") != std::string::npos &&
                       why.find("PLEXUS_TIMEOUT") != std::string::npos;
      if (!ok) fprintf(stderr, "rank %d: init gave %s after %.1f s: %s\n", r, ncclGetErrorString(e), secs, why.c_str());
      _exit(ok ? 0 : 1);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
}
