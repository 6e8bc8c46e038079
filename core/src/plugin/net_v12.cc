// ncclNetPlugin_v12 (NCCL 2.30, the newest): a context per communicator (init, listen and connect
// take it; finalize, optional, ends it).
#include "plugin/net_adapt.h"
#include "profiler/profiler.h"

namespace plexus {

namespace {

struct V12 {
  using Table = ncclNet_v12_t;
  using Props = ncclNetProperties_v12_t;
  static constexpr int version = 12;
  static constexpr bool perCommInit = true;
  static ncclResult_t init(const Table* t, void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config,
                           ncclDebugLogger_t logger) {
    ncclNetCommConfig_v12_t c{config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF};
    return t->init(ctx, commId, &c, logger, profilerNetCallback);
  }
  static void widen(const Props& p, ncclNetProperties_v12_t* out) {
    *out = p;
  }
  static ncclResult_t connect(const Table* t, void* ctx, int dev, void* handle, void** sendComm) {
    ncclNetDeviceHandle_v12_t* none = nullptr;
    return t->connect(ctx, dev, handle, sendComm, &none);
  }
  static ncclResult_t accept(const Table* t, void* listenComm, void** recvComm) {
    ncclNetDeviceHandle_v12_t* none = nullptr;
    return t->accept(listenComm, recvComm, &none);
  }
  static ncclResult_t regMr(const Table* t, void* comm, void* data, size_t size, int type, void** mhandle) {
    return t->regMr(comm, data, size, type, mhandle);
  }
  static ncclResult_t isend(const Table* t, void* comm, void* data, size_t size, int tag, void* mhandle,
                            void* phandle, void** request) {
    return t->isend(comm, data, size, tag, mhandle, phandle, request);
  }
  static ncclResult_t irecv(const Table* t, void* comm, int n, void** data, size_t* sizes, int* tags,
                            void** mhandles, void** phandles, void** request) {
    return t->irecv(comm, n, data, sizes, tags, mhandles, phandles, request);
  }
};

}  // namespace

std::unique_ptr<NetApi> netAdapt_v12(const void* table, std::string* why) { return netAdapt<V12>(table, why); }

}  // namespace plexus
