// net-ofi: listen, send and receive comms, their requests, and the connection handshake.
//
// RDM endpoints are connectionless, so a connection is a pair of ids agreed in two messages:
//   listen()   posts a receive for control tag (Connect, listen id); the handle carries the endpoint's
//              address and that id.
//   connect()  inserts the listener's address, posts a receive for (Accept, its own id), and sends
//              a ConnectMsg (its address and id) to (Connect, listen id).
//   accept()   on a ConnectMsg: inserts the sender's address, makes a receive comm with a fresh id and
//              sends an AcceptMsg with that id to (Accept, sender's id); the comm is returned once the
//              message has left.
//   the sender is connected once the AcceptMsg has arrived; its data tags carry the receive comm's
//   id. connect() and accept() never block: each call progresses the endpoint and returns NULL until
//   the comm is ready.
#pragma once

#include <sys/types.h>

#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "ofi_endpoint.h"

namespace plexus::ofi {

constexpr int kMaxRecvs = 8;
constexpr int kSendSlots = NCCL_NET_MAX_REQUESTS * kMaxRecvs;  // the ABI's bound on concurrent sends
constexpr int kRecvSlots = NCCL_NET_MAX_REQUESTS;
// The largest message: test() reports int sizes, so 1 GiB (NCCL's MAX_NET_SIZE); NCCL splits larger
// transfers by maxP2pBytes/maxCollBytes.
constexpr size_t kMaxMessageBytes = size_t(1) << 30;
constexpr uint32_t kWireMagic = 0x4f465850;  // "PXFO"
constexpr uint16_t kWireVersion = 1;

// What listen() writes: NCCL_NET_HANDLE_MAXSIZE bytes, carried to the sender out of band.
struct ListenHandle {
  uint32_t magic;
  uint16_t version;
  uint16_t addrLen;
  uint32_t listenId;
  uint32_t pid;     // the listener's process, watched when on the same host (hostId)
  uint64_t wireId;  // provider and address format: both ends must use the same
  uint64_t hostId;  // localHostId() of the listener
  uint8_t addr[kMaxAddrLen];
  uint64_t checksum;  // FNV-1a of the bytes above: a garbage handle is refused, not dereferenced
  uint64_t spare;
};
static_assert(sizeof(ListenHandle) == NCCL_NET_HANDLE_MAXSIZE, "a listen handle is exactly the ABI's size");

struct ConnectMsg {
  uint32_t magic;
  uint16_t version;
  uint16_t addrLen;
  uint32_t senderId;
  uint32_t pid;
  uint64_t wireId;
  uint64_t hostId;
  uint8_t addr[kMaxAddrLen];
  uint64_t checksum;
};

struct AcceptMsg {
  uint32_t magic;
  uint16_t version;
  uint16_t reserved;
  uint32_t recvId;
  uint32_t reserved2;
  uint64_t checksum;
};

template <class T>
uint64_t wireChecksum(const T& m) {
  return fnv1a(&m, offsetof(T, checksum));
}

// A registration: of the runtime's buffers (regMr) or of a comm's control messages.
struct MemoryRegion {
  static constexpr uint32_t kMagic = 0x4f46524d;  // "OFRM"
  uint32_t magic = kMagic;
  // regMr's keep their endpoint (registrations may be bound to it: FI_MR_ENDPOINT); a comm's own need
  // not, the comm keeps it.
  std::shared_ptr<Endpoint> ep;
  FidPtr<fid_mr> mr;  // null where the provider needs no registration
  void* desc = nullptr;
  ~MemoryRegion() { magic = 0; }
};

class Comm;

// What isend/irecv return and test() takes.
struct Request {
  static constexpr uint32_t kMagic = 0x4f465251;  // "OFRQ"
  uint32_t magic = kMagic;
  Comm* comm = nullptr;
  uint32_t slot = 0;  // within the comm
  bool held = false;  // by the runtime: from isend/irecv until test reports it done or failed
  int n = 0;          // buffers (1 for a send)
  int pending = 0;    // buffers whose completion has not been read
  ncclResult_t error = ncclSuccess;
  size_t sizes[kMaxRecvs] = {};
};

// The n-th send with runtime tag t on a connection matches the n-th receive buffer with tag t.
class TagSequences {
 public:
  uint32_t take(int tag) {
    for (auto& [t, next] : next_)
      if (t == tag) return next++;
    next_.emplace_back(tag, 1);
    return 0;
  }
  void giveBack(int tag) {
    for (auto& [t, next] : next_)
      if (t == tag) --next;
  }

