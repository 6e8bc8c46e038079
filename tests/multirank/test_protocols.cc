// The LL protocol through the public API: forced with NCCL_PROTO=LL for every ring collective, and
// mixed with Simple on the same connectors (they share the step count), every element checked.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "harness.h"

namespace {

long allReduce(ncclComm_t comm, cudaStream_t stream, int rank, int nranks, size_t count, ncclDataType_t type,
               ncclRedOp_t op) {
  std::vector<char> buf(count * check::typeSize(type) + 1);
  check::withType(type, [&](auto t) { check::fill<decltype(t)>(buf.data(), count, op, rank); return 0; });
  CHECK_NCCL(ncclAllReduce(buf.data(), buf.data(), count, type, op, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  return (long)check::withType(type, [&](auto t) { return check::verifyAllReduce<decltype(t)>(buf.data(), count, op, nranks); });
}

// Broadcast from every root, Reduce to every root, AllGather and ReduceScatter, of count floats.
long others(ncclComm_t comm, cudaStream_t stream, int rank, int nranks, size_t count) {
  long bad = 0;
  const size_t bytes = count * sizeof(float);
  for (int root = 0; root < nranks; root++) {
    std::vector<char> b(bytes + 1);
    if (rank == root) check::fillPattern(b.data(), bytes, root);
    CHECK_NCCL(ncclBroadcast(b.data(), b.data(), count, ncclFloat32, root, comm, stream));
    std::vector<float> in(count), out(count, -1);
    check::fill<float>(in.data(), count, ncclSum, rank);
    CHECK_NCCL(ncclReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, root, comm, stream));
    CHECK_NCCL(plexusStreamSynchronize(stream));
    bad += (long)check::verifyBroadcast(b.data(), bytes, root);
    if (rank == root) bad += (long)check::verifyAllReduce<float>(out.data(), count, ncclSum, nranks);
  }
  std::vector<char> mine(bytes + 1), all(bytes * nranks + 1);
  check::fillPattern(mine.data(), bytes, rank);
  CHECK_NCCL(ncclAllGather(mine.data(), all.data(), count, ncclFloat32, comm, stream));
  std::vector<float> big(count * nranks), part(count, -1);
  check::fill<float>(big.data(), count * nranks, ncclSum, rank);
  CHECK_NCCL(ncclReduceScatter(big.data(), part.data(), count, ncclFloat32, ncclSum, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  bad += (long)check::verifyAllGather(all.data(), bytes, nranks);
  bad += (long)check::verifyReduced<float>(part.data(), count, ncclSum, nranks, (size_t)rank * count);
  return bad;
}

long llMatrix(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  long bad = 0;
  for (size_t count : {1ul, 7ul, 511ul, 513ul, 1027ul, 40000ul})
    for (ncclDataType_t type : {ncclFloat32, ncclInt32, ncclInt8, ncclFloat64, ncclBfloat16})
      bad += allReduce(comm, stream, rank, nranks, count, type, ncclSum);
  for (int op = 0; op < ncclNumOps; op++) bad += allReduce(comm, stream, rank, nranks, 777, ncclFloat16, (ncclRedOp_t)op);
  for (size_t count : {1ul, 1027ul, 20000ul}) bad += others(comm, stream, rank, nranks, count);
  plexusDecision_t d;
  CHECK_NCCL(plexusCommLastDecision(comm, &d));
  if (std::string(d.protocol) != "LL") {
    fprintf(stderr, "rank %d: the last decision used %s, not LL\n", rank, d.protocol);
    bad++;
  }
  return bad;
}

harness::Scenario processLL("protocols-ll", llMatrix);

}  // namespace

TEST_CASE("LL forced with NCCL_PROTO=LL: every ring collective, ranks as threads") {
  setenv("NCCL_PROTO", "LL", 1);
  for (int n : {1, 2, 3, 4}) {
    CAPTURE(n);
    CHECK(harness::runThreads(n, llMatrix) == 0);
  }
  unsetenv("NCCL_PROTO");
}

TEST_CASE("LL forced with NCCL_PROTO=LL: ranks as processes") {
  setenv("NCCL_PROTO", "LL", 1);
  CHECK(harness::runProcesses("protocols-ll", 3) == 0);
  unsetenv("NCCL_PROTO");
}

TEST_CASE("LL and Simple alternate on the same connectors") {
  CHECK(harness::runThreads(3, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          long bad = 0;
          std::string seen;
          for (int k = 0; k < 6; k++) {
            // Small goes LL, large goes Simple by the cost model: both advance the same step counts.
            size_t count = k % 2 ? 1 << 20 : 3;
            bad += allReduce(comm, stream, rank, nranks, count, ncclFloat32, ncclSum);
            plexusDecision_t d;
            CHECK_NCCL(plexusCommLastDecision(comm, &d));
            seen += d.protocol;
            seen += ' ';
          }
          if (seen != "LL Simple LL Simple LL Simple ") {
            fprintf(stderr, "rank %d: protocols chosen: %s\n", rank, seen.c_str());
            bad++;
          }
          return bad;
        }) == 0);
}

TEST_CASE("NCCL_PROTO names an unknown protocol: init fails with a message") {
  setenv("NCCL_PROTO", "LL256", 1);
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t comm = nullptr;
  CHECK(ncclCommInitRank(&comm, 1, id, 0) == ncclInvalidUsage);
  CHECK(std::string(ncclGetLastError(nullptr)).find("LL256") != std::string::npos);
  unsetenv("NCCL_PROTO");
}
