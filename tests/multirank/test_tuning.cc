// Tuning at run time: the configuration file's rules decide what runs (checked through
// plexusCommLastDecision and by the results), NCCL_ALGO/NCCL_PROTO override them, rules that cannot
// hold fail init or the operation with a message naming the rule, and every (collective, size bucket)
// decision is logged once under NCCL_DEBUG_SUBSYS=TUNING.
#include <doctest/doctest.h>

#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "check.h"
#include "harness.h"
#include "skip.h"

namespace {

// A configuration file for the duration of a test, as PLEXUS_CONFIG.
struct ConfigFile {
  std::string path;
  explicit ConfigFile(const std::string& text) {
    char p[] = "/tmp/plexus-tuning-XXXXXX";
    int fd = mkstemp(p);
    close(fd);
    path = p;
    std::ofstream(path) << text;
    setenv("PLEXUS_CONFIG", path.c_str(), 1);
  }
  ~ConfigFile() {
    unsetenv("PLEXUS_CONFIG");
    unlink(path.c_str());
  }
};

long allReduceOnce(ncclComm_t comm, cudaStream_t stream, int rank, int nranks, size_t count, plexusDecision_t* d) {
  std::vector<float> buf(count);
  check::fill<float>(buf.data(), count, ncclSum, rank);
  CHECK_NCCL(ncclAllReduce(buf.data(), buf.data(), count, ncclFloat32, ncclSum, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  CHECK_NCCL(plexusCommLastDecision(comm, d));
  return (long)check::verifyAllReduce<float>(buf.data(), count, ncclSum, nranks);
}

bool contains(const char* s, const char* part) { return s && strstr(s, part); }

// What each rank saw, as "algo/proto@reason-prefix" per size.
long decisions(int rank, int nranks, ncclComm_t comm, cudaStream_t stream, const std::vector<size_t>& counts,
               std::vector<std::string>* seen) {
  long bad = 0;
  for (size_t c : counts) {
    plexusDecision_t d;
    bad += allReduceOnce(comm, stream, rank, nranks, c, &d);
    seen->push_back(std::string(d.algorithm) + "/" + d.protocol + " " + d.reason);
  }
  return bad;
}

}  // namespace

TEST_CASE("tuning: the first matching rule decides, changing the file changes what runs") {
  const std::vector<size_t> counts = {16, 40000};  // 64 B and 160 KB of floats
  // Each algorithm in turn for the small and the large operation: ring -> tree, tree -> direct, ...
  const char* algos[] = {"ring", "tree", "direct"};
  for (int flip = 0; flip < 3; flip++) {
    const char* small = algos[flip];
    const char* large = algos[(flip + 1) % 3];
    ConfigFile cfg(std::string(R"({ "version": 1,
  "tuning": [
    { "collective": "allreduce", "bytes": [0, "64K"], "algorithm": ")") + small + R"(", "protocol": "ll" },
    { "collective": "allreduce", "algorithm": ")" + large + R"(", "protocol": "simple", "chunk": "16K" } ] })");
    CAPTURE(flip);
    CHECK(harness::runThreads(3, [&](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
            std::vector<std::string> seen;
            long bad = decisions(rank, nranks, comm, stream, counts, &seen);
            plexusDecision_t d;
            CHECK_NCCL(plexusCommLastDecision(comm, &d));
            bad += d.chunkBytes != 16 * 1024;  // the rule's chunk
            const std::string want0 = std::string(small) + "/LL rule 1 of " + cfg.path + " (line 3)";
            const std::string want1 = std::string(large) + "/Simple rule 2 of " + cfg.path + " (line 4)";
            if (seen[0] != want0 || seen[1] != want1) {
              fprintf(stderr, "rank %d: ran \"%s\" and \"%s\", expected \"%s\" and \"%s\"\n", rank, seen[0].c_str(),
                      seen[1].c_str(), want0.c_str(), want1.c_str());
              bad++;
            }
            return bad;
          }) == 0);
  }
}

TEST_CASE("tuning: with no rule the cost model decides, and says so") {
  ConfigFile cfg(R"({ "version": 1, "tuning": [ { "collective": "broadcast", "algorithm": "ring" } ] })");
  CHECK(harness::runThreads(2, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          plexusDecision_t d;
          long bad = allReduceOnce(comm, stream, rank, nranks, 1000, &d);
          if (!contains(d.reason, "cost model: ")) {
            fprintf(stderr, "rank %d: reason \"%s\"\n", rank, d.reason);
            bad++;
          }
          return bad;
        }) == 0);
}

