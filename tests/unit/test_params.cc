// NCCL 2.30's parameter API (misc/params.h): every knob of the registry binds under each of its names; values come
// from the environment (PLEXUS_ winning), the configuration file's defaults, or the registry's default; and each
// misuse (unknown key, a value out of a type's range, a string read as a number, a short buffer, NULLs) is refused
// with a message in ncclGetLastError that names what happened.
#include <doctest/doctest.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "misc/params.h"

using namespace plexus;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
std::string lastErr() { return ncclGetLastError(nullptr); }

// Sets (or, with nullptr, unsets) a variable for the scope, and puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_.c_str(), old_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// A knob with both its variables cleared for the scope.
struct Cleared {
  ScopedEnv nccl, plexus;
  explicit Cleared(const std::string& name)
      : nccl(("NCCL_" + name).c_str(), nullptr), plexus(("PLEXUS_" + name).c_str(), nullptr) {}
};

ncclParamHandle_t bind(const char* key) {
  ncclParamHandle_t h = nullptr;
  REQUIRE_MESSAGE(ncclParamBind(&h, key) == ncclSuccess, key, ": ", lastErr());
  REQUIRE(h != nullptr);
  return h;
}

std::string str(ncclParamHandle_t h) {
  const char* s = nullptr;
  REQUIRE(ncclParamGetStr(h, &s) == ncclSuccess);
  REQUIRE(s != nullptr);
  return s;
}

int64_t i64(ncclParamHandle_t h) {
  int64_t v = -12345;
  REQUIRE_MESSAGE(ncclParamGetI64(h, &v) == ncclSuccess, lastErr());
  return v;
}

std::vector<std::string> keys() {
  const char** table = nullptr;
  int n = -1;
  REQUIRE(ncclParamGetAllParameterKeys(&table, &n) == ncclSuccess);
  REQUIRE(n >= 0);
  return std::vector<std::string>(table, table + n);
}

const ParamInfo& knob(const char* name) {
  for (const ParamInfo& p : params())
    if (!strcmp(p.name, name)) return p;
  FAIL("no knob ", name, " in the registry");
  return params().front();
}

}  // namespace

TEST_CASE("params: every knob binds under NCCL_, PLEXUS_ and its listed key, and reads") {
  REQUIRE(params().size() > 50);
  std::set<std::string> names;
  for (const ParamInfo& p : params()) {
    CAPTURE(p.name);
    CHECK(names.insert(p.name).second);  // no knob twice
    CHECK(*p.description);
    CHECK((!p.computed || *p.deflt));
    // An integer knob's fixed default is an integer.
    int64_t v = 0;
    if (p.type == ParamType::Int && !p.computed) CHECK(paramParseInt(p.deflt, &v));
    std::vector<std::string> ks = {p.key(), std::string("NCCL_") + p.name, std::string("PLEXUS_") + p.name};
    if (p.ncclAlias) ks.push_back(std::string("NCCL_") + p.ncclAlias);
    for (const std::string& k : ks) {
      CHECK(paramFind(k) == &p);
      ncclParamHandle_t h = bind(k.c_str());
      const char* s = nullptr;
      CHECK(ncclParamGetStr(h, &s) == ncclSuccess);
    }
  }
  // The twins are the same functions.
  ncclParamHandle_t h = nullptr;
  REQUIRE(pncclParamBind(&h, "NCCL_BUFFSIZE") == ncclSuccess);
  CHECK(h == bind("NCCL_BUFFSIZE"));
}

