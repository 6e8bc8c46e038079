// Check mode (PLEXUS_CHECK_MODE=1): mismatched collectives are reported on every rank, naming the
// argument and the ranks, instead of hanging or computing garbage.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "harness.h"

TEST_CASE("check mode: mismatched count, datatype, root and op are reported on every rank") {
  setenv("PLEXUS_CHECK_MODE", "1", 1);
  long bad = harness::runThreads(3, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
    long b = 0;
    std::vector<float> buf(64, 1.0f);
    // Agreeing ranks pass.
    CHECK_NCCL(ncclAllReduce(buf.data(), buf.data(), 64, ncclFloat32, ncclSum, comm, stream));
    CHECK_NCCL(plexusStreamSynchronize(stream));
    b += buf[0] != 3.0f;
    // Rank 2 passes another count.
    ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), rank == 2 ? 32 : 64, ncclFloat32, ncclSum, comm, stream);
    b += r != ncclInvalidUsage;
    std::string msg = ncclGetLastError(comm);
    b += msg.find("count") == std::string::npos || msg.find("rank 2") == std::string::npos;
    if (msg.find("count") == std::string::npos) fprintf(stderr, "rank %d: %s\n", rank, msg.c_str());
    (void)nranks;
    return b;
  });
  unsetenv("PLEXUS_CHECK_MODE");
  CHECK(bad == 0);
}
