// The configuration file: every key, knob defaults through envGet, and each kind of bad file refused
// with the file, the line and the key named.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <plexus/device_v1.h>

#include "config/config.h"
#include "misc/check.h"
#include "misc/env.h"

using namespace plexus;

namespace {

// The error configParse gives for text, or "" when it parses.
std::string errorOf(const std::string& text) {
  Config c;
  if (configParse(text, "/etc/test.json", &c) == ncclSuccess) return "";
  return lastError(nullptr);
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("config: a full file parses into plugins, defaults and ordered rules") {
  const std::string text = R"({ "version": 1,
  "plugins": { "algorithms": ["ring", "tree", "/opt/x/libmy-algo.so"], "net": "ucx", "tuner": "csv" },
  "defaults": { "NCCL_BUFFSIZE": "8M", "PLEXUS_SPIN": 100, "NCCL_CHECK_MODE": true },
  "tuning": [
    { "collective": "allreduce", "bytes": [0, "64K"], "nranks": [8, 1024], "nnodes": [1, 64],
      "algorithm": "tree", "protocol": "ll", "channels": 2, "chunk": "32K" },
    { "collective": "AllReduce", "algorithm": "ring", "protocol": "simple" },
    { "bytes": ["1M"], "channels": 4 } ] }
)";
  Config c;
  REQUIRE(configParse(text, "/etc/test.json", &c) == ncclSuccess);
  CHECK(c.algorithms == std::vector<std::string>{"ring", "tree", "/opt/x/libmy-algo.so"});
  CHECK(c.net == "ucx");
  CHECK(c.tuner == "csv");
  REQUIRE(c.defaults.size() == 3);
  auto knob = [&](const std::string& k) {
    for (auto& [name, value] : c.defaults)
      if (name == k) return value;
    return std::string("(none)");
  };
  CHECK(knob("NCCL_BUFFSIZE") == "8M");
  CHECK(knob("PLEXUS_SPIN") == "100");
  CHECK(knob("NCCL_CHECK_MODE") == "1");
  REQUIRE(c.rules.size() == 3);
  const TuningRule& r = c.rules[0];
  CHECK(r.number == 1);
  CHECK(r.line == 5);
  CHECK(r.func == ncclFuncAllReduce);
  CHECK(r.bytesLo == 0);
  CHECK(r.bytesHi == 64 * 1024);
  CHECK(r.nranksLo == 8);
  CHECK(r.nranksHi == 1024);
  CHECK(r.nnodesHi == 64);
  CHECK(r.algorithm == "tree");
  CHECK(r.proto == PLEXUS_PROTO_LL);
  CHECK(r.channels == 2);
  CHECK(r.chunkBytes == 32 * 1024);
  CHECK(c.rules[1].func == ncclFuncAllReduce);  // names are case-insensitive
  CHECK(c.rules[1].proto == PLEXUS_PROTO_SIMPLE);
  CHECK(c.rules[1].line == 7);
  CHECK(c.rules[2].func == -1);
  CHECK(c.rules[2].bytesLo == 1024 * 1024);
  CHECK(c.rules[2].bytesHi == UINT64_MAX);
  CHECK(c.ruleName(c.rules[1]) == "rule 2 of /etc/test.json (line 7)");
}

TEST_CASE("config: rule matching on collective, half-open bytes, inclusive nranks and nnodes") {
  Config c;
  REQUIRE(configParse(R"({"version": 1, "tuning": [
      {"collective": "allreduce", "bytes": [100, 200], "nranks": [4, 8], "nnodes": [2], "algorithm": "tree"}]})",
                      "f", &c) == ncclSuccess);
  const TuningRule& r = c.rules[0];
  CHECK(r.matches(ncclFuncAllReduce, 100, 4, 2));
  CHECK(r.matches(ncclFuncAllReduce, 199, 8, 5));
  CHECK_FALSE(r.matches(ncclFuncAllReduce, 200, 4, 2));  // hi is excluded
  CHECK_FALSE(r.matches(ncclFuncAllReduce, 99, 4, 2));
  CHECK_FALSE(r.matches(ncclFuncAllReduce, 150, 9, 2));
  CHECK_FALSE(r.matches(ncclFuncAllReduce, 150, 3, 2));
  CHECK_FALSE(r.matches(ncclFuncAllReduce, 150, 4, 1));
  CHECK_FALSE(r.matches(ncclFuncBroadcast, 150, 4, 2));
}

