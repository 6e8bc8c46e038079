#include "planner/tuning.h"

#include <strings.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "comm/communicator.h"
#include "misc/check.h"
#include "misc/env.h"
#include "misc/rand.h"
#include "plugin/loader.h"

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
      return setError(nullptr, ncclInvalidUsage,
                      "NCCL_PROTO=\"%s\": unknown protocol \"%s\" (known: LL, LL128, Simple)", envGet("PROTO")->c_str(),
                      n.c_str());
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

// Our protocol indices are NCCL's, so a protocol's cost-table column is its PLEXUS_PROTO_* value.
static_assert(PLEXUS_PROTO_LL == NCCL_PROTO_LL && PLEXUS_PROTO_LL128 == NCCL_PROTO_LL128 &&
                  PLEXUS_PROTO_SIMPLE == NCCL_PROTO_SIMPLE && PLEXUS_NUM_PROTOCOLS == NCCL_NUM_PROTOCOLS,
              "protocol indices differ from NCCL's");

// Tuner plugins are asked about NCCL's tuned collectives alone (Broadcast..AllReduce,
// NCCL_NUM_FUNCTIONS): older tuners index their tables by collType and know no others.
constexpr int kTunedFuncs = 5;

// One candidate: an (algorithm, protocol) pair the environment allows and its cost model prices.
struct Candidate {
  int algo, proto, nChannels;
  float timeUs;
};

// Where tuningDecide keeps its last decision for (func, bytes).
template <typename T>
auto& cacheSlot(T& t, ncclFunc_t func, size_t bytes) {
  return t.cache[(bytes * 0x9E3779B97F4A7C15ull >> 58) ^ (size_t)func];
}

// Calls fn(candidate) for each (allowed algorithm, protocol) whose cost model takes func of bytes, until fn returns
// false.
template <typename Fn>
void forEachCandidate(const Tuning& t, ncclFunc_t func, size_t bytes, int nChannels, Fn&& fn) {
  for (int a = 0; a < (int)t.algos->size(); a++) {
    const AlgoInstance& inst = (*t.algos)[a];
    const AlgoApi* api = inst.plugin->api.get();
    if (!t.algoAllowed[a] || !serves(inst, func)) continue;
    const int ch = std::min(nChannels, inst.maxChannels);
    for (int p = 0; p < PLEXUS_NUM_PROTOCOLS; p++) {
      if (!(t.protoMask & api->protoMask & (1u << p))) continue;
      float us = -1;
      if (api->cost(inst.ctx, func, p, bytes, ch, &us) != ncclSuccess || !(us >= 0)) continue;
      if (!fn(Candidate{a, p, ch, us})) return;
    }
  }
}

// Channels: enough that each carries a worthwhile share, no more than the communicator has.
int channelsFor(const Tuning& t, size_t bytes) {
  return (int)std::clamp<size_t>(bytes / t.minChannelBytes, 1, (size_t)t.nChannels);
}

std::vector<Candidate> candidates(const Tuning& t, ncclFunc_t func, size_t bytes, int nChannels) {
  std::vector<Candidate> out;
  forEachCandidate(t, func, bytes, nChannels, [&](const Candidate& c) {
    out.push_back(c);
    return true;
  });
  return out;
}

const Candidate* cheapest(const std::vector<Candidate>& cs, int algo, int proto) {
  const Candidate* best = nullptr;
  for (const Candidate& c : cs)
    if ((algo < 0 || c.algo == algo) && (proto < 0 || c.proto == proto) && (!best || c.timeUs < best->timeUs))
      best = &c;
  return best;
}

std::string describe(const Tuning& t, const Candidate& c) {
  char buf[96];
  snprintf(buf, sizeof buf, "%s/%s %.2f us", (*t.algos)[c.algo].plugin->name.c_str(), protoName(c.proto), c.timeUs);
  return buf;
}

// The largest chunk each protocol's step loops take: two Simple steps (a rank fills one while its
// peer drains the other), one LL slot of lines, one LL128 step of lines (120 data bytes each).
size_t maxChunk(const Tuning& t, int proto) {
  switch (proto) {
    case PLEXUS_PROTO_LL:
      return (size_t)PLEXUS_LL_SLOT_LINES * 8;
    case PLEXUS_PROTO_LL128:
      return PLEXUS_LL128_STEP_LINES(t.stepBytes) * PLEXUS_LL128_DATA_BYTES;
    default:
      return t.stepBytes * 2;
  }
}

