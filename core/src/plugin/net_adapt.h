// What the net adapters share (net_vN.cc): NetApi over a plugin's table of version V. Each net_vN.cc
// gives a Traits struct with what is particular to its version (how init, connect, accept, isend, irecv
// and regMr are called, and how its properties widen to v12's); NetAdapter<Traits> does the rest.
//
// Versions before v11 have one global init: the first context calls it, later ones share it (reference
// counted, as NCCL's adapters do), and each context only remembers its communicator's config.
#pragma once

#include <climits>
#include <cstring>
#include <mutex>
#include <string>

#include "plugin/net.h"

namespace plexus {

// The members every version must have; *why names those that are NULL.
template <typename Table>
bool netRequiredMembers(const Table* t, std::string* why) {
  const std::pair<const char*, bool> members[] = {
      {"init", !t->init},       {"devices", !t->devices},       {"getProperties", !t->getProperties},
      {"listen", !t->listen},   {"connect", !t->connect},       {"accept", !t->accept},
      {"regMr", !t->regMr},     {"deregMr", !t->deregMr},       {"isend", !t->isend},
      {"irecv", !t->irecv},     {"iflush", !t->iflush},         {"test", !t->test},
      {"closeSend", !t->closeSend}, {"closeRecv", !t->closeRecv}, {"closeListen", !t->closeListen}};
  why->clear();
  int n = 0;
  for (auto& [name, isNull] : members)
    if (isNull) *why += (n++ ? ", " : "") + std::string(name);
  if (n) *why += n > 1 ? " are NULL" : " is NULL";
  return n == 0;
}

// Fields of v12's properties that an older version does not have, set to NCCL's defaults.
inline void netPropsDefaults(int dev, ncclNetProperties_v12_t* p) {
  memset(p, 0, sizeof(*p));
  p->netDeviceType = NCCL_NET_DEVICE_HOST;
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = dev;
  p->maxP2pBytes = NCCL_MAX_NET_SIZE_BYTES;
  p->maxCollBytes = NCCL_MAX_NET_SIZE_BYTES;
  p->maxMultiRequestSize = 1;
  p->railId = NCCL_NET_ID_UNDEF;
  p->planeId = NCCL_NET_ID_UNDEF;
}

// The v6 fields, which every version has.
template <typename Props>
void netPropsWidenV6(const Props& in, ncclNetProperties_v12_t* out) {
  out->name = in.name;
  out->pciPath = in.pciPath;
  out->guid = in.guid;
  out->ptrSupport = in.ptrSupport;
  out->speed = in.speed;
  out->port = in.port;
  out->latency = in.latency;
  out->maxComms = in.maxComms;
  out->maxRecvs = in.maxRecvs;
}

// The v9 fields (v9..v11 share them): flush, virtual devices (at most 4), transfer limits.
template <typename Props>
void netPropsWidenV9(const Props& in, ncclNetProperties_v12_t* out) {
  netPropsWidenV6(in, out);
  out->regIsGlobal = in.regIsGlobal;
  out->forceFlush = in.forceFlush;
  out->netDeviceType = in.netDeviceType;
  out->netDeviceVersion = in.netDeviceVersion;
  out->vProps.ndevs = in.vProps.ndevs;
  for (int i = 0; i < NCCL_NET_MAX_DEVS_PER_NIC_V9; i++) out->vProps.devs[i] = in.vProps.devs[i];
  out->maxP2pBytes = in.maxP2pBytes;
  out->maxCollBytes = in.maxCollBytes;
}

// Receives of int-size plugins (v6..v8): the sizes narrowed, at most this many buffers.
constexpr int kNetMaxRecvsAdapted = 64;

inline bool netNarrowSizes(int n, const size_t* sizes, int* out) {
  if (n < 0 || n > kNetMaxRecvsAdapted) return false;
  for (int i = 0; i < n; i++) {
    if (sizes[i] > (size_t)INT_MAX) return false;
    out[i] = (int)sizes[i];
  }
  return true;
}

template <typename Traits>
class NetAdapter final : public NetApi {
  using Table = typename Traits::Table;

 public:
  explicit NetAdapter(const Table* t) : t_(t) {}

