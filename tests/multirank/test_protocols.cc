// The LL and LL128 protocols through the public API: forced with NCCL_PROTO for every collective at
// sizes around their lines and steps, and mixed with Simple on the same connectors (they share the step
// count), every element checked.
#include <doctest/doctest.h>

#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "check.h"
#include "harness.h"
#include "matrix.h"

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

// Bytes around the forced protocol's lines and steps (NCCL_BUFFSIZE's default, 512 KiB Simple steps):
// LL128: 120-byte lines, 512 of them (61440 bytes) per step; LL: 8-byte lines, 256 (2 KiB) per slot.
// Zero, one byte, a line -1/0/+1, a step -1 line/-1/0/+1/+1 line, and more steps than a connector has
// slots.
std::vector<size_t> boundaryBytes(const std::string& proto) {
  const size_t line = proto == "LL128" ? 120 : 8, step = proto == "LL128" ? 512 * 120 : 256 * 8;
  return {0, 1, line - 1, line, line + 1, step - line, step - 1, step, step + 1, step + line, 9 * step + line + 1};
}

// Every collective at every boundary size, in and out of place, first and last root: reductions of a
// 2-byte float (fp16 Sum, bf16 Avg) and of int8 (Max), the others over uint8 and fp16. Sizes are bytes
// rounded up to whole elements. Every element, guard byte and untouched input is checked (matrix.h),
// and that the planner ran the forced protocol with its chunk.
long boundaryMatrix(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  matrix::RankCtx x{rank, nranks, comm, stream, matrix::currentSetup(comm, nranks), "ranks"};
  const char* proto = getenv("NCCL_PROTO");
  long bad = 0;
  int reports = 0;
  for (matrix::Coll c : matrix::kAllColls) {
    struct TypeOp {
      ncclDataType_t type;
      matrix::Op op;
    };
    const std::vector<TypeOp> types =
        matrix::reduces(c) ? std::vector<TypeOp>{{ncclFloat16, matrix::Op::Sum}, {ncclBfloat16, matrix::Op::Avg},
                                                 {ncclInt8, matrix::Op::Max}}
                           : std::vector<TypeOp>{{ncclUint8, matrix::Op::Sum}, {ncclFloat16, matrix::Op::Sum}};
    for (size_t bytes : boundaryBytes(proto))
      for (const TypeOp& to : types)
        for (bool inPlace : {false, true})
          for (int root : {0, nranks - 1}) {
            const size_t size = check::typeSize(to.type);
            if (inPlace && (!matrix::hasInPlace(c) || (c == matrix::Coll::AlltoAll && bytes == 0))) continue;
            if ((!matrix::hasRoot(c) || nranks == 1) && root != 0) continue;
            matrix::Case k{c, to.type, to.op, matrix::hasRoot(c) ? root : -1, matrix::Size::Odd,
                           (bytes + size - 1) / size, inPlace};
            matrix::Wrong w;
            matrix::runCase(x, k, w);
            if (w.total() == 0) continue;
            bad += (long)w.total();
            if (reports++ < 10)
              fprintf(stderr, "rank %d: %s (%zu bytes): %zu wrong output, %zu input, %zu guard, %ld call(s), %ld plan: %s\n",
                      rank, matrix::describe(k, x).c_str(), bytes, w.output, w.input, w.guard, w.calls, w.plan,
                      w.why.c_str());
            if (w.calls) return bad;
          }
  }
  return bad;
}

harness::Scenario processBoundaries("protocols-boundaries", boundaryMatrix);

// Sets NCCL_PROTO (and clears PLEXUS_PROTO, which would win) for a test's duration.
struct ForcedProto {
  matrix::ScopedEnv env;
  explicit ForcedProto(const char* proto) {
    env.set("NCCL_PROTO", proto);
    env.set("PLEXUS_PROTO", nullptr);
  }
};


// ---- how far a rank that leads runs ahead: the LL slots between host ranks ----

