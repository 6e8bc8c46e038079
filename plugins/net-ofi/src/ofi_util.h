// net-ofi: logging, knobs and small helpers shared by every file of the plugin.
#pragma once

#include <plexus/net.h>
#include <rdma/fabric.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace plexus::ofi {

using Clock = std::chrono::steady_clock;

// The runtime's logger, from the first init that passed one; until then nothing is printed.
extern std::atomic<ncclDebugLogger_t> gLogger;

#define OFI_LOG(level, fmt, ...)                                                                    \
  do {                                                                                              \
    ncclDebugLogger_t log_ = ::plexus::ofi::gLogger.load(std::memory_order_relaxed);                \
    if (log_) log_(level, NCCL_NET, __FILE__, __LINE__, "NET/OFI " fmt __VA_OPT__(, ) __VA_ARGS__); \
  } while (0)
#define OFI_WARN(fmt, ...) OFI_LOG(NCCL_LOG_WARN, fmt __VA_OPT__(, ) __VA_ARGS__)
#define OFI_INFO(fmt, ...) OFI_LOG(NCCL_LOG_INFO, fmt __VA_OPT__(, ) __VA_ARGS__)
#define OFI_TRACE(fmt, ...) OFI_LOG(NCCL_LOG_TRACE, fmt __VA_OPT__(, ) __VA_ARGS__)

// Propagates a failure, logging file:line on the way up so that a failure reads like a backtrace.
#define OFI_CHECK(call)                                                  \
  do {                                                                   \
    ncclResult_t r_ = (call);                                            \
    if (r_ != ncclSuccess) {                                             \
      OFI_INFO("%s:%d -> %d", __FILE__, __LINE__, static_cast<int>(r_)); \
      return r_;                                                         \
    }                                                                    \
  } while (0)

// An integer knob: PLEXUS_<name>, else the default (callers keep the answer in a static).
long envInt(const char* name, long fallback);

// libfabric's words for a (negative) return code.
inline std::string fiError(long rc) { return fi_strerror(static_cast<int>(rc < 0 ? -rc : rc)); }

// How the runtime should see a libfabric error code (errno values, FI_ETRUNC...; either sign):
// ncclRemoteError for what the peer or the path to it caused, ncclInvalidUsage for a truncation,
// ncclSystemError for the rest.
ncclResult_t classifyError(long err);

// Identifies this boot of this host and this process's pid namespace: two processes with the same
// id can see each other's pids. 0 when it cannot be told.
uint64_t localHostId();

// FNV-1a: wire checksums and stable device GUIDs.
inline uint64_t fnv1a(const void* data, size_t len, uint64_t h = 0xcbf29ce484222325ull) {
  auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// Owns one libfabric object; fi_close on destruction.
template <class T>
struct FidCloser {
  void operator()(T* p) const {
    if (!p) return;
    int rc = fi_close(&p->fid);
    if (rc) OFI_INFO("closing a libfabric object failed: %s", fiError(rc).c_str());
  }
};
template <class T>
using FidPtr = std::unique_ptr<T, FidCloser<T>>;

}  // namespace plexus::ofi
