// net-ofi: comms, requests and the connection handshake (see ofi_comm.h).
#include "ofi_comm.h"

#include <rdma/fi_errno.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace plexus::ofi {

namespace {

enum OpKind : uint16_t { kData = 0, kConnect = 1, kAccept = 2 };

const char* kindName(Comm::Kind k) {
  switch (k) {
    case Comm::Kind::Listen:
      return "listen";
    case Comm::Kind::Send:
      return "send";
    case Comm::Kind::Recv:
      return "receive";
  }
  return "?";
}

// A process of this pid namespace that has not exited: one that is gone, or a zombie (exited, not yet
// reaped by its parent), is dead.
bool processAlive(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64], line[512] = {};
  snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = fopen(path, "r");
  if (!f) return true;  // cannot tell: alive, and the probes decide
  bool got = fgets(line, sizeof line, f) != nullptr;
  fclose(f);
  const char* end = got ? strrchr(line, ')') : nullptr;  // "pid (name) state ...": the name may hold ')'
  return !end || (end[1] != ' ' || (end[2] != 'Z' && end[2] != 'X'));
}

}  // namespace

// ---------------------------------------------------------------------------------------------- Comm

Comm::~Comm() {
  if (id_) ep_->freeId(id_);
  magic = 0;
}

ssize_t Comm::postSend(Op& op, const void* buf, size_t len, void* desc, fi_addr_t to, uint64_t tag) {
  ssize_t rc = ep_->postSend(op, buf, len, desc, to, tag);
  if (rc == 0) outstanding_++;
  return rc;
}

ssize_t Comm::postRecv(Op& op, void* buf, size_t len, void* desc, uint64_t tag) {
  ssize_t rc = ep_->postRecv(op, buf, len, desc, tag);
  if (rc == 0) outstanding_++;
  return rc;
}

void Comm::complete(Op& op, size_t len, const fi_cq_err_entry* err) {
  outstanding_--;
  if (closing_) return;  // the comm is going away: nothing waits for this any more
  if (&op == &probe_) {
    if (!err) probeSince_ = {};  // the peer's endpoint took it: alive
    if (err)
      fail(ncclRemoteError, "the peer does not answer a keepalive probe: " + ep_->describe(*err) +
                                "; the remote process has exited or closed this connection: look at its log for the "
                                "first error");
    return;
  }
  if (!err) heard_ = true;  // timestamped by the next keepalive scan: no clock read per completion
  onComplete(op, len, err);
}

void Comm::fail(ncclResult_t r, const std::string& what) {
  if (failure_ != ncclSuccess) return;
  failure_ = r;
  OFI_WARN("%s comm %u on %s (peer %s): %s", kindName(kind), id_, ep_->device().name.c_str(), peerName_.c_str(),
           what.c_str());
}

void Comm::keepalive(Clock::time_point now, Clock::duration interval, Clock::duration timeout) {
  if (failure_ != ncclSuccess || closing_ || peer_ == FI_ADDR_UNSPEC) return;
  if (heard_ || probeGap_.count() == 0) {
    heard_ = false;
    lastHeard_ = now;
    probeGap_ = interval;
  }
  if (!waiting() || now - lastHeard_ < interval) {
    probeSince_ = {};
    return;
  }
  // Silence while requests wait: probe the peer's endpoint with 0-byte messages. A probe to a peer
  // that is gone fails, or (tcp;ofi_rxm 1.17 retries the connection forever) is refused with
  // FI_EAGAIN or never leaves; a peer that answers nothing for `timeout` is declared gone, which is
  // how a receive from a dead sender ends instead of waiting forever.
  if (probeSince_ == Clock::time_point{}) probeSince_ = now;
  // A peer in this host's pid namespace is gone when its process is: no probe needed (and shm
  // accepts messages for a dead process until its queue fills).
  if (peerPid_ > 0 && !processAlive(peerPid_)) {
    fail(ncclRemoteError, "the peer process (pid " + std::to_string(peerPid_) +
                              " on this host) has exited: look at its log for the first error");
    return;
  }
  if (now - probeSince_ >= timeout) {
    fail(ncclRemoteError,
         "nothing came from the peer, and keepalive probes to it did not leave, for " +
             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now - lastHeard_).count()) +
             " ms (PLEXUS_OFI_PEER_TIMEOUT_MS); the remote process has exited, closed this connection, or lost its "
             "network: look at its log for the first error");
    return;
  }
  if (probe_.posted || now - lastProbe_ < probeGap_) return;
  // The gap doubles while the silence lasts (up to 16 intervals): a live peer that is busy elsewhere
  // and does not progress its endpoint gets few probes to buffer.
  lastProbe_ = now;
  probeGap_ = std::min(probeGap_ * 2, interval * 16);
  ssize_t rc = postSend(probe_, nullptr, 0, nullptr, peer_, ep_->tags().control(Control::Keepalive, 0));
  if (rc && rc != -FI_EAGAIN) fail(ncclRemoteError, "cannot probe the peer: " + fiError(rc));
}

