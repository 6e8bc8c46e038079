// net-ofi: one RDM endpoint (with its completion queue and address vector) per communicator context
// and device, shared by every listen, send and receive comm of that context on that device.
#pragma once

#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_tagged.h>

#include <cstddef>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_set>

#include "ofi_device.h"

namespace plexus::ofi {

class Comm;

// One operation posted to libfabric. The provider hands &ctx back as the completion's op_context.
struct Op {
  fi_context2 ctx;        // first member: op_context converts back to the Op
  Comm* owner = nullptr;  // nullptr: the endpoint's own keepalive receives
  uint16_t kind = 0;      // the owner's meaning
  uint16_t sub = 0;       // buffer within a multi-receive
  uint32_t slot = 0;      // request slot within the owner
  bool posted = false;    // in libfabric's hands until its completion is read
};
static_assert(offsetof(Op, ctx) == 0, "op_context must convert back to the Op");

// The 64 tag bits (the provider's tagBits in general; at least kMinTagBits):
//   data     0 | receive comm id (tagBits - 41) | sequence (8) | the runtime's tag (32)
//   control  1 | kind (2) | target id
// A receive comm id names one connection on its endpoint, so connections never mix; the sequence,
// counted per (connection, runtime tag) on both sides, makes the n-th send with tag t match the n-th
// receive buffer with tag t even on a provider without send-after-send ordering; the runtime's tag
// picks the buffer within a multi-receive.
enum class Control : uint64_t { Connect = 0, Accept = 1, Keepalive = 2 };

struct Tags {
  static constexpr int kSeqBits = 8;
  static constexpr int kUserBits = 32;
  int bits = 64;
  int idBits() const { return bits - 1 - kSeqBits - kUserBits; }
  uint32_t maxIds() const { return 1u << (idBits() < 24 ? idBits() : 24); }
  uint64_t data(uint32_t recvId, uint32_t seq, int tag) const {
    return (uint64_t(recvId) << (kSeqBits + kUserBits)) | (uint64_t(seq & ((1u << kSeqBits) - 1)) << kUserBits) |
           uint64_t(uint32_t(tag));
  }
  uint64_t control(Control kind, uint32_t id) const {
    return (1ull << (bits - 1)) | (uint64_t(kind) << (bits - 3)) | id;
  }
};

// Longest endpoint name (address) a handle or connect message carries.
constexpr size_t kMaxAddrLen = 80;

class Endpoint {
 public:
  // trafficClass: NCCL_NET_TRAFFIC_CLASS_UNDEF or a value for the provider's tclass; commId only
  // names the communicator in the log.
  static ncclResult_t create(int dev, int trafficClass, uint64_t commId, std::shared_ptr<Endpoint>* out);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  const Device& device() const { return domain_->device(); }
  std::mutex& mutex() { return domain_->mutex(); }
  const Tags& tags() const { return tags_; }
  const uint8_t* addr() const { return addr_; }
  size_t addrLen() const { return addrLen_; }
  const std::string& addrString() const { return addrString_; }

  // Everything below: the caller holds mutex().

  // Reads completions and hands them to their owners, re-posts what met FI_EAGAIN, probes silent
  // peers, frees closed comms whose last operation ended. ncclSystemError when the completion queue
  // itself fails (every comm on the endpoint is failed with it).
  ncclResult_t progress();

  ncclResult_t insertPeer(const uint8_t* addr, size_t len, fi_addr_t* out, std::string* printable);
  ncclResult_t allocId(uint32_t* id);
  void freeId(uint32_t id) { ids_.erase(id); }

  ssize_t postSend(Op& op, const void* buf, size_t len, void* desc, fi_addr_t to, uint64_t tag);
  ssize_t postRecv(Op& op, void* buf, size_t len, void* desc, uint64_t tag);
  void cancel(Op& op);

  // Registers host memory for send and receive. desc is what fi_tsend/fi_trecv take.
  ncclResult_t registerMemory(void* buf, size_t len, FidPtr<fid_mr>* mr, void** desc);

  void attach(Comm* c) { live_.insert(c); }
  void detach(Comm* c) {
    live_.erase(c);
    retry_.erase(c);
  }
  void wantRetry(Comm* c) { retry_.insert(c); }
  // A closed comm with operations still in libfabric's hands: freed when the last one completes,
  // or with the endpoint.
  void adoptZombie(Comm* c) { zombies_.insert(c); }

  std::string describe(const fi_cq_err_entry& e) const;

 private:
  explicit Endpoint(std::shared_ptr<Domain> d) : domain_(std::move(d)) {}
  void complete(Op& op, size_t len, const fi_cq_err_entry* err);
  void postKeepaliveRecvs();
  void failAll(const std::string& what);

  std::shared_ptr<Domain> domain_;
  FidPtr<fid_cq> cq_;
  FidPtr<fid_av> av_;
  FidPtr<fid_ep> ep_;
  Tags tags_;
  uint8_t addr_[kMaxAddrLen] = {};
  size_t addrLen_ = 0;
  std::string addrString_;

  std::map<std::string, fi_addr_t> peers_;  // by address bytes: each peer is inserted once
  std::unordered_set<uint32_t> ids_;
  uint32_t nextId_ = 1;  // 0 is never used: a zero tag means nothing
  std::unordered_set<Comm*> live_;
  std::set<Comm*> retry_;
  std::unordered_set<Comm*> zombies_;

  // Peers' keepalive probes land here (0 bytes; re-posted as they complete).
  static constexpr int kKeepaliveRecvs = 4;
  Op keepalive_[kKeepaliveRecvs];
  Clock::duration keepaliveInterval_{};
  Clock::duration peerTimeout_{};
  Clock::time_point nextKeepaliveScan_{};
  unsigned progressCalls_ = 0;
  bool failed_ = false;
};

}  // namespace plexus::ofi
