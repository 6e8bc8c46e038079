// net-ib: log lines through the runtime's logger ("NET/IB : ..."), to stderr for warnings before there is one.
#pragma once

#include <plexus/types.h>

namespace plexus::net_ib {

void setLogger(ncclDebugLogger_t logger);
void logLine(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define IB_WARN(...) ::plexus::net_ib::logLine(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, __VA_ARGS__)
#define IB_INFO(flags, ...) ::plexus::net_ib::logLine(NCCL_LOG_INFO, flags, __FILE__, __LINE__, __VA_ARGS__)

}  // namespace plexus::net_ib