TEST_CASE("tuning: on the host with a core per rank, LL carries only the smallest operations") {
  // The core's protocol figures (algoProtocols): a CPU reads LL's lines a cache line at a time, so past about
  // 64 bytes per link Simple is faster (measured, bench/README.md), and LL128 never is.
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) < 2)
    return testskip::skip("fewer than 2 CPUs to run on: 2 ranks share a core, where the default figures stand");
  CHECK(harness::runThreads(2, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          long bad = 0;
          std::string seen;
          // AllReduce of 16 B, 128 B, 4 KiB; AllGather of 32 B, 256 B, 8 KiB from each rank. The middle sizes went
          // to LL with the default figures.
          for (size_t count : {(size_t)4, (size_t)32, (size_t)1024}) {
            plexusDecision_t d;
            bad += allReduceOnce(comm, stream, rank, nranks, count, &d);
            seen += std::string(d.protocol) + " ";
            const size_t each = 2 * count;
            std::vector<float> all(each * nranks, -1.0f), mine(each, (float)rank);
            CHECK_NCCL(ncclAllGather(mine.data(), all.data(), each, ncclFloat32, comm, stream));
            CHECK_NCCL(plexusStreamSynchronize(stream));
            for (size_t i = 0; i < all.size(); i++) bad += all[i] != (float)(i / each);
            CHECK_NCCL(plexusCommLastDecision(comm, &d));
            seen += std::string(d.protocol) + " ";
          }
          if (seen != "LL LL Simple Simple Simple Simple ") {
            fprintf(stderr, "rank %d: protocols of AllReduce and AllGather, 16 B to 4 KiB: %s(expected LL LL, then "
                    "Simple)\n", rank, seen.c_str());
            bad++;
          }
          return bad;
        }) == 0);
}

TEST_CASE("tuning: NCCL_ALGO and NCCL_PROTO override the file's rules") {
  ConfigFile cfg(R"({ "version": 1, "tuning": [ { "collective": "allreduce", "algorithm": "direct" } ] })");
  setenv("NCCL_ALGO", "ring", 1);
  CHECK(harness::runThreads(2, [&](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          plexusDecision_t d;
          long bad = allReduceOnce(comm, stream, rank, nranks, 1000, &d);
          if (strcmp(d.algorithm, "ring") != 0 || !contains(d.reason, "NCCL_ALGO/NCCL_PROTO override rule 1")) {
            fprintf(stderr, "rank %d: ran %s: %s\n", rank, d.algorithm, d.reason);
            bad++;
          }
          return bad;
        }) == 0);
  unsetenv("NCCL_ALGO");
}

TEST_CASE("tuning: rules that cannot hold fail init, naming the rule, file, line and key") {
  // The test plugin rd-v1 (tests/plugins/algo_v1.cc) serves Simple and LL, not LL128.
  const std::string rd = std::string(PLEXUS_TEST_LIB_DIR) + "/../test-plugins/libplexus-algo-rd-v1.so";
  struct Case {
    std::string text;
    const char* expect;
  } cases[] = {
      {R"({ "version": 1, "tuning": [
        { "collective": "allreduce", "algorithm": "butterfly" } ] })",
       "tuning[0].algorithm: \"butterfly\" is not a loaded algorithm"},
      {R"({ "version": 1, "tuning": [
        { "collective": "allreduce", "algorithm": "rd-v1", "protocol": "ll128" } ],
        "plugins": { "algorithms": ["ring", ")" + rd + R"("] } })",
       "algorithm rd-v1 does not serve protocol LL128"},
      {R"({ "version": 1, "plugins": { "algorithms": ["nonexistent-algo"] } })", "nonexistent-algo"},
  };
  for (const Case& c : cases) {
    ConfigFile cfg(c.text);
    CAPTURE(c.text);
    ncclUniqueId id;
    REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
    ncclComm_t comm = nullptr;
    CHECK(ncclCommInitRank(&comm, 1, id, 0) == ncclInvalidUsage);
    const std::string e = ncclGetLastError(nullptr);
    CHECK(e.find(c.expect) != std::string::npos);
    if (c.text.find("tuning") != std::string::npos) CHECK(e.find(cfg.path + ":2") != std::string::npos);
  }
}