 private:
  std::vector<std::pair<int, uint32_t>> next_;  // a handful of tags per connection: a flat list
};

class Comm {
 public:
  enum class Kind : uint8_t { Listen, Send, Recv };
  static constexpr uint32_t kMagic = 0x4f46434d;  // "OFCM"

  virtual ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  uint32_t magic = kMagic;
  const Kind kind;

  Endpoint& ep() const { return *ep_; }
  const std::shared_ptr<Endpoint>& endpointRef() const { return epRef_; }
  int outstanding() const { return outstanding_; }
  ncclResult_t failure() const { return failure_; }
  const std::string& peerName() const { return peerName_; }

  // Lock held for all of these.
  void complete(Op& op, size_t len, const fi_cq_err_entry* err);  // from Endpoint::progress
  virtual void retryPosts() {}
  void keepalive(Clock::time_point now, Clock::duration interval, Clock::duration timeout);
  // The first failure sticks: every later call on the comm returns it. Logged once.
  void fail(ncclResult_t r, const std::string& what);
  // Before close: cancel the receives still posted, stop probing the peer. The comm may still have
  // operations in flight afterwards (outstanding() > 0).
  void shutdown();
  // The peer is known gone: the comm failed, or the peer's process on this host exited.
  bool peerGone() const;
  // Releases the runtime's hold on a request; its slot is reused once libfabric is done with it too.
  virtual void release(Request& r) = 0;

  ssize_t postSend(Op& op, const void* buf, size_t len, void* desc, fi_addr_t to, uint64_t tag);
  ssize_t postRecv(Op& op, void* buf, size_t len, void* desc, uint64_t tag);
  // Moves the endpoint reference out, for a comm the endpoint now keeps as a zombie.
  std::shared_ptr<Endpoint> dropEndpointRef() { return std::move(epRef_); }
  void setPeerPid(pid_t pid) { peerPid_ = pid; }

 protected:
  Comm(Kind k, std::shared_ptr<Endpoint> ep) : kind(k), ep_(ep.get()), epRef_(std::move(ep)), lastHeard_(Clock::now()) {
    probe_.owner = this;
  }
  virtual void onComplete(Op& op, size_t len, const fi_cq_err_entry* err) = 0;
  virtual void cancelPosted() = 0;
  // Something waits on the peer: a handshake, or runtime requests in flight (keepalive probes).
  virtual bool waiting() const { return false; }
  ncclResult_t descOf(void* mhandle, const char* caller, void** desc);

  Endpoint* ep_;
  std::shared_ptr<Endpoint> epRef_;
  uint32_t id_ = 0;  // in the endpoint's id space; 0 until allocated
  fi_addr_t peer_ = FI_ADDR_UNSPEC;
  std::string peerName_ = "?";
  pid_t peerPid_ = 0;  // set when the peer shares this host's pid namespace
  int outstanding_ = 0;
  bool closing_ = false;
  ncclResult_t failure_ = ncclSuccess;
  bool heard_ = false;  // a completion (or a new wait) since the last keepalive scan
  Clock::time_point lastHeard_{};
  Clock::time_point lastProbe_{};
  Clock::time_point probeSince_{};
  Clock::duration
      probeGap_{};  // between probes: doubles while the silence lasts  // since when an answer is awaited; zero: none
  Op probe_;
};

class RecvComm;

class ListenComm final : public Comm {
 public:
  explicit ListenComm(std::shared_ptr<Endpoint> ep) : Comm(Kind::Listen, std::move(ep)) {}
  ncclResult_t start(ListenHandle* handle);
  // A comm that finished its handshake (or nullptr); *failed: one whose handshake failed, for the
  // caller to close and report.
  void takeAccepted(RecvComm** ready, RecvComm** failed);
  std::deque<RecvComm*> takeAll();
  void release(Request&) override {}

