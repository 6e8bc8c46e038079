#include "regcache.h"

namespace plexus::net_ib {

RegCache::RegCache(size_t pageSize, Register reg, Deregister dereg)
    : page_(pageSize ? pageSize : 4096), reg_(std::move(reg)), dereg_(std::move(dereg)) {}

RegCache::~RegCache() {
  for (Entry& e : entries_) dereg_(e.handle);
}

void* RegCache::acquire(const void* addr, size_t length, std::string* error) {
  const uintptr_t a = (uintptr_t)addr;
  std::lock_guard<std::mutex> lock(mutex_);
  for (Entry& e : entries_)
    if (e.begin <= a && a + length <= e.end) {
      e.holders++;
      return e.handle;
    }
  const uintptr_t begin = a / page_ * page_;
  const uintptr_t end = (a + length + page_ - 1) / page_ * page_;
  void* handle = reg_(begin, end - begin, error);
  if (!handle) return nullptr;
  registrations_++;
  entries_.push_back({begin, end, handle, 1});
  return handle;
}

bool RegCache::release(void* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 0; i < entries_.size(); i++)
    if (entries_[i].handle == handle) {
      if (--entries_[i].holders == 0) {
        dereg_(handle);
        entries_.erase(entries_.begin() + (long)i);
      }
      return true;
    }
  return false;
}

size_t RegCache::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

size_t RegCache::registrations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return registrations_;
}

}  // namespace plexus::net_ib
