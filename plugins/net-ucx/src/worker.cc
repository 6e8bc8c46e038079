#include "worker.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <thread>

#include "devices.h"
#include "log.h"

namespace plexus::net_ucx {

class UcpContext {
 public:
  static ncclResult_t get(int dev, std::shared_ptr<UcpContext>* out);
  explicit UcpContext(ucp_context_h context) : context_(context) {}
  ~UcpContext() { ucp_cleanup(context_); }
  UcpContext(const UcpContext&) = delete;
  UcpContext& operator=(const UcpContext&) = delete;
  ucp_context_h get() const { return context_; }

 private:
  ucp_context_h context_;
};

ncclResult_t UcpContext::get(int dev, std::shared_ptr<UcpContext>* out) {
  static auto* mutex = new std::mutex;  // never destroyed: comms may close during exit
  static auto* live = new std::map<int, std::weak_ptr<UcpContext>>;
  std::lock_guard<std::mutex> lock(*mutex);
  if ((*out = (*live)[dev].lock())) return ncclSuccess;

  const Device& d = devices()[dev];
  const char* tls = getenv("UCX_TLS");
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) {
    UCX_WARN("reading the UCX configuration failed (%s); check the UCX_* environment variables",
             ucs_status_string(status));
    return ncclSystemError;
  }
  // The device NCCL chose is the only network device this context may use.
  status = ucp_config_modify(config, "NET_DEVICES", d.name.c_str());
  if (status != UCS_OK) {
    ucp_config_release(config);
    UCX_WARN("UCX refused NET_DEVICES=%s (%s)", d.name.c_str(), ucs_status_string(status));
    return ncclSystemError;
  }
  // A worker flush (what closeSend and closeRecv wait for, bounded) then waits for the transports' own buffers
  // only. By default UCX flushes every endpoint of the worker as well, and over tcp an endpoint flush completes
  // only once the peer's worker answers it, which a close must not depend on.
  status = ucp_config_modify(config, "FLUSH_WORKER_EPS", "n");
  if (status != UCS_OK)
    UCX_INFO(NCCL_NET, "UCX refused FLUSH_WORKER_EPS=n (%s); a close may wait for its peer to progress",
             ucs_status_string(status));
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG;
  params.mt_workers_shared = 1;  // one worker per communicator, possibly on different threads
  params.name = "plexus-net-ucx";
  ucp_context_h context = nullptr;
  status = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (status != UCS_OK) {
    UCX_WARN("UCX could not start on device %s: %s; check UCX_TLS=%s against the transports `ucx_info -d` lists",
             d.name.c_str(), ucs_status_string(status), tls ? tls : "(unset)");
    return ncclSystemError;
  }
  *out = std::make_shared<UcpContext>(context);
  (*live)[dev] = *out;
  return ncclSuccess;
}

Worker::Worker(int dev, std::shared_ptr<UcpContext> context, ucp_worker_h worker, std::vector<uint8_t> address)
    : dev_(dev), context_(std::move(context)), worker_(worker), address_(std::move(address)) {}

Worker::~Worker() {
  // Closes still in flight finish as the worker progresses, within a bound: a flush towards a peer that
  // died ends only at UCX's endpoint timeout. One still pending then leaves the worker (and its context)
  // to the process: destroying it would abort the process in UCX.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (!closing_.empty()) {
    ucp_worker_progress(worker_);
    reapClosing();
    if (closing_.empty() || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  // A flush-mode close that ended in an error (the peer's worker went first and the flush hit UCX's endpoint
  // timeout) leaves its endpoint half released: UCX 1.13 then asserts on its refcount in ucp_worker_destroy.
  if (!closing_.empty() || closeFailed_) {
    UCX_INFO(NCCL_NET, "%s: the worker on device %d is left to the process",
             closeFailed_ ? "an endpoint close or flush failed (its peer was gone)"
                          : (std::to_string(closing_.size()) + " endpoint close(s) still in flight (a peer that "
                             "stopped answering)").c_str(), dev_);
    new std::shared_ptr<UcpContext>(context_);  // nor may its context go
    return;
  }
  ucp_worker_destroy(worker_);
}

void Worker::reapClosing() {
  closing_.erase(std::remove_if(closing_.begin(), closing_.end(),
                                [this](void* r) {
                                  const ucs_status_t s = ucp_request_check_status(r);
                                  if (s == UCS_INPROGRESS) return false;
                                  closeFailed_ |= s != UCS_OK;
                                  ucp_request_free(r);
                                  return true;
                                }),
                 closing_.end());
}

void Worker::closing(void* request) {
  reapClosing();
  closing_.push_back(request);
}

ucp_context_h Worker::context() const { return context_->get(); }

ncclResult_t Worker::create(int dev, std::shared_ptr<Worker>* out) {
  std::shared_ptr<UcpContext> context;
  ncclResult_t res = UcpContext::get(dev, &context);
  if (res != ncclSuccess) return res;

  const char* name = devices()[dev].name.c_str();
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // mutex() serializes every call
  ucp_worker_h worker = nullptr;
  ucs_status_t status = ucp_worker_create(context->get(), &params, &worker);
  if (status != UCS_OK) {
    UCX_WARN("UCX could not create a worker on device %s: %s", name, ucs_status_string(status));
    return ncclSystemError;
  }
  ucp_address_t* address = nullptr;
  size_t length = 0;
  status = ucp_worker_get_address(worker, &address, &length);
  if (status != UCS_OK) {
    ucp_worker_destroy(worker);
    UCX_WARN("UCX could not give the address of its worker on device %s: %s", name, ucs_status_string(status));
    return ncclSystemError;
  }
  std::vector<uint8_t> bytes(reinterpret_cast<uint8_t*>(address), reinterpret_cast<uint8_t*>(address) + length);
  ucp_worker_release_address(worker, address);
  out->reset(new Worker(dev, std::move(context), worker, std::move(bytes)));
  UCX_INFO(NCCL_INIT | NCCL_NET, "worker on device %s (UCX_TLS=%s): address of %zu bytes", name,
           getenv("UCX_TLS") ? getenv("UCX_TLS") : "all", length);
  return ncclSuccess;
}

void Worker::progress() {
  // One pass over the transports, as a NIC plugin polls its completion queue once per test(): the caller
  // loops, and a pass over tcp may already move megabytes.
  ucp_worker_progress(worker_);
}

uint32_t Worker::newConnId() {
  lastConnId_ = (lastConnId_ + 1) & 0x7fffffffu;  // the top bit marks control tags
  if (lastConnId_ == 0) lastConnId_ = 1;
  return lastConnId_;
}

void Worker::watch(ucp_ep_h ep, std::atomic<int>* status) {
  std::lock_guard<std::mutex> lock(watchMutex_);
  watched_[ep] = status;
}

void Worker::unwatch(ucp_ep_h ep) {
  std::lock_guard<std::mutex> lock(watchMutex_);
  watched_.erase(ep);
}

void Worker::onEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status) {
  auto* self = static_cast<Worker*>(arg);
  std::lock_guard<std::mutex> lock(self->watchMutex_);
  auto it = self->watched_.find(ep);
  if (it != self->watched_.end()) it->second->store(status);
}

}  // namespace plexus::net_ucx
