// The plugin loader: finds plugin files, opens them, checks their ABI, and keeps them for the life of
// the process. One line per plugin says what was searched, what loaded with which ABI, or why not.
#pragma once

#include <plexus/algo_v1.h>
#include <plexus/transport_v1.h>

#include <string>
#include <vector>

namespace plexus {

struct AlgoPlugin {
  std::string name;
  std::string path;
  const plexusAlgo_v1_t* api;
};

struct TransportPlugin {
  std::string name;
  std::string path;
  const plexusTransport_v1_t* api;
  void* ctx;
};

// Where plugin `fileName` lives: PLEXUS_PLUGIN_PATH (colon-separated folders), then the plexus/ folder
// beside libplexus.so, then the folder of libplexus.so itself. Empty when none has it.
std::string findPluginFile(const std::string& fileName);

// Loads (once per process) the algorithm plugins named (a short name such as "ring" maps to
// libplexus-algo-ring.so; a name with '/' is a path). Any that cannot be loaded fails the call with
// one clear line naming file, symbol, versions and reason.
ncclResult_t loadAlgorithms(const std::vector<std::string>& names, std::vector<const AlgoPlugin*>* out);

// The transports available to communicators (p2p-nvlink today), loaded once per process. A transport
// that fails to load is reported and left out; the communicator fails later only if it needs it.
ncclResult_t loadTransports(std::vector<const TransportPlugin*>* out);

// Validation shared by the loader and the tests: nullptr when the table is acceptable, else why not.
const char* checkAlgoTable(const plexusAlgo_v1_t* api);
const char* checkTransportTable(const plexusTransport_v1_t* api);

}  // namespace plexus
