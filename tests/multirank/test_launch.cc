// Launches through the public API: where a launch's work items travel (the kernel's parameter, or the workFifo ring
// when they do not fit or PLEXUS_WORK_STORAGE=fifo asks), the ring wrapping around under back-pressure, launches
// from several streams kept in order, and point-to-point launches cut to what a channel's step loop holds.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "count.h"
#include "harness.h"

namespace {

long allReduceAndCheck(ncclComm_t comm, cudaStream_t stream, int nranks, std::vector<std::vector<float>>& bufs) {
  for (auto& b : bufs) CHECK_NCCL(ncclAllReduce(b.data(), b.data(), b.size(), ncclFloat32, ncclSum, comm, stream));
  return 0;
}

}  // namespace

TEST_CASE("launch: operations in one group share a launch, beyond the parameter's 63 works they use the workFifo") {
  CHECK(harness::runThreads(3, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          long bad = 0;
          for (int ops : {10, 63, 64, 200}) {
            std::vector<std::vector<float>> bufs(ops, std::vector<float>(17, 0));
            for (int k = 0; k < ops; k++)
              for (auto& v : bufs[k]) v = (float)(rank + k);
            CHECK_NCCL(ncclGroupStart());
            bad += allReduceAndCheck(comm, stream, nranks, bufs);
            CHECK_NCCL(ncclGroupEnd());
            CHECK_NCCL(plexusStreamSynchronize(stream));
            plexusLaunchInfo_t info;
            CHECK_NCCL(plexusCommGetLaunchInfo(comm, &info));
            const int want = ops <= 63 ? 0 : 1;
            if (info.lastStorage != want || info.lastWorks != ops) {
              fprintf(stderr, "rank %d: %d ops: storage %d with %d works, expected %d with %d\n", rank, ops,
                      info.lastStorage, info.lastWorks, want, ops);
              bad++;
            }
            for (int k = 0; k < ops; k++)
              for (float v : bufs[k]) bad += v != (float)(k * nranks + nranks * (nranks - 1) / 2);
          }
          return bad;
        }) == 0);
}

TEST_CASE("launch: PLEXUS_WORK_STORAGE=fifo: thousands of launches wrap the ring, completions free it") {
  setenv("PLEXUS_WORK_STORAGE", "fifo", 1);
  CHECK(harness::runThreads(2, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          long bad = 0;
          const int launches = 2600;  // the ring holds 1024 works: it wraps twice, and the producer waits on it
          std::vector<int> x(launches, 0);
          for (int k = 0; k < launches; k++) {
            x[k] = rank + k;
            CHECK_NCCL(ncclAllReduce(&x[k], &x[k], 1, ncclInt32, ncclSum, comm, stream));
          }
          CHECK_NCCL(plexusStreamSynchronize(stream));
          for (int k = 0; k < launches; k++) bad += x[k] != 2 * k + 1;
          plexusLaunchInfo_t info;
          CHECK_NCCL(plexusCommGetLaunchInfo(comm, &info));
          // Every launch used the ring; the device side (here: the host executor) finished what completions say.
          if (info.lastStorage != 1 || info.fifoProduced != (uint32_t)launches || info.fifoConsumed > info.fifoProduced ||
              info.fifoProduced - info.fifoConsumed > 1024) {
            fprintf(stderr, "rank %d: storage %d, fifo produced %u consumed %u\n", rank, info.lastStorage,
                    info.fifoProduced, info.fifoConsumed);
            bad++;
          }
          return bad;
        }) == 0);
  setenv("PLEXUS_WORK_STORAGE", "bogus", 1);
  ncclComm_t comm;
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  CHECK(ncclCommInitRank(&comm, 1, id, 0) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(nullptr)).find("PLEXUS_WORK_STORAGE=bogus") != std::string::npos);
  unsetenv("PLEXUS_WORK_STORAGE");
}

TEST_CASE("launch: launches from two streams run in launch order") {
  CHECK(harness::runThreads(3, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          cudaStream_t other;
          CHECK_NCCL(plexusStreamCreate(&other));
          long bad = 0;
          std::vector<std::vector<float>> bufs(40, std::vector<float>(1000, (float)rank));
          // Alternating streams: every rank issues the same sequence; a launch overtaking the one before it on the
          // other stream would pair different operations across ranks (wrong sums or a hang).
          for (size_t k = 0; k < bufs.size(); k++)
            CHECK_NCCL(ncclAllReduce(bufs[k].data(), bufs[k].data(), bufs[k].size() - k, ncclFloat32, ncclSum, comm,
                                     k % 2 ? other : stream));
          CHECK_NCCL(plexusStreamSynchronize(stream));
          CHECK_NCCL(plexusStreamSynchronize(other));
          for (size_t k = 0; k < bufs.size(); k++)
            for (size_t i = 0; i < bufs[k].size(); i++)
              bad += bufs[k][i] != (i < bufs[k].size() - k ? (float)(nranks * (nranks - 1) / 2) : (float)rank);
          CHECK_NCCL(plexusStreamDestroy(other));
          return bad;
        }) == 0);
}