TEST_CASE("params: a value from the environment, PLEXUS_ winning over NCCL_") {
  Cleared clear("BUFFSIZE");
  ncclParamHandle_t nccl = bind("NCCL_BUFFSIZE"), plexus = bind("PLEXUS_BUFFSIZE");
  {
    ScopedEnv e("NCCL_BUFFSIZE", "8M");
    CHECK(i64(nccl) == 8388608);
    CHECK(i64(plexus) == 8388608);
    CHECK(str(nccl) == "8M");
    std::string source;
    CHECK(paramValue(knob("BUFFSIZE"), &source) == "8M");
    CHECK(source == "environment (NCCL_BUFFSIZE)");
    ScopedEnv p("PLEXUS_BUFFSIZE", "1K");
    CHECK(i64(nccl) == 1024);
    CHECK(i64(plexus) == 1024);
    CHECK(paramValue(knob("BUFFSIZE"), &source) == "1K");
    CHECK(source == "environment (PLEXUS_BUFFSIZE)");
    uint64_t u = 0;
    CHECK(ncclParamGetU64(nccl, &u) == ncclSuccess);
    CHECK(u == 1024);
    int16_t s16 = 0;
    CHECK(ncclParamGetI16(nccl, &s16) == ncclSuccess);
    CHECK(s16 == 1024);
  }
  CHECK(i64(nccl) == 4 << 20);  // restored: the default again
  // NCCL's name where it differs from Plexus's.
  Cleared read("P2P_READ"), readEnable("P2P_READ_ENABLE");
  ScopedEnv e("NCCL_P2P_READ_ENABLE", "1");
  CHECK(i64(bind("PLEXUS_P2P_READ")) == 1);
}

TEST_CASE("params: a value from the configuration file's defaults, under the environment") {
  char path[] = "/tmp/plexus-params-test-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  std::ofstream(path)
      << R"({"version": 1, "defaults": {"NCCL_BUFFSIZE": "2M", "PLEXUS_PROTO": "LL", "NCCL_CHECK_MODE": true}})";
  Cleared buff("BUFFSIZE"), proto("PROTO"), check("CHECK_MODE");
  std::shared_ptr<const Config> cfg;
  {
    ScopedEnv config("PLEXUS_CONFIG", path);
    REQUIRE(configLoad(&cfg) == ncclSuccess);
    CHECK(i64(bind("NCCL_BUFFSIZE")) == 2 << 20);
    CHECK(str(bind("NCCL_PROTO")) == "LL");
    CHECK(i64(bind("PLEXUS_CHECK_MODE")) == 1);
    std::string source;
    CHECK(paramValue(knob("BUFFSIZE"), &source) == "2M");
    CHECK(source == "config file (NCCL_BUFFSIZE in \"defaults\")");
    CHECK(paramValue(knob("PROTO"), &source) == "LL");
    CHECK(source == "config file (PLEXUS_PROTO in \"defaults\")");
    {
      ScopedEnv e("NCCL_BUFFSIZE", "3M");
      CHECK(i64(bind("NCCL_BUFFSIZE")) == 3 << 20);
      CHECK(paramValue(knob("BUFFSIZE"), &source) == "3M");
      CHECK(source == "environment (NCCL_BUFFSIZE)");
    }
  }
  unlink(path);
  REQUIRE(configLoad(&cfg) == ncclSuccess);  // the file's defaults are gone again
  CHECK(i64(bind("NCCL_BUFFSIZE")) == 4 << 20);
}

TEST_CASE("params: unset, a knob has the registry's default") {
  Cleared buff("BUFFSIZE"), watchdog("WATCHDOG_MS"), storage("WORK_STORAGE"), ifname("SOCKET_IFNAME");
  std::string source;
  CHECK(i64(bind("NCCL_BUFFSIZE")) == 4194304);
  CHECK(paramValue(knob("BUFFSIZE"), &source) == "4194304");
  CHECK(source == "default");
  CHECK(i64(bind("PLEXUS_WATCHDOG_MS")) == 100);
  CHECK(str(bind("PLEXUS_WORK_STORAGE")) == "auto");
  // No default: nothing, and "" as text.
  CHECK(!paramValue(knob("SOCKET_IFNAME"), &source));
  CHECK(source == "default");
  CHECK(str(bind("NCCL_SOCKET_IFNAME")).empty());
  // An empty integer value is the default, as envInt reads it.
  ScopedEnv empty("NCCL_BUFFSIZE", "");
  CHECK(i64(bind("NCCL_BUFFSIZE")) == 4194304);
}

