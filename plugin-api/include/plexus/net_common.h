/*
 * NCCL net plugin ABI: what every version (net_v6.h .. net_v12.h) shares. Values and layouts are
 * NCCL's (2.30, src/include/plugin/nccl_net.h and nccl_device/net_device.h), so a plugin built against
 * NCCL's headers and one built against these agree bit for bit, and either loads into Plexus or NCCL.
 *
 * How a runtime uses a net plugin (NCCL's rules; plexus-net-check tests each):
 *   - connections are one-directional: listen() on the receiver gives a handle of at most
 *     NCCL_NET_HANDLE_MAXSIZE bytes (listenComm never NULL), carried to the sender out of band;
 *     connect() and accept() never block: they succeed with a NULL comm until the comm is ready;
 *   - isend()/irecv() may succeed with *request == NULL: nothing was posted, try again later;
 *   - sends and receives on one connection match in the order they were posted (tags only choose a
 *     buffer within one multi-receive of n > 1 buffers); a receive may be larger than its send;
 *   - test() reports done with the size(s) received; a request reported done is freed;
 *   - each comm handles NCCL_NET_MAX_REQUESTS requests in flight (times maxRecvs on the send side);
 *   - iflush() follows a receive into GPU memory when the device needs it (never on host memory).
 * C99.
 */
#ifndef PLEXUS_NET_COMMON_H_
#define PLEXUS_NET_COMMON_H_

#include "types.h"

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_MAX_NET_SIZE_BYTES (1 * 1024 * 1024 * 1024 * 1024L) /* 1 TiB: bound of maxP2pBytes/maxCollBytes */
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1 /* *request before irecv: the plugin may complete early */
#define NCCL_NET_MULTI_REQUEST 0x2            /* v11+ */
#define MAX_NET_SIZE (1024 * 1024 * 1024L)    /* 1 GiB: what pre-v9 plugins (int sizes) are given at most */
#define MAX_COLLNET_SIZE (512 * 1024 * 1024L)

#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

#define NCCL_NET_MAX_REQUESTS 32 /* per comm in flight */
#define NCCL_NET_MAX_REQUESTS_V6 8 /* what ABI v6 plugins (NCCL up to 2.18) were written for */
#define NCCL_NET_MAX_PLUGINS 16
#define NCCL_NET_MAX_DEVS_PER_NIC_V9 4
#define NCCL_NET_MAX_DEVS_PER_NIC_V10 4
#define NCCL_NET_MAX_DEVS_PER_NIC_V11 4
#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
#define NCCL_NET_TRAFFIC_CLASS_UNDEF -1
#define NCCL_NET_ID_UNDEF -1 /* v12 railId / planeId: none */
#define NCCL_NET_ATTR_UNDEF -1 /* v11+ ncclNetAttr_t fields: no hint */

/* Device offload (net_device.h). A host-only runtime accepts NCCL_NET_DEVICE_HOST alone. */
#define NCCL_NET_DEVICE_INVALID_VERSION 0x0
#define NCCL_NET_MTU_SIZE 4096
#define NCCL_NET_DEVICE_UNPACK_VERSION 0x7

typedef enum {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
  NCCL_NET_DEVICE_GIN_PROXY = 2,
  NCCL_NET_DEVICE_GIN_GDAKI = 3,
  NCCL_NET_DEVICE_GIN_GPI = 4
} ncclNetDeviceType;

typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_v7_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v8_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v9_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v10_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v11_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v12_t;

/* Profiler callback handed to init from v10 on (NCCL always passes one; what it does: profiler_common.h). */
enum {
  ncclProfilerNetEventStart = 0,
  ncclProfilerNetEventStop,
  ncclProfilerNetEventUpdate,
  ncclProfilerNetEventUpdateAndStop
};
typedef ncclResult_t (*ncclProfilerCallback_t)(void** eHandle, int type, void* pHandle, int64_t pluginId,
                                               void* extData);

#ifdef __cplusplus
static_assert(sizeof(ncclNetDeviceHandle_v7_t) == 32, "ncclNetDeviceHandle_v7_t layout");
#endif

#endif /* PLEXUS_NET_COMMON_H_ */