TEST_CASE("launch: a group of more sends and receives than a channel's step loop holds is cut into launches") {
  CHECK(harness::runThreads(2, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          const int msgs = 300;  // 600 operations; PLEXUS_P2P_MAX_WORKS is 256 per launch
          const int peer = 1 - rank;
          std::vector<int> s(msgs), r(msgs, -1);
          for (int k = 0; k < msgs; k++) s[k] = rank * 100000 + k;
          CHECK_NCCL(ncclGroupStart());
          for (int k = 0; k < msgs; k++) {
            CHECK_NCCL(ncclSend(&s[k], 1, ncclInt32, peer, comm, stream));
            CHECK_NCCL(ncclRecv(&r[k], 1, ncclInt32, peer, comm, stream));
          }
          CHECK_NCCL(ncclGroupEnd());
          CHECK_NCCL(plexusStreamSynchronize(stream));
          long bad = 0;
          for (int k = 0; k < msgs; k++) bad += r[k] != peer * 100000 + k;
          plexusLaunchInfo_t info;
          CHECK_NCCL(plexusCommGetLaunchInfo(comm, &info));
          if (info.launches < 3) {
            fprintf(stderr, "rank %d: %llu launches for 600 operations\n", rank, (unsigned long long)info.launches);
            bad++;
          }
          return bad;
        }) == 0);
}

TEST_CASE("launch: a lone collective that repeats the previous launch runs again with its own buffers, op and root") {
  CHECK(harness::runThreads(3, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          cudaStream_t other;
          CHECK_NCCL(plexusStreamCreate(&other));
          const int n = 20, count = 5;
          // Per operation k: the input (k * 10 + rank + i + 1, small integers: every operator is exact) and the
          // output, each its own, so that a buffer kept from the previous launch shows in the result.
          std::vector<std::vector<float>> in(3 * n + 2, std::vector<float>(count)), out = in;
          for (size_t k = 0; k < in.size(); k++)
            for (int i = 0; i < count; i++) {
              in[k][i] = (float)(k % n * 10 + rank + i + 1);
              out[k][i] = -1;
            }
          auto value = [&](size_t k, int r, int i) { return (float)(k % n * 10 + r + i + 1); };
          long bad = 0;
          // Broadcast from a root that changes every time, in place every other time: 1 launch decided, 19 repeats.
          for (int k = 0; k < n; k++) {
            float* o = k % 2 ? in[k].data() : out[k].data();
            CHECK_NCCL(ncclBroadcast(in[k].data(), o, count, ncclFloat32, k % nranks, comm, stream));
          }
          // The same on another stream, then back: each decided anew (a launch on another stream waits for the
          // previous one first).
          CHECK_NCCL(ncclBroadcast(in[n].data(), out[n].data(), count, ncclFloat32, 1, comm, other));
          CHECK_NCCL(ncclBroadcast(in[n + 1].data(), out[n + 1].data(), count, ncclFloat32, 2, comm, stream));
          // Reduce with the operator and the root changing: 1 + 19.
          const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin};
          for (int k = 0; k < n; k++)
            CHECK_NCCL(ncclReduce(in[n + 2 + k].data(), out[n + 2 + k].data(), count, ncclFloat32, ops[k % 4],
                                  k % nranks, comm, stream));
          // AllReduce with a scalar that changes (PreMulSum: the work's operator argument): 1 + 19.
          ncclRedOp_t premul[3];
          float scalars[3] = {1, 2, 3};
          for (int s = 0; s < 3; s++)
            CHECK_NCCL(ncclRedOpCreatePreMulSum(&premul[s], &scalars[s], ncclFloat32, ncclScalarHostImmediate, comm));
          for (int k = 0; k < n; k++)
            CHECK_NCCL(ncclAllReduce(in[2 * n + 2 + k].data(), out[2 * n + 2 + k].data(), count, ncclFloat32,
                                     premul[k % 3], comm, stream));
          CHECK_NCCL(plexusStreamSynchronize(stream));
          CHECK_NCCL(plexusStreamSynchronize(other));
          for (int s = 0; s < 3; s++) CHECK_NCCL(ncclRedOpDestroy(premul[s], comm));
          for (int k = 0; k < n + 2; k++) {
            const int root = k < n ? k % nranks : k == n ? 1 : 2;
            const float* o = k < n && k % 2 ? in[k].data() : out[k].data();
            for (int i = 0; i < count; i++) bad += o[i] != value(k, root, i);
          }
          for (int k = 0; k < n; k++) {
            const size_t at = n + 2 + k;
            for (int i = 0; i < count; i++) {
              float want = value(at, 0, i);
              for (int r = 1; r < nranks; r++) {
                const float v = value(at, r, i);
                want = k % 4 == 0 ? want + v : k % 4 == 1 ? want * v : k % 4 == 2 ? std::max(want, v) : std::min(want, v);
              }
              bad += rank == k % nranks ? out[at][i] != want : out[at][i] != -1;
            }
          }
          for (int k = 0; k < n; k++) {
            const size_t at = 2 * n + 2 + k;
            for (int i = 0; i < count; i++) {
              float want = 0;
              for (int r = 0; r < nranks; r++) want += scalars[k % 3] * value(at, r, i);
              bad += out[at][i] != want;
            }
          }
          plexusLaunchInfo_t info;
          CHECK_NCCL(plexusCommGetLaunchInfo(comm, &info));
          if (info.launches != 3 * n + 2 || info.repeats != 3 * (n - 1)) {
            fprintf(stderr, "rank %d: %llu launches, %llu of them repeats; expected %d and %d\n", rank,
                    (unsigned long long)info.launches, (unsigned long long)info.repeats, 3 * n + 2, 3 * (n - 1));
            bad++;
          }
          CHECK_NCCL(plexusStreamDestroy(other));
          return bad;
        }) == 0);
}

