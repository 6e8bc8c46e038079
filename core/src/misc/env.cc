#include "env.h"

#include <dlfcn.h>
#include <nccl.h>
#include <plexus/env.h>
#include <strings.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "config/config.h"
#include "debug.h"

namespace plexus {

std::recursive_mutex& envMutex() {
  static std::recursive_mutex m;
  return m;
}

namespace {

// NCCL's env plugin (NCCL_ENV_PLUGIN, ncclEnvPlugin_v2 / _v1): once per process, at the first knob read. Loading
// reads only the process environment and logs nothing (logging reads knobs); what happened is kept for
// envPluginCheck, which the first ncclGetUniqueId or communicator init calls.
struct EnvPlugin {
  const char* (*getEnv)(const char*) = nullptr;  // nullptr: the process environment
  ncclResult_t (*finalize)() = nullptr;
  ncclResult_t initResult = ncclSuccess;
  std::string report;  // the line to log
  bool warn = false;   // a failure the user should see
};

EnvPlugin* envPluginInstance();

// The logger the plugin's init gets: logging now would read knobs (NCCL_DEBUG) through the plugin being loaded, so
// its lines wait for envPluginCheck.
std::string& initLines() {
  static std::string lines;
  return lines;
}
void initLog(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level == NCCL_LOG_NONE || level == NCCL_LOG_VERSION) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  initLines() += std::string(initLines().empty() ? "" : "; ") + line;
}

void* openEnvLibrary(const std::string& spec, std::string* tried) {
  std::vector<std::string> names{spec.empty() ? "libnccl-env.so" : spec};
  const bool isPath = spec.find('/') != std::string::npos;
  if (!spec.empty() && !isPath && !(spec.compare(0, 3, "lib") == 0 && spec.size() > 3 &&
                                    spec.compare(spec.size() - 3, 3, ".so") == 0))
    names.push_back("libnccl-env-" + spec + ".so");
  std::vector<std::string> tries = names;
  if (!isPath) {
    // The plugin folders (loader.h's pluginDirs, read here without the knob machinery this plugin feeds).
    std::vector<std::string> dirs;
    if (const char* path = getenv("PLEXUS_PLUGIN_PATH")) {
      std::string p = path;
      for (size_t at = 0; at <= p.size();) {
        const size_t colon = std::min(p.find(':', at), p.size());
        if (colon > at) dirs.push_back(p.substr(at, colon - at));
        at = colon + 1;
      }
    }
    Dl_info info;
    if (dladdr((void*)&openEnvLibrary, &info) && info.dli_fname) {
      std::string lib = info.dli_fname;
      lib = lib.substr(0, lib.rfind('/'));
      dirs.push_back(lib + "/plexus");
      dirs.push_back(lib);
    }
    for (const std::string& d : dirs)
      for (const std::string& n : names) tries.push_back(d + "/" + n);
  }
  for (const std::string& t : tries) {
    *tried += (tried->empty() ? "" : ", ") + t;
    if (void* lib = dlopen(t.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
  }
  return nullptr;
}

EnvPlugin* loadEnvPlugin() {
  auto* p = new EnvPlugin();  // kept for the process: knobs are read until it ends
  const char* env = getenv("NCCL_ENV_PLUGIN");
  if (!env) env = getenv("PLEXUS_ENV_PLUGIN");
  const std::string spec = env ? env : "";
  if (env && strcasecmp(env, "none") == 0) {
    p->report = "env plugin: none (NCCL_ENV_PLUGIN=none): knobs come from the process environment";
    return p;
  }
  std::string tried;
  void* lib = openEnvLibrary(spec, &tried);
  if (!lib) {
    p->report = env ? "env plugin '" + spec + "': not loaded: tried " + tried +
                          ". Knobs come from the process environment; give a path or put the file in "
                          "PLEXUS_PLUGIN_PATH"
                    : "env plugin: none (no libnccl-env.so): knobs come from the process environment";
    p->warn = env != nullptr;
    return p;
  }
  if (auto* v2 = (const ncclEnv_v2_t*)dlsym(lib, "ncclEnvPlugin_v2"); v2 && v2->getEnv) {
    p->getEnv = v2->getEnv;
    p->finalize = v2->finalize;
    p->report = std::string("env plugin '") + (v2->name ? v2->name : "?") + "' (ncclEnvPlugin_v2)";
    p->initResult = v2->init ? v2->init(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, NCCL_SUFFIX, initLog) : ncclSuccess;
  } else if (auto* v1 = (const ncclEnv_v1_t*)dlsym(lib, "ncclEnvPlugin_v1"); v1 && v1->getEnv) {
    p->getEnv = v1->getEnv;
    p->finalize = v1->finalize;
    p->report = std::string("env plugin '") + (v1->name ? v1->name : "?") + "' (ncclEnvPlugin_v1)";
    p->initResult = v1->init ? v1->init(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, NCCL_SUFFIX) : ncclSuccess;
  } else {
    p->report = "env plugin: " + tried.substr(tried.rfind(", ") == std::string::npos ? 0 : tried.rfind(", ") + 2) +
                " exports no ncclEnvPlugin_v2 or _v1 with a getEnv; knobs come from the process environment";
    p->warn = true;
    dlclose(lib);
    return p;
  }
  if (p->initResult != ncclSuccess) {
    // As NCCL: the error is kept for init, and knobs are still asked of the plugin.
    p->report += ": init failed (" + std::string(ncclGetErrorString(p->initResult)) +
                 "); ncclGetUniqueId and communicator init return that error until it is fixed or NCCL_ENV_PLUGIN=none";
    p->warn = true;
  } else {
    p->report += ": loaded; every knob is read through it";
    if (p->finalize) atexit([] {
        EnvPlugin* self = envPluginInstance();
        self->finalize();
      });
  }
  return p;
}

EnvPlugin* envPluginInstance() {
  static EnvPlugin* plugin = loadEnvPlugin();
  return plugin;
}

}  // namespace

ncclResult_t envPluginCheck() {
  EnvPlugin* p = envPluginInstance();
  static std::once_flag logged;
  std::call_once(logged, [p] {
    const std::string said = initLines().empty() ? "" : " (its init said: " + initLines() + ")";
    if (p->warn) WARN("%s%s", p->report.c_str(), said.c_str());
    else INFO(NCCL_INIT | NCCL_ENV, "%s%s", p->report.c_str(), said.c_str());
  });
  return p->initResult;
}

std::optional<std::string> envGet(const char* name) {
  std::string plexusName = std::string("PLEXUS_") + name;
  std::string ncclName = std::string("NCCL_") + name;
  {
    EnvPlugin* plugin = envPluginInstance();
    std::lock_guard<std::recursive_mutex> lock(envMutex());
    auto get = [plugin](const std::string& n) { return plugin->getEnv ? plugin->getEnv(n.c_str()) : getenv(n.c_str()); };
    if (const char* v = get(plexusName)) return std::string(v);
    if (const char* v = get(ncclName)) return std::string(v);
  }
  // Then the configuration file's defaults, with the same precedence.
  std::string value;
  if (configDefault(plexusName, &value) || configDefault(ncclName, &value)) return value;
  return std::nullopt;
}

int64_t envInt(const char* name, int64_t deflt) {
  auto v = envGet(name);
  if (!v || v->empty()) return deflt;
  char* end = nullptr;
  long long x = strtoll(v->c_str(), &end, 0);
  uint64_t bytes;
  if (*end != '\0' && parseBytes(*v, &bytes) && bytes <= (uint64_t)INT64_MAX) return (int64_t)bytes;  // "8M"
  if (*end != '\0') {
    WARN("environment: %s_%s=\"%s\" is not an integer; using the default %lld. Set it to an integer (K, M, G "
         "suffixes allowed) or unset it.",
         getenv((std::string("PLEXUS_") + name).c_str()) ? "PLEXUS" : "NCCL", name, v->c_str(), (long long)deflt);
    return deflt;
  }
  return x;
}

std::string envStr(const char* name, const std::string& deflt) {
  auto v = envGet(name);
  return v ? *v : deflt;
}

}  // namespace plexus
