// AllGather lowered to point-to-point (planner.cc, PLEXUS_P2P_COLLECTIVES): within one node whose ranks share a
// process (between processes only when PLEXUS_P2P_COLLECTIVES=1), from 64 KiB per rank on and where only the cost
// model decides, every rank writes its part straight into every
// other's buffer; a Broadcast of 64 to 512 KiB between two ranks likewise. Checked by content, by the decision the planner reports and by the zero-copy counter;
// in and out of place, in a group larger than one launch (a lowered collective's sends and receives are
// never split over two launches), and left to the algorithms when NCCL_ALGO or the knob says so.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness.h"

namespace {

int32_t value(int rank, size_t i) { return (int32_t)(rank * 1000003 + (int32_t)(i % 99991)); }

// One AllGather of `count` int32 per rank, out of place then in place; returns problems. `lowered`: whether
// the planner must have taken the point-to-point path.
long allGather(int rank, int nranks, ncclComm_t comm, cudaStream_t stream, size_t count, bool lowered) {
  long bad = 0;
  std::vector<int32_t> send(count), recv(count * nranks, -1);
  for (size_t i = 0; i < count; i++) send[i] = value(rank, i);
  plexusCommStats_t before{}, after{};
  CHECK_NCCL(plexusCommGetStats(comm, &before));
  for (bool inPlace : {false, true}) {
    if (inPlace) {
      std::fill(recv.begin(), recv.end(), -1);
      std::copy(send.begin(), send.end(), recv.begin() + rank * count);
    }
    CHECK_NCCL(ncclAllGather(inPlace ? recv.data() + rank * count : send.data(), recv.data(), count, ncclInt32, comm,
                             stream));
    plexusDecision_t d{};
    CHECK_NCCL(plexusCommLastDecision(comm, &d));
    if ((std::string(d.algorithm) == "p2p") != lowered) {
      fprintf(stderr, "rank %d: AllGather of %zu x int32 went to %s, expected %s\n", rank, count, d.algorithm,
              lowered ? "p2p" : "an algorithm plugin");
      bad++;
    }
    CHECK_NCCL(plexusStreamSynchronize(stream));
    for (int p = 0; p < nranks; p++)
      for (size_t i = 0; i < count; i++) bad += recv[p * count + i] != value(p, i);
  }
  CHECK_NCCL(plexusCommGetStats(comm, &after));
  // Lowered, every other rank's part arrives zero-copy, twice (out of place, in place).
  const uint64_t zeroCopy = after.p2pZeroCopyBytes - before.p2pZeroCopyBytes;
  const uint64_t expect = lowered ? 2ull * (nranks - 1) * count * sizeof(int32_t) : 0;
  if (zeroCopy < expect || (!lowered && zeroCopy != 0)) {
    fprintf(stderr, "rank %d: %llu bytes zero-copy, expected %s%llu\n", rank, (unsigned long long)zeroCopy,
            lowered ? "at least " : "", (unsigned long long)expect);
    bad++;
  }
  return bad;
}

// 100 AllGathers of 64 KiB per rank and 4 AllReduces in one group: 2 * nranks sends and receives each, more
// than half the work FIFO (one launch), so the group takes several launches. The AllReduces go first, so
// with 3 ranks the first launch ends 4 tasks into an AllGather's 6: split there, each rank would wait on
// its next rank in a cycle.
long bigGroup(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  constexpr int kOps = 100;
  constexpr size_t kCount = 16384;
  std::vector<std::vector<int32_t>> send(kOps, std::vector<int32_t>(kCount)),
      recv(kOps, std::vector<int32_t>(kCount * nranks, -1));
  for (int k = 0; k < kOps; k++)
    for (size_t i = 0; i < kCount; i++) send[k][i] = value(rank, i) + k;
  int32_t sum[4] = {rank + 1, rank + 2, rank + 3, rank + 4};
  CHECK_NCCL(ncclGroupStart());
  for (int k = 0; k < kOps; k++)
    CHECK_NCCL(ncclAllGather(send[k].data(), recv[k].data(), kCount, ncclInt32, comm, stream));
  for (int32_t& s : sum) CHECK_NCCL(ncclAllReduce(&s, &s, 1, ncclInt32, ncclSum, comm, stream));
  CHECK_NCCL(ncclGroupEnd());
  CHECK_NCCL(plexusStreamSynchronize(stream));
  long bad = 0;
  for (int j = 0; j < 4; j++) bad += sum[j] != nranks * (nranks + 1) / 2 + nranks * j;
  for (int k = 0; k < kOps; k++)
    for (int p = 0; p < nranks; p++)
      for (size_t i = 0; i < kCount; i++) bad += recv[k][p * kCount + i] != value(p, i) + k;
  return bad;
}

// Broadcasts of `count` int32 from each root, out of place then in place; returns problems.
long broadcast(int rank, int nranks, ncclComm_t comm, cudaStream_t stream, size_t count, bool lowered) {
  long bad = 0;
  std::vector<int32_t> send(count), recv(count);
  for (int root = 0; root < nranks; root++) {
    for (bool inPlace : {false, true}) {
      for (size_t i = 0; i < count; i++) send[i] = rank == root ? value(root, i) + inPlace : -1;
      std::fill(recv.begin(), recv.end(), -2);
      if (inPlace) recv = send;
      plexusCommStats_t before{}, after{};
      CHECK_NCCL(plexusCommGetStats(comm, &before));
      CHECK_NCCL(ncclBroadcast(inPlace ? recv.data() : send.data(), recv.data(), count, ncclInt32, root, comm, stream));
      plexusDecision_t d{};
      CHECK_NCCL(plexusCommLastDecision(comm, &d));
      CHECK_NCCL(plexusStreamSynchronize(stream));
      CHECK_NCCL(plexusCommGetStats(comm, &after));
      for (size_t i = 0; i < count; i++) bad += recv[i] != value(root, i) + inPlace;
      const uint64_t zeroCopy = after.p2pZeroCopyBytes - before.p2pZeroCopyBytes;
      if ((std::string(d.algorithm) == "p2p") != lowered || (rank != root && lowered && zeroCopy < count * 4)) {
        fprintf(stderr, "rank %d: Broadcast of %zu x int32 from %d went to %s with %llu bytes zero-copy, expected %s\n",
                rank, count, root, d.algorithm, (unsigned long long)zeroCopy, lowered ? "p2p" : "an algorithm plugin");
        bad++;
      }
    }
  }
  return bad;
}

long lowering(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  long bad = allGather(rank, nranks, comm, stream, 1000, false);  // 4 KB per rank: an algorithm plugin
  bad += allGather(rank, nranks, comm, stream, 70001, true);
  bad += bigGroup(rank, nranks, comm, stream);
  bad += broadcast(rank, nranks, comm, stream, 70001, nranks == 2);
  bad += broadcast(rank, nranks, comm, stream, 1000, false);     // 4 KB
  bad += broadcast(rank, nranks, comm, stream, 1 << 18, false);  // 1 MiB: the ring
  return bad;
}

harness::Scenario kLowering("p2p-collectives", lowering);

// Between processes, unless PLEXUS_P2P_COLLECTIVES=1: the sizes that threads lower stay with the algorithm plugins.
harness::Scenario kNotLowered("p2p-collectives-not-lowered", [](int rank, int nranks, ncclComm_t comm,
                                                                   cudaStream_t stream) {
  return allGather(rank, nranks, comm, stream, 70001, false) + broadcast(rank, nranks, comm, stream, 70001, false);
});

}  // namespace

