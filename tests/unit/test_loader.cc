// The plugin loader refuses broken plugins with one clear line, and loads the real ones.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "misc/check.h"
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
  REQUIRE(loadTransports(&transports) == ncclSuccess);
  REQUIRE(transports.size() >= 1);
  CHECK(transports[0]->name == "p2p-nvlink");
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