  ncclResult_t init(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config, ncclDebugLogger_t logger) override {
    if constexpr (Traits::perCommInit) {
      return Traits::init(t_, ctx, commId, config, logger);
    } else {
      std::lock_guard<std::mutex> lock(mutex_);
      if (refs_ == 0) {
        ncclResult_t r = Traits::init(t_, logger);
        if (r != ncclSuccess) return r;
      }
      refs_++;
      *ctx = new Context{config ? *config : ncclNetCommConfig_v12_t{NCCL_NET_TRAFFIC_CLASS_UNDEF}};
      return ncclSuccess;
    }
  }
  ncclResult_t finalize(void* ctx) override {
    if constexpr (Traits::perCommInit) {
      return t_->finalize ? t_->finalize(ctx) : ncclSuccess;
    } else {
      std::lock_guard<std::mutex> lock(mutex_);
      delete (Context*)ctx;
      if (refs_ > 0) refs_--;
      return ncclSuccess;  // the plugin has no finalize; it stays initialised for the process
    }
  }
  ncclResult_t devices(int* ndev) override { return t_->devices(ndev); }
  ncclResult_t getProperties(int dev, ncclNetProperties_v12_t* props) override {
    typename Traits::Props p;
    memset(&p, 0, sizeof(p));
    ncclResult_t r = t_->getProperties(dev, &p);
    if (r != ncclSuccess) return r;
    netPropsDefaults(dev, props);
    Traits::widen(p, props);
    return ncclSuccess;
  }
  ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) override {
    if constexpr (Traits::perCommInit) return t_->listen(ctx, dev, handle, listenComm);
    else return t_->listen(dev, handle, listenComm);
  }
  ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm) override {
    if constexpr (Traits::perCommInit) {
      return Traits::connect(t_, ctx, dev, handle, sendComm);
    } else {
      return Traits::connect(t_, &((Context*)ctx)->config, dev, handle, sendComm);
    }
  }
  ncclResult_t accept(void* listenComm, void** recvComm) override { return Traits::accept(t_, listenComm, recvComm); }
  ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) override {
    return Traits::regMr(t_, comm, data, size, type, mhandle);
  }
  ncclResult_t deregMr(void* comm, void* mhandle) override { return t_->deregMr(comm, mhandle); }
  ncclResult_t regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                           void** mhandle) override {
    if (!t_->regMrDmaBuf) return ncclInvalidUsage;
    return t_->regMrDmaBuf(comm, data, size, type, offset, fd, mhandle);
  }
  ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                     void** request) override {
    return Traits::isend(t_, sendComm, data, size, tag, mhandle, phandle, request);
  }
  ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                     void** request) override {
    // The optional-completion hint is v11's; older plugins expect *request to start NULL (NCCL's adapters).
    if constexpr (!Traits::perCommInit) *request = nullptr;
    return Traits::irecv(t_, recvComm, n, data, sizes, tags, mhandles, phandles, request);
  }
  ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) override {
    return t_->iflush(recvComm, n, data, sizes, mhandles, request);
  }
  ncclResult_t test(void* request, int* done, int* sizes) override { return t_->test(request, done, sizes); }
  ncclResult_t closeSend(void* c) override { return t_->closeSend(c); }
  ncclResult_t closeRecv(void* c) override { return t_->closeRecv(c); }
  ncclResult_t closeListen(void* c) override { return t_->closeListen(c); }
  bool hasIrecvConsumed() const override {
    if constexpr (Traits::version >= 7) return t_->irecvConsumed != nullptr;
    else return false;
  }
  ncclResult_t irecvConsumed(void* recvComm, int n, void* request) override {
    if constexpr (Traits::version >= 7) return t_->irecvConsumed ? t_->irecvConsumed(recvComm, n, request) : ncclSuccess;
    else return ncclSuccess;
  }

 private:
  struct Context {
    ncclNetCommConfig_v12_t config;
  };
  const Table* t_;
  std::mutex mutex_;
  int refs_ = 0;
};

template <typename Traits>
std::unique_ptr<NetApi> netAdapt(const void* table, std::string* why) {
  auto* t = (const typename Traits::Table*)table;
  if (!netRequiredMembers(t, why)) return nullptr;
  return std::make_unique<NetAdapter<Traits>>(t);
}

}  // namespace plexus
