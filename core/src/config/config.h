// The configuration file: one JSON file (PLEXUS_CONFIG, else ./plexus.json, else
// ~/.config/plexus/plexus.json), every key optional but version:
//
//   { "version": 1,
//     "plugins": { "algorithms": ["ring", "tree", "/opt/x/libmy-algo.so"], "transports": ["p2p-nvlink"],
//                  "net": "ucx", "tuner": "csv" },
//     "defaults": { "NCCL_BUFFSIZE": "8M", "PLEXUS_SPIN": 100 },
//     "tuning": [ { "collective": "allreduce", "bytes": [0, "64K"], "nranks": [8, 1024], "nnodes": [1, 64],
//                   "algorithm": "tree", "protocol": "ll", "channels": 2, "chunk": "32K" } ] }
//
// A file that does not parse, an unknown key, a wrong type, an empty range or a rule that can never
// match is an error naming the file, the line and the key; communicator init then fails.
#pragma once

#include <nccl.h>

#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace plexus {

// One entry of "tuning". The first rule whose conditions all hold decides; what it leaves out the
// cost model chooses.
struct TuningRule {
  int number = 0;  // 1-based position in "tuning"
  int line = 0;    // where it starts in the file
  int func = -1;   // ncclFunc_t; -1: any of NCCL's five collectives (Broadcast ... AllReduce), not AlltoAll
  uint64_t bytesLo = 0, bytesHi = UINT64_MAX;  // [lo, hi) of NCCL's size of the operation
  int nranksLo = 1, nranksHi = INT_MAX;        // [lo, hi]
  int nnodesLo = 1, nnodesHi = INT_MAX;        // [lo, hi]
  std::string algorithm;                       // empty: the cost model's
  int proto = -1;                              // PLEXUS_PROTO_*; -1: the cost model's
  int channels = 0;                            // 0: the cost model's
  uint64_t chunkBytes = 0;                     // 0: the planner's

  bool matches(int f, uint64_t bytes, int nRanks, int nNodes) const {
    return (func < 0 ? f <= ncclFuncAllReduce : func == f) && bytes >= bytesLo && bytes < bytesHi &&
           nRanks >= nranksLo && nRanks <= nranksHi && nNodes >= nnodesLo && nNodes <= nnodesHi;
  }
};

struct Config {
  std::string path;                    // empty: no file was found
  std::vector<std::string> algorithms; // plugins.algorithms; empty: the default set
  std::vector<std::string> transports; // plugins.transports; empty: every transport plugin found
  std::string net;                     // plugins.net; empty: the default
  std::string tuner;                   // plugins.tuner (as NCCL_TUNER_PLUGIN); empty: the default
  std::vector<std::pair<std::string, std::string>> defaults;  // knob defaults, by full variable name
  std::vector<TuningRule> rules;

  // "rule N of FILE (line L)", for logs and errors.
  std::string ruleName(const TuningRule& r) const;
};

// Parses text as a configuration read from path.
ncclResult_t configParse(const std::string& text, const std::string& path, Config* out);

// The configuration in effect: the file is found and parsed again when its name, size or time
// changes, and its knob defaults take effect (envGet) from then on. No file: an empty Config.
ncclResult_t configLoad(std::shared_ptr<const Config>* out);

// The algorithm plugins to load: PLEXUS_ALGORITHMS, else the configuration's plugins.algorithms, else
// the default set (ring, direct, tree).
std::vector<std::string> configAlgorithms(const Config& config);
// What a communicator loads: those, and algo-p2p, which every communicator needs for its sends and receives (and
// which serves the collectives the tuner gives it as point-to-point).
std::vector<std::string> communicatorAlgorithms(const Config& config);

// The transport plugins to use, in order (the built-in net transport always comes after them):
// PLEXUS_TRANSPORT_PLUGIN (comma-separated names or paths, or "none"), else the configuration's plugins.transports,
// else empty: every transport plugin found in the plugin path (p2p-nvlink first). "none" gives an empty list
// and sets *none.
std::vector<std::string> configTransports(const Config& config, bool* none);

// A knob's default from the configuration in effect ("NCCL_BUFFSIZE"), if it gives one.
bool configDefault(const std::string& var, std::string* value);

// Byte sizes as the file and the environment write them: an integer, or with a K, M or G suffix
// (powers of 1024). False if text is not one.
bool parseBytes(const std::string& text, uint64_t* out);

}  // namespace plexus
