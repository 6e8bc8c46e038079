// net-ofi: the endpoint, and the progress loop every test/connect/accept runs.
#include "ofi_endpoint.h"

#include <rdma/fi_errno.h>

#include <cstring>
#include <vector>

#include "ofi_comm.h"

namespace plexus::ofi {

namespace {

// Completions read per fi_cq_read, and reads per progress call: enough to drain a busy queue,
// bounded so that one test() never spins long.
constexpr int kCqBatch = 16;
constexpr int kCqRounds = 8;
// Progress calls between two reads of the clock for keepalive scans: test() is called in tight loops,
// where a clock read per call costs more than the rest of the call.
constexpr unsigned kClockEvery = 64;

}  // namespace

ncclResult_t Endpoint::create(int dev, int trafficClass, uint64_t commId, std::shared_ptr<Endpoint>* out) {
  std::shared_ptr<Domain> domain;
  OFI_CHECK(Domain::get(dev, &domain));
  std::shared_ptr<Endpoint> e(new Endpoint(domain));
  const Device& d = domain->device();
  auto bad = [&](const char* what, long rc) {
    OFI_WARN("cannot open an endpoint on device %d (%s, provider %s): %s failed: %s", dev, d.name.c_str(),
             d.provider.c_str(), what, fiError(rc).c_str());
    return ncclSystemError;
  };

  std::lock_guard<std::mutex> lock(domain->mutex());
  std::unique_ptr<fi_info, decltype(&fi_freeinfo)> info(fi_dupinfo(d.info), fi_freeinfo);
  if (!info) return bad("fi_dupinfo", -FI_ENOMEM);
  // The communicator's traffic class is a TOS byte (as NCCL_IB_TC): its DSCP bits become the endpoint's.
  if (trafficClass >= 0 && trafficClass <= 255) info->tx_attr->tclass = fi_tc_dscp_set(uint8_t(trafficClass >> 2));

  fi_cq_attr cqAttr = {};
  cqAttr.format = FI_CQ_FORMAT_TAGGED;
  cqAttr.wait_obj = FI_WAIT_NONE;
  cqAttr.size = info->tx_attr->size + info->rx_attr->size;
  fid_cq* cq = nullptr;
  if (int rc = fi_cq_open(domain->fid(), &cqAttr, &cq, nullptr)) return bad("fi_cq_open", rc);
  e->cq_.reset(cq);

  fi_av_attr avAttr = {};
  avAttr.type = info->domain_attr->av_type != FI_AV_UNSPEC ? info->domain_attr->av_type : FI_AV_TABLE;
  fid_av* av = nullptr;
  if (int rc = fi_av_open(domain->fid(), &avAttr, &av, nullptr)) return bad("fi_av_open", rc);
  e->av_.reset(av);

  fid_ep* ep = nullptr;
  int rc = fi_endpoint(domain->fid(), info.get(), &ep, nullptr);
  if (rc && info->tx_attr->tclass != d.info->tx_attr->tclass) {
    OFI_INFO("device %d (%s): provider %s takes no traffic class %d (%s); the endpoint uses its default", dev,
             d.name.c_str(), d.provider.c_str(), trafficClass, fiError(rc).c_str());
    info->tx_attr->tclass = d.info->tx_attr->tclass;
    rc = fi_endpoint(domain->fid(), info.get(), &ep, nullptr);
  }
  if (rc) return bad("fi_endpoint", rc);
  e->ep_.reset(ep);
  if (int rc = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV)) return bad("binding the completion queue", rc);
  if (int rc = fi_ep_bind(ep, &av->fid, 0)) return bad("binding the address vector", rc);
  if (int rc = fi_enable(ep)) return bad("fi_enable", rc);

  size_t len = sizeof e->addr_;
  rc = fi_getname(&ep->fid, e->addr_, &len);
  if (rc == -FI_ETOOSMALL) {
    OFI_WARN("device %d (%s): the endpoint's address has %zu bytes, more than the %zu a handle carries", dev,
             d.name.c_str(), len, kMaxAddrLen);
    return ncclSystemError;
  }
  if (rc) return bad("fi_getname", rc);
  e->addrLen_ = len;
  char text[128];
  size_t textLen = sizeof text;
  fi_av_straddr(av, e->addr_, text, &textLen);
  e->addrString_ = text;