// What the tuner plugin made of the table (step 3).
struct TunerAnswer {
  const Candidate* pick = nullptr;  // null: it changed nothing, the cost model decides
  int channels = 0;                 // its *nChannels; 0: the default
  std::string why;
};

// Step 3: the candidates NCCL has an index for go into NCCL's cost table as their cost model's time
// (every other cell IGNORE: filtered by NCCL_ALGO/NCCL_PROTO, not loaded, not serving func, declined by
// its cost model); after getCollInfo the cheapest cell >= 0 runs (NCCL's order breaks ties), set
// against the candidates without an index at their cost model's time.
ncclResult_t askTuner(const Tuning& t, ncclFunc_t func, size_t bytes, const std::vector<Candidate>& cs,
                      TunerAnswer* out) {
  float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  for (auto& row : table)
    for (float& cell : row) cell = NCCL_ALGO_PROTO_IGNORE;
  std::vector<int> cellOf(cs.size(), -1);  // a * NCCL_NUM_PROTOCOLS + p, or -1 without an index
  for (size_t i = 0; i < cs.size(); i++) {
    const int a = ncclAlgoIndex((*t.algos)[cs[i].algo].plugin->name);
    if (a < 0) continue;
    table[a][cs[i].proto] = cs[i].timeUs;
    cellOf[i] = a * NCCL_NUM_PROTOCOLS + cs[i].proto;
  }
  float before[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  memcpy(before, table, sizeof table);
  int nChannels = 0;
  const TunerPlugin& tuner = *t.tuner;
  ncclResult_t r = tuner.api->getCollInfo(t.tunerCtx, func, bytes, 1, (float**)table, NCCL_NUM_ALGORITHMS,
                                          NCCL_NUM_PROTOCOLS, 0, &nChannels);
  if (r != ncclSuccess)
    return setError(t.comm, ncclInternalError,
                    "%s: getCollInfo failed with %s for %s of %zu bytes on %d ranks; fix the plugin or its "
                    "configuration, or run without it (NCCL_TUNER_PLUGIN=none)",
                    tuner.label.c_str(), ncclGetErrorString(r), funcName(func), bytes, t.nRanks);
  const bool changed = memcmp(before, table, sizeof table) != 0;
  out->channels = std::max(nChannels, 0);
  if (!changed && !out->channels) return ncclSuccess;
  const float* cells = &table[0][0];
  const Candidate* pick = nullptr;
  int pickCell = -1;
  float best = 0;
  auto consider = [&](size_t i, float us) {
    if (!(us >= 0) || (pick && !(us < best))) return;  // strict: the first of equal cells wins, as in NCCL
    pick = &cs[i];
    pickCell = cellOf[i];
    best = us;
  };
  for (int cell = 0; cell < NCCL_NUM_ALGORITHMS * NCCL_NUM_PROTOCOLS; cell++)
    for (size_t i = 0; i < cs.size(); i++)
      if (cellOf[i] == cell) consider(i, cells[cell]);
  for (size_t i = 0; i < cs.size(); i++)
    if (cellOf[i] < 0) consider(i, cs[i].timeUs);
  if (!pick)
    return setError(t.comm, ncclInternalError,
                    "%s left nothing to run %s of %zu bytes on %d ranks: it set every algorithm/protocol cell it was "
                    "offered to IGNORE (or below 0); fix its configuration, or run without it (NCCL_TUNER_PLUGIN=none)",
                    tuner.label.c_str(), funcName(func), bytes, t.nRanks);
  char buf[160];
  const char* algo = (*t.algos)[pick->algo].plugin->name.c_str();
  if (pickCell >= 0 && cells[pickCell] != (&before[0][0])[pickCell])
    snprintf(buf, sizeof buf, ": %s/%s", algo, protoName(pick->proto));
  else if (changed)
    snprintf(buf, sizeof buf, " rewrote the cost table; cheapest left %s/%s %.2f us", algo, protoName(pick->proto),
             best);
  else
    snprintf(buf, sizeof buf, " kept the cost model's %s/%s %.2f us", algo, protoName(pick->proto), best);
  out->why = tuner.label + buf;
  if (out->channels) out->why += ", " + std::to_string(out->channels) + " channel(s)";
  out->pick = pick;
  return ncclSuccess;
}

}  // namespace

