#pragma once

#include <plexus/types.h>

namespace p2p {
extern ncclDebugLogger_t logger;
}

#define P2P_WARN(...) \
  do { if (::p2p::logger) ::p2p::logger(NCCL_LOG_WARN, NCCL_P2P, __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define P2P_INFO(...) \
  do { if (::p2p::logger) ::p2p::logger(NCCL_LOG_INFO, NCCL_P2P, __FILE__, __LINE__, __VA_ARGS__); } while (0)
