// Point-to-point: grouped sends and receives in any pattern, and the collectives built on them
// (AlltoAll, Gather, Scatter). Every element checked.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "harness.h"

namespace {

// Value that rank `from` sends to rank `to` at index i: distinct per pair and index.
int32_t value(int from, int to, size_t i) { return (int32_t)(from * 1000003 + to * 7919 + (int32_t)(i % 100003)); }

long checkBuf(const std::vector<int32_t>& buf, size_t offset, size_t count, int from, int to, const char* what) {
  long wrong = 0;
  for (size_t i = 0; i < count; i++) wrong += buf[offset + i] != value(from, to, i);
  if (wrong) fprintf(stderr, "%s: %ld wrong elements from rank %d at rank %d\n", what, wrong, from, to);
  return wrong;
}

// Every rank sends to every rank (itself included) and receives from every rank, in one group, in a
// rank-dependent order so that no two ranks post in the same order.
long handWrittenAlltoAll(int rank, int nranks, ncclComm_t comm, cudaStream_t stream, size_t count) {
  std::vector<int32_t> send(count * nranks), recv(count * nranks, -1);
  for (int p = 0; p < nranks; p++)
    for (size_t i = 0; i < count; i++) send[p * count + i] = value(rank, p, i);
  CHECK_NCCL(ncclGroupStart());
  for (int k = 0; k < nranks; k++) {
    int p = (rank + k) % nranks, q = (rank + nranks - k) % nranks;
    if (rank % 2) {
      CHECK_NCCL(ncclRecv(recv.data() + q * count, count, ncclInt32, q, comm, stream));
      CHECK_NCCL(ncclSend(send.data() + p * count, count, ncclInt32, p, comm, stream));
    } else {
      CHECK_NCCL(ncclSend(send.data() + p * count, count, ncclInt32, p, comm, stream));
      CHECK_NCCL(ncclRecv(recv.data() + q * count, count, ncclInt32, q, comm, stream));
    }
  }
  CHECK_NCCL(ncclGroupEnd());
  CHECK_NCCL(plexusStreamSynchronize(stream));
  long bad = 0;
  for (int p = 0; p < nranks; p++) bad += checkBuf(recv, p * count, count, p, rank, "hand-written alltoall");
  return bad;
}

// ncclAlltoAll of count int32 per block: every element, and which algorithm ran it (plexusCommLastDecision; algo
// nullptr: either).
long alltoAllRunsOn(int rank, int nranks, ncclComm_t comm, cudaStream_t stream, size_t count, const char* algo) {
  std::vector<int32_t> send(count * nranks), recv(count * nranks, -1);
  for (int p = 0; p < nranks; p++)
    for (size_t i = 0; i < count; i++) send[p * count + i] = value(rank, p, i);
  CHECK_NCCL(ncclAlltoAll(send.data(), recv.data(), count, ncclInt32, comm, stream));
  plexusDecision_t d{};
  CHECK_NCCL(plexusCommLastDecision(comm, &d));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  long bad = 0;
  for (int p = 0; p < nranks; p++) bad += checkBuf(recv, p * count, count, p, rank, "ncclAlltoAll");
  if (algo && strcmp(d.algorithm, algo) != 0) {
    fprintf(stderr, "rank %d: ncclAlltoAll of %zu B blocks ran on %s, expected %s\n", rank, count * 4, d.algorithm,
            algo);
    bad++;
  }
  return bad;
}

long library(int rank, int nranks, ncclComm_t comm, cudaStream_t stream, size_t count) {
  long bad = alltoAllRunsOn(rank, nranks, comm, stream, count, nullptr);
  for (int root = 0; root < nranks; root++) {
    // Gather: root receives block p from rank p; everyone sends value(rank, root).
    std::vector<int32_t> mine(count), all(count * nranks, -1);
    for (size_t i = 0; i < count; i++) mine[i] = value(rank, root, i);
    CHECK_NCCL(ncclGather(mine.data(), all.data(), count, ncclInt32, root, comm, stream));
    CHECK_NCCL(plexusStreamSynchronize(stream));
    if (rank == root)
      for (int p = 0; p < nranks; p++) bad += checkBuf(all, p * count, count, p, root, "ncclGather");
    // Scatter: root sends block p to rank p.
    std::vector<int32_t> blocks(count * nranks), got(count, -1);
    for (int p = 0; p < nranks; p++)
      for (size_t i = 0; i < count; i++) blocks[p * count + i] = value(root, p, i);
    CHECK_NCCL(ncclScatter(blocks.data(), got.data(), count, ncclInt32, root, comm, stream));
    CHECK_NCCL(plexusStreamSynchronize(stream));
    bad += checkBuf(got, 0, count, root, rank, "ncclScatter");
  }
  return bad;
}

// Each rank sends to next and receives from prev, several messages in one group, then a big
// exchange in both directions with one peer (more than the connector holds, so both must progress).
long ringAndPair(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  long bad = 0;
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  const size_t sizes[] = {1, 7, 1027, 1 << 18};
  std::vector<std::vector<int32_t>> out(4), in(4);
  CHECK_NCCL(ncclGroupStart());
  for (int k = 0; k < 4; k++) {
    out[k].resize(sizes[k]);
    in[k].assign(sizes[k], -1);
    for (size_t i = 0; i < sizes[k]; i++) out[k][i] = value(rank, next, i + k);
    CHECK_NCCL(ncclSend(out[k].data(), sizes[k], ncclInt32, next, comm, stream));
    CHECK_NCCL(ncclRecv(in[k].data(), sizes[k], ncclInt32, prev, comm, stream));
  }
  CHECK_NCCL(ncclGroupEnd());
  CHECK_NCCL(plexusStreamSynchronize(stream));
  for (int k = 0; k < 4; k++)
    for (size_t i = 0; i < sizes[k]; i++) bad += in[k][i] != value(prev, rank, i + k);
  // Pairs (0,1), (2,3), ...: send and receive 4 MiB with the partner in one group.
  int partner = rank ^ 1;
  if (partner < nranks) {
    const size_t count = 1 << 20;
    std::vector<int32_t> a(count), b(count, -1);
    for (size_t i = 0; i < count; i++) a[i] = value(rank, partner, i);
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclSend(a.data(), count, ncclInt32, partner, comm, stream));
    CHECK_NCCL(ncclRecv(b.data(), count, ncclInt32, partner, comm, stream));
    CHECK_NCCL(ncclGroupEnd());
    CHECK_NCCL(plexusStreamSynchronize(stream));
    bad += checkBuf(b, 0, count, partner, rank, "pair exchange");
  }
  return bad;
}

