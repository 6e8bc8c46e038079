// A count that the threads of one test raise and others wait for: each raise wakes the waiters, which see the state
// itself (no polling interval), for at most a bound.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace testenv {

class Count {
 public:
  void add() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      value_++;
    }
    cv_.notify_all();
  }
  int value() {
    std::lock_guard<std::mutex> lock(mu_);
    return value_;
  }
  // True once the count reaches n; false after limit.
  bool waitFor(int n, std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return value_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int value_ = 0;
};

}  // namespace testenv
