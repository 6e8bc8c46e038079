#include "loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>

#include "misc/check.h"
#include "misc/debug.h"
#include "misc/env.h"
#include "plugin/net.h"
#include "transport/net/net_transport.h"

namespace plexus {

static std::string libraryDir() {
  Dl_info info;
  if (dladdr((void*)&libraryDir, &info) && info.dli_fname) {
    std::string path = info.dli_fname;
    size_t slash = path.rfind('/');
    if (slash != std::string::npos) return path.substr(0, slash);
  }
  return ".";
}

std::vector<std::string> pluginDirs() {
  std::vector<std::string> dirs;
  if (auto path = envGet("PLUGIN_PATH")) {
    size_t pos = 0;
    while (pos <= path->size()) {
      size_t colon = path->find(':', pos);
      std::string dir = path->substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
      if (!dir.empty()) dirs.push_back(dir);
      if (colon == std::string::npos) break;
      pos = colon + 1;
    }
  }
  std::string libDir = libraryDir();
  dirs.push_back(libDir + "/plexus");
  dirs.push_back(libDir);
  return dirs;
}

void addToolPluginDir(const char* installLibDir) {
  char exe[4096];
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0) return;
  exe[len] = 0;
  std::string dir = exe;
  dir = dir.substr(0, dir.rfind('/'));
  for (const char* libdir : {installLibDir, "lib"}) {
    const std::string mine = dir + "/../" + libdir + "/plexus";
    if (access(mine.c_str(), R_OK) != 0) continue;
    const char* path = getenv("PLEXUS_PLUGIN_PATH");
    setenv("PLEXUS_PLUGIN_PATH", (path && *path ? std::string(path) + ":" + mine : mine).c_str(), 1);
    return;
  }
}

