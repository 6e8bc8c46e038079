// Tuning (layer 2): which algorithm, protocol, channels and chunk run an operation. In order:
//   1. NCCL_ALGO / NCCL_PROTO say what may run at all (NCCL's meaning; they override everything);
//   2. the first matching rule of the configuration file decides what it names;
//   3. else an NCCL tuner plugin may rewrite the cost table (NCCL's semantics: 0 forces, -1 ignores);
//      the table holds the algorithms NCCL has an index for (tree, ring); the others (direct) compete
//      with their cost model's time, so a table the tuner leaves alone changes nothing;
//   4. the algorithms' cost models decide the rest.
// Each (collective, size bucket) decision is logged once under NCCL_DEBUG_SUBSYS=TUNING with why.
// Tuning works on the facts it is given, not on a communicator, so plexus-info can ask what a job of
// any shape would run.
#pragma once

#include <nccl.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "planner/planner.h"
#include "plugin/tuner.h"

struct ncclComm;

namespace plexus {

struct AlgoInstance;
struct TunerPlugin;

struct Tuning {
  Tuning() = default;
  Tuning(const Tuning&) = delete;
  Tuning& operator=(const Tuning&) = delete;
  ~Tuning();  // finalizes the tuner plugin's context


  // What decisions depend on, set by tuningInit.
  const std::vector<AlgoInstance>* algos = nullptr;
  std::vector<bool> algoAllowed;  // NCCL_ALGO, per algorithm
  uint32_t protoMask = 0;         // NCCL_PROTO
  std::shared_ptr<const Config> config;
  int nRanks = 1, nNodes = 1;
  int nChannels = 1;           // channels the communicator has
  size_t minChannelBytes = 1;  // PLEXUS_MIN_CHANNEL_BYTES: smallest share worth a channel
  size_t stepBytes = 0;        // Simple protocol bytes per step
  int rank = 0;                // for log lines
  ncclComm* comm = nullptr;    // where errors are recorded (ncclGetLastError); none in plexus-info
  // Step 3: the tuner plugin and its context for this communicator (tuningStartTuner); none: nullptr.
  const TunerPlugin* tuner = nullptr;
  void* tunerCtx = nullptr;

  // Decisions already made, by (collective, bytes): an application repeats the same few operations,
  // and asking every cost model each time would cost more than the launch itself.
  struct Cached {
    int func = -1;
    size_t bytes = 0;
    Decision decision;
  };
  std::array<Cached, 64> cache{};
  uint64_t logged[ncclNumFuncs] = {};  // size buckets already logged, per collective
  std::deque<std::string> reasons;     // interned: decisions point at them
};

// Reads NCCL_ALGO / NCCL_PROTO and checks the configuration's rules against the loaded algorithms
// (names, protocols and collectives they serve); errors name the rule, file and line.
ncclResult_t tuningInit(Tuning* t, const std::vector<AlgoInstance>* algos, std::shared_ptr<const Config> config,
                        int rank, int nRanks, int nNodes, int nChannels, size_t stepBytes);

// Step 3: starts `plugin` (nullptr: none) for a communicator of t's shape, once: its init runs here and
// its finalize when t is stopped or destroyed. NCCL's tuning constants are passed zeroed (Plexus's cost
// models do not read them). An init that fails is a warning naming the plugin; t then has no tuner and
// *started is false. Call after tuningInit.
ncclResult_t tuningStartTuner(Tuning* t, const TunerPlugin* plugin, uint64_t commId,
                              const ncclNvlDomainInfo_v6_t& nvlDomains, bool* started);
void tuningStopTuner(Tuning* t);
// What every decision of t depends on besides the operation, as text: the algorithms in order, NCCL_ALGO,
// NCCL_PROTO, PLEXUS_MIN_CHANNEL_BYTES and the configuration's rules (by content, not path). Ranks that differ
// in it would pick different algorithms for one collective and wait on each other for ever.
std::string tuningInputs(const Tuning& t);

// The decision for one operation of `bytes` (NCCL's size for func).
ncclResult_t tuningDecide(Tuning& t, ncclFunc_t func, size_t bytes, Decision* d);
// Whether an allowed algorithm's cost model takes func of `bytes`: for an operation that has another way to run where
// none does (AlltoAll: grouped sends and receives), so that tuningDecide is asked only where it can answer.
bool tuningServes(const Tuning& t, ncclFunc_t func, size_t bytes);

}  // namespace plexus
