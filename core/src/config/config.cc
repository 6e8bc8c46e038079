#include "config/config.h"

#include <plexus/device_v1.h>
#include <strings.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "misc/check.h"
#include "misc/env.h"
#include "planner/planner.h"

namespace plexus {

namespace {

using nlohmann::json;

// Line of every value in a JSON text, by JSON pointer ("/tuning/0/bytes"): nlohmann keeps no
// positions, and an error should point at the line to fix. The text has already parsed.
class Locator {
 public:
  explicit Locator(const std::string& text) : s_(text) {
    skip();
    value("");
  }
  int line(const std::string& pointer) const {
    auto it = lines_.find(pointer);
    return it == lines_.end() ? 1 : it->second;
  }

 private:
  void skip() {
    while (i_ < s_.size() && isspace((unsigned char)s_[i_])) {
      if (s_[i_] == '\n') line_++;
      i_++;
    }
  }
  std::string string() {  // at the opening quote; returns the raw contents (escapes kept)
    size_t start = ++i_;
    while (i_ < s_.size() && s_[i_] != '"') i_ += s_[i_] == '\\' ? 2 : 1;
    return s_.substr(start, (i_++) - start);
  }
  void value(const std::string& ptr) {
    lines_[ptr] = line_;
    if (i_ >= s_.size()) return;
    if (s_[i_] == '{') {
      i_++;
      for (skip(); i_ < s_.size() && s_[i_] != '}';) {
        std::string key = string();
        skip();
        i_++;  // ':'
        skip();
        lines_[ptr + "/" + key] = line_;
        value(ptr + "/" + key);
        skip();
        if (i_ < s_.size() && s_[i_] == ',') i_++;
        skip();
      }
      i_++;
    } else if (s_[i_] == '[') {
      i_++;
      int k = 0;
      for (skip(); i_ < s_.size() && s_[i_] != ']'; k++) {
        value(ptr + "/" + std::to_string(k));
        skip();
        if (i_ < s_.size() && s_[i_] == ',') i_++;
        skip();
      }
      i_++;
    } else if (s_[i_] == '"') {
      string();
    } else {
      while (i_ < s_.size() && !strchr(",]} \t\r\n", s_[i_])) i_++;
    }
  }

  const std::string& s_;
  size_t i_ = 0;
  int line_ = 1;
  std::map<std::string, int> lines_;
};

// Errors name the file, the line and the key ("tuning[2].bytes"), and say what is expected.
class Checker {
 public:
  Checker(const std::string& path, const Locator& loc) : path_(path), loc_(loc) {}

  ncclResult_t fail(const std::string& ptr, const std::string& key, const std::string& msg) const {
    return setError(nullptr, ncclInvalidUsage, "config %s:%d: %s: %s. Fix the file or point PLEXUS_CONFIG elsewhere.",
                    path_.c_str(), loc_.line(ptr), key.c_str(), msg.c_str());
  }
  int line(const std::string& ptr) const { return loc_.line(ptr); }

  // Every key of object o (at ptr) must be one of known.
  ncclResult_t keys(const json& o, const std::string& ptr, const std::string& name,
                    std::initializer_list<const char*> known) const {
    for (auto it = o.begin(); it != o.end(); ++it) {
      bool ok = false;
      std::string list;
      for (const char* k : known) {
        ok |= it.key() == k;
        list += std::string(list.empty() ? "" : ", ") + k;
      }
      if (!ok)
        return fail(ptr + "/" + it.key(), name.empty() ? it.key() : name + "." + it.key(),
                    "unknown key (known: " + list + ")");
    }
    return ncclSuccess;
  }

