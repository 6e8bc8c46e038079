// The plugin loader: finds plugin files, opens them, checks their ABI, and keeps them for the life of
// the process. One line per plugin says what was searched, what loaded with which ABI, or why not.
#pragma once

#include <plexus/transport_v1.h>

#include <memory>
#include <string>
#include <vector>

#include "plugin/algo.h"
#include "plugin/tuner.h"

namespace plexus {

struct AlgoPlugin {
  std::string name;
  std::string path;
  int version;                          // the ABI the file exports (plexusAlgoPlugin_v<version>)
  std::unique_ptr<const AlgoApi> api;  // v2's calls over that version
};

struct TransportPlugin {
  std::string name;
  std::string path;
  const plexusTransport_v1_t* api;
  void* ctx;
};

// An NCCL tuner plugin (ncclTunerPlugin_v6 .. _v2).
struct TunerPlugin {
  std::string name;   // its table's name (the file's, when it gives none)
  std::string path;   // the file loaded
  int version = 0;    // the ABI version in use: the newest the file exports
  std::unique_ptr<const TunerApi> api;  // v6's calls over that version
  std::string label;  // "tuner plugin <name> (<path>, v<N>)", for decisions and logs
};

// Where plugin `fileName` lives: PLEXUS_PLUGIN_PATH (colon-separated folders), then the plexus/ folder
// beside libplexus.so, then the folder of libplexus.so itself. Empty when none has it.
std::string findPluginFile(const std::string& fileName);

// Loads (once per process) the algorithm plugins named (a short name such as "ring" maps to
// libplexus-algo-ring.so; a name with '/' is a path). Any that cannot be loaded fails the call with
// one clear line naming file, symbol, versions and reason.
ncclResult_t loadAlgorithms(const std::vector<std::string>& names, std::vector<const AlgoPlugin*>* out);

// The folders plugins are searched in, in order: PLEXUS_PLUGIN_PATH's, then plexus/ beside libplexus.so, then the
// folder of libplexus.so itself.
std::vector<std::string> pluginDirs();

// For the tools that link the core rather than libplexus.so (plexus-info, plexus-plugin-check): appends the plugin
// folder of their installation (<executable>/../<installLibDir>/plexus) or build tree (../lib/plexus) to
// PLEXUS_PLUGIN_PATH.
void addToolPluginDir(const char* installLibDir);

// The transports a communicator uses, in order, each loaded once per process: the plugins named (a name such as
// "p2p-nvlink" maps to libplexus-p2p-nvlink.so, a name with '/' is a path; one that cannot be used fails the call
// with a line naming it and why), or with no names every transport plugin found in the plugin folders (p2p-nvlink
// first, then by file name; one that does not load is a warning and left out), or none at all (none: "none");
// the built-in net transport always last. For each pair of ranks the first whose canConnect accepts serves it.
ncclResult_t loadTransports(const std::vector<std::string>& names, bool none, std::vector<const TransportPlugin*>* out);
// The files of the plugin folders that export plexusTransportPlugin_v1, in the order loadTransports tries them.
std::vector<std::string> transportPluginFiles();

// The tuner plugin `spec` names, loaded once per process; nullptr when there is none. spec has
// NCCL_TUNER_PLUGIN's syntax: empty for the default libnccl-tuner.so, a name (tried as given, then as
// libnccl-tuner-<name>.so), a path, or "none"; dlopen's own search goes first, then PLEXUS_PLUGIN_PATH
// and the folders beside libplexus.so. `source` says where spec came from, for the one log line: what
// was searched, what loaded with which ABI version, or why not. A tuner that cannot be loaded is a
// warning, never an error (as in NCCL): the runtime goes on without one. *report, if given, gets that
// line (for plexus-info and tests), the same on every call for spec. When the tuner's own library is not found, the
// library of the net plugin netSpec names (NCCL_NET_PLUGIN's syntax; "none": no such lookup) is searched for the
// tuner's symbols, as NCCL does (aws-ofi-nccl ships its tuner inside its net plugin).
const TunerPlugin* loadTuner(const std::string& spec, const std::string& source, std::string* report = nullptr,
                             const std::string& netSpec = "none");

// A library opened as NCCL opens its plugins (NCCL_NET_PLUGIN, NCCL_TUNER_PLUGIN): spec as given
// (dlopen's own search), then <prefix>-<spec>.so for a bare name, then that file in PLEXUS_PLUGIN_PATH
// and beside libplexus.so; an empty spec means <prefix>.so. lib is null when nothing opened: tried
// lists what was tried, errors what dlopen said other than "no such file".
struct NcclLibrary {
  void* lib = nullptr;
  std::string file;  // the name that was looked for last
  std::string path;  // the file opened
  std::string tried, errors;
};
NcclLibrary openNcclLibrary(const std::string& spec, const std::string& prefix);

// The table of the newest symbol <base><v> lib exports, v from versions (newest first), as NCCL picks
// one; *version is its v, *found every version present ("v12, v8"). nullptr when none is.
const void* newestSymbol(void* lib, const std::string& base, const std::vector<int>& versions, int* version,
                         std::string* found);

// Validation shared by the loader and the tests: nullptr when the table is acceptable, else why not.
const char* checkTransportTable(const plexusTransport_v1_t* api);

}  // namespace plexus
