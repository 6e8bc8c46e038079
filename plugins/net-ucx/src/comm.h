// net-ucx: the plugin's entry points at ncclNet_v12 semantics (see plexus/net_common.h for the rules).
//
// Connection: listen() opens a TCP socket on the device's address and writes {magic, nonce, address}
// into the handle; connect() reaches it without blocking, says hello with the nonce, and gets back the
// receiver's UCP worker address and a connection id; it creates a UCP endpoint to that worker, and the
// handshake ends with a synchronous zero-byte UCX message, acknowledged, so that UCX is wired up both ways.
// The socket stays open as the liveness signal of the connection.
// Data: UCP tagged messages. A tag is (connection id << 32 | NCCL tag): the receiver matches its
// connection only, in posting order; a single receive ignores the NCCL tag, a multi-receive picks its
// buffer by it.
#pragma once

#include <plexus/net.h>

namespace plexus::net_ucx {

constexpr int kMaxRecvs = 8;

// Read once per process: PLEXUS_UCX_* (or NCCL_UCX_*) knobs.
struct Knobs {
  double connectTimeoutS;  // UCX_CONNECT_TIMEOUT: a connect()/accept() handshake not done by then fails
  double closeTimeoutS;    // UCX_CLOSE_TIMEOUT: closeSend()/closeRecv() wait this long at most to flush
  bool registerMemory;     // UCX_REGISTER: regMr() maps memory with ucp_mem_map (1) or hands out a plain handle (0)
  bool peerErrorMode;      // UCX_ERROR_MODE=peer: endpoints in UCP_ERR_HANDLING_MODE_PEER (default none)
};
const Knobs& knobs();

ncclResult_t ctxCreate(uint64_t commId, void** ctx);
ncclResult_t ctxDestroy(void* ctx);
ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm);
ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v12_t** sendDevComm);
ncclResult_t accept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v12_t** recvDevComm);
ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t deregMr(void* comm, void* mhandle);
ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                   void** request);
ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
ncclResult_t test(void* request, int* done, int* sizes);
ncclResult_t closeSend(void* sendComm);
ncclResult_t closeRecv(void* recvComm);
ncclResult_t closeListen(void* listenComm);

}  // namespace plexus::net_ucx
