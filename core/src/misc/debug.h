// Logging as NCCL does it: NCCL_DEBUG=VERSION|WARN|INFO|TRACE, NCCL_DEBUG_SUBSYS=INIT,COLL,... (^ negates),
// NCCL_DEBUG_FILE=path with %h (host) and %p (pid). Lines are prefixed "host:pid:tid [rank] NCCL <LEVEL>".
#pragma once

#include <plexus/types.h>

namespace plexus {

extern int debugLevel;  // -1 until initialised from the environment
void debugInit();
// The logger handed to plugins (ncclDebugLogger_t); also what WARN/INFO/TRACE call.
void debugLog(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
// The rank printed in "[rank]" by log lines of the calling thread; -1 prints no rank.
void debugSetThreadRank(int rank);

}  // namespace plexus

#define WARN(...) ::plexus::debugLog(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define INFO(FLAGS, ...) ::plexus::debugLog(NCCL_LOG_INFO, (FLAGS), __FILE__, __LINE__, __VA_ARGS__)
#define TRACE(FLAGS, ...) ::plexus::debugLog(NCCL_LOG_TRACE, (FLAGS), __FILE__, __LINE__, __VA_ARGS__)
