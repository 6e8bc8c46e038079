// The communicator API: single-thread multi-communicator use, nonblocking init, and bad input.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

static std::string lastError() { return ncclGetLastError(nullptr); }

TEST_CASE("ncclGetVersion and error strings") {
  int v = 0;
  REQUIRE(ncclGetVersion(&v) == ncclSuccess);
  CHECK(v == NCCL_VERSION_CODE);
  CHECK(ncclGetVersion(nullptr) == ncclInvalidArgument);
  CHECK(std::string(ncclGetErrorString(ncclInvalidUsage)).find("invalid usage") != std::string::npos);
  CHECK(std::string(ncclGetErrorString(ncclTimeout)).find("timed out") != std::string::npos);
}

TEST_CASE("ncclCommInitAll: one thread drives four communicators through a group") {
  const int n = 4;
  ncclComm_t comms[n];
  int devs[n] = {3, 2, 1, 0};
  REQUIRE(ncclCommInitAll(comms, n, devs) == ncclSuccess);
  std::vector<cudaStream_t> streams(n);
  std::vector<std::vector<int>> bufs(n, std::vector<int>(1000));
  for (int r = 0; r < n; r++) {
    int rank = -1, count = -1, dev = -1;
    REQUIRE(ncclCommUserRank(comms[r], &rank) == ncclSuccess);
    REQUIRE(ncclCommCount(comms[r], &count) == ncclSuccess);
    REQUIRE(ncclCommCuDevice(comms[r], &dev) == ncclSuccess);
    CHECK(rank == r);
    CHECK(count == n);
    CHECK(dev == devs[r]);
    plexusStreamCreate(&streams[r]);
    for (int i = 0; i < 1000; i++) bufs[r][i] = r * i;
  }
  for (int iter = 0; iter < 3; iter++) {
    REQUIRE(ncclGroupStart() == ncclSuccess);
    for (int r = 0; r < n; r++)
      REQUIRE(ncclAllReduce(bufs[r].data(), bufs[r].data(), 1000, ncclInt32, ncclSum, comms[r], streams[r]) ==
              ncclSuccess);
    REQUIRE(ncclGroupEnd() == ncclSuccess);
  }
  for (int r = 0; r < n; r++) REQUIRE(plexusStreamSynchronize(streams[r]) == ncclSuccess);
  // After 3 rounds every element is sum_r(r*i) * n^2 = 6i * 16.
  long wrong = 0;
  for (int r = 0; r < n; r++)
    for (int i = 0; i < 1000; i++) wrong += bufs[r][i] != 6 * i * 16;
  CHECK(wrong == 0);
  for (int r = 0; r < n; r++) {
    plexusStreamDestroy(streams[r]);
    CHECK(ncclCommDestroy(comms[r]) == ncclSuccess);
  }
}