 private:
  const std::string& path_;
  const Locator& loc_;
};

std::string typeOf(const json& v) { return v.type_name(); }

// A size: a non-negative integer, or a string such as "64K".
ncclResult_t sizeValue(const Checker& c, const json& v, const std::string& ptr, const std::string& key, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return ncclSuccess;
  }
  if (v.is_string() && parseBytes(v.get<std::string>(), out)) return ncclSuccess;
  return c.fail(ptr, key,
                "expected a byte size (an integer, or a string with a K, M or G suffix such as \"64K\"), got " +
                    (v.is_string() ? "\"" + v.get<std::string>() + "\"" : v.dump()));
}

ncclResult_t intValue(const Checker& c, const json& v, const std::string& ptr, const std::string& key, int lo, int hi,
                      int* out) {
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
    return c.fail(ptr, key,
                  "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + v.dump());
  *out = (int)v.get<int64_t>();
  return ncclSuccess;
}

ncclResult_t stringValue(const Checker& c, const json& v, const std::string& ptr, const std::string& key,
                         std::string* out) {
  if (!v.is_string() || v.get<std::string>().empty())
    return c.fail(ptr, key, "expected a non-empty string, got " + (v.is_string() ? std::string("\"\"") : typeOf(v)));
  *out = v.get<std::string>();
  return ncclSuccess;
}

// [lo] or [lo, hi] of counts (inclusive).
ncclResult_t countRange(const Checker& c, const json& v, const std::string& ptr, const std::string& key, int* lo,
                        int* hi) {
  if (!v.is_array() || v.empty() || v.size() > 2)
    return c.fail(ptr, key, "expected [lo] or [lo, hi] (inclusive), got " + v.dump());
  NCCLCHECK(intValue(c, v[0], ptr + "/0", key + "[0]", 1, INT_MAX, lo));
  if (v.size() == 2) NCCLCHECK(intValue(c, v[1], ptr + "/1", key + "[1]", 1, INT_MAX, hi));
  if (*lo > *hi) return c.fail(ptr, key, "empty range " + v.dump() + ": lo must not exceed hi");
  return ncclSuccess;
}

const struct {
  const char* name;
  ncclFunc_t func;
} kCollectives[] = {{"allreduce", ncclFuncAllReduce},
                    {"broadcast", ncclFuncBroadcast},
                    {"reduce", ncclFuncReduce},
                    {"allgather", ncclFuncAllGather},
                    {"reducescatter", ncclFuncReduceScatter}};

ncclResult_t parseRule(const Checker& c, const json& r, int k, TuningRule* out) {
  const std::string ptr = "/tuning/" + std::to_string(k), name = "tuning[" + std::to_string(k) + "]";
  if (!r.is_object()) return c.fail(ptr, name, "expected an object, got " + typeOf(r));
  NCCLCHECK(
      c.keys(r, ptr, name, {"collective", "bytes", "nranks", "nnodes", "algorithm", "protocol", "channels", "chunk"}));
  TuningRule t;
  t.number = k + 1;
  t.line = c.line(ptr);
  if (r.contains("collective")) {
    std::string s;
    NCCLCHECK(stringValue(c, r["collective"], ptr + "/collective", name + ".collective", &s));
    for (auto& col : kCollectives)
      if (strcasecmp(s.c_str(), col.name) == 0) t.func = col.func;
    if (t.func < 0)
      return c.fail(ptr + "/collective", name + ".collective",
                    "unknown collective \"" + s + "\" (known: allreduce, broadcast, reduce, allgather, reducescatter)");
  }
  if (r.contains("bytes")) {
    const json& b = r["bytes"];
    const std::string bp = ptr + "/bytes", bk = name + ".bytes";
    if (!b.is_array() || b.empty() || b.size() > 2)
      return c.fail(bp, bk, "expected [lo] or [lo, hi] (half-open: lo <= bytes < hi), got " + b.dump());
    NCCLCHECK(sizeValue(c, b[0], bp + "/0", bk + "[0]", &t.bytesLo));
    if (b.size() == 2) NCCLCHECK(sizeValue(c, b[1], bp + "/1", bk + "[1]", &t.bytesHi));
    if (t.bytesLo >= t.bytesHi) return c.fail(bp, bk, "empty range " + b.dump() + ": lo must be below hi");
  }
  if (r.contains("nranks"))
    NCCLCHECK(countRange(c, r["nranks"], ptr + "/nranks", name + ".nranks", &t.nranksLo, &t.nranksHi));
  if (r.contains("nnodes"))
    NCCLCHECK(countRange(c, r["nnodes"], ptr + "/nnodes", name + ".nnodes", &t.nnodesLo, &t.nnodesHi));
  if (r.contains("algorithm"))
    NCCLCHECK(stringValue(c, r["algorithm"], ptr + "/algorithm", name + ".algorithm", &t.algorithm));
  if (r.contains("protocol")) {
    std::string s;
    NCCLCHECK(stringValue(c, r["protocol"], ptr + "/protocol", name + ".protocol", &s));
    for (int p = 0; p < PLEXUS_NUM_PROTOCOLS; p++)
      if (strcasecmp(s.c_str(), protoName(p)) == 0) t.proto = p;
    if (t.proto < 0)
      return c.fail(ptr + "/protocol", name + ".protocol", "unknown protocol \"" + s + "\" (known: ll, ll128, simple)");
  }
  if (r.contains("channels"))
    NCCLCHECK(intValue(c, r["channels"], ptr + "/channels", name + ".channels", 1, PLEXUS_MAXCHANNELS, &t.channels));
  if (r.contains("chunk")) {
    NCCLCHECK(sizeValue(c, r["chunk"], ptr + "/chunk", name + ".chunk", &t.chunkBytes));
    if (t.chunkBytes == 0) return c.fail(ptr + "/chunk", name + ".chunk", "a chunk of 0 bytes");
  }
  if (t.algorithm.empty() && t.proto < 0 && !t.channels && !t.chunkBytes)
    return c.fail(ptr, name, "the rule sets nothing (give algorithm, protocol, channels or chunk)");
  *out = t;
  return ncclSuccess;
}

// True when every operation b matches, a matches too: b can never be reached after a.
bool covers(const TuningRule& a, const TuningRule& b) {
  return (a.func < 0 || a.func == b.func) && a.bytesLo <= b.bytesLo && b.bytesHi <= a.bytesHi &&
         a.nranksLo <= b.nranksLo && b.nranksHi <= a.nranksHi && a.nnodesLo <= b.nnodesLo && b.nnodesHi <= a.nnodesHi;
}

std::mutex loadMutex;
std::shared_ptr<const Config> current;  // guarded by loadMutex
std::string currentKey;                 // path, size and time of the file current came from

// The file to read: PLEXUS_CONFIG (which must exist), else ./plexus.json, else ~/.config/plexus/plexus.json.
ncclResult_t findFile(std::string* path, struct stat* st) {
  path->clear();
  if (const char* env = getenv("PLEXUS_CONFIG")) {
    if (stat(env, st) != 0)
      return setError(nullptr, ncclInvalidUsage,
                      "config: PLEXUS_CONFIG=%s: %s. Set it to a readable JSON file, or unset it.", env,
                      strerror(errno));
    *path = env;
    return ncclSuccess;
  }
  std::vector<std::string> candidates = {"plexus.json"};
  if (const char* home = getenv("HOME")) candidates.push_back(std::string(home) + "/.config/plexus/plexus.json");
  for (const std::string& c : candidates)
    if (stat(c.c_str(), st) == 0) {
      *path = c;
      return ncclSuccess;
    }
  return ncclSuccess;
}

}  // namespace

bool parseBytes(const std::string& text, uint64_t* out) {
  if (text.empty() || !isdigit((unsigned char)text[0])) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(text.c_str(), &end, 10);
  if (errno) return false;
  uint64_t mult = 1;
  std::string suffix(end);
  if (suffix == "K" || suffix == "k")
    mult = 1ull << 10;
  else if (suffix == "M" || suffix == "m")
    mult = 1ull << 20;
  else if (suffix == "G" || suffix == "g")
    mult = 1ull << 30;
  else if (!suffix.empty())
    return false;
  if (v > UINT64_MAX / mult) return false;
  *out = v * mult;
  return true;
}

std::string Config::ruleName(const TuningRule& r) const {
  return "rule " + std::to_string(r.number) + " of " + path + " (line " + std::to_string(r.line) + ")";
}

ncclResult_t configParse(const std::string& text, const std::string& path, Config* out) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    int line = 1;
    for (size_t i = 0; i < e.byte && i < text.size(); i++) line += text[i] == '\n';
    std::string why = e.what();
    if (size_t colon = why.rfind(": "); colon != std::string::npos) why = why.substr(colon + 2);
    return setError(nullptr, ncclInvalidUsage,
                    "config %s:%d: not valid JSON: %s. Fix the file or point PLEXUS_CONFIG elsewhere.", path.c_str(),
                    line, why.c_str());
  }
  Locator loc(text);
  Checker c(path, loc);
  Config cfg;
  cfg.path = path;
  if (!doc.is_object()) return c.fail("", "(top level)", "expected an object, got " + typeOf(doc));
  NCCLCHECK(c.keys(doc, "", "", {"version", "plugins", "defaults", "tuning"}));
  if (!doc.contains("version")) return c.fail("", "version", "missing; write \"version\": 1");
  int version;
  NCCLCHECK(intValue(c, doc["version"], "/version", "version", 1, 1, &version));
  if (doc.contains("plugins")) {
    const json& p = doc["plugins"];
    if (!p.is_object()) return c.fail("/plugins", "plugins", "expected an object, got " + typeOf(p));
    NCCLCHECK(c.keys(p, "/plugins", "plugins", {"algorithms", "transports", "net", "tuner"}));
    for (auto [key, list] : {std::pair<const char*, std::vector<std::string>*>{"algorithms", &cfg.algorithms},
                             {"transports", &cfg.transports}}) {
      if (!p.contains(key)) continue;
      const std::string ptr = std::string("/plugins/") + key, name = std::string("plugins.") + key;
      const json& a = p[key];
      if (!a.is_array() || a.empty()) return c.fail(ptr, name, "expected a non-empty array of names or paths");
      for (size_t k = 0; k < a.size(); k++) {
        std::string s;
        NCCLCHECK(stringValue(c, a[k], ptr + "/" + std::to_string(k), name + "[" + std::to_string(k) + "]", &s));
        if (list == &cfg.transports && (s == "net" || s == "none"))
          return c.fail(ptr + "/" + std::to_string(k), name + "[" + std::to_string(k) + "]",
                        "'" + s +
                            "' is not a transport plugin: the built-in net transport always comes last; list "
                            "the plugins to try before it");
        list->push_back(s);
      }
    }
    if (p.contains("net")) NCCLCHECK(stringValue(c, p["net"], "/plugins/net", "plugins.net", &cfg.net));
    if (p.contains("tuner")) NCCLCHECK(stringValue(c, p["tuner"], "/plugins/tuner", "plugins.tuner", &cfg.tuner));
  }
  if (doc.contains("defaults")) {
    const json& d = doc["defaults"];
    if (!d.is_object()) return c.fail("/defaults", "defaults", "expected an object of NCCL_* / PLEXUS_* knobs");
    for (auto it = d.begin(); it != d.end(); ++it) {
      const std::string& k = it.key();
      const std::string ptr = "/defaults/" + k, key = "defaults." + k;
      if (k.rfind("NCCL_", 0) != 0 && k.rfind("PLEXUS_", 0) != 0)
        return c.fail(ptr, key, "a knob's name starts with NCCL_ or PLEXUS_");
      if (k == "PLEXUS_CONFIG") return c.fail(ptr, key, "the configuration cannot name another configuration");
      const json& v = it.value();
      std::string value;
      if (v.is_string())
        value = v.get<std::string>();
      else if (v.is_number_integer())
        value = std::to_string(v.get<int64_t>());
      else if (v.is_boolean())
        value = v.get<bool>() ? "1" : "0";
      else
        return c.fail(ptr, key, "expected a string, an integer or a boolean, got " + typeOf(v));
      cfg.defaults.emplace_back(k, value);
    }
  }
  if (doc.contains("tuning")) {
    const json& t = doc["tuning"];
    if (!t.is_array()) return c.fail("/tuning", "tuning", "expected an array of rules, got " + typeOf(t));
    for (size_t k = 0; k < t.size(); k++) {
      TuningRule r;
      NCCLCHECK(parseRule(c, t[k], (int)k, &r));
      for (const TuningRule& earlier : cfg.rules)
        if (covers(earlier, r))
          return c.fail("/tuning/" + std::to_string(k), "tuning[" + std::to_string(k) + "]",
                        "can never match: rule " + std::to_string(earlier.number) + " (line " +
                            std::to_string(earlier.line) + ") matches every operation it does and comes first");
      cfg.rules.push_back(r);
    }
  }
  *out = std::move(cfg);
  return ncclSuccess;
}

