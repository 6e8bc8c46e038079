// net-ucx: an NCCL net plugin over UCX's UCP tag API. One implementation at ncclNet_v12 semantics,
// exported as ncclNetPlugin_v12 and, through plexus/net_export.h, as v11, v10, v9 and v8 (NCCL 2.20+).
#include <plexus/net.h>
#include <ucp/api/ucp.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "comm.h"
#include "devices.h"
#include "log.h"

namespace plexus::net_ucx {
namespace {

constexpr int kMaxComms = 65536;

ncclResult_t init(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config, ncclDebugLogger_t logger,
                  ncclProfilerCallback_t profiler) {
  (void)config, (void)profiler;  // one traffic class; no profiler events
  gLog.setLogger(logger);
  if (!ctx) {
    UCX_WARN("init(): ctx is NULL");
    return ncclInvalidArgument;
  }
  static std::once_flag once;
  std::call_once(once, [] {
    const char* tls = getenv("UCX_TLS");
    const Knobs& k = knobs();
    UCX_INFO(NCCL_INIT | NCCL_NET,
             "UCX %s: %zu device(s), UCX_TLS=%s; connect timeout %g s, close timeout %g s, registration %s, error "
             "mode %s",
             ucp_get_version_string(), devices().size(), tls ? tls : "(unset: all)", k.connectTimeoutS, k.closeTimeoutS,
             k.registerMemory ? "ucp_mem_map" : "left to UCX's cache", k.peerErrorMode ? "peer" : "none");
  });
  return ctxCreate(commId, ctx);
}

ncclResult_t finalize(void* ctx) { return ctxDestroy(ctx); }

ncclResult_t devicesCount(int* ndev) {
  if (!ndev) {
    UCX_WARN("devices(): ndev is NULL");
    return ncclInvalidArgument;
  }
  *ndev = static_cast<int>(devices().size());
  return ncclSuccess;
}

ncclResult_t getProperties(int dev, ncclNetProperties_v12_t* props) {
  const std::vector<Device>& devs = devices();
  if (!props || dev < 0 || dev >= static_cast<int>(devs.size())) {
    UCX_WARN("getProperties(): %s", !props ? "props is NULL" : "no such device (devices() tells how many)");
    return ncclInvalidArgument;
  }
  const Device& d = devs[dev];
  memset(props, 0, sizeof(*props));
  props->name = const_cast<char*>(d.name.c_str());
  props->pciPath = d.pciPath.empty() ? nullptr : const_cast<char*>(d.pciPath.c_str());
  props->guid = d.guid;
  props->ptrSupport = NCCL_PTR_HOST | (ucxSupportsCuda() ? NCCL_PTR_CUDA : 0);
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  props->speed = d.speedMbps;
  props->port = d.port;
  props->latency = d.latencyUs;
  props->maxComms = kMaxComms;
  props->maxRecvs = kMaxRecvs;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  // test() reports sizes as int: keep every transfer well below 2 GiB.
  props->maxP2pBytes = MAX_NET_SIZE;
  props->maxCollBytes = MAX_NET_SIZE;
  props->maxMultiRequestSize = 1;
  props->railId = NCCL_NET_ID_UNDEF;
  props->planeId = NCCL_NET_ID_UNDEF;
  return ncclSuccess;
}

}  // namespace
}  // namespace plexus::net_ucx

extern "C" {
__attribute__((visibility("default"))) extern const ncclNet_v12_t ncclNetPlugin_v12;
}

namespace pu = plexus::net_ucx;
// One member a line, in the ABI's order.
// clang-format off
const ncclNet_v12_t ncclNetPlugin_v12 = {
    "UCX",
    pu::init,
    pu::devicesCount,
    pu::getProperties,
    pu::listen,
    pu::connect,
    pu::accept,
    pu::regMr,
    nullptr,  // regMrDmaBuf: no DMA-BUF (ptrSupport has no NCCL_PTR_DMABUF)
    pu::deregMr,
    pu::isend,
    pu::irecv,
    pu::iflush,
    pu::test,
    pu::closeSend,
    pu::closeRecv,
    pu::closeListen,
    nullptr,  // getDeviceMr: host device
    nullptr,  // irecvConsumed: host device
    nullptr,  // makeVDevice: one device per NIC
    pu::finalize,
    nullptr,  // setNetAttr: no use for the hints
};
// clang-format on

#define PLEXUS_NET_EXPORT_IMPL ncclNetPlugin_v12
#include <plexus/net_export.h>
PLEXUS_NET_EXPORT_V11
PLEXUS_NET_EXPORT_V10
PLEXUS_NET_EXPORT_V9
PLEXUS_NET_EXPORT_V8