void Comm::shutdown() {
  closing_ = true;
  magic = 0;  // a second close, or any call after this one, is refused
  ep_->detach(this);
  cancelPosted();
}

bool Comm::peerGone() const { return failure_ != ncclSuccess || (peerPid_ > 0 && !processAlive(peerPid_)); }

ncclResult_t Comm::descOf(void* mhandle, const char* caller, void** desc) {
  if (!mhandle) {
    if (ep_->device().mrLocal) {
      OFI_WARN(
          "%s: the buffer has no registration, and provider %s needs one (FI_MR_LOCAL): pass the mhandle regMr "
          "returned",
          caller, ep_->device().provider.c_str());
      return ncclInvalidArgument;
    }
    *desc = nullptr;
    return ncclSuccess;
  }
  auto* m = static_cast<MemoryRegion*>(mhandle);
  if (m->magic != MemoryRegion::kMagic) {
    OFI_WARN("%s: mhandle %p is not a registration this plugin made (deregistered already?)", caller, mhandle);
    return ncclInvalidArgument;
  }
  *desc = m->desc;
  return ncclSuccess;
}

// ------------------------------------------------------------------------------------------ ListenComm

ncclResult_t ListenComm::start(ListenHandle* h) {
  OFI_CHECK(ep_->allocId(&id_));
  peerName_ = "none (listening)";
  rxOp_.owner = this;
  rxOp_.kind = kConnect;
  if (ep_->device().registerAll) OFI_CHECK(ep_->registerMemory(&rx_, sizeof rx_, &rxMr_.mr, &rxMr_.desc));
  postConnectRecv();
  if (failure_ != ncclSuccess) return failure_;
  ep_->attach(this);

  memset(h, 0, sizeof *h);
  h->magic = kWireMagic;
  h->version = kWireVersion;
  h->addrLen = static_cast<uint16_t>(ep_->addrLen());
  h->listenId = id_;
  h->pid = static_cast<uint32_t>(getpid());
  h->wireId = ep_->device().wireId;
  h->hostId = localHostId();
  memcpy(h->addr, ep_->addr(), ep_->addrLen());
  h->checksum = wireChecksum(*h);
  OFI_TRACE("listen comm %u on %s at %s", id_, ep_->device().name.c_str(), ep_->addrString().c_str());
  return ncclSuccess;
}

void ListenComm::postConnectRecv() {
  ssize_t rc = postRecv(rxOp_, &rx_, sizeof rx_, rxMr_.desc, ep_->tags().control(Control::Connect, id_));
  rxToPost_ = rc == -FI_EAGAIN;
  if (rxToPost_)
    ep_->wantRetry(this);
  else if (rc)
    fail(ncclSystemError, "cannot post the receive for connection requests: " + fiError(rc));
}

void ListenComm::retryPosts() {
  if (rxToPost_ && failure_ == ncclSuccess) postConnectRecv();
}

void ListenComm::onComplete(Op&, size_t len, const fi_cq_err_entry* err) {
  if (!err) {
    onConnectMsg(len);
  } else if (err->err == FI_ETRUNC) {
    OFI_WARN(
        "listen comm %u: dropped a connection request longer than this plugin's (%s); is the peer running "
        "another plugin?",
        id_, ep_->describe(*err).c_str());
  } else {
    fail(classifyError(err->err), "receiving a connection request failed: " + ep_->describe(*err));
  }
  if (failure_ == ncclSuccess) postConnectRecv();
}

