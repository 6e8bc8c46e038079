#include "env.h"

#include <cstdlib>

#include "config/config.h"
#include "debug.h"

namespace plexus {

std::recursive_mutex& envMutex() {
  static std::recursive_mutex m;
  return m;
}

std::optional<std::string> envGet(const char* name) {
  std::string plexusName = std::string("PLEXUS_") + name;
  std::string ncclName = std::string("NCCL_") + name;
  {
    std::lock_guard<std::recursive_mutex> lock(envMutex());
    if (const char* v = getenv(plexusName.c_str())) return std::string(v);
    if (const char* v = getenv(ncclName.c_str())) return std::string(v);
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