  e->tags_.bits = d.tagBits;
  static const long keepaliveMs = envInt("OFI_KEEPALIVE_MS", 1000);
  static const long peerTimeoutMs = envInt("OFI_PEER_TIMEOUT_MS", 20000);
  e->keepaliveInterval_ = std::chrono::milliseconds(keepaliveMs > 0 ? keepaliveMs : 0);
  e->peerTimeout_ = std::chrono::milliseconds(peerTimeoutMs > keepaliveMs ? peerTimeoutMs : 2 * keepaliveMs);
  e->postKeepaliveRecvs();
  OFI_INFO("device %d (%s): endpoint %s open for communicator %#llx", dev, d.name.c_str(), e->addrString_.c_str(),
           static_cast<unsigned long long>(commId));
  *out = std::move(e);
  return ncclSuccess;
}

Endpoint::~Endpoint() {
  std::lock_guard<std::mutex> lock(domain_->mutex());
  ep_.reset();  // discards whatever is still posted: the zombies' operations can no longer complete
  for (Comm* z : zombies_) delete z;
  zombies_.clear();
  av_.reset();
  cq_.reset();
}

ncclResult_t Endpoint::insertPeer(const uint8_t* addr, size_t len, fi_addr_t* out, std::string* printable) {
  // Zero-padded: string addresses (FI_ADDR_STR, shm) are read up to their NUL.
  uint8_t padded[kMaxAddrLen + 1] = {};
  memcpy(padded, addr, len < kMaxAddrLen ? len : kMaxAddrLen);
  std::string key(reinterpret_cast<const char*>(padded), len);
  auto it = peers_.find(key);
  if (it == peers_.end()) {
    fi_addr_t a = FI_ADDR_NOTAVAIL;
    int rc = fi_av_insert(av_.get(), padded, 1, &a, 0, nullptr);
    if (rc != 1 || a == FI_ADDR_NOTAVAIL) {
      OFI_WARN(
          "the peer address in a handle or connection request (%zu bytes) is not one provider %s accepts (%s); "
          "every rank must use the same provider and handles must reach connect() unchanged",
          len, device().provider.c_str(), rc < 0 ? fiError(rc).c_str() : "refused");
      return ncclInvalidArgument;
    }
    it = peers_.emplace(std::move(key), a).first;
  }
  *out = it->second;
  if (printable) {
    char text[128];
    size_t textLen = sizeof text;
    *printable = fi_av_straddr(av_.get(), padded, text, &textLen) ? text : "?";
  }
  return ncclSuccess;
}

ncclResult_t Endpoint::allocId(uint32_t* id) {
  const uint32_t max = tags_.maxIds();
  if (ids_.size() + 2 >= max) {
    OFI_WARN("%zu comms are open on one endpoint of %s, the most its %d tag bits allow; close some first", ids_.size(),
             device().name.c_str(), tags_.bits);
    return ncclSystemError;
  }
  // Ids go round the whole space before one is reused, so that a late message for a closed comm
  // finds no new comm under the same id.
  for (;;) {
    uint32_t candidate = nextId_;
    nextId_ = nextId_ + 1 < max ? nextId_ + 1 : 1;
    if (ids_.insert(candidate).second) {
      *id = candidate;
      return ncclSuccess;
    }
  }
}

ssize_t Endpoint::postSend(Op& op, const void* buf, size_t len, void* desc, fi_addr_t to, uint64_t tag) {
  ssize_t rc = fi_tsend(ep_.get(), buf, len, desc, to, tag, &op.ctx);
  if (rc == 0) op.posted = true;
  return rc;
}

ssize_t Endpoint::postRecv(Op& op, void* buf, size_t len, void* desc, uint64_t tag) {
  ssize_t rc = fi_trecv(ep_.get(), buf, len, desc, FI_ADDR_UNSPEC, tag, 0, &op.ctx);
  if (rc == 0) op.posted = true;
  return rc;
}

void Endpoint::cancel(Op& op) {
  if (op.posted) fi_cancel(&ep_->fid, &op.ctx);  // a receive already matched just completes
}

