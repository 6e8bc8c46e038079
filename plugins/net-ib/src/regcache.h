// net-ib: memory registrations shared by the buffers they cover. NCCL registers each buffer of a communicator
// (and PyTorch's caching allocator hands out pieces of the same segments again and again); registering every
// call with the NIC costs a system call and pinning. A registration covers whole pages and serves every later
// request inside them until the last holder releases it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace plexus::net_ib {

class RegCache {
 public:
  // register(begin, length) returns the provider's handle or nullptr with *error set; deregister frees one.
  using Register = std::function<void*(uintptr_t begin, size_t length, std::string* error)>;
  using Deregister = std::function<void(void* handle)>;
  RegCache(size_t pageSize, Register reg, Deregister dereg);
  ~RegCache();

  // The handle of a registration covering [addr, addr + length): an existing one, or a new one of whole pages.
  void* acquire(const void* addr, size_t length, std::string* error);
  // One holder fewer; the last one deregisters. False if the handle is not one of ours.
  bool release(void* handle);

  size_t entries() const;
  size_t registrations() const;  // calls to register so far

 private:
  struct Entry {
    uintptr_t begin, end;
    void* handle;
    int holders;
  };
  size_t page_;
  Register reg_;
  Deregister dereg_;
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
  size_t registrations_ = 0;
};

}  // namespace plexus::net_ib
