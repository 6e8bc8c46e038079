// net-ib: the data path of one connection, as NCCL's IB transport runs it, over a Wire (wire.h).
//
// The receiver posts "clear to send" (CTS) entries into a FIFO in the sender's memory by RDMA WRITE: for each of
// the n buffers of a (multi-)receive its address, remote key, size and tag, and the receive's sequence number, so
// the sender knows where to write without a round trip per message. The sender picks the entry by tag, writes the
// message's size into the receiver's size table (an RDMA WRITE on queue pair 0) and the data in chunks over the
// connection's queue pairs (splitMessage), each chunk an RDMA WRITE with immediate (slot | entry << 8). Queue pair
// 0 carries the size record before its chunk, so when its immediate arrives the receiver knows the size and with
// it how many chunks to wait for. A receive slot is reused only once its request has completed, so a CTS entry is
// never overwritten while the sender still needs it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "wire.h"

namespace plexus::net_ib {

constexpr int kSlots = 32;    // NCCL_NET_MAX_REQUESTS receives in flight per connection
constexpr int kMaxRecvs = 8;  // buffers of one multi-receive

struct CtsEntry {
  uint64_t addr;
  uint32_t rkey;
  int32_t size;
  int32_t tag;
  uint16_t n;  // buffers in this receive (the same in each of its entries)
  uint16_t reserved;
  uint32_t seq;  // the receive's sequence number + 1: an entry is posted when it matches
  uint32_t reserved2;
};
static_assert(sizeof(CtsEntry) == 32, "CtsEntry travels by RDMA between builds of this plugin");
struct CtsSlot {
  CtsEntry e[kMaxRecvs];
};

// Memory each side registers once per connection (one memory region): the sender's holds the FIFO the receiver
// writes and the size records it writes from; the receiver's holds the CTS entries it writes from, the size
// table the sender writes, and the word an RDMA READ flush lands in.
struct SendShared {
  CtsSlot fifo[kSlots];
  uint32_t sizes[kSlots][kMaxRecvs];
};
struct RecvShared {
  CtsSlot stage[kSlots];
  uint32_t sizes[kSlots][kMaxRecvs];
  uint64_t flush;
};

// Where the peer's shared memory is (exchanged when connecting).
struct RemoteArea {
  uint64_t addr;
  uint32_t rkey;
};

struct Request;

class Engine {
 public:
  // nqps data queue pairs (0..nqps-1); a receiver's wire has one more, looped back to itself, for flushes.
  Engine(Wire* wire, int nqps, void* shared, uint32_t sharedLkey, RemoteArea peer);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine();

  // Receiver: posts its receives (kSlots × kMaxRecvs per queue pair) before the peer can write.
  bool start();
  // Each returns false on an error (error() says what); *request is nullptr when it cannot start yet (the FIFO
  // entry has not arrived, or every slot is busy): call again.
  bool isend(void* data, size_t size, int tag, uint32_t lkey, Request** request);
  bool irecv(int n, void** data, const size_t* sizes, const int* tags, const uint32_t* rkeys, Request** request);
  bool iflush(int n, void** data, const uint32_t* rkeys, Request** request);
  // *done = 1 once complete, with each buffer's size in sizes (may be nullptr); the request is then freed.
  bool test(Request* request, int* done, int* sizes);

  const std::string& error() const { return error_; }
  bool remoteFailure() const { return remoteFailure_; }  // a work request failed (peer gone, network), not misuse
  static Engine* of(const Request* request);
  int inFlight() const { return used_; }

 private:
  bool progress();
  Request* allocate();
  void release(Request* r);
  bool fail(std::string text);

  Wire* wire_;
  int nqps_;
  void* shared_;
  uint32_t lkey_;
  RemoteArea peer_;
  uint32_t seq_ = 0;                // next send or receive
  uint8_t usedEntries_ = 0;         // sender: entries of the current slot already written (bit per entry)
  Request* slotRequest_[kSlots]{};  // receiver: the receive in each slot
  Request* pool_;
  int used_ = 0;
  std::string error_;
  bool remoteFailure_ = false;
};

}  // namespace plexus::net_ib