long all(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  long bad = ringAndPair(rank, nranks, comm, stream);
  for (size_t count : {1ul, 1027ul, 65536ul}) bad += handWrittenAlltoAll(rank, nranks, comm, stream, count);
  bad += library(rank, nranks, comm, stream, 1031);
  return bad;
}

harness::Scenario processP2p("p2p-all", all);

}  // namespace

TEST_CASE("p2p: grouped send/recv patterns, AlltoAll, Gather, Scatter with ranks as threads") {
  for (int n : {1, 2, 3, 4, 8}) {
    CAPTURE(n);
    CHECK(harness::runThreads(n, all) == 0);
  }
}

TEST_CASE("p2p: ranks as processes (2, 4)") {
  for (int n : {2, 4}) {
    CAPTURE(n);
    CHECK(harness::runProcesses("p2p-all", n) == 0);
  }
}

TEST_CASE("p2p: messages up to 1 MiB as LL lines (NCCL_P2P_LL_THRESHOLD), many LL steps each, ranks as processes") {
  setenv("NCCL_P2P_LL_THRESHOLD", "1048576", 1);
  CHECK(harness::runProcesses("p2p-all", 3) == 0);
  unsetenv("NCCL_P2P_LL_THRESHOLD");
}

TEST_CASE("p2p: small connector buffers, many slices per message") {
  setenv("PLEXUS_BUFFSIZE", "65536", 1);
  long bad = harness::runThreads(3, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
    return ringAndPair(rank, nranks, comm, stream) + handWrittenAlltoAll(rank, nranks, comm, stream, 100000);
  });
  unsetenv("PLEXUS_BUFFSIZE");
  CHECK(bad == 0);
}

TEST_CASE("AlltoAll: one collective below 64 KiB blocks where each rank has a core, else sends and receives") {
  // 16383 int32: 4 bytes under PLEXUS_P2P_ZERO_COPY_MIN_BYTES; 16384 from it on, where a send goes zero-copy.
  for (int n : {2, 3}) {
    CAPTURE(n);
    CHECK(harness::runThreads(n, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
            const harness::CoreUse use = harness::coreUse(comm, nranks);
            const char* small = use.shared ? "p2p" : "direct";
            if (rank == 0) fprintf(stderr, "%d ranks, %d channel(s), %d cores: %s\n", nranks, use.channels, use.cores, small);
            return alltoAllRunsOn(rank, nranks, comm, stream, 1, small) +
                   alltoAllRunsOn(rank, nranks, comm, stream, 1031, small) +
                   alltoAllRunsOn(rank, nranks, comm, stream, 16383, small) +
                   alltoAllRunsOn(rank, nranks, comm, stream, 16384, "p2p");
          }) == 0);
  }
  // Where NCCL_ALGO leaves direct out, no algorithm serves AlltoAll: sends and receives, as NCCL runs it.
  setenv("NCCL_ALGO", "ring", 1);
  CHECK(harness::runThreads(3, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          return alltoAllRunsOn(rank, nranks, comm, stream, 1, "p2p") +
                 alltoAllRunsOn(rank, nranks, comm, stream, 1031, "p2p");
        }) == 0);
  unsetenv("NCCL_ALGO");
}