// Rank 0 broadcasts `slots` LL operations of 8 bytes, each its own values, while the other ranks have not started:
// each lands in a slot of rank 1's LL buffer, so rank 0 finishes them alone. The others then receive them all. Then
// rank 0 alone once more, one operation beyond the slots: that one waits for a receiver and times out. barrier(tag)
// holds each rank until every rank has reached tag (false when one never does). The communicators run NCCL_PROTO=LL
// and NCCL_ALGO=ring.
long runsAhead(int rank, ncclComm_t comm, cudaStream_t stream, int slots, const std::function<bool(const char*)>& barrier) {
  long bad = 0;
  std::vector<float> warm(2, rank == 0 ? 1.0f : 0.0f);
  CHECK_NCCL(ncclBroadcast(warm.data(), warm.data(), 2, ncclFloat32, 0, comm, stream));  // connections up
  CHECK_NCCL(plexusStreamSynchronize(stream));
  if (!barrier("warm")) return 1;
  std::vector<float> vals(2 * (size_t)(slots + 1), 0.0f);
  auto value = [](int k, int e) { return 1000.0f + (float)k + 0.5f * (float)e; };
  if (rank == 0) {
    for (int k = 0; k <= slots; k++) vals[2 * k] = value(k, 0), vals[2 * k + 1] = value(k, 1);
    CHECK_NCCL(plexusCommSetTimeout(comm, 60.0));  // a root that cannot run this far fails instead of hanging
    for (int k = 0; k < slots; k++)
      CHECK_NCCL(ncclBroadcast(&vals[2 * k], &vals[2 * k], 2, ncclFloat32, 0, comm, stream));
    const ncclResult_t r = plexusStreamSynchronize(stream);
    if (r != ncclSuccess) {
      fprintf(stderr, "rank 0: %d operations ahead of its receivers: %s (%s)\n", slots, ncclGetErrorString(r),
              ncclGetLastError(comm));
      bad++;
    }
  }
  if (!barrier("ahead")) return bad + 1;
  if (rank != 0) {
    for (int k = 0; k < slots; k++)
      CHECK_NCCL(ncclBroadcast(&vals[2 * k], &vals[2 * k], 2, ncclFloat32, 0, comm, stream));
    CHECK_NCCL(plexusStreamSynchronize(stream));
    for (int k = 0; k < slots; k++)
      for (int e = 0; e < 2; e++)
        if (vals[2 * k + e] != value(k, e)) {
          if (bad < 5) fprintf(stderr, "rank %d: operation %d element %d: %g, expected %g\n", rank, k, e, vals[2 * k + e], value(k, e));
          bad++;
        }
  }
  if (!barrier("received")) return bad + 1;
  if (rank == 0) {
    CHECK_NCCL(plexusCommSetTimeout(comm, 1.0));
    for (int k = 0; k <= slots; k++)
      CHECK_NCCL(ncclBroadcast(&vals[2 * k], &vals[2 * k], 2, ncclFloat32, 0, comm, stream));
    const ncclResult_t r = plexusStreamSynchronize(stream);
    if (r != ncclTimeout) {
      fprintf(stderr, "rank 0: %d operations ahead of its receivers: %s, expected ncclTimeout\n", slots + 1,
              ncclGetErrorString(r));
      bad++;
    }
  }
  // The others keep their buffers until rank 0 has stopped writing to them.
  if (!barrier("timed out")) return bad + 1;
  return bad;
}

// A barrier of the threads of one runThreads: each tag once, in the same order on every rank.
struct ThreadBarrier {
  explicit ThreadBarrier(int n) : nranks(n) {}
  bool wait(int rank) {
    const int gen = (int)(arrived[rank]++);
    count.fetch_add(1);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (count.load() < (gen + 1) * nranks)
      if (std::chrono::steady_clock::now() > end) return false;
      else sched_yield();
    return true;
  }
  const int nranks;
  std::atomic<int> count{0};
  int arrived[64] = {};
};

// What runsAhead's communicators are created with: NCCL_LL_BUFFSIZE=bytes (nullptr: unset), NCCL_PROTO=LL and
// NCCL_ALGO=ring, their PLEXUS_ twins (which would win) unset.
void runsAheadEnv(matrix::ScopedEnv& env, const char* bytes) {
  env.set("NCCL_LL_BUFFSIZE", bytes);
  env.set("PLEXUS_LL_BUFFSIZE", nullptr);
  env.set("NCCL_PROTO", "LL");
  env.set("PLEXUS_PROTO", nullptr);
  env.set("NCCL_ALGO", "ring");
  env.set("PLEXUS_ALGO", nullptr);
}

// The communicator the test needs, split from the harness's once this rank's environment is runsAheadEnv's.
ncclComm_t splitWith(ncclComm_t comm, int rank, const char* bytes) {
  matrix::ScopedEnv env;
  runsAheadEnv(env, bytes);
  ncclComm_t split = nullptr;
  if (ncclCommSplit(comm, 0, rank, &split, nullptr) != ncclSuccess) {
    fprintf(stderr, "rank %d: ncclCommSplit: %s\n", rank, ncclGetLastError(comm));
    return nullptr;
  }
  return split;
}

// Ranks whose NCCL_LL_BUFFSIZE differ (1 MiB: 256 slots; 100 KiB: rounded down to 16) take the smallest.
harness::Scenario llSlotsMismatch("protocols-ll-slots-mismatch", [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  ncclComm_t split = splitWith(comm, rank, rank == 0 ? "1M" : "100K");
  if (!split) return 1L;
  const long bad = runsAhead(rank, split, stream, 16, [&](const char* tag) {
    return harness::processBarrier(rank, nranks, tag);
  });
  ncclCommAbort(split);
  return bad;
});

}  // namespace

