// net-ib: log lines through the runtime's logger ("NET/IB : ..."), to stderr for warnings before there is one.
#pragma once

#include <plexus/plugin_log.h>

namespace plexus::net_ib {

inline sdk::PluginLog gLog{"NET/IB", "net-ib"};

#define IB_WARN(...) ::plexus::net_ib::gLog.line(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, __VA_ARGS__)
#define IB_INFO(flags, ...) ::plexus::net_ib::gLog.line(NCCL_LOG_INFO, flags, __FILE__, __LINE__, __VA_ARGS__)

}  // namespace plexus::net_ib
