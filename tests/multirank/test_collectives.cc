// Broadcast, Reduce, AllGather and ReduceScatter through the public API (ring step loops), ranks as
// threads and as processes, every element checked against a host reference, buffers guarded
// against writes past their end, and inputs that must not change checked too.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "harness.h"

namespace {

using check::typeSize;

// A host buffer of `bytes` plus a guard zone that nothing may write.
constexpr size_t kGuardBytes = 64;
constexpr unsigned char kGuard = 0x5A;
struct Buf {
  std::vector<unsigned char> v;
  size_t bytes;
  Buf(size_t n, unsigned char init) : v(n, init), bytes(n) { v.insert(v.end(), kGuardBytes, kGuard); }
  unsigned char* data() { return v.data(); }
  size_t guardWrong() const {
    size_t w = 0;
    for (size_t j = bytes; j < v.size(); j++) w += v[j] != kGuard;
    return w;
  }
};

long report(size_t wrong, const char* what, int rank, int nranks, size_t count, ncclDataType_t type, int op, int root,
            bool inPlace) {
  if (wrong)
    fprintf(stderr, "rank %d/%d: %s count %zu type %d op %d root %d %s: %zu wrong\n", rank, nranks, what, count,
            (int)type, op, root, inPlace ? "in-place" : "out-of-place", wrong);
  return (long)wrong;
}

// Bytes of buf that differ from fill<T>(op, rank) over count elements (an input that must not change).
size_t changedInput(const void* buf, size_t count, ncclDataType_t type, ncclRedOp_t op, int rank) {
  std::vector<unsigned char> expect(count * typeSize(type) + 1);
  check::withType(type, [&](auto t) { check::fill<decltype(t)>(expect.data(), count, op, rank); return 0; });
  return memcmp(buf, expect.data(), count * typeSize(type)) != 0;
}

// Broadcast of count elements from root. In place goes through ncclBcast; out of place, non-root ranks
// pass no sendbuff.
long broadcastOnce(int rank, int nranks, ncclComm_t comm, cudaStream_t stream, size_t count, ncclDataType_t type,
                   int root, bool inPlace) {
  const size_t bytes = count * typeSize(type);
  Buf send(bytes, 0), recv(bytes, 0xEE);
  if (inPlace) {
    if (rank == root) check::fillPattern(recv.data(), bytes, root);
    CHECK_NCCL(ncclBcast(recv.data(), count, type, root, comm, stream));
  } else {
    if (rank == root) check::fillPattern(send.data(), bytes, root);
    CHECK_NCCL(ncclBroadcast(rank == root ? send.data() : nullptr, recv.data(), count, type, root, comm, stream));
  }
  CHECK_NCCL(plexusStreamSynchronize(stream));
  size_t wrong = check::verifyBroadcast(recv.data(), bytes, root) + recv.guardWrong() + send.guardWrong();
  if (!inPlace && rank == root) wrong += check::verifyPattern(send.data(), bytes, root);
  return report(wrong, "Broadcast", rank, nranks, count, type, ncclSum, root, inPlace);
}

// Reduce of count elements to root. Non-root ranks pass no recvbuff out of place, their sendbuff in
// place; either way their input must stay as it was.
long reduceOnce(int rank, int nranks, ncclComm_t comm, cudaStream_t stream, size_t count, ncclDataType_t type,
                ncclRedOp_t op, int root, bool inPlace) {
  const size_t bytes = count * typeSize(type);
  Buf send(bytes, 0), recv(bytes, 0xEE);
  check::withType(type, [&](auto t) { check::fill<decltype(t)>(send.data(), count, op, rank); return 0; });
  void* out = inPlace ? send.data() : rank == root ? recv.data() : nullptr;
  CHECK_NCCL(ncclReduce(send.data(), out, count, type, op, root, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  size_t wrong = send.guardWrong() + recv.guardWrong();
  if (rank == root)
    wrong += check::withType(type, [&](auto t) { return check::verifyReduced<decltype(t)>(out, count, op, nranks, 0); });
  if (rank != root || !inPlace) wrong += changedInput(send.data(), count, type, op, rank);
  if (rank != root && !inPlace) {
    for (size_t j = 0; j < bytes; j++) wrong += recv.data()[j] != 0xEE;
  }
  return report(wrong, "Reduce", rank, nranks, count, type, op, root, inPlace);
}

// AllGather of count elements per rank. In place: sendbuff is this rank's block of recvbuff.
long allGatherOnce(int rank, int nranks, ncclComm_t comm, cudaStream_t stream, size_t count, ncclDataType_t type,
                   bool inPlace) {
  const size_t block = count * typeSize(type);
  Buf send(block, 0), recv(block * nranks, 0xEE);
  const void* in;
  if (inPlace) {
    check::fillPattern(recv.data() + rank * block, block, rank);
    in = recv.data() + rank * block;
  } else {
    check::fillPattern(send.data(), block, rank);
    in = send.data();
  }
  CHECK_NCCL(ncclAllGather(in, recv.data(), count, type, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  size_t wrong = check::verifyAllGather(recv.data(), block, nranks) + recv.guardWrong() + send.guardWrong();
  if (!inPlace) wrong += check::verifyPattern(send.data(), block, rank);
  return report(wrong, "AllGather", rank, nranks, count, type, ncclSum, -1, inPlace);
}

// ReduceScatter of count elements per rank. In place: recvbuff is this rank's block of sendbuff.
long reduceScatterOnce(int rank, int nranks, ncclComm_t comm, cudaStream_t stream, size_t count,
                       ncclDataType_t type, ncclRedOp_t op, bool inPlace) {
  const size_t block = count * typeSize(type);
  Buf send(block * nranks, 0), recv(block, 0xEE);
  check::withType(type, [&](auto t) { check::fill<decltype(t)>(send.data(), count * nranks, op, rank); return 0; });
  void* out = inPlace ? (void*)(send.data() + rank * block) : (void*)recv.data();
  CHECK_NCCL(ncclReduceScatter(send.data(), out, count, type, op, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  size_t wrong = send.guardWrong() + recv.guardWrong();
  wrong += check::withType(type, [&](auto t) {
    return check::verifyReduced<decltype(t)>(out, count, op, nranks, (size_t)rank * count);
  });
  if (!inPlace) wrong += changedInput(send.data(), count * nranks, type, op, rank);
  return report(wrong, "ReduceScatter", rank, nranks, count, type, op, -1, inPlace);
}

// The four collectives over counts, in and out of place, Broadcast and Reduce from every root.
long sizesMatrix(int rank, int nranks, ncclComm_t comm, cudaStream_t stream, const std::vector<size_t>& counts,
                 ncclDataType_t type = ncclFloat32) {
  long bad = 0;
  for (size_t count : counts)
    for (bool inPlace : {false, true}) {
      for (int root = 0; root < nranks; root++) {
        bad += broadcastOnce(rank, nranks, comm, stream, count, type, root, inPlace);
        bad += reduceOnce(rank, nranks, comm, stream, count, type, ncclSum, root, inPlace);
      }
      bad += allGatherOnce(rank, nranks, comm, stream, count, type, inPlace);
      bad += reduceScatterOnce(rank, nranks, comm, stream, count, type, ncclSum, inPlace);
    }
  return bad;
}

const std::vector<size_t> kCounts = {0, 1, 7, 1027, 1 << 18 /* 1 MiB of floats */};

harness::Scenario processBasic("collectives-basic", [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  return sizesMatrix(rank, nranks, comm, stream, kCounts);
});

}  // namespace

TEST_CASE("collectives: ranks as threads (1, 2, 3, 4, 8), sizes 0..1 MiB, every root, in and out of place") {
  for (int n : {1, 2, 3, 4, 8}) {
    CAPTURE(n);
    CHECK(harness::runThreads(n, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
            return sizesMatrix(rank, nranks, comm, stream, kCounts);
          }) == 0);
  }
}

TEST_CASE("collectives: ranks as processes (2, 4)") {
  for (int n : {2, 4}) {
    CAPTURE(n);
    CHECK(harness::runProcesses("collectives-basic", n) == 0);
  }
}

TEST_CASE("collectives: every type, every operation") {
  CHECK(harness::runThreads(3, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          long bad = 0;
          for (int ti = 0; ti < ncclNumTypes; ti++) {
            const ncclDataType_t t = (ncclDataType_t)ti;
            for (size_t count : {(size_t)5, (size_t)1031}) {
              bad += broadcastOnce(rank, nranks, comm, stream, count, t, 1, false);
              bad += broadcastOnce(rank, nranks, comm, stream, count, t, 2, true);
              bad += allGatherOnce(rank, nranks, comm, stream, count, t, false);
              bad += allGatherOnce(rank, nranks, comm, stream, count, t, true);
            }
            for (int op = 0; op < ncclNumOps; op++) {
              bad += reduceOnce(rank, nranks, comm, stream, 1031, t, (ncclRedOp_t)op, 2, false);
              bad += reduceOnce(rank, nranks, comm, stream, 1031, t, (ncclRedOp_t)op, 0, true);
              bad += reduceScatterOnce(rank, nranks, comm, stream, 1031, t, (ncclRedOp_t)op, false);
              bad += reduceScatterOnce(rank, nranks, comm, stream, 1031, t, (ncclRedOp_t)op, true);
            }
          }
          return bad;
        }) == 0);
}

TEST_CASE("collectives: one rank applies the operator's pre and post ops") {
  CHECK(harness::runThreads(1, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          long bad = 0;
          for (ncclDataType_t t : {ncclFloat32, ncclInt32, ncclFloat16, ncclUint8})
            for (int op = 0; op < ncclNumOps; op++)
              for (bool inPlace : {false, true}) {
                bad += reduceOnce(rank, nranks, comm, stream, 1031, t, (ncclRedOp_t)op, 0, inPlace);
                bad += reduceScatterOnce(rank, nranks, comm, stream, 1031, t, (ncclRedOp_t)op, inPlace);
              }
          return bad;
        }) == 0);
}

TEST_CASE("collectives: PreMulSum operators from ncclRedOpCreatePreMulSum") {
  CHECK(harness::runThreads(4, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          long bad = 0;
          const size_t count = 1027;
          float fs = 3.0f;
          int32_t is = 3;
          for (ncclDataType_t t : {ncclFloat32, ncclInt32}) {
            ncclRedOp_t op;
            CHECK_NCCL(ncclRedOpCreatePreMulSum(&op, t == ncclFloat32 ? (void*)&fs : (void*)&is, t, ncclScalarHostImmediate,
                                                comm));
            Buf send(count * nranks * 4, 0), recv(count * nranks * 4, 0);
            check::withType(t, [&](auto x) { check::fill<decltype(x)>(send.data(), count * nranks, ncclSum, rank); return 0; });
            CHECK_NCCL(ncclReduce(send.data(), recv.data(), count, t, op, nranks - 1, comm, stream));
            CHECK_NCCL(plexusStreamSynchronize(stream));
            auto expect = [&](size_t i) {
              return 3.0 * check::withType(t, [&](auto x) {
                       return check::toDouble(check::reduceRanks<decltype(x)>(ncclSum, nranks, i));
                     });
            };
            auto got = [&](size_t i) {
              return t == ncclFloat32 ? (double)((float*)recv.data())[i] : (double)((int32_t*)recv.data())[i];
            };
            size_t wrong = 0;
            if (rank == nranks - 1)
              for (size_t i = 0; i < count; i++) wrong += got(i) != expect(i);
            CHECK_NCCL(ncclReduceScatter(send.data(), recv.data(), count, t, op, comm, stream));
            CHECK_NCCL(plexusStreamSynchronize(stream));
            for (size_t i = 0; i < count; i++) wrong += got(i) != expect(rank * count + i);
            bad += report(wrong, "PreMulSum Reduce/ReduceScatter", rank, nranks, count, t, (int)op, nranks - 1, false);
            CHECK_NCCL(ncclRedOpDestroy(op, comm));
          }
          return bad;
        }) == 0);
}

TEST_CASE("collectives: several channels split the buffer, odd channels run the ring backwards") {
  setenv("PLEXUS_MIN_NCHANNELS", "3", 1);
  setenv("PLEXUS_MIN_CHANNEL_BYTES", "4096", 1);
  setenv("NCCL_ALGO", "ring", 1);  // the tree would take Broadcast and Reduce
  long bad = harness::runThreads(3, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
    long b = sizesMatrix(rank, nranks, comm, stream, {1, 4099, 100003});
    b += sizesMatrix(rank, nranks, comm, stream, {1029}, ncclInt8);
    // Each collective is planned on the ring plugin over three channels.
    plexusDecision_t d;
    std::vector<float> buf(3 * 100003);
    CHECK_NCCL(ncclAllGather(buf.data() + rank * 100003, buf.data(), 100003, ncclFloat32, comm, stream));
    if (plexusCommLastDecision(comm, &d) != ncclSuccess || d.nChannels != 3 || std::string(d.algorithm) != "ring") b++;
    CHECK_NCCL(ncclBroadcast(buf.data(), buf.data(), 100003, ncclFloat32, 1, comm, stream));
    if (plexusCommLastDecision(comm, &d) != ncclSuccess || d.nChannels != 3 || std::string(d.algorithm) != "ring") b++;
    CHECK_NCCL(plexusStreamSynchronize(stream));
    return b;
  });
  unsetenv("PLEXUS_MIN_NCHANNELS");
  unsetenv("PLEXUS_MIN_CHANNEL_BYTES");
  unsetenv("NCCL_ALGO");
  CHECK(bad == 0);
}

TEST_CASE("collectives: small buffers stream through many steps") {
  setenv("PLEXUS_BUFFSIZE", "65536", 1);  // 8 KiB steps: a 1 MiB collective takes hundreds of them
  long bad = harness::runThreads(4, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
    long b = sizesMatrix(rank, nranks, comm, stream, {1 << 18, 100003});
    for (int root : {1, 2}) {
      b += reduceOnce(rank, nranks, comm, stream, 100003, ncclInt32, ncclMax, root, false);
      b += reduceOnce(rank, nranks, comm, stream, 100003, ncclFloat32, ncclAvg, root, true);
    }
    b += reduceScatterOnce(rank, nranks, comm, stream, 100003, ncclInt32, ncclAvg, false);
    b += reduceScatterOnce(rank, nranks, comm, stream, 100003, ncclFloat32, ncclMin, true);
    return b;
  });
  unsetenv("PLEXUS_BUFFSIZE");
  CHECK(bad == 0);
}