 protected:
  void onComplete(Op& op, size_t len, const fi_cq_err_entry* err) override;
  void cancelPosted() override;
  void retryPosts() override;

 private:
  void onConnectMsg(size_t len);
  void postConnectRecv();
  ConnectMsg rx_{};
  MemoryRegion rxMr_;
  Op rxOp_;
  bool rxToPost_ = false;
  std::deque<RecvComm*> accepting_;  // owned here until accept() returns them; close takes them first
};

class SendComm final : public Comm {
 public:
  explicit SendComm(std::shared_ptr<Endpoint> ep);
  ~SendComm() override;
  ncclResult_t start(const ListenHandle& h);
  bool ready() const { return connectSent_ && accepted_; }
  ncclResult_t isend(void* data, size_t size, int tag, void* mhandle, void** request);
  ncclResult_t test(Request& r, int* done, int* sizes);
  void release(Request& r) override;

 protected:
  void onComplete(Op& op, size_t len, const fi_cq_err_entry* err) override;
  void cancelPosted() override;
  void retryPosts() override;
  bool waiting() const override { return active_ > 0 || !ready(); }

 private:
  struct Slot {
    Request req;
    Op op;
  };
  struct ControlMsgs {
    ConnectMsg connect;
    AcceptMsg accept;
  };
  void postControl();
  void freeSlot(uint32_t s);

  ControlMsgs ctl_{};
  MemoryRegion ctlMr_;
  Op connectOp_, acceptOp_;
  bool connectToPost_ = true, acceptToPost_ = true;
  bool connectSent_ = false, accepted_ = false;
  uint32_t listenId_ = 0, remoteId_ = 0;
  std::unique_ptr<Slot[]> slots_;
  std::vector<uint32_t> free_;
  int active_ = 0;  // requests the runtime holds
  TagSequences seqs_;
};

class RecvComm final : public Comm {
 public:
  RecvComm(std::shared_ptr<Endpoint> ep, fi_addr_t peer, std::string peerName, uint32_t senderId);
  ~RecvComm() override;
  ncclResult_t start();
  bool ready() const { return acceptSent_; }
  ncclResult_t irecv(int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t test(Request& r, int* done, int* sizes);
  void release(Request& r) override;

 protected:
  void onComplete(Op& op, size_t len, const fi_cq_err_entry* err) override;
  void cancelPosted() override;
  void retryPosts() override;
  bool waiting() const override { return active_ > 0 || !ready(); }

 private:
  struct Sub {
    void* data = nullptr;
    size_t size = 0;
    void* desc = nullptr;
    uint64_t tag = 0;
    Op op;
    bool toPost = false;  // met FI_EAGAIN: posted by retryPosts()
  };
  struct Slot {
    Request req;
    Sub subs[kMaxRecvs];
  };
  bool slotBusy(const Slot& s) const;
  void maybeFree(uint32_t s);
  void postDeferred();

  uint32_t senderId_;
  AcceptMsg tx_{};
  MemoryRegion txMr_;
  Op txOp_;
  bool txToPost_ = true, acceptSent_ = false;
  std::unique_ptr<Slot[]> slots_;
  std::vector<uint32_t> free_;
  int active_ = 0;
  int deferred_ = 0;  // buffers of held requests still to post (FI_EAGAIN)
  TagSequences seqs_;
};

}  // namespace plexus::ofi