void ListenComm::onConnectMsg(size_t len) {
  const ConnectMsg& m = rx_;
  if (len != sizeof m || m.magic != kWireMagic || m.version != kWireVersion || m.checksum != wireChecksum(m) ||
      m.addrLen == 0 || m.addrLen > kMaxAddrLen) {
    OFI_WARN("listen comm %u: dropped a malformed connection request (%zu bytes, magic 0x%x, version %u)", id_, len,
             m.magic, m.version);
    return;
  }
  if (m.wireId != ep_->device().wireId) {
    OFI_WARN(
        "listen comm %u: dropped a connection request from another provider or address format; run every "
        "rank with the same FI_PROVIDER",
        id_);
    return;
  }
  fi_addr_t peer;
  std::string name;
  if (ep_->insertPeer(m.addr, m.addrLen, &peer, &name) != ncclSuccess) return;
  auto* r = new RecvComm(epRef_, peer, std::move(name), m.senderId);
  if (m.hostId != 0 && m.hostId == localHostId()) r->setPeerPid(static_cast<pid_t>(m.pid));
  r->start();  // a failure stays in the comm: accept() reports it
  accepting_.push_back(r);
}

void ListenComm::takeAccepted(RecvComm** ready, RecvComm** failed) {
  *ready = *failed = nullptr;
  for (auto it = accepting_.begin(); it != accepting_.end(); ++it) {
    if ((*it)->failure() != ncclSuccess) {
      *failed = *it;
    } else if ((*it)->ready()) {
      *ready = *it;
    } else {
      continue;
    }
    accepting_.erase(it);
    return;
  }
}

std::deque<RecvComm*> ListenComm::takeAll() { return std::exchange(accepting_, {}); }

void ListenComm::cancelPosted() { ep_->cancel(rxOp_); }

// -------------------------------------------------------------------------------------------- SendComm

SendComm::SendComm(std::shared_ptr<Endpoint> ep) : Comm(Kind::Send, std::move(ep)), slots_(new Slot[kSendSlots]) {
  free_.reserve(kSendSlots);
  for (uint32_t s = kSendSlots; s-- > 0;) {
    Slot& slot = slots_[s];
    slot.req.comm = this;
    slot.req.slot = s;
    slot.op.owner = this;
    slot.op.kind = kData;
    slot.op.slot = s;
    free_.push_back(s);
  }
  connectOp_.owner = acceptOp_.owner = this;
  connectOp_.kind = kConnect;
  acceptOp_.kind = kAccept;
}

SendComm::~SendComm() = default;

ncclResult_t SendComm::start(const ListenHandle& h) {
  listenId_ = h.listenId;
  if (h.hostId != 0 && h.hostId == localHostId()) peerPid_ = static_cast<pid_t>(h.pid);
  OFI_CHECK(ep_->insertPeer(h.addr, h.addrLen, &peer_, &peerName_));
  OFI_CHECK(ep_->allocId(&id_));
  if (ep_->device().registerAll) OFI_CHECK(ep_->registerMemory(&ctl_, sizeof ctl_, &ctlMr_.mr, &ctlMr_.desc));
  ConnectMsg& m = ctl_.connect;
  m.magic = kWireMagic;
  m.version = kWireVersion;
  m.addrLen = static_cast<uint16_t>(ep_->addrLen());
  m.senderId = id_;
  m.pid = static_cast<uint32_t>(getpid());
  m.wireId = ep_->device().wireId;
  m.hostId = localHostId();
  memcpy(m.addr, ep_->addr(), ep_->addrLen());
  m.checksum = wireChecksum(m);
  ep_->attach(this);
  postControl();
  return failure_;
}

void SendComm::postControl() {
  // The answer's receive goes first, so that the answer never waits as an unexpected message.
  if (acceptToPost_) {
    ssize_t rc =
        postRecv(acceptOp_, &ctl_.accept, sizeof ctl_.accept, ctlMr_.desc, ep_->tags().control(Control::Accept, id_));
    if (rc && rc != -FI_EAGAIN) return fail(ncclSystemError, "cannot post the receive for the answer: " + fiError(rc));
    acceptToPost_ = rc != 0;
  }
  if (connectToPost_ && !acceptToPost_) {
    ssize_t rc = postSend(connectOp_, &ctl_.connect, sizeof ctl_.connect, ctlMr_.desc, peer_,
                          ep_->tags().control(Control::Connect, listenId_));
    if (rc && rc != -FI_EAGAIN)
      return fail(classifyError(rc),
                  "cannot send the connection request: " + fiError(rc) + "; is the listening process alive?");
    connectToPost_ = rc != 0;
  }
  if (acceptToPost_ || connectToPost_) ep_->wantRetry(this);
}

