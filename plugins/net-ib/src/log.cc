#include "log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace plexus::net_ib {
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
    logger(level, flags, file, line, "NET/IB : %s", msg);
  else
    fprintf(stderr, "plexus net-ib WARN %s\n", msg);
}

}  // namespace plexus::net_ib
