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
 *      kernels use (buffers, head, tail, connFifo: see device_v1.h). A connect that must wait for the
 *      peer (a net plugin's non-blocking connect/accept) returns ncclInProgress and is called again;
 *      the core polls every connection of a round in turn, so the two sides never wait on each other;
 *   4. after every connection of a round is connected on both sides, connected() is called, e.g.
 *      to remove names that let the memory be found.
 * A transport whose data is moved by a proxy (the net transport) gives proxyProgress: the core's one
 * proxy thread per process calls it for every connection of that transport while operations run and
 * until the connection reports nothing left to finish.
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
  uint64_t machineHash; /* equal for ranks of one machine, whatever NCCL_HOSTID says (they share its cores) */
} plexusPeerInfo_v1_t;

typedef struct plexusConnectInfo_v1 {
  char data[PLEXUS_CONNECT_INFO_BYTES];
} plexusConnectInfo_v1_t;

/* What a transport is told of a communicator (commInit). */
typedef struct plexusTransportComm_v1 {
  uint64_t commHash;
  int rank;
  int nRanks;
  int localRank;
  int nLocalRanks;
  const char* netName;   /* NCCL_NET / ncclConfig_t.netName: the net plugin wanted by name; NULL: any */
  int trafficClass;      /* ncclConfig_t.trafficClass, or -1 */
  int pad0;
  const char* netPlugin; /* NCCL_NET_PLUGIN, or the configuration's plugins.net; NULL: the default */
} plexusTransportComm_v1_t;

typedef struct plexusTransportSetup_v1 {
  const plexusPeerInfo_v1_t* self;
  const plexusPeerInfo_v1_t* peer;
  int channelId;
  int connIndex;
  int buffSizes[PLEXUS_NUM_PROTOCOLS]; /* bytes per protocol; 0: protocol unused */
  int pad0;
  void* commCtx; /* what commInit made for this communicator; NULL without commInit */
} plexusTransportSetup_v1_t;

/* What the core knows of a point-to-point buffer: it lies in ncclMemAlloc memory registered with the communicator,
 * which the owning process (pid) exposes as file descriptor fd; the buffer starts offset bytes into it; serial names
 * the allocation (descriptors are reused). */
typedef struct plexusShareable_v1 {
  int64_t fd;
  uint64_t pid;
  uint64_t offset;
  uint64_t serial;
} plexusShareable_v1_t;

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
  /* Optional: a proxy-driven transport moves one connection's data here. *idle = 1 when it moved
   * nothing and has nothing it must finish on its own (data a kernel handed over and the network has
   * not taken yet); 0 otherwise. An error ends the connection: error (errorLen bytes) says why, naming
   * the peer and what failed, and the communicator's operations fail with it. */
  ncclResult_t (*proxyProgress)(void* resources, int* idle, char* error, int errorLen);
  ncclResult_t (*finalize)(void* ctx);
  /* Optional: per-communicator state (*commCtx reaches every setup of that communicator), made at
   * init and ended after its last connection is freed. */
  ncclResult_t (*commInit)(void* ctx, const plexusTransportComm_v1_t* comm, void** commCtx);
  ncclResult_t (*commFinalize)(void* commCtx);
  /* Optional, read only when structSize covers them; host backend: zero-copy point-to-point beyond the connection's
   * address space (device_v1.h's plexusP2pHostOps_v1_t reaches them). p2pDescribe, on the receiving side, fills *x
   * for a message of bytes at buff (shareable: buff in registered ncclMemAlloc memory, else NULL); kind
   * PLEXUS_XCHG_SLOTS where this transport cannot. p2pWrite, on the sending side, writes bytes from src where x
   * says; an error means it cannot (for this message and the next ones: the transport stops offering it). */
  ncclResult_t (*p2pDescribe)(void* resources, void* buff, size_t bytes, const plexusShareable_v1_t* shareable,
                              plexusPtrExchange_v1_t* x);
  ncclResult_t (*p2pWrite)(void* resources, const plexusPtrExchange_v1_t* x, const void* src, size_t bytes);
} plexusTransport_v1_t;

/* The table's size before the optional members that came later: what structSize must reach at least. */
#define PLEXUS_TRANSPORT_V1_BASE_SIZE 120

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(plexusPeerInfo_v1_t) == 48, "plexusPeerInfo_v1_t layout");
static_assert(sizeof(plexusConnectInfo_v1_t) == 256, "plexusConnectInfo_v1_t layout");
static_assert(sizeof(plexusTransportComm_v1_t) == 48, "plexusTransportComm_v1_t layout");
static_assert(sizeof(plexusTransportSetup_v1_t) == 48, "plexusTransportSetup_v1_t layout");
static_assert(offsetof(plexusTransport_v1_t, p2pDescribe) == PLEXUS_TRANSPORT_V1_BASE_SIZE, "plexusTransport_v1_t layout");
static_assert(sizeof(plexusTransport_v1_t) == 136, "plexusTransport_v1_t layout");
static_assert(sizeof(plexusShareable_v1_t) == 32, "plexusShareable_v1_t layout");
#endif

#endif /* PLEXUS_TRANSPORT_V1_H_ */
