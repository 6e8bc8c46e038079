// ncclNetPlugin_v9 (NCCL 2.24-2.25): v8 with size_t send and receive sizes, forceFlush, virtual
// devices and maxP2pBytes/maxCollBytes.
#include "plugin/net_adapt.h"

namespace plexus {

namespace {

struct V9 {
  using Table = ncclNet_v9_t;
  using Props = ncclNetProperties_v9_t;
  static constexpr int version = 9;
  static constexpr bool perCommInit = false;
  static ncclResult_t init(const Table* t, ncclDebugLogger_t logger) { return t->init(logger); }
  static void widen(const Props& p, ncclNetProperties_v12_t* out) { netPropsWidenV9(p, out); }
  static ncclResult_t connect(const Table* t, ncclNetCommConfig_v12_t*, int dev, void* handle, void** sendComm) {
    ncclNetDeviceHandle_v9_t* none = nullptr;
    return t->connect(dev, handle, sendComm, &none);
  }
  static ncclResult_t accept(const Table* t, void* listenComm, void** recvComm) {
    ncclNetDeviceHandle_v9_t* none = nullptr;
    return t->accept(listenComm, recvComm, &none);
  }
  static ncclResult_t regMr(const Table* t, void* comm, void* data, size_t size, int type, void** mhandle) {
    return t->regMr(comm, data, size, type, mhandle);
  }
  static ncclResult_t isend(const Table* t, void* comm, void* data, size_t size, int tag, void* mhandle,
                            void* /* phandle: v10+ */, void** request) {
    return t->isend(comm, data, size, tag, mhandle, request);
  }
  static ncclResult_t irecv(const Table* t, void* comm, int n, void** data, size_t* sizes, int* tags,
                            void** mhandles, void** /* phandles */, void** request) {
    return t->irecv(comm, n, data, sizes, tags, mhandles, request);
  }
};

}  // namespace

std::unique_ptr<NetApi> netAdapt_v9(const void* table, std::string* why) { return netAdapt<V9>(table, why); }

}  // namespace plexus