ncclResult_t configLoad(std::shared_ptr<const Config>* out) {
  std::string path;
  struct stat st {};
  NCCLCHECK(findFile(&path, &st));
  const std::string key = path.empty()
                              ? ""
                              : path + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) +
                                    "." + std::to_string(st.st_mtim.tv_nsec);
  {
    std::lock_guard<std::mutex> lock(loadMutex);
    if (current && key == currentKey) {
      *out = current;
      return ncclSuccess;
    }
  }
  // Parsed without the lock: errors and logs read knobs, which read the configuration in effect.
  auto cfg = std::make_shared<Config>();
  if (!path.empty()) {
    std::ifstream in(path);
    if (!in) return setError(nullptr, ncclInvalidUsage, "config %s: cannot read it: %s", path.c_str(), strerror(errno));
    std::stringstream ss;
    ss << in.rdbuf();
    NCCLCHECK(configParse(ss.str(), path, cfg.get()));
  }
  {
    std::lock_guard<std::mutex> lock(loadMutex);
    current = cfg;
    currentKey = key;
  }
  if (!path.empty())
    INFO(NCCL_INIT | NCCL_ENV, "config %s: %zu tuning rule(s), %zu knob default(s)%s", path.c_str(), cfg->rules.size(),
         cfg->defaults.size(), cfg->algorithms.empty() ? "" : ", algorithm plugins from the file");
  *out = cfg;
  return ncclSuccess;
}