TEST_CASE("tuning: a rule its algorithm cannot honour fails the operation with the rule named") {
  // direct serves one node of at most 9 ranks: with 10 ranks its cost model declines.
  ConfigFile cfg(R"({ "version": 1, "tuning": [ { "collective": "allreduce", "nranks": [10], "algorithm": "direct" } ] })");
  CHECK(harness::runThreads(10, [&](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          float x = 1;
          ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, stream);
          const std::string e = ncclGetLastError(comm);
          long bad = r != ncclInvalidUsage;
          bad += e.find("rule 1 of " + cfg.path) == std::string::npos || e.find("cannot run here") == std::string::npos;
          if (bad) fprintf(stderr, "rank %d: %d \"%s\"\n", rank, (int)r, e.c_str());
          return bad;
        }) == 0);
}

namespace {
long logScenario(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  long bad = 0;
  // Three sizes in two buckets, each repeated: two TUNING lines per rank for these.
  for (int rep = 0; rep < 3; rep++)
    for (size_t count : {300ul, 400ul, 5000ul}) {
      plexusDecision_t d;
      bad += allReduceOnce(comm, stream, rank, nranks, count, &d);
    }
  return bad;
}
harness::Scenario tuningLog("tuning-log", logScenario);
}  // namespace

TEST_CASE("tuning: each (collective, size bucket) decision is logged once, with its reason") {
  char dir[] = "/tmp/plexus-tuning-log-XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string file = std::string(dir) + "/log.%p";
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "TUNING", 1);
  setenv("NCCL_DEBUG_FILE", file.c_str(), 1);
  CHECK(harness::runProcesses("tuning-log", 2) == 0);
  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_DEBUG_SUBSYS");
  unsetenv("NCCL_DEBUG_FILE");
  std::string all;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {  // one log per child, named by its pid
    std::ifstream in(entry.path());
    std::stringstream ss;
    ss << in.rdbuf();
    all += ss.str();
    files++;
  }
  CHECK(files == 2);
  auto count = [&](const std::string& s) {
    int n = 0;
    for (size_t p = all.find(s); p != std::string::npos; p = all.find(s, p + 1)) n++;
    return n;
  };
  // 1200 and 1600 B share a bucket; 20000 B is another: one line each, per rank.
  CHECK(count("AllReduce of 1200 B (bucket [1024, 2048) B)") == 2);
  CHECK(count("AllReduce of 1600 B") == 0);
  CHECK(count("AllReduce of 20000 B (bucket [16384, 32768) B)") == 2);
  CHECK(count("cost model: ") >= 4);
  std::filesystem::remove_all(dir);
}

TEST_CASE("tuning: an NCCL tuner plugin (v2..v6) decides what runs when no rule does, and results stay right") {
  const std::string dir = std::string(PLEXUS_TEST_LIB_DIR) + "/../test-plugins/";
  // Each version forces tree/LL with 1 channel, then ring/Simple with 2: what ran must follow it.
  for (int v = 2; v <= 6; v++)
    for (const char* spec : {"tree,ll,1", "ring,simple,2"}) {
      CAPTURE(v);
      CAPTURE(spec);
      const std::string plugin = dir + "libnccl-tuner-test-v" + std::to_string(v) + ".so";
      setenv("NCCL_TUNER_PLUGIN", plugin.c_str(), 1);
      setenv("PLEXUS_TEST_TUNER", spec, 1);
      setenv("PLEXUS_MIN_NCHANNELS", "2", 1);
      const bool tree = spec[0] == 't';
      CHECK(harness::runThreads(3, [&](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
              plexusDecision_t d;
              long bad = allReduceOnce(comm, stream, rank, nranks, 3000, &d);
              const std::string label = "tuner plugin test-v" + std::to_string(v) + " (";
              if (strcmp(d.algorithm, tree ? "tree" : "ring") != 0 || strcmp(d.protocol, tree ? "LL" : "Simple") != 0 ||
                  d.nChannels != (tree ? 1 : 2) || !contains(d.reason, label.c_str())) {
                fprintf(stderr, "rank %d: ran %s/%s on %d channel(s): %s\n", rank, d.algorithm, d.protocol,
                        d.nChannels, d.reason);
                bad++;
              }
              return bad;
            }) == 0);
    }
  // A rule of the configuration file comes before the tuner plugin.
  {
    ConfigFile cfg(R"({ "version": 1, "tuning": [ { "collective": "allreduce", "algorithm": "direct" } ] })");
    CHECK(harness::runThreads(2, [&](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
            plexusDecision_t d;
            long bad = allReduceOnce(comm, stream, rank, nranks, 3000, &d);
            return bad + (strcmp(d.algorithm, "direct") != 0 || !contains(d.reason, "rule 1 of "));
          }) == 0);
  }
  // getCollInfo failing fails the operation, naming the plugin.
  setenv("PLEXUS_TEST_TUNER", "fail,ll,1", 1);
  CHECK(harness::runThreads(2, [&](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          float x = 1;
          ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, stream);
          const std::string e = ncclGetLastError(comm);
          long bad = r == ncclSuccess || e.find("tuner plugin test-v6") == std::string::npos ||
                     e.find("getCollInfo failed") == std::string::npos;
          if (bad) fprintf(stderr, "rank %d: %d \"%s\"\n", rank, (int)r, e.c_str());
          return bad;
        }) == 0);
  unsetenv("NCCL_TUNER_PLUGIN");
  unsetenv("PLEXUS_TEST_TUNER");
  unsetenv("PLEXUS_MIN_NCHANNELS");
}

