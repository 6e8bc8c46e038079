#include "cuda_conn.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "ctrl.h"
#include "fd_mailbox.h"
#include "log.h"

namespace p2p {

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kHandleMagic = 0x30485850;   // "PXH0": phase 0, the memory's descriptor
constexpr uint32_t kVerdictMagic = 0x31485850;  // "PXH1": phase 1, whether the peer's memory could be mapped
constexpr unsigned kPhaseHandle = 0, kPhaseVerdict = 1, kPhaseSwitch = 2;
constexpr uint32_t kMapped = 1, kNotMapped = 0, kMapFailed = 2;

struct HandleMsg {
  uint32_t magic;
  uint32_t kind;
  uint64_t size;
};
struct VerdictMsg {
  uint32_t magic;
  uint32_t verdict;  // kMapped, kNotMapped (send host memory instead), kMapFailed (give up)
};

uint64_t pidNamespaceId() {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

// How long a connect waits for the peer process: PLEXUS_P2P_CONNECT_TIMEOUT seconds, else the bootstrap's timeout
// plus 30 s (so that the core's own deadline, with its message, normally comes first).
double connectTimeout() {
  if (const char* v = getenv("PLEXUS_P2P_CONNECT_TIMEOUT"); v && atof(v) > 0) return atof(v);
  const char* b = getenv("PLEXUS_BOOTSTRAP_TIMEOUT");
  if (!b) b = getenv("NCCL_BOOTSTRAP_TIMEOUT");
  const double base = b && atof(b) > 0 ? atof(b) : 120;
  return base + 30;
}

bool validBusId(const char* id, size_t n) { return memchr(id, '\0', n) != nullptr; }

}  // namespace

struct CudaConn {
  bool isSend = false;
  plexusPeerInfo_v1_t self{}, peer{};
  int channel = 0;
  int buffSizes[PLEXUS_NUM_PROTOCOLS] = {};
  bool sameProcess = false, readMode = false, p2pDisabled = false;
  bool direct = false;  // same process: the two devices reach each other's memory
  CudaDevice dev;
  char who[200] = {};
  CudaLocal local;
  uint64_t offset[PLEXUS_NUM_PROTOCOLS] = {};  // of this side's buffers in local
  size_t total = 0;
  CudaInfo peerInfo{};
  bool havePeer = false;
  CudaRemote remote;
  FdMailbox* box = nullptr;
  Clock::time_point deadline;
  // Across processes (see cuda_conn.h).
  int exportFd = -1;
  bool sentHandle = false, tookHandle = false, sentVerdict = false, tookVerdict = false;
  bool needSwitch = false, sentSwitch = false, mappedPeer = false;
  uint32_t verdict = kNotMapped;
};

void cudaInfoEncode(const CudaInfo& info, plexusConnectInfo_v1_t* raw) {
  memset(raw, 0, sizeof(*raw));
  memcpy(raw->data, &info, sizeof(info));
}

bool cudaInfoDecode(const plexusConnectInfo_v1_t& raw, bool isSend, bool sameProcess,
                    const int buffSizes[PLEXUS_NUM_PROTOCOLS], bool readMode, CudaInfo* out, std::string* why) {
  CudaInfo in;
  memcpy(&in, raw.data, sizeof(in));
  const uint16_t role = isSend ? kCudaRoleRecv : kCudaRoleSend;
  if (in.magic != kCudaInfoMagic || in.version != kCudaInfoVersion) {
    *why = "it is not a CUDA connect info of version " + std::to_string(kCudaInfoVersion) +
           " (a peer of another backend or Plexus version?)";
    return false;
  }
  if (in.role != role) {
    *why = "it comes from the " + std::string(in.role == kCudaRoleSend ? "sending" : "receiving") +
           " side, as this one does";
    return false;
  }
  if (!validBusId(in.busId, sizeof(in.busId))) {
    *why = "its PCI bus id is not terminated";
    return false;
  }
  if (!cudaKindValid((uint32_t)in.mem.kind) || cudaKindSameProcess(in.mem.kind) != sameProcess) {
    *why = "its memory kind " + std::to_string((unsigned)in.mem.kind) + " does not suit a peer of " +
           (sameProcess ? "this process" : "another process");
    return false;
  }
  if (!sameProcess && !in.mailbox) {
    *why = "it names no mailbox";
    return false;
  }
  if (!in.mem.id || (in.mem.id & 3)) {
    *why = "its allocation id is malformed";
    return false;
  }
  if (in.mem.size < kCtrlBytes || in.mem.size > ((uint64_t)1 << 40)) {
    *why = "its memory size " + std::to_string(in.mem.size) + " is out of range";
    return false;
  }
  if (in.mem.kind == CudaKind::Shm &&
      (in.mem.u.shmName[0] != '/' || !memchr(in.mem.u.shmName, '\0', sizeof(in.mem.u.shmName)))) {
    *why = "its shared memory name is malformed";
    return false;
  }
  if (((in.flags & kCudaInfoRead) != 0) != readMode) {
    *why = std::string("P2P read mode is ") + (readMode ? "on" : "off") + " on this rank and " +
           (readMode ? "off" : "on") + " on the peer: set PLEXUS_P2P_READ (NCCL_P2P_READ_ENABLE) alike on every rank";
    return false;
  }
  for (int p = 0; p < PLEXUS_NUM_PROTOCOLS; p++) {
    const bool held = cudaHolds(!isSend, readMode, p) && buffSizes[p] > 0;
    if (!held && in.buffSizes[p] != 0) {
      *why = "it holds a buffer of protocol " + std::to_string(p) + " that this side holds or nobody uses";
      return false;
    }
    if (held && (in.buffSizes[p] != buffSizes[p] || in.buffOffset[p] < kCtrlBytes || in.buffOffset[p] > in.mem.size ||
                 (uint64_t)in.buffSizes[p] > in.mem.size - in.buffOffset[p])) {
      *why = "protocol " + std::to_string(p) + "'s buffer (" + std::to_string(in.buffSizes[p]) + " bytes at " +
             std::to_string(in.buffOffset[p]) + " of " + std::to_string(in.mem.size) + ") does not match " +
             std::to_string(buffSizes[p]) + " bytes";
      return false;
    }
  }
  *out = in;
  return true;
}

bool cudaCanConnect(const plexusPeerInfo_v1_t* self, const plexusPeerInfo_v1_t* peer) {
  if (self->hostHash != peer->hostHash || self->machineHash != peer->machineHash) return false;
  return self->pidHash == peer->pidHash || self->shmDev == peer->shmDev;
}

namespace {

void describe(CudaConn* c) {
  snprintf(c->who, sizeof(c->who),
           "rank %d (pid %d, CUDA device %d%s%s) %s rank %d (pid %d, CUDA device %d) on channel %d", c->self.rank,
           c->self.pid, c->self.device, c->dev.busId[0] ? " " : "", c->dev.busId,
           c->isSend ? "sending to" : "receiving from", c->peer.rank, c->peer.pid, c->peer.device, c->channel);
}

ncclResult_t initCtrl(CudaConn* c) {
  if (c->isSend) {
    SendCtrl s{};
    return cudaMemWrite(c->dev, c->local, 0, &s, sizeof(s), c->who);
  }
  RecvCtrl r{};
  for (auto& f : r.connFifo) f.size = PLEXUS_CONNFIFO_FREE;
  return cudaMemWrite(c->dev, c->local, 0, &r, sizeof(r), c->who);
}

ncclResult_t allocLocal(CudaConn* c, CudaPlace where) {
  if (ncclResult_t r = cudaMemAlloc(c->dev, c->total, where, c->who, &c->local); r != ncclSuccess) return r;
  if (ncclResult_t r = initCtrl(c); r != ncclSuccess) {
    cudaMemFree(&c->local);
    return r;
  }
  return ncclSuccess;
}

bool peerGone(const CudaConn* c) {
  if (c->sameProcess || !c->peerInfo.pidNs || c->peerInfo.pidNs != pidNamespaceId() || c->peer.pid <= 0) return false;
  return kill(c->peer.pid, 0) != 0 && errno == ESRCH;
}

// A step that waits on the peer: in progress, unless the peer is gone or the wait outlived its bound.
ncclResult_t waitFor(CudaConn* c, const char* what) {
  if (peerGone(c)) {
    P2P_WARN(
        "p2p-nvlink: %s: the peer process (pid %d) ended while connecting (waiting for %s); see that rank's "
        "output for why",
        c->who, c->peer.pid, what);
    return ncclRemoteError;
  }
  if (Clock::now() >= c->deadline) {
    P2P_WARN(
        "p2p-nvlink: %s: the peer did not send %s within %.0f s: it is stuck or ended; check that rank, or "
        "raise PLEXUS_P2P_CONNECT_TIMEOUT",
        c->who, what, connectTimeout());
    return ncclSystemError;
  }
  return ncclInProgress;
}

// Sends a phase's message; ncclInProgress while the peer's queue is full.
ncclResult_t sendPhase(CudaConn* c, unsigned phase, const void* payload, size_t size, int fd, const char* what) {
  std::string why;
  switch (c->box->send(c->peerInfo.mailbox, mailboxTag(c->local.handle.id, phase), payload, size, fd, &why)) {
    case FdMailbox::Status::Done:
      return ncclSuccess;
    case FdMailbox::Status::Pending:
      return waitFor(c, "room in its socket's queue");
    case FdMailbox::Status::Failed:
      break;
  }
  P2P_WARN("p2p-nvlink: %s: cannot send %s to the peer process: %s", c->who, what, why.c_str());
  return ncclRemoteError;
}

// Takes the peer's message of a phase: ncclSuccess with *m, ncclInProgress while it has not come.
ncclResult_t takePhase(CudaConn* c, unsigned phase, FdMailbox::Message* m, const char* what) {
  std::string why;
  switch (c->box->take(mailboxTag(c->peerInfo.mem.id, phase), m, &why)) {
    case FdMailbox::Status::Done:
      return ncclSuccess;
    case FdMailbox::Status::Pending:
      return waitFor(c, what);
    case FdMailbox::Status::Failed:
      break;
  }
  P2P_WARN("p2p-nvlink: %s: cannot receive %s from the peer process: %s", c->who, what, why.c_str());
  return ncclSystemError;
}

// Phase 1's decision: map the peer's memory where this GPU can reach it; kNotMapped asks the peer for host memory.
ncclResult_t mapPeerFirst(CudaConn* c, int fd) {
  const CudaInfo& pi = c->peerInfo;
  if (pi.mem.kind == CudaKind::Shm) {
    const ncclResult_t r = cudaMemMap(c->dev, pi.mem, -1, c->who, false, &c->remote);
    c->verdict = r == ncclSuccess ? kMapped : kMapFailed;
    c->mappedPeer = r == ncclSuccess;
    return ncclSuccess;
  }
  bool tryDirect = !c->p2pDisabled;
  if (tryDirect && strcasecmp(pi.busId, c->dev.busId) != 0) {
    const int other = cudaDeviceByBusId(c->dev, pi.busId);
    // A GPU this process cannot see cannot be asked; as NCCL, try (the mapping itself says whether it works).
    if (other >= 0) {
      bool ok = false;
      if (ncclResult_t r = cudaPeerAccessible(c->dev, c->dev.ordinal, other, c->who, &ok); r != ncclSuccess) return r;
      tryDirect = ok;
      if (!ok)
        P2P_INFO("p2p-nvlink: %s: GPUs %s and %s cannot access each other's memory; connecting through host memory",
                 c->who, c->dev.busId, pi.busId);
    }
  }
  if (tryDirect && cudaMemMap(c->dev, pi.mem, fd, c->who, true, &c->remote) == ncclSuccess) {
    c->verdict = kMapped;
    c->mappedPeer = true;
    return ncclSuccess;
  }
  if (tryDirect)
    P2P_INFO(
        "p2p-nvlink: %s: the peer's %s on GPU %s cannot be mapped on GPU %s; connecting through host memory "
        "(slower)",
        c->who, cudaKindName(pi.mem.kind), pi.busId, c->dev.busId);
  c->verdict = kNotMapped;
  return ncclSuccess;
}

// The peer cannot map this side's device memory: host memory (registered /dev/shm) replaces it.
ncclResult_t switchToHost(CudaConn* c) {
  if (c->local.handle.kind == CudaKind::Shm) {
    P2P_WARN("p2p-nvlink: %s: the peer could not map this rank's host memory; see the peer's log", c->who);
    return ncclRemoteError;
  }
  CudaLocal old = c->local;
  const uint64_t id = old.handle.id;
  c->local = CudaLocal{};
  if (ncclResult_t r = allocLocal(c, CudaPlace::OtherProcessHost); r != ncclSuccess) {
    c->local = old;
    return r;
  }
  c->local.handle.id = id;  // the peer knows the allocation under this id
  cudaMemFree(&old);
  P2P_INFO("p2p-nvlink: %s: the peer cannot map this GPU's memory; its connection memory is host memory now", c->who);
  return ncclSuccess;
}

ncclResult_t progressOtherProcess(CudaConn* c) {
  const CudaInfo& pi = c->peerInfo;
  if (!c->sentHandle) {
    if (c->local.handle.kind == CudaKind::Vmm && c->exportFd < 0) {
      if (ncclResult_t r = cudaMemExportFd(c->dev, c->local, c->who, &c->exportFd); r != ncclSuccess) return r;
    }
    const HandleMsg h{kHandleMagic, (uint32_t)c->local.handle.kind, c->local.handle.size};
    if (ncclResult_t r = sendPhase(c, kPhaseHandle, &h, sizeof(h), c->exportFd, "its memory's file descriptor");
        r != ncclSuccess)
      return r;
    if (c->exportFd >= 0) close(c->exportFd);
    c->exportFd = -1;
    c->sentHandle = true;
  }
  if (!c->tookHandle) {
    FdMailbox::Message m;
    if (ncclResult_t r = takePhase(c, kPhaseHandle, &m, "its memory's descriptor"); r != ncclSuccess) return r;
    HandleMsg h{};
    if (m.size == sizeof(h)) memcpy(&h, m.payload, sizeof(h));
    const bool fdExpected = pi.mem.kind == CudaKind::Vmm;
    c->tookHandle = true;
    if (h.magic != kHandleMagic || h.kind != (uint32_t)pi.mem.kind || h.size != pi.mem.size ||
        (m.fd >= 0) != fdExpected) {
      if (m.fd >= 0) close(m.fd);
      P2P_WARN(
          "p2p-nvlink: %s: the peer's message about its memory does not match its connect info (kind %u, %llu "
          "bytes, %s descriptor)",
          c->who, h.kind, (unsigned long long)h.size, m.fd >= 0 ? "with a" : "without");
      return ncclInternalError;
    }
    const ncclResult_t r = mapPeerFirst(c, m.fd);
    if (m.fd >= 0) close(m.fd);  // the import holds its own reference
    if (r != ncclSuccess) return r;
  }
  if (!c->sentVerdict) {
    const VerdictMsg v{kVerdictMagic, c->verdict};
    if (ncclResult_t r = sendPhase(c, kPhaseVerdict, &v, sizeof(v), -1, "whether it could map the peer's memory");
        r != ncclSuccess)
      return r;
    c->sentVerdict = true;
    if (c->verdict == kMapFailed) return ncclSystemError;  // the mapping said why
  }
  if (!c->tookVerdict) {
    FdMailbox::Message m;
    if (ncclResult_t r = takePhase(c, kPhaseVerdict, &m, "whether it could map this rank's memory"); r != ncclSuccess)
      return r;
    VerdictMsg v{};
    if (m.size == sizeof(v)) memcpy(&v, m.payload, sizeof(v));
    if (m.fd >= 0) close(m.fd);
    c->tookVerdict = true;
    if (v.magic != kVerdictMagic || v.verdict > kMapFailed) {
      P2P_WARN("p2p-nvlink: %s: the peer's answer is malformed", c->who);
      return ncclInternalError;
    }
    if (v.verdict == kMapFailed) {
      P2P_WARN("p2p-nvlink: %s: the peer could not map this rank's %s; see the peer's log for the call that failed",
               c->who, cudaKindName(c->local.handle.kind));
      return ncclRemoteError;
    }
    if (v.verdict == kNotMapped) {
      if (ncclResult_t r = switchToHost(c); r != ncclSuccess) return r;
      c->needSwitch = true;
    }
  }
  if (c->needSwitch && !c->sentSwitch) {
    if (ncclResult_t r =
            sendPhase(c, kPhaseSwitch, &c->local.handle, sizeof(c->local.handle), -1, "the name of its host memory");
        r != ncclSuccess)
      return r;
    c->sentSwitch = true;
  }
  if (!c->mappedPeer) {
    FdMailbox::Message m;
    if (ncclResult_t r = takePhase(c, kPhaseSwitch, &m, "the name of its host memory"); r != ncclSuccess) return r;
    if (m.fd >= 0) close(m.fd);
    CudaHandle h{};
    if (m.size == sizeof(h)) memcpy(&h, m.payload, sizeof(h));
    bool fits = h.kind == CudaKind::Shm && h.id == pi.mem.id && h.size >= kCtrlBytes && h.size <= ((uint64_t)1 << 40);
    for (int p = 0; p < PLEXUS_NUM_PROTOCOLS && fits; p++)
      fits = pi.buffSizes[p] == 0 || pi.buffOffset[p] + (uint64_t)pi.buffSizes[p] <= h.size;
    if (!fits) {
      P2P_WARN("p2p-nvlink: %s: the peer's host memory (kind %u, %llu bytes) does not match its connect info", c->who,
               (unsigned)h.kind, (unsigned long long)h.size);
      return ncclInternalError;
    }
    if (ncclResult_t r = cudaMemMap(c->dev, h, -1, c->who, false, &c->remote); r != ncclSuccess) return r;
    c->mappedPeer = true;
  }
  return ncclSuccess;
}

void fill(CudaConn* c, plexusConnInfo_v1_t* conn) {
  char* mine = (char*)c->local.dptr;
  char* theirs = (char*)c->remote.dptr;
  char* recvBase = c->isSend ? theirs : mine;
  char* sendBase = c->isSend ? mine : theirs;
  for (int p = 0; p < PLEXUS_NUM_PROTOCOLS; p++) {
    conn->buffs[p] = nullptr;
    if (c->buffSizes[p] <= 0) continue;
    const bool senderHolds = cudaHolds(true, c->readMode, p);
    const uint64_t offset = senderHolds == c->isSend ? c->offset[p] : c->peerInfo.buffOffset[p];
    conn->buffs[p] = (senderHolds ? sendBase : recvBase) + offset;
  }
  const bool sameSpace = c->sameProcess && c->direct && c->local.handle.kind == CudaKind::Device &&
                         c->remote.handle.kind == CudaKind::Device;
  conn->tail = &((RecvCtrl*)recvBase)->tail;
  conn->head = &((SendCtrl*)sendBase)->head;
  // Zero-copy on CUDA is a plain address or nothing (no host ops): without a shared space the record would only
  // cost a round trip per message.
  conn->ptrExchange = sameSpace ? &((SendCtrl*)sendBase)->exchange : nullptr;
  conn->connFifo = nullptr;
  conn->stepSize = c->buffSizes[PLEXUS_PROTO_SIMPLE] / PLEXUS_STEPS;
  conn->step = 0;
  conn->flags = sameSpace ? PLEXUS_CONN_P2P_SAME_SPACE : 0;
}

}  // namespace

ncclResult_t cudaSetup(bool isSend, const plexusTransportSetup_v1_t* setup, plexusConnectInfo_v1_t* info,
                       CudaConn** out) {
  auto* c = new (std::nothrow) CudaConn{};
  if (!c) return ncclSystemError;
  c->isSend = isSend;
  c->self = *setup->self;
  c->peer = *setup->peer;
  c->channel = setup->channelId;
  for (int p = 0; p < PLEXUS_NUM_PROTOCOLS; p++) c->buffSizes[p] = setup->buffSizes[p] > 0 ? setup->buffSizes[p] : 0;
  c->sameProcess = c->self.pidHash == c->peer.pidHash;
  c->readMode = cudaP2pRead();
  c->p2pDisabled = cudaP2pDisabled();
  describe(c);
  auto failed = [&](ncclResult_t r) {
    cudaFree(c);
    return r;
  };
  if (ncclResult_t r = cudaDeviceOpen(c->self.device, c->who, &c->dev); r != ncclSuccess) return failed(r);
  describe(c);
  ContextScope scope(c->dev.d, c->dev.ctx);
  if (scope.result() != pc::CUDA_SUCCESS) {
    P2P_WARN("p2p-nvlink: %s: %s; check that the GPU is usable (nvidia-smi)", c->who,
             pc::failureMessage(c->dev.d, "cuCtxSetCurrent", scope.result()).c_str());
    return failed(ncclUnhandledCudaError);
  }
  CudaPlace where = c->p2pDisabled ? CudaPlace::OtherProcessHost : CudaPlace::OtherProcess;
  if (c->sameProcess) {
    if (!c->p2pDisabled) {
      if (ncclResult_t r = cudaPeerAccessible(c->dev, c->self.device, c->peer.device, c->who, &c->direct);
          r != ncclSuccess)
        return failed(r);
    }
    where = c->direct ? CudaPlace::SameProcess : CudaPlace::SameProcessHost;
  } else {
    std::string why;
    c->box = FdMailbox::process(&why);
    if (!c->box) {
      P2P_WARN("p2p-nvlink: %s: cannot open this process's Unix socket for CUDA memory handles: %s", c->who,
               why.c_str());
      return failed(ncclSystemError);
    }
  }
  c->total = kCtrlBytes;
  for (int p = 0; p < PLEXUS_NUM_PROTOCOLS; p++) {
    if (!cudaHolds(isSend, c->readMode, p) || !c->buffSizes[p]) continue;
    c->offset[p] = c->total;
    c->total += roundPage((size_t)c->buffSizes[p]);
  }
  if (ncclResult_t r = allocLocal(c, where); r != ncclSuccess) return failed(r);
  CudaInfo ci{};
  ci.magic = kCudaInfoMagic;
  ci.version = kCudaInfoVersion;
  ci.role = isSend ? kCudaRoleSend : kCudaRoleRecv;
  ci.flags = c->readMode ? kCudaInfoRead : 0;
  ci.device = c->self.device;
  memcpy(ci.busId, c->dev.busId, sizeof(ci.busId));
  ci.mailbox = c->box ? c->box->id() : 0;
  ci.pidNs = pidNamespaceId();
  ci.mem = c->local.handle;
  for (int p = 0; p < PLEXUS_NUM_PROTOCOLS; p++) {
    if (!cudaHolds(isSend, c->readMode, p) || !c->buffSizes[p]) continue;
    ci.buffOffset[p] = c->offset[p];
    ci.buffSizes[p] = c->buffSizes[p];
  }
  cudaInfoEncode(ci, info);
  P2P_INFO("p2p-nvlink: %s: %s, %llu bytes%s", c->who, cudaKindName(c->local.handle.kind),
           (unsigned long long)c->local.handle.size, c->readMode ? ", P2P read mode" : "");
  *out = c;
  return ncclSuccess;
}

ncclResult_t cudaConnect(CudaConn* c, const plexusConnectInfo_v1_t* peerInfo, plexusConnInfo_v1_t* conn) {
  ContextScope scope(c->dev.d, c->dev.ctx);
  if (scope.result() != pc::CUDA_SUCCESS) {
    P2P_WARN("p2p-nvlink: %s: %s; check that the GPU is usable (nvidia-smi)", c->who,
             pc::failureMessage(c->dev.d, "cuCtxSetCurrent", scope.result()).c_str());
    return ncclUnhandledCudaError;
  }
  if (!c->havePeer) {
    std::string why;
    if (!cudaInfoDecode(*peerInfo, c->isSend, c->sameProcess, c->buffSizes, c->readMode, &c->peerInfo, &why)) {
      P2P_WARN("p2p-nvlink: %s: the peer's connect info is unusable: %s", c->who, why.c_str());
      return ncclInvalidUsage;
    }
    c->havePeer = true;
    c->deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(connectTimeout()));
  }
  if (c->sameProcess) {
    if (!c->mappedPeer) {
      if (ncclResult_t r = cudaMemMap(c->dev, c->peerInfo.mem, -1, c->who, false, &c->remote); r != ncclSuccess)
        return r;
      c->mappedPeer = true;
    }
    if (c->direct) {
      if (ncclResult_t r = cudaEnablePeerAccess(c->dev, c->peer.device, c->who); r != ncclSuccess) return r;
    }
  } else if (ncclResult_t r = progressOtherProcess(c); r != ncclSuccess) {
    return r;
  }
  fill(c, conn);
  P2P_INFO("p2p-nvlink: %s: connected; this side's memory is %s, the peer's %s%s", c->who,
           cudaKindName(c->local.handle.kind), cudaKindName(c->remote.handle.kind),
           (conn->flags & PLEXUS_CONN_P2P_SAME_SPACE) ? "; one address space" : "");
  return ncclSuccess;
}

void cudaConnected(CudaConn* c) { cudaMemUnlinkName(&c->local); }

void cudaFree(CudaConn* c) {
  if (!c) return;
  if (c->dev.d) {
    ContextScope scope(c->dev.d, c->dev.ctx);
    if (c->box && c->havePeer)
      for (unsigned phase : {kPhaseHandle, kPhaseVerdict, kPhaseSwitch})
        c->box->discard(mailboxTag(c->peerInfo.mem.id, phase));
    if (c->exportFd >= 0) close(c->exportFd);
    cudaMemUnmap(&c->remote);
    cudaMemFree(&c->local);
    cudaDeviceClose(&c->dev);
  }
  delete c;
}

}  // namespace p2p