void SendComm::retryPosts() {
  if (failure_ == ncclSuccess) postControl();
}

void SendComm::onComplete(Op& op, size_t len, const fi_cq_err_entry* err) {
  switch (op.kind) {
    case kConnect:
      if (err)
        fail(classifyError(err->err), "the connection request did not reach the listener: " + ep_->describe(*err) +
                                          "; is the receiving process alive, with its listen comm open?");
      else
        connectSent_ = true;
      return;
    case kAccept: {
      const AcceptMsg& a = ctl_.accept;
      if (err) {
        fail(classifyError(err->err), "receiving the listener's answer failed: " + ep_->describe(*err));
      } else if (len != sizeof a || a.magic != kWireMagic || a.version != kWireVersion ||
                 a.checksum != wireChecksum(a) || a.recvId == 0 || a.recvId >= ep_->tags().maxIds()) {
        fail(ncclRemoteError, "the listener's answer is malformed (" + std::to_string(len) +
                                  " bytes); is the peer running this same plugin version?");
      } else {
        remoteId_ = a.recvId;
        accepted_ = true;
        OFI_TRACE("send comm %u connected to receive comm %u at %s", id_, remoteId_, peerName_.c_str());
      }
      return;
    }
    default: {
      Request& r = slots_[op.slot].req;
      r.pending = 0;
      if (err) {
        r.error = classifyError(err->err);
        fail(r.error, "a send of " + std::to_string(r.sizes[0]) + " bytes failed: " + ep_->describe(*err));
      }
      if (!r.held) freeSlot(op.slot);
      return;
    }
  }
}

void SendComm::freeSlot(uint32_t s) { free_.push_back(s); }

void SendComm::cancelPosted() { ep_->cancel(acceptOp_); }  // sends cannot be taken back: they complete

ncclResult_t SendComm::isend(void* data, size_t size, int tag, void* mhandle, void** request) {
  *request = nullptr;
  if (failure_ != ncclSuccess) return failure_;
  if (size > ep_->device().maxMsgSize || size > kMaxMessageBytes) {
    OFI_WARN("isend: %zu bytes is more than maxP2pBytes; split the transfer", size);
    return ncclInvalidArgument;
  }
  void* desc;
  OFI_CHECK(descOf(mhandle, "isend", &desc));
  if (free_.empty()) return ep_->progress();  // NCCL_NET_MAX_REQUESTS x maxRecvs in flight: try later
  uint32_t s = free_.back();
  Slot& slot = slots_[s];
  ssize_t rc = postSend(slot.op, data, size, desc, peer_, ep_->tags().data(remoteId_, seqs_.take(tag), tag));
  if (rc == -FI_EAGAIN) {  // the provider is out of send resources: the runtime tries again later
    seqs_.giveBack(tag);
    return ep_->progress();
  }
  if (rc) {
    fail(classifyError(rc), "fi_tsend of " + std::to_string(size) + " bytes failed: " + fiError(rc));
    return failure_;
  }
  free_.pop_back();
  Request& r = slot.req;
  r.held = true;
  r.n = 1;
  r.pending = 1;
  r.error = ncclSuccess;
  r.sizes[0] = size;
  if (active_++ == 0) heard_ = true;  // the wait starts: silence is counted from here
  *request = &r;
  return ncclSuccess;
}

ncclResult_t SendComm::test(Request& r, int* done, int* sizes) {
  if (r.pending) OFI_CHECK(ep_->progress());
  if (r.error != ncclSuccess) {
    ncclResult_t e = r.error;
    release(r);
    return e;
  }
  if (r.pending == 0) {
    if (sizes) sizes[0] = static_cast<int>(r.sizes[0]);
    release(r);
    *done = 1;
    return ncclSuccess;
  }
  if (failure_ != ncclSuccess) {
    release(r);
    return failure_;
  }
  return ncclSuccess;
}