TEST_CASE("nonblocking init: ncclInProgress, then ncclSuccess through ncclCommGetAsyncError") {
  const int n = 3;
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  std::vector<ncclComm_t> comms(n, nullptr);
  std::vector<ncclResult_t> first(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; r++)
    threads.emplace_back([&, r] {
      plexusSetDevice(r);
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      first[r] = ncclCommInitRankConfig(&comms[r], n, id, r, &config);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; r++) {
    CHECK((first[r] == ncclInProgress || first[r] == ncclSuccess));
    REQUIRE(comms[r] != nullptr);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int r = 0; r < n; r++) {
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
      REQUIRE(ncclCommGetAsyncError(comms[r], &state) == ncclSuccess);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(state == ncclSuccess);
  }
  // Usable afterwards.
  std::vector<float> bufs[n];
  threads.clear();
  std::vector<ncclResult_t> res(n);
  for (int r = 0; r < n; r++) {
    bufs[r].assign(100, 1.0f);
    threads.emplace_back([&, r] {
      plexusSetDevice(r);  // the NULL stream below is this device's default stream
      res[r] = ncclAllReduce(bufs[r].data(), bufs[r].data(), 100, ncclFloat32, ncclSum, comms[r], nullptr);
      if (res[r] == ncclSuccess) res[r] = plexusStreamSynchronize(nullptr);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; r++) {
    CHECK(res[r] == ncclSuccess);
    CHECK(bufs[r][99] == 3.0f);
    CHECK(ncclCommDestroy(comms[r]) == ncclSuccess);
  }
}

TEST_CASE("bad input: every entry point refuses it with a message") {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t comm = nullptr;
  CHECK(ncclGetUniqueId(nullptr) == ncclInvalidArgument);
  CHECK(ncclCommInitRank(nullptr, 1, id, 0) == ncclInvalidArgument);
  CHECK(ncclCommInitRank(&comm, 0, id, 0) == ncclInvalidArgument);
  CHECK(lastError().find("nranks 0") != std::string::npos);
  CHECK(ncclCommInitRank(&comm, -3, id, 0) == ncclInvalidArgument);
  CHECK(ncclCommInitRank(&comm, 2, id, 2) == ncclInvalidArgument);
  CHECK(lastError().find("rank 2 is out of range") != std::string::npos);
  CHECK(ncclCommInitRank(&comm, 2, id, -1) == ncclInvalidArgument);
  ncclUniqueId bogus;
  memset(&bogus, 0, sizeof(bogus));
  CHECK(ncclCommInitRank(&comm, 1, bogus, 0) == ncclInvalidArgument);
  CHECK(lastError().find("unique id") != std::string::npos);
  memset(&bogus, 0x5a, sizeof(bogus));
  CHECK(ncclCommInitRank(&comm, 1, bogus, 0) == ncclInvalidArgument);
  ncclConfig_t badConfig;
  memset(&badConfig, 0, sizeof(badConfig));
  CHECK(ncclCommInitRankConfig(&comm, 1, id, 0, &badConfig) == ncclInvalidArgument);
  CHECK(lastError().find("NCCL_CONFIG_INITIALIZER") != std::string::npos);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 7;
  CHECK(ncclCommInitRankConfig(&comm, 1, id, 0, &config) == ncclInvalidArgument);
  CHECK(ncclCommInitAll(nullptr, 2, nullptr) == ncclInvalidArgument);
  ncclComm_t comms[2];
  CHECK(ncclCommInitAll(comms, 0, nullptr) == ncclInvalidArgument);
  int dup[2] = {1, 1};
  CHECK(ncclCommInitAll(comms, 2, dup) == ncclInvalidUsage);

  // A real one-rank communicator for the per-call checks.
  REQUIRE(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess);
  float buf[4] = {1, 2, 3, 4};
  CHECK(ncclAllReduce(buf, buf, 4, (ncclDataType_t)99, ncclSum, comm, nullptr) == ncclInvalidArgument);
  CHECK(ncclGetLastError(comm) == std::string(ncclGetLastError(comm)));
  CHECK(std::string(ncclGetLastError(comm)).find("datatype 99") != std::string::npos);
  CHECK(ncclAllReduce(buf, buf, 4, ncclFloat32, (ncclRedOp_t)42, comm, nullptr) == ncclInvalidArgument);
  CHECK(ncclAllReduce(nullptr, buf, 4, ncclFloat32, ncclSum, comm, nullptr) == ncclInvalidArgument);
  CHECK(ncclAllReduce(buf, nullptr, 4, ncclFloat32, ncclSum, comm, nullptr) == ncclInvalidArgument);
  CHECK(ncclAllReduce(buf, buf, SIZE_MAX / 2, ncclFloat32, ncclSum, comm, nullptr) == ncclInvalidArgument);
  CHECK(lastError().find("overflows") != std::string::npos);
  CHECK(ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(buf)) ==
        ncclInvalidArgument);
  CHECK(lastError().find("host stream") != std::string::npos);
  CHECK(ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, nullptr, nullptr) == ncclInvalidArgument);
  CHECK(ncclCommCount(comm, nullptr) == ncclInvalidArgument);
  CHECK(ncclCommUserRank(nullptr, nullptr) == ncclInvalidArgument);
  // A refused operation inside a group fails the group, which launches nothing.
  float keep[4] = {1, 2, 3, 4};
  REQUIRE(ncclGroupStart() == ncclSuccess);
  CHECK(ncclAllReduce(keep, keep, 4, ncclFloat32, ncclAvg, comm, nullptr) == ncclSuccess);
  CHECK(ncclAllReduce(keep, keep, 4, ncclFloat32, (ncclRedOp_t)-1, comm, nullptr) == ncclInvalidArgument);
  CHECK(ncclGroupEnd() == ncclInvalidArgument);
  CHECK(ncclGroupEnd() == ncclInvalidUsage);  // unbalanced
  REQUIRE(plexusStreamSynchronize(nullptr) == ncclSuccess);
  CHECK(keep[3] == 4.0f);
  REQUIRE(ncclCommDestroy(comm) == ncclSuccess);
  // A destroyed communicator is no longer accepted.
  int count;
  CHECK(ncclCommCount(comm, &count) == ncclInvalidArgument);
  CHECK(lastError().find("not a communicator") != std::string::npos);
  CHECK(ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, comm, nullptr) == ncclInvalidArgument);
  // Nor by the collectives that read its rank (rooted) or its size (counts per rank) for their checks.
  CHECK(ncclBroadcast(buf, buf, 4, ncclFloat32, 0, comm, nullptr) == ncclInvalidArgument);
  CHECK(ncclReduce(buf, buf, 4, ncclFloat32, ncclSum, 0, comm, nullptr) == ncclInvalidArgument);
  CHECK(ncclAllGather(buf, buf, 1, ncclFloat32, comm, nullptr) == ncclInvalidArgument);
  CHECK(lastError().find("not a communicator") != std::string::npos);
  CHECK(ncclCommDestroy(nullptr) == ncclSuccess);
  // Two ranks: a root's missing buffer is refused, and a count per rank whose total overflows the address space though
  // one rank's part does not. Nothing is enqueued, so the other rank need not take part.
  ncclComm_t two[2];
  int devs[2] = {0, 1};
  REQUIRE(ncclCommInitAll(two, 2, devs) == ncclSuccess);
  CHECK(ncclBroadcast(nullptr, buf, 4, ncclFloat32, 0, two[0], nullptr) == ncclInvalidArgument);
  CHECK(lastError().find("sendbuff is NULL") != std::string::npos);
  CHECK(ncclReduce(buf, nullptr, 4, ncclFloat32, ncclSum, 1, two[1], nullptr) == ncclInvalidArgument);
  CHECK(lastError().find("recvbuff is NULL") != std::string::npos);
  const size_t half = SIZE_MAX / sizeof(float) / 2 + 1;  // half * 4 bytes fits, twice that does not
  CHECK(ncclAllGather(buf, buf, half, ncclFloat32, two[0], nullptr) == ncclInvalidArgument);
  CHECK(lastError().find("overflows") != std::string::npos);
  CHECK(ncclReduceScatter(buf, buf, half, ncclFloat32, ncclSum, two[0], nullptr) == ncclInvalidArgument);
  CHECK(ncclAlltoAll(buf, buf + 2, half, ncclFloat32, two[0], nullptr) == ncclInvalidArgument);
  CHECK(lastError().find("overflows") != std::string::npos);
  for (ncclComm_t c : two) REQUIRE(ncclCommDestroy(c) == ncclSuccess);
}

