/*
 * Log lines of a plugin through the logger the runtime hands to its init (NCCL's ncclDebugLogger_t), with the
 * plugin's prefix ("NET/IB : ..."), as NCCL's own transports write them; before a logger arrives (or without
 * one) warnings go to stderr and the rest is dropped. Header-only C++; one PluginLog per plugin:
 *
 *     inline plexus::sdk::PluginLog gLog{"NET/IB", "net-ib"};
 *     gLog.setLogger(logger);                       // in init: the first non-NULL logger is kept
 *     gLog.line(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, "connect() to %s: %s", peer, why);
 */
#ifndef PLEXUS_PLUGIN_LOG_H_
#define PLEXUS_PLUGIN_LOG_H_

#include <atomic>
#include <cstdarg>
#include <cstdio>

#include "types.h"

namespace plexus::sdk {

class PluginLog {
 public:
  constexpr PluginLog(const char* prefix, const char* name) : prefix_(prefix), name_(name) {}

  void setLogger(ncclDebugLogger_t logger) {
    ncclDebugLogger_t none = nullptr;
    if (logger) logger_.compare_exchange_strong(none, logger);
  }

  void line(ncclDebugLogLevel level, unsigned long flags, const char* file, int lineNo, const char* fmt, ...)
      __attribute__((format(printf, 6, 7))) {
    ncclDebugLogger_t logger = logger_.load();
    if (!logger && level != NCCL_LOG_WARN) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (logger) logger(level, flags, file, lineNo, "%s : %s", prefix_, msg);
    else fprintf(stderr, "plexus %s WARN %s\n", name_, msg);
  }

 private:
  const char* prefix_;
  const char* name_;
  std::atomic<ncclDebugLogger_t> logger_{nullptr};
};

}  // namespace plexus::sdk

#endif /* PLEXUS_PLUGIN_LOG_H_ */