TEST_CASE("collectives: 16 MiB with ranks as threads (several chunks on several channels)") {
  for (int n : {2, 4}) {
    CAPTURE(n);
    CHECK(harness::runThreads(n, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
            const size_t big = 4 << 20, block = big / nranks;  // 16 MiB of floats
            return broadcastOnce(rank, nranks, comm, stream, big, ncclFloat32, nranks - 1, false) +
                   reduceOnce(rank, nranks, comm, stream, big, ncclInt32, ncclSum, 1, true) +
                   allGatherOnce(rank, nranks, comm, stream, block + 3, ncclFloat32, true) +
                   reduceScatterOnce(rank, nranks, comm, stream, block + 5, ncclFloat32, ncclSum, false);
          }) == 0);
  }
}

TEST_CASE("collectives: all four in one group, with AllReduce") {
  CHECK(harness::runThreads(3, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          const size_t count = 1029;
          const size_t bytes = count * sizeof(float);
          Buf bsend(bytes, 0), brecv(bytes, 0), rsend(bytes, 0), rrecv(bytes, 0), gsend(bytes, 0),
              grecv(bytes * nranks, 0), ssend(bytes * nranks, 0), srecv(bytes, 0), asend(bytes, 0), arecv(bytes, 0);
          check::fillPattern(bsend.data(), bytes, 2);
          check::fill<float>(rsend.data(), count, ncclSum, rank);
          check::fillPattern(gsend.data(), bytes, rank);
          check::fill<float>(ssend.data(), count * nranks, ncclSum, rank);
          check::fill<float>(asend.data(), count, ncclSum, rank);
          CHECK_NCCL(ncclGroupStart());
          CHECK_NCCL(ncclBroadcast(bsend.data(), brecv.data(), count, ncclFloat32, 2, comm, stream));
          CHECK_NCCL(ncclReduce(rsend.data(), rrecv.data(), count, ncclFloat32, ncclSum, 0, comm, stream));
          CHECK_NCCL(ncclAllGather(gsend.data(), grecv.data(), count, ncclFloat32, comm, stream));
          CHECK_NCCL(ncclReduceScatter(ssend.data(), srecv.data(), count, ncclFloat32, ncclSum, comm, stream));
          CHECK_NCCL(ncclAllReduce(asend.data(), arecv.data(), count, ncclFloat32, ncclSum, comm, stream));
          CHECK_NCCL(ncclGroupEnd());
          CHECK_NCCL(plexusStreamSynchronize(stream));
          size_t wrong = check::verifyBroadcast(brecv.data(), bytes, 2) + check::verifyAllGather(grecv.data(), bytes, nranks) +
                         check::verifyReduced<float>(srecv.data(), count, ncclSum, nranks, (size_t)rank * count) +
                         check::verifyAllReduce<float>(arecv.data(), count, ncclSum, nranks);
          if (rank == 0) wrong += check::verifyReduced<float>(rrecv.data(), count, ncclSum, nranks, 0);
          return report(wrong, "grouped collectives", rank, nranks, count, ncclFloat32, ncclSum, -1, false);
        }) == 0);
}
