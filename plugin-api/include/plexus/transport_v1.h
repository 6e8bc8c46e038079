/*
 * Plexus transport plugin ABI, version 1: for transports that are not NCCL net plugins (p2p-nvlink
 * today; GPU-initiated RDMA or CXL memory later). The core sets up every connector through this
 * interface alone.
 *
 * A connection is one direction between two ranks on one channel. Setting it up:
 *   1. each side calls its setup (sendSetup / recvSetup), which allocates local resources and fills
 *      an opaque plexusConnectInfo_v1_t;
 *   2. the core carries each side's info to the other side (bootstrap);
 *   3. each side calls its connect with the peer's info, filling the plexusConnInfo_v1_t its
 *      kernels use (buffers, head, tail, connFifo: see device_v1.h);
 *   4. after every connection of a round is connected on both sides, connected() is called, e.g.
 *      to remove names that let the memory be found.
 * Exported as the symbol PLEXUS_TRANSPORT_PLUGIN_SYMBOL. C99.
 */
#ifndef PLEXUS_TRANSPORT_V1_H_
#define PLEXUS_TRANSPORT_V1_H_

#include "device_v1.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLEXUS_TRANSPORT_ABI_VERSION 1
#define PLEXUS_TRANSPORT_PLUGIN_SYMBOL "plexusTransportPlugin_v1"
#define PLEXUS_CONNECT_INFO_BYTES 256

/* What a rank tells every other rank about itself at init. */
typedef struct plexusPeerInfo_v1 {
  int rank;
  int device;        /* host device or CUDA device ordinal */
  int backend;       /* 0 host, 1 cuda */
  int pid;
  uint64_t hostHash; /* equal for ranks of one node (NCCL_HOSTID overrides) */
  uint64_t pidHash;  /* equal for ranks of one process */
  uint64_t shmDev;   /* device number of /dev/shm: equal where shared memory is shared */
} plexusPeerInfo_v1_t;

typedef struct plexusConnectInfo_v1 {
  char data[PLEXUS_CONNECT_INFO_BYTES];
} plexusConnectInfo_v1_t;

typedef struct plexusTransportSetup_v1 {
  const plexusPeerInfo_v1_t* self;
  const plexusPeerInfo_v1_t* peer;
  int channelId;
  int connIndex;
  int buffSizes[PLEXUS_NUM_PROTOCOLS]; /* bytes per protocol; 0: protocol unused */
  int pad0;
} plexusTransportSetup_v1_t;

typedef struct plexusTransport_v1 {
  uint32_t abiVersion; /* PLEXUS_TRANSPORT_ABI_VERSION */
  uint32_t structSize; /* sizeof(plexusTransport_v1_t) as the plugin was built */
  const char* name;

  ncclResult_t (*init)(void** ctx, ncclDebugLogger_t logger);
  /* *ret = 1 when this transport can connect self and peer (e.g. same node, shared memory). */
  ncclResult_t (*canConnect)(void* ctx, const plexusPeerInfo_v1_t* self, const plexusPeerInfo_v1_t* peer, int* ret);
  ncclResult_t (*sendSetup)(void* ctx, const plexusTransportSetup_v1_t* setup, plexusConnectInfo_v1_t* info,
                            void** resources);
  ncclResult_t (*recvSetup)(void* ctx, const plexusTransportSetup_v1_t* setup, plexusConnectInfo_v1_t* info,
                            void** resources);
  ncclResult_t (*sendConnect)(void* resources, const plexusConnectInfo_v1_t* peerInfo, plexusConnInfo_v1_t* conn);
  ncclResult_t (*recvConnect)(void* resources, const plexusConnectInfo_v1_t* peerInfo, plexusConnInfo_v1_t* conn);
  ncclResult_t (*connected)(void* resources); /* optional */
  ncclResult_t (*sendFree)(void* resources);
  ncclResult_t (*recvFree)(void* resources);
  /* Optional: proxy-driven transports move data here; *idle = 1 when nothing was pending. */
  ncclResult_t (*proxyProgress)(void* resources, int* idle);
  ncclResult_t (*finalize)(void* ctx);
} plexusTransport_v1_t;

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(plexusPeerInfo_v1_t) == 40, "plexusPeerInfo_v1_t layout");
static_assert(sizeof(plexusConnectInfo_v1_t) == 256, "plexusConnectInfo_v1_t layout");
static_assert(sizeof(plexusTransportSetup_v1_t) == 40, "plexusTransportSetup_v1_t layout");
static_assert(sizeof(plexusTransport_v1_t) == 104, "plexusTransport_v1_t layout");
#endif

#endif /* PLEXUS_TRANSPORT_V1_H_ */