namespace {

// More launches than a host stream's ring holds (1024), enqueued without a synchronize: once the ring is full, whoever
// runs the next launch finds the rest published behind it, so launches that may join do (PLEXUS_P2P_JOIN).
constexpr int kRounds = 1100;

long joinedSince(ncclComm_t comm, uint64_t* last) {
  plexusLaunchInfo_t info;
  CHECK_NCCL(plexusCommGetLaunchInfo(comm, &info));
  const long n = (long)(info.joined - *last);
  *last = info.joined;
  return n;
}

// Sends and receives that may run in one pass, then ones that may not, each checked by its values. count elements per
// message: 16 crosses as LL lines, 16384 (64 KiB) zero-copy.
long joinsWhereIndependent(int rank, int nranks, ncclComm_t comm, cudaStream_t stream, size_t count) {
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  long bad = 0;
  uint64_t mark = 0;
  joinedSince(comm, &mark);
  // 1. A ring shift repeated into the same buffers, and AlltoAlls each into buffers of their own: they join.
  std::vector<int32_t> s(count, rank), r(count, -1);
  for (int k = 0; k < kRounds; k++) {
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclSend(s.data(), count, ncclInt32, next, comm, stream));
    CHECK_NCCL(ncclRecv(r.data(), count, ncclInt32, prev, comm, stream));
    CHECK_NCCL(ncclGroupEnd());
  }
  std::vector<std::vector<int32_t>> a2aIn(8, std::vector<int32_t>(count * nranks)), a2aOut = a2aIn;
  for (int k = 0; k < 8; k++)
    for (int p = 0; p < nranks; p++)
      for (size_t i = 0; i < count; i++) a2aIn[k][p * count + i] = (k * 100 + rank) * 100 + p;
  for (int k = 0; k < 8; k++)
    CHECK_NCCL(ncclAlltoAll(a2aIn[k].data(), a2aOut[k].data(), count, ncclInt32, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  for (size_t i = 0; i < count; i++) bad += r[i] != prev;
  for (int k = 0; k < 8; k++)
    for (int p = 0; p < nranks; p++)
      for (size_t i = 0; i < count; i++) bad += a2aOut[k][p * count + i] != (k * 100 + p) * 100 + rank;
  const long joined = joinedSince(comm, &mark);
  if (joined < 1) {
    fprintf(stderr, "rank %d, %zu elements: none of %d independent launches joined the one before it\n", rank, count,
            kRounds + 8);
    bad++;
  }
  // 2. A relay: each round sends what the last one received (and receives into what it sent from): never joined,
  // and after kRounds the value that started kRounds ranks back has arrived.
  std::vector<int32_t> buf[2] = {std::vector<int32_t>(count, rank), std::vector<int32_t>(count, -1)};
  for (int k = 0; k < kRounds; k++) {
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclSend(buf[k % 2].data(), count, ncclInt32, next, comm, stream));
    CHECK_NCCL(ncclRecv(buf[(k + 1) % 2].data(), count, ncclInt32, prev, comm, stream));
    CHECK_NCCL(ncclGroupEnd());
  }
  CHECK_NCCL(plexusStreamSynchronize(stream));
  const int32_t want = (int32_t)(((rank - kRounds) % nranks + nranks) % nranks);
  for (size_t i = 0; i < count; i++) bad += buf[kRounds % 2][i] != want;
  const long wrongJoins = joinedSince(comm, &mark);
  if (wrongJoins || bad)
    fprintf(stderr, "rank %d, %zu elements: %ld dependent launches joined, %ld wrong values\n", rank, count,
            wrongJoins, bad);
  return bad + wrongJoins;
}

long joinScenario(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  return joinsWhereIndependent(rank, nranks, comm, stream, 16) +
         joinsWhereIndependent(rank, nranks, comm, stream, 16384);
}

harness::Scenario joinProcesses("launch-join", joinScenario);

}  // namespace

