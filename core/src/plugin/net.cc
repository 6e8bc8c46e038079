// Net plugins as NCCL loads them (nccl-abi.md §2.8): NCCL_NET_PLUGIN names files, each file's newest
// ncclNetPlugin_vN (v12 .. v6) is adapted to v12's calls, the built-in socket net comes last, NCCL_NET
// picks by name, and a plugin whose init fails or that has no device is skipped with one line.
#include "plugin/net.h"

#include <dlfcn.h>
#include <strings.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>

#include "misc/check.h"
#include "misc/debug.h"
#include "misc/env.h"
#include "nccl.h"
#include "plugin/loader.h"
#include "transport/net/socket_net.h"

namespace plexus {

namespace {

struct NetVersion {
  int version;
  std::unique_ptr<NetApi> (*adapt)(const void*, std::string*);
};
// Newest first, as NCCL tries them.
const NetVersion netVersions[] = {{12, netAdapt_v12}, {11, netAdapt_v11}, {10, netAdapt_v10}, {9, netAdapt_v9},
                                  {8, netAdapt_v8},   {7, netAdapt_v7},   {6, netAdapt_v6}};
constexpr int kNewestKnown = 12;

std::unique_ptr<NetPlugin> openNet(const std::string& spec, std::string* report) {
  NcclLibrary opened = openNcclLibrary(spec, "libnccl-net");
  const std::string what = spec.empty() ? "net plugin libnccl-net.so" : "net plugin '" + spec + "'";
  if (!opened.lib) {
    *report = format("%s: not loaded: tried %s%s", what.c_str(), opened.tried.c_str(), opened.errors.c_str());
    return nullptr;
  }
  std::vector<int> versions;
  for (const NetVersion& v : netVersions) versions.push_back(v.version);
  int version = 0;
  std::string found, why;
  const void* table = newestSymbol(opened.lib, "ncclNetPlugin_v", versions, &version, &found);
  std::unique_ptr<NetApi> api;
  if (!table) {
    // Say so when the file is only newer than what this Plexus knows.
    std::string newer;
    for (int v = kNewestKnown + 1; v <= kNewestKnown + 8; v++)
      if (dlsym(opened.lib, ("ncclNetPlugin_v" + std::to_string(v)).c_str()))
        newer += (newer.empty() ? "ncclNetPlugin_v" : ", _v") + std::to_string(v);
    why = newer.empty() ? "it exports none of them"
                        : "it exports only " + newer + ", newer than this Plexus knows (v" +
                              std::to_string(kNewestKnown) + "); use a build of the plugin for NCCL 2.30 or older";
  } else {
    for (const NetVersion& v : netVersions)
      if (v.version == version) api = v.adapt(table, &why);
    if (!api) why = "ncclNetPlugin_v" + std::to_string(version) + "'s " + why;
  }
  if (!api) {
    *report = format("%s: refused %s: looked for ncclNetPlugin_v12 down to _v6, found %s; %s", what.c_str(),
                     opened.path.c_str(), found.empty() ? "none" : found.c_str(), why.c_str());
    dlclose(opened.lib);
    return nullptr;
  }
  auto p = std::make_unique<NetPlugin>();
  const char* name = *(const char* const*)table;  // every version's table starts with its name
  p->name = name && name[0] ? name : opened.path.substr(opened.path.rfind('/') + 1);
  p->path = opened.path;
  p->version = version;
  p->api = std::move(api);
  p->label = "net plugin " + p->name + " (" + p->path + ", v" + std::to_string(version) + ")";
  *report = format("%s: loaded %s (ncclNetPlugin_v%d; the file exports %s)", what.c_str(), p->path.c_str(), version,
                   found.c_str());
  return p;  // the library stays open for the life of the process
}

std::mutex netMutex;
struct NetLoad {
  std::string spec, report;
  std::unique_ptr<NetPlugin> plugin;
};
std::vector<NetLoad> netRegistry;

}  // namespace

const NetPlugin* netPluginOpen(const std::string& spec, std::string* report) {
  std::lock_guard<std::mutex> lock(netMutex);
  for (const NetLoad& l : netRegistry)
    if (l.spec == spec) {
      if (report) *report = l.report;
      return l.plugin.get();
    }
  NetLoad l{spec, "", nullptr};
  l.plugin = openNet(spec, &l.report);
  INFO(NCCL_INIT | NCCL_NET, "%s", l.report.c_str());
  if (report) *report = l.report;
  netRegistry.push_back(std::move(l));
  return netRegistry.back().plugin.get();
}

const NetPlugin* netPluginSocket() {
  static std::unique_ptr<NetPlugin> socket = []() -> std::unique_ptr<NetPlugin> {
    std::string why;
    auto p = std::make_unique<NetPlugin>();
    p->api = netAdapt_v12(&plexusSocketNet_v12, &why);
    if (!p->api) return nullptr;
    p->name = plexusSocketNet_v12.name;
    p->path = "built-in";
    p->version = 12;
    p->label = "net plugin " + p->name + " (built-in)";
    return p;
  }();
  return socket.get();
}

namespace {
// NCCL_NET_PLUGIN's list: "" (libnccl-net.so) when unset, nothing for "none".
std::vector<std::string> netPluginSpecs(const std::string& pluginSpec) {
  std::vector<std::string> specs;
  if (pluginSpec.empty()) {
    specs.push_back("");  // libnccl-net.so, if there is one
  } else if (strcasecmp(pluginSpec.c_str(), "none") != 0) {
    size_t pos = 0;
    while (pos <= pluginSpec.size() && specs.size() < NCCL_NET_MAX_PLUGINS - 2) {
      size_t comma = pluginSpec.find(',', pos);
      std::string tok = pluginSpec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      if (!tok.empty()) specs.push_back(tok);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  return specs;
}
}  // namespace

std::string netPluginSpec(const std::string& fallback) { return envStr("NET_PLUGIN", fallback); }

void* netPluginLibrary(const std::string& pluginSpec, std::string* path) {
  for (const std::string& spec : netPluginSpecs(pluginSpec)) {
    NcclLibrary opened = openNcclLibrary(spec, "libnccl-net");
    if (!opened.lib) continue;
    *path = opened.path;
    return opened.lib;
  }
  return nullptr;
}

ncclResult_t netPluginChoose(const std::string& pluginSpec, const std::string& netName, uint64_t commId,
                             const ncclNetCommConfig_v12_t& config, ncclDebugLogger_t logger, const NetPlugin** out,
                             void** ctx, std::string* report) {
  // The candidates, in NCCL's order: the external plugins named, then the built-in socket net.
  const std::vector<std::string> specs = netPluginSpecs(pluginSpec);
  const bool quietDefault = pluginSpec.empty();
  std::vector<const NetPlugin*> candidates;
  std::string skipped;
  auto skip = [&](const std::string& line) {
    skipped += "\n  " + line;
    INFO(NCCL_INIT | NCCL_NET, "%s", line.c_str());
  };
  for (const std::string& spec : specs) {
    std::string line;
    const NetPlugin* p = netPluginOpen(spec, &line);
    if (p) candidates.push_back(p);
    else if (!(quietDefault && line.find("refused") == std::string::npos)) skip(line);
  }
  if (const NetPlugin* socket = netPluginSocket()) candidates.push_back(socket);
  for (const NetPlugin* p : candidates) {
    if (!netName.empty() && strcasecmp(p->name.c_str(), netName.c_str()) != 0) {
      skip(p->label + ": skipped, NCCL_NET=" + netName + " asks for another");
      continue;
    }
    ncclNetCommConfig_v12_t c = config;
    void* pctx = nullptr;
    ncclResult_t r;
    {
      std::lock_guard<std::recursive_mutex> lock(envMutex());  // plugins may setenv in init
      r = p->api->init(&pctx, commId, &c, logger);
    }
    if (r != ncclSuccess) {
      skip(p->label + ": skipped, its init failed with " + ncclGetErrorString(r));
      continue;
    }
    int ndev = 0;
    r = p->api->devices(&ndev);
    if (r != ncclSuccess || ndev <= 0) {
      skip(p->label + ": skipped, " +
           (r != ncclSuccess ? std::string("devices() failed with ") + ncclGetErrorString(r) : "it has no device"));
      p->api->finalize(pctx);
      continue;
    }
    *out = p;
    *ctx = pctx;
    *report = p->label + ": chosen, " + std::to_string(ndev) + " device(s)" +
              (skipped.empty() ? "" : "; before it:" + skipped);
    if (p == netPluginSocket() && !skipped.empty()) {
      // The one line a user looks for when the plugin meant to carry the traffic did not.
      ncclNetProperties_v12_t props{};
      const bool named = p->api->getProperties(0, &props) == ncclSuccess && props.name;
      const std::string line = format("net: falling back to the built-in socket net on interface %s (%d device(s)): %s",
                                      named ? props.name : "?", ndev,
                                      skipped.substr(3, skipped.find('\n', 3) - 3).c_str());
      INFO(NCCL_INIT | NCCL_NET, "%s", line.c_str());
      *report = line + "\n" + *report;
    }
    return ncclSuccess;
  }
  return setError(nullptr, ncclSystemError,
                  "no net plugin can be used (NCCL_NET_PLUGIN=%s, NCCL_NET=%s):%s. Install or name a plugin that "
                  "loads here (NCCL_NET_PLUGIN), or unset NCCL_NET to let the built-in socket net carry the traffic",
                  pluginSpec.empty() ? "(unset)" : pluginSpec.c_str(), netName.empty() ? "(unset)" : netName.c_str(),
                  skipped.empty() ? " none was found" : skipped.c_str());
}

}  // namespace plexus
