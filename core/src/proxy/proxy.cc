#include "proxy/proxy.h"

#include <plexus/device/arch.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "misc/debug.h"
#include "profiler/profiler.h"

namespace plexus {

namespace {

class Proxy {
 public:
  // Never destroyed: connections may be freed during exit. A child of fork() starts afresh: the
  // parent's thread did not come along, and its mutex may have been held.
  static Proxy& get() {
    static std::mutex made;
    static const int registered = pthread_atfork(nullptr, nullptr, [] { instance = nullptr; });
    (void)registered;
    Proxy* p = instance.load(std::memory_order_acquire);
    if (p) return *p;
    std::lock_guard<std::mutex> lock(made);
    if (!instance.load()) instance.store(new Proxy(), std::memory_order_release);
    return *instance.load();
  }

  void add(ProxyConnection* c) {
    std::lock_guard<std::mutex> lock(mu_);
    conns_.push_back(c);
    if (!started_) {
      started_ = true;
      std::thread([this] { loop(); }).detach();  // lives as long as the process
    }
  }
  bool remove(ProxyConnection* c, const std::chrono::steady_clock::time_point& deadline) {
    {
      std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);  // the loop holds it while it progresses
      if (lock.owns_lock()) {
        conns_.erase(std::remove(conns_.begin(), conns_.end(), c), conns_.end());
        endSleepOfLeavers();
        return true;
      }
    }
    // Busy: the loop drops requested connections before each pass.
    c->removeRequested.store(true, std::memory_order_release);
    for (uint32_t i = 0; !c->removed.load(std::memory_order_acquire); i++) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(i < 100 ? 20 : 1000));
    }
    return true;
  }
  void activate() {
    if (active_.fetch_add(1, std::memory_order_acq_rel) == 0) {
      // Never block here: a plugin call that does not return holds mu_, and a launch (or an abort behind
      // it) must not wait on it. A loop that holds mu_ is not asleep and sees active_ before it sleeps.
      std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
      cv_.notify_one();
    }
  }
  void deactivate() { active_.fetch_sub(1, std::memory_order_acq_rel); }
  uint64_t passes() const { return passes_.load(std::memory_order_acquire); }

 private:
  // One pass over every connection; true when any had something to do.
  bool pass() {
    passes_.fetch_add(1, std::memory_order_acq_rel);
    std::vector<ProxyConnection*> leaving;
    std::erase_if(conns_, [&](ProxyConnection* c) {
      if (!c->removeRequested.load(std::memory_order_acquire)) return false;
      leaving.push_back(c);
      return true;
    });
    if (!leaving.empty()) {
      endSleepOfLeavers();  // while their communicators still exist
      for (ProxyConnection* c : leaving) c->removed.store(true, std::memory_order_release);
    }
    bool busy = false;
    const bool profiling = profilerMask() & kProfileProxyTree;
    for (ProxyConnection* c : conns_) {
      if (c->failed.load(std::memory_order_relaxed)) continue;
      ProxyProfile* prof = profiling ? c->profile.get() : nullptr;
      if (prof) prof->observe();  // steps to post get their events first: the net plugin is handed their handles
      int idle = 1;
      char why[512] = "";
      ncclResult_t r = c->api->proxyProgress(c->resources, &idle, why, (int)sizeof why);
      if (c->removeRequested.load(std::memory_order_acquire)) continue;  // abandoned during the call: owner gone
      if (prof) prof->observe();
      c->settled.store(idle != 0, std::memory_order_release);
      if (r != ncclSuccess) {
        c->failed.store(true, std::memory_order_release);
        if (c->onError) c->onError(c->owner, *c, r, why);
        if (c->abortFlag) __atomic_store_n(c->abortFlag, 1, __ATOMIC_RELEASE);
        continue;
      }
      busy |= !idle;
    }
    return busy;
  }

  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    uint32_t idlePasses = 0;
    for (;;) {
      const bool busy = pass();
      idlePasses = busy ? 0 : idlePasses + 1;
      if (active_.load(std::memory_order_acquire) == 0 && idlePasses > kIdlePassesBeforeSleep) {
        // Nothing runs and nothing is left to finish: sleep until the next launch (a bounded wait, so
        // that a connection added without a launch is still looked at now and then).
        if (asleep_.empty()) profileSleep();
        if (cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return active_.load() > 0; })) profileWake();
        idlePasses = 0;
        continue;
      }
      if (idlePasses > kSpinPasses) {
        // Waiting on the network or on a kernel: give the core to whoever needs it.
        lock.unlock();
        sched_yield();
        lock.lock();
      } else if (idlePasses > 0 && (idlePasses & 15) == 0) {
        lock.unlock();  // let proxyAdd/proxyRemove in
        lock.lock();
      }
    }
  }

  // ProxyCtrl events: one Sleep event per communicator served, from the first sleep after work to the launch that
  // wakes the loop.
  void profileSleep() {
    for (ProxyConnection* c : conns_) {
      auto* comm = (ncclComm*)c->owner;
      if (!c->profile || std::any_of(asleep_.begin(), asleep_.end(), [&](auto& s) { return s.first == comm; }))
        continue;
      if (void* h = proxyCtrlSleep(comm)) asleep_.emplace_back(comm, h);
    }
  }
  // A communicator whose last connection leaves ends its Sleep event (it is about to be freed).
  void endSleepOfLeavers() {
    std::erase_if(asleep_, [&](const std::pair<ncclComm*, void*>& s) {
      if (std::any_of(conns_.begin(), conns_.end(), [&](ProxyConnection* o) { return o->owner == s.first; }))
        return false;
      proxyCtrlWake(s.first, s.second);
      return true;
    });
  }
  void profileWake() {
    for (auto& [comm, h] : asleep_) proxyCtrlWake(comm, h);
    asleep_.clear();
  }

  static inline std::atomic<Proxy*> instance{nullptr};
  static constexpr uint32_t kSpinPasses = 64;
  static constexpr uint32_t kIdlePassesBeforeSleep = 4096;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ProxyConnection*> conns_;
  std::vector<std::pair<ncclComm*, void*>> asleep_;  // under mu_
  std::atomic<int> active_{0};
  std::atomic<uint64_t> passes_{0};
  bool started_ = false;
};

}  // namespace

void proxyAdd(ProxyConnection* conn) { Proxy::get().add(conn); }

bool proxyDrain(const std::vector<ProxyConnection*>& conns, double seconds, volatile uint32_t* abortFlag) {
  Proxy& p = Proxy::get();
  ProxyActivity running(true);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  // Only a pass that began after this call saw the kernels' last steps.
  const uint64_t first = p.passes() + 1;
  for (;;) {
    bool settled = p.passes() > first;
    for (const ProxyConnection* c : conns)
      settled &= c->failed.load(std::memory_order_acquire) || c->settled.load(std::memory_order_acquire);
    if (settled) return true;
    if ((abortFlag && dev::loadRelaxed(abortFlag)) || std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}
bool proxyRemove(ProxyConnection* conn, const std::chrono::steady_clock::time_point& deadline) {
  return Proxy::get().remove(conn, deadline);
}

ProxyActivity::ProxyActivity(bool needed) : held_(needed) {
  if (held_) Proxy::get().activate();
}
ProxyActivity::~ProxyActivity() {
  if (held_) Proxy::get().deactivate();
}

}  // namespace plexus
