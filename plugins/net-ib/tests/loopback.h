// An in-memory fabric with the queue and completion rules of RC queue pairs (wire.h), for running net-ib's data
// path without a device: work requests wait in their queue pair's send queue and are executed by the fabric in
// a random order across queue pairs (in order within one), each memory access is checked against the key
// registered for it, a WRITE with immediate needs a posted receive at the target, and a failed work request
// completes with an error status whether or not it was signaled.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "wire.h"

namespace plexus::net_ib::test {

class LoopWire;

class Fabric {
 public:
  explicit Fabric(unsigned seed) : rng_(seed) {}
  uint32_t registerMemory(const void* p, size_t length) {
    keys_[next_] = {(uintptr_t)p, length};
    return next_++;
  }
  void forget(uint32_t key) { keys_.erase(key); }
  bool covers(uint32_t key, uint64_t addr, size_t length) const {
    auto it = keys_.find(key);
    return it != keys_.end() && addr >= it->second.first && addr + length <= it->second.first + it->second.second;
  }
  void add(LoopWire* w) { wires_.push_back(w); }
  void step(int max);  // executes up to max queued work requests
  size_t queued() const;
  std::mt19937& rng() { return rng_; }

 private:
  std::mt19937 rng_;
  std::map<uint32_t, std::pair<uintptr_t, size_t>> keys_;
  uint32_t next_ = 0x100;
  std::vector<LoopWire*> wires_;
};

class LoopWire : public Wire {
 public:
  // nqps queue pairs to the peer, and one more looped back to itself (the flush queue pair).
  LoopWire(Fabric* f, int nqps) : f_(f), nqps_(nqps), sq_(nqps + 1), recvs_(nqps + 1, 0) { f->add(this); }
  void connect(LoopWire* peer) { peer_ = peer; }

  int post(int qp, const WorkRequest& wr) override {
    if (qp < 0 || qp > nqps_) return EINVAL;
    sq_[qp].push_back(wr);
    return 0;
  }
  int postRecv(int qp, uint64_t) override {
    if (qp < 0 || qp > nqps_) return EINVAL;
    recvs_[qp]++;
    return 0;
  }
  int poll(Completion* out, int max) override {
    f_->step(std::uniform_int_distribution<int>(0, 3)(f_->rng()));
    int n = 0;
    while (n < max && !cq_.empty()) out[n++] = cq_.front(), cq_.pop_front();
    return n;
  }
  std::string statusText(int status) const override {
    return status == 1   ? "remote access error"
           : status == 2 ? "receiver not ready"
                         : "status " + std::to_string(status);
  }

  // Executes the oldest work request of queue pair qp; false if it has none.
  bool execute(int qp) {
    if (sq_[qp].empty()) return false;
    const WorkRequest wr = sq_[qp].front();
    sq_[qp].pop_front();
    LoopWire* target = qp == nqps_ ? this : peer_;
    int status = 0;
    if (!f_->covers(wr.lkey, wr.local, wr.length) || !f_->covers(wr.rkey, wr.remote, wr.length))
      status = 1;
    else if (wr.op == WrOp::WriteImm && target->recvs_[qp] == 0)
      status = 2;
    if (status == 0 && wr.length > 0) {  // an empty message may carry no addresses at all
      if (wr.op == WrOp::Read)
        memcpy((void*)(uintptr_t)wr.local, (const void*)(uintptr_t)wr.remote, wr.length);
      else
        memcpy((void*)(uintptr_t)wr.remote, (const void*)(uintptr_t)wr.local, wr.length);
    }
    if (status == 0) {
      if (wr.op == WrOp::WriteImm) {
        target->recvs_[qp]--;
        Completion c;
        c.recv = true;
        c.qp = qp;
        c.imm = wr.imm;
        target->cq_.push_back(c);
      }
    }
    if (wr.signaled || status) {
      Completion c;
      c.id = wr.id;
      c.qp = qp;
      c.status = status;
      cq_.push_back(c);
    }
    return true;
  }
  size_t queued() const {
    size_t n = 0;
    for (const auto& q : sq_) n += q.size();
    return n;
  }
  int queuePairs() const { return nqps_ + 1; }

 private:
  Fabric* f_;
  int nqps_;
  LoopWire* peer_ = nullptr;
  std::vector<std::deque<WorkRequest>> sq_;
  std::vector<int> recvs_;
  std::deque<Completion> cq_;
};

inline void Fabric::step(int max) {
  for (int i = 0; i < max; i++) {
    std::vector<std::pair<LoopWire*, int>> ready;
    for (LoopWire* w : wires_)
      for (int q = 0; q < w->queuePairs(); q++) ready.push_back({w, q});
    std::shuffle(ready.begin(), ready.end(), rng_);
    bool ran = false;
    for (auto& [w, q] : ready)
      if (w->execute(q)) {
        ran = true;
        break;
      }
    if (!ran) return;
  }
}

inline size_t Fabric::queued() const {
  size_t n = 0;
  for (const LoopWire* w : wires_) n += w->queued();
  return n;
}

}  // namespace plexus::net_ib::test