TEST_CASE("launch: back-to-back sends and receives that cannot see each other's effects run in one pass, a relay "
          "whose rounds depend on each other does not") {
  CHECK(harness::runThreads(3, joinScenario) == 0);
  CHECK(harness::runProcesses("launch-join", 4) == 0);
}

TEST_CASE("launch: PLEXUS_P2P_JOIN=0 runs every launch on its own") {
  setenv("PLEXUS_P2P_JOIN", "0", 1);
  CHECK(harness::runThreads(2, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          const int peer = 1 - rank;
          std::vector<int32_t> s(4, rank), r(4, -1);
          for (int k = 0; k < kRounds; k++) {
            CHECK_NCCL(ncclGroupStart());
            CHECK_NCCL(ncclSend(s.data(), 4, ncclInt32, peer, comm, stream));
            CHECK_NCCL(ncclRecv(r.data(), 4, ncclInt32, peer, comm, stream));
            CHECK_NCCL(ncclGroupEnd());
          }
          CHECK_NCCL(plexusStreamSynchronize(stream));
          uint64_t mark = 0;
          long bad = joinedSince(comm, &mark) != 0;
          for (int32_t v : r) bad += v != peer;
          return bad;
        }) == 0);
  unsetenv("PLEXUS_P2P_JOIN");
}

TEST_CASE("launch: the hang report of a pass of joined launches names the range of operations it runs") {
  // Rank 0's four receives from rank 1 into buffers of their own are enqueued back to back and run as one pass, which
  // waits for rank 1: the report names the first, and the three after it up to the last one's opSeq. A launch delay
  // of 100 ms: the stream's worker takes the first receive (nobody synchronizes) only long after all four are queued.
  setenv("PLEXUS_LAUNCH_DELAY_US", "100000", 1);
  testenv::Count seen;  // 1: rank 0 has read the report
  CHECK(harness::runThreads(2, [&seen](int rank, int, ncclComm_t comm, cudaStream_t stream) {
          std::vector<std::vector<int32_t>> bufs(4, std::vector<int32_t>(16, rank == 1 ? 7 : -1));
          long bad = 0;
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
          if (rank == 1) {
            const bool read = seen.waitFor(1, std::chrono::seconds(30));
            for (auto& b : bufs) CHECK_NCCL(ncclSend(b.data(), 16, ncclInt32, 0, comm, stream));
            CHECK_NCCL(plexusStreamSynchronize(stream));
            return read ? 0L : 1L;
          }
          uint64_t mark = 0;
          joinedSince(comm, &mark);
          for (auto& b : bufs) CHECK_NCCL(ncclRecv(b.data(), 16, ncclInt32, 1, comm, stream));
          char report[16384] = "";
          unsigned long long first = 0, last = 0;
          while (std::chrono::steady_clock::now() < deadline) {
            const char* at = plexusCommHangReport(comm, report, sizeof report) == ncclSuccess
                                 ? strstr(report, "running Recv opSeq ")
                                 : nullptr;
            if (at && strstr(report, "waiting") &&
                sscanf(at, "running Recv opSeq %llu", &first) == 1 && strstr(at, "up to opSeq ") &&
                sscanf(strstr(at, "up to opSeq "), "up to opSeq %llu", &last) == 1)
              break;
            std::this_thread::yield();  // the report has no event to wait on: it is read again until it shows the wait
          }
          if (last != first + 3 || !strstr(report, "or one of the 3 after it")) {
            fprintf(stderr, "the report of the joined pass (opSeq %llu up to %llu):\n%s\n", first, last, report);
            bad++;
          }
          seen.add();
          CHECK_NCCL(plexusStreamSynchronize(stream));
          for (auto& b : bufs)
            for (int32_t v : b) bad += v != 7;
          bad += joinedSince(comm, &mark) != 3;
          return bad;
        }) == 0);
  unsetenv("PLEXUS_LAUNCH_DELAY_US");
}