void SendComm::release(Request& r) {
  r.held = false;
  active_--;
  if (!slots_[r.slot].op.posted) freeSlot(r.slot);
}

// -------------------------------------------------------------------------------------------- RecvComm

RecvComm::RecvComm(std::shared_ptr<Endpoint> ep, fi_addr_t peer, std::string peerName, uint32_t senderId)
    : Comm(Kind::Recv, std::move(ep)), senderId_(senderId), slots_(new Slot[kRecvSlots]) {
  peer_ = peer;
  peerName_ = std::move(peerName);
  free_.reserve(kRecvSlots);
  for (uint32_t s = kRecvSlots; s-- > 0;) {
    Slot& slot = slots_[s];
    slot.req.comm = this;
    slot.req.slot = s;
    for (int i = 0; i < kMaxRecvs; i++) {
      slot.subs[i].op.owner = this;
      slot.subs[i].op.kind = kData;
      slot.subs[i].op.slot = s;
      slot.subs[i].op.sub = static_cast<uint16_t>(i);
    }
    free_.push_back(s);
  }
  txOp_.owner = this;
  txOp_.kind = kAccept;
}

RecvComm::~RecvComm() = default;

ncclResult_t RecvComm::start() {
  if (ncclResult_t r = ep_->allocId(&id_); r != ncclSuccess) {
    fail(r, "no connection id is left for this connection request");
    return r;
  }
  if (ep_->device().registerAll) {
    if (ncclResult_t r = ep_->registerMemory(&tx_, sizeof tx_, &txMr_.mr, &txMr_.desc); r != ncclSuccess) {
      fail(r, "cannot register the answer to the connection request");
      return r;
    }
  }
  tx_.magic = kWireMagic;
  tx_.version = kWireVersion;
  tx_.recvId = id_;
  tx_.checksum = wireChecksum(tx_);
  ep_->attach(this);
  retryPosts();
  return failure_;
}

void RecvComm::retryPosts() {
  if (failure_ != ncclSuccess) return;
  if (txToPost_) {
    ssize_t rc = postSend(txOp_, &tx_, sizeof tx_, txMr_.desc, peer_, ep_->tags().control(Control::Accept, senderId_));
    if (rc && rc != -FI_EAGAIN) return fail(classifyError(rc), "cannot answer the connection request: " + fiError(rc));
    txToPost_ = rc != 0;
  }
  if (deferred_ > 0) postDeferred();
  if (txToPost_ || deferred_ > 0) ep_->wantRetry(this);
}

// Buffers of a multi-receive that met FI_EAGAIN after the first was posted. Their tags carry their
// sequence numbers, so posting them late, after later receives, matches them all the same.
void RecvComm::postDeferred() {
  for (uint32_t s = 0; s < kRecvSlots && deferred_ > 0; s++) {
    Slot& slot = slots_[s];
    if (!slot.req.held) continue;
    for (int i = 0; i < slot.req.n; i++) {
      Sub& sub = slot.subs[i];
      if (!sub.toPost) continue;
      ssize_t rc = postRecv(sub.op, sub.data, sub.size, sub.desc, sub.tag);
      if (rc == -FI_EAGAIN) return;
      sub.toPost = false;
      deferred_--;
      if (rc) {
        slot.req.error = ncclSystemError;
        slot.req.pending--;
        return fail(ncclSystemError, "fi_trecv failed: " + fiError(rc));
      }
    }
  }
}

void RecvComm::onComplete(Op& op, size_t len, const fi_cq_err_entry* err) {
  if (op.kind == kAccept) {
    if (err)
      fail(classifyError(err->err), "the answer to the connection request did not reach the connecting peer: " +
                                        ep_->describe(*err) + "; it has likely exited");
    else
      acceptSent_ = true;
    return;
  }
  Request& r = slots_[op.slot].req;
  r.pending--;
  if (err) {
    r.error = classifyError(err->err);
    if (err->err == FI_ETRUNC)
      fail(r.error, "a message larger than its receive buffer of " + std::to_string(slots_[op.slot].subs[op.sub].size) +
                        " bytes arrived (" + ep_->describe(*err) + "): the sender sent more than the receiver posted");
    else
      fail(r.error, "a receive failed: " + ep_->describe(*err));
  } else {
    r.sizes[op.sub] = len;
  }
  maybeFree(op.slot);
}

