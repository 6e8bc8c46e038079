// net-ucx: the UCP objects under the comms.
//
// One UCP context per device per process, restricted to that device (NET_DEVICES), shared by
// reference count; one UCP worker per plugin context (NCCL: per communicator) and device, shared by
// the comms made on it and kept alive by them after finalize(). Every UCP call on a worker runs
// under Worker::mutex(): NCCL sets connections up on one thread while its proxy moves data on another.
#pragma once

#include <plexus/types.h>
#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace plexus::net_ucx {

class UcpContext;

class Worker {
 public:
  static ncclResult_t create(int dev, std::shared_ptr<Worker>* out);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  int dev() const { return dev_; }
  ucp_worker_h get() const { return worker_; }
  ucp_context_h context() const;
  const std::vector<uint8_t>& address() const { return address_; }  // what a peer's endpoint needs
  std::mutex& mutex() { return mutex_; }

  // With mutex() held.
  void progress();
  // An endpoint's close request still in flight: the worker is destroyed only once it completed (UCX 1.13
  // asserts in ucp_worker_destroy on an endpoint whose flush-mode close is pending).
  void closing(void* request);
  // A flush that ended in an error or was given up (a peer's worker gone: endpoint timeout) leaves endpoints half
  // released as a failed close does: the worker is then left to the process, not destroyed.
  void flushFailed() { closeFailed_ = true; }
  uint32_t newConnId();  // names a connection in the high half of its tags: 1 .. 2^31-1, reused after 2^31-1

  // An endpoint created with errorHandler() reports its failure into *status (UCP may call from its
  // async thread). unwatch() before the endpoint is closed.
  ucp_err_handler_t errorHandler() { return {&Worker::onEndpointError, this}; }
  void watch(ucp_ep_h ep, std::atomic<int>* status);
  void unwatch(ucp_ep_h ep);

 private:
  Worker(int dev, std::shared_ptr<UcpContext> context, ucp_worker_h worker, std::vector<uint8_t> address);
  static void onEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);
  void reapClosing();  // frees the close requests that completed

  int dev_;
  std::shared_ptr<UcpContext> context_;
  ucp_worker_h worker_;
  std::vector<uint8_t> address_;
  std::mutex mutex_;
  std::vector<void*> closing_;
  bool closeFailed_ = false;  // a close or flush ended in an error (the peer's worker was gone: endpoint timeout)
  uint32_t lastConnId_ = 0;
  std::mutex watchMutex_;
  std::unordered_map<ucp_ep_h, std::atomic<int>*> watched_;
};

}  // namespace plexus::net_ucx
