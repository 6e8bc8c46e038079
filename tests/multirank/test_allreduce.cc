// AllReduce through the public API, ranks as threads and as processes, every element checked.
#include <doctest/doctest.h>

#include <cstdlib>
#include <vector>

#include "check.h"
#include "harness.h"

namespace {

// One AllReduce of count elements, checked. inPlace uses one buffer for both.
long allReduceOnce(int rank, int nranks, ncclComm_t comm, cudaStream_t stream, size_t count, ncclDataType_t type,
                   ncclRedOp_t op, bool inPlace) {
  size_t bytes = count * check::typeSize(type);
  std::vector<char> send(bytes + 1), recv(bytes + 1);
  check::withType(type, [&](auto t) { check::fill<decltype(t)>(send.data(), count, op, rank); return 0; });
  void* out = inPlace ? send.data() : recv.data();
  CHECK_NCCL(ncclAllReduce(send.data(), out, count, type, op, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  size_t wrong = check::withType(type, [&](auto t) { return check::verifyAllReduce<decltype(t)>(out, count, op, nranks); });
  if (wrong)
    fprintf(stderr, "rank %d/%d: AllReduce count %zu type %d op %d %s: %zu wrong\n", rank, nranks, count, (int)type,
            (int)op, inPlace ? "in-place" : "out-of-place", wrong);
  return (long)wrong;
}

long sizesMatrix(int rank, int nranks, ncclComm_t comm, cudaStream_t stream, const std::vector<size_t>& counts) {
  long bad = 0;
  for (size_t count : counts)
    for (ncclDataType_t type : {ncclFloat32, ncclInt32})
      for (bool inPlace : {false, true}) bad += allReduceOnce(rank, nranks, comm, stream, count, type, ncclSum, inPlace);
  return bad;
}

const std::vector<size_t> kCounts = {0, 1, 7, (1024 + 3) / 4 * 4 + 3, 1 << 18 /* 1 MiB of floats */};

harness::Scenario processBasic("allreduce-basic", [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  long bad = sizesMatrix(rank, nranks, comm, stream, kCounts);
  if (nranks <= 4) bad += allReduceOnce(rank, nranks, comm, stream, 16 << 20, ncclFloat32, ncclSum, nranks == 4);
  return bad;
});

}  // namespace

TEST_CASE("allreduce: ranks as threads, sizes 0..1 MiB, float and int, in and out of place") {
  for (int n : {1, 2, 3, 4, 8}) {
    CAPTURE(n);
    CHECK(harness::runThreads(n, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
            return sizesMatrix(rank, nranks, comm, stream, kCounts);
          }) == 0);
  }
}

TEST_CASE("allreduce: 64 MiB with ranks as threads") {
  for (int n : {2, 4}) {
    CAPTURE(n);
    CHECK(harness::runThreads(n, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
            return allReduceOnce(rank, nranks, comm, stream, 16 << 20, ncclFloat32, ncclSum, false) +
                   allReduceOnce(rank, nranks, comm, stream, 16 << 20, ncclInt32, ncclSum, true);
          }) == 0);
  }
}

TEST_CASE("allreduce: every type and operation") {
  CHECK(harness::runThreads(3, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          long bad = 0;
          for (int t = 0; t < ncclNumTypes; t++)
            for (int op = 0; op < ncclNumOps; op++)
              bad += allReduceOnce(rank, nranks, comm, stream, 1031, (ncclDataType_t)t, (ncclRedOp_t)op, false);
          return bad;
        }) == 0);
}

TEST_CASE("allreduce: ranks as processes (2, 3, 4, 8)") {
  for (int n : {2, 3, 4, 8}) {
    CAPTURE(n);
    CHECK(harness::runProcesses("allreduce-basic", n) == 0);
  }
}

TEST_CASE("allreduce: several channels split the buffer") {
  setenv("PLEXUS_MIN_NCHANNELS", "3", 1);
  setenv("PLEXUS_MIN_CHANNEL_BYTES", "4096", 1);
  long bad = harness::runThreads(3, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
    int nch = 0;
    ncclResult_t r = plexusCommChannelCount(comm, &nch);
    long b = (r != ncclSuccess || nch != 3) ? 1 : 0;
    b += sizesMatrix(rank, nranks, comm, stream, {1, 4099, 1 << 20});
    plexusDecision_t d;
    if (plexusCommLastDecision(comm, &d) != ncclSuccess || d.nChannels != 3) b++;
    return b;
  });
  unsetenv("PLEXUS_MIN_NCHANNELS");
  unsetenv("PLEXUS_MIN_CHANNEL_BYTES");
  CHECK(bad == 0);
}

TEST_CASE("allreduce: small buffers stream through many steps and many grouped operations") {
  setenv("PLEXUS_BUFFSIZE", "65536", 1);  // 8 KiB steps: a 1 MiB AllReduce takes hundreds of them
  long bad = harness::runThreads(4, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
    long b = sizesMatrix(rank, nranks, comm, stream, {1 << 18, 100003});
    // More operations in one group than half the workFifo holds: launched in several batches.
    const int nops = 1500, count = 33;
    std::vector<std::vector<float>> bufs(nops, std::vector<float>(count));
    for (int k = 0; k < nops; k++)
      for (int i = 0; i < count; i++) bufs[k][i] = (float)(rank + k + i);
    CHECK_NCCL(ncclGroupStart());
    for (int k = 0; k < nops; k++)
      CHECK_NCCL(ncclAllReduce(bufs[k].data(), bufs[k].data(), count, ncclFloat32, ncclSum, comm, stream));
    CHECK_NCCL(ncclGroupEnd());
    CHECK_NCCL(plexusStreamSynchronize(stream));
    for (int k = 0; k < nops; k++)
      for (int i = 0; i < count; i++)
        if (bufs[k][i] != (float)(nranks * (nranks - 1) / 2 + nranks * (k + i))) b++;
    return b;
  });
  unsetenv("PLEXUS_BUFFSIZE");
  CHECK(bad == 0);
}