ncclResult_t Endpoint::registerMemory(void* buf, size_t len, FidPtr<fid_mr>* mr, void** desc) {
  const Device& d = device();
  fid_mr* m = nullptr;
  int rc =
      fi_mr_reg(domain_->fid(), buf, len, FI_SEND | FI_RECV, 0, d.mrProvKey ? 0 : domain_->nextMrKey(), 0, &m, nullptr);
  if (rc) {
    OFI_WARN(
        "cannot register %zu bytes at %p with %s on %s: %s; if the provider pins memory, raise the "
        "locked-memory limit (ulimit -l)",
        len, buf, d.provider.c_str(), d.name.c_str(), fiError(rc).c_str());
    return ncclSystemError;
  }
  mr->reset(m);
  if (d.mrEndpoint) {
    if ((rc = fi_mr_bind(m, &ep_->fid, 0)) || (rc = fi_mr_enable(m))) {
      OFI_WARN("cannot bind a registration to the endpoint on %s: %s", d.name.c_str(), fiError(rc).c_str());
      mr->reset();
      return ncclSystemError;
    }
  }
  *desc = fi_mr_desc(m);
  return ncclSuccess;
}

std::string Endpoint::describe(const fi_cq_err_entry& e) const {
  std::string s = fi_strerror(e.err);
  char buf[256] = {};
  const char* prov = fi_cq_strerror(cq_.get(), e.prov_errno, e.err_data, buf, sizeof buf);
  if (prov && *prov && strcmp(prov, s.c_str()) != 0) s += std::string(" (provider: ") + prov + ")";
  if (e.err == FI_ETRUNC && e.olen > 0) s += ", " + std::to_string(e.olen) + " bytes more than the buffer held";
  return s;
}

void Endpoint::postKeepaliveRecvs() {
  for (Op& op : keepalive_) {
    if (op.posted) continue;
    if (postRecv(op, nullptr, 0, nullptr, tags_.control(Control::Keepalive, 0)) != 0) break;  // next progress
  }
}

void Endpoint::complete(Op& op, size_t len, const fi_cq_err_entry* err) {
  op.posted = false;
  if (op.owner) {
    op.owner->complete(op, len, err);
    return;
  }
  // A peer's keepalive probe (or a stray message on its tag): nothing to do but listen again.
  if (err && err->err != FI_ECANCELED) OFI_TRACE("keepalive receive: %s", describe(*err).c_str());
}

void Endpoint::failAll(const std::string& what) {
  for (Comm* c : live_) c->fail(ncclSystemError, what);
}

ncclResult_t Endpoint::progress() {
  if (failed_) return ncclSystemError;
  fi_cq_tagged_entry entries[kCqBatch];
  for (int round = 0; round < kCqRounds; round++) {
    ssize_t n = fi_cq_read(cq_.get(), entries, kCqBatch);
    if (n == -FI_EAGAIN) break;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err = {};
      if (fi_cq_readerr(cq_.get(), &err, 0) != 1) continue;
      if (err.err < 0) err.err = -err.err;  // shm reports -FI_ETRUNC where the others say FI_ETRUNC
      if (err.op_context)
        complete(*static_cast<Op*>(err.op_context), err.len, &err);
      else
        OFI_WARN("device %s: the provider reported an error on no operation: %s", device().name.c_str(),
                 describe(err).c_str());
      continue;
    }
    if (n < 0) {
      failed_ = true;
      std::string what = "reading the completion queue of " + device().name + " failed: " + fiError(n) +
                         "; the endpoint is unusable, every connection on it has failed";
      OFI_WARN("%s", what.c_str());
      failAll(what);
      return ncclSystemError;
    }
    for (ssize_t i = 0; i < n; i++) complete(*static_cast<Op*>(entries[i].op_context), entries[i].len, nullptr);
    if (n < kCqBatch) break;
  }

  if (!retry_.empty()) {
    std::vector<Comm*> again(retry_.begin(), retry_.end());
    retry_.clear();
    for (Comm* c : again) c->retryPosts();  // puts itself back while something is still refused
  }
  postKeepaliveRecvs();
  if (keepaliveInterval_.count() > 0 && ++progressCalls_ % kClockEvery == 0) {
    Clock::time_point now = Clock::now();
    if (now >= nextKeepaliveScan_) {
      nextKeepaliveScan_ = now + keepaliveInterval_ / 4;
      for (Comm* c : live_) c->keepalive(now, keepaliveInterval_, peerTimeout_);
    }
  }
  for (auto it = zombies_.begin(); it != zombies_.end();) {
    if ((*it)->outstanding() > 0) {
      ++it;
      continue;
    }
    delete *it;
    it = zombies_.erase(it);
  }
  return ncclSuccess;
}

}  // namespace plexus::ofi
