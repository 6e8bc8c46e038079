// Ranks on different "nodes" (PLEXUS_HOSTID per node, processes of this machine): every collective
// and point-to-point between nodes goes through the net transport and the proxy, over the built-in
// socket net and over each net plugin (net-ucx, net-ofi) when it was built; ranks of one node still
// use p2p-nvlink among themselves. Every element is checked (the correctness matrix of
// tests/multirank/matrix.h, a sample of types, operators and size classes).
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "matrix.h"
#include "nets.h"
#include "skip.h"

namespace {

using matrix::Coll;
using namespace nets;

const matrix::Plan kNetSample{{ncclInt8, ncclFloat32, ncclFloat64},
                              {matrix::Op::Sum, matrix::Op::Max},
                              {},  // every size class, the chunk boundaries among them
                              /*everyRoot=*/false};
[[maybe_unused]] const bool kRegistered = matrix::registerScenarios("net/", &kNetSample);

long runNet(const Net& n, Coll c, const char* proto, matrix::Launch l) {
  matrix::ScopedEnv env;
  env.set("NCCL_NET_PLUGIN", n.pluginFile.empty() ? "none" : n.name.c_str());
  for (auto& [k, v] : n.env) env.set(k, v);
  return matrix::runOne(c, kNetSample, "net/", proto, l);
}

}  // namespace

TEST_CASE("net: every collective across 2 nodes of 2 ranks over the built-in socket net, Simple, LL and LL128") {
  for (Coll c : matrix::kAllColls)
    for (const char* proto : {"Simple", "LL", "LL128"}) {
      INFO(matrix::collName(c), " proto=", proto);
      CHECK(runNet(kSocket, c, proto, matrix::Launch{true, 4, 0, nullptr, 2}) == 0);
    }
}

TEST_CASE("net: AllReduce, AllGather, Broadcast and Send/Recv across 3 nodes of 2 ranks, 2 channels") {
  for (Coll c : {Coll::AllReduce, Coll::AllGather, Coll::Broadcast, Coll::SendRecv})
    for (const char* proto : {"Simple", "LL", "LL128"}) {
      INFO(matrix::collName(c), " proto=", proto);
      CHECK(runNet(kSocket, c, proto, matrix::Launch{true, 6, 2, nullptr, 2}) == 0);
    }
}

TEST_CASE("net: the tree across nodes (one rank per node and two per node)") {
  // LL128: a rank of a two-rank node reduces lines from its node peer (p2p-nvlink's LL128 buffer) with
  // lines from another node (Simple slots behind the proxy) in one step.
  for (Coll c : {Coll::AllReduce, Coll::Broadcast, Coll::Reduce})
    for (int perNode : {1, 2})
      for (const char* proto : {"Simple", "LL128"}) {
        INFO(matrix::collName(c), " ranks per node=", perNode, " proto=", proto);
        CHECK(runNet(kSocket, c, proto, matrix::Launch{true, 4, 0, "tree", perNode}) == 0);
      }
}

void acrossNodesOver(const Net& n) {
  if (!available(n)) {
    testskip::skip(n.path() + " was not built (its library's development files are missing)");
    return;
  }
  for (Coll c : {Coll::AllReduce, Coll::AllGather, Coll::Broadcast, Coll::SendRecv})
    for (int nodes : {2, 3}) {
      INFO(n.name.c_str(), " ", matrix::collName(c), " nodes=", nodes);
      CHECK(runNet(n, c, "Simple", matrix::Launch{true, 2 * nodes, 0, nullptr, 2}) == 0);
    }
}

TEST_CASE("net: AllReduce, AllGather, Broadcast and Send/Recv across 2 and 3 nodes over net-ucx") { acrossNodesOver(kUcx); }

TEST_CASE("net: AllReduce, AllGather, Broadcast and Send/Recv across 2 and 3 nodes over net-ofi") { acrossNodesOver(kOfi); }

TEST_CASE("net: a communicator runs over a plugin of each old ABI version (v6..v11), through the adapters") {
  for (int v = 6; v <= 11; v++) {
    const std::string file = testPlugin("test-v" + std::to_string(v));
    INFO("NCCL_NET_PLUGIN=", file.c_str());
    CHECK(runNet(Net{file, file, {}}, Coll::AllReduce, "Simple", matrix::Launch{true, 2, 0, nullptr, 1}) == 0);
    CHECK(runNet(Net{file, file, {}}, Coll::SendRecv, "LL", matrix::Launch{true, 2, 0, nullptr, 1}) == 0);
  }
}

// Plugins as they are in the field (tests/plugins/field_net.cc): NCCL runs over each of these behaviours, so
// Plexus must, with every element right.
TEST_CASE("net: plugins that bend NCCL's rules as real ones do: each behaviour, 2 and 4 nodes") {
  struct Field {
    const char* plugin;
    const char* quirks;
  };
  const Field fields[] = {
      {"field-v6", "blocking-accept"},  // two ranks that both accepted first would wait on each other for ever
      {"field-v6", "no-size"},
      {"field-v6", "requests-8"},  // a 9th request in flight on a comm fails the plugin
      {"field-v6", "odd-props"},
      {"field-v6", "setenv-init"},
      {"field-v12", "host-flush-fails"},  // forceFlush, yet iflush of host memory fails: NCCL never asks for one
      {"field-v12", "odd-props,no-size"},
      {"field-v6", "blocking-accept,no-size,requests-8,odd-props,setenv-init"},
  };
  for (const Field& f : fields) {
    const std::string file = testPlugin(f.plugin);
    const Net field{file, file, {{"FIELD_QUIRKS", f.quirks}}};
    INFO(f.plugin, " FIELD_QUIRKS=", f.quirks);
    CHECK(runNet(field, Coll::AllReduce, "Simple", matrix::Launch{true, 2, 0, nullptr, 1}) == 0);
    CHECK(runNet(field, Coll::SendRecv, "LL", matrix::Launch{true, 2, 0, nullptr, 1}) == 0);
    CHECK(runNet(field, Coll::AllGather, "LL128", matrix::Launch{true, 4, 2, nullptr, 1}) == 0);
  }
}