namespace {
std::vector<std::string> commaList(const std::string& spec) {
  std::vector<std::string> names;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string tok = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!tok.empty()) names.push_back(tok);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return names;
}
}  // namespace

std::vector<std::string> configTransports(const Config& config, bool* none) {
  *none = false;
  auto env = envGet("TRANSPORT_PLUGIN");
  if (!env) return config.transports;
  if (*env == "none") {
    *none = true;
    return {};
  }
  return commaList(*env);
}

std::vector<std::string> configAlgorithms(const Config& config) {
  auto env = envGet("ALGORITHMS");
  if (!env && !config.algorithms.empty()) return config.algorithms;
  return commaList(env ? *env : "ring,direct,tree");
}

std::vector<std::string> communicatorAlgorithms(const Config& config) {
  std::vector<std::string> names = configAlgorithms(config);
  if (std::find(names.begin(), names.end(), "p2p") == names.end()) names.push_back("p2p");
  return names;
}

bool configDefault(const std::string& var, std::string* value) {
  std::shared_ptr<const Config> cfg;
  {
    std::lock_guard<std::mutex> lock(loadMutex);
    cfg = current;
  }
  if (!cfg) return false;
  for (const auto& [k, v] : cfg->defaults)
    if (k == var) {
      *value = v;
      return true;
    }
  return false;
}

}  // namespace plexus