TEST_CASE("config: each bad file is refused naming file, line and key") {
  struct Case {
    const char* text;
    const char* where;  // "file:line"
    const char* key;
    const char* what;
  } cases[] = {
      {"{ \"version\": 1,\n  \"tuning\": [ { \"collective\": \"allreduce\" ", "/etc/test.json:2", "", "not valid JSON"},
      {"[1, 2]", "/etc/test.json:1", "(top level)", "expected an object"},
      {"{ \"tuning\": [] }", "/etc/test.json:1", "version", "missing"},
      {"{ \"version\": 2 }", "/etc/test.json:1", "version", "expected an integer in [1, 1]"},
      {"{ \"version\": 1,\n\n  \"tunning\": [] }", "/etc/test.json:3", "tunning", "unknown key"},
      {"{ \"version\": 1, \"plugins\": {\n \"algorithm\": [\"ring\"] } }", "/etc/test.json:2", "plugins.algorithm",
       "unknown key"},
      {"{ \"version\": 1, \"plugins\": { \"algorithms\": \"ring\" } }", "/etc/test.json:1", "plugins.algorithms",
       "non-empty array"},
      {"{ \"version\": 1, \"plugins\": { \"algorithms\": [\"ring\", 3] } }", "/etc/test.json:1",
       "plugins.algorithms[1]", "non-empty string"},
      {"{ \"version\": 1, \"plugins\": { \"net\": 5 } }", "/etc/test.json:1", "plugins.net", "non-empty string"},
      {"{ \"version\": 1, \"defaults\": { \"BUFFSIZE\": 5 } }", "/etc/test.json:1", "defaults.BUFFSIZE",
       "NCCL_ or PLEXUS_"},
      {"{ \"version\": 1, \"defaults\": { \"NCCL_BUFFSIZE\": [5] } }", "/etc/test.json:1", "defaults.NCCL_BUFFSIZE",
       "a string, an integer or a boolean"},
      {"{ \"version\": 1, \"tuning\": {} }", "/etc/test.json:1", "tuning", "array of rules"},
      {"{ \"version\": 1, \"tuning\": [\n  { \"collective\": \"allreduce\", \"algo\": \"ring\" } ] }",
       "/etc/test.json:2", "tuning[0].algo", "unknown key"},
      {"{ \"version\": 1, \"tuning\": [\n  { \"collective\": \"alltoall\", \"algorithm\": \"ring\" } ] }",
       "/etc/test.json:2", "tuning[0].collective", "unknown collective"},
      {"{ \"version\": 1, \"tuning\": [\n  { \"bytes\": [\"64X\"], \"algorithm\": \"ring\" } ] }", "/etc/test.json:2",
       "tuning[0].bytes[0]", "expected a byte size"},
      {"{ \"version\": 1, \"tuning\": [\n  { \"bytes\": [-1], \"algorithm\": \"ring\" } ] }", "/etc/test.json:2",
       "tuning[0].bytes[0]", "expected a byte size"},
      {"{ \"version\": 1, \"tuning\": [\n  { \"bytes\": [\"64K\", \"64K\"], \"algorithm\": \"ring\" } ] }",
       "/etc/test.json:2", "tuning[0].bytes", "empty range"},
      {"{ \"version\": 1, \"tuning\": [\n  { \"bytes\": 5, \"algorithm\": \"ring\" } ] }", "/etc/test.json:2",
       "tuning[0].bytes", "[lo] or [lo, hi]"},
      {"{ \"version\": 1, \"tuning\": [\n  { \"nranks\": [8, 4], \"algorithm\": \"ring\" } ] }", "/etc/test.json:2",
       "tuning[0].nranks", "empty range"},
      {"{ \"version\": 1, \"tuning\": [\n  { \"nnodes\": [0], \"algorithm\": \"ring\" } ] }", "/etc/test.json:2",
       "tuning[0].nnodes[0]", "expected an integer"},
      {"{ \"version\": 1, \"tuning\": [\n  { \"protocol\": \"ll256\" } ] }", "/etc/test.json:2", "tuning[0].protocol",
       "unknown protocol"},
      {"{ \"version\": 1, \"tuning\": [\n  { \"channels\": 0 } ] }", "/etc/test.json:2", "tuning[0].channels",
       "expected an integer in [1, 32]"},
      {"{ \"version\": 1, \"tuning\": [\n  { \"collective\": \"reduce\" } ] }", "/etc/test.json:2", "tuning[0]",
       "sets nothing"},
      {"{ \"version\": 1, \"tuning\": [\n  { \"algorithm\": \"ring\" },\n  { \"collective\": \"reduce\", \"bytes\": "
       "[0, 10], \"algorithm\": \"tree\" } ] }",
       "/etc/test.json:3", "tuning[1]", "can never match: rule 1 (line 2)"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const std::string e = errorOf(c.text);
    CHECK(has(e, c.where));
    CHECK(has(e, c.key));
    CHECK(has(e, c.what));
  }
}

TEST_CASE("config: PLEXUS_CONFIG is found, reloaded when it changes, and its defaults reach envGet") {
  char path[] = "/tmp/plexus-config-test-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  auto write = [&](const std::string& text) {
    std::ofstream(path) << text;
  };
  unsetenv("NCCL_TEST_KNOB");
  unsetenv("PLEXUS_TEST_KNOB");
  write(R"({"version": 1, "defaults": {"NCCL_TEST_KNOB": "8M"}})");
  setenv("PLEXUS_CONFIG", path, 1);
  std::shared_ptr<const Config> cfg;
  REQUIRE(configLoad(&cfg) == ncclSuccess);
  CHECK(cfg->path == path);
  CHECK(envInt("TEST_KNOB", 0) == 8 << 20);  // the file's default, with its suffix
  setenv("NCCL_TEST_KNOB", "7", 1);
  CHECK(envInt("TEST_KNOB", 0) == 7);  // the environment wins
  unsetenv("NCCL_TEST_KNOB");
  // A different size or time is a different file: read again.
  write(R"({"version": 1, "defaults": {"PLEXUS_TEST_KNOB": 12345}})");
  REQUIRE(configLoad(&cfg) == ncclSuccess);
  CHECK(envInt("TEST_KNOB", 0) == 12345);
  write(R"({"version": 1, "defaults": {"PLEXUS_TEST_KNOB": 1}, "bogus": 1})");
  CHECK(configLoad(&cfg) == ncclInvalidUsage);
  CHECK(has(lastError(nullptr), path));
  CHECK(has(lastError(nullptr), "bogus"));
  setenv("PLEXUS_CONFIG", "/nonexistent/plexus.json", 1);
  CHECK(configLoad(&cfg) == ncclInvalidUsage);
  CHECK(has(lastError(nullptr), "PLEXUS_CONFIG=/nonexistent/plexus.json"));
  unsetenv("PLEXUS_CONFIG");
  unlink(path);
  REQUIRE(configLoad(&cfg) == ncclSuccess);  // no file anywhere: an empty configuration
  CHECK(cfg->rules.empty());
}

TEST_CASE("config: byte sizes") {
  uint64_t v = 0;
  CHECK((parseBytes("0", &v) && v == 0));
  CHECK((parseBytes("64K", &v) && v == 65536));
  CHECK((parseBytes("3m", &v) && v == 3u << 20));
  CHECK((parseBytes("2G", &v) && v == 2ull << 30));
  CHECK_FALSE(parseBytes("", &v));
  CHECK_FALSE(parseBytes("K", &v));
  CHECK_FALSE(parseBytes("-1", &v));
  CHECK_FALSE(parseBytes("1KB", &v));
  CHECK_FALSE(parseBytes("99999999999999999999", &v));
  CHECK_FALSE(parseBytes("17179869184G", &v));  // overflows
}
