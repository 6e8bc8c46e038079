// NCCL tuner plugins: the ABI headers match NCCL's layouts, the loader takes each version (v2..v6) and
// adapts it to v6's calls, refuses broken plugins with one line naming file, symbols, versions found
// and reason, and tuner-csv decides as NCCL's example tuner does.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <string>

#include <plexus/tuner.h>

#include "planner/tuning.h"
#include "plugin/loader.h"

using namespace plexus;

namespace {

std::string testPluginDir() {
  const char* lib = getenv("PLEXUS_TEST_LIB_DIR");
  REQUIRE(lib != nullptr);
  return std::string(lib) + "/../test-plugins/";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// NCCL's cost table as the core hands it over: tree and ring cells `fill`, the algorithms Plexus does
// not have (CollNet, NVLS, PAT) IGNORE.
struct Table {
  float t[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  explicit Table(float fill) {
    for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++)
      for (float& c : t[a]) c = a == NCCL_ALGO_TREE || a == NCCL_ALGO_RING ? fill : NCCL_ALGO_PROTO_IGNORE;
  }
  float** arg() { return (float**)t; }
};

// init, one getCollInfo and finalize through the adapter, as the core calls them.
int ask(const TunerPlugin& p, ncclFunc_t func, size_t bytes, Table* table, size_t nRanks = 4, size_t nNodes = 1) {
  ncclNvlDomainInfo_v6_t nvl{(int)nNodes, (int)nRanks, (int)nRanks};
  ncclTunerConstants_v6_t constants{};
  void* ctx = nullptr;
  REQUIRE(p.api->init(&ctx, 0x1234, nRanks, nNodes, nullptr, &nvl, &constants) == ncclSuccess);
  int nChannels = 0;
  CHECK(p.api->getCollInfo(ctx, func, bytes, 1, table->arg(), NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0,
                           &nChannels) == ncclSuccess);
  CHECK(p.api->finalize(ctx) == ncclSuccess);
  return nChannels;
}

// A file for the duration of a test.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& text) {
    char p[] = "/tmp/plexus-tuner-XXXXXX";
    close(mkstemp(p));
    path = p;
    std::ofstream(path) << text;
  }
  ~TempFile() { unlink(path.c_str()); }
};

}  // namespace

TEST_CASE("tuner: ABI layouts are NCCL's (LP64)") {
  CHECK(sizeof(ncclTuner_v2_t) == 32);
  CHECK(offsetof(ncclTuner_v2_t, getCollInfo) == 16);
  CHECK(offsetof(ncclTuner_v2_t, destroy) == 24);
  CHECK(sizeof(ncclTuner_v3_t) == 32);
  CHECK(sizeof(ncclTuner_v4_t) == 32);
  CHECK(sizeof(ncclTuner_v5_t) == 32);
  CHECK(offsetof(ncclTuner_v5_t, finalize) == 24);
  CHECK(sizeof(ncclTuner_v6_t) == 40);
  CHECK(offsetof(ncclTuner_v6_t, getChunkSize) == 32);
  CHECK(sizeof(ncclNvlDomainInfo_v5_t) == 12);
  CHECK(sizeof(ncclTunerConstants_v5_t) == 1152);
  CHECK(offsetof(ncclTunerConstants_v5_t, perChMaxRingLL128Bws) == 768);
  CHECK(offsetof(ncclTunerConstants_v5_t, perChMaxTreeBws) == 960);
  CHECK(NCCL_ALGO_TREE == 0);
  CHECK(NCCL_ALGO_RING == 1);
  CHECK(NCCL_ALGO_PAT == 6);
  CHECK(NCCL_NUM_ALGORITHMS == 7);
  CHECK(NCCL_PROTO_LL == 0);
  CHECK(NCCL_PROTO_SIMPLE == 2);
  CHECK(NCCL_ALGO_PROTO_IGNORE == -1.0);
  CHECK(std::string(NCCL_TUNER_PLUGIN_SYMBOL) == "ncclTunerPlugin_v6");
}

