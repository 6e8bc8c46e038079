// ncclNetPlugin_v10 (NCCL 2.26-2.27): v9 with a profiler callback at init (NetPlugin events under the steps'
// profiler handles), the communicator's config (traffic class) at each connect, and profiler handles on isend/irecv.
#include "plugin/net_adapt.h"
#include "profiler/profiler.h"

namespace plexus {

namespace {

struct V10 {
  using Table = ncclNet_v10_t;
  using Props = ncclNetProperties_v10_t;
  static constexpr int version = 10;
  static constexpr bool perCommInit = false;
  static ncclResult_t init(const Table* t, ncclDebugLogger_t logger) { return t->init(logger, profilerNetCallback); }
  static void widen(const Props& p, ncclNetProperties_v12_t* out) { netPropsWidenV9(p, out); }
  static ncclResult_t connect(const Table* t, ncclNetCommConfig_v12_t* config, int dev, void* handle,
                              void** sendComm) {
    ncclNetCommConfig_v10_t c{config->trafficClass};
    ncclNetDeviceHandle_v10_t* none = nullptr;
    return t->connect(dev, &c, handle, sendComm, &none);
  }
  static ncclResult_t accept(const Table* t, void* listenComm, void** recvComm) {
    ncclNetDeviceHandle_v10_t* none = nullptr;
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

std::unique_ptr<NetApi> netAdapt_v10(const void* table, std::string* why) { return netAdapt<V10>(table, why); }

}  // namespace plexus