Tuning::~Tuning() { tuningStopTuner(this); }

ncclResult_t tuningStartTuner(Tuning* t, const TunerPlugin* plugin, uint64_t commId,
                              const ncclNvlDomainInfo_v6_t& nvlDomains, bool* started) {
  tuningStopTuner(t);
  *started = false;
  if (!plugin) return ncclSuccess;
  ncclNvlDomainInfo_v6_t nvl = nvlDomains;
  ncclTunerConstants_v6_t constants{};  // in/out; our cost models have no use for NCCL's
  void* ctx = nullptr;
  ncclResult_t r = plugin->api->init(&ctx, commId, (size_t)t->nRanks, (size_t)t->nNodes, debugLog, &nvl, &constants);
  if (r != ncclSuccess) {
    WARN(
        "%s: init failed with %s on rank %d; running without a tuner plugin. Fix the plugin or its configuration, "
        "or set NCCL_TUNER_PLUGIN=none",
        plugin->label.c_str(), ncclGetErrorString(r), t->rank);
    return ncclSuccess;
  }
  t->tuner = plugin;
  t->tunerCtx = ctx;
  *started = true;
  return ncclSuccess;
}

void tuningStopTuner(Tuning* t) {
  if (!t->tuner) return;
  if (t->tuner->api->finalize(t->tunerCtx) != ncclSuccess)
    WARN("%s: finalize failed on rank %d (ignored)", t->tuner->label.c_str(), t->rank);
  t->tuner = nullptr;
  t->tunerCtx = nullptr;
  // Decisions made with it no longer hold.
  t->cache.fill(Tuning::Cached{});
}

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
                      "with plugins.algorithms or PLEXUS_ALGORITHMS",
                      cfg.path.c_str(), r.line, r.number - 1, r.algorithm.c_str(), loaded.c_str());
    }
    const AlgoApi* api = (*algos)[a].plugin->api.get();
    if (r.proto >= 0 && !(api->protoMask & (1u << r.proto)))
      return setError(nullptr, ncclInvalidUsage, "config %s:%d: tuning[%d]: algorithm %s does not serve protocol %s",
                      cfg.path.c_str(), r.line, r.number - 1, r.algorithm.c_str(), protoName(r.proto));
    for (int f = 0; f < ncclNumFuncs; f++) {
      if (r.func >= 0 && r.func != f) continue;
      const bool collective = f == ncclFuncBroadcast || f == ncclFuncReduce || f == ncclFuncAllGather ||
                              f == ncclFuncReduceScatter || f == ncclFuncAllReduce;
      if (collective && !serves((*algos)[a], f))
        return setError(nullptr, ncclInvalidUsage, "config %s:%d: tuning[%d]: algorithm %s does not serve %s%s",
                        cfg.path.c_str(), r.line, r.number - 1, r.algorithm.c_str(), funcName((ncclFunc_t)f),
                        r.func < 0 ? " (the rule names no collective, so it applies to all: add \"collective\")" : "");
    }
  }
  return ncclSuccess;
}

std::string tuningInputs(const Tuning& t) {
  std::string s = "algorithms";
  for (size_t a = 0; a < t.algos->size(); a++)
    s += std::string(a ? "," : " ") + (*t.algos)[a].plugin->name + (t.algoAllowed[a] ? "" : " (excluded)");
  auto algo = envGet("ALGO");
  auto proto = envGet("PROTO");
  s += "; NCCL_ALGO=" + (algo ? *algo : std::string("(unset)")) + "; NCCL_PROTO=" + (proto ? *proto : "(unset)") +
       "; PLEXUS_MIN_CHANNEL_BYTES=" + std::to_string(t.minChannelBytes) + "; ";
  const Config& cfg = *t.config;
  if (cfg.rules.empty()) return s + "no tuning rules";
  uint64_t h = 0xcbf29ce484222325ull;
  for (const TuningRule& r : cfg.rules) {
    const std::string fields = std::to_string(r.func) + "/" + std::to_string(r.bytesLo) + "/" +
                               std::to_string(r.bytesHi) + "/" + std::to_string(r.nranksLo) + "/" +
                               std::to_string(r.nranksHi) + "/" + std::to_string(r.nnodesLo) + "/" +
                               std::to_string(r.nnodesHi) + "/" + r.algorithm + "/" + std::to_string(r.proto) + "/" +
                               std::to_string(r.channels) + "/" + std::to_string(r.chunkBytes) + ";";
    h = hashBytes(fields.data(), fields.size(), h);
  }
  char tail[64];
  snprintf(tail, sizeof tail, "%zu tuning rule(s) #%016llx", cfg.rules.size(), (unsigned long long)h);
  return s + tail;  // by content: the file's path may differ between nodes
}