TEST_CASE("AllGather and Broadcast as point-to-point within a node: ranks as threads (2, 3)") {
  for (int n : {2, 3}) {
    CAPTURE(n);
    CHECK(harness::runThreads(n, lowering) == 0);
  }
}

// Opted in, with process_vm_writev forced on: the buffers are malloc'ed, and every part must still arrive zero-copy.
TEST_CASE("AllGather and Broadcast as point-to-point within a node: ranks as processes (2, 3), "
          "PLEXUS_P2P_COLLECTIVES=1") {
  setenv("PLEXUS_P2P_COLLECTIVES", "1", 1);
  setenv("PLEXUS_CMA", "1", 1);
  for (int n : {2, 3}) {
    CAPTURE(n);
    CHECK(harness::runProcesses("p2p-collectives", n) == 0);
  }
  unsetenv("PLEXUS_P2P_COLLECTIVES");
  unsetenv("PLEXUS_CMA");
}

TEST_CASE("AllGather and Broadcast between processes stay with the algorithm plugins by default") {
  CHECK(harness::runProcesses("p2p-collectives-not-lowered", 2) == 0);
}

TEST_CASE("AllGather and Broadcast as point-to-point: not with PLEXUS_P2P_COLLECTIVES=0, nor when NCCL_ALGO decides") {
  for (const char* var : {"PLEXUS_P2P_COLLECTIVES", "NCCL_ALGO"}) {
    CAPTURE(var);
    setenv(var, std::string(var) == "NCCL_ALGO" ? "ring" : "0", 1);
    CHECK(harness::runThreads(2, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
            return allGather(rank, nranks, comm, stream, 70001, false) +
                   broadcast(rank, nranks, comm, stream, 70001, false);
          }) == 0);
    unsetenv(var);
  }
}