TEST_CASE("params: a computed default has no number, and says so") {
  Cleared spin("SPIN");
  ncclParamHandle_t h = bind("PLEXUS_SPIN");
  int32_t v = 0;
  CHECK(ncclParamGetI32(h, &v) == ncclInvalidArgument);
  CHECK(has(lastErr(), "PLEXUS_SPIN is not set"));
  CHECK(has(lastErr(), "computed"));
  CHECK(str(h) == knob("SPIN").deflt);
  ScopedEnv e("PLEXUS_SPIN", "77");
  CHECK(ncclParamGetI32(h, &v) == ncclSuccess);
  CHECK(v == 77);
}

TEST_CASE("params: a value out of a type's range is refused with the value and the type") {
  Cleared buff("BUFFSIZE"), gid("IB_GID_INDEX");
  ScopedEnv e("NCCL_BUFFSIZE", "8M");
  ncclParamHandle_t h = bind("NCCL_BUFFSIZE");
  int8_t i8 = 42;
  CHECK(ncclParamGetI8(h, &i8) == ncclInvalidArgument);
  CHECK(i8 == 42);  // untouched
  CHECK(has(lastErr(), "ncclParamGetI8"));
  CHECK(has(lastErr(), "NCCL_BUFFSIZE is 8388608"));
  CHECK(has(lastErr(), "int8_t [-128, 127]"));
  uint16_t u16 = 0;
  CHECK(ncclParamGetU16(h, &u16) == ncclInvalidArgument);
  CHECK(has(lastErr(), "uint16_t [0, 65535]"));
  int32_t i32 = 0;
  CHECK(ncclParamGetI32(h, &i32) == ncclSuccess);
  CHECK(i32 == 8388608);
  // -1 (IB_GID_INDEX's default) fits every signed type and no unsigned one.
  ncclParamHandle_t g = bind("NCCL_IB_GID_INDEX");
  CHECK(ncclParamGetI8(g, &i8) == ncclSuccess);
  CHECK(i8 == -1);
  uint32_t u32 = 0;
  CHECK(ncclParamGetU32(g, &u32) == ncclInvalidArgument);
  CHECK(has(lastErr(), "-1"));
  uint8_t u8 = 0;
  CHECK(ncclParamGetU8(g, &u8) == ncclInvalidArgument);
  // An integer knob whose value is not one.
  ScopedEnv bad("PLEXUS_BUFFSIZE", "lots");
  CHECK(ncclParamGetI32(h, &i32) == ncclInvalidArgument);
  CHECK(has(lastErr(), "NCCL_BUFFSIZE=\"lots\""));  // the key the caller bound, with the value in effect
  CHECK(has(lastErr(), "environment (PLEXUS_BUFFSIZE)"));
  CHECK(has(lastErr(), "not an integer"));
}

TEST_CASE("params: a string knob reads as text, and as a number only when it is one") {
  Cleared ifname("SOCKET_IFNAME"), ucx("UCX_CONNECT_TIMEOUT");
  ScopedEnv e("NCCL_SOCKET_IFNAME", "eth0");
  ncclParamHandle_t h = bind("NCCL_SOCKET_IFNAME");
  CHECK(str(h) == "eth0");
  int32_t v = 0;
  CHECK(ncclParamGetI32(h, &v) == ncclInvalidArgument);
  CHECK(has(lastErr(), "NCCL_SOCKET_IFNAME is a string knob"));
  CHECK(has(lastErr(), "\"eth0\""));
  CHECK(has(lastErr(), "ncclParamGetStr"));
  ScopedEnv t("PLEXUS_UCX_CONNECT_TIMEOUT", "30");
  CHECK(ncclParamGetI32(bind("PLEXUS_UCX_CONNECT_TIMEOUT"), &v) == ncclSuccess);
  CHECK(v == 30);
  // GetStr's text stays until the thread's next GetStr.
  const char* first = nullptr;
  REQUIRE(ncclParamGetStr(h, &first) == ncclSuccess);
  CHECK(std::string(first) == "eth0");
}

