// Communicators made from communicators and the rest of the communicator API: ncclCommSplit,
// ncclCommInitRankScalable, ncclCommShrink, ncclCommRevoke, ncclMemAlloc/ncclMemFree, buffer and window
// registration, ncclGroupSimulateEnd. Ranks are threads of this process.
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "count.h"
#include "harness.h"
#include "settle.h"

namespace {

std::string lastError(ncclComm_t comm = nullptr) { return ncclGetLastError(comm); }

// An in-place sum of one int per element, checked: every element must be `expect`.
long allReduceCheck(ncclComm_t comm, cudaStream_t stream, int value, int expect, size_t count = 1000) {
  std::vector<int> buf(count, value);
  CHECK_NCCL(ncclAllReduce(buf.data(), buf.data(), count, ncclInt32, ncclSum, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  long wrong = 0;
  for (int v : buf) wrong += v != expect;
  return wrong;
}

ncclResult_t settle(ncclComm_t comm) { return testenv::settle(comm, 60); }

long commShape(ncclComm_t comm, int wantRank, int wantCount) {
  int rank = -1, count = -1;
  CHECK_NCCL(ncclCommUserRank(comm, &rank));
  CHECK_NCCL(ncclCommCount(comm, &count));
  if (rank != wantRank || count != wantCount) {
    fprintf(stderr, "communicator %p: rank %d of %d, expected %d of %d\n", (void*)comm, rank, count, wantRank,
            wantCount);
    return 1;
  }
  return 0;
}

}  // namespace

TEST_CASE("ncclCommSplit: colors and reversed keys, NCCL_SPLIT_NOCOLOR, config inheritance") {
  CHECK(harness::runThreads(4, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          long bad = 0;
          // Two colors (rank parity), keys reversed: color 0 is {2, 0}, color 1 is {3, 1}.
          ncclComm_t child = nullptr;
          CHECK_NCCL(ncclCommSplit(comm, rank % 2, -rank, &child, nullptr));
          if (!child) return 1L;
          bad += commShape(child, rank >= 2 ? 0 : 1, 2);
          // Per color: (1 + 3) for ranks 0 and 2, (2 + 4) for ranks 1 and 3.
          bad += allReduceCheck(child, stream, rank + 1, rank % 2 ? 6 : 4);
          // The parent still works, and the child is independent of it.
          bad += allReduceCheck(comm, stream, rank, 0 + 1 + 2 + 3);
          CHECK_NCCL(ncclCommDestroy(child));

          // The last rank opts out: NULL for it, three ranks in the parent's order for the others.
          child = reinterpret_cast<ncclComm_t>(0x1);
          CHECK_NCCL(ncclCommSplit(comm, rank == 3 ? NCCL_SPLIT_NOCOLOR : 7, 0, &child, nullptr));
          if (rank == 3) {
            bad += child != nullptr;
          } else {
            if (!child) return bad + 1;
            bad += commShape(child, rank, 3);
            bad += allReduceCheck(child, stream, 1, 3);
            CHECK_NCCL(ncclCommDestroy(child));
          }

          // Bad input: every rank refuses it alike, so nobody waits in the exchange.
          ncclConfig_t bad1 = NCCL_CONFIG_INITIALIZER;
          bad1.magic = 0;
          child = reinterpret_cast<ncclComm_t>(0x1);
          bad += ncclCommSplit(comm, 0, 0, &child, &bad1) != ncclInvalidArgument;
          bad += child != nullptr;
          bad += ncclCommSplit(comm, 0, 0, nullptr, nullptr) != ncclInvalidArgument;
          bad += ncclCommSplit(nullptr, 0, 0, &child, nullptr) != ncclInvalidArgument;
          (void)nranks;
          return bad;
        }) == 0);
}

TEST_CASE("ncclCommSplit: a nonblocking parent's child inherits blocking=0, a config overrides it") {
  const int n = 3;
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  std::vector<long> bad(n, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; r++)
    threads.emplace_back([&, r] {
      plexusSetDevice(r);
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      ncclComm_t parent = nullptr;
      ncclResult_t res = ncclCommInitRankConfig(&parent, n, id, r, &config);
      if ((res != ncclInProgress && res != ncclSuccess) || settle(parent) != ncclSuccess) {
        bad[r] += 1000;
        return;
      }
      cudaStream_t stream;
      plexusStreamCreate(&stream);
      ncclComm_t child = nullptr;
      res = ncclCommSplit(parent, 0, r, &child, nullptr);
      bad[r] += res != ncclInProgress;  // inherited: nonblocking
      bad[r] += child == nullptr || settle(child) != ncclSuccess;
      if (child) {
        bad[r] += commShape(child, r, n);
        bad[r] += allReduceCheck(child, stream, 2, 2 * n);
        ncclCommDestroy(child);
      }
      ncclConfig_t blocking = NCCL_CONFIG_INITIALIZER;
      blocking.blocking = 1;
      child = nullptr;
      bad[r] += ncclCommSplit(parent, 0, -r, &child, &blocking) != ncclSuccess;
      if (child) {
        bad[r] += commShape(child, n - 1 - r, n);
        bad[r] += allReduceCheck(child, stream, 1, n);
        ncclCommDestroy(child);
      }
      plexusStreamDestroy(stream);
      bad[r] += ncclCommDestroy(parent) != ncclSuccess;
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; r++) CHECK(bad[r] == 0);
}

TEST_CASE("ncclCommSplit: one thread splits four communicators inside a group") {
  const int n = 4;
  ncclComm_t comms[n];
  REQUIRE(ncclCommInitAll(comms, n, nullptr) == ncclSuccess);
  std::vector<cudaStream_t> streams(n);
  for (int r = 0; r < n; r++) plexusStreamCreate(&streams[r]);
  // Ranks 0, 1 -> color 0; rank 2 -> color 1 alone; rank 3 opts out.
  ncclComm_t child[n];
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < n; r++)
    CHECK(ncclCommSplit(comms[r], r == 3 ? NCCL_SPLIT_NOCOLOR : r / 2, r, &child[r], nullptr) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  CHECK(child[3] == nullptr);
  int wantRank[3] = {0, 1, 0}, wantCount[3] = {2, 2, 1};
  for (int r = 0; r < 3; r++) {
    REQUIRE(child[r] != nullptr);
    int rank = -1, count = -1;
    CHECK(ncclCommUserRank(child[r], &rank) == ncclSuccess);
    CHECK(ncclCommCount(child[r], &count) == ncclSuccess);
    CHECK(rank == wantRank[r]);
    CHECK(count == wantCount[r]);
  }
  std::vector<std::vector<int>> bufs(3, std::vector<int>(4096));
  for (int r = 0; r < 3; r++)
    for (int i = 0; i < 4096; i++) bufs[r][i] = (r + 1) * i;
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < 3; r++)
    CHECK(ncclAllReduce(bufs[r].data(), bufs[r].data(), 4096, ncclInt32, ncclSum, child[r], streams[r]) ==
          ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  long wrong = 0;
  for (int r = 0; r < 3; r++) {
    REQUIRE(plexusStreamSynchronize(streams[r]) == ncclSuccess);
    const int factor = r < 2 ? 1 + 2 : 3;  // color 0: ranks 0 and 1; color 1: rank 2 alone
    for (int i = 0; i < 4096; i++) wrong += bufs[r][i] != factor * i;
  }
  CHECK(wrong == 0);
  for (int r = 0; r < 3; r++) CHECK(ncclCommDestroy(child[r]) == ncclSuccess);

  // Nonblocking children from one thread: the group ends once the exchange is done, then they settle.
  ncclConfig_t nonblocking = NCCL_CONFIG_INITIALIZER;
  nonblocking.blocking = 0;
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < n; r++) {
    ncclResult_t res = ncclCommSplit(comms[r], 0, n - r, &child[r], &nonblocking);
    CHECK((res == ncclInProgress || res == ncclSuccess));
  }
  ncclResult_t end = ncclGroupEnd();
  CHECK((end == ncclSuccess || end == ncclInProgress));
  for (int r = 0; r < n; r++) {
    REQUIRE(child[r] != nullptr);
    CHECK(settle(child[r]) == ncclSuccess);
    int rank = -1;
    CHECK(ncclCommUserRank(child[r], &rank) == ncclSuccess);
    CHECK(rank == n - 1 - r);
  }
  std::vector<std::vector<int>> ones(n, std::vector<int>(100, 1));
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < n; r++)
    ncclAllReduce(ones[r].data(), ones[r].data(), 100, ncclInt32, ncclSum, child[r], streams[r]);
  end = ncclGroupEnd();
  CHECK((end == ncclSuccess || end == ncclInProgress));
  for (int r = 0; r < n; r++) {
    REQUIRE(plexusStreamSynchronize(streams[r]) == ncclSuccess);
    CHECK(ones[r][99] == n);
    CHECK(ncclCommDestroy(child[r]) == ncclSuccess);
  }

