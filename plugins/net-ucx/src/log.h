// net-ucx: log lines through the runtime's logger, and environment knobs.
#pragma once

#include <plexus/plugin_log.h>

#include <chrono>

namespace plexus::net_ucx {

using Clock = std::chrono::steady_clock;

// The first non-NULL logger that init() receives; before that (or without one) warnings go to stderr.
inline sdk::PluginLog gLog{"NET/UCX", "net-ucx"};

#define UCX_WARN(...) ::plexus::net_ucx::gLog.line(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, __VA_ARGS__)
#define UCX_INFO(flags, ...) ::plexus::net_ucx::gLog.line(NCCL_LOG_INFO, flags, __FILE__, __LINE__, __VA_ARGS__)

// A knob: PLEXUS_<name> wins over NCCL_<name>; nullptr when neither is set (or empty).
const char* knob(const char* name);
// A knob in seconds (> 0), or fallback; a value that is not a positive number is reported once and ignored.
double knobSeconds(const char* name, double fallback);

}  // namespace plexus::net_ucx