TEST_CASE("LL128 and LL forced: every collective at sizes around lines and steps, ranks as threads") {
  for (const char* proto : {"LL128", "LL"}) {
    ForcedProto forced(proto);
    for (int n : {1, 2, 3, 4}) {
      CAPTURE(proto);
      CAPTURE(n);
      CHECK(harness::runThreads(n, boundaryMatrix) == 0);
    }
  }
}

TEST_CASE("LL128 and LL forced: every collective at sizes around lines and steps, ranks as processes") {
  for (const char* proto : {"LL128", "LL"}) {
    ForcedProto forced(proto);
    CAPTURE(proto);
    CHECK(harness::runProcesses("protocols-boundaries", 3) == 0);
  }
}

TEST_CASE("LL128 forced with a small NCCL_BUFFSIZE: steps of fewer lines (as many as a Simple slot holds)") {
  // 64 KiB: 8 KiB Simple slots, so 64 lines per LL128 step on every connector.
  ForcedProto forced("LL128");
  matrix::ScopedEnv env;
  env.set("NCCL_BUFFSIZE", "65536");
  env.set("PLEXUS_BUFFSIZE", nullptr);
  CHECK(harness::runThreads(3, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          long bad = 0;
          for (size_t count : {1ul, 3839ul, 3840ul, 3841ul, 40000ul})
            bad += allReduce(comm, stream, rank, nranks, count, ncclFloat16, ncclSum);
          bad += others(comm, stream, rank, nranks, 7681);
          plexusDecision_t d;
          CHECK_NCCL(plexusCommLastDecision(comm, &d));
          if (std::string(d.protocol) != "LL128" || d.chunkBytes != 64 * 120) {
            fprintf(stderr, "rank %d: the last decision ran %s with chunk %zu, not LL128 with %d\n", rank, d.protocol,
                    d.chunkBytes, 64 * 120);
            bad++;
          }
          return bad;
        }) == 0);
}

TEST_CASE("LL, LL128 and Simple alternate on the same connectors (a configuration's rules by size)") {
  char path[] = "/tmp/plexus-protocols-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  std::ofstream(path) << R"({ "version": 1, "tuning": [
    { "collective": "allreduce", "bytes": [0, "1K"], "algorithm": "ring", "protocol": "ll" },
    { "collective": "allreduce", "bytes": ["1K", "256K"], "algorithm": "ring", "protocol": "ll128" },
    { "collective": "allreduce", "algorithm": "ring", "protocol": "simple" } ] })";
  matrix::ScopedEnv env;
  env.set("PLEXUS_CONFIG", path);
  env.set("NCCL_PROTO", nullptr);
  env.set("PLEXUS_PROTO", nullptr);
  CHECK(harness::runThreads(3, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          long bad = 0;
          std::string seen;
          for (int k = 0; k < 9; k++) {
            const size_t count = k % 3 == 0 ? 5 : k % 3 == 1 ? 20000 : 300000;  // 20 B, 80 KB, 1.2 MB
            bad += allReduce(comm, stream, rank, nranks, count, ncclFloat32, ncclSum);
            plexusDecision_t d;
            CHECK_NCCL(plexusCommLastDecision(comm, &d));
            seen += d.protocol;
            seen += ' ';
          }
          if (seen != "LL LL128 Simple LL LL128 Simple LL LL128 Simple ") {
            fprintf(stderr, "rank %d: protocols chosen: %s\n", rank, seen.c_str());
            bad++;
          }
          return bad;
        }) == 0);
  unlink(path);
}

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

TEST_CASE("LL slots between host ranks: a root runs NCCL_LL_BUFFSIZE's slots ahead of its receivers, no more") {
  matrix::ScopedEnv env;
  runsAheadEnv(env, "65536");  // 16 slots of 4 KiB
  ThreadBarrier threads(2);
  CHECK(harness::runThreads(2, [&](int rank, int, ncclComm_t comm, cudaStream_t stream) {
          return runsAhead(rank, comm, stream, 16, [&](const char*) { return threads.wait(rank); });
        }) == 0);
}

TEST_CASE("LL slots between host ranks: 1024 where the node's ranks outnumber its cores, else 64") {
  matrix::ScopedEnv env;
  runsAheadEnv(env, nullptr);
  ThreadBarrier threads(4);
  CHECK(harness::runThreads(4, [&](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          const harness::CoreUse use = harness::coreUse(comm, nranks);
          // 4 ranks have 1024 slots' connections (6 per rank and channel, 4 MiB each) within the 32 MiB budget
          // wherever they share cores: that takes fewer than 8 cores, hence one channel.
          const int slots = use.shared ? 1024 : 64;
          if (rank == 0)
            fprintf(stderr, "%d ranks, %d channel(s), %d cores: %d slots\n", nranks, use.channels, use.cores, slots);
          return runsAhead(rank, comm, stream, slots, [&](const char*) { return threads.wait(rank); });
        }) == 0);
}