  // A refused split fails the group too, and nothing is created.
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < n; r++) {
    child[r] = reinterpret_cast<ncclComm_t>(0x1);
    CHECK(ncclCommSplit(comms[r], 0, r, &child[r], &bad) == ncclInvalidArgument);
    CHECK(child[r] == nullptr);
  }
  CHECK(ncclGroupEnd() == ncclInvalidArgument);
  for (int r = 0; r < n; r++) {
    plexusStreamDestroy(streams[r]);
    CHECK(ncclCommDestroy(comms[r]) == ncclSuccess);
  }
}

TEST_CASE("ncclCommInitRankScalable: several roots, each serving a block of ranks") {
  struct Shape {
    int nranks, nId;
  };
  for (Shape s : {Shape{4, 1}, Shape{5, 2}, Shape{7, 3}, Shape{4, 4}}) {
    CAPTURE(s.nranks);
    CAPTURE(s.nId);
    std::vector<ncclUniqueId> ids(s.nId);
    for (auto& id : ids) REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
    std::vector<long> bad(s.nranks, 0);
    std::vector<std::thread> threads;
    for (int r = 0; r < s.nranks; r++)
      threads.emplace_back([&, r] {
        plexusSetDevice(r);
        ncclComm_t comm = nullptr;
        ncclResult_t res = ncclCommInitRankScalable(&comm, s.nranks, r, s.nId, ids.data(), nullptr);
        if (res != ncclSuccess) {
          fprintf(stderr, "rank %d: %s (%s)\n", r, ncclGetErrorString(res), lastError().c_str());
          bad[r] = 1000;
          return;
        }
        cudaStream_t stream;
        plexusStreamCreate(&stream);
        bad[r] += commShape(comm, r, s.nranks);
        bad[r] += allReduceCheck(comm, stream, r, s.nranks * (s.nranks - 1) / 2, 3000);
        plexusStreamDestroy(stream);
        bad[r] += ncclCommDestroy(comm) != ncclSuccess;
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < s.nranks; r++) CHECK(bad[r] == 0);
  }
}

TEST_CASE("ncclCommInitRankScalable: bad input, and every id's root is really used") {
  ncclUniqueId ids[2];
  REQUIRE(ncclGetUniqueId(&ids[0]) == ncclSuccess);
  REQUIRE(ncclGetUniqueId(&ids[1]) == ncclSuccess);
  ncclComm_t comm = reinterpret_cast<ncclComm_t>(0x1);
  CHECK(ncclCommInitRankScalable(nullptr, 2, 0, 2, ids, nullptr) == ncclInvalidArgument);
  CHECK(ncclCommInitRankScalable(&comm, 1, 3, 1, ids, nullptr) == ncclInvalidArgument);
  CHECK(comm == nullptr);
  CHECK(ncclCommInitRankScalable(&comm, 2, 0, 0, ids, nullptr) == ncclInvalidArgument);
  CHECK(lastError().find("nId 0") != std::string::npos);
  CHECK(ncclCommInitRankScalable(&comm, 2, 0, 3, ids, nullptr) == ncclInvalidArgument);
  CHECK(ncclCommInitRankScalable(&comm, 2, 0, 2, nullptr, nullptr) == ncclInvalidArgument);
  ncclUniqueId twice[2] = {ids[0], ids[0]};
  CHECK(ncclCommInitRankScalable(&comm, 2, 0, 2, twice, nullptr) == ncclInvalidArgument);
  CHECK(lastError().find("same id") != std::string::npos);
  ncclUniqueId bogus[2] = {ids[0], ids[1]};
  memset(&bogus[1], 0x5a, sizeof(bogus[1]));
  CHECK(ncclCommInitRankScalable(&comm, 2, 0, 2, bogus, nullptr) == ncclInvalidArgument);
  CHECK(lastError().find("commIds[1]") != std::string::npos);
  ncclConfig_t badConfig = NCCL_CONFIG_INITIALIZER;
  badConfig.blocking = 3;
  CHECK(ncclCommInitRankScalable(&comm, 2, 0, 2, ids, &badConfig) == ncclInvalidArgument);

  // A second id whose root nobody serves (a well-formed id for a port where nothing listens): the ranks
  // cannot come up, so the second root is really asked. With the first id alone they would.
  setenv("NCCL_COMM_ID", "127.0.0.1:1", 1);
  setenv("PLEXUS_BOOTSTRAP_TIMEOUT", "2", 1);
  ncclUniqueId dead[2];
  dead[0] = ids[0];
  REQUIRE(ncclGetUniqueId(&dead[1]) == ncclSuccess);
  unsetenv("NCCL_COMM_ID");
  std::vector<ncclResult_t> res(2, ncclSuccess);
  std::vector<std::string> why(2);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; r++)
    threads.emplace_back([&, r] {
      plexusSetDevice(r);
      ncclComm_t c = nullptr;
      res[r] = ncclCommInitRankScalable(&c, 2, r, 2, dead, nullptr);
      why[r] = lastError();
      if (c) ncclCommDestroy(c);
    });
  for (auto& t : threads) t.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  setenv("PLEXUS_BOOTSTRAP_TIMEOUT", "60", 1);
  for (int r = 0; r < 2; r++) {
    CAPTURE(why[r]);
    CHECK(res[r] == ncclSystemError);
  }
  CHECK_MESSAGE(why[1].find("127.0.0.1:1") != std::string::npos, why[1]);
  CHECK(secs < 10.0);
}