TEST_CASE("params: ncclParamGet gives raw bytes, and a short buffer gets the size needed") {
  Cleared buff("BUFFSIZE"), ifname("SOCKET_IFNAME");
  ScopedEnv e("NCCL_BUFFSIZE", "8M"), i("NCCL_SOCKET_IFNAME", "eth0");
  ncclParamHandle_t h = bind("NCCL_BUFFSIZE");
  char buf[16];
  memset(buf, 0x5a, sizeof buf);
  int len = -1;
  CHECK(ncclParamGet(h, buf, 4, &len) == ncclInvalidArgument);
  CHECK(len == 8);
  CHECK(has(lastErr(), "NCCL_BUFFSIZE takes 8 bytes"));
  CHECK(has(lastErr(), "has 4"));
  CHECK(buf[0] == 0x5a);                                            // nothing written
  CHECK(ncclParamGet(h, nullptr, 0, &len) == ncclInvalidArgument);  // asking for the size
  CHECK(len == 8);
  CHECK(ncclParamGet(h, buf, sizeof buf, &len) == ncclSuccess);
  CHECK(len == 8);
  int64_t v = 0;
  memcpy(&v, buf, sizeof v);
  CHECK(v == 8388608);
  ncclParamHandle_t s = bind("NCCL_SOCKET_IFNAME");
  CHECK(ncclParamGet(s, buf, 4, &len) == ncclInvalidArgument);
  CHECK(len == 5);
  CHECK(ncclParamGet(s, buf, 5, &len) == ncclSuccess);
  CHECK(len == 5);
  CHECK(std::string(buf) == "eth0");
  CHECK(ncclParamGet(s, buf, 5, nullptr) == ncclInvalidArgument);
}

TEST_CASE("params: unknown keys and NULL arguments are refused, saying what to do") {
  ncclParamHandle_t h = nullptr;
  CHECK(ncclParamBind(&h, "NCCL_NO_SUCH_KNOB") == ncclInvalidArgument);
  CHECK(h == nullptr);
  CHECK(has(lastErr(), "\"NCCL_NO_SUCH_KNOB\""));
  CHECK(has(lastErr(), "ncclParamGetAllParameterKeys"));
  CHECK(has(lastErr(), "NCCL_PARAM_DUMP_ALL=true plexus-info --params"));
  CHECK(ncclParamBind(&h, "BUFFSIZE") == ncclInvalidArgument);  // a key is the full variable name
  CHECK(has(lastErr(), "did you mean NCCL_BUFFSIZE?"));
  CHECK(ncclParamBind(&h, "nccl_buffsize") == ncclInvalidArgument);
  CHECK(has(lastErr(), "did you mean NCCL_BUFFSIZE?"));
  CHECK(ncclParamBind(&h, nullptr) == ncclInvalidArgument);
  CHECK(has(lastErr(), "the key is NULL"));
  CHECK(ncclParamBind(nullptr, "NCCL_BUFFSIZE") == ncclInvalidArgument);
  CHECK(has(lastErr(), "out is NULL"));
  int64_t v = 0;
  CHECK(ncclParamGetI64(nullptr, &v) == ncclInvalidArgument);
  CHECK(has(lastErr(), "the handle is NULL"));
  int64_t notAHandle = 0;
  CHECK(ncclParamGetI64((ncclParamHandle_t)&notAHandle, &v) == ncclInvalidArgument);
  CHECK(has(lastErr(), "not a handle"));
  CHECK(ncclParamGetI64(bind("NCCL_BUFFSIZE"), nullptr) == ncclInvalidArgument);
  CHECK(has(lastErr(), "NCCL_BUFFSIZE: the output pointer is NULL"));
  const char* s = nullptr;
  CHECK(ncclParamGetParameter("NCCL_NO_SUCH_KNOB", &s, nullptr) == ncclInvalidArgument);
  CHECK(has(lastErr(), "NCCL_NO_SUCH_KNOB"));
  CHECK(ncclParamGetParameter("NCCL_BUFFSIZE", nullptr, nullptr) == ncclInvalidArgument);
  const char** table = nullptr;
  CHECK(ncclParamGetAllParameterKeys(&table, nullptr) == ncclInvalidArgument);
  CHECK(ncclParamGetAllParameterKeys(nullptr, nullptr) == ncclInvalidArgument);
}