TEST_CASE("LL slots between host ranks: a rank that leads, many buffers ahead of a late receiver, loses nothing") {
  // Rank 0 leads (Broadcast's root, Reduce's sender to root 1). It fills rank 1's 16 slots alone, then launches 12
  // buffers' worth more before rank 1 starts: from the first of them on it waits for credit, a quarter of the slots
  // at a time (PeerConns::waitSendCredit). Every value arrives, in order, and neither rank hangs.
  matrix::ScopedEnv env;
  runsAheadEnv(env, "65536");  // 16 slots of 4 KiB
  ThreadBarrier threads(2);
  CHECK(harness::runThreads(2, [&](int rank, int, ncclComm_t comm, cudaStream_t stream) {
          const int slots = 16, ops = 100;
          std::vector<float> warm(2, 1.0f);
          CHECK_NCCL(ncclBroadcast(warm.data(), warm.data(), 2, ncclFloat32, 0, comm, stream));
          CHECK_NCCL(plexusStreamSynchronize(stream));
          if (!threads.wait(rank)) return 1L;
          auto value = [](int r, int k, int e) { return (float)(r * 10000 + k * 2 + e); };
          std::vector<float> bcast(2 * (slots + ops)), in(2 * ops), out(2 * ops, -1.0f);
          for (int k = 0; k < slots + ops; k++)
            for (int e = 0; e < 2; e++) bcast[2 * k + e] = rank == 0 ? value(0, k, e) : -1.0f;
          for (int k = 0; k < ops; k++)
            for (int e = 0; e < 2; e++) in[2 * k + e] = value(rank, k, e);
          auto fill = [&] {
            for (int k = 0; k < slots; k++)
              CHECK_NCCL(ncclBroadcast(&bcast[2 * k], &bcast[2 * k], 2, ncclFloat32, 0, comm, stream));
            return 0L;
          };
          auto more = [&] {
            for (int k = 0; k < ops; k++) {
              CHECK_NCCL(ncclBroadcast(&bcast[2 * (slots + k)], &bcast[2 * (slots + k)], 2, ncclFloat32, 0, comm,
                                       stream));
              CHECK_NCCL(ncclReduce(&in[2 * k], &out[2 * k], 2, ncclFloat32, ncclSum, 1, comm, stream));
            }
            return 0L;
          };
          if (rank == 0) {
            if (fill() != 0) return 1L;
            CHECK_NCCL(plexusStreamSynchronize(stream));  // done alone: rank 1's slots are all full
            if (more() != 0) return 1L;                   // the first of these waits for rank 1
          }
          if (!threads.wait(rank)) return 1L;
          if (rank == 1 && (fill() != 0 || more() != 0)) return 1L;
          const ncclResult_t r = plexusStreamSynchronize(stream);
          if (r != ncclSuccess) {
            fprintf(stderr, "rank %d: %s (%s)\n", rank, ncclGetErrorString(r), ncclGetLastError(comm));
            return 1L;
          }
          long bad = 0;
          for (int k = 0; k < slots + ops; k++)
            for (int e = 0; e < 2; e++) bad += bcast[2 * k + e] != value(0, k, e);
          for (int k = 0; k < ops; k++)
            for (int e = 0; e < 2; e++)
              bad += rank == 1 ? out[2 * k + e] != value(0, k, e) + value(1, k, e) : out[2 * k + e] != -1.0f;
          return bad;
        }) == 0);
}

TEST_CASE("LL slots between host ranks: ranks whose NCCL_LL_BUFFSIZE differ take the smallest") {
  CHECK(harness::runProcesses("protocols-ll-slots-mismatch", 2) == 0);
}

TEST_CASE("NCCL_LL_BUFFSIZE out of range: init fails naming it and the range") {
  matrix::ScopedEnv env;
  env.set("PLEXUS_LL_BUFFSIZE", nullptr);
  for (const char* bytes : {"16K", "128M"}) {
    env.set("NCCL_LL_BUFFSIZE", bytes);
    ncclUniqueId id;
    REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
    ncclComm_t comm = nullptr;
    CHECK(ncclCommInitRank(&comm, 1, id, 0) == ncclInvalidArgument);
    const std::string why = ncclGetLastError(nullptr);
    CAPTURE(why);
    CHECK(why.find("NCCL_LL_BUFFSIZE=") != std::string::npos);
    CHECK(why.find("out of range [32768, 67108864]") != std::string::npos);
  }
}
