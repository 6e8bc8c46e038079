// Logging as NCCL does it: NCCL_DEBUG=VERSION|WARN|INFO|TRACE, NCCL_DEBUG_SUBSYS=INIT,COLL,... (^ negates),
// NCCL_DEBUG_FILE=path with %h (host) and %p (pid). Lines are prefixed "host:pid:tid [rank] NCCL <LEVEL>".
#pragma once

#include <plexus/types.h>

#include <atomic>
#include <string>

namespace plexus {

// printf into a std::string (messages and report lines), at most 4 KiB.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

extern std::atomic<int> debugLevel;  // -1 until initialised from the environment
void debugInit();
// The logger handed to plugins (ncclDebugLogger_t); also what WARN/INFO/TRACE call.
void debugLog(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
// The rank printed in "[rank]" by log lines of the calling thread; -1 prints no rank.
void debugSetThreadRank(int rank);

}  // namespace plexus

// The level test is inline so that a disabled INFO or TRACE on a hot path costs one load and branch
// (debugLevel < 0: not read from the environment yet; debugLog reads it).
#define PLEXUS_LOG(LEVEL, FLAGS, ...)                                                          \
  do {                                                                                         \
    const int plexusLevel_ = ::plexus::debugLevel.load(std::memory_order_relaxed);              \
    if (plexusLevel_ < 0 || plexusLevel_ >= (LEVEL))                                           \
      ::plexus::debugLog((LEVEL), (FLAGS), __FILE__, __LINE__, __VA_ARGS__);                    \
  } while (0)
#define WARN(...) PLEXUS_LOG(NCCL_LOG_WARN, NCCL_ALL, __VA_ARGS__)
#define INFO(FLAGS, ...) PLEXUS_LOG(NCCL_LOG_INFO, (FLAGS), __VA_ARGS__)
#define TRACE(FLAGS, ...) PLEXUS_LOG(NCCL_LOG_TRACE, (FLAGS), __VA_ARGS__)