TEST_CASE("tuner: each ABI version v2..v6 loads, and its answer reaches the cost table through v6's calls") {
  setenv("PLEXUS_TEST_TUNER", "ring,ll,2", 1);
  for (int v = 2; v <= 6; v++) {
    CAPTURE(v);
    const std::string path = testPluginDir() + "libnccl-tuner-test-v" + std::to_string(v) + ".so";
    std::string report;
    const TunerPlugin* p = loadTuner(path, "test", &report);
    REQUIRE_MESSAGE(p != nullptr, report);
    CHECK(p->version == v);
    CHECK(p->name == "test-v" + std::to_string(v));
    CHECK(has(p->label, "tuner plugin test-v" + std::to_string(v) + " ("));
    CHECK(has(p->label, "libnccl-tuner-test-v" + std::to_string(v) + ".so, v" + std::to_string(v) + ")"));
    CHECK(has(report, "loaded"));
    CHECK(has(report, "ncclTunerPlugin_v" + std::to_string(v)));
    CHECK(p->api->hasChunkSize() == (v == 6));
    Table table(5.0f);
    CHECK(ask(*p, ncclFuncAllReduce, 4096, &table) == 2);
    CHECK(table.t[NCCL_ALGO_RING][NCCL_PROTO_LL] == 0.0f);
    CHECK(table.t[NCCL_ALGO_TREE][NCCL_PROTO_LL] == 5.0f);
    // A cell that cannot run stays IGNORE (v2: the adapter does not force it).
    Table ignored(NCCL_ALGO_PROTO_IGNORE);
    ask(*p, ncclFuncAllReduce, 4096, &ignored);
    CHECK(ignored.t[NCCL_ALGO_RING][NCCL_PROTO_LL] == NCCL_ALGO_PROTO_IGNORE);
    // The same spec again is the same plugin, not a second load.
    CHECK(loadTuner(path, "test") == p);
  }
  unsetenv("PLEXUS_TEST_TUNER");
}

TEST_CASE("tuner: names resolve as NCCL's: as given, then libnccl-tuner-<name>.so, then PLEXUS_PLUGIN_PATH") {
  const char* old = getenv("PLEXUS_PLUGIN_PATH");
  const std::string saved = old ? old : "";
  setenv("PLEXUS_PLUGIN_PATH", (saved + ":" + testPluginDir()).c_str(), 1);
  std::string report;
  const TunerPlugin* p = loadTuner("test-v4", "NCCL_TUNER_PLUGIN=test-v4", &report);
  REQUIRE_MESSAGE(p != nullptr, report);
  CHECK(p->version == 4);
  CHECK(has(p->path, "/libnccl-tuner-test-v4.so"));
  // A full library name is not prefixed again.
  p = loadTuner("libnccl-tuner-test-v5.so", "test", &report);
  REQUIRE_MESSAGE(p != nullptr, report);
  CHECK(p->version == 5);
  setenv("PLEXUS_PLUGIN_PATH", saved.c_str(), 1);
  // Ours, from the plugin folder: the newest of the two versions it exports.
  p = loadTuner("csv", "test", &report);
  REQUIRE_MESSAGE(p != nullptr, report);
  CHECK(p->name == "csv");
  CHECK(p->version == 6);
  CHECK(has(report, "exports v6, v5"));
}

TEST_CASE("tuner: found in the net plugin's library when none of its own is, as NCCL (aws-ofi-nccl ships one)") {
  const std::string bundle = testPluginDir() + "libnccl-net-bundle.so";
  std::string report;
  // No libnccl-tuner.so anywhere: the default name falls back to the net plugin NCCL_NET_PLUGIN names.
  const TunerPlugin* p = loadTuner("", "default", &report, bundle);
  REQUIRE_MESSAGE(p != nullptr, report);
  CHECK(p->path == bundle);
  CHECK(p->version == 6);
  CHECK(has(report, "from the net plugin's library, as no tuner library of its own was found"));
  // A tuner library of its own wins over the net plugin's.
  p = loadTuner(testPluginDir() + "libnccl-tuner-test-v5.so", "test", &report, bundle);
  REQUIRE(p != nullptr);
  CHECK(p->version == 5);
  // A net plugin without a tuner, or none: no tuner, as before.
  CHECK(loadTuner("", "default", &report, testPluginDir() + "libnccl-net-test-v12.so") == nullptr);
  CHECK(loadTuner("", "default", &report, "none") == nullptr);
}

