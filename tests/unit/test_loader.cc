// The plugin loader refuses broken plugins with one clear line, and loads the real ones.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdlib>
#include <string>

#include "misc/check.h"
#include "plugin/algo.h"
#include "plugin/loader.h"

using namespace plexus;

static std::string testPluginDir() {
  const char* lib = getenv("PLEXUS_TEST_LIB_DIR");
  REQUIRE(lib != nullptr);
  return std::string(lib) + "/../test-plugins/";
}

TEST_CASE("loader: algo-ring and p2p-nvlink load with their ABI") {
  std::vector<const AlgoPlugin*> algos;
  REQUIRE(loadAlgorithms({"ring"}, &algos) == ncclSuccess);
  REQUIRE(algos.size() == 1);
  CHECK(algos[0]->name == "ring");
  CHECK(algos[0]->version == PLEXUS_ALGO_ABI_VERSION);
  std::vector<const TransportPlugin*> transports;
  REQUIRE(loadTransports({}, false, &transports) == ncclSuccess);
  REQUIRE(transports.size() >= 2);
  CHECK(transports[0]->name == "p2p-nvlink");
  CHECK(transports.back()->name == std::string("net"));
}

TEST_CASE("loader: transports as named, none, or refused with the reason, the net transport always last") {
  std::vector<const TransportPlugin*> t;
  REQUIRE(loadTransports({"p2p-nvlink"}, false, &t) == ncclSuccess);
  REQUIRE(t.size() == 2);
  CHECK(t[0]->name == "p2p-nvlink");
  CHECK(t[1]->name == std::string("net"));
  REQUIRE(loadTransports({}, true, &t) == ncclSuccess);  // "none": the net transport alone
  REQUIRE(t.size() == 1);
  CHECK(t[0]->name == std::string("net"));
  CHECK(loadTransports({"no-such-transport"}, false, &t) == ncclInvalidUsage);
  const std::string why = lastError(nullptr);
  CHECK(why.find("transport plugin 'no-such-transport'") != std::string::npos);
  CHECK(why.find("libplexus-no-such-transport.so") != std::string::npos);
  // An algorithm plugin is no transport.
  CHECK(loadTransports({"algo-ring"}, false, &t) == ncclInvalidUsage);
  CHECK(std::string(lastError(nullptr)).find("does not export plexusTransportPlugin_v1") != std::string::npos);
  // Every file found is in the plugin folders and exports the symbol; p2p-nvlink comes first.
  const std::vector<std::string> files = transportPluginFiles();
  REQUIRE(!files.empty());
  CHECK(files[0].find("libplexus-p2p-nvlink.so") != std::string::npos);
}

TEST_CASE("loader: broken algorithm plugins are refused with the file, symbol and reason") {
  struct Case {
    const char* file;
    const char* reason;
  } cases[] = {
      {"libplexus-algo-bad-missing_symbol.so", "does not export plexusAlgoPlugin_v2 or plexusAlgoPlugin_v1"},
      {"libplexus-algo-bad-wrong_version.so", "ABI version mismatch (plugin ABI 3"},
      {"libplexus-algo-bad-null_member.so", "is NULL"},
  };
  for (auto& c : cases) {
    std::vector<const AlgoPlugin*> algos;
    std::string path = testPluginDir() + c.file;
    CHECK(loadAlgorithms({path}, &algos) == ncclInvalidUsage);
    std::string err = lastError(nullptr);
    CHECK_MESSAGE(err.find(c.reason) != std::string::npos, err);
    CHECK_MESSAGE(err.find(c.file) != std::string::npos, err);
  }
  std::vector<const AlgoPlugin*> algos;
  CHECK(loadAlgorithms({"no-such-algorithm"}, &algos) == ncclInvalidUsage);
  CHECK(std::string(lastError(nullptr)).find("libplexus-algo-no-such-algorithm.so") != std::string::npos);
}

TEST_CASE("loader: an ABI v1 plugin loads through its adapter, host backend only") {
  std::vector<const AlgoPlugin*> algos;
  REQUIRE(loadAlgorithms({testPluginDir() + "libplexus-algo-rd-v1.so"}, &algos) == ncclSuccess);
  REQUIRE(algos.size() == 1);
  CHECK(algos[0]->name == "rd-v1");
  CHECK(algos[0]->version == 1);
  CHECK_FALSE(algos[0]->api->hasCudaKernels());
}

namespace {

// A v2 table whose optional members record their calls, for the adapter's structSize checks.
int protocolsCalls = 0;
float protocolsLLBandwidth = 0;
ncclResult_t recInit(void** ctx, const plexusAlgoTopo_v2_t*, ncclDebugLogger_t) {
  *ctx = nullptr;
  return ncclSuccess;
}
ncclResult_t recGraph(void*, plexusAlgoGraph_v2_t*) { return ncclSuccess; }
ncclResult_t recCost(void*, ncclFunc_t, int, size_t, int, float* us) {
  *us = 1.0f;
  return ncclSuccess;
}
ncclResult_t recRunHost(void*, const plexusDevKernelArgs_v1_t*, int) { return ncclSuccess; }
ncclResult_t recFinalize(void*) { return ncclSuccess; }
ncclResult_t recProtocols(void*, const plexusAlgoProtocols_v2_t* p) {
  protocolsCalls++;
  protocolsLLBandwidth = p->bw[PLEXUS_PROTO_LL];
  return ncclSuccess;
}

}  // namespace

TEST_CASE("loader: setProtocols reaches a v2 plugin built with it, and never one built before it") {
  plexusAlgo_v2_t table = {PLEXUS_ALGO_ABI_VERSION, sizeof(plexusAlgo_v2_t), "rec", 1u << ncclFuncAllReduce,
                           1u << PLEXUS_PROTO_SIMPLE, recInit, recGraph, recCost, recRunHost, nullptr, recFinalize,
                           nullptr, recProtocols};
  plexusAlgoProtocols_v2_t figures{};
  figures.bw[PLEXUS_PROTO_LL] = 0.125f;
  std::string why;
  protocolsCalls = 0;
  auto api = algoAdapt_v2(&table, &why);
  REQUIRE(api);
  CHECK(api->setProtocols(nullptr, &figures) == ncclSuccess);
  CHECK(protocolsCalls == 1);
  CHECK(protocolsLLBandwidth == 0.125f);
  // Built before setProtocols: its table ends at setPlaces, and what lies beyond is not the plugin's.
  for (uint32_t size : {(uint32_t)PLEXUS_ALGO_V2_BASE_SIZE, (uint32_t)offsetof(plexusAlgo_v2_t, setProtocols)}) {
    table.structSize = size;
    auto older = algoAdapt_v2(&table, &why);
    REQUIRE(older);
    CHECK(older->setProtocols(nullptr, &figures) == ncclSuccess);
    CHECK(protocolsCalls == 1);
  }
}
