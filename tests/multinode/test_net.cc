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

// net-ib carries the traffic where there is an HCA; elsewhere (this machine) it reports no device and the
// built-in socket net carries it: NCCL_NET_PLUGIN=ib must never cost a job its collectives.
TEST_CASE("net: AllReduce, AllGather, Broadcast and Send/Recv across nodes with NCCL_NET_PLUGIN=ib") {
  if (!available(kIb)) {
    testskip::skip(kIb.path() + " was not built (libibverbs' headers are missing: libibverbs-dev)");
    return;
  }
  if (haveRdmaDevice()) {
    acrossNodesOver(kIb);
    return;
  }
  for (Coll c : {Coll::AllReduce, Coll::AllGather, Coll::Broadcast, Coll::SendRecv}) {
    INFO("ib (no device: the socket net) ", matrix::collName(c));
    CHECK(runNet(kIb, c, "Simple", matrix::Launch{true, 4, 0, nullptr, 2}) == 0);
  }
}

TEST_CASE("net: AllReduce, AllGather, Broadcast and Send/Recv across 2 and 3 nodes over net-ib on the stand-in verbs") {
  if (access(fakeVerbs(), R_OK) != 0) {
    testskip::skip(std::string(fakeVerbs()) + " was not built (net-ib and its tests need libibverbs-dev)");
    return;
  }
  acrossNodesOver(kIbFake);
}

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
      {"field-v12", "prof-callback"},  // NCCL always passes a profiler callback; a NULL one would crash this plugin
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

namespace {

std::string slurp(const std::string& path) {
  FILE* f = fopen(path.c_str(), "r");
  if (!f) return "";
  std::string s;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  fclose(f);
  return s;
}

}  // namespace

TEST_CASE("net: a device whose getProperties fails is never used, whatever rank or channel would have had it") {
  // Two devices; getProperties(0) fails. Before the topology work, local rank 0's channel 0 took device
  // (localRank + channel) % 2 = 0 regardless.
  char uses[] = "/tmp/plexus-field-uses-XXXXXX";
  const int fd = mkstemp(uses);
  REQUIRE(fd >= 0);
  close(fd);
  const std::string file = testPlugin("field-v12");
  const Net field{file, file, {{"FIELD_QUIRKS", "pci-devices,props-fail-0"}, {"FIELD_USES_FILE", uses}}};
  CHECK(runNet(field, Coll::AllReduce, "Simple", matrix::Launch{true, 4, 2, nullptr, 2}) == 0);
  const std::string log = slurp(uses);
  unlink(uses);
  INFO(log);
  CHECK(log.find("listen 1") != std::string::npos);
  CHECK(log.find("connect 1") != std::string::npos);
  CHECK(log.find(" 0\n") == std::string::npos);
}

TEST_CASE("net: NCCL_TOPO_FILE replaces the machine, and NCCL_TOPO_DUMP_FILE writes the topology in use") {
  char dump[] = "/tmp/plexus-topo-dump-XXXXXX";
  const int fd = mkstemp(dump);
  REQUIRE(fd >= 0);
  close(fd);
  unlink(dump);
  const std::string topo = std::string(PLEXUS_TEST_TOPO_DIR) + "/server-8gpu-4nic.xml";
  const Net socketWithTopo{"", "", {{"NCCL_TOPO_FILE", topo.c_str()}, {"NCCL_TOPO_DUMP_FILE", dump}}};
  CHECK(runNet(socketWithTopo, Coll::AllReduce, "Simple", matrix::Launch{true, 2, 0, nullptr, 1}) == 0);
  const std::string xml = slurp(dump);
  unlink(dump);
#ifdef PLEXUS_HAVE_HWLOC
  REQUIRE(!xml.empty());
  CHECK(xml.find("type=\"Machine\"") != std::string::npos);
  // The file's eight GPUs and four NICs, not this machine's devices.
  for (const char* id : {"0000:13:00.0", "0000:74:00.0", "0000:75:00.0"}) CHECK(xml.find(id) != std::string::npos);
  CHECK(xml.find("mlx5_3") != std::string::npos);
#else
  CHECK(xml.empty());
#endif
}