// True once the communicator's hang report shows an AllReduce waiting on a peer: the operation is in flight,
// so what the test does next (shrink, revoke) meets it there. False after 30 s.
static bool waitingInAllReduce(ncclComm_t comm) {
  char report[16384] = "";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (plexusCommHangReport(comm, report, sizeof report) == ncclSuccess && strstr(report, "running AllReduce") &&
        strstr(report, "waiting"))
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  fprintf(stderr, "the AllReduce never showed as waiting in the hang report:\n%s\n", report);
  return false;
}

// True once count reaches n (the other ranks got that far); false after 60 s, where one of them failed before it.
static bool waitForCount(testenv::Count& count, int n, const char* what) {
  if (count.waitFor(n, std::chrono::seconds(60))) return true;
  fprintf(stderr, "%s: %d of %d after 60 s\n", what, count.value(), n);
  return false;
}

TEST_CASE("ncclCommShrink: survivors renumbered, NCCL_SHRINK_ABORT stops what is stuck on the parent") {
  // Rank 1 leaves: 0, 2, 3 become 0, 1, 2. Rank 1 does not call.
  CHECK(harness::runThreads(4, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          if (rank == 1) return 0L;
          long bad = 0;
          int excl[1] = {1};
          ncclComm_t child = nullptr;
          CHECK_NCCL(ncclCommShrink(comm, excl, 1, &child, nullptr, NCCL_SHRINK_DEFAULT));
          if (!child) return 1L;
          bad += commShape(child, rank == 0 ? 0 : rank - 1, nranks - 1);
          bad += allReduceCheck(child, stream, rank, 0 + 2 + 3);
          CHECK_NCCL(ncclCommDestroy(child));
          // Bad lists: refused before anything is exchanged.
          int self[1] = {rank};
          int dup[2] = {1, 1};
          int range[1] = {nranks};
          bad += ncclCommShrink(comm, self, 1, &child, nullptr, 0) != ncclInvalidArgument;
          bad += lastError(comm).find("excludes itself") == std::string::npos;
          bad += ncclCommShrink(comm, dup, 2, &child, nullptr, 0) != ncclInvalidArgument;
          bad += ncclCommShrink(comm, range, 1, &child, nullptr, 0) != ncclInvalidArgument;
          bad += ncclCommShrink(comm, excl, 0, &child, nullptr, 0) != ncclInvalidArgument;
          bad += ncclCommShrink(comm, nullptr, 1, &child, nullptr, 0) != ncclInvalidArgument;
          bad += ncclCommShrink(comm, excl, 1, nullptr, nullptr, 0) != ncclInvalidArgument;
          bad += ncclCommShrink(comm, excl, 1, &child, nullptr, 4) != ncclInvalidArgument;
          return bad;
        }) == 0);

  // Rank 3 "fails": the others start an AllReduce it never joins, then shrink with NCCL_SHRINK_ABORT.
  testenv::Count done;
  CHECK(harness::runThreads(4, [&done](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          if (rank == 3) {
            return waitForCount(done, 3, "survivors that shrank") ? 0L : 1L;
          }
          long bad = 0;
          std::vector<int> stuck(1 << 16, 1);
          CHECK_NCCL(ncclAllReduce(stuck.data(), stuck.data(), stuck.size(), ncclInt32, ncclSum, comm, stream));
          if (!waitingInAllReduce(comm)) return 1L;
          int excl[1] = {3};
          ncclComm_t child = nullptr;
          auto t0 = std::chrono::steady_clock::now();
          CHECK_NCCL(ncclCommShrink(comm, excl, 1, &child, nullptr, NCCL_SHRINK_ABORT));
          bad += std::chrono::steady_clock::now() - t0 > std::chrono::seconds(10);
          plexusStreamSynchronize(stream);  // the aborted AllReduce's error
          if (!child) return bad + 1;
          bad += commShape(child, rank, nranks - 1);
          bad += allReduceCheck(child, stream, rank + 1, 1 + 2 + 3);
          CHECK_NCCL(ncclCommDestroy(child));
          // The aborted parent refuses new work and is still destroyable (by the harness).
          std::vector<int> more(4);
          bad += ncclAllReduce(more.data(), more.data(), 4, ncclInt32, ncclSum, comm, stream) != ncclInvalidUsage;
          done.add();
          return bad;
        }) == 0);
}

