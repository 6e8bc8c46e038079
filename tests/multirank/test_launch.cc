// Launches through the public API: where a launch's work items travel (the kernel's parameter, or the workFifo ring
// when they do not fit or PLEXUS_WORK_STORAGE=fifo asks), the ring wrapping around under back-pressure, launches
// from several streams kept in order, and point-to-point launches cut to what a channel's step loop holds.
#include <doctest/doctest.h>

#include <cstdlib>
#include <vector>

#include "check.h"
#include "harness.h"

namespace {

long allReduceAndCheck(ncclComm_t comm, cudaStream_t stream, int nranks, std::vector<std::vector<float>>& bufs) {
  for (auto& b : bufs) CHECK_NCCL(ncclAllReduce(b.data(), b.data(), b.size(), ncclFloat32, ncclSum, comm, stream));
  return 0;
}

}  // namespace

TEST_CASE("launch: operations in one group share a launch; beyond the parameter's 63 works they use the workFifo") {
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