TEST_CASE("tuning: a tuner plugin that answers nonsense (indices out of range, NaN, negative cells and channels) "
          "cannot derail an operation") {
  const std::string dir = std::string(PLEXUS_TEST_LIB_DIR) + "/../test-plugins/";
  setenv("PLEXUS_TEST_TUNER", "nonsense,ll,1", 1);
  for (int v = 2; v <= 6; v++) {
    CAPTURE(v);
    setenv("NCCL_TUNER_PLUGIN", (dir + "libnccl-tuner-test-v" + std::to_string(v) + ".so").c_str(), 1);
    CHECK(harness::runThreads(2, [&](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
            plexusDecision_t d;
            long bad = allReduceOnce(comm, stream, rank, nranks, 3000, &d);
            if (d.nChannels < 1) bad++;
            return bad;
          }) == 0);
  }
  unsetenv("NCCL_TUNER_PLUGIN");
  unsetenv("PLEXUS_TEST_TUNER");
}

TEST_CASE("tuning: tuner-csv (NCCL_TUNER_PLUGIN=csv) reads NCCL's CSV format and its rows decide") {
  char p[] = "/tmp/plexus-tuner-csv-XXXXXX";
  close(mkstemp(p));
  std::ofstream(p) << "# collective,min,max,algorithm,protocol,channels,nNodes,nRanks\n"
                      "allreduce,0,4095,tree,ll,-1,-1,-1\n"
                      "allreduce,4096,1000000,ring,simple,2,1,3\n"
                      "allreduce,1000001,100000000,ring,simple,64,-1,-1\n";  // more channels than there are
  setenv("NCCL_TUNER_PLUGIN", "csv", 1);
  setenv("NCCL_TUNER_CONFIG_FILE", p, 1);
  setenv("PLEXUS_MIN_NCHANNELS", "2", 1);
  CHECK(harness::runThreads(3, [&](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          plexusDecision_t small, large, wide;
          long bad = allReduceOnce(comm, stream, rank, nranks, 100, &small);
          bad += allReduceOnce(comm, stream, rank, nranks, 100000, &large);
          bad += allReduceOnce(comm, stream, rank, nranks, 500000, &wide);
          if (wide.nChannels >= 64 || !contains(wide.reason, "its 64 channels cannot be honoured: ")) {
            fprintf(stderr, "rank %d: 64 channels asked, %d used: %s\n", rank, wide.nChannels, wide.reason);
            bad++;
          }
          bad += strcmp(small.algorithm, "tree") || strcmp(small.protocol, "LL") || !contains(small.reason, "tuner plugin csv");
          bad += strcmp(large.algorithm, "ring") || strcmp(large.protocol, "Simple") || large.nChannels != 2;
          if (bad)
            fprintf(stderr, "rank %d: %s/%s (%s); %s/%s x%d (%s)\n", rank, small.algorithm, small.protocol, small.reason,
                    large.algorithm, large.protocol, large.nChannels, large.reason);
          return bad;
        }) == 0);
  unsetenv("NCCL_TUNER_PLUGIN");
  unsetenv("NCCL_TUNER_CONFIG_FILE");
  unsetenv("PLEXUS_MIN_NCHANNELS");
  unlink(p);
}