TEST_CASE("a root that cannot be reached fails init with ncclSystemError naming the address, in bounded time") {
  setenv("NCCL_COMM_ID", "127.0.0.1:1", 1);  // port 1: nothing listens there
  setenv("PLEXUS_BOOTSTRAP_TIMEOUT", "2", 1);
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  unsetenv("NCCL_COMM_ID");
  ncclComm_t comm = nullptr;
  auto t0 = std::chrono::steady_clock::now();
  plexusSetDevice(1);
  ncclResult_t r = ncclCommInitRank(&comm, 2, id, 1);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  setenv("PLEXUS_BOOTSTRAP_TIMEOUT", "60", 1);
  CHECK(r == ncclSystemError);
  CHECK(comm == nullptr);
  CHECK_MESSAGE(lastError().find("127.0.0.1:1") != std::string::npos, lastError());
  CHECK(secs < 10.0);
}

TEST_CASE("a transport that reports more LL slots than its buffer holds is refused at init, naming it") {
  // bad-transport (tests/plugins) with one defect: its connectors report twice the LL slots the core asked for.
  const std::string plugin =
      std::string(PLEXUS_TEST_LIB_DIR) + "/../test-plugins/bad-transports/libplexus-bad-transport-ll_slots.so";
  setenv("PLEXUS_TRANSPORT_PLUGIN", plugin.c_str(), 1);
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclResult_t result[2];
  std::string why[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; r++)
    ranks.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      result[r] = ncclCommInitRank(&comm, 2, id, r);
      why[r] = ncclGetLastError(nullptr);
      if (result[r] == ncclSuccess) ncclCommDestroy(comm);
    });
  for (auto& t : ranks) t.join();
  unsetenv("PLEXUS_TRANSPORT_PLUGIN");
  for (int r = 0; r < 2; r++) {
    CAPTURE(r);
    CHECK(result[r] == ncclInternalError);
    CHECK_MESSAGE(why[r].find("transport bad-transport reported 128 LL slots") != std::string::npos, why[r]);
    CHECK_MESSAGE(why[r].find("power of two from 8 to the 64 slots") != std::string::npos, why[r]);
  }
}