TEST_CASE("AlltoAll, Gather and Scatter of 0 elements launch nothing and touch no buffer, inside a group too") {
  CHECK(harness::runThreads(3, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          std::vector<int32_t> send(8, 7), recv(8, 9);
          plexusLaunchInfo_t before, after;
          CHECK_NCCL(plexusCommGetLaunchInfo(comm, &before));
          CHECK_NCCL(ncclAlltoAll(send.data(), recv.data(), 0, ncclInt32, comm, stream));
          CHECK_NCCL(ncclGather(send.data(), recv.data(), 0, ncclInt32, 1, comm, stream));
          CHECK_NCCL(ncclScatter(send.data(), recv.data(), 0, ncclInt32, 2, comm, stream));
          CHECK_NCCL(ncclGroupStart());
          CHECK_NCCL(ncclAlltoAll(send.data(), recv.data(), 0, ncclInt32, comm, stream));
          CHECK_NCCL(ncclGroupEnd());
          CHECK_NCCL(plexusStreamSynchronize(stream));
          CHECK_NCCL(plexusCommGetLaunchInfo(comm, &after));
          long bad = after.launches != before.launches;
          for (size_t i = 0; i < send.size(); i++) bad += send[i] != 7 || recv[i] != 9;
          // The checks still apply: a 0-element AlltoAll in place is no error (NCCL's rule: no element moves).
          bad += ncclAlltoAll(recv.data(), recv.data(), 0, ncclInt32, comm, stream) != ncclSuccess;
          bad += ncclGather(send.data(), recv.data(), 0, ncclInt32, nranks, comm, stream) != ncclInvalidArgument;
          if (bad) fprintf(stderr, "rank %d: launches %llu -> %llu\n", rank, (unsigned long long)before.launches,
                           (unsigned long long)after.launches);
          return bad;
        }) == 0);
}

TEST_CASE("p2p: bad arguments") {
  CHECK(harness::runThreads(2, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          long bad = 0;
          int32_t x = 0;
          bad += ncclSend(&x, 1, ncclInt32, nranks, comm, stream) != ncclInvalidArgument;
          bad += ncclRecv(&x, 1, ncclInt32, -1, comm, stream) != ncclInvalidArgument;
          bad += ncclSend(nullptr, 1, ncclInt32, 0, comm, stream) != ncclInvalidArgument;
          bad += ncclAlltoAll(&x, &x, 1, ncclInt32, comm, stream) != ncclInvalidArgument;  // in place
          bad += ncclGather(&x, &x, 1, ncclInt32, 5, comm, stream) != ncclInvalidArgument;
          // A send to itself without a matching receive is refused when it runs.
          CHECK_NCCL(ncclSend(&x, 1, ncclInt32, rank, comm, stream));
          bad += plexusStreamSynchronize(stream) != ncclInvalidUsage;
          return bad;
        }) == 0);
}

namespace {

// Rank 2 dies after init; rank 0's first send to it connects on demand (with the ring alone, no collective connected
// 0 -> 2 of 3 ranks) and must fail with a message naming rank 2, logged once: the failure passes through commFail, which used to log it again.
harness::Scenario processConnectDead("p2p-connect-dead-peer", [](int rank, int nranks, ncclComm_t comm,
                                                                 cudaStream_t stream) -> long {
  long bad = 0;
  CHECK_NCCL(plexusCommSetTimeout(comm, 5.0));
  int32_t x = rank;
  CHECK_NCCL(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  if (!harness::processBarrier(rank, nranks, "initialized")) bad++;
  if (rank != 0) _exit(bad ? 1 : 0);  // no destroy: rank 2's sockets close with the process
  ncclResult_t r = ncclSend(&x, 1, ncclInt32, 2, comm, stream);
  if (r == ncclSuccess) r = plexusStreamSynchronize(stream);
  const std::string why = ncclGetLastError(comm);
  fprintf(stderr, "rank 0: a send to a dead rank: %s: %s\n", ncclGetErrorString(r), why.c_str());
  bad += r == ncclSuccess;
  bad += why.find("rank 2") == std::string::npos;
  // This process's log: NCCL_DEBUG_FILE with %p expanded.
  std::string file = getenv("NCCL_DEBUG_FILE");
  file.replace(file.find("%p"), 2, std::to_string(getpid()));
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string log = ss.str();
  int seen = 0;
  for (size_t p = log.find(why); !why.empty() && p != std::string::npos; p = log.find(why, p + 1)) seen++;
  if (seen != 1 || log.find("on demand") == std::string::npos) {
    fprintf(stderr, "rank 0: the message is logged %d times (want 1); the log:\n%s\n", seen, log.c_str());
    bad++;
  }
  ncclCommAbort(comm);
  _exit(bad ? 1 : 0);  // the harness's destroy would find the communicator aborted
});

}  // namespace

TEST_CASE("p2p: a connection made on demand to a rank that died fails the send, with the reason logged once") {
  char dir[] = "/tmp/plexus-p2p-dead-XXXXXX";
  REQUIRE(mkdtemp(dir));
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "P2P", 1);
  setenv("NCCL_DEBUG_FILE", (std::string(dir) + "/log.%p").c_str(), 1);
  setenv("PLEXUS_ALGORITHMS", "ring", 1);
  CHECK(harness::runProcesses("p2p-connect-dead-peer", 3, 60) == 0);
  unsetenv("PLEXUS_ALGORITHMS");
  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_DEBUG_SUBSYS");
  unsetenv("NCCL_DEBUG_FILE");
  std::filesystem::remove_all(dir);
}
