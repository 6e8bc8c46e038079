#include "log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace plexus::net_ucx {
namespace {
std::atomic<ncclDebugLogger_t> gLogger{nullptr};
}

void setLogger(ncclDebugLogger_t logger) {
  ncclDebugLogger_t none = nullptr;
  if (logger) gLogger.compare_exchange_strong(none, logger);
}

void logLine(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  ncclDebugLogger_t logger = gLogger.load();
  if (!logger && level != NCCL_LOG_WARN) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (logger)
    logger(level, flags, file, line, "NET/UCX : %s", msg);
  else
    fprintf(stderr, "plexus net-ucx WARN %s\n", msg);
}

namespace {
// The variable that sets a knob: PLEXUS_<name> wins over NCCL_<name>.
const char* knobVariable(const char* name, std::string* variable) {
  for (const char* prefix : {"PLEXUS_", "NCCL_"}) {
    *variable = std::string(prefix) + name;
    const char* v = getenv(variable->c_str());
    if (v && *v) return v;
  }
  return nullptr;
}
}  // namespace

const char* knob(const char* name) {
  std::string variable;
  return knobVariable(name, &variable);
}

double knobSeconds(const char* name, double fallback) {
  std::string variable;
  const char* v = knobVariable(name, &variable);
  if (!v) return fallback;
  char* end = nullptr;
  double s = strtod(v, &end);
  if (end == v || *end != '\0' || !(s > 0)) {
    UCX_WARN("%s=\"%s\" is not a positive number of seconds; using %g s instead", variable.c_str(), v, fallback);
    return fallback;
  }
  return s;
}

}  // namespace plexus::net_ucx
