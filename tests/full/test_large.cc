// Buffers beyond 2^31 elements (int8): counts and offsets must be 64-bit all the way through.
// Several GiB of memory and seconds per case: part of the full suite (ctest -L full).
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "harness.h"

TEST_CASE("allreduce of more than 2^31 int8 elements") {
  const size_t count = (size_t{1} << 31) + 4099;
  CHECK(harness::runThreads(2, [count](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          std::vector<int8_t> buf(count);
          for (size_t i = 0; i < count; i += 4096) buf[i] = (int8_t)(rank + 1);
          buf[count - 1] = (int8_t)(rank + 1);
          CHECK_NCCL(ncclAllReduce(buf.data(), buf.data(), count, ncclInt8, ncclSum, comm, stream));
          CHECK_NCCL(plexusStreamSynchronize(stream));
          long wrong = 0;
          for (size_t i = 0; i < count; i++) {
            int8_t expect = (i % 4096 == 0 || i == count - 1) ? (int8_t)(nranks * (nranks + 1) / 2) : 0;
            wrong += buf[i] != expect;
          }
          return wrong;
        }) == 0);
}

TEST_CASE("send/recv of more than 2^31 bytes") {
  const size_t count = (size_t{1} << 31) + 17;
  CHECK(harness::runThreads(2, [count](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          std::vector<int8_t> buf(count, rank == 0 ? 0 : -1);
          for (size_t i = 0; rank == 0 && i < count; i += 65537) buf[i] = (int8_t)(i / 65537);
          buf[count - 1] = rank == 0 ? 42 : -1;
          if (rank == 0)
            CHECK_NCCL(ncclSend(buf.data(), count, ncclInt8, 1, comm, stream));
          else
            CHECK_NCCL(ncclRecv(buf.data(), count, ncclInt8, 0, comm, stream));
          CHECK_NCCL(plexusStreamSynchronize(stream));
          long wrong = 0;
          if (rank == 1) {
            for (size_t i = 0; i + 1 < count; i++) wrong += buf[i] != (i % 65537 == 0 ? (int8_t)(i / 65537) : 0);
            wrong += buf[count - 1] != 42;
          }
          (void)nranks;
          return wrong;
        }) == 0);
}