bool tuningServes(const Tuning& t, ncclFunc_t func, size_t bytes) {
  if (const Tuning::Cached& c = cacheSlot(t, func, bytes); c.func == (int)func && c.bytes == bytes)
    return true;  // decided before
  bool any = false;
  forEachCandidate(t, func, bytes, channelsFor(t, bytes), [&](const Candidate&) {
    any = true;
    return false;  // one is enough
  });
  return any;
}

ncclResult_t tuningDecide(Tuning& t, ncclFunc_t func, size_t bytes, Decision* d) {
  Tuning::Cached& cached = cacheSlot(t, func, bytes);
  if (cached.func == (int)func && cached.bytes == bytes) {
    *d = cached.decision;
    return ncclSuccess;
  }
  const std::vector<Candidate> cs = candidates(t, func, bytes, channelsFor(t, bytes));
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
  TunerAnswer tuned;
  const bool askTunerNow = !pick && t.tuner && (int)func < kTunedFuncs;
  if (askTunerNow) {
    NCCLCHECK(askTuner(t, func, bytes, cs, &tuned));
    pick = tuned.pick;
    channels = tuned.channels;
    why += tuned.why;
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
    if (askTunerNow) why += "; " + t.tuner->label + " left the table as it was";
  }
  Decision dec;
  dec.algo = pick->algo;
  dec.proto = pick->proto;
  dec.timeUs = pick->timeUs;
  const int algoMax = std::min(t.nChannels, (*t.algos)[pick->algo].maxChannels);
  dec.nChannels = channels ? std::min(channels, algoMax) : pick->nChannels;
  if (channels > algoMax)
    why += "; its " + std::to_string(channels) + " channels cannot be honoured: " +
           ((*t.algos)[pick->algo].maxChannels < t.nChannels
                ? (*t.algos)[pick->algo].plugin->name + " runs on at most " +
                      std::to_string((*t.algos)[pick->algo].maxChannels)
                : "the communicator has " + std::to_string(t.nChannels) + " (NCCL_MAX_NCHANNELS, NCCL_MIN_NCHANNELS)") +
           ", " + std::to_string(dec.nChannels) + " used";
  dec.chunkBytes = std::min(chunk ? (size_t)chunk : maxChunk(t, dec.proto), maxChunk(t, dec.proto));
  // v6 may set the chunk of the pair it ran, within what the protocol's buffers take.
  const int ncclAlgo = ncclAlgoIndex((*t.algos)[pick->algo].plugin->name);
  if (askTunerNow && ncclAlgo >= 0 && t.tuner->api->hasChunkSize()) {
    size_t tunedChunk = dec.chunkBytes;
    ncclResult_t r =
        t.tuner->api->getChunkSize(t.tunerCtx, func, bytes, ncclAlgo, dec.proto, dec.nChannels, &tunedChunk);
    if (r != ncclSuccess)
      return setError(t.comm, ncclInternalError,
                      "%s: getChunkSize failed with %s for %s of %zu bytes; fix the plugin or run without it "
                      "(NCCL_TUNER_PLUGIN=none)",
                      t.tuner->label.c_str(), ncclGetErrorString(r), funcName(func), bytes);
    if (tunedChunk && tunedChunk != dec.chunkBytes) {
      dec.chunkBytes = std::min(tunedChunk, maxChunk(t, dec.proto));
      why += "; its chunk " + std::to_string(dec.chunkBytes) + " B";
    }
  }
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
