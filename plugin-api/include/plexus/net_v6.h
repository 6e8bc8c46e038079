/*
 * NCCL net plugin ABI v6 (NCCL 2.13-2.18): symbol "ncclNetPlugin_v6", type ncclNet_v6_t. Byte for byte
 * NCCL's src/include/plugin/net/net_v6.h. Rules of use: net_common.h. C99.
 */
#ifndef PLEXUS_NET_V6_H_
#define PLEXUS_NET_V6_H_

#include "net_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  char* name;      /* used mostly for logging */
  char* pciPath;   /* the /sys PCI device directory; NULL for a virtual NIC */
  uint64_t guid;   /* NICs with the same guid are one port */
  int ptrSupport;  /* NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF */
  int speed;       /* Mbps */
  int port;
  float latency;   /* us; 0: the runtime's default */
  int maxComms;
  int maxRecvs;    /* buffers one multi-receive may take */
} ncclNetProperties_v6_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v6_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm);
  ncclResult_t (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
} ncclNet_v6_t;

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(ncclNetProperties_v6_t) == 48, "ncclNetProperties_v6_t layout");
static_assert(sizeof(ncclNet_v6_t) == 136, "ncclNet_v6_t layout");
#endif

#endif /* PLEXUS_NET_V6_H_ */
