// The full correctness matrix (ctest -L full): every collective x all 12 datatypes x every operator
// (Sum, Prod, Max, Min, Avg, PreMulSum with a host-immediate and with an in-memory scalar) where it
// reduces x in and out of place x every root x sizes 0, 1, odd, chunk boundary -1/0/+1 and several
// chunks x NCCL_PROTO=Simple, LL and LL128, with 2, 3 and 4 ranks as threads and 2 and 3 as processes (and
// 1 and 8 ranks, and 3 ranks over 3 channels, as threads).
// The engine and the dimensions are in tests/multirank/matrix.h; a sample of it runs in the default
// suite (tests/multirank/test_matrix_sample.cc).
#include <doctest/doctest.h>

#include <iterator>
#include <vector>

#include "matrix.h"

namespace {

using matrix::Coll;

const matrix::Plan kFull{};  // every type, operator, size class and root
[[maybe_unused]] const bool kRegistered = matrix::registerScenarios("matrix-full/", &kFull);
// 2, 3, 4 ranks as threads and 2, 3 as processes; also 1 rank (the operators' pre and post ops alone),
// 8 ranks, and 3 ranks with every collective beyond a few KiB split over 3 channels.
const matrix::Launch kLaunches[] = {{false, 2}, {false, 3}, {false, 4}, {true, 2},     {true, 3},
                                    {false, 1}, {false, 8}, {false, 3, /*channels=*/3}};

// algo-tree forced (NCCL_ALGO=tree) for the collectives it serves: threads and processes, odd and
// power-of-two rank counts, and both trees of the double tree (2 channels).
const matrix::Launch kTreeLaunches[] = {{false, 2, 0, "tree"}, {false, 5, 0, "tree"}, {false, 8, 0, "tree"},
                                        {true, 3, 0, "tree"},  {false, 4, 2, "tree"}};

void runMatrix(Coll c) {
  const bool tree = c == Coll::AllReduce || c == Coll::Broadcast || c == Coll::Reduce;
  for (const char* proto : {"Simple", "LL", "LL128"}) {
    std::vector<matrix::Launch> launches(std::begin(kLaunches), std::end(kLaunches));
    if (tree) launches.insert(launches.end(), std::begin(kTreeLaunches), std::end(kTreeLaunches));
    for (matrix::Launch l : launches) {
      INFO(matrix::collName(c), " proto=", proto, " nranks=", l.nranks, l.processes ? " (processes)" : " (threads)",
           " channels=", l.channels, " algo=", l.algo ? l.algo : "(planner)");
      CHECK(matrix::runOne(c, kFull, "matrix-full/", proto, l) == 0);
    }
  }
}

}  // namespace

TEST_CASE("matrix: AllReduce") { runMatrix(Coll::AllReduce); }
TEST_CASE("matrix: Broadcast") { runMatrix(Coll::Broadcast); }
TEST_CASE("matrix: Reduce") { runMatrix(Coll::Reduce); }
TEST_CASE("matrix: AllGather") { runMatrix(Coll::AllGather); }
TEST_CASE("matrix: ReduceScatter") { runMatrix(Coll::ReduceScatter); }
TEST_CASE("matrix: AlltoAll") { runMatrix(Coll::AlltoAll); }
TEST_CASE("matrix: Gather") { runMatrix(Coll::Gather); }
TEST_CASE("matrix: Scatter") { runMatrix(Coll::Scatter); }
TEST_CASE("matrix: grouped Send/Recv") { runMatrix(Coll::SendRecv); }