namespace {

// One AllGather of `count` floats per rank; the decision it got.
plexusDecision_t allGatherOnce(ncclComm_t comm, cudaStream_t stream, int nranks, size_t count, long* bad) {
  std::vector<float> send(count, 1.0f), recv(count * nranks, 0.0f);
  *bad += ncclAllGather(send.data(), recv.data(), count, ncclFloat32, comm, stream) != ncclSuccess;
  plexusDecision_t d{};
  *bad += plexusCommLastDecision(comm, &d) != ncclSuccess;
  *bad += plexusStreamSynchronize(stream) != ncclSuccess;
  for (float v : recv) *bad += v != 1.0f;
  return d;
}

// A rank whose `var` differs from the others' makes a new communicator (a split of a good one): init must fail on
// every rank, naming both settings (wants), rather than leave the ranks to pick different algorithms and hang.
long mismatch(int rank, ncclComm_t comm, const char* var, const char* value, std::vector<const char*> wants) {
  if (rank == 1) setenv(var, value, 1);
  ncclComm_t split = nullptr;
  const ncclResult_t r = ncclCommSplit(comm, 0, rank, &split, nullptr);
  unsetenv(var);
  const std::string why = ncclGetLastError(split ? split : comm);
  long bad = 0;
  if (r != ncclInvalidUsage) {
    fprintf(stderr, "rank %d: ncclCommSplit returned %s, expected ncclInvalidUsage\n", rank, ncclGetErrorString(r));
    bad++;
  }
  wants.push_back("would choose algorithms differently");
  for (const char* want : wants)
    if (why.find(want) == std::string::npos) {
      fprintf(stderr, "rank %d: the error \"%s\" lacks \"%s\"\n", rank, why.c_str(), want);
      bad++;
    }
  if (split) ncclCommDestroy(split);
  return bad;
}
harness::Scenario tuningMismatch("tuning-mismatch", [](int rank, int, ncclComm_t comm, cudaStream_t) {
  return mismatch(rank, comm, "NCCL_ALGO", "ring,p2p", {"NCCL_ALGO=ring,p2p", "NCCL_ALGO=(unset)"});
});
// Sends and receives would cross as LL lines on one side and through the slots on the other.
harness::Scenario p2pLLMismatch("p2p-ll-mismatch", [](int rank, int, ncclComm_t comm, cudaStream_t) {
  return mismatch(rank, comm, "NCCL_P2P_LL_THRESHOLD", "4096",
                  {"NCCL_P2P_LL_THRESHOLD=4096", "NCCL_P2P_LL_THRESHOLD=64"});
});

}  // namespace

TEST_CASE("tuning: AllGather and Broadcast as point-to-point are algo-p2p's, decided like any algorithm") {
  // The cost model picks p2p for a large AllGather within a node, and the reason says so.
  CHECK(harness::runThreads(3, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          long bad = 0;
          const plexusDecision_t small = allGatherOnce(comm, stream, nranks, 1000, &bad);
          const plexusDecision_t large = allGatherOnce(comm, stream, nranks, 70000, &bad);
          if (std::string(small.algorithm) == "p2p" || std::string(large.algorithm) != "p2p" ||
              !contains(large.reason, "cost model: p2p/Simple")) {
            fprintf(stderr, "rank %d: 4 KB went to %s, 280 KB to %s (%s)\n", rank, small.algorithm, large.algorithm,
                    large.reason);
            bad++;
          }
          return bad;
        }) == 0);
  // A rule keeps it on the ring; another sends a size the cost model gives to direct to p2p... which declines it
  // below the zero-copy size: the operation fails naming the rule.
  {
    ConfigFile cfg(R"({ "version": 1, "tuning": [ { "collective": "allgather", "algorithm": "ring" } ] })");
    CHECK(harness::runThreads(2, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
            long bad = 0;
            const plexusDecision_t d = allGatherOnce(comm, stream, nranks, 70000, &bad);
            if (std::string(d.algorithm) != "ring") {
              fprintf(stderr, "rank %d: the rule's ring, got %s\n", rank, d.algorithm);
              bad++;
            }
            return bad;
          }) == 0);
  }
  {
    ConfigFile cfg(R"({ "version": 1, "tuning": [ { "collective": "allgather", "bytes": ["1M", "2M"],
                        "algorithm": "p2p" } ] })");
    CHECK(harness::runThreads(2, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
            long bad = 0;
            const plexusDecision_t d = allGatherOnce(comm, stream, nranks, 160000, &bad);  // 1.28 MB in all
            if (std::string(d.algorithm) != "p2p" || !contains(d.reason, "rule 1 of")) {
              fprintf(stderr, "rank %d: the rule's p2p, got %s (%s)\n", rank, d.algorithm, d.reason);
              bad++;
            }
            return bad;
          }) == 0);
  }
}

TEST_CASE("tuning: ranks whose tuning inputs differ fail init together, each naming both") {
  CHECK(harness::runProcesses("tuning-mismatch", 2) == 0);
}

TEST_CASE("tuning: ranks with different NCCL_P2P_LL_THRESHOLD fail init, naming both values") {
  CHECK(harness::runProcesses("p2p-ll-mismatch", 2) == 0);
}