bool RecvComm::slotBusy(const Slot& s) const {
  for (const Sub& sub : s.subs)
    if (sub.op.posted) return true;
  return false;
}

void RecvComm::maybeFree(uint32_t s) {
  if (!slots_[s].req.held && !slotBusy(slots_[s])) free_.push_back(s);
}

void RecvComm::cancelPosted() {
  for (uint32_t s = 0; s < kRecvSlots; s++)
    for (Sub& sub : slots_[s].subs) ep_->cancel(sub.op);
}

ncclResult_t RecvComm::irecv(int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  *request = nullptr;
  if (failure_ != ncclSuccess) return failure_;
  if (n < 1 || n > kMaxRecvs || !data || !sizes || !tags) {
    OFI_WARN(
        "irecv: %d buffers (data %p, sizes %p, tags %p); this plugin takes 1 to %d (maxRecvs) with all three "
        "arrays",
        n, static_cast<void*>(data), static_cast<void*>(sizes), static_cast<void*>(tags), kMaxRecvs);
    return ncclInvalidArgument;
  }
  void* descs[kMaxRecvs];
  for (int i = 0; i < n; i++) OFI_CHECK(descOf(mhandles ? mhandles[i] : nullptr, "irecv", &descs[i]));
  if (free_.empty()) return ep_->progress();  // NCCL_NET_MAX_REQUESTS in flight: try later

  uint32_t s = free_.back();
  Slot& slot = slots_[s];
  for (int i = 0; i < n; i++) {
    Sub& sub = slot.subs[i];
    sub.data = data[i];
    sub.size = sizes[i];
    sub.desc = descs[i];
    sub.tag = ep_->tags().data(id_, seqs_.take(tags[i]), tags[i]);
    sub.toPost = false;
  }
  ssize_t rc = postRecv(slot.subs[0].op, slot.subs[0].data, slot.subs[0].size, slot.subs[0].desc, slot.subs[0].tag);
  if (rc == -FI_EAGAIN) {  // nothing posted: undo, the runtime tries again later
    for (int i = n; i-- > 0;) seqs_.giveBack(tags[i]);
    return ep_->progress();
  }
  if (rc) {
    fail(ncclSystemError, "fi_trecv failed: " + fiError(rc));
    return failure_;
  }
  free_.pop_back();
  Request& r = slot.req;
  r.held = true;
  r.n = n;
  r.pending = n;
  r.error = ncclSuccess;
  std::fill(r.sizes, r.sizes + kMaxRecvs, 0);
  for (int i = 1; i < n; i++) {
    Sub& sub = slot.subs[i];
    rc = postRecv(sub.op, sub.data, sub.size, sub.desc, sub.tag);
    if (rc == -FI_EAGAIN) {
      sub.toPost = true;
      deferred_++;
    } else if (rc) {
      r.error = ncclSystemError;
      r.pending -= n - i;
      fail(ncclSystemError, "fi_trecv failed: " + fiError(rc));
      break;
    }
  }
  if (deferred_ > 0) ep_->wantRetry(this);
  if (active_++ == 0) heard_ = true;  // the wait starts: silence is counted from here
  *request = &r;
  return ncclSuccess;
}

ncclResult_t RecvComm::test(Request& r, int* done, int* sizes) {
  if (r.pending) OFI_CHECK(ep_->progress());
  if (r.error != ncclSuccess) {
    ncclResult_t e = r.error;
    release(r);
    return e;
  }
  if (r.pending == 0) {
    if (sizes)
      for (int i = 0; i < r.n; i++) sizes[i] = static_cast<int>(r.sizes[i]);
    release(r);
    *done = 1;
    return ncclSuccess;
  }
  if (failure_ != ncclSuccess) {
    release(r);
    return failure_;
  }
  return ncclSuccess;
}

void RecvComm::release(Request& r) {
  r.held = false;
  active_--;
  for (int i = 0; i < r.n; i++) {
    Sub& sub = slots_[r.slot].subs[i];
    if (sub.toPost) {  // abandoned before it could be posted
      sub.toPost = false;
      deferred_--;
    }
  }
  maybeFree(r.slot);
}

}  // namespace plexus::ofi