TEST_CASE("ncclCommRevoke: stops what is in flight, refuses new work, leaves split and destroy") {
  CHECK(ncclCommRevoke(nullptr, 0) == ncclSuccess);
  testenv::Count revoked;
  CHECK(harness::runThreads(2, [&revoked](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          long bad = 0;
          bad += ncclCommRevoke(comm, 1) != ncclInvalidArgument;
          std::vector<int> buf(1 << 16, 1);
          if (rank == 0) {
            // Rank 1 never joins this one: only the revoke lets it end.
            CHECK_NCCL(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, comm, stream));
            if (!waitingInAllReduce(comm)) return 1L;
          }
          auto t0 = std::chrono::steady_clock::now();
          CHECK_NCCL(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
          bad += std::chrono::steady_clock::now() - t0 > std::chrono::seconds(10);
          revoked.add();
          plexusStreamSynchronize(stream);
          ncclResult_t state = ncclInternalError;
          CHECK_NCCL(ncclCommGetAsyncError(comm, &state));
          bad += state != ncclSuccess;
          bad += ncclAllReduce(buf.data(), buf.data(), 16, ncclInt32, ncclSum, comm, stream) != ncclInvalidUsage;
          bad += lastError(comm).find("revoked") == std::string::npos;
          bad += ncclSend(buf.data(), 16, ncclInt32, 1 - rank, comm, stream) != ncclInvalidUsage;
          bad += ncclCommRevoke(comm, 0) != ncclInvalidArgument;
          // Inside a group the refusal fails the group.
          CHECK_NCCL(ncclGroupStart());
          bad += ncclAllReduce(buf.data(), buf.data(), 16, ncclInt32, ncclSum, comm, stream) != ncclInvalidUsage;
          bad += ncclGroupEnd() != ncclInvalidUsage;
          // Both ranks revoked: the parent's bootstrap still serves a split, and the child works.
          if (!waitForCount(revoked, 2, "ranks that revoked")) return bad + 1;
          ncclComm_t child = nullptr;
          CHECK_NCCL(ncclCommSplit(comm, 0, rank, &child, nullptr));
          if (!child) return bad + 1;
          bad += allReduceCheck(child, stream, rank + 1, 3);
          CHECK_NCCL(ncclCommDestroy(child));
          // And a shrink (of a 2-rank communicator, rank 1 leaves).
          if (rank == 0) {
            int excl[1] = {1};
            CHECK_NCCL(ncclCommShrink(comm, excl, 1, &child, nullptr, NCCL_SHRINK_DEFAULT));
            bad += commShape(child, 0, 1);
            CHECK_NCCL(ncclCommDestroy(child));
          }
          (void)nranks;
          return bad;
        }) == 0);
}

