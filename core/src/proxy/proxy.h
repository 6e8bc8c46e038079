// The proxy (layer 5): one thread per process that moves the data of proxy-driven connections (the net
// transport's) for every communicator of the process, through their transport's proxyProgress.
//
// It runs while any communicator with such connections has a launch in flight (ProxyActivity) and
// until every connection has finished what kernels handed it; then it sleeps until the next launch.
#pragma once

#include <plexus/transport_v1.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <memory>
#include <vector>

#include "proxy/proxy_profile.h"

namespace plexus {

// One connection the proxy progresses. The owner keeps it alive between proxyAdd and proxyRemove.
struct ProxyConnection {
  const plexusTransport_v1_t* api = nullptr;
  void* resources = nullptr;
  // Where a failure goes: the communicator's abort flag (every wait ends) and a callback that records
  // the error for ncclGetLastError / ncclCommGetAsyncError. Called on the proxy thread.
  volatile uint32_t* abortFlag = nullptr;
  void (*onError)(void* owner, const ProxyConnection& conn, ncclResult_t result, const char* why) = nullptr;
  void* owner = nullptr;
  int peer = -1, channel = -1;
  bool isSend = false;
  std::atomic<bool> failed{false};  // set by the proxy; the connection is not progressed again
  std::atomic<bool> settled{false};  // the last pass found nothing to finish (proxyProgress's idle)
  std::atomic<bool> removeRequested{false}, removed{false};  // proxyRemove's handshake with the proxy thread
  // The profiler's proxy events for this connection (host backend; NULL elsewhere): watched around each progress.
  std::unique_ptr<ProxyProfile> profile;
};

void proxyAdd(ProxyConnection* conn);
// Returns true once the proxy thread no longer touches conn. False when the proxy thread has been inside
// one plugin call since before the deadline (a plugin that blocks): conn and its resources must then be
// left alone (leaked), since the call may still use them; the proxy drops conn if the call ever returns.
bool proxyRemove(ProxyConnection* conn, const std::chrono::steady_clock::time_point& deadline);
// Waits until the connections have finished what kernels handed them (sends on the wire), so that
// closing them loses nothing; false after `seconds` or when *abortFlag is set.
bool proxyDrain(const std::vector<ProxyConnection*>& conns, double seconds, volatile uint32_t* abortFlag);

// Held by a launch that may use proxy-driven connections.
class ProxyActivity {
 public:
  explicit ProxyActivity(bool needed);
  ~ProxyActivity();
  ProxyActivity(const ProxyActivity&) = delete;
  ProxyActivity& operator=(const ProxyActivity&) = delete;

 private:
  bool held_;
};

}  // namespace plexus