TEST_CASE("params: GetAllParameterKeys lists the documented knobs, and all of them with NCCL_PARAM_DUMP_ALL") {
  Cleared dump("PARAM_DUMP_ALL");
  const std::vector<std::string> documented = keys();
  std::vector<std::string> all, one;
  {
    ScopedEnv e("NCCL_PARAM_DUMP_ALL", "true");
    all = keys();
  }
  {
    ScopedEnv e("NCCL_PARAM_DUMP_ALL", "1");
    one = keys();
  }
  CHECK(keys() == documented);  // unset again
  CHECK(one == all);
  CHECK(all.size() == params().size());
  CHECK(all.size() > documented.size());
  const std::set<std::string> allSet(all.begin(), all.end());
  CHECK(allSet.size() == all.size());
  for (const std::string& k : documented) {
    CAPTURE(k);
    CHECK(allSet.count(k) == 1);
    CHECK(paramFind(k)->documented);
  }
  for (const std::string& k : {"NCCL_BUFFSIZE", "NCCL_DEBUG", "PLEXUS_SPIN", "NCCL_PARAM_DUMP_ALL"})
    CHECK(std::find(documented.begin(), documented.end(), k) != documented.end());
  for (const std::string& k : all) bind(k.c_str());
  // Where NCCL has the knob, NCCL's name is listed; Plexus's own are listed as PLEXUS_.
  CHECK(allSet.count("NCCL_SOCKET_IFNAME") == 1);
  CHECK(allSet.count("PLEXUS_SOCKET_IFNAME") == 0);
  CHECK(allSet.count("PLEXUS_WATCHDOG_MS") == 1);
  CHECK(allSet.count("NCCL_P2P_READ_ENABLE") == 1);
  // The table stays valid until the thread's next call.
  const char** table = nullptr;
  int n = 0;
  REQUIRE(ncclParamGetAllParameterKeys(&table, &n) == ncclSuccess);
  CHECK(std::string(table[0]) == documented[0]);
}

TEST_CASE("params: GetParameter gives the same text as GetStr") {
  Cleared buff("BUFFSIZE"), ifname("SOCKET_IFNAME"), storage("WORK_STORAGE"), spin("SPIN");
  ScopedEnv e("PLEXUS_BUFFSIZE", "16M"), i("NCCL_SOCKET_IFNAME", "=eth1");
  for (const char* k : {"NCCL_BUFFSIZE", "NCCL_SOCKET_IFNAME", "PLEXUS_WORK_STORAGE", "PLEXUS_SPIN", "NCCL_PROTO"}) {
    CAPTURE(k);
    const char* value = nullptr;
    int len = -1;
    REQUIRE(ncclParamGetParameter(k, &value, &len) == ncclSuccess);
    const std::string text = value;
    CHECK(len == (int)text.size());
    CHECK(text == str(bind(k)));
  }
  const char* value = nullptr;
  REQUIRE(ncclParamGetParameter("NCCL_BUFFSIZE", &value, nullptr) == ncclSuccess);
  CHECK(std::string(value) == "16M");
  ncclParamDumpAll();  // logs; must not fail on any knob
}