TEST_CASE("ncclMemAlloc / ncclMemFree: page-aligned shared memory, and bad pointers") {
  void* p = reinterpret_cast<void*>(0x1);
  REQUIRE(ncclMemAlloc(&p, 10000) == ncclSuccess);
  REQUIRE(p != nullptr);
  CHECK((uintptr_t)p % 4096 == 0);
  memset(p, 0xab, 10000);
  CHECK(((unsigned char*)p)[9999] == 0xab);
  // Shareable with other processes: a shared mapping of a memfd.
  std::ifstream maps("/proc/self/maps");
  char addr[32];
  snprintf(addr, sizeof(addr), "%lx-", (unsigned long)(uintptr_t)p);
  bool found = false;
  for (std::string line; std::getline(maps, line);)
    if (line.rfind(addr, 0) == 0) {
      found = true;
      CHECK_MESSAGE(line.find("rw-s") != std::string::npos, line);
      CHECK_MESSAGE(line.find("memfd:") != std::string::npos, line);
    }
  CHECK(found);
  CHECK(ncclMemFree((char*)p + 8) == ncclInvalidArgument);
  CHECK(lastError().find("ncclMemAlloc") != std::string::npos);
  CHECK(ncclMemFree(p) == ncclSuccess);
  CHECK(ncclMemFree(p) == ncclInvalidArgument);  // twice
  int local;
  CHECK(ncclMemFree(&local) == ncclInvalidArgument);
  CHECK(ncclMemFree(nullptr) == ncclSuccess);
  CHECK(ncclMemAlloc(nullptr, 16) == ncclInvalidArgument);
  p = reinterpret_cast<void*>(0x1);
  CHECK(ncclMemAlloc(&p, 0) == ncclSuccess);  // as cudaMalloc: nothing, and NULL
  CHECK(p == nullptr);
  CHECK(pncclMemAlloc(&p, 1) == ncclSuccess);
  CHECK(pncclMemFree(p) == ncclSuccess);
}

