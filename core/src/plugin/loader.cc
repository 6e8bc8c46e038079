#include "loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <memory>
#include <mutex>

#include "misc/check.h"
#include "misc/debug.h"
#include "misc/env.h"

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

std::string findPluginFile(const std::string& fileName) {
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
  for (auto& d : dirs) {
    std::string candidate = d + "/" + fileName;
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return "";
}

// Opens a plugin and returns the address of `symbol`, or nullptr with `why` set.
static void* openSymbol(const std::string& nameOrPath, const std::string& fileName, const char* symbol,
                        std::string* path, std::string* why) {
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
  void* sym = dlsym(lib, symbol);
  if (!sym) {
    *why = std::string("the file does not export ") + symbol;
    dlclose(lib);
    return nullptr;
  }
  return sym;  // the library stays open for the life of the process
}

const char* checkAlgoTable(const plexusAlgo_v1_t* api) {
  if (api->abiVersion != PLEXUS_ALGO_ABI_VERSION) return "ABI version mismatch";
  if (api->structSize < sizeof(plexusAlgo_v1_t)) return "function table smaller than ABI v1's";
  if (!api->name || !api->name[0]) return "no name";
  if (!api->init || !api->buildGraph || !api->cost || !api->runHost || !api->finalize)
    return "a required member (init, buildGraph, cost, runHost, finalize) is NULL";
  return nullptr;
}

const char* checkTransportTable(const plexusTransport_v1_t* api) {
  if (api->abiVersion != PLEXUS_TRANSPORT_ABI_VERSION) return "ABI version mismatch";
  if (api->structSize < sizeof(plexusTransport_v1_t)) return "function table smaller than ABI v1's";
  if (!api->name || !api->name[0]) return "no name";
  if (!api->init || !api->canConnect || !api->sendSetup || !api->recvSetup || !api->sendConnect ||
      !api->recvConnect || !api->sendFree || !api->recvFree || !api->finalize)
    return "a required member is NULL";
  return nullptr;
}

static std::mutex registryMutex;
static std::vector<std::unique_ptr<AlgoPlugin>> algoRegistry;
static std::vector<std::unique_ptr<TransportPlugin>> transportRegistry;
static bool transportsLoaded = false;

ncclResult_t loadAlgorithms(const std::vector<std::string>& names, std::vector<const AlgoPlugin*>* out) {
  std::lock_guard<std::mutex> lock(registryMutex);
  out->clear();
  for (auto& name : names) {
    const AlgoPlugin* found = nullptr;
    for (auto& a : algoRegistry)
      if (a->name == name || a->path == name) found = a.get();
    if (!found) {
      std::string path, why;
      auto* api = (const plexusAlgo_v1_t*)openSymbol(name, "libplexus-algo-" + name + ".so",
                                                      PLEXUS_ALGO_PLUGIN_SYMBOL, &path, &why);
      if (api) {
        if (const char* bad = checkAlgoTable(api)) {
          why = std::string(bad) + " (plugin ABI " + std::to_string(api->abiVersion) + ", size " +
                std::to_string(api->structSize) + "; this Plexus expects ABI " +
                std::to_string(PLEXUS_ALGO_ABI_VERSION) + ", size " + std::to_string(sizeof(plexusAlgo_v1_t)) + ")";
          api = nullptr;
        }
      }
      if (!api)
        return setError(nullptr, ncclInvalidUsage, "algorithm plugin '%s': refused %s, symbol %s: %s", name.c_str(),
                        path.empty() ? "(no file)" : path.c_str(), PLEXUS_ALGO_PLUGIN_SYMBOL, why.c_str());
      for (auto& a : algoRegistry)
        if (a->name == api->name)
          return setError(nullptr, ncclInvalidUsage,
                          "algorithm plugin '%s' (%s) has the same name as the one loaded from %s; rename one",
                          api->name, path.c_str(), a->path.c_str());
      algoRegistry.push_back(std::make_unique<AlgoPlugin>(AlgoPlugin{api->name, path, api}));
      found = algoRegistry.back().get();
      INFO(NCCL_INIT, "algorithm plugin '%s': loaded %s (%s, ABI %u)", found->name.c_str(), path.c_str(),
           PLEXUS_ALGO_PLUGIN_SYMBOL, api->abiVersion);
    }
    out->push_back(found);
  }
  return ncclSuccess;
}

ncclResult_t loadTransports(std::vector<const TransportPlugin*>* out) {
  std::lock_guard<std::mutex> lock(registryMutex);
  if (!transportsLoaded) {
    transportsLoaded = true;
    for (const char* name : {"p2p-nvlink"}) {
      std::string path, why;
      auto* api = (const plexusTransport_v1_t*)openSymbol(name, std::string("libplexus-") + name + ".so",
                                                           PLEXUS_TRANSPORT_PLUGIN_SYMBOL, &path, &why);
      if (api) {
        if (const char* bad = checkTransportTable(api)) {
          why = std::string(bad) + " (plugin ABI " + std::to_string(api->abiVersion) + "; this Plexus expects " +
                std::to_string(PLEXUS_TRANSPORT_ABI_VERSION) + ")";
          api = nullptr;
        }
      }
      void* ctx = nullptr;
      if (api && api->init(&ctx, debugLog) != ncclSuccess) {
        why = "its init failed";
        api = nullptr;
      }
      if (!api) {
        WARN("transport plugin '%s': refused %s, symbol %s: %s. Ranks that need it will fail to connect.", name,
             path.empty() ? "(no file)" : path.c_str(), PLEXUS_TRANSPORT_PLUGIN_SYMBOL, why.c_str());
        continue;
      }
      transportRegistry.push_back(std::make_unique<TransportPlugin>(TransportPlugin{api->name, path, api, ctx}));
      INFO(NCCL_INIT, "transport plugin '%s': loaded %s (%s, ABI %u)", api->name, path.c_str(),
           PLEXUS_TRANSPORT_PLUGIN_SYMBOL, api->abiVersion);
    }
  }
  out->clear();
  for (auto& t : transportRegistry) out->push_back(t.get());
  return ncclSuccess;
}

}  // namespace plexus
