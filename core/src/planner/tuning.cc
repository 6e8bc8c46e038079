#include "planner/tuning.h"

#include <strings.h>

#include <algorithm>
#include <cmath>

#include "comm/communicator.h"
#include "misc/check.h"
#include "misc/env.h"

namespace plexus {

namespace {

// The items of a NCCL_ALGO / NCCL_PROTO value (NCCL's syntax: a list of names, "^" to exclude).
struct NameList {
  bool exclude = false;
  std::vector<std::string> names;
  bool allows(const std::string& name) const {
    bool listed = false;
    for (const std::string& n : names) listed |= strcasecmp(n.c_str(), name.c_str()) == 0;
    return exclude ? !listed : listed;
  }
};

std::optional<NameList> envList(const char* var) {
  auto spec = envGet(var);
  if (!spec || spec->empty()) return std::nullopt;
  NameList l;
  l.exclude = (*spec)[0] == '^';
  size_t pos = l.exclude ? 1 : 0;
  while (pos <= spec->size()) {
    size_t comma = spec->find(',', pos);
    l.names.push_back(spec->substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return l;
}

ncclResult_t allowedProtocols(uint32_t* mask) {
  *mask = (1u << PLEXUS_NUM_PROTOCOLS) - 1;
  auto list = envList("PROTO");
  if (!list) return ncclSuccess;
  for (const std::string& n : list->names) {
    bool known = false;
    for (int p = 0; p < PLEXUS_NUM_PROTOCOLS; p++) known |= strcasecmp(n.c_str(), protoName(p)) == 0;
    if (!known)
      return setError(nullptr, ncclInvalidUsage, "NCCL_PROTO=\"%s\": unknown protocol \"%s\" (known: LL, LL128, Simple)",
                      envGet("PROTO")->c_str(), n.c_str());
  }
  *mask = 0;
  for (int p = 0; p < PLEXUS_NUM_PROTOCOLS; p++)
    if (list->allows(protoName(p))) *mask |= 1u << p;
  return ncclSuccess;
}

const char* intern(Tuning& t, std::string s) {
  for (const std::string& r : t.reasons)
    if (r == s) return r.c_str();
  t.reasons.push_back(std::move(s));
  return t.reasons.back().c_str();
}

int algoIndex(const Tuning& t, const std::string& name) {
  for (size_t a = 0; a < t.algos->size(); a++)
    if ((*t.algos)[a].plugin->name == name || (*t.algos)[a].plugin->path == name) return (int)a;
  return -1;
}

bool serves(const AlgoInstance& a, int func) { return a.plugin->api->funcMask & (1u << func); }

// NCCL's algorithm index of a plugin (for tuner plugins' cost tables); -1 for ours without one.
int ncclAlgoIndex(const std::string& name) {
  if (name == "tree") return 0;  // NCCL_ALGO_TREE
  if (name == "ring") return 1;  // NCCL_ALGO_RING
  return -1;
}

// One candidate: an (algorithm, protocol) pair the environment allows and its cost model prices.
struct Candidate {
  int algo, proto, nChannels;
  float timeUs;
};

std::vector<Candidate> candidates(const Tuning& t, ncclFunc_t func, size_t bytes, int nChannels) {
  std::vector<Candidate> out;
  for (int a = 0; a < (int)t.algos->size(); a++) {
    const AlgoInstance& inst = (*t.algos)[a];
    const plexusAlgo_v1_t* api = inst.plugin->api;
    if (!t.algoAllowed[a] || !serves(inst, func)) continue;
    const int ch = std::min(nChannels, inst.maxChannels);
    for (int p = 0; p < PLEXUS_NUM_PROTOCOLS; p++) {
      if (!(t.protoMask & api->protoMask & (1u << p))) continue;
      float us = -1;
      if (api->cost(inst.ctx, func, p, bytes, ch, &us) != ncclSuccess || !(us >= 0)) continue;
      out.push_back(Candidate{a, p, ch, us});
    }
  }
  return out;
}

const Candidate* cheapest(const std::vector<Candidate>& cs, int algo, int proto) {
  const Candidate* best = nullptr;
  for (const Candidate& c : cs)
    if ((algo < 0 || c.algo == algo) && (proto < 0 || c.proto == proto) && (!best || c.timeUs < best->timeUs)) best = &c;
  return best;
}

std::string describe(const Tuning& t, const Candidate& c) {
  char buf[96];
  snprintf(buf, sizeof buf, "%s/%s %.2f us", (*t.algos)[c.algo].plugin->name.c_str(), protoName(c.proto), c.timeUs);
  return buf;
}

// The largest chunk each protocol's step loops take: two Simple steps (a rank fills one while its
// peer drains the other), one LL slot of lines.
size_t maxChunk(const Tuning& t, int proto) {
  return proto == PLEXUS_PROTO_LL ? (size_t)PLEXUS_LL_SLOT_LINES * 8 : t.stepBytes * 2;
}

}  // namespace

ncclResult_t tuningInit(Tuning* t, const std::vector<AlgoInstance>* algos, std::shared_ptr<const Config> config,
                        int rank, int nRanks, int nNodes, int nChannels, size_t stepBytes) {
  t->algos = algos;
  t->config = std::move(config);
  t->rank = rank;
  t->nRanks = nRanks;
  t->nNodes = nNodes;
  t->nChannels = nChannels;
  t->stepBytes = stepBytes;
  t->minChannelBytes = (size_t)std::max<int64_t>(1, envInt("MIN_CHANNEL_BYTES", 512 * 1024));
  NCCLCHECK(allowedProtocols(&t->protoMask));
  auto algoList = envList("ALGO");
  t->algoAllowed.clear();
  for (const AlgoInstance& a : *algos) t->algoAllowed.push_back(!algoList || algoList->allows(a.plugin->name));
  // Rules name loaded algorithms, which serve what the rule asks for.
  const Config& cfg = *t->config;
  for (const TuningRule& r : cfg.rules) {
    if (r.algorithm.empty()) continue;
    const int a = algoIndex(*t, r.algorithm);
    if (a < 0) {
      std::string loaded;
      for (const AlgoInstance& i : *algos) loaded += (loaded.empty() ? "" : ", ") + i.plugin->name;
      return setError(nullptr, ncclInvalidUsage,
                      "config %s:%d: tuning[%d].algorithm: \"%s\" is not a loaded algorithm (loaded: %s); load it "
                      "with plugins.algorithms or PLEXUS_ALGORITHMS", cfg.path.c_str(), r.line, r.number - 1,
                      r.algorithm.c_str(), loaded.c_str());
    }
    const plexusAlgo_v1_t* api = (*algos)[a].plugin->api;
    if (r.proto >= 0 && !(api->protoMask & (1u << r.proto)))
      return setError(nullptr, ncclInvalidUsage, "config %s:%d: tuning[%d]: algorithm %s does not serve protocol %s",
                      cfg.path.c_str(), r.line, r.number - 1, r.algorithm.c_str(), protoName(r.proto));
    for (int f = 0; f < ncclNumFuncs; f++) {
      if (r.func >= 0 && r.func != f) continue;
      const bool collective = f == ncclFuncBroadcast || f == ncclFuncReduce || f == ncclFuncAllGather ||
                              f == ncclFuncReduceScatter || f == ncclFuncAllReduce;
      if (collective && !serves((*algos)[a], f))
        return setError(nullptr, ncclInvalidUsage,
                        "config %s:%d: tuning[%d]: algorithm %s does not serve %s%s", cfg.path.c_str(), r.line,
                        r.number - 1, r.algorithm.c_str(), funcName((ncclFunc_t)f),
                        r.func < 0 ? " (the rule names no collective, so it applies to all: add \"collective\")" : "");
    }
  }
  return ncclSuccess;
}

ncclResult_t tuningDecide(Tuning& t, ncclFunc_t func, size_t bytes, Decision* d) {
  Tuning::Cached& cached = t.cache[(bytes * 0x9E3779B97F4A7C15ull >> 58) ^ (size_t)func];
  if (cached.func == (int)func && cached.bytes == bytes) {
    *d = cached.decision;
    return ncclSuccess;
  }
  // Channels: enough that each carries a worthwhile share, no more than the communicator has.
  const int nChannels = (int)std::clamp<size_t>(bytes / t.minChannelBytes, 1, (size_t)t.nChannels);
  const std::vector<Candidate> cs = candidates(t, func, bytes, nChannels);
  const Candidate* pick = nullptr;
  std::string why;
  int channels = 0;
  size_t chunk = 0;
  const Config& cfg = *t.config;
  const TuningRule* rule = nullptr;
  for (const TuningRule& r : cfg.rules)
    if (r.matches(func, bytes, t.nRanks, t.nNodes)) {
      rule = &r;
      break;
    }
  if (rule) {
    const int a = rule->algorithm.empty() ? -1 : algoIndex(t, rule->algorithm);
    if ((a >= 0 && !t.algoAllowed[a]) || (rule->proto >= 0 && !(t.protoMask & (1u << rule->proto)))) {
      why = "NCCL_ALGO/NCCL_PROTO override " + cfg.ruleName(*rule) + "; ";
    } else {
      pick = cheapest(cs, a, rule->proto);
      if (!pick)
        return setError(t.comm, ncclInvalidUsage,
                        "%s selects %s/%s for %s of %zu bytes on %d ranks, %d node(s), which it cannot run here (its "
                        "cost model declines); narrow the rule (bytes, nranks, nnodes) or pick another algorithm",
                        cfg.ruleName(*rule).c_str(), a >= 0 ? rule->algorithm.c_str() : "any algorithm",
                        rule->proto >= 0 ? protoName(rule->proto) : "any protocol", funcName(func), bytes, t.nRanks,
                        t.nNodes);
      why = cfg.ruleName(*rule);
      channels = rule->channels;
      chunk = rule->chunkBytes;
    }
  }
  if (!pick) {
    pick = cheapest(cs, -1, -1);
    if (!pick) {
      auto algo = envGet("ALGO");
      auto proto = envGet("PROTO");
      return setError(t.comm, ncclInvalidUsage,
                      "no loaded algorithm can run %s of %zu bytes on %d ranks with NCCL_ALGO=%s NCCL_PROTO=%s; unset "
                      "or widen NCCL_ALGO/NCCL_PROTO, or load an algorithm that serves it (PLEXUS_ALGORITHMS)",
                      funcName(func), bytes, t.nRanks, algo ? algo->c_str() : "(unset)",
                      proto ? proto->c_str() : "(unset)");
    }
    why += "cost model: " + describe(t, *pick);
    const Candidate* second = nullptr;
    for (const Candidate& c : cs)
      if (&c != pick && (!second || c.timeUs < second->timeUs)) second = &c;
    if (second) why += ", next " + describe(t, *second);
  }
  Decision dec;
  dec.algo = pick->algo;
  dec.proto = pick->proto;
  dec.timeUs = pick->timeUs;
  const int algoMax = std::min(t.nChannels, (*t.algos)[pick->algo].maxChannels);
  dec.nChannels = channels ? std::min(channels, algoMax) : pick->nChannels;
  dec.chunkBytes = std::min(chunk ? (size_t)chunk : maxChunk(t, dec.proto), maxChunk(t, dec.proto));
  dec.reason = intern(t, why);
  cached = Tuning::Cached{(int)func, bytes, dec};
  // Once per collective and power-of-two size bucket.
  const int bucket = bytes ? 63 - __builtin_clzll((unsigned long long)bytes) : 0;
  if (!(t.logged[func] & (1ull << bucket))) {
    t.logged[func] |= 1ull << bucket;
    INFO(NCCL_TUNING, "rank %d: %s of %zu B (bucket [%llu, %llu) B) -> %s/%s, %d channel(s), chunk %zu B: %s", t.rank,
         funcName(func), bytes, bucket ? 1ull << bucket : 0ull, 1ull << (bucket + 1),
         (*t.algos)[dec.algo].plugin->name.c_str(), protoName(dec.proto), dec.nChannels, dec.chunkBytes, dec.reason);
  }
  *d = dec;
  return ncclSuccess;
}

}  // namespace plexus
