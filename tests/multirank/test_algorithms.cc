// Every algorithm plugin × protocol, forced with NCCL_ALGO / NCCL_PROTO, through the public API:
// AllReduce (several types and every operator), Broadcast and Reduce from every root, AllGather and
// ReduceScatter, in and out of place, ranks as threads and as processes, every element checked and
// the decision the planner made checked too. Algorithms share connectors: mixing them (and
// point-to-point) on one communicator must keep every step count in agreement.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "harness.h"

namespace {

long allReduce(ncclComm_t comm, cudaStream_t stream, int rank, int nranks, size_t count, ncclDataType_t type,
               ncclRedOp_t op, bool inPlace) {
  const size_t bytes = count * check::typeSize(type);
  std::vector<char> in(bytes + 1), out(bytes + 1, 0x55);
  check::withType(type, [&](auto t) { check::fill<decltype(t)>(in.data(), count, op, rank); return 0; });
  char* dst = inPlace ? in.data() : out.data();
  CHECK_NCCL(ncclAllReduce(in.data(), dst, count, type, op, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  long bad = (long)check::withType(type, [&](auto t) { return check::verifyAllReduce<decltype(t)>(dst, count, op, nranks); });
  if (bad)
    fprintf(stderr, "rank %d/%d: AllReduce count %zu type %d op %d %s: %ld wrong\n", rank, nranks, count, (int)type,
            (int)op, inPlace ? "in place" : "out of place", bad);
  return bad;
}

// Broadcast from every root, Reduce to every root, and (where the algorithm serves them) AllGather
// and ReduceScatter, of count floats.
long rooted(ncclComm_t comm, cudaStream_t stream, int rank, int nranks, size_t count, bool inPlace,
            bool gatherScatter) {
  long bad = 0;
  const size_t bytes = count * sizeof(float);
  for (int root = 0; root < nranks; root++) {
    std::vector<char> src(bytes + 1), b(bytes + 1);
    char* bsrc = inPlace ? b.data() : src.data();
    if (rank == root) check::fillPattern(bsrc, bytes, root);
    CHECK_NCCL(ncclBroadcast(bsrc, b.data(), count, ncclFloat32, root, comm, stream));
    std::vector<float> in(count), out(count, -1);
    check::fill<float>(in.data(), count, ncclSum, rank);
    float* rout = inPlace ? in.data() : out.data();
    CHECK_NCCL(ncclReduce(in.data(), rout, count, ncclFloat32, ncclSum, root, comm, stream));
    CHECK_NCCL(plexusStreamSynchronize(stream));
    bad += (long)check::verifyBroadcast(b.data(), bytes, root);
    if (rank == root) bad += (long)check::verifyAllReduce<float>(rout, count, ncclSum, nranks);
  }
  if (!gatherScatter) {
    if (bad)
      fprintf(stderr, "rank %d/%d: Broadcast/Reduce of %zu floats %s: %ld wrong\n", rank, nranks, count,
              inPlace ? "in place" : "out of place", bad);
    return bad;
  }
  std::vector<char> mine(bytes + 1), all(bytes * nranks + 1);
  char* gsrc = inPlace ? all.data() + (size_t)rank * bytes : mine.data();
  check::fillPattern(gsrc, bytes, rank);
  CHECK_NCCL(ncclAllGather(gsrc, all.data(), count, ncclFloat32, comm, stream));
  std::vector<float> big(count * nranks), part(count, -1);
  check::fill<float>(big.data(), count * nranks, ncclSum, rank);
  float* rsdst = inPlace ? big.data() + (size_t)rank * count : part.data();
  CHECK_NCCL(ncclReduceScatter(big.data(), rsdst, count, ncclFloat32, ncclSum, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  bad += (long)check::verifyAllGather(all.data(), bytes, nranks);
  bad += (long)check::verifyReduced<float>(rsdst, count, ncclSum, nranks, (size_t)rank * count);
  if (bad)
    fprintf(stderr, "rank %d/%d: Broadcast/Reduce/AllGather/ReduceScatter of %zu floats %s: %ld wrong\n", rank, nranks,
            count, inPlace ? "in place" : "out of place", bad);
  return bad;
}

// What the forced algorithm and protocol must run, checked against the planner's last decision.
long forcedMatrix(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  long bad = 0;
  const bool gatherScatter = strcasecmp(getenv("NCCL_ALGO"), "tree") != 0;  // tree serves neither
  for (bool inPlace : {false, true}) {
    for (size_t count : {1ul, 7ul, 513ul, 1027ul, 70000ul})
      for (ncclDataType_t type : {ncclFloat32, ncclInt32, ncclInt8, ncclFloat64, ncclBfloat16, ncclFloat8e4m3})
        bad += allReduce(comm, stream, rank, nranks, count, type, ncclSum, inPlace);
    for (int op = 0; op < ncclNumOps; op++)
      bad += allReduce(comm, stream, rank, nranks, 777, ncclFloat16, (ncclRedOp_t)op, inPlace);
    for (size_t count : {1ul, 1027ul, 20000ul}) bad += rooted(comm, stream, rank, nranks, count, inPlace, gatherScatter);
  }
  plexusDecision_t d;
  CHECK_NCCL(plexusCommLastDecision(comm, &d));
  const char* algo = getenv("NCCL_ALGO");
  const char* proto = getenv("NCCL_PROTO");
  if (strcasecmp(d.algorithm, algo) != 0 || strcasecmp(d.protocol, proto) != 0) {
    fprintf(stderr, "rank %d: the last decision ran %s/%s, not the forced %s/%s\n", rank, d.algorithm, d.protocol,
            algo, proto);
    bad++;
  }
  return bad;
}

harness::Scenario processForced("algorithms-forced", forcedMatrix);

struct Forced {
  Forced(const char* algo, const char* proto) {
    setenv("NCCL_ALGO", algo, 1);
    setenv("NCCL_PROTO", proto, 1);
  }
  ~Forced() {
    unsetenv("NCCL_ALGO");
    unsetenv("NCCL_PROTO");
  }
};

}  // namespace

TEST_CASE("every algorithm and protocol, forced, ranks as threads (1, 2, 3, 5, 8)") {
  for (const char* algo : {"ring", "direct", "tree"})
    for (const char* proto : {"Simple", "LL", "LL128"}) {
      Forced forced(algo, proto);
      for (int n : {1, 2, 3, 5, 8}) {
        CAPTURE(algo);
        CAPTURE(proto);
        CAPTURE(n);
        CHECK(harness::runThreads(n, forcedMatrix) == 0);
      }
    }
}

TEST_CASE("every algorithm and protocol, forced, ranks as processes (3)") {
  for (const char* algo : {"ring", "direct", "tree"})
    for (const char* proto : {"Simple", "LL", "LL128"}) {
      Forced forced(algo, proto);
      CAPTURE(algo);
      CAPTURE(proto);
      CHECK(harness::runProcesses("algorithms-forced", 3) == 0);
    }
}

TEST_CASE("algorithms, protocols and point-to-point share connectors on one communicator") {
  // The cost model sends small operations to direct/LL and large ones to ring/Simple; point-to-point
  // runs between them on channel 0's connectors, which both algorithms use too.
  CHECK(harness::runThreads(3, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          long bad = 0;
          std::string seen;
          const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
          for (int k = 0; k < 12; k++) {
            const size_t count = k % 3 == 0 ? 3 : k % 3 == 1 ? (1 << 20) + 5 : 3000;
            bad += allReduce(comm, stream, rank, nranks, count, ncclFloat32, ncclSum, k % 2);
            plexusDecision_t d;
            CHECK_NCCL(plexusCommLastDecision(comm, &d));
            const std::string what = std::string(d.algorithm) + "/" + d.protocol;
            if (seen.find(what) == std::string::npos) seen += what + " ";
            std::vector<int> s(5000 + k, rank), r(5000 + k, -1);
            CHECK_NCCL(ncclGroupStart());
            CHECK_NCCL(ncclSend(s.data(), s.size(), ncclInt32, next, comm, stream));
            CHECK_NCCL(ncclRecv(r.data(), r.size(), ncclInt32, prev, comm, stream));
            CHECK_NCCL(ncclGroupEnd());
            CHECK_NCCL(plexusStreamSynchronize(stream));
            for (int v : r) bad += v != prev;
          }
          if (seen.find("direct/") == std::string::npos || seen.find("ring/") == std::string::npos) {
            fprintf(stderr, "rank %d: decisions seen: %s(expected both direct and ring)\n", rank, seen.c_str());
            bad++;
          }
          return bad;
        }) == 0);
}

TEST_CASE("an algorithm plugin of ABI v1 runs through the core's adapter (host backend)") {
  const std::string plugin = std::string(PLEXUS_TEST_LIB_DIR) + "/../test-plugins/libplexus-algo-rd-v1.so";
  setenv("PLEXUS_ALGORITHMS", ("ring," + plugin).c_str(), 1);
  Forced forced("rd-v1", "Simple");
  CHECK(harness::runThreads(4, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          long bad = 0;
          for (size_t count : {(size_t)1, (size_t)1000, (size_t)(1 << 20) + 3}) {
            bad += allReduce(comm, stream, rank, nranks, count, ncclFloat32, ncclSum, count % 2);
            plexusDecision_t d;
            CHECK_NCCL(plexusCommLastDecision(comm, &d));
            if (std::string(d.algorithm) != "rd-v1") {
              fprintf(stderr, "rank %d: ran %s, not rd-v1\n", rank, d.algorithm);
              bad++;
            }
          }
          return bad;
        }) == 0);
  unsetenv("PLEXUS_ALGORITHMS");
}