TEST_CASE("tuner: none, a missing tuner and broken ones give one line each, and no tuner") {
  std::string report;
  CHECK(loadTuner("none", "NCCL_TUNER_PLUGIN=none", &report) == nullptr);
  CHECK(report == "tuner plugin: none (NCCL_TUNER_PLUGIN=none)");
  CHECK(loadTuner("NONE", "test", &report) == nullptr);

  CHECK(loadTuner("no-such-tuner", "NCCL_TUNER_PLUGIN=no-such-tuner", &report) == nullptr);
  CHECK_MESSAGE(has(report, "tuner plugin 'no-such-tuner' (NCCL_TUNER_PLUGIN=no-such-tuner): not loaded: tried "
                            "no-such-tuner, libnccl-tuner-no-such-tuner.so."), report);
  CHECK_MESSAGE(has(report, "put libnccl-tuner-no-such-tuner.so in LD_LIBRARY_PATH or PLEXUS_PLUGIN_PATH"), report);
  CHECK(has(report, "NCCL_TUNER_PLUGIN=none"));

  CHECK(loadTuner("/nonexistent/libnccl-tuner-x.so", "test", &report) == nullptr);
  CHECK_MESSAGE(has(report, "tried /nonexistent/libnccl-tuner-x.so."), report);

  struct Case {
    const char* file;
    const char* reason;
  } cases[] = {
      {"libnccl-tuner-bad-missing_symbol.so", "looked for ncclTunerPlugin_v6, _v5, _v4, _v3, _v2, found none; it "
                                              "exports none of them"},
      {"libnccl-tuner-bad-null_getCollInfo.so", "found v6; ncclTunerPlugin_v6's getCollInfo is NULL"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.file);
    const std::string path = testPluginDir() + c.file;
    CHECK(loadTuner(path, "test", &report) == nullptr);
    CHECK_MESSAGE(has(report, "refused "), report);
    CHECK_MESSAGE(has(report, c.file), report);
    CHECK_MESSAGE(has(report, c.reason), report);
    CHECK_MESSAGE(has(report, "Running without a tuner plugin"), report);
  }
}

TEST_CASE("tuner: an init that fails leaves the communicator's tuning without a tuner") {
  std::string report;
  const TunerPlugin* p = loadTuner(testPluginDir() + "libnccl-tuner-bad-init_error.so", "test", &report);
  REQUIRE_MESSAGE(p != nullptr, report);  // loads: its table is whole
  Tuning t;
  t.nRanks = 2;
  bool started = true;
  CHECK(tuningStartTuner(&t, p, 1, ncclNvlDomainInfo_v6_t{1, 2, 2}, &started) == ncclSuccess);
  CHECK(!started);
  CHECK(t.tuner == nullptr);
}