std::string findPluginFile(const std::string& fileName) {
  for (auto& d : pluginDirs()) {
    std::string candidate = d + "/" + fileName;
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return "";
}

// Opens a plugin and returns the address of the first of `symbols` it exports (*which: its index), or nullptr
// with `why` set.
static void* openSymbol(const std::string& nameOrPath, const std::string& fileName,
                        std::initializer_list<const char*> symbols, std::string* path, std::string* why,
                        int* which = nullptr) {
  *path = nameOrPath.find('/') != std::string::npos ? nameOrPath : findPluginFile(fileName);
  if (path->empty()) {
    *why = "no file " + fileName + " in PLEXUS_PLUGIN_PATH or beside libplexus.so";
    return nullptr;
  }
  void* lib = dlopen(path->c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    *why = std::string("dlopen failed: ") + dlerror();
    return nullptr;
  }
  int i = 0;
  for (const char* symbol : symbols) {
    if (void* sym = dlsym(lib, symbol)) {
      if (which) *which = i;
      return sym;  // the library stays open for the life of the process
    }
    i++;
  }
  *why = "the file does not export ";
  i = 0;
  for (const char* symbol : symbols) *why += (i++ ? " or " : "") + std::string(symbol);
  dlclose(lib);
  return nullptr;
}

const char* checkTransportTable(const plexusTransport_v1_t* api) {
  if (api->abiVersion != PLEXUS_TRANSPORT_ABI_VERSION) return "ABI version mismatch";
  if (api->structSize < PLEXUS_TRANSPORT_V1_BASE_SIZE) return "function table smaller than ABI v1's";
  if (!api->name || !api->name[0]) return "no name";
  if (!api->init || !api->canConnect || !api->sendSetup || !api->recvSetup || !api->sendConnect ||
      !api->recvConnect || !api->sendFree || !api->recvFree || !api->finalize)
    return "a required member is NULL";
  return nullptr;
}

static std::mutex registryMutex;
static std::vector<std::unique_ptr<AlgoPlugin>> algoRegistry;
static std::vector<std::unique_ptr<TransportPlugin>> transportRegistry;

ncclResult_t loadAlgorithms(const std::vector<std::string>& names, std::vector<const AlgoPlugin*>* out) {
  std::lock_guard<std::mutex> lock(registryMutex);
  out->clear();
  for (auto& name : names) {
    const AlgoPlugin* found = nullptr;
    for (auto& a : algoRegistry)
      if (a->name == name || a->path == name) found = a.get();
    if (!found) {
      std::string path, why;
      int which = 0;
      const void* table = openSymbol(name, "libplexus-algo-" + name + ".so",
                                     {PLEXUS_ALGO_PLUGIN_SYMBOL, PLEXUS_ALGO_V1_PLUGIN_SYMBOL}, &path, &why, &which);
      const char* symbol = which == 0 ? PLEXUS_ALGO_PLUGIN_SYMBOL : PLEXUS_ALGO_V1_PLUGIN_SYMBOL;
      std::unique_ptr<const AlgoApi> api;
      if (table) api = which == 0 ? algoAdapt_v2(table, &why) : algoAdapt_v1(table, &why);
      if (!api)
        return setError(nullptr, ncclInvalidUsage, "algorithm plugin '%s': refused %s, symbol %s: %s", name.c_str(),
                        path.empty() ? "(no file)" : path.c_str(), table ? symbol : PLEXUS_ALGO_PLUGIN_SYMBOL,
                        why.c_str());
      for (auto& a : algoRegistry)
        if (a->name == api->name)
          return setError(nullptr, ncclInvalidUsage,
                          "algorithm plugin '%s' (%s) has the same name as the one loaded from %s; rename one",
                          api->name, path.c_str(), a->path.c_str());
      const int version = which == 0 ? PLEXUS_ALGO_ABI_VERSION : PLEXUS_ALGO_V1_ABI_VERSION;
      algoRegistry.push_back(std::make_unique<AlgoPlugin>(AlgoPlugin{api->name, path, version, std::move(api)}));
      found = algoRegistry.back().get();
      INFO(NCCL_INIT, "algorithm plugin '%s': loaded %s (%s, ABI %d%s)", found->name.c_str(), path.c_str(), symbol,
           version, version < PLEXUS_ALGO_ABI_VERSION ? ": host backend only" : "");
    }
    out->push_back(found);
  }
  return ncclSuccess;
}

// The transport plugin a name or path gives, loaded once per process; nullptr with *why when it cannot be. Called
// with registryMutex held.
static const TransportPlugin* openTransport(const std::string& nameOrPath, std::string* why) {
  for (auto& t : transportRegistry)
    if (t->name == nameOrPath || t->path == nameOrPath) return t.get();
  std::string path;
  auto* api = (const plexusTransport_v1_t*)openSymbol(nameOrPath, "libplexus-" + nameOrPath + ".so",
                                                       {PLEXUS_TRANSPORT_PLUGIN_SYMBOL}, &path, why);
  if (!api) {
    *why = (path.empty() ? "(no file)" : path) + ", symbol " PLEXUS_TRANSPORT_PLUGIN_SYMBOL ": " + *why;
    return nullptr;
  }
  if (const char* bad = checkTransportTable(api)) {
    *why = path + ": " + bad + " (plugin ABI " + std::to_string(api->abiVersion) + "; this Plexus expects " +
           std::to_string(PLEXUS_TRANSPORT_ABI_VERSION) + ")";
    return nullptr;
  }
  for (auto& t : transportRegistry)
    if (t->name == api->name) {
      if (t->path == path) return t.get();
      *why = path + " is named '" + api->name + "' like the transport loaded from " + t->path + "; rename one";
      return nullptr;
    }
  void* ctx = nullptr;
  if (api->init(&ctx, debugLog) != ncclSuccess) {
    *why = path + ": its init failed";
    return nullptr;
  }
  transportRegistry.push_back(std::make_unique<TransportPlugin>(TransportPlugin{api->name, path, api, ctx}));
  INFO(NCCL_INIT, "transport plugin '%s': loaded %s (%s, ABI %u)", api->name, path.c_str(),
       PLEXUS_TRANSPORT_PLUGIN_SYMBOL, api->abiVersion);
  return transportRegistry.back().get();
}

std::vector<std::string> transportPluginFiles() {
  // Searched once (probing a file opens it), by whichever thread asks first.
  static const std::vector<std::string> files = [] {
    std::vector<std::string> found;
    std::vector<std::string> names;  // file names seen: the first folder that has one wins, as when loading by name
    for (const std::string& d : pluginDirs()) {
      DIR* dir = opendir(d.c_str());
      if (!dir) continue;
      std::vector<std::string> entries;
      while (dirent* e = readdir(dir)) {
        const std::string f = e->d_name;
        if (f.rfind("libplexus-", 0) == 0 && f.rfind("libplexus-algo-", 0) != 0 && f.size() > 3 &&
            f.compare(f.size() - 3, 3, ".so") == 0)
          entries.push_back(f);
      }
      closedir(dir);
      // p2p-nvlink first: within a node it is the way every other transport would be measured against.
      std::sort(entries.begin(), entries.end(), [](const std::string& a, const std::string& b) {
        const bool pa = a == "libplexus-p2p-nvlink.so", pb = b == "libplexus-p2p-nvlink.so";
        return pa != pb ? pa : a < b;
      });
      for (const std::string& f : entries) {
        if (std::find(names.begin(), names.end(), f) != names.end()) continue;
        names.push_back(f);
        const std::string path = d + "/" + f;
        void* lib = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
        if (!lib) continue;
        if (dlsym(lib, PLEXUS_TRANSPORT_PLUGIN_SYMBOL)) found.push_back(path);
        dlclose(lib);
      }
    }
    return found;
  }();
  return files;
}

ncclResult_t loadTransports(const std::vector<std::string>& names, bool none, std::vector<const TransportPlugin*>* out) {
  std::lock_guard<std::mutex> lock(registryMutex);
  out->clear();
  auto add = [&](const TransportPlugin* t) {
    if (std::find(out->begin(), out->end(), t) == out->end()) out->push_back(t);
  };
  if (!none && names.empty()) {
    // Every transport plugin found; one that does not load is reported and left out (nobody named it).
    for (const std::string& path : transportPluginFiles()) {
      std::string why;
      if (const TransportPlugin* t = openTransport(path, &why)) add(t);
      else WARN("transport plugin %s refused: %s. Ranks that need it go through the next transport.", path.c_str(),
                why.c_str());
    }
  }
  for (const std::string& name : names) {
    std::string why;
    const TransportPlugin* t = openTransport(name, &why);
    if (!t)
      return setError(nullptr, ncclInvalidUsage, "transport plugin '%s' (PLEXUS_TRANSPORT_PLUGIN or plugins.transports) "
                      "cannot be used: %s", name.c_str(), why.c_str());
    add(t);
  }
  // The net transport is built in and comes last: any pair the others cannot connect goes through it.
  static const TransportPlugin* net = nullptr;
  if (!net) {
    void* ctx = nullptr;
    if (netTransport.init(&ctx, debugLog) != ncclSuccess)
      return setError(nullptr, ncclInternalError, "the built-in net transport failed to initialize");
    transportRegistry.push_back(
        std::make_unique<TransportPlugin>(TransportPlugin{netTransport.name, "built-in", &netTransport, ctx}));
    net = transportRegistry.back().get();
  }
  out->push_back(net);
  return ncclSuccess;
}

namespace {

// Newest first, as NCCL tries them.
struct TunerVersion {
  int version;
  std::unique_ptr<const TunerApi> (*adapt)(const void*, std::string*);
};
const TunerVersion tunerVersions[] = {
    {6, tunerAdapt_v6}, {5, tunerAdapt_v5}, {4, tunerAdapt_v4}, {3, tunerAdapt_v3}, {2, tunerAdapt_v2}};

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string loadedPath(void* lib, const std::string& fallback) {
  struct link_map* map = nullptr;
  if (dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && map->l_name[0]) return map->l_name;
  return fallback;
}

}  // namespace

NcclLibrary openNcclLibrary(const std::string& spec, const std::string& prefix) {
  NcclLibrary out;
  const bool named = !spec.empty();
  // What dlopen is given, in order: NCCL's names (found by dlopen's own search), then our folders.
  out.file = named ? spec : prefix + ".so";
  std::vector<std::string> tries{out.file};
  const bool isPath = spec.find('/') != std::string::npos;
  if (named && !isPath && !(spec.compare(0, 3, "lib") == 0 && endsWith(spec, ".so"))) {
    out.file = prefix + "-" + spec + ".so";
    tries.push_back(out.file);
  }
  if (!isPath) {
    std::string inDirs = findPluginFile(out.file);
    if (!inDirs.empty()) tries.push_back(inDirs);
  }
  for (const std::string& t : tries) {
    out.tried += (out.tried.empty() ? "" : ", ") + t;
    out.lib = dlopen(t.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (out.lib) {
      out.path = loadedPath(out.lib, t);
      return out;
    }
    const char* err = dlerror();
    if (err && !strstr(err, "No such file or directory")) out.errors += std::string("; ") + err;
  }
  return out;
}

const void* newestSymbol(void* lib, const std::string& base, const std::vector<int>& versions, int* version,
                         std::string* found) {
  const void* table = nullptr;
  found->clear();
  for (int v : versions) {
    const void* sym = dlsym(lib, (base + std::to_string(v)).c_str());
    if (!sym) continue;
    *found += (found->empty() ? "v" : ", v") + std::to_string(v);
    if (!table) {
      table = sym;
      *version = v;
    }
  }
  return table;
}

namespace {

// Opens and checks the tuner spec names; nullptr when none loads. *report: the line logged.
std::unique_ptr<TunerPlugin> openTuner(const std::string& spec, const std::string& source, const std::string& netSpec,
                                       std::string* report) {
  const bool named = !spec.empty();
  if (named && strcasecmp(spec.c_str(), "none") == 0) {
    *report = "tuner plugin: none (" + source + ")";
    INFO(NCCL_INIT | NCCL_TUNING, "%s", report->c_str());
    return nullptr;
  }
  NcclLibrary opened = openNcclLibrary(spec, "libnccl-tuner");
  std::string fromNet;
  if (!opened.lib && strcasecmp(netSpec.c_str(), "none") != 0) {
    // NCCL's fallback: the tuner inside the net plugin's library.
    std::string netPath, found;
    int version = 0;
    if (void* netLib = netPluginLibrary(netSpec, &netPath)) {
      if (newestSymbol(netLib, "ncclTunerPlugin_v", {6, 5, 4, 3, 2}, &version, &found)) {
        opened.lib = netLib;
        opened.path = netPath;
        fromNet = "; from the net plugin's library, as no tuner library of its own was found";
      } else {
        dlclose(netLib);
      }
    }
  }
  void* lib = opened.lib;
  const std::string& file = opened.file;
  const std::string what = named ? "tuner plugin '" + spec + "' (" + source + ")" : "tuner plugin";
  if (!lib) {
    if (named || !opened.errors.empty()) {
      *report = format("%s: not loaded: tried %s%s. Running without a tuner plugin; to use it, put %s in "
                       "LD_LIBRARY_PATH or PLEXUS_PLUGIN_PATH or give its full path, or set NCCL_TUNER_PLUGIN=none to "
                       "run without one quietly", what.c_str(), opened.tried.c_str(), opened.errors.c_str(),
                       file.c_str());
      WARN("%s", report->c_str());
    } else {
      *report = "tuner plugin: none (no libnccl-tuner.so in the library path, PLEXUS_PLUGIN_PATH or beside "
                "libplexus.so; NCCL_TUNER_PLUGIN names one)";
      INFO(NCCL_INIT | NCCL_TUNING, "%s", report->c_str());
    }
    return nullptr;
  }
  const std::string& path = opened.path;
  std::string found, why;
  int version = 0;
  const void* table = newestSymbol(lib, "ncclTunerPlugin_v", {6, 5, 4, 3, 2}, &version, &found);
  const TunerVersion* use = nullptr;
  for (const TunerVersion& v : tunerVersions)
    if (table && v.version == version) use = &v;
  std::unique_ptr<const TunerApi> api;
  if (!use) {
    why = "it exports none of them";
  } else {
    api = use->adapt(table, &why);
    if (!api) why = "ncclTunerPlugin_v" + std::to_string(use->version) + "'s " + why;
  }
  if (!api) {
    *report = format("%s: refused %s: looked for ncclTunerPlugin_v6, _v5, _v4, _v3, _v2, found %s; %s. Running "
                     "without a tuner plugin: fix or rebuild the plugin against NCCL's tuner headers, or set "
                     "NCCL_TUNER_PLUGIN=none", what.c_str(), path.c_str(), found.empty() ? "none" : found.c_str(),
                     why.c_str());
    WARN("%s", report->c_str());
    dlclose(lib);
    return nullptr;
  }
  auto p = std::make_unique<TunerPlugin>();
  const char* name = *(const char* const*)table;  // every version's table starts with its name
  p->name = name && name[0] ? name : path.substr(path.rfind('/') + 1);
  p->path = path;
  p->version = use->version;
  p->api = std::move(api);
  p->label = "tuner plugin " + p->name + " (" + path + ", v" + std::to_string(p->version) + ")";
  *report = format("tuner plugin '%s': loaded %s (ncclTunerPlugin_v%d; the file exports %s; %s%s)", p->name.c_str(),
                   path.c_str(), p->version, found.c_str(), named ? source.c_str() : "default name", fromNet.c_str());
  INFO(NCCL_INIT | NCCL_TUNING, "%s", report->c_str());
  return p;  // the library stays open for the life of the process
}

// Every spec asked for so far and what it gave (plugin nullptr: none), so each is searched and logged once.
struct TunerLoad {
  std::string spec, netSpec, report;
  std::unique_ptr<TunerPlugin> plugin;
};
std::vector<TunerLoad> tunerRegistry;

}  // namespace

const TunerPlugin* loadTuner(const std::string& spec, const std::string& source, std::string* report,
                             const std::string& netSpec) {
  std::lock_guard<std::mutex> lock(registryMutex);
  const TunerLoad* load = nullptr;
  for (const TunerLoad& l : tunerRegistry)
    if (l.spec == spec && l.netSpec == netSpec) load = &l;
  if (!load) {
    TunerLoad l{spec, netSpec, "", nullptr};
    l.plugin = openTuner(spec, source, netSpec, &l.report);
    tunerRegistry.push_back(std::move(l));
    load = &tunerRegistry.back();
  }
  if (report) *report = load->report;
  return load->plugin.get();
}

}  // namespace plexus