TEST_CASE("ncclCommRegister and ncclCommWindowRegister: records, and their bad inputs") {
  ncclComm_t comms[2];
  REQUIRE(ncclCommInitAll(comms, 2, nullptr) == ncclSuccess);
  ncclComm_t comm = comms[0];
  std::vector<char> heap(3 * 4096);
  void* h1 = nullptr;
  void* h2 = nullptr;
  REQUIRE(ncclCommRegister(comm, heap.data(), heap.size(), &h1) == ncclSuccess);
  CHECK(h1 != nullptr);
  // Inside a registered range: the same record, counted.
  REQUIRE(ncclCommRegister(comm, heap.data() + 100, 200, &h2) == ncclSuccess);
  CHECK(h2 == h1);
  CHECK(ncclCommDeregister(comm, h1) == ncclSuccess);
  CHECK(ncclCommDeregister(comm, h2) == ncclSuccess);
  CHECK(ncclCommDeregister(comm, h1) == ncclInvalidUsage);  // as NCCL: a handle it does not hold
  CHECK(std::string(ncclGetLastError(comm)).find("not a registration") != std::string::npos);
  CHECK(ncclCommDeregister(comm, nullptr) == ncclSuccess);  // as NCCL
  void* h = nullptr;
  CHECK(ncclCommRegister(comm, heap.data(), heap.size(), nullptr) == ncclInvalidArgument);
  CHECK(ncclCommRegister(comm, nullptr, 16, &h) == ncclInvalidArgument);
  CHECK(ncclCommRegister(comm, heap.data(), 0, &h) == ncclInvalidArgument);
  CHECK(ncclCommRegister(nullptr, heap.data(), 16, &h) == ncclInvalidArgument);
  CHECK(ncclCommDeregister(nullptr, h1) == ncclInvalidArgument);
  // A handle of another communicator.
  REQUIRE(ncclCommRegister(comms[1], heap.data(), 64, &h) == ncclSuccess);
  CHECK(ncclCommDeregister(comm, h) == ncclInvalidUsage);
  CHECK(ncclCommDeregister(comms[1], h) == ncclSuccess);

  void* mem = nullptr;
  REQUIRE(ncclMemAlloc(&mem, 1 << 16) == ncclSuccess);
  ncclWindow_t win = nullptr, win2 = nullptr;
  REQUIRE(ncclCommWindowRegister(comm, mem, 1 << 16, &win, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess);
  CHECK(win != nullptr);
  REQUIRE(ncclCommRegister(comm, mem, 1 << 16, &h) == ncclSuccess);  // registration of ncclMemAlloc memory
  // Symmetric windows need NCCL_WIN_REQUIRED_ALIGNMENT; plain ones do not.
  CHECK(ncclCommWindowRegister(comm, (char*)mem + 8, 64, &win2, NCCL_WIN_COLL_SYMMETRIC) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(comm)).find("NCCL_WIN_REQUIRED_ALIGNMENT") != std::string::npos);
  CHECK(win2 == nullptr);
  REQUIRE(ncclCommWindowRegister(comm, heap.data() + 8, 64, &win2, NCCL_WIN_DEFAULT) == ncclSuccess);
  CHECK(win2 != nullptr);
  CHECK(win2 != win);
  CHECK(ncclCommWindowRegister(comm, mem, 64, nullptr, 0) == ncclInvalidArgument);
  CHECK(ncclCommWindowRegister(nullptr, mem, 64, &win2, 0) == ncclInvalidArgument);
  CHECK(ncclCommWindowRegister(comm, nullptr, 64, &win2, 0) == ncclInvalidArgument);
  CHECK(ncclCommWindowRegister(comm, mem, 0, &win2, 0) == ncclInvalidArgument);
  CHECK(ncclCommWindowDeregister(comm, nullptr) == ncclSuccess);  // as NCCL
  CHECK(ncclCommWindowDeregister(comms[1], win) == ncclInvalidArgument);
  CHECK(ncclCommWindowDeregister(comm, win) == ncclSuccess);
  CHECK(ncclCommWindowDeregister(comm, win) == ncclInvalidArgument);  // twice
  // Registrations and windows still held go with the communicator.
  CHECK(ncclCommDestroy(comms[0]) == ncclSuccess);
  CHECK(ncclCommDestroy(comms[1]) == ncclSuccess);
  CHECK(ncclMemFree(mem) == ncclSuccess);
}

