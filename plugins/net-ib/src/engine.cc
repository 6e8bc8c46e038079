#include "engine.h"

#include <atomic>
#include <cstdio>
#include <cstring>

#include "config.h"

namespace plexus::net_ib {

struct Request {
  Engine* engine = nullptr;
  enum Kind : uint8_t { Free, Send, Recv, Flush } kind = Free;
  int pending = 0;  // signaled work requests not completed yet
  int slot = 0;
  int n = 0;
  int size = 0;                  // send: bytes
  int arrived[kMaxRecvs] = {};   // receive: chunks landed per buffer
  int expected[kMaxRecvs] = {};  // receive: chunks to wait for (-1 until queue pair 0's chunk says the size)
};

namespace {
constexpr int kPool = kSlots * kMaxRecvs + kSlots;
constexpr uint32_t immOf(int slot, int entry) { return (uint32_t)slot | (uint32_t)entry << 8; }
}  // namespace

Engine::Engine(Wire* wire, int nqps, void* shared, uint32_t sharedLkey, RemoteArea peer)
    : wire_(wire), nqps_(nqps), shared_(shared), lkey_(sharedLkey), peer_(peer), pool_(new Request[kPool]) {}

Engine::~Engine() { delete[] pool_; }

bool Engine::fail(std::string text) {
  if (error_.empty()) error_ = std::move(text);
  return false;
}

Request* Engine::allocate() {
  for (int i = 0; i < kPool; i++)
    if (pool_[i].kind == Request::Free) {
      pool_[i] = Request{};
      pool_[i].engine = this;
      used_++;
      return &pool_[i];
    }
  return nullptr;
}

void Engine::release(Request* r) {
  r->kind = Request::Free;
  used_--;
}

bool Engine::start() {
  for (int q = 0; q < nqps_; q++)
    for (int i = 0; i < kSlots * kMaxRecvs; i++)
      if (int err = wire_->postRecv(q, 0)) return fail("posting a receive failed: " + std::string(strerror(err)));
  return true;
}

bool Engine::isend(void* data, size_t size, int tag, uint32_t lkey, Request** request) {
  *request = nullptr;
  if (!error_.empty()) return false;
  SendShared* s = static_cast<SendShared*>(shared_);
  const int slot = (int)(seq_ % kSlots);
  const uint32_t want = seq_ + 1;
  volatile CtsEntry* e = s->fifo[slot].e;
  // The receiver writes each entry with its sequence number; the entry is ours only once every one of them
  // carries it (an RDMA WRITE lands in no promised byte order).
  if (e[0].seq != want) return progress();
  const int n = e[0].n;
  if (n < 1 || n > kMaxRecvs) return fail("the receiver posted a receive of " + std::to_string(n) + " buffers");
  for (int i = 1; i < n; i++)
    if (e[i].seq != want) return progress();
  std::atomic_thread_fence(std::memory_order_acquire);
  int entry = -1;
  for (int i = 0; i < n && entry < 0; i++)
    if (!(usedEntries_ & (1u << i)) && e[i].tag == tag) entry = i;
  if (entry < 0)
    return fail("the receiver's receive " + std::to_string(seq_) + " has no buffer left for tag " +
                std::to_string(tag) + " (sends and receives must pair by tag, in order)");
  const CtsEntry cts = const_cast<const CtsEntry&>(e[entry]);
  if (size > (size_t)cts.size)
    return fail("a send of " + std::to_string(size) + " B is larger than the receive buffer of " +
                std::to_string(cts.size) + " B posted for it");
  Request* r = allocate();
  if (!r) return progress();
  r->kind = Request::Send;
  r->size = (int)size;

  uint32_t* record = &s->sizes[slot][entry];
  *record = (uint32_t)size;
  WorkRequest w;
  w.op = WrOp::Write;
  w.local = (uint64_t)(uintptr_t)record;
  w.lkey = lkey_;
  w.length = sizeof(uint32_t);
  w.remote = peer_.addr + offsetof(RecvShared, sizes) + (uint64_t)(slot * kMaxRecvs + entry) * sizeof(uint32_t);
  w.rkey = peer_.rkey;
  w.signaled = false;
  if (int err = wire_->post(0, w)) {
    release(r);
    return fail("posting the size record failed: " + std::string(strerror(err)));
  }
  const uint64_t id = (uint64_t)(r - pool_) + 1;
  // splitMessage's chunks, without building its vector on the send path.
  const size_t per = chunkBytes(size, nqps_);
  for (size_t q = 0, off = 0; q == 0 || off < size; q++, off += per) {
    WorkRequest d;
    d.id = id;
    d.op = WrOp::WriteImm;
    d.local = (uint64_t)(uintptr_t)data + off;
    d.lkey = lkey;
    d.length = (uint32_t)(size - off < per ? size - off : per);
    d.remote = cts.addr + off;
    d.rkey = cts.rkey;
    d.imm = immOf(slot, entry);
    if (int err = wire_->post((int)q, d)) return fail("posting an RDMA write failed: " + std::string(strerror(err)));
    r->pending++;
  }
  usedEntries_ |= (uint8_t)(1u << entry);
  if (usedEntries_ == (uint8_t)((1u << n) - 1)) usedEntries_ = 0, seq_++;
  *request = r;
  return true;
}

bool Engine::irecv(int n, void** data, const size_t* sizes, const int* tags, const uint32_t* rkeys, Request** request) {
  *request = nullptr;
  if (!error_.empty()) return false;
  if (n < 1 || n > kMaxRecvs) return fail("a receive of " + std::to_string(n) + " buffers (1 to 8 allowed)");
  const int slot = (int)(seq_ % kSlots);
  if (slotRequest_[slot]) return progress();  // the receive kSlots back has not completed
  Request* r = allocate();
  if (!r) return progress();
  r->kind = Request::Recv;
  r->slot = slot;
  r->n = n;
  RecvShared* s = static_cast<RecvShared*>(shared_);
  CtsSlot& stage = s->stage[slot];
  for (int i = 0; i < n; i++) {
    stage.e[i] =
        CtsEntry{(uint64_t)(uintptr_t)data[i], rkeys[i], (int32_t)sizes[i], tags[i], (uint16_t)n, 0, seq_ + 1, 0};
    r->expected[i] = -1;
  }
  WorkRequest w;
  w.id = (uint64_t)(r - pool_) + 1;
  w.op = WrOp::Write;
  w.local = (uint64_t)(uintptr_t)&stage;
  w.lkey = lkey_;
  w.length = (uint32_t)(n * sizeof(CtsEntry));
  w.remote = peer_.addr + offsetof(SendShared, fifo) + (uint64_t)slot * sizeof(CtsSlot);
  w.rkey = peer_.rkey;
  if (int err = wire_->post(0, w)) {
    release(r);
    return fail("posting a clear-to-send entry failed: " + std::string(strerror(err)));
  }
  r->pending = 1;
  slotRequest_[slot] = r;
  seq_++;
  *request = r;
  return true;
}

bool Engine::iflush(int n, void** data, const uint32_t* rkeys, Request** request) {
  *request = nullptr;
  if (!error_.empty()) return false;
  Request* r = allocate();
  if (!r) return progress();
  r->kind = Request::Flush;
  RecvShared* s = static_cast<RecvShared*>(shared_);
  // Reading one byte of each buffer back through the NIC: the READ completes only after the NIC's earlier writes
  // into that memory are visible to the GPU (NCCL's GPUDirect flush).
  for (int i = 0; i < n; i++) {
    WorkRequest w;
    w.id = (uint64_t)(r - pool_) + 1;
    w.op = WrOp::Read;
    w.local = (uint64_t)(uintptr_t)&s->flush;
    w.lkey = lkey_;
    w.length = 1;
    w.remote = (uint64_t)(uintptr_t)data[i];
    w.rkey = rkeys[i];
    if (int err = wire_->post(nqps_, w)) return fail("posting a flush read failed: " + std::string(strerror(err)));
    r->pending++;
  }
  *request = r;
  return true;
}

bool Engine::progress() {
  Completion wc[16];
  for (int rounds = 0; rounds < 4; rounds++) {
    const int got = wire_->poll(wc, 16);
    if (got < 0) return fail("polling the completion queue failed: " + std::string(strerror(-got)));
    for (int i = 0; i < got; i++) {
      const Completion& c = wc[i];
      if (c.status != 0) {
        remoteFailure_ = true;
        return fail("a work request failed: " + wire_->statusText(c.status) +
                    " (the peer closed the connection or died, or a memory key was wrong)");
      }
      if (c.recv) {
        const int slot = (int)(c.imm & 0xff), entry = (int)((c.imm >> 8) & 0xff);
        Request* r = slot < kSlots ? slotRequest_[slot] : nullptr;
        if (!r || entry >= r->n)
          return fail("data arrived for a receive that was not posted (slot " + std::to_string(slot) + ", buffer " +
                      std::to_string(entry) + ")");
        if (c.qp == 0) {
          const uint32_t size = static_cast<RecvShared*>(shared_)->sizes[slot][entry];
          r->expected[entry] = chunkCount(size, nqps_);
        }
        r->arrived[entry]++;
        if (int err = wire_->postRecv(c.qp, 0))
          return fail("reposting a receive failed: " + std::string(strerror(err)));
      } else if (c.id > 0 && c.id <= (uint64_t)kPool) {
        pool_[c.id - 1].pending--;
      }
    }
    if (got < 16) break;
  }
  return true;
}

Engine* Engine::of(const Request* r) { return r ? r->engine : nullptr; }

bool Engine::test(Request* r, int* done, int* sizes) {
  *done = 0;
  if (!progress()) return false;
  if (r->pending > 0) return true;
  if (r->kind == Request::Recv) {
    for (int i = 0; i < r->n; i++)
      if (r->expected[i] < 0 || r->arrived[i] < r->expected[i]) return true;
    const RecvShared* s = static_cast<const RecvShared*>(shared_);
    if (sizes)
      for (int i = 0; i < r->n; i++) sizes[i] = (int)s->sizes[r->slot][i];
    slotRequest_[r->slot] = nullptr;
  } else if (r->kind == Request::Send && sizes) {
    sizes[0] = r->size;
  }
  release(r);
  *done = 1;
  return true;
}

}  // namespace plexus::net_ib
