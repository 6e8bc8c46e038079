// A sample of the correctness matrix (tests/multirank/matrix.h) for the default suite: every
// collective over five datatypes (1-, 2-, 4- and 8-byte, integer and float, fp8) and every operator
// (PreMulSum with a host and with an in-memory scalar among them), every size class including the
// chunk boundaries, in and out of place, first and last root, Simple, LL and LL128, 3 ranks as threads
// and 2 as processes. The whole matrix is tests/full/test_matrix.cc (ctest -L full).
#include <doctest/doctest.h>

#include "matrix.h"

namespace {

using matrix::Coll;

const matrix::Plan kSample{{ncclInt8, ncclBfloat16, ncclFloat32, ncclUint64, ncclFloat8e5m2},
                           {},  // every operator
                           {},  // every size class
                           /*everyRoot=*/false};
[[maybe_unused]] const bool kRegistered = matrix::registerScenarios("matrix-sample/", &kSample);
const matrix::Launch kLaunches[] = {{false, 3}, {true, 2}};
// algo-tree forced for what it serves: 5 ranks (a re-rooted tree for every root but 0), 2 channels.
const matrix::Launch kTree{false, 5, 2, "tree"};

}  // namespace

TEST_CASE("matrix sample: every collective, 5 types, every operator and size class, Simple, LL and LL128") {
  for (Coll c : matrix::kAllColls)
    for (const char* proto : {"Simple", "LL", "LL128"})
      for (matrix::Launch l : kLaunches) {
        INFO(matrix::collName(c), " proto=", proto, " nranks=", l.nranks, l.processes ? " (processes)" : " (threads)");
        CHECK(matrix::runOne(c, kSample, "matrix-sample/", proto, l) == 0);
      }
}

TEST_CASE("matrix sample: algo-tree (AllReduce, Broadcast, Reduce), Simple, LL and LL128") {
  for (Coll c : {Coll::AllReduce, Coll::Broadcast, Coll::Reduce})
    for (const char* proto : {"Simple", "LL", "LL128"}) {
      INFO(matrix::collName(c), " proto=", proto, " NCCL_ALGO=tree");
      CHECK(matrix::runOne(c, kSample, "matrix-sample/", proto, kTree) == 0);
    }
}