TEST_CASE("ncclGroupSimulateEnd: an estimate, and nothing launched") {
  const int n = 2;
  ncclComm_t comms[n];
  REQUIRE(ncclCommInitAll(comms, n, nullptr) == ncclSuccess);
  std::vector<cudaStream_t> streams(n);
  for (int r = 0; r < n; r++) plexusStreamCreate(&streams[r]);
  std::vector<std::vector<float>> bufs(n, std::vector<float>(1 << 18));
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < bufs[r].size(); i++) bufs[r][i] = (float)(r + 1);
  auto simulate = [&](size_t count, ncclSimInfo_t* info) {
    REQUIRE(ncclGroupStart() == ncclSuccess);
    for (int r = 0; r < n; r++)
      REQUIRE(ncclAllReduce(bufs[r].data(), bufs[r].data(), count, ncclFloat32, ncclSum, comms[r], streams[r]) ==
              ncclSuccess);
    return ncclGroupSimulateEnd(info);
  };
  ncclSimInfo_t small = NCCL_SIM_INFO_INITIALIZER, large = NCCL_SIM_INFO_INITIALIZER;
  CHECK(small.estimatedTime < 0);
  REQUIRE(simulate(1024, &small) == ncclSuccess);
  REQUIRE(simulate(1 << 18, &large) == ncclSuccess);
  CHECK(small.estimatedTime > 0);
  CHECK(large.estimatedTime > small.estimatedTime);
  for (int r = 0; r < n; r++) REQUIRE(plexusStreamSynchronize(streams[r]) == ncclSuccess);
  long changed = 0;
  for (int r = 0; r < n; r++)
    for (float v : bufs[r]) changed += v != (float)(r + 1);
  CHECK(changed == 0);

  // Bad simInfo: ncclInvalidArgument, and the group is gone (nothing launched either).
  CHECK(simulate(16, nullptr) == ncclInvalidArgument);
  ncclSimInfo_t bad = NCCL_SIM_INFO_INITIALIZER;
  bad.magic = 0;
  CHECK(simulate(16, &bad) == ncclInvalidArgument);
  CHECK(lastError().find("NCCL_SIM_INFO_INITIALIZER") != std::string::npos);
  CHECK(ncclGroupEnd() == ncclInvalidUsage);  // no group left open
  ncclSimInfo_t none = NCCL_SIM_INFO_INITIALIZER;
  CHECK(ncclGroupSimulateEnd(&none) == ncclInvalidUsage);
  // An empty group costs nothing.
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclGroupSimulateEnd(&none) == ncclSuccess);
  CHECK(none.estimatedTime == 0.0f);

  // The communicators are untouched: a real AllReduce now gives the right answer.
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < n; r++)
    REQUIRE(ncclAllReduce(bufs[r].data(), bufs[r].data(), bufs[r].size(), ncclFloat32, ncclSum, comms[r],
                          streams[r]) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  for (int r = 0; r < n; r++) REQUIRE(plexusStreamSynchronize(streams[r]) == ncclSuccess);
  long wrong = 0;
  for (int r = 0; r < n; r++)
    for (float v : bufs[r]) wrong += v != 3.0f;
  CHECK(wrong == 0);
  for (int r = 0; r < n; r++) {
    plexusStreamDestroy(streams[r]);
    CHECK(ncclCommDestroy(comms[r]) == ncclSuccess);
  }
}