TEST_CASE("tuner: tuner-csv decides as NCCL's example tuner") {
  TempFile conf(
      "# collective,min,max,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]\n"
      "\n"
      "allreduce,0,65536,ring,ll,2,1,4\n"               // line 3: 1 node of 4 ranks
      "allreduce,0,65536,tree,simple,-1,-1,-1\n"        // any shape; channels: default
      "allgather,100,200,nvls,simple,3,-1,-1\n"         // nvls cannot run here: next row
      "allgather,100,200,tree,ll,3,-1,-1,1,0\n"         // numPipeOps 1, regBuff 0
      "broadcast,0,10,ring,ll\n"                        // 5 fields: skipped
      "bogus,0,10,butterfly,turbo,5,-1,-1\n"            // allreduce, ring, simple
      "reducescatter,,0,,,1000,ring,,ll,,4,-1,-1\n"     // empty fields vanish: 0,1000,ring,ll,4,...
      "reduce,0,10,ring,ll,7,-1,-1,-1,-1,extra,more\n"  // past the 10th field is not read
      " #reduce,0,10,tree,ll,6,-1,-1\n");               // '#' not in column 0: a rule like any
  setenv("NCCL_TUNER_CONFIG_FILE", conf.path.c_str(), 1);
  std::string report;
  const TunerPlugin* csv = loadTuner("csv", "test", &report);
  REQUIRE_MESSAGE(csv != nullptr, report);
  const float ignore = NCCL_ALGO_PROTO_IGNORE;
  // Only ring and tree can run, as in Plexus: every other algorithm's cells are IGNORE.
  auto plexusTable = [&] {
    Table t(ignore);
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++) t.t[NCCL_ALGO_TREE][p] = t.t[NCCL_ALGO_RING][p] = 7.0f;
    return t;
  };
  {
    Table t = plexusTable();
    CHECK(ask(*csv, ncclFuncAllReduce, 65536, &t, 4, 1) == 2);  // max is inclusive
    CHECK(t.t[NCCL_ALGO_RING][NCCL_PROTO_LL] == 0.0f);
  }
  {
    Table t = plexusTable();
    CHECK(ask(*csv, ncclFuncAllReduce, 100, &t, 8, 2) == 1);  // the wildcard row; its channels: the default, 1
    CHECK(t.t[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] == 0.0f);
    CHECK(t.t[NCCL_ALGO_RING][NCCL_PROTO_LL] == 7.0f);
  }
  {
    Table t = plexusTable();
    CHECK(ask(*csv, ncclFuncAllReduce, 65537, &t, 8, 2) == 1);  // no row: the table stands, 1 channel
    CHECK(t.t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] == 7.0f);
  }
  {
    Table t = plexusTable();
    CHECK(ask(*csv, ncclFuncAllGather, 150, &t) == 3);  // the nvls row is passed over
    CHECK(t.t[NCCL_ALGO_TREE][NCCL_PROTO_LL] == 0.0f);
  }
  {
    Table t = plexusTable();
    CHECK(ask(*csv, ncclFuncBroadcast, 5, &t) == 1);  // the 5-field row was skipped
    CHECK(t.t[NCCL_ALGO_RING][NCCL_PROTO_LL] == 7.0f);
  }
  {
    Table t = plexusTable();
    CHECK(ask(*csv, ncclFuncReduceScatter, 500, &t) == 4);
    CHECK(t.t[NCCL_ALGO_RING][NCCL_PROTO_LL] == 0.0f);
  }
  {
    Table t = plexusTable();
    CHECK(ask(*csv, ncclFuncReduce, 5, &t) == 7);
    CHECK(t.t[NCCL_ALGO_RING][NCCL_PROTO_LL] == 0.0f);
  }
  {
    // The unknown names became allreduce/ring/simple, but the rows above it match first; a shape
    // none of them matches reaches it... they all have wildcards except line 3, so check the parse
    // through a file of its own.
    TempFile only("bogus,0,10,butterfly,turbo,5,-1,-1\n");
    setenv("NCCL_TUNER_CONFIG_FILE", only.path.c_str(), 1);
    Table t = plexusTable();
    CHECK(ask(*csv, ncclFuncAllReduce, 5, &t) == 5);
    CHECK(t.t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] == 0.0f);
  }
  {
    setenv("NCCL_TUNER_CONFIG_FILE", "/nonexistent/nccl_tuner.conf", 1);  // no file: no rules, no error
    Table t = plexusTable();
    CHECK(ask(*csv, ncclFuncAllReduce, 5, &t) == 1);
    CHECK(t.t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] == 7.0f);
  }
  unsetenv("NCCL_TUNER_CONFIG_FILE");
}
