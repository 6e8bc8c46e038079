// p2p-nvlink: connections between ranks of one node through memory the peer maps directly.
// Host backend: the receiver's slots, tail and connFifo live in its memory and the sender writes
// them; the sender's head lives in its memory and the receiver writes it (NCCL's P2P write mode).
// Point-to-point may skip the slots: ranks of one process hand each other addresses
// (PLEXUS_CONN_P2P_SAME_SPACE), ranks of other processes on this machine a registered allocation or
// a process_vm_writev destination (p2pDescribe / p2pWrite, zero_copy.h).
// CUDA backend: the same ownership in CUDA memory (cuda_conn.h); the driver is loaded by the first CUDA
// connection's setup, so the plugin loads and serves the host backend where there is no CUDA.
#include <plexus/transport_v1.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "ctrl.h"
#include "cuda_conn.h"
#include "host_memory.h"
#include "log.h"
#include "zero_copy.h"

namespace p2p {

ncclDebugLogger_t logger = nullptr;

namespace {

struct RecvInfo {
  MemHandle mem;
  uint64_t buffOffset[PLEXUS_NUM_PROTOCOLS];
  int buffSizes[PLEXUS_NUM_PROTOCOLS];
};
struct SendInfo {
  MemHandle mem;
  uint64_t pidNs;  // the sender's pid namespace: whether the receiver may offer it a process_vm_writev address
};
static_assert(sizeof(RecvInfo) <= PLEXUS_CONNECT_INFO_BYTES, "connect info");

struct Resources {
  bool isSend;
  LocalMem local;
  MemHandle remoteHandle{};
  void* remote = nullptr;
  int buffSizes[PLEXUS_NUM_PROTOCOLS];
  plexusPeerInfo_v1_t self, peer;
  bool cmaOk = false;    // receiver: the sender may write this process's memory with process_vm_writev
  PeerMemory peerMemory;  // sender: the receiver's registered allocations mapped so far
  CudaConn* cuda = nullptr;  // a CUDA connection (cuda_conn.h): everything above is unused
};

bool sameProcess(const Resources* res) { return res->self.pidHash == res->peer.pidHash; }

// The slots an LL buffer of `bytes` holds, as plexusConnInfo_v1_t.llSlots takes them (a power of two from
// PLEXUS_STEPS; 0 below that: the kernel then uses PLEXUS_STEPS).
int llSlots(int bytes) {
  if (bytes < PLEXUS_LL_BUFF_BYTES) return 0;
  int n = PLEXUS_STEPS;
  while (n < (1 << 20) && (int64_t)2 * n * PLEXUS_LL_SLOT_BYTES <= bytes) n *= 2;
  return n;
}

// The pages of a receiver's segment that a connection's first operations use, touched by each process that maps it
// (touchPages): the control page, every LL slot (each small operation takes the next), and the start of each Simple
// slot (steps of up to kTouchSimpleBytes). Not the rest of the Simple slots: 1,024 pages at 5 us each would add 145 ms
// to the initialization of 4 ranks on the CI machine, and an operation large enough to reach them costs far more than
// its pages' first use.
constexpr size_t kTouchSimpleBytes = 16384;

void touchFirstPages(char* base, const RecvInfo& ri) {
  touchPages(base, kCtrlBytes);
  touchPages(base + ri.buffOffset[PLEXUS_PROTO_LL], (size_t)ri.buffSizes[PLEXUS_PROTO_LL]);
  const size_t stepSize = (size_t)ri.buffSizes[PLEXUS_PROTO_SIMPLE] / PLEXUS_STEPS;
  for (int s = 0; s < PLEXUS_STEPS; s++)
    touchPages(base + ri.buffOffset[PLEXUS_PROTO_SIMPLE] + s * stepSize, std::min(stepSize, kTouchSimpleBytes));
}

ncclResult_t init(void** ctx, ncclDebugLogger_t log) {
  logger = log;
  *ctx = nullptr;
  return ncclSuccess;
}

ncclResult_t canConnect(void*, const plexusPeerInfo_v1_t* self, const plexusPeerInfo_v1_t* peer, int* ret) {
  if (self->backend != peer->backend) {
    *ret = 0;
  } else if (self->backend == 1) {
    *ret = cudaCanConnect(self, peer);
  } else {
    *ret = self->backend == 0 && self->hostHash == peer->hostHash &&
           (self->pidHash == peer->pidHash || self->shmDev == peer->shmDev);
  }
  return ncclSuccess;
}

// A CUDA connection's resources: the CUDA part does the work.
ncclResult_t cudaSetupResources(bool isSend, const plexusTransportSetup_v1_t* setup, plexusConnectInfo_v1_t* info,
                                void** out) {
  auto* res = new (std::nothrow) Resources{};
  if (!res) return ncclSystemError;
  res->isSend = isSend;
  res->self = *setup->self;
  res->peer = *setup->peer;
  ncclResult_t r = cudaSetup(isSend, setup, info, &res->cuda);
  if (r != ncclSuccess) {
    delete res;
    return r;
  }
  *out = res;
  return ncclSuccess;
}

ncclResult_t recvSetup(void*, const plexusTransportSetup_v1_t* setup, plexusConnectInfo_v1_t* info, void** out) {
  if (setup->self->backend == 1) return cudaSetupResources(false, setup, info, out);
  auto* res = new (std::nothrow) Resources{};
  if (!res) return ncclSystemError;
  res->isSend = false;
  res->self = *setup->self;
  res->peer = *setup->peer;
  size_t total = kCtrlBytes;
  RecvInfo ri{};
  for (int p = 0; p < PLEXUS_NUM_PROTOCOLS; p++) {
    res->buffSizes[p] = ri.buffSizes[p] = setup->buffSizes[p];
    ri.buffOffset[p] = total;
    total += ((size_t)setup->buffSizes[p] + 4095) & ~(size_t)4095;
  }
  ncclResult_t r = memAlloc(total, setup->self->pidHash == setup->peer->pidHash, &res->local);
  if (r != ncclSuccess) {
    delete res;
    return r;
  }
  auto* ctrl = new (res->local.ptr) RecvCtrl{};
  for (auto& f : ctrl->connFifo) f.size = PLEXUS_CONNFIFO_FREE;
  ri.mem = res->local.handle;
  if (ri.mem.kind == MemKind::Shm) touchFirstPages((char*)res->local.ptr, ri);
  memset(info, 0, sizeof(*info));
  memcpy(info->data, &ri, sizeof(ri));
  *out = res;
  return ncclSuccess;
}

ncclResult_t sendSetup(void*, const plexusTransportSetup_v1_t* setup, plexusConnectInfo_v1_t* info, void** out) {
  if (setup->self->backend == 1) return cudaSetupResources(true, setup, info, out);
  auto* res = new (std::nothrow) Resources{};
  if (!res) return ncclSystemError;
  res->isSend = true;
  res->self = *setup->self;
  res->peer = *setup->peer;
  ncclResult_t r = memAlloc(sizeof(SendCtrl), setup->self->pidHash == setup->peer->pidHash, &res->local);
  if (r != ncclSuccess) {
    delete res;
    return r;
  }
  new (res->local.ptr) SendCtrl{};
  SendInfo si{res->local.handle, pidNamespace()};
  memset(info, 0, sizeof(*info));
  memcpy(info->data, &si, sizeof(si));
  *out = res;
  return ncclSuccess;
}

ncclResult_t sendConnect(void* resources, const plexusConnectInfo_v1_t* peerInfo, plexusConnInfo_v1_t* conn) {
  auto* res = (Resources*)resources;
  if (res->cuda) return cudaConnect(res->cuda, peerInfo, conn);
  RecvInfo ri;
  memcpy(&ri, peerInfo->data, sizeof(ri));
  for (int p = 0; p < PLEXUS_NUM_PROTOCOLS; p++)
    if (ri.buffSizes[p] < 0 || ri.buffOffset[p] + (uint64_t)ri.buffSizes[p] > ri.mem.size) {
      P2P_WARN("p2p-nvlink: the receiver's connection info is malformed (protocol %d: %d bytes at %llu of %llu)", p,
               ri.buffSizes[p], (unsigned long long)ri.buffOffset[p], (unsigned long long)ri.mem.size);
      return ncclInternalError;
    }
  ncclResult_t r = memMap(ri.mem, &res->remote);
  if (r != ncclSuccess) return r;
  res->remoteHandle = ri.mem;
  if (ri.mem.kind == MemKind::Shm) touchFirstPages((char*)res->remote, ri);
  auto* ctrl = (RecvCtrl*)res->remote;
  for (int p = 0; p < PLEXUS_NUM_PROTOCOLS; p++)
    conn->buffs[p] = ri.buffSizes[p] ? (char*)res->remote + ri.buffOffset[p] : nullptr;
  conn->tail = &ctrl->tail;
  conn->head = &((SendCtrl*)res->local.ptr)->head;
  conn->ptrExchange = &((SendCtrl*)res->local.ptr)->exchange;
  conn->connFifo = nullptr;  // direct peers need no proxy, hence no per-slot sizes
  conn->stepSize = ri.buffSizes[PLEXUS_PROTO_SIMPLE] / PLEXUS_STEPS;
  conn->llSlots = llSlots(ri.buffSizes[PLEXUS_PROTO_LL]);
  conn->step = 0;
  conn->flags = sameProcess(res) ? PLEXUS_CONN_P2P_SAME_SPACE : 0;
  return ncclSuccess;
}

ncclResult_t recvConnect(void* resources, const plexusConnectInfo_v1_t* peerInfo, plexusConnInfo_v1_t* conn) {
  auto* res = (Resources*)resources;
  if (res->cuda) return cudaConnect(res->cuda, peerInfo, conn);
  SendInfo si;
  memcpy(&si, peerInfo->data, sizeof(si));
  if (si.mem.size < sizeof(SendCtrl)) {
    P2P_WARN("p2p-nvlink: the sender's connection info is malformed (%llu bytes)", (unsigned long long)si.mem.size);
    return ncclInternalError;
  }
  ncclResult_t r = memMap(si.mem, &res->remote);
  if (r != ncclSuccess) return r;
  res->remoteHandle = si.mem;
  if (si.mem.kind == MemKind::Shm) touchPages(res->remote, si.mem.size);
  auto* ctrl = (RecvCtrl*)res->local.ptr;
  size_t offset = kCtrlBytes;
  for (int p = 0; p < PLEXUS_NUM_PROTOCOLS; p++) {
    conn->buffs[p] = res->buffSizes[p] ? (char*)res->local.ptr + offset : nullptr;
    offset += ((size_t)res->buffSizes[p] + 4095) & ~(size_t)4095;
  }
  conn->tail = &ctrl->tail;
  conn->head = &((SendCtrl*)res->remote)->head;
  conn->ptrExchange = &((SendCtrl*)res->remote)->exchange;
  conn->connFifo = nullptr;
  conn->stepSize = res->buffSizes[PLEXUS_PROTO_SIMPLE] / PLEXUS_STEPS;
  conn->llSlots = llSlots(res->buffSizes[PLEXUS_PROTO_LL]);
  conn->step = 0;
  conn->flags = sameProcess(res) ? PLEXUS_CONN_P2P_SAME_SPACE : 0;
  // Pids mean the same only on one machine, in one pid namespace.
  const uint64_t ns = pidNamespace();
  res->cmaOk = !sameProcess(res) && cmaEnabled() && ns && si.pidNs == ns &&
               res->self.machineHash == res->peer.machineHash && res->self.pid != res->peer.pid;
  return ncclSuccess;
}

ncclResult_t connected(void* resources) {
  auto* res = (Resources*)resources;
  if (res->cuda) {
    cudaConnected(res->cuda);
    return ncclSuccess;
  }
  memUnlinkName(&res->local);
  return ncclSuccess;
}

ncclResult_t freeResources(void* resources) {
  auto* res = (Resources*)resources;
  if (!res) return ncclSuccess;
  if (res->cuda) {
    cudaFree(res->cuda);
    delete res;
    return ncclSuccess;
  }
  memUnmap(res->remoteHandle, res->remote);
  memFree(&res->local);
  delete res;
  return ncclSuccess;
}

ncclResult_t finalize(void*) { return ncclSuccess; }

// The receiver's side: registered memory first (no system call per message), else process_vm_writev.
ncclResult_t p2pDescribe(void* resources, void* buff, size_t bytes, const plexusShareable_v1_t* shareable,
                         plexusPtrExchange_v1_t* x) {
  auto* res = (Resources*)resources;
  x->kind = PLEXUS_XCHG_SLOTS;
  x->size = bytes;
  if (res->cuda) return ncclSuccess;  // the host backend's capability; CUDA kernels never ask
  if (shareable) {
    x->kind = PLEXUS_XCHG_MEMFD;
    x->pid = shareable->pid;
    x->fd = (uint64_t)shareable->fd;
    x->offset = shareable->offset;
    x->serial = shareable->serial;
  } else if (res->cmaOk && !((SendCtrl*)res->remote)->cmaRefused) {
    x->kind = PLEXUS_XCHG_CMA;
    x->pid = (uint64_t)res->self.pid;
    x->addr = (uint64_t)(uintptr_t)buff;
  }
  return ncclSuccess;
}

ncclResult_t p2pWrite(void* resources, const plexusPtrExchange_v1_t* x, const void* src, size_t bytes) {
  auto* res = (Resources*)resources;
  if (res->cuda) return ncclInvalidUsage;
  if (x->kind == PLEXUS_XCHG_MEMFD) {
    char* dst = res->peerMemory.destination(*x);
    if (!dst) return ncclSystemError;
    memcpy(dst, src, bytes);
    return ncclSuccess;
  }
  if (x->kind != PLEXUS_XCHG_CMA) return ncclInvalidArgument;
  if (cmaWrite(x->pid, x->addr, src, bytes)) return ncclSuccess;
  // Refused (ptrace rules, another user, a seccomp filter): neither side tries again on this connection.
  P2P_INFO("p2p-nvlink: process_vm_writev into pid %llu failed (%s); this connection's messages go through its slots "
           "from now on", (unsigned long long)x->pid, strerror(errno));
  ((SendCtrl*)res->local.ptr)->cmaRefused = 1;
  return ncclSystemError;
}

}  // namespace
}  // namespace p2p

extern "C" __attribute__((visibility("default"))) const plexusTransport_v1_t plexusTransportPlugin_v1 = {
    PLEXUS_TRANSPORT_ABI_VERSION,
    sizeof(plexusTransport_v1_t),
    "p2p-nvlink",
    p2p::init,
    p2p::canConnect,
    p2p::sendSetup,
    p2p::recvSetup,
    p2p::sendConnect,
    p2p::recvConnect,
    p2p::connected,
    p2p::freeResources,
    p2p::freeResources,
    nullptr,
    p2p::finalize,
    nullptr,
    nullptr,
    p2p::p2pDescribe,
    p2p::p2pWrite,
};
