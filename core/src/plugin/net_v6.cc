// ncclNetPlugin_v6 (NCCL 2.13-2.18): one global init, int sizes, no device handles on connect/accept,
// no getDeviceMr or irecvConsumed.
#include "plugin/net_adapt.h"

namespace plexus {

namespace {

struct V6 {
  using Table = ncclNet_v6_t;
  using Props = ncclNetProperties_v6_t;
  static constexpr int version = 6;
  static constexpr bool perCommInit = false;
  static ncclResult_t init(const Table* t, ncclDebugLogger_t logger) { return t->init(logger); }
  static void widen(const Props& p, ncclNetProperties_v12_t* out) {
    netPropsWidenV6(p, out);
    out->maxP2pBytes = out->maxCollBytes = MAX_NET_SIZE;
  }
  static ncclResult_t connect(const Table* t, ncclNetCommConfig_v12_t*, int dev, void* handle, void** sendComm) {
    return t->connect(dev, handle, sendComm);
  }
  static ncclResult_t accept(const Table* t, void* listenComm, void** recvComm) {
    return t->accept(listenComm, recvComm);
  }
  static ncclResult_t regMr(const Table* t, void* comm, void* data, size_t size, int type, void** mhandle) {
    if (size > (size_t)INT_MAX) return ncclInvalidArgument;
    return t->regMr(comm, data, (int)size, type, mhandle);
  }
  static ncclResult_t isend(const Table* t, void* comm, void* data, size_t size, int tag, void* mhandle,
                            void* /* phandle: v10+ */, void** request) {
    if (size > (size_t)INT_MAX) return ncclInvalidArgument;
    return t->isend(comm, data, (int)size, tag, mhandle, request);
  }
  static ncclResult_t irecv(const Table* t, void* comm, int n, void** data, size_t* sizes, int* tags,
                            void** mhandles, void** /* phandles */, void** request) {
    int s[kNetMaxRecvsAdapted];
    if (!netNarrowSizes(n, sizes, s)) return ncclInvalidArgument;
    return t->irecv(comm, n, data, s, tags, mhandles, request);
  }
};

}  // namespace

std::unique_ptr<NetApi> netAdapt_v6(const void* table, std::string* why) { return netAdapt<V6>(table, why); }

}  // namespace plexus
